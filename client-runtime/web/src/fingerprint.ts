// The device fingerprint sent when a session opens. It uses the browser's
// own field names (GPUAdapterInfo, GPUSupportedLimits) so the server sees
// exactly what the browser reported, and it repeats the three strings the
// server's key derivation has always read (flat `vendor`, `architecture`,
// `device`) so that older and newer servers both accept it.

/** What `POST /v1/sessions` receives as `fingerprint`. */
export interface Fingerprint {
  /** Which kernels this session tunes: `wasm` (CPU) or `wgsl` (GPU). */
  target: 'wasm' | 'wgsl';
  vendor: string;
  architecture: string;
  device: string;
  adapter?: {
    vendor: string;
    architecture: string;
    device: string;
    description: string;
    subgroupMinSize?: number;
    subgroupMaxSize?: number;
    isFallbackAdapter?: boolean;
  };
  limits?: Record<string, number>;
  features?: string[];
  hardwareConcurrency: number;
  /** `x86` or `arm` (UA client hints' `architecture`), when known. */
  cpuArchitecture?: string;
  simd: boolean;
  relaxedSimd: boolean;
  threads: boolean;
  browser: { name: string; version: string };
  os: string;
  rho?: string;
}

// Smallest modules that use one feature each; WebAssembly.validate says
// whether this engine accepts them.
const SIMD = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11];
// f32x4.relaxed_madd of three splats.
const RELAXED_SIMD = [
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 28, 1, 26, 0, 67, 0, 0, 128, 63, 253, 19, 67, 0, 0,
  128, 63, 253, 19, 67, 0, 0, 128, 63, 253, 19, 253, 133, 2, 11,
];
// A shared memory and an atomic load.
const THREADS = [0, 97, 115, 109, 1, 0, 0, 0, 1, 4, 1, 96, 0, 0, 3, 2, 1, 0, 5, 4, 1, 3, 1, 1, 10, 11, 1, 9, 0, 65, 0, 254, 16, 2, 0, 26, 11];

function validates(bytes: number[]): boolean {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(new Uint8Array(bytes));
  } catch {
    return false;
  }
}

export interface WasmFeatures {
  simd: boolean;
  relaxedSimd: boolean;
  threads: boolean;
}

export function wasmFeatures(): WasmFeatures {
  const g = globalThis as { crossOriginIsolated?: boolean };
  return {
    simd: validates(SIMD),
    relaxedSimd: validates(RELAXED_SIMD),
    // Threads also need SharedArrayBuffer, which only a cross-origin-isolated page has.
    threads: validates(THREADS) && typeof SharedArrayBuffer !== 'undefined' && g.crossOriginIsolated === true,
  };
}

interface UaData {
  brands?: { brand: string; version: string }[];
  platform?: string;
}

/** Browser name and major version, and the OS, from UA client hints or the UA string. */
export function browserInfo(ua = navigator.userAgent, data = (navigator as { userAgentData?: UaData }).userAgentData) {
  let name = 'unknown', version = '0';
  const brand = data?.brands?.find((b) => !/not.?a.?brand/i.test(b.brand) && b.brand !== 'Chromium') ??
    data?.brands?.find((b) => b.brand === 'Chromium');
  if (brand) {
    name = brand.brand;
    version = brand.version;
  } else {
    const m =
      /(Edg|OPR|Firefox|Chrome|Chromium)\/(\d+)/.exec(ua) ?? (/Version\/(\d+).*Safari/.exec(ua) ? ['', 'Safari', /Version\/(\d+)/.exec(ua)![1]] : null);
    if (m) {
      name = m[1] === 'Edg' ? 'Edge' : m[1] === 'OPR' ? 'Opera' : m[1];
      version = m[2];
    }
  }
  let os = data?.platform || '';
  if (!os) {
    os = /Android/.test(ua) ? 'Android' : /iPhone|iPad/.test(ua) ? 'iOS' : /Windows/.test(ua) ? 'Windows'
      : /Mac OS X/.test(ua) ? 'macOS' : /CrOS/.test(ua) ? 'ChromeOS' : /Linux/.test(ua) ? 'Linux' : 'unknown';
  }
  const arch = /x86_64|Win64|x64|amd64|i686/i.test(ua) ? 'x86' : /aarch64|arm64|arm/i.test(ua) ? 'arm' : '';
  return { browser: { name, version }, os, arch };
}

/** The adapter's info and limits in the browser's own names. */
export function adapterFields(adapter: GPUAdapter): Pick<Fingerprint, 'adapter' | 'limits' | 'features'> {
  const info = adapter.info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number; isFallbackAdapter?: boolean };
  const limits: Record<string, number> = {};
  for (const k in adapter.limits) {
    const v = (adapter.limits as unknown as Record<string, unknown>)[k];
    if (typeof v === 'number') limits[k] = v;
  }
  return {
    adapter: {
      vendor: info.vendor,
      architecture: info.architecture,
      device: info.device,
      description: info.description,
      subgroupMinSize: info.subgroupMinSize,
      subgroupMaxSize: info.subgroupMaxSize,
      isFallbackAdapter: info.isFallbackAdapter,
    },
    limits,
    features: [...adapter.features].map(String).sort(),
  };
}

/**
 * The fingerprint of this browser for `target`. A WebGPU session describes
 * the GPU adapter; a Wasm session describes the CPU side only (the kernels run
 * on the CPU, whatever GPU is present), so its flat fields name the engine,
 * the platform and the core count.
 */
export async function fingerprint(target: 'wasm' | 'webgpu', adapter: GPUAdapter | null, rho?: string): Promise<Fingerprint> {
  const { browser, os, arch: uaArch } = browserInfo();
  let arch = uaArch;
  try {
    const data = (navigator as { userAgentData?: { getHighEntropyValues(h: string[]): Promise<{ architecture?: string }> } }).userAgentData;
    const hints = await data?.getHighEntropyValues(['architecture']);
    if (hints?.architecture) arch = hints.architecture;
  } catch {
    // Client hints are optional; the UA string's guess stands.
  }
  const wasm = wasmFeatures();
  const hardwareConcurrency = navigator.hardwareConcurrency || 1;
  const slug = (s: string) => s.trim().toLowerCase().replace(/[^a-z0-9._-]+/g, '-') || 'unknown';
  const fp: Fingerprint = {
    target: target === 'wasm' ? 'wasm' : 'wgsl',
    vendor: 'cpu',
    architecture: slug(`${arch || 'unknown'}-${os}`),
    device: slug(`${browser.name}-${hardwareConcurrency}t${wasm.relaxedSimd ? '-relaxed' : wasm.simd ? '-simd' : ''}`),
    hardwareConcurrency,
    ...(arch ? { cpuArchitecture: arch } : {}),
    ...wasm,
    browser,
    os,
  };
  if (target === 'webgpu' && adapter) {
    Object.assign(fp, adapterFields(adapter));
    const a = fp.adapter!;
    fp.vendor = a.vendor || 'unknown-gpu';
    fp.architecture = a.architecture || 'unknown';
    fp.device = a.device || a.description || 'unknown';
  }
  if (rho !== undefined) fp.rho = rho;
  return fp;
}
