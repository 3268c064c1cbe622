// A small random llama for the decoder backends' Node tests (the Wasm one in
// decoder-kernels.test.mjs, the WebGPU one in decoder-gpu.test.mjs): its
// graph (written out from graph.rs's rules), its tensors in every weight
// format the backends read, an f64 forward pass written from the
// architecture (not from the graph), seeded tables, and products computed
// in JS on a Wasm memory.

import assert from 'node:assert/strict';

// mulberry32, uniform in [-1, 1) with magnitude at least 1/64.
export function rng(seed) {
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

export const silu = (g) => g / (1 + Math.exp(-g));

// Seeded quantised tables in the bundle's layouts (docs: manifest format 2).
export function q8Table(r, V, H) {
  const q = Int8Array.from({ length: V * H }, () => Math.round(127 * r()));
  const d = Float32Array.from({ length: (V * H) / 32 }, () => Math.abs(r()) / 64);
  return { q, d, value: (n, kk) => d[(n * H + kk) >> 5] * q[n * H + kk] };
}
export function q4Table(r, V, H, min) {
  const nib = Uint8Array.from({ length: V * H }, () => Math.floor((r() + 1) * 8) & 15);
  const w = new Uint32Array((V * H) / 8);
  for (let i = 0; i < V * H; i++) w[i >> 3] |= nib[i] << (4 * (i & 7));
  const d = Float32Array.from({ length: (V * H) / 32 }, () => Math.abs(r()) / 8);
  const m = Float32Array.from({ length: (V * H) / 32 }, () => r() / 4);
  return { w, d, m, value: (n, kk) => (min ? d[(n * H + kk) >> 5] * nib[n * H + kk] + m[(n * H + kk) >> 5] : d[(n * H + kk) >> 5] * (nib[n * H + kk] - 8)) };
}
export const D = { vocab: 72, hidden: 64, layers: 2, heads: 4, kvHeads: 2, headDim: 16, ffn: 96, theta: 10000, eps: 1e-5, context: 300 };

/** `webtune_models::graph::decoder_graph` for D (written out here from graph.rs's rules), with buckets `buckets`. */
export function llamaGraph(formats, buckets) {
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
  // graph.rs's `fuse` on these steps (its test `the_small_llama_fuses_as_the_node_tests_expect` pins the same list):
  // a norm into a block-format product, that product's SwiGLU, a product's add (f32 products: the add only).
  const op = (w) => mm('', w, '', 0, 0).kernel;
  const block = (w) => formats[w] !== 'f32';
  const fused = [];
  for (let l = 0; l < D.layers; l++) {
    const t = (s) => `blk.${l}.${s}`, b = 1 + 12 * l;
    if (block(t('attn_qkv'))) fused.push({ first: b, steps: 2, kernel: `${op(t('attn_qkv'))}+rms_norm`, k: h, n: qkv });
    fused.push({ first: b + 5, steps: 2, kernel: `${op(t('attn_output'))}+residual`, k: q, n: h });
    if (block(t('ffn_gate_up'))) fused.push({ first: b + 7, steps: 3, kernel: `${op(t('ffn_gate_up'))}+rms_norm+swiglu`, k: h, n: D.ffn });
    fused.push({ first: b + 10, steps: 2, kernel: `${op(t('ffn_down'))}+residual`, k: D.ffn, n: h });
  }
  if (block('token_embd')) fused.push({ first: 1 + 12 * D.layers, steps: 2, kernel: `${op('token_embd')}+rms_norm`, k: h, n: D.vocab });
  return {
    version: 1, hidden: h, vocab: D.vocab, context: D.context, buckets,
    buffers: [buf('x', h), buf('h', h), buf('qkv', qkv), buf('att', q), buf('t', h), buf('gu', 2 * D.ffn), buf('act', D.ffn), buf('last', h, 'one'), buf('logits', D.vocab, 'one')],
    caches, steps, logits: 'logits', fused,
  };
}

/**
 * The model's tensors in every format the backend reads (token_embd q8_0,
 * QKV and gate/up q4_1, the attention output f32 unless `attnOutput` names
 * a block format, the FFN down q4_0), laid
 * out in one blob as the importer does (parts 64-byte aligned), and each
 * matrix's values [N][K] for the reference.
 */
export function llamaModel(seed, { attnOutput = 'f32' } = {}) {
  const r = rng(seed), h = D.hidden, q = D.heads * D.headDim, kv = D.kvHeads * D.headDim;
  const formats = { token_embd: 'q8_0', output_norm: 'f32' };
  const shapes = { token_embd: [D.vocab, h], output_norm: [h] };
  for (let l = 0; l < D.layers; l++) {
    Object.assign(formats, { [`blk.${l}.attn_norm`]: 'f32', [`blk.${l}.ffn_norm`]: 'f32', [`blk.${l}.attn_qkv`]: 'q4_1', [`blk.${l}.attn_output`]: attnOutput, [`blk.${l}.ffn_gate_up`]: 'q4_1', [`blk.${l}.ffn_down`]: 'q4_0' });
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
export function llama64(values, ids) {
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
export function jsKernels(memory, calls) {
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
