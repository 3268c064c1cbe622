// TextGenerator with target 'webgpu' on SmolLM2-135M-Instruct (its decoder
// graph on WebGPU, every product a WGSL kernel of matmul_q4_1 or
// matmul_q8_0 from the server) against a real `webtune serve --models-dir`,
// checked against the f64 reference of scripts/reference/smollm2_f64.py:
// - in Node through Dawn on SwiftShader (the runtime built from src as
//   build.mjs builds it): logits teacher-forced on the reference's greedy
//   tokens within 0.05 of the reference's over the first STEPS steps of two
//   prompts, and the greedy tokens sampled on the GPU equal to the
//   reference's where its top-two margin exceeds the worst difference;
// - in headless Chromium (WebGPU on SwiftShader), /web/webtune.js as the
//   server serves it: the same on one prompt, `generate` at temperature 0
//   yields the text of those tokens, and `target: 'auto'` picks a target and
//   says why.
// SwiftShader runs a step of the 135M model in seconds, so only a few steps
// are run, on the default kernels (no tuning).
//
// Needs what textgen.test.mjs needs (scripts/test.sh sets it up), and
// SwiftShader's Vulkan driver (Debian's chromium ships it).

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { assembleKernels } from '../assemble.mjs';
import { dawnDevice, installNavigator, releaseDawn } from './dawn.mjs';
import { BIN, CHROMIUM, WEBGPU_FLAGS, launchChromium, startServer } from './harness.mjs';
import { load } from './load.mjs';

const NAME = process.env.WEBTUNE_LLM_NAME ?? 'smollm2-135m-instruct';
const BOUND = 0.05;
/** Teacher-forced steps per prompt. */
const STEPS = 3;
const PROMPTS = ['plain_short', 'plain_code'];
let ref, server, work, device;

before(async () => {
  const models = process.env.WEBTUNE_MODELS_DIR, refPath = process.env.WEBTUNE_LLM_REF;
  assert.ok(existsSync(BIN), `no server binary at ${BIN} (set WEBTUNE_BIN)`);
  assert.ok(models && existsSync(models), 'WEBTUNE_MODELS_DIR must name a model store with the imported model (scripts/test.sh imports it)');
  assert.ok(refPath && existsSync(refPath), 'WEBTUNE_LLM_REF must name the SmolLM2 f64 reference JSON (eval "$(scripts/fetch-model.sh)")');
  ref = JSON.parse(readFileSync(refPath, 'utf8'));
  work = mkdtempSync(join(tmpdir(), 'webtune-textgen-gpu-'));
  server = await startServer(join(work, 'textgen-gpu.sqlite'), ['--quorum', '1', '--models-dir', models]);
});

after(() => {
  releaseDawn(device);
  server?.proc.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

/**
 * Teacher-forces `prompts` (reference entries) through `gen` (a
 * TextGenerator, in this process or a page's): per prompt the worst logit
 * difference over the first `steps` steps (the 16 top and 16 fixed ids
 * each step) and the greedy token the GPU sampled at each.
 */
async function teacherForce(gen, prompts, fixed, steps) {
  const out = [];
  for (const p of prompts) {
    let worst = 0, at = -1;
    const greedy = [];
    const t0 = performance.now();
    let logits = await gen.forward(p.token_ids, { reset: true });
    const prefillMs = performance.now() - t0;
    for (let s = 0; s < steps; s++) {
      const st = p.steps[s];
      [...st.top_ids, ...fixed].forEach((id, j) => {
        const d = Math.abs(logits[id] - [...st.top_logits, ...st.fixed_logits][j]);
        if (!(d <= worst)) {
          worst = Number.isNaN(d) ? Infinity : d;
          at = s;
        }
      });
      if (s + 1 < steps) logits = await gen.forward([st.token]);
    }
    // The same prompt's greedy tokens as the GPU samples them (only the ids read back).
    let tok = await gen.nextToken(p.token_ids, { reset: true });
    for (let s = 0; s < steps; s++) {
      greedy.push(tok);
      if (s + 1 < steps) tok = await gen.nextToken([tok]);
    }
    out.push({ label: p.label, worst, at, greedy, prefillMs, tokens: p.token_ids.length, dispatches: gen.dispatchesPerToken });
  }
  return out;
}

function check(results, when) {
  for (const r of results) {
    const p = ref.prompts.find((q) => q.label === r.label);
    console.log(`# ${when}: ${r.label} (${r.tokens} prompt tokens): worst logit difference ${r.worst.toFixed(5)} (step ${r.at}); prefill ${r.prefillMs.toFixed(0)} ms; ${r.dispatches} dispatches a token; greedy ${JSON.stringify(r.greedy)}`);
    assert.ok(r.worst <= BOUND, `${when}: ${r.label}: logits differ from the reference by ${r.worst} at step ${r.at} (bound ${BOUND})`);
    for (let s = 0; s < r.greedy.length; s++) {
      if (r.greedy[s] === p.greedy_ids[s]) continue;
      assert.ok(p.steps[s].margin < r.worst, `${when}: ${r.label}: greedy step ${s} is ${r.greedy[s]}, the reference's ${p.greedy_ids[s]} by a margin of ${p.steps[s].margin}`);
      break;
    }
  }
}

const prompts = (labels) => labels.map((l) => ref.prompts.find((p) => p.label === l) ?? assert.fail(`the reference has no prompt ${l}`));

test('Node through Dawn (SwiftShader): SmolLM2 on WebGPU within 0.05 of f64, greedy tokens sampled on the GPU as the reference\'s', { timeout: 600_000 }, async () => {
  await installNavigator();
  ({ device } = await dawnDevice());
  const { TextGenerator } = await load('src/index.ts', {
    __WEBTUNE_DECODER_WGSL__: JSON.stringify(readFileSync(new URL('../src/decoder-kernels.wgsl', import.meta.url), 'utf8')),
    __WEBTUNE_DECODER_KERNELS__: JSON.stringify((await assembleKernels('decoder-kernels.wat')).toString('base64')),
  });
  const t0 = performance.now();
  const gen = await TextGenerator.load({ server: server.url, model: NAME, target: 'webgpu', device, context: 64, tune: false, cache: false, report: false });
  assert.equal(gen.target, 'webgpu');
  console.log(`# Dawn: loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s, ${(gen.memoryBytes / 2 ** 20).toFixed(0)} MiB of GPU buffers`);
  check(await teacherForce(gen, prompts(PROMPTS), ref.fixed_ids, STEPS), 'Dawn');
  gen.close();
});

test('headless Chromium (SwiftShader): TextGenerator target \'webgpu\' within 0.05 of f64, generate\'s greedy text, and target \'auto\'', { timeout: 900_000 }, async () => {
  assert.ok(CHROMIUM, 'no Chromium: apt-get install chromium (or set CHROMIUM)');
  const browser = await launchChromium(`${work}/profile`, WEBGPU_FLAGS);
  try {
    const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
    page.on('pageerror', (e) => console.log(`# page error: ${e}`));
    page.on('console', (m) => m.type() === 'error' && console.log(`# console: ${m.text()}`));
    await page.goto(`${server.url}/healthz`);
    await page.evaluate(async (name) => {
      window.wt = await import('/web/webtune.js');
      window.gen = await window.wt.TextGenerator.load({ model: name, target: 'webgpu', context: 64, tune: false, report: false });
    }, NAME);
    const results = await page.evaluate(async ({ prompts, fixed, steps, fn }) => {
      const teacherForce = new Function(`return (${fn})`)();
      return teacherForce(window.gen, prompts, fixed, steps);
    }, { prompts: prompts(PROMPTS.slice(0, 1)), fixed: ref.fixed_ids, steps: STEPS, fn: teacherForce.toString() });
    check(results, 'Chromium');
    // generate() at temperature 0: the text of the GPU's greedy tokens.
    const p = prompts(PROMPTS.slice(0, 1))[0], r = results[0];
    const got = await page.evaluate(async ({ text, n, ids }) => {
      const pieces = [];
      for await (const s of window.gen.generate(text, { maxTokens: n })) pieces.push(s);
      return { text: pieces.join(''), want: window.gen.decode(ids), stats: window.gen.stats, target: window.gen.target };
    }, { text: p.text, n: STEPS, ids: r.greedy.filter((t) => !ref.eog_ids.includes(t)) });
    assert.equal(got.target, 'webgpu');
    if (!r.greedy.some((t) => ref.eog_ids.includes(t))) assert.equal(got.text, got.want);
    console.log(`# Chromium: generate ${JSON.stringify(got.text)} (${got.stats.generatedTokens} tokens, prefill ${got.stats.prefillMs.toFixed(0)} ms, decode ${(got.stats.decodeMs / Math.max(1, got.stats.stepMs.length)).toFixed(0)} ms a token)`);
    // 'auto': the plan, or both targets timed on a few decode steps; one answer and why.
    const auto = await page.evaluate(async (name) => {
      window.gen.close();
      const g = await window.wt.TextGenerator.load({ model: name, target: 'auto', autoLength: 16, context: 64, tune: false, threads: 1 });
      const out = { target: g.target, choice: g.choice };
      g.close();
      return out;
    }, NAME);
    assert.ok(['wasm', 'webgpu'].includes(auto.target));
    assert.equal(auto.choice.target, auto.target);
    assert.ok(['plan', 'measured'].includes(auto.choice.how), JSON.stringify(auto.choice));
    console.log(`# Chromium: target 'auto' chose ${auto.target} (${auto.choice.how}: ${auto.choice.reason})`);
  } finally {
    await browser.close();
  }
});
