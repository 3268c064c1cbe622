// Where a Q4_1 decode product's time goes in V8 (issue 36): hand-written
// variants of the 16-bit-activation kernel's inner loop (M = 1, one column
// of W at a time, as the compiler's `quantize_a` kernels), each timed over
// --layers distinct copies of seeded weights in ABBA rounds, beside the
// Wasm streaming-read probe. Some variants drop work and so compute
// something else: they bound what the rest costs. Not the product and not
// a test; one line per variant.
//
//   node --experimental-wasm-relaxed-simd research/web-bench/q41_probe.mjs \
//        [--k 576] [--n 3072] [--layers 90] [--reps 5] [--rounds 6] VARIANT_JSON...
//
// A variant is a JSON object of:
//   cols   columns of W per iteration of the column loop (1)
//   u      blocks per iteration of the block loop (1)
//   ls     the block scale as two load-splats and a vector multiply
//          instead of two scalar loads, a multiply and a splat
//   split  relaxed SIMD: activations as two signed bytes (a = 256·hi + lo),
//          four `i16x8.relaxed_dot_i8x16_i7x16_s` against the nibbles as
//          bytes, then two `i32x4.dot_i16x8_s` by 256 and 1
//   a8     relaxed SIMD: 8-bit activations (llama.cpp's form: a block's
//          32 values as signed bytes, those of even k then those of odd k),
//          two `i32x4.relaxed_dot_i8x16_i7x16_add_s` against the nibbles
//          as bytes, summed in i32 (the same instruction count for any
//          block scale, so the timing holds for a scale of max|x|/127)
//   tscale the scales of four blocks at once: the four blocks' sums
//          transposed into one vector (u must be 4)
//   nos    no block scale: the integer sums added up (a bound: wrong result)
//   nodot  no unpacking or dot products either: the weights' words added
//          to the sums (the loop's memory traffic alone; wrong result)
// Scratch S holds the quantised activations as the kernel's `quantize_a`
// writes them (16 words a block), then AS and ASUM (an f32 a block each).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readBandwidth } from './probe.mjs';
import { takeOption } from './cli.mjs';

const argv = process.argv.slice(2);
const opt = (k, d) => Number(takeOption(argv, k, d));
const K = opt('k', 576), N = opt('n', 3072), layers = opt('layers', 90), reps = opt('reps', 5), rounds = opt('rounds', 6);
const variants = argv.length ? argv.map((a) => JSON.parse(a)) : [{}, { ls: true }, { split: true, ls: true }, { a8: true }, { a8: true, ls: true }, { nos: true }, { nodot: true, nos: true }];
const kb = K / 32, rowB = K / 2, dB = kb * 4, AS = 2 * K, ASUM = 2 * K + kb * 4;

/** The kernel `kernel(A, W, D, Mn, C, S)` of a variant, as WAT. */
function wat({ cols = 1, u = 1, ls = false, split = false, a8 = false, tscale = false, nos = false, nodot = false }) {
  if (kb % u) throw new Error(`u = ${u} must divide the ${kb} blocks`);
  if (tscale && u !== 4) throw new Error('tscale needs u = 4');
  const local = (name, n, ty) => Array.from({ length: n }, (_, i) => `(local $${name}${i} ${ty})`).join(' ');
  let s = `(module (import "env" "memory" (memory 1 65536))
 (func (export "kernel") (param $A i32) (param $W i32) (param $D i32) (param $Mn i32) (param $C i32) (param $S i32)
  (local $col i32) (local $w i32) (local $d i32) (local $mn i32) (local $bw i32) (local $bd i32) (local $bs i32) (local $ba i32) (local $be i32)
  (local $wv v128) (local $i v128) (local $mask v128) (local $m1 v128) (local $m2 v128)
  ${local('acc', cols, 'v128')} ${local('p', 2, 'v128')} ${local('t', 4, 'v128')}
  (local.set $mask (i32x4.splat (i32.const ${split ? 0x00010001 : 0x000f000f})))
  (local.set $m1 (i32x4.splat (i32.const 0x0f0f0f0f)))
  (local.set $m2 (i16x8.splat (i32.const 256)))
  (local.set $w (local.get $W)) (local.set $d (local.get $D)) (local.set $mn (local.get $Mn))
  (loop $cols
`;
  for (let c = 0; c < cols; c++) s += `   (local.set $acc${c} (v128.const i32x4 0 0 0 0))\n`;
  s += `   (local.set $bw (local.get $w)) (local.set $bd (local.get $d)) (local.set $bs (local.get $S)) (local.set $ba (local.get $S))
   (local.set $be (i32.add (local.get $S) (i32.const ${kb * 64})))
   (loop $blocks\n`;
  for (let j = 0; j < u; j++) {
    const aq = (i) => `(v128.load offset=${j * 64 + i * 16} (local.get $bs))`;
    for (let c = 0; c < cols; c++) {
      s += `   (local.set $wv (v128.load offset=${c * rowB + j * 16} align=4 (local.get $bw)))\n`;
      if (nodot) {
        s += `   (local.set $i (i32x4.add (local.get $wv) ${aq(0)}))\n`;
      } else if (a8) {
        s += `   (local.set $p0 (v128.and (local.get $wv) (local.get $m1)))
   (local.set $p1 (v128.and (i16x8.shr_u (local.get $wv) (i32.const 4)) (local.get $m1)))
   (local.set $i (i32x4.relaxed_dot_i8x16_i7x16_add_s ${aq(1)} (local.get $p1)
      (i32x4.relaxed_dot_i8x16_i7x16_add_s ${aq(0)} (local.get $p0) (v128.const i32x4 0 0 0 0))))\n`;
      } else if (split) {
        s += `   (local.set $p0 (v128.and (local.get $wv) (local.get $m1)))
   (local.set $p1 (v128.and (i16x8.shr_u (local.get $wv) (i32.const 4)) (local.get $m1)))
   (local.set $i (i32x4.add
      (i32x4.dot_i16x8_s (i16x8.add (i16x8.relaxed_dot_i8x16_i7x16_s ${aq(2)} (local.get $p0)) (i16x8.relaxed_dot_i8x16_i7x16_s ${aq(3)} (local.get $p1))) (local.get $m2))
      (i32x4.dot_i16x8_s (i16x8.add (i16x8.relaxed_dot_i8x16_i7x16_s ${aq(0)} (local.get $p0)) (i16x8.relaxed_dot_i8x16_i7x16_s ${aq(1)} (local.get $p1))) (local.get $mask))))\n`;
      } else {
        const part = (sh) => (sh ? `(v128.and (i32x4.shr_u (local.get $wv) (i32.const ${sh})) (local.get $mask))` : '(v128.and (local.get $wv) (local.get $mask))');
        s += `   (local.set $i (i32x4.add (i32x4.add (i32x4.dot_i16x8_s ${part(0)} ${aq(0)}) (i32x4.dot_i16x8_s ${part(4)} ${aq(1)}))
                            (i32x4.add (i32x4.dot_i16x8_s ${part(8)} ${aq(2)}) (i32x4.dot_i16x8_s ${part(12)} ${aq(3)}))))\n`;
      }
      const acc = `$acc${c}`;
      if (nos) {
        s += `   (local.set ${acc} (i32x4.add (local.get $i) (local.get ${acc})))\n`;
      } else if (tscale) {
        s += `   (local.set $t${j} (local.get $i))\n`;
        if (j === 3) {
          const lo = (a, b) => `(i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $t${a}) (local.get $t${b}))`;
          const hi = (a, b) => `(i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $t${a}) (local.get $t${b}))`;
          s += `   (local.set $t0 (i32x4.add ${lo(0, 1)} ${hi(0, 1)}))
   (local.set $t2 (i32x4.add ${lo(2, 3)} ${hi(2, 3)}))
   (local.set ${acc} (f32x4.relaxed_madd
      (f32x4.convert_i32x4_s (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t2))
                                        (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t2))))
      (f32x4.mul (v128.load offset=${c * dB} align=4 (local.get $bd)) (v128.load offset=${AS} align=4 (local.get $ba)))
      (local.get ${acc})))\n`;
        }
      } else {
        const scale = ls
          ? `(f32x4.mul (v128.load32_splat offset=${c * dB + j * 4} (local.get $bd)) (v128.load32_splat offset=${AS + j * 4} (local.get $ba)))`
          : `(f32x4.splat (f32.mul (f32.load offset=${c * dB + j * 4} (local.get $bd)) (f32.load offset=${AS + j * 4} (local.get $ba))))`;
        s += `   (local.set ${acc} (f32x4.relaxed_madd (f32x4.convert_i32x4_s (local.get $i)) ${scale} (local.get ${acc})))\n`;
      }
    }
  }
  s += `   (local.set $bw (i32.add (local.get $bw) (i32.const ${16 * u})))
   (local.set $bd (i32.add (local.get $bd) (i32.const ${4 * u})))
   (local.set $ba (i32.add (local.get $ba) (i32.const ${4 * u})))
   (br_if $blocks (i32.lt_u (local.tee $bs (i32.add (local.get $bs) (i32.const ${64 * u}))) (local.get $be))))\n`;
  for (let c = 0; c < cols; c++) {
    const acc = `$acc${c}`;
    // The minimums' term, four blocks a vector, the rest as scalars.
    for (let q = 0; q + 4 <= kb; q += 4) {
      s += `   (local.set ${acc} (f32x4.relaxed_madd (v128.load offset=${c * dB + q * 4} align=4 (local.get $mn)) (v128.load offset=${ASUM + q * 4} align=4 (local.get $S)) (local.get ${acc})))\n`;
    }
    let rest = '(f32.const 0)';
    for (let q = kb - (kb % 4); q < kb; q++) rest = `(f32.add ${rest} (f32.mul (f32.load offset=${c * dB + q * 4} (local.get $mn)) (f32.load offset=${ASUM + q * 4} (local.get $S))))`;
    const lane = (l) => `(f32x4.extract_lane ${l} (local.get ${acc}))`;
    s += `   (f32.store offset=${c * 4} (i32.add (local.get $C) (i32.shl (local.get $col) (i32.const 2)))
      (f32.add (f32.add (f32.add ${lane(0)} ${lane(1)}) (f32.add ${lane(2)} ${lane(3)})) ${rest}))\n`;
  }
  s += `   (local.set $w (i32.add (local.get $w) (i32.const ${cols * rowB})))
   (local.set $d (i32.add (local.get $d) (i32.const ${cols * dB})))
   (local.set $mn (i32.add (local.get $mn) (i32.const ${cols * dB})))
   (br_if $cols (i32.lt_u (local.tee $col (i32.add (local.get $col) (i32.const ${cols}))) (i32.const ${N})))))\n)`;
  return s;
}

// Memory: S, C, then the layers' W, D, Mn; seeded values.
const align = (x) => Math.ceil(x / 64) * 64;
let at = 0;
const place = (bytes) => {
  const p = at;
  at = align(at + bytes);
  return p;
};
const S = place(2 * K + kb * 8), C = place(4 * N);
const lay = [];
for (let l = 0; l < layers; l++) lay.push({ W: place(N * rowB), D: place(N * dB), Mn: place(N * dB) });
const memory = new WebAssembly.Memory({ initial: Math.ceil(at / 65536) + 1, maximum: 65536 });
const u32 = new Uint32Array(memory.buffer), f32 = new Float32Array(memory.buffer), i16 = new Int16Array(memory.buffer), i8 = new Int8Array(memory.buffer);
let seed = 7;
const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
for (let i = 0; i < K; i++) i16[S / 2 + i] = Math.round((rnd() * 2 - 1) * 32639);
for (let b = 0; b < kb; b++) {
  f32[(S + AS) / 4 + b] = 1e-5 * (1 + rnd());
  f32[(S + ASUM) / 4 + b] = rnd() - 0.5;
}
for (const L of lay) {
  for (let i = 0; i < (N * rowB) / 4; i++) u32[L.W / 4 + i] = (rnd() * 2 ** 32) >>> 0;
  for (let i = 0; i < N * kb; i++) {
    f32[L.D / 4 + i] = 0.01 * (0.5 + rnd());
    f32[L.Mn / 4 + i] = -0.08 * (0.5 + rnd());
  }
}

// f64 references of layer 0 in both activation layouts: the 16-bit one
// (lane j of the s-th i16x8 is nibble s of the block's 16-bit half j) and
// the split one (byte j's low and high nibbles against 256·hi + lo).
const L0 = lay[0];
const reference = (mode) => {
  const split = mode === 'split', a8 = mode === 'a8';
  const out = new Float64Array(N);
  for (let c = 0; c < N; c++) {
    let acc = 0;
    for (let b = 0; b < kb; b++) {
      let isum = 0;
      if (a8) {
        for (let j = 0; j < 16; j++) {
          const byte = (u32[(L0.W + c * rowB + b * 16) / 4 + (j >> 2)] >>> (8 * (j & 3))) & 255;
          const base = S + b * 64;
          isum += (byte & 15) * i8[base + j] + (byte >> 4) * i8[base + 16 + j];
        }
      } else if (split) {
        for (let j = 0; j < 16; j++) {
          const byte = (u32[(L0.W + c * rowB + b * 16) / 4 + (j >> 2)] >>> (8 * (j & 3))) & 255;
          const base = S + b * 64;
          isum += (byte & 15) * (i8[base + 32 + j] * 256 + i8[base + j]) + (byte >> 4) * (i8[base + 48 + j] * 256 + i8[base + 16 + j]);
        }
      } else {
        for (let wi = 0; wi < 4; wi++) {
          const wv = u32[(L0.W + c * rowB + b * 16) / 4 + wi];
          for (let h = 0; h < 2; h++) for (let s = 0; s < 4; s++) isum += ((wv >>> (16 * h + 4 * s)) & 15) * i16[S / 2 + b * 32 + s * 8 + 2 * wi + h];
        }
      }
      acc += isum * f32[L0.D / 4 + c * kb + b] * f32[(S + AS) / 4 + b] + f32[L0.Mn / 4 + c * kb + b] * f32[(S + ASUM) / 4 + b];
    }
    out[c] = acc;
  }
  return out;
};
const refs = { i16: reference('i16'), split: reference('split'), a8: reference('a8') };
const norm = Math.sqrt(refs.i16.reduce((a, v) => a + v * v, 0) / N);

const wabt = await createRequire(join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'client-runtime', 'web', 'package.json'))('wabt')();
const ks = [];
for (const v of variants) {
  const mod = wabt.parseWat('q41.wat', wat(v), { simd: true, relaxed_simd: true });
  const bytes = mod.toBinary({}).buffer;
  mod.destroy();
  const run = (await WebAssembly.instantiate(bytes, { env: { memory } })).instance.exports.kernel;
  f32.fill(NaN, C / 4, C / 4 + N);
  run(0, L0.W, L0.D, L0.Mn, C, S);
  const ref = refs[v.a8 ? 'a8' : v.split ? 'split' : 'i16'];
  let worst = 0;
  for (let c = 0; c < N; c++) worst = Math.max(worst, Math.abs(f32[C / 4 + c] - ref[c]) / norm);
  ks.push({ v, run, worst: Number.isNaN(f32[C / 4]) ? NaN : worst, t: [] });
}
const pass = (k) => {
  const t = performance.now();
  for (let r = 0; r < reps; r++) for (const L of lay) k.run(0, L.W, L.D, L.Mn, C, S);
  return (performance.now() - t) / reps;
};
for (const k of ks) for (let i = 0; i < 3; i++) pass(k);
for (let r = 0; r < rounds; r++) {
  const order = ks.map((_, i) => i);
  if (r % 2) order.reverse();
  for (const i of order) ks[i].t.push(pass(ks[i]));
}
const probeGbps = (await readBandwidth()).gb_per_s;
const weights = layers * N * (rowB + 2 * dB);
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
console.log(JSON.stringify({ k: K, n: N, layers, weights_mb: +(weights / 1e6).toFixed(1), probe_gbps: +probeGbps.toFixed(2) }));
const base = median(ks[0].t);
for (const k of ks) {
  const ms = median(k.t);
  console.log(JSON.stringify({ variant: k.v, ms: +ms.toFixed(3), gbps: +(weights / ms / 1e6).toFixed(2), vs_first: +(base / ms).toFixed(3), err: Number.isNaN(k.worst) ? 'NaN' : k.worst }));
}
