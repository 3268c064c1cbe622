//! The WGSL backend: schedule → loop IR (GPU flavor) → naga IR ([`lower`]),
//! checked by naga's validator, written as WGSL text by naga's own backend.
//! No kernel leaves the compiler unvalidated; builds with debug assertions
//! (every test) also parse each written text back and validate it again.
//!
//! # The WGSL kernel ABI
//! One compute entry point `main`. Argument `i` of the op (ABI order) is bound
//! at `@group(0) @binding(i)`: inputs read-only (`var<storage>`, read
//! being the default access), the output as `var<storage, read_write>`. A
//! kernel that needs scratch space ([`WgslKernel::scratch_bytes`] > 0: the
//! partial sums of `k_slices`, matmul_q4's unpacked weights) binds the
//! host's scratch buffer at `@group(1) @binding(0)`; there are no other
//! bindings, because shapes are baked in as constants. Dispatch
//! [`WgslKernel::dispatch`] workgroups of [`WgslKernel::workgroup_size`]
//! threads, or, for a kernel of several [`Pass`]es, each pass in order.
//!
//! # Lowering rules
//! - An IR variable whose every value can be bound to the expression that
//!   computes it is no variable at all: its reads use that value (written
//!   inline where read once, else as a `let`); only the others (a value
//!   carried around a loop or out of a branch) are function-scope `var`s
//!   ([`lower`]'s `direct_vars` says which). Unrolled loops are replicated
//!   with their counter replaced by a literal, so register tiles become plain
//!   scalar (or `vec4`) values, never arrays indexed in loops.
//! - A buffer whose every access is a 4-lane load or store at an index that is
//!   provably a multiple of 4 is declared as an array of `vec4`; any other
//!   buffer is an array of scalars, and 4-lane accesses to it are spelled out
//!   lane by lane.
//! - A workgroup buffer with rows ([`crate::ir::Buffer::row`]) is an array of
//!   rows, `array<array<T, row>, rows>`, indexed `[row][column]` with the row
//!   a literal wherever `rows` (interval arithmetic) proves an access stays inside one row, else
//!   `[i / row][i % row]`: the same element either way, but WebGPU's clamp
//!   of each dynamic index is then one per thread instead of one per read.
//! - IR integers are `i32` with Wasm semantics: `>>` is a logical shift and
//!   `tof32` converts an unsigned value, so both go through `bitcast<u32>`.
//!   Comparisons yield `i32` 0 or 1, and `if` tests for non-zero.

pub mod lower;
mod rows;

use crate::generate::{matmul_gpu, q4_gpu};
use crate::ir::verify::Types;
use crate::ir::{BinOp, Buffer, Expr, Func, Handle, Space, Stmt, Var};
use crate::op::{Op, OpKind};
use crate::schedule::Schedule;

/// A WGSL kernel and how to dispatch it.
#[derive(Clone, Debug)]
pub struct WgslKernel {
    pub source: String,
    /// The entry point of the first pass (`main` for a one-pass kernel).
    pub entry: String,
    pub workgroup_size: [u32; 3],
    pub dispatch: [u32; 3],
    /// Every pass, in order, where there are several (the first is `entry`
    /// with `workgroup_size` and `dispatch`); empty for a one-pass kernel.
    pub passes: Vec<Pass>,
    /// Bytes of the host's scratch buffer (`@group(1) @binding(0)`); 0 for none.
    pub scratch_bytes: u64,
}

/// One dispatch of a kernel with several passes (`kernel.json`'s `passes`):
/// the host runs them in order on the same bindings.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pass {
    pub entry: String,
    pub workgroup_size: [u32; 3],
    pub dispatch: [u32; 3],
}

/// The loop IR of `op` under a GPU schedule (which must have passed
/// [`Schedule::check`] for the WGSL target), with its launch shape.
pub fn generate(op: &Op, s: &Schedule) -> (Func, [u32; 3], [u32; 3]) {
    match op.kind() {
        OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0 if !s.cache_read => {
            let (wg, d) = q4_gpu::launch(op, s);
            (q4_gpu::generate(op, s), wg, d)
        }
        // The block-quantised ops with cache_read are the tiled family
        // (prefill, M > 1): the matmul kernel with B dequantised as it is
        // staged.
        OpKind::Matmul | OpKind::BatchMatmul | OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0 => {
            let (wg, d) = matmul_gpu::launch(op, s);
            (matmul_gpu::generate(op, s), wg, d)
        }
        OpKind::MatmulI16 => unreachable!("Schedule::check refuses matmul_i16 on WGSL"),
    }
}

/// Compiles `op` under `s` to WGSL: the loop IR is lowered straight to a
/// naga module ([`lower::module`]), naga's validator checks it, and naga's
/// WGSL backend writes the text. Builds with debug assertions (every test)
/// also parse the written text back and validate it again ([`validate`]).
///
/// A schedule with `k_slices` > 1 makes a kernel of two passes in one
/// module: `main` writes each slice's partial tile to the scratch buffer,
/// `reduce` ([`matmul_gpu::generate_reduce`]) adds them and stores C.
/// A matmul_q4 schedule with `dequant_pass` makes two passes too: `unpack`
/// ([`q4_gpu::generate_unpack`]) writes the dense weights to the scratch
/// buffer, and `main` is the matmul on them.
pub fn compile(op: &Op, s: &Schedule) -> Result<WgslKernel, WgslError> {
    let (func, workgroup_size, dispatch) = generate(op, s);
    // Passes in order: `unpack` (dequant_pass), `main`, `reduce` (k_slices).
    let unpack = s.dequant_pass.then(|| q4_gpu::generate_unpack(op, s));
    let reduce = (s.k_slices > 1).then(|| matmul_gpu::generate_reduce(op, s));
    let mut funcs: Vec<(&Func, &str, [u32; 3], [u32; 3])> = Vec::new();
    if let Some((f, wg, d)) = &unpack {
        funcs.push((f, "unpack", *wg, *d));
    }
    funcs.push((&func, "main", workgroup_size, dispatch));
    if let Some((f, wg, d)) = &reduce {
        funcs.push((f, "reduce", *wg, *d));
    }
    let (source, passes, scratch_bytes) = if funcs.len() > 1 {
        let written: Vec<(&Func, &str, [u32; 3])> = funcs.iter().map(|&(f, e, wg, _)| (f, e, wg)).collect();
        let source = write_passes(&written, s.f16_acc)?;
        let passes = funcs.iter().map(|&(_, e, workgroup_size, dispatch)| Pass { entry: e.into(), workgroup_size, dispatch }).collect();
        (source, passes, matmul_gpu::scratch_bytes(op, s))
    } else {
        (write_with(&func, workgroup_size, s.f16_acc)?, Vec::new(), 0)
    };
    if cfg!(debug_assertions) {
        validate(&source).map_err(|e| WgslError::Reread(Box::new(e)))?;
    }
    // The kernel's entry, workgroup size and dispatch are its first pass's.
    let (entry, workgroup_size, dispatch) = match passes.first() {
        Some(p) => (p.entry.clone(), p.workgroup_size, p.dispatch),
        None => ("main".to_string(), workgroup_size, dispatch),
    };
    Ok(WgslKernel { source, entry, workgroup_size, dispatch, passes, scratch_bytes })
}

/// The directive a kernel that uses subgroup operations starts with. WGSL
/// requires it (browsers reject subgroup builtins without it); naga 30 does
/// not implement the directive and accepts the builtins without it, so
/// [`native_source`] takes it off before naga or wgpu parse the text.
pub const ENABLE_SUBGROUPS: &str = "enable subgroups;\n";

/// The WGSL source as naga and wgpu want it: without [`ENABLE_SUBGROUPS`].
pub fn native_source(source: &str) -> &str {
    source.strip_prefix(ENABLE_SUBGROUPS).unwrap_or(source)
}

/// Whether a kernel's text needs the adapter's `subgroups` feature.
pub fn needs_subgroups(source: &str) -> bool {
    source.starts_with(ENABLE_SUBGROUPS)
}

/// Lowers, validates and writes a GPU-flavor function as WGSL text.
pub fn write(f: &Func, workgroup_size: [u32; 3]) -> Result<String, WgslError> {
    write_with(f, workgroup_size, false)
}

/// [`write()`], in f16 arithmetic where `half` ([`lower::module_with`]).
pub fn write_with(f: &Func, workgroup_size: [u32; 3], half: bool) -> Result<String, WgslError> {
    write_passes(&[(f, "main", workgroup_size)], half)
}

/// [`write_with`] for a module of several entry points ([`lower::module_passes`]).
pub fn write_passes(passes: &[(&Func, &str, [u32; 3])], half: bool) -> Result<String, WgslError> {
    let module = lower::module_passes(passes, half)?;
    let subgroups = module_uses_subgroups(&module);
    let info = validate_module(&module, subgroups, "")?;
    let text = write_module(&module, &info)?;
    Ok(if subgroups { format!("{ENABLE_SUBGROUPS}{text}") } else { text })
}

/// naga's validator with every check on. The only optional capabilities it
/// grants are subgroup operations and f16, each only to a module that uses
/// it; errors are rendered against `source` (empty when there is no text).
fn validate_module(module: &naga::Module, subgroups: bool, source: &str) -> Result<naga::valid::ModuleInfo, WgslError> {
    let mut caps = if subgroups { naga::valid::Capabilities::SUBGROUP } else { naga::valid::Capabilities::empty() };
    if module_uses_f16(module) {
        caps |= naga::valid::Capabilities::SHADER_FLOAT16;
    }
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(module)
        .map_err(|e| WgslError::Validate(e.emit_to_string(source)))
}

/// Whether a naga module has an f16 type (then its text starts `enable f16;`
/// and needs the adapter's `shader-f16` feature).
fn module_uses_f16(module: &naga::Module) -> bool {
    module
        .types
        .iter()
        .any(|(_, t)| matches!(t.inner, naga::TypeInner::Scalar(s) | naga::TypeInner::Vector { scalar: s, .. } if s == lower::F16))
}

/// Whether a kernel's text needs the adapter's `shader-f16` feature.
pub fn needs_f16(source: &str) -> bool {
    native_source(source).starts_with("enable f16;")
}

/// Whether a naga module holds a subgroup operation.
fn module_uses_subgroups(module: &naga::Module) -> bool {
    fn block(b: &naga::Block) -> bool {
        b.iter().any(|s| match s {
            naga::Statement::SubgroupGather { .. } | naga::Statement::SubgroupCollectiveOperation { .. } => true,
            naga::Statement::Block(b) => block(b),
            naga::Statement::If { accept, reject, .. } => block(accept) || block(reject),
            naga::Statement::Loop { body, continuing, .. } => block(body) || block(continuing),
            _ => false,
        })
    }
    module.entry_points.iter().any(|ep| block(&ep.function.body))
}

/// naga's validator, with every check on (see `validate_module`).
pub fn check(module: &naga::Module) -> Result<naga::valid::ModuleInfo, WgslError> {
    validate_module(module, module_uses_subgroups(module), "")
}

/// naga's WGSL backend on a validated module.
pub fn write_module(module: &naga::Module, info: &naga::valid::ModuleInfo) -> Result<String, WgslError> {
    naga::back::wgsl::write_string(module, info, naga::back::wgsl::WriterFlags::empty()).map_err(|e| WgslError::Write(e.to_string()))
}

/// Why a loop IR function could not be written as WGSL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    #[error(transparent)]
    Verify(#[from] crate::ir::verify::VerifyError),
    #[error("a float constant {0} has no WGSL spelling")]
    NonFinite(String),
    #[error("f16 arithmetic needs f16 arguments: argument {0} is f32")]
    HalfArgument(String),
    #[error("two passes bind buffer {0} with different element types")]
    BindingMismatch(String),
    #[error("variable #{0} is read where no value of it is bound (a lowering bug)")]
    Unbound(usize),
}

/// Why the WGSL backend failed: the backend's own error, as naga's
/// backends each own theirs. On a schedule that passed its check any of
/// these is a compiler bug; [`crate::CompileError::Wgsl`] wraps it with
/// this error as its source.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WgslError {
    /// The loop IR could not be lowered to naga IR.
    #[error(transparent)]
    Emit(#[from] EmitError),
    /// naga's validator refused the module (its report, rendered against the text where there is one).
    #[error("naga validate: {0}")]
    Validate(String),
    /// naga's WGSL writer failed on a validated module.
    #[error("naga WGSL writer: {0}")]
    Write(String),
    /// naga's WGSL front end refused a text (its report).
    #[error("naga parse: {0}")]
    Parse(String),
    /// The written text did not parse back or validate (checked in builds
    /// with debug assertions).
    #[error("written WGSL does not parse back: {0}")]
    Reread(Box<WgslError>),
}

/// Parses and validates WGSL `source` with naga; the error is naga's report.
/// This is the check of a text: [`compile`] does not need it on its fast
/// path (its module is validated before the text is written from it).
pub fn validate(source: &str) -> Result<(), WgslError> {
    let source = native_source(source);
    check_module(&parse(source)?, source)
}

/// The first half of [`validate`]: naga's WGSL front end (on the
/// [`native_source`]).
pub fn parse(source: &str) -> Result<naga::Module, WgslError> {
    let source = native_source(source);
    naga::front::wgsl::parse_str(source).map_err(|e| WgslError::Parse(e.emit_to_string(source)))
}

/// The second half of [`validate`]: naga's validator, with every check on
/// (subgroup operations allowed only where the module uses them), on a
/// module [`parse`]d from `source`.
pub fn check_module(module: &naga::Module, source: &str) -> Result<(), WgslError> {
    validate_module(module, module_uses_subgroups(module), native_source(source)).map(|_| ())
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A number that every value of `e` is a multiple of (1 when unknown, 0 when
/// the value is always zero), given the same for every variable in `mult`.
fn multiple(f: &Func, mult: &[i64], e: Handle<Expr>) -> i64 {
    match f.exprs[e] {
        Expr::I32(c) => (c as i64).abs(),
        Expr::Var(v) => mult[v.index()],
        Expr::Bin(BinOp::Add | BinOp::Sub | BinOp::Min, a, b) => gcd(multiple(f, mult, a), multiple(f, mult, b)),
        Expr::Bin(BinOp::Mul, a, b) => multiple(f, mult, a).checked_mul(multiple(f, mult, b)).filter(|m| *m < 1 << 40).unwrap_or(1),
        _ => 1,
    }
}

/// Which buffers are declared as arrays of `vec4` (see the module docs).
pub(crate) fn vec4_buffers(f: &Func, types: &Types) -> Vec<bool> {
    // Every definition of a variable: (variable, value, step), where a loop
    // counter is defined by its start and its step.
    fn defs(body: &[Stmt], out: &mut Vec<(Handle<Var>, Handle<Expr>, i64)>) {
        for s in body {
            match s {
                Stmt::For(l) => {
                    out.push((l.var, l.lo, l.step as i64));
                    defs(&l.body, out);
                }
                Stmt::If { body, .. } => defs(body, out),
                Stmt::Set { var, value } => out.push((*var, *value, 0)),
                _ => {}
            }
        }
    }
    let mut d = Vec::new();
    defs(&f.body, &mut d);
    // A fixed point from "always zero" (0, the identity of gcd) downwards:
    // each variable ends as the gcd of everything it is ever assigned.
    let mut mult = vec![0i64; f.vars.len()];
    loop {
        let mut changed = false;
        for &(v, value, step) in &d {
            let m = gcd(gcd(mult[v.index()], multiple(f, &mult, value)), step);
            if m != mult[v.index()] {
                mult[v.index()] = m;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // Buffers: (has a 4-lane access, every 4-lane access aligned, every
    // access 4-lane), per buffer.
    let mut acc: Vec<(bool, bool, bool)> = vec![(false, true, true); f.buffers.len()];
    let mut note = |buf: Handle<Buffer>, lanes: u32, index: Handle<Expr>| {
        let a = &mut acc[buf.index()];
        if lanes == 4 {
            a.0 = true;
            a.1 &= multiple(f, &mult, index) % 4 == 0;
        } else {
            a.2 = false;
        }
    };
    for (_, e) in f.exprs.iter() {
        if let Expr::Load { ty, buf, index } = *e {
            note(buf, ty.lanes(), index);
        }
    }
    fn stores(body: &[Stmt], out: &mut Vec<(Handle<Buffer>, Handle<Expr>, Handle<Expr>)>) {
        for s in body {
            match s {
                Stmt::For(l) => stores(&l.body, out),
                Stmt::If { body, .. } => stores(body, out),
                Stmt::Store { buf, index, value } => out.push((*buf, *index, *value)),
                _ => {}
            }
        }
    }
    let mut st = Vec::new();
    stores(&f.body, &mut st);
    for (buf, index, value) in st {
        note(buf, types.of(value).lanes(), index);
    }
    // A buffer whose every access is an aligned 4-lane one is an array of
    // vec4. So is a workgroup buffer whose 4-lane accesses are all aligned,
    // though it also has scalar ones: those address one component
    // (`b[i / 4][i % 4]`), which keeps its vector loads single 16-byte reads
    // (a register tile's rows from a transposed A tile).
    f.buffers
        .iter()
        .map(|(h, b)| {
            let (has4, aligned, all4) = acc[h.index()];
            b.len % 4 == 0 && has4 && aligned && (all4 || b.space == Space::Workgroup)
        })
        .collect()
}

/// WGSL name of a buffer: `b_` + its IR name, so no name can be a keyword.
fn buf_name(f: &Func, h: Handle<Buffer>) -> String {
    format!("b_{}", sanitize(&f.buffers[h].name))
}

/// WGSL name of a variable: `v_` + its IR name.
fn var_name(f: &Func, h: Handle<Var>) -> String {
    format!("v_{}", sanitize(&f.vars[h].name))
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Target;

    #[test]
    fn defaults_compile_and_validate() {
        for (kind, shape) in [("matmul", "64,64,64"), ("batch_matmul", "2,7,13,5"), ("matmul_q4", "1,64,7"), ("matmul_q4", "3,96,10")] {
            let op = Op::parse(kind, shape).unwrap();
            let s = Schedule::default_for(&op, Target::Wgsl);
            let k = compile(&op, &s).unwrap_or_else(|e| panic!("{kind} {shape}: {e}"));
            assert!(k.source.contains("fn main("));
            // The ABI, read back from the text: argument i at binding i,
            // inputs read-only, the output (last) read-write.
            let m = parse(&k.source).unwrap();
            let bound: Vec<_> = m.global_variables.iter().filter_map(|(_, g)| Some((g.binding?, g.space))).collect();
            assert_eq!(bound.len(), op.args().len(), "{kind} {shape}");
            for (i, (b, space)) in bound.iter().enumerate() {
                assert_eq!((b.group, b.binding), (0, i as u32));
                let naga::AddressSpace::Storage { access } = *space else { panic!("binding {i} is not storage") };
                assert_eq!(access.contains(naga::StorageAccess::STORE), i == bound.len() - 1, "{kind} {shape} binding {i}");
            }
        }
    }

    #[test]
    fn f16_ops_store_halves_and_compute_in_f32() {
        for (kind, shape, cache_read) in [
            ("matmul+f16", "64,64,64", true),
            ("matmul+bias+gelu+residual+f16", "5,13,7", false),
            ("batch_matmul+f16", "2,7,13,8", true),
            ("matmul_q4+f16", "1,64,7", false),
            ("matmul_q4+f16", "33,96,16", true),
        ] {
            let op = Op::parse(kind, shape).unwrap();
            let s = Schedule { cache_read, ..Schedule::default_for(&op, Target::Wgsl) };
            let s = if op.kind() == crate::OpKind::MatmulQ4 && cache_read {
                Schedule { x0: 2, y0: 2, r0: 8, x1: 8, y1: 8, r1: 32, split_k: 1, ..s }
            } else {
                s
            };
            s.check(&op, Target::Wgsl).unwrap_or_else(|e| panic!("{kind} {s:?}: {e}"));
            let k = compile(&op, &s).unwrap_or_else(|e| panic!("{kind} {shape}: {e}"));
            assert!(needs_f16(&k.source), "{kind}: {}", k.source);
            validate(&k.source).unwrap();
            // Every float argument is f16 storage; nothing else is f16.
            let decls: Vec<&str> = k.source.lines().filter(|l| l.starts_with("var<storage")).collect();
            assert_eq!(decls.len(), op.args().len());
            for (d, a) in decls.iter().zip(op.args()) {
                assert_eq!(d.contains("f16"), a.dtype == crate::op::Dtype::F16, "{kind}: {d}");
            }
            assert!(
                k.source.lines().filter(|l| l.starts_with("var<workgroup>") || l.contains("var v_")).all(|l| !l.contains("f16")),
                "{kind}"
            );
        }
        // The f32 op of the same shape has no f16 in it.
        let op = Op::parse("matmul", "64,64,64").unwrap();
        assert!(!compile(&op, &Schedule::default_for(&op, Target::Wgsl)).unwrap().source.contains("f16"));
        // f16 arithmetic: no f32 anywhere, the tiles and registers f16.
        for name in ["matmul+f16", "batch_matmul+bias+relu+residual+f16"] {
            let op = Op::parse(name, if name.starts_with("batch") { "2,7,13,8" } else { "64,64,64" }).unwrap();
            let s = Schedule { f16_acc: true, ..Schedule::default_for(&op, Target::Wgsl) };
            s.check(&op, Target::Wgsl).unwrap();
            let k = compile(&op, &s).unwrap();
            validate(&k.source).unwrap();
            assert!(!k.source.contains("f32") && k.source.contains("var<workgroup> b_As: array<array<vec4<f16>"), "{}", k.source);
        }
        // The tiled q4 family unpacks nibbles by conversion, not through f32 bits.
        let q4 = Op::parse("matmul_q4+f16", "33,96,16").unwrap();
        let s = Schedule {
            x0: 2,
            y0: 2,
            r0: 8,
            x1: 8,
            y1: 8,
            r1: 32,
            split_k: 1,
            cache_read: true,
            f16_acc: true,
            ..Schedule::default_for(&q4, Target::Wgsl)
        };
        s.check(&q4, Target::Wgsl).unwrap();
        let k = compile(&q4, &s).unwrap();
        assert!(!k.source.contains("f32") && !k.source.contains("bitcast<f"), "{}", k.source);
        // Refused where it cannot hold.
        for (name, shape) in [("matmul", "8,8,8"), ("matmul_q4+f16", "1,64,8"), ("matmul+bias+gelu+f16", "8,8,8")] {
            let op = Op::parse(name, shape).unwrap();
            let s = Schedule { f16_acc: true, ..Schedule::default_for(&op, Target::Wgsl) };
            assert_eq!(s.check(&op, Target::Wgsl).unwrap_err().field, "f16_acc", "{name}");
        }
        let wasm = Op::parse("matmul", "8,8,8").unwrap();
        let s = Schedule { f16_acc: true, ..Schedule::default_for(&wasm, Target::Wasm) };
        assert_eq!(s.check(&wasm, Target::Wasm).unwrap_err().field, "f16_acc");
    }

    #[test]
    fn every_checked_q4_schedule_compiles_and_validates() {
        // A grid over the q4 kernel's parameters, several outputs per thread
        // included: whatever `Schedule::check` accepts must compile and pass
        // naga's validator (which `compile` runs before returning).
        let (mut compiled, mut double_buffered) = (0, 0);
        for shape in ["1,64,7", "3,96,10", "2,256,24"] {
            let op = Op::parse("matmul_q4", shape).unwrap();
            for x0 in [1, 2, 3] {
                for y0 in [1, 2, 3, 4, 8] {
                    for groups in [1, 3, 4] {
                        for split_k in [1, 2, 3, 8] {
                            for (r0, vectorize, subgroup_reduce, double_buffer) in [
                                (8, 1, false, false),
                                (8, 1, false, true),
                                (32, 1, true, false),
                                (32, 1, true, true),
                                (64, 1, false, false),
                                (32, 4, false, false),
                                (32, 4, false, true),
                                (64, 4, true, false),
                            ] {
                                let s = Schedule {
                                    x0,
                                    x1: x0,
                                    y0,
                                    y1: y0 * groups,
                                    split_k,
                                    r0,
                                    r1: r0,
                                    vectorize,
                                    subgroup_reduce,
                                    double_buffer,
                                    ..Schedule::default_for(&op, Target::Wgsl)
                                };
                                if s.check(&op, Target::Wgsl).is_err() {
                                    continue;
                                }
                                double_buffered += usize::from(double_buffer);
                                let k = compile(&op, &s).unwrap_or_else(|e| panic!("{shape} {}: {e}", serde_json::to_string(&s).unwrap()));
                                // Subgroup operations exactly where the schedule asks for them.
                                assert_eq!(needs_subgroups(&k.source), subgroup_reduce, "{shape} {s:?}");
                                compiled += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(compiled > 900, "only {compiled} schedules checked out");
        assert!(double_buffered > 150, "only {double_buffered} double-buffered schedules checked out");
    }

    #[test]
    fn tiled_q4_schedules_compile_and_stage_whole_vec4s() {
        // The tiled family (cache_read): the matmul kernel over a B tile
        // dequantised from the packed words. With vec4 columns the B tile is
        // an array of vec4 and every store into it writes a whole vector
        // (component stores from different threads would race).
        let mut compiled = 0;
        for shape in ["1,64,7", "64,96,64", "33,256,24"] {
            let op = Op::parse("matmul_q4", shape).unwrap();
            for (x0, y0, x1, y1) in [(1, 1, 4, 8), (4, 4, 32, 32), (8, 4, 64, 64), (2, 8, 16, 64)] {
                for (r0, r1) in [(1, 8), (4, 16), (8, 32), (8, 24)] {
                    for vectorize in [1, 4] {
                        for double_buffer in [false, true] {
                            let s = Schedule {
                                x0,
                                y0,
                                x1,
                                y1,
                                r0,
                                r1,
                                vectorize,
                                cache_read: true,
                                double_buffer,
                                split_k: 1 + u32::from(double_buffer) * (r0 % 3),
                                ..Schedule::default_for(&op, Target::Wgsl)
                            };
                            if s.check(&op, Target::Wgsl).is_err() {
                                continue;
                            }
                            let k = compile(&op, &s).unwrap_or_else(|e| panic!("{shape} {}: {e}", serde_json::to_string(&s).unwrap()));
                            let vec = crate::generate::matmul_gpu::uses_vec4(op.bmkn().3, &s);
                            let tiles: Vec<&str> = k.source.lines().filter(|l| l.starts_with("var<workgroup> b_Bs")).collect();
                            assert!(!tiles.is_empty(), "{shape} {s:?}: no B tile");
                            assert!(tiles.iter().all(|l| l.contains("array<vec4<f32>") == vec), "{shape} {s:?}: {tiles:?}");
                            let component_store = k
                                .source
                                .lines()
                                .map(str::trim_start)
                                // The tile is two-dimensional: a whole vec4 is `b_Bs[r][c]`, a component `b_Bs[r][c].x` or `b_Bs[r][c][l]`.
                                .any(|l| {
                                    l.starts_with("b_Bs")
                                        && l.split(" = ").next().is_some_and(|lhs| lhs.contains("].") || lhs.matches("][").count() > 1)
                                });
                            assert!(!component_store, "{shape} {s:?}: component store into the B tile");
                            compiled += 1;
                        }
                    }
                }
            }
        }
        assert!(compiled > 100, "only {compiled} tiled schedules checked out");
    }

    #[test]
    fn unrolled_tiles_are_scalar_registers() {
        let op = Op::parse("matmul", "128,128,128").unwrap();
        let s = Schedule { x0: 4, y0: 4, vectorize: 1, ..Schedule::default_for(&op, Target::Wgsl) };
        let k = compile(&op, &s).unwrap();
        assert!(k.source.contains("var v_acc_3_3_: f32;"), "{}", k.source);
        assert!(!k.source.contains("array<f32, 16>"));
    }

    #[test]
    fn vec4_buffers_only_where_aligned() {
        let op = Op::parse("matmul", "64,64,64").unwrap();
        let s = Schedule::default_for(&op, Target::Wgsl);
        let k = compile(&op, &s).unwrap();
        assert!(k.source.contains("var<storage> b_B: array<vec4<f32>>;"), "{}", k.source);
        assert!(k.source.contains("var<storage> b_A: array<f32>;"));
        let odd = Op::parse("matmul", "64,64,63").unwrap();
        let k = compile(&odd, &s).unwrap();
        assert!(k.source.contains("var<storage> b_B: array<f32>;"), "{}", k.source);
    }

    #[test]
    fn register_rows_read_the_a_tile_as_vec4() {
        let op = Op::parse("matmul", "128,128,128").unwrap();
        let s = Schedule { x0: 8, y0: 8, x1: 64, y1: 64, r1: 8, r0: 8, ..Schedule::default_for(&op, Target::Wgsl) };
        let k = compile(&op, &s).unwrap();
        // The transposed A tile is rows (one k each) of vec4s, its scalar
        // stores address components, and each row group is one read, split
        // into lanes. Every read of a register step names its row by a literal.
        assert!(k.source.contains("var<workgroup> b_As: array<array<vec4<f32>, 16>, 8>;"), "{}", k.source);
        assert!(k.source.contains("].x = "), "{}", k.source);
        for step in 0..8 {
            assert!(k.source.contains(&format!("b_As[{step}][")) && k.source.contains(&format!("b_Bs[{step}][")), "{}", k.source);
        }
        assert!(!k.source.contains("/ 4i"), "vec4 indices are shifts, not divisions: {}", k.source);
        // A row group of step 0 is one read, then split into lanes.
        let read = k.source.lines().map(str::trim).find(|l| l.starts_with("let _e") && l.contains(" = b_As[0]["));
        let name = read.and_then(|l| l.strip_prefix("let ")).and_then(|l| l.split(' ').next()).unwrap_or("?");
        assert!(k.source.contains(&format!("vec4({name}.x)")), "{name}: {}", k.source);
        assert!(k.source.contains(".w)"), "{}", k.source);
        // Scalar schedules keep scalar rows.
        let scalar = compile(&op, &Schedule { vectorize: 1, ..s }).unwrap();
        assert!(scalar.source.contains("var<workgroup> b_As: array<array<f32, 64>, 8>;"), "{}", scalar.source);
    }

    #[test]
    fn validator_rejects_bad_wgsl() {
        let e = validate("fn main() { let x: i32 = 1.5f; }").unwrap_err();
        assert!(e.to_string().contains("naga"), "{e}");
    }
}
