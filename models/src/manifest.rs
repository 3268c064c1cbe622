//! The bundle manifest, format 1 (docs/model-bundle.md): what the browser
//! runtime reads to fetch and lay out a model. It is a file format, so it is
//! `Serialize`; new fields get `#[serde(default)]`.

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
