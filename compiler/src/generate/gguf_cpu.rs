//! `matmul_q4_1` and `matmul_q8_0` (GGUF Q4_1 and Q8_0 blocks) for CPU
//! targets, the whole op or one part of a threaded kernel ([`View`]).
//!
//! Tiles as in `q4_cpu`: `y1`/`y0` over N, `x1`/`x0` over M (a register
//! tile of x0 rows × y0 outputs, each output one accumulator), `r0` the K
//! chunk (a multiple of the 32-weight block; `r1` unused: partial sums over
//! K never leave registers).
//!
//! **Q4_1**, `vectorize = 4`: A is first rearranged into scratch so that
//! SIMD lanes line up with packed words, as in `q4_cpu`, and pre-scaled so
//! that a nibble needs no shift: `AT[m][s][w] = A[m][8w + s] · 16⁻ˢ` for
//! `s < 7` (exact: a power of two), `AT[m][7][w] = A[m][8w + 7]`, and
//! `AS[m][w] = Σₛ A[m][8w + s]`. Four consecutive words of a row of W are one
//! block; nibble `s < 7` of the four is `W & (15 << 4s)`, which converts
//! (signed, one instruction) to `q·16ˢ` exactly, and nibble 7 is `W >> 28`.
//! Per block `acc += D·Σₛ q·ATₛ + Mn·AS`, whose four lanes sum to
//! `Σₖ A·(D·q + Mn)` over the block; the lanes are summed when C is stored.
//! With `vectorize = 1`, a scalar dot product per output and a scalar block
//! sum of A per row.
//!
//! **Q8_0**, `vectorize = 4`: the weights are in K order, so A is read in
//! place: each 16 bytes of a row of W (one `v128` load) sign-extend to
//! `i16` and then `i32` lanes (`Expr::ExtendS`), convert to four `f32x4`
//! of consecutive K, and multiply the matching `f32x4` of A; per block
//! (two loads) `acc += D·dot`. The widened weights are shared by the x0
//! rows of the register tile. With `vectorize = 1`, bytes are taken by
//! shift and mask, offset by 128 to make them unsigned, and converted back.
//!
//! **16-bit activations** (`quantize_a`, `vectorize = 4`): the kernel first
//! quantises its rows of A into scratch, per block of 32 values: `m =
//! max|x|` (at least 1e-30), `AS = s = m/32767`, `q = round(x·(32767/m))`,
//! as signed 16-bit values two to a word (`AQ`, 16 words a block) in the
//! order the weights' lanes need, and for Q4_1 `ASUM = s·Σq`. Then per
//! block of a column of W, one `i32x4` sum of `i32x4.dot_i16x8_s` products,
//! exact: Q8_0's 32 bytes sign-extend to four `i16x8` (`Expr::ExtendS`)
//! against the block's values in K order; Q4_1's four words are split by
//! shift and mask into four `i16x8` of nibbles, lane `i` of the `s`-th the
//! nibble of `k = 4i + s` (two nibbles to a byte, low first), against the
//! values in that order. Per block `acc += (D·AS)·float(sum)`; Q4_1's
//! minimums add `Σ_b Mn·ASUM` after the block loop, four blocks a vector
//! into the same accumulator (the blocks past the last four as scalars,
//! added when C is stored). About 0.7 vector instructions a weight for
//! either format, against 1.4 (Q8_0) and 1.25 (Q4_1) for the f32 ones
//! above.
//!
//! **The panel family** (`cache_read`, for prompts): per `y1` columns of W,
//! the weights are unpacked once into scratch as f32 values (`D·q + Mn`,
//! `D·q`), `BT[k][c]` with rows of `y1` floats, and every register tile of
//! the `x1` rows of A then runs an f32 micro-kernel over the panel
//! (`acc[r][v] += splat(A[r][k])·BT[k][v]`, all of K, `r0/8` steps per
//! iteration). The in-register kernels above unpack a weight once per `x0`
//! rows of A; this one once per M.

use super::matmul_cpu::View;
use super::{Gen, HasGen, tiled};
use crate::ir::{BinOp, Buffer, Elem, Expr, Extend, For, Func, Handle, LoadTy, Space, Stmt, Ty, UnOp, Var};
use crate::op::{Op, OpKind};
use crate::schedule::{Schedule, UnrollLoop};

type E = Handle<Expr>;

/// `quantize_a`'s buffers: the quantised rows `AQ`, their block scales
/// `AS` and (Q4_1) `ASUM`.
type QuantA = (Handle<Buffer>, Handle<Buffer>, Option<Handle<Buffer>>);

/// A register tile's variables, rows × columns.
type Tile = Vec<Vec<Handle<Var>>>;

struct Gg<'s> {
    g: Gen,
    s: &'s Schedule,
    q8: bool,
    m: u32,
    k: u32,
    /// Row stride of C.
    ldc: u32,
    a: Handle<Buffer>,
    w: Handle<Buffer>,
    d: Handle<Buffer>,
    /// Q4_1's minimums.
    mn: Option<Handle<Buffer>>,
    c: Handle<Buffer>,
    /// Q4_1's `AT` and `AS` (vector path only).
    at: Option<(Handle<Buffer>, Handle<Buffer>)>,
    /// `quantize_a`: the quantised rows `AQ`, their block scales `AS` and
    /// (Q4_1) `ASUM`.
    aq: Option<QuantA>,
}

impl HasGen for Gg<'_> {
    fn builder(&mut self) -> &mut Gen {
        &mut self.g
    }
}

/// Words per row of W: K/8 (Q4_1) or K/4 (Q8_0).
fn row_words(op: &Op) -> u32 {
    let k = op.bmkn().2;
    if op.kind() == OpKind::MatmulQ8_0 { k / 4 } else { k / 8 }
}

pub fn generate(op: &Op, s: &Schedule) -> Func {
    generate_view(op, s, &View::whole(op))
}

/// The function computing `v` of `op` (`matmul_q4_1` or `matmul_q8_0`):
/// `v.m` rows of A and `v.n` rows of W from the part's first, C's rows
/// `v.ldc` apart.
pub fn generate_view(op: &Op, s: &Schedule, v: &View) -> Func {
    let (_, _, k, _) = op.bmkn();
    let (m, n) = (v.m, v.n);
    let q8 = op.kind() == OpKind::MatmulQ8_0;
    let mut f = Func::new(op.slug());
    let a = f.buffer("A", Elem::F32, m * k, Space::Param(0), false);
    let w = f.buffer("W", Elem::U32, n * row_words(op), Space::Param(1), false);
    let d = f.buffer("D", Elem::F32, n * (k / 32), Space::Param(2), false);
    let mn = (!q8).then(|| f.buffer("Mn", Elem::F32, n * (k / 32), Space::Param(3), false));
    let c = f.buffer("C", Elem::F32, (m - 1) * v.ldc + n, Space::Param(if q8 { 3 } else { 4 }), true);
    let panel = s.cache_read;
    let quant = s.quantize_a;
    let at = (!q8 && s.vectorize == 4 && !panel && !quant)
        .then(|| (f.buffer("AT", Elem::F32, m * k, Space::Scratch, true), f.buffer("AS", Elem::F32, m * (k / 8), Space::Scratch, true)));
    let aq = quant.then(|| {
        let blocks = m * (k / 32);
        let aq = f.buffer("AQ", Elem::U32, m * (k / 2), Space::Scratch, true);
        let scale = f.buffer("AS", Elem::F32, blocks, Space::Scratch, true);
        (aq, scale, (!q8).then(|| f.buffer("ASUM", Elem::F32, blocks, Space::Scratch, true)))
    });
    let bt = panel.then(|| f.buffer("BT", Elem::F32, k * s.y1.min(n), Space::Scratch, true));
    let mut q = Gg { g: Gen::new(f), s, q8, m, k, ldc: v.ldc, a, w, d, mn, c, at, aq };
    if let Some(bt) = bt {
        let zero = q.g.f.i32(0);
        let (x0, x1, y0, y1) = (s.x0, s.x1, s.y0, s.y1.min(n));
        let body = tiled(&mut q, zero, n, y1, "j1", false, &mut |q, ng, _, nsz| {
            let mut out = q.unpack_panel(bt, ng, nsz, y1);
            out.extend(tiled(q, zero, m, x1, "i1", false, &mut |q, mg, _, msz| {
                tiled(q, ng, nsz, y0, "j0", false, &mut |q, cg, cl, cols| {
                    tiled(q, mg, msz, x0, "i0", false, &mut |q, rg, _, rows| q.panel_micro(bt, y1, rg, rows, cg, cl, cols))
                })
            }));
            out
        });
        q.g.f.body = body;
        return q.g.f;
    }
    let mut body = Vec::new();
    if let Some((at, asum)) = q.at {
        body.push(q.rearrange_a(at, asum));
    }
    if q.aq.is_some() {
        body.push(q.quantize_a());
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

impl Gg<'_> {
    fn f(&mut self) -> &mut Func {
        &mut self.g.f
    }

    fn konst(&mut self, v: u32) -> E {
        self.f().i32(v as i32)
    }

    fn rolled(&mut self, name: &str, hi: u32, body: &mut dyn FnMut(&mut Self, E) -> Vec<Stmt>) -> Stmt {
        let v = self.g.fresh(name, Ty::I32);
        let e = self.f().get(v);
        let inner = body(self, e);
        let (lo, hi) = (self.konst(0), self.konst(hi));
        Stmt::For(For { var: v, lo, hi, step: 1, unroll: false, body: inner })
    }

    /// `AT` (pre-scaled, see the module docs) and `AS` of Q4_1.
    fn rearrange_a(&mut self, at: Handle<Buffer>, asum: Handle<Buffer>) -> Stmt {
        let (k, kw) = (self.k, self.k / 8);
        let a = self.a;
        self.rolled("m", self.m, &mut |q, m| {
            vec![q.rolled("w", kw, &mut |q, w| {
                let row = q.f().mul_c(m, k as i64);
                let w8 = q.f().mul_c(w, 8);
                let src = q.f().add(row, w8);
                let mut out = Vec::new();
                let mut sum: Option<E> = None;
                for s in 0..8 {
                    let i = q.g.plus_c(src, s);
                    let v = q.f().load(LoadTy::F32, a, i);
                    let scaled = if (1..7).contains(&s) {
                        let f = q.f().f32(16f32.powi(-(s as i32)));
                        q.f().mul(v, f)
                    } else {
                        v
                    };
                    let dst_row = q.g.plus_c(row, s * kw);
                    let dst = q.f().add(dst_row, w);
                    out.push(Stmt::Store { buf: at, index: dst, value: scaled });
                    sum = Some(match sum {
                        None => v,
                        Some(acc) => q.f().add(acc, v),
                    });
                }
                let mrow = q.f().mul_c(m, kw as i64);
                let idx = q.f().add(mrow, w);
                out.push(Stmt::Store { buf: asum, index: idx, value: sum.expect("eight terms") });
                out
            })]
        })
    }

    /// `quantize_a`: every row of A, block by block, into `AQ`, `AS` and
    /// (Q4_1) `ASUM` (module docs). Word `w` of a block holds two values:
    /// Q8_0's `k = 2w, 2w + 1`; Q4_1's `k = 8p + s, 8p + 4 + s` with
    /// `s = w / 4`, `p = w % 4` (lanes `2p, 2p + 1` of the `s`-th `i16x8`).
    fn quantize_a(&mut self) -> Stmt {
        let (aq, sbuf, sumbuf) = self.aq.expect("quantize_a");
        let (k, kb, q8, a) = (self.k, self.k / 32, self.q8, self.a);
        let mx = self.g.fresh("qmax", Ty::F32x4);
        let (big, inv, scale) = (self.g.fresh("qm", Ty::F32), self.g.fresh("qinv", Ty::F32), self.g.fresh("qs", Ty::F32));
        let (r0, r1, qsum) = (self.g.fresh("qr0", Ty::F32), self.g.fresh("qr1", Ty::F32), self.g.fresh("qsum", Ty::F32));
        self.rolled("qrow", self.m, &mut |q, r| {
            vec![q.rolled("qblk", kb, &mut |q, b| {
                let row = q.f().mul_c(r, k as i64);
                let b32 = q.f().mul_c(b, 32);
                let base = q.f().add(row, b32);
                let mut out = Vec::new();
                // m = max|x| over the block, at least 1e-30.
                for j in 0..8u32 {
                    let i = q.g.plus_c(base, 4 * j);
                    let x = q.f().load(LoadTy::F32x4, a, i);
                    let ax = q.f().un(UnOp::Abs, x);
                    let value = if j == 0 {
                        ax
                    } else {
                        let old = q.f().get(mx);
                        q.f().bin(BinOp::Max, old, ax)
                    };
                    out.push(Stmt::Set { var: mx, value });
                }
                let lanes: Vec<E> = (0..4u8)
                    .map(|l| {
                        let v = q.f().get(mx);
                        q.f().exprs.push(Expr::Lane(v, l))
                    })
                    .collect();
                let lo = q.f().bin(BinOp::Max, lanes[0], lanes[1]);
                let hi = q.f().bin(BinOp::Max, lanes[2], lanes[3]);
                let both = q.f().bin(BinOp::Max, lo, hi);
                let floor = q.f().f32(1e-30);
                let value = q.f().bin(BinOp::Max, both, floor);
                out.push(Stmt::Set { var: big, value });
                let (top, mv) = (q.f().f32(32767.0), q.f().get(big));
                let value = q.f().bin(BinOp::Div, top, mv);
                out.push(Stmt::Set { var: inv, value });
                let (top, mv) = (q.f().f32(32767.0), q.f().get(big));
                let value = q.f().bin(BinOp::Div, mv, top);
                out.push(Stmt::Set { var: scale, value });
                let brow = q.f().mul_c(r, kb as i64);
                let si = q.f().add(brow, b);
                let value = q.f().get(scale);
                out.push(Stmt::Store { buf: sbuf, index: si, value });
                if sumbuf.is_some() {
                    let value = q.f().f32(0.0);
                    out.push(Stmt::Set { var: qsum, value });
                }
                let wrow = q.f().mul_c(r, (k / 2) as i64);
                let b16 = q.f().mul_c(b, 16);
                let wbase = q.f().add(wrow, b16);
                for w in 0..16u32 {
                    let (e0, e1) = if q8 { (2 * w, 2 * w + 1) } else { (8 * (w % 4) + w / 4, 8 * (w % 4) + 4 + w / 4) };
                    for (var, e) in [(r0, e0), (r1, e1)] {
                        let i = q.g.plus_c(base, e);
                        let x = q.f().load(LoadTy::F32, a, i);
                        let iv = q.f().get(inv);
                        let y = q.f().mul(x, iv);
                        let value = q.f().un(UnOp::Round, y);
                        out.push(Stmt::Set { var, value });
                    }
                    let (x0, x1) = (q.f().get(r0), q.f().get(r1));
                    let (q0, q1) = (q.f().exprs.push(Expr::ToI32(x0)), q.f().exprs.push(Expr::ToI32(x1)));
                    let low = q.konst(0xFFFF);
                    let lo16 = q.f().bin(BinOp::And, q0, low);
                    let hi16 = q.f().mul_c(q1, 65536);
                    let value = q.f().bin(BinOp::Or, lo16, hi16);
                    let index = q.g.plus_c(wbase, w);
                    out.push(Stmt::Store { buf: aq, index, value });
                    if sumbuf.is_some() {
                        let (old, x0, x1) = (q.f().get(qsum), q.f().get(r0), q.f().get(r1));
                        let pair = q.f().add(x0, x1);
                        let value = q.f().add(old, pair);
                        out.push(Stmt::Set { var: qsum, value });
                    }
                }
                if let Some(sumbuf) = sumbuf {
                    let (sum, sv) = (q.f().get(qsum), q.f().get(scale));
                    let value = q.f().mul(sum, sv);
                    let index = q.f().add(brow, b);
                    out.push(Stmt::Store { buf: sumbuf, index, value });
                }
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
        let vector = self.s.vectorize == 4;
        let ty = if vector { Ty::F32x4 } else { Ty::F32 };
        let acc: Vec<Vec<Handle<Var>>> = (0..rows).map(|r| (0..cols).map(|c| self.g.fresh(&format!("acc{r}_{c}"), ty)).collect()).collect();
        let mut out = Vec::new();
        for row in &acc {
            for &v in row {
                let z = self.f().f32(0.0);
                let value = if vector { self.f().splat(z) } else { z };
                out.push(Stmt::Set { var: v, value });
            }
        }
        if self.aq.is_some() {
            let (body, mins) = self.int_dot(rg, cg, &acc);
            out.extend(body);
            out.extend(self.store_c_plus(rg, cg, &acc, true, mins.as_deref()));
            return out;
        }
        out.extend(match (self.q8, vector) {
            (false, true) => self.q41_simd(rg, cg, &acc),
            (false, false) => self.q41_scalar(rg, cg, &acc),
            (true, true) => self.q80_simd(rg, cg, &acc),
            (true, false) => self.q80_scalar(rg, cg, &acc),
        });
        out.extend(self.store_c(rg, cg, &acc, vector));
        out
    }

    /// `quantize_a`: the register tile's block loop of integer dot products
    /// (module docs), then for Q4_1 the minimums' term `Σ_b Mn·ASUM` of each
    /// output, four blocks a vector into its accumulator (whose lanes the
    /// store sums), and the blocks past the last four as scalars, returned
    /// to be added when C is stored.
    fn int_dot(&mut self, rg: E, cg: E, acc: &[Vec<Handle<Var>>]) -> (Vec<Stmt>, Option<Tile>) {
        let (aq, sbuf, sumbuf) = self.aq.expect("quantize_a");
        let (k, kb, q8) = (self.k, self.k / 32, self.q8);
        let kw = if q8 { k / 4 } else { k / 8 };
        let (rows, cols) = (acc.len(), acc[0].len());
        let mut out = Vec::new();
        // The four i16x8 of weights of a block, shared by the tile's rows.
        let parts: Vec<Handle<Var>> = (0..4).map(|i| self.g.fresh(&format!("wq{i}"), Ty::U32x4)).collect();
        let words = [self.g.fresh("ww0", Ty::U32x4), self.g.fresh("ww1", Ty::U32x4)];
        let mask = (!q8).then(|| self.g.fresh("nmask", Ty::U32x4));
        if let Some(mv) = mask {
            let c = self.f().i32(0x000F_000F);
            let value = self.f().splat(c);
            out.push(Stmt::Set { var: mv, value });
        }
        let (wbuf, dbuf, mbuf) = (self.w, self.d, self.mn);
        let dv = self.g.fresh("dd", Ty::F32);
        let isum = self.g.fresh("isum", Ty::U32x4);
        // Each row's block scale, loaded once a block for the tile's columns.
        let sas: Vec<Handle<Var>> = (0..rows).map(|r| self.g.fresh(&format!("sa{r}"), Ty::F32)).collect();
        out.extend(self.block_loop(&mut |q, b| {
            let mut body = Vec::new();
            for (r, &sv) in sas.iter().enumerate() {
                let row = q.g.plus_c(rg, r as u32);
                let brow = q.f().mul_c(row, kb as i64);
                let si = q.f().add(brow, b);
                let value = q.f().load(LoadTy::F32, sbuf, si);
                body.push(Stmt::Set { var: sv, value });
            }
            for c in 0..cols {
                let col = q.g.plus_c(cg, c as u32);
                let wrow = q.f().mul_c(col, kw as i64);
                if q8 {
                    for (h, &wv) in words.iter().enumerate() {
                        let b8 = q.f().mul_c(b, 8);
                        let wi = q.f().add(wrow, b8);
                        let wi = q.g.plus_c(wi, 4 * h as u32);
                        let value = q.f().load(LoadTy::U32x4, wbuf, wi);
                        body.push(Stmt::Set { var: wv, value });
                        for (j, e) in [Extend::I8Low, Extend::I8High].into_iter().enumerate() {
                            let x = q.f().get(wv);
                            let value = q.f().exprs.push(Expr::ExtendS(x, e));
                            body.push(Stmt::Set { var: parts[2 * h + j], value });
                        }
                    }
                } else {
                    let b4 = q.f().mul_c(b, 4);
                    let wi = q.f().add(wrow, b4);
                    let value = q.f().load(LoadTy::U32x4, wbuf, wi);
                    body.push(Stmt::Set { var: words[0], value });
                    for (s, &pv) in parts.iter().enumerate() {
                        let x = q.f().get(words[0]);
                        let shifted = if s == 0 {
                            x
                        } else {
                            let sh = q.konst(4 * s as u32);
                            q.f().bin(BinOp::Shr, x, sh)
                        };
                        let m = q.f().get(mask.expect("q4_1"));
                        let value = q.f().bin(BinOp::And, shifted, m);
                        body.push(Stmt::Set { var: pv, value });
                    }
                }
                let value = q.scale(dbuf, col, b);
                body.push(Stmt::Set { var: dv, value });
                for r in 0..rows {
                    let row = q.g.plus_c(rg, r as u32);
                    let arow = q.f().mul_c(row, (k / 2) as i64);
                    let b16 = q.f().mul_c(b, 16);
                    let abase = q.f().add(arow, b16);
                    let mut sum: Option<E> = None;
                    for (i, &pv) in parts.iter().enumerate() {
                        let ai = q.g.plus_c(abase, 4 * i as u32);
                        let av = q.f().load(LoadTy::U32x4, aq, ai);
                        let wv = q.f().get(pv);
                        let dot = q.f().exprs.push(Expr::DotI16(wv, av));
                        sum = Some(match sum {
                            None => dot,
                            Some(s) => q.f().add(s, dot),
                        });
                    }
                    body.push(Stmt::Set { var: isum, value: sum.expect("four parts") });
                    let (d, sa) = (q.f().get(dv), q.f().get(sas[r]));
                    let ds = q.f().mul(d, sa);
                    let dsv = q.f().splat(ds);
                    let iv = q.f().get(isum);
                    let fl = q.f().exprs.push(Expr::SToF32(iv));
                    let old = q.f().get(acc[r][c]);
                    let value = q.f().fma(fl, dsv, old);
                    body.push(Stmt::Set { var: acc[r][c], value });
                }
            }
            body
        }));
        let (Some(sumbuf), Some(mbuf)) = (sumbuf, mbuf) else { return (out, None) };
        // Q4_1's minimums: Σ_b Mn[col][b]·ASUM[row][b], four blocks a step.
        let quads = kb / 4;
        let term = |q: &mut Self, r: usize, c: usize, b: E, vector: bool| -> (E, E) {
            let ty = if vector { LoadTy::F32x4 } else { LoadTy::F32 };
            let (row, col) = (q.g.plus_c(rg, r as u32), q.g.plus_c(cg, c as u32));
            let mrow = q.f().mul_c(col, kb as i64);
            let mi = q.f().add(mrow, b);
            let srow = q.f().mul_c(row, kb as i64);
            let si = q.f().add(srow, b);
            (q.f().load(ty, mbuf, mi), q.f().load(ty, sumbuf, si))
        };
        if quads > 0 {
            out.push(self.rolled("mq", quads, &mut |q, i| {
                let b = q.f().mul_c(i, 4);
                let mut body = Vec::new();
                for (r, row) in acc.iter().enumerate() {
                    for (c, &av) in row.iter().enumerate() {
                        let (mn, sum) = term(q, r, c, b, true);
                        let old = q.f().get(av);
                        let value = q.f().fma(mn, sum, old);
                        body.push(Stmt::Set { var: av, value });
                    }
                }
                body
            }));
        }
        let rest: Vec<Vec<Handle<Var>>> =
            (0..rows).map(|r| (0..cols).map(|c| self.g.fresh(&format!("mrest{r}_{c}"), Ty::F32)).collect()).collect();
        for (r, row) in rest.iter().enumerate() {
            for (c, &v) in row.iter().enumerate() {
                let mut value = self.f().f32(0.0);
                for blk in 4 * quads..kb {
                    let b = self.konst(blk);
                    let (mn, sum) = term(self, r, c, b, false);
                    value = self.f().fma(mn, sum, value);
                }
                out.push(Stmt::Set { var: v, value });
            }
        }
        (out, Some(rest))
    }

    /// The block scale `D[col][b]` (and `Mn[col][b]`) as loads.
    fn scale(&mut self, buf: Handle<Buffer>, col: E, b: E) -> E {
        let kb = self.k / 32;
        let srow = self.f().mul_c(col, kb as i64);
        let si = self.f().add(srow, b);
        self.f().load(LoadTy::F32, buf, si)
    }

    /// `acc = fma(D, dot, acc)` (then `fma(Mn, asum, acc)` for Q4_1), splatted on the vector path.
    fn scale_into(&mut self, acc: Handle<Var>, dot: E, d: E, mn: Option<(E, E)>) -> Stmt {
        let vector = self.s.vectorize == 4;
        let sp = |q: &mut Self, x: E| if vector { q.f().splat(x) } else { x };
        let old = self.f().get(acc);
        let mut v = old;
        if let Some((mn, asum)) = mn {
            let mv = sp(self, mn);
            v = self.f().fma(mv, asum, v);
        }
        let dv = sp(self, d);
        let value = self.f().fma(dv, dot, v);
        Stmt::Set { var: acc, value }
    }

    fn q41_simd(&mut self, rg: E, cg: E, acc: &[Vec<Handle<Var>>]) -> Vec<Stmt> {
        let (at, asum) = self.at.expect("vector path");
        let (k, kw) = (self.k, self.k / 8);
        let rows = acc.len();
        let dots: Vec<Handle<Var>> = (0..rows).map(|r| self.g.fresh(&format!("dot{r}"), Ty::F32x4)).collect();
        let wv = self.g.fresh("wv", Ty::U32x4);
        let qv = self.g.fresh("q", Ty::F32x4);
        // The seven nibble masks, splatted once.
        let masks: Vec<Handle<Var>> = (0..7).map(|s| self.g.fresh(&format!("mask{s}"), Ty::U32x4)).collect();
        let mut out = Vec::new();
        for (s, &mv) in masks.iter().enumerate() {
            let c = self.f().i32(15 << (4 * s));
            let value = self.f().splat(c);
            out.push(Stmt::Set { var: mv, value });
        }
        let (wbuf, dbuf, mbuf) = (self.w, self.d, self.mn.expect("q4_1"));
        out.extend(self.block_loop(&mut |q, b| {
            let mut body = Vec::new();
            for (c, _) in acc[0].iter().enumerate() {
                let col = q.g.plus_c(cg, c as u32);
                let wrow = q.f().mul_c(col, kw as i64);
                let b4 = q.f().mul_c(b, 4);
                let wi = q.f().add(wrow, b4);
                let value = q.f().load(LoadTy::U32x4, wbuf, wi);
                body.push(Stmt::Set { var: wv, value });
                for s in 0..8u32 {
                    let w = q.f().get(wv);
                    let nib = if s < 7 {
                        let mask = q.f().get(masks[s as usize]);
                        q.f().bin(BinOp::And, w, mask)
                    } else {
                        let sh = q.konst(28);
                        q.f().bin(BinOp::Shr, w, sh)
                    };
                    let value = q.f().exprs.push(Expr::SToF32(nib));
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
                for (r, &dot) in dots.iter().enumerate() {
                    let row = q.g.plus_c(rg, r as u32);
                    let arow = q.f().mul_c(row, kw as i64);
                    let ai = q.f().add(arow, b4);
                    let sv = q.f().load(LoadTy::F32x4, asum, ai);
                    let (d, mn) = (q.scale(dbuf, col, b), q.scale(mbuf, col, b));
                    let de = q.f().get(dot);
                    body.push(q.scale_into(acc[r][c], de, d, Some((mn, sv))));
                }
            }
            body
        }));
        out
    }

    fn q41_scalar(&mut self, rg: E, cg: E, acc: &[Vec<Handle<Var>>]) -> Vec<Stmt> {
        let (k, kw) = (self.k, self.k / 8);
        let rows = acc.len();
        let dots: Vec<Handle<Var>> = (0..rows).map(|r| self.g.fresh(&format!("dot{r}"), Ty::F32)).collect();
        let sums: Vec<Handle<Var>> = (0..rows).map(|r| self.g.fresh(&format!("asum{r}"), Ty::F32)).collect();
        let word = self.g.fresh("word", Ty::I32);
        let qv = self.g.fresh("q", Ty::F32);
        let (abuf, wbuf, dbuf, mbuf) = (self.a, self.w, self.d, self.mn.expect("q4_1"));
        self.block_loop(&mut |q, b| {
            let mut body = Vec::new();
            // The block's sum of A, per row.
            for (r, &sv) in sums.iter().enumerate() {
                let row = q.g.plus_c(rg, r as u32);
                let arow = q.f().mul_c(row, k as i64);
                let b32 = q.f().mul_c(b, 32);
                let base = q.f().add(arow, b32);
                let mut sum: Option<E> = None;
                for i in 0..32 {
                    let ai = q.g.plus_c(base, i);
                    let v = q.f().load(LoadTy::F32, abuf, ai);
                    sum = Some(match sum {
                        None => v,
                        Some(acc) => q.f().add(acc, v),
                    });
                }
                body.push(Stmt::Set { var: sv, value: sum.expect("32 terms") });
            }
            for (c, _) in acc[0].iter().enumerate() {
                let col = q.g.plus_c(cg, c as u32);
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
                        let value = q.f().exprs.push(Expr::ToF32(nib));
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
                for r in 0..rows {
                    let (d, mn) = (q.scale(dbuf, col, b), q.scale(mbuf, col, b));
                    let (de, se) = (q.f().get(dots[r]), q.f().get(sums[r]));
                    body.push(q.scale_into(acc[r][c], de, d, Some((mn, se))));
                }
            }
            body
        })
    }

    fn q80_simd(&mut self, rg: E, cg: E, acc: &[Vec<Handle<Var>>]) -> Vec<Stmt> {
        let (k, kw) = (self.k, self.k / 4);
        let rows = acc.len();
        let dots: Vec<Handle<Var>> = (0..rows).map(|r| self.g.fresh(&format!("dot{r}"), Ty::F32x4)).collect();
        let wv = self.g.fresh("wv", Ty::U32x4);
        let halves = [self.g.fresh("h16lo", Ty::U32x4), self.g.fresh("h16hi", Ty::U32x4)];
        let qv = self.g.fresh("q", Ty::F32x4);
        let (abuf, wbuf, dbuf) = (self.a, self.w, self.d);
        self.block_loop(&mut |q, b| {
            let mut body = Vec::new();
            for (c, _) in acc[0].iter().enumerate() {
                let col = q.g.plus_c(cg, c as u32);
                // Two loads of 16 bytes: eight f32x4 of consecutive K.
                for h in 0..2u32 {
                    let wrow = q.f().mul_c(col, kw as i64);
                    let b8 = q.f().mul_c(b, 8);
                    let wi = q.f().add(wrow, b8);
                    let wi = q.g.plus_c(wi, 4 * h);
                    let value = q.f().load(LoadTy::U32x4, wbuf, wi);
                    body.push(Stmt::Set { var: wv, value });
                    for (i, (&hv, e)) in halves.iter().zip([Extend::I8Low, Extend::I8High]).enumerate() {
                        let w = q.f().get(wv);
                        let value = q.f().exprs.push(Expr::ExtendS(w, e));
                        body.push(Stmt::Set { var: hv, value });
                        for (j, e) in [Extend::I16Low, Extend::I16High].into_iter().enumerate() {
                            let quad = 4 * h + 2 * i as u32 + j as u32;
                            let hx = q.f().get(hv);
                            let wide = q.f().exprs.push(Expr::ExtendS(hx, e));
                            let value = q.f().exprs.push(Expr::SToF32(wide));
                            body.push(Stmt::Set { var: qv, value });
                            for (r, &dot) in dots.iter().enumerate() {
                                let row = q.g.plus_c(rg, r as u32);
                                let arow = q.f().mul_c(row, k as i64);
                                let b32 = q.f().mul_c(b, 32);
                                let ai = q.f().add(arow, b32);
                                let ai = q.g.plus_c(ai, 4 * quad);
                                let av = q.f().load(LoadTy::F32x4, abuf, ai);
                                let qe = q.f().get(qv);
                                let value = if quad == 0 {
                                    q.f().mul(qe, av)
                                } else {
                                    let d = q.f().get(dot);
                                    q.f().fma(qe, av, d)
                                };
                                body.push(Stmt::Set { var: dot, value });
                            }
                        }
                    }
                }
                for (r, &dot) in dots.iter().enumerate() {
                    let d = q.scale(dbuf, col, b);
                    let de = q.f().get(dot);
                    body.push(q.scale_into(acc[r][c], de, d, None));
                }
            }
            body
        })
    }

    fn q80_scalar(&mut self, rg: E, cg: E, acc: &[Vec<Handle<Var>>]) -> Vec<Stmt> {
        let (k, kw) = (self.k, self.k / 4);
        let rows = acc.len();
        let dots: Vec<Handle<Var>> = (0..rows).map(|r| self.g.fresh(&format!("dot{r}"), Ty::F32)).collect();
        let word = self.g.fresh("word", Ty::I32);
        let qv = self.g.fresh("q", Ty::F32);
        let (abuf, wbuf, dbuf) = (self.a, self.w, self.d);
        self.block_loop(&mut |q, b| {
            let mut body = Vec::new();
            for (c, _) in acc[0].iter().enumerate() {
                let col = q.g.plus_c(cg, c as u32);
                for &d in &dots {
                    let value = q.f().f32(0.0);
                    body.push(Stmt::Set { var: d, value });
                }
                for wi in 0..8u32 {
                    let wrow = q.f().mul_c(col, kw as i64);
                    let b8 = q.f().mul_c(b, 8);
                    let idx = q.f().add(wrow, b8);
                    let idx = q.g.plus_c(idx, wi);
                    let value = q.f().load(LoadTy::U32, wbuf, idx);
                    body.push(Stmt::Set { var: word, value });
                    for j in 0..4u32 {
                        // q + 128 = ((byte + 128) & 255): unsigned, then back.
                        let w = q.f().get(word);
                        let sh = q.konst(8 * j);
                        let byte = if j == 0 { w } else { q.f().bin(BinOp::Shr, w, sh) };
                        let biased = q.g.plus_c(byte, 128);
                        let mask = q.konst(255);
                        let u = q.f().bin(BinOp::And, biased, mask);
                        let uf = q.f().exprs.push(Expr::ToF32(u));
                        let off = q.f().f32(128.0);
                        let value = q.f().sub(uf, off);
                        body.push(Stmt::Set { var: qv, value });
                        for (r, &d) in dots.iter().enumerate() {
                            let row = q.g.plus_c(rg, r as u32);
                            let arow = q.f().mul_c(row, k as i64);
                            let b32 = q.f().mul_c(b, 32);
                            let ai = q.f().add(arow, b32);
                            let ai = q.g.plus_c(ai, wi * 4 + j);
                            let av = q.f().load(LoadTy::F32, abuf, ai);
                            let qe = q.f().get(qv);
                            let de = q.f().get(d);
                            let value = q.f().fma(qe, av, de);
                            body.push(Stmt::Set { var: d, value });
                        }
                    }
                }
                for (r, &dot) in dots.iter().enumerate() {
                    let d = q.scale(dbuf, col, b);
                    let de = q.f().get(dot);
                    body.push(q.scale_into(acc[r][c], de, d, None));
                }
            }
            body
        })
    }

    /// The panel family (`cache_read`): columns `[ng, ng + nsz)` of W as
    /// f32 values (`D·q + Mn`, or `D·q`) into `BT[k][c]`, rows of `ld`
    /// floats, each weight unpacked once for all the rows of A.
    fn unpack_panel(&mut self, bt: Handle<Buffer>, ng: E, nsz: u32, ld: u32) -> Vec<Stmt> {
        let (k, q8) = (self.k, self.q8);
        let kw = if q8 { k / 4 } else { k / 8 };
        let (wbuf, dbuf, mbuf) = (self.w, self.d, self.mn);
        let word = self.g.fresh("pw", Ty::I32);
        let (dv, mv) = (self.g.fresh("pd", Ty::F32), self.g.fresh("pm", Ty::F32));
        vec![self.rolled("pc", nsz, &mut |q, c| {
            vec![q.rolled("pb", k / 32, &mut |q, b| {
                let col = q.g.plus(ng, c);
                let mut body = Vec::new();
                let value = q.scale(dbuf, col, b);
                body.push(Stmt::Set { var: dv, value });
                if let Some(mbuf) = mbuf {
                    let value = q.scale(mbuf, col, b);
                    body.push(Stmt::Set { var: mv, value });
                }
                let (words, per) = if q8 { (8u32, 4u32) } else { (4, 8) };
                for wi in 0..words {
                    let wrow = q.f().mul_c(col, kw as i64);
                    let bw = q.f().mul_c(b, words as i64);
                    let idx = q.f().add(wrow, bw);
                    let idx = q.g.plus_c(idx, wi);
                    let value = q.f().load(LoadTy::U32, wbuf, idx);
                    body.push(Stmt::Set { var: word, value });
                    for j in 0..per {
                        let w = q.f().get(word);
                        let bits = if q8 { 8 } else { 4 };
                        let sh = q.konst(bits * j);
                        let shifted = if j == 0 { w } else { q.f().bin(BinOp::Shr, w, sh) };
                        let d = q.f().get(dv);
                        let value = if q8 {
                            // q + 128 = ((byte + 128) & 255): unsigned, then back.
                            let biased = q.g.plus_c(shifted, 128);
                            let mask = q.konst(255);
                            let u = q.f().bin(BinOp::And, biased, mask);
                            let uf = q.f().exprs.push(Expr::ToF32(u));
                            let off = q.f().f32(128.0);
                            let qf = q.f().sub(uf, off);
                            q.f().mul(d, qf)
                        } else {
                            let mask = q.konst(15);
                            let nib = q.f().bin(BinOp::And, shifted, mask);
                            let qf = q.f().exprs.push(Expr::ToF32(nib));
                            let mn = q.f().get(mv);
                            q.f().fma(d, qf, mn)
                        };
                        // BT[(32b + per·wi + j)·ld + c]
                        let kk = q.f().mul_c(b, 32);
                        let kk = q.g.plus_c(kk, per * wi + j);
                        let row = q.f().mul_c(kk, ld as i64);
                        let index = q.f().add(row, c);
                        body.push(Stmt::Store { buf: bt, index, value });
                    }
                }
                body
            })]
        })]
    }

    /// The panel family's register tile: `rows` rows of A from `rg` times
    /// the panel's columns `[cl, cl + cols)` (C's `[cg, cg + cols)`), an f32
    /// micro-kernel over all of K, `r0 / 8` steps of K per iteration (rounded
    /// down to a power of two).
    #[allow(clippy::too_many_arguments)]
    fn panel_micro(&mut self, bt: Handle<Buffer>, ld: u32, rg: E, rows: u32, cg: E, cl: E, cols: u32) -> Vec<Stmt> {
        let vector = self.s.vectorize == 4 && cols.is_multiple_of(4);
        let (lanes, ty, lty) = if vector { (4, Ty::F32x4, LoadTy::F32x4) } else { (1, Ty::F32, LoadTy::F32) };
        let nv = cols / lanes;
        let acc: Vec<Vec<Handle<Var>>> = (0..rows).map(|r| (0..nv).map(|v| self.g.fresh(&format!("pacc{r}_{v}"), ty)).collect()).collect();
        let bv: Vec<Handle<Var>> = (0..nv).map(|v| self.g.fresh(&format!("pb{v}"), ty)).collect();
        let mut out = Vec::new();
        for row in &acc {
            for &v in row {
                let z = self.f().f32(0.0);
                let value = if vector { self.f().splat(z) } else { z };
                out.push(Stmt::Set { var: v, value });
            }
        }
        let k = self.k;
        // A power of two up to 32: it divides K (a multiple of 32).
        let per = 1u32 << (self.s.r0 / 8).clamp(1, 32).ilog2();
        let (a, unroll) = (self.a, self.s.unrolls(UnrollLoop::R0));
        let step = |q: &mut Self, kk: E| -> Vec<Stmt> {
            let mut body = Vec::new();
            for (v, &b) in bv.iter().enumerate() {
                let row = q.f().mul_c(kk, ld as i64);
                let idx = q.f().add(row, cl);
                let idx = q.g.plus_c(idx, v as u32 * lanes);
                let value = q.f().load(lty, bt, idx);
                body.push(Stmt::Set { var: b, value });
            }
            for (r, accs) in acc.iter().enumerate() {
                let row = q.g.plus_c(rg, r as u32);
                let arow = q.f().mul_c(row, k as i64);
                let ai = q.f().add(arow, kk);
                let av = q.f().load(LoadTy::F32, a, ai);
                let av = if vector { q.f().splat(av) } else { av };
                for (v, &accv) in accs.iter().enumerate() {
                    let (old, b) = (q.f().get(accv), q.f().get(bv[v]));
                    let value = q.f().fma(av, b, old);
                    body.push(Stmt::Set { var: accv, value });
                }
            }
            body
        };
        let outer = self.g.fresh("pk", Ty::I32);
        let inner = self.g.fresh("pu", Ty::I32);
        let (ov, iv) = (self.f().get(outer), self.f().get(inner));
        let kk = self.g.plus(ov, iv);
        let body = step(self, kk);
        let (lo, hi) = (self.konst(0), self.konst(per));
        let inner_loop = Stmt::For(For { var: inner, lo, hi, step: 1, unroll, body });
        let (lo, hi) = (self.konst(0), self.konst(k / per * per));
        out.push(Stmt::For(For { var: outer, lo, hi, step: per, unroll: false, body: vec![inner_loop] }));
        // K is a multiple of 32, and per divides 32: no remainder.
        for (r, accs) in acc.iter().enumerate() {
            for (v, &accv) in accs.iter().enumerate() {
                let rr = self.g.plus_c(rg, r as u32);
                let crow = self.g.f.mul_c(rr, self.ldc as i64);
                let cc = self.g.plus_c(cg, v as u32 * lanes);
                let index = self.f().add(crow, cc);
                let value = self.f().get(accv);
                out.push(Stmt::Store { buf: self.c, index, value });
            }
        }
        out
    }

    fn store_c(&mut self, rg: E, cg: E, acc: &[Vec<Handle<Var>>], hsum: bool) -> Vec<Stmt> {
        self.store_c_plus(rg, cg, acc, hsum, None)
    }

    /// [`Self::store_c`], each output plus its scalar in `plus` if given.
    fn store_c_plus(&mut self, rg: E, cg: E, acc: &[Vec<Handle<Var>>], hsum: bool, plus: Option<&[Vec<Handle<Var>>]>) -> Vec<Stmt> {
        let mut out = Vec::new();
        for (r, row) in acc.iter().enumerate() {
            for (c, &v) in row.iter().enumerate() {
                let rr = self.g.plus_c(rg, r as u32);
                let crow = self.g.f.mul_c(rr, self.ldc as i64);
                let cc = self.g.plus_c(cg, c as u32);
                let index = self.f().add(crow, cc);
                let e = self.f().get(v);
                let mut value = if hsum { self.f().exprs.push(Expr::HSum(e)) } else { e };
                if let Some(plus) = plus {
                    let p = self.f().get(plus[r][c]);
                    value = self.f().add(value, p);
                }
                out.push(Stmt::Store { buf: self.c, index, value });
            }
        }
        out
    }
}
