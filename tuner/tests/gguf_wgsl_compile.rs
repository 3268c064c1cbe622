//! Every WGSL lite candidate of SmolLM2-135M's GGUF products compiles (naga
//! validates each module; debug builds also parse the written text back):
//! decode (M = 1) and the prefill row buckets 16 to 256, the 49152 × 576
//! output head included, on the devices whose spaces differ (NVIDIA with
//! subgroups, Apple, a GPU of unknown vendor, lavapipe-like Mesa). The
//! compile time per kernel is printed (`--nocapture`), never asserted: run
//! with `--release` for the figure a server sees.

use std::time::Instant;

use webtune_compiler::{Op, Target, compile};
use webtune_tuner::{Device, Fingerprint, Settings, lite_space, presets};

fn devices() -> Vec<Device> {
    let mut out = vec![Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap()];
    for text in [
        r#"{"target": "wgsl", "adapter": {"vendor": "apple", "architecture": "metal-3", "subgroupMinSize": 32, "subgroupMaxSize": 32}, "features": ["subgroups"]}"#,
        r#"{"target": "wgsl"}"#,
        r#"{"target": "wgsl", "adapter": {"vendor": "mesa", "architecture": "llvmpipe"}}"#,
    ] {
        out.push(Device::from_fingerprint(&Fingerprint::from_json(text).unwrap()).unwrap());
    }
    out
}

/// Compile times in ms, by (op kind, family): the block-quantised ops'
/// matrix-vector (`cache_read` false) and tiled kernels; matmul_q4's
/// beside them for comparison.
fn print_times(what: &str, mut times: Vec<f64>) {
    if times.is_empty() {
        return;
    }
    times.sort_by(f64::total_cmp);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    println!(
        "{what}: {} WGSL kernels, compile ms median {:.3}, mean {mean:.3}, p95 {:.3}, max {:.3} ({} build)",
        times.len(),
        times[times.len() / 2],
        times[times.len() * 95 / 100],
        times[times.len() - 1],
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
}

#[test]
fn every_wgsl_lite_candidate_of_smollm2_compiles() {
    let products = [(576, 960), (576, 576), (576, 3072), (1536, 576)];
    let mut shapes = Vec::new();
    for m in [1, 16, 64, 256] {
        for &(k, n) in &products {
            for kind in ["matmul_q4_1", "matmul_q8_0", "matmul_q4"] {
                shapes.push((kind, [m, k, n]));
            }
        }
    }
    for kind in ["matmul_q8_0", "matmul_q4"] {
        shapes.push((kind, [1, 576, 49152]));
        shapes.push((kind, [16, 576, 49152]));
    }
    let settings = Settings::builtin(Target::Wgsl);
    let mut times: std::collections::BTreeMap<(String, bool), Vec<f64>> = Default::default();
    for d in devices() {
        for &(kind, shape) in &shapes {
            let op = Op::new(kind.parse().unwrap(), &shape).unwrap();
            let space = lite_space(&op, Target::Wgsl, &d, &settings);
            assert!(!space.schedules.is_empty(), "{op} {}", d.keys);
            for s in &space.schedules {
                let t = Instant::now();
                let k = compile(&op, Target::Wgsl, s).unwrap_or_else(|e| panic!("{op} {} {s:?}: {e}", d.keys));
                times.entry((kind.to_string(), s.cache_read)).or_default().push(t.elapsed().as_secs_f64() * 1e3);
                assert_eq!(k.meta.args.len(), op.args().len());
            }
        }
    }
    for ((kind, tiled), t) in times {
        print_times(&format!("{kind} {}", if tiled { "tiled" } else { "matrix-vector" }), t);
    }
}
