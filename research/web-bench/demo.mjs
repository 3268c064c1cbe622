// Measures the demo for BENCHMARKS.md: latency before and after tuning, and
// seconds until the latency stays within 5 % of the final latency
// (`within5_s`: the latency at an inference is the median of those that
// started within ±1 s of it; `within5_of9_s`: the earlier definition, the
// median of each inference and the 8 before it; see summarize() in
// demo/demo.ts). `rejected_early` counts candidates stopped before their
// full timed pairs; `idle_ms_per_loop` is the mean time of one idle() call
// while tuning.
//
//   node research/web-bench/demo.mjs [--server URL] [--target wasm|webgpu] [--runs N] [--params 'layers=4&...'] [--dump DIR] [--local-dist]
//
// Without --server it starts `webtune serve` (WEBTUNE_BIN, default
// target/release/webtune) on a fresh SQLite file, so every run starts from
// the portable default kernels. Each run uses a fresh browser profile.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, WEBGPU_FLAGS, launchChromium, startServer } from '../../client-runtime/web/test/harness.mjs';

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
const work = mkdtempSync(join(tmpdir(), 'webtune-bench-'));

let url = arg('server', null), server = null;
if (!url) {
  server = await startServer(join(work, 'bench.sqlite'));
  url = server.url;
}

try {
  for (let r = 0; r < runs; r++) {
    const b = await launchChromium(mkdtempSync(join(work, 'p-')), target === 'webgpu' ? WEBGPU_FLAGS : []);
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
  server?.proc.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
}
