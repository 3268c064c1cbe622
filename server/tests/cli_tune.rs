//! `webtune tune` against a real server (issue 20's bug, tried as a new
//! user would): at an odd shape whose schedules compile to identical bytes,
//! from an empty database, and again at the same key once it has a winner
//! (its kernel then in the exploitation set and the lite space), the native
//! client runs the queue and its report is accepted.

#![cfg(feature = "native")]

mod common;

use common::*;
use std::process::Command;

#[test]
fn tune_reports_once_per_kernel_at_odd_shapes_and_keys_with_winners() {
    let srv = Server::start(&sqlite_url(), &["--quorum", "1"]);
    let dir = std::env::temp_dir().join(format!("webtune-cli-tune-{}", webtune_kernel_db::random_id().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    // A fixed 2-thread relaxed-SIMD CPU: the same device key on every machine.
    let fp = dir.join("fp.json");
    std::fs::write(&fp, r#"{"target": "wasm", "simd": true, "relaxedSimd": true, "hardwareConcurrency": 2, "os": "linux"}"#).unwrap();
    for shape in ["61,67,71", "48,64,40"] {
        for round in ["empty database", "a winner elected"] {
            let out = Command::new(env!("CARGO_BIN_EXE_webtune"))
                .args(["tune", "--server", &srv.url, "--op", "matmul", "--shape", shape, "--target", "wasm", "--reps", "3", "--quiet"])
                .arg("--fingerprint")
                .arg(&fp)
                .output()
                .expect("runs");
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "{shape}, {round}: {stderr}");
            let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("a JSON summary");
            assert!(last["report"]["accepted"].as_u64().unwrap() >= 1, "{shape}, {round}: {last}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
