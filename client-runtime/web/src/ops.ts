// The ops webtune kernels compute and their arguments in ABI order
// (docs/ops.md). Mirrors `webtune_compiler::Op::args`.

/** The base ops. */
export type BaseOp = 'matmul' | 'batch_matmul' | 'matmul_q4' | 'matmul_i16' | 'matmul_q4_1' | 'matmul_q8_0';

/** Ops over GGUF-style blocks of 32 weights (K % 32 == 0; epilogues `+rms_norm`, `+swiglu`, `+residual`, WebGPU only). */
const BLOCK_OPS: readonly string[] = ['matmul_q4', 'matmul_q4_1', 'matmul_q8_0'];
/** Ops without an f16 form (matmul_i16 has Wasm kernels only; the GGUF formats run on both targets in f32). */
const NO_F16: readonly string[] = ['matmul_i16', 'matmul_q4_1', 'matmul_q8_0'];
/** Ops with Wasm kernels only: WGSL has no 16-bit integer dot product. */
export const WASM_ONLY: readonly string[] = ['matmul_i16'];

/**
 * An op a kernel computes: a base op, or matmul / batch_matmul / matmul_i16
 * with a fused epilogue suffix (docs/ops.md): `+bias`, then `+gelu` or
 * `+relu`, then `+residual`, e.g. `matmul+bias+gelu`. The kernel computes
 * `C = act(A·B + bias) + R` (for matmul_i16, A·B is `SA[m]·SB[n]·Σₖ qa·qb`).
 * A last `+f16` (matmul, batch_matmul, matmul_q4) stores every float
 * argument as f16: WebGPU only, on devices with `shader-f16`. The block
 * ops (matmul_q4, matmul_q4_1, matmul_q8_0) take `+rms_norm`, then
 * `+swiglu`, then `+residual` instead (a decoder's WebGPU step, f32 only):
 * `C = glu(norm(A)·Wᵀ) + R`, norm(A) = A[m]·r_m ⊙ G with
 * r_m = 1/√(mean(A[m]²) + E), glu keeping silu(gate)·up of W's rows n and N + n.
 * `+merge` (first, not with `+rms_norm`) merges A from a split attention's
 * parts: shape M,K,N,H,C, A's place taken by P [M, H, C, K/H] and PM, PL
 * [M, H, C] where G and E would be (docs/ops.md).
 */
export type OpName = BaseOp | `${'matmul' | 'batch_matmul' | 'matmul_i16' | 'matmul_q4' | 'matmul_q4_1' | 'matmul_q8_0'}+${string}`;

/** A parsed op name. Mirrors `webtune_compiler::op::parse_name`. */
export interface ParsedOp {
  base: BaseOp;
  bias: boolean;
  act: 'none' | 'gelu' | 'relu';
  residual: boolean;
  /** The block ops' `+rms_norm` (A's rows normalised by G and E first) and `+swiglu` (silu(gate)·up of 2N rows of W). */
  norm: boolean;
  glu: boolean;
  /** The block ops' `+merge`: A merged from a split attention's parts (shape M,K,N,H,C). */
  merge: boolean;
  /** The type of the float arguments. */
  dtype: 'f32' | 'f16';
}

/** Splits `matmul+bias+gelu+f16` into its base op, epilogue and float type; throws one line on a bad name. */
export function parseOp(op: string): ParsedOp {
  const [base, ...rest] = op.split('+');
  if (!(base in DIMS)) {
    throw new Error(`unknown op \`${op}\`: use matmul, batch_matmul, matmul_q4, matmul_i16, matmul_q4_1 or matmul_q8_0`);
  }
  const f16 = rest.length > 0 && rest[rest.length - 1] === 'f16';
  if (f16) rest.pop();
  const out: ParsedOp = { base: base as BaseOp, bias: false, act: 'none', residual: false, norm: false, glu: false, merge: false, dtype: f16 ? 'f16' : 'f32' };
  const rank: Record<string, number> = { merge: 1, rms_norm: 2, bias: 3, gelu: 4, relu: 4, swiglu: 4, residual: 5 };
  let last = 0;
  for (const p of rest) {
    const r = rank[p];
    if (r === undefined || r <= last) {
      throw new Error(
        `op \`${op}\`: an epilogue is \`+bias\`, then \`+gelu\` or \`+relu\`, then \`+residual\`, each at most once and in that order, e.g. matmul+bias+gelu (block-quantised ops: \`+merge\` or \`+rms_norm\`, then \`+swiglu\`, then \`+residual\`); \`+f16\` comes last`,
      );
    }
    last = r;
    if (p === 'bias') out.bias = true;
    else if (p === 'residual') out.residual = true;
    else if (p === 'rms_norm') out.norm = true;
    else if (p === 'swiglu') out.glu = true;
    else if (p === 'merge') out.merge = true;
    else out.act = p as 'gelu' | 'relu';
  }
  const block = BLOCK_OPS.includes(base);
  if (block && (out.bias || out.act !== 'none')) {
    throw new Error(`${base} takes no epilogue but \`+merge\`, \`+rms_norm\`, \`+swiglu\` and \`+residual\`: \`+bias\`, \`+gelu\` and \`+relu\` are for only matmul, batch_matmul and matmul_i16`);
  }
  if (!block && (out.norm || out.glu || out.merge)) {
    throw new Error(`${base} takes no \`+merge\`, \`+rms_norm\` or \`+swiglu\`: only matmul_q4, matmul_q4_1 and matmul_q8_0 do`);
  }
  if (out.merge && out.norm) throw new Error(`${base}: \`+merge\` and \`+rms_norm\` do not go together (the merged rows are not normalised)`);
  if (f16 && NO_F16.includes(base)) {
    throw new Error(`${base} has no f16 form: only matmul, batch_matmul and matmul_q4 do`);
  }
  if (f16 && block && rest.length > 0) throw new Error(`${base} has no f16 form with an epilogue`);
  return out;
}

export interface ArgSpec {
  name: string;
  dtype: 'f32' | 'f16' | 'u32';
  shape: number[];
  elems: number;
  /**
   * matmul_i16's A and B: seeded test words hold two 16-bit values within
   * ±this (`webtune_compiler::reference::i16_bound(K)`), so no sum of K
   * products leaves i32. Absent for every other argument.
   */
  i16Bound?: number;
}

const DIMS: Record<BaseOp, number> = { matmul: 3, batch_matmul: 4, matmul_q4: 3, matmul_i16: 3, matmul_q4_1: 3, matmul_q8_0: 3 };

/**
 * The largest magnitude of matmul_i16 test values for a reduction over `k`:
 * ⌊√((2³¹−1)/k)⌋, at most 32767. Mirrors `webtune_compiler::reference::i16_bound`.
 */
export function i16Bound(k: number): number {
  return Math.min(32767, Math.floor(Math.sqrt(2147483647 / k)));
}

/** Throws with a message that says what to fix when `shape` does not fit `op`. */
export function checkShape(op: string, shape: readonly number[]): asserts op is OpName {
  const want = parseOp(op).merge ? 5 : DIMS[parseOp(op).base];
  if (shape.length !== want) {
    throw new Error(`${op} takes ${want} dimensions, got ${shape.length}`);
  }
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 1 || d > 0xffffffff) {
      throw new Error(`${op} shape ${shape.join(',')}: every dimension must be a positive integer`);
    }
  }
  const base = parseOp(op).base;
  if (BLOCK_OPS.includes(base) && shape[1] % 32 !== 0) {
    throw new Error(`${base} needs K % 32 == 0, got K = ${shape[1]}`);
  }
  if (parseOp(op).merge && (shape[1] % shape[3] !== 0 || (shape[1] / shape[3]) % 4 !== 0)) {
    throw new Error(`${op}: K = ${shape[1]} must be H = ${shape[3]} heads of a multiple of 4 values each`);
  }
  if (base === 'matmul_i16' && (shape[1] % 2 !== 0 || shape[2] % 4 !== 0)) {
    throw new Error(`matmul_i16 needs K even and N a multiple of 4, got K = ${shape[1]}, N = ${shape[2]}`);
  }
}

/** (batch, M, K, N) of an op. */
export function bmkn(op: OpName, shape: readonly number[]): [number, number, number, number] {
  return parseOp(op).base === 'batch_matmul'
    ? [shape[0], shape[1], shape[2], shape[3]]
    : [1, shape[0], shape[1], shape[2]];
}

function spec(name: string, dtype: ArgSpec['dtype'], shape: number[]): ArgSpec {
  return { name, dtype, shape, elems: shape.reduce((a, b) => a * b, 1) };
}

/**
 * Arguments in ABI order: inputs, then the output.
 *
 * matmul_i16 takes A (`u32[M, K/2]`), B (`u32[K/2, N]`), SA (`f32[M]`), SB
 * (`f32[N]`), the epilogue's arguments, then C (`f32[M, N]`). Each word holds
 * two signed 16-bit values, the even k in the low half:
 * `A[m, p] = qa[m][2p] | qa[m][2p+1] << 16`, `B[p, n] = qb[2p][n] | qb[2p+1][n] << 16`;
 * `C = act(SA[m]·SB[n]·S + bias[n]) + R[m, n]` with `S = Σₖ qa[m][k]·qb[k][n]`
 * summed in i32: the caller's quantisation keeps every sum inside it.
 *
 * matmul_q4_1 (GGUF Q4_1) takes A, W (`u32[N, K/8]`, nibble s of word i of
 * row n is k = 8i + s), D and Mn (`f32[N, K/32]`), C:
 * `C[m][n] = Σₖ A[m][k]·(D·q + Mn)`. matmul_q8_0 (GGUF Q8_0) takes A, W
 * (`u32[N, K/4]`, byte j of word i of row n is the signed q of k = 4i + j),
 * D (`f32[N, K/32]`), C: `C[m][n] = Σₖ A[m][k]·D·q`. Both are Wasm only.
 */
export function argSpecs(op: OpName, shape: readonly number[]): ArgSpec[] {
  const [b, m, k, n] = bmkn(op, shape);
  const p = parseOp(op);
  // The float arguments' type (matmul_i16's SA, SB and C are always f32).
  const fl = p.dtype;
  // A, B, (matmul_i16: SA [M], SB [N]), then the epilogue's bias [N] and R (shaped like C), then C.
  const fused = (a: ArgSpec, bb: ArgSpec, c: ArgSpec): ArgSpec[] => [
    a,
    bb,
    ...(p.base === 'matmul_i16' ? [spec('SA', 'f32', [m]), spec('SB', 'f32', [n])] : []),
    ...(p.bias ? [spec('bias', fl, [n])] : []),
    ...(p.residual ? [spec('R', fl, c.shape)] : []),
    c,
  ];
  switch (p.base) {
    case 'matmul':
      return fused(spec('A', fl, [m, k]), spec('B', fl, [k, n]), spec('C', fl, [m, n]));
    case 'batch_matmul':
      return fused(spec('A', fl, [b, m, k]), spec('B', fl, [b, k, n]), spec('C', fl, [b, m, n]));
    case 'matmul_i16': {
      const bound = i16Bound(k);
      return fused({ ...spec('A', 'u32', [m, k / 2]), i16Bound: bound }, { ...spec('B', 'u32', [k / 2, n]), i16Bound: bound }, spec('C', 'f32', [m, n]));
    }
    case 'matmul_q4':
    case 'matmul_q4_1':
    case 'matmul_q8_0': {
      // W's rows: N, or 2N under +swiglu (gate rows, then up rows); then G [K] and E [1], R, C.
      const rows = p.glu ? 2 * n : n;
      // +merge: A's parts P [M, H, C, K/H] in A's place, PM and PL [M, H, C] where G and E go.
      const [h, c] = p.merge ? [shape[3], shape[4]] : [0, 0];
      return [
        p.merge ? spec('P', fl, [m, h, c, k / h]) : spec('A', fl, [m, k]),
        spec('W', 'u32', [rows, k / (p.base === 'matmul_q8_0' ? 4 : 8)]),
        spec(p.base === 'matmul_q4' ? 'S' : 'D', fl, [rows, k / 32]),
        ...(p.base === 'matmul_q4_1' ? [spec('Mn', 'f32', [rows, k / 32])] : []),
        ...(p.norm ? [spec('G', fl, [k]), spec('E', fl, [1])] : []),
        ...(p.merge ? [spec('PM', fl, [m, h, c]), spec('PL', fl, [m, h, c])] : []),
        ...(p.residual ? [spec('R', fl, [m, n])] : []),
        spec('C', fl, [m, n]),
      ];
    }
  }
}

/** Bytes per element of an argument. */
export function elemBytes(s: ArgSpec): number {
  return s.dtype === 'f16' ? 2 : 4;
}

const F16F = new Float32Array(1);
const F16U = new Uint32Array(F16F.buffer);

/** The f16 bits nearest `x` (ties to even; overflow to infinity, NaN stays NaN). */
export function f16Bits(x: number): number {
  F16F[0] = x;
  const u = F16U[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  const man = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (man ? 0x200 | (man >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal (or zero): the mantissa with its implicit bit, shifted right, rounded to even.
    if (e < -10) return sign;
    const m = man | 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = m & ((1 << shift) - 1);
    let h = m >>> shift;
    if (rest > half || (rest === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (man >>> 13);
  const rest = man & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++;
  return sign | h;
}

/** The value of f16 bits `h`, exactly. */
export function f16Value(h: number): number {
  const e = (h >>> 10) & 0x1f, m = h & 0x3ff;
  const v = e === 0 ? m * 2 ** -24 : e === 0x1f ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15);
  return h & 0x8000 ? -v : v;
}

/** `x` rounded to the nearest f16. */
export function f16Round(x: number): number {
  return f16Value(f16Bits(x));
}

/** Operations of one call (a multiply-add counts two, integer ones of matmul_i16 too; an epilogue adds none, +swiglu's 2N rows count, as in Rust). */
export function flops(op: OpName, shape: readonly number[]): number {
  const [b, m, k, n] = bmkn(op, shape);
  return 2 * b * m * k * n * (parseOp(op).glu ? 2 : 1);
}
