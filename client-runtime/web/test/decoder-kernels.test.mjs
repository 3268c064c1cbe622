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

const fixedBytes = await assembleKernels('decoder-kernels.wat');
const memory = new WebAssembly.Memory({ initial: 256 });
const { instance: { exports: k } } = await WebAssembly.instantiate(fixedBytes, { env: { memory } });

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

const silu = (g) => g / (1 + Math.exp(-g));

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
    const out = alloc(rows * heads * hd), scores = alloc(n + 8);
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

// Seeded quantised tables in the bundle's layouts (docs: manifest format 2).
function q8Table(r, V, H) {
  const q = Int8Array.from({ length: V * H }, () => Math.round(127 * r()));
  const d = Float32Array.from({ length: (V * H) / 32 }, () => Math.abs(r()) / 64);
  return { q, d, value: (n, kk) => d[(n * H + kk) >> 5] * q[n * H + kk] };
}
function q4Table(r, V, H, min) {
  const nib = Uint8Array.from({ length: V * H }, () => Math.floor((r() + 1) * 8) & 15);
  const w = new Uint32Array((V * H) / 8);
  for (let i = 0; i < V * H; i++) w[i >> 3] |= nib[i] << (4 * (i & 7));
  const d = Float32Array.from({ length: (V * H) / 32 }, () => Math.abs(r()) / 8);
  const m = Float32Array.from({ length: (V * H) / 32 }, () => r() / 4);
  return { w, d, m, value: (n, kk) => (min ? d[(n * H + kk) >> 5] * nib[n * H + kk] + m[(n * H + kk) >> 5] : d[(n * H + kk) >> 5] * (nib[n * H + kk] - 8)) };
}
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

const D = { vocab: 72, hidden: 64, layers: 2, heads: 4, kvHeads: 2, headDim: 16, ffn: 96, theta: 10000, eps: 1e-5, context: 300 };

/** `webtune_models::graph::decoder_graph` for D (written out here from graph.rs's rules), with buckets `buckets`. */
function llamaGraph(formats, buckets) {
  const h = D.hidden, hd = D.headDim, q = D.heads * hd, kv = D.kvHeads * hd, qkv = q + 2 * kv;
  const buf = (name, cols, rows = 'tokens') => ({ name, cols, rows });
  const mm = (a, weight, out, kk, n, last = false) => ({ step: 'matmul', kernel: { f32: 'matmul', q4_0: 'matmul_q4', q4_1: 'matmul_q4_1', q8_0: 'matmul_q8_0' }[formats[weight]], a, weight, format: formats[weight], out, k: kk, n, last });
  const steps = [{ step: 'embed', table: 'token_embd', format: formats.token_embd, out: 'x' }], caches = [];
  const eps = Math.fround(D.eps);
  for (let l = 0; l < D.layers; l++) {
    const t = (s) => `blk.${l}.${s}`;
    caches.push({ name: `k.${l}`, cols: kv }, { name: `v.${l}`, cols: kv });
    steps.push(
      { step: 'rms_norm', x: 'x', weight: t('attn_norm'), out: 'h', eps, last: false },
      mm('h', t('attn_qkv'), 'qkv', h, qkv),
      { step: 'rope', x: 'qkv', stride: qkv, heads: D.heads + D.kvHeads, head_dim: hd, theta: D.theta },
      { step: 'kv_store', x: 'qkv', stride: qkv, k_col: q, v_col: q + kv, width: kv, k_cache: `k.${l}`, v_cache: `v.${l}` },
      { step: 'attention', x: 'qkv', stride: qkv, heads: D.heads, kv_heads: D.kvHeads, head_dim: hd, k_cache: `k.${l}`, v_cache: `v.${l}`, out: 'att', scale: Math.fround(1 / Math.sqrt(hd)) },
      mm('att', t('attn_output'), 't', q, h),
      { step: 'add', x: 'x', y: 't', cols: h },
      { step: 'rms_norm', x: 'x', weight: t('ffn_norm'), out: 'h', eps, last: false },
      mm('h', t('ffn_gate_up'), 'gu', h, 2 * D.ffn),
      { step: 'swi_glu', x: 'gu', ffn: D.ffn, out: 'act' },
      mm('act', t('ffn_down'), 't', D.ffn, h),
      { step: 'add', x: 'x', y: 't', cols: h },
    );
  }
  steps.push({ step: 'rms_norm', x: 'x', weight: 'output_norm', out: 'last', eps, last: true }, mm('last', 'token_embd', 'logits', h, D.vocab, true));
  return {
    version: 1, hidden: h, vocab: D.vocab, context: D.context, buckets,
    buffers: [buf('x', h), buf('h', h), buf('qkv', qkv), buf('att', q), buf('t', h), buf('gu', 2 * D.ffn), buf('act', D.ffn), buf('last', h, 'one'), buf('logits', D.vocab, 'one')],
    caches, steps, logits: 'logits',
  };
}

/**
 * The model's tensors in every format the backend reads (token_embd q8_0,
 * QKV and gate/up q4_1, the attention output f32, the FFN down q4_0), laid
 * out in one blob as the importer does (parts 64-byte aligned), and each
 * matrix's values [N][K] for the reference.
 */
function llamaModel(seed) {
  const r = rng(seed), h = D.hidden, q = D.heads * D.headDim, kv = D.kvHeads * D.headDim;
  const formats = { token_embd: 'q8_0', output_norm: 'f32' };
  const shapes = { token_embd: [D.vocab, h], output_norm: [h] };
  for (let l = 0; l < D.layers; l++) {
    Object.assign(formats, { [`blk.${l}.attn_norm`]: 'f32', [`blk.${l}.ffn_norm`]: 'f32', [`blk.${l}.attn_qkv`]: 'q4_1', [`blk.${l}.attn_output`]: 'f32', [`blk.${l}.ffn_gate_up`]: 'q4_1', [`blk.${l}.ffn_down`]: 'q4_0' });
    Object.assign(shapes, { [`blk.${l}.attn_norm`]: [h], [`blk.${l}.ffn_norm`]: [h], [`blk.${l}.attn_qkv`]: [q + 2 * kv, h], [`blk.${l}.attn_output`]: [h, q], [`blk.${l}.ffn_gate_up`]: [2 * D.ffn, h], [`blk.${l}.ffn_down`]: [h, D.ffn] });
  }
  const chunks = [], tensors = [], values = {};
  let at = 0;
  const part = (arr) => {
    at = Math.ceil(at / 64) * 64;
    const p = { offset: at, bytes: arr.byteLength };
    chunks.push({ at, bytes: new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength) });
    at += arr.byteLength;
    return p;
  };
  for (const [name, format] of Object.entries(formats)) {
    const shape = shapes[name];
    if (shape.length === 1) {
      const v = Float32Array.from({ length: shape[0] }, () => 1 + r() / 2);
      values[name] = Array.from(v);
      tensors.push({ name, format, shape, parts: { w: part(v) } });
      continue;
    }
    const [N, K] = shape, vals = new Float64Array(N * K);
    let parts;
    if (format === 'q8_0') {
      const t = q8Table(r, N, K);
      for (let n = 0; n < N; n++) for (let kk = 0; kk < K; kk++) vals[n * K + kk] = t.value(n, kk) * 16;
      // Scales 16 times larger: embeddings of magnitude ~1.
      parts = { w: part(Uint8Array.from(t.q, (x) => x & 255)), d: part(Float32Array.from(t.d, (x) => x * 16)) };
    } else if (format === 'q4_1' || format === 'q4_0') {
      const t = q4Table(r, N, K, format === 'q4_1');
      const s = 0.5 / Math.sqrt(K);
      for (let n = 0; n < N; n++) for (let kk = 0; kk < K; kk++) vals[n * K + kk] = Math.fround(t.d[(n * K + kk) >> 5] * s) * (t.value(n, kk) / t.d[(n * K + kk) >> 5]);
      // Redo the values exactly as the stored scales give them.
      const d = Float32Array.from(t.d, (x) => x * s), m = Float32Array.from(t.m, (x) => x * s);
      for (let n = 0; n < N; n++)
        for (let kk = 0; kk < K; kk++) {
          const b = (n * K + kk) >> 5, nib = (t.w[(n * K + kk) >> 3] >>> (4 * (kk & 7))) & 15;
          vals[n * K + kk] = format === 'q4_1' ? d[b] * nib + m[b] : d[b] * (nib - 8);
        }
      parts = format === 'q4_1' ? { w: part(t.w), d: part(d), m: part(m) } : { w: part(t.w), d: part(d) };
    } else {
      // f32: stored transposed, [K][N].
      const w = new Float32Array(K * N);
      for (let n = 0; n < N; n++)
        for (let kk = 0; kk < K; kk++) {
          const v = Math.fround(r() / Math.sqrt(K));
          vals[n * K + kk] = v;
          w[kk * N + n] = v;
        }
      parts = { w: part(w) };
    }
    values[name] = vals;
    tensors.push({ name, format, shape, parts });
  }
  const blob = new Uint8Array(Math.ceil(at / 64) * 64);
  for (const c of chunks) blob.set(c.bytes, c.at);
  return { formats, tensors, values, weights: blob.buffer };
}

/** The model's logits after each token of `ids`, in f64, from its definition. */
function llama64(values, ids) {
  const h = D.hidden, hd = D.headDim, nq = D.heads, nkv = D.kvHeads, q = nq * hd, kv = nkv * hd, F = D.ffn;
  const matvec = (w, x, N, K) => Array.from({ length: N }, (_, n) => {
    let s = 0;
    for (let kk = 0; kk < K; kk++) s += w[n * K + kk] * x[kk];
    return s;
  });
  const norm = (x, w) => {
    const inv = 1 / Math.sqrt(x.reduce((a, b) => a + b * b, 0) / h + Math.fround(D.eps));
    return x.map((v, i) => v * inv * w[i]);
  };
  const rope = (v, p) => {
    const out = v.slice();
    for (let i = 0; i < hd / 2; i++) {
      const a = p * Math.pow(D.theta, -2 * i / hd), c = Math.cos(a), s = Math.sin(a);
      out[2 * i] = v[2 * i] * c - v[2 * i + 1] * s;
      out[2 * i + 1] = v[2 * i + 1] * c + v[2 * i] * s;
    }
    return out;
  };
  const K = [...Array(D.layers)].map(() => []), V = [...Array(D.layers)].map(() => []);
  const logits = [];
  ids.forEach((id, p) => {
    let x = Array.from({ length: h }, (_, j) => values.token_embd[id * h + j]);
    for (let l = 0; l < D.layers; l++) {
      const t = (s) => values[`blk.${l}.${s}`];
      const y = matvec(t('attn_qkv'), norm(x, t('attn_norm')), q + 2 * kv, h);
      const qs = [...Array(nq)].map((_, hh) => rope(y.slice(hh * hd, (hh + 1) * hd), p));
      K[l].push([...Array(nkv)].map((_, g) => rope(y.slice(q + g * hd, q + (g + 1) * hd), p)));
      V[l].push([...Array(nkv)].map((_, g) => y.slice(q + kv + g * hd, q + kv + (g + 1) * hd)));
      const att = [];
      for (let hh = 0; hh < nq; hh++) {
        const g = Math.floor(hh / (nq / nkv));
        const s = K[l].map((kk) => kk[g].reduce((a, v, i) => a + v * qs[hh][i], 0) / Math.sqrt(hd));
        const m = Math.max(...s), e = s.map((v) => Math.exp(v - m)), sum = e.reduce((a, b) => a + b, 0);
        for (let i = 0; i < hd; i++) att.push(V[l].reduce((a, vv, j) => a + e[j] * vv[g][i], 0) / sum);
      }
      const o = matvec(t('attn_output'), att, h, q);
      x = x.map((v, i) => v + o[i]);
      const gu = matvec(t('ffn_gate_up'), norm(x, t('ffn_norm')), 2 * F, h);
      const act = [...Array(F)].map((_, i) => silu(gu[i]) * gu[F + i]);
      const dn = matvec(t('ffn_down'), act, h, F);
      x = x.map((v, i) => v + dn[i]);
    }
    logits.push(matvec(values.token_embd, norm(x, values.output_norm), D.vocab, h));
  });
  return logits;
}

/**
 * Products computed in JS on the decoder's memory (f64 sums, f32 stores),
 * by the ABI of each op (docs: matmul, matmul_q4, matmul_q4_1, matmul_q8_0);
 * `calls` records the shapes asked for.
 */
function jsKernels(memory, calls) {
  return async (op, shape) => {
    calls.push(`${op} ${shape.join(',')}`);
    const [M, K, N] = shape;
    const f32 = () => new Float32Array(memory.buffer), u32 = () => new Uint32Array(memory.buffer), i8 = () => new Int8Array(memory.buffer);
    const weight = {
      matmul: (a) => (n, kk) => f32()[a[1] / 4 + kk * N + n],
      matmul_q4: (a) => (n, kk) => f32()[a[2] / 4 + ((n * K + kk) >> 5)] * (((u32()[a[1] / 4 + ((n * K + kk) >> 3)] >>> (4 * (kk & 7))) & 15) - 8),
      matmul_q4_1: (a) => (n, kk) => f32()[a[2] / 4 + ((n * K + kk) >> 5)] * ((u32()[a[1] / 4 + ((n * K + kk) >> 3)] >>> (4 * (kk & 7))) & 15) + f32()[a[3] / 4 + ((n * K + kk) >> 5)],
      matmul_q8_0: (a) => (n, kk) => f32()[a[2] / 4 + ((n * K + kk) >> 5)] * i8()[a[1] + n * K + kk],
    }[op];
    assert.ok(weight, `no JS kernel for ${op}`);
    const arity = { matmul: 3, matmul_q4: 4, matmul_q4_1: 5, matmul_q8_0: 4 }[op];
    return {
      run(...a) {
        assert.equal(a.length, arity, `${op} takes ${arity} arguments`);
        const w = weight(a), A = f32(), C = a[a.length - 1] / 4;
        const out = new Float32Array(M * N);
        for (let m = 0; m < M; m++)
          for (let n = 0; n < N; n++) {
            let s = 0;
            for (let kk = 0; kk < K; kk++) s += A[a[0] / 4 + m * K + kk] * w(n, kk);
            out[m * N + n] = s;
          }
        f32().set(out, C);
      },
    };
  };
}

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
  assert.equal(L.bytes - L.scores, Math.ceil((104 * 4) / 64) * 64);
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
