// matmul_q4 WGSL kernels that native wgpu (naga) accepts but Tint, the
// browser's compiler, might not, in headless Chromium's WebGPU (SwiftShader,
// subgroups of 4 invocations): kernels that reduce with subgroup operations
// (`enable subgroups;`, which naga itself does not implement), whose
// butterfly must compute what its workgroup-memory twin computes, and tiled
// kernels of several passes (`dequant_pass`: an `unpack` entry point first,
// a scratch buffer at group 1). Each must match an f64 reference on seeded
// non-zero inputs over a NaN-poisoned output (and scratch). The kernels
// come from `webtune compile`, as a server would send them.
//
// Needs: the webtune binary (WEBTUNE_BIN, default target/release/webtune) and
// Debian's chromium (CHROMIUM). No browser is ever downloaded.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { BIN, CHROMIUM, WEBGPU_FLAGS, launchChromium } from './harness.mjs';

let work, http, origin, browser, page;

before(async () => {
  assert.ok(existsSync(BIN), `no webtune binary at ${BIN} (set WEBTUNE_BIN)`);
  assert.ok(CHROMIUM, 'no Chromium: apt-get install chromium (or set CHROMIUM)');
  work = mkdtempSync(join(tmpdir(), 'webtune-subgroups-'));
  // WebGPU needs a secure context: an empty page on loopback.
  http = createServer((_, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>subgroups</title>'));
  await new Promise((r) => http.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${http.address().port}/`;
  browser = await launchChromium(join(work, 'profile'), WEBGPU_FLAGS);
  page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
  await page.goto(origin);
});

after(async () => {
  await browser?.close();
  http?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

function compile(shape, config) {
  const out = join(work, `k${Math.random().toString(36).slice(2)}`);
  execFileSync(BIN, ['compile', '--op', 'matmul_q4', '--shape', shape.join(','), '--target', 'wgsl', '--config', JSON.stringify(config), '--out', out]);
  return { text: readFileSync(join(out, 'kernel.wgsl'), 'utf8'), meta: JSON.parse(readFileSync(join(out, 'kernel.json'), 'utf8')) };
}

/** Seeded inputs of matmul_q4 (M, K, N): A non-zero, W any words, S non-zero. */
function inputs([m, k, n], seed) {
  let s = seed >>> 0;
  const next = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0), s);
  const unit = () => (next() / 2 ** 32) * 2 - 1;
  const A = Float32Array.from({ length: m * k }, () => (unit() >= 0 ? 0.25 : -0.25) + unit() * 0.75);
  const W = Uint32Array.from({ length: (n * k) / 8 }, next);
  const S = Float32Array.from({ length: (n * k) / 32 }, () => 0.01 + Math.abs(unit()) * 0.05);
  return { A, W, S };
}

function reference([m, k, n], { A, W, S }) {
  const C = new Float64Array(m * n);
  for (let r = 0; r < m; r++) {
    for (let o = 0; o < n; o++) {
      let acc = 0;
      for (let i = 0; i < k; i++) {
        const q = (W[(o * k + i) >>> 3] >>> (4 * (i & 7))) & 15;
        acc += A[r * k + i] * (q - 8) * S[(o * k + i) >>> 5];
      }
      C[r * n + o] = acc;
    }
  }
  return C;
}

/** Runs a kernel in the page, every pass in order; the output (and the
 *  scratch buffer of a kernel with passes) is poisoned with NaN first. A
 *  kernel with passes gets an explicit layout, as the runtime makes it:
 *  group 0 the arguments (inputs read-only), group 1 the scratch. */
function run(kernel, args, outLen) {
  const passes = kernel.meta.passes ?? [{ entry: 'main', dispatch: kernel.meta.dispatch }];
  return page.evaluate(
    async ({ text, passes, scratchBytes, args, outLen }) => {
      const adapter = await navigator.gpu.requestAdapter();
      const device = await adapter.requestDevice({ requiredFeatures: adapter.features.has('subgroups') ? ['subgroups'] : [] });
      const module = device.createShaderModule({ code: text });
      const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error').map((m) => m.message);
      if (errors.length) return { errors };
      const storage = (binding, type) => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type } });
      const layouts = scratchBytes
        ? [
            device.createBindGroupLayout({ entries: [...args.map((_, i) => storage(i, 'read-only-storage')), storage(args.length, 'storage')] }),
            device.createBindGroupLayout({ entries: [storage(0, 'storage')] }),
          ]
        : null;
      const layout = layouts ? device.createPipelineLayout({ bindGroupLayouts: layouts }) : 'auto';
      const pipelines = await Promise.all(passes.map((p) => device.createComputePipelineAsync({ layout, compute: { module, entryPoint: p.entry } })));
      const make = (words, usage) => {
        const b = device.createBuffer({ size: words.length * 4, usage: usage | GPUBufferUsage.COPY_DST });
        device.queue.writeBuffer(b, 0, new Uint32Array(words));
        return b;
      };
      const nan = (n) => new Uint32Array(new Float32Array(n).fill(NaN).buffer);
      const bufs = [...args.map((a) => make(a, GPUBufferUsage.STORAGE)), make(nan(outLen), GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC)];
      const read = device.createBuffer({ size: outLen * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      const group = (l, buffers) => device.createBindGroup({ layout: l, entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })) });
      const bind = group(layouts ? layouts[0] : pipelines[0].getBindGroupLayout(0), bufs);
      const scratch = scratchBytes ? group(layouts[1], [make(nan(Math.ceil(scratchBytes / 4)), GPUBufferUsage.STORAGE)]) : null;
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setBindGroup(0, bind);
      if (scratch) pass.setBindGroup(1, scratch);
      passes.forEach((p, i) => {
        pass.setPipeline(pipelines[i]);
        pass.dispatchWorkgroups(...p.dispatch);
      });
      pass.end();
      enc.copyBufferToBuffer(bufs[bufs.length - 1], 0, read, 0, outLen * 4);
      device.queue.submit([enc.finish()]);
      await read.mapAsync(GPUMapMode.READ);
      const out = Array.from(new Float32Array(read.getMappedRange()));
      return { out, features: [...adapter.features], subgroupMinSize: adapter.info.subgroupMinSize };
    },
    { text: kernel.text, passes, scratchBytes: kernel.meta.scratch_bytes ?? 0, args: args.map((a) => Array.from(new Uint32Array(a.buffer))), outLen },
  );
}

/** The largest error of `out` against `want`, relative to want's largest magnitude (Infinity for a non-finite output). */
function maxError(out, want) {
  const scale = Math.max(...want.map(Math.abs));
  return Math.max(...out.map((x, i) => (Number.isFinite(x) ? Math.abs(x - want[i]) / scale : Infinity)));
}

test('subgroup butterflies compile in Tint and compute what the workgroup-memory tree computes', { timeout: 300_000 }, async () => {
  const base = {
    x0: 1, r0: 64, x1: 1, r1: 64, order: 'mnk', inner_n_first: false, unroll: ['x0', 'y0', 'r0'], vectorize: 1,
    cache_read: false, relaxed_simd: false, passes: { offset: true, load_splat: true, tee: true }, double_buffer: false,
  };
  let checked = 0;
  for (const [shape, y0, y1, split] of [[[1, 256, 24], 2, 4, 4], [[2, 96, 13], 1, 2, 2], [[1, 512, 8], 2, 2, 4]]) {
    const data = inputs(shape, 7 + checked);
    const want = reference(shape, data);
    const outLen = shape[0] * shape[2];
    const results = [];
    for (const subgroup_reduce of [true, false]) {
      const k = compile(shape, { ...base, y0, y1, split_k: split, subgroup_reduce });
      assert.equal(k.text.startsWith('enable subgroups;\n'), subgroup_reduce);
      assert.equal(k.meta.min_subgroup_size ?? null, subgroup_reduce ? split : null);
      const r = await run(k, [data.A, data.W, data.S], outLen);
      assert.deepEqual(r.errors ?? [], [], `Tint rejected the kernel: ${r.errors}`);
      if (subgroup_reduce) {
        assert.ok(r.features.includes('subgroups'), `the test adapter has no subgroups: ${r.features}`);
        assert.ok(r.subgroupMinSize >= split, `subgroups of ${r.subgroupMinSize} < split_k ${split}`);
      }
      const err = maxError(r.out, want);
      assert.ok(err < 1e-5, `${shape} subgroup_reduce=${subgroup_reduce}: max error ${err} of the largest output`);
      results.push(r.out);
      checked++;
    }
    // The two reductions add the same partial sums in different orders.
    const scale = Math.max(...want.map(Math.abs));
    assert.ok(results[0].every((x, i) => Math.abs(x - results[1][i]) <= 1e-5 * scale));
  }
  assert.equal(checked, 6);
});

test('tiled matmul_q4 in two and three passes (dequant_pass, with k_slices) compiles in Tint and matches the reference', { timeout: 300_000 }, async () => {
  const base = {
    x0: 2, y0: 4, r0: 4, x1: 8, y1: 16, r1: 16, order: 'mnk', inner_n_first: false, unroll: ['x0', 'y0', 'r0'], vectorize: 4,
    cache_read: true, relaxed_simd: false, passes: { offset: true, load_splat: true, tee: true }, double_buffer: true,
    split_k: 1, subgroup_reduce: false, dequant_pass: true,
  };
  // N = 260 takes the unpack pass past one workgroup's 64 column groups (its
  // guard); N = 13 unpacks one column per thread; k_slices adds `reduce`.
  const cases = [[[5, 96, 260], 1], [[3, 64, 13], 2], [[9, 160, 20], 3]];
  for (const [i, [shape, k_slices]] of cases.entries()) {
    const k = compile(shape, { ...base, k_slices });
    const entries = k.meta.passes.map((p) => p.entry);
    assert.deepEqual(entries, k_slices > 1 ? ['unpack', 'main', 'reduce'] : ['unpack', 'main']);
    assert.equal(k.meta.entry, 'unpack');
    const data = inputs(shape, 31 + i);
    const r = await run(k, [data.A, data.W, data.S], shape[0] * shape[2]);
    assert.deepEqual(r.errors ?? [], [], `Tint rejected the kernel: ${r.errors}`);
    const err = maxError(r.out, reference(shape, data));
    assert.ok(err < 1e-5, `${shape} k_slices=${k_slices}: max error ${err} of the largest output`);
  }
});
