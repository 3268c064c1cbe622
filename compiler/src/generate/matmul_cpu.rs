//! `matmul` and `batch_matmul` for CPU targets: a blocked loop nest with a
//! register-tiled micro-kernel.
//!
//! Every tile size is static (the shape is baked into the kernel), so tiles
//! that do not divide an extent produce a second, smaller copy of the code
//! for the remainder rather than runtime guards. The nest, outermost first:
//!
//! ```text
//! for b                                  batch (batch_matmul only)
//!   zero C                               only when K is split into several cache tiles
//!   for i1 / j1 / k1 in `order`          cache tiles x1 × y1 × r1
//!     pack B tile                        cache_read
//!     for i0 / j0 in `inner_n_first`     register tiles x0 × y0
//!       acc = 0 or C                     in locals (x0,y0 unrolled) or in scratch memory
//!       for kk step r0 { for u in 0..r0 (unroll r0) { acc += splat(A[i,k]) · B[k, j..j+4] } }
//!       C = acc                          or, after the last K tile, C = act(acc + bias) + R
//! ```
//!
//! A fused epilogue (see `Op`'s docs) is applied in registers as the tile is
//! stored, once per output element: when K is split into several cache
//! tiles, only by the stores of the last one (a static choice where the K
//! tile's origin is constant, else an `if` per register tile).
//!
//! `matmul_i16` is the same nest over words of two 16-bit values: K counts
//! words (K/2 of them), and so do the schedule's `r0` and `r1`; the
//! micro-kernel's step is `acc += dot16(splat(A[i,p]), B[p, j..j+4])` on
//! `i32` lanes, and a tile leaves its integer accumulators only when it is
//! stored, as `stof32(acc)·SA[i]·SB[j..j+4]` (added to C when K is split).
//! It needs the vector path with the tile in registers (`Schedule::check`).

use super::{Epi, Gen, HasGen, tiled};
use crate::ir::{BinOp, Buffer, Elem, Expr, For, Func, Handle, LoadTy, Space, Stmt, Ty, Var, const_i32};
use crate::op::{Op, OpKind};
use crate::schedule::{Dim, Schedule, UnrollLoop};

type E = Handle<Expr>;

/// The statements for one element group of a tile kept in scratch memory:
/// `(row, column, index in the tile, access type)`.
type TileVisit<'a, T> = dyn FnMut(&mut T, E, E, E, LoadTy) -> Vec<Stmt> + 'a;

struct Mm<'s> {
    g: Gen,
    s: &'s Schedule,
    m: u32,
    k: u32,
    n: u32,
    a: Handle<Buffer>,
    b: Handle<Buffer>,
    c: Handle<Buffer>,
    pack: Option<Handle<Buffer>>,
    acc: Option<Handle<Buffer>>,
    /// Row strides of B and of C (and R), in elements: N, or the whole op's
    /// N in a part that has fewer columns.
    ldb: u32,
    ldc: u32,
    /// Element offsets of the current batch in A, B and C.
    off: Option<[E; 3]>,
    multi_k: bool,
    epi: Epi,
    /// `matmul_i16`: the row and column scales SA and SB.
    scales: Option<[Handle<Buffer>; 2]>,
}

/// Which stores of a register tile apply the epilogue.
enum Last {
    /// This K tile is the last: every store.
    Always,
    /// Not the last: none.
    Never,
    /// Decided at run time: the conditions "last" and "not last".
    When(E, E),
}

/// Where the micro-kernel reads B from.
#[derive(Clone, Copy)]
struct Cols {
    /// First column, in C's coordinates.
    global: E,
    /// First column, relative to the cache tile (the packed buffer's coordinates).
    local: E,
    /// Width of the cache tile (row stride of the packed buffer).
    tile: u32,
}

/// The sub-problem one generated function computes: the whole op, or one
/// part of a threaded kernel (see `crate::parts`), whose arguments start at
/// the part's first element and keep the whole op's strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct View {
    pub batch: u32,
    pub m: u32,
    pub n: u32,
    /// Row strides of B and C (and R).
    pub ldb: u32,
    pub ldc: u32,
    /// Batch strides of A, B and C.
    pub batch_stride: [u32; 3],
}

impl View {
    /// The whole of `op`.
    pub fn whole(op: &Op) -> View {
        let (batch, m, _, n) = op.bmkn();
        let k = reduction(op);
        View { batch, m, n, ldb: n, ldc: n, batch_stride: [m * k, k * n, m * n] }
    }
}

pub fn generate(op: &Op, s: &Schedule) -> Func {
    generate_view(op, s, &View::whole(op))
}

/// Length of the reduction in elements of A's rows: K, or K/2 words for `matmul_i16`.
pub fn reduction(op: &Op) -> u32 {
    let k = op.bmkn().2;
    if op.kind() == OpKind::MatmulI16 { k / 2 } else { k }
}

/// The function computing `view` of `op`: its buffers hold exactly the
/// elements the view reaches, so the verifier bounds every index to them.
pub fn generate_view(op: &Op, s: &Schedule, v: &View) -> Func {
    let k = reduction(op);
    let i16 = op.kind() == OpKind::MatmulI16;
    let elem = if i16 { Elem::U32 } else { Elem::F32 };
    let (batch, m, n) = (v.batch, v.m, v.n);
    let mut f = Func::new(op.slug());
    let last = batch - 1;
    let [sa, sb, sc] = v.batch_stride;
    let c_len = last * sc + (m - 1) * v.ldc + n;
    let a = f.buffer("A", elem, last * sa + m * k, Space::Param(0), false);
    let b = f.buffer("B", elem, last * sb + (k - 1) * v.ldb + n, Space::Param(1), false);
    let scales = i16.then(|| [f.buffer("SA", Elem::F32, m, Space::Param(2), false), f.buffer("SB", Elem::F32, n, Space::Param(3), false)]);
    let (epi, out) = Epi::declare(&mut f, op, n, c_len);
    let c = f.buffer("C", Elem::F32, c_len, Space::Param(out), true);
    let pack = s.cache_read.then(|| f.buffer("P", elem, s.r1.min(k) * s.y1.min(n), Space::Scratch, true));
    let acc = (!s.tile_in_registers()).then(|| f.buffer("ACC", Elem::F32, s.x0 * s.y0, Space::Scratch, true));
    let multi_k = s.r1 < k;
    let mut mm = Mm { g: Gen::new(f), s, m, k, n, a, b, c, pack, acc, ldb: v.ldb, ldc: v.ldc, off: None, multi_k, epi, scales };
    let body = if batch > 1 {
        let bi = mm.g.fresh("b", Ty::I32);
        let bv = mm.g.f.get(bi);
        let offs = v.batch_stride.map(|stride| mm.g.f.mul_c(bv, stride as i64));
        mm.off = Some(offs);
        let inner = mm.batch_body();
        let (lo, hi) = (mm.g.f.i32(0), mm.g.f.i32(batch as i32));
        vec![Stmt::For(For { var: bi, lo, hi, step: 1, unroll: false, body: inner })]
    } else {
        mm.batch_body()
    };
    mm.g.f.body = body;
    mm.g.f
}

impl HasGen for Mm<'_> {
    fn builder(&mut self) -> &mut Gen {
        &mut self.g
    }
}

impl Mm<'_> {
    fn f(&mut self) -> &mut Func {
        &mut self.g.f
    }

    fn off(&mut self, which: usize, e: E) -> E {
        match self.off {
            Some(o) => self.g.f.add(o[which], e),
            None => e,
        }
    }

    fn batch_body(&mut self) -> Vec<Stmt> {
        let mut out = Vec::new();
        if self.multi_k {
            // Each cache tile along K accumulates into C, so C starts at
            // zero: one run of m·n elements, or m runs of n in a part whose
            // rows are further apart.
            let (rows, len) = if self.ldc == self.n { (1, self.m * self.n) } else { (self.m, self.n) };
            let r = (rows > 1).then(|| self.g.fresh("zr", Ty::I32));
            let row = match r {
                Some(r) => {
                    let rv = self.f().get(r);
                    let ldc = self.ldc as i64;
                    self.f().mul_c(rv, ldc)
                }
                None => self.f().i32(0),
            };
            let full = if self.s.vectorize == 4 { len / 4 * 4 } else { 0 };
            let mut zero_row = Vec::new();
            for (lo, hi, step, vector) in [(0, full, 4, true), (full, len, 1, false)] {
                if lo >= hi {
                    continue;
                }
                let z = self.g.fresh("z", Ty::I32);
                let zv = self.f().get(z);
                let at = self.g.plus(row, zv);
                let index = self.off(2, at);
                let zero = self.f().f32(0.0);
                let value = if vector { self.f().splat(zero) } else { zero };
                let (lo, hi) = (self.f().i32(lo as i32), self.f().i32(hi as i32));
                let store = Stmt::Store { buf: self.c, index, value };
                zero_row.push(Stmt::For(For { var: z, lo, hi, step, unroll: false, body: vec![store] }));
            }
            match r {
                None => out.extend(zero_row),
                Some(r) => {
                    let (lo, hi) = (self.f().i32(0), self.f().i32(rows as i32));
                    out.push(Stmt::For(For { var: r, lo, hi, step: 1, unroll: false, body: zero_row }));
                }
            }
        }
        let zero = self.f().i32(0);
        out.extend(self.cache(0, [zero; 3], [self.m, self.n, self.k]));
        out
    }

    /// Cache-tile loop `level` (0..3) of the order, then the block body.
    /// `org` and `size` are indexed M, N, K.
    fn cache(&mut self, level: usize, org: [E; 3], size: [u32; 3]) -> Vec<Stmt> {
        if level == 3 {
            return self.block(org, size);
        }
        let dim = self.s.order.0[level];
        let (d, tile, name) = match dim {
            Dim::M => (0, self.s.x1, "i1"),
            Dim::N => (1, self.s.y1, "j1"),
            Dim::K => (2, self.s.r1, "k1"),
        };
        let origin = org[d];
        tiled(self, origin, size[d], tile, name, false, &mut |this, o, _local, sz| {
            let (mut org2, mut size2) = (org, size);
            org2[d] = o;
            size2[d] = sz;
            this.cache(level + 1, org2, size2)
        })
    }

    fn block(&mut self, org: [E; 3], size: [u32; 3]) -> Vec<Stmt> {
        let [om, on, ok] = org;
        let [sm, sn, sk] = size;
        let mut out = Vec::new();
        if let Some(p) = self.pack {
            out.extend(self.pack_b(p, on, ok, sn, sk));
        }
        let n_first = self.s.inner_n_first;
        let (x0, y0) = (self.s.x0, self.s.y0);
        if n_first {
            out.extend(tiled(self, on, sn, y0, "j0", false, &mut |this, cg, cl, cs| {
                tiled(this, om, sm, x0, "i0", false, &mut |this, rg, _, rs| {
                    this.micro(rg, rs, Cols { global: cg, local: cl, tile: sn }, cs, ok, sk)
                })
            }));
        } else {
            out.extend(tiled(self, om, sm, x0, "i0", false, &mut |this, rg, _, rs| {
                tiled(this, on, sn, y0, "j0", false, &mut |this, cg, cl, cs| {
                    this.micro(rg, rs, Cols { global: cg, local: cl, tile: sn }, cs, ok, sk)
                })
            }));
        }
        out
    }

    /// Copies B[ok..ok+sk, on..on+sn] into P with row stride sn.
    fn pack_b(&mut self, p: Handle<Buffer>, on: E, ok: E, sn: u32, sk: u32) -> Vec<Stmt> {
        let kk = self.g.fresh("pk", Ty::I32);
        let kv = self.f().get(kk);
        let vec_cols = if self.s.vectorize == 4 { sn / 4 * 4 } else { 0 };
        let (vector, scalar) = if self.scales.is_some() { (LoadTy::U32x4, LoadTy::U32) } else { (LoadTy::F32x4, LoadTy::F32) };
        let mut inner = Vec::new();
        for (lo, hi, step, ty) in [(0, vec_cols, 4, vector), (vec_cols, sn, 1, scalar)] {
            if lo >= hi {
                continue;
            }
            let jj = self.g.fresh("pj", Ty::I32);
            let jv = self.f().get(jj);
            let krow = self.g.plus(ok, kv);
            let brow = self.g.f.mul_c(krow, self.ldb as i64);
            let bcol = self.g.plus(on, jv);
            let bidx = self.f().add(brow, bcol);
            let bidx = self.off(1, bidx);
            let prow = self.f().mul_c(kv, sn as i64);
            let pidx = self.f().add(prow, jv);
            let b = self.b;
            let value = self.f().load(ty, b, bidx);
            let (lo, hi) = (self.f().i32(lo as i32), self.f().i32(hi as i32));
            inner.push(Stmt::For(For { var: jj, lo, hi, step, unroll: false, body: vec![Stmt::Store { buf: p, index: pidx, value }] }));
        }
        let (lo, hi) = (self.f().i32(0), self.f().i32(sk as i32));
        vec![Stmt::For(For { var: kk, lo, hi, step: 1, unroll: false, body: inner })]
    }

    fn a_index(&mut self, row: E, k: E) -> E {
        let r = self.g.f.mul_c(row, self.k as i64);
        let i = self.f().add(r, k);
        self.off(0, i)
    }

    fn b_load(&mut self, ty: LoadTy, kg: E, kl: E, cols: Cols, col: u32) -> E {
        match self.pack {
            Some(p) => {
                let r = self.f().mul_c(kl, cols.tile as i64);
                let c = self.g.plus_c(cols.local, col);
                let i = self.f().add(r, c);
                self.f().load(ty, p, i)
            }
            None => {
                let r = self.g.f.mul_c(kg, self.ldb as i64);
                let c = self.g.plus_c(cols.global, col);
                let i = self.f().add(r, c);
                let i = self.off(1, i);
                let b = self.b;
                self.f().load(ty, b, i)
            }
        }
    }

    fn c_index(&mut self, row: E, col: E) -> E {
        let r = self.g.f.mul_c(row, self.ldc as i64);
        let i = self.f().add(r, col);
        self.off(2, i)
    }

    /// One register tile: rows × cols of C at (rg, cols), over K in [ok, ok+sk).
    fn micro(&mut self, rg: E, rows: u32, cols: Cols, ncols: u32, ok: E, sk: u32) -> Vec<Stmt> {
        let nv = if self.s.vectorize == 4 { ncols / 4 } else { 0 };
        let ns = ncols - 4 * nv;
        if self.acc.is_some() {
            return self.micro_in_memory(rg, rows, cols, nv, ns, ok, sk);
        }
        if let Some(scales) = self.scales {
            assert_eq!(ns, 0, "matmul_i16 tiles are whole vectors (N % 4 == 0, y0 % 4 == 0)");
            return self.micro_i16(scales, rg, rows, cols, nv, ok, sk);
        }
        // The tile in locals: one variable per vector or scalar of C.
        let av: Vec<Vec<Handle<Var>>> =
            (0..rows).map(|r| (0..nv).map(|v| self.g.fresh(&format!("c{r}_{v}"), Ty::F32x4)).collect()).collect();
        let sv: Vec<Vec<Handle<Var>>> = (0..rows).map(|r| (0..ns).map(|j| self.g.fresh(&format!("s{r}_{j}"), Ty::F32)).collect()).collect();
        let mut out = Vec::new();
        for r in 0..rows {
            let row = self.g.plus_c(rg, r);
            for (j, &var) in av[r as usize].iter().chain(&sv[r as usize]).enumerate() {
                let (col, ty) = col_of(j as u32, nv);
                let value = if self.multi_k {
                    let c = self.g.plus_c(cols.global, col);
                    let idx = self.c_index(row, c);
                    let cb = self.c;
                    self.f().load(ty, cb, idx)
                } else {
                    let z = self.f().f32(0.0);
                    if ty == LoadTy::F32x4 { self.f().splat(z) } else { z }
                };
                out.push(Stmt::Set { var, value });
            }
        }
        out.extend(self.k_loop(ok, sk, &mut |this, kg, kl| {
            let mut body = Vec::new();
            for r in 0..rows {
                let row = this.g.plus_c(rg, r);
                for (j, &var) in av[r as usize].iter().chain(&sv[r as usize]).enumerate() {
                    let (col, ty) = col_of(j as u32, nv);
                    let ai = this.a_index(row, kg);
                    let ab = this.a;
                    let a = this.f().load(LoadTy::F32, ab, ai);
                    let a = if ty == LoadTy::F32x4 { this.f().splat(a) } else { a };
                    let b = this.b_load(ty, kg, kl, cols, col);
                    let acc = this.f().get(var);
                    let value = this.f().fma(a, b, acc);
                    body.push(Stmt::Set { var, value });
                }
            }
            body
        }));
        let stores = |this: &mut Self, epilogue: bool| {
            let mut out = Vec::new();
            for r in 0..rows {
                let row = this.g.plus_c(rg, r);
                for (j, &var) in av[r as usize].iter().chain(&sv[r as usize]).enumerate() {
                    let (col, ty) = col_of(j as u32, nv);
                    let c = this.g.plus_c(cols.global, col);
                    let index = this.c_index(row, c);
                    let value = this.f().get(var);
                    out.extend(this.store_c(index, value, ty, c, epilogue));
                }
            }
            out
        };
        out.extend(self.last_k(ok, sk, &mut |this, epilogue| stores(this, epilogue)));
        out
    }

    /// [`Mm::micro`] for `matmul_i16`: `nv` vectors of `i32` accumulators per
    /// row, in locals, scaled to f32 as they are stored.
    #[allow(clippy::too_many_arguments)]
    fn micro_i16(&mut self, [sa, sb]: [Handle<Buffer>; 2], rg: E, rows: u32, cols: Cols, nv: u32, ok: E, sk: u32) -> Vec<Stmt> {
        let av: Vec<Vec<Handle<Var>>> =
            (0..rows).map(|r| (0..nv).map(|v| self.g.fresh(&format!("c{r}_{v}"), Ty::U32x4)).collect()).collect();
        let mut out = Vec::new();
        for &var in av.iter().flatten() {
            let z = self.f().i32(0);
            let value = self.f().splat(z);
            out.push(Stmt::Set { var, value });
        }
        // The tile's first row of A at this K tile's origin, computed once:
        // inside the K loop the rows' addresses are then one add and a
        // constant offset each (integer work competes with the dot products
        // for the vector ports).
        let first = self.g.fresh("a0", Ty::I32);
        let value = self.a_index(rg, ok);
        out.push(Stmt::Set { var: first, value });
        out.extend(self.k_loop(ok, sk, &mut |this, kg, kl| {
            let mut body = Vec::new();
            for r in 0..rows {
                for (v, &var) in av[r as usize].iter().enumerate() {
                    // Row r is a constant r·K further: an offset of the load.
                    let start = this.f().get(first);
                    let at = this.g.plus(start, kl);
                    let ai = this.g.plus_c(at, r * this.k);
                    let ab = this.a;
                    let a = this.f().load(LoadTy::U32, ab, ai);
                    let a = this.f().splat(a);
                    let b = this.b_load(LoadTy::U32x4, kg, kl, cols, 4 * v as u32);
                    let dot = this.f().exprs.push(Expr::DotI16(a, b));
                    let acc = this.f().get(var);
                    let value = this.f().add(dot, acc);
                    body.push(Stmt::Set { var, value });
                }
            }
            body
        }));
        out.extend(self.last_k(ok, sk, &mut |this, epilogue| {
            let mut out = Vec::new();
            for r in 0..rows {
                let row = this.g.plus_c(rg, r);
                for (v, &var) in av[r as usize].iter().enumerate() {
                    let c = this.g.plus_c(cols.global, 4 * v as u32);
                    let index = this.c_index(row, c);
                    let acc = this.f().get(var);
                    let x = this.f().exprs.push(Expr::SToF32(acc));
                    let s_row = this.f().load(LoadTy::F32, sa, row);
                    let s_row = this.f().splat(s_row);
                    let s_col = this.f().load(LoadTy::F32x4, sb, c);
                    let x = this.f().mul(x, s_row);
                    let mut x = this.f().mul(x, s_col);
                    if this.multi_k {
                        let cb = this.c;
                        let old = this.f().load(LoadTy::F32x4, cb, index);
                        x = this.f().add(old, x);
                    }
                    out.extend(this.store_c(index, x, LoadTy::F32x4, c, epilogue));
                }
            }
            out
        }));
        out
    }

    /// `C[index] = value`, through the epilogue when `epilogue` (`col` is
    /// the column in 0..N).
    fn store_c(&mut self, index: E, value: E, ty: LoadTy, col: E, epilogue: bool) -> Vec<Stmt> {
        if !epilogue {
            return vec![Stmt::Store { buf: self.c, index, value }];
        }
        let (mut out, value) = self.epi.apply(&mut self.g, value, ty, col, index);
        out.push(Stmt::Store { buf: self.c, index, value });
        out
    }

    /// The stores of a register tile over K in [ok, ok+sk): `stores(true)`
    /// (through the epilogue) where this is the last K tile, `stores(false)`
    /// elsewhere. Without an epilogue, always `stores(false)`: the plain
    /// kernel is unchanged.
    fn last_k(&mut self, ok: E, sk: u32, stores: &mut dyn FnMut(&mut Self, bool) -> Vec<Stmt>) -> Vec<Stmt> {
        if self.epi.is_none() {
            return stores(self, false);
        }
        let last = match const_i32(&self.g.f, ok) {
            Some(o) if o as u32 + sk == self.k => Last::Always,
            Some(_) => Last::Never,
            None => {
                // ok is a multiple of r1 below K: last ⇔ ok > K − sk − 1.
                let start = (self.k - sk) as i32;
                let before = self.f().i32(start - 1);
                let is_last = self.f().bin(BinOp::Lt, before, ok);
                let limit = self.f().i32(start);
                let not_last = self.f().bin(BinOp::Lt, ok, limit);
                Last::When(is_last, not_last)
            }
        };
        match last {
            Last::Always => stores(self, true),
            Last::Never => stores(self, false),
            Last::When(is_last, not_last) => {
                let fused = stores(self, true);
                let plain = stores(self, false);
                vec![Stmt::If { cond: is_last, body: fused }, Stmt::If { cond: not_last, body: plain }]
            }
        }
    }

    /// The register tile kept in scratch memory, with rolled row and column loops.
    #[allow(clippy::too_many_arguments)]
    fn micro_in_memory(&mut self, rg: E, rows: u32, cols: Cols, nv: u32, ns: u32, ok: E, sk: u32) -> Vec<Stmt> {
        let acc = self.acc.expect("scratch tile");
        let width = 4 * nv + ns;
        // Visits every (row, column group) of the tile with rolled loops.
        let each = |this: &mut Self, f: &mut TileVisit<Self>| -> Vec<Stmt> {
            let r = this.g.fresh("r", Ty::I32);
            let rv = this.f().get(r);
            let row = this.g.plus(rg, rv);
            let mut inner = Vec::new();
            for (lo, hi, step, ty) in [(0, 4 * nv, 4, LoadTy::F32x4), (4 * nv, width, 1, LoadTy::F32)] {
                if lo >= hi {
                    continue;
                }
                let j = this.g.fresh("c", Ty::I32);
                let jv = this.f().get(j);
                let ar = this.f().mul_c(rv, width as i64);
                let ai = this.f().add(ar, jv);
                let body = f(this, row, jv, ai, ty);
                let (lo, hi) = (this.f().i32(lo as i32), this.f().i32(hi as i32));
                inner.push(Stmt::For(For { var: j, lo, hi, step, unroll: false, body }));
            }
            let (lo, hi) = (this.f().i32(0), this.f().i32(rows as i32));
            vec![Stmt::For(For { var: r, lo, hi, step: 1, unroll: false, body: inner })]
        };
        let mut out = each(self, &mut |this, row, j, ai, ty| {
            let value = if this.multi_k {
                let c = this.g.plus(cols.global, j);
                let idx = this.c_index(row, c);
                let cb = this.c;
                this.f().load(ty, cb, idx)
            } else {
                let z = this.f().f32(0.0);
                if ty == LoadTy::F32x4 { this.f().splat(z) } else { z }
            };
            vec![Stmt::Store { buf: acc, index: ai, value }]
        });
        out.extend(self.k_loop(ok, sk, &mut |this, kg, kl| {
            each(this, &mut |this, row, j, ai, ty| {
                let aidx = this.a_index(row, kg);
                let ab = this.a;
                let a = this.f().load(LoadTy::F32, ab, aidx);
                let a = if ty == LoadTy::F32x4 { this.f().splat(a) } else { a };
                let jc = Cols { global: this.g.plus(cols.global, j), local: this.g.plus(cols.local, j), tile: cols.tile };
                let b = this.b_load(ty, kg, kl, jc, 0);
                let old = this.f().load(ty, acc, ai);
                let value = this.f().fma(a, b, old);
                vec![Stmt::Store { buf: acc, index: ai, value }]
            })
        }));
        out.extend(self.last_k(ok, sk, &mut |this, epilogue| {
            each(this, &mut |this, row, j, ai, ty| {
                let c = this.g.plus(cols.global, j);
                let index = this.c_index(row, c);
                let value = this.f().load(ty, acc, ai);
                this.store_c(index, value, ty, c, epilogue)
            })
        }));
        out
    }

    /// The reduction loop of a register tile: full chunks of r0 steps (each
    /// chunk an inner loop over r0, unrolled if the schedule says so), then
    /// the remaining steps. `body(global k, k within the cache tile)`.
    fn k_loop(&mut self, ok: E, sk: u32, body: &mut dyn FnMut(&mut Self, E, E) -> Vec<Stmt>) -> Vec<Stmt> {
        let r0 = self.s.r0;
        let unroll = self.s.unrolls(UnrollLoop::R0);
        let full = sk / r0 * r0;
        let mut out = Vec::new();
        let mut chunk = |this: &mut Self, base: E, count: u32| -> Stmt {
            let u = this.g.fresh("u", Ty::I32);
            let uv = this.f().get(u);
            let kl = this.g.plus(base, uv);
            let kg = this.g.plus(ok, kl);
            let inner = body(this, kg, kl);
            let (lo, hi) = (this.f().i32(0), this.f().i32(count as i32));
            Stmt::For(For { var: u, lo, hi, step: 1, unroll, body: inner })
        };
        if full == r0 {
            let zero = self.f().i32(0);
            out.push(chunk(self, zero, r0));
        } else if full > 0 {
            let kk = self.g.fresh("kk", Ty::I32);
            let kv = self.f().get(kk);
            let inner = chunk(self, kv, r0);
            let (lo, hi) = (self.f().i32(0), self.f().i32(full as i32));
            out.push(Stmt::For(For { var: kk, lo, hi, step: r0, unroll: false, body: vec![inner] }));
        }
        if sk > full {
            let base = self.f().i32(full as i32);
            out.push(chunk(self, base, sk - full));
        }
        out
    }
}

/// Column offset and access type of the `j`-th accumulator of a tile row.
fn col_of(j: u32, nv: u32) -> (u32, LoadTy) {
    if j < nv { (4 * j, LoadTy::F32x4) } else { (4 * nv + (j - nv), LoadTy::F32) }
}
