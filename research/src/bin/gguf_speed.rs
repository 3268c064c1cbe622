//! Times the GGUF products of SmolLM2-135M (`matmul_q4_1`, `matmul_q8_0`)
//! in wasmtime, one thread, each checked against the f64 reference: the
//! first candidates of this machine's lite space per shape, beside the f32
//! `matmul` of the same shape, so that ratios come from one run.
//!
//! `cargo run --release -p webtune-research --bin gguf_speed -- [--first N] [--m 1,128] [--only OP]`
//! `cargo run --release -p webtune-research --bin gguf_speed -- --op matmul_q8_0 --shape 1,576,49152 [--rounds N] '<schedule json>'...`
//! `cargo run --release -p webtune-research --bin gguf_speed -- --stream [--steps 8] [--rounds 4] [--a16-y0 N] [--a16-r0 N] [--q8-layers]`
//!
//! `--stream` times the products of SmolLM2's decode step as the model
//! calls them, the weights streaming from memory: one wasmtime memory holds
//! 30 layers' distinct weights (seeded, the real sizes: 79.6 MB of Q4_1)
//! and the 31.9 MB Q8_0 head, and a step calls the 4 products of each layer
//! in turn, then the head (no fixed kernels). Two plans, each product's
//! first lite-space candidate for this machine in f32 (`quantize_a` off)
//! and its first with 16-bit activations (`quantize_a`), run in ABBA order,
//! `--steps` steps a side per round; per product, ms a step and the
//! weights' GB/s, beside a Wasm streaming-read probe (a v128 sum of 512 MB)
//! in the same engine. The two plans' outputs of one step are compared
//! first (norm-scaled, as the checks are).

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

/// The decode products of SmolLM2, per layer (the head last): name, op, K, N.
const STEP: [(&str, &str, u32, u32); 5] = [
    ("qkv", "matmul_q4_1", 576, 960),
    ("o", "matmul_q4_1", 576, 576),
    ("gate_up", "matmul_q4_1", 576, 3072),
    ("down", "matmul_q4_1", 1536, 576),
    ("head", "matmul_q8_0", 576, 49152),
];

/// Weight bytes of one product: 0.75 a Q4_1 weight, 1.125 a Q8_0 one (f32 scales).
fn weight_bytes(op: &str, k: u32, n: u32) -> u64 {
    let kn = k as u64 * n as u64;
    if op == "matmul_q8_0" { kn + kn / 8 } else { kn / 2 + kn / 4 }
}

fn stream(args: &[String]) {
    use std::time::Instant;
    use wasmtime::{Config, Engine, Instance, Memory, MemoryType, Module, Store, Val};
    let steps: usize = arg(args, "--steps").map_or(8, |v| v.parse().expect("--steps N"));
    let rounds: usize = arg(args, "--rounds").map_or(4, |v| v.parse().expect("--rounds N"));
    let fp: Fingerprint = serde_json::from_value(cpu_fingerprint()).expect("fingerprint");
    let device = Device::from_keys(&fp.keys().expect("keys"));
    let settings = Settings::builtin(Target::Wasm);
    let mut c = Config::new();
    c.wasm_simd(true).wasm_relaxed_simd(true);
    let engine = Engine::new(&c).expect("wasmtime");
    let mut store = Store::new(&engine, ());
    // Layout: per layer the four products' W, D, Mn; the head's W, D; the
    // activations (A of 576 and 1536 values); an output per product; scratch.
    let layers = 30usize;
    let mut at: u64 = 64;
    let mut alloc = |bytes: u64| {
        let o = at;
        at = (at + bytes).next_multiple_of(64);
        o
    };
    struct Prod {
        name: &'static str,
        op: Op,
        k: u32,
        n: u32,
        /// Per copy: byte offsets of W, D, (Mn).
        copies: Vec<Vec<u64>>,
        out: u64,
    }
    let mut prods: Vec<Prod> = Vec::new();
    // --q8-layers: a Q8_0 576×3072 product in every layer too (after the
    // head), to tell the format's rate from the head's one long call.
    let extra = args.iter().any(|a| a == "--q8-layers").then_some(("q8_layer", "matmul_q8_0", 576u32, 3072u32));
    for &(name, op, k, n) in STEP.iter().chain(extra.iter()) {
        let copies = if name == "head" { 1 } else { layers };
        let q8 = op == "matmul_q8_0";
        let parts: Vec<u64> = if q8 {
            vec![k as u64 * n as u64, (k / 32 * n) as u64 * 4]
        } else {
            vec![(k / 2) as u64 * n as u64, (k / 32 * n) as u64 * 4, (k / 32 * n) as u64 * 4]
        };
        let copies: Vec<Vec<u64>> = (0..copies).map(|_| parts.iter().map(|&b| alloc(b)).collect()).collect();
        let out = alloc(n as u64 * 4);
        prods.push(Prod { name, op: Op::parse(op, &format!("1,{k},{n}")).expect("op"), k, n, copies, out });
    }
    let a576 = alloc(576 * 4);
    let a1536 = alloc(1536 * 4);
    // Each plan's kernels, one per product.
    let plans = ["f32", "a16"];
    let mut funcs: Vec<Vec<wasmtime::Func>> = Vec::new();
    let mut scratch_need = 0u32;
    let mut mods = Vec::new();
    for (pi, _) in plans.iter().enumerate() {
        let mut row = Vec::new();
        for p in &prods {
            let space = lite_space(&p.op, Target::Wasm, &device, &settings);
            let mut s =
                space.schedules.iter().find(|s| s.threads <= 1 && s.quantize_a == (pi == 1)).expect("a candidate of each kind").clone();
            // --a16-y0 N: the a16 plan's register tile 1×N instead (y1 = 2N).
            if let Some(y0) = arg(args, "--a16-y0").filter(|_| pi == 1) {
                s.y0 = y0.parse().expect("--a16-y0 N");
                s.y1 = 2 * s.y0;
            }
            // --a16-r0 N: the a16 plan's K step (N/32 blocks an iteration).
            if let Some(r0) = arg(args, "--a16-r0").filter(|_| pi == 1) {
                s.r0 = r0.parse().expect("--a16-r0 N");
                s.r1 = s.r0;
            }
            println!("{} {:8} {}", plans[pi], p.name, serde_json::to_string(&s).unwrap());
            let k = compile(&p.op, Target::Wasm, &s).expect("compiles");
            scratch_need = scratch_need.max(k.meta.scratch_bytes.unwrap_or(0));
            row.push(Module::new(&engine, &k.bytes).expect("module"));
        }
        mods.push(row);
    }
    let scratch = alloc(scratch_need as u64);
    let pages = at.div_ceil(65536) as u32 + 1;
    let memory = Memory::new(&mut store, MemoryType::new(pages, None)).expect("memory");
    // Seeded contents: words anywhere, scales positive and small, minimums near −7.5·D, A in [−1, 1).
    {
        let data = memory.data_mut(&mut store);
        let mut rng = webtune_compiler::reference::Rng::new(7);
        for p in &prods {
            for copy in &p.copies {
                let q8 = copy.len() == 2;
                let wbytes = if q8 { p.k as usize * p.n as usize } else { p.k as usize / 2 * p.n as usize };
                for w in data[copy[0] as usize..copy[0] as usize + wbytes].chunks_exact_mut(8) {
                    w.copy_from_slice(&rng.next_u64().to_le_bytes());
                }
                let blocks = (p.k / 32 * p.n) as usize;
                for i in 0..blocks {
                    let d = 0.01 + 0.1 * rng.nonzero_f32().abs();
                    data[copy[1] as usize + 4 * i..][..4].copy_from_slice(&d.to_le_bytes());
                    if !q8 {
                        let m = -d * (7.5 + 0.5 * rng.nonzero_f32());
                        data[copy[2] as usize + 4 * i..][..4].copy_from_slice(&m.to_le_bytes());
                    }
                }
            }
        }
        for (off, n) in [(a576, 576usize), (a1536, 1536)] {
            for i in 0..n {
                let x = rng.nonzero_f32();
                data[off as usize + 4 * i..][..4].copy_from_slice(&x.to_le_bytes());
            }
        }
    }
    for row in &mods {
        let mut fr = Vec::new();
        for m in row {
            let inst = Instance::new(&mut store, m, &[memory.into()]).expect("instantiate");
            fr.push(inst.get_func(&mut store, "kernel").expect("kernel"));
        }
        funcs.push(fr);
    }
    let call = |store: &mut Store<()>, f: &wasmtime::Func, p: &Prod, copy: usize| {
        let a = if p.k == 1536 { a1536 } else { a576 };
        let mut v: Vec<Val> = vec![Val::I32(a as i32)];
        v.extend(p.copies[copy].iter().map(|&o| Val::I32(o as i32)));
        v.push(Val::I32(p.out as i32));
        if f.ty(&*store).params().len() > v.len() {
            v.push(Val::I32(scratch as i32));
        }
        f.call(&mut *store, &v, &mut []).expect("kernel runs");
    };
    // The two plans agree on every product (layer 0's copy), norm-scaled as the checks are.
    for (i, p) in prods.iter().enumerate() {
        let mut outs = Vec::new();
        for fr in &funcs {
            call(&mut store, &fr[i], p, 0);
            let d = memory.data(&store);
            outs.push(
                (0..p.n as usize).map(|j| f32::from_le_bytes(d[p.out as usize + 4 * j..][..4].try_into().unwrap())).collect::<Vec<f32>>(),
            );
        }
        let worst = outs[0].iter().zip(&outs[1]).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        let norm = outs[0].iter().map(|x| x.abs()).fold(0f32, f32::max);
        println!("{} {}x{}: the plans' outputs differ by at most {worst:.2e} (largest |output| {norm:.2e})", p.name, p.k, p.n);
        assert!(worst <= 1e-2 * norm.max(1.0), "{}: the plans disagree", p.name);
    }
    // The streaming probe: a v128 sum of 512 MB in its own memory.
    let probe_wat = r#"(module (memory (export "m") 8193)
      (func (export "sum") (param $p i32) (param $n i32) (result i32)
        (local $end i32) (local $a v128) (local $b v128) (local $c v128) (local $d v128)
        (local.set $end (i32.add (local.get $p) (local.get $n)))
        (block $out (loop $top
          (br_if $out (i32.ge_u (local.get $p) (local.get $end)))
          (local.set $a (i32x4.add (local.get $a) (v128.load offset=0 (local.get $p))))
          (local.set $b (i32x4.add (local.get $b) (v128.load offset=16 (local.get $p))))
          (local.set $c (i32x4.add (local.get $c) (v128.load offset=32 (local.get $p))))
          (local.set $d (i32x4.add (local.get $d) (v128.load offset=48 (local.get $p))))
          (local.set $a (i32x4.add (local.get $a) (v128.load offset=64 (local.get $p))))
          (local.set $b (i32x4.add (local.get $b) (v128.load offset=80 (local.get $p))))
          (local.set $c (i32x4.add (local.get $c) (v128.load offset=96 (local.get $p))))
          (local.set $d (i32x4.add (local.get $d) (v128.load offset=112 (local.get $p))))
          (local.set $p (i32.add (local.get $p) (i32.const 128)))
          (br $top)))
        (i32x4.extract_lane 0 (i32x4.add (i32x4.add (local.get $a) (local.get $b)) (i32x4.add (local.get $c) (local.get $d))))))"#;
    let probe = Module::new(&engine, wat::parse_str(probe_wat).expect("probe wat")).expect("probe");
    let pi = Instance::new(&mut store, &probe, &[]).expect("probe instance");
    let pm = pi.get_memory(&mut store, "m").expect("probe memory");
    pm.data_mut(&mut store).fill(1);
    let sum = pi.get_typed_func::<(i32, i32), i32>(&mut store, "sum").expect("sum");
    let bytes = 512i32 << 20;
    sum.call(&mut store, (0, bytes)).expect("probe");
    let mut gbps: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            sum.call(&mut store, (0, bytes)).expect("probe");
            bytes as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    gbps.sort_by(f64::total_cmp);
    let probe_gbs = gbps[2];
    println!("read bandwidth (Wasm v128 streaming sum of 512 MB, wasmtime, 1 thread): {gbps:.2?} GB/s, median {probe_gbs:.2}");
    // ABBA rounds of `steps` steps a plan; per plan and product the ms of each step.
    let mut ms: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); prods.len()]; 2];
    let mut step_ms: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut run_step = |store: &mut Store<()>, plan: usize, record: bool| {
        let mut per = vec![0f64; prods.len()];
        let t0 = Instant::now();
        for layer in 0..layers {
            for (i, p) in prods.iter().enumerate().take(4) {
                let t = Instant::now();
                call(store, &funcs[plan][i], p, layer);
                per[i] += t.elapsed().as_secs_f64() * 1e3;
            }
        }
        let t = Instant::now();
        call(store, &funcs[plan][4], &prods[4], 0);
        per[4] += t.elapsed().as_secs_f64() * 1e3;
        for (i, p) in prods.iter().enumerate().skip(5) {
            for layer in 0..layers {
                let t = Instant::now();
                call(store, &funcs[plan][i], p, layer);
                per[i] += t.elapsed().as_secs_f64() * 1e3;
            }
        }
        if record {
            step_ms[plan].push(t0.elapsed().as_secs_f64() * 1e3);
            for (i, x) in per.into_iter().enumerate() {
                ms[plan][i].push(x);
            }
        }
    };
    for plan in [0, 1] {
        run_step(&mut store, plan, false);
    }
    for r in 0..rounds {
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for plan in order {
            for _ in 0..steps {
                run_step(&mut store, plan, true);
            }
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 }
    };
    println!(
        "\n{rounds} ABBA rounds of {steps} steps a plan; median ms a step, weights' GB/s and its share of the probe's {probe_gbs:.2} GB/s"
    );
    println!("| product | calls a step | weights MB | f32 ms | f32 GB/s | a16 ms | a16 GB/s | a16 of the probe | a16 / f32 time |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut total_bytes = 0u64;
    for (i, p) in prods.iter().enumerate() {
        let calls = p.copies.len() as u64;
        let b = calls * weight_bytes(p.op.name().as_str(), p.k, p.n);
        total_bytes += b;
        let (f, a) = (median(&ms[0][i]), median(&ms[1][i]));
        let gb = |m: f64| b as f64 / (m / 1e3) / 1e9;
        println!(
            "| {} {}x{} | {calls} | {:.1} | {f:.3} | {:.2} | {a:.3} | {:.2} | {:.2} | {:.3} |",
            p.name,
            p.k,
            p.n,
            b as f64 / 1e6,
            gb(f),
            gb(a),
            gb(a) / probe_gbs,
            a / f
        );
    }
    let (f, a) = (median(&step_ms[0]), median(&step_ms[1]));
    let floor = total_bytes as f64 / (probe_gbs * 1e9) * 1e3;
    println!(
        "| all products | {} | {:.1} | {f:.2} | {:.2} | {a:.2} | {:.2} | {:.2} | {:.3} |",
        prods.iter().map(|p| p.copies.len()).sum::<usize>(),
        total_bytes as f64 / 1e6,
        total_bytes as f64 / (f / 1e3) / 1e9,
        total_bytes as f64 / (a / 1e3) / 1e9,
        floor / a,
        a / f
    );
    println!("the products' floor at the probe's bandwidth: {floor:.2} ms; f32 {:.2}, a16 {:.2} of it", floor / f, floor / a);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--stream") {
        return stream(&args);
    }
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
