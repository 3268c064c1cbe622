// Wasm kernels: compiled once per module, instantiated on the runtime's own
// bench memory for checking and timing, and on the app's memory when chosen.
// V8 shares compiled code (and its optimizing tier) between instances of one
// module, so warming up on the bench also warms the app's instance.

import { type ArgSpec } from './ops.js';
import { POISON } from './rng.js';
import { type ThreadPool, sharedImport, timeQuietly } from './threads.js';
import { timerResolutionMs } from './timer.js';
import type { Backend, Bench, Impl, KernelMeta } from './types.js';

const PAGE = 65536;

type KernelFn = (...offsets: number[]) => void;

export interface WasmImpl extends Impl {
  module: WebAssembly.Module;
  /** Instance on the bench memory, made when the bench first runs it. */
  benchFn?: KernelFn;
  benchMemory?: WebAssembly.Memory;
}

function align(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

/** A memory of `pages` pages, shared when `shared` (threads: maximum 4 GiB). */
export function newMemory(pages: number, shared: boolean): WebAssembly.Memory {
  return shared ? new WebAssembly.Memory({ initial: pages, maximum: 65536, shared: true }) : new WebAssembly.Memory({ initial: pages });
}

/** Whether `memory` is shared (its buffer a SharedArrayBuffer). */
export function isShared(memory: WebAssembly.Memory): boolean {
  return typeof SharedArrayBuffer === 'function' && memory.buffer instanceof SharedArrayBuffer;
}

/** Parts of a threaded kernel (ABI 2), or 0 for a single-threaded one. */
export function threadsOf(meta: KernelMeta): number {
  return meta.threads && meta.threads > 1 ? meta.threads : 0;
}

/**
 * Instantiates `impl` on `memory` and returns its entry: `kernel`, or for a
 * threaded kernel a function that runs its parts on `pool`.
 */
async function instantiate(impl: WasmImpl, memory: WebAssembly.Memory, pool: ThreadPool | null): Promise<KernelFn> {
  const inst = await WebAssembly.instantiate(impl.module, { env: { memory } });
  const parts = threadsOf(impl.meta);
  if (parts) {
    if (!pool) throw new Error(`kernel ${impl.sha256} is threaded (${parts} parts) but this runtime has no thread pool`);
    const k = pool.prepare(impl.module, memory, inst);
    await k.ready;
    return (...o: number[]) => pool.run(k, o, parts);
  }
  const fn = inst.exports[impl.meta.entry || 'kernel'] as KernelFn;
  if (typeof fn !== 'function') throw new Error(`kernel ${impl.sha256} exports no \`${impl.meta.entry}\``);
  return fn;
}

/** Grows `memory` to hold at least `bytes`. */
export function ensureBytes(memory: WebAssembly.Memory, bytes: number): void {
  const have = memory.buffer.byteLength;
  if (have < bytes) memory.grow(Math.ceil((bytes - have) / PAGE));
}

class WasmBench implements Bench<WasmImpl> {
  readonly resolutionMs = timerResolutionMs();
  // 1 % rounding, and never under 0.5 ms (call overhead and clock reads).
  readonly minSampleMs = Math.max(0.5, 100 * this.resolutionMs);
  private memory: WebAssembly.Memory;
  private offsets: number[] = [];
  private scratch: number;
  private outElems: number;

  constructor(specs: ArgSpec[], meta: KernelMeta, private pool: ThreadPool | null, shared: boolean, private activity: Int32Array | null) {
    let end = 0;
    for (const s of specs) {
      this.offsets.push(end);
      end = align(end + s.elems * 4, 64);
    }
    this.scratch = end;
    this.outElems = specs[specs.length - 1].elems;
    this.memory = newMemory(Math.max(1, meta.memory_pages_min ?? 0, Math.ceil(end / PAGE)), shared);
  }

  async setInputs(args: Uint32Array<ArrayBuffer>[]): Promise<void> {
    for (let i = 0; i < args.length; i++) new Uint32Array(this.memory.buffer, this.offsets[i], args[i].length).set(args[i]);
  }

  private async prepare(impl: WasmImpl): Promise<KernelFn> {
    if (impl.benchFn && impl.benchMemory === this.memory) return impl.benchFn;
    ensureBytes(this.memory, Math.max((impl.meta.memory_pages_min ?? 0) * PAGE, this.scratch + (impl.meta.scratch_bytes ?? 0)));
    const fn = await instantiate(impl, this.memory, this.pool);
    impl.benchFn = fn;
    impl.benchMemory = this.memory;
    return fn;
  }

  private argsFor(impl: WasmImpl): number[] {
    return impl.meta.scratch_bytes ? [...this.offsets, this.scratch] : this.offsets;
  }

  async runOnce(impl: WasmImpl): Promise<Float32Array> {
    const fn = await this.prepare(impl);
    const out = this.offsets[this.offsets.length - 1];
    new Uint32Array(this.memory.buffer, out, this.outElems).fill(POISON);
    fn(...this.argsFor(impl));
    return new Float32Array(this.memory.buffer.slice(out, out + this.outElems * 4));
  }

  async time(impl: WasmImpl, reps: number): Promise<number> {
    const fn = await this.prepare(impl);
    const o = this.argsFor(impl);
    return this.activity ? timeQuietly(this.activity, () => this.timeCalls(fn, o, reps)) : this.timeCalls(fn, o, reps);
  }

  private timeCalls(fn: KernelFn, o: number[], reps: number): number {
    // Fixed-arity calls: no argument array is built inside the timed loop.
    let t0 = 0, t1 = 0;
    switch (o.length) {
      case 3: {
        const [a, b, c] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c);
        t1 = performance.now();
        break;
      }
      case 4: {
        const [a, b, c, d] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d);
        t1 = performance.now();
        break;
      }
      case 5: {
        const [a, b, c, d, e] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d, e);
        t1 = performance.now();
        break;
      }
      // matmul_i16's A, B, SA, SB, then bias, R and C (and a scratch pointer): up to 8.
      case 6: {
        const [a, b, c, d, e, f] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f);
        t1 = performance.now();
        break;
      }
      case 7: {
        const [a, b, c, d, e, f, g] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f, g);
        t1 = performance.now();
        break;
      }
      case 8: {
        const [a, b, c, d, e, f, g, h] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f, g, h);
        t1 = performance.now();
        break;
      }
      default:
        throw new Error(`unexpected kernel arity ${o.length}`);
    }
    return t1 - t0;
  }

  dispose(): void {
    // The memory goes with the last reference to it.
  }
}

/**
 * Loads Wasm kernels. With `shared` (always so with a thread pool), every
 * memory is shared: single-threaded kernels are loaded with their memory
 * import made shared (a memory import matches only a memory of the same
 * sharedness), and threaded kernels run their parts on the pool. Without a
 * pool, a threaded kernel fails to load, so the tuner skips it.
 */
export class WasmBackend implements Backend<WasmImpl> {
  readonly target = 'wasm' as const;

  /**
   * `activity`: in a bench worker on a page with threads, the page pool's
   * activity words; samples are then timed while the app's kernels pause.
   */
  constructor(
    readonly pool: ThreadPool | null = null,
    readonly shared: boolean = pool !== null,
    readonly activity: Int32Array | null = null,
  ) {}

  async load(bytes: ArrayBuffer | string, meta: KernelMeta): Promise<WasmImpl> {
    if (typeof bytes === 'string') throw new Error('a Wasm kernel must be bytes');
    const parts = threadsOf(meta);
    if (parts && !this.pool) throw new Error(`kernel ${meta.sha256} is threaded (${parts} parts); this page runs Wasm on one thread`);
    const module = await WebAssembly.compile(this.shared ? sharedImport(new Uint8Array(bytes)) : bytes);
    return { sha256: meta.sha256, meta, module, bytes };
  }

  bench(specs: ArgSpec[], meta: KernelMeta): Bench<WasmImpl> {
    return new WasmBench(specs, meta, this.pool, this.shared, this.activity);
  }
}

/**
 * A Wasm kernel the app calls: `run(a, b, c)` with the byte offsets of its
 * arguments in the app's memory, in ABI order. The module behind it changes
 * when the tuner finds a faster one; the call stays the same.
 */
export class WasmKernelBinding {
  private fn: KernelFn | null = null;
  private scratchOffset = 0;
  private scratchBytes = 0;

  constructor(private memory: WebAssembly.Memory, private pool: ThreadPool | null = null) {}

  /** Instantiates `impl` on the app's memory (growing it if the kernel needs more). */
  async bind(impl: WasmImpl): Promise<void> {
    ensureBytes(this.memory, (impl.meta.memory_pages_min ?? 0) * PAGE);
    const need = impl.meta.scratch_bytes ?? 0;
    if (need > this.scratchBytes) {
      // Scratch lives in pages the runtime appends to the app's memory; the
      // app's own data never moves.
      const start = align(this.memory.buffer.byteLength, PAGE);
      this.memory.grow(Math.ceil(need / PAGE));
      this.scratchOffset = start;
      this.scratchBytes = Math.ceil(need / PAGE) * PAGE;
    }
    const inner = await instantiate(impl, this.memory, this.pool);
    const pool = this.pool;
    // With a pool, the app's calls are marked so that a bench worker times
    // candidates between them (ThreadPool.activity).
    // (A threaded kernel's pool.run marks itself.)
    const fn: KernelFn = pool && !threadsOf(impl.meta) ? (...o: number[]) => pool.appCall(() => inner(...o)) : inner;
    const scratch = this.scratchOffset;
    this.fn = need > 0 ? (...o: number[]) => fn(...o, scratch) : fn;
  }

  call(offsets: number[]): void {
    this.fn!(...offsets);
  }

  /** The bound function itself (fixed arity, no wrapper) when it needs no scratch. */
  get raw(): KernelFn {
    return this.fn!;
  }
}
