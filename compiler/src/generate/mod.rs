//! Schedule → loop IR: one generator per op family and target flavor.

pub mod gguf_cpu;
pub mod matmul_cpu;
pub mod matmul_gpu;
pub mod q4_cpu;
pub mod q4_gpu;

use std::collections::HashMap;

use crate::ir::{Buffer, Expr, For, Func, Handle, LoadTy, Space, Stmt, Ty, UnOp, Var, const_i32};
use crate::op::{Activation, Epilogue, Op, OpKind};
use crate::schedule::Schedule;

/// The loop IR of `op` under a CPU schedule. The schedule must have passed
/// [`Schedule::check`] for the Wasm target.
pub fn cpu(op: &Op, s: &Schedule) -> Func {
    match op.kind() {
        OpKind::Matmul | OpKind::BatchMatmul | OpKind::MatmulI16 => matmul_cpu::generate(op, s),
        OpKind::MatmulQ4 => q4_cpu::generate(op, s),
        OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0 => gguf_cpu::generate(op, s),
    }
}

/// The loop IR of one part of a threaded CPU kernel (see `crate::parts`):
/// `op` over the sub-problem `v`.
pub fn cpu_view(op: &Op, s: &Schedule, v: &matmul_cpu::View) -> Func {
    match op.kind() {
        OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0 => gguf_cpu::generate_view(op, s, v),
        _ => matmul_cpu::generate_view(op, s, v),
    }
}

/// Shared state of a generator: the function being built and name counters.
#[derive(Debug)]
pub struct Gen {
    pub f: Func,
    names: HashMap<String, u32>,
}

impl Gen {
    pub fn new(f: Func) -> Gen {
        Gen { f, names: HashMap::new() }
    }

    /// A new variable; repeated names get a numeric suffix so printed IR stays readable.
    pub fn fresh(&mut self, name: &str, ty: Ty) -> Handle<Var> {
        let n = self.names.entry(name.to_string()).or_insert(0);
        let full = if *n == 0 { name.to_string() } else { format!("{name}_{n}") };
        *n += 1;
        self.f.var(full, ty)
    }

    /// `a + b`, dropping constant zeros.
    pub fn plus(&mut self, a: Handle<Expr>, b: Handle<Expr>) -> Handle<Expr> {
        match (const_i32(&self.f, a), const_i32(&self.f, b)) {
            (Some(0), _) => b,
            (_, Some(0)) => a,
            (Some(x), Some(y)) => self.f.i32(x + y),
            _ => self.f.add(a, b),
        }
    }

    /// `a + c`.
    pub fn plus_c(&mut self, a: Handle<Expr>, c: u32) -> Handle<Expr> {
        let k = self.f.i32(c as i32);
        self.plus(a, k)
    }
}

/// A generator that owns a [`Gen`].
pub trait HasGen {
    fn builder(&mut self) -> &mut Gen;
}

/// The body of a tile of [`tiled`]: `(this, global origin, origin within the parent, size)` to its statements.
pub type TileBody<'a, T> = dyn FnMut(&mut T, Handle<Expr>, Handle<Expr>, u32) -> Vec<Stmt> + 'a;

/// Splits `extent` into full tiles (a loop over them) and one remainder tile,
/// and generates `body(global origin, origin within the parent, size)` once
/// for each kind, so every tile size in the generated code is static.
pub fn tiled<T: HasGen>(
    this: &mut T,
    origin: Handle<Expr>,
    extent: u32,
    tile: u32,
    name: &str,
    unroll: bool,
    body: &mut TileBody<'_, T>,
) -> Vec<Stmt> {
    let full = extent / tile;
    let rem = extent % tile;
    let mut out = Vec::new();
    if full == 1 {
        let zero = this.builder().f.i32(0);
        out.extend(body(this, origin, zero, tile));
    } else if full > 1 {
        let g = this.builder();
        let v = g.fresh(name, Ty::I32);
        let local = g.f.get(v);
        let global = g.plus(origin, local);
        let inner = body(this, global, local, tile);
        let g = this.builder();
        let (lo, hi) = (g.f.i32(0), g.f.i32((full * tile) as i32));
        out.push(Stmt::For(For { var: v, lo, hi, step: tile, unroll, body: inner }));
    }
    if rem > 0 {
        let g = this.builder();
        let local = g.f.i32((full * tile) as i32);
        let global = g.plus(origin, local);
        out.extend(body(this, global, local, rem));
    }
    out
}

pub use crate::schedule::sizes::float_elem;

/// A matmul's fused epilogue in a generated kernel: its buffers, and the
/// temporaries GELU reads twice (made on first use, so that a kernel without
/// an epilogue has exactly the variables and buffers it had before).
#[derive(Debug)]
pub struct Epi {
    pub epilogue: Epilogue,
    pub bias: Option<Handle<Buffer>>,
    pub residual: Option<Handle<Buffer>>,
    /// `f32` and `f32x4` temporaries.
    tmp: [Option<Handle<Var>>; 2],
}

impl Epi {
    /// Declares the epilogue's arguments after A (param 0) and B (param 1)
    /// (and `matmul_i16`'s SA and SB, params 2 and 3), in ABI order (bias,
    /// then R), and returns them with the output's param number. `n` is the
    /// length of the bias (C's columns), `outputs` the length of C (and of R).
    pub fn declare(f: &mut Func, op: &Op, n: u32, outputs: u32) -> (Epi, u32) {
        let e = op.epilogue();
        let mut next = op.epilogue_first_arg();
        let mut param = |f: &mut Func, name: &str, len: u32| {
            let b = f.buffer(name, float_elem(op), len, Space::Param(next), false);
            next += 1;
            b
        };
        let bias = e.bias.then(|| param(f, "bias", n));
        let residual = e.residual.then(|| param(f, "R", outputs));
        (Epi { epilogue: e, bias, residual, tmp: [None; 2] }, next)
    }

    /// No epilogue, and no buffers for one (a pass that does not store C).
    pub fn none() -> Epi {
        Epi { epilogue: Epilogue::NONE, bias: None, residual: None, tmp: [None; 2] }
    }

    pub fn is_none(&self) -> bool {
        self.epilogue.is_none()
    }

    /// `act(acc + bias[col]) + R[cidx]` for an accumulator `acc` of C's
    /// element `cidx` (one `f32`, or four from `col` on): the statements to
    /// run first, and the value to store. `col` is the column in 0..N.
    pub fn apply(
        &mut self,
        g: &mut Gen,
        acc: Handle<Expr>,
        ty: LoadTy,
        col: Handle<Expr>,
        cidx: Handle<Expr>,
    ) -> (Vec<Stmt>, Handle<Expr>) {
        let vector = ty == LoadTy::F32x4;
        let mut pre = Vec::new();
        let mut v = acc;
        if let Some(b) = self.bias {
            let x = g.f.load(ty, b, col);
            v = g.f.add(v, x);
        }
        match self.epilogue.act {
            Activation::None => {}
            Activation::Relu => v = g.f.un(UnOp::Relu, v),
            Activation::Gelu => {
                // 0.5·x·(1 + erf(x/√2)) as fma(h, erf(x·(1/√2)), h), h = 0.5·x.
                let slot = usize::from(vector);
                let t = *self.tmp[slot].get_or_insert_with(|| g.fresh("ep", if vector { Ty::F32x4 } else { Ty::F32 }));
                pre.push(Stmt::Set { var: t, value: v });
                let c = |g: &mut Gen, x: f32| {
                    let k = g.f.f32(x);
                    if vector { g.f.splat(k) } else { k }
                };
                let (half, scale) = (c(g, 0.5), c(g, std::f32::consts::FRAC_1_SQRT_2));
                let x = g.f.get(t);
                let h = g.f.mul(x, half);
                let x = g.f.get(t);
                let s = g.f.mul(x, scale);
                let e = g.f.un(UnOp::Erf, s);
                v = g.f.fma(h, e, h);
            }
        }
        if let Some(r) = self.residual {
            let x = g.f.load(ty, r, cidx);
            v = g.f.add(v, x);
        }
        (pre, v)
    }
}
