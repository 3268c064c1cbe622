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
//! A threaded kernel (`threads > 1` in its schedule, ABI version 2) differs
//! in three ways only: its memory import is shared (maximum 65536 pages, so
//! any shared memory satisfies it); `kernel` still computes the whole output
//! on the calling thread; and a second export, `kernel_part`, takes the same
//! parameters plus one more `i32`, the part number, and computes that part
//! alone (see [`crate::parts`]). Part `p`'s scratch, when the kernel has
//! scratch, starts `p · part_scratch_bytes` into the scratch area; a part
//! number out of range does nothing.
//!
//! Only Wasm 2.0 (with SIMD) and relaxed SIMD are used, and the threads
//! proposal's shared memory by threaded kernels alone (no atomics: the host
//! synchronises), so every browser with SIMD can run every single-threaded
//! kernel.

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
/// Pages of the largest 32-bit memory (4 GiB): a threaded kernel's maximum.
pub const MAX_PAGES: u64 = 65536;

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

/// The features every single-threaded webtune Wasm kernel may use.
/// Validation enables exactly these.
pub fn features() -> WasmFeatures {
    WasmFeatures::WASM2 | WasmFeatures::RELAXED_SIMD
}

/// [`features`] and the threads proposal (for the shared memory): what a
/// threaded kernel may use.
pub fn threaded_features() -> WasmFeatures {
    features() | WasmFeatures::THREADS
}

/// Validates a single-threaded module with [`features`].
pub fn validate(bytes: &[u8]) -> Result<(), WasmError> {
    validate_with(bytes, features())
}

fn validate_with(bytes: &[u8], f: WasmFeatures) -> Result<(), WasmError> {
    Validator::new_with_features(f).validate_all(bytes).map(|_| ()).map_err(|e| WasmError::Invalid(e.to_string()))
}

/// The name of a threaded kernel's per-part export.
pub const PART_ENTRY: &str = "kernel_part";

/// A compiled Wasm module.
#[derive(Clone, Debug)]
pub struct WasmModule {
    pub bytes: Vec<u8>,
    /// Bytes of scratch space the kernel needs (see the module docs).
    pub scratch_bytes: u32,
    /// Threaded kernels: bytes of scratch each part owns (0 otherwise).
    pub part_scratch_bytes: u32,
}

/// One part of a threaded kernel: which of the part bodies computes it, and
/// the element offset it adds to each argument (ABI order).
#[derive(Clone, Debug)]
pub struct PartCall {
    pub body: usize,
    pub offsets: Vec<u32>,
}

/// Verifies, lowers, optimises, encodes and validates `f`.
pub fn compile(f: &Func, opts: &WasmOptions) -> Result<WasmModule, WasmError> {
    let lowered = lower_func(f, opts)?;
    let (wf, scratch_bytes) = (&lowered.func, lowered.scratch_bytes);
    let mut m = ModuleBuilder::default();
    let kernel = m.function(wf.params, encode_function(wf));
    let bytes = m.finish(memory(opts.memory_pages_min, false), &[("kernel", kernel)]);
    validate(&bytes)?;
    Ok(WasmModule { bytes, scratch_bytes, part_scratch_bytes: 0 })
}

/// A threaded kernel: `whole` behind `kernel`, and `kernel_part(args...,
/// [scratch], part)` calling `bodies[calls[part].body]` on the part's
/// arguments (see the module docs).
pub fn compile_threaded(whole: &Func, bodies: &[Func], calls: &[PartCall], opts: &WasmOptions) -> Result<WasmModule, WasmError> {
    let whole = lower_func(whole, opts)?;
    let bodies = bodies.iter().map(|b| lower_func(b, opts)).collect::<Result<Vec<_>, _>>()?;
    let part_scratch = bodies.iter().map(|b| b.scratch_bytes.next_multiple_of(16)).max().unwrap_or(0);
    let scratch_bytes = whole.scratch_bytes.max(part_scratch * calls.len() as u32);
    let args = calls.first().map_or(0, |c| c.offsets.len() as u32);
    let has_scratch = scratch_bytes > 0;
    let mut m = ModuleBuilder::default();
    // `kernel` takes the scratch parameter whenever the module has scratch,
    // so that both exports have the same parameters but the part number.
    let kernel = if has_scratch && whole.scratch_bytes == 0 {
        // The whole body needs none, but the ABI passes it: forward without it.
        let inner = m.function(whole.func.params, encode_function(&whole.func));
        m.function(args + 1, forward(args, inner))
    } else {
        m.function(whole.func.params, encode_function(&whole.func))
    };
    let body_fns: Vec<(u32, bool)> =
        bodies.iter().map(|b| (m.function(b.func.params, encode_function(&b.func)), b.scratch_bytes > 0)).collect();
    let part_param = args + has_scratch as u32;
    let mut f = wasm_encoder::Function::new(Vec::new());
    for (p, call) in calls.iter().enumerate() {
        use wasm_encoder::Instruction as I;
        f.instruction(&I::LocalGet(part_param));
        f.instruction(&I::I32Const(p as i32));
        f.instruction(&I::I32Eq);
        f.instruction(&I::If(wasm_encoder::BlockType::Empty));
        for (i, &off) in call.offsets.iter().enumerate() {
            f.instruction(&I::LocalGet(i as u32));
            if off > 0 {
                f.instruction(&I::I32Const((off * 4) as i32));
                f.instruction(&I::I32Add);
            }
        }
        let (func, scratch) = body_fns[call.body];
        if scratch {
            f.instruction(&I::LocalGet(args));
            if p > 0 {
                f.instruction(&I::I32Const((p as u32 * part_scratch) as i32));
                f.instruction(&I::I32Add);
            }
        }
        f.instruction(&I::Call(func));
        f.instruction(&I::Return);
        f.instruction(&I::End);
    }
    f.instruction(&wasm_encoder::Instruction::End);
    let part = m.function(part_param + 1, f);
    let bytes = m.finish(memory(opts.memory_pages_min, true), &[("kernel", kernel), (PART_ENTRY, part)]);
    validate_with(&bytes, threaded_features())?;
    Ok(WasmModule { bytes, scratch_bytes, part_scratch_bytes: part_scratch })
}

fn lower_func(f: &Func, opts: &WasmOptions) -> Result<lower::Lowered, WasmError> {
    let types = verify(f, Flavor::Cpu)?;
    let mut lowered = lower::lower(f, &types, opts.lower);
    passes::pipeline(&mut lowered.func, opts.passes);
    Ok(lowered)
}

/// A function of `args + 1` parameters calling `inner` with the first `args`.
fn forward(args: u32, inner: u32) -> wasm_encoder::Function {
    let mut f = wasm_encoder::Function::new(Vec::new());
    for i in 0..args {
        f.instruction(&wasm_encoder::Instruction::LocalGet(i));
    }
    f.instruction(&wasm_encoder::Instruction::Call(inner));
    f.instruction(&wasm_encoder::Instruction::End);
    f
}

fn memory(minimum: u32, shared: bool) -> MemoryType {
    // A shared memory must declare a maximum; the largest lets any shared memory in.
    MemoryType { minimum: minimum as u64, maximum: shared.then_some(MAX_PAGES), memory64: false, shared, page_size_log2: None }
}

fn encode_function(wf: &wir::WFunc) -> wasm_encoder::Function {
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
    body
}

/// Functions of `(i32 × n) → ()` and their types, in order.
#[derive(Default)]
struct ModuleBuilder {
    type_of: Vec<u32>,
    arities: Vec<u32>,
    bodies: Vec<wasm_encoder::Function>,
}

impl ModuleBuilder {
    /// Adds a function of `params` `i32` parameters; returns its index.
    fn function(&mut self, params: u32, body: wasm_encoder::Function) -> u32 {
        let ty = match self.arities.iter().position(|&a| a == params) {
            Some(t) => t,
            None => {
                self.arities.push(params);
                self.arities.len() - 1
            }
        };
        self.type_of.push(ty as u32);
        self.bodies.push(body);
        self.bodies.len() as u32 - 1
    }

    fn finish(self, memory: MemoryType, exports: &[(&str, u32)]) -> Vec<u8> {
        let mut module = Module::new();
        let mut types = TypeSection::new();
        for &a in &self.arities {
            types.ty().function(vec![ValType::I32; a as usize], vec![]);
        }
        module.section(&types);
        let mut imports = ImportSection::new();
        imports.import("env", "memory", EntityType::Memory(memory));
        module.section(&imports);
        let mut funcs = FunctionSection::new();
        for &t in &self.type_of {
            funcs.function(t);
        }
        module.section(&funcs);
        let mut ex = ExportSection::new();
        for &(name, f) in exports {
            ex.export(name, ExportKind::Func, f);
        }
        module.section(&ex);
        let mut code = CodeSection::new();
        for b in &self.bodies {
            code.function(b);
        }
        module.section(&code);
        module.finish()
    }
}
