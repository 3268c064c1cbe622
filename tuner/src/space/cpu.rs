//! The Wasm rules (Table 1, Wasm; heuristics 3 and 4) in the two forms a
//! device's engine gets ([`RegisterTiles`]): register tiles that may spill
//! over L1-sized cache blocks (`cpu_matmul`, wasmtime), and tiles kept in
//! registers over packed B blocks (`cpu_matmul_in_registers`, V8 and
//! unmeasured engines); and `matmul_q4` (with the GGUF kernels,
//! `matmul_q4_1` and `matmul_q8_0`) on the CPU: decode tiles for one row
//! (the GGUF kernels' 16-bit-activation twins first), and for prompts the
//! GGUF kernels' panel family first.

use webtune_compiler::op::OpKind;
use webtune_compiler::schedule::{LoopOrder, MAX_R0, MAX_REGISTER_TILE};
use webtune_compiler::{Op, Schedule};

use super::order::{Cand, ragged};
use super::{CACHE_TILES_PER_REGISTER_TILE, CPU_R0, Relaxation, np2, pow2s, register_tiles};
use crate::fingerprint::Device;
use crate::hardware::{CpuModel, RegisterTiles};

/// Vector registers live in the Wasm micro-kernel (see the module docs).
fn cpu_live_registers(x0: u32, y0: u32, vectorize: u32) -> u32 {
    if vectorize == 4 { x0 * y0.div_ceil(4) + y0.div_ceil(4) + 1 } else { x0 * y0 + y0 + 1 }
}

/// Heuristic 4 on the CPU: whether `live` registers fill the file.
fn cpu_registers_ok(live: u32, regs: u32, relax: Relaxation) -> bool {
    let cap = relax.cpu_spill * regs as f64;
    !relax.heuristics || (live as f64 <= cap && live as f64 >= relax.fill * cap)
}

/// r0 of a Wasm register tile: the K steps unrolled per iteration, 2 where
/// the unrolled body stays within 64 vector multiply-adds, else 1 (the 15
/// fastest schedules of a 120-schedule search in wasmtime all had r0 ≤ 2,
/// and r0 = 2 beat the 4–8 the earlier rule gave 4×16 and 4×8 tiles:
/// BENCHMARKS.md).
fn cpu_r0(x0: u32, y0: u32, vectorize: u32, k: u32) -> u32 {
    let per_step = x0 * y0.div_ceil(vectorize.max(1));
    pow2s(np2(k).min(MAX_R0).min(CPU_R0)).filter(|&r| per_step * r <= 64).last().unwrap_or(1)
}

/// The deep K block of a Wasm register tile: 32 × 32 outputs (or the tile,
/// if larger) over up to 256 of K, traversed k-outermost (`kmn`). Measured
/// with `examples/space_quality` on the dev machine: 4×16 in a 32×32×256
/// `kmn` block was the best of 120 schedules drawn from the whole space on
/// K0, K1 and K2, 5–16% ahead of the best L1-sized block (BENCHMARKS.md).
/// None where K is too short for the block to differ from an L1 one.
fn deep_k_block(x0: u32, y0: u32, r0: u32, xm: u32, ym: u32, km: u32) -> Option<(i64, u32, u32, u32)> {
    let (x1, y1, r1) = (32.max(x0).min(xm.max(x0)), 32.max(y0).min(ym.max(y0)), 256.min(km));
    (r1 >= 128 && r1 >= r0).then_some((i64::MAX, x1, y1, r1))
}

/// Register tiles kept on an engine that keeps them in registers.
pub const IN_REGISTER_TILES: usize = 4;

/// Longest K the short-M block takes whole (its packed B block is then
/// `K·y1` floats, 256 KiB at K = 1024 and y1 = 64: L2-resident).
const SHORT_M_MAX_K: u32 = 2048;

/// Most rows the wide-N block takes whole (its A block is then at most
/// `1024·256` floats, 1 MiB: L2-resident).
const WIDE_M_MAX_M: u32 = 1024;

/// `matmul` and `batch_matmul` on Wasm (Table 1, Wasm).
pub(super) fn cpu_matmul(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    if device.cpu.tiles == RegisterTiles::InRegisters {
        return cpu_matmul_in_registers(op, device, base, relax);
    }
    let (_, m, k, n) = op.bmkn();
    let (xm, ym, km) = (np2(m), np2(n), np2(k));
    let cpu = &device.cpu;
    let l1_words = relax.usable * cpu.l1_bytes as f64 / 4.0;
    let mut out = Vec::new();
    let lanes = if base.vectorize == 4 { 4 } else { 1 };
    for (x0, y0) in register_tiles(xm, ym, 16, 64, base.vectorize == 4, lanes, relax) {
        let vectorize = if base.vectorize == 4 && y0 % 4 == 0 { 4 } else { 1 };
        let live = cpu_live_registers(x0, y0, vectorize);
        if !cpu_registers_ok(live, cpu.vector_registers, relax) {
            continue;
        }
        let r0 = cpu_r0(x0, y0, vectorize, k);
        // H3: cache blocks that fit L1 and fill it, least traffic first.
        let mut blocks = Vec::new();
        for x1 in pow2s(xm).filter(|&x| x >= x0) {
            for y1 in pow2s(ym).filter(|&y| y >= y0) {
                for r1 in pow2s(km).filter(|&r| r >= r0) {
                    let words = (x1 * r1 + r1 * y1 + x1 * y1) as f64;
                    if relax.heuristics && (words > l1_words || words < relax.fill * l1_words) {
                        continue;
                    }
                    let (ex, ey, er) = (x1.min(m) as f64, y1.min(n) as f64, r1.min(k) as f64);
                    let traffic = 1.0 / ex + 1.0 / ey + if r1 >= k { 0.0 } else { 2.0 / er };
                    blocks.push(((traffic * 1e9) as i64, x1, y1, r1));
                }
            }
        }
        blocks.sort();
        let mut blocks: Vec<_> = blocks.into_iter().map(|(t, x1, y1, r1)| (t, x1, y1, r1, base.order)).collect();
        if relax.heuristics {
            blocks.truncate(CACHE_TILES_PER_REGISTER_TILE);
            // The last L1 block gives way to a deep K block, k outermost:
            // the wide searches' winner on K0, K1 and K2 (BENCHMARKS.md).
            if let Some((t, x1, y1, r1)) = deep_k_block(x0, y0, r0, xm, ym, km) {
                if blocks.len() == CACHE_TILES_PER_REGISTER_TILE {
                    blocks.pop();
                }
                blocks.push((t, x1, y1, r1, LoopOrder::KMN));
            }
        }
        for (traffic, x1, y1, r1, order) in blocks {
            let s = Schedule { x0, y0, r0, x1, y1, r1, vectorize, order, ..base.clone() };
            let fill_gap = (relax.cpu_spill * cpu.vector_registers as f64 - live as f64).abs();
            let rank = vec![(fill_gap * 1000.0) as i64, -((x0 * y0) as i64), traffic, ragged(&s, op)];
            out.push(Cand { s, rank, gpu: None });
        }
    }
    out
}

/// Register tiles `(loads per multiply-add ×10⁶, −outputs, x0, y0)`, fewest
/// loads first, for `y0` up to `max_v` vectors and `x0` up to `max_x0` rows
/// (`(max_v, max_x0, keep)` = `bounds`): those whose accumulators, a row of
/// B and a splat of A fit in the registers V8 allocates on `cpu` (and,
/// under the heuristics, fill at least `relax.fill` of them), the first
/// `keep` under the heuristics.
fn cpu_register_tiles(
    m: u32,
    n: u32,
    vectorize: u32,
    cpu: &CpuModel,
    relax: Relaxation,
    bounds: (u32, u32, usize),
) -> Vec<(i64, i64, u32, u32)> {
    let (max_v, max_x0, keep) = bounds;
    let usable = cpu.allocatable.max(3);
    let mut tiles = Vec::new();
    for v in 1..=max_v {
        let y0 = v * vectorize;
        if y0 > np2(n) {
            break;
        }
        for x0 in 1..=max_x0.min(m) {
            let live = cpu_live_registers(x0, y0, vectorize);
            if live > usable || x0 * y0 > MAX_REGISTER_TILE {
                continue;
            }
            if relax.heuristics && (live as f64) < relax.fill * usable as f64 {
                continue;
            }
            let loads = ((x0 + v) as f64 / (x0 * v) as f64 * 1e6) as i64;
            tiles.push((loads, -((x0 * y0) as i64), x0, y0));
        }
    }
    tiles.sort();
    if relax.heuristics {
        tiles.truncate(keep);
    }
    tiles
}

/// `matmul` and `batch_matmul` on Wasm for an engine whose spills are slow
/// (V8; [`RegisterTiles::InRegisters`]). Measured in Chromium 156 on K0 and
/// K1 (BENCHMARKS.md, "Lite space in V8"):
///
/// - H4 as the paper states it, `Reg_thread ≤ REGS`: the accumulators, a
///   row of B and a splat of A (`x0·v + v + 1` vectors, `v = y0/4`) within
///   the registers V8 allocates ([`crate::hardware::CpuModel::allocatable`]: 15 on x86, 28
///   on Arm).
///   `x0` need not be a power of two (H2 relaxed): 6×8 fills x86's 15
///   exactly, and it ran 1.13–1.2× faster than any power-of-two tile that
///   fits. Tiles are ranked by loads per multiply-add, `(x0 + v)/(x0·v)`
///   (the fewest first; then the most outputs), the micro-kernel's
///   arithmetic intensity, and the best [`IN_REGISTER_TILES`] are kept.
/// - B's cache tile is packed (`cache_read`): the micro-kernel then reads
///   it in order instead of striding across rows of B, whose power-of-two
///   multiples of 4 KiB alias in L1. Packing made K1 (N = 3072) 1.26× faster
///   and K0 1.05× among the best blocks. The one-variable study, which held
///   the block at its base value, found packing neutral: its gain needs the
///   taller row blocks that amortize the copy (the same kind of interaction
///   as double buffering on the H100).
/// - H3 for a packed tile: the packed B block `r1·y1` and A's block `x1·r1`
///   fill about twice L1 (L2-resident, read in order), in three shapes:
///   deep (`r1` = 256, `x1` ≈ 64, n outermost), square (`r1` = 128,
///   `x1` ≈ 128, n outermost) and wide (`r1` = 128, `y1` doubled, k
///   outermost). These held the top of the measured sweep on both shapes;
///   the blocks within it differed by less than the noise.
fn cpu_matmul_in_registers(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    let (_, m, k, n) = op.bmkn();
    let cpu = &device.cpu;
    let vectorize = if base.vectorize == 4 && n >= 4 { 4 } else { 1 };
    // (loads per multiply-add, outputs, x0, y0)
    let mut tiles = cpu_register_tiles(m, n, vectorize, cpu, relax, (8, 16, IN_REGISTER_TILES));
    let words = 2 * cpu.l1_bytes / 4;
    // Short M (a model's one sequence): one block of all of M and all of K,
    // so that C is written once and no rows are left to a ragged block,
    // tried first for each tile, and the kept tiles that divide M go first.
    // In Chromium 156 on the sentence encoder's 128×384×1536 and
    // 128×1536×384, 2×16 and 4×8 tiles over all of M and K ran 43–44 GFLOP/s
    // against 41.9 for the best of the other blocks (BENCHMARKS.md,
    // "all-MiniLM-L6-v2 in the browser").
    // Where K ≤ 256 the deep block already takes all of K: nothing to add.
    let short = m <= words / 128 && k > 256 && k <= SHORT_M_MAX_K;
    // Wide N (B's rows 8 KiB or more) with M up to WIDE_M_MAX_M: a block of
    // all of M first. With N = 3072 the L1-sized blocks ran about 25% slower
    // than with N = 768 (K1: 36.9 GFLOP/s on one thread against K0's 48.4);
    // a block of all of M (x1 = 636) gave 40.0–40.3 on one thread and
    // 79.6–80.7 on two against 75.6–76.5 (Chromium 156, BENCHMARKS.md,
    // "Threaded Wasm kernels").
    let wide = !short && n >= 2048 && m <= WIDE_M_MAX_M;
    if short {
        tiles.sort_by_key(|&(_, _, x0, _)| m % x0 != 0);
    }
    let mut out = Vec::new();
    for (t, &(loads, outputs, x0, y0)) in tiles.iter().enumerate() {
        let r0 = cpu_r0(x0, y0, vectorize, k);
        // Row blocks: the largest multiple of x0 within `rows` (and M).
        let rows_of = |rows: u32| -> u32 { (rows.min(m) / x0).max(1) * x0 };
        let cols_of = |cols: u32| -> u32 { (cols.min(np2(n)) / y0).max(1) * y0 };
        let deep = |r1: u32| -> u32 { (r1.min(np2(k)) / r0).max(1) * r0 };
        let mut blocks = vec![
            (rows_of(words / 256), cols_of(words / 256), deep(256), LoopOrder::NKM),
            (rows_of(words / 128), cols_of(words / 128), deep(128), LoopOrder::NKM),
            (rows_of(words / 256), cols_of(2 * words / 128), deep(128), LoopOrder::KMN),
        ];
        if short {
            blocks.insert(0, (rows_of(m), cols_of(words / 256), deep(k), LoopOrder::NKM));
        } else if wide {
            blocks.insert(0, (rows_of(m), cols_of(words / 256), deep(256), LoopOrder::NKM));
        }
        for (b, (x1, y1, r1, order)) in blocks.into_iter().enumerate() {
            let s = Schedule { x0, y0, r0, x1, y1, r1, vectorize, order, cache_read: true, ..base.clone() };
            let rank = vec![if short || wide { t as i64 } else { 0 }, loads, outputs, t as i64, b as i64, ragged(&s, op)];
            out.push(Cand { s, rank, gpu: None });
        }
    }
    out
}

/// `matmul_q4` on Wasm: register tiles of x0 rows × y0 outputs, each output
/// a 4-lane accumulator over K (`q4_cpu.rs`); also `matmul_q4_1` and
/// `matmul_q8_0` (`gguf_cpu.rs`), whose kernels have the same tiles and
/// differ in the registers a tile needs beside its accumulators and in
/// the words of W and scales a column of W holds.
pub(super) fn cpu_q4(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    let (_, m, k, n) = op.bmkn();
    // Registers beside the accumulators and dot products (q4: the word and
    // its nibbles; q4_1: also its seven nibble masks; q8_0: the word, two
    // widened halves and a quad), and words of W and scales per column.
    let (extra, col_words) = match op.kind() {
        OpKind::MatmulQ4_1 => (9, k / 8 + 2 * (k / 32)),
        OpKind::MatmulQ8_0 => (4, k / 4 + k / 32),
        _ => (2, k / 8 + k / 32),
    };
    let (xm, ym) = (np2(m), np2(n));
    let cpu = &device.cpu;
    let l1_words = relax.usable * cpu.l1_bytes as f64 / 4.0;
    // The cache blocks of a register tile, least traffic first.
    let blocks_of = |x0: u32, y0: u32| {
        let mut blocks = Vec::new();
        for x1 in pow2s(xm).filter(|&x| x >= x0) {
            for y1 in pow2s(ym).filter(|&y| y >= y0) {
                // A's rows stay cached while the block's columns of W stream by.
                let words = (x1 * k) as f64 + (y1 * col_words) as f64;
                if relax.heuristics && relax.fill > 0.0 && words > l1_words && !(x1 == x0 && y1 == y0) {
                    continue;
                }
                let traffic = 1.0 / x1.min(m) as f64 + 1.0 / y1.min(n) as f64;
                blocks.push(((traffic * 1e9) as i64, x1, y1));
            }
        }
        blocks.sort();
        if relax.heuristics {
            blocks.truncate(2);
        }
        blocks
    };
    let r0s: Vec<u32> = [32u32, 64].into_iter().filter(|&r| r <= k).collect();
    let mut out = Vec::new();
    for (x0, y0) in register_tiles(xm, ym, 8, 16, base.vectorize == 4, 1, relax) {
        let vectorize = if base.vectorize == 4 && y0 % 4 == 0 { 4 } else { 1 };
        // One accumulator per output, one dot product per row, the word and its nibbles.
        let live = x0 * y0 + x0 + extra;
        if !cpu_registers_ok(live, cpu.vector_registers, relax) {
            continue;
        }
        for &r0 in &r0s {
            for (traffic, x1, y1) in blocks_of(x0, y0) {
                let s = Schedule { x0, y0, r0, x1, y1, r1: r0, vectorize, ..base.clone() };
                let fill_gap = (relax.cpu_spill * cpu.vector_registers as f64 - live as f64).abs();
                let rank = if m == 1 {
                    // Decode: the smallest tiles and r0 first. Interleaved in
                    // wasmtime on the 2-core Xeon, 1×4 (r0 32) ran 1.15–1.3×
                    // faster than 1×16 (r0 64), the tile that fills the
                    // registers, on 576×3072 and 576×12288 Q4_1 (and Q8_0):
                    // a matrix-vector product shares nothing across columns,
                    // so a wider tile only spills.
                    vec![1, (x0 * y0) as i64, r0 as i64, traffic, ragged(&s, op)]
                } else {
                    vec![1, (fill_gap * 1000.0) as i64, -((x0 * y0) as i64), traffic, -(r0 as i64), ragged(&s, op)]
                };
                out.push(Cand { s, rank, gpu: None });
            }
        }
    }
    if matches!(op.kind(), OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0) && base.vectorize == 4 {
        out.extend(cpu_gguf_int(op, device, base, relax, &r0s, &blocks_of));
    }
    if m >= PANEL_MIN_M && op.kind() != OpKind::MatmulQ4 {
        out.extend(cpu_gguf_panel(op, device, base, relax));
    }
    out
}

/// Vector registers the 16-bit-activation kernel (`quantize_a`) holds live
/// beside its `x0·y0` accumulators: a block's four `i16x8` of weights, the
/// loaded words (Q8_0's two; Q4_1's one and its nibble mask), the sum of
/// products, the column's scale and each row's block scale (`x0`).
const INT_DOT_EXTRA: u32 = 8;

/// `matmul_q4_1` and `matmul_q8_0` with 16-bit activations (`quantize_a`,
/// `gguf_cpu.rs`): integer dot products take about 0.7 vector instructions
/// a weight against the f32 kernels' 1.25 (Q4_1) and 1.4 (Q8_0). Register
/// tiles as [`cpu_q4`] makes them, kept where the accumulators and
/// [`INT_DOT_EXTRA`] fit the registers the engine allocates
/// ([`CpuModel::allocatable`]), with no lower bound, any number of columns
/// (each its own vector accumulator). In wasmtime on dev-epyc (SmolLM2's
/// decode products, the weights streaming from memory, BENCHMARKS.md) 1×4
/// ran the per-layer products 2.4–3.9× faster than the f32 kernels' first
/// candidate (1×16), 1×8 1.9–3×, and 1×16, which spills, only 1.1–1.4×;
/// and one column at a time (1×1), whose weights are then one sequential
/// stream, read the Q8_0 head and the K = 1536 product about twice as
/// fast as 1×4. For decode (M = 1) they rank ahead of every f32 candidate,
/// the fewest outputs first; for more rows, behind every f32 candidate
/// (the panel family first).
fn cpu_gguf_int(
    op: &Op,
    device: &Device,
    base: &Schedule,
    relax: Relaxation,
    r0s: &[u32],
    blocks_of: &dyn Fn(u32, u32) -> Vec<(i64, u32, u32)>,
) -> Vec<Cand> {
    let (_, m, _, n) = op.bmkn();
    let mut out = Vec::new();
    // Any number of columns: each has a vector accumulator of its own.
    for (x0, y0) in register_tiles(np2(m), np2(n), 8, 16, false, 1, relax) {
        if x0 * y0 + x0 + INT_DOT_EXTRA > device.cpu.allocatable {
            continue;
        }
        for &r0 in r0s {
            for (traffic, x1, y1) in blocks_of(x0, y0) {
                let s = Schedule { x0, y0, r0, x1, y1, r1: r0, vectorize: 4, quantize_a: true, ..base.clone() };
                let rank = if m == 1 {
                    vec![0, (x0 * y0) as i64, r0 as i64, traffic, ragged(&s, op)]
                } else {
                    vec![1, i64::MAX, (x0 * y0) as i64, traffic, r0 as i64, ragged(&s, op)]
                };
                out.push(Cand { s, rank, gpu: None });
            }
        }
    }
    out.sort_by(|a, b| a.rank.cmp(&b.rank));
    out.truncate(INT_CANDIDATES);
    out
}

/// Most 16-bit-activation candidates of a GGUF product: the lite space keeps
/// room for the f32 kernels, whose set and order they leave as they were
/// (the relaxation counts f32 candidates only).
pub const INT_CANDIDATES: usize = 8;

/// Fewest rows of A for which the GGUF kernels' panel family is tried.
pub const PANEL_MIN_M: u32 = 8;

/// Bytes of f32 weights a panel holds at most (`K·y1·4`): L2-resident
/// beside A's rows.
const PANEL_BYTES: u32 = 160 * 1024;

/// Panel tiles kept (the fewest loads per multiply-add first).
const PANEL_TILES: usize = 4;

/// `matmul_q4_1` and `matmul_q8_0` for prompts (M ≥ [`PANEL_MIN_M`]): the
/// panel family (`cache_read`, `gguf_cpu.rs`), which unpacks y1 columns of
/// W to f32 once for all rows of A and runs an f32 register tile over it:
/// a weight is unpacked once per M instead of once per `x0` rows, which
/// left the in-register kernels at about 0.55× the f32 matmul at M = 128.
/// Tiles as [`cpu_matmul_in_registers`] ranks them (accumulators, a row of
/// the panel and a splat of A within the allocatable registers; fewest
/// loads per multiply-add first); the panel as wide as [`PANEL_BYTES`]
/// allows; all of M in one row block. Ranked ahead of the in-register
/// kernels, which are decode rules.
fn cpu_gguf_panel(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    let (_, m, k, n) = op.bmkn();
    let vectorize = if base.vectorize == 4 && n >= 4 { 4 } else { 1 };
    let tiles = cpu_register_tiles(m, n, vectorize, &device.cpu, relax, (4, 8, PANEL_TILES));
    let mut out = Vec::new();
    for (t, &(loads, outputs, x0, y0)) in tiles.iter().enumerate() {
        let widest = (PANEL_BYTES / (4 * k)).max(y0).min(np2(n).max(y0));
        let y1 = (widest / y0).max(1) * y0;
        let x1 = (m / x0).max(1) * x0;
        for (i, r0) in [64u32, 32].into_iter().filter(|&r| r <= k).enumerate() {
            let s = Schedule { x0, y0, r0, x1, y1, r1: r0, vectorize, cache_read: true, ..base.clone() };
            let rank = vec![0, loads, outputs, t as i64, i as i64, ragged(&s, op)];
            out.push(Cand { s, rank, gpu: None });
        }
    }
    out
}
