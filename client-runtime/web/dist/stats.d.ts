export declare function median(xs: readonly number[]): number;
/** Relative noise of a sample set: 1.4826·MAD / median (a robust σ/μ). */
export declare function relNoise(xs: readonly number[]): number;
/**
 * Whether `cand` is faster than `cur` by more than the measured noise: its
 * median must be lower by twice the combined relative noise of both sample
 * sets, and by at least `floor` (1 %), so that a swap is never made on noise.
 */
export declare function fasterBeyondNoise(cand: readonly number[], cur: readonly number[], floor?: number): boolean;
