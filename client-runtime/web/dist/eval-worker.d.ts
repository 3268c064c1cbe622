import { type OpName } from './ops.js';
import { type Policy, type RemoteAnswer } from './tuner.js';
import type { Backend, Candidate, Impl, KernelMeta } from './types.js';
/** One candidate to evaluate; `current` comes with an op's first request only. */
export interface EvalRequest {
    id: number;
    key: string;
    op: OpName;
    shape: number[];
    current?: Kernel;
    cand: Candidate;
    impl: Kernel;
    settings: {
        timedPairs: number;
        warmPairs: number | undefined;
        earlyReject: boolean;
        stopAfterMs: number;
        policy?: Policy;
    };
    /** Threads of the page's pool (first request): the worker times threaded kernels on a pool of its own that size. */
    threads?: number;
    /** Whether the page's modules import a shared memory (first request). */
    shared?: boolean;
    /** The page pool's activity words (first request; ThreadPool.activity). */
    activity?: Int32Array<SharedArrayBuffer>;
}
export type EvalReply = {
    id: number;
    ok: true;
    answer: RemoteAnswer;
} | {
    id: number;
    ok: false;
    error: string;
};
type Kernel = {
    sha256: string;
    meta: KernelMeta;
    module: WebAssembly.Module;
};
/**
 * The worker's state and work, apart from the messaging (so that it can be
 * tested without a worker): each op's context (its kernel in use, its
 * bench), and `evaluate`, one candidate at a time.
 */
export declare class BenchSide<I extends Impl> {
    private backend;
    private implOf;
    private ops;
    private notes;
    constructor(backend: Backend<I>, implOf: (k: Kernel) => I);
    private context;
    evaluate(r: EvalRequest): Promise<RemoteAnswer>;
}
export {};
