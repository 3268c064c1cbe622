import { type ArgSpec } from './ops.js';
import { type ThreadPool } from './threads.js';
import type { Backend, Bench, Impl, KernelMeta } from './types.js';
type KernelFn = (...offsets: number[]) => void;
export interface WasmImpl extends Impl {
    module: WebAssembly.Module;
    /** Instance on the bench memory, made when the bench first runs it. */
    benchFn?: KernelFn;
    benchMemory?: WebAssembly.Memory;
}
/** A memory of `pages` pages, shared when `shared` (threads: maximum 4 GiB). */
export declare function newMemory(pages: number, shared: boolean): WebAssembly.Memory;
/** Whether `memory` is shared (its buffer a SharedArrayBuffer). */
export declare function isShared(memory: WebAssembly.Memory): boolean;
/** Parts of a threaded kernel (ABI 2), or 0 for a single-threaded one. */
export declare function threadsOf(meta: KernelMeta): number;
/** Grows `memory` to hold at least `bytes`. */
export declare function ensureBytes(memory: WebAssembly.Memory, bytes: number): void;
/**
 * Loads Wasm kernels. With `shared` (always so with a thread pool), every
 * memory is shared: single-threaded kernels are loaded with their memory
 * import made shared (a memory import matches only a memory of the same
 * sharedness), and threaded kernels run their parts on the pool. Without a
 * pool, a threaded kernel fails to load, so the tuner skips it.
 */
export declare class WasmBackend implements Backend<WasmImpl> {
    readonly pool: ThreadPool | null;
    readonly shared: boolean;
    readonly activity: Int32Array | null;
    readonly target: "wasm";
    /**
     * `activity`: in a bench worker on a page with threads, the page pool's
     * activity words; samples are then timed while the app's kernels pause.
     */
    constructor(pool?: ThreadPool | null, shared?: boolean, activity?: Int32Array | null);
    load(bytes: ArrayBuffer | string, meta: KernelMeta): Promise<WasmImpl>;
    bench(specs: ArgSpec[], meta: KernelMeta): Bench<WasmImpl>;
}
/**
 * A Wasm kernel the app calls: `run(a, b, c)` with the byte offsets of its
 * arguments in the app's memory, in ABI order. The module behind it changes
 * when the tuner finds a faster one; the call stays the same.
 */
export declare class WasmKernelBinding {
    private memory;
    private pool;
    private fn;
    private scratchOffset;
    private scratchBytes;
    constructor(memory: WebAssembly.Memory, pool?: ThreadPool | null);
    /** Instantiates `impl` on the app's memory (growing it if the kernel needs more). */
    bind(impl: WasmImpl): Promise<void>;
    call(offsets: number[]): void;
    /** The bound function itself (fixed arity, no wrapper) when it needs no scratch. */
    get raw(): KernelFn;
}
export {};
