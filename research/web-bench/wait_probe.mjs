// The JavaScript heap's growth while a long GPU job's completion is awaited, the same WGSL in Node
// with Dawn's binding (the npm package `webgpu`, which the GPU machine's measurements run in) and in
// headless Chromium, both on SwiftShader: KB a millisecond, against a timer awaited meanwhile. Does
// the Node harness make garbage a page in Chrome does not (BENCHMARKS.md, issue 37's eighth step)?
// Not a test: it prints two JSON lines.
//
//   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --expose-gc \
//     research/web-bench/wait_probe.mjs [--origin http://127.0.0.1:PORT]
//
// The page needs a secure origin for WebGPU: --origin names a running `webtune serve` (its
// /v1/models is the page); without it the probe starts one (WEBTUNE_BIN, default
// target/release/webtune) on a fresh database.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { launchChromium, ROOT, startServer, WEBGPU_FLAGS } from '../../client-runtime/web/test/harness.mjs';
const root = join(ROOT, 'client-runtime', 'web');
if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
const at = process.argv.indexOf('--origin');
const work = mkdtempSync(join(tmpdir(), 'wait-probe-'));
const server = at > 0 ? null : await startServer(join(work, 'db.sqlite'));
const origin = at > 0 ? process.argv[at + 1] : server.url;
const body = async (gpu, gc, heap, gcs = () => 0) => {
  const adapter = await gpu.requestAdapter();
  const device = await adapter.requestDevice();
  const module = device.createShaderModule({ code: `
    @group(0) @binding(0) var<storage, read_write> o: array<f32>;
    @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
      var x = f32(g.x);
      for (var i = 0u; i < 400000u; i++) { x = fma(x, 0.9999, 0.0001); }
      o[g.x] = x;
    }` });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const buf = device.createBuffer({ size: 4 * 64 * 64, usage: GPUBufferUsage.STORAGE });
  const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
  const job = () => {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline); pass.setBindGroup(0, group); pass.dispatchWorkgroups(64);
    pass.end();
    device.queue.submit([enc.finish()]);
  };
  job(); await device.queue.onSubmittedWorkDone();
  const out = [];
  for (const form of ['onSubmittedWorkDone', 'timer']) {
    gc();
    const h0 = heap(), g0 = gcs(), t0 = performance.now();
    job();
    if (form === 'timer') await new Promise((r) => setTimeout(r, 1500)); else await device.queue.onSubmittedWorkDone();
    const ms = performance.now() - t0, h1 = heap();
    // A collection inside the window frees some of what was made: then the figure is a lower bound.
    out.push({ form, ms: Math.round(ms), kb_per_ms: +((h1 - h0) / 1e3 / ms).toFixed(4), collections: gcs() - g0 });
  }
  device.destroy();
  return out;
};
// Node + Dawn's binding.
const { create, globals } = await import(pathToFileURL(`${root}/node_modules/webgpu/index.js`).href);
Object.assign(globalThis, globals);
// Node's collections, counted (Chromium's page cannot count its own).
let collections = 0;
new PerformanceObserver((list) => (collections += list.getEntries().length)).observe({ entryTypes: ['gc'] });
const node = await body(create([]), globalThis.gc, () => process.memoryUsage().heapUsed, () => collections);
console.log(JSON.stringify({ where: 'node+dawn', out: node }));
// Headless Chromium, as the end-to-end tests launch it, with its heap's precise size and gc().
const browser = await launchChromium(join(work, 'profile'), [...WEBGPU_FLAGS, '--enable-precise-memory-info', '--js-flags=--expose-gc']);
const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
await page.goto(`${origin}/v1/models`);
const chrome = await page.evaluate(`(${body.toString()})(navigator.gpu, () => gc(), () => performance.memory.usedJSHeapSize)`);
console.log(JSON.stringify({ where: 'chromium', out: chrome }));
await browser.close();
server?.proc.kill();
process.exit(0);
