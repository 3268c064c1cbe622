// Where a decode step's time goes on Wasm: the browser runtime's built
// module (client-runtime/web/dist/webtune.js), unchanged, loads the model
// from a `webtune serve` into `TextGenerator` (target 'wasm', one thread, no
// tuning: the server's first kernels), in Node, whose V8 is Chromium's
// engine. Every fixed kernel and every product of the Wasm backend is
// wrapped in a timer, then a prompt is fed and decode steps run. Not a test:
// it prints JSON lines for BENCHMARKS.md.
//
//   node research/web-bench/llm_wasm_profile.mjs --server URL --model NAME
//        [--prompt 128] [--steps 48] [--rounds 3] [--runtime PATH/webtune.js]
//
// Lines: `load`; `probe` (this thread's streaming read bandwidth, the
// probe of probe.mjs); per round `round` (decode tokens/s untimed and
// timed, the wrappers' overhead); `by_kind` (per kernel kind: calls a
// token, ms a token, bytes read a token where it is a product's weights,
// GB/s; and the share of the step), from the timed steps of every round.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readBandwidth } from './probe.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const a = process.argv.slice(2), o = {};
for (let i = 0; i < a.length; i += 2) {
  if (!a[i].startsWith('--') || a[i + 1] === undefined) throw new Error(`usage: node llm_wasm_profile.mjs --server URL --model NAME [--prompt 128] [--steps 48] [--rounds 3]; got ${a[i]}`);
  o[a[i].slice(2)] = a[i + 1];
}
if (!o.server || !o.model) throw new Error('usage: node llm_wasm_profile.mjs --server URL --model NAME [...]');
const prompt = Number(o.prompt ?? 128), steps = Number(o.steps ?? 48), rounds = Math.max(1, Number(o.rounds ?? 3));
const runtime = resolve(o.runtime ?? join(ROOT, 'client-runtime', 'web', 'dist', 'webtune.js'));
const line = (what, x) => console.log(JSON.stringify({ what, ...x }));

// Node 20 has no navigator; the fingerprint reads its user agent (Node 21+ has one) and core count.
globalThis.navigator ??= { userAgent: `Node.js/${process.version.slice(1)} (${process.platform} ${process.arch === 'x64' ? 'x86_64' : process.arch})`, hardwareConcurrency: (await import('node:os')).cpus().length };
const { TextGenerator } = await import(pathToFileURL(runtime).href);
const t0 = performance.now();
const gen = await TextGenerator.load({ server: o.server.replace(/\/+$/, ''), model: o.model, target: 'wasm', threads: 1, tune: false, cache: false, report: false });
line('load', { s: (performance.now() - t0) / 1000, memory_bytes: gen.memoryBytes });
const dec = gen.decoder.dec ?? gen.decoder;
if (!dec.fixed) throw new Error(`no fixed kernels on ${dec.constructor.name}: ${Object.keys(gen.decoder).join()}`);
const ids = Array.from({ length: prompt }, (_, i) => (i * 7919 + 13) % 4000 + 100);
let tok = await gen.nextToken(ids, { reset: true });
tok = await gen.nextToken([tok]);

// Weight bytes a product reads, by format (as the bundle stores them: f32 scales and minimums).
const perWeight = { q4_1: 0.5 + 8 / 32, q4_0: 0.5 + 4 / 32, q8_0: 1 + 4 / 32, f32: 4 };
const acc = new Map();
let on = false;
const wrap = (key, bytes, fn, self) => function (...args) {
  if (!on) return fn.apply(self, args);
  const s = performance.now();
  const r = fn.apply(self, args);
  const e = acc.get(key) ?? { calls: 0, ms: 0, bytes };
  e.calls++;
  e.ms += performance.now() - s;
  acc.set(key, e);
  return r;
};
// The fixed kernels are the module's (frozen) exports: the backend gets a copy with each function wrapped.
const exportsOf = dec.fixed;
dec.fixed = Object.fromEntries(Object.entries(exportsOf).map(([name, v]) => [name, typeof v === 'function' ? wrap(name, 0, v, exportsOf) : v]));
const ks = dec.ready.get(1);
const seen = new Set();
gen.graph.steps.forEach((s, i) => {
  const k = ks[i];
  if (s.step !== 'matmul' || !k || seen.has(k)) return;
  seen.add(k);
  const key = `${s.kernel} 1x${s.k}x${s.n}`;
  k.run = wrap(key, s.k * s.n * perWeight[s.format], k.run, k);
});

const probe = await readBandwidth();
line('probe', probe);
for (let r = 0; r < rounds; r++) {
  const rate = async (timers) => {
    await gen.nextToken(ids, { reset: true });
    on = timers;
    let t = tok;
    const s = performance.now();
    for (let i = 0; i < steps; i++) t = await gen.nextToken([t]);
    const r = (steps * 1000) / (performance.now() - s);
    on = false;
    return r;
  };
  // Untimed and timed rounds in turn (ABBA over the rounds).
  const before = new Map([...acc].map(([k, v]) => [k, v.ms]));
  let plain, withTimers;
  if (r % 2) {
    withTimers = await rate(true);
    plain = await rate(false);
  } else {
    plain = await rate(false);
    withTimers = await rate(true);
  }
  line('round', { round: r, tokens_per_s: plain, tokens_per_s_timed: withTimers, overhead: plain / withTimers - 1, kinds: acc.size, new_ms: [...acc].reduce((x, [k, v]) => x + v.ms - (before.get(k) ?? 0), 0) });
}
// Only the decode steps are timed (the prompt's run is not).
const tokens = rounds * steps;
const rows = [...acc].map(([kind, v]) => ({ kind, calls_per_token: v.calls / tokens, ms_per_token: v.ms / tokens, bytes_per_token: (v.bytes * v.calls) / tokens, gb_per_s: v.bytes ? (v.bytes * v.calls) / (v.ms / 1000) / 1e9 : null }))
  .sort((x, y) => y.ms_per_token - x.ms_per_token);
const total = rows.reduce((x, r) => x + r.ms_per_token, 0);
line('by_kind', { tokens, total_ms_per_token: total, rows: rows.map((r) => ({ ...r, share: r.ms_per_token / total })) });
gen.close();
