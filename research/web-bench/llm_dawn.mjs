// A language model on WebGPU through Dawn, Chromium's WebGPU implementation,
// in Node (the npm package `webgpu`, Dawn's own binding): the browser
// runtime's built module (client-runtime/web/dist/webtune.js), unchanged,
// loads `TextGenerator` with target 'webgpu' from a `webtune serve`, tunes
// its kernels through the normal tuning path (`gen.idle()`), then times it.
// For the GPU machine, where there is no browser (issue 37's Benchmarks).
// Not a test: it prints JSON lines for BENCHMARKS.md.
//
//   node research/web-bench/llm_dawn.mjs --server URL --model NAME
//        [--context 1280] [--tune-s 120] [--steps 64] [--rounds 3]
//        [--prefill 128] [--long 1024] [--probe-dispatches 4096] [--probe-mib 256] [--profile-runs 5]
//        [--runtime PATH/webtune.js] [--webgpu PATH/webgpu/index.js] [--dawn-flags a,b]
//        [--fusions-ab ROUNDS] [--short-ab ROUNDS] [--merge-ab ROUNDS] [--ab-only 1]
//        [--tg-reps N] [--clocks-ms 50] [--omit-runs N] [--record-probe REPS] [--submit-ab K [--submit-ab-rounds 6]]
//        [--stream-probe STEPS [--stream-rounds 3] [--stream-forms a,b]] [--long-ab ROUNDS]
//        [--kernels-ab ROUNDS --wgsl-b PATH] [--tuned-ab ROUNDS] [--server-ab ROUNDS --server-b URL]
//
// Lines (`what` names each):
// - `adapter`: Dawn's adapter (vendor, architecture, device) and features;
// - `load`: seconds to load (manifest, graph, weights, tokenizer, the decode
//   step's kernels), GPU bytes held;
// - `tuning` (with --tune-s > 0): after one untimed prefill of --prefill
//   tokens and a few decode steps (so that the prefill bucket's and the
//   decode step's kernels exist), `gen.idle()` until done or --tune-s
//   seconds: kernels, candidates evaluated, swaps; `first_answer`: per
//   kernel, the server's first answer's µs over the tuned one's (from the
//   swaps' interleaved timings);
// - `prefill`: a --prefill-token prompt from an empty cache, greedy next
//   token sampled on the GPU (only its id read back): median of --rounds;
//   tokens/s and time to first token (the same call: prefill plus the
//   first token);
// - `decode`: after a prompt of --prefill (context 128) and --long (1024)
//   tokens, --steps greedy decode steps (each fed the previous step's
//   token, whatever it is: end-of-generation ids do not stop it, so a model
//   of seeded random weights runs as a real one) through `nextTokens`, as
//   `generate` runs them (submitted ahead of their read-backs), tokens/s
//   over the steps, median of --rounds; dispatches per token; and the same
//   steps one at a time (`nextToken`, each read back before the next);
// - `probe_dispatch`: --probe-dispatches empty dispatches (a workgroup of
//   one thread, a bind group of one buffer) in one pass and one submit,
//   µs each (the time of N less the time of 1, over N − 1);
// - `probe_copy`: a --probe-mib MiB buffer copied to another, 8 copies in
//   one submit: GB/s of bytes copied (each byte read once and written once);
// - `floor`: per decode step, the weights blob's bytes plus the K and V
//   cache read up to the position (f32), over the copy rate, against
//   dispatches × the empty dispatch's cost; the larger is the floor, and
//   the measured step is reported as that fraction of it.
// - `profile` (where the device has `timestamp-query`): one decode step at
//   each context and the prefill through `GpuDecoder.profile`, over --profile-runs:
//   host recording ms, wall ms to the token's read-back, the pass's GPU ms,
//   and each dispatch's GPU ms (a pass each, the mean over the runs: Dawn
//   quantises timestamps) summed by kind;
// - `probe_readback`: an 8-byte copy submitted and mapped, ms (the floor of
//   one step's round trip);
// - `short_ab` (with --short-ab > 0, after any fusions_ab): the same
//   rounds with the decode step's attention one dispatch a layer at short
//   contexts (the backend's default) against always split (shortAttention 0).
// - `fusions_ab` (with --fusions-ab > 0, right after loading, before any
//   tuning): the decode step with the graph's fused runs (`graph.fused`: one
//   product each) against the same graph without them (each step its own
//   dispatch, as before them), on the same device and kernel source:
//   dispatches a token; host recording ms (`GpuDecoder.recordTimes`: the
//   step's command buffer built and finished, never submitted; 4×ROUNDS
//   ABBA rounds of the median of 20); then ROUNDS profiled steps each,
//   alternating (`GpuDecoder.profile` without its pass-per-dispatch run):
//   the run's start to its submit, the pass's GPU ms, the wall ms; medians;
//   with --ab-only 1 nothing else runs.
// - `merge_ab` (with --merge-ab > 0, after any fusions_ab and short_ab,
//   before tuning): the decode step with the attention in parts merged by
//   the output projection (`+merge`, the backend's default) against the
//   same backend with a merge dispatch a layer (mergeAttention false), each
//   in a TextGenerator of its own on the same device and kernel source, at
//   --prefill and --long positions: --steps decode steps through
//   `nextTokens` in ABBA rounds (tokens/s), then profiled steps alternating
//   (the run to its submit, the pass's GPU ms); dispatches a token.
// - `submit_ab` (with --submit-ab K > 1, after tuning): the generator's
//   backend (one decode step a submit) against one with K steps a submit
//   (GpuDecoderInit.stepsPerSubmit), decode rates in ABBA rounds as
//   merge_ab's;
// - `long_ab` (with --long-ab ROUNDS > 0, after tuning and any submit_ab):
//   the generator's backend (the attention in parts in its long form past
//   NP·64 positions, the default) against one without it (longAttention
//   0), decode rates in ABBA rounds as merge_ab's: at --prefill positions
//   both run the same kernels (a control), at --long the long form;
// - `kernels_ab` (with --kernels-ab ROUNDS > 0 and --wgsl-b PATH, after
//   long_ab): the generator's backend against one whose fixed kernels come
//   from PATH (a previous decoder-kernels.wgsl) without the long form
//   (longAttention 0), the tuned products the same: the previous version
//   of the fixed kernels, decode rates in ABBA rounds as merge_ab's;
// - `tuned_ab` (with --tuned-ab ROUNDS > 0, right after tuning; with
//   --ab-only 1 nothing runs after it): the generator's backend, its
//   decode products as tuning left them, against a backend made before
//   tuning whose products stay the server's first answers (each kernel's
//   implementation as it was then, frozen): decode rates in ABBA rounds as
//   merge_ab's, at full clock. Tuning times its candidates at whatever
//   clock the idle GPU has; this says whether what it chose is faster
//   where the model runs;
// - `server_ab` (with --server-ab ROUNDS > 0 and --server-b URL, right after
//   loading and any merge_ab, before tuning): the generator against a
//   second one of the same model loaded from another `webtune serve` (for
//   example the previous build, its own database), on the same device,
//   both on their servers' first answers (the same schedules where the
//   two builds share the tuner, each compiled by its own build): decode
//   rates in ABBA rounds as merge_ab's, at --prefill and --long positions;
//   a compiler change's A/B in one call; with --ab-kinds N (this and the
//   other rate A/Bs), N profiles a side, alternating, each dispatch in a
//   pass of its own: the pass's mean and µs a dispatch by kind, each kind's
//   ratio (a kernel's change, where the rates are bound by the host);
// - `decode_tg` (with --tg-reps N > 0): llama-bench's protocol for `tg` at a
//   depth, at the same two contexts: one untimed warm-up run of --steps
//   steps, then N runs back to back, each an untimed prompt of the depth
//   from an empty cache and --steps timed decode steps through
//   `nextTokens`: tokens/s mean and standard deviation, as llama-bench
//   prints them;
// - `leave_one_out` (with --omit-runs N > 0 and `timestamp-query`): at each
//   context, for each kind of dispatch of the decode step, N pairs of
//   profiled steps at the same position, one whole and one without that
//   kind's dispatches (`GpuDecoder.profile`'s `omit`), alternating: the
//   pass's GPU ms of each (means: timestamps come in steps), and the
//   difference, what the kind costs inside one pass (its dispatches' own
//   time and the barriers they add);
// - `record_probe` (with --record-probe REPS > 0, right after loading, before
//   any A/B; with --ab-only 1 nothing else runs): where the host's time of
//   recording a decode step goes, each form REPS times built into a new
//   encoder and finished, never submitted (median ms): `encode` (the
//   backend's own, `GpuDecoder.recordTimes`), `flat` (the same pipelines,
//   bind groups and grids from a flat list, no backend logic), `same` (as
//   many setPipeline/setBindGroup/dispatch triples, all of one pipeline and
//   group), `dispatch_only` (as many dispatches of one pipeline and group
//   set once) and `empty` (the encoder, pass and finish alone); then the
//   submits, timed around `queue.submit` alone (the GPU's work awaited
//   untimed after each): `run_ms` (the backend's whole run of a decode
//   step: parameters written, recorded, submitted), `flat_submit_ms` (the
//   flat list's command buffer), `tiny_submit_ms` (as many dispatches of a
//   one-thread pipeline with a bind group of one buffer, each with its
//   setBindGroup) and `tiny8_submit_ms` (the same with a bind group of
//   eight buffers): what Dawn's backend spends on each dispatch at submit,
//   by the size of its bind group; `run_parts_ms`: the run's writes,
//   recording and submit timed apart;
// - `stream_probe` (with --stream-probe N > 0, after tuning): where a
//   decode stream's step goes beyond the GPU's pass, at both contexts, N
//   steps each form, a warm-up run each, then --stream-rounds rounds in
//   turn, every other round in reverse order (medians; --stream-forms
//   picks forms by name):
//   `generator` (nextTokens, as `decode`), `ahead_D` (the backend's
//   `ahead` with D steps held unread, D = 1, 2, 3, 4, 6, 8: is the depth
//   or the read-back's latency the limit?), `queued` (N runs submitted
//   back to back, nothing read until the end: the GPU with a full queue),
//   `queued_bare` (the same without the token's copies and the parameters'
//   write: the passes alone, a submit each) and `one_buffer` (N steps
//   recorded into one command buffer, one submit: no submit boundary);
//   each with ms a step, the host's busy ms a step (the event loop's
//   active time, `performance.eventLoopUtilization`) and its utilisation;
//   with --ab-only 1 nothing runs after it;
// - `clocks` (where `nvidia-smi` runs, every --clocks-ms ms; 0 turns it
//   off): the SM clock and the GPU's utilisation during each timed part
//   (decode rounds, tg runs, prefills, tuning, the leave-one-out runs):
//   median, min, max, samples. Every line carries `t_ms`, the host's epoch
//   ms when it was printed.
// Token ids are fixed (a repeating run of ids from 1000), so the text means
// nothing: the figures do not depend on it.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');

function args() {
  const a = process.argv.slice(2), o = {};
  for (let i = 0; i < a.length; i++) {
    if (!a[i].startsWith('--')) throw new Error(`unexpected argument ${a[i]}`);
    o[a[i].slice(2)] = a[i + 1];
    i++;
  }
  const num = (k, d) => {
    const v = o[k] === undefined ? d : Number(o[k]);
    if (!Number.isFinite(v) || v < 0) throw new Error(`--${k} must be a non-negative number, got ${o[k]}`);
    return v;
  };
  if (!o.server || !o.model) throw new Error('usage: node llm_dawn.mjs --server URL --model NAME [--context 1280] [--tune-s 120] [--steps 64] [--rounds 3] ...');
  return {
    server: o.server.replace(/\/+$/, ''), model: o.model, context: num('context', 1280), tuneS: num('tune-s', 120), steps: Math.max(2, num('steps', 64)),
    rounds: Math.max(1, num('rounds', 3)), prefill: Math.max(1, num('prefill', 128)), long: Math.max(1, num('long', 1024)),
    dispatches: Math.max(2, num('probe-dispatches', 4096)), mib: Math.max(1, num('probe-mib', 256)), profileRuns: Math.max(1, num('profile-runs', 5)),
    fusionsAb: num('fusions-ab', 0), shortAb: num('short-ab', 0), mergeAb: num('merge-ab', 0), abOnly: num('ab-only', 0) > 0,
    submitAb: num('submit-ab', 0), longAb: num('long-ab', 0), kernelsAb: num('kernels-ab', 0), tunedAb: num('tuned-ab', 0), serverAb: num('server-ab', 0), abKinds: num('ab-kinds', 0), serverB: o['server-b'] ? o['server-b'].replace(/\/+$/, '') : null, wgslB: o['wgsl-b'] ? resolve(o['wgsl-b']) : null, submitAbRounds: num('submit-ab-rounds', 6), tgReps: num('tg-reps', 0), omitRuns: num('omit-runs', 0), recordProbe: num('record-probe', 0), streamProbe: num('stream-probe', 0), streamRounds: num('stream-rounds', 3), streamForms: o['stream-forms'] ? o['stream-forms'].split(',') : null, clocksMs: num('clocks-ms', 50),
    runtime: resolve(o.runtime ?? join(ROOT, 'client-runtime', 'web', 'dist', 'webtune.js')),
    webgpu: resolve(o.webgpu ?? join(ROOT, 'client-runtime', 'web', 'node_modules', 'webgpu', 'index.js')),
    dawnFlags: o['dawn-flags'] ? o['dawn-flags'].split(',') : [],
  };
}

const line = (what, fields) => console.log(JSON.stringify({ what, t_ms: Date.now(), ...fields }));

/**
 * The GPU's SM clock and utilisation sampled by `nvidia-smi` every `ms` ms
 * (line-buffered through stdbuf where it exists), each sample stamped with
 * nvidia-smi's own time, so that a part's samples are found after the fact
 * (`mark` a part's interval, `summary` at the end). Does nothing where
 * nvidia-smi is missing.
 */
class Clocks {
  constructor(ms) {
    this.samples = [];
    this.parts = [];
    this.child = null;
    if (!(ms > 0)) return;
    const q = ['--query-gpu=timestamp,clocks.sm,utilization.gpu,power.draw', '--format=csv,noheader,nounits', '-lms', String(Math.round(ms))];
    const [cmd, argv] = existsSync('/usr/bin/stdbuf') ? ['stdbuf', ['-oL', 'nvidia-smi', ...q]] : ['nvidia-smi', q];
    let rest = '';
    try {
      this.child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      this.child = null;
      return;
    }
    this.child.on('error', () => (this.child = null));
    this.child.stdout.on('data', (d) => {
      const lines = (rest + d.toString()).split('\n');
      rest = lines.pop();
      for (const l of lines) {
        const [ts, sm, util, w] = l.split(',').map((x) => x.trim());
        // nvidia-smi prints local time as 2026/12/03 15:10:01.123; Date reads that form as local time too.
        const t = Date.parse(ts.replace(/\//g, '-').replace(' ', 'T'));
        if (Number.isFinite(t) && Number.isFinite(+sm)) this.samples.push({ t, sm: +sm, util: +util, w: +w });
      }
    });
  }
  /** Runs `f` as the part `label` (with `extra` fields in its summary); returns what `f` returns. */
  async part(label, f, extra = {}) {
    const t0 = Date.now();
    const r = await f();
    this.parts.push({ label, t0, t1: Date.now(), ...extra });
    return r;
  }
  /** Each part's samples (median, min, max SM MHz; median utilisation %); the sampler stopped. */
  async summary() {
    if (!this.child) return null;
    await new Promise((res) => setTimeout(res, 400));
    this.child.kill();
    const parts = this.parts.map((p) => {
      const s = this.samples.filter((x) => x.t >= p.t0 && x.t <= p.t1);
      const sm = s.map((x) => x.sm);
      return { ...p, ms: p.t1 - p.t0, samples: s.length, sm_median: s.length ? median(sm) : null, sm_min: s.length ? Math.min(...sm) : null, sm_max: s.length ? Math.max(...sm) : null,
        util_median: s.length ? median(s.map((x) => x.util)) : null };
    });
    const all = this.samples.map((x) => x.sm);
    return { samples: this.samples.length, sm_median_all: all.length ? median(all) : null, parts };
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ids = (n) => Array.from({ length: n }, (_, i) => 1000 + (i % 977));

/** Time of `n` empty dispatches in one pass and one submit, ms. */
async function dispatchTime(device, pipeline, group, n) {
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  for (let i = 0; i < n; i++) {
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(1);
  }
  pass.end();
  const cb = enc.finish();
  const t0 = performance.now();
  device.queue.submit([cb]);
  await device.queue.onSubmittedWorkDone();
  return performance.now() - t0;
}

async function probes(device, o) {
  const module = device.createShaderModule({ code: '@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n@compute @workgroup_size(1) fn main() { if (x[0] == 12345u) { x[1] = 1u; } }' });
  const pipeline = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const buf = device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE });
  const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
  await dispatchTime(device, pipeline, group, o.dispatches);
  const one = [], many = [];
  for (let r = 0; r < 5; r++) {
    one.push(await dispatchTime(device, pipeline, group, 1));
    many.push(await dispatchTime(device, pipeline, group, o.dispatches));
  }
  const us = ((median(many) - median(one)) / (o.dispatches - 1)) * 1000;
  line('probe_dispatch', { dispatches: o.dispatches, us_each: us, ms_one: median(one), ms_all: median(many) });
  buf.destroy();

  const bytes = o.mib * 2 ** 20;
  const a = device.createBuffer({ size: bytes, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.STORAGE });
  const b = device.createBuffer({ size: bytes, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.STORAGE });
  const copies = async (n) => {
    const enc = device.createCommandEncoder();
    for (let i = 0; i < n; i++) enc.copyBufferToBuffer(a, 0, b, 0, bytes);
    const cb = enc.finish();
    const t0 = performance.now();
    device.queue.submit([cb]);
    await device.queue.onSubmittedWorkDone();
    return performance.now() - t0;
  };
  await copies(2);
  const c1 = [], c8 = [];
  for (let r = 0; r < 5; r++) {
    c1.push(await copies(1));
    c8.push(await copies(9));
  }
  const ms = (median(c8) - median(c1)) / 8;
  const gbs = bytes / (ms / 1000) / 1e9;
  line('probe_copy', { mib: o.mib, ms_per_copy: ms, gb_per_s: gbs });
  a.destroy();
  b.destroy();
  return { usEach: us, gbs };
}

/**
 * Another backend of the generator's model on `device`: its weights fetched
 * again from the server, its graph and context the generator's unless
 * `init` says otherwise; no kernels set.
 */
async function otherBackend(gen, device, o, init = {}) {
  const wurl = gen.manifest.weights.url;
  const weights = await (await fetch(wurl.startsWith('http') ? wurl : `${o.server}${wurl}`)).arrayBuffer();
  return gen.gpu.constructor.create({ device, graph: gen.graph, tensors: gen.manifest.tensors, weights, context: gen.context, ...init });
}

/**
 * The decode step with the graph's fused runs (the generator's own backend)
 * against a backend of the same graph without them: host recording in ABBA
 * rounds (`GpuDecoder.recordTimes`: 20 recordings of the step, never
 * submitted, median each), then --fusions-ab profiled steps each (the GPU's
 * pass and the run from its start to its submit), alternating, from a fed
 * token at successive positions.
 */
async function backendsAb(gen, device, o, mode = 'fusions') {
  // mode 'short': the generator's backend (the decode step's attention one dispatch up to SHORT_ATTENTION
  // positions) against one that always splits (shortAttention 0), at the same short positions.
  const [A, B] = mode === 'short' ? ['short', 'split'] : ['fused', 'unfused'];
  const rounds = mode === 'short' ? o.shortAb : o.fusionsAb;
  const url = `${o.server}/v1/models/${encodeURIComponent(o.model)}`;
  const graph = await (await fetch(`${url}/graph`)).json();
  const fused = gen.gpu;
  const other = mode === 'short' ? { graph, shortAttention: 0 } : { graph: { ...graph, fused: [] } };
  const plain = await otherBackend(gen, device, o, other);
  plain.setKernels((op, shape) => gen.webtune.gpuKernel(op, shape));
  const sides = { [A]: { dec: fused, rec: [], runs: [] }, [B]: { dec: plain, rec: [], runs: [] } };
  for (const side of Object.values(sides)) {
    side.dec.reset();
    await side.dec.next([1000], { temperature: 0, topK: 0, topP: 1, u: 0 });
    await side.dec.recordTimes(5);
  }
  const order = (r) => (r % 2 ? [B, A, A, B] : [A, B, B, A]);
  for (let r = 0; r < 4 * rounds; r++) for (const name of order(r)) sides[name].rec.push(median(await sides[name].dec.recordTimes(20)));
  for (let r = 0; r < rounds; r++) {
    for (const name of order(r).slice(0, 2)) {
      const side = sides[name];
      const pr = await side.dec.profile([1001 + side.runs.length], { perStep: false });
      side.runs.push(pr);
    }
  }
  const sum = (side) => ({ dispatches_per_token: side.dec.stats.dispatchesPerToken, record_ms: median(side.rec), record_runs: side.rec.map((x) => +x.toFixed(3)),
    encode_ms: median(side.runs.map((x) => x.encodeMs)), gpu_pass_ms: median(side.runs.map((x) => x.gpuMs)), gpu_runs: side.runs.map((x) => +x.gpuMs.toFixed(1)), wall_ms: median(side.runs.map((x) => x.wallMs)) });
  const f = sum(sides[A]), u = sum(sides[B]);
  // The rounds' ratios, each from one ABBA round's pairs.
  const pairs = [];
  for (let i = 0; i + 1 < f.record_runs.length; i += 2) pairs.push((sides[A].rec[i] + sides[A].rec[i + 1]) / (sides[B].rec[i] + sides[B].rec[i + 1]));
  line(`${mode}_ab`, { rounds, [A]: f, [B]: u, record_ratio: f.record_ms / u.record_ms, record_round_ratios: pairs.map((x) => +x.toFixed(3)),
    gpu_ratio: f.gpu_pass_ms / u.gpu_pass_ms, load: (await import('node:os')).loadavg() });
  plain.destroy();
  fused.reset();
}

/** Where the host's time of recording a decode step goes (`record_probe`). */
async function recordProbe(gen, device, o) {
  const dec = gen.gpu;
  dec.reset();
  await dec.next([1000], { temperature: 0, topK: 0, topP: 1, u: 0 });
  await dec.recordTimes(5);
  // The decode bucket's steps as the backend holds them (private in TypeScript only), and the sampling.
  const steps = [...dec.ready.get(1).steps, dec.sampleStep()];
  const flat = steps.map((st) => ('kernel' in st
    ? (st.kernel.passes === 1 ? { pipeline: st.kernel.pipeline, group: st.perT ? st.perT(1) : st.group, grid: st.kernel.workgroups } : { kernel: st.kernel, group: st.perT ? st.perT(1) : st.group })
    : { pipeline: st.pipeline, group: st.group, grid: [st.grid[0], st.grid[1], 1] }));
  // The flat list recorded into a pass: the same dispatches as the backend's, without its logic.
  const recordFlat = (pass) => {
    for (const x of flat) {
      if (x.kernel) x.kernel.dispatch(pass, x.group);
      else {
        pass.setPipeline(x.pipeline);
        pass.setBindGroup(0, x.group);
        pass.dispatchWorkgroups(x.grid[0], x.grid[1], x.grid[2]);
      }
    }
  };
  const one = flat.find((x) => x.pipeline);
  const n = flat.length;
  const time = (body) => {
    const ms = [];
    for (let r = 0; r < o.recordProbe; r++) {
      const t0 = performance.now();
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      body(pass);
      pass.end();
      enc.finish();
      ms.push(performance.now() - t0);
    }
    return median(ms);
  };
  device.pushErrorScope('validation');
  const res = {
    dispatches: n,
    encode: median(await dec.recordTimes(o.recordProbe)),
    flat: time(recordFlat),
    same: time((pass) => {
      for (let i = 0; i < n; i++) {
        pass.setPipeline(one.pipeline);
        pass.setBindGroup(0, one.group);
        pass.dispatchWorkgroups(1, 1, 1);
      }
    }),
    dispatch_only: time((pass) => {
      pass.setPipeline(one.pipeline);
      pass.setBindGroup(0, one.group);
      for (let i = 0; i < n; i++) pass.dispatchWorkgroups(1, 1, 1);
    }),
    empty: time(() => {}),
  };
  // Submits: the command buffer built first, only queue.submit timed, the GPU awaited after.
  const submitted = async (build) => {
    const ms = [];
    for (let r = 0; r < o.recordProbe; r++) {
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      build(pass);
      pass.end();
      const cb = enc.finish();
      const t0 = performance.now();
      device.queue.submit([cb]);
      ms.push(performance.now() - t0);
      await device.queue.onSubmittedWorkDone();
    }
    return median(ms);
  };
  res.flat_submit_ms = await submitted(recordFlat);
  for (const k of [1, 8]) {
    const decl = Array.from({ length: k }, (_, i) => `@group(0) @binding(${i}) var<storage, read_write> x${i}: array<u32>;`).join('\n');
    const use = Array.from({ length: k }, (_, i) => `x${i}[1] = x${i}[0];`).join(' ');
    const module = device.createShaderModule({ code: `${decl}\n@compute @workgroup_size(1) fn main() { if (x0[0] == 12345u) { ${use} } }` });
    const pipeline = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    const bufs = Array.from({ length: k }, () => device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE }));
    const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: bufs.map((buffer, i) => ({ binding: i, resource: { buffer } })) });
    res[`tiny${k === 1 ? '' : k}_submit_ms`] = await submitted((pass) => {
      pass.setPipeline(pipeline);
      for (let i = 0; i < n; i++) {
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(1);
      }
    });
    for (const b of bufs) b.destroy();
  }
  // The backend's whole run of a decode step (parameters written, recorded, submitted), rewound after each.
  const bk = dec.ready.get(1), runs = [];
  for (let r = 0; r < o.recordProbe; r++) {
    const t0 = performance.now();
    const slot = dec.run([1000], bk, { temperature: 0, topK: 0, topP: 1, u: 0 });
    runs.push(performance.now() - t0);
    await dec.readToken(slot);
    dec.rewind(1);
  }
  res.run_ms = median(runs);
  // The same run in its parts (run's body, step by step): the parameters' and the id's writes, the
  // recording (and finish), the submit.
  const parts = { write: [], record: [], submit: [] };
  for (let r = 0; r < o.recordProbe; r++) {
    const t0 = performance.now();
    device.queue.writeBuffer(dec.runParams, 0, dec.runHost);
    device.queue.writeBuffer(dec.ids, 0, Uint32Array.from([1000]));
    const t1 = performance.now();
    const { enc } = dec.encode(bk, 1, false, true);
    const slot = dec.readSlot;
    enc.copyBufferToBuffer(dec.token, 0, dec.tokenReads[slot], 0, 8);
    dec.readSlot = (slot + 1) % dec.tokenReads.length;
    const cb = enc.finish();
    const t2 = performance.now();
    device.queue.submit([cb]);
    const t3 = performance.now();
    parts.write.push(t1 - t0);
    parts.record.push(t2 - t1);
    parts.submit.push(t3 - t2);
    await dec.readToken(slot);
  }
  res.run_parts_ms = { write: median(parts.write), record: median(parts.record), submit: median(parts.submit) };
  const err = await device.popErrorScope();
  line('record_probe', { reps: o.recordProbe, ...res, validation_error: err ? err.message : null,
    us_per_call_same: ((res.same - res.empty) * 1000) / (3 * n), us_per_dispatch_only: ((res.dispatch_only - res.empty) * 1000) / n });
  dec.reset();
}

/**
 * The generator's own backend (side A) against another GpuDecoder of the
 * same graph and kernels built with `init` (side B), each in a
 * TextGenerator on the same device: decode rates through `nextTokens` in
 * ABBA rounds and profiles, at --prefill and --long positions (`what`
 * lines). merge_ab: the backend's default (+merge) against a merge dispatch
 * a layer; submit_ab: one decode step a submit against --submit-ab steps.
 */
async function backendAbRates(gen, device, o, clocks, { what, a, b, init, rounds, made = null }) {
  let plain = made;
  if (!plain) {
    plain = await otherBackend(gen, device, o, init);
    plain.setKernels((op, shape) => gen.webtune.gpuKernel(op, shape));
  }
  // A generator of the same class around the other backend (its constructor is private in TypeScript only).
  const other = new gen.constructor({ webtune: gen.webtune, manifest: gen.manifest, decoder: plain, tokenizer: gen.tokenizer, report: false });
  const sides = { [a]: { g: gen, dec: gen.gpu }, [b]: { g: other, dec: plain } };
  const order = (r) => (r % 2 ? [b, a, a, b] : [a, b, b, a]);
  for (const ctx of [o.prefill, o.long]) {
    const p = ids(ctx);
    const rates = { [a]: [], [b]: [] }, profs = { [a]: [], [b]: [] };
    for (const { g } of Object.values(sides)) await g.nextTokens([await g.nextToken(p, { reset: true })], 4);
    for (let r = 0; r < rounds; r++) {
      for (const name of order(r)) {
        const { g } = sides[name];
        const t = await g.nextToken(p, { reset: true });
        const s0 = performance.now();
        await clocks.part(`${what} ${name} ${ctx}`, () => g.nextTokens([t], o.steps));
        rates[name].push((o.steps * 1000) / (performance.now() - s0));
      }
    }
    if (device.features.has('timestamp-query')) {
      for (let r = 0; r < rounds; r++) for (const name of order(r).slice(0, 2)) profs[name].push(await sides[name].dec.profile([1001 + r], { perStep: false }));
    }
    const sum = (name) => ({ tokens_per_s: median(rates[name]), rounds: rates[name].map((x) => +x.toFixed(1)), dispatches_per_token: sides[name].g.dispatchesPerToken,
      encode_ms: profs[name].length ? median(profs[name].map((x) => x.encodeMs)) : null, gpu_pass_ms: profs[name].length ? median(profs[name].map((x) => x.gpuMs)) : null });
    const m = sum(a), u = sum(b);
    // --ab-kinds N: N profiles a side, alternating, each step's dispatches timed a pass each: the
    // whole pass's mean and µs a dispatch by kind, so that a kernel's change shows where the
    // stream's rate is bound by the host.
    let kinds = null;
    if (o.abKinds > 0 && device.features.has('timestamp-query')) {
      const runs = { [a]: [], [b]: [] };
      for (let r = 0; r < o.abKinds; r++) for (const name of order(r).slice(0, 2)) runs[name].push(await sides[name].dec.profile([1001 + r]));
      const side = (name) => ({ gpu_pass_mean_ms: runs[name].reduce((x, p) => x + p.gpuMs, 0) / runs[name].length, by_kind: kindsOf(runs[name]) });
      const ka = side(a), kb = side(b);
      kinds = { runs: o.abKinds, [a]: ka, [b]: kb, pass_mean_ratio: ka.gpu_pass_mean_ms / kb.gpu_pass_mean_ms,
        kind_ratios: ka.by_kind.map((k) => ({ kind: k.kind, ratio: k.us_each / (kb.by_kind.find((x) => x.kind === k.kind)?.us_each ?? NaN) })) };
    }
    line(what, { context: ctx, steps: o.steps, [a]: m, [b]: u, rate_ratio: m.tokens_per_s / u.tokens_per_s, gpu_ratio: m.gpu_pass_ms && u.gpu_pass_ms ? m.gpu_pass_ms / u.gpu_pass_ms : null,
      kinds, submits_b: plain.stats.submits, load: (await import('node:os')).loadavg() });
  }
  plain.destroy();
  gen.gpu.reset();
}

/**
 * Each dispatch's GPU time (a pass each) summed by kind over profiles of the
 * same step: per kind the dispatches, ms and µs a dispatch, the mean over the
 * runs (Dawn quantises timestamps, so each pass starts at a random phase of
 * the step: the mean is the estimate, not the median), largest first.
 */
// Dawn's timestamps come in steps (65.536 µs on the H200), so one pass of a short kernel reads 0 or a step.
function kindsOf(runs) {
  const kinds = new Map();
  for (const [i, st] of runs[0].steps.entries()) {
    // A label is the kind: a fixed kernel's name, or a product's op and shape.
    const k = kinds.get(st.label) ?? { n: 0, ms: [] };
    k.n++;
    k.ms.push(runs.reduce((a, r) => a + r.steps[i].ms, 0) / runs.length);
    kinds.set(st.label, k);
  }
  return [...kinds].map(([kind, k]) => ({ kind, dispatches: k.n, ms: k.ms.reduce((a, b) => a + b, 0), us_each: (k.ms.reduce((a, b) => a + b, 0) / k.n) * 1000 }))
    .sort((a, b) => b.ms - a.ms);
}

/** Where a decode stream's step goes beyond the GPU's pass (`stream_probe`, see the head). */
async function streamProbe(gen, device, o, clocks) {
  const dec = gen.gpu, n = o.streamProbe;
  const greedy = { temperature: 0, topK: 0, topP: 1, u: 0 };
  // A longer read-back ring than the backend's (its length bounds the steps held unread; JS sees no `readonly`).
  const ring = Array.from({ length: 12 }, (_, i) => device.createBuffer({ label: `probe read ${i}`, size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }));
  const own = dec.tokenReads;
  const timed = async (label, ctx, body) => {
    const e0 = performance.eventLoopUtilization();
    const t0 = performance.now();
    await clocks.part(`stream ${label} ${ctx}`, body);
    const ms = performance.now() - t0;
    const e = performance.eventLoopUtilization(e0);
    return { ms: ms / n, busy: e.active / n, elu: e.utilization };
  };
  const forms = {
    generator: async (p) => {
      const t = await gen.nextToken(p, { reset: true });
      return timed('generator', p.length, () => gen.nextTokens([t], n));
    },
    queued: async (p) => {
      await gen.nextToken(p, { reset: true });
      const bk = dec.ready.get(1);
      return timed('queued', p.length, async () => {
        for (let i = 0; i < n; i++) dec.run(null, bk, greedy);
        await device.queue.onSubmittedWorkDone();
      });
    },
    queued_bare: async (p) => {
      await gen.nextToken(p, { reset: true });
      const bk = dec.ready.get(1);
      return timed('queued_bare', p.length, async () => {
        for (let i = 0; i < n; i++) device.queue.submit([dec.encode(bk, 1, false, true).enc.finish()]);
        await device.queue.onSubmittedWorkDone();
      });
    },
    one_buffer: async (p) => {
      await gen.nextToken(p, { reset: true });
      const bk = dec.ready.get(1);
      return timed('one_buffer', p.length, async () => {
        const enc = device.createCommandEncoder();
        for (let i = 0; i < n; i++) dec.encode(bk, 1, true, true, undefined, enc);
        device.queue.submit([enc.finish()]);
        await device.queue.onSubmittedWorkDone();
      });
    },
  };
  for (const d of [1, 2, 3, 4, 6, 8]) {
    forms[`ahead_${d}`] = async (p) => {
      await gen.nextToken(p, { reset: true });
      dec.tokenReads = ring;
      dec.readSlot = 0;
      try {
        return await timed(`ahead_${d}`, p.length, async () => {
          const q = [];
          for (let i = 0; i < n; i++) {
            if (q.length >= d) await q.shift();
            q.push(dec.ahead(greedy));
          }
          await Promise.all(q);
        });
      } finally {
        dec.tokenReads = own;
        dec.readSlot = 0;
      }
    };
  }
  for (const p of [ids(o.prefill), ids(o.long)]) {
    if (p.length + n + 1 > gen.context) throw new Error(`--stream-probe ${n}: a ${p.length}-token prompt and ${n} steps pass the context of ${gen.context}`);
    const names = Object.keys(forms).filter((k) => !o.streamForms || o.streamForms.includes(k)), res = Object.fromEntries(names.map((k) => [k, []]));
    for (const name of names) await forms[name](p);
    for (let r = 0; r < o.streamRounds; r++) for (const name of r % 2 ? [...names].reverse() : names) res[name].push(await forms[name](p));
    const out = {};
    for (const name of names) {
      const xs = res[name].length ? res[name] : [await forms[name](p)];
      out[name] = { ms: +median(xs.map((x) => x.ms)).toFixed(4), busy_ms: +median(xs.map((x) => x.busy)).toFixed(4), elu: +median(xs.map((x) => x.elu)).toFixed(3), runs_ms: xs.map((x) => +x.ms.toFixed(4)) };
    }
    line('stream_probe', { context: p.length, steps: n, dispatches_per_token: gen.dispatchesPerToken, forms: out });
  }
  for (const b of ring) b.destroy();
  dec.reset();
}

async function main() {
  const o = args();
  if (!existsSync(o.runtime)) throw new Error(`no runtime module at ${o.runtime} (build it: cd client-runtime/web && node build.mjs)`);
  if (!existsSync(o.webgpu)) throw new Error(`no webgpu package at ${o.webgpu} (npm install in client-runtime/web, or --webgpu PATH/index.js)`);
  const { create, globals } = await import(pathToFileURL(o.webgpu).href);
  Object.assign(globalThis, globals);
  // Dawn's instance lives as long as this reference (dropped at the end, so that Node can exit).
  let gpu = create(o.dawnFlags);
  // Node 20 has no navigator; the fingerprint reads its user agent (Node 21+ has one) and core count.
  globalThis.navigator ??= { userAgent: `Node.js/${process.version.slice(1)} (Dawn; ${process.platform} ${process.arch === 'x64' ? 'x86_64' : process.arch})`, hardwareConcurrency: (await import('node:os')).cpus().length };
  Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true });
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new Error('Dawn found no adapter');
  const wanted = ['timestamp-query', 'subgroups', 'shader-f16'].filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({
    requiredFeatures: wanted,
    requiredLimits: { maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize, maxBufferSize: adapter.limits.maxBufferSize },
  });
  const info = adapter.info ?? {};
  line('adapter', { vendor: info.vendor, architecture: info.architecture, device: info.device, description: info.description, features: wanted, node: process.version });
  const { TextGenerator } = await import(pathToFileURL(o.runtime).href);
  const clocks = new Clocks(o.clocksMs);

  const t0 = performance.now();
  const gen = await TextGenerator.load({ server: o.server, model: o.model, target: 'webgpu', device, adapter, context: o.context, cache: false, budgetMs: 200, report: true });
  line('load', { s: (performance.now() - t0) / 1000, gpu_bytes: gen.memoryBytes, context: gen.context, key: gen.webtune.session.device_key });
  // The clocks' summary, then everything closed (Dawn's instance dropped, so that Node can exit).
  const finish = async () => {
    line('clocks', await clocks.summary());
    gen.close();
    device.destroy();
    delete globalThis.navigator.gpu;
    gpu = null;
  };
  if (o.recordProbe > 0 && gen.gpu) await recordProbe(gen, device, o);
  if ((o.fusionsAb > 0 || o.shortAb > 0 || o.mergeAb > 0 || o.recordProbe > 0 || o.serverAb > 0) && gen.gpu) {
    if (o.fusionsAb > 0) await backendsAb(gen, device, o);
    if (o.shortAb > 0) await backendsAb(gen, device, o, 'short');
    if (o.mergeAb > 0) await backendAbRates(gen, device, o, clocks, { what: 'merge_ab', a: 'merged', b: 'unmerged', init: { mergeAttention: false }, rounds: o.mergeAb });
    if (o.serverAb > 0) {
      if (!o.serverB) throw new Error('--server-ab needs --server-b URL');
      try {
        // The other build's generator: its own session and kernels (each compiled by its server), this device.
        const genB = await TextGenerator.load({ server: o.serverB, model: o.model, target: 'webgpu', device, adapter, context: o.context, cache: false, budgetMs: 200, report: false });
        await backendAbRates(gen, device, o, clocks, { what: 'server_ab', a: 'a', b: 'b', made: genB.gpu, rounds: o.serverAb });
        genB.webtune.close();
      } catch (e) {
        line('server_ab', { error: String(e?.stack ?? e) });
      }
    }
    if (o.abOnly) return finish();
  }
  const swaps = [];
  gen.webtune.addEventListener('swap', (e) => swaps.push(e.detail));
  const prompt = ids(o.prefill), long = ids(o.long);
  if (o.prefill + o.steps > gen.context || o.long + o.steps > gen.context) throw new Error(`--context ${gen.context} is too small for a ${o.long}-token prompt and ${o.steps} steps`);

  // Every kernel the timed runs use, made (and then tuned).
  let tok = await gen.nextToken(prompt, { reset: true });
  for (let i = 0; i < 3; i++) tok = await gen.nextToken([tok]);
  await gen.nextToken(long, { reset: true });
  // --tuned-ab: a backend whose decode products stay the first answers (each kernel's implementation now, frozen).
  let firstDec = null;
  if (o.tunedAb > 0 && gen.gpu) {
    firstDec = await otherBackend(gen, device, o);
    firstDec.setKernels(async (op, shape) => {
      const k = await gen.webtune.gpuKernel(op, shape);
      const impl = k.impl;
      // GpuKernel.dispatch records its current implementation: this one records the first (a research hook on a private field).
      return { bindGroupLayout: k.bindGroupLayout, passes: impl.passes.length, dispatch(pass, group) {
        const now = k.impl;
        k.impl = impl;
        try {
          k.dispatch(pass, group);
        } finally {
          k.impl = now;
        }
      } };
    });
    await firstDec.next([1000], { temperature: 0, topK: 0, topP: 1, u: 0 });
  }
  if (o.tuneS > 0) {
    const t1 = performance.now();
    let evaluated = 0;
    await clocks.part('tuning', async () => {
      while (performance.now() - t1 < o.tuneS * 1000) {
        const r = await gen.idle(200);
        if (r.done) break;
        if (!r.worked) await new Promise((res) => setTimeout(res, 5));
      }
    });
    const status = gen.webtune.status();
    evaluated = status.reduce((a, x) => a + x.evaluated, 0);
    line('tuning', { s: (performance.now() - t1) / 1000, kernels: status.length, evaluated, swaps: swaps.length, done: status.every((x) => x.phase === 'done') });
    // How far each kernel's first answer (the server's, before any tuning
    // here) was from where tuning left it: the first swap's incumbent
    // against the last swap's winner (1 where nothing beat the first answer).
    const perKernel = status.map((x) => {
      const mine = swaps.filter((w) => w.op === x.op && w.shape.join() === x.shape.join());
      if (!mine.length) return { op: x.op, shape: x.shape, swaps: 0, first_over_tuned: 1 };
      return { op: x.op, shape: x.shape, swaps: mine.length, first_us: mine[0].from_us, tuned_us: mine.at(-1).to_us, first_over_tuned: mine[0].from_us / mine.at(-1).to_us };
    });
    line('first_answer', { kernels: perKernel });
  }

  if (o.streamProbe > 0 && gen.gpu) {
    try {
      await streamProbe(gen, device, o, clocks);
    } catch (e) {
      line('stream_probe', { error: String(e?.stack ?? e) });
    }
    if (o.abOnly) return finish();
  }
  if (firstDec) {
    try {
      await backendAbRates(gen, device, o, clocks, { what: 'tuned_ab', a: 'tuned', b: 'first', made: firstDec, rounds: o.tunedAb });
    } catch (e) {
      line('tuned_ab', { error: String(e?.stack ?? e) });
    }
    if (o.abOnly) return finish();
  }
  if (o.submitAb > 1 && gen.gpu) {
    try {
      await backendAbRates(gen, device, o, clocks, { what: 'submit_ab', a: 'one', b: `k${o.submitAb}`, init: { stepsPerSubmit: o.submitAb }, rounds: o.submitAbRounds });
    } catch (e) {
      line('submit_ab', { error: String(e?.stack ?? e) });
    }
  }
  if (o.longAb > 0 && gen.gpu) {
    try {
      await backendAbRates(gen, device, o, clocks, { what: 'long_ab', a: 'long', b: 'chunks64', init: { longAttention: 0 }, rounds: o.longAb });
    } catch (e) {
      line('long_ab', { error: String(e?.stack ?? e) });
    }
  }
  if (o.kernelsAb > 0 && o.wgslB && gen.gpu) {
    try {
      const wgsl = (await import('node:fs')).readFileSync(o.wgslB, 'utf8');
      await backendAbRates(gen, device, o, clocks, { what: 'kernels_ab', a: 'now', b: 'before', init: { wgsl, longAttention: 0 }, rounds: o.kernelsAb });
    } catch (e) {
      line('kernels_ab', { error: String(e?.stack ?? e) });
    }
  }
  // The first prefills after tuning, each timed (on the H200 the first five took 25-30 ms where later ones took
  // 10 ms): back to back, then again after 2 s idle, to tell a count from a time.
  const timedPrefills = async (n) => {
    const ms = [];
    for (let r = 0; r < n; r++) {
      const t = performance.now();
      await gen.nextToken(prompt, { reset: true });
      ms.push(+(performance.now() - t).toFixed(2));
    }
    return ms;
  };
  const warm = await timedPrefills(6), warmProfiled = [];
  // Then profiled (the same run with the pass's timestamps): is the time the GPU's or the host's?
  for (let r = 0; gen.gpu && r < 6; r++) {
    gen.gpu.reset();
    const pr = await gen.gpu.profile(prompt, { perStep: false });
    warmProfiled.push({ wall: +pr.wallMs.toFixed(2), encode: +pr.encodeMs.toFixed(2), gpu: +pr.gpuMs.toFixed(2) });
  }
  await new Promise((res) => setTimeout(res, 2000));
  const idleWarm = await timedPrefills(4);
  line('prefill_warmup', { back_to_back_ms: warm, profiled_ms: warmProfiled, after_2s_idle_ms: idleWarm });
  // Interleaved, round by round: through the generator (nextToken), through the backend alone (GpuDecoder.next),
  // and profiled (the backend's run with its host and GPU parts).
  const pre = [], direct = [], parts = [];
  for (let r = 0; r < Math.max(o.rounds, 5); r++) {
    const t = performance.now();
    await clocks.part('prefill', () => gen.nextToken(prompt, { reset: true }));
    pre.push(performance.now() - t);
    if (!gen.gpu) continue;
    gen.gpu.reset();
    const t2 = performance.now();
    await gen.gpu.next(prompt, { temperature: 0, topK: 0, topP: 1, u: 0 });
    direct.push(performance.now() - t2);
    gen.gpu.reset();
    parts.push(await gen.gpu.profile(prompt));
  }
  const preMs = median(pre);
  line('prefill', { tokens: o.prefill, ms: preMs, tokens_per_s: (o.prefill * 1000) / preMs, ttft_ms: preMs, runs: pre });
  if (gen.gpu)
    line('prefill_backend', { ms: median(direct), tokens_per_s: (o.prefill * 1000) / median(direct), runs: direct, profile_wall_ms: median(parts.map((x) => x.wallMs)),
      profile_encode_ms: median(parts.map((x) => x.encodeMs)), profile_gpu_ms: median(parts.map((x) => x.gpuMs)) });

  const { usEach, gbs } = await probes(device, o);
  const weightBytes = gen.manifest.weights.bytes;
  const kvCols = gen.graph.caches.reduce((a, c) => a + c.cols, 0);
  for (const p of [prompt, long]) {
    // As `generate` runs its steps (submitted ahead of their read-backs), and one step at a time (each read back first).
    const rates = [], single = [];
    let ms = 0;
    for (let r = 0; r < o.rounds; r++) {
      const t = await gen.nextToken(p, { reset: true });
      const s0 = performance.now();
      await clocks.part(`decode ${p.length}`, () => gen.nextTokens([t], o.steps));
      const el = performance.now() - s0;
      rates.push((o.steps * 1000) / el);
      ms = el / o.steps;
      let u = await gen.nextToken(p, { reset: true });
      const s1 = performance.now();
      await clocks.part(`one_at_a_time ${p.length}`, async () => {
        for (let i = 0; i < o.steps; i++) u = await gen.nextToken([u]);
      });
      single.push((o.steps * 1000) / (performance.now() - s1));
    }
    const rate = median(rates);
    const stepMs = 1000 / rate;
    const dispatches = gen.dispatchesPerToken;
    // A step at the run's middle position reads the weights and the caches up to it.
    const bytes = weightBytes + (p.length + o.steps / 2) * kvCols * 4;
    const bwMs = (bytes / (gbs * 1e9)) * 1000, dispMs = (dispatches * usEach) / 1000;
    line('decode', { context: p.length, prompt: p.length, steps: o.steps, tokens_per_s: rate, ms_per_token: stepMs, last_round_ms: ms, dispatches_per_token: dispatches, rounds: rates,
      one_at_a_time_tokens_per_s: median(single) });
    line('floor', { context: p.length, bytes_per_token: bytes, bandwidth_ms: bwMs, dispatch_ms: dispMs, floor_ms: Math.max(bwMs, dispMs), fraction_of_floor: Math.max(bwMs, dispMs) / stepMs });
  }
  if (o.tgReps > 0) {
    // llama-bench's tg protocol: a warm-up run, then runs back to back, each after an untimed prompt of the depth.
    for (const p of [prompt, long]) {
      await gen.nextTokens([await gen.nextToken(p, { reset: true })], o.steps);
      const rates = [];
      for (let r = 0; r < o.tgReps; r++) {
        const t = await gen.nextToken(p, { reset: true });
        const s0 = performance.now();
        await clocks.part(`tg ${p.length}`, () => gen.nextTokens([t], o.steps));
        rates.push((o.steps * 1000) / (performance.now() - s0));
      }
      const mean = rates.reduce((a, b) => a + b, 0) / rates.length;
      const sd = Math.sqrt(rates.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, rates.length - 1));
      line('decode_tg', { depth: p.length, steps: o.steps, reps: rates.length, tokens_per_s_mean: mean, tokens_per_s_sd: sd, runs: rates.map((x) => +x.toFixed(1)) });
    }
  }
  if (device.features.has('timestamp-query') && gen.gpu) {
    // Where a decode step's time goes, at both contexts: host recording, the
    // read-back's round trip, the GPU's pass, and each dispatch's GPU time
    // summed by kind (medians over --profile-runs).
    for (const p of [prompt, long, null]) {
      // Decode steps after each prompt, and (null) the prefill of the --prefill prompt itself (one bucket).
      const t = p ? await gen.nextToken(p, { reset: true }) : 0;
      const runs = [];
      for (let r = 0; r < o.profileRuns; r++) {
        if (!p) gen.gpu.reset();
        const pr = await gen.gpu.profile(p ? [t] : prompt);
        runs.push(pr);
      }
      const byKind = kindsOf(runs);
      const stepsMs = byKind.reduce((a, k) => a + k.ms, 0);
      line('profile', { run: p ? 'decode' : 'prefill', context: p ? p.length : prompt.length, runs: runs.length, wall_ms: median(runs.map((r) => r.wallMs)), encode_ms: median(runs.map((r) => r.encodeMs)),
        gpu_pass_ms: median(runs.map((r) => r.gpuMs)), gpu_steps_sum_ms: stepsMs, by_kind: byKind });
    }
    if (o.omitRuns > 0) {
      for (const p of [prompt, long]) try {
        const t = await gen.nextToken(p, { reset: true });
        const dec = gen.gpu;
        // Each profiled run feeds one token: rewound after it, so that every run is at the same position.
        const once = async (omit) => {
          const pr = await dec.profile([t], { perStep: false, omit });
          dec.rewind(1);
          return pr;
        };
        const labels = (await once(undefined)).steps.map((x) => x.label);
        const kinds = [...new Set(labels)];
        const out = [];
        await clocks.part(`leave_one_out ${p.length}`, async () => {
          for (const kind of kinds) {
            const whole = [], without = [];
            for (let r = 0; r < o.omitRuns; r++) {
              whole.push((await once(undefined)).gpuMs);
              without.push((await once(kind)).gpuMs);
            }
            // Means, not medians: Dawn's timestamps come in 65.536 µs steps on the H200, and a mean over runs at random phases resolves less than a step.
            const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
            const cost = mean(whole) - mean(without), count = labels.filter((x) => x === kind).length;
            out.push({ kind, dispatches: count, whole_ms: mean(whole), without_ms: mean(without), cost_ms: cost, us_each: (cost * 1000) / count });
          }
        });
        out.sort((a, b) => b.cost_ms - a.cost_ms);
        line('leave_one_out', { context: p.length, runs: o.omitRuns, costs_sum_ms: out.reduce((a, x) => a + x.cost_ms, 0), kinds: out });
      } catch (e) {
        line('leave_one_out', { context: p.length, error: String(e?.stack ?? e) });
      }
    }
    // The read-back's round trip alone: an 8-byte copy, submitted and mapped.
    const src = device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.STORAGE });
    const dst = device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
    const rt = [];
    for (let r = 0; r < 50; r++) {
      const t = performance.now();
      const enc = device.createCommandEncoder();
      enc.copyBufferToBuffer(src, 0, dst, 0, 8);
      device.queue.submit([enc.finish()]);
      await dst.mapAsync(GPUMapMode.READ, 0, 8);
      dst.unmap();
      rt.push(performance.now() - t);
    }
    line('probe_readback', { runs: rt.length, ms_median: median(rt), ms_min: Math.min(...rt) });
    src.destroy();
    dst.destroy();
  }
  await finish();
}

main().then(() => process.exit(0), (e) => {
  console.error(`llm_dawn: ${e instanceof Error ? e.stack ?? e.message : e}`);
  process.exit(1);
});
