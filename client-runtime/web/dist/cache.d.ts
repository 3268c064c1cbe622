import type { KernelMeta } from './types.js';
export interface CachedKernel {
    /** server | device key | op | shape | target */
    key: string;
    sha256: string;
    meta: KernelMeta;
    /** Wasm bytes or WGSL text. */
    bytes: ArrayBuffer | string;
    /** Whether this browser already tuned this kernel and reported. */
    tuned: boolean;
    /** Median of one call when it was chosen, µs (0 when never timed). */
    median_us: number;
    saved_at: number;
}
export declare class KernelCache {
    private db;
    private constructor();
    static open(enabled: boolean): Promise<KernelCache>;
    get enabled(): boolean;
    get(key: string): Promise<CachedKernel | null>;
    put(entry: CachedKernel): Promise<void>;
    clear(): Promise<void>;
}
