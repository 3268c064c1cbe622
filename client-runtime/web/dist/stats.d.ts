export declare function median(xs: readonly number[]): number;
/** Relative noise of a sample set: 1.4826·MAD / median (a robust σ/μ). */
export declare function relNoise(xs: readonly number[]): number;
/**
 * Whether `cand` is faster than `cur` by more than the measured noise: its
 * median must be lower by twice the combined relative noise of both sample
 * sets, and by at least `floor` (1 %), so that a swap is never made on noise.
 */
export declare function fasterBeyondNoise(cand: readonly number[], cur: readonly number[], floor?: number): boolean;
/**
 * A sign test over paired timings: whether the candidate took less than
 * (1 − floor) × the kernel in use's time in more pairs than chance allows
 * (one-sided, level `alpha`, binomial at ½), i.e. whether its median ratio
 * is below 1 − floor. Unlike a test on the mean log ratio, a few pairs
 * spoiled by another process's burst cannot hide a real gain.
 */
export declare function signFaster(cur: readonly number[], cand: readonly number[], floor?: number, alpha?: number): boolean;
