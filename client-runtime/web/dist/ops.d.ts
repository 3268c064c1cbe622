/** The base ops. */
export type BaseOp = 'matmul' | 'batch_matmul' | 'matmul_q4' | 'matmul_i16' | 'matmul_q4_1' | 'matmul_q8_0';
/** Ops with Wasm kernels only: WGSL has no 16-bit integer dot product. */
export declare const WASM_ONLY: readonly string[];
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
export declare function parseOp(op: string): ParsedOp;
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
/**
 * The largest magnitude of matmul_i16 test values for a reduction over `k`:
 * ⌊√((2³¹−1)/k)⌋, at most 32767. Mirrors `webtune_compiler::reference::i16_bound`.
 */
export declare function i16Bound(k: number): number;
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
 * summed in i32: the caller's quantisation keeps every sum inside it.
 *
 * matmul_q4_1 (GGUF Q4_1) takes A, W (`u32[N, K/8]`, nibble s of word i of
 * row n is k = 8i + s), D and Mn (`f32[N, K/32]`), C:
 * `C[m][n] = Σₖ A[m][k]·(D·q + Mn)`. matmul_q8_0 (GGUF Q8_0) takes A, W
 * (`u32[N, K/4]`, byte j of word i of row n is the signed q of k = 4i + j),
 * D (`f32[N, K/32]`), C: `C[m][n] = Σₖ A[m][k]·D·q`. Both are Wasm only.
 */
export declare function argSpecs(op: OpName, shape: readonly number[]): ArgSpec[];
/** Bytes per element of an argument. */
export declare function elemBytes(s: ArgSpec): number;
/** The f16 bits nearest `x` (ties to even; overflow to infinity, NaN stays NaN). */
export declare function f16Bits(x: number): number;
/** The value of f16 bits `h`, exactly. */
export declare function f16Value(h: number): number;
/** `x` rounded to the nearest f16. */
export declare function f16Round(x: number): number;
/** Operations of one call (a multiply-add counts two, integer ones of matmul_i16 too; an epilogue adds none, +swiglu's 2N rows count, as in Rust). */
export declare function flops(op: OpName, shape: readonly number[]): number;
