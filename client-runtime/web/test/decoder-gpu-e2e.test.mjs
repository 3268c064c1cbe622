// TextGenerator with target 'webgpu' on SmolLM2-135M-Instruct (its decoder
// graph on WebGPU, every product a WGSL kernel of matmul_q4_1 or
// matmul_q8_0 from the server) against a real `webtune serve --models-dir`,
// checked against the f64 reference of scripts/reference/smollm2_f64.py:
// - in Node through Dawn on SwiftShader (the runtime built from src as
//   build.mjs builds it): logits teacher-forced on the reference's greedy
//   tokens within 0.05 of the reference's over the first STEPS steps of a
//   prompt, each step's argmax and then the greedy token sampled on the GPU
//   equal to the reference's where its top-two margin exceeds the worst
//   difference;
// - in headless Chromium (WebGPU on SwiftShader), /web/webtune.js as the
//   server serves it: the same, and the logits equal Node's within 1e-3.
// SwiftShader runs a decode step of the 135M model in about ten seconds on
// two cores, so the prompt is fed a token at a time (one bucket's kernels)
// and only a few steps run, on the default kernels (no tuning).
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
const STEPS = 2;
const PROMPT = 'plain_short';
let ref, server, work, device;
/** The first 64 logits of the last teacher-forced step in Node, for Chromium's. */
let dawnFirst = null;

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
 * Teacher-forces prompt `p` (a reference entry) through `gen` (a
 * TextGenerator), its tokens fed one at a time (SwiftShader takes seconds
 * a step; one row bucket's kernels only): the worst logit difference over
 * the first `steps` steps (the 16 top and 16 fixed ids each step, all of
 * them at step 0), each step's argmax, then the greedy token the GPU
 * samples (only its id read back) after the last step's token.
 */
async function teacherForce(gen, p, fixed, steps) {
  let worst = 0, at = -1, logits = null;
  const argmax = [];
  const t0 = performance.now();
  for (const [i, id] of p.token_ids.entries()) logits = await gen.forward([id], { reset: i === 0 });
  const feedMs = performance.now() - t0;
  for (let s = 0; s < steps; s++) {
    const st = p.steps[s];
    const want = [...st.top_logits, ...st.fixed_logits];
    [...st.top_ids, ...fixed].forEach((id, j) => {
      const d = Math.abs(logits[id] - want[j]);
      if (!(d <= worst)) {
        worst = Number.isNaN(d) ? Infinity : d;
        at = s;
      }
    });
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    argmax.push(best);
    if (s + 1 < steps) logits = await gen.forward([st.token]);
  }
  const t1 = performance.now();
  const greedy = await gen.nextToken([p.steps[steps - 1].token]);
  const stepMs = performance.now() - t1;
  return { label: p.label, worst, at, argmax, greedy, feedMs, stepMs, tokens: p.token_ids.length, dispatches: gen.dispatchesPerToken, first: Array.from(logits.subarray(0, 64)) };
}

function check(r, steps, when) {
  const p = ref.prompts.find((q) => q.label === r.label);
  console.log(`# ${when}: ${r.label} (${r.tokens} prompt tokens fed one at a time in ${(r.feedMs / 1000).toFixed(1)} s): worst logit difference ${r.worst.toFixed(5)} (step ${r.at}) over ${steps} steps; ` +
    `a greedy step ${(r.stepMs / 1000).toFixed(1)} s, ${r.dispatches} dispatches`);
  assert.ok(r.worst <= BOUND, `${when}: ${r.label}: logits differ from the reference by ${r.worst} at step ${r.at} (bound ${BOUND})`);
  for (let s = 0; s < steps; s++)
    if (r.argmax[s] !== p.steps[s].token) assert.ok(p.steps[s].margin < r.worst, `${when}: ${r.label}: step ${s} argmax ${r.argmax[s]}, the reference's ${p.steps[s].token} by a margin of ${p.steps[s].margin}`);
  // The GPU's greedy pick after the reference's tokens: the reference's next token.
  if (r.greedy !== p.steps[steps].token) assert.ok(p.steps[steps].margin < r.worst, `${when}: ${r.label}: the GPU sampled ${r.greedy}, the reference's greedy token is ${p.steps[steps].token} by a margin of ${p.steps[steps].margin}`);
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
  const r = await teacherForce(gen, prompts([PROMPT])[0], ref.fixed_ids, STEPS);
  check(r, STEPS, 'Dawn');
  dawnFirst = r.first;
  gen.close();
});

test('headless Chromium (SwiftShader): TextGenerator target \'webgpu\' within 0.05 of f64, as in Node', { timeout: 600_000 }, async () => {
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
    const r = await page.evaluate(async ({ p, fixed, steps, fn }) => {
      const teacherForce = new Function(`return (${fn})`)();
      return teacherForce(window.gen, p, fixed, steps);
    }, { p: prompts([PROMPT])[0], fixed: ref.fixed_ids, steps: STEPS, fn: teacherForce.toString() });
    check(r, STEPS, 'Chromium');
    // The same kernels' results on the same device as Node's through Dawn.
    if (dawnFirst) {
      const d = Math.max(...r.first.map((v, i) => Math.abs(v - dawnFirst[i])));
      console.log(`# Chromium against Node's Dawn: first 64 logits within ${d.toExponential(2)}`);
      assert.ok(d < 1e-3, `Chromium's logits differ from Dawn-in-Node's by ${d}`);
    }
    const target = await page.evaluate(() => {
      const t = window.gen.target;
      window.gen.close();
      return t;
    });
    assert.equal(target, 'webgpu');
  } finally {
    await browser.close();
  }
});
