//! Threaded Wasm candidates (`matmul`, `batch_matmul`, `matmul_q4_1` and
//! `matmul_q8_0`; `matmul_q4` kernels run on one thread) for a device whose key says it runs them
//! ([`Device::threads`] > 1).
//!
//! A threaded kernel divides one dimension of the output into parts of
//! whole cache tiles ([`webtune_compiler::parts`]); the browser runs part 0
//! on the calling thread and the others on its worker pool, at a wake-up and
//! synchronisation cost of a few tens of µs per call. The rules:
//!
//! - **Thread counts**: the powers of two from 2 below the device's threads,
//!   and the device's own count (8 → 8, 4, 2; 6 → 6, 4, 2; 2 → 2).
//! - **Which tiles**: the single-threaded candidates in their rank order;
//!   the first [`FULL_COUNT_TILES`] that a split can feed get the device's
//!   full count, the first [`OTHER_COUNT_TILES`] each smaller count. The
//!   register tile, K block and loop order stay as ranked for one thread.
//! - **Split**, per op, tile and thread count: the first of these whose
//!   busiest part has at most 1/[`MIN_BALANCE`] of the average part's work
//!   (exactly, with the compiler's `parts::ranges`):
//!   1. `batch` (`batch_matmul`): the parts share nothing;
//!   2. the larger of M and N along the ranked block (`x1` rows or `y1`
//!      columns): each part then re-reads all of the smaller operand (split M:
//!      all of B, which V8's blocks also pack once per part);
//!   3. the smaller of M and N along the ranked block;
//!   4. the larger, then 5. the smaller, with the block edge shrunk: the
//!      multiple of the register tile within the ranked edge that balances
//!      the parts best (the largest of equals). A block ranked for one thread may be too large to
//!      divide at all (V8's short-M block takes all of M: one row block), or
//!      divide badly (12 column blocks over 8 threads: two parts in three do
//!      twice the work of the others).
//!
//!   Where none is balanced, the best-balanced split that gives every part a
//!   tile; where no split gives every part a tile, the thread count is
//!   skipped for that tile (a tiny op gets no threaded candidates at all).
//! - **Order**: a thread count whose parts each get at least [`PART_FLOPS`]
//!   of the op's work, or (`matmul_q4_1`, `matmul_q8_0`) at least
//!   [`PART_WEIGHT_BYTES`] of its weights to read, comes before every single-threaded candidate, the
//!   device's full count first, then smaller counts; a count whose parts get
//!   less comes after them, the smallest count first. Within a count, the
//!   tiles keep their single-threaded rank.
//!
//! A device without threads gets no threaded candidate, and its space is
//! exactly the one it got before threads existed; a threaded device's
//! single-threaded candidates are its non-threaded twin's, in the same order.

use webtune_compiler::op::OpKind;
use webtune_compiler::parts::ranges;
use webtune_compiler::{Op, Schedule, Split, Target};

use super::order::Cand;
use crate::fingerprint::Device;

/// Least work (multiply-adds × 2) each part of a threaded candidate must
/// have for its thread count to be tried before single-threaded candidates.
/// One thread runs the tuned kernels at about 50 GFLOP/s in Chromium
/// (BENCHMARKS.md, "In the browser"), so 4 MFLOP is about 80 µs of work per
/// part: two to four times the pool's wake-up and synchronisation cost of a
/// few tens of µs, so that splitting is expected to win clearly (two parts
/// of 80 µs plus ~40 µs of sync against 160 µs on one thread: 1.3×; more
/// parts or more work, more). Below it the sync cost eats most of the gain,
/// and the single-threaded candidates go first.
pub const PART_FLOPS: u64 = 4_000_000;

/// Least bytes of block-quantised weights (`W`, `D`, `Mn`) each part of a
/// threaded `matmul_q4_1` or `matmul_q8_0` must read for its thread count to
/// be tried before single-threaded candidates, whatever its flops. At small
/// M these products are bound by streaming their weights (about 2.7 flops a
/// byte), not by multiply-adds, so [`PART_FLOPS`] undercounts them: a decode
/// step's 1×576×3072 product does 3.5 MFLOP yet takes about 140 µs on one
/// core in V8. They also come back to back, a few hundred a token, while the
/// pool's workers still spin from the previous call, so the sync cost is far
/// below a cold wake-up's. Measured in Chromium on the 2-core AMD EPYC
/// (BENCHMARKS.md, issue 36, 2026-12-02): SmolLM2's decode at 128 positions
/// on 2 threads went from 67–70 to 97–105 tokens/s once every product of a
/// step was split (64 KiB, which splits all four of a layer's; 256 KiB,
/// which leaves Q, K, V and the output projection on one thread: 92–93).
pub const PART_WEIGHT_BYTES: u64 = 64 * 1024;

/// The bytes of block-quantised weights one call of `op` reads (0 for the
/// other ops).
fn weight_bytes(op: &Op) -> u64 {
    if !matches!(op.kind(), OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0) {
        return 0;
    }
    op.args().iter().filter(|a| matches!(a.name, "W" | "D" | "Mn")).map(|a| a.bytes()).sum()
}

/// Whether `t` parts of `op` each get enough work to be tried before the
/// single-threaded candidates ([`PART_FLOPS`], [`PART_WEIGHT_BYTES`]).
fn parts_worth_it(op: &Op, t: u32) -> bool {
    let (batch, m, k, n) = op.bmkn();
    let flops = 2 * batch as u64 * m as u64 * k as u64 * n as u64;
    flops / t as u64 >= PART_FLOPS || weight_bytes(op) / t as u64 >= PART_WEIGHT_BYTES
}

/// Tiles (single-threaded candidates, best first) that get the device's full
/// thread count.
pub const FULL_COUNT_TILES: usize = 4;
/// Tiles that get each smaller thread count.
pub const OTHER_COUNT_TILES: usize = 2;

/// Least accepted ratio of the average part's work to the busiest part's: at
/// 0.8 the busiest part does at most a quarter more than the average.
pub const MIN_BALANCE: f64 = 0.8;

/// The thread counts tried on a device with `threads` threads, largest first.
pub fn thread_counts(threads: u32) -> Vec<u32> {
    if threads < 2 {
        return Vec::new();
    }
    let mut out = vec![threads];
    out.extend((1..31).map(|i| 1u32 << i).take_while(|&p| p < threads).collect::<Vec<_>>().into_iter().rev());
    out
}

/// `extent` over `threads` parts of whole `unit`s: the average part's share
/// of the busiest part's, or `None` if some part would be empty.
fn balance(extent: u32, unit: u32, threads: u32) -> Option<f64> {
    if unit == 0 || extent.div_ceil(unit) < threads {
        return None;
    }
    let busiest = ranges(extent, unit, threads).iter().map(|&(lo, hi)| hi - lo).max()?;
    Some(extent as f64 / (threads as f64 * busiest as f64))
}

/// The threaded variant of `s` with `threads` parts (see the module docs for
/// the rule), or `None` if no split gives every part a tile.
pub(super) fn split_variant(op: &Op, s: &Schedule, threads: u32) -> Option<Schedule> {
    let (batch, m, _, n) = op.bmkn();
    let with = |split: Split, x1: u32, y1: u32| Schedule { threads, split: Some(split), x1, y1, ..s.clone() };
    // The multiple of `tile` within `edge` that balances `extent` best, the
    // largest of equals.
    let shrink = |extent: u32, tile: u32, edge: u32| -> Option<(u32, f64)> {
        let mut best: Option<(u32, f64)> = None;
        for e in (1..=edge / tile).rev().map(|j| j * tile) {
            if let Some(b) = balance(extent, e, threads)
                && best.is_none_or(|(_, bb)| b > bb)
            {
                best = Some((e, b));
            }
        }
        best
    };
    // Split M (true) or N (false): the larger dimension first.
    let dims = if m >= n { [true, false] } else { [false, true] };
    let ranked = |rows: bool| {
        if rows { (with(Split::M, s.x1, s.y1), balance(m, s.x1, threads)) } else { (with(Split::N, s.x1, s.y1), balance(n, s.y1, threads)) }
    };
    let shrunk = |rows: bool| {
        if rows {
            shrink(m, s.x0, s.x1).map(|(x1, b)| (with(Split::M, x1, s.y1), Some(b)))
        } else {
            shrink(n, s.y0, s.y1).map(|(y1, b)| (with(Split::N, s.x1, y1), Some(b)))
        }
    };
    let mut options: Vec<(Schedule, Option<f64>)> = Vec::new();
    if op.kind() == OpKind::BatchMatmul {
        options.push((with(Split::Batch, s.x1, s.y1), balance(batch, 1, threads)));
    }
    options.extend(dims.map(ranked));
    options.extend(dims.into_iter().filter_map(shrunk));
    let feasible: Vec<(Schedule, f64)> = options.into_iter().filter_map(|(v, b)| b.map(|b| (v, b))).collect();
    if let Some((v, _)) = feasible.iter().find(|(_, b)| *b >= MIN_BALANCE) {
        return Some(v.clone());
    }
    // None balanced: the best balanced, the earliest option on a tie.
    let mut best: Option<&(Schedule, f64)> = None;
    for f in &feasible {
        if best.is_none_or(|b| f.1 > b.1) {
            best = Some(f);
        }
    }
    best.map(|(v, _)| v.clone())
}

/// The candidates in their final order: the single-threaded `singles` (best
/// first) with the threaded variants placed around them (module docs).
/// Unchanged unless the op is a Wasm `matmul`, `batch_matmul`,
/// `matmul_q4_1` or `matmul_q8_0` and the device runs threads.
pub(super) fn with_threads(op: &Op, target: Target, device: &Device, singles: Vec<Cand>) -> Vec<Cand> {
    if target != Target::Wasm || op.kind() == OpKind::MatmulQ4 || device.threads < 2 {
        return singles;
    }
    let mut before = Vec::new();
    let mut after = Vec::new();
    for (i, t) in thread_counts(device.threads).into_iter().enumerate() {
        let tiles = if i == 0 { FULL_COUNT_TILES } else { OTHER_COUNT_TILES };
        let mut variants: Vec<Cand> = Vec::new();
        for c in &singles {
            if variants.len() == tiles {
                break;
            }
            if let Some(s) = split_variant(op, &c.s, t).filter(|s| s.check(op, target).is_ok())
                && !variants.iter().any(|v| v.s == s)
            {
                variants.push(Cand { s, rank: c.rank.clone(), gpu: None });
            }
        }
        if parts_worth_it(op, t) {
            before.push(variants);
        } else {
            after.push(variants);
        }
    }
    // `before` is largest count first already; `after` smallest first.
    after.reverse();
    let mut out: Vec<Cand> = before.into_iter().flatten().collect();
    out.extend(singles);
    out.extend(after.into_iter().flatten());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_are_the_device_count_then_smaller_powers_of_two() {
        assert_eq!(thread_counts(1), Vec::<u32>::new());
        assert_eq!(thread_counts(2), vec![2]);
        assert_eq!(thread_counts(6), vec![6, 4, 2]);
        assert_eq!(thread_counts(8), vec![8, 4, 2]);
        assert_eq!(thread_counts(16), vec![16, 8, 4, 2]);
    }

    #[test]
    fn splits_follow_the_stated_rule() {
        let base = |x0: u32, y0: u32, x1: u32, y1: u32| Schedule {
            x0,
            y0,
            x1,
            y1,
            ..Schedule::default_for(&Op::parse("matmul", "64,64,64").unwrap(), Target::Wasm)
        };
        // K0 on 8 threads: N (768) is the larger; 12 blocks of 64 columns
        // divide unevenly (2 against 1.5), so the block shrinks to 48.
        let k0 = Op::parse("matmul", "384,768,768").unwrap();
        let v = split_variant(&k0, &base(6, 8, 60, 64), 8).unwrap();
        assert_eq!((v.split, v.x1, v.y1), (Some(Split::N), 60, 48));
        // ... and on 4 threads 12 blocks divide evenly.
        let v = split_variant(&k0, &base(6, 8, 60, 64), 4).unwrap();
        assert_eq!((v.split, v.x1, v.y1), (Some(Split::N), 60, 64));
        // K2: the batch where it divides well, else M with smaller row blocks.
        let k2 = Op::parse("batch_matmul", "12,384,384,64").unwrap();
        assert_eq!(split_variant(&k2, &base(6, 8, 60, 64), 4).unwrap().split, Some(Split::Batch));
        let v = split_variant(&k2, &base(6, 8, 60, 64), 8).unwrap();
        assert_eq!((v.split, v.x1), (Some(Split::M), 48));
        // A whole-M block (V8's short M) splits N.
        let short = Op::parse("matmul", "128,384,1536").unwrap();
        let v = split_variant(&short, &base(2, 16, 128, 64), 8).unwrap();
        assert_eq!((v.split, v.x1, v.y1), (Some(Split::N), 128, 64));
        // The encoder's attention (N = 64): 8 column blocks of 8 balance
        // better than 12 batch entries over 8 parts.
        let attention = Op::parse("batch_matmul", "12,16,16,64").unwrap();
        let v = split_variant(&attention, &base(6, 8, 12, 64), 8).unwrap();
        assert_eq!((v.split, v.y1), (Some(Split::N), 8));
        // The batch, even unbalanced, where nothing else feeds 8 parts.
        let tiny = Op::parse("batch_matmul", "12,16,16,8").unwrap();
        assert_eq!(split_variant(&tiny, &base(6, 8, 12, 8), 8).unwrap().split, Some(Split::Batch));
        // Nothing feeds 4 parts of a 4×4 output with 4×4 register tiles.
        let none = Op::parse("matmul", "4,64,4").unwrap();
        assert!(split_variant(&none, &base(4, 4, 4, 4), 4).is_none());
    }
}
