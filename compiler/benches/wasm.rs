//! Issue-2 benchmarks, all in one run so ratios compare like with like:
//! 1. compile latency (schedule → validated Wasm bytes) over 200 schedules of K0;
//! 2. single-thread kernel speed in wasmtime for K0 and K1: a small schedule
//!    search, the best schedule with all passes, with each pass off, with all
//!    off; a plain scalar triple-loop Wasm kernel; native `matrixmultiply` sgemm.
//!
//! `cargo bench -p webtune-compiler --bench wasm` (add `-- quick` for fewer samples).

use std::time::Instant;

use rayon::prelude::*;
use wasmtime::{Config, Engine, Func, Instance, Memory, MemoryType, Module, Store, Val};
use webtune_compiler::reference::Rng;
use webtune_compiler::schedule::{LoopOrder, UnrollLoop};
use webtune_compiler::{Op, Schedule, Target, WasmPasses, compile};

fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[(rng.next_u64() % xs.len() as u64) as usize]
}

/// A deterministic sample of valid Wasm schedules.
fn sample(op: &Op, n: usize, seed: u64) -> Vec<Schedule> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    while out.len() < n {
        let x0 = pick(&mut rng, &[1, 2, 3, 4, 5, 6, 8]);
        let y0 = pick(&mut rng, &[4, 8, 12, 16]);
        let r0 = pick(&mut rng, &[1, 2, 4, 8]);
        let s = Schedule {
            x0,
            y0,
            r0,
            x1: x0 * pick(&mut rng, &[1, 4, 8, 16, 32]),
            y1: y0 * pick(&mut rng, &[1, 4, 8, 16, 32]),
            r1: r0 * pick(&mut rng, &[8, 32, 64, 256]),
            order: pick(&mut rng, &LoopOrder::ALL),
            inner_n_first: rng.next_u64().is_multiple_of(2),
            unroll: vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0],
            vectorize: 4,
            cache_read: rng.next_u64().is_multiple_of(4),
            relaxed_simd: rng.next_u64().is_multiple_of(2),
            passes: WasmPasses::default(),
            double_buffer: false,
            split_k: 1,
            subgroup_reduce: false,
            f16_acc: false,
            k_slices: 1,
            dequant_pass: false,
            quantize_a: false,
            threads: 1,
            split: None,
        };
        if s.check(op, Target::Wasm).is_ok() {
            out.push(s);
        }
    }
    out
}

fn percentile(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[((xs.len() - 1) as f64 * p).round() as usize]
}

struct Runner {
    store: Store<()>,
    f: Func,
    args: Vec<Val>,
}

fn load(engine: &Engine, op: &Op, s: &Schedule) -> Runner {
    let k = compile(op, Target::Wasm, s).expect("valid schedule");
    let module = Module::new(engine, &k.bytes).unwrap();
    let mut store = Store::new(engine, ());
    let mut args = Vec::new();
    let mut total = 0u64;
    for a in op.args() {
        args.push(Val::I32(total as i32));
        total += a.bytes().next_multiple_of(16);
    }
    let inputs_end = total;
    let scratch = k.meta.scratch_bytes.unwrap_or(0);
    if scratch > 0 {
        args.push(Val::I32(total as i32));
        total += scratch as u64;
    }
    let mem = Memory::new(&mut store, MemoryType::new(total.div_ceil(65536) as u32, None)).unwrap();
    // Non-zero inputs: zeros or denormals would not be representative.
    let mut rng = Rng::new(1);
    let words: Vec<u8> = (0..inputs_end / 4).flat_map(|_| rng.nonzero_f32().to_le_bytes()).collect();
    mem.write(&mut store, 0, &words).unwrap();
    let inst = Instance::new(&mut store, &module, &[mem.into()]).unwrap();
    let f = inst.get_func(&mut store, "kernel").unwrap();
    Runner { store, f, args }
}

impl Runner {
    fn call(&mut self) {
        self.f.call(&mut self.store, &self.args, &mut []).unwrap();
    }
    /// Median seconds per call over `reps` calls after 2 warm-up calls.
    fn time(&mut self, reps: usize) -> f64 {
        self.call();
        self.call();
        let mut ts: Vec<f64> = (0..reps)
            .map(|_| {
                let t = Instant::now();
                self.call();
                t.elapsed().as_secs_f64()
            })
            .collect();
        percentile(&mut ts, 0.5)
    }
}

fn gflops(op: &Op, secs: f64) -> f64 {
    op.flops() as f64 / secs / 1e9
}

fn native_sgemm(op: &Op, reps: usize) -> f64 {
    let (_, m, k, n) = op.bmkn();
    let (m, k, n) = (m as usize, k as usize, n as usize);
    let mut rng = Rng::new(2);
    let a: Vec<f32> = (0..m * k).map(|_| rng.nonzero_f32()).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.nonzero_f32()).collect();
    let mut c = vec![0f32; m * n];
    let mut run = || {
        // matrixmultiply runs on the calling thread only (no threading feature).
        #[allow(unsafe_code)]
        unsafe {
            matrixmultiply::sgemm(m, k, n, 1.0, a.as_ptr(), k as isize, 1, b.as_ptr(), n as isize, 1, 0.0, c.as_mut_ptr(), n as isize, 1)
        }
    };
    run();
    let mut ts: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64()
        })
        .collect();
    percentile(&mut ts, 0.5)
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let reps = if quick { 5 } else { 15 };
    let k0 = Op::parse("matmul", "384,768,768").unwrap();
    let k1 = Op::parse("matmul", "640,768,3072").unwrap();

    // 1. Compile latency.
    let schedules = sample(&k0, 200, 42);
    for s in schedules.iter().take(10) {
        compile(&k0, Target::Wasm, s).unwrap(); // warm caches and allocator
    }
    let mut lat: Vec<f64> = schedules
        .iter()
        .map(|s| {
            let t = Instant::now();
            let k = compile(&k0, Target::Wasm, s).unwrap();
            std::hint::black_box(k);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let (p50, p99, max) = (percentile(&mut lat, 0.5), percentile(&mut lat, 0.99), percentile(&mut lat, 1.0));
    println!("compile latency, K0, {} schedules: median {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms", lat.len());
    let batch: Vec<Schedule> = schedules.iter().take(32).cloned().collect();
    let t = Instant::now();
    let n: usize = batch.par_iter().map(|s| compile(&k0, Target::Wasm, s).unwrap().bytes.len()).sum();
    println!(
        "compile 32 schedules of K0 on a rayon pool of {} threads: {:.2} ms ({} bytes in all)",
        rayon::current_num_threads(),
        t.elapsed().as_secs_f64() * 1e3,
        n
    );

    // 2. Kernel speed.
    let mut c = Config::new();
    c.wasm_simd(true).wasm_relaxed_simd(true);
    let engine = Engine::new(&c).unwrap();
    for op in [&k0, &k1] {
        println!("\n{op} (single thread, wasmtime 48, median of {reps} calls)");
        let mut cands = sample(op, if quick { 12 } else { 40 }, 7);
        // Seed the search with the shapes that did well in earlier runs.
        for (x0, y0) in [(4, 8), (5, 8), (6, 8), (3, 12)] {
            cands.push(Schedule {
                x0,
                y0,
                r0: 4,
                x1: x0 * 16,
                y1: y0 * 32,
                r1: 768,
                inner_n_first: true,
                relaxed_simd: true,
                ..Schedule::default_for(op, Target::Wasm)
            });
        }
        let mut best: Option<(f64, Schedule)> = None;
        for s in cands {
            let secs = load(&engine, op, &s).time(3);
            if best.as_ref().is_none_or(|(b, _)| secs < *b) {
                best = Some((secs, s));
            }
        }
        let best = best.unwrap().1;
        println!("best schedule found: {}", serde_json::to_string(&best).unwrap());
        let variants: Vec<(&str, Schedule)> = vec![
            ("all passes", best.clone()),
            ("offset off", Schedule { passes: WasmPasses { offset: false, ..best.passes }, ..best.clone() }),
            ("load_splat off", Schedule { passes: WasmPasses { load_splat: false, ..best.passes }, ..best.clone() }),
            ("tee off", Schedule { passes: WasmPasses { tee: false, ..best.passes }, ..best.clone() }),
            ("all passes off", Schedule { passes: WasmPasses::NONE, ..best.clone() }),
            ("relaxed FMA off", Schedule { relaxed_simd: false, ..best.clone() }),
            ("default schedule", Schedule::default_for(op, Target::Wasm)),
        ];
        let (_, m, k, n) = op.bmkn();
        let scalar = Schedule {
            x0: 1,
            y0: 1,
            r0: 1,
            x1: m,
            y1: n,
            r1: k,
            vectorize: 1,
            unroll: vec![],
            passes: WasmPasses::NONE,
            ..Schedule::default_for(op, Target::Wasm)
        };
        let mut runners: Vec<Runner> = variants.iter().map(|(_, s)| load(&engine, op, s)).collect();
        let mut scalar_r = load(&engine, op, &scalar);
        // Interleave repetitions so drifting machine load hits every variant alike.
        let rounds = 3;
        let mut times = vec![Vec::new(); runners.len()];
        let mut scalar_t = Vec::new();
        let mut native_t = Vec::new();
        for _ in 0..rounds {
            for (i, r) in runners.iter_mut().enumerate() {
                times[i].push(r.time(reps / rounds + 1));
            }
            scalar_t.push(scalar_r.time(1));
            native_t.push(native_sgemm(op, reps / rounds + 1));
        }
        let base = gflops(op, percentile(&mut times[0].clone(), 0.5));
        for (i, (name, _)) in variants.iter().enumerate() {
            let g = gflops(op, percentile(&mut times[i], 0.5));
            println!("  {name:<18} {g:7.2} GFLOP/s  ({:.2}x of all passes)", g / base);
        }
        let gs = gflops(op, percentile(&mut scalar_t, 0.5));
        let gn = gflops(op, percentile(&mut native_t, 0.5));
        println!("  {:<18} {gs:7.2} GFLOP/s  ({:.2}x)", "scalar triple loop", gs / base);
        println!("  {:<18} {gn:7.2} GFLOP/s  ({:.2}x)  native matrixmultiply sgemm", "native ceiling", gn / base);
    }
}
