//! The IR verifier. It checks handles first, then types, assignment before
//! use, loop rules, and (by interval arithmetic over loop ranges) that every
//! index whose range is known stays inside its buffer. An error here always
//! means a bug in whatever produced the IR.

use super::{BinOp, Buffer, Elem, Expr, Func, Handle, LoadTy, Space, Stmt, Ty, Var, const_i32};

/// What the verifier found wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("IR verifier: {0}")]
pub struct VerifyError(pub String);

/// Side table of the verifier's results: the type of every expression.
#[derive(Clone, Debug, Default)]
pub struct Types {
    tys: Vec<Option<Ty>>,
}

impl Types {
    /// The type of a verified, reachable expression.
    pub fn of(&self, e: Handle<super::Expr>) -> Ty {
        self.tys[e.index()].expect("expression was not reached by the verifier")
    }
}

/// Which backend the IR is meant for: GPU builtins and barriers are legal only on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Cpu,
    Gpu,
}

/// A closed interval of integer values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub lo: i64,
    pub hi: i64,
}

struct Verifier<'a> {
    f: &'a Func,
    flavor: Flavor,
    types: Types,
    assigned: Vec<bool>,
    ranges: Vec<Option<Range>>,
    loop_vars: Vec<Handle<Var>>,
}

/// Verifies `f` for a backend flavor and returns the expression types.
pub fn verify(f: &Func, flavor: Flavor) -> Result<Types, VerifyError> {
    check_handles(f)?;
    let mut v = Verifier {
        f,
        flavor,
        types: Types { tys: vec![None; f.exprs.len()] },
        assigned: vec![false; f.vars.len()],
        ranges: vec![None; f.vars.len()],
        loop_vars: Vec::new(),
    };
    let mut seen = Vec::new();
    for (_, b) in f.buffers.iter() {
        if let Space::Param(n) = b.space {
            if seen.contains(&n) {
                return Err(VerifyError(format!("two buffers are param {n}")));
            }
            seen.push(n);
        }
        if b.len == 0 {
            return Err(VerifyError(format!("buffer {} has length 0", b.name)));
        }
        if b.row > 0 && (b.space != Space::Workgroup || !b.len.is_multiple_of(b.row)) {
            return Err(VerifyError(format!("buffer {} has rows of {} but is not a workgroup buffer of whole rows", b.name, b.row)));
        }
    }
    seen.sort_unstable();
    // A Wasm kernel's params are its function's parameters, all of them; a
    // GPU pass binds only the arguments it uses (a `reduce` pass reads no A).
    if flavor != Flavor::Gpu && seen.iter().enumerate().any(|(i, &n)| i as u32 != n) {
        return Err(VerifyError(format!("params must be numbered 0..n without gaps, got {seen:?}")));
    }
    v.block(&f.body)?;
    Ok(v.types)
}

fn check_handles(f: &Func) -> Result<(), VerifyError> {
    let bad = |what: &str, i: usize| Err(VerifyError(format!("dangling {what} handle #{i}")));
    let n = f.exprs.len();
    for (h, e) in f.exprs.iter() {
        match e {
            Expr::Load { buf, .. } if f.buffers.get(*buf).is_none() => return bad("buffer", buf.index()),
            Expr::Var(v) if f.vars.get(*v).is_none() => return bad("variable", v.index()),
            _ => {}
        }
        let operands = e.operands().into_iter().flatten();
        // Operands come before their users, so the expression graph is acyclic.
        for o in operands {
            if o.index() >= n || o.index() >= h.index() {
                return bad("expression", o.index());
            }
        }
    }
    fn stmts(f: &Func, body: &[Stmt]) -> Result<(), VerifyError> {
        let e_ok = |e: Handle<Expr>| f.exprs.get(e).is_some();
        for s in body {
            let ok = match s {
                Stmt::For(l) => {
                    stmts(f, &l.body)?;
                    f.vars.get(l.var).is_some() && e_ok(l.lo) && e_ok(l.hi)
                }
                Stmt::Set { var, value } => f.vars.get(*var).is_some() && e_ok(*value),
                Stmt::Store { buf, index, value } => f.buffers.get(*buf).is_some() && e_ok(*index) && e_ok(*value),
                Stmt::If { cond, body } => {
                    stmts(f, body)?;
                    e_ok(*cond)
                }
                Stmt::Barrier => true,
            };
            if !ok {
                return Err(VerifyError("a statement holds a dangling handle".into()));
            }
        }
        Ok(())
    }
    stmts(f, &f.body)
}

impl Verifier<'_> {
    fn err<T>(&self, msg: String) -> Result<T, VerifyError> {
        Err(VerifyError(msg))
    }

    fn show(&self, e: Handle<Expr>) -> String {
        super::print::expr(self.f, e)
    }

    fn block(&mut self, body: &[Stmt]) -> Result<(), VerifyError> {
        for s in body {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), VerifyError> {
        match s {
            Stmt::For(l) => {
                let var = &self.f.vars[l.var];
                if var.ty != Ty::I32 {
                    return self.err(format!("loop variable {} is {}, not i32", var.name, var.ty.name()));
                }
                if self.loop_vars.contains(&l.var) {
                    return self.err(format!("loop variable {} is reused by a nested loop", var.name));
                }
                if l.step == 0 {
                    return self.err(format!("loop over {} has step 0", var.name));
                }
                for b in [l.lo, l.hi] {
                    if self.expr(b)? != Ty::I32 {
                        return self.err(format!("loop bound {} is not i32", self.show(b)));
                    }
                }
                let (lo_c, hi_c) = (const_i32(self.f, l.lo), const_i32(self.f, l.hi));
                if l.unroll && (lo_c.is_none() || hi_c.is_none()) {
                    return self.err(format!("unrolled loop over {} needs constant bounds", var.name));
                }
                let range = match (self.range(l.lo), self.range(l.hi)) {
                    (Some(lo), Some(hi)) if hi.hi > lo.lo => {
                        let last = if let (Some(a), Some(b)) = (lo_c, hi_c) {
                            a as i64 + ((b as i64 - a as i64 - 1) / l.step as i64) * l.step as i64
                        } else {
                            hi.hi - 1
                        };
                        Some(Range { lo: lo.lo, hi: last })
                    }
                    _ => None,
                };
                let runs = matches!((lo_c, hi_c), (Some(a), Some(b)) if a < b);
                let before = self.assigned.clone();
                let saved = self.ranges[l.var.index()];
                self.ranges[l.var.index()] = range;
                self.assigned[l.var.index()] = true;
                self.loop_vars.push(l.var);
                self.block(&l.body)?;
                self.loop_vars.pop();
                self.ranges[l.var.index()] = saved;
                if !runs {
                    self.assigned = before;
                }
            }
            Stmt::Set { var, value } => {
                if self.loop_vars.contains(var) {
                    return self.err(format!("loop variable {} is assigned in its body", self.f.vars[*var].name));
                }
                let ty = self.expr(*value)?;
                let v = &self.f.vars[*var];
                if ty != v.ty {
                    return self.err(format!("{} is {} but is assigned a {} ({})", v.name, v.ty.name(), ty.name(), self.show(*value)));
                }
                self.assigned[var.index()] = true;
                // A variable assigned anywhere has no statically known range.
                self.ranges[var.index()] = None;
            }
            Stmt::Store { buf, index, value } => {
                let ty = self.expr(*value)?;
                let b = &self.f.buffers[*buf];
                if !b.writable {
                    return self.err(format!("store to read-only buffer {}", b.name));
                }
                let lt = match ty {
                    Ty::F32 => LoadTy::F32,
                    Ty::F32x4 => LoadTy::F32x4,
                    Ty::I32 => LoadTy::U32,
                    Ty::U32x4 => LoadTy::U32x4,
                };
                self.access(*buf, lt, *index)?;
            }
            Stmt::If { cond, body } => {
                if self.expr(*cond)? != Ty::I32 {
                    return self.err(format!("condition {} is not i32", self.show(*cond)));
                }
                let before = self.assigned.clone();
                self.block(body)?;
                self.assigned = before;
            }
            Stmt::Barrier => {
                if self.flavor != Flavor::Gpu {
                    return self.err("barrier outside a GPU kernel".into());
                }
            }
        }
        Ok(())
    }

    fn access(&mut self, buf: Handle<Buffer>, ty: LoadTy, index: Handle<Expr>) -> Result<(), VerifyError> {
        let b = &self.f.buffers[buf];
        if !b.elem.holds(ty) {
            return self.err(format!("{} access to buffer {} of another element type", ty.name(), b.name));
        }
        if b.elem == Elem::F16 && self.flavor != Flavor::Gpu {
            return self.err(format!("f16 buffer {} outside a GPU kernel", b.name));
        }
        if matches!(b.space, Space::Workgroup | Space::Global) && self.flavor != Flavor::Gpu {
            return self.err(format!("workgroup or global buffer {} outside a GPU kernel", b.name));
        }
        if self.expr(index)? != Ty::I32 {
            return self.err(format!("index {} is not i32", self.show(index)));
        }
        if let Some(r) = self.range(index) {
            let len = b.len as i64;
            if r.lo < 0 || r.hi + ty.lanes() as i64 > len {
                return self.err(format!(
                    "{}[{}] reaches elements {}..{} but the buffer has {}",
                    b.name,
                    self.show(index),
                    r.lo,
                    r.hi + ty.lanes() as i64,
                    len
                ));
            }
        }
        Ok(())
    }

    fn expr(&mut self, e: Handle<Expr>) -> Result<Ty, VerifyError> {
        // No memo: a shared expression is checked again in each context, since
        // loop ranges and assignments differ between contexts.
        let ty = match self.f.exprs[e] {
            Expr::I32(_) => Ty::I32,
            Expr::F32(_) => Ty::F32,
            Expr::Var(v) => {
                if !self.assigned[v.index()] {
                    return self.err(format!("{} is read before it is assigned", self.f.vars[v].name));
                }
                self.f.vars[v].ty
            }
            Expr::Bin(op, a, b) => {
                let (ta, tb) = (self.expr(a)?, self.expr(b)?);
                let float = ta == tb && (ta == Ty::F32 || ta == Ty::F32x4);
                if op == BinOp::Div && float && self.flavor != Flavor::Cpu {
                    return self.err(format!("float `{}` outside a CPU kernel in {}", op.symbol(), self.show(e)));
                }
                let ok = match op {
                    BinOp::Add => ta == tb,
                    BinOp::Sub | BinOp::Mul => ta == tb && ta != Ty::U32x4,
                    BinOp::Max => float,
                    BinOp::Div if float => true,
                    BinOp::Div | BinOp::Rem | BinOp::Min | BinOp::Lt => ta == Ty::I32 && tb == Ty::I32,
                    BinOp::Shr => (ta == Ty::I32 || ta == Ty::U32x4) && tb == Ty::I32,
                    BinOp::And => ta == tb && (ta == Ty::I32 || ta == Ty::U32x4),
                    BinOp::Or => ta == Ty::I32 && tb == Ty::I32,
                };
                if !ok {
                    return self.err(format!("`{}` on {} and {} in {}", op.symbol(), ta.name(), tb.name(), self.show(e)));
                }
                if matches!(op, BinOp::Div | BinOp::Rem) && ta == Ty::I32 && const_i32(self.f, b).is_none_or(|c| c <= 0) {
                    return self.err(format!("`{}` needs a positive constant divisor in {}", op.symbol(), self.show(e)));
                }
                ta
            }
            Expr::Fma(a, b, c) => {
                let t = self.expr(a)?;
                if !(t == Ty::F32 || t == Ty::F32x4) || self.expr(b)? != t || self.expr(c)? != t {
                    return self.err(format!("fma operands must all be f32 or all f32x4 in {}", self.show(e)));
                }
                t
            }
            Expr::Splat(a) => match self.expr(a)? {
                Ty::F32 => Ty::F32x4,
                Ty::I32 => Ty::U32x4,
                t => return self.err(format!("splat of a {}", t.name())),
            },
            Expr::ToF32(a) => match self.expr(a)? {
                Ty::I32 => Ty::F32,
                Ty::U32x4 => Ty::F32x4,
                t => return self.err(format!("tof32 of a {}", t.name())),
            },
            Expr::SToF32(a) => match self.expr(a)? {
                Ty::U32x4 => Ty::F32x4,
                t => return self.err(format!("stof32 of a {}", t.name())),
            },
            Expr::ToI32(a) => {
                if self.flavor != Flavor::Cpu {
                    return self.err(format!("toi32 outside a CPU kernel in {}", self.show(e)));
                }
                match self.expr(a)? {
                    Ty::F32 => Ty::I32,
                    t => return self.err(format!("toi32 of a {} (must be f32)", t.name())),
                }
            }
            Expr::ExtendS(a, x) => {
                if self.flavor != Flavor::Cpu {
                    return self.err(format!("{} outside a CPU kernel in {}", x.name(), self.show(e)));
                }
                match self.expr(a)? {
                    Ty::U32x4 => Ty::U32x4,
                    t => return self.err(format!("{} of a {} (must be u32x4)", x.name(), t.name())),
                }
            }
            Expr::DotI16(a, b) => {
                if self.flavor != Flavor::Cpu {
                    return self.err(format!("dot16 outside a CPU kernel in {}", self.show(e)));
                }
                match (self.expr(a)?, self.expr(b)?) {
                    (Ty::U32x4, Ty::U32x4) => Ty::U32x4,
                    (ta, tb) => return self.err(format!("dot16 of {} and {} (both must be u32x4)", ta.name(), tb.name())),
                }
            }
            Expr::FromBits(a) => match self.expr(a)? {
                Ty::I32 => Ty::F32,
                t => return self.err(format!("bitsf32 of a {}", t.name())),
            },
            Expr::HSum(a) => match self.expr(a)? {
                Ty::F32x4 => Ty::F32,
                t => return self.err(format!("hsum of a {}", t.name())),
            },
            Expr::Lane(a, n) => match self.expr(a)? {
                Ty::F32x4 if n < 4 => Ty::F32,
                Ty::U32x4 if n < 4 => Ty::I32,
                t @ (Ty::F32x4 | Ty::U32x4) => return self.err(format!("lane {n} of an {} (lanes are 0 to 3)", t.name())),
                t => return self.err(format!("lane of a {}", t.name())),
            },
            Expr::Un(op, a) => {
                if op.cpu_only() && self.flavor != Flavor::Cpu {
                    return self.err(format!("{} outside a CPU kernel in {}", op.name(), self.show(e)));
                }
                if op.gpu_only() && self.flavor != Flavor::Gpu {
                    return self.err(format!("{} outside a GPU kernel in {}", op.name(), self.show(e)));
                }
                match self.expr(a)? {
                    t @ (Ty::F32 | Ty::F32x4) => t,
                    t => return self.err(format!("{} of a {}", op.name(), t.name())),
                }
            }
            Expr::Load { ty, buf, index } => {
                self.access(buf, ty, index)?;
                ty.value_ty()
            }
            Expr::Builtin(b) => {
                if self.flavor != Flavor::Gpu {
                    return self.err(format!("{} outside a GPU kernel", b.name()));
                }
                Ty::I32
            }
            Expr::Compose(lanes) => {
                if self.flavor != Flavor::Gpu {
                    return self.err("f32x4 (compose) outside a GPU kernel".into());
                }
                for l in lanes {
                    match self.expr(l)? {
                        Ty::F32 => {}
                        t => return self.err(format!("f32x4 of a {} lane (lanes are f32)", t.name())),
                    }
                }
                Ty::F32x4
            }
            Expr::ShuffleXor(a, m) => {
                if self.flavor != Flavor::Gpu {
                    return self.err("shufflexor outside a GPU kernel".into());
                }
                match self.expr(a)? {
                    Ty::F32 => {}
                    t => return self.err(format!("shufflexor of a {}", t.name())),
                }
                match crate::ir::const_i32(self.f, m) {
                    Some(1..=64) => {}
                    _ => return self.err("shufflexor's mask must be a constant from 1 to 64".into()),
                }
                self.expr(m)?;
                Ty::F32
            }
        };
        self.types.tys[e.index()] = Some(ty);
        Ok(ty)
    }

    /// The range of an i32 expression, where loop ranges make it known.
    fn range(&self, e: Handle<Expr>) -> Option<Range> {
        interval(self.f, e, &|leaf| match *leaf {
            Expr::Var(v) => self.ranges[v.index()],
            _ => None,
        })
    }
}

/// The range of the i32 expression `e` by interval arithmetic, `None` where
/// unknown. Literals are their own range; `leaf` gives the range of every
/// other operand that is not a binary operation (variables, builtins).
/// A range past i32 is unknown: the backends' arithmetic would wrap there.
pub(crate) fn interval(f: &Func, e: Handle<Expr>, leaf: &dyn Fn(&Expr) -> Option<Range>) -> Option<Range> {
    let r = match f.exprs[e] {
        Expr::I32(v) => Range { lo: v as i64, hi: v as i64 },
        Expr::Bin(op, a, b) => {
            let (x, y) = (interval(f, a, leaf)?, interval(f, b, leaf)?);
            match op {
                BinOp::Add => Range { lo: x.lo + y.lo, hi: x.hi + y.hi },
                BinOp::Sub => Range { lo: x.lo - y.hi, hi: x.hi - y.lo },
                BinOp::Mul => {
                    let c = [x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi];
                    Range { lo: *c.iter().min()?, hi: *c.iter().max()? }
                }
                BinOp::Div if y.lo == y.hi && y.lo > 0 && x.lo >= 0 => Range { lo: x.lo / y.lo, hi: x.hi / y.lo },
                BinOp::Rem if y.lo == y.hi && y.lo > 0 && x.lo >= 0 => Range { lo: 0, hi: (y.lo - 1).min(x.hi) },
                BinOp::Min => Range { lo: x.lo.min(y.lo), hi: x.hi.min(y.hi) },
                BinOp::Lt => Range { lo: 0, hi: 1 },
                BinOp::And if y.lo == y.hi && y.lo >= 0 => Range { lo: 0, hi: y.lo },
                BinOp::Or if x.lo >= 0 && y.lo >= 0 => {
                    // At most every bit below the larger operand's top bit.
                    let top = x.hi.max(y.hi);
                    Range { lo: x.lo.max(y.lo), hi: if top == 0 { 0 } else { (1i64 << (64 - top.leading_zeros())) - 1 } }
                }
                BinOp::Shr if y.lo == y.hi && x.lo >= 0 && (0..32).contains(&y.lo) => Range { lo: x.lo >> y.lo, hi: x.hi >> y.lo },
                _ => return None,
            }
        }
        ref other => leaf(other)?,
    };
    (r.lo >= i32::MIN as i64 && r.hi <= i32::MAX as i64).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse::parse;

    fn check(src: &str) -> Result<Types, VerifyError> {
        verify(&parse(src).unwrap(), Flavor::Cpu)
    }

    #[test]
    fn accepts_a_good_kernel() {
        check(
            "kernel k { buf A: f32[16] param 0 buf C: f32[16] param 1 rw var i: i32
               for i in 0..16 step 4 { store C[i] = load.f32x4 A[i] } }",
        )
        .unwrap();
    }

    #[test]
    fn catches_out_of_bounds_vector_access() {
        let e = check(
            "kernel k { buf A: f32[16] param 0 buf C: f32[16] param 1 rw var i: i32
               for i in 0..16 step 2 { store C[i] = load.f32x4 A[i] } }",
        )
        .unwrap_err();
        assert!(e.0.contains("reaches elements 0..18"), "{e}");
    }

    #[test]
    fn catches_type_and_rule_errors() {
        let cases = [
            ("var x: f32 x = 1", "assigned a i32"),
            ("var x: f32 var y: f32 x = y", "read before"),
            ("var i: i32 for i in 0..4 { i = 1 }", "assigned in its body"),
            ("var i: i32 var n: i32 n = 3 for i in 0..n unroll { }", "constant bounds"),
            ("store A[0] = 1.0", "read-only"),
            ("store C[0] = 1", "of another element type"),
            ("var x: f32 x = load.f32 A[0] + splat(1.0)", "`+` on f32 and f32x4"),
            ("barrier", "outside a GPU"),
            ("var x: f32 x = shufflexor(1.0, 1)", "outside a GPU"),
            ("var x: f32 x = lane0(load.u32x4 W[0])", "assigned a i32"),
            ("var x: f32 x = lane0(1.0)", "lane of a f32"),
            ("var x: f32 x = erf(1)", "erf of a i32"),
            ("var x: f32 x = relu(load.u32x4 W[0])", "relu of a u32x4"),
            ("var x: f32 x = erf(splat(1.0))", "assigned a f32x4"),
            ("var x: f32 x = max(1.0, splat(1.0))", "`max` on f32 and f32x4"),
            ("var x: i32 x = max(1, 2)", "`max` on i32 and i32"),
            ("var x: i32 var y: i32 y = 2 x = 4 / y", "positive constant divisor"),
            ("var x: i32 x = toi32(splat(1.0))", "toi32 of a f32x4"),
            ("var x: f32 x = round(1)", "round of a i32"),
        ];
        for (body, want) in cases {
            let src = format!("kernel k {{ buf A: f32[16] param 0 buf W: u32[16] param 2 buf C: f32[16] param 1 rw {body} }}");
            let e = parse(&src).map_err(|e| VerifyError(e.to_string())).and_then(|f| verify(&f, Flavor::Cpu)).unwrap_err();
            assert!(e.0.contains(want), "{body}: {e}");
        }
    }

    /// The activation-quantising operations (float `/`, `abs`, `round`,
    /// `toi32`) type-check on the CPU and are refused on the GPU; float
    /// `max` type-checks on both (`+merge`'s largest score on the GPU).
    #[test]
    fn quantising_operations_are_cpu_only() {
        let body = "var x: f32 var v: f32x4 var q: i32
            v = max(abs(load.f32x4 A[0]), splat(1.0))
            x = 32767.0 / max(lane0(v), 0.5)
            v = v / splat(x)
            q = toi32(round(load.f32 A[1] * x))
            store C[0] = x";
        let src = format!("kernel k {{ buf A: f32[16] param 0 buf C: f32[16] param 1 rw {body} }}");
        let f = parse(&src).unwrap();
        verify(&f, Flavor::Cpu).unwrap();
        let e = verify(&f, Flavor::Gpu).unwrap_err();
        assert!(e.0.contains("outside a CPU kernel"), "{e}");
        assert_eq!(print_parse(&f), crate::ir::print::print(&f));
        for one in ["q = toi32(1.0)", "x = abs(1.0)", "x = round(1.0)", "x = 1.0 / 2.0"] {
            let src = format!("kernel k {{ buf C: f32[16] param 0 rw var x: f32 var q: i32 {one} }}");
            let e = verify(&parse(&src).unwrap(), Flavor::Gpu).unwrap_err();
            assert!(e.0.contains("outside a CPU kernel"), "{one}: {e}");
        }
        let src = "kernel k { buf C: f32[16] param 0 rw var x: f32 x = max(1.0, 2.0) store C[0] = x }";
        verify(&parse(src).unwrap(), Flavor::Gpu).unwrap();
        // exp and recip are the GPU's only (+merge's weights).
        for one in ["x = exp(1.0)", "x = recip(2.0)"] {
            let src = format!("kernel k {{ buf C: f32[16] param 0 rw var x: f32 {one} store C[0] = x }}");
            let f = parse(&src).unwrap();
            verify(&f, Flavor::Gpu).unwrap();
            let e = verify(&f, Flavor::Cpu).unwrap_err();
            assert!(e.0.contains("outside a GPU kernel"), "{one}: {e}");
            assert_eq!(print_parse(&f), crate::ir::print::print(&f));
        }
    }

    fn print_parse(f: &Func) -> String {
        crate::ir::print::print(&parse(&crate::ir::print::print(f)).unwrap())
    }

    #[test]
    fn f16_buffers_hold_f32_values_on_the_gpu_only() {
        let src = "kernel k { buf A: f16[16] param 0 buf C: f16[16] param 1 rw var i: i32
               for i in 0..16 step 4 { store C[i] = load.f32x4 A[i] } }";
        let f = parse(src).unwrap();
        verify(&f, Flavor::Gpu).unwrap();
        assert!(verify(&f, Flavor::Cpu).unwrap_err().0.contains("f16 buffer A outside a GPU kernel"));
        // Words are not floats.
        let src = "kernel k { buf A: f16[16] param 0 buf C: f16[16] param 1 rw var x: i32 x = load.u32 A[0] }";
        assert!(verify(&parse(src).unwrap(), Flavor::Gpu).unwrap_err().0.contains("of another element type"));
        // It prints and parses back.
        assert_eq!(parse(&crate::ir::print::print(&f)).unwrap().buffers.iter().next().unwrap().1.elem, crate::ir::Elem::F16);
    }

    #[test]
    fn subgroup_shuffles_on_the_gpu_take_an_f32_and_a_constant_mask() {
        let gpu = |body: &str| {
            let src = format!("kernel k {{ buf C: f32[16] param 0 rw var x: f32 var m: i32 {body} }}");
            verify(&parse(&src).unwrap(), Flavor::Gpu)
        };
        gpu("x = 2.0 x = x + shufflexor(x, 4) store C[0] = x").unwrap();
        for (body, want) in [
            ("m = 4 x = shufflexor(2.0, m)", "constant"),
            ("x = shufflexor(2.0, 65)", "constant from 1 to 64"),
            ("m = shufflexor(2, 1)", "shufflexor of a i32"),
        ] {
            let e = gpu(body).unwrap_err();
            assert!(e.0.contains(want), "{body}: {e}");
        }
    }
}
