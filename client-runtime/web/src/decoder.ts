// The Wasm backend of a decoder graph (models/src/graph.rs, served as JSON at
// `GET /v1/models/{name}/graph`): the same steps, memory layout and kernel
// arguments as the native runner (client-runtime/src/decoder.rs), so that a
// model runs the same way in the browser and under wasmtime. It knows how to
// run a step, not what a llama block is.
//
// One WebAssembly.Memory holds everything, laid out once at load (byte
// offsets, each region 64-byte aligned, in this order):
//   64                the run's token ids (i32, the largest bucket's worth)
//   weights           the bundle's blob, each tensor part at its manifest offset
//   buffers           one region per graph buffer: `cols` f32 per row, the
//                     largest bucket's rows (`tokens`) or one row (`one`)
//   caches            `context` positions of `cols` f32 each
//   rope              the rotary table: per position, head_dim/2 pairs (cos, sin)
//                     of pos·θ^(−2i/head_dim), computed in f64 and rounded
//                     to f32 the first time a position is used
//   scores            the attention kernel's scratch: (context + 4) f32 per
//                     query head of a group (heads / kv_heads)
// The tuned kernels' own scratch (those whose metadata asks for some) is
// what the kernel machinery (WasmKernelBinding) appends after the memory's
// end when it binds them; the native runner puts one shared area there. A
// run never allocates: decoding leaves the memory's size as it was, unless
// a tuning swap binds a kernel that needs more scratch.
//
// A run feeds T tokens at positions pos0..pos0+T (T at most the largest
// bucket; longer inputs are fed in chunks of it). Each tuned product runs at
// M = the run's row bucket (the smallest bucket ≥ T; padded rows compute
// values nobody reads) or M = 1 on the last real row (`last`); every fixed
// kernel (decoder-kernels.wat) runs on the T real rows only, so the caches
// hold real positions only. The logits of the run's last token end in the
// graph's `logits` buffer.

import { sharedImport } from './threads.js';

/** How a tensor's values are stored (docs/model-bundle.md, format 2). */
export type Format = 'f32' | 'q4_0' | 'q4_1' | 'q8_0';

/** An activation buffer: `cols` f32 per row; one row per token of the run (padded to its bucket), or one. */
export interface GraphBuffer {
  name: string;
  cols: number;
  rows: 'tokens' | 'one';
}

/** A key or value cache: `cols` f32 per position. */
export interface GraphCache {
  name: string;
  cols: number;
}

/** One step of a decoder graph (the serde form of `webtune_models::graph::Step`). */
export type Step =
  | { step: 'embed'; table: string; format: Format; out: string }
  | { step: 'rms_norm'; x: string; weight: string; out: string; eps: number; last: boolean }
  | { step: 'matmul'; kernel: string; a: string; weight: string; format: Format; out: string; k: number; n: number; last: boolean }
  | { step: 'rope'; x: string; stride: number; heads: number; head_dim: number; theta: number }
  | { step: 'kv_store'; x: string; stride: number; k_col: number; v_col: number; width: number; k_cache: string; v_cache: string }
  | { step: 'attention'; x: string; stride: number; heads: number; kv_heads: number; head_dim: number; k_cache: string; v_cache: string; out: string; scale: number }
  | { step: 'swi_glu'; x: string; ffn: number; out: string }
  | { step: 'add'; x: string; y: string; cols: number };

/**
 * Consecutive steps `first..first + steps` that one tuned product (op
 * `kernel`, shape `[1, k, n]`: a block-quantised op with `+rms_norm`,
 * `+swiglu` and `+residual` epilogues) computes in WebGPU's decode step
 * (`webtune_models::graph::Fused`). Every other executor runs the steps.
 */
export interface Fused {
  first: number;
  steps: number;
  kernel: string;
  k: number;
  n: number;
}

/** A decoder's computation for one run of tokens (`webtune_models::graph::DecoderGraph`, version 1). */
export interface DecoderGraph {
  version: number;
  hidden: number;
  vocab: number;
  /** The model's context length: no run goes past it. */
  context: number;
  /** Row buckets of the tuned products, ascending. */
  buckets: number[];
  buffers: GraphBuffer[];
  caches: GraphCache[];
  steps: Step[];
  /** The buffer holding the last token's logits (one row of `vocab`). */
  logits: string;
  /** Runs of steps WebGPU's decode step runs as one product each (absent: none). */
  fused?: Fused[];
}

/** Where one part of a tensor lies in the weights blob. */
export interface TensorPart {
  offset: number;
  bytes: number;
}

/** A tensor of a format-2 manifest: `shape` [N, K] for a matrix (out, in), [len] for a vector. */
export interface DecoderTensor {
  name: string;
  format: Format;
  shape: number[];
  parts: Record<string, TensorPart>;
}

/** A tuned product the backend calls: arguments' byte offsets in ABI order (a WasmKernel is one). */
export interface ProductKernel {
  run(...offsets: number[]): void;
}

/** What a run goes through when the backend has one (`Webtune`'s plan guard): it runs `run` and may change which kernels `kernels` run meanwhile. */
export interface RunGuard {
  call(kind: string, kernels: readonly ProductKernel[], run: () => void): void;
  /** Whether a run of `kind` over `kernels` would be judged now. */
  due?(kind: string, kernels: readonly ProductKernel[]): boolean;
}

/** Gives the kernel of a product (`op`, `[M, K, N]`); called once per product and bucket. */
export type KernelSource = (op: string, shape: number[]) => Promise<ProductKernel>;

/** One matrix product a run needs. */
export interface Product {
  op: string;
  /** `[M, K, N]`. */
  shape: number[];
  /** How many times one run calls it. */
  calls: number;
}

interface Fixed {
  rmsnorm(x: number, w: number, out: number, rows: number, h: number, eps: number): void;
  rope(x: number, rows: number, stride: number, heads: number, hd: number, table: number, pos0: number): void;
  kv_store(x: number, rows: number, stride: number, kcol: number, vcol: number, width: number, kc: number, vc: number, pos0: number): void;
  attention(x: number, rows: number, stride: number, heads: number, kvh: number, hd: number, kc: number, vc: number, pos0: number, scale: number, out: number, scores: number): void;
  swiglu(x: number, rows: number, f: number, out: number): void;
  add(x: number, y: number, n: number): void;
  embed_q8(ids: number, rows: number, w: number, d: number, h: number, out: number): void;
  embed_q4(ids: number, rows: number, w: number, d: number, m: number, min: number, h: number, out: number): void;
  embed_f32(ids: number, rows: number, w: number, vocab: number, h: number, out: number): void;
}

const FIXED = ['rmsnorm', 'rope', 'kv_store', 'attention', 'swiglu', 'add', 'embed_q8', 'embed_q4', 'embed_f32'] as const;
const PAGE = 65536;
const FORMATS: Format[] = ['f32', 'q4_0', 'q4_1', 'q8_0'];
const STEPS = ['embed', 'rms_norm', 'matmul', 'rope', 'kv_store', 'attention', 'swi_glu', 'add'];

function align(x: number): number {
  return Math.ceil(x / 64) * 64;
}

/** The row bucket of a run of `tokens` tokens, or null past the largest. */
export function bucketOf(graph: DecoderGraph, tokens: number): number | null {
  return graph.buckets.find((b) => b >= Math.max(1, tokens)) ?? null;
}

/**
 * Parts a head of a decode step's split attention where the product after
 * it merges them (`+merge`, docs/ops.md): NP in decoder-kernels.wgsl. Up to
 * NP·64 positions each part folds one chunk of 64; beyond, several.
 */
export const MERGE_PARTS = 16;

/**
 * The `+merge` form of fused run `f` (WebGPU's decode step), where its
 * product, in a block format, reads the output of an attention step right
 * before it and the run has no `+rms_norm`: the op and shape the backend runs instead, and
 * the attention; else null. The attention then writes its parts and no
 * merge dispatch runs.
 */
export function mergedRun(graph: DecoderGraph, f: Fused): { op: string; shape: number[]; attention: Extract<Step, { step: 'attention' }> } | null {
  const prev = graph.steps[f.first - 1];
  const product = graph.steps.slice(f.first, f.first + f.steps).find((s) => s.step === 'matmul') as Extract<Step, { step: 'matmul' }> | undefined;
  const [base, ...suffixes] = f.kernel.split('+');
  if (prev?.step !== 'attention' || !product || product.format === 'f32' || product.a !== prev.out || suffixes.includes('rms_norm') || suffixes.includes('merge') || f.k !== prev.heads * prev.head_dim) return null;
  return { op: [base, 'merge', ...suffixes].join('+'), shape: [1, f.k, f.n, prev.heads, MERGE_PARTS], attention: prev };
}

/**
 * The distinct products of a run in bucket `m`, heaviest first (as
 * `DecoderGraph::products`); with `fused`, WebGPU's (`DecoderGraph::fused_products`:
 * in bucket 1 each of the graph's fused runs is one product, its fused op,
 * in its `+merge` form after an attention unless `merge` is false).
 */
export function productsOf(graph: DecoderGraph, m: number, fused = false, merge = true): Product[] {
  const out: Product[] = [];
  const add = (op: string, shape: number[]) => {
    const p = out.find((x) => x.op === op && x.shape.join() === shape.join());
    if (p) p.calls++;
    else out.push({ op, shape, calls: 1 });
  };
  const runs = new Map((fused && m === 1 ? graph.fused ?? [] : []).map((f) => [f.first, f]));
  for (let i = 0; i < graph.steps.length; i++) {
    const f = runs.get(i);
    if (f) {
      const merged = merge ? mergedRun(graph, f) : null;
      if (merged) add(merged.op, merged.shape);
      else add(f.kernel, [1, f.k, f.n]);
      i += f.steps - 1;
      continue;
    }
    const s = graph.steps[i];
    if (s.step === 'matmul') add(s.kernel, [s.last ? 1 : m, s.k, s.n]);
  }
  // A +swiglu product multiplies by twice its N rows of weights.
  const work = (p: Product) => (p.op.includes('+swiglu') ? 2 : 1) * p.calls * p.shape[0] * p.shape[1] * p.shape[2];
  return out.sort((a, b) => work(b) - work(a) || (a.op < b.op ? -1 : a.op > b.op ? 1 : 0) || a.shape[0] - b.shape[0] || a.shape[1] - b.shape[1] || a.shape[2] - b.shape[2]);
}

/** Bytes a part of `format` needs for a matrix of N rows of K (or a vector of N when K is 0). */
function partBytes(format: Format, part: string, n: number, k: number): number {
  if (k === 0) return n * 4;
  switch (format) {
    case 'f32': return n * k * 4;
    case 'q8_0': return part === 'w' ? n * k : (n * k) / 8;
    default: return part === 'w' ? (n * k) / 2 : (n * k) / 8;
  }
}

/** The parts each format stores. */
function partsOf(format: Format): string[] {
  return format === 'q4_1' ? ['w', 'd', 'm'] : format === 'f32' ? ['w'] : ['w', 'd'];
}

/** Byte offsets of everything the memory holds, and its size. */
export interface DecoderLayout {
  ids: number;
  weights: number;
  buffers: Map<string, number>;
  caches: Map<string, number>;
  rope: number;
  scores: number;
  /** Bytes the layout needs (the tuned kernels' scratch comes after). */
  bytes: number;
  maxRows: number;
  headDim: number;
  theta: number;
}

/** The layout of `graph` with a blob of `weightBytes` and `context` positions: the native runner's. */
export function layoutOf(graph: DecoderGraph, weightBytes: number, context: number): DecoderLayout {
  const maxRows = Math.max(1, ...graph.buckets);
  const rope = graph.steps.find((s) => s.step === 'rope') as Extract<Step, { step: 'rope' }> | undefined;
  let at = 64;
  const ids = at;
  at = align(at + maxRows * 4);
  const weights = at;
  at = align(at + weightBytes);
  const buffers = new Map<string, number>();
  for (const b of graph.buffers) {
    buffers.set(b.name, at);
    at = align(at + (b.rows === 'tokens' ? maxRows : 1) * b.cols * 4);
  }
  const caches = new Map<string, number>();
  for (const c of graph.caches) {
    caches.set(c.name, at);
    at = align(at + context * c.cols * 4);
  }
  const headDim = rope?.head_dim ?? 4;
  const ropeAt = at;
  at = align(at + context * headDim * 4);
  // One row of attention weights per query head of a group.
  const group = Math.max(1, ...graph.steps.map((s) => (s.step === 'attention' ? Math.floor(s.heads / Math.max(1, s.kv_heads)) : 1)));
  const scores = at;
  at = align(at + group * (context + 4) * 4);
  return { ids, weights, buffers, caches, rope: ropeAt, scores, bytes: at, maxRows, headDim, theta: rope?.theta ?? 10000 };
}

/**
 * Checks that `graph` is one this backend runs with `tensors` in a blob of
 * `weightBytes`: every name it uses exists, every part lies inside the blob
 * at a 16-byte boundary and is as large as the step reads, and every row the
 * fixed kernels walk is a whole number of 4-float vectors. Throws one line
 * naming the first problem.
 */
export function checkGraph(graph: DecoderGraph, tensors: DecoderTensor[], weightBytes: number): void {
  if (!graph || graph.version !== 1) throw new Error(`decoder graph version ${graph?.version}: this runtime runs version 1`);
  const pos = (x: unknown) => Number.isInteger(x) && (x as number) > 0;
  if (!pos(graph.hidden) || !pos(graph.vocab) || !pos(graph.context)) throw new Error('decoder graph: hidden, vocab and context must be positive integers');
  if (!Array.isArray(graph.buckets) || !graph.buckets.length || graph.buckets.some((b, i) => !pos(b) || (i > 0 && b <= graph.buckets[i - 1])))
    throw new Error(`decoder graph: buckets [${graph.buckets}] must be positive and ascending`);
  if (graph.hidden % 32) throw new Error(`decoder graph: hidden ${graph.hidden} is not a multiple of 32`);
  const bufs = new Map(graph.buffers.map((b) => [b.name, b]));
  const caches = new Map(graph.caches.map((c) => [c.name, c]));
  for (const b of graph.buffers) if (!pos(b.cols) || b.cols % 4 || (b.rows !== 'tokens' && b.rows !== 'one')) throw new Error(`decoder graph: buffer ${b.name} has ${b.cols} columns of rows '${b.rows}' (a positive multiple of 4 of 'tokens' or 'one')`);
  for (const c of graph.caches) if (!pos(c.cols) || c.cols % 4) throw new Error(`decoder graph: cache ${c.name} has ${c.cols} columns (a positive multiple of 4)`);
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const buf = (name: string, cols: number, what: string, rows?: 'tokens' | 'one') => {
    const b = bufs.get(name);
    if (!b) throw new Error(`decoder graph: ${what} names no buffer \`${name}\``);
    if (b.cols < cols) throw new Error(`decoder graph: ${what} needs ${cols} columns of buffer \`${name}\`, which has ${b.cols}`);
    if (rows && b.rows !== rows) throw new Error(`decoder graph: ${what} needs buffer \`${name}\` to have rows '${rows}'`);
  };
  const cache = (name: string, cols: number, what: string) => {
    const c = caches.get(name);
    if (!c) throw new Error(`decoder graph: ${what} names no cache \`${name}\``);
    if (c.cols !== cols) throw new Error(`decoder graph: ${what} needs cache \`${name}\` of ${cols} columns, it has ${c.cols}`);
  };
  // A tensor of `format` holding N rows of K (K 0: a vector of N).
  const tensor = (name: string, format: Format, n: number, k: number, what: string) => {
    const t = byName.get(name);
    if (!t) throw new Error(`the bundle has no tensor \`${name}\` (${what})`);
    if (t.format !== format) throw new Error(`tensor \`${name}\` is ${t.format}, the graph's ${what} reads ${format}`);
    for (const p of partsOf(format)) {
      const part = t.parts?.[p];
      if (!part) throw new Error(`tensor \`${name}\` has no part \`${p}\``);
      const need = partBytes(format, p, n, k);
      if (!(Number.isInteger(part.offset) && part.offset >= 0 && part.offset % 16 === 0 && part.offset + part.bytes <= weightBytes))
        throw new Error(`tensor \`${name}\` part \`${p}\` (${part.bytes} bytes at ${part.offset}) lies outside the ${weightBytes}-byte weights blob or off a 16-byte boundary`);
      if (part.bytes < need) throw new Error(`tensor \`${name}\` part \`${p}\` has ${part.bytes} bytes, ${what} reads ${need}`);
    }
  };
  const h = graph.hidden;
  for (const [i, s] of graph.steps.entries()) {
    const what = `step ${i} (${s.step})`;
    if (!STEPS.includes(s.step)) throw new Error(`decoder graph: ${what} is not a step this runtime runs`);
    switch (s.step) {
      case 'embed':
        if (!FORMATS.includes(s.format)) throw new Error(`decoder graph: ${what} has format ${s.format}`);
        buf(s.out, h, what, 'tokens');
        // An f32 table is stored transposed, [H][V]: as many bytes either way.
        tensor(s.table, s.format, graph.vocab, h, what);
        break;
      case 'rms_norm':
        buf(s.x, h, what, 'tokens');
        buf(s.out, h, what, s.last ? undefined : 'tokens');
        tensor(s.weight, 'f32', h, 0, what);
        break;
      case 'matmul':
        if (!FORMATS.includes(s.format)) throw new Error(`decoder graph: ${what} has format ${s.format}`);
        if (!pos(s.k) || !pos(s.n) || s.k % 32) throw new Error(`decoder graph: ${what} has K ${s.k} (a positive multiple of 32) and N ${s.n}`);
        buf(s.a, s.k, what);
        if (!s.last && bufs.get(s.a)!.rows !== 'tokens') throw new Error(`decoder graph: ${what} reads bucket rows from the one row of \`${s.a}\``);
        buf(s.out, s.n, what);
        if (bufs.get(s.a)!.cols !== s.k) throw new Error(`decoder graph: ${what} reads rows of ${s.k} from buffer \`${s.a}\` of ${bufs.get(s.a)!.cols} columns`);
        if (bufs.get(s.out)!.cols !== s.n) throw new Error(`decoder graph: ${what} writes rows of ${s.n} into buffer \`${s.out}\` of ${bufs.get(s.out)!.cols} columns`);
        if (!s.last && bufs.get(s.out)!.rows !== 'tokens') throw new Error(`decoder graph: ${what} writes bucket rows into the one row of \`${s.out}\``);
        tensor(s.weight, s.format, s.n, s.k, what);
        break;
      case 'rope':
        if (!pos(s.head_dim) || s.head_dim % 4 || !pos(s.stride) || s.stride % 4) throw new Error(`decoder graph: ${what} has head_dim ${s.head_dim} and stride ${s.stride} (multiples of 4)`);
        buf(s.x, s.heads * s.head_dim, what, 'tokens');
        if (bufs.get(s.x)!.cols !== s.stride) throw new Error(`decoder graph: ${what} has stride ${s.stride}, buffer \`${s.x}\` rows of ${bufs.get(s.x)!.cols}`);
        if (s.head_dim !== layoutOf(graph, 0, 1).headDim || s.theta !== layoutOf(graph, 0, 1).theta) throw new Error(`decoder graph: ${what}: every rope step must share one head_dim and theta (the table is one)`);
        break;
      case 'kv_store':
        if (s.stride % 4 || s.k_col % 4 || s.v_col % 4 || s.width % 4) throw new Error(`decoder graph: ${what}: stride, columns and width must be multiples of 4`);
        buf(s.x, Math.max(s.k_col, s.v_col) + s.width, what, 'tokens');
        if (bufs.get(s.x)!.cols !== s.stride) throw new Error(`decoder graph: ${what} has stride ${s.stride}, buffer \`${s.x}\` rows of ${bufs.get(s.x)!.cols}`);
        cache(s.k_cache, s.width, what);
        cache(s.v_cache, s.width, what);
        break;
      case 'attention':
        if (!pos(s.kv_heads) || s.heads % s.kv_heads || !pos(s.head_dim) || s.head_dim % 4 || s.stride % 4) throw new Error(`decoder graph: ${what}: ${s.heads} heads over ${s.kv_heads} key/value heads of ${s.head_dim} (a multiple of 4)`);
        buf(s.x, s.heads * s.head_dim, what, 'tokens');
        if (bufs.get(s.x)!.cols !== s.stride) throw new Error(`decoder graph: ${what} has stride ${s.stride}, buffer \`${s.x}\` rows of ${bufs.get(s.x)!.cols}`);
        buf(s.out, s.heads * s.head_dim, what, 'tokens');
        if (bufs.get(s.out)!.cols !== s.heads * s.head_dim) throw new Error(`decoder graph: ${what} writes rows of ${s.heads * s.head_dim} into buffer \`${s.out}\` of ${bufs.get(s.out)!.cols}`);
        cache(s.k_cache, s.kv_heads * s.head_dim, what);
        cache(s.v_cache, s.kv_heads * s.head_dim, what);
        break;
      case 'swi_glu':
        if (!pos(s.ffn) || s.ffn % 4) throw new Error(`decoder graph: ${what} has ffn ${s.ffn} (a multiple of 4)`);
        buf(s.x, 2 * s.ffn, what, 'tokens');
        buf(s.out, s.ffn, what, 'tokens');
        if (bufs.get(s.x)!.cols !== 2 * s.ffn || bufs.get(s.out)!.cols !== s.ffn) throw new Error(`decoder graph: ${what}: buffer \`${s.x}\` must have ${2 * s.ffn} columns and \`${s.out}\` ${s.ffn}`);
        break;
      case 'add':
        buf(s.x, s.cols, what, 'tokens');
        buf(s.y, s.cols, what, 'tokens');
        if (bufs.get(s.x)!.cols !== s.cols || bufs.get(s.y)!.cols !== s.cols) throw new Error(`decoder graph: ${what} adds rows of ${s.cols}: both buffers must have that many columns`);
        break;
    }
  }
  buf(graph.logits, graph.vocab, 'the logits');
}

export interface DecoderInit {
  graph: DecoderGraph;
  tensors: DecoderTensor[];
  /** The bundle's weights blob. */
  weights: ArrayBuffer;
  /** Positions the caches hold (at most the graph's context). */
  context: number;
  /** The fixed kernels' module bytes (decoder-kernels.wat assembled). */
  fixed: Uint8Array<ArrayBuffer>;
  /** A shared memory (for threaded kernels). */
  shared: boolean;
}

/**
 * A decoder graph on one Wasm memory: `create` lays it out and instantiates
 * the fixed kernels; `setKernels` names where the tuned products come from
 * (the kernel machinery, once a session is open on `memory`); `feed` runs
 * tokens.
 */
export class GraphDecoder {
  readonly graph: DecoderGraph;
  readonly memory: WebAssembly.Memory;
  readonly layout: DecoderLayout;
  /** Positions the caches hold. */
  readonly context: number;
  private fixed: Fixed;
  private parts = new Map<string, Record<string, number>>();
  private rowsOf: Map<string, 'tokens' | 'one'>;
  private kernelsOf: KernelSource | null = null;
  /** The products' kernels of each bucket, made on its first run. */
  private buckets = new Map<number, Promise<ProductKernel[]>>();
  /** Per bucket, each step's kernel (matmul steps) by step index. */
  private ready = new Map<number, ProductKernel[]>();
  /** Each distinct product's kernel (the head's is in every bucket). */
  private made = new Map<string, Promise<ProductKernel>>();
  private ropeFilled = 0;
  private guard: RunGuard | null = null;
  /** Per bucket, its distinct kernels (what a guarded run names). */
  private distinct = new Map<number, ProductKernel[]>();
  private i32: Int32Array<ArrayBuffer | SharedArrayBuffer>;
  private f32: Float32Array<ArrayBuffer | SharedArrayBuffer>;
  private pos = 0;

  private constructor(graph: DecoderGraph, memory: WebAssembly.Memory, layout: DecoderLayout, context: number, fixed: Fixed, tensors: DecoderTensor[]) {
    this.graph = graph;
    this.memory = memory;
    this.layout = layout;
    this.context = context;
    this.fixed = fixed;
    this.rowsOf = new Map(graph.buffers.map((b) => [b.name, b.rows]));
    for (const t of tensors) {
      const at: Record<string, number> = {};
      for (const [p, part] of Object.entries(t.parts)) at[p] = layout.weights + part.offset;
      this.parts.set(t.name, at);
    }
    this.i32 = new Int32Array(memory.buffer);
    this.f32 = new Float32Array(memory.buffer);
  }

  /** Checks the graph, lays it out in a new memory with the weights copied in, and instantiates the fixed kernels. */
  static async create(init: DecoderInit): Promise<GraphDecoder> {
    const { graph, tensors, weights, context } = init;
    checkGraph(graph, tensors, weights.byteLength);
    if (!Number.isInteger(context) || context < 1 || context > graph.context)
      throw new RangeError(`context ${context} must be an integer from 1 to the model's ${graph.context}`);
    const layout = layoutOf(graph, weights.byteLength, context);
    const pages = Math.ceil(layout.bytes / PAGE);
    if (pages > 65536) throw new RangeError(`the model needs ${Math.ceil(layout.bytes / 2 ** 20)} MiB of Wasm memory with a context of ${context}: more than 4 GiB`);
    let memory: WebAssembly.Memory;
    try {
      memory = new WebAssembly.Memory({ initial: pages, maximum: 65536, ...(init.shared ? { shared: true } : {}) });
    } catch (e) {
      throw new RangeError(`a Wasm memory of ${Math.ceil(layout.bytes / 2 ** 20)} MiB (context ${context}) could not be made: ${(e as Error).message}; load with a smaller context`);
    }
    new Uint8Array(memory.buffer, layout.weights, weights.byteLength).set(new Uint8Array(weights));
    const mod = await WebAssembly.instantiate(init.shared ? sharedImport(init.fixed) : init.fixed, { env: { memory } });
    const ex = mod.instance.exports as Record<string, unknown>;
    for (const name of FIXED) if (typeof ex[name] !== 'function') throw new Error(`decoder-kernels.wat has no export \`${name}\``);
    return new GraphDecoder(graph, memory, layout, context, ex as unknown as Fixed, tensors);
  }

  /**
   * Where the tuned products come from (before the first `feed`), and
   * optionally what every run goes through (`Webtune`'s plan guard: a run
   * of bucket `m` is one call of kind `m` over that bucket's kernels).
   */
  setKernels(source: KernelSource, guard?: RunGuard): void {
    this.kernelsOf = source;
    this.guard = guard ?? null;
  }

  /** Positions in the caches so far. */
  get position(): number {
    return this.pos;
  }

  /** Forgets the caches' contents: the next run starts at position 0. */
  reset(): void {
    this.pos = 0;
  }

  /** Makes the kernels of bucket `m` (every product a run in it calls), once; resolves with each step's. */
  kernels(m: number): Promise<ProductKernel[]> {
    let p = this.buckets.get(m);
    if (!p) {
      const source = this.kernelsOf;
      if (!source) return Promise.reject(new Error('GraphDecoder: no kernel source (setKernels) before the first run'));
      p = (async () => {
        const list = productsOf(this.graph, m);
        const made = await Promise.all(list.map((x) => {
          const key = `${x.op}/${x.shape.join(',')}`;
          let k = this.made.get(key);
          if (!k) {
            k = source(x.op, x.shape);
            this.made.set(key, k);
            k.catch(() => this.made.delete(key));
          }
          return k;
        }));
        const map = new Map(list.map((x, i) => [`${x.op}/${x.shape.join(',')}`, made[i]]));
        const perStep = this.graph.steps.map((s) => (s.step === 'matmul' ? map.get(`${s.kernel}/${s.last ? 1 : m},${s.k},${s.n}`)! : (undefined as never)));
        this.ready.set(m, perStep);
        return perStep;
      })();
      this.buckets.set(m, p);
      p.catch(() => this.buckets.delete(m));
    }
    return p;
  }

  /** Checks a run of `tokens` would fit: ids in the vocabulary and positions in the context. Throws one line. */
  check(tokens: ArrayLike<number>): void {
    if (!tokens.length) throw new RangeError('no tokens to feed');
    if (this.pos + tokens.length > this.context)
      throw new RangeError(`${this.pos} positions used and ${tokens.length} more tokens: past the context of ${this.context}`);
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= this.graph.vocab) throw new RangeError(`token id ${t} is outside the vocabulary of ${this.graph.vocab}`);
    }
  }

  /**
   * Feeds `tokens` at the next positions (in chunks of the largest bucket;
   * each chunk's kernels are fetched on the bucket's first use) and returns
   * a view of the logits after the last one (valid until the next run or a
   * memory growth: copy it to keep it).
   */
  async feed(tokens: ArrayLike<number>): Promise<Float32Array> {
    this.check(tokens);
    const max = this.layout.maxRows;
    for (let at = 0; at < tokens.length; at += max) {
      const chunk = Array.prototype.slice.call(tokens, at, at + max) as number[];
      const m = bucketOf(this.graph, chunk.length)!;
      const ks = this.ready.get(m) ?? (await this.kernels(m));
      this.guarded(m, ks, () => this.run(chunk, m, ks));
    }
    return this.logits();
  }

  /**
   * Runs the model once on a run that uses bucket `m`'s kernels (`m` tokens,
   * or as many as the context holds), for timing only: the tokens are
   * arbitrary, the run starts at the current position (or as late as the
   * context allows, the cache rows it overwrites saved and put back), and
   * the position is left as it was, so the caches read as before (the
   * logits buffer does not).
   */
  async trialRun(m: number): Promise<void> {
    const ks = this.ready.get(m) ?? (await this.kernels(m));
    const t = Math.min(m, this.context);
    const pos = this.pos, at = Math.min(pos, this.context - t);
    this.views();
    const saved = this.graph.caches.map((c) => {
      const row = this.cache(c.name) / 4;
      return { at: row + at * c.cols, rows: this.f32.slice(row + at * c.cols, row + pos * c.cols) };
    });
    this.pos = at;
    try {
      const ids = Array.from({ length: t }, (_, i) => (i * 7919 + 1) % this.graph.vocab);
      this.guarded(m, ks, () => this.run(ids, m, ks));
    } finally {
      this.pos = pos;
      this.views();
      for (const s of saved) this.f32.set(s.rows, s.at);
    }
  }

  /** Buckets run before whose next run the guard would judge (their kernels changed since it last did). */
  dueBuckets(): number[] {
    const g = this.guard;
    if (!g?.due) return [];
    return [...this.distinct].filter(([m, ks]) => g.due!(String(m), ks)).map(([m]) => m);
  }

  /** A run of bucket `m` through the guard, if any. */
  private guarded(m: number, ks: ProductKernel[], run: () => void): void {
    if (!this.guard) return run();
    let d = this.distinct.get(m);
    if (!d) this.distinct.set(m, (d = [...new Set(ks.filter((k) => k !== undefined))]));
    this.guard.call(String(m), d, run);
  }

  /** The last run's logits (a view of the memory). */
  logits(): Float32Array {
    this.views();
    const at = this.layout.buffers.get(this.graph.logits)!;
    return this.f32.subarray(at / 4, at / 4 + this.graph.vocab);
  }

  /** Bytes of Wasm memory in use. */
  get memoryBytes(): number {
    return this.memory.buffer.byteLength;
  }

  private views(): void {
    if (this.f32.buffer !== this.memory.buffer || this.f32.length * 4 !== this.memory.buffer.byteLength) {
      // A kernel binding grew the memory since the last run.
      this.i32 = new Int32Array(this.memory.buffer);
      this.f32 = new Float32Array(this.memory.buffer);
    }
  }

  /** The rotary table up to position `end`, filled as positions are first used. */
  private fillRope(end: number): void {
    if (end <= this.ropeFilled) return;
    const { headDim: d, theta, rope } = this.layout;
    const half = d / 2;
    for (let p = this.ropeFilled; p < end; p++) {
      const row = rope / 4 + p * d;
      for (let i = 0; i < half; i++) {
        const angle = p * Math.pow(theta, (-2 * i) / d);
        this.f32[row + 2 * i] = Math.cos(angle);
        this.f32[row + 2 * i + 1] = Math.sin(angle);
      }
    }
    this.ropeFilled = end;
  }

  private part(tensor: string, part: string): number {
    return this.parts.get(tensor)![part];
  }

  private buf(name: string): number {
    return this.layout.buffers.get(name)!;
  }

  private cache(name: string): number {
    return this.layout.caches.get(name)!;
  }

  /** One run of at most the largest bucket's tokens, synchronous (no kernel swaps mid-run). */
  private run(tokens: number[], m: number, kernels: ProductKernel[]): void {
    this.views();
    const t = tokens.length, pos0 = this.pos, f = this.fixed, L = this.layout, g = this.graph;
    this.fillRope(pos0 + t);
    this.i32.set(tokens, L.ids / 4);
    const steps = g.steps;
    for (let i = 0; i < steps.length; i++) {
      const s = steps[i];
      switch (s.step) {
        case 'embed': {
          const w = this.part(s.table, 'w'), out = this.buf(s.out), h = g.hidden;
          if (s.format === 'q8_0') f.embed_q8(L.ids, t, w, this.part(s.table, 'd'), h, out);
          else if (s.format === 'q4_1') f.embed_q4(L.ids, t, w, this.part(s.table, 'd'), this.part(s.table, 'm'), 1, h, out);
          else if (s.format === 'q4_0') f.embed_q4(L.ids, t, w, this.part(s.table, 'd'), 0, 0, h, out);
          else f.embed_f32(L.ids, t, w, g.vocab, h, out);
          break;
        }
        case 'rms_norm': {
          const h = g.hidden;
          const x = this.buf(s.x) + (s.last ? (t - 1) * h * 4 : 0);
          f.rmsnorm(x, this.part(s.weight, 'w'), this.buf(s.out), s.last ? 1 : t, h, s.eps);
          break;
        }
        case 'matmul': {
          const k = kernels[i];
          if (!k) throw new Error(`no kernel was loaded for ${s.kernel} ${s.last ? 1 : m},${s.k},${s.n}`);
          // `last`: the last real row of a buffer of token rows; a one-row buffer's row.
          const a = this.buf(s.a) + (s.last && this.rowsOf.get(s.a) === 'tokens' ? (t - 1) * s.k * 4 : 0);
          const w = this.part(s.weight, 'w'), out = this.buf(s.out);
          if (s.format === 'f32') k.run(a, w, out);
          else if (s.format === 'q4_1') k.run(a, w, this.part(s.weight, 'd'), this.part(s.weight, 'm'), out);
          else k.run(a, w, this.part(s.weight, 'd'), out);
          break;
        }
        case 'rope':
          f.rope(this.buf(s.x), t, s.stride, s.heads, s.head_dim, L.rope, pos0);
          break;
        case 'kv_store':
          f.kv_store(this.buf(s.x), t, s.stride, s.k_col, s.v_col, s.width, this.cache(s.k_cache), this.cache(s.v_cache), pos0);
          break;
        case 'attention':
          f.attention(this.buf(s.x), t, s.stride, s.heads, s.kv_heads, s.head_dim, this.cache(s.k_cache), this.cache(s.v_cache), pos0, s.scale, this.buf(s.out), L.scores);
          break;
        case 'swi_glu':
          f.swiglu(this.buf(s.x), t, s.ffn, this.buf(s.out));
          break;
        case 'add':
          f.add(this.buf(s.x), this.buf(s.y), t * s.cols);
          break;
      }
    }
    this.pos += t;
  }
}
