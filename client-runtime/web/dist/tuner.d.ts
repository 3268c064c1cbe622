import { type ArgSpec, type OpName } from './ops.js';
import type { Backend, Bench, Candidate, Impl, ReportRequest } from './types.js';
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
    /** Stopped before its full timed pairs as clearly slower than the kernel in use, or no faster (its medians are from the pairs taken). */
    rejected_early?: boolean;
    /** Where the evaluation's time went (not reported to the server). */
    trace?: EvalTrace;
}
/**
 * Where one evaluation's time went: wall-clock ms from the candidate's turn
 * to the end of each phase, the ms spent inside step() (the idle slices it
 * used), how many slices, and the sample pairs warm-up and timing took.
 */
export interface EvalTrace {
    load_ms: number;
    inputs_ms: number;
    check_ms: number;
    warm_ms: number;
    done_ms: number;
    busy_ms: number;
    slices: number;
    warm_pairs: number;
    timed_pairs: number;
    /** ms inside step() by the phase each slice started in, and the longest slice. */
    busy_by_phase: Record<string, number>;
    longest_ms: number;
    longest_phase: string;
    /** Warm-up samples, ms per call: the kernel in use, the candidate. */
    warm_cur: number[];
    warm_cand: number[];
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
/** A candidate read from the queue: its bytes fetched, not yet compiled. */
export type Fetched<I> = {
    cand: Candidate;
    bytes?: ArrayBuffer | string;
    impl?: I;
    error?: string;
};
/** Parses a `candidate` event, keeping its u64 seed exact. */
export declare function parseCandidate(data: string): Candidate;
/**
 * Early rejection: a candidate slower than the kernel in use by at least
 * this ratio in each of the last REJECT_PAIRS timed pairs, with no
 * improvement in sight, stops there and is recorded with what was measured.
 */
export declare const REJECT_RATIO = 1.25;
export declare const REJECT_PAIRS = 3;
/**
 * Futility: after FUTILE_PAIRS timed pairs, a candidate that is not faster
 * than the kernel in use in the median pair stops too. A swap needs its
 * median to be lower by twice the noise (at least 1 %); with ±10 % noise per
 * pair, a candidate truly 10 % faster shows a median pair ratio of 1 or more
 * after five pairs with a probability well under 1 %.
 */
export declare const FUTILE_PAIRS = 5;
/**
 * Neither stop comes sooner than this after the candidate's first call: if
 * V8's optimizing compile is slow to arrive (busy cores), samples of the
 * baseline code can look steady and several times too slow.
 */
export declare const STOP_AFTER_MS = 30;
/** Whether the last sample is no new low: not under NEW_LOW × the least of the earlier ones. */
export declare function noNewLow(xs: readonly number[]): boolean;
/**
 * Whether warm-up is over: at least two pairs, WARM_MIN_MS since the
 * candidate first ran, and neither kernel's last sample a new low (a kernel
 * still tiering up gets faster from sample to sample; a spike upwards, from
 * a GC or another process, does not hold warm-up back).
 */
export declare function warmedUp(cur: readonly number[], cand: readonly number[], sinceFirstRunMs: number): boolean;
/**
 * Whether a candidate is clearly slower: in each of the last REJECT_PAIRS
 * pairs (timed back to back, ABBA) it took REJECT_RATIO times the kernel in
 * use or more, and its last sample is no new low (it is not still speeding up).
 */
export declare function clearlySlower(cur: readonly number[], cand: readonly number[]): boolean;
/** Whether, after FUTILE_PAIRS pairs or more, the candidate is no faster in the median pair (and not speeding up). */
export declare function futile(cur: readonly number[], cand: readonly number[]): boolean;
export type Unit = 'fill' | 'scales' | 'checkCur' | 'checkCand';
/** What an evaluation reads from (and notes in) the tuner of its op: a KernelTuner, or its stand-in in the bench worker. */
export interface EvalContext<I extends Impl> {
    readonly specs: ArgSpec[];
    readonly op: OpName;
    readonly shape: number[];
    current: I;
    currentBroken: boolean;
    readonly unitMs: Record<Unit, number>;
    noteUnit(u: Unit, ms: number): void;
    note(s: string): void;
    timedPairs: number;
    warmPairs: number | undefined;
    earlyReject: boolean;
    stopAfterMs: number;
}
/** What the bench worker answers for one candidate. */
export interface RemoteAnswer {
    result: Measurement;
    /** Whether the candidate replaced the worker's kernel in use (the page adopts it too). */
    beats: boolean;
    notes: string[];
}
/** Evaluates candidates somewhere else (a worker), one at a time in the order given. */
export interface RemoteEvaluator<I extends Impl> {
    evaluate(tuner: KernelTuner<I>, cand: Candidate, impl: I): Promise<RemoteAnswer>;
}
/** No unit seen yet: every estimate Infinity. */
export declare function unitTimes(): Record<Unit, number>;
/** Records that unit `u` took `ms`: a decaying maximum of the recent times. */
export declare function noteUnitTime(times: Record<Unit, number>, u: Unit, ms: number): void;
/** A `Measurement` of a candidate that never ran. */
export declare function failed(c: Candidate, error: string): Measurement;
export declare class Evaluation<I extends Impl> {
    private t;
    private backend;
    readonly cand: Candidate;
    private fetched;
    phase: 'load' | 'inputs' | 'check' | 'warm' | 'time' | 'done';
    result: Measurement | null;
    private gen;
    private scales;
    private curOut;
    private reps;
    private perCall;
    private turn;
    private warmMs;
    private firstRun;
    private warm;
    private timed;
    private samples;
    private rejectedEarly;
    private restarts;
    private t0;
    private ends;
    private busyMs;
    private slices;
    private busyBy;
    private longest;
    private longestPhase;
    impl: I | undefined;
    private loading;
    private loadError;
    constructor(t: EvalContext<I>, backend: Backend<I>, cand: Candidate, fetched: Fetched<I>);
    /**
     * Compiles the candidate in the background while its inputs are made. It
     * starts only when this candidate's turn comes, never while another is
     * being timed: a compile (V8's background tiers, a GPU driver's pipeline
     * build) competes for the same cores and would inflate the timings.
     */
    private startLoad;
    /** Records a failure; `us` is the time of the one run it had, if it ran. */
    private fail;
    /**
     * Does what fits before `deadline`. Unless `strict`, at least one unit of
     * work is done even when it alone overruns; a strict call starts a unit
     * only when its estimated time fits.
     */
    step(bench: Bench<I>, deadline: number, strict?: boolean): Promise<void>;
    /** Notes the end time of the phases left since `from`. */
    private markPhases;
    /** Runs one unit of work, timing it for the tuner's estimates. */
    private unit;
    private work;
    /** Whether the candidate beat the kernel in use beyond the noise of both. */
    beatsCurrent(): boolean;
}
export type TunerPhase = 'waiting' | 'opening' | 'running' | 'reporting' | 'done';
export declare class KernelTuner<I extends Impl> {
    private host;
    private backend;
    readonly op: OpName;
    readonly shape: number[];
    current: I;
    readonly specs: ArgSpec[];
    phase: TunerPhase;
    /** Opening the queue failed on a rate limit this many times; the next try not before `openAfter`. */
    private openRetries;
    private openAfter;
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
    /** Stop timing a candidate once it is clearly slower or cannot win (see `clearlySlower`, `futile`). */
    earlyReject: boolean;
    /** How long after a candidate's first call an early stop may come, ms. */
    stopAfterMs: number;
    /**
     * How long each kind of unit of work took lately, ms (a decaying maximum;
     * Infinity until seen): a strict step starts a unit only when it fits.
     */
    readonly unitMs: Record<Unit, number>;
    private reader;
    private pending;
    private ev;
    private bench;
    private abort;
    /** Where candidates are evaluated when not here (the bench worker), and the ones sent there, oldest first. */
    remote: RemoteEvaluator<I> | null;
    private jobs;
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
     * time). Returns whether anything was done. Unless `strict`, one unit of
     * work is done even if it alone overruns the deadline (so that a kernel
     * longer than the budget still gets tuned); a strict step never starts a
     * unit that it does not expect to fit.
     */
    step(deadline: number, strict?: boolean): Promise<boolean>;
    /**
     * With a remote evaluator: takes in finished answers (adopting a winner),
     * and keeps up to two candidates with the worker, so that it never waits
     * for this page between two of them. The page only fetches, compiles
     * (in the background) and adopts.
     */
    private stepRemote;
    /**
     * The report body: the five fastest that passed, then failures that ran
     * (the server flags them) while there is room. A candidate that failed to
     * load has no time to report, so it is left out.
     */
    reportBody(): ReportRequest | null;
    private finish;
    /** Stops reading the queue; nothing is reported. */
    cancel(): void;
}
