//! The WGSL rules (Table 1, WebGPU; heuristics 5–7): `matmul` and
//! `batch_matmul` tiles by workgroups per core and work per thread, and the
//! `matmul_q4` decode space with its double-buffered and subgroup twins
//! (also the space of `matmul_q4_1` and `matmul_q8_0`, the same kernels
//! over other block formats).

use webtune_compiler::{Op, Schedule};

use super::order::{Cand, GpuOrder, ragged};
use super::{
    GPU_FILL_GROUPS, GPU_FILL_OUTPUTS, GPU_FILL_THREADS, GPU_MIN_GROUP_SLABS, GPU_Q4_DB_STEPS, GPU_Q4_DEQUANT_ROWS, GPU_Q4_MAX_ROWS,
    GPU_Q4_OUTPUTS, GPU_Q4_R0, GPU_Q4_ROWS, GPU_R0, GPU_REGISTER_TILE, MAX_UNROLLED, Relaxation, floor_pow2, np2, pow2s, register_tiles,
};
use crate::fingerprint::{Device, DeviceClass};

/// `matmul` and `batch_matmul` on WGSL (Table 1, WebGPU).
pub(super) fn gpu_matmul(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
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
                // By work per thread, then the larger workgroup tile (more
                // reuse of each staged slab; split across workgroups where
                // the grid is small): on the H200 8×8 / 64×128 ran 39 TFLOP/s
                // at 4096³ and, with 4 or 8 slices, 30–33 at 64 and 128 rows,
                // where the smaller 8×8 tiles that fit more workgroups on a
                // core ran 27–29 (BENCHMARKS.md, split-K across workgroups).
                let intensity = vec![-((x0 * y0) as i64), -(threads as i64), -(block_core as i64), ragged(&s, op)];
                // Variants of one tile: split along K where its grid is too
                // small to fill the GPU (staged, double-buffered first), then
                // staged and double-buffered, staged, and read straight from
                // global memory.
                let variant = if !s.cache_read {
                    2
                } else if s.double_buffer {
                    0
                } else {
                    1
                };
                if let Some(sliced) = slice_twin(op, &s) {
                    out.push(Cand { s: sliced, rank: rank.clone(), gpu: Some(GpuOrder { intensity: intensity.clone(), variant }) });
                }
                if let Some(split) = split_twin(op, &s, lim) {
                    out.push(Cand { s: split, rank: rank.clone(), gpu: Some(GpuOrder { intensity: intensity.clone(), variant }) });
                }
                out.push(Cand { s, rank, gpu: Some(GpuOrder { intensity, variant: variant + 2 }) });
            }
        }
    }
    out
}

/// The split-K twin of a staged tile whose grid has at most half of
/// [`GPU_FILL_THREADS`] threads (the slice twin's rule, [`slice_twin`]), on a shape with fewer than
/// [`GPU_FILL_OUTPUTS`] outputs: the fewest split_k groups (a power of two)
/// that reach it, as far as the workgroup's threads and memory allow and
/// each group keeps [`GPU_MIN_GROUP_SLABS`] K slabs or more.
fn split_twin(op: &Op, s: &Schedule, lim: crate::fingerprint::GpuLimits) -> Option<Schedule> {
    if !s.cache_read {
        return None;
    }
    let (batch, m, k, n) = op.bmkn();
    if (m as u64) * (n as u64) * (batch as u64) >= GPU_FILL_OUTPUTS {
        return None;
    }
    let threads = (s.x1 / s.x0) * (s.y1 / s.y0);
    let grid = grid_threads(op, s);
    if 2 * grid > GPU_FILL_THREADS {
        return None;
    }
    let slabs = k.div_ceil(s.r1);
    let mut best = None;
    for sk in [2, 4, 8] {
        let t = Schedule { split_k: sk, ..s.clone() };
        if threads * sk > lim.invocations
            || slabs / sk < GPU_MIN_GROUP_SLABS
            || webtune_compiler::generate::matmul_gpu::workgroup_bytes(&t) > lim.workgroup_bytes
        {
            break;
        }
        if grid * sk as u64 / 2 >= GPU_FILL_THREADS {
            break;
        }
        best = Some(t);
    }
    best
}

/// The split-K-across-workgroups twin of a staged tile whose grid has at
/// most half of [`GPU_FILL_THREADS`] threads (whatever the shape's output
/// count: on the H200 4 slices took 256×4096² from 22.2 to 33.0 TFLOP/s on
/// one tile, while 2 slices cost K1 = 640×768×3072, whose grids have 30 K
/// threads, 8% on its best tile; BENCHMARKS.md): the fewest `k_slices` (a
/// power of two, at most 16) whose grid reaches it, or the most that keep
/// each slice [`GPU_MIN_GROUP_SLABS`] K slabs or more. Unlike split_k, which makes each
/// workgroup larger, slices make more workgroups, so they reach cores that
/// the tile's grid leaves idle; they pay a second pass over the partial
/// sums (`k_slices` · M · N · 4 bytes written and read). The slices must
/// also make [`GPU_FILL_GROUPS`] workgroups: a tile of 256 threads reaches
/// the thread count with half as many workgroups as one of 128.
fn slice_twin(op: &Op, s: &Schedule) -> Option<Schedule> {
    if !s.cache_read {
        return None;
    }
    let (_, _, k, _) = op.bmkn();
    let grid = grid_threads(op, s);
    if 2 * grid > GPU_FILL_THREADS {
        return None;
    }
    let groups = grid_groups(op, s);
    let slabs = k.div_ceil(s.r1);
    let mut best = None;
    for ks in [2, 4, 8, 16].into_iter().take_while(|&ks| slabs / ks >= GPU_MIN_GROUP_SLABS) {
        best = Some(Schedule { k_slices: ks, ..s.clone() });
        if grid * ks as u64 >= GPU_FILL_THREADS && groups * ks as u64 >= GPU_FILL_GROUPS {
            break;
        }
    }
    best
}

/// Workgroups in the grid of a staged tile.
fn grid_groups(op: &Op, s: &Schedule) -> u64 {
    let (batch, m, _, n) = op.bmkn();
    (m.div_ceil(s.x1) * n.div_ceil(s.y1) * batch) as u64
}

/// Threads in the grid of a staged tile: workgroups times threads per workgroup.
fn grid_threads(op: &Op, s: &Schedule) -> u64 {
    grid_groups(op, s) * ((s.x1 / s.x0) * (s.y1 / s.y0) * s.split_k) as u64
}

/// `matmul_q4` on WGSL: the split-K family (rows x0 per workgroup, y1
/// outputs, split_k threads per output). `matmul_q4_1` and `matmul_q8_0`
/// take the same rules: their kernels are this one over other words (Q8_0:
/// 4 values per word, so twice the words per r0), and Q4_1 keeps a
/// minimum per output and a sum of A per row besides.
pub(super) fn gpu_q4(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    let (_, m, k, n) = op.bmkn();
    let hw = &device.gpu;
    let lim = device.limits;
    let reg_cap = (relax.usable * hw.max_regs_per_thread as f64) as u32;
    let mut out = Vec::new();
    for x0 in pow2s(np2(m).min(GPU_Q4_MAX_ROWS)) {
        // Registers: the q4 generator's live set, not Table 1's x0·r0 + r0
        // + x0 (that counts every weight of the unrolled r0 as live, which
        // capped r0 at 64 on the H100, where the wide search's best had r0 =
        // 128: BENCHMARKS.md). Live are, per output, the r0/8 packed words
        // and r0/32 scales the unrolled loop can have in flight; the 8
        // unpacked nibbles; per row its 8 A values; and per (row, output)
        // its 4 position sums and its accumulator.
        let vpw = op.kind().values_per_word();
        let q4_1 = op.kind() == webtune_compiler::OpKind::MatmulQ4_1;
        // +swiglu: each output is two rows of W (gate and up), both live.
        let ny = op.weight_rows_per_output();
        for y0 in GPU_Q4_OUTPUTS {
            let extra = if q4_1 { ny * y0 * (GPU_Q4_R0 / 32) + x0 } else { 0 };
            let reg = |r0: u32| ny * y0 * (r0 / vpw + r0 / 32) + vpw + x0 * (8 + 5 * ny * y0) + 2 + extra;
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
                    let s = Schedule { x0, y0, r0, x1: x0, y1, r1: r0, split_k, ..base.clone() };
                    // The workgroup-memory reduction's bytes (the subgroup twin below needs none).
                    let bytes = Schedule { subgroup_reduce: false, ..s.clone() }.matvec_workgroup_bytes(op);
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
                    // Outputs per thread in GPU_Q4_OUTPUTS' order (measured),
                    // then fuller cores, then more threads per output:
                    // neighbouring threads read neighbouring packed words
                    // (coalesced), then more rows.
                    let y0_rank = GPU_Q4_OUTPUTS.iter().position(|&o| o == y0).unwrap_or(0) as i64;
                    // Rows per workgroup nearest GPU_Q4_ROWS first: each
                    // packed word is unpacked once per x0 rows of A, so
                    // with M > 1 a lone row unpacks every weight M times.
                    let rows = (x0.ilog2() as i64 - GPU_Q4_ROWS.ilog2() as i64).abs();
                    // Fuller cores: more resident warps (workgroups × their
                    // warps), not more workgroups: one-warp workgroups hit
                    // the workgroup cap at half the warps a core holds (on
                    // the H200, 1,3072,9216's best had two warps; ranked by
                    // workgroups it came 25th).
                    let resident = (block_core * warps) as i64;
                    // K split across one warp's lanes first: its partial
                    // sums then reduce within the warp (on the H200 the best
                    // of 1,4096,4096 and of 1,3072,9216 both split K 32 ways).
                    let split_dist = (split_k.ilog2() as i64 - hw.warp_width.ilog2() as i64).abs();
                    let rank =
                        vec![y0_rank, rows, split_dist, -resident, -(split_k as i64), -(x0 as i64), ragged(&s, op), -(threads as i64)];
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
                        .filter(|d| d.matvec_steps(op).0 >= GPU_Q4_DB_STEPS)
                        .last();
                    let db_order = if s.matvec_steps(op).1 != 0 { 0 } else { 2 };
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

/// `matmul_q4` on WGSL, the tiled family (prefill, M > 1): the tiles of
/// [`gpu_matmul`] over the same (M, K, N), whose B tile is dequantised from
/// the packed weights into workgroup memory once per workgroup
/// (`cache_read`), double-buffered and not. Its slabs hold whole packed
/// words: r1 is rounded up to a multiple of 8 (r0, a power of two of at
/// most [`GPU_R0`], still divides it).
///
/// Where A has [`GPU_Q4_DEQUANT_ROWS`] rows or more, each tile also comes
/// in two passes (`dequant_pass`: the weights unpacked once into a dense
/// matrix, then the plain matmul tile on it) where that fits the scratch
/// limit, and every tile's two-pass variants come ahead of every one-pass
/// one: the extra pass (the weights written as floats and read again, ~9
/// bytes per weight) then costs little beside the matmul's 2·M flops per
/// weight. Below, the two-pass tiles would only take budget from tiles
/// that win (on the H200 at 64 rows they pushed the best one-pass tile out).
pub(super) fn gpu_q4_tiled(op: &Op, device: &Device, base: &Schedule, relax: Relaxation) -> Vec<Cand> {
    let mut out = Vec::new();
    let two_pass = op.bmkn().1 >= GPU_Q4_DEQUANT_ROWS;
    for double_buffer in [true, false] {
        let b = Schedule { cache_read: true, double_buffer, vectorize: 4, split_k: 1, subgroup_reduce: false, ..base.clone() };
        for mut c in gpu_matmul(op, device, &b, relax) {
            c.s.r1 = c.s.r1.next_multiple_of(8);
            let twin = Schedule { dequant_pass: true, ..c.s.clone() };
            if two_pass && twin.check(op, webtune_compiler::Target::Wgsl).is_ok() {
                out.push(Cand { s: twin, ..c.clone() });
                if let Some(g) = c.gpu.as_mut() {
                    g.variant += ONE_PASS_LATER;
                }
            }
            out.push(c);
        }
    }
    out
}

/// How far a one-pass tile's variants are moved back where it has a
/// two-pass twin: past every variant (they run 0 to 4).
const ONE_PASS_LATER: u8 = 8;

/// The fewest invocations a WebGPU subgroup has on this device, where that
/// is certain from its vendor: NVIDIA's warps and Apple's SIMD-groups are 32
/// wide (the H100 reports `subgroupMinSize` 32 through Vulkan). Others are
/// unknown here (AMD runs wave32 or wave64, Intel 8 to 32 lanes), so their
/// spaces reduce in workgroup memory only.
fn subgroup_lanes(device: &Device) -> Option<u32> {
    (device.class == DeviceClass::Gpu && ["nvidia", "apple"].contains(&device.vendor.as_str())).then_some(32)
}

/// Whether this GPU runs f16 arithmetic at least as fast as f32: every
/// hardware GPU (the H200: 1.24× in an FMA-chain probe; phone and laptop
/// GPUs 2×), not the CPU rasterisers (Mesa's lavapipe emulates f16 at 0.32×
/// its f32 rate, measured on the dev machine; SwiftShader has no f16).
pub(super) fn fast_f16(device: &Device) -> bool {
    device.class == DeviceClass::Gpu && !["google", "mesa", "unknown"].contains(&device.vendor.as_str())
}

/// A tile's schedule: 4-wide vectors only where `y0` holds whole ones.
fn with_vector(mut s: Schedule, y0: u32) -> Schedule {
    if s.vectorize == 4 && !y0.is_multiple_of(4) {
        s.vectorize = 1;
    }
    s
}
