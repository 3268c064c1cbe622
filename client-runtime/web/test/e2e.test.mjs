// End-to-end: the demo page in headless Chromium against a real
// `webtune serve` on loopback with a fresh SQLite database.
//
// For each target (Wasm, then WebGPU on Chromium's SwiftShader adapter):
//  1. a fresh browser profile runs the demo until every kernel's queue is
//     drained and reported; the reports must land in the database (the
//     server's counters and row counts say so), every candidate must pass
//     its output checks, and the model's output must not move when kernels
//     are swapped; a screenshot of the chart goes to artifacts/;
//  2. a reload in the same profile starts from the IndexedDB cache;
//  3. a second fresh profile (same device, so the same device key) gets the
//     voted winners on its very first request: level `device`, not `default`.
//
// Needs: the release binary (WEBTUNE_BIN, default target/release/webtune)
// and Debian's chromium (CHROMIUM, default /usr/lib/chromium/chromium). No
// browser is ever downloaded.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { BIN, CHROMIUM, ROOT, WEBGPU_FLAGS, launchChromium, startServer } from './harness.mjs';

const ARTIFACTS = join(ROOT, 'artifacts');
// Small shapes: the whole file runs in a few minutes on two cores. q4=1 puts
// the MLP on matmul_q4, so all three ops are tuned.
const MODEL = 'layers=2&seq=16&dim=64&heads=2&ffn=128&q4=1&after=2';
// SwiftShader takes about two seconds to build each candidate's pipeline:
// WebGPU evaluates the first three of each queue (it is ordered best first).
// Wasm twice: tuned in idle() between inferences (worker=0), and in the
// bench worker (the demo's default; another sequence length, so that its
// kernels start from a database without winners for them).
const SCENARIOS = [
  { name: 'wasm', target: 'wasm', params: MODEL + '&worker=0', worker: false },
  { name: 'wasm-worker', target: 'wasm', params: MODEL.replace('seq=16', 'seq=24'), worker: true },
  { name: 'webgpu', target: 'webgpu', params: MODEL + '&candidates=3', worker: false },
];

let server, base, work;

async function metrics() {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = {};
  for (const line of text.split('\n')) {
    const r = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (r) m[r[1]] = Number(r[2]);
  }
  return m;
}

async function browser(name, webgpu) {
  const dir = mkdtempSync(join(work, `${name}-`));
  const b = await launchChromium(dir, webgpu ? WEBGPU_FLAGS : []);
  const context = b.contexts()[0] ?? (await b.newContext());
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // Failed loads are caught by URL below; the console's copy of them has none.
  page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && errors.push(m.text()));
  page.on('response', (r) => r.status() >= 400 && !r.url().endsWith('/favicon.ico') && errors.push(`${r.status()} ${r.url()}`));
  return { browser: b, page, errors };
}

const demoState = (page) => page.evaluate(() => JSON.parse(JSON.stringify(window.webtuneDemo)));

async function runUntil(page, phases, timeout) {
  await page.waitForFunction((p) => p.includes(window.webtuneDemo?.phase), phases, { timeout, polling: 250 });
  return demoState(page);
}

before(async () => {
  assert.ok(existsSync(BIN), `no server binary at ${BIN}: run cargo build --release -p webtune (or set WEBTUNE_BIN)`);
  assert.ok(CHROMIUM, 'no Chromium: apt-get install chromium (or set CHROMIUM)');
  work = mkdtempSync(join(tmpdir(), 'webtune-e2e-'));
  mkdirSync(ARTIFACTS, { recursive: true });
  // Quorum 1: one browser's report elects a winner, so the next profile's
  // first request can be checked against it exactly. (Votes across
  // sessions are kernel-db's tests' business.)
  server = await startServer(join(work, 'e2e.sqlite'), ['--quorum', '1']);
  base = server.url;
});

after(() => {
  server?.proc.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

for (const { name, target, params, worker } of SCENARIOS) {
  const how = worker ? ' in its bench worker' : '';
  test(`the demo tunes its ${target} kernels${how}, reports, and the next device starts with the winners`, { timeout: 600_000 }, async () => {
    const url = `${base}/demo?target=${target}&${params}`;
    const before = await metrics();

    // 1. A fresh profile tunes everything.
    const a = await browser(`${name}-a`, target === 'webgpu');
    let s;
    try {
      await a.page.goto(url);
      s = await runUntil(a.page, ['stopped', 'error'], 480_000);
      assert.equal(s.error, '', `demo error: ${s.error}`);
      assert.deepEqual(a.errors, []);
      assert.equal(s.kernels.length, 6);
      assert.equal(s.background, worker, worker ? 'the bench worker must start' : 'tuning runs in idle()');
      for (const k of s.kernels) {
        assert.equal(k.source, 'server', `${k.name}: a fresh profile has no cache`);
        assert.equal(k.level, 'default', `${k.name}: a fresh database has no winners`);
      }
      assert.deepEqual(s.failed, [], 'every candidate the server sends must pass its output checks');
      assert.equal(s.reports.length, 6, 'one report per kernel');
      for (const r of s.reports) {
        assert.equal(r.error, undefined, `${r.name}: ${r.error}`);
        assert.ok(r.entries >= 1 && r.entries <= 5);
        assert.equal(r.response.accepted, r.entries);
      }
      assert.ok(s.measured >= 6 * 3, `measured only ${s.measured} candidates`);
      assert.ok(s.output.maxDiff < 1e-3, `the model's output moved by ${s.output.maxDiff} across kernel swaps`);
      assert.ok(s.inferences >= 5);
      // The fast policy adopts on a paired test of the pairs' ratios (tuner.ts `pairedFaster`), so the two sides'
      // separate medians, which the swap reports, can cross a little; never by more than noise.
      for (const sw of s.swaps) assert.ok(sw.to_us < sw.from_us * 1.1, `a swap is to a kernel no slower than noise: ${sw.to_us} against ${sw.from_us} µs`);

      // The reports are in the database.
      const m = await metrics();
      assert.equal(m.webtune_reports_accepted_total - (before.webtune_reports_accepted_total ?? 0), 6);
      assert.equal(m.webtune_reports_rejected_total, 0);
      // The server recomputed the reported output samples from each ticket's
      // seed: the browser's seeded inputs are the server's, bit for bit.
      assert.equal(m.webtune_samples_rejected_total ?? 0, 0);
      assert.ok(m['webtune_db_rows{table="reports"}'] >= 6);
      assert.ok(m['webtune_db_rows{table="winners"}'] >= 6);
      const dashboard = await (await fetch(`${base}/dashboard`)).text();
      assert.ok(dashboard.includes(s.deviceKey.replaceAll('&', '&amp;')), 'the dashboard lists the device');

      const shot = join(ARTIFACTS, `demo-chart-${name}.png`);
      await a.page.locator('#chart').screenshot({ path: shot });
      assert.ok(statSync(shot).size > 5000, 'the chart screenshot is not empty');
      console.log(`# ${name}: device ${s.deviceKey}, ${s.inferences} inferences, ${s.measured} candidates measured, ` +
        `${s.swaps.length} swaps, tuned after ${s.tunedAt?.toFixed(1)} s, latency ${s.summary?.startMs?.toFixed(3)} -> ${s.summary?.finalMs?.toFixed(3)} ms; chart: ${shot}`);

      // 2. A reload in the same profile starts from the local cache.
      await a.page.reload();
      const again = await runUntil(a.page, ['stopped', 'error'], 120_000);
      assert.equal(again.error, '');
      for (const k of again.kernels) {
        assert.equal(k.source, 'cache', `${k.name} should come from IndexedDB after a reload`);
        assert.equal(k.initial, s.kernels.find((x) => x.name === k.name).sha256, `${k.name}: the cache holds the kernel in use at the end`);
      }
      assert.equal(again.reports.length, 0, 'tuned kernels are not tuned again');
    } finally {
      await a.browser.close();
    }

    // 3. A second fresh profile gets the winners on its first request.
    const b = await browser(`${name}-b`, target === 'webgpu');
    try {
      await b.page.goto(url);
      const first = await runUntil(b.page, ['running', 'tuned', 'stopped', 'error'], 120_000);
      assert.equal(first.error, '');
      assert.equal(first.deviceKey, s.deviceKey, 'the same machine and browser make the same device key');
      for (const k of first.kernels) {
        assert.equal(k.source, 'server');
        assert.equal(k.level, 'device', `${k.name}: the second profile must get the voted winner, not the default`);
        const report = s.reports.find((r) => r.name === k.name);
        const winner = report.response.winners.find((w) => w.level === 'device');
        assert.equal(k.initial, winner.sha256, `${k.name}: the first request returns the device winner`);
      }
    } finally {
      await b.browser.close();
    }
  });
}

test('rho: measure the primitive vector on this device once, and it becomes the key\'s last part', { timeout: 120_000 }, async () => {
  const a = await browser('rho', false);
  try {
    await a.page.goto(`${base}/healthz`);
    const r = await a.page.evaluate(async () => {
      const { Webtune } = await import('/web/webtune.js');
      const first = await Webtune.open({ target: 'wasm', rho: 'measure', cache: false, tune: false });
      const second = await Webtune.open({ target: 'wasm', rho: 'measure', cache: false, tune: false });
      const plain = await Webtune.open({ target: 'wasm', cache: false, tune: false });
      return { session: first.session, m: first.rho, second: second.rho, secondKey: second.session.device_key, plainKey: plain.session.device_key };
    });
    const pairs = await (await fetch(`${base}/v1/rho?target=wasm`)).json();
    assert.equal(r.session.rho.length, pairs.pairs.length);
    assert.match(r.session.rho, /^[01]+$/);
    assert.ok(r.session.device_key.endsWith(`/${r.session.rho}`), r.session.device_key);
    assert.ok(r.plainKey.endsWith('/-'), 'without rho the key has no vector');
    assert.equal(r.plainKey.split('/').slice(0, 3).join('/'), r.session.device_key.split('/').slice(0, 3).join('/'));
    assert.equal(r.m.cached, false);
    for (const p of pairs.pairs) assert.ok(Number.isFinite(r.m.ratios[p.name]) && r.m.ratios[p.name] > 0, `${p.name}: ratio ${r.m.ratios[p.name]}`);
    // Each bit follows the margin rule from its measured ratio.
    pairs.pairs.forEach((p, i) => assert.equal(r.session.rho[i], r.m.ratios[p.name] < 1 - pairs.margin ? '1' : '0', p.name));
    // The second open reads this browser's cache: same bits, no measuring.
    assert.equal(r.second.cached, true);
    assert.equal(r.second.rho, r.session.rho);
    assert.equal(r.secondKey, r.session.device_key);
    assert.deepEqual(a.errors, []);
    console.log(`# rho ${r.session.rho} in ${r.m.ms.toFixed(0)} ms; ratios ${JSON.stringify(r.m.ratios)}`);
  } finally {
    await a.browser.close();
  }
});

test('f16 ops: the server serves f16 WGSL kernels; a WebGPU device without shader-f16 is refused in one line and keeps its f32 op', { timeout: 120_000 }, async () => {
  const q = (op, target) => new URLSearchParams({ device_key: 'gpu-google/swiftshader/unknown/-', op, shape: '8,64,16', target });
  const best = await (await fetch(`${base}/v1/kernels/best?${q('matmul+bias+f16', 'wgsl')}`)).json();
  assert.equal(best.meta.op, 'matmul+bias+f16');
  assert.deepEqual(best.meta.args.map((x) => x.dtype), ['f16', 'f16', 'f16', 'f16']);
  const text = await (await fetch(`${base}${best.url}`)).text();
  assert.ok(text.startsWith('enable f16;'), text.slice(0, 40));
  const wasm = await fetch(`${base}/v1/kernels/best?${q('matmul+f16', 'wasm')}`);
  assert.equal(wasm.status, 400);
  assert.match(await wasm.text(), /f16 ops run on wgsl only/);
  const a = await browser('f16', true);
  try {
    await a.page.goto(`${base}/healthz`);
    const r = await a.page.evaluate(async () => {
      const { Webtune } = await import('/web/webtune.js');
      const wt = await Webtune.open({ target: 'webgpu', cache: false, tune: false });
      const f16 = wt.device.features.has('shader-f16');
      let refused = null;
      try {
        await wt.gpuKernel('matmul+f16', [8, 64, 16]);
      } catch (e) {
        refused = e.message;
      }
      const f32 = await wt.gpuKernel('matmul', [8, 64, 16]);
      return { f16, refused, f32: f32.op };
    });
    // Chromium's SwiftShader adapter has no shader-f16 (lavapipe, in the native runner's tests, has).
    assert.equal(r.f16, false, 'this adapter has shader-f16: run the f16 kernels here too');
    assert.match(r.refused, /^matmul\+f16: this device has no shader-f16 feature; use the f32 op \(matmul\)$/);
    assert.equal(r.f32, 'matmul');
    assert.deepEqual(a.errors, []);
  } finally {
    await a.browser.close();
  }
});

/**
 * Tunes `op` at `shape` in the browser from an empty database with two
 * candidates, whose first must be a kernel of several passes (its text has
 * `marker`); both must be measured and checked; then the tuned kernel
 * computes the product through the app's own buffers and bind group (inputs
 * seeded here, the output poisoned) against a float64 reference.
 */
async function tuneSeveralPasses(label, op, shape, marker) {
  const a = await browser(label, true);
  try {
    await a.page.goto(`${base}/healthz`);
    const r = await a.page.evaluate(async ({ op, shape, marker }) => {
      const { Webtune } = await import('/web/webtune.js');
      const wt = await Webtune.open({ target: 'webgpu', cache: false, maxCandidates: 2 });
      const measured = [];
      wt.addEventListener('measure', (e) => measured.push(e.detail));
      const k = await wt.gpuKernel(op, shape);
      const t0 = performance.now();
      while (measured.length < 2 && performance.now() - t0 < 200_000) {
        await wt.idle(50);
        await new Promise((r) => setTimeout(r, 10));
      }
      const texts = await Promise.all(measured.map(async (m) => (await fetch(`/v1/kernels/${m.sha256}`)).text()));
      // The app's path: its own buffers and bind group, the tuned kernel's dispatch.
      const [M, K, N] = shape;
      const A = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i * 0.37) + 0.1);
      // B as the kernel reads it: f32 K × N, or q4 words (nibble j of word w
      // is row 8w + j of column n, W[n, w]) with one scale per 32 rows.
      const q4 = op === 'matmul_q4';
      const W = Uint32Array.from({ length: (N * K) / 8 }, (_, i) => (Math.imul(i + 1, 2654435761) ^ (i << 7)) >>> 0);
      const S = Float32Array.from({ length: (N * K) / 32 }, (_, i) => 0.02 + 0.01 * Math.cos(i));
      const B = q4
        ? Float32Array.from({ length: K * N }, (_, i) => {
            const [kk, n] = [Math.floor(i / N), i % N];
            return (((W[(n * K + kk) >>> 3] >>> (4 * (kk & 7))) & 15) - 8) * S[(n * K + kk) >>> 5];
          })
        : Float32Array.from({ length: K * N }, (_, i) => Math.cos(i * 0.11) - 0.2);
      const dev = wt.device;
      const buf = (data, usage) => {
        const b = dev.createBuffer({ size: Math.max(16, data.byteLength), usage: usage | GPUBufferUsage.COPY_DST });
        dev.queue.writeBuffer(b, 0, data);
        return b;
      };
      const inputs = q4 ? [A, W, S] : [A, B];
      const bufs = [...inputs.map((x) => buf(x, GPUBufferUsage.STORAGE)), buf(new Float32Array(M * N).fill(NaN), GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC)];
      const out = bufs[bufs.length - 1];
      const read = dev.createBuffer({ size: M * N * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      const enc = dev.createCommandEncoder();
      const pass = enc.beginComputePass();
      k.dispatch(pass, k.bindGroup(bufs));
      pass.end();
      enc.copyBufferToBuffer(out, 0, read, 0, M * N * 4);
      dev.queue.submit([enc.finish()]);
      await read.mapAsync(GPUMapMode.READ);
      const C = new Float32Array(read.getMappedRange().slice(0));
      let maxErr = 0;
      for (let i = 0; i < M; i++) {
        for (let j = 0; j < N; j++) {
          let want = 0, scale = 0;
          for (let kk = 0; kk < K; kk++) {
            want += A[i * K + kk] * B[kk * N + j];
            scale += Math.abs(A[i * K + kk] * B[kk * N + j]);
          }
          const err = Number.isFinite(C[i * N + j]) ? Math.abs(C[i * N + j] - want) / scale : Infinity;
          maxErr = Math.max(maxErr, err);
        }
      }
      return {
        measured: measured.map((m, i) => ({ ok: m.ok, error: m.error ?? null, severalPasses: texts[i].includes(marker) })),
        passes: k.passes,
        maxErr,
      };
    }, { op, shape, marker });
    console.log(`${label} e2e: ${JSON.stringify(r)}`);
    assert.equal(r.measured.length, 2, JSON.stringify(r));
    assert.ok(r.measured[0].severalPasses, `the first candidate has no \`${marker}\`: ${JSON.stringify(r)}`);
    assert.ok(r.measured.every((m) => m.ok), JSON.stringify(r));
    assert.ok(r.maxErr < 1e-5, `the tuned kernel (${r.passes} pass(es)) through the app's bind group: max scaled error ${r.maxErr}`);
    assert.deepEqual(a.errors, []);
  } finally {
    await a.browser.close();
  }
}

test('split-K across workgroups (ABI 3): a two-pass WGSL candidate is measured and checked in the browser, and the tuned kernel computes the product through the app\'s own bind group', { timeout: 300_000 }, async () => {
  // matmul 8,512,16: a small grid and a long K, so SwiftShader's lite space
  // leads with a k_slices twin (two passes, a scratch buffer at group 1).
  await tuneSeveralPasses('k-slices', 'matmul', [8, 512, 16], 'fn reduce(');
});

test('q4 prefill in two passes (ABI 3, first entry `unpack`): measured and checked in the browser, and the tuned kernel computes the product through the app\'s own bind group', { timeout: 300_000 }, async () => {
  // matmul_q4 256,64,16: 256 rows, so the lite space leads with two-pass
  // tiles (the weights unpacked once into the scratch buffer).
  await tuneSeveralPasses('dequant-pass', 'matmul_q4', [256, 64, 16], 'fn unpack(');
});
