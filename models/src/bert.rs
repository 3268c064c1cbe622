//! BERT-family encoders: what `config.json` implies, the checks, and the
//! bundle layout (docs/model-bundle.md: linear weights transposed to
//! `[in, out]`, Q, K and V side by side as `qkv`, every tensor at a 64-byte
//! offset).
//!
//! The Hugging Face names, with `l` from 0 (and an optional `bert.` prefix,
//! as in checkpoints of `BertFor*` heads; LayerNorm parameters may be called
//! `gamma`/`beta` in old checkpoints): `embeddings.{word,position,token_type}_embeddings.weight`,
//! `embeddings.LayerNorm.{weight,bias}`, and per layer
//! `encoder.layer.{l}.attention.self.{query,key,value}.{weight,bias}`,
//! `attention.output.dense`, `attention.output.LayerNorm`,
//! `intermediate.dense`, `output.dense`, `output.LayerNorm`. A `Linear`'s
//! weight is stored `[out, in]`. Other tensors (the pooler, `position_ids`)
//! are not used and not copied.

use safetensors::{Dtype, SafeTensors};
use serde_json::Value;

use crate::error::ModelError;
use crate::manifest::{BertConfig, Pooling, TensorEntry};
use crate::source::{JSON_LIMIT, Source, WEIGHTS_LIMIT};

/// Alignment of every tensor in the weights blob, bytes.
pub(crate) const ALIGN: usize = 64;

/// A checked model, laid out, before it is named and stored.
#[derive(Debug)]
pub(crate) struct Bundle {
    pub config: BertConfig,
    pub max_seq_length: u32,
    pub pooling: Pooling,
    pub normalize: bool,
    pub tensors: Vec<TensorEntry>,
    pub weights: Vec<u8>,
    /// The int16 blob's tensors and bytes (`crate::int16`).
    pub int16: (Vec<TensorEntry>, Vec<u8>),
    pub tokenizer: Vec<u8>,
}

/// The bundle's tensors for `config`, in blob order, with their shapes.
#[derive(Debug)]
pub struct BundleLayout;

impl BundleLayout {
    /// Every tensor of a bundle of `config`: (name, shape), in blob order.
    pub fn of(c: &BertConfig) -> Vec<(String, Vec<usize>)> {
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let mut v = vec![
            ("embeddings.word".to_string(), vec![c.vocab_size, h]),
            ("embeddings.position".to_string(), vec![c.max_position_embeddings, h]),
            ("embeddings.token_type".to_string(), vec![c.type_vocab_size, h]),
            ("embeddings.ln.gamma".to_string(), vec![h]),
            ("embeddings.ln.beta".to_string(), vec![h]),
        ];
        for l in 0..c.num_hidden_layers {
            let p = format!("layer.{l}.");
            for (name, shape) in [
                ("qkv.weight", vec![h, 3 * h]),
                ("qkv.bias", vec![3 * h]),
                ("attn_out.weight", vec![h, h]),
                ("attn_out.bias", vec![h]),
                ("attn_ln.gamma", vec![h]),
                ("attn_ln.beta", vec![h]),
                ("ffn_in.weight", vec![h, i]),
                ("ffn_in.bias", vec![i]),
                ("ffn_out.weight", vec![i, h]),
                ("ffn_out.bias", vec![h]),
                ("ffn_ln.gamma", vec![h]),
                ("ffn_ln.beta", vec![h]),
            ] {
                v.push((format!("{p}{name}"), shape));
            }
        }
        v
    }
}

/// The values of tensor `entry` in a weights blob, or `None` when the blob
/// is too short for it.
pub fn read_bundle_tensor(weights: &[u8], entry: &TensorEntry) -> Option<Vec<f32>> {
    let start = usize::try_from(entry.offset).ok()?;
    let end = start.checked_add(usize::try_from(entry.bytes()).ok()?)?;
    let bytes = weights.get(start..end)?;
    Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

fn json(file: &str, bytes: &[u8]) -> Result<Value, ModelError> {
    serde_json::from_slice(bytes).map_err(|e| ModelError::Json { file: file.to_string(), why: format!("not valid JSON: {e}") })
}

/// Reads, checks and lays out the model in `src`.
pub(crate) fn build(src: &mut Source, progress: &mut dyn FnMut(&str)) -> Result<Bundle, ModelError> {
    let describe = src.describe();
    let missing = |f: &str, why: &str| ModelError::Source(format!("{f} is missing from {describe}: {why}"));
    let config_bytes = src.read("config.json", JSON_LIMIT)?.ok_or_else(|| missing("config.json", "it holds the model's dimensions"))?;
    let config = parse_config(&json("config.json", &config_bytes)?)?;
    let tokenizer = src.read("tokenizer.json", JSON_LIMIT)?.ok_or_else(|| {
        missing("tokenizer.json", "webtune tokenises with the model's own tokenizer.json (Hugging Face tokenizers format)")
    })?;
    check_tokenizer(&tokenizer)?;
    let (pooling, normalize) = sentence_transformers(src, &config)?;
    let max_seq_length = max_seq_length(src, &config)?;
    let weights_bytes =
        src.read("model.safetensors", WEIGHTS_LIMIT)?.ok_or_else(|| missing("model.safetensors", "it holds the weights"))?;
    progress(&format!("checking model.safetensors ({:.1} MB)", weights_bytes.len() as f64 / 1e6));
    let st = SafeTensors::deserialize(&weights_bytes).map_err(|e| ModelError::Safetensors(e.to_string()))?;
    let (tensors, weights) = lay_out(&st, &config, progress)?;
    progress("quantising the weight products and word embeddings to 16 bits");
    let int16 = crate::int16::build(&config, &tensors, &weights, ALIGN);
    Ok(Bundle { config, max_seq_length, pooling, normalize, tensors, weights, int16, tokenizer })
}

/// The dimensions from `config.json`, checked: a BERT encoder webtune can run.
pub(crate) fn parse_config(v: &Value) -> Result<BertConfig, ModelError> {
    let bad = |why: String| ModelError::Invalid(format!("config.json: {why}"));
    let obj = v.as_object().ok_or_else(|| bad("expected a JSON object".into()))?;
    let archs: Vec<&str> =
        obj.get("architectures").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let model_type = obj.get("model_type").and_then(Value::as_str);
    if !(archs.contains(&"BertModel") || model_type == Some("bert")) {
        let name = archs.first().copied().or(model_type).unwrap_or("(none given)");
        return Err(ModelError::NotBert(name.to_string()));
    }
    let int = |field: &str, default: Option<usize>| -> Result<usize, ModelError> {
        match obj.get(field) {
            None if default.is_some() => Ok(default.unwrap_or_default()),
            None => Err(bad(format!("`{field}` is missing"))),
            Some(x) => x
                .as_u64()
                .filter(|&n| (1..=1 << 24).contains(&n))
                .map(|n| n as usize)
                .ok_or_else(|| bad(format!("`{field}` must be an integer from 1 to 2^24, got {x}"))),
        }
    };
    let c = BertConfig {
        vocab_size: int("vocab_size", None)?,
        hidden_size: int("hidden_size", None)?,
        num_hidden_layers: int("num_hidden_layers", None)?,
        num_attention_heads: int("num_attention_heads", None)?,
        intermediate_size: int("intermediate_size", None)?,
        max_position_embeddings: int("max_position_embeddings", None)?,
        type_vocab_size: int("type_vocab_size", Some(2))?,
        layer_norm_eps: match obj.get("layer_norm_eps") {
            None => 1e-12,
            Some(x) => x
                .as_f64()
                .filter(|e| *e > 0.0 && *e < 1.0)
                .ok_or_else(|| bad(format!("`layer_norm_eps` must be a number in (0, 1), got {x}")))?,
        },
        hidden_act: match obj.get("hidden_act") {
            None => "gelu".to_string(),
            Some(Value::String(s)) if s == "gelu" => s.clone(),
            Some(x) => return Err(bad(format!("hidden_act {x} is not supported; webtune runs the exact GELU (\"gelu\")"))),
        },
    };
    if let Some(p) = obj.get("position_embedding_type")
        && p != "absolute"
    {
        return Err(bad(format!("position_embedding_type {p} is not supported; webtune runs absolute position embeddings")));
    }
    if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
        return Err(bad(format!("hidden_size {} is not a multiple of num_attention_heads {}", c.hidden_size, c.num_attention_heads)));
    }
    Ok(c)
}

fn check_tokenizer(bytes: &[u8]) -> Result<(), ModelError> {
    let v = json("tokenizer.json", bytes)?;
    if !v.get("model").is_some_and(Value::is_object) {
        return Err(ModelError::Json {
            file: "tokenizer.json".into(),
            why: "no `model` object: not a Hugging Face tokenizers file".into(),
        });
    }
    Ok(())
}

/// Pooling and normalisation from `modules.json` and the Pooling module's
/// config; mean pooling without normalisation when there is no `modules.json`.
fn sentence_transformers(src: &mut Source, c: &BertConfig) -> Result<(Pooling, bool), ModelError> {
    let Some(bytes) = src.read("modules.json", JSON_LIMIT)? else {
        return Ok((Pooling::Mean, false));
    };
    let bad = |why: String| ModelError::Json { file: "modules.json".into(), why };
    let v = json("modules.json", &bytes)?;
    let modules = v.as_array().ok_or_else(|| bad("expected a list of modules".into()))?;
    let (mut pooling, mut normalize) = (Pooling::Mean, false);
    for (i, m) in modules.iter().enumerate() {
        let ty = m.get("type").and_then(Value::as_str).ok_or_else(|| bad(format!("module {i} has no `type`")))?;
        let kind = ty.rsplit('.').next().unwrap_or(ty);
        match kind {
            "Transformer" => {}
            "Normalize" => normalize = true,
            "Pooling" => {
                let dir = m.get("path").and_then(Value::as_str).ok_or_else(|| bad(format!("module {i} (Pooling) has no `path`")))?;
                let file = format!("{}/config.json", dir.trim_end_matches('/'));
                let pc = src
                    .read(&file, JSON_LIMIT)?
                    .ok_or_else(|| ModelError::Source(format!("modules.json lists a Pooling module at `{dir}`, but {file} is missing")))?;
                pooling = parse_pooling(&file, &json(&file, &pc)?, c)?;
            }
            _ => {
                return Err(bad(format!("module `{ty}` is not supported; webtune runs Transformer, Pooling (mean or cls) and Normalize")));
            }
        }
    }
    Ok((pooling, normalize))
}

fn parse_pooling(file: &str, v: &Value, c: &BertConfig) -> Result<Pooling, ModelError> {
    let bad = |why: String| ModelError::Json { file: file.to_string(), why };
    let on = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    for (key, mode) in [
        ("pooling_mode_max_tokens", "max"),
        ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
        ("pooling_mode_weightedmean_tokens", "weightedmean"),
        ("pooling_mode_lasttoken", "lasttoken"),
    ] {
        if on(key) {
            return Err(bad(format!("pooling mode `{mode}` is not supported; webtune pools by mean or cls")));
        }
    }
    if let Some(d) = v.get("word_embedding_dimension").and_then(Value::as_u64)
        && d as usize != c.hidden_size
    {
        return Err(bad(format!("word_embedding_dimension {d} differs from hidden_size {} in config.json", c.hidden_size)));
    }
    match (on("pooling_mode_mean_tokens"), on("pooling_mode_cls_token")) {
        (true, false) => Ok(Pooling::Mean),
        (false, true) => Ok(Pooling::Cls),
        (true, true) => Err(bad("both mean and cls pooling are on; webtune pools one way".into())),
        (false, false) => Err(bad("no pooling mode is on; set pooling_mode_mean_tokens or pooling_mode_cls_token".into())),
    }
}

/// `sentence_bert_config.json`'s max_seq_length, else min(512, positions).
fn max_seq_length(src: &mut Source, c: &BertConfig) -> Result<u32, ModelError> {
    let positions = c.max_position_embeddings.min(u32::MAX as usize) as u32;
    let Some(bytes) = src.read("sentence_bert_config.json", JSON_LIMIT)? else {
        return Ok(positions.min(512));
    };
    let v = json("sentence_bert_config.json", &bytes)?;
    match v.get("max_seq_length") {
        None | Some(Value::Null) => Ok(positions.min(512)),
        Some(x) => {
            let n = x.as_u64().filter(|&n| n >= 2).ok_or_else(|| ModelError::Json {
                file: "sentence_bert_config.json".into(),
                why: format!("max_seq_length must be an integer of at least 2 ([CLS] and [SEP]), got {x}"),
            })?;
            // A longer limit than the position table would index past it.
            Ok(n.min(positions as u64) as u32)
        }
    }
}

/// The Hugging Face source of one bundle tensor.
enum From {
    /// Copied as it is.
    Copy(String),
    /// A linear weight `[out, in]`, transposed to `[in, out]`.
    Transpose(String),
    /// Q, K and V weights `[H, H]` each, transposed and side by side: `[H, 3H]`.
    Qkv([String; 3]),
    /// Q, K and V biases `[H]`, concatenated.
    Concat([String; 3]),
}

fn sources(c: &BertConfig) -> Vec<From> {
    let e = "embeddings.";
    let mut v = vec![
        From::Copy(format!("{e}word_embeddings.weight")),
        From::Copy(format!("{e}position_embeddings.weight")),
        From::Copy(format!("{e}token_type_embeddings.weight")),
        From::Copy(format!("{e}LayerNorm.weight")),
        From::Copy(format!("{e}LayerNorm.bias")),
    ];
    for l in 0..c.num_hidden_layers {
        let p = format!("encoder.layer.{l}.");
        let qkv = |s: &str| ["query", "key", "value"].map(|x| format!("{p}attention.self.{x}.{s}"));
        v.extend([
            From::Qkv(qkv("weight")),
            From::Concat(qkv("bias")),
            From::Transpose(format!("{p}attention.output.dense.weight")),
            From::Copy(format!("{p}attention.output.dense.bias")),
            From::Copy(format!("{p}attention.output.LayerNorm.weight")),
            From::Copy(format!("{p}attention.output.LayerNorm.bias")),
            From::Transpose(format!("{p}intermediate.dense.weight")),
            From::Copy(format!("{p}intermediate.dense.bias")),
            From::Transpose(format!("{p}output.dense.weight")),
            From::Copy(format!("{p}output.dense.bias")),
            From::Copy(format!("{p}output.LayerNorm.weight")),
            From::Copy(format!("{p}output.LayerNorm.bias")),
        ]);
    }
    v
}

/// The shape config.json implies for a Hugging Face tensor (without
/// prefix), and the config fields it comes from.
fn expected_shape(name: &str, c: &BertConfig) -> (Vec<usize>, &'static str) {
    let (h, i) = (c.hidden_size, c.intermediate_size);
    if name.starts_with("embeddings.word_") {
        (vec![c.vocab_size, h], "[vocab_size, hidden_size]")
    } else if name.starts_with("embeddings.position_") {
        (vec![c.max_position_embeddings, h], "[max_position_embeddings, hidden_size]")
    } else if name.starts_with("embeddings.token_type_") {
        (vec![c.type_vocab_size, h], "[type_vocab_size, hidden_size]")
    } else if name.ends_with("intermediate.dense.weight") {
        (vec![i, h], "[intermediate_size, hidden_size]")
    } else if name.ends_with("intermediate.dense.bias") {
        (vec![i], "[intermediate_size]")
    } else if name.ends_with(".output.dense.weight") && !name.contains("attention") {
        (vec![h, i], "[hidden_size, intermediate_size]")
    } else if name.ends_with(".weight") && !name.contains("LayerNorm") {
        (vec![h, h], "[hidden_size, hidden_size]")
    } else {
        (vec![h], "[hidden_size]")
    }
}

/// A tensor's values as f32, with its name and shape checked.
struct Reader<'a, 'd> {
    st: &'a SafeTensors<'d>,
    prefix: &'static str,
    config: &'a BertConfig,
}

impl Reader<'_, '_> {
    fn get(&self, name: &str) -> Result<Vec<f32>, ModelError> {
        let full = format!("{}{name}", self.prefix);
        // Old checkpoints call the LayerNorm parameters gamma and beta.
        let old = full.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta");
        let (found, view) = match self.st.tensor(&full) {
            Ok(v) => (full, v),
            Err(_) => match self.st.tensor(&old) {
                Ok(v) => (old, v),
                Err(_) => return Err(ModelError::MissingTensor { name: full }),
            },
        };
        let (expected, why) = expected_shape(name, self.config);
        if view.shape() != expected.as_slice() {
            return Err(ModelError::Shape { name: found, expected, got: view.shape().to_vec(), why: format!("{why} from config.json") });
        }
        let data = view.data();
        let values = match view.dtype() {
            Dtype::F32 => data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            Dtype::F16 => data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            Dtype::BF16 => data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            other => return Err(ModelError::Dtype { name: found, dtype: format!("{other:?}") }),
        };
        Ok(values)
    }
}

/// `[rows, cols]` row-major → `[cols, rows]`.
fn transpose(src: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; src.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = src[r * cols + c];
        }
    }
    out
}

/// The weights blob under construction.
struct Blob {
    bytes: Vec<u8>,
    tensors: Vec<TensorEntry>,
}

impl Blob {
    fn push(&mut self, name: &str, shape: &[usize], values: &[f32]) {
        debug_assert_eq!(shape.iter().product::<usize>(), values.len());
        let pad = self.bytes.len().next_multiple_of(ALIGN) - self.bytes.len();
        self.bytes.extend(std::iter::repeat_n(0u8, pad));
        self.tensors.push(TensorEntry {
            name: name.to_string(),
            dtype: "f32".into(),
            shape: shape.to_vec(),
            offset: self.bytes.len() as u64,
        });
        self.bytes.reserve(values.len() * 4);
        for v in values {
            self.bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// Checks every tensor the config implies, then writes the blob.
fn lay_out(st: &SafeTensors<'_>, c: &BertConfig, progress: &mut dyn FnMut(&str)) -> Result<(Vec<TensorEntry>, Vec<u8>), ModelError> {
    let prefix = if st.tensor("embeddings.word_embeddings.weight").is_err() && st.tensor("bert.embeddings.word_embeddings.weight").is_ok() {
        "bert."
    } else {
        ""
    };
    // A layer beyond num_hidden_layers means the config describes another model.
    let beyond = format!("{prefix}encoder.layer.{}.", c.num_hidden_layers);
    if let Some(name) = st.names().into_iter().filter(|n| n.starts_with(&beyond)).min() {
        return Err(ModelError::Invalid(format!(
            "model.safetensors has tensor `{name}`, but config.json says num_hidden_layers {}",
            c.num_hidden_layers
        )));
    }
    let r = Reader { st, prefix, config: c };
    let layout = BundleLayout::of(c);
    let srcs = sources(c);
    debug_assert_eq!(layout.len(), srcs.len());
    let total: usize = layout.iter().map(|(_, s)| s.iter().product::<usize>() * 4 + ALIGN).sum();
    let mut blob = Blob { bytes: Vec::with_capacity(total), tensors: Vec::with_capacity(layout.len()) };
    let h = c.hidden_size;
    for (k, ((name, shape), src)) in layout.iter().zip(&srcs).enumerate() {
        let values = match src {
            From::Copy(n) => r.get(n)?,
            From::Transpose(n) => {
                let (rows, cols) = (shape[1], shape[0]);
                transpose(&r.get(n)?, rows, cols)
            }
            From::Qkv(ns) => {
                let parts = [r.get(&ns[0])?, r.get(&ns[1])?, r.get(&ns[2])?];
                let mut out = vec![0.0f32; h * 3 * h];
                for (j, w) in parts.iter().enumerate() {
                    // w is [out = H, in = H]; out[i, j*H + o] = w[o, i].
                    for o in 0..h {
                        for i in 0..h {
                            out[i * 3 * h + j * h + o] = w[o * h + i];
                        }
                    }
                }
                out
            }
            From::Concat(ns) => [r.get(&ns[0])?, r.get(&ns[1])?, r.get(&ns[2])?].concat(),
        };
        blob.push(name, shape, &values);
        if (k + 1) % 12 == 5 || k + 1 == layout.len() {
            progress(&format!("laid out {}/{} tensors", k + 1, layout.len()));
        }
    }
    Ok((blob.tensors, blob.bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minilm() -> Value {
        json!({"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 30522, "hidden_size": 384,
               "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536,
               "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"})
    }

    #[test]
    fn config_checks_say_what_is_wrong() {
        let c = parse_config(&minilm()).unwrap();
        assert_eq!((c.hidden_size, c.num_hidden_layers, c.layer_norm_eps), (384, 6, 1e-12));
        let mut v = minilm();
        v["architectures"] = json!(["GPT2LMHeadModel"]);
        v["model_type"] = json!("gpt2");
        assert_eq!(
            parse_config(&v).unwrap_err().to_string(),
            "config.json: architecture `GPT2LMHeadModel` is not supported; webtune imports BERT-family encoders (architectures [\"BertModel\"] or model_type \"bert\")"
        );
        let mut v = minilm();
        v["hidden_act"] = json!("gelu_new");
        assert_eq!(
            parse_config(&v).unwrap_err().to_string(),
            "config.json: hidden_act \"gelu_new\" is not supported; webtune runs the exact GELU (\"gelu\")"
        );
        let mut v = minilm();
        v["num_attention_heads"] = json!(5);
        assert_eq!(parse_config(&v).unwrap_err().to_string(), "config.json: hidden_size 384 is not a multiple of num_attention_heads 5");
        let mut v = minilm();
        v.as_object_mut().unwrap().remove("hidden_size");
        assert_eq!(parse_config(&v).unwrap_err().to_string(), "config.json: `hidden_size` is missing");
        let mut v = minilm();
        v["vocab_size"] = json!(-3);
        assert_eq!(parse_config(&v).unwrap_err().to_string(), "config.json: `vocab_size` must be an integer from 1 to 2^24, got -3");
    }

    #[test]
    fn bundle_layout_follows_the_readme() {
        let c = parse_config(&minilm()).unwrap();
        let l = BundleLayout::of(&c);
        assert_eq!(l.len(), 5 + 12 * 6);
        assert_eq!(l[5], ("layer.0.qkv.weight".to_string(), vec![384, 1152]));
        assert_eq!(l[11], ("layer.0.ffn_in.weight".to_string(), vec![384, 1536]));
        assert_eq!(l[13], ("layer.0.ffn_out.weight".to_string(), vec![1536, 384]));
        // Every source tensor's expected shape, transposed where it is, is its bundle shape.
        for ((name, shape), src) in l.iter().zip(sources(&c)) {
            let got = match src {
                From::Copy(n) => expected_shape(&n, &c).0,
                From::Transpose(n) => expected_shape(&n, &c).0.into_iter().rev().collect(),
                From::Qkv(n) => vec![expected_shape(&n[0], &c).0[1], 3 * expected_shape(&n[0], &c).0[0]],
                From::Concat(n) => vec![3 * expected_shape(&n[0], &c).0[0]],
            };
            assert_eq!(&got, shape, "{name}");
        }
    }

    #[test]
    fn transpose_moves_rows_to_columns() {
        // [[1, 2, 3], [4, 5, 6]] → [[1, 4], [2, 5], [3, 6]]
        assert_eq!(transpose(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    }
}
