// Unit tests of the runtime's pure parts: the seeded inputs (which must match
// the server's bit for bit), the SSE reader, the noise rule and the checks.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { load } from './load.mjs';

const rng = await load('src/rng.ts');
const ops = await load('src/ops.ts');
const sse = await load('src/sse.ts');
const stats = await load('src/stats.ts');
const check = await load('src/check.ts');
const tuner = await load('src/tuner.ts');
const http = await load('src/http.ts');
const reports = await load('src/reports.ts');

// An independent SplitMix64 in BigInt, written from the Rust source.
function* reference(seed) {
  const M = (1n << 64n) - 1n, G = 0x9e3779b97f4a7c15n;
  let x = (seed ^ G) & M;
  for (;;) {
    x = (x + G) & M;
    let z = x;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
    yield z ^ (z >> 31n);
  }
}

test('SplitMix64 on 32-bit halves equals the 64-bit definition', () => {
  for (const seed of [0n, 1n, 7n, 0xffffffffn, (1n << 53n) + 1n, (1n << 60n) - 1n, (1n << 64n) - 1n]) {
    const a = new rng.SplitMix64(seed);
    const b = reference(seed);
    for (let i = 0; i < 2000; i++) assert.equal(a.nextBig(), b.next().value, `seed ${seed} draw ${i}`);
  }
  // Values from the Rust definition, computed independently.
  const r = new rng.SplitMix64(7n);
  assert.deepEqual([r.nextBig(), r.nextBig(), r.nextBig()], [17039259473404265729n, 18363971414914884509n, 8043341295829897994n]);
});

test('seeded inputs match webtune_compiler::reference::inputs', () => {
  // matmul_q4 2,64,3 covers f32 data, packed u32 words and the q4 scales.
  const seed = 1152921504606859320n; // beyond 2^53: must not go through a double
  const [A, W, S] = rng.seededInputs(ops.argSpecs('matmul_q4', [2, 64, 3]), seed);
  assert.equal(A.length, 128);
  assert.equal(W.length, 24);
  assert.equal(S.length, 6);
  assert.deepEqual([...A.slice(0, 3)], [1056731020, 1056424580, 1062199534]);
  assert.equal(A[127], 3210627238);
  assert.deepEqual([W[0], W[1], W[23]], [3207118510, 1761921944, 3884944249]);
  assert.deepEqual([...S], [1033983286, 1012647050, 1036398790, 1021497548, 1033485782, 1025148418]);
  // Never zero, always in [-1, 1).
  const f = new Float32Array(A.buffer);
  assert.ok(f.every((x) => x !== 0 && x >= -1 && x < 1));
});

test('the golden file of webtune_compiler::reference: inputs, q4 unpacking and the f64 reference', () => {
  // compiler/tests/golden.rs writes and checks the same file from the Rust
  // side, so a change to either generator fails both suites.
  const golden = JSON.parse(readFileSync(new URL('../../../compiler/tests/golden/reference.json', import.meta.url), 'utf8'));
  assert.ok(golden.cases.length >= 4);
  for (const c of golden.cases) {
    const what = `${c.op} ${c.shape}`;
    const args = rng.seededInputs(ops.argSpecs(c.op, c.shape), BigInt(c.seed));
    assert.equal(args.length, c.inputs.length, `${what}: argument count`);
    c.inputs.forEach((want, i) => assert.deepEqual([...args[i]], want, `${what}: argument ${i}`));
    const scales = new check.Scales(c.op, c.shape, args);
    c.reference.forEach((want, p) => {
      assert.ok(Math.abs(scales.reference(p) - want) <= 1e-12 * c.scale[p], `${what}: reference[${p}] ${scales.reference(p)} vs ${want}`);
      assert.ok(Math.abs(scales.at(p) - c.scale[p]) <= 1e-12 * c.scale[p], `${what}: scale[${p}]`);
    });
    if (c.dequant) {
      const [, k, n] = c.shape;
      for (let j = 0; j < n; j++) for (let kk = 0; kk < k; kk++) {
        assert.equal(check.bAt(c.op, c.shape, args, 0, kk, j), c.dequant[j * k + kk], `${what}: dequant(W)[${j}, ${kk}]`);
      }
    }
  }
});

test('epilogue op names: args in ABI order, the same refusals as Rust, an f64 erf', () => {
  const specs = ops.argSpecs('batch_matmul+bias+gelu+residual', [2, 3, 5, 7]);
  assert.deepEqual(specs.map((s) => [s.name, s.shape]), [['A', [2, 3, 5]], ['B', [2, 5, 7]], ['bias', [7]], ['R', [2, 3, 7]], ['C', [2, 3, 7]]]);
  ops.checkShape('matmul+relu', [1, 2, 3]);
  for (const bad of ['matmul+gelu+bias', 'matmul+bias+bias', 'matmul+tanh', 'matmul_q4+bias', 'conv+bias']) {
    assert.throws(() => ops.checkShape(bad, [1, 32, 3]), /op|epilogue/, bad);
  }
  // erf against values of the f64 erf (libm).
  for (const [x, want] of [[0, 0], [0.5, 0.5204998778130465], [1, 0.8427007929497149], [-2.4, -0.999311486103355], [2.6, 0.9997639655834707], [5, 0.9999999999984626]]) {
    assert.ok(Math.abs(check.erf(x) - want) < 1e-13, `erf(${x}) = ${check.erf(x)}, want ${want}`);
  }
});

test('the block ops\' epilogues: args in ABI order (2N rows of W under +swiglu, G and E, R), the same refusals as Rust', () => {
  assert.deepEqual(ops.argSpecs('matmul_q4_1+rms_norm+swiglu+residual', [2, 64, 3]).map((s) => [s.name, s.shape]),
    [['A', [2, 64]], ['W', [6, 8]], ['D', [6, 2]], ['Mn', [6, 2]], ['G', [64]], ['E', [1]], ['R', [2, 3]], ['C', [2, 3]]]);
  assert.deepEqual(ops.argSpecs('matmul_q8_0+rms_norm', [1, 64, 5]).map((s) => [s.name, s.shape]), [['A', [1, 64]], ['W', [5, 16]], ['D', [5, 2]], ['G', [64]], ['E', [1]], ['C', [1, 5]]]);
  assert.equal(ops.flops('matmul_q4+swiglu', [1, 32, 2]), 2 * 32 * 4);
  for (const bad of ['matmul_q4_1+swiglu+rms_norm', 'matmul_q4_1+rms_norm+bias', 'matmul+rms_norm', 'matmul_i16+swiglu', 'matmul_q4+residual+f16']) {
    assert.throws(() => ops.parseOp(bad), /epilogue|takes no|f16/, bad);
  }
  // E is drawn as a scale: small and positive (reference::inputs).
  const e = rng.seededInputs(ops.argSpecs('matmul_q8_0+rms_norm', [1, 64, 5]), 9n)[4];
  const v = new Float32Array(e.buffer)[0];
  assert.ok(v >= 0.01 && v <= 0.11, `E ${v}`);
});

test('+merge: five dimensions, P in A\'s place and PM, PL after the weights, the same refusals as Rust, PL in (1, 2)', () => {
  assert.deepEqual(ops.argSpecs('matmul_q4_1+merge+residual', [1, 576, 576, 9, 16]).map((s) => [s.name, s.shape]),
    [['P', [1, 9, 16, 64]], ['W', [576, 72]], ['D', [576, 18]], ['Mn', [576, 18]], ['PM', [1, 9, 16]], ['PL', [1, 9, 16]], ['R', [1, 576]], ['C', [1, 576]]]);
  ops.checkShape('matmul_q8_0+merge', [1, 64, 4, 2, 2]);
  assert.throws(() => ops.checkShape('matmul_q8_0+merge', [1, 64, 4]), /takes 5 dimensions/);
  assert.throws(() => ops.checkShape('matmul_q8_0+merge', [1, 64, 4, 3, 2]), /heads of a multiple of 4/);
  for (const bad of ['matmul_q4_1+merge+rms_norm', 'matmul_q4_1+rms_norm+merge', 'matmul+merge', 'matmul_q4_1+residual+merge']) {
    assert.throws(() => ops.parseOp(bad), /epilogue|takes no|go together/, bad);
  }
  const pl = new Float32Array(rng.seededInputs(ops.argSpecs('matmul_q8_0+merge', [2, 64, 4, 2, 8]), 5n)[4].buffer);
  assert.ok(pl.every((v) => v > 1 && v < 2), `PL ${pl}`);
});

test('matmul_q4_1 and matmul_q8_0: args, refusals, minimums from their scales in slices and on both paths', () => {
  assert.deepEqual(ops.argSpecs('matmul_q4_1', [2, 64, 3]).map((s) => [s.name, s.dtype, s.shape]), [['A', 'f32', [2, 64]], ['W', 'u32', [3, 8]], ['D', 'f32', [3, 2]], ['Mn', 'f32', [3, 2]], ['C', 'f32', [2, 3]]]);
  assert.deepEqual(ops.argSpecs('matmul_q8_0', [2, 64, 3]).map((s) => [s.name, s.dtype, s.shape]), [['A', 'f32', [2, 64]], ['W', 'u32', [3, 16]], ['D', 'f32', [3, 2]], ['C', 'f32', [2, 3]]]);
  for (const op of ['matmul_q4_1', 'matmul_q8_0']) {
    assert.throws(() => ops.checkShape(op, [1, 40, 3]), /K % 32/);
    assert.throws(() => ops.checkShape(`${op}+bias`, [1, 32, 3]), /no epilogue/);
    assert.throws(() => ops.checkShape(`${op}+f16`, [1, 32, 3]), /no f16 form/);
  }
  const specs = ops.argSpecs('matmul_q4_1', [3, 96, 70]);
  const whole = rng.seededInputs(specs, 5n);
  const g = new rng.InputGen(specs, 5n, false);
  while (!g.fill(37));
  g.args.forEach((a, i) => assert.deepEqual([...a], [...whole[i]], `argument ${i}`));
  const d = new Float32Array(whole[2].buffer), mn = new Float32Array(whole[3].buffer);
  d.forEach((x, i) => assert.ok(x > 0 && mn[i] <= -7 * x && mn[i] >= -8 * x, `block ${i}: ${x} ${mn[i]}`));
  // Q8_0's bytes are signed: byte 3 of 0x80000000 is -128.
  assert.equal(check.bAt('matmul_q8_0', [1, 32, 1], [new Uint32Array(8), new Uint32Array([0x80000000, 0, 0, 0, 0, 0, 0, 0]), new Uint32Array([0x3f800000])], 0, 3, 0), -128);
});

test('inputs generated in slices equal inputs generated at once', () => {
  const specs = ops.argSpecs('batch_matmul', [3, 5, 7, 11]);
  const whole = rng.seededInputs(specs, 99n);
  const g = new rng.InputGen(specs, 99n);
  let calls = 0;
  while (!g.fill(13)) calls++;
  assert.ok(calls > 10);
  assert.deepEqual(g.args.map((a) => [...a]), whole.map((a) => [...a]));
});

test('parseCandidate keeps a u64 seed exact', () => {
  const c = tuner.parseCandidate('{"index":0,"total":2,"source":"explore","sha256":"ab","url":"/v1/kernels/ab","meta":{},"ticket":"t","seed":1152921504606846975,"space_checksum":"x"}');
  assert.equal(c.seed, 1152921504606846975n);
  assert.equal(c.total, 2);
});

function streamOf(chunks) {
  const enc = new TextEncoder();
  let i = 0;
  return {
    read: async () => (i < chunks.length ? { value: enc.encode(chunks[i++]), done: false } : { value: undefined, done: true }),
    cancel: async () => {},
  };
}

test('the SSE reader splits events across chunk boundaries and skips comments', async () => {
  const r = new sse.SseReader(streamOf([
    ': keep-alive\n\nevent: cand', 'idate\nid: 0\ndata: {"a":1}\n', '\nevent: candidate\r\ndata: {"a":\r\ndata: 2}\r\n\r\n',
    'event: done\ndata: {"total":2}',
  ]));
  assert.deepEqual(await r.next(), { event: 'candidate', data: '{"a":1}' });
  assert.deepEqual(await r.next(), { event: 'candidate', data: '{"a":\n2}' });
  assert.deepEqual(await r.next(), { event: 'done', data: '{"total":2}' });
  assert.equal(await r.next(), null);
});

test('a swap needs a gain beyond the measured noise', () => {
  const cur = [10, 10.1, 9.9, 10.05, 9.95, 10, 10.02, 9.98, 10];
  assert.ok(stats.fasterBeyondNoise(cur.map((x) => x * 0.9), cur));
  assert.ok(!stats.fasterBeyondNoise(cur.map((x) => x * 0.995), cur), 'half a percent is below the 1 % floor');
  const noisy = [10, 13, 7, 12, 8, 11, 9, 14, 6];
  assert.ok(!stats.fasterBeyondNoise(noisy.map((x) => x * 0.9), noisy), 'a 10 % gain inside 30 % noise is not a gain');
  assert.ok(stats.relNoise(noisy) > 0.2);
  assert.equal(stats.median([3, 1, 2]), 2);
});

test('output checks accept f32 rounding and catch wrong values and NaN', () => {
  const shape = [4, 32, 5];
  const args = rng.seededInputs(ops.argSpecs('matmul', shape), 5n);
  const scales = new check.Scales('matmul', shape, args);
  const exact = new Float32Array(20);
  for (let p = 0; p < 20; p++) exact[p] = scales.reference(p);
  const pos = check.defaultPositions(20);
  assert.ok(pos.includes(0) && pos.includes(19));
  assert.ok(check.checkPositions(scales, exact, pos).ok);
  assert.ok(check.compareOutputs(scales, exact, exact.slice(), 2e-5).ok);
  const off = exact.slice();
  off[19] += 1e-2;
  const r = check.checkPositions(scales, off, pos);
  assert.ok(!r.ok);
  assert.equal(r.worst, 19);
  assert.equal(check.compareOutputs(scales, off, exact, 2e-5).worst, 19);
  const nan = exact.slice();
  nan[3] = NaN;
  const c = check.compareOutputs(scales, nan, exact, 2e-5);
  assert.ok(!c.ok);
  assert.equal(c.worst, 3);
  // matmul_q4: the reference dequantises nibbles with their scales.
  const q = rng.seededInputs(ops.argSpecs('matmul_q4', [2, 64, 3]), 11n);
  const qs = new check.Scales('matmul_q4', [2, 64, 3], q);
  const a = new Float32Array(q[0].buffer), s = new Float32Array(q[2].buffer);
  let want = 0;
  for (let k = 0; k < 64; k++) want += a[64 + k] * ((((q[1][2 * 8 + (k >> 3)] >>> (4 * (k & 7))) & 15) - 8) * s[2 * 2 + (k >> 5)]);
  assert.ok(Math.abs(qs.reference(1 * 3 + 2) - want) < 1e-9);
});

test('shapes are checked with a message that says what to fix', () => {
  assert.throws(() => ops.checkShape('conv', [1, 2, 3]), /unknown op/);
  assert.throws(() => ops.checkShape('batch_matmul', [1, 2, 3]), /4 dimensions/);
  assert.throws(() => ops.checkShape('matmul_q4', [1, 30, 3]), /K % 32/);
  assert.throws(() => ops.checkShape('matmul', [1, 0, 3]), /positive/);
  assert.equal(ops.flops('batch_matmul', [2, 3, 4, 5]), 240);
});

test('Scales: the row-order column norms equal the definition, batched and q4', () => {
  for (const [op, shape] of [['matmul', [3, 7, 5]], ['batch_matmul', [3, 2, 7, 5]], ['matmul_q4', [2, 64, 3]]]) {
    const args = rng.seededInputs(ops.argSpecs(op, shape), 17n);
    const s = new check.Scales(op, shape, args);
    const [b, m, k, n] = ops.bmkn(op, shape);
    const f = (w) => new Float32Array(new Uint32Array([w]).buffer)[0];
    for (let bi = 0; bi < b; bi++) for (let j = 0; j < n; j++) {
      let want = 0;
      for (let kk = 0; kk < k; kk++) {
        let v;
        if (op === 'matmul_q4') v = ((((args[1][j * (k / 8) + (kk >> 3)] >>> (4 * (kk & 7))) & 15) - 8) * f(args[2][j * (k / 32) + (kk >> 5)]));
        else v = f(args[1][bi * k * n + kk * n + j]);
        want += v * v;
      }
      assert.ok(Math.abs(s.cols[bi * n + j] - Math.sqrt(want)) < 1e-12, `${op} col ${bi},${j}`);
    }
    // at(): the row norm of the output's row times the column norm of its column.
    const p = b * m * n - 1;
    assert.equal(s.at(p), s.rows[b * m - 1] * s.cols[b * n - 1]);
  }
});

// matmul_i16 by brute force: 16-bit halves unpacked by hand, the sum in
// BigInt, SA·SB·S and the epilogue in f64; and |S|.
function i16Reference(op, shape, args, p) {
  const [, k, n] = shape, i = Math.floor(p / n), j = p % n;
  const f = (w) => new Float32Array(new Uint32Array([w]).buffer)[0];
  const half = (w, hi) => Number(BigInt.asIntN(16, BigInt(hi ? w >>> 16 : w & 0xffff)));
  let s = 0n;
  for (let kk = 0; kk < k; kk++) {
    const qa = half(args[0][i * (k / 2) + Math.floor(kk / 2)], kk % 2);
    const qb = half(args[1][Math.floor(kk / 2) * n + j], kk % 2);
    s += BigInt(qa * qb);
  }
  const x = f(args[2][i]) * f(args[3][j]) * Number(s);
  const parsed = ops.parseOp(op);
  const bias = parsed.bias ? f(args[4][j]) : 0, r = parsed.residual ? f(args[4 + (parsed.bias ? 1 : 0)][p]) : 0;
  return { value: check.epilogue(parsed, x, bias, r), sum: Number(s < 0n ? -s : s) };
}

test('matmul_i16: args in ABI order, bounded seeded inputs, the exact integer reference, bad shapes refused', () => {
  const specs = ops.argSpecs('matmul_i16+bias+gelu', [3, 8, 4]);
  assert.deepEqual(specs.map((s) => [s.name, s.dtype, s.shape]), [
    ['A', 'u32', [3, 4]], ['B', 'u32', [4, 4]], ['SA', 'f32', [3]], ['SB', 'f32', [4]], ['bias', 'f32', [4]], ['C', 'f32', [3, 4]],
  ]);
  assert.deepEqual(ops.argSpecs('matmul_i16+residual', [2, 6, 8]).map((s) => s.name), ['A', 'B', 'SA', 'SB', 'R', 'C']);
  assert.deepEqual(ops.argSpecs('matmul_i16', [2, 6, 8]).map((s) => s.name), ['A', 'B', 'SA', 'SB', 'C']);
  assert.equal(ops.flops('matmul_i16', [3, 8, 4]), 2 * 3 * 8 * 4);
  ops.checkShape('matmul_i16+bias+relu+residual', [1, 2, 4]);
  assert.throws(() => ops.checkShape('matmul_i16', [4, 7, 8]), /^Error: matmul_i16 needs K even and N a multiple of 4, got K = 7, N = 8$/);
  assert.throws(() => ops.checkShape('matmul_i16', [4, 8, 6]), /^Error: matmul_i16 needs K even and N a multiple of 4, got K = 8, N = 6$/);
  assert.throws(() => ops.checkShape('matmul_i16', [2, 4, 8, 8]), /takes 3 dimensions/);
  assert.throws(() => ops.checkShape('matmul_i16+tanh', [4, 8, 8]), /epilogue/);
  assert.throws(() => ops.checkShape('matmul_i16+gelu+bias', [4, 8, 8]), /epilogue/);
  assert.throws(() => ops.checkShape('matmul_q4+bias', [4, 32, 8]), /only matmul, batch_matmul and matmul_i16/);

  // reference::i16_bound: ⌊√((2³¹−1)/K)⌋, at most 32767.
  assert.deepEqual([2, 8, 384, 1536].map(ops.i16Bound), [32767, 16383, 2364, 1182]);
  // reference::i16_word, written out from the Rust: each half h ↦ h mod (2r+1) − r, 0 ↦ 1.
  const word = (raw, r) => {
    const half = (h) => { const v = (h % (2 * r + 1)) - r; return (v === 0 ? 1 : v) & 0xffff; };
    return (half(raw & 0xffff) | (half(raw >>> 16) << 16)) >>> 0;
  };
  assert.equal(rng.i16Word(0x00050000 + 5, 5), word(0x00050005, 5));
  assert.equal(rng.i16Word(0xffffffff, 2364), word(0xffffffff, 2364));
  assert.equal(rng.i16Word(2364, 2364), word(2364, 2364), 'a zero half becomes 1');

  for (const [op, shape, seed] of [['matmul_i16+bias+gelu', [3, 8, 4], 3n], ['matmul_i16', [5, 64, 12], 4n], ['matmul_i16+bias+relu+residual', [4, 130, 8], (1n << 62n) + 9n], ['matmul_i16', [2, 4096, 4], 5n]]) {
    const what = `${op} ${shape}`;
    const sp = ops.argSpecs(op, shape);
    const args = rng.seededInputs(sp, seed);
    const js = new rng.InputGen(sp, seed, false);
    js.fill(Infinity);
    js.args.forEach((a, i) => assert.deepEqual([...a], [...args[i]], `${what}: the JS and Wasm generators agree on argument ${i}`));
    // The words from an independent SplitMix64 (A then B, one draw a word, its low 32 bits), then SA, SB, ...
    const [m, k, n] = shape, r = ops.i16Bound(k), draws = reference(seed);
    for (const a of args.slice(0, 2)) for (let i = 0; i < a.length; i++) assert.equal(a[i], word(Number(draws.next().value & 0xffffffffn), r), `${what}: word ${i}`);
    const nonzero = (d) => { const x = (2 * Number(d >> 40n)) / 16777216 - 1; return Math.abs(x) < 1 / 64 ? 0.5 : Math.fround(x); };
    for (const a of args.slice(2)) for (let i = 0; i < a.length; i++) assert.equal(new Float32Array(a.buffer)[i], nonzero(draws.next().value), `${what}: f32 ${i}`);
    const scales = new check.Scales(op, shape, args);
    const f = (w) => new Float32Array(new Uint32Array([w]).buffer)[0];
    let biggest = 0;
    for (let p = 0; p < m * n; p++) {
      const want = i16Reference(op, shape, args, p);
      biggest = Math.max(biggest, want.sum);
      assert.ok(Math.abs(scales.reference(p) - want.value) <= 1e-12 * scales.at(p), `${what}: reference[${p}] ${scales.reference(p)} vs ${want.value}`);
      // The scale: ‖SA[i]·qa[i, :]‖ · ‖SB[j]·qb[:, j]‖ (+ |bias| + |R|).
      const i = Math.floor(p / n), j = p % n;
      let ra = 0, cb = 0;
      for (let kk = 0; kk < k; kk++) {
        const qa = check.qaAt(args, k, i, kk);
        assert.ok(qa !== 0 && Math.abs(qa) <= r && Math.abs(check.qbAt(args, n, kk, j)) <= r);
        ra += (f(args[2][i]) * qa) ** 2;
        cb += check.bAt(op, shape, args, 0, kk, j) ** 2;
      }
      assert.ok(Math.abs(scales.rows[i] - Math.sqrt(ra)) <= 1e-12 * scales.rows[i] && Math.abs(scales.cols[j] - Math.sqrt(cb)) <= 1e-12 * scales.cols[j]);
    }
    assert.ok(biggest < 2 ** 31, `${what}: every sum fits in i32`);
  }

  // An f32 kernel (exact integer sum, then SA·SB·S rounded in f32) passes;
  // one that drops a term fails.
  const op = 'matmul_i16', shape = [4, 256, 8];
  const args = rng.seededInputs(ops.argSpecs(op, shape), 21n);
  const scales = new check.Scales(op, shape, args);
  const kernel = new Float32Array(32), dropped = new Float32Array(32);
  for (let p = 0; p < 32; p++) {
    const i = Math.floor(p / 8), j = p % 8;
    let s = 0;
    for (let kk = 0; kk < 256; kk++) s = (s + check.qaAt(args, 256, i, kk) * check.qbAt(args, 8, kk, j)) | 0;
    const sa = new Float32Array(args[2].buffer)[i], sb = new Float32Array(args[3].buffer)[j];
    kernel[p] = Math.fround(Math.fround(sa * sb) * Math.fround(s));
    dropped[p] = Math.fround(Math.fround(sa * sb) * Math.fround(s - check.qaAt(args, 256, i, 255) * check.qbAt(args, 8, 255, j)));
  }
  const pos = check.defaultPositions(32);
  assert.ok(check.checkPositions(scales, kernel, pos).ok, `f32 rounding: ${check.checkPositions(scales, kernel, pos).maxErr}`);
  assert.ok(check.compareOutputs(scales, kernel, kernel.slice(), check.TOLERANCE).ok);
  assert.ok(!check.compareOutputs(scales, dropped, kernel, check.TOLERANCE).ok, 'a kernel that drops a product fails');
});

test('warm-up waits out a tier-up and the minimum time, not an upward spike', () => {
  const { noNewLow, warmedUp } = tuner;
  assert.ok(!noNewLow([1]), 'one sample says nothing');
  assert.ok(noNewLow([1.0, 0.95]) && noNewLow([1.0, 3.0]), 'noise and spikes are no new low');
  assert.ok(!noNewLow([1.0, 0.5]), 'a drop is');
  const flat = [1, 1.02];
  assert.ok(warmedUp(flat, flat, 20));
  assert.ok(!warmedUp(flat, flat, 2), 'two equal samples right after the first call may both be baseline code');
  assert.ok(!warmedUp(flat, [0.4, 0.12], 20), 'the candidate just tiered up');
  assert.ok(warmedUp(flat, [0.4, 0.12, 0.12], 20));
  assert.ok(warmedUp([1, 5, 1], [0.12, 0.12, 0.6], 20), 'a GC spike does not hold warm-up back');
  assert.ok(!warmedUp([1], [1], 20));
});

test('early rejection needs every recent pair clearly slower; futility needs the median pair no faster', () => {
  const { clearlySlower, futile, REJECT_RATIO } = tuner;
  const cur = [1, 1, 1];
  assert.ok(clearlySlower(cur, [1.4, 1.5, 1.3]));
  assert.ok(!clearlySlower(cur, [1.4, 1.5, 1.1]), 'one pair inside the ratio');
  assert.ok(!clearlySlower([1, 1], [2, 2]), 'too few pairs');
  assert.ok(!clearlySlower([1, 1, 1, 1], [4, 4, 4, 1.6]), 'still speeding up (a late tier-up)');
  assert.ok(clearlySlower([1, 2, 1, 1, 1], [1, 1, 1.3, 1.3, 1.3]), 'only the last pairs count');
  assert.ok(!clearlySlower(cur, cur.map(() => REJECT_RATIO * 0.99)));
  assert.ok(!futile([1, 1, 1, 1], [1, 1, 1, 1]), 'too few pairs');
  assert.ok(futile([1, 1, 1, 1, 1], [1, 1.05, 0.97, 1.02, 1]));
  assert.ok(!futile([1, 1, 1, 1, 1], [0.95, 0.97, 0.93, 1.02, 0.96]), 'faster in the median pair: timed to the end');
  assert.ok(!futile([1, 1, 1, 1, 1], [3, 3, 3, 3, 1.1]), 'not while speeding up');
});

test('the Wasm input filler draws the same words as the JS generator, across chunks', () => {
  assert.ok(rng.wasmFiller(), 'Node has Wasm with BigInt integration');
  for (const [op, shape, seed] of [['matmul_q4', [3, 256, 40], (1n << 63n) + 12345n], ['matmul', [200, 130, 300], 7n], ['batch_matmul', [2, 3, 4, 5], 0n]]) {
    const specs = ops.argSpecs(op, shape);
    const js = new rng.InputGen(specs, seed, false);
    js.fill(Infinity);
    const w = new rng.InputGen(specs, seed);
    while (!w.fill(40000));
    for (let i = 0; i < js.args.length; i++) assert.ok(Buffer.from(js.args[i].buffer).equals(Buffer.from(w.args[i].buffer)), `${op} argument ${i}`);
  }
});

test('Retry-After is read as seconds or a date, defaults to 1 s and is capped', () => {
  assert.equal(http.retryAfterSeconds('3'), 3);
  assert.equal(http.retryAfterSeconds(null), 1);
  assert.equal(http.retryAfterSeconds('soon'), 1);
  assert.equal(http.retryAfterSeconds('86400'), http.MAX_WAIT_S);
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(http.retryAfterSeconds('Thu, 01 Jan 2026 00:00:02 GMT', now), 2);
  assert.equal(http.retryAfterSeconds('Wed, 31 Dec 2025 00:00:00 GMT', now), 0, 'a date in the past means now');
});

test('fetchRetrying waits out 429 and 503, and gives up after MAX_ATTEMPTS', async () => {
  const answers = (statuses) => {
    const calls = [];
    const fetcher = async (url, init) => {
      calls.push({ url, body: init.body, at: Date.now() });
      const status = statuses[Math.min(calls.length - 1, statuses.length - 1)];
      return new Response(`answer ${calls.length}`, { status, headers: { 'retry-after': '0' } });
    };
    return { calls, fetcher };
  };
  const a = answers([429, 503, 200]);
  const r = await http.fetchRetrying('http://x/reports', { method: 'POST', body: '{"n":1}' }, a.fetcher);
  assert.equal(r.status, 200);
  assert.equal(await r.text(), 'answer 3');
  assert.equal(a.calls.length, 3);
  assert.ok(a.calls.every((c) => c.body === '{"n":1}'), 'the same body each time');
  const b = answers([429]);
  const last = await http.fetchRetrying('http://x/q', {}, b.fetcher);
  assert.equal(last.status, 429, 'the last refusal is returned for the caller to report');
  assert.equal(b.calls.length, http.MAX_ATTEMPTS);
  const c = answers([404]);
  assert.equal((await http.fetchRetrying('http://x/k', {}, c.fetcher)).status, 404);
  assert.equal(c.calls.length, 1, 'other errors are not retried');
  // An abort during the wait ends it at once.
  const slow = async () => new Response('', { status: 429, headers: { 'retry-after': '20' } });
  const ctl = new AbortController();
  const t0 = Date.now();
  const p = http.fetchRetrying('http://x/q', { signal: ctl.signal }, slow);
  setTimeout(() => ctl.abort(new Error('closed')), 20);
  await assert.rejects(p, /closed/);
  assert.ok(Date.now() - t0 < 5000);
});

test('rho: a bit needs a clear win, the same rule as webtune_tuner::rho_bit', async () => {
  const rho = await load('src/rho.ts');
  const margin = 0.1; // webtune_tuner::RHO_MARGIN, as GET /v1/rho sends it
  assert.equal(rho.rhoBit(0.85, margin), '1');
  assert.equal(rho.rhoBit(0.95, margin), '0', 'inside the noise band');
  assert.equal(rho.rhoBit(1.3, margin), '0');
  assert.equal(rho.rhoBit(NaN, margin), '0');
  assert.equal(rho.rhoBit(Infinity, margin), '0');
});

const latency = await load('src/latency.ts');
const batches = await load('src/batches.ts');
const encoderGpu = await load('src/encoder-gpu.ts');

test('latency log: reports the median of the latest calls at 5, 15, 50, then every 200', async () => {
  const posts = [];
  const fakeFetch = async (url, init) => {
    posts.push({ url, body: JSON.parse(init.body) });
    return new Response('{}', { status: 201 });
  };
  const log = new latency.LatencyLog('http://s', 'my model', 256, fakeFetch);
  for (let i = 1; i <= 400; i++) {
    const p = log.add('sess', 'wasm', 1, 128, i);
    assert.equal(p !== null, [5, 15, 50, 200, 400].includes(i), `call ${i}`);
    await p;
  }
  assert.equal(log.sent, 5);
  assert.equal(posts[0].url, 'http://s/v1/models/my%20model/latency');
  assert.deepEqual(posts[0].body, { session_id: 'sess', target: 'wasm', batch: 1, seq_len: 128, median_ms: 3, runs: 5 });
  // A window of the latest 15: calls 186..200, median 193.
  assert.deepEqual([posts[3].body.median_ms, posts[3].body.runs], [193, latency.WINDOW]);
  // Buckets count apart; a padded length past max_seq_length is reported as it.
  const other = new latency.LatencyLog('http://s', 'm', 254, fakeFetch);
  for (let i = 0; i < 4; i++) assert.equal(other.add('sess', 'webgpu', 1, 256, 10), null);
  assert.equal(other.add('sess', 'wasm', 1, 256, 10), null, 'another target is another bucket');
  await other.add('sess', 'webgpu', 1, 256, 10);
  assert.equal(posts.at(-1).body.seq_len, 254);
});

test('latency log: a refused or failed report is dropped, never thrown', async () => {
  let calls = 0;
  const refuse = async () => (calls++, new Response('{"error":"no"}', { status: 422 }));
  const down = async () => {
    calls++;
    throw new TypeError('network down');
  };
  for (const f of [refuse, down]) {
    const log = new latency.LatencyLog('http://s', 'm', 256, f);
    for (let i = 0; i < 4; i++) log.add('s', 'wasm', 1, 8, 1);
    await log.add('s', 'wasm', 1, 8, 1);
    assert.equal(log.sent, 0);
  }
  assert.equal(calls, 2);
});

test('latency log: a server that refuses the model\'s reports (404, 422) is sent none again; other failures are retried at the next due call', async () => {
  for (const status of [404, 422, 500]) {
    let calls = 0;
    const f = async () => (calls++, new Response('{"error":"no"}', { status }));
    const log = new latency.LatencyLog('http://s', 'm', 256, f);
    for (let i = 1; i <= 50; i++) await log.add('s', 'wasm', 1, 8, 1);
    assert.equal(calls, status === 500 ? 3 : 1, `HTTP ${status}`);
    assert.equal(log.refused, status !== 500);
  }
});

test('plan: the target when the server names one, null with the reason otherwise', async () => {
  const answer = (body, status = 200) => async (url) => {
    assert.match(url, /\/v1\/models\/m\/plan\?device_key=gpu%2Fnvidia&batch=1&seq_len=128$/);
    return new Response(JSON.stringify(body), { status });
  };
  assert.deepEqual(await latency.fetchPlan('http://s', 'm', 'gpu/nvidia', 1, 128, answer({ target: 'webgpu' })), { target: 'webgpu', reason: undefined });
  assert.deepEqual(await latency.fetchPlan('http://s', 'm', 'gpu/nvidia', 1, 128, answer({ target: null, reason: 'no latency reports' })), { target: null, reason: 'no latency reports' });
  assert.equal((await latency.fetchPlan('http://s', 'm', 'gpu/nvidia', 1, 128, answer({ target: 'cuda' }))).target, null, 'an unknown target is no answer');
  assert.deepEqual(await latency.fetchPlan('http://s', 'm', 'gpu/nvidia', 1, 128, answer({}, 404)), { target: null, reason: 'plan HTTP 404' });
});

test('encoder batches: sorted by length, maxBatch at a time, padded to a power of two and a length bucket', () => {
  const plan = batches.planBatches([9, 3, 300, 3, 8, 40], 4, 256);
  assert.deepEqual(plan, [
    { idx: [1, 3, 4, 0], b: 4, s: 16 },
    { idx: [5, 2], b: 2, s: 256 },
  ]);
  // Ties keep input order; one text is a batch of 1; the cap is max_seq_length rounded up to 4.
  assert.deepEqual(batches.planBatches([5, 5, 5], 1, 128).map((x) => x.idx), [[0], [1], [2]]);
  assert.deepEqual(batches.planBatches([100], 8, 77), [{ idx: [0], b: 1, s: 80 }]);
  assert.deepEqual(batches.planBatches([2, 3, 4], 8, 512), [{ idx: [0, 1, 2], b: 4, s: 8 }]);
});

test('encoder on WebGPU: weights packed at 256-byte offsets, a new buffer when one is full', () => {
  const t = (name, ...shape) => ({ name, shape });
  const p = encoderGpu.packTensors([t('a', 3), t('b', 10, 7), t('c', 64), t('d', 100)], 1024);
  assert.deepEqual([...p.at.entries()], [
    ['a', { buffer: 0, offset: 0, bytes: 12 }],
    ['b', { buffer: 0, offset: 256, bytes: 280 }],
    ['c', { buffer: 0, offset: 768, bytes: 256 }],
    ['d', { buffer: 1, offset: 0, bytes: 400 }],
  ]);
  assert.deepEqual(p.sizes, [1024, 400]);
  for (const x of p.at.values()) assert.equal(x.offset % encoderGpu.ALIGN, 0);
  assert.throws(() => encoderGpu.packTensors([t('big', 300)], 1024), /tensor big is 1200 bytes, above this device's maxBufferSize of 1024/);
});

test('encoder on WebGPU: grids of at most 65535 workgroups in x cover every row', () => {
  assert.deepEqual(encoderGpu.grid(1), [1, 1]);
  assert.deepEqual(encoderGpu.grid(65535), [65535, 1]);
  assert.deepEqual(encoderGpu.grid(65536), [65535, 2]);
  assert.deepEqual(encoderGpu.grid(200000), [65535, 4]);
});

test('timeQuietly samples only while the app kernels pause, and again when one started during the sample', async () => {
  const { CTRL, timeQuietly } = await load('src/threads.ts');
  const { Worker } = await import('node:worker_threads');
  const act = new Int32Array(new SharedArrayBuffer(CTRL.WORDS * 4));
  // The app is busy for ~40 ms; another thread ends it (this one blocks in Atomics.wait).
  Atomics.store(act, CTRL.APP_BUSY, 1);
  const w = new Worker(`const { workerData: a } = require('node:worker_threads');
    setTimeout(() => { Atomics.store(a, ${CTRL.APP_BUSY}, 0); Atomics.notify(a, ${CTRL.APP_BUSY}); }, 40);`, { eval: true, workerData: act });
  await new Promise((r) => w.once('online', r));
  const t0 = performance.now();
  let calls = 0, firstAt = 0;
  const ms = timeQuietly(act, () => {
    calls++;
    if (calls === 1) firstAt = performance.now() - t0;
    // An app kernel starts during the first two samples.
    if (calls <= 2) Atomics.add(act, CTRL.APP_CALLS, 1);
    return calls;
  });
  await w.terminate();
  assert.ok(firstAt >= 30, `sampled after ${firstAt.toFixed(1)} ms, while the app was busy`);
  assert.equal(calls, 3, 'samples disturbed by an app call are taken again');
  assert.equal(ms, 3);
  // A busy app that never pauses still gets its samples taken, after the waits run out.
  Atomics.store(act, CTRL.APP_BUSY, 1);
  let n = 0;
  timeQuietly(act, () => ++n, 5, 3);
  assert.equal(n, 3);
});

test('f16 ops: +f16 types every float argument, comes last, and never with matmul_i16', () => {
  assert.deepEqual(ops.parseOp('matmul+bias+gelu+f16'), { base: 'matmul', bias: true, act: 'gelu', residual: false, norm: false, glu: false, merge: false, dtype: 'f16' });
  assert.equal(ops.parseOp('matmul').dtype, 'f32');
  assert.deepEqual(ops.argSpecs('matmul_q4+f16', [2, 64, 3]).map((s) => [s.name, s.dtype]), [['A', 'f16'], ['W', 'u32'], ['S', 'f16'], ['C', 'f16']]);
  assert.deepEqual(ops.argSpecs('batch_matmul+residual+f16', [2, 3, 4, 5]).map((s) => s.dtype), ['f16', 'f16', 'f16', 'f16']);
  assert.equal(ops.elemBytes(ops.argSpecs('matmul+f16', [1, 2, 3])[0]), 2);
  for (const bad of ['matmul+f16+bias', 'matmul+f16+f16', 'matmul_i16+f16', 'matmul+f32']) assert.throws(() => ops.parseOp(bad), /epilogue|f16/, bad);
  assert.equal(check.toleranceOf('matmul+f16'), 4 / 2048 + check.TOLERANCE);
  assert.equal(check.toleranceOf('matmul_q4'), check.TOLERANCE);
});

test('a kernel that quantises its activations is held to the bound of that rounding, and only such a kernel', () => {
  // 0.51·√32/32767: half a 16-bit step per value (plus f32's rounding of the
  // scale), over a block of 32 weights, norm-scaled (reference::A16_ROUNDING).
  assert.ok(Math.abs(check.A16_ROUNDING - 8.8037e-5) < 1e-8, `${check.A16_ROUNDING}`);
  assert.equal(check.toleranceOf('matmul_q8_0', { quantize_a: true, x0: 1 }), check.TOLERANCE + check.A16_ROUNDING);
  for (const config of [undefined, {}, { quantize_a: false }, { quantize_a: 'yes' }]) assert.equal(check.toleranceOf('matmul_q4_1', config), check.TOLERANCE);
  // An output off by 5e-5 of its scale fails the f32 tolerance and passes the quantising kernel's.
  const scales = { op: 'matmul_q4_1', at: () => 1, reference: () => 0.25 };
  const got = new Float32Array([0.25 + 5e-5]);
  assert.ok(!check.checkPositions(scales, got, [0]).ok);
  assert.ok(check.checkPositions(scales, got, [0], check.toleranceOf('matmul_q4_1', { quantize_a: true })).ok);
  assert.ok(!check.checkPositions(scales, new Float32Array([0.25 + 2e-4]), [0], check.toleranceOf('matmul_q4_1', { quantize_a: true })).ok);
});

test('f16 conversion: every f16 round-trips, and any f32 rounds to the nearer neighbour, ties to even', () => {
  for (let h = 0; h < 0x10000; h++) {
    const v = ops.f16Value(h);
    if (Number.isNaN(v)) assert.ok((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0, `${h}`);
    else assert.equal(ops.f16Bits(v), h === 0x8000 ? 0x8000 : h, `bits ${h.toString(16)} (${v})`);
  }
  assert.equal(ops.f16Value(0x3c00), 1);
  assert.equal(ops.f16Value(0x7bff), 65504);
  assert.equal(ops.f16Bits(65520), 0x7c00, 'halfway past the largest rounds to infinity');
  assert.equal(ops.f16Bits(1 + 2 ** -11), 0x3c00, 'a tie goes to the even neighbour');
  assert.equal(ops.f16Bits(1 + 3 * 2 ** -11), 0x3c02);
  assert.equal(ops.f16Bits(2 ** -25), 0, 'half the smallest subnormal rounds to zero (even)');
  assert.equal(ops.f16Bits(3 * 2 ** -26), 1);
  assert.ok(Number.isNaN(ops.f16Value(ops.f16Bits(NaN))));
  // Random f32 values: the result is a neighbour and no farther than the other one.
  let s = 12345;
  for (let i = 0; i < 20000; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const x = Math.fround((s / 2 ** 32 - 0.5) * 2 ** ((i % 40) - 26));
    const h = ops.f16Bits(x), r = ops.f16Value(h);
    const up = ops.f16Value(x >= 0 ? h + 1 : h + 1), down = ops.f16Value(h > 0 && h !== 0x8000 ? h - 1 : h);
    assert.ok(Math.abs(r - x) <= Math.abs(up - x) && Math.abs(r - x) <= Math.abs(down - x), `${x} -> ${r}`);
  }
});

// A fake server for the Reporter: a token bucket per session like the
// server's (burst, then one request every `every` ms), 429 with Retry-After
// past it; batches answered per report.
function fakeServer({ burst = 2, every = 50, batch = true, retryAfter = '0' } = {}) {
  const log = [];
  let tokens = burst, at = Date.now();
  const fetcher = async (url, init) => {
    const now = Date.now();
    tokens = Math.min(burst, tokens + (now - at) / every);
    at = now;
    const body = init.body ? JSON.parse(init.body) : {};
    if (tokens < 1) {
      log.push({ url, status: 429 });
      return new Response('{"error":"too many reports from this session"}', { status: 429, headers: { 'retry-after': retryAfter } });
    }
    tokens -= 1;
    if (url.endsWith('/batch')) {
      if (!batch) return log.push({ url, status: 404 }), new Response('{"error":"no such endpoint"}', { status: 404 });
      log.push({ url, status: 200, n: body.reports.length });
      const results = body.reports.map((r) => (r.op === 'bad' ? { status: 422, error: 'bad op' } : { status: 200, report: { accepted: 1, shape: r.shape } }));
      return new Response(JSON.stringify({ results }), { status: 200 });
    }
    log.push({ url, status: 200, n: 1 });
    if (body.op === 'bad') return new Response('{"error":"bad op"}', { status: 422 });
    return new Response(JSON.stringify({ accepted: 1, shape: body.shape }), { status: 200 });
  };
  return { log, fetcher };
}

const reportOf = (i, op = 'matmul') => ({ op, shape: [i, 8, 8], target: 'wasm', entries: [{ sha256: 'a'.repeat(64), ticket: `t${i}`, median_us: 1, runs: 3, output_ok: true }] });

test('Reporter: reports that finish close together go in one batch; a full batch goes at once', async () => {
  const s = fakeServer({ burst: 100 });
  const r = new reports.Reporter('http://x', 's', s.fetcher, 200);
  const outs = await Promise.all([1, 2, 3].map((i) => r.submit(reportOf(i))));
  assert.deepEqual(outs.map((o) => o.response.shape[0]), [1, 2, 3], 'each report gets its own answer, in order');
  assert.ok(outs.every((o) => !o.error));
  assert.deepEqual(s.log.map((x) => x.n), [3], 'one request for the three');
  // More than a batch holds: the first MAX_BATCH go without lingering.
  const t0 = Date.now();
  const many = Array.from({ length: reports.MAX_BATCH + 2 }, (_, i) => r.submit(reportOf(10 + i)));
  await Promise.all(many.slice(0, reports.MAX_BATCH));
  assert.ok(Date.now() - t0 < 150, 'a full batch does not wait for the linger');
  await Promise.all(many);
  assert.deepEqual(s.log.map((x) => x.n), [3, reports.MAX_BATCH, 2]);
});

test('Reporter: a rate limit is waited out (Retry-After) and no report is lost; flush sends without lingering', async () => {
  // Burst 1, then a token every 0.9 s, Retry-After 1 s: each batch is refused at first.
  const s = fakeServer({ burst: 1, every: 900, retryAfter: '1' });
  const r = new reports.Reporter('http://x', 's', s.fetcher, 10_000);
  // Sent alone (no linger): the first takes the token.
  const first = await reports.Reporter.one('http://x', 's', reportOf(0), s.fetcher);
  assert.ok(!first.error);
  const t0 = Date.now();
  const ps = Array.from({ length: 40 }, (_, i) => r.submit(reportOf(i + 1)));
  r.flush();
  const outs = await Promise.all(ps);
  assert.ok(Date.now() - t0 < 8000, 'flush did not wait for the 10 s linger');
  assert.deepEqual(outs.map((o) => o.error ?? null), new Array(40).fill(null), 'every report stored');
  assert.deepEqual(outs.map((o) => o.response.shape[0]), Array.from({ length: 40 }, (_, i) => i + 1));
  assert.ok(s.log.some((x) => x.status === 429), 'the limit was met');
  assert.ok(r.limited >= 1);
  // 40 reports in batches of MAX_BATCH: 3 requests that got through.
  assert.equal(s.log.filter((x) => x.status === 200).length, 1 + Math.ceil(40 / reports.MAX_BATCH));
});

test('Reporter: a report the server refuses is answered with its error; a server without batches gets each alone', async () => {
  const s = fakeServer({ burst: 100 });
  const r = new reports.Reporter('http://x', 's', s.fetcher, 0);
  const [good, bad] = await Promise.all([r.submit(reportOf(1)), r.submit(reportOf(2, 'bad'))]);
  assert.ok(!good.error);
  assert.match(bad.error, /HTTP 422: bad op/);
  const old = fakeServer({ burst: 100, batch: false });
  const o = new reports.Reporter('http://x', 's', old.fetcher, 0);
  const outs = await Promise.all([o.submit(reportOf(1)), o.submit(reportOf(2))]);
  assert.deepEqual(outs.map((x) => x.response.shape[0]), [1, 2]);
  assert.ok(old.log.filter((x) => x.url.endsWith('/reports')).length === 2, JSON.stringify(old.log));
  // Network errors are tried again (the waits double from 1 s): one failure, then the answer.
  let fail = 1;
  const flaky = async (url, init) => {
    if (fail-- > 0) throw new TypeError('network down');
    return fakeServer({ burst: 100 }).fetcher(url, init);
  };
  const out = await reports.Reporter.one('http://x', 's', reportOf(7), flaky);
  assert.ok(!out.error, out.error);
});

test("a session's gate: after a 429 its requests go one at a time, Retry-After apart, not all at once", async () => {
  // Burst 1, a token every 0.9 s, Retry-After 1 s; four queues asked at once.
  const s = fakeServer({ burst: 1, every: 900, retryAfter: '1' });
  const url = `http://x/v1/sessions/${'ab'.repeat(16)}/queue?op=matmul`;
  const t0 = Date.now();
  const answers = await Promise.all([0, 1, 2, 3].map(() => http.fetchRetrying(url, {}, s.fetcher)));
  assert.deepEqual(answers.map((r) => r.status), [200, 200, 200, 200]);
  const refused = s.log.filter((x) => x.status === 429).length;
  // The first wave meets the limit (three refused); then one request a
  // turn, each taken. Without the gate every waiting request retries each
  // second: 3 + 2 + 1 refusals.
  assert.ok(refused <= 3, `${refused} requests refused: ${JSON.stringify(s.log)}`);
  assert.ok(Date.now() - t0 < 6000);
  // Other URLs (a kernel, another session's requests) never wait at this gate.
  assert.equal(http.gateOf('http://x/v1/kernels/best?op=matmul'), null);
  assert.notEqual(http.gateOf(`http://x/v1/sessions/${'cd'.repeat(16)}/reports/batch`), http.gateOf(url));
});
