// SentenceEncoder latency in headless Chromium, Wasm, one thread: median ms
// per `encode` call for batch 1 at 16, 64, 128 and 256 tokens and batch 8
// at 128, with the default kernels and after tuning every kernel of those
// shapes, and the worst cosine against the f64 reference (the reference's
// 14 texts, encoded in the same state) beside each.
//
//   node research/web-bench/encoder.mjs [--runs 15] [--candidates N] [--tune-minutes 20]
//
// Starts `webtune serve --models-dir $WEBTUNE_MODELS_DIR` on a fresh SQLite
// file (WEBTUNE_BIN, default target/release/webtune); needs
// WEBTUNE_MODEL_REF and WEBTUNE_MODEL_NAME as the encoder test does.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cosine, launchChromium } from '../../client-runtime/web/test/harness.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = process.env.WEBTUNE_BIN ?? join(ROOT, 'target', 'release', 'webtune');
const NAME = process.env.WEBTUNE_MODEL_NAME ?? 'all-minilm-l6-v2';
const arg = (k, d) => {
  const i = process.argv.indexOf(k);
  return i >= 0 ? process.argv[i + 1] : d;
};
const RUNS = Number(arg('--runs', 15));
const CANDIDATES = arg('--candidates', null);
const TUNE_MIN = Number(arg('--tune-minutes', 20));
const CASES = [[1, 16], [1, 64], [1, 128], [1, 256], [8, 128]];

const ref = JSON.parse(readFileSync(process.env.WEBTUNE_MODEL_REF, 'utf8'));
const work = mkdtempSync(join(tmpdir(), 'webtune-bench-encoder-'));
const server = await new Promise((resolve, reject) => {
  const p = spawn(BIN, ['serve', '--addr', '127.0.0.1:0', '--database-url', `sqlite://${work}/b.sqlite`, '--quorum', '1', '--models-dir', process.env.WEBTUNE_MODELS_DIR], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.on('data', (d) => {
    out += d;
    const m = /listening on (http:\/\/\S+)/.exec(out);
    if (m) resolve({ proc: p, url: m[1] });
  });
  p.on('exit', (c) => reject(new Error(`webtune serve exited with ${c}`)));
});
const browser = await launchChromium(`${work}/profile`);
const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
await page.goto(`${server.url}/healthz`);


const t0 = Date.now();
await page.evaluate(async ({ name, candidates }) => {
  const { SentenceEncoder } = await import('/web/webtune.js');
  const opts = { model: name, target: 'wasm', cache: false, budgetMs: 100 };
  if (candidates) opts.maxCandidates = Number(candidates);
  window.enc = await SentenceEncoder.load(opts);
}, { name: NAME, candidates: CANDIDATES });
const loadS = (Date.now() - t0) / 1000;

// Texts of exactly n tokens: words of the reference's long text, one token each.
const long = ref.texts.find((t) => t.label === 'tokens_300').text.split(/\s+/);
const texts = await page.evaluate(({ long, cases }) => {
  const make = (n) => {
    let k = n - 2;
    for (;;) {
      const t = long.slice(0, k).join(' ');
      const len = window.enc.tokenize(t).length;
      if (len === n) return t;
      if (len > n) k--;
      else k++;
    }
  };
  return Object.fromEntries(cases.map(([, n]) => [n, make(n)]));
}, { long, cases: CASES });

async function measure(label) {
  const rows = await page.evaluate(async ({ texts, cases, runs }) => {
    const out = [];
    for (const [b, n] of cases) {
      const batch = new Array(b).fill(texts[n]);
      for (let i = 0; i < 3; i++) await window.enc.encode(batch);
      const ms = [];
      for (let i = 0; i < runs; i++) {
        const t = performance.now();
        await window.enc.encode(batch);
        ms.push(performance.now() - t);
      }
      ms.sort((x, y) => x - y);
      out.push({ b, n, median: ms[ms.length >> 1], min: ms[0] });
    }
    return out;
  }, { texts, cases: CASES, runs: RUNS });
  // One text a call: batch 1 buckets, mostly those timed above.
  const emb = await page.evaluate(async (t) => { const o = []; for (const x of t) o.push(Array.from((await window.enc.encode([x]))[0])); return o; }, ref.texts.map((t) => t.text));
  const worst = Math.min(...emb.map((e, i) => cosine(e, ref.texts[i].embedding)));
  for (const r of rows) console.log(`${label}\t${r.b}x${r.n}\tmedian ${r.median.toFixed(1)} ms\tmin ${r.min.toFixed(1)} ms\tworst cosine ${worst.toFixed(7)}`);
  return rows;
}

console.log(`load (manifest, 90 MB weights, tokenizer, kernels not yet): ${loadS.toFixed(1)} s`);
await measure('default');
const tuned = await page.evaluate(async (limitMs) => {
  const t = performance.now();
  let swaps = 0;
  window.enc.webtune.addEventListener('swap', () => swaps++);
  while (performance.now() - t < limitMs) {
    const r = await window.enc.idle(100);
    if (r.done) break;
    if (!r.worked) await new Promise((res) => setTimeout(res, 5));
  }
  const st = window.enc.webtune.status();
  return { s: (performance.now() - t) / 1000, swaps, kernels: st.length, done: st.filter((s) => s.phase === 'done').length, evaluated: st.reduce((a, s) => a + s.evaluated, 0) };
}, TUNE_MIN * 60_000);
console.log(`tuning: ${tuned.s.toFixed(0)} s, ${tuned.evaluated} candidates evaluated, ${tuned.swaps} swaps, ${tuned.done}/${tuned.kernels} kernels done`);
await measure('tuned');

await browser.close();
server.proc.kill('SIGTERM');
rmSync(work, { recursive: true, force: true });
