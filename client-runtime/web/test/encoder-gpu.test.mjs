// SentenceEncoder on WebGPU (Chromium's SwiftShader adapter) against a real
// `webtune serve --models-dir` holding the imported all-MiniLM-L6-v2,
// checked against the f64 reference of scripts/reference/minilm_f64.py:
// token ids equal, cosine >= 0.9999 for every text, on the default kernels
// and after tuned kernels are swapped in (the bind groups made before the
// swaps stay in use); the measured latency reaches the server as 'webgpu';
// then the bad inputs.
//
// Needs what encoder.test.mjs needs (scripts/test.sh sets it up).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { WEBGPU_FLAGS, checkEmbeddings, cosine, encodeAll as encodeIn, openEncoderPage, reportedPlan } from './harness.mjs';

const NAME = process.env.WEBTUNE_MODEL_NAME ?? 'all-minilm-l6-v2';
let ref, page, close;

before(async () => {
  ({ ref, page, close } = await openEncoderPage('webtune-encoder-gpu', WEBGPU_FLAGS));
});

after(async () => {
  await close?.();
});

const encodeAll = (texts) => encodeIn(page, texts);
/** Checks the embeddings of `refs` (reference entries, in the order encoded); returns the worst cosine. */
const check = (got, refs, when) => checkEmbeddings(got, refs, ref.dim, when);

// SwiftShader runs all-MiniLM-L6-v2 at about a second per hundred tokens,
// and tuning a kernel of a long bucket costs tens of seconds. So: the short
// texts first (at most 8 tokens: the 4×8 bucket; all but one of them, so
// that a batch has a padded slot of length 0), on the default kernels; then
// that bucket's six kernels are tuned; then every text, the short ones on
// the tuned kernels through the bind groups made before the swaps, the
// longer ones on the default kernels of new buckets.
test('all-MiniLM-L6-v2 on WebGPU matches the f64 reference, before and after tuning', { timeout: 600_000 }, async () => {
  const short = ref.texts.filter((t) => t.token_ids.length <= 8).slice(1);
  assert.equal(short.length % 4, 3, 'a batch of the short texts has a padded slot');
  const load = await page.evaluate(async ({ name }) => {
    const { SentenceEncoder } = await import('/web/webtune.js');
    const t0 = performance.now();
    window.enc = await SentenceEncoder.load({ model: name, target: 'webgpu', maxBatch: 4, maxCandidates: 2, budgetMs: 100 });
    window.swaps = [];
    window.enc.webtune.addEventListener('swap', (e) => window.swaps.push(e.detail));
    return { ms: performance.now() - t0, target: window.enc.webtune.target, dim: window.enc.dim, key: window.enc.webtune.session.device_key };
  }, { name: NAME });
  assert.equal(load.target, 'webgpu');
  assert.equal(load.dim, ref.dim);
  assert.match(load.key, /^gpu-/);
  const first = await encodeAll(short.map((t) => t.text));
  const worst0 = check(first, short, 'default kernels');
  const again = await encodeAll(short.map((t) => t.text));
  assert.deepEqual(again.emb, first.emb, 'a second encode on the same bucket gives the same embeddings');

  const tuning = await page.evaluate(async () => {
    const t0 = performance.now();
    while (performance.now() - t0 < 150_000) {
      const r = await window.enc.idle(100);
      if (r.done) break;
      await new Promise((res) => setTimeout(res, r.worked ? 0 : 5));
    }
    const status = window.enc.webtune.status();
    return { s: (performance.now() - t0) / 1000, swaps: window.swaps.length, status, evaluated: status.reduce((a, x) => a + x.evaluated, 0) };
  });
  assert.equal(tuning.status.length, 6, 'one bucket of six kernels');
  assert.ok(tuning.evaluated >= 6, `only ${tuning.evaluated} candidates evaluated`);
  assert.ok(tuning.swaps >= 1, 'no tuned kernel was swapped in');

  const texts = ref.texts.map((t) => t.text);
  const all = await encodeAll(texts);
  const worst1 = check(all, ref.texts, 'tuned kernels');
  // The published sentence-transformers scores for this model.
  for (const p of ref.pairs) {
    const ia = texts.indexOf(p.a), ib = texts.indexOf(p.b);
    assert.ok(Math.abs(cosine(all.emb[ia], all.emb[ib]) - p.published) < 1e-3, `${p.a} / ${p.b}`);
  }
  console.log(`# webgpu (SwiftShader): load ${(load.ms / 1000).toFixed(1)} s; short texts ${first.ms.toFixed(0)} ms (kernels made), then ${again.ms.toFixed(0)} ms; ` +
    `worst cosine ${worst0.toFixed(7)} default, ${worst1.toFixed(7)} after ${tuning.swaps} swaps (${tuning.evaluated} candidates, ${tuning.s.toFixed(1)} s); ` +
    `all ${texts.length} texts ${all.ms.toFixed(0)} ms`);
});

test('the measured latency reaches the server as target webgpu', { timeout: 120_000 }, async () => {
  // Four short texts: the 4×8 bucket, already made; by the 5th timed call of it a report is sent.
  const r = await reportedPlan(page, Array.from({ length: 4 }, (_, i) => `text number ${i}`), 5, 4, 8);
  assert.ok(r, 'no latency report reached the plan in 5 s');
  assert.equal(r.targets.length, 1);
  assert.equal(r.targets[0].target, 'webgpu');
  assert.ok(r.targets[0].median_ms > 0 && r.targets[0].median_ms < 60_000, `median ${r.targets[0].median_ms} ms`);
});

test("target 'auto': the first device of its class measures both, the next follows the plan", { timeout: 300_000 }, async () => {
  const one = ref.texts.find((t) => t.token_ids.length > 3 && t.token_ids.length <= 8);
  const r = await page.evaluate(async ({ name, text }) => {
    const { SentenceEncoder } = await import('/web/webtune.js');
    const out = [];
    for (let i = 0; i < 2; i++) {
      const enc = await SentenceEncoder.load({ model: name, target: 'auto', autoLength: 8, tune: false });
      const [e] = await enc.encode([text]);
      out.push({ choice: enc.choice, target: enc.target, emb: Array.from(e) });
      enc.close();
    }
    return out;
  }, { name: NAME, text: one.text });
  const [first, second] = r;
  assert.equal(first.choice.how, 'measured', first.choice.reason);
  assert.equal(first.choice.seq_len, 8);
  const faster = first.choice.ms.wasm <= first.choice.ms.webgpu ? 'wasm' : 'webgpu';
  assert.equal(first.choice.target, faster);
  assert.equal(first.target, faster);
  // Both medians were reported through one session: the plan now decides.
  assert.equal(second.choice.how, 'plan', second.choice.reason);
  assert.equal(second.choice.target, faster);
  assert.match(second.choice.reason, new RegExp(`^${faster} is faster at batch 1, seq_len 8`));
  for (const x of r) assert.ok(cosine(x.emb, one.embedding) >= 0.9999, `${x.target}: cosine ${cosine(x.emb, one.embedding)}`);
  console.log(`# auto: measured wasm ${first.choice.ms.wasm.toFixed(1)} ms, webgpu ${first.choice.ms.webgpu.toFixed(1)} ms at 1x8 -> ${faster}; then by plan`);
});

test('bad input on WebGPU: clear errors', { timeout: 120_000 }, async () => {
  const r = await page.evaluate(async ({ name }) => {
    const { SentenceEncoder } = await import('/web/webtune.js');
    const enc = window.enc;
    const err = async (f) => {
      try {
        await f();
        return 'no error';
      } catch (e) {
        return `${e.name}: ${e.message}`;
      }
    };
    const out = {
      empty: await err(() => enc.encode([])),
      number: await err(() => enc.encode(['ok', 42])),
      notArray: await err(() => enc.encode('text')),
      device: await err(() => SentenceEncoder.load({ model: name, target: 'webgpu', device: {} })),
    };
    enc.close();
    out.closed = await err(() => enc.encode(['after close']));
    // A browser without WebGPU.
    Object.defineProperty(navigator, 'gpu', { value: undefined });
    out.noGpu = await err(() => SentenceEncoder.load({ model: name, target: 'webgpu' }));
    return out;
  }, { name: NAME });
  assert.match(r.empty, /^Error: encode: the list of texts is empty/);
  assert.match(r.number, /^TypeError: encode: texts\[1\] is number, expected a string/);
  assert.match(r.notArray, /^TypeError: encode: expected an array of strings/);
  assert.match(r.device, /^TypeError: SentenceEncoder.load: `device` must be a GPUDevice/);
  assert.match(r.closed, /^Error: encode: this SentenceEncoder is closed/);
  assert.match(r.noGpu, /WebGPU is not available in this browser/);
});
