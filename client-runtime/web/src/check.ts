// Output checks. A candidate's output is compared element-wise with the
// current kernel's on the same seeded inputs, and at a few positions with an
// f64 reference, in the norm-scaled error the compiler's tests use:
// |got − want| / (‖row of A‖₂ · ‖column of B‖₂), so only f32 rounding passes.
// For matmul_i16 the rows and columns are the dequantised ones (SA[m]·qa[m, :]
// and SB[n]·qb[:, n]), and the reference's integer sum is exact (the seeded
// inputs keep it inside the kernel's i32); |that sum| never exceeds
// ‖qa row‖·‖qb column‖, so the same scale bounds the f32 rounding of SA·SB·S.

import { type OpName, type ParsedOp, bmkn, parseOp } from './ops.js';

/** Largest norm-scaled error one f32 kernel may have against the reference. */
export const TOLERANCE = 1e-5;
/**
 * The same for an `+f16` op: four f16 rounding units (4·2⁻¹¹) plus TOLERANCE,
 * room for f16 accumulation on seeded inputs, as `reference::TOLERANCE_F16`.
 */
export const TOLERANCE_F16 = 4 / 2048 + TOLERANCE;

/**
 * What rounding A to 16 bits per block of 32 values can add to the
 * norm-scaled error, 0.51·√32/32767 ≈ 8.8e-5: a kernel whose schedule
 * quantises its activations (`quantize_a`: GGUF products on Wasm) is held
 * to this much more, as `reference::A16_ROUNDING` (docs/ops.md, "Tolerance").
 */
export const A16_ROUNDING = (0.51 * Math.sqrt(32)) / 32767;

/** The tolerance `op`'s outputs are held to; with a kernel's `config`, that kernel's (wider where it quantises A). */
export function toleranceOf(op: OpName, config?: Record<string, unknown>): number {
  return (parseOp(op).dtype === 'f16' ? TOLERANCE_F16 : TOLERANCE) + (config?.quantize_a === true ? A16_ROUNDING : 0);
}

const F = new Float32Array(1);
const U = new Uint32Array(F.buffer);
function f32(bitsValue: number): number {
  U[0] = bitsValue;
  return F[0];
}

/**
 * The f64 error function (JavaScript has none): the Maclaurin series below
 * |x| = 2.5, the continued fraction of erfc above; |error| < 1e-13, far
 * below the check's tolerance. Rust's reference uses libm's erf.
 */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let term = ax;
    let sum = ax;
    for (let n = 1; n < 100 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
      term *= (-ax * ax) / n;
      sum += term / (2 * n + 1);
    }
    return (Math.sign(x) * 2 * sum) / Math.sqrt(Math.PI);
  }
  // erfc(x) = exp(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated from the tail.
  let f = ax;
  for (let n = 60; n >= 1; n--) f = ax + n / 2 / f;
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}

/** `act(x + bias) + r` in f64, as `webtune_compiler::reference::epilogue`. */
export function epilogue(p: ParsedOp, x: number, bias: number, r: number): number {
  let v = x + bias;
  if (p.act === 'gelu') v = 0.5 * v * (1 + erf(v / Math.SQRT2));
  else if (p.act === 'relu') v = Math.max(v, 0);
  return v + r;
}

/** The signed 16-bit value `hi` (0: low half, 1: high half) of a word. */
function i16(word: number, hi: number): number {
  return hi ? word >> 16 : (word << 16) >> 16;
}

/** matmul_i16's qa[m][k] (A is u32[M, K/2], k even in the low half). */
export function qaAt(args: Uint32Array[], k: number, m: number, kk: number): number {
  return i16(args[0][m * (k >> 1) + (kk >> 1)], kk & 1);
}

/** matmul_i16's qb[k][n] (B is u32[K/2, N], k even in the low half). */
export function qbAt(args: Uint32Array[], n: number, kk: number, j: number): number {
  return i16(args[1][(kk >> 1) * n + j], kk & 1);
}

/**
 * The B operand's value at (batch, k, n), dequantised for matmul_q4
 * (S·(q−8)), matmul_q4_1 (D·q + Mn), matmul_q8_0 (D·q, q a signed byte) and
 * matmul_i16 (SB[n]·qb[k][n]).
 */
export function bAt(op: OpName, shape: readonly number[], args: Uint32Array[], bi: number, kk: number, j: number): number {
  const [, , k, n] = bmkn(op, shape);
  if (parseOp(op).base === 'matmul_i16') return f32(args[3][j]) * qbAt(args, n, kk, j);
  if (parseOp(op).base === 'matmul_q4') {
    const word = args[1][j * (k / 8) + (kk >>> 3)];
    const q = (word >>> (4 * (kk & 7))) & 0xf;
    return (q - 8) * f32(args[2][j * (k / 32) + (kk >>> 5)]);
  }
  if (parseOp(op).base === 'matmul_q4_1') {
    const word = args[1][j * (k / 8) + (kk >>> 3)];
    const q = (word >>> (4 * (kk & 7))) & 0xf;
    const blk = j * (k / 32) + (kk >>> 5);
    return q * f32(args[2][blk]) + f32(args[3][blk]);
  }
  if (parseOp(op).base === 'matmul_q8_0') {
    const word = args[1][j * (k / 4) + (kk >>> 2)];
    const q = (word << (24 - 8 * (kk & 3))) >> 24;
    return q * f32(args[2][j * (k / 32) + (kk >>> 5)]);
  }
  return f32(args[1][bi * k * n + kk * n + j]);
}

/**
 * Column norms of a block-format B (matmul_q4, matmul_q4_1, matmul_q8_0),
 * the values `bAt` dequantises, decoded a word at a time: one pass over the
 * weights, with no per-element op parsing (a language model's output head
 * is tens of millions of values, and every candidate's check computes these).
 */
export function blockColumnNorms(base: string, k: number, n: number, args: Uint32Array[], out: Float64Array): void {
  const w = args[1];
  const d = new Float32Array(args[2].buffer, args[2].byteOffset, args[2].length);
  const mn = base === 'matmul_q4_1' ? new Float32Array(args[3].buffer, args[3].byteOffset, args[3].length) : null;
  const blocks = k / 32;
  for (let j = 0; j < n; j++) {
    let s = 0;
    for (let b = 0; b < blocks; b++) {
      const scale = d[j * blocks + b];
      let acc = 0;
      if (base === 'matmul_q8_0') {
        const w0 = j * (k / 4) + b * 8;
        for (let i = 0; i < 8; i++) {
          const word = w[w0 + i];
          for (let sh = 0; sh < 32; sh += 8) {
            const q = (word << (24 - sh)) >> 24;
            acc += q * q;
          }
        }
        s += acc * scale * scale;
      } else if (mn) {
        const m = mn[j * blocks + b];
        const w0 = j * (k / 8) + b * 4;
        for (let i = 0; i < 4; i++) {
          const word = w[w0 + i];
          for (let sh = 0; sh < 32; sh += 4) {
            const v = ((word >>> sh) & 0xf) * scale + m;
            acc += v * v;
          }
        }
        s += acc;
      } else {
        const w0 = j * (k / 8) + b * 4;
        for (let i = 0; i < 4; i++) {
          const word = w[w0 + i];
          for (let sh = 0; sh < 32; sh += 4) {
            const q = ((word >>> sh) & 0xf) - 8;
            acc += q * q;
          }
        }
        s += acc * scale * scale;
      }
    }
    out[j] = Math.sqrt(s);
  }
}

/** Row `row` of a block-format W (matmul_q4, matmul_q4_1, matmul_q8_0) dequantised into `out` (K values), as `bAt` does. */
export function blockRow(base: string, k: number, args: Uint32Array[], row: number, out: Float64Array): void {
  const w = args[1];
  const d = new Float32Array(args[2].buffer, args[2].byteOffset, args[2].length);
  const mn = base === 'matmul_q4_1' ? new Float32Array(args[3].buffer, args[3].byteOffset, args[3].length) : null;
  const per = base === 'matmul_q8_0' ? 4 : 8;
  for (let kk = 0; kk < k; kk++) {
    const word = w[row * (k / per) + Math.floor(kk / per)];
    const blk = row * (k / 32) + (kk >>> 5);
    if (per === 4) out[kk] = ((word << (24 - 8 * (kk & 3))) >> 24) * d[blk];
    else if (mn) out[kk] = ((word >>> (4 * (kk & 7))) & 0xf) * d[blk] + mn[blk];
    else out[kk] = (((word >>> (4 * (kk & 7))) & 0xf) - 8) * d[blk];
  }
}

/**
 * `+merge`'s rows of A in f64 (`reference::merge_rows`): per row and head,
 * Σ_c w_c·P / Σ_c w_c·PL with w_c = e^(PM_c − max PM); P is args[0], PM and
 * PL args[first] and args[first + 1]; shape M,K,N,H,C.
 */
function mergeRows(args: Uint32Array[], shape: readonly number[], first: number): Float64Array {
  const [m, k, , h, c] = shape;
  const d = k / h;
  const view = (x: Uint32Array) => new Float32Array(x.buffer, x.byteOffset, x.length);
  const pv = view(args[0]), pm = view(args[first]), pl = view(args[first + 1]);
  const out = new Float64Array(m * k), w = new Float64Array(c);
  for (let i = 0; i < m; i++) {
    for (let hh = 0; hh < h; hh++) {
      const part0 = (i * h + hh) * c;
      let top = -Infinity;
      for (let cc = 0; cc < c; cc++) top = Math.max(top, pm[part0 + cc]);
      let den = 0;
      for (let cc = 0; cc < c; cc++) {
        w[cc] = Math.exp(pm[part0 + cc] - top);
        den += w[cc] * pl[part0 + cc];
      }
      for (let dd = 0; dd < d; dd++) {
        let num = 0;
        for (let cc = 0; cc < c; cc++) num += w[cc] * pv[(part0 + cc) * d + dd];
        out[(i * h + hh) * d + dd] = num / den;
      }
    }
  }
  return out;
}

/** silu(x) = x / (1 + e^−x), in f64. */
function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

/**
 * The block ops' epilogues (`glu(norm(A)·Wᵀ) + R`, docs/ops.md) as the
 * checks need them, as `reference::block_output` computes them: A's rows
 * as the product reads them (normalised by G and E under `+rms_norm`), and
 * under `+swiglu` each output's gate and up products.
 */
interface BlockEpilogue {
  /** A's rows as the product reads them, [M][K]. */
  rows: Float64Array;
  gate: Float64Array | null;
  up: Float64Array | null;
}

/** Row norms of A and column norms of B: the error scale of every output. */
export class Scales {
  readonly rows: Float64Array;
  readonly cols: Float64Array;
  private m: number;
  private n: number;
  private parsed: ParsedOp;
  /** Argument numbers of the epilogue's bias and R (ABI order A, B, [SA, SB,] bias, R, C). */
  private biasArg: number;
  private residualArg: number;
  private block: BlockEpilogue | null = null;
  constructor(readonly op: OpName, readonly shape: readonly number[], readonly args: Uint32Array[]) {
    const [b, m, k, n] = bmkn(op, shape);
    this.m = m;
    this.n = n;
    this.parsed = parseOp(op);
    const p = this.parsed;
    const blockOp = ['matmul_q4', 'matmul_q4_1', 'matmul_q8_0'].includes(p.base);
    // After A, B (matmul_i16: and SA, SB; a block op: its weights' parts, then +rms_norm's G and E or +merge's PM and PL).
    const first = p.base === 'matmul_i16' ? 4 : blockOp ? (p.base === 'matmul_q4_1' ? 4 : 3) + (p.norm || p.merge ? 2 : 0) : 2;
    this.biasArg = p.bias ? first : -1;
    this.residualArg = p.residual ? first + (p.bias ? 1 : 0) : -1;
    this.rows = new Float64Array(b * m);
    this.cols = new Float64Array(b * n * (p.glu ? 2 : 1));
    if (blockOp && (p.norm || p.glu || p.residual || p.merge)) {
      this.block = this.blockEpilogue(m, k, n);
      for (let i = 0; i < m; i++) {
        let s = 0;
        for (let kk = 0; kk < k; kk++) s += this.block.rows[i * k + kk] ** 2;
        this.rows[i] = Math.sqrt(s);
      }
      blockColumnNorms(p.base, k, n * (p.glu ? 2 : 1), args, this.cols);
      return;
    }
    if (this.parsed.base === 'matmul_i16') {
      // ‖SA[i]·qa[i, :]‖ and ‖SB[j]·qb[:, j]‖, B summed row by row.
      const half = k >> 1;
      for (let i = 0; i < m; i++) {
        let s = 0;
        for (let p = 0; p < half; p++) {
          const w = args[0][i * half + p], lo = i16(w, 0), hi = i16(w, 1);
          s += lo * lo + hi * hi;
        }
        this.rows[i] = Math.abs(f32(args[2][i])) * Math.sqrt(s);
      }
      for (let p = 0; p < half; p++) {
        for (let j = 0; j < n; j++) {
          const w = args[1][p * n + j], lo = i16(w, 0), hi = i16(w, 1);
          this.cols[j] += lo * lo + hi * hi;
        }
      }
      for (let j = 0; j < n; j++) this.cols[j] = Math.abs(f32(args[3][j])) * Math.sqrt(this.cols[j]);
      return;
    }
    const a = new Float32Array(args[0].buffer, args[0].byteOffset, args[0].length);
    for (let r = 0; r < b * m; r++) {
      let s = 0;
      for (let kk = 0; kk < k; kk++) s += a[r * k + kk] * a[r * k + kk];
      this.rows[r] = Math.sqrt(s);
    }
    if (['matmul_q4', 'matmul_q4_1', 'matmul_q8_0'].includes(this.parsed.base)) {
      blockColumnNorms(this.parsed.base, k, n, args, this.cols);
      return;
    }
    // Plain B [b, k, n]: summed row by row, so memory is read in order.
    const bv = new Float32Array(args[1].buffer, args[1].byteOffset, args[1].length);
    for (let bi = 0; bi < b; bi++) {
      const cols = this.cols.subarray(bi * n, (bi + 1) * n);
      for (let kk = 0; kk < k; kk++) {
        const row = (bi * k + kk) * n;
        for (let j = 0; j < n; j++) cols[j] += bv[row + j] * bv[row + j];
      }
      for (let j = 0; j < n; j++) cols[j] = Math.sqrt(cols[j]);
    }
  }

  /** A's rows as a block op's product reads them, and under +swiglu every output's gate and up. */
  private blockEpilogue(m: number, k: number, n: number): BlockEpilogue {
    const p = this.parsed, args = this.args;
    const a = new Float32Array(args[0].buffer, args[0].byteOffset, args[0].length);
    const rows = p.merge ? mergeRows(args, this.shape, p.base === 'matmul_q4_1' ? 4 : 3) : Float64Array.from(a);
    if (p.norm) {
      const g0 = p.base === 'matmul_q4_1' ? 4 : 3;
      const gamma = new Float32Array(args[g0].buffer, args[g0].byteOffset, args[g0].length);
      const eps = f32(args[g0 + 1][0]);
      for (let i = 0; i < m; i++) {
        let ss = 0;
        for (let kk = 0; kk < k; kk++) ss += rows[i * k + kk] ** 2;
        const inv = 1 / Math.sqrt(ss / k + eps);
        for (let kk = 0; kk < k; kk++) rows[i * k + kk] = rows[i * k + kk] * inv * gamma[kk];
      }
    }
    if (!p.glu) return { rows, gate: null, up: null };
    const gate = new Float64Array(m * n), up = new Float64Array(m * n), w = new Float64Array(k);
    for (let j = 0; j < 2 * n; j++) {
      blockRow(p.base, k, args, j, w);
      const into = j < n ? gate : up;
      for (let i = 0; i < m; i++) {
        let acc = 0;
        for (let kk = 0; kk < k; kk++) acc += rows[i * k + kk] * w[kk];
        into[i * n + (j % n)] = acc;
      }
    }
    return { rows, gate, up };
  }

  /** The scale of flat output index `p`. */
  at(p: number): number {
    const m = this.m, n = this.n;
    const bi = Math.floor(p / (m * n));
    const i = Math.floor(p / n) % m;
    const j = p % n;
    const [bv, rv] = this.epilogueTerms(p);
    if (this.block?.gate && this.block.up) {
      // reference::block_output's: each product's error through its factor's slope, and the exponential's rounding.
      const g = this.block.gate[p], u = this.block.up[p];
      const s = this.rows[i] * (1.1 * Math.abs(u) * this.cols[j] + (Math.abs(g) + 0.28) * this.cols[n + j]) + Math.abs(silu(g) * u) + Math.abs(rv);
      return Math.max(s, Number.MIN_VALUE);
    }
    return Math.max(this.rows[bi * m + i] * this.cols[bi * n + j] + Math.abs(bv) + Math.abs(rv), Number.MIN_VALUE);
  }

  /** The bias and residual values that output `p` adds (0 where the op has none). */
  private epilogueTerms(p: number): [number, number] {
    const bv = this.biasArg >= 0 ? f32(this.args[this.biasArg][p % this.n]) : 0;
    const rv = this.residualArg >= 0 ? f32(this.args[this.residualArg][p]) : 0;
    return [bv, rv];
  }

  /** The f64 reference of flat output index `p`, in O(K). */
  reference(p: number): number {
    const [, m, k, n] = bmkn(this.op, this.shape);
    const bi = Math.floor(p / (m * n));
    const i = Math.floor(p / n) % m;
    const j = p % n;
    const a = this.args[0];
    let acc = 0;
    if (this.block) {
      const [, rv] = this.epilogueTerms(p);
      if (this.block.gate && this.block.up) return silu(this.block.gate[p]) * this.block.up[p] + rv;
      const w = new Float64Array(k);
      blockRow(this.parsed.base, k, this.args, j, w);
      for (let kk = 0; kk < k; kk++) acc += this.block.rows[i * k + kk] * w[kk];
      return acc + rv;
    }
    if (this.parsed.base === 'matmul_i16') {
      // Σ qa·qb, exact: every product is at most 2³⁰ and K < 2²³, so each
      // partial sum is an integer below 2⁵³.
      let s = 0;
      for (let kk = 0; kk < k; kk++) s += qaAt(this.args, k, i, kk) * qbAt(this.args, n, kk, j);
      acc = f32(this.args[2][i]) * f32(this.args[3][j]) * s;
    } else {
      for (let kk = 0; kk < k; kk++) acc += f32(a[(bi * m + i) * k + kk]) * bAt(this.op, this.shape, this.args, bi, kk, j);
    }
    if (this.biasArg < 0 && this.residualArg < 0 && this.parsed.act === 'none') return acc;
    const [bv, rv] = this.epilogueTerms(p);
    return epilogue(this.parsed, acc, bv, rv);
  }
}

/** Result of a check: the largest scaled error and where it occurred. */
export interface CheckResult {
  ok: boolean;
  maxErr: number;
  worst: number;
}

/** Compares two outputs element-wise; NaN or infinity anywhere fails. */
export function compareOutputs(scales: Scales, got: Float32Array, want: Float32Array, tolerance: number): CheckResult {
  let maxErr = 0, worst = 0;
  for (let p = 0; p < got.length; p++) {
    const g = got[p], w = want[p];
    const err = Number.isFinite(g) && Number.isFinite(w) ? Math.abs(g - w) / scales.at(p) : Infinity;
    if (err > maxErr || (err === Infinity && maxErr !== Infinity)) {
      maxErr = err;
      worst = p;
    }
  }
  return { ok: maxErr <= tolerance, maxErr, worst };
}

/** Compares `got` with the f64 reference at `positions`, to `tolerance` (the op's unless given: see toleranceOf). */
export function checkPositions(scales: Scales, got: Float32Array, positions: readonly number[], tolerance = toleranceOf(scales.op)): CheckResult {
  let maxErr = 0, worst = 0;
  for (const p of positions) {
    const g = got[p];
    const err = Number.isFinite(g) ? Math.abs(g - scales.reference(p)) / scales.at(p) : Infinity;
    if (err > maxErr || (err === Infinity && maxErr !== Infinity)) {
      maxErr = err;
      worst = p;
    }
  }
  return { ok: maxErr <= tolerance, maxErr, worst };
}

/**
 * Positions to check against the reference when the server named none: the
 * first and last outputs (where tiles and remainders meet the edges) and a
 * few spread between.
 */
export function defaultPositions(len: number, count = 8): number[] {
  const out = new Set<number>([0, len - 1]);
  for (let i = 1; out.size < Math.min(count, len); i++) out.add(Math.floor((i * 0.618033988749895 * len) % len));
  return [...out].sort((a, b) => a - b);
}
