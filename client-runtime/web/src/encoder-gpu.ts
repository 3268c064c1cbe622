// SentenceEncoder's WebGPU path: the model on the app's GPUDevice, every
// matrix product on webtune's tuned WGSL kernels (the same ops and shapes as
// the Wasm path, docs/model-bundle.md), everything else on the fixed kernels of
// encoder-kernels.wgsl.
//
// Memory: the weights are uploaded once, at load, into one storage buffer
// (more only when they exceed the device's maxBufferSize), each tensor at
// an offset aligned to 256 bytes, WebGPU's largest
// minStorageBufferOffsetAlignment, so that any tensor can be bound as its
// own range. Per (batch, length) bucket, every activation is its own buffer
// (a dispatch may not read one range of a buffer while writing another),
// and every dispatch's bind group is made once: the tuned kernels' bind
// groups use their op's shared layout (webgpu.ts), so they stay valid when
// tuning swaps a kernel. `encode` records a batch's dispatches into one
// command encoder, submits once and maps back only the pooled embeddings.

import type { ModelManifest } from './encoder.js';
import { planBatches } from './batches.js';
import { LatencyLog } from './latency.js';
import type { GpuKernel, Webtune } from './webtune.js';
import { compileErrors } from './webgpu.js';

declare const __WEBTUNE_ENCODER_WGSL__: string;

/** Binding offsets are multiples of this: WebGPU's default, and largest allowed, minStorageBufferOffsetAlignment. */
export const ALIGN = 256;
/** Widest row the fixed kernels take (64 threads × 32 elements each, encoder-kernels.wgsl). */
const MAX_HIDDEN = 2048;
/** Threads of a workgroup: WG of the row kernels, EW of the element-wise ones (encoder-kernels.wgsl). */
const WG = 64;
const EW = 256;
const MAX_GROUPS = 65535;

export interface PackedTensor {
  /** Index of the weight buffer, byte offset in it, bytes. */
  buffer: number;
  offset: number;
  bytes: number;
}

/**
 * Places f32 tensors in buffers of at most `maxBytes`, in order, each at a
 * multiple of ALIGN; a tensor starts a new buffer when it does not fit in
 * the current one. Returns each buffer's size and each tensor's place.
 */
export function packTensors(tensors: { name: string; shape: number[] }[], maxBytes: number): { sizes: number[]; at: Map<string, PackedTensor> } {
  const sizes: number[] = [0];
  const at = new Map<string, PackedTensor>();
  for (const t of tensors) {
    const bytes = 4 * t.shape.reduce((a, b) => a * b, 1);
    if (bytes > maxBytes) throw new Error(`tensor ${t.name} is ${bytes} bytes, above this device's maxBufferSize of ${maxBytes}`);
    let offset = Math.ceil(sizes[sizes.length - 1] / ALIGN) * ALIGN;
    if (offset + bytes > maxBytes) {
      sizes.push(0);
      offset = 0;
    }
    at.set(t.name, { buffer: sizes.length - 1, offset, bytes });
    sizes[sizes.length - 1] = offset + bytes;
  }
  return { sizes, at };
}

/** Workgroups for `n` rows (or element blocks) as a grid of at most 65535 in x; the kernels fold y back in. */
export function grid(n: number): [number, number] {
  const x = Math.max(1, Math.min(n, MAX_GROUPS));
  return [x, Math.ceil(n / x)];
}

/** A binding range: a tensor in a weight buffer, or a whole activation buffer. */
interface Range {
  buffer: GPUBuffer;
  offset?: number;
  size?: number;
}

interface Layer {
  qkvW: Range; qkvB: Range; outW: Range; outB: Range; ln1G: Range; ln1B: Range;
  inW: Range; inB: Range; ffnW: Range; ffnB: Range; ln2G: Range; ln2B: Range;
}

type Fixed = 'embed' | 'add_ln' | 'split_heads' | 'softmax' | 'merge_heads' | 'pool';

/** One dispatch: a tuned kernel (its pipeline read when recorded, so swaps apply), or a fixed one. */
type Step = { kernel: GpuKernel; group: GPUBindGroup } | { pipeline: GPUComputePipeline; group: GPUBindGroup; grid: [number, number] };

interface Bucket {
  b: number;
  s: number;
  /** Batches run in this bucket (the first, which made its kernels, is not timed). */
  calls: number;
  ids: GPUBuffer;
  lens: GPUBuffer;
  pooled: GPUBuffer;
  read: GPUBuffer;
  owned: GPUBuffer[];
  steps: Step[];
  /** Host-side ids and lengths, rewritten per batch. */
  idsHost: Uint32Array<ArrayBuffer>;
  lensHost: Uint32Array<ArrayBuffer>;
}

/** Runs `f` inside validation and out-of-memory error scopes; throws the first error, prefixed with `what`. */
async function scoped<T>(device: GPUDevice, what: string, f: () => Promise<T> | T): Promise<T> {
  device.pushErrorScope('out-of-memory');
  device.pushErrorScope('validation');
  let value: T;
  try {
    value = await f();
  } finally {
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    const e = validation ?? oom;
    if (e) throw new Error(`${what}: ${e.message}`);
  }
  return value;
}

export class GpuEncoder {
  private device: GPUDevice;
  private buckets = new Map<string, Promise<Bucket>>();
  private latency: LatencyLog | null;
  private closed = false;

  private constructor(
    private webtune: Webtune,
    private manifest: ModelManifest,
    private fixed: Record<Fixed, GPUComputePipeline>,
    private weights: GPUBuffer[],
    private tensors: Map<string, Range>,
    private layers: Layer[],
    private params: (b: number, s: number) => ArrayBuffer,
    private maxBatch: number,
    report: boolean,
  ) {
    this.device = webtune.device!;
    this.latency = report ? new LatencyLog(webtune.server, manifest.name, manifest.max_seq_length) : null;
  }

  /**
   * Checks the manifest's tensors, uploads the weights (the bundle's blob)
   * to the session's device and builds the fixed kernels' pipelines.
   */
  static async create(init: { webtune: Webtune; manifest: ModelManifest; weights: ArrayBuffer; maxBatch: number; report: boolean }): Promise<GpuEncoder> {
    const { webtune, manifest } = init;
    const device = webtune.device!;
    const c = manifest.config, H = c.hidden_size, I = c.intermediate_size;
    const fail = (what: string) => new Error(`model "${manifest.name}": ${what}`);
    if (H > MAX_HIDDEN) throw fail(`hidden size ${H}: the WebGPU path runs hidden sizes up to ${MAX_HIDDEN}`);
    const want: [string, number[]][] = [
      ['embeddings.word', [c.vocab_size, H]], ['embeddings.position', [c.max_position_embeddings, H]],
      ['embeddings.token_type', [c.type_vocab_size, H]], ['embeddings.ln.gamma', [H]], ['embeddings.ln.beta', [H]],
    ];
    const perLayer: [keyof Layer, string, number[]][] = [
      ['qkvW', 'qkv.weight', [H, 3 * H]], ['qkvB', 'qkv.bias', [3 * H]], ['outW', 'attn_out.weight', [H, H]], ['outB', 'attn_out.bias', [H]],
      ['ln1G', 'attn_ln.gamma', [H]], ['ln1B', 'attn_ln.beta', [H]], ['inW', 'ffn_in.weight', [H, I]], ['inB', 'ffn_in.bias', [I]],
      ['ffnW', 'ffn_out.weight', [I, H]], ['ffnB', 'ffn_out.bias', [H]], ['ln2G', 'ffn_ln.gamma', [H]], ['ln2B', 'ffn_ln.beta', [H]],
    ];
    for (let l = 0; l < c.num_hidden_layers; l++) for (const [, name, shape] of perLayer) want.push([`layer.${l}.${name}`, shape]);
    const found = want.map(([name, shape]) => {
      const t = manifest.tensors.find((x) => x.name === name);
      if (!t) throw fail(`the manifest has no tensor ${name}`);
      if (t.dtype !== 'f32' || t.shape.join(',') !== shape.join(',')) throw fail(`tensor ${name} is ${t.dtype}[${t.shape}], expected f32[${shape}]`);
      if (t.offset + 4 * shape.reduce((a, b) => a * b, 1) > init.weights.byteLength) throw fail(`tensor ${name} lies beyond the weights blob`);
      return t;
    });
    const limits = device.limits;
    const big = found.find((t) => 4 * t.shape.reduce((a, b) => a * b, 1) > limits.maxStorageBufferBindingSize);
    if (big) throw fail(`tensor ${big.name} is larger than this device's maxStorageBufferBindingSize (${limits.maxStorageBufferBindingSize} bytes)`);

    const packed = packTensors(found, limits.maxBufferSize);
    const { weights, pipelines } = await scoped(device, `model "${manifest.name}" on WebGPU`, async () => {
      const weights = packed.sizes.map((size, i) =>
        device.createBuffer({ label: `encoder weights ${i}`, size: Math.ceil(size / 4) * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST }));
      for (const t of found) {
        const p = packed.at.get(t.name)!;
        device.queue.writeBuffer(weights[p.buffer], p.offset, init.weights, t.offset, p.bytes);
      }
      const module = device.createShaderModule({ label: 'encoder-kernels.wgsl', code: __WEBTUNE_ENCODER_WGSL__ });
      const names: Fixed[] = ['embed', 'add_ln', 'split_heads', 'softmax', 'merge_heads', 'pool'];
      // The compiler's messages are asked for only on failure: Dawn's Node
      // binding (npm webgpu 0.6.2) crashes or never answers getCompilationInfo.
      const made = await Promise.all(names.map((entryPoint) =>
        device.createComputePipelineAsync({ label: `encoder ${entryPoint}`, layout: 'auto', compute: { module, entryPoint } }))).catch(async (e) => {
        throw new Error(await compileErrors(module, 'encoder-kernels.wgsl', e));
      });
      return { weights, pipelines: Object.fromEntries(names.map((n, i) => [n, made[i]])) as Record<Fixed, GPUComputePipeline> };
    });
    const tensors = new Map<string, Range>();
    for (const [name, p] of packed.at) tensors.set(name, { buffer: weights[p.buffer], offset: p.offset, size: p.bytes });
    const layers: Layer[] = [];
    for (let l = 0; l < c.num_hidden_layers; l++) {
      layers.push(Object.fromEntries(perLayer.map(([key, name]) => [key, tensors.get(`layer.${l}.${name}`)!])) as unknown as Layer);
    }
    const heads = c.num_attention_heads, d = H / heads;
    // The Params struct of encoder-kernels.wgsl, field by field.
    const params = (b: number, s: number) => {
      const u = new Uint32Array(9), f = new Float32Array(u.buffer);
      u.set([b, s, H, heads, d]);
      f[5] = c.layer_norm_eps;
      f[6] = 1 / Math.sqrt(d);
      u[7] = manifest.pooling === 'cls' ? 1 : 0;
      u[8] = manifest.normalize ? 1 : 0;
      return u.buffer;
    };
    return new GpuEncoder(webtune, manifest, pipelines, weights, tensors, layers, params, init.maxBatch, init.report);
  }

  /** One embedding per list of token ids, batched and padded as the Wasm path does. */
  async encode(toks: number[][]): Promise<Float32Array[]> {
    if (this.closed) throw new Error('encode: this SentenceEncoder is closed');
    const out: Float32Array[] = new Array(toks.length);
    for (const { idx, b, s } of planBatches(toks.map((t) => t.length), this.maxBatch, this.manifest.max_seq_length)) {
      const bucket = await this.bucket(b, s);
      const t0 = performance.now();
      const emb = await this.run(bucket, idx.map((i) => toks[i]));
      if (bucket.calls++ > 0) void this.latency?.add(this.webtune.session.session_id, 'webgpu', b, s, performance.now() - t0);
      idx.forEach((i, j) => (out[i] = emb[j]));
    }
    return out;
  }

  /** The bucket's buffers, kernels and bind groups, made once. */
  private bucket(b: number, s: number): Promise<Bucket> {
    const key = `${b}x${s}`;
    let p = this.buckets.get(key);
    if (!p) {
      p = this.makeBucket(b, s);
      this.buckets.set(key, p);
      p.catch(() => this.buckets.delete(key));
    }
    return p;
  }

  private async makeBucket(b: number, s: number): Promise<Bucket> {
    const c = this.manifest.config, H = c.hidden_size, I = c.intermediate_size, heads = c.num_attention_heads, d = H / heads;
    const M = b * s, wt = this.webtune, device = this.device;
    const [qkvK, scoresK, contextK, outK, upK, downK] = await Promise.all([
      wt.gpuKernel('matmul', [M, H, 3 * H]),
      wt.gpuKernel('batch_matmul', [b * heads, s, d, s]),
      wt.gpuKernel('batch_matmul', [b * heads, s, s, d]),
      wt.gpuKernel('matmul', [M, H, H]),
      wt.gpuKernel('matmul+bias+gelu', [M, H, I]),
      wt.gpuKernel('matmul', [M, I, H]),
    ]);
    const floats = { x: M * H, qkv: M * 3 * H, q: M * H, kt: M * H, v: M * H, p: b * heads * s * s, ctx: M * H, merged: M * H, proj: M * H, ffn: M * I };
    const limit = device.limits.maxStorageBufferBindingSize;
    for (const [name, n] of Object.entries(floats)) {
      if (n * 4 > limit) throw new Error(`SentenceEncoder: a batch of ${b} texts of ${s} tokens needs a ${name} buffer of ${n * 4} bytes, above this device's maxStorageBufferBindingSize (${limit}); lower maxBatch`);
    }
    return scoped(device, `SentenceEncoder: bucket ${b}×${s} on WebGPU`, () => {
      const owned: GPUBuffer[] = [];
      const buffer = (label: string, bytes: number, usage = 0) => {
        const buf = device.createBuffer({ label: `encoder ${label} ${b}x${s}`, size: Math.max(16, Math.ceil(bytes / 16) * 16), usage: GPUBufferUsage.STORAGE | usage });
        owned.push(buf);
        return buf;
      };
      const a = Object.fromEntries(Object.entries(floats).map(([name, n]) => [name, buffer(name, n * 4)])) as Record<keyof typeof floats, GPUBuffer>;
      const ids = buffer('ids', M * 4, GPUBufferUsage.COPY_DST);
      const lens = buffer('lens', b * 4, GPUBufferUsage.COPY_DST);
      const pooled = buffer('pooled', b * H * 4, GPUBufferUsage.COPY_SRC);
      const read = device.createBuffer({ label: `encoder read ${b}x${s}`, size: b * H * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      owned.push(read);
      const params = device.createBuffer({ label: `encoder params ${b}x${s}`, size: 48, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
      owned.push(params);
      device.queue.writeBuffer(params, 0, this.params(b, s));

      const entries = (ranges: Range[]) => ranges.map((r, binding) => ({ binding, resource: { buffer: r.buffer, offset: r.offset ?? 0, size: r.size } }));
      const tuned = (kernel: GpuKernel, ...ranges: Range[]): Step =>
        ({ kernel, group: device.createBindGroup({ layout: kernel.bindGroupLayout, entries: entries(ranges) }) });
      // Fixed kernels: binding 0 is the parameters, then the kernel's buffers in encoder-kernels.wgsl's order.
      const fixed = (name: Fixed, groups: number, ...ranges: Range[]): Step => {
        const pipeline = this.fixed[name];
        return { pipeline, grid: grid(groups), group: device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: entries([{ buffer: params }, ...ranges]) }) };
      };
      const T = (name: string) => this.tensors.get(name)!;
      const r = (buffer: GPUBuffer): Range => ({ buffer });
      const rowsEW = Math.ceil((M * H) / EW);
      const steps: Step[] = [
        fixed('embed', M, r(ids), T('embeddings.word'), T('embeddings.position'), T('embeddings.token_type'),
          T('embeddings.ln.gamma'), T('embeddings.ln.beta'), r(a.x)),
      ];
      for (const L of this.layers) {
        steps.push(
          tuned(qkvK, r(a.x), L.qkvW, r(a.qkv)),
          fixed('split_heads', rowsEW, r(a.qkv), L.qkvB, r(a.q), r(a.kt), r(a.v)),
          tuned(scoresK, r(a.q), r(a.kt), r(a.p)),
          fixed('softmax', Math.ceil((b * heads * s) / WG), r(lens), r(a.p)),
          tuned(contextK, r(a.p), r(a.v), r(a.ctx)),
          fixed('merge_heads', rowsEW, r(a.ctx), r(a.merged)),
          tuned(outK, r(a.merged), L.outW, r(a.proj)),
          fixed('add_ln', M, r(a.proj), L.outB, L.ln1G, L.ln1B, r(a.x)),
          tuned(upK, r(a.x), L.inW, L.inB, r(a.ffn)),
          tuned(downK, r(a.ffn), L.ffnW, r(a.proj)),
          fixed('add_ln', M, r(a.proj), L.ffnB, L.ln2G, L.ln2B, r(a.x)),
        );
      }
      steps.push(fixed('pool', b, r(lens), r(a.x), r(pooled)));
      return { b, s, calls: 0, ids, lens, pooled, read, owned, steps, idsHost: new Uint32Array(M), lensHost: new Uint32Array(b) };
    });
  }

  /** Runs one padded batch: one command buffer, one submit, one map of the pooled embeddings. */
  private async run(bk: Bucket, toks: number[][]): Promise<Float32Array[]> {
    const H = this.manifest.config.hidden_size, device = this.device;
    bk.idsHost.fill(0);
    bk.lensHost.fill(0);
    toks.forEach((t, j) => {
      bk.idsHost.set(t, j * bk.s);
      bk.lensHost[j] = t.length;
    });
    const bytes = toks.length * H * 4;
    device.pushErrorScope('validation');
    device.queue.writeBuffer(bk.ids, 0, bk.idsHost);
    device.queue.writeBuffer(bk.lens, 0, bk.lensHost);
    const enc = device.createCommandEncoder({ label: 'encoder batch' });
    const pass = enc.beginComputePass();
    for (const st of bk.steps) {
      if ('kernel' in st) {
        st.kernel.dispatch(pass, st.group);
      } else {
        pass.setPipeline(st.pipeline);
        pass.setBindGroup(0, st.group);
        pass.dispatchWorkgroups(...st.grid);
      }
    }
    pass.end();
    enc.copyBufferToBuffer(bk.pooled, 0, bk.read, 0, bytes);
    device.queue.submit([enc.finish()]);
    // The error scope and the read-back resolve in parallel: no extra round trip.
    const [error, mapError] = await Promise.all([
      device.popErrorScope(),
      bk.read.mapAsync(GPUMapMode.READ, 0, bytes).then(() => null, (e: Error) => e),
    ]);
    if (error || mapError) {
      if (!mapError) bk.read.unmap();
      throw new Error(`SentenceEncoder on WebGPU: ${(error ?? mapError)!.message}`);
    }
    const all = new Float32Array(bk.read.getMappedRange(0, bytes));
    const out = toks.map((_, j) => all.slice(j * H, (j + 1) * H));
    bk.read.unmap();
    return out;
  }

  /** Frees the weights and every bucket's buffers; the device stays the app's. */
  destroy(): void {
    this.closed = true;
    for (const w of this.weights) w.destroy();
    for (const p of this.buckets.values()) void p.then((bk) => bk.owned.forEach((x) => x.destroy()), () => undefined);
    this.buckets.clear();
  }
}
