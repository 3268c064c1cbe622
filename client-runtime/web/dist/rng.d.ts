import { type ArgSpec } from './ops.js';
/** NaN with a recognisable payload, written to outputs before a check run. */
export declare const POISON = 2143346349;
/** The same for an f16 output: an f16 NaN. */
export declare const POISON_F16 = 32429;
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
    /** The 64-bit state, for the Wasm filler to go on from. */
    get state(): bigint;
    set state(x: bigint);
    /** Full 64-bit draw as a BigInt (for tests). */
    nextBig(): bigint;
}
/**
 * A matmul_i16 test word from a raw 32-bit draw: each 16-bit half h becomes
 * `h mod (2r+1) − r`, and 1 where that is 0. Mirrors `reference::i16_word`.
 */
export declare function i16Word(raw: number, r: number): number;
type Filler = {
    fill: (state: bigint, from: number, to: number, mode: number) => bigint;
    mem: WebAssembly.Memory;
};
/** The Wasm filler, or null where it cannot run (it is made once, synchronously: the module is tiny). */
export declare function wasmFiller(): Filler | null;
/**
 * Fills the inputs of an op from a seed, in slices, so a large kernel's
 * inputs can be generated across several idle slots.
 */
export declare class InputGen {
    private specs;
    private useWasm;
    private rng;
    private arg;
    private pos;
    readonly args: Uint32Array<ArrayBuffer>[];
    /** `specs` are all arguments; the last (the output) is not generated. `useWasm`: false forces the JS path. */
    constructor(specs: ArgSpec[], seed: bigint, useWasm?: boolean);
    get done(): boolean;
    /** Generates up to `n` more words; returns true when all are there. */
    fill(n: number): boolean;
}
/** All inputs at once (tests and small ops). */
export declare function seededInputs(specs: ArgSpec[], seed: bigint): Uint32Array<ArrayBuffer>[];
export {};
