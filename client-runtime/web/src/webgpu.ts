// WGSL kernels as compute pipelines on the app's own GPUDevice. Every
// candidate of one op and shape shares one explicit bind group layout
// (inputs read-only storage, the output read-write storage, in ABI order), so
// a bind group the app made stays valid when the pipeline behind it changes.

import { type ArgSpec } from './ops.js';
import { POISON } from './rng.js';
import type { Backend, Bench, Impl, KernelMeta } from './types.js';

export interface GpuImpl extends Impl {
  pipeline: GPUComputePipeline;
  dispatch: [number, number, number];
}

/** Layouts shared by every kernel with `nargs` arguments. */
export class GpuLayouts {
  private bgl = new Map<number, GPUBindGroupLayout>();
  private pl = new Map<number, GPUPipelineLayout>();
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

  pipelineLayout(nargs: number): GPUPipelineLayout {
    let l = this.pl.get(nargs);
    if (!l) {
      l = this.device.createPipelineLayout({ bindGroupLayouts: [this.bindGroupLayout(nargs)] });
      this.pl.set(nargs, l);
    }
    return l;
  }
}

function dispatchOf(meta: KernelMeta): [number, number, number] {
  const d = meta.dispatch ?? [1, 1, 1];
  return [d[0] ?? 1, d[1] ?? 1, d[2] ?? 1];
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
  private query: { set: GPUQuerySet; resolve: GPUBuffer; read: GPUBuffer } | null = null;
  private outBytes: number;

  constructor(private device: GPUDevice, layouts: GpuLayouts, private specs: ArgSpec[], timerMs: number) {
    const n = specs.length;
    this.buffers = specs.map((s, i) =>
      device.createBuffer({
        label: `webtune bench ${s.name}`,
        size: Math.max(16, Math.ceil((s.elems * 4) / 16) * 16),
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | (i === n - 1 ? GPUBufferUsage.COPY_SRC : 0),
      }),
    );
    this.outBytes = specs[n - 1].elems * 4;
    this.staging = device.createBuffer({ size: Math.ceil(this.outBytes / 4) * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.bindGroup = device.createBindGroup({
      layout: layouts.bindGroupLayout(n),
      entries: this.buffers.map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
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

  async setInputs(args: Uint32Array<ArrayBuffer>[]): Promise<void> {
    for (let i = 0; i < args.length; i++) this.device.queue.writeBuffer(this.buffers[i], 0, args[i]);
  }

  async runOnce(impl: GpuImpl): Promise<Float32Array> {
    const out = this.buffers[this.buffers.length - 1];
    return scoped(this.device, async () => {
      this.device.queue.writeBuffer(out, 0, new Uint32Array(this.outBytes / 4).fill(POISON));
      const enc = this.device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(impl.pipeline);
      pass.setBindGroup(0, this.bindGroup);
      pass.dispatchWorkgroups(...impl.dispatch);
      pass.end();
      enc.copyBufferToBuffer(out, 0, this.staging, 0, this.outBytes);
      this.device.queue.submit([enc.finish()]);
      await this.staging.mapAsync(GPUMapMode.READ);
      const copy = new Float32Array(this.staging.getMappedRange().slice(0));
      this.staging.unmap();
      return copy;
    });
  }

  async time(impl: GpuImpl, reps: number): Promise<number> {
    // Everything is encoded before the clock starts.
    const enc = this.device.createCommandEncoder();
    const q = this.query;
    const pass = enc.beginComputePass(
      q ? { timestampWrites: { querySet: q.set, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {},
    );
    pass.setPipeline(impl.pipeline);
    pass.setBindGroup(0, this.bindGroup);
    const [x, y, z] = impl.dispatch;
    for (let i = 0; i < reps; i++) pass.dispatchWorkgroups(x, y, z);
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
    const pipeline = await scoped(this.device, async () => {
      const module = this.device.createShaderModule({ label: `webtune ${meta.sha256.slice(0, 12)}`, code: text });
      const info = await module.getCompilationInfo();
      const errors = info.messages.filter((m) => m.type === 'error');
      if (errors.length) throw new Error(`WGSL ${meta.sha256.slice(0, 12)}: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ')}`);
      return this.device.createComputePipelineAsync({
        label: `webtune ${meta.op} ${meta.sha256.slice(0, 12)}`,
        layout: this.layouts.pipelineLayout(meta.args.length),
        compute: { module, entryPoint: meta.entry || 'main' },
      });
    });
    return { sha256: meta.sha256, meta, pipeline, dispatch: dispatchOf(meta), bytes: text };
  }

  bench(specs: ArgSpec[]): Bench<GpuImpl> {
    return new GpuBench(this.device, this.layouts, specs, this.timerMs);
  }
}
