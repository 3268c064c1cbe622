// Long on purpose: the public API (Webtune, the kernel handles, their events), one file that reads as its reference.
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

import { KernelBundle, keysOf, maxThreadsOf, sha256Hex } from './bundle.js';
import { KernelCache } from './cache.js';
import { type Fingerprint, fingerprint, wasmFeatures } from './fingerprint.js';
import { fetchRetrying } from './http.js';
import { Reporter } from './reports.js';
import { type RhoResult, measureRho } from './rho.js';
import { type OpName, checkShape, flops, parseOp } from './ops.js';
import { timerResolutionMs } from './timer.js';
import { type AppTrial, Family, KernelTuner, type Measurement, type Policy, type TunerHost, pairedFaster, sequentialVerdict } from './tuner.js';
import { median as medianOf, signFaster } from './stats.js';
import { type Guarded, PlanGuard } from './plan-guard.js';
import type { Backend, BestResponse, Impl, KernelMeta } from './types.js';
import { ThreadPool, threadsWanted } from './threads.js';
import { WasmBackend, type WasmImpl, WasmKernelBinding, isShared, newMemory, threadsOf } from './wasm.js';
import { WorkerEvaluator, workersAvailable } from './remote.js';
import { encodePasses, GpuBackend, type GpuImpl, GpuLayouts, Scratch } from './webgpu.js';

/**
 * Candidate queues one page streams at once (the server allows a session 8):
 * the ops beyond it wait for one to finish.
 */
const MAX_OPEN_QUEUES = 4;

/** Background tuning (`worker`): the page-side work of one slice, ms at most. */
const BACKGROUND_SLICE_MS = 4;

/**
 * `idle()` with no argument (and no `budgetMs` option): a slice as long as
 * the app worked since the previous call returned, at least 8 ms and at most
 * this (one kernel call that alone takes longer excepted), so that tuning
 * takes about half of a loop of `work(); await idle();` until it is done.
 */
export const AUTO_SLICE_MAX_MS = 500;
const AUTO_SLICE_MIN_MS = 8;

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
export const CROWD_CANDIDATES = 3;

const TRIAL_MIN_PAIRS = 6;
/**
 * A candidate vouched for by its family (a sibling of other rows adopted the
 * same threaded settings after its own trial: `KernelTuner.vouched`) is
 * adopted from this many pairs on, when the sequential test does not say
 * slower and its median pair is faster by the floor; otherwise its trial
 * goes on as any other's.
 */
const TRIAL_VOUCHED_PAIRS = 2;
const TRIAL_MAX_PAIRS = 24;
const TRIAL_FLOOR = 0.02;
const TRIAL_REJECT_RATIO = 1.25;
/** A candidate's two calls of one cycle each this many times the kernel in use's mean call end its trial at once (not adopted). */
const TRIAL_ABORT_RATIO = 1.6;
const TRIAL_TIMEOUT_MS = 20_000;
/** A trial's shortest sample per side, in timer ticks (5 µs isolated, 100 µs not): rounding stays a few %. */
const TRIAL_SAMPLE_TICKS = 20;

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

abstract class KernelHandle<I extends Impl> {
  /** Calls since the handle was made (for the tuning order). */
  calls = 0;
  /** Wasm: the app's calls timed, and their ms in all (the kernel's weight in the tuning order). */
  appCalls = 0;
  appMs = 0;
  /** How many times the tuner replaced the kernel. */
  swaps = 0;
  /** @internal */ tuner: KernelTuner<I> | null = null;

  constructor(
    readonly op: OpName,
    readonly shape: number[],
    protected impl: I,
    /** Where the first kernel came from. */
    readonly source: KernelSource,
    /** The server's fallback level for it (null when it came from the cache). */
    readonly level: BestResponse['level'] | null,
  ) {}

  get sha256(): string {
    return this.impl.sha256;
  }

  get meta(): KernelMeta {
    return this.impl.meta;
  }

  /** @internal */
  abstract adopt(impl: I): Promise<void>;
}

/**
 * A Wasm kernel on the app's memory. Binding a kernel may grow the memory
 * (to its `memory_pages_min`, and by whole pages at the end for a kernel that
 * needs scratch space), which detaches the app's typed-array views of the old
 * buffer: make views from `memory.buffer` after `kernel()` and after a `swap`
 * event, or size the memory generously up front.
 */
export class WasmKernel extends KernelHandle<WasmImpl> implements Guarded {
  /** @internal */
  constructor(op: OpName, shape: number[], impl: WasmImpl, source: KernelSource, level: BestResponse['level'] | null, private binding: WasmKernelBinding,
    private newBinding: () => WasmKernelBinding) {
    super(op, shape, impl, source, level);
  }

  /**
   * The kernel the plan guard last accepted (at first the one loaded), kept
   * bound while the kernel in use is one the guard has not judged yet.
   */
  private base: { impl: WasmImpl; binding: WasmKernelBinding } | null = null;
  private onBase = false;
  /** @internal Called when the guard puts the base back (the tuner's kernel in use follows). */
  onRevert: ((impl: WasmImpl, lost: WasmImpl, ratio: number) => void) | null = null;

  private trialState: {
    impl: WasmImpl; binding: WasmKernelBinding; turn: number; minSampleMs: number; vouched: boolean;
    /** Whether the cycle's first candidate call was TRIAL_ABORT_RATIO× slower. */
    slowFirst: boolean;
    /** The open cycle's time and calls per side, and the closed pairs (mean call, ms). */
    acc: { cur: number; cand: number; curCalls: number; candCalls: number };
    cur: number[]; cand: number[];
    end: (ok: boolean) => void;
  } | null = null;
  /** The binding a trial binds its candidate into: the previous kernel's after a swap (its scratch pages are reused, not grown again). */
  private spare: WasmKernelBinding | null = null;

  /** Runs the kernel on arguments at these byte offsets of the app's memory, in ABI order. */
  run(...offsets: number[]): void {
    this.calls++;
    if (this.onBase) {
      // The plan guard's base side: the model's call times both plans, not this kernel.
      this.base!.binding.call(offsets);
      return;
    }
    const tr = this.trialState;
    const t0 = performance.now();
    // A trial: the candidate runs every other call (ABBA), timed beside the kernel in use.
    const turn = tr ? tr.turn++ % 4 : 0;
    if (tr && (turn === 1 || turn === 2)) {
      tr.binding.call(offsets);
      const ms = performance.now() - t0;
      tr.acc.cand += ms;
      tr.acc.candCalls++;
      // Both calls of a cycle far slower than the kernel in use's calls so far (timed well above the timer's
      // resolution; two in a row, so that one burst of another process is not enough) end the trial at once:
      // the app pays for two slow calls, not for the pairs a test needs.
      const ref = this.appCalls > 0 ? this.appMs / this.appCalls : 0;
      const slow = ref >= tr.minSampleMs && ms > TRIAL_ABORT_RATIO * ref;
      if (turn === 2 && slow && tr.slowFirst) {
        tr.cur.push(ref);
        tr.cand.push(tr.acc.cand / tr.acc.candCalls);
        tr.end(false);
      }
      tr.slowFirst = turn === 1 && slow;
      return;
    }
    this.binding.call(offsets);
    const ms = performance.now() - t0;
    this.appCalls++;
    this.appMs += ms;
    if (tr) {
      tr.acc.cur += ms;
      tr.acc.curCalls++;
      if (turn === 3) this.settleTrial(tr);
    }
  }

  /** @internal Whether a candidate is being tried in the app's calls (they feed it). */
  get trialPending(): boolean {
    return this.trialState !== null;
  }

  /**
   * @internal Tries `impl` in the app's own calls (every other one) against
   * the kernel in use, and adopts it only if it is faster there (see
   * TRIAL_MIN_PAIRS). `minSampleMs`: the least time of each side in a pair
   * (a few timer ticks). `vouched`: its family vouches for it (see
   * TRIAL_VOUCHED_PAIRS). Resolves with whether it was adopted and the two
   * sides' median call, ms.
   */
  async trial(impl: WasmImpl, minSampleMs = 0, vouched = false): Promise<{ ok: boolean; cur_ms: number; cand_ms: number; pairs: number }> {
    const binding = this.spare ?? this.newBinding();
    this.spare = null;
    await binding.bind(impl);
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.trialState?.end(false), TRIAL_TIMEOUT_MS);
      const st: NonNullable<WasmKernel['trialState']> = {
        impl, binding, turn: 0, minSampleMs, vouched, slowFirst: false, acc: { cur: 0, cand: 0, curCalls: 0, candCalls: 0 }, cur: [], cand: [],
        end: (faster: boolean) => {
          clearTimeout(timer);
          this.trialState = null;
          // Adopted only where the two sides' median calls agree with the paired test: a sign test can say
          // faster while the candidate's median call is not, and a swap is always to a kernel measured faster.
          const ok = faster && medianOf(st.cand) < medianOf(st.cur);
          if (ok) {
            this.replace(binding, impl);
          } else {
            this.spare = binding;
          }
          resolve({ ok, cur_ms: medianOf(st.cur), cand_ms: medianOf(st.cand), pairs: st.cur.length });
        },
      };
      this.trialState = st;
    });
  }

  /** At the end of an ABBA cycle: closes a pair when both sides ran long enough, then decides if the pairs allow it. */
  private settleTrial(tr: NonNullable<WasmKernel['trialState']>): void {
    const a = tr.acc;
    if (a.cur < tr.minSampleMs || a.cand < tr.minSampleMs) return;
    tr.cur.push(a.cur / a.curCalls);
    tr.cand.push(a.cand / a.candCalls);
    tr.acc = { cur: 0, cand: 0, curCalls: 0, candCalls: 0 };
    const n = tr.cur.length;
    if (n === 2 && tr.cand.every((c, i) => c >= TRIAL_REJECT_RATIO * tr.cur[i])) return tr.end(false);
    const verdict = sequentialVerdict(tr.cur, tr.cand, TRIAL_FLOOR);
    if (verdict === 'slower') return tr.end(false);
    if (n >= TRIAL_MIN_PAIRS && verdict === 'faster') return tr.end(true);
    // Faster by the floor in the median pair.
    const promising = medianOf(tr.cand.map((c, i) => c / tr.cur[i])) < 1 - TRIAL_FLOOR;
    if (tr.vouched && n >= TRIAL_VOUCHED_PAIRS && promising) return tr.end(true);
    if (n < TRIAL_MAX_PAIRS) return;
    const faster = pairedFaster(tr.cur, tr.cand, TRIAL_FLOOR) || signFaster(tr.cur, tr.cand, TRIAL_FLOOR);
    // Undecided but promising (a busy machine's bursts): twice the pairs before it is turned down.
    if (faster || !promising || n >= 2 * TRIAL_MAX_PAIRS) tr.end(faster);
  }

  /** @internal */
  async adopt(impl: WasmImpl): Promise<void> {
    // Bound beside the kernel in use, which stays the guard's base until it judged the new one.
    const binding = this.spare ?? this.newBinding();
    this.spare = null;
    await binding.bind(impl);
    this.replace(binding, impl);
  }

  /** Puts `binding` (holding `impl`) in use; the kernel it replaces stays as the base if the guard has not judged one yet. */
  private replace(binding: WasmKernelBinding, impl: WasmImpl): void {
    if (this.base) this.spare = this.binding;
    else this.base = { impl: this.impl, binding: this.binding };
    this.binding = binding;
    this.impl = impl;
  }

  /** @internal */
  get unguarded(): boolean {
    return this.base !== null;
  }

  /** @internal Whether its tuning has nothing left to try (the plan guard judges only then). */
  get quiet(): boolean {
    return !this.tuner || this.tuner.drained;
  }

  /** @internal */
  useBase(on: boolean): void {
    this.onBase = on && this.base !== null;
  }

  /** @internal The guard's verdict on the kernel in use (see plan-guard.ts). */
  settle(keep: boolean, ratio: number): void {
    const base = this.base;
    if (!base) return;
    this.base = null;
    this.onBase = false;
    if (keep) {
      this.spare = base.binding;
      return;
    }
    const lost = this.impl;
    this.spare = this.binding;
    this.binding = base.binding;
    this.impl = base.impl;
    this.onRevert?.(base.impl, lost, ratio);
  }
}

/** A WGSL kernel as a compute pipeline on the app's GPUDevice. */
export class GpuKernel extends KernelHandle<GpuImpl> {
  /** @internal */
  constructor(op: OpName, shape: number[], impl: GpuImpl, source: KernelSource, level: BestResponse['level'] | null, private device: GPUDevice,
    /** The layout every kernel of this op and shape uses: bind groups made with it survive swaps. */
    readonly bindGroupLayout: GPUBindGroupLayout, layouts: GpuLayouts) {
    super(op, shape, impl, source, level);
    this.scratch = new Scratch(device, layouts);
  }

  private scratch: Scratch;

  /** A bind group over the arguments, in ABI order (inputs, then the output). */
  bindGroup(buffers: GPUBuffer[]): GPUBindGroup {
    if (buffers.length !== this.meta.args.length) {
      throw new Error(`${this.op} takes ${this.meta.args.length} buffers (${this.meta.args.map((a) => a.name).join(', ')}), got ${buffers.length}`);
    }
    return this.device.createBindGroup({
      layout: this.bindGroupLayout,
      entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
  }

  /** Records the kernel into a compute pass: pipeline, bind group 0, dispatch;
   * for a kernel of several passes (split-K across workgroups), each pass in
   * order, with the kernel's own scratch buffer at group 1. */
  dispatch(pass: GPUComputePassEncoder, bindGroup: GPUBindGroup): void {
    this.calls++;
    encodePasses(pass, this.impl, bindGroup, this.scratch.for(this.impl));
  }

  /** The first pass's pipeline (a kernel of several passes: use `dispatch`). */
  get pipeline(): GPUComputePipeline {
    return this.impl.pipeline;
  }

  /** The first pass's workgroup counts. */
  get workgroups(): [number, number, number] {
    return this.impl.dispatch;
  }

  /** How many passes `dispatch` records (1, or 2 for split-K across workgroups). */
  get passes(): number {
    return this.impl.passes.length;
  }

  /** @internal */
  async adopt(impl: GpuImpl): Promise<void> {
    this.impl = impl;
  }
}

export type Kernel = WasmKernel | GpuKernel;

async function json<T>(res: Response, what: string): Promise<T> {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

export class Webtune extends EventTarget {
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
  readonly threads: { count: number; why?: string };
  private pool: ThreadPool | null;
  /** WebGPU: the device kernels run on. */
  readonly device: GPUDevice | null;
  budgetMs: number;
  /** performance.now() resolution on this page, ms. */
  readonly timerResolutionMs: number;
  private backend: Backend<WasmImpl> | Backend<GpuImpl>;
  private layouts: GpuLayouts | null;
  private cache: KernelCache;
  private kernels = new Map<string, Promise<Kernel>>();
  private handles: Kernel[] = [];
  private opts: OpenOptions;
  private busy = false;
  private announcedDone = false;
  private loop: { stop: boolean } | null = null;
  /** The bench worker, when the `worker` option took effect. */
  private remote: WorkerEvaluator | null = null;
  /**
   * The plan guard (plan-guard.ts): a model's Wasm calls that go through it
   * (`TextGenerator`'s runs) judge the kernels tuning put in, all of a call's
   * at once, and put the ones before back where the new plan is slower.
   * Each verdict is a `guard` event (`GuardDetail`).
   */
  readonly guard: PlanGuard = new PlanGuard((d) => this.dispatchEvent(new CustomEvent('guard', { detail: d })));
  private pumping = false;
  private closed = false;
  /** The tuning policy (the `policy` option). */
  readonly policy: Policy;
  private families = new Map<string, Family<Impl>>();
  /** When the last `idle()` call returned (performance.now()), for the automatic slice. */
  private lastIdleEnd = 0;
  /** The session's kernel reports, sent in batches (one request of the server's rate for up to 16). */
  private reporter: Reporter;

  private constructor(init: {
    opts: OpenOptions; server: string; fingerprint: Fingerprint; session: SessionInfo;
    memory: WebAssembly.Memory | null; device: GPUDevice | null; cache: KernelCache; rho: RhoResult | null;
    pool: ThreadPool | null; threads: { count: number; why?: string };
    bundle: KernelBundle | null; offline: string | null; bundleError: string | null;
  }) {
    super();
    this.opts = init.opts;
    this.server = init.server;
    this.target = init.opts.target;
    this.fingerprint = init.fingerprint;
    this.session = init.session;
    this.bundle = init.bundle;
    this.lookups = init.bundle ? 'bundle' : 'server';
    this.offline = init.offline;
    this.bundleError = init.bundleError;
    this.rho = init.rho;
    this.memory = init.memory;
    this.pool = init.pool;
    this.threads = init.threads;
    this.device = init.device;
    this.cache = init.cache;
    this.budgetMs = init.opts.budgetMs ?? 8;
    this.policy = init.opts.policy ?? 'fast';
    this.timerResolutionMs = timerResolutionMs();
    this.reporter = new Reporter(init.server, init.session.session_id);
    if (init.device) {
      this.layouts = new GpuLayouts(init.device);
      this.backend = new GpuBackend(init.device, this.layouts, this.timerResolutionMs);
    } else {
      this.layouts = null;
      const shared = init.memory !== null && isShared(init.memory);
      this.backend = new WasmBackend(init.pool, shared);
      if (init.opts.worker && workersAvailable()) this.remote = new WorkerEvaluator(init.threads.count, shared, init.pool?.activity ?? null);
    }
  }

  /** @internal The Wasm thread pool kernels run on, when there is one. */
  get threadPool(): ThreadPool | null {
    return this.pool;
  }

  /**
   * Fingerprints this browser and opens a session with the server; with
   * the `bundle` option, opens the bundle too, and opens without a session
   * when the server cannot be reached.
   */
  static async open(opts: OpenOptions): Promise<Webtune> {
    if (opts.target !== 'wasm' && opts.target !== 'webgpu') throw new Error(`target must be 'wasm' or 'webgpu', got ${opts.target}`);
    if (opts.policy !== undefined && opts.policy !== 'fast' && opts.policy !== 'legacy') throw new Error(`policy must be 'fast' or 'legacy', got ${String(opts.policy)}`);
    const server = (opts.server ?? globalThis.location?.origin ?? '').replace(/\/+$/, '');
    let adapter: GPUAdapter | null = null;
    let device: GPUDevice | null = null;
    if (opts.target === 'webgpu') {
      if (!globalThis.navigator?.gpu) throw new Error('WebGPU is not available in this browser');
      adapter = opts.adapter ?? (await navigator.gpu.requestAdapter());
      if (!adapter) throw new Error("no WebGPU adapter (navigator.gpu.requestAdapter() answered null): load with target 'wasm', or 'auto' to use WebGPU where it is");
      // Timestamps, subgroup operations and f16, where the adapter has them.
      const wanted = ['timestamp-query', 'subgroups', 'shader-f16'] as GPUFeatureName[];
      device = opts.device ?? (await adapter.requestDevice({
        requiredFeatures: wanted.filter((f) => adapter!.features.has(f)),
      }));
    }
    // The app's bundle, unless it is for the server's absence only.
    let bundle: KernelBundle | null = null, bundleError: string | null = null;
    const openBundle = async () => {
      try {
        bundle = await KernelBundle.open(opts.bundle!);
      } catch (e) {
        bundleError = (e as Error).message;
        console.warn(`webtune: ${bundleError}`);
      }
    };
    if (opts.bundle && (opts.bundleUse ?? 'always') === 'always') await openBundle();
    let rho = opts.rho;
    let rhoMeasurement: RhoResult | null = null;
    if (rho === 'measure') {
      // ρ pairs exist for Wasm only: a GPU key already names the architecture.
      try {
        rhoMeasurement = opts.target === 'wasm' ? await measureRho(server, wasmFeatures().relaxedSimd) : null;
      } catch (e) {
        // Without the server the key is searched for in the bundle, which needs no ρ.
        if (!opts.bundle) throw e;
      }
      rho = rhoMeasurement?.rho || undefined;
    }
    const { pool, threads } = opts.target === 'wasm' ? startThreads(opts) : { pool: null, threads: { count: 1, why: 'the WebGPU target' } };
    const fp = await fingerprint(opts.target, adapter, rho);
    // The key says whether this session runs threaded kernels: the candidates differ.
    if (opts.target === 'wasm' && !pool) fp.threads = false;
    let session: SessionInfo, offline: string | null = null;
    const unreachable = await openSession(server, fp);
    if (typeof unreachable !== 'string') {
      session = unreachable;
      rememberKeys(server, opts.target, fp, session);
    } else if (opts.bundle) {
      offline = unreachable;
      if (!bundle && !bundleError) await openBundle();
      if (!bundle) throw new Error(`webtune: the server cannot be reached (${offline}) and the bundle was refused: ${bundleError}`);
      const keys = opts.deviceKey ? keysOf(opts.deviceKey) : recallKeys(server, opts.target, fp);
      if (opts.deviceKey && !keys) throw new Error(`deviceKey ${opts.deviceKey} is not a device key (four /-separated parts)`);
      session = { session_id: '', device_key: keys?.device_key ?? '', arch_key: keys?.arch_key ?? '', vendor_key: keys?.vendor_key ?? '', rho: fp.rho ?? '' };
      console.info(`webtune: the server cannot be reached (${offline}); kernels come from the bundle, nothing is tuned`);
    } else {
      throw new Error(`open session: ${unreachable}`);
    }
    const cache = await KernelCache.open(opts.cache ?? true);
    const memory = opts.target === 'wasm' ? (opts.memory ?? newMemory(1, pool !== null)) : null;
    return new Webtune({
      opts, server, fingerprint: fp, session, memory, device, cache, rho: rhoMeasurement, pool, threads, bundle, offline, bundleError,
    });
  }

  private cacheKey(op: string, shape: number[]): string {
    return [this.server, this.session.device_key, op, shape.join(','), this.serverTarget].join('|');
  }

  private get serverTarget(): 'wasm' | 'wgsl' {
    return this.target === 'wasm' ? 'wasm' : 'wgsl';
  }

  /** @internal Fetches kernel bytes and checks them against their content address. */
  async fetchKernel(url: string, target: 'wasm' | 'wgsl'): Promise<ArrayBuffer | string> {
    const res = await fetchRetrying(url.startsWith('http') ? url : `${this.server}${url}`);
    if (!res.ok) throw new Error(`kernel ${url}: HTTP ${res.status}`);
    const bytes = target === 'wasm' ? await res.arrayBuffer() : await res.text();
    const want = url.split('/').pop();
    const got = await sha256Hex(bytes);
    if (got && want && /^[0-9a-f]{64}$/.test(want) && got !== want) throw new Error(`kernel ${url}: bytes hash to ${got}`);
    return bytes;
  }

  /**
   * The best kernel for `op` on `shape`: this browser's cached winner, else
   * the server's best for this device (or its architecture, vendor, or the
   * portable default). The handle keeps working when tuning swaps the kernel.
   */
  kernel(op: OpName, shape: number[]): Promise<Kernel> {
    checkShape(op, shape);
    if (parseOp(op).dtype === 'f16') {
      if (!this.device) throw new Error(`${op}: f16 ops run on WebGPU only; use the f32 op for Wasm`);
      if (!this.device.features.has('shader-f16')) {
        throw new Error(`${op}: this device has no shader-f16 feature; use the f32 op (${op.replace(/\+f16$/, '')})`);
      }
    }
    const key = `${op}/${shape.join(',')}`;
    let k = this.kernels.get(key);
    if (!k) {
      k = this.makeKernel(op, [...shape]);
      this.kernels.set(key, k);
      k.catch(() => this.kernels.delete(key));
    }
    return k;
  }

  async wasmKernel(op: OpName, shape: number[]): Promise<WasmKernel> {
    if (this.target !== 'wasm') throw new Error('this session targets WebGPU: use gpuKernel()');
    return (await this.kernel(op, shape)) as WasmKernel;
  }

  async gpuKernel(op: OpName, shape: number[]): Promise<GpuKernel> {
    if (this.target !== 'webgpu') throw new Error('this session targets Wasm: use wasmKernel()');
    return (await this.kernel(op, shape)) as GpuKernel;
  }

  private async makeKernel(op: OpName, shape: number[]): Promise<Kernel> {
    const cacheKey = this.cacheKey(op, shape);
    const cached = await this.cache.get(cacheKey);
    let meta: KernelMeta, bytes: ArrayBuffer | string, source: KernelSource, level: BestResponse['level'] | null;
    /** Whether the server answered a winner the crowd chose for this device's own key (elected, or provisional before the quorum). */
    let crowd = false;
    if (cached) {
      ({ meta, bytes } = cached);
      source = 'cache';
      level = null;
    } else {
      // The bundle first (the server's rule, on this session's keys), then the server.
      const keys = this.session.device_key ? keysOf(this.session.device_key) : null;
      const maxThreads = this.pool ? maxThreadsOf(this.session.device_key) : 1;
      const fromBundle = this.bundle?.best(keys, op, shape, this.serverTarget, maxThreads) ?? null;
      if (fromBundle) {
        meta = fromBundle.meta;
        bytes = await this.bundle!.kernel(meta.sha256, this.serverTarget);
        source = 'bundle';
        level = fromBundle.level;
      } else if (this.offline) {
        throw new Error(`${op} ${shape.join(',')} ${this.serverTarget}: the server cannot be reached (${this.offline}) and the bundle does not cover it`);
      } else {
        const q = new URLSearchParams({ device_key: this.session.device_key, op, shape: shape.join(','), target: this.serverTarget });
        const best = await json<BestResponse>(await fetchRetrying(`${this.server}/v1/kernels/best?${q}`), `best ${op} ${shape}`);
        meta = best.meta;
        bytes = await this.fetchKernel(best.url, this.serverTarget);
        source = 'server';
        level = best.level;
        crowd = best.level === 'device' && (best.source === 'elected' || best.source === 'provisional');
      }
      await this.cache.put({ key: cacheKey, sha256: meta.sha256, meta, bytes, tuned: false, median_us: 0, saved_at: Date.now() });
    }
    let handle: Kernel;
    if (this.device) {
      const impl = await (this.backend as GpuBackend).load(bytes, meta);
      handle = new GpuKernel(op, shape, impl, source, level, this.device, this.layouts!.bindGroupLayout(meta.args.length), this.layouts!);
    } else {
      const impl = await (this.backend as WasmBackend).load(bytes, meta);
      const binding = new WasmKernelBinding(this.memory!, this.pool);
      await binding.bind(impl);
      handle = new WasmKernel(op, shape, impl, source, level, binding, () => new WasmKernelBinding(this.memory!, this.pool));
    }
    // Without a server there is no queue to tune from.
    const tune = (this.opts.tune ?? true) && !this.offline && !(cached?.tuned && !this.opts.retune);
    if (tune) {
      // The handle's impl is protected; the tuner gets the same object.
      const impl = (handle as unknown as { impl: Impl }).impl;
      const tuner = new KernelTuner(this.host(handle), this.backend as Backend<Impl>, op, shape, impl);
      tuner.maxCandidates = Math.max(1, this.opts.maxCandidates ?? Infinity);
      // A kernel the crowd already chose for this device class is checked against its closest rivals only (the
      // queue's first), so that the device still votes but does not tune from scratch, nor try many candidates in the app's calls.
      if (crowd && this.policy === 'fast') tuner.maxCandidates = Math.min(tuner.maxCandidates, CROWD_CANDIDATES);
      tuner.policy = this.policy;
      if (this.remote) (tuner as KernelTuner<WasmImpl>).remote = this.remote;
      if (this.policy === 'fast') {
        const fk = Family.key(op, shape, this.serverTarget);
        let fam = this.families.get(fk);
        if (!fam) this.families.set(fk, (fam = new Family<Impl>()));
        tuner.join(fam);
      }
      handle.tuner = tuner as never;
      if (handle instanceof WasmKernel) {
        handle.onRevert = (impl, lost, ratio) => {
          (tuner as KernelTuner<WasmImpl>).reverted(impl, lost, ratio);
          void this.cache.put({ key: this.cacheKey(op, shape), sha256: impl.sha256, meta: impl.meta, bytes: impl.bytes, tuned: false, median_us: 0, saved_at: Date.now() });
        };
      }
    }
    this.handles.push(handle);
    this.announcedDone = false;
    return handle;
  }

  private host(handle: Kernel): TunerHost<Impl> {
    const wt = this;
    return {
      server: this.server,
      sessionId: this.session.session_id,
      fetchKernel: (url, target) => this.fetchKernel(url, target),
      async adopt(t, impl, m, previous) {
        // Not while the plan guard judges a model call this kernel is part of: both plans must stay as they are.
        if (handle instanceof WasmKernel) await wt.guard.released(handle);
        // A threaded kernel must prove itself in the app's own calls (the
        // pool as the model leaves it), never only on the bench; so must
        // every kernel where the app asked for it (`trials: 'all'`).
        const inApp = handle instanceof WasmKernel && (wt.opts.trials === 'all' || (wt.pool && wt.policy === 'fast' && threadsOf(impl.meta)));
        let trial: AppTrial | undefined;
        if (inApp) {
          const vouched = wt.opts.trials !== 'all' && (t as unknown as KernelTuner<WasmImpl>).vouched(impl as unknown as WasmImpl);
          const r = await handle.trial(impl as unknown as WasmImpl, TRIAL_SAMPLE_TICKS * wt.timerResolutionMs, vouched);
          trial = { ok: r.ok, cur_ms: r.cur_ms, cand_ms: r.cand_ms };
          const detail: TrialDetail = {
            op: t.op, shape: t.shape, target: wt.target, from: previous.sha256, to: impl.sha256, adopted: r.ok,
            bench_speedup: m.current_us / m.median_us, app_speedup: r.cur_ms / r.cand_ms, cur_ms: r.cur_ms, cand_ms: r.cand_ms, pairs: r.pairs, vouched,
          };
          wt.dispatchEvent(new CustomEvent('trial', { detail }));
          if (!r.ok) {
            const threads = threadsOf(impl.meta) ? ` (${threadsOf(impl.meta)} threads)` : '';
            t.note(`${impl.sha256.slice(0, 12)}${threads} was faster on the bench (${detail.bench_speedup.toFixed(3)}x) but not in the app's calls ` +
              `(${r.cand_ms.toFixed(3)} ms against ${r.cur_ms.toFixed(3)} ms over ${r.pairs} pairs): not adopted`);
            return trial;
          }
        } else {
          await (handle as KernelHandle<Impl>).adopt(impl);
        }
        handle.swaps++;
        const detail: SwapDetail = {
          op: t.op, shape: t.shape, target: wt.target, from: previous.sha256, to: impl.sha256,
          ...(trial
            ? { from_us: trial.cur_ms * 1000, to_us: trial.cand_ms * 1000, speedup: trial.cur_ms / trial.cand_ms }
            : { from_us: m.current_us, to_us: m.median_us, speedup: m.current_us / m.median_us }),
          index: m.index, total: m.total, at: performance.now(),
          threads: impl.meta.threads ?? 1,
        };
        wt.dispatchEvent(new CustomEvent('swap', { detail }));
        await wt.cache.put({
          key: wt.cacheKey(t.op, t.shape), sha256: impl.sha256, meta: impl.meta, bytes: impl.bytes,
          tuned: false, median_us: m.median_us, saved_at: Date.now(),
        });
        return trial ?? true;
      },
      measured(t, m) {
        const detail: MeasureDetail = { ...m, op: t.op, shape: t.shape, target: wt.target };
        wt.dispatchEvent(new CustomEvent('measure', { detail }));
      },
      submit: (body) => this.reporter.submit(body),
      unjudged: () => handle instanceof WasmKernel && this.guard.judges(handle),
      reported(t, response, error) {
        const body = t.reportBody();
        const detail: ReportDetail = { op: t.op, shape: t.shape, target: wt.target, response, error, entries: body?.entries.length ?? 0 };
        wt.dispatchEvent(new CustomEvent('report', { detail }));
        if (!error) {
          const impl = t.current;
          void wt.cache.put({
            key: wt.cacheKey(t.op, t.shape), sha256: impl.sha256, meta: impl.meta, bytes: impl.bytes,
            tuned: true, median_us: 0, saved_at: Date.now(),
          });
        }
      },
    };
  }

  /**
   * A kernel's weight in the app: its calls × the time of one call (Wasm:
   * the app's own calls, timed; else the tuner's last measurement of the
   * kernel in use; else its flops at 10 GFLOP/s).
   */
  private weight(h: Kernel): number {
    const t = h.tuner as KernelTuner<Impl> | null;
    const perCall = h.appCalls > 0 ? h.appMs / h.appCalls : t && t.currentUs > 0 ? t.currentUs / 1000 : flops(h.op, h.shape) * 1e-7;
    return (h.calls + 1) * Math.max(perCall, 1e-6);
  }

  /** Gives every tuner its share of the app's kernel time (the fast policy's order and stop rule weigh by it). */
  private updateShares(): void {
    let sum = 0;
    const w = this.handles.map((h) => this.weight(h));
    for (const x of w) sum += x;
    this.handles.forEach((h, i) => {
      if (h.tuner) (h.tuner as KernelTuner<Impl>).share = sum > 0 ? w[i] / sum : 1;
    });
  }

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
  private tunerOrder(): KernelTuner<Impl>[] {
    const live: { t: KernelTuner<Impl>; w: number }[] = [];
    const fast = this.policy === 'fast';
    if (fast) this.updateShares();
    const open = this.streamingQueues();
    for (const h of this.handles) {
      const t = h.tuner as KernelTuner<Impl> | null;
      if (!t || !(t.phase === 'waiting' || t.phase === 'opening' || t.phase === 'running')) continue;
      // A new queue opens only while fewer than MAX_OPEN_QUEUES stream.
      if (t.phase === 'waiting' && open >= MAX_OPEN_QUEUES) continue;
      live.push({ t, w: fast ? t.share * t.expectedGain : flops(h.op, h.shape) * (h.calls + 1) });
    }
    if (fast) {
      live.sort((a, b) => Number(b.t.evaluating) - Number(a.t.evaluating) || Number(b.t.transferPending) - Number(a.t.transferPending) ||
        Number(a.t.behindSibling) - Number(b.t.behindSibling) || b.w - a.w);
    }
    else live.sort((a, b) => Number(b.t.evaluating) - Number(a.t.evaluating) || a.t.taken - b.t.taken || b.w - a.w);
    return live.map((x) => x.t);
  }

  /**
   * @internal The kernels whose candidate is being tried in the app's own
   * calls (`trials`): a model with no calls of its own to make (between
   * generations) runs steps that call them, so that the trials end.
   */
  pendingTrials(): { op: OpName; shape: number[] }[] {
    return this.handles.filter((h) => h instanceof WasmKernel && h.trialPending).map((h) => ({ op: h.op, shape: h.shape }));
  }

  /** Candidate queues streaming now (opening, or being read). */
  private streamingQueues(): number {
    let n = 0;
    for (const h of this.handles) if (h.tuner?.streaming) n++;
    return n;
  }

  /** Whether every kernel is tuned and reported (or not to be tuned). */
  get done(): boolean {
    return this.handles.every((h) => !h.tuner || h.tuner.phase === 'done');
  }

  /**
   * How far tuning is: kernels tuned out of all, the share of the app's
   * kernel time still expected to be saved, candidates evaluated and timings
   * taken. A `tuned` event (detail: `status()`) is dispatched when every
   * kernel is tuned.
   */
  get progress(): TuningProgress {
    this.updateShares();
    let tuned = 0, expectedGain = 0, evaluated = 0, timings = 0;
    for (const h of this.handles) {
      const t = h.tuner as KernelTuner<Impl> | null;
      if (!t || t.phase === 'done') tuned++;
      if (!t) continue;
      expectedGain += t.share * t.expectedGain;
      evaluated += t.evaluated;
      timings += t.timings;
    }
    return { tuned, total: this.handles.length, expectedGain, evaluated, timings };
  }

  /** Tuning progress of every kernel. */
  status(): TuningStatus[] {
    return this.handles.map((h) => ({
      op: h.op,
      shape: h.shape,
      phase: h.tuner?.phase ?? 'done',
      evaluated: h.tuner?.evaluated ?? 0,
      total: h.tuner?.total ?? 0,
      sha256: h.sha256,
      notes: h.tuner?.notes ?? [],
    }));
  }

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
  async idle(budgetMs?: number): Promise<IdleResult> {
    if (this.remote) {
      // The first call starts the background work (the app is ready for
      // swaps and listens to events by then); later calls return at once.
      this.startBackground();
      return { worked: false, done: this.done };
    }
    // An app that loops `await infer(); await idle();` over synchronous
    // kernels yields only to microtasks, so a candidate's download or
    // compile would never deliver and tuning would stall: let the event
    // loop run once first (a message, not setTimeout's clamped 4 ms).
    await nextTask();
    const r = await this.slice(budgetMs ?? this.autoSlice());
    this.lastIdleEnd = performance.now();
    return r;
  }

  /** The slice of an `idle()` call without a budget (see `idle`). */
  private autoSlice(): number {
    if (this.opts.budgetMs !== undefined) return this.budgetMs;
    const worked = this.lastIdleEnd > 0 ? performance.now() - this.lastIdleEnd : AUTO_SLICE_MIN_MS;
    return Math.min(AUTO_SLICE_MAX_MS, Math.max(AUTO_SLICE_MIN_MS, worked));
  }

  /** Whether tuning runs in the background, in the bench worker (the `worker` option). */
  get background(): boolean {
    return this.remote !== null;
  }

  /**
   * Background tuning: short slices of page-side work (taking in the
   * worker's answers, sending candidates, adopting winners), a pause of a
   * few ms between them, until every kernel is tuned. Started by `idle()`
   * (and `startIdleLoop()`), again after new kernels.
   */
  private startBackground(): void {
    if (this.pumping || this.closed) return;
    this.pumping = true;
    const run = async () => {
      try {
        while (!this.closed) {
          const r = await this.slice(BACKGROUND_SLICE_MS);
          if (r.done && !this.pendingKernels()) break;
          await new Promise((res) => setTimeout(res, r.worked ? 0 : 4));
        }
      } finally {
        this.pumping = false;
      }
    };
    void run();
  }

  private async slice(budgetMs: number): Promise<IdleResult> {
    if (this.busy) return { worked: false, done: this.done };
    this.busy = true;
    const deadline = performance.now() + budgetMs;
    let worked = false;
    try {
      // The first tuner in order that has work ready takes the slice; one
      // with nothing ready yet (its queue opening, a candidate downloading)
      // passes it on, and so does one that just finished, so that the next
      // queue opens while its report is in flight. When a candidate's
      // evaluation ends with time left, the slice goes on to the next
      // tuner in order. Once work is done, every further step is strict:
      // it starts nothing it does not expect to finish before the deadline.
      let strict = false;
      for (let round = 0; round < 64; round++) {
        let again = false;
        for (const t of this.tunerOrder()) {
          if (strict && performance.now() >= deadline) break;
          // Counted again before each opening: a tuner that opens its queue
          // does no work yet and passes the slice on, and the next one must
          // not open another past the limit (a model's 30 kernels opened
          // their queues in one slice, and met the server's limits).
          if (t.phase === 'waiting' && this.streamingQueues() >= MAX_OPEN_QUEUES) continue;
          const before = t.evaluated;
          const did = await t.step(deadline, strict);
          if (did) worked = strict = true;
          if (did && t.phase !== 'reporting' && t.phase !== 'done') {
            again = t.evaluated > before && !t.evaluating;
            break;
          }
        }
        if (!again || performance.now() >= deadline) break;
      }
    } finally {
      this.busy = false;
    }
    // Nothing left to tune: the reports waiting to go together go now.
    if (this.handles.every((h) => !h.tuner || h.tuner.phase === 'reporting' || h.tuner.phase === 'done')) this.reporter.flush();
    const done = this.done;
    if (done && !this.announcedDone && this.handles.length) {
      this.announcedDone = true;
      this.dispatchEvent(new CustomEvent('tuned', { detail: this.status() }));
    }
    return { worked, done };
  }

  /**
   * Calls `idle()` from requestIdleCallback (a timer where there is none)
   * until every kernel is tuned or `stopIdleLoop()` is called.
   */
  startIdleLoop(): void {
    if (this.loop) return;
    const loop = { stop: false };
    this.loop = loop;
    const ric = (globalThis as { requestIdleCallback?: (cb: (d: { timeRemaining(): number }) => void) => number }).requestIdleCallback;
    const schedule = () => {
      if (loop.stop) return;
      if (ric) ric((d) => void this.idle(Math.max(1, Math.min(this.budgetMs, d.timeRemaining()))).then(after));
      else setTimeout(() => void this.idle().then(after), 16);
    };
    const after = (r: IdleResult) => {
      if (r.done && !this.pendingKernels()) {
        this.loop = null;
        return;
      }
      schedule();
    };
    schedule();
  }

  stopIdleLoop(): void {
    if (this.loop) this.loop.stop = true;
    this.loop = null;
  }

  private pendingKernels(): boolean {
    return this.kernels.size > this.handles.length;
  }

  /** Forgets this browser's cached winners (for every server and device). */
  async clearCache(): Promise<void> {
    await this.cache.clear();
  }

  /**
   * Stops tuning; open queues are closed and no kernel is reported that was
   * not finished (the reports of finished ones waiting to go are sent).
   */
  close(): void {
    this.closed = true;
    this.reporter.flush();
    this.remote?.close();
    this.pool?.close();
    this.stopIdleLoop();
    for (const h of this.handles) h.tuner?.cancel();
  }
}

/**
 * `POST /v1/sessions`: the session, or why the server cannot be reached (a
 * network error, or a gateway's 502, 503 or 504 after the retries). Any
 * other refusal is an error.
 */
async function openSession(server: string, fp: Fingerprint): Promise<SessionInfo | string> {
  let res: Response;
  try {
    res = await fetchRetrying(`${server}/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ fingerprint: fp }),
    });
  } catch (e) {
    return (e as Error).message || String(e);
  }
  if (res.status === 502 || res.status === 503 || res.status === 504) return `HTTP ${res.status}`;
  return json<SessionInfo>(res, 'open session');
}

/** localStorage key of the keys the server last gave this browser. */
function keysEntry(server: string, target: Target): string {
  return `webtune.keys|${server}|${target}`;
}

/** The fingerprint as the remembered keys are matched on (ρ aside: measuring it needs the server). */
function fingerprintText(fp: Fingerprint): string {
  const { rho: _rho, ...rest } = fp;
  return JSON.stringify(rest);
}

function rememberKeys(server: string, target: Target, fp: Fingerprint, s: SessionInfo): void {
  try {
    const keys = { device_key: s.device_key, arch_key: s.arch_key, vendor_key: s.vendor_key, rho: s.rho };
    globalThis.localStorage?.setItem(keysEntry(server, target), JSON.stringify({ fingerprint: fingerprintText(fp), keys }));
  } catch {
    // Storage off or full: an offline start then gets the bundle's defaults.
  }
}

/** The keys the server gave this very fingerprint last time, if remembered. */
function recallKeys(server: string, target: Target, fp: Fingerprint): { device_key: string; arch_key: string; vendor_key: string } | null {
  try {
    const raw = globalThis.localStorage?.getItem(keysEntry(server, target));
    if (!raw) return null;
    const saved = JSON.parse(raw) as { fingerprint: string; keys: { device_key: string; arch_key: string; vendor_key: string } };
    return saved.fingerprint === fingerprintText(fp) ? saved.keys : null;
  } catch {
    return null;
  }
}

/** The pool `opts.threads` asks for, or why there is none. */
function startThreads(opts: OpenOptions): { pool: ThreadPool | null; threads: { count: number; why?: string } } {
  const want = threadsWanted(opts.threads);
  let why = want.why;
  if (!why && opts.memory && !isShared(opts.memory)) why = "the app's memory is not shared (make it with { shared: true, maximum })";
  if (why) {
    if (want.want > 1) console.info(`webtune: Wasm kernels run on one thread: ${why}`);
    return { pool: null, threads: { count: 1, why } };
  }
  return { pool: new ThreadPool(want.count), threads: { count: want.count } };
}

/** Resolves after one turn of the event loop: pending network and compile callbacks run first. */
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    const c = new MessageChannel();
    c.port1.onmessage = () => {
      c.port1.close();
      resolve();
    };
    c.port2.postMessage(null);
  });
}

// Low-level: the thread pool kernels run on, for hosts that call threaded
// kernels (ABI 2) themselves.
export { ThreadPool, threadSupport, sharedImport } from './threads.js';
