// Measures the demo for BENCHMARKS.md: latency before and after tuning, and
// seconds until the latency stays within 5 % of the final latency
// (`within5_s`: the latency at an inference is the median of those that
// started within ±1 s of it; `within5_of9_s`: the earlier definition, the
// median of each inference and the 8 before it; see summarize() in
// demo/demo.ts). `rejected_early` counts candidates stopped before their
// full timed pairs; `idle_ms_per_loop` is the mean time of one idle() call
// while tuning.
//
//   node bench/demo.mjs [--server URL] [--target wasm|webgpu] [--runs N] [--params 'layers=4&...'] [--dump DIR] [--local-dist]
//
// Without --server it starts `webtune serve` (WEBTUNE_BIN, default
// target/release/webtune) on a fresh SQLite file, so every run starts from
// the portable default kernels. Each run uses a fresh browser profile.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const target = arg('target', 'wasm');
const runs = Number(arg('runs', 1));
const params = arg('params', 'after=5');
// --dump DIR writes each run's whole window.webtuneDemo (latencies, swaps, measures) as DIR/run-N.json.
const dump = arg('dump', null);
// --local-dist serves /web/* from client-runtime/web/dist on disk instead of the copy built into the server
// binary: for trying a change to the runtime without rebuilding the server. Recorded figures use the binary.
const localDist = process.argv.includes('--local-dist');
const CHROMIUM = process.env.CHROMIUM ?? ['/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p) => existsSync(p));
const work = mkdtempSync(join(tmpdir(), 'webtune-bench-'));

let url = arg('server', null), proc = null;
if (!url) {
  const bin = process.env.WEBTUNE_BIN ?? join(ROOT, 'target', 'release', 'webtune');
  proc = spawn(bin, ['serve', '--addr', '127.0.0.1:0', '--database-url', `sqlite://${join(work, 'bench.sqlite')}`], { stdio: ['ignore', 'pipe', 'inherit'] });
  url = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
}

const flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', '--remote-debugging-pipe',
  ...(target === 'webgpu' ? ['--enable-unsafe-webgpu', '--use-angle=swiftshader', '--use-webgpu-adapter=swiftshader'] : [])];
try {
  for (let r = 0; r < runs; r++) {
    const b = await chromium.launch({ executablePath: CHROMIUM, ignoreDefaultArgs: true, args: [...flags, `--user-data-dir=${mkdtempSync(join(work, 'p-'))}`] });
    const page = await (b.contexts()[0] ?? (await b.newContext())).newPage();
    if (localDist) {
      await page.route('**/web/*', (route) => {
        const name = new URL(route.request().url()).pathname.split('/').pop();
        return route.fulfill({
          path: join(ROOT, 'client-runtime', 'web', 'dist', name),
          contentType: 'text/javascript; charset=utf-8',
          headers: { 'cross-origin-resource-policy': 'same-origin', 'cache-control': 'no-cache' },
        });
      });
    }
    await page.goto(`${url}/demo?target=${target}&${params}`);
    await page.waitForFunction(() => ['stopped', 'error'].includes(window.webtuneDemo?.phase), null, { timeout: 1_800_000, polling: 500 });
    const s = await page.evaluate(() => JSON.parse(JSON.stringify(window.webtuneDemo)));
    await b.close();
    if (dump) {
      mkdirSync(dump, { recursive: true });
      writeFileSync(join(dump, `run-${r}.json`), JSON.stringify(s));
    }
    if (s.error) throw new Error(s.error);
    const c = s.config;
    console.log(JSON.stringify({
      run: r, target, config: `${c.layers}L seq${c.seq} d${c.dim} h${c.heads} ffn${c.ffn}${c.q4 ? ' q4' : ''}`, device: s.deviceKey,
      timer_ms: s.timerResolutionMs, inferences: s.inferences, candidates: s.measured, failed: s.failed.length, swaps: s.swaps.length,
      tuned_s: s.tunedAt, start_ms: s.summary.startMs, final_ms: s.summary.finalMs, speedup: s.summary.startMs / s.summary.finalMs,
      within5_s: s.summary.secondsToWithin5, within5_of9_s: s.summary.secondsToWithin5Of9,
      rejected_early: s.measures?.filter((m) => m.early).length,
      idle_ms_per_loop: s.idles?.length ? s.idles.reduce((a, i) => a + i.ms, 0) / s.idles.length : undefined,
    }));
  }
} finally {
  proc?.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
}
