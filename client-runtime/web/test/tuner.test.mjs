// The tuner's decisions, end to end but without a browser: a fake queue
// (fetch stubbed to stream SSE), a fake backend whose kernels compute a real
// matmul (or a wrong one) and report scripted times. Checks that the tuner
// swaps only to a faster-beyond-noise kernel, rejects wrong output, and
// reports the right top five with tickets and samples.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { load } from './load.mjs';

const { KernelTuner, Family } = await load('src/tuner.ts');
const { BenchSide } = await load('src/eval-worker.ts');
const { argSpecs } = await load('src/ops.ts');

const SHAPE = [4, 32, 5];
const sha = (c) => c.repeat(64);

function matmul(args, wrong) {
  const [m, k, n] = SHAPE;
  const a = new Float32Array(args[0].buffer), b = new Float32Array(args[1].buffer);
  const c = new Float32Array(m * n);
  for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) {
    let s = 0;
    for (let kk = 0; kk < k; kk++) s += a[i * k + kk] * b[kk * n + j];
    c[i * n + j] = s;
  }
  if (wrong) c[7] += 0.05;
  return c;
}

// Kernels by hash: a relative speed, and whether the output is wrong.
const KERNELS = {
  [sha('a')]: { speed: 1.0 }, // the kernel in use (the default)
  [sha('b')]: { speed: 0.5 }, // twice as fast: swapped in
  [sha('c')]: { speed: 0.3, wrong: true }, // fastest, but wrong: never used
  [sha('d')]: { speed: 0.498 }, // 0.4 % faster than b: inside the 1 % floor
  [sha('e')]: { speed: 2.0 }, // slower
  [sha('f')]: { speed: 0.9 },
};
const meta = (h) => ({ abi: 1, op: 'matmul', shape: SHAPE, target: 'wasm', config: {}, args: argSpecs('matmul', SHAPE), flops: 320, sha256: h, entry: 'kernel' });
const impl = (h) => ({ sha256: h, meta: meta(h), bytes: new ArrayBuffer(8), ...KERNELS[h] });

const backend = {
  target: 'wasm',
  async load(_bytes, m) {
    return impl(m.sha256);
  },
  bench() {
    let args = null;
    return {
      resolutionMs: 0.001,
      minSampleMs: 1,
      async setInputs(a) {
        args = a;
      },
      async runOnce(i) {
        return matmul(args, i.wrong);
      },
      // 0.1 ms per call times the kernel's speed, with 0.2 % alternating jitter.
      jitter: 0,
      async time(i, reps) {
        this.jitter++;
        return reps * 0.1 * i.speed * (this.jitter % 2 ? 1.002 : 0.998);
      },
      dispose() {},
    };
  },
};

function sse(events) {
  return events.map(([e, d]) => `event: ${e}\ndata: ${d}\n\n`).join('');
}

/**
 * The bench worker's side, called directly: what `WorkerEvaluator` posts,
 * without the worker (kernels are the fake ones, looked up by hash).
 */
function directRemote() {
  const side = new BenchSide(backend, (k) => impl(k.sha256));
  const known = new Set();
  const kernel = (i) => ({ sha256: i.sha256, meta: i.meta, module: null });
  let id = 0;
  return {
    evaluate(t, cand, i) {
      const req = { id: id++, key: t.key, op: t.op, shape: t.shape, cand, impl: kernel(i),
        settings: { timedPairs: t.timedPairs, warmPairs: t.warmPairs, earlyReject: t.earlyReject, stopAfterMs: t.stopAfterMs } };
      if (!known.has(t.key)) {
        req.current = kernel(t.current);
        known.add(t.key);
      }
      return side.evaluate(req);
    },
  };
}

for (const remote of [false, true]) test(`the tuner swaps only beyond noise, rejects wrong output and reports the top five${remote ? ' (evaluated by the bench worker)' : ''}`, async () => {
  const order = ['a', 'b', 'c', 'd', 'e', 'f'];
  // Seeds above 2^53 must reach the input generator exactly.
  const events = order.map((c, index) => ['candidate',
    `{"index":${index},"total":${order.length},"source":"explore","sha256":"${sha(c)}","url":"/v1/kernels/${sha(c)}","meta":${JSON.stringify(meta(sha(c)))},"ticket":"t-${c}","seed":${9007199254740993n + BigInt(index)},"check":[0,7,19],"space_checksum":"x"}`]);
  events.push(['done', '{"total":6,"skipped":0}']);
  const posted = [];
  const fetched = [];
  globalThis.fetch = async (url, init) => {
    if (url.includes('/queue?')) return new Response(sse(events), { headers: { 'content-type': 'text/event-stream' } });
    if (url.endsWith('/reports')) {
      posted.push(JSON.parse(init.body));
      return new Response('{"report_id":"r","accepted":5,"winners":[]}', { status: 200 });
    }
    throw new Error(`unexpected fetch ${url}`);
  };
  const swaps = [], measured = [], reports = [];
  const host = {
    server: 'http://x',
    sessionId: 's',
    async fetchKernel(url) {
      fetched.push(url);
      return new ArrayBuffer(8);
    },
    async adopt(t, i, m, prev) {
      swaps.push([prev.sha256[0], i.sha256[0], m.current_us / m.median_us]);
    },
    measured(t, m) {
      measured.push(m);
    },
    reported(t, body, error) {
      reports.push({ body, error });
    },
  };
  const t = new KernelTuner(host, backend, 'matmul', SHAPE, impl(sha('a')));
  if (remote) t.remote = directRemote();
  for (let i = 0; i < 2000 && t.phase !== 'done'; i++) {
    await t.step(performance.now() + 1e6);
    await new Promise((r) => setTimeout(r, 0));
  }
  assert.equal(t.phase, 'done');
  assert.equal(fetched.length, 5, 'the kernel in use is not fetched again');
  assert.deepEqual(swaps.map((s) => s.slice(0, 2)), [['a', 'b']]);
  assert.ok(Math.abs(swaps[0][2] - 2) < 0.05, `speedup ${swaps[0][2]}`);
  assert.equal(t.current.sha256, sha('b'));
  const bad = measured.filter((m) => !m.ok);
  assert.deepEqual(bad.map((m) => m.sha256[0]), ['c']);
  assert.match(bad[0].error, /output 7/);

  assert.equal(reports.length, 1);
  assert.equal(reports[0].error, undefined);
  assert.equal(posted.length, 1);
  const r = posted[0];
  assert.deepEqual([r.op, r.shape, r.target], ['matmul', SHAPE, 'wasm']);
  assert.deepEqual(r.entries.map((e) => e.sha256[0]), ['d', 'b', 'f', 'a', 'e'], 'five fastest that passed, fastest first');
  for (const e of r.entries) {
    assert.equal(e.ticket, `t-${e.sha256[0]}`);
    assert.ok(e.output_ok && e.runs >= 9 && e.median_us > 0);
    assert.equal(e.samples.length, 3);
  }
  // The samples are the output at the check positions on the candidate's own seed.
  const { seededInputs } = await load('src/rng.ts');
  const seedD = 9007199254740993n + 3n;
  const out = matmul(seededInputs(argSpecs('matmul', SHAPE), seedD), false);
  assert.deepEqual(r.entries[0].samples, [out[0], out[7], out[19]]);
  const med = Object.fromEntries(r.entries.map((e) => [e.sha256[0], e.median_us]));
  assert.ok(Math.abs(med.b / med.a - 0.5) < 0.01);
});

test('maxCandidates stops the queue early and still reports', async () => {
  const order = ['a', 'e', 'b', 'f'];
  const events = order.map((c, index) => ['candidate',
    `{"index":${index},"total":4,"source":"explore","sha256":"${sha(c)}","url":"/k/${sha(c)}","meta":${JSON.stringify(meta(sha(c)))},"ticket":"t","seed":${index},"space_checksum":"x"}`]);
  const posted = [];
  globalThis.fetch = async (url, init) => {
    if (url.includes('/queue?')) return new Response(sse(events), { headers: { 'content-type': 'text/event-stream' } });
    posted.push(JSON.parse(init.body));
    return new Response('{}', { status: 200 });
  };
  const host = { server: '', sessionId: 's', fetchKernel: async () => new ArrayBuffer(8), adopt: async () => {}, measured() {}, reported() {} };
  const t = new KernelTuner(host, backend, 'matmul', SHAPE, impl(sha('a')));
  t.maxCandidates = 2;
  for (let i = 0; i < 1000 && t.phase !== 'done'; i++) {
    await t.step(performance.now() + 1e6);
    await new Promise((r) => setTimeout(r, 0));
  }
  assert.equal(t.evaluated, 2);
  assert.deepEqual(posted[0].entries.map((e) => e.sha256[0]), ['a', 'e']);
  // Without `check` positions (an older server) no samples are sent.
  assert.equal(posted[0].entries[0].samples, undefined);
});

// A queue of `order` (hashes by letter) served through a stubbed fetch; the
// tuner stepped until done. Returns what it measured, swapped and posted.
async function tune(order, bk, { strictProbe, budgetMs = 1e6, stopAfterMs, policy } = {}) {
  const events = order.map((c, index) => ['candidate',
    `{"index":${index},"total":${order.length},"source":"explore","sha256":"${sha(c)}","url":"/k/${sha(c)}","meta":${JSON.stringify(meta(sha(c)))},"ticket":"t-${c}","seed":${index + 1},"check":[0,7],"space_checksum":"x"}`]);
  events.push(['done', `{"total":${order.length},"skipped":0}`]);
  const posted = [];
  globalThis.fetch = async (url, init) => {
    if (url.includes('/queue?')) return new Response(sse(events), { headers: { 'content-type': 'text/event-stream' } });
    posted.push(JSON.parse(init.body));
    return new Response('{}', { status: 200 });
  };
  const swaps = [], measured = [];
  const host = {
    server: '', sessionId: 's', fetchKernel: async () => new ArrayBuffer(8),
    async adopt(t, i) {
      swaps.push(i.sha256[0]);
    },
    measured(t, m) {
      measured.push(m);
    },
    reported() {},
  };
  const t = new KernelTuner(host, bk, 'matmul', SHAPE, impl(sha(order[0])));
  if (stopAfterMs !== undefined) t.stopAfterMs = stopAfterMs;
  if (policy) t.policy = policy;
  for (let i = 0; i < 5000 && t.phase !== 'done'; i++) {
    if (strictProbe && (await strictProbe(t))) break;
    await t.step(performance.now() + budgetMs);
    await new Promise((r) => setTimeout(r, 0));
  }
  return { t, swaps, measured, posted };
}

// The fake backend, with per-kernel scripts: `slowFirst` time() calls of a
// kernel take `slowBy` times as long (a late tier-up); calls are counted.
function scriptedBackend(kernels) {
  const calls = { time: 0, runOnce: 0 };
  const seen = {};
  return {
    calls,
    target: 'wasm',
    async load(_b, m) {
      return { ...impl(m.sha256), ...kernels[m.sha256[0]] };
    },
    bench() {
      let args = null, jitter = 0;
      return {
        resolutionMs: 0.001,
        minSampleMs: 1,
        async setInputs(a) {
          args = a;
        },
        async runOnce(i) {
          calls.runOnce++;
          return matmul(args, false);
        },
        async time(i, reps) {
          calls.time++;
          const k = i.sha256[0];
          seen[k] = (seen[k] ?? 0) + 1;
          const slow = seen[k] <= (i.slowFirst ?? 0) ? i.slowBy : 1;
          jitter++;
          return reps * 0.1 * (i.speed ?? 1) * slow * (jitter % 2 ? 1.002 : 0.998);
        },
        dispose() {},
      };
    },
  };
}

test('legacy policy: clearly slower candidates stop early with an honest median; equal ones stop at futility; a faster one is timed in full', async () => {
  const bk = scriptedBackend({ a: { speed: 1 }, e: { speed: 2 }, q: { speed: 1.0 }, b: { speed: 0.5 } });
  KERNELS[sha('q')] = { speed: 1.0 };
  // The fake kernels take no wall time: no wait for a tier-up.
  const { swaps, measured, posted } = await tune(['a', 'e', 'q', 'b'], bk, { stopAfterMs: 0, policy: 'legacy' });
  const by = Object.fromEntries(measured.map((m) => [m.sha256[0], m]));
  assert.deepEqual(swaps, ['b']);
  // e: three timed pairs, each 2x slower: stopped there, median from those pairs.
  assert.equal(by.e.rejected_early, true);
  assert.equal(by.e.trace.timed_pairs, 3);
  assert.ok(Math.abs(by.e.median_us / by.e.current_us - 2) < 0.02, `ratio ${by.e.median_us / by.e.current_us}`);
  // q (and a, itself): no faster in the median pair after five pairs.
  for (const k of ['a', 'q']) {
    assert.equal(by[k].rejected_early, true, k);
    // Five pairs, or six when the alternating jitter puts the fifth median pair just under 1 (it depends on how many
    // warm-up pairs the wall clock allowed).
    assert.ok(by[k].trace.timed_pairs >= 5 && by[k].trace.timed_pairs <= 6, `${k}: ${by[k].trace.timed_pairs}`);
  }
  // b: faster, so all nine pairs, then swapped.
  assert.equal(by.b.rejected_early, undefined);
  assert.equal(by.b.trace.timed_pairs, 9);
  // The report keeps the honest medians of the early-stopped ones.
  const med = Object.fromEntries(posted[0].entries.map((e) => [e.sha256[0], e.median_us]));
  assert.ok(Math.abs(med.e / med.b - 4) < 0.05);
});

test('fast policy: the sequential test stops a clearly slower and a clearly faster candidate after three pairs, an equal one at futility', async () => {
  const bk = scriptedBackend({ a: { speed: 1 }, e: { speed: 2 }, q: { speed: 1.0 }, b: { speed: 0.5 } });
  KERNELS[sha('q')] = { speed: 1.0 };
  const { swaps, measured, posted } = await tune(['a', 'e', 'q', 'b'], bk, { stopAfterMs: 0 });
  const by = Object.fromEntries(measured.map((m) => [m.sha256[0], m]));
  assert.deepEqual(swaps, ['b']);
  assert.equal(by.e.rejected_early, true);
  assert.equal(by.e.trace.timed_pairs, 3);
  assert.ok(Math.abs(by.e.median_us / by.e.current_us - 2) < 0.02);
  for (const k of ['a', 'q']) {
    assert.equal(by[k].rejected_early, true, k);
    assert.ok(by[k].trace.timed_pairs <= 6, `${k}: ${by[k].trace.timed_pairs}`);
  }
  // b: clearly faster after three pairs, not rejected, swapped in.
  assert.equal(by.b.rejected_early, undefined);
  assert.equal(by.b.trace.timed_pairs, 3);
  assert.ok(by.b.runs >= 3, 'the server asks for three runs at least');
  const med = Object.fromEntries(posted[0].entries.map((e) => [e.sha256[0], e.median_us]));
  assert.ok(Math.abs(med.e / med.b - 4) < 0.05);
});

test('a candidate that tiers up late is not rejected: its slow samples become warm-up', async () => {
  // f is 4x slower than a for its first 20 timed calls (beyond the 15
  // warm-up pairs, so its first timed pairs look steady and slow), then
  // twice as fast. The fake takes no wall time, so it is all within the
  // first STOP_AFTER_MS after the first call, when no early stop may come.
  const bk = scriptedBackend({ a: { speed: 1 }, f: { speed: 0.5, slowFirst: 20, slowBy: 8 } });
  const { swaps, measured } = await tune(['a', 'f'], bk);
  const f = measured.find((m) => m.sha256[0] === 'f');
  assert.equal(f.rejected_early, undefined);
  assert.ok(Math.abs(f.current_us / f.median_us - 2) < 0.05, `speedup ${f.current_us / f.median_us}`);
  assert.deepEqual(swaps, ['f']);
});

test('a strict step starts no unit that does not fit before the deadline', async () => {
  const bk = scriptedBackend({ a: { speed: 1 }, e: { speed: 2 }, b: { speed: 0.5 } });
  let probed = 0, plainWorked = 0, last = null;
  // Steps with no time left: a plain one does one unit of work each time.
  await tune(['a', 'e', 'b'], bk, {
    budgetMs: 0,
    async strictProbe(t) {
      const total = () => bk.calls.time + bk.calls.runOnce;
      // Did the plain step after the last probe run a kernel?
      if (last !== null && total() > last) plainWorked++;
      last = null;
      // Once the first candidate is done (unit times known), a strict step
      // with no time left must leave the bench alone.
      if (t.evaluated < 1 || t.phase !== 'running') return false;
      const before = total();
      await t.step(performance.now(), true);
      assert.equal(total(), before);
      probed++;
      last = before;
      return false;
    },
  });
  assert.ok(probed >= 5 && plainWorked >= 3, `probed ${probed}, plain steps that ran a kernel ${plainWorked}`);
});

test('a queue refused by a rate limit is opened again later, not given up', async () => {
  const order = ['a', 'b'];
  const events = order.map((c, index) => ['candidate',
    `{"index":${index},"total":2,"source":"explore","sha256":"${sha(c)}","url":"/k/${sha(c)}","meta":${JSON.stringify(meta(sha(c)))},"ticket":"t-${c}","seed":${index + 1},"check":[0],"space_checksum":"x"}`]);
  events.push(['done', '{"total":2,"skipped":0}']);
  let refuse = 5, queueCalls = 0;
  globalThis.fetch = async (url) => {
    if (url.includes('/queue?')) {
      queueCalls++;
      // fetchRetrying's five attempts all meet the limit (Retry-After 0 keeps the test fast).
      if (refuse-- > 0) return new Response('{"error":"rate limited"}', { status: 429, headers: { 'retry-after': '0' } });
      return new Response(sse(events), { headers: { 'content-type': 'text/event-stream' } });
    }
    return new Response('{}', { status: 200 });
  };
  const host = { server: '', sessionId: 's', fetchKernel: async () => new ArrayBuffer(8), adopt: async () => {}, measured() {}, reported() {} };
  const t = new KernelTuner(host, backend, 'matmul', SHAPE, impl(sha('a')));
  const realNow = performance.now.bind(performance);
  let skew = 0;
  performance.now = () => realNow() + skew;
  try {
    await t.step(performance.now() + 1e6);
    assert.equal(t.phase, 'opening');
    for (let i = 0; i < 50 && t.phase !== 'waiting'; i++) await new Promise((r) => setTimeout(r, 1));
    assert.equal(queueCalls, 5);
    assert.equal(t.phase, 'waiting', 'back to waiting after the rate limit');
    // Not before its back-off: a step now opens nothing.
    await t.step(performance.now() + 1e6);
    assert.equal(queueCalls, 5);
    skew += 16_000;
    for (let i = 0; i < 2000 && t.phase !== 'done'; i++) {
      await t.step(performance.now() + 1e6);
      await new Promise((r) => setTimeout(r, 0));
    }
  } finally {
    performance.now = realNow;
  }
  assert.equal(queueCalls, 6);
  assert.equal(t.phase, 'done');
  assert.equal(t.evaluated, 2, 'the queue was tuned after all');
});

test("the block formats' column norms (every candidate's check scale) decode the words as bAt does", async () => {
  const { blockColumnNorms, bAt } = await load('src/check.ts');
  const { seededInputs } = await load('src/rng.ts');
  for (const op of ['matmul_q4', 'matmul_q4_1', 'matmul_q8_0']) {
    const shape = [3, 96, 40];
    const args = seededInputs(argSpecs(op, shape), 12345n);
    const out = new Float64Array(40);
    blockColumnNorms(op, 96, 40, args, out);
    for (let j = 0; j < 40; j++) {
      let s = 0;
      for (let kk = 0; kk < 96; kk++) s += bAt(op, shape, args, 0, kk, j) ** 2;
      assert.ok(Math.abs(Math.sqrt(s) - out[j]) <= 1e-12 * Math.sqrt(s), `${op} column ${j}: ${out[j]} against ${Math.sqrt(s)}`);
    }
  }
});

/**
 * A clock that runs in real time plus what fake kernel calls add (so that
 * the app's calls take exactly their scripted time), and a fake binding
 * whose call advances it by `ms()`. `restore` puts performance.now back.
 */
function fakeClock(burst = () => 0) {
  const real = performance.now.bind(performance);
  let skew = 0;
  performance.now = () => real() + skew;
  return {
    binding: (ms) => ({ async bind() {}, call() { skew += ms() + burst(); } }),
    restore: () => (performance.now = real),
  };
}

test("a candidate is adopted only when faster in the app's own calls (every other call, ABBA): clearly faster, clearly slower, within the floor, noisy", async () => {
  const { WasmKernel } = await load('src/webtune.ts');
  // Every seventh call, whichever kernel it runs, takes 2 ms longer (another process's burst).
  let calls = 0;
  const noisy = { on: false };
  const clock = fakeClock(() => (noisy.on && ++calls % 7 === 0 ? 2 : 0));
  try {
    // [the candidate's call, ms (against 1 ms), adopted, pairs at most, bursts]
    const cases = [
      [() => 0.5, true, 8, false],
      [() => 1.5, false, 2, false],
      // Both calls of the first cycle at 3x: ended at once, on the one pair.
      [() => 3, false, 1, false],
      [() => 0.99, false, 24, false],
      // The bursts swamp the pairs' mean log ratio; the candidate is still faster in most pairs.
      [() => 0.9, true, 24, true],
      [() => 1, false, 24, true],
    ];
    for (const [candMs, want, maxPairs, bursts] of cases) {
      noisy.on = bursts;
      const made = [];
      const k = new WasmKernel('matmul', [4, 32, 5], impl(sha('a')), 'server', 'default', clock.binding(() => 1), () => {
        const b = clock.binding(candMs);
        made.push(b);
        return b;
      });
      const trial = k.trial(impl(sha('b')));
      await new Promise((r) => setTimeout(r, 0));
      for (let c = 0; k.trialPending && c < 400; c++) k.run(0, 0, 0);
      const r = await trial;
      assert.equal(r.ok, want, `candidate ${r.cand_ms} ms against ${r.cur_ms} ms over ${r.pairs} pairs`);
      assert.ok(r.pairs <= maxPairs, `${r.pairs} pairs`);
      assert.equal(k.sha256, want ? sha('b') : sha('a'));
      assert.equal(made.length, 1);
      assert.equal(k.unguarded, want);
      // The next trial binds into the spare binding (its scratch pages are reused); after an adoption the
      // kernel replaced stays bound as the plan guard's base until its verdict, so that trial binds one more.
      const again = k.trial(impl(sha('d')));
      await new Promise((r) => setTimeout(r, 0));
      while (k.trialPending) k.run(0, 0, 0);
      await again;
      assert.equal(made.length, want ? 2 : 1);
      // Once the verdict is in, the base's binding is the spare: no new binding for a third trial.
      k.settle(true, 1);
      assert.equal(k.unguarded, false);
      const third = k.trial(impl(sha('e')));
      await new Promise((r) => setTimeout(r, 0));
      while (k.trialPending) k.run(0, 0, 0);
      await third;
      assert.equal(made.length, want ? 2 : 1);
    }
  } finally {
    clock.restore();
  }
});

test("a candidate its family vouches for is decided from two pairs when faster by the floor; otherwise its trial runs as any other's", async () => {
  const { WasmKernel } = await load('src/webtune.ts');
  const clock = fakeClock();
  try {
    // [the candidate's call, ms (against 1 ms), vouched, adopted, pairs: at least, at most]
    const cases = [
      [() => 0.9, true, true, 2, 2],
      [() => 0.9, false, true, 6, 8],
      // Within the floor: the two pairs do not decide, the usual rules do (the sequential test turns it down).
      [() => 0.99, true, false, 3, 24],
      [() => 1.5, true, false, 1, 2],
    ];
    for (const [candMs, vouched, want, minPairs, maxPairs] of cases) {
      const k = new WasmKernel('matmul', [4, 32, 5], impl(sha('a')), 'server', 'default', clock.binding(() => 1), () => clock.binding(candMs));
      const trial = k.trial(impl(sha('b')), 0, vouched);
      await new Promise((r) => setTimeout(r, 0));
      for (let c = 0; k.trialPending && c < 400; c++) k.run(0, 0, 0);
      const r = await trial;
      const what = `${candMs()} ms, vouched ${vouched}: ${r.pairs} pairs`;
      assert.equal(r.ok, want, what);
      assert.ok(r.pairs >= minPairs && r.pairs <= maxPairs, what);
    }
  } finally {
    clock.restore();
  }
});

test("a candidate faster on the bench but slower in the model's own calls never ends up in use; one faster in both does, and the report ranks by the model", async () => {
  const { Webtune, WasmKernel } = await load('src/webtune.ts');
  const { KernelCache } = await load('src/cache.ts');
  // On the bench (hot inputs): b is twice as fast as a, c 1.25 times. In the
  // model (each call's weights streamed from memory): b is 30 % slower than
  // a, c 30 % faster.
  const appMs = { a: 1, b: 1.3, c: 0.7 };
  const bk = scriptedBackend({ a: { speed: 1 }, b: { speed: 0.5 }, c: { speed: 0.8 } });
  const order = ['a', 'b', 'c'];
  const events = order.map((c, index) => ['candidate',
    `{"index":${index},"total":3,"source":"explore","sha256":"${sha(c)}","url":"/k/${sha(c)}","meta":${JSON.stringify(meta(sha(c)))},"ticket":"t-${c}","seed":${index + 1},"check":[0,7],"space_checksum":"x"}`]);
  events.push(['done', '{"total":3,"skipped":0}']);
  globalThis.fetch = async (url) => {
    if (url.includes('/queue?')) return new Response(sse(events), { headers: { 'content-type': 'text/event-stream' } });
    return new Response('{"results":[]}', { status: 200 });
  };
  const wt = new Webtune({
    opts: { target: 'wasm', trials: 'all' }, server: 'http://x', fingerprint: {}, session: { session_id: 's', device_key: 'k', arch_key: '', vendor_key: '', rho: '' },
    memory: null, device: null, cache: await KernelCache.open(false), rho: null, pool: null, threads: { count: 1 }, bundle: null, offline: null, bundleError: null,
  });
  // The fake kernels' bytes do not hash to their names.
  wt.fetchKernel = async () => new ArrayBuffer(8);
  const clock = fakeClock();
  try {
    const bindingOf = (i) => clock.binding(() => appMs[i.sha256[0]]);
    let bound = impl(sha('a'));
    const spare = () => {
      const b = { async bind(i) { bound = i; }, call() { bindingOf(bound).call(); } };
      return b;
    };
    const handle = new WasmKernel('matmul', SHAPE, impl(sha('a')), 'server', 'default', bindingOf(impl(sha('a'))), spare);
    const trials = [], swaps = [];
    wt.addEventListener('trial', (e) => trials.push(e.detail));
    wt.addEventListener('swap', (e) => swaps.push(e.detail));
    const t = new KernelTuner(wt.host(handle), bk, 'matmul', SHAPE, impl(sha('a')));
    for (let i = 0; i < 5000 && t.phase !== 'done' && t.phase !== 'reporting'; i++) {
      await t.step(performance.now() + 1e6);
      // The model's own calls between idle slices: they feed a trial in progress.
      for (let c = 0; c < 8; c++) handle.run(0, 0, 0);
      await new Promise((r) => setTimeout(r, 0));
    }
    assert.deepEqual(trials.map((d) => [d.to[0], d.adopted]), [['b', false], ['c', true]], `${t.phase} ${t.notes.join('; ')} ${JSON.stringify(t.results.map((m) => [m.sha256[0], m.ok, m.error]))}`);
    assert.ok(trials[0].bench_speedup > 1.9 && trials[0].app_speedup < 0.8, JSON.stringify(trials[0]));
    assert.ok(Math.abs(trials[1].app_speedup - 1 / 0.7) < 0.02, JSON.stringify(trials[1]));
    assert.equal(handle.sha256, sha('c'));
    assert.equal(t.current.sha256, sha('c'));
    assert.deepEqual(swaps.map((s) => s.to[0]), ['c']);
    assert.ok(Math.abs(swaps[0].speedup - 1 / 0.7) < 0.02, 'the swap event gives the model\'s speedup');
    assert.ok(t.notes.some((n) => /faster on the bench .* but not in the app's calls/.test(n)), t.notes.join('\n'));
    // The report ranks by what the model measured: c, a, then b (fastest on the bench).
    const body = t.reportBody();
    assert.deepEqual(body.entries.map((e) => e.sha256[0]), ['c', 'a', 'b']);
  } finally {
    clock.restore();
    wt.close();
  }
});

test("the plan guard's verdict on a WasmKernel: a put-back restores the kernel it replaced, whose binding ran the guard's base side", async () => {
  const { WasmKernel } = await load('src/webtune.ts');
  const ran = [];
  const binding = (name) => ({ async bind() {}, call() { ran.push(name); } });
  let n = 0;
  const k = new WasmKernel('matmul', [4, 32, 5], impl(sha('a')), 'server', 'default', binding('a'), () => binding(`new${++n}`));
  const reverts = [];
  k.onRevert = (to, lost, ratio) => reverts.push([to.sha256, lost.sha256, ratio]);
  await k.adopt(impl(sha('b')));
  assert.equal(k.sha256, sha('b'));
  assert.equal(k.unguarded, true);
  k.run(0);
  k.useBase(true);
  k.run(0);
  k.useBase(false);
  k.run(0);
  assert.deepEqual(ran, ['new1', 'a', 'new1']);
  k.settle(false, 1.2);
  assert.equal(k.sha256, sha('a'));
  assert.equal(k.unguarded, false);
  assert.deepEqual(reverts, [[sha('a'), sha('b'), 1.2]]);
  k.run(0);
  assert.equal(ran.at(-1), 'a');
  // The put-back kernel's binding is the spare: the next adoption binds into it.
  await k.adopt(impl(sha('c')));
  assert.equal(n, 1);
  k.run(0);
  assert.equal(ran.at(-1), 'new1');
});

test('a family: a lighter kernel waits for a heavier sibling still tuning, except to try that sibling\'s threaded winner at once', () => {
  const host = { server: '', sessionId: 's', fetchKernel: async () => new ArrayBuffer(8), adopt: async () => {}, reported() {}, measured() {} };
  const kernel = (m, h, config, threads) => ({ sha256: h, meta: { ...meta(h), shape: [m, 8, 8], args: argSpecs('matmul', [m, 8, 8]), config, threads }, bytes: new ArrayBuffer(8) });
  const family = new Family();
  const heavy = new KernelTuner(host, backend, 'matmul', [64, 8, 8], kernel(64, sha('h'), { x0: 4 }, null));
  const light = new KernelTuner(host, backend, 'matmul', [16, 8, 8], kernel(16, sha('l'), { x0: 4 }, null));
  for (const t of [heavy, light]) {
    t.policy = 'fast';
    t.join(family);
  }
  heavy.share = 0.8;
  light.share = 0.2;
  // The heavier sibling still on its default kernel: the lighter one waits, nothing to transfer.
  assert.equal(light.behindSibling, true);
  assert.equal(light.transferPending, false);
  // A single-threaded winner: it still waits (the winner is its first candidate once the sibling is done).
  heavy.current = kernel(64, sha('w'), { x0: 8 }, null);
  assert.equal(light.transferPending, false);
  assert.equal(light.behindSibling, true);
  // A threaded winner: tried at once.
  heavy.current = kernel(64, sha('t'), { x0: 8, threads: 2 }, 2);
  assert.equal(light.transferPending, true);
  assert.equal(light.behindSibling, false);
  // The sibling's threaded settings vouch for the same settings here, not for other settings or thread counts.
  assert.equal(light.vouched(kernel(16, sha('u'), { x0: 8, threads: 2 }, 2)), true);
  assert.equal(light.vouched(kernel(16, sha('v'), { x0: 4, threads: 2 }, 2)), false);
  assert.equal(light.vouched(kernel(16, sha('x'), { x0: 8, threads: 2 }, 3)), false);
  assert.equal(heavy.vouched(kernel(64, sha('y'), { x0: 8, threads: 2 }, 2)), false);
  // Not for the heavier kernel itself, nor under the legacy policy.
  assert.equal(heavy.transferPending, false);
  light.policy = 'legacy';
  assert.equal(light.transferPending, false);
  assert.equal(light.vouched(kernel(16, sha('u'), { x0: 8, threads: 2 }, 2)), false);
});
