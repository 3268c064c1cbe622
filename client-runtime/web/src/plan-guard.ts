// The plan guard: a model's own calls judge the kernels tuning put in,
// all of a call's kernels at once (issue 36: tuning must never leave a
// model slower than the kernels it started with).
//
// Each candidate already had to win alone (on the bench, then, under
// `trials: 'all'`, in the app's calls against the kernel it replaces). What
// that cannot see is the plan: kernels that are each faster in isolation
// and slower together (one's scratch evicts the next one's weights, a
// threaded part wakes the pool at the wrong time), or small losses that
// each passed the noise floor and add up. So a model call of one kind
// (a row bucket of a decoder, a bucket of an encoder) that uses any kernel
// the guard has not accepted yet runs, in turn, on the plan before those
// kernels (each one's *base*: the kernel it had when the guard last
// accepted it, at first the one it was loaded with) and on the plan in
// use, ABBA over four calls, each pair the mean call of each side. The
// plan in use is kept once the pairs say it is faster; it is put back to
// the base as soon as they say it is slower; after GUARD_MAX_PAIRS (or
// GUARD_MAX_MS of calls), kept only if its median pair is not slower. A kind is judged once every
// kernel of it is quiet (its tuner has nothing left to try and waits for
// the verdict to report), so tuning is never held up and both sides of
// every pair run the same two plans; should a kernel of it change anyway,
// the judgement starts over.

import { sequentialVerdict } from './tuner.js';
import { median, signFaster } from './stats.js';

/** What the guard needs of a kernel (a `WasmKernel`). */
export interface Guarded {
  /** Whether the kernel in use is one the guard has not accepted yet (it has a base). */
  readonly unguarded: boolean;
  /** Whether a candidate is being tried in the kernel's own calls (the guard waits for it). */
  readonly trialPending: boolean;
  /** Whether its tuning has nothing left to try (or it has no tuner): only then is its kind judged. */
  readonly quiet: boolean;
  /** Calls run the base kernel while on. */
  useBase(on: boolean): void;
  /** The verdict: keep the kernel in use (it becomes the base) or put the base back; `ratio` is the plan's time over the base plan's. */
  settle(keep: boolean, ratio: number): void;
}

/** Pairs before the guard may keep a plan, and at most. */
export const GUARD_MIN_PAIRS = 4;
export const GUARD_MAX_PAIRS = 12;
/** The plan in use is put back at once when its median pair over the first two or three is this much slower (and at most one pair faster). */
export const GUARD_REJECT_RATIO = 1.15;
/** Cycles of four calls that warm both plans up before pairs are kept (the base's kernels have not run for a while)... */
export const GUARD_WARM_CYCLES = 1;
/** ...unless its calls take this long (ms), which warms them well enough. */
export const GUARD_WARM_CALL_MS = 20;
/**
 * Calls' time a judgement spends at most (ms): past it, with GUARD_MIN_PAIRS
 * pairs (2 past twice as long: a kind whose every call takes seconds, such
 * as a long prompt's bucket on one thread), the median pair decides.
 */
export const GUARD_MAX_MS = 8_000;
/** A judgement that gets no call for this long is settled on what it has (kept with fewer than two pairs). */
export const GUARD_TIMEOUT_MS = 30_000;

/** `guard` event detail: a verdict on the kernels of one kind of model call. */
export interface GuardDetail {
  /** The kind of call (a decoder's row bucket, an encoder's bucket). */
  kind: string;
  /** Kernels judged: those that differed from their base. */
  kernels: { op: string; shape: number[] }[];
  kept: boolean;
  /** The plan in use over the base plan, median pair (< 1: faster). */
  ratio: number;
  pairs: number;
  /** Median call of each side, ms. */
  base_ms: number;
  plan_ms: number;
}

interface Judgement {
  /** Every kernel of the kind (none of them starts a trial meanwhile). */
  all: readonly Guarded[];
  /** Those judged. */
  members: Guarded[];
  turn: number;
  /** Cycles left to warm up. */
  warm: number;
  /** Time of the calls judged so far, ms. */
  spent: number;
  acc: { base: number; plan: number; baseCalls: number; planCalls: number };
  base: number[];
  plan: number[];
  last: number;
}

export class PlanGuard {
  private open = new Map<string, Judgement>();
  private waiters: (() => void)[] = [];
  /** Kernels some call went through the guard with (only their plans are judged). */
  private seen = new WeakSet<Guarded>();
  private describe: (k: Guarded) => { op: string; shape: number[] };

  constructor(
    /** Called with every verdict. */
    private onVerdict: (d: GuardDetail) => void = () => {},
    describe?: (k: Guarded) => { op: string; shape: number[] },
    /** The clock (ms); tests pass their own. */
    private now: () => number = () => performance.now(),
  ) {
    this.describe = describe ?? ((k) => ({ op: (k as unknown as { op?: string }).op ?? '?', shape: (k as unknown as { shape?: number[] }).shape ?? [] }));
  }

  /** Kinds under judgement now (a model with no calls of its own to make runs some of these). */
  pending(): string[] {
    return [...this.open.keys()];
  }

  /** Whether a call of `kind` over `kernels` would be judged now (a judgement open, or one it would open). */
  due(kind: string, kernels: readonly Guarded[]): boolean {
    if (this.open.has(kind)) return true;
    const members = kernels.filter((k) => k.unguarded);
    return members.length > 0 && !kernels.some((k) => k.trialPending || !k.quiet) && !members.some((k) => this.holds(k));
  }

  /** Whether `k` runs in guarded calls and its kernel in use still waits for a verdict. */
  judges(k: Guarded): boolean {
    return k.unguarded && this.seen.has(k);
  }

  /** Whether `k` belongs to a kind under judgement (it must not take a new kernel or start a trial). */
  holds(k: Guarded): boolean {
    for (const j of this.open.values()) if (j.all.includes(k)) return true;
    return false;
  }

  /** Resolves once no judgement holds `k` (at once when none does). */
  async released(k: Guarded): Promise<void> {
    while (this.holds(k)) {
      this.expire();
      if (!this.holds(k)) break;
      await new Promise<void>((r) => {
        // A judgement whose kind gets no calls is settled by the timeout; look again then.
        const timer = setTimeout(r, GUARD_TIMEOUT_MS + 10);
        this.waiters.push(() => {
          clearTimeout(timer);
          r();
        });
      });
    }
  }

  /**
   * Runs one model call of `kind` over `kernels` (every kernel the call
   * runs), on the plan the guard chooses for it, and times it. The call is
   * synchronous: no kernel may change while it runs.
   */
  call<T>(kind: string, kernels: readonly Guarded[], run: () => T): T {
    this.expire();
    for (const k of kernels) this.seen.add(k);
    let j = this.open.get(kind);
    if (j && (j.all.some((k) => k.trialPending || !k.quiet) || j.members.some((k) => !k.unguarded))) {
      // A kernel of it is being tuned again, or was settled elsewhere: start over later.
      this.open.delete(kind);
      j = undefined;
      this.wake();
    }
    if (!j) {
      const members = kernels.filter((k) => k.unguarded);
      // Nothing to judge; or a kernel is still being tuned (its own trial owns its calls); or a member is judged in another kind.
      if (!members.length || kernels.some((k) => k.trialPending || !k.quiet) || members.some((k) => this.holds(k))) return run();
      j = { all: kernels, members, turn: 0, warm: GUARD_WARM_CYCLES, spent: 0, acc: { base: 0, plan: 0, baseCalls: 0, planCalls: 0 }, base: [], plan: [], last: this.now() };
      this.open.set(kind, j);
    }
    const turn = j.turn++ % 4;
    const onBase = turn === 0 || turn === 3;
    if (onBase) for (const m of j.members) m.useBase(true);
    const t0 = this.now();
    try {
      return run();
    } finally {
      const ms = this.now() - t0;
      if (onBase) for (const m of j.members) m.useBase(false);
      j.last = this.now();
      j.spent += ms;
      if (onBase) {
        j.acc.base += ms;
        j.acc.baseCalls++;
      } else {
        j.acc.plan += ms;
        j.acc.planCalls++;
      }
      if (turn === 3) this.pair(kind, j);
    }
  }

  /** Closes the cycle's pair and decides if the pairs allow it. */
  private pair(kind: string, j: Judgement): void {
    const a = j.acc;
    j.acc = { base: 0, plan: 0, baseCalls: 0, planCalls: 0 };
    if (j.warm > 0 && (a.base + a.plan) / (a.baseCalls + a.planCalls) < GUARD_WARM_CALL_MS) {
      j.warm--;
      return;
    }
    j.warm = 0;
    j.base.push(a.base / a.baseCalls);
    j.plan.push(a.plan / a.planCalls);
    const n = j.base.length;
    const ratio = this.ratio(j);
    const faster = j.plan.filter((p, i) => p < j.base[i]).length;
    if (n <= 3 && n >= 2 && ratio >= GUARD_REJECT_RATIO && faster <= 1) return this.verdict(kind, j, false);
    if (n < GUARD_MIN_PAIRS) {
      if (n >= 2 && j.spent > 2 * GUARD_MAX_MS) this.verdict(kind, j, ratio <= 1);
      return;
    }
    // The t-test on the pairs' log ratios, and the sign test (a burst spoils a pair's ratio, not its sign).
    const v = sequentialVerdict(j.base, j.plan, 0);
    if (v === 'slower' || (ratio > 1 && signFaster(j.plan, j.base, 0))) return this.verdict(kind, j, false);
    if (v === 'faster' || (ratio < 1 && signFaster(j.base, j.plan, 0))) return this.verdict(kind, j, true);
    if (n >= GUARD_MAX_PAIRS || j.spent > GUARD_MAX_MS) this.verdict(kind, j, ratio <= 1);
  }

  private ratio(j: Judgement): number {
    return j.base.length ? median(j.plan.map((p, i) => p / j.base[i])) : 1;
  }

  /** Settles judgements whose kind got no call for GUARD_TIMEOUT_MS on what they have. */
  private expire(): void {
    const now = this.now();
    for (const [kind, j] of this.open) if (now - j.last > GUARD_TIMEOUT_MS) this.verdict(kind, j, j.base.length < 2 || this.ratio(j) <= 1);
  }

  private verdict(kind: string, j: Judgement, keep: boolean): void {
    this.open.delete(kind);
    const ratio = this.ratio(j);
    for (const m of j.members) m.settle(keep, ratio);
    this.onVerdict({
      kind, kernels: j.members.map((m) => this.describe(m)), kept: keep, ratio, pairs: j.base.length,
      base_ms: median(j.base), plan_ms: median(j.plan),
    });
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}
