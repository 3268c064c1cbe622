// The ops webtune kernels compute and their arguments in ABI order
// (README, "Ops"). Mirrors `webtune_compiler::Op::args`.

/** An op a kernel computes. */
export type OpName = 'matmul' | 'batch_matmul' | 'matmul_q4';

export interface ArgSpec {
  name: string;
  dtype: 'f32' | 'u32';
  shape: number[];
  elems: number;
}

const DIMS: Record<OpName, number> = { matmul: 3, batch_matmul: 4, matmul_q4: 3 };

/** Throws with a message that says what to fix when `shape` does not fit `op`. */
export function checkShape(op: string, shape: readonly number[]): asserts op is OpName {
  if (!(op in DIMS)) {
    throw new Error(`unknown op \`${op}\`: use matmul, batch_matmul or matmul_q4`);
  }
  const want = DIMS[op as OpName];
  if (shape.length !== want) {
    throw new Error(`${op} takes ${want} dimensions, got ${shape.length}`);
  }
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 1 || d > 0xffffffff) {
      throw new Error(`${op} shape ${shape.join(',')}: every dimension must be a positive integer`);
    }
  }
  if (op === 'matmul_q4' && shape[1] % 32 !== 0) {
    throw new Error(`matmul_q4 needs K % 32 == 0, got K = ${shape[1]}`);
  }
}

/** (batch, M, K, N) of an op. */
export function bmkn(op: OpName, shape: readonly number[]): [number, number, number, number] {
  return op === 'batch_matmul'
    ? [shape[0], shape[1], shape[2], shape[3]]
    : [1, shape[0], shape[1], shape[2]];
}

function spec(name: string, dtype: 'f32' | 'u32', shape: number[]): ArgSpec {
  return { name, dtype, shape, elems: shape.reduce((a, b) => a * b, 1) };
}

/** Arguments in ABI order: inputs, then the output. */
export function argSpecs(op: OpName, shape: readonly number[]): ArgSpec[] {
  const [b, m, k, n] = bmkn(op, shape);
  switch (op) {
    case 'matmul':
      return [spec('A', 'f32', [m, k]), spec('B', 'f32', [k, n]), spec('C', 'f32', [m, n])];
    case 'batch_matmul':
      return [spec('A', 'f32', [b, m, k]), spec('B', 'f32', [b, k, n]), spec('C', 'f32', [b, m, n])];
    case 'matmul_q4':
      return [
        spec('A', 'f32', [m, k]),
        spec('W', 'u32', [n, k / 8]),
        spec('S', 'f32', [n, k / 32]),
        spec('C', 'f32', [m, n]),
      ];
  }
}

/** Floating-point operations of one call (a multiply-add counts two). */
export function flops(op: OpName, shape: readonly number[]): number {
  const [b, m, k, n] = bmkn(op, shape);
  return 2 * b * m * k * n;
}
