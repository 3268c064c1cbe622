// src/cache.ts
var DB_NAME = "webtune";
var STORE = "kernels";
function req(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}
var KernelCache = class _KernelCache {
  constructor(db) {
    this.db = db;
  }
  db;
  static async open(enabled) {
    if (!enabled || typeof indexedDB === "undefined") return new _KernelCache(null);
    try {
      const open = indexedDB.open(DB_NAME, 1);
      open.onupgradeneeded = () => open.result.createObjectStore(STORE, { keyPath: "key" });
      return new _KernelCache(await req(open));
    } catch {
      return new _KernelCache(null);
    }
  }
  get enabled() {
    return this.db !== null;
  }
  async get(key) {
    if (!this.db) return null;
    try {
      const r = await req(this.db.transaction(STORE, "readonly").objectStore(STORE).get(key));
      return r ?? null;
    } catch {
      return null;
    }
  }
  async put(entry) {
    if (!this.db) return;
    try {
      const tx = this.db.transaction(STORE, "readwrite");
      tx.objectStore(STORE).put(entry);
      await new Promise((resolve, reject) => {
        tx.oncomplete = () => resolve();
        tx.onerror = () => reject(tx.error);
        tx.onabort = () => reject(tx.error);
      });
    } catch {
    }
  }
  async clear() {
    if (!this.db) return;
    try {
      await req(this.db.transaction(STORE, "readwrite").objectStore(STORE).clear());
    } catch {
    }
  }
};

// src/fingerprint.ts
var SIMD = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11];
var RELAXED_SIMD = [
  0,
  97,
  115,
  109,
  1,
  0,
  0,
  0,
  1,
  5,
  1,
  96,
  0,
  1,
  123,
  3,
  2,
  1,
  0,
  10,
  28,
  1,
  26,
  0,
  67,
  0,
  0,
  128,
  63,
  253,
  19,
  67,
  0,
  0,
  128,
  63,
  253,
  19,
  67,
  0,
  0,
  128,
  63,
  253,
  19,
  253,
  133,
  2,
  11
];
var THREADS = [0, 97, 115, 109, 1, 0, 0, 0, 1, 4, 1, 96, 0, 0, 3, 2, 1, 0, 5, 4, 1, 3, 1, 1, 10, 11, 1, 9, 0, 65, 0, 254, 16, 2, 0, 26, 11];
function validates(bytes) {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(new Uint8Array(bytes));
  } catch {
    return false;
  }
}
function wasmFeatures() {
  const g = globalThis;
  return {
    simd: validates(SIMD),
    relaxedSimd: validates(RELAXED_SIMD),
    // Threads also need SharedArrayBuffer, which only a cross-origin-isolated page has.
    threads: validates(THREADS) && typeof SharedArrayBuffer !== "undefined" && g.crossOriginIsolated === true
  };
}
function browserInfo(ua = navigator.userAgent, data = navigator.userAgentData) {
  let name = "unknown", version = "0";
  const brand = data?.brands?.find((b) => !/not.?a.?brand/i.test(b.brand) && b.brand !== "Chromium") ?? data?.brands?.find((b) => b.brand === "Chromium");
  if (brand) {
    name = brand.brand;
    version = brand.version;
  } else {
    const m = /(Edg|OPR|Firefox|Chrome|Chromium)\/(\d+)/.exec(ua) ?? (/Version\/(\d+).*Safari/.exec(ua) ? ["", "Safari", /Version\/(\d+)/.exec(ua)[1]] : null);
    if (m) {
      name = m[1] === "Edg" ? "Edge" : m[1] === "OPR" ? "Opera" : m[1];
      version = m[2];
    }
  }
  let os = data?.platform || "";
  if (!os) {
    os = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Windows/.test(ua) ? "Windows" : /Mac OS X/.test(ua) ? "macOS" : /CrOS/.test(ua) ? "ChromeOS" : /Linux/.test(ua) ? "Linux" : "unknown";
  }
  const arch = /x86_64|Win64|x64|amd64|i686/i.test(ua) ? "x86" : /aarch64|arm64|arm/i.test(ua) ? "arm" : "";
  return { browser: { name, version }, os, arch };
}
function adapterFields(adapter) {
  const info = adapter.info;
  const limits = {};
  for (const k in adapter.limits) {
    const v = adapter.limits[k];
    if (typeof v === "number") limits[k] = v;
  }
  return {
    adapter: {
      vendor: info.vendor,
      architecture: info.architecture,
      device: info.device,
      description: info.description,
      subgroupMinSize: info.subgroupMinSize,
      subgroupMaxSize: info.subgroupMaxSize,
      isFallbackAdapter: info.isFallbackAdapter
    },
    limits,
    features: [...adapter.features].map(String).sort()
  };
}
async function fingerprint(target, adapter, rho) {
  const { browser, os, arch: uaArch } = browserInfo();
  let arch = uaArch;
  try {
    const data = navigator.userAgentData;
    const hints = await data?.getHighEntropyValues(["architecture"]);
    if (hints?.architecture) arch = hints.architecture;
  } catch {
  }
  const wasm = wasmFeatures();
  const hardwareConcurrency = navigator.hardwareConcurrency || 1;
  const slug = (s) => s.trim().toLowerCase().replace(/[^a-z0-9._-]+/g, "-") || "unknown";
  const fp = {
    target: target === "wasm" ? "wasm" : "wgsl",
    vendor: "cpu",
    architecture: slug(`${arch || "unknown"}-${os}`),
    device: slug(`${browser.name}-${hardwareConcurrency}t${wasm.relaxedSimd ? "-relaxed" : wasm.simd ? "-simd" : ""}`),
    hardwareConcurrency,
    ...arch ? { cpuArchitecture: arch } : {},
    ...wasm,
    browser,
    os
  };
  if (target === "webgpu" && adapter) {
    Object.assign(fp, adapterFields(adapter));
    const a = fp.adapter;
    fp.vendor = a.vendor || "unknown-gpu";
    fp.architecture = a.architecture || "unknown";
    fp.device = a.device || a.description || "unknown";
  }
  if (rho !== void 0) fp.rho = rho;
  return fp;
}

// src/http.ts
var MAX_ATTEMPTS = 5;
var MAX_WAIT_S = 30;
function retryable(status) {
  return status === 429 || status === 503;
}
function retryAfterSeconds(header, now = Date.now()) {
  if (header === null || header.trim() === "") return 1;
  const v = header.trim();
  let s;
  if (/^\d+$/.test(v)) s = Number(v);
  else {
    const at = Date.parse(v);
    s = Number.isFinite(at) ? (at - now) / 1e3 : 1;
  }
  return Math.min(MAX_WAIT_S, Math.max(0, s));
}
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", stop);
      resolve();
    }, ms);
    const stop = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}
async function fetchRetrying(input, init = {}, fetcher = fetch) {
  for (let attempt = 1; ; attempt++) {
    const res = await fetcher(input, init);
    if (!retryable(res.status) || attempt >= MAX_ATTEMPTS) return res;
    const wait = retryAfterSeconds(res.headers.get("retry-after"));
    await res.body?.cancel().catch(() => {
    });
    await sleep(wait * 1e3, init.signal);
  }
}

// src/ops.ts
function parseOp(op) {
  const [base, ...rest] = op.split("+");
  if (!(base in DIMS)) {
    throw new Error(`unknown op \`${op}\`: use matmul, batch_matmul or matmul_q4`);
  }
  const out = { base, bias: false, act: "none", residual: false };
  const rank = { bias: 1, gelu: 2, relu: 2, residual: 3 };
  let last = 0;
  for (const p of rest) {
    const r = rank[p];
    if (r === void 0 || r <= last) {
      throw new Error(
        `op \`${op}\`: an epilogue is \`+bias\`, then \`+gelu\` or \`+relu\`, then \`+residual\`, each at most once and in that order, e.g. matmul+bias+gelu`
      );
    }
    last = r;
    if (p === "bias") out.bias = true;
    else if (p === "residual") out.residual = true;
    else out.act = p;
  }
  if (rest.length > 0 && base === "matmul_q4") {
    throw new Error("matmul_q4 takes no epilogue: only matmul and batch_matmul do");
  }
  return out;
}
var DIMS = { matmul: 3, batch_matmul: 4, matmul_q4: 3 };
function checkShape(op, shape) {
  const want = DIMS[parseOp(op).base];
  if (shape.length !== want) {
    throw new Error(`${op} takes ${want} dimensions, got ${shape.length}`);
  }
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 1 || d > 4294967295) {
      throw new Error(`${op} shape ${shape.join(",")}: every dimension must be a positive integer`);
    }
  }
  if (op === "matmul_q4" && shape[1] % 32 !== 0) {
    throw new Error(`matmul_q4 needs K % 32 == 0, got K = ${shape[1]}`);
  }
}
function bmkn(op, shape) {
  return parseOp(op).base === "batch_matmul" ? [shape[0], shape[1], shape[2], shape[3]] : [1, shape[0], shape[1], shape[2]];
}
function spec(name, dtype, shape) {
  return { name, dtype, shape, elems: shape.reduce((a, b) => a * b, 1) };
}
function argSpecs(op, shape) {
  const [b, m, k, n] = bmkn(op, shape);
  const p = parseOp(op);
  const fused = (a, bb, c) => [
    a,
    bb,
    ...p.bias ? [spec("bias", "f32", [n])] : [],
    ...p.residual ? [spec("R", "f32", c.shape)] : [],
    c
  ];
  switch (p.base) {
    case "matmul":
      return fused(spec("A", "f32", [m, k]), spec("B", "f32", [k, n]), spec("C", "f32", [m, n]));
    case "batch_matmul":
      return fused(spec("A", "f32", [b, m, k]), spec("B", "f32", [b, k, n]), spec("C", "f32", [b, m, n]));
    case "matmul_q4":
      return [
        spec("A", "f32", [m, k]),
        spec("W", "u32", [n, k / 8]),
        spec("S", "f32", [n, k / 32]),
        spec("C", "f32", [m, n])
      ];
  }
}
function flops(op, shape) {
  const [b, m, k, n] = bmkn(op, shape);
  return 2 * b * m * k * n;
}

// src/rng.ts
var POISON = 2143346349;
function mul64(out, hi, lo, ch, cl) {
  const a0 = lo & 65535, a1 = lo >>> 16, b0 = cl & 65535, b1 = cl >>> 16;
  const c1 = a1 * b0, c2 = a0 * b1;
  const low = a0 * b0 + ((c1 & 65535) + (c2 & 65535)) * 65536;
  const l = low >>> 0;
  out[1] = l;
  out[0] = a1 * b1 + (c1 >>> 16) + (c2 >>> 16) + (low - l) / 4294967296 + Math.imul(hi, cl) + Math.imul(lo, ch);
}
var SplitMix64 = class {
  // [state hi, state lo, last draw hi, last draw lo]
  s = new Uint32Array(4);
  m = new Uint32Array(2);
  constructor(seed) {
    const x = BigInt.asUintN(64, seed) ^ 0x9e3779b97f4a7c15n;
    this.s[0] = Number(x >> 32n);
    this.s[1] = Number(x & 0xffffffffn);
  }
  /** High 32 bits of the last draw. */
  get outHi() {
    return this.s[2];
  }
  /** Low 32 bits of the last draw. */
  get outLo() {
    return this.s[3];
  }
  /** Draws the next 64 bits into `outHi`/`outLo`. */
  next() {
    const s = this.s, m = this.m;
    const lo = s[1] + 2135587861;
    s[0] = s[0] + 2654435769 + (lo > 4294967295 ? 1 : 0);
    s[1] = lo;
    let h = s[0], l = s[1];
    mul64(m, (h ^ h >>> 30) >>> 0, (l ^ (l >>> 30 | h << 2)) >>> 0, 3210233709, 484763065);
    h = m[0];
    l = m[1];
    mul64(m, (h ^ h >>> 27) >>> 0, (l ^ (l >>> 27 | h << 5)) >>> 0, 2496678331, 321982955);
    h = m[0];
    l = m[1];
    s[2] = h ^ h >>> 31;
    s[3] = l ^ (l >>> 31 | h << 1);
  }
  /** The 64-bit state, for the Wasm filler to go on from. */
  get state() {
    return BigInt(this.s[0]) << 32n | BigInt(this.s[1]);
  }
  set state(x) {
    this.s[0] = Number(BigInt.asUintN(64, x) >> 32n);
    this.s[1] = Number(x & 0xffffffffn);
  }
  /** Full 64-bit draw as a BigInt (for tests). */
  nextBig() {
    this.next();
    return BigInt(this.outHi) << 32n | BigInt(this.outLo);
  }
};
function nonzero(hi) {
  const x = 2 * (hi >>> 8) / 16777216 - 1;
  return Math.abs(x) < 1 / 64 ? 0.5 : x;
}
var TENTH = Math.fround(0.1);
var HUNDREDTH = Math.fround(0.01);
var CHUNK_WORDS = 1 << 15;
function sleb(v) {
  const out = [];
  for (; ; ) {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    const last = v === 0n && !(b & 64) || v === -1n && (b & 64) !== 0;
    out.push(last ? b : b | 128);
    if (last) return out;
  }
}
function f64(x) {
  const d = new DataView(new ArrayBuffer(8));
  d.setFloat64(0, x, true);
  return [...new Uint8Array(d.buffer)];
}
function fillerBytes() {
  const i64 = (v) => [66, ...sleb(BigInt.asIntN(64, v))];
  const get = (i) => [32, i], set = (i) => [33, i], tee = (i) => [34, i];
  const body = [
    2,
    64,
    3,
    64,
    ...get(1),
    ...get(2),
    79,
    13,
    1,
    // p >= end: out
    ...get(0),
    ...i64(0x9e3779b97f4a7c15n),
    124,
    ...tee(0),
    ...get(0),
    ...i64(30n),
    136,
    133,
    ...i64(0xbf58476d1ce4e5b9n),
    126,
    ...tee(4),
    ...get(4),
    ...i64(27n),
    136,
    133,
    ...i64(0x94d049bb133111ebn),
    126,
    ...tee(4),
    ...get(4),
    ...i64(31n),
    136,
    133,
    ...set(4),
    ...get(3),
    69,
    4,
    64,
    ...get(1),
    ...get(4),
    167,
    54,
    2,
    0,
    // i32.store of the low word
    5,
    ...get(4),
    ...i64(32n),
    136,
    167,
    ...set(5),
    ...get(5),
    65,
    8,
    118,
    184,
    68,
    ...f64(2),
    162,
    68,
    ...f64(16777216),
    163,
    68,
    ...f64(1),
    161,
    ...set(6),
    ...get(6),
    153,
    68,
    ...f64(1 / 64),
    99,
    4,
    64,
    68,
    ...f64(0.5),
    ...set(6),
    11,
    ...get(3),
    65,
    2,
    70,
    4,
    64,
    ...get(6),
    153,
    68,
    ...f64(TENTH),
    162,
    182,
    187,
    68,
    ...f64(HUNDREDTH),
    160,
    ...set(6),
    11,
    ...get(1),
    ...get(6),
    182,
    56,
    2,
    0,
    // f32.store
    11,
    ...get(1),
    65,
    4,
    106,
    ...set(1),
    12,
    0,
    11,
    11,
    ...get(0),
    11
  ];
  const func = [3, 1, 126, 1, 127, 1, 124, ...body];
  const section = (id, content) => [id, ...uleb(content.length), ...content];
  const name = (s) => [s.length, ...[...s].map((c) => c.charCodeAt(0))];
  return new Uint8Array([
    0,
    97,
    115,
    109,
    1,
    0,
    0,
    0,
    ...section(1, [1, 96, 4, 126, 127, 127, 127, 1, 126]),
    ...section(3, [1, 0]),
    ...section(5, [1, 0, CHUNK_WORDS * 4 / 65536]),
    ...section(7, [2, ...name("fill"), 0, 0, ...name("mem"), 2, 0]),
    ...section(10, [1, ...uleb(func.length), ...func])
  ]);
}
function uleb(n) {
  const out = [];
  do {
    const b = n & 127;
    n >>>= 7;
    out.push(n ? b | 128 : b);
  } while (n);
  return out;
}
var filler;
function wasmFiller() {
  if (filler !== void 0) return filler;
  try {
    const inst = new WebAssembly.Instance(new WebAssembly.Module(fillerBytes()));
    filler = inst.exports;
    filler.fill(0n, 0, 0, 0);
  } catch {
    filler = null;
  }
  return filler;
}
var InputGen = class {
  /** `specs` are all arguments; the last (the output) is not generated. `useWasm`: false forces the JS path. */
  constructor(specs, seed, useWasm = true) {
    this.specs = specs;
    this.useWasm = useWasm;
    this.rng = new SplitMix64(seed);
    this.args = specs.slice(0, -1).map((s) => new Uint32Array(s.elems));
  }
  specs;
  useWasm;
  rng;
  arg = 0;
  pos = 0;
  args;
  get done() {
    return this.arg >= this.args.length;
  }
  /** Generates up to `n` more words; returns true when all are there. */
  fill(n) {
    const rng = this.rng;
    while (n > 0 && !this.done) {
      const out = this.args[this.arg];
      const s = this.specs[this.arg];
      const w = this.useWasm ? wasmFiller() : null;
      const end = Math.min(out.length, this.pos + Math.min(n, w ? CHUNK_WORDS : n));
      n -= end - this.pos;
      if (w) {
        const mode = s.dtype === "u32" ? 0 : s.name === "S" ? 2 : 1;
        rng.state = w.fill(rng.state, 0, (end - this.pos) * 4, mode);
        out.set(new Uint32Array(w.mem.buffer, 0, end - this.pos), this.pos);
      } else if (s.dtype === "u32") {
        for (let i = this.pos; i < end; i++) {
          rng.next();
          out[i] = rng.outLo;
        }
      } else {
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        if (s.name === "S") {
          for (let i = this.pos; i < end; i++) {
            rng.next();
            f[i] = Math.fround(Math.abs(nonzero(rng.outHi)) * TENTH) + HUNDREDTH;
          }
        } else {
          for (let i = this.pos; i < end; i++) {
            rng.next();
            f[i] = nonzero(rng.outHi);
          }
        }
      }
      this.pos = end;
      if (end === out.length) {
        this.arg++;
        this.pos = 0;
      }
    }
    return this.done;
  }
};
function seededInputs(specs, seed) {
  const g = new InputGen(specs, seed);
  g.fill(Infinity);
  return g.args;
}

// src/stats.ts
function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}
function relNoise(xs) {
  const m = median(xs);
  if (!(m > 0)) return Infinity;
  return 1.4826 * median(xs.map((x) => Math.abs(x - m))) / m;
}
function fasterBeyondNoise(cand, cur, floor = 0.01) {
  const threshold = Math.max(floor, 2 * Math.hypot(relNoise(cand), relNoise(cur)));
  return median(cand) < median(cur) * (1 - threshold);
}

// src/timer.ts
var cached = 0;
function timerResolutionMs() {
  if (cached) return cached;
  let best = Infinity;
  for (let trial = 0; trial < 5; trial++) {
    const t0 = performance.now();
    let t1 = t0;
    const start = Date.now();
    while (t1 === t0 && Date.now() - start < 50) t1 = performance.now();
    if (t1 > t0) best = Math.min(best, t1 - t0);
  }
  cached = Number.isFinite(best) ? best : 1;
  return cached;
}

// src/rho.ts
var RHO_BUDGET_MS = 200;
function rhoBit(ratio, margin) {
  return Number.isFinite(ratio) && ratio < 1 - margin ? "1" : "0";
}
async function fetchModule(server, url) {
  const res = await fetch(url.startsWith("http") ? url : `${server}${url}`);
  if (!res.ok) throw new Error(`rho kernel ${url}: HTTP ${res.status}`);
  return WebAssembly.compile(await res.arrayBuffer());
}
async function instantiateAll(server, op, shape, kernels) {
  const specs = argSpecs(op, shape);
  const offsets = [];
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
  const fns = /* @__PURE__ */ new Map();
  for (const k of kernels) {
    if (fns.has(k.url)) continue;
    const inst = await WebAssembly.instantiate(await fetchModule(server, k.url), { env: { memory } });
    const fn = inst.exports[k.meta.entry || "kernel"];
    if (typeof fn !== "function") throw new Error(`rho kernel ${k.url} exports no \`${k.meta.entry}\``);
    const args = k.meta.scratch_bytes ? [...offsets, scratch] : offsets;
    fns.set(k.url, () => fn(...args));
  }
  return fns;
}
function msPerCall(f, windowMs) {
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
function cacheKey(server, version) {
  return `webtune-rho|${server}|${version}|${globalThis.navigator?.userAgent ?? ""}`;
}
async function measureRho(server, relaxedSimd, opts = {}) {
  const res = await fetch(`${server}/v1/rho?target=wasm`);
  if (!res.ok) throw new Error(`GET /v1/rho: HTTP ${res.status}: ${await res.text()}`);
  const spec2 = await res.json();
  const storage = opts.useCache === false ? null : globalThis.localStorage ?? null;
  const key = cacheKey(server, spec2.version);
  const hit = storage?.getItem(key);
  if (hit) {
    const saved = JSON.parse(hit);
    if (/^[01]*$/.test(saved.rho) && saved.rho.length === spec2.pairs.length) return { ...saved, ms: 0, setupMs: 0, cached: true, version: spec2.version };
  }
  const setup0 = performance.now();
  const run = spec2.pairs.filter((p) => !(p.needs_relaxed_simd && !relaxedSimd));
  const fns = /* @__PURE__ */ new Map();
  const byShape = /* @__PURE__ */ new Map();
  for (const p of run) {
    checkShape(p.op, p.shape);
    const k = `${p.op}/${p.shape}`;
    byShape.set(k, [...byShape.get(k) ?? [], p]);
  }
  for (const ps of byShape.values()) {
    const got = await instantiateAll(server, ps[0].op, ps[0].shape, ps.flatMap((p) => [p.base, p.variant]));
    for (const [url, f] of got) fns.set(url, f);
  }
  const t0 = performance.now();
  const setupMs = t0 - setup0;
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
  const samples = new Map([...fns.keys()].map((u) => [u, []]));
  const order = [...fns.keys()];
  for (let round = 0; round < 9; round++) {
    if (round >= 3 && performance.now() - t0 > RHO_BUDGET_MS) break;
    for (const url of round % 2 ? [...order].reverse() : order) samples.get(url).push(msPerCall(fns.get(url), windowMs));
  }
  const ratios = {};
  let rho = "";
  for (const p of spec2.pairs) {
    const v = samples.get(p.variant.url);
    const b = samples.get(p.base.url);
    const ratio = v && b ? median(v.map((x, r) => x / b[r])) : NaN;
    ratios[p.name] = ratio;
    rho += rhoBit(ratio, spec2.margin);
  }
  const ms = performance.now() - t0;
  try {
    storage?.setItem(key, JSON.stringify({ rho, ratios }));
  } catch {
  }
  return { rho, ratios, ms, setupMs, cached: false, version: spec2.version };
}

// src/check.ts
var TOLERANCE = 1e-5;
var F = new Float32Array(1);
var U = new Uint32Array(F.buffer);
function f32(bitsValue) {
  U[0] = bitsValue;
  return F[0];
}
function erf(x) {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let term = ax;
    let sum = ax;
    for (let n = 1; n < 100 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
      term *= -ax * ax / n;
      sum += term / (2 * n + 1);
    }
    return Math.sign(x) * 2 * sum / Math.sqrt(Math.PI);
  }
  let f = ax;
  for (let n = 60; n >= 1; n--) f = ax + n / 2 / f;
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}
function epilogue(p, x, bias, r) {
  let v = x + bias;
  if (p.act === "gelu") v = 0.5 * v * (1 + erf(v / Math.SQRT2));
  else if (p.act === "relu") v = Math.max(v, 0);
  return v + r;
}
function bAt(op, shape, args, bi, kk, j) {
  const [, , k, n] = bmkn(op, shape);
  if (op === "matmul_q4") {
    const word = args[1][j * (k / 8) + (kk >>> 3)];
    const q = word >>> 4 * (kk & 7) & 15;
    return (q - 8) * f32(args[2][j * (k / 32) + (kk >>> 5)]);
  }
  return f32(args[1][bi * k * n + kk * n + j]);
}
var Scales = class {
  constructor(op, shape, args) {
    this.op = op;
    this.shape = shape;
    this.args = args;
    const [b, m, k, n] = bmkn(op, shape);
    this.m = m;
    this.n = n;
    this.parsed = parseOp(op);
    this.biasArg = this.parsed.bias ? 2 : -1;
    this.residualArg = this.parsed.residual ? 2 + (this.parsed.bias ? 1 : 0) : -1;
    this.rows = new Float64Array(b * m);
    this.cols = new Float64Array(b * n);
    const a = new Float32Array(args[0].buffer, args[0].byteOffset, args[0].length);
    for (let r = 0; r < b * m; r++) {
      let s = 0;
      for (let kk = 0; kk < k; kk++) s += a[r * k + kk] * a[r * k + kk];
      this.rows[r] = Math.sqrt(s);
    }
    if (op === "matmul_q4") {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let kk = 0; kk < k; kk++) {
          const v = bAt(op, shape, args, 0, kk, j);
          s += v * v;
        }
        this.cols[j] = Math.sqrt(s);
      }
      return;
    }
    const bv = new Float32Array(args[1].buffer, args[1].byteOffset, args[1].length);
    for (let bi = 0; bi < b; bi++) {
      const cols = this.cols.subarray(bi * n, (bi + 1) * n);
      for (let kk = 0; kk < k; kk++) {
        const row = (bi * k + kk) * n;
        for (let j = 0; j < n; j++) cols[j] += bv[row + j] * bv[row + j];
      }
      for (let j = 0; j < n; j++) cols[j] = Math.sqrt(cols[j]);
    }
  }
  op;
  shape;
  args;
  rows;
  cols;
  m;
  n;
  parsed;
  /** Argument numbers of the epilogue's bias and R (ABI order A, B, bias, R, C). */
  biasArg;
  residualArg;
  /** The scale of flat output index `p`. */
  at(p) {
    const m = this.m, n = this.n;
    const bi = Math.floor(p / (m * n));
    const i = Math.floor(p / n) % m;
    const j = p % n;
    const [bv, rv] = this.epilogueTerms(p);
    return Math.max(this.rows[bi * m + i] * this.cols[bi * n + j] + Math.abs(bv) + Math.abs(rv), Number.MIN_VALUE);
  }
  /** The bias and residual values that output `p` adds (0 where the op has none). */
  epilogueTerms(p) {
    const bv = this.biasArg >= 0 ? f32(this.args[this.biasArg][p % this.n]) : 0;
    const rv = this.residualArg >= 0 ? f32(this.args[this.residualArg][p]) : 0;
    return [bv, rv];
  }
  /** The f64 reference of flat output index `p`, in O(K). */
  reference(p) {
    const [, m, k, n] = bmkn(this.op, this.shape);
    const bi = Math.floor(p / (m * n));
    const i = Math.floor(p / n) % m;
    const j = p % n;
    const a = this.args[0];
    let acc = 0;
    for (let kk = 0; kk < k; kk++) acc += f32(a[(bi * m + i) * k + kk]) * bAt(this.op, this.shape, this.args, bi, kk, j);
    if (this.biasArg < 0 && this.residualArg < 0 && this.parsed.act === "none") return acc;
    const [bv, rv] = this.epilogueTerms(p);
    return epilogue(this.parsed, acc, bv, rv);
  }
};
function compareOutputs(scales, got, want, tolerance) {
  let maxErr = 0, worst = 0;
  for (let p = 0; p < got.length; p++) {
    const g = got[p], w = want[p];
    const err = Number.isFinite(g) && Number.isFinite(w) ? Math.abs(g - w) / scales.at(p) : Infinity;
    if (err > maxErr || err === Infinity && maxErr !== Infinity) {
      maxErr = err;
      worst = p;
    }
  }
  return { ok: maxErr <= tolerance, maxErr, worst };
}
function checkPositions(scales, got, positions) {
  let maxErr = 0, worst = 0;
  for (const p of positions) {
    const g = got[p];
    const err = Number.isFinite(g) ? Math.abs(g - scales.reference(p)) / scales.at(p) : Infinity;
    if (err > maxErr || err === Infinity && maxErr !== Infinity) {
      maxErr = err;
      worst = p;
    }
  }
  return { ok: maxErr <= TOLERANCE, maxErr, worst };
}
function defaultPositions(len, count = 8) {
  const out = /* @__PURE__ */ new Set([0, len - 1]);
  for (let i = 1; out.size < Math.min(count, len); i++) out.add(Math.floor(i * 0.618033988749895 * len % len));
  return [...out].sort((a, b) => a - b);
}

// src/sse.ts
var SseReader = class _SseReader {
  constructor(reader) {
    this.reader = reader;
  }
  reader;
  buf = "";
  decoder = new TextDecoder();
  ended = false;
  static async open(url, signal) {
    const res = await fetchRetrying(url, { headers: { accept: "text/event-stream" }, cache: "no-store", signal });
    if (!res.ok || !res.body) {
      throw new Error(`queue ${url}: HTTP ${res.status}: ${await res.text().catch(() => "")}`);
    }
    return new _SseReader(res.body.getReader());
  }
  /** The next event, or null at the end of the stream. Comments are skipped. */
  async next() {
    for (; ; ) {
      const cut = this.buf.search(/\r?\n\r?\n/);
      if (cut >= 0) {
        const block = this.buf.slice(0, cut);
        this.buf = this.buf.slice(cut + (this.buf[cut] === "\r" ? 4 : 2));
        let event = "message";
        const data = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let value2 = colon < 0 ? "" : line.slice(colon + 1);
          if (value2.startsWith(" ")) value2 = value2.slice(1);
          if (field === "event") event = value2;
          else if (field === "data") data.push(value2);
        }
        if (data.length) return { event, data: data.join("\n") };
        continue;
      }
      if (this.ended) return null;
      const { value, done } = await this.reader.read();
      if (done) {
        this.ended = true;
        this.buf += this.decoder.decode();
        if (!/\r?\n\r?\n/.test(this.buf)) this.buf += "\n\n";
      } else {
        this.buf += this.decoder.decode(value, { stream: true });
      }
    }
  }
  cancel() {
    this.reader.cancel().catch(() => {
    });
  }
};

// src/tuner.ts
function parseCandidate(data) {
  const c = JSON.parse(data);
  const m = /"seed"\s*:\s*(\d+)/.exec(data);
  return { ...c, seed: m ? BigInt(m[1]) : BigInt(c.seed) };
}
var WARM_MAX_PAIRS = 15;
var WARM_MAX_MS = 1500;
var WARM_MIN_MS = 8;
var MAX_RESTARTS = 2;
var NEW_LOW = 0.9;
var REJECT_RATIO = 1.25;
var REJECT_PAIRS = 3;
var FUTILE_PAIRS = 5;
var STOP_AFTER_MS = 30;
function noNewLow(xs) {
  if (xs.length < 2) return false;
  let min = Infinity;
  for (let i = 0; i < xs.length - 1; i++) min = Math.min(min, xs[i]);
  return xs[xs.length - 1] >= NEW_LOW * min;
}
function warmedUp(cur, cand, sinceFirstRunMs) {
  return cur.length >= 2 && cand.length >= 2 && sinceFirstRunMs >= WARM_MIN_MS && noNewLow(cur) && noNewLow(cand);
}
function clearlySlower(cur, cand) {
  const n = Math.min(cur.length, cand.length);
  if (n < REJECT_PAIRS || !noNewLow(cand)) return false;
  for (let i = n - REJECT_PAIRS; i < n; i++) if (!(cand[i] >= REJECT_RATIO * cur[i])) return false;
  return true;
}
function futile(cur, cand) {
  const n = Math.min(cur.length, cand.length);
  if (n < FUTILE_PAIRS || !noNewLow(cand)) return false;
  const ratios = [];
  for (let i = 0; i < n; i++) ratios.push(cand[i] / cur[i]);
  return median(ratios) >= 1;
}
function unitTimes() {
  return { fill: Infinity, scales: Infinity, checkCur: Infinity, checkCand: Infinity };
}
function noteUnitTime(times, u, ms) {
  const prev = times[u];
  times[u] = Number.isFinite(prev) ? Math.max(ms, 0.9 * prev) : ms;
}
function failed(c, error) {
  return {
    sha256: c.sha256,
    index: c.index,
    total: c.total,
    source: c.source,
    ticket: c.ticket,
    ok: false,
    error,
    median_us: 0,
    current_us: 0,
    noise: 0,
    runs: 0
  };
}
var Evaluation = class {
  constructor(t, backend, cand, fetched) {
    this.t = t;
    this.backend = backend;
    this.cand = cand;
    this.fetched = fetched;
    this.gen = new InputGen(t.specs, cand.seed);
    this.impl = fetched.impl;
    this.loadError = fetched.error;
  }
  t;
  backend;
  cand;
  fetched;
  phase = "load";
  result = null;
  gen;
  scales = null;
  curOut = null;
  reps = 1;
  perCall = 0;
  turn = 0;
  warmMs = 0;
  firstRun = 0;
  warm = { cur: [], cand: [] };
  timed = { cur: [], cand: [] };
  samples;
  rejectedEarly = false;
  restarts = 0;
  t0 = performance.now();
  ends = {};
  busyMs = 0;
  slices = 0;
  busyBy = {};
  longest = 0;
  longestPhase = "";
  impl;
  loading = null;
  loadError;
  /**
   * Compiles the candidate in the background while its inputs are made. It
   * starts only when this candidate's turn comes, never while another is
   * being timed: a compile (V8's background tiers, a GPU driver's pipeline
   * build) competes for the same cores and would inflate the timings.
   */
  startLoad() {
    this.loading = this.backend.load(this.fetched.bytes, this.cand.meta).then(
      (impl) => {
        this.impl = impl;
      },
      (e) => {
        this.loadError = `load: ${e instanceof Error ? e.message : e}`;
      }
    );
    this.loading.then(() => {
      this.loading = null;
      this.ends.load = performance.now() - this.t0;
    });
  }
  /** Records a failure; `us` is the time of the one run it had, if it ran. */
  fail(error, us) {
    this.result = us === void 0 ? failed(this.cand, error) : { ...failed(this.cand, error), median_us: Math.max(us, 1e-3), runs: 1 };
    this.phase = "done";
  }
  /**
   * Does what fits before `deadline`. Unless `strict`, at least one unit of
   * work is done even when it alone overruns; a strict call starts a unit
   * only when its estimated time fits.
   */
  async step(bench, deadline, strict = false) {
    const t = performance.now();
    const from = this.phase;
    try {
      await this.work(bench, deadline, strict);
    } finally {
      const now = performance.now();
      this.busyMs += now - t;
      this.slices++;
      this.busyBy[from] = (this.busyBy[from] ?? 0) + (now - t);
      if (now - t > this.longest) {
        this.longest = now - t;
        this.longestPhase = from;
      }
      this.markPhases(from, now);
    }
  }
  /** Notes the end time of the phases left since `from`. */
  markPhases(from, now) {
    const order = ["load", "inputs", "check", "warm", "time", "done"];
    for (let i = order.indexOf(from); i < order.indexOf(this.phase); i++) {
      const p = order[i];
      if (p !== "time" && p !== "done" && this.ends[p] === void 0) this.ends[p] = now - this.t0;
    }
    if (this.result && !this.result.trace) {
      const e = this.ends, at = now - this.t0;
      this.result.trace = {
        load_ms: e.load ?? at,
        inputs_ms: e.inputs ?? at,
        check_ms: e.check ?? at,
        warm_ms: e.warm ?? at,
        done_ms: at,
        busy_ms: this.busyMs,
        slices: this.slices,
        warm_pairs: this.warm.cur.length,
        timed_pairs: this.timed.cur.length,
        busy_by_phase: this.busyBy,
        longest_ms: this.longest,
        longest_phase: this.longestPhase,
        warm_cur: this.warm.cur,
        warm_cand: this.warm.cand
      };
    }
  }
  /** Runs one unit of work, timing it for the tuner's estimates. */
  async unit(u, f) {
    const t = performance.now();
    try {
      return await f();
    } finally {
      this.t.noteUnit(u, performance.now() - t);
    }
  }
  async work(bench, deadline, strict) {
    if (this.phase === "load") {
      if (!this.impl && !this.fetched.bytes) return this.fail(this.loadError ?? "not fetched");
      if (!this.impl && !this.loading) this.startLoad();
      this.phase = "inputs";
    }
    if (this.phase === "done") return;
    const cur = this.t.current;
    let worked = strict;
    const fits = (est) => !worked || performance.now() + est <= deadline;
    while (this.phase !== "done") {
      if (this.phase === "inputs") {
        if (!this.gen.done) {
          if (!fits(this.t.unitMs.fill)) return;
          await this.unit("fill", () => this.gen.fill(1 << 15));
          worked = true;
          continue;
        }
        if (!fits(this.t.unitMs.scales)) return;
        await this.unit("scales", async () => {
          await bench.setInputs(this.gen.args);
          this.scales = new Scales(this.t.op, this.t.shape, this.gen.args);
        });
        worked = true;
        this.phase = "check";
        continue;
      }
      if (this.phase === "check") {
        if (!this.curOut) {
          if (!fits(this.t.unitMs.checkCur)) return;
          worked = true;
          const t0 = performance.now();
          try {
            this.curOut = await this.unit("checkCur", () => bench.runOnce(cur));
          } catch (e) {
            this.curOut = new Float32Array(0);
            this.t.currentBroken = true;
            this.t.note(`the kernel in use failed to run: ${e}`);
          }
          this.perCall = Math.max(performance.now() - t0, 1e-4);
          continue;
        }
        if (this.loading) return;
        if (!this.impl) return this.fail(this.loadError ?? "load failed");
        if (!fits(Math.max(this.t.unitMs.checkCand, this.perCall))) return;
        worked = true;
        const t1 = performance.now();
        this.firstRun = t1;
        let candOut;
        try {
          candOut = await this.unit("checkCand", () => bench.runOnce(this.impl));
        } catch (e) {
          return this.fail(`run: ${e instanceof Error ? e.message : e}`, (performance.now() - t1) * 1e3);
        }
        const t2 = performance.now();
        const curOut = this.curOut;
        const positions = this.cand.check?.length ? this.cand.check : defaultPositions(candOut.length);
        const ref = checkPositions(this.scales, candOut, positions);
        if (!ref.ok) return this.fail(`output ${ref.worst} is off the reference by ${ref.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1e3);
        if (!this.t.currentBroken) {
          const curRef = checkPositions(this.scales, curOut, positions);
          if (!curRef.ok) {
            this.t.currentBroken = true;
            this.t.note(`the kernel in use is off the reference at output ${curRef.worst} (${curRef.maxErr.toExponential(2)})`);
          } else {
            const cmp = compareOutputs(this.scales, candOut, curOut, 2 * TOLERANCE);
            if (!cmp.ok) return this.fail(`output ${cmp.worst} differs from the kernel in use by ${cmp.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1e3);
          }
        }
        if (this.cand.check) this.samples = this.cand.check.map((p) => candOut[p]);
        this.curOut = null;
        this.perCall = Math.max(this.perCall, t2 - t1, 1e-4);
        this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));
        this.phase = "warm";
        continue;
      }
      const impl = this.impl;
      if (!fits(this.reps * this.perCall)) return;
      worked = true;
      const curTurn = this.turn % 4 === 0 || this.turn % 4 === 3;
      const ms = await bench.time(curTurn ? cur : impl, this.reps);
      const per = ms / this.reps;
      const into = this.phase === "warm" ? this.warm : this.timed;
      (curTurn ? into.cur : into.cand).push(per);
      this.turn++;
      if (this.turn % 2) continue;
      if (this.phase === "warm") {
        this.warmMs += 2 * ms;
        this.perCall = Math.max(into.cur.at(-1), into.cand.at(-1), 1e-4);
        this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));
        const enough = this.t.warmPairs !== void 0 ? into.cur.length >= this.t.warmPairs : warmedUp(into.cur, into.cand, performance.now() - this.firstRun) || into.cur.length >= WARM_MAX_PAIRS || this.warmMs > WARM_MAX_MS;
        if (enough) this.phase = "time";
        continue;
      }
      const t = this.timed;
      if (this.t.warmPairs === void 0 && t.cand.length >= 2 && !noNewLow(t.cand) && this.restarts < MAX_RESTARTS) {
        this.restarts++;
        this.warm.cur.push(...t.cur);
        this.warm.cand.push(...t.cand);
        t.cur.length = 0;
        t.cand.length = 0;
        this.phase = "warm";
        continue;
      }
      const early = this.t.earlyReject && t.cur.length < this.t.timedPairs && performance.now() - this.firstRun >= this.t.stopAfterMs && (clearlySlower(t.cur, t.cand) || futile(t.cur, t.cand));
      if (early || t.cur.length >= this.t.timedPairs) {
        this.rejectedEarly = early;
        const c = this.cand;
        this.result = {
          sha256: c.sha256,
          index: c.index,
          total: c.total,
          source: c.source,
          ticket: c.ticket,
          ok: true,
          median_us: median(t.cand) * 1e3,
          current_us: median(t.cur) * 1e3,
          noise: relNoise(t.cand),
          runs: this.reps * t.cand.length,
          samples: this.samples,
          ...early ? { rejected_early: true } : {}
        };
        this.phase = "done";
      }
    }
  }
  /** Whether the candidate beat the kernel in use beyond the noise of both. */
  beatsCurrent() {
    return !this.rejectedEarly && this.timed.cand.length > 0 && fasterBeyondNoise(this.timed.cand, this.timed.cur);
  }
};
var KernelTuner = class {
  constructor(host, backend, op, shape, current) {
    this.host = host;
    this.backend = backend;
    this.op = op;
    this.shape = shape;
    this.current = current;
    this.specs = argSpecs(op, shape);
    this.timedPairs = backend.target === "wasm" ? 9 : 5;
    this.warmPairs = backend.target === "wasm" ? void 0 : 1;
  }
  host;
  backend;
  op;
  shape;
  current;
  specs;
  phase = "waiting";
  currentBroken = false;
  results = [];
  notes = [];
  total = 0;
  /** Candidates to evaluate at most (the queue is best first); the rest are not fetched. */
  maxCandidates = Infinity;
  started = 0;
  /** Timed sample pairs per candidate. */
  timedPairs;
  /** Fixed warm-up pairs (no JIT to wait for on a GPU), or undefined to wait until timings settle. */
  warmPairs;
  /** Stop timing a candidate once it is clearly slower or cannot win (see `clearlySlower`, `futile`). */
  earlyReject = true;
  /** How long after a candidate's first call an early stop may come, ms. */
  stopAfterMs = STOP_AFTER_MS;
  /**
   * How long each kind of unit of work took lately, ms (a decaying maximum;
   * Infinity until seen): a strict step starts a unit only when it fits.
   */
  unitMs = unitTimes();
  reader = null;
  pending = null;
  ev = null;
  bench = null;
  abort = new AbortController();
  /** Where candidates are evaluated when not here (the bench worker), and the ones sent there, oldest first. */
  remote = null;
  jobs = [];
  get key() {
    return `${this.op}/${this.shape.join(",")}/${this.backend.target}`;
  }
  note(s) {
    this.notes.push(s);
  }
  /** @internal Records how long one unit of work took. */
  noteUnit(u, ms) {
    noteUnitTime(this.unitMs, u, ms);
  }
  /** Candidates evaluated so far. */
  get evaluated() {
    return this.results.length;
  }
  /** Candidates taken from the queue so far, evaluated or under evaluation. */
  get taken() {
    return this.started;
  }
  /** Whether a candidate is part-way through its evaluation. */
  get evaluating() {
    return this.ev !== null || this.jobs.length > 0;
  }
  /** Starts reading the queue (in the background). */
  open() {
    if (this.phase !== "waiting") return;
    this.phase = "opening";
    const q = new URLSearchParams({ op: this.op, shape: this.shape.join(","), target: this.backend.target });
    const url = `${this.host.server}/v1/sessions/${this.host.sessionId}/queue?${q}`;
    SseReader.open(url, this.abort.signal).then(
      (r) => {
        this.reader = r;
        this.phase = "running";
        this.pull();
      },
      (e) => {
        this.note(`queue: ${e}`);
        this.phase = "done";
      }
    );
  }
  /** Reads the next event and loads its kernel, in the background. */
  pull() {
    const p = { done: false };
    this.pending = p;
    const load = async () => {
      for (; ; ) {
        const e = await this.reader.next();
        if (!e || e.event === "done") return null;
        if (e.event !== "candidate") continue;
        const cand = parseCandidate(e.data);
        this.total = cand.total;
        if (cand.sha256 === this.current.sha256) return { cand, impl: this.current };
        try {
          return { cand, bytes: await this.host.fetchKernel(cand.url, this.backend.target) };
        } catch (err) {
          return { cand, error: `fetch: ${err instanceof Error ? err.message : err}` };
        }
      }
    };
    load().then(
      (v) => {
        p.value = v;
        p.done = true;
      },
      (err) => {
        this.note(`queue read: ${err}`);
        p.value = null;
        p.done = true;
      }
    );
  }
  /**
   * Does the tuning work that is ready, until `deadline` (a performance.now()
   * time). Returns whether anything was done. Unless `strict`, one unit of
   * work is done even if it alone overruns the deadline (so that a kernel
   * longer than the budget still gets tuned); a strict step never starts a
   * unit that it does not expect to fit.
   */
  async step(deadline, strict = false) {
    if (this.phase === "waiting") this.open();
    if (this.phase !== "running") return false;
    if (this.remote) return this.stepRemote();
    if (!this.ev) {
      const p = this.pending;
      if (!p || !p.done) return false;
      if (!p.value) {
        this.finish();
        return false;
      }
      this.ev = new Evaluation(this, this.backend, p.value.cand, p.value);
      this.started++;
      if (this.started < this.maxCandidates) this.pull();
      else this.pending = { done: true, value: null };
    }
    const ev = this.ev;
    this.bench ??= this.backend.bench(this.specs, this.current.meta);
    await ev.step(this.bench, deadline, strict);
    if (ev.phase === "done" && ev.result) {
      this.ev = null;
      const m = ev.result;
      this.results.push(m);
      this.host.measured(this, m);
      const impl = ev.impl;
      if (m.ok && impl.sha256 !== this.current.sha256 && (this.currentBroken || ev.beatsCurrent())) {
        const previous = this.current;
        await this.host.adopt(this, impl, m, previous);
        this.current = impl;
        this.currentBroken = false;
      }
    }
    return true;
  }
  /**
   * With a remote evaluator: takes in finished answers (adopting a winner),
   * and keeps up to two candidates with the worker, so that it never waits
   * for this page between two of them. The page only fetches, compiles
   * (in the background) and adopts.
   */
  async stepRemote() {
    let did = false;
    while (this.jobs.length && this.jobs[0].done) {
      const j = this.jobs.shift();
      did = true;
      const m = j.answer?.result ?? failed(j.fetched.cand, j.error ?? "not evaluated");
      for (const n of j.answer?.notes ?? []) this.note(n);
      this.results.push(m);
      this.host.measured(this, m);
      if (j.answer?.beats && j.impl && j.impl.sha256 !== this.current.sha256) {
        const previous = this.current;
        await this.host.adopt(this, j.impl, m, previous);
        this.current = j.impl;
        this.currentBroken = false;
      }
    }
    const p = this.pending;
    if (this.jobs.length >= 2 || !p || !p.done) return did;
    if (!p.value) {
      if (!this.jobs.length) this.finish();
      return did;
    }
    const f = p.value;
    this.started++;
    if (this.started < this.maxCandidates) this.pull();
    else this.pending = { done: true, value: null };
    const job = { fetched: f, done: false };
    this.jobs.push(job);
    const remote = this.remote;
    (async () => {
      const impl = f.impl ?? (f.bytes !== void 0 ? await this.backend.load(f.bytes, f.cand.meta) : void 0);
      if (!impl) throw new Error(f.error ?? "not fetched");
      job.impl = impl;
      job.answer = await remote.evaluate(this, f.cand, impl);
    })().catch((e) => {
      job.error = !job.impl && f.error ? f.error : `${job.impl ? "bench worker" : "load"}: ${e instanceof Error ? e.message : e}`;
    }).finally(() => {
      job.done = true;
    });
    return true;
  }
  /**
   * The report body: the five fastest that passed, then failures that ran
   * (the server flags them) while there is room. A candidate that failed to
   * load has no time to report, so it is left out.
   */
  reportBody() {
    const bySha = /* @__PURE__ */ new Map();
    for (const m of this.results) {
      const prev = bySha.get(m.sha256);
      if (!prev || m.ok && (!prev.ok || m.median_us < prev.median_us)) bySha.set(m.sha256, m);
    }
    const all = [...bySha.values()];
    const ok = all.filter((m) => m.ok).sort((a, b) => a.median_us - b.median_us);
    const bad = all.filter((m) => !m.ok && m.runs > 0);
    const top = [...ok, ...bad].slice(0, 5);
    if (!ok.length) return null;
    return {
      op: this.op,
      shape: this.shape,
      target: this.backend.target,
      entries: top.map((m) => {
        const e = {
          sha256: m.sha256,
          ticket: m.ticket,
          median_us: m.median_us,
          runs: m.runs,
          output_ok: m.ok
        };
        if (m.ok && m.samples) e.samples = m.samples;
        return e;
      })
    };
  }
  finish() {
    this.reader?.cancel();
    this.reader = null;
    this.bench?.dispose();
    this.bench = null;
    this.phase = "reporting";
    const body = this.reportBody();
    if (!body) {
      this.phase = "done";
      this.host.reported(this, null, "no candidate passed its check; nothing to report");
      return;
    }
    fetchRetrying(`${this.host.server}/v1/sessions/${this.host.sessionId}/reports`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then(async (r) => {
      const text = await r.text();
      let json2 = text;
      try {
        json2 = JSON.parse(text);
      } catch {
      }
      this.phase = "done";
      this.host.reported(this, json2, r.ok ? void 0 : `report: HTTP ${r.status}: ${text}`);
    }).catch((e) => {
      this.phase = "done";
      this.host.reported(this, null, `report: ${e}`);
    });
  }
  /** Stops reading the queue; nothing is reported. */
  cancel() {
    this.abort.abort();
    this.reader?.cancel();
    this.bench?.dispose();
    this.bench = null;
    this.phase = "done";
  }
};

// src/wasm.ts
var PAGE = 65536;
function align(n, a) {
  return Math.ceil(n / a) * a;
}
function ensureBytes(memory, bytes) {
  const have = memory.buffer.byteLength;
  if (have < bytes) memory.grow(Math.ceil((bytes - have) / PAGE));
}
var WasmBench = class {
  resolutionMs = timerResolutionMs();
  // 1 % rounding, and never under 0.5 ms (call overhead and clock reads).
  minSampleMs = Math.max(0.5, 100 * this.resolutionMs);
  memory;
  offsets = [];
  scratch;
  outElems;
  constructor(specs, meta) {
    let end = 0;
    for (const s of specs) {
      this.offsets.push(end);
      end = align(end + s.elems * 4, 64);
    }
    this.scratch = end;
    this.outElems = specs[specs.length - 1].elems;
    this.memory = new WebAssembly.Memory({ initial: Math.max(1, meta.memory_pages_min ?? 0, Math.ceil(end / PAGE)) });
  }
  async setInputs(args) {
    for (let i = 0; i < args.length; i++) new Uint32Array(this.memory.buffer, this.offsets[i], args[i].length).set(args[i]);
  }
  async prepare(impl) {
    if (impl.benchFn && impl.benchMemory === this.memory) return impl.benchFn;
    ensureBytes(this.memory, Math.max((impl.meta.memory_pages_min ?? 0) * PAGE, this.scratch + (impl.meta.scratch_bytes ?? 0)));
    const inst = await WebAssembly.instantiate(impl.module, { env: { memory: this.memory } });
    const fn = inst.exports[impl.meta.entry || "kernel"];
    if (typeof fn !== "function") throw new Error(`kernel ${impl.sha256} exports no \`${impl.meta.entry}\``);
    impl.benchFn = fn;
    impl.benchMemory = this.memory;
    return fn;
  }
  argsFor(impl) {
    return impl.meta.scratch_bytes ? [...this.offsets, this.scratch] : this.offsets;
  }
  async runOnce(impl) {
    const fn = await this.prepare(impl);
    const out = this.offsets[this.offsets.length - 1];
    new Uint32Array(this.memory.buffer, out, this.outElems).fill(POISON);
    fn(...this.argsFor(impl));
    return new Float32Array(this.memory.buffer.slice(out, out + this.outElems * 4));
  }
  async time(impl, reps) {
    const fn = await this.prepare(impl);
    const o = this.argsFor(impl);
    let t0 = 0, t1 = 0;
    switch (o.length) {
      case 3: {
        const [a, b, c] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c);
        t1 = performance.now();
        break;
      }
      case 4: {
        const [a, b, c, d] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d);
        t1 = performance.now();
        break;
      }
      case 5: {
        const [a, b, c, d, e] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d, e);
        t1 = performance.now();
        break;
      }
      default:
        throw new Error(`unexpected kernel arity ${o.length}`);
    }
    return t1 - t0;
  }
  dispose() {
  }
};
var WasmBackend = class {
  target = "wasm";
  async load(bytes, meta) {
    if (typeof bytes === "string") throw new Error("a Wasm kernel must be bytes");
    const module = await WebAssembly.compile(bytes);
    return { sha256: meta.sha256, meta, module, bytes };
  }
  bench(specs, meta) {
    return new WasmBench(specs, meta);
  }
};
var WasmKernelBinding = class {
  constructor(memory) {
    this.memory = memory;
  }
  memory;
  fn = null;
  scratchOffset = 0;
  scratchBytes = 0;
  /** Instantiates `impl` on the app's memory (growing it if the kernel needs more). */
  async bind(impl) {
    ensureBytes(this.memory, (impl.meta.memory_pages_min ?? 0) * PAGE);
    const need = impl.meta.scratch_bytes ?? 0;
    if (need > this.scratchBytes) {
      const start = align(this.memory.buffer.byteLength, PAGE);
      this.memory.grow(Math.ceil(need / PAGE));
      this.scratchOffset = start;
      this.scratchBytes = Math.ceil(need / PAGE) * PAGE;
    }
    const inst = await WebAssembly.instantiate(impl.module, { env: { memory: this.memory } });
    const fn = inst.exports[impl.meta.entry || "kernel"];
    if (typeof fn !== "function") throw new Error(`kernel ${impl.sha256} exports no \`${impl.meta.entry}\``);
    const scratch = this.scratchOffset;
    this.fn = need > 0 ? (...o) => fn(...o, scratch) : fn;
  }
  call(offsets) {
    this.fn(...offsets);
  }
  /** The bound function itself (fixed arity, no wrapper) when it needs no scratch. */
  get raw() {
    return this.fn;
  }
};

// src/remote.ts
function workersAvailable() {
  return typeof Worker === "function" && typeof Blob === "function" && typeof URL?.createObjectURL === "function" && true;
}
var WorkerEvaluator = class {
  worker;
  next = 1;
  waiting = /* @__PURE__ */ new Map();
  /** Ops whose kernel in use the worker has. */
  known = /* @__PURE__ */ new Set();
  constructor() {
    const url = URL.createObjectURL(new Blob(['"use strict";\n(() => {\n  // src/ops.ts\n  function parseOp(op) {\n    const [base, ...rest] = op.split("+");\n    if (!(base in DIMS)) {\n      throw new Error(`unknown op \\`${op}\\`: use matmul, batch_matmul or matmul_q4`);\n    }\n    const out = { base, bias: false, act: "none", residual: false };\n    const rank = { bias: 1, gelu: 2, relu: 2, residual: 3 };\n    let last = 0;\n    for (const p of rest) {\n      const r = rank[p];\n      if (r === void 0 || r <= last) {\n        throw new Error(\n          `op \\`${op}\\`: an epilogue is \\`+bias\\`, then \\`+gelu\\` or \\`+relu\\`, then \\`+residual\\`, each at most once and in that order, e.g. matmul+bias+gelu`\n        );\n      }\n      last = r;\n      if (p === "bias") out.bias = true;\n      else if (p === "residual") out.residual = true;\n      else out.act = p;\n    }\n    if (rest.length > 0 && base === "matmul_q4") {\n      throw new Error("matmul_q4 takes no epilogue: only matmul and batch_matmul do");\n    }\n    return out;\n  }\n  var DIMS = { matmul: 3, batch_matmul: 4, matmul_q4: 3 };\n  function bmkn(op, shape) {\n    return parseOp(op).base === "batch_matmul" ? [shape[0], shape[1], shape[2], shape[3]] : [1, shape[0], shape[1], shape[2]];\n  }\n  function spec(name, dtype, shape) {\n    return { name, dtype, shape, elems: shape.reduce((a, b) => a * b, 1) };\n  }\n  function argSpecs(op, shape) {\n    const [b, m, k, n] = bmkn(op, shape);\n    const p = parseOp(op);\n    const fused = (a, bb, c) => [\n      a,\n      bb,\n      ...p.bias ? [spec("bias", "f32", [n])] : [],\n      ...p.residual ? [spec("R", "f32", c.shape)] : [],\n      c\n    ];\n    switch (p.base) {\n      case "matmul":\n        return fused(spec("A", "f32", [m, k]), spec("B", "f32", [k, n]), spec("C", "f32", [m, n]));\n      case "batch_matmul":\n        return fused(spec("A", "f32", [b, m, k]), spec("B", "f32", [b, k, n]), spec("C", "f32", [b, m, n]));\n      case "matmul_q4":\n        return [\n          spec("A", "f32", [m, k]),\n          spec("W", "u32", [n, k / 8]),\n          spec("S", "f32", [n, k / 32]),\n          spec("C", "f32", [m, n])\n        ];\n    }\n  }\n\n  // src/check.ts\n  var TOLERANCE = 1e-5;\n  var F = new Float32Array(1);\n  var U = new Uint32Array(F.buffer);\n  function f32(bitsValue) {\n    U[0] = bitsValue;\n    return F[0];\n  }\n  function erf(x) {\n    const ax = Math.abs(x);\n    if (ax < 2.5) {\n      let term = ax;\n      let sum = ax;\n      for (let n = 1; n < 100 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {\n        term *= -ax * ax / n;\n        sum += term / (2 * n + 1);\n      }\n      return Math.sign(x) * 2 * sum / Math.sqrt(Math.PI);\n    }\n    let f = ax;\n    for (let n = 60; n >= 1; n--) f = ax + n / 2 / f;\n    const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;\n    return Math.sign(x) * (1 - erfc);\n  }\n  function epilogue(p, x, bias, r) {\n    let v = x + bias;\n    if (p.act === "gelu") v = 0.5 * v * (1 + erf(v / Math.SQRT2));\n    else if (p.act === "relu") v = Math.max(v, 0);\n    return v + r;\n  }\n  function bAt(op, shape, args, bi, kk, j) {\n    const [, , k, n] = bmkn(op, shape);\n    if (op === "matmul_q4") {\n      const word = args[1][j * (k / 8) + (kk >>> 3)];\n      const q = word >>> 4 * (kk & 7) & 15;\n      return (q - 8) * f32(args[2][j * (k / 32) + (kk >>> 5)]);\n    }\n    return f32(args[1][bi * k * n + kk * n + j]);\n  }\n  var Scales = class {\n    constructor(op, shape, args) {\n      this.op = op;\n      this.shape = shape;\n      this.args = args;\n      const [b, m, k, n] = bmkn(op, shape);\n      this.m = m;\n      this.n = n;\n      this.parsed = parseOp(op);\n      this.biasArg = this.parsed.bias ? 2 : -1;\n      this.residualArg = this.parsed.residual ? 2 + (this.parsed.bias ? 1 : 0) : -1;\n      this.rows = new Float64Array(b * m);\n      this.cols = new Float64Array(b * n);\n      const a = new Float32Array(args[0].buffer, args[0].byteOffset, args[0].length);\n      for (let r = 0; r < b * m; r++) {\n        let s = 0;\n        for (let kk = 0; kk < k; kk++) s += a[r * k + kk] * a[r * k + kk];\n        this.rows[r] = Math.sqrt(s);\n      }\n      if (op === "matmul_q4") {\n        for (let j = 0; j < n; j++) {\n          let s = 0;\n          for (let kk = 0; kk < k; kk++) {\n            const v = bAt(op, shape, args, 0, kk, j);\n            s += v * v;\n          }\n          this.cols[j] = Math.sqrt(s);\n        }\n        return;\n      }\n      const bv = new Float32Array(args[1].buffer, args[1].byteOffset, args[1].length);\n      for (let bi = 0; bi < b; bi++) {\n        const cols = this.cols.subarray(bi * n, (bi + 1) * n);\n        for (let kk = 0; kk < k; kk++) {\n          const row = (bi * k + kk) * n;\n          for (let j = 0; j < n; j++) cols[j] += bv[row + j] * bv[row + j];\n        }\n        for (let j = 0; j < n; j++) cols[j] = Math.sqrt(cols[j]);\n      }\n    }\n    op;\n    shape;\n    args;\n    rows;\n    cols;\n    m;\n    n;\n    parsed;\n    /** Argument numbers of the epilogue\'s bias and R (ABI order A, B, bias, R, C). */\n    biasArg;\n    residualArg;\n    /** The scale of flat output index `p`. */\n    at(p) {\n      const m = this.m, n = this.n;\n      const bi = Math.floor(p / (m * n));\n      const i = Math.floor(p / n) % m;\n      const j = p % n;\n      const [bv, rv] = this.epilogueTerms(p);\n      return Math.max(this.rows[bi * m + i] * this.cols[bi * n + j] + Math.abs(bv) + Math.abs(rv), Number.MIN_VALUE);\n    }\n    /** The bias and residual values that output `p` adds (0 where the op has none). */\n    epilogueTerms(p) {\n      const bv = this.biasArg >= 0 ? f32(this.args[this.biasArg][p % this.n]) : 0;\n      const rv = this.residualArg >= 0 ? f32(this.args[this.residualArg][p]) : 0;\n      return [bv, rv];\n    }\n    /** The f64 reference of flat output index `p`, in O(K). */\n    reference(p) {\n      const [, m, k, n] = bmkn(this.op, this.shape);\n      const bi = Math.floor(p / (m * n));\n      const i = Math.floor(p / n) % m;\n      const j = p % n;\n      const a = this.args[0];\n      let acc = 0;\n      for (let kk = 0; kk < k; kk++) acc += f32(a[(bi * m + i) * k + kk]) * bAt(this.op, this.shape, this.args, bi, kk, j);\n      if (this.biasArg < 0 && this.residualArg < 0 && this.parsed.act === "none") return acc;\n      const [bv, rv] = this.epilogueTerms(p);\n      return epilogue(this.parsed, acc, bv, rv);\n    }\n  };\n  function compareOutputs(scales, got, want, tolerance) {\n    let maxErr = 0, worst = 0;\n    for (let p = 0; p < got.length; p++) {\n      const g = got[p], w = want[p];\n      const err = Number.isFinite(g) && Number.isFinite(w) ? Math.abs(g - w) / scales.at(p) : Infinity;\n      if (err > maxErr || err === Infinity && maxErr !== Infinity) {\n        maxErr = err;\n        worst = p;\n      }\n    }\n    return { ok: maxErr <= tolerance, maxErr, worst };\n  }\n  function checkPositions(scales, got, positions) {\n    let maxErr = 0, worst = 0;\n    for (const p of positions) {\n      const g = got[p];\n      const err = Number.isFinite(g) ? Math.abs(g - scales.reference(p)) / scales.at(p) : Infinity;\n      if (err > maxErr || err === Infinity && maxErr !== Infinity) {\n        maxErr = err;\n        worst = p;\n      }\n    }\n    return { ok: maxErr <= TOLERANCE, maxErr, worst };\n  }\n  function defaultPositions(len, count = 8) {\n    const out = /* @__PURE__ */ new Set([0, len - 1]);\n    for (let i = 1; out.size < Math.min(count, len); i++) out.add(Math.floor(i * 0.618033988749895 * len % len));\n    return [...out].sort((a, b) => a - b);\n  }\n\n  // src/rng.ts\n  var POISON = 2143346349;\n  function mul64(out, hi, lo, ch, cl) {\n    const a0 = lo & 65535, a1 = lo >>> 16, b0 = cl & 65535, b1 = cl >>> 16;\n    const c1 = a1 * b0, c2 = a0 * b1;\n    const low = a0 * b0 + ((c1 & 65535) + (c2 & 65535)) * 65536;\n    const l = low >>> 0;\n    out[1] = l;\n    out[0] = a1 * b1 + (c1 >>> 16) + (c2 >>> 16) + (low - l) / 4294967296 + Math.imul(hi, cl) + Math.imul(lo, ch);\n  }\n  var SplitMix64 = class {\n    // [state hi, state lo, last draw hi, last draw lo]\n    s = new Uint32Array(4);\n    m = new Uint32Array(2);\n    constructor(seed) {\n      const x = BigInt.asUintN(64, seed) ^ 0x9e3779b97f4a7c15n;\n      this.s[0] = Number(x >> 32n);\n      this.s[1] = Number(x & 0xffffffffn);\n    }\n    /** High 32 bits of the last draw. */\n    get outHi() {\n      return this.s[2];\n    }\n    /** Low 32 bits of the last draw. */\n    get outLo() {\n      return this.s[3];\n    }\n    /** Draws the next 64 bits into `outHi`/`outLo`. */\n    next() {\n      const s = this.s, m = this.m;\n      const lo = s[1] + 2135587861;\n      s[0] = s[0] + 2654435769 + (lo > 4294967295 ? 1 : 0);\n      s[1] = lo;\n      let h = s[0], l = s[1];\n      mul64(m, (h ^ h >>> 30) >>> 0, (l ^ (l >>> 30 | h << 2)) >>> 0, 3210233709, 484763065);\n      h = m[0];\n      l = m[1];\n      mul64(m, (h ^ h >>> 27) >>> 0, (l ^ (l >>> 27 | h << 5)) >>> 0, 2496678331, 321982955);\n      h = m[0];\n      l = m[1];\n      s[2] = h ^ h >>> 31;\n      s[3] = l ^ (l >>> 31 | h << 1);\n    }\n    /** The 64-bit state, for the Wasm filler to go on from. */\n    get state() {\n      return BigInt(this.s[0]) << 32n | BigInt(this.s[1]);\n    }\n    set state(x) {\n      this.s[0] = Number(BigInt.asUintN(64, x) >> 32n);\n      this.s[1] = Number(x & 0xffffffffn);\n    }\n    /** Full 64-bit draw as a BigInt (for tests). */\n    nextBig() {\n      this.next();\n      return BigInt(this.outHi) << 32n | BigInt(this.outLo);\n    }\n  };\n  function nonzero(hi) {\n    const x = 2 * (hi >>> 8) / 16777216 - 1;\n    return Math.abs(x) < 1 / 64 ? 0.5 : x;\n  }\n  var TENTH = Math.fround(0.1);\n  var HUNDREDTH = Math.fround(0.01);\n  var CHUNK_WORDS = 1 << 15;\n  function sleb(v) {\n    const out = [];\n    for (; ; ) {\n      const b = Number(v & 0x7fn);\n      v >>= 7n;\n      const last = v === 0n && !(b & 64) || v === -1n && (b & 64) !== 0;\n      out.push(last ? b : b | 128);\n      if (last) return out;\n    }\n  }\n  function f64(x) {\n    const d = new DataView(new ArrayBuffer(8));\n    d.setFloat64(0, x, true);\n    return [...new Uint8Array(d.buffer)];\n  }\n  function fillerBytes() {\n    const i64 = (v) => [66, ...sleb(BigInt.asIntN(64, v))];\n    const get = (i) => [32, i], set = (i) => [33, i], tee = (i) => [34, i];\n    const body = [\n      2,\n      64,\n      3,\n      64,\n      ...get(1),\n      ...get(2),\n      79,\n      13,\n      1,\n      // p >= end: out\n      ...get(0),\n      ...i64(0x9e3779b97f4a7c15n),\n      124,\n      ...tee(0),\n      ...get(0),\n      ...i64(30n),\n      136,\n      133,\n      ...i64(0xbf58476d1ce4e5b9n),\n      126,\n      ...tee(4),\n      ...get(4),\n      ...i64(27n),\n      136,\n      133,\n      ...i64(0x94d049bb133111ebn),\n      126,\n      ...tee(4),\n      ...get(4),\n      ...i64(31n),\n      136,\n      133,\n      ...set(4),\n      ...get(3),\n      69,\n      4,\n      64,\n      ...get(1),\n      ...get(4),\n      167,\n      54,\n      2,\n      0,\n      // i32.store of the low word\n      5,\n      ...get(4),\n      ...i64(32n),\n      136,\n      167,\n      ...set(5),\n      ...get(5),\n      65,\n      8,\n      118,\n      184,\n      68,\n      ...f64(2),\n      162,\n      68,\n      ...f64(16777216),\n      163,\n      68,\n      ...f64(1),\n      161,\n      ...set(6),\n      ...get(6),\n      153,\n      68,\n      ...f64(1 / 64),\n      99,\n      4,\n      64,\n      68,\n      ...f64(0.5),\n      ...set(6),\n      11,\n      ...get(3),\n      65,\n      2,\n      70,\n      4,\n      64,\n      ...get(6),\n      153,\n      68,\n      ...f64(TENTH),\n      162,\n      182,\n      187,\n      68,\n      ...f64(HUNDREDTH),\n      160,\n      ...set(6),\n      11,\n      ...get(1),\n      ...get(6),\n      182,\n      56,\n      2,\n      0,\n      // f32.store\n      11,\n      ...get(1),\n      65,\n      4,\n      106,\n      ...set(1),\n      12,\n      0,\n      11,\n      11,\n      ...get(0),\n      11\n    ];\n    const func = [3, 1, 126, 1, 127, 1, 124, ...body];\n    const section = (id, content) => [id, ...uleb(content.length), ...content];\n    const name = (s) => [s.length, ...[...s].map((c) => c.charCodeAt(0))];\n    return new Uint8Array([\n      0,\n      97,\n      115,\n      109,\n      1,\n      0,\n      0,\n      0,\n      ...section(1, [1, 96, 4, 126, 127, 127, 127, 1, 126]),\n      ...section(3, [1, 0]),\n      ...section(5, [1, 0, CHUNK_WORDS * 4 / 65536]),\n      ...section(7, [2, ...name("fill"), 0, 0, ...name("mem"), 2, 0]),\n      ...section(10, [1, ...uleb(func.length), ...func])\n    ]);\n  }\n  function uleb(n) {\n    const out = [];\n    do {\n      const b = n & 127;\n      n >>>= 7;\n      out.push(n ? b | 128 : b);\n    } while (n);\n    return out;\n  }\n  var filler;\n  function wasmFiller() {\n    if (filler !== void 0) return filler;\n    try {\n      const inst = new WebAssembly.Instance(new WebAssembly.Module(fillerBytes()));\n      filler = inst.exports;\n      filler.fill(0n, 0, 0, 0);\n    } catch {\n      filler = null;\n    }\n    return filler;\n  }\n  var InputGen = class {\n    /** `specs` are all arguments; the last (the output) is not generated. `useWasm`: false forces the JS path. */\n    constructor(specs, seed, useWasm = true) {\n      this.specs = specs;\n      this.useWasm = useWasm;\n      this.rng = new SplitMix64(seed);\n      this.args = specs.slice(0, -1).map((s) => new Uint32Array(s.elems));\n    }\n    specs;\n    useWasm;\n    rng;\n    arg = 0;\n    pos = 0;\n    args;\n    get done() {\n      return this.arg >= this.args.length;\n    }\n    /** Generates up to `n` more words; returns true when all are there. */\n    fill(n) {\n      const rng = this.rng;\n      while (n > 0 && !this.done) {\n        const out = this.args[this.arg];\n        const s = this.specs[this.arg];\n        const w = this.useWasm ? wasmFiller() : null;\n        const end = Math.min(out.length, this.pos + Math.min(n, w ? CHUNK_WORDS : n));\n        n -= end - this.pos;\n        if (w) {\n          const mode = s.dtype === "u32" ? 0 : s.name === "S" ? 2 : 1;\n          rng.state = w.fill(rng.state, 0, (end - this.pos) * 4, mode);\n          out.set(new Uint32Array(w.mem.buffer, 0, end - this.pos), this.pos);\n        } else if (s.dtype === "u32") {\n          for (let i = this.pos; i < end; i++) {\n            rng.next();\n            out[i] = rng.outLo;\n          }\n        } else {\n          const f = new Float32Array(out.buffer, out.byteOffset, out.length);\n          if (s.name === "S") {\n            for (let i = this.pos; i < end; i++) {\n              rng.next();\n              f[i] = Math.fround(Math.abs(nonzero(rng.outHi)) * TENTH) + HUNDREDTH;\n            }\n          } else {\n            for (let i = this.pos; i < end; i++) {\n              rng.next();\n              f[i] = nonzero(rng.outHi);\n            }\n          }\n        }\n        this.pos = end;\n        if (end === out.length) {\n          this.arg++;\n          this.pos = 0;\n        }\n      }\n      return this.done;\n    }\n  };\n\n  // src/stats.ts\n  function median(xs) {\n    const s = [...xs].sort((a, b) => a - b);\n    const n = s.length;\n    if (n === 0) return NaN;\n    return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;\n  }\n  function relNoise(xs) {\n    const m = median(xs);\n    if (!(m > 0)) return Infinity;\n    return 1.4826 * median(xs.map((x) => Math.abs(x - m))) / m;\n  }\n  function fasterBeyondNoise(cand, cur, floor = 0.01) {\n    const threshold = Math.max(floor, 2 * Math.hypot(relNoise(cand), relNoise(cur)));\n    return median(cand) < median(cur) * (1 - threshold);\n  }\n\n  // src/tuner.ts\n  var WARM_MAX_PAIRS = 15;\n  var WARM_MAX_MS = 1500;\n  var WARM_MIN_MS = 8;\n  var MAX_RESTARTS = 2;\n  var NEW_LOW = 0.9;\n  var REJECT_RATIO = 1.25;\n  var REJECT_PAIRS = 3;\n  var FUTILE_PAIRS = 5;\n  var STOP_AFTER_MS = 30;\n  function noNewLow(xs) {\n    if (xs.length < 2) return false;\n    let min = Infinity;\n    for (let i = 0; i < xs.length - 1; i++) min = Math.min(min, xs[i]);\n    return xs[xs.length - 1] >= NEW_LOW * min;\n  }\n  function warmedUp(cur, cand, sinceFirstRunMs) {\n    return cur.length >= 2 && cand.length >= 2 && sinceFirstRunMs >= WARM_MIN_MS && noNewLow(cur) && noNewLow(cand);\n  }\n  function clearlySlower(cur, cand) {\n    const n = Math.min(cur.length, cand.length);\n    if (n < REJECT_PAIRS || !noNewLow(cand)) return false;\n    for (let i = n - REJECT_PAIRS; i < n; i++) if (!(cand[i] >= REJECT_RATIO * cur[i])) return false;\n    return true;\n  }\n  function futile(cur, cand) {\n    const n = Math.min(cur.length, cand.length);\n    if (n < FUTILE_PAIRS || !noNewLow(cand)) return false;\n    const ratios = [];\n    for (let i = 0; i < n; i++) ratios.push(cand[i] / cur[i]);\n    return median(ratios) >= 1;\n  }\n  function unitTimes() {\n    return { fill: Infinity, scales: Infinity, checkCur: Infinity, checkCand: Infinity };\n  }\n  function noteUnitTime(times, u, ms) {\n    const prev = times[u];\n    times[u] = Number.isFinite(prev) ? Math.max(ms, 0.9 * prev) : ms;\n  }\n  function failed(c, error) {\n    return {\n      sha256: c.sha256,\n      index: c.index,\n      total: c.total,\n      source: c.source,\n      ticket: c.ticket,\n      ok: false,\n      error,\n      median_us: 0,\n      current_us: 0,\n      noise: 0,\n      runs: 0\n    };\n  }\n  var Evaluation = class {\n    constructor(t, backend, cand, fetched) {\n      this.t = t;\n      this.backend = backend;\n      this.cand = cand;\n      this.fetched = fetched;\n      this.gen = new InputGen(t.specs, cand.seed);\n      this.impl = fetched.impl;\n      this.loadError = fetched.error;\n    }\n    t;\n    backend;\n    cand;\n    fetched;\n    phase = "load";\n    result = null;\n    gen;\n    scales = null;\n    curOut = null;\n    reps = 1;\n    perCall = 0;\n    turn = 0;\n    warmMs = 0;\n    firstRun = 0;\n    warm = { cur: [], cand: [] };\n    timed = { cur: [], cand: [] };\n    samples;\n    rejectedEarly = false;\n    restarts = 0;\n    t0 = performance.now();\n    ends = {};\n    busyMs = 0;\n    slices = 0;\n    busyBy = {};\n    longest = 0;\n    longestPhase = "";\n    impl;\n    loading = null;\n    loadError;\n    /**\n     * Compiles the candidate in the background while its inputs are made. It\n     * starts only when this candidate\'s turn comes, never while another is\n     * being timed: a compile (V8\'s background tiers, a GPU driver\'s pipeline\n     * build) competes for the same cores and would inflate the timings.\n     */\n    startLoad() {\n      this.loading = this.backend.load(this.fetched.bytes, this.cand.meta).then(\n        (impl) => {\n          this.impl = impl;\n        },\n        (e) => {\n          this.loadError = `load: ${e instanceof Error ? e.message : e}`;\n        }\n      );\n      this.loading.then(() => {\n        this.loading = null;\n        this.ends.load = performance.now() - this.t0;\n      });\n    }\n    /** Records a failure; `us` is the time of the one run it had, if it ran. */\n    fail(error, us) {\n      this.result = us === void 0 ? failed(this.cand, error) : { ...failed(this.cand, error), median_us: Math.max(us, 1e-3), runs: 1 };\n      this.phase = "done";\n    }\n    /**\n     * Does what fits before `deadline`. Unless `strict`, at least one unit of\n     * work is done even when it alone overruns; a strict call starts a unit\n     * only when its estimated time fits.\n     */\n    async step(bench, deadline, strict = false) {\n      const t = performance.now();\n      const from = this.phase;\n      try {\n        await this.work(bench, deadline, strict);\n      } finally {\n        const now = performance.now();\n        this.busyMs += now - t;\n        this.slices++;\n        this.busyBy[from] = (this.busyBy[from] ?? 0) + (now - t);\n        if (now - t > this.longest) {\n          this.longest = now - t;\n          this.longestPhase = from;\n        }\n        this.markPhases(from, now);\n      }\n    }\n    /** Notes the end time of the phases left since `from`. */\n    markPhases(from, now) {\n      const order = ["load", "inputs", "check", "warm", "time", "done"];\n      for (let i = order.indexOf(from); i < order.indexOf(this.phase); i++) {\n        const p = order[i];\n        if (p !== "time" && p !== "done" && this.ends[p] === void 0) this.ends[p] = now - this.t0;\n      }\n      if (this.result && !this.result.trace) {\n        const e = this.ends, at = now - this.t0;\n        this.result.trace = {\n          load_ms: e.load ?? at,\n          inputs_ms: e.inputs ?? at,\n          check_ms: e.check ?? at,\n          warm_ms: e.warm ?? at,\n          done_ms: at,\n          busy_ms: this.busyMs,\n          slices: this.slices,\n          warm_pairs: this.warm.cur.length,\n          timed_pairs: this.timed.cur.length,\n          busy_by_phase: this.busyBy,\n          longest_ms: this.longest,\n          longest_phase: this.longestPhase,\n          warm_cur: this.warm.cur,\n          warm_cand: this.warm.cand\n        };\n      }\n    }\n    /** Runs one unit of work, timing it for the tuner\'s estimates. */\n    async unit(u, f) {\n      const t = performance.now();\n      try {\n        return await f();\n      } finally {\n        this.t.noteUnit(u, performance.now() - t);\n      }\n    }\n    async work(bench, deadline, strict) {\n      if (this.phase === "load") {\n        if (!this.impl && !this.fetched.bytes) return this.fail(this.loadError ?? "not fetched");\n        if (!this.impl && !this.loading) this.startLoad();\n        this.phase = "inputs";\n      }\n      if (this.phase === "done") return;\n      const cur = this.t.current;\n      let worked = strict;\n      const fits = (est) => !worked || performance.now() + est <= deadline;\n      while (this.phase !== "done") {\n        if (this.phase === "inputs") {\n          if (!this.gen.done) {\n            if (!fits(this.t.unitMs.fill)) return;\n            await this.unit("fill", () => this.gen.fill(1 << 15));\n            worked = true;\n            continue;\n          }\n          if (!fits(this.t.unitMs.scales)) return;\n          await this.unit("scales", async () => {\n            await bench.setInputs(this.gen.args);\n            this.scales = new Scales(this.t.op, this.t.shape, this.gen.args);\n          });\n          worked = true;\n          this.phase = "check";\n          continue;\n        }\n        if (this.phase === "check") {\n          if (!this.curOut) {\n            if (!fits(this.t.unitMs.checkCur)) return;\n            worked = true;\n            const t0 = performance.now();\n            try {\n              this.curOut = await this.unit("checkCur", () => bench.runOnce(cur));\n            } catch (e) {\n              this.curOut = new Float32Array(0);\n              this.t.currentBroken = true;\n              this.t.note(`the kernel in use failed to run: ${e}`);\n            }\n            this.perCall = Math.max(performance.now() - t0, 1e-4);\n            continue;\n          }\n          if (this.loading) return;\n          if (!this.impl) return this.fail(this.loadError ?? "load failed");\n          if (!fits(Math.max(this.t.unitMs.checkCand, this.perCall))) return;\n          worked = true;\n          const t1 = performance.now();\n          this.firstRun = t1;\n          let candOut;\n          try {\n            candOut = await this.unit("checkCand", () => bench.runOnce(this.impl));\n          } catch (e) {\n            return this.fail(`run: ${e instanceof Error ? e.message : e}`, (performance.now() - t1) * 1e3);\n          }\n          const t2 = performance.now();\n          const curOut = this.curOut;\n          const positions = this.cand.check?.length ? this.cand.check : defaultPositions(candOut.length);\n          const ref = checkPositions(this.scales, candOut, positions);\n          if (!ref.ok) return this.fail(`output ${ref.worst} is off the reference by ${ref.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1e3);\n          if (!this.t.currentBroken) {\n            const curRef = checkPositions(this.scales, curOut, positions);\n            if (!curRef.ok) {\n              this.t.currentBroken = true;\n              this.t.note(`the kernel in use is off the reference at output ${curRef.worst} (${curRef.maxErr.toExponential(2)})`);\n            } else {\n              const cmp = compareOutputs(this.scales, candOut, curOut, 2 * TOLERANCE);\n              if (!cmp.ok) return this.fail(`output ${cmp.worst} differs from the kernel in use by ${cmp.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1e3);\n            }\n          }\n          if (this.cand.check) this.samples = this.cand.check.map((p) => candOut[p]);\n          this.curOut = null;\n          this.perCall = Math.max(this.perCall, t2 - t1, 1e-4);\n          this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));\n          this.phase = "warm";\n          continue;\n        }\n        const impl = this.impl;\n        if (!fits(this.reps * this.perCall)) return;\n        worked = true;\n        const curTurn = this.turn % 4 === 0 || this.turn % 4 === 3;\n        const ms = await bench.time(curTurn ? cur : impl, this.reps);\n        const per = ms / this.reps;\n        const into = this.phase === "warm" ? this.warm : this.timed;\n        (curTurn ? into.cur : into.cand).push(per);\n        this.turn++;\n        if (this.turn % 2) continue;\n        if (this.phase === "warm") {\n          this.warmMs += 2 * ms;\n          this.perCall = Math.max(into.cur.at(-1), into.cand.at(-1), 1e-4);\n          this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));\n          const enough = this.t.warmPairs !== void 0 ? into.cur.length >= this.t.warmPairs : warmedUp(into.cur, into.cand, performance.now() - this.firstRun) || into.cur.length >= WARM_MAX_PAIRS || this.warmMs > WARM_MAX_MS;\n          if (enough) this.phase = "time";\n          continue;\n        }\n        const t = this.timed;\n        if (this.t.warmPairs === void 0 && t.cand.length >= 2 && !noNewLow(t.cand) && this.restarts < MAX_RESTARTS) {\n          this.restarts++;\n          this.warm.cur.push(...t.cur);\n          this.warm.cand.push(...t.cand);\n          t.cur.length = 0;\n          t.cand.length = 0;\n          this.phase = "warm";\n          continue;\n        }\n        const early = this.t.earlyReject && t.cur.length < this.t.timedPairs && performance.now() - this.firstRun >= this.t.stopAfterMs && (clearlySlower(t.cur, t.cand) || futile(t.cur, t.cand));\n        if (early || t.cur.length >= this.t.timedPairs) {\n          this.rejectedEarly = early;\n          const c = this.cand;\n          this.result = {\n            sha256: c.sha256,\n            index: c.index,\n            total: c.total,\n            source: c.source,\n            ticket: c.ticket,\n            ok: true,\n            median_us: median(t.cand) * 1e3,\n            current_us: median(t.cur) * 1e3,\n            noise: relNoise(t.cand),\n            runs: this.reps * t.cand.length,\n            samples: this.samples,\n            ...early ? { rejected_early: true } : {}\n          };\n          this.phase = "done";\n        }\n      }\n    }\n    /** Whether the candidate beat the kernel in use beyond the noise of both. */\n    beatsCurrent() {\n      return !this.rejectedEarly && this.timed.cand.length > 0 && fasterBeyondNoise(this.timed.cand, this.timed.cur);\n    }\n  };\n\n  // src/timer.ts\n  var cached = 0;\n  function timerResolutionMs() {\n    if (cached) return cached;\n    let best = Infinity;\n    for (let trial = 0; trial < 5; trial++) {\n      const t0 = performance.now();\n      let t1 = t0;\n      const start = Date.now();\n      while (t1 === t0 && Date.now() - start < 50) t1 = performance.now();\n      if (t1 > t0) best = Math.min(best, t1 - t0);\n    }\n    cached = Number.isFinite(best) ? best : 1;\n    return cached;\n  }\n\n  // src/wasm.ts\n  var PAGE = 65536;\n  function align(n, a) {\n    return Math.ceil(n / a) * a;\n  }\n  function ensureBytes(memory, bytes) {\n    const have = memory.buffer.byteLength;\n    if (have < bytes) memory.grow(Math.ceil((bytes - have) / PAGE));\n  }\n  var WasmBench = class {\n    resolutionMs = timerResolutionMs();\n    // 1 % rounding, and never under 0.5 ms (call overhead and clock reads).\n    minSampleMs = Math.max(0.5, 100 * this.resolutionMs);\n    memory;\n    offsets = [];\n    scratch;\n    outElems;\n    constructor(specs, meta) {\n      let end = 0;\n      for (const s of specs) {\n        this.offsets.push(end);\n        end = align(end + s.elems * 4, 64);\n      }\n      this.scratch = end;\n      this.outElems = specs[specs.length - 1].elems;\n      this.memory = new WebAssembly.Memory({ initial: Math.max(1, meta.memory_pages_min ?? 0, Math.ceil(end / PAGE)) });\n    }\n    async setInputs(args) {\n      for (let i = 0; i < args.length; i++) new Uint32Array(this.memory.buffer, this.offsets[i], args[i].length).set(args[i]);\n    }\n    async prepare(impl) {\n      if (impl.benchFn && impl.benchMemory === this.memory) return impl.benchFn;\n      ensureBytes(this.memory, Math.max((impl.meta.memory_pages_min ?? 0) * PAGE, this.scratch + (impl.meta.scratch_bytes ?? 0)));\n      const inst = await WebAssembly.instantiate(impl.module, { env: { memory: this.memory } });\n      const fn = inst.exports[impl.meta.entry || "kernel"];\n      if (typeof fn !== "function") throw new Error(`kernel ${impl.sha256} exports no \\`${impl.meta.entry}\\``);\n      impl.benchFn = fn;\n      impl.benchMemory = this.memory;\n      return fn;\n    }\n    argsFor(impl) {\n      return impl.meta.scratch_bytes ? [...this.offsets, this.scratch] : this.offsets;\n    }\n    async runOnce(impl) {\n      const fn = await this.prepare(impl);\n      const out = this.offsets[this.offsets.length - 1];\n      new Uint32Array(this.memory.buffer, out, this.outElems).fill(POISON);\n      fn(...this.argsFor(impl));\n      return new Float32Array(this.memory.buffer.slice(out, out + this.outElems * 4));\n    }\n    async time(impl, reps) {\n      const fn = await this.prepare(impl);\n      const o = this.argsFor(impl);\n      let t0 = 0, t1 = 0;\n      switch (o.length) {\n        case 3: {\n          const [a, b, c] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c);\n          t1 = performance.now();\n          break;\n        }\n        case 4: {\n          const [a, b, c, d] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c, d);\n          t1 = performance.now();\n          break;\n        }\n        case 5: {\n          const [a, b, c, d, e] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c, d, e);\n          t1 = performance.now();\n          break;\n        }\n        default:\n          throw new Error(`unexpected kernel arity ${o.length}`);\n      }\n      return t1 - t0;\n    }\n    dispose() {\n    }\n  };\n  var WasmBackend = class {\n    target = "wasm";\n    async load(bytes, meta) {\n      if (typeof bytes === "string") throw new Error("a Wasm kernel must be bytes");\n      const module = await WebAssembly.compile(bytes);\n      return { sha256: meta.sha256, meta, module, bytes };\n    }\n    bench(specs, meta) {\n      return new WasmBench(specs, meta);\n    }\n  };\n\n  // src/eval-worker.ts\n  var BenchSide = class {\n    constructor(backend, implOf) {\n      this.backend = backend;\n      this.implOf = implOf;\n    }\n    backend;\n    implOf;\n    ops = /* @__PURE__ */ new Map();\n    notes = [];\n    context(r) {\n      let o = this.ops.get(r.key);\n      if (o) return o;\n      if (!r.current) throw new Error(`op ${r.key}: its kernel in use was never sent`);\n      const specs = argSpecs(r.op, r.shape);\n      const unitMs = unitTimes();\n      const notes = () => this.notes;\n      const ctx = {\n        specs,\n        op: r.op,\n        shape: r.shape,\n        current: this.implOf(r.current),\n        currentBroken: false,\n        unitMs,\n        noteUnit(u, ms) {\n          noteUnitTime(unitMs, u, ms);\n        },\n        note(s) {\n          notes().push(s);\n        },\n        timedPairs: r.settings.timedPairs,\n        warmPairs: r.settings.warmPairs,\n        earlyReject: r.settings.earlyReject,\n        stopAfterMs: r.settings.stopAfterMs ?? STOP_AFTER_MS\n      };\n      o = { ctx, bench: this.backend.bench(specs, ctx.current.meta) };\n      this.ops.set(r.key, o);\n      return o;\n    }\n    async evaluate(r) {\n      const { ctx, bench } = this.context(r);\n      this.notes = [];\n      const cand = r.impl.sha256 === ctx.current.sha256 ? ctx.current : this.implOf(r.impl);\n      const ev = new Evaluation(ctx, this.backend, r.cand, { cand: r.cand, impl: cand });\n      while (ev.phase !== "done") await ev.step(bench, Infinity, false);\n      const result = ev.result;\n      const beats = result.ok && cand.sha256 !== ctx.current.sha256 && (ctx.currentBroken || ev.beatsCurrent());\n      if (beats) {\n        ctx.current = cand;\n        ctx.currentBroken = false;\n      }\n      return { result, beats, notes: this.notes };\n    }\n  };\n  var scope = globalThis;\n  if (typeof scope.WorkerGlobalScope !== "undefined") {\n    const side = new BenchSide(new WasmBackend(), (k) => ({ sha256: k.sha256, meta: k.meta, module: k.module, bytes: new ArrayBuffer(0) }));\n    let chain = Promise.resolve();\n    scope.onmessage = (e) => {\n      const r = e.data;\n      chain = chain.then(async () => {\n        let reply;\n        try {\n          reply = { id: r.id, ok: true, answer: await side.evaluate(r) };\n        } catch (err) {\n          reply = { id: r.id, ok: false, error: err instanceof Error ? err.message : String(err) };\n        }\n        scope.postMessage(reply);\n      });\n    };\n  }\n})();\n'], { type: "text/javascript" }));
    this.worker = new Worker(url);
    URL.revokeObjectURL(url);
    this.worker.onmessage = (e) => {
      const w = this.waiting.get(e.data.id);
      if (!w) return;
      this.waiting.delete(e.data.id);
      if (e.data.ok) w.resolve(e.data.answer);
      else w.reject(new Error(e.data.error));
    };
    this.worker.onerror = (e) => {
      e.preventDefault();
      this.failAll(new Error(`bench worker: ${e.message}`));
    };
  }
  failAll(e) {
    for (const w of this.waiting.values()) w.reject(e);
    this.waiting.clear();
  }
  evaluate(t, cand, impl) {
    const kernel = (k) => ({ sha256: k.sha256, meta: k.meta, module: k.module });
    const req2 = {
      id: this.next++,
      key: t.key,
      op: t.op,
      shape: t.shape,
      cand,
      impl: kernel(impl),
      settings: { timedPairs: t.timedPairs, warmPairs: t.warmPairs, earlyReject: t.earlyReject, stopAfterMs: t.stopAfterMs }
    };
    if (!this.known.has(t.key)) {
      req2.current = kernel(t.current);
      this.known.add(t.key);
    }
    return new Promise((resolve, reject) => {
      this.waiting.set(req2.id, { resolve, reject });
      this.worker.postMessage(req2);
    });
  }
  close() {
    this.worker.terminate();
    this.failAll(new Error("bench worker closed"));
  }
};

// src/webgpu.ts
var GpuLayouts = class {
  constructor(device) {
    this.device = device;
  }
  device;
  bgl = /* @__PURE__ */ new Map();
  pl = /* @__PURE__ */ new Map();
  bindGroupLayout(nargs) {
    let l = this.bgl.get(nargs);
    if (!l) {
      l = this.device.createBindGroupLayout({
        label: `webtune ${nargs} args`,
        entries: Array.from({ length: nargs }, (_, i) => ({
          binding: i,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: i === nargs - 1 ? "storage" : "read-only-storage" }
        }))
      });
      this.bgl.set(nargs, l);
    }
    return l;
  }
  pipelineLayout(nargs) {
    let l = this.pl.get(nargs);
    if (!l) {
      l = this.device.createPipelineLayout({ bindGroupLayouts: [this.bindGroupLayout(nargs)] });
      this.pl.set(nargs, l);
    }
    return l;
  }
};
function dispatchOf(meta) {
  const d = meta.dispatch ?? [1, 1, 1];
  return [d[0] ?? 1, d[1] ?? 1, d[2] ?? 1];
}
async function scoped(device, f) {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  let value;
  try {
    value = await f();
  } finally {
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    const e = validation ?? oom;
    if (e) throw new Error(e.message);
  }
  return value;
}
var GpuBench = class {
  constructor(device, layouts, specs, timerMs) {
    this.device = device;
    this.specs = specs;
    const n = specs.length;
    this.buffers = specs.map(
      (s, i) => device.createBuffer({
        label: `webtune bench ${s.name}`,
        size: Math.max(16, Math.ceil(s.elems * 4 / 16) * 16),
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | (i === n - 1 ? GPUBufferUsage.COPY_SRC : 0)
      })
    );
    this.outBytes = specs[n - 1].elems * 4;
    this.staging = device.createBuffer({ size: Math.ceil(this.outBytes / 4) * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.bindGroup = device.createBindGroup({
      layout: layouts.bindGroupLayout(n),
      entries: this.buffers.map((buffer, binding) => ({ binding, resource: { buffer } }))
    });
    if (device.features.has("timestamp-query")) {
      this.query = {
        set: device.createQuerySet({ type: "timestamp", count: 2 }),
        resolve: device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }),
        read: device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })
      };
    }
    this.resolutionMs = this.query ? 0.1 : timerMs;
    this.minSampleMs = Math.max(4, 50 * this.resolutionMs);
  }
  device;
  specs;
  resolutionMs;
  minSampleMs;
  buffers;
  staging;
  bindGroup;
  query = null;
  outBytes;
  /** Whether timings come from timestamp queries rather than the wall clock. */
  get usesTimestamps() {
    return this.query !== null;
  }
  async setInputs(args) {
    for (let i = 0; i < args.length; i++) this.device.queue.writeBuffer(this.buffers[i], 0, args[i]);
  }
  async runOnce(impl) {
    const out = this.buffers[this.buffers.length - 1];
    return scoped(this.device, async () => {
      this.device.queue.writeBuffer(out, 0, new Uint32Array(this.outBytes / 4).fill(POISON));
      const enc = this.device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(impl.pipeline);
      pass.setBindGroup(0, this.bindGroup);
      pass.dispatchWorkgroups(...impl.dispatch);
      pass.end();
      enc.copyBufferToBuffer(out, 0, this.staging, 0, this.outBytes);
      this.device.queue.submit([enc.finish()]);
      await this.staging.mapAsync(GPUMapMode.READ);
      const copy = new Float32Array(this.staging.getMappedRange().slice(0));
      this.staging.unmap();
      return copy;
    });
  }
  async time(impl, reps) {
    const enc = this.device.createCommandEncoder();
    const q = this.query;
    const pass = enc.beginComputePass(
      q ? { timestampWrites: { querySet: q.set, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {}
    );
    pass.setPipeline(impl.pipeline);
    pass.setBindGroup(0, this.bindGroup);
    const [x, y, z] = impl.dispatch;
    for (let i = 0; i < reps; i++) pass.dispatchWorkgroups(x, y, z);
    pass.end();
    if (q) {
      enc.resolveQuerySet(q.set, 0, 2, q.resolve, 0);
      enc.copyBufferToBuffer(q.resolve, 0, q.read, 0, 16);
    }
    const cb = enc.finish();
    const t0 = performance.now();
    this.device.queue.submit([cb]);
    if (q) {
      await q.read.mapAsync(GPUMapMode.READ);
      const t = new BigInt64Array(q.read.getMappedRange());
      const ns = Number(t[1] - t[0]);
      q.read.unmap();
      if (ns > 0) return ns / 1e6;
      this.query = null;
      return performance.now() - t0;
    }
    await this.device.queue.onSubmittedWorkDone();
    return performance.now() - t0;
  }
  dispose() {
    for (const b of this.buffers) b.destroy();
    this.staging.destroy();
    if (this.query) {
      this.query.set.destroy();
      this.query.resolve.destroy();
      this.query.read.destroy();
    }
  }
};
var GpuBackend = class {
  constructor(device, layouts, timerMs) {
    this.device = device;
    this.layouts = layouts;
    this.timerMs = timerMs;
  }
  device;
  layouts;
  timerMs;
  target = "wgsl";
  async load(code, meta) {
    const text = typeof code === "string" ? code : new TextDecoder().decode(code);
    const need = meta.min_subgroup_size;
    if (need) {
      if (!this.device.features.has("subgroups")) {
        throw new Error(`kernel ${meta.sha256.slice(0, 12)} reduces with subgroup operations; this device has no 'subgroups' feature`);
      }
      const min = this.device.adapterInfo?.subgroupMinSize;
      if (min !== void 0 && min < need) {
        throw new Error(`kernel ${meta.sha256.slice(0, 12)} needs subgroups of at least ${need} invocations; this adapter's may have ${min}`);
      }
    }
    const pipeline = await scoped(this.device, async () => {
      const module = this.device.createShaderModule({ label: `webtune ${meta.sha256.slice(0, 12)}`, code: text });
      const info = await module.getCompilationInfo();
      const errors = info.messages.filter((m) => m.type === "error");
      if (errors.length) throw new Error(`WGSL ${meta.sha256.slice(0, 12)}: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join("; ")}`);
      return this.device.createComputePipelineAsync({
        label: `webtune ${meta.op} ${meta.sha256.slice(0, 12)}`,
        layout: this.layouts.pipelineLayout(meta.args.length),
        compute: { module, entryPoint: meta.entry || "main" }
      });
    });
    return { sha256: meta.sha256, meta, pipeline, dispatch: dispatchOf(meta), bytes: text };
  }
  bench(specs) {
    return new GpuBench(this.device, this.layouts, specs, this.timerMs);
  }
};

// src/webtune.ts
var MAX_OPEN_QUEUES = 4;
var BACKGROUND_SLICE_MS = 4;
var KernelHandle = class {
  constructor(op, shape, impl, source, level) {
    this.op = op;
    this.shape = shape;
    this.impl = impl;
    this.source = source;
    this.level = level;
  }
  op;
  shape;
  impl;
  source;
  level;
  /** Calls since the handle was made (for the tuning order). */
  calls = 0;
  /** How many times the tuner replaced the kernel. */
  swaps = 0;
  /** @internal */
  tuner = null;
  get sha256() {
    return this.impl.sha256;
  }
  get meta() {
    return this.impl.meta;
  }
};
var WasmKernel = class extends KernelHandle {
  /** @internal */
  constructor(op, shape, impl, source, level, binding) {
    super(op, shape, impl, source, level);
    this.binding = binding;
  }
  binding;
  /** Runs the kernel on arguments at these byte offsets of the app's memory, in ABI order. */
  run(...offsets) {
    this.calls++;
    this.binding.call(offsets);
  }
  /** @internal */
  async adopt(impl) {
    await this.binding.bind(impl);
    this.impl = impl;
  }
};
var GpuKernel = class extends KernelHandle {
  /** @internal */
  constructor(op, shape, impl, source, level, device, bindGroupLayout) {
    super(op, shape, impl, source, level);
    this.device = device;
    this.bindGroupLayout = bindGroupLayout;
  }
  device;
  bindGroupLayout;
  /** A bind group over the arguments, in ABI order (inputs, then the output). */
  bindGroup(buffers) {
    if (buffers.length !== this.meta.args.length) {
      throw new Error(`${this.op} takes ${this.meta.args.length} buffers (${this.meta.args.map((a) => a.name).join(", ")}), got ${buffers.length}`);
    }
    return this.device.createBindGroup({
      layout: this.bindGroupLayout,
      entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } }))
    });
  }
  /** Records the kernel into a compute pass: pipeline, bind group 0, dispatch. */
  dispatch(pass, bindGroup) {
    this.calls++;
    pass.setPipeline(this.impl.pipeline);
    pass.setBindGroup(0, bindGroup);
    pass.dispatchWorkgroups(...this.impl.dispatch);
  }
  get pipeline() {
    return this.impl.pipeline;
  }
  get workgroups() {
    return this.impl.dispatch;
  }
  /** @internal */
  async adopt(impl) {
    this.impl = impl;
  }
};
async function sha256Hex(bytes) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  const data = typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes;
  const h = new Uint8Array(await subtle.digest("SHA-256", data));
  return Array.from(h, (b) => b.toString(16).padStart(2, "0")).join("");
}
async function json(res, what) {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text);
}
var Webtune = class _Webtune extends EventTarget {
  server;
  target;
  fingerprint;
  session;
  /** The ρ measurement behind `fingerprint.rho`, when `rho: 'measure'` ran it. */
  rho;
  /** Wasm: the memory kernels run on. */
  memory;
  /** WebGPU: the device kernels run on. */
  device;
  budgetMs;
  /** performance.now() resolution on this page, ms. */
  timerResolutionMs;
  backend;
  layouts;
  cache;
  kernels = /* @__PURE__ */ new Map();
  handles = [];
  opts;
  busy = false;
  announcedDone = false;
  loop = null;
  /** The bench worker, when the `worker` option took effect. */
  remote = null;
  pumping = false;
  closed = false;
  constructor(init) {
    super();
    this.opts = init.opts;
    this.server = init.server;
    this.target = init.opts.target;
    this.fingerprint = init.fingerprint;
    this.session = init.session;
    this.rho = init.rho;
    this.memory = init.memory;
    this.device = init.device;
    this.cache = init.cache;
    this.budgetMs = init.opts.budgetMs ?? 8;
    this.timerResolutionMs = timerResolutionMs();
    if (init.device) {
      this.layouts = new GpuLayouts(init.device);
      this.backend = new GpuBackend(init.device, this.layouts, this.timerResolutionMs);
    } else {
      this.layouts = null;
      this.backend = new WasmBackend();
      if (init.opts.worker && workersAvailable()) this.remote = new WorkerEvaluator();
    }
  }
  /** Fingerprints this browser and opens a session with the server. */
  static async open(opts) {
    if (opts.target !== "wasm" && opts.target !== "webgpu") throw new Error(`target must be 'wasm' or 'webgpu', got ${opts.target}`);
    const server = (opts.server ?? globalThis.location?.origin ?? "").replace(/\/+$/, "");
    let adapter = null;
    let device = null;
    if (opts.target === "webgpu") {
      if (!globalThis.navigator?.gpu) throw new Error("WebGPU is not available in this browser");
      adapter = opts.adapter ?? await navigator.gpu.requestAdapter();
      if (!adapter) throw new Error("no WebGPU adapter");
      const wanted = ["timestamp-query", "subgroups"];
      device = opts.device ?? await adapter.requestDevice({
        requiredFeatures: wanted.filter((f) => adapter.features.has(f))
      });
    }
    let rho = opts.rho;
    let rhoMeasurement = null;
    if (rho === "measure") {
      rhoMeasurement = opts.target === "wasm" ? await measureRho(server, wasmFeatures().relaxedSimd) : null;
      rho = rhoMeasurement?.rho || void 0;
    }
    const fp = await fingerprint(opts.target, adapter, rho);
    const session = await json(
      await fetchRetrying(`${server}/v1/sessions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ fingerprint: fp })
      }),
      "open session"
    );
    const cache = await KernelCache.open(opts.cache ?? true);
    const memory = opts.target === "wasm" ? opts.memory ?? new WebAssembly.Memory({ initial: 1 }) : null;
    return new _Webtune({ opts, server, fingerprint: fp, session, memory, device, cache, rho: rhoMeasurement });
  }
  cacheKey(op, shape) {
    return [this.server, this.session.device_key, op, shape.join(","), this.serverTarget].join("|");
  }
  get serverTarget() {
    return this.target === "wasm" ? "wasm" : "wgsl";
  }
  /** @internal Fetches kernel bytes and checks them against their content address. */
  async fetchKernel(url, target) {
    const res = await fetchRetrying(url.startsWith("http") ? url : `${this.server}${url}`);
    if (!res.ok) throw new Error(`kernel ${url}: HTTP ${res.status}`);
    const bytes = target === "wasm" ? await res.arrayBuffer() : await res.text();
    const want = url.split("/").pop();
    const got = await sha256Hex(bytes);
    if (got && want && /^[0-9a-f]{64}$/.test(want) && got !== want) throw new Error(`kernel ${url}: bytes hash to ${got}`);
    return bytes;
  }
  /**
   * The best kernel for `op` on `shape`: this browser's cached winner, else
   * the server's best for this device (or its architecture, vendor, or the
   * portable default). The handle keeps working when tuning swaps the kernel.
   */
  kernel(op, shape) {
    checkShape(op, shape);
    const key = `${op}/${shape.join(",")}`;
    let k = this.kernels.get(key);
    if (!k) {
      k = this.makeKernel(op, [...shape]);
      this.kernels.set(key, k);
      k.catch(() => this.kernels.delete(key));
    }
    return k;
  }
  async wasmKernel(op, shape) {
    if (this.target !== "wasm") throw new Error("this session targets WebGPU: use gpuKernel()");
    return await this.kernel(op, shape);
  }
  async gpuKernel(op, shape) {
    if (this.target !== "webgpu") throw new Error("this session targets Wasm: use wasmKernel()");
    return await this.kernel(op, shape);
  }
  async makeKernel(op, shape) {
    const cacheKey2 = this.cacheKey(op, shape);
    const cached2 = await this.cache.get(cacheKey2);
    let meta, bytes, source, level;
    if (cached2) {
      ({ meta, bytes } = cached2);
      source = "cache";
      level = null;
    } else {
      const q = new URLSearchParams({ device_key: this.session.device_key, op, shape: shape.join(","), target: this.serverTarget });
      const best = await json(await fetchRetrying(`${this.server}/v1/kernels/best?${q}`), `best ${op} ${shape}`);
      meta = best.meta;
      bytes = await this.fetchKernel(best.url, this.serverTarget);
      source = "server";
      level = best.level;
      await this.cache.put({ key: cacheKey2, sha256: meta.sha256, meta, bytes, tuned: false, median_us: 0, saved_at: Date.now() });
    }
    let handle;
    if (this.device) {
      const impl = await this.backend.load(bytes, meta);
      handle = new GpuKernel(op, shape, impl, source, level, this.device, this.layouts.bindGroupLayout(meta.args.length));
    } else {
      const impl = await this.backend.load(bytes, meta);
      const binding = new WasmKernelBinding(this.memory);
      await binding.bind(impl);
      handle = new WasmKernel(op, shape, impl, source, level, binding);
    }
    const tune = (this.opts.tune ?? true) && !(cached2?.tuned && !this.opts.retune);
    if (tune) {
      const impl = handle.impl;
      const tuner = new KernelTuner(this.host(handle), this.backend, op, shape, impl);
      tuner.maxCandidates = Math.max(1, this.opts.maxCandidates ?? Infinity);
      if (this.remote) tuner.remote = this.remote;
      handle.tuner = tuner;
    }
    this.handles.push(handle);
    this.announcedDone = false;
    return handle;
  }
  host(handle) {
    const wt = this;
    return {
      server: this.server,
      sessionId: this.session.session_id,
      fetchKernel: (url, target) => this.fetchKernel(url, target),
      async adopt(t, impl, m, previous) {
        await handle.adopt(impl);
        handle.swaps++;
        const detail = {
          op: t.op,
          shape: t.shape,
          target: wt.target,
          from: previous.sha256,
          to: impl.sha256,
          from_us: m.current_us,
          to_us: m.median_us,
          speedup: m.current_us / m.median_us,
          index: m.index,
          total: m.total,
          at: performance.now()
        };
        wt.dispatchEvent(new CustomEvent("swap", { detail }));
        await wt.cache.put({
          key: wt.cacheKey(t.op, t.shape),
          sha256: impl.sha256,
          meta: impl.meta,
          bytes: impl.bytes,
          tuned: false,
          median_us: m.median_us,
          saved_at: Date.now()
        });
      },
      measured(t, m) {
        const detail = { ...m, op: t.op, shape: t.shape, target: wt.target };
        wt.dispatchEvent(new CustomEvent("measure", { detail }));
      },
      reported(t, response, error) {
        const body = t.reportBody();
        const detail = { op: t.op, shape: t.shape, target: wt.target, response, error, entries: body?.entries.length ?? 0 };
        wt.dispatchEvent(new CustomEvent("report", { detail }));
        if (!error) {
          const impl = t.current;
          void wt.cache.put({
            key: wt.cacheKey(t.op, t.shape),
            sha256: impl.sha256,
            meta: impl.meta,
            bytes: impl.bytes,
            tuned: true,
            median_us: 0,
            saved_at: Date.now()
          });
        }
      }
    };
  }
  /**
   * The tuners with work left, in the order `idle()` offers them its time.
   * A candidate part-way through its evaluation finishes first. Then round
   * robin over the ops: the tuner that has taken the fewest candidates goes
   * next, so the head of every op's queue (the lite space is best first) is
   * measured before the tail of any, and the app's latency falls early.
   * Ties go to the op with the biggest share of the app's time.
   */
  tunerOrder() {
    const live = [];
    const open = this.handles.filter((h) => h.tuner?.phase === "opening" || h.tuner?.phase === "running").length;
    for (const h of this.handles) {
      const t = h.tuner;
      if (!t || !(t.phase === "waiting" || t.phase === "opening" || t.phase === "running")) continue;
      if (t.phase === "waiting" && open >= MAX_OPEN_QUEUES) continue;
      live.push({ t, w: flops(h.op, h.shape) * (h.calls + 1) });
    }
    live.sort((a, b) => Number(b.t.evaluating) - Number(a.t.evaluating) || a.t.taken - b.t.taken || b.w - a.w);
    return live.map((x) => x.t);
  }
  /** Whether every kernel is tuned and reported (or not to be tuned). */
  get done() {
    return this.handles.every((h) => !h.tuner || h.tuner.phase === "done");
  }
  /** Tuning progress of every kernel. */
  status() {
    return this.handles.map((h) => ({
      op: h.op,
      shape: h.shape,
      phase: h.tuner?.phase ?? "done",
      evaluated: h.tuner?.evaluated ?? 0,
      total: h.tuner?.total ?? 0,
      sha256: h.sha256,
      notes: h.tuner?.notes ?? []
    }));
  }
  /**
   * One slice of tuning, at most `budgetMs` long (default: the session's
   * budget). Call it between inferences; it returns at once when nothing is
   * ready (a candidate still downloading or compiling).
   */
  async idle(budgetMs = this.budgetMs) {
    if (this.remote) {
      this.startBackground();
      return { worked: false, done: this.done };
    }
    return this.slice(budgetMs);
  }
  /** Whether tuning runs in the background, in the bench worker (the `worker` option). */
  get background() {
    return this.remote !== null;
  }
  /**
   * Background tuning: short slices of page-side work (taking in the
   * worker's answers, sending candidates, adopting winners), a pause of a
   * few ms between them, until every kernel is tuned. Started by `idle()`
   * (and `startIdleLoop()`), again after new kernels.
   */
  startBackground() {
    if (this.pumping || this.closed) return;
    this.pumping = true;
    const run = async () => {
      try {
        while (!this.closed) {
          const r = await this.slice(BACKGROUND_SLICE_MS);
          if (r.done && !this.pendingKernels()) break;
          await new Promise((res) => setTimeout(res, r.worked ? 0 : 4));
        }
      } finally {
        this.pumping = false;
      }
    };
    void run();
  }
  async slice(budgetMs) {
    if (this.busy) return { worked: false, done: this.done };
    this.busy = true;
    const deadline = performance.now() + budgetMs;
    let worked = false;
    try {
      let strict = false;
      for (let round = 0; round < 64; round++) {
        let again = false;
        for (const t of this.tunerOrder()) {
          if (strict && performance.now() >= deadline) break;
          const before = t.evaluated;
          const did = await t.step(deadline, strict);
          if (did) worked = strict = true;
          if (did && t.phase !== "reporting" && t.phase !== "done") {
            again = t.evaluated > before && !t.evaluating;
            break;
          }
        }
        if (!again || performance.now() >= deadline) break;
      }
    } finally {
      this.busy = false;
    }
    const done = this.done;
    if (done && !this.announcedDone && this.handles.length) {
      this.announcedDone = true;
      this.dispatchEvent(new CustomEvent("tuned", { detail: this.status() }));
    }
    return { worked, done };
  }
  /**
   * Calls `idle()` from requestIdleCallback (a timer where there is none)
   * until every kernel is tuned or `stopIdleLoop()` is called.
   */
  startIdleLoop() {
    if (this.loop) return;
    const loop = { stop: false };
    this.loop = loop;
    const ric = globalThis.requestIdleCallback;
    const schedule = () => {
      if (loop.stop) return;
      if (ric) ric((d) => void this.idle(Math.max(1, Math.min(this.budgetMs, d.timeRemaining()))).then(after));
      else setTimeout(() => void this.idle().then(after), 16);
    };
    const after = (r) => {
      if (r.done && !this.pendingKernels()) {
        this.loop = null;
        return;
      }
      schedule();
    };
    schedule();
  }
  stopIdleLoop() {
    if (this.loop) this.loop.stop = true;
    this.loop = null;
  }
  pendingKernels() {
    return this.kernels.size > this.handles.length;
  }
  /** Forgets this browser's cached winners (for every server and device). */
  async clearCache() {
    await this.cache.clear();
  }
  /** Stops tuning; open queues are closed, nothing more is reported. */
  close() {
    this.closed = true;
    this.remote?.close();
    this.stopIdleLoop();
    for (const h of this.handles) h.tuner?.cancel();
  }
};
export {
  GpuKernel,
  WasmKernel,
  Webtune,
  measureRho,
  rhoBit
};
