/**
 * webtune's in-browser client runtime.
 *
 * An app opens a session, asks for the kernels it needs and calls them; in
 * its idle time it calls `idle()`, and the runtime tunes those kernels on this
 * very device: it takes one candidate at a time from the server's queue,
 * checks and times it against the kernel in use, swaps in faster ones (a
 * `swap` event tells the app) and reports its top five to the server, whose
 * crowdsourced database then gives the winners to the next device like this
 * one on its first request.
 *
 * ```js
 * import { Webtune } from '/web/webtune.js';
 * const wt = await Webtune.open({ target: 'wasm', budgetMs: 8 });
 * const mm = await wt.wasmKernel('matmul', [64, 128, 256]);
 * mm.run(aOffset, bOffset, cOffset); // byte offsets in wt.memory
 * wt.addEventListener('swap', (e) => console.log(e.detail));
 * for (;;) { infer(); await wt.idle(); }
 * ```
 *
 * Rules the runtime keeps:
 * - candidates run on the runtime's own buffers (its own Wasm memory, its own
 *   GPU buffers), never on the app's, and on seeded non-zero inputs that the
 *   server can regenerate from the candidate's seed;
 * - a candidate replaces the kernel in use only when its output matches it
 *   and the f64 reference, and it is faster beyond the noise of both;
 * - `idle()` does only work that is ready (network and compilation run in the
 *   background) and stops at its budget; the one exception is a single kernel
 *   call that alone takes longer than the budget;
 * - one candidate queue is open at a time (browsers allow six HTTP/1.1
 *   connections per origin, and the app needs some);
 * - no allocation inside a timed region.
 */
import { KernelBundle } from './bundle.js';
import { type Fingerprint } from './fingerprint.js';
import { type RhoResult } from './rho.js';
import { type OpName } from './ops.js';
import { type Measurement, type Policy } from './tuner.js';
import { type Guarded, PlanGuard } from './plan-guard.js';
import type { BestResponse, Impl, KernelMeta } from './types.js';
import { type WasmImpl } from './wasm.js';
import { type GpuImpl } from './webgpu.js';
/**
 * `idle()` with no argument (and no `budgetMs` option): a slice as long as
 * the app worked since the previous call returned, at least 8 ms and at most
 * this (one kernel call that alone takes longer excepted), so that tuning
 * takes about half of a loop of `work(); await idle();` until it is done.
 */
export declare const AUTO_SLICE_MAX_MS = 500;
/**
 * A candidate tried in the app's own calls (threaded candidates always; every
 * candidate under `trials: 'all'`, as a language model asks, because a
 * kernel timed alone on the bench has its weights in cache while a model
 * streams each layer's weights from memory: a bench winner can lose there)
 * runs in every other call of the kernel (ABBA over four calls). A pair is
 * the mean call of each side over one or more such cycles, closed once both
 * sides have run for the trial's shortest sample (so a coarse timer still
 * gives usable pairs). The trial ends on the pairs' log ratios: rejected
 * when the first two pairs are TRIAL_REJECT_RATIO× or worse, or as soon as
 * the sequential test says the candidate cannot beat the kernel in use by
 * TRIAL_FLOOR, or at once when both of its calls in a cycle take
 * TRIAL_ABORT_RATIO× the kernel in use's mean call (where that is well
 * above the timer's resolution); adopted from TRIAL_MIN_PAIRS pairs on when the sequential
 * test says it is faster by the floor; at TRIAL_MAX_PAIRS (twice that
 * while its median pair is faster by the floor but the tests are not yet
 * sure), adopted only if the paired t-test or the sign test (one-sided
 * 95 % each; the sign test because a model's calls on a busy machine have
 * bursts that swamp a mean) says it is faster by the floor. TRIAL_TIMEOUT_MS without
 * enough calls ends it too (not adopted).
 */
/**
 * Fast policy: candidates a kernel gets when the server answered a winner
 * the crowd chose for this device's own key (`source` elected, or
 * provisional before the quorum, at the device level): the queue's first,
 * its closest rivals, so that the device's report still votes.
 */
export declare const CROWD_CANDIDATES = 3;
export type { Fingerprint } from './fingerprint.js';
export type { RhoResult } from './rho.js';
export { measureRho, rhoBit } from './rho.js';
export type { Measurement, Policy } from './tuner.js';
export type { BestResponse, KernelMeta } from './types.js';
export { KernelBundle } from './bundle.js';
export type { BundleManifest, BundleWinner, BundleDefault, LookupKeys } from './bundle.js';
export type { OpName } from './ops.js';
export { SentenceEncoder, type EncoderLoadOptions, type ModelConfig, type ModelManifest, type TensorEntry } from './encoder.js';
export type Target = 'wasm' | 'webgpu';
export interface OpenOptions {
    /** Base URL of the webtune server; default: this page's origin. */
    server?: string;
    target: Target;
    /** WebGPU: the app's device; kernels become pipelines on it. Requested (with timestamp-query when offered) if absent. */
    device?: GPUDevice;
    /** WebGPU: the adapter to fingerprint; default: `navigator.gpu.requestAdapter()`. */
    adapter?: GPUAdapter;
    /** Wasm: the app's memory; kernels are instantiated on it. Created (one page) if absent. */
    memory?: WebAssembly.Memory;
    /**
     * Wasm: threads one kernel may use, the calling thread included (the rest
     * are a pool of workers started once). Default: the device's cores, at
     * most 8, where the page can run Wasm threads (cross-origin isolated:
     * `Cross-Origin-Opener-Policy: same-origin` and
     * `Cross-Origin-Embedder-Policy: require-corp`); 1 where it cannot, with
     * the reason in `threads.why` and one console line. With threads the
     * memory kernels run on is shared: pass a shared `memory`
     * (`{ shared: true, maximum }`) or none. 1 turns threads off.
     */
    threads?: number;
    /** Longest time one `idle()` call may take, ms. Default 8. */
    budgetMs?: number;
    /** Tune in `idle()`. Default true. */
    tune?: boolean;
    /**
     * How candidates are chosen and timed: `'fast'` (default: family transfer
     * between buckets, a sequential test over timed pairs, the heaviest
     * kernels first, a kernel stops when its expected gain is small) or
     * `'legacy'` (every candidate in the server's order, fixed pairs), kept
     * for comparison.
     */
    policy?: Policy;
    /**
     * Wasm: evaluate candidates in a dedicated worker (inputs, checks and
     * timing included), tuning in the background while the app runs instead
     * of in `idle()`: the first `idle()` call starts it, and every call
     * returns at once. The app is never blocked by
     * a kernel being tried, and the tuning uses another core; the page only
     * fetches, compiles and swaps. Ignored where workers are unavailable.
     * Default false.
     */
    worker?: boolean;
    /**
     * Wasm: which candidates must also win in the app's own calls before they
     * replace the kernel in use (see `TrialDetail`): `'threaded'` (default,
     * fast policy) or `'all'`, for an app whose calls run in other conditions
     * than the bench's (a language model streams each layer's weights from
     * memory, the bench times a kernel on inputs that stay in cache).
     * `TextGenerator` asks for `'all'`.
     */
    trials?: 'threaded' | 'all';
    /** Tune again kernels this browser already tuned (the cache says so). Default false. */
    retune?: boolean;
    /**
     * Candidates to evaluate per kernel at most. The queue is ordered best
     * first, so a small number still finds most of the gain where compiling a
     * candidate is expensive (a software GPU, a phone on battery). Default: all.
     */
    maxCandidates?: number;
    /** Use the IndexedDB cache of winners. Default true. */
    cache?: boolean;
    /**
     * NNJIT's primitive vector for the fingerprint: a string of `0`/`1` the
     * app measured, or `'measure'` to have the runtime time the server's ρ
     * pairs on this device first (Wasm; ≤ 200 ms, once per browser: the result
     * is cached). Absent: no ρ (the key's last part is `-`).
     */
    rho?: string;
    /**
     * A static bundle (`webtune bundle export`, docs/static-bundles.md): the
     * URL of its directory, on any static host or the app's own. Best-kernel
     * lookups are answered from it (device key, then architecture, vendor,
     * portable default, as the server does); kernels are fetched from it and
     * their SHA-256 checked. Ops it does not cover go to the server. When the
     * server cannot be reached, the runtime opens without a session: kernels
     * come from the bundle (and the cache), nothing is tuned, and
     * `Webtune.offline` says why.
     */
    bundle?: string;
    /**
     * When the bundle answers lookups: `'always'` (default; the app ships it
     * to spare the server) or `'offline'` (only when the server cannot be
     * reached; the bundle is not fetched otherwise).
     */
    bundleUse?: 'always' | 'offline';
    /**
     * The device key to look up in the bundle when the server cannot be
     * reached. Default: the key the server gave this browser's fingerprint
     * last time (remembered in localStorage); without one, the bundle's
     * portable defaults.
     */
    deviceKey?: string;
}
/** `POST /v1/sessions`'s answer. */
export interface SessionInfo {
    session_id: string;
    device_key: string;
    arch_key: string;
    vendor_key: string;
    rho: string;
}
/** Where a kernel handle's first kernel came from. */
export type KernelSource = 'cache' | 'server' | 'bundle';
/** `swap` event detail: the app's kernel was replaced by a faster one. */
export interface SwapDetail {
    op: OpName;
    shape: number[];
    target: Target;
    from: string;
    to: string;
    /** Medians of one call, µs, timed interleaved: in the app's own calls when the candidate was tried there (`trial`), else on the bench's inputs. */
    from_us: number;
    to_us: number;
    speedup: number;
    /** Position of the winning candidate in the queue, and the queue's length. */
    index: number;
    total: number;
    /** performance.now() of the swap. */
    at: number;
    /** Wasm: threads the new kernel runs on (1, or its parts on the pool). */
    threads: number;
}
/**
 * `trial` event detail: a candidate that won on the bench, tried in the
 * app's own calls against the kernel in use (every other call), and whether
 * it replaced it. `bench_speedup` is what the bench measured, `app_speedup`
 * what the app's calls did (> 1: the candidate faster).
 */
export interface TrialDetail {
    op: OpName;
    shape: number[];
    target: Target;
    from: string;
    to: string;
    adopted: boolean;
    bench_speedup: number;
    app_speedup: number;
    /** Median call in the app, ms: the kernel in use, the candidate; and the pairs timed. */
    cur_ms: number;
    cand_ms: number;
    pairs: number;
    /** Whether its family vouched for it (a sibling adopted the same threaded settings), so that fewer pairs could decide. */
    vouched: boolean;
}
/** `measure` event detail: one candidate checked and timed. */
export interface MeasureDetail extends Measurement {
    op: OpName;
    shape: number[];
    target: Target;
}
/** `report` event detail: a queue drained and its top five sent. */
export interface ReportDetail {
    op: OpName;
    shape: number[];
    target: Target;
    /** The server's answer (report id, accepted, winners), or null on failure. */
    response: unknown;
    error?: string;
    /** What the report carried. */
    entries: number;
}
export interface IdleResult {
    /** Whether this call did any tuning work. */
    worked: boolean;
    /** Whether every kernel is tuned (or was not to be tuned). */
    done: boolean;
}
/** `Webtune.progress`: how far tuning is. */
export interface TuningProgress {
    /** Kernels tuned (or not to be tuned), and all kernels. */
    tuned: number;
    total: number;
    /**
     * The share of the app's kernel time that the tuning left is expected to
     * save (0..1; a rough figure: each kernel's share of the app's time ×
     * the gain its next candidate is expected to bring).
     */
    expectedGain: number;
    /** Candidates evaluated, and candidate timings taken (warm-up and timed samples), so far. */
    evaluated: number;
    timings: number;
}
/** Tuning progress of one kernel. */
export interface TuningStatus {
    op: OpName;
    shape: number[];
    phase: 'waiting' | 'opening' | 'running' | 'reporting' | 'done';
    evaluated: number;
    total: number;
    sha256: string;
    notes: string[];
}
declare abstract class KernelHandle<I extends Impl> {
    readonly op: OpName;
    readonly shape: number[];
    protected impl: I;
    /** Where the first kernel came from. */
    readonly source: KernelSource;
    /** The server's fallback level for it (null when it came from the cache). */
    readonly level: BestResponse['level'] | null;
    /** Calls since the handle was made (for the tuning order). */
    calls: number;
    /** Wasm: the app's calls timed, and their ms in all (the kernel's weight in the tuning order). */
    appCalls: number;
    appMs: number;
    /** How many times the tuner replaced the kernel. */
    swaps: number;
    constructor(op: OpName, shape: number[], impl: I, 
    /** Where the first kernel came from. */
    source: KernelSource, 
    /** The server's fallback level for it (null when it came from the cache). */
    level: BestResponse['level'] | null);
    get sha256(): string;
    get meta(): KernelMeta;
}
/**
 * A Wasm kernel on the app's memory. Binding a kernel may grow the memory
 * (to its `memory_pages_min`, and by whole pages at the end for a kernel that
 * needs scratch space), which detaches the app's typed-array views of the old
 * buffer: make views from `memory.buffer` after `kernel()` and after a `swap`
 * event, or size the memory generously up front.
 */
export declare class WasmKernel extends KernelHandle<WasmImpl> implements Guarded {
    private binding;
    private newBinding;
    /**
     * The kernel the plan guard last accepted (at first the one loaded), kept
     * bound while the kernel in use is one the guard has not judged yet.
     */
    private base;
    private onBase;
    private trialState;
    /** The binding a trial binds its candidate into: the previous kernel's after a swap (its scratch pages are reused, not grown again). */
    private spare;
    /** Runs the kernel on arguments at these byte offsets of the app's memory, in ABI order. */
    run(...offsets: number[]): void;
    /** At the end of an ABBA cycle: closes a pair when both sides ran long enough, then decides if the pairs allow it. */
    private settleTrial;
    /** Puts `binding` (holding `impl`) in use; the kernel it replaces stays as the base if the guard has not judged one yet. */
    private replace;
}
/** A WGSL kernel as a compute pipeline on the app's GPUDevice. */
export declare class GpuKernel extends KernelHandle<GpuImpl> {
    private device;
    /** The layout every kernel of this op and shape uses: bind groups made with it survive swaps. */
    readonly bindGroupLayout: GPUBindGroupLayout;
    private scratch;
    /** A bind group over the arguments, in ABI order (inputs, then the output). */
    bindGroup(buffers: GPUBuffer[]): GPUBindGroup;
    /** Records the kernel into a compute pass: pipeline, bind group 0, dispatch;
     * for a kernel of several passes (split-K across workgroups), each pass in
     * order, with the kernel's own scratch buffer at group 1. */
    dispatch(pass: GPUComputePassEncoder, bindGroup: GPUBindGroup): void;
    /** The first pass's pipeline (a kernel of several passes: use `dispatch`). */
    get pipeline(): GPUComputePipeline;
    /** The first pass's workgroup counts. */
    get workgroups(): [number, number, number];
    /** How many passes `dispatch` records (1, or 2 for split-K across workgroups). */
    get passes(): number;
}
export type Kernel = WasmKernel | GpuKernel;
export declare class Webtune extends EventTarget {
    readonly server: string;
    readonly target: Target;
    readonly fingerprint: Fingerprint;
    /**
     * `POST /v1/sessions`'s answer; when the server could not be reached
     * (`offline`), the same fields with an empty `session_id` and the keys
     * the bundle is searched with (empty when none is known).
     */
    readonly session: SessionInfo;
    /** Which source answers best-kernel lookups: the server, or the `bundle` option's bundle. */
    readonly lookups: 'server' | 'bundle';
    /** The bundle, when one is in use. */
    readonly bundle: KernelBundle | null;
    /** Why the server could not be reached, when it could not (then nothing is tuned); else null. */
    readonly offline: string | null;
    /** Why the `bundle` option's bundle was refused (the server answers instead); else null. */
    readonly bundleError: string | null;
    /** The ρ measurement behind `fingerprint.rho`, when `rho: 'measure'` ran it. */
    readonly rho: RhoResult | null;
    /** Wasm: the memory kernels run on (shared when `threads.count > 1`). */
    readonly memory: WebAssembly.Memory | null;
    /** Wasm: threads a kernel may use, and why only one when that is so. */
    readonly threads: {
        count: number;
        why?: string;
    };
    private pool;
    /** WebGPU: the device kernels run on. */
    readonly device: GPUDevice | null;
    budgetMs: number;
    /** performance.now() resolution on this page, ms. */
    readonly timerResolutionMs: number;
    private backend;
    private layouts;
    private cache;
    private kernels;
    private handles;
    private opts;
    private busy;
    private announcedDone;
    private loop;
    /** The bench worker, when the `worker` option took effect. */
    private remote;
    /**
     * The plan guard (plan-guard.ts): a model's Wasm calls that go through it
     * (`TextGenerator`'s runs) judge the kernels tuning put in, all of a call's
     * at once, and put the ones before back where the new plan is slower.
     * Each verdict is a `guard` event (`GuardDetail`).
     */
    readonly guard: PlanGuard;
    private pumping;
    private closed;
    /** The tuning policy (the `policy` option). */
    readonly policy: Policy;
    private families;
    /** When the last `idle()` call returned (performance.now()), for the automatic slice. */
    private lastIdleEnd;
    /** The session's kernel reports, sent in batches (one request of the server's rate for up to 16). */
    private reporter;
    private constructor();
    /**
     * Fingerprints this browser and opens a session with the server; with
     * the `bundle` option, opens the bundle too, and opens without a session
     * when the server cannot be reached.
     */
    static open(opts: OpenOptions): Promise<Webtune>;
    private cacheKey;
    private get serverTarget();
    /**
     * The best kernel for `op` on `shape`: this browser's cached winner, else
     * the server's best for this device (or its architecture, vendor, or the
     * portable default). The handle keeps working when tuning swaps the kernel.
     */
    kernel(op: OpName, shape: number[]): Promise<Kernel>;
    wasmKernel(op: OpName, shape: number[]): Promise<WasmKernel>;
    gpuKernel(op: OpName, shape: number[]): Promise<GpuKernel>;
    private makeKernel;
    private host;
    /**
     * A kernel's weight in the app: its calls × the time of one call (Wasm:
     * the app's own calls, timed; else the tuner's last measurement of the
     * kernel in use; else its flops at 10 GFLOP/s).
     */
    private weight;
    /** Gives every tuner its share of the app's kernel time (the fast policy's order and stop rule weigh by it). */
    private updateShares;
    /**
     * The tuners with work left, in the order `idle()` offers them its time.
     * A candidate part-way through its evaluation finishes first. Fast
     * policy: then kernels with a sibling's threaded winner still to try
     * (`transferPending`), then kernels whose family has no heavier member
     * still tuning (its winner becomes their first candidate), and among
     * those the kernel
     * whose next candidate is expected to save the most of the app's time
     * (its share of the app's time × its expected gain), so the heaviest
     * kernels are tuned first. Legacy: round robin
     * over the ops (the tuner that has taken the fewest candidates goes next;
     * ties to the op with the biggest share of the app's time).
     */
    private tunerOrder;
    /** Candidate queues streaming now (opening, or being read). */
    private streamingQueues;
    /** Whether every kernel is tuned and reported (or not to be tuned). */
    get done(): boolean;
    /**
     * How far tuning is: kernels tuned out of all, the share of the app's
     * kernel time still expected to be saved, candidates evaluated and timings
     * taken. A `tuned` event (detail: `status()`) is dispatched when every
     * kernel is tuned.
     */
    get progress(): TuningProgress;
    /** Tuning progress of every kernel. */
    status(): TuningStatus[];
    /**
     * One slice of tuning, at most `budgetMs` long. Call it between
     * inferences; it returns at once when nothing is ready (a candidate still
     * downloading or compiling) and when everything is tuned. Without
     * `budgetMs`: the `budgetMs` option when the app set one; else a slice as
     * long as the app worked since the previous call returned, at least 8 ms
     * and at most AUTO_SLICE_MAX_MS (500 ms), so that a loop of
     * `work(); await idle();` spends about half its time tuning until every
     * kernel is tuned (`progress`, the `tuned` event), then none. A single
     * kernel call longer than the slice still runs whole.
     */
    idle(budgetMs?: number): Promise<IdleResult>;
    /** The slice of an `idle()` call without a budget (see `idle`). */
    private autoSlice;
    /** Whether tuning runs in the background, in the bench worker (the `worker` option). */
    get background(): boolean;
    /**
     * Background tuning: short slices of page-side work (taking in the
     * worker's answers, sending candidates, adopting winners), a pause of a
     * few ms between them, until every kernel is tuned. Started by `idle()`
     * (and `startIdleLoop()`), again after new kernels.
     */
    private startBackground;
    private slice;
    /**
     * Calls `idle()` from requestIdleCallback (a timer where there is none)
     * until every kernel is tuned or `stopIdleLoop()` is called.
     */
    startIdleLoop(): void;
    stopIdleLoop(): void;
    private pendingKernels;
    /** Forgets this browser's cached winners (for every server and device). */
    clearCache(): Promise<void>;
    /**
     * Stops tuning; open queues are closed and no kernel is reported that was
     * not finished (the reports of finished ones waiting to go are sent).
     */
    close(): void;
}
export { ThreadPool, threadSupport, sharedImport } from './threads.js';
