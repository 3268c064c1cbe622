// NNJIT's primitive vector ρ, measured on this device: the server's
// `GET /v1/rho` names pairs of small kernels that differ in one primitive
// (relaxed-SIMD FMA, load32_splat, a copied B tile, an 8×8 register tile);
// each pair is timed alternately here, and a bit is 1 when the variant beats
// the base by more than the server's margin. The bits become the
// fingerprint's `rho`, so devices with one name but different behaviour get
// different keys, while devices whose ratios agree within the margin share
// one. The result is cached per server, pair version and browser, so the
// measurement (≤ 200 ms) runs once.

import { type OpName, argSpecs, checkShape } from './ops.js';
import { seededInputs } from './rng.js';
import { median } from './stats.js';
import { timerResolutionMs } from './timer.js';
import type { KernelMeta } from './types.js';

/** `GET /v1/rho`'s answer. */
export interface RhoResponse {
  version: string;
  margin: number;
  pairs: {
    name: string;
    meaning: string;
    op: string;
    shape: number[];
    base: { url: string; meta: KernelMeta };
    variant: { url: string; meta: KernelMeta };
    needs_relaxed_simd: boolean;
  }[];
}

export interface RhoResult {
  /** One `0`/`1` per pair, in the server's order ('' when it has none). */
  rho: string;
  /** variant / base median time per pair (NaN where not measured). */
  ratios: Record<string, number>;
  /** Wall time of the timing itself, warm-up included, ms (0 when cached). */
  ms: number;
  /** Fetching and compiling the pairs' kernels before it, ms. */
  setupMs: number;
  cached: boolean;
  version: string;
}

/** The whole measurement's budget; the last rounds are dropped to keep it. */
export const RHO_BUDGET_MS = 200;

/** The bit of one pair: the same rule as `webtune_tuner::rho_bit`. */
export function rhoBit(ratio: number, margin: number): '0' | '1' {
  return Number.isFinite(ratio) && ratio < 1 - margin ? '1' : '0';
}

type Fn = (...offsets: number[]) => void;

async function fetchModule(server: string, url: string): Promise<WebAssembly.Module> {
  const res = await fetch(url.startsWith('http') ? url : `${server}${url}`);
  if (!res.ok) throw new Error(`rho kernel ${url}: HTTP ${res.status}`);
  return WebAssembly.compile(await res.arrayBuffer());
}

/**
 * Every distinct kernel of the pairs (they share one op, shape and base) on
 * one memory with seeded inputs, ready to call, by URL.
 */
async function instantiateAll(server: string, op: OpName, shape: number[], kernels: { url: string; meta: KernelMeta }[]): Promise<Map<string, () => void>> {
  const specs = argSpecs(op, shape);
  const offsets: number[] = [];
  let end = 0;
  for (const s of specs) {
    offsets.push(end);
    end = Math.ceil((end + s.elems * 4) / 64) * 64;
  }
  const scratch = end;
  const need = scratch + Math.max(...kernels.map((k) => k.meta.scratch_bytes ?? 0));
  const pages = Math.max(1, ...kernels.map((k) => k.meta.memory_pages_min ?? 0), Math.ceil(need / 65536));
  const memory = new WebAssembly.Memory({ initial: pages });
  seededInputs(specs.slice(0, -1), 0x5eedn).forEach((a, i) => new Uint32Array(memory.buffer, offsets[i], a.length).set(a));
  const fns = new Map<string, () => void>();
  for (const k of kernels) {
    if (fns.has(k.url)) continue;
    const inst = await WebAssembly.instantiate(await fetchModule(server, k.url), { env: { memory } });
    const fn = inst.exports[k.meta.entry || 'kernel'] as Fn;
    if (typeof fn !== 'function') throw new Error(`rho kernel ${k.url} exports no \`${k.meta.entry}\``);
    const args = k.meta.scratch_bytes ? [...offsets, scratch] : offsets;
    fns.set(k.url, () => fn(...args));
  }
  return fns;
}

/**
 * ms per call of `f`, from as many calls as fit in `windowMs`. Counting calls
 * in a window, rather than timing a fixed count, keeps a coarse or jittered
 * clock (100 µs on a page that is not cross-origin isolated) to a few percent.
 */
function msPerCall(f: () => void, windowMs: number): number {
  const t0 = performance.now();
  let n = 0;
  let t = t0;
  do {
    f();
    n++;
    t = performance.now();
  } while (t - t0 < windowMs);
  return (t - t0) / n;
}

function cacheKey(server: string, version: string): string {
  return `webtune-rho|${server}|${version}|${globalThis.navigator?.userAgent ?? ''}`;
}

/**
 * Measures ρ for Wasm on this device (or reads it from this browser's
 * cache). `relaxedSimd`: whether this engine has relaxed SIMD; pairs that
 * need it get 0 without running.
 */
export async function measureRho(server: string, relaxedSimd: boolean, opts: { useCache?: boolean } = {}): Promise<RhoResult> {
  const res = await fetch(`${server}/v1/rho?target=wasm`);
  if (!res.ok) throw new Error(`GET /v1/rho: HTTP ${res.status}: ${await res.text()}`);
  const spec = (await res.json()) as RhoResponse;
  const storage = opts.useCache === false ? null : (globalThis.localStorage ?? null);
  const key = cacheKey(server, spec.version);
  const hit = storage?.getItem(key);
  if (hit) {
    const saved = JSON.parse(hit) as { rho: string; ratios: Record<string, number> };
    if (/^[01]*$/.test(saved.rho) && saved.rho.length === spec.pairs.length) return { ...saved, ms: 0, setupMs: 0, cached: true, version: spec.version };
  }
  const setup0 = performance.now();
  const run = spec.pairs.filter((p) => !(p.needs_relaxed_simd && !relaxedSimd));
  const fns = new Map<string, () => void>();
  const byShape = new Map<string, typeof run>();
  for (const p of run) {
    checkShape(p.op, p.shape);
    const k = `${p.op}/${p.shape}`;
    byShape.set(k, [...(byShape.get(k) ?? []), p]);
  }
  for (const ps of byShape.values()) {
    const got = await instantiateAll(server, ps[0].op as OpName, ps[0].shape, ps.flatMap((p) => [p.base, p.variant]));
    for (const [url, f] of got) fns.set(url, f);
  }
  const t0 = performance.now();
  const setupMs = t0 - setup0;
  // Warm-up until each kernel stops getting faster: V8 first runs a module
  // from its baseline compiler and swaps in optimised code, compiled in the
  // background, once a function is hot; timing before that compares tiers,
  // not primitives.
  const windowMs = Math.max(20 * timerResolutionMs(), 1);
  for (const f of fns.values()) {
    let last = msPerCall(f, windowMs);
    for (let i = 0; i < 30; i++) {
      const now = msPerCall(f, windowMs);
      const settled = now > 0.95 * last;
      last = Math.min(last, now);
      if (settled && i >= 2) break;
    }
  }
  // Rounds over every distinct kernel (each base is shared by its pairs), in
  // an order that alternates between rounds, until 9 rounds or the budget is
  // spent (at least 3). A pair's ratio is the median over rounds of variant /
  // base within a round, so drift between rounds cancels.
  const samples = new Map<string, number[]>([...fns.keys()].map((u) => [u, []]));
  const order = [...fns.keys()];
  for (let round = 0; round < 9; round++) {
    if (round >= 3 && performance.now() - t0 > RHO_BUDGET_MS) break;
    for (const url of round % 2 ? [...order].reverse() : order) samples.get(url)!.push(msPerCall(fns.get(url)!, windowMs));
  }
  const ratios: Record<string, number> = {};
  let rho = '';
  for (const p of spec.pairs) {
    const v = samples.get(p.variant.url);
    const b = samples.get(p.base.url);
    const ratio = v && b ? median(v.map((x, r) => x / b[r])) : NaN;
    ratios[p.name] = ratio;
    rho += rhoBit(ratio, spec.margin);
  }
  const ms = performance.now() - t0;
  try {
    storage?.setItem(key, JSON.stringify({ rho, ratios }));
  } catch {
    // A full or disabled storage only means measuring again next time.
  }
  return { rho, ratios, ms, setupMs, cached: false, version: spec.version };
}
