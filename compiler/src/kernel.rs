//! The compiler's front door: op + target + schedule → validated kernel bytes
//! and the metadata JSON of the kernel ABI.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::generate;
use crate::op::{Op, OpError};
use crate::schedule::{Schedule, ScheduleError, Target};
use crate::wasm::{self, LowerOptions, WasmOptions};

/// Version of the kernel ABI described in the README. Bumped on any change a
/// host could notice.
pub const ABI_VERSION: u32 = 1;

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
    /// takes its offset as one more parameter after the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_bytes: Option<u32>,
    /// WGSL: `@workgroup_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workgroup_size: Option<[u32; 3]>,
    /// WGSL: workgroup counts to dispatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<[u32; 3]>,
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
    /// The backend failed on a valid schedule: a compiler bug.
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
    let (bytes, entry, memory_pages_min, scratch_bytes, workgroup_size, dispatch) = match target {
        Target::Wasm => {
            let func = generate::cpu(op, schedule);
            let (_, scratch) = func.scratch_layout();
            let opts = WasmOptions {
                lower: LowerOptions { relaxed_simd: schedule.relaxed_simd },
                passes: schedule.passes,
                memory_pages_min: memory_pages_min(op, scratch),
            };
            let m = wasm::compile(&func, &opts).map_err(|e| CompileError::Internal(e.to_string()))?;
            (m.bytes, "kernel", Some(opts.memory_pages_min), Some(m.scratch_bytes), None, None)
        }
        Target::Wgsl => {
            let k = crate::wgsl::compile(op, schedule)?;
            (k.source.into_bytes(), "main", None, None, Some(k.workgroup_size), Some(k.dispatch))
        }
    };
    let meta = KernelMeta {
        abi: ABI_VERSION,
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
        entry: entry.to_string(),
        memory_pages_min,
        scratch_bytes,
        workgroup_size,
        dispatch,
        min_subgroup_size: (target == Target::Wgsl && schedule.subgroup_reduce).then_some(schedule.split_k),
    };
    Ok(Kernel { bytes, meta })
}
