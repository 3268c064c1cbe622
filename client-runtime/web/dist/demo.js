// demo/demo.ts
import { Webtune, threadSupport } from "/web/webtune.js";

// demo/chart.ts
function niceStep(range, ticks) {
  const raw = range / ticks;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}
function fmt(v, step) {
  const digits = Math.max(0, -Math.floor(Math.log10(step)));
  return v.toFixed(Math.min(digits, 3));
}
function rollingMedian(points, window2) {
  const out = [];
  for (let i = 0; i < points.length; i++) {
    const w = points.slice(Math.max(0, i - window2 + 1), i + 1).map((p) => p.ms).sort((a, b) => a - b);
    out.push({ t: points[i].t, ms: w[Math.floor(w.length / 2)] });
  }
  return out;
}
var DEFAULT_AXES = { x: "time since start (s)", y: "inference latency (ms)" };
function drawChart(canvas2, points, marks, title, legend, axes = DEFAULT_AXES) {
  const dpr = window.devicePixelRatio || 1;
  const cssW = canvas2.clientWidth || 800, cssH = canvas2.clientHeight || 320;
  if (canvas2.width !== Math.round(cssW * dpr) || canvas2.height !== Math.round(cssH * dpr)) {
    canvas2.width = Math.round(cssW * dpr);
    canvas2.height = Math.round(cssH * dpr);
  }
  const g = canvas2.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, cssW, cssH);
  g.fillStyle = "#fff";
  g.fillRect(0, 0, cssW, cssH);
  const L = 64, R = 16, T = 34, B = 44;
  const w = cssW - L - R, h = cssH - T - B;
  const tMax = Math.max(1, ...points.map((p) => p.t), ...marks.map((m) => m.t)) * 1.02;
  const sorted = points.map((p) => p.ms).sort((a, b) => a - b);
  const top = sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] : 1;
  const yStep = niceStep(Math.max(top * 1.15, 1e-3), 5);
  const yMax = Math.ceil(top * 1.15 / yStep) * yStep || yStep;
  const xStep = niceStep(tMax, 8);
  const X = (t) => L + t / tMax * w;
  const Y = (ms) => T + h - Math.min(ms, yMax) / yMax * h;
  g.font = "12px system-ui, sans-serif";
  g.fillStyle = "#222";
  g.textBaseline = "middle";
  g.fillText(title, L, 14);
  g.strokeStyle = "#e4e4e4";
  g.lineWidth = 1;
  g.textAlign = "right";
  for (let v = 0; v <= yMax + 1e-9; v += yStep) {
    g.beginPath();
    g.moveTo(L, Y(v));
    g.lineTo(L + w, Y(v));
    g.stroke();
    g.fillText(fmt(v, yStep), L - 6, Y(v));
  }
  g.textAlign = "center";
  g.textBaseline = "top";
  for (let t = 0; t <= tMax + 1e-9; t += xStep) {
    g.beginPath();
    g.moveTo(X(t), T);
    g.lineTo(X(t), T + h);
    g.stroke();
    g.fillText(fmt(t, xStep), X(t), T + h + 6);
  }
  g.strokeStyle = "#444";
  g.beginPath();
  g.moveTo(L, T);
  g.lineTo(L, T + h);
  g.lineTo(L + w, T + h);
  g.stroke();
  g.fillText(axes.x, L + w / 2, T + h + 24);
  g.save();
  g.translate(16, T + h / 2);
  g.rotate(-Math.PI / 2);
  g.textBaseline = "middle";
  g.fillText(axes.y, 0, 0);
  g.restore();
  g.setLineDash([4, 3]);
  g.textAlign = "left";
  g.textBaseline = "top";
  marks.forEach((m, i) => {
    g.strokeStyle = m.color;
    g.beginPath();
    g.moveTo(X(m.t), T);
    g.lineTo(X(m.t), T + h);
    g.stroke();
    g.fillStyle = m.color;
    const tw = g.measureText(m.label).width;
    const lx2 = X(m.t) + 3 + tw > L + w ? X(m.t) - 3 - tw : X(m.t) + 3;
    g.fillText(m.label, lx2, T + 2 + i % 4 * 13);
  });
  g.setLineDash([]);
  g.fillStyle = "rgba(40, 90, 200, 0.45)";
  for (const p of points) g.fillRect(X(p.t) - 1.5, Y(p.ms) - 1.5, 3, 3);
  const med = rollingMedian(points, 9);
  g.strokeStyle = "#1a3f9c";
  g.lineWidth = 2;
  g.beginPath();
  med.forEach((p, i) => i ? g.lineTo(X(p.t), Y(p.ms)) : g.moveTo(X(p.t), Y(p.ms)));
  g.stroke();
  g.textBaseline = "middle";
  g.textAlign = "left";
  let lx = L + w;
  for (const [name, color] of [...legend].reverse()) {
    const tw = g.measureText(name).width;
    lx -= tw + 22;
    g.fillStyle = color;
    g.fillRect(lx, 10, 10, 10);
    g.fillStyle = "#222";
    g.fillText(name, lx + 14, 15);
  }
}

// demo/chat-demo.ts
import { TextGenerator } from "/web/webtune.js";
var $ = (id) => document.getElementById(id);
var esc = (s) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
var tps = (n, ms) => ms > 0 ? n / ms * 1e3 : 0;
function sleep(ms) {
  return new Promise((res) => setTimeout(res, ms));
}
async function runChatDemo(o) {
  const state2 = {
    model: o.model,
    phase: "loading",
    error: "",
    threads: 0,
    context: 0,
    kernels: 0,
    evaluated: 0,
    tuned: false,
    turns: [],
    steps: [],
    swaps: [],
    live: null
  };
  window.webtuneChat = state2;
  $("chat").hidden = false;
  $("chat-title").textContent = `Chat with ${o.model}`;
  const input = $("chat-input"), send = $("chat-send"), stop = $("chat-stop");
  const log = $("chat-log");
  send.disabled = true;
  stop.disabled = true;
  render(state2);
  let gen;
  try {
    gen = await TextGenerator.load({ model: o.model, target: "wasm", threads: o.threads, budgetMs: o.budgetMs });
  } catch (e) {
    state2.phase = "error";
    state2.error = e instanceof Error ? e.message : String(e);
    render(state2);
    return;
  }
  state2.threads = gen.webtune.threads.count;
  state2.context = gen.context;
  gen.webtune.addEventListener("swap", (e) => {
    const d = e.detail;
    state2.swaps.push({ ...d, step: state2.steps.length });
  });
  const messages = [];
  let busy = false, abort = null;
  let tuning = null;
  const tune = async () => {
    let lastDraw = 0;
    while (!busy && !state2.tuned) {
      const r = await gen.idle();
      if (r.done) state2.tuned = true;
      if (performance.now() - lastDraw > 250) {
        render(state2, gen);
        lastDraw = performance.now();
      }
      await sleep(r.worked ? 0 : 20);
    }
    render(state2, gen);
  };
  const ask = async () => {
    const text = input.value.trim();
    if (!text || busy) return;
    busy = true;
    state2.error = "";
    o.onBusy(true);
    send.disabled = true;
    stop.disabled = false;
    input.value = "";
    await tuning;
    messages.push({ role: "user", content: text });
    while (messages.length > 1 && gen.tokenize(gen.applyChatTemplate(messages)).length + o.maxTokens > gen.context) messages.splice(0, 2);
    const turn = { user: text, reply: "", promptTokens: 0, prefillMs: 0, generatedTokens: 0, steps: 0, decodeMs: 0, finish: "", swapsBefore: state2.swaps.length };
    state2.turns.push(turn);
    state2.phase = "generating";
    state2.live = { text: "", tokensPerS: 0 };
    log.insertAdjacentHTML("beforeend", `<div class="msg user">${esc(text)}</div><div class="msg bot"></div>`);
    const bubble = log.lastElementChild;
    abort = new AbortController();
    let lastDraw = 0;
    try {
      for await (const piece of gen.chat(messages, { maxTokens: o.maxTokens, temperature: 0.2, topP: 0.9, seed: state2.turns.length, signal: abort.signal })) {
        turn.reply += piece;
        bubble.textContent = turn.reply;
        log.scrollTop = log.scrollHeight;
        const st2 = gen.stats;
        while (turn.steps < st2.stepMs.length) state2.steps.push({ t: state2.steps.length + 1, ms: st2.stepMs[turn.steps++] });
        turn.decodeMs = st2.decodeMs;
        state2.live = { text: turn.reply, tokensPerS: tps(st2.stepMs.length, st2.decodeMs) };
        if (turn.prefillMs === 0) {
          turn.promptTokens = st2.promptTokens;
          turn.prefillMs = st2.prefillMs;
        }
        if (performance.now() - lastDraw > 100) {
          render(state2, gen);
          lastDraw = performance.now();
        }
      }
      const st = gen.stats;
      while (turn.steps < st.stepMs.length) state2.steps.push({ t: state2.steps.length + 1, ms: st.stepMs[turn.steps++] });
      Object.assign(turn, { promptTokens: st.promptTokens, prefillMs: st.prefillMs, generatedTokens: st.generatedTokens, decodeMs: st.decodeMs, finish: st.finish });
      messages.push({ role: "assistant", content: turn.reply });
      state2.phase = "ready";
    } catch (e) {
      messages.pop();
      turn.finish = "error";
      state2.phase = "error";
      state2.error = e instanceof Error ? e.message : String(e);
    }
    if (!turn.reply) bubble.textContent = turn.finish === "error" ? `(${state2.error})` : "(no text)";
    state2.live = null;
    abort = null;
    busy = false;
    o.onBusy(false);
    send.disabled = false;
    stop.disabled = true;
    render(state2, gen);
    tuning = tune();
  };
  send.addEventListener("click", () => void ask());
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      void ask();
    }
  });
  stop.addEventListener("click", () => abort?.abort());
  state2.phase = "ready";
  send.disabled = false;
  render(state2, gen);
}
function render(state2, gen) {
  if (gen) {
    const st = gen.webtune.status();
    state2.kernels = st.length;
    state2.evaluated = st.reduce((a, s) => a + s.evaluated, 0);
  }
  const marks = [];
  for (const s of state2.swaps) {
    const last = marks.at(-1), one = `${s.op} ${s.shape.join("×")} ×${s.speedup.toFixed(2)}`;
    if (last && last.t === s.step + 0.5) {
      const n = state2.swaps.filter((w) => w.step === s.step).length;
      last.label = `${n} kernels swapped in`;
    } else marks.push({ t: s.step + 0.5, label: one, color: "#d62728" });
  }
  const canvas2 = $("chat-chart");
  canvas2.style.display = state2.steps.length ? "block" : "none";
  if (state2.steps.length) drawChart(
    canvas2,
    state2.steps,
    marks,
    `Wasm · ${state2.model} · ${state2.threads} thread${state2.threads === 1 ? "" : "s"} · ${state2.steps.length} decode steps, ${state2.swaps.length} swaps`,
    [["kernel swap", "#d62728"]],
    { x: "decode step (across turns)", y: "latency of the step (ms)" }
  );
  const rows = state2.turns.map((t, i) => {
    const steps = t.steps;
    return `<tr><td>${i + 1}</td><td>${t.promptTokens}</td><td>${t.prefillMs ? `${t.prefillMs.toFixed(0)} ms (${tps(t.promptTokens, t.prefillMs).toFixed(1)} tokens/s)` : ""}</td><td>${steps}</td><td>${t.decodeMs ? `${(t.decodeMs / steps).toFixed(1)} ms (${tps(steps, t.decodeMs).toFixed(1)} tokens/s)` : ""}</td><td>${t.swapsBefore}</td><td>${t.finish}</td></tr>`;
  });
  $("chat-turns").innerHTML = rows.length ? `<tr><th>turn</th><th>prompt tokens</th><th>prefill</th><th>decode steps</th><th>a step</th><th>swaps before</th><th>end</th></tr>${rows.join("")}` : "";
  const live = state2.live;
  const tuning = state2.kernels ? ` · tuning: ${state2.evaluated} candidates of ${state2.kernels} kernels measured${state2.tuned ? ", done" : ""}, ${state2.swaps.length} swapped in` : "";
  $("chat-status").textContent = state2.error ? `error: ${state2.error}` : state2.phase === "loading" ? `loading ${state2.model} (weights, tokenizer, kernels)…` : `${state2.phase}${live ? ` · ${live.tokensPerS.toFixed(1)} tokens/s` : ""} · ${state2.threads} thread${state2.threads === 1 ? "" : "s"} · context ${state2.context}${tuning}`;
}

// demo/encoder-demo.ts
import { SentenceEncoder } from "/web/webtune.js";
var SENTENCES = [
  "The new movie is awesome",
  "The new movie is so great",
  "The cat sits outside",
  "The cat plays in the garden",
  "I love pasta",
  "Do you like pizza?"
].join("\n");
var $2 = (id) => document.getElementById(id);
var esc2 = (s) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
async function runEncoderDemo(model, afterS2, budgetMs2, isStopped, paused = () => Promise.resolve()) {
  const state2 = {
    mode: "encoder",
    model,
    phase: "starting",
    error: "",
    deviceKey: "",
    encodes: 0,
    latencies: [],
    swaps: [],
    similarity: [],
    tunedAt: null
  };
  window.webtuneDemo = state2;
  $2("encoder").hidden = false;
  const box = $2("texts");
  if (!box.value) box.value = SENTENCES;
  try {
    const enc = await SentenceEncoder.load({ model, target: "wasm", precision: "int16", budgetMs: budgetMs2 });
    state2.deviceKey = enc.webtune.session.device_key;
    let t0 = performance.now();
    enc.webtune.addEventListener("swap", (e) => state2.swaps.push({ ...e.detail, t: (performance.now() - t0) / 1e3 }));
    state2.phase = "running";
    t0 = performance.now();
    let lastDraw = 0;
    while (!isStopped()) {
      const texts = box.value.split("\n").map((s) => s.trim()).filter((s) => s);
      if (!texts.length) texts.push("");
      const start = performance.now();
      const emb = await enc.encode(texts);
      state2.latencies.push({ t: (start - t0) / 1e3, ms: performance.now() - start });
      state2.encodes++;
      const r = await enc.idle();
      if (r.done && state2.tunedAt === null) {
        state2.tunedAt = (performance.now() - t0) / 1e3;
        state2.phase = "tuned";
      }
      if (state2.tunedAt !== null && afterS2 > 0 && (performance.now() - t0) / 1e3 > state2.tunedAt + afterS2) break;
      if (performance.now() - lastDraw > 250) {
        state2.similarity = emb.map((a) => emb.map((b) => a.reduce((s, x, i) => s + x * b[i], 0)));
        render2(state2, texts);
        lastDraw = performance.now();
      }
      await new Promise((res) => setTimeout(res, 0));
      await paused();
    }
    state2.phase = "stopped";
  } catch (e) {
    state2.phase = "error";
    state2.error = e instanceof Error ? e.message : String(e);
  }
  render2(state2, []);
}
function render2(state2, texts) {
  const marks = state2.swaps.map((s) => ({ t: s.t, label: `${s.op} ${s.shape.join("×")} ×${s.speedup.toFixed(2)}`, color: "#d62728" }));
  const title = `Wasm int16 · ${state2.model} · ${state2.encodes} encodes, ${state2.swaps.length} swaps`;
  drawChart($2("chart"), state2.latencies, marks, title, [["kernel swap", "#d62728"]]);
  if (texts.length) {
    const head = texts.map((_, j) => `<th>${j + 1}</th>`).join("");
    const rows = texts.map((t, i) => `<tr><th title="${esc2(t)}">${i + 1}. ${esc2(t.slice(0, 40))}</th>${state2.similarity[i].map((v) => `<td style="background:rgba(31,119,180,${Math.max(0, v).toFixed(2)})">${v.toFixed(3)}</td>`).join("")}</tr>`);
    $2("sim").innerHTML = `<tr><th>cosine</th>${head}</tr>${rows.join("")}`;
  }
  const last = state2.latencies.slice(-9).map((p) => p.ms).sort((a, b) => a - b);
  $2("status").textContent = state2.error ? `error: ${state2.error}` : `${state2.phase} · ${state2.model} · device key ${state2.deviceKey} · encode ${last.length ? last[last.length >> 1].toFixed(1) : "?"} ms (median of the last 9)` + (state2.tunedAt !== null ? ` · tuned after ${state2.tunedAt.toFixed(1)} s` : "");
}

// demo/model.ts
function checkConfig(c) {
  if (c.dim % c.heads) throw new Error(`dim ${c.dim} must be a multiple of heads ${c.heads}`);
  if (c.q4 && (c.dim % 32 || c.ffn % 32)) throw new Error("q4 weights need dim and ffn to be multiples of 32");
  for (const [k, v] of Object.entries(c)) if (typeof v === "number" && !(Number.isInteger(v) && v > 0)) throw new Error(`${k} must be a positive integer`);
}
function kernelList(c) {
  const dh = c.dim / c.heads;
  const mlp = c.q4 ? "matmul_q4" : "matmul";
  return [
    { name: "qkv", op: "matmul", shape: [c.seq, c.dim, 3 * c.dim] },
    { name: "scores", op: "batch_matmul", shape: [c.heads, c.seq, dh, c.seq] },
    { name: "context", op: "batch_matmul", shape: [c.heads, c.seq, c.seq, dh] },
    { name: "out", op: "matmul", shape: [c.seq, c.dim, c.dim] },
    { name: "up", op: mlp, shape: [c.seq, c.dim, c.ffn] },
    { name: "down", op: mlp, shape: [c.seq, c.ffn, c.dim] }
  ];
}
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = a + 1831565813 >>> 0;
    let t = a;
    t = Math.imul(t ^ t >>> 15, t | 1);
    t ^= t + Math.imul(t ^ t >>> 7, t | 61);
    return ((t ^ t >>> 14) >>> 0) / 4294967296;
  };
}
function makeWeights(c) {
  const r = rng(24301);
  const normal = () => {
    let s = 0;
    for (let i = 0; i < 4; i++) s += r();
    return (s - 2) * Math.sqrt(3);
  };
  const dense = (rows, cols) => {
    const w = new Float32Array(rows * cols);
    const scale = 1 / Math.sqrt(rows);
    for (let i = 0; i < w.length; i++) w[i] = normal() * scale;
    return w;
  };
  const q4 = (k, n) => {
    const w = new Uint32Array(n * k / 8);
    for (let i = 0; i < w.length; i++) w[i] = r() * 4294967296 >>> 0;
    const s = new Float32Array(n * k / 32);
    for (let i = 0; i < s.length; i++) s[i] = (0.8 + 0.4 * r()) / (4.6 * Math.sqrt(k));
    return [w, s];
  };
  const ln = (d) => {
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
      const angle = t / Math.pow(1e4, 2 * Math.floor(i / 2) / c.dim);
      embed[t * c.dim + i] = table[tok * c.dim + i] * Math.sqrt(c.dim) * 0.1 + (i % 2 ? Math.cos(angle) : Math.sin(angle));
    }
  }
  const layers = [];
  for (let l = 0; l < c.layers; l++) {
    const [w1, s1] = c.q4 ? q4(c.dim, c.ffn) : [dense(c.dim, c.ffn), null];
    const [w2, s2] = c.q4 ? q4(c.ffn, c.dim) : [dense(c.ffn, c.dim), null];
    layers.push({ ln1: ln(c.dim), wqkv: dense(c.dim, 3 * c.dim), wo: dense(c.dim, c.dim), ln2: ln(c.dim), w1, s1, w2, s2 });
  }
  return { embed, layers, lnf: ln(c.dim) };
}
function layerNorm(x, p, y, rows, d) {
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
function gelu(x) {
  return 0.5 * x * (1 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
var Arena = class {
  constructor(memory) {
    this.memory = memory;
  }
  memory;
  end = 0;
  views = /* @__PURE__ */ new Map();
  buffer = null;
  alloc(name, len, kind = "f32") {
    const off = this.end;
    this.end = Math.ceil((off + len * 4) / 64) * 64;
    const need = this.end - this.memory.buffer.byteLength;
    if (need > 0) this.memory.grow(Math.ceil(need / 65536));
    this.views.set(name, { off, len, kind });
    return off;
  }
  off(name) {
    return this.views.get(name).off;
  }
  f32(name) {
    return this.view(name);
  }
  u32(name) {
    return this.view(name);
  }
  view(name) {
    if (this.buffer !== this.memory.buffer) {
      this.buffer = this.memory.buffer;
      for (const v2 of this.views.values()) v2.view = void 0;
    }
    const v = this.views.get(name);
    v.view ??= v.kind === "f32" ? new Float32Array(this.buffer, v.off, v.len) : new Uint32Array(this.buffer, v.off, v.len);
    return v.view;
  }
};
async function wasmModel(wt, c, w) {
  const memory = wt.memory;
  const a = new Arena(memory);
  const { seq: T, dim: D, heads: H, ffn: F } = c;
  const dh = D / H;
  const ks = {};
  for (const k of kernelList(c)) ks[k.name] = await wt.wasmKernel(k.op, k.shape);
  for (const [n, len] of [
    ["x", T * D],
    ["h", T * D],
    ["qkv", T * 3 * D],
    ["q", T * D],
    ["kt", T * D],
    ["v", T * D],
    ["s", H * T * T],
    ["o", H * T * dh],
    ["m", T * D],
    ["a", T * D],
    ["u", T * F],
    ["y", T * D]
  ]) a.alloc(n, len);
  w.layers.forEach((l, i) => {
    a.alloc(`wqkv${i}`, l.wqkv.length);
    a.alloc(`wo${i}`, l.wo.length);
    a.alloc(`w1${i}`, l.w1.length, c.q4 ? "u32" : "f32");
    a.alloc(`w2${i}`, l.w2.length, c.q4 ? "u32" : "f32");
    if (c.q4) {
      a.alloc(`s1${i}`, l.s1.length);
      a.alloc(`s2${i}`, l.s2.length);
    }
  });
  w.layers.forEach((l, i) => {
    a.f32(`wqkv${i}`).set(l.wqkv);
    a.f32(`wo${i}`).set(l.wo);
    if (c.q4) {
      a.u32(`w1${i}`).set(l.w1);
      a.u32(`w2${i}`).set(l.w2);
      a.f32(`s1${i}`).set(l.s1);
      a.f32(`s2${i}`).set(l.s2);
    } else {
      a.f32(`w1${i}`).set(l.w1);
      a.f32(`w2${i}`).set(l.w2);
    }
  });
  const mlp = (k, i, which, inp, out) => {
    if (c.q4) k.run(a.off(inp), a.off(`w${which}${i}`), a.off(`s${which}${i}`), a.off(out));
    else k.run(a.off(inp), a.off(`w${which}${i}`), a.off(out));
  };
  const scale = 1 / Math.sqrt(dh);
  async function forward() {
    a.f32("x").set(w.embed);
    for (let i = 0; i < c.layers; i++) {
      const L = w.layers[i];
      layerNorm(a.f32("x"), L.ln1, a.f32("h"), T, D);
      ks.qkv.run(a.off("h"), a.off(`wqkv${i}`), a.off("qkv"));
      const qkv = a.f32("qkv"), q = a.f32("q"), kt = a.f32("kt"), v = a.f32("v");
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
      ks.scores.run(a.off("q"), a.off("kt"), a.off("s"));
      const s = a.f32("s");
      for (let r = 0; r < H * T; r++) {
        let max = -Infinity;
        for (let j = 0; j < T; j++) max = Math.max(max, s[r * T + j]);
        let sum = 0;
        for (let j = 0; j < T; j++) sum += s[r * T + j] = Math.exp(s[r * T + j] - max);
        for (let j = 0; j < T; j++) s[r * T + j] /= sum;
      }
      ks.context.run(a.off("s"), a.off("v"), a.off("o"));
      const o = a.f32("o"), m = a.f32("m");
      for (let hh = 0; hh < H; hh++) for (let t = 0; t < T; t++) for (let j = 0; j < dh; j++) m[t * D + hh * dh + j] = o[(hh * T + t) * dh + j];
      ks.out.run(a.off("m"), a.off(`wo${i}`), a.off("a"));
      const x = a.f32("x"), at = a.f32("a");
      for (let p = 0; p < T * D; p++) x[p] += at[p];
      layerNorm(x, L.ln2, a.f32("h"), T, D);
      mlp(ks.up, i, 1, "h", "u");
      const u = a.f32("u");
      for (let p = 0; p < T * F; p++) u[p] = gelu(u[p]);
      mlp(ks.down, i, 2, "u", "a");
      const x2 = a.f32("x"), d2 = a.f32("a");
      for (let p = 0; p < T * D; p++) x2[p] += d2[p];
    }
    layerNorm(a.f32("x"), w.lnf, a.f32("y"), T, D);
    return a.f32("y").slice();
  }
  return { forward, kernels: ks };
}
var WG = 64;
function helpers(c) {
  const { seq: T, dim: D, heads: H, ffn: F } = c;
  const dh = D / H;
  const head = (bindings) => `${bindings}
@compute @workgroup_size(${WG}) fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x;
`;
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
}`
  };
}
async function gpuModel(wt, c, w) {
  const device = wt.device;
  const { seq: T, dim: D, heads: H, ffn: F } = c;
  const dh = D / H;
  const ks = {};
  for (const k of kernelList(c)) ks[k.name] = await wt.gpuKernel(k.op, k.shape);
  const buf = (data, label, extra = 0) => {
    const size = Math.ceil((typeof data === "number" ? data : data.length) * 4 / 16) * 16;
    const b = device.createBuffer({ label, size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC | extra });
    if (typeof data !== "number") device.queue.writeBuffer(b, 0, data);
    return b;
  };
  const B = {
    x: buf(T * D, "x"),
    h: buf(T * D, "h"),
    qkv: buf(T * 3 * D, "qkv"),
    q: buf(T * D, "q"),
    kt: buf(T * D, "kt"),
    v: buf(T * D, "v"),
    s: buf(H * T * T, "s"),
    o: buf(H * T * dh, "o"),
    m: buf(T * D, "m"),
    a: buf(T * D, "a"),
    u: buf(T * F, "u"),
    y: buf(T * D, "y"),
    lnf: buf(w.lnf, "lnf")
  };
  const staging = device.createBuffer({ size: T * D * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const src = helpers(c);
  const pipes = {};
  for (const [name, code] of Object.entries(src)) {
    pipes[name] = await device.createComputePipelineAsync({ label: name, layout: "auto", compute: { module: device.createShaderModule({ label: name, code }), entryPoint: "main" } });
  }
  const bg = (pipe, buffers) => device.createBindGroup({ layout: pipes[pipe].getBindGroupLayout(0), entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })) });
  const groups = (n) => Math.ceil(n / WG);
  const steps = [];
  const helper = (pipe, buffers, n) => {
    const g = bg(pipe, buffers);
    steps.push((pass) => {
      pass.setPipeline(pipes[pipe]);
      pass.setBindGroup(0, g);
      pass.dispatchWorkgroups(groups(n));
    });
  };
  const kernel = (k, buffers) => {
    const g = k.bindGroup(buffers);
    steps.push((pass) => k.dispatch(pass, g));
  };
  w.layers.forEach((l, i) => {
    const ln1 = buf(l.ln1, `ln1.${i}`), ln2 = buf(l.ln2, `ln2.${i}`);
    const wqkv = buf(l.wqkv, `wqkv.${i}`), wo = buf(l.wo, `wo.${i}`);
    const w1 = buf(l.w1, `w1.${i}`), w2 = buf(l.w2, `w2.${i}`);
    helper("layernorm", [B.x, ln1, B.h], T);
    kernel(ks.qkv, [B.h, wqkv, B.qkv]);
    helper("split", [B.qkv, B.q, B.kt, B.v], T * D);
    kernel(ks.scores, [B.q, B.kt, B.s]);
    helper("softmax", [B.s], H * T);
    kernel(ks.context, [B.s, B.v, B.o]);
    helper("merge", [B.o, B.m], T * D);
    kernel(ks.out, [B.m, wo, B.a]);
    helper("add", [B.a, B.x], T * D);
    helper("layernorm", [B.x, ln2, B.h], T);
    if (c.q4) kernel(ks.up, [B.h, w1, buf(l.s1, `s1.${i}`), B.u]);
    else kernel(ks.up, [B.h, w1, B.u]);
    helper("gelu", [B.u], T * F);
    if (c.q4) kernel(ks.down, [B.u, w2, buf(l.s2, `s2.${i}`), B.a]);
    else kernel(ks.down, [B.u, w2, B.a]);
    helper("add", [B.a, B.x], T * D);
  });
  helper("layernorm", [B.x, B.lnf, B.y], T);
  async function forward() {
    device.queue.writeBuffer(B.x, 0, w.embed);
    const enc = device.createCommandEncoder();
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

// demo/demo.ts
var params = new URLSearchParams(location.search);
var num = (k, d) => params.has(k) ? Number(params.get(k)) : d;
var target = params.get("target") === "webgpu" ? "webgpu" : "wasm";
var config = {
  layers: num("layers", 4),
  seq: num("seq", 64),
  dim: num("dim", 256),
  heads: num("heads", 4),
  ffn: num("ffn", 4 * num("dim", 256)),
  vocab: 512,
  q4: params.get("q4") === "1"
};
var budgetMs = num("budget", 8);
var afterS = num("after", 0);
var maxCandidates = params.has("candidates") ? num("candidates", 0) : void 0;
var worker = params.get("worker") !== "0";
var generatedAsked = ["layers", "seq", "dim", "heads", "ffn", "q4"].some((k) => params.has(k)) || params.get("model") === "0";
var threads = params.has("threads") ? Number(params.get("threads")) : void 0;
var COLORS = {
  qkv: "#d62728",
  scores: "#2ca02c",
  context: "#9467bd",
  out: "#ff7f0e",
  up: "#8c564b",
  down: "#e377c2"
};
var state = {
  target,
  config,
  /** Whether tuning runs in the background worker. */
  background: false,
  phase: "starting",
  error: "",
  deviceKey: "",
  threads: 1,
  fingerprint: null,
  timerResolutionMs: 0,
  kernels: [],
  swaps: [],
  measured: 0,
  /** Every candidate measured: kernel, hash, whether it passed, its median and the kernel in use's, µs. */
  measures: [],
  failed: [],
  reports: [],
  inferences: 0,
  latencies: [],
  /** Each loop's idle() call: when it started (s), how long it took (ms), whether it tuned. */
  idles: [],
  tunedAt: null,
  summary: null,
  output: { first: null, last: null, maxDiff: 0 }
};
window.webtuneDemo = state;
var $3 = (id) => document.getElementById(id);
var canvas = $3("chart");
var stopRequested = false;
function nameOf(op, shape) {
  return kernelList(config).find((k) => k.op === op && k.shape.join() === shape.join())?.name ?? op;
}
function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
}
function windowMedian(points, i, half) {
  let lo = i, hi = i;
  while (lo > 0 && points[lo - 1].t >= points[i].t - half) lo--;
  while (hi < points.length - 1 && points[hi + 1].t <= points[i].t + half) hi++;
  return median(points.slice(lo, hi + 1).map((p) => p.ms));
}
function summarize(points, swaps) {
  if (points.length < 20) return null;
  const firstSwap = swaps.length ? swaps[0].t : Infinity;
  const before = points.slice(10).filter((p) => p.t < firstSwap).slice(0, 200);
  const startMs = median((before.length ? before : points.slice(10, 60)).map((p) => p.ms));
  const finalMs = median(points.slice(-Math.min(100, Math.floor(points.length / 3))).map((p) => p.ms));
  let secondsToWithin5 = null;
  for (let i = points.length - 1; i >= 0 && windowMedian(points, i, 1) <= finalMs * 1.05; i--) secondsToWithin5 = points[i].t;
  let secondsToWithin5Of9 = null;
  for (let i = points.length - 1; i >= 0 && median(points.slice(Math.max(0, i - 8), i + 1).map((p) => p.ms)) <= finalMs * 1.05; i--) {
    secondsToWithin5Of9 = points[i].t;
  }
  return { startMs, finalMs, secondsToWithin5, secondsToWithin5Of9 };
}
function render3(wt) {
  const marks = state.swaps.map((s2) => ({ t: s2.t, label: `${s2.name} ×${s2.speedup.toFixed(2)}`, color: COLORS[s2.name] ?? "#555" }));
  const c = config;
  const title = `${target === "wasm" ? "Wasm" : "WebGPU"} · ${c.layers} layers, seq ${c.seq}, dim ${c.dim}, ${c.heads} heads, ffn ${c.ffn}${c.q4 ? ", q4 MLP" : ""} · ${state.inferences} inferences, ${state.swaps.length} swaps`;
  drawChart(canvas, state.latencies, marks, title, kernelList(config).map((k) => [k.name, COLORS[k.name]]));
  const rows = state.kernels.map((k) => {
    const st = wt?.status().find((s2) => s2.op === k.op && s2.shape.join() === k.shape.join());
    const progress = st ? `${st.phase} ${st.evaluated}/${st.total || "?"}` : "";
    return `<tr><td style="color:${COLORS[k.name]}">${k.name}</td><td>${k.op}</td><td>${k.shape.join("×")}</td><td>${k.source}${k.level ? ` (${k.level})` : ""}</td><td>${progress}</td><td>${k.swaps}</td><td><code>${k.sha256.slice(0, 12)}</code></td></tr>`;
  });
  $3("kernels").innerHTML = `<tr><th>kernel</th><th>op</th><th>shape</th><th>first from</th><th>tuning</th><th>swaps</th><th>in use</th></tr>${rows.join("")}`;
  const s = state.summary;
  $3("status").textContent = state.error ? `error: ${state.error}` : `${state.phase} · device key ${state.deviceKey} · ${state.threads} thread${state.threads > 1 ? "s" : ""} · timer ${state.timerResolutionMs.toFixed(3)} ms · candidates measured ${state.measured} (${state.failed.length} failed checks) · reports ${state.reports.length}` + (s ? ` · latency ${s.startMs.toFixed(2)} → ${s.finalMs.toFixed(2)} ms${s.secondsToWithin5 !== null ? `, within 5 % of final after ${s.secondsToWithin5.toFixed(1)} s` : ""}` : "");
}
function yieldNow() {
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => resolve();
    ch.port2.postMessage(null);
  });
}
function fingerprintOut(out) {
  const picks = [0, 1, out.length >> 1, out.length - 1].map((i) => out[i]);
  let norm = 0;
  for (const v of out) norm += v * v;
  return [...picks, Math.sqrt(norm)];
}
async function main() {
  checkConfig(config);
  let device, adapter;
  if (target === "webgpu") {
    if (!navigator.gpu) throw new Error("this browser has no WebGPU (headless Chromium needs --enable-unsafe-webgpu)");
    adapter = await navigator.gpu.requestAdapter() ?? void 0;
    if (!adapter) throw new Error("no WebGPU adapter");
    device = await adapter.requestDevice({ requiredFeatures: adapter.features.has("timestamp-query") ? ["timestamp-query"] : [] });
  }
  const shared = target === "wasm" && threads !== 1 && threadSupport().ok;
  const memory = target === "wasm" ? new WebAssembly.Memory(shared ? { initial: 16, maximum: 65536, shared } : { initial: 16 }) : void 0;
  const wt = await Webtune.open({ target, device, adapter, memory, budgetMs, maxCandidates, worker, threads });
  state.threads = wt.threads.count;
  state.background = wt.background;
  state.deviceKey = wt.session.device_key;
  state.fingerprint = wt.fingerprint;
  state.timerResolutionMs = wt.timerResolutionMs;
  const weights = makeWeights(config);
  const model = target === "wasm" ? await wasmModel(wt, config, weights) : await gpuModel(wt, config, weights);
  for (const k of kernelList(config)) {
    const h = model.kernels[k.name];
    state.kernels.push({ name: k.name, op: k.op, shape: k.shape, source: h.source, level: h.level, initial: h.sha256, sha256: h.sha256, swaps: 0 });
  }
  let t0 = 0;
  wt.addEventListener("swap", (e) => {
    const d = e.detail;
    const name = nameOf(d.op, d.shape);
    state.swaps.push({ ...d, name, t: (d.at - t0) / 1e3 });
    const k = state.kernels.find((k2) => k2.name === name);
    k.sha256 = d.to;
    k.swaps++;
  });
  wt.addEventListener("measure", (e) => {
    const d = e.detail;
    state.measured++;
    state.measures.push({ name: nameOf(d.op, d.shape), sha256: d.sha256, ok: d.ok, us: d.median_us, current_us: d.current_us, runs: d.runs, early: !!d.rejected_early, t: (performance.now() - t0) / 1e3, trace: d.trace });
    if (!d.ok) state.failed.push({ name: nameOf(d.op, d.shape), sha256: d.sha256, error: d.error });
  });
  wt.addEventListener("report", (e) => {
    const d = e.detail;
    state.reports.push({ ...d, name: nameOf(d.op, d.shape) });
  });
  state.phase = "running";
  t0 = performance.now();
  let lastDraw = 0;
  while (!stopRequested) {
    const start = performance.now();
    const out = await model.forward();
    const ms = performance.now() - start;
    state.latencies.push({ t: (start - t0) / 1e3, ms });
    state.inferences++;
    const fp = fingerprintOut(out);
    if (!state.output.first) state.output.first = fp;
    state.output.last = fp;
    state.output.maxDiff = Math.max(state.output.maxDiff, ...fp.map((v, i) => Math.abs(v - state.output.first[i]) / Math.max(1, Math.abs(state.output.first[i]))));
    const i0 = performance.now();
    const r = await wt.idle();
    if (!r.done) state.idles.push({ t: (i0 - t0) / 1e3, ms: performance.now() - i0, worked: r.worked });
    if (r.done && state.tunedAt === null) {
      state.tunedAt = (performance.now() - t0) / 1e3;
      state.phase = "tuned";
    }
    if (state.tunedAt !== null && afterS > 0 && (performance.now() - t0) / 1e3 > state.tunedAt + afterS) break;
    if (performance.now() - lastDraw > 250) {
      state.summary = summarize(state.latencies, state.swaps);
      render3(wt);
      lastDraw = performance.now();
    }
    await yieldNow();
    await waitForChat();
  }
  state.summary = summarize(state.latencies, state.swaps);
  state.phase = "stopped";
  render3(wt);
}
$3("stop").addEventListener("click", () => {
  stopRequested = true;
});
$3("clear").addEventListener("click", async () => {
  indexedDB.deleteDatabase("webtune");
  $3("status").textContent = "local kernel cache cleared; reload to start from the server";
});
$3("target").value = target;
$3("target").addEventListener("change", (e) => {
  params.set("target", e.target.value);
  location.search = params.toString();
});
async function pickModels() {
  if (target !== "wasm") return { encoder: null, chat: null };
  try {
    const res = await fetch("/v1/models");
    if (!res.ok) return { encoder: null, chat: null };
    const { models } = await res.json();
    const pick = (task, want) => (want ? models.find((m) => m.name === want && (m.task ?? "feature-extraction") === task) : models.find((m) => (m.task ?? "feature-extraction") === task))?.name ?? null;
    return {
      encoder: generatedAsked || params.get("encoder") === "0" ? null : pick("feature-extraction", params.get("model")),
      chat: params.get("chat") === "0" ? null : pick("text-generation", params.get("chat"))
    };
  } catch {
    return { encoder: null, chat: null };
  }
}
var chatBusy = null;
var chatDone = null;
var waitForChat = () => chatBusy ?? Promise.resolve();
pickModels().then(({ encoder, chat }) => {
  if (chat) {
    void runChatDemo({
      model: chat,
      threads,
      budgetMs,
      maxTokens: num("chat_tokens", 256),
      onBusy: (busy) => {
        if (busy) chatBusy = new Promise((res) => chatDone = res);
        else {
          chatDone?.();
          chatBusy = chatDone = null;
        }
      }
    });
  }
  if (encoder) return runEncoderDemo(encoder, afterS, budgetMs, () => stopRequested, waitForChat);
  if (chat && !generatedAsked) {
    for (const id of ["chart", "status", "kernels", "stop"]) $3(id).style.display = "none";
    return;
  }
  $3("hint").textContent = "A generated model with random weights. For a real one: webtune model import PATH (e.g. all-MiniLM-L6-v2, or a llama GGUF such as SmolLM2 for the chat), then webtune serve.";
  render3(null);
  return main();
}).catch((e) => {
  state.phase = "error";
  state.error = e instanceof Error ? `${e.message}` : String(e);
  render3(null);
  console.error(e);
});
