/** Words of the control block. */
export declare const CTRL: {
    readonly GEN: 0;
    readonly MAIL: 1;
    readonly NEXT: 2;
    readonly DONE: 3;
    readonly PARTS: 4;
    readonly KERNEL: 5;
    readonly NARGS: 6;
    readonly ERROR: 7;
    readonly ARGS: 8;
    readonly BELL: 16;
    readonly APP_CALLS: 17;
    readonly APP_BUSY: 18;
    readonly WORDS: 19;
};
/**
 * Threads an app asking for `threads` wants (default: the device's cores,
 * at most 8), and how many it gets here: the same, or 1 and why.
 */
export declare function threadsWanted(threads?: number): {
    want: number;
    count: number;
    why?: string;
};
/** Whether Wasm threads can run here, and if not, why not (one line). */
export declare function threadSupport(): {
    ok: true;
} | {
    ok: false;
    why: string;
};
/** A kernel the pool can run: the caller's own `kernel_part` and its pool id. */
export interface PoolKernel {
    id: number;
    part: (...args: number[]) => void;
    /** Resolves when every worker has an instance of the kernel. */
    ready: Promise<void>;
}
export declare class ThreadPool {
    /** Threads that run parts: the caller and `size - 1` workers. */
    readonly size: number;
    private ctrl;
    private workers;
    private gen;
    private nextId;
    private pending;
    private closed;
    /** Calls run, parts run, and parts the calling thread ran itself (the rest ran on workers). */
    readonly stats: {
        calls: number;
        parts: number;
        callerParts: number;
    };
    /** A pool of `size` threads (the caller counts as one). */
    constructor(size: number);
    private reply;
    /**
     * Instantiates `module` (a threaded kernel, or any module whose `entry`
     * takes the part number last) on `memory` in every worker; `instance` is
     * the calling thread's. Calls may start at once: until a worker has
     * its instance, the caller runs that worker's share.
     */
    prepare(module: WebAssembly.Module, memory: WebAssembly.Memory, instance: WebAssembly.Instance, entry?: string): PoolKernel;
    /**
     * The words a bench worker reads to time candidates only while the app's
     * kernels are not running (`APP_CALLS`, `APP_BUSY`): on a page with
     * threads, a candidate timed while the app's kernels use the cores would
     * look slower the more threads it uses.
     */
    get activity(): Int32Array<SharedArrayBuffer>;
    /** Runs `f`, an app kernel call, marked in `activity` (every `run` is). */
    appCall(f: () => void): void;
    /**
     * Runs parts `0..parts` of `k` with these arguments and returns when all
     * are done. Synchronous: the caller runs parts itself and then spins for
     * the parts workers took (at most one part's time).
     */
    run(k: PoolKernel, args: number[], parts: number): void;
    private runParts;
    /**
     * Wakes every worker. A worker reads the bell before it looks for work and
     * waits only while the bell still has that value, so no call or message
     * can slip in between its look and its wait unnoticed.
     */
    private ring;
    close(): void;
}
/** Claims the next part of call `gen`, or -1 when there is none left (or the call is over). */
export declare function claim(c: Int32Array, gen: number, parts: number): number;
/**
 * Claims parts of call `gen` and runs each with `run` until none is left;
 * every part counts as done even if `run` throws (which then propagates).
 * Returns how many parts this thread ran.
 */
export declare function runClaimed(c: Int32Array, gen: number, parts: number, run: (part: number) => void): number;
/**
 * The same module with its memory import made shared (maximum 65536 pages),
 * so that a single-threaded kernel (ABI 1) or the encoder's fixed kernels
 * can run on the shared memory threaded kernels need: a Wasm memory import
 * matches only a memory of the same sharedness. Only the import section
 * changes; bytes that already import a shared memory come back as they are.
 */
export declare function sharedImport(bytes: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer>;
/**
 * Times `sample` (ms) while the app's kernels are not running, by the
 * page pool's `activity` words: waits up to `maxWaitMs` for the app to
 * pause, and takes the sample again (up to `tries` times) when an app
 * kernel started during it. Only for a worker (it blocks in Atomics.wait).
 */
export declare function timeQuietly(activity: Int32Array, sample: () => number, maxWaitMs?: number, tries?: number): number;
