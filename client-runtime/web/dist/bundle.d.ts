import type { BestResponse, KernelMeta } from './types.js';
/** The bundle format this runtime reads. */
export declare const BUNDLE_FORMAT = 1;
/** One winner of `bundle.json`: the database's row and its kernel's `kernel.json`. */
export interface BundleWinner {
    op: string;
    shape: string;
    target: 'wasm' | 'wgsl';
    level: 'device' | 'arch' | 'vendor';
    level_key: string;
    space_checksum: string;
    kernel_sha256: string;
    votes: number;
    total_votes: number;
    reports: number;
    best_median_us: number;
    updated_at: number;
    meta: KernelMeta;
}
/** The portable default kernel of one covered op, shape and target. */
export interface BundleDefault {
    op: string;
    shape: string;
    target: 'wasm' | 'wgsl';
    kernel_sha256: string;
    meta: KernelMeta;
}
/** `bundle.json`. */
export interface BundleManifest {
    format: number;
    created_at: number;
    device_key?: string;
    covers: {
        op: string;
        shape: string;
        target: 'wasm' | 'wgsl';
    }[];
    winners: BundleWinner[];
    defaults: BundleDefault[];
}
/** The three lookup keys of a device. */
export interface LookupKeys {
    device_key: string;
    arch_key: string;
    vendor_key: string;
}
/**
 * The keys a device key implies: its `/`-separated prefixes (the server's
 * `DeviceKeys::from_device_key`), or null when it is not a four-part key.
 */
export declare function keysOf(deviceKey: string): LookupKeys | null;
/**
 * Threads a kernel may use on a device of this key (the tuner's
 * `Device::from_keys`): `{n}t.mt` in a CPU key's third part allows n (at
 * most MAX_THREADS); every other key 1.
 */
export declare function maxThreadsOf(deviceKey: string): number;
/** Lower-case hex SHA-256, or null where the page has no `crypto.subtle` (not a secure context). */
export declare function sha256Hex(bytes: ArrayBuffer | string): Promise<string | null>;
/** A static bundle, opened and checked: lookups and kernel bytes. */
export declare class KernelBundle {
    /** The bundle directory's URL, ending in `/`. */
    readonly url: string;
    readonly manifest: BundleManifest;
    private fetcher;
    private constructor();
    /**
     * Fetches `SHA256SUMS` and `bundle.json` from the directory at `url`
     * (relative to the page), checks the manifest against its sum and its
     * format. Any failure is one error naming the file.
     */
    static open(url: string, fetcher?: typeof fetch): Promise<KernelBundle>;
    /** Whether the bundle answers for this op, shape and target. */
    covers(op: string, shape: number[], target: 'wasm' | 'wgsl'): boolean;
    /**
     * The server's answer to `GET /v1/kernels/best`, from the bundle: the
     * most specific winner on the chain of `keys` (device, arch, vendor) that
     * a device allowed `maxThreads` threads can run, else the portable
     * default; null when the bundle does not cover the op, shape and target.
     * `url` is the kernel file's absolute URL.
     */
    best(keys: LookupKeys | null, op: string, shape: number[], target: 'wasm' | 'wgsl', maxThreads?: number): BestResponse | null;
    /** A kernel file's URL: `kernels/{sha256}.{target}` in the bundle. */
    kernelUrl(sha256: string, target: 'wasm' | 'wgsl'): string;
    /**
     * A kernel's bytes (Wasm) or text (WGSL) from the bundle, refused unless
     * they hash to `sha256`.
     */
    kernel(sha256: string, target: 'wasm' | 'wgsl'): Promise<ArrayBuffer | string>;
}
