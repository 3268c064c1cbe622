// Does tuning leave SmolLM2 on Wasm faster or slower than its default
// kernels? Measured in one headless Chromium page, interleaved, so that a
// shared machine's load hits both sides alike (issue 36: on the 2-core Xeon
// 60 s of tuning once took 1-thread decode from 26.8 to 18.5 tokens/s).
//
//   node research/web-bench/llm_tuned_ab.mjs --server URL [--model smollm2]
//        [--threads 1] [--tune-s 60] [--rounds 6] [--runtime PATH/webtune.js]
//
// `webtune serve` at URL serves the model (a fresh database, so that the
// page starts from the default kernels); --runtime serves another build of
// the runtime at /web/webtune.js in its place (e.g. one built from an older
// commit, for a before/after pair). The page loads `TextGenerator` (target
// 'wasm', context 1024), warms the 128-token prefill bucket and the decode
// step, then tunes with `idle(100)` until done or --tune-s, and prints:
// - every `swap` (the speedup that decided it) and every `trial` (a bench
//   winner tried in the model's own calls: its speedup on the bench and in
//   the model, adopted or not; runtimes from 3576597 on);
// - the plan A/B: each swapped kernel bound to its default kernel or to
//   the tuned one, all at once, in --rounds ABBA rounds of a 128-token
//   prefill and 16 decode steps at position 129; medians and the tuned /
//   default time ratio (< 1: tuning made it faster); then decode steps with
//   the plan changed every step (ABBA over four steps), so that both sides
//   of a pair meet the same load: the median of the pairs' ratios.
// Not a test: one line per figure, for BENCHMARKS.md. Token ids are a fixed
// run (1000 + i mod 977): the figures do not depend on the text.

import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchChromium } from '../../client-runtime/web/test/harness.mjs';

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i < 0 ? d : process.argv[i + 1];
};
const server = arg('server', null)?.replace(/\/+$/, '');
if (!server) {
  console.error('usage: node llm_tuned_ab.mjs --server URL [--model smollm2] [--threads 1] [--tune-s 60] [--rounds 6] [--runtime PATH]');
  process.exit(1);
}
const opts = { model: arg('model', 'smollm2'), threads: Number(arg('threads', 1)), tuneS: Number(arg('tune-s', 60)), rounds: Number(arg('rounds', 6)) };
const runtime = arg('runtime', null);

const profile = mkdtempSync(join(tmpdir(), 'llm-tuned-ab-'));
const browser = await launchChromium(profile);
try {
  const page = await browser.newPage();
  page.on('console', (m) => console.log(m.text()));
  // Cross-origin isolated (threads), same origin as the server.
  const iso = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
  await page.route(`${server}/ab.html`, (r) => r.fulfill({ status: 200, headers: { 'content-type': 'text/html', ...iso }, body: '<!doctype html><meta charset=utf-8>' }));
  if (runtime) await page.route(`${server}/web/webtune.js`, (r) => r.fulfill({ status: 200, headers: { 'content-type': 'text/javascript', ...iso }, body: readFileSync(runtime, 'utf8') }));
  await page.goto(`${server}/ab.html`);
  console.log(`Chromium ${browser.version()}, ${opts.threads} thread(s), runtime ${runtime ?? 'the server\'s'}, ${new Date().toISOString()}`);
  await page.evaluate(run, opts);
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}

/** In the page. */
async function run({ model, threads, tuneS, rounds }) {
  const { TextGenerator } = await import('/web/webtune.js');
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const gen = await TextGenerator.load({ server: location.origin, model, target: 'wasm', threads, context: 1024, cache: false, report: false });
  const wt = gen.webtune;
  const swaps = [], trials = [], verdicts = [];
  wt.addEventListener('swap', (e) => swaps.push(e.detail));
  wt.addEventListener('trial', (e) => trials.push(e.detail));
  // The plan guard's verdicts (runtimes from e9ef6e7 on): a bucket's tuned plan against the one it replaced, in the model's own runs.
  wt.addEventListener('guard', (e) => verdicts.push(e.detail));
  const prompt = Array.from({ length: 128 }, (_, i) => 1000 + (i % 977));
  const prefillMs = async () => {
    const t = performance.now();
    await gen.forward(prompt, { reset: true });
    return performance.now() - t;
  };
  const decodeMs = async (steps) => {
    await gen.forward(prompt, { reset: true });
    await gen.forward([5]);
    const t = performance.now();
    for (let s = 0; s < steps; s++) await gen.forward([1000 + s]);
    return (performance.now() - t) / steps;
  };
  await prefillMs();
  await decodeMs(4);
  // The kernels in use before tuning (the handles are the session's internals).
  const handles = wt.handles;
  const initial = new Map(handles.map((h) => [h, h.impl]));

  const t0 = performance.now();
  let done = false;
  while (!done && performance.now() - t0 < tuneS * 1000) {
    const r = await gen.idle(100);
    done = r.done;
    if (!r.worked && !done) await new Promise((res) => setTimeout(res, 5));
  }
  console.log(`tuned ${((performance.now() - t0) / 1000).toFixed(1)} s (${done ? 'every kernel' : 'budget spent'}), ${swaps.length} swaps, ${trials.length} trials in the model`);
  const k = (d) => `${d.op} ${d.shape.join('x')} ${d.to.slice(0, 8)}`;
  for (const d of swaps) console.log(`  swap ${k(d)}: ${d.speedup.toFixed(3)}x`);
  for (const d of trials) console.log(`  trial ${k(d)}: bench ${d.bench_speedup.toFixed(3)}x, model ${d.app_speedup.toFixed(3)}x over ${d.pairs} pairs: ${d.adopted ? 'adopted' : 'not adopted'}`);
  // Judgements still open (a bucket whose kernels finished late): decode steps until they are settled, 60 s at most.
  if (wt.guard) {
    const g0 = performance.now();
    await gen.forward(prompt, { reset: true });
    // Judgements open, or due (a kernel not judged yet; TextGenerator.idle() runs steps of its bucket).
    const owed = () => wt.guard.pending().length > 0 || wt.handles.some((h) => h.unguarded);
    for (let i = 0; owed() && performance.now() - g0 < 60_000; i++) {
      if (i % 512 === 511) await gen.forward(prompt, { reset: true });
      await gen.idle(50);
      await gen.forward([1000 + (i % 977)]);
    }
    if (owed()) console.log(`  the plan guard still judges bucket(s) ${wt.guard.pending().join(', ') || '(none open)'} after 60 s`);
    else console.log(`  the plan guard's judgements took ${((performance.now() - g0) / 1000).toFixed(1)} s after tuning`);
  }
  for (const d of verdicts)
    console.log(`  guard, bucket ${d.kind}: ${d.kernels.length} kernels ${d.kept ? 'kept' : 'put back'}, plan / base ${d.ratio.toFixed(3)} over ${d.pairs} pairs (${d.plan_ms.toFixed(2)} against ${d.base_ms.toFixed(2)} ms a run)`);

  const swapped = [];
  for (const h of handles) {
    const def = initial.get(h);
    if (!def || def === h.impl) continue;
    const binding = h.newBinding();
    await binding.bind(def);
    swapped.push({ h, tuned: h.binding, def: binding });
  }
  const plan = (side) => swapped.forEach((x) => (x.h.binding = side === 'default' ? x.def : x.tuned));
  const ms = { default: { prefill: [], decode: [] }, tuned: { prefill: [], decode: [] } };
  for (let r = 0; r < rounds; r++) {
    for (const side of r % 2 ? ['tuned', 'default'] : ['default', 'tuned']) {
      plan(side);
      ms[side].prefill.push(await prefillMs());
      ms[side].decode.push(await decodeMs(16));
    }
  }
  // Decode steps one by one, the plan changed every step (ABBA), so that each
  // pair of steps meets the same load: the median ratio of the pairs.
  const stepRatios = [];
  await gen.forward(prompt, { reset: true });
  for (let i = 0, open = {}; i < 16 * rounds; i++) {
    const side = i % 4 === 1 || i % 4 === 2 ? 'tuned' : 'default';
    plan(side);
    const t = performance.now();
    await gen.forward([1000 + (i % 977)]);
    open[side] = (open[side] ?? 0) + performance.now() - t;
    if (i % 4 === 3) stepRatios.push(open.tuned / open.default), (open = {});
  }
  plan('tuned');
  const tps = (side, what, n) => (n * 1000) / median(ms[side][what]);
  const ratio = (what) => (median(ms.tuned[what]) / median(ms.default[what])).toFixed(3);
  console.log(`plan A/B (${swapped.length} kernels differ, ${rounds} ABBA rounds): prefill 128 default ${tps('default', 'prefill', 128).toFixed(1)}, tuned ${tps('tuned', 'prefill', 128).toFixed(1)} tokens/s (tuned / default time ${ratio('prefill')}); ` +
    `decode default ${tps('default', 'decode', 1).toFixed(1)}, tuned ${tps('tuned', 'decode', 1).toFixed(1)} tokens/s (${ratio('decode')}); ` +
    `decode step by step (plan changed every step, ${stepRatios.length} ABBA pairs from position 129): median tuned / default ${median(stepRatios).toFixed(3)}`);
  gen.close();
}
