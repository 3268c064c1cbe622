// GGUF decode products (`matmul_q4_1`, `matmul_q8_0`, M = 1) in V8, the
// weights streaming from memory as in SmolLM2's decode step: kernels built
// by `webtune compile` (one directory each, or a config compiled here by
// --bin), every one over the same --layers distinct copies of seeded
// weights, in ABBA rounds, so that ratios between kernels (or between two
// compilers' builds of one config) come from one run. Prints, per kernel,
// ms a pass over the layers and the weights' GB/s (median and best), beside
// the Wasm streaming-read probe of probe.mjs in the same process; and each
// kernel's largest difference from the first's outputs (norm-scaled), so
// that a faster kernel that computes something else shows. Not a test: the
// compiler's tests hold every kernel to the f64 reference.
//
//   node --experimental-wasm-relaxed-simd research/web-bench/gguf_v8.mjs \
//        --op matmul_q4_1 --shape 1,576,3072 [--layers 30] [--rounds 6] [--reps 5] DIR|BIN=CONFIG ...
//
// (Node 20's V8 gates relaxed SIMD, which the lite space's first Wasm
// candidates use on x86, behind that flag; Chromium has it on.)
//
// An argument `BIN=CONFIG` compiles CONFIG (JSON, or @FILE) with the
// webtune binary BIN into a temporary directory; a plain argument is a
// directory holding kernel.wasm and kernel.json.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readBandwidth } from './probe.mjs';
import { takeOption } from './cli.mjs';

const argv = process.argv.slice(2);
const opt = (k, d) => takeOption(argv, k, d);
const op = opt('op', 'matmul_q4_1');
const shape = opt('shape', '1,576,3072').split(',').map(Number);
const layers = Number(opt('layers', '30'));
const rounds = Number(opt('rounds', '6'));
const reps = Number(opt('reps', '5'));
if (argv.length === 0) {
  console.error('usage: gguf_v8.mjs --op OP --shape 1,K,N [--layers N] [--rounds N] [--reps N] DIR|BIN=CONFIG ...');
  process.exit(2);
}
const [m, k, n] = shape;
if (m !== 1) throw new Error('decode products only: M must be 1');
const q8 = op === 'matmul_q8_0';
const wordsPerRow = q8 ? k / 4 : k / 8;
const blocks = k / 32;

const tmp = mkdtempSync(join(tmpdir(), 'gguf-v8-'));
const kernels = argv.map((a, i) => {
  let dir = a;
  const eq = a.indexOf('=');
  if (eq > 0) {
    dir = join(tmp, `k${i}`);
    execFileSync(a.slice(0, eq), ['compile', '--op', op, '--shape', shape.join(','), '--target', 'wasm', '--config', a.slice(eq + 1), '--out', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const meta = JSON.parse(readFileSync(join(dir, 'kernel.json'), 'utf8'));
  if (meta.op !== op || meta.shape.join() !== shape.join()) throw new Error(`${dir}: ${meta.op} ${meta.shape} is not ${op} ${shape}`);
  if ((meta.config?.threads ?? 1) > 1) throw new Error(`${dir}: a threaded kernel (${meta.config.threads} parts); this script runs one thread (pick a candidate without "threads")`);
  return { label: a.length > 60 ? `${a.slice(0, 57)}...` : a, bytes: readFileSync(join(dir, 'kernel.wasm')), meta };
});

// Layout: A, C, scratch, then the layers' W, D (and Mn), 64-byte aligned.
const align = (x) => Math.ceil(x / 64) * 64;
const scratch = Math.max(...kernels.map((x) => x.meta.scratch_bytes ?? 0));
let at = 0;
const place = (bytes) => {
  const p = at;
  at = align(at + bytes);
  return p;
};
const A = place(4 * k), C = place(4 * n * kernels.length), S = place(scratch);
const lay = [];
for (let l = 0; l < layers; l++) lay.push({ W: place(4 * n * wordsPerRow), D: place(4 * n * blocks), Mn: q8 ? 0 : place(4 * n * blocks) });
const weightBytes = (4 * n * wordsPerRow + 4 * n * blocks * (q8 ? 1 : 2)) * layers;
const memory = new WebAssembly.Memory({ initial: Math.ceil(at / 65536) + 1, maximum: 65536 });
const u32 = new Uint32Array(memory.buffer), f32 = new Float32Array(memory.buffer);
let seed = 12345;
const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
for (let i = 0; i < k; i++) f32[A / 4 + i] = rnd() * 2 - 1;
for (const L of lay) {
  for (let i = 0; i < n * wordsPerRow; i++) u32[L.W / 4 + i] = (rnd() * 2 ** 32) >>> 0;
  for (let i = 0; i < n * blocks; i++) f32[L.D / 4 + i] = (rnd() + 0.5) * 0.01;
  if (!q8) for (let i = 0; i < n * blocks; i++) f32[L.Mn / 4 + i] = -(rnd() + 0.5) * 0.08;
}

for (const x of kernels) {
  const { instance } = await WebAssembly.instantiate(x.bytes, { env: { memory } });
  x.run = instance.exports[x.meta.entry ?? 'kernel'];
}
const call = (x, L, c) => (q8 ? x.run(A, L.W, L.D, c, S) : x.run(A, L.W, L.D, L.Mn, c, S));

// Outputs of layer 0, each kernel into its own C, poisoned first.
kernels.forEach((x, i) => {
  f32.fill(NaN, C / 4 + i * n, C / 4 + (i + 1) * n);
  call(x, lay[0], C + 4 * i * n);
});
const ref = f32.slice(C / 4, C / 4 + n);
const norm = Math.sqrt(ref.reduce((s, v) => s + v * v, 0) / n);
kernels.forEach((x, i) => {
  let worst = 0;
  for (let j = 0; j < n; j++) worst = Math.max(worst, Math.abs(f32[C / 4 + i * n + j] - ref[j]) / norm);
  x.diff = Number.isNaN(f32[C / 4 + i * n]) ? NaN : worst;
});

// Warm up, then ABBA rounds: each sample is `reps` passes over every layer.
const pass = (x) => {
  const t = performance.now();
  for (let r = 0; r < reps; r++) for (const L of lay) call(x, L, C);
  return (performance.now() - t) / reps;
};
for (const x of kernels) for (let w = 0; w < 3; w++) pass(x);
const samples = kernels.map(() => []);
for (let r = 0; r < rounds; r++) {
  const order = kernels.map((_, i) => i);
  if (r % 2) order.reverse();
  for (const i of order) samples[i].push(pass(kernels[i]));
}

const probeGbps = (await readBandwidth()).gb_per_s;
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
console.log(JSON.stringify({ op, shape, layers, weights_mb: +(weightBytes / 1e6).toFixed(1), probe_gbps: +probeGbps.toFixed(2) }));
const base = median(samples[0]);
kernels.forEach((x, i) => {
  const med = median(samples[i]), min = Math.min(...samples[i]);
  console.log(JSON.stringify({
    kernel: x.label, ms: +med.toFixed(3), best_ms: +min.toFixed(3), gbps: +(weightBytes / med / 1e6).toFixed(2),
    of_probe: +(weightBytes / med / 1e6 / probeGbps).toFixed(2), vs_first: +(base / med).toFixed(3), diff: x.diff,
  }));
});
rmSync(tmp, { recursive: true, force: true });
