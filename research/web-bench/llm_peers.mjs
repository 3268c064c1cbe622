// SmolLM2-135M-Instruct in the browser: wllama 3.13.0 (llama.cpp as Wasm,
// CPU) on the Q4_1 GGUF and on its Q8_0 copy, against webtune's
// TextGenerator on the Q4_1 file, in one headless Chromium session, cross-
// origin isolated (issue 36's Benchmarks). Not a test: it prints tables for
// BENCHMARKS.md. scripts/bench/llm.sh sets everything up and runs it.
//
//   node research/web-bench/llm_peers.mjs --q4 Q4_1.gguf --q8 Q8_0.gguf --prompts llm_prompts.json
//        [--webtune URL --webtune-model NAME] [--threads 1,2] [--rounds 3] [--cold 3] [--tune-s 120] [--trace-s 5]
//        [--probe-rounds 3] [--steps 128] [--peers q4_1,q8_0|none]
//
// Figures, each the median of --rounds rounds (contenders interleaved within
// a round, so that noise from a shared machine hits all alike; one untimed
// warm-up call per contender first), every call greedy on the same token ids
// (llm_prompts.py's prose):
// - prefill tokens/s: a 128-token prompt from an empty cache (wllama: its
//   own prompt_ms; webtune: `gen.forward(ids, {reset: true})`), and an
//   894-token one (the prefill of the context-1024 run);
// - decode tokens/s at context 128 and 1024: after a 128-token (894-token)
//   prompt, 128 decode steps (sample the argmax, feed it), so the last step
//   sees 256 (1022) positions; wllama's figure is llama.cpp's own predicted_ms
//   over predicted_n − 1 steps, webtune's the wall time of its forward calls;
// - first token from a cold page: a fresh browser context (empty HTTP cache,
//   OPFS, IndexedDB), navigation start to the first token sampled after the
//   128-token prompt, with the bytes this local server sent meanwhile
//   (--cold fresh contexts per contender; the median);
// - the floor: the sum of a 512 MB array by a Wasm module of v128 loads
//   (1 worker, and 2 at once over halves), GB/s; a decode step reads the
//   weights whole (the output head is the tied embedding matrix) plus the K
//   and V cache up to its position (wllama: f16, webtune: f32), so
//   bytes / bandwidth is the fastest a step can be; decode is reported as
//   a fraction of that speed.
// webtune runs with the database as the server has it: first its default
// kernels (an empty database: the lite space's first candidates), then
// after `gen.idle()` tuned for up to --tune-s seconds per thread count
// (how long it took is printed; every --trace-s seconds of it a short
// decode samples tokens/s, the paper's Fig. 16), timed again; cold pages
// are timed in both states (with `webtune serve --quorum 1`, a new device
// of the same fingerprint gets the tuned kernels).
//
// Nothing is fetched from outside: a local server serves the page, wllama's
// ESM build and .wasm from node_modules (npm ci in research/web-bench), the
// GGUF files and the probe module, all with COOP/COEP, and proxies /v1/ and
// /web/ to --webtune, so webtune's page is same-origin and isolated too.
// CHROMIUM is the browser binary (default Debian's /usr/lib/chromium/chromium).

import { createReadStream, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { loadavg, tmpdir } from 'node:os';
import { basename, dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { probeWasm } from './probe.mjs';

const here = dirname(fileURLToPath(import.meta.url));
// playwright-core and wabt are the web runtime's development dependencies:
// resolved from client-runtime/web/node_modules (npm ci there).
const webRequire = createRequire(join(here, '..', '..', 'client-runtime', 'web', 'package.json'));
const { chromium } = webRequire('playwright-core');
const fail = (msg) => {
  console.error(`llm_peers: ${msg}`);
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
const ROUNDS = num('rounds', 3, 1);
const COLD = num('cold', 3, 0);
const TUNE_S = num('tune-s', 120, 0);
const PROBE_ROUNDS = num('probe-rounds', 3, 1);
const TRACE_S = num('trace-s', 5, 0); // while tuning: a decode sample every this many seconds (0: none)
const THREADS = String(arg('threads', '1,2')).split(',').map(Number);
// wllama's files: q4_1 and/or q8_0, or none (webtune and the floor alone).
const PEERS = String(arg('peers', 'q4_1,q8_0')).split(',').filter((p) => p && p !== 'none');
for (const p of PEERS) if (p !== 'q4_1' && p !== 'q8_0') fail(`--peers takes q4_1, q8_0 or none, comma-separated, got ${p}`);
for (const t of THREADS) if (!Number.isInteger(t) || t < 1 || t > 8) fail(`--threads takes counts 1..8, comma-separated, got ${arg('threads')}`);
const WEBTUNE = arg('webtune', null)?.replace(/\/+$/, '') ?? null;
const WEBTUNE_MODEL = arg('webtune-model', 'smollm2');
const STEPS = num('steps', 128, 1);
const CONTEXT = 1024;
const SHORT = 128, LONG = 894; // with 128 steps the last one sees 1022 positions
const FILES = { q4_1: arg('q4', process.env.WEBTUNE_LLM_GGUF), q8_0: arg('q8', null) };
const PROMPTS = arg('prompts', null);
for (const [k, f] of Object.entries(FILES)) if (!f || !existsSync(f)) fail(`the ${k} GGUF ${f ?? '(--q4 / --q8)'} is missing (scripts/bench/llm.sh makes it)`);
if (!PROMPTS || !existsSync(PROMPTS)) fail(`--prompts ${PROMPTS ?? ''}: missing (research/web-bench/llm_prompts.py writes it)`);
const prompts = JSON.parse(readFileSync(PROMPTS, 'utf8'));
for (const n of [SHORT, LONG]) if (prompts.prompts?.[n]?.ids?.length !== n) fail(`${PROMPTS}: needs a ${n}-token prompt (llm_prompts.py writes it)`);
if (LONG + STEPS > CONTEXT) fail(`--steps ${STEPS}: ${LONG} + steps must fit the context of ${CONTEXT}`);
const tensorBytes = (f) => prompts.tensor_bytes?.[basename(f)] ?? fail(`${PROMPTS} has no tensor_bytes for ${basename(f)} (rerun llm_prompts.py with it)`);

const WLLAMA = join(here, 'node_modules', '@wllama', 'wllama');
if (!existsSync(join(WLLAMA, 'esm', 'index.js'))) fail(`${WLLAMA} is missing: run (cd research/web-bench && npm ci --ignore-scripts)`);
const wllamaVersion = JSON.parse(readFileSync(join(WLLAMA, 'package.json'), 'utf8')).version;

// The probe (probe.mjs): the read bandwidth the decode floor is measured against.
const PROBE = Buffer.from(await probeWasm());

const MOUNTS = {
  '/bench.html': join(here, 'llm_peers.html'),
  '/wllama/': join(WLLAMA, 'esm'),
  '/models/q4_1.gguf': FILES.q4_1,
  '/models/q8_0.gguf': FILES.q8_0,
};
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
const ISOLATED = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp', 'cross-origin-resource-policy': 'same-origin' };

// Body bytes sent to the browser (files and proxied answers alike).
let sent = 0;
const server = http.createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  if (WEBTUNE && (path.startsWith('/v1/') || path.startsWith('/web/'))) {
    const up = new URL(req.url, WEBTUNE);
    const p = http.request(up, { method: req.method, headers: { ...req.headers, host: up.host } }, (r) => {
      res.writeHead(r.statusCode, { ...r.headers, ...ISOLATED });
      r.on('data', (d) => (sent += d.length));
      r.pipe(res);
    });
    req.pipe(p);
    p.on('error', (e) => res.writeHead(502).end(`webtune at ${WEBTUNE}: ${e.message}`));
    return;
  }
  if (path === '/prompts.json') {
    const body = Buffer.from(JSON.stringify(prompts));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length, ...ISOLATED });
    res.end(req.method === 'HEAD' ? undefined : body);
    return;
  }
  if (path === '/probe.wasm') {
    res.writeHead(200, { 'content-type': 'application/wasm', 'content-length': PROBE.length, ...ISOLATED });
    res.end(req.method === 'HEAD' ? undefined : PROBE);
    return;
  }
  for (const [prefix, target] of Object.entries(MOUNTS)) {
    if (path === prefix || (prefix.endsWith('/') && path.startsWith(prefix))) {
      const rel = normalize(decodeURIComponent(path.slice(prefix.length))).replace(/^(\.\.[/\\])+/, '');
      const file = prefix.endsWith('/') ? join(target, rel) : target;
      if (existsSync(file) && statSync(file).isFile()) {
        const size = statSync(file).size;
        res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': size, ...ISOLATED });
        if (req.method === 'HEAD') return res.end();
        const s = createReadStream(file);
        s.on('data', (d) => (sent += d.length));
        s.pipe(res);
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
const log = (m) => console.error(`llm_peers: ${m}`);
const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
const loadStart = load(), started = new Date();

const work = mkdtempSync(join(tmpdir(), 'webtune-llm-peers-'));
const CHROMIUM = process.env.CHROMIUM ?? ['/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p) => existsSync(p));
if (!CHROMIUM) fail('no Chromium: apt-get install chromium (or set CHROMIUM)');
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
    if (m.type() === 'error') console.error(`page(${query.slice(0, 60)}): ${m.text()}`);
  });
  page.on('pageerror', (e) => console.error(`page(${query.slice(0, 60)}): ${e.message}`));
  await page.goto(`${local}/bench.html?${query}`);
  await page.waitForFunction(`window.${ready} || window.benchError`, null, { timeout: 600_000, polling: 100 });
  const err = await page.evaluate(() => window.benchError);
  if (err) throw new Error(`${query.slice(0, 80)}: ${err}`);
  return page;
}

const thr = (t) => `${t} thread${t > 1 ? 's' : ''}`;
try {
  const context = browser.contexts()[0] ?? (await browser.newContext());

  // The floor's bandwidth first, while no model is in memory.
  const probePage = await open(context, 'side=probe', 'side');
  const bw = {};
  for (const n of THREADS.filter((t) => t <= 2)) {
    const gbps = [];
    await probePage.evaluate((n) => window.side.run(n, 1), n); // warm
    for (let r = 0; r < PROBE_ROUNDS; r++) gbps.push((await probePage.evaluate((n) => window.side.run(n, 4), n)).gbps);
    bw[n] = { gbps: median(gbps), samples: gbps };
    log(`read bandwidth, ${thr(n)}: ${gbps.map((x) => x.toFixed(2)).join(', ')} GB/s`);
  }
  await probePage.close();

  // Contenders, one page each.
  const contenders = [];
  for (const model of PEERS)
    for (const t of THREADS) contenders.push({ label: `wllama ${wllamaVersion} ${model.toUpperCase()}, ${thr(t)}`, side: 'wllama', model, threads: t, weights: tensorBytes(FILES[model]), kvBytes: 2 });
  let manifest = null;
  if (WEBTUNE) {
    const r = await fetch(`${WEBTUNE}/v1/models/${encodeURIComponent(WEBTUNE_MODEL)}`);
    if (!r.ok) fail(`${WEBTUNE}/v1/models/${WEBTUNE_MODEL}: HTTP ${r.status}`);
    manifest = await r.json();
    for (const t of THREADS) contenders.push({ label: `webtune TextGenerator Q4_1, ${thr(t)}`, side: 'webtune', model: WEBTUNE_MODEL, threads: t, webtune: true, kvBytes: 4 });
  }
  const cfg = manifest?.config;
  // K and V, every layer, per position (the cache element size apart).
  const kvPerPos = cfg ? 2 * cfg.num_layers * cfg.num_kv_heads * (cfg.head_dim ?? cfg.hidden_size / cfg.num_heads) : 2 * 30 * 3 * 64;
  // webtune's weight bytes: the tensors' parts as the manifest lists them.
  const webtuneWeights = manifest ? manifestBytes(manifest) : null;
  for (const c of contenders) if (c.webtune) c.weights = webtuneWeights;

  for (const c of contenders) {
    const q = `side=${c.side}&model=${encodeURIComponent(c.model)}&threads=${c.threads}${c.webtune ? '&tune=1' : ''}`;
    c.page = await open(context, q, 'side');
    c.info = await c.page.evaluate(() => window.side.info);
    if (!c.info.isolated) throw new Error(`${c.label}: the page is not cross-origin isolated`);
    if (c.info.threads !== c.threads) throw new Error(`${c.label}: runs ${c.info.threads} threads, asked for ${c.threads}`);
    // Warm-up: both prompt lengths once (webtune fetches a prefill bucket's kernels on first use).
    await c.page.evaluate(([a, b]) => window.side.decode(a, 2).then(() => window.side.decode(b, 1)), [SHORT, c.webtune ? LONG : SHORT]);
    log(`${c.label}: loaded (${JSON.stringify(c.info)})`);
  }

  const timeRounds = async (list, tag) => {
    for (const c of list) c.runs ??= {}, (c.runs[tag] = []);
    const t0 = Date.now();
    for (let r = 0; r < ROUNDS; r++) {
      for (const c of list) {
        await c.page.bringToFront();
        const a = await c.page.evaluate(([p, n]) => window.side.decode(p, n), [SHORT, STEPS]);
        const b = await c.page.evaluate(([p, n]) => window.side.decode(p, n), [LONG, STEPS]);
        const run = {
          prefill128: (SHORT / a.prefillMs) * 1000, prefill894: (LONG / b.prefillMs) * 1000,
          decode128: (a.steps / a.ms) * 1000, decode1024: (b.steps / b.ms) * 1000,
          text128: a.text, wall: [a.wall, b.wall],
        };
        c.runs[tag].push(run);
        log(`${tag} round ${r + 1}/${ROUNDS}, ${c.label}: prefill ${run.prefill128.toFixed(1)} / ${run.prefill894.toFixed(1)} tok/s, decode ${run.decode128.toFixed(1)} / ${run.decode1024.toFixed(1)} tok/s`);
      }
      log(`${tag} round ${r + 1}/${ROUNDS} done (${((Date.now() - t0) / 1000).toFixed(0)} s, load ${load()})`);
    }
  };
  const coldRuns = async (list, tag) => {
    for (const c of list) c.cold ??= {}, (c.cold[tag] = []);
    for (let r = 0; r < COLD; r++) {
      for (const c of list) {
        const ctx = await browser.newContext();
        const before = sent;
        const q = `side=${c.side}&model=${encodeURIComponent(c.model)}&threads=${c.threads}&cold=${SHORT}`;
        const page = await open(ctx, q, 'cold');
        const got = await page.evaluate(() => window.cold);
        await ctx.close();
        c.cold[tag].push({ ms: got.ms, bytes: sent - before, first: got.first });
        log(`${tag} cold ${r + 1}/${COLD}, ${c.label}: first token ${(got.ms / 1000).toFixed(2)} s, ${((sent - before) / 1e6).toFixed(1)} MB`);
      }
    }
  };

  await timeRounds(contenders, 'default');
  await coldRuns(contenders, 'default');
  const tuned = contenders.filter((c) => c.webtune);
  if (tuned.length && TUNE_S > 0) {
    for (const c of tuned) {
      await c.page.bringToFront();
      c.tune = await c.page.evaluate(([ms, tr]) => window.side.tune(ms, tr), [TUNE_S * 1000, TRACE_S * 1000]);
      log(`${c.label}: tuned ${(c.tune.ms / 1000).toFixed(1)} s, ${(c.tune.tuningMs / 1000).toFixed(1)} s of it in idle() (${c.tune.done ? 'every kernel tuned' : 'budget spent'}): ${c.tune.kernels.join('; ')}`);
      for (const [kind, list] of Object.entries(c.tune.changes ?? {})) log(`${c.label}: ${kind} events: ${list.length}${list.length ? ` (${list.join('; ')})` : ''}`);
      if (c.tune.trace.length) log(`${c.label}: decode tok/s while tuning (16-token prompt, 16 steps): ${c.tune.trace.map((x) => `${x.s.toFixed(0)} s ${x.tokps.toFixed(1)}`).join(', ')}`);
    }
    await timeRounds(tuned, 'tuned');
    await coldRuns(tuned, 'tuned');
  }
  for (const c of contenders) await c.page.close();
  const loadEnd = load();

  // --- Report ---------------------------------------------------------------
  const fig = (c, tag, k) => median(c.runs[tag].map((r) => r[k]));
  const f1 = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
  const bytesPerStep = (c, ctxStart) => c.weights + c.kvBytes * kvPerPos * (ctxStart + (STEPS - 1) / 2 + 1);
  const floorFrac = (c, tag, k, ctxStart) => {
    const b = bw[Math.min(c.threads, 2)]?.gbps;
    if (!b || !c.weights) return null;
    return (fig(c, tag, k) * bytesPerStep(c, ctxStart)) / (b * 1e9);
  };
  const rows = [];
  for (const c of contenders) for (const tag of Object.keys(c.runs)) rows.push({ c, tag });
  console.log(`SmolLM2-135M-Instruct, greedy; median of ${ROUNDS} rounds; first token from a cold page: median of ${COLD} fresh contexts`);
  console.log(`Chromium ${browser.version()}, wllama ${wllamaVersion} (${contenders.find((c) => !c.webtune)?.info.libllama ?? '?'}), n_ctx ${CONTEXT}; ${started.toISOString()}; load average at start ${loadStart}, at end ${loadEnd}`);
  console.log(`read bandwidth (Wasm v128 streaming sum of 512 MB): ${Object.entries(bw).map(([n, b]) => `${thr(Number(n))} ${b.gbps.toFixed(2)} GB/s`).join(', ')}\n`);
  console.log('| configuration | prefill 128 tok/s | prefill 894 tok/s | decode tok/s at 128 | decode tok/s at 1024 | first token, cold page | bytes downloaded | decode at 128 / floor | decode at 1024 / floor |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const { c, tag } of rows) {
    const cold = c.cold?.[tag] ?? [];
    const ff = (k, s) => {
      const f = floorFrac(c, tag, k, s);
      return f === null ? '—' : f.toFixed(2);
    };
    const label = c.webtune ? `${c.label}, ${tag === 'tuned' ? `tuned ${(c.tune.ms / 1000).toFixed(0)} s${c.tune.done ? ' (all kernels)' : ''}` : 'default kernels'}` : c.label;
    console.log(`| ${label} | ${f1(fig(c, tag, 'prefill128'))} | ${f1(fig(c, tag, 'prefill894'))} | ${f1(fig(c, tag, 'decode128'))} | ${f1(fig(c, tag, 'decode1024'))} | ${cold.length ? `${(median(cold.map((x) => x.ms)) / 1000).toFixed(2)} s` : '—'} | ${cold.length ? `${(median(cold.map((x) => x.bytes)) / 1e6).toFixed(1)} MB` : '—'} | ${ff('decode128', SHORT)} | ${ff('decode1024', LONG)} |`);
  }
  console.log(`\nbytes a decode step reads (weights + K/V cache at the run's mean position): ${contenders.filter((c) => c.weights).map((c) => `${c.label.replace(/, \d threads?$/, '')}: ${(bytesPerStep(c, SHORT) / 1e6).toFixed(1)} MB at 128, ${(bytesPerStep(c, LONG) / 1e6).toFixed(1)} MB at 1024`).filter((x, i, a) => a.indexOf(x) === i).join('; ')}`);
  for (const c of tuned.filter((c) => c.tune?.trace?.length))
    console.log(`\n${c.label}, decode tok/s while tuning (16-token prompt, 16 steps; seconds since tuning began): ${c.tune.trace.map((x) => `${x.s.toFixed(0)} s: ${x.tokps.toFixed(1)}`).join(', ')}`);
  if (tuned.length) {
    console.log('\nwebtune / wllama at equal threads (> 1: webtune faster; first token: wllama time / webtune time):\n');
    console.log('| webtune | against | prefill 128 | prefill 894 | decode at 128 | decode at 1024 | first token, cold page |');
    console.log('|---|---|---|---|---|---|---|');
    for (const w of tuned) {
      for (const tag of Object.keys(w.runs)) {
        for (const p of contenders.filter((x) => !x.webtune && x.threads === w.threads)) {
          const r = (k) => (fig(w, tag, k) / fig(p, 'default', k)).toFixed(2);
          const wc = w.cold?.[tag] ?? [], pc = p.cold?.default ?? [];
          const cr = wc.length && pc.length ? (median(pc.map((x) => x.ms)) / median(wc.map((x) => x.ms))).toFixed(2) : '—';
          console.log(`| ${thr(w.threads)}, ${tag === 'tuned' ? 'tuned' : 'default kernels'} | ${p.label} | ${r('prefill128')} | ${r('prefill894')} | ${r('decode128')} | ${r('decode1024')} | ${cr} |`);
        }
      }
    }
    // The same text? The greedy continuations of the 128-token prompt (wllama computes in 8-bit activations and an f16 cache, so they may part).
    const ref = contenders.find((c) => !c.webtune && c.model === 'q4_1')?.runs.default[0].text128;
    for (const w of tuned) {
      const text = w.runs.default[0].text128;
      if (ref != null && text != null) {
        let k = 0;
        while (k < Math.min(ref.length, text.length) && ref[k] === text[k]) k++;
        console.log(`\n${w.label}: its greedy text after the 128-token prompt equals wllama Q4_1's for ${k} of ${Math.min(ref.length, text.length)} characters: ${JSON.stringify(text.slice(0, 80))}…`);
      }
    }
  }
  console.log(JSON.stringify({
    date: started.toISOString(), chromium: browser.version(), wllama: wllamaVersion, rounds: ROUNDS, steps: STEPS, prompts: [SHORT, LONG], load: { start: loadStart, end: loadEnd },
    bandwidth: bw, kv_bytes_per_position_per_element: kvPerPos,
    contenders: contenders.map((c) => ({ label: c.label, threads: c.threads, info: c.info, weights: c.weights, runs: c.runs, cold: c.cold ?? null, tune: c.tune ?? null })),
  }));
} finally {
  await browser.close();
  server.close();
  rmSync(work, { recursive: true, force: true });
}

/** The bytes of every tensor part a manifest lists (webtune's stored weights). */
function manifestBytes(m) {
  let total = 0;
  const visit = (x) => {
    if (Array.isArray(x)) return x.forEach(visit);
    if (x && typeof x === 'object') {
      for (const [k, v] of Object.entries(x)) {
        if ((k === 'bytes' || k === 'nbytes' || k === 'size') && typeof v === 'number' && !('url' in x)) total += v;
        else visit(v);
      }
    }
  };
  visit(m.tensors);
  return total || null;
}
