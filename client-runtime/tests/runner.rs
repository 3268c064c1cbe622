//! The native runner on real engines: WGSL kernels on the default wgpu adapter
//! (Mesa lavapipe in CI: `WGPU_BACKEND=vulkan`, `mesa-vulkan-drivers`), Wasm
//! kernels in wasmtime. Random small shapes (primes and 1 included) × random
//! valid GPU schedules, each checked against the f64 reference.

use std::sync::OnceLock;

use webtune_client_runtime::gpu::Gpu;
use webtune_client_runtime::wasm::WasmEngine;
use webtune_client_runtime::{KernelDir, RunError, RunOptions};
use webtune_compiler::reference::Rng;
use webtune_compiler::{Op, Schedule, Target, compile};

fn gpu() -> &'static Gpu {
    static G: OnceLock<Gpu> = OnceLock::new();
    G.get_or_init(|| {
        Gpu::new().unwrap_or_else(|e| panic!("{e}: WGSL tests need a wgpu adapter (install mesa-vulkan-drivers, set WGPU_BACKEND=vulkan)"))
    })
}

/// Correctness only: one timed sample keeps lavapipe runs short.
fn quick() -> RunOptions {
    RunOptions { reps: 1, warmup: 0, warmup_ms: 0.0, min_sample_ms: 0.0, seed: 5, ..RunOptions::default() }
}

fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[(rng.next_u64() % xs.len() as u64) as usize]
}

const DIMS: [u32; 10] = [1, 2, 3, 4, 5, 7, 8, 13, 16, 31];

fn random_matmul_schedule(rng: &mut Rng, op: &Op) -> Schedule {
    loop {
        let x0 = pick(rng, &[1, 2, 4, 8]);
        let y0 = pick(rng, &[1, 2, 4, 8]);
        let r0 = pick(rng, &[1, 2, 4]);
        let cache_read = !rng.next_u64().is_multiple_of(4);
        let s = Schedule {
            x0,
            y0,
            r0,
            x1: x0 * pick(rng, &[1, 2, 4, 8]),
            y1: y0 * pick(rng, &[1, 2, 4]),
            r1: r0 * pick(rng, &[1, 2, 3, 4]),
            vectorize: pick(rng, &[1, 4]),
            cache_read,
            double_buffer: cache_read && rng.next_u64().is_multiple_of(2),
            // Split-K groups (staged only), 3 included: a last round with
            // slabs past K.
            split_k: if cache_read { pick(rng, &[1, 1, 2, 3, 4]) } else { 1 },
            unroll: if rng.next_u64().is_multiple_of(3) {
                vec![webtune_compiler::schedule::UnrollLoop::X0, webtune_compiler::schedule::UnrollLoop::Y0]
            } else {
                Schedule::default_for(op, Target::Wgsl).unroll
            },
            ..Schedule::default_for(op, Target::Wgsl)
        };
        if s.check(op, Target::Wgsl).is_ok() {
            return s;
        }
    }
}

/// A q4 schedule with `y0` drawn from `outputs` outputs per thread (with
/// `y0 > 1`, A's values are loaded once per word for all of a thread's
/// outputs, and outputs past N read W's last row).
fn random_q4_schedule(rng: &mut Rng, op: &Op, outputs: &[u32]) -> Schedule {
    loop {
        let x0 = pick(rng, &[1, 2, 3]);
        let y0 = if outputs.len() == 1 { outputs[0] } else { pick(rng, outputs) };
        let r0 = pick(rng, &[8, 16, 32, 64, 128]);
        let split_k = pick(rng, &[1, 2, 3, 4, 8, 32]);
        // Subgroup butterflies where this adapter's subgroups hold split_k lanes.
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

/// A tiled matmul_q4 schedule (cache_read): the matmul tiles with the slab
/// r1 a multiple of 8 (24 and 40 included, so K is often not a multiple).
fn random_tiled_q4_schedule(rng: &mut Rng, op: &Op) -> Schedule {
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
            r1: pick(rng, &[8, 16, 24, 32, 40]),
            vectorize: pick(rng, &[1, 4]),
            cache_read: true,
            double_buffer: pick(rng, &[false, true]),
            split_k: pick(rng, &[1, 1, 2, 3]),
            ..Schedule::default_for(op, Target::Wgsl)
        };
        if s.check(op, Target::Wgsl).is_ok() {
            return s;
        }
    }
}

fn assert_correct(op: &Op, s: &Schedule) {
    let k = compile(op, Target::Wgsl, s).unwrap_or_else(|e| panic!("{} {s:?}: {e}", op.slug()));
    let r = gpu().run(&KernelDir::from_kernel(k), &quick()).unwrap_or_else(|e| panic!("{} {s:?}: {e}", op.slug()));
    assert!(r.correct, "{} under {}: max_rel_err {}", op.slug(), serde_json::to_string(s).unwrap(), r.max_rel_err);
    assert!(r.median_ms > 0.0, "{r:?}");
}

#[test]
fn wgsl_matmul_random_shapes_and_schedules() {
    let mut rng = Rng::new(11);
    for _ in 0..40 {
        let op = Op::new(webtune_compiler::OpKind::Matmul, &[pick(&mut rng, &DIMS), pick(&mut rng, &DIMS), pick(&mut rng, &DIMS)]).unwrap();
        let s = random_matmul_schedule(&mut rng, &op);
        assert_correct(&op, &s);
    }
}

#[test]
fn wgsl_batch_matmul_random_shapes_and_schedules() {
    let mut rng = Rng::new(12);
    for _ in 0..15 {
        let shape = [pick(&mut rng, &[1, 2, 3]), pick(&mut rng, &DIMS), pick(&mut rng, &DIMS), pick(&mut rng, &DIMS)];
        let op = Op::new(webtune_compiler::OpKind::BatchMatmul, &shape).unwrap();
        let s = random_matmul_schedule(&mut rng, &op);
        assert_correct(&op, &s);
    }
}

/// Every fused epilogue (bias, GELU or ReLU, residual) on random shapes and
/// schedules, matmul and batch_matmul, in WGSL on the adapter and in
/// wasmtime, against the f64 reference.
#[test]
fn epilogues_random_shapes_and_schedules() {
    let mut rng = Rng::new(18);
    let epilogues: Vec<_> = webtune_compiler::op::Epilogue::all().into_iter().filter(|e| !e.is_none()).collect();
    let engine = WasmEngine::new().unwrap();
    for (i, e) in epilogues.iter().cycle().take(2 * epilogues.len()).enumerate() {
        let (kind, shape) = if i % 3 == 2 {
            (
                webtune_compiler::OpKind::BatchMatmul,
                vec![pick(&mut rng, &[1, 2, 3]), pick(&mut rng, &DIMS), pick(&mut rng, &DIMS), pick(&mut rng, &DIMS)],
            )
        } else {
            (webtune_compiler::OpKind::Matmul, vec![pick(&mut rng, &DIMS), pick(&mut rng, &DIMS), pick(&mut rng, &DIMS)])
        };
        let op = Op::with_epilogue(kind, *e, &shape).unwrap();
        let s = random_matmul_schedule(&mut rng, &op);
        assert_correct(&op, &s);
        let k = compile(&op, Target::Wasm, &Schedule::default_for(&op, Target::Wasm)).unwrap();
        let r = engine.run(&KernelDir::from_kernel(k), &quick()).unwrap();
        assert!(r.correct, "wasm {}: max_rel_err {}", op.slug(), r.max_rel_err);
    }
}

#[test]
fn wgsl_matmul_q4_several_outputs_per_thread() {
    let mut rng = Rng::new(14);
    for _ in 0..20 {
        // N often not a multiple of the workgroup's outputs (the clamped rows).
        let shape = [pick(&mut rng, &[1, 1, 2, 3]), 32 * pick(&mut rng, &[1, 2, 3, 5]), pick(&mut rng, &[1, 2, 5, 7, 13, 17, 24])];
        let op = Op::new(webtune_compiler::OpKind::MatmulQ4, &shape).unwrap();
        let s = random_q4_schedule(&mut rng, &op, &[2, 3, 4, 8]);
        assert_correct(&op, &s);
    }
}

#[test]
fn wgsl_matmul_q4_double_buffered_steps() {
    // Register double buffering: two or more whole K steps (the loop that
    // prefetches the next step, then the last step on its own), with and
    // without a guarded remainder after them, one or four words per load,
    // one or several outputs per thread and rows of A, N ragged.
    let mut rng = Rng::new(15);
    let mut steps_seen = std::collections::BTreeSet::new();
    for _ in 0..16 {
        let shape = [pick(&mut rng, &[1, 1, 2, 3]), 32 * pick(&mut rng, &[2, 3, 4, 6, 9, 13]), pick(&mut rng, &[1, 5, 8, 13, 24])];
        let op = Op::new(webtune_compiler::OpKind::MatmulQ4, &shape).unwrap();
        let s = loop {
            let x0 = pick(&mut rng, &[1, 2]);
            let y0 = pick(&mut rng, &[1, 2, 4]);
            let r0 = pick(&mut rng, &[8, 16, 32]);
            let s = Schedule {
                x0,
                x1: x0,
                y0,
                y1: y0 * pick(&mut rng, &[1, 2, 3]),
                r0,
                r1: r0,
                split_k: pick(&mut rng, &[1, 2, 3, 4]),
                vectorize: pick(&mut rng, &[1, 4]),
                double_buffer: true,
                ..Schedule::default_for(&op, Target::Wgsl)
            };
            if s.check(&op, Target::Wgsl).is_ok() {
                break s;
            }
        };
        let (steps, rest) = s.q4_gpu_steps(shape[1]);
        steps_seen.insert(steps.min(4) * 10 + u32::from(rest != 0));
        assert_correct(&op, &s);
    }
    // Two steps and more than three, each with and without a remainder.
    for want in [20, 21, 40, 41] {
        assert!(steps_seen.contains(&want), "no schedule with (steps, remainder) code {want}: {steps_seen:?}");
    }
}

#[test]
fn wgsl_matmul_q4_random_shapes_and_schedules() {
    let mut rng = Rng::new(13);
    for _ in 0..25 {
        let shape = [pick(&mut rng, &[1, 1, 2, 3]), 32 * pick(&mut rng, &[1, 2, 3, 5]), pick(&mut rng, &[1, 2, 3, 7, 13, 17])];
        let op = Op::new(webtune_compiler::OpKind::MatmulQ4, &shape).unwrap();
        let s = random_q4_schedule(&mut rng, &op, &[1]);
        assert_correct(&op, &s);
    }
}

/// The tiled matmul_q4 family (cache_read: the matmul kernel with B
/// dequantised into workgroup memory) on random shapes: M from 1, K a
/// multiple of 32 but often not of the slab r1 (the zero-filled K edge), N
/// ragged and not a multiple of 4 (scalar B tile) or a multiple (vec4 B
/// tile, one thread per 4 columns × 8 K), single and double buffered.
#[test]
fn wgsl_matmul_q4_tiled_random_shapes_and_schedules() {
    let mut rng = Rng::new(16);
    let (mut vec4_seen, mut split_seen) = (false, false);
    for _ in 0..20 {
        let shape =
            [pick(&mut rng, &[1, 2, 5, 13, 31, 33, 64]), 32 * pick(&mut rng, &[1, 2, 3, 5]), pick(&mut rng, &[1, 3, 4, 7, 13, 16, 24, 36])];
        let op = Op::new(webtune_compiler::OpKind::MatmulQ4, &shape).unwrap();
        let s = random_tiled_q4_schedule(&mut rng, &op);
        vec4_seen |= webtune_compiler::generate::matmul_gpu::uses_vec4(shape[2], &s);
        split_seen |= s.split_k > 1;
        assert_correct(&op, &s);
    }
    assert!(vec4_seen, "no schedule staged a vec4 B tile");
    assert!(split_seen, "no schedule split K among groups");
}

/// Split-K across workgroups (`k_slices`, two passes and a scratch buffer
/// that the runner poisons): matmul, batch_matmul, tiled matmul_q4, fused
/// epilogues and f16 (where the adapter has it), K long enough for several
/// slabs and often not a whole number of them or of the slices' rounds.
#[test]
fn wgsl_k_slices_random_shapes_and_schedules() {
    use webtune_compiler::OpKind;
    let mut rng = Rng::new(23);
    let epilogues = webtune_compiler::op::Epilogue::all();
    let mut kinds_seen = std::collections::BTreeSet::new();
    for i in 0..24 {
        let kind = pick(&mut rng, &[OpKind::Matmul, OpKind::Matmul, OpKind::BatchMatmul, OpKind::MatmulQ4]);
        let (m, n) = (pick(&mut rng, &DIMS), pick(&mut rng, &[1, 3, 4, 7, 13, 16, 24]));
        let shape = match kind {
            OpKind::BatchMatmul => vec![pick(&mut rng, &[1, 2, 3]), m, pick(&mut rng, &[9, 40, 77, 130]), n],
            OpKind::MatmulQ4 => vec![m, 32 * pick(&mut rng, &[2, 3, 5]), n],
            _ => vec![m, pick(&mut rng, &[9, 40, 77, 130, 200]), n],
        };
        let epilogue = if kind == OpKind::MatmulQ4 { webtune_compiler::op::Epilogue::NONE } else { pick(&mut rng, &epilogues) };
        let mut op = Op::with_epilogue(kind, epilogue, &shape).unwrap();
        if i % 5 == 4 && gpu().has_f16() {
            op = op.with_dtype(webtune_compiler::op::Dtype::F16).unwrap();
        }
        let s = loop {
            let base =
                if kind == OpKind::MatmulQ4 { random_tiled_q4_schedule(&mut rng, &op) } else { random_matmul_schedule(&mut rng, &op) };
            let half = op.dtype() == webtune_compiler::op::Dtype::F16 && pick(&mut rng, &[false, true]);
            let s = Schedule { cache_read: true, k_slices: pick(&mut rng, &[2, 3, 4, 5]), f16_acc: half, ..base };
            if s.check(&op, Target::Wgsl).is_ok() {
                break s;
            }
        };
        let k = compile(&op, Target::Wgsl, &s).unwrap();
        assert_eq!(k.meta.abi, webtune_compiler::kernel::ABI_PASSES);
        let passes = k.meta.passes.as_ref().expect("a k_slices kernel lists its passes");
        assert_eq!(passes.iter().map(|p| p.entry.as_str()).collect::<Vec<_>>(), ["main", "reduce"]);
        let size = if s.f16_acc { 2 } else { 4 };
        assert_eq!(k.meta.scratch_bytes, Some(size * s.k_slices * op.shape().iter().product::<u32>() / op.bmkn().2));
        kinds_seen.insert(op.name());
        assert_correct(&op, &s);
    }
    assert!(kinds_seen.len() >= 5, "{kinds_seen:?}");
}

/// Tiled matmul_q4 in two passes (`dequant_pass`: `unpack` writes the dense
/// weights to the scratch buffer, which the runner poisons, and `main` is
/// the matmul on them): random shapes, N a multiple of 4 (vec4 rows) and
/// not, K and N not whole numbers of the unpack pass's workgroups (its
/// guard), f32 and `+f16` ops (where the adapter has `shader-f16`) in f32
/// and f16 arithmetic, alone and with `k_slices` (three passes: the
/// partial sums after the weights in the one scratch buffer).
#[test]
fn wgsl_matmul_q4_dequant_pass_random_shapes_and_schedules() {
    let mut rng = Rng::new(29);
    let (mut widths, mut dtypes, mut slices) =
        (std::collections::BTreeSet::new(), std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for i in 0..14 {
        let shape = [pick(&mut rng, &[1, 2, 5, 33]), 32 * pick(&mut rng, &[1, 3, 5, 8]), pick(&mut rng, &[1, 3, 4, 7, 16, 260])];
        let mut op = Op::new(webtune_compiler::OpKind::MatmulQ4, &shape).unwrap();
        if i % 4 == 3 && gpu().has_f16() {
            op = op.with_dtype(webtune_compiler::op::Dtype::F16).unwrap();
        }
        let s = loop {
            let base = random_tiled_q4_schedule(&mut rng, &op);
            // f16 arithmetic on every other f16 op.
            let half = op.dtype() == webtune_compiler::op::Dtype::F16 && i % 8 == 3;
            let k_slices = pick(&mut rng, &[1, 2, 3]);
            let s = Schedule { dequant_pass: true, f16_acc: half, k_slices, ..base };
            // Register tiles of up to 16: lavapipe takes up to a minute to
            // compile the largest (8×8, double-buffered) on one core.
            if s.x0 * s.y0 <= 16 && s.check(&op, Target::Wgsl).is_ok() {
                break s;
            }
        };
        let k = compile(&op, Target::Wgsl, &s).unwrap();
        assert_eq!(k.meta.abi, webtune_compiler::kernel::ABI_PASSES);
        let passes = k.meta.passes.as_ref().expect("a dequant_pass kernel lists its passes");
        let entries: Vec<&str> = passes.iter().map(|p| p.entry.as_str()).collect();
        assert_eq!(entries, if s.k_slices > 1 { &["unpack", "main", "reduce"][..] } else { &["unpack", "main"] });
        assert_eq!(k.meta.entry, "unpack");
        // The unpacked weights (K × N), then the slices' partial outputs:
        // f16 in f16 arithmetic, f32 with f32 partial sums, else the op's type.
        let f16_weights = s.f16_acc || (op.dtype() == webtune_compiler::op::Dtype::F16 && s.k_slices == 1);
        let size = if f16_weights { 2 } else { 4 };
        let partials = if s.k_slices > 1 { s.k_slices * shape[0] * shape[2] } else { 0 };
        assert_eq!(k.meta.scratch_bytes, Some(size * (shape[1] * shape[2] + partials)));
        slices.insert(s.k_slices > 1);
        widths.insert(shape[2].is_multiple_of(4));
        dtypes.insert((op.dtype() == webtune_compiler::op::Dtype::F16, s.f16_acc));
        assert_correct(&op, &s);
    }
    assert_eq!(widths.len(), 2, "N a multiple of 4 and not: {widths:?}");
    assert_eq!(slices.len(), 2, "with and without k_slices: {slices:?}");
    assert!(dtypes.len() >= if gpu().has_f16() { 3 } else { 1 }, "{dtypes:?}");
}

#[test]
fn wgsl_defaults_on_larger_shapes() {
    for (kind, shape) in [("matmul", "67,129,65"), ("batch_matmul", "3,33,64,20"), ("matmul_q4", "1,512,67")] {
        let op = Op::parse(kind, shape).unwrap();
        assert_correct(&op, &Schedule::default_for(&op, Target::Wgsl));
    }
}

#[test]
fn kernels_without_runtime_bounds_checks_compute_the_same() {
    // A device of its own: turning checks off must not leak into other tests.
    let mut g = Gpu::new().expect("wgpu adapter");
    g.set_bounds_checks(false);
    for (kind, shape) in [("matmul", "67,129,65"), ("matmul_q4", "1,512,67")] {
        let op = Op::parse(kind, shape).unwrap();
        let k = compile(&op, Target::Wgsl, &Schedule::default_for(&op, Target::Wgsl)).unwrap();
        let r = g.run(&KernelDir::from_kernel(k), &quick()).unwrap();
        assert!(r.correct, "{kind} {shape}: max_rel_err {}", r.max_rel_err);
    }
}

#[test]
fn a_wrong_wgsl_kernel_is_reported_wrong_and_not_timed() {
    let op = Op::parse("matmul", "8,8,8").unwrap();
    let mut k = compile(&op, Target::Wgsl, &Schedule::default_for(&op, Target::Wgsl)).unwrap();
    // Scale every stored value: still valid WGSL, no longer the right answer.
    let src = String::from_utf8(k.bytes.clone()).unwrap();
    let stored = src.find("= v_acc_0_0_;").expect("the kernel reads its first accumulator");
    let bad = format!("{}= (v_acc_0_0_ * 2.0f);{}", &src[..stored], &src[stored + "= v_acc_0_0_;".len()..]);
    assert_ne!(src, bad);
    k.bytes = bad.into_bytes();
    k.meta.sha256 = webtune_compiler::kernel::sha256_hex(&k.bytes);
    let r = gpu().run(&KernelDir::from_kernel(k), &quick()).unwrap();
    assert!(!r.correct);
    assert!(r.median_ms.is_nan() && r.samples == 0);
}

#[test]
fn wasm_kernels_run_in_wasmtime() {
    let engine = WasmEngine::new().unwrap();
    for (kind, shape) in
        [("matmul", "13,31,7"), ("batch_matmul", "2,5,8,3"), ("matmul_q4", "2,64,5"), ("matmul_q4_1", "2,64,5"), ("matmul_q8_0", "2,64,5")]
    {
        let op = Op::parse(kind, shape).unwrap();
        let k = compile(&op, Target::Wasm, &Schedule::default_for(&op, Target::Wasm)).unwrap();
        let r = engine
            .run(&KernelDir::from_kernel(k), &RunOptions { reps: 3, warmup: 1, min_sample_ms: 0.5, seed: 2, ..RunOptions::default() })
            .unwrap();
        assert!(r.correct, "{kind} {shape}: {}", r.max_rel_err);
        assert_eq!(r.samples, 3);
        assert!(r.min_ms <= r.median_ms && r.median_ms <= r.max_ms && r.gflops > 0.0);
    }
}

#[test]
fn kernel_dirs_are_checked_on_load() {
    let dir = std::env::temp_dir().join(format!("webtune-runner-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let op = Op::parse("matmul", "4,4,4").unwrap();
    let k = compile(&op, Target::Wgsl, &Schedule::default_for(&op, Target::Wgsl)).unwrap();
    std::fs::write(dir.join("kernel.wgsl"), &k.bytes).unwrap();
    std::fs::write(dir.join("kernel.json"), serde_json::to_vec(&k.meta).unwrap()).unwrap();
    let loaded = KernelDir::load(&dir).unwrap();
    assert_eq!(loaded.bytes, k.bytes);
    std::fs::write(dir.join("kernel.wgsl"), b"tampered").unwrap();
    let e = KernelDir::load(&dir).unwrap_err();
    assert!(matches!(e, RunError::Input(ref m) if m.contains("SHA-256")), "{e}");
    std::fs::remove_file(dir.join("kernel.json")).unwrap();
    assert!(matches!(KernelDir::load(&dir), Err(RunError::Input(_))));
    // A kernel of two passes (ABI 3) loads and runs from its directory; its
    // metadata without `passes`, or `passes` on an ABI 1 kernel, does not load.
    let op = Op::parse("matmul+bias", "9,96,12").unwrap();
    let s = Schedule { cache_read: true, r0: 4, r1: 8, k_slices: 3, ..Schedule::default_for(&op, Target::Wgsl) };
    let k = compile(&op, Target::Wgsl, &s).unwrap();
    std::fs::write(dir.join("kernel.wgsl"), &k.bytes).unwrap();
    std::fs::write(dir.join("kernel.json"), serde_json::to_vec(&k.meta).unwrap()).unwrap();
    let r = gpu().run(&KernelDir::load(&dir).unwrap(), &quick()).unwrap();
    assert!(r.correct, "max_rel_err {}", r.max_rel_err);
    let mut meta = k.meta.clone();
    meta.passes = None;
    std::fs::write(dir.join("kernel.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
    assert!(matches!(KernelDir::load(&dir), Err(RunError::Input(ref m)) if m.contains("passes")));
    let mut meta = k.meta.clone();
    meta.abi = webtune_compiler::kernel::ABI_VERSION;
    std::fs::write(dir.join("kernel.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
    assert!(matches!(KernelDir::load(&dir), Err(RunError::Input(ref m)) if m.contains("passes")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wgsl_matmul_q4_subgroup_reduction_and_whole_blocks() {
    // Lavapipe (CI) and every GPU adapter measured so far have subgroups;
    // the butterfly must be checked, not skipped.
    let min = gpu().subgroups().expect("the test adapter has the `subgroups` feature");
    let mut rng = Rng::new(15);
    let mut splits: Vec<u32> = [2, 4, 8, 16, 32, 64].into_iter().filter(|&s| s <= min).collect();
    splits.truncate(3);
    assert!(!splits.is_empty(), "subgroups of {min} invocations");
    for _ in 0..12 {
        let shape = [pick(&mut rng, &[1, 1, 2]), 32 * pick(&mut rng, &[1, 3, 4, 6]), pick(&mut rng, &[1, 5, 8, 13, 24])];
        let op = Op::new(webtune_compiler::OpKind::MatmulQ4, &shape).unwrap();
        let y0 = pick(&mut rng, &[1, 2, 4]);
        let s = Schedule {
            y0,
            y1: y0 * pick(&mut rng, &[1, 2, 4]),
            split_k: pick(&mut rng, &splits),
            r0: pick(&mut rng, &[32, 64, 128]),
            vectorize: pick(&mut rng, &[1, 4]),
            subgroup_reduce: true,
            ..Schedule::default_for(&op, Target::Wgsl)
        };
        let s = Schedule { r1: s.r0, ..s };
        s.check(&op, Target::Wgsl).unwrap();
        let k = compile(&op, Target::Wgsl, &s).unwrap();
        assert_eq!(k.meta.min_subgroup_size, Some(s.split_k));
        assert_correct(&op, &s);
    }
}

/// `+f16` ops (f16 storage, f32 accumulation) of every family on random
/// shapes and schedules, against the f64 reference of their f16 inputs to
/// the f16 tolerance; where the adapter has no `shader-f16`, the runner
/// refuses them with a line that says so.
#[test]
fn wgsl_f16_ops_random_shapes_and_schedules() {
    use webtune_compiler::OpKind::{BatchMatmul, Matmul, MatmulQ4};
    let mut rng = Rng::new(19);
    let epilogues = webtune_compiler::op::Epilogue::all();
    let (mut families, mut arithmetic) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for i in 0..24 {
        let e = pick(&mut rng, &epilogues);
        let d = |rng: &mut Rng| pick(rng, &DIMS);
        let q4 = |rng: &mut Rng| [pick(rng, &[1, 2, 5, 33]), 32 * pick(rng, &[1, 2, 3]), pick(rng, &[1, 3, 4, 7, 16])];
        let op = match i % 4 {
            0 => Op::with_epilogue(Matmul, e, &[d(&mut rng), d(&mut rng), d(&mut rng)]),
            1 => Op::with_epilogue(BatchMatmul, e, &[pick(&mut rng, &[1, 2, 3]), d(&mut rng), d(&mut rng), d(&mut rng)]),
            _ => Op::new(MatmulQ4, &q4(&mut rng)),
        };
        let op = op.and_then(|o| o.with_dtype(webtune_compiler::op::Dtype::F16)).unwrap();
        let s = match i % 4 {
            0 | 1 => random_matmul_schedule(&mut rng, &op),
            2 => random_q4_schedule(&mut rng, &op, &[1, 2, 4]),
            _ => random_tiled_q4_schedule(&mut rng, &op),
        };
        // f16 arithmetic (f16 sums over K) where the schedule allows it, every other time.
        let half = Schedule { f16_acc: true, ..s.clone() };
        let s = if i % 8 < 4 && half.check(&op, Target::Wgsl).is_ok() { half } else { s };
        families.insert((op.kind(), s.cache_read));
        arithmetic.insert(s.f16_acc);
        let k = compile(&op, Target::Wgsl, &s).unwrap_or_else(|e| panic!("{} {s:?}: {e}", op.slug()));
        assert!(webtune_compiler::wgsl::needs_f16(std::str::from_utf8(&k.bytes).unwrap()), "{}", op.slug());
        assert!(k.meta.args.iter().all(|a| a.dtype == if a.name == "W" { "u32" } else { "f16" }), "{:?}", k.meta.args);
        let k = KernelDir::from_kernel(k);
        if !gpu().has_f16() {
            let e = gpu().run(&k, &quick()).unwrap_err();
            assert!(e.to_string().contains("shader-f16"), "{e}");
            continue;
        }
        let r = gpu().run(&k, &quick()).unwrap_or_else(|e| panic!("{} {s:?}: {e}", op.slug()));
        assert!(r.correct, "{} under {}: max_rel_err {}", op.slug(), serde_json::to_string(&s).unwrap(), r.max_rel_err);
    }
    // Staged and direct matmul and batch_matmul, both q4 families, f16 and f32 sums.
    assert!(families.len() >= 5, "{families:?}");
    assert_eq!(arithmetic.len(), 2, "{arithmetic:?}");
    eprintln!("f16 on this adapter: {}", gpu().has_f16());
}
