import type { KernelTuner, RemoteAnswer, RemoteEvaluator } from './tuner.js';
import type { Candidate } from './types.js';
import type { WasmImpl } from './wasm.js';
/** Whether this page can start the bench worker. */
export declare function workersAvailable(): boolean;
export declare class WorkerEvaluator implements RemoteEvaluator<WasmImpl> {
    private threads;
    private shared;
    private activity;
    private worker;
    private next;
    private waiting;
    /** Ops whose kernel in use the worker has. */
    /** The kernel in use the worker was last sent, per op (sent again when the page's differs). */
    private known;
    /**
     * `threads`: the page's pool size (the worker times threaded kernels on a
     * pool of its own that size); `shared`: whether the page's memory, and so
     * every module's import, is shared; `activity`: the page pool's words
     * saying when the app's kernels run, so that the worker times between them.
     */
    constructor(threads?: number, shared?: boolean, activity?: Int32Array<SharedArrayBuffer> | null);
    private failAll;
    evaluate(t: KernelTuner<WasmImpl>, cand: Candidate, impl: WasmImpl): Promise<RemoteAnswer>;
    close(): void;
}
