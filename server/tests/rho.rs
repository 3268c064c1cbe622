//! `GET /v1/rho`: the ρ pairs are real kernels of the compiler, served
//! content-addressed, each variant differing from its base in the one
//! primitive the pair is named for; a fingerprint with the measured bits gets
//! them as its key's last part.

mod common;

use common::*;
use webtune_compiler::{Op, Target, compile};
use webtune_tuner::rho_primitives;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rho_pairs_are_compiled_kernels_and_the_bits_reach_the_key() {
    let srv = Server::start(&sqlite_url(), &[]);
    let http = client();
    let r: serde_json::Value = http.get(format!("{}/v1/rho?target=wasm", srv.url)).send().await.unwrap().json().await.unwrap();
    let pairs = r["pairs"].as_array().unwrap();
    let want = rho_primitives(Target::Wasm);
    assert_eq!(pairs.len(), want.len());
    assert_eq!(r["margin"], webtune_tuner::RHO_MARGIN);
    for (p, w) in pairs.iter().zip(&want) {
        assert_eq!(p["name"], w.name);
        let op = Op::parse(
            p["op"].as_str().unwrap(),
            &p["shape"].as_array().unwrap().iter().map(|d| d.to_string()).collect::<Vec<_>>().join(","),
        )
        .unwrap();
        for (side, schedule) in [("base", &w.base), ("variant", &w.variant)] {
            // The bytes served are the compiler's for that schedule, exactly.
            let k = compile(&op, Target::Wasm, schedule).unwrap();
            assert_eq!(p[side]["meta"]["sha256"], k.meta.sha256.as_str(), "{} {side}", w.name);
            let bytes = http.get(format!("{}{}", srv.url, p[side]["url"].as_str().unwrap())).send().await.unwrap().bytes().await.unwrap();
            assert_eq!(bytes.as_ref(), k.bytes.as_slice(), "{} {side}", w.name);
        }
        assert_ne!(p["base"]["meta"]["sha256"], p["variant"]["meta"]["sha256"], "{}", w.name);
    }
    // WGSL has no pairs yet; a bad target is a clear 400.
    let g: serde_json::Value = http.get(format!("{}/v1/rho?target=wgsl", srv.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(g["pairs"].as_array().unwrap().len(), 0);
    let bad = http.get(format!("{}/v1/rho?target=cuda", srv.url)).send().await.unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("cuda"));
    // The bits a client measured become the last part of its key.
    let bits: String = "10".repeat(pairs.len()).chars().take(pairs.len()).collect();
    let fp = serde_json::json!({"target": "wasm", "simd": true, "relaxedSimd": true, "hardwareConcurrency": 2,
        "browser": {"name": "Chrome", "version": "156"}, "os": "Linux", "cpuArchitecture": "x86", "rho": bits});
    let (_, v) = open_session(&http, &srv.url, &fp).await;
    assert!(v["device_key"].as_str().unwrap().ends_with(&format!("/{bits}")), "{v}");
}
