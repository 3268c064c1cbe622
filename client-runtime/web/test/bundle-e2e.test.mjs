// A static bundle in headless Chromium, with the webtune server unreachable:
// a page served by a plain static host opens Webtune with `bundle`, gets its
// kernel from the bundle (the winner on its key's chain, or the portable
// default), checks its SHA-256, and runs it on the page's memory against a
// JavaScript reference. A bundle whose kernel file was altered is refused.
//
// The bundle is what `webtune bundle export` writes (the portable default
// of one op, from an empty database), plus a winner added by hand at the
// architecture key (a kernel from `webtune compile`), its sums rewritten.
//
// Needs: the server binary for the CLI (WEBTUNE_BIN, default
// target/release/webtune) and Debian's Chromium (CHROMIUM).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { after, before, test } from 'node:test';
import { BIN, CHROMIUM, ROOT, launchChromium, startServer } from './harness.mjs';

const OP = 'matmul', SHAPE = [16, 32, 24];
const ARCH_KEY = 'cpu-x86/relaxed-simd';
const KEY = `${ARCH_KEY}/linux-1t-v8/-`;
const DIST = join(ROOT, 'client-runtime', 'web', 'dist');
const sha = (b) => createHash('sha256').update(b).digest('hex');

let work, site, host, deadServer, browser, page, winnerSha, defaultSha;

function webtune(...args) {
  return execFileSync(BIN, args, { encoding: 'utf8' });
}

/** Rewrites SHA256SUMS for every file of the bundle in `dir`. */
function resum(dir) {
  const names = ['bundle.json', ...readdirSync(join(dir, 'kernels')).map((n) => `kernels/${n}`)];
  writeFileSync(join(dir, 'SHA256SUMS'), names.map((n) => `${sha(readFileSync(join(dir, n)))}  ${n}\n`).join(''));
}

/** A static host: /web/* from dist/, everything else from `root`; `/` an empty page. */
function staticHost(root) {
  const types = { '.js': 'text/javascript', '.json': 'application/json', '.wasm': 'application/wasm', '.wgsl': 'text/plain' };
  const server = http.createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end('<!doctype html><title>static app</title>');
    }
    const file = path.startsWith('/web/') ? join(DIST, normalize(path.slice(5))) : join(root, normalize(path));
    if (!existsSync(file) || !file.startsWith(path.startsWith('/web/') ? DIST : root)) {
      res.writeHead(404);
      return res.end('not found');
    }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` })));
}

before(async () => {
  assert.ok(existsSync(BIN), `no server binary at ${BIN} (set WEBTUNE_BIN)`);
  assert.ok(CHROMIUM, 'no Chromium: apt-get install chromium (or set CHROMIUM)');
  work = mkdtempSync(join(tmpdir(), 'webtune-bundle-e2e-'));
  site = join(work, 'site');
  const bundle = join(site, 'bundle');
  const out = webtune('bundle', 'export', '--database-url', `sqlite://${join(work, 'empty.sqlite')}`, '--out', bundle,
    '--op', OP, '--shape', SHAPE.join(','), '--target', 'wasm');
  assert.match(out, /^exported 0 winners, 1 kernels/);
  const manifest = JSON.parse(readFileSync(join(bundle, 'bundle.json'), 'utf8'));
  defaultSha = manifest.defaults[0].kernel_sha256;
  // A winner: another schedule of the same op, from the lite space.
  const space = webtune('space', '--op', OP, '--shape', SHAPE.join(','), '--target', 'wasm', '--device', 'apple-m2').trim().split('\n');
  let meta;
  for (const line of space) {
    const config = { ...JSON.parse(line), relaxed_simd: false };
    const dir = join(work, `k${sha(line).slice(0, 8)}`);
    webtune('compile', '--op', OP, '--shape', SHAPE.join(','), '--target', 'wasm', '--config', JSON.stringify(config), '--out', dir);
    meta = JSON.parse(readFileSync(join(dir, 'kernel.json'), 'utf8'));
    if (meta.sha256 === defaultSha) continue;
    cpSync(join(dir, 'kernel.wasm'), join(bundle, 'kernels', `${meta.sha256}.wasm`));
    break;
  }
  winnerSha = meta.sha256;
  assert.notEqual(winnerSha, defaultSha);
  manifest.winners.push({
    op: OP, shape: SHAPE.join(','), target: 'wasm', level: 'arch', level_key: ARCH_KEY, space_checksum: 'hand-made',
    kernel_sha256: winnerSha, votes: 10, total_votes: 12, reports: 2, best_median_us: 3.5, updated_at: Date.now(), meta,
  });
  writeFileSync(join(bundle, 'bundle.json'), JSON.stringify(manifest, null, 2) + '\n');
  resum(bundle);
  // The same bundle on a host that altered the winner's kernel.
  cpSync(bundle, join(site, 'altered'), { recursive: true });
  appendFileSync(join(site, 'altered', 'kernels', `${winnerSha}.wasm`), Buffer.from([0]));

  host = await staticHost(site);
  // The webtune server's address: a port nothing listens on.
  deadServer = await new Promise((resolve) => {
    const s = http.createServer().listen(0, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${s.address().port}`;
      s.close(() => resolve(url));
    });
  });
  browser = await launchChromium(join(work, 'profile'));
  page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
  page.on('pageerror', (e) => console.log(`# page error: ${e}`));
  await page.goto(`${host.url}/`);
});

after(async () => {
  await browser?.close();
  host?.server.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Opens Webtune in the page (by default with the server unreachable), runs the op once; what happened. */
function runFromBundle(bundle, deviceKey, server = deadServer) {
  return page.evaluate(async ({ server, bundle, deviceKey, op, shape }) => {
    const { Webtune } = await import('/web/webtune.js');
    let wt;
    try {
      wt = await Webtune.open({ target: 'wasm', server, bundle, ...(deviceKey ? { deviceKey } : {}), cache: false, threads: 1 });
    } catch (e) {
      return { openError: String(e.message) };
    }
    const out = { lookups: wt.lookups, offline: wt.offline, sessionId: wt.session.session_id, deviceKey: wt.session.device_key };
    try {
      const mm = await wt.wasmKernel(op, shape);
      const [M, K, N] = shape;
      const a = 0, b = 4 * M * K, c = b + 4 * K * N;
      const mem = new Float32Array(wt.memory.buffer);
      const A = mem.subarray(a / 4, a / 4 + M * K), B = mem.subarray(b / 4, b / 4 + K * N), C = mem.subarray(c / 4, c / 4 + M * N);
      A.forEach((_, i) => (A[i] = ((i * 7) % 13) / 8 - 0.75));
      B.forEach((_, i) => (B[i] = ((i * 5) % 11) / 8 - 0.6));
      C.fill(NaN);
      mm.run(a, b, c);
      let maxDiff = 0;
      for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
        maxDiff = Math.max(maxDiff, Math.abs(s - C[i * N + j]));
      }
      Object.assign(out, { source: mm.source, level: mm.level, sha256: mm.sha256, tuning: mm.tuner !== null, maxDiff });
    } catch (e) {
      out.kernelError = String(e.message);
    }
    wt.close();
    return out;
  }, { server, bundle, deviceKey, op: OP, shape: SHAPE });
}

test('with the server unreachable, the winner on the key\'s chain comes from the bundle and runs', { timeout: 120_000 }, async () => {
  const r = await runFromBundle('/bundle/', KEY);
  assert.equal(r.openError, undefined, r.openError);
  assert.equal(r.kernelError, undefined, r.kernelError);
  assert.equal(r.lookups, 'bundle');
  assert.ok(r.offline, 'the session says the server could not be reached');
  assert.equal(r.sessionId, '');
  assert.equal(r.deviceKey, KEY);
  assert.equal(r.source, 'bundle');
  assert.equal(r.level, 'arch');
  assert.equal(r.sha256, winnerSha);
  assert.equal(r.tuning, false, 'nothing is tuned without a server');
  assert.ok(r.maxDiff < 1e-4, `the kernel's output is off by ${r.maxDiff}`);
});

test('a device of another key gets the bundle\'s portable default', { timeout: 120_000 }, async () => {
  const r = await runFromBundle('/bundle/', 'cpu-arm/simd128/android-4t-v8/-');
  assert.equal(r.kernelError, undefined, r.kernelError);
  assert.equal(r.level, 'default');
  assert.equal(r.sha256, defaultSha);
  assert.ok(r.maxDiff < 1e-4, `the kernel's output is off by ${r.maxDiff}`);
});

test('an altered kernel file is refused, and so is a missing bundle', { timeout: 120_000 }, async () => {
  const r = await runFromBundle('/altered/', KEY);
  assert.match(r.kernelError ?? '', /truncated or altered, refused/);
  const none = await runFromBundle('/nowhere/', KEY);
  assert.match(none.openError ?? '', /server cannot be reached .* bundle was refused: .*SHA256SUMS: HTTP 404/);
});

test('with the server up, the app\'s bundle still answers lookups, tuning goes on, and the keys are remembered for later', { timeout: 120_000 }, async () => {
  const server = await startServer(join(work, 'live.sqlite'), ['--allow-origin', host.url]);
  try {
    const r = await runFromBundle('/bundle/', null, server.url);
    assert.equal(r.openError, undefined, r.openError);
    assert.equal(r.kernelError, undefined, r.kernelError);
    assert.equal(r.lookups, 'bundle');
    assert.equal(r.offline, null);
    assert.match(r.sessionId, /^[0-9a-f]{32}$/);
    assert.equal(r.source, 'bundle');
    assert.equal(r.tuning, true, "with a server, the bundle's kernel is tuned like any other");
    assert.ok(r.maxDiff < 1e-4);
    // Keys are remembered per server: another, unreachable one has none.
    const other = await runFromBundle('/bundle/', null);
    assert.ok(other.offline);
    assert.equal(other.deviceKey, '');
    assert.equal(other.level, 'default');
    // The same page later, its server gone: the key that server gave this
    // fingerprint is looked up in the bundle.
    server.proc.kill('SIGTERM');
    await new Promise((res) => server.proc.once('exit', res));
    const down = await runFromBundle('/bundle/', null, server.url);
    assert.ok(down.offline, 'the server is down');
    assert.equal(down.kernelError, undefined, down.kernelError);
    assert.equal(down.deviceKey, r.deviceKey, 'the key the server gave this fingerprint last time');
    assert.equal(down.source, 'bundle');
  } finally {
    server.proc.kill('SIGTERM');
  }
});
