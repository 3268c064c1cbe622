//! A small generated BERT in the Hugging Face layout (2 layers, hidden 32,
//! 4 heads, FFN 64, a 100-token WordPiece vocabulary), written with the
//! `safetensors` and `zip` crates: the model of the import tests here and of
//! the server's model endpoint tests. Not for production use; it is public
//! only so that other crates' tests can build the same model.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use safetensors::{Dtype, tensor::TensorView};
use serde_json::{Value, json};

pub const H: usize = 32;
pub const I: usize = 64;
pub const V: usize = 100;
pub const P: usize = 40;
pub const T: usize = 2;
pub const LAYERS: usize = 2;

/// A fresh empty directory under the system's temporary folder.
pub fn temp_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!("webtune-models-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn config() -> Value {
    json!({
        "architectures": ["BertModel"], "model_type": "bert",
        "vocab_size": V, "hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": 4,
        "intermediate_size": I, "max_position_embeddings": P, "type_vocab_size": T,
        "layer_norm_eps": 1e-12, "hidden_act": "gelu", "position_embedding_type": "absolute"
    })
}

/// Every Hugging Face tensor of the model: name → (shape, values). Values
/// are distinct and non-zero, so a misplaced element shows.
pub fn tensors() -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let mut m = BTreeMap::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut add = |name: String, shape: Vec<usize>| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0 + 1.0 / 64.0
            })
            .collect();
        m.insert(name, (shape, v));
    };
    add("embeddings.word_embeddings.weight".into(), vec![V, H]);
    add("embeddings.position_embeddings.weight".into(), vec![P, H]);
    add("embeddings.token_type_embeddings.weight".into(), vec![T, H]);
    add("embeddings.LayerNorm.weight".into(), vec![H]);
    add("embeddings.LayerNorm.bias".into(), vec![H]);
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}.");
        for x in ["query", "key", "value"] {
            add(format!("{p}attention.self.{x}.weight"), vec![H, H]);
            add(format!("{p}attention.self.{x}.bias"), vec![H]);
        }
        add(format!("{p}attention.output.dense.weight"), vec![H, H]);
        add(format!("{p}attention.output.dense.bias"), vec![H]);
        add(format!("{p}attention.output.LayerNorm.weight"), vec![H]);
        add(format!("{p}attention.output.LayerNorm.bias"), vec![H]);
        add(format!("{p}intermediate.dense.weight"), vec![I, H]);
        add(format!("{p}intermediate.dense.bias"), vec![I]);
        add(format!("{p}output.dense.weight"), vec![H, I]);
        add(format!("{p}output.dense.bias"), vec![H]);
        add(format!("{p}output.LayerNorm.weight"), vec![H]);
        add(format!("{p}output.LayerNorm.bias"), vec![H]);
    }
    // Present in real checkpoints and not imported.
    add("pooler.dense.weight".into(), vec![H, H]);
    add("pooler.dense.bias".into(), vec![H]);
    m
}

/// A safetensors file of `tensors` in `dtype` (F32 or F16), plus an I64
/// `embeddings.position_ids` as real checkpoints have.
pub fn safetensors_bytes(tensors: &BTreeMap<String, (Vec<usize>, Vec<f32>)>, dtype: Dtype) -> Vec<u8> {
    let mut data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, (shape, v))| {
            let bytes = match dtype {
                Dtype::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                Dtype::F16 => v.iter().flat_map(|x| half::f16::from_f32(*x).to_le_bytes()).collect(),
                other => panic!("the fixture writes F32 or F16, not {other:?}"),
            };
            (name.clone(), dtype, shape.clone(), bytes)
        })
        .collect();
    data.push(("embeddings.position_ids".into(), Dtype::I64, vec![1, P], (0..P as i64).flat_map(|i| i.to_le_bytes()).collect()));
    let views: Vec<(String, TensorView<'_>)> =
        data.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize(views, None).unwrap()
}

/// A minimal valid WordPiece `tokenizer.json` (Hugging Face tokenizers
/// format, the structure of all-MiniLM-L6-v2's) over a 100-token vocabulary.
pub fn tokenizer_json() -> Value {
    let mut vocab = serde_json::Map::new();
    let mut words: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].iter().map(|s| s.to_string()).collect();
    words.extend(('a'..='z').map(|c| c.to_string()));
    words.extend(('a'..='z').map(|c| format!("##{c}")));
    words.extend(["the", "cat", "sits", "outside", "new", "movie", "is", "great", ".", ",", "?", "!"].iter().map(|s| s.to_string()));
    let mut i = 0;
    while words.len() < V {
        words.push(format!("w{i}"));
        i += 1;
    }
    for (id, w) in words.iter().enumerate() {
        vocab.insert(w.clone(), json!(id));
    }
    let special = |id: u32, content: &str| json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true});
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"), special(3, "[SEP]"), special(4, "[MASK]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab}
    })
}

/// The sentence-transformers files of all-MiniLM-L6-v2's layout.
pub fn sentence_transformers_files() -> Vec<(&'static str, Value)> {
    vec![
        (
            "modules.json",
            json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]),
        ),
        (
            "1_Pooling/config.json",
            json!({"word_embedding_dimension": H, "pooling_mode_cls_token": false,
            "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false}),
        ),
        ("sentence_bert_config.json", json!({"max_seq_length": 32, "do_lower_case": false})),
    ]
}

/// A complete model directory: (relative path, bytes) of every file.
pub fn model_files(
    config: &Value,
    tensors: &BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    sentence_transformers: bool,
) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![
        ("config.json".to_string(), serde_json::to_vec_pretty(config).unwrap()),
        ("model.safetensors".to_string(), safetensors_bytes(tensors, Dtype::F32)),
        ("tokenizer.json".to_string(), serde_json::to_vec(&tokenizer_json()).unwrap()),
    ];
    if sentence_transformers {
        for (p, v) in sentence_transformers_files() {
            files.push((p.to_string(), serde_json::to_vec_pretty(&v).unwrap()));
        }
    }
    files
}

pub fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) {
    for (rel, bytes) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

/// Writes the model as a wheel: `{pkg}/model/...` beside a Python package
/// and its dist-info, deflate-compressed.
pub fn write_wheel(path: &Path, pkg: &str, files: &[(String, Vec<u8>)]) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    z.start_file(format!("{pkg}/__init__.py"), opts).unwrap();
    z.write_all(b"").unwrap();
    for (rel, bytes) in files {
        z.start_file(format!("{pkg}/model/{rel}"), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.start_file(format!("{pkg}-0.1.0.dist-info/WHEEL"), opts).unwrap();
    z.write_all(b"Wheel-Version: 1.0\n").unwrap();
    z.finish().unwrap();
}

/// Every file under `dir`, relative, sorted.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}
