//! Threaded Wasm kernels (ABI 2): on a random grid of shapes (primes, M = 1,
//! K not a multiple of 4), schedules and splits, every part run alone
//! writes exactly its own range of C; all parts run at once on separate
//! threads over one shared memory give bit for bit what `kernel` gives on one
//! thread, which matches the f64 reference; no guard byte around any
//! argument or the scratch area changes, and no input does.

mod common;

use common::SharedLayout;
use proptest::prelude::*;
use wasmtime::{Module, Val};
use webtune_compiler::op::Epilogue;
use webtune_compiler::reference::{self, POISON};
use webtune_compiler::schedule::{LoopOrder, Split, UnrollLoop};
use webtune_compiler::{Op, OpKind, Schedule, Target, WasmPasses, compile};

fn dim() -> impl Strategy<Value = u32> {
    prop_oneof![prop::sample::select(vec![1u32, 2, 3, 5, 7, 13, 17, 31, 37, 61, 97, 127]), 1u32..=160]
}

prop_compose! {
    fn schedule()(
        x0 in prop::sample::select(vec![1u32, 2, 3, 4]),
        y0q in 1u32..=3,
        r0 in prop::sample::select(vec![1u32, 2, 4]),
        x1m in 0u32..=3, y1m in 0u32..=2, r1m in 0u32..=4,
        order in prop::sample::select(LoopOrder::ALL.to_vec()),
        inner_n_first: bool, unroll_tile: bool, vec4: bool, cache_read: bool, relaxed_simd: bool,
        split in prop::sample::select(vec![Split::M, Split::N, Split::Batch]),
        threads in 2u32..=6,
    ) -> Schedule {
        let vectorize = if vec4 { 4 } else { 1 };
        let y0 = if vec4 { 4 * y0q } else { y0q };
        let mut unroll = vec![UnrollLoop::R0];
        if unroll_tile { unroll.extend([UnrollLoop::X0, UnrollLoop::Y0]); }
        Schedule {
            x0, y0, r0, x1: x0 << x1m, y1: y0 << y1m, r1: r0 << r1m,
            order, inner_n_first, unroll, vectorize, cache_read, relaxed_simd,
            passes: WasmPasses::default(),
            double_buffer: false, split_k: 1, subgroup_reduce: false, f16_acc: false, k_slices: 1, dequant_pass: false, quantize_a: false,
            threads, split: Some(split),
        }
    }
}

fn check(op: &Op, s: &Schedule) -> Result<(), TestCaseError> {
    // Shapes a split cannot divide into that many parts are the schedule check's
    // business (tested below); here only schedules it accepts.
    prop_assume!(s.check(op, Target::Wasm).is_ok());
    let k = compile(op, Target::Wasm, s).map_err(|e| TestCaseError::fail(format!("{op} {s:?}: {e}")))?;
    let label = format!("{op} with {}", serde_json::to_string(s).unwrap());
    prop_assert_eq!(k.meta.abi, 2);
    prop_assert_eq!(k.meta.threads, Some(s.threads));
    let module = Module::new(common::threads_engine(), &k.bytes).expect("wasmtime accepts the threaded module");
    let inputs = reference::inputs(op, 23);
    let mem = SharedLayout::new(&k, &inputs);
    let params = mem.params(&k);

    // The whole kernel on one thread.
    mem.call(&module, "kernel", &params);
    let whole = mem.output();
    let c = reference::check_kernel(op, s, &reference::reference(op, &inputs), &whole);
    prop_assert!(c.ok(), "{label}: kernel max_rel_err {} at {}", c.max_rel_err, c.worst);

    // Each part alone writes its own range, all of it, and nothing else of C.
    let (_, m, _, n) = op.bmkn();
    let ranges = k.meta.parts.clone().expect("parts in the metadata");
    for (p, [lo, hi]) in ranges.iter().copied().enumerate() {
        mem.poison_output();
        let mut pp = params.clone();
        pp.push(Val::I32(p as i32));
        mem.call(&module, "kernel_part", &pp);
        let out = mem.output();
        for (i, &w) in out.iter().enumerate() {
            let (b, row, col) = (i as u32 / (m * n), i as u32 / n % m, i as u32 % n);
            let at = match s.split.unwrap() {
                Split::M => row,
                Split::N => col,
                Split::Batch => b,
            };
            let mine = (lo..hi).contains(&at);
            prop_assert!(mine == (w != POISON), "{label}: part {p} [{lo}, {hi}) {} output {i}", if mine { "left" } else { "wrote" });
            if mine {
                prop_assert_eq!(w, whole[i], "{}: part {} differs from kernel at {}", label, p, i);
            }
        }
    }
    // A part number out of range does nothing.
    mem.poison_output();
    let mut pp = params.clone();
    pp.push(Val::I32(ranges.len() as i32));
    mem.call(&module, "kernel_part", &pp);
    prop_assert!(mem.output().iter().all(|&w| w == POISON), "{label}: part {} (out of range) wrote", ranges.len());

    // All parts at once, one thread each.
    mem.poison_output();
    std::thread::scope(|scope| {
        for p in 0..ranges.len() {
            let (mem, module, mut pp) = (&mem, &module, params.clone());
            pp.push(Val::I32(p as i32));
            scope.spawn(move || mem.call(module, "kernel_part", &pp));
        }
    });
    prop_assert!(mem.output() == whole, "{label}: parts on threads differ from kernel");
    let damage = mem.damage(&inputs);
    prop_assert!(damage.is_empty(), "{label}: {damage:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn threaded_matmul_matches(m in dim(), k in dim(), n in dim(), s in schedule()) {
        prop_assume!((m as u64) * (k as u64) * (n as u64) <= 1_500_000);
        check(&Op::new(OpKind::Matmul, &[m, k, n]).unwrap(), &s)?;
    }

    #[test]
    fn threaded_batch_matmul_matches(b in 1u32..7, m in dim(), k in 1u32..70, n in dim(), s in schedule()) {
        prop_assume!((b as u64) * (m as u64) * (k as u64) * (n as u64) <= 1_000_000);
        check(&Op::new(OpKind::BatchMatmul, &[b, m, k, n]).unwrap(), &s)?;
    }

    #[test]
    fn threaded_epilogues_match(m in dim(), k in dim(), n in dim(), s in schedule(),
                                e in prop::sample::select(Epilogue::all().into_iter().filter(|e| !e.is_none()).collect::<Vec<_>>())) {
        prop_assume!((m as u64) * (k as u64) * (n as u64) <= 1_500_000);
        check(&Op::with_epilogue(OpKind::Matmul, e, &[m, k, n]).unwrap(), &s)?;
    }

    /// `matmul_i16` split over M or N: its scales SA and SB move with their part's rows and columns.
    #[test]
    fn threaded_matmul_i16_matches(m in dim(), kw in 1u32..=97, nq in 1u32..=40, s in schedule(), bias: bool, gelu: bool) {
        prop_assume!((m as u64) * (kw as u64) * (nq as u64) <= 400_000);
        let mut s = s;
        if s.vectorize != 4 {
            s.vectorize = 4;
            s.y0 *= 4;
            s.y1 *= 4;
        }
        s.unroll = vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0];
        if s.split == Some(Split::Batch) {
            s.split = Some(Split::M);
        }
        let e = Epilogue { bias, act: if gelu { webtune_compiler::op::Activation::Gelu } else { Default::default() }, residual: bias, ..Epilogue::NONE };
        check(&Op::with_epilogue(OpKind::MatmulI16, e, &[m, 2 * kw, 4 * nq]).unwrap(), &s)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// `matmul_q4_1` and `matmul_q8_0` split over N (decode: M = 1, each
    /// part its own rows of W, D and Mn) or M (prefill), each part with its
    /// own scratch for Q4_1's rearranged A (or, with `quantize_a`, for the
    /// quantised rows each part makes itself).
    #[test]
    fn threaded_gguf_matches(q8: bool, m in prop::sample::select(vec![1u32, 1, 2, 3, 7, 16]), kb in 1u32..=8, n in dim(),
                             y0q in 1u32..=2, y1m in 0u32..=2, x1m in 0u32..=2, vec4: bool, split_n: bool, threads in 2u32..=5,
                             panel: bool, quant: bool) {
        let kind = if q8 { OpKind::MatmulQ8_0 } else { OpKind::MatmulQ4_1 };
        let op = Op::new(kind, &[m, 32 * kb, n]).unwrap();
        let y0 = if vec4 { 4 * y0q } else { y0q };
        let s = Schedule {
            x0: 1, y0, x1: 1 << x1m, y1: y0 << y1m, vectorize: if vec4 { 4 } else { 1 },
            threads, split: Some(if split_n { Split::N } else { Split::M }), cache_read: panel,
            quantize_a: quant && vec4 && !panel,
            ..Schedule::default_for(&op, Target::Wasm)
        };
        check(&op, &s)?;
    }
}

/// The shapes the issue names, each split its own way, so that the grid
/// above can never skip them all: M = 1 (split N), K not a multiple of 4,
/// primes everywhere, a batch split.
#[test]
fn named_shapes_run_threaded() {
    let base = Schedule { threads: 2, ..Schedule::default_for(&Op::parse("matmul", "8,8,8").unwrap(), Target::Wasm) };
    let cases = [
        ("matmul", "1,67,97", Schedule { split: Some(Split::N), y1: 16, ..base.clone() }),
        ("matmul", "37,13,29", Schedule { split: Some(Split::M), x1: 8, threads: 3, ..base.clone() }),
        ("matmul", "61,130,41", Schedule { split: Some(Split::N), y1: 8, r1: 32, cache_read: true, threads: 4, ..base.clone() }),
        ("batch_matmul", "5,7,11,13", Schedule { split: Some(Split::Batch), threads: 3, ..base.clone() }),
        ("matmul+bias+gelu", "17,31,64", Schedule { split: Some(Split::M), x1: 4, threads: 4, ..base.clone() }),
    ];
    let q = |name: &str| Schedule { threads: 2, ..Schedule::default_for(&Op::parse(name, "1,32,8").unwrap(), Target::Wasm) };
    let cases = cases.into_iter().chain([
        ("matmul_q4_1", "1,576,97", Schedule { split: Some(Split::N), y1: 16, threads: 4, ..q("matmul_q4_1") }),
        ("matmul_q8_0", "1,576,97", Schedule { split: Some(Split::N), y1: 8, threads: 3, ..q("matmul_q8_0") }),
        ("matmul_q4_1", "9,64,20", Schedule { split: Some(Split::M), x1: 2, ..q("matmul_q4_1") }),
        ("matmul_q8_0", "9,64,20", Schedule { split: Some(Split::M), x1: 4, y1: 4, ..q("matmul_q8_0") }),
        ("matmul_q4_1", "33,96,40", Schedule { split: Some(Split::N), x0: 3, y0: 8, x1: 33, y1: 16, cache_read: true, ..q("matmul_q4_1") }),
        ("matmul_q8_0", "33,96,40", Schedule { split: Some(Split::M), x0: 2, y0: 8, x1: 8, y1: 24, cache_read: true, ..q("matmul_q8_0") }),
        ("matmul_q4_1", "1,576,97", Schedule { split: Some(Split::N), y1: 16, threads: 4, quantize_a: true, ..q("matmul_q4_1") }),
        ("matmul_q8_0", "1,576,97", Schedule { split: Some(Split::N), y1: 8, threads: 3, quantize_a: true, ..q("matmul_q8_0") }),
        ("matmul_q4_1", "9,64,20", Schedule { split: Some(Split::M), x0: 2, x1: 4, y1: 8, quantize_a: true, ..q("matmul_q4_1") }),
    ]);
    for (op, shape, s) in cases {
        let op = Op::parse(op, shape).unwrap();
        s.check(&op, Target::Wasm).unwrap_or_else(|e| panic!("{op}: {e}"));
        check(&op, &s).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn impossible_splits_name_the_field() {
    let op = Op::parse("matmul", "1,64,64").unwrap();
    let base = Schedule { threads: 2, split: Some(Split::M), ..Schedule::default_for(&op, Target::Wasm) };
    for (s, field) in [
        (base.clone(), "threads"),                                                           // one row, two parts
        (Schedule { split: Some(Split::Batch), ..base.clone() }, "split"),                   // matmul has no batch
        (Schedule { split: None, ..base.clone() }, "split"),                                 // threads without a split
        (Schedule { threads: 1, ..base.clone() }, "split"),                                  // a split without threads
        (Schedule { threads: 99, split: Some(Split::N), y1: 8, ..base.clone() }, "threads"), // over the cap
    ] {
        assert_eq!(s.check(&op, Target::Wasm).unwrap_err().field, field, "{s:?}");
    }
    let q4 = Op::parse("matmul_q4", "1,64,64").unwrap();
    let s = Schedule { threads: 2, split: Some(Split::N), ..Schedule::default_for(&q4, Target::Wasm) };
    assert_eq!(s.check(&q4, Target::Wasm).unwrap_err().field, "threads");
    let wgsl = Schedule { threads: 2, split: Some(Split::N), ..Schedule::default_for(&op, Target::Wgsl) };
    assert_eq!(wgsl.check(&op, Target::Wgsl).unwrap_err().field, "threads");
}

/// A single-threaded schedule makes exactly the module it made before
/// threads existed: no shared memory, no second export, ABI 1.
#[test]
fn one_thread_is_abi_1() {
    let op = Op::parse("matmul", "64,64,64").unwrap();
    let k = compile(&op, Target::Wasm, &Schedule::default_for(&op, Target::Wasm)).unwrap();
    assert_eq!(k.meta.abi, 1);
    assert_eq!(k.meta.threads, None);
    let text = serde_json::to_string(&k.meta).unwrap();
    assert!(!text.contains("\"threads\"") && !text.contains("\"split\"") && !text.contains("\"parts\""), "{text}");
    assert!(!k.bytes.windows(11).any(|w| w == b"kernel_part"));
}
