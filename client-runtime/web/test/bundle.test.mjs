// Static bundles in the runtime (src/bundle.ts): lookups with the server's
// fallback rule (device key → arch → vendor → portable default, winners
// with more threads than the key allows skipped), and every file checked
// against its SHA-256: bundle.json against SHA256SUMS, kernels against
// their names. The bundle is served from memory by a fake fetch.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { load } from './load.mjs';

const { KernelBundle, keysOf, maxThreadsOf } = await load('src/bundle.ts');

const sha = (b) => createHash('sha256').update(b).digest('hex');
const KEY = 'cpu-x86/relaxed-simd/linux-8t.mt-v8/-';
const OP = 'matmul', SHAPE = [16, 32, 24], S = '16,32,24';

/** Kernel bytes, and a winner or default entry for them. */
function kernel(text, extra = {}) {
  const bytes = Buffer.from(text);
  const h = sha(bytes);
  return { bytes, sha: h, meta: { abi: 1, op: OP, shape: SHAPE, target: 'wasm', config: {}, args: [], flops: 1, sha256: h, entry: 'kernel', ...extra } };
}

function winner(k, level, level_key) {
  return {
    op: OP, shape: S, target: 'wasm', level, level_key, space_checksum: 'c0ffee', kernel_sha256: k.sha,
    votes: 5, total_votes: 9, reports: 2, best_median_us: 12.5, updated_at: 1, meta: k.meta,
  };
}

const dev = kernel('device kernel');
const devThreaded = kernel('threaded device kernel', { abi: 2, threads: 4 });
const arch = kernel('arch kernel');
const vendor = kernel('vendor kernel');
const dflt = kernel('default kernel');

/** Files of a bundle: bundle.json (from `manifest`), kernels, SHA256SUMS. */
function files(manifest, kernels, { sums } = {}) {
  const text = JSON.stringify(manifest, null, 2) + '\n';
  const f = new Map([['bundle.json', Buffer.from(text)]]);
  for (const k of kernels) f.set(`kernels/${k.sha}.wasm`, k.bytes);
  f.set('SHA256SUMS', Buffer.from(sums ?? [...f].map(([n, b]) => `${sha(b)}  ${n}\n`).join('')));
  return f;
}

function fetcher(f, base = 'https://cdn.example/b/') {
  return async (url) => {
    const name = url.startsWith(base) ? url.slice(base.length) : null;
    const body = name !== null ? f.get(name) : undefined;
    return body === undefined ? new Response('not found', { status: 404 }) : new Response(body);
  };
}

const MANIFEST = {
  format: 1,
  created_at: 1,
  covers: [{ op: OP, shape: S, target: 'wasm' }],
  winners: [
    winner(devThreaded, 'device', KEY),
    winner(arch, 'arch', 'cpu-x86/relaxed-simd'),
    winner(vendor, 'vendor', 'cpu-x86'),
    winner(dev, 'device', 'cpu-x86/relaxed-simd/linux-2t-v8/-'),
  ],
  defaults: [{ op: OP, shape: S, target: 'wasm', kernel_sha256: dflt.sha, meta: dflt.meta }],
};
const ALL = [dev, devThreaded, arch, vendor, dflt];

test('keys and thread limits come from a device key as the server derives them', () => {
  assert.deepEqual(keysOf(KEY), { device_key: KEY, arch_key: 'cpu-x86/relaxed-simd', vendor_key: 'cpu-x86' });
  assert.equal(keysOf('gpu-nvidia/hopper'), null);
  assert.equal(keysOf('a//b/c'), null);
  assert.equal(maxThreadsOf(KEY), 8);
  assert.equal(maxThreadsOf('cpu-x86/relaxed-simd/linux-64t.mt-v8/-'), 16);
  assert.equal(maxThreadsOf('cpu-x86/relaxed-simd/linux-8t-v8/-'), 1);
  assert.equal(maxThreadsOf('gpu-nvidia/hopper/h100/-'), 1);
});

test('lookups fall back device → arch → vendor → default, skipping kernels with too many threads', async () => {
  const b = await KernelBundle.open('https://cdn.example/b', fetcher(files(MANIFEST, ALL)));
  const best = (key, threads) => b.best(key ? keysOf(key) : null, OP, SHAPE, 'wasm', threads);
  // The device's own winner is threaded: it answers a pool of 8, not one thread.
  let r = best(KEY, 8);
  assert.equal(r.level, 'device');
  assert.equal(r.meta.sha256, devThreaded.sha);
  assert.equal(r.url, `https://cdn.example/b/kernels/${devThreaded.sha}.wasm`);
  r = best(KEY, 1);
  assert.equal(r.level, 'arch');
  assert.equal(r.meta.sha256, arch.sha);
  assert.equal(best('cpu-x86/relaxed-simd/linux-2t-v8/-', 1).meta.sha256, dev.sha);
  assert.equal(best('cpu-x86/simd128/linux-2t-v8/-', 1).level, 'vendor');
  const d = best('cpu-arm/relaxed-simd/android-8t-v8/-', 1);
  assert.equal(d.level, 'default');
  assert.equal(d.meta.sha256, dflt.sha);
  assert.equal(best(null, 1).level, 'default', 'no key known: the portable default');
  // Not covered: another shape, another target.
  assert.equal(b.best(keysOf(KEY), OP, [16, 32, 25], 'wasm', 8), null);
  assert.equal(b.best(keysOf(KEY), OP, SHAPE, 'wgsl', 8), null);
  assert.ok(b.covers(OP, SHAPE, 'wasm'));
});

test('kernel bytes are used only when they hash to their name', async () => {
  const f = files(MANIFEST, ALL);
  const b = await KernelBundle.open('https://cdn.example/b/', fetcher(f));
  const got = await b.kernel(arch.sha, 'wasm');
  assert.deepEqual(Buffer.from(got), arch.bytes);
  // The host serves other bytes under the name (a truncated upload, a tampered CDN).
  f.set(`kernels/${arch.sha}.wasm`, arch.bytes.subarray(0, 5));
  await assert.rejects(b.kernel(arch.sha, 'wasm'), /SHA-256 is [0-9a-f]{64}: truncated or altered, refused/);
  f.delete(`kernels/${vendor.sha}.wasm`);
  await assert.rejects(b.kernel(vendor.sha, 'wasm'), /HTTP 404/);
});

test('a manifest that does not match SHA256SUMS, or of another format, is refused', async () => {
  // Cut short after the sums were written.
  const f = files(MANIFEST, ALL);
  f.set('bundle.json', f.get('bundle.json').subarray(0, 100));
  await assert.rejects(KernelBundle.open('https://cdn.example/b/', fetcher(f)), /bundle\.json: SHA-256 is .* SHA256SUMS says .*truncated or altered/);
  // Edited (a winner moved to another kernel) without fixing the sums.
  const g = files(MANIFEST, ALL);
  g.set('bundle.json', Buffer.from(g.get('bundle.json').toString().replace(arch.sha, dev.sha)));
  await assert.rejects(KernelBundle.open('https://cdn.example/b/', fetcher(g)), /truncated or altered/);
  // A later format, its sums consistent.
  await assert.rejects(KernelBundle.open('https://cdn.example/b/', fetcher(files({ ...MANIFEST, format: 2 }, ALL))), /bundle format 2 is not one this runtime reads/);
  // No sums for the manifest; no sums at all.
  await assert.rejects(KernelBundle.open('https://cdn.example/b/', fetcher(files(MANIFEST, ALL, { sums: '' }))), /does not list bundle\.json/);
  const h = files(MANIFEST, ALL);
  h.delete('SHA256SUMS');
  await assert.rejects(KernelBundle.open('https://cdn.example/b/', fetcher(h)), /SHA256SUMS: HTTP 404/);
});
