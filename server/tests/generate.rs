//! SmolLM2-135M-Instruct natively (`webtune generate`'s loader: the decoder
//! graph on wasmtime with each product's first lite-space kernel) against
//! the independent float64 reference of `scripts/reference/smollm2_f64.py`:
//! teacher-forced logits within 0.05 over the first 32 steps of every
//! prompt, greedy tokens equal except where the reference's top-two margin
//! is below the worst difference seen, the tokenizer's ids equal to the
//! reference's, and the CLI's chat answer. Needs the model and its
//! reference, which scripts/test.sh fetches (WEBTUNE_LLM_GGUF,
//! WEBTUNE_LLM_REF).
#![cfg(feature = "native")]

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use serde_json::Value;
use webtune::cli::generate::load;
use webtune_client_runtime::decoder::argmax;
use webtune_models::Store;

const BOUND: f64 = 0.05;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: scripts/test.sh fetches the model and its reference"))
}

/// A fresh store holding the model, imported from its GGUF.
fn store(tag: &str) -> (Store, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("webtune-generate-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::new(&dir);
    webtune_models::import(Path::new(&env("WEBTUNE_LLM_GGUF")), Some("smollm2"), &store, &mut |_| {}).expect("the GGUF imports");
    (store, dir)
}

fn reference() -> Value {
    serde_json::from_slice(&std::fs::read(env("WEBTUNE_LLM_REF")).expect("the reference JSON")).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

#[test]
#[ignore = "needs the SmolLM2 GGUF and its f64 reference (scripts/test.sh fetches them)"]
fn smollm2_logits_and_greedy_tokens_match_the_f64_reference() {
    let r = reference();
    let (store, dir) = store("logits");
    let mut l = load(&store, "smollm2", 1024, &mut |s| eprintln!("{s}")).unwrap();
    let fixed = ids(&r["fixed_ids"]);
    let mut overall = 0.0f64;
    for p in r["prompts"].as_array().unwrap() {
        let label = p["label"].as_str().unwrap();
        let prompt = ids(&p["token_ids"]);
        let greedy = ids(&p["greedy_ids"]);
        // The tokenizer reads the prompt text as the reference did.
        let enc = l.tokenizer.encode(p["text"].as_str().unwrap(), false).unwrap();
        assert_eq!(enc.get_ids(), &prompt[..], "{label}: prompt token ids");
        l.decoder.reset();
        let mut logits = l.decoder.feed(&prompt).unwrap();
        // Step 0: every logit.
        let bytes = base64::engine::general_purpose::STANDARD.decode(p["logits0_f32"].as_str().unwrap()).unwrap();
        let full: Vec<f32> = bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let mut worst = logits.iter().zip(&full).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
        let steps = p["steps"].as_array().unwrap();
        let mut mismatches = Vec::new();
        for (s, step) in steps.iter().enumerate() {
            if s > 0 {
                logits = l.decoder.feed(&[greedy[s - 1]]).unwrap();
            }
            for (id, want) in ids(&step["top_ids"]).iter().zip(step["top_logits"].as_array().unwrap()) {
                worst = worst.max((logits[*id as usize] as f64 - want.as_f64().unwrap()).abs());
            }
            for (id, want) in fixed.iter().zip(step["fixed_logits"].as_array().unwrap()) {
                worst = worst.max((logits[*id as usize] as f64 - want.as_f64().unwrap()).abs());
            }
            let got = argmax(&logits);
            if got != greedy[s] {
                mismatches.push((s, got, greedy[s], step["margin"].as_f64().unwrap()));
            }
        }
        eprintln!("{label}: {} prompt tokens, worst logit difference over 32 steps {worst:.2e}", prompt.len());
        assert!(worst < BOUND, "{label}: worst logit difference {worst} ≥ {BOUND}");
        for (s, got, want, margin) in mismatches {
            assert!(
                margin < worst,
                "{label}: step {s} chose {got}, the reference {want} with a margin of {margin} (worst difference {worst})"
            );
        }
        overall = overall.max(worst);
    }
    eprintln!("worst logit difference over every prompt: {overall:.2e}");
    // A thousand more positions leave the memory as it was.
    let before = l.decoder.memory_bytes();
    l.decoder.reset();
    for i in 0..1000u32 {
        l.decoder.feed(&[(i * 7919) % 49152]).unwrap();
    }
    assert_eq!(l.decoder.memory_bytes(), before, "1,000 decoded positions grew the Wasm memory");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
#[ignore = "needs the SmolLM2 GGUF and its f64 reference (scripts/test.sh fetches them)"]
fn smollm2_tokenizer_matches_the_reference_and_round_trips() {
    let r = reference();
    let (store, dir) = store("tokenizer");
    let l = load(&store, "smollm2", 64, &mut |_| {}).unwrap();
    for t in r["tokenizer"].as_array().unwrap() {
        let (label, text) = (t["label"].as_str().unwrap(), t["text"].as_str().unwrap());
        let enc = l.tokenizer.encode(text, false).unwrap();
        assert_eq!(enc.get_ids(), &ids(&t["ids"])[..], "{label}: {text:?}");
        let back = l.tokenizer.decode(enc.get_ids(), false).unwrap();
        assert_eq!(back, t["decoded"].as_str().unwrap(), "{label}: decode");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
#[ignore = "needs the SmolLM2 GGUF and its f64 reference (scripts/test.sh fetches them)"]
fn generate_cli_answers_a_chat_and_refuses_bad_input() {
    let (_store, dir) = store("cli");
    let bin = env!("CARGO_BIN_EXE_webtune");
    let run = |args: &[&str]| Command::new(bin).args(["generate", "--models-dir"]).arg(&dir).args(args).output().unwrap();
    let out = run(&["--model", "smollm2", "--chat", "--prompt", "What is the capital of France?", "--tokens", "24"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.trim(), "The capital of France is Paris.", "greedy chat answer");
    // Bad input: one line on stderr, status 1.
    for (args, want) in [
        (vec!["--model", "smollm2", "--prompt", ""], "--prompt is empty"),
        (vec!["--model", "nope", "--prompt", "hi"], "no model `nope`"),
        (vec!["--model", "smollm2", "--prompt", "hi hi hi hi hi hi hi hi hi hi", "--context", "4"], "the context holds 4"),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{args:?}: {err}");
    }
    // --tokens 0 generates nothing.
    let out = run(&["--model", "smollm2", "--prompt", "Hello", "--tokens", "0"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), "");
    let _ = std::fs::remove_dir_all(dir);
}
