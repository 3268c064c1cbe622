//! The bundle manifests: format 1 (encoders, docs/model-bundle.md) and
//! format 2 (llama decoders from GGUF files, [`DecoderManifest`]), and
//! [`ModelManifest`], either one as the store lists and serves it: what the
//! browser runtime reads to fetch and lay out a model. They are file
//! formats, so they are `Serialize`; new fields get `#[serde(default)]`.

use serde::{Deserialize, Serialize};

/// The manifest format this crate writes and reads.
pub const FORMAT: u32 = 1;

/// A bundle's manifest, `models/{name}.json` in the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Manifest {
    pub format: u32,
    pub name: String,
    /// `bert`: the only family imported so far.
    pub architecture: String,
    pub config: BertConfig,
    /// Longest input in tokens, `[CLS]` and `[SEP]` included; longer texts are truncated.
    pub max_seq_length: u32,
    pub pooling: Pooling,
    /// Whether embeddings are L2-normalised.
    pub normalize: bool,
    /// The model's `tokenizer.json`, unchanged.
    pub tokenizer: BlobRef,
    /// One little-endian f32 blob holding every tensor.
    pub weights: BlobRef,
    pub tensors: Vec<TensorEntry>,
    /// The same tensors with the weight products' matrices and the word
    /// embeddings quantised to 16 bits (docs/model-bundle.md), for clients
    /// that run `precision: 'int16'`. Absent from bundles imported before it
    /// existed: such clients quantise the f32 blob themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int16: Option<Int16Weights>,
}

/// The int16 weights blob and its tensors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Int16Weights {
    /// Little-endian: `u32` words of two signed 16-bit values, and `f32`.
    pub weights: BlobRef,
    pub tensors: Vec<TensorEntry>,
}

/// The model's dimensions, from its `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    /// `gelu`: the exact GELU, x·Φ(x) through erf.
    pub hidden_act: String,
}

/// How token vectors become one embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Pooling {
    /// The mean over the real (unmasked) tokens, `[CLS]` and `[SEP]` included.
    Mean,
    /// The `[CLS]` token's vector.
    Cls,
}

/// A blob of the bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BlobRef {
    /// Hex SHA-256 of the bytes; the blob's name in the store.
    pub sha256: String,
    pub bytes: u64,
    /// Where the server serves it: `/v1/models/{name}/blobs/{sha256}`.
    pub url: String,
}

/// One tensor in the weights blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TensorEntry {
    pub name: String,
    /// `f32`, or `u32` (words of two signed 16-bit values, in the int16
    /// blob), little-endian.
    pub dtype: String,
    /// Row-major.
    pub shape: Vec<usize>,
    /// Byte offset of the first element in the weights blob, a multiple of 64.
    pub offset: u64,
}

impl TensorEntry {
    /// Bytes of the tensor's data.
    pub fn bytes(&self) -> u64 {
        self.shape.iter().product::<usize>() as u64 * 4
    }
}

impl Manifest {
    /// The blob of this manifest named `sha256`, if it lists one.
    pub fn blob(&self, sha256: &str) -> Option<&BlobRef> {
        [Some(&self.weights), Some(&self.tokenizer), self.int16.as_ref().map(|i| &i.weights)]
            .into_iter()
            .flatten()
            .find(|b| b.sha256 == sha256)
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// The URL of blob `sha256` of model `name`.
pub(crate) fn blob_url(name: &str, sha256: &str) -> String {
    format!("/v1/models/{name}/blobs/{sha256}")
}

/// The manifest format of decoder (text-generation) bundles.
pub const DECODER_FORMAT: u32 = 2;

/// A decoder bundle's manifest (format 2, `architecture: "llama"`,
/// `task: "text-generation"`), `models/{name}.json` in the store: a
/// language model imported from a GGUF file. The tensors keep the file's
/// values exactly (no re-quantisation), laid out for webtune's ops; see
/// [`DecoderTensor`] for each format's parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecoderManifest {
    /// 2.
    pub format: u32,
    pub name: String,
    /// `llama`: the only decoder family imported so far.
    pub architecture: String,
    /// `text-generation`.
    pub task: String,
    /// The file the bundle was imported from.
    pub source: SourceFile,
    pub config: DecoderConfig,
    /// A Hugging Face `tokenizer.json` built from the GGUF's tokenizer metadata.
    pub tokenizer: BlobRef,
    /// The GGUF's `tokenizer.chat_template` (Jinja), verbatim; null when the file has none.
    pub chat_template: Option<String>,
    pub special: SpecialTokens,
    /// One little-endian blob holding every part of every tensor.
    pub weights: BlobRef,
    /// In blob order: `token_embd`, `output_norm`, `output` (untied only),
    /// then per block `attn_norm`, `attn_qkv`, `attn_output`, `ffn_norm`,
    /// `ffn_gate_up`, `ffn_down` (names `blk.{i}.…`).
    pub tensors: Vec<DecoderTensor>,
}

/// The GGUF file a decoder bundle came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SourceFile {
    /// Its file name (inside the wheel, zip or folder it came in, if any).
    pub file: String,
    /// Hex SHA-256 of its bytes.
    pub sha256: String,
}

/// A llama decoder's dimensions, from the GGUF's `llama.*` metadata.
/// Floats are the file's f32 values, written as the shortest decimal that
/// reads back as the same f32 (`1e-5`, not `9.999999747378752e-6`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecoderConfig {
    /// V: the length of `tokenizer.ggml.tokens`.
    pub vocab_size: usize,
    /// H (`llama.embedding_length`).
    pub hidden_size: usize,
    /// `llama.block_count`.
    pub num_layers: usize,
    /// Query heads (`llama.attention.head_count`).
    pub num_heads: usize,
    /// Key/value heads (`llama.attention.head_count_kv`; grouped-query attention when fewer).
    pub num_kv_heads: usize,
    /// hidden_size / num_heads.
    pub head_dim: usize,
    /// F (`llama.feed_forward_length`).
    pub ffn_size: usize,
    /// RoPE base (`llama.rope.freq_base`, 10000 when absent); llama.cpp's
    /// "NORM" RoPE: adjacent pairs (`x[2i]`, `x[2i+1]`) rotated by pos·θ^(−2i/head_dim).
    pub rope_theta: f64,
    /// RMSNorm epsilon (`llama.attention.layer_norm_rms_epsilon`).
    pub rms_eps: f64,
    /// Longest context the model was trained for (`llama.context_length`).
    pub context_length: usize,
    /// Whether the output head is `token_embd` (the file has no `output.weight`).
    pub tied_embeddings: bool,
}

/// Special token ids of a decoder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpecialTokens {
    /// The token put before every prompt; null when none is (`add_bos` false).
    pub bos_id: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`, if the file gives one.
    pub eos_id: Option<u32>,
    /// Every token that ends generation, ascending (llama.cpp's rule: eos,
    /// eot, eom, the fill-in-the-middle pad/repo/separator tokens, and the
    /// tokens named like an end of turn, e.g. `<|im_end|>`, `<|endoftext|>`).
    pub eog_ids: Vec<u32>,
    /// Whether a prompt starts with `bos_id`.
    pub add_bos: bool,
}

/// How a decoder tensor's values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TensorFormat {
    /// f32 (F32 tensors, and F16 ones widened, which is exact). A matrix's
    /// `w` is stored TRANSPOSED, f32 `[K][N]` (the B of `matmul`); a vector is f32 `[len]`.
    F32,
    /// 4-bit, value = d·(q − 8): `w` u32 words `[N][K/8]`, word i of row n
    /// holding k = 8i+s in bits 4s..4s+3; `d` f32 `[N][K/32]` (the W and S of `matmul_q4`).
    Q4_0,
    /// 4-bit with a minimum, value = d·q + m: `w` as q4_0; `d` and `m` f32 `[N][K/32]`.
    Q4_1,
    /// 8-bit, value = d·q: `w` the signed bytes `[N][K]` (u32 words `[N][K/4]`,
    /// byte j of word i is k = 4i+j); `d` f32 `[N][K/32]`.
    Q8_0,
}

impl TensorFormat {
    /// The name in the manifest: `f32`, `q4_0`, `q4_1`, `q8_0`.
    pub fn as_str(self) -> &'static str {
        match self {
            TensorFormat::F32 => "f32",
            TensorFormat::Q4_0 => "q4_0",
            TensorFormat::Q4_1 => "q4_1",
            TensorFormat::Q8_0 => "q8_0",
        }
    }
}

/// One tensor of a decoder's weights blob. `shape` is `[N, K]` = `[out, in]`
/// for a matrix (row-major as in the GGUF), `[len]` for a vector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecoderTensor {
    /// The GGUF name without `.weight`; `blk.{i}.attn_qkv` and
    /// `blk.{i}.ffn_gate_up` are the fused rows of Q, K, V and of gate, up.
    pub name: String,
    pub format: TensorFormat,
    pub shape: Vec<usize>,
    pub parts: Parts,
}

/// Where a tensor's parts lie in the weights blob (see [`TensorFormat`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Parts {
    /// The values (f32) or the quantised weights (q4_0, q4_1, q8_0).
    pub w: Part,
    /// Block scales, f32 (quantised formats only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d: Option<Part>,
    /// Block minimums, f32 (q4_1 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<Part>,
}

/// A byte range of the weights blob; `offset` is a multiple of 64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Part {
    pub offset: u64,
    pub bytes: u64,
}

impl DecoderTensor {
    /// Whether the tensor is a matrix (`[N, K]`) rather than a vector.
    pub fn is_matrix(&self) -> bool {
        self.shape.len() == 2
    }
}

impl DecoderManifest {
    /// The blob of this manifest named `sha256`, if it lists one.
    pub fn blob(&self, sha256: &str) -> Option<&BlobRef> {
        [&self.weights, &self.tokenizer].into_iter().find(|b| b.sha256 == sha256)
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&DecoderTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// A manifest of either kind, as the store lists and serves them: the
/// encoders of format 1 and the decoders of format 2 (told apart by
/// `format`). Serialised, it is the manifest itself (no tag).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ModelManifest {
    Encoder(Manifest),
    Decoder(DecoderManifest),
}

impl ModelManifest {
    /// Reads a manifest file of either format.
    pub fn from_json(bytes: &[u8]) -> Result<ModelManifest, String> {
        #[derive(Deserialize)]
        struct Head {
            format: u32,
        }
        let head: Head = serde_json::from_slice(bytes).map_err(|e| format!("not a bundle manifest: {e}"))?;
        match head.format {
            FORMAT => serde_json::from_slice(bytes).map(ModelManifest::Encoder).map_err(|e| format!("not a format-1 manifest: {e}")),
            DECODER_FORMAT => {
                serde_json::from_slice(bytes).map(ModelManifest::Decoder).map_err(|e| format!("not a format-2 manifest: {e}"))
            }
            f => Err(format!("manifest format {f}; this build reads formats {FORMAT} (encoders) and {DECODER_FORMAT} (decoders)")),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            ModelManifest::Encoder(m) => &m.name,
            ModelManifest::Decoder(m) => &m.name,
        }
    }

    pub fn format(&self) -> u32 {
        match self {
            ModelManifest::Encoder(m) => m.format,
            ModelManifest::Decoder(m) => m.format,
        }
    }

    /// `bert`, `llama`.
    pub fn architecture(&self) -> &str {
        match self {
            ModelManifest::Encoder(m) => &m.architecture,
            ModelManifest::Decoder(m) => &m.architecture,
        }
    }

    /// What the model does, in Hugging Face's pipeline words:
    /// `feature-extraction` (an encoder: sentence embeddings) or `text-generation`.
    pub fn task(&self) -> &str {
        match self {
            ModelManifest::Encoder(_) => "feature-extraction",
            ModelManifest::Decoder(m) => &m.task,
        }
    }

    pub fn hidden_size(&self) -> usize {
        match self {
            ModelManifest::Encoder(m) => m.config.hidden_size,
            ModelManifest::Decoder(m) => m.config.hidden_size,
        }
    }

    pub fn layers(&self) -> usize {
        match self {
            ModelManifest::Encoder(m) => m.config.num_hidden_layers,
            ModelManifest::Decoder(m) => m.config.num_layers,
        }
    }

    /// Longest input in tokens: an encoder's `max_seq_length`, a decoder's context length.
    pub fn max_seq_length(&self) -> u32 {
        match self {
            ModelManifest::Encoder(m) => m.max_seq_length,
            ModelManifest::Decoder(m) => u32::try_from(m.config.context_length).unwrap_or(u32::MAX),
        }
    }

    pub fn tokenizer(&self) -> &BlobRef {
        match self {
            ModelManifest::Encoder(m) => &m.tokenizer,
            ModelManifest::Decoder(m) => &m.tokenizer,
        }
    }

    pub fn weights(&self) -> &BlobRef {
        match self {
            ModelManifest::Encoder(m) => &m.weights,
            ModelManifest::Decoder(m) => &m.weights,
        }
    }

    /// The blob of this manifest named `sha256`, if it lists one.
    pub fn blob(&self, sha256: &str) -> Option<&BlobRef> {
        match self {
            ModelManifest::Encoder(m) => m.blob(sha256),
            ModelManifest::Decoder(m) => m.blob(sha256),
        }
    }

    /// The encoder manifest, if this is one.
    pub fn encoder(&self) -> Option<&Manifest> {
        match self {
            ModelManifest::Encoder(m) => Some(m),
            ModelManifest::Decoder(_) => None,
        }
    }

    /// The decoder manifest, if this is one.
    pub fn decoder(&self) -> Option<&DecoderManifest> {
        match self {
            ModelManifest::Decoder(m) => Some(m),
            ModelManifest::Encoder(_) => None,
        }
    }
}
