//! llama-architecture decoders from GGUF files: what the metadata implies,
//! the checks, and the bundle layout (manifest format 2; the tensor formats
//! are [`TensorFormat`]'s).
//!
//! The GGUF names, with `i` from 0: `token_embd.weight` (ne `[H, V]`),
//! `output_norm.weight` (`[H]`), `output.weight` (`[H, V]`, absent when the
//! head is tied to the embeddings), and per block `blk.{i}.attn_norm`,
//! `attn_q` (`[H, nh·hd]`), `attn_k` and `attn_v` (`[H, nkv·hd]`),
//! `attn_output` (`[nh·hd, H]`), `ffn_norm`, `ffn_gate` and `ffn_up`
//! (`[H, F]`), `ffn_down` (`[F, H]`), each `.weight`. ne is ggml's order,
//! fastest first: ne `[K, N]` is the row-major matrix `[N][K]` = `[out][in]`.
//!
//! Nothing is re-quantised: a Q4_1 weight keeps its d, m and q, a Q8_0 one
//! its scale and bytes; F16 is widened to f32 (exact); 4-bit values are
//! only moved into the word order of webtune's ops. Q, K and V (and gate,
//! up) are fused by concatenating their rows, which is exact.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value as Json, json};

use crate::error::ModelError;
use crate::gguf::{self, Array, GgmlType, Gguf, TensorInfo, Value};
use crate::manifest::{DecoderConfig, DecoderTensor, Part, Parts, SourceFile, SpecialTokens, TensorFormat};

/// Alignment of every part in the weights blob, bytes.
pub(crate) const ALIGN: usize = 64;
/// Largest dimension or count accepted from the metadata.
const MAX_DIM: i128 = 1 << 24;

/// The tensor types webtune imports, as a message names them.
const TYPES: &str = "F32, F16, Q4_0, Q4_1 and Q8_0";

/// A checked decoder, laid out, before it is named and stored.
#[derive(Debug)]
pub(crate) struct DecoderBundle {
    pub source: SourceFile,
    pub config: DecoderConfig,
    pub tokenizer: Vec<u8>,
    pub chat_template: Option<String>,
    pub special: SpecialTokens,
    pub tensors: Vec<DecoderTensor>,
    pub weights: Vec<u8>,
}

/// Every tensor of a decoder bundle of config `c`: (name, shape), in blob order.
pub fn decoder_layout(c: &DecoderConfig) -> Vec<(String, Vec<usize>)> {
    let (h, f, hd) = (c.hidden_size, c.ffn_size, c.head_dim);
    let mut v = vec![("token_embd".to_string(), vec![c.vocab_size, h]), ("output_norm".to_string(), vec![h])];
    if !c.tied_embeddings {
        v.push(("output".to_string(), vec![c.vocab_size, h]));
    }
    for i in 0..c.num_layers {
        v.push((format!("blk.{i}.attn_norm"), vec![h]));
        v.push((format!("blk.{i}.attn_qkv"), vec![(c.num_heads + 2 * c.num_kv_heads) * hd, h]));
        v.push((format!("blk.{i}.attn_output"), vec![h, c.num_heads * hd]));
        v.push((format!("blk.{i}.ffn_norm"), vec![h]));
        v.push((format!("blk.{i}.ffn_gate_up"), vec![2 * f, h]));
        v.push((format!("blk.{i}.ffn_down"), vec![h, f]));
    }
    v
}

/// The bundle format of a GGUF tensor type, if webtune imports it.
fn format_of(ty: GgmlType) -> Option<TensorFormat> {
    match ty {
        GgmlType::F32 | GgmlType::F16 => Some(TensorFormat::F32),
        GgmlType::Q4_0 => Some(TensorFormat::Q4_0),
        GgmlType::Q4_1 => Some(TensorFormat::Q4_1),
        GgmlType::Q8_0 => Some(TensorFormat::Q8_0),
        _ => None,
    }
}

/// Reads, checks and lays out the GGUF file `bytes` (called `file` in messages).
pub(crate) fn build(file: &str, bytes: &[u8], progress: &mut dyn FnMut(&str)) -> Result<DecoderBundle, ModelError> {
    let bad = |why: String| ModelError::Gguf { file: file.to_string(), why };
    progress(&format!("checking {file} ({:.1} MB)", bytes.len() as f64 / 1e6));
    let g = gguf::parse(bytes).map_err(|e| bad(e.0))?;
    let config = config(&g).map_err(bad)?;
    let tok = tokenizer_metadata(&g, config.vocab_size).map_err(bad)?;
    let plan = check_tensors(&g, &config).map_err(bad)?;
    progress(&format!("laying out {} tensors ({} in the file)", plan.len(), g.tensors.len()));
    let (tensors, weights) = lay_out(&g, bytes, &plan).map_err(bad)?;
    progress(&format!("building tokenizer.json ({} tokens, {} merges)", tok.tokens.len(), tok.merges.len()));
    let tokenizer = tokenizer_json(&tok);
    use sha2::Digest;
    let sha256 = hex::encode(sha2::Sha256::digest(bytes));
    Ok(DecoderBundle {
        source: SourceFile { file: file.to_string(), sha256 },
        config,
        tokenizer,
        chat_template: tok.chat_template,
        special: tok.special,
        tensors,
        weights,
    })
}

/// Checks the GGUF file `bytes` as an import would, writing nothing: the
/// fuzz target's entry, and a dry run.
pub fn check_gguf(file: &str, bytes: &[u8]) -> Result<(DecoderConfig, usize), ModelError> {
    let b = build(file, bytes, &mut |_| {})?;
    Ok((b.config, b.tensors.len()))
}

fn meta_int(g: &Gguf, key: &str) -> Result<Option<usize>, String> {
    match g.get(key) {
        None => Ok(None),
        Some(v) => match v.as_i128() {
            Some(n) if (1..=MAX_DIM).contains(&n) => Ok(Some(n as usize)),
            Some(n) => Err(format!("{key} is {n}; webtune expects 1 to {MAX_DIM}")),
            None => Err(format!("{key} is a {}, not an integer", v.type_name())),
        },
    }
}

fn required_int(g: &Gguf, key: &str) -> Result<usize, String> {
    meta_int(g, key)?.ok_or_else(|| format!("metadata {key} is missing (a llama file must give it)"))
}

/// A float as the file gives it: an f32 becomes the shortest decimal that
/// reads back as the same f32.
fn meta_float(g: &Gguf, key: &str) -> Result<Option<f64>, String> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::F32(x)) => Ok(Some(format!("{x}").parse::<f64>().unwrap_or(f64::from(*x)))),
        Some(Value::F64(x)) => Ok(Some(*x)),
        Some(v) => Err(format!("{key} is a {}, not a float", v.type_name())),
    }
}

fn meta_str<'a>(g: &'a Gguf, key: &str) -> Result<Option<&'a str>, String> {
    match g.get(key) {
        None => Ok(None),
        Some(v) => v.as_str().map(Some).ok_or_else(|| format!("{key} is a {}, not a string", v.type_name())),
    }
}

/// The architecture and the hyperparameters, checked.
fn config(g: &Gguf) -> Result<DecoderConfig, String> {
    match meta_str(g, "general.architecture")? {
        Some("llama") => {}
        Some(a) => return Err(format!("architecture `{a}` is not supported; webtune imports GGUF files of the llama architecture")),
        None => return Err("metadata general.architecture is missing; webtune imports GGUF files of the llama architecture".into()),
    }
    let h = required_int(g, "llama.embedding_length")?;
    let layers = required_int(g, "llama.block_count")?;
    let f = required_int(g, "llama.feed_forward_length")?;
    let nh = required_int(g, "llama.attention.head_count")?;
    let nkv = meta_int(g, "llama.attention.head_count_kv")?.unwrap_or(nh);
    let context_length = required_int(g, "llama.context_length")?;
    if !h.is_multiple_of(nh) {
        return Err(format!("llama.embedding_length {h} is not a multiple of llama.attention.head_count {nh}"));
    }
    let hd = h / nh;
    if !nh.is_multiple_of(nkv) {
        return Err(format!("llama.attention.head_count {nh} is not a multiple of llama.attention.head_count_kv {nkv}"));
    }
    for key in ["llama.rope.dimension_count", "llama.attention.key_length", "llama.attention.value_length"] {
        if let Some(n) = meta_int(g, key)?
            && n != hd
        {
            return Err(format!(
                "{key} is {n}, but the head size is {hd} (embedding_length {h} / head_count {nh}); webtune runs RoPE and attention over whole heads"
            ));
        }
    }
    if let Some(n) = g.get("llama.expert_count").and_then(Value::as_i128)
        && n > 0
    {
        return Err(format!("llama.expert_count is {n}: mixture-of-experts models are not supported"));
    }
    if let Some(t) = meta_str(g, "llama.rope.scaling.type")?
        && t != "none"
    {
        return Err(format!("llama.rope.scaling.type is `{t}`: scaled RoPE is not supported"));
    }
    if let Some(s) = meta_float(g, "llama.rope.scale_linear")?
        && s != 1.0
    {
        return Err(format!("llama.rope.scale_linear is {s}: scaled RoPE is not supported"));
    }
    let rope_theta = meta_float(g, "llama.rope.freq_base")?.unwrap_or(10000.0);
    if !(rope_theta.is_finite() && rope_theta > 1.0) {
        return Err(format!("llama.rope.freq_base is {rope_theta}; it must be a finite number above 1"));
    }
    let rms_eps = meta_float(g, "llama.attention.layer_norm_rms_epsilon")?
        .ok_or("metadata llama.attention.layer_norm_rms_epsilon is missing (a llama file must give it)")?;
    if !(rms_eps > 0.0 && rms_eps < 1.0) {
        return Err(format!("llama.attention.layer_norm_rms_epsilon is {rms_eps}; it must be in (0, 1)"));
    }
    let vocab_size = match g.get("tokenizer.ggml.tokens").and_then(Value::as_array) {
        Some(a) => a.len(),
        None => return Err("metadata tokenizer.ggml.tokens (an array of strings) is missing: webtune needs the file's tokenizer".into()),
    };
    if !(1..=MAX_DIM as usize).contains(&vocab_size) {
        return Err(format!("tokenizer.ggml.tokens has {vocab_size} tokens; webtune expects 1 to {MAX_DIM}"));
    }
    if let Some(n) = meta_int(g, "llama.vocab_size")?
        && n != vocab_size
    {
        return Err(format!("llama.vocab_size is {n}, but tokenizer.ggml.tokens has {vocab_size} tokens"));
    }
    let tied_embeddings = g.tensor("output.weight").is_none();
    Ok(DecoderConfig {
        vocab_size,
        hidden_size: h,
        num_layers: layers,
        num_heads: nh,
        num_kv_heads: nkv,
        head_dim: hd,
        ffn_size: f,
        rope_theta,
        rms_eps,
        context_length,
        tied_embeddings,
    })
}

/// One bundle tensor: its name, format, shape, and the GGUF tensors whose
/// rows it concatenates.
struct Planned<'a> {
    name: String,
    format: TensorFormat,
    shape: Vec<usize>,
    sources: Vec<&'a TensorInfo>,
}

/// Every tensor present, of a supported type, with the shape the config
/// implies; fused tensors of one format; no tensor webtune would ignore.
fn check_tensors<'a>(g: &'a Gguf, c: &DecoderConfig) -> Result<Vec<Planned<'a>>, String> {
    let (h, f, hd, v) = (c.hidden_size, c.ffn_size, c.head_dim, c.vocab_size);
    let (q, kv) = (c.num_heads * hd, c.num_kv_heads * hd);
    // Nine tensors a block: a count the file cannot hold is refused before
    // anything is listed for it (memory stays bounded by the file).
    if c.num_layers.saturating_mul(9) > g.tensors.len() {
        return Err(format!(
            "llama.block_count {} implies {} block tensors, but the file has {} tensors in all",
            c.num_layers,
            c.num_layers.saturating_mul(9),
            g.tensors.len()
        ));
    }
    // GGUF name → (ne, why).
    let mut expected: Vec<(String, Vec<usize>, String)> = vec![
        ("token_embd.weight".into(), vec![h, v], format!("[embedding_length {h}, vocabulary {v}]")),
        ("output_norm.weight".into(), vec![h], format!("[embedding_length {h}]")),
    ];
    if !c.tied_embeddings {
        expected.push(("output.weight".into(), vec![h, v], format!("[embedding_length {h}, vocabulary {v}]")));
    }
    for i in 0..c.num_layers {
        let p = format!("blk.{i}.");
        let hh = format!("[embedding_length {h}]");
        for (n, ne, why) in [
            ("attn_norm", vec![h], hh.clone()),
            ("attn_q", vec![h, q], format!("[embedding_length {h}, head_count × head size = {q}]")),
            ("attn_k", vec![h, kv], format!("[embedding_length {h}, head_count_kv × head size = {kv}]")),
            ("attn_v", vec![h, kv], format!("[embedding_length {h}, head_count_kv × head size = {kv}]")),
            ("attn_output", vec![q, h], format!("[head_count × head size = {q}, embedding_length {h}]")),
            ("ffn_norm", vec![h], hh.clone()),
            ("ffn_gate", vec![h, f], format!("[embedding_length {h}, feed_forward_length {f}]")),
            ("ffn_up", vec![h, f], format!("[embedding_length {h}, feed_forward_length {f}]")),
            ("ffn_down", vec![f, h], format!("[feed_forward_length {f}, embedding_length {h}]")),
        ] {
            expected.push((format!("{p}{n}.weight"), ne, why));
        }
    }
    let mut found: HashMap<&str, &TensorInfo> = HashMap::new();
    for (name, ne, why) in &expected {
        let t = g.tensor(name).ok_or_else(|| format!("tensor {name} is missing (llama.block_count {} implies it)", c.num_layers))?;
        if format_of(t.ty).is_none() {
            return Err(format!("tensor {name} has type {}: webtune imports {TYPES}", t.ty));
        }
        if ne.len() == 1 && !matches!(t.ty, GgmlType::F32 | GgmlType::F16) {
            return Err(format!("tensor {name} has type {}: webtune imports norm weights as F32 or F16", t.ty));
        }
        // Trailing dimensions of 1 beyond the expected rank are allowed.
        let dims: Vec<u64> = t.dims.iter().enumerate().filter(|&(i, &d)| i < ne.len() || d != 1).map(|(_, &d)| d).collect();
        if dims.len() != ne.len() || dims.iter().zip(ne).any(|(&a, &b)| a != b as u64) {
            return Err(format!("tensor {name} has ne {:?}, expected {ne:?} = {why}", t.dims));
        }
        found.insert(name.as_str(), t);
    }
    if let Some(t) = g.tensors.iter().find(|t| !found.contains_key(t.name.as_str())) {
        return Err(if t.name == "rope_freqs.weight" {
            "tensor rope_freqs.weight (scaled RoPE frequencies, as in Llama 3.1) is not supported: webtune runs plain RoPE".to_string()
        } else {
            format!(
                "tensor {} is not one webtune runs (a llama file holds token_embd, output_norm, output and blk.N.{{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}}, each .weight, for N below llama.block_count {})",
                t.name, c.num_layers
            )
        });
    }
    let get = |n: &str| found[n];
    let single = |gguf: &str, name: &str, shape: Vec<usize>| -> Planned<'a> {
        let t = found[gguf];
        Planned { name: name.to_string(), format: format_of(t.ty).unwrap_or(TensorFormat::F32), shape, sources: vec![t] }
    };
    let fused = |name: String, shape: Vec<usize>, parts: Vec<&'a TensorInfo>, what: &str| -> Result<Planned<'a>, String> {
        let formats: Vec<Option<TensorFormat>> = parts.iter().map(|t| format_of(t.ty)).collect();
        if formats.iter().any(|x| *x != formats[0]) {
            let listed: Vec<String> = parts.iter().map(|t| format!("{} ({})", t.name, t.ty)).collect();
            return Err(format!(
                "tensors {} have different formats; webtune fuses {what} into one product, which needs one format (F16 and F32 count as one)",
                listed.join(", ")
            ));
        }
        Ok(Planned { name, format: formats[0].unwrap_or(TensorFormat::F32), shape, sources: parts })
    };
    let mut plan = vec![single("token_embd.weight", "token_embd", vec![v, h]), single("output_norm.weight", "output_norm", vec![h])];
    if !c.tied_embeddings {
        plan.push(single("output.weight", "output", vec![v, h]));
    }
    for i in 0..c.num_layers {
        let n = |s: &str| format!("blk.{i}.{s}.weight");
        plan.push(single(&n("attn_norm"), &format!("blk.{i}.attn_norm"), vec![h]));
        let qkv = vec![get(&n("attn_q")), get(&n("attn_k")), get(&n("attn_v"))];
        plan.push(fused(format!("blk.{i}.attn_qkv"), vec![q + 2 * kv, h], qkv, "Q, K and V")?);
        plan.push(single(&n("attn_output"), &format!("blk.{i}.attn_output"), vec![h, q]));
        plan.push(single(&n("ffn_norm"), &format!("blk.{i}.ffn_norm"), vec![h]));
        let gate_up = vec![get(&n("ffn_gate")), get(&n("ffn_up"))];
        plan.push(fused(format!("blk.{i}.ffn_gate_up"), vec![2 * f, h], gate_up, "gate and up")?);
        plan.push(single(&n("ffn_down"), &format!("blk.{i}.ffn_down"), vec![h, f]));
    }
    Ok(plan)
}

/// The weights blob under construction: parts at 64-byte offsets.
struct Blob(Vec<u8>);

impl Blob {
    fn part(&mut self, f: impl FnOnce(&mut Vec<u8>)) -> Part {
        self.0.resize(self.0.len().next_multiple_of(ALIGN), 0);
        let offset = self.0.len();
        f(&mut self.0);
        Part { offset: offset as u64, bytes: (self.0.len() - offset) as u64 }
    }
}

fn f16_at(b: &[u8]) -> f32 {
    half::f16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// Lays out every planned tensor in one blob.
fn lay_out(g: &Gguf, bytes: &[u8], plan: &[Planned]) -> Result<(Vec<DecoderTensor>, Vec<u8>), String> {
    let total: u64 = plan.iter().flat_map(|p| &p.sources).map(|t| t.bytes).sum();
    let mut blob = Blob(Vec::with_capacity(usize::try_from(total.saturating_mul(9) / 8).unwrap_or(0)));
    let mut out = Vec::with_capacity(plan.len());
    for p in plan {
        let data: Vec<&[u8]> = p.sources.iter().map(|t| g.data(bytes, t)).collect::<Result<_, _>>().map_err(|e| e.0)?;
        let parts = match p.format {
            TensorFormat::F32 => {
                let mut values = Vec::with_capacity(p.shape.iter().product());
                for (t, d) in p.sources.iter().zip(&data) {
                    values.extend(gguf::dequantize(t.ty, d).ok_or_else(|| format!("tensor {} does not dequantise", t.name))?);
                }
                let w = blob.part(|b| {
                    if let [n, k] = p.shape[..] {
                        // Transposed: [K][N].
                        b.reserve(n * k * 4);
                        for kk in 0..k {
                            for nn in 0..n {
                                b.extend(values[nn * k + kk].to_le_bytes());
                            }
                        }
                    } else {
                        b.extend(values.iter().flat_map(|x| x.to_le_bytes()));
                    }
                });
                Parts { w, d: None, m: None }
            }
            TensorFormat::Q4_0 | TensorFormat::Q4_1 => {
                let (size, qs_at) = if p.format == TensorFormat::Q4_1 { (20, 4) } else { (18, 2) };
                let blocks = || data.iter().flat_map(|d| d.chunks_exact(size));
                let w = blob.part(|b| {
                    for blk in blocks() {
                        let qs = &blk[qs_at..qs_at + 16];
                        let q = |t: usize| u32::from(if t < 16 { qs[t] & 15 } else { qs[t - 16] >> 4 });
                        for word in 0..4 {
                            let w = (0..8).fold(0u32, |w, s| w | (q(8 * word + s) << (4 * s)));
                            b.extend(w.to_le_bytes());
                        }
                    }
                });
                let d = blob.part(|b| b.extend(blocks().flat_map(|blk| f16_at(&blk[0..2]).to_le_bytes())));
                let m = (p.format == TensorFormat::Q4_1)
                    .then(|| blob.part(|b| b.extend(blocks().flat_map(|blk| f16_at(&blk[2..4]).to_le_bytes()))));
                Parts { w, d: Some(d), m }
            }
            TensorFormat::Q8_0 => {
                let blocks = || data.iter().flat_map(|d| d.chunks_exact(34));
                let w = blob.part(|b| b.extend(blocks().flat_map(|blk| &blk[2..34])));
                let d = blob.part(|b| b.extend(blocks().flat_map(|blk| f16_at(&blk[0..2]).to_le_bytes())));
                Parts { w, d: Some(d), m: None }
            }
        };
        out.push(DecoderTensor { name: p.name.clone(), format: p.format, shape: p.shape.clone(), parts });
    }
    Ok((out, blob.0))
}

/// The values of tensor `t` from a decoder weights blob, dequantised to f32
/// in logical row-major order (`[N][K]` for a matrix, whatever its storage),
/// or why they cannot be read (a part outside the blob or of the wrong size).
pub fn read_decoder_tensor(weights: &[u8], t: &DecoderTensor) -> Result<Vec<f32>, String> {
    let part = |p: Option<&Part>, what: &str, bytes: usize| -> Result<&[u8], String> {
        let p = p.ok_or_else(|| format!("tensor {} ({}) has no part {what}", t.name, t.format.as_str()))?;
        let s = usize::try_from(p.offset).map_err(|_| format!("tensor {}: part {what} is out of range", t.name))?;
        if p.bytes != bytes as u64 {
            return Err(format!("tensor {}: part {what} is {} bytes, its shape {:?} needs {bytes}", t.name, p.bytes, t.shape));
        }
        s.checked_add(bytes)
            .and_then(|e| weights.get(s..e))
            .ok_or_else(|| format!("tensor {}: part {what} lies outside the {}-byte blob", t.name, weights.len()))
    };
    let f32s = |b: &[u8]| -> Vec<f32> { b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect() };
    let len: usize =
        t.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| format!("tensor {}: shape overflows", t.name))?;
    let (n, k) = match t.shape[..] {
        [n, k] => (n, k),
        [n] => (1, n),
        _ => return Err(format!("tensor {} has shape {:?}: a matrix or a vector expected", t.name, t.shape)),
    };
    if t.format != TensorFormat::F32 && !k.is_multiple_of(32) {
        return Err(format!("tensor {} ({}) has rows of {k}, not a multiple of 32", t.name, t.format.as_str()));
    }
    let blocks = len / 32;
    Ok(match t.format {
        TensorFormat::F32 => {
            let w = f32s(part(Some(&t.parts.w), "w", len * 4)?);
            if t.shape.len() == 2 { (0..n * k).map(|i| w[(i % k) * n + i / k]).collect() } else { w }
        }
        TensorFormat::Q4_0 | TensorFormat::Q4_1 => {
            let w = part(Some(&t.parts.w), "w", len / 2)?;
            let d = f32s(part(t.parts.d.as_ref(), "d", blocks * 4)?);
            let m = if t.format == TensorFormat::Q4_1 { Some(f32s(part(t.parts.m.as_ref(), "m", blocks * 4)?)) } else { None };
            (0..len)
                .map(|i| {
                    let word = u32::from_le_bytes([w[i / 8 * 4], w[i / 8 * 4 + 1], w[i / 8 * 4 + 2], w[i / 8 * 4 + 3]]);
                    let q = ((word >> (4 * (i % 8))) & 15) as f32;
                    match &m {
                        Some(m) => d[i / 32] * q + m[i / 32],
                        None => d[i / 32] * (q - 8.0),
                    }
                })
                .collect()
        }
        TensorFormat::Q8_0 => {
            let w = part(Some(&t.parts.w), "w", len)?;
            let d = f32s(part(t.parts.d.as_ref(), "d", blocks * 4)?);
            (0..len).map(|i| d[i / 32] * f32::from(w[i] as i8)).collect()
        }
    })
}

/// The tokenizer as the metadata gives it, checked.
struct TokenizerMeta {
    pre: String,
    tokens: Vec<String>,
    types: Option<Vec<i128>>,
    merges: Vec<String>,
    chat_template: Option<String>,
    special: SpecialTokens,
}

/// Token texts llama.cpp treats as ending generation (its `special_eog_ids`
/// rule, `llama-vocab.cpp`), and the fill-in-the-middle pad, repository and
/// file-separator tokens, which it adds to them.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<｜end▁of▁sentence｜>",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<|return|>",
    "<|call|>",
    // FIM pad
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    // FIM repository
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    // FIM file separator
    "<|file_sep|>",
];

fn tokenizer_metadata(g: &Gguf, vocab: usize) -> Result<TokenizerMeta, String> {
    match meta_str(g, "tokenizer.ggml.model")? {
        Some("gpt2") => {}
        Some(m) => {
            return Err(format!(
                "tokenizer.ggml.model is `{m}`; webtune imports byte-level BPE tokenizers (`gpt2`), not SentencePiece (`llama`) or others"
            ));
        }
        None => return Err("metadata tokenizer.ggml.model is missing: webtune needs the file's tokenizer".into()),
    }
    let pre = meta_str(g, "tokenizer.ggml.pre")?.unwrap_or("default").to_string();
    if !matches!(pre.as_str(), "smollm" | "gpt2" | "default") {
        return Err(format!("tokenizer.ggml.pre is `{pre}`; webtune builds the pre-tokenizers `smollm`, `gpt2` and `default`"));
    }
    let strs = |key: &str| -> Result<Option<Vec<String>>, String> {
        match g.get(key) {
            None => Ok(None),
            Some(v) => match v.as_array().and_then(Array::as_strs) {
                Some(s) => Ok(Some(s.to_vec())),
                None => Err(format!("{key} is a {}, not an array of strings", v.type_name())),
            },
        }
    };
    let tokens = strs("tokenizer.ggml.tokens")?.unwrap_or_default();
    let mut ids: HashMap<&str, u32> = HashMap::with_capacity(tokens.len());
    for (i, t) in tokens.iter().enumerate() {
        if ids.insert(t.as_str(), i as u32).is_some() {
            return Err(format!("tokenizer.ggml.tokens holds `{t}` twice; a tokenizer.json vocabulary cannot"));
        }
    }
    let types = match g.get("tokenizer.ggml.token_type") {
        None => None,
        Some(v) => {
            let t = v
                .as_array()
                .and_then(Array::as_ints)
                .ok_or_else(|| format!("tokenizer.ggml.token_type is a {}, not an array of integers", v.type_name()))?;
            if t.len() != vocab {
                return Err(format!("tokenizer.ggml.token_type has {} entries for {vocab} tokens", t.len()));
            }
            Some(t)
        }
    };
    let merges = strs("tokenizer.ggml.merges")?.ok_or("metadata tokenizer.ggml.merges is missing: a BPE tokenizer needs its merges")?;
    for (i, m) in merges.iter().enumerate() {
        let parts: Vec<&str> = m.split(' ').collect();
        let [a, b] = parts[..] else {
            return Err(format!("tokenizer.ggml.merges entry {i} `{m}` is not two tokens separated by one space"));
        };
        for t in [a.to_string(), b.to_string(), format!("{a}{b}")] {
            if !ids.contains_key(t.as_str()) {
                return Err(format!("tokenizer.ggml.merges entry {i} `{m}` names `{t}`, which is not in tokenizer.ggml.tokens"));
            }
        }
    }
    let id = |key: &str| -> Result<Option<u32>, String> {
        match g.get(key) {
            None => Ok(None),
            Some(v) => match v.as_i128() {
                Some(n) if (0..vocab as i128).contains(&n) => Ok(Some(n as u32)),
                // llama.cpp writes -1 (as a uint32: 2^32 - 1) for "none".
                Some(-1 | 0xffff_ffff) => Ok(None),
                Some(n) => Err(format!("{key} is {n}, outside the {vocab}-token vocabulary")),
                None => Err(format!("{key} is a {}, not an integer", v.type_name())),
            },
        }
    };
    let bos = id("tokenizer.ggml.bos_token_id")?;
    let eos_id = id("tokenizer.ggml.eos_token_id")?;
    let add_bos = match g.get("tokenizer.ggml.add_bos_token") {
        None => false,
        Some(v) => v.as_bool().ok_or_else(|| format!("tokenizer.ggml.add_bos_token is a {}, not a bool", v.type_name()))?,
    };
    if add_bos && bos.is_none() {
        return Err("tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing".into());
    }
    let mut eog: BTreeSet<u32> = BTreeSet::new();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
        "tokenizer.ggml.fim_pad_token_id",
        "tokenizer.ggml.fim_rep_token_id",
        "tokenizer.ggml.fim_sep_token_id",
    ] {
        eog.extend(id(key)?);
    }
    eog.extend(EOG_TEXTS.iter().filter_map(|t| ids.get(t).copied()));
    let chat_template = meta_str(g, "tokenizer.chat_template")?.map(str::to_string);
    Ok(TokenizerMeta {
        pre,
        tokens,
        types,
        merges,
        chat_template,
        special: SpecialTokens { bos_id: if add_bos { bos } else { None }, eos_id, eog_ids: eog.into_iter().collect(), add_bos },
    })
}

/// GGUF token types (llama.cpp's `llama_token_type`).
const CONTROL: i128 = 3;
const USER_DEFINED: i128 = 4;

/// A Hugging Face `tokenizer.json` equivalent to the metadata's tokenizer.
fn tokenizer_json(t: &TokenizerMeta) -> Vec<u8> {
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    let pre_tokenizer = match t.pre.as_str() {
        "smollm" => json!({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, byte_level]}),
        _ => byte_level.clone(),
    };
    let added: Vec<Json> = t
        .types
        .iter()
        .flatten()
        .enumerate()
        .filter(|&(_, &ty)| ty == CONTROL || ty == USER_DEFINED)
        .map(|(id, &ty)| {
            json!({"id": id, "content": t.tokens[id], "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": ty == CONTROL})
        })
        .collect();
    let vocab: serde_json::Map<String, Json> = t.tokens.iter().enumerate().map(|(i, s)| (s.clone(), json!(i))).collect();
    let v = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": null,
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": t.merges,
        }
    });
    let mut out = serde_json::to_vec(&v).unwrap_or_default();
    out.push(b'\n');
    out
}
