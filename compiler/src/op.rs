//! The tensor operations webtune compiles, their shapes and their arguments.
//!
//! Every op works on row-major `f32` tensors (plus packed `u32` words for the
//! 4-bit weights of `matmul_q4` and `matmul_q4_1`, and the signed bytes of
//! `matmul_q8_0`: the GGUF block formats Q4_0, Q4_1 and Q8_0 with their f16
//! scales widened to f32). The argument order defined here is the kernel
//! ABI: Wasm kernels take the byte offsets of the arguments in this order, WGSL
//! kernels bind them at `@binding(i)` in this order. Inputs come first, the
//! output last.
//!
//! # Fused epilogues
//! `matmul` and `batch_matmul` take an optional [`Epilogue`], named by a
//! canonical suffix list on the op's name, so that an op is still one string
//! on the wire: `matmul+bias`, `matmul+bias+gelu`, `batch_matmul+residual`,
//! `matmul+bias+gelu+residual`. The kernel computes
//! `C = act(A·B + bias) + R`: `bias` (`f32[N]`) is added to every row, `act`
//! is exact GELU `0.5·x·(1+erf(x/√2))` or ReLU `max(x, 0)`, and `R` (the
//! residual, shaped like C) is added last. Suffixes appear in that order
//! (`bias`, then `gelu` or `relu`, then `residual`), each at most once; the
//! new arguments come after A and B in the same order (A, B, bias, R, C).
//!
//! The block-quantised ops (`matmul_q4`, `matmul_q4_1`, `matmul_q8_0`) take
//! their own epilogues, for a decoder's step (WGSL only, f32 only, the
//! matrix-vector family): `+rms_norm` normalises each row of A first
//! (`A[m]·r_m ⊙ G`, `r_m = 1/√(mean(A[m]²) + E)`), `+swiglu` multiplies by
//! twice N rows of weights and keeps `silu(gate)·up` (rows `n` and `N + n`),
//! and `+residual` adds R: `C = glu(norm(A)·Wᵀ) + R`, in that order
//! (`matmul_q4_1+rms_norm+swiglu`, `matmul_q8_0+residual`). Their arguments
//! come after the weights: G (`f32[K]`) and E (`f32[1]`), then R.
//!
//! `+merge` (block-quantised ops, first, never with `+rms_norm`) makes A
//! the merge of a split attention's partial results, so that the product
//! after an attention needs no merge of its own: the shape is
//! `M,K,N,H,C` (H heads of D = K/H values, each split into C parts), the
//! argument A becomes `P` (`f32[M, H, C, D]`: each part's weighted values,
//! relative to its largest score), and `PM`, `PL` (`f32[M, H, C]`: each
//! part's largest score and its sum of e^(score − PM)) come where G and E
//! would. Row m's A is `A[m, h·D + d] = Σ_c w_c·P[m,h,c,d] / Σ_c w_c·PL[m,h,c]`
//! with `w_c = e^(PM[m,h,c] − max_c PM[m,h,c])`; an empty part is
//! `PM = −3.4e38, PL = 0, P = 0`.
//!
//! # Half precision
//! A last suffix `+f16` stores the op's float arguments as IEEE binary16
//! (`matmul+f16`, `matmul+bias+gelu+f16`, `matmul_q4+f16`): A, B, bias, R
//! and C of matmul and batch_matmul, and A, S and C of matmul_q4 (its packed
//! W stays `u32`). Kernels load them into f32 registers, accumulate in f32 and
//! round the result to f16 once, on the store. f16 ops run on WGSL only, on
//! adapters with the `shader-f16` feature; matmul_i16 has no f16 form.

use std::fmt;
use std::str::FromStr;

/// Largest number of elements any one argument may have. 2^28 f32 values is
/// 1 GiB: past that a Wasm kernel cannot address its arguments in a 4 GiB
/// memory and a WebGPU buffer exceeds every browser's binding limit.
pub const MAX_ARG_ELEMS: u64 = 1 << 28;

/// The kind of tensor computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types)] // MatmulQ4_1 and MatmulQ8_0 spell the GGUF formats
pub enum OpKind {
    /// `C[M,N] = A[M,K] · B[K,N]`, shape `M,K,N`.
    Matmul,
    /// `C[b] = A[b] · B[b]`, shape `B,M,K,N`.
    BatchMatmul,
    /// `C[M,N] = A[M,K] · dequant(W)ᵀ`, shape `M,K,N`, `K % 32 == 0`.
    MatmulQ4,
    /// `C[M,N] = SA[m]·SB[n]·Σₖ A[m,k]·B[k,n]` on 16-bit integers packed in
    /// pairs, shape `M,K,N`, `K` even and `N % 4 == 0` (see [`Op::args`]).
    MatmulI16,
    /// GGUF Q4_1: `C[M,N] = A[M,K] · (D·q + Mn)ᵀ`, shape `M,K,N`,
    /// `K % 32 == 0` (see [`Op::args`]).
    MatmulQ4_1,
    /// GGUF Q8_0: `C[M,N] = A[M,K] · (D·q)ᵀ` on signed bytes, shape `M,K,N`,
    /// `K % 32 == 0` (see [`Op::args`]).
    MatmulQ8_0,
}

impl OpKind {
    pub const ALL: [OpKind; 6] =
        [OpKind::Matmul, OpKind::BatchMatmul, OpKind::MatmulQ4, OpKind::MatmulI16, OpKind::MatmulQ4_1, OpKind::MatmulQ8_0];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Matmul => "matmul",
            OpKind::BatchMatmul => "batch_matmul",
            OpKind::MatmulQ4 => "matmul_q4",
            OpKind::MatmulI16 => "matmul_i16",
            OpKind::MatmulQ4_1 => "matmul_q4_1",
            OpKind::MatmulQ8_0 => "matmul_q8_0",
        }
    }

    /// Whether the compiler has kernels of this op for `target`:
    /// `matmul_i16` is Wasm only (WGSL has no 16-bit integer dot product).
    pub fn runs_on(self, target: crate::Target) -> bool {
        self != OpKind::MatmulI16 || target == crate::Target::Wasm
    }

    /// Whether the op has an `+f16` form: matmul, batch_matmul and
    /// matmul_q4 do; matmul_i16, matmul_q4_1 and matmul_q8_0 do not.
    pub fn has_f16(self) -> bool {
        !matches!(self, OpKind::MatmulI16 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0)
    }

    /// The ops over GGUF-style blocks of 32 weights with per-block scales
    /// (`matmul_q4`, `matmul_q4_1`, `matmul_q8_0`): K is a multiple of 32,
    /// and they take no epilogue.
    pub fn block_quantized(self) -> bool {
        matches!(self, OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0)
    }

    /// Values of K in one packed `u32` word of W: 8 nibbles (`matmul_q4`,
    /// `matmul_q4_1`), 4 signed bytes (`matmul_q8_0`); 1 for the other ops.
    pub fn values_per_word(self) -> u32 {
        match self {
            OpKind::MatmulQ4 | OpKind::MatmulQ4_1 => 8,
            OpKind::MatmulQ8_0 => 4,
            _ => 1,
        }
    }

    /// Names of the shape's dimensions, in the order the shape lists them.
    pub fn dim_names(self) -> &'static [&'static str] {
        match self {
            OpKind::Matmul | OpKind::MatmulQ4 | OpKind::MatmulI16 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0 => &["M", "K", "N"],
            OpKind::BatchMatmul => &["B", "M", "K", "N"],
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for OpKind {
    type Err = OpError;
    fn from_str(s: &str) -> Result<Self, OpError> {
        OpKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| OpError::UnknownOp(s.to_string()))
    }
}

/// The activation of an [`Epilogue`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Activation {
    #[default]
    None,
    /// `0.5·x·(1 + erf(x/√2))`, erf to f32 rounding.
    Gelu,
    /// `max(x, 0)`.
    Relu,
}

/// What a matmul does to each output element after the reduction, in
/// registers, before the store: `act(acc + bias[n]) + R[m, n]`; and, for
/// the block-quantised ops, to A before it (`norm`) and to pairs of
/// outputs (`glu`): `glu(norm(A)·Wᵀ) + R`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Epilogue {
    pub bias: bool,
    pub act: Activation,
    pub residual: bool,
    /// `+rms_norm` (block-quantised ops): each row of A is used as
    /// `A[m]·r_m ⊙ G`, `r_m = 1/√(mean(A[m]²) + E)`.
    pub norm: bool,
    /// `+swiglu` (block-quantised ops): W holds 2N rows and
    /// `C[m, n] = silu(g)·u` of the products with rows `n` (g) and `N + n` (u).
    pub glu: bool,
    /// `+merge` (block-quantised ops): A is merged from a split attention's
    /// parts `P`, `PM`, `PL` (the module docs), shape `M,K,N,H,C`.
    pub merge: bool,
}

impl Epilogue {
    /// No epilogue: the plain op.
    pub const NONE: Epilogue = Epilogue { bias: false, act: Activation::None, residual: false, norm: false, glu: false, merge: false };

    pub fn is_none(self) -> bool {
        self == Epilogue::NONE
    }

    /// The canonical suffix, e.g. `+bias+gelu+residual` or
    /// `+rms_norm+swiglu` (empty for none).
    pub fn suffix(self) -> String {
        let mut s = String::new();
        if self.merge {
            s.push_str("+merge");
        }
        if self.norm {
            s.push_str("+rms_norm");
        }
        if self.bias {
            s.push_str("+bias");
        }
        match self.act {
            Activation::None => {}
            Activation::Gelu => s.push_str("+gelu"),
            Activation::Relu => s.push_str("+relu"),
        }
        if self.glu {
            s.push_str("+swiglu");
        }
        if self.residual {
            s.push_str("+residual");
        }
        s
    }

    /// Every epilogue of matmul, batch_matmul and matmul_i16, the plain op
    /// first, in the order [`Epilogue::suffix`] sorts.
    pub fn all() -> Vec<Epilogue> {
        let mut out = Vec::new();
        for bias in [false, true] {
            for act in [Activation::None, Activation::Gelu, Activation::Relu] {
                for residual in [false, true] {
                    out.push(Epilogue { bias, act, residual, ..Epilogue::NONE });
                }
            }
        }
        out
    }

    /// Every epilogue of the block-quantised ops (`+rms_norm`, `+swiglu`,
    /// `+residual`), the plain op first.
    pub fn all_block() -> Vec<Epilogue> {
        let mut out = Vec::new();
        for norm in [false, true] {
            for glu in [false, true] {
                for residual in [false, true] {
                    out.push(Epilogue { norm, glu, residual, ..Epilogue::NONE });
                }
            }
        }
        out
    }

    /// Whether this is an epilogue of the block-quantised ops: no bias and
    /// no activation but SwiGLU's.
    pub fn is_block(self) -> bool {
        !self.bias && self.act == Activation::None
    }

    /// Parses the suffix list after an op's base name (`["bias", "gelu"]`).
    fn parse(name: &str, parts: &[&str]) -> Result<Epilogue, OpError> {
        let mut e = Epilogue::NONE;
        // Position of the last suffix seen: 1 merge, 2 rms_norm, 3 bias, 4
        // activation, 5 residual.
        let mut last = 0;
        for &p in parts {
            let rank = match p {
                "merge" => 1,
                "rms_norm" => 2,
                "bias" => 3,
                "gelu" | "relu" | "swiglu" => 4,
                "residual" => 5,
                _ => return Err(OpError::BadEpilogue(name.to_string())),
            };
            if rank <= last {
                return Err(OpError::BadEpilogue(name.to_string()));
            }
            last = rank;
            match p {
                "merge" => e.merge = true,
                "rms_norm" => e.norm = true,
                "bias" => e.bias = true,
                "gelu" => e.act = Activation::Gelu,
                "relu" => e.act = Activation::Relu,
                "swiglu" => e.glu = true,
                _ => e.residual = true,
            }
        }
        Ok(e)
    }

    /// Whether `kind` takes this epilogue (and float type `dtype`): the
    /// block-quantised ops take [`Epilogue::all_block`]'s, in f32 only;
    /// the others [`Epilogue::all`]'s.
    fn fits(self, kind: OpKind, dtype: Dtype) -> Result<(), OpError> {
        if kind.block_quantized() {
            if !self.is_block() {
                return Err(OpError::NoEpilogue(kind));
            }
            if !self.is_none() && dtype == Dtype::F16 {
                return Err(OpError::BlockEpilogueF16(kind));
            }
            if self.merge && self.norm {
                return Err(OpError::MergeNorm(kind));
            }
        } else if self.norm || self.glu || self.merge {
            return Err(OpError::NotBlock(kind));
        }
        Ok(())
    }
}

/// Splits a full op name such as `matmul+bias+gelu+f16` into its base kind,
/// epilogue and float type.
pub fn parse_name(name: &str) -> Result<(OpKind, Epilogue, Dtype), OpError> {
    let name = name.trim();
    let mut parts = name.split('+');
    let base: OpKind = parts.next().unwrap_or_default().parse().map_err(|_| OpError::UnknownOp(name.to_string()))?;
    let mut rest: Vec<&str> = parts.collect();
    let dtype = if rest.last() == Some(&"f16") {
        rest.pop();
        Dtype::F16
    } else {
        Dtype::F32
    };
    let e = Epilogue::parse(name, &rest)?;
    e.fits(base, Dtype::F32)?;
    if dtype == Dtype::F16 && !base.has_f16() {
        return Err(OpError::NoF16(base));
    }
    e.fits(base, dtype)?;
    Ok((base, e, dtype))
}

/// Element type of a kernel argument; an op's float type is `F32` or `F16`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    #[default]
    F32,
    /// IEEE binary16, two bytes.
    F16,
    U32,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::U32 => "u32",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> u64 {
        if self == Dtype::F16 { 2 } else { 4 }
    }
    /// The op's float type from `--dtype`: `f32` or `f16`.
    pub fn parse_float(s: &str) -> Result<Dtype, OpError> {
        match s.trim() {
            "f32" => Ok(Dtype::F32),
            "f16" => Ok(Dtype::F16),
            other => Err(OpError::BadDtype(other.chars().take(24).collect())),
        }
    }
}

/// One argument of a kernel: its name, element type and tensor shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgSpec {
    pub name: &'static str,
    pub dtype: Dtype,
    pub shape: Vec<u32>,
}

impl ArgSpec {
    pub fn elems(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }
    pub fn bytes(&self) -> u64 {
        self.elems() * self.dtype.size()
    }
}

/// Why an op or shape was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error("unknown op `{0}`: expected one of matmul, batch_matmul, matmul_q4, matmul_i16, matmul_q4_1, matmul_q8_0")]
    UnknownOp(String),
    #[error(
        "op `{0}`: an epilogue is `+bias`, then `+gelu` or `+relu`, then `+residual`, each at most once and in that order, e.g. matmul+bias+gelu (block-quantised ops: `+merge` or `+rms_norm`, then `+swiglu`, then `+residual`); `+f16` comes last"
    )]
    BadEpilogue(String),
    #[error(
        "{0} takes no epilogue but `+merge`, `+rms_norm`, `+swiglu` and `+residual`: `+bias`, `+gelu` and `+relu` are for only matmul, batch_matmul and matmul_i16"
    )]
    NoEpilogue(OpKind),
    #[error("{0} takes no `+merge`, `+rms_norm` or `+swiglu`: only matmul_q4, matmul_q4_1 and matmul_q8_0 do")]
    NotBlock(OpKind),
    #[error("{0}: `+merge` and `+rms_norm` do not go together (the merged rows are not normalised)")]
    MergeNorm(OpKind),
    #[error("{0}+merge: K = {1} must be H = {2} heads of a multiple of 4 values each")]
    MergeHeads(OpKind, u32, u32),
    #[error("{0} has no f16 form with an epilogue")]
    BlockEpilogueF16(OpKind),
    #[error("{0} has no f16 form: only matmul, batch_matmul and matmul_q4 do")]
    NoF16(OpKind),
    #[error("dtype `{0}`: expected f32 or f16")]
    BadDtype(String),
    #[error("{op} takes {expected} dimensions ({names}), got {got}")]
    WrongRank { op: OpKind, expected: usize, names: String, got: usize },
    #[error("shape dimension `{0}` is not a positive integer")]
    BadDim(String),
    #[error("shape dimension `{0}` is too large: each dimension must be below 2^32 = 4294967296")]
    DimTooLarge(String),
    #[error("{op}: dimension {name} must be at least 1")]
    ZeroDim { op: OpKind, name: &'static str },
    #[error("matmul_q4: K = {0} must be a multiple of 32 (one scale per 32 weights)")]
    Q4K(u32),
    #[error("{0}: K = {1} must be a multiple of 32 (one block of 32 weights per scale)")]
    BlockK(OpKind, u32),
    #[error("matmul_i16 needs K even and N a multiple of 4, got K = {0}, N = {1}")]
    I16Shape(u32, u32),
    #[error("{op}: argument {arg} would hold {elems} elements; the limit is {max} (1 GiB)")]
    TooLarge { op: OpKind, arg: &'static str, elems: u64, max: u64 },
}

/// The shape's dimensions under `+merge`: the product's, then the heads and
/// the parts of each head.
const MERGE_DIMS: &[&str] = &["M", "K", "N", "H", "C"];

/// An op with a concrete shape. Constructed only through [`Op::new`], so a
/// value of this type always has a valid shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Op {
    kind: OpKind,
    shape: Vec<u32>,
    epilogue: Epilogue,
    dtype: Dtype,
}

impl Op {
    /// The plain op (no epilogue).
    pub fn new(kind: OpKind, shape: &[u32]) -> Result<Op, OpError> {
        Op::with_epilogue(kind, Epilogue::NONE, shape)
    }

    /// The op by its full name (`matmul+bias+gelu`, `matmul+f16`) and shape.
    pub fn from_name(name: &str, shape: &[u32]) -> Result<Op, OpError> {
        let (kind, epilogue, dtype) = parse_name(name)?;
        Op::with_epilogue(kind, epilogue, shape)?.with_dtype(dtype)
    }

    /// The same op with its float arguments of type `dtype` (`F32` or `F16`).
    pub fn with_dtype(self, dtype: Dtype) -> Result<Op, OpError> {
        match dtype {
            Dtype::U32 => Err(OpError::BadDtype("u32".into())),
            Dtype::F16 if !self.kind.has_f16() => Err(OpError::NoF16(self.kind)),
            Dtype::F32 | Dtype::F16 => {
                self.epilogue.fits(self.kind, dtype)?;
                Ok(Op { dtype, ..self })
            }
        }
    }

    pub fn with_epilogue(kind: OpKind, epilogue: Epilogue, shape: &[u32]) -> Result<Op, OpError> {
        epilogue.fits(kind, Dtype::F32)?;
        let names = if epilogue.merge { MERGE_DIMS } else { kind.dim_names() };
        if shape.len() != names.len() {
            return Err(OpError::WrongRank { op: kind, expected: names.len(), names: names.join(","), got: shape.len() });
        }
        if let Some(i) = shape.iter().position(|&d| d == 0) {
            return Err(OpError::ZeroDim { op: kind, name: names[i] });
        }
        if kind == OpKind::MatmulQ4 && !shape[1].is_multiple_of(32) {
            return Err(OpError::Q4K(shape[1]));
        }
        if matches!(kind, OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0) && !shape[1].is_multiple_of(32) {
            return Err(OpError::BlockK(kind, shape[1]));
        }
        if kind == OpKind::MatmulI16 && (!shape[1].is_multiple_of(2) || !shape[2].is_multiple_of(4)) {
            return Err(OpError::I16Shape(shape[1], shape[2]));
        }
        if epilogue.merge && (!shape[1].is_multiple_of(shape[3]) || !(shape[1] / shape[3]).is_multiple_of(4)) {
            return Err(OpError::MergeHeads(kind, shape[1], shape[3]));
        }
        let op = Op { kind, shape: shape.to_vec(), epilogue, dtype: Dtype::F32 };
        for arg in op.args() {
            let elems = arg.shape.iter().map(|&d| d as u64).product::<u64>();
            if elems > MAX_ARG_ELEMS {
                return Err(OpError::TooLarge { op: kind, arg: arg.name, elems, max: MAX_ARG_ELEMS });
            }
        }
        Ok(op)
    }

    /// Parses `"matmul"` (or `"matmul+bias+gelu"`, `"matmul+f16"`) and `"384,768,768"`.
    pub fn parse(name: &str, shape: &str) -> Result<Op, OpError> {
        let (kind, epilogue, dtype) = parse_name(name)?;
        let dims = parse_shape(shape)?;
        Op::with_epilogue(kind, epilogue, &dims)?.with_dtype(dtype)
    }

    /// The base kind; the epilogue is [`Op::epilogue`].
    pub fn kind(&self) -> OpKind {
        self.kind
    }
    pub fn epilogue(&self) -> Epilogue {
        self.epilogue
    }
    /// The type of the op's float arguments: `F32` or `F16`.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    /// The full name on the wire and in `kernel.json`: the base kind, the
    /// epilogue's suffix and `+f16` for half precision, e.g. `matmul+bias+gelu+f16`.
    pub fn name(&self) -> String {
        let f16 = if self.dtype == Dtype::F16 { "+f16" } else { "" };
        format!("{}{}{f16}", self.kind, self.epilogue.suffix())
    }
    /// The plain op of the same kind, shape and float type.
    pub fn base(&self) -> Op {
        Op { epilogue: Epilogue::NONE, ..self.clone() }
    }
    /// Whether the compiler has kernels of this op for `target`: f16 ops
    /// are WGSL only (Wasm has no f16 arithmetic), matmul_i16 Wasm only,
    /// and the block-quantised ops' epilogues WGSL only (a decoder's
    /// WebGPU step; its Wasm backend runs the steps they join).
    pub fn runs_on(&self, target: crate::Target) -> bool {
        let wgsl_only = self.dtype == Dtype::F16 || (self.kind.block_quantized() && !self.epilogue.is_none());
        self.kind.runs_on(target) && (!wgsl_only || target == crate::Target::Wgsl)
    }

    /// Why the compiler has no kernels of this op for `target` (`None`
    /// where it has: [`Op::runs_on`]), in a few words for an error line.
    pub fn why_not(&self, target: crate::Target) -> Option<&'static str> {
        if self.runs_on(target) {
            None
        } else if !self.kind.runs_on(target) {
            Some("it runs on wasm only")
        } else if self.dtype == Dtype::F16 {
            Some("f16 ops run on wgsl only")
        } else {
            Some("the block-quantised ops' epilogues run on wgsl only")
        }
    }

    /// `+merge`'s heads H and parts C a head (`None` without it).
    pub fn merge_parts(&self) -> Option<(u32, u32)> {
        self.epilogue.merge.then(|| (self.shape[3], self.shape[4]))
    }

    /// Rows of W per output column: 2 under `+swiglu` (gate and up), else 1.
    pub fn weight_rows_per_output(&self) -> u32 {
        if self.epilogue.glu { 2 } else { 1 }
    }
    pub fn shape(&self) -> &[u32] {
        &self.shape
    }

    /// `(batch, M, K, N)`; batch is 1 for the unbatched ops.
    pub fn bmkn(&self) -> (u32, u32, u32, u32) {
        match self.kind {
            OpKind::Matmul | OpKind::MatmulQ4 | OpKind::MatmulI16 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0 => {
                (1, self.shape[0], self.shape[1], self.shape[2])
            }
            OpKind::BatchMatmul => (self.shape[0], self.shape[1], self.shape[2], self.shape[3]),
        }
    }

    /// The kernel's arguments in ABI order: inputs, then the output.
    ///
    /// `matmul_i16` takes `A` (`u32[M, K/2]`), `B` (`u32[K/2, N]`), `SA`
    /// (`f32[M]`), `SB` (`f32[N]`), the epilogue's arguments, then `C`. Each
    /// word holds two signed 16-bit values, the even `k` in the low half:
    /// `A[m, p] = qa[m][2p] | qa[m][2p+1] << 16` and
    /// `B[p, n] = qb[2p][n] | qb[2p+1][n] << 16`. The kernel computes
    /// `C = act(SA[m]·SB[n]·S + bias[n]) + R[m, n]` where
    /// `S = Σₖ qa[m][k]·qb[k][n]` is summed in `i32`: the caller's
    /// quantisation must keep every partial sum within `i32` (for instance
    /// `max|qa|·max|qb|·K < 2³¹`), and the result is exact up to f32
    /// rounding of the scaling. Test inputs keep each value within
    /// `reference::i16_bound(K)`.
    ///
    /// `matmul_q4_1` takes `A` (`f32[M, K]`), `W` (`u32[N, K/8]`: word `i`
    /// of row `n` holds `k = 8i + s` in bits `4s..4s+3`), `D` and `Mn`
    /// (`f32[N, K/32]`) and `C`: `C[m][n] = Σₖ A[m][k]·(D[n][k/32]·q(n,k) +
    /// Mn[n][k/32])`. `matmul_q8_0` takes `A`, `W` (`u32[N, K/4]`: byte `j`
    /// of word `i` of row `n` is the signed `q(n, 4i + j)`), `D`
    /// (`f32[N, K/32]`) and `C`: `C[m][n] = Σₖ A[m][k]·D[n][k/32]·q(n,k)`.
    pub fn args(&self) -> Vec<ArgSpec> {
        let (b, m, k, n) = self.bmkn();
        let f = |name, shape: Vec<u32>| ArgSpec { name, dtype: self.dtype, shape };
        let with_epilogue = |a: ArgSpec, bb: ArgSpec, c: ArgSpec| {
            let mut out = vec![a, bb];
            if self.kind == OpKind::MatmulI16 {
                out.push(ArgSpec { name: "SA", dtype: Dtype::F32, shape: vec![m] });
                out.push(ArgSpec { name: "SB", dtype: Dtype::F32, shape: vec![n] });
            }
            if self.epilogue.bias {
                out.push(f("bias", vec![n]));
            }
            if self.epilogue.residual {
                out.push(ArgSpec { name: "R", ..c.clone() });
            }
            out.push(c);
            out
        };
        match self.kind {
            OpKind::Matmul => with_epilogue(f("A", vec![m, k]), f("B", vec![k, n]), f("C", vec![m, n])),
            OpKind::BatchMatmul => with_epilogue(f("A", vec![b, m, k]), f("B", vec![b, k, n]), f("C", vec![b, m, n])),
            OpKind::MatmulI16 => {
                let words = |name, shape| ArgSpec { name, dtype: Dtype::U32, shape };
                with_epilogue(words("A", vec![m, k / 2]), words("B", vec![k / 2, n]), f("C", vec![m, n]))
            }
            OpKind::MatmulQ4 | OpKind::MatmulQ4_1 | OpKind::MatmulQ8_0 => {
                // W's rows: N, or 2N under +swiglu (gate rows, then up rows).
                let rows = n * self.weight_rows_per_output();
                // +merge: A's parts P [M, H, C, D] in A's place; PM and PL where G and E go.
                let a = match self.merge_parts() {
                    Some((h, c)) => f("P", vec![m, h, c, k / h]),
                    None => f("A", vec![m, k]),
                };
                let mut out = vec![
                    a,
                    ArgSpec { name: "W", dtype: Dtype::U32, shape: vec![rows, k / self.kind.values_per_word()] },
                    f(if self.kind == OpKind::MatmulQ4 { "S" } else { "D" }, vec![rows, k / 32]),
                ];
                if self.kind == OpKind::MatmulQ4_1 {
                    out.push(f("Mn", vec![rows, k / 32]));
                }
                if self.epilogue.norm {
                    out.push(f("G", vec![k]));
                    out.push(f("E", vec![1]));
                }
                if let Some((h, c)) = self.merge_parts() {
                    out.push(f("PM", vec![m, h, c]));
                    out.push(f("PL", vec![m, h, c]));
                }
                if self.epilogue.residual {
                    out.push(f("R", vec![m, n]));
                }
                out.push(f("C", vec![m, n]));
                out
            }
        }
    }

    /// ABI number of the epilogue's first argument (`bias`, else `R`; the
    /// block-quantised ops' `G`, else `R`): after A and B, and
    /// `matmul_i16`'s SA and SB (the block-quantised ops: after their
    /// weights' parts).
    pub fn epilogue_first_arg(&self) -> u32 {
        match self.kind {
            OpKind::MatmulI16 => 4,
            OpKind::MatmulQ4 | OpKind::MatmulQ8_0 => 3,
            OpKind::MatmulQ4_1 => 4,
            OpKind::Matmul | OpKind::BatchMatmul => 2,
        }
    }

    /// Floating-point operations of one call, counting a multiply-add as
    /// two. An epilogue adds none (`+swiglu`'s product is over 2N rows of
    /// W, and counts them): rates stay comparable with the plain op's.
    pub fn flops(&self) -> u64 {
        let (b, m, k, n) = self.bmkn();
        2 * b as u64 * m as u64 * k as u64 * n as u64 * self.weight_rows_per_output() as u64
    }

    /// Short stable name such as `matmul_384x768x768` (or
    /// `matmul_bias_gelu_384x768x768`): letters, digits and `_` only.
    pub fn slug(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        format!("{}_{}", self.name().replace('+', "_"), dims.join("x"))
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        write!(f, "{} {}", self.name(), dims.join(","))
    }
}

/// Parses a comma-separated list of positive integers.
pub fn parse_shape(s: &str) -> Result<Vec<u32>, OpError> {
    s.split(',')
        .map(|d| {
            let d = d.trim();
            d.parse::<u32>().map_err(|_| {
                // A whole number that does not fit is too large, not "not an
                // integer"; and an error quotes at most 24 characters of the
                // input, so a 300-digit dimension is not echoed back whole.
                let shown = if d.chars().count() > 24 { d.chars().take(24).collect::<String>() + "…" } else { d.to_string() };
                let digits = d.trim_start_matches('+');
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    OpError::DimTooLarge(shown)
                } else {
                    OpError::BadDim(shown)
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let op = Op::parse("matmul", "384, 768,768").unwrap();
        assert_eq!(op.bmkn(), (1, 384, 768, 768));
        assert_eq!(op.flops(), 2 * 384 * 768 * 768);
        assert!(matches!(Op::parse("conv", "1,2,3"), Err(OpError::UnknownOp(_))));
        assert!(matches!(Op::parse("matmul", "1,2"), Err(OpError::WrongRank { .. })));
        assert!(matches!(Op::parse("matmul", "1,0,2"), Err(OpError::ZeroDim { name: "K", .. })));
        assert!(matches!(Op::parse("matmul", "1,-2,2"), Err(OpError::BadDim(_))));
        assert!(matches!(Op::parse("matmul", "1,4294967296,2"), Err(OpError::DimTooLarge(_))));
        let long = Op::parse("matmul", &format!("1,{},2", "9".repeat(300))).unwrap_err().to_string();
        assert!(long.contains("below 2^32") && long.len() < 120, "{long}");
        assert!(matches!(Op::parse("matmul_q4", "1,48,2"), Err(OpError::Q4K(48))));
        assert!(matches!(Op::parse("matmul", "2147483648,2,2"), Err(OpError::BadDim(_)) | Err(OpError::TooLarge { .. })));
        assert!(matches!(Op::parse("matmul", "65536,65536,1"), Err(OpError::TooLarge { arg: "A", .. })));
    }

    /// `+merge`: five dimensions, A's parts in A's place and PM, PL where G
    /// and E would be; refused with `+rms_norm`, on other ops, with three
    /// dimensions and where K is not H heads of a multiple of 4.
    #[test]
    fn merge_takes_parts_and_five_dimensions() {
        let op = Op::parse("matmul_q4_1+merge+residual", "1,576,576,9,16").unwrap();
        assert_eq!(op.merge_parts(), Some((9, 16)));
        assert_eq!(op.bmkn(), (1, 1, 576, 576));
        let args: Vec<_> = op.args().iter().map(|a| (a.name, a.shape.clone())).collect();
        assert_eq!(
            args,
            [
                ("P", vec![1, 9, 16, 64]),
                ("W", vec![576, 72]),
                ("D", vec![576, 18]),
                ("Mn", vec![576, 18]),
                ("PM", vec![1, 9, 16]),
                ("PL", vec![1, 9, 16]),
                ("R", vec![1, 576]),
                ("C", vec![1, 576]),
            ]
        );
        assert_eq!(op.name(), "matmul_q4_1+merge+residual");
        assert_eq!(op.slug(), "matmul_q4_1_merge_residual_1x576x576x9x16");
        assert!(matches!(Op::parse("matmul_q4_1+merge", "1,576,576"), Err(OpError::WrongRank { expected: 5, .. })));
        assert!(matches!(Op::parse("matmul_q4_1+merge+rms_norm", "1,576,576,9,16"), Err(OpError::MergeNorm(_))));
        assert!(matches!(Op::parse("matmul_q4_1+rms_norm+merge", "1,576,576,9,16"), Err(OpError::BadEpilogue(_))));
        let both = Epilogue { merge: true, norm: true, ..Epilogue::NONE };
        assert!(matches!(Op::with_epilogue(OpKind::MatmulQ8_0, both, &[1, 64, 4, 2, 2]), Err(OpError::MergeNorm(_))));
        assert!(matches!(Op::parse("matmul+merge", "1,64,4,2,2"), Err(OpError::NotBlock(_))));
        assert!(matches!(Op::parse("matmul_q8_0+merge", "1,64,4,3,2"), Err(OpError::MergeHeads(_, 64, 3))));
        assert!(matches!(Op::parse("matmul_q8_0+merge", "1,64,4,32,2"), Err(OpError::MergeHeads(_, 64, 32))));
        assert!(!op.runs_on(crate::Target::Wasm));
    }

    #[test]
    fn matmul_i16_takes_words_scales_and_epilogues() {
        let op = Op::parse("matmul_i16+bias+gelu+residual", "3,6,8").unwrap();
        let args: Vec<_> = op.args().iter().map(|a| (a.name, a.dtype, a.shape.clone())).collect();
        assert_eq!(
            args,
            [
                ("A", Dtype::U32, vec![3, 3]),
                ("B", Dtype::U32, vec![3, 8]),
                ("SA", Dtype::F32, vec![3]),
                ("SB", Dtype::F32, vec![8]),
                ("bias", Dtype::F32, vec![8]),
                ("R", Dtype::F32, vec![3, 8]),
                ("C", Dtype::F32, vec![3, 8]),
            ]
        );
        assert_eq!(op.flops(), 2 * 3 * 6 * 8);
        assert_eq!(op.args()[op.epilogue_first_arg() as usize].name, "bias");
        let mm = Op::parse("matmul+residual", "3,6,8").unwrap();
        assert_eq!(mm.args()[mm.epilogue_first_arg() as usize].name, "R");
        assert!(matches!(Op::parse("matmul_i16", "3,5,8"), Err(OpError::I16Shape(5, 8))));
        assert!(matches!(Op::parse("matmul_i16", "3,6,6"), Err(OpError::I16Shape(6, 6))));
        assert!(OpKind::MatmulI16.runs_on(crate::Target::Wasm) && !OpKind::MatmulI16.runs_on(crate::Target::Wgsl));
    }

    #[test]
    fn epilogue_names_round_trip_and_bad_ones_are_refused() {
        for kind in ["matmul", "batch_matmul"] {
            for e in Epilogue::all() {
                let name = format!("{kind}{}", e.suffix());
                let shape = if kind == "matmul" { "3,5,7" } else { "2,3,5,7" };
                let op = Op::parse(&name, shape).unwrap();
                assert_eq!((op.name(), op.epilogue()), (name.clone(), e));
                assert_eq!(Op::from_name(&op.name(), op.shape()).unwrap(), op);
                assert_eq!(op.to_string(), format!("{name} {shape}"));
            }
        }
        let op = Op::parse("matmul+bias+gelu+residual", "3,5,7").unwrap();
        let args: Vec<_> = op.args().iter().map(|a| (a.name, a.shape.clone())).collect();
        assert_eq!(args, [("A", vec![3, 5]), ("B", vec![5, 7]), ("bias", vec![7]), ("R", vec![3, 7]), ("C", vec![3, 7])]);
        assert_eq!(op.slug(), "matmul_bias_gelu_residual_3x5x7");
        assert_eq!(op.flops(), op.base().flops());
        let bm = Op::parse("batch_matmul+residual", "2,3,5,7").unwrap();
        assert_eq!(bm.args()[2].shape, vec![2, 3, 7]);
        for bad in ["matmul+gelu+bias", "matmul+bias+bias", "matmul+gelu+relu", "matmul+tanh", "matmul+", "matmul+residual+gelu"] {
            let e = Op::parse(bad, "3,5,7").unwrap_err();
            assert!(matches!(e, OpError::BadEpilogue(_)), "{bad}: {e}");
            assert!(!e.to_string().contains('\n'));
        }
        assert!(matches!(Op::parse("matmul_q4+bias", "1,32,2"), Err(OpError::NoEpilogue(OpKind::MatmulQ4))));
        assert!(matches!(Op::parse("conv+bias", "1,2,3"), Err(OpError::UnknownOp(_))));
    }

    #[test]
    fn block_epilogues_name_their_arguments_and_run_on_wgsl_only() {
        for kind in [OpKind::MatmulQ4, OpKind::MatmulQ4_1, OpKind::MatmulQ8_0] {
            for e in Epilogue::all_block() {
                let name = format!("{kind}{}", e.suffix());
                let op = Op::parse(&name, "2,64,3").unwrap();
                assert_eq!((op.name(), op.epilogue()), (name.clone(), e));
                assert_eq!(Op::from_name(&op.name(), op.shape()).unwrap(), op);
                assert_eq!(op.runs_on(crate::Target::Wasm), e.is_none(), "{name}");
                assert!(op.runs_on(crate::Target::Wgsl));
                assert_eq!(op.why_not(crate::Target::Wasm).is_some(), !e.is_none());
            }
        }
        let op = Op::parse("matmul_q4_1+rms_norm+swiglu+residual", "2,64,3").unwrap();
        let args: Vec<_> = op.args().iter().map(|a| (a.name, a.shape.clone())).collect();
        assert_eq!(
            args,
            [
                ("A", vec![2, 64]),
                ("W", vec![6, 8]),
                ("D", vec![6, 2]),
                ("Mn", vec![6, 2]),
                ("G", vec![64]),
                ("E", vec![1]),
                ("R", vec![2, 3]),
                ("C", vec![2, 3])
            ]
        );
        assert_eq!(op.flops(), 2 * 2 * 64 * 6);
        assert_eq!(op.args()[op.epilogue_first_arg() as usize].name, "G");
        let q8 = Op::parse("matmul_q8_0+residual", "1,64,3").unwrap();
        assert_eq!(q8.args()[q8.epilogue_first_arg() as usize].name, "R");
        for bad in ["matmul_q4_1+swiglu+rms_norm", "matmul_q4_1+residual+swiglu", "matmul_q4_1+rms_norm+rms_norm"] {
            assert!(matches!(Op::parse(bad, "1,32,2"), Err(OpError::BadEpilogue(_))), "{bad}");
        }
        assert_eq!(Op::parse("matmul_q4_1+rms_norm+bias", "1,32,2"), Err(OpError::NoEpilogue(OpKind::MatmulQ4_1)));
        assert_eq!(Op::parse("matmul+rms_norm", "1,32,2"), Err(OpError::NotBlock(OpKind::Matmul)));
        assert_eq!(Op::parse("matmul_i16+swiglu", "1,32,4"), Err(OpError::NotBlock(OpKind::MatmulI16)));
        assert_eq!(Op::parse("matmul_q4+residual+f16", "1,32,2"), Err(OpError::BlockEpilogueF16(OpKind::MatmulQ4)));
        assert!(Op::parse("matmul_q4+f16", "1,32,2").is_ok());
    }

    #[test]
    fn f16_is_the_last_suffix_and_types_the_float_arguments() {
        let op = Op::parse("matmul+bias+gelu+f16", "3,5,7").unwrap();
        assert_eq!((op.dtype(), op.epilogue().act), (Dtype::F16, Activation::Gelu));
        assert_eq!(op.name(), "matmul+bias+gelu+f16");
        assert_eq!(Op::from_name(&op.name(), op.shape()).unwrap(), op);
        assert_eq!(op.slug(), "matmul_bias_gelu_f16_3x5x7");
        assert!(op.args().iter().all(|a| a.dtype == Dtype::F16));
        assert_eq!(op.args()[0].bytes(), 2 * 15);
        assert_eq!(op.base().name(), "matmul+f16");
        assert_ne!(op.base(), Op::parse("matmul", "3,5,7").unwrap());
        let q4 = Op::parse("matmul_q4+f16", "2,64,3").unwrap();
        let dt: Vec<_> = q4.args().iter().map(|a| a.dtype).collect();
        assert_eq!(dt, [Dtype::F16, Dtype::U32, Dtype::F16, Dtype::F16]);
        assert!(q4.runs_on(crate::Target::Wgsl) && !q4.runs_on(crate::Target::Wasm));
        assert!(Op::parse("matmul_q4", "2,64,3").unwrap().runs_on(crate::Target::Wasm));
        assert!(matches!(Op::parse("matmul_i16+f16", "2,4,4"), Err(OpError::NoF16(OpKind::MatmulI16))));
        for bad in ["matmul+f16+bias", "matmul+f16+f16", "matmul+f32"] {
            assert!(matches!(Op::parse(bad, "3,5,7"), Err(OpError::BadEpilogue(_))), "{bad}");
        }
        assert_eq!(Dtype::parse_float("f16"), Ok(Dtype::F16));
        assert!(matches!(Dtype::parse_float("u32"), Err(OpError::BadDtype(_))));
        let plain = Op::parse("matmul", "3,5,7").unwrap();
        assert_eq!(plain.clone().with_dtype(Dtype::F16).unwrap(), Op::parse("matmul+f16", "3,5,7").unwrap());
        assert!(plain.with_dtype(Dtype::U32).is_err());
    }

    #[test]
    fn q4_args_follow_the_abi() {
        let op = Op::parse("matmul_q4", "1,64,3").unwrap();
        let args = op.args();
        let names: Vec<_> = args.iter().map(|a| a.name).collect();
        assert_eq!(names, ["A", "W", "S", "C"]);
        assert_eq!(args[1].shape, vec![3, 8]);
        assert_eq!(args[2].shape, vec![3, 2]);
    }

    #[test]
    fn gguf_ops_follow_the_abi_and_refuse_what_they_lack() {
        let q41 = Op::parse("matmul_q4_1", "2,64,3").unwrap();
        let args: Vec<_> = q41.args().iter().map(|a| (a.name, a.dtype, a.shape.clone())).collect();
        assert_eq!(
            args,
            [
                ("A", Dtype::F32, vec![2, 64]),
                ("W", Dtype::U32, vec![3, 8]),
                ("D", Dtype::F32, vec![3, 2]),
                ("Mn", Dtype::F32, vec![3, 2]),
                ("C", Dtype::F32, vec![2, 3]),
            ]
        );
        let q80 = Op::parse("matmul_q8_0", "2,64,3").unwrap();
        let args: Vec<_> = q80.args().iter().map(|a| (a.name, a.dtype, a.shape.clone())).collect();
        assert_eq!(
            args,
            [("A", Dtype::F32, vec![2, 64]), ("W", Dtype::U32, vec![3, 16]), ("D", Dtype::F32, vec![3, 2]), ("C", Dtype::F32, vec![2, 3])]
        );
        for kind in [OpKind::MatmulQ4_1, OpKind::MatmulQ8_0] {
            assert_eq!(kind.name().parse::<OpKind>().unwrap(), kind);
            assert!(kind.runs_on(crate::Target::Wasm) && kind.runs_on(crate::Target::Wgsl));
            assert_eq!(Op::parse(kind.name(), "1,48,2"), Err(OpError::BlockK(kind, 48)));
            assert_eq!(Op::parse(&format!("{kind}+bias"), "1,32,2"), Err(OpError::NoEpilogue(kind)));
            assert_eq!(Op::parse(&format!("{kind}+f16"), "1,32,2"), Err(OpError::NoF16(kind)));
            let e = Op::parse(kind.name(), "1,40,2").unwrap_err().to_string();
            assert!(e.starts_with(kind.name()) && e.contains("multiple of 32"), "{e}");
            assert_eq!(Op::parse(kind.name(), "3,32,5").unwrap().flops(), 2 * 3 * 32 * 5);
        }
    }
}
