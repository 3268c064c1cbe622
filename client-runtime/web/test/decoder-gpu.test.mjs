// The text generator's WebGPU side in Node, through Dawn (the npm package
// `webgpu`, Chromium's WebGPU implementation) on the SwiftShader Vulkan
// driver that Debian's Chromium ships, without a server:
// - the sampling kernel of src/decoder-kernels.wgsl against sampler.ts (the
//   native Sampler's rule): the golden file's cases draw for draw, greedy
//   as the first largest logit, and seeded random logits at several
//   temperatures, top-k and top-p; more weighted ids than it holds, with no
//   top-k, hands the choice back to the host;
// - the decoder graph's WebGPU backend (src/decoder-gpu.ts) on the small
//   llama of small-llama.mjs (every weight format), its products on plain
//   WGSL kernels written here (the backend takes any kernel of the op's
//   ABI; webtune's tuned ones are checked on SmolLM2 in
//   decoder-gpu-e2e.test.mjs), against the f64 forward pass: prefill in one
//   run, in chunks, token by token, and runs shorter than their bucket;
//   greedy tokens sampled on the GPU equal the argmax of the logits; the
//   refusals; the attention's long form past NP·64 positions, and its
//   source (longAttentionSource).
// Needs /usr/lib/chromium/vk_swiftshader_icd.json (Debian's chromium) or a
// VK_ICD_FILENAMES naming another Vulkan driver.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { dawnDevice, plainKernels, releaseDawn } from './dawn.mjs';
import { load } from './load.mjs';
import { D, llama64, llamaGraph, llamaModel, rng } from './small-llama.mjs';

const { device } = await dawnDevice();
after(() => releaseDawn(device));
const WGSL = readFileSync(new URL('../src/decoder-kernels.wgsl', import.meta.url), 'utf8');

/** The largest difference of `got` from `w`, relative to w's largest magnitude (Infinity where got has a NaN). */
function relError(got, w) {
  let e = 0, m = 0;
  for (let i = 0; i < w.length; i++) {
    if (Number.isNaN(got[i])) return Infinity;
    e = Math.max(e, Math.abs(got[i] - w[i]));
    m = Math.max(m, Math.abs(w[i]));
  }
  return e / m;
}

// A TextGenerator over the small llama without a server: one id per character '0'... (72 of them); id 0 ('0') ends generation.
const tokenizer = {
  encode: (t) => ({ ids: [...t].map((c) => (c.charCodeAt(0) - 48 + 72 * 8) % 72) }),
  decode: (ids) => ids.map((i) => String.fromCharCode(48 + i)).join(''),
  id_to_token: (i) => String.fromCharCode(48 + i),
};
const manifest = { name: 'tiny', config: { context_length: 300 }, chat_template: null, special: { bos_id: null, eos_id: 0, eog_ids: [0], add_bos: false } };
const fakeWebtune = () => ({ server: '', session: { session_id: '' }, idle: async () => ({ worked: false, done: true }), close() {} });

/** A text stream's pieces, joined. */
async function drain(it) {
  const out = [];
  for await (const x of it) out.push(x);
  return out.join('');
}

/** Runs decoder-kernels.wgsl's `sample` on `logits` with the sampling; resolves with the id (or 0xffffffff) and the flag. */
let samplePipeline = null;
async function gpuSample(logits, { temperature, topK, topP, u }) {
  samplePipeline ??= await device.createComputePipelineAsync({ layout: 'auto', compute: { module: device.createShaderModule({ code: WGSL }), entryPoint: 'sample' } });
  const run = new ArrayBuffer(32), ru = new Uint32Array(run), rf = new Float32Array(run);
  ru[0] = 1;
  rf[2] = u;
  rf[3] = temperature;
  ru[4] = topK;
  rf[5] = topP;
  const step = new Uint32Array(8);
  step[0] = logits.length;
  const buf = (data, usage) => {
    const b = device.createBuffer({ size: Math.max(16, Math.ceil(data.byteLength / 16) * 16), usage: usage | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(b, 0, data);
    return b;
  };
  const R = buf(run, GPUBufferUsage.UNIFORM), S = buf(step, GPUBufferUsage.UNIFORM), L = buf(logits, GPUBufferUsage.STORAGE);
  const out = buf(new Uint32Array([7, 7, 7, 7]), GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC);
  const read = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const group = device.createBindGroup({ layout: samplePipeline.getBindGroupLayout(0), entries: [R, S, L, out].map((buffer, binding) => ({ binding, resource: { buffer } })) });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(samplePipeline);
  pass.setBindGroup(0, group);
  pass.dispatchWorkgroups(1);
  pass.end();
  enc.copyBufferToBuffer(out, 0, read, 0, 16);
  device.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const [id, flag] = new Uint32Array(read.getMappedRange().slice(0));
  read.unmap();
  for (const b of [R, S, L, out, read]) b.destroy();
  return { id, flag };
}

test('sampling on the GPU: the golden cases draw for draw, greedy the first largest, random logits as sampler.ts; too many weighted ids go back to the host', { timeout: 300_000 }, async () => {
  const { Sampler } = await load('src/sampler.ts');
  const gold = JSON.parse(readFileSync(new URL('./golden/sampler.json', import.meta.url), 'utf8'));
  let cases = 0;
  for (const c of gold.cases) {
    const logits = Float32Array.from(gold.logits[c.logits]);
    const host = new Sampler({ temperature: c.temperature, topK: c.top_k, topP: c.top_p, seed: BigInt(c.seed) });
    const drawer = new Sampler({ temperature: c.temperature, topK: c.top_k, topP: c.top_p, seed: BigInt(c.seed) });
    const got = [];
    for (let i = 0; i < c.ids.length; i++) {
      const u = drawer.draws ? drawer.uniform() : 0;
      const r = await gpuSample(logits, { temperature: Math.fround(c.temperature), topK: c.top_k, topP: c.top_p, u });
      got.push(r.id === 0xffffffff ? host.pick(logits, u) : r.id);
    }
    assert.deepEqual(got, c.ids, `${c.logits}, temperature ${c.temperature}, top_k ${c.top_k}, top_p ${c.top_p}, seed ${c.seed}`);
    cases++;
  }
  // Greedy: the first largest, ties to the smallest id.
  assert.equal((await gpuSample(Float32Array.from([0.1, 2, 1.9, -3, 2]), { temperature: 0, topK: 0, topP: 1, u: 0 })).id, 1);
  const tie = new Float32Array(3000).fill(-1);
  tie[2999] = 5;
  tie[1234] = 5;
  assert.equal((await gpuSample(tie, { temperature: 0, topK: 0, topP: 1, u: 0 })).id, 1234);
  // Seeded random logits, a vocabulary of 5000, as sampler.ts (logits spread so that
  // few ids carry weight, as a language model's do; and flatter with a top-k).
  const r = rng(77);
  let same = 0, total = 0, back = 0;
  for (const [temperature, topK, topP, spread] of [[0.7, 0, 1, 12], [1, 40, 1, 4], [1, 0, 0.9, 12], [0.5, 5, 0.8, 3], [1.3, 50, 0.95, 2]]) {
    for (let trial = 0; trial < 6; trial++) {
      const logits = Float32Array.from({ length: 5000 }, () => Math.fround(r() * spread + (Math.abs(r()) > 0.995 ? 10 : 0)));
      const s = new Sampler({ temperature, topK, topP, seed: BigInt(1000 + trial) });
      for (let d = 0; d < 4; d++) {
        const u = s.uniform();
        const g = await gpuSample(logits, { temperature: Math.fround(temperature), topK, topP, u });
        const want = s.pick(logits, u);
        total++;
        if (g.id === 0xffffffff) {
          assert.equal(g.flag, 1);
          back++;
          continue;
        }
        if (g.id === want) same++;
        else console.log(`# differs: temperature ${temperature} top-k ${topK} top-p ${topP} u ${u}: gpu ${g.id}, host ${want}`);
      }
    }
  }
  assert.equal(same + back, total, `${total - same - back} of ${total} draws picked another id than sampler.ts`);
  assert.ok(back <= total / 4, `the GPU handed ${back} of ${total} draws back to the host`);
  // Flat logits at a high temperature with no top-k: every id weighs; the host samples.
  const flat = Float32Array.from({ length: 5000 }, (_, i) => (i % 7) / 7);
  assert.deepEqual(await gpuSample(flat, { temperature: 2, topK: 0, topP: 1, u: 0.5 }), { id: 0xffffffff, flag: 1 });
  assert.deepEqual(await gpuSample(flat, { temperature: 2, topK: 2000, topP: 1, u: 0.5 }), { id: 0xffffffff, flag: 1 });
  // With a top-k the GPU narrows them itself.
  const s = new Sampler({ temperature: 2, topK: 30, topP: 1, seed: 5n });
  const u = s.uniform();
  assert.equal((await gpuSample(flat, { temperature: 2, topK: 30, topP: 1, u })).id, s.pick(flat, u));
  console.log(`# GPU sampling: ${cases} golden cases and ${total} random draws as sampler.ts (${back} handed back to the host)`);
});

test('decoder graph on WebGPU: the small llama in every weight format against f64 (one run, chunks, token by token, short runs), greedy on the GPU, refusals', { timeout: 300_000 }, async () => {
  const { GpuDecoder, fusions } = await load('src/decoder-gpu.ts');
  const { productsOf } = await load('src/decoder.ts');
  const model = llamaModel(21);
  const graph = llamaGraph(model.formats, [1, 4, 8]);
  const ids = Array.from({ length: 21 }, (_, i) => (i * 37 + 5) % D.vocab);
  const want = llama64(model.values, ids);
  // Every add before a norm and every rope before a kv_store run as one dispatch.
  const fused = fusions(graph);
  assert.equal([...fused.values()].filter((f) => f === 'add_rms_norm').length, 2 * D.layers);
  assert.equal([...fused.values()].filter((f) => f === 'rope_kv').length, D.layers);
  for (const fuse of [false, true]) {
  const calls = [];
  const dec = await GpuDecoder.create({ device, graph, tensors: model.tensors, weights: model.weights, context: 64, wgsl: WGSL, fuse });
  dec.setKernels(plainKernels(device, calls));
  const argmax = (x) => x.reduce((b, v, i) => (v > x[b] ? i : b), 0);
  let worst = 0;
  // The whole prompt: chunks of 8, 8 and 5 (bucket 8).
  let got = await dec.feed(ids);
  worst = Math.max(worst, relError(got, want[20]));
  assert.equal(dec.position, 21);
  // Token by token, each step's token sampled greedily on the GPU too.
  dec.reset();
  for (let t = 0; t < ids.length; t++) {
    const tok = await dec.next([ids[t]], { temperature: 0, topK: 0, topP: 1, u: 0 });
    got = await dec.logits();
    const e = relError(got, want[t]);
    worst = Math.max(worst, e);
    assert.ok(e < 1e-4, `token ${t} fed alone: error ${e}`);
    assert.equal(tok, argmax(got), `token ${t}: the GPU's greedy token is the logits' argmax`);
  }
  assert.ok(dec.stats.dispatchesPerToken > 0);
  // A profiled step (timestamps): every dispatch labelled and timed, and the
  // caches as after one run (its second, pass-per-dispatch run rewrote the same rows).
  if (device.features.has('timestamp-query')) {
    dec.reset();
    await dec.prefill(ids.slice(0, 10));
    const pr = await dec.profile([ids[10]]);
    assert.equal(dec.position, 11);
    // At 11 positions the attention is one dispatch a layer (shortAttention), its merge skipped.
    assert.equal(pr.steps.filter((s) => !s.label.endsWith(' (skipped)')).length, dec.stats.dispatchesPerToken);
    assert.equal(pr.steps.at(-1).label, 'sample');
    assert.equal(pr.steps.filter((s) => s.label === (fuse ? 'attention_rope_one' : 'attention_one')).length, D.layers);
    assert.equal(pr.steps.filter((s) => s.label === 'attention_merge (skipped)').length, D.layers);
    assert.ok(pr.steps.some((s) => /^matmul[\w+]* 1x\d+x\d+$/.test(s.label)), pr.steps.map((s) => s.label).join());
    // Fused, every product of the step is its fused run's op (graph.fused).
    if (fuse) assert.equal(pr.steps.filter((s) => s.label.includes('+')).length, graph.fused.length);
    for (const v of [pr.encodeMs, pr.wallMs, pr.gpuMs, ...pr.steps.map((s) => s.ms)]) assert.ok(Number.isFinite(v) && v >= 0, `profile time ${v}`);
    assert.ok(pr.wallMs >= pr.encodeMs);
    const e = relError(await dec.logits(), want[10]);
    assert.ok(e < 1e-4, `after profile: error ${e}`);
    await assert.rejects(dec.profile(Array(9).fill(1)), /at most 8 tokens/);
    console.log(`# profiled step (Dawn${fuse ? ', fused' : ''}): ${pr.steps.length} dispatches, wall ${pr.wallMs.toFixed(2)} ms, pass ${pr.gpuMs.toFixed(3)} ms on the GPU`);
  }
  // A prefix of 3 (bucket 4, padded), then runs of 2 (bucket 4) and 1.
  dec.reset();
  await dec.prefill(ids.slice(0, 3));
  got = await dec.feed(ids.slice(3, 5));
  worst = Math.max(worst, relError(got, want[4]));
  got = await dec.feed([ids[5]]);
  worst = Math.max(worst, relError(got, want[5]));
  console.log(`# small llama on WebGPU (Dawn${fuse ? ', steps fused' : ''}): worst logit error ${worst.toExponential(2)} relative to the largest logit; ${dec.stats.dispatchesPerToken} dispatches a token`);
  assert.ok(worst < 1e-4, `worst error ${worst}`);
  // Every step one dispatch (plain kernels: one pass; the attention too, at these short positions, without its merge),
  // plus the sampling; fused, each of the graph's fused runs one product, and the rope and kv_store before attention
  // folded into it.
  const runSteps = graph.fused.reduce((a, f) => a + f.steps - 1, 0);
  assert.equal(dec.stats.dispatchesPerToken, fuse ? graph.steps.length - runSteps - 2 * D.layers + 1 : graph.steps.length + 1);
  const wantCalls = [8, 1, 4].flatMap((m) => productsOf(graph, m, fuse).map((p) => `${p.op} ${p.shape.join(',')}`));
  assert.deepEqual([...new Set(calls)].sort(), [...new Set(wantCalls)].sort());
  assert.equal(calls.length, new Set(calls).size, 'a product\'s kernel was asked for twice');

  dec.reset();
  await assert.rejects(dec.feed([]), /no tokens to feed/);
  await assert.rejects(dec.feed([D.vocab]), /token id 72 is outside the vocabulary of 72/);
  await dec.prefill(Array(60).fill(1));
  await assert.rejects(dec.feed(Array(5).fill(1)), /60 positions used and 5 more tokens: past the context of 64/);
  await assert.rejects(GpuDecoder.create({ device, graph, tensors: model.tensors, weights: model.weights, context: 301, wgsl: WGSL }), /context 301 must be an integer from 1 to the model's 300/);
  // A fused run that does not compute its op (a norm run named +swiglu, a run one step short) is refused.
  const misnamed = { ...graph, fused: graph.fused.map((f, i) => (i === 0 ? { ...f, kernel: `${f.kernel}+swiglu` } : f)) };
  await assert.rejects(GpuDecoder.create({ device, graph: misnamed, tensors: model.tensors, weights: model.weights, context: 64, wgsl: WGSL }), /fused run at step 1 \(matmul_q4_1\+rms_norm\+swiglu\): step 3 is missing, the op needs swi_glu/);
  const short = { ...graph, fused: graph.fused.map((f, i) => (i === 2 ? { ...f, steps: 2 } : f)) };
  await assert.rejects(GpuDecoder.create({ device, graph: short, tensors: model.tensors, weights: model.weights, context: 64, wgsl: WGSL }), /fused run at step 8 .*: step 10 is missing|do not compute that op/);
  const inPlace = { ...graph, steps: graph.steps.map((s) => (s.step === 'add' ? { ...s, y: s.x } : s)) };
  await assert.rejects(GpuDecoder.create({ device, graph: inPlace, tensors: model.tensors, weights: model.weights, context: 64, wgsl: WGSL }), /reads and writes buffer `x`/);
  dec.destroy();
  await assert.rejects(dec.feed([1]), /closed/);
  }
});

test('decode steps past several chunks of the split attention (64 positions each), with and without rope and kv_store folded in, one workgroup a head up to 130 positions and split past them: logits within 1e-4 of f64 at every length, the prompt through the unsplit kernel', { timeout: 300_000 }, async () => {
  const { GpuDecoder } = await load('src/decoder-gpu.ts');
  const model = llamaModel(23);
  const graph = llamaGraph(model.formats, [1, 4, 8]);
  const n = 200;
  const ids = Array.from({ length: n }, (_, i) => (i * 29 + 11) % D.vocab);
  const want = llama64(model.values, ids);
  for (const fuse of [true, false]) {
  const dec = await GpuDecoder.create({ device, graph, tensors: model.tensors, weights: model.weights, context: graph.context, wgsl: WGSL, fuse, shortAttention: 130 });
  dec.setKernels(plainKernels(device, []));
  // 60 positions in buckets of 8 (the unsplit kernel), then one at a time: 1, 2, 3 and 4 chunks, and their edges (64, 65, 128, 129, ...).
  await dec.prefill(ids.slice(0, 60));
  const worst = [0, 0];
  for (let t = 60; t < n; t++) {
    const got = await dec.feed([ids[t]]);
    const e = relError(got, want[t]);
    worst[t < 130 ? 0 : 1] = Math.max(worst[t < 130 ? 0 : 1], e);
    assert.ok(e < 1e-4, `position ${t} (${Math.ceil((t + 1) / 64)} chunks, ${t < 130 ? 'one workgroup a head' : 'split'}): error ${e}`);
  }
  // Each dispatch that ran, by its label: one dispatch a layer fewer up to 130 positions.
  const labels = async (at) => {
    dec.rewind(dec.position - at);
    const pr = await dec.profile([ids[at]], { perStep: false });
    return pr.steps.map((s) => s.label);
  };
  if (device.features.has('timestamp-query')) {
    const long = await labels(150), short = await labels(100);
    const one = fuse ? 'attention_rope_one' : 'attention_one', split = fuse ? 'attention_rope' : 'attention_split';
    assert.equal(short.filter((l) => l === one).length, 2, short.join());
    assert.equal(short.filter((l) => l === 'attention_merge (skipped)').length, 2, short.join());
    assert.equal(long.filter((l) => l === split).length, 2, long.join());
    assert.equal(long.filter((l) => l === 'attention_merge').length, 2, long.join());
  }
  console.log(`# split attention (Dawn${fuse ? ', rope and kv_store folded in' : ''}): positions 60..129 one workgroup a head, worst logit error ${worst[0].toExponential(2)}; 130..${n - 1} split, ${worst[1].toExponential(2)} (relative to the largest logit)`);
  dec.destroy();
  }
});

test('the attention\'s parts merged by the product after it (+merge): NP parts a head and no merge dispatch, logits within 1e-4 of f64 from one chunk to past NP·64 positions (the long form of 128-position chunks) and past NP·128, where its parts fold two chunks', { timeout: 900_000 }, async () => {
  const { GpuDecoder } = await load('src/decoder-gpu.ts');
  const { MERGE_PARTS } = await load('src/decoder.ts');
  const model = llamaModel(29, { attnOutput: 'q8_0' });
  const context = MERGE_PARTS * 128 + 48;
  const graph = { ...llamaGraph(model.formats, [1, 4, 8]), context };
  const n = context - 2;
  const ids = Array.from({ length: n }, (_, i) => (i * 31 + 7) % D.vocab);
  const want = llama64(model.values, ids);
  const dec = await GpuDecoder.create({ device, graph, tensors: model.tensors, weights: model.weights, context, wgsl: WGSL });
  const calls = [];
  dec.setKernels(plainKernels(device, calls));
  // Decode steps from 8 positions (most parts empty) to three chunks, then, after a prompt run in buckets of
  // 8 (the unsplit kernel), across NP·64 positions, where the long form takes over (chunks of 128, one a
  // part), and past NP·128, where its part 0 folds a second chunk.
  let worst = 0;
  for (const [from, to] of [[8, 140], [MERGE_PARTS * 64 - 40, MERGE_PARTS * 64 + 40], [MERGE_PARTS * 128 - 24, n]]) {
    dec.reset();
    await dec.prefill(ids.slice(0, from));
    for (let t = from; t < to; t++) {
      const got = await dec.feed([ids[t]]);
      const e = relError(got, want[t]);
      worst = Math.max(worst, e);
      assert.ok(e < 1e-4, `position ${t} (${Math.ceil((t + 1) / 64)} chunks over ${MERGE_PARTS} parts): error ${e}`);
    }
  }
  // The output projection was asked for in its +merge form: shape M,K,N,H,C.
  assert.ok(calls.includes(`matmul_q8_0+merge+residual 1,${D.heads * D.headDim},${D.hidden}`), calls.join('; '));
  if (device.features.has('timestamp-query')) {
    dec.rewind(dec.position - 100);
    const labels = (await dec.profile([ids[100]], { perStep: false })).steps.map((s) => s.label);
    assert.equal(labels.filter((l) => l === 'attention_rope_parts').length, D.layers, labels.join());
    assert.equal(labels.filter((l) => l.startsWith('attention_merge') || l.startsWith('attention_rope_one')).length, 0, labels.join());
    assert.equal(labels.filter((l) => l === `matmul_q8_0+merge+residual 1x${D.heads * D.headDim}x${D.hidden}x${D.heads}x${MERGE_PARTS}`).length, D.layers, labels.join());
    // Past NP·64 positions, the long form in the same place.
    await dec.prefill(ids.slice(dec.position, MERGE_PARTS * 64 + 10));
    const long = (await dec.profile([ids[MERGE_PARTS * 64 + 10]], { perStep: false })).steps.map((s) => s.label);
    assert.equal(long.filter((l) => l === 'attention_rope_parts_long').length, D.layers, long.join());
    assert.equal(long.filter((l) => l === 'attention_rope_parts').length, 0, long.join());
  }
  console.log(`# attention in ${MERGE_PARTS} parts merged by the output projection (Dawn): positions 8..139, ${MERGE_PARTS * 64 - 40}..${MERGE_PARTS * 64 + 39} and ${MERGE_PARTS * 128 - 24}..${n - 1}, worst logit error ${worst.toExponential(2)} relative to the largest logit; ${dec.stats.dispatchesPerToken} dispatches a token`);
  dec.destroy();
});

test('longAttentionSource: the attention\'s long form changes exactly its five constants, and refuses a source without one of them or with one twice', async () => {
  const { longAttentionSource } = await load('src/decoder-gpu.ts');
  const long = longAttentionSource(WGSL);
  const a = WGSL.split('\n'), b = long.split('\n');
  assert.equal(b.length, a.length);
  const changed = a.map((l, i) => [l, b[i]]).filter(([x, y]) => x !== y);
  assert.deepEqual(changed, [
    ['const MAXG: u32 = 8u;', 'const MAXG: u32 = 4u;'],
    ['const SCH: u32 = 64u;', 'const SCH: u32 = 128u;'],
    ['const KP: u32 = 4u;', 'const KP: u32 = 2u;'],
    ['const KB: u32 = 4u;', 'const KB: u32 = 8u;'],
    ['const VB: u32 = 8u;', 'const VB: u32 = 16u;'],
  ]);
  assert.throws(() => longAttentionSource(WGSL.replace('const KB: u32 = 4u;', '')), /'const KB: u32 = 4u;' once/);
  assert.throws(() => longAttentionSource(`${WGSL}\nconst SCH: u32 = 64u;`), /'const SCH: u32 = 64u;' once/);
});

/**
 * The small llama (seed 23, buckets 1, 4, 8) as two TextGenerators over the
 * same weights: the WebGPU backend (with `gpuInit`) and the Wasm backend,
 * each holding `context` positions.
 */
async function smallLlamaPair(context, gpuInit = {}) {
  const { GpuDecoder } = await load('src/decoder-gpu.ts');
  const { GraphDecoder } = await load('src/decoder.ts');
  const { TextGenerator } = await load('src/text-generator.ts');
  const { assembleKernels } = await import('../assemble.mjs');
  const { jsKernels } = await import('./small-llama.mjs');
  const model = llamaModel(23);
  const graph = llamaGraph(model.formats, [1, 4, 8]);
  const gpuDec = await GpuDecoder.create({ device, graph, tensors: model.tensors, weights: model.weights, context, wgsl: WGSL, ...gpuInit });
  gpuDec.setKernels(plainKernels(device));
  const wasmDec = await GraphDecoder.create({ graph, tensors: model.tensors, weights: model.weights, context, fixed: await assembleKernels('decoder-kernels.wat'), shared: false });
  wasmDec.setKernels(jsKernels(wasmDec.memory, []));
  const webtune = fakeWebtune();
  return {
    graph, gpuDec, wasmDec,
    gpu: new TextGenerator({ webtune, manifest, decoder: gpuDec, tokenizer, report: false }),
    wasm: new TextGenerator({ webtune, manifest, decoder: wasmDec, tokenizer, report: false }),
  };
}

test('TextGenerator on the small llama with the WebGPU backend: the Wasm backend\'s texts, greedy and seeded, from tokens sampled on the GPU', { timeout: 300_000 }, async () => {
  const { TextGenerator } = await load('src/text-generator.ts');
  const { graph, gpuDec, gpu, wasm } = await smallLlamaPair(24);
  assert.equal(gpu.target, 'webgpu');
  assert.equal(wasm.target, 'wasm');
  const texts = [];
  for (const o of [{ maxTokens: 10 }, { maxTokens: 12, temperature: 1.5, topK: 10, seed: 7n }, { maxTokens: 12, temperature: 0.9, topP: 0.9, seed: 3n }, { maxTokens: 12, temperature: 6, seed: 11n }, { maxTokens: 12, temperature: 6, topK: 20, topP: 0.95, seed: 12n }]) {
    for (const prompt of ['ABCDE', 'x'.repeat(11)]) {
      const [a, b] = [await drain(gpu.generate(prompt, o)), await drain(wasm.generate(prompt, o))];
      assert.equal(a, b, `${prompt} ${JSON.stringify(o, (k, v) => (typeof v === 'bigint' ? Number(v) : v))}: WebGPU ${JSON.stringify(a)}, Wasm ${JSON.stringify(b)}`);
      // Steps run ahead and unused were forgotten: the caches hold what the Wasm backend's hold.
      assert.equal(gpu.position, wasm.position, `${prompt}: position after generating`);
      texts.push(a);
    }
  }
  // Fixed runs of steps (end-of-generation ids included), submitted ahead on WebGPU: the Wasm backend's tokens and position.
  const prompt = [5, 9, 13, 2];
  const [ga, wa] = [await gpu.nextTokens(prompt, 16, { reset: true }), await wasm.nextTokens(prompt, 16, { reset: true })];
  assert.deepEqual(ga, wa);
  assert.equal(gpu.position, prompt.length + 15);
  assert.equal(wasm.position, prompt.length + 15);
  // The GPU handing a pick back in the middle of steps run ahead (simulated on the second): the steps after it
  // are forgotten and it is run again, with its own draw: still the Wasm backend's text and position.
  const realAhead = gpuDec.ahead.bind(gpuDec);
  let aheads = 0;
  gpuDec.ahead = async (sampling) => {
    const id = await realAhead(sampling);
    return ++aheads === 2 ? -1 : id;
  };
  // Hot enough (logits of this model are hundreds apart) that each step's draw decides its token.
  const o = { maxTokens: 14, temperature: 300, topK: 20, seed: 7n };
  const [ha, hb] = [await drain(gpu.generate('ABCDE', o)), await drain(wasm.generate('ABCDE', o))];
  assert.ok(aheads >= 3, `steps ahead: ${aheads}`);
  assert.equal(ha, hb);
  // Tokens after the one handed back (drawn with the forgotten steps' draws), and tokens that depend on the draws.
  assert.ok(ha.length >= 3 && new Set(ha).size >= 2, `a text whose tokens depend on the draws: ${JSON.stringify(ha)}`);
  assert.equal(gpu.position, wasm.position);
  gpuDec.ahead = realAhead;
  // The backend's count: every step but those its fusions fold (above), and the sampling.
  assert.equal(gpu.dispatchesPerToken, gpuDec.stats.dispatchesPerToken);
  assert.ok(gpu.dispatchesPerToken > 2 * D.layers && gpu.dispatchesPerToken < graph.steps.length, `dispatches per token ${gpu.dispatchesPerToken}`);
  assert.equal(wasm.dispatchesPerToken, null);
  // Refused where WebGPU is absent.
  await assert.rejects(TextGenerator.load({ server: 'http://127.0.0.1:9', model: 'x', target: 'webgpu' }), /WebGPU is not available here/);
  console.log(`# small llama: ${texts.length} texts equal on WebGPU and Wasm (${JSON.stringify(texts)}); ${gpu.dispatchesPerToken} dispatches a token`);
  gpu.close();
});

test('decode steps several a submit (stepsPerSubmit 3): the Wasm backend\'s texts and positions, greedy and seeded, with fewer submits than tokens; aheadMany refuses what it cannot run', { timeout: 300_000 }, async () => {
  const { MAX_STEPS_PER_SUBMIT } = await load('src/decoder-gpu.ts');
  await assert.rejects(smallLlamaPair(24, { stepsPerSubmit: MAX_STEPS_PER_SUBMIT + 1 }), /stepsPerSubmit 5: 1 to 4/);
  const { gpuDec, gpu, wasm } = await smallLlamaPair(40, { stepsPerSubmit: 3 });
  assert.equal(gpuDec.aheadLimit, 6);
  for (const o of [{ maxTokens: 10 }, { maxTokens: 13, temperature: 1.5, topK: 10, seed: 7n }, { maxTokens: 12, temperature: 6, topK: 20, topP: 0.95, seed: 12n }]) {
    for (const prompt of ['ABCDE', 'x'.repeat(11)]) {
      const [a, b] = [await drain(gpu.generate(prompt, o)), await drain(wasm.generate(prompt, o))];
      assert.equal(a, b, `${prompt} ${JSON.stringify(o, (k, v) => (typeof v === 'bigint' ? Number(v) : v))}: WebGPU ${JSON.stringify(a)}, Wasm ${JSON.stringify(b)}`);
      // Steps of a submit past the text's end (or past maxTokens) were forgotten.
      assert.equal(gpu.position, wasm.position, `${prompt}: position after generating`);
    }
  }
  // Runs of steps whose count is no multiple of 3, the last submit short: the Wasm backend's tokens.
  for (const n of [7, 17]) {
    const prompt = [5, 9, 13, 2];
    const s0 = gpuDec.stats.submits, t0 = gpuDec.stats.tokens;
    const [ga, wa] = [await gpu.nextTokens(prompt, n, { reset: true }), await wasm.nextTokens(prompt, n, { reset: true })];
    assert.deepEqual(ga, wa, `${n} steps`);
    assert.equal(gpu.position, prompt.length + n - 1);
    const submits = gpuDec.stats.submits - s0, tokens = gpuDec.stats.tokens - t0;
    // The prompt's run, then the n - 1 steps about three a submit (steps run ahead past the end included).
    assert.ok(submits <= 1 + Math.ceil((n - 1) / 3) + 1 && tokens >= prompt.length + n - 1, `${n} steps: ${submits} submits for ${tokens} tokens`);
  }
  assert.throws(() => gpuDec.aheadMany([]), /1 to 3 steps, got 0/);
  const greedy = { temperature: 0, topK: 0, topP: 1, u: 0 };
  assert.throws(() => gpuDec.aheadMany([greedy, greedy, greedy, greedy]), /1 to 3 steps, got 4/);
  gpuDec.reset();
  await gpuDec.prefill(Array.from({ length: 38 }, (_, i) => (i * 7 + 1) % D.vocab));
  assert.throws(() => gpuDec.aheadMany([greedy, greedy, greedy]), /3 steps from position 38 pass the context of 40/);
  gpu.close();
  wasm.close();
});

test('a lost GPU device: the call in flight fails in one line, never hangs; with a fallback the next call runs on Wasm, without one it says so', { timeout: 300_000 }, async () => {
  const { GpuDecoder } = await load('src/decoder-gpu.ts');
  const { GraphDecoder } = await load('src/decoder.ts');
  const { TextGenerator } = await load('src/text-generator.ts');
  const { assembleKernels } = await import('../assemble.mjs');
  const { jsKernels } = await import('./small-llama.mjs');
  const model = llamaModel(23);
  const graph = llamaGraph(model.formats, [1, 4, 8]);
  const wasmGen = async () => {
    const dec = await GraphDecoder.create({ graph, tensors: model.tensors, weights: model.weights, context: 48, fixed: await assembleKernels('decoder-kernels.wat'), shared: false });
    dec.setKernels(jsKernels(dec.memory, []));
    return new TextGenerator({ webtune: fakeWebtune(), manifest, decoder: dec, tokenizer, report: false });
  };
  const gpuGen = async (fallback) => {
    const { device: own } = await dawnDevice();
    const dec = await GpuDecoder.create({ device: own, graph, tensors: model.tensors, weights: model.weights, context: 48, wgsl: WGSL });
    dec.setKernels(plainKernels(own));
    const gen = new TextGenerator({ webtune: fakeWebtune(), manifest, decoder: dec, tokenizer, report: false });
    gen.fallback = fallback;
    return { gen, device: own };
  };
  // Settles within 30 s or fails: a lost device must never leave a call hanging.
  const settled = (p) => Promise.race([p.then((v) => ({ v }), (e) => ({ e })), new Promise((_, no) => setTimeout(() => no(new Error('hung after the device was lost')), 30_000))]);
  const o = { maxTokens: 12, temperature: 300, topK: 20, seed: 5n };
  const want = await drain((await wasmGen()).generate('ABCDE', o));

  // Lost between calls, with a fallback (as target 'auto' sets): the next call is the Wasm backend's, from empty caches.
  const a = await gpuGen(wasmGen);
  assert.equal(await drain(a.gen.generate('ABCDE', o)), want);
  a.device.destroy();
  await a.device.lost;
  const r1 = await settled(drain(a.gen.generate('ABCDE', o)));
  assert.equal(r1.e, undefined, `after the loss: ${r1.e}`);
  assert.equal(r1.v, want);
  assert.equal(a.gen.target, 'wasm');
  assert.equal(a.gen.choice.how, 'device-lost');
  assert.match(a.gen.choice.reason, /^the GPU device was lost \(.+\); the model runs on Wasm now$/);

  // Lost in the middle of a generation (steps submitted ahead): that call fails in one line, the next runs on Wasm.
  const b = await gpuGen(wasmGen);
  let pieces = 0;
  const mid = settled((async () => {
    for await (const _ of b.gen.generate('ABCDE', { ...o, maxTokens: 40 })) if (++pieces === 2) b.device.destroy();
  })());
  const r2 = await mid;
  await b.device.lost;
  if (r2.e) assert.match(String(r2.e.message), /^the GPU device was lost \(.+\): this call stopped, the next goes on with Wasm$/);
  const r3 = await settled(drain(b.gen.generate('ABCDE', o)));
  assert.equal(r3.v, want, `after a loss mid-generation: ${r3.e}`);

  // Without a fallback (target 'webgpu'): one line, at once.
  const c = await gpuGen(null);
  c.device.destroy();
  await c.device.lost;
  const r4 = await settled(drain(c.gen.generate('ABCDE', o)));
  assert.match(String(r4.e?.message), /^the GPU device was lost \(.+\): load the model again \(target 'auto' goes on with Wasm by itself\)$/);
  console.log(`# device lost: the next call on Wasm ("${r1.v}"); mid-generation: ${r2.e ? `"${r2.e.message}"` : 'ended'} after ${pieces} pieces`);
});

