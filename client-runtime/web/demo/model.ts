// A small transformer encoder with deterministic generated weights (nothing
// is downloaded): token and position embeddings, then per layer pre-norm
// multi-head attention (Q·Kᵀ and softmax(S)·V with batch_matmul, the
// projections with matmul) and a GELU MLP (matmul, or matmul_q4 on 4-bit
// weights). The tuned kernels do every matrix product; layer norm, softmax,
// GELU and the head reshuffles are plain hand-written code.

import type { GpuKernel, OpName, WasmKernel, Webtune } from '/web/webtune.js';

export interface Config {
  layers: number;
  seq: number;
  dim: number;
  heads: number;
  ffn: number;
  vocab: number;
  q4: boolean;
}

export function checkConfig(c: Config): void {
  if (c.dim % c.heads) throw new Error(`dim ${c.dim} must be a multiple of heads ${c.heads}`);
  if (c.q4 && (c.dim % 32 || c.ffn % 32)) throw new Error('q4 weights need dim and ffn to be multiples of 32');
  for (const [k, v] of Object.entries(c)) if (typeof v === 'number' && !(Number.isInteger(v) && v > 0)) throw new Error(`${k} must be a positive integer`);
}

/** The kernels a config needs: a name for the app, op and shape. */
export function kernelList(c: Config): { name: string; op: OpName; shape: number[] }[] {
  const dh = c.dim / c.heads;
  const mlp = c.q4 ? 'matmul_q4' : 'matmul';
  return [
    { name: 'qkv', op: 'matmul', shape: [c.seq, c.dim, 3 * c.dim] },
    { name: 'scores', op: 'batch_matmul', shape: [c.heads, c.seq, dh, c.seq] },
    { name: 'context', op: 'batch_matmul', shape: [c.heads, c.seq, c.seq, dh] },
    { name: 'out', op: 'matmul', shape: [c.seq, c.dim, c.dim] },
    { name: 'up', op: mlp, shape: [c.seq, c.dim, c.ffn] },
    { name: 'down', op: mlp, shape: [c.seq, c.ffn, c.dim] },
  ];
}

/** mulberry32: a tiny deterministic generator for weights. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface LayerWeights {
  ln1: Float32Array; // gamma (dim) then beta (dim)
  wqkv: Float32Array; // [dim, 3 dim]
  wo: Float32Array; // [dim, dim]
  ln2: Float32Array;
  // MLP as f32 [in, out], or q4 as packed words [out, in/8] and scales [out, in/32].
  w1: Float32Array | Uint32Array;
  s1: Float32Array | null;
  w2: Float32Array | Uint32Array;
  s2: Float32Array | null;
}

export interface Weights {
  embed: Float32Array; // [seq, dim]: token embeddings of the fixed input plus positions
  layers: LayerWeights[];
  lnf: Float32Array;
}

export function makeWeights(c: Config): Weights {
  const r = rng(0x5eed);
  const normal = () => {
    // Irwin–Hall: close enough to a Gaussian for weights.
    let s = 0;
    for (let i = 0; i < 4; i++) s += r();
    return (s - 2) * Math.sqrt(3);
  };
  const dense = (rows: number, cols: number) => {
    const w = new Float32Array(rows * cols);
    const scale = 1 / Math.sqrt(rows);
    for (let i = 0; i < w.length; i++) w[i] = normal() * scale;
    return w;
  };
  const q4 = (k: number, n: number): [Uint32Array, Float32Array] => {
    const w = new Uint32Array((n * k) / 8);
    for (let i = 0; i < w.length; i++) w[i] = (r() * 4294967296) >>> 0;
    const s = new Float32Array((n * k) / 32);
    // Nibbles are uniform in [-8, 7]: σ ≈ 4.6, so this scale gives weights of σ ≈ 1/√k.
    for (let i = 0; i < s.length; i++) s[i] = (0.8 + 0.4 * r()) / (4.6 * Math.sqrt(k));
    return [w, s];
  };
  const ln = (d: number) => {
    const p = new Float32Array(2 * d);
    for (let i = 0; i < d; i++) {
      p[i] = 1 + 0.1 * (r() - 0.5);
      p[d + i] = 0.1 * (r() - 0.5);
    }
    return p;
  };
  const table = dense(c.vocab, c.dim);
  const embed = new Float32Array(c.seq * c.dim);
  for (let t = 0; t < c.seq; t++) {
    const tok = (t * 7919 + 13) % c.vocab;
    for (let i = 0; i < c.dim; i++) {
      const angle = t / Math.pow(10000, (2 * Math.floor(i / 2)) / c.dim);
      embed[t * c.dim + i] = table[tok * c.dim + i] * Math.sqrt(c.dim) * 0.1 + (i % 2 ? Math.cos(angle) : Math.sin(angle));
    }
  }
  const layers: LayerWeights[] = [];
  for (let l = 0; l < c.layers; l++) {
    const [w1, s1] = c.q4 ? q4(c.dim, c.ffn) : [dense(c.dim, c.ffn), null];
    const [w2, s2] = c.q4 ? q4(c.ffn, c.dim) : [dense(c.ffn, c.dim), null];
    layers.push({ ln1: ln(c.dim), wqkv: dense(c.dim, 3 * c.dim), wo: dense(c.dim, c.dim), ln2: ln(c.dim), w1, s1, w2, s2 });
  }
  return { embed, layers, lnf: ln(c.dim) };
}

/** A model that can run one forward pass and give its output. */
export interface Model {
  forward(): Promise<Float32Array>;
  kernels: Record<string, WasmKernel | GpuKernel>;
}

// ------------------------------------------------------------------- Wasm

function layerNorm(x: Float32Array, p: Float32Array, y: Float32Array, rows: number, d: number): void {
  for (let r = 0; r < rows; r++) {
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[r * d + i];
    mean /= d;
    let v = 0;
    for (let i = 0; i < d; i++) v += (x[r * d + i] - mean) ** 2;
    const inv = 1 / Math.sqrt(v / d + 1e-5);
    for (let i = 0; i < d; i++) y[r * d + i] = (x[r * d + i] - mean) * inv * p[i] + p[d + i];
  }
}

function gelu(x: number): number {
  return 0.5 * x * (1 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/** Bump allocator over the app's Wasm memory; views are rebuilt when the memory grows. */
class Arena {
  private end = 0;
  private views = new Map<string, { off: number; len: number; kind: 'f32' | 'u32'; view?: Float32Array | Uint32Array }>();
  private buffer: ArrayBuffer | null = null;
  constructor(readonly memory: WebAssembly.Memory) {}

  alloc(name: string, len: number, kind: 'f32' | 'u32' = 'f32'): number {
    const off = this.end;
    this.end = Math.ceil((off + len * 4) / 64) * 64;
    const need = this.end - this.memory.buffer.byteLength;
    if (need > 0) this.memory.grow(Math.ceil(need / 65536));
    this.views.set(name, { off, len, kind });
    return off;
  }

  off(name: string): number {
    return this.views.get(name)!.off;
  }

  f32(name: string): Float32Array {
    return this.view(name) as Float32Array;
  }

  u32(name: string): Uint32Array {
    return this.view(name) as Uint32Array;
  }

  private view(name: string): Float32Array | Uint32Array {
    if (this.buffer !== this.memory.buffer) {
      this.buffer = this.memory.buffer;
      for (const v of this.views.values()) v.view = undefined;
    }
    const v = this.views.get(name)!;
    v.view ??= v.kind === 'f32' ? new Float32Array(this.buffer, v.off, v.len) : new Uint32Array(this.buffer, v.off, v.len);
    return v.view;
  }
}

export async function wasmModel(wt: Webtune, c: Config, w: Weights): Promise<Model> {
  const memory = wt.memory!;
  const a = new Arena(memory);
  const { seq: T, dim: D, heads: H, ffn: F } = c;
  const dh = D / H;
  const ks: Record<string, WasmKernel> = {};
  for (const k of kernelList(c)) ks[k.name] = await wt.wasmKernel(k.op, k.shape);
  // Activations.
  for (const [n, len] of [
    ['x', T * D], ['h', T * D], ['qkv', T * 3 * D], ['q', T * D], ['kt', T * D], ['v', T * D],
    ['s', H * T * T], ['o', H * T * dh], ['m', T * D], ['a', T * D], ['u', T * F], ['y', T * D],
  ] as const) a.alloc(n, len);
  // Weights.
  w.layers.forEach((l, i) => {
    a.alloc(`wqkv${i}`, l.wqkv.length);
    a.alloc(`wo${i}`, l.wo.length);
    a.alloc(`w1${i}`, l.w1.length, c.q4 ? 'u32' : 'f32');
    a.alloc(`w2${i}`, l.w2.length, c.q4 ? 'u32' : 'f32');
    if (c.q4) {
      a.alloc(`s1${i}`, l.s1!.length);
      a.alloc(`s2${i}`, l.s2!.length);
    }
  });
  w.layers.forEach((l, i) => {
    a.f32(`wqkv${i}`).set(l.wqkv);
    a.f32(`wo${i}`).set(l.wo);
    if (c.q4) {
      a.u32(`w1${i}`).set(l.w1);
      a.u32(`w2${i}`).set(l.w2);
      a.f32(`s1${i}`).set(l.s1!);
      a.f32(`s2${i}`).set(l.s2!);
    } else {
      a.f32(`w1${i}`).set(l.w1 as Float32Array);
      a.f32(`w2${i}`).set(l.w2 as Float32Array);
    }
  });
  const mlp = (k: WasmKernel, i: number, which: 1 | 2, inp: string, out: string) => {
    if (c.q4) k.run(a.off(inp), a.off(`w${which}${i}`), a.off(`s${which}${i}`), a.off(out));
    else k.run(a.off(inp), a.off(`w${which}${i}`), a.off(out));
  };
  const scale = 1 / Math.sqrt(dh);

  async function forward(): Promise<Float32Array> {
    a.f32('x').set(w.embed);
    for (let i = 0; i < c.layers; i++) {
      const L = w.layers[i];
      layerNorm(a.f32('x'), L.ln1, a.f32('h'), T, D);
      ks.qkv.run(a.off('h'), a.off(`wqkv${i}`), a.off('qkv'));
      // Split heads: Q (pre-scaled) [H,T,dh], Kᵀ [H,dh,T], V [H,T,dh].
      const qkv = a.f32('qkv'), q = a.f32('q'), kt = a.f32('kt'), v = a.f32('v');
      for (let t = 0; t < T; t++) {
        for (let hh = 0; hh < H; hh++) {
          for (let j = 0; j < dh; j++) {
            const col = hh * dh + j;
            q[(hh * T + t) * dh + j] = qkv[t * 3 * D + col] * scale;
            kt[(hh * dh + j) * T + t] = qkv[t * 3 * D + D + col];
            v[(hh * T + t) * dh + j] = qkv[t * 3 * D + 2 * D + col];
          }
        }
      }
      ks.scores.run(a.off('q'), a.off('kt'), a.off('s'));
      const s = a.f32('s');
      for (let r = 0; r < H * T; r++) {
        let max = -Infinity;
        for (let j = 0; j < T; j++) max = Math.max(max, s[r * T + j]);
        let sum = 0;
        for (let j = 0; j < T; j++) sum += s[r * T + j] = Math.exp(s[r * T + j] - max);
        for (let j = 0; j < T; j++) s[r * T + j] /= sum;
      }
      ks.context.run(a.off('s'), a.off('v'), a.off('o'));
      const o = a.f32('o'), m = a.f32('m');
      for (let hh = 0; hh < H; hh++) for (let t = 0; t < T; t++) for (let j = 0; j < dh; j++) m[t * D + hh * dh + j] = o[(hh * T + t) * dh + j];
      ks.out.run(a.off('m'), a.off(`wo${i}`), a.off('a'));
      const x = a.f32('x'), at = a.f32('a');
      for (let p = 0; p < T * D; p++) x[p] += at[p];
      layerNorm(x, L.ln2, a.f32('h'), T, D);
      mlp(ks.up, i, 1, 'h', 'u');
      const u = a.f32('u');
      for (let p = 0; p < T * F; p++) u[p] = gelu(u[p]);
      mlp(ks.down, i, 2, 'u', 'a');
      const x2 = a.f32('x'), d2 = a.f32('a');
      for (let p = 0; p < T * D; p++) x2[p] += d2[p];
    }
    layerNorm(a.f32('x'), w.lnf, a.f32('y'), T, D);
    return a.f32('y').slice();
  }
  return { forward, kernels: ks };
}

// ----------------------------------------------------------------- WebGPU

const WG = 64;

function helpers(c: Config): Record<string, string> {
  const { seq: T, dim: D, heads: H, ffn: F } = c;
  const dh = D / H;
  const head = (bindings: string) => `${bindings}\n@compute @workgroup_size(${WG}) fn main(@builtin(global_invocation_id) g: vec3u) {\n  let i = g.x;\n`;
  return {
    layernorm: head(`@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> p: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;`) + `  if (i >= ${T}u) { return; }
  var mean = 0.0;
  for (var k = 0u; k < ${D}u; k++) { mean += x[i * ${D}u + k]; }
  mean /= ${D}.0;
  var v = 0.0;
  for (var k = 0u; k < ${D}u; k++) { let d = x[i * ${D}u + k] - mean; v += d * d; }
  let inv = 1.0 / sqrt(v / ${D}.0 + 1e-5);
  for (var k = 0u; k < ${D}u; k++) { y[i * ${D}u + k] = (x[i * ${D}u + k] - mean) * inv * p[k] + p[${D}u + k]; }
}`,
    split: head(`@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<f32>;
@group(0) @binding(2) var<storage, read_write> kt: array<f32>;
@group(0) @binding(3) var<storage, read_write> v: array<f32>;`) + `  if (i >= ${T * D}u) { return; }
  let t = i / ${D}u;
  let col = i % ${D}u;
  let h = col / ${dh}u;
  let j = col % ${dh}u;
  q[(h * ${T}u + t) * ${dh}u + j] = qkv[t * ${3 * D}u + col] * ${1 / Math.sqrt(dh)};
  kt[(h * ${dh}u + j) * ${T}u + t] = qkv[t * ${3 * D}u + ${D}u + col];
  v[(h * ${T}u + t) * ${dh}u + j] = qkv[t * ${3 * D}u + ${2 * D}u + col];
}`,
    softmax: head(`@group(0) @binding(0) var<storage, read_write> s: array<f32>;`) + `  if (i >= ${H * T}u) { return; }
  var m = -3.0e38;
  for (var j = 0u; j < ${T}u; j++) { m = max(m, s[i * ${T}u + j]); }
  var sum = 0.0;
  for (var j = 0u; j < ${T}u; j++) { let e = exp(s[i * ${T}u + j] - m); s[i * ${T}u + j] = e; sum += e; }
  for (var j = 0u; j < ${T}u; j++) { s[i * ${T}u + j] /= sum; }
}`,
    merge: head(`@group(0) @binding(0) var<storage, read> o: array<f32>;
@group(0) @binding(1) var<storage, read_write> m: array<f32>;`) + `  if (i >= ${T * D}u) { return; }
  let t = i / ${D}u;
  let col = i % ${D}u;
  m[i] = o[((col / ${dh}u) * ${T}u + t) * ${dh}u + col % ${dh}u];
}`,
    gelu: head(`@group(0) @binding(0) var<storage, read_write> u: array<f32>;`) + `  if (i >= ${T * F}u) { return; }
  let x = u[i];
  u[i] = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}`,
    add: head(`@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;`) + `  if (i >= ${T * D}u) { return; }
  x[i] += a[i];
}`,
  };
}

export async function gpuModel(wt: Webtune, c: Config, w: Weights): Promise<Model> {
  const device = wt.device!;
  const { seq: T, dim: D, heads: H, ffn: F } = c;
  const dh = D / H;
  const ks: Record<string, GpuKernel> = {};
  for (const k of kernelList(c)) ks[k.name] = await wt.gpuKernel(k.op, k.shape);
  const buf = (data: Float32Array | Uint32Array | number, label: string, extra = 0) => {
    const size = Math.ceil((typeof data === 'number' ? data : data.length) * 4 / 16) * 16;
    const b = device.createBuffer({ label, size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC | extra });
    if (typeof data !== 'number') device.queue.writeBuffer(b, 0, data as Float32Array<ArrayBuffer>);
    return b;
  };
  const B = {
    x: buf(T * D, 'x'), h: buf(T * D, 'h'), qkv: buf(T * 3 * D, 'qkv'), q: buf(T * D, 'q'), kt: buf(T * D, 'kt'),
    v: buf(T * D, 'v'), s: buf(H * T * T, 's'), o: buf(H * T * dh, 'o'), m: buf(T * D, 'm'), a: buf(T * D, 'a'),
    u: buf(T * F, 'u'), y: buf(T * D, 'y'), lnf: buf(w.lnf, 'lnf'),
  };
  const staging = device.createBuffer({ size: T * D * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const src = helpers(c);
  const pipes: Record<string, GPUComputePipeline> = {};
  for (const [name, code] of Object.entries(src)) {
    pipes[name] = await device.createComputePipelineAsync({ label: name, layout: 'auto', compute: { module: device.createShaderModule({ label: name, code }), entryPoint: 'main' } });
  }
  const bg = (pipe: string, buffers: GPUBuffer[]) =>
    device.createBindGroup({ layout: pipes[pipe].getBindGroupLayout(0), entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })) });
  const groups = (n: number) => Math.ceil(n / WG);
  type Step = (pass: GPUComputePassEncoder) => void;
  const steps: Step[] = [];
  const helper = (pipe: string, buffers: GPUBuffer[], n: number) => {
    const g = bg(pipe, buffers);
    steps.push((pass) => {
      pass.setPipeline(pipes[pipe]);
      pass.setBindGroup(0, g);
      pass.dispatchWorkgroups(groups(n));
    });
  };
  const kernel = (k: GpuKernel, buffers: GPUBuffer[]) => {
    // The bind group uses the kernel's shared layout, so it stays valid when tuning swaps the pipeline.
    const g = k.bindGroup(buffers);
    steps.push((pass) => k.dispatch(pass, g));
  };
  w.layers.forEach((l, i) => {
    const ln1 = buf(l.ln1, `ln1.${i}`), ln2 = buf(l.ln2, `ln2.${i}`);
    const wqkv = buf(l.wqkv, `wqkv.${i}`), wo = buf(l.wo, `wo.${i}`);
    const w1 = buf(l.w1, `w1.${i}`), w2 = buf(l.w2, `w2.${i}`);
    helper('layernorm', [B.x, ln1, B.h], T);
    kernel(ks.qkv, [B.h, wqkv, B.qkv]);
    helper('split', [B.qkv, B.q, B.kt, B.v], T * D);
    kernel(ks.scores, [B.q, B.kt, B.s]);
    helper('softmax', [B.s], H * T);
    kernel(ks.context, [B.s, B.v, B.o]);
    helper('merge', [B.o, B.m], T * D);
    kernel(ks.out, [B.m, wo, B.a]);
    helper('add', [B.a, B.x], T * D);
    helper('layernorm', [B.x, ln2, B.h], T);
    if (c.q4) kernel(ks.up, [B.h, w1, buf(l.s1!, `s1.${i}`), B.u]);
    else kernel(ks.up, [B.h, w1, B.u]);
    helper('gelu', [B.u], T * F);
    if (c.q4) kernel(ks.down, [B.u, w2, buf(l.s2!, `s2.${i}`), B.a]);
    else kernel(ks.down, [B.u, w2, B.a]);
    helper('add', [B.a, B.x], T * D);
  });
  helper('layernorm', [B.x, B.lnf, B.y], T);

  async function forward(): Promise<Float32Array> {
    device.queue.writeBuffer(B.x, 0, w.embed as Float32Array<ArrayBuffer>);
    const enc = device.createCommandEncoder();
    // Each dispatch is its own usage scope: it sees the writes of the ones before it.
    const pass = enc.beginComputePass();
    for (const s of steps) s(pass);
    pass.end();
    enc.copyBufferToBuffer(B.y, 0, staging, 0, T * D * 4);
    device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(staging.getMappedRange().slice(0));
    staging.unmap();
    return out;
  }
  return { forward, kernels: ks };
}
