// Where SentenceEncoder's time goes: ms per `encode` call split by stage
// (each tuned matmul shape, each fixed kernel), batch 1 × N tokens, Wasm,
// on --threads threads (default 1) in headless Chromium, with the default kernels and optionally
// after --tune-seconds of tuning. The stages are timed by running the
// encoder's own `run` with a clock around each call, so their sum is the
// forward pass without tokenising.
//
//   node research/web-bench/encoder_profile.mjs [--tokens 128] [--runs 20] [--tune-seconds 0] [--timeline 0] [--worker] [--threads 1]
//                                  [--precision fp32,int16]
//
// --timeline S instead encodes one text again and again for S seconds from
// an empty database, tuning in `idle()` between calls as an app would (the
// paper's Fig. 16 for a real model), and prints the latency over time and
// when it came within 5% of the final (the median of the last 10 calls) for good (every later 15-call median).
// --worker tunes in the bench worker (the `worker` option) instead of in
// `idle()` on the page's thread.
// --precision (default fp32) names the SentenceEncoder precisions to run,
// one after the other, each with a server on a fresh database and a fresh
// browser (so that neither starts with kernels the other tuned); int16 runs
// the weight products on matmul_i16, with quant_rows as a stage of its own.
//
// Needs WEBTUNE_MODELS_DIR and WEBTUNE_MODEL_NAME as the encoder test does;
// WEBTUNE_BIN, default target/release/webtune.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isolatingProxy, launchChromium, startServer } from '../../client-runtime/web/test/harness.mjs';

const arg = (k, d) => {
  const i = process.argv.indexOf(k);
  return i >= 0 ? process.argv[i + 1] : d;
};
const TOKENS = Number(arg('--tokens', 128));
const RUNS = Number(arg('--runs', 20));
const TUNE_S = Number(arg('--tune-seconds', 0));
const TIMELINE_S = Number(arg('--timeline', 0));
const WORKER = process.argv.includes('--worker');
const THREADS = Number(arg('--threads', 1));
const PRECISIONS = String(arg('--precision', 'fp32')).split(',');
for (const p of PRECISIONS) {
  if (p !== 'fp32' && p !== 'int16') {
    console.error(`encoder_profile: --precision takes fp32 and/or int16, comma-separated, got ${p}`);
    process.exit(1);
  }
}
const NAME = process.env.WEBTUNE_MODEL_NAME ?? 'all-minilm-l6-v2';

for (const precision of PRECISIONS) {
  console.log(`\n=== precision ${precision} ===`);
  await run(precision);
}

// One precision: its own server, browser and page.
async function run(precision) {
  const work = mkdtempSync(join(tmpdir(), 'webtune-profile-'));
  const server = await startServer(`${work}/p.sqlite`, ['--quorum', '1', '--models-dir', process.env.WEBTUNE_MODELS_DIR]);
  const browser = await launchChromium(`${work}/profile`);
  // Cross-origin isolated (through a proxy) when threads are asked for.
  const proxy = THREADS > 1 ? await isolatingProxy(server.url) : null;
  try {
    const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
    page.on('console', (m) => console.log('page:', m.text()));
    await page.goto(proxy ? `${proxy.url}/` : `${server.url}/healthz`);
    const threads = await page.evaluate(async ({ name, worker, threads, precision }) => {
      const { SentenceEncoder } = await import('/web/webtune.js');
      window.enc = await SentenceEncoder.load({ model: name, target: 'wasm', cache: false, worker, budgetMs: worker ? 100 : 8, threads, precision });
      return window.enc.webtune.threads;
    }, { name: NAME, worker: WORKER, threads: THREADS, precision });
    console.log(`threads: ${JSON.stringify(threads)}`);
    if (TIMELINE_S > 0) await timeline(page);
    else {
      await profile(page, `${precision}, default kernels`);
      if (TUNE_S > 0) {
        await tune(page);
        await profile(page, `${precision}, after tuning`);
      }
    }
  } finally {
    await browser.close();
    proxy?.close();
    server.proc.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }
}

async function profile(page, label) {
  const rows = await page.evaluate(async ({ tokens, runs }) => {
    const enc = window.enc;
    const text = Array.from({ length: tokens * 2 }, (_, i) => 'word' + (i % 7)).join(' ');
    let ids = enc.tokenize(text).slice(0, tokens - 1);
    ids = [...ids, 102];
    await enc.encode([text]);
    const bk = await enc.bucket(1, tokens);
    const acc = new Map();
    const clock = (name, fn) => {
      const t = performance.now();
      fn();
      acc.set(name, (acc.get(name) ?? 0) + performance.now() - t);
    };
    // A copy of SentenceEncoder.run with a clock around every call.
    const real = enc.fixed;
    const timed = {};
    for (const k of Object.keys(real)) timed[k] = (...a) => clock(k, () => real[k](...a));
    const wrap = (kname, k) => ({ run: (...a) => clock(kname, () => k.run(...a)) });
    const view = Object.create(bk);
    for (const k of ['qkvK', 'scoresK', 'contextK', 'outK', 'upK', 'downK']) view[k] = wrap(k, bk[k]);
    enc.fixed = timed;
    const total = [];
    for (let r = 0; r < runs; r++) {
      const t = performance.now();
      enc.run(view, [ids]);
      total.push(performance.now() - t);
    }
    enc.fixed = real;
    total.sort((a, b) => a - b);
    // The whole public call (tokenising, batching, the copy out) on a text of the same length.
    const whole = [];
    const same = enc.tokenizer.decode(ids.slice(1, -1));
    for (let r = 0; r < runs; r++) {
      const t = performance.now();
      await enc.encode([same]);
      whole.push(performance.now() - t);
    }
    whole.sort((a, b) => a - b);
    const names = { qkvK: bk.qkvK, scoresK: bk.scoresK, contextK: bk.contextK, outK: bk.outK, upK: bk.upK, downK: bk.downK };
    const out = [...acc].map(([k, ms]) => ({ k, ms: ms / runs, shape: names[k] ? `${names[k].op} ${names[k].shape.join('x')} (${names[k].source})` : '' }));
    out.push({ k: 'total (median)', ms: total[total.length >> 1], shape: '' });
    out.push({ k: 'total encode()', ms: whole[whole.length >> 1], shape: `${enc.tokenize(same).length} tokens` });
    return out;
  }, { tokens: TOKENS, runs: RUNS });
  const sum = rows.filter((r) => !r.k.startsWith('total')).reduce((a, r) => a + r.ms, 0);
  console.log(`\n${label}: 1x${TOKENS} tokens, ${RUNS} runs, ms per call`);
  for (const r of rows) console.log(`  ${r.k.padEnd(16)} ${r.ms.toFixed(2).padStart(8)} ${r.k.startsWith('total') ? '' : ((100 * r.ms) / sum).toFixed(1).padStart(5) + '%'}  ${r.shape}`);
}

async function timeline(page) {
  const calls = await page.evaluate(async ({ tokens, ms }) => {
    const enc = window.enc;
    const text = Array.from({ length: tokens * 2 }, (_, i) => 'word' + (i % 7)).join(' ');
    const ids = enc.tokenize(text);
    // The text cut to exactly `tokens` tokens.
    let cut = text.split(' ');
    while (enc.tokenize(cut.join(' ')).length > tokens) cut = cut.slice(0, -1);
    const t = cut.join(' ');
    const out = [];
    const t0 = performance.now();
    let done = false;
    while (performance.now() - t0 < ms) {
      const a = performance.now();
      await enc.encode([t]);
      out.push([a - t0, performance.now() - a]);
      if (!done) done = (await enc.idle(8)).done;
      await new Promise((r) => setTimeout(r, 0));
    }
    return { out, done, tokens: enc.tokenize(t).length, ids: ids.length };
  }, { tokens: TOKENS, ms: TIMELINE_S * 1000 });
  const lat = calls.out;
  const last = lat.slice(-10).map((x) => x[1]).sort((a, b) => a - b);
  const final = last[5];
  // The first call from which every later 15-call median stays within 5% of the final.
  const med5 = (i) => lat.slice(i, i + 15).map((x) => x[1]).sort((a, b) => a - b)[7];
  let within = lat.length - 15;
  while (within > 0 && med5(within - 1) <= final * 1.05) within--;
  console.log(`timeline: 1x${calls.tokens} tokens, ${lat.length} calls in ${TIMELINE_S} s, tuning ${calls.done ? 'done' : 'not done'}`);
  console.log(`  first call ${lat[0][1].toFixed(1)} ms (kernels fetched and compiled), second ${lat[1][1].toFixed(1)} ms, final (median of the last 10) ${final.toFixed(1)} ms`);
  console.log(`  within 5% of final (15-call median) from t = ${(lat[within][0] / 1000).toFixed(1)} s (call ${within + 1})`);
  for (const sec of [1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120]) {
    const i = lat.findIndex((x) => x[0] >= sec * 1000);
    if (i >= 0 && i + 15 <= lat.length) console.log(`  t = ${String(sec).padStart(3)} s: ${med5(i).toFixed(1)} ms`);
  }
}

async function tune(page) {
  const t = await page.evaluate(async (ms) => {
    const t0 = performance.now();
    let swaps = 0;
    window.enc.webtune.addEventListener('swap', () => swaps++);
    while (performance.now() - t0 < ms) {
      const r = await window.enc.idle(100);
      if (r.done) break;
      await new Promise((res) => setTimeout(res, 0));
    }
    return { s: (performance.now() - t0) / 1000, swaps };
  }, TUNE_S * 1000);
  console.log(`\ntuned for ${t.s.toFixed(0)} s, ${t.swaps} swaps`);
}
