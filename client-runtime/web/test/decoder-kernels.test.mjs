// The text generator's Wasm side in Node's V8, without a server:
// - every fixed kernel of src/decoder-kernels.wat (the bytes build.mjs
//   embeds, which the native runner assembles too) against an f64 reference
//   written here, on seeded non-zero inputs, every output poisoned with NaN
//   first (and cache rows a kernel must not read poisoned too);
// - the sampler (src/sampler.ts) against the native Sampler's draws pinned in
//   test/golden/sampler.json;
// - the decoder graph's Wasm backend (src/decoder.ts) on a small random llama
//   whose products run on JS kernels here, against an f64 forward pass
//   written from the architecture (not from the graph): prefill in one run,
//   in chunks, and token by token give the reference's logits, and decoding
//   never grows the memory.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { assembleKernels } from '../assemble.mjs';
import { load } from './load.mjs';
import { D, jsKernels, llama64, llamaGraph, llamaModel, q4Table, q8Table, rng, silu } from './small-llama.mjs';

const fixedBytes = await assembleKernels('decoder-kernels.wat');
const memory = new WebAssembly.Memory({ initial: 256 });
const { instance: { exports: k } } = await WebAssembly.instantiate(fixedBytes, { env: { memory } });

// A bump allocator over the kernels' memory (64-byte aligned); NaN unless filled.
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

// Norm-scaled error: max |got - want| / max(1, max |want|); NaN anywhere is infinite.
function err(got, want) {
  let e = 0, m = 1;
  for (let i = 0; i < want.length; i++) {
    if (Number.isNaN(got[i])) return Infinity;
    e = Math.max(e, Math.abs(got[i] - want[i]));
    m = Math.max(m, Math.abs(want[i]));
  }
  return e / m;
}


test('exp is within a few f32 roundings of f64 Math', () => {
  reset();
  const n = 4000, x = alloc(n), y = alloc(n);
  for (let i = 0; i < n; i++) x.v[i] = -80 + 85 * i / n;
  k.exp(x.off, y.off, n);
  let rel = 0;
  for (let i = 0; i < n; i++) rel = Math.max(rel, Math.abs(y.v[i] - Math.exp(x.v[i])) / Math.exp(x.v[i]));
  assert.ok(rel < 4e-7, `exp relative error ${rel}`);
});

test('rmsnorm: x / rms(x) ⊙ w per row, into another buffer and in place', () => {
  reset();
  const r = rng(11), rows = 5, H = 64, eps = 1e-5;
  const x = alloc(rows * H, () => 3 * r()), w = alloc(H, r), out = alloc(rows * H);
  const want = [];
  for (let i = 0; i < rows; i++) {
    const row = Array.from(x.v.subarray(i * H, (i + 1) * H));
    const inv = 1 / Math.sqrt(row.reduce((a, b) => a + b * b, 0) / H + Math.fround(eps));
    want.push(...row.map((v, j) => v * inv * w.v[j]));
  }
  k.rmsnorm(x.off, w.off, out.off, rows, H, eps);
  assert.ok(err(out.v, want) < 1e-6, `rmsnorm error ${err(out.v, want)}`);
  k.rmsnorm(x.off, w.off, x.off, rows, H, eps);
  assert.ok(err(x.v, want) < 1e-6, `rmsnorm in place error ${err(x.v, want)}`);
  // rows = 0 writes nothing.
  const none = alloc(H);
  k.rmsnorm(w.off, w.off, none.off, 0, H, eps);
  assert.ok(none.v.every(Number.isNaN));
});

// The executor's rotary table: per position, hd/2 pairs (cos, sin) of pos·θ^(−2i/hd), f64 rounded once.
function ropeTable(positions, hd, theta) {
  const t = alloc(positions * hd);
  for (let p = 0; p < positions; p++)
    for (let i = 0; i < hd / 2; i++) {
      const a = p * Math.pow(theta, -2 * i / hd);
      t.v[p * hd + 2 * i] = Math.cos(a);
      t.v[p * hd + 2 * i + 1] = Math.sin(a);
    }
  return t;
}

test('rope: adjacent pairs of the first heads turn by pos·θ^(−2i/d), at several positions; other columns untouched', () => {
  reset();
  const r = rng(12), hd = 16, heads = 3, stride = 4 * hd + 8, theta = 10000, rows = 3;
  const table = ropeTable(1100, hd, theta);
  for (const pos0 of [0, 5, 1000]) {
    const x = alloc(rows * stride, r), x0 = Float32Array.from(x.v);
    k.rope(x.off, rows, stride, heads, hd, table.off, pos0);
    const want = Array.from(x0);
    for (let row = 0; row < rows; row++)
      for (let h = 0; h < heads; h++)
        for (let i = 0; i < hd / 2; i++) {
          const a = (pos0 + row) * Math.pow(theta, -2 * i / hd), c = Math.cos(a), s = Math.sin(a);
          const at = row * stride + h * hd + 2 * i, u = x0[at], v = x0[at + 1];
          want[at] = u * c - v * s;
          want[at + 1] = v * c + u * s;
        }
    const e = err(x.v, want);
    // The table's cos and sin are f32: angles of ~1000 rad round to a few 1e-8.
    assert.ok(e < 1e-6, `rope at pos0 ${pos0}: error ${e}`);
    for (let row = 0; row < rows; row++)
      for (let j = heads * hd; j < stride; j++) assert.equal(x.v[row * stride + j], x0[row * stride + j], 'a column past the rotated heads');
  }
});

test('kv_store: key and value columns of each row into cache rows pos0 + r, nothing else', () => {
  reset();
  const r = rng(13), rows = 3, stride = 48, kcol = 16, vcol = 32, width = 16, pos0 = 2, ctx = 8;
  const x = alloc(rows * stride, r), kc = alloc(ctx * width), vc = alloc(ctx * width);
  k.kv_store(x.off, rows, stride, kcol, vcol, width, kc.off, vc.off, pos0);
  for (let p = 0; p < ctx; p++)
    for (let j = 0; j < width; j++) {
      const row = p - pos0;
      if (row >= 0 && row < rows) {
        assert.equal(kc.v[p * width + j], x.v[row * stride + kcol + j]);
        assert.equal(vc.v[p * width + j], x.v[row * stride + vcol + j]);
      } else {
        assert.ok(Number.isNaN(kc.v[p * width + j]) && Number.isNaN(vc.v[p * width + j]), `cache row ${p} was written`);
      }
    }
});

// Causal GQA attention in f64: row r (position pos0 + r) over cache positions 0..=pos0+r.
function attention64(x, stride, rows, heads, kvh, hd, kc, vc, pos0, scale) {
  const out = [], group = heads / kvh, kvw = kvh * hd;
  for (let r = 0; r < rows; r++)
    for (let h = 0; h < heads; h++) {
      const n = pos0 + r + 1, g = Math.floor(h / group), s = [];
      for (let j = 0; j < n; j++) {
        let d = 0;
        for (let i = 0; i < hd; i++) d += x[r * stride + h * hd + i] * kc[j * kvw + g * hd + i];
        s.push(d * scale);
      }
      const m = Math.max(...s), e = s.map((v) => Math.exp(v - m)), sum = e.reduce((a, b) => a + b, 0);
      for (let i = 0; i < hd; i++) {
        let o = 0;
        for (let j = 0; j < n; j++) o += e[j] * vc[j * kvw + g * hd + i];
        out.push(o / sum);
      }
    }
  return out;
}

test('attention: causal grouped-query attention over the caches, at pos0 0 and later with several rows', () => {
  for (const [heads, kvh, hd, rows, pos0] of [[4, 2, 8, 1, 0], [4, 2, 8, 3, 5], [9, 3, 16, 4, 37], [2, 2, 4, 2, 0], [6, 1, 8, 5, 250]]) {
    reset();
    const r = rng(14 + pos0), stride = (heads + 2 * kvh) * hd, kvw = kvh * hd, n = pos0 + rows;
    const x = alloc(rows * stride, () => 2 * r());
    // Positions past n are poisoned: the kernel must not read them.
    const kc = alloc((n + 6) * kvw), vc = alloc((n + 6) * kvw);
    for (let i = 0; i < n * kvw; i++) {
      kc.v[i] = 2 * r();
      vc.v[i] = r();
    }
    const out = alloc(rows * heads * hd), scores = alloc((heads / kvh) * (n + 8));
    const scale = Math.fround(1 / Math.sqrt(hd));
    k.attention(x.off, rows, stride, heads, kvh, hd, kc.off, vc.off, pos0, scale, out.off, scores.off);
    const want = attention64(x.v, stride, rows, heads, kvh, hd, kc.v, vc.v, pos0, scale);
    const e = err(out.v, want);
    assert.ok(e < 2e-6, `attention ${heads}/${kvh} heads of ${hd}, ${rows} rows at pos0 ${pos0}: error ${e}`);
  }
});

test('swiglu: silu(gate) ⊙ up per row', () => {
  reset();
  const r = rng(15), rows = 3, f = 24;
  const x = alloc(rows * 2 * f, () => 6 * r()), out = alloc(rows * f);
  k.swiglu(x.off, rows, f, out.off);
  const want = [];
  for (let i = 0; i < rows; i++) for (let j = 0; j < f; j++) want.push(silu(x.v[i * 2 * f + j]) * x.v[i * 2 * f + f + j]);
  assert.ok(err(out.v, want) < 1e-6, `swiglu error ${err(out.v, want)}`);
});

test('add: x += y', () => {
  reset();
  const r = rng(16), n = 3 * 24;
  const x = alloc(n, r), y = alloc(n, r), x0 = Float32Array.from(x.v);
  k.add(x.off, y.off, n);
  assert.deepEqual(Array.from(x.v), Array.from(x0, (v, i) => Math.fround(v + y.v[i])));
});

function put(arr) {
  const n = Math.ceil(arr.byteLength / 4);
  const a = alloc(n);
  new Uint8Array(memory.buffer, a.off, arr.byteLength).set(new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength));
  return a.off;
}

test('embed_q8 / embed_q4 (q4_1 and q4_0) / embed_f32: rows of the table by id, dequantised', () => {
  const V = 10, H = 64, ids = [3, 0, 9, 3, 7];
  const check = (name, call, value) => {
    const idsAt = put(Int32Array.from(ids)), out = alloc(ids.length * H);
    call(idsAt, out.off);
    const want = [];
    for (const id of ids) for (let j = 0; j < H; j++) want.push(value(id, j));
    // q4: d·q + m in f32 (two roundings) against f64.
    const e = err(out.v, want);
    assert.ok(e < 1e-6, `${name}: error ${e}`);
  };
  reset();
  const r = rng(17);
  const q8 = q8Table(r, V, H), q8w = put(q8.q), q8d = put(q8.d);
  check('embed_q8', (ids, out) => k.embed_q8(ids, 5, q8w, q8d, H, out), q8.value);
  const q41 = q4Table(r, V, H, true), w41 = put(q41.w), d41 = put(q41.d), m41 = put(q41.m);
  check('embed_q4 (q4_1)', (ids, out) => k.embed_q4(ids, 5, w41, d41, m41, 1, H, out), q41.value);
  const q40 = q4Table(r, V, H, false), w40 = put(q40.w), d40 = put(q40.d);
  check('embed_q4 (q4_0)', (ids, out) => k.embed_q4(ids, 5, w40, d40, 0, 0, H, out), q40.value);
  // f32: stored transposed, [H][V].
  const t = Float32Array.from({ length: V * H }, r), tw = put(t);
  check('embed_f32', (ids, out) => k.embed_f32(ids, 5, tw, V, H, out), (n, kk) => t[kk * V + n]);
});

test('sampler: the native Sampler\'s draws (test/golden/sampler.json), bit for bit', async () => {
  const { Sampler, argmax } = await load('src/sampler.ts');
  const gold = JSON.parse(readFileSync(new URL('./golden/sampler.json', import.meta.url), 'utf8'));
  for (const u of gold.uniform) {
    const s = new Sampler({ temperature: 1, topK: 0, topP: 1, seed: BigInt(u.seed) });
    assert.deepEqual(Array.from({ length: u.draws.length }, () => s.uniform()), u.draws, `uniform draws of seed ${u.seed}`);
  }
  for (const c of gold.cases) {
    const logits = Float32Array.from(gold.logits[c.logits]);
    const s = new Sampler({ temperature: c.temperature, topK: c.top_k, topP: c.top_p, seed: BigInt(c.seed) });
    const ids = Array.from({ length: c.ids.length }, () => s.sample(logits));
    assert.deepEqual(ids, c.ids, `${c.logits}, temperature ${c.temperature}, top_k ${c.top_k}, top_p ${c.top_p}, seed ${c.seed}`);
  }
  assert.equal(argmax(Float32Array.from([0.1, 2, 1.9, -3, 2])), 1, 'greedy takes the first largest');
  // A number seed is the same u64 as its bigint.
  const a = new Sampler({ temperature: 1, topK: 0, topP: 1, seed: 42 }), b = new Sampler({ temperature: 1, topK: 0, topP: 1, seed: 42n });
  assert.equal(a.uniform(), b.uniform());
  assert.throws(() => new Sampler({ temperature: 1, topK: 0, topP: 1, seed: -1 }), /non-negative integer/);
  assert.throws(() => new Sampler({ temperature: 1, topK: 0, topP: 1, seed: 2n ** 64n }), /not a u64/);
});

test('streaming text: a character split over tokens is yielded whole, once; stop strings cut and are held back while partial', async () => {
  const { TextStream, StopFilter } = await load('src/text-generator.ts');
  // A byte-level vocabulary: id = one byte; decoding replaces an incomplete
  // sequence with U+FFFD, as the ByteLevel decoder does.
  const decode = (ids) => new TextDecoder().decode(Uint8Array.from(ids));
  const text = 'Paris é 東京 🎉! a\u00e9b';
  const bytes = [...new TextEncoder().encode(text)];
  const s = new TextStream(decode);
  const pieces = bytes.map((b) => s.push(b)).filter((p) => p);
  pieces.push(s.flush());
  assert.equal(pieces.join(''), text);
  assert.ok(pieces.every((p) => !p.includes('\uFFFD')), `a piece with U+FFFD: ${JSON.stringify(pieces)}`);
  assert.ok(pieces.includes('🎉'), 'the emoji comes out whole, after its fourth byte');
  // An invalid byte stays U+FFFD once later text shows it is not a prefix.
  const bad = new TextStream(decode);
  const got = [0x61, 0xff, 0x62].map((b) => bad.push(b)).join('') + bad.flush();
  assert.equal(got, 'a\uFFFDb');
  // A trailing incomplete character is flushed at the end as U+FFFD.
  const cut = new TextStream(decode);
  assert.equal([0x61, 0xe6, 0x9d].map((b) => cut.push(b)).join('') + cut.flush(), 'a\uFFFD');

  const run = (stops, parts) => {
    const f = new StopFilter(stops);
    const out = [];
    for (const p of parts) {
      const r = f.push(p);
      if (r.out) out.push(r.out);
      if (r.stopped) return { out, stopped: true };
    }
    out.push(f.flush());
    return { out: out.filter((x) => x), stopped: false };
  };
  assert.deepEqual(run(['\nUser:'], ['Hello', ' there', '\nUs', 'er:', ' more']), { out: ['Hello', ' there'], stopped: true });
  assert.deepEqual(run(['\nUser:'], ['a\nU', 'x']), { out: ['a', '\nUx'], stopped: false }, 'a partial stop string is released when it stops matching');
  assert.deepEqual(run(['END', 'STOP'], ['xxSTO', 'P and END']), { out: ['xx'], stopped: true });
  assert.deepEqual(run(['ab'], ['ab']), { out: [], stopped: true }, 'a stop string first: nothing is yielded');
  assert.deepEqual(run([], ['a', 'b']), { out: ['a', 'b'], stopped: false });
});

test("tokenizer.json's Digits splits at every Unicode number, as the Rust tokenizers crate does", async () => {
  const { adaptTokenizer } = await load('src/text-generator.ts');
  const { Tokenizer } = await import('@huggingface/tokenizers');
  const vocab = Object.fromEntries([...'abxy'].map((c, i) => [c, i]));
  const make = (pre) => new Tokenizer({ model: { type: 'BPE', vocab, merges: [] }, pre_tokenizer: pre, decoder: { type: 'ByteLevel' }, normalizer: null, post_processor: null, added_tokens: [] }, {});
  const pre = { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }] };
  const text = 'x½2٣y²12';
  assert.deepEqual(make(pre).pre_tokenizer.pre_tokenize(text), ['x½', '2', '٣y²', '1', '2'], 'the package alone: ASCII digits only');
  const json = { pre_tokenizer: structuredClone(pre) };
  adaptTokenizer(json);
  assert.deepEqual(make(json.pre_tokenizer).pre_tokenizer.pre_tokenize(text), ['x', '½', '2', '٣', 'y', '²', '1', '2']);
  const grouped = { pre_tokenizer: { type: 'Digits', individual_digits: false } };
  adaptTokenizer(grouped);
  assert.deepEqual(make(grouped.pre_tokenizer).pre_tokenizer.pre_tokenize(text), ['x', '½2٣', 'y', '²12']);
});

// ---------------------------------------------------------------------------
// The graph backend on a small llama.

test('decoder graph backend: a small llama in every weight format, prefill in one run, in chunks and token by token, against f64', { timeout: 120_000 }, async () => {
  const { GraphDecoder, productsOf, checkGraph } = await load('src/decoder.ts');
  const model = llamaModel(21);
  const graph = llamaGraph(model.formats, [1, 4, 8]);
  const ids = Array.from({ length: 21 }, (_, i) => (i * 37 + 5) % D.vocab);
  const want = llama64(model.values, ids);
  const calls = [];
  const dec = await GraphDecoder.create({ graph, tensors: model.tensors, weights: model.weights, context: 64, fixed: fixedBytes, shared: false });
  dec.setKernels(jsKernels(dec.memory, calls));
  const rel = (got, w) => {
    let e = 0, m = 0;
    for (let i = 0; i < w.length; i++) {
      if (Number.isNaN(got[i])) return Infinity;
      e = Math.max(e, Math.abs(got[i] - w[i]));
      m = Math.max(m, Math.abs(w[i]));
    }
    return e / m;
  };
  let worst = 0;
  // The whole prompt: chunks of 8, 8 and 5 (bucket 8).
  let got = await dec.feed(ids);
  worst = Math.max(worst, rel(got, want[20]));
  assert.equal(dec.position, 21);
  // Token by token.
  dec.reset();
  const bytes = dec.memoryBytes;
  for (let t = 0; t < ids.length; t++) {
    got = await dec.feed([ids[t]]);
    const e = rel(got, want[t]);
    worst = Math.max(worst, e);
    assert.ok(e < 1e-4, `token ${t} fed alone: error ${e}`);
  }
  assert.equal(dec.memoryBytes, bytes, 'decoding grew the memory');
  // A prefix of 3 (bucket 4, padded), then runs of 2 (bucket 4) and 1.
  dec.reset();
  await dec.feed(ids.slice(0, 3));
  got = await dec.feed(ids.slice(3, 5));
  worst = Math.max(worst, rel(got, want[4]));
  got = await dec.feed([ids[5]]);
  worst = Math.max(worst, rel(got, want[5]));
  console.log(`# small llama: worst logit error ${worst.toExponential(2)} relative to the largest logit`);
  assert.ok(worst < 1e-4, `worst error ${worst}`);
  // Kernels: every product of buckets 8, 1 and 4, once each; the head on one row.
  const wantCalls = [8, 1, 4].flatMap((m) => productsOf(graph, m).map((p) => `${p.op} ${p.shape.join(',')}`));
  assert.deepEqual([...new Set(calls)].sort(), [...new Set(wantCalls)].sort());
  assert.equal(calls.length, new Set(calls).size, 'a product\'s kernel was asked for twice (the head is in every bucket)');
  assert.ok(calls.includes('matmul_q8_0 1,64,72') && !calls.includes('matmul_q8_0 8,64,72'), 'the head runs on the last row only');

  // Refusals, one line each, before any kernel runs.
  dec.reset();
  await assert.rejects(dec.feed([]), /no tokens to feed/);
  await assert.rejects(dec.feed([D.vocab]), /token id 72 is outside the vocabulary of 72/);
  await dec.feed(Array(60).fill(1));
  await assert.rejects(dec.feed(Array(5).fill(1)), /60 positions used and 5 more tokens: past the context of 64/);
  await assert.rejects(GraphDecoder.create({ graph, tensors: model.tensors, weights: model.weights, context: 301, fixed: fixedBytes, shared: false }), /context 301 must be an integer from 1 to the model's 300/);
  const missing = model.tensors.filter((t) => t.name !== 'blk.1.ffn_down');
  assert.throws(() => checkGraph(graph, missing, model.weights.byteLength), /the bundle has no tensor `blk.1.ffn_down`/);
  const short = model.tensors.map((t) => (t.name === 'blk.0.attn_qkv' ? { ...t, parts: { ...t.parts, m: { ...t.parts.m, bytes: 64 } } } : t));
  assert.throws(() => checkGraph(graph, short, model.weights.byteLength), /tensor `blk.0.attn_qkv` part `m` has 64 bytes/);
  assert.throws(() => checkGraph({ ...graph, version: 2 }, model.tensors, model.weights.byteLength), /version 2/);
  assert.throws(() => checkGraph({ ...graph, steps: [...graph.steps, { step: 'softmax' }] }, model.tensors, model.weights.byteLength), /not a step this runtime runs/);
});

test("decoder graph backend: a trial run (tuning's timing in the model) leaves the position and the caches as they were, with room after the position and without", { timeout: 120_000 }, async () => {
  const { GraphDecoder } = await load('src/decoder.ts');
  const model = llamaModel(23);
  const graph = llamaGraph(model.formats, [1, 4, 8]);
  const ids = Array.from({ length: 21 }, (_, i) => (i * 41 + 3) % D.vocab);
  const want = llama64(model.values, ids);
  const calls = [];
  const dec = await GraphDecoder.create({ graph, tensors: model.tensors, weights: model.weights, context: 24, fixed: fixedBytes, shared: false });
  dec.setKernels(jsKernels(dec.memory, calls));
  const close = (got, w, what) => {
    let e = 0, m = 0;
    for (let i = 0; i < w.length; i++) (e = Math.max(e, Math.abs(got[i] - w[i]))), (m = Math.max(m, Math.abs(w[i])));
    assert.ok(e / m < 1e-4, `${what}: error ${e / m}`);
  };
  // Room after the position (5 + 8 <= 24): the run writes rows nobody has read yet.
  await dec.feed(ids.slice(0, 5));
  await dec.trialRun(8);
  await dec.trialRun(1);
  assert.equal(dec.position, 5);
  close(await dec.feed([ids[5]]), want[5], 'the token after trial runs with room');
  // No room (20 + 8 > 24): the run starts at 16, over real rows, which come back.
  await dec.feed(ids.slice(6, 20));
  await dec.trialRun(8);
  assert.equal(dec.position, 20);
  close(await dec.feed([ids[20]]), want[20], 'the token after a trial run over the last rows');
});

test('decoder graph backend: the native layout (ids, weights, buffers, caches, rope table, scores)', async () => {
  const { layoutOf } = await load('src/decoder.ts');
  const model = llamaModel(22);
  const graph = llamaGraph(model.formats, [1, 16, 32, 64, 128, 256]);
  const L = layoutOf(graph, 1000, 100);
  assert.equal(L.ids, 64);
  assert.equal(L.weights, 64 + 1024);
  assert.equal(L.buffers.get('x'), 64 + 1024 + 1024);
  assert.equal(L.buffers.get('h') - L.buffers.get('x'), 256 * 64 * 4);
  assert.equal(L.caches.get('v.0') - L.caches.get('k.0'), Math.ceil((100 * 32 * 4) / 64) * 64);
  assert.equal(L.scores - L.rope, Math.ceil((100 * 16 * 4) / 64) * 64);
  // One row of attention weights per query head of a group.
  const att = graph.steps.find((s) => s.step === 'attention');
  assert.equal(L.bytes - L.scores, Math.ceil(((att.heads / att.kv_heads) * 104 * 4) / 64) * 64);
  for (const v of [L.ids, L.weights, ...L.buffers.values(), ...L.caches.values(), L.rope, L.scores, L.bytes]) assert.equal(v % 64, 0);
});

test('TextGenerator on the small llama: greedy text as forward\'s argmax, maxTokens 0 and capped, abort, stop, empty and too long prompts', { timeout: 120_000 }, async () => {
  const { GraphDecoder } = await load('src/decoder.ts');
  const { TextGenerator } = await load('src/text-generator.ts');
  const model = llamaModel(23);
  const graph = llamaGraph(model.formats, [1, 4, 8]);
  const dec = await GraphDecoder.create({ graph, tensors: model.tensors, weights: model.weights, context: 24, fixed: fixedBytes, shared: false });
  dec.setKernels(jsKernels(dec.memory, []));
  // A tokenizer of one id per character '0'... (72 of them); id 0 ('0') ends generation.
  const tokenizer = {
    encode: (t) => ({ ids: [...t].map((c) => (c.charCodeAt(0) - 48 + 72 * 8) % 72) }),
    decode: (ids) => ids.map((i) => String.fromCharCode(48 + i)).join(''),
    id_to_token: (i) => String.fromCharCode(48 + i),
  };
  const manifest = { name: 'tiny', config: { context_length: 300 }, chat_template: null, special: { bos_id: null, eos_id: 0, eog_ids: [0], add_bos: false } };
  const webtune = { server: '', session: { session_id: '' }, idle: async () => ({ worked: false, done: true }), close() {} };
  const gen = new TextGenerator({ webtune, manifest, decoder: dec, tokenizer, report: false });
  const drain = async (it) => {
    const out = [];
    for await (const s of it) out.push(s);
    return out.join('');
  };
  // The own greedy continuation through forward.
  const prompt = 'ABCDE';
  let logits = await gen.forward(gen.tokenize(prompt), { reset: true });
  const own = [];
  for (let i = 0; i < 10; i++) {
    let best = 0;
    for (let j = 1; j < logits.length; j++) if (logits[j] > logits[best]) best = j;
    if (best === 0) break;
    own.push(best);
    logits = await gen.forward([best]);
  }
  const text = await drain(gen.generate(prompt, { maxTokens: 10 }));
  assert.equal(text, tokenizer.decode(own));
  assert.equal(gen.stats.generatedTokens, own.length);
  assert.equal(gen.stats.finish, own.length === 10 ? 'length' : 'eog');
  assert.equal(await drain(gen.generate(prompt, { maxTokens: 10 })), text, 'greedy is deterministic');
  assert.equal(await drain(gen.generate(prompt, { maxTokens: 0 })), '');
  // The context (24) leaves 20 tokens after a 5-token prompt: a huge maxTokens is capped.
  const long = await drain(gen.generate(prompt, { maxTokens: 1e9 }));
  assert.ok(gen.stats.generatedTokens <= 20 && ['context', 'eog'].includes(gen.stats.finish), JSON.stringify(gen.stats));
  assert.ok(long.startsWith(text));
  if (text.length > 2) {
    const stop = text.slice(2, 4);
    assert.equal(await drain(gen.generate(prompt, { maxTokens: 10, stop })), text.slice(0, text.indexOf(stop)));
    assert.equal(gen.stats.finish, 'stop');
  }
  const ac = new AbortController();
  const pieces = [];
  for await (const s of gen.generate(prompt, { maxTokens: 10, signal: ac.signal })) {
    pieces.push(s);
    ac.abort();
  }
  assert.equal(pieces.length, Math.min(1, text.length));
  assert.equal(gen.stats.finish, text.length ? 'abort' : 'eog');
  assert.equal(await drain(gen.generate(prompt, { maxTokens: 10 })), text, 'the next call after an abort');
  await assert.rejects(drain(gen.generate('')), /^RangeError: the prompt is empty/);
  await assert.rejects(drain(gen.generate('x'.repeat(25))), /^RangeError: the prompt is 25 tokens, over the context of 24/);
  await assert.rejects(drain(gen.chat([{ role: 'user', content: 'hi' }])), /has no chat template/);
  await assert.rejects(drain(gen.generate('A', { maxTokens: 1.5 })), /maxTokens must be a non-negative integer/);
  // A 24-token prompt: one token from its logits, none fed.
  await drain(gen.generate('A'.repeat(24), { maxTokens: 5 }));
  assert.ok(gen.stats.generatedTokens <= 1);
  // Sampling: the same seed, the same text.
  const o = { maxTokens: 8, temperature: 1.5, topK: 10, seed: 7n };
  assert.equal(await drain(gen.generate(prompt, o)), await drain(gen.generate(prompt, o)));
  // Two calls at once run one after the other.
  const [a, b] = await Promise.all([drain(gen.generate(prompt, { maxTokens: 10 })), drain(gen.generate(prompt, { maxTokens: 10 }))]);
  assert.equal(a, text);
  assert.equal(b, text);
  console.log(`# small llama: greedy ${JSON.stringify(text)}, capped ${JSON.stringify(long)} (${gen.stats.finish})`);
});
