// Threaded Wasm kernels (ABI 2) in headless Chromium: kernels from
// `webtune compile`, as a server would send them, run on the runtime's
// ThreadPool over a shared memory in a cross-origin-isolated page. For each
// shape and split (primes, M = 1, K not a multiple of 4, a batch split, a
// fused epilogue, a K-tiled kernel with packing): every run of the parts on
// the pool gives bit for bit what the module's own one-thread `kernel`
// gives, which matches an f64 reference; the same op's single-threaded
// kernel, loaded with its memory import made shared (`sharedImport`), agrees
// too; guard words around every argument and the scratch area survive, and
// the inputs are unchanged. A page that is not cross-origin isolated gets
// no threads, is told why, and still runs the single-threaded kernel.
//
// Needs: the webtune binary (WEBTUNE_BIN, default target/release/webtune) and
// Debian's chromium (CHROMIUM). No browser is ever downloaded.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { BIN, CHROMIUM, launchChromium } from './harness.mjs';

const DIST = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
const ISOLATED = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
let work, http, origin, browser, page;

before(async () => {
  assert.ok(existsSync(BIN), `no webtune binary at ${BIN} (set WEBTUNE_BIN)`);
  assert.ok(CHROMIUM, 'no Chromium: apt-get install chromium (or set CHROMIUM)');
  work = mkdtempSync(join(tmpdir(), 'webtune-threads-'));
  http = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const headers = path.startsWith('/plain') ? {} : ISOLATED;
    if (path.startsWith('/web/')) {
      res.writeHead(200, { 'content-type': 'text/javascript', ...headers }).end(readFileSync(join(DIST, path.slice(5))));
    } else {
      res.writeHead(200, { 'content-type': 'text/html', ...headers }).end('<!doctype html><title>threads</title>');
    }
  });
  await new Promise((r) => http.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${http.address().port}`;
  browser = await launchChromium(join(work, 'profile'));
  page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
  await page.goto(`${origin}/isolated`);
});

after(async () => {
  await browser?.close();
  http?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

function compile(op, shape, config) {
  const out = join(work, `k${Math.random().toString(36).slice(2)}`);
  const args = ['compile', '--op', op, '--shape', shape, '--target', 'wasm', '--out', out];
  execFileSync(BIN, config ? [...args, '--config', JSON.stringify(config)] : [...args, '--default']);
  return { bytes: [...readFileSync(join(out, 'kernel.wasm'))], meta: JSON.parse(readFileSync(join(out, 'kernel.json'), 'utf8')) };
}

const BASE = { x0: 4, y0: 8, r0: 4, x1: 64, y1: 256, r1: 256, vectorize: 4 };
const CASES = [
  ['matmul', '37,13,29', { ...BASE, x1: 8, threads: 3, split: 'm' }],
  ['matmul', '1,67,97', { ...BASE, y1: 16, threads: 2, split: 'n' }],
  ['matmul', '61,130,41', { ...BASE, y1: 8, r1: 32, cache_read: true, threads: 4, split: 'n' }],
  ['batch_matmul', '5,7,11,13', { ...BASE, threads: 3, split: 'batch' }],
  ['matmul+bias+gelu', '17,31,64', { ...BASE, x1: 4, threads: 4, split: 'm' }],
  ['matmul+residual', '128,384,384', { ...BASE, x0: 6, x1: 12, y1: 64, r1: 128, cache_read: true, relaxed_simd: true, threads: 2, split: 'm' }],
];

/** Runs in the page: see the file's comment. */
async function runCase({ threaded, single, pool }) {
  const { ThreadPool, sharedImport } = await import('/web/webtune.js');
  const meta = threaded.meta;
  const [m, k, n, b] = meta.op.startsWith('batch') ? [meta.shape[1], meta.shape[2], meta.shape[3], meta.shape[0]] : [...meta.shape, 1];
  let s = 12345;
  const unit = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0), (s / 2 ** 32) * 2 - 1);
  const nonzero = () => (unit() >= 0 ? 0.25 : -0.25) + unit() * 0.75;
  const GUARD = 16, GUARD_WORD = 0x7fc06a4d, POISON = 0x7fc0dead;
  const specs = meta.args.map((a) => a.shape.reduce((x, y) => x * y, 1));
  const offsets = [];
  let at = GUARD * 4;
  for (const e of specs) {
    offsets.push(at);
    at = Math.ceil((at + e * 4) / 16) * 16 + GUARD * 4;
  }
  const scratch = at, scratchBytes = meta.scratch_bytes ?? 0, end = scratch + scratchBytes + GUARD * 4;
  const pages = Math.max(Math.ceil(end / 65536), meta.memory_pages_min ?? 0, 1);
  const memory = new WebAssembly.Memory({ initial: pages, maximum: 65536, shared: true });
  const u32 = new Uint32Array(memory.buffer);
  u32.fill(GUARD_WORD);
  const f32 = new Float32Array(memory.buffer);
  const inputs = specs.slice(0, -1).map((e, i) => {
    const v = Float32Array.from({ length: e }, nonzero);
    f32.set(v, offsets[i] / 4);
    return v;
  });
  const outAt = offsets[offsets.length - 1] / 4, outLen = specs[specs.length - 1];
  const params = scratchBytes ? [...offsets, scratch] : offsets;
  const poison = () => u32.fill(POISON, outAt, outAt + outLen);
  const out = () => u32.slice(outAt, outAt + outLen);

  const tp = new ThreadPool(pool);
  const mod = await WebAssembly.compile(new Uint8Array(threaded.bytes));
  const inst = await WebAssembly.instantiate(mod, { env: { memory } });
  poison();
  inst.exports.kernel(...params);
  const whole = out();
  const pk = tp.prepare(mod, memory, inst);
  await pk.ready;
  let mismatches = 0, runs = 0;
  for (let r = 0; r < 25; r++, runs++) {
    poison();
    tp.run(pk, params, meta.threads);
    const got = out();
    if (got.some((w, i) => w !== whole[i])) mismatches++;
  }
  const stats = { ...tp.stats };
  tp.close();

  // The single-threaded kernel of the op, its import made shared.
  const smod = await WebAssembly.compile(sharedImport(new Uint8Array(single.bytes)));
  const sinst = await WebAssembly.instantiate(smod, { env: { memory } });
  poison();
  const sparams = single.meta.scratch_bytes ? [...offsets, scratch] : offsets;
  sinst.exports.kernel(...sparams);
  const singleOut = new Float32Array(out().buffer);

  // f64 reference, with the epilogue.
  const [A, B] = inputs;
  const hasBias = meta.op.includes('bias'), gelu = meta.op.includes('gelu'), res = meta.op.includes('residual');
  const bias = hasBias ? inputs[2] : null, R = res ? inputs[hasBias ? 3 : 2] : null;
  const erf = (x) => {
    // Abramowitz–Stegun 7.1.26 is too coarse for this; use a series/continued form in f64.
    const t = 1 / (1 + 0.5 * Math.abs(x));
    const y = 1 - t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    return x >= 0 ? y : -y;
  };
  let worst = 0;
  const wholeF = new Float32Array(whole.buffer);
  for (let bi = 0; bi < b; bi++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let acc = 0, mag = 0;
        for (let kk = 0; kk < k; kk++) {
          const p = A[bi * m * k + i * k + kk] * B[bi * k * n + kk * n + j];
          acc += p;
          mag += Math.abs(p);
        }
        if (bias) (acc += bias[j]), (mag += Math.abs(bias[j]));
        if (gelu) acc = 0.5 * acc * (1 + erf(acc / Math.SQRT2));
        const idx = bi * m * n + i * n + j;
        if (R) (acc += R[idx]), (mag += Math.abs(R[idx]));
        for (const got of [wholeF[idx], singleOut[idx]]) {
          const e = Number.isFinite(got) ? Math.abs(got - acc) / Math.max(mag, 1e-30) : Infinity;
          worst = Math.max(worst, e);
        }
      }

  const damage = [];
  for (let i = 0; i < offsets.length; i++) {
    const before = offsets[i] / 4 - GUARD, after = Math.ceil((offsets[i] + specs[i] * 4) / 16) * 4;
    if (u32.subarray(before, before + GUARD).some((w) => w !== GUARD_WORD)) damage.push(`guard before argument ${i}`);
    if (u32.subarray(after, after + GUARD).some((w) => w !== GUARD_WORD)) damage.push(`guard after argument ${i}`);
    if (i < inputs.length && f32.subarray(offsets[i] / 4, offsets[i] / 4 + specs[i]).some((v, j) => v !== inputs[i][j])) damage.push(`input ${i} changed`);
  }
  const tail = (scratch + scratchBytes) / 4;
  if (u32.subarray(tail, tail + GUARD).some((w) => w !== GUARD_WORD)) damage.push('guard after the scratch area');
  return { mismatches, runs, worst, damage, isolated: crossOriginIsolated, stats };
}

for (const [op, shape, config] of CASES) {
  test(`${op} ${shape}: ${config.threads} parts along ${config.split} on a pool of 3`, async () => {
    const threaded = compile(op, shape, config);
    assert.equal(threaded.meta.abi, 2);
    const { threads: _t, split: _s, ...one } = config;
    const single = compile(op, shape, one);
    assert.equal(single.meta.abi, 1);
    const r = await page.evaluate(runCase, { threaded, single, pool: 3 });
    assert.ok(r.isolated, 'the test page must be cross-origin isolated');
    assert.equal(r.mismatches, 0, `${r.mismatches} of ${r.runs} pooled runs differ from the one-thread kernel`);
    assert.ok(r.worst < 1e-5, `max relative error ${r.worst} against the f64 reference`);
    assert.deepEqual(r.damage, []);
    assert.equal(r.stats.parts, r.runs * config.threads);
    // The largest kernel's parts take long enough that the workers, awake
    // and holding its instance, must have run some of them.
    if (shape === '128,384,384') assert.ok(r.stats.callerParts < r.stats.parts, `the caller ran all ${r.stats.parts} parts itself`);
  });
}

test('a page that is not cross-origin isolated gets no threads, says why, and still runs kernels', async () => {
  const plain = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
  await plain.goto(`${origin}/plain`);
  const single = compile('matmul', '8,8,8', null);
  const r = await plain.evaluate(async (single) => {
    const { threadSupport } = await import('/plain/../web/webtune.js');
    const memory = new WebAssembly.Memory({ initial: 1 });
    const f = new Float32Array(memory.buffer);
    f.fill(1, 0, 128);
    const { instance } = await WebAssembly.instantiate(new Uint8Array(single.bytes), { env: { memory } });
    instance.exports.kernel(0, 256, 512);
    return { support: threadSupport(), c: f[128], isolated: crossOriginIsolated };
  }, single);
  await plain.close();
  assert.equal(r.isolated, false);
  assert.equal(r.support.ok, false);
  assert.match(r.support.why, /cross-origin isolated/);
  assert.equal(r.c, 8);
});

test('kernels prepared one after another, with idle gaps, are all ready at once (no lost wake-up)', async () => {
  const threaded = compile('matmul', '16,16,16', { ...BASE, x1: 4, threads: 2, split: 'm' });
  const r = await page.evaluate(async ({ threaded }) => {
    const { ThreadPool } = await import('/web/webtune.js');
    const tp = new ThreadPool(3);
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
    const mod = await WebAssembly.compile(new Uint8Array(threaded.bytes));
    let slowest = 0;
    for (let i = 0; i < 150; i++) {
      // Gaps around the workers' spin time, so that some messages arrive as
      // a worker goes from spinning to sleeping.
      await new Promise((res) => setTimeout(res, i % 3));
      const t = performance.now();
      const inst = await WebAssembly.instantiate(mod, { env: { memory } });
      const k = tp.prepare(mod, memory, inst);
      await k.ready;
      tp.run(k, [0, 1024, 2048], 2);
      slowest = Math.max(slowest, performance.now() - t);
    }
    tp.close();
    return { slowest };
  }, { threaded });
  // `ready` gives up after 5 s; a lost wake-up would show as one that long.
  assert.ok(r.slowest < 2000, `a kernel took ${r.slowest.toFixed(0)} ms to become ready`);
});
