//! The WGSL backend (loop IR → WGSL, validated by naga).

use crate::kernel::CompileError;
use crate::op::Op;
use crate::schedule::Schedule;

/// A WGSL kernel and how to dispatch it.
#[derive(Clone, Debug)]
pub struct WgslKernel {
    pub source: String,
    pub workgroup_size: [u32; 3],
    pub dispatch: [u32; 3],
}

pub fn compile(_op: &Op, _s: &Schedule) -> Result<WgslKernel, CompileError> {
    Err(CompileError::Internal("the WGSL backend is not built yet".into()))
}
