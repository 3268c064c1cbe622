import { type ArgSpec } from './ops.js';
/** NaN with a recognisable payload, written to outputs before a check run. */
export declare const POISON = 2143346349;
/** SplitMix64, state kept as two unsigned 32-bit halves. */
export declare class SplitMix64 {
    private s;
    private m;
    constructor(seed: bigint);
    /** High 32 bits of the last draw. */
    get outHi(): number;
    /** Low 32 bits of the last draw. */
    get outLo(): number;
    /** Draws the next 64 bits into `outHi`/`outLo`. */
    next(): void;
    /** Full 64-bit draw as a BigInt (for tests). */
    nextBig(): bigint;
}
/**
 * Fills the inputs of an op from a seed, in slices, so a large kernel's
 * inputs can be generated across several idle slots.
 */
export declare class InputGen {
    private specs;
    private rng;
    private arg;
    private pos;
    readonly args: Uint32Array<ArrayBuffer>[];
    /** `specs` are all arguments; the last (the output) is not generated. */
    constructor(specs: ArgSpec[], seed: bigint);
    get done(): boolean;
    /** Generates up to `n` more words; returns true when all are there. */
    fill(n: number): boolean;
}
/** All inputs at once (tests and small ops). */
export declare function seededInputs(specs: ArgSpec[], seed: bigint): Uint32Array<ArrayBuffer>[];
