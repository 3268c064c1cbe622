//! `matmul_q4` for the GPU (WGSL): the matrix-vector family used for decode
//! (M = 1), which also computes any M exactly. The same kernel computes the
//! GGUF formats `matmul_q4_1` and `matmul_q8_0` ([`Format`]): a Q4_1 nibble
//! is unsigned (2^23 alone is taken away) and each unit adds its block's
//! minimum times the unit's sum of A (`acc += D·Σ q·a + Mn·Σ a`, the sum of
//! A once per row and unit); a Q8_0 word holds four signed bytes, made
//! unsigned (`q + 128`, `flip_bytes`) and unpacked two per 16-bit half
//! like the nibbles (positions `p` of 8 bits, factor 256^p), so a unit of
//! four words is half a scale block.
//!
//! ```text
//! workgroup (group_id.x, group_id.y) = (y1 outputs, x0 rows)
//! threads   T = (y1 / y0) · split_k; thread t serves the y0 outputs from
//!           o = (t / split_k) · y0 and reads the units s, s + split_k, ...
//!           (s = t % split_k) of each of their rows of W, so neighbouring
//!           threads read neighbouring words. A unit is one packed word
//!           (vectorize 1) or four, one whole scale block (vectorize 4: one
//!           vec4<u32> load and one scale load per 32 weights)
//! per word  lo = w, hi = w >> 16; nibble j sits at bits 4p .. 4p+4 of lo
//!           (j < 4) or hi (j ≥ 4), p = j mod 4, and
//!           g_j = bitcast<f32>((src | M) & ((15 << 4p) | M)) − (2^23 + 8·16^p)
//!           = (nibble − 8)·16^p exactly (M = 0x4B000000, the bits of 2^23;
//!           no conversion instruction, one shift and two ors per word, one
//!           and per nibble); part_p += g_j · A[row, 8w + j]
//! per unit  acc_row += S · (part_0 + part_1/16 + part_2/256 + part_3/4096)
//!           (r0/(8·vectorize) units per loop iteration, unrolled)
//! double    with double_buffer, the next iteration's words and scales are
//!           loaded into a second set of registers before this iteration's
//!           arithmetic (the loop runs over all but the last whole
//!           iteration, which follows it on its own), so that a thread
//!           computes while its next loads are in flight
//! reduce    split_k partial sums per output: with subgroup_reduce an
//!           xor-shuffle butterfly inside the subgroup (split_k a power of
//!           two, at most the adapter's smallest subgroup); otherwise in
//!           workgroup memory, a tree when split_k is a power of two, else
//!           one thread adds them in order
//! ```
//!
//! A's values of a unit are loaded once per thread and used for all of its
//! y0 outputs (the reads of A from cache are 8× the bytes of the packed
//! weights they meet, so a thread with one output reads far more of A than
//! of W), and each word is unpacked once for all x0 rows of A.
//!
//! Outputs past N and rows past M store nothing (with `y0 = 1` they compute
//! nothing; with `y0 > 1` they read W's last row instead, so that a thread's
//! other outputs are computed); every barrier and every shuffle is at the
//! top level of the kernel.
//!
//! The epilogues (docs/ops.md: `glu(norm(A)·Wᵀ) + R`), none of which
//! changes a kernel without them:
//!
//! ```text
//! rms_norm  a prologue per row of the workgroup: the threads sum A's
//!           squares four floats at a time into workgroup memory, and after
//!           one barrier every thread adds those sums (in one order) and
//!           takes r = 1/√(Σ/K + E[0]); each vec4 of A is then loaded as
//!           (A·r)·G (the fixed rms_norm's order)
//! swiglu    a thread's outputs are twice y0 rows of W: n.. (gate) and
//!           N + n.. (up), reduced alike; the store keeps silu(g)·u
//! residual  the store adds R[m, n]
//! ```

use super::Gen;
use crate::ir::{BinOp, Buffer, Builtin, Elem, Expr, For, Func, Handle, LoadTy, Space, Stmt, Ty, UnOp};
use crate::op::{Op, OpKind};
pub use crate::schedule::sizes::unpack_launch;
use crate::schedule::sizes::{UNPACK_BLOCK_THREADS, UNPACK_COLUMN_THREADS, dequant_elem, unpack_width};
use crate::schedule::{Schedule, UnrollLoop};

type E = Handle<Expr>;
type Var = Handle<crate::ir::Var>;

/// `+merge`'s buffers: the parts `p`, their largest scores `pm` and sums
/// `pl` (arguments), the merged rows `am` and the parts' weights `mw`
/// (workgroup memory).
struct MergeBufs {
    p: Handle<Buffer>,
    pm: Handle<Buffer>,
    pl: Handle<Buffer>,
    am: Handle<Buffer>,
    mw: Handle<Buffer>,
}

/// `+merge`'s prologue: the workgroup's `rows` rows of A (from row `m0`,
/// clamped to M − 1) merged into `am`, every thread taking part.
/// 1. Thread t < rows·H takes one (row, head): its parts' largest score
///    `top` (C loads of PM issued together: the loop over the parts is
///    unrolled), then `den = Σ_c e^(PM_c − top)·PL_c`, then each part's
///    weight `e^(PM_c − top)/den` into `mw`. One barrier.
/// 2. Each thread takes vec4s of the rows, `rows·K/4` in all: the sum over
///    the parts of weight·P (C vec4 loads, unrolled) into `am`. One barrier.
#[allow(clippy::too_many_arguments)]
fn merge_prologue(
    g: &mut Gen,
    body: &mut Vec<Stmt>,
    b: MergeBufs,
    (m, k, h, c): (u32, u32, u32, u32),
    rows: u32,
    m0: E,
    threads: u32,
    lid: E,
) {
    let d = k / h;
    // The global row of the workgroup's row `i` (an expression of i).
    let global_row = |g: &mut Gen, i: E| {
        let r = g.plus(m0, i);
        let last = g.f.i32(m as i32 - 1);
        g.f.bin(BinOp::Min, r, last)
    };
    // 1. The parts' weights, one (row, head) a thread.
    spread(g, body, "mt", rows * h, threads, lid, |g, t| {
        let hc = g.f.i32(h as i32);
        let i = g.f.bin(BinOp::Div, t, hc);
        let hh = g.f.bin(BinOp::Rem, t, hc);
        let gr = global_row(g, i);
        let grh = g.f.mul_c(gr, h as i64);
        let head = g.plus(grh, hh);
        let first = g.f.mul_c(head, c as i64);
        let fv = g.fresh("mp", Ty::I32);
        let mut work = vec![Stmt::Set { var: fv, value: first }];
        let first = g.f.get(fv);
        let ms: Vec<E> = (0..c)
            .map(|cc| {
                let at = g.plus_c(first, cc);
                let v = g.f.load(LoadTy::F32, b.pm, at);
                let var = g.fresh(&format!("pm{cc}"), Ty::F32);
                work.push(Stmt::Set { var, value: v });
                g.f.get(var)
            })
            .collect();
        let mut top = ms[0];
        for &x in &ms[1..] {
            top = g.f.bin(BinOp::Max, top, x);
        }
        let topv = g.fresh("mtop", Ty::F32);
        work.push(Stmt::Set { var: topv, value: top });
        let top = g.f.get(topv);
        let ws: Vec<E> = ms
            .iter()
            .enumerate()
            .map(|(cc, &x)| {
                let diff = g.f.bin(BinOp::Sub, x, top);
                let e = g.f.un(UnOp::Exp, diff);
                let var = g.fresh(&format!("pw{cc}"), Ty::F32);
                work.push(Stmt::Set { var, value: e });
                g.f.get(var)
            })
            .collect();
        let mut den = g.f.f32(0.0);
        for (cc, &wc) in ws.iter().enumerate() {
            let at = g.plus_c(first, cc as u32);
            let l = g.f.load(LoadTy::F32, b.pl, at);
            den = g.f.fma(wc, l, den);
        }
        let inv = g.f.un(UnOp::Recip, den);
        let invv = g.fresh("mden", Ty::F32);
        work.push(Stmt::Set { var: invv, value: inv });
        let inv = g.f.get(invv);
        let local = g.f.mul_c(t, c as i64);
        for (cc, &wc) in ws.iter().enumerate() {
            let value = g.f.mul(wc, inv);
            let at = g.plus_c(local, cc as u32);
            work.push(Stmt::Store { buf: b.mw, index: at, value });
        }
        work
    });
    // 2. The merged vec4s: q = (row i, head hh, vec4 d4 of the head).
    spread(g, body, "mq", rows * k / 4, threads, lid, |g, q| {
        let k4 = g.f.i32((k / 4) as i32);
        let i = g.f.bin(BinOp::Div, q, k4);
        let within = g.f.bin(BinOp::Rem, q, k4);
        let d4c = g.f.i32((d / 4) as i32);
        let hh = g.f.bin(BinOp::Div, within, d4c);
        let d4 = g.f.bin(BinOp::Rem, within, d4c);
        let gr = global_row(g, i);
        let grh = g.f.mul_c(gr, h as i64);
        let head = g.plus(grh, hh);
        let part0 = g.f.mul_c(head, c as i64);
        let p0 = g.f.mul_c(part0, d as i64);
        let d4x = g.f.mul_c(d4, 4);
        let p0 = g.plus(p0, d4x);
        let pv = g.fresh("mpo", Ty::I32);
        let mut work = vec![Stmt::Set { var: pv, value: p0 }];
        let p0 = g.f.get(pv);
        // The weights of the row's head: mw[(i·H + hh)·C + cc].
        let ih = g.f.mul_c(i, h as i64);
        let lh = g.plus(ih, hh);
        let w0 = g.f.mul_c(lh, c as i64);
        let wv = g.fresh("mwo", Ty::I32);
        work.push(Stmt::Set { var: wv, value: w0 });
        let w0 = g.f.get(wv);
        let loads: Vec<E> = (0..c)
            .map(|cc| {
                let at = g.plus_c(p0, cc * d);
                let v = g.f.load(LoadTy::F32x4, b.p, at);
                let var = g.fresh(&format!("po{cc}"), Ty::F32x4);
                work.push(Stmt::Set { var, value: v });
                g.f.get(var)
            })
            .collect();
        let zero = g.f.f32(0.0);
        let mut acc = g.f.splat(zero);
        for (cc, &x) in loads.iter().enumerate() {
            let at = g.plus_c(w0, cc as u32);
            let wgt = g.f.load(LoadTy::F32, b.mw, at);
            let ws = g.f.splat(wgt);
            acc = g.f.fma(ws, x, acc);
        }
        let iq = g.f.mul_c(q, 4);
        work.push(Stmt::Store { buf: b.am, index: iq, value: acc });
        work
    });
}

/// `work(g, x)` for every `x < count`, the workgroup's `threads` threads
/// taking x = lid, lid + threads, ... (a loop of ⌈count/threads⌉ steps on
/// `name`, the work guarded where threads do not divide count), then a
/// barrier.
fn spread(g: &mut Gen, body: &mut Vec<Stmt>, name: &str, count: u32, threads: u32, lid: E, work: impl FnOnce(&mut Gen, E) -> Vec<Stmt>) {
    let v = g.fresh(name, Ty::I32);
    let ve = g.f.get(v);
    let step = g.f.mul_c(ve, threads as i64);
    let x = g.plus(step, lid);
    let xv = g.fresh(&format!("{name}i"), Ty::I32);
    let mut inner = vec![Stmt::Set { var: xv, value: x }];
    let x = g.f.get(xv);
    let mut w = work(g, x);
    if !count.is_multiple_of(threads) {
        let c = g.f.i32(count as i32);
        let cond = g.f.bin(BinOp::Lt, x, c);
        w = vec![Stmt::If { cond, body: w }];
    }
    inner.extend(w);
    let (lo, hi) = (g.f.i32(0), g.f.i32(count.div_ceil(threads) as i32));
    body.push(Stmt::For(For { var: v, lo, hi, step: 1, unroll: false, body: inner }));
    body.push(Stmt::Barrier);
}

/// The bits of 2^23 (0x4B000000): or-ed over a value below 2^23 they make
/// the float 2^23 + value.
pub(super) const MAGIC: i32 = 0x4B00_0000;

/// The block format of a weight-only quantised matmul, as the GPU
/// generators read it (see `Op::args` for the layouts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)] // the GGUF names
pub enum Format {
    /// `matmul_q4`: nibbles, `(q − 8)·S`.
    Q4_0,
    /// `matmul_q4_1`: nibbles, `D·q + Mn`.
    Q4_1,
    /// `matmul_q8_0`: signed bytes, `D·q`.
    Q8_0,
}

impl Format {
    pub fn of(op: &Op) -> Format {
        match op.kind() {
            OpKind::MatmulQ4_1 => Format::Q4_1,
            OpKind::MatmulQ8_0 => Format::Q8_0,
            _ => Format::Q4_0,
        }
    }
    /// Values of K per packed word: 8 nibbles or 4 bytes.
    pub fn per_word(self) -> u32 {
        if self == Format::Q8_0 { 4 } else { 8 }
    }
    /// Value positions per 16-bit half of a word: 4 nibbles or 2 bytes.
    fn positions(self) -> usize {
        if self == Format::Q8_0 { 2 } else { 4 }
    }
    /// Bits per value.
    fn bits(self) -> u32 {
        32 / self.per_word()
    }
}

/// A quantised op's weight arguments: the packed words `W`, the block
/// scales (`S` or `D`) and Q4_1's minimums `Mn`, in ABI order after A.
#[derive(Clone, Copy)]
pub(super) struct Weights {
    pub w: Handle<Buffer>,
    pub scale: Handle<Buffer>,
    pub min: Option<Handle<Buffer>>,
}

impl Weights {
    pub(super) fn declare(f: &mut Func, op: &Op) -> Weights {
        let (_, _, k, n) = op.bmkn();
        // Twice N rows under +swiglu (gate, then up).
        let n = n * op.weight_rows_per_output();
        let fmt = Format::of(op);
        let fe = super::float_elem(op);
        let w = f.buffer("W", Elem::U32, n * (k / fmt.per_word()), Space::Param(1), false);
        let scale = f.buffer(if fmt == Format::Q4_0 { "S" } else { "D" }, fe, n * (k / 32), Space::Param(2), false);
        let min = (fmt == Format::Q4_1).then(|| f.buffer("Mn", fe, n * (k / 32), Space::Param(3), false));
        Weights { w, scale, min }
    }
}

/// `w ^ 0x80808080` (the IR has no xor): each signed byte `q` of the word
/// becomes the unsigned `q + 128`. The top bits flip by a subtraction that
/// borrows nowhere (`0x80808080 − (w & 0x80808080)`), the rest are kept.
pub(super) fn flip_bytes(f: &mut Func, w: E) -> E {
    let top = f.i32(0x8080_8080u32 as i32);
    let low = f.i32(0x7F7F_7F7F);
    let t = f.bin(BinOp::And, w, top);
    let top2 = f.i32(0x8080_8080u32 as i32);
    let flipped = f.sub(top2, t);
    let rest = f.bin(BinOp::And, w, low);
    f.bin(BinOp::Or, rest, flipped)
}

/// The constants of one weight's value, `(nibble − 8) · scale`, as the
/// tiled kernels compute it (the matmul's staged B tile and the `unpack`
/// pass): made once per function, used for every nibble.
pub(super) struct Nibble {
    fifteen: Handle<Expr>,
    magic: Handle<Expr>,
    bias: Handle<Expr>,
    half: bool,
}

impl Nibble {
    /// Under f16 arithmetic (`half`) floats are f16, where 2^23 does not
    /// exist: the nibble is converted (exact, 0–15) and 8 subtracted.
    /// Otherwise its bits are or-ed into the mantissa of 2^23, and
    /// 2^23 + nibble − (2^23 + 8) = nibble − 8, exactly, without a
    /// conversion instruction.
    pub(super) fn new(f: &mut Func, half: bool) -> Nibble {
        Nibble::for_format(f, Format::Q4_0, half)
    }

    /// The same for any block format: a Q4_1 nibble is unsigned (nothing
    /// subtracted but 2^23), a Q8_0 byte arrives made unsigned by
    /// [`flip_bytes`] (`q + 128`: 128 subtracted).
    pub(super) fn for_format(f: &mut Func, fmt: Format, half: bool) -> Nibble {
        let (fifteen, magic) = (f.i32((1 << fmt.bits()) - 1), f.i32(MAGIC));
        let offset = match fmt {
            Format::Q4_0 => 8.0,
            Format::Q4_1 => 0.0,
            Format::Q8_0 => 128.0,
        };
        let bias = f.f32(if half { offset } else { 8_388_608.0 + offset });
        Nibble { fifteen, magic, bias, half }
    }

    /// The weight of the value of `word` at bit `shift` (bit 0 for `None`)
    /// with `scale` and Q4_1's `min`: `q · scale (+ min)`.
    pub(super) fn value_with_min(&self, f: &mut Func, word: E, shift: Option<E>, scale: E, min: Option<E>) -> E {
        match min {
            None => self.value(f, word, shift, scale),
            Some(min) => {
                let q = self.raw(f, word, shift);
                f.fma(q, scale, min)
            }
        }
    }

    /// The weight of the nibble of `word` at bit `shift` (bits 0..4 for
    /// `None`) with `scale`: `(nibble − 8) · scale`.
    pub(super) fn value(&self, f: &mut Func, word: E, shift: Option<E>, scale: E) -> E {
        let q = self.raw(f, word, shift);
        f.mul(q, scale)
    }

    /// The value itself, unscaled: `nibble − 8` for Q4_0.
    fn raw(&self, f: &mut Func, word: E, shift: Option<E>) -> E {
        let nib = match shift {
            Some(sh) => f.bin(BinOp::Shr, word, sh),
            None => word,
        };
        let nib = f.bin(BinOp::And, nib, self.fifteen);
        let fl = if self.half {
            f.exprs.push(Expr::ToF32(nib))
        } else {
            let bits = f.bin(BinOp::Or, nib, self.magic);
            f.exprs.push(Expr::FromBits(bits))
        };
        f.sub(fl, self.bias)
    }
}

/// The first pass of a tiled matmul_q4 with `dequant_pass`: the packed
/// weights `W` (`u32[N, K/8]`) and scales `S` unpacked into the scratch
/// buffer `B` as the dense `K × N` matrix the plain matmul reads.
///
/// ```text
/// thread t of workgroup (gx, gy): columns n = 4·(64·gx + t mod 64) + 0..4
///           (one column where N is not a multiple of 4) and scale block
///           blk = 4·gy + t / 64: one vec4<u32> load of 4 words (32 values
///           of K) and one scale per column, then 32 stores, one per row of
///           K, each the 4 columns' values as one vec4; neighbouring threads
///           write neighbouring columns of a row
/// ```
pub fn generate_unpack(op: &Op, s: &Schedule) -> (Func, [u32; 3], [u32; 3]) {
    let (_, _, k, n) = op.bmkn();
    let (kw, kb) = (k / 8, k / 32);
    let (workgroup, dispatch) = unpack_launch(op);
    let width = unpack_width(n);
    let mut f = Func::new(format!("{}_unpack", op.slug()));
    let fe = super::float_elem(op);
    let w = f.buffer("W", Elem::U32, n * kw, Space::Param(1), false);
    let sc = f.buffer("S", fe, n * kb, Space::Param(2), false);
    let b = f.buffer("B", dequant_elem(op, s), k * n, Space::Global, true);
    let lid = f.exprs.push(Expr::Builtin(Builtin::LocalId(0)));
    let gx = f.exprs.push(Expr::Builtin(Builtin::GroupId(0)));
    let gy = f.exprs.push(Expr::Builtin(Builtin::GroupId(1)));
    let mut g = Gen::new(f);
    let mut body = Vec::new();
    let nib = Nibble::new(&mut g.f, s.f16_acc);
    let ct = g.f.i32(UNPACK_COLUMN_THREADS as i32);
    let col = g.f.bin(BinOp::Rem, lid, ct);
    let first = g.f.mul_c(gx, UNPACK_COLUMN_THREADS as i64);
    let col = g.plus(first, col);
    let col = g.f.mul_c(col, width as i64);
    let n_v = g.fresh("n", Ty::I32);
    body.push(Stmt::Set { var: n_v, value: col });
    let blk = g.f.bin(BinOp::Div, lid, ct);
    let first = g.f.mul_c(gy, UNPACK_BLOCK_THREADS as i64);
    let blk = g.plus(first, blk);
    let blk_v = g.fresh("blk", Ty::I32);
    body.push(Stmt::Set { var: blk_v, value: blk });
    let (n0, blk) = (g.f.get(n_v), g.f.get(blk_v));
    let mut work = Vec::new();
    // Column c's four words and its scale.
    let mut regs = Vec::new();
    for c in 0..width {
        let cn = g.f.add_c(n0, c as i64);
        let wrow = g.f.mul_c(cn, kw as i64);
        let at = g.f.mul_c(blk, 4);
        let wi = g.plus(wrow, at);
        let wv = g.fresh("wv", Ty::U32x4);
        let value = g.f.load(LoadTy::U32x4, w, wi);
        work.push(Stmt::Set { var: wv, value });
        let words: Vec<Var> = (0..4)
            .map(|i| {
                let v = g.fresh("word", Ty::I32);
                let whole = g.f.get(wv);
                let value = g.f.exprs.push(Expr::Lane(whole, i));
                work.push(Stmt::Set { var: v, value });
                v
            })
            .collect();
        let srow = g.f.mul_c(cn, kb as i64);
        let si = g.plus(srow, blk);
        let sv = g.fresh("scale", Ty::F32);
        let value = g.f.load(LoadTy::F32, sc, si);
        work.push(Stmt::Set { var: sv, value });
        regs.push((words, sv));
    }
    let row0 = g.f.mul_c(blk, 32);
    for (i, j) in (0..4).flat_map(|i| (0..8).map(move |j| (i, j))) {
        let shift = (j > 0).then(|| g.f.i32(4 * j as i32));
        let vals: Vec<E> = regs
            .iter()
            .map(|(words, sv)| {
                let word = g.f.get(words[i]);
                let scale = g.f.get(*sv);
                nib.value(&mut g.f, word, shift, scale)
            })
            .collect();
        let value = if width == 4 { g.f.exprs.push(Expr::Compose([vals[0], vals[1], vals[2], vals[3]])) } else { vals[0] };
        let row = g.f.add_c(row0, (8 * i + j) as i64);
        let at = g.f.mul_c(row, n as i64);
        let index = g.plus(at, n0);
        work.push(Stmt::Store { buf: b, index, value });
    }
    let exact = dispatch[0] * UNPACK_COLUMN_THREADS * width == n && dispatch[1] * UNPACK_BLOCK_THREADS == kb;
    if exact {
        body.extend(work);
    } else {
        let (nc, bc) = (g.f.i32(n as i32), g.f.i32(kb as i32));
        let in_n = g.f.bin(BinOp::Lt, n0, nc);
        let in_k = g.f.bin(BinOp::Lt, blk, bc);
        let cond = g.f.bin(BinOp::And, in_n, in_k);
        body.push(Stmt::If { cond, body: work });
    }
    g.f.body = body;
    (g.f, workgroup, dispatch)
}

/// Threads per workgroup and workgroup counts of the q4 kernel.
pub fn launch(op: &Op, s: &Schedule) -> ([u32; 3], [u32; 3]) {
    let (_, m, _, n) = op.bmkn();
    ([s.y1 / s.y0 * s.split_k, 1, 1], [n.div_ceil(s.y1), m.div_ceil(s.x0), 1])
}

pub fn generate(op: &Op, s: &Schedule) -> Func {
    let (_, m, k, n) = op.bmkn();
    let fmt = Format::of(op);
    let vpw = fmt.per_word();
    let (kw, kb) = (k / vpw, k / 32);
    let mut f = Func::new(op.slug());
    let fe = super::float_elem(op);
    // +merge: A's parts P in A's place (H heads, C parts a head).
    let parts = op.merge_parts();
    let a = match parts {
        Some((_, c)) => f.buffer("P", fe, m * c * k, Space::Param(0), false),
        None => f.buffer("A", fe, m * k, Space::Param(0), false),
    };
    let Weights { w, scale: sc, min: mn } = Weights::declare(&mut f, op);
    let ep = op.epilogue();
    let first_ep = op.epilogue_first_arg();
    let merge_in = parts.map(|(h, c)| {
        let pm = f.buffer("PM", fe, m * h * c, Space::Param(first_ep), false);
        let pl = f.buffer("PL", fe, m * h * c, Space::Param(first_ep + 1), false);
        (pm, pl)
    });
    // +rms_norm's G and E, +residual's R (docs/ops.md's order).
    let norm =
        ep.norm.then(|| (f.buffer("G", fe, k, Space::Param(first_ep), false), f.buffer("E", fe, 1, Space::Param(first_ep + 1), false)));
    let resid = ep.residual.then(|| f.buffer("R", fe, m * n, Space::Param(first_ep + 2 * u32::from(ep.norm || ep.merge)), false));
    let c = f.buffer("C", fe, m * n, Space::Param(op.args().len() as u32 - 1), true);
    let sk = s.split_k;
    let rows = s.x0;
    // Rows of W per output: 2 under +swiglu (gate and up), summed alike.
    let ny = op.weight_rows_per_output();
    let red = (sk > 1 && !s.subgroup_reduce).then(|| f.buffer("red", Elem::F32, rows * ny * s.y1 * sk, Space::Workgroup, true));
    let threads = s.y1 / s.y0 * sk;
    let nrm = ep.norm.then(|| f.buffer("nrm", Elem::F32, threads, Space::Workgroup, true));
    // +merge: the workgroup's rows of A, merged (`am`), and each part's weight (`mw`).
    let merge_wg = parts.map(|(h, c)| {
        (f.buffer("am", Elem::F32, rows * k, Space::Workgroup, true), f.buffer("mw", Elem::F32, rows * h * c, Space::Workgroup, true))
    });
    let lid = f.exprs.push(Expr::Builtin(Builtin::LocalId(0)));
    let gx = f.exprs.push(Expr::Builtin(Builtin::GroupId(0)));
    let gy = f.exprs.push(Expr::Builtin(Builtin::GroupId(1)));
    let mut g = Gen::new(f);
    let mut body = Vec::new();

    let skc = g.f.i32(sk as i32);
    let o = g.f.bin(BinOp::Div, lid, skc);
    let o_v = g.fresh("o", Ty::I32);
    body.push(Stmt::Set { var: o_v, value: o });
    let o = g.f.get(o_v);
    let lane = g.f.bin(BinOp::Rem, lid, skc);
    let lane_v = g.fresh("lane", Ty::I32);
    body.push(Stmt::Set { var: lane_v, value: lane });
    let lane = g.f.get(lane_v);
    let y0 = s.y0;
    let n0 = g.f.mul_c(gx, s.y1 as i64);
    let first = if y0 == 1 { o } else { g.f.mul_c(o, y0 as i64) };
    let nn = g.plus(n0, first);
    let n_v = g.fresh("n", Ty::I32);
    body.push(Stmt::Set { var: n_v, value: nn });
    let nn = g.f.get(n_v);
    let m0 = g.f.mul_c(gy, rows as i64);
    let m_v = g.fresh("m0", Ty::I32);
    body.push(Stmt::Set { var: m_v, value: m0 });
    let m0 = g.f.get(m_v);

    // Output j of the thread is row n + j of W; with y0 > 1 and N not a
    // multiple of y1 its loads are clamped to W's last row.
    let mut outs: Vec<E> = (0..y0)
        .map(|j| {
            if y0 == 1 {
                return nn;
            }
            let nj = g.plus_c(nn, j);
            let nj = if n % s.y1 != 0 {
                let last = g.f.i32(n as i32 - 1);
                g.f.bin(BinOp::Min, nj, last)
            } else {
                nj
            };
            let v = g.fresh(&format!("n{j}"), Ty::I32);
            body.push(Stmt::Set { var: v, value: nj });
            g.f.get(v)
        })
        .collect();
    // +swiglu: then the up rows, N further on (q = y0 + j: output j's up).
    if ny == 2 {
        let gates = outs.clone();
        outs.extend(gates.into_iter().map(|r| g.plus_c(r, n)));
    }
    let zf = g.f.f32(0.0);
    // acc[i][q]: row i of A, output q (q ≥ y0: output q − y0's up row).
    let acc: Vec<Vec<_>> = (0..rows)
        .map(|i| {
            (0..y0 * ny)
                .map(|q| {
                    let name = match (q >= y0, y0) {
                        (false, 1) => format!("acc_{i}"),
                        (false, _) => format!("acc_{i}_{q}"),
                        (true, _) => format!("acc_{i}_u{}", q - y0),
                    };
                    let v = g.fresh(&name, Ty::F32);
                    body.push(Stmt::Set { var: v, value: zf });
                    v
                })
                .collect()
        })
        .collect();
    // Rows past M are clamped when read (their sums are never stored).
    let row_base: Vec<E> = (0..rows)
        .map(|i| {
            let r = g.f.add_c(m0, i as i64);
            let mc = g.f.i32(m as i32 - 1);
            let r = g.f.bin(BinOp::Min, r, mc);
            g.f.mul_c(r, k as i64)
        })
        .collect();
    // +merge: the rows of A merged from their parts into `am` (module docs).
    if let (Some((h, c)), Some((pm, pl)), Some((am, mw))) = (parts, merge_in, merge_wg) {
        merge_prologue(&mut g, &mut body, MergeBufs { p: a, pm, pl, am, mw }, (m, k, h, c), rows, m0, threads, lid);
    }
    // +rms_norm: each row's factor r = 1/√(Σ A²/K + E), for every thread.
    let rnorm: Vec<Var> = match (norm, nrm) {
        (Some((_, eps)), Some(nrm)) => {
            let k4 = k / 4;
            let per = k4.div_ceil(threads);
            (0..rows as usize)
                .map(|i| {
                    let ss = g.fresh(&format!("ss{i}"), Ty::F32);
                    body.push(Stmt::Set { var: ss, value: zf });
                    let cv = g.fresh(&format!("sq{i}"), Ty::I32);
                    let ce = g.f.get(cv);
                    let step = g.f.mul_c(ce, threads as i64);
                    let idx = g.plus(step, lid);
                    let iv = g.fresh(&format!("sqi{i}"), Ty::I32);
                    let mut inner = vec![Stmt::Set { var: iv, value: idx }];
                    let ie = g.f.get(iv);
                    let at = g.f.mul_c(ie, 4);
                    let at = g.plus(row_base[i], at);
                    let v = g.f.load(LoadTy::F32x4, a, at);
                    let sq = g.f.mul(v, v);
                    let h = g.f.exprs.push(Expr::HSum(sq));
                    let prev = g.f.get(ss);
                    let value = g.f.add(prev, h);
                    let mut add = vec![Stmt::Set { var: ss, value }];
                    if k4 % threads != 0 {
                        let ie = g.f.get(iv);
                        let kc = g.f.i32(k4 as i32);
                        let cond = g.f.bin(BinOp::Lt, ie, kc);
                        add = vec![Stmt::If { cond, body: add }];
                    }
                    inner.extend(add);
                    let (lo, hi) = (g.f.i32(0), g.f.i32(per as i32));
                    body.push(Stmt::For(For { var: cv, lo, hi, step: 1, unroll: false, body: inner }));
                    let value = g.f.get(ss);
                    body.push(Stmt::Store { buf: nrm, index: lid, value });
                    body.push(Stmt::Barrier);
                    // One barrier, then every thread adds the threads' sums itself, in
                    // one order (four at a time where they fill vec4s): a tree's
                    // log2(threads) barriers cost more than its loads save.
                    let total = if threads.is_multiple_of(4) {
                        let acc4 = g.fresh(&format!("ssv{i}"), Ty::F32x4);
                        let zero = g.f.i32(0);
                        let first = g.f.load(LoadTy::F32x4, nrm, zero);
                        body.push(Stmt::Set { var: acc4, value: first });
                        if threads > 4 {
                            let cv = g.fresh(&format!("sst{i}"), Ty::I32);
                            let at = g.f.get(cv);
                            let x = g.f.load(LoadTy::F32x4, nrm, at);
                            let prev = g.f.get(acc4);
                            let value = g.f.add(prev, x);
                            let (lo, hi) = (g.f.i32(4), g.f.i32(threads as i32));
                            let inner = vec![Stmt::Set { var: acc4, value }];
                            body.push(Stmt::For(For { var: cv, lo, hi, step: 4, unroll: false, body: inner }));
                        }
                        let v = g.f.get(acc4);
                        g.f.exprs.push(Expr::HSum(v))
                    } else {
                        let zero = g.f.i32(0);
                        let mut t = g.f.load(LoadTy::F32, nrm, zero);
                        for l in 1..threads {
                            let li = g.f.i32(l as i32);
                            let x = g.f.load(LoadTy::F32, nrm, li);
                            t = g.f.add(t, x);
                        }
                        t
                    };
                    let inv_k = g.f.f32(1.0 / k as f32);
                    let mean = g.f.mul(total, inv_k);
                    let zero = g.f.i32(0);
                    let e = g.f.load(LoadTy::F32, eps, zero);
                    let x = g.f.add(mean, e);
                    let value = g.f.un(UnOp::Rsqrt, x);
                    let r = g.fresh(&format!("rn{i}"), Ty::F32);
                    body.push(Stmt::Set { var: r, value });
                    if i + 1 < rows as usize {
                        // Every thread has read this row's sum before the next overwrites it.
                        body.push(Stmt::Barrier);
                    }
                    r
                })
                .collect()
        }
        _ => Vec::new(),
    };
    // Loads of W: one packed word (`vectorize` 1) or four (`vectorize` 4:
    // one scale block of nibbles, half a block of bytes), per unit.
    let vec = s.vectorize;
    let units = kw / vec;
    let words: Vec<_> = (0..vec).map(|i| g.fresh(&format!("word{i}"), Ty::I32)).collect();
    let wv = (vec == 4).then(|| g.fresh("wv", Ty::U32x4));
    let gq: Vec<_> = (0..vpw).map(|j| g.fresh(&format!("q{j}"), Ty::F32)).collect();
    let scale = g.fresh("scale", Ty::F32);
    // Q4_1: the unit's block minimum, and per row the sum of A over the unit.
    let minv = mn.map(|_| g.fresh("minv", Ty::F32));
    let asum: Vec<Var> = if mn.is_some() { (0..rows).map(|i| g.fresh(&format!("asum{i}"), Ty::F32)).collect() } else { Vec::new() };
    let positions = fmt.positions();
    // part[i][q][p]: row i of A, output q, value position p (see `unpack`).
    let part: Vec<Vec<Vec<_>>> = (0..rows)
        .map(|i| (0..y0 * ny).map(|j| (0..positions).map(|p| g.fresh(&format!("p{i}_{j}_{p}"), Ty::F32)).collect()).collect())
        .collect();
    // A's vpw·vec values of a unit for each row, kept for all y0 outputs.
    let a4_rows: Vec<Vec<_>> =
        (0..rows).map(|i| (0..vpw * vec / 4).map(|h| g.fresh(&format!("a4_{i}_{h}"), Ty::F32x4)).collect()).collect();
    // Units per scale block, as a shift: 32 / (vpw·vec) is 1, 2, 4 or 8.
    let block_shift = (32 / (vpw * vec)).trailing_zeros();

    // Loads the scale (and Q4_1's minimum, into `mv`) of unit `ui` of
    // output row `row` into `sv`.
    let load_scale = |g: &mut Gen, row: E, ui: E, (sv, mv): (Var, Option<Var>), out: &mut Vec<Stmt>| {
        let srow = g.f.mul_c(row, kb as i64);
        // The unit's scale block: ui itself for whole blocks, else ui
        // shifted right (ui is never negative).
        let blk = if block_shift == 0 {
            ui
        } else {
            let sh = g.f.i32(block_shift as i32);
            g.f.bin(BinOp::Shr, ui, sh)
        };
        let sidx = g.plus(srow, blk);
        let value = g.f.load(LoadTy::F32, sc, sidx);
        out.push(Stmt::Set { var: sv, value });
        if let (Some(mv), Some(mn)) = (mv, mn) {
            let value = g.f.load(LoadTy::F32, mn, sidx);
            out.push(Stmt::Set { var: mv, value });
        }
    };
    // Loads the packed words of unit `ui` of output row `row` into `raw`: a
    // vec4<u32> (`vectorize` 4) or one word.
    let load_raw = |g: &mut Gen, row: E, ui: E, raw: Var, out: &mut Vec<Stmt>| {
        let wrow = g.f.mul_c(row, kw as i64);
        let (widx, ty) = if vec == 4 {
            let at = g.f.mul_c(ui, 4);
            (g.plus(wrow, at), LoadTy::U32x4)
        } else {
            (g.plus(wrow, ui), LoadTy::U32)
        };
        let value = g.f.load(ty, w, widx);
        out.push(Stmt::Set { var: raw, value });
    };
    // Copies the four words of a vec4<u32> load into `words`.
    let spread = |g: &mut Gen, raw: Var, out: &mut Vec<Stmt>| {
        for (i, &wd) in words.iter().enumerate() {
            let v = g.f.get(raw);
            let value = g.f.exprs.push(Expr::Lane(v, i as u8));
            out.push(Stmt::Set { var: wd, value });
        }
    };
    // Loads unit `ui` of output row `row` (its words and their scale).
    let load_w = |g: &mut Gen, row: E, ui: E, out: &mut Vec<Stmt>| {
        load_raw(g, row, ui, wv.unwrap_or(words[0]), out);
        if let Some(wv) = wv {
            spread(g, wv, out);
        }
        load_scale(g, row, ui, (scale, minv), out);
    };
    // Unpacks word `wd` into gq: nibble j of the low half (j < 4) and of
    // `wd >> 16` (j ≥ 4) stays at bits 4p..4p+4 (p = j mod 4) and is or-ed
    // into the mantissa of 2^23; taking 2^23 + 8·16^p away leaves
    // (nibble − 8)·16^p exactly. The factor 16^p is taken out once per unit,
    // when the four position sums are added (Horner, by 1/16). The or with
    // 2^23's bits M is made once per half: (src | M) & (mask | M) equals
    // (src & mask) | M, so each nibble costs one logic instruction (an and
    // with one immediate) instead of two (compilers do not merge an and and
    // an or whose operands are both constants).
    //
    // Q4_1's nibbles are unsigned: only 2^23 is taken away. Q8_0's signed
    // bytes are first made unsigned (q + 128, `flip_bytes`), two per half
    // at bits 8p..8p+8, and 2^23 + 128·256^p taken away leaves q·256^p.
    let (lo_m, hi_m) = (g.fresh("lo", Ty::I32), g.fresh("hi", Ty::I32));
    let bits = fmt.bits();
    let flipped = (fmt == Format::Q8_0).then(|| g.fresh("ub", Ty::I32));
    let unpack = |g: &mut Gen, wd: Var, out: &mut Vec<Stmt>| {
        let mut lo = g.f.get(wd);
        if let Some(ub) = flipped {
            let value = flip_bytes(&mut g.f, lo);
            out.push(Stmt::Set { var: ub, value });
            lo = g.f.get(ub);
        }
        let sixteen = g.f.i32(16);
        let hi = g.f.bin(BinOp::Shr, lo, sixteen);
        for (v, half) in [(lo_m, lo), (hi_m, hi)] {
            let magic = g.f.i32(MAGIC);
            let value = g.f.bin(BinOp::Or, half, magic);
            out.push(Stmt::Set { var: v, value });
        }
        let top = (1i32 << bits) - 1;
        for (j, &qv) in gq.iter().enumerate() {
            let p = j % positions;
            let src = g.f.get(if j < positions { lo_m } else { hi_m });
            let mask = g.f.i32((top << (bits as usize * p)) | MAGIC);
            let bits_e = g.f.bin(BinOp::And, src, mask);
            let fl = g.f.exprs.push(Expr::FromBits(bits_e));
            let radix = ((1u32 << bits) as f32).powi(p as i32);
            let offset = match fmt {
                Format::Q4_0 => 8.0 * radix,
                Format::Q4_1 => 0.0,
                Format::Q8_0 => 128.0 * radix,
            };
            let bias = g.f.f32(8_388_608.0 + offset);
            let value = g.f.sub(fl, bias);
            out.push(Stmt::Set { var: qv, value });
        }
    };
    // part[p] += Σ over values j at position p of gq_j · A[vpw·wi + j], for
    // word wi of the unit (A's values in `a`, vpw/4 vec4s per word).
    let dot = |g: &mut Gen, a: &[Var], wi: usize, parts: &[Var], first: bool, out: &mut Vec<Stmt>| {
        for (p, &pv) in parts.iter().enumerate() {
            let mut sum = if first { None } else { Some(g.f.get(pv)) };
            for j in [p, p + positions] {
                let at = vpw as usize * wi + j;
                let v = g.f.get(a[at / 4]);
                let av = g.f.exprs.push(Expr::Lane(v, (at % 4) as u8));
                let qe = g.f.get(gq[j]);
                sum = Some(match sum {
                    None => g.f.mul(qe, av),
                    Some(prev) => g.f.fma(qe, av, prev),
                });
            }
            out.push(Stmt::Set { var: pv, value: sum.expect("two values") });
        }
    };
    // acc += scale · (p0 + p1/16 + p2/256 + p3/4096) (bytes: p0 + p1/256),
    // and for Q4_1 + min · Σ A over the unit (`sum`).
    let combine = |g: &mut Gen, parts: &[Var], accv: Var, (scale, min): (Var, Option<Var>), sum: Option<Var>, out: &mut Vec<Stmt>| {
        let sixteenth = g.f.f32(1.0 / (1u32 << bits) as f32);
        let mut h = g.f.get(parts[positions - 1]);
        for p in (0..positions - 1).rev() {
            let lower = g.f.get(parts[p]);
            h = g.f.fma(h, sixteenth, lower);
        }
        let se = g.f.get(scale);
        let ae = g.f.get(accv);
        let mut value = g.f.fma(h, se, ae);
        if let (Some(min), Some(sum)) = (min, sum) {
            let (me, se) = (g.f.get(min), g.f.get(sum));
            value = g.f.fma(me, se, value);
        }
        out.push(Stmt::Set { var: accv, value });
    };
    // Loads A[row i, col .. col + vpw·vec] (col = vpw·vec·ui) into `into`
    // (aligned vec4 reads; K is a multiple of 32), and for Q4_1 their sum
    // into asum[i].
    // +merge reads the merged rows from workgroup memory.
    let (a_src, a_rows): (Handle<Buffer>, Vec<E>) = match merge_wg {
        Some((am, _)) => (am, (0..rows).map(|i| g.f.i32((i * k) as i32)).collect()),
        None => (a, row_base.clone()),
    };
    let load_a = |g: &mut Gen, i: usize, col: E, into: &[Var], out: &mut Vec<Stmt>| {
        let base = g.plus(a_rows[i], col);
        for (h, &v) in into.iter().enumerate() {
            let at = g.plus_c(base, 4 * h as u32);
            let mut value = g.f.load(LoadTy::F32x4, a_src, at);
            if let (Some((gamma, _)), Some(&r)) = (norm, rnorm.get(i)) {
                // (A·r)·G, as the fixed rms_norm kernel computes it.
                let re = g.f.get(r);
                let rs = g.f.splat(re);
                let scaled = g.f.mul(value, rs);
                let gi = g.plus_c(col, 4 * h as u32);
                let gv = g.f.load(LoadTy::F32x4, gamma, gi);
                value = g.f.mul(scaled, gv);
            }
            out.push(Stmt::Set { var: v, value });
        }
        if let Some(&sv) = asum.get(i) {
            let mut total = g.f.get(into[0]);
            for &v in &into[1..] {
                let x = g.f.get(v);
                total = g.f.add(total, x);
            }
            let value = g.f.exprs.push(Expr::HSum(total));
            out.push(Stmt::Set { var: sv, value });
        }
    };
    // The arithmetic of unit `ui` for each of the thread's outputs j, whose
    // packed words and scale `fetch(g, j, out)` puts in registers and names
    // (by loading them, or from registers a previous step prefetched).
    type Fetch<'a> = dyn FnMut(&mut Gen, usize, &mut Vec<Stmt>) -> (Vec<Var>, (Var, Option<Var>)) + 'a;
    let unit_work = |g: &mut Gen, ui: E, fetch: &mut Fetch<'_>, out: &mut Vec<Stmt>| {
        let col = g.f.mul_c(ui, (vpw * vec) as i64);
        for (i, a_row) in a4_rows.iter().enumerate() {
            load_a(g, i, col, a_row, out);
        }
        for j in 0..outs.len() {
            let (wds, sv) = fetch(g, j, out);
            for (wi, &wd) in wds.iter().enumerate() {
                unpack(g, wd, out);
                for (i, a_row) in a4_rows.iter().enumerate() {
                    dot(g, a_row, wi, &part[i][j], wi == 0, out);
                }
            }
            for (i, accs) in acc.iter().enumerate() {
                combine(g, &part[i][j], accs[j], sv, asum.get(i).copied(), out);
            }
        }
    };
    // The work of one unit `ui` for each of the thread's outputs, loads included.
    let one_unit = |g: &mut Gen, ui: E| -> Vec<Stmt> {
        let mut out = Vec::new();
        let mut fetch = |g: &mut Gen, j: usize, out: &mut Vec<Stmt>| {
            load_w(g, outs[j], ui, out);
            (words.clone(), (scale, minv))
        };
        unit_work(g, ui, &mut fetch, &mut out);
        out
    };

    // Units per loop iteration per thread, and the loop over them.
    let per_iter = (s.r0 / (vpw * vec)).max(1);
    let chunk = sk * per_iter;
    let (full, rest) = s.matvec_steps(op);
    let unroll = s.unrolls(UnrollLoop::R0);
    let mut work = Vec::new();
    let chunk_body = |g: &mut Gen, w0: E, guard: bool| -> Vec<Stmt> {
        let u = g.fresh("u", Ty::I32);
        let ue = g.f.get(u);
        let us = g.f.mul_c(ue, sk as i64);
        let base = g.plus(w0, lane);
        let wi = g.plus(base, us);
        let mut inner = one_unit(g, wi);
        if guard {
            let kwc = g.f.i32(units as i32);
            let cond = g.f.bin(BinOp::Lt, wi, kwc);
            inner = vec![Stmt::If { cond, body: inner }];
        }
        let (lo, hi) = (g.f.i32(0), g.f.i32(per_iter as i32));
        vec![Stmt::For(For { var: u, lo, hi, step: 1, unroll, body: inner })]
    };
    if s.double_buffer {
        // Register double buffering: the next step's words and scales are
        // loaded before this step's arithmetic and carried across the loop's
        // back edge, so each thread keeps one step of loads in flight while
        // it computes instead of issuing every load first and computing at
        // the end. Per unit u of a step and output j: the raw load and its
        // scale, current and next.
        let raw_ty = if vec == 4 { Ty::U32x4 } else { Ty::I32 };
        // Per unit and output: the raw load, its scale and Q4_1's minimum.
        type Staged = Vec<Vec<(Var, (Var, Option<Var>))>>;
        let mut stage = |pre: &str| -> Staged {
            (0..per_iter)
                .map(|u| {
                    (0..y0 * ny)
                        .map(|j| {
                            let raw = g.fresh(&format!("{pre}w{u}_{j}"), raw_ty);
                            let sv = g.fresh(&format!("{pre}s{u}_{j}"), Ty::F32);
                            (raw, (sv, mn.map(|_| g.fresh(&format!("{pre}m{u}_{j}"), Ty::F32))))
                        })
                        .collect()
                })
                .collect()
        };
        let (cur, nxt) = (stage("cur"), stage("next"));
        // Unit u of the step starting at w0.
        let unit_at = |g: &mut Gen, w0: E, u: u32| -> E {
            let base = g.plus(w0, lane);
            g.plus_c(base, u * sk)
        };
        type Stage = [Vec<(Var, (Var, Option<Var>))>];
        let loads = |g: &mut Gen, w0: E, dst: &Stage, out: &mut Vec<Stmt>| {
            for (u, per_out) in dst.iter().enumerate() {
                let ui = unit_at(g, w0, u as u32);
                for (&(raw, sv), &row) in per_out.iter().zip(&outs) {
                    load_raw(g, row, ui, raw, out);
                    load_scale(g, row, ui, sv, out);
                }
            }
        };
        let compute = |g: &mut Gen, w0: E, src: &Stage, out: &mut Vec<Stmt>| {
            for (u, per_out) in src.iter().enumerate() {
                let ui = unit_at(g, w0, u as u32);
                let mut fetch = |g: &mut Gen, j: usize, out: &mut Vec<Stmt>| {
                    let (raw, sv) = per_out[j];
                    if vec == 4 {
                        spread(g, raw, out);
                        (words.clone(), sv)
                    } else {
                        (vec![raw], sv)
                    }
                };
                unit_work(g, ui, &mut fetch, out);
            }
        };
        let zero = g.f.i32(0);
        loads(&mut g, zero, &cur, &mut work);
        let w0 = g.fresh("w0", Ty::I32);
        let w0e = g.f.get(w0);
        let mut inner = Vec::new();
        let ahead = g.f.add_c(w0e, chunk as i64);
        loads(&mut g, ahead, &nxt, &mut inner);
        compute(&mut g, w0e, &cur, &mut inner);
        for (c_u, n_u) in cur.iter().zip(&nxt) {
            for (&(cr, (cs, cm)), &(nr, (ns, nm))) in c_u.iter().zip(n_u) {
                let (rv, sv) = (g.f.get(nr), g.f.get(ns));
                inner.push(Stmt::Set { var: cr, value: rv });
                inner.push(Stmt::Set { var: cs, value: sv });
                if let (Some(cm), Some(nm)) = (cm, nm) {
                    let value = g.f.get(nm);
                    inner.push(Stmt::Set { var: cm, value });
                }
            }
        }
        let (lo, hi) = (g.f.i32(0), g.f.i32(((full - 1) * chunk) as i32));
        work.push(Stmt::For(For { var: w0, lo, hi, step: chunk, unroll: false, body: inner }));
        let last = g.f.i32(((full - 1) * chunk) as i32);
        compute(&mut g, last, &cur, &mut work);
    } else if full > 0 {
        let w0 = g.fresh("w0", Ty::I32);
        let w0e = g.f.get(w0);
        let inner = chunk_body(&mut g, w0e, false);
        let (lo, hi) = (g.f.i32(0), g.f.i32((full * chunk) as i32));
        work.push(Stmt::For(For { var: w0, lo, hi, step: chunk, unroll: false, body: inner }));
    }
    if rest != 0 {
        let w0 = g.f.i32((full * chunk) as i32);
        work.extend(chunk_body(&mut g, w0, true));
    }
    let ncst = g.f.i32(n as i32);
    let in_n = g.f.bin(BinOp::Lt, nn, ncst);
    if n % s.y1 == 0 || y0 > 1 {
        body.extend(work);
    } else {
        body.push(Stmt::If { cond: in_n, body: work });
    }

    // Reduction and store, for each (row i of A, output j) in order; the
    // sums reduced are every (row, output q), q < ny·y0 (+swiglu's up rows too).
    let pairs: Vec<(u32, u32)> = (0..rows).flat_map(|i| (0..y0).map(move |j| (i, j))).collect();
    let sums: Vec<(u32, u32)> = (0..rows).flat_map(|i| (0..y0 * ny).map(move |q| (i, q))).collect();
    let store_out = |g: &mut Gen, i: u32, j: u32, value: E| -> Stmt {
        let r = g.f.add_c(m0, i as i64);
        let rowoff = g.f.mul_c(r, n as i64);
        let col = if j == 0 { nn } else { g.plus_c(nn, j) };
        let idx = g.plus(rowoff, col);
        let value = match resid {
            Some(rb) => {
                let x = g.f.load(LoadTy::F32, rb, idx);
                g.f.add(value, x)
            }
            None => value,
        };
        let st = Stmt::Store { buf: c, index: idx, value };
        let mut conds = Vec::new();
        if m % rows != 0 {
            let mc = g.f.i32(m as i32);
            conds.push(g.f.bin(BinOp::Lt, r, mc));
        }
        if n % s.y1 != 0 {
            conds.push(if j == 0 { in_n } else { g.f.bin(BinOp::Lt, col, ncst) });
        }
        match conds.as_slice() {
            [] => st,
            [a] => Stmt::If { cond: *a, body: vec![st] },
            [a, b] => Stmt::If { cond: g.f.bin(BinOp::And, *a, *b), body: vec![st] },
            _ => unreachable!("at most two conditions"),
        }
    };
    // Output j's value from its sums (`sum(g, q)`: output q's): the sum
    // itself, or under +swiglu silu(gate)·up.
    let value_of = |g: &mut Gen, j: u32, sum: &mut dyn FnMut(&mut Gen, u32) -> E| -> E {
        let gate = sum(g, j);
        if ny == 1 {
            return gate;
        }
        let up = sum(g, y0 + j);
        let act = g.f.un(UnOp::Silu, gate);
        g.f.mul(act, up)
    };
    // Lane 0 of each output stores its sums: `value(g, i, q)` for row i of
    // A and output q.
    let lane0_stores = |g: &mut Gen, value: &mut dyn FnMut(&mut Gen, u32, u32) -> E| -> Stmt {
        let one = g.f.i32(1);
        let cond = g.f.bin(BinOp::Lt, lane, one);
        let stores = pairs
            .iter()
            .map(|&(i, j)| {
                let v = value_of(g, j, &mut |g, q| value(g, i, q));
                store_out(g, i, j, v)
            })
            .collect();
        Stmt::If { cond, body: stores }
    };
    let Some(red) = red else {
        if sk == 1 {
            for &(i, j) in &pairs {
                let v = value_of(&mut g, j, &mut |g, q| g.f.get(acc[i as usize][q as usize]));
                body.push(store_out(&mut g, i, j, v));
            }
            g.f.body = body;
            return g.f;
        }
        // Subgroup butterfly: the split_k lanes of an output are neighbours
        // in one subgroup (split_k is a power of two no larger than the
        // subgroup), so after log2(split_k) xor-shuffles every lane holds
        // the sum; lane 0 stores it. No workgroup memory, no barrier.
        for &(i, j) in &sums {
            let v = acc[i as usize][j as usize];
            let mut mask = sk / 2;
            while mask >= 1 {
                let x = g.f.get(v);
                let mc = g.f.i32(mask as i32);
                let other = g.f.exprs.push(Expr::ShuffleXor(x, mc));
                let value = g.f.add(x, other);
                body.push(Stmt::Set { var: v, value });
                mask /= 2;
            }
        }
        body.push(lane0_stores(&mut g, &mut |g, i, j| g.f.get(acc[i as usize][j as usize])));
        g.f.body = body;
        return g.f;
    };
    // red[(i·ny·y1 + h·y1 + o·y0 + j)·sk + lane] for output q = h·y0 + j.
    let slot = |g: &mut Gen, i: u32, q: u32, l: E| -> E {
        let oi = g.f.add_c(first, ((i * ny + q / y0) * s.y1 + q % y0) as i64);
        let base = g.f.mul_c(oi, sk as i64);
        g.plus(base, l)
    };
    for &(i, j) in &sums {
        let idx = slot(&mut g, i, j, lane);
        let value = g.f.get(acc[i as usize][j as usize]);
        body.push(Stmt::Store { buf: red, index: idx, value });
    }
    body.push(Stmt::Barrier);
    let zero = g.f.i32(0);
    if sk.is_power_of_two() {
        let mut stride = sk / 2;
        while stride >= 1 {
            let stc = g.f.i32(stride as i32);
            let cond = g.f.bin(BinOp::Lt, lane, stc);
            let mut adds = Vec::new();
            for &(i, j) in &sums {
                let here = slot(&mut g, i, j, lane);
                let there = g.f.add_c(here, stride as i64);
                let x = g.f.load(LoadTy::F32, red, here);
                let y = g.f.load(LoadTy::F32, red, there);
                let value = g.f.add(x, y);
                adds.push(Stmt::Store { buf: red, index: here, value });
            }
            body.push(Stmt::If { cond, body: adds });
            body.push(Stmt::Barrier);
            stride /= 2;
        }
        body.push(lane0_stores(&mut g, &mut |g, i, j| {
            let idx = slot(g, i, j, zero);
            g.f.load(LoadTy::F32, red, idx)
        }));
    } else {
        let one = g.f.i32(1);
        let first_lane = g.f.bin(BinOp::Lt, lane, one);
        let mut stores = Vec::new();
        // The lanes' sums in order, output q into totals[q / y0].
        let totals: Vec<Var> = (0..ny).map(|h| g.fresh(if h == 0 { "total" } else { "total_u" }, Ty::F32)).collect();
        for &(i, j) in &pairs {
            for (h, &t) in totals.iter().enumerate() {
                let q = j + h as u32 * y0;
                let idx = slot(&mut g, i, q, zero);
                let v = g.f.load(LoadTy::F32, red, idx);
                stores.push(Stmt::Set { var: t, value: v });
                for l in 1..sk {
                    let li = g.f.i32(l as i32);
                    let idx = slot(&mut g, i, q, li);
                    let v = g.f.load(LoadTy::F32, red, idx);
                    let te = g.f.get(t);
                    let value = g.f.add(te, v);
                    stores.push(Stmt::Set { var: t, value });
                }
            }
            let v = value_of(&mut g, j, &mut |g, q| g.f.get(totals[(q / y0) as usize]));
            stores.push(store_out(&mut g, i, j, v));
        }
        body.push(Stmt::If { cond: first_lane, body: stores });
    }
    g.f.body = body;
    g.f
}
