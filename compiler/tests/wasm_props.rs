//! Property tests: random shapes × random valid schedules × every pass
//! combination, each kernel validated, run in wasmtime on seeded inputs and
//! compared with the f64 reference.

mod common;

use proptest::prelude::*;
use webtune_compiler::op::Epilogue;
use webtune_compiler::schedule::{LoopOrder, UnrollLoop};
use webtune_compiler::{Op, OpKind, Schedule, Target, WasmPasses, compile};

/// Any epilogue but none (bias, gelu or relu, residual).
fn epilogue() -> impl Strategy<Value = Epilogue> {
    prop::sample::select(Epilogue::all().into_iter().filter(|e| !e.is_none()).collect::<Vec<_>>())
}

/// Dimensions from 1 to 300, biased towards primes and small sizes, where remainder code lives.
fn dim() -> impl Strategy<Value = u32> {
    prop_oneof![prop::sample::select(vec![1u32, 2, 3, 5, 7, 11, 13, 17, 31, 37, 61, 97, 127, 251, 257, 293]), 1u32..=300,]
}

fn pow2(max_log: u32) -> impl Strategy<Value = u32> {
    (0..=max_log).prop_map(|l| 1u32 << l)
}

prop_compose! {
    fn schedule()(
        x0 in prop::sample::select(vec![1u32, 2, 3, 4, 6]),
        y0q in 1u32..=4,
        r0 in prop::sample::select(vec![1u32, 2, 3, 4, 8]),
        x1m in pow2(4), y1m in pow2(3), r1m in pow2(5),
        order in prop::sample::select(LoopOrder::ALL.to_vec()),
        inner_n_first: bool,
        unroll_tile: bool, unroll_r0: bool,
        vec4: bool, cache_read: bool, relaxed_simd: bool,
        offset: bool, load_splat: bool, tee: bool,
    ) -> Schedule {
        let vectorize = if vec4 { 4 } else { 1 };
        let y0 = if vec4 { 4 * y0q } else { y0q };
        let mut unroll = Vec::new();
        if unroll_tile { unroll.extend([UnrollLoop::X0, UnrollLoop::Y0]); }
        if unroll_r0 { unroll.push(UnrollLoop::R0); }
        Schedule {
            x0, y0, r0, x1: x0 * x1m, y1: y0 * y1m, r1: r0 * r1m,
            order, inner_n_first, unroll, vectorize, cache_read, relaxed_simd,
            passes: WasmPasses { offset, load_splat, tee },
            double_buffer: false, split_k: 1, subgroup_reduce: false, f16_acc: false, k_slices: 1, dequant_pass: false, quantize_a: false, threads: 1, split: None,
        }
    }
}

fn check(op: &Op, s: &Schedule) -> Result<(), TestCaseError> {
    let k = compile(op, Target::Wasm, s).map_err(|e| TestCaseError::fail(format!("{op} {s:?}: {e}")))?;
    let c = common::run_and_check(op, &k, 11);
    prop_assert!(c.ok(), "{op} with {}: max_rel_err {} at output {}", serde_json::to_string(s).unwrap(), c.max_rel_err, c.worst);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn matmul_matches_reference(m in dim(), k in dim(), n in dim(), s in schedule()) {
        // Keep each case cheap for the f64 reference.
        prop_assume!((m as u64) * (k as u64) * (n as u64) <= 3_000_000);
        check(&Op::new(OpKind::Matmul, &[m, k, n]).unwrap(), &s)?;
    }

    #[test]
    fn batch_matmul_matches_reference(b in 1u32..5, m in dim(), k in 1u32..80, n in dim(), s in schedule()) {
        prop_assume!((b as u64) * (m as u64) * (k as u64) * (n as u64) <= 2_000_000);
        check(&Op::new(OpKind::BatchMatmul, &[b, m, k, n]).unwrap(), &s)?;
    }

    #[test]
    fn matmul_epilogue_matches_reference(m in dim(), k in dim(), n in dim(), s in schedule(), e in epilogue()) {
        prop_assume!((m as u64) * (k as u64) * (n as u64) <= 3_000_000);
        check(&Op::with_epilogue(OpKind::Matmul, e, &[m, k, n]).unwrap(), &s)?;
    }

    #[test]
    fn batch_matmul_epilogue_matches_reference(b in 1u32..5, m in dim(), k in 1u32..80, n in dim(), s in schedule(), e in epilogue()) {
        prop_assume!((b as u64) * (m as u64) * (k as u64) * (n as u64) <= 2_000_000);
        check(&Op::with_epilogue(OpKind::BatchMatmul, e, &[b, m, k, n]).unwrap(), &s)?;
    }

    #[test]
    fn matmul_q4_matches_reference(
        m in prop::sample::select(vec![1u32, 2, 3, 5]),
        kb in 1u32..=12, n in dim(),
        x0 in 1u32..=3, y0q in 1u32..=3, rblocks in 1u32..=4,
        vec4: bool, unroll_r0: bool, relaxed_simd: bool,
        offset: bool, load_splat: bool, tee: bool,
    ) {
        let op = Op::new(OpKind::MatmulQ4, &[m, 32 * kb, n]).unwrap();
        let mut s = Schedule::default_for(&op, Target::Wasm);
        s.x0 = x0; s.x1 = x0 * 2;
        s.vectorize = if vec4 { 4 } else { 1 };
        s.y0 = if vec4 { 4 * y0q } else { y0q };
        s.y1 = s.y0 * 4;
        s.r0 = 32 * rblocks; s.r1 = s.r0 * 4;
        s.unroll = if unroll_r0 { vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0] } else { vec![UnrollLoop::X0, UnrollLoop::Y0] };
        s.relaxed_simd = relaxed_simd;
        s.passes = WasmPasses { offset, load_splat, tee };
        check(&op, &s)?;
    }

    /// `matmul_q4_1` and `matmul_q8_0` (GGUF blocks): M = 1 (decode) and
    /// small prompts, any whole number of blocks, any N, register and cache
    /// tiles that do and do not divide, every pass; in registers (f32, or
    /// with 16-bit activations: `quantize_a`, to its own tolerance) and
    /// through the unpacked panel (`cache_read`).
    #[test]
    fn gguf_matches_reference(
        q8: bool,
        m in prop::sample::select(vec![1u32, 1, 2, 3, 5, 8]),
        kb in 1u32..=12, n in dim(),
        x0 in 1u32..=3, y0q in 1u32..=3, x1m in 1u32..=3, y1m in 1u32..=5, rblocks in 1u32..=4,
        vec4: bool, unroll_r0: bool, relaxed_simd: bool,
        offset: bool, load_splat: bool, tee: bool, panel: bool, quant: bool,
    ) {
        let kind = if q8 { OpKind::MatmulQ8_0 } else { OpKind::MatmulQ4_1 };
        let op = Op::new(kind, &[m, 32 * kb, n]).unwrap();
        let mut s = Schedule::default_for(&op, Target::Wasm);
        s.x0 = x0; s.x1 = x0 * x1m;
        s.vectorize = if vec4 { 4 } else { 1 };
        s.y0 = if vec4 { 4 * y0q } else { y0q };
        s.y1 = s.y0 * y1m;
        s.r0 = 32 * rblocks; s.r1 = s.r0 * 4;
        s.unroll = if unroll_r0 { vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0] } else { vec![UnrollLoop::X0, UnrollLoop::Y0] };
        s.relaxed_simd = relaxed_simd;
        s.passes = WasmPasses { offset, load_splat, tee };
        s.cache_read = panel;
        s.quantize_a = quant && vec4 && !panel;
        check(&op, &s)?;
    }

    /// `matmul_i16` under any schedule the Wasm check accepts for it (vector
    /// tiles in registers), with and without an epilogue. Inputs are raw
    /// 32-bit draws, so the integer sums wrap: the reference wraps them the
    /// same way.
    #[test]
    fn matmul_i16_matches_reference(
        m in dim(), kw in dim(), nq in 1u32..=60, s in schedule(), e in prop::option::of(epilogue()),
    ) {
        prop_assume!((m as u64) * (kw as u64) * (nq as u64) <= 500_000);
        let op = Op::with_epilogue(OpKind::MatmulI16, e.unwrap_or(Epilogue::NONE), &[m, 2 * kw, 4 * nq]).unwrap();
        let mut s = s;
        if s.vectorize != 4 {
            s.vectorize = 4;
            s.y0 *= 4;
            s.y1 *= 4;
        }
        for l in [UnrollLoop::X0, UnrollLoop::Y0] {
            if !s.unrolls(l) {
                s.unroll.push(l);
            }
        }
        check(&op, &s)?;
    }
}
