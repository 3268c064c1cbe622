// Where SentenceEncoder's time goes: ms per `encode` call split by stage
// (each tuned matmul shape, each fixed kernel), batch 1 × N tokens, Wasm,
// one thread in headless Chromium, with the default kernels and optionally
// after --tune-seconds of tuning. The stages are timed by running the
// encoder's own `run` with a clock around each call, so their sum is the
// forward pass without tokenising.
//
//   node bench/encoder_profile.mjs [--tokens 128] [--runs 20] [--tune-seconds 0]
//
// Needs WEBTUNE_MODELS_DIR and WEBTUNE_MODEL_NAME as the encoder test does;
// WEBTUNE_BIN, default target/release/webtune.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchChromium, startServer } from '../test/harness.mjs';

const arg = (k, d) => {
  const i = process.argv.indexOf(k);
  return i >= 0 ? process.argv[i + 1] : d;
};
const TOKENS = Number(arg('--tokens', 128));
const RUNS = Number(arg('--runs', 20));
const TUNE_S = Number(arg('--tune-seconds', 0));
const NAME = process.env.WEBTUNE_MODEL_NAME ?? 'all-minilm-l6-v2';

const work = mkdtempSync(join(tmpdir(), 'webtune-profile-'));
const server = await startServer(`${work}/p.sqlite`, ['--quorum', '1', '--models-dir', process.env.WEBTUNE_MODELS_DIR]);
const browser = await launchChromium(`${work}/profile`);
const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
page.on('console', (m) => console.log('page:', m.text()));
await page.goto(`${server.url}/healthz`);
await page.evaluate(async (name) => {
  const { SentenceEncoder } = await import('/web/webtune.js');
  window.enc = await SentenceEncoder.load({ model: name, target: 'wasm', cache: false, budgetMs: 100 });
}, NAME);

async function profile(label) {
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
    const names = { qkvK: bk.qkvK, scoresK: bk.scoresK, contextK: bk.contextK, outK: bk.outK, upK: bk.upK, downK: bk.downK };
    const out = [...acc].map(([k, ms]) => ({ k, ms: ms / runs, shape: names[k] ? `${names[k].op} ${names[k].shape.join('x')} (${names[k].source})` : '' }));
    out.push({ k: 'total (median)', ms: total[total.length >> 1], shape: '' });
    return out;
  }, { tokens: TOKENS, runs: RUNS });
  const sum = rows.filter((r) => !r.k.startsWith('total')).reduce((a, r) => a + r.ms, 0);
  console.log(`\n${label}: 1x${TOKENS} tokens, ${RUNS} runs, ms per call`);
  for (const r of rows) console.log(`  ${r.k.padEnd(16)} ${r.ms.toFixed(2).padStart(8)} ${r.k.startsWith('total') ? '' : ((100 * r.ms) / sum).toFixed(1).padStart(5) + '%'}  ${r.shape}`);
}

await profile('default kernels');
if (TUNE_S > 0) {
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
  await profile('after tuning');
}
await browser.close();
server.proc.kill('SIGTERM');
rmSync(work, { recursive: true, force: true });
