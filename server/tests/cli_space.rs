//! `webtune space` as a user runs it: candidates as JSON lines in order,
//! statistics with `--stats`, presets and fingerprint files, and bad input
//! refused with one line and a non-zero status.

use std::process::Command;

fn webtune(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_webtune")).args(args).output().expect("runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn stats(args: &[&str]) -> serde_json::Value {
    let mut full = vec!["space"];
    full.extend_from_slice(args);
    full.push("--stats");
    let (ok, out, err) = webtune(&full);
    assert!(ok, "{args:?}: {err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn candidates_are_valid_json_lines_in_a_stable_order() {
    for (target, device) in [("wgsl", "h100"), ("wasm", "xeon-2core"), ("wgsl", "swiftshader"), ("wasm", "apple-m2")] {
        let args = ["space", "--op", "matmul", "--shape", "384,768,768", "--target", target, "--device", device];
        let (ok, out, err) = webtune(&args);
        assert!(ok, "{err}");
        let op = webtune_compiler::Op::parse("matmul", "384,768,768").unwrap();
        let t: webtune_compiler::Target = target.parse().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(!lines.is_empty() && lines.len() <= 32, "{device}: {} candidates", lines.len());
        for l in &lines {
            let s = webtune_compiler::Schedule::from_json(l).unwrap();
            s.check(&op, t).unwrap();
        }
        let (_, again, _) = webtune(&args);
        assert_eq!(again, out, "the order is deterministic");
        let st = stats(&args[1..]);
        assert_eq!(st["lite_size"], lines.len());
    }
}

#[test]
fn stats_report_table6_sizes_and_keys() {
    let st = stats(&["--op", "matmul", "--shape", "384,768,768", "--target", "wgsl", "--device", "h100"]);
    assert_eq!(st["device_key"], "gpu-nvidia/hopper/nvidia-h100-80gb-hbm3/-");
    assert_eq!(st["model"], "nvidia-hopper");
    assert!(st["naive_size"].as_u64().unwrap() > 1_000_000);
    assert!(st["lite_size"].as_u64().unwrap() <= 32);
    assert_eq!(st["checksum"].as_str().unwrap().len(), 16);
    let wasm = stats(&["--op", "batch_matmul", "--shape", "12,384,384,64", "--target", "wasm", "--device", "xeon-2core"]);
    // The preset runs Wasm threads (a cross-origin isolated page): the `.mt` key.
    assert_eq!(wasm["device_key"], "cpu-x86/relaxed-simd/linux-2t.mt-v8/-");
    assert_ne!(wasm["checksum"], st["checksum"]);
    // The same preset asked for the other target gets the other kind of key.
    let m2 = stats(&["--op", "matmul", "--shape", "384,768,768", "--target", "wasm", "--device", "apple-m2"]);
    assert_eq!(m2["vendor_key"], "cpu-arm");
}

#[test]
fn fingerprint_file_and_settings_file() {
    let dir = std::env::temp_dir().join(format!("webtune-cli-space-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fp = dir.join("fp.json");
    std::fs::write(
        &fp,
        r#"{"adapter": {"vendor": "NVIDIA", "architecture": "hopper", "description": "NVIDIA H100 80GB HBM3"}, "extra": [1, 2]}"#,
    )
    .unwrap();
    let f = fp.to_str().unwrap();
    let from_file = stats(&["--op", "matmul", "--shape", "384,768,768", "--target", "wgsl", "--device", f]);
    let preset = stats(&["--op", "matmul", "--shape", "384,768,768", "--target", "wgsl", "--device", "h100"]);
    assert_eq!(from_file["device_key"], preset["device_key"]);
    assert_eq!(from_file["checksum"], preset["checksum"]);
    // A settings file that fixes cache_read off changes the space.
    let settings = dir.join("settings.json");
    std::fs::write(
        &settings,
        r#"{"target":"wgsl","op":"matmul","shape":[4096,4096,4096],"engines":["wgpu"],"primitives":[
            {"primitive":"cache_read","verdict":{"kind":"consistent","setting":"off"},"engines":[]}]}"#,
    )
    .unwrap();
    let s = settings.to_str().unwrap();
    let args = ["space", "--op", "matmul", "--shape", "384,768,768", "--target", "wgsl", "--device", "h100", "--settings", s];
    let (ok, out, err) = webtune(&args);
    assert!(ok, "{err}");
    assert!(out.lines().all(|l| l.contains("\"cache_read\":false")), "{out}");
    let with = stats(&args[1..]);
    assert_ne!(with["checksum"], preset["checksum"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_one_line_and_non_zero() {
    let cases: &[(&[&str], &str)] = &[
        (&["--op", "conv2d", "--shape", "1,2,3", "--target", "wasm", "--device", "h100"], "unknown op `conv2d`"),
        (&["--op", "matmul", "--shape", "4,4,4", "--target", "cuda", "--device", "h100"], "unknown target `cuda`"),
        (&["--op", "matmul", "--shape", "4,4,4", "--target", "wasm", "--device", "no-such-device"], "neither a file nor a preset"),
        (
            &["--op", "matmul", "--shape", "4,4,4", "--target", "wgsl", "--device", "h100", "--settings", "/nonexistent/s.json"],
            "reading settings file",
        ),
        // Issue 23: clap's own errors, huge dimensions and endless files.
        (&["--op", "matmul", "--shape", "-1,4,4", "--target", "wasm", "--device", "h100"], "not a positive integer"),
        (&["--op", "matmul", "--shape", "4,4,4", "--target", "wasm"], "--device"),
        (&["--op", "matmul", "--shape", "4,4,4", "--target", "wasm", "--device", "h100", "--bogus"], "--bogus"),
        (&["--op", "matmul", "--shape", "4,4294967296,4", "--target", "wasm", "--device", "h100"], "below 2^32"),
        (&["--op", "matmul", "--shape", "4,4,4", "--target", "wasm", "--device", "/dev/zero"], "larger than 1024 KiB"),
        // f16: WGSL only, f32 or f16 only, and the name and the flag must agree.
        (&["--op", "matmul", "--dtype", "f16", "--shape", "4,4,4", "--target", "wasm", "--device", "h100"], "f16 ops run on wgsl only"),
        (&["--op", "matmul", "--dtype", "bf16", "--shape", "4,4,4", "--target", "wgsl", "--device", "h100"], "expected f32 or f16"),
        (
            &["--op", "matmul+f16", "--dtype", "f32", "--shape", "4,4,4", "--target", "wgsl", "--device", "h100"],
            "says f16 but --dtype says f32",
        ),
        (&["--op", "matmul_i16", "--dtype", "f16", "--shape", "4,4,4", "--target", "wasm", "--device", "h100"], "no f16 form"),
    ];
    for (args, want) in cases {
        let mut full = vec!["space"];
        full.extend_from_slice(args);
        let (ok, _, err) = webtune(&full);
        assert!(!ok, "{args:?} should fail");
        assert!(err.contains(want), "{args:?}: stderr was {err:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: not one line: {err:?}");
        assert!(err.len() < 400, "{args:?}: {} bytes of error", err.len());
    }
    // Exit status 1 for argument errors too (clap's own is 2).
    let out = Command::new(env!("CARGO_BIN_EXE_webtune")).args(["space", "--nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let huge = format!("4,{},4", "9".repeat(300));
    let (_, _, err) = webtune(&["space", "--op", "matmul", "--shape", &huge, "--target", "wasm", "--device", "h100"]);
    assert!(!err.contains(&"9".repeat(40)), "the number was echoed back: {err}");
}

/// `--dtype f16` names the f16 op; on a GPU with fast f16 its first
/// candidates compute in f16 (`f16_acc`), on SwiftShader none do.
#[test]
fn dtype_f16_names_the_op_and_brings_f16_arithmetic_where_it_is_fast() {
    let st = stats(&["--op", "matmul", "--dtype", "f16", "--shape", "384,768,768", "--target", "wgsl", "--device", "h100"]);
    assert_eq!(st["op"], "matmul+f16");
    let cands = |device: &str| -> Vec<webtune_compiler::Schedule> {
        let (ok, out, err) = webtune(&["space", "--op", "matmul+f16", "--shape", "384,768,768", "--target", "wgsl", "--device", device]);
        assert!(ok, "{err}");
        out.lines().map(|l| webtune_compiler::Schedule::from_json(l).unwrap()).collect()
    };
    let (h100, swiftshader) = (cands("h100"), cands("swiftshader"));
    assert!(h100[0].f16_acc && h100.iter().filter(|s| s.f16_acc).count() == h100.len() / 2, "{:?}", h100[0]);
    assert!(swiftshader.iter().all(|s| !s.f16_acc));
}

#[test]
fn space_reads_a_session_body_as_its_fingerprint() {
    let dir = std::env::temp_dir().join(format!("webtune-body-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("body.json");
    std::fs::write(&f, r#"{"fingerprint": {"adapter": {"vendor": "nvidia", "architecture": "hopper", "device": "h100"}}}"#).unwrap();
    let st = stats(&["--op", "matmul", "--shape", "64,64,64", "--target", "wgsl", "--device", f.to_str().unwrap()]);
    assert_eq!(st["device_key"], "gpu-nvidia/hopper/h100/-");
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    // `webtune space ... | head -0`: stdout is closed before the first line.
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_webtune"))
        .args(["space", "--op", "matmul", "--shape", "384,768,768", "--target", "wgsl", "--device", "h100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("exits");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "status {:?}: {err}", out.status);
    assert!(!err.contains("panicked"), "{err}");
}
