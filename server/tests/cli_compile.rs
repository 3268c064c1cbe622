//! `webtune compile` as a user runs it: files written, metadata complete,
//! and every kind of bad input refused with one line and a non-zero status.

use std::process::Command;

fn webtune(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_webtune")).args(args).output().expect("runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn compile_writes_kernel_and_metadata() {
    let dir = std::env::temp_dir().join(format!("webtune-cli-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let (ok, _, err) = webtune(&["compile", "--op", "matmul", "--shape", "384,768,768", "--target", "wasm", "--default", "--out", d]);
    assert!(ok, "{err}");
    let bytes = std::fs::read(dir.join("kernel.wasm")).unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("kernel.json")).unwrap()).unwrap();
    assert_eq!(meta["op"], "matmul");
    assert_eq!(meta["shape"], serde_json::json!([384, 768, 768]));
    assert_eq!(meta["target"], "wasm");
    assert_eq!(meta["flops"], 2 * 384 * 768 * 768);
    assert_eq!(meta["args"][2]["name"], "C");
    assert!(meta["memory_pages_min"].as_u64().unwrap() >= (384 * 768 + 768 * 768 + 384 * 768) * 4 / 65536);
    assert_eq!(meta["sha256"].as_str().unwrap(), webtune_compiler::kernel::sha256_hex(&bytes));
    assert_eq!(meta["config"]["x0"], 4);
    // A config given as JSON round-trips into the metadata.
    let cfg = r#"{"x0":2,"y0":4,"r0":1,"x1":2,"y1":4,"r1":1,"vectorize":4,"relaxed_simd":true}"#;
    let (ok, _, err) = webtune(&["compile", "--op", "batch_matmul", "--shape", "2,3,5,7", "--target", "wasm", "--config", cfg, "--out", d]);
    assert!(ok, "{err}");
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("kernel.json")).unwrap()).unwrap();
    assert_eq!(meta["config"]["relaxed_simd"], true);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_one_line_and_non_zero() {
    let out = std::env::temp_dir().join("webtune-cli-never-written");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--op", "conv2d", "--shape", "1,2,3", "--target", "wasm", "--default"], "unknown op `conv2d`"),
        (&["--op", "matmul", "--shape", "1,2", "--target", "wasm", "--default"], "takes 3 dimensions"),
        (&["--op", "matmul", "--shape", "4,0,4", "--target", "wasm", "--default"], "dimension K must be at least 1"),
        (&["--op", "matmul", "--shape", "4,x,4", "--target", "wasm", "--default"], "not a positive integer"),
        (&["--op", "matmul", "--shape", "4,4,4", "--target", "cuda", "--default"], "unknown target `cuda`"),
        (&["--op", "matmul_q4", "--shape", "1,40,4", "--target", "wasm", "--default"], "multiple of 32"),
        (&["--op", "matmul", "--shape", "4,4,4", "--target", "wasm"], "--default"),
        (
            &[
                "--op",
                "matmul",
                "--shape",
                "4,4,4",
                "--target",
                "wasm",
                "--config",
                r#"{"x0":4,"y0":6,"r0":1,"x1":4,"y1":12,"r1":1,"vectorize":4}"#,
            ],
            "schedule field `y0`",
        ),
        (&["--op", "matmul", "--shape", "4,4,4", "--target", "wasm", "--config", "{not json"], "schedule JSON"),
    ];
    for (args, want) in cases {
        let mut full = vec!["compile"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--out", o]);
        let (ok, _, err) = webtune(&full);
        assert!(!ok, "{args:?} should fail");
        assert!(err.contains(want), "{args:?}: stderr was {err:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: not one line: {err:?}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!out.exists(), "nothing is written on bad input");
}
