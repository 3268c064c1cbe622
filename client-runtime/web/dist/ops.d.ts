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
/**
 * Arguments in ABI order: inputs, then the output.
 *
 * matmul_i16 takes A (`u32[M, K/2]`), B (`u32[K/2, N]`), SA (`f32[M]`), SB
 * (`f32[N]`), the epilogue's arguments, then C (`f32[M, N]`). Each word holds
 * two signed 16-bit values, the even k in the low half:
 * `A[m, p] = qa[m][2p] | qa[m][2p+1] << 16`, `B[p, n] = qb[2p][n] | qb[2p+1][n] << 16`;
 * `C = act(SA[m]·SB[n]·S + bias[n]) + R[m, n]` with `S = Σₖ qa[m][k]·qb[k][n]`
 * summed in i32, wrapping (exact while |S| < 2³¹).
 */
export declare function argSpecs(op: OpName, shape: readonly number[]): ArgSpec[];
/** Operations of one call (a multiply-add counts two, integer ones of matmul_i16 too; an epilogue adds none, as in Rust). */
export declare function flops(op: OpName, shape: readonly number[]): number;
