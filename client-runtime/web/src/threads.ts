// Wasm threads: whether this page can run them, the page's thread pool, and
// the one-byte-range rewrite that lets a single-threaded kernel run on a
// shared memory.
//
// A threaded kernel (ABI 2) exports `kernel_part(args..., [scratch], part)`.
// `ThreadPool.run` publishes one call (kernel, arguments, number of parts)
// in a control block of shared memory; the calling thread and the pool's
// workers then claim parts one at a time with a compare-and-swap on a word
// that holds the call's generation and the next part, so a worker that wakes
// late can never claim a part of a later call. The caller runs parts too and
// returns when every claimed part is done: a call is never slower than the
// caller doing every part itself (plus one compare-and-swap per part), and
// no part waits for a worker that has not woken. Workers sleep in
// `Atomics.wait` and spin for a short while after each call first, because a
// model's kernels come back to back.

/** The pool worker's bundled source, put in by build.mjs. */
declare const __WEBTUNE_POOL_WORKER__: string;

/** Words of the control block. */
export const CTRL = {
  GEN: 0, // generation of the current call; workers wait on it
  MAIL: 1, // messages posted to every worker so far
  NEXT: 2, // (generation << 8) | next part to claim
  DONE: 3, // parts of the current call finished
  PARTS: 4,
  KERNEL: 5, // pool id of the kernel
  NARGS: 6,
  ERROR: 7, // set by a worker whose part threw
  ARGS: 8, // up to 8 arguments
  BELL: 16, // rung (incremented) for every call and every message; workers wait on it
  APP_CALLS: 17, // the app's kernel calls started so far (see `ThreadPool.activity`)
  APP_BUSY: 18, // 1 while an app kernel runs
  WORDS: 19,
} as const;

const GEN_MASK = 0x7fffff;

/**
 * How long `ready` waits for the workers' instances. A worker that has not
 * answered by then only means the caller runs its share of the parts for a
 * while: calls never wait for it, so neither does `ready` past this.
 */
const READY_MS = 5000;

function withTimeout(p: Promise<void>, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    p.then(() => (clearTimeout(t), resolve()), (e) => (clearTimeout(t), reject(e)));
  });
}

/**
 * Threads an app asking for `threads` wants (default: the device's cores,
 * at most 8), and how many it gets here: the same, or 1 and why.
 */
export function threadsWanted(threads?: number): { want: number; count: number; why?: string } {
  const cores = globalThis.navigator?.hardwareConcurrency || 1;
  const want = Math.floor(threads ?? Math.min(cores, 8));
  if (want <= 1) return { want, count: 1, why: threads !== undefined ? `threads: ${threads} was asked for` : 'this device reports one core' };
  const support = threadSupport();
  return support.ok ? { want, count: want } : { want, count: 1, why: support.why };
}

/** Whether Wasm threads can run here, and if not, why not (one line). */
export function threadSupport(): { ok: true } | { ok: false; why: string } {
  const g = globalThis as { crossOriginIsolated?: boolean };
  if (typeof SharedArrayBuffer !== 'function') return { ok: false, why: 'SharedArrayBuffer is unavailable (the page is not cross-origin isolated: send COOP same-origin and COEP require-corp)' };
  if (g.crossOriginIsolated === false) return { ok: false, why: 'the page is not cross-origin isolated (send Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)' };
  if (typeof Worker !== 'function' || typeof Blob !== 'function' || typeof URL?.createObjectURL !== 'function') return { ok: false, why: 'workers are unavailable' };
  try {
    new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
  } catch {
    return { ok: false, why: 'this engine cannot make a shared Wasm memory' };
  }
  return { ok: true };
}

/** A kernel the pool can run: the caller's own `kernel_part` and its pool id. */
export interface PoolKernel {
  id: number;
  part: (...args: number[]) => void;
  /** Resolves when every worker has an instance of the kernel. */
  ready: Promise<void>;
}

type WorkerReply = { kind: 'ready'; id: number } | { kind: 'error'; id: number; error: string };

export class ThreadPool {
  /** Threads that run parts: the caller and `size - 1` workers. */
  readonly size: number;
  private ctrl: Int32Array<SharedArrayBuffer>;
  private workers: Worker[] = [];
  private gen = 0;
  private nextId = 1;
  private pending = new Map<number, { left: number; resolve: () => void; reject: (e: Error) => void }>();
  private closed = false;
  /** Calls run, parts run, and parts the calling thread ran itself (the rest ran on workers). */
  readonly stats = { calls: 0, parts: 0, callerParts: 0 };

  /** A pool of `size` threads (the caller counts as one). */
  constructor(size: number) {
    this.size = Math.max(1, Math.floor(size));
    this.ctrl = new Int32Array(new SharedArrayBuffer(CTRL.WORDS * 4));
    if (this.size === 1) return;
    const url = URL.createObjectURL(new Blob([__WEBTUNE_POOL_WORKER__], { type: 'text/javascript' }));
    try {
      for (let i = 1; i < this.size; i++) {
        const w = new Worker(url);
        w.onmessage = (e: MessageEvent<WorkerReply>) => this.reply(e.data);
        w.onerror = (e) => {
          e.preventDefault();
          for (const [id] of this.pending) this.reply({ kind: 'error', id, error: `pool worker: ${e.message}` });
        };
        w.postMessage({ kind: 'init', ctrl: this.ctrl });
        this.workers.push(w);
      }
    } finally {
      URL.revokeObjectURL(url);
    }
  }

  private reply(r: WorkerReply): void {
    const p = this.pending.get(r.id);
    if (!p) return;
    if (r.kind === 'error') {
      this.pending.delete(r.id);
      p.reject(new Error(r.error));
    } else if (--p.left === 0) {
      this.pending.delete(r.id);
      p.resolve();
    }
  }

  /**
   * Instantiates `module` (a threaded kernel, or any module whose `entry`
   * takes the part number last) on `memory` in every worker; `instance` is
   * the calling thread's. Calls may start at once: until a worker has
   * its instance, the caller runs that worker's share.
   */
  prepare(module: WebAssembly.Module, memory: WebAssembly.Memory, instance: WebAssembly.Instance, entry = 'kernel_part'): PoolKernel {
    const part = instance.exports[entry] as (...a: number[]) => void;
    if (typeof part !== 'function') throw new Error(`a threaded kernel must export ${entry}`);
    const id = this.nextId++;
    const ready = this.workers.length === 0
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => this.pending.set(id, { left: this.workers.length, resolve, reject }));
    for (const w of this.workers) w.postMessage({ kind: 'kernel', id, module, memory, entry });
    if (this.workers.length) {
      // Wake the workers out of their wait so that they read the message.
      Atomics.add(this.ctrl, CTRL.MAIL, 1);
      this.ring();
    }
    return { id, part, ready: withTimeout(ready, READY_MS) };
  }

  /**
   * The words a bench worker reads to time candidates only while the app's
   * kernels are not running (`APP_CALLS`, `APP_BUSY`): on a page with
   * threads, a candidate timed while the app's kernels use the cores would
   * look slower the more threads it uses.
   */
  get activity(): Int32Array<SharedArrayBuffer> {
    return this.ctrl;
  }

  /** Runs `f`, an app kernel call, marked in `activity` (every `run` is). */
  appCall(f: () => void): void {
    const c = this.ctrl;
    Atomics.add(c, CTRL.APP_CALLS, 1);
    Atomics.store(c, CTRL.APP_BUSY, 1);
    try {
      f();
    } finally {
      Atomics.store(c, CTRL.APP_BUSY, 0);
      Atomics.notify(c, CTRL.APP_BUSY);
    }
  }

  /**
   * Runs parts `0..parts` of `k` with these arguments and returns when all
   * are done. Synchronous: the caller runs parts itself and then spins for
   * the parts workers took (at most one part's time).
   */
  run(k: PoolKernel, args: number[], parts: number): void {
    this.appCall(() => this.runParts(k, args, parts));
  }

  private runParts(k: PoolKernel, args: number[], parts: number): void {
    const c = this.ctrl;
    this.stats.calls++;
    this.stats.parts += parts;
    if (this.workers.length === 0 || this.closed) {
      for (let p = 0; p < parts; p++) k.part(...args, p);
      this.stats.callerParts += parts;
      return;
    }
    if (args.length > 8 || parts > 255) throw new Error(`a pool call takes at most 8 arguments and 255 parts, got ${args.length} and ${parts}`);
    const gen = (this.gen = (this.gen + 1) & GEN_MASK);
    for (let i = 0; i < args.length; i++) c[CTRL.ARGS + i] = args[i];
    c[CTRL.NARGS] = args.length;
    c[CTRL.PARTS] = parts;
    c[CTRL.KERNEL] = k.id;
    Atomics.store(c, CTRL.DONE, 0);
    Atomics.store(c, CTRL.ERROR, 0);
    Atomics.store(c, CTRL.NEXT, gen << 8);
    Atomics.store(c, CTRL.GEN, gen);
    this.ring();
    this.stats.callerParts += runClaimed(c, gen, parts, (p) => k.part(...args, p));
    while (Atomics.load(c, CTRL.DONE) < parts) {
      // A worker is finishing the part it claimed.
    }
    if (Atomics.load(c, CTRL.ERROR)) throw new Error('a thread-pool worker failed to run its part of the kernel');
  }

  /**
   * Wakes every worker. A worker reads the bell before it looks for work and
   * waits only while the bell still has that value, so no call or message
   * can slip in between its look and its wait unnoticed.
   */
  private ring(): void {
    Atomics.add(this.ctrl, CTRL.BELL, 1);
    Atomics.notify(this.ctrl, CTRL.BELL);
  }

  close(): void {
    this.closed = true;
    for (const w of this.workers) w.terminate();
    this.workers = [];
    for (const p of this.pending.values()) p.reject(new Error('thread pool closed'));
    this.pending.clear();
  }
}

/** Claims the next part of call `gen`, or -1 when there is none left (or the call is over). */
export function claim(c: Int32Array, gen: number, parts: number): number {
  for (;;) {
    const v = Atomics.load(c, CTRL.NEXT);
    if (v >>> 8 !== gen) return -1;
    const p = v & 0xff;
    if (p >= parts) return -1;
    if (Atomics.compareExchange(c, CTRL.NEXT, v, v + 1) === v) return p;
  }
}

/**
 * Claims parts of call `gen` and runs each with `run` until none is left;
 * every part counts as done even if `run` throws (which then propagates).
 * Returns how many parts this thread ran.
 */
export function runClaimed(c: Int32Array, gen: number, parts: number, run: (part: number) => void): number {
  let n = 0;
  for (let p = claim(c, gen, parts); p >= 0; p = claim(c, gen, parts), n++) {
    try {
      run(p);
    } finally {
      Atomics.add(c, CTRL.DONE, 1);
    }
  }
  return n;
}

/**
 * The same module with its memory import made shared (maximum 65536 pages),
 * so that a single-threaded kernel (ABI 1) or the encoder's fixed kernels
 * can run on the shared memory threaded kernels need: a Wasm memory import
 * matches only a memory of the same sharedness. Only the import section
 * changes; bytes that already import a shared memory come back as they are.
 */
export function sharedImport(bytes: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const r = new Reader(bytes);
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) throw new Error('not a Wasm module');
  r.at = 8;
  while (r.at < bytes.length) {
    const start = r.at;
    const id = bytes[r.at++];
    const size = r.leb();
    const end = r.at + size;
    if (id !== 2) {
      r.at = end;
      continue;
    }
    const count = r.leb();
    const out: number[] = [...leb(count)];
    for (let i = 0; i < count; i++) {
      const from = r.at;
      r.skip(r.leb()); // module name
      r.skip(r.leb()); // field name
      const kind = bytes[r.at++];
      out.push(...bytes.subarray(from, r.at));
      if (kind !== 2) throw new Error(`sharedImport: an import of kind ${kind}: webtune kernels import one memory only`);
      const flags = bytes[r.at++];
      const min = r.leb();
      const max = flags & 1 ? r.leb() : 65536;
      if (flags & 2) return bytes;
      if (flags & ~1) throw new Error(`sharedImport: memory limits flags ${flags}`);
      out.push(0x03, ...leb(min), ...leb(max));
    }
    if (r.at !== end) throw new Error('sharedImport: the import section has trailing bytes');
    const section = [2, ...leb(out.length), ...out];
    const res = new Uint8Array(bytes.length - (end - start) + section.length);
    res.set(bytes.subarray(0, start), 0);
    res.set(section, start);
    res.set(bytes.subarray(end), start + section.length);
    return res;
  }
  return bytes;
}

class Reader {
  at = 0;
  constructor(private b: Uint8Array) {}
  leb(): number {
    let v = 0, shift = 0;
    for (;;) {
      if (this.at >= this.b.length) throw new Error('sharedImport: truncated module');
      const x = this.b[this.at++];
      v += (x & 0x7f) * 2 ** shift;
      if (!(x & 0x80)) return v;
      shift += 7;
    }
  }
  skip(n: number): void {
    this.at += n;
  }
}

function leb(v: number): number[] {
  const out: number[] = [];
  do {
    let x = v % 128;
    v = Math.floor(v / 128);
    if (v) x |= 0x80;
    out.push(x);
  } while (v);
  return out;
}

/**
 * Times `sample` (ms) while the app's kernels are not running, by the
 * page pool's `activity` words: waits up to `maxWaitMs` for the app to
 * pause, and takes the sample again (up to `tries` times) when an app
 * kernel started during it. Only for a worker (it blocks in Atomics.wait).
 */
export function timeQuietly(activity: Int32Array, sample: () => number, maxWaitMs = 1000, tries = 5): number {
  for (let attempt = 1; ; attempt++) {
    const until = performance.now() + maxWaitMs;
    while (Atomics.load(activity, CTRL.APP_BUSY) !== 0 && performance.now() < until) Atomics.wait(activity, CTRL.APP_BUSY, 1, 5);
    const calls = Atomics.load(activity, CTRL.APP_CALLS);
    const ms = sample();
    if (attempt >= tries || (Atomics.load(activity, CTRL.APP_CALLS) === calls && Atomics.load(activity, CTRL.APP_BUSY) === 0)) return ms;
  }
}
