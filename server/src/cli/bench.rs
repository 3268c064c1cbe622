//! `webtune bench compile`: how long the server's just-in-time compiler takes
//! per candidate, phase by phase, over the lite spaces it actually streams.

use std::time::Instant;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use serde_json::json;
use webtune_compiler::{Op, Schedule, Target, compile, wgsl};
use webtune_tuner::{Device, Settings, lite_space};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Subcommand, Debug)]
pub enum BenchWhat {
    /// Compile time per candidate (the issue shapes' lite spaces), one JSON line per shape.
    Compile {
        /// wasm or wgsl.
        #[arg(long, default_value = "wgsl")]
        target: String,
        /// A preset or fingerprint file whose lite spaces are compiled.
        #[arg(long, default_value = "h100")]
        device: String,
        /// Rounds over each space; the first warms caches and is not counted.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
}

/// The shapes the issues name: 4096³, K0–K3, the q4 decode shapes, a q4
/// prefill shape (on WGSL its lite space holds two-pass kernels) and the
/// encoder's FFN product on 16-bit integers (Wasm only).
const SHAPES: &[(&str, &str)] = &[
    ("matmul", "4096,4096,4096"),
    ("matmul", "384,768,768"),
    ("matmul", "640,768,3072"),
    ("batch_matmul", "12,384,384,64"),
    ("batch_matmul", "120,64,64,64"),
    ("matmul_q4", "1,4096,4096"),
    ("matmul_q4", "1,3072,9216"),
    ("matmul_q4", "512,4096,4096"),
    ("matmul_i16", "128,384,1536"),
];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn p90(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() * 9 / 10).copied().unwrap_or(f64::NAN)
}

/// Times each step of the WGSL compile of one schedule, and beside it a
/// parse of the written text (not part of it), into `out` (in the order
/// `run` names).
fn wgsl_phases(op: &Op, s: &Schedule, out: &mut [Vec<f64>; 5]) -> Result<()> {
    let mut lap = {
        let mut t = Instant::now();
        move || {
            let ms = t.elapsed().as_secs_f64() * 1e3;
            t = Instant::now();
            ms
        }
    };
    let (func, wg, _) = wgsl::generate(op, s);
    out[0].push(lap());
    let module = wgsl::lower::module(&func, wg).map_err(|e| anyhow::anyhow!("{e}"))?;
    out[1].push(lap());
    let info = wgsl::check(&module).map_err(anyhow::Error::msg)?;
    out[2].push(lap());
    let source = wgsl::write_module(&module, &info).map_err(anyhow::Error::msg)?;
    out[3].push(lap());
    wgsl::validate(&source).map_err(anyhow::Error::msg)?;
    out[4].push(lap());
    Ok(())
}

pub fn run(a: BenchArgs) -> Result<()> {
    let BenchWhat::Compile { target, device, rounds } = a.what;
    let target: Target = target.parse().map_err(anyhow::Error::msg)?;
    if rounds < 2 {
        bail!("--rounds must be at least 2 (the first is a warm-up)");
    }
    let mut fp = super::space::fingerprint(&device)?;
    fp.target = Some(target.name().to_string());
    let keys = fp.keys().map_err(|e| anyhow::anyhow!("{device}: {e}"))?;
    let dev = Device::from_keys(&keys);
    let settings = Settings::builtin(target);
    for (kind, shape) in SHAPES {
        let op = Op::parse(kind, shape)?;
        if !op.runs_on(target) {
            continue;
        }
        let space: Vec<Schedule> = lite_space(&op, target, &dev, &settings).schedules;
        // Phases, per candidate, from the last rounds.
        let mut phases: [Vec<f64>; 5] = Default::default();
        let mut total = vec![];
        let mut bytes = 0usize;
        for round in 0..rounds {
            for s in &space {
                let t = Instant::now();
                let k = compile(&op, target, s)?;
                let whole = t.elapsed().as_secs_f64() * 1e3;
                if round == 0 {
                    continue;
                }
                total.push(whole);
                bytes += k.bytes.len();
                if target == Target::Wgsl {
                    wgsl_phases(&op, s, &mut phases)?;
                }
            }
        }
        let n = total.len().max(1);
        let mut line = json!({
            "op": kind, "shape": shape, "target": target.name(), "device_key": keys.device_key,
            "candidates": space.len(), "compile_median_ms": median(&mut total), "compile_p90_ms": p90(&mut total),
            "compile_max_ms": total.iter().copied().fold(0.0, f64::max), "mean_bytes": bytes / n,
        });
        if target == Target::Wgsl {
            let [ir, build, validate, write, reparse] = &mut phases;
            line["phases_median_ms"] = json!({
                "ir": median(ir), "naga_build": median(build), "naga_validate": median(validate), "naga_write": median(write),
            });
            // Not part of the compile: what parsing the written text back and
            // validating it again costs (builds with debug assertions do it).
            line["not_counted_median_ms"] = json!({ "reparse_written": median(reparse) });
        }
        crate::cli::out(line)?;
    }
    Ok(())
}
