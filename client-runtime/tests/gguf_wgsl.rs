//! The GGUF block formats on WGSL (`matmul_q4_1`, `matmul_q8_0`) on the
//! default wgpu adapter (Mesa lavapipe in CI: `WGPU_BACKEND=vulkan`,
//! `mesa-vulkan-drivers`): both kernel families (the matrix-vector kernel
//! for decode, the tiled one for prefill) under random schedules on small
//! shapes, every lite-space candidate of a few small shapes, and the first
//! candidates at SmolLM2-135M's decode shapes (its products, M = 1, the
//! 49152 × 576 output head included), each naga-validated by `compile` and
//! checked by the runner against the f64 reference on seeded non-zero
//! inputs with the output poisoned with NaN first; and the epilogues of the
//! block formats (`+rms_norm`, `+swiglu`, `+residual`), SmolLM2's fused
//! decode products among them. Compile times are
//! printed (`--nocapture`), never asserted.

use std::sync::OnceLock;
use std::time::Instant;

use webtune_client_runtime::gpu::Gpu;
use webtune_client_runtime::{KernelDir, RunOptions};
use webtune_compiler::reference::Rng;
use webtune_compiler::{Op, OpKind, Schedule, Target, compile};
use webtune_tuner::{Device, Fingerprint, Settings, lite_space, presets};

fn gpu() -> &'static Gpu {
    static G: OnceLock<Gpu> = OnceLock::new();
    G.get_or_init(|| {
        Gpu::new().unwrap_or_else(|e| panic!("{e}: WGSL tests need a wgpu adapter (install mesa-vulkan-drivers, set WGPU_BACKEND=vulkan)"))
    })
}

/// Correctness only: one timed sample keeps lavapipe runs short.
fn quick() -> RunOptions {
    RunOptions { reps: 1, warmup: 0, warmup_ms: 0.0, min_sample_ms: 0.0, seed: 7, ..RunOptions::default() }
}

fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[(rng.next_u64() % xs.len() as u64) as usize]
}

const KINDS: [OpKind; 2] = [OpKind::MatmulQ4_1, OpKind::MatmulQ8_0];

/// Whether this adapter can run `s` (a subgroup butterfly needs subgroups
/// of at least split_k invocations).
fn runnable(s: &Schedule) -> bool {
    !s.subgroup_reduce || gpu().subgroups().is_some_and(|min| s.split_k <= min)
}

/// Compiles (naga validates) and checks `op` under `s` against the f64
/// reference; returns the compile time in ms.
fn assert_correct(op: &Op, s: &Schedule) -> f64 {
    let t = Instant::now();
    let k = compile(op, Target::Wgsl, s).unwrap_or_else(|e| panic!("{} {s:?}: {e}", op.slug()));
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(k.meta.args.len(), op.args().len());
    if runnable(s) {
        let t = Instant::now();
        let r = gpu().run(&KernelDir::from_kernel(k), &quick()).unwrap_or_else(|e| panic!("{} {s:?}: {e}", op.slug()));
        assert!(r.correct, "{} under {}: max_rel_err {}", op.slug(), serde_json::to_string(s).unwrap(), r.max_rel_err);
        if std::env::var_os("GGUF_WGSL_VERBOSE").is_some() {
            println!(
                "{} compile {ms:.2} ms, run {:.0} ms: {}",
                op.slug(),
                t.elapsed().as_secs_f64() * 1e3,
                serde_json::to_string(s).unwrap()
            );
        }
    }
    ms
}

/// A matrix-vector schedule (cache_read false): rows, outputs per thread,
/// K steps with and without a remainder, split-K reduced in workgroup
/// memory (3 included: the in-order sum) or by a subgroup butterfly where
/// the adapter has one, with and without register double buffering.
fn random_matvec(rng: &mut Rng, op: &Op) -> Schedule {
    loop {
        let x0 = pick(rng, &[1, 2, 3]);
        let y0 = pick(rng, &[1, 2, 3, 4]);
        let r0 = pick(rng, &[8, 16, 32, 64, 128]);
        let split_k = pick(rng, &[1, 2, 3, 4, 8, 32]);
        let subgroup_reduce = gpu().subgroups().is_some_and(|min| split_k > 1 && split_k <= min) && pick(rng, &[false, true]);
        let s = Schedule {
            x0,
            x1: x0,
            y0,
            y1: y0 * pick(rng, &[1, 2, 3, 4, 8]),
            r0,
            r1: r0,
            split_k,
            vectorize: pick(rng, &[1, 4]),
            subgroup_reduce,
            double_buffer: pick(rng, &[false, true]),
            ..Schedule::default_for(op, Target::Wgsl)
        };
        if s.check(op, Target::Wgsl).is_ok() {
            return s;
        }
    }
}

/// A tiled schedule (cache_read: the matmul kernel with B dequantised as
/// it is staged), slabs of whole words that often do not divide K.
fn random_tiled(rng: &mut Rng, op: &Op) -> Schedule {
    loop {
        let x0 = pick(rng, &[1, 2, 4, 8]);
        let y0 = pick(rng, &[1, 2, 4, 8]);
        let r0 = pick(rng, &[1, 2, 4, 8]);
        let s = Schedule {
            x0,
            y0,
            r0,
            x1: x0 * pick(rng, &[1, 2, 4, 8]),
            y1: y0 * pick(rng, &[1, 2, 4]),
            r1: pick(rng, &[4, 8, 12, 16, 24, 32, 40]),
            vectorize: pick(rng, &[1, 4]),
            cache_read: true,
            double_buffer: pick(rng, &[false, true]),
            split_k: pick(rng, &[1, 1, 2, 3]),
            k_slices: pick(rng, &[1, 1, 2, 3]),
            ..Schedule::default_for(op, Target::Wgsl)
        };
        if s.check(op, Target::Wgsl).is_ok() {
            return s;
        }
    }
}

#[test]
fn gguf_matvec_random_shapes_and_schedules() {
    let mut rng = Rng::new(41);
    for kind in KINDS {
        for _ in 0..12 {
            let shape = [pick(&mut rng, &[1, 1, 2, 3, 5]), 32 * pick(&mut rng, &[1, 2, 3, 5, 8]), pick(&mut rng, &[1, 3, 4, 7, 13, 24])];
            let op = Op::new(kind, &shape).unwrap();
            let s = random_matvec(&mut rng, &op);
            assert_correct(&op, &s);
        }
    }
}

#[test]
fn gguf_tiled_random_shapes_and_schedules() {
    let mut rng = Rng::new(43);
    for kind in KINDS {
        for _ in 0..8 {
            let shape = [pick(&mut rng, &[2, 5, 16, 33]), 32 * pick(&mut rng, &[1, 2, 3, 5]), pick(&mut rng, &[1, 3, 4, 7, 16, 24])];
            let op = Op::new(kind, &shape).unwrap();
            let s = random_tiled(&mut rng, &op);
            assert_correct(&op, &s);
        }
    }
}

/// This adapter's device and two hardware ones (the H100's space has the
/// subgroup candidates, Apple's other limits).
fn devices() -> Vec<(String, Device)> {
    let here = Fingerprint::from_value(&gpu().fingerprint()).unwrap();
    let apple = r#"{"target": "wgsl", "adapter": {"vendor": "apple", "architecture": "metal-3", "subgroupMinSize": 32, "subgroupMaxSize": 32},
        "limits": {"maxComputeInvocationsPerWorkgroup": 1024, "maxComputeWorkgroupStorageSize": 32768}, "features": ["subgroups"]}"#;
    vec![
        ("this adapter".to_string(), Device::from_fingerprint(&here).unwrap()),
        ("h100".to_string(), Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap()),
        ("apple".to_string(), Device::from_fingerprint(&Fingerprint::from_json(apple).unwrap()).unwrap()),
    ]
}

/// Every candidate of the lite space of a small decode and a small
/// prefill shape on this adapter (and of the decode shape on the H100 and
/// Apple, whose spaces differ: subgroup candidates this adapter cannot run
/// are compiled and validated only) compiles and computes the reference.
#[test]
fn gguf_every_lite_candidate_of_small_shapes() {
    let mut times = Vec::new();
    for (i, (name, device)) in devices().into_iter().enumerate() {
        for kind in KINDS {
            let shapes: &[[u32; 3]] = if i == 0 { &[[1, 64, 13], [20, 128, 40]] } else { &[[1, 96, 24]] };
            for &shape in shapes {
                let op = Op::new(kind, &shape).unwrap();
                let space = lite_space(&op, Target::Wgsl, &device, &Settings::builtin(Target::Wgsl));
                assert!(!space.schedules.is_empty(), "{name}: {op}");
                for s in &space.schedules {
                    times.push(assert_correct(&op, s));
                }
            }
        }
    }
    report("small shapes, every lite candidate", &times);
}

/// SmolLM2-135M's products at M = 1 (`DecoderGraph::products`: the fused
/// QKV 576 → 960, O 576 → 576, gate and up 576 → 3072, down 1536 → 576 and
/// the 576 → 49152 output head) in both formats: the first lite candidates
/// of this adapter and of the H100 (lavapipe is slow: a handful each).
#[test]
fn gguf_smollm2_decode_shapes() {
    let mut times = Vec::new();
    let devices = devices();
    for kind in KINDS {
        for (k, n) in [(576, 960), (576, 576), (576, 3072), (1536, 576), (576, 49152)] {
            let op = Op::new(kind, &[1, k, n]).unwrap();
            for (i, (_, device)) in devices.iter().take(2).enumerate() {
                let space = lite_space(&op, Target::Wgsl, device, &Settings::builtin(Target::Wgsl));
                let take = if n == 49152 {
                    2
                } else if i == 0 {
                    4
                } else {
                    3
                };
                for s in space.schedules.iter().filter(|s| runnable(s)).take(take) {
                    times.push(assert_correct(&op, s));
                }
            }
        }
    }
    report("SmolLM2 decode shapes", &times);
}

/// Prefill (the tiled family leads where M > 16): a few rows buckets of
/// the SmolLM2 products, and the output head at 16 rows.
#[test]
fn gguf_smollm2_prefill_shapes() {
    let mut times = Vec::new();
    let here = &devices()[0].1;
    for (kind, shape) in [
        (OpKind::MatmulQ4_1, [16, 576, 960]),
        (OpKind::MatmulQ4_1, [64, 1536, 576]),
        (OpKind::MatmulQ8_0, [32, 576, 576]),
        (OpKind::MatmulQ8_0, [16, 576, 49152]),
    ] {
        let op = Op::new(kind, &shape).unwrap();
        let space = lite_space(&op, Target::Wgsl, here, &Settings::builtin(Target::Wgsl));
        let take = if shape[2] == 49152 { 1 } else { 2 };
        for s in space.schedules.iter().filter(|s| s.cache_read).take(take) {
            times.push(assert_correct(&op, s));
        }
        if let Some(s) = space.schedules.iter().find(|s| !s.cache_read) {
            times.push(assert_correct(&op, s));
        }
    }
    report("SmolLM2 prefill shapes", &times);
}

/// The block-quantised ops' epilogues (`+rms_norm`, `+swiglu`,
/// `+residual` and their combinations, docs/ops.md) in all three formats
/// under random matrix-vector schedules on small shapes (rows past one,
/// outputs per thread, split-K reduced every way, double buffering), each
/// checked against the f64 reference of `glu(norm(A)·Wᵀ) + R`.
#[test]
fn block_epilogues_random_shapes_and_schedules() {
    let mut rng = Rng::new(47);
    for kind in [OpKind::MatmulQ4_1, OpKind::MatmulQ8_0, OpKind::MatmulQ4] {
        for e in webtune_compiler::op::Epilogue::all_block().into_iter().filter(|e| !e.is_none()) {
            let shape = [pick(&mut rng, &[1, 1, 2, 3]), 32 * pick(&mut rng, &[1, 2, 3, 5]), pick(&mut rng, &[1, 3, 4, 7, 13, 24])];
            let op = Op::with_epilogue(kind, e, &shape).unwrap();
            let s = random_matvec(&mut rng, &op);
            assert_correct(&op, &s);
        }
    }
}

/// `+merge` (A merged from a split attention's parts, docs/ops.md) in all
/// three formats, with and without `+swiglu` and `+residual`, under random
/// matrix-vector schedules on small shapes: heads of 4 to 16 values, 1 to
/// 5 parts a head, rows past one (each row its own parts). Checked
/// against the f64 merge and product.
#[test]
fn merge_prologue_random_shapes_and_schedules() {
    let mut rng = Rng::new(53);
    for kind in [OpKind::MatmulQ4_1, OpKind::MatmulQ8_0, OpKind::MatmulQ4] {
        for (glu, residual) in [(false, false), (false, true), (true, false), (true, true)] {
            let e = webtune_compiler::op::Epilogue { merge: true, glu, residual, ..webtune_compiler::op::Epilogue::NONE };
            let k = 32 * pick(&mut rng, &[1, 2, 3]);
            let heads = pick(&mut rng, &[2, 4, 8]);
            let shape = [pick(&mut rng, &[1, 1, 2, 3]), k, pick(&mut rng, &[1, 3, 4, 7, 13]), heads, pick(&mut rng, &[1, 2, 3, 5])];
            let op = Op::with_epilogue(kind, e, &shape).unwrap();
            let s = random_matvec(&mut rng, &op);
            assert_correct(&op, &s);
        }
    }
}

/// The fused products of SmolLM2's decode step (`DecoderGraph::fused`):
/// norm and QKV, norm, gate/up and SwiGLU, O and down with the residual
/// add, norm and the output head; the first lite candidates of this
/// adapter and of the H100.
#[test]
fn smollm2_fused_decode_shapes() {
    let mut times = Vec::new();
    let devices = devices();
    for (name, k, n) in [
        ("matmul_q4_1+rms_norm", 576, 960),
        ("matmul_q4_1+rms_norm+swiglu", 576, 1536),
        ("matmul_q4_1+residual", 576, 576),
        ("matmul_q4_1+residual", 1536, 576),
        ("matmul_q8_0+rms_norm", 576, 49152),
        // The output projection with the attention's merge (9 heads, 16 parts).
        ("matmul_q4_1+merge+residual", 576, 576),
    ] {
        let shape: Vec<u32> = if name.contains("+merge") { vec![1, k, n, 9, 16] } else { vec![1, k, n] };
        let op = Op::from_name(name, &shape).unwrap();
        for (i, (_, device)) in devices.iter().take(2).enumerate() {
            let space = lite_space(&op, Target::Wgsl, device, &Settings::builtin(Target::Wgsl));
            assert!(space.schedules.iter().all(|s| !s.cache_read), "{op}: the epilogues have the matrix-vector kernel only");
            let take = if n == 49152 || i > 0 { 1 } else { 2 };
            for s in space.schedules.iter().filter(|s| runnable(s)).take(take) {
                times.push(assert_correct(&op, s));
            }
        }
    }
    report("SmolLM2 fused decode shapes", &times);
}

/// Prints the compile times (debug builds validate the text twice).
fn report(what: &str, ms: &[f64]) {
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "{what}: {} kernels, compile ms median {:.3}, mean {mean:.3}, max {:.3} ({})",
        v.len(),
        v.get(v.len() / 2).copied().unwrap_or(0.0),
        v.last().copied().unwrap_or(0.0),
        if cfg!(debug_assertions) { "debug build" } else { "release build" }
    );
}
