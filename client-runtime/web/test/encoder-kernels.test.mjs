// The sentence encoder's fixed Wasm kernels (src/encoder-kernels.wat, the
// bytes build.mjs embeds) in Node's V8 against f64 references, on seeded
// non-zero random inputs, every output poisoned with NaN first.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assembleKernels } from '../assemble.mjs';

const memory = new WebAssembly.Memory({ initial: 256 });
const { instance: { exports: k } } = await WebAssembly.instantiate(await assembleKernels(), { env: { memory } });

// mulberry32, uniform in [-1, 1) with magnitude at least 1/64.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296 * 2 - 1;
    return Math.abs(u) < 1 / 64 ? (u < 0 ? -1 / 64 : 1 / 64) : u;
  };
}

// A bump allocator over the shared memory (64-byte aligned).
let top = 0;
function alloc(n, fill) {
  const off = top;
  top = Math.ceil((top + n * 4) / 64) * 64;
  const v = new Float32Array(memory.buffer, off, n);
  if (fill) for (let i = 0; i < n; i++) v[i] = fill();
  else v.fill(NaN);
  return { off, v };
}
function reset() {
  top = 0;
}

// Norm-scaled error: max |got - want| / max(1, max |want|).
function err(got, want) {
  let e = 0, m = 1;
  for (let i = 0; i < want.length; i++) {
    e = Math.max(e, Math.abs(got[i] - want[i]));
    m = Math.max(m, Math.abs(want[i]));
    if (Number.isNaN(got[i])) return Infinity;
  }
  return e / m;
}

function layerNorm64(row, gamma, beta, eps) {
  const h = row.length;
  let mean = 0;
  for (const x of row) mean += x;
  mean /= h;
  let v = 0;
  for (const x of row) v += (x - mean) ** 2;
  const inv = 1 / Math.sqrt(v / h + eps);
  return row.map((x, i) => (x - mean) * inv * gamma[i] + beta[i]);
}

test('exp is within a few f32 roundings of f64 Math', () => {
  reset();
  const n = 40000;
  const x = alloc(n), y = alloc(n);
  // exp over the softmax's range [-80, 0] (and a little above).
  for (let i = 0; i < n; i++) x.v[i] = -80 + 85 * i / n;
  k.exp(x.off, y.off, n);
  let rel = 0;
  for (let i = 0; i < n; i++) rel = Math.max(rel, Math.abs(y.v[i] - Math.exp(x.v[i])) / Math.exp(x.v[i]));
  console.log(`exp: max relative error ${rel.toExponential(2)} (f32 rounding ${2 ** -24})`);
  assert.ok(rel < 4e-7, `exp relative error ${rel}`);
});

test('embed: word + position + type rows, then layer norm', () => {
  reset();
  const r = rng(1), V = 50, P = 20, H = 24, S = 8, B = 3, n = B * S, eps = 1e-12;
  const word = alloc(V * H, r), pos = alloc(P * H, r), type = alloc(2 * H, r);
  const gamma = alloc(H, r), beta = alloc(H, r);
  const ids = new Int32Array(memory.buffer, alloc(n).off, n);
  for (let i = 0; i < n; i++) ids[i] = Math.floor((r() + 1) / 2 * V) % V;
  const out = alloc(n * H);
  k.embed(ids.byteOffset, word.off, pos.off, type.off, gamma.off, beta.off, out.off, n, S, H, eps);
  const want = [];
  for (let t = 0; t < n; t++) {
    const row = [];
    for (let j = 0; j < H; j++) row.push(word.v[ids[t] * H + j] + pos.v[(t % S) * H + j] + type.v[j]);
    want.push(...layerNorm64(row, gamma.v, beta.v, eps));
  }
  const e = err(out.v, want);
  assert.ok(e < 1e-5, `embed error ${e}`);
});

test('add_ln: LayerNorm(x + bias + residual), in place over the residual', () => {
  reset();
  const r = rng(2), rows = 7, H = 40, eps = 1e-5;
  const x = alloc(rows * H, r), bias = alloc(H, r), res = alloc(rows * H, r), gamma = alloc(H, r), beta = alloc(H, r);
  const want = [];
  for (let i = 0; i < rows; i++) {
    const row = [];
    for (let j = 0; j < H; j++) row.push(x.v[i * H + j] + bias.v[j] + res.v[i * H + j]);
    want.push(...layerNorm64(row, gamma.v, beta.v, eps));
  }
  k.add_ln(x.off, bias.off, res.off, gamma.off, beta.off, res.off, rows, H, eps);
  const e = err(res.v, want);
  assert.ok(e < 1e-5, `add_ln error ${e}`);
});

test('split_heads, softmax with the key mask, merge_heads', () => {
  reset();
  const r = rng(5), B = 3, S = 8, heads = 3, d = 8, H = heads * d, scale = 1 / Math.sqrt(d);
  const qkv = alloc(B * S * 3 * H, r), bias = alloc(3 * H, r);
  const q = alloc(B * heads * S * d), kt = alloc(B * heads * d * S), v = alloc(B * heads * S * d);
  k.split_heads(qkv.off, bias.off, q.off, kt.off, v.off, B, S, heads, d, scale);
  const wq = [], wk = [], wv = [];
  for (let b = 0; b < B; b++)
    for (let h = 0; h < heads; h++) {
      for (let s = 0; s < S; s++)
        for (let j = 0; j < d; j++) {
          const at = (c) => qkv.v[(b * S + s) * 3 * H + c * H + h * d + j] + bias.v[c * H + h * d + j];
          wq.push(at(0) * scale);
          wv.push(at(2));
        }
      for (let j = 0; j < d; j++) for (let s = 0; s < S; s++) wk.push(qkv.v[(b * S + s) * 3 * H + H + h * d + j] + bias.v[H + h * d + j]);
    }
  assert.ok(err(q.v, wq) < 1e-6 && err(kt.v, wk) < 1e-6 && err(v.v, wv) < 1e-6, 'split_heads');

  // Softmax: text 0 has 5 real tokens of 8 (a tail after a whole vector),
  // text 1 all 8, text 2 none (a padded batch slot: zeros).
  const lens = new Int32Array(memory.buffer, alloc(B).off, B);
  lens.set([5, 8, 0]);
  const p = alloc(B * heads * S * S, () => 8 * r());
  const want = [];
  for (let bh = 0; bh < B * heads; bh++)
    for (let i = 0; i < S; i++) {
      const row = Array.from(p.v.subarray((bh * S + i) * S, (bh * S + i + 1) * S));
      const len = lens[Math.floor(bh / heads)];
      const m = Math.max(...row.slice(0, len));
      const e = row.map((x, j) => (j < len ? Math.exp(x - m) : 0));
      const sum = e.reduce((a, b) => a + b, 0);
      want.push(...e.map((x) => (len ? x / sum : 0)));
    }
  // The kernel leaves rows unnormalised, with 1 / sum in inv: their product is the softmax.
  const inv = alloc(B * heads * S);
  // softmax_part over any number of parts, run in any order, does exactly
  // what softmax does (the thread pool runs the parts on several threads).
  const p0 = Float32Array.from(p.v);
  const whole = (() => {
    k.softmax(p.off, B, heads, S, lens.byteOffset, inv.off);
    return [Float32Array.from(p.v), Float32Array.from(inv.v)];
  })();
  for (const parts of [2, 3, 4, 9]) {
    p.v.set(p0);
    inv.v.fill(NaN);
    for (const part of [...Array(parts).keys()].reverse()) k.softmax_part(p.off, B, heads, S, lens.byteOffset, inv.off, parts, part);
    assert.deepEqual([Array.from(p.v), Array.from(inv.v)], whole.map((a) => Array.from(a)), `softmax_part in ${parts} parts`);
  }
  const got = Array.from(p.v, (x, i) => x * inv.v[Math.floor(i / S)]);
  assert.ok(err(got, want) < 1e-6, `softmax error ${err(got, want)}`);
  for (let i = 0; i < want.length; i++) if (want[i] === 0) assert.equal(p.v[i], 0, 'a padded key is exactly 0');

  // merge_heads scales each row of P·V by its inv.
  const ctx = alloc(B * heads * S * d, r), out = alloc(B * S * H);
  k.merge_heads(ctx.off, inv.off, out.off, B, S, heads, d);
  const wm = [];
  for (let b = 0; b < B; b++)
    for (let s = 0; s < S; s++)
      for (let h = 0; h < heads; h++) for (let j = 0; j < d; j++) wm.push(ctx.v[((b * heads + h) * S + s) * d + j] * inv.v[(b * heads + h) * S + s]);
  assert.deepEqual(Array.from(out.v), wm.map(Math.fround));
});

test('pool: mean over real tokens, then L2 normalisation', () => {
  reset();
  const r = rng(6), B = 3, S = 5, H = 16;
  const x = alloc(B * S * H, r);
  const lens = new Int32Array(memory.buffer, alloc(B).off, B);
  lens.set([5, 2, 1]);
  const out = alloc(B * H);
  k.pool(x.off, lens.byteOffset, out.off, B, S, H, 1);
  const want = [];
  for (let b = 0; b < B; b++) {
    const m = new Array(H).fill(0);
    for (let s = 0; s < lens[b]; s++) for (let j = 0; j < H; j++) m[j] += x.v[(b * S + s) * H + j] / lens[b];
    const norm = Math.hypot(...m);
    want.push(...m.map((v) => v / norm));
  }
  assert.ok(err(out.v, want) < 1e-6, `pool error ${err(out.v, want)}`);
});

// quant_rows in f64 terms: scale = fround(max |x| / qmax), q = round half
// to even of fround(x · fround(qmax / max |x|)), clamped to ±qmax; a row of
// zeros: scale 0, q 0.
function quantRow64(row, qmax) {
  const mx = Math.max(...row.map(Math.abs));
  const scale = Math.fround(mx / qmax);
  const inv = Math.fround(qmax / mx);
  const q = row.map((x) => {
    if (mx === 0) return 0;
    const v = Math.fround(x * inv);
    let r = Math.round(v);
    if (Math.abs(v % 1) === 0.5) r = 2 * Math.round(v / 2);
    return Math.max(-qmax, Math.min(qmax, r));
  });
  return { scale, q };
}

test('quant_rows: per-row i16 scales and round-half-even values, packed in pairs', () => {
  for (const [rows, K, qmax, seed] of [[5, 384, 2047, 7], [3, 1536, 1023, 8], [4, 22, 32767, 9], [2, 2, 5, 10], [6, 30, 127, 11]]) {
    reset();
    const r = rng(seed);
    // Rows of different magnitudes, and row 1 all zeros.
    const x = alloc(rows * K, r);
    for (let i = 0; i < rows; i++) for (let j = 0; j < K; j++) x.v[i * K + j] *= i === 1 ? 0 : 10 ** (i - 2);
    const q = new Uint32Array(memory.buffer, alloc(rows * K / 2).off, rows * K / 2);
    q.fill(0xdeadbeef);
    const scales = alloc(rows);
    k.quant_rows(x.off, rows, K, qmax, q.byteOffset, scales.off);
    for (let i = 0; i < rows; i++) {
      const want = quantRow64(Array.from(x.v.subarray(i * K, (i + 1) * K)), qmax);
      assert.equal(scales.v[i], want.scale, `${rows}x${K} qmax ${qmax}: scale of row ${i}`);
      for (let j = 0; j < K; j++) {
        const w = q[i * K / 2 + (j >> 1)];
        const got = j & 1 ? w >> 16 : (w << 16) >> 16;
        assert.equal(got, want.q[j], `${rows}x${K} qmax ${qmax}: q[${i}][${j}] of x ${x.v[i * K + j]}`);
      }
      if (i !== 1) assert.ok(want.q.some((v) => Math.abs(v) === qmax), 'the largest value maps to ±qmax');
      else assert.equal(scales.v[i], 0);
    }
  }
  // Ties go to even, both signs: max 4 over qmax 4 makes the scale 1.
  reset();
  const ties = [4, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -4, 0.25, 1, -3.5, 0, 2, 0.75, -1];
  const x = alloc(ties.length);
  x.v.set(ties);
  const q = new Uint32Array(memory.buffer, alloc(ties.length / 2).off, ties.length / 2);
  const scales = alloc(1);
  k.quant_rows(x.off, 1, ties.length, 4, q.byteOffset, scales.off);
  const got = Array.from({ length: ties.length }, (_, j) => (j & 1 ? q[j >> 1] >> 16 : (q[j >> 1] << 16) >> 16));
  assert.deepEqual(got, [4, 0, 2, 2, 0, -2, -2, 4, -4, 0, 1, -4, 0, 2, 1, -1]);
  assert.equal(scales.v[0], 1);
});

test('weights at load (quant.ts) follow the same rule as quant_rows, per column; every i16 sum fits in i32', async () => {
  const { load } = await import('./load.mjs');
  const quant = await load('src/quant.ts');
  assert.deepEqual([quant.qmaxW(384), quant.qmaxA(384), quant.qmaxW(1536), quant.qmaxA(1536)], [2047, 2732, 1023, 1366]);
  for (const K of [2, 8, 384, 768, 1536, 3072, 4096]) {
    assert.ok(quant.qmaxA(K) * quant.qmaxW(K) * K < 2 ** 31 && quant.qmaxA(K) <= 32767 && quant.qmaxW(K) <= 32767, `K = ${K}`);
  }
  reset();
  const r = rng(12), K = 46, N = 12;
  const w = Float32Array.from({ length: K * N }, r);
  for (let kk = 0; kk < K; kk++) w[kk * N + 5] = 0; // a column of zeros
  const words = new Uint32Array(K / 2 * N).fill(0xdeadbeef), scales = new Float32Array(N).fill(NaN);
  quant.quantizeColumns(w, K, N, 1023, words, scales);
  // quant_rows on Wᵀ: the same scales and q.
  const wt = alloc(N * K);
  for (let kk = 0; kk < K; kk++) for (let j = 0; j < N; j++) wt.v[j * K + kk] = w[kk * N + j];
  const q = new Uint32Array(memory.buffer, alloc(N * K / 2).off, N * K / 2);
  const s = alloc(N);
  k.quant_rows(wt.off, N, K, 1023, q.byteOffset, s.off);
  assert.deepEqual(Array.from(scales), Array.from(s.v));
  assert.equal(scales[5], 0);
  const half = (x, hi) => (hi ? x >> 16 : (x << 16) >> 16);
  for (let kk = 0; kk < K; kk++)
    for (let j = 0; j < N; j++) assert.equal(half(words[(kk >> 1) * N + j], kk & 1), half(q[j * K / 2 + (kk >> 1)], kk & 1), `q[${kk}][${j}]`);
  for (const [v, want] of [[2.5, 2], [3.5, 4], [-2.5, -2], [-3.5, -4], [0.5, 0], [-0.5, 0], [1.25, 1], [-1.75, -2]]) assert.equal(quant.roundHalfEven(v) + 0, want, `round(${v})`);
});

test('embed_q16: the int16 blob\'s word rows (quantizeRows, qmax 32767) dequantised, then embed bit for bit', async () => {
  const { load } = await import('./load.mjs');
  const quant = await load('src/quant.ts');
  reset();
  const r = rng(13), V = 50, P = 20, H = 24, S = 8, B = 3, n = B * S, eps = 1e-12;
  // Rows of different magnitudes; row 7 all zeros (scale 0, q 0).
  const word32 = Float32Array.from({ length: V * H }, (_, i) => r() * 10 ** ((Math.floor(i / H) % 5) - 2));
  word32.fill(0, 7 * H, 8 * H);
  const wordq = new Uint32Array(memory.buffer, alloc(V * H / 2).off, V * H / 2);
  wordq.fill(0xdeadbeef);
  const wordscale = alloc(V);
  quant.quantizeRows(word32, V, H, 32767, wordq, wordscale.v);
  assert.equal(wordscale.v[7], 0);
  // The row rule is quant_rows' (the run-time activations'), bit for bit.
  const x = alloc(V * H);
  x.v.set(word32);
  const q2 = new Uint32Array(memory.buffer, alloc(V * H / 2).off, V * H / 2), s2 = alloc(V);
  k.quant_rows(x.off, V, H, 32767, q2.byteOffset, s2.off);
  assert.deepEqual(Array.from(wordq), Array.from(q2), 'quantizeRows and quant_rows: the same words');
  assert.deepEqual(Array.from(wordscale.v), Array.from(s2.v), 'quantizeRows and quant_rows: the same scales');
  // The table the kernel should read: f32(q) · scale.
  const deq = alloc(V * H);
  for (let i = 0; i < V; i++)
    for (let j = 0; j < H; j++) {
      const w = wordq[i * H / 2 + (j >> 1)];
      deq.v[i * H + j] = Math.fround((j & 1 ? w >> 16 : (w << 16) >> 16) * wordscale.v[i]);
    }
  const pos = alloc(P * H, r), type = alloc(2 * H, r), gamma = alloc(H, r), beta = alloc(H, r);
  const ids = new Int32Array(memory.buffer, alloc(n).off, n);
  for (let i = 0; i < n; i++) ids[i] = Math.floor((r() + 1) / 2 * V) % V;
  ids[3] = 7;
  ids[n - 1] = V - 1;
  const out = alloc(n * H), out32 = alloc(n * H);
  k.embed_q16(ids.byteOffset, wordq.byteOffset, wordscale.off, pos.off, type.off, gamma.off, beta.off, out.off, n, S, H, eps);
  k.embed(ids.byteOffset, deq.off, pos.off, type.off, gamma.off, beta.off, out32.off, n, S, H, eps);
  assert.deepEqual(Array.from(out.v), Array.from(out32.v), 'embed_q16 on q = embed on the dequantised table');
  // Against f64 on the dequantised table, and on the unquantised one
  // (the quantisation error: at most half a step of 1/32767 of a row's max).
  const want = (table) => {
    const w = [];
    for (let t = 0; t < n; t++) {
      const row = [];
      for (let j = 0; j < H; j++) row.push(table[ids[t] * H + j] + pos.v[(t % S) * H + j] + type.v[j]);
      w.push(...layerNorm64(row, gamma.v, beta.v, eps));
    }
    return w;
  };
  const e = err(out.v, want(deq.v)), e0 = err(out.v, want(word32));
  console.log(`embed_q16: error ${e.toExponential(2)} against f64 on the dequantised table, ${e0.toExponential(2)} against the f32 table`);
  assert.ok(e < 1e-5, `embed_q16 error ${e}`);
  assert.ok(e0 < 1e-4, `embed_q16 error against the unquantised table ${e0}`);
});

test('quantizeRows is quantizeColumns on the transpose (the int16 blob\'s two layouts, one rule)', async () => {
  const { load } = await import('./load.mjs');
  const quant = await load('src/quant.ts');
  const r = rng(14), K = 10, N = 6;
  const w = Float32Array.from({ length: K * N }, r);
  for (let kk = 0; kk < K; kk++) w[kk * N + 2] = 0;
  const wt = new Float32Array(N * K);
  for (let kk = 0; kk < K; kk++) for (let j = 0; j < N; j++) wt[j * K + kk] = w[kk * N + j];
  const cw = new Uint32Array(K / 2 * N), cs = new Float32Array(N), rw = new Uint32Array(N * K / 2), rs = new Float32Array(N);
  quant.quantizeColumns(w, K, N, 32767, cw, cs);
  quant.quantizeRows(wt, N, K, 32767, rw, rs);
  assert.deepEqual(Array.from(rs), Array.from(cs));
  const half = (x, hi) => (hi ? x >> 16 : (x << 16) >> 16);
  for (let kk = 0; kk < K; kk++) for (let j = 0; j < N; j++) assert.equal(half(cw[(kk >> 1) * N + j], kk & 1), half(rw[j * K / 2 + (kk >> 1)], kk & 1));
});
