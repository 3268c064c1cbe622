// The WebGPU backend of a decoder graph (models/src/graph.rs, served as JSON
// at `GET /v1/models/{name}/graph`): the same steps as the Wasm backend
// (decoder.ts), every matrix product a tuned WGSL kernel of its op and shape
// (fetched and swapped through the Webtune session, as SentenceEncoder's
// WebGPU path does), every other step a fixed kernel of
// decoder-kernels.wgsl, and the next token sampled on the GPU, so that a
// decode step is one command buffer, one submit and a read-back of one
// token id.
//
// GPU memory, laid out once at `create`:
//   weights   every part of every tensor (the bundle's blob) at an offset
//             aligned to 256 bytes (WebGPU's largest
//             minStorageBufferOffsetAlignment), so that each part binds as
//             its own range; more than one buffer only past maxBufferSize
//   buffers   one GPUBuffer per graph buffer (a dispatch may not read one
//             range of a buffer while writing another): `cols` f32 per row,
//             the largest bucket's rows (`tokens`) or one row (`one`)
//   caches    one GPUBuffer per cache: `context` positions of `cols` f32
//   rope      the rotary table for every position of the context: per
//             position head_dim/2 pairs (cos, sin) of pos·θ^(−2i/head_dim),
//             computed in f64 and rounded to f32 (decoder.ts's rule)
//   params    the fixed steps' parameters (one 256-byte slot a step) and
//             the run's (real rows, first position, sampling), written once
//             per run; the token ids; the sampled token
// Per row bucket (made on its first run) every dispatch's bind group is
// made once; the tuned kernels' bind groups use their op's shared layout
// (webgpu.ts), so they stay valid when tuning swaps a kernel. A run records
// every step's dispatch into one compute pass (an add and the norm after it,
// and a rope and the cache store after it, as one dispatch each: `fusions`) (the products at M = the
// bucket, or one row with `last`; the fixed kernels on a grid of the
// bucket's rows that skips rows past T, read from the run's parameters), so
// the caches hold real positions only and no kernel depends on the
// context's length. A prompt longer than the largest bucket is fed in
// chunks of it, one submit each.
//
// The decode step (bucket 1) runs the graph's fused runs (`graph.fused`:
// an RMSNorm and the product after it, a product and its SwiGLU, a product
// and the add of its output) as one tuned product each, of the fused op
// (`+rms_norm`, `+swiglu`, `+residual`, docs/ops.md). A `+residual`
// product reads the residual stream and writes it whole, to another
// buffer (WebGPU binds no buffer for reading and writing at once): the
// stream's buffer alternates with a twin of one row (`twins`), and every
// later dispatch of the step binds the one that holds it. The norms' eps
// values sit in a small buffer of their own.

import { type DecoderGraph, type DecoderTensor, type Format, type Fused, type Step, MERGE_PARTS, bucketOf, checkGraph, mergedRun, productsOf } from './decoder.js';
import { compileErrors } from './webgpu.js';

declare const __WEBTUNE_DECODER_WGSL__: string;

/** Binding offsets are multiples of this: WebGPU's default, and largest allowed, minStorageBufferOffsetAlignment. */
const ALIGN = 256;
/** Threads of the element-wise fixed kernels (EW in decoder-kernels.wgsl). */
const EW = 64;
/** Attention's limits (decoder-kernels.wgsl: MAXG query heads a key/value head, head_dim ≤ 64·DPT, MAXG·hd ≤ MAXQ). */
const MAXG = 8;
const MAX_HEAD_DIM = 256;
const MAXQ = 1024;
/** What `sample` writes for "sample on the host" (decoder-kernels.wgsl). */
const NO_TOKEN = 0xffffffff;
/** Decode steps a caller may submit ahead of reading their tokens (`ahead`), with one step a submit. */
export const MAX_AHEAD = 3;
/** The most decode steps one submit may carry (`aheadMany`, GpuDecoderInit.stepsPerSubmit). */
export const MAX_STEPS_PER_SUBMIT = 4;

/** A tuned product as the backend records it (a `GpuKernel` of webtune.ts is one). */
export interface GpuProduct {
  /** The layout of the op's bind group 0 (arguments in ABI order): bind groups made with it survive swaps. */
  readonly bindGroupLayout: GPUBindGroupLayout;
  /** Dispatches `dispatch` records (2 for split-K across workgroups). */
  readonly passes: number;
  /** Records the kernel (its current pipeline: swaps apply to the next run). */
  dispatch(pass: GPUComputePassEncoder, group: GPUBindGroup): void;
}

/** Gives the kernel of a product (`op`, `[M, K, N]`); called once per product. */
export type GpuKernelSource = (op: string, shape: number[]) => Promise<GpuProduct>;

/** How the next token is picked on the GPU (sampler.ts's rule; `u` the sampler's draw, unused at temperature 0). */
export interface GpuSampling {
  temperature: number;
  topK: number;
  topP: number;
  u: number;
}

export interface GpuDecoderInit {
  device: GPUDevice;
  graph: DecoderGraph;
  tensors: DecoderTensor[];
  /** The bundle's weights blob. */
  weights: ArrayBuffer;
  /** Positions the caches hold (at most the graph's context). */
  context: number;
  /** The fixed kernels' WGSL (default: decoder-kernels.wgsl as built into webtune.js). */
  wgsl?: string;
  /** Run adjacent steps as one dispatch where `fusions` finds them, and the decode step's fused runs (`graph.fused`) as one product each. Default true. */
  fuse?: boolean;
  /**
   * With `fuse`: the decode step's attention in MERGE_PARTS parts a head,
   * merged by the product after it (`+merge`: decoder.ts's mergedRun)
   * instead of by a merge dispatch of its own. Default true.
   */
  mergeAttention?: boolean;
  /**
   * Decode steps at up to this many positions run the split attention as
   * one workgroup a key/value head walking every chunk (`attention_one`),
   * without partials or the merge: a dispatch fewer a layer. Default
   * SHORT_ATTENTION; 0 always splits.
   */
  shortAttention?: number;
  /**
   * With `mergeAttention`: decode steps past this many positions run the
   * attention's long form (longAttentionSource: chunks of 128 positions,
   * so that each of the MERGE_PARTS parts folds half the chunks), where
   * the graph has at most LONG_MAXG query heads a key/value head. Default
   * LONG_ATTENTION; 0 never.
   */
  longAttention?: number;
  /**
   * Decode steps run ahead that share one command buffer and one submit
   * (`aheadMany`; 1 to MAX_STEPS_PER_SUBMIT, default 1): each step still
   * samples on the GPU and feeds the next, and each token is read back on
   * its own, but a submit's fixed cost is paid once for all of them.
   * Tokens then arrive in groups of this many. On an H200 through Dawn in
   * Node, four a submit ran 0.99× the rate of one (BENCHMARKS.md); a
   * browser, where each submit also flushes to the GPU process, may differ.
   */
  stepsPerSubmit?: number;
}

/**
 * Where one run's time goes (`GpuDecoder.profile`, for benchmarks; needs
 * the device's `timestamp-query`). Times in ms.
 */
export interface GpuProfile {
  /** From the run's start to its submit: recording the pass on the host. */
  encodeMs: number;
  /** From the run's start until the sampled token is read back. */
  wallMs: number;
  /** The GPU's time for the run's one pass (timestamps at its start and end). */
  gpuMs: number;
  /** Each dispatch's GPU time, each in a pass of its own (a second run of the same tokens), in run order. */
  steps: { label: string; ms: number }[];
}

/** Timestamps a run writes: at each pass's start and end, into `set`, resolved into `resolve`. */
interface Timing {
  set: GPUQuerySet;
  resolve: GPUBuffer;
  read: GPUBuffer;
  perStep: boolean;
  /** Dispatches of this label are left out of the run (a profile's leave-one-out timing; the results are then wrong). */
  omit?: string;
}

/** What the backend has done, for benchmarks and the latency chart. */
export interface GpuDecoderStats {
  /** Dispatches of one decode step (bucket 1, the sampling included); 0 before the first. */
  dispatchesPerToken: number;
  /** Runs (one submit each) and tokens fed so far. */
  submits: number;
  tokens: number;
  /** Tokens the GPU could not sample (the host sampled from the read-back logits). */
  hostSampled: number;
}

type FixedName = 'embed_q8' | 'embed_q4' | 'embed_f32' | 'rms_norm' | 'rope' | 'kv_store' | 'attention' | 'swiglu' | 'add' | 'sample' | 'add_rms_norm' | 'rope_kv'
  | 'attention_split' | 'attention_merge' | 'attention_rope' | 'attention_one' | 'attention_rope_one' | 'attention_parts' | 'attention_rope_parts';
const FIXED: FixedName[] = ['embed_q8', 'embed_q4', 'embed_f32', 'rms_norm', 'rope', 'kv_store', 'attention', 'swiglu', 'add', 'sample', 'add_rms_norm', 'rope_kv',
  'attention_split', 'attention_merge', 'attention_rope', 'attention_one', 'attention_rope_one', 'attention_parts', 'attention_rope_parts'];
/** Positions of a chunk of the decode step's split attention (SCH in decoder-kernels.wgsl). */
const SCH = 64;
/**
 * Positions up to which a decode step's attention is one dispatch (GpuDecoderInit.shortAttention):
 * one chunk, the split kernel's own work without partials or the merge. Walking more chunks in one
 * workgroup cost more than it saved: on an H200 through Dawn at 128 positions (two chunks), the
 * step's GPU pass took 1.38 ms against 1.18 ms split, while the host recorded it in 0.85 of the time.
 */
const SHORT_ATTENTION = SCH;
/**
 * Positions past which a decode step's attention in parts takes the long form
 * (GpuDecoderInit.longAttention): where the parts of SCH positions start to fold a second
 * chunk each. On an H200 through Dawn the attention's dispatch cost 14.1 µs at 1,024
 * positions against 9.9 µs at 128 (BENCHMARKS.md), the parts walking two chunks one after
 * the other.
 */
const LONG_ATTENTION = MERGE_PARTS * SCH;
/** The most query heads a key/value head of the long form (its MAXG). */
const LONG_MAXG = 4;

/**
 * decoder-kernels.wgsl's attention in its long form: chunks of 128 positions (SCH),
 * two threads a position's key (KP), eight of its vectors and sixteen values loaded at once
 * (KB, VB), at most LONG_MAXG heads a group (MAXG), so that the chunk's scores still fit
 * its workgroup memory. Throws where the source lacks one of the lines it replaces.
 */
export function longAttentionSource(wgsl: string): string {
  const lines: [string, string][] = [
    ['const SCH: u32 = 64u;', 'const SCH: u32 = 128u;'],
    ['const KP: u32 = 4u;', 'const KP: u32 = 2u;'],
    ['const KB: u32 = 4u;', 'const KB: u32 = 8u;'],
    ['const VB: u32 = 8u;', 'const VB: u32 = 16u;'],
    ['const MAXG: u32 = 8u;', `const MAXG: u32 = ${LONG_MAXG}u;`],
  ];
  let out = wgsl;
  for (const [from, to] of lines) {
    if (out.split(from).length !== 2) throw new Error(`longAttentionSource: the kernels' source must hold the line '${from}' once`);
    out = out.replace(from, to);
  }
  return out;
}

/**
 * Steps that run as one dispatch, by the index of the first of two: an
 * `add` and the `rms_norm` of the same buffer after it (`add_rms_norm`);
 * a `rope` and the `kv_store` of the same rows after it, the keys inside
 * the turned heads and the values outside them (`rope_kv`). The fused
 * kernels do the two steps' arithmetic.
 */
export function fusions(graph: DecoderGraph): Map<number, 'add_rms_norm' | 'rope_kv'> {
  const out = new Map<number, 'add_rms_norm' | 'rope_kv'>();
  const st = graph.steps;
  for (let i = 0; i + 1 < st.length; i++) {
    const s = st[i], n = st[i + 1];
    if (s.step === 'add' && n.step === 'rms_norm' && n.x === s.x && s.cols === graph.hidden && n.out !== s.x && n.out !== s.y) {
      out.set(i, 'add_rms_norm');
      i++;
    } else if (s.step === 'rope' && n.step === 'kv_store' && n.x === s.x && n.stride === s.stride && n.k_col % 2 === 0 && n.width % 2 === 0 &&
      n.k_col + n.width <= s.heads * s.head_dim && n.v_col >= s.heads * s.head_dim) {
      out.set(i, 'rope_kv');
      i++;
    }
  }
  return out;
}

/** The steps of a fused run (`graph.fused`), by the part each plays. */
export interface FusedRun {
  norm?: Extract<Step, { step: 'rms_norm' }>;
  product: Extract<Step, { step: 'matmul' }>;
  glu?: Extract<Step, { step: 'swi_glu' }>;
  add?: Extract<Step, { step: 'add' }>;
}

/**
 * The steps of fused run `f` of `graph`, checked against its op's
 * suffixes (docs/ops.md's order: `+rms_norm`, `+swiglu`, `+residual`):
 * the norm writes what the product reads, on the same rows; the SwiGLU
 * reads the product's output of twice its columns; the add adds the last
 * output into another buffer; `k` and `n` are the product's. Throws one line.
 */
export function fusedRun(graph: DecoderGraph, f: Fused): FusedRun {
  const what = `decoder graph fused run at step ${f.first} (${f.kernel})`;
  const [base, ...suffixes] = f.kernel.split('+');
  const known = ['rms_norm', 'swiglu', 'residual'];
  if (suffixes.some((x, i) => !known.includes(x) || (i > 0 && known.indexOf(x) <= known.indexOf(suffixes[i - 1]))) || !suffixes.length)
    throw new Error(`${what}: a fused op is a product with +rms_norm, +swiglu and +residual, in that order`);
  const steps = graph.steps.slice(f.first, f.first + f.steps);
  let at = 0;
  const take = <K extends Step['step']>(kind: K): Extract<Step, { step: K }> => {
    const s = steps[at++];
    if (s?.step !== kind) throw new Error(`${what}: step ${f.first + at - 1} is ${s?.step ?? 'missing'}, the op needs ${kind}`);
    return s as Extract<Step, { step: K }>;
  };
  const norm = suffixes.includes('rms_norm') ? take('rms_norm') : undefined;
  const product = take('matmul');
  const glu = suffixes.includes('swiglu') ? take('swi_glu') : undefined;
  const add = suffixes.includes('residual') ? take('add') : undefined;
  const out = glu?.out ?? product.out;
  const cols = glu ? glu.ffn : product.n;
  const bad = at !== f.steps || product.kernel !== base || f.k !== product.k || f.n !== cols || (product.format === 'f32' && (norm || glu)) ||
    (norm && (norm.out !== product.a || norm.last !== product.last)) || (glu && (glu.x !== product.out || 2 * glu.ffn !== product.n || product.last)) ||
    (add && (add.y !== out || add.cols !== cols || add.x === out || product.last));
  if (bad) throw new Error(`${what}: its ${f.steps} steps do not compute that op (docs/ops.md)`);
  return { norm, product, glu, add };
}

/** A binding range. */
interface Range {
  buffer: GPUBuffer;
  offset?: number;
  size?: number;
}

/** One recorded dispatch: a tuned product, or a fixed kernel on its grid; `perT` for a product reading the last of T token rows. */
type Dispatch = { label: string } & (
  | { kernel: GpuProduct; group: GPUBindGroup; perT?: (t: number) => GPUBindGroup }
  | {
    pipeline: GPUComputePipeline; group: GPUBindGroup; grid: [number, number]; gridAt?: (pos0: number) => [number, number];
    /** In a run that ends at position `upTo` or before: this dispatch instead (the short attention). */
    short?: { upTo: number; label: string; pipeline: GPUComputePipeline; group: GPUBindGroup; grid: [number, number] };
    /** In a run that ends past position `from`: this dispatch instead (the long attention). */
    long?: { from: number; label: string; pipeline: GPUComputePipeline; group: GPUBindGroup; grid: [number, number] };
    /** In a run that ends at this position or before: skipped (the merge of a short attention). */
    skipUpTo?: number;
  });
type FixedDispatch = Exclude<Dispatch, { kernel: GpuProduct }>;
/** The attention in parts' pipelines in the long form (longAttentionSource). */
type LongPipelines = Partial<Record<'attention_parts' | 'attention_rope_parts', GPUComputePipeline>>;

/**
 * GpuDecoderInit.longAttention, checked: the positions past which the attention in parts takes
 * the long form, 0 where it never does (set so, no merge, or a group of more than LONG_MAXG heads).
 */
function longAttentionOf(init: GpuDecoderInit): number {
  const from = init.longAttention ?? LONG_ATTENTION;
  if (!Number.isInteger(from) || from < 0) throw new RangeError(`longAttention ${from}: a count of positions, 0 or more`);
  const groups = init.graph.steps.flatMap((x) => (x.step === 'attention' ? [x.heads / x.kv_heads] : []));
  return (init.mergeAttention ?? true) && (init.fuse ?? true) && groups.every((g) => g <= LONG_MAXG) ? from : 0;
}

/** GpuDecoderInit.stepsPerSubmit, checked. */
function stepsPerSubmitOf(init: GpuDecoderInit): number {
  const k = init.stepsPerSubmit ?? 1;
  if (!Number.isInteger(k) || k < 1 || k > MAX_STEPS_PER_SUBMIT) throw new RangeError(`stepsPerSubmit ${k}: 1 to ${MAX_STEPS_PER_SUBMIT}`);
  return k;
}

/** Decode steps held submitted and unread: MAX_AHEAD, or two submits of `k` steps (one running while the next is recorded). */
function aheadDepth(k: number): number {
  return k > 1 ? Math.max(MAX_AHEAD, 2 * k) : MAX_AHEAD;
}

/** What fixed dispatch `st` records in a run that ends at position `end` (`short`'s or `long`'s form, or null where skipped). */
function formAt(st: FixedDispatch, end: number): { label: string; pipeline: GPUComputePipeline; group: GPUBindGroup; grid: [number, number] } | null {
  if (st.skipUpTo !== undefined && end <= st.skipUpTo) return null;
  if (st.long && end > st.long.from) return st.long;
  return st.short && end <= st.short.upTo ? st.short : st;
}

interface Bucket {
  m: number;
  steps: Dispatch[];
}

/** merge_offsets of decoder-kernels.wgsl: where PM and PL start in the partials, in floats (each on a 256-byte boundary). */
function mergeOffsets(heads: number, hd: number): [number, number] {
  const pm0 = Math.ceil((heads * MERGE_PARTS * hd) / 64) * 64;
  return [pm0, pm0 + Math.ceil((heads * MERGE_PARTS) / 64) * 64];
}

/** Bytes of the partials in the +merge layout. */
function mergeBytes(heads: number, hd: number): number {
  return (mergeOffsets(heads, hd)[1] + heads * MERGE_PARTS) * 4;
}

/** Bytes of a part (decoder.ts's rule), rounded up to whole words. */
function partBytes(format: Format, part: string, n: number, k: number): number {
  if (k === 0) return n * 4;
  switch (format) {
    case 'f32': return n * k * 4;
    case 'q8_0': return part === 'w' ? n * k : (n * k) / 8;
    default: return part === 'w' ? (n * k) / 2 : (n * k) / 8;
  }
}

/** The parts each format stores, in the op's argument order. */
function partsOf(format: Format): string[] {
  return format === 'q4_1' ? ['w', 'd', 'm'] : format === 'f32' ? ['w'] : ['w', 'd'];
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

/**
 * Checks what the WebGPU backend needs beyond `checkGraph`: a dispatch never
 * writes a buffer it also reads from another binding, attention's group and
 * head sizes fit its kernel, and a product reading the last of a run's token
 * rows reads it at a bindable offset. Throws one line.
 */
export function checkGpuGraph(graph: DecoderGraph): void {
  const bufs = new Map(graph.buffers.map((b) => [b.name, b]));
  for (const [i, s] of graph.steps.entries()) {
    const what = `decoder graph step ${i} (${s.step})`;
    const apart = (a: string, b: string) => {
      if (a === b) throw new Error(`${what} reads and writes buffer \`${a}\`: the WebGPU backend needs separate buffers`);
    };
    switch (s.step) {
      case 'rms_norm': apart(s.x, s.out); break;
      case 'matmul':
        apart(s.a, s.out);
        if (s.last && bufs.get(s.a)?.rows === 'tokens' && (s.k * 4) % ALIGN)
          throw new Error(`${what} reads the last token row of \`${s.a}\` (rows of ${s.k} floats): the WebGPU backend binds it at an offset, which must be a multiple of ${ALIGN} bytes`);
        break;
      case 'attention':
        apart(s.x, s.out);
        if (s.heads / s.kv_heads > MAXG || s.head_dim > MAX_HEAD_DIM || (s.heads / s.kv_heads) * s.head_dim > MAXQ || s.head_dim % 4)
          throw new Error(`${what}: ${s.heads / s.kv_heads} query heads of ${s.head_dim} per key/value head; the WebGPU attention kernel takes up to ${MAXG} heads of up to ${MAX_HEAD_DIM}, a multiple of 4, ${MAXQ} floats in all`);
        break;
      case 'swi_glu': apart(s.x, s.out); break;
      case 'add': apart(s.x, s.y); break;
      default: break;
    }
  }
  let end = 0;
  for (const f of graph.fused ?? []) {
    if (!(Number.isInteger(f.first) && Number.isInteger(f.steps) && f.first >= end && f.steps > 0 && f.first + f.steps <= graph.steps.length))
      throw new Error(`decoder graph fused run at step ${f.first}: runs must be in order, apart, and inside the ${graph.steps.length} steps`);
    end = f.first + f.steps;
    const r = fusedRun(graph, f);
    const a = r.norm?.x ?? r.product.a;
    if (r.product.last && bufs.get(a)?.rows === 'tokens' && (r.product.k * 4) % ALIGN)
      throw new Error(`decoder graph fused run at step ${f.first} reads the last token row of \`${a}\` (rows of ${r.product.k} floats): the WebGPU backend binds it at an offset, which must be a multiple of ${ALIGN} bytes`);
  }
}

/** The rotary table of `context` positions (decoder.ts's values: f64, rounded to f32). */
export function ropeTable(context: number, headDim: number, theta: number): Float32Array<ArrayBuffer> {
  const t = new Float32Array(context * headDim), half = headDim / 2;
  for (let p = 0; p < context; p++)
    for (let i = 0; i < half; i++) {
      const angle = p * Math.pow(theta, (-2 * i) / headDim);
      t[p * headDim + 2 * i] = Math.cos(angle);
      t[p * headDim + 2 * i + 1] = Math.sin(angle);
    }
  return t;
}

/**
 * A decoder graph on a GPUDevice: `create` uploads the weights and builds
 * the fixed pipelines; `setKernels` names where the tuned products come
 * from; `feed` runs tokens and reads the logits back, `next` runs them and
 * samples the next token on the GPU.
 */
export class GpuDecoder {
  readonly graph: DecoderGraph;
  readonly device: GPUDevice;
  /** Positions the caches hold. */
  readonly context: number;
  /** The largest bucket: a run's most tokens. */
  readonly maxRows: number;
  readonly stats: GpuDecoderStats = { dispatchesPerToken: 0, submits: 0, tokens: 0, hostSampled: 0 };
  private kernelsOf: GpuKernelSource | null = null;
  private buckets = new Map<number, Promise<Bucket>>();
  private ready = new Map<number, Bucket>();
  private made = new Map<string, Promise<GpuProduct>>();
  private pos = 0;
  private lost: string | null = null;
  private closed = false;
  private runHost = new ArrayBuffer(32);
  /** The token read-back ring's next buffer, and the reads in flight (in order). */
  private readSlot = 0;
  private reading: Promise<void> = Promise.resolve();
  /** Decode steps at up to this many positions run the attention as one dispatch (GpuDecoderInit.shortAttention). */
  private shortUpTo: number;
  /** GpuDecoderInit.longAttention, checked (0 where the graph's groups are too large for the long form). */
  private longFrom: number;
  /** GpuDecoderInit.mergeAttention. */
  private mergeAttention: boolean;
  /** GpuDecoderInit.stepsPerSubmit. */
  readonly stepsPerSubmit: number;

  private constructor(
    init: GpuDecoderInit,
    private pipelines: Record<FixedName, GPUComputePipeline>,
    /** The attention in parts' long form (GpuDecoderInit.longAttention), where made. */
    private longPipelines: LongPipelines,
    private owned: GPUBuffer[],
    private parts: Map<string, Record<string, Range>>,
    private buffers: Map<string, GPUBuffer>,
    private caches: Map<string, GPUBuffer>,
    private rope: GPUBuffer,
    private stepParams: GPUBuffer,
    private stepSlot: Map<number, number>,
    private fused: Map<number, 'add_rms_norm' | 'rope_kv'>,
    private runParams: GPUBuffer,
    private ids: GPUBuffer,
    private token: GPUBuffer,
    /** Where sampled tokens are read back: a ring, so that runs submitted ahead each have their own. */
    private tokenReads: GPUBuffer[],
    private logitsRead: GPUBuffer,
    private partials: GPUBuffer,
    /** One run's parameters a step of `aheadMany`, ALIGN bytes apart, copied into runParams before each step. */
    private runRing: GPUBuffer,
    /** The decode step's fused runs by their first step, the residual stream's twins, the norms' eps bindings. */
    private runs: { at: Map<number, { f: Fused; r: FusedRun }>; twins: Map<string, GPUBuffer>; eps: Map<number, Range> },
  ) {
    this.graph = init.graph;
    this.device = init.device;
    this.context = init.context;
    this.maxRows = Math.max(1, ...init.graph.buckets);
    const short = init.shortAttention ?? SHORT_ATTENTION;
    if (!Number.isInteger(short) || short < 0) throw new RangeError(`shortAttention ${short}: a count of positions, 0 or more`);
    this.shortUpTo = short;
    this.longFrom = longAttentionOf(init);
    this.mergeAttention = init.mergeAttention ?? true;
    // Checked by create before it allocates anything.
    this.stepsPerSubmit = stepsPerSubmitOf(init);
    void init.device.lost.then((info) => {
      this.lost = info.message || info.reason || 'lost';
    });
  }

  /** Checks the graph, uploads the weights, the rotary table and the steps' parameters, and builds the fixed pipelines. */
  static async create(init: GpuDecoderInit): Promise<GpuDecoder> {
    const { device, graph, tensors, weights, context } = init;
    checkGraph(graph, tensors, weights.byteLength);
    checkGpuGraph(graph);
    if (!Number.isInteger(context) || context < 1 || context > graph.context)
      throw new RangeError(`context ${context} must be an integer from 1 to the model's ${graph.context}`);
    const stepsPerSubmit = stepsPerSubmitOf(init);
    const longFrom = longAttentionOf(init);
    const limits = device.limits;
    const maxRows = Math.max(1, ...graph.buckets);
    // Every part the graph reads, placed at ALIGN in buffers of at most maxBufferSize.
    const used = new Set<string>();
    for (const s of graph.steps) {
      if (s.step === 'embed') used.add(s.table);
      if (s.step === 'rms_norm' || s.step === 'matmul') used.add(s.weight);
    }
    const places: { tensor: string; part: string; src: number; bytes: number; buffer: number; offset: number }[] = [];
    const sizes = [0];
    for (const t of tensors) {
      if (!used.has(t.name)) continue;
      for (const p of partsOf(t.format)) {
        const part = t.parts[p];
        const bytes = Math.ceil(part.bytes / 4) * 4;
        if (part.offset + bytes > weights.byteLength) throw new Error(`tensor \`${t.name}\` part \`${p}\` is not a whole number of 4-byte words at the blob's end`);
        if (bytes > limits.maxStorageBufferBindingSize)
          throw new Error(`tensor \`${t.name}\` part \`${p}\` is ${bytes} bytes, above this device's maxStorageBufferBindingSize (${limits.maxStorageBufferBindingSize})`);
        let offset = Math.ceil(sizes[sizes.length - 1] / ALIGN) * ALIGN;
        if (offset + bytes > limits.maxBufferSize) {
          sizes.push(0);
          offset = 0;
        }
        places.push({ tensor: t.name, part: p, src: part.offset, bytes, buffer: sizes.length - 1, offset });
        sizes[sizes.length - 1] = offset + bytes;
      }
    }
    const tooBig = [...graph.buffers.map((b) => ({ name: b.name, bytes: (b.rows === 'tokens' ? maxRows : 1) * b.cols * 4 })),
      ...graph.caches.map((c) => ({ name: c.name, bytes: context * c.cols * 4 }))].find((b) => b.bytes > limits.maxStorageBufferBindingSize);
    if (tooBig) throw new RangeError(`buffer \`${tooBig.name}\` needs ${tooBig.bytes} bytes, above this device's maxStorageBufferBindingSize (${limits.maxStorageBufferBindingSize}); load with a smaller context`);
    const rope = graph.steps.find((s) => s.step === 'rope') as Extract<Step, { step: 'rope' }> | undefined;
    const headDim = rope?.head_dim ?? 4, theta = rope?.theta ?? 10000;

    return scoped(device, 'the language model on WebGPU', async () => {
      const owned: GPUBuffer[] = [];
      const buffer = (label: string, size: number, usage: number) => {
        const b = device.createBuffer({ label: `decoder ${label}`, size: Math.max(16, Math.ceil(size / 16) * 16), usage });
        owned.push(b);
        return b;
      };
      const S = GPUBufferUsage.STORAGE;
      const weightBufs = sizes.map((size, i) => buffer(`weights ${i}`, size, S | GPUBufferUsage.COPY_DST));
      const parts = new Map<string, Record<string, Range>>();
      for (const p of places) {
        device.queue.writeBuffer(weightBufs[p.buffer], p.offset, weights, p.src, p.bytes);
        const rec = parts.get(p.tensor) ?? {};
        rec[p.part] = { buffer: weightBufs[p.buffer], offset: p.offset, size: p.bytes };
        parts.set(p.tensor, rec);
      }
      const buffers = new Map(graph.buffers.map((b) => [b.name, buffer(b.name, (b.rows === 'tokens' ? maxRows : 1) * b.cols * 4, S | GPUBufferUsage.COPY_SRC)]));
      const caches = new Map(graph.caches.map((c) => [c.name, buffer(c.name, context * c.cols * 4, S)]));
      const ropeBuf = buffer('rope', context * headDim * 4, S | GPUBufferUsage.COPY_DST);
      device.queue.writeBuffer(ropeBuf, 0, ropeTable(context, headDim, theta));
      // The fixed steps' parameters (the Step struct of decoder-kernels.wgsl), a slot each.
      const slots = new Map<number, number>();
      const fixedSteps = graph.steps.map((s, i) => [s, i] as const).filter(([s]) => s.step !== 'matmul');
      const host = new ArrayBuffer((fixedSteps.length + 1) * ALIGN);
      const put = (slot: number, n: number[], f: number[] = []) => {
        const u = new Uint32Array(host, slot * ALIGN, 8), fl = new Float32Array(host, slot * ALIGN, 8);
        u.set(n);
        f.forEach((v, j) => (fl[6 + j] = v));
      };
      const fused = init.fuse === false ? new Map<number, 'add_rms_norm' | 'rope_kv'>() : fusions(graph);
      fixedSteps.forEach(([s, i], slot) => {
        slots.set(i, slot);
        const next = graph.steps[i + 1];
        if (fused.get(i) === 'add_rms_norm' && next.step === 'rms_norm' && s.step === 'add') {
          put(slot, [s.cols, next.last ? 1 : 0], [next.eps]);
          return;
        }
        if (fused.get(i) === 'rope_kv' && next.step === 'kv_store' && s.step === 'rope') {
          put(slot, [s.stride, s.heads, s.head_dim, next.width, next.k_col, next.v_col]);
          return;
        }
        switch (s.step) {
          case 'embed': put(slot, [graph.hidden, s.format === 'q4_1' ? 1 : s.format === 'f32' ? graph.vocab : 0]); break;
          case 'rms_norm': put(slot, [graph.hidden, s.last ? 1 : 0], [s.eps]); break;
          case 'rope': put(slot, [s.stride, s.heads, s.head_dim]); break;
          case 'kv_store': put(slot, [s.stride, s.k_col, s.v_col, s.width]); break;
          case 'attention': put(slot, [s.stride, s.heads, s.kv_heads, s.head_dim], [s.scale]); break;
          case 'swi_glu': put(slot, [s.ffn]); break;
          case 'add': put(slot, [s.cols]); break;
          default: break;
        }
      });
      // The last slot: the sampling's (the vocabulary).
      slots.set(-1, fixedSteps.length);
      put(fixedSteps.length, [graph.vocab]);
      const stepParams = buffer('step params', host.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      device.queue.writeBuffer(stepParams, 0, host);
      const runParams = buffer('run params', 32, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      const ids = buffer('ids', maxRows * 4, S | GPUBufferUsage.COPY_DST);
      const token = buffer('token', 16, S | GPUBufferUsage.COPY_SRC);
      const runRing = buffer('run params ring', MAX_STEPS_PER_SUBMIT * ALIGN, GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
      const tokenReads = Array.from({ length: aheadDepth(stepsPerSubmit) + 1 }, (_, i) => buffer(`token read ${i}`, 16, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST));
      const logitsRead = buffer('logits read', graph.vocab * 4, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
      // The decode step's fused runs: a one-row twin of each buffer a +residual product writes, and the norms' eps values (one ALIGN slot each).
      const runs = init.fuse === false ? [] : (graph.fused ?? []).map((f) => ({ f, r: fusedRun(graph, f) }));
      const twins = new Map<string, GPUBuffer>();
      for (const { r } of runs) {
        if (r.add && !twins.has(r.add.x)) twins.set(r.add.x, buffer(`${r.add.x} twin`, graph.buffers.find((b) => b.name === r.add!.x)!.cols * 4, S));
      }
      const epsValues = [...new Set(runs.flatMap(({ r }) => (r.norm ? [Math.fround(r.norm.eps)] : [])))];
      const epsBuf = buffer('eps', Math.max(1, epsValues.length) * ALIGN, S | GPUBufferUsage.COPY_DST);
      if (epsValues.length) {
        const host = new Float32Array((epsValues.length * ALIGN) / 4);
        epsValues.forEach((e, i) => (host[(i * ALIGN) / 4] = e));
        device.queue.writeBuffer(epsBuf, 0, host);
      }
      const eps = new Map(epsValues.map((e, i) => [e, { buffer: epsBuf, offset: i * ALIGN, size: 4 } as Range]));
      const fusedAt = new Map(runs.map(({ f, r }) => [f.first, { f, r }]));

      const module = device.createShaderModule({ label: 'decoder-kernels.wgsl', code: init.wgsl ?? __WEBTUNE_DECODER_WGSL__ });
      // Compiler messages only on failure (see compileErrors).
      const made: GPUComputePipeline[] = [];
      for (const entryPoint of FIXED) {
        made.push(await device.createComputePipelineAsync({ label: `decoder ${entryPoint}`, layout: 'auto', compute: { module, entryPoint } })
          .catch(async (e) => {
            throw new Error(await compileErrors(module, 'decoder-kernels.wgsl', e));
          }));
      }
      const pipelines = Object.fromEntries(FIXED.map((n, i) => [n, made[i]])) as Record<FixedName, GPUComputePipeline>;
      // The attention in parts in its long form, from the same source with the long form's constants.
      const long: LongPipelines = {};
      if (longFrom > 0) {
        const code = longAttentionSource(init.wgsl ?? __WEBTUNE_DECODER_WGSL__);
        const lm = device.createShaderModule({ label: 'decoder-kernels.wgsl (long attention)', code });
        for (const entryPoint of ['attention_parts', 'attention_rope_parts'] as const) {
          long[entryPoint] = await device.createComputePipelineAsync({ label: `decoder ${entryPoint} long`, layout: 'auto', compute: { module: lm, entryPoint } })
            .catch(async (e) => {
              throw new Error(await compileErrors(lm, 'decoder-kernels.wgsl (long attention)', e));
            });
        }
      }
      // The split attention's partials: per query head and chunk of the context, hd + 2 floats (one layer's at a time);
      // or, before a +merge product, MERGE_PARTS parts a head in its layout (mergeOffsets).
      const att = graph.steps.filter((x) => x.step === 'attention') as Extract<Step, { step: 'attention' }>[];
      const partials = buffer('attention partials', Math.max(0, ...att.map((a) => Math.max(a.heads * Math.ceil(context / SCH) * (a.head_dim + 2) * 4, mergeBytes(a.heads, a.head_dim)))), S);
      return new GpuDecoder(init, pipelines, long, owned, parts, buffers, caches, ropeBuf, stepParams, slots, fused, runParams, ids, token, tokenReads, logitsRead, partials,
        runRing, { at: fusedAt, twins, eps });
    });
  }

  /** Why the GPU device was lost; null while it is not. */
  get lostReason(): string | null {
    return this.lost;
  }

  /** Where the tuned products come from (before the first run). */
  setKernels(source: GpuKernelSource): void {
    this.kernelsOf = source;
  }

  /** Positions in the caches so far. */
  get position(): number {
    return this.pos;
  }

  /** Forgets the caches' contents: the next run starts at position 0. */
  reset(): void {
    this.pos = 0;
  }

  /** Bytes of GPU memory the model holds (weights, activations, caches). */
  get memoryBytes(): number {
    return this.owned.reduce((a, b) => a + b.size, 0);
  }

  /** Makes bucket `m`'s kernels (every product a run in it calls) and bind groups, once. */
  kernels(m: number): Promise<Bucket> {
    let p = this.buckets.get(m);
    if (!p) {
      p = this.makeBucket(m);
      this.buckets.set(m, p);
      p.then((b) => this.ready.set(m, b), () => this.buckets.delete(m));
    }
    return p;
  }

  /** Checks a run of `tokens` would fit: ids in the vocabulary and positions in the context. Throws one line. */
  check(tokens: ArrayLike<number>): void {
    if (this.closed) throw new Error('this decoder is closed');
    if (this.lost !== null) throw new Error(`the GPU device was lost (${this.lost}): load the model again (or with target 'wasm')`);
    if (!tokens.length) throw new RangeError('no tokens to feed');
    if (this.pos + tokens.length > this.context)
      throw new RangeError(`${this.pos} positions used and ${tokens.length} more tokens: past the context of ${this.context}`);
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= this.graph.vocab) throw new RangeError(`token id ${t} is outside the vocabulary of ${this.graph.vocab}`);
    }
  }

  /** Feeds `tokens` and returns a copy of the logits after the last one. */
  async feed(tokens: ArrayLike<number>): Promise<Float32Array> {
    await this.runAll(tokens, null);
    return this.logits();
  }

  /** Feeds `tokens` without reading anything back (a prompt's chunks before its last); resolves when submitted. */
  async prefill(tokens: ArrayLike<number>): Promise<void> {
    await this.runAll(tokens, null);
  }

  /**
   * Feeds `tokens` and samples the next token on the GPU (the one read-back:
   * its id); -1 when the GPU could not (more ids carry weight than its
   * sampler holds, with no top-k to bound them): then `logits()` has what
   * the host samples from, with the same draw.
   */
  async next(tokens: ArrayLike<number>, sampling: GpuSampling): Promise<number> {
    const slot = await this.runAll(tokens, sampling);
    return this.sampled(await this.readToken(slot));
  }

  /**
   * A decode step fed the token the latest run sampled on the GPU, without
   * the host reading it first, so that a caller can record and submit the
   * next steps while this one runs (up to MAX_AHEAD unread): resolves with
   * its own sampled token (as `next`; -1 where the GPU could not sample).
   * The caller must know that the latest run's token was sampled on the GPU
   * (not -1), and `rewind`s the steps it does not use.
   */
  async ahead(sampling: GpuSampling): Promise<number> {
    const bk = this.ready.get(1) ?? (await this.kernels(1));
    this.check([0]);
    const slot = this.run(null, bk, sampling);
    return this.sampled(await this.readToken(slot));
  }

  /** Decode steps a caller may hold submitted and unread: MAX_AHEAD, or two submits' worth with stepsPerSubmit. */
  get aheadLimit(): number {
    return aheadDepth(this.stepsPerSubmit);
  }

  /** Whether `aheadMany` can record now (the decode step's kernels are made). */
  get canBatch(): boolean {
    return this.ready.has(1) && !this.closed;
  }

  /**
   * `samplings.length` decode steps as `ahead` runs them, each fed the token
   * the step before sampled on the GPU, recorded into one command buffer
   * and submitted once (at most stepsPerSubmit; needs `canBatch`): each
   * step's parameters are copied from a ring into the run's before it.
   * Resolves each step's sampled token (as `ahead`; -1 where the GPU could
   * not sample), in order.
   */
  aheadMany(samplings: GpuSampling[]): Promise<number>[] {
    const bk = this.ready.get(1);
    if (!bk) throw new Error("aheadMany: the decode step's kernels are not made yet (run a step first)");
    if (samplings.length < 1 || samplings.length > this.stepsPerSubmit) throw new RangeError(`aheadMany: 1 to ${this.stepsPerSubmit} steps, got ${samplings.length}`);
    this.check([0]);
    if (this.pos + samplings.length > this.context) throw new RangeError(`aheadMany: ${samplings.length} steps from position ${this.pos} pass the context of ${this.context}`);
    const enc = this.device.createCommandEncoder({ label: `decoder ${samplings.length} steps` });
    const slots: number[] = [];
    let dispatches = 0;
    for (const [j, sampling] of samplings.entries()) {
      this.device.queue.writeBuffer(this.runRing, j * ALIGN, this.runParamsOf(1, sampling));
      enc.copyBufferToBuffer(this.runRing, j * ALIGN, this.runParams, 0, 32);
      dispatches = this.encode(bk, 1, true, true, undefined, enc).dispatches;
      slots.push(this.tokenToRead(enc));
      this.pos += 1;
    }
    this.device.queue.submit([enc.finish()]);
    this.stats.submits++;
    this.stats.tokens += samplings.length;
    this.stats.dispatchesPerToken = dispatches;
    return slots.map((slot) => this.readToken(slot).then((id) => this.sampled(id)));
  }

  /** Forgets the last `n` positions (steps run ahead that the caller does not use): the next run writes over them. */
  rewind(n: number): void {
    if (!Number.isInteger(n) || n < 0 || n > this.pos) throw new RangeError(`rewind ${n}: ${this.pos} positions are held`);
    this.pos -= n;
  }

  private sampled(id: number): number {
    if (id === NO_TOKEN) {
      this.stats.hostSampled++;
      return -1;
    }
    if (!(id < this.graph.vocab)) throw new Error(`the GPU sampler returned token ${id}, outside the vocabulary of ${this.graph.vocab}`);
    return id;
  }

  /** A copy of the latest run's logits, read back from the GPU. */
  async logits(): Promise<Float32Array> {
    const bytes = this.graph.vocab * 4;
    const enc = this.device.createCommandEncoder({ label: 'decoder logits' });
    enc.copyBufferToBuffer(this.buffers.get(this.graph.logits)!, 0, this.logitsRead, 0, bytes);
    this.device.queue.submit([enc.finish()]);
    await this.mapped(this.logitsRead, bytes);
    const out = new Float32Array(this.logitsRead.getMappedRange(0, bytes).slice(0));
    this.logitsRead.unmap();
    return out;
  }

  /** Frees every buffer; the device stays the app's. */
  destroy(): void {
    this.closed = true;
    for (const b of this.owned) b.destroy();
    this.buckets.clear();
    this.ready.clear();
  }

  /** The token a run sampled into read buffer `slot`; reads of the ring in the order of their runs. */
  private readToken(slot: number): Promise<number> {
    const buf = this.tokenReads[slot];
    const read = this.reading.then(async () => {
      await this.mapped(buf, 8);
      const id = new Uint32Array(buf.getMappedRange(0, 8))[0];
      buf.unmap();
      return id;
    });
    this.reading = read.then(() => undefined, () => undefined);
    return read;
  }

  private async mapped(buf: GPUBuffer, bytes: number): Promise<void> {
    try {
      await buf.mapAsync(GPUMapMode.READ, 0, bytes);
    } catch (e) {
      throw new Error(this.lost !== null ? `the GPU device was lost (${this.lost}): load the model again (or with target 'wasm')` : `reading back from the GPU: ${(e as Error).message}`);
    }
  }

  /** Runs `tokens` in chunks of the largest bucket (one submit each); samples after the last where `sampling`. */
  private async runAll(tokens: ArrayLike<number>, sampling: GpuSampling | null): Promise<number> {
    this.check(tokens);
    const max = this.maxRows;
    let slot = -1;
    for (let at = 0; at < tokens.length; at += max) {
      const chunk = Array.prototype.slice.call(tokens, at, at + max) as number[];
      const m = bucketOf(this.graph, chunk.length)!;
      const bk = this.ready.get(m) ?? (await this.kernels(m));
      const last = at + max >= tokens.length;
      slot = this.run(chunk, bk, last ? sampling : null);
    }
    return slot;
  }

  /**
   * One run: parameters and ids written, every step recorded into one pass
   * (with `timing`: timestamps at the pass's start and end, or with
   * `perStep` a pass per step), one submit.
   */
  private run(tokens: number[] | null, bk: Bucket, sampling: GpuSampling | null, timing?: Timing): number {
    const t = tokens ? tokens.length : 1, device = this.device;
    device.queue.writeBuffer(this.runParams, 0, this.runParamsOf(t, sampling));
    if (tokens) device.queue.writeBuffer(this.ids, 0, Uint32Array.from(tokens));
    const { enc, dispatches, queries } = this.encode(bk, t, tokens === null, sampling !== null, timing);
    const slot = sampling ? this.tokenToRead(enc) : this.readSlot;
    if (timing) {
      enc.resolveQuerySet(timing.set, 0, queries, timing.resolve, 0);
      enc.copyBufferToBuffer(timing.resolve, 0, timing.read, 0, queries * 8);
    }
    device.queue.submit([enc.finish()]);
    this.pos += t;
    this.stats.submits++;
    this.stats.tokens += t;
    // A decode step: one token and its sampling (counted also where this run read logits instead).
    if (bk.m === 1 && timing?.omit === undefined) this.stats.dispatchesPerToken = dispatches + (sampling ? 0 : 1);
    return slot;
  }

  /** Records the sampled token's copy into the read-back ring's next buffer; that buffer's slot (for readToken). */
  private tokenToRead(enc: GPUCommandEncoder): number {
    const slot = this.readSlot;
    enc.copyBufferToBuffer(this.token, 0, this.tokenReads[slot], 0, 8);
    this.readSlot = (slot + 1) % this.tokenReads.length;
    return slot;
  }

  /** The run parameters (decoder-kernels.wgsl's Run) of `t` tokens from the current position, with `sampling`'s. */
  private runParamsOf(t: number, sampling: GpuSampling | null): ArrayBuffer {
    const u = new Uint32Array(this.runHost), f = new Float32Array(this.runHost);
    u[0] = t;
    u[1] = this.pos;
    f[2] = sampling?.u ?? 0;
    f[3] = sampling ? Math.fround(sampling.temperature) : 0;
    u[4] = sampling?.topK ?? 0;
    f[5] = sampling?.topP ?? 1;
    return this.runHost;
  }

  /**
   * Records a run of `t` tokens of bucket `bk` from the current position into
   * `enc` (default a new command encoder): (`ahead`) the token the previous run sampled
   * copied into the ids, then every step's dispatch in one pass (with
   * `timing`, timestamps at its start and end, or with `perStep` a pass per
   * step), and the sampling where `sample`.
   */
  private encode(bk: Bucket, t: number, ahead: boolean, sample: boolean, timing?: Timing, enc = this.device.createCommandEncoder({ label: `decoder run ${bk.m}` })): { enc: GPUCommandEncoder; dispatches: number; queries: number } {
    // The token the previous run sampled, where the host feeds none (`ahead`).
    if (ahead) enc.copyBufferToBuffer(this.token, 0, this.ids, 0, 4);
    const steps = sample ? [...bk.steps, this.sampleStep()] : bk.steps;
    let queries = 0;
    const begin = () => timing
      ? enc.beginComputePass({ timestampWrites: { querySet: timing.set, beginningOfPassWriteIndex: queries++, endOfPassWriteIndex: queries++ } })
      : enc.beginComputePass();
    let dispatches = 0;
    let pass = begin();
    for (const [i, st] of steps.entries()) {
      if (timing?.perStep && i > 0) {
        pass.end();
        pass = begin();
      }
      if ('kernel' in st) {
        if (timing?.omit === st.label) continue;
        st.kernel.dispatch(pass, st.perT ? st.perT(t) : st.group);
        dispatches += st.kernel.passes;
      } else {
        const form = formAt(st, this.pos + t);
        if (!form || timing?.omit === form.label) continue;
        dispatches++;
        pass.setPipeline(form.pipeline);
        pass.setBindGroup(0, form.group);
        const grid = form === st && st.gridAt ? st.gridAt(this.pos) : form.grid;
        pass.dispatchWorkgroups(grid[0], grid[1]);
      }
    }
    pass.end();
    return { enc, dispatches, queries };
  }

  /**
   * The host's share of a decode step, for benchmarks: one step's command
   * buffer (every dispatch and the sampling, as `next` records it) built
   * and finished `reps` times and never submitted, so nothing runs and
   * nothing changes; ms each.
   */
  async recordTimes(reps: number): Promise<number[]> {
    const bk = this.ready.get(1) ?? (await this.kernels(1));
    this.check([0]);
    const out: number[] = [];
    for (let r = 0; r < reps; r++) {
      const t0 = performance.now();
      this.encode(bk, 1, false, true).enc.finish();
      out.push(performance.now() - t0);
    }
    return out;
  }

  /**
   * Profiles one run of `tokens` (at most the largest bucket) from the
   * current position, greedy: first as `next` runs it, timed on the host
   * (recording, and until the token is read back) and on the GPU (the
   * pass's timestamps); then the same tokens at the same position again
   * with each dispatch in a pass of its own, for each one's GPU time. The
   * caches end as after one run of `tokens`. Needs the device's
   * `timestamp-query` feature; for benchmarks (passes of one dispatch each
   * cost the GPU more than one pass, so the steps' times add up to more
   * than `gpuMs`). With `perStep: false` only the first run (`steps`
   * then holds the labels, each at 0 ms). With `omit`, that first run
   * leaves out every dispatch of that label (what they cost in the pass is
   * the difference from a run without `omit`; the run's results, the
   * caches' new rows included, are then wrong: reset before using them).
   */
  async profile(tokens: number[], opts: { perStep?: boolean; omit?: string } = {}): Promise<GpuProfile> {
    if (!this.device.features.has('timestamp-query')) throw new Error("GpuDecoder.profile needs the device's 'timestamp-query' feature");
    this.check(tokens);
    if (tokens.length > this.maxRows) throw new RangeError(`profile runs one bucket: at most ${this.maxRows} tokens, got ${tokens.length}`);
    const bk = await this.kernels(bucketOf(this.graph, tokens.length)!);
    const greedy: GpuSampling = { temperature: 0, topK: 0, topP: 1, u: 0 };
    const n = 2 * (bk.steps.length + 1);
    const set = this.device.createQuerySet({ type: 'timestamp', count: n });
    const resolve = this.device.createBuffer({ size: n * 8, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    const read = this.device.createBuffer({ size: n * 8, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const times = async (count: number): Promise<number[]> => {
      await this.mapped(read, count * 8);
      const ns = new BigUint64Array(read.getMappedRange(0, count * 8).slice(0));
      read.unmap();
      return Array.from({ length: count / 2 }, (_, i) => Number(ns[2 * i + 1] - ns[2 * i]) / 1e6);
    };
    try {
      const pos0 = this.pos;
      const t0 = performance.now();
      const slot = this.run(tokens, bk, greedy, { set, resolve, read, perStep: false, omit: opts.omit });
      const encodeMs = performance.now() - t0;
      await this.readToken(slot);
      const wallMs = performance.now() - t0;
      const [gpuMs] = await times(2);
      // What ran at this position: the short attention's kernel, and its merge skipped (an empty pass with perStep).
      const end = pos0 + tokens.length;
      const labels = [...bk.steps.map((s) => ('kernel' in s ? s.label : formAt(s, end)?.label ?? `${s.label} (skipped)`)), 'sample'];
      if (opts.perStep === false || opts.omit !== undefined) return { encodeMs, wallMs, gpuMs, steps: labels.map((label) => ({ label, ms: 0 })) };
      this.pos = pos0;
      await this.readToken(this.run(tokens, bk, greedy, { set, resolve, read, perStep: true }));
      const each = await times(n);
      return { encodeMs, wallMs, gpuMs, steps: labels.map((label, i) => ({ label, ms: each[i] })) };
    } finally {
      set.destroy();
      resolve.destroy();
      read.destroy();
    }
  }

  private sampleBind: Dispatch | null = null;
  /** The sampling's dispatch: one workgroup over the logits. */
  private sampleStep(): Dispatch {
    this.sampleBind ??= {
      label: 'sample', pipeline: this.pipelines.sample, grid: [1, 1],
      group: this.fixedGroup('sample', -1, [{ buffer: this.buffers.get(this.graph.logits)!, size: this.graph.vocab * 4 }, { buffer: this.token }]),
    };
    return this.sampleBind;
  }

  private fixedGroup(name: FixedName, step: number, ranges: Range[], pipeline = this.pipelines[name]): GPUBindGroup {
    const slot = this.stepSlot.get(step)!;
    const entries = [
      { binding: 0, resource: { buffer: this.runParams } },
      { binding: 1, resource: { buffer: this.stepParams, offset: slot * ALIGN, size: 32 } },
      ...ranges.map((r, i) => ({ binding: i + 2, resource: { buffer: r.buffer, offset: r.offset ?? 0, size: r.size } })),
    ];
    return this.device.createBindGroup({ label: `decoder ${name} ${step}`, layout: pipeline.getBindGroupLayout(0), entries });
  }

  /** The `+merge` form of fused run `f` where this backend runs one (mergedRun, with GpuDecoderInit.mergeAttention), else null. */
  private mergeOf(f: Fused): ReturnType<typeof mergedRun> {
    return this.mergeAttention ? mergedRun(this.graph, f) : null;
  }

  private async makeBucket(m: number): Promise<Bucket> {
    const source = this.kernelsOf;
    if (!source) throw new Error('GpuDecoder: no kernel source (setKernels) before the first run');
    const list = productsOf(this.graph, m, this.runs.at.size > 0, this.mergeAttention);
    const kernels = await Promise.all(list.map((x) => {
      const key = `${x.op}/${x.shape.join(',')}`;
      let k = this.made.get(key);
      if (!k) {
        k = source(x.op, x.shape);
        this.made.set(key, k);
        k.catch(() => this.made.delete(key));
      }
      return k;
    }));
    const byKey = new Map(list.map((x, i) => [`${x.op}/${x.shape.join(',')}`, kernels[i]]));
    const g = this.graph, device = this.device;
    return scoped(device, `the language model's bucket of ${m} rows on WebGPU`, () => {
      const steps: Dispatch[] = [];
      // Which buffer holds each graph buffer now: a +residual product moves the stream to its twin and back.
      const holds = new Map<string, GPUBuffer>();
      const now = (name: string) => holds.get(name) ?? this.buffers.get(name)!;
      const buf = (name: string, rows: number, cols: number): Range => ({ buffer: now(name), size: rows * cols * 4 });
      const rowsOf = new Map(g.buffers.map((b) => [b.name, b.rows]));
      const whole = (name: string): Range => ({ buffer: now(name) });
      const cache = (name: string): Range => ({ buffer: this.caches.get(name)! });
      const part = (tensor: string, p: string): Range => this.parts.get(tensor)![p];
      const fixed = (name: FixedName, i: number, grid: [number, number], ...ranges: Range[]) => {
        steps.push({ label: name, pipeline: this.pipelines[name], grid, group: this.fixedGroup(name, i, ranges) });
      };
      // The decode step's attention: `name` over chunks of the cache, its grid read from the run's position
      // (decoder-kernels.wgsl, split attention), then the merge per query head. `ranges` end with the partials.
      // Up to shortUpTo positions, `name`_one instead: one workgroup a key/value head over every chunk, writing
      // the output itself (its binding 5, the partials' in `name`), and no merge.
      const split = (name: 'attention_split' | 'attention_rope', at: number, a: Extract<Step, { step: 'attention' }>, ...ranges: Range[]) => {
        const after = runs.get(at + 1);
        if (after && this.mergeOf(after.f)) {
          // The product after it merges the parts (+merge): NP parts a head, no merge, no short form.
          const parts = name === 'attention_split' ? 'attention_parts' : 'attention_rope_parts';
          // Made only where longFrom > 0.
          const lp = this.longPipelines[parts];
          steps.push({
            label: parts, pipeline: this.pipelines[parts], grid: [a.kv_heads, MERGE_PARTS], group: this.fixedGroup(parts, at, ranges),
            long: lp ? { from: this.longFrom, label: `${parts}_long`, pipeline: lp, grid: [a.kv_heads, MERGE_PARTS], group: this.fixedGroup(parts, at, ranges, lp) } : undefined,
          });
          return;
        }
        const one = name === 'attention_split' ? 'attention_one' : 'attention_rope_one';
        const upTo = this.shortUpTo;
        steps.push({
          label: name, pipeline: this.pipelines[name], grid: [a.kv_heads, 1], group: this.fixedGroup(name, at, ranges),
          gridAt: (pos0: number) => [a.kv_heads, Math.ceil((pos0 + 1) / SCH)],
          short: upTo > 0 ? { upTo, label: one, pipeline: this.pipelines[one], grid: [a.kv_heads, 1], group: this.fixedGroup(one, at, ranges.map((r, k) => (k === 3 ? whole(a.out) : r))) } : undefined,
        });
        steps.push({
          label: 'attention_merge', pipeline: this.pipelines.attention_merge, grid: [a.heads, 1], group: this.fixedGroup('attention_merge', at, [{ buffer: this.partials }, whole(a.out)]),
          skipUpTo: upTo > 0 ? upTo : undefined,
        });
      };
      const ew = (n: number) => Math.max(1, Math.ceil(n / EW));
      // Bind group 0 of a tuned product: its arguments in ABI order.
      const productGroup = (kernel: GpuProduct, label: string, ranges: Range[]) => device.createBindGroup({
        label, layout: kernel.bindGroupLayout,
        entries: ranges.map((r, binding) => ({ binding, resource: { buffer: r.buffer, offset: r.offset ?? 0, size: r.size } })),
      });
      const runs = m === 1 ? this.runs.at : new Map<number, { f: Fused; r: FusedRun }>();
      for (let i = 0; i < g.steps.length; i++) {
        const s = g.steps[i], next = g.steps[i + 1];
        const run = runs.get(i);
        if (run) {
          // A fused run: one product, A (the norm's input), W's parts, G and E, R, C (docs/ops.md's order).
          const { f, r } = run;
          // +merge: A's parts, the weights, then PM and PL, all in the partials the attention before wrote.
          const merged = this.mergeOf(f);
          const kernel = byKey.get(merged ? `${merged.op}/${merged.shape.join(',')}` : `${f.kernel}/1,${f.k},${f.n}`)!;
          const [pm0, pl0] = merged ? mergeOffsets(merged.attention.heads, merged.attention.head_dim) : [0, 0];
          const np = merged ? merged.attention.heads * MERGE_PARTS : 0;
          const a: Range = merged ? { buffer: this.partials, offset: 0, size: f.k * MERGE_PARTS * 4 } : buf(r.norm?.x ?? r.product.a, 1, f.k);
          const ranges = [a, ...partsOf(r.product.format).map((p) => part(r.product.weight, p))];
          if (r.norm) ranges.push(part(r.norm.weight, 'w'), this.runs.eps.get(Math.fround(r.norm.eps))!);
          if (merged) ranges.push({ buffer: this.partials, offset: pm0 * 4, size: np * 4 }, { buffer: this.partials, offset: pl0 * 4, size: np * 4 });
          if (r.add) {
            const from = now(r.add.x), to = from === this.buffers.get(r.add.x) ? this.runs.twins.get(r.add.x)! : this.buffers.get(r.add.x)!;
            ranges.push({ buffer: from, size: f.n * 4 }, { buffer: to, size: f.n * 4 });
            holds.set(r.add.x, to);
          } else {
            ranges.push(buf(r.glu?.out ?? r.product.out, 1, f.n));
          }
          const label = merged ? `${merged.op} ${merged.shape.join('x')}` : `${f.kernel} 1x${f.k}x${f.n}`;
          steps.push({ label, kernel, group: productGroup(kernel, `decoder ${merged?.op ?? f.kernel} ${i}`, ranges) });
          i += f.steps - 1;
          continue;
        }
        const fusedAs = runs.has(i + 1) ? undefined : this.fused.get(i);
        if (fusedAs === 'add_rms_norm' && s.step === 'add' && next.step === 'rms_norm') {
          fixed('add_rms_norm', i, [1, m], whole(s.y), part(next.weight, 'w'), whole(s.x), whole(next.out));
          i++;
          continue;
        }
        const att = g.steps[i + 2];
        if (m === 1 && fusedAs === 'rope_kv' && s.step === 'rope' && next.step === 'kv_store' && att?.step === 'attention' && att.x === s.x && att.stride === s.stride &&
          att.k_cache === next.k_cache && att.v_cache === next.v_cache && att.kv_heads * att.head_dim === next.width && att.head_dim === s.head_dim && att.heads * att.head_dim <= next.k_col) {
          // The decode step: rope and kv_store folded into the split attention (attention_rope reads the rope step's parameters).
          const ropeParams: Range = { buffer: this.stepParams, offset: this.stepSlot.get(i)! * ALIGN, size: 32 };
          split('attention_rope', i + 2, att, whole(s.x), cache(next.k_cache), cache(next.v_cache), { buffer: this.partials }, ropeParams, { buffer: this.rope });
          i += 2;
          continue;
        }
        if (fusedAs === 'rope_kv' && s.step === 'rope' && next.step === 'kv_store') {
          fixed('rope_kv', i, [ew((s.heads * s.head_dim + next.width) / 2), m], { buffer: this.rope }, whole(s.x), cache(next.k_cache), cache(next.v_cache));
          i++;
          continue;
        }
        switch (s.step) {
          case 'embed': {
            const ids = { buffer: this.ids }, out = whole(s.out), h = g.hidden;
            if (s.format === 'q8_0') fixed('embed_q8', i, [ew(h), m], ids, part(s.table, 'w'), part(s.table, 'd'), out);
            else if (s.format === 'f32') fixed('embed_f32', i, [ew(h), m], ids, part(s.table, 'w'), out);
            else fixed('embed_q4', i, [ew(h), m], ids, part(s.table, 'w'), part(s.table, 'd'), part(s.table, s.format === 'q4_1' ? 'm' : 'd'), out);
            break;
          }
          case 'rms_norm':
            fixed('rms_norm', i, [1, s.last ? 1 : m], whole(s.x), part(s.weight, 'w'), whole(s.out));
            break;
          case 'matmul': {
            const kernel = byKey.get(`${s.kernel}/${s.last ? 1 : m},${s.k},${s.n}`)!;
            const rows = s.last ? 1 : m;
            const label = `${s.kernel} ${rows}x${s.k}x${s.n}`;
            const weights = partsOf(s.format).map((p) => part(s.weight, p));
            const group = (a: Range) => productGroup(kernel, `decoder ${s.kernel} ${i}`, [a, ...weights, buf(s.out, rows, s.n)]);
            const a0 = buf(s.a, rows, s.k);
            if (s.last && rowsOf.get(s.a) === 'tokens' && m > 1) {
              // The last real row: bound at its offset, one bind group per T, made on first use.
              const byT = new Map<number, GPUBindGroup>();
              const perT = (t: number) => {
                let bg = byT.get(t);
                if (!bg) {
                  bg = group({ ...a0, offset: (t - 1) * s.k * 4 });
                  byT.set(t, bg);
                }
                return bg;
              };
              steps.push({ label, kernel, group: perT(1), perT });
            } else {
              steps.push({ label, kernel, group: group(a0) });
            }
            break;
          }
          case 'rope':
            fixed('rope', i, [ew((s.heads * s.head_dim) / 2), m], { buffer: this.rope }, whole(s.x));
            break;
          case 'kv_store':
            fixed('kv_store', i, [ew(s.width), m], whole(s.x), cache(s.k_cache), cache(s.v_cache));
            break;
          case 'attention':
            if (m === 1) {
              split('attention_split', i, s, whole(s.x), cache(s.k_cache), cache(s.v_cache), { buffer: this.partials });
            } else {
              fixed('attention', i, [s.kv_heads, m], whole(s.x), cache(s.k_cache), cache(s.v_cache), whole(s.out));
            }
            break;
          case 'swi_glu':
            fixed('swiglu', i, [ew(s.ffn), m], whole(s.x), whole(s.out));
            break;
          case 'add':
            fixed('add', i, [ew(s.cols), m], whole(s.y), whole(s.x));
            break;
        }
      }
      return { m, steps };
    });
  }
}
