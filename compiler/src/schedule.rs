//! Schedules: how an op's loops are tiled, ordered, unrolled and vectorized.
//!
//! A schedule is plain data, serialized as the `config` of a kernel's
//! metadata. Symbols follow the NNJIT paper's Table 1: `x` runs over the rows
//! of the output (M), `y` over its columns (N) and `r` over the reduction (K).
//! Level 0 is the register tile (one thread on a GPU, one micro-kernel on the
//! CPU), level 1 the cache tile (one workgroup on a GPU, one block of the
//! blocked loop nest on the CPU).
//!
//! [`Schedule::check`] turns every impossible combination into a
//! [`ScheduleError`] naming the field, so that lowering never has to.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::op::{Op, OpKind};

pub mod sizes;

/// Where a kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Wasm,
    Wgsl,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Wasm => "wasm",
            Target::Wgsl => "wgsl",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "wasm" => Ok(Target::Wasm),
            "wgsl" => Ok(Target::Wgsl),
            _ => Err(format!("unknown target `{s}`: expected wasm or wgsl")),
        }
    }
}

/// Order of the three cache-tile loops, outermost first, e.g. `"mnk"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LoopOrder(pub [Dim; 3]);

/// A loop dimension of a matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    M,
    N,
    K,
}

impl LoopOrder {
    pub const MNK: LoopOrder = LoopOrder([Dim::M, Dim::N, Dim::K]);
    pub const KMN: LoopOrder = LoopOrder([Dim::K, Dim::M, Dim::N]);
    pub const NKM: LoopOrder = LoopOrder([Dim::N, Dim::K, Dim::M]);
    pub const ALL: [LoopOrder; 6] = [
        LoopOrder([Dim::M, Dim::N, Dim::K]),
        LoopOrder([Dim::M, Dim::K, Dim::N]),
        LoopOrder([Dim::N, Dim::M, Dim::K]),
        LoopOrder([Dim::N, Dim::K, Dim::M]),
        LoopOrder([Dim::K, Dim::M, Dim::N]),
        LoopOrder([Dim::K, Dim::N, Dim::M]),
    ];
}

impl TryFrom<String> for LoopOrder {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let dims: Vec<Dim> = s
            .chars()
            .map(|c| match c {
                'm' => Ok(Dim::M),
                'n' => Ok(Dim::N),
                'k' => Ok(Dim::K),
                _ => Err(format!("loop order `{s}`: letters must be m, n and k")),
            })
            .collect::<Result<_, _>>()?;
        match dims.as_slice() {
            [a, b, c] if a != b && b != c && a != c => Ok(LoopOrder([*a, *b, *c])),
            _ => Err(format!("loop order `{s}` must name m, n and k once each, e.g. \"mnk\"")),
        }
    }
}

impl From<LoopOrder> for String {
    fn from(o: LoopOrder) -> String {
        o.to_string()
    }
}

impl fmt::Display for LoopOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in self.0 {
            f.write_str(match d {
                Dim::M => "m",
                Dim::N => "n",
                Dim::K => "k",
            })?;
        }
        Ok(())
    }
}

/// The three Wasm passes of NNJIT section 4.3, each switchable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WasmPasses {
    /// Fold constant address terms into the `offset` immediate of loads and stores.
    #[serde(default = "yes")]
    pub offset: bool,
    /// Combine `f32.load` + `f32x4.splat` into `v128.load32_splat`.
    #[serde(default = "yes")]
    pub load_splat: bool,
    /// Keep a loaded value in a local (`local.tee`) instead of loading it again.
    #[serde(default = "yes")]
    pub tee: bool,
}

fn yes() -> bool {
    true
}

impl Default for WasmPasses {
    fn default() -> Self {
        WasmPasses { offset: true, load_splat: true, tee: true }
    }
}

impl WasmPasses {
    pub const NONE: WasmPasses = WasmPasses { offset: false, load_splat: false, tee: false };
}

/// A loop of the register tile that may be unrolled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnrollLoop {
    /// The rows of the register tile.
    X0,
    /// The columns of the register tile.
    Y0,
    /// The reduction steps of one register-tile iteration.
    R0,
}

/// The schedule of one kernel. See the module docs for the symbols.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Register tile: rows of C per micro-kernel (per thread on a GPU).
    pub x0: u32,
    /// Register tile: columns of C per micro-kernel (per thread on a GPU).
    pub y0: u32,
    /// Reduction steps per register-tile iteration (the unroll factor of K).
    pub r0: u32,
    /// Cache tile: rows of C per block (per workgroup on a GPU).
    pub x1: u32,
    /// Cache tile: columns of C per block (per workgroup on a GPU).
    pub y1: u32,
    /// Cache tile: reduction steps per block (the K slab of a workgroup).
    pub r1: u32,
    /// Order of the cache-tile loops, outermost first (CPU only).
    #[serde(default = "default_order")]
    pub order: LoopOrder,
    /// Run the register tiles of a cache tile column by column (`true`) or row by row.
    #[serde(default)]
    pub inner_n_first: bool,
    /// Loops of the register tile that are unrolled. `x0` and `y0` go together:
    /// unrolled, the tile lives in registers (locals); rolled, it lives in memory.
    #[serde(default = "default_unroll")]
    pub unroll: Vec<UnrollLoop>,
    /// SIMD width along the columns: 1 (scalar) or 4 (`f32x4` / `vec4<f32>`).
    pub vectorize: u32,
    /// Copy each cache tile of the second operand into a private buffer before use
    /// (on WGSL: stage K slabs of both operands in workgroup memory; for
    /// matmul_q4 this picks the tiled family, whose B tile is dequantised
    /// once per workgroup, over the matrix-vector one).
    #[serde(default)]
    pub cache_read: bool,
    /// Use relaxed-SIMD fused multiply-add (`f32x4.relaxed_madd`) on Wasm.
    #[serde(default)]
    pub relaxed_simd: bool,
    /// The Wasm passes to run.
    #[serde(default)]
    pub passes: WasmPasses,
    /// GPU: load the next K slab into a second workgroup buffer while computing on the first
    /// (matmul, with cache_read); for matmul_q4, load the next K step's weights and scales
    /// into a second set of registers while computing on the first.
    #[serde(default)]
    pub double_buffer: bool,
    /// GPU: number of threads that share one output along K: the
    /// matrix-vector `matmul_q4` kernels' lanes, or the staged matmul's
    /// groups of threads, each taking every split_k-th K slab, whose partial
    /// tiles are added in workgroup memory in a fixed order.
    #[serde(default = "one")]
    pub split_k: u32,
    /// GPU: reduce split-K partial sums with subgroup operations instead of workgroup memory.
    #[serde(default)]
    pub subgroup_reduce: bool,
    /// WGSL, `+f16` matmul, batch_matmul and tiled (`cache_read`)
    /// matmul_q4, not with GELU: f16 arithmetic. Registers,
    /// workgroup tiles and every multiply-add are f16, so the sum over K
    /// accumulates in f16 (docs/ops.md, "Tolerance"); off,
    /// an f16 op loads into f32 and accumulates in f32. Absent when false,
    /// so no other schedule's JSON changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub f16_acc: bool,
    /// WGSL, staged (`cache_read`) matmul, batch_matmul and tiled
    /// matmul_q4: the number of workgroups one output tile's K slabs are
    /// divided among (split-K across workgroups). Each slice writes its
    /// partial tile to the host's scratch buffer (f32, or f16 under
    /// `f16_acc`), and a second pass, `reduce`, adds the slices in slice
    /// order (a fixed order: the result
    /// does not depend on timing) and applies the epilogue. It fills the
    /// GPU where M·N makes fewer workgroups than it has cores. Absent when
    /// 1, so no other schedule's JSON changes.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub k_slices: u32,
    /// WGSL, tiled (`cache_read`) matmul_q4: unpack the packed weights once,
    /// in a first pass (`unpack`), into a dense `K × N` matrix in the
    /// host's scratch buffer (f32; f16 for an `+f16` op unless `k_slices`
    /// partial sums in f32 follow them there), which the
    /// second pass (`main`) reads as the plain matmul reads B. It trades
    /// `K·N` floats written and read again for the per-workgroup unpacking
    /// of the one-pass kernel: worth it where M is large enough that each
    /// weight would be unpacked by many workgroups. Absent when false, so
    /// no other schedule's JSON changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dequant_pass: bool,
    /// Wasm, `matmul_q4_1` and `matmul_q8_0` with `vectorize` 4 in
    /// registers (not `cache_read`): the kernel first quantises its rows of
    /// A into scratch, per block of 32 values, to 16-bit integers (scale
    /// `s = max|x|/32767`, `q = round(x/s)`), then sums the products of a
    /// block's weights and quantised values exactly in `i32`
    /// (`i32x4.dot_i16x8_s`) and scales once per block in f32. Its output
    /// is checked to the wider tolerance that the rounding of A implies
    /// (docs/ops.md, "Tolerance"). Its `y0` columns of W each have a vector
    /// accumulator of their own, so `y0` need not be a multiple of 4.
    /// Absent when false, so no other schedule's JSON changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quantize_a: bool,
    /// Wasm: the number of parts the output is split into, one per thread
    /// (1: a single-threaded kernel, byte-identical to one from before
    /// threads existed). See [`crate::parts`].
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub threads: u32,
    /// Wasm, with `threads > 1`: the dimension the parts divide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
}

/// The dimension a threaded kernel's parts divide, each part a whole number
/// of cache tiles of it (`x1` rows, `y1` columns, or one batch entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Rows of the output (M): each part reads its own rows of A.
    M,
    /// Columns of the output (N): each part reads its own columns of B.
    N,
    /// Entries of a `batch_matmul`'s batch.
    Batch,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::M => "m",
            Split::N => "n",
            Split::Batch => "batch",
        }
    }
}

/// Most threads (parts) one kernel is split into.
pub const MAX_THREADS: u32 = 16;

fn default_order() -> LoopOrder {
    LoopOrder::MNK
}
fn default_unroll() -> Vec<UnrollLoop> {
    vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0]
}
fn one() -> u32 {
    1
}
fn is_one(v: &u32) -> bool {
    *v == 1
}

/// A schedule that cannot be compiled for the op and target it was given with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("schedule field `{field}`: {message}")]
pub struct ScheduleError {
    pub field: &'static str,
    pub message: String,
}

fn err(field: &'static str, message: impl Into<String>) -> ScheduleError {
    ScheduleError { field, message: message.into() }
}

/// Largest register tile (x0 · y0) accepted: past this the unrolled code only
/// grows while every engine spills.
pub const MAX_REGISTER_TILE: u32 = 256;
/// WebGPU's default `maxComputeInvocationsPerWorkgroup`: what every browser grants.
pub const MAX_WORKGROUP_THREADS: u32 = 256;
/// WebGPU's default `maxComputeWorkgroupStorageSize`.
pub const MAX_WORKGROUP_BYTES: u32 = 16384;
/// Largest reduction unroll.
pub const MAX_R0: u32 = 64;
/// Most outputs one thread computes in the WGSL `matmul_q4` kernel.
pub const MAX_Q4_OUTPUTS_PER_THREAD: u32 = 8;

/// The largest split_k a subgroup reduction takes: WebGPU adapters'
/// subgroups have 4 to 128 invocations, and the kernel needs one output's
/// split_k lanes inside one subgroup (the tuner checks the device's
/// `subgroupMinSize`).
pub const MAX_SUBGROUP_SPLIT: u32 = 64;
/// Largest cache-tile edge.
pub const MAX_TILE: u32 = 1 << 16;
/// The most workgroups one output tile's K may be split among (`k_slices`).
pub const MAX_K_SLICES: u32 = 16;
/// The largest scratch buffer a WGSL kernel asks for: WebGPU's default
/// `maxStorageBufferBindingSize` (128 MiB).
pub const MAX_SCRATCH_BYTES: u32 = 128 << 20;

impl Schedule {
    /// The portable default: a schedule that is reasonable on every device.
    /// It is what a fresh server hands out before any device has tuned.
    pub fn default_for(op: &Op, target: Target) -> Schedule {
        let base = Schedule {
            x0: 4,
            y0: 8,
            r0: 4,
            x1: 64,
            y1: 256,
            r1: 256,
            order: LoopOrder::MNK,
            inner_n_first: false,
            unroll: default_unroll(),
            vectorize: 4,
            cache_read: false,
            relaxed_simd: false,
            passes: WasmPasses::default(),
            double_buffer: false,
            split_k: 1,
            subgroup_reduce: false,
            f16_acc: false,
            k_slices: 1,
            dequant_pass: false,
            quantize_a: false,
            threads: 1,
            split: None,
        };
        match (target, op.kind()) {
            (Target::Wasm, OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0) => {
                Schedule { x0: 1, y0: 4, r0: 32, x1: 1, y1: 64, r1: 4096, ..base }
            }
            (Target::Wasm, _) => base,
            (Target::Wgsl, OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0) => {
                Schedule { x0: 1, y0: 1, r0: 32, x1: 1, y1: 8, r1: 32, split_k: 32, vectorize: 1, cache_read: false, ..base }
            }
            (Target::Wgsl, _) => Schedule { x0: 4, y0: 4, r0: 4, x1: 64, y1: 64, r1: 16, cache_read: true, ..base },
        }
    }

    pub fn unrolls(&self, l: UnrollLoop) -> bool {
        self.unroll.contains(&l)
    }

    /// Whether the register tile is kept in registers (x0 and y0 unrolled).
    pub fn tile_in_registers(&self) -> bool {
        self.unrolls(UnrollLoop::X0)
    }

    /// The K loop of the WGSL `matmul_q4` kernel over a reduction of `k`:
    /// its whole steps (each `split_k` threads × r0/(8·vectorize) units of
    /// `vectorize` packed words) and the units left after them, which a
    /// guarded step takes.
    pub fn q4_gpu_steps(&self, k: u32) -> (u32, u32) {
        self.block_gpu_steps(k, 8)
    }

    /// [`Schedule::q4_gpu_steps`] for any of the block-quantised ops
    /// (`matmul_q4`, `matmul_q4_1`, `matmul_q8_0`), whose packed words hold
    /// 8 or 4 values of K.
    pub fn matvec_steps(&self, op: &Op) -> (u32, u32) {
        self.block_gpu_steps(op.bmkn().2, op.kind().values_per_word())
    }

    /// Workgroup memory of the WGSL matrix-vector kernel of a block-quantised
    /// op, bytes: the split-K partial sums (twice under `+swiglu`) where
    /// they reduce in workgroup memory, `+rms_norm`'s sums of squares,
    /// one float a thread, and `+merge`'s merged rows and part weights.
    pub fn matvec_workgroup_bytes(&self, op: &Op) -> u32 {
        let red = if self.split_k > 1 && !self.subgroup_reduce { self.x0 * self.y1 * self.split_k * 4 } else { 0 };
        let norm = if op.epilogue().norm { self.y1 / self.y0 * self.split_k * 4 } else { 0 };
        // +merge: the merged rows of A, and each part's weight.
        let merge = op.merge_parts().map_or(0, |(h, c)| self.x0 * (op.bmkn().2 + h * c) * 4);
        red * op.weight_rows_per_output() + norm + merge
    }

    fn block_gpu_steps(&self, k: u32, per_word: u32) -> (u32, u32) {
        let units = k / per_word / self.vectorize;
        let per_step = self.split_k * (self.r0 / (per_word * self.vectorize)).max(1);
        (units / per_step, units % per_step)
    }

    /// Checks that the schedule can be compiled for `op` on `target`.
    pub fn check(&self, op: &Op, target: Target) -> Result<(), ScheduleError> {
        for (field, v) in [("x0", self.x0), ("y0", self.y0), ("r0", self.r0), ("x1", self.x1), ("y1", self.y1), ("r1", self.r1)] {
            if v == 0 {
                return Err(err(field, "must be at least 1"));
            }
            if v > MAX_TILE {
                return Err(err(field, format!("{v} exceeds the largest tile edge {MAX_TILE}")));
            }
        }
        if self.vectorize != 1 && self.vectorize != 4 {
            return Err(err("vectorize", format!("must be 1 or 4, got {}", self.vectorize)));
        }
        if self.x0 * self.y0 > MAX_REGISTER_TILE {
            return Err(err("y0", format!("register tile x0·y0 = {} exceeds {MAX_REGISTER_TILE}", self.x0 * self.y0)));
        }
        if self.r0 > MAX_R0 && !op.kind().block_quantized() {
            return Err(err("r0", format!("{} exceeds the largest reduction unroll {MAX_R0}", self.r0)));
        }
        for (field, lo, hi, lo_name) in [("x1", self.x0, self.x1, "x0"), ("y1", self.y0, self.y1, "y0"), ("r1", self.r0, self.r1, "r0")] {
            if hi % lo != 0 {
                return Err(err(field, format!("{hi} must be a multiple of {lo_name} = {lo}")));
            }
        }
        let mut seen = Vec::new();
        for l in &self.unroll {
            if seen.contains(l) {
                return Err(err("unroll", format!("{l:?} is listed twice")));
            }
            seen.push(*l);
        }
        if self.unrolls(UnrollLoop::X0) != self.unrolls(UnrollLoop::Y0) {
            return Err(err("unroll", "x0 and y0 are unrolled together: they form one register tile"));
        }
        if self.split_k == 0 {
            return Err(err("split_k", "must be at least 1"));
        }
        self.check_threads(op, target)?;
        match target {
            Target::Wasm => self.check_wasm(op),
            Target::Wgsl => self.check_wgsl(op),
        }
    }

    fn check_threads(&self, op: &Op, target: Target) -> Result<(), ScheduleError> {
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(err("threads", format!("must be from 1 to {MAX_THREADS}, got {}", self.threads)));
        }
        if self.threads == 1 {
            return match self.split {
                Some(_) => Err(err("split", "splits a threaded kernel's parts: leave it out with threads = 1")),
                None => Ok(()),
            };
        }
        if target != Target::Wasm {
            return Err(err("threads", "is a Wasm setting: a WGSL kernel's threads are its workgroups"));
        }
        if op.kind() == OpKind::MatmulQ4 {
            return Err(err("threads", "matmul_q4 kernels run on one thread (use 1)"));
        }
        let Some(split) = self.split else {
            return Err(err("split", "a threaded kernel needs the dimension its parts divide: \"m\", \"n\" or \"batch\""));
        };
        if split == Split::Batch && op.kind() != OpKind::BatchMatmul {
            return Err(err("split", "\"batch\" splits a batch_matmul's batch; this op has none"));
        }
        let (_, extent, unit) = self.split_extent(op).expect("threads > 1 with a split");
        let units = extent.div_ceil(unit);
        if units < self.threads {
            return Err(err(
                "threads",
                format!(
                    "{} parts of {} = {extent} in whole tiles of {unit}: there are only {units} tiles, so some part would be empty",
                    self.threads,
                    split.name()
                ),
            ));
        }
        Ok(())
    }

    /// The extent of the split dimension and its part unit, for a threaded schedule.
    pub fn split_extent(&self, op: &Op) -> Option<(Split, u32, u32)> {
        let split = self.split.filter(|_| self.threads > 1)?;
        let (batch, m, _, n) = op.bmkn();
        Some(match split {
            Split::M => (split, m, self.x1),
            Split::N => (split, n, self.y1),
            Split::Batch => (split, batch, 1),
        })
    }

    fn check_wasm(&self, op: &Op) -> Result<(), ScheduleError> {
        // A quantize_a kernel's y0 counts columns of W, each with a vector accumulator of its own.
        if self.vectorize == 4 && !self.y0.is_multiple_of(4) && !self.quantize_a {
            return Err(err("y0", format!("{} must be a multiple of vectorize = 4", self.y0)));
        }
        if self.double_buffer {
            return Err(err("double_buffer", "is a GPU setting; Wasm kernels have no workgroup memory"));
        }
        if self.split_k != 1 || self.subgroup_reduce {
            return Err(err("split_k", "is a GPU setting; use 1 for Wasm"));
        }
        if self.f16_acc {
            return Err(err("f16_acc", "is a WGSL setting (Wasm has no f16 arithmetic)"));
        }
        if self.k_slices != 1 {
            return Err(err("k_slices", "is a WGSL setting (Wasm kernels split across threads: see threads); use 1"));
        }
        if self.dequant_pass {
            return Err(err("dequant_pass", "is a WGSL setting (the Wasm matmul_q4 kernel unpacks in registers); use false"));
        }
        if op.dtype() == crate::op::Dtype::F16 {
            return Err(err(
                "target",
                format!("{} has WGSL kernels only: Wasm has no f16 arithmetic (use wgsl, or the f32 op)", op.name()),
            ));
        }
        if op.kind().block_quantized() && !op.epilogue().is_none() {
            return Err(err(
                "target",
                format!("{} has WGSL kernels only (a decoder's WebGPU step; on Wasm run the steps it joins)", op.name()),
            ));
        }
        if op.kind() == OpKind::MatmulI16 {
            if self.vectorize != 4 {
                return Err(err("vectorize", "matmul_i16 kernels are vector kernels: use 4"));
            }
            if !self.tile_in_registers() {
                return Err(err("unroll", "matmul_i16 keeps its integer register tile in locals: list x0 and y0"));
            }
        }
        if self.quantize_a {
            if !matches!(op.kind(), OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0) {
                return Err(err(
                    "quantize_a",
                    format!("quantises the activations of matmul_q4_1 and matmul_q8_0; {} has no such kernel (use false)", op.name()),
                ));
            }
            if self.vectorize != 4 || self.cache_read {
                return Err(err(
                    "quantize_a",
                    "is a kernel of 16-bit integer dot products in registers: it needs vectorize 4 and no cache_read",
                ));
            }
        }
        if op.kind().block_quantized() {
            let name = op.kind().name();
            if !self.r0.is_multiple_of(32) {
                return Err(err("r0", format!("{} must be a multiple of 32 for {name} (one scale block)", self.r0)));
            }
            if self.r0 > 256 {
                return Err(err("r0", format!("{} exceeds 256 for {name}", self.r0)));
            }
        }
        Ok(())
    }

    fn check_wgsl(&self, op: &Op) -> Result<(), ScheduleError> {
        if op.kind() == OpKind::MatmulI16 {
            return Err(err("target", "matmul_i16 has Wasm kernels only: WGSL has no 16-bit integer dot product (use wasm)"));
        }
        if self.f16_acc {
            if op.dtype() != crate::op::Dtype::F16 {
                return Err(err("f16_acc", format!("needs an f16 op (e.g. {}+f16)", op.name())));
            }
            if op.kind().block_quantized() && !self.cache_read {
                return Err(err(
                    "f16_acc",
                    "the matrix-vector matmul_q4 kernel unpacks its weights through f32 bit patterns: f16 arithmetic is for its tiled family (cache_read), matmul and batch_matmul",
                ));
            }
            if op.epilogue().act == crate::op::Activation::Gelu {
                return Err(err(
                    "f16_acc",
                    "GELU's erf loses about 7 f16 ulps in f16 arithmetic: use f32 arithmetic (f16_acc false) with +gelu",
                ));
            }
        }
        if self.relaxed_simd {
            return Err(err("relaxed_simd", "is a Wasm setting"));
        }
        if self.quantize_a {
            return Err(err("quantize_a", "is a Wasm setting (WGSL has no 16-bit integer dot product); use false"));
        }
        if !self.tile_in_registers() {
            return Err(err(
                "unroll",
                "the WGSL backend keeps the register tile in registers: list x0 and y0 (a tile in an indexed array runs ~20x slower)",
            ));
        }
        if self.subgroup_reduce {
            if !op.kind().block_quantized() {
                return Err(err(
                    "subgroup_reduce",
                    "reduces the split-K sums of matmul_q4, matmul_q4_1 and matmul_q8_0; matmul on WGSL has none (use false)",
                ));
            }
            if !self.split_k.is_power_of_two() || !(2..=MAX_SUBGROUP_SPLIT).contains(&self.split_k) {
                return Err(err(
                    "subgroup_reduce",
                    format!(
                        "needs split_k a power of two from 2 to {MAX_SUBGROUP_SPLIT} (one output's lanes in one subgroup), got {}",
                        self.split_k
                    ),
                ));
            }
        }
        let q4_matvec = op.kind().block_quantized() && !self.cache_read;
        let name = op.kind().name();
        let vpw = op.kind().values_per_word();
        let (threads, wg_bytes) = if q4_matvec {
            if !self.r0.is_multiple_of(vpw) {
                return Err(err("r0", format!("{} must be a multiple of {vpw} for {name} (one packed word)", self.r0)));
            }
            if self.y0 > MAX_Q4_OUTPUTS_PER_THREAD {
                return Err(err("y0", format!("{} outputs per thread: at most {MAX_Q4_OUTPUTS_PER_THREAD} for {name} on WGSL", self.y0)));
            }
            if self.x1 != self.x0 {
                return Err(err("x1", format!("must equal x0 = {} for {name} on WGSL (rows per workgroup)", self.x0)));
            }
            if self.vectorize == 4 && !self.r0.is_multiple_of(4 * vpw) {
                return Err(err(
                    "r0",
                    format!("{} must be a multiple of {} with vectorize 4 for {name} (four packed words per load)", self.r0, 4 * vpw),
                ));
            }
            if self.double_buffer {
                // Register double buffering prefetches the next K step: it
                // needs a next step.
                let (_, _, k, _) = op.bmkn();
                let (steps, _) = self.matvec_steps(op);
                if steps < 2 {
                    return Err(err(
                        "double_buffer",
                        format!(
                            "prefetches the next K step of {name}: K = {k} makes {steps} whole step(s) of split_k · r0 = {} values; use false or a smaller r0 / split_k",
                            self.split_k * self.r0.max(vpw * self.vectorize)
                        ),
                    ));
                }
            }
            (self.y1 / self.y0 * self.split_k, self.matvec_workgroup_bytes(op))
        } else {
            if op.kind().block_quantized() && !op.epilogue().is_none() {
                return Err(err("cache_read", format!("{} has the matrix-vector kernel only on WGSL: use cache_read false", op.name())));
            }
            if op.kind().block_quantized() {
                // The tiled family: the matmul kernel, B staged from the
                // packed weights one word (8 or 4 values of K) at a time.
                if self.subgroup_reduce {
                    return Err(err("subgroup_reduce", format!("tiled {name} (cache_read) has no split-K sums to reduce: use false")));
                }
                if !self.r1.is_multiple_of(vpw) {
                    return Err(err(
                        "r1",
                        format!("{} must be a multiple of {vpw} for tiled {name} (whole packed words per slab)", self.r1),
                    ));
                }
                if self.r0 > MAX_R0 {
                    return Err(err("r0", format!("{} exceeds the largest reduction unroll {MAX_R0}", self.r0)));
                }
            }
            if self.split_k != 1 && !self.cache_read {
                return Err(err("split_k", "splits the staged K slabs among groups of threads: it needs cache_read (or use 1)"));
            }
            if self.vectorize == 4 && !self.y0.is_multiple_of(4) {
                return Err(err("y0", format!("{} must be a multiple of vectorize = 4", self.y0)));
            }
            if self.double_buffer && !self.cache_read {
                return Err(err("double_buffer", "needs cache_read: it double-buffers the workgroup-memory tiles"));
            }
            self.check_k_slices(op)?;
            self.check_dequant_pass(op)?;
            ((self.x1 / self.x0) * (self.y1 / self.y0) * self.split_k, sizes::workgroup_bytes(self))
        };
        if threads > MAX_WORKGROUP_THREADS {
            return Err(err(
                "x1",
                format!("the workgroup would have {threads} threads; WebGPU's default limit is {MAX_WORKGROUP_THREADS}"),
            ));
        }
        if wg_bytes > MAX_WORKGROUP_BYTES {
            return Err(err(
                "r1",
                format!("the workgroup would use {wg_bytes} bytes of workgroup memory; WebGPU's default limit is {MAX_WORKGROUP_BYTES}"),
            ));
        }
        if q4_matvec && self.k_slices != 1 {
            return Err(err("k_slices", "splits the staged kernel's K slabs among workgroups: it needs cache_read (or use 1)"));
        }
        if q4_matvec && self.dequant_pass {
            return Err(err("dequant_pass", "feeds the tiled matmul_q4 kernel: it needs cache_read (or use false)"));
        }
        let (batch, m, _, n) = op.bmkn();
        let groups = if q4_matvec {
            [n.div_ceil(self.y1), m.div_ceil(self.x0), 1]
        } else {
            [n.div_ceil(self.y1), m.div_ceil(self.x1), batch * self.k_slices]
        };
        if groups.iter().any(|&g| g > 65535) {
            return Err(err("y1", format!("the dispatch would need {groups:?} workgroups; WebGPU allows 65535 per dimension")));
        }
        Ok(())
    }

    /// The rules of `k_slices` (WGSL, staged kernels).
    fn check_k_slices(&self, op: &Op) -> Result<(), ScheduleError> {
        let ks = self.k_slices;
        if ks == 1 {
            return Ok(());
        }
        if ks == 0 || ks > MAX_K_SLICES {
            return Err(err("k_slices", format!("{ks} is outside 1..={MAX_K_SLICES}")));
        }
        if !self.cache_read {
            return Err(err("k_slices", "splits the staged kernel's K slabs among workgroups: it needs cache_read (or use 1)"));
        }
        let (_, _, k, _) = op.bmkn();
        let slabs = k.div_ceil(self.r1);
        let per = sizes::slice_slabs(k, self);
        if (ks - 1) * per >= slabs {
            return Err(err(
                "k_slices",
                format!(
                    "K = {k} makes {slabs} slab(s) of r1 = {}, in slices of {per} (whole rounds of split_k = {}): {ks} slices would leave the last empty; use fewer",
                    self.r1, self.split_k
                ),
            ));
        }
        let what = if self.dequant_pass { "the unpacked weights and the partial sums" } else { "the partial sums" };
        self.check_scratch(op, "k_slices", what)
    }

    /// That the kernel's scratch buffer (all of it: the unpacked weights
    /// and the partial sums) fits WebGPU's default storage binding limit;
    /// else an error on `field`, which asks for `what`.
    fn check_scratch(&self, op: &Op, field: &'static str, what: &str) -> Result<(), ScheduleError> {
        let bytes = sizes::scratch_bytes(op, self);
        if bytes > MAX_SCRATCH_BYTES as u64 {
            return Err(err(
                field,
                format!("{what} would need {bytes} bytes of scratch; WebGPU's default storage binding limit is {MAX_SCRATCH_BYTES}"),
            ));
        }
        Ok(())
    }

    /// The rules of `dequant_pass` (WGSL, tiled matmul_q4).
    fn check_dequant_pass(&self, op: &Op) -> Result<(), ScheduleError> {
        if !self.dequant_pass {
            return Ok(());
        }
        if op.kind() != OpKind::MatmulQ4 {
            return Err(err("dequant_pass", format!("unpacks matmul_q4's weights only; {} has no unpack pass (use false)", op.name())));
        }
        self.check_scratch(op, "dequant_pass", "the unpacked weights")?;
        let groups = sizes::unpack_launch(op).1;
        if groups.iter().any(|&g| g > 65535) {
            return Err(err(
                "dequant_pass",
                format!("the unpack pass would need {groups:?} workgroups; WebGPU allows 65535 per dimension"),
            ));
        }
        Ok(())
    }

    /// Parses a schedule from JSON, with errors that name the field.
    pub fn from_json(text: &str) -> Result<Schedule, String> {
        serde_json::from_str(text).map_err(|e| format!("schedule JSON: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mm() -> Op {
        Op::parse("matmul", "64,64,64").unwrap()
    }

    #[test]
    fn defaults_are_valid() {
        for kind in OpKind::ALL {
            let op = Op::new(kind, if kind == OpKind::BatchMatmul { &[2, 64, 64, 64] } else { &[64, 64, 64] }).unwrap();
            for t in [Target::Wasm, Target::Wgsl] {
                let checked = Schedule::default_for(&op, t).check(&op, t);
                if kind.runs_on(t) {
                    checked.unwrap();
                } else {
                    assert_eq!(checked.unwrap_err().field, "target", "{kind} on {t:?}");
                }
                if let Ok(half) = op.clone().with_dtype(crate::op::Dtype::F16) {
                    let checked = Schedule::default_for(&half, t).check(&half, t);
                    assert_eq!(checked.is_ok(), half.runs_on(t), "{} on {t:?}: {checked:?}", half.name());
                }
            }
        }
    }

    #[test]
    fn impossible_schedules_name_the_field() {
        let base = Schedule::default_for(&mm(), Target::Wasm);
        let cases: Vec<(Schedule, &str)> = vec![
            (Schedule { x0: 0, ..base.clone() }, "x0"),
            (Schedule { vectorize: 3, ..base.clone() }, "vectorize"),
            (Schedule { y0: 6, y1: 24, ..base.clone() }, "y0"),
            (Schedule { x1: 66, ..base.clone() }, "x1"),
            (Schedule { x0: 32, y0: 16, x1: 64, y1: 64, ..base.clone() }, "y0"),
            (Schedule { unroll: vec![UnrollLoop::X0], ..base.clone() }, "unroll"),
            (Schedule { double_buffer: true, ..base.clone() }, "double_buffer"),
        ];
        for (s, field) in cases {
            let e = s.check(&mm(), Target::Wasm).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    /// `k_slices` is refused, naming the field, wherever it cannot run: on
    /// Wasm, without staging, on the q4 matrix-vector kernel, when the last
    /// slice would get no slab, past WebGPU's storage binding limit and past
    /// the dispatch limit; a schedule without it keeps its JSON.
    #[test]
    fn k_slices_where_it_cannot_run() {
        let op = Op::parse("matmul", "64,512,64").unwrap();
        let gpu = Schedule { cache_read: true, r0: 4, r1: 8, ..Schedule::default_for(&op, Target::Wgsl) };
        gpu.check(&op, Target::Wgsl).unwrap();
        Schedule { k_slices: 4, ..gpu.clone() }.check(&op, Target::Wgsl).unwrap();
        let q4 = Op::parse("matmul_q4", "1,512,64").unwrap();
        let big = Op::parse("matmul", "2048,64,8192").unwrap();
        let cases: Vec<(&Op, Target, Schedule)> = vec![
            (&op, Target::Wasm, Schedule { k_slices: 2, ..Schedule::default_for(&op, Target::Wasm) }),
            (&op, Target::Wgsl, Schedule { k_slices: 2, cache_read: false, ..gpu.clone() }),
            (&q4, Target::Wgsl, Schedule { k_slices: 2, ..Schedule::default_for(&q4, Target::Wgsl) }),
            // 64 slabs in slices of ⌈64/15⌉ = 5: the 15th would start at slab 70.
            (&op, Target::Wgsl, Schedule { k_slices: 15, ..gpu.clone() }),
            (&op, Target::Wgsl, Schedule { k_slices: 17, ..gpu.clone() }),
            (&op, Target::Wgsl, Schedule { k_slices: 0, ..gpu.clone() }),
            // 3 slices of 2048 × 8192 f32 partial sums: 192 MiB of scratch.
            (&big, Target::Wgsl, Schedule { k_slices: 3, ..gpu.clone() }),
        ];
        for (op, t, s) in cases {
            let e = s.check(op, t).unwrap_err();
            assert_eq!(e.field, "k_slices", "{} {t:?} {s:?}: {e}", op.name());
        }
        let empty = Schedule { k_slices: 9, ..gpu.clone() };
        assert!(empty.check(&Op::parse("matmul", "64,64,64").unwrap(), Target::Wgsl).is_err(), "8 slabs cannot make 9 slices");
        assert!(!serde_json::to_string(&gpu).unwrap().contains("k_slices"));
        assert!(serde_json::to_string(&Schedule { k_slices: 2, ..gpu }).unwrap().contains("\"k_slices\":2"));
    }

    /// `dequant_pass` is refused, naming the field, wherever it cannot run:
    /// on Wasm, on an op without packed weights, on the q4 matrix-vector
    /// kernel and past WebGPU's storage binding limit (with or without the
    /// slices' partial sums after the weights); a schedule without it keeps
    /// its JSON.
    #[test]
    fn dequant_pass_where_it_cannot_run() {
        let q4 = Op::parse("matmul_q4", "64,512,64").unwrap();
        let tiled = Schedule { cache_read: true, r0: 4, r1: 8, ..Schedule::default_for(&mm(), Target::Wgsl) };
        let two = Schedule { dequant_pass: true, ..tiled.clone() };
        two.check(&q4, Target::Wgsl).unwrap();
        Schedule { k_slices: 4, ..two.clone() }.check(&q4, Target::Wgsl).unwrap();
        // 8192 × 4096 f32 weights are exactly 128 MiB; with partial sums after them, more.
        let at_limit = Op::parse("matmul_q4", "64,8192,4096").unwrap();
        two.check(&at_limit, Target::Wgsl).unwrap();
        let big = Op::parse("matmul_q4", "64,8192,8192").unwrap();
        let plain = mm();
        // Each case with a word its error must say.
        let cases: Vec<(&Op, Target, Schedule, &str)> = vec![
            (&q4, Target::Wasm, Schedule { dequant_pass: true, ..Schedule::default_for(&q4, Target::Wasm) }, "WGSL"),
            (&plain, Target::Wgsl, Schedule { dequant_pass: true, ..tiled.clone() }, "weights"),
            (&q4, Target::Wgsl, Schedule { dequant_pass: true, ..Schedule::default_for(&q4, Target::Wgsl) }, "cache_read"),
            (&big, Target::Wgsl, two.clone(), "scratch"),
            (&at_limit, Target::Wgsl, Schedule { k_slices: 2, ..two.clone() }, "scratch"),
        ];
        for (op, t, s, says) in cases {
            let e = s.check(op, t).unwrap_err();
            assert!(["dequant_pass", "k_slices"].contains(&e.field) && e.to_string().contains(says), "{} {t:?} {s:?}: {e}", op.name());
        }
        assert!(!serde_json::to_string(&tiled).unwrap().contains("dequant_pass"));
        assert!(serde_json::to_string(&two).unwrap().contains("\"dequant_pass\":true"));
    }

    #[test]
    fn json_round_trip_and_unknown_fields() {
        let s = Schedule::default_for(&mm(), Target::Wasm);
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(Schedule::from_json(&text).unwrap(), s);
        let bad = text.replacen("\"x0\"", "\"xx\"", 1);
        assert!(Schedule::from_json(&bad).unwrap_err().contains("xx"));
        let bad_order = text.replace("\"mnk\"", "\"mmk\"");
        assert!(Schedule::from_json(&bad_order).unwrap_err().contains("mmk"));
    }
}
