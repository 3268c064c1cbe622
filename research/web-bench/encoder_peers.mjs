// all-MiniLM-L6-v2 in the browser: transformers.js 4.3.1 (ORT-web Wasm) on
// the same weights, fp32 and 8-bit, 1 and 2 threads, and optionally
// webtune's SentenceEncoder, in one headless Chromium session (issue 18's
// Benchmarks). Not a test: it prints tables for BENCHMARKS.md.
//
//   ~/.cache/webtune/venv-onnx/bin/python scripts/bench/export_onnx.py   # once: ONNX files + bench texts
//   (cd research/web-bench && npm ci --ignore-scripts)
//   node research/web-bench/encoder_peers.mjs [--webtune URL] [--rounds 5] [--cold 3] [--webtune-tune S] [--webtune-threads 1,2]
//                                                   [--webtune-precision fp32,int16]
//
// Figures: median ms per `extractor(texts, {pooling: 'mean', normalize:
// true})` call (for webtune, per `enc.encode(texts)`) after warm-up, for
// batch 1 at 16, 64, 128 and 256 tokens and batch 8 at 128 (texts of exactly
// that many tokens, [CLS] and [SEP] included, checked with each side's own
// tokenizer); time from navigation start to the first embedding in a fresh
// browser context (nothing cached); worst cosine of the outputs against
// export_onnx.py's float64 reference of the same texts.
//
// Each contender is a page of the same browser: transformers.js at 1 thread
// and at 2 threads (ORT-web fixes its thread count per page; the fp32 and
// 8-bit pipelines share it), and webtune (one page per --webtune-threads count and
// --webtune-precision, default fp32; int16 runs the weight products on matmul_i16). Rounds interleave them shape by
// shape, so that noise from the shared machine hits all alike; every round
// starts with one untimed call. A local server serves the pages cross-origin
// isolated (COOP same-origin + COEP require-corp, so ORT-web's threads run),
// transformers.js's bundle, its own ORT-web's .mjs/.wasm from node_modules,
// and the exported model directory; `/web/` and `/v1/` are proxied to
// --webtune, so webtune's page is same-origin and isolated as well. Nothing
// is fetched from outside: transformers.js runs with allowRemoteModels off.
//
// WEBTUNE_CACHE (default ~/.cache/webtune) locates peers/ from export_onnx.py;
// CHROMIUM the browser binary (default Debian's /usr/lib/chromium/chromium).

import { createReadStream, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import { homedir, tmpdir } from 'node:os';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { cosine } from '../../client-runtime/web/test/harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
// playwright-core is the web runtime's development dependency: resolved from
// client-runtime/web/node_modules (npm ci there), not from this folder.
const { chromium } = createRequire(join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'client-runtime', 'web', 'package.json'))('playwright-core');
const fail = (msg) => {
  console.error(`encoder_peers: ${msg}`);
  process.exit(1);
};
const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  if (i < 0) return d;
  if (i + 1 >= process.argv.length) fail(`--${k} needs a value`);
  return process.argv[i + 1];
};
const num = (k, d, min) => {
  const v = Number(arg(k, d));
  if (!Number.isInteger(v) || v < min) fail(`--${k} must be an integer >= ${min}`);
  return v;
};
const ROUNDS = num('rounds', 5, 1);
const COLD = num('cold', 3, 0);
const TUNE_S = num('webtune-tune', 0, 0);
const ROUND_MS = num('round-ms', 400, 1); // timed calls per round: about this long, 1 to 10 calls
const WEBTUNE = arg('webtune', null)?.replace(/\/+$/, '') ?? null;
const WEBTUNE_MODEL = arg('webtune-model', 'all-minilm-l6-v2');
// webtune's thread counts: one SentenceEncoder (and session) per count.
const WEBTUNE_THREADS = String(arg('webtune-threads', '1,2')).split(',').map(Number);
// ... and per precision (SentenceEncoder's `precision` option).
const WEBTUNE_PRECISIONS = String(arg('webtune-precision', 'fp32')).split(',');
for (const p of WEBTUNE_PRECISIONS) if (p !== 'fp32' && p !== 'int16') fail(`--webtune-precision takes fp32 and/or int16, comma-separated, got ${p}`);

const CACHE = process.env.WEBTUNE_CACHE || join(homedir(), '.cache', 'webtune');
const MODEL_DIR = join(CACHE, 'peers', 'all-minilm-l6-v2');
const BENCH_JSON = `${MODEL_DIR}.bench.json`;
for (const f of [BENCH_JSON, join(MODEL_DIR, 'onnx', 'model.onnx'), join(MODEL_DIR, 'onnx', 'model_quantized.onnx')])
  if (!existsSync(f)) fail(`${f} is missing: run scripts/bench/export_onnx.py first`);
const bench = JSON.parse(readFileSync(BENCH_JSON, 'utf8'));

const TJS = join(here, 'node_modules', '@huggingface', 'transformers');
if (!existsSync(join(TJS, 'dist', 'transformers.js'))) fail(`${TJS} is missing: run (cd research/web-bench && npm ci --ignore-scripts)`);
// The ORT-web that transformers.js bundles its JS from: its own dependency
// (nested when it differs from the bench's onnxruntime-web for kernels.mjs).
const ORT = [join(TJS, 'node_modules', 'onnxruntime-web'), join(here, 'node_modules', 'onnxruntime-web')].find((d) => existsSync(d));
const ortWant = JSON.parse(readFileSync(join(TJS, 'package.json'), 'utf8')).dependencies['onnxruntime-web'];
const ortHave = JSON.parse(readFileSync(join(ORT, 'package.json'), 'utf8')).version;
if (ortWant !== ortHave) fail(`transformers.js wants onnxruntime-web ${ortWant}, node_modules has ${ortHave}`);

const MOUNTS = {
  '/bench.html': join(here, 'encoder_peers.html'),
  '/tjs/': join(TJS, 'dist'),
  '/ort/': join(ORT, 'dist'),
  '/models/all-minilm-l6-v2/': MODEL_DIR,
};
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
const ISOLATED = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp', 'cross-origin-resource-policy': 'same-origin' };

const server = http.createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  if (WEBTUNE && (path.startsWith('/v1/') || path.startsWith('/web/'))) {
    const up = new URL(req.url, WEBTUNE);
    const p = http.request(up, { method: req.method, headers: { ...req.headers, host: up.host } }, (r) => {
      res.writeHead(r.statusCode, { ...r.headers, ...ISOLATED });
      r.pipe(res);
    });
    req.pipe(p);
    p.on('error', (e) => res.writeHead(502).end(`webtune at ${WEBTUNE}: ${e.message}`));
    return;
  }
  for (const [prefix, target] of Object.entries(MOUNTS)) {
    if (path === prefix || (prefix.endsWith('/') && path.startsWith(prefix))) {
      const rel = normalize(decodeURIComponent(path.slice(prefix.length))).replace(/^(\.\.[/\\])+/, '');
      const file = prefix.endsWith('/') ? join(target, rel) : target;
      if (existsSync(file) && statSync(file).isFile()) {
        res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': statSync(file).size, ...ISOLATED });
        createReadStream(file).pipe(res);
        return;
      }
    }
  }
  res.writeHead(404, ISOLATED).end();
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const local = `http://127.0.0.1:${server.address().port}`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const work = mkdtempSync(join(tmpdir(), 'webtune-encoder-peers-'));
const CHROMIUM = process.env.CHROMIUM ?? ['/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p) => existsSync(p));
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  ignoreDefaultArgs: true,
  timeout: 60_000,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', '--remote-debugging-pipe', `--user-data-dir=${join(work, 'profile')}`],
});

async function open(context, query, ready) {
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') console.error(`page(${query}): ${m.text()}`);
  });
  page.on('pageerror', (e) => console.error(`page(${query}): ${e.message}`));
  await page.goto(`${local}/bench.html?${query}`);
  await page.waitForFunction(`window.${ready} || window.benchError`, null, { timeout: 300_000, polling: 100 });
  const err = await page.evaluate(() => window.benchError);
  if (err) throw new Error(`${query}: ${err}`);
  return page;
}

try {
  const context = browser.contexts()[0] ?? (await browser.newContext());
  // Contenders: [label, page, dtype, threads].
  const pages = {};
  for (const t of [1, 2]) pages[t] = await open(context, `side=peer&threads=${t}`, 'side');
  const info = await pages[1].evaluate(() => window.side.info);
  for (const t of [1, 2]) {
    const i = await pages[t].evaluate(() => window.side.info);
    if (!i.isolated) throw new Error('the page is not cross-origin isolated: ORT-web would run one thread');
    if (i.numThreads !== t) throw new Error(`ORT-web runs ${i.numThreads} threads, asked for ${t}`);
  }
  const contenders = [
    { label: 'transformers.js fp32, 1 thread', page: pages[1], dtype: 'fp32', threads: 1, cold: 'fp32' },
    { label: 'transformers.js 8-bit, 1 thread', page: pages[1], dtype: 'q8', threads: 1, cold: 'q8' },
    { label: 'transformers.js fp32, 2 threads', page: pages[2], dtype: 'fp32', threads: 2, cold: 'fp32' },
    { label: 'transformers.js 8-bit, 2 threads', page: pages[2], dtype: 'q8', threads: 2, cold: 'q8' },
  ];
  if (WEBTUNE) {
    for (const precision of WEBTUNE_PRECISIONS) {
      for (const t of WEBTUNE_THREADS) {
        const q = `side=webtune&model=${encodeURIComponent(WEBTUNE_MODEL)}&tune=${TUNE_S > 0 ? 1 : 0}&threads=${t}&precision=${precision}`;
        const page = await open(context, q, 'side');
        const got = await page.evaluate(() => window.side.info.threads);
        if (got !== t) throw new Error(`webtune runs ${got} threads, asked for ${t}`);
        const label = `webtune SentenceEncoder${precision === 'fp32' ? '' : ` ${precision}`}, ${t} thread${t > 1 ? 's' : ''}`;
        contenders.push({ label, page, dtype: 'webtune', threads: t, precision, cold: 'webtune', webtune: true });
      }
    }
  }

  // Token counts as each side's tokenizer sees them.
  for (const c of contenders) {
    for (const s of bench.shapes) {
      const [b, n] = await c.page.evaluate(([t]) => window.side.tokens(t), [s.texts]);
      if (b !== s.batch || n !== s.tokens) throw new Error(`${c.label}: ${s.key} tokenises to ${b}×${n}, not ${s.batch}×${s.tokens}`);
    }
  }

  // Tuning, when asked: one call per shape first, so that the kernels of
  // every shape timed below exist and are the ones tuned.
  for (const tuned of contenders.filter((c) => c.webtune && TUNE_S > 0)) {
    await tuned.page.bringToFront();
    for (const s of bench.shapes) await tuned.page.evaluate(([t]) => window.side.time('webtune', t, 1, 0), [s.texts]);
    const ms = await tuned.page.evaluate((l) => window.side.tune(l), TUNE_S * 1000);
    console.error(`${tuned.label}: tuned for ${(ms / 1000).toFixed(0)} s before timing`);
  }

  // Worst cosine against the f64 reference, over every text of every shape.
  for (const c of contenders) {
    c.worst = 1;
    for (const s of bench.shapes) {
      const emb = await c.page.evaluate(([d, t]) => window.side.embed(d, t), [c.dtype, s.texts]);
      emb.forEach((e, i) => (c.worst = Math.min(c.worst, cosine(e, s.reference[i]))));
    }
  }

  // Timing: per shape, each contender in turn; calls per round from the
  // contender's own warm-up time.
  const t0 = Date.now();
  for (const c of contenders) c.ms = {}, c.n = {};
  for (const s of bench.shapes) {
    for (const c of contenders) {
      await c.page.bringToFront();
      const [w] = await c.page.evaluate(([d, t]) => window.side.time(d, t, 1, 1), [c.dtype, s.texts]);
      c.n[s.key] = Math.max(1, Math.min(10, Math.round(ROUND_MS / w)));
      c.ms[s.key] = [];
    }
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of bench.shapes) {
      for (const c of contenders) {
        await c.page.bringToFront();
        c.ms[s.key].push(...(await c.page.evaluate(([d, t, n]) => window.side.time(d, t, n, 1), [c.dtype, s.texts, c.n[s.key]])));
      }
    }
    console.error(`round ${r + 1}/${ROUNDS} done (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  }
  for (const p of new Set(contenders.map((c) => c.page))) await p.close();

  // Cold starts: a fresh context (empty HTTP cache, Cache Storage and
  // IndexedDB) per start, contenders interleaved.
  for (const c of contenders) c.colds = [];
  for (let r = 0; r < COLD; r++) {
    for (const c of contenders) {
      const ctx = await browser.newContext();
      const q = c.webtune ? `cold=webtune&model=${encodeURIComponent(WEBTUNE_MODEL)}&threads=${c.threads}&precision=${c.precision}` : `side=peer&threads=${c.threads}&cold=${c.cold}`;
      const page = await open(ctx, q, 'cold');
      c.colds.push(await page.evaluate(() => window.cold.ms));
      await ctx.close();
    }
  }

  const fmt = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
  const cold = (xs) => (xs.length ? (xs.length > 1 ? `${(Math.min(...xs) / 1000).toFixed(1)}–${(Math.max(...xs) / 1000).toFixed(1)} s` : `${(xs[0] / 1000).toFixed(1)} s`) : '—');
  const heads = bench.shapes.map((s) => `${s.batch}×${s.tokens}`);
  console.log(`all-MiniLM-L6-v2, median ms per call (${ROUNDS} rounds; calls per round per shape in brackets), cold start over ${COLD} fresh contexts`);
  console.log(`Chromium ${browser.version()}, transformers.js ${info.transformers}, ORT-web ${info.ort} (Wasm), cross-origin isolated\n`);
  console.log(`| configuration | ${heads.join(' | ')} | cold start to first embedding | worst cosine vs f64 |`);
  console.log(`|---|${heads.map(() => '---|').join('')}---|---|`);
  for (const c of contenders) {
    const cells = bench.shapes.map((s) => `${fmt(median(c.ms[s.key]))} [${c.n[s.key]}]`);
    console.log(`| ${c.label} | ${cells.join(' | ')} | ${cold(c.colds)} | ${c.worst.toFixed(6)} |`);
  }
  const webtunes = contenders.filter((c) => c.webtune);
  if (webtunes.length) {
    console.log(`\nwebtune speed-up (transformers.js ms / webtune ms, medians above; > 1: webtune faster), equal threads:\n`);
    console.log(`| webtune | against | ${heads.join(' | ')} | cold start (medians) |`);
    console.log(`|---|---|${heads.map(() => '---|').join('')}---|`);
    for (const wt of webtunes) {
      for (const c of contenders.filter((x) => !x.webtune && x.threads === wt.threads)) {
        const cells = bench.shapes.map((s) => (median(c.ms[s.key]) / median(wt.ms[s.key])).toFixed(2));
        const cr = COLD ? (median(c.colds) / median(wt.colds)).toFixed(2) : '—';
        console.log(`| ${wt.precision}, ${wt.threads} thread${wt.threads > 1 ? 's' : ''} | ${c.label} | ${cells.join(' | ')} | ${cr} |`);
      }
    }
  }
  console.log(JSON.stringify({ rounds: ROUNDS, contenders: contenders.map((c) => ({ label: c.label, median_ms: Object.fromEntries(bench.shapes.map((s) => [s.key, median(c.ms[s.key])])), samples: c.ms, cold_ms: c.colds, worst_cosine: c.worst })) }));
} finally {
  await browser.close();
  server.close();
  rmSync(work, { recursive: true, force: true });
}
