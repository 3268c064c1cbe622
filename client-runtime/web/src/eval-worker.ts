// The bench worker (the `worker` option, Wasm): evaluates candidates the page
// sends, one at a time in arrival order, with the same Evaluation as the page
// uses in idle() (seeded inputs, checks against the reference and the kernel
// in use, warm-up, interleaved timed pairs, early stops), on its own memory.
// It keeps each op's kernel in use and answers whether the candidate beat it;
// the page then adopts the winner on the app's memory. Bundled by build.mjs
// into a string that the page starts from a Blob URL.

import { argSpecs, type OpName } from './ops.js';
import { type EvalContext, Evaluation, type Policy, type RemoteAnswer, STOP_AFTER_MS, noteUnitTime, unitTimes } from './tuner.js';
import type { Backend, Bench, Candidate, Impl, KernelMeta } from './types.js';
import { ThreadPool } from './threads.js';
import { WasmBackend, type WasmImpl } from './wasm.js';

/** One candidate to evaluate; `current` comes with an op's first request only. */
export interface EvalRequest {
  id: number;
  key: string;
  op: OpName;
  shape: number[];
  current?: Kernel;
  cand: Candidate;
  impl: Kernel;
  settings: { timedPairs: number; warmPairs: number | undefined; earlyReject: boolean; stopAfterMs: number; policy?: Policy };
  /** Threads of the page's pool (first request): the worker times threaded kernels on a pool of its own that size. */
  threads?: number;
  /** Whether the page's modules import a shared memory (first request). */
  shared?: boolean;
  /** The page pool's activity words (first request; ThreadPool.activity). */
  activity?: Int32Array<SharedArrayBuffer>;
}

export type EvalReply = { id: number; ok: true; answer: RemoteAnswer } | { id: number; ok: false; error: string };

type Kernel = { sha256: string; meta: KernelMeta; module: WebAssembly.Module };

/**
 * The worker's state and work, apart from the messaging (so that it can be
 * tested without a worker): each op's context (its kernel in use, its
 * bench), and `evaluate`, one candidate at a time.
 */
export class BenchSide<I extends Impl> {
  private ops = new Map<string, { ctx: EvalContext<I>; bench: Bench<I> }>();
  private notes: string[] = [];

  constructor(
    private backend: Backend<I>,
    private implOf: (k: Kernel) => I,
  ) {}

  private context(r: EvalRequest): { ctx: EvalContext<I>; bench: Bench<I> } {
    let o = this.ops.get(r.key);
    // The page sends its kernel in use again when it differs from the worker's (an adoption it refused).
    if (o && r.current && r.current.sha256 !== o.ctx.current.sha256) o.ctx.current = this.implOf(r.current);
    if (o) return o;
    if (!r.current) throw new Error(`op ${r.key}: its kernel in use was never sent`);
    const specs = argSpecs(r.op, r.shape);
    const unitMs = unitTimes();
    const notes = () => this.notes;
    const ctx: EvalContext<I> = {
      specs, op: r.op, shape: r.shape, current: this.implOf(r.current), currentBroken: false, unitMs,
      noteUnit(u, ms) {
        noteUnitTime(unitMs, u, ms);
      },
      note(s) {
        notes().push(s);
      },
      timedPairs: r.settings.timedPairs, warmPairs: r.settings.warmPairs, earlyReject: r.settings.earlyReject,
      stopAfterMs: r.settings.stopAfterMs ?? STOP_AFTER_MS, policy: r.settings.policy,
    };
    o = { ctx, bench: this.backend.bench(specs, ctx.current.meta) };
    this.ops.set(r.key, o);
    return o;
  }

  async evaluate(r: EvalRequest): Promise<RemoteAnswer> {
    const { ctx, bench } = this.context(r);
    this.notes = [];
    const cand = r.impl.sha256 === ctx.current.sha256 ? ctx.current : this.implOf(r.impl);
    const ev = new Evaluation(ctx, this.backend, r.cand, { cand: r.cand, impl: cand });
    // Nothing else runs on this thread: no deadline.
    while (ev.phase !== 'done') await ev.step(bench, Infinity, false);
    const result = ev.result!;
    const beats = result.ok && cand.sha256 !== ctx.current.sha256 && (ctx.currentBroken || ev.beatsCurrent());
    if (beats) {
      ctx.current = cand;
      ctx.currentBroken = false;
    }
    return { result, beats, notes: this.notes };
  }
}

// In a worker: answer the page's requests, one at a time in arrival order.
const scope = globalThis as unknown as { WorkerGlobalScope?: unknown; onmessage: unknown; postMessage(m: EvalReply): void };
if (typeof scope.WorkerGlobalScope !== 'undefined') {
  // The page's modules arrive compiled: on a threaded page they import a
  // shared memory, so the bench memory is shared and threaded kernels run
  // on this worker's own pool (started with the first request).
  let side: BenchSide<WasmImpl> | null = null;
  let chain: Promise<void> = Promise.resolve();
  scope.onmessage = (e: MessageEvent<EvalRequest>) => {
    const r = e.data;
    side ??= new BenchSide<WasmImpl>(
      new WasmBackend(r.threads && r.threads > 1 ? new ThreadPool(r.threads) : null, r.shared ?? false, r.activity ?? null),
      (k) => ({ sha256: k.sha256, meta: k.meta, module: k.module, bytes: new ArrayBuffer(0) }),
    );
    const s = side;
    chain = chain.then(async () => {
      let reply: EvalReply;
      try {
        reply = { id: r.id, ok: true, answer: await s.evaluate(r) };
      } catch (err) {
        reply = { id: r.id, ok: false, error: err instanceof Error ? err.message : String(err) };
      }
      scope.postMessage(reply);
    });
  };
}
