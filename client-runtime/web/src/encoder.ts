// SentenceEncoder: a BERT-family sentence encoder (all-MiniLM-L6-v2 and its
// kin) from a `webtune model import` bundle, every matrix product on
// webtune's kernels, everything else on the fixed kernels of encoder-kernels.wat.
// This file is the public class and the Wasm path; with target 'webgpu' it
// loads and tokenises here and hands every batch to encoder-gpu.ts.
//
// Memory: one WebAssembly.Memory holds the weights (the blob copied in
// once, its 64-byte tensor offsets kept) and, per (batch, length) bucket,
// the activations; the tuned kernels are instantiated on the same memory.
// A bucket's buffers and kernels are made on its first use and reused:
// `encode` on a seen bucket allocates nothing in Wasm memory and makes no
// kernel. Buffers are placed after the memory's current end, so they never
// overlap the scratch pages a kernel binding appends.
//
// One layer, for B texts padded to S tokens (M = B·S, H hidden, I FFN,
// heads of d):
//   qkv = x · Wqkv                       matmul M,H,3H
//   Q·1/√d, Kᵀ, V = split(qkv + b)       split_heads
//   E, 1/Σ = exp_mask(Q · Kᵀ)            batch_matmul B·heads,S,d,S; softmax
//   ctx = merge((E · V) · 1/Σ)           batch_matmul B·heads,S,S,d; merge_heads
//   x = LN(ctx · Wo + bo + x)            matmul M,H,H; add_ln
//   f = GELU(x · Wi + bi)                matmul+bias+gelu M,H,I (fused epilogue)
//   x = LN(f · Wout + bout + x)          matmul M,I,H; add_ln
//
// The softmax's division is deferred to merge_heads: one multiply per
// element of the d-wide context instead of the S-wide probabilities.
//
// `precision: 'int16'` (Wasm only): the four weight products run on
// `matmul_i16`, on each matrix's packed words [K/2, N] and N column scales
// (quant.ts's rule). Where the manifest has an `int16` blob (bundles
// imported with it), that blob is all that is fetched and copied in: it
// holds those words and scales, already quantised, in place of the four f32
// matrices, and the word embeddings as i16 pairs with one scale per row,
// which `embed_q16` reads; every other tensor is f32 as in the f32 blob.
// Without it the f32 blob is fetched, and at load each of the four weight
// matrices is quantised per output column (quant.ts) and written over its
// own f32 copy in memory: the packed words (half of the matrix's bytes),
// then its column scales from the next 64-byte boundary. Before each product its input is
// quantised per row by `quant_rows` into the bucket's `qa` words and `sa`
// scales (one pair of buffers, reused by all four), so
//   qkv = x · Wqkv    becomes  quant_rows(x); matmul_i16 M,H,3H (qa, Wqkv, sa, sWqkv)
// and likewise M,H,H, `matmul_i16+bias+gelu` M,H,I and M,I,H. The integer
// sums are exact (quant.ts: qmaxA·qmaxW·K < 2³¹); everything else is fp32.

import { Tokenizer } from '@huggingface/tokenizers';
import { LENGTHS, pow2 } from './batches.js';
import { GpuEncoder } from './encoder-gpu.js';
import { fetchPlan, LatencyLog } from './latency.js';
import { qmaxA, qmaxW, quantizeColumns } from './quant.js';
import { median } from './stats.js';
import { sharedImport, threadsWanted } from './threads.js';
import { type Policy, type WasmKernel, Webtune } from './webtune.js';

declare const __WEBTUNE_ENCODER_KERNELS__: string;

export interface EncoderLoadOptions {
  /** Base URL of the webtune server; default: this page's origin. */
  server?: string;
  /** The model's name in the server's store (`GET /v1/models` lists them). */
  model: string;
  /**
   * `'auto'`: the faster of the two on this device class, by measurement
   * (see `SentenceEncoder.choice`): what the server's plan says for this
   * GPU's device key, or, for the first device of its class, both timed here
   * and reported. Wasm where there is no WebGPU.
   */
  target: 'wasm' | 'webgpu' | 'auto';
  /** `'auto'`: the length in tokens at which the targets are compared (a text of that length, batch 1). Default 128. */
  autoLength?: number;
  /** WebGPU: the app's device; default: one requested from `navigator.gpu`. */
  device?: GPUDevice;
  /** Tune the model's kernels in `idle()`. Default true. */
  tune?: boolean;
  /** Wasm: tune in the bench worker (see `Webtune.open`). Default false. */
  worker?: boolean;
  /**
   * Wasm: threads a kernel may use (see `Webtune.open`). Default: the
   * device's cores, at most 8, where the page is cross-origin isolated.
   */
  threads?: number;
  /** Longest time one `idle()` call may take, ms. Default 8. */
  budgetMs?: number;
  /** Use the IndexedDB cache of winning kernels. Default true. */
  cache?: boolean;
  /** Candidates to evaluate per kernel at most (see `Webtune.open`). Default: all. */
  maxCandidates?: number;
  /** The tuning policy (see `Webtune.open`). Default `'fast'`. */
  policy?: Policy;
  /** Largest batch run at once; longer lists are encoded in several batches. Default 8. */
  maxBatch?: number;
  /**
   * Report the model-level latency measured per (batch, length) bucket to
   * the server (`POST /v1/models/{name}/latency`, after 5, 15 and 50 calls
   * of a bucket, then every 200), so that the server can tell other devices
   * like this one which target runs the model faster. Default true.
   */
  report?: boolean;
  /**
   * Wasm: `'int16'` runs the four weight products of each layer on
   * `matmul_i16`, weights quantised per column (by the importer, in the
   * manifest's `int16` blob, which is then fetched instead of the f32 one;
   * or at load) and activations per row before each product (see the
   * header of encoder.ts); `'fp32'` runs
   * them on `matmul`. `'int16'` needs target `'wasm'` (a TypeError with
   * `'webgpu'` or `'auto'`: WebGPU runs fp32 only) and sends no latency
   * reports (`report`: the server's plan compares the targets at fp32).
   * Default `'fp32'`.
   */
  precision?: 'fp32' | 'int16';
}

export interface ModelConfig {
  vocab_size: number;
  hidden_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  intermediate_size: number;
  max_position_embeddings: number;
  type_vocab_size: number;
  layer_norm_eps: number;
  hidden_act: string;
}

interface Blob {
  sha256: string;
  bytes: number;
  url: string;
}

/** A tensor of a weights blob: little-endian, at a 64-byte-aligned byte offset. */
export interface TensorEntry {
  name: string;
  dtype: string;
  shape: number[];
  offset: number;
}

/** The bundle manifest (format 1), docs/model-bundle.md. */
export interface ModelManifest {
  format: number;
  name: string;
  architecture: string;
  config: ModelConfig;
  max_seq_length: number;
  pooling: 'mean' | 'cls';
  normalize: boolean;
  tokenizer: Blob;
  weights: Blob;
  tensors: TensorEntry[];
  /**
   * The pre-quantised blob for `precision: 'int16'` (absent in bundles
   * imported before it): every tensor of `weights`, in the same order,
   * except the four weight matrices of each layer, each replaced by
   * `{W}.q` (u32 [K/2, N], matmul_i16's B layout) and `{W}.scale` (f32 [N]),
   * and `embeddings.word` [V, H], replaced by `embeddings.word.q` (u32
   * [V, H/2], i16 pairs of a row) and `embeddings.word.scale` (f32 [V]);
   * quant.ts's rule, qmaxW(K) for the matrices and 32767 for the rows.
   */
  int16?: { weights: Blob; tensors: TensorEntry[] } | null;
}

const PAGE = 65536;

interface Fixed {
  embed(ids: number, word: number, pos: number, type0: number, gamma: number, beta: number, out: number, n: number, s: number, h: number, eps: number): void;
  embed_q16(ids: number, wordq: number, wordscale: number, pos: number, type0: number, gamma: number, beta: number, out: number, n: number, s: number, h: number, eps: number): void;
  add_ln(x: number, bias: number, res: number, gamma: number, beta: number, out: number, rows: number, h: number, eps: number): void;
  split_heads(qkv: number, bias: number, q: number, kt: number, v: number, b: number, s: number, heads: number, d: number, scale: number): void;
  softmax(p: number, b: number, heads: number, s: number, lens: number, inv: number): void;
  merge_heads(ctx: number, inv: number, out: number, b: number, s: number, heads: number, d: number): void;
  pool(x: number, lens: number, out: number, b: number, s: number, h: number, norm: number): void;
  quant_rows(x: number, rows: number, k: number, qmax: number, q: number, scales: number): void;
}

interface Layer {
  qkvW: number; qkvB: number; outW: number; outB: number; ln1G: number; ln1B: number;
  inW: number; inB: number; ffnW: number; ffnB: number; ln2G: number; ln2B: number;
  /** int16: the column scales of the four weight matrices (whose `…W` offsets then hold packed words); 0 with fp32. */
  qkvS: number; outS: number; inS: number; ffnS: number;
}

interface Bucket {
  b: number;
  s: number;
  /** Batches run in this bucket (the first, which made its kernels, is not timed). */
  calls: number;
  ids: number; lens: number; ones: number;
  x: number; qkv: number; q: number; kt: number; v: number; p: number; inv: number; ctx: number; merged: number; proj: number; ffn: number; pooled: number;
  /** int16: a product's input quantised by rows (u32 [M, max(H, I)/2]) and its row scales (f32 [M]); 0 with fp32. */
  qa: number; sa: number;
  qkvK: WasmKernel; scoresK: WasmKernel; contextK: WasmKernel; outK: WasmKernel; upK: WasmKernel; downK: WasmKernel;
  /** The six, distinct (what a guarded call names). */
  kernels: WasmKernel[];
}

function fromBase64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function sha256Hex(bytes: ArrayBuffer): Promise<string | null> {
  if (!globalThis.crypto?.subtle) return null;
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** How `target: 'auto'` chose. */
export interface AutoChoice {
  target: 'wasm' | 'webgpu';
  /** `plan`: the server's plan for this device class; `measured`: both timed here (and reported); `no-webgpu`: WebGPU did not open. */
  how: 'plan' | 'measured' | 'no-webgpu';
  reason: string;
  /** `measured`: median ms per call of each target at batch 1 × `seq_len` tokens. */
  ms?: { wasm: number; webgpu: number };
  seq_len: number;
}

export class SentenceEncoder {
  /** `target: 'auto'`: which target it chose and why; null otherwise. */
  choice: AutoChoice | null = null;
  /** The webtune session whose kernels run the model (tuning, events, status). */
  readonly webtune: Webtune;
  readonly manifest: ModelManifest;
  /** Embedding width. */
  readonly dim: number;
  /** WebGPU: the backend that runs every batch; null on Wasm, whose state is the fields below. */
  private gpu: GpuEncoder | null = null;
  private memory!: WebAssembly.Memory;
  private fixed!: Fixed;
  private tokenizer: Tokenizer;
  /** Memory offsets of the embedding tensors; `wordScale` is 0 unless `word` is the int16 blob's `embeddings.word.q`. */
  private emb = { word: 0, wordScale: 0, pos: 0, type: 0, gamma: 0, beta: 0 };
  private layers: Layer[] = [];
  private buckets = new Map<string, Promise<Bucket>>();
  private maxBatch!: number;
  private queue: Promise<unknown> = Promise.resolve();
  private i32!: Int32Array<ArrayBuffer>;
  private f32!: Float32Array<ArrayBuffer>;
  private latency!: LatencyLog | null;
  /** Wasm: the weight products' precision (see `EncoderLoadOptions.precision`). */
  private int16 = false;

  private constructor(init: { webtune: Webtune; manifest: ModelManifest; tokenizer: Tokenizer } &
    ({ gpu: GpuEncoder } | { memory: WebAssembly.Memory; fixed: Fixed; base: number; bytes: number; maxBatch: number; report: boolean; int16: boolean; pre: boolean })) {
    this.webtune = init.webtune;
    this.manifest = init.manifest;
    if ('gpu' in init) {
      this.gpu = init.gpu;
      this.tokenizer = init.tokenizer;
      this.dim = init.manifest.config.hidden_size;
      return;
    }
    this.memory = init.memory;
    this.fixed = init.fixed;
    this.tokenizer = init.tokenizer;
    this.maxBatch = init.maxBatch;
    this.int16 = init.int16;
    // int16 reports no latency: the server's plan compares the targets at fp32.
    this.latency = init.report && !init.int16 ? new LatencyLog(init.webtune.server, init.manifest.name, init.manifest.max_seq_length) : null;
    this.dim = init.manifest.config.hidden_size;
    this.i32 = new Int32Array(this.memory.buffer);
    this.f32 = new Float32Array(this.memory.buffer);
    const c = init.manifest.config, name = init.manifest.name;
    // The blob in memory at `base`: the f32 one, or with `pre` the int16 one.
    const list = init.pre ? init.manifest.int16!.tensors : init.manifest.tensors;
    const what = init.pre ? 'the manifest\'s int16 blob' : 'the manifest';
    const want = (tensor: string, shape: number[], dtype = 'f32') => {
      const t = list.find((x) => x.name === tensor);
      if (!t) throw new Error(`model ${name}: ${what} has no tensor ${tensor}`);
      if (t.dtype !== dtype || t.shape.join(',') !== shape.join(',')) throw new Error(`model ${name}: tensor ${tensor} ${init.pre ? 'of the int16 blob ' : ''}is ${t.dtype}[${t.shape}], expected ${dtype}[${shape}]`);
      if (t.offset % 64) throw new Error(`model ${name}: tensor ${tensor} is not 64-byte aligned`);
      const bytes = shape.reduce((a, b) => a * b, 4);
      if (!(t.offset >= 0 && t.offset + bytes <= init.bytes)) throw new Error(`model ${name}: tensor ${tensor} (${bytes} bytes at ${t.offset}) lies outside its ${init.bytes}-byte blob`);
      return init.base + t.offset;
    };
    const H = c.hidden_size, I = c.intermediate_size;
    // A weight matrix [K, N]: with `pre` its words and column scales, else its f32 values (and 0).
    const matrix = (w: string, k: number, n: number): [number, number] =>
      init.pre ? [want(w + '.q', [k / 2, n], 'u32'), want(w + '.scale', [n])] : [want(w, [k, n]), 0];
    this.emb = {
      word: init.pre ? want('embeddings.word.q', [c.vocab_size, H / 2], 'u32') : want('embeddings.word', [c.vocab_size, H]),
      wordScale: init.pre ? want('embeddings.word.scale', [c.vocab_size]) : 0,
      pos: want('embeddings.position', [c.max_position_embeddings, H]),
      type: want('embeddings.token_type', [c.type_vocab_size, H]),
      gamma: want('embeddings.ln.gamma', [H]),
      beta: want('embeddings.ln.beta', [H]),
    };
    for (let l = 0; l < c.num_hidden_layers; l++) {
      const p = `layer.${l}.`;
      const [qkvW, qkvS] = matrix(p + 'qkv.weight', H, 3 * H), [outW, outS] = matrix(p + 'attn_out.weight', H, H);
      const [inW, inS] = matrix(p + 'ffn_in.weight', H, I), [ffnW, ffnS] = matrix(p + 'ffn_out.weight', I, H);
      this.layers.push({
        qkvW, qkvB: want(p + 'qkv.bias', [3 * H]),
        outW, outB: want(p + 'attn_out.bias', [H]),
        ln1G: want(p + 'attn_ln.gamma', [H]), ln1B: want(p + 'attn_ln.beta', [H]),
        inW, inB: want(p + 'ffn_in.bias', [I]),
        ffnW, ffnB: want(p + 'ffn_out.bias', [H]),
        ln2G: want(p + 'ffn_ln.gamma', [H]), ln2B: want(p + 'ffn_ln.beta', [H]),
        qkvS, outS, inS, ffnS,
      });
    }
    if (this.int16 && !init.pre) this.quantizeWeights();
  }

  /**
   * int16 from the f32 blob: each layer's four weight matrices, quantised
   * per column and written over their own f32 copies: the words, then the
   * column scales 64-byte aligned after them (what the int16 blob holds ready).
   */
  private quantizeWeights(): void {
    const c = this.manifest.config, H = c.hidden_size, I = c.intermediate_size;
    const u32 = new Uint32Array(this.memory.buffer);
    const inPlace = (at: number, k: number, n: number): number => {
      const w = this.f32.slice(at / 4, at / 4 + k * n);
      const words = (k / 2) * n, sAt = at + Math.ceil((words * 4) / 64) * 64;
      quantizeColumns(w, k, n, qmaxW(k), u32.subarray(at / 4, at / 4 + words), this.f32.subarray(sAt / 4, sAt / 4 + n));
      return sAt;
    };
    for (const L of this.layers) {
      L.qkvS = inPlace(L.qkvW, H, 3 * H);
      L.outS = inPlace(L.outW, H, H);
      L.inS = inPlace(L.inW, H, I);
      L.ffnS = inPlace(L.ffnW, I, H);
    }
  }

  /**
   * Fetches the model's manifest, weights and tokenizer from the server
   * (each blob checked against its SHA-256 address; with `precision:
   * 'int16'` the int16 weights where the manifest has them, and then not
   * the f32 ones), copies the weights into
   * Wasm memory (or uploads them to the GPU device) and opens a webtune
   * session for the model's kernels.
   */
  static async load(opts: EncoderLoadOptions): Promise<SentenceEncoder> {
    if (!opts || typeof opts.model !== 'string' || !opts.model) throw new TypeError('SentenceEncoder.load: `model` must be a model name (GET /v1/models lists them)');
    if (opts.precision !== undefined && opts.precision !== 'fp32' && opts.precision !== 'int16')
      throw new TypeError(`SentenceEncoder.load: precision must be 'fp32' or 'int16', got ${String(opts.precision)}`);
    if (opts.precision === 'int16' && opts.target !== 'wasm')
      throw new TypeError(`SentenceEncoder.load: precision 'int16' runs on target 'wasm' only, got target '${opts.target}'`);
    if (opts.target === 'auto') return SentenceEncoder.loadAuto(opts);
    if (opts.target !== 'wasm' && opts.target !== 'webgpu') throw new TypeError(`SentenceEncoder.load: target must be 'wasm', 'webgpu' or 'auto', got ${String(opts.target)}`);
    if (opts.target === 'webgpu' && opts.device !== undefined && !(typeof GPUDevice !== 'undefined' && opts.device instanceof GPUDevice))
      throw new TypeError('SentenceEncoder.load: `device` must be a GPUDevice, or left out to request one');
    const server = (opts.server ?? globalThis.location?.origin ?? '').replace(/\/+$/, '');
    const res = await fetch(`${server}/v1/models/${encodeURIComponent(opts.model)}`);
    if (res.status === 404) throw new Error(`model "${opts.model}" is not on ${server} (import it with \`webtune model import\`; GET /v1/models lists the models there)`);
    if (!res.ok) throw new Error(`model "${opts.model}": manifest HTTP ${res.status}`);
    const manifest = (await res.json()) as ModelManifest;
    if (manifest.format !== 1) throw new Error(`model "${opts.model}": bundle format ${manifest.format}, this runtime reads format 1`);
    if (manifest.architecture !== 'bert') throw new Error(`model "${opts.model}": architecture ${manifest.architecture}, SentenceEncoder runs bert`);
    const c = manifest.config;
    if (c.hidden_size % c.num_attention_heads || (c.hidden_size / c.num_attention_heads) % 4 || c.intermediate_size % 4)
      throw new Error(`model "${opts.model}": hidden ${c.hidden_size}, heads ${c.num_attention_heads}, FFN ${c.intermediate_size}: the fixed kernels need head and FFN widths that are multiples of 4`);
    if (Math.ceil(manifest.max_seq_length / 4) * 4 > c.max_position_embeddings)
      throw new Error(`model "${opts.model}": max_seq_length ${manifest.max_seq_length} rounded up to a multiple of 4 exceeds its ${c.max_position_embeddings} position embeddings`);
    if (!/^gelu$/.test(c.hidden_act)) throw new Error(`model "${opts.model}": activation ${c.hidden_act}, SentenceEncoder runs exact gelu`);

    const blob = async (b: Blob, what: string): Promise<ArrayBuffer> => {
      const r = await fetch(b.url.startsWith('http') ? b.url : `${server}${b.url}`);
      if (!r.ok) throw new Error(`model "${opts.model}": ${what} blob HTTP ${r.status}`);
      const bytes = await r.arrayBuffer();
      const got = await sha256Hex(bytes);
      if (bytes.byteLength !== b.bytes || (got !== null && got !== b.sha256))
        throw new Error(`model "${opts.model}": the ${what} blob is corrupt or truncated (${bytes.byteLength} bytes hashing to ${got ?? '?'}; the manifest says ${b.bytes} bytes, ${b.sha256}); nothing was kept`);
      return bytes;
    };
    // int16 with the importer's pre-quantised blob: that one instead of the f32 one.
    const pre = opts.target === 'wasm' && opts.precision === 'int16' && manifest.int16 != null;
    if (pre && (typeof manifest.int16!.weights?.url !== 'string' || !Array.isArray(manifest.int16!.tensors)))
      throw new Error(`model "${opts.model}": the manifest's int16 entry has no weights blob or tensor list`);
    const [weights, tokBytes] = await Promise.all([
      pre ? blob(manifest.int16!.weights, 'int16 weights') : blob(manifest.weights, 'weights'),
      blob(manifest.tokenizer, 'tokenizer'),
    ]);
    const tokJson = JSON.parse(new TextDecoder().decode(tokBytes));
    // Per-text encoding: no padding (the bundle's tokenizer.json may pad to
    // a fixed length); truncation is done here, keeping [CLS] and [SEP].
    tokJson.padding = null;
    tokJson.truncation = null;
    const tokenizer = new Tokenizer(tokJson, {});
    const maxBatch = Math.max(1, opts.maxBatch ?? 8), report = opts.report ?? true;

    if (opts.target === 'webgpu') {
      const webtune = await Webtune.open({
        server, target: 'webgpu', device: opts.device, tune: opts.tune ?? true,
        budgetMs: opts.budgetMs, cache: opts.cache, maxCandidates: opts.maxCandidates, policy: opts.policy,
      });
      try {
        const gpu = await GpuEncoder.create({ webtune, manifest, weights, maxBatch, report });
        return new SentenceEncoder({ webtune, manifest, tokenizer, gpu });
      } catch (e) {
        webtune.close();
        throw e;
      }
    }

    const base = PAGE;
    // With threads the memory is shared, and so must be every module's import of it.
    const shared = threadsWanted(opts.threads).count > 1;
    const memory = new WebAssembly.Memory({ initial: Math.ceil((base + weights.byteLength) / PAGE) + 1, maximum: 65536, shared });
    new Uint8Array(memory.buffer, base, weights.byteLength).set(new Uint8Array(weights));
    const fixedBytes = fromBase64(__WEBTUNE_ENCODER_KERNELS__);
    const mod = await WebAssembly.instantiate(shared ? sharedImport(fixedBytes) : fixedBytes, { env: { memory } });
    const webtune = await Webtune.open({
      server, target: 'wasm', memory, tune: opts.tune ?? true, worker: opts.worker ?? false, threads: opts.threads,
      budgetMs: opts.budgetMs, cache: opts.cache, maxCandidates: opts.maxCandidates, policy: opts.policy,
    });
    const fixed = { ...(mod.instance.exports as unknown as Fixed) };
    const pool = webtune.threadPool;
    if (pool && pool.size > 1) {
      // The softmax, the one fixed kernel that grows with s², splits its
      // b·heads matrices over the pool once they are big enough to pay for
      // the wake-up (a 64×64 matrix per head: about 0.3 ms a layer on one thread).
      const k = pool.prepare(mod.module, memory, mod.instance, 'softmax_part');
      await k.ready;
      const one = fixed.softmax, parts = pool.size;
      fixed.softmax = (p, b, heads, s, lens, inv) =>
        s >= 64 ? pool.run(k, [p, b, heads, s, lens, inv, parts], parts) : one(p, b, heads, s, lens, inv);
    }
    return new SentenceEncoder({ webtune, manifest, memory, fixed, tokenizer, base, bytes: weights.byteLength, maxBatch, report, int16: opts.precision === 'int16', pre });
  }

  /** Token ids of one text: [CLS] … [SEP], at most max_seq_length of them. */
  tokenize(text: string): number[] {
    const max = this.manifest.max_seq_length;
    // Tokenise a prefix that ends at whitespace, growing it until it gives
    // more than `max` tokens: BERT's tokens never cross whitespace, so the
    // first tokens are the same as the whole text's, and a 1 MB text costs
    // no more than a few KB of it.
    let ids: number[];
    for (let len = 16 * max; ; len *= 2) {
      if (len >= text.length) {
        ids = this.tokenizer.encode(text).ids;
        break;
      }
      let cut = len;
      while (cut < text.length && !/\s/.test(text[cut])) cut++;
      ids = this.tokenizer.encode(text.slice(0, cut)).ids;
      if (ids.length > max || cut >= text.length) break;
    }
    if (ids.length > max) ids = [...ids.slice(0, max - 1), ids[ids.length - 1]];
    return ids;
  }

  /**
   * One embedding per text (`dim` floats, L2-normalised when the model says
   * so). Texts are grouped by length into batches padded to a bucket.
   */
  encode(texts: string[]): Promise<Float32Array[]> {
    if (!Array.isArray(texts)) return Promise.reject(new TypeError('encode: expected an array of strings'));
    if (texts.length === 0) return Promise.reject(new Error('encode: the list of texts is empty'));
    const bad = texts.findIndex((t) => typeof t !== 'string');
    if (bad >= 0) return Promise.reject(new TypeError(`encode: texts[${bad}] is ${texts[bad] === null ? 'null' : typeof texts[bad]}, expected a string`));
    const gpu = this.gpu;
    const run = this.queue.then(() => (gpu ? gpu.encode(texts.map((t) => this.tokenize(t))) : this.encodeNow(texts)));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async encodeNow(texts: string[]): Promise<Float32Array[]> {
    const toks = texts.map((t) => this.tokenize(t));
    const order = toks.map((_, i) => i).sort((a, b) => toks[a].length - toks[b].length);
    const out: Float32Array[] = new Array(texts.length);
    for (let at = 0; at < order.length; at += this.maxBatch) {
      const idx = order.slice(at, at + this.maxBatch);
      const longest = Math.max(...idx.map((i) => toks[i].length));
      const top = Math.ceil(this.manifest.max_seq_length / 4) * 4;
      const s = LENGTHS.find((l) => l >= longest && l <= top) ?? top;
      const bucket = await this.bucket(pow2(idx.length), s);
      const t0 = performance.now();
      // One call of the plan guard's (kind: the bucket): tuning never leaves a bucket slower than its first kernels.
      const batch = idx.map((i) => toks[i]);
      this.webtune.guard.call(`${bucket.b}x${bucket.s}`, bucket.kernels, () => this.run(bucket, batch));
      if (bucket.calls++ > 0) void this.latency?.add(this.webtune.session.session_id, 'wasm', bucket.b, bucket.s, performance.now() - t0);
      const H = this.dim;
      for (let j = 0; j < idx.length; j++) out[idx[j]] = this.f32.slice(bucket.pooled / 4 + j * H, bucket.pooled / 4 + (j + 1) * H);
    }
    return out;
  }

  /** The bucket's buffers and kernels, made once. */
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
    const M = b * s;
    const wt = this.webtune;
    // Kernels first: binding one may append scratch pages to the memory.
    const mm = this.int16 ? 'matmul_i16' : 'matmul';
    const [qkvK, scoresK, contextK, outK, upK, downK] = await Promise.all([
      wt.wasmKernel(mm, [M, H, 3 * H]),
      wt.wasmKernel('batch_matmul', [b * heads, s, d, s]),
      wt.wasmKernel('batch_matmul', [b * heads, s, s, d]),
      wt.wasmKernel(mm, [M, H, H]),
      wt.wasmKernel(`${mm}+bias+gelu`, [M, H, I]),
      wt.wasmKernel(mm, [M, I, H]),
    ]);
    const sizes: Record<string, number> = {
      ids: M, lens: b, ones: b, x: M * H, qkv: M * 3 * H, q: M * H, kt: M * H, v: M * H, p: b * heads * s * s, inv: b * heads * s,
      ctx: M * H, merged: M * H, proj: M * H, ffn: M * I, pooled: b * H,
      ...(this.int16 ? { qa: (M * Math.max(H, I)) / 2, sa: M } : {}),
    };
    let end = Math.ceil(this.memory.buffer.byteLength / 64) * 64;
    const offsets: Record<string, number> = { qa: 0, sa: 0 };
    for (const [name, n] of Object.entries(sizes)) {
      offsets[name] = end;
      end = Math.ceil((end + n * 4) / 64) * 64;
    }
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE));
    this.i32 = new Int32Array(this.memory.buffer);
    this.f32 = new Float32Array(this.memory.buffer);
    this.i32.fill(1, offsets.ones / 4, offsets.ones / 4 + b);
    const kernels = [...new Set([qkvK, scoresK, contextK, outK, upK, downK])];
    return { b, s, calls: 0, ...(offsets as Omit<Bucket, 'b' | 's' | 'calls' | 'qkvK' | 'scoresK' | 'contextK' | 'outK' | 'upK' | 'downK' | 'kernels'>), qkvK, scoresK, contextK, outK, upK, downK, kernels };
  }

  /** Runs one padded batch through the model into `bk.pooled`; synchronous, so no kernel swaps mid-batch. */
  private run(bk: Bucket, toks: number[][]): void {
    const c = this.manifest.config, H = c.hidden_size, I = c.intermediate_size, heads = c.num_attention_heads, d = H / heads;
    const eps = c.layer_norm_eps, { b, s } = bk, M = b * s, f = this.fixed;
    if (this.i32.buffer !== this.memory.buffer) {
      // A kernel swap grew the memory since the last call.
      this.i32 = new Int32Array(this.memory.buffer);
      this.f32 = new Float32Array(this.memory.buffer);
    }
    const ids = this.i32, i0 = bk.ids / 4, l0 = bk.lens / 4;
    ids.fill(0, i0, i0 + M);
    ids.fill(0, l0, l0 + b);
    for (let j = 0; j < toks.length; j++) {
      ids.set(toks[j], i0 + j * s);
      ids[l0 + j] = toks[j].length;
    }
    const e = this.emb;
    if (e.wordScale) f.embed_q16(bk.ids, e.word, e.wordScale, e.pos, e.type, e.gamma, e.beta, bk.x, M, s, H, eps);
    else f.embed(bk.ids, e.word, e.pos, e.type, e.gamma, e.beta, bk.x, M, s, H, eps);
    // x · W (+ bias, GELU fused) for a weight W of K rows: fp32 `matmul`, or
    // with int16 x quantised by rows into qa/sa, then `matmul_i16` on W's
    // words and column scales `ws`.
    const product = (k: WasmKernel, x: number, K: number, w: number, ws: number, out: number, bias?: number): void => {
      const tail = bias === undefined ? [out] : [bias, out];
      if (!this.int16) return k.run(x, w, ...tail);
      f.quant_rows(x, M, K, qmaxA(K), bk.qa, bk.sa);
      k.run(bk.qa, w, bk.sa, ws, ...tail);
    };
    for (const L of this.layers) {
      product(bk.qkvK, bk.x, H, L.qkvW, L.qkvS, bk.qkv);
      f.split_heads(bk.qkv, L.qkvB, bk.q, bk.kt, bk.v, b, s, heads, d, 1 / Math.sqrt(d));
      bk.scoresK.run(bk.q, bk.kt, bk.p);
      f.softmax(bk.p, b, heads, s, bk.lens, bk.inv);
      bk.contextK.run(bk.p, bk.v, bk.ctx);
      f.merge_heads(bk.ctx, bk.inv, bk.merged, b, s, heads, d);
      product(bk.outK, bk.merged, H, L.outW, L.outS, bk.proj);
      f.add_ln(bk.proj, L.outB, bk.x, L.ln1G, L.ln1B, bk.x, M, H, eps);
      product(bk.upK, bk.x, H, L.inW, L.inS, bk.ffn, L.inB);
      product(bk.downK, bk.ffn, I, L.ffnW, L.ffnS, bk.proj);
      f.add_ln(bk.proj, L.ffnB, bk.x, L.ln2G, L.ln2B, bk.x, M, H, eps);
    }
    const cls = this.manifest.pooling === 'cls';
    f.pool(bk.x, cls ? bk.ones : bk.lens, bk.pooled, toks.length, s, H, this.manifest.normalize ? 1 : 0);
  }

  /** Tunes the model's kernels for up to `budgetMs` (see `Webtune.idle`). */
  idle(budgetMs?: number): ReturnType<Webtune['idle']> {
    return this.webtune.idle(budgetMs);
  }

  /** The target this encoder runs on. */
  get target(): 'wasm' | 'webgpu' {
    return this.gpu ? 'webgpu' : 'wasm';
  }

  close(): void {
    this.gpu?.destroy();
    this.webtune.close();
  }

  /**
   * `target: 'auto'`. The plan is asked with a WebGPU session's device key
   * (the GPU is what tells devices apart for this choice: the same CPU with
   * another GPU can flip it), at batch 1 and `autoLength` tokens, before
   * any weights are fetched. With no plan yet, both targets are loaded, each
   * encodes the same text (one untimed call, then 5 timed), both medians are
   * reported through that session, and the faster is kept: the next device
   * of this class gets the plan's answer and loads one target only.
   */
  private static async loadAuto(opts: EncoderLoadOptions): Promise<SentenceEncoder> {
    const want = Math.max(3, Math.floor(opts.autoLength ?? 128));
    const server = (opts.server ?? globalThis.location?.origin ?? '').replace(/\/+$/, '');
    let probe: Webtune;
    try {
      probe = await Webtune.open({ server, target: 'webgpu', device: opts.device, tune: false, cache: false });
    } catch (e) {
      const wasm = await SentenceEncoder.load({ ...opts, target: 'wasm' });
      const seq = LENGTHS.find((l) => l >= Math.min(want, wasm.manifest.max_seq_length)) ?? wasm.manifest.max_seq_length;
      wasm.choice = { target: 'wasm', how: 'no-webgpu', reason: `WebGPU did not open: ${e instanceof Error ? e.message : e}`, seq_len: seq };
      return wasm;
    }
    const device = probe.device!;
    const one = (target: 'wasm' | 'webgpu') => SentenceEncoder.load({ ...opts, target, device: target === 'webgpu' ? device : undefined });
    try {
      const res = await fetch(`${server}/v1/models/${encodeURIComponent(opts.model)}`);
      if (!res.ok) return await one('wasm'); // load() says what is wrong with the model, in one line
      const max = ((await res.json()) as ModelManifest).max_seq_length;
      const seq = LENGTHS.find((l) => l >= Math.min(want, max)) ?? max;
      const seqLen = Math.min(seq, max);
      const plan = await fetchPlan(server, opts.model, probe.session.device_key, 1, seqLen).catch((e) => ({ target: null, reason: String(e) }));
      if (plan.target) {
        const enc = await one(plan.target);
        enc.choice = { target: plan.target, how: 'plan', reason: plan.reason ?? '', seq_len: seq };
        return enc;
      }
      const gpu = await one('webgpu');
      let wasm: SentenceEncoder;
      try {
        wasm = await one('wasm');
      } catch (e) {
        gpu.close();
        throw e;
      }
      // A text of `want` tokens: one word a token between [CLS] and [SEP].
      let words = Array.from({ length: Math.max(1, want - 2) }, () => 'word');
      while (words.length > 1 && gpu.tokenize(words.join(' ')).length > want) words = words.slice(1);
      const text = [words.join(' ')];
      const time = async (enc: SentenceEncoder) => {
        await enc.encode(text);
        const ms: number[] = [];
        for (let i = 0; i < 5; i++) {
          const t = performance.now();
          await enc.encode(text);
          ms.push(performance.now() - t);
        }
        return median(ms);
      };
      const ms = { webgpu: await time(gpu), wasm: await time(wasm) };
      const faster = ms.wasm <= ms.webgpu ? 'wasm' : 'webgpu';
      const log = new LatencyLog(server, opts.model, max);
      for (const target of ['wasm', 'webgpu'] as const)
        await log.report({ session_id: probe.session.session_id, target, batch: 1, seq_len: seqLen, median_ms: ms[target], runs: 5 });
      const [keep, drop] = faster === 'wasm' ? [wasm, gpu] : [gpu, wasm];
      drop.close();
      keep.choice = {
        target: faster, how: 'measured', ms, seq_len: seq,
        reason: `no plan for this device class yet (${plan.reason ?? 'none'}); measured wasm ${ms.wasm.toFixed(1)} ms, webgpu ${ms.webgpu.toFixed(1)} ms`,
      };
      return keep;
    } finally {
      probe.close();
    }
  }
}
