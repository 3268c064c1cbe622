import { type OpName, type ParsedOp } from './ops.js';
/** Largest norm-scaled error one f32 kernel may have against the reference. */
export declare const TOLERANCE = 0.00001;
/**
 * The same for an `+f16` op: four f16 rounding units (4·2⁻¹¹) plus TOLERANCE,
 * room for f16 accumulation on seeded inputs, as `reference::TOLERANCE_F16`.
 */
export declare const TOLERANCE_F16: number;
/**
 * What rounding A to 16 bits per block of 32 values can add to the
 * norm-scaled error, 0.51·√32/32767 ≈ 8.8e-5: a kernel whose schedule
 * quantises its activations (`quantize_a`: GGUF products on Wasm) is held
 * to this much more, as `reference::A16_ROUNDING` (docs/ops.md, "Tolerance").
 */
export declare const A16_ROUNDING: number;
/** The tolerance `op`'s outputs are held to; with a kernel's `config`, that kernel's (wider where it quantises A). */
export declare function toleranceOf(op: OpName, config?: Record<string, unknown>): number;
/**
 * The f64 error function (JavaScript has none): the Maclaurin series below
 * |x| = 2.5, the continued fraction of erfc above; |error| < 1e-13, far
 * below the check's tolerance. Rust's reference uses libm's erf.
 */
export declare function erf(x: number): number;
/** `act(x + bias) + r` in f64, as `webtune_compiler::reference::epilogue`. */
export declare function epilogue(p: ParsedOp, x: number, bias: number, r: number): number;
/** matmul_i16's qa[m][k] (A is u32[M, K/2], k even in the low half). */
export declare function qaAt(args: Uint32Array[], k: number, m: number, kk: number): number;
/** matmul_i16's qb[k][n] (B is u32[K/2, N], k even in the low half). */
export declare function qbAt(args: Uint32Array[], n: number, kk: number, j: number): number;
/**
 * The B operand's value at (batch, k, n), dequantised for matmul_q4
 * (S·(q−8)), matmul_q4_1 (D·q + Mn), matmul_q8_0 (D·q, q a signed byte) and
 * matmul_i16 (SB[n]·qb[k][n]).
 */
export declare function bAt(op: OpName, shape: readonly number[], args: Uint32Array[], bi: number, kk: number, j: number): number;
/**
 * Column norms of a block-format B (matmul_q4, matmul_q4_1, matmul_q8_0),
 * the values `bAt` dequantises, decoded a word at a time: one pass over the
 * weights, with no per-element op parsing (a language model's output head
 * is tens of millions of values, and every candidate's check computes these).
 */
export declare function blockColumnNorms(base: string, k: number, n: number, args: Uint32Array[], out: Float64Array): void;
/** Row `row` of a block-format W (matmul_q4, matmul_q4_1, matmul_q8_0) dequantised into `out` (K values), as `bAt` does. */
export declare function blockRow(base: string, k: number, args: Uint32Array[], row: number, out: Float64Array): void;
/** Row norms of A and column norms of B: the error scale of every output. */
export declare class Scales {
    readonly op: OpName;
    readonly shape: readonly number[];
    readonly args: Uint32Array[];
    readonly rows: Float64Array;
    readonly cols: Float64Array;
    private m;
    private n;
    private parsed;
    /** Argument numbers of the epilogue's bias and R (ABI order A, B, [SA, SB,] bias, R, C). */
    private biasArg;
    private residualArg;
    private block;
    constructor(op: OpName, shape: readonly number[], args: Uint32Array[]);
    /** A's rows as a block op's product reads them, and under +swiglu every output's gate and up. */
    private blockEpilogue;
    /** The scale of flat output index `p`. */
    at(p: number): number;
    /** The bias and residual values that output `p` adds (0 where the op has none). */
    private epilogueTerms;
    /** The f64 reference of flat output index `p`, in O(K). */
    reference(p: number): number;
}
/** Result of a check: the largest scaled error and where it occurred. */
export interface CheckResult {
    ok: boolean;
    maxErr: number;
    worst: number;
}
/** Compares two outputs element-wise; NaN or infinity anywhere fails. */
export declare function compareOutputs(scales: Scales, got: Float32Array, want: Float32Array, tolerance: number): CheckResult;
/** Compares `got` with the f64 reference at `positions`, to `tolerance` (the op's unless given: see toleranceOf). */
export declare function checkPositions(scales: Scales, got: Float32Array, positions: readonly number[], tolerance?: number): CheckResult;
/**
 * Positions to check against the reference when the server named none: the
 * first and last outputs (where tiles and remainders meet the edges) and a
 * few spread between.
 */
export declare function defaultPositions(len: number, count?: number): number[];
