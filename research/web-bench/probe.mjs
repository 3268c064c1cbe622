// The Wasm streaming-read probe of the language-model benchmarks
// (llm_peers.mjs, llm_kernels_ab.mjs in the page; readBandwidth() in Node
// for llm_wasm_profile.mjs, gguf_v8.mjs and q41_probe.mjs): sum(off, len) over [off, off + len)
// of a shared memory, eight v128 loads per iteration into four
// accumulators (i32x4.add: one cheap op per load), so that its rate is the
// core's read bandwidth as Wasm sees it. Assembled by wabt (the web
// runtime's development dependency).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROBE_WAT = `(module
  (import "env" "memory" (memory 1 65536 shared))
  (func (export "sum") (param $p i32) (param $n i32) (result f64)
    (local $end i32) (local $a v128) (local $b v128) (local $c v128) (local $d v128)
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (block $out (loop $top
      (br_if $out (i32.ge_u (local.get $p) (local.get $end)))
      (local.set $a (i32x4.add (local.get $a) (v128.load offset=0 (local.get $p))))
      (local.set $b (i32x4.add (local.get $b) (v128.load offset=16 (local.get $p))))
      (local.set $c (i32x4.add (local.get $c) (v128.load offset=32 (local.get $p))))
      (local.set $d (i32x4.add (local.get $d) (v128.load offset=48 (local.get $p))))
      (local.set $a (i32x4.add (local.get $a) (v128.load offset=64 (local.get $p))))
      (local.set $b (i32x4.add (local.get $b) (v128.load offset=80 (local.get $p))))
      (local.set $c (i32x4.add (local.get $c) (v128.load offset=96 (local.get $p))))
      (local.set $d (i32x4.add (local.get $d) (v128.load offset=112 (local.get $p))))
      (local.set $p (i32.add (local.get $p) (i32.const 128)))
      (br $top)))
    (local.set $a (i32x4.add (i32x4.add (local.get $a) (local.get $b)) (i32x4.add (local.get $c) (local.get $d))))
    (f64.convert_i32_u (i32.add (i32.add (i32x4.extract_lane 0 (local.get $a)) (i32x4.extract_lane 1 (local.get $a)))
                                (i32.add (i32x4.extract_lane 2 (local.get $a)) (i32x4.extract_lane 3 (local.get $a)))))))`;

/** The probe module's bytes; it imports `env.memory` (shared). */
export async function probeWasm() {
  const webRequire = createRequire(join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'client-runtime', 'web', 'package.json'));
  const wabt = await webRequire('wabt')();
  const mod = wabt.parseWat('probe.wat', PROBE_WAT, { simd: true, threads: true });
  try {
    return new Uint8Array(mod.toBinary({}).buffer);
  } finally {
    mod.destroy();
  }
}

/**
 * This thread's read bandwidth in Node: the probe's sum over `mib` MiB of a
 * shared memory filled with ones, the best of `reps` runs.
 */
export async function readBandwidth(mib = 128, reps = 7) {
  const memory = new WebAssembly.Memory({ initial: mib * 16 + 16, maximum: 65536, shared: true });
  new Uint8Array(memory.buffer).fill(1);
  const { instance } = await WebAssembly.instantiate(await probeWasm(), { env: { memory } });
  let best = Infinity;
  for (let r = 0; r < reps; r++) {
    const t = performance.now();
    instance.exports.sum(0, mib << 20);
    best = Math.min(best, performance.now() - t);
  }
  return { mib, best_ms: best, gb_per_s: (mib * 1048576) / (best / 1000) / 1e9 };
}
