//! Schedule → loop IR: one generator per op family and target flavor.

pub mod matmul_cpu;
pub mod matmul_gpu;
pub mod q4_cpu;
pub mod q4_gpu;

use std::collections::HashMap;

use crate::ir::{Expr, For, Func, Handle, Stmt, Ty, Var, const_i32};
use crate::op::{Op, OpKind};
use crate::schedule::Schedule;

/// The loop IR of `op` under a CPU schedule. The schedule must have passed
/// [`Schedule::check`] for the Wasm target.
pub fn cpu(op: &Op, s: &Schedule) -> Func {
    match op.kind() {
        OpKind::Matmul | OpKind::BatchMatmul => matmul_cpu::generate(op, s),
        OpKind::MatmulQ4 => q4_cpu::generate(op, s),
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
    body: &mut dyn FnMut(&mut T, Handle<Expr>, Handle<Expr>, u32) -> Vec<Stmt>,
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
