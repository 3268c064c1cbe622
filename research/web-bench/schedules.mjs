// Times Wasm kernel directories (made by `webtune compile`) side by side in
// one headless Chromium page: the engine the browser runtime tunes for. For
// studying schedules outside the tuner's queue; not a test.
//
//   node research/web-bench/schedules.mjs DIR [DIR ...] [--rounds 5] [--ms 150] [--pool 2]
//
// Each DIR holds kernel.wasm and kernel.json (webtune's Wasm ABI 1, or ABI 2:
// a threaded kernel, whose parts run on the runtime's ThreadPool of `pool`
// threads, default its part count; the page is then cross-origin isolated,
// every memory shared, and single-threaded kernels run with their memory
// import made shared, as the runtime does). Every
// kernel gets seeded non-zero inputs in its own memory, a 300 ms warm-up
// (V8's optimizing tier), then `rounds` rounds; in each round every kernel
// is timed in turn for `ms` milliseconds (batches of calls ≥ 2 ms, so the
// page's timer resolution does not matter). Prints one JSON line per
// kernel: its median and best round in GFLOP/s, and the spread of rounds.

import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { takeOption } from './cli.mjs';

// playwright-core is the web runtime's development dependency: resolved from
// client-runtime/web/node_modules (npm ci there), not from this folder.
const { chromium } = createRequire(join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'client-runtime', 'web', 'package.json'))('playwright-core');

const args = process.argv.slice(2);
const opt = (k, d) => Number(takeOption(args, k, d));
const rounds = opt('rounds', 5), ms = opt('ms', 150), poolSize = opt('pool', 0);
const dirs = args.filter((d) => existsSync(join(d, 'kernel.wasm')));
if (!dirs.length) {
  console.error('usage: node research/web-bench/schedules.mjs DIR [DIR ...] [--rounds N] [--ms M]');
  process.exit(2);
}
const kernels = dirs.map((d) => {
  const meta = JSON.parse(readFileSync(join(d, 'kernel.json'), 'utf8'));
  return { dir: d, meta, wasm: readFileSync(join(d, 'kernel.wasm')).toString('base64') };
});

const CHROMIUM = process.env.CHROMIUM ?? ['/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p) => existsSync(p));
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  ignoreDefaultArgs: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', '--remote-debugging-pipe', '--user-data-dir=' + join(process.env.TMPDIR ?? '/tmp', `wt-sched-${process.pid}`)],
});
const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
page.on('console', (m) => process.stderr.write(`[page] ${m.text()}\n`));
// A cross-origin-isolated blank page and the runtime, for threaded kernels.
const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'client-runtime', 'web', 'dist');
const http = createServer((req, res) => {
  const iso = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
  const path = new URL(req.url, 'http://x').pathname;
  if (path === '/web/webtune.js') res.writeHead(200, { 'content-type': 'text/javascript', ...iso }).end(readFileSync(join(dist, 'webtune.js')));
  else res.writeHead(200, { 'content-type': 'text/html', ...iso }).end('<!doctype html><title>schedules</title>');
});
await new Promise((r) => http.listen(0, '127.0.0.1', r));
await page.goto(`http://127.0.0.1:${http.address().port}/`);
const threaded = kernels.some((k) => k.meta.threads > 1);
const pool = threaded ? poolSize || Math.max(...kernels.map((k) => k.meta.threads ?? 1)) : 0;

const out = await page.evaluate(async ({ kernels, rounds, ms, pool }) => {
  const { ThreadPool, sharedImport } = await import('/web/webtune.js');
  const tp = pool ? new ThreadPool(pool) : null;
  const flops = (m) => {
    const s = m.args.map((a) => a.shape);
    // C's shape and the contracted length: A is [.., M, K].
    const c = s[s.length - 1].reduce((x, y) => x * y, 1);
    const a = s[0];
    return 2 * c * a[a.length - 1];
  };
  // Kernels of the same op and shape share one memory (and its inputs):
  // a page holds a bounded number of Wasm memories.
  const memories = new Map();
  const setup = [];
  for (const k of kernels) {
    const m = k.meta;
    const key = JSON.stringify(m.args.map((a) => a.shape));
    const offsets = [];
    let total = 0;
    for (const a of m.args) {
      offsets.push(total);
      total += Math.ceil((4 * a.shape.reduce((x, y) => x * y, 1)) / 64) * 64;
    }
    const inputsEnd = total;
    if (m.scratch_bytes > 0) offsets.push(total);
    const need = Math.max(total + m.scratch_bytes, m.memory_pages_min * 65536);
    let mem = memories.get(key);
    if (!mem) {
      const memory = tp
        ? new WebAssembly.Memory({ initial: Math.ceil(need / 65536), maximum: 65536, shared: true })
        : new WebAssembly.Memory({ initial: Math.ceil(need / 65536) });
      const f32 = new Float32Array(memory.buffer, 0, inputsEnd / 4);
      let x = 12345;
      for (let j = 0; j < f32.length; j++) {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        f32[j] = (x / 4294967296) * 2 - 1 || 0.5;
      }
      mem = { memory };
      memories.set(key, mem);
    }
    const memory = mem.memory;
    if (memory.buffer.byteLength < need) memory.grow(Math.ceil((need - memory.buffer.byteLength) / 65536));
    const raw = Uint8Array.from(atob(k.wasm), (c) => c.charCodeAt(0));
    const module = await WebAssembly.compile(tp ? sharedImport(raw) : raw);
    const instance = await WebAssembly.instantiate(module, { env: { memory } });
    let run;
    if (m.threads > 1) {
      const pk = tp.prepare(module, memory, instance);
      await pk.ready;
      run = () => tp.run(pk, offsets, m.threads);
    } else {
      const fn = instance.exports[m.entry];
      run = () => fn(...offsets);
    }
    const t0 = performance.now();
    let calls = 0;
    while (calls < 3 || performance.now() - t0 < 300) {
      run();
      calls++;
    }
    const per = (performance.now() - t0) / calls;
    setup.push({ run, batch: Math.max(1, Math.ceil(2 / per)), flops: flops(m), rounds: [] });
  }
  for (let r = 0; r < rounds; r++) {
    for (const s of setup) {
      const xs = [];
      const end = performance.now() + ms;
      while (xs.length < 3 || performance.now() < end) {
        const t = performance.now();
        for (let i = 0; i < s.batch; i++) s.run();
        xs.push((performance.now() - t) / s.batch);
      }
      xs.sort((a, b) => a - b);
      s.rounds.push(xs[xs.length >> 1]);
    }
    console.log(`round ${r + 1}/${rounds}`);
  }
  return setup.map((s) => ({ rounds_ms: s.rounds, flops: s.flops }));
}, { kernels, rounds, ms, pool });
await browser.close();
http.close();

for (let i = 0; i < kernels.length; i++) {
  const r = [...out[i].rounds_ms].sort((a, b) => a - b);
  const med = r[r.length >> 1];
  console.log(JSON.stringify({
    kernel: kernels[i].dir,
    config: kernels[i].meta.config,
    median_ms: +med.toFixed(4),
    gflops: +(out[i].flops / med / 1e6).toFixed(2),
    best_gflops: +(out[i].flops / r[0] / 1e6).toFixed(2),
    spread: +((r[r.length - 1] - r[0]) / med).toFixed(3),
  }));
}
