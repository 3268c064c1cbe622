//! The naive space (NNJIT section 5.2's starting point): every tile size
//! and primitive setting the code generators read, counted, never listed.
//! [`naive_size`] is what a lite space reports it was pruned from.

use webtune_compiler::op::OpKind;
use webtune_compiler::schedule::MAX_Q4_OUTPUTS_PER_THREAD;
use webtune_compiler::{Op, Target};

use super::np2;

/// Tile sizes of a dimension in the naive space: every power of two and
/// every divisor up to the dimension.
fn naive_tiles(d: u32) -> Vec<u32> {
    let mut t: Vec<u32> = (0..32).map(|i| 1u32 << i).take_while(|&p| p <= d).collect();
    t.extend((1..=d).filter(|&i| d.is_multiple_of(i)));
    t.sort_unstable();
    t.dedup();
    t
}

/// Pairs `(t0, t1)` of naive tiles with `t0` dividing `t1` (a register tile
/// must divide its cache tile).
fn naive_pairs(d: u32) -> u64 {
    let t = naive_tiles(d);
    t.iter().map(|&a| t.iter().filter(|&&b| b % a == 0).count() as u64).sum()
}

/// Pairs `(t0, t1)` of a Wasm matmul dimension: a register tile `t0` that
/// is a naive tile or any size up to 16 (the generator unrolls any size;
/// the in-register rule picks e.g. 6 rows), and a cache tile `t1` that is
/// any multiple of it up to the dimension rounded up to a power of two.
/// Every `naive_pairs` pair is one of these.
fn naive_pairs_cpu(d: u32) -> u64 {
    let mut t0 = naive_tiles(d);
    t0.extend(1..=d.min(16));
    t0.sort_unstable();
    t0.dedup();
    let top = np2(d);
    t0.iter().map(|&a| (top / a) as u64).sum()
}

/// Size of the naive space: every combination of the tile sizes of
/// `naive_tiles` (per dimension, level-0 dividing level-1; on Wasm
/// matmul the wider pairs of `naive_pairs_cpu`) and of every
/// primitive the target's code generator reads, counted, not listed:
///
/// - Wasm matmul: tiles of M, N, K × 6 loop orders × 2 (inner_n_first) × 4
///   (unroll x0y0, r0) × 2 (vectorize) × 2 (cache_read) × 2 (relaxed SIMD) × 8 (passes);
/// - WGSL matmul: tiles of M, N, K × 4 (unroll) × 2 (vectorize) × 2 (cache_read) × 2 (double_buffer);
/// - Wasm matmul_q4: tiles of M and N × r0 (multiples of 32 among the naive
///   tiles of K) × 4 × 2 × 2 × 8;
/// - WGSL matmul_q4: rows x0 (naive tiles of M) × outputs y1 (of N) ×
///   split_k (naive tiles of K/8 up to 256) × r0 (multiples of 8 among the
///   naive tiles of K) × 8 (outputs per thread y0) × 4 (unroll) × 2
///   (vectorize) × 2 (subgroup_reduce) × 2 (double_buffer);
/// - Wasm matmul_i16: as Wasm matmul over K/2 words, vectorize fixed; it
///   has no WGSL kernels (0);
/// - matmul_q4_1 and matmul_q8_0: as matmul_q4 on each target.
pub fn naive_size(op: &Op, target: Target) -> u64 {
    let (_, m, k, n) = op.bmkn();
    let sat = |a: u64, b: u64| a.saturating_mul(b);
    match (op.kind(), target) {
        (OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0, Target::Wasm) => {
            let r0 = naive_tiles(k).into_iter().filter(|r| r % 32 == 0).count() as u64;
            [naive_pairs(m), naive_pairs(n), r0, 4 * 2 * 2 * 8].into_iter().fold(1, sat)
        }
        (OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0, Target::Wgsl) => {
            let r0 = naive_tiles(k).into_iter().filter(|r| r % 8 == 0).count() as u64;
            let split = naive_tiles(k / 8).into_iter().filter(|&s| s <= 256).count() as u64;
            [naive_tiles(m).len() as u64, naive_tiles(n).len() as u64, split, r0, MAX_Q4_OUTPUTS_PER_THREAD as u64 * 4 * 2 * 2 * 2]
                .into_iter()
                .fold(1, sat)
        }
        (OpKind::MatmulI16, Target::Wgsl) => 0,
        (_, Target::Wasm) => {
            // matmul_i16's reduction is K/2 words; it has vector tiles only.
            let (k, vectorize) = if op.kind() == OpKind::MatmulI16 { (k / 2, 1) } else { (k, 2) };
            [naive_pairs_cpu(m), naive_pairs_cpu(n), naive_pairs_cpu(k), 6 * 2 * 4 * vectorize * 2 * 2 * 8].into_iter().fold(1, sat)
        }
        (_, Target::Wgsl) => [naive_pairs(m), naive_pairs(n), naive_pairs(k), 4 * 2 * 2 * 2].into_iter().fold(1, sat),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Device;
    use crate::settings::Settings;
    use crate::space::lite_space;

    #[test]
    fn the_cpu_naive_space_holds_every_lite_candidate() {
        // Membership in naive_pairs_cpu's set, enumerated.
        let member = |d: u32, t0: u32, t1: u32| {
            (naive_tiles(d).contains(&t0) || (1..=d.min(16)).contains(&t0)) && t1.is_multiple_of(t0) && t1 <= np2(d)
        };
        for d in [1, 7, 12, 40] {
            let count = (1..=np2(d)).flat_map(|a| (1..=np2(d)).map(move |b| (a, b))).filter(|&(a, b)| member(d, a, b)).count() as u64;
            assert_eq!(count, naive_pairs_cpu(d), "d = {d}");
            assert!(naive_pairs_cpu(d) >= naive_pairs(d));
        }
        let settings = Settings::builtin(Target::Wasm);
        for preset in ["xeon-2core", "xeon-2core-native", "apple-m2", "pixel-8"] {
            let device = Device::from_fingerprint(&crate::presets::get(preset).unwrap()).unwrap();
            for (kind, shape) in [
                ("matmul", "384,768,768"),
                ("matmul", "640,768,3072"),
                ("batch_matmul", "12,384,384,64"),
                ("batch_matmul", "120,64,64,64"),
                ("matmul", "67,129,65"),
            ] {
                let op = Op::parse(kind, shape).unwrap();
                let (_, m, k, n) = op.bmkn();
                for c in lite_space(&op, Target::Wasm, &device, &settings).schedules {
                    assert!(member(m, c.x0, c.x1) && member(n, c.y0, c.y1) && member(k, c.r0, c.r1), "{preset} {kind} {shape}: {c:?}");
                }
            }
        }
    }

    #[test]
    fn naive_tiles_and_pairs() {
        assert_eq!(naive_tiles(12), vec![1, 2, 3, 4, 6, 8, 12]);
        assert_eq!(naive_tiles(7), vec![1, 2, 4, 7]);
        // (1,1) (1,2) (1,4) (1,7) (2,2) (2,4) (4,4) (7,7)
        assert_eq!(naive_pairs(7), 8);
        let k0 = Op::parse("matmul", "384,768,768").unwrap();
        let p = naive_pairs(384) * naive_pairs(768) * naive_pairs(768);
        let p_cpu = naive_pairs_cpu(384) * naive_pairs_cpu(768) * naive_pairs_cpu(768);
        assert_eq!(naive_size(&k0, Target::Wasm), p_cpu * 6 * 2 * 4 * 2 * 2 * 2 * 8);
        assert_eq!(naive_size(&k0, Target::Wgsl), p * 32);
        // 7: register tiles 1..=7 (all up to 16) and their multiples up to 8.
        assert_eq!(naive_pairs_cpu(7), 8 + 4 + 2 + 2 + 1 + 1 + 1);
    }
}
