//! Issue 4's quality figures for the Wasm lite space, in wasmtime on this
//! machine: every candidate of the lite space a device is given, in order,
//! against a seeded search over at least ten times as many schedules of the
//! same op and shape (tiles, cache blocks, loop orders, r0; all with SIMD,
//! relaxed-SIMD FMA and every pass on, as the microbenchmark fixed them).
//!
//! ```text
//! cargo run --release -p webtune-research --bin space_quality -- [PRESET] [SHAPES]
//! cargo run --release -p webtune-research --bin space_quality -- xeon-2core matmul:384,768,768
//! ```
//!
//! Prints one JSON line per measured kernel and a `summary` line per shape:
//! the lite space's best, the wide search's best (the top three of each side
//! re-measured alternately over five rounds; each side's best median), their
//! ratio, and how many candidates taken in the lite order reach 95% of the
//! lite best.

use std::time::Instant;

use serde_json::json;
use webtune_client_runtime::wasm::WasmEngine;
use webtune_client_runtime::{KernelDir, RunOptions};
use webtune_compiler::reference::Rng;
use webtune_compiler::schedule::LoopOrder;
use webtune_compiler::{Op, Schedule, Target, compile};
use webtune_tuner::{Device, Settings, lite_space, presets};

fn gflops(engine: &WasmEngine, op: &Op, s: &Schedule, reps: usize) -> f64 {
    let k = match compile(op, Target::Wasm, s) {
        Ok(k) => k,
        Err(e) => {
            println!("{}", json!({"error": e.to_string(), "config": s}));
            return 0.0;
        }
    };
    let opts = RunOptions { reps, warmup: 2, min_sample_ms: 20.0, seed: 7, ..RunOptions::default() };
    match engine.run(&KernelDir::from_kernel(k), &opts) {
        Ok(r) if r.correct => {
            println!("{}", json!({"gflops": r.gflops, "spread": r.spread, "config": s}));
            r.gflops
        }
        Ok(r) => {
            println!("{}", json!({"error": "WRONG RESULT", "max_rel_err": r.max_rel_err, "config": s}));
            0.0
        }
        Err(e) => {
            println!("{}", json!({"error": e.to_string(), "config": s}));
            0.0
        }
    }
}

/// Every schedule the wide search draws from: power-of-two register tiles,
/// cache blocks, reduction steps and all six loop orders.
fn wide_space(op: &Op, base: &Schedule) -> Vec<Schedule> {
    let mut out = Vec::new();
    for x0 in [1, 2, 4, 8, 16] {
        for y0 in [4, 8, 16, 32] {
            for r0 in [1, 2, 4, 8] {
                for x1 in [16, 32, 64, 128] {
                    for y1 in [32, 64, 128, 256] {
                        for r1 in [32, 64, 128, 256] {
                            for order in LoopOrder::ALL {
                                let s = Schedule { x0, y0, r0, x1, y1, r1, order, ..base.clone() };
                                if s.check(op, Target::Wasm).is_ok() {
                                    out.push(s);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let preset = args.next().unwrap_or_else(|| "xeon-2core".into());
    let shapes = args.next().unwrap_or_else(|| "matmul:384,768,768;batch_matmul:12,384,384,64".into());
    let Some(fp) = presets::get(&preset) else {
        eprintln!("space_quality: unknown preset {preset}; one of {:?}", presets::names());
        std::process::exit(2);
    };
    let device = Device::from_fingerprint(&fp).expect("presets describe devices");
    let settings = Settings::builtin(Target::Wasm);
    let engine = WasmEngine::new().expect("wasmtime");
    for spec in shapes.split(';') {
        let (kind, shape) = spec.split_once(':').expect("KIND:SHAPE");
        let op = Op::parse(kind, shape).expect("shape");
        let space = lite_space(&op, Target::Wasm, &device, &settings);
        let t = Instant::now();
        let ordered: Vec<f64> = space.schedules.iter().map(|s| gflops(&engine, &op, s, 3)).collect();
        let lite_s = t.elapsed().as_secs_f64();
        let full = wide_space(&op, &space.schedules[0]);
        let want = 10 * space.schedules.len();
        let mut rng = Rng::new(4242);
        let mut wide: Vec<Schedule> = Vec::new();
        while wide.len() < want.min(full.len()) {
            let s = &full[(rng.next_u64() % full.len() as u64) as usize];
            if !wide.contains(s) && !space.schedules.contains(s) {
                wide.push(s.clone());
            }
        }
        let t = Instant::now();
        let wide_g: Vec<f64> = wide.iter().map(|s| gflops(&engine, &op, s, 3)).collect();
        let wide_s = t.elapsed().as_secs_f64();
        // A single pass picks each side's best from noisy figures, and the
        // side with ten times the draws gains most from that noise. So the
        // top three of each side are re-measured, all six alternately over
        // five rounds, and each side's best is its best median over rounds.
        let top3 = |v: &[f64]| {
            let mut idx: Vec<usize> = (0..v.len()).collect();
            idx.sort_by(|&a, &b| v[b].total_cmp(&v[a]));
            idx.truncate(3);
            idx
        };
        let (lt, wt) = (top3(&ordered), top3(&wide_g));
        let mut rounds: Vec<Vec<f64>> = vec![Vec::new(); lt.len() + wt.len()];
        for _ in 0..5 {
            for (j, &i) in lt.iter().enumerate() {
                rounds[j].push(gflops(&engine, &op, &space.schedules[i], 5));
            }
            for (j, &i) in wt.iter().enumerate() {
                rounds[lt.len() + j].push(gflops(&engine, &op, &wide[i], 5));
            }
        }
        let medians: Vec<f64> = rounds.into_iter().map(median).collect();
        let pick = |range: std::ops::Range<usize>| range.fold((0, 0.0), |a, j| if medians[j] > a.1 { (j, medians[j]) } else { a });
        let (lj, lite_best) = pick(0..lt.len());
        let (wj, wide_best) = pick(lt.len()..medians.len());
        let (li, wi) = (lt[lj], wt[wj - lt.len()]);
        let best = ordered.iter().copied().fold(0.0, f64::max);
        let reach95 = ordered.iter().position(|g| *g >= 0.95 * best).map(|i| i + 1);
        let mut sorted_wide = wide_g.clone();
        sorted_wide.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({"summary": format!("wasm lite space {kind} {shape}"), "preset": preset, "device_key": device.keys.device_key,
                   "lite_size": space.schedules.len(), "wide_size": wide.len(),
                   "lite_best_gflops": lite_best, "wide_best_gflops": wide_best, "lite_over_wide": lite_best / wide_best,
                   "candidates_to_95pct": reach95, "ordered_gflops": ordered,
                   "wide_median_gflops": sorted_wide[sorted_wide.len() / 2], "wide_worst_gflops": sorted_wide[0],
                   "lite_best_config": space.schedules[li], "wide_best_config": wide[wi], "remeasured_medians": medians,
                   "lite_s": lite_s, "wide_s": wide_s})
        );
    }
}
