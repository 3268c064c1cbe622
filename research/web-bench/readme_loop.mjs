// The README's own tuning loop, timed: all-MiniLM-L6-v2 in headless
// Chromium from an empty database, the app encoding texts of 16, 64, 128
// and 256 tokens and a batch of 8 × 128 in turn, `await enc.idle()` (no
// budget) after every call, for --seconds of wall time; per bucket, the
// median latency of its calls in each window of wall time, the candidate
// timings and evaluations the tuner took, and when its `tuned` event came.
// Then the latency of every bucket once more without tuning (the tuned
// figure the loop is compared with) and, as the issue asks, the same for
// each policy, precision and thread count named.
//
//   node research/web-bench/readme_loop.mjs [--seconds 60] [--policy fast,legacy]
//        [--precision int16,fp32] [--threads 1,2] [--runs 7] [--runtime FILE] [--trace]
//
// --runtime serves FILE (a `node build.mjs` output's webtune.js) at
// /web/webtune.js instead of the one the server embeds, so that a runtime
// can be measured without rebuilding the server.
//
// Each (policy, precision, threads) runs with its own server on a fresh
// SQLite database and its own browser profile. Needs WEBTUNE_MODELS_DIR and
// WEBTUNE_MODEL_NAME as the encoder test does (export WEBTUNE_CACHE=$HOME/.cache/webtune;
// eval "$(scripts/fetch-model.sh)"); WEBTUNE_BIN, default target/release/webtune.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isolatingProxy, launchChromium, startServer } from '../../client-runtime/web/test/harness.mjs';

const arg = (k, d) => {
  const i = process.argv.indexOf(k);
  return i >= 0 ? process.argv[i + 1] : d;
};
const SECONDS = Number(arg('--seconds', 60));
const RUNS = Number(arg('--runs', 7));
const POLICIES = String(arg('--policy', 'fast,legacy')).split(',');
const PRECISIONS = String(arg('--precision', 'int16,fp32')).split(',');
const THREADS = String(arg('--threads', '1,2')).split(',').map(Number);
const NAME = process.env.WEBTUNE_MODEL_NAME ?? 'all-minilm-l6-v2';
const RUNTIME = arg('--runtime', null);
/** The app's calls, in turn: [batch, tokens]. */
const CASES = [[1, 16], [1, 64], [1, 128], [1, 256], [8, 128]];
/** Windows of wall time the latency is reported for, s. */
const MARKS = [5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300].filter((s) => s <= SECONDS);

for (const p of POLICIES) if (p !== 'fast' && p !== 'legacy') throw new Error(`--policy takes fast and/or legacy, got ${p}`);
for (const p of PRECISIONS) if (p !== 'fp32' && p !== 'int16') throw new Error(`--precision takes fp32 and/or int16, got ${p}`);

const summary = [];
for (const precision of PRECISIONS) {
  for (const threads of THREADS) {
    for (const policy of POLICIES) summary.push(await run(policy, precision, threads));
  }
}
console.log('\nsummary: policy, precision, threads, timings, candidates evaluated, kernels tuned, tuned event at (s), 1x128 at 15 s, 1x128 at the end, 1x128 tuned (after the loop)');
for (const s of summary) console.log(`  ${s.join('\t')}`);

async function run(policy, precision, threads) {
  console.log(`\n=== policy ${policy}, ${precision}, ${threads} thread(s), ${SECONDS} s of the README loop ===`);
  const work = mkdtempSync(join(tmpdir(), 'webtune-readme-loop-'));
  const server = await startServer(`${work}/r.sqlite`, ['--quorum', '1', '--models-dir', process.env.WEBTUNE_MODELS_DIR]);
  const browser = await launchChromium(`${work}/profile`);
  const proxy = threads > 1 ? await isolatingProxy(server.url) : null;
  try {
    const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
    page.on('crash', () => console.log('page crashed'));
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') console.log('page:', m.text());
    });
    if (RUNTIME) {
      const body = readFileSync(RUNTIME, 'utf8');
      await page.route('**/web/webtune.js', (route) => route.fulfill({
        body, contentType: 'text/javascript', headers: { 'cross-origin-resource-policy': 'same-origin' },
      }));
    }
    await page.goto(proxy ? `${proxy.url}/` : `${server.url}/healthz`);
    const got = await page.evaluate(async ({ name, threads, precision, policy }) => {
      const { SentenceEncoder } = await import('/web/webtune.js');
      window.enc = await SentenceEncoder.load({ model: name, target: 'wasm', cache: false, threads, precision, policy });
      return window.enc.webtune.threads;
    }, { name: NAME, threads, precision, policy });
    console.log(`threads: ${JSON.stringify(got)}`);
    const r = await page.evaluate(async ({ cases, ms, runs }) => {
      const enc = window.enc;
      const wt = enc.webtune;
      // Texts of exactly n tokens.
      // Common words, one token each.
      const words = Array.from({ length: 600 }, (_, i) => ['the', 'model', 'runs', 'on', 'this', 'device', 'and', 'it', 'is', 'fast'][i % 10]);
      const make = (n) => {
        let k = n - 2;
        for (let tries = 0; tries < 50; tries++) {
          const t = words.slice(0, k).join(' ');
          const len = enc.tokenize(t).length;
          if (len === n) return t;
          if (len > n) k--;
          else k++;
        }
        throw new Error(`no text of exactly ${n} tokens`);
      };
      const texts = Object.fromEntries(cases.map(([, n]) => [n, make(n)]));
      const batches = cases.map(([b, n]) => new Array(b).fill(texts[n]));
      let tunedAt = null;
      const t0 = performance.now();
      const measured = [];
      wt.addEventListener('measure', (e) => {
        const m = e.detail, tr = m.trace ?? {};
        measured.push(`${((performance.now() - t0) / 1000).toFixed(1)} s ${m.op} ${m.shape.join('x')} #${m.index}: ${m.ok ? `${(m.median_us / m.current_us).toFixed(3)}x` : m.error}` +
          ` warm ${tr.warm_pairs} timed ${tr.timed_pairs}${m.rejected_early ? ' (early)' : ''} busy ${tr.busy_ms?.toFixed(0)} ms in ${tr.slices} slices`);
      });
      wt.addEventListener('tuned', () => (tunedAt = (performance.now() - t0) / 1000));
      const log = [];
      let i = 0;
      // The README loop: encode, then idle() with no budget.
      while (performance.now() - t0 < ms) {
        const c = i++ % batches.length;
        const a = performance.now();
        await enc.encode(batches[c]);
        log.push([c, (a - t0) / 1000, performance.now() - a]);
        await enc.idle();
      }
      const prog = wt.progress;
      // The tuned figure: every bucket again, no tuning between calls.
      const after = [];
      for (const b of batches) {
        const ms = [];
        for (let r = 0; r < runs; r++) {
          const a = performance.now();
          await enc.encode(b);
          ms.push(performance.now() - a);
        }
        ms.sort((x, y) => x - y);
        after.push(ms[ms.length >> 1]);
      }
      return { log, prog, tunedAt, after, calls: i, measured };
    }, { cases: CASES, ms: SECONDS * 1000, runs: RUNS });
    const label = CASES.map(([b, n]) => `${b}x${n}`);
    if (process.argv.includes('--trace')) for (const m of r.measured) console.log(`  measured ${m}`);
    console.log(`README loop: ${r.calls} encode calls in ${SECONDS} s; ${r.prog.evaluated} candidates evaluated, ${r.prog.timings} candidate timings, ` +
      `${r.prog.tuned}/${r.prog.total} kernels tuned, expected gain left ${(100 * r.prog.expectedGain).toFixed(1)} %, 'tuned' event ${r.tunedAt === null ? 'not yet' : `at ${r.tunedAt.toFixed(1)} s`}`);
    console.log(`median ms per call of each bucket, by window of wall time (s):\n  window\t${label.join('\t')}`);
    let from = 0;
    const at = {};
    for (const mark of [...MARKS, SECONDS]) {
      if (mark <= from) continue;
      const row = CASES.map((_, c) => {
        const xs = r.log.filter(([cc, t]) => cc === c && t >= from && t < mark).map((x) => x[2]).sort((a, b) => a - b);
        return xs.length ? xs[xs.length >> 1] : NaN;
      });
      at[mark] = row;
      console.log(`  ${from}-${mark}\t${row.map((x) => x.toFixed(1)).join('\t')}`);
      from = mark;
    }
    console.log(`  after\t${r.after.map((x) => x.toFixed(1)).join('\t')}   (${RUNS} calls each, no tuning between)`);
    const i128 = CASES.findIndex(([b, n]) => b === 1 && n === 128);
    return [policy, precision, threads, r.prog.timings, r.prog.evaluated, `${r.prog.tuned}/${r.prog.total}`, r.tunedAt?.toFixed(1) ?? '-',
      at[15]?.[i128]?.toFixed(1) ?? '-', at[SECONDS]?.[i128]?.toFixed(1) ?? '-', r.after[i128].toFixed(1)];
  } finally {
    await browser.close();
    proxy?.close();
    server.proc.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }
}
