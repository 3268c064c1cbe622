//! GPU benchmark of the WGSL backend, as recorded in BENCHMARKS.md.
//!
//! ```text
//! cargo run --release -p webtune-research --bin gpu_bench -- gen      # generation + naga time per candidate
//! cargo run --release -p webtune-research --bin gpu_bench -- device   # matmul / q4 on the GPU (JSON lines)
//! cargo run --release -p webtune-research --bin gpu_bench -- lite     # lite space quality and order on the GPU
//! ```
//!
//! `device` searches a schedule space per shape (every candidate is checked
//! against the f64 reference before it is timed), prints one JSON line per
//! measured kernel and one `summary` line per shape, plus the worst / median /
//! best of a seeded 50-schedule sample at 4096³.

use std::time::Instant;

use serde_json::json;
use webtune_client_runtime::gpu::Gpu;
use webtune_client_runtime::{KernelDir, RunError, RunOptions, RunReport};
use webtune_compiler::reference::Rng;
use webtune_compiler::{Op, Schedule, Target, compile};

/// The K shapes a mode covers: `GPU_BENCH_SHAPES="kind:shape kind:shape"`
/// when set (to split a run across device calls), else `default`.
fn shapes(default: &[(&str, &str)]) -> Vec<(String, String)> {
    match std::env::var("GPU_BENCH_SHAPES") {
        Ok(v) => v.split_whitespace().filter_map(|ks| ks.split_once(':')).map(|(k, s)| (k.to_string(), s.to_string())).collect(),
        Err(_) => default.iter().map(|(k, s)| (k.to_string(), s.to_string())).collect(),
    }
}

fn base(op: &Op) -> Schedule {
    Schedule::default_for(op, Target::Wgsl)
}

/// The full matmul space the 50-schedule sample is drawn from.
fn matmul_space(op: &Op) -> Vec<Schedule> {
    let mut out = Vec::new();
    for x0 in [1, 2, 4, 8] {
        for y0 in [1, 2, 4, 8] {
            for x1 in [16, 32, 64, 128] {
                for y1 in [16, 32, 64, 128] {
                    for r1 in [4, 8, 16, 32] {
                        for r0 in [1, 4, 8] {
                            for vectorize in [1, 4] {
                                for (cache_read, double_buffer) in [(false, false), (true, false), (true, true)] {
                                    let s = Schedule { x0, y0, x1, y1, r1, r0, vectorize, cache_read, double_buffer, ..base(op) };
                                    if s.check(op, Target::Wgsl).is_ok() {
                                        out.push(s);
                                    }
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

/// The space the tuned figure is searched in: register-tiled, staged, vec4,
/// register tiles up to 8×16 and 16×8.
fn matmul_tuned(op: &Op) -> Vec<Schedule> {
    let mut out = Vec::new();
    for (x0, y0) in [(4, 4), (4, 8), (8, 4), (8, 8), (8, 16), (16, 8)] {
        for x1 in [32, 64, 128] {
            for y1 in [32, 64, 128] {
                for r1 in [8, 16, 32] {
                    for double_buffer in [false, true] {
                        let s = Schedule { x0, y0, x1, y1, r1, r0: r1.min(8), vectorize: 4, cache_read: true, double_buffer, ..base(op) };
                        if s.check(op, Target::Wgsl).is_ok() && (x1 / x0) * (y1 / y0) >= 64 {
                            out.push(s);
                        }
                    }
                }
            }
        }
    }
    out
}

/// The q4 search: outputs per workgroup `y1`, threads per output `split_k`,
/// weights per thread per iteration `r0`, outputs per thread `y0` (A's
/// values loaded once for all of them), packed words per load `vectorize`
/// (1, or 4: a whole scale block), the split-K reduction (a subgroup
/// butterfly wherever the adapter's subgroups hold split_k lanes) and
/// register double buffering of the next K step.
/// GPU_BENCH_Q4_OUTPUTS / GPU_BENCH_Q4_VEC override the y0 / vectorize lists.
fn q4_space(op: &Op, subgroup_min: Option<u32>) -> Vec<Schedule> {
    let list = |var: &str, default: &[u32]| -> Vec<u32> {
        std::env::var(var).ok().map(|v| v.split_whitespace().filter_map(|x| x.parse().ok()).collect()).unwrap_or_else(|| default.to_vec())
    };
    let outputs = list("GPU_BENCH_Q4_OUTPUTS", &[1, 2, 4]);
    let vecs = list("GPU_BENCH_Q4_VEC", &[1, 4]);
    // Register double buffering of the next K step off (0) and on (1).
    let dbs = list("GPU_BENCH_Q4_DB", &[0, 1]);
    let mut out = Vec::new();
    for &y0 in &outputs {
        for groups in [1, 2, 4, 8] {
            for split_k in [4, 8, 16, 32, 64] {
                for r0 in [32, 64, 128, 256] {
                    for (&vectorize, &db) in vecs.iter().flat_map(|v| dbs.iter().map(move |d| (v, d))) {
                        let y1 = groups * y0;
                        let subgroup_reduce = subgroup_min.is_some_and(|m| split_k <= m);
                        let double_buffer = db == 1;
                        let s =
                            Schedule { x0: 1, x1: 1, y0, y1, split_k, r0, r1: r0, vectorize, subgroup_reduce, double_buffer, ..base(op) };
                        let t = groups * split_k;
                        // GPU_BENCH_Q4_QUICK: only the region where the bests lie
                        // (double buffering needs two steps: shorter ones too).
                        let quick = std::env::var_os("GPU_BENCH_Q4_QUICK").is_none()
                            || ([1, 2, 4].contains(&groups) && [8, 16, 32].contains(&split_k) && (r0 >= 64 || (double_buffer && r0 == 32)));
                        if quick && (32..=256).contains(&t) && s.check(op, Target::Wgsl).is_ok() {
                            out.push(s);
                        }
                    }
                }
            }
        }
    }
    out
}

/// A study's variants from `var` (default `default`): space-separated
/// lists of comma-separated numbers, each given to `make` (None skips it).
fn variants_from_env<V>(var: &str, default: &str, make: impl Fn(&[u32]) -> Option<V>) -> Vec<V> {
    std::env::var(var)
        .unwrap_or_else(|_| default.into())
        .split_whitespace()
        .filter_map(|v| make(&v.split(',').filter_map(|x| x.parse().ok()).collect::<Vec<u32>>()))
        .collect()
}

/// The q4 decode shapes of the studies: `GPU_BENCH_Q4_SHAPES="1,K,N ..."`,
/// else issue 3's three.
fn q4_shapes() -> Vec<String> {
    std::env::var("GPU_BENCH_Q4_SHAPES")
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_else(|_| ["1,4096,4096", "1,3072,9216", "1,8192,3072"].map(str::to_string).to_vec())
}

/// Rounds of `a` then `b`, alternately (3 rounds); each side's results.
fn alternately(mut a: impl FnMut() -> Option<f64>, mut b: impl FnMut() -> Option<f64>) -> (Vec<f64>, Vec<f64>) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        x.extend(a());
        y.extend(b());
    }
    (x, y)
}

/// The smallest of `v` (infinity when empty).
fn min_of(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Whether `device` runs `part` (big, sample, shapes, q4, checks, q4checks, q4shapes, q4smem, q4rows, q4stream, q4cols, q4onestep, q4rowsloop, ceiling, fma, epilogue, f16math):
/// `GPU_BENCH_PARTS="big q4"` when set, else every part.
fn part(name: &str) -> bool {
    std::env::var("GPU_BENCH_PARTS").map_or(true, |v| v.split_whitespace().any(|p| p == name))
}

/// Median ms of `s` on `op`, nothing printed (the studies' baseline).
fn measure_quiet(gpu: &Gpu, op: &Op, s: &Schedule) -> Option<f64> {
    let k = compile(op, Target::Wgsl, s).ok()?;
    let opts = RunOptions { reps: 10, warmup: 2, warmup_ms: 50.0, min_sample_ms: 5.0, seed: 7, ..RunOptions::default() };
    gpu.run(&KernelDir::from_kernel(k), &opts).ok().filter(|r| r.correct).map(|r| r.median_ms)
}

fn measure(gpu: &Gpu, op: &Op, s: &Schedule, reps: usize) -> Option<RunReport> {
    let k = match compile(op, Target::Wgsl, s) {
        Ok(k) => k,
        Err(e) => {
            println!("{}", json!({"error": e.to_string(), "config": s}));
            return None;
        }
    };
    let opts = RunOptions { reps, warmup: 2, warmup_ms: 100.0, min_sample_ms: 5.0, seed: 7, ..RunOptions::default() };
    match gpu.run(&KernelDir::from_kernel(k), &opts) {
        Ok(r) => {
            println!("{}", json!({"kernel": r, "config": s}));
            if !r.correct {
                println!("{}", json!({"error": "WRONG RESULT", "config": s}));
                return None;
            }
            Some(r)
        }
        Err(e) => {
            println!("{}", json!({"error": e.to_string(), "config": s}));
            None
        }
    }
}

/// Best of `space`, then the best re-measured with more samples.
fn best(gpu: &Gpu, op: &Op, space: &[Schedule], label: &str) -> Option<(Schedule, RunReport)> {
    let t = Instant::now();
    let mut all: Vec<(Schedule, RunReport)> = space.iter().filter_map(|s| measure(gpu, op, s, 5).map(|r| (s.clone(), r))).collect();
    all.sort_by(|a, b| a.1.median_ms.total_cmp(&b.1.median_ms));
    let (s, _) = all.first()?.clone();
    let r = measure(gpu, op, &s, 30)?;
    println!(
        "{}",
        json!({"summary": label, "op": op.slug(), "candidates": space.len(), "measured": all.len(),
               "best_ms": r.median_ms, "best_gflops": r.gflops, "spread": r.spread, "config": s,
               "search_s": t.elapsed().as_secs_f64()})
    );
    Some((s, r))
}

fn device() {
    let mut gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("gpu_bench: {e}");
            std::process::exit(1);
        }
    };
    println!("{}", json!({"adapter": gpu.adapter_name(), "timestamps": gpu.has_timestamps(), "subgroup_min_size": gpu.subgroups()}));
    let big = Op::parse("matmul", "4096,4096,4096").expect("shape");
    if part("big") {
        best(&gpu, &big, &matmul_tuned(&big), "matmul 4096^3 tuned");
    }
    if part("sample") {
        sample_spread(&gpu, &big);
    }
    if part("shapes") {
        small_shapes(&gpu);
    }
    if part("q4") {
        q4_decode(&gpu);
    }
    if part("checks") {
        bounds_check_cost(&mut gpu, &big);
    }
    if part("q4checks") {
        q4_bounds_check_cost(&mut gpu);
    }
    if part("q4shapes") {
        q4_load_shapes(&gpu);
    }
    if part("q4smem") {
        q4_smem_study(&gpu);
    }
    if part("q4rows") {
        q4_rows_study(&gpu);
    }
    if part("q4stream") {
        q4_stream_study(&gpu);
    }
    if part("q4cols") {
        q4_cols_study(&gpu);
    }
    if part("q4onestep") {
        q4_one_step(&gpu);
    }
    if part("q4rowsloop") {
        q4_rows_loop_study(&gpu);
    }
    if part("ceiling") {
        read_ceiling(&gpu);
    }
    if part("fma") {
        fma_ceiling(&gpu);
    }
    if part("epilogue") {
        epilogue_cost(&gpu);
    }
    if part("f16math") {
        f16_math_probe(&gpu);
    }
}

/// Median ms of two prepared kernels timed in alternation: 500 ms of load on
/// the first, then `rounds` rounds of ten samples each (≥ 5 ms), the median
/// of each kernel's round medians. The H200's clocks make anything shorter
/// unreliable.
fn alternate(gpu: &Gpu, pair: [&webtune_client_runtime::gpu::Prepared; 2], rounds: usize) -> [Option<f64>; 2] {
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let warm = RunOptions { reps: 1, warmup: 2, warmup_ms: 500.0, min_sample_ms: 5.0, seed: 7, ..RunOptions::default() };
    let opts = RunOptions { reps: 10, warmup: 1, warmup_ms: 0.0, min_sample_ms: 5.0, seed: 7, ..RunOptions::default() };
    let _ = gpu.time(pair[0], &warm);
    let mut rounds_ms = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (p, v) in pair.iter().zip(&mut rounds_ms) {
            if let Ok(mut t) = gpu.time(p, &opts) {
                v.extend(med(&mut t.samples_ms));
            }
        }
    }
    rounds_ms.map(|mut v| med(&mut v))
}

/// A probe, not a kernel family: what f16 arithmetic would give the `+f16`
/// matmul. Each of the first lite candidates' WGSL is rewritten so that
/// every `f32` is an `f16` (registers, workgroup tiles, literals: f16
/// accumulation over all of K) and timed beside the kernel as compiled
/// (f16 storage, f32 arithmetic), both prepared once and alternated after
/// sustained load; the error of each against the f64 reference at 64
/// sampled outputs is printed beside it.
fn f16_math_probe(gpu: &Gpu) {
    if !gpu.has_f16() {
        println!("{}", json!({"f16math": "no shader-f16"}));
        return;
    }
    let fp = webtune_tuner::presets::get("h100").expect("preset");
    let device = webtune_tuner::Device::from_fingerprint(&fp).expect("preset is a device");
    let settings = webtune_tuner::Settings::builtin(Target::Wgsl);
    let list = std::env::var("GPU_BENCH_F16_SHAPES").unwrap_or_else(|_| "4096,4096,4096 384,768,768 128,4096,4096".into());
    for shape in list.split_whitespace() {
        let op = Op::parse("matmul+f16", shape).expect("shape");
        let inputs = webtune_compiler::reference::inputs(&op, 7);
        let len = op.args().last().map_or(1, |a| a.elems());
        let mut rng = Rng::new(3);
        let positions: Vec<u64> = [0, len - 1].into_iter().chain((0..62).map(|_| rng.next_u64() % len)).collect();
        let want: Vec<(f64, f64)> = positions.iter().map(|&p| webtune_compiler::reference::output_at(&op, 7, p)).collect();
        let err = |out: &[u32]| {
            positions.iter().zip(&want).map(|(&p, (w, s))| (f32::from_bits(out[p as usize]) as f64 - w).abs() / s).fold(0.0, f64::max)
        };
        let space = webtune_tuner::lite_space(&op, Target::Wgsl, &device, &settings);
        // The f32-arithmetic candidates: the space now leads with their
        // f16-arithmetic twins, which have nothing left to rewrite.
        for s in space.schedules.iter().filter(|s| !s.f16_acc).take(6) {
            let Ok(k) = compile(&op, Target::Wgsl, s) else { continue };
            let text = String::from_utf8(k.bytes.clone()).expect("WGSL is text");
            let mut half = text.replace("f32", "f16");
            // Float literals (`0f`, `1.5f`, `1e-3f`) take the f16 suffix.
            let bytes = half.clone().into_bytes();
            let mut out = String::with_capacity(bytes.len());
            for (i, &c) in bytes.iter().enumerate() {
                let lit = c == b'f'
                    && i > 0
                    && (bytes[i - 1].is_ascii_digit() || bytes[i - 1] == b'.')
                    && !bytes.get(i + 1).is_some_and(|n| n.is_ascii_alphanumeric() || *n == b'_')
                    && {
                        // The token must start with a digit (not be a name like `v_x1f`).
                        let start = bytes[..i]
                            .iter()
                            .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'.' || *b == b'_' || *b == b'-'))
                            .map_or(0, |j| j + 1);
                        bytes[start].is_ascii_digit()
                    };
                out.push(if lit { 'h' } else { c as char });
            }
            half = out;
            let dispatch = k.meta.dispatch.expect("WGSL dispatch");
            let prepared: Vec<_> = [&text, &half].iter().map(|src| gpu.prepare_op_source(src, dispatch, &op, &inputs)).collect();
            let (Ok(p32), Ok(p16)) = (&prepared[0], &prepared[1]) else {
                let e: Vec<String> = prepared.iter().filter_map(|p| p.as_ref().err().map(|e| e.to_string())).collect();
                println!("{}", json!({"f16math": shape, "error": e, "config": s}));
                continue;
            };
            let (e32, e16) = (gpu.output(p32).map(|o| err(&o)), gpu.output(p16).map(|o| err(&o)));
            let [Some(ta), Some(tb)] = alternate(gpu, [p32, p16], 3) else { continue };
            println!(
                "{}",
                json!({"f16math": shape, "f32_arith_us": ta * 1e3, "f16_arith_us": tb * 1e3, "speedup": ta / tb,
                       "f32_arith_tflops": op.flops() as f64 / ta / 1e9, "f16_arith_tflops": op.flops() as f64 / tb / 1e9,
                       "max_rel_err_f32_arith": e32.ok(), "max_rel_err_f16_arith": e16.ok(), "config": s})
            );
        }
    }
}

/// What a fused epilogue costs on the GPU (issue 22): the plain op's first
/// lite candidates (`h100` preset), each pair checked and prepared once,
/// then timed with and without the epilogue in alternation ([`alternate`],
/// five rounds); the fastest plain
/// schedule's pair is the headline. `GPU_BENCH_EPILOGUE_SHAPES="op+suffix:shape ..."`.
fn epilogue_cost(gpu: &Gpu) {
    let fp = webtune_tuner::presets::get("h100").expect("preset");
    let device = webtune_tuner::Device::from_fingerprint(&fp).expect("preset is a device");
    let settings = webtune_tuner::Settings::builtin(Target::Wgsl);
    let list = std::env::var("GPU_BENCH_EPILOGUE_SHAPES").unwrap_or_else(|_| {
        "matmul+bias+gelu:384,768,1536 matmul+bias+gelu+residual:384,1536,768 matmul+bias:384,768,2304 matmul+bias+gelu:4096,4096,4096"
            .into()
    });
    for (name, shape) in list.split_whitespace().filter_map(|ks| ks.split_once(':')) {
        let fused = Op::parse(name, shape).expect("shape");
        let plain = fused.base();
        let space = webtune_tuner::lite_space(&plain, Target::Wgsl, &device, &settings);
        let mut rows = Vec::new();
        for s in space.schedules.iter().take(6) {
            // Checked against the reference first, then prepared once each.
            let prepared: Option<Vec<_>> = [&plain, &fused]
                .iter()
                .map(|op| {
                    let k = KernelDir::from_kernel(compile(op, Target::Wgsl, s).ok()?);
                    let r = gpu
                        .run(&k, &RunOptions { reps: 1, warmup: 1, warmup_ms: 0.0, min_sample_ms: 0.0, seed: 7, ..RunOptions::default() })
                        .ok()?;
                    let inputs = webtune_compiler::reference::inputs(op, 7);
                    r.correct.then(|| gpu.prepare(&k, &inputs).ok()).flatten()
                })
                .collect();
            let Some(prepared) = prepared else {
                println!("{}", json!({"error": "epilogue pair failed", "config": s}));
                continue;
            };
            if let [Some(pm), Some(fm)] = alternate(gpu, [&prepared[0], &prepared[1]], 5) {
                rows.push((pm, fm, s.clone()));
            }
        }
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ratios: Vec<f64> = rows.iter().map(|(p, f, _)| f / p).collect();
        if let Some((p, f, s)) = rows.first() {
            println!(
                "{}",
                json!({"summary": format!("epilogue {name} {shape}"), "plain_us": p * 1e3, "fused_us": f * 1e3, "fused_over_plain": f / p,
                       "ratios_first6": ratios, "config": s})
            );
        }
    }
}

/// The arithmetic ceiling of this adapter in f32 and in f16 (issue 22): each
/// thread runs `CHAINS` independent multiply-add chains of one vector type
/// for `ITERS` steps, every lane of every chain summed into its output so
/// that the driver can fold nothing away. `GPU_BENCH_FMA_GROUPS` workgroups
/// of 256 (default 4096: a million threads; a CPU adapter wants fewer).
fn fma_ceiling(gpu: &Gpu) {
    const CHAINS: u32 = 8;
    const ITERS: u32 = 1024;
    let groups: u32 = std::env::var("GPU_BENCH_FMA_GROUPS").ok().and_then(|v| v.parse().ok()).unwrap_or(4096);
    let mut rates = serde_json::Map::new();
    for (ty, lanes, f16) in [("vec4<f32>", 4, false), ("vec4<f16>", 4, true), ("vec2<f16>", 2, true)] {
        if f16 && !gpu.has_f16() {
            println!("{}", json!({"fma": ty, "error": "no shader-f16"}));
            continue;
        }
        let scalar = if f16 { "f16" } else { "f32" };
        let chains: String = (0..CHAINS).map(|c| format!("  var a{c} = {ty}({scalar}(s + {}.0 * 0.0078125));\n", c + 1)).collect();
        let steps: String = (0..CHAINS).map(|c| format!("    a{c} = fma(a{c}, m, k);\n")).collect();
        let sum: String = (0..CHAINS).map(|c| format!(" + dot(vec{lanes}<f32>(a{c}), vec{lanes}<f32>(1.0))")).collect();
        let src = format!(
            "{enable}@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n\
             @compute @workgroup_size(256)\n\
             fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{\n\
               let s = f32(gid.x & 255u) * 0.0001;\n\
               let m = {ty}({scalar}(0.999));\n  let k = {ty}({scalar}(0.001 + s));\n\
             {chains}  for (var i = 0u; i < {ITERS}u; i++) {{\n{steps}  }}\n\
               o[gid.x] = 0.0{sum};\n\
             }}\n",
            enable = if f16 { "enable f16;\n" } else { "" }
        );
        let flops = 2.0 * (groups as f64 * 256.0) * (ITERS * CHAINS * lanes) as f64;
        match time_source(gpu, &src, groups, &[vec![0u32; groups as usize * 256]], 100.0) {
            Ok(ms) => {
                let tflops = flops / (ms * 1e9);
                rates.insert(ty.to_string(), json!(tflops));
                println!("{}", json!({"fma": ty, "groups": groups, "median_ms": ms, "tflops": tflops}));
            }
            Err(e) => println!("{}", json!({"fma": ty, "error": e.to_string()})),
        }
    }
    let ratio = |t: &str| rates.get(t).and_then(|v| v.as_f64()).zip(rates.get("vec4<f32>").and_then(|v| v.as_f64())).map(|(a, b)| a / b);
    println!(
        "{}",
        json!({"summary": "fma ceiling", "adapter": gpu.adapter_name(), "tflops": rates, "f16x4_over_f32x4": ratio("vec4<f16>"), "f16x2_over_f32x4": ratio("vec2<f16>")})
    );
}

/// Median time (ms) of a hand-written WGSL kernel over `groups` workgroups,
/// its bindings `args` in order (the last the output), timed like every
/// kernel (back-to-back dispatches between GPU timestamps).
fn time_source(gpu: &Gpu, src: &str, groups: u32, args: &[Vec<u32>], warmup_ms: f64) -> Result<f64, RunError> {
    let opts = RunOptions { reps: 10, warmup: 2, warmup_ms, min_sample_ms: 5.0, ..RunOptions::default() };
    let mut v = gpu.prepare_source(src, "main", [groups, 1, 1], args).and_then(|p| gpu.time(&p, &opts))?.samples_ms;
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

/// One JSON line of the q4 load studies: the kernel's median or its error.
fn print_study(summary: String, shape: serde_json::Value, r: Result<f64, RunError>) {
    match r {
        Ok(ms) => println!("{}", json!({"summary": summary, "shape": shape, "median_us": ms * 1e3})),
        Err(e) => println!("{}", json!({"summary": summary, "shape": shape, "error": e.to_string()})),
    }
}

/// Seeded words that read as finite floats (exponent below 0x7F), for the
/// load studies' buffers.
fn finite_words(rng: &mut Rng, len: u32) -> Vec<u32> {
    (0..len).map(|_| rng.next_u64() as u32 & 0x3FFF_FFFF).collect()
}

/// One variant of the q4 decode kernel's loads (see [`q4_load_shapes`]).
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct LoadShape {
    /// Packed words per lane and load: 1 (a `u32`) or 4 (a `vec4<u32>`).
    words: u32,
    /// Output rows per thread.
    rows: u32,
    /// Warps per workgroup (each warp its own rows).
    warps: u32,
    scales: bool,
    a: bool,
    /// One word per lane pair: lane l takes half l & 1 of word l / 2, so
    /// that the lanes' A reads are neighbouring 16-byte pieces (whole
    /// sectors) at the price of twice the weight and scale load instructions.
    half: bool,
}

/// The loads of a q4 decode kernel, every step unrolled, with two
/// multiply-adds per loaded value: which part of the access pattern costs
/// the time. Lanes split K (32 per row); nothing checks the result.
fn q4_load_shapes(gpu: &Gpu) {
    let v = |words, rows, warps, scales, a| LoadShape { words, rows, warps, scales, a, half: false };
    let h = |rows, warps| LoadShape { words: 1, rows, warps, scales: true, a: true, half: true };
    let variants = [
        v(1, 2, 1, true, true),
        v(1, 2, 1, true, false),
        v(1, 2, 1, false, false),
        v(1, 2, 8, false, false),
        v(4, 2, 1, false, false),
        v(4, 2, 8, false, false),
        v(4, 1, 8, false, false),
        v(4, 2, 1, true, true),
        v(4, 2, 8, true, false),
        v(1, 1, 1, true, true),
        h(2, 1),
        h(2, 8),
        h(4, 1),
        v(1, 4, 1, true, true),
    ];
    for shape in ["1,4096,4096", "1,8192,3072"] {
        let op = Op::parse("matmul_q4", shape).expect("shape");
        let (_, _, k, n) = op.bmkn();
        let (kw, kb) = (k / 8, k / 32);
        for ls in variants {
            let steps = if ls.half { kw / 16 } else { kw / (32 * ls.words) };
            let rows_per_group = ls.rows * ls.warps;
            let mut body = String::new();
            for u in 0..steps {
                for r in 0..ls.rows {
                    let wi = if ls.half { format!("((lane >> 1u) + {}u)", 16 * u) } else { format!("(lane + {}u)", 32 * u) };
                    let row = format!("(n0 + {r}u)");
                    let (wexpr, first_word) = if ls.words == 4 {
                        (format!("vec4<f32>(bitcast<vec4<f32>>(w4[{row} * {}u + {wi}] | vec4(0x3F800000u)))", kw / 4), format!("{wi} * 4u"))
                    } else {
                        (format!("vec4(bitcast<f32>(w[{row} * {kw}u + {wi}] | 0x3F800000u))"), wi.clone())
                    };
                    let sc = if ls.scales { format!("s[{row} * {kb}u + ({first_word} >> 2u)]") } else { "1.0".into() };
                    // A's values of the loaded words: 2 vec4 per word.
                    let av = if ls.a && ls.half {
                        format!("a[2u * {first_word} + (lane & 1u)]")
                    } else if ls.a {
                        (0..2 * ls.words).map(|i| format!("a[2u * {first_word} + {i}u]")).collect::<Vec<_>>().join(" + ")
                    } else {
                        format!("vec4(f32({first_word}))")
                    };
                    body.push_str(&format!("acc{r} = fma(fma({av}, {wexpr}, acc{r}), vec4({sc}), acc{r});\n"));
                }
            }
            let accs: String = (0..ls.rows).map(|r| format!("var acc{r} = vec4<f32>(0.0);\n")).collect();
            let sum: String = (0..ls.rows).map(|r| format!(" + dot(acc{r}, acc{r})")).collect();
            let src = format!(
                "@group(0) @binding(0) var<storage> a: array<vec4<f32>>;\n\
                 @group(0) @binding(1) var<storage> w: array<u32>;\n\
                 @group(0) @binding(2) var<storage> w4: array<vec4<u32>>;\n\
                 @group(0) @binding(3) var<storage> s: array<f32>;\n\
                 @group(0) @binding(4) var<storage, read_write> o: array<f32>;\n\
                 @compute @workgroup_size({threads})\n\
                 fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{\n\
                 let lane = lid.x % 32u;\n\
                 let n0 = wid.x * {rows_per_group}u + (lid.x / 32u) * {rows}u;\n\
                 {accs}{body}\
                 o[wid.x * {threads}u + lid.x] = a[0].x + w[0] + w4[0].x + s[0]{sum};\n}}\n",
                threads = 32 * ls.warps,
                rows = ls.rows,
            );
            let src = src.replace("a[0].x + w[0] + w4[0].x + s[0]", "a[0].x + f32(w[0] + w4[0].x) + s[0]");
            let rng = &mut Rng::new(5);
            let groups = n / rows_per_group;
            let args = [
                finite_words(rng, k),
                finite_words(rng, n * kw),
                finite_words(rng, n * kw),
                finite_words(rng, n * kb),
                vec![0u32; (groups * 32 * ls.warps) as usize],
            ];
            print_study(format!("q4 load shape {shape}"), json!(ls), time_source(gpu, &src, groups, &args, 50.0));
        }
    }
}

/// The q4 kernel's loads with A staged in workgroup memory: per chunk of K
/// (2048 values or fewer, dividing K) the workgroup copies A with whole-vec4
/// reads in order and stores each word's two vec4 halves in two padded
/// arrays, so that the lanes (one word each, neighbours on neighbouring
/// words) then read A from workgroup memory without bank conflicts. Same
/// light arithmetic as [`q4_load_shapes`].
fn q4_smem_study(gpu: &Gpu) {
    for shape in ["1,4096,4096", "1,8192,3072", "1,3072,9216"] {
        let op = Op::parse("matmul_q4", shape).expect("shape");
        let (_, _, k, n) = op.bmkn();
        let (kw, kb) = (k / 8, k / 32);
        // At most 2048 values (8 KiB, two padded halves within the 16 KiB limit), dividing K.
        let chunk = [2048u32, 1024, 512].into_iter().find(|c| k % c == 0).expect("K is a multiple of 512 here");
        let cw = chunk / 8;
        for (rows, warps) in [(2u32, 1u32), (2, 4), (2, 8), (4, 4), (1, 8)] {
            let threads = 32 * warps;
            let rpg = rows * warps;
            let mut body = String::new();
            for u in 0..cw / 32 {
                body.push_str(&format!(
                    "{{ let wl = lane + {}u; let a0 = sa[wl]; let a1 = sa[{} + wl]; let wg = c / 8u + wl;\n",
                    32 * u,
                    cw + 1
                ));
                for r in 0..rows {
                    body.push_str(&format!(
                        "acc{r} = fma(fma(a0, vec4(bitcast<f32>(w[(n0 + {r}u) * {kw}u + wg] | 0x3F800000u)), a1), vec4(s[(n0 + {r}u) * {kb}u + (wg >> 2u)]), acc{r});\n"
                    ));
                }
                body.push_str("}\n");
            }
            let accs: String = (0..rows).map(|r| format!("var acc{r} = vec4<f32>(0.0);\n")).collect();
            let sum: String = (0..rows).map(|r| format!(" + dot(acc{r}, acc{r})")).collect();
            let src = format!(
                "@group(0) @binding(0) var<storage> a: array<vec4<f32>>;\n\
                 @group(0) @binding(1) var<storage> w: array<u32>;\n\
                 @group(0) @binding(2) var<storage> s: array<f32>;\n\
                 @group(0) @binding(3) var<storage, read_write> o: array<f32>;\n\
                 var<workgroup> sa: array<vec4<f32>, {slots}>;\n\
                 @compute @workgroup_size({threads})\n\
                 fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{\n\
                 let t = lid.x;\n\
                 let lane = t % 32u;\n\
                 let n0 = wid.x * {rpg}u + (t / 32u) * {rows}u;\n\
                 {accs}\
                 for (var c = 0u; c < {k}u; c += {chunk}u) {{\n\
                   workgroupBarrier();\n\
                   for (var q = t; q < {quads}u; q += {threads}u) {{ sa[(q & 1u) * {pitch}u + (q >> 1u)] = a[c / 4u + q]; }}\n\
                   workgroupBarrier();\n\
                   {body}\
                 }}\n\
                 o[wid.x * {threads}u + t] = 0.0{sum};\n}}\n",
                slots = 2 * (cw + 1),
                quads = chunk / 4,
                pitch = cw + 1,
            );
            let rng = &mut Rng::new(5);
            let groups = n / rpg;
            let args =
                [finite_words(rng, k), finite_words(rng, n * kw), finite_words(rng, n * kb), vec![0u32; (groups * threads) as usize]];
            let what = json!({"rows": rows, "warps": warps, "chunk": chunk});
            print_study(format!("q4 loads, A staged {shape}"), what, time_source(gpu, &src, groups, &args, 50.0));
        }
    }
}

/// Appends the WGSL of a reduce-scatter of `rows` sums `acc0..` (a power of
/// two, at most `sg`) across a subgroup of `sg` lanes: afterwards `acc0` of
/// each lane holds the whole sum of one row. Returns the WGSL expressions of
/// that row and of whether the lane is the one that stores it.
fn reduce_scatter(s: &mut String, rows: u32, sg: u32) -> (String, String) {
    let (mut cnt, mut mask) = (rows, sg / 2);
    while cnt > 1 {
        let half = cnt / 2;
        *s += &format!("let bit{mask} = (lane & {mask}u) != 0u;\n");
        for i in 0..half {
            let j = i + half;
            *s +=
                &format!("acc{i} = select(acc{i}, acc{j}, bit{mask}) + subgroupShuffleXor(select(acc{j}, acc{i}, bit{mask}), {mask}u);\n");
        }
        cnt = half;
        mask /= 2;
    }
    while mask >= 1 {
        *s += &format!("acc0 += subgroupShuffleXor(acc0, {mask}u);\n");
        mask /= 2;
    }
    let shift = sg.trailing_zeros() - rows.trailing_zeros();
    let low = (1u32 << shift) - 1;
    (format!("(lane >> {shift}u)"), format!("(lane & {low}u) == 0u"))
}

/// WGSL for nibble position `p` of the study kernels' half-word `src`,
/// unpacked in place as the generator does: `(nibble − 8)·16^p`. With
/// `one_op`, `src` already has 2^23's bits or-ed in and one and picks the
/// nibble; without, an and and an or.
fn nibble_wgsl(src: &str, p: usize, one_op: bool) -> String {
    let bias = 8_388_608.0 + 8.0 * 16f64.powi(p as i32);
    let mask = 15u32 << (4 * p);
    if one_op {
        format!("(bitcast<f32>({src} & {}u) - {bias:.1})", mask | 0x4B00_0000)
    } else {
        format!("(bitcast<f32>(({src} & {mask}u) | 0x4B000000u) - {bias:.1})")
    }
}

/// WGSL adding a unit's four position sums `p0..p3` (Horner, by 1/16) times
/// its scale to `acc`.
fn combine_wgsl(acc: &str, scale: &str) -> String {
    format!("{acc} = fma(fma(fma(fma(p3, 0.0625, p2), 0.0625, p1), 0.0625, p0), {scale}, {acc});\n")
}

/// One variant of the rows-loop q4 kernel (see [`q4_rows_study`]).
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct RowsShape {
    /// Scale blocks (32 values of K) per thread: blocks t, t + L, ... of
    /// each row, L = K / 32 / blocks threads per workgroup.
    blocks: u32,
    /// Outputs (rows of W) per workgroup; every thread serves all of them.
    rows: u32,
    /// Rows whose loads are written before their arithmetic.
    group: u32,
    /// Reduce-scatter (each lane ends with one row's sum) instead of a
    /// butterfly per row.
    scatter: bool,
    /// Software pipelining: the loads of the next group of rows are
    /// written before the arithmetic of the current one.
    pipe: bool,
    /// One logic instruction per nibble (as the generator now unpacks),
    /// and the first group's words read before A (as the CUDA twin in
    /// `scripts/device/q4_cuda_pipe.cu` does).
    one_op: bool,
}

/// The rows-loop q4 decode kernel: each thread loads its slice of A into
/// registers once and walks `rows` rows of W with it, so A's reads from
/// cache are paid once per thread rather than once per weight word; the
/// weights are read as whole `vec4<u32>` scale blocks, neighbouring threads
/// on neighbouring blocks. The K sums are reduced in each subgroup (32
/// lanes) and then across the workgroup's subgroups in workgroup memory.
fn q4_rows_source(k: u32, n: u32, v: RowsShape, sg: u32) -> Option<String> {
    let kb = k / 32;
    if !kb.is_multiple_of(v.blocks)
        || !v.rows.is_multiple_of(v.group)
        || !n.is_multiple_of(v.rows)
        || (v.scatter && v.rows > sg)
        || !v.rows.is_power_of_two()
    {
        return None;
    }
    let lanes = kb / v.blocks;
    if !lanes.is_multiple_of(sg) || lanes > 256 {
        return None;
    }
    let warps = lanes / sg;
    // Thread t < rows adds row t's subgroup sums up.
    if warps > 1 && v.rows > lanes {
        return None;
    }
    let (b, r) = (v.blocks, v.rows);
    let mut s = String::new();
    let c = ["x", "y", "z", "w"];
    let mut a_loads = String::new();
    for bi in 0..b {
        for i in 0..8 {
            a_loads += &format!("let a{bi}_{i} = a[(t + {}u) * 8u + {i}u];\n", lanes * bi);
        }
    }
    // A first, or (one_op) after the first group's words.
    if !v.one_op {
        s += &a_loads;
    }
    for ri in 0..r {
        s += &format!("var acc{ri} = 0.0;\n");
    }
    let loads = |g0: u32| -> String {
        let mut o = String::new();
        for ri in g0..(g0 + v.group).min(r) {
            for bi in 0..b {
                let at = format!("(n0 + {ri}u) * {kb}u + t + {}u", lanes * bi);
                o += &format!("let w{ri}_{bi} = w[{at}];\nlet s{ri}_{bi} = sc[{at}];\n");
            }
        }
        o
    };
    if v.pipe {
        s += &loads(0);
    }
    for g0 in (0..r).step_by(v.group as usize) {
        s += &loads(if v.pipe { g0 + v.group } else { g0 });
        if v.one_op && g0 == 0 {
            s += &a_loads;
        }
        for ri in g0..g0 + v.group {
            for bi in 0..b {
                s += "{\n";
                for p in 0..4 {
                    s += &format!("var p{p} = 0.0;\n");
                }
                for (i, ci) in c.iter().enumerate() {
                    if v.one_op {
                        s += &format!("let l{i} = w{ri}_{bi}.{ci} | 0x4B000000u;\nlet h{i} = (w{ri}_{bi}.{ci} >> 16u) | 0x4B000000u;\n");
                    } else {
                        s += &format!("let l{i} = w{ri}_{bi}.{ci};\nlet h{i} = l{i} >> 16u;\n");
                    }
                    for p in 0..4 {
                        for (half, src) in [(0, "l"), (1, "h")] {
                            s += &format!(
                                "p{p} = fma({}, a{bi}_{}.{}, p{p});\n",
                                nibble_wgsl(&format!("{src}{i}"), p, v.one_op),
                                2 * i + half,
                                c[p]
                            );
                        }
                    }
                }
                s += &format!("{}}}\n", combine_wgsl(&format!("acc{ri}"), &format!("s{ri}_{bi}")));
            }
        }
    }
    // Reduction inside the subgroup; `row` is the row whose sum a lane
    // holds afterwards, `writer` whether it stores it.
    let (row, writer) = if v.scatter {
        reduce_scatter(&mut s, r, sg)
    } else {
        for ri in 0..r {
            let mut m = sg / 2;
            while m >= 1 {
                s += &format!("acc{ri} += subgroupShuffleXor(acc{ri}, {m}u);\n");
                m /= 2;
            }
        }
        (String::new(), "lane == 0u".to_string())
    };
    let stores = |target: &str| -> String {
        if v.scatter {
            format!("if ({writer}) {{ {target}[{row}] = acc0; }}\n")
        } else {
            let mut o = format!("if ({writer}) {{\n");
            for ri in 0..r {
                o += &format!("{target}[{ri}u] = acc{ri};\n");
            }
            o + "}\n"
        }
    };
    let (decl, tail) = if warps == 1 {
        (String::new(), stores("c").replace("c[", "c[n0 + "))
    } else {
        let mut t = stores("red").replace("red[", &format!("red[(t / {sg}u) * {r}u + "));
        t += "workgroupBarrier();\n";
        let sum: Vec<String> = (0..warps).map(|wi| format!("red[{}u + t]", wi * r)).collect();
        t += &format!("if (t < {r}u) {{ c[n0 + t] = {}; }}\n", sum.join(" + "));
        (format!("var<workgroup> red: array<f32, {}>;\n", warps * r), t)
    };
    Some(format!(
        "@group(0) @binding(0) var<storage> a: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage> w: array<vec4<u32>>;\n\
         @group(0) @binding(2) var<storage> sc: array<f32>;\n\
         @group(0) @binding(3) var<storage, read_write> c: array<f32>;\n\
         {decl}\
         @compute @workgroup_size({lanes})\n\
         fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{\n\
         let t = lid.x;\n\
         let lane = t % {sg}u;\n\
         let n0 = wid.x * {r}u;\n\
         {s}{tail}}}\n"
    ))
}

/// The rows q4 kernel (A in registers) against the generator's first lite
/// candidate (see [`study_against_generator`]).
fn q4_rows_study(gpu: &Gpu) {
    // The subgroup width the kernels assume: 32 (NVIDIA), or the adapter's if smaller.
    let sg = gpu.subgroups().unwrap_or(32).min(32);
    // GPU_BENCH_Q4_ROWS="blocks,rows,group,scatter,pipe[,one_op] ..." (0/1 flags) picks the variants.
    let variants = variants_from_env("GPU_BENCH_Q4_ROWS", "1,8,4,1,1 1,16,4,1,1 1,16,8,1,1 1,16,16,1,0 1,32,4,1,1 3,8,2,1,1", |f| {
        (f.len() >= 5).then(|| RowsShape {
            blocks: f[0],
            rows: f[1],
            group: f[2],
            scatter: f[3] == 1,
            pipe: f[4] == 1,
            one_op: f.get(5) == Some(&1),
        })
    });
    study_against_generator(gpu, "q4 rows", &variants, |k, n, v| q4_rows_source(k, n, *v, sg).map(|src| (src, n / v.rows)));
}

/// One variant of the streaming q4 kernel (see [`q4_stream_study`]).
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct StreamShape {
    /// Outputs per thread (one subgroup of 32 lanes splits their K).
    rows: u32,
    /// Packed words per lane per loop iteration (per row).
    units: u32,
    /// Subgroups per workgroup.
    warps: u32,
    /// The next iteration's words and scales are loaded before this
    /// iteration's arithmetic (kept in registers across the back edge).
    prefetch: bool,
    /// One logic instruction per nibble, (src | M) & (mask | M), instead
    /// of (src & mask) | M.
    one_op: bool,
    /// Buffers indexed with i32 values, as the generator's kernels are.
    signed: bool,
    /// Subgroups that split the K of each group of rows: a subgroup
    /// butterfly, then one add across them in workgroup memory (more warps
    /// in flight per SM than one subgroup per row group gives).
    kwarps: u32,
}

/// The K loop of the streaming study kernels: `rows` accumulators, then
/// `iters` iterations of `loads(prefix, iteration, declare)` (words
/// `{prefix}w{r}_{u}` and scales `{prefix}s{r}_{u}`) and `compute(prefix,
/// iteration)`. With `prefetch`, the next iteration's loads go into `n…`
/// before this one's arithmetic on `c…` (kept across the back edge, the
/// words starting as `zero`).
fn stream_loop(
    rows: u32,
    units: u32,
    iters: u32,
    prefetch: bool,
    zero: &str,
    loads: &dyn Fn(&str, &str, bool) -> String,
    compute: &dyn Fn(&str, &str) -> String,
) -> String {
    let mut s = String::new();
    for r in 0..rows {
        s += &format!("var acc{r} = 0.0;\n");
    }
    if prefetch && iters > 1 {
        for r in 0..rows {
            for u in 0..units {
                s += &format!("var cw{r}_{u} = {zero};\nvar cs{r}_{u} = 0.0;\n");
            }
        }
        s += &loads("c", "0u", false);
        s += &format!("for (var i = 0u; i < {}u; i++) {{\n", iters - 1);
        s += &loads("n", "(i + 1u)", true);
        s += &compute("c", "i");
        for r in 0..rows {
            for u in 0..units {
                s += &format!("cw{r}_{u} = nw{r}_{u};\ncs{r}_{u} = ns{r}_{u};\n");
            }
        }
        s += "}\n";
        s += &compute("c", &format!("{}u", iters - 1));
    } else {
        s += &format!("for (var i = 0u; i < {iters}u; i++) {{\n");
        s += &loads("c", "i", true);
        s += &compute("c", "i");
        s += "}\n";
    }
    s
}

/// The generator's decode pattern (32 lanes split K, lane l on words l,
/// l + 32, ...; A's 8 values per word read by each lane) as a loop of
/// `iters` iterations that is not unrolled, optionally with the next
/// iteration's weights prefetched: whether spreading each subgroup's loads
/// over time (instead of issuing them all at once and computing at the end)
/// lets the arithmetic overlap the memory traffic.
fn q4_stream_source(k: u32, n: u32, v: StreamShape, sg: u32) -> Option<String> {
    let (kw, kb) = (k / 8, k / 32);
    // Lanes that split one row group's K.
    let kl = sg * v.kwarps;
    let per = kl * v.units;
    if kw % per != 0 || !n.is_multiple_of(v.rows * v.warps) || kl * v.warps > 256 {
        return None;
    }
    let iters = kw / per;
    // Signed indices (as the generator writes them) or unsigned ones.
    let ix = |e: String| if v.signed { format!("i32({e})") } else { e };
    let c = ["x", "y", "z", "w"];
    let loads = |pre: &str, it: &str, decl: bool| -> String {
        let mut o = String::new();
        for r in 0..v.rows {
            for u in 0..v.units {
                let wi = format!("({it} * {per}u + {}u + lane)", kl * u);
                let kw_ = if decl { "let " } else { "" };
                o += &format!(
                    "{kw_}{pre}w{r}_{u} = w[{}];\n{kw_}{pre}s{r}_{u} = sc[{}];\n",
                    ix(format!("(n0 + {r}u) * {kw}u + {wi}")),
                    ix(format!("(n0 + {r}u) * {kb}u + ({wi} >> 2u)"))
                );
            }
        }
        o
    };
    let compute = |pre: &str, it: &str| -> String {
        let mut o = String::new();
        for u in 0..v.units {
            let wi = format!("({it} * {per}u + {}u + lane)", kl * u);
            o += &format!("{{\nlet a0 = a[{}];\nlet a1 = a[{}];\n", ix(format!("2u * {wi}")), ix(format!("2u * {wi} + 1u")));
            for r in 0..v.rows {
                o += &format!("{{\nlet l0 = {pre}w{r}_{u};\nlet h0 = l0 >> 16u;\n");
                if v.one_op {
                    o += "let l = l0 | 0x4B000000u;\nlet h = h0 | 0x4B000000u;\n";
                } else {
                    o += "let l = l0;\nlet h = h0;\n";
                }
                for p in 0..4 {
                    let (qh, ql) = (nibble_wgsl("h", p, v.one_op), nibble_wgsl("l", p, v.one_op));
                    o += &format!("let p{p} = fma({qh}, a1.{cp}, {ql} * a0.{cp});\n", cp = c[p]);
                }
                o += &format!("{}}}\n", combine_wgsl(&format!("acc{r}"), &format!("{pre}s{r}_{u}")));
            }
            o += "}\n";
        }
        o
    };
    let mut s = String::new();
    s += &stream_loop(v.rows, v.units, iters, v.prefetch, "0u", &loads, &compute);
    for r in 0..v.rows {
        let mut m = sg / 2;
        while m >= 1 {
            s += &format!("acc{r} += subgroupShuffleXor(acc{r}, {m}u);\n");
            m /= 2;
        }
    }
    let mut decl = String::new();
    if v.kwarps == 1 {
        s += "if (lane == 0u) {\n";
        for r in 0..v.rows {
            s += &format!("c[n0 + {r}u] = acc{r};\n");
        }
        s += "}\n";
    } else {
        // Lane 0 of each subgroup writes its sums; after the barrier the
        // first `rows` lanes of each row group add the kwarps partials in order.
        decl = format!("var<workgroup> red: array<f32, {}>;\n", v.warps * v.kwarps * v.rows);
        s += &format!("if (lane % {sg}u == 0u) {{\n");
        for r in 0..v.rows {
            s += &format!("red[(lid.x / {sg}u) * {rows}u + {r}u] = acc{r};\n", rows = v.rows);
        }
        s += "}\nworkgroupBarrier();\n";
        let sum: Vec<String> =
            (0..v.kwarps).map(|q| format!("red[(grp * {kwarps}u + {q}u) * {rows}u + lane]", kwarps = v.kwarps, rows = v.rows)).collect();
        s += &format!("if (lane < {}u) {{ c[n0 + lane] = {}; }}\n", v.rows, sum.join(" + "));
    }
    Some(format!(
        "@group(0) @binding(0) var<storage> a: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage> w: array<u32>;\n\
         @group(0) @binding(2) var<storage> sc: array<f32>;\n\
         @group(0) @binding(3) var<storage, read_write> c: array<f32>;\n\
         {decl}\
         @compute @workgroup_size({threads})\n\
         fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{\n\
         let lane = lid.x % {kl}u;\n\
         let grp = lid.x / {kl}u;\n\
         let n0 = (wid.x * {warps}u + grp) * {rows}u;\n\
         {s}}}\n",
        threads = kl * v.warps,
        warps = v.warps,
        rows = v.rows,
    ))
}

/// The streaming q4 kernel against the generator's first lite candidate,
/// alternately, each variant checked against the f64 reference first.
/// `GPU_BENCH_Q4_STREAM="rows,units,warps,prefetch,one_op[,signed[,kwarps]]"` picks the variants.
fn q4_stream_study(gpu: &Gpu) {
    let variants = variants_from_env("GPU_BENCH_Q4_STREAM", "2,16,1,0,0 2,16,1,0,1 2,4,1,1,1 4,4,1,1,1 2,4,4,1,1", |f| {
        (f.len() >= 5).then(|| StreamShape {
            rows: f[0],
            units: f[1],
            warps: f[2],
            prefetch: f[3] == 1,
            one_op: f[4] == 1,
            signed: f.get(5) == Some(&1),
            kwarps: f.get(6).copied().unwrap_or(1).max(1),
        })
    });
    // 32 lanes split K (NVIDIA's subgroup), or the adapter's subgroup if narrower.
    let sg = gpu.subgroups().unwrap_or(32).min(32);
    study_against_generator(gpu, "q4 stream", &variants, |k, n, v| q4_stream_source(k, n, *v, sg).map(|src| (src, n / (v.rows * v.warps))));
}

/// One variant of the N-major q4 kernel (see [`q4_cols_source`]).
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct ColsShape {
    /// Lanes of a warp along K (adjacent lanes read adjacent scale blocks);
    /// the other 32 / lk lanes take different rows.
    lk: u32,
    /// Rows per lane (each value of A read serves all of them).
    rows: u32,
    /// Scale blocks (one `vec4<u32>` of W, 32 values of K) per lane per loop iteration.
    units: u32,
    /// Warps per workgroup, each on its own part of K; their sums are
    /// added in workgroup memory.
    warps: u32,
    /// The next iteration's words and scales are loaded before this
    /// iteration's arithmetic.
    prefetch: bool,
}

/// The decode matvec with lanes along N instead of K: lane (kl, g) of warp
/// `wp` serves rows g·rows .. g·rows + rows − 1 of the workgroup's rows and
/// scale blocks t, t + T, ... (t = wp·lk + kl, T = lk·warps), reading each
/// block as one `vec4<u32>` and its scale as one f32. All lanes with the same
/// t read the same values of A, so A costs one sector per load instead of
/// the 32 half-used sectors of the lanes-along-K pattern, and no butterfly
/// over 32 lanes is needed (lk lanes, then one ordered add across warps).
fn q4_cols_source(k: u32, n: u32, v: ColsShape, sg: u32) -> Option<String> {
    let kb = k / 32;
    let t_all = v.lk * v.warps;
    let per_wg = 32 / v.lk * v.rows;
    if v.lk > sg
        || 32 % v.lk != 0
        || !kb.is_multiple_of(t_all * v.units)
        || !n.is_multiple_of(per_wg)
        || 32 * v.warps > 256
        || per_wg > 32 * v.warps
    {
        return None;
    }
    let iters = kb / (t_all * v.units);
    let c = ["x", "y", "z", "w"];
    let block = |it: &str, u: u32| format!("(({it}) * {}u + {}u + t)", t_all * v.units, t_all * u);
    let loads = |pre: &str, it: &str, decl: bool| -> String {
        let mut o = String::new();
        for r in 0..v.rows {
            for u in 0..v.units {
                let kw_ = if decl { "let " } else { "" };
                let ix = format!("(n0 + {r}u) * {kb}u + {}", block(it, u));
                o += &format!("{kw_}{pre}w{r}_{u} = w[{ix}];\n{kw_}{pre}s{r}_{u} = sc[{ix}];\n");
            }
        }
        o
    };
    let compute = |pre: &str, it: &str| -> String {
        let mut o = String::new();
        for u in 0..v.units {
            o += &format!("{{\nlet b = {};\n", block(it, u));
            for j in 0..8 {
                o += &format!("let a{j} = a[8u * b + {j}u];\n");
            }
            for r in 0..v.rows {
                o += "{\n";
                for (j, cj) in c.iter().enumerate() {
                    o += &format!("let l{j} = {pre}w{r}_{u}.{cj} | 0x4B000000u;\nlet h{j} = ({pre}w{r}_{u}.{cj} >> 16u) | 0x4B000000u;\n");
                }
                for p in 0..4 {
                    let mut e = format!("{} * a0.{}", nibble_wgsl("l0", p, true), c[p]);
                    e = format!("fma({}, a1.{}, {e})", nibble_wgsl("h0", p, true), c[p]);
                    for j in 1..4 {
                        e = format!("fma({}, a{}.{}, {e})", nibble_wgsl(&format!("l{j}"), p, true), 2 * j, c[p]);
                        e = format!("fma({}, a{}.{}, {e})", nibble_wgsl(&format!("h{j}"), p, true), 2 * j + 1, c[p]);
                    }
                    o += &format!("let p{p} = {e};\n");
                }
                o += &format!("{}}}\n", combine_wgsl(&format!("acc{r}"), &format!("{pre}s{r}_{u}")));
            }
            o += "}\n";
        }
        o
    };
    let mut s = String::new();
    s += &stream_loop(v.rows, v.units, iters, v.prefetch, "vec4<u32>()", &loads, &compute);
    let mut m = v.lk / 2;
    while m >= 1 {
        for r in 0..v.rows {
            s += &format!("acc{r} += subgroupShuffleXor(acc{r}, {m}u);\n");
        }
        m /= 2;
    }
    let mut decl = String::new();
    if v.warps == 1 {
        s += "if (kl == 0u) {\n";
        for r in 0..v.rows {
            s += &format!("c[n0 + {r}u] = acc{r};\n");
        }
        s += "}\n";
    } else {
        decl = format!("var<workgroup> red: array<f32, {}>;\n", v.warps * per_wg);
        s += "if (kl == 0u) {\n";
        for r in 0..v.rows {
            s += &format!("red[wp * {per_wg}u + g * {rows}u + {r}u] = acc{r};\n", rows = v.rows);
        }
        s += "}\nworkgroupBarrier();\n";
        let sum: Vec<String> = (0..v.warps).map(|q| format!("red[{}u + lid.x]", q * per_wg)).collect();
        s += &format!("if (lid.x < {per_wg}u) {{ c[wid.x * {per_wg}u + lid.x] = {}; }}\n", sum.join(" + "));
    }
    Some(format!(
        "@group(0) @binding(0) var<storage> a: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage> w: array<vec4<u32>>;\n\
         @group(0) @binding(2) var<storage> sc: array<f32>;\n\
         @group(0) @binding(3) var<storage, read_write> c: array<f32>;\n\
         {decl}\
         @compute @workgroup_size({threads})\n\
         fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{\n\
         let lane = lid.x % 32u;\n\
         let wp = lid.x / 32u;\n\
         let kl = lane % {lk}u;\n\
         let g = lane / {lk}u;\n\
         let t = wp * {lk}u + kl;\n\
         let n0 = wid.x * {per_wg}u + g * {rows}u;\n\
         {s}}}\n",
        threads = 32 * v.warps,
        lk = v.lk,
        rows = v.rows,
    ))
}

/// The N-major q4 kernel against the generator's first lite candidate,
/// alternately. GPU_BENCH_Q4_COLS="lk,rows,units,warps,prefetch ..." picks the variants.
fn q4_cols_study(gpu: &Gpu) {
    let variants = variants_from_env("GPU_BENCH_Q4_COLS", "1,1,2,8,1 2,1,2,8,1 4,1,1,8,1 1,2,2,8,1 2,2,1,8,1", |f| {
        (f.len() == 5).then(|| ColsShape { lk: f[0], rows: f[1], units: f[2], warps: f[3], prefetch: f[4] == 1 })
    });
    let sg = gpu.subgroups().unwrap_or(1);
    study_against_generator(gpu, "q4 cols", &variants, |k, n, v| q4_cols_source(k, n, *v, sg).map(|src| (src, n / (32 / v.lk * v.rows))));
}

/// Checks each variant's kernel against the f64 reference, then times it
/// alternately with the generator's first lite candidate for the H100, or
/// with `GPU_BENCH_Q4_VS_BEST=1` its searched best (3 rounds, the best of each). `source(k, n, variant)` gives the WGSL and
/// its workgroup count, or None where the variant does not fit the shape.
fn study_against_generator<V: serde::Serialize>(
    gpu: &Gpu,
    label: &str,
    variants: &[V],
    source: impl Fn(u32, u32, &V) -> Option<(String, u32)>,
) {
    let fp = webtune_tuner::presets::get("h100").expect("preset");
    let device = webtune_tuner::Device::from_fingerprint(&fp).expect("preset is a device");
    let settings = webtune_tuner::Settings::builtin(Target::Wgsl);
    for shape in &q4_shapes() {
        let op = Op::parse("matmul_q4", shape).expect("shape");
        let (_, _, k, n) = op.bmkn();
        let bytes = q4_weight_bytes(&op) as f64;
        let inputs = webtune_compiler::reference::inputs(&op, 7);
        let want = webtune_compiler::reference::reference(&op, &inputs);
        let space = webtune_tuner::lite_space(&op, Target::Wgsl, &device, &settings);
        // GPU_BENCH_Q4_VS_BEST=1: against the searched best instead.
        let reference = if std::env::var_os("GPU_BENCH_Q4_VS_BEST").is_some() {
            searched_best(&op, gpu.subgroups())
        } else {
            space.schedules[0].clone()
        };
        for v in variants {
            let Some((src, groups)) = source(k, n, v) else { continue };
            let summary = format!("{label} {shape}");
            let checked = gpu.prepare_source(&src, "main", [groups, 1, 1], &inputs.args).and_then(|p| gpu.output(&p));
            let err = match checked {
                Ok(out) => webtune_compiler::reference::check(&want, &out).max_rel_err,
                Err(e) => {
                    print_study(summary, json!(v), Err(e));
                    continue;
                }
            };
            if err > webtune_compiler::reference::TOLERANCE {
                println!("{}", json!({"summary": summary, "shape": v, "error": "WRONG RESULT", "max_rel_err": err}));
                continue;
            }
            let (mut mine, mut theirs) = (Vec::new(), Vec::new());
            for _ in 0..3 {
                match time_source(gpu, &src, groups, &inputs.args, 50.0) {
                    Ok(ms) => mine.push(ms * 1e3),
                    Err(e) => {
                        print_study(summary.clone(), json!(v), Err(e));
                        break;
                    }
                }
                if let Some(r) = measure_quiet(gpu, &op, &reference) {
                    theirs.push(r * 1e3);
                }
            }
            let min = |x: &Vec<f64>| x.iter().copied().fold(f64::INFINITY, f64::min);
            if !mine.is_empty() {
                println!(
                    "{}",
                    json!({"summary": summary, "shape": v, "best_us": min(&mine), "variant_us": mine, "generator_us": theirs,
                           "weight_gbps": bytes / (min(&mine) * 1e3), "max_rel_err": err, "generator_over_variant": min(&theirs) / min(&mine)})
                );
            }
        }
    }
}

/// One variant of the looped rows kernel (see [`q4_rows_loop_source`]).
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct RowsLoopShape {
    blocks: u32,
    rows: u32,
    /// Rows per loop iteration.
    group: u32,
}

/// The rows kernel (A's slice in registers, W read as whole scale blocks)
/// as a loop over groups of rows that is not unrolled, the next group's
/// weights loaded before this group's arithmetic, each group's sums
/// reduce-scattered in the subgroup and kept in workgroup memory; one
/// barrier at the end. One logic instruction per nibble.
fn q4_rows_loop_source(k: u32, n: u32, v: RowsLoopShape, sg: u32) -> Option<String> {
    let kb = k / 32;
    let (b, r, g) = (v.blocks, v.rows, v.group);
    if !kb.is_multiple_of(b) || r % g != 0 || !n.is_multiple_of(r) || !g.is_power_of_two() || g > sg {
        return None;
    }
    let lanes = kb / b;
    if !lanes.is_multiple_of(sg) || lanes > 256 || r > lanes {
        return None;
    }
    let warps = lanes / sg;
    let iters = r / g;
    let c = ["x", "y", "z", "w"];
    let mut s = String::new();
    for bi in 0..b {
        for i in 0..8 {
            s += &format!("let a{bi}_{i} = a[(t + {}u) * 8u + {i}u];\n", lanes * bi);
        }
    }
    let at = |row: &str, bi: u32| format!("({row}) * {kb}u + t + {}u", lanes * bi);
    for ri in 0..g {
        for bi in 0..b {
            s += &format!(
                "var cw{ri}_{bi} = w[{}];\nvar cs{ri}_{bi} = sc[{}];\n",
                at(&format!("n0 + {ri}u"), bi),
                at(&format!("n0 + {ri}u"), bi)
            );
        }
    }
    s += &format!("for (var gi = 0u; gi < {iters}u; gi++) {{\nlet gn = min(gi + 1u, {}u);\n", iters - 1);
    for ri in 0..g {
        for bi in 0..b {
            let row = format!("n0 + gn * {g}u + {ri}u");
            s += &format!("let nw{ri}_{bi} = w[{}];\nlet ns{ri}_{bi} = sc[{}];\n", at(&row, bi), at(&row, bi));
        }
    }
    for ri in 0..g {
        s += &format!("var acc{ri} = 0.0;\n");
        for bi in 0..b {
            s += "{\n";
            for (i, ci) in c.iter().enumerate() {
                s += &format!("let l{i} = cw{ri}_{bi}.{ci} | 0x4B000000u;\nlet h{i} = (cw{ri}_{bi}.{ci} >> 16u) | 0x4B000000u;\n");
            }
            for p in 0..4 {
                let mut e = String::new();
                for i in 0..4 {
                    for (half, src) in [(0, "l"), (1, "h")] {
                        let term = nibble_wgsl(&format!("{src}{i}"), p, true);
                        let av = format!("a{bi}_{}.{}", 2 * i + half, c[p]);
                        e = if e.is_empty() { format!("{term} * {av}") } else { format!("fma({term}, {av}, {e})") };
                    }
                }
                s += &format!("let p{p} = {e};\n");
            }
            s += &format!("{}}}\n", combine_wgsl(&format!("acc{ri}"), &format!("cs{ri}_{bi}")));
        }
    }
    let (row, writer) = reduce_scatter(&mut s, g, sg);
    s += &format!("if ({writer}) {{ red[(t / {sg}u) * {r}u + gi * {g}u + {row}] = acc0; }}\n");
    for ri in 0..g {
        for bi in 0..b {
            s += &format!("cw{ri}_{bi} = nw{ri}_{bi};\ncs{ri}_{bi} = ns{ri}_{bi};\n");
        }
    }
    s += "}\nworkgroupBarrier();\n";
    let sum: Vec<String> = (0..warps).map(|wi| format!("red[{}u + t]", wi * r)).collect();
    s += &format!("if (t < {r}u) {{ c[n0 + t] = {}; }}\n", sum.join(" + "));
    Some(format!(
        "@group(0) @binding(0) var<storage> a: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage> w: array<vec4<u32>>;\n\
         @group(0) @binding(2) var<storage> sc: array<f32>;\n\
         @group(0) @binding(3) var<storage, read_write> c: array<f32>;\n\
         var<workgroup> red: array<f32, {}>;\n\
         @compute @workgroup_size({lanes})\n\
         fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{\n\
         let t = lid.x;\n\
         let lane = t % {sg}u;\n\
         let n0 = wid.x * {r}u;\n\
         {s}}}\n",
        warps * r
    ))
}

/// The looped rows kernel against the generator's first lite candidate.
/// GPU_BENCH_Q4_ROWSLOOP="blocks,rows,group ..." picks the variants.
fn q4_rows_loop_study(gpu: &Gpu) {
    let variants = variants_from_env("GPU_BENCH_Q4_ROWSLOOP", "1,16,4 1,32,4 1,16,2 1,8,2", |f| {
        (f.len() == 3).then(|| RowsLoopShape { blocks: f[0], rows: f[1], group: f[2] })
    });
    let sg = gpu.subgroups().unwrap_or(32).min(32);
    study_against_generator(gpu, "q4 rows loop", &variants, |k, n, v| q4_rows_loop_source(k, n, *v, sg).map(|src| (src, n / v.rows)));
}

/// What wgpu's runtime bounds checks cost the q4 decode kernel: the first
/// candidate of each shape's lite space (what an H100 browser runs first)
/// with checks on and off, alternately, 3 rounds.
fn q4_bounds_check_cost(gpu: &mut Gpu) {
    let fp = webtune_tuner::presets::get("h100").expect("preset");
    let device = webtune_tuner::Device::from_fingerprint(&fp).expect("preset is a device");
    let settings = webtune_tuner::Settings::builtin(Target::Wgsl);
    for shape in ["1,4096,4096", "1,3072,9216", "1,8192,3072"] {
        let op = Op::parse("matmul_q4", shape).expect("shape");
        let space = webtune_tuner::lite_space(&op, Target::Wgsl, &device, &settings);
        let s = &space.schedules[0];
        let mut by = [Vec::new(), Vec::new()];
        for _round in 0..3 {
            for (i, on) in [true, false].into_iter().enumerate() {
                gpu.set_bounds_checks(on);
                if let Some(r) = measure(gpu, &op, s, 10) {
                    by[i].push(r.median_ms);
                }
            }
        }
        gpu.set_bounds_checks(true);
        let min = |v: &Vec<f64>| v.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "{}",
            json!({"summary": format!("matmul_q4 {shape} bounds checks on/off"), "config": s, "checked_ms": by[0], "unchecked_ms": by[1],
                   "checked_weight_gbps": q4_weight_bytes(&op) as f64 / (min(&by[0]) * 1e6),
                   "unchecked_weight_gbps": q4_weight_bytes(&op) as f64 / (min(&by[1]) * 1e6)})
        );
    }
}

/// What wgpu's runtime bounds checks cost the best 4096³ tiles: each
/// schedule with checks on (as in browsers) and off, alternately, 3 rounds.
fn bounds_check_cost(gpu: &mut Gpu, big: &Op) {
    let tiles = [(8, 8, 64, 128), (8, 8, 128, 128), (8, 16, 128, 128), (4, 8, 32, 128), (8, 8, 64, 64), (8, 8, 128, 64)];
    for (x0, y0, x1, y1) in tiles {
        let s = Schedule { x0, y0, x1, y1, r1: 8, r0: 8, vectorize: 4, cache_read: true, double_buffer: true, ..base(big) };
        let mut by = [Vec::new(), Vec::new()];
        for _round in 0..3 {
            for (i, on) in [true, false].into_iter().enumerate() {
                gpu.set_bounds_checks(on);
                if let Some(r) = measure(gpu, big, &s, 10) {
                    by[i].push(r.gflops);
                }
            }
        }
        gpu.set_bounds_checks(true);
        let best = |v: &Vec<f64>| v.iter().copied().fold(0.0, f64::max);
        println!(
            "{}",
            json!({"summary": "bounds checks on/off", "config": s, "checked_gflops": by[0], "unchecked_gflops": by[1],
                   "unchecked_over_checked": best(&by[1]) / best(&by[0])})
        );
    }
}

/// The most a kernel of this harness can read: a WGSL kernel that only reads
/// `bytes` (as `vec4<u32>`, grid-stride) and writes one word per thread, timed
/// like every kernel (back-to-back dispatches between GPU timestamps). At the
/// q4 shapes' weight sizes and at 128 MiB (wgpu's default binding limit); the best of several grid sizes.
fn read_ceiling(gpu: &Gpu) {
    let sizes: [(&str, u64); 4] = [
        ("1,4096,4096", 4096 * 4096 / 2 + 4096 * 128 * 4),
        ("1,3072,9216", 9216 * 3072 / 2 + 9216 * 96 * 4),
        ("1,8192,3072", 3072 * 8192 / 2 + 3072 * 256 * 4),
        ("128 MiB", 1 << 27),
    ];
    for (label, bytes) in sizes {
        let quads = (bytes / 16) as u32;
        let mut best: Option<(u32, f64)> = None;
        const GRIDS: [u32; 6] = [132, 264, 528, 1056, 2112, 4224];
        // The words once per size; the output sized for the largest grid.
        let args = [(0..quads * 4).map(|i| i.wrapping_mul(2654435761)).collect::<Vec<u32>>(), vec![0u32; GRIDS[5] as usize * 256]];
        for groups in GRIDS {
            let threads = groups * 256;
            let src = format!(
                "@group(0) @binding(0) var<storage> w: array<vec4<u32>>;\n\
                 @group(0) @binding(1) var<storage, read_write> o: array<u32>;\n\
                 @compute @workgroup_size(256)\n\
                 fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{\n\
                   var acc = vec4<u32>(0u);\n\
                   for (var i = gid.x; i < {quads}u; i += {threads}u) {{ acc ^= w[i]; }}\n\
                   if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x12345678u) {{ o[gid.x] = 1u; }}\n\
                 }}\n"
            );
            match time_source(gpu, &src, groups, &args, 100.0) {
                Ok(median_ms) => {
                    let gbps = bytes as f64 / (median_ms * 1e6);
                    println!("{}", json!({"ceiling": label, "groups": groups, "median_ms": median_ms, "gbps": gbps}));
                    if best.is_none_or(|(_, b)| gbps > b) {
                        best = Some((groups, gbps));
                    }
                }
                Err(e) => println!("{}", json!({"ceiling": label, "groups": groups, "error": e.to_string()})),
            }
        }
        if let Some((groups, gbps)) = best {
            println!("{}", json!({"summary": format!("read ceiling {label}"), "bytes": bytes, "groups": groups, "gbps": gbps}));
        }
    }
    // The floor of one dispatch timed back to back: a kernel that reads nothing.
    let args = [vec![0u32; 4], vec![0u32; 1]];
    let src = "@group(0) @binding(0) var<storage> w: array<vec4<u32>>;\n\
               @group(0) @binding(1) var<storage, read_write> o: array<u32>;\n\
               @compute @workgroup_size(256)\n\
               fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n\
                 if (gid.x == 0xFFFFFFFFu) { o[0] = w[0].x; }\n\
               }\n";
    match time_source(gpu, src, 132, &args, 100.0) {
        Ok(median_ms) => println!("{}", json!({"summary": "empty dispatch", "groups": 132, "median_us": median_ms * 1e3})),
        Err(e) => println!("{}", json!({"summary": "empty dispatch", "error": e.to_string()})),
    }
}

/// The spread: a seeded sample of 50 schedules from the full 4096³ space.
fn sample_spread(gpu: &Gpu, big: &Op) {
    let space = matmul_space(big);
    let mut rng = Rng::new(2026);
    let mut sample = Vec::new();
    let mut taken = vec![false; space.len()];
    while sample.len() < 50.min(space.len()) {
        let i = (rng.next_u64() % space.len() as u64) as usize;
        if !taken[i] {
            taken[i] = true;
            sample.push(space[i].clone());
        }
    }
    let mut times: Vec<f64> = sample.iter().filter_map(|s| measure(gpu, big, s, 3).map(|r| r.gflops)).collect();
    times.sort_by(f64::total_cmp);
    if !times.is_empty() {
        println!(
            "{}",
            json!({"summary": "matmul 4096^3 50-schedule sample", "space": space.len(), "measured": times.len(),
                   "worst_gflops": times[0], "median_gflops": times[times.len() / 2], "best_gflops": times[times.len() - 1]})
        );
    }
}

/// K0–K3, each over the tuned space plus small staged tiles.
fn small_shapes(gpu: &Gpu) {
    for (kind, shape) in shapes(&[
        ("matmul", "384,768,768"),
        ("matmul", "640,768,3072"),
        ("batch_matmul", "12,384,384,64"),
        ("batch_matmul", "120,64,64,64"),
    ]) {
        let (kind, shape) = (kind.as_str(), shape.as_str());
        if kind == "matmul_q4" {
            continue;
        }
        let op = Op::parse(kind, shape).expect("shape");
        let mut space = matmul_tuned(&op);
        // Small tiles matter for the small batched shapes.
        for s in matmul_space(&op) {
            if s.cache_read
                && s.vectorize == 4
                && s.x0 >= 2
                && s.y0 >= 4
                && s.r0 == s.r1.min(8)
                && !space.contains(&s)
                && s.x1 <= 64
                && s.y1 <= 64
            {
                space.push(s);
            }
        }
        best(gpu, &op, &space, &format!("{kind} {shape}"));
    }
}

/// Weight bytes of a q4 op: 4-bit weights plus one f32 scale per 32.
fn q4_weight_bytes(op: &Op) -> u64 {
    let (_, _, k, n) = op.bmkn();
    (n as u64 * k as u64 / 2) + (n as u64 * (k as u64 / 32) * 4)
}

/// The q4 decode shapes, with their weight traffic; then what each of the
/// best schedule's choices is worth: the best with one setting changed
/// (subgroup butterfly or workgroup memory, 4 or 1 words per load, y0 or 1
/// outputs per thread), measured alternately with the best, 3 rounds.
fn q4_decode(gpu: &Gpu) {
    for shape in &q4_shapes() {
        let op = Op::parse("matmul_q4", shape).expect("shape");
        let weight_bytes = q4_weight_bytes(&op);
        let Some((bs, r)) = best(gpu, &op, &q4_space(&op, gpu.subgroups()), &format!("matmul_q4 {shape}")) else { continue };
        println!(
            "{}",
            json!({"summary": format!("matmul_q4 {shape} weight traffic"), "weight_bytes": weight_bytes,
                   "weight_gbps": weight_bytes as f64 / (r.median_ms * 1e6)})
        );
        let mut variants: Vec<(&str, Schedule)> = Vec::new();
        if bs.subgroup_reduce {
            variants.push(("workgroup-memory reduction", Schedule { subgroup_reduce: false, ..bs.clone() }));
        }
        if bs.vectorize == 4 {
            variants.push(("one word per load", Schedule { vectorize: 1, ..bs.clone() }));
        } else if bs.r0 % 32 == 0 {
            variants.push(("four words per load", Schedule { vectorize: 4, ..bs.clone() }));
        }
        if bs.y0 > 1 {
            variants.push(("one output per thread", Schedule { y0: 1, y1: bs.y1 / bs.y0, ..bs.clone() }));
        }
        variants.push((
            if bs.double_buffer { "no double buffering" } else { "double buffering" },
            Schedule { double_buffer: !bs.double_buffer, ..bs.clone() },
        ));
        for (what, v) in variants {
            if v.check(&op, Target::Wgsl).is_err() {
                continue;
            }
            let (a, b) = alternately(|| measure(gpu, &op, &bs, 10).map(|r| r.median_ms), || measure(gpu, &op, &v, 10).map(|r| r.median_ms));
            println!(
                "{}",
                json!({"summary": format!("matmul_q4 {shape} ablation: {what}"), "best_ms": a, "variant_ms": b,
                       "variant_over_best_time": min_of(&b) / min_of(&a), "variant": v})
            );
        }
    }
}

/// The searched best q4 schedule of the sixth H100 session's final call
/// for the three decode shapes (`GPU_BENCH_PARTS=q4`; BENCHMARKS.md), the
/// 4096² one for any other shape; subgroup butterflies where the adapter's
/// subgroups hold 32 lanes.
fn searched_best(op: &Op, subgroup_min: Option<u32>) -> Schedule {
    let (_, _, k, n) = op.bmkn();
    let (y0, y1, r0, double_buffer) = match (k, n) {
        (3072, 9216) => (2, 8, 32, true),
        (8192, 3072) => (2, 2, 256, false),
        _ => (4, 4, 128, false),
    };
    Schedule { double_buffer, ..q4_schedule(op, y0, y1, 32, r0, subgroup_min) }
}

/// A one-word-per-load q4 decode schedule (one row, single-buffered), with
/// the subgroup butterfly where the adapter's subgroups hold `split_k` lanes.
fn q4_schedule(op: &Op, y0: u32, y1: u32, split_k: u32, r0: u32, subgroup_min: Option<u32>) -> Schedule {
    let subgroup_reduce = subgroup_min.is_some_and(|m| split_k <= m);
    Schedule { x0: 1, x1: 1, y0, y1, split_k, r0, r1: r0, vectorize: 1, subgroup_reduce, double_buffer: false, ..base(op) }
}

/// Whether one K step pays: schedules whose r0 = K / split_k (every weight
/// of a thread loaded before any arithmetic, no loop), which the
/// power-of-two r0 of the search cannot give where K / split_k is not a
/// power of two (3072 / 32 = 96), each timed alternately with the searched
/// best of the sixth session's final call (3 rounds, the best of each).
fn q4_one_step(gpu: &Gpu) {
    let sg = gpu.subgroups();
    for shape in &q4_shapes() {
        let op = Op::parse("matmul_q4", shape).expect("shape");
        let (_, _, k, _) = op.bmkn();
        let reference = searched_best(&op, sg);
        let mut cands = Vec::new();
        for split_k in [16, 32, 64] {
            let r0 = k / split_k;
            if k % split_k != 0 || r0 % 8 != 0 || r0 > 512 {
                continue;
            }
            for y0 in [1, 2, 4] {
                for groups in [1, 2, 4, 8] {
                    let c = q4_schedule(&op, y0, y0 * groups, split_k, r0, sg);
                    let threads = groups * split_k;
                    if (32..=256).contains(&threads) && c != reference && c.check(&op, Target::Wgsl).is_ok() {
                        cands.push(c);
                    }
                }
            }
        }
        let weight_bytes = q4_weight_bytes(&op) as f64;
        for c in cands {
            let (mine, theirs) =
                alternately(|| measure_quiet(gpu, &op, &c).map(|ms| ms * 1e3), || measure_quiet(gpu, &op, &reference).map(|ms| ms * 1e3));
            if mine.is_empty() || theirs.is_empty() {
                println!(
                    "{}",
                    json!({"summary": format!("q4 one step {shape}"), "config": c, "error": "not measured (see the lines above)"})
                );
                continue;
            }
            let (best, refer) = (min_of(&mine), min_of(&theirs));
            println!(
                "{}",
                json!({"summary": format!("q4 one step {shape}"), "config": c, "best_us": best, "reference_us": refer,
                       "reference_over_variant": refer / best, "weight_gbps": weight_bytes / (best * 1e3)})
            );
        }
    }
}

/// Generation + naga validation time per candidate (no GPU needed).
fn generation() {
    for (kind, shape) in [("matmul", "4096,4096,4096"), ("matmul_q4", "1,4096,4096")] {
        let op = Op::parse(kind, shape).expect("shape");
        let space = if kind == "matmul" { matmul_tuned(&op) } else { q4_space(&op, Some(32)) };
        let mut ms = Vec::new();
        let mut bytes = 0usize;
        for round in 0..3 {
            for s in &space {
                let t = Instant::now();
                let k = compile(&op, Target::Wgsl, s).expect("valid candidates compile");
                if round == 2 {
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                    bytes += k.bytes.len();
                }
            }
        }
        ms.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({"summary": format!("wgsl generation + naga, {kind} {shape}"), "candidates": ms.len(),
                   "median_ms": ms[ms.len() / 2], "p90_ms": ms[ms.len() * 9 / 10], "max_ms": ms[ms.len() - 1],
                   "mean_source_bytes": bytes / ms.len()})
        );
    }
}

/// Issue 4's quality figures on this GPU: every candidate of the lite space
/// an H100 browser is given (the `h100` preset), in order, against a search
/// over at least ten times as many schedules of the same op and shape.
fn lite() {
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("gpu_bench: {e}");
            std::process::exit(1);
        }
    };
    println!("{}", json!({"adapter": gpu.adapter_name(), "timestamps": gpu.has_timestamps()}));
    let fp = webtune_tuner::presets::get("h100").expect("preset");
    let device = webtune_tuner::Device::from_fingerprint(&fp).expect("preset is a device");
    let settings = webtune_tuner::Settings::builtin(Target::Wgsl);
    for (kind, shape) in
        shapes(&[("matmul", "384,768,768"), ("matmul", "640,768,3072"), ("batch_matmul", "12,384,384,64"), ("matmul_q4", "1,4096,4096")])
    {
        let (kind, shape) = (kind.as_str(), shape.as_str());
        let op = Op::parse(kind, shape).expect("shape");
        let space = webtune_tuner::lite_space(&op, Target::Wgsl, &device, &settings);
        // Two passes over the ordered list, each candidate's better time
        // kept: on the H200 the first candidate timed after a change of
        // shape ran up to 3.7x slower in the first pass than in the second
        // (the same kernel, 2026-11-27), even after two seconds of warm-up
        // on it; the cause is not known.
        let t = Instant::now();
        let first: Vec<f64> = space.schedules.iter().map(|s| measure(&gpu, &op, s, 5).map_or(0.0, |r| r.gflops)).collect();
        let again: Vec<f64> =
            space.schedules.iter().map(|s| measure_quiet(&gpu, &op, s).map_or(0.0, |ms| op.flops() as f64 / ms / 1e6)).collect();
        let ordered: Vec<f64> = first.iter().zip(&again).map(|(a, b)| a.max(*b)).collect();
        println!("{}", json!({"summary": format!("passes {kind} {shape}"), "first": first, "again": again}));
        let lite_s = t.elapsed().as_secs_f64();
        // The wide search: every schedule of the hand-written spaces above,
        // then a seeded sample of the full matmul space, until it is at least
        // ten times the lite space and not in it.
        // GPU_BENCH_NO_WIDE: the lite space only (its order and best).
        let no_wide = std::env::var_os("GPU_BENCH_NO_WIDE").is_some();
        let mut wide: Vec<Schedule> = if no_wide {
            Vec::new()
        } else if kind == "matmul_q4" {
            // Both q4 families: the matrix-vector one and, for M > 1, the
            // tiled one (the f32 matmul's tuned tiles, B dequantised).
            let mut w = q4_space(&op, gpu.subgroups());
            if op.bmkn().1 > 1 {
                let tiled = matmul_tuned(&Op::parse("matmul", shape).expect("shape"))
                    .into_iter()
                    .map(|s| Schedule { split_k: 1, subgroup_reduce: false, ..s })
                    .filter(|s| s.check(&op, Target::Wgsl).is_ok());
                w.extend(tiled);
            }
            w
        } else {
            matmul_tuned(&op)
        };
        if kind != "matmul_q4" && !no_wide {
            let full = matmul_space(&op);
            let mut rng = Rng::new(99);
            let want = (10 * space.schedules.len()).max(wide.len());
            let mut tries = 0;
            while wide.len() < want && tries < 100 * want {
                tries += 1;
                let s = &full[(rng.next_u64() % full.len() as u64) as usize];
                if !wide.contains(s) {
                    wide.push(s.clone());
                }
            }
        }
        wide.retain(|s| !space.schedules.contains(s));
        let t = Instant::now();
        let mut wide_best: Option<(f64, Schedule)> = None;
        for s in &wide {
            if let Some(r) = measure(&gpu, &op, s, 5)
                && wide_best.as_ref().is_none_or(|(g, _)| r.gflops > *g)
            {
                wide_best = Some((r.gflops, s.clone()));
            }
        }
        let wide_s = t.elapsed().as_secs_f64();
        let (lite_i, _) = ordered.iter().enumerate().fold((0, 0.0), |acc, (i, g)| if *g > acc.1 { (i, *g) } else { acc });
        // Re-measure both winners side by side, alternating, with more samples.
        let lite_sched = space.schedules[lite_i].clone();
        let mut lite_g = Vec::new();
        let mut wide_g = Vec::new();
        for _ in 0..3 {
            if let Some(r) = measure(&gpu, &op, &lite_sched, 15) {
                lite_g.push(r.gflops);
            }
            if let Some((_, s)) = &wide_best
                && let Some(r) = measure(&gpu, &op, s, 15)
            {
                wide_g.push(r.gflops);
            }
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        let (lite_best, wide_best_g) = (med(&mut lite_g), med(&mut wide_g));
        let best = ordered.iter().copied().fold(0.0, f64::max);
        let reach95 = ordered.iter().position(|g| *g >= 0.95 * best).map(|i| i + 1);
        println!(
            "{}",
            json!({"summary": format!("lite space {kind} {shape}"), "device_key": device.keys.device_key,
                   "lite_size": space.schedules.len(), "naive_size": space.naive_size, "wide_size": wide.len(),
                   "lite_best_gflops": lite_best, "wide_best_gflops": wide_best_g,
                   "lite_over_wide": if wide_best_g > 0.0 { lite_best / wide_best_g } else { f64::NAN },
                   "candidates_to_95pct": reach95, "ordered_gflops": ordered,
                   "lite_best_config": lite_sched, "wide_best_config": wide_best.map(|w| w.1),
                   "lite_s": lite_s, "wide_s": wide_s})
        );
        // GPU_BENCH_TILES="8x8/64x128 ...": those tiles (x0 x y0 / x1 x y1;
        // staged, double-buffered, r0 = r1 = 8, vec4) with every valid
        // slice count of 1, 2, 4, 8 and 16: whether the tiles that fill a
        // GPU on large grids beat, once split across workgroups, the small
        // tiles the lite space picks for few rows.
        // A tile may name other settings after colons: `8x8/64x128:r1=16:r0=4:db=0:acc=f16:dq=1`.
        for tile in std::env::var("GPU_BENCH_TILES").unwrap_or_default().split_whitespace() {
            let mut fields = tile.split(':');
            let dims: Vec<u32> = fields.next().unwrap_or("").split(['x', '/']).filter_map(|v| v.parse().ok()).collect();
            let [x0, y0, x1, y1] = dims[..] else { continue };
            let mut s = Schedule { x0, y0, x1, y1, r0: 8, r1: 8, vectorize: 4, cache_read: true, double_buffer: true, ..base(&op) };
            if op.kind() == webtune_compiler::OpKind::MatmulQ4 {
                s.split_k = 1;
            }
            for f in fields {
                match f.split_once('=') {
                    Some(("r1", v)) => s.r1 = v.parse().unwrap_or(s.r1),
                    Some(("r0", v)) => s.r0 = v.parse().unwrap_or(s.r0),
                    Some(("db", v)) => s.double_buffer = v != "0",
                    Some(("acc", v)) => s.f16_acc = v == "f16",
                    Some(("dq", v)) => s.dequant_pass = v != "0",
                    _ => {}
                }
            }
            for ks in [1, 2, 4, 8, 16] {
                let t = Schedule { k_slices: ks, ..s.clone() };
                if let Err(e) = t.check(&op, Target::Wgsl) {
                    println!("{}", json!({"skip": format!("{tile} k_slices {ks}"), "why": e.to_string()}));
                    continue;
                }
                if let Some(r) = measure(&gpu, &op, &t, 5) {
                    println!(
                        "{}",
                        json!({"summary": format!("tile {tile} {kind} {shape}"), "gflops": r.gflops, "k_slices": ks, "lite_best_gflops": lite_best, "config": t})
                    );
                }
            }
        }
        // Each staged lite candidate that does not split K that way yet, again with
        // `n` K slices across workgroups (GPU_BENCH_SLICES="2 4 8", two
        // passes) or `n` split-K groups (GPU_BENCH_SPLITS="2 4 8"), where
        // the schedule checks out: the best of each, beside the same tile's
        // time unsplit.
        let resplit = |var: &str, label: &str, unsplit_key: &str, with: &dyn Fn(&Schedule, u32) -> Schedule| {
            for n in std::env::var(var).unwrap_or_default().split_whitespace().filter_map(|v| v.parse::<u32>().ok()) {
                let mut best: Option<(f64, f64, Schedule)> = None;
                for (s, g1) in space.schedules.iter().zip(&ordered) {
                    let t = with(s, n);
                    // `with(s, 1) != s`: the candidate already splits K that way.
                    if !s.cache_read || with(s, 1) != *s || t.check(&op, Target::Wgsl).is_err() {
                        continue;
                    }
                    if let Some(r) = measure(&gpu, &op, &t, 5)
                        && best.as_ref().is_none_or(|(g, _, _)| r.gflops > *g)
                    {
                        best = Some((r.gflops, *g1, t));
                    }
                }
                if let Some((g, g1, t)) = best {
                    let mut line = json!({"summary": format!("{label} {n} {kind} {shape}"), "best_gflops": g, "lite_best_gflops": lite_best, "config": t});
                    line[unsplit_key] = json!(g1);
                    println!("{line}");
                }
            }
        };
        resplit("GPU_BENCH_SLICES", "k-slices", "same_tile_one_slice_gflops", &|s, n| Schedule { k_slices: n, ..s.clone() });
        resplit("GPU_BENCH_SPLITS", "split-K", "same_tile_unsplit_gflops", &|s, n| Schedule { split_k: n, ..s.clone() });
    }
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("gen") => generation(),
        Some("device") => device(),
        Some("lite") => lite(),
        _ => {
            eprintln!("usage: gpu_bench gen|device|lite");
            std::process::exit(2);
        }
    }
}
