import { type ArgSpec } from './ops.js';
import type { Backend, Bench, Impl, KernelMeta } from './types.js';
type KernelFn = (...offsets: number[]) => void;
export interface WasmImpl extends Impl {
    module: WebAssembly.Module;
    /** Instance on the bench memory, made when the bench first runs it. */
    benchFn?: KernelFn;
    benchMemory?: WebAssembly.Memory;
}
/** Grows `memory` to hold at least `bytes`. */
export declare function ensureBytes(memory: WebAssembly.Memory, bytes: number): void;
export declare class WasmBackend implements Backend<WasmImpl> {
    readonly target: "wasm";
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
    private fn;
    private scratchOffset;
    private scratchBytes;
    constructor(memory: WebAssembly.Memory);
    /** Instantiates `impl` on the app's memory (growing it if the kernel needs more). */
    bind(impl: WasmImpl): Promise<void>;
    call(offsets: number[]): void;
    /** The bound function itself (fixed arity, no wrapper) when it needs no scratch. */
    get raw(): KernelFn;
}
export {};
