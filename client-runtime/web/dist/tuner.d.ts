import { type ArgSpec, type OpName } from './ops.js';
import type { Backend, Candidate, Impl } from './types.js';
/** What the tuner learnt about one candidate. */
export interface Measurement {
    sha256: string;
    index: number;
    total: number;
    source: string;
    ticket: string;
    ok: boolean;
    /** Why the candidate failed (a load, run or output check error). */
    error?: string;
    /** Median of one call, µs (a failed candidate: its single check run, or 0 if it never ran). */
    median_us: number;
    /** Median of one call of the kernel in use, timed interleaved with this one, µs. */
    current_us: number;
    /** Relative noise (robust σ/μ) of this candidate's samples. */
    noise: number;
    runs: number;
    /** Output values at the server's check positions. */
    samples?: number[];
}
/** The host side of a tuner: the Webtune instance that owns the app's kernel. */
export interface TunerHost<I extends Impl> {
    readonly server: string;
    readonly sessionId: string;
    fetchKernel(url: string, target: 'wasm' | 'wgsl'): Promise<ArrayBuffer | string>;
    /** Makes `impl` the app's kernel. */
    adopt(tuner: KernelTuner<I>, impl: I, m: Measurement, previous: I): Promise<void>;
    measured(tuner: KernelTuner<I>, m: Measurement): void;
    reported(tuner: KernelTuner<I>, body: unknown, error?: string): void;
}
/** Parses a `candidate` event, keeping its u64 seed exact. */
export declare function parseCandidate(data: string): Candidate;
export type TunerPhase = 'waiting' | 'opening' | 'running' | 'reporting' | 'done';
export declare class KernelTuner<I extends Impl> {
    private host;
    private backend;
    readonly op: OpName;
    readonly shape: number[];
    current: I;
    readonly specs: ArgSpec[];
    phase: TunerPhase;
    currentBroken: boolean;
    readonly results: Measurement[];
    readonly notes: string[];
    total: number;
    /** Candidates to evaluate at most (the queue is best first); the rest are not fetched. */
    maxCandidates: number;
    private started;
    /** Timed sample pairs per candidate. */
    timedPairs: number;
    /** Fixed warm-up pairs (no JIT to wait for on a GPU), or undefined to wait until timings settle. */
    warmPairs: number | undefined;
    private reader;
    private pending;
    private ev;
    private bench;
    private abort;
    constructor(host: TunerHost<I>, backend: Backend<I>, op: OpName, shape: number[], current: I);
    get key(): string;
    note(s: string): void;
    /** Candidates evaluated so far. */
    get evaluated(): number;
    /** Candidates taken from the queue so far, evaluated or under evaluation. */
    get taken(): number;
    /** Whether a candidate is part-way through its evaluation. */
    get evaluating(): boolean;
    /** Starts reading the queue (in the background). */
    open(): void;
    /** Reads the next event and loads its kernel, in the background. */
    private pull;
    /**
     * Does the tuning work that is ready, until `deadline` (a performance.now()
     * time). Returns whether anything was done.
     */
    step(deadline: number): Promise<boolean>;
    /**
     * The report body: the five fastest that passed, then failures that ran
     * (the server flags them) while there is room. A candidate that failed to
     * load has no time to report, so it is left out.
     */
    reportBody(): {
        op: string;
        shape: number[];
        target: string;
        entries: Record<string, unknown>[];
    } | null;
    private finish;
    /** Stops reading the queue; nothing is reported. */
    cancel(): void;
}
