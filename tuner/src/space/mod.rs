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
//!    [`RegisterTiles`](crate::hardware::RegisterTiles)) heuristics 2–4 take another form, measured in
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
//!
//! On a device whose key says it runs Wasm threads ([`Device::threads`] > 1),
//! Wasm `matmul`, `batch_matmul`, `matmul_q4_1` and `matmul_q8_0` also get threaded variants of the
//! best-ranked single-threaded candidates (a thread count and the dimension
//! the parts divide; [`threads`] states the rule): before the
//! single-threaded candidates where each part gets [`threads::PART_FLOPS`]
//! of work (or, for the GGUF products, [`threads::PART_WEIGHT_BYTES`] of
//! weights to stream), after them where it gets less. The relaxation counts only the
//! single-threaded candidates, so they are the non-threaded twin key's, in
//! the same order (as far as the [`LITE_BUDGET`] cut leaves them); a device
//! without threads gets exactly the space it got before threads existed.
//!
//! # Where the rules live
//!
//! - `naive`: the size of the naive space each space is pruned from;
//! - `gpu`: heuristics 5–7 for WGSL (`matmul`, `batch_matmul`, and
//!   `matmul_q4` whose rules `matmul_q4_1` and `matmul_q8_0` share);
//! - `cpu`: heuristics 3 and 4 for Wasm, in both forms (register tiles
//!   that spill, and tiles kept in registers over packed B blocks);
//! - `order`: the ranked candidate and the GPU matmul tile interleaving;
//! - [`threads`]: threaded Wasm variants (thread counts, split, order);
//! - this module: the relaxation loop, the shared tile rules (1, 2, the
//!   aspect rule), the settings applied to every candidate, and
//!   [`lite_space`] itself.

mod cpu;
mod gpu;
mod naive;
mod order;
pub mod threads;

use serde::Serialize;
use sha2::{Digest, Sha256};
use webtune_compiler::op::OpKind;
use webtune_compiler::schedule::{MAX_REGISTER_TILE, UnrollLoop};
use webtune_compiler::{Op, Schedule, Target};

use crate::fingerprint::Device;
use crate::settings::Settings;
use cpu::{cpu_matmul, cpu_q4};
use gpu::{gpu_matmul, gpu_q4, gpu_q4_tiled};
use order::{Cand, field_key, interleave_tiles};

pub use cpu::IN_REGISTER_TILES;
pub use naive::naive_size;

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
/// Most rows of A one workgroup of the WGSL `matmul_q4` matrix-vector
/// family takes (x0).
pub const GPU_Q4_MAX_ROWS: u32 = 16;
/// Rows of A per workgroup the WGSL `matmul_q4` matrix-vector family
/// tries first where M allows: on the H200 (BENCHMARKS.md, 2026-11-27) two
/// rows ran 16,4096,4096 at 12.0 TFLOP/s against 9.5 for one row.
pub const GPU_Q4_ROWS: u32 = 2;
/// Rows of A from which the tiled WGSL `matmul_q4` space has two-pass
/// tiles (`dequant_pass`), ahead of its one-pass ones: on the H200 (Vulkan, 2026-11-27,
/// BENCHMARKS.md "q4 prefill in two passes"), the best two-pass tile ran
/// 36.6 TFLOP/s at 256×4096×4096 against 32.5 in one pass, and 40.3
/// against 33.6 at 512 rows, but 31.0 against 31.4 at 128 rows: the
/// unpack pass (64 MB of f32 weights written, ~22 µs there) is a fixed
/// cost that only a long enough prompt hides.
pub const GPU_Q4_DEQUANT_ROWS: u32 = 256;
/// Fewest K steps a double-buffered WGSL `matmul_q4` candidate has: its r0
/// is the largest that leaves this many (the H100 search's best
/// double-buffered r0 on the decode shapes; BENCHMARKS.md, fifth session).
pub const GPU_Q4_DB_STEPS: u32 = 3;
/// Largest GPU register step `r0` (heuristic 7): `r0 = r1 = 8` was the
/// measured optimum on the H100 (BENCHMARKS.md, "Lite space").
pub const GPU_R0: u32 = 8;
/// Threads a WGSL matmul grid needs before splitting K stops paying: on
/// the H200 (Vulkan, 2026-11-27, BENCHMARKS.md), split-K doubled matmul
/// 64×4096×4096 (8 K threads unsplit, 4 groups best) and gained 1.6× at
/// 128×4096×4096 (16 K threads, 2 groups), but lost 8% at 256×4096×4096
/// (32 K threads). Smaller GPUs fill sooner: there the unsplit tile, which
/// is always in the space too, wins on the device.
pub const GPU_FILL_THREADS: u64 = 32 * 1024;
/// Workgroups a sliced WGSL matmul grid needs besides [`GPU_FILL_THREADS`]
/// threads (that many threads in workgroups of 128): on the H200 (Vulkan,
/// 2026-11-27, BENCHMARKS.md "Workgroup tiles in rows"), the 8×8 / 128×128
/// tile (256 threads) at 128×4096×4096 ran 31.5 TFLOP/s with 4 slices (32 K
/// threads in 128 workgroups) and 38.6 with 8 (256 workgroups), while the
/// 8×8 / 64×128 tile (128 threads) ran 37.3 with 4 slices (256 workgroups)
/// and 32.4 with 8.
pub const GPU_FILL_GROUPS: u64 = GPU_FILL_THREADS / 128;
/// Outputs (M·N per batch) from which splitting K no longer paid on the
/// H200, whatever the tile: at 256×4096×4096 (1 M outputs) the split 8×8
/// tiles (16 K threads) lost 26% to the unsplit (q4, 2026-11-27).
pub const GPU_FILL_OUTPUTS: u64 = 1 << 20;
/// Fewest K slabs a split-K group of a WGSL matmul computes.
pub const GPU_MIN_GROUP_SLABS: u32 = 8;
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
pub const RULES_VERSION: &str = "lite-space-3";

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

/// The lite space for `op` on `target` for `device`, with the
/// microbenchmark's `settings` applied.
pub fn lite_space(op: &Op, target: Target, device: &Device, settings: &Settings) -> Space {
    let mut relax = Relaxation::START;
    // The relaxation counts single-threaded survivors only, so that a
    // threaded device's single-threaded candidates are its twin's.
    let (mut cands, survivors) = loop {
        let (cands, single, survivors) = candidates(op, target, device, settings, relax);
        match relax.next() {
            Some(next) if single < MIN_LITE => relax = next,
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
/// [`LITE_BUDGET`], and how many there were before the cut: single-threaded
/// ones, and all (the threaded variants included: [`threads`]).
fn candidates(op: &Op, target: Target, device: &Device, settings: &Settings, relax: Relaxation) -> (Vec<Cand>, usize, usize) {
    let base = base_schedule(op, target, device, settings);
    let mut out = Vec::new();
    // matmul_q4 (and matmul_q4_1, matmul_q8_0) on WGSL: the tiled family,
    // ordered on its own and merged with the matrix-vector one (`out`) at
    // the end.
    let mut tiled = Vec::new();
    for combo in settings.combinations(&[]) {
        let mut b = base.clone();
        for (p, v) in &combo {
            Settings::apply(&mut b, p, v);
        }
        canonicalise(op, target, device, &mut b);
        let tiles = match (op.kind(), target) {
            (OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0, Target::Wgsl) => {
                if q4_tiled_wanted(op) {
                    tiled.extend(gpu_q4_tiled(op, device, &b, relax));
                }
                gpu_q4(op, device, &b, relax)
            }
            (OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0, Target::Wasm) => cpu_q4(op, device, &b, relax),
            // Wasm-only ops: no WGSL space.
            (OpKind::MatmulI16, Target::Wgsl) => Vec::new(),
            // The tiles of a matmul over K/2: r0 and r1 count words, and a
            // word of B is as many bytes as an f32, so cache fits carry over.
            (OpKind::MatmulI16, Target::Wasm) => {
                let (_, m, k, n) = op.bmkn();
                let words = Op::with_epilogue(OpKind::Matmul, op.epilogue(), &[m, k / 2, n]).expect("a smaller valid shape");
                cpu_matmul(&words, device, &b, relax)
            }
            (_, Target::Wgsl) => gpu_matmul(op, device, &b, relax),
            (_, Target::Wasm) => cpu_matmul(op, device, &b, relax),
        };
        out.extend(tiles);
    }
    let out = ordered(op, target, out);
    // The GGUF kernels' 16-bit-activation twins do not count: they leave the
    // f32 candidates as they were (space/cpu.rs).
    let single = out.iter().filter(|c| !c.s.quantize_a).count();
    let out = threads::with_threads(op, target, device, out);
    if !tiled.is_empty() {
        let tiled = with_f16_arithmetic(op, target, device, ordered(op, target, tiled));
        let (single, survivors) = (single + tiled.len(), out.len() + tiled.len());
        return (q4_merge(op, out, tiled), single, survivors);
    }
    let survivors = out.len();
    (with_f16_arithmetic(op, target, device, cut(out, LITE_BUDGET)), single, survivors)
}

/// An `+f16` matmul or batch_matmul (without GELU), or the tiled family of
/// an `+f16` matmul_q4, on a GPU that runs f16
/// arithmetic fast ([`gpu::fast_f16`]): the first half of the budget's
/// candidates in f16 arithmetic (`f16_acc`), in their order, then the same
/// ones in f32 arithmetic. On the H200 the f16-arithmetic rewrite of the
/// lite candidates was faster in 16 of 18 pairs, 1.21–1.66× at 4096³; with
/// each twin right after its tile instead, 4096³ reached 95% of its best at
/// candidate 13 (BENCHMARKS.md). Elsewhere the space is the f32 op's.
fn with_f16_arithmetic(op: &Op, target: Target, device: &Device, out: Vec<Cand>) -> Vec<Cand> {
    if !gpu::fast_f16(device) {
        return out;
    }
    // `Schedule::check` says where f16 arithmetic exists (an f16 op on WGSL,
    // not the q4 matrix-vector kernel, not with GELU): elsewhere no twin passes.
    let twin = |c: &Cand| Cand { s: Schedule { f16_acc: true, ..c.s.clone() }, ..c.clone() };
    let mut half: Vec<Cand> = out.iter().take(LITE_BUDGET / 2).map(twin).filter(|c| c.s.check(op, target).is_ok()).collect();
    if half.is_empty() {
        return out;
    }
    half.extend(out.into_iter().take(LITE_BUDGET / 2));
    half
}

/// Whether every candidate is a GPU matmul tile (ordered by tile, then variant).
fn gpu_tiles(cands: &[Cand]) -> bool {
    !cands.is_empty() && cands.iter().all(|c| c.gpu.is_some())
}

/// One family's candidates that pass `Schedule::check`, sorted by rank and
/// deduplicated (GPU matmul tiles interleaved by [`interleave_tiles`]).
fn ordered(op: &Op, target: Target, mut out: Vec<Cand>) -> Vec<Cand> {
    out.retain(|c| c.s.check(op, target).is_ok());
    out.sort_by(|a, b| a.rank.cmp(&b.rank).then_with(|| field_key(&a.s).cmp(&field_key(&b.s))));
    let mut seen = std::collections::HashSet::new();
    out.retain(|c| seen.insert(c.s.clone()));
    if gpu_tiles(&out) {
        out = interleave_tiles(out);
    }
    out
}

/// The first `budget` candidates of an ordered family. A subgroup candidate
/// is never kept without its workgroup-memory twin (browsers without
/// `subgroups` run the twin): a cut between them drops both. GPU matmul
/// tiles: the kept set is whole tiles in tile order, and within it every
/// tile's first variant comes before any tile's second (a stable sort; f16
/// arithmetic before f32 arithmetic first).
fn cut(mut out: Vec<Cand>, budget: usize) -> Vec<Cand> {
    out.truncate(budget);
    if out.last().is_some_and(|c| c.s.subgroup_reduce) {
        out.pop();
    }
    if gpu_tiles(&out) {
        // f16-arithmetic candidates (where [`with_f16_arithmetic`] put
        // them) stay ahead of their f32-arithmetic twins.
        out.sort_by_key(|c| (!c.s.f16_acc, c.gpu.as_ref().map(|g| g.variant)));
    }
    out
}

/// Whether the WGSL `matmul_q4` space holds the tiled family: where A has
/// more than one row for a dequantised weight to serve.
fn q4_tiled_wanted(op: &Op) -> bool {
    // The epilogues (+rms_norm, +swiglu, +residual) have the matrix-vector kernel only.
    op.bmkn().1 > 1 && op.epilogue().is_none()
}

/// The WGSL `matmul_q4` space: the matrix-vector and the tiled families,
/// the one this shape favours ([`q4_tiled_first`]) first, taken three to
/// one (seven to one where M is four times the crossover or more: there the
/// matrix-vector family is far behind, 9.9 against 15.4 TFLOP/s at M = 64
/// on the H200). Where one family has fewer candidates, the other fills
/// the budget.
fn q4_merge(op: &Op, matvec: Vec<Cand>, tiled: Vec<Cand>) -> Vec<Cand> {
    let run = if op.bmkn().1 >= 4 * GPU_Q4_MAX_ROWS { 7 } else { 3 };
    let (first, second) = if q4_tiled_first(op) { (tiled, matvec) } else { (matvec, tiled) };
    let share = LITE_BUDGET / (run + 1);
    let second_n = second.len().min(share.max(LITE_BUDGET.saturating_sub(first.len())));
    let first_n = first.len().min(LITE_BUDGET - second_n);
    let (first, second) = (cut(first, first_n), cut(second, second_n));
    let mut out = Vec::with_capacity(first.len() + second.len());
    let (mut a, mut b) = (first.into_iter().peekable(), second.into_iter());
    while a.peek().is_some() {
        out.extend(a.by_ref().take(run));
        out.extend(b.next());
    }
    out.extend(b);
    out
}

/// Whether the tiled family leads the WGSL `matmul_q4` space: where A has
/// more rows than a matrix-vector workgroup takes ([`GPU_Q4_MAX_ROWS`]),
/// so that the matrix-vector kernel unpacks each weight more than once
/// while a tile unpacks it once for x1 rows. On the H200 (BENCHMARKS.md,
/// 2026-11-27) the matrix-vector family won at M = 16 (9.5 TFLOP/s against
/// the tiled family's 2.1) and the tiled family at M = 64 (13.9 against
/// 9.9) and beyond.
fn q4_tiled_first(op: &Op) -> bool {
    op.bmkn().1 > GPU_Q4_MAX_ROWS
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
            if op.kind().block_quantized() {
                // q4_cpu and gguf_cpu read neither a loop order nor a packed B tile.
                s.cache_read = false;
                s.order = webtune_compiler::schedule::LoopOrder::MNK;
                s.inner_n_first = false;
            }
            if op.kind() == OpKind::MatmulI16 {
                // Integer dot products are vector instructions, and their
                // accumulators live in locals; relaxed SIMD changes nothing.
                s.vectorize = 4;
                s.relaxed_simd = false;
                for l in [UnrollLoop::X0, UnrollLoop::Y0] {
                    if !s.unrolls(l) {
                        s.unroll.push(l);
                    }
                }
            }
        }
        Target::Wgsl => {
            s.relaxed_simd = false;
            // Only the block-quantised matrix-vector generator reduces across threads.
            s.subgroup_reduce &= op.kind().block_quantized();
            // The CPU-only fields, at their defaults.
            s.order = webtune_compiler::schedule::LoopOrder::MNK;
            s.inner_n_first = false;
            s.passes = Default::default();
            if op.kind().block_quantized() {
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

#[cfg(test)]
mod tests {
    use super::*;

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
