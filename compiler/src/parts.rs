//! Threaded Wasm kernels: how a schedule with `threads > 1` divides an op's
//! output into parts, one per thread.
//!
//! The parts divide one dimension ([`Split`]) into runs of whole cache tiles
//! (`x1` rows, `y1` columns or single batch entries), as evenly as whole
//! tiles allow: part sizes differ by at most one tile, and only the last part
//! may end in the dimension's partial tile. A part is the same loop nest as
//! the whole kernel over a smaller [`View`]: its arguments start at the
//! part's first element and keep the whole op's strides, so it reads only its
//! own rows of A (split M), columns of B (split N) or batch entries, and
//! writes only its own elements of C.

use crate::generate::matmul_cpu::View;
use crate::op::{Op, OpKind};
use crate::schedule::{Schedule, Split};

/// One part of a threaded kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// `[start, end)` along the split dimension.
    pub range: (u32, u32),
    /// The sub-problem the part computes.
    pub view: View,
    /// Element offset of the part's first element in each argument, in ABI order.
    pub offsets: Vec<u32>,
}

/// `parts` runs of whole `unit`s covering `0..extent`, sizes differing by at
/// most one unit (the earlier parts get the smaller share).
pub fn ranges(extent: u32, unit: u32, parts: u32) -> Vec<(u32, u32)> {
    let tiles = extent.div_ceil(unit) as u64;
    let edge = |p: u64| ((p * tiles / parts as u64) as u32 * unit).min(extent);
    (0..parts as u64).map(|p| (edge(p), edge(p + 1))).collect()
}

/// The parts of `op` under `s`; empty when `s` is single-threaded. `s` must
/// have passed [`Schedule::check`] for Wasm.
pub fn parts(op: &Op, s: &Schedule) -> Vec<Part> {
    let Some((split, extent, unit)) = s.split_extent(op) else {
        return Vec::new();
    };
    let (_, m, _, n) = op.bmkn();
    let k = crate::generate::matmul_cpu::reduction(op);
    let i16 = op.kind() == crate::op::OpKind::MatmulI16;
    let whole = View::whole(op);
    if matches!(op.kind(), OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0) {
        return block_parts(op, split, extent, unit, s.threads, whole);
    }
    let e = op.epilogue();
    ranges(extent, unit, s.threads)
        .into_iter()
        .map(|(lo, hi)| {
            let len = hi - lo;
            // Offsets of A, B, bias and C (R moves with C).
            let (view, [a, b, bias, c]) = match split {
                Split::M => (View { m: len, ..whole }, [lo * k, 0, 0, lo * n]),
                Split::N => (View { n: len, ..whole }, [0, lo, lo, lo]),
                Split::Batch => (View { batch: len, ..whole }, [lo * m * k, lo * k * n, 0, lo * m * n]),
            };
            let mut offsets = vec![a, b];
            if i16 {
                // SA moves with A's rows, SB with B's columns.
                offsets.extend(match split {
                    Split::M => [lo, 0],
                    _ => [0, lo],
                });
            }
            if e.bias {
                offsets.push(bias);
            }
            if e.residual {
                offsets.push(c);
            }
            offsets.push(c);
            Part { range: (lo, hi), view, offsets }
        })
        .collect()
}

/// The parts of `matmul_q4_1` or `matmul_q8_0` (A, W, D, [Mn], C): split
/// M moves A and C by whole rows; split N moves W, D, Mn by rows (one per
/// output column) and C by columns.
fn block_parts(op: &Op, split: Split, extent: u32, unit: u32, threads: u32, whole: View) -> Vec<Part> {
    let (_, _, k, n) = op.bmkn();
    let words = if op.kind() == OpKind::MatmulQ8_0 { k / 4 } else { k / 8 };
    let scales = if op.kind() == OpKind::MatmulQ8_0 { 1 } else { 2 };
    ranges(extent, unit, threads)
        .into_iter()
        .map(|(lo, hi)| {
            let (view, offsets) = match split {
                Split::N => (View { n: hi - lo, ..whole }, [vec![0, lo * words], vec![lo * (k / 32); scales], vec![lo]].concat()),
                _ => (View { m: hi - lo, ..whole }, [vec![lo * k, 0], vec![0; scales], vec![lo * n]].concat()),
            };
            Part { range: (lo, hi), view, offsets }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_extent_in_whole_tiles() {
        for extent in 1..80u32 {
            for unit in [1, 3, 4, 16] {
                for parts in 1..=extent.div_ceil(unit).min(9) {
                    let r = ranges(extent, unit, parts);
                    assert_eq!(r.len(), parts as usize);
                    assert_eq!(r[0].0, 0);
                    assert_eq!(r[r.len() - 1].1, extent);
                    for w in r.windows(2) {
                        assert_eq!(w[0].1, w[1].0);
                    }
                    let tiles: Vec<u32> = r.iter().map(|&(lo, hi)| (hi - lo).div_ceil(unit)).collect();
                    assert!(r.iter().all(|&(lo, hi)| lo < hi && lo % unit == 0), "{extent} {unit} {parts}: {r:?}");
                    assert!(tiles.iter().max().unwrap() - tiles.iter().min().unwrap() <= 1, "{r:?}");
                }
            }
        }
    }
}
