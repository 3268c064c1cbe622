// The demo's chat panel: a language model the server imported from a GGUF
// file (task `text-generation`, e.g. SmolLM2-135M-Instruct) answers the
// messages typed in its box through TextGenerator on Wasm, streaming its
// text as it is decoded, with prefill and decode speed live. Between turns
// webtune tunes the model's kernels (`gen.idle()`); the chart shows every
// decode step's latency, one after the other across turns, with a dashed
// line where kernels were swapped in, and the table each turn's speed, so
// later answers show the tuned kernels.

import { type ChatMessage, type SwapDetail, TextGenerator } from '/web/webtune.js';
import { type Mark, type Point, drawChart } from './chart.js';

export interface ChatTurn {
  user: string;
  reply: string;
  promptTokens: number;
  prefillMs: number;
  generatedTokens: number;
  /** Decode steps and their time, ms (the first token comes from the prefill). */
  steps: number;
  decodeMs: number;
  finish: string;
  /** Kernels swapped in before this turn started. */
  swapsBefore: number;
}

/** Everything the panel knows, for people and tests (window.webtuneChat). */
export interface ChatDemoState {
  model: string;
  phase: 'loading' | 'ready' | 'generating' | 'error';
  error: string;
  threads: number;
  context: number;
  /** The model's kernels: tuning phase and candidates evaluated, summed. */
  kernels: number;
  evaluated: number;
  tuned: boolean;
  turns: ChatTurn[];
  /** Every decode step: its number (1, 2, ... across turns) as `t`, ms. */
  steps: Point[];
  /** Kernels swapped in; `step`: decode steps before the swap. */
  swaps: (SwapDetail & { step: number })[];
  /** The turn in flight: text so far, tokens/s of its decode so far. */
  live: { text: string; tokensPerS: number } | null;
}

export interface ChatOptions {
  model: string;
  /** Threads (default: TextGenerator's: the device's cores where isolated). */
  threads?: number;
  /** Tokens an answer may have. */
  maxTokens: number;
  budgetMs: number;
  /** Called when a turn starts and ends, so other loops on the page can give it the CPU. */
  onBusy: (busy: boolean) => void;
}

const $ = (id: string) => document.getElementById(id)!;
const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
const tps = (n: number, ms: number) => (ms > 0 ? (n / ms) * 1000 : 0);

function sleep(ms: number): Promise<void> {
  return new Promise((res) => setTimeout(res, ms));
}

export async function runChatDemo(o: ChatOptions): Promise<void> {
  const state: ChatDemoState = {
    model: o.model, phase: 'loading', error: '', threads: 0, context: 0, kernels: 0, evaluated: 0, tuned: false, turns: [], steps: [], swaps: [], live: null,
  };
  (window as unknown as { webtuneChat: ChatDemoState }).webtuneChat = state;
  $('chat').hidden = false;
  $('chat-title').textContent = `Chat with ${o.model}`;
  const input = $('chat-input') as HTMLTextAreaElement, send = $('chat-send') as HTMLButtonElement, stop = $('chat-stop') as HTMLButtonElement;
  const log = $('chat-log');
  send.disabled = true;
  stop.disabled = true;
  render(state);
  let gen: TextGenerator;
  try {
    gen = await TextGenerator.load({ model: o.model, target: 'wasm', threads: o.threads, budgetMs: o.budgetMs });
  } catch (e) {
    state.phase = 'error';
    state.error = e instanceof Error ? e.message : String(e);
    render(state);
    return;
  }
  state.threads = gen.webtune.threads.count;
  state.context = gen.context;
  gen.webtune.addEventListener('swap', (e) => {
    const d = (e as CustomEvent<SwapDetail>).detail;
    state.swaps.push({ ...d, step: state.steps.length });
  });
  const messages: ChatMessage[] = [];
  let busy = false, abort: AbortController | null = null;
  // The tuning loop between turns (it starts after the first answer, so
  // loading the page costs nothing but the model's download).
  let tuning: Promise<void> | null = null;
  const tune = async () => {
    let lastDraw = 0;
    while (!busy && !state.tuned) {
      const r = await gen.idle();
      if (r.done) state.tuned = true;
      if (performance.now() - lastDraw > 250) {
        render(state, gen);
        lastDraw = performance.now();
      }
      await sleep(r.worked ? 0 : 20);
    }
    render(state, gen);
  };

  const ask = async () => {
    const text = input.value.trim();
    if (!text || busy) return;
    busy = true;
    state.error = '';
    o.onBusy(true);
    send.disabled = true;
    stop.disabled = false;
    input.value = '';
    await tuning;
    messages.push({ role: 'user', content: text });
    // Older turns go first when the chat outgrows the context (the answer needs room too).
    while (messages.length > 1 && gen.tokenize(gen.applyChatTemplate(messages)).length + o.maxTokens > gen.context) messages.splice(0, 2);
    const turn: ChatTurn = { user: text, reply: '', promptTokens: 0, prefillMs: 0, generatedTokens: 0, steps: 0, decodeMs: 0, finish: '', swapsBefore: state.swaps.length };
    state.turns.push(turn);
    state.phase = 'generating';
    state.live = { text: '', tokensPerS: 0 };
    log.insertAdjacentHTML('beforeend', `<div class="msg user">${esc(text)}</div><div class="msg bot"></div>`);
    const bubble = log.lastElementChild as HTMLElement;
    abort = new AbortController();
    let lastDraw = 0;
    try {
      for await (const piece of gen.chat(messages, { maxTokens: o.maxTokens, temperature: 0.2, topP: 0.9, seed: state.turns.length, signal: abort.signal })) {
        turn.reply += piece;
        bubble.textContent = turn.reply;
        log.scrollTop = log.scrollHeight;
        const st = gen.stats!;
        while (turn.steps < st.stepMs.length) state.steps.push({ t: state.steps.length + 1, ms: st.stepMs[turn.steps++] });
        turn.decodeMs = st.decodeMs;
        state.live = { text: turn.reply, tokensPerS: tps(st.stepMs.length, st.decodeMs) };
        if (turn.prefillMs === 0) {
          turn.promptTokens = st.promptTokens;
          turn.prefillMs = st.prefillMs;
        }
        if (performance.now() - lastDraw > 100) {
          render(state, gen);
          lastDraw = performance.now();
        }
      }
      const st = gen.stats!;
      while (turn.steps < st.stepMs.length) state.steps.push({ t: state.steps.length + 1, ms: st.stepMs[turn.steps++] });
      Object.assign(turn, { promptTokens: st.promptTokens, prefillMs: st.prefillMs, generatedTokens: st.generatedTokens, decodeMs: st.decodeMs, finish: st.finish });
      messages.push({ role: 'assistant', content: turn.reply });
      state.phase = 'ready';
    } catch (e) {
      messages.pop();
      turn.finish = 'error';
      state.phase = 'error';
      state.error = e instanceof Error ? e.message : String(e);
    }
    if (!turn.reply) bubble.textContent = turn.finish === 'error' ? `(${state.error})` : '(no text)';
    state.live = null;
    abort = null;
    busy = false;
    o.onBusy(false);
    send.disabled = false;
    stop.disabled = true;
    render(state, gen);
    tuning = tune();
  };

  send.addEventListener('click', () => void ask());
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      void ask();
    }
  });
  stop.addEventListener('click', () => abort?.abort());
  state.phase = 'ready';
  send.disabled = false;
  render(state, gen);
}

function render(state: ChatDemoState, gen?: TextGenerator): void {
  if (gen) {
    const st = gen.webtune.status();
    state.kernels = st.length;
    state.evaluated = st.reduce((a, s) => a + s.evaluated, 0);
  }
  // One line per turn boundary where kernels were swapped in (between turns, so several at once).
  const marks: Mark[] = [];
  for (const s of state.swaps) {
    const last = marks.at(-1), one = `${s.op} ${s.shape.join('×')} ×${s.speedup.toFixed(2)}`;
    if (last && last.t === s.step + 0.5) {
      const n = state.swaps.filter((w) => w.step === s.step).length;
      last.label = `${n} kernels swapped in`;
    } else marks.push({ t: s.step + 0.5, label: one, color: '#d62728' });
  }
  // The chart once there is something to draw.
  const canvas = $('chat-chart') as HTMLCanvasElement;
  canvas.style.display = state.steps.length ? 'block' : 'none';
  if (state.steps.length) drawChart(canvas, state.steps, marks, `Wasm · ${state.model} · ${state.threads} thread${state.threads === 1 ? '' : 's'} · ${state.steps.length} decode steps, ${state.swaps.length} swaps`,
    [['kernel swap', '#d62728']], { x: 'decode step (across turns)', y: 'latency of the step (ms)' });
  const rows = state.turns.map((t, i) => {
    const steps = t.steps;
    return `<tr><td>${i + 1}</td><td>${t.promptTokens}</td><td>${t.prefillMs ? `${t.prefillMs.toFixed(0)} ms (${tps(t.promptTokens, t.prefillMs).toFixed(1)} tokens/s)` : ''}</td>` +
      `<td>${steps}</td><td>${t.decodeMs ? `${(t.decodeMs / steps).toFixed(1)} ms (${tps(steps, t.decodeMs).toFixed(1)} tokens/s)` : ''}</td><td>${t.swapsBefore}</td><td>${t.finish}</td></tr>`;
  });
  $('chat-turns').innerHTML = rows.length
    ? `<tr><th>turn</th><th>prompt tokens</th><th>prefill</th><th>decode steps</th><th>a step</th><th>swaps before</th><th>end</th></tr>${rows.join('')}`
    : '';
  const live = state.live;
  const tuning = state.kernels ? ` · tuning: ${state.evaluated} candidates of ${state.kernels} kernels measured${state.tuned ? ', done' : ''}, ${state.swaps.length} swapped in` : '';
  $('chat-status').textContent = state.error
    ? `error: ${state.error}`
    : state.phase === 'loading'
      ? `loading ${state.model} (weights, tokenizer, kernels)…`
      : `${state.phase}${live ? ` · ${live.tokensPerS.toFixed(1)} tokens/s` : ''} · ${state.threads} thread${state.threads === 1 ? '' : 's'} · context ${state.context}${tuning}`;
}
