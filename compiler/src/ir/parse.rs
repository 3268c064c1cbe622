//! Reads the text form written by [`super::print`]. Used by tests and the
//! filetest runner; the compiler's own path never parses text.

use std::collections::HashMap;

use super::{BinOp, Buffer, Builtin, Elem, Expr, Extend, For, Func, Handle, LoadTy, Space, Stmt, Ty, UnOp, Var};

/// A syntax error with its 1-based position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {col}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Int(i64),
    Float(f32),
    Punct(&'static str),
    Eof,
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: usize,
    col: usize,
}

const PUNCT: [&str; 18] = ["..", ">>", "{", "}", "[", "]", "(", ")", ",", ":", "=", "+", "-", "*", "/", "%", "<", "|"];

impl<'a> Lexer<'a> {
    fn tokens(src: &'a str) -> Result<Vec<(Tok, usize, usize)>, ParseError> {
        let mut lx = Lexer { src: src.as_bytes(), pos: 0, line: 1, col: 1 };
        let mut out = Vec::new();
        loop {
            lx.skip_space();
            let (line, col) = (lx.line, lx.col);
            let t = lx.next()?;
            let end = t == Tok::Eof;
            out.push((t, line, col));
            if end {
                return Ok(out);
            }
        }
    }

    fn bump(&mut self) -> u8 {
        let c = self.src[self.pos];
        self.pos += 1;
        if c == b'\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        c
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.src.get(self.pos + k).copied()
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek_at(0) {
            if c == b';' {
                while self.peek_at(0).is_some_and(|c| c != b'\n') {
                    self.bump();
                }
            } else if c.is_ascii_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn error(&self, message: String) -> ParseError {
        ParseError { line: self.line, col: self.col, message }
    }

    fn next(&mut self) -> Result<Tok, ParseError> {
        let Some(c) = self.peek_at(0) else { return Ok(Tok::Eof) };
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = self.pos;
            while self.peek_at(0).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.') {
                // A `..` after an identifier is the range operator, not part of the name.
                if self.peek_at(0) == Some(b'.') && self.peek_at(1) == Some(b'.') {
                    break;
                }
                self.bump();
            }
            return Ok(Tok::Ident(String::from_utf8_lossy(&self.src[start..self.pos]).into_owned()));
        }
        if c.is_ascii_digit() {
            let start = self.pos;
            let mut float = false;
            while let Some(c) = self.peek_at(0) {
                if c.is_ascii_digit() {
                    self.bump();
                } else if c == b'.' && self.peek_at(1) != Some(b'.') && !float {
                    float = true;
                    self.bump();
                } else if (c == b'e' || c == b'E') && float {
                    self.bump();
                    if matches!(self.peek_at(0), Some(b'-') | Some(b'+')) {
                        self.bump();
                    }
                } else {
                    break;
                }
            }
            let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or_default();
            return if float {
                text.parse().map(Tok::Float).map_err(|_| self.error(format!("bad number `{text}`")))
            } else {
                text.parse().map(Tok::Int).map_err(|_| self.error(format!("bad integer `{text}`")))
            };
        }
        for p in PUNCT {
            if self.src[self.pos..].starts_with(p.as_bytes()) {
                for _ in 0..p.len() {
                    self.bump();
                }
                return Ok(Tok::Punct(p));
            }
        }
        if c == b'&' {
            self.bump();
            return Ok(Tok::Punct("&"));
        }
        Err(self.error(format!("unexpected character `{}`", c as char)))
    }
}

struct Parser {
    toks: Vec<(Tok, usize, usize)>,
    pos: usize,
    func: Func,
    vars: HashMap<String, Handle<Var>>,
    bufs: HashMap<String, Handle<Buffer>>,
}

/// Parses one `kernel NAME { ... }`.
pub fn parse(src: &str) -> Result<Func, ParseError> {
    let toks = Lexer::tokens(src)?;
    let mut p = Parser { toks, pos: 0, func: Func::default(), vars: HashMap::new(), bufs: HashMap::new() };
    p.keyword("kernel")?;
    p.func.name = p.ident()?;
    p.punct("{")?;
    loop {
        if p.at_ident("buf") {
            p.pos += 1;
            p.buffer_decl()?;
        } else if p.at_ident("var") {
            p.pos += 1;
            let name = p.ident()?;
            p.punct(":")?;
            let ty = p.ty()?;
            if p.vars.contains_key(&name) {
                return Err(p.error(format!("variable `{name}` declared twice")));
            }
            let h = p.func.var(name.clone(), ty);
            p.vars.insert(name, h);
        } else {
            break;
        }
    }
    let body = p.block_until_close()?;
    p.func.body = body;
    if p.peek() != &Tok::Eof {
        return Err(p.error("text after the kernel's closing `}`".into()));
    }
    Ok(p.func)
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    fn error(&self, message: String) -> ParseError {
        let (_, line, col) = self.toks[self.pos.min(self.toks.len() - 1)];
        ParseError { line, col, message }
    }

    fn at_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Ident(i) if i == s)
    }

    fn at_punct(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Punct(p) if *p == s)
    }

    fn keyword(&mut self, s: &str) -> Result<(), ParseError> {
        if self.at_ident(s) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected `{s}`, found {:?}", self.peek())))
        }
    }

    fn punct(&mut self, s: &str) -> Result<(), ParseError> {
        if self.at_punct(s) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected `{s}`, found {:?}", self.peek())))
        }
    }

    fn ident(&mut self) -> Result<String, ParseError> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                self.pos += 1;
                Ok(s)
            }
            t => Err(self.error(format!("expected a name, found {t:?}"))),
        }
    }

    fn int(&mut self) -> Result<i64, ParseError> {
        match *self.peek() {
            Tok::Int(v) => {
                self.pos += 1;
                Ok(v)
            }
            ref t => Err(self.error(format!("expected an integer, found {t:?}"))),
        }
    }

    fn u32(&mut self) -> Result<u32, ParseError> {
        let v = self.int()?;
        u32::try_from(v).map_err(|_| self.error(format!("{v} does not fit in u32")))
    }

    fn ty(&mut self) -> Result<Ty, ParseError> {
        let name = self.ident()?;
        Ok(match name.as_str() {
            "i32" => Ty::I32,
            "f32" => Ty::F32,
            "f32x4" => Ty::F32x4,
            "u32x4" => Ty::U32x4,
            _ => return Err(self.error(format!("unknown type `{name}`"))),
        })
    }

    fn buffer_decl(&mut self) -> Result<(), ParseError> {
        let name = self.ident()?;
        self.punct(":")?;
        let elem = match self.ident()?.as_str() {
            "f32" => Elem::F32,
            "u32" => Elem::U32,
            "f16" => Elem::F16,
            other => return Err(self.error(format!("unknown element type `{other}`"))),
        };
        self.punct("[")?;
        let len = self.u32()?;
        self.punct("]")?;
        let space = match self.ident()?.as_str() {
            "param" => Space::Param(self.u32()?),
            "scratch" => Space::Scratch,
            "workgroup" => Space::Workgroup,
            "global" => Space::Global,
            other => return Err(self.error(format!("unknown buffer space `{other}`"))),
        };
        let writable = self.at_ident("rw");
        if writable {
            self.pos += 1;
        }
        let row = if self.at_ident("row") {
            self.pos += 1;
            self.u32()?
        } else {
            0
        };
        if self.bufs.contains_key(&name) {
            return Err(self.error(format!("buffer `{name}` declared twice")));
        }
        let h = self.func.buffer(&name, elem, len, space, writable);
        self.func.set_row(h, row);
        self.bufs.insert(name, h);
        Ok(())
    }

    fn block_until_close(&mut self) -> Result<Vec<Stmt>, ParseError> {
        let mut out = Vec::new();
        while !self.at_punct("}") {
            if self.peek() == &Tok::Eof {
                return Err(self.error("missing `}`".into()));
            }
            out.push(self.stmt()?);
        }
        self.pos += 1;
        Ok(out)
    }

    fn var_ref(&mut self) -> Result<Handle<Var>, ParseError> {
        let name = self.ident()?;
        self.vars.get(&name).copied().ok_or_else(|| {
            self.pos -= 1;
            self.error(format!("unknown variable `{name}`"))
        })
    }

    fn buf_ref(&mut self) -> Result<Handle<Buffer>, ParseError> {
        let name = self.ident()?;
        self.bufs.get(&name).copied().ok_or_else(|| {
            self.pos -= 1;
            self.error(format!("unknown buffer `{name}`"))
        })
    }

    fn stmt(&mut self) -> Result<Stmt, ParseError> {
        if self.at_ident("for") {
            self.pos += 1;
            let var = self.var_ref()?;
            self.keyword("in")?;
            let lo = self.expr()?;
            self.punct("..")?;
            let hi = self.expr()?;
            let mut step = 1;
            if self.at_ident("step") {
                self.pos += 1;
                step = self.u32()?;
            }
            let unroll = self.at_ident("unroll");
            if unroll {
                self.pos += 1;
            }
            self.punct("{")?;
            let body = self.block_until_close()?;
            return Ok(Stmt::For(For { var, lo, hi, step, unroll, body }));
        }
        if self.at_ident("store") {
            self.pos += 1;
            let buf = self.buf_ref()?;
            self.punct("[")?;
            let index = self.expr()?;
            self.punct("]")?;
            self.punct("=")?;
            let value = self.expr()?;
            return Ok(Stmt::Store { buf, index, value });
        }
        if self.at_ident("if") {
            self.pos += 1;
            let cond = self.expr()?;
            self.punct("{")?;
            let body = self.block_until_close()?;
            return Ok(Stmt::If { cond, body });
        }
        if self.at_ident("barrier") {
            self.pos += 1;
            return Ok(Stmt::Barrier);
        }
        let var = self.var_ref()?;
        self.punct("=")?;
        let value = self.expr()?;
        Ok(Stmt::Set { var, value })
    }

    fn expr(&mut self) -> Result<Handle<Expr>, ParseError> {
        self.binary(0)
    }

    fn infix_op(&self) -> Option<BinOp> {
        match self.peek() {
            Tok::Punct(p) => BinOp::INFIX.into_iter().find(|op| op.symbol() == *p),
            _ => None,
        }
    }

    fn binary(&mut self, min_prec: u8) -> Result<Handle<Expr>, ParseError> {
        let mut lhs = self.atom()?;
        while let Some(op) = self.infix_op() {
            let p = op.precedence();
            if p < min_prec {
                break;
            }
            self.pos += 1;
            let rhs = self.binary(p + 1)?;
            lhs = self.func.bin(op, lhs, rhs);
        }
        Ok(lhs)
    }

    fn args(&mut self, n: usize) -> Result<Vec<Handle<Expr>>, ParseError> {
        self.punct("(")?;
        let mut out = Vec::new();
        for i in 0..n {
            if i > 0 {
                self.punct(",")?;
            }
            out.push(self.expr()?);
        }
        self.punct(")")?;
        Ok(out)
    }

    fn atom(&mut self) -> Result<Handle<Expr>, ParseError> {
        match self.peek().clone() {
            Tok::Int(v) => {
                self.pos += 1;
                let v = i32::try_from(v).map_err(|_| self.error(format!("{v} does not fit in i32")))?;
                Ok(self.func.i32(v))
            }
            Tok::Float(v) => {
                self.pos += 1;
                Ok(self.func.f32(v))
            }
            Tok::Punct("-") => {
                self.pos += 1;
                match self.peek().clone() {
                    Tok::Int(v) => {
                        self.pos += 1;
                        let v = i32::try_from(-v).map_err(|_| self.error(format!("-{v} does not fit in i32")))?;
                        Ok(self.func.i32(v))
                    }
                    Tok::Float(v) => {
                        self.pos += 1;
                        Ok(self.func.f32(-v))
                    }
                    t => Err(self.error(format!("`-` must precede a number, found {t:?}"))),
                }
            }
            Tok::Punct("(") => {
                self.pos += 1;
                let e = self.expr()?;
                self.punct(")")?;
                Ok(e)
            }
            Tok::Ident(name) => {
                self.pos += 1;
                if let Some(ty) = name.strip_prefix("load.") {
                    let ty =
                        LoadTy::ALL.into_iter().find(|t| t.name() == ty).ok_or_else(|| self.error(format!("unknown load type `{ty}`")))?;
                    let buf = self.buf_ref()?;
                    self.punct("[")?;
                    let index = self.expr()?;
                    self.punct("]")?;
                    return Ok(self.func.load(ty, buf, index));
                }
                let builtin = |base: &str| -> Option<u8> {
                    let d = name.strip_prefix(base)?.strip_prefix('.')?;
                    ["x", "y", "z"].iter().position(|x| *x == d).map(|d| d as u8)
                };
                if let Some(d) = builtin("local_id") {
                    return Ok(self.func.exprs.push(Expr::Builtin(Builtin::LocalId(d))));
                }
                if let Some(d) = builtin("group_id") {
                    return Ok(self.func.exprs.push(Expr::Builtin(Builtin::GroupId(d))));
                }
                let e = match name.as_str() {
                    "fma" => {
                        let a = self.args(3)?;
                        Expr::Fma(a[0], a[1], a[2])
                    }
                    "min" => {
                        let a = self.args(2)?;
                        Expr::Bin(BinOp::Min, a[0], a[1])
                    }
                    "max" if self.at_punct("(") => {
                        let a = self.args(2)?;
                        Expr::Bin(BinOp::Max, a[0], a[1])
                    }
                    "splat" => Expr::Splat(self.args(1)?[0]),
                    "tof32" => Expr::ToF32(self.args(1)?[0]),
                    "bitsf32" => Expr::FromBits(self.args(1)?[0]),
                    "stof32" => Expr::SToF32(self.args(1)?[0]),
                    "toi32" if self.at_punct("(") => Expr::ToI32(self.args(1)?[0]),
                    "dot16" => {
                        let a = self.args(2)?;
                        Expr::DotI16(a[0], a[1])
                    }
                    "hsum" => Expr::HSum(self.args(1)?[0]),
                    _ if Extend::ALL.iter().any(|e| e.name() == name) && self.at_punct("(") => {
                        let e = Extend::ALL.into_iter().find(|e| e.name() == name).expect("matched above");
                        Expr::ExtendS(self.args(1)?[0], e)
                    }
                    "shufflexor" => {
                        let a = self.args(2)?;
                        Expr::ShuffleXor(a[0], a[1])
                    }
                    "f32x4" => {
                        let a = self.args(4)?;
                        Expr::Compose([a[0], a[1], a[2], a[3]])
                    }
                    "lane0" | "lane1" | "lane2" | "lane3" => Expr::Lane(self.args(1)?[0], name.as_bytes()[4] - b'0'),
                    _ if UnOp::ALL.iter().any(|u| u.name() == name) && self.at_punct("(") => {
                        let op = UnOp::ALL.into_iter().find(|u| u.name() == name).expect("matched above");
                        Expr::Un(op, self.args(1)?[0])
                    }
                    _ => {
                        self.pos -= 1;
                        let v = self.var_ref()?;
                        Expr::Var(v)
                    }
                };
                Ok(self.func.exprs.push(e))
            }
            t => Err(self.error(format!("expected an expression, found {t:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::print::print;

    #[test]
    fn round_trips() {
        let src = "kernel k {
  buf A: f32[64] param 0
  buf W: u32[16] param 1
  buf C: f32[64] param 2 rw
  buf T: f32[8] workgroup rw row 4
  var i: i32
  var j: i32
  var a: f32x4
  var w: u32x4
  for i in 0..16 step 4 unroll {
    a = fma(splat(load.f32 A[i * 4 + 1]), load.f32x4 A[(i + 1) * 2], splat(-1.5))
    w = load.u32x4 W[i] >> 4 & splat(15)
    for j in 0..min(3, i - -2) {
      store C[i + j] = hsum(a) + load.f32 C[i - (j - 1)]
    }
    if local_id.x < 4 {
      store C[group_id.y] = tof32(load.u32 W[0])
      store C[group_id.x] = bitsf32(load.u32 W[1] >> 4 & 15 | 1258291200) - 8388616.0
      a = fma(splat(0.5), erf(a), relu(a))
      store C[i] = erf(1.5) + relu(-0.25)
      barrier
    }
  }
}
";
        let f = parse(src).unwrap();
        assert_eq!(print(&f), src);
        // Reprinting the reparsed text is a fixed point.
        assert_eq!(print(&parse(&print(&f)).unwrap()), print(&f));
    }

    #[test]
    fn errors_say_where() {
        let e = parse("kernel k {\n  var i: i32\n  j = 1\n}").unwrap_err();
        assert_eq!((e.line, e.col), (3, 3));
        assert!(e.message.contains("unknown variable `j`"), "{e}");
        let e = parse("kernel k {\n  buf A: f64[4] param 0\n}").unwrap_err();
        assert!(e.message.contains("f64"), "{e}");
        assert!(parse("kernel k { var i: i32 i = 1").is_err());
    }
}
