//! How candidates are ranked: the [`Cand`] every rule emits with its sort
//! keys, the last tie-breaker, and the GPU matmul order that takes the tiles
//! of two rankings alternately.

use webtune_compiler::{Op, Schedule};

/// One surviving candidate and what it is ranked by.
#[derive(Clone, Debug)]
pub(super) struct Cand {
    pub(super) s: Schedule,
    /// Sort keys, compared in order, smallest first.
    pub(super) rank: Vec<i64>,
    /// GPU matmul only: the second tile ranking and the variant's place.
    pub(super) gpu: Option<GpuOrder>,
}

/// How a GPU matmul candidate is placed: its tile's rank by work per thread
/// (`rank` is by `Block_core`), and which variant of the tile it is.
#[derive(Clone, Debug)]
pub(super) struct GpuOrder {
    pub(super) intensity: Vec<i64>,
    pub(super) variant: u8,
}

/// Dimensions that a tile does not divide: each one is remainder code.
pub(super) fn ragged(s: &Schedule, op: &Op) -> i64 {
    let (_, m, k, n) = op.bmkn();
    [(m, s.x1), (n, s.y1), (k, s.r1), (s.x1.min(m), s.x0), (s.y1.min(n), s.y0)].iter().filter(|(d, t)| d % t != 0).count() as i64
}

/// GPU matmul order: the tiles ranked by `Block_core` (the paper) and by
/// work per thread (then the larger workgroup tile) are taken alternately, each tile once, and each tile's
/// variants follow it in their order. That decides which candidates fit the
/// budget; `candidates` then puts every kept tile's first variant ahead of
/// any second one. The two rankings win on different
/// shapes on the H100 (BENCHMARKS.md, "Lite space"): small register tiles
/// with many resident workgroups on K0, whose grid is too small to fill the
/// GPU with large tiles; 8×8 register tiles on K1 and 4096³. Since split-K
/// across workgroups (`k_slices`) fills the GPU on small grids too, the
/// large 8×8 tiles won there as well on the H200 (K0 and 64–256 rows).
pub(super) fn interleave_tiles(cands: Vec<Cand>) -> Vec<Cand> {
    type Tile = (u32, u32, u32, u32);
    let tile = |c: &Cand| (c.s.x0, c.s.y0, c.s.x1, c.s.y1);
    // Each tile ranked by its best-ranked variant, in both rankings.
    let mut by_paper: Vec<Tile> = Vec::new();
    for c in &cands {
        if !by_paper.contains(&tile(c)) {
            by_paper.push(tile(c));
        }
    }
    let mut by_work: Vec<(&Vec<i64>, Tile)> = cands.iter().map(|c| (&c.gpu.as_ref().expect("GPU candidates").intensity, tile(c))).collect();
    by_work.sort();
    let mut order: Vec<Tile> = Vec::new();
    let mut work = by_work.into_iter().map(|(_, t)| t);
    for t in by_paper {
        if !order.contains(&t) {
            order.push(t);
        }
        for w in work.by_ref() {
            if !order.contains(&w) {
                order.push(w);
                break;
            }
        }
    }
    let mut out = Vec::with_capacity(cands.len());
    let mut rest = cands;
    for t in order {
        let (mut mine, others): (Vec<Cand>, Vec<Cand>) = rest.into_iter().partition(|c| tile(c) == t);
        mine.sort_by_key(|c| c.gpu.as_ref().map(|g| g.variant));
        out.extend(mine);
        rest = others;
    }
    out
}

/// Every field of a schedule as a sortable key: the last tie-breaker.
pub(super) fn field_key(s: &Schedule) -> String {
    serde_json::to_string(s).expect("schedule serializes")
}
