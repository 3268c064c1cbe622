//! The compiler's front door: op + target + schedule → validated kernel bytes
//! and the metadata JSON of the kernel ABI.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::generate;
use crate::op::{Op, OpError};
use crate::schedule::{Schedule, ScheduleError, Target};
use crate::wasm::{self, LowerOptions, WasmOptions};

/// Version of the kernel ABI described in docs/kernel-abi.md. Bumped on any change a
/// host could notice.
pub const ABI_VERSION: u32 = 1;
/// The ABI of threaded Wasm kernels: version 1 plus a shared memory import
/// and the `kernel_part` export. Single-threaded kernels stay at version 1.
pub const ABI_THREADED: u32 = 2;
/// The ABI of WGSL kernels with several passes (a schedule with
/// `k_slices` > 1 or `dequant_pass`): version 1 plus a scratch storage buffer at
/// `@group(1) @binding(0)` of `scratch_bytes`, and `passes` to dispatch in
/// order. One-pass WGSL kernels stay at version 1.
pub const ABI_PASSES: u32 = 3;

/// One argument in the metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgMeta {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u32>,
}

/// The metadata JSON written beside every kernel (`kernel.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelMeta {
    pub abi: u32,
    pub op: String,
    pub shape: Vec<u32>,
    pub target: Target,
    pub config: Schedule,
    pub args: Vec<ArgMeta>,
    pub flops: u64,
    /// Lower-case hex SHA-256 of the kernel bytes.
    pub sha256: String,
    /// Wasm: the exported function. WGSL: the entry point.
    pub entry: String,
    /// Wasm: the least number of 64 KiB pages the imported memory must have
    /// (enough to hold every argument, laid end to end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_pages_min: Option<u32>,
    /// Wasm: bytes of scratch space the kernel needs; when non-zero, `kernel`
    /// takes its offset as one more parameter after the arguments. WGSL
    /// (ABI 3): bytes of the scratch storage buffer the host binds at
    /// `@group(1) @binding(0)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_bytes: Option<u32>,
    /// Wasm, threaded kernels only (ABI 2): the number of parts, each run
    /// by `kernel_part(args..., [scratch], part)` on any thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Wasm, threaded kernels only: each part's `[start, end)` along the
    /// split dimension (`config.split`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<[u32; 2]>>,
    /// Wasm, threaded kernels with scratch: part `p`'s scratch starts
    /// `p · part_scratch_bytes` into the scratch area.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_scratch_bytes: Option<u32>,
    /// WGSL: `@workgroup_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workgroup_size: Option<[u32; 3]>,
    /// WGSL: workgroup counts to dispatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<[u32; 3]>,
    /// WGSL, ABI 3 only: every pass in order (the first is `entry` with
    /// `workgroup_size` and `dispatch`), each one dispatch on the same
    /// bindings plus the scratch buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passes: Option<Vec<crate::wgsl::Pass>>,
    /// WGSL: present when the kernel uses subgroup operations (its text then
    /// starts with `enable subgroups;`): the host must request the adapter's
    /// `subgroups` feature, and run the kernel only where every subgroup has
    /// at least this many invocations (the adapter's `subgroupMinSize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_subgroup_size: Option<u32>,
}

impl KernelMeta {
    /// The op this metadata describes.
    pub fn parsed_op(&self) -> Result<Op, OpError> {
        Op::from_name(&self.op, &self.shape)
    }
}

/// A compiled kernel: its bytes (Wasm binary or WGSL text) and metadata.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub bytes: Vec<u8>,
    pub meta: KernelMeta,
}

/// Why a kernel could not be compiled.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CompileError {
    /// The schedule does not fit the op or target: a user error.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The WGSL backend failed on a valid schedule: a compiler bug. Its
    /// own error is this one's source.
    #[error("internal compiler error in the WGSL backend")]
    Wgsl(#[source] crate::wgsl::WgslError),
    /// The Wasm backend failed on a valid schedule: a compiler bug.
    #[error("internal compiler error: {0}")]
    Internal(String),
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Pages needed to hold all arguments of `op` and `scratch` bytes end to end,
/// each 16-byte aligned.
pub fn memory_pages_min(op: &Op, scratch: u32) -> u32 {
    let bytes: u64 = op.args().iter().map(|a| a.bytes().next_multiple_of(16)).sum::<u64>() + scratch as u64;
    bytes.div_ceil(wasm::PAGE) as u32
}

/// Compiles `op` for `target` under `schedule`.
pub fn compile(op: &Op, target: Target, schedule: &Schedule) -> Result<Kernel, CompileError> {
    schedule.check(op, target)?;
    let parts = if target == Target::Wasm { crate::parts::parts(op, schedule) } else { Vec::new() };
    let mut part_scratch = None;
    let mut passes = None;
    let (bytes, entry, memory_pages_min, scratch_bytes, workgroup_size, dispatch) = match target {
        Target::Wasm => {
            let func = generate::cpu(op, schedule);
            let (_, scratch) = func.scratch_layout();
            let mut opts = WasmOptions {
                lower: LowerOptions { relaxed_simd: schedule.relaxed_simd },
                passes: schedule.passes,
                memory_pages_min: memory_pages_min(op, scratch),
            };
            let internal = |e: wasm::WasmError| CompileError::Internal(e.to_string());
            let m = if parts.is_empty() {
                wasm::compile(&func, &opts).map_err(internal)?
            } else {
                // One body per distinct view (at most three: the smaller and
                // larger whole-tile shares, and a last part with a partial tile).
                let mut views = Vec::new();
                let calls: Vec<wasm::PartCall> = parts
                    .iter()
                    .map(|p| {
                        let body = views.iter().position(|v| *v == p.view).unwrap_or_else(|| {
                            views.push(p.view);
                            views.len() - 1
                        });
                        wasm::PartCall { body, offsets: p.offsets.clone() }
                    })
                    .collect();
                let bodies: Vec<_> = views.iter().map(|v| generate::cpu_view(op, schedule, v)).collect();
                let per_part = bodies.iter().map(|b| b.scratch_layout().1.next_multiple_of(16)).max().unwrap_or(0);
                opts.memory_pages_min = memory_pages_min(op, scratch.max(per_part * parts.len() as u32));
                let m = wasm::compile_threaded(&func, &bodies, &calls, &opts).map_err(internal)?;
                part_scratch = (m.part_scratch_bytes > 0).then_some(m.part_scratch_bytes);
                m
            };
            (m.bytes, "kernel".to_string(), Some(opts.memory_pages_min), Some(m.scratch_bytes), None, None)
        }
        Target::Wgsl => {
            let k = crate::wgsl::compile(op, schedule).map_err(CompileError::Wgsl)?;
            if !k.passes.is_empty() {
                passes = Some(k.passes);
            }
            let scratch = (k.scratch_bytes > 0).then(|| u32::try_from(k.scratch_bytes).expect("Schedule::check bounds the scratch"));
            (k.source.into_bytes(), k.entry, None, scratch, Some(k.workgroup_size), Some(k.dispatch))
        }
    };
    let threaded = !parts.is_empty();
    let meta = KernelMeta {
        abi: if threaded {
            ABI_THREADED
        } else if passes.is_some() {
            ABI_PASSES
        } else {
            ABI_VERSION
        },
        op: op.name(),
        shape: op.shape().to_vec(),
        target,
        config: schedule.clone(),
        args: op
            .args()
            .into_iter()
            .map(|a| ArgMeta { name: a.name.to_string(), dtype: a.dtype.name().to_string(), shape: a.shape })
            .collect(),
        flops: op.flops(),
        sha256: sha256_hex(&bytes),
        entry,
        memory_pages_min,
        scratch_bytes,
        threads: threaded.then_some(parts.len() as u32),
        parts: threaded.then(|| parts.iter().map(|p| [p.range.0, p.range.1]).collect()),
        part_scratch_bytes: part_scratch,
        workgroup_size,
        dispatch,
        passes,
        min_subgroup_size: (target == Target::Wgsl && schedule.subgroup_reduce).then_some(schedule.split_k),
    };
    Ok(Kernel { bytes, meta })
}
