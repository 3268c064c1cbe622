//! Loop IR → Wasm IR, following NNJIT's Algorithm 1: each `for` becomes
//! `block(local.set v lo; loop(body; v += step; br_if (v < hi)))`, guarded by
//! an `if` where the loop might not run at all. Unrolled loops are expanded
//! with their variable bound to each constant in turn.
//!
//! Addresses are put in a canonical affine form, `base + Σ cᵢ·vᵢ + c`, with the
//! loop variables of outer loops first (so engines can hoist the invariant
//! prefix) and the constant last. The lowering only leaves a constant at the
//! top of an address, `add(x, const c)` with `c ≥ 0`, when `x` cannot be
//! negative (all coefficients are non-negative): that is what makes the
//! offset pass sound.

use wasm_encoder::ValType;

use super::wir::{FOp, FUnOp, IOp, LoadOp, N, Node, StoreOp, WFunc};
use crate::ir::verify::Types;
use crate::ir::{BinOp, Buffer, ERF_CLAMP, ERF_P, ERF_Q, Expr, For, Func, Handle, LoadTy, Space, Stmt, Ty, UnOp, Var, const_i32};

/// Options that change instruction selection.
#[derive(Clone, Copy, Debug, Default)]
pub struct LowerOptions {
    /// Lower `f32x4` fma to `f32x4.relaxed_madd` instead of `mul` + `add`.
    pub relaxed_simd: bool,
}

/// The lowered function and the layout of its scratch memory.
#[derive(Debug)]
pub struct Lowered {
    pub func: WFunc,
    /// Bytes of scratch space the kernel needs (0: none, and no scratch parameter).
    pub scratch_bytes: u32,
}

#[derive(Clone, Copy)]
enum Binding {
    Local { local: u32, depth: u32 },
    Const(i32),
}

struct Lower<'a> {
    f: &'a Func,
    types: &'a Types,
    opts: LowerOptions,
    out: WFunc,
    bindings: Vec<Option<Binding>>,
    /// The Wasm local of each non-loop variable, once assigned.
    var_locals: Vec<Option<u32>>,
    scratch_base: Vec<u32>,
    depth: u32,
}

fn val_type(t: Ty) -> ValType {
    match t {
        Ty::I32 => ValType::I32,
        Ty::F32 => ValType::F32,
        Ty::F32x4 | Ty::U32x4 => ValType::V128,
    }
}

/// Lowers a verified function.
pub fn lower(f: &Func, types: &Types, opts: LowerOptions) -> Lowered {
    let params = f.params();
    let (scratch_base, scratch_bytes) = f.scratch_layout();
    // Kernels with scratch buffers take one more parameter: the scratch area's offset.
    let nparams = params.len() as u32 + (scratch_bytes > 0) as u32;
    let mut l = Lower {
        f,
        types,
        opts,
        out: WFunc { params: nparams, ..WFunc::default() },
        bindings: vec![None; f.vars.len()],
        var_locals: vec![None; f.vars.len()],
        scratch_base,
        depth: 0,
    };
    let body = l.block(&f.body);
    l.out.body = body;
    Lowered { func: l.out, scratch_bytes }
}

impl Lower<'_> {
    fn push(&mut self, n: Node) -> N {
        self.out.push(n)
    }

    fn block(&mut self, body: &[Stmt]) -> Vec<N> {
        let mut out = Vec::new();
        for s in body {
            self.stmt(s, &mut out);
        }
        out
    }

    fn local_of(&mut self, v: Handle<Var>) -> u32 {
        if let Some(l) = self.var_locals[v.index()] {
            return l;
        }
        let l = self.out.new_local(val_type(self.f.vars[v].ty));
        self.var_locals[v.index()] = Some(l);
        l
    }

    fn stmt(&mut self, s: &Stmt, out: &mut Vec<N>) {
        match s {
            Stmt::For(l) if l.unroll => self.unrolled(l, out),
            Stmt::For(l) => out.push(self.rolled(l)),
            Stmt::Set { var, value } => {
                let v = self.expr(*value);
                let local = self.local_of(*var);
                out.push(self.push(Node::LocalSet(local, v)));
            }
            Stmt::Store { buf, index, value } => {
                let op = match self.types.of(*value) {
                    Ty::F32 => StoreOp::F32,
                    Ty::I32 => StoreOp::I32,
                    Ty::F32x4 | Ty::U32x4 => StoreOp::V128,
                };
                let (mem, addr) = self.address(*buf, *index);
                let value = self.expr(*value);
                out.push(self.push(Node::Store { op, mem, offset: 0, addr, value }));
            }
            Stmt::If { cond, body } => {
                let c = self.expr(*cond);
                let b = self.block(body);
                out.push(self.push(Node::If(c, b)));
            }
            // The verifier rejects barriers in CPU kernels.
            Stmt::Barrier => unreachable!("barrier in a verified CPU kernel"),
        }
    }

    fn unrolled(&mut self, l: &For, out: &mut Vec<N>) {
        // The verifier guarantees constant bounds on unrolled loops.
        let lo = const_i32(self.f, l.lo).expect("verified constant bound");
        let hi = const_i32(self.f, l.hi).expect("verified constant bound");
        let saved = self.bindings[l.var.index()];
        let mut v = lo as i64;
        while v < hi as i64 {
            self.bindings[l.var.index()] = Some(Binding::Const(v as i32));
            for s in &l.body {
                self.stmt(s, out);
            }
            v += l.step as i64;
        }
        self.bindings[l.var.index()] = saved;
    }

    /// Algorithm 1.
    fn rolled(&mut self, l: &For) -> N {
        let local = self.out.new_local(ValType::I32);
        let saved = self.bindings[l.var.index()];
        self.depth += 1;
        self.bindings[l.var.index()] = Some(Binding::Local { local, depth: self.depth });
        let lo = self.expr(l.lo);
        let init = self.push(Node::LocalSet(local, lo));
        let mut body = self.block(&l.body);
        let get = self.push(Node::LocalGet(local));
        let step = self.push(Node::I32Const(l.step as i32));
        let next = self.push(Node::I32Bin(IOp::Add, get, step));
        let tee = self.push(Node::LocalTee(local, next));
        let hi = self.expr(l.hi);
        let cond = self.push(Node::I32Bin(IOp::LtS, tee, hi));
        body.push(self.push(Node::BrIfLoop(cond)));
        let lp = self.push(Node::Loop(body));
        self.depth -= 1;
        self.bindings[l.var.index()] = saved;
        let runs = matches!((const_i32(self.f, l.lo), const_i32(self.f, l.hi)), (Some(a), Some(b)) if a < b);
        if runs {
            self.push(Node::Block(vec![init, lp]))
        } else {
            // Bounds are evaluated outside the loop's scope, where the variable is not bound.
            let lo = self.expr(l.lo);
            let hi = self.expr(l.hi);
            let guard = self.push(Node::I32Bin(IOp::LtS, lo, hi));
            self.push(Node::If(guard, vec![init, lp]))
        }
    }

    fn expr(&mut self, e: Handle<Expr>) -> N {
        if self.types.of(e) == Ty::I32
            && let Some(c) = self.const_value(e)
        {
            return self.push(Node::I32Const(c));
        }
        match self.f.exprs[e] {
            Expr::I32(v) => self.push(Node::I32Const(v)),
            Expr::F32(v) => self.push(Node::F32Const(v)),
            Expr::Var(v) => match self.bindings[v.index()] {
                Some(Binding::Const(c)) => self.push(Node::I32Const(c)),
                Some(Binding::Local { local, .. }) => self.push(Node::LocalGet(local)),
                None => {
                    let local = self.local_of(v);
                    self.push(Node::LocalGet(local))
                }
            },
            Expr::Bin(op, a, b) => {
                let ty = self.types.of(a);
                if op == BinOp::Min {
                    let (x, y) = (self.expr(a), self.expr(b));
                    let (x2, y2) = (self.expr(a), self.expr(b));
                    let lt = self.push(Node::I32Bin(IOp::LtS, x2, y2));
                    return self.push(Node::Select(x, y, lt));
                }
                let (x, y) = (self.expr(a), self.expr(b));
                let node = match (ty, op) {
                    (Ty::I32, _) => Node::I32Bin(
                        match op {
                            BinOp::Add => IOp::Add,
                            BinOp::Sub => IOp::Sub,
                            BinOp::Mul => IOp::Mul,
                            BinOp::Div => IOp::DivS,
                            BinOp::Rem => IOp::RemS,
                            BinOp::Shr => IOp::ShrU,
                            BinOp::And => IOp::And,
                            BinOp::Or => IOp::Or,
                            BinOp::Lt => IOp::LtS,
                            BinOp::Min | BinOp::Max => unreachable!("verified: min is handled above, max is float only"),
                        },
                        x,
                        y,
                    ),
                    (Ty::U32x4, BinOp::Shr) => Node::I32x4ShrU(x, y),
                    (Ty::U32x4, BinOp::Add) => Node::I32x4Add(x, y),
                    (Ty::U32x4, _) => Node::V128And(x, y),
                    (Ty::F32, _) => Node::F32Bin(fop(op), x, y),
                    (Ty::F32x4, _) => Node::F32x4Bin(fop(op), x, y),
                };
                self.push(node)
            }
            Expr::Fma(a, b, c) => {
                let vector = self.types.of(a) == Ty::F32x4;
                let (x, y, z) = (self.expr(a), self.expr(b), self.expr(c));
                if vector && self.opts.relaxed_simd {
                    self.push(Node::F32x4RelaxedMadd(x, y, z))
                } else if vector {
                    let m = self.push(Node::F32x4Bin(FOp::Mul, x, y));
                    self.push(Node::F32x4Bin(FOp::Add, m, z))
                } else {
                    let m = self.push(Node::F32Bin(FOp::Mul, x, y));
                    self.push(Node::F32Bin(FOp::Add, m, z))
                }
            }
            Expr::Splat(a) => {
                let x = self.expr(a);
                match self.types.of(a) {
                    Ty::F32 => self.push(Node::F32x4Splat(x)),
                    _ => self.push(Node::I32x4Splat(x)),
                }
            }
            Expr::ToF32(a) => {
                let x = self.expr(a);
                match self.types.of(a) {
                    Ty::I32 => self.push(Node::F32ConvertI32U(x)),
                    _ => self.push(Node::F32x4ConvertI32x4U(x)),
                }
            }
            Expr::FromBits(a) => {
                let x = self.expr(a);
                self.push(Node::F32ReinterpretI32(x))
            }
            Expr::SToF32(a) => {
                let x = self.expr(a);
                self.push(Node::F32x4ConvertI32x4S(x))
            }
            Expr::ToI32(a) => {
                let x = self.expr(a);
                self.push(Node::I32TruncSatF32S(x))
            }
            Expr::ExtendS(a, e) => {
                let x = self.expr(a);
                self.push(Node::ExtendS(e, x))
            }
            Expr::DotI16(a, b) => {
                let (x, y) = (self.expr(a), self.expr(b));
                self.push(Node::I32x4DotI16x8S(x, y))
            }
            Expr::HSum(a) => {
                let x = self.expr(a);
                let t = self.out.new_local(ValType::V128);
                let tee = self.push(Node::LocalTee(t, x));
                let lanes: Vec<N> = (0..4u8)
                    .map(|i| {
                        let src = if i == 0 { tee } else { self.push(Node::LocalGet(t)) };
                        self.push(Node::F32x4ExtractLane(src, i))
                    })
                    .collect();
                let lo = self.push(Node::F32Bin(FOp::Add, lanes[0], lanes[1]));
                let hi = self.push(Node::F32Bin(FOp::Add, lanes[2], lanes[3]));
                self.push(Node::F32Bin(FOp::Add, lo, hi))
            }
            Expr::Lane(a, n) => {
                let wide = self.types.of(a);
                let x = self.expr(a);
                if wide == Ty::U32x4 { self.push(Node::I32x4ExtractLane(x, n)) } else { self.push(Node::F32x4ExtractLane(x, n)) }
            }
            Expr::Load { ty, buf, index } => {
                let op = match ty {
                    LoadTy::F32 => LoadOp::F32,
                    LoadTy::U32 => LoadOp::I32,
                    LoadTy::F32x4 | LoadTy::U32x4 => LoadOp::V128,
                };
                let (mem, addr) = self.address(buf, index);
                self.push(Node::Load { op, mem, offset: 0, addr })
            }
            Expr::Un(op, a) => {
                let vector = self.types.of(a) == Ty::F32x4;
                let x = self.expr(a);
                match op {
                    UnOp::Relu => {
                        let zero = self.fconst(0.0, vector);
                        self.fbin(FOp::Max, x, zero, vector)
                    }
                    UnOp::Erf => self.erf(x, vector),
                    UnOp::Abs | UnOp::Round => {
                        let u = if op == UnOp::Abs { FUnOp::Abs } else { FUnOp::Nearest };
                        self.push(if vector { Node::F32x4Un(u, x) } else { Node::F32Un(u, x) })
                    }
                    UnOp::Rsqrt | UnOp::Silu | UnOp::Exp | UnOp::Recip => unreachable!("GPU-only function in a verified CPU kernel"),
                }
            }
            Expr::Builtin(_) | Expr::ShuffleXor(..) | Expr::Compose(_) => unreachable!("GPU-only expression in a verified CPU kernel"),
        }
    }

    /// An `f32` constant, splat to `f32x4` when `vector`.
    fn fconst(&mut self, v: f32, vector: bool) -> N {
        let c = self.push(Node::F32Const(v));
        if vector { self.push(Node::F32x4Splat(c)) } else { c }
    }

    fn fbin(&mut self, op: FOp, a: N, b: N, vector: bool) -> N {
        self.push(if vector { Node::F32x4Bin(op, a, b) } else { Node::F32Bin(op, a, b) })
    }

    /// [`crate::ir::erf_f32`] on the value of node `x`, lane-wise when
    /// `vector`. The clamped argument and its square live in two fresh
    /// locals; every read of a local is evaluated after the `local.tee`
    /// that sets it (Wasm evaluates operands left to right).
    fn erf(&mut self, x: N, vector: bool) -> N {
        let ty = if vector { ValType::V128 } else { ValType::F32 };
        let (t, t2) = (self.out.new_local(ty), self.out.new_local(ty));
        let hi = self.fconst(ERF_CLAMP, vector);
        let lo = self.fconst(-ERF_CLAMP, vector);
        let clamped = self.fbin(FOp::Min, x, hi, vector);
        let clamped = self.fbin(FOp::Max, clamped, lo, vector);
        let tee = self.push(Node::LocalTee(t, clamped));
        let get = self.push(Node::LocalGet(t));
        let sq = self.fbin(FOp::Mul, tee, get, vector);
        let mut x2 = Some(self.push(Node::LocalTee(t2, sq)));
        // Horner's rule for p: its first step holds the tees.
        let mut p = self.fconst(ERF_P[0], vector);
        for &c in &ERF_P[1..] {
            let s = x2.take().unwrap_or_else(|| self.push(Node::LocalGet(t2)));
            let m = self.fbin(FOp::Mul, p, s, vector);
            let c = self.fconst(c, vector);
            p = self.fbin(FOp::Add, m, c, vector);
        }
        let get = self.push(Node::LocalGet(t));
        let p = self.fbin(FOp::Mul, p, get, vector);
        let mut q = self.fconst(ERF_Q[0], vector);
        for &c in &ERF_Q[1..] {
            let s = self.push(Node::LocalGet(t2));
            let m = self.fbin(FOp::Mul, q, s, vector);
            let c = self.fconst(c, vector);
            q = self.fbin(FOp::Add, m, c, vector);
        }
        self.fbin(FOp::Div, p, q, vector)
    }

    /// The value of an i32 expression that is constant under the current bindings.
    fn const_value(&self, e: Handle<Expr>) -> Option<i32> {
        let (terms, c) = self.affine(e)?;
        terms.is_empty().then_some(c as i32)
    }

    /// `e` as `Σ coef·var + c` under the current bindings, if it is affine.
    fn affine(&self, e: Handle<Expr>) -> Option<(Vec<Term>, i64)> {
        match self.f.exprs[e] {
            Expr::I32(v) => Some((vec![], v as i64)),
            Expr::Var(v) => match self.bindings[v.index()] {
                Some(Binding::Const(c)) => Some((vec![], c as i64)),
                Some(Binding::Local { local, depth }) => Some((vec![Term { local, depth, coef: 1 }], 0)),
                None => None,
            },
            Expr::Bin(op @ (BinOp::Add | BinOp::Sub), a, b) => {
                let (mut ta, ca) = self.affine(a)?;
                let (tb, cb) = self.affine(b)?;
                let sign = if op == BinOp::Add { 1 } else { -1 };
                for t in tb {
                    add_term(&mut ta, Term { coef: sign * t.coef, ..t });
                }
                Some((ta, ca + sign * cb))
            }
            Expr::Bin(BinOp::Mul, a, b) => {
                let (ta, ca) = self.affine(a)?;
                let (tb, cb) = self.affine(b)?;
                let (terms, k, c) = match (ta.is_empty(), tb.is_empty()) {
                    (_, true) => (ta, cb, ca),
                    (true, false) => (tb, ca, cb),
                    _ => return None,
                };
                let terms: Vec<_> = terms.into_iter().map(|t| Term { coef: t.coef * k, ..t }).filter(|t| t.coef != 0).collect();
                Some((terms, c * k))
            }
            _ => None,
        }
        // Coefficients past i32 would make the emitted arithmetic wrap differently.
        .filter(|(t, c)| t.iter().all(|x| i32::try_from(x.coef * 4).is_ok()) && i32::try_from(*c * 4).is_ok())
    }

    /// Memory index and byte address of element `index` of `buf`.
    fn address(&mut self, buf: Handle<Buffer>, index: Handle<Expr>) -> (u32, N) {
        let b: &Buffer = &self.f.buffers[buf];
        let mem = 0;
        let (local, const_base) = match b.space {
            Space::Param(n) => (n, 0),
            // The scratch offset is the parameter after the arguments.
            Space::Scratch => (self.out.params - 1, self.scratch_base[buf.index()] as i64),
            Space::Workgroup | Space::Global => unreachable!("GPU buffer in a verified CPU kernel"),
        };
        let base = self.push(Node::LocalGet(local));
        let Some((mut terms, c)) = self.affine(index) else {
            let i = self.expr(index);
            let four = self.push(Node::I32Const(4));
            let scaled = self.push(Node::I32Bin(IOp::Mul, i, four));
            let mut addr = self.push(Node::I32Bin(IOp::Add, base, scaled));
            if const_base != 0 {
                let k = self.push(Node::I32Const(const_base as i32));
                addr = self.push(Node::I32Bin(IOp::Add, k, addr));
            }
            return (mem, addr);
        };
        // Outer loops first, so the loop-invariant prefix is a subexpression.
        terms.sort_by_key(|t| t.depth);
        let nonneg = terms.iter().all(|t| t.coef >= 0);
        let mut acc = base;
        for t in &terms {
            let get = self.push(Node::LocalGet(t.local));
            let k = self.push(Node::I32Const((t.coef * 4) as i32));
            let scaled = self.push(Node::I32Bin(IOp::Mul, get, k));
            acc = self.push(Node::I32Bin(IOp::Add, acc, scaled));
        }
        let c_bytes = c * 4 + const_base;
        let addr = if c_bytes == 0 {
            acc
        } else {
            let k = self.push(Node::I32Const(c_bytes as i32));
            if nonneg {
                self.push(Node::I32Bin(IOp::Add, acc, k))
            } else {
                // Constant first: the offset pass must not fold it.
                self.push(Node::I32Bin(IOp::Add, k, acc))
            }
        };
        (mem, addr)
    }
}

/// One term `coef · local` of an affine index; `depth` is the loop depth
/// that binds the local (outer loops are smaller).
#[derive(Clone, Copy, Debug)]
struct Term {
    local: u32,
    depth: u32,
    coef: i64,
}

fn add_term(terms: &mut Vec<Term>, t: Term) {
    if let Some(x) = terms.iter_mut().find(|x| x.local == t.local) {
        x.coef += t.coef;
    } else {
        terms.push(t);
    }
    terms.retain(|x| x.coef != 0);
}

fn fop(op: BinOp) -> FOp {
    match op {
        BinOp::Add => FOp::Add,
        BinOp::Sub => FOp::Sub,
        BinOp::Mul => FOp::Mul,
        BinOp::Div => FOp::Div,
        BinOp::Max => FOp::Max,
        _ => unreachable!("verified float operator"),
    }
}
