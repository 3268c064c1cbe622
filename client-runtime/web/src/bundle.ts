// Static bundles (docs/static-bundles.md): what `webtune bundle export`
// writes, read from any static host. Best-kernel lookups are answered from
// the bundle's winners with the server's fallback rule (device key, then
// its architecture's, then its vendor's, then the portable default), and
// every file is checked against its SHA-256 before use: `bundle.json`
// against `SHA256SUMS`, each kernel against its own name.

import type { BestResponse, KernelMeta } from './types.js';

/** The bundle format this runtime reads. */
export const BUNDLE_FORMAT = 1;

/** Most parts a threaded Wasm kernel has (the compiler's `MAX_THREADS`). */
const MAX_THREADS = 16;

/** One winner of `bundle.json`: the database's row and its kernel's `kernel.json`. */
export interface BundleWinner {
  op: string;
  shape: string;
  target: 'wasm' | 'wgsl';
  level: 'device' | 'arch' | 'vendor';
  level_key: string;
  space_checksum: string;
  kernel_sha256: string;
  votes: number;
  total_votes: number;
  reports: number;
  best_median_us: number;
  updated_at: number;
  meta: KernelMeta;
}

/** The portable default kernel of one covered op, shape and target. */
export interface BundleDefault {
  op: string;
  shape: string;
  target: 'wasm' | 'wgsl';
  kernel_sha256: string;
  meta: KernelMeta;
}

/** `bundle.json`. */
export interface BundleManifest {
  format: number;
  created_at: number;
  device_key?: string;
  covers: { op: string; shape: string; target: 'wasm' | 'wgsl' }[];
  winners: BundleWinner[];
  defaults: BundleDefault[];
}

/** The three lookup keys of a device. */
export interface LookupKeys {
  device_key: string;
  arch_key: string;
  vendor_key: string;
}

/**
 * The keys a device key implies: its `/`-separated prefixes (the server's
 * `DeviceKeys::from_device_key`), or null when it is not a four-part key.
 */
export function keysOf(deviceKey: string): LookupKeys | null {
  const parts = deviceKey.split('/');
  if (parts.length !== 4 || parts.some((p) => p === '')) return null;
  return { device_key: deviceKey, arch_key: `${parts[0]}/${parts[1]}`, vendor_key: parts[0] };
}

/**
 * Threads a kernel may use on a device of this key (the tuner's
 * `Device::from_keys`): `{n}t.mt` in a CPU key's third part allows n (at
 * most MAX_THREADS); every other key 1.
 */
export function maxThreadsOf(deviceKey: string): number {
  const parts = deviceKey.split('/');
  if (!parts[0]?.startsWith('cpu-') || parts.length < 3) return 1;
  for (const seg of parts[2].split('-')) {
    const m = /^(\d+)t\.mt$/.exec(seg);
    if (m) return Math.max(1, Math.min(Number(m[1]), MAX_THREADS));
  }
  return 1;
}

const LEVELS = ['device', 'arch', 'vendor'] as const;

/** Lower-case hex SHA-256, or null where the page has no `crypto.subtle` (not a secure context). */
export async function sha256Hex(bytes: ArrayBuffer | string): Promise<string | null> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  const data = typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes;
  const h = new Uint8Array(await subtle.digest('SHA-256', data));
  return Array.from(h, (b) => b.toString(16).padStart(2, '0')).join('');
}

async function mustHash(bytes: ArrayBuffer | string, what: string): Promise<string> {
  const h = await sha256Hex(bytes);
  if (h === null) throw new Error(`${what}: cannot check its SHA-256 without crypto.subtle (serve the page over https or from localhost)`);
  return h;
}

/** A static bundle, opened and checked: lookups and kernel bytes. */
export class KernelBundle {
  private constructor(
    /** The bundle directory's URL, ending in `/`. */
    readonly url: string,
    readonly manifest: BundleManifest,
    private fetcher: typeof fetch,
  ) {}

  /**
   * Fetches `SHA256SUMS` and `bundle.json` from the directory at `url`
   * (relative to the page), checks the manifest against its sum and its
   * format. Any failure is one error naming the file.
   */
  static async open(url: string, fetcher: typeof fetch = (input, init) => fetch(input, init)): Promise<KernelBundle> {
    let base = url.endsWith('/') ? url : `${url}/`;
    const here = globalThis.location?.href;
    if (here) base = new URL(base, here).href;
    const get = async (name: string): Promise<Response> => {
      const res = await fetcher(`${base}${name}`);
      if (!res.ok) throw new Error(`bundle ${base}${name}: HTTP ${res.status}`);
      return res;
    };
    const sums = new Map<string, string>();
    for (const line of (await (await get('SHA256SUMS')).text()).split('\n')) {
      const m = /^([0-9a-f]{64}) {2}(\S+)$/.exec(line);
      if (m) sums.set(m[2], m[1]);
    }
    const want = sums.get('bundle.json');
    if (!want) throw new Error(`bundle ${base}SHA256SUMS does not list bundle.json: not a webtune bundle`);
    const text = await (await get('bundle.json')).text();
    const got = await mustHash(text, `bundle ${base}bundle.json`);
    if (got !== want) throw new Error(`bundle ${base}bundle.json: SHA-256 is ${got}, SHA256SUMS says ${want}: truncated or altered, refused`);
    let manifest: BundleManifest;
    try {
      manifest = JSON.parse(text) as BundleManifest;
    } catch (e) {
      throw new Error(`bundle ${base}bundle.json: not JSON: ${(e as Error).message}`);
    }
    if (manifest.format !== BUNDLE_FORMAT) {
      throw new Error(`bundle ${base}bundle.json: bundle format ${manifest.format} is not one this runtime reads (format ${BUNDLE_FORMAT})`);
    }
    if (!Array.isArray(manifest.winners) || !Array.isArray(manifest.defaults)) throw new Error(`bundle ${base}bundle.json: no winners or defaults list`);
    return new KernelBundle(base, manifest, fetcher);
  }

  /** Whether the bundle answers for this op, shape and target. */
  covers(op: string, shape: number[], target: 'wasm' | 'wgsl'): boolean {
    const s = shape.join(',');
    return this.manifest.covers.some((c) => c.op === op && c.shape === s && c.target === target);
  }

  /**
   * The server's answer to `GET /v1/kernels/best`, from the bundle: the
   * most specific winner on the chain of `keys` (device, arch, vendor) that
   * a device allowed `maxThreads` threads can run, else the portable
   * default; null when the bundle does not cover the op, shape and target.
   * `url` is the kernel file's absolute URL.
   */
  best(keys: LookupKeys | null, op: string, shape: number[], target: 'wasm' | 'wgsl', maxThreads = 1): BestResponse | null {
    const s = shape.join(',');
    const same = (x: { op: string; shape: string; target: string }) => x.op === op && x.shape === s && x.target === target;
    if (keys) {
      for (const level of LEVELS) {
        const key = level === 'device' ? keys.device_key : level === 'arch' ? keys.arch_key : keys.vendor_key;
        const w = this.manifest.winners.find((w) => same(w) && w.level === level && w.level_key === key
          && w.meta?.sha256 === w.kernel_sha256 && (w.meta.threads ?? 1) <= maxThreads);
        if (w) {
          return {
            level, level_key: w.level_key, meta: w.meta, url: this.kernelUrl(w.kernel_sha256, target),
            votes: w.votes, reports: w.reports, space_checksum: w.space_checksum,
          };
        }
      }
    }
    const d = this.manifest.defaults.find((d) => same(d) && d.meta?.sha256 === d.kernel_sha256);
    if (!d) return null;
    return { level: 'default', meta: d.meta, url: this.kernelUrl(d.kernel_sha256, target), votes: 0, reports: 0 };
  }

  /** A kernel file's URL: `kernels/{sha256}.{target}` in the bundle. */
  kernelUrl(sha256: string, target: 'wasm' | 'wgsl'): string {
    return `${this.url}kernels/${sha256}.${target}`;
  }

  /**
   * A kernel's bytes (Wasm) or text (WGSL) from the bundle, refused unless
   * they hash to `sha256`.
   */
  async kernel(sha256: string, target: 'wasm' | 'wgsl'): Promise<ArrayBuffer | string> {
    const url = this.kernelUrl(sha256, target);
    const res = await this.fetcher(url);
    if (!res.ok) throw new Error(`bundle kernel ${url}: HTTP ${res.status}`);
    const bytes = target === 'wasm' ? await res.arrayBuffer() : await res.text();
    const got = await mustHash(bytes, `bundle kernel ${url}`);
    if (got !== sha256) throw new Error(`bundle kernel ${url}: SHA-256 is ${got}: truncated or altered, refused`);
    return bytes;
  }
}
