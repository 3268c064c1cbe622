//! The sizes a schedule implies: workgroup memory, K slabs per slice,
//! scratch bytes, and the `unpack` pass's launch. [`Schedule::check`]
//! bounds them, and the GPU generators (`generate::matmul_gpu`,
//! `generate::q4_gpu`) lay their kernels out by them; they live here, with
//! the schedule, so that the check needs no generator and a generator only
//! reads the schedule (no module circle).

use crate::ir::Elem;
use crate::op::Op;
use crate::schedule::Schedule;

/// The element type of `op`'s float arguments in a kernel: `f16` for an
/// `+f16` op (GPU only), else `f32`.
pub fn float_elem(op: &Op) -> Elem {
    if op.dtype() == crate::op::Dtype::F16 { Elem::F16 } else { Elem::F32 }
}

/// Whether the split-K groups' partial tiles are added in the B tiles (dead
/// after the K loop) rather than in a buffer of their own: where those hold
/// the x1 × y1 outputs.
pub(crate) fn reduce_in_b_tile(s: &Schedule) -> bool {
    s.split_k > 1 && s.split_k * s.r1 >= s.x1
}

/// Bytes of workgroup memory the kernel declares under `s`: the staged
/// tiles of every split-K group (twice with double buffering), and the
/// split-K reduction's buffer where it needs its own.
pub fn workgroup_bytes(s: &Schedule) -> u32 {
    if !s.cache_read {
        return 0;
    }
    let tiles = (s.x1 + s.y1) * s.r1 * 4 * s.split_k;
    let tiles = if s.double_buffer { 2 * tiles } else { tiles };
    let red = if s.split_k > 1 && !reduce_in_b_tile(s) { s.x1 * s.y1 * 4 } else { 0 };
    tiles + red
}

/// K slabs (of r1) in each of the `k_slices` slices: whole rounds of the
/// split-K groups, so that no group's slabs reach into the next slice.
/// Slabs past K (in the last slice) are zero-filled like K's own edge.
pub fn slice_slabs(k: u32, s: &Schedule) -> u32 {
    k.div_ceil(s.r1).div_ceil(s.k_slices).div_ceil(s.split_k) * s.split_k
}

/// Bytes of the host's scratch buffer a kernel needs: matmul_q4's unpacked
/// weights under `dequant_pass` (K × N of [`dequant_elem`]), then the
/// `k_slices` partial outputs (f32, or f16 in f16 arithmetic); 0 for none.
pub fn scratch_bytes(op: &Op, s: &Schedule) -> u64 {
    let (batch, m, _, n) = op.bmkn();
    let size = if s.f16_acc { 2 } else { 4 };
    let partials = if s.k_slices > 1 { size * s.k_slices as u64 * (batch * m * n) as u64 } else { 0 };
    // An element's bytes: 2 for f16, and for every float under f16 arithmetic.
    let weight_size = if dequant_elem(op, s) == Elem::F16 || s.f16_acc { 2 } else { 4 };
    let weights = partial_base(op, s) as u64 * weight_size;
    weights + partials
}

/// The element type of matmul_q4's unpacked weights in scratch under
/// `dequant_pass`: the op's float type, except where they share the
/// buffer with `k_slices` partial sums, which are `f32` (lowered to f16
/// under f16 arithmetic, where every float is f16): there they are `f32`
/// too, so an `+f16` op in f32 arithmetic keeps its weights in f32.
pub fn dequant_elem(op: &Op, s: &Schedule) -> Elem {
    if s.f16_acc || s.k_slices > 1 { Elem::F32 } else { float_elem(op) }
}

/// Where the `k_slices` partial sums start in the scratch buffer, in its
/// elements: after the unpacked weights (`dequant_pass`), else at 0.
pub(crate) fn partial_base(op: &Op, s: &Schedule) -> u32 {
    let (_, _, k, n) = op.bmkn();
    if s.dequant_pass { k * n } else { 0 }
}

/// Threads of an `unpack` workgroup along N, each writing `unpack_width`
/// neighbouring columns.
pub(crate) const UNPACK_COLUMN_THREADS: u32 = 64;
/// Threads of an `unpack` workgroup along K, each unpacking one scale
/// block (32 values of K) of its columns.
pub(crate) const UNPACK_BLOCK_THREADS: u32 = 4;

/// Columns one thread of the `unpack` pass writes: 4 (each row of K one
/// `vec4`) where N is a multiple of 4, else 1.
pub(crate) fn unpack_width(n: u32) -> u32 {
    if n.is_multiple_of(4) { 4 } else { 1 }
}

/// Threads per workgroup and workgroup counts of the `unpack` pass of a
/// tiled matmul_q4 with `dequant_pass`.
pub fn unpack_launch(op: &Op) -> ([u32; 3], [u32; 3]) {
    let (_, _, k, n) = op.bmkn();
    let groups = [(n / unpack_width(n)).div_ceil(UNPACK_COLUMN_THREADS), (k / 32).div_ceil(UNPACK_BLOCK_THREADS), 1];
    ([UNPACK_COLUMN_THREADS * UNPACK_BLOCK_THREADS, 1, 1], groups)
}
