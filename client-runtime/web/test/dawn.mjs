// Dawn (the npm package `webgpu`, Chromium's WebGPU) in Node for the
// runtime's WebGPU tests: a device on SwiftShader's Vulkan driver unless
// VK_ICD_FILENAMES names another, and plain WGSL products by each op's ABI.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';
if (!process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER)) process.env.VK_ICD_FILENAMES = SWIFTSHADER;
const { create, globals } = await import('webgpu');
Object.assign(globalThis, globals);

/**
 * The object `create` returns must stay referenced while its devices are in
 * use (Dawn's instance goes with it: a device whose instance was collected
 * crashes the process), and must be dropped for the process to exit.
 */
let instance = null;

/** A Dawn device on the first adapter (the instance kept until `releaseDawn`). */
export async function dawnDevice() {
  instance ??= create([]);
  const adapter = await instance.requestAdapter();
  assert.ok(adapter, 'Dawn found no adapter (is a Vulkan driver installed? VK_ICD_FILENAMES)');
  // Timestamps where the adapter has them (GpuDecoder.profile's test).
  const requiredFeatures = adapter.features.has('timestamp-query') ? ['timestamp-query'] : [];
  return { gpu: instance, adapter, device: await adapter.requestDevice({ requiredFeatures }) };
}

/**
 * Gives Node a `navigator.gpu` (Dawn's instance) and, on Node 20, which has
 * no navigator, the user agent and core count the runtime's fingerprint reads.
 */
export async function installNavigator() {
  instance ??= create([]);
  globalThis.navigator ??= { userAgent: `Node.js/${process.version.slice(1)} (Dawn; ${process.platform} ${process.arch === 'x64' ? 'x86_64' : process.arch})`, hardwareConcurrency: 2 };
  Object.defineProperty(globalThis.navigator, 'gpu', { value: instance, configurable: true });
}

/** Destroys `device` and drops Dawn's instance, so that the process can exit. */
export function releaseDawn(device) {
  device?.destroy();
  if (globalThis.navigator?.gpu === instance) delete globalThis.navigator.gpu;
  instance = null;
}

/**
 * Plain WGSL products by each op's ABI (one thread per output element, f32
 * sums): what the backend binds a tuned kernel as, for the small model;
 * with the block formats' epilogues (docs/ops.md: `+rms_norm` normalises
 * the row of A by G and E first, `+swiglu` keeps silu(gate)·up of rows n
 * and N + n, `+residual` adds R, `+merge` merges A from an attention's
 * parts), as the decode step's fused runs ask.
 */
export function plainKernels(device, calls = []) {
  const layouts = new Map();
  const layout = (n) => {
    if (!layouts.has(n)) {
      layouts.set(n, device.createBindGroupLayout({
        entries: Array.from({ length: n }, (_, i) => ({ binding: i, visibility: GPUShaderStage.COMPUTE, buffer: { type: i === n - 1 ? 'storage' : 'read-only-storage' } })),
      }));
    }
    return layouts.get(n);
  };
  // Per base op: the declarations after A, and the weight of row `row`, column k.
  const body = {
    matmul: ['b: array<f32>', 'b[k * N + row]'],
    matmul_q4: ['w: array<u32>; @group(0) @binding(2) var<storage, read> d: array<f32>', 'd[(row * K + k) / 32u] * (f32((w[(row * K + k) / 8u] >> (4u * (k % 8u))) & 15u) - 8.0)'],
    matmul_q4_1: ['w: array<u32>; @group(0) @binding(2) var<storage, read> d: array<f32>; @group(0) @binding(3) var<storage, read> mn: array<f32>',
      'd[(row * K + k) / 32u] * f32((w[(row * K + k) / 8u] >> (4u * (k % 8u))) & 15u) + mn[(row * K + k) / 32u]'],
    matmul_q8_0: ['w: array<u32>; @group(0) @binding(2) var<storage, read> d: array<f32>', 'd[(row * K + k) / 32u] * f32(extractBits(bitcast<i32>(w[(row * K + k) / 4u]), ((row * K + k) % 4u) * 8u, 8u))'],
  };
  const nargs = { matmul: 3, matmul_q4: 4, matmul_q4_1: 5, matmul_q8_0: 4 };
  return async (op, [M, K, N, H = 1, C = 1]) => {
    calls.push(`${op} ${M},${K},${N}`);
    const [base, ...suffixes] = op.split('+');
    const norm = suffixes.includes('rms_norm'), glu = suffixes.includes('swiglu'), residual = suffixes.includes('residual'), merge = suffixes.includes('merge');
    const [decl, value] = body[base];
    const first = nargs[base] - 1;
    const n = first + 2 * (norm || merge) + residual + 1;
    const extra = [
      ...(norm ? [`@group(0) @binding(${first}) var<storage, read> gam: array<f32>;`, `@group(0) @binding(${first + 1}) var<storage, read> eps: array<f32>;`] : []),
      ...(merge ? [`@group(0) @binding(${first}) var<storage, read> pm: array<f32>;`, `@group(0) @binding(${first + 1}) var<storage, read> pl: array<f32>;`] : []),
      ...(residual ? [`@group(0) @binding(${first + 2 * (norm || merge)}) var<storage, read> res: array<f32>;`] : []),
    ].join('\n');
    // +merge: A's value merged from the parts (docs/ops.md), else A's own.
    const av = merge
      ? `fn av(m: u32, k: u32) -> f32 {
  let D = K / H; let h = (m * H + k / D) * C; let dd = k % D;
  var top = -3.4e38; for (var c = 0u; c < C; c++) { top = max(top, pm[h + c]); }
  var num = 0.0; var den = 0.0;
  for (var c = 0u; c < C; c++) { let w = exp(pm[h + c] - top); num += w * a[(h + c) * D + dd]; den += w * pl[h + c]; }
  return num / den;
}`
      : 'fn av(m: u32, k: u32) -> f32 { return a[m * K + k]; }';
    const code = `@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> ${decl};
${extra}
@group(0) @binding(${n - 1}) var<storage, read_write> c: array<f32>;
const M = ${M}u; const K = ${K}u; const N = ${N}u; const H = ${H}u; const C = ${C}u;
fn wv(row: u32, k: u32) -> f32 { return ${value}; }
${av}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * 65535u * 64u;
  if (i >= M * N) { return; }
  let m = i / N; let n = i % N;
  var r = 1.0;
  ${norm ? 'var ss = 0.0; for (var k = 0u; k < K; k++) { ss += a[m * K + k] * a[m * K + k]; } r = 1.0 / sqrt(ss / f32(K) + eps[0]);' : ''}
  var s = 0.0;
  var u = 0.0;
  for (var k = 0u; k < K; k++) {
    let x = av(m, k) * r${norm ? ' * gam[k]' : ''};
    s += x * wv(n, k);
    ${glu ? 'u += x * wv(N + n, k);' : ''}
  }
  ${glu ? 's = s / (1.0 + exp(-s)) * u;' : ''}
  c[i] = s${residual ? ' + res[i]' : ''};
}`;
    const bgl = layout(n);
    const pipeline = await device.createComputePipelineAsync({ layout: device.createPipelineLayout({ bindGroupLayouts: [bgl] }), compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
    const groups = Math.ceil((M * N) / 64);
    return {
      bindGroupLayout: bgl,
      passes: 1,
      dispatch(pass, group) {
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
      },
    };
  };
}
