//! The Wasm backend: loop IR → Wasm IR → passes → bytecode, then validation.
//!
//! The module this produces is the Wasm half of the kernel ABI:
//! - it imports one memory, `env.memory`, and nothing else, and defines none;
//! - it exports one function, `kernel`, whose `i32` parameters are the byte
//!   offsets of the op's arguments in ABI order; the call writes the whole output;
//! - if the kernel needs scratch space (`scratch_bytes > 0` in its metadata),
//!   `kernel` takes one more `i32`: the offset of a 16-byte-aligned area of that
//!   many bytes in the same memory, which the call may overwrite.
//!
//! Only Wasm 2.0 (with SIMD) and relaxed SIMD are used: no multi-memory, no
//! threads, so every browser with SIMD can run every kernel.

pub mod lower;
pub mod passes;
pub mod wir;

use wasm_encoder::{
    CodeSection, EntityType, ExportKind, ExportSection, FunctionSection, ImportSection, MemoryType, Module, TypeSection, ValType,
};
use wasmparser::{Validator, WasmFeatures};

use crate::ir::Func;
use crate::ir::verify::{Flavor, VerifyError, verify};
use crate::schedule::WasmPasses;

pub use lower::LowerOptions;

/// Bytes of a Wasm page.
pub const PAGE: u64 = 65536;

/// Options of one Wasm compilation.
#[derive(Clone, Copy, Debug, Default)]
pub struct WasmOptions {
    pub lower: LowerOptions,
    pub passes: WasmPasses,
    /// Minimum pages the imported memory must have.
    pub memory_pages_min: u32,
}

/// Why lowering a function to Wasm failed. Every variant is a compiler bug.
#[derive(Clone, Debug, thiserror::Error)]
pub enum WasmError {
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error("generated Wasm failed validation: {0}")]
    Invalid(String),
}

/// The features every webtune Wasm kernel may use. Validation enables exactly these.
pub fn features() -> WasmFeatures {
    WasmFeatures::WASM2 | WasmFeatures::RELAXED_SIMD
}

/// Validates a module with [`features`].
pub fn validate(bytes: &[u8]) -> Result<(), WasmError> {
    Validator::new_with_features(features()).validate_all(bytes).map(|_| ()).map_err(|e| WasmError::Invalid(e.to_string()))
}

/// A compiled Wasm module.
#[derive(Clone, Debug)]
pub struct WasmModule {
    pub bytes: Vec<u8>,
    /// Bytes of scratch space the kernel needs (see the module docs).
    pub scratch_bytes: u32,
}

/// Verifies, lowers, optimises, encodes and validates `f`.
pub fn compile(f: &Func, opts: &WasmOptions) -> Result<WasmModule, WasmError> {
    let types = verify(f, Flavor::Cpu)?;
    let mut lowered = lower::lower(f, &types, opts.lower);
    passes::pipeline(&mut lowered.func, opts.passes);
    let bytes = encode_module(&lowered, opts.memory_pages_min);
    validate(&bytes)?;
    Ok(WasmModule { bytes, scratch_bytes: lowered.scratch_bytes })
}

fn encode_module(l: &lower::Lowered, memory_pages_min: u32) -> Vec<u8> {
    let wf = &l.func;
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function(vec![ValType::I32; wf.params as usize], vec![]);
    module.section(&types);

    let mut imports = ImportSection::new();
    imports.import(
        "env",
        "memory",
        EntityType::Memory(MemoryType {
            minimum: memory_pages_min as u64,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        }),
    );
    module.section(&imports);

    let mut funcs = FunctionSection::new();
    funcs.function(0);
    module.section(&funcs);

    let mut exports = ExportSection::new();
    exports.export("kernel", ExportKind::Func, 0);
    module.section(&exports);

    // Run-length encode the local declarations.
    let mut locals: Vec<(u32, ValType)> = Vec::new();
    for &t in &wf.locals {
        match locals.last_mut() {
            Some((n, last)) if *last == t => *n += 1,
            _ => locals.push((1, t)),
        }
    }
    let mut body = wasm_encoder::Function::new(locals);
    wir::encode(wf, &mut body);
    let mut code = CodeSection::new();
    code.function(&body);
    module.section(&code);
    module.finish()
}
