// Times every kernel directory under argv[2] in this JavaScript engine (V8 in
// Node), as a web page would: layout from kernel.json (webtune Wasm ABI v1),
// non-zero seeded inputs, a warm-up long enough for V8's optimizing tier, then
// the median of repeated calls. One JSON line per kernel on stdout; progress
// on stderr.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const dir = process.argv[2];
const minMs = Number(process.argv[3] ?? 1000);
const names = readdirSync(dir).filter((n) => existsSync(join(dir, n, 'kernel.json'))).sort();

function layout(meta) {
  const offsets = [];
  let total = 0;
  for (const a of meta.args) {
    offsets.push(total);
    total += Math.ceil((4 * a.shape.reduce((x, y) => x * y, 1)) / 16) * 16;
  }
  const inputsEnd = total;
  if (meta.scratch_bytes > 0) {
    offsets.push(total);
    total += meta.scratch_bytes;
  }
  return { offsets, inputsEnd, total };
}

let i = 0;
for (const name of names) {
  const d = join(dir, name);
  const meta = JSON.parse(readFileSync(join(d, 'kernel.json'), 'utf8'));
  const { offsets, inputsEnd, total } = layout(meta);
  const memory = new WebAssembly.Memory({ initial: Math.max(Math.ceil(total / 65536), meta.memory_pages_min) });
  const f32 = new Float32Array(memory.buffer, 0, inputsEnd / 4);
  let seed = 12345;
  for (let j = 0; j < f32.length; j++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    const x = (seed / 4294967296) * 2 - 1;
    f32[j] = Math.abs(x) < 1 / 64 ? 0.5 : x;
  }
  const { instance } = await WebAssembly.instantiate(readFileSync(join(d, 'kernel.wasm')), { env: { memory } });
  const kernel = instance.exports[meta.entry];
  // Warm-up: at least 3 calls and 300 ms, so tier-up from Liftoff to TurboFan is done.
  let t0 = performance.now();
  for (let w = 0; w < 3 || performance.now() - t0 < 300; w++) kernel(...offsets);
  const times = [];
  t0 = performance.now();
  while (times.length < 5 || (performance.now() - t0 < minMs && times.length < 31)) {
    const t = performance.now();
    kernel(...offsets);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const q = (p) => times[Math.round((times.length - 1) * p)];
  console.log(JSON.stringify({ case: name, median_ms: q(0.5), p10_ms: q(0.1), p90_ms: q(0.9), runs: times.length }));
  i++;
  process.stderr.write(`\r${i}/${names.length} ${name}   `);
}
process.stderr.write('\n');
