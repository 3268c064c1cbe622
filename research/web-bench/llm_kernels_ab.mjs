// SmolLM2 on Wasm with two plans of its GGUF products, interleaved in one
// headless Chromium page (issue 36): the kernels the server gave, as f32
// kernels (`quantize_a` off) and as their 16-bit-activation twins
// (`quantize_a` on: same tiles, integer dot products), every other product
// and every fixed kernel the same. Prints
// - with --profile, where a decode step's time goes under each plan: each
//   product (op and shape: the 4 per layer and the head), its calls a
//   step, ms a step, and its weights' GB/s; the fixed kernels (attention,
//   rmsnorm, ...) each; the step's total and what is outside the calls;
//   and the page's Wasm streaming-read probe (a v128 sum of 512 MB), so
//   that each product's GB/s reads against what one core can stream;
// - the whole model: --rounds ABBA rounds of a 128-token prefill and
//   --steps decode steps from position 129, medians per plan and their
//   ratio; then decode steps with the plan changed every step (ABBA over
//   four steps), the median of the pairs' ratios;
// - the decode step's floor (the bytes a step reads over the probe's
//   bandwidth) and each plan's fraction of it.
//
//   node research/web-bench/llm_kernels_ab.mjs --server URL [--model smollm2]
//        [--threads 1] [--rounds 6] [--steps 16] [--profile] [--profile-steps 32]
//        [--bin target/release/webtune] [--f32 PLAN.json]
//
// --f32 names a JSON object of "op MxKxN" to a schedule: the f32 plan runs
// those kernels instead of the server's with `quantize_a` off (for
// example the first candidates of a server from before the 16-bit
// kernels led the lite space, the kernels a page got then).
// `webtune serve` at URL serves the model (with --quorum 1 and a fresh
// database its answers are the lite space's first candidates); the twins
// are compiled here by `webtune compile` (--bin) from each kernel's own
// config. Products whose kernel cannot quantise (the panel family of
// prompts, `cache_read`) run the same kernel in both plans. Not a test:
// one line per figure, for BENCHMARKS.md. Token ids are a fixed run
// (1000 + i mod 977).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { probeWasm } from './probe.mjs';
import { launchChromium } from '../../client-runtime/web/test/harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i < 0 ? d : process.argv[i + 1];
};
const server = arg('server', null)?.replace(/\/+$/, '');
if (!server) {
  console.error('usage: node llm_kernels_ab.mjs --server URL [--model smollm2] [--threads 1] [--rounds 6] [--steps 16] [--profile] [--profile-steps 32] [--bin PATH]');
  process.exit(1);
}
const BIN = arg('bin', join(here, '..', '..', 'target', 'release', 'webtune'));
const opts = {
  model: arg('model', 'smollm2'),
  threads: Number(arg('threads', 1)),
  rounds: Number(arg('rounds', 6)),
  steps: Number(arg('steps', 16)),
  profile: process.argv.includes('--profile'),
  profileSteps: Number(arg('profile-steps', 32)),
  f32Plan: arg('f32', null) ? JSON.parse(readFileSync(arg('f32', null), 'utf8')) : {},
};

// The probe (probe.mjs): the read bandwidth the decode floor is measured against.
const PROBE = Array.from(await probeWasm());

const work = mkdtempSync(join(tmpdir(), 'llm-kernels-ab-'));
let compiled = 0;
/** `webtune compile` of one kernel: its bytes (base64) and kernel.json. */
function compileKernel(op, shape, config) {
  const out = join(work, `k${compiled++}`);
  execFileSync(BIN, ['compile', '--op', op, '--shape', shape.join(','), '--target', 'wasm', '--config', JSON.stringify(config), '--out', out]);
  return { b64: readFileSync(join(out, 'kernel.wasm')).toString('base64'), meta: JSON.parse(readFileSync(join(out, 'kernel.json'), 'utf8')) };
}

const browser = await launchChromium(join(work, 'profile'));
try {
  const page = await browser.newPage();
  page.on('console', (m) => console.log(m.text()));
  const iso = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
  await page.route(`${server}/ab.html`, (r) => r.fulfill({ status: 200, headers: { 'content-type': 'text/html', ...iso }, body: '<!doctype html><meta charset=utf-8>' }));
  await page.exposeFunction('compileKernel', compileKernel);
  await page.goto(`${server}/ab.html`);
  console.log(`Chromium ${browser.version()}, ${opts.threads} thread(s), ${new Date().toISOString()}`);
  await page.evaluate(run, { ...opts, probe: PROBE });
} finally {
  await browser.close();
  rmSync(work, { recursive: true, force: true });
}

/** In the page. */
async function run({ model, threads, rounds, steps, profile, profileSteps, probe, f32Plan }) {
  const { TextGenerator, sharedImport } = await import('/web/webtune.js');
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  // The floor's bandwidth first, while the model is not yet in memory.
  const mem = new WebAssembly.Memory({ initial: 8193, maximum: 65536, shared: true });
  const probeInst = await WebAssembly.instantiate(new Uint8Array(probe), { env: { memory: mem } });
  new Uint8Array(mem.buffer).fill(1);
  const bytes = 512 << 20;
  probeInst.instance.exports.sum(0, bytes);
  const gbps = [];
  for (let r = 0; r < 5; r++) {
    const t = performance.now();
    probeInst.instance.exports.sum(0, bytes);
    gbps.push(bytes / ((performance.now() - t) / 1000) / 1e9);
  }
  const probeGBs = median(gbps);
  console.log(`read bandwidth (Wasm v128 streaming sum of 512 MB, 1 thread): ${gbps.map((g) => g.toFixed(2)).join(', ')} GB/s, median ${probeGBs.toFixed(2)}`);

  const gen = await TextGenerator.load({ server: location.origin, model, target: 'wasm', threads, context: 1024, cache: false, report: false });
  const wt = gen.webtune;
  const prompt = Array.from({ length: 128 }, (_, i) => 1000 + (i % 977));
  const prefillMs = async () => {
    const t = performance.now();
    await gen.forward(prompt, { reset: true });
    return performance.now() - t;
  };
  const decodeMs = async (n) => {
    await gen.forward(prompt, { reset: true });
    await gen.forward([5]);
    const t = performance.now();
    for (let s = 0; s < n; s++) await gen.forward([1000 + s]);
    return (performance.now() - t) / n;
  };
  await prefillMs();
  await decodeMs(4);

  // Each GGUF product's kernel in both forms.
  const b64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  const load = async (k) => {
    const bytes = b64(k.b64);
    const module = await WebAssembly.compile(gen.decoder.dec.memory.buffer instanceof SharedArrayBuffer ? sharedImport(bytes) : bytes);
    return { sha256: k.meta.sha256, meta: k.meta, module, bytes: bytes.buffer };
  };
  const swapped = [];
  for (const h of wt.handles) {
    if (h.op !== 'matmul_q4_1' && h.op !== 'matmul_q8_0') continue;
    const cfg = { ...h.meta.config };
    delete cfg.quantize_a;
    const can = cfg.vectorize === 4 && !cfg.cache_read;
    const f32 = f32Plan[`${h.op} ${h.shape.join('x')}`] ?? cfg;
    const sides = {};
    for (const [side, c] of [['f32', f32], ['a16', can ? { ...cfg, quantize_a: true } : cfg]]) {
      // A product whose kernel is the same in both plans keeps one binding (and so one scratch area).
      if (side === 'a16' && c === f32) {
        sides.a16 = sides.f32;
        continue;
      }
      const impl = await load(await window.compileKernel(h.op, h.shape, c));
      const binding = h.newBinding();
      await binding.bind(impl);
      sides[side] = binding;
    }
    swapped.push({ h, sides, can, cfg });
    console.log(`  ${h.op} ${h.shape.join('x')}: ${JSON.stringify(cfg)}${can ? '' : ' (no twin: the same kernel in both plans)'}${f32 !== cfg ? `; f32 plan ${JSON.stringify(f32)}` : ''}`);
  }
  const plan = (side) => swapped.forEach((x) => (x.h.binding = x.sides[side]));

  // Bytes a decode step reads: every M = 1 product's weights, the caches at position `pos`.
  const wbytes = (op, k, n) => (op === 'matmul_q8_0' ? 1.125 : 0.75) * k * n;
  const decodeProducts = gen.decoder.dec.graph.steps.filter((s) => s.step === 'matmul');
  const weightBytes = decodeProducts.reduce((a, s) => a + wbytes(s.kernel, s.k, s.n), 0);
  const cacheBytes = (pos) => gen.decoder.dec.graph.caches.reduce((a, c) => a + c.cols * 4 * pos, 0);
  const floorMs = (pos) => ((weightBytes + cacheBytes(pos)) / (probeGBs * 1e9)) * 1000;

  if (profile) {
    const dec = gen.decoder.dec;
    const fixed = dec.fixed;
    for (const side of ['f32', 'a16']) {
      plan(side);
      const acc = new Map();
      const note = (key, ms) => {
        const a = acc.get(key) ?? { calls: 0, ms: 0 };
        a.calls++;
        a.ms += ms;
        acc.set(key, a);
      };
      const timed = {};
      for (const name of Object.keys(fixed)) {
        timed[name] = (...a) => {
          const t = performance.now();
          fixed[name](...a);
          note(`fixed ${name}`, performance.now() - t);
        };
      }
      const runs = new Map();
      for (const h of wt.handles) {
        runs.set(h, h.run);
        const key = `${h.op} ${h.shape.join('x')}`;
        h.run = (...o) => {
          const t = performance.now();
          runs.get(h).apply(h, o);
          note(key, performance.now() - t);
        };
      }
      await gen.forward(prompt, { reset: true });
      await gen.forward([5]);
      for (let s = 0; s < 4; s++) await gen.forward([1000 + s]);
      acc.clear();
      dec.fixed = timed;
      const t0 = performance.now();
      for (let s = 0; s < profileSteps; s++) await gen.forward([1000 + s]);
      const stepMs = (performance.now() - t0) / profileSteps;
      dec.fixed = fixed;
      for (const h of wt.handles) delete h.run;
      const rows = [...acc.entries()].sort((a, b) => b[1].ms - a[1].ms);
      let inCalls = 0;
      console.log(`profile, plan ${side}, ${profileSteps} decode steps from position 134, ${threads} thread(s): ${stepMs.toFixed(2)} ms a step (${(1000 / stepMs).toFixed(1)} tokens/s)`);
      console.log('| part | calls a step | ms a step | share | weights MB | GB/s | of the probe |');
      console.log('|---|---|---|---|---|---|---|');
      for (const [key, a] of rows) {
        const ms = a.ms / profileSteps;
        inCalls += ms;
        const [op, shape] = key.split(' ');
        let gb = '', of = '', mb = '';
        if (op.startsWith('matmul')) {
          const [, k, n] = shape.split('x').map(Number);
          const b = wbytes(op, k, n) * (a.calls / profileSteps);
          mb = (b / 1e6).toFixed(1);
          gb = (b / (ms / 1000) / 1e9).toFixed(2);
          of = (b / (ms / 1000) / 1e9 / probeGBs).toFixed(2);
        }
        console.log(`| ${key} | ${(a.calls / profileSteps).toFixed(0)} | ${ms.toFixed(3)} | ${((100 * ms) / stepMs).toFixed(1)}% | ${mb} | ${gb} | ${of} |`);
      }
      console.log(`| outside the calls | | ${(stepMs - inCalls).toFixed(3)} | ${((100 * (stepMs - inCalls)) / stepMs).toFixed(1)}% | | | |`);
    }
  }

  const ms = { f32: { prefill: [], decode: [] }, a16: { prefill: [], decode: [] } };
  for (let r = 0; r < rounds; r++) {
    for (const side of r % 2 ? ['a16', 'f32'] : ['f32', 'a16']) {
      plan(side);
      ms[side].prefill.push(await prefillMs());
      ms[side].decode.push(await decodeMs(steps));
    }
  }
  const stepRatios = [];
  await gen.forward(prompt, { reset: true });
  for (let i = 0, open = {}; i < 16 * rounds; i++) {
    const side = i % 4 === 1 || i % 4 === 2 ? 'a16' : 'f32';
    plan(side);
    const t = performance.now();
    await gen.forward([1000 + (i % 977)]);
    open[side] = (open[side] ?? 0) + performance.now() - t;
    if (i % 4 === 3) stepRatios.push(open.a16 / open.f32), (open = {});
  }
  const tps = (side, what, n) => (n * 1000) / median(ms[side][what]);
  const ratio = (what) => (median(ms.a16[what]) / median(ms.f32[what])).toFixed(3);
  const floor = floorMs(129 + steps / 2);
  console.log(`whole model (${swapped.filter((x) => x.can).length} of ${swapped.length} GGUF kernels have a twin, ${rounds} ABBA rounds): prefill 128 f32 ${tps('f32', 'prefill', 128).toFixed(1)}, a16 ${tps('a16', 'prefill', 128).toFixed(1)} tokens/s (a16 / f32 time ${ratio('prefill')}); ` +
    `decode f32 ${tps('f32', 'decode', 1).toFixed(1)}, a16 ${tps('a16', 'decode', 1).toFixed(1)} tokens/s (${ratio('decode')}); ` +
    `decode step by step (plan changed every step, ${stepRatios.length} ABBA pairs from position 129): median a16 / f32 ${median(stepRatios).toFixed(3)}`);
  console.log(`floor: a decode step reads ${((weightBytes + cacheBytes(129 + steps / 2)) / 1e6).toFixed(1)} MB (weights ${(weightBytes / 1e6).toFixed(1)} MB), ${floor.toFixed(2)} ms at ${probeGBs.toFixed(2)} GB/s (${(1000 / floor).toFixed(1)} tokens/s); ` +
    `decode / floor: f32 ${(floor / median(ms.f32.decode)).toFixed(2)}, a16 ${(floor / median(ms.a16.decode)).toFixed(2)}`);
  gen.close();
}
