//! `matmul_q4` for CPU targets.
//!
//! With `vectorize = 4` the kernel first rearranges A so that SIMD lanes line
//! up with packed words: `AT[m][s][w] = A[m][8w + s]` (a cache_read of A into
//! scratch memory), and `A8[m][w] = 8 · Σₛ A[m][8w + s]`. Four consecutive
//! words of a row of W are one scale block (32 weights), so for nibble `s`
//! the lanes of `(W[n][4b..4b+4] >> 4s) & 15` multiply the lanes of
//! `AT[m][s][4b..4b+4]`. Per block, `C += S[n,b] · (Σₛ q·AT − A8)`, which is
//! `S · Σ (q − 8)·A` without subtracting 8 from every weight.
//!
//! With `vectorize = 1` it is a plain scalar dot product per output.
//! Tiles: `y1`/`y0` over N, `x1`/`x0` over M, `r0` is the K unroll (a
//! multiple of 32). `r1` is not used: partial sums over K never leave registers.

use super::{Gen, HasGen, tiled};
use crate::ir::{BinOp, Buffer, Elem, Expr, For, Func, Handle, LoadTy, Space, Stmt, Ty, Var};
use crate::op::Op;
use crate::schedule::{Schedule, UnrollLoop};

type E = Handle<Expr>;

struct Q4<'s> {
    g: Gen,
    s: &'s Schedule,
    m: u32,
    k: u32,
    n: u32,
    a: Handle<Buffer>,
    w: Handle<Buffer>,
    sc: Handle<Buffer>,
    c: Handle<Buffer>,
    /// `AT` and `A8` (vector path only).
    at: Option<(Handle<Buffer>, Handle<Buffer>)>,
}

impl HasGen for Q4<'_> {
    fn builder(&mut self) -> &mut Gen {
        &mut self.g
    }
}

pub fn generate(op: &Op, s: &Schedule) -> Func {
    let (_, m, k, n) = op.bmkn();
    let mut f = Func::new(op.slug());
    let a = f.buffer("A", Elem::F32, m * k, Space::Param(0), false);
    let w = f.buffer("W", Elem::U32, n * (k / 8), Space::Param(1), false);
    let sc = f.buffer("S", Elem::F32, n * (k / 32), Space::Param(2), false);
    let c = f.buffer("C", Elem::F32, m * n, Space::Param(3), true);
    let at = (s.vectorize == 4)
        .then(|| (f.buffer("AT", Elem::F32, m * k, Space::Scratch, true), f.buffer("A8", Elem::F32, m * (k / 8), Space::Scratch, true)));
    let mut q = Q4 { g: Gen::new(f), s, m, k, n, a, w, sc, c, at };
    let mut body = Vec::new();
    if let Some((at, a8)) = q.at {
        body.push(q.rearrange_a(at, a8));
    }
    let zero = q.g.f.i32(0);
    let (x0, x1, y0, y1) = (s.x0, s.x1, s.y0, s.y1);
    body.extend(tiled(&mut q, zero, n, y1, "j1", false, &mut |q, ng, _, nsz| {
        tiled(q, zero, m, x1, "i1", false, &mut |q, mg, _, msz| {
            tiled(q, ng, nsz, y0, "j0", false, &mut |q, cg, _, cols| {
                tiled(q, mg, msz, x0, "i0", false, &mut |q, rg, _, rows| q.micro(rg, rows, cg, cols))
            })
        })
    }));
    q.g.f.body = body;
    q.g.f
}

impl Q4<'_> {
    fn f(&mut self) -> &mut Func {
        &mut self.g.f
    }

    fn konst(&mut self, v: u32) -> E {
        self.f().i32(v as i32)
    }

    fn rolled(&mut self, name: &str, hi: u32, step: u32, body: &mut dyn FnMut(&mut Self, E) -> Vec<Stmt>) -> Stmt {
        let v = self.g.fresh(name, Ty::I32);
        let e = self.f().get(v);
        let inner = body(self, e);
        let (lo, hi) = (self.konst(0), self.konst(hi));
        Stmt::For(For { var: v, lo, hi, step, unroll: false, body: inner })
    }

    fn rearrange_a(&mut self, at: Handle<Buffer>, a8: Handle<Buffer>) -> Stmt {
        let (k, kw) = (self.k, self.k / 8);
        let a = self.a;
        self.rolled("m", self.m, 1, &mut |q, m| {
            vec![q.rolled("w", kw, 1, &mut |q, w| {
                let row = q.f().mul_c(m, k as i64);
                let w8 = q.f().mul_c(w, 8);
                let src = q.f().add(row, w8);
                let mut out = Vec::new();
                let mut sum: Option<E> = None;
                for s in 0..8 {
                    let i = q.g.plus_c(src, s);
                    let v = q.f().load(LoadTy::F32, a, i);
                    let dst_row = q.g.plus_c(row, s * kw);
                    let dst = q.f().add(dst_row, w);
                    out.push(Stmt::Store { buf: at, index: dst, value: v });
                    sum = Some(match sum {
                        None => v,
                        Some(acc) => q.f().add(acc, v),
                    });
                }
                let eight = q.f().f32(8.0);
                let value = q.f().mul(sum.expect("eight terms"), eight);
                let mrow = q.f().mul_c(m, kw as i64);
                let idx = q.f().add(mrow, w);
                out.push(Stmt::Store { buf: a8, index: idx, value });
                out
            })]
        })
    }

    /// The block loop: chunks of r0/32 blocks, the inner loop unrolled if r0 is.
    fn block_loop(&mut self, body: &mut dyn FnMut(&mut Self, E) -> Vec<Stmt>) -> Vec<Stmt> {
        let blocks = self.k / 32;
        let per = (self.s.r0 / 32).max(1);
        let unroll = self.s.unrolls(UnrollLoop::R0);
        let full = blocks / per * per;
        let mut out = Vec::new();
        let mut chunk = |q: &mut Self, base: E, count: u32| -> Stmt {
            let u = q.g.fresh("u", Ty::I32);
            let uv = q.f().get(u);
            let b = q.g.plus(base, uv);
            let inner = body(q, b);
            let (lo, hi) = (q.konst(0), q.konst(count));
            Stmt::For(For { var: u, lo, hi, step: 1, unroll, body: inner })
        };
        if full == per {
            let zero = self.konst(0);
            out.push(chunk(self, zero, per));
        } else if full > 0 {
            let bb = self.g.fresh("blk", Ty::I32);
            let bv = self.f().get(bb);
            let inner = chunk(self, bv, per);
            let (lo, hi) = (self.konst(0), self.konst(full));
            out.push(Stmt::For(For { var: bb, lo, hi, step: per, unroll: false, body: vec![inner] }));
        }
        if blocks > full {
            let base = self.konst(full);
            out.push(chunk(self, base, blocks - full));
        }
        out
    }

    fn micro(&mut self, rg: E, rows: u32, cg: E, cols: u32) -> Vec<Stmt> {
        if self.at.is_some() { self.micro_simd(rg, rows, cg, cols) } else { self.micro_scalar(rg, rows, cg, cols) }
    }

    fn accs(&mut self, rows: u32, cols: u32, ty: Ty) -> Vec<Vec<Handle<Var>>> {
        (0..rows).map(|r| (0..cols).map(|c| self.g.fresh(&format!("acc{r}_{c}"), ty)).collect()).collect()
    }

    fn micro_simd(&mut self, rg: E, rows: u32, cg: E, cols: u32) -> Vec<Stmt> {
        let (at, a8) = self.at.expect("vector path");
        let (k, kw, kb) = (self.k, self.k / 8, self.k / 32);
        let acc = self.accs(rows, cols, Ty::F32x4);
        let dots: Vec<Handle<Var>> = (0..rows).map(|r| self.g.fresh(&format!("dot{r}"), Ty::F32x4)).collect();
        let wv = self.g.fresh("wv", Ty::U32x4);
        let qv = self.g.fresh("q", Ty::F32x4);
        let mut out = Vec::new();
        for row in &acc {
            for &v in row {
                let z = self.f().f32(0.0);
                let value = self.f().splat(z);
                out.push(Stmt::Set { var: v, value });
            }
        }
        let (wbuf, sbuf) = (self.w, self.sc);
        out.extend(self.block_loop(&mut |q, b| {
            let mut body = Vec::new();
            for c in 0..cols {
                let col = q.g.plus_c(cg, c);
                let wrow = q.f().mul_c(col, kw as i64);
                let b4 = q.f().mul_c(b, 4);
                let wi = q.f().add(wrow, b4);
                let value = q.f().load(LoadTy::U32x4, wbuf, wi);
                body.push(Stmt::Set { var: wv, value });
                for s in 0..8u32 {
                    let w = q.f().get(wv);
                    let shifted = if s == 0 {
                        w
                    } else {
                        let sh = q.konst(4 * s);
                        q.f().bin(BinOp::Shr, w, sh)
                    };
                    let mask = q.konst(15);
                    let mask = q.f().splat(mask);
                    let nib = q.f().bin(BinOp::And, shifted, mask);
                    let value = q.f().exprs.push(Expr::ToF32(nib));
                    body.push(Stmt::Set { var: qv, value });
                    for (r, &dot) in dots.iter().enumerate() {
                        let row = q.g.plus_c(rg, r as u32);
                        let arow = q.f().mul_c(row, k as i64);
                        let base = q.g.plus_c(arow, s * kw);
                        let ai = q.f().add(base, b4);
                        let av = q.f().load(LoadTy::F32x4, at, ai);
                        let qe = q.f().get(qv);
                        let value = if s == 0 {
                            q.f().mul(qe, av)
                        } else {
                            let d = q.f().get(dot);
                            q.f().fma(qe, av, d)
                        };
                        body.push(Stmt::Set { var: dot, value });
                    }
                }
                let srow = q.f().mul_c(col, kb as i64);
                let si = q.f().add(srow, b);
                let scale = q.f().load(LoadTy::F32, sbuf, si);
                for (r, &dot) in dots.iter().enumerate() {
                    let row = q.g.plus_c(rg, r as u32);
                    let arow = q.f().mul_c(row, kw as i64);
                    let ai = q.f().add(arow, b4);
                    let a8v = q.f().load(LoadTy::F32x4, a8, ai);
                    let d = q.f().get(dot);
                    let centered = q.f().sub(d, a8v);
                    let sv = q.f().splat(scale);
                    let old = q.f().get(acc[r][c as usize]);
                    let value = q.f().fma(sv, centered, old);
                    body.push(Stmt::Set { var: acc[r][c as usize], value });
                }
            }
            body
        }));
        out.extend(self.store_c(rg, cg, &acc, true));
        out
    }

    fn store_c(&mut self, rg: E, cg: E, acc: &[Vec<Handle<Var>>], hsum: bool) -> Vec<Stmt> {
        let mut out = Vec::new();
        for (r, row) in acc.iter().enumerate() {
            for (c, &v) in row.iter().enumerate() {
                let rr = self.g.plus_c(rg, r as u32);
                let crow = self.g.f.mul_c(rr, self.n as i64);
                let cc = self.g.plus_c(cg, c as u32);
                let index = self.f().add(crow, cc);
                let e = self.f().get(v);
                let value = if hsum { self.f().exprs.push(Expr::HSum(e)) } else { e };
                out.push(Stmt::Store { buf: self.c, index, value });
            }
        }
        out
    }

    fn micro_scalar(&mut self, rg: E, rows: u32, cg: E, cols: u32) -> Vec<Stmt> {
        let (k, kw, kb) = (self.k, self.k / 8, self.k / 32);
        let acc = self.accs(rows, cols, Ty::F32);
        let dots: Vec<Handle<Var>> = (0..rows).map(|r| self.g.fresh(&format!("dot{r}"), Ty::F32)).collect();
        let word = self.g.fresh("word", Ty::I32);
        let qv = self.g.fresh("q", Ty::F32);
        let mut out = Vec::new();
        for row in &acc {
            for &v in row {
                let value = self.f().f32(0.0);
                out.push(Stmt::Set { var: v, value });
            }
        }
        let (abuf, wbuf, sbuf) = (self.a, self.w, self.sc);
        out.extend(self.block_loop(&mut |q, b| {
            let mut body = Vec::new();
            for c in 0..cols {
                let col = q.g.plus_c(cg, c);
                for &d in &dots {
                    let value = q.f().f32(0.0);
                    body.push(Stmt::Set { var: d, value });
                }
                for wi in 0..4u32 {
                    let wrow = q.f().mul_c(col, kw as i64);
                    let b4 = q.f().mul_c(b, 4);
                    let idx = q.f().add(wrow, b4);
                    let idx = q.g.plus_c(idx, wi);
                    let value = q.f().load(LoadTy::U32, wbuf, idx);
                    body.push(Stmt::Set { var: word, value });
                    for s in 0..8u32 {
                        let w = q.f().get(word);
                        let sh = q.konst(4 * s);
                        let shifted = q.f().bin(BinOp::Shr, w, sh);
                        let mask = q.konst(15);
                        let nib = q.f().bin(BinOp::And, shifted, mask);
                        let qf = q.f().exprs.push(Expr::ToF32(nib));
                        let eight = q.f().f32(8.0);
                        let value = q.f().sub(qf, eight);
                        body.push(Stmt::Set { var: qv, value });
                        for (r, &d) in dots.iter().enumerate() {
                            let row = q.g.plus_c(rg, r as u32);
                            let arow = q.f().mul_c(row, k as i64);
                            let b32 = q.f().mul_c(b, 32);
                            let ai = q.f().add(arow, b32);
                            let ai = q.g.plus_c(ai, wi * 8 + s);
                            let av = q.f().load(LoadTy::F32, abuf, ai);
                            let qe = q.f().get(qv);
                            let de = q.f().get(d);
                            let value = q.f().fma(qe, av, de);
                            body.push(Stmt::Set { var: d, value });
                        }
                    }
                }
                let srow = q.f().mul_c(col, kb as i64);
                let si = q.f().add(srow, b);
                let scale = q.f().load(LoadTy::F32, sbuf, si);
                for (r, &d) in dots.iter().enumerate() {
                    let de = q.f().get(d);
                    let old = q.f().get(acc[r][c as usize]);
                    let value = q.f().fma(scale, de, old);
                    body.push(Stmt::Set { var: acc[r][c as usize], value });
                }
            }
            body
        }));
        out.extend(self.store_c(rg, cg, &acc, false));
        out
    }
}
