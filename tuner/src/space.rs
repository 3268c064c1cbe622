//! The lite search space (NNJIT section 5.2): from the naive space of every
//! tile size and primitive setting, keep the candidates that use the
//! device's registers, caches and threads well, in the order they should be
//! tried.
//!
//! # Table 1, as applied here
//!
//! Symbols follow the paper and [`Schedule`]: `x` runs over M, `y` over N,
//! `r` over K; level 0 is a thread's register tile, level 1 a workgroup's
//! (GPU) or a cache block's (CPU) tile.
//!
//! - `Reg_thread` on the GPU is the live set of our WGSL generator
//!   (`compiler/src/generate/matmul_gpu.rs`): the `x0·y0` accumulators plus
//!   one reduction step's `x0` values of A and `y0` of B, which the next step
//!   overwrites, so `x0·y0 + x0 + y0` registers. Table 1's
//!   `x0·r0 + r0·y0 + x0·y0` holds every step's values at once, which is not
//!   what the generator emits.
//! - On the CPU our micro-kernel (`compiler/src/generate/matmul_cpu.rs`)
//!   consumes each reduction step's values before loading the next, so the
//!   live set is the accumulator tile, one row of B and one splat of A:
//!   `x0·y0/4 + y0/4 + 1` vector registers with 4-wide vectors. Table 1's
//!   formula assumes all `r0` steps live at once, which would rule out every
//!   tile the CPU measurements favour.
//! - `L1_block = (x1·r1 + r1·y1)·4` bytes of workgroup memory on the GPU when
//!   tiles are staged (`cache_read`), doubled with `double_buffer`: our WGSL
//!   kernels accumulate the `x1·y1` output tile in registers, where
//!   `Reg_thread · Thread_block` already counts it. On the CPU Table 1's
//!   `(x1·r1 + r1·y1 + x1·y1)·4` bytes, the three blocks the nest reuses.
//! - GPU: `Thread_block = (x1/x0)·(y1/y0)`, `Warp_block = Thread_block /
//!   WARP_WIDTH`, `Block_core = min(RegLimit, L1Limit, WarpLimit, the core's
//!   workgroup limit)` with `RegLimit = REGS / (Reg_thread · Thread_block)`,
//!   `L1Limit = SHARED / L1_block`, `WarpLimit = WARPS / Warp_block`.
//!   CPU: `Thread_block = Block_core = 1`.
//!
//! Heuristics, each with the [relaxation](Relaxation) that makes it usable:
//!
//! 1. SIMD width ≤ 128 bits: 4-wide vectors (`f32x4`, `vec4<f32>`) where the
//!    microbenchmark fixes `vectorize = 4`, so `y0` is a multiple of 4 unless N < 4.
//! 2. Tile sizes are powers of two, no larger than the dimension rounded up
//!    to a power of two (a larger tile only idles threads or lanes).
//! 3. CPU: `L1_block ≤ usable · L1`, and at least `fill` of it (a smaller block
//!    could grow and still fit). Among the blocks that pass, the two with the
//!    least modelled memory traffic per multiply-add, `1/x1 + 1/y1 + 2/r1`
//!    (B re-read per row block, A per column block, C per K block), are kept
//!    for each register tile: square-ish blocks re-read the least. A third
//!    block per register tile is deep in K instead (32 × 32 × 256, k
//!    outermost), beyond L1: measured in wasmtime it was the best of 120
//!    schedules drawn from the whole space on K0, K1 and K2 (BENCHMARKS.md).
//!    The K step `r0` is at most 2 on the CPU, as in every one of those
//!    searches' fastest schedules.
//! 4. CPU: `Reg_thread` "=" the register file: between `fill · cap` and
//!    `cap`, where `cap = cpu_spill · REGS` (spilled values stay in L1; the
//!    factor is measured, see [`Relaxation::cpu_spill`]). The register tile
//!    is square or 2:1 counted in registers (`x0` rows by `y0/4` vectors).
//!    That is the rule for an engine whose spills are cheap (wasmtime). For
//!    an engine whose spills are slow (V8, and any engine not measured;
//!    [`RegisterTiles`]) heuristics 2–4 take another form, measured in
//!    Chromium: `Reg_thread ≤` the registers V8 allocates, with any `x0`, the tiles with the
//!    fewest loads per multiply-add first, and packed B blocks of about
//!    twice L1 (see `cpu_matmul_in_registers`).
//! 5. GPU: `Thread_block ≤ 256` and the adapter's limit, in whole warps, and
//!    the thread grid no more than 2:1 (at equal threads, a flatter grid
//!    re-reads more of A or B per output).
//! 6. GPU: `L1_block ≤ 16 KiB` and the adapter's limit. A staged tile takes
//!    one register step per stage, `r1 = r0`: on the H100 (BENCHMARKS.md,
//!    "Lite space") `r1 = r0 = 8` beat `r1` = 16 and 32 on every one of 17
//!    tiles at 4096³, by 5–45%, and every schedule in the top 14 of K0, K1
//!    and K2's wide searches had it. Double buffering gained 7–25% there at
//!    `r1 = r0`, but doubles the workgroup memory and has not been shown to
//!    win on every device, so it is device-dependent: each staged tile comes
//!    with it (first) and without it, unless a settings file fixes it.
//! 7. GPU: `Block_core = RegLimit`: registers are the binding resource
//!    (`Block_core ≥ fill · RegLimit`) and the resident workgroups use at
//!    least `fill · usable` of the register file. The register tile fits
//!    `usable · max registers per thread` and [`GPU_REGISTER_TILE`], is no
//!    more than 2:1 (1:2 along the vector), and `r0` is the largest power of two up to
//!    [`GPU_R0`] that keeps the unrolled body `x0·y0·r0` ≤ 1024
//!    multiply-adds (compile time, BENCHMARKS.md).
//!
//! Candidates are ordered by `Block_core`, most first (the paper), then:
//! work per thread (`x0·y0`), most first — BENCHMARKS.md ("Facts carried in") records the largest
//! unrolled register tiles fastest on the H100 (8×8 per thread, 45% of
//! cuBLAS, against 2% for a tile in an indexed array) and BENCHMARKS.md's
//! best Wasm schedule had the largest register tile of its sample; on the
//! CPU, register use closest to the file (H4's "="), then the modelled
//! traffic; then whole tiles before ragged ones (remainder code is extra
//! work and extra code); then threads per workgroup, most first; then the
//! schedule's fields, so that the order is total and deterministic. The list
//! stops at [`LITE_BUDGET`] candidates. If fewer than [`MIN_LITE`] pass, the
//! fill ratio halves (0.5, 0.25, then 0), and as a last resort only the hard
//! limits (`Schedule::check`, the adapter's limits) remain, so the space is
//! never empty.

use serde::Serialize;
use sha2::{Digest, Sha256};
use webtune_compiler::op::OpKind;
use webtune_compiler::schedule::{LoopOrder, MAX_Q4_OUTPUTS_PER_THREAD, MAX_R0, MAX_REGISTER_TILE};
use webtune_compiler::{Op, Schedule, Target};

use crate::fingerprint::{Device, DeviceClass};
use crate::hardware::RegisterTiles;
use crate::settings::Settings;

/// Most candidates in a lite space (NNJIT Table 6: 10–41).
pub const LITE_BUDGET: usize = 32;
/// Fewest candidates before the fill ratio relaxes.
pub const MIN_LITE: usize = 8;
/// Largest unrolled register-tile body, `x0·y0·r0` multiply-adds.
pub const MAX_UNROLLED: u32 = 1024;

/// Largest K step (weights per thread per loop iteration, unrolled) of the
/// WGSL `matmul_q4` lite space (BENCHMARKS.md, the q4 search on the H100).
pub const GPU_Q4_R0: u32 = 128;
/// Outputs per thread `y0` of the WGSL `matmul_q4` lite space, best first:
/// two outputs (A's values loaded once for both) were the best of the H100
/// search on all three decode shapes, 1.13–1.22× faster than one
/// (BENCHMARKS.md, fourth session on the H100).
pub const GPU_Q4_OUTPUTS: [u32; 2] = [2, 1];
/// Fewest K steps a double-buffered WGSL `matmul_q4` candidate has: its r0
/// is the largest that leaves this many (the H100 search's best
/// double-buffered r0 on the decode shapes; BENCHMARKS.md, fifth session).
pub const GPU_Q4_DB_STEPS: u32 = 3;
/// Largest GPU register step `r0` (heuristic 7): `r0 = r1 = 8` was the
/// measured optimum on the H100 (BENCHMARKS.md, "Lite space").
pub const GPU_R0: u32 = 8;
/// Largest GPU register tile `x0·y0` (heuristic 7).
pub const GPU_REGISTER_TILE: u32 = 64;
/// Cache blocks kept per register tile on the CPU (heuristic 3), the deep K
/// block included.
pub const CACHE_TILES_PER_REGISTER_TILE: usize = 3;
/// Largest CPU K step `r0` (see `cpu_r0`).
pub const CPU_R0: u32 = 2;

/// NNJIT's relaxation ratio, as two numbers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Relaxation {
    /// Share of registers and CPU cache a tile may take: the rest holds
    /// addresses, loop counters and the stack ("other variables in a kernel
    /// also use registers or caches", section 5.2).
    pub usable: f64,
    /// Least share of a resource an "=" heuristic (4, 7) or heuristic 3
    /// accepts. Power-of-two tiles move usage in steps of about 2×, so 0.5
    /// keeps the tiles that cannot double and still fit.
    pub fill: f64,
    /// CPU register file, as a multiple of the vector registers: values
    /// beyond the registers spill to the stack, which stays in L1 and feeds
    /// the multiply-add's memory operand. Measured on wasmtime (BENCHMARKS.md,
    /// "Lite space"): 8×16 tiles (37 live vectors against x86's 16) ran as
    /// fast as or faster than 4×8 (11 live); 8×32 (73 live) ran 2–3× slower.
    pub cpu_spill: f64,
    /// Whether the heuristics apply at all (false only as the last resort).
    pub heuristics: bool,
}

impl Relaxation {
    pub const START: Relaxation = Relaxation { usable: 0.75, fill: 0.5, cpu_spill: 2.5, heuristics: true };

    fn next(self) -> Option<Relaxation> {
        if !self.heuristics {
            None
        } else if self.fill > 0.3 {
            Some(Relaxation { fill: self.fill / 2.0, ..self })
        } else if self.fill > 0.0 {
            Some(Relaxation { fill: 0.0, ..self })
        } else {
            Some(Relaxation { heuristics: false, ..self })
        }
    }
}

/// An ordered lite space.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Space {
    /// Candidates in evaluation order, best first.
    pub schedules: Vec<Schedule>,
    /// Size of the naive space it was pruned from ([`naive_size`]).
    pub naive_size: u64,
    /// Hex prefix (16 digits) of the SHA-256 of the schedules' JSON, in
    /// order: this device's list. The service stores [`rules_checksum`]
    /// instead, which is shared by every device.
    pub checksum: String,
    /// Candidates that passed the heuristics and `Schedule::check`, before
    /// the list was cut to [`LITE_BUDGET`].
    pub survivors: usize,
    /// The relaxation the builder ended at.
    pub relaxation: Relaxation,
}

/// The checksum of an ordered schedule list.
pub fn checksum(schedules: &[Schedule]) -> String {
    let text = serde_json::to_string(schedules).expect("schedules serialize");
    hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string()
}

/// Version of the space rules (heuristics, relaxation, hardware tables).
/// Bump it with any change that should retire winners elected under the old
/// rules; [`rules_checksum`] mixes it in.
pub const RULES_VERSION: &str = "lite-space-2";

/// A checksum of the rules that build spaces for `op` on `target` under
/// `settings`, the same for every device: [`RULES_VERSION`] and the space
/// the portable (all-unknown) device gets. Winners are shared between
/// devices whose lite spaces differ (a vendor-level winner was voted by
/// other architectures), so the service stores and compares this, not a
/// device's own [`Space::checksum`]; it still changes when the rules or the
/// settings do.
pub fn rules_checksum(op: &Op, target: Target, settings: &Settings) -> String {
    let portable = Device::from_keys(&crate::fingerprint::DeviceKeys {
        device_key: "unknown/unknown/unknown/-".into(),
        arch_key: "unknown/unknown".into(),
        vendor_key: "unknown".into(),
        rho: String::new(),
    });
    let space = lite_space(op, target, &portable, settings);
    let text = format!("{RULES_VERSION}|{op}|{target}|{}", serde_json::to_string(&space.schedules).expect("schedules serialize"));
    hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string()
}

// ------------------------------------------------------------ naive space

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
/// [`naive_tiles`] (per dimension, level-0 dividing level-1; on Wasm
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
///   (vectorize) × 2 (subgroup_reduce) × 2 (double_buffer).
pub fn naive_size(op: &Op, target: Target) -> u64 {
    let (_, m, k, n) = op.bmkn();
    let sat = |a: u64, b: u64| a.saturating_mul(b);
    match (op.kind(), target) {
        (OpKind::MatmulQ4, Target::Wasm) => {
            let r0 = naive_tiles(k).into_iter().filter(|r| r % 32 == 0).count() as u64;
            [naive_pairs(m), naive_pairs(n), r0, 4 * 2 * 2 * 8].into_iter().fold(1, sat)
        }
        (OpKind::MatmulQ4, Target::Wgsl) => {
            let r0 = naive_tiles(k).into_iter().filter(|r| r % 8 == 0).count() as u64;
            let split = naive_tiles(k / 8).into_iter().filter(|&s| s <= 256).count() as u64;
            [naive_tiles(m).len() as u64, naive_tiles(n).len() as u64, split, r0, MAX_Q4_OUTPUTS_PER_THREAD as u64 * 4 * 2 * 2 * 2]
                .into_iter()
                .fold(1, sat)
        }
        (_, Target::Wasm) => {
            [naive_pairs_cpu(m), naive_pairs_cpu(n), naive_pairs_cpu(k), 6 * 2 * 4 * 2 * 2 * 2 * 8].into_iter().fold(1, sat)
        }
        (_, Target::Wgsl) => [naive_pairs(m), naive_pairs(n), naive_pairs(k), 4 * 2 * 2 * 2].into_iter().fold(1, sat),
    }
}

// ------------------------------------------------------------- lite space

/// Powers of two from 1 to `hi` (at least 1).
fn pow2s(hi: u32) -> impl Iterator<Item = u32> {
    (0..31).map(|i| 1u32 << i).take_while(move |&p| p <= hi.max(1))
}

fn np2(d: u32) -> u32 {
    d.max(1).next_power_of_two()
}

fn floor_pow2(d: u32) -> u32 {
    if d == 0 { 1 } else { 1 << (31 - d.leading_zeros()) }
}

/// One surviving candidate and what it is ranked by.
#[derive(Clone, Debug)]
struct Cand {
    s: Schedule,
    /// Sort keys, compared in order, smallest first.
    rank: Vec<i64>,
    /// GPU matmul only: the second tile ranking and the variant's place.
    gpu: Option<GpuOrder>,
}

/// How a GPU matmul candidate is placed: its tile's rank by work per thread
/// (`rank` is by `Block_core`), and which variant of the tile it is.
#[derive(Clone, Debug)]
struct GpuOrder {
    intensity: Vec<i64>,
    variant: u8,
}

fn ragged(s: &Schedule, op: &Op) -> i64 {
    let (_, m, k, n) = op.bmkn();
    [(m, s.x1), (n, s.y1), (k, s.r1), (s.x1.min(m), s.x0), (s.y1.min(n), s.y0)].iter().filter(|(d, t)| d % t != 0).count() as i64
}

/// The lite space for `op` on `target` for `device`, with the
/// microbenchmark's `settings` applied.
pub fn lite_space(op: &Op, target: Target, device: &Device, settings: &Settings) -> Space {
    let mut relax = Relaxation::START;
    let (mut cands, survivors) = loop {
        let (cands, survivors) = candidates(op, target, device, settings, relax);
        match relax.next() {
            Some(next) if survivors < MIN_LITE => relax = next,
            _ => break (cands, survivors),
        }
    };
    if cands.is_empty() {
        // Only reachable if the settings forbid every schedule the hard
        // limits allow; the portable default is still a valid candidate.
        let s = Schedule::default_for(op, target);
        if s.check(op, target).is_ok() {
            cands.push(Cand { s, rank: Vec::new(), gpu: None });
        }
    }
    let schedules: Vec<Schedule> = cands.into_iter().map(|c| c.s).collect();
    Space { checksum: checksum(&schedules), naive_size: naive_size(op, target), schedules, survivors, relaxation: relax }
}

/// Ordered, deduplicated candidates that pass `Schedule::check`, at most
/// [`LITE_BUDGET`], and how many there were before the cut.
fn candidates(op: &Op, target: Target, device: &Device, settings: &Settings, relax: Relaxation) -> (Vec<Cand>, usize) {
    let base = base_schedule(op, target, device, settings);
    let mut out = Vec::new();
    for combo in settings.combinations(&[]) {
        let mut b = base.clone();
        for (p, v) in &combo {
            Settings::apply(&mut b, p, v);
        }
        canonicalise(op, target, device, &mut b);
        let tiles = match (op.kind(), target) {
            (OpKind::MatmulQ4, Target::Wgsl) => gpu_q4(op, device, &b, relax),
            (OpKind::MatmulQ4, Target::Wasm) => cpu_q4(op, device, &b, relax),
            (_, Target::Wgsl) => gpu_matmul(op, device, &b, relax),
            (_, Target::Wasm) => cpu_matmul(op, device, &b, relax),
        };
        out.extend(tiles);
    }
    out.retain(|c| c.s.check(op, target).is_ok());
    out.sort_by(|a, b| a.rank.cmp(&b.rank).then_with(|| field_key(&a.s).cmp(&field_key(&b.s))));
    let mut seen = std::collections::HashSet::new();
    out.retain(|c| seen.insert(c.s.clone()));
    let gpu_matmul = !out.is_empty() && out.iter().all(|c| c.gpu.is_some());
    if gpu_matmul {
        out = interleave_tiles(out);
    }
    let survivors = out.len();
    out.truncate(LITE_BUDGET);
    // A subgroup candidate is never kept without its workgroup-memory twin
    // (browsers without `subgroups` run the twin): a cut between them drops both.
    if out.last().is_some_and(|c| c.s.subgroup_reduce) {
        out.pop();
    }
    if gpu_matmul {
        // The kept set is whole tiles in tile order; within it, every tile's
        // first variant comes before any tile's second (a stable sort).
        out.sort_by_key(|c| c.gpu.as_ref().map(|g| g.variant));
    }
    (out, survivors)
}

/// GPU matmul order: the tiles ranked by `Block_core` (the paper) and by
/// work per thread are taken alternately, each tile once, and each tile's
/// variants follow it in their order. That decides which candidates fit the
/// budget; `candidates` then puts every kept tile's first variant ahead of
/// any second one. The two rankings win on different
/// shapes on the H100 (BENCHMARKS.md, "Lite space"): small register tiles
/// with many resident workgroups on K0, whose grid is too small to fill the
/// GPU with large tiles; 8×8 register tiles on K1 and 4096³.
fn interleave_tiles(cands: Vec<Cand>) -> Vec<Cand> {
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
fn field_key(s: &Schedule) -> String {
    serde_json::to_string(s).expect("schedule serializes")
}

/// The schedule every candidate starts from: the portable default with the
/// fixed settings applied, and the device's SIMD support respected.
fn base_schedule(op: &Op, target: Target, device: &Device, settings: &Settings) -> Schedule {
    let mut s = Schedule::default_for(op, target);
    for (p, v) in &settings.fixed {
        Settings::apply(&mut s, p, v);
    }
    canonicalise(op, target, device, &mut s);
    s
}

/// Settings that the op, the target or the device decide, whatever the
/// microbenchmark says: relaxed SIMD only where the client has it, no SIMD
/// where it has none, and the fields a kernel family ignores at one value
/// (so that candidates differing only there are one candidate).
fn canonicalise(op: &Op, target: Target, device: &Device, s: &mut Schedule) {
    match target {
        Target::Wasm => {
            s.relaxed_simd &= device.simd.relaxed();
            if !device.simd.simd() {
                s.vectorize = 1;
            }
            s.double_buffer = false;
            s.split_k = 1;
            s.subgroup_reduce = false;
            if op.kind() == OpKind::MatmulQ4 {
                // q4_cpu reads neither a loop order nor a packed B tile.
                s.cache_read = false;
                s.order = webtune_compiler::schedule::LoopOrder::MNK;
                s.inner_n_first = false;
            }
        }
        Target::Wgsl => {
            s.relaxed_simd = false;
            // Only the q4 generator reduces across threads.
            s.subgroup_reduce &= op.kind() == OpKind::MatmulQ4;
            // The CPU-only fields, at their defaults.
            s.order = webtune_compiler::schedule::LoopOrder::MNK;
            s.inner_n_first = false;
            s.passes = Default::default();
            if op.kind() == OpKind::MatmulQ4 {
                // gpu_q4 decides double buffering per candidate.
                s.vectorize = 1;
                s.cache_read = false;
                s.double_buffer = false;
            } else {
                s.split_k = 1;
                s.double_buffer &= s.cache_read;
            }
        }
    }
}

/// Register tiles (x0, y0) allowed by heuristics 1, 2 and the aspect rule.
/// `lanes`: columns per register along y (4 where the CPU's tile is
/// counted in vectors, 1 on the GPU, whose threads are the vector lanes).
fn register_tiles(xmax: u32, ymax: u32, x_cap: u32, y_cap: u32, vec4: bool, lanes: u32, relax: Relaxation) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for x0 in pow2s(xmax.min(x_cap)) {
        for y0 in pow2s(ymax.min(y_cap)) {
            if x0 * y0 > MAX_REGISTER_TILE {
                continue;
            }
            if relax.heuristics {
                // H1: full vectors where the columns allow them.
                if vec4 && y0 % 4 != 0 && ymax >= 4 {
                    continue;
                }
                // The register tile is square or 1:2 along the vector (in
                // registers on the CPU: a square tile needs the fewest loads
                // per multiply-add, x0 + y0/lanes for x0·y0/lanes); a side
                // already at its dimension's size may fall short.
                let ry = (y0 / lanes).max(1);
                let ok = if lanes == 1 { y0 == x0 || y0 == 2 * x0 } else { ry == x0 || ry == 2 * x0 || x0 == 2 * ry };
                let ok = ok || (x0 == xmax && ry > x0) || (y0 == ymax.min(y_cap) && x0 > ry);
                if !ok {
                    continue;
                }
            }
            out.push((x0, y0));
        }
    }
    out
}

fn with_vector(mut s: Schedule, y0: u32) -> Schedule {
    if s.vectorize == 4 && !y0.is_multiple_of(4) {
        s.vectorize = 1;
    }
    s
}

/// `matmul` and `batch_matmul` on WGSL (Table 1, WebGPU).
fn gpu_matmul(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    let (_, m, k, n) = op.bmkn();
    let (xm, ym, km) = (np2(m), np2(n), np2(k));
    let hw = &device.gpu;
    let lim = device.limits;
    let reg_cap = (relax.usable * hw.max_regs_per_thread as f64) as u32;
    let mut out = Vec::new();
    for (x0, y0) in register_tiles(xm, ym, 16, 16, base.vectorize == 4, 1, relax) {
        // At most 8×8 per thread: the largest tile measured fastest on the
        // H100 (BENCHMARKS.md, "Facts carried in"); 8×16 has not been shown to pay for its registers.
        if relax.heuristics && x0 * y0 > GPU_REGISTER_TILE {
            continue;
        }
        // H7, per thread: the generator's live set fits the thread's
        // registers, and r0 is the largest step up to GPU_R0 whose unrolled
        // body stays small.
        let reg = x0 * y0 + x0 + y0;
        if relax.heuristics && reg > reg_cap {
            continue;
        }
        let Some(r0) = pow2s(km.min(GPU_R0)).filter(|&r| !relax.heuristics || x0 * y0 * r <= MAX_UNROLLED).last() else { continue };
        for tx in pow2s(xm / x0) {
            for ty in pow2s(ym / y0) {
                let threads = tx * ty;
                if threads > lim.invocations {
                    continue;
                }
                let (x1, y1) = (x0 * tx, y0 * ty);
                if relax.heuristics {
                    // H5: whole warps, unless the shape cannot fill one.
                    let can_fill = (xm / x0) * (ym / y0) >= hw.warp_width;
                    if can_fill && threads % hw.warp_width != 0 {
                        continue;
                    }
                    // A thread grid of at most 2:1, unless a side is at its dimension.
                    let (lx, ly) = (tx.trailing_zeros() as i32, ty.trailing_zeros() as i32);
                    if (lx - ly).abs() > 1 && !(lx < ly && x1 == xm) && !(ly < lx && y1 == ym) {
                        continue;
                    }
                }
                let warps = threads.div_ceil(hw.warp_width);
                let reg_limit = hw.regs_per_core / (reg * threads).max(1);
                let warp_limit = hw.max_warps_per_core / warps;
                // H6: one register step per stage, in the workgroup's memory.
                let r1 = r0;
                let stage = if base.cache_read { (x1 + y1) * r1 * 4 } else { 0 };
                let bytes = if base.double_buffer { 2 * stage } else { stage };
                if bytes > lim.workgroup_bytes {
                    continue;
                }
                let l1_limit = hw.shared_bytes_per_core.checked_div(bytes).unwrap_or(u32::MAX);
                let block_core = reg_limit.min(l1_limit).min(warp_limit).min(hw.max_blocks_per_core);
                if relax.heuristics {
                    // H7: registers bind, and the resident workgroups fill them.
                    if reg_limit == 0 || (block_core as f64) < relax.fill * reg_limit as f64 {
                        continue;
                    }
                    let used = block_core as f64 * threads as f64 * reg as f64;
                    if used < relax.fill * relax.usable * hw.regs_per_core as f64 {
                        continue;
                    }
                }
                let s = Schedule { x0, y0, r0, x1, y1, r1, ..with_vector(base.clone(), y0) };
                let rank = vec![-(block_core as i64), -((x0 * y0) as i64), ragged(&s, op), -(threads as i64)];
                let intensity = vec![-((x0 * y0) as i64), -(block_core as i64), ragged(&s, op), -(threads as i64)];
                // Variants of one tile: staged and double-buffered first, then
                // staged, then read straight from global memory.
                let variant = if !s.cache_read {
                    2
                } else if s.double_buffer {
                    0
                } else {
                    1
                };
                out.push(Cand { s, rank, gpu: Some(GpuOrder { intensity, variant }) });
            }
        }
    }
    out
}

/// `matmul_q4` on WGSL: the split-K family (rows x0 per workgroup, y1
/// outputs, split_k threads per output).
fn gpu_q4(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    let (_, m, k, n) = op.bmkn();
    let hw = &device.gpu;
    let lim = device.limits;
    let reg_cap = (relax.usable * hw.max_regs_per_thread as f64) as u32;
    let mut out = Vec::new();
    for x0 in pow2s(np2(m).min(16)) {
        // Registers: the q4 generator's live set, not Table 1's x0·r0 + r0
        // + x0 (that counts every weight of the unrolled r0 as live, which
        // capped r0 at 64 on the H100, where the wide search's best had r0 =
        // 128: BENCHMARKS.md). Live are, per output, the r0/8 packed words
        // and r0/32 scales the unrolled loop can have in flight; the 8
        // unpacked nibbles; per row its 8 A values; and per (row, output)
        // its 4 position sums and its accumulator.
        for y0 in GPU_Q4_OUTPUTS {
            let reg = |r0: u32| y0 * (r0 / 8 + r0 / 32) + 8 + x0 * (8 + 5 * y0) + 2;
            let fits = |r0: u32| !relax.heuristics || (reg(r0) <= reg_cap && x0 * y0 * r0 <= MAX_UNROLLED);
            // At least one scale block (32 weights) per thread and step.
            let max_split = floor_pow2(k / 32).clamp(1, 256);
            for split_k in pow2s(max_split) {
                // r0: a multiple of 8 (one packed word), a power of two, at
                // most K / split_k (every thread has a whole step; 32 or
                // more by max_split) and at most 128, the largest the H100
                // search measured a win for.
                let Some(r0) = pow2s(floor_pow2(k / split_k).min(GPU_Q4_R0)).filter(|&r| r >= 8 && fits(r)).last() else {
                    continue;
                };
                let reg = reg(r0);
                for y1 in pow2s(np2(n)).filter(|y1| y1 % y0 == 0) {
                    let threads = y1 / y0 * split_k;
                    if threads > lim.invocations {
                        continue;
                    }
                    let can_fill = np2(n) * max_split >= hw.warp_width;
                    if relax.heuristics && can_fill && threads % hw.warp_width != 0 {
                        continue;
                    }
                    let bytes = if split_k > 1 { x0 * y1 * split_k * 4 } else { 0 };
                    if bytes > lim.workgroup_bytes {
                        continue;
                    }
                    let warps = threads.div_ceil(hw.warp_width);
                    let reg_limit = hw.regs_per_core / (reg * threads).max(1);
                    let l1_limit = hw.shared_bytes_per_core.checked_div(bytes).unwrap_or(u32::MAX);
                    let block_core = reg_limit.min(l1_limit).min(hw.max_warps_per_core / warps).min(hw.max_blocks_per_core);
                    if relax.heuristics {
                        if reg_limit == 0 || (block_core as f64) < relax.fill * reg_limit as f64 {
                            continue;
                        }
                        if ((block_core * threads * reg) as f64) < relax.fill * relax.usable * hw.regs_per_core as f64 {
                            continue;
                        }
                    }
                    let s = Schedule { x0, y0, r0, x1: x0, y1, r1: r0, split_k, ..base.clone() };
                    // Outputs per thread in GPU_Q4_OUTPUTS' order (measured),
                    // then fuller cores, then more threads per output:
                    // neighbouring threads read neighbouring packed words
                    // (coalesced), then more rows.
                    let y0_rank = GPU_Q4_OUTPUTS.iter().position(|&o| o == y0).unwrap_or(0) as i64;
                    let rank = vec![y0_rank, -(block_core as i64), -(split_k as i64), -(x0 as i64), ragged(&s, op), -(threads as i64)];
                    // A register double-buffered twin where K makes three
                    // steps or more at some r0 ≤ this one (the largest such
                    // r0). It comes first where this schedule's steps leave
                    // a remainder of K (on the H100, 1,3072,9216: 1.10×
                    // faster than without), after it where they divide K
                    // (4096² and 8192×3072, where the single-buffered
                    // schedule was as fast or faster; BENCHMARKS.md, fifth
                    // session).
                    let db = pow2s(r0)
                        .filter(|&r| r >= 8)
                        .map(|r| Schedule { r0: r, r1: r, double_buffer: true, ..s.clone() })
                        .filter(|d| d.q4_gpu_steps(k).0 >= GPU_Q4_DB_STEPS)
                        .last();
                    let db_order = if s.q4_gpu_steps(k).1 != 0 { 0 } else { 2 };
                    for (order, s) in db.into_iter().map(|d| (db_order, d)).chain([(1, s)]) {
                        let mut rank = rank.clone();
                        rank.push(order);
                        // Where the adapter's subgroups surely hold an
                        // output's lanes, the subgroup butterfly first
                        // (1.04–1.10× faster on the H100), its
                        // workgroup-memory twin right after (for browsers
                        // without the `subgroups` feature, which cannot load
                        // the first).
                        if subgroup_lanes(device).is_some_and(|l| split_k > 1 && split_k <= l) {
                            let sg = Schedule { subgroup_reduce: true, ..s.clone() };
                            let mut r = rank.clone();
                            r.push(0);
                            out.push(Cand { s: sg, rank: r, gpu: None });
                        }
                        rank.push(1);
                        out.push(Cand { s, rank, gpu: None });
                    }
                }
            }
        }
    }
    out
}

/// The fewest invocations a WebGPU subgroup has on this device, where that
/// is certain from its vendor: NVIDIA's warps and Apple's SIMD-groups are 32
/// wide (the H100 reports `subgroupMinSize` 32 through Vulkan). Others are
/// unknown here (AMD runs wave32 or wave64, Intel 8 to 32 lanes), so their
/// spaces reduce in workgroup memory only.
fn subgroup_lanes(device: &Device) -> Option<u32> {
    (device.class == DeviceClass::Gpu && ["nvidia", "apple"].contains(&device.vendor.as_str())).then_some(32)
}

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

/// `matmul` and `batch_matmul` on Wasm (Table 1, Wasm).
fn cpu_matmul(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
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
    let usable = cpu.allocatable.max(3);
    let vectorize = if base.vectorize == 4 && n >= 4 { 4 } else { 1 };
    // (loads per multiply-add, outputs, x0, y0)
    let mut tiles = Vec::new();
    for v in 1..=8u32 {
        let y0 = v * vectorize;
        if y0 > np2(n) {
            break;
        }
        for x0 in 1..=16u32.min(m) {
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
        tiles.truncate(IN_REGISTER_TILES);
    }
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
        }
        for (b, (x1, y1, r1, order)) in blocks.into_iter().enumerate() {
            let s = Schedule { x0, y0, r0, x1, y1, r1, vectorize, order, cache_read: true, ..base.clone() };
            let rank = vec![if short { t as i64 } else { 0 }, loads, outputs, t as i64, b as i64, ragged(&s, op)];
            out.push(Cand { s, rank, gpu: None });
        }
    }
    out
}

/// `matmul_q4` on Wasm: register tiles of x0 rows × y0 outputs, each output
/// a 4-lane accumulator over K (`q4_cpu.rs`).
fn cpu_q4(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    let (_, m, k, n) = op.bmkn();
    let (xm, ym) = (np2(m), np2(n));
    let cpu = &device.cpu;
    let l1_words = relax.usable * cpu.l1_bytes as f64 / 4.0;
    let mut out = Vec::new();
    for (x0, y0) in register_tiles(xm, ym, 8, 16, base.vectorize == 4, 1, relax) {
        let vectorize = if base.vectorize == 4 && y0 % 4 == 0 { 4 } else { 1 };
        // One accumulator per output, one dot product per row, the word and its nibbles.
        let live = x0 * y0 + x0 + 2;
        if !cpu_registers_ok(live, cpu.vector_registers, relax) {
            continue;
        }
        for r0 in [32u32, 64].into_iter().filter(|&r| r <= k) {
            let mut blocks = Vec::new();
            for x1 in pow2s(xm).filter(|&x| x >= x0) {
                for y1 in pow2s(ym).filter(|&y| y >= y0) {
                    // A's rows stay cached while the block's columns of W stream by.
                    let words = (x1 * k) as f64 + (y1 * (k / 8 + k / 32)) as f64;
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
            for (traffic, x1, y1) in blocks {
                let s = Schedule { x0, y0, r0, x1, y1, r1: r0, vectorize, ..base.clone() };
                let fill_gap = (relax.cpu_spill * cpu.vector_registers as f64 - live as f64).abs();
                let rank = vec![(fill_gap * 1000.0) as i64, -((x0 * y0) as i64), traffic, -(r0 as i64), ragged(&s, op)];
                out.push(Cand { s, rank, gpu: None });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn relaxation_ends() {
        let mut r = Relaxation::START;
        let mut steps = 0;
        while let Some(n) = r.next() {
            r = n;
            steps += 1;
        }
        assert_eq!(steps, 3);
        assert!(!r.heuristics && r.fill == 0.0);
    }
}
