// TextGenerator: a llama-family language model from a `webtune model import`
// bundle (manifest format 2, e.g. SmolLM2-135M-Instruct from its GGUF file),
// run by a backend of its decoder graph: on Wasm (decoder.ts, the fixed
// kernels of decoder-kernels.wat) or on WebGPU (decoder-gpu.ts, those of
// decoder-kernels.wgsl, the next token sampled on the GPU); every matrix
// product on webtune's tuned kernels of the target (matmul_q4_1,
// matmul_q8_0, ... fetched and tuned through the Webtune session like
// SentenceEncoder's). `target: 'auto'` picks one by measurement (see
// `TextGenerator.choice`).
//
// Policies (the same in `generate` and `chat`):
// - One generation at a time per generator: a call made while another
//   streams waits for it to end (finish, `break` out of it, or abort it).
//   Each call starts from an empty cache (position 0).
// - The prompt is tokenised as is (special tokens written in it, such as
//   `<|im_start|>`, are parsed as special tokens), with the model's BOS
//   token first when its manifest says `add_bos`.
// - An empty prompt (no tokens at all: the model has no BOS to start from)
//   is refused with a RangeError; so is a prompt longer than the context
//   the generator was loaded with (nothing is truncated: load with a larger
//   `context`, or shorten the prompt). Both are thrown by the iterator's
//   first `next()`, before any kernel runs, and the next call works.
// - `maxTokens` 0 yields nothing (and runs nothing). More tokens than the
//   context has room for are capped by it: a prompt of P tokens leaves room
//   for context − P + 1 generated tokens; `stats.finish` says `context`
//   when that is what ended it. Default 256.
// - Generation stops at the model's end-of-generation ids (manifest
//   `special.eog_ids`; never part of the text), after `maxTokens`, at the
//   first `stop` string (the text before it is yielded, the stop string and
//   what follows are not; text that could still become a stop string is held
//   back until it cannot), or when `signal` aborts: then the iterator ends
//   quietly after the text already yielded (the step in flight finishes
//   first; `stats.finish` is `abort`), and the next call works as usual.
// - Text is yielded as decoded, only when complete: bytes of a character
//   that later tokens finish are held back until they do (a character
//   split over tokens is never yielded as U+FFFD), and special tokens the
//   model emits are not text.
// - `temperature` 0 (the default) is greedy: the first largest logit, the
//   same tokens every time and as `webtune generate`. Otherwise sampling is
//   sampler.ts's (the native runner's rule, bit for bit from the same seed).

import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { sha256Hex } from './bundle.js';
import { type DecoderGraph, type DecoderTensor, GraphDecoder } from './decoder.js';
import { GpuDecoder, MAX_AHEAD } from './decoder-gpu.js';
import { LatencyLog, fetchPlan } from './latency.js';
import type { OpName } from './ops.js';
import { Sampler, seedOf } from './sampler.js';
import { median } from './stats.js';
import { threadsWanted } from './threads.js';
import { type Policy, type WasmKernel, Webtune } from './webtune.js';

declare const __WEBTUNE_DECODER_KERNELS__: string;

/** Positions a generator holds by default (at most the model's). */
export const DEFAULT_CONTEXT = 2048;
/** Tokens `generate` makes by default. */
export const DEFAULT_MAX_TOKENS = 256;

export interface GeneratorLoadOptions {
  /** Base URL of the webtune server; default: this page's origin. */
  server?: string;
  /** The model's name in the server's store (`GET /v1/models` lists them). */
  model: string;
  /**
   * `'wasm'`, `'webgpu'` (the decode step on the GPU: one submit and one
   * token id read back per token; refused in one line where WebGPU is
   * absent), or `'auto'`: the faster of the two on this device class, by
   * measurement (see `TextGenerator.choice`): the server's plan for this
   * class if it has one, else both are loaded and timed on the same decode
   * steps here, reported, and the faster is kept (Wasm where WebGPU does
   * not open).
   */
  target: 'wasm' | 'webgpu' | 'auto';
  /** WebGPU: the app's GPUDevice; one is requested if absent. */
  device?: GPUDevice;
  /** WebGPU: the adapter to fingerprint (see `Webtune.open`). */
  adapter?: GPUAdapter;
  /** `'auto'`: the position up to which the targets' decode steps are compared (a prompt that long, then a few steps). Default 128. */
  autoLength?: number;
  /**
   * Threads a kernel may use (see `Webtune.open`). Default: the device's
   * cores, at most 8, where the page is cross-origin isolated.
   */
  threads?: number;
  /**
   * Positions the key/value caches hold: the longest prompt plus generated
   * text. Memory grows with it (SmolLM2-135M: 46 KB a position, so 94 MB at
   * 2048). Default: 2048, or the model's context if smaller.
   */
  context?: number;
  /**
   * WebGPU: decode steps a submit (1 to 4; GpuDecoderInit.stepsPerSubmit).
   * Default 1; tokens of a generation then stream in groups of this many.
   */
  stepsPerSubmit?: number;
  /** Tune the model's kernels in `idle()`. Default true. */
  tune?: boolean;
  /** Tune in the bench worker (see `Webtune.open`). Default false. */
  worker?: boolean;
  /** Longest time one `idle()` call may take, ms. Default 8. */
  budgetMs?: number;
  /** Use the IndexedDB cache of winning kernels. Default true. */
  cache?: boolean;
  /** Candidates to evaluate per kernel at most (see `Webtune.open`). Default: all. */
  maxCandidates?: number;
  /** The tuning policy (see `Webtune.open`). Default `'fast'`. */
  policy?: Policy;
  /**
   * Report the per-token decode latency to the server (`POST
   * /v1/models/{name}/latency`, batch 1, seq_len the power of two at least
   * 64 that holds the position, after 5, 15 and 50 tokens of a length
   * bucket, then every 200). Default true.
   */
  report?: boolean;
}

export interface GenerateOptions {
  /** Tokens to generate at most (0: none). Default 256; capped by the context. */
  maxTokens?: number;
  /** 0 (default): greedy. Otherwise the softmax temperature. */
  temperature?: number;
  /** Sample from the k most likely tokens only; 0 (default): all. */
  topK?: number;
  /** Sample from the smallest set of most likely tokens whose probability reaches p; 1 (default): all. */
  topP?: number;
  /** The sampler's seed (a u64). Default 0. */
  seed?: number | bigint;
  /** Strings that end the text (not yielded themselves). */
  stop?: string | string[];
  /** Stops the generation: the iterator ends after the text so far. */
  signal?: AbortSignal;
}

/** One message of a chat. */
export interface ChatMessage {
  role: string;
  content: string;
}

/** How the latest generation went. */
export interface GenerationStats {
  promptTokens: number;
  /** Tokens sampled (end-of-generation ids not counted). */
  generatedTokens: number;
  /**
   * Why it ended: an end-of-generation id, `maxTokens`, the context full,
   * a stop string, or `abort`: the signal, or the caller stopped iterating.
   */
  finish: 'eog' | 'length' | 'context' | 'stop' | 'abort';
  /** Time to feed the prompt, ms. */
  prefillMs: number;
  /** Time of the decode steps (one token each), ms; per step in `stepMs`. */
  decodeMs: number;
  stepMs: number[];
}

interface BlobRef {
  sha256: string;
  bytes: number;
  url: string;
}

/** A language model's bundle manifest (format 2, docs/model-bundle.md). */
export interface LlmManifest {
  format: 2;
  name: string;
  architecture: string;
  task?: string;
  source?: { file: string; sha256: string };
  config: {
    vocab_size: number; hidden_size: number; num_layers: number; num_heads: number; num_kv_heads: number;
    head_dim: number; ffn_size: number; rope_theta: number; rms_eps: number; context_length: number; tied_embeddings: boolean;
  };
  tokenizer: BlobRef;
  chat_template: string | null;
  special: { bos_id: number | null; eos_id: number | null; eog_ids: number[]; add_bos: boolean };
  weights: BlobRef;
  tensors: DecoderTensor[];
}

function fromBase64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * The bundle's tokenizer.json made to tokenise here as the Rust
 * `tokenizers` crate does: its `Digits` pre-tokenizer splits at every
 * Unicode number (general categories Nd, Nl, No: `char::is_numeric`), but
 * @huggingface/tokenizers' splits at ASCII `\d` only, so `½ ² ٣` would
 * group with their neighbours. It becomes the same split written as a
 * `Split` on `\p{N}` (which that package runs as a Unicode regex).
 * @internal
 */
export function adaptTokenizer(json: { pre_tokenizer?: unknown }): void {
  type Pre = { type?: string; individual_digits?: boolean; pretokenizers?: Pre[] } | null;
  const fix = (p: Pre): Pre => {
    if (!p || typeof p !== 'object') return p;
    if (p.type === 'Sequence' && Array.isArray(p.pretokenizers)) return { ...p, pretokenizers: p.pretokenizers.map(fix) };
    if (p.type === 'Digits')
      return { type: 'Split', pattern: { Regex: p.individual_digits ? '[^\\p{N}]+|\\p{N}' : '[^\\p{N}]+|\\p{N}+' }, behavior: 'Isolated', invert: true } as Pre;
    return p;
  };
  json.pre_tokenizer = fix((json.pre_tokenizer ?? null) as Pre);
}

/** Resolves after one turn of the event loop (abort events and rendering get their turn). */
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    const c = new MessageChannel();
    c.port1.onmessage = () => {
      c.port1.close();
      resolve();
    };
    c.port2.postMessage(null);
  });
}

/** A generation's options checked, with their defaults. */
interface Checked {
  maxTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  seed: bigint;
  stop: string[];
  signal: AbortSignal | null;
}

function checkOptions(o: GenerateOptions | undefined): Checked {
  if (o !== undefined && (o === null || typeof o !== 'object')) throw new TypeError('generate: options must be an object');
  const opts = o ?? {};
  const maxTokens = opts.maxTokens ?? DEFAULT_MAX_TOKENS;
  if (!(maxTokens === Infinity || (Number.isInteger(maxTokens) && maxTokens >= 0)))
    throw new RangeError(`maxTokens must be a non-negative integer (or Infinity: up to the context), got ${String(opts.maxTokens)}`);
  const temperature = opts.temperature ?? 0;
  if (typeof temperature !== 'number' || !(temperature >= 0) || !Number.isFinite(temperature)) throw new RangeError(`temperature must be a finite number ≥ 0, got ${String(opts.temperature)}`);
  const topK = opts.topK ?? 0;
  if (!Number.isInteger(topK) || topK < 0) throw new RangeError(`topK must be a non-negative integer (0: all), got ${String(opts.topK)}`);
  const topP = opts.topP ?? 1;
  if (typeof topP !== 'number' || !(topP > 0 && topP <= 1)) throw new RangeError(`topP must be in (0, 1], got ${String(opts.topP)}`);
  const seed = seedOf(opts.seed ?? 0);
  const stop = opts.stop === undefined ? [] : typeof opts.stop === 'string' ? [opts.stop] : opts.stop;
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== 'string' || !s)) throw new TypeError('stop must be a non-empty string or an array of them');
  const signal = opts.signal ?? null;
  if (signal !== null && !(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
  return { maxTokens, temperature, topK, topP, seed, stop: [...stop], signal };
}

/**
 * Incremental detokenisation: the text of the ids pushed so far, handed
 * out only when complete (the window from the last complete boundary is
 * decoded again as tokens arrive, until it no longer ends in U+FFFD).
 * @internal
 */
export class TextStream {
  private ids: number[] = [];
  private prefix = 0;
  private read = 0;

  constructor(private decode: (ids: number[]) => string) {}

  push(id: number): string {
    this.ids.push(id);
    const before = this.decode(this.ids.slice(this.prefix, this.read));
    const now = this.decode(this.ids.slice(this.prefix));
    if (now.length > before.length && !now.endsWith('\uFFFD')) {
      this.prefix = this.read;
      this.read = this.ids.length;
      return now.slice(before.length);
    }
    return '';
  }

  /** Whatever is left, complete or not (the end of the text). */
  flush(): string {
    const before = this.decode(this.ids.slice(this.prefix, this.read));
    const now = this.decode(this.ids.slice(this.prefix));
    this.prefix = this.read = this.ids.length;
    return now.length > before.length ? now.slice(before.length) : '';
  }
}

/**
 * Holds back text that might begin a stop string: `push` returns what can
 * be yielded and whether a stop string ended the text.
 * @internal
 */
export class StopFilter {
  private pending = '';

  constructor(private stops: string[]) {}

  push(text: string): { out: string; stopped: boolean } {
    this.pending += text;
    let cut = -1;
    for (const s of this.stops) {
      const i = this.pending.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) {
      const out = this.pending.slice(0, cut);
      this.pending = '';
      return { out, stopped: true };
    }
    // The longest end of the text that begins some stop string.
    let hold = 0;
    for (const s of this.stops)
      for (let k = Math.min(s.length - 1, this.pending.length); k > hold; k--)
        if (this.pending.endsWith(s.slice(0, k))) {
          hold = k;
          break;
        }
    const out = this.pending.slice(0, this.pending.length - hold);
    this.pending = this.pending.slice(this.pending.length - hold);
    return { out, stopped: false };
  }

  flush(): string {
    const out = this.pending;
    this.pending = '';
    return out;
  }
}

/** How `target: 'auto'` chose. */
export interface GeneratorChoice {
  target: 'wasm' | 'webgpu';
  /**
   * `plan`: the server's plan for this device class; `measured`: both timed
   * here (and reported); `no-webgpu`: WebGPU did not open or could not hold
   * the model; `device-lost`: the GPU device was lost after loading, and
   * the model runs on Wasm since the call after.
   */
  how: 'plan' | 'measured' | 'no-webgpu' | 'device-lost';
  reason: string;
  /** `measured`: median ms of a decode step of each target at positions up to `seq_len`. */
  ms?: { wasm: number; webgpu: number };
  seq_len: number;
}

/** What TextGenerator drives: a backend of the decoder graph. */
interface Backend {
  readonly graph: DecoderGraph;
  readonly context: number;
  readonly position: number;
  /** The largest bucket: a prompt is fed in chunks of it. */
  readonly chunk: number;
  readonly memoryBytes: number;
  reset(): void;
  /** Feeds ids; a copy of the logits after the last. */
  forward(ids: number[]): Promise<Float32Array>;
  /** Feeds ids, reading nothing back. */
  prefill(ids: number[]): Promise<void>;
  /** Feeds ids; the next token by `sampler`'s rule. */
  next(ids: number[], sampler: Sampler): Promise<number>;
  /** Decode steps from `first` (the latest token, already sampled): at most `limit`, by `sampler`'s rule. */
  steps(first: number, sampler: Sampler, limit: number): Stepper;
  close(): void;
}

/** Decode steps one after another: `next` gives the token after the latest; `close` when done (steps run ahead and unused are forgotten). */
interface Stepper {
  next(): Promise<number>;
  close(): Promise<void>;
}

/** One step at a time, each fed the token the host read: the Wasm backend's, and WebGPU's without steps ahead. */
function stepByStep(backend: Backend, first: number, sampler: Sampler): Stepper {
  let tok = first;
  return { next: async () => (tok = await backend.next([tok], sampler)), close: async () => {} };
}

class WasmBackend implements Backend {
  constructor(readonly dec: GraphDecoder) {}
  get graph() { return this.dec.graph; }
  get context() { return this.dec.context; }
  get position() { return this.dec.position; }
  get chunk() { return this.dec.layout.maxRows; }
  get memoryBytes() { return this.dec.memoryBytes; }
  reset() { this.dec.reset(); }
  async forward(ids: number[]) { return (await this.dec.feed(ids)).slice(); }
  async prefill(ids: number[]) { await this.dec.feed(ids); }
  async next(ids: number[], sampler: Sampler) { return sampler.sample(await this.dec.feed(ids)); }
  steps(first: number, sampler: Sampler) { return stepByStep(this, first, sampler); }
  close() {}
}

class WebGpuBackend implements Backend {
  constructor(readonly dec: GpuDecoder) {}
  get graph() { return this.dec.graph; }
  get context() { return this.dec.context; }
  get position() { return this.dec.position; }
  get chunk() { return this.dec.maxRows; }
  get memoryBytes() { return this.dec.memoryBytes; }
  reset() { this.dec.reset(); }
  forward(ids: number[]) { return this.dec.feed(ids); }
  prefill(ids: number[]) { return this.dec.prefill(ids); }
  /** Whether the latest token was sampled on the GPU (so that a step ahead can read it there). */
  private onGpu = false;
  async next(ids: number[], sampler: Sampler, draw?: number) {
    // The draw is the host's (the sampler's sequence), the pick the GPU's; the host's where the GPU hands it back.
    const u = draw ?? (sampler.draws ? sampler.uniform() : 0);
    const id = await this.dec.next(ids, this.sampling(sampler, u));
    this.onGpu = id >= 0;
    return id >= 0 ? id : sampler.pick(await this.dec.logits(), u);
  }
  private sampling(sampler: Sampler, u: number) {
    const s = sampler.sampling;
    return { temperature: s.temperature, topK: Math.min(s.topK, this.dec.graph.vocab), topP: Math.fround(s.topP), u };
  }
  /**
   * Up to MAX_AHEAD steps submitted before their tokens are read, each fed
   * the token the step before sampled on the GPU, so that the host records
   * the next steps while the GPU runs one (the decode step's host time,
   * 3.1 ms on an H200 host in Node, no longer adds to the GPU's). The draws
   * are the sampler's sequence, as step by step. Where the GPU hands a pick
   * back (-1), the steps after it were fed nothing real: they are waited
   * out and forgotten, and that step is run again step by step with its own
   * draw (the host picks from its logits); their draws are used again.
   */
  steps(first: number, sampler: Sampler, limit: number): Stepper {
    if (!this.onGpu) return stepByStep(this, first, sampler);
    const dec = this.dec;
    let prev = first, taken = 0;
    const queue: { id: Promise<number>; u: number }[] = [];
    const again: number[] = [];
    const draw = () => again.shift() ?? (sampler.draws ? sampler.uniform() : 0);
    // With stepsPerSubmit k > 1: k steps a submit, the next k recorded while the GPU runs the last.
    const k = dec.stepsPerSubmit, depth = dec.aheadLimit;
    const fill = () => {
      for (;;) {
        const left = limit - taken - queue.length;
        if (!this.onGpu || left < 1) return;
        if (k > 1 && dec.canBatch) {
          const n = Math.min(k, left);
          if (queue.length + n > depth) return;
          const us = Array.from({ length: n }, draw);
          const ids = dec.aheadMany(us.map((u) => this.sampling(sampler, u)));
          ids.forEach((id, i) => {
            id.catch(() => {});
            queue.push({ id, u: us[i] });
          });
          continue;
        }
        if (queue.length >= MAX_AHEAD) return;
        const u = draw();
        const id = dec.ahead(this.sampling(sampler, u));
        id.catch(() => {});
        queue.push({ id, u });
      }
    };
    const drain = async () => {
      const left = queue.splice(0);
      await Promise.allSettled(left.map((q) => q.id));
      dec.rewind(left.length);
      return left;
    };
    return {
      next: async () => {
        fill();
        const head = queue.shift();
        if (!head) {
          taken++;
          return (prev = await this.next([prev], sampler, again.shift()));
        }
        const id = await head.id;
        taken++;
        if (id >= 0) {
          fill();
          return (prev = id);
        }
        // The GPU could not pick: forget the steps after it and this one, then run it again by the host's rule.
        const left = await drain();
        dec.rewind(1);
        again.unshift(...left.map((q) => q.u));
        prev = await this.next([prev], sampler, head.u);
        return prev;
      },
      close: async () => {
        again.push(...(await drain()).map((q) => q.u));
      },
    };
  }
  close() { this.dec.destroy(); }
}

export class TextGenerator {
  /** `target: 'auto'`: which target it chose and why; null otherwise. */
  choice: GeneratorChoice | null = null;
  /** The webtune session whose kernels run the model (tuning, events, status); a new one after a fallback to Wasm. */
  webtune: Webtune;
  readonly manifest: LlmManifest;
  /** The decoder graph the backend runs (served by `GET /v1/models/{name}/graph`). */
  readonly graph: DecoderGraph;
  /** Positions the caches hold: the longest prompt plus generated text. */
  readonly context: number;
  /** How the latest `generate`/`chat` went; null before the first. */
  stats: GenerationStats | null = null;
  private decoder: Backend;
  private tokenizer: Tokenizer;
  private template: Template | null;
  private eog: Set<number>;
  private tail: Promise<void> = Promise.resolve();
  /** Turns taken or waited for (`lock`): a generation or a low-level call in flight when > 0. */
  private locks = 0;
  private latency: LatencyLog | null;
  private closed = false;
  /** `target: 'auto'` on WebGPU: loads the model on Wasm, for when the GPU device is lost. */
  private fallback: (() => Promise<TextGenerator>) | null = null;

  private constructor(init: { webtune: Webtune; manifest: LlmManifest; decoder: GraphDecoder | GpuDecoder; tokenizer: Tokenizer; report: boolean }) {
    this.webtune = init.webtune;
    this.manifest = init.manifest;
    // By shape, not class (tests build the backends from bundles of their own).
    this.decoder = 'memory' in init.decoder ? new WasmBackend(init.decoder) : new WebGpuBackend(init.decoder);
    this.graph = init.decoder.graph;
    this.context = init.decoder.context;
    this.tokenizer = init.tokenizer;
    this.template = init.manifest.chat_template ? new Template(init.manifest.chat_template) : null;
    this.eog = new Set(init.manifest.special?.eog_ids ?? []);
    this.latency = init.report ? new LatencyLog(init.webtune.server, init.manifest.name, this.context) : null;
  }

  /** The target running the model. */
  get target(): 'wasm' | 'webgpu' {
    return this.decoder instanceof WebGpuBackend ? 'webgpu' : 'wasm';
  }

  /** WebGPU: the backend (for benchmarks: `profile`, `stats`); null on Wasm. */
  get gpu(): GpuDecoder | null {
    return this.decoder instanceof WebGpuBackend ? this.decoder.dec : null;
  }

  /** WebGPU: dispatches of one decode step (the sampling included), as last run; null on Wasm or before the first step. */
  get dispatchesPerToken(): number | null {
    return this.decoder instanceof WebGpuBackend && this.decoder.dec.stats.dispatchesPerToken > 0 ? this.decoder.dec.stats.dispatchesPerToken : null;
  }

  /**
   * Fetches the model's manifest, decoder graph, weights and tokenizer from
   * the server (each blob checked against its SHA-256 address), lays the
   * model out (Wasm: in one memory; WebGPU: in GPU buffers, the weights
   * uploaded once), opens a webtune session of the target and fetches the
   * decode step's kernels (a prompt's prefill buckets are fetched on their
   * first use).
   */
  static async load(opts: GeneratorLoadOptions): Promise<TextGenerator> {
    if (!opts || typeof opts.model !== 'string' || !opts.model) throw new TypeError('TextGenerator.load: `model` must be a model name (GET /v1/models lists them)');
    if (opts.target === 'auto') return TextGenerator.loadAuto(opts);
    if (opts.target !== 'wasm' && opts.target !== 'webgpu') throw new TypeError(`TextGenerator.load: target must be 'wasm', 'webgpu' or 'auto', got ${String(opts.target)}`);
    if (opts.target === 'webgpu' && !opts.device && !globalThis.navigator?.gpu)
      throw new Error("TextGenerator.load: WebGPU is not available here (no navigator.gpu): load with target 'wasm', or 'auto' to use WebGPU where it is");
    if (opts.context !== undefined && !(Number.isInteger(opts.context) && opts.context >= 1))
      throw new RangeError(`TextGenerator.load: context must be a positive integer, got ${String(opts.context)}`);
    const server = (opts.server ?? globalThis.location?.origin ?? '').replace(/\/+$/, '');
    const name = opts.model;
    const url = `${server}/v1/models/${encodeURIComponent(name)}`;
    const res = await fetch(url);
    if (res.status === 404) throw new Error(`model "${name}" is not on ${server} (import it with \`webtune model import\`; GET /v1/models lists the models there)`);
    if (!res.ok) throw new Error(`model "${name}": manifest HTTP ${res.status}`);
    const manifest = (await res.json()) as LlmManifest;
    if (manifest.format !== 2) throw new Error(`model "${name}": bundle format ${manifest.format}, TextGenerator reads format 2 (a language model imported from a GGUF file)`);
    if (manifest.architecture !== 'llama') throw new Error(`model "${name}": architecture ${manifest.architecture}, TextGenerator runs llama`);
    const context = Math.min(opts.context ?? DEFAULT_CONTEXT, manifest.config.context_length);
    if (opts.context !== undefined && opts.context > manifest.config.context_length)
      throw new RangeError(`TextGenerator.load: context ${opts.context} is over the model's ${manifest.config.context_length}`);
    const gres = await fetch(`${url}/graph`);
    if (!gres.ok) throw new Error(`model "${name}": decoder graph HTTP ${gres.status} (GET /v1/models/${name}/graph)`);
    const graph = (await gres.json()) as DecoderGraph;

    const blob = async (b: BlobRef, what: string): Promise<ArrayBuffer> => {
      if (!b || typeof b.url !== 'string') throw new Error(`model "${name}": the manifest has no ${what} blob`);
      const r = await fetch(b.url.startsWith('http') ? b.url : `${server}${b.url}`);
      if (!r.ok) throw new Error(`model "${name}": ${what} blob HTTP ${r.status}`);
      const bytes = await r.arrayBuffer();
      const got = await sha256Hex(bytes);
      if (bytes.byteLength !== b.bytes || (got !== null && got !== b.sha256))
        throw new Error(`model "${name}": the ${what} blob is corrupt or truncated (${bytes.byteLength} bytes hashing to ${got ?? '?'}; the manifest says ${b.bytes} bytes, ${b.sha256}); nothing was kept`);
      return bytes;
    };
    const [weights, tokBytes] = await Promise.all([blob(manifest.weights, 'weights'), blob(manifest.tokenizer, 'tokenizer')]);
    const tokJson = JSON.parse(new TextDecoder().decode(tokBytes));
    adaptTokenizer(tokJson);
    const tokenizer = new Tokenizer(tokJson, {});
    const report = opts.report ?? true;
    if (opts.target === 'webgpu') {
      const webtune = await Webtune.open({
        server, target: 'webgpu', device: opts.device, adapter: opts.adapter, tune: opts.tune ?? true,
        budgetMs: opts.budgetMs, cache: opts.cache, maxCandidates: opts.maxCandidates,
      });
      let decoder: GpuDecoder | null = null;
      try {
        decoder = await GpuDecoder.create({ device: webtune.device!, graph, tensors: manifest.tensors, weights, context, stepsPerSubmit: opts.stepsPerSubmit });
        const dec = decoder;
        dec.setKernels((op, shape) => webtune.gpuKernel(op as OpName, shape));
        await dec.kernels(1);
      } catch (e) {
        decoder?.destroy();
        webtune.close();
        throw e;
      }
      return new TextGenerator({ webtune, manifest, decoder, tokenizer, report });
    }
    // With threads the memory is shared, and so must be every module's import of it.
    const shared = threadsWanted(opts.threads).count > 1;
    const decoder = await GraphDecoder.create({
      graph, tensors: manifest.tensors, weights, context, shared, fixed: fromBase64(__WEBTUNE_DECODER_KERNELS__),
    });
    const webtune = await Webtune.open({
      server, target: 'wasm', memory: decoder.memory, tune: opts.tune ?? true, worker: opts.worker ?? false, threads: opts.threads,
      budgetMs: opts.budgetMs, cache: opts.cache, maxCandidates: opts.maxCandidates, policy: opts.policy, trials: 'all',
    });
    try {
      // Every run is one call of the plan guard's (kind: its bucket): tuning never leaves the model slower.
      decoder.setKernels((op, shape) => webtune.wasmKernel(op as OpName, shape), {
        call: (kind, kernels, run) => webtune.guard.call(kind, kernels as WasmKernel[], run),
        due: (kind, kernels) => webtune.guard.due(kind, kernels as WasmKernel[]),
      });
      await decoder.kernels(1);
    } catch (e) {
      webtune.close();
      throw e;
    }
    return new TextGenerator({ webtune, manifest, decoder, tokenizer, report });
  }

  /**
   * `target: 'auto'`. The plan is asked with a WebGPU session's device key
   * (the GPU is what tells devices apart for this choice) at batch 1 and
   * `autoLength` positions, before any weights are fetched. With no plan,
   * both targets are loaded, each feeds the same prompt of about
   * `autoLength` − 6 tokens and then times 5 decode steps (greedy, after one
   * untimed), both medians are reported through that session, and the
   * faster is kept.
   */
  private static async loadAuto(opts: GeneratorLoadOptions): Promise<TextGenerator> {
    const server = (opts.server ?? globalThis.location?.origin ?? '').replace(/\/+$/, '');
    const want = Math.max(16, Math.floor(opts.autoLength ?? 128));
    const seq = Math.max(64, 2 ** Math.ceil(Math.log2(want)));
    let probe: Webtune;
    try {
      if (!opts.device && !globalThis.navigator?.gpu) throw new Error('no navigator.gpu');
      probe = await Webtune.open({ server, target: 'webgpu', device: opts.device, adapter: opts.adapter, tune: false, cache: false });
    } catch (e) {
      const wasm = await TextGenerator.load({ ...opts, target: 'wasm' });
      wasm.choice = { target: 'wasm', how: 'no-webgpu', reason: `WebGPU did not open: ${e instanceof Error ? e.message : e}`, seq_len: seq };
      return wasm;
    }
    const device = probe.device!;
    const one = (target: 'wasm' | 'webgpu') => TextGenerator.load({ ...opts, target, device: target === 'webgpu' ? device : undefined });
    // WebGPU, able to go on with Wasm if its device is lost; Wasm where WebGPU cannot hold the model (limits, a refused feature).
    const gpuOrWasm = async (): Promise<TextGenerator> => {
      try {
        const gen = await one('webgpu');
        gen.fallback = () => one('wasm');
        return gen;
      } catch (e) {
        const gen = await one('wasm');
        gen.choice = { target: 'wasm', how: 'no-webgpu', reason: `WebGPU could not load the model: ${e instanceof Error ? e.message : e}`, seq_len: seq };
        return gen;
      }
    };
    try {
      const plan = await fetchPlan(server, opts.model, probe.session.device_key, 1, seq).catch((e) => ({ target: null, reason: String(e) }));
      if (plan.target) {
        const gen = await (plan.target === 'webgpu' ? gpuOrWasm() : one('wasm'));
        gen.choice ??= { target: plan.target, how: 'plan', reason: plan.reason ?? '', seq_len: seq };
        return gen;
      }
      const gpu = await gpuOrWasm();
      if (gpu.target === 'wasm') return gpu;
      let wasm: TextGenerator;
      try {
        wasm = await one('wasm');
      } catch (e) {
        gpu.close();
        throw e;
      }
      const steps = 6;
      const prompt = Array.from({ length: Math.max(1, Math.min(want, gpu.context) - steps - 1) }, (_, i) => 1 + (i % Math.max(1, gpu.graph.vocab - 1)));
      const time = async (g: TextGenerator) => {
        const dec = g.decoder, sampler = new Sampler({ temperature: 0, topK: 0, topP: 1, seed: 0n });
        dec.reset();
        let tok = await dec.next(prompt, sampler);
        const ms: number[] = [];
        for (let i = 0; i < steps; i++) {
          const t0 = performance.now();
          tok = await dec.next([tok], sampler);
          if (i > 0) ms.push(performance.now() - t0);
        }
        dec.reset();
        return median(ms);
      };
      const ms = { webgpu: await time(gpu), wasm: await time(wasm) };
      const faster = ms.wasm <= ms.webgpu ? 'wasm' : 'webgpu';
      const log = new LatencyLog(server, opts.model, gpu.context);
      for (const target of ['wasm', 'webgpu'] as const)
        await log.report({ session_id: probe.session.session_id, target, batch: 1, seq_len: seq, median_ms: ms[target], runs: steps - 1 });
      const [keep, drop] = faster === 'wasm' ? [wasm, gpu] : [gpu, wasm];
      drop.close();
      keep.choice = {
        target: faster, how: 'measured', ms, seq_len: seq,
        reason: `no plan for this device class yet (${plan.reason ?? 'none'}); measured a decode step: wasm ${ms.wasm.toFixed(2)} ms, webgpu ${ms.webgpu.toFixed(2)} ms`,
      };
      return keep;
    } finally {
      probe.close();
    }
  }

  /**
   * At the start of each call: where the GPU device was lost, the model
   * goes on on Wasm (`target: 'auto'`: loaded again there, its caches empty,
   * `choice` saying why), or the call fails in one line (`target:
   * 'webgpu'`). A call in flight when the device goes fails in one line.
   */
  private async recover(): Promise<void> {
    const d = this.decoder;
    if (!(d instanceof WebGpuBackend) || d.dec.lostReason === null) return;
    const reason = d.dec.lostReason;
    if (!this.fallback) throw this.lostLine(null);
    const wasm = await this.fallback();
    d.close();
    this.webtune.close();
    this.decoder = wasm.decoder;
    this.webtune = wasm.webtune;
    this.latency = wasm.latency;
    this.fallback = null;
    this.choice = { target: 'wasm', how: 'device-lost', reason: `the GPU device was lost (${reason}); the model runs on Wasm now`, seq_len: this.choice?.seq_len ?? 0 };
  }

  /** The prompt's token ids as `generate` feeds them (BOS first when the manifest says `add_bos`). */
  tokenize(text: string): number[] {
    if (typeof text !== 'string') throw new TypeError(`expected a string, got ${text === null ? 'null' : typeof text}`);
    const ids = text ? this.tokenizer.encode(text, { add_special_tokens: false }).ids : [];
    const sp = this.manifest.special;
    return sp?.add_bos && sp.bos_id != null ? [sp.bos_id, ...ids] : ids;
  }

  /** The text of token ids (special tokens left out). */
  decode(ids: number[]): string {
    if (!ids.length) return '';
    return this.tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  }

  /** A chat rendered with the model's chat template, ready for the assistant's turn. */
  applyChatTemplate(messages: ChatMessage[]): string {
    if (!this.template) throw new Error(`model "${this.manifest.name}" has no chat template: use generate() with a prompt`);
    if (!Array.isArray(messages) || messages.some((m) => !m || typeof m.role !== 'string' || typeof m.content !== 'string'))
      throw new TypeError('chat: messages must be an array of { role, content } strings');
    const token = (id: number | null | undefined) => (id == null ? '' : (this.tokenizer.id_to_token(id) ?? ''));
    const sp = this.manifest.special;
    return this.template.render({
      messages, add_generation_prompt: true, bos_token: token(sp?.bos_id), eos_token: token(sp?.eos_id),
    });
  }

  /**
   * Generates text after `prompt`, as an async iterator of text pieces as
   * they are decoded (see the header of text-generator.ts for every policy).
   */
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<string, void, undefined> {
    return this.stream(() => this.tokenize(prompt), options);
  }

  /** Generates the assistant's reply to `messages`, rendered with the model's chat template. */
  chat(messages: ChatMessage[], options?: GenerateOptions): AsyncGenerator<string, void, undefined> {
    return this.stream(() => this.tokenize(this.applyChatTemplate(messages)), options);
  }

  /**
   * Low level: feeds `ids` at the next positions (with `reset`, from
   * position 0) and returns a copy of the logits after the last one, e.g.
   * to teacher-force a reference's tokens.
   */
  async forward(ids: number[], { reset = false }: { reset?: boolean } = {}): Promise<Float32Array> {
    if (!Array.isArray(ids)) throw new TypeError('forward: ids must be an array of token ids');
    const release = await this.lock();
    try {
      await this.recover();
      if (reset) this.decoder.reset();
      return await this.decoder.forward(ids);
    } finally {
      release();
    }
  }

  /**
   * Low level: feeds `ids` (with `reset`, from position 0) and returns the
   * greedy next token, whatever it is (end-of-generation ids included), e.g.
   * to run a fixed number of decode steps. On WebGPU its id is all that is
   * read back.
   */
  async nextToken(ids: number[], { reset = false }: { reset?: boolean } = {}): Promise<number> {
    if (!Array.isArray(ids)) throw new TypeError('nextToken: ids must be an array of token ids');
    const release = await this.lock();
    try {
      await this.recover();
      if (reset) this.decoder.reset();
      return await this.decoder.next(ids, new Sampler({ temperature: 0, topK: 0, topP: 1, seed: 0n }));
    } finally {
      release();
    }
  }

  /**
   * Low level: feeds `ids` (with `reset`, from position 0) and returns the
   * next `n` greedy tokens, each step fed the token before whatever it is
   * (end-of-generation ids included), as `generate` runs its steps (on
   * WebGPU, submitted ahead of their read-backs), e.g. to time decoding.
   */
  async nextTokens(ids: number[], n: number, { reset = false }: { reset?: boolean } = {}): Promise<number[]> {
    if (!Array.isArray(ids)) throw new TypeError('nextTokens: ids must be an array of token ids');
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`nextTokens: n must be a positive integer, got ${n}`);
    const from = reset ? 0 : this.decoder.position;
    if (from + ids.length + n - 1 > this.context)
      throw new RangeError(`nextTokens: ${ids.length} tokens and ${n - 1} steps from position ${from} pass the context of ${this.context}`);
    const release = await this.lock();
    let stepper: Stepper | null = null;
    try {
      await this.recover();
      if (reset) this.decoder.reset();
      const sampler = new Sampler({ temperature: 0, topK: 0, topP: 1, seed: 0n });
      const out = [await this.decoder.next(ids, sampler)];
      stepper = this.decoder.steps(out[0], sampler, n - 1);
      while (out.length < n) out.push(await stepper.next());
      return out;
    } finally {
      await this.endTurn(stepper, release);
    }
  }

  /** Positions the caches hold now (after `forward`, or the latest generation). */
  get position(): number {
    return this.decoder.position;
  }

  /** Bytes of memory the model uses: the Wasm memory, or on WebGPU its GPU buffers. */
  get memoryBytes(): number {
    return this.decoder.memoryBytes;
  }

  /**
   * Tunes the model's kernels for up to `budgetMs` (see `Webtune.idle`);
   * call it between generations. On Wasm a candidate that wins on the bench
   * replaces a kernel only once it also wins in the model's own calls (the
   * session's `trials: 'all'`: on the bench its weights stay in cache, in
   * the model every layer's stream from memory). A generation feeds those
   * trials; between generations `idle()` runs model steps that call the
   * kernels on trial (in their bucket, the position kept), at least one per
   * call while a trial is open (a prompt bucket's step may outlast a small
   * budget) and more while the budget lasts.
   */
  async idle(budgetMs?: number): ReturnType<Webtune['idle']> {
    const t0 = performance.now();
    const r = await this.webtune.idle(budgetMs);
    // A generation in flight (or waiting) calls the kernels itself.
    if (!(this.decoder instanceof WasmBackend) || this.locks > 0 || this.closed) return r;
    const dec = this.decoder.dec;
    const budget = budgetMs ?? Math.max(performance.now() - t0, this.webtune.budgetMs);
    const t1 = performance.now();
    let ran = false;
    const release = await this.lock();
    try {
      for (;;) {
        // A bucket with a kernel on trial, or one the plan guard judges or is due to: the smallest first (its runs are the cheapest).
        const m = [...this.webtune.pendingTrials().map((k) => k.shape[0]), ...dec.dueBuckets()]
          .filter((x) => this.graph.buckets.includes(x)).sort((a, b) => a - b)[0];
        if (m === undefined || (ran && performance.now() - t1 >= budget)) break;
        await dec.trialRun(m);
        ran = true;
      }
    } finally {
      release();
    }
    return ran ? { ...r, worked: true } : r;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.decoder.close();
    this.webtune.close();
  }

  /** Waits for the generation in flight, if any; resolves with the release of the next turn. */
  private lock(): Promise<() => void> {
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const prev = this.tail;
    this.tail = prev.then(() => mine);
    this.locks++;
    return prev.then(() => () => {
      this.locks--;
      release();
    });
  }

  private async *stream(prompt: () => number[], options: GenerateOptions | undefined): AsyncGenerator<string, void, undefined> {
    if (this.closed) throw new Error('this TextGenerator is closed');
    const o = checkOptions(options);
    const ids = prompt();
    if (!ids.length) throw new RangeError('the prompt is empty: this model has no BOS token to start from, so give it at least one token of text');
    if (ids.length > this.context)
      throw new RangeError(`the prompt is ${ids.length} tokens, over the context of ${this.context} (load with a larger context, up to the model's ${this.manifest.config.context_length}, or shorten it)`);
    const room = this.context - ids.length + 1;
    const max = Math.min(o.maxTokens, room);
    // `abort` until an end is reached: also what a caller that stops iterating leaves.
    const stats: GenerationStats = { promptTokens: ids.length, generatedTokens: 0, finish: 'abort', prefillMs: 0, decodeMs: 0, stepMs: [] };
    const release = await this.lock();
    this.stats = stats;
    let stepper: Stepper | null = null;
    try {
      await this.recover();
      if (max === 0) {
        stats.finish = 'length';
        return;
      }
      const dec = this.decoder, signal = o.signal;
      if (signal?.aborted) {
        stats.finish = 'abort';
        return;
      }
      dec.reset();
      const sampler = new Sampler({ temperature: o.temperature, topK: o.topK, topP: o.topP, seed: o.seed });
      // The prompt, a bucket at a time, with a turn of the event loop between chunks; the last samples the first token.
      const chunk = dec.chunk;
      const t0 = performance.now();
      let tok = -1;
      for (let at = 0; at < ids.length; at += chunk) {
        if (at > 0) {
          await nextTask();
          if (signal?.aborted) {
            stats.finish = 'abort';
            return;
          }
        }
        if (at + chunk < ids.length) await dec.prefill(ids.slice(at, at + chunk));
        else tok = await dec.next(ids.slice(at), sampler);
      }
      stats.prefillMs = performance.now() - t0;
      // At most max − 1 decode steps: the prompt's run gave the first token.
      stepper = dec.steps(tok, sampler, max - 1);
      const text = new TextStream((x) => this.decode(x));
      const stops = new StopFilter(o.stop);
      for (;;) {
        if (this.eog.has(tok)) {
          stats.finish = 'eog';
          break;
        }
        stats.generatedTokens++;
        const { out, stopped } = stops.push(text.push(tok));
        if (out) yield out;
        if (stopped) {
          stats.finish = 'stop';
          return;
        }
        if (stats.generatedTokens >= max) {
          stats.finish = max < o.maxTokens ? 'context' : 'length';
          break;
        }
        await nextTask();
        if (signal?.aborted) {
          stats.finish = 'abort';
          break;
        }
        const s0 = performance.now();
        tok = await stepper.next();
        const ms = performance.now() - s0;
        stats.stepMs.push(ms);
        stats.decodeMs += ms;
        if (this.latency) {
          const seq = Math.min(Math.max(64, 2 ** Math.ceil(Math.log2(dec.position))), this.context);
          void this.latency.add(this.webtune.session.session_id, this.target, 1, seq, ms);
        }
      }
      const { out, stopped } = stops.push(text.flush());
      if (out) yield out;
      if (stopped) {
        stats.finish = 'stop';
        return;
      }
      const rest = stops.flush();
      if (rest) yield rest;
    } catch (e) {
      throw this.lostLine(e);
    } finally {
      await this.endTurn(stepper, release);
    }
  }

  /** The end of a call that ran decode steps: the steps run ahead and unused forgotten, then the next turn released. */
  private async endTurn(stepper: Stepper | null, release: () => void): Promise<void> {
    try {
      await stepper?.close();
    } finally {
      release();
    }
  }

  /** A call's error where the GPU device was lost during it: one line saying what happens next. */
  private lostLine(e: unknown): unknown {
    const d = this.decoder;
    if (!(d instanceof WebGpuBackend) || d.dec.lostReason === null) return e;
    const next = this.fallback ? 'this call stopped, the next goes on with Wasm' : "load the model again (target 'auto' goes on with Wasm by itself)";
    return new Error(`the GPU device was lost (${d.dec.lostReason}): ${next}`);
  }
}

