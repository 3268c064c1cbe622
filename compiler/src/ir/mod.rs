//! The tensor loop IR: the common language between schedules and backends.
//!
//! A [`Func`] is plain data: arenas of buffers, variables and expressions,
//! addressed by typed [`Handle`]s, and a tree of statements. It is what a
//! schedule becomes (see `gen`) and what the Wasm and WGSL backends read.
//!
//! # Rules of the IR
//! - Buffers are arrays of 32-bit elements (`f32` or `u32`), or of `f16` on
//!   the GPU, which load and store as `f32` values. A `param` buffer
//!   is a kernel argument; a `scratch` buffer is private to one invocation (a
//!   second, internal memory in Wasm; a `var<private>` array in WGSL); a
//!   `workgroup` buffer is shared by a GPU workgroup; a `global` buffer (GPU
//!   only) is the host's scratch storage, shared by all workgroups and passes.
//! - Indices count elements, not bytes. A vector load or store at index `i`
//!   touches elements `i..i+4`.
//! - Variables are typed `i32`, `f32`, `f32x4` or `u32x4` and must be assigned
//!   before they are read. Loop variables are `i32` and read-only in their body.
//! - `for v in lo..hi step s` runs `v = lo, lo+s, ...` while `v < hi`. An
//!   `unroll`ed loop must have constant bounds; backends replicate its body.
//! - Binary operators are typed by their operands: `+ - *` on `i32`, `f32`,
//!   `f32x4`, and `+` on `u32x4` (lane-wise `i32`); `/ % min <` on `i32`;
//!   `>> &` on `i32` and `u32x4`. Integer arithmetic wraps like Wasm's `i32`
//!   and WGSL's `i32`. CPU only: `/` and `max` also on `f32` and `f32x4`
//!   (IEEE division; `max` as Wasm's, NaN if either is).
//! - `dot16(a, b)` (pairwise products of signed 16-bit halves) and
//!   `stof32(x)` (signed lanes to `f32x4`) serve `matmul_i16`; like the GPU
//!   builtins below, `dot16` is for one backend only (Wasm), as are
//!   `toi32(x)` (an `f32` to the `i32` it truncates to, saturating) and the
//!   float functions `abs` and `round` (to the nearest integer, ties to
//!   even), with which the GGUF kernels quantise their activations.
//! - `erf(x)` and `relu(x)` take and give `f32` or `f32x4` (see [`UnOp`]);
//!   so do `rsqrt(x)`, `silu(x)`, `exp(x)` and `recip(x)`, which are for
//!   the GPU backend only. `max(a, b)` of floats is for both backends.
//! - GPU builtins (`local_id.x`, `group_id.y`, ...), `barrier` and the
//!   subgroup shuffle `shufflexor(x, mask)` are valid only for the WGSL backend.
//!
//! The printed form (see [`print`](mod@print)) is the test language of the filetests;
//! [`parse`] reads it back, and [`verify`] checks every rule above, including
//! that every constant-bounded index stays inside its buffer.

pub mod parse;
pub mod print;
pub mod verify;

use std::fmt;
use std::marker::PhantomData;

/// A typed index into an [`Arena`].
pub struct Handle<T> {
    index: u32,
    _marker: PhantomData<fn() -> T>,
}

impl<T> Handle<T> {
    fn new(index: usize) -> Self {
        Handle { index: index as u32, _marker: PhantomData }
    }
    pub fn index(self) -> usize {
        self.index as usize
    }
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}
impl<T> PartialEq for Handle<T> {
    fn eq(&self, o: &Self) -> bool {
        self.index == o.index
    }
}
impl<T> Eq for Handle<T> {}
impl<T> std::hash::Hash for Handle<T> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.index.hash(h)
    }
}
impl<T> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.index)
    }
}

/// A growable store of `T`s addressed by [`Handle<T>`].
#[derive(Debug, Clone)]
pub struct Arena<T> {
    items: Vec<T>,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Arena { items: Vec::new() }
    }
}

impl<T> Arena<T> {
    pub fn push(&mut self, item: T) -> Handle<T> {
        self.items.push(item);
        Handle::new(self.items.len() - 1)
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn get(&self, h: Handle<T>) -> Option<&T> {
        self.items.get(h.index())
    }
    pub fn get_mut(&mut self, h: Handle<T>) -> Option<&mut T> {
        self.items.get_mut(h.index())
    }
    pub fn iter(&self) -> impl Iterator<Item = (Handle<T>, &T)> {
        self.items.iter().enumerate().map(|(i, t)| (Handle::new(i), t))
    }
    pub fn clear(&mut self) {
        self.items.clear()
    }
}

impl<T> std::ops::Index<Handle<T>> for Arena<T> {
    type Output = T;
    fn index(&self, h: Handle<T>) -> &T {
        &self.items[h.index()]
    }
}

/// Value types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    I32,
    F32,
    F32x4,
    U32x4,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::I32 => "i32",
            Ty::F32 => "f32",
            Ty::F32x4 => "f32x4",
            Ty::U32x4 => "u32x4",
        }
    }
    pub fn lanes(self) -> u32 {
        match self {
            Ty::I32 | Ty::F32 => 1,
            Ty::F32x4 | Ty::U32x4 => 4,
        }
    }
}

/// Element type of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    F32,
    U32,
    /// IEEE binary16, GPU only. It holds float values like an `f32`
    /// buffer: loads of `f32`/`f32x4` widen each element exactly, stores
    /// round each lane to the nearest f16 (ties to even).
    F16,
}

impl Elem {
    /// Whether a load or store of `ty` may touch a buffer of this type.
    pub fn holds(self, ty: LoadTy) -> bool {
        ty.elem() == self || (self == Elem::F16 && ty.elem() == Elem::F32)
    }
}

/// Where a buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// Kernel argument number `n` (ABI order).
    Param(u32),
    /// Private to one invocation.
    Scratch,
    /// Shared by a GPU workgroup.
    Workgroup,
    /// GPU only: the host's scratch storage buffer (`@group(1)
    /// @binding(0)`), shared by every workgroup and by every pass of a
    /// kernel with several (see [`crate::wgsl::Pass`]); its contents do not
    /// outlive a call.
    Global,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub elem: Elem,
    pub len: u32,
    pub space: Space,
    /// Whether the kernel writes this buffer.
    pub writable: bool,
    /// Workgroup buffers only: elements per row when the GPU backend should
    /// declare the buffer two-dimensional (0: flat). Element `i` is the
    /// same element either way (row `i / row`, column `i % row`); the
    /// backend then indexes a row by a constant wherever it can prove that
    /// an access stays within one row, so that the runtime bounds check on
    /// the dynamic column index is the same for every row a thread reads
    /// (see [`crate::wgsl`]).
    pub row: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Var {
    pub name: String,
    pub ty: Ty,
}

/// What a load reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadTy {
    F32,
    F32x4,
    /// One `u32` element, as an `i32` value.
    U32,
    U32x4,
}

impl LoadTy {
    pub fn value_ty(self) -> Ty {
        match self {
            LoadTy::F32 => Ty::F32,
            LoadTy::F32x4 => Ty::F32x4,
            LoadTy::U32 => Ty::I32,
            LoadTy::U32x4 => Ty::U32x4,
        }
    }
    pub fn elem(self) -> Elem {
        match self {
            LoadTy::F32 | LoadTy::F32x4 => Elem::F32,
            LoadTy::U32 | LoadTy::U32x4 => Elem::U32,
        }
    }
    pub fn lanes(self) -> u32 {
        self.value_ty().lanes()
    }
    pub fn name(self) -> &'static str {
        match self {
            LoadTy::F32 => "f32",
            LoadTy::F32x4 => "f32x4",
            LoadTy::U32 => "u32",
            LoadTy::U32x4 => "u32x4",
        }
    }
    pub const ALL: [LoadTy; 4] = [LoadTy::F32, LoadTy::F32x4, LoadTy::U32, LoadTy::U32x4];
}

/// Binary operators. See the module docs for which types each accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Shr,
    And,
    /// Bitwise or, on `i32` only.
    Or,
    Lt,
    /// The larger of two `f32`s or `f32x4`s, lane-wise: on the CPU NaN if
    /// either is (Wasm's `f32.max`), on the GPU WGSL's `max` (which leaves
    /// NaN to the implementation; kernels take it of finite values only).
    Max,
}

impl BinOp {
    /// The operator's symbol; `min` prints as a call.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::Shr => ">>",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Lt => "<",
        }
    }
    /// Binding strength for the printer and parser (higher binds tighter).
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Lt => 1,
            BinOp::Or => 2,
            BinOp::And => 3,
            BinOp::Shr => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
            BinOp::Min | BinOp::Max => 9,
        }
    }
    /// `a op b` on `i32` values with the IR's semantics (wrapping, `>>`
    /// logical, `<` as 0 or 1); `None` for division or remainder by zero.
    pub fn eval_i32(self, a: i32, b: i32) -> Option<i32> {
        match self {
            BinOp::Add => Some(a.wrapping_add(b)),
            BinOp::Sub => Some(a.wrapping_sub(b)),
            BinOp::Mul => Some(a.wrapping_mul(b)),
            BinOp::Div if b != 0 => Some(a.wrapping_div(b)),
            BinOp::Rem if b != 0 => Some(a.wrapping_rem(b)),
            BinOp::Min => Some(a.min(b)),
            BinOp::Shr => Some(((a as u32) >> (b as u32 & 31)) as i32),
            BinOp::And => Some(a & b),
            BinOp::Or => Some(a | b),
            BinOp::Lt => Some((a < b) as i32),
            BinOp::Div | BinOp::Rem | BinOp::Max => None,
        }
    }
    pub const INFIX: [BinOp; 9] =
        [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem, BinOp::Shr, BinOp::And, BinOp::Or, BinOp::Lt];
}

/// Unary float functions, on `f32` or `f32x4`, lane-wise. Backends expand
/// `erf` and `relu` into plain arithmetic: neither Wasm nor WGSL has an erf.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// The error function to about f32 rounding: [`erf_f32`]'s sequence.
    Erf,
    /// `max(x, 0)`.
    Relu,
    /// CPU only: `|x|` (the sign bit cleared).
    Abs,
    /// CPU only: the nearest integer, ties to even (Wasm's `f32.nearest`).
    Round,
    /// GPU only: `1 / √x` (a division by WGSL's `sqrt`, as the decoder's
    /// fixed RMSNorm computes it).
    Rsqrt,
    /// GPU only: `silu(x) = x / (1 + e^min(−x, 88))` (WGSL's `exp`, clamped
    /// as the decoder's fixed SwiGLU clamps it).
    Silu,
    /// GPU only: `e^x` (WGSL's `exp`).
    Exp,
    /// GPU only: `1 / x` (a WGSL division).
    Recip,
}

impl UnOp {
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Erf => "erf",
            UnOp::Relu => "relu",
            UnOp::Abs => "abs",
            UnOp::Round => "round",
            UnOp::Rsqrt => "rsqrt",
            UnOp::Silu => "silu",
            UnOp::Exp => "exp",
            UnOp::Recip => "recip",
        }
    }
    pub const ALL: [UnOp; 8] = [UnOp::Erf, UnOp::Relu, UnOp::Abs, UnOp::Round, UnOp::Rsqrt, UnOp::Silu, UnOp::Exp, UnOp::Recip];
    /// Whether only the GPU backend has it (the decoder step's epilogues).
    pub fn gpu_only(self) -> bool {
        matches!(self, UnOp::Rsqrt | UnOp::Silu | UnOp::Exp | UnOp::Recip)
    }
    /// Whether only the CPU backend has it.
    pub fn cpu_only(self) -> bool {
        matches!(self, UnOp::Abs | UnOp::Round)
    }
}

/// Which lanes [`Expr::ExtendS`] widens: the low or high eight of sixteen
/// `i8` lanes into eight `i16`, or the low or high four of eight `i16` lanes
/// into four `i32` (Wasm's `i16x8.extend_*_i8x16_s` and
/// `i32x4.extend_*_i16x8_s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extend {
    I8Low,
    I8High,
    I16Low,
    I16High,
}

impl Extend {
    pub fn name(self) -> &'static str {
        match self {
            Extend::I8Low => "ext8lo",
            Extend::I8High => "ext8hi",
            Extend::I16Low => "ext16lo",
            Extend::I16High => "ext16hi",
        }
    }
    pub const ALL: [Extend; 4] = [Extend::I8Low, Extend::I8High, Extend::I16Low, Extend::I16High];
}

/// Where [`erf_f32`] clamps its argument: erf(±4) is ±1 in f32.
pub const ERF_CLAMP: f32 = 4.0;
/// Odd numerator coefficients of [`erf_f32`], highest power first
/// (x¹³ … x¹): the rational minimax approximation of Eigen's and XLA's f32
/// erf.
#[allow(clippy::excessive_precision)]
pub const ERF_P: [f32; 7] = [
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
];
/// Even denominator coefficients of [`erf_f32`], highest power first (x⁸ … x⁰).
#[allow(clippy::excessive_precision)]
pub const ERF_Q: [f32; 5] =
    [-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03, -1.42647390514189e-02];

/// The erf every backend computes, step for step:
/// `x = clamp(a, −4, 4)`, `p = x·P(x²)`, `q = Q(x²)` by Horner's rule
/// (one multiply and one add per step, unfused), then `p / q`.
pub fn erf_f32(a: f32) -> f32 {
    // clamp, not min then max: a NaN stays NaN, as in Wasm and WGSL.
    let x = a.clamp(-ERF_CLAMP, ERF_CLAMP);
    let x2 = x * x;
    let mut p = ERF_P[0];
    for c in &ERF_P[1..] {
        p = p * x2 + c;
    }
    let mut q = ERF_Q[0];
    for c in &ERF_Q[1..] {
        q = q * x2 + c;
    }
    (p * x) / q
}

/// GPU invocation indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    LocalId(u8),
    GroupId(u8),
}

impl Builtin {
    pub fn name(self) -> String {
        let (base, d) = match self {
            Builtin::LocalId(d) => ("local_id", d),
            Builtin::GroupId(d) => ("group_id", d),
        };
        format!("{base}.{}", ["x", "y", "z"][d as usize])
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    I32(i32),
    F32(f32),
    Var(Handle<Var>),
    Bin(BinOp, Handle<Expr>, Handle<Expr>),
    /// `a * b + c`, on `f32` or `f32x4`. Backends may fuse it or not.
    Fma(Handle<Expr>, Handle<Expr>, Handle<Expr>),
    /// `f32 → f32x4` or `i32 → u32x4`.
    Splat(Handle<Expr>),
    Load {
        ty: LoadTy,
        buf: Handle<Buffer>,
        index: Handle<Expr>,
    },
    /// Unsigned integer to float: `i32 → f32` or `u32x4 → f32x4`.
    ToF32(Handle<Expr>),
    /// The bits of an `i32` read as an `f32` (no conversion).
    FromBits(Handle<Expr>),
    /// Signed integer to float, lane-wise: `u32x4 → f32x4`, each lane read
    /// as a two's-complement `i32`.
    SToF32(Handle<Expr>),
    /// CPU only: `f32 → i32`, truncated toward zero and saturated to the
    /// `i32` range, NaN to 0 (Wasm's `i32.trunc_sat_f32_s`).
    ToI32(Handle<Expr>),
    /// CPU only: the pairwise dot product of two `u32x4`s read as eight
    /// signed 16-bit lanes each: lane `i` of the result is
    /// `a[2i]·b[2i] + a[2i+1]·b[2i+1]` (an `i32`, wrapping).
    DotI16(Handle<Expr>, Handle<Expr>),
    /// CPU only: half of a `u32x4`'s narrow signed lanes, sign-extended to
    /// twice their width (a `u32x4`): [`Extend`] says which.
    ExtendS(Handle<Expr>, Extend),
    /// Sum of the four lanes of an `f32x4`.
    HSum(Handle<Expr>),
    /// Lane `n` (0..4) of an `f32x4` (an `f32`) or of a `u32x4` (an `i32`).
    Lane(Handle<Expr>, u8),
    Builtin(Builtin),
    /// A unary float function ([`UnOp`]) of an `f32` or `f32x4`.
    Un(UnOp, Handle<Expr>),
    /// GPU only: the `f32` value of the invocation whose subgroup lane is
    /// this one's xor the constant mask (1 to 64). Every invocation of the
    /// workgroup must reach it (it sits in uniform control flow).
    ShuffleXor(Handle<Expr>, Handle<Expr>),
    /// GPU only: four `f32`s as one `f32x4` (lane `i` is operand `i`).
    Compose([Handle<Expr>; 4]),
}

impl Expr {
    /// The expressions this one reads (buffer and variable handles aside),
    /// without allocating: `for o in e.operands().into_iter().flatten()`.
    pub fn operands(&self) -> [Option<Handle<Expr>>; 4] {
        match *self {
            Expr::Bin(_, a, b) | Expr::ShuffleXor(a, b) | Expr::DotI16(a, b) => [Some(a), Some(b), None, None],
            Expr::Fma(a, b, c) => [Some(a), Some(b), Some(c), None],
            Expr::Compose(lanes) => lanes.map(Some),
            Expr::Splat(a)
            | Expr::ToF32(a)
            | Expr::SToF32(a)
            | Expr::ToI32(a)
            | Expr::FromBits(a)
            | Expr::HSum(a)
            | Expr::Lane(a, _)
            | Expr::Un(_, a)
            | Expr::ExtendS(a, _) => [Some(a), None, None, None],
            Expr::Load { index, .. } => [Some(index), None, None, None],
            Expr::Var(_) | Expr::I32(_) | Expr::F32(_) | Expr::Builtin(_) => [None; 4],
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    For(For),
    Set { var: Handle<Var>, value: Handle<Expr> },
    Store { buf: Handle<Buffer>, index: Handle<Expr>, value: Handle<Expr> },
    If { cond: Handle<Expr>, body: Vec<Stmt> },
    Barrier,
}

#[derive(Clone, Debug, PartialEq)]
pub struct For {
    pub var: Handle<Var>,
    pub lo: Handle<Expr>,
    pub hi: Handle<Expr>,
    pub step: u32,
    pub unroll: bool,
    pub body: Vec<Stmt>,
}

/// A kernel in the loop IR.
#[derive(Clone, Debug, Default)]
pub struct Func {
    pub name: String,
    pub buffers: Arena<Buffer>,
    pub vars: Arena<Var>,
    pub exprs: Arena<Expr>,
    pub body: Vec<Stmt>,
}

impl Func {
    pub fn new(name: impl Into<String>) -> Func {
        Func { name: name.into(), ..Func::default() }
    }

    pub fn buffer(&mut self, name: &str, elem: Elem, len: u32, space: Space, writable: bool) -> Handle<Buffer> {
        self.buffers.push(Buffer { name: name.to_string(), elem, len, space, writable, row: 0 })
    }

    /// Declares workgroup buffer `b` as rows of `row` elements ([`Buffer::row`]).
    pub fn set_row(&mut self, b: Handle<Buffer>, row: u32) {
        if let Some(buf) = self.buffers.get_mut(b) {
            buf.row = row;
        }
    }

    pub fn var(&mut self, name: impl Into<String>, ty: Ty) -> Handle<Var> {
        self.vars.push(Var { name: name.into(), ty })
    }

    /// Byte offset of each scratch buffer in the scratch area (16-byte aligned,
    /// in declaration order) and the area's total size.
    pub fn scratch_layout(&self) -> (Vec<u32>, u32) {
        let mut base = vec![0u32; self.buffers.len()];
        let mut total = 0u32;
        for (h, b) in self.buffers.iter() {
            if b.space == Space::Scratch {
                base[h.index()] = total;
                total += (b.len * 4).next_multiple_of(16);
            }
        }
        (base, total)
    }

    /// The param buffers in ABI order.
    pub fn params(&self) -> Vec<Handle<Buffer>> {
        let mut p: Vec<(u32, Handle<Buffer>)> = self
            .buffers
            .iter()
            .filter_map(|(h, b)| match b.space {
                Space::Param(n) => Some((n, h)),
                _ => None,
            })
            .collect();
        p.sort_by_key(|(n, _)| *n);
        p.into_iter().map(|(_, h)| h).collect()
    }

    // Expression builders. They keep generator code short and readable.
    pub fn i32(&mut self, v: i32) -> Handle<Expr> {
        self.exprs.push(Expr::I32(v))
    }
    pub fn f32(&mut self, v: f32) -> Handle<Expr> {
        self.exprs.push(Expr::F32(v))
    }
    pub fn get(&mut self, v: Handle<Var>) -> Handle<Expr> {
        self.exprs.push(Expr::Var(v))
    }
    pub fn bin(&mut self, op: BinOp, a: Handle<Expr>, b: Handle<Expr>) -> Handle<Expr> {
        self.exprs.push(Expr::Bin(op, a, b))
    }
    pub fn add(&mut self, a: Handle<Expr>, b: Handle<Expr>) -> Handle<Expr> {
        self.bin(BinOp::Add, a, b)
    }
    pub fn sub(&mut self, a: Handle<Expr>, b: Handle<Expr>) -> Handle<Expr> {
        self.bin(BinOp::Sub, a, b)
    }
    pub fn mul(&mut self, a: Handle<Expr>, b: Handle<Expr>) -> Handle<Expr> {
        self.bin(BinOp::Mul, a, b)
    }
    /// `a + c` for a constant `c`, skipping the add when `c` is zero.
    pub fn add_c(&mut self, a: Handle<Expr>, c: i64) -> Handle<Expr> {
        if c == 0 {
            return a;
        }
        let c = self.i32(c as i32);
        self.add(a, c)
    }
    /// `a * c` for a constant `c`, skipping the multiply when `c` is one.
    pub fn mul_c(&mut self, a: Handle<Expr>, c: i64) -> Handle<Expr> {
        if c == 1 {
            return a;
        }
        let c = self.i32(c as i32);
        self.mul(a, c)
    }
    pub fn fma(&mut self, a: Handle<Expr>, b: Handle<Expr>, c: Handle<Expr>) -> Handle<Expr> {
        self.exprs.push(Expr::Fma(a, b, c))
    }
    pub fn splat(&mut self, a: Handle<Expr>) -> Handle<Expr> {
        self.exprs.push(Expr::Splat(a))
    }
    pub fn un(&mut self, op: UnOp, a: Handle<Expr>) -> Handle<Expr> {
        self.exprs.push(Expr::Un(op, a))
    }
    pub fn load(&mut self, ty: LoadTy, buf: Handle<Buffer>, index: Handle<Expr>) -> Handle<Expr> {
        self.exprs.push(Expr::Load { ty, buf, index })
    }
}

/// The constant value of an `i32` expression built only from constants, if it is one.
pub fn const_i32(f: &Func, e: Handle<Expr>) -> Option<i32> {
    const_i32_with(f, &[], e)
}

/// [`const_i32`], where `consts` gives the value some variables hold (the
/// counters of unrolled loops, while a backend replicates their bodies).
pub fn const_i32_with(f: &Func, consts: &[Option<i32>], e: Handle<Expr>) -> Option<i32> {
    match f.exprs[e] {
        Expr::I32(v) => Some(v),
        Expr::Var(v) => consts.get(v.index()).copied().flatten(),
        Expr::Bin(op, a, b) => {
            let (a, b) = (const_i32_with(f, consts, a)?, const_i32_with(f, consts, b)?);
            op.eval_i32(a, b)
        }
        _ => None,
    }
}
