/** What `TextGenerator.generate` samples with (see the file's header). */
export interface Sampling {
    /** 0: greedy and deterministic. */
    temperature: number;
    /** Keep only the k most likely tokens; 0: all. */
    topK: number;
    /** Keep the smallest set of most likely tokens whose probability reaches p; 1: all. */
    topP: number;
    /** The draws' seed (a u64: a bigint, or a non-negative integer number). */
    seed: bigint | number;
}
/** The index of the first largest value (NaN never wins). */
export declare function argmax(logits: ArrayLike<number>): number;
/** A seed as the native u64: a bigint or a safe non-negative integer; throws one line otherwise. */
export declare function seedOf(seed: bigint | number): bigint;
export declare class Sampler {
    readonly sampling: Sampling;
    private state;
    /** The sort's keys and order, kept between draws (one vocabulary's worth). */
    private keys;
    constructor(sampling: Sampling);
    /** The next SplitMix64 draw in [0, 1) (53 bits). */
    uniform(): number;
    /** Whether tokens are drawn (temperature above 0), not greedy. */
    get draws(): boolean;
    /** The next token. */
    sample(logits: Float32Array): number;
    /**
     * The token that the draw `draw` (in [0, 1), from `uniform`) picks from
     * `logits` by the sampling rule (temperature above 0): `sample` with the
     * draw made elsewhere (the WebGPU backend makes it on the host and picks
     * on the GPU, or here when the GPU cannot).
     */
    pick(logits: Float32Array, draw: number): number;
}
