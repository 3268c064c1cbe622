//! Deterministic test inputs and the f64 reference every kernel is checked against.
//!
//! Inputs come from a seeded generator and are never zero (a kernel that
//! skips work must not pass by luck); outputs are compared element-wise in a
//! norm-scaled relative error, so that only f32 rounding is tolerated (and,
//! for `+f16` ops, the one rounding of each output to f16: see
//! [`tolerance`]; for a kernel whose schedule quantises its activations to
//! 16 bits, the bound of that rounding: see [`kernel_tolerance`]).

use crate::op::{Activation, ArgSpec, Dtype, Epilogue, Op, OpKind};
use crate::schedule::Schedule;

/// The argument buffers of one call, as raw 32-bit words in ABI order
/// (f32 arguments hold `f32::to_bits`; f16 arguments hold the `f32::to_bits`
/// of values that f16 represents exactly, and travel to a kernel as
/// [`arg_bytes`]). The output starts poisoned with NaN.
#[derive(Clone, Debug, PartialEq)]
pub struct Inputs {
    pub args: Vec<Vec<u32>>,
}

/// SplitMix64: tiny, fast, and the same on every platform.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[-1, 1)`, with magnitude at least 1/64.
    pub fn nonzero_f32(&mut self) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        let x = 2.0 * u - 1.0;
        if x.abs() < 1.0 / 64.0 { 0.5 } else { x }
    }
}

/// A NaN with a recognisable payload, written to outputs before a run.
pub const POISON: u32 = 0x7FC0_DEAD;

/// Seeded inputs for `op`. The block scales (`S` of matmul_q4, `D` of
/// matmul_q4_1 and matmul_q8_0) and `+rms_norm`'s `E` are positive and
/// small, as real scales and epsilons are (a test's E, 0.01 to 0.11, moves
/// the norm's factor by a few per cent, so a kernel that drops it fails);
/// matmul_q4_1's minimums `Mn` are about −7.5 times their block's scale
/// (`−D·(7.5 ± 0.5)`), as a Q4_1 block's minimum is for weights spread
/// evenly around zero; `+merge`'s part sums `PL` lie in (1, 2), as a sum of
/// e^(score − max) that holds its max's own 1 does; packed words are any 32
/// bits (nibbles 0..15, bytes over the whole i8 range).
pub fn inputs(op: &Op, seed: u64) -> Inputs {
    let mut rng = Rng::new(seed);
    let specs = op.args();
    let last = specs.len() - 1;
    let mut args: Vec<Vec<u32>> = Vec::with_capacity(specs.len());
    for (i, a) in specs.iter().enumerate() {
        let n = a.elems() as usize;
        let v = if i == last {
            vec![POISON; n]
        } else if a.name == "Mn" {
            let d = &args[i - 1];
            (0..n).map(|j| minimum(a.dtype, rng.next_u64(), d[j])).collect()
        } else {
            (0..n).map(|_| element(op, a, rng.next_u64())).collect()
        };
        args.push(v);
    }
    Inputs { args }
}

/// Input element of `spec` (any but matmul_q4_1's `Mn`) from its raw draw.
fn element(op: &Op, spec: &ArgSpec, u: u64) -> u32 {
    match (spec.dtype, spec.name) {
        (Dtype::U32, _) if op.kind() == OpKind::MatmulI16 => i16_word(u as u32, op.bmkn().2),
        (Dtype::U32, _) => u as u32,
        (d @ (Dtype::F32 | Dtype::F16), "S" | "D" | "E") => as_dtype(d, (nonzero_from(u).abs() * 0.1) + 0.01),
        // +merge's sums of e^(score − max) over a part: at least the max's own 1.
        (d @ (Dtype::F32 | Dtype::F16), "PL") => as_dtype(d, 1.5 + 0.5 * nonzero_from(u)),
        (d @ (Dtype::F32 | Dtype::F16), _) => as_dtype(d, nonzero_from(u)),
    }
}

/// matmul_q4_1's minimum from its raw draw and its block's scale `d` (bits).
fn minimum(dtype: Dtype, u: u64, d: u32) -> u32 {
    as_dtype(dtype, -f32::from_bits(d) * (7.5 + 0.5 * nonzero_from(u)))
}

/// `x` rounded to the nearest f16 (ties to even), as an f16 kernel stores it.
pub fn round_f16(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

/// `x`'s bits, rounded to f16 first for an f16 argument.
fn as_dtype(dtype: Dtype, x: f32) -> u32 {
    if dtype == Dtype::F16 { round_f16(x).to_bits() } else { x.to_bits() }
}

/// An argument's words as the bytes a kernel reads (little-endian): four per
/// element, or two for an f16 argument (each word's f32 value rounded to f16).
pub fn arg_bytes(spec: &ArgSpec, words: &[u32]) -> Vec<u8> {
    if spec.dtype == Dtype::F16 {
        words.iter().flat_map(|&w| half::f16::from_f32(f32::from_bits(w)).to_le_bytes()).collect()
    } else {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// The inverse of [`arg_bytes`]: a kernel's output bytes as words (an f16
/// element widened exactly to f32).
pub fn arg_words(spec: &ArgSpec, bytes: &[u8]) -> Vec<u32> {
    if spec.dtype == Dtype::F16 {
        bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32().to_bits()).collect()
    } else {
        bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }
}

fn f(v: &[u32], i: usize) -> f64 {
    f32::from_bits(v[i]) as f64
}

/// `dequant(W)[n, k]`.
pub fn dequant(w: &[u32], s: &[u32], k: usize, n: usize, kk: usize) -> f64 {
    let word = w[n * (k / 8) + kk / 8];
    let q = (word >> (4 * (kk % 8))) & 0xF;
    (q as f64 - 8.0) * f(s, n * (k / 32) + kk / 32)
}

/// `dequant(W)[n, k]` of matmul_q4_1: `D·q + Mn`.
pub fn dequant_q4_1(w: &[u32], d: &[u32], mn: &[u32], k: usize, n: usize, kk: usize) -> f64 {
    let word = w[n * (k / 8) + kk / 8];
    let q = (word >> (4 * (kk % 8))) & 0xF;
    let b = n * (k / 32) + kk / 32;
    q as f64 * f(d, b) + f(mn, b)
}

/// `dequant(W)[n, k]` of matmul_q8_0: `D·q`, `q` the signed byte.
pub fn dequant_q8_0(w: &[u32], d: &[u32], k: usize, n: usize, kk: usize) -> f64 {
    let word = w[n * (k / 4) + kk / 4];
    let q = (word >> (8 * (kk % 4))) as u8 as i8;
    q as f64 * f(d, n * (k / 32) + kk / 32)
}

/// `act(x + bias) + r` in f64, with GELU through libm's f64 erf; `bias` and
/// `r` are 0 where the epilogue has none.
pub fn epilogue(e: Epilogue, x: f64, bias: f64, r: f64) -> f64 {
    let x = x + bias;
    let x = match e.act {
        Activation::None => x,
        Activation::Gelu => 0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2)),
        Activation::Relu => x.max(0.0),
    };
    x + r
}

/// Argument numbers of the epilogue's bias and residual inputs (ABI order:
/// A, B, bias, R, C; `matmul_i16`: A, B, SA, SB, bias, R, C; the
/// block-quantised ops: A, the weights' parts, G, E, R, C).
pub fn epilogue_args(op: &Op) -> (Option<usize>, Option<usize>) {
    let e = op.epilogue();
    let first = op.epilogue_first_arg() as usize;
    let bias = e.bias.then_some(first);
    let residual = e.residual.then_some(first + usize::from(e.bias) + 2 * usize::from(e.norm || e.merge));
    (bias, residual)
}

/// Argument number of `+rms_norm`'s G (E is the next).
pub fn norm_arg(op: &Op) -> Option<usize> {
    op.epilogue().norm.then_some(op.epilogue_first_arg() as usize)
}

/// `silu(x) = x / (1 + e^−x)` in f64.
pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// One output of a block-quantised op with an epilogue
/// (`glu(norm(A)·Wᵀ) + R`, docs/ops.md) and its rounding scale, in O(K):
/// `a(k)` is the row of A, `w(row, k)` W's dequantised values (rows `j`
/// and, under `+swiglu`, `n + j`), `gamma(k)` and `eps` `+rms_norm`'s G and
/// E, `r` the residual's value (0 without one).
///
/// The scale is `‖a'‖·‖w_j‖` as for the plain op, `a'` the row as the
/// product reads it (normalised under `+rms_norm`: the rounding of the
/// norm's factor moves every output in proportion, within the same
/// scale); under `+swiglu` each product's error `‖a'‖·‖w‖` enters through
/// the slope of its factor (`|silu'| ≤ 1.1`, and `|silu(g)| ≤ |g|`), plus
/// `|silu(g)·u|` for the rounding of the exponential; plus `|R|`.
#[allow(clippy::too_many_arguments)]
pub fn block_output(
    e: Epilogue,
    k: usize,
    n: usize,
    j: usize,
    a: &dyn Fn(usize) -> f64,
    w: &dyn Fn(usize, usize) -> f64,
    gamma: &dyn Fn(usize) -> f64,
    eps: f64,
    r: f64,
) -> (f64, f64) {
    let inv = if e.norm { 1.0 / ((0..k).map(|kk| a(kk) * a(kk)).sum::<f64>() / k as f64 + eps).sqrt() } else { 1.0 };
    let ap = |kk: usize| if e.norm { a(kk) * inv * gamma(kk) } else { a(kk) };
    let row = (0..k).map(|kk| ap(kk).powi(2)).sum::<f64>().sqrt();
    let dot = |wr: usize| {
        let (mut acc, mut norm) = (0.0, 0.0);
        for kk in 0..k {
            let y = w(wr, kk);
            acc += ap(kk) * y;
            norm += y * y;
        }
        (acc, norm.sqrt())
    };
    let (g, gn) = dot(j);
    if !e.glu {
        return (g + r, row * gn + r.abs());
    }
    let (u, un) = dot(n + j);
    let out = silu(g) * u;
    (out + r, row * (1.1 * u.abs() * gn + (g.abs() + 0.28) * un) + out.abs() + r.abs())
}

/// [`reference`] of a block-quantised op with an epilogue, through [`block_output`].
fn reference_block(op: &Op, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
    let (_, m, k, n) = op.bmkn();
    let (m, k, n) = (m as usize, k as usize, n as usize);
    let args = &inputs.args;
    let a = &args[0];
    let w: Box<dyn Fn(usize, usize) -> f64> = match op.kind() {
        OpKind::MatmulQ4 => Box::new(|j, kk| dequant(&args[1], &args[2], k, j, kk)),
        OpKind::MatmulQ4_1 => Box::new(|j, kk| dequant_q4_1(&args[1], &args[2], &args[3], k, j, kk)),
        _ => Box::new(|j, kk| dequant_q8_0(&args[1], &args[2], k, j, kk)),
    };
    let (_, residual) = epilogue_args(op);
    let norm = norm_arg(op);
    let gamma = |kk: usize| norm.map_or(1.0, |g| f(&args[g], kk));
    let eps = norm.map_or(0.0, |g| f(&args[g + 1], 0));
    let mut out = vec![0.0; m * n];
    let mut scale = vec![0.0; m * n];
    // +merge: each row of A merged from its parts first.
    let merged = op.merge_parts().map(|(h, c)| {
        let first = op.epilogue_first_arg() as usize;
        merge_rows(a, &args[first], &args[first + 1], m, h as usize, c as usize, k / h as usize)
    });
    for i in 0..m {
        let row = |kk: usize| match &merged {
            Some(rows) => rows[i * k + kk],
            None => f(a, i * k + kk),
        };
        for j in 0..n {
            let o = i * n + j;
            let r = residual.map_or(0.0, |x| f(&args[x], o));
            (out[o], scale[o]) = block_output(op.epilogue(), k, n, j, &row, &*w, &gamma, eps, r);
        }
    }
    (out, scale)
}

/// `+merge`'s rows of A in f64 from the parts `p` (`[M, H, C, D]`), their
/// largest scores `pm` and sums `pl` (`[M, H, C]`): per row and head,
/// `Σ_c w_c·p / Σ_c w_c·pl` with `w_c = e^(pm_c − max pm)` (docs/ops.md).
pub fn merge_rows(p: &[u32], pm: &[u32], pl: &[u32], m: usize, h: usize, c: usize, d: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * h * d];
    for i in 0..m {
        for hh in 0..h {
            let part = |cc: usize| (i * h + hh) * c + cc;
            let top = (0..c).map(|cc| f(pm, part(cc))).fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = (0..c).map(|cc| (f(pm, part(cc)) - top).exp()).collect();
            let den: f64 = (0..c).map(|cc| w[cc] * f(pl, part(cc))).sum();
            for dd in 0..d {
                let num: f64 = (0..c).map(|cc| w[cc] * f(p, part(cc) * d + dd)).sum();
                out[(i * h + hh) * d + dd] = num / den;
            }
        }
    }
    out
}

/// The largest magnitude of `matmul_i16` test values for a reduction of `k`:
/// `⌊√((2³¹−1)/k)⌋`, at most 32767, so that no sum of `k` products can
/// leave `i32` (the kernel's contract).
pub fn i16_bound(k: u32) -> u32 {
    (((i32::MAX as f64) / k as f64).sqrt() as u32).min(32767)
}

/// A `matmul_i16` test word from a raw 32-bit draw: each 16-bit half `h`
/// becomes `h mod (2r+1) − r` with `r = i16_bound(k)`, and 1 where that is 0.
pub fn i16_word(raw: u32, k: u32) -> u32 {
    let r = i16_bound(k);
    let half = |h: u32| {
        let v = (h % (2 * r + 1)) as i32 - r as i32;
        (if v == 0 { 1 } else { v }) as u16 as u32
    };
    half(raw & 0xFFFF) | half(raw >> 16) << 16
}

/// The two signed 16-bit halves of a `matmul_i16` word, low (even `k`) first.
pub fn i16_pair(word: u32) -> [i32; 2] {
    [word as u16 as i16 as i32, (word >> 16) as u16 as i16 as i32]
}

/// `matmul_i16`'s integer sum for one output from the words of a row of A
/// and the words of a column of B: `Σ qa·qb`, exact (in `i64`), and the
/// Cauchy–Schwarz bound `‖qa‖·‖qb‖` on it.
fn i16_dot(a: impl Iterator<Item = u32>, b: impl Iterator<Item = u32>) -> (i64, f64) {
    let (mut sum, mut na, mut nb) = (0i64, 0.0f64, 0.0f64);
    for (wa, wb) in a.zip(b) {
        for (x, y) in i16_pair(wa).into_iter().zip(i16_pair(wb)) {
            sum += x as i64 * y as i64;
            na += (x as f64).powi(2);
            nb += (y as f64).powi(2);
        }
    }
    (sum, na.sqrt() * nb.sqrt())
}

/// The exact result (in f64) and, per output, the scale of rounding error it
/// may carry: `‖row of A‖₂ · ‖column of B‖₂`, plus `|bias| + |R|` for an
/// epilogue's terms (its activations have slopes of at most 1.13, so f32
/// rounding of their input stays within the same scale).
pub fn reference(op: &Op, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
    if op.kind() == OpKind::MatmulI16 {
        return reference_i16(op, inputs);
    }
    if op.kind().block_quantized() && !op.epilogue().is_none() {
        return reference_block(op, inputs);
    }
    let (batch, m, k, n) = op.bmkn();
    let (batch, m, k, n) = (batch as usize, m as usize, k as usize, n as usize);
    let a = &inputs.args[0];
    let e = op.epilogue();
    let (bias, residual) = epilogue_args(op);
    let mut out = vec![0.0; batch * m * n];
    let mut scale = vec![0.0; batch * m * n];
    let bval: Box<dyn Fn(usize, usize, usize) -> f64> = match op.kind() {
        OpKind::Matmul | OpKind::BatchMatmul => {
            let b = &inputs.args[1];
            Box::new(move |bi, kk, j| f(b, bi * k * n + kk * n + j))
        }
        OpKind::MatmulQ4 => {
            let (w, s) = (&inputs.args[1], &inputs.args[2]);
            Box::new(move |_, kk, j| dequant(w, s, k, j, kk))
        }
        OpKind::MatmulQ4_1 => {
            let (w, d, mn) = (&inputs.args[1], &inputs.args[2], &inputs.args[3]);
            Box::new(move |_, kk, j| dequant_q4_1(w, d, mn, k, j, kk))
        }
        OpKind::MatmulQ8_0 => {
            let (w, d) = (&inputs.args[1], &inputs.args[2]);
            Box::new(move |_, kk, j| dequant_q8_0(w, d, k, j, kk))
        }
        OpKind::MatmulI16 => unreachable!("reference_i16"),
    };
    for bi in 0..batch {
        let col_norm: Vec<f64> = (0..n).map(|j| (0..k).map(|kk| bval(bi, kk, j).powi(2)).sum::<f64>().sqrt()).collect();
        for i in 0..m {
            let arow = &a[(bi * m + i) * k..(bi * m + i + 1) * k];
            let row_norm = arow.iter().map(|&x| (f32::from_bits(x) as f64).powi(2)).sum::<f64>().sqrt();
            for j in 0..n {
                let mut acc = 0.0;
                for (kk, &x) in arow.iter().enumerate() {
                    acc += f32::from_bits(x) as f64 * bval(bi, kk, j);
                }
                let o = (bi * m + i) * n + j;
                let (bv, rv) = (bias.map_or(0.0, |b| f(&inputs.args[b], j)), residual.map_or(0.0, |r| f(&inputs.args[r], o)));
                out[o] = if e.is_none() { acc } else { epilogue(e, acc, bv, rv) };
                scale[o] = row_norm * col_norm[j] + bv.abs() + rv.abs();
            }
        }
    }
    (out, scale)
}

/// [`reference`] of `matmul_i16`: the exact integer sum, then `SA·SB·S`
/// and the epilogue in f64. (The kernel sums in `i32`: inputs whose sums
/// leave it are outside its contract, and [`inputs`] never makes them.) The rounding scale is
/// `|SA·SB|·‖qa‖·‖qb‖` (the f32 conversion and the two scale products round
/// relative to at most that), plus the epilogue's terms.
fn reference_i16(op: &Op, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
    let (_, m, k, n) = op.bmkn();
    let (m, kw, n) = (m as usize, k as usize / 2, n as usize);
    let [a, b, sa, sb] = [0, 1, 2, 3].map(|i| &inputs.args[i]);
    let e = op.epilogue();
    let (bias, residual) = epilogue_args(op);
    let mut out = vec![0.0; m * n];
    let mut scale = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (sum, bound) = i16_dot(a[i * kw..(i + 1) * kw].iter().copied(), (0..kw).map(|p| b[p * n + j]));
            let s = f(sa, i) * f(sb, j);
            let o = i * n + j;
            let (bv, rv) = (bias.map_or(0.0, |x| f(&inputs.args[x], j)), residual.map_or(0.0, |r| f(&inputs.args[r], o)));
            out[o] = epilogue(e, sum as f64 * s, bv, rv);
            scale[o] = s.abs() * bound + bv.abs() + rv.abs();
        }
    }
    (out, scale)
}

/// Result of comparing a kernel's output with the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Check {
    /// Largest `|out − ref| / (‖row‖·‖col‖)`; infinite if any output is NaN or infinite.
    pub max_rel_err: f64,
    /// Where it occurred.
    pub worst: usize,
    /// The largest `max_rel_err` that passes: [`tolerance`] of the op.
    pub tolerance: f64,
}

/// Tolerance for [`Check::max_rel_err`]: f32 rounding only.
pub const TOLERANCE: f64 = 1e-5;

/// Tolerance of an `+f16` op: four f16 rounding units, `4·2⁻¹¹`, plus
/// [`TOLERANCE`]. A kernel that accumulates in f32 (the default) errs by at
/// most the output's one rounding, `2⁻¹¹·|C|` ≤ `2⁻¹¹` of the scale
/// (`|Σ a·b| ≤ ‖row‖·‖col‖`; the epilogue's terms are in the scale). One
/// that accumulates in f16 (`f16_acc`) rounds at every multiply-add: in the
/// worst case `|error| ≤ γ_K·Σ|a·b|` with `γ_K = K·2⁻¹¹/(1 − K·2⁻¹¹)`, which
/// no fixed tolerance covers; on inputs of random sign, as every test's and
/// the browser's seeded inputs are, the rounding errors cancel like a random
/// walk and the norm-scaled error stays near one unit (measured up to
/// 3.9e-4 at K = 4096, BENCHMARKS.md), so four units hold it.
pub const TOLERANCE_F16: f64 = 4.0 / 2048.0 + TOLERANCE;

/// The tolerance `op`'s outputs are held to.
pub fn tolerance(op: &Op) -> f64 {
    if op.dtype() == Dtype::F16 { TOLERANCE_F16 } else { TOLERANCE }
}

/// The norm-scaled error that rounding A to 16 bits per block of 32 values
/// can add (a schedule's `quantize_a`): `0.51·√32 / 32767 ≈ 8.8e-5`.
///
/// Per block, the kernel takes `m = max|x|`, `s = m/32767` and
/// `q = round(x·(32767/m))`, in f32. Then `|x − s·q| ≤ 0.51·s` (half a step,
/// plus f32's rounding of the scale and its inverse, below 0.006 of a step
/// since `|x·32767/m| ≤ 32767`), and `s ≤ m/32767·(1 + 2⁻²³)`. The integer
/// sums are exact, so the error that quantisation adds to an output is
/// `|Σₖ wₖ·(xₖ − s·qₖ)| ≤ Σ_blocks 0.51·(m_b/32767)·‖w_b‖₁`; with
/// `m_b ≤ ‖x_b‖₂`, `‖w_b‖₁ ≤ √32·‖w_b‖₂` and Cauchy–Schwarz over the blocks,
/// that is at most `0.51·√32/32767 · ‖x‖₂·‖w‖₂`: this constant, in the
/// norm-scaled error. (A block whose largest value is below 1e-30 is
/// scaled as if it were 1e-30, which adds at most 1e-35·Σ|w|.) The f32
/// arithmetic after the sums is covered by [`TOLERANCE`].
pub const A16_ROUNDING: f64 = 0.51 * 5.656_854_249_492_381 / 32767.0;

/// [`TOLERANCE`] plus [`A16_ROUNDING`]: what a `quantize_a` kernel of an
/// f32 op is held to.
pub const TOLERANCE_A16: f64 = A16_ROUNDING + TOLERANCE;

/// The tolerance a kernel of `op` compiled with `schedule` is held to: the
/// op's [`tolerance`], plus [`A16_ROUNDING`] when the schedule quantises
/// its activations (and only then).
pub fn kernel_tolerance(op: &Op, schedule: &Schedule) -> f64 {
    tolerance(op) + if schedule.quantize_a { A16_ROUNDING } else { 0.0 }
}

/// [`check_op`] to a kernel's own tolerance ([`kernel_tolerance`]).
pub fn check_kernel(op: &Op, schedule: &Schedule, reference: &(Vec<f64>, Vec<f64>), out: &[u32]) -> Check {
    check_within(reference, out, kernel_tolerance(op, schedule))
}

impl Check {
    pub fn ok(&self) -> bool {
        self.max_rel_err <= self.tolerance
    }
}

/// Compares `out` (f32 bits) with the reference, to f32 rounding ([`TOLERANCE`]).
pub fn check(reference: &(Vec<f64>, Vec<f64>), out: &[u32]) -> Check {
    check_within(reference, out, TOLERANCE)
}

/// Compares the output of `op` (as words, see [`arg_words`]) with its
/// reference, to the op's [`tolerance`].
pub fn check_op(op: &Op, reference: &(Vec<f64>, Vec<f64>), out: &[u32]) -> Check {
    check_within(reference, out, tolerance(op))
}

fn check_within(reference: &(Vec<f64>, Vec<f64>), out: &[u32], tolerance: f64) -> Check {
    let (want, scale) = reference;
    let mut worst = Check { max_rel_err: 0.0, worst: 0, tolerance };
    for (i, (&w, &s)) in want.iter().zip(scale).enumerate() {
        let got = f32::from_bits(out[i]) as f64;
        let err = if got.is_finite() { (got - w).abs() / s.max(f64::MIN_POSITIVE) } else { f64::INFINITY };
        if err > worst.max_rel_err || (i == 0 && err.is_infinite()) {
            worst = Check { max_rel_err: err, worst: i, tolerance };
        }
    }
    worst
}

/// The raw 64-bit draw number `t` (from 0) of [`Rng::new`]`(seed)`, without
/// drawing the ones before it. SplitMix64's state after `t + 1` steps is
/// `(seed ^ γ) + (t + 1)·γ`, so any draw is one multiply away: this is what
/// lets a server recompute a few outputs of a large kernel without
/// generating its whole inputs.
pub fn draw_at(seed: u64, t: u64) -> u64 {
    let mut r = Rng((seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_add(t.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    r.next_u64()
}

fn nonzero_from(u: u64) -> f32 {
    let u = (u >> 40) as f32 / (1u64 << 24) as f32;
    let x = 2.0 * u - 1.0;
    if x.abs() < 1.0 / 64.0 { 0.5 } else { x }
}

/// Element `index` of input argument `arg` of [`inputs`]`(op, seed)`, as raw
/// 32-bit words, computed on its own.
pub fn input_at(op: &Op, seed: u64, arg: usize, index: u64) -> u32 {
    Draws::new(op, seed).at(arg, index)
}

/// [`input_at`] for many elements of one op and seed: the op's arguments and
/// their offsets in the draw sequence are worked out once. (Worked out per
/// element, they were most of a server's CPU time under report load: the
/// argument list is a few heap allocations, and a recomputed output reads
/// 2K inputs.)
struct Draws<'a> {
    op: &'a Op,
    seed: u64,
    specs: Vec<ArgSpec>,
    offsets: Vec<u64>,
}

impl<'a> Draws<'a> {
    fn new(op: &'a Op, seed: u64) -> Draws<'a> {
        let specs = op.args();
        let offsets = specs.iter().scan(0u64, |o, a| Some(std::mem::replace(o, *o + a.elems()))).collect();
        Draws { op, seed, specs, offsets }
    }

    fn at(&self, arg: usize, index: u64) -> u32 {
        let u = draw_at(self.seed, self.offsets[arg] + index);
        if self.specs[arg].name == "Mn" {
            return minimum(self.specs[arg].dtype, u, self.at(arg - 1, index));
        }
        element(self.op, &self.specs[arg], u)
    }
}

/// Output element `index` (flat, row-major) of `op` on [`inputs`]`(op, seed)`:
/// the f64 reference value and its rounding scale `‖row‖·‖col‖`, in O(K).
pub fn output_at(op: &Op, seed: u64, index: u64) -> (f64, f64) {
    let draws = Draws::new(op, seed);
    let (_, m, k, n) = op.bmkn();
    let (m, k, n) = (m as u64, k as u64, n as u64);
    let (bi, i, j) = (index / (m * n), (index / n) % m, index % n);
    let (bias, residual) = epilogue_args(op);
    let at = |arg: Option<usize>, i: u64| arg.map_or(0.0, |a| f32::from_bits(draws.at(a, i)) as f64);
    let (bv, rv) = (at(bias, j), at(residual, index));
    if op.kind() == OpKind::MatmulI16 {
        let kw = k / 2;
        let (sum, bound) = i16_dot((0..kw).map(|p| draws.at(0, i * kw + p)), (0..kw).map(|p| draws.at(1, p * n + j)));
        let s = at(Some(2), i) * at(Some(3), j);
        return (epilogue(op.epilogue(), sum as f64 * s, bv, rv), s.abs() * bound + bv.abs() + rv.abs());
    }
    let a = |kk: u64| f32::from_bits(draws.at(0, (bi * m + i) * k + kk)) as f64;
    if op.kind().block_quantized() && !op.epilogue().is_none() {
        let arg = |x: usize, i: u64| f32::from_bits(draws.at(x, i)) as f64;
        let vpw = op.kind().values_per_word() as u64;
        let w = |row: usize, kk: usize| {
            let (row, kk) = (row as u64, kk as u64);
            let word = draws.at(1, row * (k / vpw) + kk / vpw);
            let b = row * (k / 32) + kk / 32;
            match op.kind() {
                OpKind::MatmulQ4 => (((word >> (4 * (kk % 8))) & 0xF) as f64 - 8.0) * arg(2, b),
                OpKind::MatmulQ4_1 => ((word >> (4 * (kk % 8))) & 0xF) as f64 * arg(2, b) + arg(3, b),
                _ => (word >> (8 * (kk % 4))) as u8 as i8 as f64 * arg(2, b),
            }
        };
        let norm = norm_arg(op);
        let gamma = |kk: usize| norm.map_or(1.0, |g| arg(g, kk as u64));
        let eps = norm.map_or(0.0, |g| arg(g + 1, 0));
        // +merge: row i merged from its parts (k·C values of P, H·C of PM and PL).
        let merged = op.merge_parts().map(|(h, c)| {
            let (h, c) = (h as u64, c as u64);
            let first = op.epilogue_first_arg() as usize;
            let p: Vec<u32> = (0..k * c).map(|x| draws.at(0, i * k * c + x)).collect();
            let pm: Vec<u32> = (0..h * c).map(|x| draws.at(first, i * h * c + x)).collect();
            let pl: Vec<u32> = (0..h * c).map(|x| draws.at(first + 1, i * h * c + x)).collect();
            merge_rows(&p, &pm, &pl, 1, h as usize, c as usize, (k / h) as usize)
        });
        let row = |kk: usize| merged.as_ref().map_or_else(|| a(kk as u64), |r| r[kk]);
        return block_output(op.epilogue(), k as usize, n as usize, j as usize, &row, &w, &gamma, eps, rv);
    }
    let (mut acc, mut ra, mut cb) = (0.0, 0.0, 0.0);
    for kk in 0..k {
        let x = a(kk);
        let y = match op.kind() {
            OpKind::Matmul | OpKind::BatchMatmul => f32::from_bits(draws.at(1, bi * k * n + kk * n + j)) as f64,
            OpKind::MatmulI16 => unreachable!("returned above"),
            OpKind::MatmulQ4 => {
                let word = draws.at(1, j * (k / 8) + kk / 8);
                let q = (word >> (4 * (kk % 8))) & 0xF;
                let s = f32::from_bits(draws.at(2, j * (k / 32) + kk / 32)) as f64;
                (q as f64 - 8.0) * s
            }
            OpKind::MatmulQ4_1 => {
                let word = draws.at(1, j * (k / 8) + kk / 8);
                let q = (word >> (4 * (kk % 8))) & 0xF;
                let b = j * (k / 32) + kk / 32;
                let [d, mn] = [2, 3].map(|arg| f32::from_bits(draws.at(arg, b)) as f64);
                q as f64 * d + mn
            }
            OpKind::MatmulQ8_0 => {
                let word = draws.at(1, j * (k / 4) + kk / 4);
                let q = (word >> (8 * (kk % 4))) as u8 as i8;
                q as f64 * f32::from_bits(draws.at(2, j * (k / 32) + kk / 32)) as f64
            }
        };
        acc += x * y;
        ra += x * x;
        cb += y * y;
    }
    let e = op.epilogue();
    if e.is_none() {
        return (acc, ra.sqrt() * cb.sqrt());
    }
    (epilogue(e, acc, bv, rv), ra.sqrt() * cb.sqrt() + bv.abs() + rv.abs())
}

/// Number of output positions a server asks a client to return.
pub const CHECK_POSITIONS: usize = 4;

/// The output positions checked for a kernel run on seed `seed`: the first
/// and last element (where tiles and remainders meet the edges) and
/// seed-chosen ones between, in increasing order, without repeats.
pub fn check_positions(op: &Op, seed: u64) -> Vec<u64> {
    let len = op.args().last().map(|a| a.elems()).unwrap_or(1);
    let mut out = vec![0, len - 1];
    let mut t = 0;
    while out.len() < CHECK_POSITIONS.min(len as usize) && t < 64 {
        let p = draw_at(seed ^ 0xC4EC_CB05_17E5_u64, t) % len;
        if !out.contains(&p) {
            out.push(p);
        }
        t += 1;
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Checks values a client reported at [`check_positions`]: `Ok` when every
/// one is finite and within the op's [`tolerance`] of the reference
/// (norm-scaled), else the position and its error.
pub fn check_samples(op: &Op, seed: u64, samples: &[f32]) -> Result<(), (u64, f64)> {
    check_samples_within(op, seed, samples, tolerance(op))
}

/// [`check_samples`] to a given tolerance (a kernel's own:
/// [`kernel_tolerance`]).
pub fn check_samples_within(op: &Op, seed: u64, samples: &[f32], tolerance: f64) -> Result<(), (u64, f64)> {
    let pos = check_positions(op, seed);
    if samples.len() != pos.len() {
        return Err((u64::MAX, f64::INFINITY));
    }
    for (&p, &got) in pos.iter().zip(samples) {
        let (want, scale) = output_at(op, seed, p);
        let err = if got.is_finite() { (got as f64 - want).abs() / scale.max(f64::MIN_POSITIVE) } else { f64::INFINITY };
        if err > tolerance {
            return Err((p, err));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_seeded_nonzero_and_poisoned() {
        let op = Op::parse("matmul", "3,5,7").unwrap();
        let a = inputs(&op, 1);
        assert_eq!(a, inputs(&op, 1));
        assert_ne!(a, inputs(&op, 2));
        assert!(a.args[0].iter().all(|&x| f32::from_bits(x) != 0.0));
        assert!(a.args[2].iter().all(|&x| x == POISON));
    }

    #[test]
    fn check_catches_nan_and_errors() {
        let op = Op::parse("matmul", "2,3,2").unwrap();
        let inp = inputs(&op, 3);
        let r = reference(&op, &inp);
        let exact: Vec<u32> = r.0.iter().map(|&x| (x as f32).to_bits()).collect();
        assert!(check(&r, &exact).ok());
        let mut bad = exact.clone();
        bad[3] = POISON;
        assert_eq!(check(&r, &bad).worst, 3);
        assert!(!check(&r, &bad).ok());
        let mut off = exact;
        off[1] = (f32::from_bits(off[1]) + 1e-2).to_bits();
        assert!(!check(&r, &off).ok());
    }

    #[test]
    fn random_access_matches_the_generated_inputs() {
        for (kind, shape) in [
            ("matmul", "3,5,7"),
            ("batch_matmul", "2,3,4,5"),
            ("matmul_q4", "2,64,3"),
            ("matmul+bias+gelu+residual", "3,5,7"),
            ("batch_matmul+relu+residual", "2,3,4,5"),
            ("matmul+bias", "4,3,5"),
            ("matmul_q4+f16", "2,64,3"),
            ("matmul_q4_1", "2,64,3"),
            ("matmul_q8_0", "3,96,5"),
            ("batch_matmul+bias+gelu+residual+f16", "2,3,4,5"),
            ("matmul_q4_1+merge+residual", "2,64,3,4,3"),
            ("matmul_q8_0+merge+swiglu", "1,32,5,2,2"),
        ] {
            let op = Op::parse(kind, shape).unwrap();
            let inp = inputs(&op, 11);
            for (a, vals) in inp.args[..inp.args.len() - 1].iter().enumerate() {
                for (i, &v) in vals.iter().enumerate() {
                    assert_eq!(input_at(&op, 11, a, i as u64), v, "{kind} arg {a} elem {i}");
                }
            }
            let (want, scale) = reference(&op, &inp);
            for p in 0..want.len() {
                let (w, s) = output_at(&op, 11, p as u64);
                assert!((w - want[p]).abs() <= 1e-12 * s.max(1.0), "{kind} output {p}: {w} vs {}", want[p]);
                assert!((s - scale[p]).abs() <= 1e-9 * s);
            }
        }
    }

    /// Two parts of one head: weights e^(PM − max) = (e^−1, 1); the merge is
    /// their weighted values over their weighted sums, worked by hand.
    #[test]
    fn merge_rows_weighs_parts_by_their_largest_scores() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        let p = bits(&[2.0, 4.0, 6.0, 8.0, 1.0, 1.0, 1.0, 1.0]);
        let (pm, pl) = (bits(&[-1.0, 0.0]), bits(&[2.0, 1.5]));
        let out = merge_rows(&p, &pm, &pl, 1, 1, 2, 4);
        let w0 = (-1.0f64).exp();
        let den = w0 * 2.0 + 1.5;
        for (d, &got) in out.iter().enumerate() {
            let want = (w0 * 2.0 * (d + 1) as f64 + 1.0) / den;
            assert!((got - want).abs() < 1e-12, "d {d}: {got} vs {want}");
        }
        // A part whose largest score is far below the others' counts for nothing.
        let (pm, pl) = (bits(&[-3.4e38, 0.0]), bits(&[0.0, 1.5]));
        let out = merge_rows(&p, &pm, &pl, 1, 1, 2, 4);
        assert!(out.iter().all(|&x| (x - 1.0 / 1.5).abs() < 1e-12), "{out:?}");
    }

    #[test]
    fn samples_accept_f32_results_and_reject_wrong_ones() {
        let op = Op::parse("matmul", "9,33,17").unwrap();
        let inp = inputs(&op, 5);
        let (want, _) = reference(&op, &inp);
        let pos = check_positions(&op, 5);
        assert_eq!(pos.len(), CHECK_POSITIONS);
        assert_eq!((pos[0], *pos.last().unwrap()), (0, 9 * 17 - 1));
        let good: Vec<f32> = pos.iter().map(|&p| want[p as usize] as f32).collect();
        assert!(check_samples(&op, 5, &good).is_ok());
        let mut bad = good.clone();
        bad[1] *= 1.01;
        assert_eq!(check_samples(&op, 5, &bad).unwrap_err().0, pos[1]);
        assert!(check_samples(&op, 5, &good[..2]).is_err());
        let mut nan = good;
        nan[0] = f32::NAN;
        assert!(check_samples(&op, 5, &nan).is_err());
        // Another seed means other inputs: the same values no longer pass.
        assert!(check_samples(&op, 6, &bad).is_err());
    }

    /// The block ops' epilogues against the formula written out on the
    /// dequantised weights, and the server's one-output path against the
    /// whole reference.
    #[test]
    fn block_epilogues_follow_their_formula() {
        let op = Op::parse("matmul_q4_1+rms_norm+swiglu+residual", "2,64,3").unwrap();
        let inp = inputs(&op, 21);
        let (out, scale) = reference(&op, &inp);
        let a = &inp.args;
        let eps = f(&a[5], 0);
        assert!(eps > 0.0099 && eps < 0.111, "E is drawn small and positive: {eps}");
        for i in 0..2 {
            let row: Vec<f64> = (0..64).map(|kk| f(&a[0], i * 64 + kk)).collect();
            let r = 1.0 / (row.iter().map(|x| x * x).sum::<f64>() / 64.0 + eps).sqrt();
            let ap: Vec<f64> = (0..64).map(|kk| row[kk] * r * f(&a[4], kk)).collect();
            for j in 0..3 {
                let dot = |wr: usize| (0..64).map(|kk| ap[kk] * dequant_q4_1(&a[1], &a[2], &a[3], 64, wr, kk)).sum::<f64>();
                let (g, u) = (dot(j), dot(3 + j));
                let want = g / (1.0 + (-g).exp()) * u + f(&a[6], i * 3 + j);
                assert!((out[i * 3 + j] - want).abs() < 1e-12, "{i},{j}: {} vs {want}", out[i * 3 + j]);
                assert!(scale[i * 3 + j] > (g / (1.0 + (-g).exp()) * u).abs());
            }
        }
        for op in ["matmul_q4_1+rms_norm+swiglu+residual", "matmul_q8_0+rms_norm", "matmul_q4+swiglu", "matmul_q4_1+residual"] {
            let op = Op::parse(op, "2,64,3").unwrap();
            let inp = inputs(&op, 33);
            let (out, scale) = reference(&op, &inp);
            for p in 0..6 {
                let (v, s) = output_at(&op, 33, p);
                assert!((v - out[p as usize]).abs() < 1e-12 && (s - scale[p as usize]).abs() < 1e-12, "{op} at {p}");
            }
        }
    }

    #[test]
    fn epilogue_reference_follows_its_formula() {
        let op = Op::parse("matmul+bias+gelu+residual", "2,3,5").unwrap();
        let inp = inputs(&op, 9);
        assert!(inp.args[2..4].iter().flatten().all(|&x| f32::from_bits(x) != 0.0), "bias and R are non-zero");
        assert!(inp.args[4].iter().all(|&x| x == POISON));
        let (plain, _) = reference(&op.base(), &Inputs { args: vec![inp.args[0].clone(), inp.args[1].clone(), inp.args[4].clone()] });
        let (want, _) = reference(&op, &inp);
        for (o, (&p, &w)) in plain.iter().zip(&want).enumerate() {
            let x = p + f(&inp.args[2], o % 5);
            let gelu = 0.5 * x * (1.0 + libm::erf(x / 2f64.sqrt()));
            assert!((gelu + f(&inp.args[3], o) - w).abs() < 1e-15, "output {o}");
        }
        // libm's erf is the f64 erf: a few exact values.
        assert_eq!(libm::erf(0.0), 0.0);
        assert!((libm::erf(1.0) - 0.842_700_792_949_714_9).abs() < 1e-16);
        assert_eq!(epilogue(Epilogue { act: Activation::Relu, ..Epilogue::NONE }, -2.0, 0.5, 0.25), 0.25);
    }

    #[test]
    fn f16_inputs_are_exact_halves_and_travel_as_two_bytes() {
        let op = Op::parse("matmul+bias+f16", "3,40,5").unwrap();
        let inp = inputs(&op, 4);
        for (spec, words) in op.args().iter().zip(&inp.args).take(3) {
            for &w in words {
                let x = f32::from_bits(w);
                assert!(x != 0.0 && half::f16::from_f32(x).to_f32() == x, "{} {x}", spec.name);
            }
            let bytes = arg_bytes(spec, words);
            assert_eq!(bytes.len(), 2 * words.len());
            assert_eq!(&arg_words(spec, &bytes), words);
        }
        // Outputs poisoned with NaN stay NaN through the f16 bytes.
        let c = &op.args()[3];
        assert!(arg_words(c, &arg_bytes(c, &inp.args[3])).iter().all(|&w| f32::from_bits(w).is_nan()));
        // The f16 tolerance takes outputs rounded to f16, which f32's does
        // not, and not an error of twice that bound on one output.
        let r = reference(&op, &inp);
        let rounded: Vec<u32> = r.0.iter().map(|&x| half::f16::from_f64(x).to_f32().to_bits()).collect();
        let (f16c, f32c) = (check_op(&op, &r, &rounded), check(&r, &rounded));
        assert!(f16c.ok() && !f32c.ok(), "{f16c:?} {f32c:?}");
        let mut far = rounded;
        far[7] = ((r.0[7] + 2.0 * TOLERANCE_F16 * r.1[7]) as f32).to_bits();
        assert_eq!(check_op(&op, &r, &far).worst, 7);
        assert!(!check_op(&op, &r, &far).ok());
    }

    #[test]
    fn dequant_follows_the_packing() {
        // Word 0 of row 0 holds nibbles 0..8 for columns 0..8: value j at bits 4j.
        let w = vec![0x7654_3210u32, 0, 0, 0];
        let s = vec![2.0f32.to_bits()];
        assert_eq!(dequant(&w, &s, 32, 0, 0), -16.0);
        assert_eq!(dequant(&w, &s, 32, 0, 7), -2.0);
        assert_eq!(dequant(&w, &s, 32, 0, 8), -16.0);
    }

    #[test]
    fn gguf_dequant_follows_the_blocks() {
        // Q4_1: D·q + Mn, nibbles in the q4 order.
        let w = vec![0x7654_3210u32, 0, 0, 0xF000_0000];
        let (d, mn) = (vec![2.0f32.to_bits()], vec![(-3.0f32).to_bits()]);
        assert_eq!(dequant_q4_1(&w, &d, &mn, 32, 0, 0), -3.0);
        assert_eq!(dequant_q4_1(&w, &d, &mn, 32, 0, 7), 11.0);
        assert_eq!(dequant_q4_1(&w, &d, &mn, 32, 0, 31), 27.0);
        // Q8_0: byte j of word i is k = 4i + j, signed.
        let w = vec![0x80FF_7F01u32, 0, 0, 0, 0, 0, 0, 0];
        let q: Vec<f64> = (0..4).map(|kk| dequant_q8_0(&w, &d, 32, 0, kk)).collect();
        assert_eq!(q, [2.0, 254.0, -2.0, -256.0]);
        // Realistic seeded blocks: positive scales, minimums near −7.5·D,
        // bytes of both signs.
        let op = Op::parse("matmul_q4_1", "1,256,64").unwrap();
        let inp = inputs(&op, 3);
        for (&d, &m) in inp.args[2].iter().zip(&inp.args[3]) {
            let (d, m) = (f32::from_bits(d), f32::from_bits(m));
            assert!(d > 0.0 && d <= 0.11 && (-8.0 * d..=-7.0 * d).contains(&m), "{d} {m}");
        }
        let q8 = Op::parse("matmul_q8_0", "1,256,64").unwrap();
        let bytes: Vec<i8> = inputs(&q8, 3).args[1].iter().flat_map(|w| w.to_le_bytes()).map(|b| b as i8).collect();
        assert!(bytes.iter().any(|&b| b < -100) && bytes.iter().any(|&b| b > 100));
    }
}
