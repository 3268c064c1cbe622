// SentenceEncoder through Dawn, Chromium's WebGPU implementation, in Node
// (the npm package `webgpu`), WebGPU against Wasm on the same machine: the
// browser runtime's built module (client-runtime/web/dist/webtune.js),
// unchanged, loads one encoder per target from a `webtune serve`, tunes
// each through the normal tuning path (`enc.idle()` between calls), then
// times them side by side. For the GPU machine, where there is no browser
// (issue 37's Benchmarks: the first model-level GPU figures for the plan's
// backend choice). Not a test: it prints JSON lines for BENCHMARKS.md.
//
//   node research/web-bench/encoder_dawn.mjs --server URL --model NAME
//        [--tune-s 30] [--rounds 7] [--cases 1x16,1x128,8x128]
//        [--runtime PATH/webtune.js] [--webgpu PATH/webgpu/index.js]
//
// Encoders: `webgpu` (fp32), `wasm` (fp32) and `wasm-int16`, each on one
// thread of the host for its Wasm part (no workers in Node). Lines:
// `adapter`; `load` (s per encoder); `tuning` (per encoder: s, candidates
// evaluated, swaps, done); per case (batch × tokens) `case`: each
// encoder's median ms per call over --rounds rounds, the encoders taken
// in a rotating order each round, and webgpu's time over each Wasm one's.
// Texts are words the tokenizer keeps whole, so a case's token count is
// exact; the weights may be random (research/gpu-llm/synth_encoder.py):
// the figures do not depend on them.
import { existsSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const a = process.argv.slice(2), o = {};
for (let i = 0; i < a.length; i += 2) {
  if (!a[i].startsWith('--') || a[i + 1] === undefined) throw new Error(`usage: node encoder_dawn.mjs --server URL --model NAME [--tune-s 30] [--rounds 7] [--cases 1x16,1x128,8x128]; got ${a[i]}`);
  o[a[i].slice(2)] = a[i + 1];
}
if (!o.server || !o.model) throw new Error('usage: node encoder_dawn.mjs --server URL --model NAME [...]');
const server = o.server.replace(/\/+$/, ''), tuneS = Number(o['tune-s'] ?? 30), rounds = Math.max(1, Number(o.rounds ?? 7));
const cases = (o.cases ?? '1x16,1x128,8x128').split(',').map((c) => c.split('x').map(Number));
const runtime = resolve(o.runtime ?? join(ROOT, 'client-runtime', 'web', 'dist', 'webtune.js'));
const webgpu = resolve(o.webgpu ?? join(ROOT, 'client-runtime', 'web', 'node_modules', 'webgpu', 'index.js'));
for (const [what, p] of [['runtime', runtime], ['webgpu package', webgpu]]) if (!existsSync(p)) throw new Error(`no ${what} at ${p}`);

const line = (what, fields) => console.log(JSON.stringify({ what, ...fields }));
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const { create, globals } = await import(pathToFileURL(webgpu).href);
Object.assign(globalThis, globals);
let gpu = create([]);
globalThis.navigator ??= { userAgent: `Node.js/${process.version.slice(1)} (Dawn; ${process.platform} ${process.arch === 'x64' ? 'x86_64' : process.arch})`, hardwareConcurrency: cpus().length };
Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true });
const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
if (!adapter) throw new Error('Dawn found no adapter');
const features = ['timestamp-query', 'subgroups', 'shader-f16'].filter((f) => adapter.features.has(f));
const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits: { maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize, maxBufferSize: adapter.limits.maxBufferSize } });
const info = adapter.info ?? {};
line('adapter', { vendor: info.vendor, architecture: info.architecture, device: info.device, description: info.description, features, node: process.version, cores: cpus().length, cpu: cpus()[0]?.model });

const { SentenceEncoder } = await import(pathToFileURL(runtime).href);
const common = { server, model: o.model, cache: false, worker: false, threads: 1, budgetMs: 200 };
const specs = { webgpu: { target: 'webgpu', device }, wasm: { target: 'wasm' }, 'wasm-int16': { target: 'wasm', precision: 'int16' } };
const encs = {}, loads = {};
for (const [name, spec] of Object.entries(specs)) {
  const t0 = performance.now();
  encs[name] = await SentenceEncoder.load({ ...common, ...spec });
  loads[name] = +((performance.now() - t0) / 1000).toFixed(3);
}
line('load', { s: loads });
// A text of n tokens: [CLS], n - 2 words, [SEP].
const text = (n) => Array(n - 2).fill('house').join(' ');
const batch = ([b, n]) => Array.from({ length: b }, () => text(n));
for (const c of cases) for (const e of Object.values(encs)) await e.encode(batch(c)); // compile every bucket's kernels

const tuning = {};
for (const [name, e] of Object.entries(encs)) {
  const swaps = [];
  e.webtune.addEventListener('swap', (ev) => swaps.push(ev.detail));
  const t0 = performance.now();
  let done = false;
  while (performance.now() - t0 < tuneS * 1000 && !done) {
    for (const c of cases) {
      await e.encode(batch(c));
      const r = await e.idle(200);
      done = r.done;
    }
  }
  const st = e.webtune.status();
  tuning[name] = { s: +((performance.now() - t0) / 1000).toFixed(1), kernels: st.length, evaluated: st.reduce((x, k) => x + k.evaluated, 0), swaps: swaps.length, done: st.every((k) => k.phase === 'done') };
}
line('tuning', tuning);

const names = Object.keys(encs);
for (const c of cases) {
  const texts = batch(c), ms = Object.fromEntries(names.map((n) => [n, []]));
  for (const n of names) await encs[n].encode(texts);
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < names.length; i++) {
      const n = names[(r + i) % names.length];
      const t0 = performance.now();
      await encs[n].encode(texts);
      ms[n].push(performance.now() - t0);
    }
  }
  const med = Object.fromEntries(names.map((n) => [n, +median(ms[n]).toFixed(3)]));
  line('case', { batch: c[0], tokens: c[1], rounds, median_ms: med, runs: Object.fromEntries(names.map((n) => [n, ms[n].map((x) => +x.toFixed(2))])),
    webgpu_over_wasm: +(med.webgpu / med.wasm).toFixed(3), webgpu_over_wasm_int16: +(med.webgpu / med['wasm-int16']).toFixed(3) });
}
for (const e of Object.values(encs)) e.close();
device.destroy();
delete globalThis.navigator.gpu;
gpu = null;
