//! # webtune-compiler
//!
//! Turns a tensor op plus a [`Schedule`] into a validated in-browser kernel:
//! Wasm bytecode (through [`wasm_encoder`], checked by [`wasmparser`]) or WGSL
//! (checked by naga), in well under a millisecond.
//!
//! The pipeline: [`Op`] + [`Schedule`] → `generate` (schedule → loop IR, [`ir::Func`])
//! → `ir::verify` → backend. The Wasm backend lowers the loop IR to a tree of
//! Wasm instructions (NNJIT Algorithm 1), runs the three web passes (offset
//! load/store, combined `load32_splat`, `local.tee`), encodes and validates.
//!
//! ```
//! use webtune_compiler::{compile, Op, Schedule, Target};
//! let op = Op::parse("matmul", "384,768,768").unwrap();
//! let kernel = compile(&op, Target::Wasm, &Schedule::default_for(&op, Target::Wasm)).unwrap();
//! assert_eq!(kernel.meta.sha256.len(), 64);
//! ```
//!
//! ## What this crate must never do
//! It does no I/O, reads no clock, and knows nothing of HTTP or SQL. An error
//! from a verifier or validator inside it is a compiler bug, never a user error:
//! user errors are caught by [`Op::new`] and [`Schedule::check`] first.

pub mod generate;
pub mod ir;
pub mod kernel;
pub mod op;
pub mod parts;
pub mod reference;
pub mod schedule;
pub mod wasm;
pub mod wgsl;

pub use kernel::{CompileError, Kernel, KernelMeta, compile};
pub use op::{Op, OpError, OpKind};
pub use schedule::{Schedule, ScheduleError, Split, Target, WasmPasses};
