// The page's side of the bench worker (the `worker` option, Wasm): one
// worker for the whole page, so candidates of different ops are never timed
// at the same time; requests carry compiled modules (V8 shares their code
// and its optimizing tier with the page's instances).

import type { EvalReply, EvalRequest } from './eval-worker.js';
import type { KernelTuner, RemoteAnswer, RemoteEvaluator } from './tuner.js';
import type { Candidate } from './types.js';
import type { WasmImpl } from './wasm.js';

/** The bench worker's bundled source, put in by build.mjs. */
declare const __WEBTUNE_EVAL_WORKER__: string;

/** Whether this page can start the bench worker. */
export function workersAvailable(): boolean {
  return typeof Worker === 'function' && typeof Blob === 'function' && typeof URL?.createObjectURL === 'function'
    && typeof __WEBTUNE_EVAL_WORKER__ === 'string';
}

export class WorkerEvaluator implements RemoteEvaluator<WasmImpl> {
  private worker: Worker;
  private next = 1;
  private waiting = new Map<number, { resolve: (a: RemoteAnswer) => void; reject: (e: Error) => void }>();
  /** Ops whose kernel in use the worker has. */
  /** The kernel in use the worker was last sent, per op (sent again when the page's differs). */
  private known = new Map<string, string>();

  /**
   * `threads`: the page's pool size (the worker times threaded kernels on a
   * pool of its own that size); `shared`: whether the page's memory, and so
   * every module's import, is shared; `activity`: the page pool's words
   * saying when the app's kernels run, so that the worker times between them.
   */
  constructor(private threads = 1, private shared = false, private activity: Int32Array<SharedArrayBuffer> | null = null) {
    const url = URL.createObjectURL(new Blob([__WEBTUNE_EVAL_WORKER__], { type: 'text/javascript' }));
    this.worker = new Worker(url);
    URL.revokeObjectURL(url);
    this.worker.onmessage = (e: MessageEvent<EvalReply>) => {
      const w = this.waiting.get(e.data.id);
      if (!w) return;
      this.waiting.delete(e.data.id);
      if (e.data.ok) w.resolve(e.data.answer);
      else w.reject(new Error(e.data.error));
    };
    this.worker.onerror = (e) => {
      e.preventDefault();
      this.failAll(new Error(`bench worker: ${e.message}`));
    };
  }

  private failAll(e: Error): void {
    for (const w of this.waiting.values()) w.reject(e);
    this.waiting.clear();
  }

  evaluate(t: KernelTuner<WasmImpl>, cand: Candidate, impl: WasmImpl): Promise<RemoteAnswer> {
    const kernel = (k: WasmImpl) => ({ sha256: k.sha256, meta: k.meta, module: k.module });
    const req: EvalRequest = {
      id: this.next++,
      key: t.key,
      op: t.op,
      shape: t.shape,
      cand,
      impl: kernel(impl),
      settings: { timedPairs: t.timedPairs, warmPairs: t.warmPairs, earlyReject: t.earlyReject, stopAfterMs: t.stopAfterMs, policy: t.policy },
    };
    if (this.next === 2) Object.assign(req, { threads: this.threads, shared: this.shared, activity: this.activity ?? undefined });
    if (this.known.get(t.key) !== t.current.sha256) {
      req.current = kernel(t.current);
      this.known.set(t.key, t.current.sha256);
    }
    return new Promise<RemoteAnswer>((resolve, reject) => {
      this.waiting.set(req.id, { resolve, reject });
      this.worker.postMessage(req);
    }).then((a) => {
      // The worker took the candidate as its kernel in use.
      if (a.beats) this.known.set(t.key, impl.sha256);
      return a;
    });
  }

  close(): void {
    this.worker.terminate();
    this.failAll(new Error('bench worker closed'));
  }
}
