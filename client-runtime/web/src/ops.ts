// The ops webtune kernels compute and their arguments in ABI order
// (README, "Ops"). Mirrors `webtune_compiler::Op::args`.

/** The base ops. */
export type BaseOp = 'matmul' | 'batch_matmul' | 'matmul_q4' | 'matmul_i16';

/**
 * An op a kernel computes: a base op, or matmul / batch_matmul / matmul_i16
 * with a fused epilogue suffix (README, "Ops"): `+bias`, then `+gelu` or
 * `+relu`, then `+residual`, e.g. `matmul+bias+gelu`. The kernel computes
 * `C = act(A·B + bias) + R` (for matmul_i16, A·B is `SA[m]·SB[n]·Σₖ qa·qb`).
 */
export type OpName = BaseOp | `${'matmul' | 'batch_matmul' | 'matmul_i16'}+${string}`;

/** A parsed op name. Mirrors `webtune_compiler::op::parse_name`. */
export interface ParsedOp {
  base: BaseOp;
  bias: boolean;
  act: 'none' | 'gelu' | 'relu';
  residual: boolean;
}

/** Splits `matmul+bias+gelu` into its base op and epilogue; throws one line on a bad name. */
export function parseOp(op: string): ParsedOp {
  const [base, ...rest] = op.split('+');
  if (!(base in DIMS)) {
    throw new Error(`unknown op \`${op}\`: use matmul, batch_matmul, matmul_q4 or matmul_i16`);
  }
  const out: ParsedOp = { base: base as BaseOp, bias: false, act: 'none', residual: false };
  const rank: Record<string, number> = { bias: 1, gelu: 2, relu: 2, residual: 3 };
  let last = 0;
  for (const p of rest) {
    const r = rank[p];
    if (r === undefined || r <= last) {
      throw new Error(
        `op \`${op}\`: an epilogue is \`+bias\`, then \`+gelu\` or \`+relu\`, then \`+residual\`, each at most once and in that order, e.g. matmul+bias+gelu`,
      );
    }
    last = r;
    if (p === 'bias') out.bias = true;
    else if (p === 'residual') out.residual = true;
    else out.act = p as 'gelu' | 'relu';
  }
  if (rest.length > 0 && base === 'matmul_q4') {
    throw new Error('matmul_q4 takes no epilogue: only matmul, batch_matmul and matmul_i16 do');
  }
  return out;
}

export interface ArgSpec {
  name: string;
  dtype: 'f32' | 'u32';
  shape: number[];
  elems: number;
  /**
   * matmul_i16's A and B: seeded test words hold two 16-bit values within
   * ±this (`webtune_compiler::reference::i16_bound(K)`), so no sum of K
   * products leaves i32. Absent for every other argument.
   */
  i16Bound?: number;
}

const DIMS: Record<BaseOp, number> = { matmul: 3, batch_matmul: 4, matmul_q4: 3, matmul_i16: 3 };

/**
 * The largest magnitude of matmul_i16 test values for a reduction over `k`:
 * ⌊√((2³¹−1)/k)⌋, at most 32767. Mirrors `webtune_compiler::reference::i16_bound`.
 */
export function i16Bound(k: number): number {
  return Math.min(32767, Math.floor(Math.sqrt(2147483647 / k)));
}

/** Throws with a message that says what to fix when `shape` does not fit `op`. */
export function checkShape(op: string, shape: readonly number[]): asserts op is OpName {
  const want = DIMS[parseOp(op).base];
  if (shape.length !== want) {
    throw new Error(`${op} takes ${want} dimensions, got ${shape.length}`);
  }
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 1 || d > 0xffffffff) {
      throw new Error(`${op} shape ${shape.join(',')}: every dimension must be a positive integer`);
    }
  }
  const base = parseOp(op).base;
  if (base === 'matmul_q4' && shape[1] % 32 !== 0) {
    throw new Error(`matmul_q4 needs K % 32 == 0, got K = ${shape[1]}`);
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

function spec(name: string, dtype: 'f32' | 'u32', shape: number[]): ArgSpec {
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
 */
export function argSpecs(op: OpName, shape: readonly number[]): ArgSpec[] {
  const [b, m, k, n] = bmkn(op, shape);
  const p = parseOp(op);
  // A, B, (matmul_i16: SA [M], SB [N]), then the epilogue's bias [N] and R (shaped like C), then C.
  const fused = (a: ArgSpec, bb: ArgSpec, c: ArgSpec): ArgSpec[] => [
    a,
    bb,
    ...(p.base === 'matmul_i16' ? [spec('SA', 'f32', [m]), spec('SB', 'f32', [n])] : []),
    ...(p.bias ? [spec('bias', 'f32', [n])] : []),
    ...(p.residual ? [spec('R', 'f32', c.shape)] : []),
    c,
  ];
  switch (p.base) {
    case 'matmul':
      return fused(spec('A', 'f32', [m, k]), spec('B', 'f32', [k, n]), spec('C', 'f32', [m, n]));
    case 'batch_matmul':
      return fused(spec('A', 'f32', [b, m, k]), spec('B', 'f32', [b, k, n]), spec('C', 'f32', [b, m, n]));
    case 'matmul_i16': {
      const bound = i16Bound(k);
      return fused({ ...spec('A', 'u32', [m, k / 2]), i16Bound: bound }, { ...spec('B', 'u32', [k / 2, n]), i16Bound: bound }, spec('C', 'f32', [m, n]));
    }
    case 'matmul_q4':
      return [
        spec('A', 'f32', [m, k]),
        spec('W', 'u32', [n, k / 8]),
        spec('S', 'f32', [n, k / 32]),
        spec('C', 'f32', [m, n]),
      ];
  }
}

/** Operations of one call (a multiply-add counts two, integer ones of matmul_i16 too; an epilogue adds none, as in Rust). */
export function flops(op: OpName, shape: readonly number[]): number {
  const [b, m, k, n] = bmkn(op, shape);
  return 2 * b * m * k * n;
}
