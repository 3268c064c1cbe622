import type { KernelMeta } from './types.js';
/** `GET /v1/rho`'s answer. */
export interface RhoResponse {
    version: string;
    margin: number;
    pairs: {
        name: string;
        meaning: string;
        op: string;
        shape: number[];
        base: {
            url: string;
            meta: KernelMeta;
        };
        variant: {
            url: string;
            meta: KernelMeta;
        };
        needs_relaxed_simd: boolean;
    }[];
}
export interface RhoResult {
    /** One `0`/`1` per pair, in the server's order ('' when it has none). */
    rho: string;
    /** variant / base median time per pair (NaN where not measured). */
    ratios: Record<string, number>;
    /** Wall time of the timing itself, warm-up included, ms (0 when cached). */
    ms: number;
    /** Fetching and compiling the pairs' kernels before it, ms. */
    setupMs: number;
    cached: boolean;
    version: string;
}
/** The whole measurement's budget; the last rounds are dropped to keep it. */
export declare const RHO_BUDGET_MS = 200;
/** The bit of one pair: the same rule as `webtune_tuner::rho_bit`. */
export declare function rhoBit(ratio: number, margin: number): '0' | '1';
/**
 * Measures ρ for Wasm on this device (or reads it from this browser's
 * cache). `relaxedSimd`: whether this engine has relaxed SIMD; pairs that
 * need it get 0 without running.
 */
export declare function measureRho(server: string, relaxedSimd: boolean, opts?: {
    useCache?: boolean;
}): Promise<RhoResult>;
