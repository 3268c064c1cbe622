// Tuned webtune Wasm kernels against ONNX Runtime Web and TensorFlow.js's
// wasm backends, on --threads threads each (default 1), in one headless
// Chromium run (issue 6's K0–K3; issue 19's threaded figures). Not a test:
// it prints one JSON line per shape for BENCHMARKS.md.
//
//   (cd research/web-bench && npm ci) && node research/web-bench/kernels.mjs [--server URL] [--shapes K0,K1] [--reps 3] [--samples 30] [--threads 2]
//
// A small local server serves the page, the runtime, both peers' files, and
// proxies /v1/ to webtune serve (started here on a fresh SQLite file unless
// --server is given), so the page is one origin and cross-origin isolated
// (5 µs timer).

import { createReadStream, existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, startServer } from '../../client-runtime/web/test/harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const work = mkdtempSync(join(tmpdir(), 'webtune-kbench-'));
let upstream = arg('server', null), webtune = null;
if (!upstream) {
  webtune = await startServer(join(work, 'bench.sqlite'));
  upstream = webtune.url;
}

const MOUNTS = {
  '/bench': join(here, 'kernels.html'),
  '/web/': join(here, '..', '..', 'client-runtime', 'web', 'dist'),
  '/ort/': join(here, 'node_modules', 'onnxruntime-web', 'dist'),
  '/tfjs/': [join(here, 'node_modules', '@tensorflow', 'tfjs-core', 'dist'), join(here, 'node_modules', '@tensorflow', 'tfjs-backend-wasm', 'dist')],
};
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };
const ISOLATED = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

const server = http.createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  if (path.startsWith('/v1/')) {
    const up = new URL(req.url, upstream);
    const p = http.request(up, { method: req.method, headers: { ...req.headers, host: up.host } }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    req.pipe(p);
    p.on('error', () => res.destroy());
    return;
  }
  for (const [prefix, target] of Object.entries(MOUNTS)) {
    if (path === prefix || (prefix.endsWith('/') && path.startsWith(prefix))) {
      const rel = normalize(path.slice(prefix.length)).replace(/^(\.\.[/\\])+/, '');
      const file = [target].flat().map((t) => (prefix.endsWith('/') ? join(t, rel) : t)).find((f) => existsSync(f));
      if (file) {
        res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', ...ISOLATED });
        createReadStream(file).pipe(res);
        return;
      }
    }
  }
  res.writeHead(404).end();
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const local = `http://127.0.0.1:${server.address().port}`;

const browser = await launchChromium(join(work, 'profile'));
try {
  const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
  page.on('console', (m) => console.error(`page: ${m.text()}`));
  const q = new URLSearchParams({ shapes: arg('shapes', 'K0,K1,K2,K3'), reps: arg('reps', '3'), samples: arg('samples', '30'), threads: arg('threads', '1') });
  await page.goto(`${local}/bench?${q}`);
  await page.waitForFunction(() => window.benchResult || window.benchError, null, { timeout: 3_600_000, polling: 1000 });
  const err = await page.evaluate(() => window.benchError);
  if (err) throw new Error(err);
  for (const row of await page.evaluate(() => window.benchResult)) console.log(JSON.stringify(row));
} finally {
  await browser.close();
  server.close();
  webtune?.proc.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
}
