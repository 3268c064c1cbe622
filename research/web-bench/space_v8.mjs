// The Wasm lite space in V8 (headless Chromium) against a seeded search ten
// times its size over the same op and shape: issue 4's space-quality and
// order figures, measured in the engine browsers run. Not a test.
//
//   node research/web-bench/space_v8.mjs [--device xeon-2core] [--shape matmul:384,768,768] [--wide 120] [--seed 1]
//
// 1. `webtune space` gives the lite candidates in order; `webtune compile`
//    builds them and `--wide` others drawn with a fixed seed from a grid
//    (register tiles 1–8 × 4–32, any integer rows, r0 1–4, cache blocks 16–256
//    × 16–512 × 32–768, all six loop orders, B packed or not; SIMD, relaxed
//    SIMD and the passes on).
// 2. research/web-bench/schedules.mjs times them all side by side (3 rounds).
// 3. The top three of each side are timed again alternately (5 rounds) and
//    each side's best median is kept.
// Prints each side's best, their ratio, and how many lite candidates taken in
// order reach 95% of the lite best (from pass 1).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..', '..');
const BIN = process.env.WEBTUNE_BIN ?? join(ROOT, 'target', 'release', 'webtune');
const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const device = arg('device', 'xeon-2core');
const [op, shape] = arg('shape', 'matmul:384,768,768').split(':');
const wideN = Number(arg('wide', 120));
let seed = BigInt(arg('seed', 1));
const dims = shape.split(',').map(Number);
const [m, k, n] = op === 'batch_matmul' ? dims.slice(1) : dims;

// SplitMix64: the same draws on every machine.
function next() {
  seed = (seed + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  let z = seed;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  return z ^ (z >> 31n);
}
const pick = (xs) => xs[Number(next() % BigInt(xs.length))];

const work = mkdtempSync(join(tmpdir(), 'webtune-spacev8-'));
const compile = (cfg, dir) => {
  try {
    execFileSync(BIN, ['compile', '--op', op, '--shape', shape, '--target', 'wasm', '--config', JSON.stringify(cfg), '--out', dir], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
};
const lite = execFileSync(BIN, ['space', '--op', op, '--shape', shape, '--target', 'wasm', '--device', device], { encoding: 'utf8' })
  .trim().split('\n').map((l) => JSON.parse(l));
const dirs = [];
lite.forEach((cfg, i) => {
  const d = join(work, `lite${String(i).padStart(2, '0')}`);
  if (!compile(cfg, d)) throw new Error(`lite candidate ${i} does not compile`);
  dirs.push({ dir: d, side: 'lite', index: i });
});
const ORDERS = ['mnk', 'mkn', 'nmk', 'nkm', 'kmn', 'knm'];
const seen = new Set(lite.map((c) => JSON.stringify(c)));
let tries = 0;
while (dirs.length < lite.length + wideN && tries++ < 50 * wideN) {
  const x0 = pick([1, 2, 3, 4, 5, 6, 7, 8]);
  const y0 = pick([4, 8, 12, 16, 20, 24, 32]);
  const r0 = pick([1, 2, 4]);
  const mult = (t, base) => Math.max(base, Math.floor(Math.min(t, op === 'batch_matmul' ? 1 << 20 : 1 << 20) / base) * base);
  const cfg = {
    x0, y0, r0,
    x1: mult(pick([16, 32, 64, 128, 256]), x0),
    y1: mult(pick([16, 32, 64, 128, 256, 512]), y0),
    r1: mult(pick([32, 64, 128, 256, 512, 768]), r0),
    order: pick(ORDERS), inner_n_first: false, unroll: ['x0', 'y0', 'r0'], vectorize: 4,
    cache_read: pick([false, true]), relaxed_simd: true, passes: { offset: true, load_splat: true, tee: true },
    double_buffer: false, split_k: 1, subgroup_reduce: false,
  };
  if (cfg.x1 > Math.max(m, x0) * 2 || cfg.y1 > Math.max(n, y0) * 2 || cfg.r1 > Math.max(k, r0) * 2) continue;
  const key = JSON.stringify(cfg);
  if (seen.has(key)) continue;
  seen.add(key);
  const d = join(work, `wide${String(dirs.length).padStart(3, '0')}`);
  if (compile(cfg, d)) dirs.push({ dir: d, side: 'wide' });
}
process.stderr.write(`${op} ${shape} on ${device}: ${lite.length} lite, ${dirs.length - lite.length} wide\n`);

const time = (list, rounds, ms) => execFileSync(process.execPath, [join(here, 'schedules.mjs'), ...list.map((x) => x.dir), '--rounds', String(rounds), '--ms', String(ms)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 })
  .trim().split('\n').map((l) => JSON.parse(l));
const first = time(dirs, 3, 100);
const by = new Map(first.map((r) => [r.kernel, r]));
for (const d of dirs) d.gflops = by.get(d.dir).gflops;
const top = (side) => dirs.filter((d) => d.side === side).sort((a, b) => b.gflops - a.gflops).slice(0, 3);
const finals = [...top('lite'), ...top('wide')];
const second = time(finals, 5, 200);
const best = (side) => Math.max(...second.filter((r) => finals.find((f) => f.dir === r.kernel).side === side).map((r) => r.gflops));
const liteBest = best('lite'), wideBest = best('wide');
const lf = dirs.filter((d) => d.side === 'lite').map((d) => d.gflops);
const liteMax = Math.max(...lf);
const reach = lf.findIndex((g) => g >= 0.95 * liteMax) + 1;
const cfgOf = (side) => {
  const f = finals.filter((x) => x.side === side).sort((a, b) => b.gflops - a.gflops)[0];
  return JSON.parse(execFileSync('cat', [join(f.dir, 'kernel.json')], { encoding: 'utf8' })).config;
};
console.log(JSON.stringify({
  op, shape, device, lite_size: lite.length, wide_size: dirs.length - lite.length,
  lite_gflops: lf, lite_best: liteBest, wide_best: wideBest, ratio: +(liteBest / wideBest).toFixed(3), candidates_to_95: reach,
  wide_median: [...dirs.filter((d) => d.side === 'wide').map((d) => d.gflops)].sort((a, b) => a - b)[Math.floor((dirs.length - lite.length) / 2)],
  lite_winner: cfgOf('lite'), wide_winner: cfgOf('wide'),
}));
rmSync(work, { recursive: true, force: true });
