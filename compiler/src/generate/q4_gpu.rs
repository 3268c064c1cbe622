//! `matmul_q4` for the GPU (WGSL): the matrix-vector family used for decode
//! (M = 1), which also computes any M exactly.
//!
//! ```text
//! workgroup (group_id.x, group_id.y) = (y1 outputs, x0 rows)
//! threads   T = y1 · split_k; thread t serves output o = t / split_k and
//!           reads the packed words s, s + split_k, ... (s = t % split_k) of
//!           W's row, so neighbouring threads read neighbouring words
//! per word  q_j = bitcast<f32>((w >> 4j) & 15 | 0x4B000000) − (2^23 + 8)
//!           = nibble − 8 exactly, for its 8 nibbles (shared by the x0 rows);
//!           A[row, 8w .. 8w + 8] as two vec4 reads; p = Σ_j q_j · A[row, 8w + j],
//!           acc_row += S · p (r0/8 words per loop iteration, unrolled)
//! reduce    split_k partial sums per output in workgroup memory: a tree when
//!           split_k is a power of two, else one thread adds them in order
//! ```
//!
//! Outputs past N and rows past M compute nothing and store nothing; every
//! barrier is at the top level of the kernel.

use super::Gen;
use crate::ir::{BinOp, Builtin, Elem, Expr, For, Func, Handle, LoadTy, Space, Stmt, Ty};
use crate::op::Op;
use crate::schedule::{Schedule, UnrollLoop};

type E = Handle<Expr>;

/// Threads per workgroup and workgroup counts of the q4 kernel.
pub fn launch(op: &Op, s: &Schedule) -> ([u32; 3], [u32; 3]) {
    let (_, m, _, n) = op.bmkn();
    ([s.y1 * s.split_k, 1, 1], [n.div_ceil(s.y1), m.div_ceil(s.x0), 1])
}

pub fn generate(op: &Op, s: &Schedule) -> Func {
    let (_, m, k, n) = op.bmkn();
    let (kw, kb) = (k / 8, k / 32);
    let mut f = Func::new(op.slug());
    let a = f.buffer("A", Elem::F32, m * k, Space::Param(0), false);
    let w = f.buffer("W", Elem::U32, n * kw, Space::Param(1), false);
    let sc = f.buffer("S", Elem::F32, n * kb, Space::Param(2), false);
    let c = f.buffer("C", Elem::F32, m * n, Space::Param(3), true);
    let sk = s.split_k;
    let rows = s.x0;
    let red = (sk > 1).then(|| f.buffer("red", Elem::F32, rows * s.y1 * sk, Space::Workgroup, true));
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
    let n0 = g.f.mul_c(gx, s.y1 as i64);
    let nn = g.plus(n0, o);
    let n_v = g.fresh("n", Ty::I32);
    body.push(Stmt::Set { var: n_v, value: nn });
    let nn = g.f.get(n_v);
    let m0 = g.f.mul_c(gy, rows as i64);
    let m_v = g.fresh("m0", Ty::I32);
    body.push(Stmt::Set { var: m_v, value: m0 });
    let m0 = g.f.get(m_v);

    let zf = g.f.f32(0.0);
    let acc: Vec<_> = (0..rows)
        .map(|i| {
            let v = g.fresh(&format!("acc_{i}"), Ty::F32);
            body.push(Stmt::Set { var: v, value: zf });
            v
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
    let q: Vec<_> = (0..8).map(|j| g.fresh(&format!("q{j}"), Ty::F32)).collect();
    let a4: Vec<_> = (0..2).map(|h| g.fresh(&format!("a4_{h}"), Ty::F32x4)).collect();
    let word = g.fresh("word", Ty::I32);
    let scale = g.fresh("scale", Ty::F32);
    let p = g.fresh("p", Ty::F32);

    // The work of one packed word `wi` of row `nn`.
    let one_word = |g: &mut Gen, wi: E| -> Vec<Stmt> {
        let mut out = Vec::new();
        let wrow = g.f.mul_c(nn, kw as i64);
        let widx = g.plus(wrow, wi);
        let value = g.f.load(LoadTy::U32, w, widx);
        out.push(Stmt::Set { var: word, value });
        let srow = g.f.mul_c(nn, kb as i64);
        let four = g.f.i32(4);
        let blk = g.f.bin(BinOp::Div, wi, four);
        let sidx = g.plus(srow, blk);
        let value = g.f.load(LoadTy::F32, sc, sidx);
        out.push(Stmt::Set { var: scale, value });
        let we = g.f.get(word);
        let fifteen = g.f.i32(15);
        for (j, &qv) in q.iter().enumerate() {
            let sh = g.f.i32(4 * j as i32);
            let shifted = if j == 0 { we } else { g.f.bin(BinOp::Shr, we, sh) };
            let nib = g.f.bin(BinOp::And, shifted, fifteen);
            // The nibble as the low mantissa bits of 2^23, then 2^23 + 8
            // taken away: q − 8 exactly, with no integer-to-float conversion
            // (slow on GPUs: measured on the H100, 1.15–1.40× faster).
            let magic = g.f.i32(0x4B00_0000);
            let bits = g.f.bin(BinOp::Or, nib, magic);
            let fl = g.f.exprs.push(Expr::FromBits(bits));
            let bias = g.f.f32(8_388_616.0);
            let value = g.f.sub(fl, bias);
            out.push(Stmt::Set { var: qv, value });
        }
        let col = g.f.mul_c(wi, 8);
        for (i, &accv) in acc.iter().enumerate() {
            let base = g.plus(row_base[i], col);
            // A's 8 values as two aligned vec4 reads (K is a multiple of 32).
            for (h, &v) in a4.iter().enumerate() {
                let at = g.plus_c(base, 4 * h as u32);
                let value = g.f.load(LoadTy::F32x4, a, at);
                out.push(Stmt::Set { var: v, value });
            }
            let mut sum: Option<E> = None;
            for (j, &qv) in q.iter().enumerate() {
                let v = g.f.get(a4[j / 4]);
                let av = g.f.exprs.push(Expr::Lane(v, (j % 4) as u8));
                let qe = g.f.get(qv);
                sum = Some(match sum {
                    None => g.f.mul(qe, av),
                    Some(prev) => g.f.fma(qe, av, prev),
                });
            }
            out.push(Stmt::Set { var: p, value: sum.expect("eight nibbles") });
            let pe = g.f.get(p);
            let se = g.f.get(scale);
            let ae = g.f.get(accv);
            let value = g.f.fma(pe, se, ae);
            out.push(Stmt::Set { var: accv, value });
        }
        out
    };

    // Words per loop iteration per thread, and the loop over them.
    let per_iter = (s.r0 / 8).max(1);
    let chunk = sk * per_iter;
    let full = kw / chunk;
    let unroll = s.unrolls(UnrollLoop::R0);
    let mut work = Vec::new();
    let chunk_body = |g: &mut Gen, w0: E, guard: bool| -> Vec<Stmt> {
        let u = g.fresh("u", Ty::I32);
        let ue = g.f.get(u);
        let us = g.f.mul_c(ue, sk as i64);
        let base = g.plus(w0, lane);
        let wi = g.plus(base, us);
        let mut inner = one_word(g, wi);
        if guard {
            let kwc = g.f.i32(kw as i32);
            let cond = g.f.bin(BinOp::Lt, wi, kwc);
            inner = vec![Stmt::If { cond, body: inner }];
        }
        let (lo, hi) = (g.f.i32(0), g.f.i32(per_iter as i32));
        vec![Stmt::For(For { var: u, lo, hi, step: 1, unroll, body: inner })]
    };
    if full > 0 {
        let w0 = g.fresh("w0", Ty::I32);
        let w0e = g.f.get(w0);
        let inner = chunk_body(&mut g, w0e, false);
        let (lo, hi) = (g.f.i32(0), g.f.i32((full * chunk) as i32));
        work.push(Stmt::For(For { var: w0, lo, hi, step: chunk, unroll: false, body: inner }));
    }
    if kw % chunk != 0 {
        let w0 = g.f.i32((full * chunk) as i32);
        work.extend(chunk_body(&mut g, w0, true));
    }
    let ncst = g.f.i32(n as i32);
    let in_n = g.f.bin(BinOp::Lt, nn, ncst);
    if n % s.y1 == 0 {
        body.extend(work);
    } else {
        body.push(Stmt::If { cond: in_n, body: work });
    }

    // Reduction and store.
    let store_row = |g: &mut Gen, i: u32, value: E| -> Stmt {
        let r = g.f.add_c(m0, i as i64);
        let rowoff = g.f.mul_c(r, n as i64);
        let idx = g.plus(rowoff, nn);
        let st = Stmt::Store { buf: c, index: idx, value };
        let mut conds = Vec::new();
        if m % rows != 0 {
            let mc = g.f.i32(m as i32);
            conds.push(g.f.bin(BinOp::Lt, r, mc));
        }
        if n % s.y1 != 0 {
            conds.push(in_n);
        }
        match conds.as_slice() {
            [] => st,
            [a] => Stmt::If { cond: *a, body: vec![st] },
            [a, b] => Stmt::If { cond: g.f.bin(BinOp::And, *a, *b), body: vec![st] },
            _ => unreachable!("at most two conditions"),
        }
    };
    let Some(red) = red else {
        for (i, &accv) in acc.iter().enumerate() {
            let v = g.f.get(accv);
            body.push(store_row(&mut g, i as u32, v));
        }
        g.f.body = body;
        return g.f;
    };
    // red[(i·y1 + o)·sk + lane]
    let slot = |g: &mut Gen, i: u32, l: E| -> E {
        let oi = g.f.add_c(o, (i * s.y1) as i64);
        let base = g.f.mul_c(oi, sk as i64);
        g.plus(base, l)
    };
    for (i, &accv) in acc.iter().enumerate() {
        let idx = slot(&mut g, i as u32, lane);
        let value = g.f.get(accv);
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
            for i in 0..rows {
                let here = slot(&mut g, i, lane);
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
        let one = g.f.i32(1);
        let first = g.f.bin(BinOp::Lt, lane, one);
        let mut stores = Vec::new();
        for i in 0..rows {
            let idx = slot(&mut g, i, zero);
            let v = g.f.load(LoadTy::F32, red, idx);
            stores.push(store_row(&mut g, i, v));
        }
        body.push(Stmt::If { cond: first, body: stores });
    } else {
        let one = g.f.i32(1);
        let first = g.f.bin(BinOp::Lt, lane, one);
        let mut stores = Vec::new();
        let t = g.fresh("total", Ty::F32);
        for i in 0..rows {
            let idx = slot(&mut g, i, zero);
            let v = g.f.load(LoadTy::F32, red, idx);
            stores.push(Stmt::Set { var: t, value: v });
            for l in 1..sk {
                let li = g.f.i32(l as i32);
                let idx = slot(&mut g, i, li);
                let v = g.f.load(LoadTy::F32, red, idx);
                let te = g.f.get(t);
                let value = g.f.add(te, v);
                stores.push(Stmt::Set { var: t, value });
            }
            let te = g.f.get(t);
            stores.push(store_row(&mut g, i, te));
        }
        body.push(Stmt::If { cond: first, body: stores });
    }
    g.f.body = body;
    g.f
}
