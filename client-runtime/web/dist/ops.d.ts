/** An op a kernel computes. */
export type OpName = 'matmul' | 'batch_matmul' | 'matmul_q4';
export interface ArgSpec {
    name: string;
    dtype: 'f32' | 'u32';
    shape: number[];
    elems: number;
}
/** Throws with a message that says what to fix when `shape` does not fit `op`. */
export declare function checkShape(op: string, shape: readonly number[]): asserts op is OpName;
/** (batch, M, K, N) of an op. */
export declare function bmkn(op: OpName, shape: readonly number[]): [number, number, number, number];
/** Arguments in ABI order: inputs, then the output. */
export declare function argSpecs(op: OpName, shape: readonly number[]): ArgSpec[];
/** Floating-point operations of one call (a multiply-add counts two). */
export declare function flops(op: OpName, shape: readonly number[]): number;
