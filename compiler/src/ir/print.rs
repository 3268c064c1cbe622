//! The IR's text form. Short and stable, so test files read well:
//!
//! ```text
//! kernel axpy {
//!   buf X: f32[8] param 0
//!   buf Y: f32[8] param 1 rw
//!   var i: i32
//!   for i in 0..8 step 4 unroll {
//!     store Y[i] = fma(splat(2.0), load.f32x4 X[i], load.f32x4 Y[i])
//!   }
//! }
//! ```

use std::fmt::Write;

use super::{BinOp, Elem, Expr, Func, Handle, Space, Stmt};

/// Prints a whole function.
pub fn print(f: &Func) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "kernel {} {{", f.name);
    for (_, b) in f.buffers.iter() {
        let elem = match b.elem {
            Elem::F32 => "f32",
            Elem::U32 => "u32",
            Elem::F16 => "f16",
        };
        let space = match b.space {
            Space::Param(n) => format!("param {n}"),
            Space::Scratch => "scratch".to_string(),
            Space::Workgroup => "workgroup".to_string(),
            Space::Global => "global".to_string(),
        };
        let rw = if b.writable { " rw" } else { "" };
        let row = if b.row > 0 { format!(" row {}", b.row) } else { String::new() };
        let _ = writeln!(out, "  buf {}: {}[{}] {}{}{}", b.name, elem, b.len, space, rw, row);
    }
    for (_, v) in f.vars.iter() {
        let _ = writeln!(out, "  var {}: {}", v.name, v.ty.name());
    }
    print_block(f, &f.body, 1, &mut out);
    out.push_str("}\n");
    out
}

fn print_block(f: &Func, body: &[Stmt], depth: usize, out: &mut String) {
    for s in body {
        print_stmt(f, s, depth, out);
    }
}

fn print_stmt(f: &Func, s: &Stmt, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    match s {
        Stmt::For(l) => {
            let step = if l.step != 1 { format!(" step {}", l.step) } else { String::new() };
            let unroll = if l.unroll { " unroll" } else { "" };
            let _ = writeln!(out, "{pad}for {} in {}..{}{step}{unroll} {{", f.vars[l.var].name, expr(f, l.lo), expr(f, l.hi));
            print_block(f, &l.body, depth + 1, out);
            let _ = writeln!(out, "{pad}}}");
        }
        Stmt::Set { var, value } => {
            let _ = writeln!(out, "{pad}{} = {}", f.vars[*var].name, expr(f, *value));
        }
        Stmt::Store { buf, index, value } => {
            let _ = writeln!(out, "{pad}store {}[{}] = {}", f.buffers[*buf].name, expr(f, *index), expr(f, *value));
        }
        Stmt::If { cond, body } => {
            let _ = writeln!(out, "{pad}if {} {{", expr(f, *cond));
            print_block(f, body, depth + 1, out);
            let _ = writeln!(out, "{pad}}}");
        }
        Stmt::Barrier => {
            let _ = writeln!(out, "{pad}barrier");
        }
    }
}

/// Prints one expression.
pub fn expr(f: &Func, e: Handle<Expr>) -> String {
    let mut s = String::new();
    write_expr(f, e, 0, false, &mut s);
    s
}

fn write_expr(f: &Func, e: Handle<Expr>, parent: u8, right: bool, out: &mut String) {
    match &f.exprs[e] {
        Expr::I32(v) => {
            let _ = write!(out, "{v}");
        }
        Expr::F32(v) => {
            // `{:?}` prints the shortest text that reads back to the same f32.
            let _ = write!(out, "{v:?}");
        }
        Expr::Var(v) => out.push_str(&f.vars[*v].name),
        Expr::Bin(op @ (BinOp::Min | BinOp::Max), a, b) => call(f, op.symbol(), &[*a, *b], out),
        Expr::Bin(op, a, b) => {
            let p = op.precedence();
            let paren = p < parent || (p == parent && right);
            if paren {
                out.push('(');
            }
            write_expr(f, *a, p, false, out);
            let _ = write!(out, " {} ", op.symbol());
            write_expr(f, *b, p, true, out);
            if paren {
                out.push(')');
            }
        }
        Expr::Fma(a, b, c) => call(f, "fma", &[*a, *b, *c], out),
        Expr::Splat(a) => call(f, "splat", &[*a], out),
        Expr::ToF32(a) => call(f, "tof32", &[*a], out),
        Expr::FromBits(a) => call(f, "bitsf32", &[*a], out),
        Expr::SToF32(a) => call(f, "stof32", &[*a], out),
        Expr::ToI32(a) => call(f, "toi32", &[*a], out),
        Expr::DotI16(a, b) => call(f, "dot16", &[*a, *b], out),
        Expr::ExtendS(a, e) => call(f, e.name(), &[*a], out),
        Expr::HSum(a) => call(f, "hsum", &[*a], out),
        Expr::Lane(a, n) => call(f, &format!("lane{n}"), &[*a], out),
        Expr::Load { ty, buf, index } => {
            let _ = write!(out, "load.{} {}[", ty.name(), f.buffers[*buf].name);
            write_expr(f, *index, 0, false, out);
            out.push(']');
        }
        Expr::Builtin(b) => out.push_str(&b.name()),
        Expr::ShuffleXor(a, m) => call(f, "shufflexor", &[*a, *m], out),
        Expr::Compose(lanes) => call(f, "f32x4", lanes, out),
        Expr::Un(op, a) => call(f, op.name(), &[*a], out),
    }
}

fn call(f: &Func, name: &str, args: &[Handle<Expr>], out: &mut String) {
    out.push_str(name);
    out.push('(');
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(f, *a, 0, false, out);
    }
    out.push(')');
}
