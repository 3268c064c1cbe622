// The README's own tuning loop, timed (issue 40): all-MiniLM-L6-v2 in
// headless Chromium from an empty database, the app encoding texts of 16,
// 64, 128 and 256 tokens and a batch of 8 × 128 in turn, `await enc.idle()`
// (no budget) after every call, until the runtime says every kernel is tuned
// (its `tuned` event) or --seconds of wall time pass. Then every bucket once
// more without tuning: the tuned latency the loop is compared with.
//
// Per run (policy, precision, threads), it prints:
// - the median latency of each bucket by window of wall time;
// - when every bucket came within 5 % of its tuned latency (the median of a
//   bucket's last three calls at most 1.05 × its tuned figure): first, and
//   for good (never above it again until the end of the loop), with the
//   candidate timings taken by then and in all;
// - with more than one thread, whether the model was ever slower than the
//   1-thread run of the same policy and precision (its default kernels' and
//   its tuned figure), bucket by bucket, while tuning went on: the worst
//   median of three calls in a row, and the worst single call;
// - the requests the page sent by kind, and how many the server refused
//   (429 or 503; issue 40's rate limits).
// Then, for the first policy, the second, third, ... --devices-th device of
// the same class: each a fresh browser context (a new session, no cache)
// against the same server after the first device finished (its loop goes
// on past --seconds until its tuning is done, --finish-seconds at most, so
// that every kernel of it was reported), running the same
// loop for --device-seconds at most (or until its own tuning is done): when
// every bucket came within 5 % of the first device's tuned latency, and the
// ratio of its first calls (after each bucket's compiling call) to it. The
// server runs with its default quorum (2) and first answer (`provisional`),
// so the second device is served the first one's ranking as provisional
// winners.
//
//   node research/web-bench/readme_loop.mjs [--seconds 180] [--policy fast,legacy]
//        [--precision int16,fp32] [--threads 1,2] [--runs 7] [--devices 10]
//        [--device-seconds 60] [--finish-seconds 600] [--runtime FILE] [--trace] [--js-flags FLAGS]
//
// --trace prints every candidate's measurement and every call of the loop.
// --js-flags FLAGS passes V8 flags to the browser.
//
// --server-nice (a list, default 19) runs the server and this script (the
// isolating proxy) at that nice value. On this machine the server shares
// the cores with the browser it serves, which a deployed server does not;
// at nice 19 the page's threads get the cores first. (Its compiling in the
// first seconds coincides with slow 2-thread calls, but warm_probe.mjs
// found them slow with the server in SCHED_IDLE too: see BENCHMARKS.md.)
// 0 measures the server as an equal.
//
// --runtime serves FILE (a `node build.mjs` output's webtune.js) at
// /web/webtune.js instead of the one the server embeds, so that a runtime
// can be measured without rebuilding the server. --devices 1 runs no later
// devices.
//
// Each (precision, threads, policy) runs with its own server on a fresh
// SQLite database and its own browser profile. Needs WEBTUNE_MODELS_DIR and
// WEBTUNE_MODEL_NAME as the encoder test does (export WEBTUNE_CACHE=$HOME/.cache/webtune;
// eval "$(scripts/fetch-model.sh)"); WEBTUNE_BIN, default target/release/webtune.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { isolatingProxy, launchChromium, startServer } from '../../client-runtime/web/test/harness.mjs';

const arg = (k, d) => {
  const i = process.argv.indexOf(k);
  return i >= 0 ? process.argv[i + 1] : d;
};
const SECONDS = Number(arg('--seconds', 180));
const RUNS = Number(arg('--runs', 7));
const POLICIES = String(arg('--policy', 'fast,legacy')).split(',');
const PRECISIONS = String(arg('--precision', 'int16,fp32')).split(',');
const THREADS = String(arg('--threads', '1,2')).split(',').map(Number);
const DEVICES = Number(arg('--devices', 10));
const DEVICE_SECONDS = Number(arg('--device-seconds', 60));
const FINISH_SECONDS = Number(arg('--finish-seconds', 600));
const NAME = process.env.WEBTUNE_MODEL_NAME ?? 'all-minilm-l6-v2';
const RUNTIME = arg('--runtime', null);
const TRACE = process.argv.includes('--trace');
// --js-flags FLAGS: V8 flags for the browser (e.g. '--no-wasm-dynamic-tiering'), to find what of tuning slows the app's calls.
const JS_FLAGS = arg('--js-flags', null);
const NICES = String(arg('--server-nice', '19')).split(',').map(Number);
if (NICES.some((n) => !Number.isInteger(n) || n < 0 || n > 19)) throw new Error('--server-nice takes nice values 0-19, e.g. 19,0');
/** The app's calls, in turn: [batch, tokens]. */
const CASES = [[1, 16], [1, 64], [1, 128], [1, 256], [8, 128]];
const LABELS = CASES.map(([b, n]) => `${b}x${n}`);
/** Windows of wall time the latency is reported for, s. */
const MARKS = [5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600];
/** Within this of the tuned latency counts as tuned. */
const WITHIN = 1.05;

for (const p of POLICIES) if (p !== 'fast' && p !== 'legacy') throw new Error(`--policy takes fast and/or legacy, got ${p}`);
for (const p of PRECISIONS) if (p !== 'fp32' && p !== 'int16') throw new Error(`--precision takes fp32 and/or int16, got ${p}`);
if (THREADS.some((t) => !(t >= 1))) throw new Error('--threads takes thread counts, e.g. 1,2');

const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
console.log(`README loop: ${NAME}, cases ${LABELS.join(' ')}, up to ${SECONDS} s a run; load average at start ${load()}`);

/** The README loop in the page: encode each case in turn, `idle()` after each call. */
async function pageLoop({ cases, ms, extraMs = 0, runs, untilDone }) {
  const enc = window.enc;
  const wt = enc.webtune;
  // Texts of exactly n tokens: common words, one token each.
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
  // Verdicts on the app's own calls: a threaded candidate's trial (half of that kernel's calls on the
  // candidate until decided) and the plan guard's (whole calls on the base plan and the new one, ABBA).
  wt.addEventListener('trial', (e) => {
    const d = e.detail;
    measured.push(`${((performance.now() - t0) / 1000).toFixed(1)} s trial ${d.op} ${d.shape.join('x')}: ${d.adopted ? 'adopted' : 'refused'}, bench ${d.bench_speedup.toFixed(3)}x, app ${d.app_speedup.toFixed(3)}x (${d.cand_ms.toFixed(2)} against ${d.cur_ms.toFixed(2)} ms) over ${d.pairs} pairs${d.vouched ? " (vouched)" : ""}`);
  });
  wt.addEventListener('guard', (e) => {
    const d = e.detail;
    measured.push(`${((performance.now() - t0) / 1000).toFixed(1)} s guard ${d.kind}: ${d.kept ? 'kept' : 'put back'} ${d.kernels.length} kernels, plan/base ${d.ratio.toFixed(3)} (${d.plan_ms.toFixed(1)} against ${d.base_ms.toFixed(1)} ms) over ${d.pairs} pairs`);
  });
  wt.addEventListener('tuned', () => (tunedAt = (performance.now() - t0) / 1000));
  // [case, start s, ms, candidate timings so far]
  const log = [];
  let i = 0;
  // Past `ms`, on for `extraMs` more while tuning is not done (a first
  // device whose reports the later ones are to be served).
  let done = false;
  while (performance.now() - t0 < ms || (!done && performance.now() - t0 < ms + extraMs)) {
    const c = i++ % batches.length;
    const a = performance.now();
    await enc.encode(batches[c]);
    log.push([c, (a - t0) / 1000, performance.now() - a, wt.progress.timings]);
    const r = await enc.idle();
    done = r.done;
    // Whole rounds only, so that every bucket has its calls up to the end.
    if (untilDone && r.done && c === batches.length - 1) break;
  }
  const prog = wt.progress;
  // The tuned figure: every bucket again, no tuning between calls.
  const after = [];
  for (const b of runs > 0 ? batches : []) {
    const xs = [];
    for (let r = 0; r < runs; r++) {
      const a = performance.now();
      await enc.encode(b);
      xs.push(performance.now() - a);
    }
    xs.sort((x, y) => x - y);
    after.push(xs[xs.length >> 1]);
  }
  return { log, prog, tunedAt, after, calls: i, measured, s: (performance.now() - t0) / 1000, threads: wt.threads };
}

const med = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[s.length >> 1] : NaN;
};

/**
 * Per bucket, the median of its last three calls after each call
 * ([end s, ms, timings so far]); the bucket's first call (which fetches and
 * compiles its kernels) left out.
 */
function rolling(log) {
  return CASES.map((_, c) => {
    const calls = log.filter((x) => x[0] === c).slice(1);
    return calls.map((x, i) => [x[1] + x[2] / 1000, med(calls.slice(Math.max(0, i - 2), i + 1).map((y) => y[2])), x[3]]);
  });
}

/**
 * When every bucket's rolling median came within WITHIN × `target` (ms per
 * bucket): first (all at once), and for good (each bucket from then on to
 * the end of the log), with the candidate timings taken by then; null
 * where it never did.
 */
function within(log, target) {
  const roll = rolling(log);
  const firstAll = (() => {
    // Walk the calls in time order and keep each bucket's latest rolling median.
    const latest = new Array(CASES.length).fill(Infinity);
    const events = roll.flatMap((r, c) => r.map((x) => [x[0], c, x[1], x[2]])).sort((a, b) => a[0] - b[0]);
    for (const [t, c, m, timings] of events) {
      latest[c] = m;
      if (latest.every((x, b) => x <= WITHIN * target[b])) return { s: t, timings };
    }
    return null;
  })();
  let forGood = { s: 0, timings: 0 };
  for (let c = 0; c < CASES.length; c++) {
    const r = roll[c];
    if (!r.length || r[r.length - 1][1] > WITHIN * target[c]) return { firstAll, forGood: null };
    let k = r.length - 1;
    while (k > 0 && r[k - 1][1] <= WITHIN * target[c]) k--;
    if (r[k][0] > forGood.s) forGood = { s: r[k][0], timings: r[k][2] };
  }
  return { firstAll, forGood };
}

/** Counts the page's requests by kind and the refusals (429, 503). */
function countRequests(page) {
  const kinds = {};
  let refused = 0;
  page.on('response', (r) => {
    const p = new URL(r.url()).pathname;
    const kind = /\/queue$/.test(p) ? 'queue' : /\/reports\/batch$/.test(p) ? 'report batch' : /\/reports$/.test(p) ? 'report'
      : /\/latency$/.test(p) ? 'latency' : /\/kernels\/best$/.test(p) ? 'best' : /\/kernels\//.test(p) ? 'kernel' : /\/sessions$/.test(p) ? 'session' : 'other';
    kinds[kind] = (kinds[kind] ?? 0) + 1;
    if (r.status() >= 400 && r.status() !== 429 && r.status() !== 503) console.log(`page: HTTP ${r.status()} ${r.url()}`);
    if (r.status() === 429 || r.status() === 503) {
      refused++;
      kinds[`${kind} refused`] = (kinds[`${kind} refused`] ?? 0) + 1;
    }
  });
  return { kinds, refused: () => refused };
}

async function newPage(browser, base, threads, precision, policy) {
  const context = await browser.newContext();
  const page = await context.newPage();
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
  const requests = countRequests(page);
  await page.goto(threads > 1 ? `${base}/` : `${base}/healthz`);
  const t = Date.now();
  const got = await page.evaluate(async ({ name, threads, precision, policy }) => {
    const { SentenceEncoder } = await import('/web/webtune.js');
    window.enc = await SentenceEncoder.load({ model: name, target: 'wasm', cache: false, threads, precision, policy });
    return window.enc.webtune.threads;
  }, { name: NAME, threads, precision, policy });
  return { page, context, requests, threads: got, loadS: (Date.now() - t) / 1000 };
}

const fmt = (x, d = 1) => (x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d));

async function run(policy, precision, threads, nDevices, nice) {
  console.log(`\n=== policy ${policy}, ${precision}, ${threads} thread(s), server and proxy at nice ${nice}, the README loop until tuned (${SECONDS} s at most); load ${load()} ===`);
  const work = mkdtempSync(join(tmpdir(), 'webtune-readme-loop-'));
  const server = await startServer(`${work}/r.sqlite`, ['--models-dir', process.env.WEBTUNE_MODELS_DIR]);
  renice(server.proc.pid, nice);
  setPriority(0, nice);
  const browser = await launchChromium(`${work}/profile`, JS_FLAGS ? [`--js-flags=${JS_FLAGS}`] : []);
  const proxy = threads > 1 ? await isolatingProxy(server.url) : null;
  const base = proxy?.url ?? server.url;
  try {
    const first = await newPage(browser, base, threads, precision, policy);
    console.log(`threads: ${JSON.stringify(first.threads)}; model loaded in ${first.loadS.toFixed(1)} s`);
    const extraMs = nDevices > 1 ? FINISH_SECONDS * 1000 : 0;
    const r = await first.page.evaluate(pageLoop, { cases: CASES, ms: SECONDS * 1000, extraMs, runs: RUNS, untilDone: true });
    if (r.s > SECONDS + 1) console.log(`(the loop went on past ${SECONDS} s until tuning was done, for the later devices: --finish-seconds ${FINISH_SECONDS})`);
    if (nDevices > 1 && r.tunedAt === null) console.log('the first device did not finish tuning: later devices are served only the reports it sent');
    await first.context.close();
    if (TRACE) for (const m of r.measured) console.log(`  ${m.includes(' trial ') || m.includes(' guard ') ? '' : 'measured '}${m}`);
    if (TRACE) console.log(`  calls (start s bucket ms): ${r.log.map(([c, s, ms]) => `${s.toFixed(1)} ${LABELS[c]} ${ms.toFixed(0)}`).join(', ')}`);
    console.log(`README loop: ${r.calls} encode calls in ${r.s.toFixed(1)} s; ${r.prog.evaluated} candidates evaluated, ${r.prog.timings} candidate timings, ` +
      `${r.prog.tuned}/${r.prog.total} kernels tuned, expected gain left ${(100 * r.prog.expectedGain).toFixed(1)} %, 'tuned' event ${r.tunedAt === null ? 'not yet' : `at ${r.tunedAt.toFixed(1)} s`}`);
    console.log(`median ms per call of each bucket, by window of wall time (s; each bucket's first, compiling call left out):\n  window\t${LABELS.join('\t')}`);
    const calls = (c) => r.log.filter((x) => x[0] === c).slice(1);
    let from = 0;
    for (const mark of [...MARKS.filter((m) => m < r.s), r.s]) {
      const row = CASES.map((_, c) => med(calls(c).filter((x) => x[1] >= from && x[1] < mark).map((x) => x[2])));
      console.log(`  ${from.toFixed(0)}-${mark.toFixed(0)}\t${row.map((x) => fmt(x)).join('\t')}`);
      from = mark;
    }
    console.log(`  tuned\t${r.after.map((x) => fmt(x)).join('\t')}   (${RUNS} calls each after the loop, no tuning between)`);
    const w = within(r.log, r.after);
    console.log(`within 5 % of the tuned latency in every bucket: first at ${fmt(w.firstAll?.s)} s (${w.firstAll?.timings ?? '-'} candidate timings), ` +
      `for good from ${fmt(w.forGood?.s)} s (${w.forGood?.timings ?? '-'} timings); ${r.prog.timings} timings in all`);
    // The default kernels' figure: each bucket's first three timed calls.
    const untuned = CASES.map((_, c) => med(calls(c).slice(0, 3).map((x) => x[2])));
    if (threads === 1) oneThread.set(`${policy}/${precision}/${nice}`, { untuned, tuned: r.after });
    let vsOne = '-';
    const one = oneThread.get(`${policy}/${precision}/${nice}`);
    if (threads > 1 && one) {
      // Full windows only: a bucket's first two rolling medians after its compiling call are of one and two calls.
      const roll = rolling(r.log).map((xs) => xs.slice(2));
      const worst = (ref) => CASES.map((_, c) => Math.max(...roll[c].map((x) => x[1] / ref[c])));
      const worstCall = CASES.map((_, c) => Math.max(...calls(c).map((x) => x[2] / one.untuned[c])));
      const wu = worst(one.untuned), wt = worst(one.tuned);
      console.log(`worst rolling median (of 3 calls) while tuning over the 1-thread run's default kernels, by bucket: ${wu.map((x) => fmt(x, 2)).join(' ')}` +
        ` (slower than 1 thread ${wu.some((x) => x > 1) ? 'at times' : 'never'}); over its tuned figure: ${wt.map((x) => fmt(x, 2)).join(' ')}; ` +
        `worst single call over the default kernels' figure: ${worstCall.map((x) => fmt(x, 2)).join(' ')}`);
      vsOne = `${fmt(Math.max(...wu), 2)} / ${fmt(Math.max(...wt), 2)}`;
    }
    const total = Object.entries(first.requests.kinds).filter(([k]) => !k.endsWith('refused')).reduce((a, [, n]) => a + n, 0);
    console.log(`requests: ${JSON.stringify(first.requests.kinds)}`);
    const i128 = CASES.findIndex(([b, n]) => b === 1 && n === 128);
    const row = [policy, precision, threads, nice, `${fmt(w.firstAll?.s)} / ${fmt(w.forGood?.s)}`, `${w.firstAll?.timings ?? '-'} / ${w.forGood?.timings ?? '-'} / ${r.prog.timings}`,
      r.prog.evaluated, `${r.prog.tuned}/${r.prog.total}`, fmt(r.tunedAt), `${fmt(untuned[i128])} -> ${fmt(r.after[i128])}`, vsOne, total, first.requests.refused()];
    // Later devices of the same class, one after another, against this server.
    for (let d = 2; d <= nDevices; d++) {
      const dev = await newPage(browser, base, threads, precision, policy);
      const x = await dev.page.evaluate(pageLoop, { cases: CASES, ms: DEVICE_SECONDS * 1000, runs: 0, untilDone: true });
      await dev.context.close();
      const dw = within(x.log, r.after);
      const firstCalls = CASES.map((_, c) => x.log.filter((y) => y[0] === c)[1]?.[2] / r.after[c]);
      console.log(`device ${d}: loaded in ${dev.loadS.toFixed(1)} s; within 5 % of the first device's tuned latency first at ${fmt(dw.firstAll?.s)} s, ` +
        `for good from ${fmt(dw.forGood?.s)} s (of ${x.s.toFixed(1)} s, ${x.calls} calls, tuned ${x.tunedAt === null ? 'not yet' : `at ${x.tunedAt.toFixed(1)} s`}); ` +
        `first calls over the tuned figure ${firstCalls.map((y) => fmt(y, 2)).join(' ')}; ${x.prog.timings} candidate timings; requests refused ${dev.requests.refused()}`);
      devices.push([policy, precision, threads, nice, d, `${fmt(dw.firstAll?.s)} / ${fmt(dw.forGood?.s)}`, firstCalls.map((y) => fmt(y, 2)).join(' '), x.prog.timings, dev.requests.refused()]);
    }
    return row;
  } finally {
    await browser.close();
    proxy?.close();
    server.proc.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Sets every thread of process `pid` to `nice` (Linux keeps a nice value
 * per thread; threads started later inherit their creator's).
 */
function renice(pid, nice) {
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      setPriority(Number(tid), nice);
    } catch (e) {
      console.log(`renice ${tid}: ${e.message}`);
    }
  }
}

const summary = [];
const devices = [];
/** The 1-thread runs' figures by policy and precision: default kernels' and tuned latency per bucket. */
const oneThread = new Map();
for (const precision of PRECISIONS) {
  for (const threads of [...THREADS].sort((a, b) => a - b)) {
    for (const nice of NICES) {
      for (const policy of POLICIES) summary.push(await run(policy, precision, threads, policy === POLICIES[0] ? DEVICES : 1, nice));
    }
  }
}
console.log(`\nload average at the end ${load()}`);
console.log('\nsummary: policy, precision, threads, server nice, s to within 5 % (first / for good), candidate timings by then / in all, candidates evaluated, ' +
  "kernels tuned, 'tuned' event (s), 1x128 default -> tuned ms, worst ratio to the 1-thread run's default kernels / tuned figure while tuning, requests, refused (429/503)");
for (const s of summary) console.log(`  ${s.join('\t')}`);
if (devices.length) {
  console.log('\nlater devices of the same class (fresh sessions, same server, after the first finished): policy, precision, threads, server nice, device, ' +
    "s to within 5 % of the first device's tuned latency, first calls' worst ratio to it, by bucket, candidate timings, requests refused");
  for (const d of devices) console.log(`  ${d.join('\t')}`);
}
