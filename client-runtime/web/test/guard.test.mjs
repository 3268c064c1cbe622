// The plan guard (src/plan-guard.ts) on simulated model calls: a clock of
// its own, kernels with known costs per version, seeded noise and a slow
// drift of the whole machine's speed (which ABBA pairs must cancel).
// Checks that a slower plan is put back, a faster one kept, a plan is judged
// as a whole (one kernel's gain cannot hide another's loss), kernels on
// trial and unchanged plans are left alone, and waiters are released.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { load } from './load.mjs';

const { PlanGuard, GUARD_MAX_PAIRS, GUARD_TIMEOUT_MS } = await load('src/plan-guard.ts');

/** A kernel as the guard sees it: a version in use, maybe a base, and a cost (ms) per version. */
class Kernel {
  constructor(name, costs) {
    this.name = name;
    this.op = 'matmul';
    this.shape = [1, 2, 3];
    this.costs = costs;
    this.cur = 'a';
    this.base = null;
    this.onBase = false;
    this.trialPending = false;
    this.quiet = true;
    this.verdicts = [];
  }
  get unguarded() {
    return this.base !== null;
  }
  swap(to) {
    if (this.base === null) this.base = this.cur;
    this.cur = to;
  }
  useBase(on) {
    this.onBase = on && this.base !== null;
  }
  settle(keep, ratio) {
    this.verdicts.push({ keep, ratio });
    if (!keep) this.cur = this.base;
    this.base = null;
    this.onBase = false;
  }
  get running() {
    return this.onBase ? this.base : this.cur;
  }
}

/** A model: its kernels, a clock and seeded noise (about 2 % per call) on a drifting machine. */
function model(kernels, seed = 1) {
  let t = 0, s = seed >>> 0, calls = 0;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const verdicts = [];
  const guard = new PlanGuard((d) => verdicts.push(d), undefined, () => t);
  const call = (kind = '1', ks = kernels) =>
    guard.call(kind, ks, () => {
      calls++;
      const drift = 1 + 0.3 * Math.sin(calls / 40);
      const noise = Math.exp(0.02 * (rand() + rand() + rand() - 1.5) * 2);
      t += ks.reduce((a, k) => a + k.costs[k.running], 0) * drift * noise;
    });
  return { guard, call, verdicts, tick: (ms) => (t += ms), get calls() { return calls; } };
}

test('a plan slower in the model calls is put back', () => {
  const k = [new Kernel('qkv', { a: 10, b: 12 }), new Kernel('head', { a: 20 })];
  const m = model(k);
  k[0].swap('b');
  for (let i = 0; i < 200 && !m.verdicts.length; i++) m.call();
  assert.equal(m.verdicts.length, 1);
  assert.equal(m.verdicts[0].kept, false);
  assert.ok(m.verdicts[0].ratio > 1.02 && m.verdicts[0].ratio < 1.12, `ratio ${m.verdicts[0].ratio}`);
  assert.equal(k[0].cur, 'a');
  assert.equal(k[0].unguarded, false);
  assert.deepEqual(m.verdicts[0].kernels, [{ op: 'matmul', shape: [1, 2, 3] }]);
  // Judged once: the next calls run the base again, and nothing is judged.
  for (let i = 0; i < 20; i++) m.call();
  assert.equal(m.verdicts.length, 1);
  assert.deepEqual(m.guard.pending(), []);
});

test('a faster plan is kept within a few pairs', () => {
  const k = [new Kernel('qkv', { a: 10, b: 7 }), new Kernel('head', { a: 20 })];
  const m = model(k, 7);
  k[0].swap('b');
  for (let i = 0; i < 200 && !m.verdicts.length; i++) m.call();
  assert.equal(m.verdicts[0].kept, true);
  assert.ok(m.verdicts[0].pairs <= 8, `${m.verdicts[0].pairs} pairs`);
  assert.equal(k[0].cur, 'b');
  assert.equal(k[0].unguarded, false);
});

test('the plan is judged whole: a gain in one kernel does not hide a larger loss in another', () => {
  const k = [new Kernel('qkv', { a: 10, b: 8 }), new Kernel('ffn', { a: 10, c: 14 })];
  const m = model(k, 3);
  k[0].swap('b');
  k[1].swap('c');
  for (let i = 0; i < 200 && !m.verdicts.length; i++) m.call();
  assert.equal(m.verdicts[0].kept, false);
  assert.equal(m.verdicts[0].kernels.length, 2);
  assert.deepEqual(k.map((x) => x.cur), ['a', 'a']);
});

test('a plan no faster and no slower is decided by its median pair within the cap', () => {
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const k = [new Kernel('qkv', { a: 10, b: 10 })];
    const m = model(k, seed);
    k[0].swap('b');
    for (let i = 0; i < 4 * GUARD_MAX_PAIRS + 8 && !m.verdicts.length; i++) m.call();
    assert.equal(m.verdicts.length, 1, `seed ${seed}`);
    assert.ok(m.verdicts[0].pairs <= GUARD_MAX_PAIRS);
    assert.equal(m.verdicts[0].kept, m.verdicts[0].ratio <= 1);
  }
});

test('the base side runs the base: a kernel sees its base only inside a base-side call', () => {
  // 5 % slower: not put back before the fourth pair.
  const k = [new Kernel('qkv', { a: 10, b: 10.5 })];
  const seen = [];
  let t = 0;
  const guard = new PlanGuard(() => {}, undefined, () => t);
  k[0].swap('b');
  for (let i = 0; i < 8; i++) guard.call('1', k, () => { seen.push(k[0].running); t += k[0].costs[k[0].running]; });
  // ABBA: base, plan, plan, base.
  assert.deepEqual(seen, ['a', 'b', 'b', 'a', 'a', 'b', 'b', 'a']);
  assert.equal(k[0].running, 'b');
});

test('no judgement while a kernel of the call is still being tuned; one that starts again drops it', () => {
  const k = [new Kernel('qkv', { a: 10, b: 12 }), new Kernel('head', { a: 20, b: 21 })];
  const m = model(k);
  k[0].swap('b');
  k[1].quiet = false;
  for (let i = 0; i < 40; i++) m.call();
  assert.deepEqual(m.guard.pending(), []);
  assert.equal(m.verdicts.length, 0);
  k[1].quiet = true;
  m.call();
  assert.deepEqual(m.guard.pending(), ['1']);
  k[1].quiet = false;
  m.call();
  assert.deepEqual(m.guard.pending(), []);
  assert.equal(k[0].unguarded, true);
  assert.equal(k[0].cur, 'b');
});

test('no judgement while a kernel of the call is on a trial of its own, nor for an unchanged plan', () => {
  const k = [new Kernel('qkv', { a: 10, b: 12 }), new Kernel('head', { a: 20, b: 21 })];
  const m = model(k);
  for (let i = 0; i < 20; i++) m.call();
  assert.deepEqual(m.guard.pending(), []);
  k[0].swap('b');
  k[1].trialPending = true;
  for (let i = 0; i < 40; i++) m.call();
  assert.deepEqual(m.guard.pending(), []);
  assert.equal(m.verdicts.length, 0);
  assert.equal(k[0].cur, 'b');
  k[1].trialPending = false;
  m.call();
  assert.deepEqual(m.guard.pending(), ['1']);
  // A trial that starts anyway drops the judgement (it is started again later).
  k[1].trialPending = true;
  m.call();
  assert.deepEqual(m.guard.pending(), []);
  assert.equal(k[0].unguarded, true);
});

test('a kernel judged in one kind waits for the verdict; released() resolves then', async () => {
  const k = [new Kernel('qkv', { a: 10, b: 14 })];
  const m = model(k);
  k[0].swap('b');
  m.call();
  assert.ok(m.guard.holds(k[0]));
  assert.ok(m.guard.judges(k[0]));
  // Another kind with the same kernel does not open a second judgement of it.
  m.call('128');
  assert.deepEqual(m.guard.pending(), ['1']);
  let released = false;
  const p = m.guard.released(k[0]).then(() => (released = true));
  await Promise.resolve();
  assert.equal(released, false);
  for (let i = 0; i < 200 && !m.verdicts.length; i++) m.call();
  await p;
  assert.equal(released, true);
  assert.equal(m.guard.holds(k[0]), false);
  assert.equal(m.guard.judges(k[0]), false);
});

test('a judgement whose kind gets no more calls is settled after the timeout', () => {
  const k = [new Kernel('qkv', { a: 10, b: 9 })];
  const m = model(k);
  k[0].swap('b');
  m.call('128', k);
  assert.deepEqual(m.guard.pending(), ['128']);
  m.tick(GUARD_TIMEOUT_MS + 1);
  // Any call of any kind settles it: with fewer than two pairs the kernel in use is kept.
  m.call('1', []);
  assert.deepEqual(m.guard.pending(), []);
  assert.equal(m.verdicts.length, 1);
  assert.equal(m.verdicts[0].kept, true);
  assert.equal(k[0].cur, 'b');
});

// ---------------------------------------------------------------------------
// Through a real decoder graph: a small llama on GraphDecoder, every product
// swapped to a kernel that computes the same values but takes longer. The
// guard alternates the two plans run by run and puts the first kernels back;
// meanwhile every run's logits stay those of the f64 reference (both plans
// compute the same), and trial runs feed it without moving the position.

const { GraphDecoder } = await load('src/decoder.ts');
const { assembleKernels } = await import('../assemble.mjs');
const { D, llamaGraph, llamaModel, llama64, jsKernels } = await import('./small-llama.mjs');

/** A product kernel the guard can judge: `fast` (the first) or, once swapped, `slow` (the same values, `extraMs` later). */
function guardedKernel(fast, extraMs) {
  const spin = (ms) => {
    const t = performance.now();
    while (performance.now() - t < ms);
  };
  const slow = { run: (...a) => (fast.run(...a), spin(extraMs)) };
  return {
    cur: fast, base: null, onBase: false, trialPending: false, quiet: true, settled: [],
    get unguarded() { return this.base !== null; },
    swap() { this.base = this.cur; this.cur = slow; },
    useBase(on) { this.onBase = on && this.base !== null; },
    settle(keep) { this.settled.push(keep); if (!keep) this.cur = this.base; this.base = null; this.onBase = false; },
    run(...a) { (this.onBase ? this.base : this.cur).run(...a); },
    get slow() { return this.cur === slow; },
  };
}

test('GraphDecoder runs go through the guard by bucket: a slower plan is put back, and the logits stay exact while the plans alternate', { timeout: 120_000 }, async () => {
  const model = llamaModel(21);
  const graph = llamaGraph(model.formats, [1, 4, 8]);
  const ids = Array.from({ length: 40 }, (_, i) => (i * 37 + 5) % D.vocab);
  const want = llama64(model.values, ids);
  const dec = await GraphDecoder.create({ graph, tensors: model.tensors, weights: model.weights, context: 64, fixed: await assembleKernels('decoder-kernels.wat'), shared: false });
  const made = [];
  const js = jsKernels(dec.memory, []);
  const verdicts = [];
  const guard = new PlanGuard((d) => verdicts.push(d));
  const kinds = [];
  dec.setKernels(async (op, shape) => {
    const k = guardedKernel(await js(op, shape), 0.3);
    made.push(k);
    return k;
  }, { call: (kind, kernels, run) => (kinds.push([kind, kernels.length]), guard.call(kind, kernels, run)), due: (kind, kernels) => guard.due(kind, kernels) });
  await dec.kernels(1);
  const decodeKernels = made.length;
  await dec.feed([ids[0]]);
  assert.deepEqual(dec.dueBuckets(), [], 'nothing changed: nothing to judge');
  dec.reset();
  for (const k of made) k.swap();
  // Due before any run of it (what TextGenerator.idle() runs trial steps for).
  assert.deepEqual(dec.dueBuckets(), [1]);
  let worst = 0;
  for (let t = 0; t < ids.length; t++) {
    const got = await dec.feed([ids[t]]);
    let e = 0, m = 0;
    for (let i = 0; i < D.vocab; i++) {
      e = Math.max(e, Math.abs(got[i] - want[t][i]));
      m = Math.max(m, Math.abs(want[t][i]));
    }
    worst = Math.max(worst, e / m);
    if (t === 20) {
      // Trial runs (what TextGenerator.idle() does for a bucket under judgement) leave the position and caches as they were.
      await dec.trialRun(1);
      assert.equal(dec.position, 21);
    }
  }
  assert.ok(worst < 1e-4, `worst logit error ${worst} while the guard alternated the plans`);
  assert.ok(kinds.every(([kind, n]) => kind === '1' && n === decodeKernels), JSON.stringify(kinds.slice(0, 3)));
  assert.equal(verdicts.length, 1, `${JSON.stringify(verdicts)} pending ${guard.pending()} ${made.map((k) => [k.unguarded, k.slow])}`);
  assert.equal(verdicts[0].kind, '1');
  assert.equal(verdicts[0].kept, false);
  assert.equal(verdicts[0].kernels.length, decodeKernels);
  assert.ok(verdicts[0].ratio > 1, `plan / base ${verdicts[0].ratio}`);
  assert.ok(made.every((k) => !k.slow && !k.unguarded && k.settled.length === 1), 'every kernel back on its first');
  assert.deepEqual(dec.dueBuckets(), []);
  // A prompt run is another kind (bucket 8): its own kernels, judged there.
  await dec.feed(ids.slice(0, 8));
  assert.equal(kinds.at(-1)[0], '8');
});

test('a kind whose calls take seconds is judged on fewer pairs: no warm-up cycle, and a cap on the time spent', () => {
  const k = [new Kernel('prefill', { a: 2000, b: 2000 })];
  const m = model(k, 11);
  k[0].swap('b');
  let calls = 0;
  while (!m.verdicts.length && calls < 100) {
    m.call('128');
    calls++;
  }
  assert.equal(m.verdicts.length, 1);
  // Every call counted (no warm-up cycle dropped) and the verdict once the calls passed twice GUARD_MAX_MS.
  assert.equal(calls, 4 * m.verdicts[0].pairs);
  assert.ok(m.verdicts[0].pairs >= 2 && m.verdicts[0].pairs <= 3, `${m.verdicts[0].pairs} pairs`);
  assert.equal(m.verdicts[0].kept, m.verdicts[0].ratio <= 1);
});
