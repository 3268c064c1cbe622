//! `matmul` and `batch_matmul` for the GPU (WGSL): one workgroup per output
//! tile, one register tile per thread, unrolled into scalar (or `vec4`)
//! accumulators.
//!
//! Long on purpose: one generator, whose staging, register tile and remainder code depend on each other.
//!
//! ```text
//! workgroup (group_id.x, group_id.y, group_id.z) = (N tile, M tile, batch)
//! threads   T = (x1/x0)·(y1/y0); thread t owns rows trow + i·(x1/x0)
//!           (with cache_read and vectorize 4: groups of 4 consecutive rows
//!           4·(trow + g·(x1/x0)) + 0..4, read as one vec4 from As) and
//!           columns tcol + j·(y1/y0) of the tile (strided, so that
//!           neighbouring threads touch neighbouring columns), or with
//!           vectorize 4 groups of 4 columns 4·(tcol + jj·(y1/y0))
//! for each K slab of r1 (cache_read):      stage A (transposed) and B in
//!                                          workgroup memory, barrier,
//!   for kk step r0 { for u in 0..r0 }      a_i = As[k][row], b_j = Bs[k][col],
//!                                          acc_ij = fma(a_i, b_j, acc_ij)
//!   barrier                                (double_buffer: two slabs in flight,
//!                                          one barrier per slab)
//! without cache_read, a_i and b_j come straight from global memory
//! store acc where row < M and col < N   (or act(acc + bias) + R: a fused
//!                                        epilogue, in registers, per element)
//! ```
//!
//! `matmul_q4` with cache_read is the same kernel with B staged from the
//! packed weights: a thread reads one word (8 values of K) of 4 neighbouring
//! columns (1 without vec4) and their scales, and writes the 8 dequantised
//! rows of them to the B tile as whole `vec4`s, so each weight is unpacked
//! once per workgroup and reused by all x1 rows of the tile.
//!
//! With `dequant_pass`, matmul_q4 runs in two passes: `unpack`
//! ([`super::q4_gpu::generate_unpack`]) writes the dense K × N weights to
//! the scratch buffer, and this kernel reads them as the plain matmul reads
//! B, so that no workgroup unpacks.
//!
//! With split_k = s > 1 (staged only), the workgroup is s groups of T
//! threads, each with its own A and B tiles: group g stages and computes
//! the slabs g, g + s, g + 2s, ... and the groups' register tiles are added
//! in workgroup memory at the end, group 1 then 2 ... into group 0, which
//! stores: a fixed order, so the result does not depend on timing. It fills
//! the GPU where M·N makes few workgroups (small M, long K).
//!
//! Any shape is exact: rows and columns past the edge are clamped when read
//! (they only feed accumulators that are never stored) and skipped when
//! written; K past the edge is zero-filled in workgroup memory or handled by a
//! static remainder loop. Every barrier sits in uniform control flow: at the
//! top level, or in loops and `if`s whose conditions depend only on constants
//! and loop counters.

use super::q4_gpu::{Format, Nibble, Weights, flip_bytes};
use super::{Epi, Gen, HasGen};
use crate::ir::{BinOp, Buffer, Builtin, Elem, Expr, For, Func, Handle, LoadTy, Space, Stmt, Ty, Var};
use crate::op::{Op, OpKind};
pub use crate::schedule::sizes::{dequant_elem, scratch_bytes, slice_slabs, workgroup_bytes};
use crate::schedule::sizes::{partial_base, reduce_in_b_tile};
use crate::schedule::{Schedule, UnrollLoop};

type E = Handle<Expr>;

/// Where the B tile comes from.
#[derive(Clone, Copy)]
enum BSrc {
    /// `B`, `f32[K, N]` per batch.
    F32(Handle<Buffer>),
    /// The block-quantised ops' packed weights `W` (`u32[N, K/8]`, nibble
    /// j of word w is column k = 8w + j; Q8_0: `u32[N, K/4]`, byte j of
    /// word w is column 4w + j) and scales (`f32[N, K/32]`), dequantised
    /// as the tile is staged: `(nibble − 8) · S` (Q4_0), `D · nibble + Mn`
    /// (Q4_1), `D · byte` (Q8_0).
    Q4 { fmt: Format, wt: Weights },
}

struct Mm<'s> {
    g: Gen,
    s: &'s Schedule,
    m: u32,
    k: u32,
    n: u32,
    a: Handle<Buffer>,
    b: BSrc,
    c: Handle<Buffer>,
    /// Threads along M and N.
    tx: u32,
    ty: u32,
    /// Whether B, C and the B tile are accessed as `vec4`.
    vec: bool,
    /// Whether a thread's rows come in groups of 4 consecutive rows, read
    /// from the transposed A tile as one `vec4` per group (see [`rows_vec4`]).
    rows_vec: bool,
    /// This thread's index in its split-K group (the workgroup's, without split-K).
    lid: E,
    /// With split-K: the thread's group, and the offsets of the group's A
    /// and B tiles in the workgroup buffers.
    kg: Option<E>,
    /// With k_slices: this workgroup's slice of the K slabs.
    slice: Option<E>,
    tile_off: [E; 2],
    trow: E,
    tcol: E,
    m0: E,
    n0: E,
    /// Element offsets of this batch in A, B and C.
    off: [E; 3],
    acc: Vec<Handle<Var>>,
    av: Vec<Handle<Var>>,
    avec: Vec<Handle<Var>>,
    bv: Vec<Handle<Var>>,
    epi: Epi,
}

impl HasGen for Mm<'_> {
    fn builder(&mut self) -> &mut Gen {
        &mut self.g
    }
}

/// Whether `matmul` under `s` uses `vec4` columns: only where alignment allows.
pub fn uses_vec4(n: u32, s: &Schedule) -> bool {
    s.vectorize == 4 && n.is_multiple_of(4) && s.y0.is_multiple_of(4)
}

/// Whether the register tile's rows are read as `vec4`s from the transposed
/// A tile in workgroup memory: with cache_read and vectorize 4, when x0 and
/// x1 are multiples of 4. A thread then owns x0/4 groups of 4 consecutive
/// rows, `4·(trow + g·(x1/x0)) + 0..4`, and one 16-byte read feeds 4 rows,
/// instead of 4 scalar reads.
pub fn rows_vec4(s: &Schedule) -> bool {
    s.cache_read && s.vectorize == 4 && s.x0.is_multiple_of(4) && s.x1.is_multiple_of(4)
}

/// Threads per workgroup and workgroup counts of the matmul kernel (with
/// `k_slices`, of its first pass: `group_id.z` counts batch · k_slices).
pub fn launch(op: &Op, s: &Schedule) -> ([u32; 3], [u32; 3]) {
    let (batch, m, _, n) = op.bmkn();
    let threads = (s.x1 / s.x0) * (s.y1 / s.y0) * s.split_k;
    ([threads, 1, 1], [n.div_ceil(s.y1), m.div_ceil(s.x1), batch * s.k_slices])
}

/// Threads per workgroup of the `reduce` pass.
const REDUCE_THREADS: u32 = 256;

/// The `reduce` pass of a kernel with `k_slices` > 1: each thread adds one
/// output's (or, where N is a multiple of 4, four neighbouring outputs')
/// partial sums from the scratch buffer in slice order, applies the
/// epilogue and stores C. Returns the function, its workgroup size and
/// dispatch (two dimensions where one would pass 65535 workgroups).
pub fn generate_reduce(op: &Op, s: &Schedule) -> (Func, [u32; 3], [u32; 3]) {
    let (batch, m, _, n) = op.bmkn();
    let total = batch * m * n;
    let ks = s.k_slices;
    let mut f = Func::new(format!("{}_reduce", op.slug()));
    let fe = super::float_elem(op);
    let (mut epi, out) = Epi::declare(&mut f, op, n, total);
    let c = f.buffer("C", fe, total, Space::Param(out), true);
    let base = partial_base(op, s);
    let p = f.buffer("P", Elem::F32, base + ks * total, Space::Global, true);
    let w = if n.is_multiple_of(4) { 4 } else { 1 };
    let lty = if w == 4 { LoadTy::F32x4 } else { LoadTy::F32 };
    let units = total / w;
    let groups = units.div_ceil(REDUCE_THREADS);
    let dx = groups.min(65535);
    let dispatch = [dx, groups.div_ceil(dx), 1];
    let lid = f.exprs.push(Expr::Builtin(Builtin::LocalId(0)));
    let gx = f.exprs.push(Expr::Builtin(Builtin::GroupId(0)));
    let gy = f.exprs.push(Expr::Builtin(Builtin::GroupId(1)));
    let mut g = Gen::new(f);
    let mut body = Vec::new();
    let row = g.f.mul_c(gy, dx as i64);
    let group = g.plus(row, gx);
    let first = g.f.mul_c(group, REDUCE_THREADS as i64);
    let unit = g.plus(first, lid);
    let uv = g.fresh("unit", Ty::I32);
    body.push(Stmt::Set { var: uv, value: unit });
    let unit = g.f.get(uv);
    let idx = g.f.mul_c(unit, w as i64);
    let sum = g.fresh("sum", if w == 4 { Ty::F32x4 } else { Ty::F32 });
    let first = g.plus_c(idx, base);
    let mut work = vec![Stmt::Set { var: sum, value: g.f.load(lty, p, first) }];
    for slice in 1..ks {
        let at = g.plus_c(idx, base + slice * total);
        let part = g.f.load(lty, p, at);
        let acc = g.f.get(sum);
        work.push(Stmt::Set { var: sum, value: g.f.add(acc, part) });
    }
    let value = g.f.get(sum);
    let (pre, value) = if epi.is_none() {
        (Vec::new(), value)
    } else {
        let nc = g.f.i32(n as i32);
        let col = g.f.bin(BinOp::Rem, idx, nc);
        epi.apply(&mut g, value, lty, col, idx)
    };
    work.extend(pre);
    work.push(Stmt::Store { buf: c, index: idx, value });
    if dispatch[0] * dispatch[1] * REDUCE_THREADS != units {
        let uc = g.f.i32(units as i32);
        let cond = g.f.bin(BinOp::Lt, unit, uc);
        body.push(Stmt::If { cond, body: work });
    } else {
        body.extend(work);
    }
    g.f.body = body;
    (g.f, [REDUCE_THREADS, 1, 1], dispatch)
}

pub fn generate(op: &Op, s: &Schedule) -> Func {
    let (batch, m, k, n) = op.bmkn();
    let mut f = Func::new(op.slug());
    let fe = super::float_elem(op);
    let a = f.buffer("A", fe, batch * m * k, Space::Param(0), false);
    let b = if op.kind() == OpKind::MatmulQ4 && s.dequant_pass {
        // The `unpack` pass has written the dense K × N weights to scratch.
        BSrc::F32(f.buffer("B", dequant_elem(op, s), k * n, Space::Global, false))
    } else if op.kind().block_quantized() {
        BSrc::Q4 { fmt: Format::of(op), wt: Weights::declare(&mut f, op) }
    } else {
        BSrc::F32(f.buffer("B", fe, batch * k * n, Space::Param(1), false))
    };
    let ks = s.k_slices;
    // With k_slices, this pass writes raw partial tiles to the scratch
    // buffer (slice-major: P[slice][batch][m][n]); `reduce` does the rest.
    let (epi, c) = if ks > 1 {
        (Epi::none(), f.buffer("P", Elem::F32, partial_base(op, s) + ks * batch * m * n, Space::Global, true))
    } else {
        let (epi, out) = Epi::declare(&mut f, op, n, batch * m * n);
        (epi, f.buffer("C", fe, batch * m * n, Space::Param(out), true))
    };
    let vec = uses_vec4(n, s);
    let (tx, ty) = (s.x1 / s.x0, s.y1 / s.y0);
    let lid_all = f.exprs.push(Expr::Builtin(Builtin::LocalId(0)));
    let gx = f.exprs.push(Expr::Builtin(Builtin::GroupId(0)));
    let gy = f.exprs.push(Expr::Builtin(Builtin::GroupId(1)));
    let gz = f.exprs.push(Expr::Builtin(Builtin::GroupId(2)));
    let mut g = Gen::new(f);
    let mut body = Vec::new();
    let mut set = |g: &mut Gen, name: &str, value: E| {
        let v = g.fresh(name, Ty::I32);
        body.push(Stmt::Set { var: v, value });
        g.f.get(v)
    };
    let zero = g.f.i32(0);
    let (lid, kg, tile_off) = if s.split_k > 1 {
        let tg = g.f.i32((tx * ty) as i32);
        let l = g.f.bin(BinOp::Rem, lid_all, tg);
        let l = set(&mut g, "l", l);
        let kg = g.f.bin(BinOp::Div, lid_all, tg);
        let kg = set(&mut g, "kg", kg);
        let ao = g.f.mul_c(kg, (s.x1 * s.r1) as i64);
        let bo = g.f.mul_c(kg, (s.r1 * s.y1) as i64);
        (l, Some(kg), [set(&mut g, "aoff", ao), set(&mut g, "boff", bo)])
    } else {
        (lid_all, None, [zero, zero])
    };
    let tyc = g.f.i32(ty as i32);
    let trow = g.f.bin(BinOp::Div, lid, tyc);
    let trow = set(&mut g, "trow", trow);
    let tcol = g.f.bin(BinOp::Rem, lid, tyc);
    let tcol = set(&mut g, "tcol", tcol);
    let m0 = g.f.mul_c(gy, s.x1 as i64);
    let m0 = set(&mut g, "m0", m0);
    let n0 = g.f.mul_c(gx, s.y1 as i64);
    let n0 = set(&mut g, "n0", n0);
    // group_id.z is the batch entry, times k_slices plus the slice.
    let (bz, slice) = if ks == 1 {
        (gz, None)
    } else if batch == 1 {
        (zero, Some(gz))
    } else {
        let kc = g.f.i32(ks as i32);
        let bz = g.f.bin(BinOp::Div, gz, kc);
        let bz = set(&mut g, "bz", bz);
        let sl = g.f.bin(BinOp::Rem, gz, kc);
        (bz, Some(set(&mut g, "slice", sl)))
    };
    let off = if batch == 1 && ks == 1 {
        [zero, zero, zero]
    } else {
        let oa = g.f.mul_c(bz, (m * k) as i64);
        let ob = g.f.mul_c(bz, (k * n) as i64);
        let oc = g.f.mul_c(bz, (m * n) as i64);
        let oc = match slice {
            Some(sl) => {
                let so = g.f.mul_c(sl, (batch * m * n) as i64);
                let so = g.plus_c(so, partial_base(op, s));
                g.plus(oc, so)
            }
            None => oc,
        };
        [set(&mut g, "offa", oa), set(&mut g, "offb", ob), set(&mut g, "offc", oc)]
    };
    let mut mm = Mm {
        g,
        s,
        m,
        k,
        n,
        a,
        b,
        c,
        tx,
        ty,
        vec,
        rows_vec: rows_vec4(s),
        lid,
        kg,
        slice,
        tile_off,
        trow,
        tcol,
        m0,
        n0,
        off,
        acc: Vec::new(),
        av: Vec::new(),
        avec: Vec::new(),
        bv: Vec::new(),
        epi,
    };
    mm.declare_registers(&mut body);
    if s.cache_read {
        mm.staged(&mut body);
    } else {
        mm.direct(&mut body);
    }
    match mm.kg {
        Some(kg) => {
            // Only group 0 holds the sums.
            let mut st = Vec::new();
            mm.store(&mut st);
            let one = mm.f().i32(1);
            let cond = mm.f().bin(BinOp::Lt, kg, one);
            body.push(Stmt::If { cond, body: st });
        }
        None => mm.store(&mut body),
    }
    mm.g.f.body = body;
    mm.g.f
}

impl Mm<'_> {
    fn f(&mut self) -> &mut Func {
        &mut self.g.f
    }

    /// Columns per accumulator (4 with vec4) and accumulators per row.
    fn col_groups(&self) -> (u32, u32) {
        if self.vec { (4, self.s.y0 / 4) } else { (1, self.s.y0) }
    }

    fn vty(&self) -> Ty {
        if self.vec { Ty::F32x4 } else { Ty::F32 }
    }

    fn lty(&self) -> LoadTy {
        if self.vec { LoadTy::F32x4 } else { LoadTy::F32 }
    }

    fn declare_registers(&mut self, body: &mut Vec<Stmt>) {
        let (_, groups) = self.col_groups();
        let vty = self.vty();
        let z = self.f().f32(0.0);
        let zero = if self.vec { self.f().splat(z) } else { z };
        for i in 0..self.s.x0 {
            for j in 0..groups {
                let v = self.g.fresh(&format!("acc_{i}_{j}"), vty);
                body.push(Stmt::Set { var: v, value: zero });
                self.acc.push(v);
            }
        }
        if self.rows_vec {
            for g in 0..self.s.x0 / 4 {
                let v = self.g.fresh(&format!("a4_{g}"), Ty::F32x4);
                self.avec.push(v);
            }
        } else {
            for i in 0..self.s.x0 {
                let v = self.g.fresh(&format!("a_{i}"), Ty::F32);
                self.av.push(v);
            }
        }
        for j in 0..groups {
            let v = self.g.fresh(&format!("b_{j}"), vty);
            self.bv.push(v);
        }
    }

    /// Row `i` of this thread's register tile, relative to the workgroup tile.
    fn row(&mut self, i: u32) -> E {
        let (trow, tx) = (self.trow, self.tx);
        if self.rows_vec {
            let t4 = self.f().mul_c(trow, 4);
            return self.f().add_c(t4, (4 * (i / 4) * tx + i % 4) as i64);
        }
        self.f().add_c(trow, (i * tx) as i64)
    }

    /// First column of accumulator group `j`, relative to the workgroup tile.
    fn col(&mut self, j: u32) -> E {
        let (w, _) = self.col_groups();
        let (tcol, ty) = (self.tcol, self.ty);
        let c = self.f().add_c(tcol, (j * ty) as i64);
        self.f().mul_c(c, w as i64)
    }

    fn min_c(&mut self, a: E, c: u32) -> E {
        let c = self.f().i32(c as i32);
        self.f().bin(BinOp::Min, a, c)
    }

    /// One reduction step: load a_i and b_j with `load_a(row i)` /
    /// `load_b(column group j)`, then the x0 × y0 fused multiply-adds. With
    /// `rows_vec`, `load_a(g)` loads the `vec4` of row group `g` instead.
    fn fma_step(&mut self, load_a: &mut dyn FnMut(&mut Self, u32) -> E, load_b: &mut dyn FnMut(&mut Self, u32) -> E) -> Vec<Stmt> {
        let mut out = Vec::new();
        let (_, groups) = self.col_groups();
        if self.rows_vec {
            for g in 0..self.s.x0 / 4 {
                let value = load_a(self, g);
                out.push(Stmt::Set { var: self.avec[g as usize], value });
            }
        } else {
            for i in 0..self.s.x0 {
                let value = load_a(self, i);
                out.push(Stmt::Set { var: self.av[i as usize], value });
            }
        }
        for j in 0..groups {
            let value = load_b(self, j);
            out.push(Stmt::Set { var: self.bv[j as usize], value });
        }
        for i in 0..self.s.x0 {
            let a = if self.rows_vec {
                let av = self.avec[(i / 4) as usize];
                let v = self.f().get(av);
                self.f().exprs.push(Expr::Lane(v, (i % 4) as u8))
            } else {
                let av = self.av[i as usize];
                self.f().get(av)
            };
            let a = if self.vec { self.f().splat(a) } else { a };
            for j in 0..groups {
                let acc = self.acc[(i * groups + j) as usize];
                let bv = self.bv[j as usize];
                let b = self.f().get(bv);
                let c = self.f().get(acc);
                let value = self.f().fma(a, b, c);
                out.push(Stmt::Set { var: acc, value });
            }
        }
        out
    }

    /// `for kk in 0..extent step r0 { for u in 0..r0 { step(kk + u) } }`, with
    /// the inner loop unrolled when the schedule unrolls r0, plus a static
    /// remainder for `extent % r0`.
    fn k_loop(&mut self, base: E, extent: u32, step: &mut dyn FnMut(&mut Self, E) -> Vec<Stmt>) -> Vec<Stmt> {
        let r0 = self.s.r0;
        let unroll = self.s.unrolls(UnrollLoop::R0);
        let full = extent / r0;
        let mut out = Vec::new();
        let inner = |this: &mut Self, kk: E, count: u32| -> Vec<Stmt> {
            if count == 1 {
                return step(this, kk);
            }
            let u = this.g.fresh("u", Ty::I32);
            let ue = this.f().get(u);
            let k = this.g.plus(kk, ue);
            let body = step(this, k);
            let (lo, hi) = (this.f().i32(0), this.f().i32(count as i32));
            vec![Stmt::For(For { var: u, lo, hi, step: 1, unroll, body })]
        };
        let mut inner = inner;
        if full == 1 {
            out.extend(inner(self, base, r0));
        } else if full > 1 {
            let kk = self.g.fresh("kk", Ty::I32);
            let kke = self.f().get(kk);
            let at = self.g.plus(base, kke);
            let body = inner(self, at, r0);
            let (lo, hi) = (self.f().i32(0), self.f().i32((full * r0) as i32));
            out.push(Stmt::For(For { var: kk, lo, hi, step: r0, unroll: false, body }));
        }
        let rem = extent % r0;
        if rem > 0 {
            let at = self.g.plus_c(base, full * r0);
            out.extend(inner(self, at, rem));
        }
        out
    }

    /// Without cache_read: every thread reads its operands from global memory.
    fn direct(&mut self, body: &mut Vec<Stmt>) {
        let (m, k, n) = (self.m, self.k, self.n);
        let BSrc::F32(b) = self.b else { unreachable!("matmul_q4 runs this kernel with cache_read only") };
        let a = self.a;
        let lty = self.lty();
        let zero = self.f().i32(0);
        let (w, _) = self.col_groups();
        let step = &mut |this: &mut Self, kk: E| {
            this.fma_step(
                &mut |this, i| {
                    let r = this.row(i);
                    let r = this.g.plus(this.m0, r);
                    let r = this.min_c(r, m - 1);
                    let r = this.f().mul_c(r, k as i64);
                    let idx = this.g.plus(r, kk);
                    let idx = this.g.plus(this.off[0], idx);
                    this.f().load(LoadTy::F32, a, idx)
                },
                &mut |this, j| {
                    let c = this.col(j);
                    let c = this.g.plus(this.n0, c);
                    let c = this.min_c(c, n - w);
                    let r = this.f().mul_c(kk, n as i64);
                    let idx = this.g.plus(r, c);
                    let idx = this.g.plus(this.off[1], idx);
                    this.f().load(lty, b, idx)
                },
            )
        };
        body.extend(self.k_loop(zero, k, step));
    }

    /// K slabs a split-K group computes (all of its slice's without split-K).
    fn group_slabs(&self) -> u32 {
        slice_slabs(self.k, self.s) / self.s.split_k
    }

    /// Whether a slab can reach past K: K is not a whole number of slabs,
    /// or the slices' (and split-K groups') last round has slabs past the end.
    fn k_edge(&self) -> bool {
        let slabs = self.k.div_ceil(self.s.r1);
        !self.k.is_multiple_of(self.s.r1) || slice_slabs(self.k, self.s) * self.s.k_slices != slabs
    }

    /// With cache_read: K slabs of r1 staged in workgroup memory. With
    /// split-K, group g's slabs start at g·r1 and step by split_k·r1.
    fn staged(&mut self, body: &mut Vec<Stmt>) {
        let s = self.s;
        let (x1, y1, r1, sk) = (s.x1, s.y1, s.r1, s.split_k);
        let slabs = self.group_slabs();
        let stride = sk * r1;
        let nbuf = if s.double_buffer && slabs > 1 { 2 } else { 1 };
        let bufs: Vec<(Handle<Buffer>, Handle<Buffer>)> = (0..nbuf)
            .map(|i| {
                let sfx = if nbuf == 1 { String::new() } else { i.to_string() };
                let f = self.f();
                // Rows of one k each: a register tile's reads index the row
                // by the unrolled step, a constant (see `wgsl::rows`).
                let asb = f.buffer(&format!("As{sfx}"), Elem::F32, x1 * r1 * sk, Space::Workgroup, true);
                f.set_row(asb, x1);
                let bsb = f.buffer(&format!("Bs{sfx}"), Elem::F32, r1 * y1 * sk, Space::Workgroup, true);
                f.set_row(bsb, y1);
                (asb, bsb)
            })
            .collect();
        let zero = self.f().i32(0);
        // The group's first K: kg·r1, plus its slice's first slab.
        let group_k = self.kg.map(|kg| self.f().mul_c(kg, r1 as i64));
        let slice_len = (slice_slabs(self.k, s) * r1) as i64;
        let slice_k = self.slice.map(|sl| self.f().mul_c(sl, slice_len));
        let first = match (group_k, slice_k) {
            (Some(a), Some(b)) => Some(self.g.plus(a, b)),
            (a, b) => a.or(b),
        };
        let kbase = first.map(|value| {
            let v = self.g.fresh("kbase", Ty::I32);
            body.push(Stmt::Set { var: v, value });
            self.f().get(v)
        });
        let at = |this: &mut Self, k: E| match kbase {
            Some(b) => this.g.plus(k, b),
            None => k,
        };
        if nbuf == 1 {
            let k0 = self.g.fresh("k0", Ty::I32);
            let k0e = self.f().get(k0);
            let start = at(self, k0e);
            let mut inner = self.load_slab(start, bufs[0]);
            inner.push(Stmt::Barrier);
            inner.extend(self.compute_slab(bufs[0]));
            inner.push(Stmt::Barrier);
            if slabs == 1 {
                body.push(Stmt::Set { var: k0, value: zero });
                body.extend(inner);
            } else {
                let hi = self.f().i32((slabs * stride) as i32);
                body.push(Stmt::For(For { var: k0, lo: zero, hi, step: stride, unroll: false, body: inner }));
            }
            self.reduce(body, bufs[0].1);
            return;
        }
        // Double buffering: slab 2p lives in buffer 0 and slab 2p+1 in buffer 1.
        // The next slab's global loads go into registers before the current
        // slab is computed on, and reach workgroup memory after it, so their
        // latency hides behind the multiply-adds; one barrier per slab.
        let first = at(self, zero);
        body.extend(self.load_slab(first, bufs[0]));
        body.push(Stmt::Barrier);
        let pairs = slabs / 2;
        let p = self.g.fresh("k0", Ty::I32);
        let pe = self.f().get(p);
        let next = self.g.plus_c(pe, stride);
        let next = at(self, next);
        let (fetch1, put1) = self.slab_copy(next, bufs[1], None);
        let mut inner = fetch1;
        inner.extend(self.compute_slab(bufs[0]));
        inner.extend(put1);
        inner.push(Stmt::Barrier);
        let after = self.g.plus_c(pe, 2 * stride);
        let limit = self.f().i32((slabs * stride) as i32);
        // The condition depends only on the loop counter: uniform. When it
        // fails (the last pair of an even slab count) buffer 0 is dead, so
        // its stores (of zeros) need no guard.
        let cond = self.f().bin(BinOp::Lt, after, limit);
        let after = at(self, after);
        let (fetch0, put0) = self.slab_copy(after, bufs[0], Some(cond));
        inner.extend(fetch0);
        inner.extend(self.compute_slab(bufs[1]));
        inner.extend(put0);
        inner.push(Stmt::Barrier);
        let hi = self.f().i32((pairs * 2 * stride) as i32);
        body.push(Stmt::For(For { var: p, lo: zero, hi, step: 2 * stride, unroll: false, body: inner }));
        if slabs % 2 == 1 {
            body.extend(self.compute_slab(bufs[0]));
        }
        self.reduce(body, bufs[0].1);
    }

    /// Split-K: adds groups 1, 2, ... split_k − 1's register tiles into
    /// group 0's, in that order, through workgroup memory (the B tile, dead
    /// now, where it is large enough; else a buffer of its own). Each thread
    /// of a group writes its tile where the same thread of group 0 reads it.
    /// Every barrier is at the top level.
    fn reduce(&mut self, body: &mut Vec<Stmt>, b_tile: Handle<Buffer>) {
        let Some(kg) = self.kg else { return };
        let s = self.s;
        let red = if reduce_in_b_tile(s) {
            b_tile
        } else {
            let red = self.f().buffer("red", Elem::F32, s.x1 * s.y1, Space::Workgroup, true);
            self.f().set_row(red, s.y1);
            red
        };
        let (_, groups) = self.col_groups();
        let lty = self.lty();
        // Where accumulator (i, j) goes: its place in the x1 × y1 tile.
        let mut slots = Vec::new();
        for i in 0..s.x0 {
            for j in 0..groups {
                let r = self.row(i);
                let r = self.f().mul_c(r, s.y1 as i64);
                let c = self.col(j);
                slots.push((self.acc[(i * groups + j) as usize], self.g.plus(r, c)));
            }
        }
        let one = self.f().i32(1);
        let is_0 = self.f().bin(BinOp::Lt, kg, one);
        body.push(Stmt::Barrier);
        for g in 1..s.split_k {
            let (lo, hi) = (self.f().i32(g as i32 - 1), self.f().i32(g as i32 + 1));
            let above = self.f().bin(BinOp::Lt, lo, kg);
            let below = self.f().bin(BinOp::Lt, kg, hi);
            let is_g = self.f().bin(BinOp::And, above, below);
            let writes = slots
                .iter()
                .map(|&(acc, idx)| {
                    let value = self.f().get(acc);
                    Stmt::Store { buf: red, index: idx, value }
                })
                .collect();
            body.push(Stmt::If { cond: is_g, body: writes });
            body.push(Stmt::Barrier);
            let adds = slots
                .iter()
                .map(|&(acc, idx)| {
                    let part = self.f().load(lty, red, idx);
                    let mine = self.f().get(acc);
                    let value = self.f().add(mine, part);
                    Stmt::Set { var: acc, value }
                })
                .collect();
            body.push(Stmt::If { cond: is_0, body: adds });
            body.push(Stmt::Barrier);
        }
    }

    /// Cooperative copy of one K slab starting at `k0` into workgroup memory:
    /// A transposed (`As[k][row]`), B as is (`Bs[k][col]`). Rows and columns
    /// past the edge are clamped; K past the edge is zero-filled.
    fn load_slab(&mut self, k0: E, bufs: (Handle<Buffer>, Handle<Buffer>)) -> Vec<Stmt> {
        let (mut fetch, put) = self.slab_copy(k0, bufs, None);
        fetch.extend(put);
        fetch
    }

    /// [`Self::load_slab`] in two halves: `fetch` reads this thread's
    /// elements of the slab into registers, `put` writes them to workgroup
    /// memory. With `guard`, `fetch` reads only where it holds (and leaves
    /// zeros otherwise).
    fn slab_copy(&mut self, k0: E, (asb, bsb): (Handle<Buffer>, Handle<Buffer>), guard: Option<E>) -> (Vec<Stmt>, Vec<Stmt>) {
        let s = self.s;
        let (m, k, n) = (self.m, self.k, self.n);
        let (x1, y1, r1) = (s.x1, s.y1, s.r1);
        let threads = self.tx * self.ty;
        let k_edge = self.k_edge();
        let (mut fetch, mut put) = (Vec::new(), Vec::new());
        // A: x1 × r1 elements, consecutive threads read consecutive k of a
        // row. When the transposed tile is an array of vec4 (rows_vec), a
        // thread copies 4 consecutive rows at one k, so each vec4 of it is
        // written by one thread only: WGSL lets a write of one vector
        // component read and write the whole vector, and component writes
        // from different threads then race (seen on the H100: 3% wrong).
        let group = if self.rows_vec { 4 } else { 1 };
        let count = x1 / group * r1;
        let (a, lid) = (self.a, self.lid);
        for e in 0..count.div_ceil(threads) {
            let idx = self.f().add_c(lid, (e * threads) as i64);
            let r1c = self.f().i32(r1 as i32);
            let ag = self.f().bin(BinOp::Div, idx, r1c);
            let ak = self.f().bin(BinOp::Rem, idx, r1c);
            let gk = self.g.plus(k0, ak);
            let within = self.within(idx, count, threads, e);
            for i in 0..group {
                let ar = self.f().mul_c(ag, group as i64);
                let ar = self.f().add_c(ar, i as i64);
                let gr = self.g.plus(self.m0, ar);
                let gr = self.min_c(gr, m - 1);
                let row = self.f().mul_c(gr, k as i64);
                let src = self.g.plus(row, gk);
                let src = self.g.plus(self.off[0], src);
                let dst = self.f().mul_c(ak, x1 as i64);
                let dst = self.g.plus(dst, ar);
                let dst = self.g.plus(dst, self.tile_off[0]);
                self.copy_elem(LoadTy::F32, (a, src), (asb, dst), [k_edge.then_some(gk), guard, within], (&mut fetch, &mut put));
            }
        }
        let b = match self.b {
            BSrc::F32(b) => b,
            BSrc::Q4 { fmt, wt } => {
                self.q4_slab_copy(k0, (fmt, wt), bsb, guard, (&mut fetch, &mut put));
                return (fetch, put);
            }
        };
        // B: r1 × y1 elements (or r1 × y1/4 vec4s), consecutive threads read
        // consecutive columns of a row.
        let (w, _) = self.col_groups();
        let per_row = y1 / w;
        let count = r1 * per_row;
        let lty = self.lty();
        for e in 0..count.div_ceil(threads) {
            let idx = self.f().add_c(lid, (e * threads) as i64);
            let prc = self.f().i32(per_row as i32);
            let bk = self.f().bin(BinOp::Div, idx, prc);
            let bn = self.f().bin(BinOp::Rem, idx, prc);
            let bn = self.f().mul_c(bn, w as i64);
            let gk = self.g.plus(k0, bk);
            let gn = self.g.plus(self.n0, bn);
            let gn = self.min_c(gn, n - w);
            let row = self.f().mul_c(gk, n as i64);
            let src = self.g.plus(row, gn);
            let src = self.g.plus(self.off[1], src);
            let dst = self.f().mul_c(bk, y1 as i64);
            let dst = self.g.plus(dst, bn);
            let dst = self.g.plus(dst, self.tile_off[1]);
            let within = self.within(idx, count, threads, e);
            self.copy_elem(lty, (b, src), (bsb, dst), [k_edge.then_some(gk), guard, within], (&mut fetch, &mut put));
        }
        (fetch, put)
    }

    /// The B part of a slab copy for the block-quantised ops: r1/vpw words
    /// × y1 columns (vpw = 8 nibbles or 4 bytes per word). A
    /// thread's unit is one word of `w` neighbouring columns (4 with vec4,
    /// else 1) and their scales, fetched into registers; `put` unpacks them
    /// into the vpw rows of K they hold and stores each row's `w` values as one
    /// whole `vec4` (or scalar), so no two threads write parts of one vector.
    /// K past the edge (a whole word: K and r1 are multiples of vpw) reads
    /// nothing and stores zeros (its word and scale stay 0; Q4_1's minimum
    /// too, and a Q8_0 word of zeros is zero).
    fn q4_slab_copy(
        &mut self,
        k0: E,
        (fmt, wt): (Format, Weights),
        bsb: Handle<Buffer>,
        guard: Option<E>,
        (fetch, put): (&mut Vec<Stmt>, &mut Vec<Stmt>),
    ) {
        let (k, n) = (self.k, self.n);
        let (y1, r1) = (self.s.y1, self.s.r1);
        let threads = self.tx * self.ty;
        let vpw = fmt.per_word();
        let (wbuf, sbuf) = (wt.w, wt.scale);
        let (kw, kb) = ((k / vpw) as i64, (k / 32) as i64);
        let (w, _) = self.col_groups();
        let per_row = y1 / w;
        // Words (of w columns) in the slab, and the parts each is unpacked
        // in (8 / parts values of K each). Where a thread's multiply-adds
        // per slab are few (under SPREAD_BELOW), as many parts as the
        // threads allow, so that the unpacking is spread over the workgroup
        // rather than left to a few threads while the rest wait at the
        // barrier; else one thread per word, since every part loads the
        // word again. On the H200 (BENCHMARKS.md, 2026-11-27) spreading took
        // 4×8 tiles at 64×4096×4096 from 13.9 to 15.4 TFLOP/s and cost 8×8
        // tiles up to 21% (29.8 to 23.6 at 512×4096×4096).
        const SPREAD_BELOW: u32 = 512;
        let words = r1 / vpw * per_row;
        let spread = self.s.x0 * self.s.y0 * r1 < SPREAD_BELOW;
        let parts = if spread { [8, 4, 2].into_iter().filter(|&p| p <= vpw).find(|&p| words * p <= threads).unwrap_or(1) } else { 1 };
        let nb = vpw / parts;
        let count = words * parts;
        let lid = self.lid;
        for e in 0..count.div_ceil(threads) {
            let idx = self.f().add_c(lid, (e * threads) as i64);
            let (unit, part) = if parts == 1 {
                (idx, None)
            } else {
                let wc = self.f().i32(words as i32);
                (self.f().bin(BinOp::Rem, idx, wc), Some(self.f().bin(BinOp::Div, idx, wc)))
            };
            let prc = self.f().i32(per_row as i32);
            let bw = self.f().bin(BinOp::Div, unit, prc);
            let bn = self.f().bin(BinOp::Rem, unit, prc);
            let bn = self.f().mul_c(bn, w as i64);
            let bk = self.f().mul_c(bw, vpw as i64);
            let gk = self.g.plus(k0, bk);
            let gn = self.g.plus(self.n0, bn);
            let gn = self.min_c(gn, n - w);
            let within = self.within(idx, count, threads, e);
            let cond = self.fetch_cond([self.k_edge().then_some(gk), guard, within]);
            // gk is a non-negative multiple of vpw: its word and scale block by shifts.
            let (wsh, five) = (self.f().i32(vpw.trailing_zeros() as i32), self.f().i32(5));
            let word = self.f().bin(BinOp::Shr, gk, wsh);
            let block = self.f().bin(BinOp::Shr, gk, five);
            let mut loads = Vec::new();
            let mut regs = Vec::new();
            for c in 0..w {
                let col = self.f().add_c(gn, c as i64);
                let wrow = self.f().mul_c(col, kw);
                let wi = self.g.plus(wrow, word);
                let srow = self.f().mul_c(col, kb);
                let si = self.g.plus(srow, block);
                let (wtv, st) = (self.g.fresh("tw", Ty::I32), self.g.fresh("ts", Ty::F32));
                let mt = wt.min.map(|_| self.g.fresh("tm", Ty::F32));
                let (wv, sv) = (self.f().load(LoadTy::U32, wbuf, wi), self.f().load(LoadTy::F32, sbuf, si));
                if cond.is_some() {
                    let (zi, zf) = (self.f().i32(0), self.f().f32(0.0));
                    fetch.push(Stmt::Set { var: wtv, value: zi });
                    fetch.push(Stmt::Set { var: st, value: zf });
                    if let Some(mt) = mt {
                        fetch.push(Stmt::Set { var: mt, value: zf });
                    }
                }
                loads.push(Stmt::Set { var: wtv, value: wv });
                loads.push(Stmt::Set { var: st, value: sv });
                if let (Some(mt), Some(mb)) = (mt, wt.min) {
                    let value = self.f().load(LoadTy::F32, mb, si);
                    loads.push(Stmt::Set { var: mt, value });
                }
                regs.push((wtv, st, mt));
            }
            match cond {
                Some(cond) => fetch.push(Stmt::If { cond, body: loads }),
                None => fetch.extend(loads),
            }
            let mut stores = Vec::new();
            // This thread's first value of K in the word: part · nb.
            let first = part.map(|p| {
                let v = self.g.fresh("j0", Ty::I32);
                let value = self.f().mul_c(p, nb as i64);
                stores.push(Stmt::Set { var: v, value });
                self.f().get(v)
            });
            let half = self.s.f16_acc;
            let nibble = Nibble::for_format(self.f(), fmt, half);
            // Q8_0: each word's bytes made unsigned once (q + 128).
            // Per column: its word, scale and Q4_1 minimum.
            type Regs = Vec<(Handle<Var>, Handle<Var>, Option<Handle<Var>>)>;
            let regs: Regs = if fmt == Format::Q8_0 {
                regs.into_iter()
                    .map(|(wtv, st, mt)| {
                        let ub = self.g.fresh("ub", Ty::I32);
                        let word = self.f().get(wtv);
                        let value = flip_bytes(self.f(), word);
                        stores.push(Stmt::Set { var: ub, value });
                        (ub, st, mt)
                    })
                    .collect()
            } else {
                regs
            };
            let bits = 32 / vpw;
            for jj in 0..nb {
                // Value j of the word, jj or first + jj, and its shift
                // bits·j (none for a constant j = 0).
                let (j, shift) = match first {
                    Some(f0) => {
                        let j = self.f().add_c(f0, jj as i64);
                        (j, Some(self.f().mul_c(j, bits as i64)))
                    }
                    None => (self.f().i32(jj as i32), (jj > 0).then(|| self.f().i32((bits * jj) as i32))),
                };
                let vals: Vec<E> = regs
                    .iter()
                    .map(|&(wtv, st, mt)| {
                        let word = self.f().get(wtv);
                        let scale = self.f().get(st);
                        let min = mt.map(|m| self.f().get(m));
                        nibble.value_with_min(self.f(), word, shift, scale, min)
                    })
                    .collect();
                let value = if w == 4 { self.f().exprs.push(Expr::Compose([vals[0], vals[1], vals[2], vals[3]])) } else { vals[0] };
                let row = self.g.plus(bk, j);
                let dst = self.f().mul_c(row, y1 as i64);
                let dst = self.g.plus(dst, bn);
                let dst = self.g.plus(dst, self.tile_off[1]);
                stores.push(Stmt::Store { buf: bsb, index: dst, value });
            }
            match within {
                Some(cond) => put.push(Stmt::If { cond, body: stores }),
                None => put.extend(stores),
            }
        }
    }

    /// When a slab copy's element may be read: `gk < K` (for a global k
    /// `gk`, given where a slab can reach past K), the caller's guard, and
    /// `within`, all of those present; `None` when always.
    fn fetch_cond(&mut self, [gk, guard, within]: [Option<E>; 3]) -> Option<E> {
        let k = self.k as i32;
        let in_k = gk.map(|gk| {
            let kc = self.f().i32(k);
            self.f().bin(BinOp::Lt, gk, kc)
        });
        let conds: Vec<E> = [in_k, guard, within].into_iter().flatten().collect();
        let (&first, rest) = conds.split_first()?;
        Some(rest.iter().fold(first, |acc, &c| self.f().bin(BinOp::And, acc, c)))
    }

    /// `idx < count` when it may fail for copy round `e`.
    fn within(&mut self, idx: E, count: u32, threads: u32, e: u32) -> Option<E> {
        if (e + 1) * threads <= count {
            return None;
        }
        let c = self.f().i32(count as i32);
        Some(self.f().bin(BinOp::Lt, idx, c))
    }

    /// One element of a slab copy, `dst[di] = src[si]` through a fresh
    /// register: its load goes to `fetch`, its store to `put`. The conditions
    /// are `gk` (a global k, which must be below K, else the element is
    /// zero), the caller's guard (else zero), and `within` (else the element
    /// is neither read nor written).
    fn copy_elem(
        &mut self,
        ty: LoadTy,
        (src, si): (Handle<Buffer>, E),
        (dst, di): (Handle<Buffer>, E),
        [gk, guard, within]: [Option<E>; 3],
        (fetch, put): (&mut Vec<Stmt>, &mut Vec<Stmt>),
    ) {
        let vty = ty.value_ty();
        let t = self.g.fresh("t", vty);
        let value = self.f().load(ty, src, si);
        match self.fetch_cond([gk, guard, within]) {
            None => fetch.push(Stmt::Set { var: t, value }),
            Some(cond) => {
                let z = self.f().f32(0.0);
                let zero = if vty == Ty::F32x4 { self.f().splat(z) } else { z };
                fetch.push(Stmt::Set { var: t, value: zero });
                fetch.push(Stmt::If { cond, body: vec![Stmt::Set { var: t, value }] });
            }
        }
        let tv = self.f().get(t);
        let st = Stmt::Store { buf: dst, index: di, value: tv };
        put.push(match within {
            Some(cond) => Stmt::If { cond, body: vec![st] },
            None => st,
        });
    }

    fn compute_slab(&mut self, (asb, bsb): (Handle<Buffer>, Handle<Buffer>)) -> Vec<Stmt> {
        let (x1, y1, r1) = (self.s.x1, self.s.y1, self.s.r1);
        let lty = self.lty();
        let zero = self.f().i32(0);
        let step = &mut |this: &mut Self, kk: E| {
            this.fma_step(
                &mut |this, i| {
                    // With rows_vec, `i` is a row group and row(4·i) its first row.
                    let r = if this.rows_vec { this.row(4 * i) } else { this.row(i) };
                    let base = this.f().mul_c(kk, x1 as i64);
                    let base = this.g.plus(base, this.tile_off[0]);
                    let idx = this.g.plus(base, r);
                    let ty = if this.rows_vec { LoadTy::F32x4 } else { LoadTy::F32 };
                    this.f().load(ty, asb, idx)
                },
                &mut |this, j| {
                    let c = this.col(j);
                    let base = this.f().mul_c(kk, y1 as i64);
                    let base = this.g.plus(base, this.tile_off[1]);
                    let idx = this.g.plus(base, c);
                    this.f().load(lty, bsb, idx)
                },
            )
        };
        self.k_loop(zero, r1, step)
    }

    /// Writes the accumulators, skipping rows and columns past the edge.
    fn store(&mut self, body: &mut Vec<Stmt>) {
        let (m, n) = (self.m, self.n);
        let (_, groups) = self.col_groups();
        let row_edge = m % self.s.x1 != 0;
        let col_edge = n % self.s.y1 != 0;
        let c = self.c;
        for i in 0..self.s.x0 {
            let r = self.row(i);
            let gr = self.g.plus(self.m0, r);
            let mut row_stmts = Vec::new();
            for j in 0..groups {
                let col = self.col(j);
                let gc = self.g.plus(self.n0, col);
                let rowoff = self.f().mul_c(gr, n as i64);
                let idx = self.g.plus(rowoff, gc);
                let idx = self.g.plus(self.off[2], idx);
                let accv = self.acc[(i * groups + j) as usize];
                let value = self.f().get(accv);
                // The epilogue's loads sit inside the edge guards, with the store.
                let (mut st, value) = if self.epi.is_none() {
                    (Vec::new(), value)
                } else {
                    let lty = self.lty();
                    self.epi.apply(&mut self.g, value, lty, gc, idx)
                };
                st.push(Stmt::Store { buf: c, index: idx, value });
                if col_edge {
                    // gc is a multiple of w and so is n: a whole group is in or out.
                    let nc = self.f().i32(n as i32);
                    let cond = self.f().bin(BinOp::Lt, gc, nc);
                    row_stmts.push(Stmt::If { cond, body: st });
                } else {
                    row_stmts.extend(st);
                }
            }
            if row_edge {
                let mc = self.f().i32(m as i32);
                let cond = self.f().bin(BinOp::Lt, gr, mc);
                body.push(Stmt::If { cond, body: row_stmts });
            } else {
                body.extend(row_stmts);
            }
        }
    }
}
