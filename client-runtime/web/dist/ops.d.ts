/** The base ops. */
export type BaseOp = 'matmul' | 'batch_matmul' | 'matmul_q4';
/**
 * An op a kernel computes: a base op, or matmul / batch_matmul with a fused
 * epilogue suffix (README, "Ops"): `+bias`, then `+gelu` or `+relu`, then
 * `+residual`, e.g. `matmul+bias+gelu`. The kernel computes
 * `C = act(A·B + bias) + R`.
 */
export type OpName = BaseOp | `${'matmul' | 'batch_matmul'}+${string}`;
/** A parsed op name. Mirrors `webtune_compiler::op::parse_name`. */
export interface ParsedOp {
    base: BaseOp;
    bias: boolean;
    act: 'none' | 'gelu' | 'relu';
    residual: boolean;
}
/** Splits `matmul+bias+gelu` into its base op and epilogue; throws one line on a bad name. */
export declare function parseOp(op: string): ParsedOp;
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
/** Floating-point operations of one call (a multiply-add counts two; an epilogue adds none, as in Rust). */
export declare function flops(op: OpName, shape: readonly number[]): number;
