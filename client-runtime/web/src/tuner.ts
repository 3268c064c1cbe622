// Tuning one op and shape: read the candidate queue (events ahead of use,
// bytes when a candidate is taken), pick the next candidate (the fast
// policy: a family sibling's winner first, then the lite space's order
// re-ranked by a model of what this device measured; the legacy policy: the
// server's order), load it in the background, then, in the app's idle
// slots, generate its seeded inputs, check it against the current kernel
// and the f64 reference, time both interleaved (a sequential test over the
// pairs under the fast policy), and swap when the candidate is faster. When
// the queue is drained, or the fast policy's expected gain is small, report
// the top five with their tickets.
//
// Long on purpose: KernelTuner and the Evaluation it runs per candidate are one protocol, read best together.
//
// Nothing here blocks on the network: fetches and compiles run as promises,
// and step() only does work that is ready, within the deadline it is given.

import { Scales, checkPositions, compareOutputs, defaultPositions, toleranceOf } from './check.js';
import { type ArgSpec, type OpName, argSpecs, bmkn } from './ops.js';
import { InputGen } from './rng.js';
import { retryable } from './http.js';
import { type ReportOutcome, Reporter } from './reports.js';
import { SseReader } from './sse.js';
import { fasterBeyondNoise, median, relNoise } from './stats.js';
import type { Backend, Bench, Candidate, Impl, ReportEntry, ReportRequest } from './types.js';

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
export const GUARD_REPORT_WAIT_MS = 30_000;

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
export type Fetched<I> = { cand: Candidate; bytes?: ArrayBuffer | string; impl?: I; error?: string };

/** Parses a `candidate` event, keeping its u64 seed exact. */
export function parseCandidate(data: string): Candidate {
  const c = JSON.parse(data) as Candidate & { seed: number };
  const m = /"seed"\s*:\s*(\d+)/.exec(data);
  return { ...c, seed: m ? BigInt(m[1]) : BigInt(c.seed) };
}

/** Warm-up ends after this many pairs or ms of sampling at most. */
const WARM_MAX_PAIRS = 15;
const WARM_MAX_MS = 1500;
/**
 * Warm-up lasts at least this long after the candidate's first call: V8
 * starts its optimizing compile of a Wasm function during the first call
 * and swaps the code in when the background compile is done, so two equal
 * samples taken right after that call may both still be baseline code.
 */
const WARM_MIN_MS = 8;
/** Times the timed phase may start over on a late tier-up. */
const MAX_RESTARTS = 2;
/** A sample this far below every earlier one marks a tier-up (or the end of a disturbance). */
const NEW_LOW = 0.9;
/**
 * Early rejection: a candidate slower than the kernel in use by at least
 * this ratio in each of the last REJECT_PAIRS timed pairs, with no
 * improvement in sight, stops there and is recorded with what was measured.
 */
export const REJECT_RATIO = 1.25;
export const REJECT_PAIRS = 3;
/**
 * Futility: after FUTILE_PAIRS timed pairs, a candidate that is not faster
 * than the kernel in use in the median pair stops too. A swap needs its
 * median to be lower by twice the noise (at least 1 %); with ±10 % noise per
 * pair, a candidate truly 10 % faster shows a median pair ratio of 1 or more
 * after five pairs with a probability well under 1 %.
 */
export const FUTILE_PAIRS = 5;
/**
 * Neither stop comes sooner than this after the candidate's first call: if
 * V8's optimizing compile is slow to arrive (busy cores), samples of the
 * baseline code can look steady and several times too slow.
 */
export const STOP_AFTER_MS = 30;

/** Whether the last sample is no new low: not under NEW_LOW × the least of the earlier ones. */
export function noNewLow(xs: readonly number[]): boolean {
  if (xs.length < 2) return false;
  let min = Infinity;
  for (let i = 0; i < xs.length - 1; i++) min = Math.min(min, xs[i]);
  return xs[xs.length - 1] >= NEW_LOW * min;
}

/**
 * Whether warm-up is over: at least two pairs, WARM_MIN_MS since the
 * candidate first ran, and neither kernel's last sample a new low (a kernel
 * still tiering up gets faster from sample to sample; a spike upwards, from
 * a GC or another process, does not hold warm-up back).
 */
export function warmedUp(cur: readonly number[], cand: readonly number[], sinceFirstRunMs: number): boolean {
  return cur.length >= 2 && cand.length >= 2 && sinceFirstRunMs >= WARM_MIN_MS && noNewLow(cur) && noNewLow(cand);
}

/**
 * Whether a candidate is clearly slower: in each of the last REJECT_PAIRS
 * pairs (timed back to back, ABBA) it took REJECT_RATIO times the kernel in
 * use or more, and its last sample is no new low (it is not still speeding up).
 */
export function clearlySlower(cur: readonly number[], cand: readonly number[]): boolean {
  const n = Math.min(cur.length, cand.length);
  if (n < REJECT_PAIRS || !noNewLow(cand)) return false;
  for (let i = n - REJECT_PAIRS; i < n; i++) if (!(cand[i] >= REJECT_RATIO * cur[i])) return false;
  return true;
}

/** Whether, after FUTILE_PAIRS pairs or more, the candidate is no faster in the median pair (and not speeding up). */
export function futile(cur: readonly number[], cand: readonly number[]): boolean {
  const n = Math.min(cur.length, cand.length);
  if (n < FUTILE_PAIRS || !noNewLow(cand)) return false;
  const ratios: number[] = [];
  for (let i = 0; i < n; i++) ratios.push(cand[i] / cur[i]);
  return median(ratios) >= 1;
}

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
export const FAST_WARM_PAIRS = 6;
export const FAST_WARM_MS = 400;
/** Fast policy: timed pairs before the sequential test may decide, and at most. */
export const SEQ_MIN_PAIRS = 3;
export const SEQ_MAX_PAIRS = 9;
/** Fast policy: an undecided candidate whose pairs so far say it is faster is timed on, up to this many pairs. */
export const SEQ_PROMISING_PAIRS = 18;
/** Least spread assumed for the log ratio of one pair (timer rounding, cache state): no decision on a lucky run of equal pairs. */
export const SEQ_MIN_SD = 0.01;
/**
 * One-sided 99.5 % quantiles of Student's t by degrees of freedom (1..10;
 * beyond, 2.8): the sequential test looks at the pairs after each one, so
 * each look uses a strict level (over up to seven looks, well under 5 %
 * wrong decisions in all, by Bonferroni).
 */
const T995 = [Infinity, 63.66, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.25, 3.169];

/**
 * The sequential test over paired timings (ABBA pairs, so drift hits both
 * alike): r = ln(candidate / kernel in use) per pair; with its mean and a
 * t-interval at the strict level above. `'slower'`: even the interval's
 * best end is no faster than the swap floor (the candidate cannot win);
 * `'faster'`: the interval's worst end is faster than the floor (it wins; the
 * swap rule on medians still decides). Undefined: keep timing.
 */
export function sequentialVerdict(cur: readonly number[], cand: readonly number[], floor = 0.01): 'slower' | 'faster' | undefined {
  const n = Math.min(cur.length, cand.length);
  if (n < SEQ_MIN_PAIRS) return undefined;
  const r: number[] = [];
  for (let i = 0; i < n; i++) r.push(Math.log(cand[i] / cur[i]));
  const mean = r.reduce((a, b) => a + b, 0) / n;
  const sd = Math.max(SEQ_MIN_SD, Math.sqrt(r.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)));
  const half = (T995[Math.min(n - 1, T995.length - 1)] ?? 2.8) * sd / Math.sqrt(n);
  const need = Math.log(1 - floor);
  if (mean - half > need) return 'slower';
  if (mean + half < need) return 'faster';
  return undefined;
}

/** One-sided 95 % quantiles of Student's t by degrees of freedom (1..10; beyond, 1.75). */
const T95 = [Infinity, 6.314, 2.92, 2.353, 2.132, 2.015, 1.943, 1.895, 1.86, 1.833, 1.812];

/**
 * The swap rule of the fast policy, at the end of a candidate's timing: the
 * mean of ln(candidate / kernel in use) over its timed pairs is below
 * ln(1 − floor) at one-sided 95 % (Student's t, spread at least SEQ_MIN_SD).
 * The pairs' ratios, not the two sets' spreads, carry the comparison: the
 * noise shared by a pair (a busy core, a GC) cancels.
 */
/** The mean of ln(candidate / kernel in use) over the pairs (NaN without any). */
export function meanLogRatio(cur: readonly number[], cand: readonly number[]): number {
  const n = Math.min(cur.length, cand.length);
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.log(cand[i] / cur[i]);
  return s / n;
}

export function pairedFaster(cur: readonly number[], cand: readonly number[], floor = 0.01): boolean {
  const n = Math.min(cur.length, cand.length);
  if (n < 2) return false;
  const r: number[] = [];
  for (let i = 0; i < n; i++) r.push(Math.log(cand[i] / cur[i]));
  const mean = r.reduce((a, b) => a + b, 0) / n;
  const sd = Math.max(SEQ_MIN_SD, Math.sqrt(r.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)));
  return mean + (T95[Math.min(n - 1, T95.length - 1)] ?? 1.75) * sd / Math.sqrt(n) < Math.log(1 - floor);
}

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
export function unitTimes(): Record<Unit, number> {
  return { fill: Infinity, scales: Infinity, checkCur: Infinity, checkCand: Infinity };
}

/** Records that unit `u` took `ms`: a decaying maximum of the recent times. */
export function noteUnitTime(times: Record<Unit, number>, u: Unit, ms: number): void {
  const prev = times[u];
  times[u] = Number.isFinite(prev) ? Math.max(ms, 0.9 * prev) : ms;
}

/** A `Measurement` of a candidate that never ran. */
export function failed(c: Candidate, error: string): Measurement {
  return {
    sha256: c.sha256, index: c.index, total: c.total, source: c.source, ticket: c.ticket,
    ok: false, error, median_us: 0, current_us: 0, noise: 0, runs: 0,
  };
}

export class Evaluation<I extends Impl> {
  phase: 'load' | 'inputs' | 'check' | 'warm' | 'time' | 'done' = 'load';
  result: Measurement | null = null;
  private gen: InputGen;
  private scales: Scales | null = null;
  private curOut: Float32Array | null = null;
  private reps = 1;
  private perCall = 0;
  private turn = 0;
  private warmMs = 0;
  private firstRun = 0;
  private warm = { cur: [] as number[], cand: [] as number[] };
  private timed = { cur: [] as number[], cand: [] as number[] };
  private samples: number[] | undefined;
  private rejectedEarly = false;
  private restarts = 0;
  private t0 = performance.now();
  private ends: Partial<Record<'load' | 'inputs' | 'check' | 'warm', number>> = {};
  private busyMs = 0;
  private slices = 0;
  private busyBy: Record<string, number> = {};
  private longest = 0;
  private longestPhase = '';

  impl: I | undefined;
  private loading: Promise<void> | null = null;
  /** Whether the fast policy applies (see `Policy`). */
  private get fast(): boolean {
    return (this.t.policy ?? 'fast') === 'fast';
  }
  private loadError: string | undefined;

  constructor(
    private t: EvalContext<I>,
    private backend: Backend<I>,
    readonly cand: Candidate,
    private fetched: Fetched<I>,
  ) {
    this.gen = new InputGen(t.specs, cand.seed);
    this.impl = fetched.impl;
    this.loadError = fetched.error;
  }

  /**
   * Compiles the candidate in the background while its inputs are made. It
   * starts only when this candidate's turn comes, never while another is
   * being timed: a compile (V8's background tiers, a GPU driver's pipeline
   * build) competes for the same cores and would inflate the timings.
   */
  private startLoad(): void {
    this.loading = this.backend.load(this.fetched.bytes!, this.cand.meta).then(
      (impl) => {
        this.impl = impl;
      },
      (e) => {
        this.loadError = `load: ${e instanceof Error ? e.message : e}`;
      },
    );
    this.loading.then(() => {
      this.loading = null;
      this.ends.load = performance.now() - this.t0;
    });
  }

  /** Records a failure; `us` is the time of the one run it had, if it ran. */
  private fail(error: string, us?: number): void {
    this.result = us === undefined ? failed(this.cand, error) : { ...failed(this.cand, error), median_us: Math.max(us, 0.001), runs: 1 };
    this.phase = 'done';
  }

  /**
   * Does what fits before `deadline`. Unless `strict`, at least one unit of
   * work is done even when it alone overruns; a strict call starts a unit
   * only when its estimated time fits.
   */
  async step(bench: Bench<I>, deadline: number, strict = false): Promise<void> {
    const t = performance.now();
    const from = this.phase;
    try {
      await this.work(bench, deadline, strict);
    } finally {
      const now = performance.now();
      this.busyMs += now - t;
      this.slices++;
      this.busyBy[from] = (this.busyBy[from] ?? 0) + (now - t);
      if (now - t > this.longest) {
        this.longest = now - t;
        this.longestPhase = from;
      }
      this.markPhases(from, now);
    }
  }

  /** Notes the end time of the phases left since `from`. */
  private markPhases(from: Evaluation<I>['phase'], now: number): void {
    const order = ['load', 'inputs', 'check', 'warm', 'time', 'done'] as const;
    for (let i = order.indexOf(from); i < order.indexOf(this.phase); i++) {
      const p = order[i];
      if (p !== 'time' && p !== 'done' && this.ends[p] === undefined) this.ends[p] = now - this.t0;
    }
    if (this.result && !this.result.trace) {
      const e = this.ends, at = now - this.t0;
      this.result.trace = {
        load_ms: e.load ?? at, inputs_ms: e.inputs ?? at, check_ms: e.check ?? at, warm_ms: e.warm ?? at, done_ms: at,
        busy_ms: this.busyMs, slices: this.slices, warm_pairs: this.warm.cur.length, timed_pairs: this.timed.cur.length,
        busy_by_phase: this.busyBy, longest_ms: this.longest, longest_phase: this.longestPhase,
        warm_cur: this.warm.cur, warm_cand: this.warm.cand,
      };
    }
  }

  /** Runs one unit of work, timing it for the tuner's estimates. */
  private async unit<T>(u: Unit, f: () => T | Promise<T>): Promise<T> {
    const t = performance.now();
    try {
      return await f();
    } finally {
      this.t.noteUnit(u, performance.now() - t);
    }
  }

  private async work(bench: Bench<I>, deadline: number, strict: boolean): Promise<void> {
    if (this.phase === 'load') {
      if (!this.impl && !this.fetched.bytes) return this.fail(this.loadError ?? 'not fetched');
      if (!this.impl && !this.loading) this.startLoad();
      this.phase = 'inputs';
    }
    if (this.phase === 'done') return;
    const cur = this.t.current;
    // Whether a unit estimated to take `est` ms may start now.
    let worked = strict;
    const fits = (est: number) => !worked || performance.now() + est <= deadline;
    while (this.phase !== 'done') {
      if (this.phase === 'inputs') {
        if (!this.gen.done) {
          if (!fits(this.t.unitMs.fill)) return;
          await this.unit('fill', () => this.gen.fill(1 << 15));
          worked = true;
          continue;
        }
        if (!fits(this.t.unitMs.scales)) return;
        await this.unit('scales', async () => {
          await bench.setInputs(this.gen.args);
          this.scales = new Scales(this.t.op, this.t.shape, this.gen.args);
        });
        worked = true;
        this.phase = 'check';
        continue;
      }
      if (this.phase === 'check') {
        if (!this.curOut) {
          if (!fits(this.t.unitMs.checkCur)) return;
          worked = true;
          const t0 = performance.now();
          try {
            this.curOut = await this.unit('checkCur', () => bench.runOnce(cur));
          } catch (e) {
            this.curOut = new Float32Array(0);
            this.t.currentBroken = true;
            this.t.note(`the kernel in use failed to run: ${e}`);
          }
          this.perCall = Math.max(performance.now() - t0, 1e-4);
          continue;
        }
        // The candidate's compile runs in the background: wait for it.
        if (this.loading) return;
        if (!this.impl) return this.fail(this.loadError ?? 'load failed');
        if (!fits(Math.max(this.t.unitMs.checkCand, this.perCall))) return;
        worked = true;
        const t1 = performance.now();
        this.firstRun = t1;
        let candOut: Float32Array;
        try {
          candOut = await this.unit('checkCand', () => bench.runOnce(this.impl!));
        } catch (e) {
          return this.fail(`run: ${e instanceof Error ? e.message : e}`, (performance.now() - t1) * 1000);
        }
        const t2 = performance.now();
        const curOut = this.curOut;
        const positions = this.cand.check?.length ? this.cand.check : defaultPositions(candOut.length);
        // Each kernel to its own tolerance (wider where its schedule quantises A).
        const [candTol, curTol] = [toleranceOf(this.scales!.op, this.impl!.meta.config), toleranceOf(this.scales!.op, cur.meta.config)];
        const ref = checkPositions(this.scales!, candOut, positions, candTol);
        if (!ref.ok) return this.fail(`output ${ref.worst} is off the reference by ${ref.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1000);
        if (!this.t.currentBroken) {
          const curRef = checkPositions(this.scales!, curOut, positions, curTol);
          if (!curRef.ok) {
            this.t.currentBroken = true;
            this.t.note(`the kernel in use is off the reference at output ${curRef.worst} (${curRef.maxErr.toExponential(2)})`);
          } else {
            // Both may carry rounding of up to their tolerance each.
            const cmp = compareOutputs(this.scales!, candOut, curOut, candTol + curTol);
            if (!cmp.ok) return this.fail(`output ${cmp.worst} differs from the kernel in use by ${cmp.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1000);
          }
        }
        if (this.cand.check) this.samples = this.cand.check.map((p) => candOut[p]);
        this.curOut = null;
        this.perCall = Math.max(this.perCall, t2 - t1, 1e-4);
        this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));
        this.phase = 'warm';
        continue;
      }
      // warm and time: one sample per loop, in ABBA order so drift hits both alike.
      const impl = this.impl!;
      if (!fits(this.reps * this.perCall)) return;
      worked = true;
      const curTurn = this.turn % 4 === 0 || this.turn % 4 === 3;
      const ms = await bench.time(curTurn ? cur : impl, this.reps);
      const per = ms / this.reps;
      const into = this.phase === 'warm' ? this.warm : this.timed;
      (curTurn ? into.cur : into.cand).push(per);
      this.turn++;
      if (this.turn % 2) continue;
      if (this.phase === 'warm') {
        this.warmMs += 2 * ms;
        this.perCall = Math.max(into.cur.at(-1)!, into.cand.at(-1)!, 1e-4);
        this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));
        const enough = this.t.warmPairs !== undefined
          ? into.cur.length >= this.t.warmPairs
          : warmedUp(into.cur, into.cand, performance.now() - this.firstRun) ||
            into.cur.length >= (this.fast ? FAST_WARM_PAIRS : WARM_MAX_PAIRS) || this.warmMs > (this.fast ? FAST_WARM_MS : WARM_MAX_MS);
        if (enough) this.phase = 'time';
        continue;
      }
      const t = this.timed;
      if (this.t.warmPairs === undefined && t.cand.length >= 2 && !noNewLow(t.cand) && this.restarts < MAX_RESTARTS) {
        this.restarts++;
        // The candidate got faster beyond noise: it was still warming up
        // (a late tier-up). Its timed samples become warm-up.
        this.warm.cur.push(...t.cur);
        this.warm.cand.push(...t.cand);
        t.cur.length = 0;
        t.cand.length = 0;
        this.phase = 'warm';
        continue;
      }
      // Fast: a candidate still undecided at its last pair but faster on the
      // pairs' mean is promising: it gets more pairs (one that may win is
      // worth them; one that cannot has stopped long before).
      const promising = this.fast && !pairedFaster(t.cur, t.cand) && meanLogRatio(t.cur, t.cand) < Math.log(1 - 0.01);
      const maxPairs = this.fast ? Math.min(this.t.timedPairs, SEQ_MAX_PAIRS) * (promising ? SEQ_PROMISING_PAIRS / SEQ_MAX_PAIRS : 1) : this.t.timedPairs;
      const settled = performance.now() - this.firstRun >= this.t.stopAfterMs;
      const verdict = this.fast && this.t.earlyReject && t.cur.length < maxPairs ? sequentialVerdict(t.cur, t.cand) : undefined;
      const early = this.t.earlyReject && t.cur.length < maxPairs && settled &&
        (clearlySlower(t.cur, t.cand) || (verdict === 'slower' && noNewLow(t.cand)) || futile(t.cur, t.cand));
      // Clearly faster: enough to decide (the swap rule on medians still applies).
      const won = !early && verdict === 'faster';
      // The fast policy's last pair comes no sooner than stopAfterMs after the
      // first call either (a late tier-up still shows as a new low), up to
      // three times its pairs.
      const full = this.fast ? t.cur.length >= maxPairs && (settled || t.cur.length >= 3 * maxPairs) : t.cur.length >= maxPairs;
      if (early || won || full) {
        this.rejectedEarly = early;
        const c = this.cand;
        this.result = {
          sha256: c.sha256, index: c.index, total: c.total, source: c.source, ticket: c.ticket, ok: true,
          median_us: median(t.cand) * 1000,
          current_us: median(t.cur) * 1000,
          noise: relNoise(t.cand),
          runs: this.reps * t.cand.length,
          samples: this.samples,
          ...(early ? { rejected_early: true } : {}),
        };
        this.phase = 'done';
      }
    }
  }

  /**
   * Whether the candidate beat the kernel in use. Legacy: its median is
   * lower beyond the noise of both sample sets (`fasterBeyondNoise`). Fast:
   * the paired test (`pairedFaster`) says it is faster by the 1 % floor at
   * one-sided 95 %, from the ratios of its timed pairs.
   */
  beatsCurrent(): boolean {
    if (this.rejectedEarly || this.timed.cand.length === 0) return false;
    return this.fast ? pairedFaster(this.timed.cur, this.timed.cand) : fasterBeyondNoise(this.timed.cand, this.timed.cur);
  }
}

export type TunerPhase = 'waiting' | 'opening' | 'running' | 'reporting' | 'done';

/** Times a queue is opened again after a rate limit (after the server's Retry-After; at least 1, 2, 4, 8, then 15 s apart). */
const MAX_OPEN_RETRIES = 20;

/** Fast policy: a kernel is evaluated against this many candidates at least before it may stop. */
export const MIN_EVALUATED = 4;
/**
 * Fast policy: the share of a kernel's time that its next candidate is
 * expected to save when nothing is known (the lite space's head often wins
 * 20-40 %), divided by (1 + the candidates measured since the last win)²:
 * the queue is ranked best first, so a run of losers says the rest lose too.
 */
export const GAIN_PRIOR = 0.3;
/**
 * Fast policy: a kernel stops (reports what it measured) once its expected
 * gain, as a share of the app's kernel time (its weight share × the gain
 * above), is under this.
 */
export const STOP_GAIN = 0.002;
/** Fast policy: queue positions one unit of predicted log time moves a candidate (settings shared with measured losers move it back, with winners forward). */
export const FEATURE_WEIGHT = 20;
/** Fast policy: a kernel does not stop while the setting model expects a waiting candidate to be this much faster than its kernel in use. */
export const PREDICT_MARGIN = 0.05;
/** The stop rule's optimism per setting a kernel has not measured itself (log time; see `shouldStop`). */
export const UNCERTAINTY = 0.1;
/** The setting model's shrinkage (in measurements' weight). */
const FIT_RIDGE = 0.5;
/**
 * Candidates read from a queue ahead of those taken (the fast policy
 * chooses among them). Lite-space queues are shorter than this, so the
 * stream usually ends and its connection closes at once: a paused stream
 * would hold one of the MAX_OPEN_QUEUES slots, and the heaviest kernels,
 * which come with the app's later buckets, could not open theirs.
 */
export const READ_AHEAD = 32;
/** A sibling's measurements count this much beside a kernel's own. */
const SIBLING_WEIGHT = 0.5;

/** A schedule's top-level settings as `field=value` strings (numbers kept apart for distances). */
function settingsOf(config: Record<string, unknown> | undefined): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [k, v] of Object.entries(config ?? {})) out.set(k, typeof v === 'number' ? v : JSON.stringify(v));
  return out;
}

/** How far apart two schedules are: 1 per differing setting, |log2| of the ratio for numbers. */
export function configDistance(a: Record<string, unknown> | undefined, b: Record<string, unknown> | undefined): number {
  const x = settingsOf(a), y = settingsOf(b);
  let d = 0;
  for (const k of new Set([...x.keys(), ...y.keys()])) {
    const u = x.get(k), v = y.get(k);
    if (u === v) continue;
    if (typeof u === 'number' && typeof v === 'number' && u > 0 && v > 0) d += Math.min(1, Math.abs(Math.log2(u / v)) / 2);
    else d += 1;
  }
  return d;
}

/**
 * The kernels of one op and target whose shapes differ only in batch and M
 * (a model's buckets): their tuners share what they measured. A member's
 * winner moves the nearest candidate of every other member's queue to its
 * front (measured there before any swap), and every member's measurements
 * re-rank the others' queues by setting.
 */
export class Family<I extends Impl> {
  readonly members: KernelTuner<I>[] = [];

  /** The family of `op` at `shape` (`K` and `N` kept, batch and `M` dropped) on `target`. */
  static key(op: OpName, shape: readonly number[], target: string): string {
    const [, , k, n] = bmkn(op, shape);
    return `${op}/${k},${n}/${target}`;
  }
}

/** One kernel measured by a tuner: its settings and its time over the default kernel's. */
interface Known {
  config: Record<string, unknown> | undefined;
  logRel: number;
}

/** A candidate's bytes being fetched. */
type Fetching<I> = { done: boolean; value?: Fetched<I> };

export class KernelTuner<I extends Impl> {
  readonly specs: ArgSpec[];
  phase: TunerPhase = 'waiting';
  /** Opening the queue failed on a rate limit this many times; the next try not before `openAfter`. */
  private openRetries = 0;
  private openAfter = 0;
  currentBroken = false;
  readonly results: Measurement[] = [];
  readonly notes: string[] = [];
  total = 0;
  /** Candidates to evaluate at most (the queue is best first); the rest are not fetched. */
  maxCandidates = Infinity;
  private started = 0;
  /** Timed sample pairs per candidate (at most, under the fast policy). */
  timedPairs: number;
  /** Fixed warm-up pairs (no JIT to wait for on a GPU), or undefined to wait until timings settle. */
  warmPairs: number | undefined;
  /** Stop timing a candidate once it is clearly slower or cannot win (see `clearlySlower`, `futile`, `sequentialVerdict`). */
  earlyReject = true;
  /** How long after a candidate's first call an early stop may come, ms. */
  stopAfterMs = STOP_AFTER_MS;
  /** The policy (see `Policy`); set before the first step. */
  policy: Policy = 'fast';
  /** This kernel's share of the app's kernel time (0..1), kept up to date by the host; weighs the stop rule. */
  share = 1;
  /** The family this kernel belongs to, if any (set with `join`). */
  family: Family<I> | null = null;
  /**
   * How long each kind of unit of work took lately, ms (a decaying maximum;
   * Infinity until seen): a strict step starts a unit only when it fits.
   */
  readonly unitMs: Record<Unit, number> = unitTimes();
  private reader: SseReader | null = null;
  /** Candidates read from the queue and not yet taken, in the server's order. */
  private waiting: Candidate[] = [];
  private streamDone = false;
  /** Sibling winners (their settings as JSON) whose nearest candidate here was taken, and the candidate a winner picked. */
  private hinted = new Set<string>();
  private hintFor = new Map<string, string>();
  /** Resumes the queue's reading once a candidate is taken. */
  private readMore: (() => void) | null = null;
  private fetches = new Map<string, Fetching<I>>();
  private ev: Evaluation<I> | null = null;
  private bench: Bench<I> | null = null;
  private abort = new AbortController();
  /** An adoption under way (the host may try the candidate in the app first); nothing else runs meanwhile. */
  private adopting: Promise<void> | null = null;
  /** Where candidates are evaluated when not here (the bench worker), and the ones sent there, oldest first. */
  remote: RemoteEvaluator<I> | null = null;
  private jobs: { fetched: Fetched<I>; impl?: I; answer?: RemoteAnswer; error?: string; done: boolean }[] = [];
  /** The default kernel (the first in use), each measured kernel's time over it (log), and their settings. */
  private readonly defaultSha: string;
  private readonly logRel = new Map<string, number>();
  private readonly configs = new Map<string, Record<string, unknown> | undefined>();
  /** Candidates measured since the last swap, and the swaps. */
  sinceWin = 0;
  wins = 0;
  /** The last time of the kernel in use measured here, µs (0 before any). */
  currentUs = 0;
  /** When the queue was found drained while the plan guard had not judged the kernel in use (0: not yet). */
  private drainedAt = 0;

  constructor(
    private host: TunerHost<I>,
    private backend: Backend<I>,
    readonly op: OpName,
    readonly shape: number[],
    public current: I,
  ) {
    this.specs = argSpecs(op, shape);
    this.timedPairs = backend.target === 'wasm' ? 9 : 5;
    this.warmPairs = backend.target === 'wasm' ? undefined : 1;
    this.defaultSha = current.sha256;
    this.logRel.set(current.sha256, 0);
    this.configs.set(current.sha256, current.meta.config);
  }

  get key(): string {
    return `${this.op}/${this.shape.join(',')}/${this.backend.target}`;
  }

  /** Joins `family` (kernels of the same op whose shapes differ only in batch and M). */
  join(family: Family<I>): void {
    this.family = family;
    family.members.push(this);
  }

  note(s: string): void {
    this.notes.push(s);
  }

  /** @internal Records how long one unit of work took. */
  noteUnit(u: Unit, ms: number): void {
    noteUnitTime(this.unitMs, u, ms);
  }

  /** Candidates evaluated so far. */
  get evaluated(): number {
    return this.results.length;
  }

  /** Candidates taken from the queue so far, evaluated or under evaluation. */
  get taken(): number {
    return this.started;
  }

  /** Whether a candidate is part-way through its evaluation (or its adoption). */
  get evaluating(): boolean {
    return this.ev !== null || this.jobs.length > 0 || this.adopting !== null;
  }

  /** Whether the queue's stream is open (opening, or being read). */
  get streaming(): boolean {
    return this.phase === 'opening' || (this.phase === 'running' && !this.streamDone);
  }

  /** Candidate timings taken (warm-up and timed samples of both kernels) so far: the cost of tuning. */
  timings = 0;

  /**
   * The share of this kernel's time that its next candidate is expected to
   * save: GAIN_PRIOR / (1 + candidates since the last win)²; 0 once done.
   */
  get expectedGain(): number {
    if (this.phase === 'done' || this.phase === 'reporting') return 0;
    return GAIN_PRIOR / (1 + this.sinceWin) ** 2;
  }

  /**
   * Whether a heavier member of this kernel's family (a bigger share of the
   * app's time) is still tuning: its winner will be this kernel's first
   * candidate, so this one waits while other work is there.
   */
  get behindSibling(): boolean {
    if (this.transferPending) return false;
    for (const s of this.family?.members ?? []) {
      if (s !== this && s.share > this.share && s.phase !== 'done' && s.phase !== 'reporting') return true;
    }
    return false;
  }

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
  get transferPending(): boolean {
    if (this.policy !== 'fast' || !(this.phase === 'waiting' || this.phase === 'opening' || this.phase === 'running')) return false;
    return this.threadedSiblingWinners().some((w) => this.pendingTransfer(w.meta.config!));
  }

  /** The kernels in use of this kernel's siblings that are threaded winners (swapped in, with settings, more than one part). */
  private threadedSiblingWinners(): I[] {
    return (this.family?.members ?? []).filter((s) => s !== this && s.current.sha256 !== s.defaultSha && s.current.meta.config && (s.current.meta.threads ?? 1) > 1)
      .map((s) => s.current);
  }

  /**
   * Whether a sibling has in use, swapped in after its own trial in the
   * app's calls, a threaded kernel of the same settings as `impl`: the
   * host then asks fewer pairs of `impl`'s trial (see
   * `TRIAL_VOUCHED_PAIRS`), the plan guard still judging the model's calls.
   */
  vouched(impl: I): boolean {
    if (this.policy !== 'fast' || !((impl.meta.threads ?? 1) > 1) || !impl.meta.config) return false;
    return this.threadedSiblingWinners().some((w) => w.meta.threads === impl.meta.threads && configDistance(w.meta.config, impl.meta.config) === 0);
  }

  /** Whether sibling winner `w` is still to be tried here (neither offered nor measured). */
  private pendingTransfer(w: Record<string, unknown>): boolean {
    return !this.hinted.has(JSON.stringify(w)) && ![...this.logRel.keys()].some((sha) => configDistance(this.configs.get(sha), w) === 0);
  }

  /** Starts reading the queue (in the background). */
  open(): void {
    if (this.phase !== 'waiting' || performance.now() < this.openAfter) return;
    this.phase = 'opening';
    const q = new URLSearchParams({ op: this.op, shape: this.shape.join(','), target: this.backend.target });
    const url = `${this.host.server}/v1/sessions/${this.host.sessionId}/queue?${q}`;
    SseReader.open(url, this.abort.signal).then(
      (r) => {
        this.reader = r;
        this.phase = 'running';
        this.read();
      },
      (e) => {
        this.note(`queue: ${e}`);
        // A rate limit outlasting fetchRetrying's attempts (a model with many
        // kernels asks for many queues in its first minute): wait and open
        // again when the server's Retry-After says (the other kernels tune
        // meanwhile), rather than leave the kernel untuned.
        const { status, retryAfter } = e as { status?: number; retryAfter?: number };
        if (status !== undefined && retryable(status) && this.openRetries < MAX_OPEN_RETRIES) {
          this.openAfter = performance.now() + 1000 * Math.max(retryAfter ?? 0, Math.min(15, 2 ** this.openRetries++));
          this.phase = 'waiting';
        } else {
          this.phase = 'done';
        }
      },
    );
  }

  /**
   * Reads the queue's events in the background (events only: a candidate's
   * bytes are fetched when it is about to be taken), up to READ_AHEAD
   * candidates not yet taken (the server compiles each as it streams it),
   * so that the fast policy can take them in its own order. Stops at
   * `maxCandidates`.
   */
  private read(): void {
    const loop = async () => {
      for (;;) {
        if (this.waiting.length + this.started >= this.maxCandidates) break;
        while (this.waiting.length >= READ_AHEAD && this.phase === 'running') await new Promise<void>((r) => (this.readMore = r));
        if (this.phase !== 'running') break;
        const e = await this.reader!.next();
        if (!e || e.event === 'done') break;
        if (e.event !== 'candidate') continue;
        const cand = parseCandidate(e.data);
        this.total = cand.total;
        this.waiting.push(cand);
        this.configs.set(cand.sha256, cand.meta.config);
      }
    };
    loop()
      .catch((err) => this.note(`queue read: ${err}`))
      .finally(() => {
        this.streamDone = true;
        this.reader?.cancel();
        this.reader = null;
      });
  }

  /** The candidate's bytes, fetched in the background (the kernel in use is not fetched again). */
  private fetchOf(c: Candidate): Fetching<I> {
    let f = this.fetches.get(c.sha256);
    if (f) return f;
    const g: Fetching<I> = { done: false };
    f = g;
    this.fetches.set(c.sha256, g);
    if (c.sha256 === this.current.sha256) {
      g.value = { cand: c, impl: this.current };
      g.done = true;
      return g;
    }
    this.host.fetchKernel(c.url, this.backend.target).then(
      (bytes) => (g.value = { cand: c, bytes }),
      (err) => (g.value = { cand: c, error: `fetch: ${err instanceof Error ? err.message : err}` }),
    ).finally(() => (g.done = true));
    return g;
  }

  /** Takes `c` off the waiting list (and lets the queue's reading go on). */
  private take(c: Candidate): void {
    const hint = this.hintFor.get(c.sha256);
    if (hint) this.hinted.add(hint);
    this.hintFor.clear();
    this.waiting.splice(this.waiting.indexOf(c), 1);
    this.fetches.delete(c.sha256);
    const go = this.readMore;
    this.readMore = null;
    go?.();
  }

  /** What this tuner and its siblings measured, with the weight each counts for here. */
  private known(): { k: Known; w: number }[] {
    const out: { k: Known; w: number }[] = [];
    const add = (t: KernelTuner<I>, w: number) => {
      for (const [sha, logRel] of t.logRel) out.push({ k: { config: t.configs.get(sha), logRel }, w });
    };
    add(this, 1);
    for (const s of this.family?.members ?? []) if (s !== this) add(s, SIBLING_WEIGHT * this.nearness(s));
    return out;
  }

  /**
   * How alike a sibling's shape is (1 for the same rows): 2^(−½·|log2 of
   * the ratio of their rows (batch × M)|), so a bucket 4× larger counts half.
   */
  private nearness(s: KernelTuner<I>): number {
    const rows = (t: KernelTuner<I>) => {
      const [b, m] = bmkn(t.op, t.shape);
      return Math.max(1, b * m);
    };
    return 2 ** (-0.5 * Math.abs(Math.log2(rows(s) / rows(this))));
  }

  /** The settings of the winners of this kernel's siblings (kernels they swapped in), nearest shape first. */
  private siblingWinners(): Record<string, unknown>[] {
    const out: { c: Record<string, unknown>; near: number }[] = [];
    for (const s of this.family?.members ?? []) {
      if (s !== this && s.current.sha256 !== s.defaultSha && s.current.meta.config) out.push({ c: s.current.meta.config, near: this.nearness(s) });
    }
    return out.sort((a, b) => b.near - a.near).map((x) => x.c);
  }

  /**
   * The next candidate to take: null when none is left (or the fast
   * policy's stop rule says so), 'wait' while the queue is still being read
   * and nothing is there yet. Legacy: the server's order. Fast: the nearest
   * candidate to each sibling's winner first, then the server's order
   * re-ranked by what this device measured (`score`).
   */
  private choose(): Candidate | null | 'wait' {
    if (this.started >= this.maxCandidates) return null;
    if (this.policy === 'fast' && this.shouldStop()) return null;
    if (!this.waiting.length) return this.streamDone ? null : 'wait';
    if (this.policy === 'legacy') return this.waiting[0];
    for (const w of this.siblingWinners()) {
      // Each sibling winner sends one candidate forward, once; none when it was measured here already.
      const key = JSON.stringify(w);
      if (this.hinted.has(key)) continue;
      const measured = [...this.logRel.keys()].some((sha) => configDistance(this.configs.get(sha), w) === 0);
      let best: Candidate | null = null, bestD = Infinity;
      for (const c of this.waiting) {
        const d = configDistance(c.meta.config, w);
        if (d < bestD) (best = c), (bestD = d);
      }
      if (!best || measured) continue;
      if (bestD === 0 || this.streamDone || this.waiting.length >= READ_AHEAD) {
        this.hintFor.set(best.sha256, key);
        return best;
      }
    }
    // The lite space's own first guess for this shape comes next, as served.
    if (this.waiting[0].index === 0) return this.waiting[0];
    const optimistic = this.optimism(this.fit());
    let best = this.waiting[0], bestScore = Infinity;
    this.waiting.forEach((c, i) => {
      const s = i + FEATURE_WEIGHT * optimistic(c);
      if (s < bestScore) (bestScore = s), (best = c);
    });
    return best;
  }

  /**
   * An additive model of log time by setting, fitted to what this kernel
   * and (at half weight) its siblings measured: the weighted mean log time
   * over the default kernel, and per setting (`field=value`) the weighted
   * mean deviation from it of the kernels that share it. The paper's
   * premise: a device's primitives cost the same whichever schedule uses them.
   */
  private fit(): { mean: number; effect: Map<string, number> } {
    const known = this.known().map(({ k, w }) => ({ w, y: k.logRel, keys: [...settingsOf(k.config)].map(([f, v]) => `${f}=${v}`) }));
    let sw = 0, s = 0;
    for (const { w, y } of known) (sw += w), (s += w * y);
    const mean = sw > 0 ? s / sw : 0;
    // Ridge-regularised least squares over one-hot settings, by backfitting
    // (a few sweeps of Gauss-Seidel): each setting's effect is the weighted
    // mean of what the other settings leave unexplained, shrunk toward 0.
    const effect = new Map<string, number>();
    for (const { keys } of known) for (const key of keys) effect.set(key, 0);
    const fitted = known.map(() => mean);
    for (let sweep = 0; sweep < 8; sweep++) {
      for (const key of effect.keys()) {
        let num = 0, den = FIT_RIDGE;
        const e = effect.get(key)!;
        known.forEach((p, i) => {
          if (!p.keys.includes(key)) return;
          num += p.w * (p.y - (fitted[i] - e));
          den += p.w;
        });
        const next = num / den;
        known.forEach((p, i) => {
          if (p.keys.includes(key)) fitted[i] += next - e;
        });
        effect.set(key, next);
      }
    }
    return { mean, effect };
  }

  /** The model's log time over the default kernel for a schedule (settings never measured count 0). */
  private predict(config: Record<string, unknown> | undefined, model: { mean: number; effect: Map<string, number> }): number {
    let p = model.mean;
    for (const [f, v] of settingsOf(config)) p += model.effect.get(`${f}=${v}`) ?? 0;
    return p;
  }

  /**
   * A candidate's optimistic log time over the default kernel: the model's
   * prediction less UNCERTAINTY per setting, divided by 1 + the kernels
   * measured here that share it (a sibling's shape may differ where it
   * matters: what this kernel has not tried itself may still win here).
   */
  private optimism(model: { mean: number; effect: Map<string, number> }): (c: Candidate) => number {
    const own = new Map<string, number>();
    for (const sha of this.logRel.keys()) {
      for (const [f, v] of settingsOf(this.configs.get(sha))) own.set(`${f}=${v}`, (own.get(`${f}=${v}`) ?? 0) + 1);
    }
    return (c) => {
      let u = 0;
      for (const [f, v] of settingsOf(c.meta.config)) u += UNCERTAINTY / (1 + (own.get(`${f}=${v}`) ?? 0));
      return this.predict(c.meta.config, model) - u;
    };
  }

  /** Fast policy: whether this kernel is tuned enough (its expected gain, weighed by its share of the app's time, is under STOP_GAIN). */
  private shouldStop(): boolean {
    if (this.results.length < MIN_EVALUATED) return false;
    // A sibling's winner not yet measured here is worth its measurement.
    if (this.waiting.length && this.siblingWinners().some((w) => this.pendingTransfer(w))) return false;
    if (this.share * this.expectedGain >= STOP_GAIN) return false;
    // Not while the model (optimistically) expects a waiting candidate to beat the kernel in use clearly.
    const model = this.fit();
    const cur = this.logRel.get(this.current.sha256) ?? 0;
    const optimistic = this.optimism(model);
    return !this.waiting.some((c) => optimistic(c) < cur + Math.log(1 - PREDICT_MARGIN));
  }

  /** Records what a finished evaluation taught (times over the default kernel, wins). */
  private learn(m: Measurement, trace: EvalTrace | undefined): void {
    this.timings += trace ? 2 * (trace.warm_pairs + trace.timed_pairs) : 0;
    if (!m.ok || !(m.median_us > 0) || !(m.current_us > 0)) {
      this.sinceWin++;
      return;
    }
    const base = this.logRel.get(this.current.sha256) ?? 0;
    this.logRel.set(m.sha256, base + Math.log(m.median_us / m.current_us));
    this.currentUs = m.current_us;
  }

  /**
   * What a trial in the app's own calls taught: the app's ratio replaces the
   * bench's, in the setting model (so that the queue is ranked by what wins
   * in the app) and in the report (the candidate's time is the kernel in
   * use's bench time times that ratio, so that the crowd elects what won in
   * the app, not on the bench).
   */
  private learnInApp(m: Measurement, previous: I, r: AppTrial): void {
    const ratio = r.cand_ms / r.cur_ms;
    if (!(ratio > 0) || !Number.isFinite(ratio)) return;
    m.bench_us = m.median_us;
    m.app_ratio = ratio;
    m.median_us = m.current_us * ratio;
    this.logRel.set(m.sha256, (this.logRel.get(previous.sha256) ?? 0) + Math.log(ratio));
  }

  /**
   * The plan guard put `impl` back in place of `lost`: the model's calls
   * ran `ratio` × slower on the plan with `lost` (and whatever else it
   * judged with it). `lost` is ranked that much behind `impl` from now on,
   * here and in the report.
   */
  reverted(impl: I, lost: I, ratio: number): void {
    if (this.current.sha256 === lost.sha256) {
      this.current = impl;
      this.currentBroken = false;
    }
    const was = this.logRel.get(lost.sha256);
    const now = (this.logRel.get(impl.sha256) ?? 0) + Math.log(Math.max(1, ratio));
    if (was === undefined || now > was) {
      this.logRel.set(lost.sha256, now);
      for (const m of this.results) if (m.sha256 === lost.sha256 && m.ok && m.median_us > 0) m.median_us *= Math.exp(now - (was ?? now));
    }
    this.note(`${lost.sha256.slice(0, 12)} put back to ${impl.sha256.slice(0, 12)} by the plan guard: the model's calls were ${ratio.toFixed(3)}x the time`);
  }

  /** Starts adopting `impl` (the host may first try it in the app's own calls); the tuner waits for it. */
  private adopt(impl: I, m: Measurement): void {
    const previous = this.current;
    this.adopting = (async () => {
      let ok = false;
      try {
        const r = await this.host.adopt(this, impl, m, previous);
        if (typeof r === 'object') this.learnInApp(m, previous, r);
        ok = typeof r === 'object' ? r.ok : r !== false;
      } catch (e) {
        this.note(`adopting ${impl.sha256}: ${e instanceof Error ? e.message : e}`);
      }
      if (!ok) {
        this.sinceWin++;
        return;
      }
      this.current = impl;
      this.currentBroken = false;
      this.currentUs = m.median_us;
      this.sinceWin = 0;
      this.wins++;
    })().finally(() => (this.adopting = null));
  }

  /**
   * Does the tuning work that is ready, until `deadline` (a performance.now()
   * time). Returns whether anything was done. Unless `strict`, one unit of
   * work is done even if it alone overruns the deadline (so that a kernel
   * longer than the budget still gets tuned); a strict step never starts a
   * unit that it does not expect to fit.
   */
  async step(deadline: number, strict = false): Promise<boolean> {
    if (this.adopting) return false;
    if (this.phase === 'waiting') this.open();
    if (this.phase !== 'running') return false;
    if (this.remote) return this.stepRemote();
    if (!this.ev) {
      const next = this.choose();
      if (next === 'wait') return false;
      if (next === null) {
        if (!this.waitForGuard()) this.finish();
        return false;
      }
      const f = this.fetchOf(next);
      if (!f.done) return false;
      this.take(next);
      // The kernel in use may have changed since the fetch began.
      const value = next.sha256 === this.current.sha256 ? { cand: next, impl: this.current } : f.value!;
      this.ev = new Evaluation(this, this.backend, next, value);
      this.started++;
      // Fetch the likely next candidate's bytes while this one runs (network only).
      const guess = this.choose();
      if (guess && guess !== 'wait') this.fetchOf(guess);
    }
    const ev = this.ev;
    this.bench ??= this.backend.bench(this.specs, this.current.meta);
    await ev.step(this.bench, deadline, strict);
    if (ev.phase === 'done' && ev.result) {
      this.ev = null;
      const m = ev.result;
      this.results.push(m);
      this.host.measured(this, m);
      const impl = ev.impl!;
      const beats = m.ok && impl.sha256 !== this.current.sha256 && (this.currentBroken || ev.beatsCurrent());
      this.learn(m, m.trace);
      if (beats) this.adopt(impl, m);
      else if (m.ok) this.sinceWin++;
    }
    return true;
  }

  /**
   * With a remote evaluator: takes in finished answers (adopting a winner),
   * and keeps up to two candidates with the worker, so that it never waits
   * for this page between two of them. The page only fetches, compiles
   * (in the background) and adopts.
   */
  private async stepRemote(): Promise<boolean> {
    let did = false;
    while (this.jobs.length && this.jobs[0].done) {
      const j = this.jobs.shift()!;
      did = true;
      const m = j.answer?.result ?? failed(j.fetched.cand, j.error ?? 'not evaluated');
      for (const n of j.answer?.notes ?? []) this.note(n);
      this.results.push(m);
      this.host.measured(this, m);
      this.learn(m, m.trace);
      if (j.answer?.beats && j.impl && j.impl.sha256 !== this.current.sha256) {
        this.adopt(j.impl, m);
        return true;
      } else if (m.ok) this.sinceWin++;
    }
    if (this.jobs.length >= 2) return did;
    // With a job in flight, the stop rule and the ranking wait for its answer.
    if (this.jobs.length && this.policy === 'fast') return did;
    const next = this.choose();
    if (next === 'wait') return did;
    if (next === null) {
      if (!this.jobs.length && !this.waitForGuard()) this.finish();
      return did;
    }
    const fetching = this.fetchOf(next);
    if (!fetching.done) return did;
    this.take(next);
    const f = next.sha256 === this.current.sha256 ? { cand: next, impl: this.current } : fetching.value!;
    this.started++;
    const job: (typeof this.jobs)[number] = { fetched: f, done: false };
    this.jobs.push(job);
    const remote = this.remote!;
    (async () => {
      const impl = f.impl ?? (f.bytes !== undefined ? await this.backend.load(f.bytes, f.cand.meta) : undefined);
      if (!impl) throw new Error(f.error ?? 'not fetched');
      job.impl = impl;
      job.answer = await remote.evaluate(this, f.cand, impl);
    })()
      .catch((e) => {
        job.error = !job.impl && f.error ? f.error : `${job.impl ? 'bench worker' : 'load'}: ${e instanceof Error ? e.message : e}`;
      })
      .finally(() => {
        job.done = true;
      });
    return true;
  }

  /**
   * The report body: the five fastest that passed, then failures that ran
   * (the server flags them) while there is room. A candidate that failed to
   * load has no time to report, so it is left out.
   */
  reportBody(): ReportRequest | null {
    const bySha = new Map<string, Measurement>();
    for (const m of this.results) {
      const prev = bySha.get(m.sha256);
      if (!prev || (m.ok && (!prev.ok || m.median_us < prev.median_us))) bySha.set(m.sha256, m);
    }
    const all = [...bySha.values()];
    const ok = all.filter((m) => m.ok).sort((a, b) => a.median_us - b.median_us);
    const bad = all.filter((m) => !m.ok && m.runs > 0);
    const top = [...ok, ...bad].slice(0, 5);
    if (!ok.length) return null;
    return {
      op: this.op,
      shape: this.shape,
      target: this.backend.target,
      entries: top.map((m) => {
        const e: ReportEntry = {
          sha256: m.sha256, ticket: m.ticket, median_us: m.median_us, runs: m.runs, output_ok: m.ok,
        };
        if (m.ok && m.samples) e.samples = m.samples;
        return e;
      }),
    };
  }

  /** Whether the queue has nothing left to try: reporting, done, or waiting for the plan guard's verdict to report. */
  get drained(): boolean {
    return this.phase === 'done' || this.phase === 'reporting' || this.drainedAt > 0;
  }

  /** Whether the drained queue's report waits for the plan guard's verdict on the kernel in use (GUARD_REPORT_WAIT_MS at most). */
  private waitForGuard(): boolean {
    if (!this.host.unjudged?.(this)) return false;
    const now = performance.now();
    this.drainedAt ||= now;
    return now - this.drainedAt < GUARD_REPORT_WAIT_MS;
  }

  private finish(): void {
    this.reader?.cancel();
    this.reader = null;
    this.readMore?.();
    this.bench?.dispose();
    this.bench = null;
    this.phase = 'reporting';
    const body = this.reportBody();
    if (!body) {
      this.phase = 'done';
      this.host.reported(this, null, 'no candidate passed its check; nothing to report');
      return;
    }
    // Waited out on rate limits, never dropped on one (`Reporter`).
    (this.host.submit?.(body) ?? Reporter.one(this.host.server, this.host.sessionId, body))
      .then(({ response, error }) => {
        this.phase = 'done';
        this.host.reported(this, response, error);
      });
  }

  /** Stops reading the queue; nothing is reported. */
  cancel(): void {
    this.abort.abort();
    this.readMore?.();
    this.reader?.cancel();
    this.bench?.dispose();
    this.bench = null;
    this.phase = 'done';
  }
}
