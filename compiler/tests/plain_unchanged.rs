//! Kernels without an epilogue are byte-identical to those of the compiler
//! before epilogues existed: one SHA-256 per target over the kernels of a
//! fixed grid of ops and seeded random schedules. The Wasm hash was recorded
//! from that compiler (commit 2d5d93b); the WGSL one again when the staged
//! tiles became two-dimensional, rows of one k (commit 8ec7585), and when
//! variables set in one block became `let`s instead of `var`s (2026-11-28),
//! each of which changed every WGSL kernel on purpose. A change to either
//! must be deliberate.

use sha2::{Digest, Sha256};
use webtune_compiler::reference::Rng;
use webtune_compiler::schedule::{LoopOrder, UnrollLoop};
use webtune_compiler::{Op, Schedule, Target, WasmPasses, compile};

const WANT_WASM: &str = "6a7f83e826e8bace95aa7d1a42eb624f5efa00c4bf5d1a7bfab7cde68a93e154";
const WANT_WGSL: &str = "e8bad2d979447e6df4c183ad798e45aa8aa33d3f65e64b8c5c2222bb51bf389d";

fn grid() -> Vec<(Op, Target, Schedule)> {
    let mut out = Vec::new();
    let ops = ["matmul 37,29,41", "matmul 64,96,80", "matmul 1,1,1", "batch_matmul 3,13,17,11", "matmul 128,384,1536", "matmul_q4 3,96,11"];
    let mut rng = Rng::new(2024);
    for text in ops {
        let (kind, shape) = text.split_once(' ').unwrap();
        let op = Op::parse(kind, shape).unwrap();
        for target in [Target::Wasm, Target::Wgsl] {
            let base = Schedule::default_for(&op, target);
            out.push((op.clone(), target, base.clone()));
            if op.kind() == webtune_compiler::OpKind::MatmulQ4 {
                continue;
            }
            let mut taken = 0;
            let mut tries = 0;
            while taken < 8 && tries < 500 {
                tries += 1;
                let r = |rng: &mut Rng, n: u64| (rng.next_u64() % n) as u32;
                let bit = |rng: &mut Rng| rng.next_u64().is_multiple_of(2);
                let vectorize = if bit(&mut rng) { 4 } else { 1 };
                let x0 = 1 + r(&mut rng, 4);
                let y0 = vectorize * (1 + r(&mut rng, 2));
                let r0 = 1 << r(&mut rng, 3);
                let s = Schedule {
                    x0,
                    y0,
                    r0,
                    x1: x0 << r(&mut rng, 4),
                    y1: y0 << r(&mut rng, 4),
                    r1: r0 << r(&mut rng, 4),
                    order: LoopOrder::ALL[r(&mut rng, 6) as usize],
                    inner_n_first: bit(&mut rng),
                    unroll: if bit(&mut rng) { vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0] } else { vec![UnrollLoop::R0] },
                    vectorize,
                    cache_read: bit(&mut rng),
                    relaxed_simd: target == Target::Wasm && bit(&mut rng),
                    double_buffer: target == Target::Wgsl && bit(&mut rng),
                    passes: WasmPasses { offset: bit(&mut rng), load_splat: bit(&mut rng), tee: bit(&mut rng) },
                    ..base.clone()
                };
                if s.check(&op, target).is_ok() {
                    out.push((op.clone(), target, s));
                    taken += 1;
                }
            }
        }
    }
    out
}

#[test]
fn kernels_without_an_epilogue_are_unchanged() {
    let grid = grid();
    assert!(grid.len() > 80, "only {} kernels in the grid", grid.len());
    for (target, want) in [(Target::Wasm, WANT_WASM), (Target::Wgsl, WANT_WGSL)] {
        let mut all = Sha256::new();
        let mine: Vec<_> = grid.iter().filter(|(_, t, _)| *t == target).collect();
        for (op, target, s) in &mine {
            let k = compile(op, *target, s).unwrap();
            all.update(k.meta.sha256.as_bytes());
        }
        let got = hex::encode(all.finalize());
        assert_eq!(got, want, "{} plain {target:?} kernels changed", mine.len());
    }
}
