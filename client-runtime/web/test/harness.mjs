// What the Chromium tests and benches share: where the server binary and
// Debian's Chromium are, the flags Chromium runs with here, starting a real
// `webtune serve` on loopback, the cosine the model checks use, and the
// SentenceEncoder tests' page, checks and latency-report poll. Never
// downloads a browser.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** The server binary: WEBTUNE_BIN, default target/release/webtune. */
export const BIN = process.env.WEBTUNE_BIN ?? join(ROOT, 'target', 'release', 'webtune');
/** Debian's Chromium (the binary, not the wrapper script), or CHROMIUM. */
export const CHROMIUM = process.env.CHROMIUM ?? ['/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p) => existsSync(p));
/** Headless, no sandbox (root), and none of the background connections this closed network refuses. */
export const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage', '--remote-debugging-pipe',
];
/**
 * WebGPU on Chromium's SwiftShader adapter (CPU Vulkan, exact results):
 * Debian's Chromium offers no adapter with --disable-gpu unless ANGLE and
 * WebGPU are both pointed at it.
 */
export const WEBGPU_FLAGS = ['--enable-unsafe-webgpu', '--use-angle=swiftshader', '--use-webgpu-adapter=swiftshader'];

/**
 * Starts `webtune serve --addr 127.0.0.1:0 --database-url sqlite://DB` plus
 * `extra` arguments; resolves with the process, its URL and its stderr so far
 * once it says where it listens (60 s at most).
 */
export function startServer(db, extra = [], bin = BIN) {
  return new Promise((resolve, reject) => {
    const args = ['serve', '--addr', '127.0.0.1:0', '--database-url', `sqlite://${db}`, ...extra];
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const timer = setTimeout(() => reject(new Error(`webtune serve did not start in 60 s: ${out}${err}`)), 60_000);
    p.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc: p, url: m[1], log: () => err });
      }
    });
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) => reject(new Error(`webtune serve exited with ${code}: ${out}${err}`)));
  });
}

/** Chromium with FLAGS, a fresh profile in `profileDir`, and `extra` flags. */
export function launchChromium(profileDir, extra = []) {
  return chromium.launch({
    executablePath: CHROMIUM,
    ignoreDefaultArgs: true,
    args: [...FLAGS, `--user-data-dir=${profileDir}`, ...extra],
    timeout: 60_000,
  });
}

/** Cosine similarity of two equal-length vectors, in f64. */
export function cosine(a, b) {
  let d = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return d / Math.sqrt(na * nb);
}

/**
 * What both SentenceEncoder tests need: the f64 reference (WEBTUNE_MODEL_REF),
 * a real `webtune serve --quorum 1 --models-dir WEBTUNE_MODELS_DIR` on a
 * fresh SQLite file, and a Chromium page (with `flags`) on its origin.
 * Resolves with { ref, base, page, close }.
 */
export async function openEncoderPage(prefix, flags = [], { isolated = false } = {}) {
  const models = process.env.WEBTUNE_MODELS_DIR, refPath = process.env.WEBTUNE_MODEL_REF;
  assert.ok(existsSync(BIN), `no server binary at ${BIN} (set WEBTUNE_BIN)`);
  assert.ok(CHROMIUM, 'no Chromium: apt-get install chromium (or set CHROMIUM)');
  assert.ok(models && existsSync(models), 'WEBTUNE_MODELS_DIR must name a model store with the imported model (scripts/test.sh imports it)');
  assert.ok(refPath && existsSync(refPath), 'WEBTUNE_MODEL_REF must name the f64 reference JSON (eval "$(scripts/fetch-model.sh)")');
  const ref = JSON.parse(readFileSync(refPath, 'utf8'));
  const work = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const server = await startServer(join(work, 'encoder.sqlite'), ['--quorum', '1', '--models-dir', models]);
  const browser = await launchChromium(`${work}/profile`, flags);
  const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
  page.on('pageerror', (e) => console.log(`# page error: ${e}`));
  page.on('console', (m) => m.type() === 'error' && console.log(`# console: ${m.text()}`));
  // Any same-origin document will do: the tests import the module
  // themselves. Cross-origin isolated (Wasm threads) through a proxy.
  const proxy = isolated ? await isolatingProxy(server.url) : null;
  const base = proxy?.url ?? server.url;
  await page.goto(isolated ? `${base}/` : `${base}/healthz`);
  const close = async () => {
    await browser.close();
    proxy?.close();
    server.proc.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  };
  return { ref, base, server: server.url, browser, page, close };
}

/**
 * A loopback origin whose `/` is an empty cross-origin-isolated page and
 * which passes every other request to `upstream` (webtune serve): a page
 * there has Wasm threads and talks to the server same-origin.
 */
export async function isolatingProxy(upstream) {
  const server = http.createServer((req, res) => {
    if (new URL(req.url, 'http://x').pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/html', 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' });
      res.end('<!doctype html><title>webtune test</title>');
      return;
    }
    const up = new URL(req.url, upstream);
    const p = http.request(up, { method: req.method, headers: { ...req.headers, host: up.host } }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    req.pipe(p);
    p.on('error', () => res.destroy());
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

/** Encodes `texts` with the page's `window.enc`: token ids, ms, embeddings. */
export function encodeAll(page, texts) {
  return page.evaluate(async (texts) => {
    const enc = window.enc;
    const ids = texts.map((t) => enc.tokenize(t));
    const t0 = performance.now();
    const e = await enc.encode(texts);
    return { ids, ms: performance.now() - t0, emb: e.map((x) => Array.from(x)) };
  }, texts);
}

/**
 * Checks encodeAll's result for `refs` (reference entries, in the order
 * encoded): token ids equal, `dim` floats, cosine >= 0.9999 each. Returns
 * the worst cosine.
 */
export function checkEmbeddings(got, refs, dim, when) {
  let worst = 1;
  refs.forEach((r, i) => {
    assert.deepEqual(got.ids[i], r.token_ids, `${r.label}: token ids differ from the reference tokenizer's`);
    assert.equal(got.emb[i].length, dim);
    const c = cosine(got.emb[i], r.embedding);
    worst = Math.min(worst, c);
    assert.ok(c >= 0.9999, `${when}: ${r.label}: cosine ${c} < 0.9999`);
  });
  return worst;
}

/**
 * Encodes `texts` `calls` times with `window.enc`, then polls the model's
 * plan at (batch, seqLen) for this session's device key until a latency
 * report shows in it (5 s at most); resolves with the plan or null.
 */
export function reportedPlan(page, texts, calls, batch, seqLen) {
  return page.evaluate(async ({ texts, calls, batch, seqLen }) => {
    const enc = window.enc;
    for (let i = 0; i < calls; i++) await enc.encode(texts);
    const q = new URLSearchParams({ device_key: enc.webtune.session.device_key, batch: String(batch), seq_len: String(seqLen) });
    for (let t = 0; t < 50; t++) {
      const plan = await (await fetch(`/v1/models/${enc.manifest.name}/plan?${q}`)).json();
      if (plan.targets.length) return plan;
      await new Promise((res) => setTimeout(res, 100));
    }
    return null;
  }, { texts, calls, batch, seqLen });
}
