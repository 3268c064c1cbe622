//! The tensor operations webtune compiles, their shapes and their arguments.
//!
//! Every op works on row-major `f32` tensors (plus packed `u32` words for the
//! 4-bit weights of `matmul_q4`). The argument order defined here is the kernel
//! ABI: Wasm kernels take the byte offsets of the arguments in this order, WGSL
//! kernels bind them at `@binding(i)` in this order. Inputs come first, the
//! output last.

use std::fmt;
use std::str::FromStr;

/// Largest number of elements any one argument may have. 2^28 f32 values is
/// 1 GiB: past that a Wasm kernel cannot address its arguments in a 4 GiB
/// memory and a WebGPU buffer exceeds every browser's binding limit.
pub const MAX_ARG_ELEMS: u64 = 1 << 28;

/// The kind of tensor computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// `C[M,N] = A[M,K] · B[K,N]`, shape `M,K,N`.
    Matmul,
    /// `C[b] = A[b] · B[b]`, shape `B,M,K,N`.
    BatchMatmul,
    /// `C[M,N] = A[M,K] · dequant(W)ᵀ`, shape `M,K,N`, `K % 32 == 0`.
    MatmulQ4,
}

impl OpKind {
    pub const ALL: [OpKind; 3] = [OpKind::Matmul, OpKind::BatchMatmul, OpKind::MatmulQ4];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Matmul => "matmul",
            OpKind::BatchMatmul => "batch_matmul",
            OpKind::MatmulQ4 => "matmul_q4",
        }
    }

    /// Names of the shape's dimensions, in the order the shape lists them.
    pub fn dim_names(self) -> &'static [&'static str] {
        match self {
            OpKind::Matmul | OpKind::MatmulQ4 => &["M", "K", "N"],
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
        OpKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| OpError::UnknownOp(s.to_string()))
    }
}

/// Element type of a kernel argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    F32,
    U32,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::U32 => "u32",
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
        self.elems() * 4
    }
}

/// Why an op or shape was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error("unknown op `{0}`: expected one of matmul, batch_matmul, matmul_q4")]
    UnknownOp(String),
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
    #[error("{op}: argument {arg} would hold {elems} elements; the limit is {max} (1 GiB)")]
    TooLarge { op: OpKind, arg: &'static str, elems: u64, max: u64 },
}

/// An op with a concrete shape. Constructed only through [`Op::new`], so a
/// value of this type always has a valid shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Op {
    kind: OpKind,
    shape: Vec<u32>,
}

impl Op {
    pub fn new(kind: OpKind, shape: &[u32]) -> Result<Op, OpError> {
        let names = kind.dim_names();
        if shape.len() != names.len() {
            return Err(OpError::WrongRank {
                op: kind,
                expected: names.len(),
                names: names.join(","),
                got: shape.len(),
            });
        }
        if let Some(i) = shape.iter().position(|&d| d == 0) {
            return Err(OpError::ZeroDim { op: kind, name: names[i] });
        }
        if kind == OpKind::MatmulQ4 && !shape[1].is_multiple_of(32) {
            return Err(OpError::Q4K(shape[1]));
        }
        let op = Op { kind, shape: shape.to_vec() };
        for arg in op.args() {
            let elems = arg.shape.iter().map(|&d| d as u64).product::<u64>();
            if elems > MAX_ARG_ELEMS {
                return Err(OpError::TooLarge { op: kind, arg: arg.name, elems, max: MAX_ARG_ELEMS });
            }
        }
        Ok(op)
    }

    /// Parses `"matmul"` and `"384,768,768"`.
    pub fn parse(kind: &str, shape: &str) -> Result<Op, OpError> {
        let kind: OpKind = kind.trim().parse()?;
        let dims = parse_shape(shape)?;
        Op::new(kind, &dims)
    }

    pub fn kind(&self) -> OpKind {
        self.kind
    }
    pub fn shape(&self) -> &[u32] {
        &self.shape
    }

    /// `(batch, M, K, N)`; batch is 1 for the unbatched ops.
    pub fn bmkn(&self) -> (u32, u32, u32, u32) {
        match self.kind {
            OpKind::Matmul | OpKind::MatmulQ4 => (1, self.shape[0], self.shape[1], self.shape[2]),
            OpKind::BatchMatmul => (self.shape[0], self.shape[1], self.shape[2], self.shape[3]),
        }
    }

    /// The kernel's arguments in ABI order: inputs, then the output.
    pub fn args(&self) -> Vec<ArgSpec> {
        let (b, m, k, n) = self.bmkn();
        let f = |name, shape: Vec<u32>| ArgSpec { name, dtype: Dtype::F32, shape };
        match self.kind {
            OpKind::Matmul => vec![f("A", vec![m, k]), f("B", vec![k, n]), f("C", vec![m, n])],
            OpKind::BatchMatmul => {
                vec![f("A", vec![b, m, k]), f("B", vec![b, k, n]), f("C", vec![b, m, n])]
            }
            OpKind::MatmulQ4 => vec![
                f("A", vec![m, k]),
                ArgSpec { name: "W", dtype: Dtype::U32, shape: vec![n, k / 8] },
                f("S", vec![n, k / 32]),
                f("C", vec![m, n]),
            ],
        }
    }

    /// Floating-point operations of one call, counting a multiply-add as two.
    pub fn flops(&self) -> u64 {
        let (b, m, k, n) = self.bmkn();
        2 * b as u64 * m as u64 * k as u64 * n as u64
    }

    /// Short stable name such as `matmul_384x768x768`.
    pub fn slug(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        format!("{}_{}", self.kind, dims.join("x"))
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        write!(f, "{} {}", self.kind, dims.join(","))
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
        assert!(matches!(
            Op::parse("matmul", "2147483648,2,2"),
            Err(OpError::BadDim(_)) | Err(OpError::TooLarge { .. })
        ));
        assert!(matches!(Op::parse("matmul", "65536,65536,1"), Err(OpError::TooLarge { arg: "A", .. })));
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
}
