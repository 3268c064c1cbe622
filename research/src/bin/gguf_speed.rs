//! Times the GGUF products of SmolLM2-135M (`matmul_q4_1`, `matmul_q8_0`)
//! in wasmtime, one thread, each checked against the f64 reference: the
//! first candidates of this machine's lite space per shape, beside the f32
//! `matmul` of the same shape, so that ratios come from one run.
//!
//! `cargo run --release -p webtune-research --bin gguf_speed -- [--first N] [--m 1,128] [--only OP]`
//! `cargo run --release -p webtune-research --bin gguf_speed -- --op matmul_q8_0 --shape 1,576,49152 [--rounds N] '<schedule json>'...`

use webtune_client_runtime::{KernelDir, RunOptions, cpu_fingerprint, run};
use webtune_compiler::{Op, Schedule, Target, compile};
use webtune_tuner::{Device, Fingerprint, Settings, lite_space};

fn arg(args: &[String], k: &str) -> Option<String> {
    args.iter().position(|a| a == k).and_then(|i| args.get(i + 1).cloned())
}

fn time(op: &Op, s: &Schedule) -> String {
    let k = match compile(op, Target::Wasm, s) {
        Ok(k) => k,
        Err(e) => return format!("compile error: {e}"),
    };
    let opts = RunOptions { reps: 15, ..RunOptions::default() };
    match run(&KernelDir::from_kernel(k), &opts) {
        // The fastest sample: on a shared machine, the least disturbed.
        Ok(r) => format!(
            "{:7.2} GFLOP/s {:6.2} GB/s (fastest {:8.3} ms, median {:8.3} ms){}",
            r.gflops * r.median_ms / r.min_ms,
            r.gbps * r.median_ms / r.min_ms,
            r.min_ms,
            r.median_ms,
            if r.correct { "" } else { "  WRONG" }
        ),
        Err(e) => format!("run error: {e}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let (Some(op), Some(shape)) = (arg(&args, "--op"), arg(&args, "--shape")) {
        // Schedules interleaved over --rounds rounds, so that a shared
        // machine's noise hits all alike; each round's line per schedule.
        let op = Op::parse(&op, &shape).expect("op and shape");
        let rounds: usize = arg(&args, "--rounds").map_or(1, |v| v.parse().expect("--rounds N"));
        let scheds: Vec<Schedule> =
            args.iter().filter(|a| a.starts_with('{')).map(|s| Schedule::from_json(s).expect("schedule json")).collect();
        for round in 0..rounds {
            for (i, s) in scheds.iter().enumerate() {
                println!("round {round} #{i} {}  {}", time(&op, s), serde_json::to_string(s).unwrap());
            }
        }
        return;
    }
    let first: usize = arg(&args, "--first").map_or(3, |v| v.parse().expect("--first N"));
    let ms: Vec<u32> = arg(&args, "--m").unwrap_or_else(|| "1,128".into()).split(',').map(|v| v.parse().expect("--m")).collect();
    let only = arg(&args, "--only");
    let fp: Fingerprint = serde_json::from_value(cpu_fingerprint()).expect("fingerprint");
    let device = Device::from_keys(&fp.keys().expect("keys"));
    let settings = Settings::builtin(Target::Wasm);
    let products = [
        ("matmul_q4_1", 576, 960),
        ("matmul_q4_1", 576, 576),
        ("matmul_q4_1", 576, 3072),
        ("matmul_q4_1", 1536, 576),
        ("matmul_q8_0", 576, 49152),
    ];
    for &m in &ms {
        for &(name, k, n) in &products {
            if only.as_deref().is_some_and(|o| o != name) || (name == "matmul_q8_0" && m > 1 && only.is_none()) {
                continue;
            }
            let shape = format!("{m},{k},{n}");
            let op = Op::parse(name, &shape).expect("op");
            let space = lite_space(&op, Target::Wasm, &device, &settings);
            for s in space.schedules.iter().filter(|s| s.threads <= 1).take(first) {
                println!("{name:12} {shape:12} {}  {}", time(&op, s), serde_json::to_string(s).unwrap());
            }
            if args.iter().any(|a| a == "--f32") {
                let f = Op::parse("matmul", &shape).expect("op");
                let space = lite_space(&f, Target::Wasm, &device, &settings);
                if let Some(s) = space.schedules.iter().find(|s| s.threads <= 1) {
                    println!("{:12} {shape:12} {}  {}", "matmul f32", time(&f, s), serde_json::to_string(s).unwrap());
                }
            }
        }
    }
}
