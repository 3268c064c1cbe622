// WGSL kernels as compute pipelines on the app's own GPUDevice. Every
// candidate of one op and shape shares one explicit bind group layout
// (inputs read-only storage, the output read-write storage, in ABI order), so
// a bind group the app made stays valid when the pipeline behind it changes.
// A kernel with several passes (ABI 3: split-K across workgroups, or q4
// weights unpacked in a first pass) also binds
// a scratch buffer at group 1, which the runtime owns: the app's group 0
// is the same for every kernel of the op.

import { type ArgSpec, elemBytes, f16Bits, f16Value } from './ops.js';
import { POISON, POISON_F16 } from './rng.js';
import type { Backend, Bench, Impl, KernelMeta } from './types.js';

export interface GpuImpl extends Impl {
  /** The first pass's pipeline and workgroup counts. */
  pipeline: GPUComputePipeline;
  dispatch: [number, number, number];
  /** Every pass in order (one for ABI 1; ABI 3 kernels have several). */
  passes: { pipeline: GPUComputePipeline; dispatch: [number, number, number] }[];
  /** Bytes of the scratch buffer bound at group 1 (0: none). */
  scratchBytes: number;
}

/** Records `reps` calls of `impl` (every pass, in order) on bind group 0 =
 * `group` (and group 1 = `scratch` where the kernel has one); a one-pass
 * kernel's pipeline is set once. */
export function encodePasses(pass: GPUComputePassEncoder, impl: GpuImpl, group: GPUBindGroup, scratch: GPUBindGroup | null, reps = 1): void {
  pass.setBindGroup(0, group);
  if (impl.scratchBytes > 0) {
    if (!scratch) throw new Error(`kernel ${impl.sha256.slice(0, 12)} needs a scratch buffer of ${impl.scratchBytes} bytes`);
    pass.setBindGroup(1, scratch);
  }
  if (impl.passes.length === 1) {
    pass.setPipeline(impl.pipeline);
    for (let i = 0; i < reps; i++) pass.dispatchWorkgroups(...impl.dispatch);
    return;
  }
  for (let i = 0; i < reps; i++) {
    for (const p of impl.passes) {
      pass.setPipeline(p.pipeline);
      pass.dispatchWorkgroups(...p.dispatch);
    }
  }
}

/** A scratch buffer at group 1 that grows to the largest kernel it serves; its contents never outlive a call. */
export class Scratch {
  private buffer: GPUBuffer | null = null;
  private group: GPUBindGroup | null = null;
  constructor(private device: GPUDevice, private layouts: GpuLayouts) {}

  /** The bind group for `impl` (null where it needs no scratch). */
  for(impl: GpuImpl): GPUBindGroup | null {
    if (impl.scratchBytes === 0) return null;
    if (!this.buffer || this.buffer.size < impl.scratchBytes) {
      this.buffer?.destroy();
      this.buffer = this.device.createBuffer({ label: 'webtune scratch', size: Math.ceil(impl.scratchBytes / 16) * 16, usage: GPUBufferUsage.STORAGE });
      this.group = this.device.createBindGroup({ layout: this.layouts.scratchLayout(), entries: [{ binding: 0, resource: { buffer: this.buffer } }] });
    }
    return this.group;
  }

  dispose(): void {
    this.buffer?.destroy();
    this.buffer = null;
    this.group = null;
  }
}

/** Layouts shared by every kernel with `nargs` arguments. */
export class GpuLayouts {
  private bgl = new Map<number, GPUBindGroupLayout>();
  private pl = new Map<number, GPUPipelineLayout>();
  private scratch: GPUBindGroupLayout | undefined;
  constructor(readonly device: GPUDevice) {}

  bindGroupLayout(nargs: number): GPUBindGroupLayout {
    let l = this.bgl.get(nargs);
    if (!l) {
      l = this.device.createBindGroupLayout({
        label: `webtune ${nargs} args`,
        entries: Array.from({ length: nargs }, (_, i) => ({
          binding: i,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: i === nargs - 1 ? 'storage' : 'read-only-storage' } as GPUBufferBindingLayout,
        })),
      });
      this.bgl.set(nargs, l);
    }
    return l;
  }

  /** Group 1 of a kernel with passes: one read-write storage buffer. */
  scratchLayout(): GPUBindGroupLayout {
    this.scratch ??= this.device.createBindGroupLayout({
      label: 'webtune scratch',
      entries: [{ binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } }],
    });
    return this.scratch;
  }

  /** The layout of a kernel with `nargs` arguments, and a scratch buffer at group 1 where `scratch`. */
  pipelineLayout(nargs: number, scratch = false): GPUPipelineLayout {
    const key = scratch ? -nargs : nargs;
    let l = this.pl.get(key);
    if (!l) {
      const groups = scratch ? [this.bindGroupLayout(nargs), this.scratchLayout()] : [this.bindGroupLayout(nargs)];
      l = this.device.createPipelineLayout({ bindGroupLayouts: groups });
      this.pl.set(key, l);
    }
    return l;
  }
}

function dispatchOf(d: number[] | null | undefined): [number, number, number] {
  d ??= [1, 1, 1];
  return [d[0] ?? 1, d[1] ?? 1, d[2] ?? 1];
}

/** One line for a module that did not compile: `what`, then its compiler messages with line numbers, else `error`'s. */
export async function compileErrors(module: GPUShaderModule, what: string, error: unknown): Promise<string> {
  const info = await module.getCompilationInfo().catch(() => null);
  const errors = info?.messages.filter((m) => m.type === 'error') ?? [];
  if (errors.length) return `${what}: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ')}`;
  return `${what}: ${error instanceof Error ? error.message : String(error)}`;
}

/** Runs `f` inside validation and out-of-memory error scopes; throws the first error. */
async function scoped<T>(device: GPUDevice, f: () => Promise<T> | T): Promise<T> {
  device.pushErrorScope('out-of-memory');
  device.pushErrorScope('validation');
  let value: T;
  try {
    value = await f();
  } finally {
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    const e = validation ?? oom;
    if (e) throw new Error(e.message);
  }
  return value;
}

class GpuBench implements Bench<GpuImpl> {
  readonly resolutionMs: number;
  readonly minSampleMs: number;
  private buffers: GPUBuffer[];
  private staging: GPUBuffer;
  private bindGroup: GPUBindGroup;
  private scratch: Scratch;
  private query: { set: GPUQuerySet; resolve: GPUBuffer; read: GPUBuffer } | null = null;
  private outBytes: number;

  constructor(private device: GPUDevice, layouts: GpuLayouts, private specs: ArgSpec[], timerMs: number) {
    const n = specs.length;
    this.buffers = specs.map((s, i) =>
      device.createBuffer({
        label: `webtune bench ${s.name}`,
        size: Math.max(16, Math.ceil((s.elems * elemBytes(s)) / 16) * 16),
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | (i === n - 1 ? GPUBufferUsage.COPY_SRC : 0),
      }),
    );
    // Whole words: buffer copies move multiples of 4 bytes (an odd count of f16 outputs is padded).
    this.outBytes = Math.ceil((specs[n - 1].elems * elemBytes(specs[n - 1])) / 4) * 4;
    this.staging = device.createBuffer({ size: this.outBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.bindGroup = device.createBindGroup({
      layout: layouts.bindGroupLayout(n),
      entries: this.buffers.map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
    this.scratch = new Scratch(device, layouts);
    if (device.features.has('timestamp-query')) {
      this.query = {
        set: device.createQuerySet({ type: 'timestamp', count: 2 }),
        resolve: device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }),
        read: device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }),
      };
    }
    // Browsers round GPU timestamps (Chromium: to 100 µs) unless a developer
    // flag is set, so a sample must span many of those steps either way.
    this.resolutionMs = this.query ? 0.1 : timerMs;
    this.minSampleMs = Math.max(4, 50 * this.resolutionMs);
  }

  /** Whether timings come from timestamp queries rather than the wall clock. */
  get usesTimestamps(): boolean {
    return this.query !== null;
  }

  /** Uploads the seeded inputs (f32 bits; an f16 argument's values are rounded to f16 and sent as its bits). */
  async setInputs(args: Uint32Array<ArrayBuffer>[]): Promise<void> {
    for (let i = 0; i < args.length; i++) {
      if (this.specs[i].dtype !== 'f16') {
        this.device.queue.writeBuffer(this.buffers[i], 0, args[i]);
        continue;
      }
      const f = new Float32Array(args[i].buffer, args[i].byteOffset, args[i].length);
      const h = new Uint16Array(Math.ceil(f.length / 2) * 2);
      for (let j = 0; j < f.length; j++) h[j] = f16Bits(f[j]);
      this.device.queue.writeBuffer(this.buffers[i], 0, h);
    }
  }

  async runOnce(impl: GpuImpl): Promise<Float32Array> {
    const out = this.buffers[this.buffers.length - 1];
    return scoped(this.device, async () => {
      const f16 = this.specs[this.specs.length - 1].dtype === 'f16';
      // Every element a NaN: f16 outputs get an f16 NaN, not halves of the f32 one.
      this.device.queue.writeBuffer(out, 0, f16 ? new Uint16Array(this.outBytes / 2).fill(POISON_F16) : new Uint32Array(this.outBytes / 4).fill(POISON));
      const enc = this.device.createCommandEncoder();
      const pass = enc.beginComputePass();
      encodePasses(pass, impl, this.bindGroup, this.scratch.for(impl));
      pass.end();
      enc.copyBufferToBuffer(out, 0, this.staging, 0, this.outBytes);
      this.device.queue.submit([enc.finish()]);
      await this.staging.mapAsync(GPUMapMode.READ);
      const raw = this.staging.getMappedRange().slice(0);
      this.staging.unmap();
      const spec = this.specs[this.specs.length - 1];
      if (spec.dtype !== 'f16') return new Float32Array(raw);
      // f16 outputs widened exactly (a poisoned, unwritten one reads as NaN).
      const h = new Uint16Array(raw, 0, spec.elems);
      return Float32Array.from(h, f16Value);
    });
  }

  async time(impl: GpuImpl, reps: number): Promise<number> {
    // Everything is encoded before the clock starts.
    const enc = this.device.createCommandEncoder();
    const q = this.query;
    const pass = enc.beginComputePass(
      q ? { timestampWrites: { querySet: q.set, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {},
    );
    encodePasses(pass, impl, this.bindGroup, this.scratch.for(impl), reps);
    pass.end();
    if (q) {
      enc.resolveQuerySet(q.set, 0, 2, q.resolve, 0);
      enc.copyBufferToBuffer(q.resolve, 0, q.read, 0, 16);
    }
    const cb = enc.finish();
    const t0 = performance.now();
    this.device.queue.submit([cb]);
    if (q) {
      await q.read.mapAsync(GPUMapMode.READ);
      const t = new BigInt64Array(q.read.getMappedRange());
      const ns = Number(t[1] - t[0]);
      q.read.unmap();
      if (ns > 0) return ns / 1e6;
      // Some implementations write zeros; use the wall clock from now on.
      this.query = null;
      return performance.now() - t0;
    }
    await this.device.queue.onSubmittedWorkDone();
    return performance.now() - t0;
  }

  dispose(): void {
    for (const b of this.buffers) b.destroy();
    this.staging.destroy();
    this.scratch.dispose();
    if (this.query) {
      this.query.set.destroy();
      this.query.resolve.destroy();
      this.query.read.destroy();
    }
  }
}

export class GpuBackend implements Backend<GpuImpl> {
  readonly target = 'wgsl' as const;
  constructor(readonly device: GPUDevice, readonly layouts: GpuLayouts, private timerMs: number) {}

  async load(code: ArrayBuffer | string, meta: KernelMeta): Promise<GpuImpl> {
    const text = typeof code === 'string' ? code : new TextDecoder().decode(code);
    const need = meta.min_subgroup_size;
    if (need) {
      if (!this.device.features.has('subgroups' as GPUFeatureName)) {
        throw new Error(`kernel ${meta.sha256.slice(0, 12)} reduces with subgroup operations; this device has no 'subgroups' feature`);
      }
      const min = (this.device as GPUDevice & { adapterInfo?: { subgroupMinSize?: number } }).adapterInfo?.subgroupMinSize;
      if (min !== undefined && min < need) {
        throw new Error(`kernel ${meta.sha256.slice(0, 12)} needs subgroups of at least ${need} invocations; this adapter's may have ${min}`);
      }
    }
    const steps = meta.passes?.length ? meta.passes : [{ entry: meta.entry || 'main', dispatch: meta.dispatch ?? [1, 1, 1] }];
    const scratchBytes = meta.passes?.length ? (meta.scratch_bytes ?? 0) : 0;
    const max = this.device.limits.maxStorageBufferBindingSize;
    if (scratchBytes > max) {
      throw new Error(`kernel ${meta.sha256.slice(0, 12)} needs ${scratchBytes} bytes of scratch; this device binds at most ${max}`);
    }
    const pipelines = await scoped(this.device, async () => {
      const module = this.device.createShaderModule({ label: `webtune ${meta.sha256.slice(0, 12)}`, code: text });
      const layout = this.layouts.pipelineLayout(meta.args.length, scratchBytes > 0);
      try {
        return await Promise.all(
          steps.map((p) =>
            this.device.createComputePipelineAsync({ label: `webtune ${meta.op} ${meta.sha256.slice(0, 12)} ${p.entry}`, layout, compute: { module, entryPoint: p.entry } }),
          ),
        );
      } catch (e) {
        // The compiler's messages are asked for only on failure: Dawn's Node
        // binding (npm webgpu 0.6.2) crashes or never answers getCompilationInfo.
        throw new Error(await compileErrors(module, `WGSL ${meta.sha256.slice(0, 12)}`, e));
      }
    });
    const passes = pipelines.map((pipeline, i) => ({ pipeline, dispatch: dispatchOf(steps[i].dispatch) }));
    return { sha256: meta.sha256, meta, pipeline: passes[0].pipeline, dispatch: passes[0].dispatch, passes, scratchBytes, bytes: text };
  }

  bench(specs: ArgSpec[]): Bench<GpuImpl> {
    return new GpuBench(this.device, this.layouts, specs, this.timerMs);
  }
}
