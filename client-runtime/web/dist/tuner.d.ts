import { type ArgSpec, type OpName } from './ops.js';
import { type ReportOutcome } from './reports.js';
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
    /**
     * Its time over the kernel in use's in the app's own calls, when a trial
     * there followed the bench (`AppTrial`): `median_us` is then
     * `current_us` times this, and `bench_us` what the bench measured.
     */
    app_ratio?: number;
    bench_us?: number;
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
    /**
     * Makes `impl` the app's kernel; false when the host refused it. A host
     * that first tries the candidate in the app's own calls (`AppTrial`)
     * answers with what the trial found, adopted or not.
     */
    adopt(tuner: KernelTuner<I>, impl: I, m: Measurement, previous: I): Promise<boolean | void | AppTrial>;
    measured(tuner: KernelTuner<I>, m: Measurement): void;
    reported(tuner: KernelTuner<I>, body: unknown, error?: string): void;
    /** Sends a report (the session's `Reporter` batches them); absent: each is sent alone. */
    submit?(body: ReportRequest): Promise<ReportOutcome>;
    /**
     * Whether the kernel in use still waits for the plan guard's verdict (a
     * model's calls judge it); the tuner reports only after it, so that a
     * kernel the guard put back is not reported as the fastest (or after
     * GUARD_REPORT_WAIT_MS).
     */
    unjudged?(tuner: KernelTuner<I>): boolean;
}
/** The longest a drained queue's report waits for the plan guard's verdict on the kernel in use. */
export declare const GUARD_REPORT_WAIT_MS = 30000;
/**
 * A bench winner tried in the app's own calls against the kernel in use
 * (every other call): whether it was adopted, and each side's median call
 * there, ms (NaN when no pair was timed).
 */
export interface AppTrial {
    ok: boolean;
    cur_ms: number;
    cand_ms: number;
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
/**
 * The tuning policy. `'fast'` (the default): warm-up of at most FAST_WARM_PAIRS
 * pairs, a sequential test over the timed pairs (`sequentialVerdict`) that
 * stops a candidate as soon as it is clearly slower or clearly faster, and,
 * in the tuner, a queue re-ranked from what was measured (family hints,
 * settings shared with losers) and a stop when the expected gain is small.
 * `'legacy'`: the previous policy (server order, every candidate, up to 15
 * warm-up and 9 timed pairs, the fixed early stops only), kept for comparison.
 */
export type Policy = 'fast' | 'legacy';
/** Fast policy: warm-up ends after this many pairs or ms at most. */
export declare const FAST_WARM_PAIRS = 6;
export declare const FAST_WARM_MS = 400;
/** Fast policy: timed pairs before the sequential test may decide, and at most. */
export declare const SEQ_MIN_PAIRS = 3;
export declare const SEQ_MAX_PAIRS = 9;
/** Fast policy: an undecided candidate whose pairs so far say it is faster is timed on, up to this many pairs. */
export declare const SEQ_PROMISING_PAIRS = 18;
/** Least spread assumed for the log ratio of one pair (timer rounding, cache state): no decision on a lucky run of equal pairs. */
export declare const SEQ_MIN_SD = 0.01;
/**
 * The sequential test over paired timings (ABBA pairs, so drift hits both
 * alike): r = ln(candidate / kernel in use) per pair; with its mean and a
 * t-interval at the strict level above. `'slower'`: even the interval's
 * best end is no faster than the swap floor (the candidate cannot win);
 * `'faster'`: the interval's worst end is faster than the floor (it wins; the
 * swap rule on medians still decides). Undefined: keep timing.
 */
export declare function sequentialVerdict(cur: readonly number[], cand: readonly number[], floor?: number): 'slower' | 'faster' | undefined;
/**
 * The swap rule of the fast policy, at the end of a candidate's timing: the
 * mean of ln(candidate / kernel in use) over its timed pairs is below
 * ln(1 − floor) at one-sided 95 % (Student's t, spread at least SEQ_MIN_SD).
 * The pairs' ratios, not the two sets' spreads, carry the comparison: the
 * noise shared by a pair (a busy core, a GC) cancels.
 */
/** The mean of ln(candidate / kernel in use) over the pairs (NaN without any). */
export declare function meanLogRatio(cur: readonly number[], cand: readonly number[]): number;
export declare function pairedFaster(cur: readonly number[], cand: readonly number[], floor?: number): boolean;
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
    /** The policy (absent: `'fast'`). */
    policy?: Policy;
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
    /** Whether the fast policy applies (see `Policy`). */
    private get fast();
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
    /**
     * Whether the candidate beat the kernel in use. Legacy: its median is
     * lower beyond the noise of both sample sets (`fasterBeyondNoise`). Fast:
     * the paired test (`pairedFaster`) says it is faster by the 1 % floor at
     * one-sided 95 %, from the ratios of its timed pairs.
     */
    beatsCurrent(): boolean;
}
export type TunerPhase = 'waiting' | 'opening' | 'running' | 'reporting' | 'done';
/** Fast policy: a kernel is evaluated against this many candidates at least before it may stop. */
export declare const MIN_EVALUATED = 4;
/**
 * Fast policy: the share of a kernel's time that its next candidate is
 * expected to save when nothing is known (the lite space's head often wins
 * 20-40 %), divided by (1 + the candidates measured since the last win)²:
 * the queue is ranked best first, so a run of losers says the rest lose too.
 */
export declare const GAIN_PRIOR = 0.3;
/**
 * Fast policy: a kernel stops (reports what it measured) once its expected
 * gain, as a share of the app's kernel time (its weight share × the gain
 * above), is under this.
 */
export declare const STOP_GAIN = 0.002;
/** Fast policy: queue positions one unit of predicted log time moves a candidate (settings shared with measured losers move it back, with winners forward). */
export declare const FEATURE_WEIGHT = 20;
/** Fast policy: a kernel does not stop while the setting model expects a waiting candidate to be this much faster than its kernel in use. */
export declare const PREDICT_MARGIN = 0.05;
/** The stop rule's optimism per setting a kernel has not measured itself (log time; see `shouldStop`). */
export declare const UNCERTAINTY = 0.1;
/**
 * Candidates read from a queue ahead of those taken (the fast policy
 * chooses among them). Lite-space queues are shorter than this, so the
 * stream usually ends and its connection closes at once: a paused stream
 * would hold one of the MAX_OPEN_QUEUES slots, and the heaviest kernels,
 * which come with the app's later buckets, could not open theirs.
 */
export declare const READ_AHEAD = 32;
/** How far apart two schedules are: 1 per differing setting, |log2| of the ratio for numbers. */
export declare function configDistance(a: Record<string, unknown> | undefined, b: Record<string, unknown> | undefined): number;
/**
 * The kernels of one op and target whose shapes differ only in batch and M
 * (a model's buckets): their tuners share what they measured. A member's
 * winner moves the nearest candidate of every other member's queue to its
 * front (measured there before any swap), and every member's measurements
 * re-rank the others' queues by setting.
 */
export declare class Family<I extends Impl> {
    readonly members: KernelTuner<I>[];
    /** The family of `op` at `shape` (`K` and `N` kept, batch and `M` dropped) on `target`. */
    static key(op: OpName, shape: readonly number[], target: string): string;
}
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
    /** Timed sample pairs per candidate (at most, under the fast policy). */
    timedPairs: number;
    /** Fixed warm-up pairs (no JIT to wait for on a GPU), or undefined to wait until timings settle. */
    warmPairs: number | undefined;
    /** Stop timing a candidate once it is clearly slower or cannot win (see `clearlySlower`, `futile`, `sequentialVerdict`). */
    earlyReject: boolean;
    /** How long after a candidate's first call an early stop may come, ms. */
    stopAfterMs: number;
    /** The policy (see `Policy`); set before the first step. */
    policy: Policy;
    /** This kernel's share of the app's kernel time (0..1), kept up to date by the host; weighs the stop rule. */
    share: number;
    /** The family this kernel belongs to, if any (set with `join`). */
    family: Family<I> | null;
    /**
     * How long each kind of unit of work took lately, ms (a decaying maximum;
     * Infinity until seen): a strict step starts a unit only when it fits.
     */
    readonly unitMs: Record<Unit, number>;
    private reader;
    /** Candidates read from the queue and not yet taken, in the server's order. */
    private waiting;
    private streamDone;
    /** Sibling winners (their settings as JSON) whose nearest candidate here was taken, and the candidate a winner picked. */
    private hinted;
    private hintFor;
    /** Resumes the queue's reading once a candidate is taken. */
    private readMore;
    private fetches;
    private ev;
    private bench;
    private abort;
    /** An adoption under way (the host may try the candidate in the app first); nothing else runs meanwhile. */
    private adopting;
    /** Where candidates are evaluated when not here (the bench worker), and the ones sent there, oldest first. */
    remote: RemoteEvaluator<I> | null;
    private jobs;
    /** The default kernel (the first in use), each measured kernel's time over it (log), and their settings. */
    private readonly defaultSha;
    private readonly logRel;
    private readonly configs;
    /** Candidates measured since the last swap, and the swaps. */
    sinceWin: number;
    wins: number;
    /** The last time of the kernel in use measured here, µs (0 before any). */
    currentUs: number;
    /** When the queue was found drained while the plan guard had not judged the kernel in use (0: not yet). */
    private drainedAt;
    constructor(host: TunerHost<I>, backend: Backend<I>, op: OpName, shape: number[], current: I);
    get key(): string;
    /** Joins `family` (kernels of the same op whose shapes differ only in batch and M). */
    join(family: Family<I>): void;
    note(s: string): void;
    /** Candidates evaluated so far. */
    get evaluated(): number;
    /** Candidates taken from the queue so far, evaluated or under evaluation. */
    get taken(): number;
    /** Whether a candidate is part-way through its evaluation (or its adoption). */
    get evaluating(): boolean;
    /** Whether the queue's stream is open (opening, or being read). */
    get streaming(): boolean;
    /** Candidate timings taken (warm-up and timed samples of both kernels) so far: the cost of tuning. */
    timings: number;
    /**
     * The share of this kernel's time that its next candidate is expected to
     * save: GAIN_PRIOR / (1 + candidates since the last win)²; 0 once done.
     */
    get expectedGain(): number;
    /**
     * Whether a heavier member of this kernel's family (a bigger share of the
     * app's time) is still tuning: its winner will be this kernel's first
     * candidate, so this one waits while other work is there.
     */
    get behindSibling(): boolean;
    /**
     * Whether a sibling has swapped in a threaded winner (more than one part)
     * whose settings this kernel has neither measured nor been offered: a
     * transfer to try at once (`Webtune.idle()` takes such kernels first),
     * without waiting for the sibling to finish. Threaded winners are the
     * ones whose adoption waits on trials in the app's calls, one call of a
     * bucket a loop, so each waiting sibling would add its trial's seconds
     * after the heavier one's; a single-threaded winner still waits (on one
     * thread that order tuned the heaviest bucket later: BENCHMARKS.md,
     * issue 40, 2026-12-04).
     */
    get transferPending(): boolean;
    /** The kernels in use of this kernel's siblings that are threaded winners (swapped in, with settings, more than one part). */
    private threadedSiblingWinners;
    /**
     * Whether a sibling has in use, swapped in after its own trial in the
     * app's calls, a threaded kernel of the same settings as `impl`: the
     * host then asks fewer pairs of `impl`'s trial (see
     * `TRIAL_VOUCHED_PAIRS`), the plan guard still judging the model's calls.
     */
    vouched(impl: I): boolean;
    /** Whether sibling winner `w` is still to be tried here (neither offered nor measured). */
    private pendingTransfer;
    /** Starts reading the queue (in the background). */
    open(): void;
    /**
     * Reads the queue's events in the background (events only: a candidate's
     * bytes are fetched when it is about to be taken), up to READ_AHEAD
     * candidates not yet taken (the server compiles each as it streams it),
     * so that the fast policy can take them in its own order. Stops at
     * `maxCandidates`.
     */
    private read;
    /** The candidate's bytes, fetched in the background (the kernel in use is not fetched again). */
    private fetchOf;
    /** Takes `c` off the waiting list (and lets the queue's reading go on). */
    private take;
    /** What this tuner and its siblings measured, with the weight each counts for here. */
    private known;
    /**
     * How alike a sibling's shape is (1 for the same rows): 2^(−½·|log2 of
     * the ratio of their rows (batch × M)|), so a bucket 4× larger counts half.
     */
    private nearness;
    /** The settings of the winners of this kernel's siblings (kernels they swapped in), nearest shape first. */
    private siblingWinners;
    /**
     * The next candidate to take: null when none is left (or the fast
     * policy's stop rule says so), 'wait' while the queue is still being read
     * and nothing is there yet. Legacy: the server's order. Fast: the nearest
     * candidate to each sibling's winner first, then the server's order
     * re-ranked by what this device measured (`score`).
     */
    private choose;
    /**
     * An additive model of log time by setting, fitted to what this kernel
     * and (at half weight) its siblings measured: the weighted mean log time
     * over the default kernel, and per setting (`field=value`) the weighted
     * mean deviation from it of the kernels that share it. The paper's
     * premise: a device's primitives cost the same whichever schedule uses them.
     */
    private fit;
    /** The model's log time over the default kernel for a schedule (settings never measured count 0). */
    private predict;
    /**
     * A candidate's optimistic log time over the default kernel: the model's
     * prediction less UNCERTAINTY per setting, divided by 1 + the kernels
     * measured here that share it (a sibling's shape may differ where it
     * matters: what this kernel has not tried itself may still win here).
     */
    private optimism;
    /** Fast policy: whether this kernel is tuned enough (its expected gain, weighed by its share of the app's time, is under STOP_GAIN). */
    private shouldStop;
    /** Records what a finished evaluation taught (times over the default kernel, wins). */
    private learn;
    /**
     * What a trial in the app's own calls taught: the app's ratio replaces the
     * bench's, in the setting model (so that the queue is ranked by what wins
     * in the app) and in the report (the candidate's time is the kernel in
     * use's bench time times that ratio, so that the crowd elects what won in
     * the app, not on the bench).
     */
    private learnInApp;
    /**
     * The plan guard put `impl` back in place of `lost`: the model's calls
     * ran `ratio` × slower on the plan with `lost` (and whatever else it
     * judged with it). `lost` is ranked that much behind `impl` from now on,
     * here and in the report.
     */
    reverted(impl: I, lost: I, ratio: number): void;
    /** Starts adopting `impl` (the host may first try it in the app's own calls); the tuner waits for it. */
    private adopt;
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
    /** Whether the queue has nothing left to try: reporting, done, or waiting for the plan guard's verdict to report. */
    get drained(): boolean;
    /** Whether the drained queue's report waits for the plan guard's verdict on the kernel in use (GUARD_REPORT_WAIT_MS at most). */
    private waitForGuard;
    private finish;
    /** Stops reading the queue; nothing is reported. */
    cancel(): void;
}
