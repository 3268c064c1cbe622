// Tuning one op and shape: read the candidate queue one event at a time,
// load each candidate in the background, then, in the app's idle slots,
// generate its seeded inputs, check it against the current kernel and the
// f64 reference, time both interleaved, and swap when the candidate is
// faster beyond the measured noise. When the queue is drained, report the
// top five with their tickets.
//
// Nothing here blocks on the network: fetches and compiles run as promises,
// and step() only does work that is ready, within the deadline it is given.

import { Scales, TOLERANCE, checkPositions, compareOutputs, defaultPositions } from './check.js';
import { type ArgSpec, type OpName, argSpecs } from './ops.js';
import { InputGen } from './rng.js';
import { SseReader } from './sse.js';
import { fasterBeyondNoise, median, relNoise } from './stats.js';
import type { Backend, Bench, Candidate, Impl } from './types.js';

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

/** A candidate read from the queue: its bytes fetched, not yet compiled. */
type Fetched<I> = { cand: Candidate; bytes?: ArrayBuffer | string; impl?: I; error?: string };

/** Parses a `candidate` event, keeping its u64 seed exact. */
export function parseCandidate(data: string): Candidate {
  const c = JSON.parse(data) as Candidate & { seed: number };
  const m = /"seed"\s*:\s*(\d+)/.exec(data);
  return { ...c, seed: m ? BigInt(m[1]) : BigInt(c.seed) };
}

const WARM_MAX_PAIRS = 15;
const WARM_MAX_MS = 1500;

function settled(xs: number[]): boolean {
  if (xs.length < 3) return false;
  const last = xs.slice(-3);
  return Math.max(...last) <= 1.05 * Math.min(...last);
}

class Evaluation<I extends Impl> {
  phase: 'load' | 'inputs' | 'check' | 'warm' | 'time' | 'done' = 'load';
  result: Measurement | null = null;
  private gen: InputGen;
  private scales: Scales | null = null;
  private reps = 1;
  private perCall = 0;
  private turn = 0;
  private warmMs = 0;
  private warm = { cur: [] as number[], cand: [] as number[] };
  private timed = { cur: [] as number[], cand: [] as number[] };
  private samples: number[] | undefined;

  impl: I | undefined;
  private loading: Promise<void> | null = null;
  private loadError: string | undefined;

  constructor(
    private t: KernelTuner<I>,
    private backend: Backend<I>,
    readonly cand: Candidate,
    private fetched: Fetched<I>,
  ) {
    this.gen = new InputGen(t.specs, cand.seed);
    this.impl = fetched.impl;
    this.loadError = fetched.error;
  }

  /**
   * Compiles the candidate in the background. It starts only when this
   * candidate's turn comes, never while another is being timed: a compile
   * (V8's background tiers, a GPU driver's pipeline build) competes for the
   * same cores and would inflate the timings.
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
      if (this.phase === 'load') this.phase = this.impl ? 'inputs' : 'done';
      if (!this.impl) this.fail(this.loadError ?? 'load failed');
    });
  }

  /** Records a failure; `us` is the time of the one run it had, if it ran. */
  private fail(error: string, us?: number): void {
    const c = this.cand;
    this.result = {
      sha256: c.sha256, index: c.index, total: c.total, source: c.source, ticket: c.ticket,
      ok: false, error, median_us: us === undefined ? 0 : Math.max(us, 0.001), current_us: 0, noise: 0, runs: us === undefined ? 0 : 1,
    };
    this.phase = 'done';
  }

  /** Does what fits before `deadline`; at least one unit of work per call. */
  async step(bench: Bench<I>, deadline: number): Promise<void> {
    if (this.phase === 'load') {
      if (this.impl) this.phase = 'inputs';
      else if (!this.fetched.bytes) return this.fail(this.loadError ?? 'not fetched');
      else {
        if (!this.loading) this.startLoad();
        return;
      }
    }
    if (this.phase === 'done') return;
    const impl = this.impl!;
    const cur = this.t.current;
    let worked = false;
    while (this.phase !== 'done') {
      const now = performance.now();
      if (worked && now >= deadline) return;
      if (this.phase === 'inputs') {
        do this.gen.fill(1 << 15);
        while (!this.gen.done && performance.now() < deadline);
        worked = true;
        if (!this.gen.done) return;
        await bench.setInputs(this.gen.args);
        this.scales = new Scales(this.t.op, this.t.shape, this.gen.args);
        this.phase = 'check';
        continue;
      }
      if (this.phase === 'check') {
        worked = true;
        const t0 = performance.now();
        let curOut: Float32Array;
        try {
          curOut = await bench.runOnce(cur);
        } catch (e) {
          curOut = new Float32Array(0);
          this.t.currentBroken = true;
          this.t.note(`the kernel in use failed to run: ${e}`);
        }
        const t1 = performance.now();
        let candOut: Float32Array;
        try {
          candOut = await bench.runOnce(impl);
        } catch (e) {
          return this.fail(`run: ${e instanceof Error ? e.message : e}`, (performance.now() - t1) * 1000);
        }
        const t2 = performance.now();
        const positions = this.cand.check?.length ? this.cand.check : defaultPositions(candOut.length);
        const ref = checkPositions(this.scales!, candOut, positions);
        if (!ref.ok) return this.fail(`output ${ref.worst} is off the reference by ${ref.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1000);
        if (!this.t.currentBroken) {
          const curRef = checkPositions(this.scales!, curOut, positions);
          if (!curRef.ok) {
            this.t.currentBroken = true;
            this.t.note(`the kernel in use is off the reference at output ${curRef.worst} (${curRef.maxErr.toExponential(2)})`);
          } else {
            // Both may carry f32 rounding of up to TOLERANCE each.
            const cmp = compareOutputs(this.scales!, candOut, curOut, 2 * TOLERANCE);
            if (!cmp.ok) return this.fail(`output ${cmp.worst} differs from the kernel in use by ${cmp.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1000);
          }
        }
        if (this.cand.check) this.samples = this.cand.check.map((p) => candOut[p]);
        this.perCall = Math.max(t1 - t0, t2 - t1, 1e-4);
        this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));
        this.phase = 'warm';
        continue;
      }
      // warm and time: one sample per loop, in ABBA order so drift hits both alike.
      const est = this.reps * this.perCall;
      if (worked && now + est > deadline) return;
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
          : (settled(into.cur) && settled(into.cand)) || into.cur.length >= WARM_MAX_PAIRS || this.warmMs > WARM_MAX_MS;
        if (enough) this.phase = 'time';
      } else if (this.timed.cur.length >= this.t.timedPairs) {
        const c = this.cand;
        this.result = {
          sha256: c.sha256, index: c.index, total: c.total, source: c.source, ticket: c.ticket, ok: true,
          median_us: median(this.timed.cand) * 1000,
          current_us: median(this.timed.cur) * 1000,
          noise: relNoise(this.timed.cand),
          runs: this.reps * this.timed.cand.length,
          samples: this.samples,
        };
        this.phase = 'done';
      }
    }
  }

  /** Whether the candidate beat the kernel in use beyond the noise of both. */
  beatsCurrent(): boolean {
    return this.timed.cand.length > 0 && fasterBeyondNoise(this.timed.cand, this.timed.cur);
  }
}

export type TunerPhase = 'waiting' | 'opening' | 'running' | 'reporting' | 'done';

export class KernelTuner<I extends Impl> {
  readonly specs: ArgSpec[];
  phase: TunerPhase = 'waiting';
  currentBroken = false;
  readonly results: Measurement[] = [];
  readonly notes: string[] = [];
  total = 0;
  /** Candidates to evaluate at most (the queue is best first); the rest are not fetched. */
  maxCandidates = Infinity;
  private started = 0;
  /** Timed sample pairs per candidate. */
  timedPairs: number;
  /** Fixed warm-up pairs (no JIT to wait for on a GPU), or undefined to wait until timings settle. */
  warmPairs: number | undefined;
  private reader: SseReader | null = null;
  private pending: { done: boolean; value?: Fetched<I> | null } | null = null;
  private ev: Evaluation<I> | null = null;
  private bench: Bench<I> | null = null;
  private abort = new AbortController();

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
  }

  get key(): string {
    return `${this.op}/${this.shape.join(',')}/${this.backend.target}`;
  }

  note(s: string): void {
    this.notes.push(s);
  }

  /** Candidates evaluated so far. */
  get evaluated(): number {
    return this.results.length;
  }

  /** Candidates taken from the queue so far, evaluated or under evaluation. */
  get taken(): number {
    return this.started;
  }

  /** Whether a candidate is part-way through its evaluation. */
  get evaluating(): boolean {
    return this.ev !== null;
  }

  /** Starts reading the queue (in the background). */
  open(): void {
    if (this.phase !== 'waiting') return;
    this.phase = 'opening';
    const q = new URLSearchParams({ op: this.op, shape: this.shape.join(','), target: this.backend.target });
    const url = `${this.host.server}/v1/sessions/${this.host.sessionId}/queue?${q}`;
    SseReader.open(url, this.abort.signal).then(
      (r) => {
        this.reader = r;
        this.phase = 'running';
        this.pull();
      },
      (e) => {
        this.note(`queue: ${e}`);
        this.phase = 'done';
      },
    );
  }

  /** Reads the next event and loads its kernel, in the background. */
  private pull(): void {
    const p: { done: boolean; value?: Fetched<I> | null } = { done: false };
    this.pending = p;
    const load = async (): Promise<Fetched<I> | null> => {
      for (;;) {
        const e = await this.reader!.next();
        if (!e || e.event === 'done') return null;
        if (e.event !== 'candidate') continue;
        const cand = parseCandidate(e.data);
        this.total = cand.total;
        if (cand.sha256 === this.current.sha256) return { cand, impl: this.current };
        try {
          return { cand, bytes: await this.host.fetchKernel(cand.url, this.backend.target) };
        } catch (err) {
          return { cand, error: `fetch: ${err instanceof Error ? err.message : err}` };
        }
      }
    };
    load().then(
      (v) => {
        p.value = v;
        p.done = true;
      },
      (err) => {
        this.note(`queue read: ${err}`);
        p.value = null;
        p.done = true;
      },
    );
  }

  /**
   * Does the tuning work that is ready, until `deadline` (a performance.now()
   * time). Returns whether anything was done.
   */
  async step(deadline: number): Promise<boolean> {
    if (this.phase === 'waiting') this.open();
    if (this.phase !== 'running') return false;
    if (!this.ev) {
      const p = this.pending;
      if (!p || !p.done) return false;
      if (!p.value) {
        this.finish();
        return false;
      }
      this.ev = new Evaluation(this, this.backend, p.value.cand, p.value);
      this.started++;
      // Fetch the next candidate's bytes while this one runs (network only).
      if (this.started < this.maxCandidates) this.pull();
      else this.pending = { done: true, value: null };
    }
    const ev = this.ev;
    this.bench ??= this.backend.bench(this.specs, this.current.meta);
    await ev.step(this.bench, deadline);
    if (ev.phase === 'done' && ev.result) {
      this.ev = null;
      const m = ev.result;
      this.results.push(m);
      this.host.measured(this, m);
      const impl = ev.impl!;
      if (m.ok && impl.sha256 !== this.current.sha256 && (this.currentBroken || ev.beatsCurrent())) {
        const previous = this.current;
        await this.host.adopt(this, impl, m, previous);
        this.current = impl;
        this.currentBroken = false;
      }
    }
    return true;
  }

  /**
   * The report body: the five fastest that passed, then failures that ran
   * (the server flags them) while there is room. A candidate that failed to
   * load has no time to report, so it is left out.
   */
  reportBody(): { op: string; shape: number[]; target: string; entries: Record<string, unknown>[] } | null {
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
        const e: Record<string, unknown> = {
          sha256: m.sha256, ticket: m.ticket, median_us: m.median_us, runs: m.runs, output_ok: m.ok,
        };
        if (m.ok && m.samples) e.samples = m.samples;
        return e;
      }),
    };
  }

  private finish(): void {
    this.reader?.cancel();
    this.reader = null;
    this.bench?.dispose();
    this.bench = null;
    this.phase = 'reporting';
    const body = this.reportBody();
    if (!body) {
      this.phase = 'done';
      this.host.reported(this, null, 'no candidate passed its check; nothing to report');
      return;
    }
    fetch(`${this.host.server}/v1/sessions/${this.host.sessionId}/reports`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
      .then(async (r) => {
        const text = await r.text();
        let json: unknown = text;
        try {
          json = JSON.parse(text);
        } catch {
          // Keep the text.
        }
        this.phase = 'done';
        this.host.reported(this, json, r.ok ? undefined : `report: HTTP ${r.status}: ${text}`);
      })
      .catch((e) => {
        this.phase = 'done';
        this.host.reported(this, null, `report: ${e}`);
      });
  }

  /** Stops reading the queue; nothing is reported. */
  cancel(): void {
    this.abort.abort();
    this.reader?.cancel();
    this.bench?.dispose();
    this.bench = null;
    this.phase = 'done';
  }
}
