// The webtune demo: a small transformer encoder inferring in a loop on Wasm
// or WebGPU while webtune tunes its kernels in the idle time between
// inferences; the chart shows latency falling as faster kernels swap in.
//
// Query parameters: target=wasm|webgpu, layers, seq, dim, heads, ffn, q4=1,
// budget (ms per idle slot), candidates (at most this many per kernel),
// after (seconds to keep inferring once tuned; 0 = until stopped),
// worker=0 (Wasm: tune in idle() between inferences instead of in the
// background bench worker, the default). The server's models: model=NAME
// (the encoder to run), encoder=0 (none), chat=NAME|0 (the chat panel's
// language model, or none), chat_tokens (an answer's length at most,
// default 256).

import { Webtune, threadSupport, type MeasureDetail, type ReportDetail, type SwapDetail } from '/web/webtune.js';
import { type Mark, type Point, drawChart } from './chart.js';
import { runChatDemo } from './chat-demo.js';
import { runEncoderDemo } from './encoder-demo.js';
import { type Config, type Model, checkConfig, gpuModel, kernelList, makeWeights, wasmModel } from './model.js';

const params = new URLSearchParams(location.search);
const num = (k: string, d: number) => (params.has(k) ? Number(params.get(k)) : d);
const target = params.get('target') === 'webgpu' ? 'webgpu' : 'wasm';
const config: Config = {
  layers: num('layers', 4),
  seq: num('seq', 64),
  dim: num('dim', 256),
  heads: num('heads', 4),
  ffn: num('ffn', 4 * num('dim', 256)),
  vocab: 512,
  q4: params.get('q4') === '1',
};
const budgetMs = num('budget', 8);
const afterS = num('after', 0);
const maxCandidates = params.has('candidates') ? num('candidates', 0) : undefined;
const worker = params.get('worker') !== '0';
/** The generated model was asked for (its parameters, or model=0), not the server's. */
const generatedAsked = ['layers', 'seq', 'dim', 'heads', 'ffn', 'q4'].some((k) => params.has(k)) || params.get('model') === '0';
// Wasm threads where the page has them (webtune serve isolates /demo); ?threads=N sets the count.
const threads = params.has('threads') ? Number(params.get('threads')) : undefined;

const COLORS: Record<string, string> = {
  qkv: '#d62728', scores: '#2ca02c', context: '#9467bd', out: '#ff7f0e', up: '#8c564b', down: '#e377c2',
};

/** Everything the page knows, for people (the panel) and tests (window.webtuneDemo). */
const state = {
  target,
  config,
  /** Whether tuning runs in the background worker. */
  background: false,
  phase: 'starting' as 'starting' | 'running' | 'tuned' | 'stopped' | 'error',
  error: '',
  deviceKey: '',
  threads: 1,
  fingerprint: null as unknown,
  timerResolutionMs: 0,
  kernels: [] as { name: string; op: string; shape: number[]; source: string; level: string | null; initial: string; sha256: string; swaps: number }[],
  swaps: [] as (SwapDetail & { name: string; t: number })[],
  measured: 0,
  /** Every candidate measured: kernel, hash, whether it passed, its median and the kernel in use's, µs. */
  measures: [] as { name: string; sha256: string; ok: boolean; us: number; current_us: number; runs: number; early: boolean; t: number; trace?: MeasureDetail['trace'] }[],
  failed: [] as { name: string; sha256: string; error?: string }[],
  reports: [] as (ReportDetail & { name: string })[],
  inferences: 0,
  latencies: [] as Point[],
  /** Each loop's idle() call: when it started (s), how long it took (ms), whether it tuned. */
  idles: [] as { t: number; ms: number; worked: boolean }[],
  tunedAt: null as number | null,
  summary: null as null | { startMs: number; finalMs: number; secondsToWithin5: number | null; secondsToWithin5Of9: number | null },
  output: { first: null as number[] | null, last: null as number[] | null, maxDiff: 0 },
};
(window as unknown as { webtuneDemo: typeof state }).webtuneDemo = state;

const $ = (id: string) => document.getElementById(id)!;
const canvas = $('chart') as HTMLCanvasElement;
let stopRequested = false;

function nameOf(op: string, shape: number[]): string {
  return kernelList(config).find((k) => k.op === op && k.shape.join() === shape.join())?.name ?? op;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
}

/** The median latency of the inferences that started within ±`half` s of points[i] (points are in time order). */
function windowMedian(points: Point[], i: number, half: number): number {
  let lo = i, hi = i;
  while (lo > 0 && points[lo - 1].t >= points[i].t - half) lo--;
  while (hi < points.length - 1 && points[hi + 1].t <= points[i].t + half) hi++;
  return median(points.slice(lo, hi + 1).map((p) => p.ms));
}

/**
 * Latency before tuning (the median between the 10th inference, once the
 * engine's JIT has warmed up, and the first swap), after it (the median of
 * the last inferences: 100, or a third of them if fewer than 300), and how
 * many seconds after the first inference the latency came within 5 % of
 * the final latency and stayed there. "The latency" at an inference is the
 * median of the inferences that started within ±1 s of it (a centred
 * window: no lag behind a swap, and a few slow inferences, from a GC or
 * another process, do not count as being off). `secondsToWithin5Of9` is the earlier definition, kept to compare
 * runs: the median of each inference and the 8 before it.
 */
function summarize(points: Point[], swaps: { t: number }[]) {
  if (points.length < 20) return null;
  const firstSwap = swaps.length ? swaps[0].t : Infinity;
  const before = points.slice(10).filter((p) => p.t < firstSwap).slice(0, 200);
  const startMs = median((before.length ? before : points.slice(10, 60)).map((p) => p.ms));
  const finalMs = median(points.slice(-Math.min(100, Math.floor(points.length / 3))).map((p) => p.ms));
  let secondsToWithin5: number | null = null;
  for (let i = points.length - 1; i >= 0 && windowMedian(points, i, 1) <= finalMs * 1.05; i--) secondsToWithin5 = points[i].t;
  let secondsToWithin5Of9: number | null = null;
  for (let i = points.length - 1; i >= 0 && median(points.slice(Math.max(0, i - 8), i + 1).map((p) => p.ms)) <= finalMs * 1.05; i--) {
    secondsToWithin5Of9 = points[i].t;
  }
  return { startMs, finalMs, secondsToWithin5, secondsToWithin5Of9 };
}

function render(wt: Webtune | null): void {
  const marks: Mark[] = state.swaps.map((s) => ({ t: s.t, label: `${s.name} ×${s.speedup.toFixed(2)}`, color: COLORS[s.name] ?? '#555' }));
  const c = config;
  const title = `${target === 'wasm' ? 'Wasm' : 'WebGPU'} · ${c.layers} layers, seq ${c.seq}, dim ${c.dim}, ${c.heads} heads, ffn ${c.ffn}${c.q4 ? ', q4 MLP' : ''} · ${state.inferences} inferences, ${state.swaps.length} swaps`;
  drawChart(canvas, state.latencies, marks, title, kernelList(config).map((k) => [k.name, COLORS[k.name]]));
  const rows = state.kernels.map((k) => {
    const st = wt?.status().find((s) => s.op === k.op && s.shape.join() === k.shape.join());
    const progress = st ? `${st.phase} ${st.evaluated}/${st.total || '?'}` : '';
    return `<tr><td style="color:${COLORS[k.name]}">${k.name}</td><td>${k.op}</td><td>${k.shape.join('×')}</td><td>${k.source}${k.level ? ` (${k.level})` : ''}</td><td>${progress}</td><td>${k.swaps}</td><td><code>${k.sha256.slice(0, 12)}</code></td></tr>`;
  });
  $('kernels').innerHTML = `<tr><th>kernel</th><th>op</th><th>shape</th><th>first from</th><th>tuning</th><th>swaps</th><th>in use</th></tr>${rows.join('')}`;
  const s = state.summary;
  $('status').textContent = state.error
    ? `error: ${state.error}`
    : `${state.phase} · device key ${state.deviceKey} · ${state.threads} thread${state.threads > 1 ? 's' : ''} · timer ${state.timerResolutionMs.toFixed(3)} ms · candidates measured ${state.measured} (${state.failed.length} failed checks) · reports ${state.reports.length}` +
      (s ? ` · latency ${s.startMs.toFixed(2)} → ${s.finalMs.toFixed(2)} ms${s.secondsToWithin5 !== null ? `, within 5 % of final after ${s.secondsToWithin5.toFixed(1)} s` : ''}` : '');
}

/** Yields to the event loop without the 4 ms clamp of nested timers. */
function yieldNow(): Promise<void> {
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => resolve();
    ch.port2.postMessage(null);
  });
}

function fingerprintOut(out: Float32Array): number[] {
  const picks = [0, 1, out.length >> 1, out.length - 1].map((i) => out[i]);
  let norm = 0;
  for (const v of out) norm += v * v;
  return [...picks, Math.sqrt(norm)];
}

async function main(): Promise<void> {
  checkConfig(config);
  let device: GPUDevice | undefined, adapter: GPUAdapter | undefined;
  if (target === 'webgpu') {
    if (!navigator.gpu) throw new Error('this browser has no WebGPU (headless Chromium needs --enable-unsafe-webgpu)');
    adapter = (await navigator.gpu.requestAdapter()) ?? undefined;
    if (!adapter) throw new Error('no WebGPU adapter');
    // The app's own device; webtune builds its pipelines on it.
    device = await adapter.requestDevice({ requiredFeatures: adapter.features.has('timestamp-query') ? ['timestamp-query'] : [] });
  }
  // A shared memory where threads can run: threaded kernels need one.
  const shared = target === 'wasm' && threads !== 1 && threadSupport().ok;
  const memory = target === 'wasm' ? new WebAssembly.Memory(shared ? { initial: 16, maximum: 65536, shared } : { initial: 16 }) : undefined;
  const wt = await Webtune.open({ target, device, adapter, memory, budgetMs, maxCandidates, worker, threads });
  state.threads = wt.threads.count;
  state.background = wt.background;
  state.deviceKey = wt.session.device_key;
  state.fingerprint = wt.fingerprint;
  state.timerResolutionMs = wt.timerResolutionMs;
  const weights = makeWeights(config);
  const model: Model = target === 'wasm' ? await wasmModel(wt, config, weights) : await gpuModel(wt, config, weights);
  for (const k of kernelList(config)) {
    const h = model.kernels[k.name];
    state.kernels.push({ name: k.name, op: k.op, shape: k.shape, source: h.source, level: h.level, initial: h.sha256, sha256: h.sha256, swaps: 0 });
  }
  let t0 = 0;
  wt.addEventListener('swap', (e) => {
    const d = (e as CustomEvent<SwapDetail>).detail;
    const name = nameOf(d.op, d.shape);
    state.swaps.push({ ...d, name, t: (d.at - t0) / 1000 });
    const k = state.kernels.find((k) => k.name === name)!;
    k.sha256 = d.to;
    k.swaps++;
  });
  wt.addEventListener('measure', (e) => {
    const d = (e as CustomEvent<MeasureDetail>).detail;
    state.measured++;
    state.measures.push({ name: nameOf(d.op, d.shape), sha256: d.sha256, ok: d.ok, us: d.median_us, current_us: d.current_us, runs: d.runs, early: !!d.rejected_early, t: (performance.now() - t0) / 1000, trace: d.trace });
    if (!d.ok) state.failed.push({ name: nameOf(d.op, d.shape), sha256: d.sha256, error: d.error });
  });
  wt.addEventListener('report', (e) => {
    const d = (e as CustomEvent<ReportDetail>).detail;
    state.reports.push({ ...d, name: nameOf(d.op, d.shape) });
  });
  state.phase = 'running';
  t0 = performance.now();
  let lastDraw = 0;
  while (!stopRequested) {
    const start = performance.now();
    const out = await model.forward();
    const ms = performance.now() - start;
    state.latencies.push({ t: (start - t0) / 1000, ms });
    state.inferences++;
    const fp = fingerprintOut(out);
    if (!state.output.first) state.output.first = fp;
    state.output.last = fp;
    // Kernels differ only in f32 rounding: the model's output must not move.
    state.output.maxDiff = Math.max(state.output.maxDiff, ...fp.map((v, i) => Math.abs(v - state.output.first![i]) / Math.max(1, Math.abs(state.output.first![i]))));
    const i0 = performance.now();
    const r = await wt.idle();
    if (!r.done) state.idles.push({ t: (i0 - t0) / 1000, ms: performance.now() - i0, worked: r.worked });
    if (r.done && state.tunedAt === null) {
      state.tunedAt = (performance.now() - t0) / 1000;
      state.phase = 'tuned';
    }
    if (state.tunedAt !== null && afterS > 0 && (performance.now() - t0) / 1000 > state.tunedAt + afterS) break;
    if (performance.now() - lastDraw > 250) {
      state.summary = summarize(state.latencies, state.swaps);
      render(wt);
      lastDraw = performance.now();
    }
    await yieldNow();
    await waitForChat();
  }
  state.summary = summarize(state.latencies, state.swaps);
  state.phase = 'stopped';
  render(wt);
}

$('stop').addEventListener('click', () => {
  stopRequested = true;
});
$('clear').addEventListener('click', async () => {
  // The cache is per origin; opening it through the module keeps its schema in one place.
  indexedDB.deleteDatabase('webtune');
  $('status').textContent = 'local kernel cache cleared; reload to start from the server';
});
($('target') as HTMLSelectElement).value = target;
$('target').addEventListener('change', (e) => {
  params.set('target', (e.target as HTMLSelectElement).value);
  location.search = params.toString();
});
/**
 * The server's models (`GET /v1/models`): the encoder to run (the first
 * `feature-extraction` model, or `model=NAME`), Wasm only and unless the
 * generated model's parameters (or `model=0`) are given; and the language
 * model for the chat panel (the first `text-generation` model, or
 * `chat=NAME`; `chat=0`: none).
 */
async function pickModels(): Promise<{ encoder: string | null; chat: string | null }> {
  if (target !== 'wasm') return { encoder: null, chat: null };
  try {
    const res = await fetch('/v1/models');
    if (!res.ok) return { encoder: null, chat: null };
    const { models } = (await res.json()) as { models: { name: string; task?: string }[] };
    const pick = (task: string, want: string | null) =>
      (want ? models.find((m) => m.name === want && (m.task ?? 'feature-extraction') === task) : models.find((m) => (m.task ?? 'feature-extraction') === task))?.name ?? null;
    return {
      encoder: generatedAsked || params.get('encoder') === '0' ? null : pick('feature-extraction', params.get('model')),
      chat: params.get('chat') === '0' ? null : pick('text-generation', params.get('chat')),
    };
  } catch {
    return { encoder: null, chat: null };
  }
}

/** The encoder loop waits here while the chat answers (the CPU is the chat's then). */
let chatBusy: Promise<void> | null = null;
let chatDone: (() => void) | null = null;
const waitForChat = () => chatBusy ?? Promise.resolve();

pickModels().then(({ encoder, chat }) => {
  if (chat) {
    void runChatDemo({
      model: chat, threads, budgetMs, maxTokens: num('chat_tokens', 256),
      onBusy: (busy) => {
        if (busy) chatBusy = new Promise((res) => (chatDone = res));
        else {
          chatDone?.();
          chatBusy = chatDone = null;
        }
      },
    });
  }
  if (encoder) return runEncoderDemo(encoder, afterS, budgetMs, () => stopRequested, waitForChat);
  if (chat && !generatedAsked) {
    // The chat is the demo: no generated model beside it (its parameters, or model=0, add one).
    for (const id of ['chart', 'status', 'kernels', 'stop']) $(id).style.display = 'none';
    return;
  }
  $('hint').textContent = 'A generated model with random weights. For a real one: webtune model import PATH (e.g. all-MiniLM-L6-v2, or a llama GGUF such as SmolLM2 for the chat), then webtune serve.';
  render(null);
  return main();
}).catch((e) => {
  state.phase = 'error';
  state.error = e instanceof Error ? `${e.message}` : String(e);
  render(null);
  console.error(e);
});
