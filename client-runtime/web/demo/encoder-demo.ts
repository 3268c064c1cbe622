// The demo with a real model: a SentenceEncoder (the server's first imported
// model, on Wasm with 16-bit integer weight products: its fastest setting)
// encodes the sentences typed in the text box in a loop, shows their cosine
// similarity matrix, and charts each encode's latency while webtune tunes
// the model's kernels between calls.

import { SentenceEncoder, type SwapDetail } from '/web/webtune.js';
import { type Mark, type Point, drawChart } from './chart.js';

export interface EncoderDemoState {
  mode: 'encoder';
  model: string;
  phase: 'starting' | 'running' | 'tuned' | 'stopped' | 'error';
  error: string;
  deviceKey: string;
  encodes: number;
  latencies: Point[];
  swaps: (SwapDetail & { t: number })[];
  similarity: number[][];
  tunedAt: number | null;
}

const SENTENCES = [
  'The new movie is awesome',
  'The new movie is so great',
  'The cat sits outside',
  'The cat plays in the garden',
  'I love pasta',
  'Do you like pizza?',
].join('\n');

const $ = (id: string) => document.getElementById(id)!;
const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

/** `paused` resolves when the loop may go on (the chat panel holds it while it answers). */
export async function runEncoderDemo(model: string, afterS: number, budgetMs: number, isStopped: () => boolean, paused: () => Promise<void> = () => Promise.resolve()): Promise<void> {
  const state: EncoderDemoState = {
    mode: 'encoder', model, phase: 'starting', error: '', deviceKey: '', encodes: 0, latencies: [], swaps: [], similarity: [], tunedAt: null,
  };
  (window as unknown as { webtuneDemo: EncoderDemoState }).webtuneDemo = state;
  $('encoder').hidden = false;
  const box = $('texts') as HTMLTextAreaElement;
  if (!box.value) box.value = SENTENCES;
  try {
    const enc = await SentenceEncoder.load({ model, target: 'wasm', precision: 'int16', budgetMs });
    state.deviceKey = enc.webtune.session.device_key;
    let t0 = performance.now();
    enc.webtune.addEventListener('swap', (e) => state.swaps.push({ ...(e as CustomEvent<SwapDetail>).detail, t: (performance.now() - t0) / 1000 }));
    state.phase = 'running';
    t0 = performance.now();
    let lastDraw = 0;
    while (!isStopped()) {
      const texts = box.value.split('\n').map((s) => s.trim()).filter((s) => s);
      if (!texts.length) texts.push('');
      const start = performance.now();
      const emb = await enc.encode(texts);
      state.latencies.push({ t: (start - t0) / 1000, ms: performance.now() - start });
      state.encodes++;
      const r = await enc.idle();
      if (r.done && state.tunedAt === null) {
        state.tunedAt = (performance.now() - t0) / 1000;
        state.phase = 'tuned';
      }
      if (state.tunedAt !== null && afterS > 0 && (performance.now() - t0) / 1000 > state.tunedAt + afterS) break;
      if (performance.now() - lastDraw > 250) {
        state.similarity = emb.map((a) => emb.map((b) => a.reduce((s, x, i) => s + x * b[i], 0)));
        render(state, texts);
        lastDraw = performance.now();
      }
      await new Promise((res) => setTimeout(res, 0));
      await paused();
    }
    state.phase = 'stopped';
  } catch (e) {
    state.phase = 'error';
    state.error = e instanceof Error ? e.message : String(e);
  }
  render(state, []);
}

function render(state: EncoderDemoState, texts: string[]): void {
  const marks: Mark[] = state.swaps.map((s) => ({ t: s.t, label: `${s.op} ${s.shape.join('×')} ×${s.speedup.toFixed(2)}`, color: '#d62728' }));
  const title = `Wasm int16 · ${state.model} · ${state.encodes} encodes, ${state.swaps.length} swaps`;
  drawChart($('chart') as HTMLCanvasElement, state.latencies, marks, title, [['kernel swap', '#d62728']]);
  if (texts.length) {
    const head = texts.map((_, j) => `<th>${j + 1}</th>`).join('');
    const rows = texts.map((t, i) => `<tr><th title="${esc(t)}">${i + 1}. ${esc(t.slice(0, 40))}</th>${state.similarity[i]
      .map((v) => `<td style="background:rgba(31,119,180,${Math.max(0, v).toFixed(2)})">${v.toFixed(3)}</td>`).join('')}</tr>`);
    $('sim').innerHTML = `<tr><th>cosine</th>${head}</tr>${rows.join('')}`;
  }
  const last = state.latencies.slice(-9).map((p) => p.ms).sort((a, b) => a - b);
  $('status').textContent = state.error
    ? `error: ${state.error}`
    : `${state.phase} · ${state.model} · device key ${state.deviceKey} · encode ${last.length ? last[last.length >> 1].toFixed(1) : '?'} ms (median of the last 9)` +
      (state.tunedAt !== null ? ` · tuned after ${state.tunedAt.toFixed(1)} s` : '');
}
