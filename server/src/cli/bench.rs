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

/// The shapes the issues name: 4096³, K0–K3 and the q4 decode shapes.
const SHAPES: &[(&str, &str)] = &[
    ("matmul", "4096,4096,4096"),
    ("matmul", "384,768,768"),
    ("matmul", "640,768,3072"),
    ("batch_matmul", "12,384,384,64"),
    ("batch_matmul", "120,64,64,64"),
    ("matmul_q4", "1,4096,4096"),
    ("matmul_q4", "1,3072,9216"),
];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn p90(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() * 9 / 10).copied().unwrap_or(f64::NAN)
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
        let space: Vec<Schedule> = lite_space(&op, target, &dev, &settings).schedules;
        // Phases, per candidate, from the last rounds.
        let (mut total, mut ir, mut emit, mut parse, mut validate) = (vec![], vec![], vec![], vec![], vec![]);
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
                    let t = Instant::now();
                    let (func, wg, _) = wgsl::generate(&op, s);
                    ir.push(t.elapsed().as_secs_f64() * 1e3);
                    let t = Instant::now();
                    let source = wgsl::emit(&func, wg).map_err(|e| anyhow::anyhow!("{e}"))?;
                    emit.push(t.elapsed().as_secs_f64() * 1e3);
                    let t = Instant::now();
                    let module = wgsl::parse(&source).map_err(anyhow::Error::msg)?;
                    parse.push(t.elapsed().as_secs_f64() * 1e3);
                    let t = Instant::now();
                    wgsl::check_module(&module, &source).map_err(anyhow::Error::msg)?;
                    validate.push(t.elapsed().as_secs_f64() * 1e3);
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
            line["phases_median_ms"] = json!({
                "ir": median(&mut ir), "emit": median(&mut emit), "naga_parse": median(&mut parse), "naga_validate": median(&mut validate),
            });
        }
        println!("{line}");
    }
    Ok(())
}
