//! The WGSL backend: schedule → loop IR (GPU flavor) → WGSL text, checked by
//! naga's parser and validator before it leaves the compiler.
//!
//! # The WGSL kernel ABI
//! One compute entry point `main`. Argument `i` of the op (ABI order) is bound
//! at `@group(0) @binding(i)`: inputs as `var<storage, read>`, the output as
//! `var<storage, read_write>`; there are no other bindings, because shapes
//! are baked in as constants. Dispatch [`WgslKernel::dispatch`] workgroups of
//! [`WgslKernel::workgroup_size`] threads.
//!
//! # Lowering rules
//! - Every IR variable is a function-scope `var`; unrolled loops are replicated
//!   with their counter replaced by a literal, so register tiles become plain
//!   scalar (or `vec4`) variables, never arrays indexed in loops.
//! - A buffer whose every access is a 4-lane load or store at an index that is
//!   provably a multiple of 4 is declared as an array of `vec4`; any other
//!   buffer is an array of scalars, and 4-lane accesses to it are spelled out
//!   lane by lane.
//! - IR integers are `i32` with Wasm semantics: `>>` is a logical shift and
//!   `tof32` converts an unsigned value, so both go through `bitcast<u32>`.
//!   Comparisons yield `i32` 0 or 1, and `if` tests for non-zero.

use std::fmt::Write as _;

use crate::generate::{matmul_gpu, q4_gpu};
use crate::ir::verify::{Flavor, Types, verify};
use crate::ir::{BinOp, Buffer, Builtin, Elem, Expr, Func, Handle, LoadTy, Space, Stmt, Ty, Var};
use crate::kernel::CompileError;
use crate::op::{Op, OpKind};
use crate::schedule::Schedule;

/// A WGSL kernel and how to dispatch it.
#[derive(Clone, Debug)]
pub struct WgslKernel {
    pub source: String,
    pub workgroup_size: [u32; 3],
    pub dispatch: [u32; 3],
}

/// The loop IR of `op` under a GPU schedule (which must have passed
/// [`Schedule::check`] for the WGSL target), with its launch shape.
pub fn generate(op: &Op, s: &Schedule) -> (Func, [u32; 3], [u32; 3]) {
    match op.kind() {
        OpKind::Matmul | OpKind::BatchMatmul => {
            let (wg, d) = matmul_gpu::launch(op, s);
            (matmul_gpu::generate(op, s), wg, d)
        }
        OpKind::MatmulQ4 => {
            let (wg, d) = q4_gpu::launch(op, s);
            (q4_gpu::generate(op, s), wg, d)
        }
    }
}

/// Compiles `op` under `s` to validated WGSL.
pub fn compile(op: &Op, s: &Schedule) -> Result<WgslKernel, CompileError> {
    let (func, workgroup_size, dispatch) = generate(op, s);
    let source = emit(&func, workgroup_size).map_err(|e| CompileError::Internal(e.to_string()))?;
    validate(&source).map_err(CompileError::Internal)?;
    Ok(WgslKernel { source, workgroup_size, dispatch })
}

/// Why a loop IR function could not be written as WGSL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    #[error(transparent)]
    Verify(#[from] crate::ir::verify::VerifyError),
    #[error("a float constant {0} has no WGSL spelling")]
    NonFinite(String),
}

/// Parses and validates `source` with naga; the error is naga's report.
pub fn validate(source: &str) -> Result<(), String> {
    check_module(&parse(source)?, source)
}

/// The first half of [`validate`]: naga's WGSL front end.
pub fn parse(source: &str) -> Result<naga::Module, String> {
    naga::front::wgsl::parse_str(source).map_err(|e| format!("naga parse: {}", e.emit_to_string(source)))
}

/// The second half of [`validate`]: naga's validator, with every check on
/// and no optional capability, on a module [`parse`]d from `source`.
pub fn check_module(module: &naga::Module, source: &str) -> Result<(), String> {
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty())
        .validate(module)
        .map_err(|e| format!("naga validate: {}", e.emit_to_string(source)))?;
    Ok(())
}

/// Writes a verified GPU-flavor function as a WGSL compute shader.
pub fn emit(f: &Func, workgroup_size: [u32; 3]) -> Result<String, EmitError> {
    let types = verify(f, Flavor::Gpu)?;
    let mut e = Emitter {
        f,
        types,
        out: String::with_capacity(16 * 1024),
        consts: vec![None; f.vars.len()],
        mult: vec![1; f.vars.len()],
        vec4: vec![false; f.buffers.len()],
        indent: 1,
    };
    e.analyse();
    e.header(workgroup_size);
    e.block(&f.body)?;
    e.out.push_str("}\n");
    Ok(e.out)
}

struct Emitter<'a> {
    f: &'a Func,
    types: Types,
    out: String,
    /// Loop counters of unrolled loops, replaced by their current value.
    consts: Vec<Option<i32>>,
    /// A number every value of the integer variable is a multiple of.
    mult: Vec<i64>,
    /// Buffers declared as arrays of `vec4`.
    vec4: Vec<bool>,
    indent: usize,
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Emitter<'_> {
    /// A number that every value of `e` is a multiple of: 1 when unknown, 0
    /// when the value is always zero.
    fn multiple(&self, e: Handle<Expr>) -> i64 {
        match self.f.exprs[e] {
            Expr::I32(c) => (c as i64).abs(),
            Expr::Var(v) => self.mult[v.index()],
            Expr::Bin(BinOp::Add | BinOp::Sub | BinOp::Min, a, b) => gcd(self.multiple(a), self.multiple(b)),
            Expr::Bin(BinOp::Mul, a, b) => self.multiple(a).checked_mul(self.multiple(b)).filter(|m| *m < 1 << 40).unwrap_or(1),
            _ => 1,
        }
    }

    /// Fills `mult` for integer variables and `vec4` for buffers.
    fn analyse(&mut self) {
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
        defs(&self.f.body, &mut d);
        // A fixed point from "always zero" (0, the identity of gcd) downwards:
        // each variable ends as the gcd of everything it is ever assigned.
        self.mult.iter_mut().for_each(|m| *m = 0);
        loop {
            let mut changed = false;
            for &(v, value, step) in &d {
                let m = gcd(gcd(self.mult[v.index()], self.multiple(value)), step);
                if m != self.mult[v.index()] {
                    self.mult[v.index()] = m;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // Buffers: (has a 4-lane access, every 4-lane access aligned, every
        // access 4-lane), per buffer.
        let mut acc: Vec<(bool, bool, bool)> = vec![(false, true, true); self.f.buffers.len()];
        let mut note = |buf: Handle<Buffer>, lanes: u32, index: Handle<Expr>, this: &Self| {
            let a = &mut acc[buf.index()];
            if lanes == 4 {
                a.0 = true;
                a.1 &= this.multiple(index) % 4 == 0;
            } else {
                a.2 = false;
            }
        };
        for (_, e) in self.f.exprs.iter() {
            if let Expr::Load { ty, buf, index } = *e {
                note(buf, ty.lanes(), index, self);
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
        stores(&self.f.body, &mut st);
        for (buf, index, value) in st {
            let lanes = self.types.of(value).lanes();
            note(buf, lanes, index, self);
        }
        // A buffer whose every access is an aligned 4-lane one is an array of
        // vec4. So is a workgroup buffer whose 4-lane accesses are all
        // aligned, though it also has scalar ones: those address one
        // component (`b[i / 4][i % 4]`), which keeps its vector loads single
        // 16-byte reads (a register tile's rows from a transposed A tile).
        for (h, b) in self.f.buffers.iter() {
            let (has4, aligned, all4) = acc[h.index()];
            self.vec4[h.index()] = b.len % 4 == 0 && has4 && aligned && (all4 || b.space == Space::Workgroup);
        }
    }

    fn header(&mut self, wg: [u32; 3]) {
        let f = self.f;
        for (h, b) in f.buffers.iter() {
            let elem = self.elem_ty(h);
            let name = buf_name(f, h);
            match b.space {
                Space::Param(n) => {
                    let access = if b.writable { "read_write" } else { "read" };
                    let _ = writeln!(self.out, "@group(0) @binding({n}) var<storage, {access}> {name}: array<{elem}>;");
                }
                Space::Workgroup => {
                    let len = if self.vec4[h.index()] { b.len / 4 } else { b.len };
                    let _ = writeln!(self.out, "var<workgroup> {name}: array<{elem}, {len}>;");
                }
                Space::Scratch => {
                    let len = if self.vec4[h.index()] { b.len / 4 } else { b.len };
                    let _ = writeln!(self.out, "var<private> {name}: array<{elem}, {len}>;");
                }
            }
        }
        let _ = writeln!(
            self.out,
            "\n@compute @workgroup_size({}, {}, {})\nfn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{",
            wg[0], wg[1], wg[2]
        );
        for (h, v) in f.vars.iter() {
            let _ = writeln!(self.out, "  var {}: {};", var_name(f, h), ty_name(v.ty));
        }
    }

    fn elem_ty(&self, h: Handle<Buffer>) -> &'static str {
        match (self.f.buffers[h].elem, self.vec4[h.index()]) {
            (Elem::F32, false) => "f32",
            (Elem::F32, true) => "vec4<f32>",
            (Elem::U32, false) => "u32",
            (Elem::U32, true) => "vec4<u32>",
        }
    }

    fn line(&mut self) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
    }

    fn block(&mut self, body: &[Stmt]) -> Result<(), EmitError> {
        for s in body {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), EmitError> {
        let f = self.f;
        match s {
            Stmt::For(l) if l.unroll => {
                // Verified: constant bounds.
                let lo = crate::ir::const_i32(f, l.lo).unwrap_or(0);
                let hi = crate::ir::const_i32(f, l.hi).unwrap_or(0);
                let mut i = lo as i64;
                while i < hi as i64 {
                    self.consts[l.var.index()] = Some(i as i32);
                    self.block(&l.body)?;
                    i += l.step as i64;
                }
                self.consts[l.var.index()] = None;
            }
            Stmt::For(l) => {
                let v = var_name(f, l.var);
                self.line();
                let lo = self.expr(l.lo)?;
                let hi = self.expr(l.hi)?;
                let _ = writeln!(self.out, "for ({v} = {lo}; {v} < {hi}; {v} += {}i) {{", l.step);
                self.indent += 1;
                self.block(&l.body)?;
                self.indent -= 1;
                self.line();
                self.out.push_str("}\n");
            }
            Stmt::Set { var, value } => {
                let v = self.expr(*value)?;
                self.line();
                let _ = writeln!(self.out, "{} = {v};", var_name(f, *var));
            }
            Stmt::Store { buf, index, value } => {
                let v = self.expr(*value)?;
                let i = self.expr(*index)?;
                let name = buf_name(f, *buf);
                let lanes = self.types.of(*value).lanes();
                self.line();
                if lanes == 1 && self.vec4[buf.index()] {
                    let _ = writeln!(self.out, "{{ let i = {i}; {name}[i / 4i][i % 4i] = {v}; }}");
                } else if lanes == 1 {
                    let _ = writeln!(self.out, "{name}[{i}] = {v};");
                } else if self.vec4[buf.index()] {
                    let _ = writeln!(self.out, "{name}[({i}) / 4i] = {v};");
                } else {
                    let _ = writeln!(
                        self.out,
                        "{{ let t = {v}; let i = {i}; {name}[i] = t.x; {name}[i + 1i] = t.y; {name}[i + 2i] = t.z; {name}[i + 3i] = t.w; }}"
                    );
                }
            }
            Stmt::If { cond, body } => {
                let c = self.expr(*cond)?;
                self.line();
                let _ = writeln!(self.out, "if ({c} != 0i) {{");
                self.indent += 1;
                self.block(body)?;
                self.indent -= 1;
                self.line();
                self.out.push_str("}\n");
            }
            Stmt::Barrier => {
                self.line();
                self.out.push_str("workgroupBarrier();\n");
            }
        }
        Ok(())
    }

    fn expr(&self, e: Handle<Expr>) -> Result<String, EmitError> {
        let f = self.f;
        Ok(match f.exprs[e] {
            Expr::I32(c) if c < 0 => format!("({c}i)"),
            Expr::I32(c) => format!("{c}i"),
            Expr::F32(x) => {
                if !x.is_finite() {
                    return Err(EmitError::NonFinite(x.to_string()));
                }
                let s = format!("{x:?}");
                if x < 0.0 { format!("({s}f)") } else { format!("{s}f") }
            }
            Expr::Var(v) => match self.consts[v.index()] {
                Some(c) if c < 0 => format!("({c}i)"),
                Some(c) => format!("{c}i"),
                None => var_name(f, v),
            },
            Expr::Bin(op, a, b) => {
                let ty = self.types.of(a);
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                match (op, ty) {
                    (BinOp::Min, _) => format!("min({x}, {y})"),
                    (BinOp::Lt, _) => format!("select(0i, 1i, {x} < {y})"),
                    (BinOp::Shr, Ty::I32) => format!("bitcast<i32>(bitcast<u32>({x}) >> (bitcast<u32>({y}) & 31u))"),
                    (BinOp::Shr, _) => format!("({x} >> vec4<u32>(bitcast<u32>({y}) & 31u))"),
                    _ => format!("({x} {} {y})", op.symbol()),
                }
            }
            Expr::Fma(a, b, c) => format!("fma({}, {}, {})", self.expr(a)?, self.expr(b)?, self.expr(c)?),
            Expr::Splat(a) => match self.types.of(a) {
                Ty::F32 => format!("vec4<f32>({})", self.expr(a)?),
                _ => format!("vec4<u32>(bitcast<u32>({}))", self.expr(a)?),
            },
            Expr::ToF32(a) => match self.types.of(a) {
                Ty::I32 => format!("f32(bitcast<u32>({}))", self.expr(a)?),
                _ => format!("vec4<f32>({})", self.expr(a)?),
            },
            Expr::HSum(a) => format!("dot({}, vec4<f32>(1.0f))", self.expr(a)?),
            Expr::Lane(a, n) => format!("({}).{}", self.expr(a)?, ["x", "y", "z", "w"][n as usize]),
            Expr::Load { ty, buf, index } => {
                let name = buf_name(f, buf);
                let i = self.expr(index)?;
                let scalar = if self.vec4[buf.index()] { format!("{name}[({i}) / 4i][({i}) % 4i]") } else { format!("{name}[{i}]") };
                match ty {
                    LoadTy::F32 => scalar,
                    LoadTy::U32 => format!("bitcast<i32>({scalar})"),
                    LoadTy::F32x4 | LoadTy::U32x4 if self.vec4[buf.index()] => format!("{name}[({i}) / 4i]"),
                    LoadTy::F32x4 => {
                        format!("vec4<f32>({name}[{i}], {name}[({i}) + 1i], {name}[({i}) + 2i], {name}[({i}) + 3i])")
                    }
                    LoadTy::U32x4 => {
                        format!("vec4<u32>({name}[{i}], {name}[({i}) + 1i], {name}[({i}) + 2i], {name}[({i}) + 3i])")
                    }
                }
            }
            Expr::Builtin(b) => match b {
                Builtin::LocalId(d) => format!("i32(lid.{})", ["x", "y", "z"][d as usize]),
                Builtin::GroupId(d) => format!("i32(wid.{})", ["x", "y", "z"][d as usize]),
            },
        })
    }
}

fn ty_name(t: Ty) -> &'static str {
    match t {
        Ty::I32 => "i32",
        Ty::F32 => "f32",
        Ty::F32x4 => "vec4<f32>",
        Ty::U32x4 => "vec4<u32>",
    }
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
            assert!(k.source.contains("@group(0) @binding(0) var<storage, read>"));
        }
    }

    #[test]
    fn unrolled_tiles_are_scalar_registers() {
        let op = Op::parse("matmul", "128,128,128").unwrap();
        let s = Schedule { x0: 4, y0: 4, vectorize: 1, ..Schedule::default_for(&op, Target::Wgsl) };
        let k = compile(&op, &s).unwrap();
        assert!(k.source.contains("var v_acc_3_3: f32;"), "{}", k.source);
        assert!(!k.source.contains("array<f32, 16>"));
    }

    #[test]
    fn vec4_buffers_only_where_aligned() {
        let op = Op::parse("matmul", "64,64,64").unwrap();
        let s = Schedule::default_for(&op, Target::Wgsl);
        let k = compile(&op, &s).unwrap();
        assert!(k.source.contains("var<storage, read> b_B: array<vec4<f32>>"), "{}", k.source);
        assert!(k.source.contains("var<storage, read> b_A: array<f32>"));
        let odd = Op::parse("matmul", "64,64,63").unwrap();
        let k = compile(&odd, &s).unwrap();
        assert!(k.source.contains("var<storage, read> b_B: array<f32>"));
    }

    #[test]
    fn register_rows_read_the_a_tile_as_vec4() {
        let op = Op::parse("matmul", "128,128,128").unwrap();
        let s = Schedule { x0: 8, y0: 8, x1: 64, y1: 64, r1: 8, r0: 8, ..Schedule::default_for(&op, Target::Wgsl) };
        let k = compile(&op, &s).unwrap();
        // The transposed A tile is an array of vec4 (its scalar stores address
        // components) and each row group is one read, split into lanes.
        assert!(k.source.contains("var<workgroup> b_As: array<vec4<f32>, 128>;"), "{}", k.source);
        assert!(k.source.contains("[i / 4i][i % 4i] = "), "{}", k.source);
        assert!(k.source.contains("(v_a4_1).w"), "{}", k.source);
        // Scalar schedules keep scalar rows.
        let scalar = compile(&op, &Schedule { vectorize: 1, ..s }).unwrap();
        assert!(scalar.source.contains("var<workgroup> b_As: array<f32, 512>;"), "{}", scalar.source);
    }

    #[test]
    fn validator_rejects_bad_wgsl() {
        let e = validate("fn main() { let x: i32 = 1.5f; }").unwrap_err();
        assert!(e.contains("naga"), "{e}");
    }
}
