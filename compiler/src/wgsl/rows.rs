//! Two-dimensional workgroup buffers: how an access to a buffer with rows
//! ([`crate::ir::Buffer::row`]) is split into a row and a column.
//!
//! Why: WebGPU implementations (naga in wgpu, Tint in Chromium) clamp every
//! dynamic array index to the array's length. A register tile's reads from
//! a flat workgroup tile have indices `k·row + t` with the unrolled step k
//! a constant and t the thread's offset, so each read carries its own clamp
//! of a different sum. Declared as `array<array<T, row>, rows>` and indexed
//! `[k][t]`, the row is a literal (no clamp) and the column's clamp is the
//! same expression for every k: the driver computes it once per thread.
//!
//! The split is exact. An index is written as an affine form `c + Σ kᵢ·xᵢ`
//! (constants folded, unrolled counters as their current value, a variable
//! assigned once to such a sum read as it); terms whose coefficient is a
//! multiple of the row go to the row index, and the rest, with `c mod row`,
//! to the column, but only where interval arithmetic proves that the column
//! and every lane of the access stay in `[0, row)` and that the index is an
//! i32 for every value of its terms (so that no wrapped sum can differ).
//! Anything else is indexed `[i / row][i % row]`, the same element by
//! definition.

use crate::ir::verify::{Range, interval};
use crate::ir::{BinOp, Builtin, Expr, Func, Handle, Stmt, const_i32_with};

/// `c + Σ coef·term`, terms distinct and none of them constant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Affine {
    pub c: i64,
    pub terms: Vec<(Handle<Expr>, i64)>,
}

impl Affine {
    fn add_term(&mut self, e: Handle<Expr>, coef: i64) {
        match self.terms.iter_mut().find(|(t, _)| *t == e) {
            Some((_, k)) => *k = k.saturating_add(coef),
            None => self.terms.push((e, coef)),
        }
        self.terms.retain(|&(_, k)| k != 0);
    }
}

/// What the lowering knows about a function's integers: the workgroup
/// size, and the range of each variable all of whose values have one (a
/// thread's row and column in its tile, its workgroup's origin, loop
/// counters with known bounds).
pub(super) struct Facts {
    workgroup_size: [u32; 3],
    vars: Vec<Option<Range>>,
    /// The value of each variable assigned exactly once, at the top level,
    /// to a sum, difference or product by a constant of expressions that
    /// read only constants, builtins and such variables assigned before it:
    /// after that assignment the variable can be read as its value (a
    /// split-K group's offset `kg · x1 · r1` is then `kg` times a multiple
    /// of the row).
    sums: Vec<Option<Handle<Expr>>>,
}

impl Facts {
    pub fn new(f: &Func, workgroup_size: [u32; 3]) -> Facts {
        /// Every definition of each variable: an assigned value, or a loop's bounds and step.
        enum Def {
            Set(Handle<Expr>),
            Loop(Handle<Expr>, Handle<Expr>, u32),
        }
        fn collect(body: &[Stmt], out: &mut [Vec<Def>]) {
            for s in body {
                match s {
                    Stmt::For(l) => {
                        out[l.var.index()].push(Def::Loop(l.lo, l.hi, l.step));
                        collect(&l.body, out);
                    }
                    Stmt::If { body, .. } => collect(body, out),
                    Stmt::Set { var, value } => out[var.index()].push(Def::Set(*value)),
                    Stmt::Store { .. } | Stmt::Barrier => {}
                }
            }
        }
        let mut defs: Vec<Vec<Def>> = (0..f.vars.len()).map(|_| Vec::new()).collect();
        collect(&f.body, &mut defs);
        let mut facts = Facts { workgroup_size, vars: vec![None; f.vars.len()], sums: vec![None; f.vars.len()] };
        // A variable holds zero or one of the values it is ever given (a
        // loop counter: its bounds' values, or the one it leaves with), so
        // its range is their hull with 0, once every one of them has a
        // range; repeated while that makes more ranges known. Flow-blind,
        // hence sound wherever the variable is read.
        loop {
            let mut changed = false;
            for v in 0..f.vars.len() {
                if facts.vars[v].is_some() || defs[v].is_empty() {
                    continue;
                }
                let mut hull = Range { lo: 0, hi: 0 };
                let known = defs[v].iter().all(|d| {
                    let r = match *d {
                        Def::Set(value) => facts.range(f, &[], value),
                        Def::Loop(lo, hi, step) => match (facts.range(f, &[], lo), facts.range(f, &[], hi)) {
                            (Some(lo), Some(hi)) => Some(Range { lo: lo.lo, hi: (hi.hi - 1 + step as i64).max(lo.hi) }),
                            _ => None,
                        },
                    };
                    r.map(|r| hull = Range { lo: hull.lo.min(r.lo), hi: hull.hi.max(r.hi) }).is_some()
                });
                if known {
                    facts.vars[v] = Some(hull);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // Variables whose one top-level assignment has been passed.
        let mut assigned = vec![false; f.vars.len()];
        fn pure(f: &Func, e: Handle<Expr>, assigned: &[bool]) -> bool {
            match f.exprs[e] {
                Expr::I32(_) | Expr::Builtin(_) => true,
                Expr::Var(v) => assigned[v.index()],
                Expr::Bin(_, a, b) => pure(f, a, assigned) && pure(f, b, assigned),
                _ => false,
            }
        }
        for s in &f.body {
            if let Stmt::Set { var, value } = s
                && defs[var.index()].len() == 1
            {
                let affine_top = match f.exprs[*value] {
                    Expr::Bin(BinOp::Add | BinOp::Sub, ..) => true,
                    Expr::Bin(BinOp::Mul, a, b) => constant(f, &[], a).is_some() || constant(f, &[], b).is_some(),
                    _ => false,
                };
                if affine_top && pure(f, *value, &assigned) {
                    facts.sums[var.index()] = Some(*value);
                }
                assigned[var.index()] = true;
            }
        }
        facts
    }

    /// The value variable `v` may be read as, once its assignment has run (see `sums`).
    pub fn sum_of(&self, v: Handle<crate::ir::Var>) -> Option<Handle<Expr>> {
        self.sums[v.index()]
    }

    /// The range of i32 expression `e`, with `consts` the current values of
    /// unrolled loop counters.
    pub fn range(&self, f: &Func, consts: &[Option<i32>], e: Handle<Expr>) -> Option<Range> {
        interval(f, e, &|leaf| match *leaf {
            Expr::Var(v) => match consts.get(v.index()).copied().flatten() {
                Some(c) => Some(Range { lo: c as i64, hi: c as i64 }),
                None => self.vars[v.index()],
            },
            Expr::Builtin(Builtin::LocalId(d)) => Some(Range { lo: 0, hi: self.workgroup_size[d as usize] as i64 - 1 }),
            // WebGPU dispatches at most 65535 workgroups a dimension.
            Expr::Builtin(Builtin::GroupId(_)) => Some(Range { lo: 0, hi: 65534 }),
            _ => None,
        })
    }
}

/// The value of `e` when it is a constant under `consts`.
fn constant(f: &Func, consts: &[Option<i32>], e: Handle<Expr>) -> Option<i64> {
    const_i32_with(f, consts, e).map(i64::from)
}

/// A variable's value to read it as, where that is allowed ([`Facts::sum_of`]).
pub(super) type Subst<'a> = &'a dyn Fn(Handle<crate::ir::Var>) -> Option<Handle<Expr>>;

/// `e · coef` added to `out`: sums and differences are opened, products
/// by a constant scale their other operand, constants fold, and variables
/// that `subst` gives a value are read as it.
pub(super) fn affine(f: &Func, consts: &[Option<i32>], subst: Subst, e: Handle<Expr>, coef: i64, out: &mut Affine) {
    // Saturating: a coefficient past i64 leaves i32 too, which `split` refuses.
    if let Some(c) = constant(f, consts, e) {
        out.c = out.c.saturating_add(coef.saturating_mul(c));
        return;
    }
    match f.exprs[e] {
        Expr::Var(v) => match subst(v) {
            Some(value) => affine(f, consts, subst, value, coef, out),
            None => out.add_term(e, coef),
        },
        Expr::Bin(BinOp::Add, a, b) => {
            affine(f, consts, subst, a, coef, out);
            affine(f, consts, subst, b, coef, out);
        }
        Expr::Bin(BinOp::Sub, a, b) => {
            affine(f, consts, subst, a, coef, out);
            affine(f, consts, subst, b, coef.saturating_neg(), out);
        }
        Expr::Bin(BinOp::Mul, a, b) if constant(f, consts, b).is_some() => {
            affine(f, consts, subst, a, coef.saturating_mul(constant(f, consts, b).unwrap_or(0)), out);
        }
        Expr::Bin(BinOp::Mul, a, b) if constant(f, consts, a).is_some() => {
            affine(f, consts, subst, b, coef.saturating_mul(constant(f, consts, a).unwrap_or(0)), out);
        }
        _ => out.add_term(e, coef),
    }
}

/// Element `index + extra` of a buffer of `len` elements in rows of `row`,
/// read `lanes` wide: `(row index, column)` as affine forms, the column
/// proven to keep all lanes in the row and the row index a valid literal
/// where it has no terms; `None` where that cannot be shown.
///
/// The index's exact value must be an i32 for every value of its terms:
/// the IR's arithmetic (and WGSL's) wraps, and wrapped sums and products
/// agree with the affine form modulo 2³², so an exact value in range is
/// the value both compute, and so are its row and column.
#[allow(clippy::too_many_arguments)]
pub(super) fn split(
    f: &Func,
    facts: &Facts,
    (consts, subst): (&[Option<i32>], Subst),
    index: Handle<Expr>,
    extra: i64,
    row: u32,
    len: u32,
    lanes: u32,
) -> Option<(Affine, Affine)> {
    let row = row as i64;
    let mut a = Affine { c: extra, terms: Vec::new() };
    affine(f, consts, subst, index, 1, &mut a);
    let mut outer = Affine { c: a.c.div_euclid(row), terms: Vec::new() };
    let mut inner = Affine { c: a.c.rem_euclid(row), terms: Vec::new() };
    let (mut lo, mut hi) = (inner.c as i128, inner.c as i128);
    let (mut all_lo, mut all_hi) = (a.c as i128, a.c as i128);
    for &(t, k) in &a.terms {
        let r = facts.range(f, consts, t)?;
        let (x, y) = (r.lo as i128 * k as i128, r.hi as i128 * k as i128);
        all_lo += x.min(y);
        all_hi += x.max(y);
        if k % row == 0 {
            outer.terms.push((t, k / row));
        } else {
            lo += x.min(y);
            hi += x.max(y);
            inner.terms.push((t, k));
        }
    }
    let in_i32 = all_lo >= i32::MIN as i128 && all_hi <= i32::MAX as i128;
    let rows = (len as i64) / row;
    let literal_row_ok = !outer.terms.is_empty() || (0..rows).contains(&outer.c);
    (in_i32 && lo >= 0 && hi + lanes as i128 <= row as i128 && literal_row_ok).then_some((outer, inner))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse::parse;

    /// The function's last store's index.
    fn last_index(f: &Func) -> Handle<Expr> {
        fn find(body: &[Stmt], out: &mut Option<Handle<Expr>>) {
            for s in body {
                match s {
                    Stmt::Store { index, .. } => *out = Some(*index),
                    Stmt::For(l) => find(&l.body, out),
                    Stmt::If { body, .. } => find(body, out),
                    _ => {}
                }
            }
        }
        let mut out = None;
        find(&f.body, &mut out);
        out.expect("a store")
    }

    const KERNEL: &str = "kernel k {
  buf T: f32[512] workgroup rw row 64
  buf C: f32[512] param 0 rw
  var t: i32
  var u: i32
  t = local_id.x / 16
  u = local_id.x % 16
  store T[STORE] = 1.0
}
";

    fn split_of(index: &str, lanes: u32) -> Option<(Affine, Affine)> {
        let f = parse(&KERNEL.replace("STORE", index)).expect("parses");
        let facts = Facts::new(&f, [128, 1, 1]);
        split(&f, &facts, (&[], &|_| None), last_index(&f), 0, 64, 512, lanes)
    }

    #[test]
    fn a_constant_row_and_a_thread_column_split() {
        // 3·64 + 4·t + 32 with t in 0..8: row 3, column 4t + 32 ≤ 60.
        let (outer, inner) = split_of("192 + t * 4 + 32", 4).expect("splits");
        assert_eq!((outer.c, outer.terms.len()), (3, 0));
        assert_eq!((inner.c, inner.terms.len(), inner.terms[0].1), (32, 1, 4));
        // A thread's row term goes to the row index, scaled down.
        let (outer, inner) = split_of("u * 64 + t * 4", 4).expect("splits");
        assert_eq!((outer.terms[0].1, inner.terms[0].1), (1, 4));
    }

    #[test]
    fn columns_that_may_leave_the_row_do_not_split() {
        // 4t + 36 + 4 lanes reaches 68 > 64 for t = 7.
        assert!(split_of("t * 4 + 36", 4).is_none());
        // The same column read one lane wide fits: 4·7 + 36 = 64 does not.
        assert!(split_of("t * 4 + 36", 1).is_none());
        assert!(split_of("t * 4 + 35", 1).is_some());
        // u·4 reaches 60; u·5 reaches 75.
        assert!(split_of("u * 4", 4).is_some());
        assert!(split_of("u * 5", 1).is_none());
        // A negative column, or a literal row past the buffer.
        assert!(split_of("t - 1", 1).is_none());
        assert!(split_of("512 + t", 1).is_none());
        // Coefficients whose products leave i32 (t · 2³² wraps to 0 in the
        // IR): the flat index is divided instead.
        assert!(split_of("t * 1073741824 * 4 + 5", 1).is_none());
        assert!(split_of("t * 268435456 + 5", 1).is_some());
        // Products past i64 saturate, and are refused like any past i32.
        assert!(split_of("t * 2147483647 * 2147483647 * 2147483647 + 5", 1).is_none());
        assert!(split_of("u * 64 - t * -2147483647 * 2147483647 * 4", 1).is_none());
    }

    #[test]
    fn a_variable_set_once_to_a_multiple_of_the_row_is_read_as_its_value() {
        let src = "kernel k {
  buf T: f32[512] workgroup rw row 64
  var t: i32
  var o: i32
  var p: i32
  t = local_id.x / 16
  o = t * 64
  p = o + local_id.x
  store T[o + local_id.x % 16 * 4] = 1.0
}
";
        let f = parse(src).expect("parses");
        let facts = Facts::new(&f, [128, 1, 1]);
        let index = last_index(&f);
        // Without reading o as t · 64, its column would reach 7 · 64 + 60.
        assert!(split(&f, &facts, (&[], &|_| None), index, 0, 64, 512, 4).is_none());
        let subst = |v| facts.sum_of(v);
        let (outer, inner) = split(&f, &facts, (&[], &subst), index, 0, 64, 512, 4).expect("splits");
        assert_eq!((outer.terms.len(), outer.terms[0].1, inner.terms[0].1), (1, 1, 4));
        // p reads local_id.x too: still a sum of pure expressions; t is a
        // quotient (not a sum), so it stays a variable.
        let var = |name: &str| f.vars.iter().find(|(_, v)| v.name == name).map(|(h, _)| h).expect("declared");
        assert!(facts.sum_of(var("p")).is_some() && facts.sum_of(var("t")).is_none());
    }

    proptest::proptest! {
        /// Over random forms `c + k1·t + k2·u` (t < 8, u < 16), rows and
        /// widths: every split names the same element as the flat index for
        /// every thread, keeps the access inside its row, and gives a literal
        /// row only inside the buffer; and a form whose every coefficient is
        /// a multiple of the row, with the access inside one row, always splits.
        #[test]
        fn every_split_names_the_same_element(
            c in -200i64..700,
            k1 in -70i64..70,
            k2 in -70i64..70,
            row in proptest::sample::select(vec![4u32, 8, 16, 64]),
            lanes in proptest::sample::select(vec![1u32, 4]),
        ) {
            let form = format!("({c}) + t * ({k1}) + u * ({k2})");
            let f = parse(&KERNEL.replace("STORE", &form)).expect("parses");
            let facts = Facts::new(&f, [128, 1, 1]);
            let got = split(&f, &facts, (&[], &|_| None), last_index(&f), 0, row, 512, lanes);
            let r = row as i64;
            if k1 % r == 0 && k2 % r == 0 && (0..512).contains(&c) && c % r + lanes as i64 <= r {
                proptest::prop_assert!(got.is_some(), "{form} row {row} lanes {lanes}");
            }
            let Some((outer, inner)) = got else { return Ok(()) };
            if outer.terms.is_empty() {
                proptest::prop_assert!((0..512 / r).contains(&outer.c));
            }
            for t in 0..8i64 {
                for u in 0..16i64 {
                    let value = |h: Handle<Expr>| if crate::ir::print::expr(&f, h) == "t" { t } else { u };
                    let eval = |a: &Affine| a.c + a.terms.iter().map(|&(h, k)| k * value(h)).sum::<i64>();
                    let (o, i) = (eval(&outer), eval(&inner));
                    proptest::prop_assert_eq!(o * r + i, c + k1 * t + k2 * u, "{} at t={} u={}", form, t, u);
                    proptest::prop_assert!(i >= 0 && i + lanes as i64 <= r, "{form}: column {i} of {row}");
                }
            }
        }
    }
}
