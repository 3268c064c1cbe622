// The JavaScript heap's growth while a long GPU job's completion is awaited, the same WGSL in Node
// with Dawn's binding (the npm package `webgpu`, which the GPU machine's measurements run in) and in
// headless Chromium, both on SwiftShader: KB a millisecond, against a timer awaited meanwhile. Does
// the Node harness make garbage a page in Chrome does not (BENCHMARKS.md, issue 37's eighth step)?
// Not a test: it prints two JSON lines.
//
//   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --expose-gc \
//     research/web-bench/wait_probe.mjs [--origin http://127.0.0.1:PORT]
//
// --origin: any page of a secure origin for WebGPU (a local `webtune serve`'s /v1/models serves).
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'client-runtime', 'web');
const at = process.argv.indexOf('--origin');
const origin = at > 0 ? process.argv[at + 1] : 'http://127.0.0.1:8787';
if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
const body = async (gpu, gc, heap) => {
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
    const h0 = heap(), t0 = performance.now();
    job();
    if (form === 'timer') await new Promise((r) => setTimeout(r, 1500)); else await device.queue.onSubmittedWorkDone();
    const ms = performance.now() - t0, h1 = heap();
    out.push({ form, ms: Math.round(ms), kb_per_ms: +((h1 - h0) / 1e3 / ms).toFixed(4) });
  }
  device.destroy();
  return out;
};
// Node + Dawn's binding.
const { create, globals } = await import(pathToFileURL(`${root}/node_modules/webgpu/index.js`).href);
Object.assign(globalThis, globals);
const node = await body(create([]), globalThis.gc, () => process.memoryUsage().heapUsed);
console.log(JSON.stringify({ where: 'node+dawn', out: node }));
// Headless Chromium.
const { chromium } = await import(pathToFileURL(`${root}/node_modules/playwright-core/index.mjs`).href);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/lib/chromium/chromium', ignoreDefaultArgs: true, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--remote-debugging-pipe', `--user-data-dir=${(await import('node:fs')).mkdtempSync(join((await import('node:os')).tmpdir(), 'wait-probe-'))}`, '--enable-unsafe-webgpu', '--use-angle=swiftshader', '--use-webgpu-adapter=swiftshader', '--enable-precise-memory-info', '--js-flags=--expose-gc'] });
const page = await browser.newPage();
await page.goto(`${origin}/v1/models`);
const chrome = await page.evaluate(`(${body.toString()})(navigator.gpu, () => gc(), () => performance.memory.usedJSHeapSize)`);
console.log(JSON.stringify({ where: 'chromium', out: chrome }));
await browser.close();
process.exit(0);
