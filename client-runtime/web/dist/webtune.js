// src/bundle.ts
var BUNDLE_FORMAT = 1;
var MAX_THREADS = 16;
function keysOf(deviceKey) {
  const parts = deviceKey.split("/");
  if (parts.length !== 4 || parts.some((p) => p === "")) return null;
  return { device_key: deviceKey, arch_key: `${parts[0]}/${parts[1]}`, vendor_key: parts[0] };
}
function maxThreadsOf(deviceKey) {
  const parts = deviceKey.split("/");
  if (!parts[0]?.startsWith("cpu-") || parts.length < 3) return 1;
  for (const seg of parts[2].split("-")) {
    const m = /^(\d+)t\.mt$/.exec(seg);
    if (m) return Math.max(1, Math.min(Number(m[1]), MAX_THREADS));
  }
  return 1;
}
var LEVELS = ["device", "arch", "vendor"];
async function sha256Hex(bytes) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  const data = typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes;
  const h = new Uint8Array(await subtle.digest("SHA-256", data));
  return Array.from(h, (b) => b.toString(16).padStart(2, "0")).join("");
}
async function mustHash(bytes, what) {
  const h = await sha256Hex(bytes);
  if (h === null) throw new Error(`${what}: cannot check its SHA-256 without crypto.subtle (serve the page over https or from localhost)`);
  return h;
}
var KernelBundle = class _KernelBundle {
  constructor(url, manifest, fetcher) {
    this.url = url;
    this.manifest = manifest;
    this.fetcher = fetcher;
  }
  url;
  manifest;
  fetcher;
  /**
   * Fetches `SHA256SUMS` and `bundle.json` from the directory at `url`
   * (relative to the page), checks the manifest against its sum and its
   * format. Any failure is one error naming the file.
   */
  static async open(url, fetcher = (input, init) => fetch(input, init)) {
    let base = url.endsWith("/") ? url : `${url}/`;
    const here = globalThis.location?.href;
    if (here) base = new URL(base, here).href;
    const get = async (name) => {
      const res = await fetcher(`${base}${name}`);
      if (!res.ok) throw new Error(`bundle ${base}${name}: HTTP ${res.status}`);
      return res;
    };
    const sums = /* @__PURE__ */ new Map();
    for (const line of (await (await get("SHA256SUMS")).text()).split("\n")) {
      const m = /^([0-9a-f]{64}) {2}(\S+)$/.exec(line);
      if (m) sums.set(m[2], m[1]);
    }
    const want = sums.get("bundle.json");
    if (!want) throw new Error(`bundle ${base}SHA256SUMS does not list bundle.json: not a webtune bundle`);
    const text = await (await get("bundle.json")).text();
    const got = await mustHash(text, `bundle ${base}bundle.json`);
    if (got !== want) throw new Error(`bundle ${base}bundle.json: SHA-256 is ${got}, SHA256SUMS says ${want}: truncated or altered, refused`);
    let manifest;
    try {
      manifest = JSON.parse(text);
    } catch (e) {
      throw new Error(`bundle ${base}bundle.json: not JSON: ${e.message}`);
    }
    if (manifest.format !== BUNDLE_FORMAT) {
      throw new Error(`bundle ${base}bundle.json: bundle format ${manifest.format} is not one this runtime reads (format ${BUNDLE_FORMAT})`);
    }
    if (!Array.isArray(manifest.winners) || !Array.isArray(manifest.defaults)) throw new Error(`bundle ${base}bundle.json: no winners or defaults list`);
    return new _KernelBundle(base, manifest, fetcher);
  }
  /** Whether the bundle answers for this op, shape and target. */
  covers(op, shape, target) {
    const s = shape.join(",");
    return this.manifest.covers.some((c) => c.op === op && c.shape === s && c.target === target);
  }
  /**
   * The server's answer to `GET /v1/kernels/best`, from the bundle: the
   * most specific winner on the chain of `keys` (device, arch, vendor) that
   * a device allowed `maxThreads` threads can run, else the portable
   * default; null when the bundle does not cover the op, shape and target.
   * `url` is the kernel file's absolute URL.
   */
  best(keys, op, shape, target, maxThreads = 1) {
    const s = shape.join(",");
    const same = (x) => x.op === op && x.shape === s && x.target === target;
    if (keys) {
      for (const level of LEVELS) {
        const key = level === "device" ? keys.device_key : level === "arch" ? keys.arch_key : keys.vendor_key;
        const w = this.manifest.winners.find((w2) => same(w2) && w2.level === level && w2.level_key === key && w2.meta?.sha256 === w2.kernel_sha256 && (w2.meta.threads ?? 1) <= maxThreads);
        if (w) {
          return {
            level,
            level_key: w.level_key,
            meta: w.meta,
            url: this.kernelUrl(w.kernel_sha256, target),
            votes: w.votes,
            reports: w.reports,
            space_checksum: w.space_checksum
          };
        }
      }
    }
    const d = this.manifest.defaults.find((d2) => same(d2) && d2.meta?.sha256 === d2.kernel_sha256);
    if (!d) return null;
    return { level: "default", meta: d.meta, url: this.kernelUrl(d.kernel_sha256, target), votes: 0, reports: 0 };
  }
  /** A kernel file's URL: `kernels/{sha256}.{target}` in the bundle. */
  kernelUrl(sha256, target) {
    return `${this.url}kernels/${sha256}.${target}`;
  }
  /**
   * A kernel's bytes (Wasm) or text (WGSL) from the bundle, refused unless
   * they hash to `sha256`.
   */
  async kernel(sha256, target) {
    const url = this.kernelUrl(sha256, target);
    const res = await this.fetcher(url);
    if (!res.ok) throw new Error(`bundle kernel ${url}: HTTP ${res.status}`);
    const bytes = target === "wasm" ? await res.arrayBuffer() : await res.text();
    const got = await mustHash(bytes, `bundle kernel ${url}`);
    if (got !== sha256) throw new Error(`bundle kernel ${url}: SHA-256 is ${got}: truncated or altered, refused`);
    return bytes;
  }
};

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
var SESSION_RATED = /\/v1\/sessions\/([0-9a-f]{32})\/(?:queue|reports)/;
var gates = /* @__PURE__ */ new Map();
function gateOf(url) {
  const m = SESSION_RATED.exec(url);
  if (!m) return null;
  let g = gates.get(m[1]);
  if (!g) gates.set(m[1], g = { next: 0, interval: 0 });
  return g;
}
async function passGate(g, signal) {
  const now = Date.now();
  const slot = Math.max(now, g.next);
  if (g.interval > 0) g.next = slot + g.interval;
  if (slot > now) await sleep(slot - now, signal);
}
function noteAnswer(g, status, waitS) {
  if (retryable(status)) {
    g.interval = Math.max(g.interval, 1e3 * waitS);
    g.next = Math.max(g.next, Date.now() + 1e3 * waitS);
  } else {
    g.interval = g.interval / 2 < 250 ? 0 : g.interval / 2;
  }
}
async function fetchRetrying(input, init = {}, fetcher = fetch) {
  const gate = gateOf(input);
  for (let attempt = 1; ; attempt++) {
    if (gate) await passGate(gate, init.signal);
    const res = await fetcher(input, init);
    const wait = retryAfterSeconds(res.headers.get("retry-after"));
    if (gate) noteAnswer(gate, res.status, wait);
    if (!retryable(res.status) || attempt >= MAX_ATTEMPTS) return res;
    await res.body?.cancel().catch(() => {
    });
    if (!gate) await sleep(wait * 1e3, init.signal);
  }
}

// src/reports.ts
var MAX_BATCH = 16;
var MAX_BATCH_BYTES = 56 * 1024;
var LINGER_MS = 5e3;
var MAX_LIMITED = 60;
var MAX_NETWORK_ATTEMPTS = 5;
function sleep2(ms) {
  return new Promise((r) => setTimeout(r, ms));
}
function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
var Reporter = class _Reporter {
  constructor(server, sessionId, fetcher = (...a) => fetch(...a), lingerMs = LINGER_MS) {
    this.server = server;
    this.sessionId = sessionId;
    this.fetcher = fetcher;
    this.lingerMs = lingerMs;
  }
  server;
  sessionId;
  fetcher;
  lingerMs;
  waiting = [];
  sending = false;
  timer = null;
  flushing = false;
  /** Whether the server takes batches (false after a 404 or 405 from the batch route). */
  batching = true;
  /** Requests sent (batches and single reports, retries included), and 429/503 answers met. */
  requests = 0;
  limited = 0;
  /** One report sent alone at once, with the same retries (a tuner without a host's Reporter). */
  static one(server, sessionId, body, fetcher) {
    const r = new _Reporter(server, sessionId, fetcher, 0);
    r.batching = false;
    return r.submit(body);
  }
  /** Reports not yet answered. */
  get pending() {
    return this.waiting.length;
  }
  /** Queues a report; resolves once the server answered it (or it failed for good). */
  submit(body) {
    return new Promise((resolve) => {
      this.waiting.push({ body, size: JSON.stringify(body).length, at: Date.now(), resolve });
      this.schedule();
    });
  }
  /** Sends what waits without lingering (the page has nothing else to tune, or closes). */
  flush() {
    if (!this.waiting.length) return;
    this.flushing = true;
    this.schedule();
  }
  schedule() {
    if (this.sending || !this.waiting.length) return;
    const full = this.waiting.length >= MAX_BATCH || this.waiting.reduce((a, w) => a + w.size, 0) >= MAX_BATCH_BYTES;
    const due = this.waiting[0].at + this.lingerMs - Date.now();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.flushing || full || due <= 0) void this.send();
    else this.timer = setTimeout(() => (this.timer = null, this.schedule()), due);
  }
  /** Sends batches until nothing waits that is due (one request in flight at a time). */
  async send() {
    this.sending = true;
    try {
      while (this.waiting.length) {
        const batch = [];
        let bytes = 16;
        while (batch.length < MAX_BATCH && this.waiting.length) {
          const w = this.waiting[0];
          if (batch.length && bytes + w.size + 1 > MAX_BATCH_BYTES) break;
          batch.push(this.waiting.shift());
          bytes += w.size + 1;
        }
        await (this.batching ? this.sendBatch(batch) : this.sendEach(batch));
        if (!this.flushing && this.waiting.length && this.waiting.length < MAX_BATCH && this.waiting[0].at + this.lingerMs > Date.now()) break;
      }
    } finally {
      this.sending = false;
      if (!this.waiting.length) this.flushing = false;
      this.schedule();
    }
  }
  /**
   * One POST, tried again on 429 and 503 after their Retry-After (at most
   * MAX_LIMITED times) and on network errors (MAX_NETWORK_ATTEMPTS, waits
   * doubling from 1 s). Resolves with the last answer, or the last error.
   */
  async post(url, body) {
    let limited = 0, failures = 0;
    const gate = gateOf(url);
    for (; ; ) {
      if (gate) await passGate(gate);
      this.requests++;
      let res;
      try {
        res = await this.fetcher(url, { method: "POST", headers: { "content-type": "application/json" }, body });
      } catch (e) {
        if (++failures >= MAX_NETWORK_ATTEMPTS) return { error: `${e instanceof Error ? e.message : e}` };
        await sleep2(1e3 * 2 ** (failures - 1));
        continue;
      }
      const wait = retryAfterSeconds(res.headers.get("retry-after"));
      if (gate) noteAnswer(gate, res.status, wait);
      if (retryable(res.status) && limited < MAX_LIMITED) {
        limited++;
        this.limited++;
        await res.body?.cancel().catch(() => {
        });
        if (!gate) await sleep2(1e3 * wait);
        continue;
      }
      return { status: res.status, text: await res.text().catch(() => "") };
    }
  }
  async sendBatch(batch) {
    const url = `${this.server}/v1/sessions/${this.sessionId}/reports/batch`;
    const r = await this.post(url, JSON.stringify({ reports: batch.map((w) => w.body) }));
    if ("error" in r) {
      for (const w of batch) w.resolve({ response: null, error: `report: ${r.error}` });
      return;
    }
    if (r.status === 404 || r.status === 405) {
      this.batching = false;
      return this.sendEach(batch);
    }
    const body = parse(r.text);
    const results = r.status === 200 && Array.isArray(body?.results) && body.results.length === batch.length ? body.results : null;
    if (!results) return this.sendEach(batch);
    batch.forEach((w, i) => {
      const x = results[i];
      if (x.status === 200) w.resolve({ response: x.report ?? null });
      else w.resolve({ response: x, error: `report: HTTP ${x.status}: ${x.error ?? ""}` });
    });
  }
  async sendEach(batch) {
    for (const w of batch) {
      const r = await this.post(`${this.server}/v1/sessions/${this.sessionId}/reports`, JSON.stringify(w.body));
      if ("error" in r) w.resolve({ response: null, error: `report: ${r.error}` });
      else {
        const json2 = parse(r.text);
        w.resolve(r.status >= 200 && r.status < 300 ? { response: json2 } : { response: json2, error: `report: HTTP ${r.status}: ${r.text}` });
      }
    }
  }
};

// src/ops.ts
var BLOCK_OPS = ["matmul_q4", "matmul_q4_1", "matmul_q8_0"];
var NO_F16 = ["matmul_i16", "matmul_q4_1", "matmul_q8_0"];
function parseOp(op) {
  const [base, ...rest] = op.split("+");
  if (!(base in DIMS)) {
    throw new Error(`unknown op \`${op}\`: use matmul, batch_matmul, matmul_q4, matmul_i16, matmul_q4_1 or matmul_q8_0`);
  }
  const f16 = rest.length > 0 && rest[rest.length - 1] === "f16";
  if (f16) rest.pop();
  const out = { base, bias: false, act: "none", residual: false, norm: false, glu: false, merge: false, dtype: f16 ? "f16" : "f32" };
  const rank = { merge: 1, rms_norm: 2, bias: 3, gelu: 4, relu: 4, swiglu: 4, residual: 5 };
  let last = 0;
  for (const p of rest) {
    const r = rank[p];
    if (r === void 0 || r <= last) {
      throw new Error(
        `op \`${op}\`: an epilogue is \`+bias\`, then \`+gelu\` or \`+relu\`, then \`+residual\`, each at most once and in that order, e.g. matmul+bias+gelu (block-quantised ops: \`+merge\` or \`+rms_norm\`, then \`+swiglu\`, then \`+residual\`); \`+f16\` comes last`
      );
    }
    last = r;
    if (p === "bias") out.bias = true;
    else if (p === "residual") out.residual = true;
    else if (p === "rms_norm") out.norm = true;
    else if (p === "swiglu") out.glu = true;
    else if (p === "merge") out.merge = true;
    else out.act = p;
  }
  const block = BLOCK_OPS.includes(base);
  if (block && (out.bias || out.act !== "none")) {
    throw new Error(`${base} takes no epilogue but \`+merge\`, \`+rms_norm\`, \`+swiglu\` and \`+residual\`: \`+bias\`, \`+gelu\` and \`+relu\` are for only matmul, batch_matmul and matmul_i16`);
  }
  if (!block && (out.norm || out.glu || out.merge)) {
    throw new Error(`${base} takes no \`+merge\`, \`+rms_norm\` or \`+swiglu\`: only matmul_q4, matmul_q4_1 and matmul_q8_0 do`);
  }
  if (out.merge && out.norm) throw new Error(`${base}: \`+merge\` and \`+rms_norm\` do not go together (the merged rows are not normalised)`);
  if (f16 && NO_F16.includes(base)) {
    throw new Error(`${base} has no f16 form: only matmul, batch_matmul and matmul_q4 do`);
  }
  if (f16 && block && rest.length > 0) throw new Error(`${base} has no f16 form with an epilogue`);
  return out;
}
var DIMS = { matmul: 3, batch_matmul: 4, matmul_q4: 3, matmul_i16: 3, matmul_q4_1: 3, matmul_q8_0: 3 };
function i16Bound(k) {
  return Math.min(32767, Math.floor(Math.sqrt(2147483647 / k)));
}
function checkShape(op, shape) {
  const want = parseOp(op).merge ? 5 : DIMS[parseOp(op).base];
  if (shape.length !== want) {
    throw new Error(`${op} takes ${want} dimensions, got ${shape.length}`);
  }
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 1 || d > 4294967295) {
      throw new Error(`${op} shape ${shape.join(",")}: every dimension must be a positive integer`);
    }
  }
  const base = parseOp(op).base;
  if (BLOCK_OPS.includes(base) && shape[1] % 32 !== 0) {
    throw new Error(`${base} needs K % 32 == 0, got K = ${shape[1]}`);
  }
  if (parseOp(op).merge && (shape[1] % shape[3] !== 0 || shape[1] / shape[3] % 4 !== 0)) {
    throw new Error(`${op}: K = ${shape[1]} must be H = ${shape[3]} heads of a multiple of 4 values each`);
  }
  if (base === "matmul_i16" && (shape[1] % 2 !== 0 || shape[2] % 4 !== 0)) {
    throw new Error(`matmul_i16 needs K even and N a multiple of 4, got K = ${shape[1]}, N = ${shape[2]}`);
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
  const fl = p.dtype;
  const fused = (a, bb, c) => [
    a,
    bb,
    ...p.base === "matmul_i16" ? [spec("SA", "f32", [m]), spec("SB", "f32", [n])] : [],
    ...p.bias ? [spec("bias", fl, [n])] : [],
    ...p.residual ? [spec("R", fl, c.shape)] : [],
    c
  ];
  switch (p.base) {
    case "matmul":
      return fused(spec("A", fl, [m, k]), spec("B", fl, [k, n]), spec("C", fl, [m, n]));
    case "batch_matmul":
      return fused(spec("A", fl, [b, m, k]), spec("B", fl, [b, k, n]), spec("C", fl, [b, m, n]));
    case "matmul_i16": {
      const bound = i16Bound(k);
      return fused({ ...spec("A", "u32", [m, k / 2]), i16Bound: bound }, { ...spec("B", "u32", [k / 2, n]), i16Bound: bound }, spec("C", "f32", [m, n]));
    }
    case "matmul_q4":
    case "matmul_q4_1":
    case "matmul_q8_0": {
      const rows = p.glu ? 2 * n : n;
      const [h, c] = p.merge ? [shape[3], shape[4]] : [0, 0];
      return [
        p.merge ? spec("P", fl, [m, h, c, k / h]) : spec("A", fl, [m, k]),
        spec("W", "u32", [rows, k / (p.base === "matmul_q8_0" ? 4 : 8)]),
        spec(p.base === "matmul_q4" ? "S" : "D", fl, [rows, k / 32]),
        ...p.base === "matmul_q4_1" ? [spec("Mn", "f32", [rows, k / 32])] : [],
        ...p.norm ? [spec("G", fl, [k]), spec("E", fl, [1])] : [],
        ...p.merge ? [spec("PM", fl, [m, h, c]), spec("PL", fl, [m, h, c])] : [],
        ...p.residual ? [spec("R", fl, [m, n])] : [],
        spec("C", fl, [m, n])
      ];
    }
  }
}
function elemBytes(s) {
  return s.dtype === "f16" ? 2 : 4;
}
var F16F = new Float32Array(1);
var F16U = new Uint32Array(F16F.buffer);
function f16Bits(x) {
  F16F[0] = x;
  const u = F16U[0];
  const sign = u >>> 16 & 32768;
  const exp = u >>> 23 & 255;
  const man = u & 8388607;
  if (exp === 255) return sign | 31744 | (man ? 512 | man >>> 13 : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 31744;
  if (e <= 0) {
    if (e < -10) return sign;
    const m = man | 8388608;
    const shift = 14 - e;
    const half = 1 << shift - 1;
    const rest2 = m & (1 << shift) - 1;
    let h2 = m >>> shift;
    if (rest2 > half || rest2 === half && h2 & 1) h2++;
    return sign | h2;
  }
  let h = e << 10 | man >>> 13;
  const rest = man & 8191;
  if (rest > 4096 || rest === 4096 && h & 1) h++;
  return sign | h;
}
function f16Value(h) {
  const e = h >>> 10 & 31, m = h & 1023;
  const v = e === 0 ? m * 2 ** -24 : e === 31 ? m ? NaN : Infinity : (1 + m / 1024) * 2 ** (e - 15);
  return h & 32768 ? -v : v;
}
function f16Round(x) {
  return f16Value(f16Bits(x));
}
function flops(op, shape) {
  const [b, m, k, n] = bmkn(op, shape);
  return 2 * b * m * k * n * (parseOp(op).glu ? 2 : 1);
}

// src/rng.ts
var POISON = 2143346349;
var POISON_F16 = 32429;
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
function i16Word(raw, r) {
  const half = (h) => h % (2 * r + 1) - r || 1;
  return (half(raw & 65535) & 65535 | half(raw >>> 16) << 16) >>> 0;
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
        const mode = s.dtype === "u32" ? 0 : s.name === "S" || s.name === "D" || s.name === "E" ? 2 : 1;
        rng.state = w.fill(rng.state, 0, (end - this.pos) * 4, mode);
        out.set(new Uint32Array(w.mem.buffer, 0, end - this.pos), this.pos);
      } else if (s.dtype === "u32") {
        for (let i = this.pos; i < end; i++) {
          rng.next();
          out[i] = rng.outLo;
        }
      } else {
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        if (s.name === "S" || s.name === "D" || s.name === "E") {
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
      if (s.name === "Mn") {
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        const d = new Float32Array(this.args[this.arg - 1].buffer);
        for (let i = this.pos; i < end; i++) f[i] = -d[i] * Math.fround(7.5 + 0.5 * f[i]);
      }
      if (s.name === "PL") {
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        for (let i = this.pos; i < end; i++) f[i] = Math.fround(1.5 + 0.5 * f[i]);
      }
      if (s.i16Bound !== void 0) for (let i = this.pos; i < end; i++) out[i] = i16Word(out[i], s.i16Bound);
      if (s.dtype === "f16") {
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        for (let i = this.pos; i < end; i++) f[i] = f16Round(f[i]);
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
function signFaster(cur, cand, floor = 0.01, alpha = 0.05) {
  const n = Math.min(cur.length, cand.length);
  let wins = 0;
  for (let i = 0; i < n; i++) if (cand[i] < (1 - floor) * cur[i]) wins++;
  let tail = 0, c = 1;
  for (let k = 0; k <= n; k++) {
    if (k >= wins) tail += c;
    c = c * (n - k) / (k + 1);
  }
  return n > 0 && tail / 2 ** n <= alpha;
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
var TOLERANCE_F16 = 4 / 2048 + TOLERANCE;
var A16_ROUNDING = 0.51 * Math.sqrt(32) / 32767;
function toleranceOf(op, config) {
  return (parseOp(op).dtype === "f16" ? TOLERANCE_F16 : TOLERANCE) + (config?.quantize_a === true ? A16_ROUNDING : 0);
}
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
function i16(word, hi) {
  return hi ? word >> 16 : word << 16 >> 16;
}
function qaAt(args, k, m, kk) {
  return i16(args[0][m * (k >> 1) + (kk >> 1)], kk & 1);
}
function qbAt(args, n, kk, j) {
  return i16(args[1][(kk >> 1) * n + j], kk & 1);
}
function bAt(op, shape, args, bi, kk, j) {
  const [, , k, n] = bmkn(op, shape);
  if (parseOp(op).base === "matmul_i16") return f32(args[3][j]) * qbAt(args, n, kk, j);
  if (parseOp(op).base === "matmul_q4") {
    const word = args[1][j * (k / 8) + (kk >>> 3)];
    const q = word >>> 4 * (kk & 7) & 15;
    return (q - 8) * f32(args[2][j * (k / 32) + (kk >>> 5)]);
  }
  if (parseOp(op).base === "matmul_q4_1") {
    const word = args[1][j * (k / 8) + (kk >>> 3)];
    const q = word >>> 4 * (kk & 7) & 15;
    const blk = j * (k / 32) + (kk >>> 5);
    return q * f32(args[2][blk]) + f32(args[3][blk]);
  }
  if (parseOp(op).base === "matmul_q8_0") {
    const word = args[1][j * (k / 4) + (kk >>> 2)];
    const q = word << 24 - 8 * (kk & 3) >> 24;
    return q * f32(args[2][j * (k / 32) + (kk >>> 5)]);
  }
  return f32(args[1][bi * k * n + kk * n + j]);
}
function blockColumnNorms(base, k, n, args, out) {
  const w = args[1];
  const d = new Float32Array(args[2].buffer, args[2].byteOffset, args[2].length);
  const mn = base === "matmul_q4_1" ? new Float32Array(args[3].buffer, args[3].byteOffset, args[3].length) : null;
  const blocks = k / 32;
  for (let j = 0; j < n; j++) {
    let s = 0;
    for (let b = 0; b < blocks; b++) {
      const scale = d[j * blocks + b];
      let acc = 0;
      if (base === "matmul_q8_0") {
        const w0 = j * (k / 4) + b * 8;
        for (let i = 0; i < 8; i++) {
          const word = w[w0 + i];
          for (let sh = 0; sh < 32; sh += 8) {
            const q = word << 24 - sh >> 24;
            acc += q * q;
          }
        }
        s += acc * scale * scale;
      } else if (mn) {
        const m = mn[j * blocks + b];
        const w0 = j * (k / 8) + b * 4;
        for (let i = 0; i < 4; i++) {
          const word = w[w0 + i];
          for (let sh = 0; sh < 32; sh += 4) {
            const v = (word >>> sh & 15) * scale + m;
            acc += v * v;
          }
        }
        s += acc;
      } else {
        const w0 = j * (k / 8) + b * 4;
        for (let i = 0; i < 4; i++) {
          const word = w[w0 + i];
          for (let sh = 0; sh < 32; sh += 4) {
            const q = (word >>> sh & 15) - 8;
            acc += q * q;
          }
        }
        s += acc * scale * scale;
      }
    }
    out[j] = Math.sqrt(s);
  }
}
function blockRow(base, k, args, row, out) {
  const w = args[1];
  const d = new Float32Array(args[2].buffer, args[2].byteOffset, args[2].length);
  const mn = base === "matmul_q4_1" ? new Float32Array(args[3].buffer, args[3].byteOffset, args[3].length) : null;
  const per = base === "matmul_q8_0" ? 4 : 8;
  for (let kk = 0; kk < k; kk++) {
    const word = w[row * (k / per) + Math.floor(kk / per)];
    const blk = row * (k / 32) + (kk >>> 5);
    if (per === 4) out[kk] = (word << 24 - 8 * (kk & 3) >> 24) * d[blk];
    else if (mn) out[kk] = (word >>> 4 * (kk & 7) & 15) * d[blk] + mn[blk];
    else out[kk] = ((word >>> 4 * (kk & 7) & 15) - 8) * d[blk];
  }
}
function mergeRows(args, shape, first) {
  const [m, k, , h, c] = shape;
  const d = k / h;
  const view = (x) => new Float32Array(x.buffer, x.byteOffset, x.length);
  const pv = view(args[0]), pm = view(args[first]), pl = view(args[first + 1]);
  const out = new Float64Array(m * k), w = new Float64Array(c);
  for (let i = 0; i < m; i++) {
    for (let hh = 0; hh < h; hh++) {
      const part0 = (i * h + hh) * c;
      let top = -Infinity;
      for (let cc = 0; cc < c; cc++) top = Math.max(top, pm[part0 + cc]);
      let den = 0;
      for (let cc = 0; cc < c; cc++) {
        w[cc] = Math.exp(pm[part0 + cc] - top);
        den += w[cc] * pl[part0 + cc];
      }
      for (let dd = 0; dd < d; dd++) {
        let num = 0;
        for (let cc = 0; cc < c; cc++) num += w[cc] * pv[(part0 + cc) * d + dd];
        out[(i * h + hh) * d + dd] = num / den;
      }
    }
  }
  return out;
}
function silu(x) {
  return x / (1 + Math.exp(-x));
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
    const p = this.parsed;
    const blockOp = ["matmul_q4", "matmul_q4_1", "matmul_q8_0"].includes(p.base);
    const first = p.base === "matmul_i16" ? 4 : blockOp ? (p.base === "matmul_q4_1" ? 4 : 3) + (p.norm || p.merge ? 2 : 0) : 2;
    this.biasArg = p.bias ? first : -1;
    this.residualArg = p.residual ? first + (p.bias ? 1 : 0) : -1;
    this.rows = new Float64Array(b * m);
    this.cols = new Float64Array(b * n * (p.glu ? 2 : 1));
    if (blockOp && (p.norm || p.glu || p.residual || p.merge)) {
      this.block = this.blockEpilogue(m, k, n);
      for (let i = 0; i < m; i++) {
        let s = 0;
        for (let kk = 0; kk < k; kk++) s += this.block.rows[i * k + kk] ** 2;
        this.rows[i] = Math.sqrt(s);
      }
      blockColumnNorms(p.base, k, n * (p.glu ? 2 : 1), args, this.cols);
      return;
    }
    if (this.parsed.base === "matmul_i16") {
      const half = k >> 1;
      for (let i = 0; i < m; i++) {
        let s = 0;
        for (let p2 = 0; p2 < half; p2++) {
          const w = args[0][i * half + p2], lo = i16(w, 0), hi = i16(w, 1);
          s += lo * lo + hi * hi;
        }
        this.rows[i] = Math.abs(f32(args[2][i])) * Math.sqrt(s);
      }
      for (let p2 = 0; p2 < half; p2++) {
        for (let j = 0; j < n; j++) {
          const w = args[1][p2 * n + j], lo = i16(w, 0), hi = i16(w, 1);
          this.cols[j] += lo * lo + hi * hi;
        }
      }
      for (let j = 0; j < n; j++) this.cols[j] = Math.abs(f32(args[3][j])) * Math.sqrt(this.cols[j]);
      return;
    }
    const a = new Float32Array(args[0].buffer, args[0].byteOffset, args[0].length);
    for (let r = 0; r < b * m; r++) {
      let s = 0;
      for (let kk = 0; kk < k; kk++) s += a[r * k + kk] * a[r * k + kk];
      this.rows[r] = Math.sqrt(s);
    }
    if (["matmul_q4", "matmul_q4_1", "matmul_q8_0"].includes(this.parsed.base)) {
      blockColumnNorms(this.parsed.base, k, n, args, this.cols);
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
  /** Argument numbers of the epilogue's bias and R (ABI order A, B, [SA, SB,] bias, R, C). */
  biasArg;
  residualArg;
  block = null;
  /** A's rows as a block op's product reads them, and under +swiglu every output's gate and up. */
  blockEpilogue(m, k, n) {
    const p = this.parsed, args = this.args;
    const a = new Float32Array(args[0].buffer, args[0].byteOffset, args[0].length);
    const rows = p.merge ? mergeRows(args, this.shape, p.base === "matmul_q4_1" ? 4 : 3) : Float64Array.from(a);
    if (p.norm) {
      const g0 = p.base === "matmul_q4_1" ? 4 : 3;
      const gamma = new Float32Array(args[g0].buffer, args[g0].byteOffset, args[g0].length);
      const eps = f32(args[g0 + 1][0]);
      for (let i = 0; i < m; i++) {
        let ss = 0;
        for (let kk = 0; kk < k; kk++) ss += rows[i * k + kk] ** 2;
        const inv = 1 / Math.sqrt(ss / k + eps);
        for (let kk = 0; kk < k; kk++) rows[i * k + kk] = rows[i * k + kk] * inv * gamma[kk];
      }
    }
    if (!p.glu) return { rows, gate: null, up: null };
    const gate = new Float64Array(m * n), up = new Float64Array(m * n), w = new Float64Array(k);
    for (let j = 0; j < 2 * n; j++) {
      blockRow(p.base, k, args, j, w);
      const into = j < n ? gate : up;
      for (let i = 0; i < m; i++) {
        let acc = 0;
        for (let kk = 0; kk < k; kk++) acc += rows[i * k + kk] * w[kk];
        into[i * n + j % n] = acc;
      }
    }
    return { rows, gate, up };
  }
  /** The scale of flat output index `p`. */
  at(p) {
    const m = this.m, n = this.n;
    const bi = Math.floor(p / (m * n));
    const i = Math.floor(p / n) % m;
    const j = p % n;
    const [bv, rv] = this.epilogueTerms(p);
    if (this.block?.gate && this.block.up) {
      const g = this.block.gate[p], u = this.block.up[p];
      const s = this.rows[i] * (1.1 * Math.abs(u) * this.cols[j] + (Math.abs(g) + 0.28) * this.cols[n + j]) + Math.abs(silu(g) * u) + Math.abs(rv);
      return Math.max(s, Number.MIN_VALUE);
    }
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
    if (this.block) {
      const [, rv2] = this.epilogueTerms(p);
      if (this.block.gate && this.block.up) return silu(this.block.gate[p]) * this.block.up[p] + rv2;
      const w = new Float64Array(k);
      blockRow(this.parsed.base, k, this.args, j, w);
      for (let kk = 0; kk < k; kk++) acc += this.block.rows[i * k + kk] * w[kk];
      return acc + rv2;
    }
    if (this.parsed.base === "matmul_i16") {
      let s = 0;
      for (let kk = 0; kk < k; kk++) s += qaAt(this.args, k, i, kk) * qbAt(this.args, n, kk, j);
      acc = f32(this.args[2][i]) * f32(this.args[3][j]) * s;
    } else {
      for (let kk = 0; kk < k; kk++) acc += f32(a[(bi * m + i) * k + kk]) * bAt(this.op, this.shape, this.args, bi, kk, j);
    }
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
function checkPositions(scales, got, positions, tolerance = toleranceOf(scales.op)) {
  let maxErr = 0, worst = 0;
  for (const p of positions) {
    const g = got[p];
    const err = Number.isFinite(g) ? Math.abs(g - scales.reference(p)) / scales.at(p) : Infinity;
    if (err > maxErr || err === Infinity && maxErr !== Infinity) {
      maxErr = err;
      worst = p;
    }
  }
  return { ok: maxErr <= tolerance, maxErr, worst };
}
function defaultPositions(len2, count = 8) {
  const out = /* @__PURE__ */ new Set([0, len2 - 1]);
  for (let i = 1; out.size < Math.min(count, len2); i++) out.add(Math.floor(i * 0.618033988749895 * len2 % len2));
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
      const e = new Error(`queue ${url}: HTTP ${res.status}: ${await res.text().catch(() => "")}`);
      throw Object.assign(e, { status: res.status, retryAfter: retryAfterSeconds(res.headers.get("retry-after")) });
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
var GUARD_REPORT_WAIT_MS = 3e4;
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
  let min2 = Infinity;
  for (let i = 0; i < xs.length - 1; i++) min2 = Math.min(min2, xs[i]);
  return xs[xs.length - 1] >= NEW_LOW * min2;
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
var FAST_WARM_PAIRS = 6;
var FAST_WARM_MS = 400;
var SEQ_MIN_PAIRS = 3;
var SEQ_MAX_PAIRS = 9;
var SEQ_PROMISING_PAIRS = 18;
var SEQ_MIN_SD = 0.01;
var T995 = [Infinity, 63.66, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.25, 3.169];
function sequentialVerdict(cur, cand, floor = 0.01) {
  const n = Math.min(cur.length, cand.length);
  if (n < SEQ_MIN_PAIRS) return void 0;
  const r = [];
  for (let i = 0; i < n; i++) r.push(Math.log(cand[i] / cur[i]));
  const mean = r.reduce((a, b) => a + b, 0) / n;
  const sd = Math.max(SEQ_MIN_SD, Math.sqrt(r.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)));
  const half = (T995[Math.min(n - 1, T995.length - 1)] ?? 2.8) * sd / Math.sqrt(n);
  const need = Math.log(1 - floor);
  if (mean - half > need) return "slower";
  if (mean + half < need) return "faster";
  return void 0;
}
var T95 = [Infinity, 6.314, 2.92, 2.353, 2.132, 2.015, 1.943, 1.895, 1.86, 1.833, 1.812];
function meanLogRatio(cur, cand) {
  const n = Math.min(cur.length, cand.length);
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.log(cand[i] / cur[i]);
  return s / n;
}
function pairedFaster(cur, cand, floor = 0.01) {
  const n = Math.min(cur.length, cand.length);
  if (n < 2) return false;
  const r = [];
  for (let i = 0; i < n; i++) r.push(Math.log(cand[i] / cur[i]));
  const mean = r.reduce((a, b) => a + b, 0) / n;
  const sd = Math.max(SEQ_MIN_SD, Math.sqrt(r.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)));
  return mean + (T95[Math.min(n - 1, T95.length - 1)] ?? 1.75) * sd / Math.sqrt(n) < Math.log(1 - floor);
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
  /** Whether the fast policy applies (see `Policy`). */
  get fast() {
    return (this.t.policy ?? "fast") === "fast";
  }
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
        const [candTol, curTol] = [toleranceOf(this.scales.op, this.impl.meta.config), toleranceOf(this.scales.op, cur.meta.config)];
        const ref = checkPositions(this.scales, candOut, positions, candTol);
        if (!ref.ok) return this.fail(`output ${ref.worst} is off the reference by ${ref.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1e3);
        if (!this.t.currentBroken) {
          const curRef = checkPositions(this.scales, curOut, positions, curTol);
          if (!curRef.ok) {
            this.t.currentBroken = true;
            this.t.note(`the kernel in use is off the reference at output ${curRef.worst} (${curRef.maxErr.toExponential(2)})`);
          } else {
            const cmp = compareOutputs(this.scales, candOut, curOut, candTol + curTol);
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
        const enough = this.t.warmPairs !== void 0 ? into.cur.length >= this.t.warmPairs : warmedUp(into.cur, into.cand, performance.now() - this.firstRun) || into.cur.length >= (this.fast ? FAST_WARM_PAIRS : WARM_MAX_PAIRS) || this.warmMs > (this.fast ? FAST_WARM_MS : WARM_MAX_MS);
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
      const promising = this.fast && !pairedFaster(t.cur, t.cand) && meanLogRatio(t.cur, t.cand) < Math.log(1 - 0.01);
      const maxPairs = this.fast ? Math.min(this.t.timedPairs, SEQ_MAX_PAIRS) * (promising ? SEQ_PROMISING_PAIRS / SEQ_MAX_PAIRS : 1) : this.t.timedPairs;
      const settled = performance.now() - this.firstRun >= this.t.stopAfterMs;
      const verdict = this.fast && this.t.earlyReject && t.cur.length < maxPairs ? sequentialVerdict(t.cur, t.cand) : void 0;
      const early = this.t.earlyReject && t.cur.length < maxPairs && settled && (clearlySlower(t.cur, t.cand) || verdict === "slower" && noNewLow(t.cand) || futile(t.cur, t.cand));
      const won = !early && verdict === "faster";
      const full = this.fast ? t.cur.length >= maxPairs && (settled || t.cur.length >= 3 * maxPairs) : t.cur.length >= maxPairs;
      if (early || won || full) {
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
  /**
   * Whether the candidate beat the kernel in use. Legacy: its median is
   * lower beyond the noise of both sample sets (`fasterBeyondNoise`). Fast:
   * the paired test (`pairedFaster`) says it is faster by the 1 % floor at
   * one-sided 95 %, from the ratios of its timed pairs.
   */
  beatsCurrent() {
    if (this.rejectedEarly || this.timed.cand.length === 0) return false;
    return this.fast ? pairedFaster(this.timed.cur, this.timed.cand) : fasterBeyondNoise(this.timed.cand, this.timed.cur);
  }
};
var MAX_OPEN_RETRIES = 20;
var MIN_EVALUATED = 4;
var GAIN_PRIOR = 0.3;
var STOP_GAIN = 2e-3;
var FEATURE_WEIGHT = 20;
var PREDICT_MARGIN = 0.05;
var UNCERTAINTY = 0.1;
var FIT_RIDGE = 0.5;
var READ_AHEAD = 32;
var SIBLING_WEIGHT = 0.5;
function settingsOf(config) {
  const out = /* @__PURE__ */ new Map();
  for (const [k, v] of Object.entries(config ?? {})) out.set(k, typeof v === "number" ? v : JSON.stringify(v));
  return out;
}
function configDistance(a, b) {
  const x = settingsOf(a), y = settingsOf(b);
  let d = 0;
  for (const k of /* @__PURE__ */ new Set([...x.keys(), ...y.keys()])) {
    const u = x.get(k), v = y.get(k);
    if (u === v) continue;
    if (typeof u === "number" && typeof v === "number" && u > 0 && v > 0) d += Math.min(1, Math.abs(Math.log2(u / v)) / 2);
    else d += 1;
  }
  return d;
}
var Family = class {
  members = [];
  /** The family of `op` at `shape` (`K` and `N` kept, batch and `M` dropped) on `target`. */
  static key(op, shape, target) {
    const [, , k, n] = bmkn(op, shape);
    return `${op}/${k},${n}/${target}`;
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
    this.defaultSha = current.sha256;
    this.logRel.set(current.sha256, 0);
    this.configs.set(current.sha256, current.meta.config);
  }
  host;
  backend;
  op;
  shape;
  current;
  specs;
  phase = "waiting";
  /** Opening the queue failed on a rate limit this many times; the next try not before `openAfter`. */
  openRetries = 0;
  openAfter = 0;
  currentBroken = false;
  results = [];
  notes = [];
  total = 0;
  /** Candidates to evaluate at most (the queue is best first); the rest are not fetched. */
  maxCandidates = Infinity;
  started = 0;
  /** Timed sample pairs per candidate (at most, under the fast policy). */
  timedPairs;
  /** Fixed warm-up pairs (no JIT to wait for on a GPU), or undefined to wait until timings settle. */
  warmPairs;
  /** Stop timing a candidate once it is clearly slower or cannot win (see `clearlySlower`, `futile`, `sequentialVerdict`). */
  earlyReject = true;
  /** How long after a candidate's first call an early stop may come, ms. */
  stopAfterMs = STOP_AFTER_MS;
  /** The policy (see `Policy`); set before the first step. */
  policy = "fast";
  /** This kernel's share of the app's kernel time (0..1), kept up to date by the host; weighs the stop rule. */
  share = 1;
  /** The family this kernel belongs to, if any (set with `join`). */
  family = null;
  /**
   * How long each kind of unit of work took lately, ms (a decaying maximum;
   * Infinity until seen): a strict step starts a unit only when it fits.
   */
  unitMs = unitTimes();
  reader = null;
  /** Candidates read from the queue and not yet taken, in the server's order. */
  waiting = [];
  streamDone = false;
  /** Sibling winners (their settings as JSON) whose nearest candidate here was taken, and the candidate a winner picked. */
  hinted = /* @__PURE__ */ new Set();
  hintFor = /* @__PURE__ */ new Map();
  /** Resumes the queue's reading once a candidate is taken. */
  readMore = null;
  fetches = /* @__PURE__ */ new Map();
  ev = null;
  bench = null;
  abort = new AbortController();
  /** An adoption under way (the host may try the candidate in the app first); nothing else runs meanwhile. */
  adopting = null;
  /** Where candidates are evaluated when not here (the bench worker), and the ones sent there, oldest first. */
  remote = null;
  jobs = [];
  /** The default kernel (the first in use), each measured kernel's time over it (log), and their settings. */
  defaultSha;
  logRel = /* @__PURE__ */ new Map();
  configs = /* @__PURE__ */ new Map();
  /** Candidates measured since the last swap, and the swaps. */
  sinceWin = 0;
  wins = 0;
  /** The last time of the kernel in use measured here, µs (0 before any). */
  currentUs = 0;
  /** When the queue was found drained while the plan guard had not judged the kernel in use (0: not yet). */
  drainedAt = 0;
  get key() {
    return `${this.op}/${this.shape.join(",")}/${this.backend.target}`;
  }
  /** Joins `family` (kernels of the same op whose shapes differ only in batch and M). */
  join(family) {
    this.family = family;
    family.members.push(this);
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
  /** Whether a candidate is part-way through its evaluation (or its adoption). */
  get evaluating() {
    return this.ev !== null || this.jobs.length > 0 || this.adopting !== null;
  }
  /** Whether the queue's stream is open (opening, or being read). */
  get streaming() {
    return this.phase === "opening" || this.phase === "running" && !this.streamDone;
  }
  /** Candidate timings taken (warm-up and timed samples of both kernels) so far: the cost of tuning. */
  timings = 0;
  /**
   * The share of this kernel's time that its next candidate is expected to
   * save: GAIN_PRIOR / (1 + candidates since the last win)²; 0 once done.
   */
  get expectedGain() {
    if (this.phase === "done" || this.phase === "reporting") return 0;
    return GAIN_PRIOR / (1 + this.sinceWin) ** 2;
  }
  /**
   * Whether a heavier member of this kernel's family (a bigger share of the
   * app's time) is still tuning: its winner will be this kernel's first
   * candidate, so this one waits while other work is there.
   */
  get behindSibling() {
    if (this.transferPending) return false;
    for (const s of this.family?.members ?? []) {
      if (s !== this && s.share > this.share && s.phase !== "done" && s.phase !== "reporting") return true;
    }
    return false;
  }
  /**
   * Whether a sibling has swapped in a threaded winner (more than one part)
   * whose settings this kernel has neither measured nor been offered: a
   * transfer to try at once (`Webtune.idle()` takes such kernels first),
   * without waiting for the sibling to finish. Threaded winners are the
   * ones whose adoption waits on trials in the app's calls, one call of a
   * bucket a loop, so each waiting sibling would add its trial's seconds
   * after the heavier one's; a single-threaded winner still waits (on one
   * thread that order tuned the heaviest bucket later: BENCHMARKS.md,
   * issue 40, 2026-12-04).
   */
  get transferPending() {
    if (this.policy !== "fast" || !(this.phase === "waiting" || this.phase === "opening" || this.phase === "running")) return false;
    return this.threadedSiblingWinners().some((w) => this.pendingTransfer(w.meta.config));
  }
  /** The kernels in use of this kernel's siblings that are threaded winners (swapped in, with settings, more than one part). */
  threadedSiblingWinners() {
    return (this.family?.members ?? []).filter((s) => s !== this && s.current.sha256 !== s.defaultSha && s.current.meta.config && (s.current.meta.threads ?? 1) > 1).map((s) => s.current);
  }
  /**
   * Whether a sibling has in use, swapped in after its own trial in the
   * app's calls, a threaded kernel of the same settings as `impl`: the
   * host then asks fewer pairs of `impl`'s trial (see
   * `TRIAL_VOUCHED_PAIRS`), the plan guard still judging the model's calls.
   */
  vouched(impl) {
    if (this.policy !== "fast" || !((impl.meta.threads ?? 1) > 1) || !impl.meta.config) return false;
    return this.threadedSiblingWinners().some((w) => w.meta.threads === impl.meta.threads && configDistance(w.meta.config, impl.meta.config) === 0);
  }
  /** Whether sibling winner `w` is still to be tried here (neither offered nor measured). */
  pendingTransfer(w) {
    return !this.hinted.has(JSON.stringify(w)) && ![...this.logRel.keys()].some((sha) => configDistance(this.configs.get(sha), w) === 0);
  }
  /** Starts reading the queue (in the background). */
  open() {
    if (this.phase !== "waiting" || performance.now() < this.openAfter) return;
    this.phase = "opening";
    const q = new URLSearchParams({ op: this.op, shape: this.shape.join(","), target: this.backend.target });
    const url = `${this.host.server}/v1/sessions/${this.host.sessionId}/queue?${q}`;
    SseReader.open(url, this.abort.signal).then(
      (r) => {
        this.reader = r;
        this.phase = "running";
        this.read();
      },
      (e) => {
        this.note(`queue: ${e}`);
        const { status, retryAfter } = e;
        if (status !== void 0 && retryable(status) && this.openRetries < MAX_OPEN_RETRIES) {
          this.openAfter = performance.now() + 1e3 * Math.max(retryAfter ?? 0, Math.min(15, 2 ** this.openRetries++));
          this.phase = "waiting";
        } else {
          this.phase = "done";
        }
      }
    );
  }
  /**
   * Reads the queue's events in the background (events only: a candidate's
   * bytes are fetched when it is about to be taken), up to READ_AHEAD
   * candidates not yet taken (the server compiles each as it streams it),
   * so that the fast policy can take them in its own order. Stops at
   * `maxCandidates`.
   */
  read() {
    const loop = async () => {
      for (; ; ) {
        if (this.waiting.length + this.started >= this.maxCandidates) break;
        while (this.waiting.length >= READ_AHEAD && this.phase === "running") await new Promise((r) => this.readMore = r);
        if (this.phase !== "running") break;
        const e = await this.reader.next();
        if (!e || e.event === "done") break;
        if (e.event !== "candidate") continue;
        const cand = parseCandidate(e.data);
        this.total = cand.total;
        this.waiting.push(cand);
        this.configs.set(cand.sha256, cand.meta.config);
      }
    };
    loop().catch((err) => this.note(`queue read: ${err}`)).finally(() => {
      this.streamDone = true;
      this.reader?.cancel();
      this.reader = null;
    });
  }
  /** The candidate's bytes, fetched in the background (the kernel in use is not fetched again). */
  fetchOf(c) {
    let f = this.fetches.get(c.sha256);
    if (f) return f;
    const g = { done: false };
    f = g;
    this.fetches.set(c.sha256, g);
    if (c.sha256 === this.current.sha256) {
      g.value = { cand: c, impl: this.current };
      g.done = true;
      return g;
    }
    this.host.fetchKernel(c.url, this.backend.target).then(
      (bytes) => g.value = { cand: c, bytes },
      (err) => g.value = { cand: c, error: `fetch: ${err instanceof Error ? err.message : err}` }
    ).finally(() => g.done = true);
    return g;
  }
  /** Takes `c` off the waiting list (and lets the queue's reading go on). */
  take(c) {
    const hint = this.hintFor.get(c.sha256);
    if (hint) this.hinted.add(hint);
    this.hintFor.clear();
    this.waiting.splice(this.waiting.indexOf(c), 1);
    this.fetches.delete(c.sha256);
    const go = this.readMore;
    this.readMore = null;
    go?.();
  }
  /** What this tuner and its siblings measured, with the weight each counts for here. */
  known() {
    const out = [];
    const add = (t, w) => {
      for (const [sha, logRel] of t.logRel) out.push({ k: { config: t.configs.get(sha), logRel }, w });
    };
    add(this, 1);
    for (const s of this.family?.members ?? []) if (s !== this) add(s, SIBLING_WEIGHT * this.nearness(s));
    return out;
  }
  /**
   * How alike a sibling's shape is (1 for the same rows): 2^(−½·|log2 of
   * the ratio of their rows (batch × M)|), so a bucket 4× larger counts half.
   */
  nearness(s) {
    const rows = (t) => {
      const [b, m] = bmkn(t.op, t.shape);
      return Math.max(1, b * m);
    };
    return 2 ** (-0.5 * Math.abs(Math.log2(rows(s) / rows(this))));
  }
  /** The settings of the winners of this kernel's siblings (kernels they swapped in), nearest shape first. */
  siblingWinners() {
    const out = [];
    for (const s of this.family?.members ?? []) {
      if (s !== this && s.current.sha256 !== s.defaultSha && s.current.meta.config) out.push({ c: s.current.meta.config, near: this.nearness(s) });
    }
    return out.sort((a, b) => b.near - a.near).map((x) => x.c);
  }
  /**
   * The next candidate to take: null when none is left (or the fast
   * policy's stop rule says so), 'wait' while the queue is still being read
   * and nothing is there yet. Legacy: the server's order. Fast: the nearest
   * candidate to each sibling's winner first, then the server's order
   * re-ranked by what this device measured (`score`).
   */
  choose() {
    if (this.started >= this.maxCandidates) return null;
    if (this.policy === "fast" && this.shouldStop()) return null;
    if (!this.waiting.length) return this.streamDone ? null : "wait";
    if (this.policy === "legacy") return this.waiting[0];
    for (const w of this.siblingWinners()) {
      const key = JSON.stringify(w);
      if (this.hinted.has(key)) continue;
      const measured = [...this.logRel.keys()].some((sha) => configDistance(this.configs.get(sha), w) === 0);
      let best2 = null, bestD = Infinity;
      for (const c of this.waiting) {
        const d = configDistance(c.meta.config, w);
        if (d < bestD) best2 = c, bestD = d;
      }
      if (!best2 || measured) continue;
      if (bestD === 0 || this.streamDone || this.waiting.length >= READ_AHEAD) {
        this.hintFor.set(best2.sha256, key);
        return best2;
      }
    }
    if (this.waiting[0].index === 0) return this.waiting[0];
    const optimistic = this.optimism(this.fit());
    let best = this.waiting[0], bestScore = Infinity;
    this.waiting.forEach((c, i) => {
      const s = i + FEATURE_WEIGHT * optimistic(c);
      if (s < bestScore) bestScore = s, best = c;
    });
    return best;
  }
  /**
   * An additive model of log time by setting, fitted to what this kernel
   * and (at half weight) its siblings measured: the weighted mean log time
   * over the default kernel, and per setting (`field=value`) the weighted
   * mean deviation from it of the kernels that share it. The paper's
   * premise: a device's primitives cost the same whichever schedule uses them.
   */
  fit() {
    const known = this.known().map(({ k, w }) => ({ w, y: k.logRel, keys: [...settingsOf(k.config)].map(([f, v]) => `${f}=${v}`) }));
    let sw = 0, s = 0;
    for (const { w, y } of known) sw += w, s += w * y;
    const mean = sw > 0 ? s / sw : 0;
    const effect = /* @__PURE__ */ new Map();
    for (const { keys } of known) for (const key of keys) effect.set(key, 0);
    const fitted = known.map(() => mean);
    for (let sweep = 0; sweep < 8; sweep++) {
      for (const key of effect.keys()) {
        let num = 0, den = FIT_RIDGE;
        const e = effect.get(key);
        known.forEach((p, i) => {
          if (!p.keys.includes(key)) return;
          num += p.w * (p.y - (fitted[i] - e));
          den += p.w;
        });
        const next = num / den;
        known.forEach((p, i) => {
          if (p.keys.includes(key)) fitted[i] += next - e;
        });
        effect.set(key, next);
      }
    }
    return { mean, effect };
  }
  /** The model's log time over the default kernel for a schedule (settings never measured count 0). */
  predict(config, model) {
    let p = model.mean;
    for (const [f, v] of settingsOf(config)) p += model.effect.get(`${f}=${v}`) ?? 0;
    return p;
  }
  /**
   * A candidate's optimistic log time over the default kernel: the model's
   * prediction less UNCERTAINTY per setting, divided by 1 + the kernels
   * measured here that share it (a sibling's shape may differ where it
   * matters: what this kernel has not tried itself may still win here).
   */
  optimism(model) {
    const own = /* @__PURE__ */ new Map();
    for (const sha of this.logRel.keys()) {
      for (const [f, v] of settingsOf(this.configs.get(sha))) own.set(`${f}=${v}`, (own.get(`${f}=${v}`) ?? 0) + 1);
    }
    return (c) => {
      let u = 0;
      for (const [f, v] of settingsOf(c.meta.config)) u += UNCERTAINTY / (1 + (own.get(`${f}=${v}`) ?? 0));
      return this.predict(c.meta.config, model) - u;
    };
  }
  /** Fast policy: whether this kernel is tuned enough (its expected gain, weighed by its share of the app's time, is under STOP_GAIN). */
  shouldStop() {
    if (this.results.length < MIN_EVALUATED) return false;
    if (this.waiting.length && this.siblingWinners().some((w) => this.pendingTransfer(w))) return false;
    if (this.share * this.expectedGain >= STOP_GAIN) return false;
    const model = this.fit();
    const cur = this.logRel.get(this.current.sha256) ?? 0;
    const optimistic = this.optimism(model);
    return !this.waiting.some((c) => optimistic(c) < cur + Math.log(1 - PREDICT_MARGIN));
  }
  /** Records what a finished evaluation taught (times over the default kernel, wins). */
  learn(m, trace) {
    this.timings += trace ? 2 * (trace.warm_pairs + trace.timed_pairs) : 0;
    if (!m.ok || !(m.median_us > 0) || !(m.current_us > 0)) {
      this.sinceWin++;
      return;
    }
    const base = this.logRel.get(this.current.sha256) ?? 0;
    this.logRel.set(m.sha256, base + Math.log(m.median_us / m.current_us));
    this.currentUs = m.current_us;
  }
  /**
   * What a trial in the app's own calls taught: the app's ratio replaces the
   * bench's, in the setting model (so that the queue is ranked by what wins
   * in the app) and in the report (the candidate's time is the kernel in
   * use's bench time times that ratio, so that the crowd elects what won in
   * the app, not on the bench).
   */
  learnInApp(m, previous, r) {
    const ratio = r.cand_ms / r.cur_ms;
    if (!(ratio > 0) || !Number.isFinite(ratio)) return;
    m.bench_us = m.median_us;
    m.app_ratio = ratio;
    m.median_us = m.current_us * ratio;
    this.logRel.set(m.sha256, (this.logRel.get(previous.sha256) ?? 0) + Math.log(ratio));
  }
  /**
   * The plan guard put `impl` back in place of `lost`: the model's calls
   * ran `ratio` × slower on the plan with `lost` (and whatever else it
   * judged with it). `lost` is ranked that much behind `impl` from now on,
   * here and in the report.
   */
  reverted(impl, lost, ratio) {
    if (this.current.sha256 === lost.sha256) {
      this.current = impl;
      this.currentBroken = false;
    }
    const was = this.logRel.get(lost.sha256);
    const now = (this.logRel.get(impl.sha256) ?? 0) + Math.log(Math.max(1, ratio));
    if (was === void 0 || now > was) {
      this.logRel.set(lost.sha256, now);
      for (const m of this.results) if (m.sha256 === lost.sha256 && m.ok && m.median_us > 0) m.median_us *= Math.exp(now - (was ?? now));
    }
    this.note(`${lost.sha256.slice(0, 12)} put back to ${impl.sha256.slice(0, 12)} by the plan guard: the model's calls were ${ratio.toFixed(3)}x the time`);
  }
  /** Starts adopting `impl` (the host may first try it in the app's own calls); the tuner waits for it. */
  adopt(impl, m) {
    const previous = this.current;
    this.adopting = (async () => {
      let ok = false;
      try {
        const r = await this.host.adopt(this, impl, m, previous);
        if (typeof r === "object") this.learnInApp(m, previous, r);
        ok = typeof r === "object" ? r.ok : r !== false;
      } catch (e) {
        this.note(`adopting ${impl.sha256}: ${e instanceof Error ? e.message : e}`);
      }
      if (!ok) {
        this.sinceWin++;
        return;
      }
      this.current = impl;
      this.currentBroken = false;
      this.currentUs = m.median_us;
      this.sinceWin = 0;
      this.wins++;
    })().finally(() => this.adopting = null);
  }
  /**
   * Does the tuning work that is ready, until `deadline` (a performance.now()
   * time). Returns whether anything was done. Unless `strict`, one unit of
   * work is done even if it alone overruns the deadline (so that a kernel
   * longer than the budget still gets tuned); a strict step never starts a
   * unit that it does not expect to fit.
   */
  async step(deadline, strict = false) {
    if (this.adopting) return false;
    if (this.phase === "waiting") this.open();
    if (this.phase !== "running") return false;
    if (this.remote) return this.stepRemote();
    if (!this.ev) {
      const next = this.choose();
      if (next === "wait") return false;
      if (next === null) {
        if (!this.waitForGuard()) this.finish();
        return false;
      }
      const f = this.fetchOf(next);
      if (!f.done) return false;
      this.take(next);
      const value = next.sha256 === this.current.sha256 ? { cand: next, impl: this.current } : f.value;
      this.ev = new Evaluation(this, this.backend, next, value);
      this.started++;
      const guess = this.choose();
      if (guess && guess !== "wait") this.fetchOf(guess);
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
      const beats = m.ok && impl.sha256 !== this.current.sha256 && (this.currentBroken || ev.beatsCurrent());
      this.learn(m, m.trace);
      if (beats) this.adopt(impl, m);
      else if (m.ok) this.sinceWin++;
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
      this.learn(m, m.trace);
      if (j.answer?.beats && j.impl && j.impl.sha256 !== this.current.sha256) {
        this.adopt(j.impl, m);
        return true;
      } else if (m.ok) this.sinceWin++;
    }
    if (this.jobs.length >= 2) return did;
    if (this.jobs.length && this.policy === "fast") return did;
    const next = this.choose();
    if (next === "wait") return did;
    if (next === null) {
      if (!this.jobs.length && !this.waitForGuard()) this.finish();
      return did;
    }
    const fetching = this.fetchOf(next);
    if (!fetching.done) return did;
    this.take(next);
    const f = next.sha256 === this.current.sha256 ? { cand: next, impl: this.current } : fetching.value;
    this.started++;
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
  /** Whether the queue has nothing left to try: reporting, done, or waiting for the plan guard's verdict to report. */
  get drained() {
    return this.phase === "done" || this.phase === "reporting" || this.drainedAt > 0;
  }
  /** Whether the drained queue's report waits for the plan guard's verdict on the kernel in use (GUARD_REPORT_WAIT_MS at most). */
  waitForGuard() {
    if (!this.host.unjudged?.(this)) return false;
    const now = performance.now();
    this.drainedAt ||= now;
    return now - this.drainedAt < GUARD_REPORT_WAIT_MS;
  }
  finish() {
    this.reader?.cancel();
    this.reader = null;
    this.readMore?.();
    this.bench?.dispose();
    this.bench = null;
    this.phase = "reporting";
    const body = this.reportBody();
    if (!body) {
      this.phase = "done";
      this.host.reported(this, null, "no candidate passed its check; nothing to report");
      return;
    }
    (this.host.submit?.(body) ?? Reporter.one(this.host.server, this.host.sessionId, body)).then(({ response, error }) => {
      this.phase = "done";
      this.host.reported(this, response, error);
    });
  }
  /** Stops reading the queue; nothing is reported. */
  cancel() {
    this.abort.abort();
    this.readMore?.();
    this.reader?.cancel();
    this.bench?.dispose();
    this.bench = null;
    this.phase = "done";
  }
};

// src/plan-guard.ts
var GUARD_MIN_PAIRS = 4;
var GUARD_MAX_PAIRS = 12;
var GUARD_REJECT_RATIO = 1.15;
var GUARD_WARM_CYCLES = 1;
var GUARD_WARM_CALL_MS = 20;
var GUARD_MAX_MS = 8e3;
var GUARD_TIMEOUT_MS = 3e4;
var PlanGuard = class {
  constructor(onVerdict = () => {
  }, describe, now = () => performance.now()) {
    this.onVerdict = onVerdict;
    this.now = now;
    this.describe = describe ?? ((k) => ({ op: k.op ?? "?", shape: k.shape ?? [] }));
  }
  onVerdict;
  now;
  open = /* @__PURE__ */ new Map();
  waiters = [];
  /** Kernels some call went through the guard with (only their plans are judged). */
  seen = /* @__PURE__ */ new WeakSet();
  describe;
  /** Kinds under judgement now (a model with no calls of its own to make runs some of these). */
  pending() {
    return [...this.open.keys()];
  }
  /** Whether a call of `kind` over `kernels` would be judged now (a judgement open, or one it would open). */
  due(kind, kernels) {
    if (this.open.has(kind)) return true;
    const members = kernels.filter((k) => k.unguarded);
    return members.length > 0 && !kernels.some((k) => k.trialPending || !k.quiet) && !members.some((k) => this.holds(k));
  }
  /** Whether `k` runs in guarded calls and its kernel in use still waits for a verdict. */
  judges(k) {
    return k.unguarded && this.seen.has(k);
  }
  /** Whether `k` belongs to a kind under judgement (it must not take a new kernel or start a trial). */
  holds(k) {
    for (const j of this.open.values()) if (j.all.includes(k)) return true;
    return false;
  }
  /** Resolves once no judgement holds `k` (at once when none does). */
  async released(k) {
    while (this.holds(k)) {
      this.expire();
      if (!this.holds(k)) break;
      await new Promise((r) => {
        const timer = setTimeout(r, GUARD_TIMEOUT_MS + 10);
        this.waiters.push(() => {
          clearTimeout(timer);
          r();
        });
      });
    }
  }
  /**
   * Runs one model call of `kind` over `kernels` (every kernel the call
   * runs), on the plan the guard chooses for it, and times it. The call is
   * synchronous: no kernel may change while it runs.
   */
  call(kind, kernels, run) {
    this.expire();
    for (const k of kernels) this.seen.add(k);
    let j = this.open.get(kind);
    if (j && (j.all.some((k) => k.trialPending || !k.quiet) || j.members.some((k) => !k.unguarded))) {
      this.open.delete(kind);
      j = void 0;
      this.wake();
    }
    if (!j) {
      const members = kernels.filter((k) => k.unguarded);
      if (!members.length || kernels.some((k) => k.trialPending || !k.quiet) || members.some((k) => this.holds(k))) return run();
      j = { all: kernels, members, turn: 0, warm: GUARD_WARM_CYCLES, spent: 0, acc: { base: 0, plan: 0, baseCalls: 0, planCalls: 0 }, base: [], plan: [], last: this.now() };
      this.open.set(kind, j);
    }
    const turn = j.turn++ % 4;
    const onBase = turn === 0 || turn === 3;
    if (onBase) for (const m of j.members) m.useBase(true);
    const t0 = this.now();
    try {
      return run();
    } finally {
      const ms = this.now() - t0;
      if (onBase) for (const m of j.members) m.useBase(false);
      j.last = this.now();
      j.spent += ms;
      if (onBase) {
        j.acc.base += ms;
        j.acc.baseCalls++;
      } else {
        j.acc.plan += ms;
        j.acc.planCalls++;
      }
      if (turn === 3) this.pair(kind, j);
    }
  }
  /** Closes the cycle's pair and decides if the pairs allow it. */
  pair(kind, j) {
    const a = j.acc;
    j.acc = { base: 0, plan: 0, baseCalls: 0, planCalls: 0 };
    if (j.warm > 0 && (a.base + a.plan) / (a.baseCalls + a.planCalls) < GUARD_WARM_CALL_MS) {
      j.warm--;
      return;
    }
    j.warm = 0;
    j.base.push(a.base / a.baseCalls);
    j.plan.push(a.plan / a.planCalls);
    const n = j.base.length;
    const ratio = this.ratio(j);
    const faster = j.plan.filter((p, i) => p < j.base[i]).length;
    if (n <= 3 && n >= 2 && ratio >= GUARD_REJECT_RATIO && faster <= 1) return this.verdict(kind, j, false);
    if (n < GUARD_MIN_PAIRS) {
      if (n >= 2 && j.spent > 2 * GUARD_MAX_MS) this.verdict(kind, j, ratio <= 1);
      return;
    }
    const v = sequentialVerdict(j.base, j.plan, 0);
    if (v === "slower" || ratio > 1 && signFaster(j.plan, j.base, 0)) return this.verdict(kind, j, false);
    if (v === "faster" || ratio < 1 && signFaster(j.base, j.plan, 0)) return this.verdict(kind, j, true);
    if (n >= GUARD_MAX_PAIRS || j.spent > GUARD_MAX_MS) this.verdict(kind, j, ratio <= 1);
  }
  ratio(j) {
    return j.base.length ? median(j.plan.map((p, i) => p / j.base[i])) : 1;
  }
  /** Settles judgements whose kind got no call for GUARD_TIMEOUT_MS on what they have. */
  expire() {
    const now = this.now();
    for (const [kind, j] of this.open) if (now - j.last > GUARD_TIMEOUT_MS) this.verdict(kind, j, j.base.length < 2 || this.ratio(j) <= 1);
  }
  verdict(kind, j, keep) {
    this.open.delete(kind);
    const ratio = this.ratio(j);
    for (const m of j.members) m.settle(keep, ratio);
    this.onVerdict({
      kind,
      kernels: j.members.map((m) => this.describe(m)),
      kept: keep,
      ratio,
      pairs: j.base.length,
      base_ms: median(j.base),
      plan_ms: median(j.plan)
    });
    this.wake();
  }
  wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
};

// src/threads.ts
var CTRL = {
  GEN: 0,
  // generation of the current call; workers wait on it
  MAIL: 1,
  // messages posted to every worker so far
  NEXT: 2,
  // (generation << 8) | next part to claim
  DONE: 3,
  // parts of the current call finished
  PARTS: 4,
  KERNEL: 5,
  // pool id of the kernel
  NARGS: 6,
  ERROR: 7,
  // set by a worker whose part threw
  ARGS: 8,
  // up to 8 arguments
  BELL: 16,
  // rung (incremented) for every call and every message; workers wait on it
  APP_CALLS: 17,
  // the app's kernel calls started so far (see `ThreadPool.activity`)
  APP_BUSY: 18,
  // 1 while an app kernel runs
  WORDS: 19
};
var GEN_MASK = 8388607;
var READY_MS = 5e3;
function withTimeout(p, ms) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    p.then(() => (clearTimeout(t), resolve()), (e) => (clearTimeout(t), reject(e)));
  });
}
function threadsWanted(threads) {
  const cores = globalThis.navigator?.hardwareConcurrency || 1;
  const want = Math.floor(threads ?? Math.min(cores, 8));
  if (want <= 1) return { want, count: 1, why: threads !== void 0 ? `threads: ${threads} was asked for` : "this device reports one core" };
  const support = threadSupport();
  return support.ok ? { want, count: want } : { want, count: 1, why: support.why };
}
function threadSupport() {
  const g = globalThis;
  if (typeof SharedArrayBuffer !== "function") return { ok: false, why: "SharedArrayBuffer is unavailable (the page is not cross-origin isolated: send COOP same-origin and COEP require-corp)" };
  if (g.crossOriginIsolated === false) return { ok: false, why: "the page is not cross-origin isolated (send Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)" };
  if (typeof Worker !== "function" || typeof Blob !== "function" || typeof URL?.createObjectURL !== "function") return { ok: false, why: "workers are unavailable" };
  try {
    new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
  } catch {
    return { ok: false, why: "this engine cannot make a shared Wasm memory" };
  }
  return { ok: true };
}
var ThreadPool = class {
  /** Threads that run parts: the caller and `size - 1` workers. */
  size;
  ctrl;
  workers = [];
  gen = 0;
  nextId = 1;
  pending = /* @__PURE__ */ new Map();
  closed = false;
  /** Calls run, parts run, and parts the calling thread ran itself (the rest ran on workers). */
  stats = { calls: 0, parts: 0, callerParts: 0 };
  /** A pool of `size` threads (the caller counts as one). */
  constructor(size) {
    this.size = Math.max(1, Math.floor(size));
    this.ctrl = new Int32Array(new SharedArrayBuffer(CTRL.WORDS * 4));
    if (this.size === 1) return;
    const url = URL.createObjectURL(new Blob(['"use strict";\n(() => {\n  // src/threads.ts\n  var CTRL = {\n    GEN: 0,\n    // generation of the current call; workers wait on it\n    MAIL: 1,\n    // messages posted to every worker so far\n    NEXT: 2,\n    // (generation << 8) | next part to claim\n    DONE: 3,\n    // parts of the current call finished\n    PARTS: 4,\n    KERNEL: 5,\n    // pool id of the kernel\n    NARGS: 6,\n    ERROR: 7,\n    // set by a worker whose part threw\n    ARGS: 8,\n    // up to 8 arguments\n    BELL: 16,\n    // rung (incremented) for every call and every message; workers wait on it\n    APP_CALLS: 17,\n    // the app\'s kernel calls started so far (see `ThreadPool.activity`)\n    APP_BUSY: 18,\n    // 1 while an app kernel runs\n    WORDS: 19\n  };\n  function claim(c, gen, parts) {\n    for (; ; ) {\n      const v = Atomics.load(c, CTRL.NEXT);\n      if (v >>> 8 !== gen) return -1;\n      const p = v & 255;\n      if (p >= parts) return -1;\n      if (Atomics.compareExchange(c, CTRL.NEXT, v, v + 1) === v) return p;\n    }\n  }\n  function runClaimed(c, gen, parts, run) {\n    let n = 0;\n    for (let p = claim(c, gen, parts); p >= 0; p = claim(c, gen, parts), n++) {\n      try {\n        run(p);\n      } finally {\n        Atomics.add(c, CTRL.DONE, 1);\n      }\n    }\n    return n;\n  }\n\n  // src/pool-worker.ts\n  var SPIN_MS = 0.3;\n  var ctrl = null;\n  var kernels = /* @__PURE__ */ new Map();\n  var mail = 0;\n  var seen = 0;\n  var args = [];\n  var scope = self;\n  scope.onmessage = (e) => {\n    const m = e.data;\n    if (m.kind === "init") {\n      ctrl = m.ctrl;\n      seen = Atomics.load(ctrl, CTRL.GEN);\n    } else {\n      mail++;\n      try {\n        const inst = new WebAssembly.Instance(m.module, { env: { memory: m.memory } });\n        kernels.set(m.id, inst.exports[m.entry]);\n        scope.postMessage({ kind: "ready", id: m.id });\n      } catch (err) {\n        scope.postMessage({ kind: "error", id: m.id, error: `pool worker cannot instantiate kernel: ${err}` });\n      }\n    }\n    loop();\n  };\n  function loop() {\n    const c = ctrl;\n    if (!c) return;\n    let idleSince = performance.now();\n    for (; ; ) {\n      const bell = Atomics.load(c, CTRL.BELL);\n      if (Atomics.load(c, CTRL.MAIL) !== mail) return;\n      const gen = Atomics.load(c, CTRL.GEN);\n      if (gen === seen) {\n        if (performance.now() - idleSince < SPIN_MS) continue;\n        Atomics.wait(c, CTRL.BELL, bell);\n        idleSince = performance.now();\n        continue;\n      }\n      seen = gen;\n      const fn = kernels.get(c[CTRL.KERNEL]);\n      const parts = c[CTRL.PARTS];\n      args.length = c[CTRL.NARGS];\n      for (let i = 0; i < args.length; i++) args[i] = c[CTRL.ARGS + i];\n      if (fn) {\n        runClaimed(c, gen, parts, (p) => {\n          try {\n            fn(...args, p);\n          } catch {\n            Atomics.store(c, CTRL.ERROR, 1);\n          }\n        });\n      }\n      idleSince = performance.now();\n    }\n  }\n})();\n'], { type: "text/javascript" }));
    try {
      for (let i = 1; i < this.size; i++) {
        const w = new Worker(url);
        w.onmessage = (e) => this.reply(e.data);
        w.onerror = (e) => {
          e.preventDefault();
          for (const [id] of this.pending) this.reply({ kind: "error", id, error: `pool worker: ${e.message}` });
        };
        w.postMessage({ kind: "init", ctrl: this.ctrl });
        this.workers.push(w);
      }
    } finally {
      URL.revokeObjectURL(url);
    }
  }
  reply(r) {
    const p = this.pending.get(r.id);
    if (!p) return;
    if (r.kind === "error") {
      this.pending.delete(r.id);
      p.reject(new Error(r.error));
    } else if (--p.left === 0) {
      this.pending.delete(r.id);
      p.resolve();
    }
  }
  /**
   * Instantiates `module` (a threaded kernel, or any module whose `entry`
   * takes the part number last) on `memory` in every worker; `instance` is
   * the calling thread's. Calls may start at once: until a worker has
   * its instance, the caller runs that worker's share.
   */
  prepare(module, memory, instance, entry = "kernel_part") {
    const part = instance.exports[entry];
    if (typeof part !== "function") throw new Error(`a threaded kernel must export ${entry}`);
    const id = this.nextId++;
    const ready = this.workers.length === 0 ? Promise.resolve() : new Promise((resolve, reject) => this.pending.set(id, { left: this.workers.length, resolve, reject }));
    for (const w of this.workers) w.postMessage({ kind: "kernel", id, module, memory, entry });
    if (this.workers.length) {
      Atomics.add(this.ctrl, CTRL.MAIL, 1);
      this.ring();
    }
    return { id, part, ready: withTimeout(ready, READY_MS) };
  }
  /**
   * The words a bench worker reads to time candidates only while the app's
   * kernels are not running (`APP_CALLS`, `APP_BUSY`): on a page with
   * threads, a candidate timed while the app's kernels use the cores would
   * look slower the more threads it uses.
   */
  get activity() {
    return this.ctrl;
  }
  /** Runs `f`, an app kernel call, marked in `activity` (every `run` is). */
  appCall(f) {
    const c = this.ctrl;
    Atomics.add(c, CTRL.APP_CALLS, 1);
    Atomics.store(c, CTRL.APP_BUSY, 1);
    try {
      f();
    } finally {
      Atomics.store(c, CTRL.APP_BUSY, 0);
      Atomics.notify(c, CTRL.APP_BUSY);
    }
  }
  /**
   * Runs parts `0..parts` of `k` with these arguments and returns when all
   * are done. Synchronous: the caller runs parts itself and then spins for
   * the parts workers took (at most one part's time).
   */
  run(k, args, parts) {
    this.appCall(() => this.runParts(k, args, parts));
  }
  runParts(k, args, parts) {
    const c = this.ctrl;
    this.stats.calls++;
    this.stats.parts += parts;
    if (this.workers.length === 0 || this.closed) {
      for (let p = 0; p < parts; p++) k.part(...args, p);
      this.stats.callerParts += parts;
      return;
    }
    if (args.length > 8 || parts > 255) throw new Error(`a pool call takes at most 8 arguments and 255 parts, got ${args.length} and ${parts}`);
    const gen = this.gen = this.gen + 1 & GEN_MASK;
    for (let i = 0; i < args.length; i++) c[CTRL.ARGS + i] = args[i];
    c[CTRL.NARGS] = args.length;
    c[CTRL.PARTS] = parts;
    c[CTRL.KERNEL] = k.id;
    Atomics.store(c, CTRL.DONE, 0);
    Atomics.store(c, CTRL.ERROR, 0);
    Atomics.store(c, CTRL.NEXT, gen << 8);
    Atomics.store(c, CTRL.GEN, gen);
    this.ring();
    this.stats.callerParts += runClaimed(c, gen, parts, (p) => k.part(...args, p));
    while (Atomics.load(c, CTRL.DONE) < parts) {
    }
    if (Atomics.load(c, CTRL.ERROR)) throw new Error("a thread-pool worker failed to run its part of the kernel");
  }
  /**
   * Wakes every worker. A worker reads the bell before it looks for work and
   * waits only while the bell still has that value, so no call or message
   * can slip in between its look and its wait unnoticed.
   */
  ring() {
    Atomics.add(this.ctrl, CTRL.BELL, 1);
    Atomics.notify(this.ctrl, CTRL.BELL);
  }
  close() {
    this.closed = true;
    for (const w of this.workers) w.terminate();
    this.workers = [];
    for (const p of this.pending.values()) p.reject(new Error("thread pool closed"));
    this.pending.clear();
  }
};
function claim(c, gen, parts) {
  for (; ; ) {
    const v = Atomics.load(c, CTRL.NEXT);
    if (v >>> 8 !== gen) return -1;
    const p = v & 255;
    if (p >= parts) return -1;
    if (Atomics.compareExchange(c, CTRL.NEXT, v, v + 1) === v) return p;
  }
}
function runClaimed(c, gen, parts, run) {
  let n = 0;
  for (let p = claim(c, gen, parts); p >= 0; p = claim(c, gen, parts), n++) {
    try {
      run(p);
    } finally {
      Atomics.add(c, CTRL.DONE, 1);
    }
  }
  return n;
}
function sharedImport(bytes) {
  const r = new Reader(bytes);
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 97 || bytes[2] !== 115 || bytes[3] !== 109) throw new Error("not a Wasm module");
  r.at = 8;
  while (r.at < bytes.length) {
    const start = r.at;
    const id = bytes[r.at++];
    const size = r.leb();
    const end = r.at + size;
    if (id !== 2) {
      r.at = end;
      continue;
    }
    const count = r.leb();
    const out = [...leb(count)];
    for (let i = 0; i < count; i++) {
      const from = r.at;
      r.skip(r.leb());
      r.skip(r.leb());
      const kind = bytes[r.at++];
      out.push(...bytes.subarray(from, r.at));
      if (kind !== 2) throw new Error(`sharedImport: an import of kind ${kind}: webtune kernels import one memory only`);
      const flags = bytes[r.at++];
      const min2 = r.leb();
      const max = flags & 1 ? r.leb() : 65536;
      if (flags & 2) return bytes;
      if (flags & ~1) throw new Error(`sharedImport: memory limits flags ${flags}`);
      out.push(3, ...leb(min2), ...leb(max));
    }
    if (r.at !== end) throw new Error("sharedImport: the import section has trailing bytes");
    const section = [2, ...leb(out.length), ...out];
    const res = new Uint8Array(bytes.length - (end - start) + section.length);
    res.set(bytes.subarray(0, start), 0);
    res.set(section, start);
    res.set(bytes.subarray(end), start + section.length);
    return res;
  }
  return bytes;
}
var Reader = class {
  constructor(b) {
    this.b = b;
  }
  b;
  at = 0;
  leb() {
    let v = 0, shift = 0;
    for (; ; ) {
      if (this.at >= this.b.length) throw new Error("sharedImport: truncated module");
      const x = this.b[this.at++];
      v += (x & 127) * 2 ** shift;
      if (!(x & 128)) return v;
      shift += 7;
    }
  }
  skip(n) {
    this.at += n;
  }
};
function leb(v) {
  const out = [];
  do {
    let x = v % 128;
    v = Math.floor(v / 128);
    if (v) x |= 128;
    out.push(x);
  } while (v);
  return out;
}
function timeQuietly(activity, sample, maxWaitMs = 1e3, tries = 5) {
  for (let attempt = 1; ; attempt++) {
    const until = performance.now() + maxWaitMs;
    while (Atomics.load(activity, CTRL.APP_BUSY) !== 0 && performance.now() < until) Atomics.wait(activity, CTRL.APP_BUSY, 1, 5);
    const calls = Atomics.load(activity, CTRL.APP_CALLS);
    const ms = sample();
    if (attempt >= tries || Atomics.load(activity, CTRL.APP_CALLS) === calls && Atomics.load(activity, CTRL.APP_BUSY) === 0) return ms;
  }
}

// src/wasm.ts
var PAGE = 65536;
function align(n, a) {
  return Math.ceil(n / a) * a;
}
function newMemory(pages, shared) {
  return shared ? new WebAssembly.Memory({ initial: pages, maximum: 65536, shared: true }) : new WebAssembly.Memory({ initial: pages });
}
function isShared(memory) {
  return typeof SharedArrayBuffer === "function" && memory.buffer instanceof SharedArrayBuffer;
}
function threadsOf(meta) {
  return meta.threads && meta.threads > 1 ? meta.threads : 0;
}
async function instantiate(impl, memory, pool) {
  const inst = await WebAssembly.instantiate(impl.module, { env: { memory } });
  const parts = threadsOf(impl.meta);
  if (parts) {
    if (!pool) throw new Error(`kernel ${impl.sha256} is threaded (${parts} parts) but this runtime has no thread pool`);
    const k = pool.prepare(impl.module, memory, inst);
    await k.ready;
    return (...o) => pool.run(k, o, parts);
  }
  const fn = inst.exports[impl.meta.entry || "kernel"];
  if (typeof fn !== "function") throw new Error(`kernel ${impl.sha256} exports no \`${impl.meta.entry}\``);
  return fn;
}
function ensureBytes(memory, bytes) {
  const have = memory.buffer.byteLength;
  if (have < bytes) memory.grow(Math.ceil((bytes - have) / PAGE));
}
var WasmBench = class {
  constructor(specs, meta, pool, shared, activity) {
    this.pool = pool;
    this.activity = activity;
    let end = 0;
    for (const s of specs) {
      this.offsets.push(end);
      end = align(end + s.elems * 4, 64);
    }
    this.scratch = end;
    this.outElems = specs[specs.length - 1].elems;
    this.memory = newMemory(Math.max(1, meta.memory_pages_min ?? 0, Math.ceil(end / PAGE)), shared);
  }
  pool;
  activity;
  resolutionMs = timerResolutionMs();
  // 1 % rounding, and never under 0.5 ms (call overhead and clock reads).
  minSampleMs = Math.max(0.5, 100 * this.resolutionMs);
  memory;
  offsets = [];
  scratch;
  outElems;
  async setInputs(args) {
    for (let i = 0; i < args.length; i++) new Uint32Array(this.memory.buffer, this.offsets[i], args[i].length).set(args[i]);
  }
  async prepare(impl) {
    if (impl.benchFn && impl.benchMemory === this.memory) return impl.benchFn;
    ensureBytes(this.memory, Math.max((impl.meta.memory_pages_min ?? 0) * PAGE, this.scratch + (impl.meta.scratch_bytes ?? 0)));
    const fn = await instantiate(impl, this.memory, this.pool);
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
    return this.activity ? timeQuietly(this.activity, () => this.timeCalls(fn, o, reps)) : this.timeCalls(fn, o, reps);
  }
  timeCalls(fn, o, reps) {
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
      // matmul_i16's A, B, SA, SB, then bias, R and C (and a scratch pointer): up to 8.
      case 6: {
        const [a, b, c, d, e, f] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f);
        t1 = performance.now();
        break;
      }
      case 7: {
        const [a, b, c, d, e, f, g] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f, g);
        t1 = performance.now();
        break;
      }
      case 8: {
        const [a, b, c, d, e, f, g, h] = o;
        t0 = performance.now();
        for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f, g, h);
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
  /**
   * `activity`: in a bench worker on a page with threads, the page pool's
   * activity words; samples are then timed while the app's kernels pause.
   */
  constructor(pool = null, shared = pool !== null, activity = null) {
    this.pool = pool;
    this.shared = shared;
    this.activity = activity;
  }
  pool;
  shared;
  activity;
  target = "wasm";
  async load(bytes, meta) {
    if (typeof bytes === "string") throw new Error("a Wasm kernel must be bytes");
    const parts = threadsOf(meta);
    if (parts && !this.pool) throw new Error(`kernel ${meta.sha256} is threaded (${parts} parts); this page runs Wasm on one thread`);
    const module = await WebAssembly.compile(this.shared ? sharedImport(new Uint8Array(bytes)) : bytes);
    return { sha256: meta.sha256, meta, module, bytes };
  }
  bench(specs, meta) {
    return new WasmBench(specs, meta, this.pool, this.shared, this.activity);
  }
};
var WasmKernelBinding = class {
  constructor(memory, pool = null) {
    this.memory = memory;
    this.pool = pool;
  }
  memory;
  pool;
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
    const inner = await instantiate(impl, this.memory, this.pool);
    const pool = this.pool;
    const fn = pool && !threadsOf(impl.meta) ? (...o) => pool.appCall(() => inner(...o)) : inner;
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
  /**
   * `threads`: the page's pool size (the worker times threaded kernels on a
   * pool of its own that size); `shared`: whether the page's memory, and so
   * every module's import, is shared; `activity`: the page pool's words
   * saying when the app's kernels run, so that the worker times between them.
   */
  constructor(threads = 1, shared = false, activity = null) {
    this.threads = threads;
    this.shared = shared;
    this.activity = activity;
    const url = URL.createObjectURL(new Blob(['"use strict";\n(() => {\n  // src/ops.ts\n  var BLOCK_OPS = ["matmul_q4", "matmul_q4_1", "matmul_q8_0"];\n  var NO_F16 = ["matmul_i16", "matmul_q4_1", "matmul_q8_0"];\n  function parseOp(op) {\n    const [base, ...rest] = op.split("+");\n    if (!(base in DIMS)) {\n      throw new Error(`unknown op \\`${op}\\`: use matmul, batch_matmul, matmul_q4, matmul_i16, matmul_q4_1 or matmul_q8_0`);\n    }\n    const f16 = rest.length > 0 && rest[rest.length - 1] === "f16";\n    if (f16) rest.pop();\n    const out = { base, bias: false, act: "none", residual: false, norm: false, glu: false, merge: false, dtype: f16 ? "f16" : "f32" };\n    const rank = { merge: 1, rms_norm: 2, bias: 3, gelu: 4, relu: 4, swiglu: 4, residual: 5 };\n    let last = 0;\n    for (const p of rest) {\n      const r = rank[p];\n      if (r === void 0 || r <= last) {\n        throw new Error(\n          `op \\`${op}\\`: an epilogue is \\`+bias\\`, then \\`+gelu\\` or \\`+relu\\`, then \\`+residual\\`, each at most once and in that order, e.g. matmul+bias+gelu (block-quantised ops: \\`+merge\\` or \\`+rms_norm\\`, then \\`+swiglu\\`, then \\`+residual\\`); \\`+f16\\` comes last`\n        );\n      }\n      last = r;\n      if (p === "bias") out.bias = true;\n      else if (p === "residual") out.residual = true;\n      else if (p === "rms_norm") out.norm = true;\n      else if (p === "swiglu") out.glu = true;\n      else if (p === "merge") out.merge = true;\n      else out.act = p;\n    }\n    const block = BLOCK_OPS.includes(base);\n    if (block && (out.bias || out.act !== "none")) {\n      throw new Error(`${base} takes no epilogue but \\`+merge\\`, \\`+rms_norm\\`, \\`+swiglu\\` and \\`+residual\\`: \\`+bias\\`, \\`+gelu\\` and \\`+relu\\` are for only matmul, batch_matmul and matmul_i16`);\n    }\n    if (!block && (out.norm || out.glu || out.merge)) {\n      throw new Error(`${base} takes no \\`+merge\\`, \\`+rms_norm\\` or \\`+swiglu\\`: only matmul_q4, matmul_q4_1 and matmul_q8_0 do`);\n    }\n    if (out.merge && out.norm) throw new Error(`${base}: \\`+merge\\` and \\`+rms_norm\\` do not go together (the merged rows are not normalised)`);\n    if (f16 && NO_F16.includes(base)) {\n      throw new Error(`${base} has no f16 form: only matmul, batch_matmul and matmul_q4 do`);\n    }\n    if (f16 && block && rest.length > 0) throw new Error(`${base} has no f16 form with an epilogue`);\n    return out;\n  }\n  var DIMS = { matmul: 3, batch_matmul: 4, matmul_q4: 3, matmul_i16: 3, matmul_q4_1: 3, matmul_q8_0: 3 };\n  function i16Bound(k) {\n    return Math.min(32767, Math.floor(Math.sqrt(2147483647 / k)));\n  }\n  function bmkn(op, shape) {\n    return parseOp(op).base === "batch_matmul" ? [shape[0], shape[1], shape[2], shape[3]] : [1, shape[0], shape[1], shape[2]];\n  }\n  function spec(name, dtype, shape) {\n    return { name, dtype, shape, elems: shape.reduce((a, b) => a * b, 1) };\n  }\n  function argSpecs(op, shape) {\n    const [b, m, k, n] = bmkn(op, shape);\n    const p = parseOp(op);\n    const fl = p.dtype;\n    const fused = (a, bb, c) => [\n      a,\n      bb,\n      ...p.base === "matmul_i16" ? [spec("SA", "f32", [m]), spec("SB", "f32", [n])] : [],\n      ...p.bias ? [spec("bias", fl, [n])] : [],\n      ...p.residual ? [spec("R", fl, c.shape)] : [],\n      c\n    ];\n    switch (p.base) {\n      case "matmul":\n        return fused(spec("A", fl, [m, k]), spec("B", fl, [k, n]), spec("C", fl, [m, n]));\n      case "batch_matmul":\n        return fused(spec("A", fl, [b, m, k]), spec("B", fl, [b, k, n]), spec("C", fl, [b, m, n]));\n      case "matmul_i16": {\n        const bound = i16Bound(k);\n        return fused({ ...spec("A", "u32", [m, k / 2]), i16Bound: bound }, { ...spec("B", "u32", [k / 2, n]), i16Bound: bound }, spec("C", "f32", [m, n]));\n      }\n      case "matmul_q4":\n      case "matmul_q4_1":\n      case "matmul_q8_0": {\n        const rows = p.glu ? 2 * n : n;\n        const [h, c] = p.merge ? [shape[3], shape[4]] : [0, 0];\n        return [\n          p.merge ? spec("P", fl, [m, h, c, k / h]) : spec("A", fl, [m, k]),\n          spec("W", "u32", [rows, k / (p.base === "matmul_q8_0" ? 4 : 8)]),\n          spec(p.base === "matmul_q4" ? "S" : "D", fl, [rows, k / 32]),\n          ...p.base === "matmul_q4_1" ? [spec("Mn", "f32", [rows, k / 32])] : [],\n          ...p.norm ? [spec("G", fl, [k]), spec("E", fl, [1])] : [],\n          ...p.merge ? [spec("PM", fl, [m, h, c]), spec("PL", fl, [m, h, c])] : [],\n          ...p.residual ? [spec("R", fl, [m, n])] : [],\n          spec("C", fl, [m, n])\n        ];\n      }\n    }\n  }\n  var F16F = new Float32Array(1);\n  var F16U = new Uint32Array(F16F.buffer);\n  function f16Bits(x) {\n    F16F[0] = x;\n    const u = F16U[0];\n    const sign = u >>> 16 & 32768;\n    const exp = u >>> 23 & 255;\n    const man = u & 8388607;\n    if (exp === 255) return sign | 31744 | (man ? 512 | man >>> 13 : 0);\n    const e = exp - 127 + 15;\n    if (e >= 31) return sign | 31744;\n    if (e <= 0) {\n      if (e < -10) return sign;\n      const m = man | 8388608;\n      const shift = 14 - e;\n      const half = 1 << shift - 1;\n      const rest2 = m & (1 << shift) - 1;\n      let h2 = m >>> shift;\n      if (rest2 > half || rest2 === half && h2 & 1) h2++;\n      return sign | h2;\n    }\n    let h = e << 10 | man >>> 13;\n    const rest = man & 8191;\n    if (rest > 4096 || rest === 4096 && h & 1) h++;\n    return sign | h;\n  }\n  function f16Value(h) {\n    const e = h >>> 10 & 31, m = h & 1023;\n    const v = e === 0 ? m * 2 ** -24 : e === 31 ? m ? NaN : Infinity : (1 + m / 1024) * 2 ** (e - 15);\n    return h & 32768 ? -v : v;\n  }\n  function f16Round(x) {\n    return f16Value(f16Bits(x));\n  }\n\n  // src/check.ts\n  var TOLERANCE = 1e-5;\n  var TOLERANCE_F16 = 4 / 2048 + TOLERANCE;\n  var A16_ROUNDING = 0.51 * Math.sqrt(32) / 32767;\n  function toleranceOf(op, config) {\n    return (parseOp(op).dtype === "f16" ? TOLERANCE_F16 : TOLERANCE) + (config?.quantize_a === true ? A16_ROUNDING : 0);\n  }\n  var F = new Float32Array(1);\n  var U = new Uint32Array(F.buffer);\n  function f32(bitsValue) {\n    U[0] = bitsValue;\n    return F[0];\n  }\n  function erf(x) {\n    const ax = Math.abs(x);\n    if (ax < 2.5) {\n      let term = ax;\n      let sum = ax;\n      for (let n = 1; n < 100 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {\n        term *= -ax * ax / n;\n        sum += term / (2 * n + 1);\n      }\n      return Math.sign(x) * 2 * sum / Math.sqrt(Math.PI);\n    }\n    let f = ax;\n    for (let n = 60; n >= 1; n--) f = ax + n / 2 / f;\n    const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;\n    return Math.sign(x) * (1 - erfc);\n  }\n  function epilogue(p, x, bias, r) {\n    let v = x + bias;\n    if (p.act === "gelu") v = 0.5 * v * (1 + erf(v / Math.SQRT2));\n    else if (p.act === "relu") v = Math.max(v, 0);\n    return v + r;\n  }\n  function i16(word, hi) {\n    return hi ? word >> 16 : word << 16 >> 16;\n  }\n  function qaAt(args, k, m, kk) {\n    return i16(args[0][m * (k >> 1) + (kk >> 1)], kk & 1);\n  }\n  function qbAt(args, n, kk, j) {\n    return i16(args[1][(kk >> 1) * n + j], kk & 1);\n  }\n  function bAt(op, shape, args, bi, kk, j) {\n    const [, , k, n] = bmkn(op, shape);\n    if (parseOp(op).base === "matmul_i16") return f32(args[3][j]) * qbAt(args, n, kk, j);\n    if (parseOp(op).base === "matmul_q4") {\n      const word = args[1][j * (k / 8) + (kk >>> 3)];\n      const q = word >>> 4 * (kk & 7) & 15;\n      return (q - 8) * f32(args[2][j * (k / 32) + (kk >>> 5)]);\n    }\n    if (parseOp(op).base === "matmul_q4_1") {\n      const word = args[1][j * (k / 8) + (kk >>> 3)];\n      const q = word >>> 4 * (kk & 7) & 15;\n      const blk = j * (k / 32) + (kk >>> 5);\n      return q * f32(args[2][blk]) + f32(args[3][blk]);\n    }\n    if (parseOp(op).base === "matmul_q8_0") {\n      const word = args[1][j * (k / 4) + (kk >>> 2)];\n      const q = word << 24 - 8 * (kk & 3) >> 24;\n      return q * f32(args[2][j * (k / 32) + (kk >>> 5)]);\n    }\n    return f32(args[1][bi * k * n + kk * n + j]);\n  }\n  function blockColumnNorms(base, k, n, args, out) {\n    const w = args[1];\n    const d = new Float32Array(args[2].buffer, args[2].byteOffset, args[2].length);\n    const mn = base === "matmul_q4_1" ? new Float32Array(args[3].buffer, args[3].byteOffset, args[3].length) : null;\n    const blocks = k / 32;\n    for (let j = 0; j < n; j++) {\n      let s = 0;\n      for (let b = 0; b < blocks; b++) {\n        const scale = d[j * blocks + b];\n        let acc = 0;\n        if (base === "matmul_q8_0") {\n          const w0 = j * (k / 4) + b * 8;\n          for (let i = 0; i < 8; i++) {\n            const word = w[w0 + i];\n            for (let sh = 0; sh < 32; sh += 8) {\n              const q = word << 24 - sh >> 24;\n              acc += q * q;\n            }\n          }\n          s += acc * scale * scale;\n        } else if (mn) {\n          const m = mn[j * blocks + b];\n          const w0 = j * (k / 8) + b * 4;\n          for (let i = 0; i < 4; i++) {\n            const word = w[w0 + i];\n            for (let sh = 0; sh < 32; sh += 4) {\n              const v = (word >>> sh & 15) * scale + m;\n              acc += v * v;\n            }\n          }\n          s += acc;\n        } else {\n          const w0 = j * (k / 8) + b * 4;\n          for (let i = 0; i < 4; i++) {\n            const word = w[w0 + i];\n            for (let sh = 0; sh < 32; sh += 4) {\n              const q = (word >>> sh & 15) - 8;\n              acc += q * q;\n            }\n          }\n          s += acc * scale * scale;\n        }\n      }\n      out[j] = Math.sqrt(s);\n    }\n  }\n  function blockRow(base, k, args, row, out) {\n    const w = args[1];\n    const d = new Float32Array(args[2].buffer, args[2].byteOffset, args[2].length);\n    const mn = base === "matmul_q4_1" ? new Float32Array(args[3].buffer, args[3].byteOffset, args[3].length) : null;\n    const per = base === "matmul_q8_0" ? 4 : 8;\n    for (let kk = 0; kk < k; kk++) {\n      const word = w[row * (k / per) + Math.floor(kk / per)];\n      const blk = row * (k / 32) + (kk >>> 5);\n      if (per === 4) out[kk] = (word << 24 - 8 * (kk & 3) >> 24) * d[blk];\n      else if (mn) out[kk] = (word >>> 4 * (kk & 7) & 15) * d[blk] + mn[blk];\n      else out[kk] = ((word >>> 4 * (kk & 7) & 15) - 8) * d[blk];\n    }\n  }\n  function mergeRows(args, shape, first) {\n    const [m, k, , h, c] = shape;\n    const d = k / h;\n    const view = (x) => new Float32Array(x.buffer, x.byteOffset, x.length);\n    const pv = view(args[0]), pm = view(args[first]), pl = view(args[first + 1]);\n    const out = new Float64Array(m * k), w = new Float64Array(c);\n    for (let i = 0; i < m; i++) {\n      for (let hh = 0; hh < h; hh++) {\n        const part0 = (i * h + hh) * c;\n        let top = -Infinity;\n        for (let cc = 0; cc < c; cc++) top = Math.max(top, pm[part0 + cc]);\n        let den = 0;\n        for (let cc = 0; cc < c; cc++) {\n          w[cc] = Math.exp(pm[part0 + cc] - top);\n          den += w[cc] * pl[part0 + cc];\n        }\n        for (let dd = 0; dd < d; dd++) {\n          let num = 0;\n          for (let cc = 0; cc < c; cc++) num += w[cc] * pv[(part0 + cc) * d + dd];\n          out[(i * h + hh) * d + dd] = num / den;\n        }\n      }\n    }\n    return out;\n  }\n  function silu(x) {\n    return x / (1 + Math.exp(-x));\n  }\n  var Scales = class {\n    constructor(op, shape, args) {\n      this.op = op;\n      this.shape = shape;\n      this.args = args;\n      const [b, m, k, n] = bmkn(op, shape);\n      this.m = m;\n      this.n = n;\n      this.parsed = parseOp(op);\n      const p = this.parsed;\n      const blockOp = ["matmul_q4", "matmul_q4_1", "matmul_q8_0"].includes(p.base);\n      const first = p.base === "matmul_i16" ? 4 : blockOp ? (p.base === "matmul_q4_1" ? 4 : 3) + (p.norm || p.merge ? 2 : 0) : 2;\n      this.biasArg = p.bias ? first : -1;\n      this.residualArg = p.residual ? first + (p.bias ? 1 : 0) : -1;\n      this.rows = new Float64Array(b * m);\n      this.cols = new Float64Array(b * n * (p.glu ? 2 : 1));\n      if (blockOp && (p.norm || p.glu || p.residual || p.merge)) {\n        this.block = this.blockEpilogue(m, k, n);\n        for (let i = 0; i < m; i++) {\n          let s = 0;\n          for (let kk = 0; kk < k; kk++) s += this.block.rows[i * k + kk] ** 2;\n          this.rows[i] = Math.sqrt(s);\n        }\n        blockColumnNorms(p.base, k, n * (p.glu ? 2 : 1), args, this.cols);\n        return;\n      }\n      if (this.parsed.base === "matmul_i16") {\n        const half = k >> 1;\n        for (let i = 0; i < m; i++) {\n          let s = 0;\n          for (let p2 = 0; p2 < half; p2++) {\n            const w = args[0][i * half + p2], lo = i16(w, 0), hi = i16(w, 1);\n            s += lo * lo + hi * hi;\n          }\n          this.rows[i] = Math.abs(f32(args[2][i])) * Math.sqrt(s);\n        }\n        for (let p2 = 0; p2 < half; p2++) {\n          for (let j = 0; j < n; j++) {\n            const w = args[1][p2 * n + j], lo = i16(w, 0), hi = i16(w, 1);\n            this.cols[j] += lo * lo + hi * hi;\n          }\n        }\n        for (let j = 0; j < n; j++) this.cols[j] = Math.abs(f32(args[3][j])) * Math.sqrt(this.cols[j]);\n        return;\n      }\n      const a = new Float32Array(args[0].buffer, args[0].byteOffset, args[0].length);\n      for (let r = 0; r < b * m; r++) {\n        let s = 0;\n        for (let kk = 0; kk < k; kk++) s += a[r * k + kk] * a[r * k + kk];\n        this.rows[r] = Math.sqrt(s);\n      }\n      if (["matmul_q4", "matmul_q4_1", "matmul_q8_0"].includes(this.parsed.base)) {\n        blockColumnNorms(this.parsed.base, k, n, args, this.cols);\n        return;\n      }\n      const bv = new Float32Array(args[1].buffer, args[1].byteOffset, args[1].length);\n      for (let bi = 0; bi < b; bi++) {\n        const cols = this.cols.subarray(bi * n, (bi + 1) * n);\n        for (let kk = 0; kk < k; kk++) {\n          const row = (bi * k + kk) * n;\n          for (let j = 0; j < n; j++) cols[j] += bv[row + j] * bv[row + j];\n        }\n        for (let j = 0; j < n; j++) cols[j] = Math.sqrt(cols[j]);\n      }\n    }\n    op;\n    shape;\n    args;\n    rows;\n    cols;\n    m;\n    n;\n    parsed;\n    /** Argument numbers of the epilogue\'s bias and R (ABI order A, B, [SA, SB,] bias, R, C). */\n    biasArg;\n    residualArg;\n    block = null;\n    /** A\'s rows as a block op\'s product reads them, and under +swiglu every output\'s gate and up. */\n    blockEpilogue(m, k, n) {\n      const p = this.parsed, args = this.args;\n      const a = new Float32Array(args[0].buffer, args[0].byteOffset, args[0].length);\n      const rows = p.merge ? mergeRows(args, this.shape, p.base === "matmul_q4_1" ? 4 : 3) : Float64Array.from(a);\n      if (p.norm) {\n        const g0 = p.base === "matmul_q4_1" ? 4 : 3;\n        const gamma = new Float32Array(args[g0].buffer, args[g0].byteOffset, args[g0].length);\n        const eps = f32(args[g0 + 1][0]);\n        for (let i = 0; i < m; i++) {\n          let ss = 0;\n          for (let kk = 0; kk < k; kk++) ss += rows[i * k + kk] ** 2;\n          const inv = 1 / Math.sqrt(ss / k + eps);\n          for (let kk = 0; kk < k; kk++) rows[i * k + kk] = rows[i * k + kk] * inv * gamma[kk];\n        }\n      }\n      if (!p.glu) return { rows, gate: null, up: null };\n      const gate = new Float64Array(m * n), up = new Float64Array(m * n), w = new Float64Array(k);\n      for (let j = 0; j < 2 * n; j++) {\n        blockRow(p.base, k, args, j, w);\n        const into = j < n ? gate : up;\n        for (let i = 0; i < m; i++) {\n          let acc = 0;\n          for (let kk = 0; kk < k; kk++) acc += rows[i * k + kk] * w[kk];\n          into[i * n + j % n] = acc;\n        }\n      }\n      return { rows, gate, up };\n    }\n    /** The scale of flat output index `p`. */\n    at(p) {\n      const m = this.m, n = this.n;\n      const bi = Math.floor(p / (m * n));\n      const i = Math.floor(p / n) % m;\n      const j = p % n;\n      const [bv, rv] = this.epilogueTerms(p);\n      if (this.block?.gate && this.block.up) {\n        const g = this.block.gate[p], u = this.block.up[p];\n        const s = this.rows[i] * (1.1 * Math.abs(u) * this.cols[j] + (Math.abs(g) + 0.28) * this.cols[n + j]) + Math.abs(silu(g) * u) + Math.abs(rv);\n        return Math.max(s, Number.MIN_VALUE);\n      }\n      return Math.max(this.rows[bi * m + i] * this.cols[bi * n + j] + Math.abs(bv) + Math.abs(rv), Number.MIN_VALUE);\n    }\n    /** The bias and residual values that output `p` adds (0 where the op has none). */\n    epilogueTerms(p) {\n      const bv = this.biasArg >= 0 ? f32(this.args[this.biasArg][p % this.n]) : 0;\n      const rv = this.residualArg >= 0 ? f32(this.args[this.residualArg][p]) : 0;\n      return [bv, rv];\n    }\n    /** The f64 reference of flat output index `p`, in O(K). */\n    reference(p) {\n      const [, m, k, n] = bmkn(this.op, this.shape);\n      const bi = Math.floor(p / (m * n));\n      const i = Math.floor(p / n) % m;\n      const j = p % n;\n      const a = this.args[0];\n      let acc = 0;\n      if (this.block) {\n        const [, rv2] = this.epilogueTerms(p);\n        if (this.block.gate && this.block.up) return silu(this.block.gate[p]) * this.block.up[p] + rv2;\n        const w = new Float64Array(k);\n        blockRow(this.parsed.base, k, this.args, j, w);\n        for (let kk = 0; kk < k; kk++) acc += this.block.rows[i * k + kk] * w[kk];\n        return acc + rv2;\n      }\n      if (this.parsed.base === "matmul_i16") {\n        let s = 0;\n        for (let kk = 0; kk < k; kk++) s += qaAt(this.args, k, i, kk) * qbAt(this.args, n, kk, j);\n        acc = f32(this.args[2][i]) * f32(this.args[3][j]) * s;\n      } else {\n        for (let kk = 0; kk < k; kk++) acc += f32(a[(bi * m + i) * k + kk]) * bAt(this.op, this.shape, this.args, bi, kk, j);\n      }\n      if (this.biasArg < 0 && this.residualArg < 0 && this.parsed.act === "none") return acc;\n      const [bv, rv] = this.epilogueTerms(p);\n      return epilogue(this.parsed, acc, bv, rv);\n    }\n  };\n  function compareOutputs(scales, got, want, tolerance) {\n    let maxErr = 0, worst = 0;\n    for (let p = 0; p < got.length; p++) {\n      const g = got[p], w = want[p];\n      const err = Number.isFinite(g) && Number.isFinite(w) ? Math.abs(g - w) / scales.at(p) : Infinity;\n      if (err > maxErr || err === Infinity && maxErr !== Infinity) {\n        maxErr = err;\n        worst = p;\n      }\n    }\n    return { ok: maxErr <= tolerance, maxErr, worst };\n  }\n  function checkPositions(scales, got, positions, tolerance = toleranceOf(scales.op)) {\n    let maxErr = 0, worst = 0;\n    for (const p of positions) {\n      const g = got[p];\n      const err = Number.isFinite(g) ? Math.abs(g - scales.reference(p)) / scales.at(p) : Infinity;\n      if (err > maxErr || err === Infinity && maxErr !== Infinity) {\n        maxErr = err;\n        worst = p;\n      }\n    }\n    return { ok: maxErr <= tolerance, maxErr, worst };\n  }\n  function defaultPositions(len, count = 8) {\n    const out = /* @__PURE__ */ new Set([0, len - 1]);\n    for (let i = 1; out.size < Math.min(count, len); i++) out.add(Math.floor(i * 0.618033988749895 * len % len));\n    return [...out].sort((a, b) => a - b);\n  }\n\n  // src/rng.ts\n  var POISON = 2143346349;\n  function mul64(out, hi, lo, ch, cl) {\n    const a0 = lo & 65535, a1 = lo >>> 16, b0 = cl & 65535, b1 = cl >>> 16;\n    const c1 = a1 * b0, c2 = a0 * b1;\n    const low = a0 * b0 + ((c1 & 65535) + (c2 & 65535)) * 65536;\n    const l = low >>> 0;\n    out[1] = l;\n    out[0] = a1 * b1 + (c1 >>> 16) + (c2 >>> 16) + (low - l) / 4294967296 + Math.imul(hi, cl) + Math.imul(lo, ch);\n  }\n  var SplitMix64 = class {\n    // [state hi, state lo, last draw hi, last draw lo]\n    s = new Uint32Array(4);\n    m = new Uint32Array(2);\n    constructor(seed) {\n      const x = BigInt.asUintN(64, seed) ^ 0x9e3779b97f4a7c15n;\n      this.s[0] = Number(x >> 32n);\n      this.s[1] = Number(x & 0xffffffffn);\n    }\n    /** High 32 bits of the last draw. */\n    get outHi() {\n      return this.s[2];\n    }\n    /** Low 32 bits of the last draw. */\n    get outLo() {\n      return this.s[3];\n    }\n    /** Draws the next 64 bits into `outHi`/`outLo`. */\n    next() {\n      const s = this.s, m = this.m;\n      const lo = s[1] + 2135587861;\n      s[0] = s[0] + 2654435769 + (lo > 4294967295 ? 1 : 0);\n      s[1] = lo;\n      let h = s[0], l = s[1];\n      mul64(m, (h ^ h >>> 30) >>> 0, (l ^ (l >>> 30 | h << 2)) >>> 0, 3210233709, 484763065);\n      h = m[0];\n      l = m[1];\n      mul64(m, (h ^ h >>> 27) >>> 0, (l ^ (l >>> 27 | h << 5)) >>> 0, 2496678331, 321982955);\n      h = m[0];\n      l = m[1];\n      s[2] = h ^ h >>> 31;\n      s[3] = l ^ (l >>> 31 | h << 1);\n    }\n    /** The 64-bit state, for the Wasm filler to go on from. */\n    get state() {\n      return BigInt(this.s[0]) << 32n | BigInt(this.s[1]);\n    }\n    set state(x) {\n      this.s[0] = Number(BigInt.asUintN(64, x) >> 32n);\n      this.s[1] = Number(x & 0xffffffffn);\n    }\n    /** Full 64-bit draw as a BigInt (for tests). */\n    nextBig() {\n      this.next();\n      return BigInt(this.outHi) << 32n | BigInt(this.outLo);\n    }\n  };\n  function nonzero(hi) {\n    const x = 2 * (hi >>> 8) / 16777216 - 1;\n    return Math.abs(x) < 1 / 64 ? 0.5 : x;\n  }\n  function i16Word(raw, r) {\n    const half = (h) => h % (2 * r + 1) - r || 1;\n    return (half(raw & 65535) & 65535 | half(raw >>> 16) << 16) >>> 0;\n  }\n  var TENTH = Math.fround(0.1);\n  var HUNDREDTH = Math.fround(0.01);\n  var CHUNK_WORDS = 1 << 15;\n  function sleb(v) {\n    const out = [];\n    for (; ; ) {\n      const b = Number(v & 0x7fn);\n      v >>= 7n;\n      const last = v === 0n && !(b & 64) || v === -1n && (b & 64) !== 0;\n      out.push(last ? b : b | 128);\n      if (last) return out;\n    }\n  }\n  function f64(x) {\n    const d = new DataView(new ArrayBuffer(8));\n    d.setFloat64(0, x, true);\n    return [...new Uint8Array(d.buffer)];\n  }\n  function fillerBytes() {\n    const i64 = (v) => [66, ...sleb(BigInt.asIntN(64, v))];\n    const get = (i) => [32, i], set = (i) => [33, i], tee = (i) => [34, i];\n    const body = [\n      2,\n      64,\n      3,\n      64,\n      ...get(1),\n      ...get(2),\n      79,\n      13,\n      1,\n      // p >= end: out\n      ...get(0),\n      ...i64(0x9e3779b97f4a7c15n),\n      124,\n      ...tee(0),\n      ...get(0),\n      ...i64(30n),\n      136,\n      133,\n      ...i64(0xbf58476d1ce4e5b9n),\n      126,\n      ...tee(4),\n      ...get(4),\n      ...i64(27n),\n      136,\n      133,\n      ...i64(0x94d049bb133111ebn),\n      126,\n      ...tee(4),\n      ...get(4),\n      ...i64(31n),\n      136,\n      133,\n      ...set(4),\n      ...get(3),\n      69,\n      4,\n      64,\n      ...get(1),\n      ...get(4),\n      167,\n      54,\n      2,\n      0,\n      // i32.store of the low word\n      5,\n      ...get(4),\n      ...i64(32n),\n      136,\n      167,\n      ...set(5),\n      ...get(5),\n      65,\n      8,\n      118,\n      184,\n      68,\n      ...f64(2),\n      162,\n      68,\n      ...f64(16777216),\n      163,\n      68,\n      ...f64(1),\n      161,\n      ...set(6),\n      ...get(6),\n      153,\n      68,\n      ...f64(1 / 64),\n      99,\n      4,\n      64,\n      68,\n      ...f64(0.5),\n      ...set(6),\n      11,\n      ...get(3),\n      65,\n      2,\n      70,\n      4,\n      64,\n      ...get(6),\n      153,\n      68,\n      ...f64(TENTH),\n      162,\n      182,\n      187,\n      68,\n      ...f64(HUNDREDTH),\n      160,\n      ...set(6),\n      11,\n      ...get(1),\n      ...get(6),\n      182,\n      56,\n      2,\n      0,\n      // f32.store\n      11,\n      ...get(1),\n      65,\n      4,\n      106,\n      ...set(1),\n      12,\n      0,\n      11,\n      11,\n      ...get(0),\n      11\n    ];\n    const func = [3, 1, 126, 1, 127, 1, 124, ...body];\n    const section = (id, content) => [id, ...uleb(content.length), ...content];\n    const name = (s) => [s.length, ...[...s].map((c) => c.charCodeAt(0))];\n    return new Uint8Array([\n      0,\n      97,\n      115,\n      109,\n      1,\n      0,\n      0,\n      0,\n      ...section(1, [1, 96, 4, 126, 127, 127, 127, 1, 126]),\n      ...section(3, [1, 0]),\n      ...section(5, [1, 0, CHUNK_WORDS * 4 / 65536]),\n      ...section(7, [2, ...name("fill"), 0, 0, ...name("mem"), 2, 0]),\n      ...section(10, [1, ...uleb(func.length), ...func])\n    ]);\n  }\n  function uleb(n) {\n    const out = [];\n    do {\n      const b = n & 127;\n      n >>>= 7;\n      out.push(n ? b | 128 : b);\n    } while (n);\n    return out;\n  }\n  var filler;\n  function wasmFiller() {\n    if (filler !== void 0) return filler;\n    try {\n      const inst = new WebAssembly.Instance(new WebAssembly.Module(fillerBytes()));\n      filler = inst.exports;\n      filler.fill(0n, 0, 0, 0);\n    } catch {\n      filler = null;\n    }\n    return filler;\n  }\n  var InputGen = class {\n    /** `specs` are all arguments; the last (the output) is not generated. `useWasm`: false forces the JS path. */\n    constructor(specs, seed, useWasm = true) {\n      this.specs = specs;\n      this.useWasm = useWasm;\n      this.rng = new SplitMix64(seed);\n      this.args = specs.slice(0, -1).map((s) => new Uint32Array(s.elems));\n    }\n    specs;\n    useWasm;\n    rng;\n    arg = 0;\n    pos = 0;\n    args;\n    get done() {\n      return this.arg >= this.args.length;\n    }\n    /** Generates up to `n` more words; returns true when all are there. */\n    fill(n) {\n      const rng = this.rng;\n      while (n > 0 && !this.done) {\n        const out = this.args[this.arg];\n        const s = this.specs[this.arg];\n        const w = this.useWasm ? wasmFiller() : null;\n        const end = Math.min(out.length, this.pos + Math.min(n, w ? CHUNK_WORDS : n));\n        n -= end - this.pos;\n        if (w) {\n          const mode = s.dtype === "u32" ? 0 : s.name === "S" || s.name === "D" || s.name === "E" ? 2 : 1;\n          rng.state = w.fill(rng.state, 0, (end - this.pos) * 4, mode);\n          out.set(new Uint32Array(w.mem.buffer, 0, end - this.pos), this.pos);\n        } else if (s.dtype === "u32") {\n          for (let i = this.pos; i < end; i++) {\n            rng.next();\n            out[i] = rng.outLo;\n          }\n        } else {\n          const f = new Float32Array(out.buffer, out.byteOffset, out.length);\n          if (s.name === "S" || s.name === "D" || s.name === "E") {\n            for (let i = this.pos; i < end; i++) {\n              rng.next();\n              f[i] = Math.fround(Math.abs(nonzero(rng.outHi)) * TENTH) + HUNDREDTH;\n            }\n          } else {\n            for (let i = this.pos; i < end; i++) {\n              rng.next();\n              f[i] = nonzero(rng.outHi);\n            }\n          }\n        }\n        if (s.name === "Mn") {\n          const f = new Float32Array(out.buffer, out.byteOffset, out.length);\n          const d = new Float32Array(this.args[this.arg - 1].buffer);\n          for (let i = this.pos; i < end; i++) f[i] = -d[i] * Math.fround(7.5 + 0.5 * f[i]);\n        }\n        if (s.name === "PL") {\n          const f = new Float32Array(out.buffer, out.byteOffset, out.length);\n          for (let i = this.pos; i < end; i++) f[i] = Math.fround(1.5 + 0.5 * f[i]);\n        }\n        if (s.i16Bound !== void 0) for (let i = this.pos; i < end; i++) out[i] = i16Word(out[i], s.i16Bound);\n        if (s.dtype === "f16") {\n          const f = new Float32Array(out.buffer, out.byteOffset, out.length);\n          for (let i = this.pos; i < end; i++) f[i] = f16Round(f[i]);\n        }\n        this.pos = end;\n        if (end === out.length) {\n          this.arg++;\n          this.pos = 0;\n        }\n      }\n      return this.done;\n    }\n  };\n\n  // src/reports.ts\n  var MAX_BATCH_BYTES = 56 * 1024;\n\n  // src/stats.ts\n  function median(xs) {\n    const s = [...xs].sort((a, b) => a - b);\n    const n = s.length;\n    if (n === 0) return NaN;\n    return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;\n  }\n  function relNoise(xs) {\n    const m = median(xs);\n    if (!(m > 0)) return Infinity;\n    return 1.4826 * median(xs.map((x) => Math.abs(x - m))) / m;\n  }\n  function fasterBeyondNoise(cand, cur, floor = 0.01) {\n    const threshold = Math.max(floor, 2 * Math.hypot(relNoise(cand), relNoise(cur)));\n    return median(cand) < median(cur) * (1 - threshold);\n  }\n\n  // src/tuner.ts\n  var WARM_MAX_PAIRS = 15;\n  var WARM_MAX_MS = 1500;\n  var WARM_MIN_MS = 8;\n  var MAX_RESTARTS = 2;\n  var NEW_LOW = 0.9;\n  var REJECT_RATIO = 1.25;\n  var REJECT_PAIRS = 3;\n  var FUTILE_PAIRS = 5;\n  var STOP_AFTER_MS = 30;\n  function noNewLow(xs) {\n    if (xs.length < 2) return false;\n    let min = Infinity;\n    for (let i = 0; i < xs.length - 1; i++) min = Math.min(min, xs[i]);\n    return xs[xs.length - 1] >= NEW_LOW * min;\n  }\n  function warmedUp(cur, cand, sinceFirstRunMs) {\n    return cur.length >= 2 && cand.length >= 2 && sinceFirstRunMs >= WARM_MIN_MS && noNewLow(cur) && noNewLow(cand);\n  }\n  function clearlySlower(cur, cand) {\n    const n = Math.min(cur.length, cand.length);\n    if (n < REJECT_PAIRS || !noNewLow(cand)) return false;\n    for (let i = n - REJECT_PAIRS; i < n; i++) if (!(cand[i] >= REJECT_RATIO * cur[i])) return false;\n    return true;\n  }\n  function futile(cur, cand) {\n    const n = Math.min(cur.length, cand.length);\n    if (n < FUTILE_PAIRS || !noNewLow(cand)) return false;\n    const ratios = [];\n    for (let i = 0; i < n; i++) ratios.push(cand[i] / cur[i]);\n    return median(ratios) >= 1;\n  }\n  var FAST_WARM_PAIRS = 6;\n  var FAST_WARM_MS = 400;\n  var SEQ_MIN_PAIRS = 3;\n  var SEQ_MAX_PAIRS = 9;\n  var SEQ_PROMISING_PAIRS = 18;\n  var SEQ_MIN_SD = 0.01;\n  var T995 = [Infinity, 63.66, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.25, 3.169];\n  function sequentialVerdict(cur, cand, floor = 0.01) {\n    const n = Math.min(cur.length, cand.length);\n    if (n < SEQ_MIN_PAIRS) return void 0;\n    const r = [];\n    for (let i = 0; i < n; i++) r.push(Math.log(cand[i] / cur[i]));\n    const mean = r.reduce((a, b) => a + b, 0) / n;\n    const sd = Math.max(SEQ_MIN_SD, Math.sqrt(r.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)));\n    const half = (T995[Math.min(n - 1, T995.length - 1)] ?? 2.8) * sd / Math.sqrt(n);\n    const need = Math.log(1 - floor);\n    if (mean - half > need) return "slower";\n    if (mean + half < need) return "faster";\n    return void 0;\n  }\n  var T95 = [Infinity, 6.314, 2.92, 2.353, 2.132, 2.015, 1.943, 1.895, 1.86, 1.833, 1.812];\n  function meanLogRatio(cur, cand) {\n    const n = Math.min(cur.length, cand.length);\n    let s = 0;\n    for (let i = 0; i < n; i++) s += Math.log(cand[i] / cur[i]);\n    return s / n;\n  }\n  function pairedFaster(cur, cand, floor = 0.01) {\n    const n = Math.min(cur.length, cand.length);\n    if (n < 2) return false;\n    const r = [];\n    for (let i = 0; i < n; i++) r.push(Math.log(cand[i] / cur[i]));\n    const mean = r.reduce((a, b) => a + b, 0) / n;\n    const sd = Math.max(SEQ_MIN_SD, Math.sqrt(r.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)));\n    return mean + (T95[Math.min(n - 1, T95.length - 1)] ?? 1.75) * sd / Math.sqrt(n) < Math.log(1 - floor);\n  }\n  function unitTimes() {\n    return { fill: Infinity, scales: Infinity, checkCur: Infinity, checkCand: Infinity };\n  }\n  function noteUnitTime(times, u, ms) {\n    const prev = times[u];\n    times[u] = Number.isFinite(prev) ? Math.max(ms, 0.9 * prev) : ms;\n  }\n  function failed(c, error) {\n    return {\n      sha256: c.sha256,\n      index: c.index,\n      total: c.total,\n      source: c.source,\n      ticket: c.ticket,\n      ok: false,\n      error,\n      median_us: 0,\n      current_us: 0,\n      noise: 0,\n      runs: 0\n    };\n  }\n  var Evaluation = class {\n    constructor(t, backend, cand, fetched) {\n      this.t = t;\n      this.backend = backend;\n      this.cand = cand;\n      this.fetched = fetched;\n      this.gen = new InputGen(t.specs, cand.seed);\n      this.impl = fetched.impl;\n      this.loadError = fetched.error;\n    }\n    t;\n    backend;\n    cand;\n    fetched;\n    phase = "load";\n    result = null;\n    gen;\n    scales = null;\n    curOut = null;\n    reps = 1;\n    perCall = 0;\n    turn = 0;\n    warmMs = 0;\n    firstRun = 0;\n    warm = { cur: [], cand: [] };\n    timed = { cur: [], cand: [] };\n    samples;\n    rejectedEarly = false;\n    restarts = 0;\n    t0 = performance.now();\n    ends = {};\n    busyMs = 0;\n    slices = 0;\n    busyBy = {};\n    longest = 0;\n    longestPhase = "";\n    impl;\n    loading = null;\n    /** Whether the fast policy applies (see `Policy`). */\n    get fast() {\n      return (this.t.policy ?? "fast") === "fast";\n    }\n    loadError;\n    /**\n     * Compiles the candidate in the background while its inputs are made. It\n     * starts only when this candidate\'s turn comes, never while another is\n     * being timed: a compile (V8\'s background tiers, a GPU driver\'s pipeline\n     * build) competes for the same cores and would inflate the timings.\n     */\n    startLoad() {\n      this.loading = this.backend.load(this.fetched.bytes, this.cand.meta).then(\n        (impl) => {\n          this.impl = impl;\n        },\n        (e) => {\n          this.loadError = `load: ${e instanceof Error ? e.message : e}`;\n        }\n      );\n      this.loading.then(() => {\n        this.loading = null;\n        this.ends.load = performance.now() - this.t0;\n      });\n    }\n    /** Records a failure; `us` is the time of the one run it had, if it ran. */\n    fail(error, us) {\n      this.result = us === void 0 ? failed(this.cand, error) : { ...failed(this.cand, error), median_us: Math.max(us, 1e-3), runs: 1 };\n      this.phase = "done";\n    }\n    /**\n     * Does what fits before `deadline`. Unless `strict`, at least one unit of\n     * work is done even when it alone overruns; a strict call starts a unit\n     * only when its estimated time fits.\n     */\n    async step(bench, deadline, strict = false) {\n      const t = performance.now();\n      const from = this.phase;\n      try {\n        await this.work(bench, deadline, strict);\n      } finally {\n        const now = performance.now();\n        this.busyMs += now - t;\n        this.slices++;\n        this.busyBy[from] = (this.busyBy[from] ?? 0) + (now - t);\n        if (now - t > this.longest) {\n          this.longest = now - t;\n          this.longestPhase = from;\n        }\n        this.markPhases(from, now);\n      }\n    }\n    /** Notes the end time of the phases left since `from`. */\n    markPhases(from, now) {\n      const order = ["load", "inputs", "check", "warm", "time", "done"];\n      for (let i = order.indexOf(from); i < order.indexOf(this.phase); i++) {\n        const p = order[i];\n        if (p !== "time" && p !== "done" && this.ends[p] === void 0) this.ends[p] = now - this.t0;\n      }\n      if (this.result && !this.result.trace) {\n        const e = this.ends, at = now - this.t0;\n        this.result.trace = {\n          load_ms: e.load ?? at,\n          inputs_ms: e.inputs ?? at,\n          check_ms: e.check ?? at,\n          warm_ms: e.warm ?? at,\n          done_ms: at,\n          busy_ms: this.busyMs,\n          slices: this.slices,\n          warm_pairs: this.warm.cur.length,\n          timed_pairs: this.timed.cur.length,\n          busy_by_phase: this.busyBy,\n          longest_ms: this.longest,\n          longest_phase: this.longestPhase,\n          warm_cur: this.warm.cur,\n          warm_cand: this.warm.cand\n        };\n      }\n    }\n    /** Runs one unit of work, timing it for the tuner\'s estimates. */\n    async unit(u, f) {\n      const t = performance.now();\n      try {\n        return await f();\n      } finally {\n        this.t.noteUnit(u, performance.now() - t);\n      }\n    }\n    async work(bench, deadline, strict) {\n      if (this.phase === "load") {\n        if (!this.impl && !this.fetched.bytes) return this.fail(this.loadError ?? "not fetched");\n        if (!this.impl && !this.loading) this.startLoad();\n        this.phase = "inputs";\n      }\n      if (this.phase === "done") return;\n      const cur = this.t.current;\n      let worked = strict;\n      const fits = (est) => !worked || performance.now() + est <= deadline;\n      while (this.phase !== "done") {\n        if (this.phase === "inputs") {\n          if (!this.gen.done) {\n            if (!fits(this.t.unitMs.fill)) return;\n            await this.unit("fill", () => this.gen.fill(1 << 15));\n            worked = true;\n            continue;\n          }\n          if (!fits(this.t.unitMs.scales)) return;\n          await this.unit("scales", async () => {\n            await bench.setInputs(this.gen.args);\n            this.scales = new Scales(this.t.op, this.t.shape, this.gen.args);\n          });\n          worked = true;\n          this.phase = "check";\n          continue;\n        }\n        if (this.phase === "check") {\n          if (!this.curOut) {\n            if (!fits(this.t.unitMs.checkCur)) return;\n            worked = true;\n            const t0 = performance.now();\n            try {\n              this.curOut = await this.unit("checkCur", () => bench.runOnce(cur));\n            } catch (e) {\n              this.curOut = new Float32Array(0);\n              this.t.currentBroken = true;\n              this.t.note(`the kernel in use failed to run: ${e}`);\n            }\n            this.perCall = Math.max(performance.now() - t0, 1e-4);\n            continue;\n          }\n          if (this.loading) return;\n          if (!this.impl) return this.fail(this.loadError ?? "load failed");\n          if (!fits(Math.max(this.t.unitMs.checkCand, this.perCall))) return;\n          worked = true;\n          const t1 = performance.now();\n          this.firstRun = t1;\n          let candOut;\n          try {\n            candOut = await this.unit("checkCand", () => bench.runOnce(this.impl));\n          } catch (e) {\n            return this.fail(`run: ${e instanceof Error ? e.message : e}`, (performance.now() - t1) * 1e3);\n          }\n          const t2 = performance.now();\n          const curOut = this.curOut;\n          const positions = this.cand.check?.length ? this.cand.check : defaultPositions(candOut.length);\n          const [candTol, curTol] = [toleranceOf(this.scales.op, this.impl.meta.config), toleranceOf(this.scales.op, cur.meta.config)];\n          const ref = checkPositions(this.scales, candOut, positions, candTol);\n          if (!ref.ok) return this.fail(`output ${ref.worst} is off the reference by ${ref.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1e3);\n          if (!this.t.currentBroken) {\n            const curRef = checkPositions(this.scales, curOut, positions, curTol);\n            if (!curRef.ok) {\n              this.t.currentBroken = true;\n              this.t.note(`the kernel in use is off the reference at output ${curRef.worst} (${curRef.maxErr.toExponential(2)})`);\n            } else {\n              const cmp = compareOutputs(this.scales, candOut, curOut, candTol + curTol);\n              if (!cmp.ok) return this.fail(`output ${cmp.worst} differs from the kernel in use by ${cmp.maxErr.toExponential(2)} (norm-scaled)`, (t2 - t1) * 1e3);\n            }\n          }\n          if (this.cand.check) this.samples = this.cand.check.map((p) => candOut[p]);\n          this.curOut = null;\n          this.perCall = Math.max(this.perCall, t2 - t1, 1e-4);\n          this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));\n          this.phase = "warm";\n          continue;\n        }\n        const impl = this.impl;\n        if (!fits(this.reps * this.perCall)) return;\n        worked = true;\n        const curTurn = this.turn % 4 === 0 || this.turn % 4 === 3;\n        const ms = await bench.time(curTurn ? cur : impl, this.reps);\n        const per = ms / this.reps;\n        const into = this.phase === "warm" ? this.warm : this.timed;\n        (curTurn ? into.cur : into.cand).push(per);\n        this.turn++;\n        if (this.turn % 2) continue;\n        if (this.phase === "warm") {\n          this.warmMs += 2 * ms;\n          this.perCall = Math.max(into.cur.at(-1), into.cand.at(-1), 1e-4);\n          this.reps = Math.max(1, Math.ceil(bench.minSampleMs / this.perCall));\n          const enough = this.t.warmPairs !== void 0 ? into.cur.length >= this.t.warmPairs : warmedUp(into.cur, into.cand, performance.now() - this.firstRun) || into.cur.length >= (this.fast ? FAST_WARM_PAIRS : WARM_MAX_PAIRS) || this.warmMs > (this.fast ? FAST_WARM_MS : WARM_MAX_MS);\n          if (enough) this.phase = "time";\n          continue;\n        }\n        const t = this.timed;\n        if (this.t.warmPairs === void 0 && t.cand.length >= 2 && !noNewLow(t.cand) && this.restarts < MAX_RESTARTS) {\n          this.restarts++;\n          this.warm.cur.push(...t.cur);\n          this.warm.cand.push(...t.cand);\n          t.cur.length = 0;\n          t.cand.length = 0;\n          this.phase = "warm";\n          continue;\n        }\n        const promising = this.fast && !pairedFaster(t.cur, t.cand) && meanLogRatio(t.cur, t.cand) < Math.log(1 - 0.01);\n        const maxPairs = this.fast ? Math.min(this.t.timedPairs, SEQ_MAX_PAIRS) * (promising ? SEQ_PROMISING_PAIRS / SEQ_MAX_PAIRS : 1) : this.t.timedPairs;\n        const settled = performance.now() - this.firstRun >= this.t.stopAfterMs;\n        const verdict = this.fast && this.t.earlyReject && t.cur.length < maxPairs ? sequentialVerdict(t.cur, t.cand) : void 0;\n        const early = this.t.earlyReject && t.cur.length < maxPairs && settled && (clearlySlower(t.cur, t.cand) || verdict === "slower" && noNewLow(t.cand) || futile(t.cur, t.cand));\n        const won = !early && verdict === "faster";\n        const full = this.fast ? t.cur.length >= maxPairs && (settled || t.cur.length >= 3 * maxPairs) : t.cur.length >= maxPairs;\n        if (early || won || full) {\n          this.rejectedEarly = early;\n          const c = this.cand;\n          this.result = {\n            sha256: c.sha256,\n            index: c.index,\n            total: c.total,\n            source: c.source,\n            ticket: c.ticket,\n            ok: true,\n            median_us: median(t.cand) * 1e3,\n            current_us: median(t.cur) * 1e3,\n            noise: relNoise(t.cand),\n            runs: this.reps * t.cand.length,\n            samples: this.samples,\n            ...early ? { rejected_early: true } : {}\n          };\n          this.phase = "done";\n        }\n      }\n    }\n    /**\n     * Whether the candidate beat the kernel in use. Legacy: its median is\n     * lower beyond the noise of both sample sets (`fasterBeyondNoise`). Fast:\n     * the paired test (`pairedFaster`) says it is faster by the 1 % floor at\n     * one-sided 95 %, from the ratios of its timed pairs.\n     */\n    beatsCurrent() {\n      if (this.rejectedEarly || this.timed.cand.length === 0) return false;\n      return this.fast ? pairedFaster(this.timed.cur, this.timed.cand) : fasterBeyondNoise(this.timed.cand, this.timed.cur);\n    }\n  };\n\n  // src/threads.ts\n  var CTRL = {\n    GEN: 0,\n    // generation of the current call; workers wait on it\n    MAIL: 1,\n    // messages posted to every worker so far\n    NEXT: 2,\n    // (generation << 8) | next part to claim\n    DONE: 3,\n    // parts of the current call finished\n    PARTS: 4,\n    KERNEL: 5,\n    // pool id of the kernel\n    NARGS: 6,\n    ERROR: 7,\n    // set by a worker whose part threw\n    ARGS: 8,\n    // up to 8 arguments\n    BELL: 16,\n    // rung (incremented) for every call and every message; workers wait on it\n    APP_CALLS: 17,\n    // the app\'s kernel calls started so far (see `ThreadPool.activity`)\n    APP_BUSY: 18,\n    // 1 while an app kernel runs\n    WORDS: 19\n  };\n  var GEN_MASK = 8388607;\n  var READY_MS = 5e3;\n  function withTimeout(p, ms) {\n    return new Promise((resolve, reject) => {\n      const t = setTimeout(resolve, ms);\n      p.then(() => (clearTimeout(t), resolve()), (e) => (clearTimeout(t), reject(e)));\n    });\n  }\n  var ThreadPool = class {\n    /** Threads that run parts: the caller and `size - 1` workers. */\n    size;\n    ctrl;\n    workers = [];\n    gen = 0;\n    nextId = 1;\n    pending = /* @__PURE__ */ new Map();\n    closed = false;\n    /** Calls run, parts run, and parts the calling thread ran itself (the rest ran on workers). */\n    stats = { calls: 0, parts: 0, callerParts: 0 };\n    /** A pool of `size` threads (the caller counts as one). */\n    constructor(size) {\n      this.size = Math.max(1, Math.floor(size));\n      this.ctrl = new Int32Array(new SharedArrayBuffer(CTRL.WORDS * 4));\n      if (this.size === 1) return;\n      const url = URL.createObjectURL(new Blob([\'"use strict";\\n(() => {\\n  // src/threads.ts\\n  var CTRL = {\\n    GEN: 0,\\n    // generation of the current call; workers wait on it\\n    MAIL: 1,\\n    // messages posted to every worker so far\\n    NEXT: 2,\\n    // (generation << 8) | next part to claim\\n    DONE: 3,\\n    // parts of the current call finished\\n    PARTS: 4,\\n    KERNEL: 5,\\n    // pool id of the kernel\\n    NARGS: 6,\\n    ERROR: 7,\\n    // set by a worker whose part threw\\n    ARGS: 8,\\n    // up to 8 arguments\\n    BELL: 16,\\n    // rung (incremented) for every call and every message; workers wait on it\\n    APP_CALLS: 17,\\n    // the app\\\'s kernel calls started so far (see `ThreadPool.activity`)\\n    APP_BUSY: 18,\\n    // 1 while an app kernel runs\\n    WORDS: 19\\n  };\\n  function claim(c, gen, parts) {\\n    for (; ; ) {\\n      const v = Atomics.load(c, CTRL.NEXT);\\n      if (v >>> 8 !== gen) return -1;\\n      const p = v & 255;\\n      if (p >= parts) return -1;\\n      if (Atomics.compareExchange(c, CTRL.NEXT, v, v + 1) === v) return p;\\n    }\\n  }\\n  function runClaimed(c, gen, parts, run) {\\n    let n = 0;\\n    for (let p = claim(c, gen, parts); p >= 0; p = claim(c, gen, parts), n++) {\\n      try {\\n        run(p);\\n      } finally {\\n        Atomics.add(c, CTRL.DONE, 1);\\n      }\\n    }\\n    return n;\\n  }\\n\\n  // src/pool-worker.ts\\n  var SPIN_MS = 0.3;\\n  var ctrl = null;\\n  var kernels = /* @__PURE__ */ new Map();\\n  var mail = 0;\\n  var seen = 0;\\n  var args = [];\\n  var scope = self;\\n  scope.onmessage = (e) => {\\n    const m = e.data;\\n    if (m.kind === "init") {\\n      ctrl = m.ctrl;\\n      seen = Atomics.load(ctrl, CTRL.GEN);\\n    } else {\\n      mail++;\\n      try {\\n        const inst = new WebAssembly.Instance(m.module, { env: { memory: m.memory } });\\n        kernels.set(m.id, inst.exports[m.entry]);\\n        scope.postMessage({ kind: "ready", id: m.id });\\n      } catch (err) {\\n        scope.postMessage({ kind: "error", id: m.id, error: `pool worker cannot instantiate kernel: ${err}` });\\n      }\\n    }\\n    loop();\\n  };\\n  function loop() {\\n    const c = ctrl;\\n    if (!c) return;\\n    let idleSince = performance.now();\\n    for (; ; ) {\\n      const bell = Atomics.load(c, CTRL.BELL);\\n      if (Atomics.load(c, CTRL.MAIL) !== mail) return;\\n      const gen = Atomics.load(c, CTRL.GEN);\\n      if (gen === seen) {\\n        if (performance.now() - idleSince < SPIN_MS) continue;\\n        Atomics.wait(c, CTRL.BELL, bell);\\n        idleSince = performance.now();\\n        continue;\\n      }\\n      seen = gen;\\n      const fn = kernels.get(c[CTRL.KERNEL]);\\n      const parts = c[CTRL.PARTS];\\n      args.length = c[CTRL.NARGS];\\n      for (let i = 0; i < args.length; i++) args[i] = c[CTRL.ARGS + i];\\n      if (fn) {\\n        runClaimed(c, gen, parts, (p) => {\\n          try {\\n            fn(...args, p);\\n          } catch {\\n            Atomics.store(c, CTRL.ERROR, 1);\\n          }\\n        });\\n      }\\n      idleSince = performance.now();\\n    }\\n  }\\n})();\\n\'], { type: "text/javascript" }));\n      try {\n        for (let i = 1; i < this.size; i++) {\n          const w = new Worker(url);\n          w.onmessage = (e) => this.reply(e.data);\n          w.onerror = (e) => {\n            e.preventDefault();\n            for (const [id] of this.pending) this.reply({ kind: "error", id, error: `pool worker: ${e.message}` });\n          };\n          w.postMessage({ kind: "init", ctrl: this.ctrl });\n          this.workers.push(w);\n        }\n      } finally {\n        URL.revokeObjectURL(url);\n      }\n    }\n    reply(r) {\n      const p = this.pending.get(r.id);\n      if (!p) return;\n      if (r.kind === "error") {\n        this.pending.delete(r.id);\n        p.reject(new Error(r.error));\n      } else if (--p.left === 0) {\n        this.pending.delete(r.id);\n        p.resolve();\n      }\n    }\n    /**\n     * Instantiates `module` (a threaded kernel, or any module whose `entry`\n     * takes the part number last) on `memory` in every worker; `instance` is\n     * the calling thread\'s. Calls may start at once: until a worker has\n     * its instance, the caller runs that worker\'s share.\n     */\n    prepare(module, memory, instance, entry = "kernel_part") {\n      const part = instance.exports[entry];\n      if (typeof part !== "function") throw new Error(`a threaded kernel must export ${entry}`);\n      const id = this.nextId++;\n      const ready = this.workers.length === 0 ? Promise.resolve() : new Promise((resolve, reject) => this.pending.set(id, { left: this.workers.length, resolve, reject }));\n      for (const w of this.workers) w.postMessage({ kind: "kernel", id, module, memory, entry });\n      if (this.workers.length) {\n        Atomics.add(this.ctrl, CTRL.MAIL, 1);\n        this.ring();\n      }\n      return { id, part, ready: withTimeout(ready, READY_MS) };\n    }\n    /**\n     * The words a bench worker reads to time candidates only while the app\'s\n     * kernels are not running (`APP_CALLS`, `APP_BUSY`): on a page with\n     * threads, a candidate timed while the app\'s kernels use the cores would\n     * look slower the more threads it uses.\n     */\n    get activity() {\n      return this.ctrl;\n    }\n    /** Runs `f`, an app kernel call, marked in `activity` (every `run` is). */\n    appCall(f) {\n      const c = this.ctrl;\n      Atomics.add(c, CTRL.APP_CALLS, 1);\n      Atomics.store(c, CTRL.APP_BUSY, 1);\n      try {\n        f();\n      } finally {\n        Atomics.store(c, CTRL.APP_BUSY, 0);\n        Atomics.notify(c, CTRL.APP_BUSY);\n      }\n    }\n    /**\n     * Runs parts `0..parts` of `k` with these arguments and returns when all\n     * are done. Synchronous: the caller runs parts itself and then spins for\n     * the parts workers took (at most one part\'s time).\n     */\n    run(k, args, parts) {\n      this.appCall(() => this.runParts(k, args, parts));\n    }\n    runParts(k, args, parts) {\n      const c = this.ctrl;\n      this.stats.calls++;\n      this.stats.parts += parts;\n      if (this.workers.length === 0 || this.closed) {\n        for (let p = 0; p < parts; p++) k.part(...args, p);\n        this.stats.callerParts += parts;\n        return;\n      }\n      if (args.length > 8 || parts > 255) throw new Error(`a pool call takes at most 8 arguments and 255 parts, got ${args.length} and ${parts}`);\n      const gen = this.gen = this.gen + 1 & GEN_MASK;\n      for (let i = 0; i < args.length; i++) c[CTRL.ARGS + i] = args[i];\n      c[CTRL.NARGS] = args.length;\n      c[CTRL.PARTS] = parts;\n      c[CTRL.KERNEL] = k.id;\n      Atomics.store(c, CTRL.DONE, 0);\n      Atomics.store(c, CTRL.ERROR, 0);\n      Atomics.store(c, CTRL.NEXT, gen << 8);\n      Atomics.store(c, CTRL.GEN, gen);\n      this.ring();\n      this.stats.callerParts += runClaimed(c, gen, parts, (p) => k.part(...args, p));\n      while (Atomics.load(c, CTRL.DONE) < parts) {\n      }\n      if (Atomics.load(c, CTRL.ERROR)) throw new Error("a thread-pool worker failed to run its part of the kernel");\n    }\n    /**\n     * Wakes every worker. A worker reads the bell before it looks for work and\n     * waits only while the bell still has that value, so no call or message\n     * can slip in between its look and its wait unnoticed.\n     */\n    ring() {\n      Atomics.add(this.ctrl, CTRL.BELL, 1);\n      Atomics.notify(this.ctrl, CTRL.BELL);\n    }\n    close() {\n      this.closed = true;\n      for (const w of this.workers) w.terminate();\n      this.workers = [];\n      for (const p of this.pending.values()) p.reject(new Error("thread pool closed"));\n      this.pending.clear();\n    }\n  };\n  function claim(c, gen, parts) {\n    for (; ; ) {\n      const v = Atomics.load(c, CTRL.NEXT);\n      if (v >>> 8 !== gen) return -1;\n      const p = v & 255;\n      if (p >= parts) return -1;\n      if (Atomics.compareExchange(c, CTRL.NEXT, v, v + 1) === v) return p;\n    }\n  }\n  function runClaimed(c, gen, parts, run) {\n    let n = 0;\n    for (let p = claim(c, gen, parts); p >= 0; p = claim(c, gen, parts), n++) {\n      try {\n        run(p);\n      } finally {\n        Atomics.add(c, CTRL.DONE, 1);\n      }\n    }\n    return n;\n  }\n  function sharedImport(bytes) {\n    const r = new Reader(bytes);\n    if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 97 || bytes[2] !== 115 || bytes[3] !== 109) throw new Error("not a Wasm module");\n    r.at = 8;\n    while (r.at < bytes.length) {\n      const start = r.at;\n      const id = bytes[r.at++];\n      const size = r.leb();\n      const end = r.at + size;\n      if (id !== 2) {\n        r.at = end;\n        continue;\n      }\n      const count = r.leb();\n      const out = [...leb(count)];\n      for (let i = 0; i < count; i++) {\n        const from = r.at;\n        r.skip(r.leb());\n        r.skip(r.leb());\n        const kind = bytes[r.at++];\n        out.push(...bytes.subarray(from, r.at));\n        if (kind !== 2) throw new Error(`sharedImport: an import of kind ${kind}: webtune kernels import one memory only`);\n        const flags = bytes[r.at++];\n        const min = r.leb();\n        const max = flags & 1 ? r.leb() : 65536;\n        if (flags & 2) return bytes;\n        if (flags & ~1) throw new Error(`sharedImport: memory limits flags ${flags}`);\n        out.push(3, ...leb(min), ...leb(max));\n      }\n      if (r.at !== end) throw new Error("sharedImport: the import section has trailing bytes");\n      const section = [2, ...leb(out.length), ...out];\n      const res = new Uint8Array(bytes.length - (end - start) + section.length);\n      res.set(bytes.subarray(0, start), 0);\n      res.set(section, start);\n      res.set(bytes.subarray(end), start + section.length);\n      return res;\n    }\n    return bytes;\n  }\n  var Reader = class {\n    constructor(b) {\n      this.b = b;\n    }\n    b;\n    at = 0;\n    leb() {\n      let v = 0, shift = 0;\n      for (; ; ) {\n        if (this.at >= this.b.length) throw new Error("sharedImport: truncated module");\n        const x = this.b[this.at++];\n        v += (x & 127) * 2 ** shift;\n        if (!(x & 128)) return v;\n        shift += 7;\n      }\n    }\n    skip(n) {\n      this.at += n;\n    }\n  };\n  function leb(v) {\n    const out = [];\n    do {\n      let x = v % 128;\n      v = Math.floor(v / 128);\n      if (v) x |= 128;\n      out.push(x);\n    } while (v);\n    return out;\n  }\n  function timeQuietly(activity, sample, maxWaitMs = 1e3, tries = 5) {\n    for (let attempt = 1; ; attempt++) {\n      const until = performance.now() + maxWaitMs;\n      while (Atomics.load(activity, CTRL.APP_BUSY) !== 0 && performance.now() < until) Atomics.wait(activity, CTRL.APP_BUSY, 1, 5);\n      const calls = Atomics.load(activity, CTRL.APP_CALLS);\n      const ms = sample();\n      if (attempt >= tries || Atomics.load(activity, CTRL.APP_CALLS) === calls && Atomics.load(activity, CTRL.APP_BUSY) === 0) return ms;\n    }\n  }\n\n  // src/timer.ts\n  var cached = 0;\n  function timerResolutionMs() {\n    if (cached) return cached;\n    let best = Infinity;\n    for (let trial = 0; trial < 5; trial++) {\n      const t0 = performance.now();\n      let t1 = t0;\n      const start = Date.now();\n      while (t1 === t0 && Date.now() - start < 50) t1 = performance.now();\n      if (t1 > t0) best = Math.min(best, t1 - t0);\n    }\n    cached = Number.isFinite(best) ? best : 1;\n    return cached;\n  }\n\n  // src/wasm.ts\n  var PAGE = 65536;\n  function align(n, a) {\n    return Math.ceil(n / a) * a;\n  }\n  function newMemory(pages, shared) {\n    return shared ? new WebAssembly.Memory({ initial: pages, maximum: 65536, shared: true }) : new WebAssembly.Memory({ initial: pages });\n  }\n  function threadsOf(meta) {\n    return meta.threads && meta.threads > 1 ? meta.threads : 0;\n  }\n  async function instantiate(impl, memory, pool) {\n    const inst = await WebAssembly.instantiate(impl.module, { env: { memory } });\n    const parts = threadsOf(impl.meta);\n    if (parts) {\n      if (!pool) throw new Error(`kernel ${impl.sha256} is threaded (${parts} parts) but this runtime has no thread pool`);\n      const k = pool.prepare(impl.module, memory, inst);\n      await k.ready;\n      return (...o) => pool.run(k, o, parts);\n    }\n    const fn = inst.exports[impl.meta.entry || "kernel"];\n    if (typeof fn !== "function") throw new Error(`kernel ${impl.sha256} exports no \\`${impl.meta.entry}\\``);\n    return fn;\n  }\n  function ensureBytes(memory, bytes) {\n    const have = memory.buffer.byteLength;\n    if (have < bytes) memory.grow(Math.ceil((bytes - have) / PAGE));\n  }\n  var WasmBench = class {\n    constructor(specs, meta, pool, shared, activity) {\n      this.pool = pool;\n      this.activity = activity;\n      let end = 0;\n      for (const s of specs) {\n        this.offsets.push(end);\n        end = align(end + s.elems * 4, 64);\n      }\n      this.scratch = end;\n      this.outElems = specs[specs.length - 1].elems;\n      this.memory = newMemory(Math.max(1, meta.memory_pages_min ?? 0, Math.ceil(end / PAGE)), shared);\n    }\n    pool;\n    activity;\n    resolutionMs = timerResolutionMs();\n    // 1 % rounding, and never under 0.5 ms (call overhead and clock reads).\n    minSampleMs = Math.max(0.5, 100 * this.resolutionMs);\n    memory;\n    offsets = [];\n    scratch;\n    outElems;\n    async setInputs(args) {\n      for (let i = 0; i < args.length; i++) new Uint32Array(this.memory.buffer, this.offsets[i], args[i].length).set(args[i]);\n    }\n    async prepare(impl) {\n      if (impl.benchFn && impl.benchMemory === this.memory) return impl.benchFn;\n      ensureBytes(this.memory, Math.max((impl.meta.memory_pages_min ?? 0) * PAGE, this.scratch + (impl.meta.scratch_bytes ?? 0)));\n      const fn = await instantiate(impl, this.memory, this.pool);\n      impl.benchFn = fn;\n      impl.benchMemory = this.memory;\n      return fn;\n    }\n    argsFor(impl) {\n      return impl.meta.scratch_bytes ? [...this.offsets, this.scratch] : this.offsets;\n    }\n    async runOnce(impl) {\n      const fn = await this.prepare(impl);\n      const out = this.offsets[this.offsets.length - 1];\n      new Uint32Array(this.memory.buffer, out, this.outElems).fill(POISON);\n      fn(...this.argsFor(impl));\n      return new Float32Array(this.memory.buffer.slice(out, out + this.outElems * 4));\n    }\n    async time(impl, reps) {\n      const fn = await this.prepare(impl);\n      const o = this.argsFor(impl);\n      return this.activity ? timeQuietly(this.activity, () => this.timeCalls(fn, o, reps)) : this.timeCalls(fn, o, reps);\n    }\n    timeCalls(fn, o, reps) {\n      let t0 = 0, t1 = 0;\n      switch (o.length) {\n        case 3: {\n          const [a, b, c] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c);\n          t1 = performance.now();\n          break;\n        }\n        case 4: {\n          const [a, b, c, d] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c, d);\n          t1 = performance.now();\n          break;\n        }\n        case 5: {\n          const [a, b, c, d, e] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c, d, e);\n          t1 = performance.now();\n          break;\n        }\n        // matmul_i16\'s A, B, SA, SB, then bias, R and C (and a scratch pointer): up to 8.\n        case 6: {\n          const [a, b, c, d, e, f] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f);\n          t1 = performance.now();\n          break;\n        }\n        case 7: {\n          const [a, b, c, d, e, f, g] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f, g);\n          t1 = performance.now();\n          break;\n        }\n        case 8: {\n          const [a, b, c, d, e, f, g, h] = o;\n          t0 = performance.now();\n          for (let i = 0; i < reps; i++) fn(a, b, c, d, e, f, g, h);\n          t1 = performance.now();\n          break;\n        }\n        default:\n          throw new Error(`unexpected kernel arity ${o.length}`);\n      }\n      return t1 - t0;\n    }\n    dispose() {\n    }\n  };\n  var WasmBackend = class {\n    /**\n     * `activity`: in a bench worker on a page with threads, the page pool\'s\n     * activity words; samples are then timed while the app\'s kernels pause.\n     */\n    constructor(pool = null, shared = pool !== null, activity = null) {\n      this.pool = pool;\n      this.shared = shared;\n      this.activity = activity;\n    }\n    pool;\n    shared;\n    activity;\n    target = "wasm";\n    async load(bytes, meta) {\n      if (typeof bytes === "string") throw new Error("a Wasm kernel must be bytes");\n      const parts = threadsOf(meta);\n      if (parts && !this.pool) throw new Error(`kernel ${meta.sha256} is threaded (${parts} parts); this page runs Wasm on one thread`);\n      const module = await WebAssembly.compile(this.shared ? sharedImport(new Uint8Array(bytes)) : bytes);\n      return { sha256: meta.sha256, meta, module, bytes };\n    }\n    bench(specs, meta) {\n      return new WasmBench(specs, meta, this.pool, this.shared, this.activity);\n    }\n  };\n\n  // src/eval-worker.ts\n  var BenchSide = class {\n    constructor(backend, implOf) {\n      this.backend = backend;\n      this.implOf = implOf;\n    }\n    backend;\n    implOf;\n    ops = /* @__PURE__ */ new Map();\n    notes = [];\n    context(r) {\n      let o = this.ops.get(r.key);\n      if (o && r.current && r.current.sha256 !== o.ctx.current.sha256) o.ctx.current = this.implOf(r.current);\n      if (o) return o;\n      if (!r.current) throw new Error(`op ${r.key}: its kernel in use was never sent`);\n      const specs = argSpecs(r.op, r.shape);\n      const unitMs = unitTimes();\n      const notes = () => this.notes;\n      const ctx = {\n        specs,\n        op: r.op,\n        shape: r.shape,\n        current: this.implOf(r.current),\n        currentBroken: false,\n        unitMs,\n        noteUnit(u, ms) {\n          noteUnitTime(unitMs, u, ms);\n        },\n        note(s) {\n          notes().push(s);\n        },\n        timedPairs: r.settings.timedPairs,\n        warmPairs: r.settings.warmPairs,\n        earlyReject: r.settings.earlyReject,\n        stopAfterMs: r.settings.stopAfterMs ?? STOP_AFTER_MS,\n        policy: r.settings.policy\n      };\n      o = { ctx, bench: this.backend.bench(specs, ctx.current.meta) };\n      this.ops.set(r.key, o);\n      return o;\n    }\n    async evaluate(r) {\n      const { ctx, bench } = this.context(r);\n      this.notes = [];\n      const cand = r.impl.sha256 === ctx.current.sha256 ? ctx.current : this.implOf(r.impl);\n      const ev = new Evaluation(ctx, this.backend, r.cand, { cand: r.cand, impl: cand });\n      while (ev.phase !== "done") await ev.step(bench, Infinity, false);\n      const result = ev.result;\n      const beats = result.ok && cand.sha256 !== ctx.current.sha256 && (ctx.currentBroken || ev.beatsCurrent());\n      if (beats) {\n        ctx.current = cand;\n        ctx.currentBroken = false;\n      }\n      return { result, beats, notes: this.notes };\n    }\n  };\n  var scope = globalThis;\n  if (typeof scope.WorkerGlobalScope !== "undefined") {\n    let side = null;\n    let chain = Promise.resolve();\n    scope.onmessage = (e) => {\n      const r = e.data;\n      side ??= new BenchSide(\n        new WasmBackend(r.threads && r.threads > 1 ? new ThreadPool(r.threads) : null, r.shared ?? false, r.activity ?? null),\n        (k) => ({ sha256: k.sha256, meta: k.meta, module: k.module, bytes: new ArrayBuffer(0) })\n      );\n      const s = side;\n      chain = chain.then(async () => {\n        let reply;\n        try {\n          reply = { id: r.id, ok: true, answer: await s.evaluate(r) };\n        } catch (err) {\n          reply = { id: r.id, ok: false, error: err instanceof Error ? err.message : String(err) };\n        }\n        scope.postMessage(reply);\n      });\n    };\n  }\n})();\n'], { type: "text/javascript" }));
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
  threads;
  shared;
  activity;
  worker;
  next = 1;
  waiting = /* @__PURE__ */ new Map();
  /** Ops whose kernel in use the worker has. */
  /** The kernel in use the worker was last sent, per op (sent again when the page's differs). */
  known = /* @__PURE__ */ new Map();
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
      settings: { timedPairs: t.timedPairs, warmPairs: t.warmPairs, earlyReject: t.earlyReject, stopAfterMs: t.stopAfterMs, policy: t.policy }
    };
    if (this.next === 2) Object.assign(req2, { threads: this.threads, shared: this.shared, activity: this.activity ?? void 0 });
    if (this.known.get(t.key) !== t.current.sha256) {
      req2.current = kernel(t.current);
      this.known.set(t.key, t.current.sha256);
    }
    return new Promise((resolve, reject) => {
      this.waiting.set(req2.id, { resolve, reject });
      this.worker.postMessage(req2);
    }).then((a) => {
      if (a.beats) this.known.set(t.key, impl.sha256);
      return a;
    });
  }
  close() {
    this.worker.terminate();
    this.failAll(new Error("bench worker closed"));
  }
};

// src/webgpu.ts
function encodePasses(pass, impl, group, scratch, reps = 1) {
  pass.setBindGroup(0, group);
  if (impl.scratchBytes > 0) {
    if (!scratch) throw new Error(`kernel ${impl.sha256.slice(0, 12)} needs a scratch buffer of ${impl.scratchBytes} bytes`);
    pass.setBindGroup(1, scratch);
  }
  if (impl.passes.length === 1) {
    pass.setPipeline(impl.pipeline);
    for (let i = 0; i < reps; i++) pass.dispatchWorkgroups(...impl.dispatch);
    return;
  }
  for (let i = 0; i < reps; i++) {
    for (const p of impl.passes) {
      pass.setPipeline(p.pipeline);
      pass.dispatchWorkgroups(...p.dispatch);
    }
  }
}
var Scratch = class {
  constructor(device, layouts) {
    this.device = device;
    this.layouts = layouts;
  }
  device;
  layouts;
  buffer = null;
  group = null;
  /** The bind group for `impl` (null where it needs no scratch). */
  for(impl) {
    if (impl.scratchBytes === 0) return null;
    if (!this.buffer || this.buffer.size < impl.scratchBytes) {
      this.buffer?.destroy();
      this.buffer = this.device.createBuffer({ label: "webtune scratch", size: Math.ceil(impl.scratchBytes / 16) * 16, usage: GPUBufferUsage.STORAGE });
      this.group = this.device.createBindGroup({ layout: this.layouts.scratchLayout(), entries: [{ binding: 0, resource: { buffer: this.buffer } }] });
    }
    return this.group;
  }
  dispose() {
    this.buffer?.destroy();
    this.buffer = null;
    this.group = null;
  }
};
var GpuLayouts = class {
  constructor(device) {
    this.device = device;
  }
  device;
  bgl = /* @__PURE__ */ new Map();
  pl = /* @__PURE__ */ new Map();
  scratch;
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
  /** Group 1 of a kernel with passes: one read-write storage buffer. */
  scratchLayout() {
    this.scratch ??= this.device.createBindGroupLayout({
      label: "webtune scratch",
      entries: [{ binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "storage" } }]
    });
    return this.scratch;
  }
  /** The layout of a kernel with `nargs` arguments, and a scratch buffer at group 1 where `scratch`. */
  pipelineLayout(nargs, scratch = false) {
    const key = scratch ? -nargs : nargs;
    let l = this.pl.get(key);
    if (!l) {
      const groups = scratch ? [this.bindGroupLayout(nargs), this.scratchLayout()] : [this.bindGroupLayout(nargs)];
      l = this.device.createPipelineLayout({ bindGroupLayouts: groups });
      this.pl.set(key, l);
    }
    return l;
  }
};
function dispatchOf(d) {
  d ??= [1, 1, 1];
  return [d[0] ?? 1, d[1] ?? 1, d[2] ?? 1];
}
async function compileErrors(module, what, error) {
  const info = await module.getCompilationInfo().catch(() => null);
  const errors = info?.messages.filter((m) => m.type === "error") ?? [];
  if (errors.length) return `${what}: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join("; ")}`;
  return `${what}: ${error instanceof Error ? error.message : String(error)}`;
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
        size: Math.max(16, Math.ceil(s.elems * elemBytes(s) / 16) * 16),
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | (i === n - 1 ? GPUBufferUsage.COPY_SRC : 0)
      })
    );
    this.outBytes = Math.ceil(specs[n - 1].elems * elemBytes(specs[n - 1]) / 4) * 4;
    this.staging = device.createBuffer({ size: this.outBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.bindGroup = device.createBindGroup({
      layout: layouts.bindGroupLayout(n),
      entries: this.buffers.map((buffer, binding) => ({ binding, resource: { buffer } }))
    });
    this.scratch = new Scratch(device, layouts);
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
  scratch;
  query = null;
  outBytes;
  /** Whether timings come from timestamp queries rather than the wall clock. */
  get usesTimestamps() {
    return this.query !== null;
  }
  /** Uploads the seeded inputs (f32 bits; an f16 argument's values are rounded to f16 and sent as its bits). */
  async setInputs(args) {
    for (let i = 0; i < args.length; i++) {
      if (this.specs[i].dtype !== "f16") {
        this.device.queue.writeBuffer(this.buffers[i], 0, args[i]);
        continue;
      }
      const f = new Float32Array(args[i].buffer, args[i].byteOffset, args[i].length);
      const h = new Uint16Array(Math.ceil(f.length / 2) * 2);
      for (let j = 0; j < f.length; j++) h[j] = f16Bits(f[j]);
      this.device.queue.writeBuffer(this.buffers[i], 0, h);
    }
  }
  async runOnce(impl) {
    const out = this.buffers[this.buffers.length - 1];
    return scoped(this.device, async () => {
      const f16 = this.specs[this.specs.length - 1].dtype === "f16";
      this.device.queue.writeBuffer(out, 0, f16 ? new Uint16Array(this.outBytes / 2).fill(POISON_F16) : new Uint32Array(this.outBytes / 4).fill(POISON));
      const enc = this.device.createCommandEncoder();
      const pass = enc.beginComputePass();
      encodePasses(pass, impl, this.bindGroup, this.scratch.for(impl));
      pass.end();
      enc.copyBufferToBuffer(out, 0, this.staging, 0, this.outBytes);
      this.device.queue.submit([enc.finish()]);
      await this.staging.mapAsync(GPUMapMode.READ);
      const raw = this.staging.getMappedRange().slice(0);
      this.staging.unmap();
      const spec2 = this.specs[this.specs.length - 1];
      if (spec2.dtype !== "f16") return new Float32Array(raw);
      const h = new Uint16Array(raw, 0, spec2.elems);
      return Float32Array.from(h, f16Value);
    });
  }
  async time(impl, reps) {
    const enc = this.device.createCommandEncoder();
    const q = this.query;
    const pass = enc.beginComputePass(
      q ? { timestampWrites: { querySet: q.set, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {}
    );
    encodePasses(pass, impl, this.bindGroup, this.scratch.for(impl), reps);
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
    this.scratch.dispose();
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
      const min2 = this.device.adapterInfo?.subgroupMinSize;
      if (min2 !== void 0 && min2 < need) {
        throw new Error(`kernel ${meta.sha256.slice(0, 12)} needs subgroups of at least ${need} invocations; this adapter's may have ${min2}`);
      }
    }
    const steps = meta.passes?.length ? meta.passes : [{ entry: meta.entry || "main", dispatch: meta.dispatch ?? [1, 1, 1] }];
    const scratchBytes = meta.passes?.length ? meta.scratch_bytes ?? 0 : 0;
    const max = this.device.limits.maxStorageBufferBindingSize;
    if (scratchBytes > max) {
      throw new Error(`kernel ${meta.sha256.slice(0, 12)} needs ${scratchBytes} bytes of scratch; this device binds at most ${max}`);
    }
    const pipelines = await scoped(this.device, async () => {
      const module = this.device.createShaderModule({ label: `webtune ${meta.sha256.slice(0, 12)}`, code: text });
      const layout = this.layouts.pipelineLayout(meta.args.length, scratchBytes > 0);
      try {
        return await Promise.all(
          steps.map(
            (p) => this.device.createComputePipelineAsync({ label: `webtune ${meta.op} ${meta.sha256.slice(0, 12)} ${p.entry}`, layout, compute: { module, entryPoint: p.entry } })
          )
        );
      } catch (e) {
        throw new Error(await compileErrors(module, `WGSL ${meta.sha256.slice(0, 12)}`, e));
      }
    });
    const passes = pipelines.map((pipeline, i) => ({ pipeline, dispatch: dispatchOf(steps[i].dispatch) }));
    return { sha256: meta.sha256, meta, pipeline: passes[0].pipeline, dispatch: passes[0].dispatch, passes, scratchBytes, bytes: text };
  }
  bench(specs) {
    return new GpuBench(this.device, this.layouts, specs, this.timerMs);
  }
};

// node_modules/@huggingface/tokenizers/dist/tokenizers.mjs
var DictionarySplitter = class {
  /**
   * @param dictionary The dictionary of words to use for splitting.
   */
  constructor(dictionary) {
    this.trie = this._build_trie(dictionary);
  }
  /**
   * Builds a trie from the given dictionary.
   * @param dictionary The dictionary of words to build the trie from.
   * @returns The root node of the trie.
   * @private
   */
  _build_trie(dictionary) {
    const trie = /* @__PURE__ */ Object.create(null);
    for (const word of dictionary) {
      let node = trie;
      for (let i = 0; i < word.length; ++i) {
        const char = word[i];
        node = node[char] ??= /* @__PURE__ */ Object.create(null);
      }
      node.end = word;
    }
    return trie;
  }
  /**
   * Splits the input text into tokens based on the dictionary.
   * @param text The input text to split.
   * @returns An array of tokens.
   */
  split(text) {
    const result = [];
    const n = text.length;
    let start = 0;
    let i = 0;
    while (i < n) {
      let node = this.trie;
      let match = null;
      let j = i;
      while (j < n && (node = node[text[j]])) {
        if (node.end) {
          match = node.end;
        }
        ++j;
      }
      if (match) {
        if (i > start) {
          result.push(text.slice(start, i));
        }
        result.push(match);
        i += match.length;
        start = i;
      } else {
        ++i;
      }
    }
    if (start < n) {
      result.push(text.slice(start));
    }
    return result;
  }
};
var DictionarySplitter_default = DictionarySplitter;
var AddedToken = class {
  /**
   * Creates a new instance of AddedToken.
   * @param config Added token configuration object.
   */
  constructor(config) {
    this.content = config.content;
    this.id = config.id;
    this.single_word = config.single_word ?? false;
    this.lstrip = config.lstrip ?? false;
    this.rstrip = config.rstrip ?? false;
    this.special = config.special ?? false;
    this.normalized = config.normalized ?? !this.special;
  }
};
var AddedToken_default = AddedToken;
var compile_unicode_regexp = (source, flags) => {
  try {
    return new RegExp(source, flags);
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    const property_names = /* @__PURE__ */ new Map();
    const rewritten = source.replace(
      /(\\[pP])\{([^}=]+)\}/g,
      (text, p, n, offset) => {
        let preceding_backslashes = 0;
        for (let i = offset - 1; i >= 0 && source[i] === "\\"; --i) {
          ++preceding_backslashes;
        }
        if (preceding_backslashes % 2 === 1) return text;
        let property_name = property_names.get(n);
        if (property_name === void 0) {
          try {
            new RegExp(`\\p{${n}}`, "u");
            property_name = n;
          } catch {
            property_name = `Script=${n}`;
          }
          property_names.set(n, property_name);
        }
        return `${p}{${property_name}}`;
      }
    );
    if (rewritten === source) throw error;
    try {
      return new RegExp(rewritten, flags);
    } catch {
      throw error;
    }
  }
};
var clean_up_tokenization = (text) => text.replace(/ \./g, ".").replace(/ \?/g, "?").replace(/ \!/g, "!").replace(/ ,/g, ",").replace(/ \' /g, "'").replace(/ n't/g, "n't").replace(/ 'm/g, "'m").replace(/ 's/g, "'s").replace(/ 've/g, "'ve").replace(/ 're/g, "'re");
var create_pattern = (pattern, invert = true) => {
  if (pattern.Regex !== void 0) {
    const regex = rewrite_oniguruma_to_js(
      normalize_bloom_split_char_class(pattern.Regex)
    );
    return compile_unicode_regexp(regex, "gu");
  } else if (pattern.String !== void 0) {
    const escaped = escape_reg_exp(pattern.String);
    return new RegExp(invert ? escaped : `(${escaped})`, "gu");
  } else {
    console.warn("Unknown pattern type:", pattern);
    return null;
  }
};
var UNICODE_WORD_CHARS_IN_CLASS = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
var UNICODE_WORD_CHARS = `${UNICODE_WORD_CHARS_IN_CLASS}\\u00B2\\u00B3\\u00B9\\u00BC-\\u00BE`;
var UNICODE_WORD_CLASS = `[${UNICODE_WORD_CHARS}]`;
var UNICODE_NON_WORD_CLASS = `[^${UNICODE_WORD_CHARS}]`;
var UNICODE_WORD_BOUNDARY = `(?:(?<!${UNICODE_WORD_CLASS})(?=${UNICODE_WORD_CLASS})|(?<=${UNICODE_WORD_CLASS})(?!${UNICODE_WORD_CLASS}))`;
var UNICODE_NON_WORD_BOUNDARY = `(?:(?<!${UNICODE_WORD_CLASS})(?!${UNICODE_WORD_CLASS})|(?<=${UNICODE_WORD_CLASS})(?=${UNICODE_WORD_CLASS}))`;
var LINE_START_ANCHOR = "(?:(?<![\\s\\S])|(?<=\\n))";
var LINE_END_ANCHOR = "(?:(?=\\n)|(?![\\s\\S]))";
var HEX_DIGIT_CHARS = "0-9A-Fa-f";
var ESCAPE_REWRITES = /* @__PURE__ */ new Map([
  ["A", "(?<![\\s\\S])"],
  ["z", "(?![\\s\\S])"],
  ["Z", "(?=\\n?(?![\\s\\S]))"],
  // \Z permits a single optional final \n (not \r\n)
  ["h", `[${HEX_DIGIT_CHARS}]`],
  ["H", `[^${HEX_DIGIT_CHARS}]`],
  ["w", UNICODE_WORD_CLASS],
  ["W", UNICODE_NON_WORD_CLASS],
  ["d", "\\p{Nd}"],
  ["D", "\\P{Nd}"],
  ["s", "\\p{White_Space}"],
  // JS \s wrongly adds U+FEFF and misses \x85
  ["S", "\\P{White_Space}"],
  ["b", UNICODE_WORD_BOUNDARY],
  ["B", UNICODE_NON_WORD_BOUNDARY],
  ["a", "\\x07"],
  ["e", "\\x1B"]
]);
var CLASS_ESCAPE_REWRITES = /* @__PURE__ */ new Map([
  ["h", HEX_DIGIT_CHARS],
  ["w", UNICODE_WORD_CHARS_IN_CLASS],
  ["d", "\\p{Nd}"],
  ["D", "\\P{Nd}"],
  ["s", "\\p{White_Space}"],
  ["S", "\\P{White_Space}"],
  ["a", "\\x07"],
  ["e", "\\x1B"]
]);
var CLASS_COMPLEMENT_ALTERNATIVES = /* @__PURE__ */ new Map([
  ["W", `[^${UNICODE_WORD_CHARS_IN_CLASS}]`],
  ["H", `[^${HEX_DIGIT_CHARS}]`]
]);
var RAW_WHITESPACE_ESCAPES = /* @__PURE__ */ new Map([
  ["\n", "\\n"],
  ["\r", "\\r"],
  ["	", "\\t"],
  ["\f", "\\f"],
  ["\v", "\\v"]
]);
var POSIX_CLASS_FRAGMENTS = /* @__PURE__ */ new Map([
  ["alpha", "\\p{Alphabetic}"],
  ["alnum", "\\p{Alphabetic}\\p{Nd}"],
  ["digit", "\\p{Nd}"],
  ["lower", "\\p{Lowercase}"],
  ["upper", "\\p{Uppercase}"],
  ["space", "\\p{White_Space}"],
  ["blank", "\\t\\p{Zs}"],
  ["punct", "\\p{P}\\p{S}"],
  ["cntrl", "\\p{Cc}"],
  ["word", UNICODE_WORD_CHARS_IN_CLASS],
  ["xdigit", HEX_DIGIT_CHARS]
]);
var JS_SYNTAX_CHARS = "^$\\.*+?()[]{}|/";
var GROUP_PREFIX_RE = /^\(\?(?:<[=!]|<[A-Za-z_][A-Za-z0-9_]*>|[:=!>])/;
var BRACED_ESCAPE_RE = /^\\([pPxu])\{([^}]*)\}/;
var QUANTIFIER_BRACE_RE = /^\{(\d+(?:,\d*)?|,\d+)\}/;
var POSIX_BRACKET_RE = /^\[:(\^?)(\p{Alphabetic}+):\]/u;
var EMPTY_NEGATED_POSIX_BRACKET_RE = /^\[:\^:\]/;
var UNSUPPORTED_POSIX_BRACKET_RE = /^\[(?:\.[^\]]*\.\]|=[^\]]*=\])/;
var FIXED_WIDTH_ESCAPE_RE = /^(?:\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\c[A-Za-z])/;
var is_ascii_letter = (char) => char >= "A" && char <= "Z" || char >= "a" && char <= "z";
var character_at = (text, index) => String.fromCodePoint(text.codePointAt(index));
var get_ascii_folded_hex_atom = (hex) => {
  if (!/^[0-9A-Fa-f]{1,8}$/.test(hex)) return null;
  const code_point = Number.parseInt(hex, 16);
  if (code_point > 127) return null;
  const letter = String.fromCharCode(code_point);
  return is_ascii_letter(letter) ? `[${letter.toLowerCase()}${letter.toUpperCase()}]` : null;
};
var normalize_bloom_split_char_class = (regex) => regex.replace(/\[\^\(\\s\|\[([^\]]+)\]\)\]/g, "[^()|\\s$1]");
var ANY_CODE_POINT = "[\\s\\S]";
var MAX_CHARACTER_CLASS_NESTING_DEPTH = 256;
var create_character_class_operand = () => ({
  fragment: "",
  alternatives: [],
  tail: null,
  contains_complex_set: false
});
var throw_character_class_range_error = (index) => {
  throw new SyntaxError(
    `Unsupported range with a set-valued character-class operand at index ${index}`
  );
};
var add_character_class_atom = (operand, atom, index, contains_complex_set = true) => {
  if (operand.tail === "range") throw_character_class_range_error(index);
  operand.alternatives.push(atom);
  operand.tail = "set";
  operand.contains_complex_set = operand.contains_complex_set || contains_complex_set;
};
var append_character_class_fragment = (operand, fragment, set_valued = false, index = -1) => {
  if (set_valued && operand.tail === "range") {
    throw_character_class_range_error(index);
  }
  if (operand.tail === "range") {
    operand.fragment += fragment;
    operand.tail = "complete_range";
    return;
  }
  operand.fragment += fragment;
  operand.tail = set_valued ? "set" : "scalar";
  operand.contains_complex_set = operand.contains_complex_set || set_valued;
};
var rewrite_character_class_escape = (regex, index, operand) => {
  const braced = BRACED_ESCAPE_RE.exec(regex.slice(index));
  if (braced) {
    const [text, kind, body] = braced;
    if (kind === "P" && body === "Word") {
      add_character_class_atom(
        operand,
        `[^${UNICODE_WORD_CHARS_IN_CLASS}]`,
        index
      );
    } else {
      const replacement2 = kind === "x" ? `\\u{${body}}` : kind === "p" && body === "Word" ? UNICODE_WORD_CHARS_IN_CLASS : text;
      append_character_class_fragment(
        operand,
        replacement2,
        kind === "p" || kind === "P",
        index
      );
    }
    return index + text.length;
  }
  const fixed_width = FIXED_WIDTH_ESCAPE_RE.exec(regex.slice(index));
  if (fixed_width) {
    append_character_class_fragment(operand, fixed_width[0]);
    return index + fixed_width[0].length;
  }
  if (index + 1 >= regex.length) {
    throw new SyntaxError(
      `Unterminated escape in character class at index ${index}`
    );
  }
  const next = character_at(regex, index + 1);
  const next_end = index + 1 + next.length;
  const raw_whitespace = RAW_WHITESPACE_ESCAPES.get(next);
  if (raw_whitespace !== void 0) {
    append_character_class_fragment(operand, raw_whitespace);
    return next_end;
  }
  const complement = CLASS_COMPLEMENT_ALTERNATIVES.get(next);
  if (complement !== void 0) {
    add_character_class_atom(operand, complement, index);
    return next_end;
  }
  const rewrite = CLASS_ESCAPE_REWRITES.get(next);
  let replacement;
  let set_valued = false;
  if (rewrite !== void 0) {
    replacement = rewrite;
    set_valued = next !== "a" && next !== "e";
  } else if (/[A-Za-z0-9]/.test(next)) {
    replacement = `\\${next}`;
  } else if (JS_SYNTAX_CHARS.includes(next) || next === "-") {
    replacement = `\\${next}`;
  } else {
    replacement = next;
  }
  append_character_class_fragment(operand, replacement, set_valued, index);
  return next_end;
};
var compile_character_set_union = (pieces) => {
  if (pieces.length === 1) return pieces[0];
  return `(?:(?=(?:${pieces.join("|")}))${ANY_CODE_POINT})`;
};
var compile_character_class_operand = (operand) => {
  const pieces = operand.fragment.length === 0 ? operand.alternatives : [`[${operand.fragment}]`, ...operand.alternatives];
  return compile_character_set_union(pieces);
};
var get_ascii_fold_additions = (positive_atom) => {
  const membership = compile_unicode_regexp(`^(?:${positive_atom})$`, "u");
  let additions = "";
  for (let offset = 0; offset < 26; ++offset) {
    const upper = String.fromCharCode(65 + offset);
    const lower = String.fromCharCode(97 + offset);
    const has_upper = membership.test(upper);
    const has_lower = membership.test(lower);
    if (has_upper !== has_lower) additions += has_upper ? lower : upper;
  }
  return additions;
};
var parse_character_class = (regex, start, ascii_fold, apply_ascii_fold = true, nesting_depth = 1) => {
  if (nesting_depth > MAX_CHARACTER_CLASS_NESTING_DEPTH) {
    throw new SyntaxError(
      `Maximum character-class nesting depth of ${MAX_CHARACTER_CLASS_NESTING_DEPTH} exceeded at index ${start}`
    );
  }
  let i = start + 1;
  const negated = regex[i] === "^";
  if (negated) ++i;
  const first_content_index = i;
  const operands = [create_character_class_operand()];
  let operand = operands[0];
  let contains_nested_negated_complex_set = false;
  while (i < regex.length) {
    const char = character_at(regex, i);
    if (char === "\\") {
      i = rewrite_character_class_escape(regex, i, operand);
      continue;
    }
    if (char === "]") {
      if (i === first_content_index) {
        append_character_class_fragment(operand, "\\]");
        ++i;
        continue;
      }
      if (operand.tail === null) {
        if (operands.length > 1) {
          throw new SyntaxError(
            `Malformed character-class intersection with an empty operand at index ${i}`
          );
        }
        throw new SyntaxError(`Empty character class at index ${start}`);
      }
      const contains_complex_set = operands.some(
        (candidate) => candidate.contains_complex_set
      );
      if (negated && operands.length > 1 && contains_nested_negated_complex_set) {
        throw new SyntaxError(
          `Unsupported outer-negated character-class intersection with a nested negated class containing a Unicode property, POSIX class, or shorthand at index ${start}`
        );
      }
      const first_atom = compile_character_class_operand(operands[0]);
      let positive_atom = first_atom;
      if (operands.length > 1) {
        let lookaheads = "";
        for (let j = 1; j < operands.length; ++j) {
          lookaheads += `(?=${compile_character_class_operand(operands[j])})`;
        }
        positive_atom = `(?:${lookaheads}${first_atom})`;
      }
      const is_direct_class = operands.length === 1 && operand.alternatives.length === 0;
      let direct_fragment = operand.fragment;
      if (ascii_fold && apply_ascii_fold) {
        const additions = get_ascii_fold_additions(positive_atom);
        if (additions.length > 0) {
          if (is_direct_class) {
            direct_fragment += additions;
            positive_atom = `[${direct_fragment}]`;
          } else {
            positive_atom = compile_character_set_union([
              positive_atom,
              `[${additions}]`
            ]);
          }
        }
      }
      const atom = negated ? is_direct_class ? `[^${direct_fragment}]` : `(?:(?!${positive_atom})${ANY_CODE_POINT})` : positive_atom;
      return {
        atom,
        end: i + 1,
        negated,
        contains_complex_set,
        contains_nested_negated_complex_set
      };
    }
    if (regex.startsWith("&&", i)) {
      if (operand.tail === null) {
        throw new SyntaxError(
          `Malformed character-class intersection with an empty operand at index ${i}`
        );
      }
      operand = create_character_class_operand();
      operands.push(operand);
      i += 2;
      continue;
    }
    if (char === "[") {
      const suffix = regex.slice(i);
      if (EMPTY_NEGATED_POSIX_BRACKET_RE.test(suffix)) {
        throw new SyntaxError(
          `Malformed empty negated POSIX character class at index ${i}`
        );
      }
      const posix = POSIX_BRACKET_RE.exec(suffix);
      if (posix) {
        const [, posix_negated, name] = posix;
        const fragment = POSIX_CLASS_FRAGMENTS.get(name);
        if (fragment === void 0) {
          throw new SyntaxError(
            `Unsupported POSIX character class "${name}" at index ${i}`
          );
        }
        if (ascii_fold && posix_negated && (name === "lower" || name === "upper")) {
          throw new SyntaxError(
            `Unsupported negated POSIX ${name} class inside an inline case-insensitive group`
          );
        }
        if (posix_negated) {
          add_character_class_atom(operand, `[^${fragment}]`, i);
        } else {
          append_character_class_fragment(operand, fragment, true, i);
        }
        i += posix[0].length;
        continue;
      }
      if (UNSUPPORTED_POSIX_BRACKET_RE.test(suffix)) {
        throw new SyntaxError(
          `Unsupported POSIX collating or equivalence bracket expression at index ${i}`
        );
      }
      const nested = parse_character_class(
        regex,
        i,
        ascii_fold,
        false,
        nesting_depth + 1
      );
      add_character_class_atom(
        operand,
        nested.atom,
        i,
        nested.contains_complex_set
      );
      contains_nested_negated_complex_set ||= nested.contains_nested_negated_complex_set || nested.negated && nested.contains_complex_set;
      i = nested.end;
      continue;
    }
    if (char === "-") {
      const is_terminal_literal = regex[i + 1] === "]" || regex.startsWith("&&", i + 1);
      if (operand.tail === "set" && !is_terminal_literal) {
        throw_character_class_range_error(i);
      }
      if (operand.tail === null || operand.tail === "range" || operand.tail === "complete_range" || is_terminal_literal) {
        append_character_class_fragment(operand, "\\-");
      } else {
        operand.fragment += "-";
        operand.tail = "range";
      }
      ++i;
      continue;
    }
    append_character_class_fragment(
      operand,
      char === "^" && operand.fragment.length === 0 ? "\\^" : char
    );
    i += char.length;
  }
  throw new SyntaxError(
    `${operands.length > 1 ? "Unterminated character-class intersection" : "Unterminated character class"} at index ${start}`
  );
};
var rewrite_oniguruma_to_js = (regex) => {
  let out = "";
  let atom_start = -1;
  let last_was_quantifier = false;
  let ascii_fold = false;
  const group_states = [];
  const emit_atom = (text) => {
    atom_start = out.length;
    out += text;
    last_was_quantifier = false;
  };
  for (let i = 0; i < regex.length; ) {
    const char = character_at(regex, i);
    if (char === "\\") {
      const braced = BRACED_ESCAPE_RE.exec(regex.slice(i));
      if (braced) {
        const [text, kind, body] = braced;
        let replacement2 = text;
        if (kind === "x") {
          const code_point_escape = `\\u{${body}}`;
          replacement2 = ascii_fold ? get_ascii_folded_hex_atom(body) ?? code_point_escape : code_point_escape;
        } else if (body === "Word") {
          replacement2 = kind === "p" ? UNICODE_WORD_CLASS : UNICODE_NON_WORD_CLASS;
        }
        emit_atom(replacement2);
        i += text.length;
        continue;
      }
      const fixed_width = FIXED_WIDTH_ESCAPE_RE.exec(regex.slice(i));
      if (fixed_width) {
        const text = fixed_width[0];
        const replacement2 = ascii_fold && text[1] !== "c" ? get_ascii_folded_hex_atom(text.slice(2)) ?? text : text;
        emit_atom(replacement2);
        i += text.length;
        continue;
      }
      if (i + 1 >= regex.length) {
        out += char;
        break;
      }
      const next = character_at(regex, i + 1);
      i += 1 + next.length;
      if (next === "G") {
        continue;
      }
      const raw_whitespace = RAW_WHITESPACE_ESCAPES.get(next);
      if (raw_whitespace !== void 0) {
        emit_atom(raw_whitespace);
        continue;
      }
      const rewrite = ESCAPE_REWRITES.get(next);
      let replacement;
      if (rewrite !== void 0) {
        replacement = rewrite;
      } else if (/[A-Za-z0-9]/.test(next)) {
        replacement = `\\${next}`;
      } else if (JS_SYNTAX_CHARS.includes(next)) {
        replacement = `\\${next}`;
      } else {
        replacement = next;
      }
      emit_atom(replacement);
      continue;
    }
    switch (char) {
      case "[": {
        const parsed = parse_character_class(regex, i, ascii_fold);
        emit_atom(parsed.atom);
        i = parsed.end;
        continue;
      }
      case "]":
        emit_atom("\\]");
        ++i;
        continue;
      case ".":
        emit_atom("[^\\n]");
        ++i;
        continue;
      case "^":
        emit_atom(LINE_START_ANCHOR);
        ++i;
        continue;
      case "$":
        emit_atom(LINE_END_ANCHOR);
        ++i;
        continue;
      case "(": {
        const inline_case_insensitive = regex.startsWith("(?i:", i);
        const source_prefix = inline_case_insensitive ? "(?i:" : GROUP_PREFIX_RE.exec(regex.slice(i))?.[0] ?? "(";
        const output_prefix = inline_case_insensitive ? "(?:" : source_prefix === "(?>" ? "(?:" : source_prefix;
        group_states.push([out.length, ascii_fold]);
        if (inline_case_insensitive) ascii_fold = true;
        out += output_prefix;
        last_was_quantifier = false;
        i += source_prefix.length;
        continue;
      }
      case ")":
        out += char;
        [atom_start, ascii_fold] = group_states.pop() ?? [-1, false];
        last_was_quantifier = false;
        ++i;
        continue;
      case "|":
        out += char;
        atom_start = -1;
        last_was_quantifier = false;
        ++i;
        continue;
      case "{": {
        const quant = QUANTIFIER_BRACE_RE.exec(regex.slice(i));
        if (!quant || atom_start < 0) {
          emit_atom("\\{");
          ++i;
          continue;
        }
        const body = quant[1].startsWith(",") ? `0${quant[1]}` : quant[1];
        i += quant[0].length;
        const following = regex[i];
        if (following === "+" || following === "*") {
          out = `${out.slice(0, atom_start)}(?:${out.slice(atom_start)}{${body}})${following}`;
          ++i;
        } else {
          out += `{${body}}`;
        }
        last_was_quantifier = true;
        continue;
      }
      case "}":
        emit_atom("\\}");
        ++i;
        continue;
      case "+":
        if (last_was_quantifier) {
          ++i;
          continue;
        }
        out += char;
        last_was_quantifier = true;
        ++i;
        continue;
      case "*":
      case "?":
        out += char;
        last_was_quantifier = true;
        ++i;
        continue;
      default:
        emit_atom(
          ascii_fold && is_ascii_letter(char) ? `[${char.toLowerCase()}${char.toUpperCase()}]` : char
        );
        i += char.length;
        continue;
    }
  }
  return out;
};
var escape_reg_exp = (string) => string.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
var fuse_unk = (arr, tokens_to_ids, unk_token_id) => {
  const fused = [];
  let i = 0;
  while (i < arr.length) {
    fused.push(arr[i]);
    const token_id = tokens_to_ids.get(arr[i]) ?? unk_token_id;
    if (token_id !== unk_token_id) {
      ++i;
      continue;
    }
    while (++i < arr.length && (tokens_to_ids.get(arr[i]) ?? unk_token_id) === unk_token_id) {
      if (tokens_to_ids.get(fused.at(-1)) !== unk_token_id) {
        fused[fused.length - 1] += arr[i];
      }
    }
  }
  return fused;
};
var is_chinese_char = (cp) => cp >= 19968 && cp <= 40959 || cp >= 13312 && cp <= 19903 || cp >= 131072 && cp <= 173791 || cp >= 173824 && cp <= 177983 || cp >= 177984 && cp <= 178207 || cp >= 178208 && cp <= 183983 || cp >= 63744 && cp <= 64255 || cp >= 194560 && cp <= 195103;
var is_integral_number = (x) => Number.isInteger(x) || typeof x === "bigint";
var len = (s) => {
  let length = 0;
  for (const c of s) ++length;
  return length;
};
var lowercase_and_remove_accents = (text) => remove_accents(text.toLowerCase());
var merge_arrays = (...arrs) => Array.prototype.concat.apply([], arrs);
var object_to_map = (obj) => new Map(Object.entries(obj));
var regex_split = (text, regex) => {
  const result = [];
  let prev = 0;
  for (const match of text.matchAll(regex)) {
    const full_match = match[0];
    if (prev < match.index) {
      result.push(text.slice(prev, match.index));
    }
    if (full_match.length > 0) {
      result.push(full_match);
    }
    prev = match.index + full_match.length;
  }
  if (prev < text.length) {
    result.push(text.slice(prev));
  }
  return result;
};
var remove_accents = (text) => text.replace(/\p{M}/gu, "");
var validate_object = (obj, name, required_keys = []) => {
  if (!obj || Array.isArray(obj) || typeof obj !== "object") {
    return `${name} must be a valid object`;
  }
  for (const key of required_keys) {
    if (!(key in obj)) {
      return `${name} must contain a "${key}" property`;
    }
  }
  return null;
};
var whitespace_split = (text) => text.match(/\S+/g) || [];
var Callable = class {
  /**
   * Creates a new instance of the Callable class.
   */
  constructor() {
    const closure = function(...args) {
      return closure._call(...args);
    };
    return Object.setPrototypeOf(closure, new.target.prototype);
  }
};
var Callable_default = Callable;
var Normalizer = class extends Callable_default {
  /**
   * @param config The configuration object for the normalizer.
   */
  constructor(config) {
    super();
    this.config = config;
  }
  /**
   * Alias for {@link Normalizer#normalize}.
   * @param text The text to normalize.
   * @returns The normalized text.
   */
  _call(text) {
    return this.normalize(text);
  }
};
var Normalizer_default = Normalizer;
var BertNormalizer = class extends Normalizer_default {
  /**
   * Adds whitespace around any CJK (Chinese, Japanese, or Korean) character in the input text.
   *
   * @param text The input text to tokenize.
   * @returns The tokenized text with whitespace added around CJK characters.
   */
  tokenize_chinese_chars(text) {
    const output = [];
    for (let i = 0; i < text.length; ++i) {
      const char = text[i];
      const cp = char.charCodeAt(0);
      if (is_chinese_char(cp)) {
        output.push(" ");
        output.push(char);
        output.push(" ");
      } else {
        output.push(char);
      }
    }
    return output.join("");
  }
  /**
   * Strips accents from the given text.
   * @param text The text to strip accents from.
   * @returns The text with accents removed.
   */
  strip_accents(text) {
    return text.normalize("NFD").replace(/\p{Mn}/gu, "");
  }
  /**
   * Checks whether `char` is a control character.
   * @param char The character to check.
   * @returns Whether `char` is a control character.
   */
  is_control(char) {
    switch (char) {
      case "	":
      case "\n":
      case "\r":
        return false;
      default:
        return /^\p{Cc}|\p{Cf}|\p{Co}|\p{Cs}$/u.test(char);
    }
  }
  /**
   * Performs invalid character removal and whitespace cleanup on text.
   * @param text The text to clean.
   * @returns The cleaned text.
   */
  clean_text(text) {
    const output = [];
    for (const char of text) {
      const cp = char.charCodeAt(0);
      if (cp === 0 || cp === 65533 || this.is_control(char)) {
        continue;
      }
      if (/^\s$/.test(char)) {
        output.push(" ");
      } else {
        output.push(char);
      }
    }
    return output.join("");
  }
  /**
   * Normalizes the given text based on the configuration.
   * @param text The text to normalize.
   * @returns The normalized text.
   */
  normalize(text) {
    if (this.config.clean_text) {
      text = this.clean_text(text);
    }
    if (this.config.handle_chinese_chars) {
      text = this.tokenize_chinese_chars(text);
    }
    if (this.config.lowercase) {
      text = text.toLowerCase();
      if (this.config.strip_accents !== false) {
        text = this.strip_accents(text);
      }
    } else if (this.config.strip_accents) {
      text = this.strip_accents(text);
    }
    return text;
  }
};
var BertNormalizer_default = BertNormalizer;
var Precompiled = class extends Normalizer_default {
  /**
   * Create a new instance of Precompiled normalizer.
   * @param config The configuration object.
   */
  constructor(config) {
    super(config);
    this.charsmap = config.precompiled_charsmap ?? null;
  }
  /**
   * Normalizes the given text by applying the precompiled charsmap.
   * @param text The text to normalize.
   * @returns The normalized text.
   */
  normalize(text) {
    text = text.replace(
      /[\u0001-\u0008\u000B\u000E-\u001F\u007F\u008F\u009F]/gm,
      ""
    );
    text = text.replace(
      /[\u0009\u000A\u000C\u000D\u00A0\u1680\u2000-\u200F\u2028\u2029\u202F\u205F\u2581\u3000\uFEFF\uFFFD]/gm,
      " "
    );
    if (text.includes("～")) {
      const parts = text.split("～");
      text = parts.map((part) => part.normalize("NFKC")).join("～");
    } else {
      text = text.normalize("NFKC");
    }
    return text;
  }
};
var Precompiled_default = Precompiled;
var Sequence = class extends Normalizer_default {
  /**
   * Create a new instance of NormalizerSequence.
   * @param config The configuration object.
   */
  constructor(config) {
    super(config);
    this.normalizers = (config.normalizers ?? []).map(
      (x) => create_normalizer_default(x)
    );
  }
  /**
   * Apply a sequence of Normalizers to the input text.
   * @param text The text to normalize.
   * @returns The normalized text.
   */
  normalize(text) {
    return this.normalizers.reduce((t, normalizer) => {
      return normalizer ? normalizer.normalize(t) : t;
    }, text);
  }
};
var Sequence_default = Sequence;
var Replace = class extends Normalizer_default {
  /**
   * @param config The configuration object for the normalizer.
   */
  constructor(config) {
    super(config);
    this.pattern = create_pattern(this.config.pattern ?? {});
  }
  /**
   * Normalize the input text by replacing the pattern with the content.
   * @param text The input text to be normalized.
   * @returns The normalized text after replacing the pattern with the content.
   */
  normalize(text) {
    return this.pattern === null ? text : text.replaceAll(this.pattern, this.config.content ?? "");
  }
};
var Replace_default = Replace;
var UnicodeNormalizer = class extends Normalizer_default {
  constructor() {
    super(...arguments);
    this.form = "NFC";
  }
  /**
   * Normalize the input text by applying Unicode normalization.
   * @param text The input text to be normalized.
   * @returns The normalized text.
   */
  normalize(text) {
    text = text.normalize(this.form);
    return text;
  }
};
var UnicodeNormalizer_default = UnicodeNormalizer;
var NFC = class extends UnicodeNormalizer_default {
  constructor() {
    super(...arguments);
    this.form = "NFC";
  }
};
var NFC_default = NFC;
var NFD = class extends UnicodeNormalizer_default {
  constructor() {
    super(...arguments);
    this.form = "NFD";
  }
};
var NFD_default = NFD;
var NFKC = class extends UnicodeNormalizer_default {
  constructor() {
    super(...arguments);
    this.form = "NFKC";
  }
};
var NFKC_default = NFKC;
var NFKD = class extends UnicodeNormalizer_default {
  constructor() {
    super(...arguments);
    this.form = "NFKD";
  }
};
var NFKD_default = NFKD;
var Strip = class extends Normalizer_default {
  /**
   * Strip leading and/or trailing whitespace from the input text.
   * @param text The input text.
   * @returns The normalized text.
   */
  normalize(text) {
    if (this.config.strip_left && this.config.strip_right) {
      text = text.trim();
    } else {
      if (this.config.strip_left) {
        text = text.trimStart();
      }
      if (this.config.strip_right) {
        text = text.trimEnd();
      }
    }
    return text;
  }
};
var Strip_default = Strip;
var StripAccents = class extends Normalizer_default {
  /**
   * Remove all accents from the text.
   * @param text The input text.
   * @returns The normalized text without accents.
   */
  normalize(text) {
    return remove_accents(text);
  }
};
var StripAccents_default = StripAccents;
var Lowercase = class extends Normalizer_default {
  /**
   * Lowercases the input string.
   * @param {string} text The text to normalize.
   * @returns {string} The normalized text.
   */
  normalize(text) {
    return text.toLowerCase();
  }
};
var Lowercase_default = Lowercase;
var Prepend = class extends Normalizer_default {
  /**
   * Prepends the input string.
   * @param text The text to normalize.
   * @returns The normalized text.
   */
  normalize(text) {
    text = this.config.prepend + text;
    return text;
  }
};
var Prepend_default = Prepend;
function create_normalizer(config) {
  if (config === null) return null;
  switch (config.type) {
    case "BertNormalizer":
      return new BertNormalizer_default(config);
    case "Precompiled":
      return new Precompiled_default(config);
    case "Sequence":
      return new Sequence_default(config);
    case "Replace":
      return new Replace_default(config);
    case "NFC":
      return new NFC_default(config);
    case "NFD":
      return new NFD_default(config);
    case "NFKC":
      return new NFKC_default(config);
    case "NFKD":
      return new NFKD_default(config);
    case "Strip":
      return new Strip_default(config);
    case "StripAccents":
      return new StripAccents_default(config);
    case "Lowercase":
      return new Lowercase_default(config);
    case "Prepend":
      return new Prepend_default(config);
    default:
      throw new Error(`Unknown Normalizer type: ${config.type}`);
  }
}
var create_normalizer_default = create_normalizer;
var PreTokenizer = class extends Callable_default {
  /**
   * Tokenizes the given text into pre-tokens.
   * @param text The text or array of texts to pre-tokenize.
   * @param options Additional options for the pre-tokenization logic.
   * @returns An array of pre-tokens.
   */
  pre_tokenize(text, options) {
    return (Array.isArray(text) ? text.map((x) => this.pre_tokenize_text(x, options)) : this.pre_tokenize_text(text, options)).flat();
  }
  /**
   * Alias for {@link PreTokenizer#pre_tokenize}.
   * @param text The text or array of texts to pre-tokenize.
   * @param options Additional options for the pre-tokenization logic.
   * @returns An array of pre-tokens.
   */
  _call(text, options) {
    return this.pre_tokenize(text, options);
  }
};
var PreTokenizer_default = PreTokenizer;
var BYTES_TO_UNICODE = (() => {
  const bs = [
    ...Array.from(
      { length: "~".charCodeAt(0) - "!".charCodeAt(0) + 1 },
      (_, i) => i + "!".charCodeAt(0)
    ),
    ...Array.from(
      { length: "¬".charCodeAt(0) - "¡".charCodeAt(0) + 1 },
      (_, i) => i + "¡".charCodeAt(0)
    ),
    ...Array.from(
      { length: "ÿ".charCodeAt(0) - "®".charCodeAt(0) + 1 },
      (_, i) => i + "®".charCodeAt(0)
    )
  ];
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n += 1;
    }
  }
  const ccs = cs.map((n2) => String.fromCharCode(n2));
  return Object.fromEntries(bs.map((b, i) => [b, ccs[i]]));
})();
var reverse_dictionary = (data) => Object.fromEntries(Object.entries(data).map(([key, value]) => [value, key]));
var UNICODE_TO_BYTES = reverse_dictionary(BYTES_TO_UNICODE);
var PUNCTUATION_REGEX = "\\p{P}\\u0021-\\u002F\\u003A-\\u0040\\u005B-\\u0060\\u007B-\\u007E";
var ByteLevel = class extends PreTokenizer_default {
  /**
   * Creates a new instance of the `ByteLevelPreTokenizer` class.
   * @param config The configuration object.
   */
  constructor(config) {
    super();
    this.config = config;
    this.add_prefix_space = this.config.add_prefix_space ?? false;
    this.trim_offsets = this.config.trim_offsets ?? false;
    this.use_regex = this.config.use_regex ?? true;
    this.pattern = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
    this.byte_encoder = BYTES_TO_UNICODE;
    this.text_encoder = new TextEncoder();
  }
  /**
   * Tokenizes a single piece of text using byte-level tokenization.
   * @param text The text to tokenize.
   * @param options Additional options for the pre-tokenization logic.
   * @returns An array of tokens.
   */
  pre_tokenize_text(text, options) {
    if (this.add_prefix_space && !text.startsWith(" ")) {
      text = " " + text;
    }
    const tokens = this.use_regex ? text.match(this.pattern) || [] : [text];
    return tokens.map(
      (token) => Array.from(
        this.text_encoder.encode(token),
        (byte) => this.byte_encoder[byte]
      ).join("")
    );
  }
};
var ByteLevel_default = ByteLevel;
var Whitespace = class extends PreTokenizer_default {
  /**
   * Pre-tokenizes the input text by splitting it on word boundaries.
   * @param text The text to be pre-tokenized.
   * @param options Additional options for the pre-tokenization logic.
   * @returns An array of tokens produced by splitting the input text on whitespace.
   */
  pre_tokenize_text(text, options) {
    return text.match(/\w+|[^\w\s]+/g) || [];
  }
};
var Whitespace_default = Whitespace;
var Metaspace = class extends PreTokenizer_default {
  /**
   * @param config The configuration object for the MetaspacePreTokenizer.
   */
  constructor(config) {
    super();
    this.replacement = config.replacement ?? "▁";
    this.str_rep = config.str_rep || this.replacement;
    this.prepend_scheme = config.prepend_scheme ?? "always";
  }
  /**
   * This method takes a string, replaces spaces with the replacement character,
   * adds a prefix space if requested, and returns a new list of tokens.
   * @param text The text to pre-tokenize.
   * @param options The options for the pre-tokenization.
   * @returns A new list of pre-tokenized tokens.
   */
  pre_tokenize_text(text, options) {
    const { section_index = void 0 } = options ?? {};
    let normalized = text.replaceAll(" ", this.str_rep);
    if (
      // We add a prefix space if:
      //  (1) The normalized token does not already start with the replacement character.
      !normalized.startsWith(this.replacement) && // and (2) either:
      //  (a) prepend_scheme is 'always'
      //  (b) prepend_scheme is 'first' and this is the first section
      (this.prepend_scheme === "always" || this.prepend_scheme === "first" && section_index === 0)
    ) {
      normalized = this.str_rep + normalized;
    }
    return [normalized];
  }
};
var Metaspace_default = Metaspace;
var Split = class extends PreTokenizer_default {
  /**
   * @param config The configuration options for the pre-tokenizer.
   */
  constructor(config) {
    super();
    this.config = config;
    this.pattern = create_pattern(
      this.config.pattern ?? {},
      this.config.invert ?? true
    );
  }
  /**
   * Tokenizes text by splitting it using the given pattern.
   * @param text The text to tokenize.
   * @returns An array of tokens.
   */
  pre_tokenize_text(text) {
    if (this.pattern === null) {
      return [];
    }
    if (this.config.invert) {
      return (text.match(this.pattern) || []).filter((x) => x);
    } else if (this.config.behavior?.toLowerCase() === "removed") {
      return text.split(this.pattern).filter((x) => x);
    } else {
      return regex_split(text, this.pattern);
    }
  }
};
var Split_default = Split;
var Punctuation = class extends PreTokenizer_default {
  /**
   * @param config The configuration options for the pre-tokenizer.
   */
  constructor(config) {
    super();
    this.config = config;
    this.pattern = new RegExp(
      `[^${PUNCTUATION_REGEX}]+|[${PUNCTUATION_REGEX}]+`,
      "gu"
    );
  }
  /**
   * Tokenizes text by splitting it using the given pattern.
   * @param text The text to tokenize.
   * @returns An array of tokens.
   */
  pre_tokenize_text(text) {
    return text.match(this.pattern) || [];
  }
};
var Punctuation_default = Punctuation;
var Digits = class extends PreTokenizer_default {
  /**
   * @param config The configuration options for the pre-tokenizer.
   */
  constructor(config) {
    super();
    this.config = config;
    const digit_pattern = `[^\\d]+|\\d${this.config.individual_digits ? "" : "+"}`;
    this.pattern = new RegExp(digit_pattern, "gu");
  }
  /**
   * Tokenizes text by splitting it using the given pattern.
   * @param text The text to tokenize.
   * @returns An array of tokens.
   */
  pre_tokenize_text(text) {
    return text.match(this.pattern) || [];
  }
};
var Digits_default = Digits;
var BertPreTokenizer = class extends PreTokenizer_default {
  /**
   * A PreTokenizer that splits text into wordpieces using a basic tokenization scheme
   * similar to that used in the original implementation of BERT.
   */
  constructor() {
    super();
    this.pattern = new RegExp(
      `[^\\s${PUNCTUATION_REGEX}]+|[${PUNCTUATION_REGEX}]`,
      "gu"
    );
  }
  /**
   * Tokenizes a single text using the BERT pre-tokenization scheme.
   *
   * @param text The text to tokenize.
   * @param options Additional options for the pre-tokenization logic.
   * @returns An array of tokens.
   */
  pre_tokenize_text(text, options) {
    return text.trim().match(this.pattern) || [];
  }
};
var BertPreTokenizer_default = BertPreTokenizer;
var Replace2 = class extends PreTokenizer_default {
  /**
   * @param config The configuration options for the pre-tokenizer.
   */
  constructor(config) {
    super();
    this.config = config;
    this.pattern = create_pattern(this.config.pattern ?? {});
    this.content = this.config.content ?? "";
  }
  /**
   * Pre-tokenizes the input text by replacing certain characters.
   * @param text The text to be pre-tokenized.
   * @returns An array of tokens produced by replacing certain characters.
   */
  pre_tokenize_text(text) {
    if (this.pattern === null) {
      return [text];
    }
    return [text.replaceAll(this.pattern, this.config.content ?? "")];
  }
};
var Replace_default2 = Replace2;
var Sequence2 = class extends PreTokenizer_default {
  /**
   * Creates an instance of PreTokenizerSequence.
   * @param config The configuration object for the pre-tokenizer sequence.
   */
  constructor(config) {
    super();
    this.tokenizers = (config.pretokenizers ?? []).map(
      (x) => create_pre_tokenizer_default(x)
    );
  }
  /**
   * Applies each pre-tokenizer in the sequence to the input text in turn.
   * @param text The text to pre-tokenize.
   * @param options Additional options for the pre-tokenization logic.
   * @returns The pre-tokenized text.
   */
  pre_tokenize_text(text, options) {
    return this.tokenizers.reduce(
      (pre_tokenized_text, tokenizer) => {
        return tokenizer ? tokenizer.pre_tokenize(pre_tokenized_text, options) : pre_tokenized_text;
      },
      [text]
    );
  }
};
var Sequence_default2 = Sequence2;
var WhitespaceSplit = class extends PreTokenizer_default {
  /**
   * Pre-tokenizes the input text by splitting it on whitespace characters.
   * @param text The text to be pre-tokenized.
   * @returns An array of tokens produced by splitting the input text on whitespace.
   */
  pre_tokenize_text(text) {
    return whitespace_split(text);
  }
};
var WhitespaceSplit_default = WhitespaceSplit;
var FixedLength = class extends PreTokenizer_default {
  /**
   * @param config The configuration options for the pre-tokenizer.
   */
  constructor(config) {
    super();
    this.config = config;
    this._length = config.length;
  }
  /**
   * Pre-tokenizes the input text by splitting it into fixed-length tokens.
   * @param text The text to be pre-tokenized.
   * @returns An array of tokens produced by splitting the input text into fixed-length tokens.
   */
  pre_tokenize_text(text) {
    const tokens = [];
    for (let i = 0; i < text.length; i += this._length) {
      tokens.push(text.slice(i, i + this._length));
    }
    return tokens;
  }
};
var FixedLength_default = FixedLength;
function create_pre_tokenizer(config) {
  if (config === null) return null;
  switch (config.type) {
    case "BertPreTokenizer":
      return new BertPreTokenizer_default();
    case "Sequence":
      return new Sequence_default2(config);
    case "Whitespace":
      return new Whitespace_default();
    case "WhitespaceSplit":
      return new WhitespaceSplit_default();
    case "Metaspace":
      return new Metaspace_default(config);
    case "ByteLevel":
      return new ByteLevel_default(config);
    case "Split":
      return new Split_default(config);
    case "Punctuation":
      return new Punctuation_default(config);
    case "Digits":
      return new Digits_default(config);
    case "Replace":
      return new Replace_default2(config);
    case "FixedLength":
      return new FixedLength_default(config);
    default:
      throw new Error(`Unknown PreTokenizer type: ${config.type}`);
  }
}
var create_pre_tokenizer_default = create_pre_tokenizer;
var TokenizerModel = class extends Callable_default {
  /**
   * Creates a new instance of TokenizerModel.
   * @param config The configuration object for the TokenizerModel.
   */
  constructor(config) {
    super();
    this.config = config;
    this.vocab = [];
    this.tokens_to_ids = /* @__PURE__ */ new Map();
    this.unk_token_id = void 0;
    this.unk_token = void 0;
    this.end_of_word_suffix = void 0;
    this.fuse_unk = this.config.fuse_unk ?? false;
  }
  /**
   * Internal function to call the TokenizerModel instance.
   * @param tokens The tokens to encode.
   * @returns The encoded tokens.
   */
  _call(tokens) {
    let result = this.encode(tokens);
    if (this.fuse_unk) {
      result = fuse_unk(result, this.tokens_to_ids, this.unk_token_id);
    }
    return result;
  }
};
var TokenizerModel_default = TokenizerModel;
var WordPieceTokenizer = class extends TokenizerModel_default {
  /**
   * @param config The configuration object.
   */
  constructor(config) {
    super(config);
    this.max_input_chars_per_word = 100;
    this.tokens_to_ids = object_to_map(config.vocab);
    this.unk_token_id = this.tokens_to_ids.get(config.unk_token);
    this.unk_token = config.unk_token;
    this.max_input_chars_per_word = config.max_input_chars_per_word ?? 100;
    this.vocab = new Array(this.tokens_to_ids.size);
    for (const [key, value] of this.tokens_to_ids) {
      this.vocab[value] = key;
    }
  }
  /**
   * Encodes an array of tokens using WordPiece encoding.
   * @param tokens The tokens to encode.
   * @returns An array of encoded tokens.
   */
  encode(tokens) {
    const output_tokens = [];
    for (const token of tokens) {
      const chars = [...token];
      if (chars.length > this.max_input_chars_per_word) {
        output_tokens.push(this.unk_token);
        continue;
      }
      let is_unknown = false;
      let start = 0;
      const sub_tokens = [];
      while (start < chars.length) {
        let end = chars.length;
        let current_substring = null;
        while (start < end) {
          let substr = chars.slice(start, end).join("");
          if (start > 0) {
            substr = this.config.continuing_subword_prefix + substr;
          }
          if (this.tokens_to_ids.has(substr)) {
            current_substring = substr;
            break;
          }
          --end;
        }
        if (current_substring === null) {
          is_unknown = true;
          break;
        }
        sub_tokens.push(current_substring);
        start = end;
      }
      if (is_unknown) {
        output_tokens.push(this.unk_token);
      } else {
        output_tokens.push(...sub_tokens);
      }
    }
    return output_tokens;
  }
};
var WordPiece_default = WordPieceTokenizer;
var CharTrieNode = class _CharTrieNode {
  /**
   * Create a new CharTrieNode.
   * @param is_leaf Whether the node is a leaf node or not.
   * @param children A map containing the node's children, where the key is a character and the value is a `CharTrieNode`.
   */
  constructor(is_leaf, children) {
    this.is_leaf = is_leaf;
    this.children = children;
  }
  /**
   * Returns a new `CharTrieNode` instance with default values.
   * @returns A new `CharTrieNode` instance with `is_leaf` set to `false` and an empty `children` map.
   */
  static default() {
    return new _CharTrieNode(false, /* @__PURE__ */ new Map());
  }
};
var CharTrie = class {
  constructor() {
    this.root = CharTrieNode.default();
  }
  /**
   * Adds one or more `texts` to the trie.
   * @param texts The strings to add to the trie.
   */
  extend(texts) {
    for (const text of texts) {
      this.push(text);
    }
  }
  /**
   * Adds text to the trie.
   * @param text The string to add to the trie.
   */
  push(text) {
    let node = this.root;
    for (const ch of text) {
      let child = node.children.get(ch);
      if (child === void 0) {
        child = CharTrieNode.default();
        node.children.set(ch, child);
      }
      node = child;
    }
    node.is_leaf = true;
  }
  /**
   * Searches the trie for stored strings that match `chars` starting at `start`.
   * @param chars The input characters to search.
   * @param start The index to start searching from.
   * @yields Each stored string that is a prefix of `chars` starting at `start`.
   */
  *common_prefix_search(chars, start = 0) {
    let node = this.root;
    if (node === void 0) return;
    let prefix = "";
    for (let i = start; i < chars.length; ++i) {
      const ch = chars[i];
      prefix += ch;
      node = node.children.get(ch);
      if (node === void 0) return;
      if (node.is_leaf) {
        yield prefix;
      }
    }
  }
};
var CharTrie_default = CharTrie;
var TokenLatticeNode = class _TokenLatticeNode {
  /**
   * Represents a node in a token lattice for a given sentence.
   * @param token_id The ID of the token associated with this node.
   * @param node_id The ID of this node.
   * @param pos The starting position of the token in the sentence.
   * @param length The length of the token.
   * @param score The score associated with the token.
   */
  constructor(token_id, node_id, pos, length, score) {
    this.token_id = token_id;
    this.node_id = node_id;
    this.pos = pos;
    this.length = length;
    this.score = score;
    this.prev = null;
    this.backtrace_score = 0;
  }
  /**
   * Returns a clone of this node.
   * @returns A clone of this node.
   */
  clone() {
    const n = new _TokenLatticeNode(
      this.token_id,
      this.node_id,
      this.pos,
      this.length,
      this.score
    );
    n.prev = this.prev;
    n.backtrace_score = this.backtrace_score;
    return n;
  }
};
var TokenLattice = class {
  /**
   * Creates a new TokenLattice instance.
   *
   * @param sentence The input sentence to be tokenized.
   * @param bos_token_id The beginning-of-sequence token ID.
   * @param eos_token_id The end-of-sequence token ID.
   */
  constructor(sentence, bos_token_id, eos_token_id) {
    this.chars = Array.from(sentence);
    this.len = this.chars.length;
    this.bos_token_id = bos_token_id;
    this.eos_token_id = eos_token_id;
    this.nodes = [];
    this.begin_nodes = Array.from(
      { length: this.len + 1 },
      () => []
    );
    this.end_nodes = Array.from({ length: this.len + 1 }, () => []);
    const bos = new TokenLatticeNode(this.bos_token_id ?? 0, 0, 0, 0, 0);
    const eos = new TokenLatticeNode(
      this.eos_token_id ?? 0,
      1,
      this.len,
      0,
      0
    );
    this.nodes.push(bos.clone());
    this.nodes.push(eos.clone());
    this.begin_nodes[this.len].push(eos);
    this.end_nodes[0].push(bos);
  }
  /**
   * Inserts a new token node into the token lattice.
   *
   * @param pos The starting position of the token.
   * @param length The length of the token.
   * @param score The score of the token.
   * @param token_id The token ID of the token.
   */
  insert(pos, length, score, token_id) {
    const node_id = this.nodes.length;
    const node = new TokenLatticeNode(token_id, node_id, pos, length, score);
    this.begin_nodes[pos].push(node);
    this.end_nodes[pos + length].push(node);
    this.nodes.push(node);
  }
  /**
   * Implements the Viterbi algorithm to compute the most likely sequence of tokens.
   *
   * @returns The most likely sequence of tokens.
   */
  viterbi() {
    const len2 = this.len;
    let pos = 0;
    while (pos <= len2) {
      if (this.begin_nodes[pos].length == 0) {
        return [];
      }
      for (let rnode of this.begin_nodes[pos]) {
        rnode.prev = null;
        let best_score = 0;
        let best_node = null;
        for (let lnode of this.end_nodes[pos]) {
          const score = lnode.backtrace_score + rnode.score;
          if (best_node === null || score > best_score) {
            best_node = lnode.clone();
            best_score = score;
          }
        }
        if (best_node !== null) {
          rnode.prev = best_node;
          rnode.backtrace_score = best_score;
        } else {
          return [];
        }
      }
      ++pos;
    }
    const results = [];
    const root = this.begin_nodes[len2][0];
    const prev = root.prev;
    if (prev === null) {
      return [];
    }
    let node = prev.clone();
    while (node.prev !== null) {
      results.push(node.clone());
      const n = node.clone();
      node = n.prev.clone();
    }
    results.reverse();
    return results;
  }
  /**
   * Get the text piece for a given node.
   * @param node The node to get the piece for.
   * @returns The array of nodes representing the most likely sequence of tokens.
   */
  piece(node) {
    return this.chars.slice(node.pos, node.pos + node.length).join("");
  }
  /**
   * @returns The most likely sequence of tokens.
   */
  tokens() {
    const nodes = this.viterbi();
    return nodes.map((x) => this.piece(x));
  }
  /**
   * @returns The most likely sequence of token ids.
   */
  token_ids() {
    const nodes = this.viterbi();
    return nodes.map((x) => x.token_id);
  }
};
var TokenLattice_default = TokenLattice;
function min(arr) {
  if (arr.length === 0) throw new Error("Array must not be empty");
  let min_value = arr[0];
  let index_of_min = 0;
  for (let i = 1; i < arr.length; ++i) {
    if (arr[i] < min_value) {
      min_value = arr[i];
      index_of_min = i;
    }
  }
  return [min_value, index_of_min];
}
var Unigram = class extends TokenizerModel_default {
  /**
   * Create a new Unigram tokenizer model.
   * @param config The configuration object for the Unigram model.
   * @param eos_token
   */
  constructor(config, eos_token) {
    super(config);
    const vocab_size = config.vocab.length;
    this.vocab = new Array(vocab_size);
    this.scores = new Array(vocab_size);
    for (let i = 0; i < vocab_size; ++i) {
      [this.vocab[i], this.scores[i]] = config.vocab[i];
    }
    this.unk_token_id = config.unk_id;
    this.unk_token = this.vocab[config.unk_id];
    this.tokens_to_ids = new Map(this.vocab.map((x, i) => [x, i]));
    this.bos_token = " ";
    this.bos_token_id = this.tokens_to_ids.get(this.bos_token);
    this.eos_token = eos_token;
    this.eos_token_id = this.tokens_to_ids.get(this.eos_token);
    this.unk_token = this.vocab[this.unk_token_id];
    this.min_score = min(this.scores)[0];
    this.unk_score = this.min_score - 10;
    this.scores[this.unk_token_id] = this.unk_score;
    this.trie = new CharTrie_default();
    this.trie.extend(this.vocab);
    this.fuse_unk = true;
  }
  /**
   * Populates lattice nodes.
   * @param lattice The token lattice to populate with nodes.
   */
  populate_nodes(lattice) {
    const chars = lattice.chars;
    const mblen = 1;
    let begin_pos = 0;
    while (begin_pos < chars.length) {
      let has_single_node = false;
      const prefixed_tokens = this.trie.common_prefix_search(chars, begin_pos);
      for (const token of prefixed_tokens) {
        const token_id = this.tokens_to_ids.get(token);
        const token_score = this.scores[token_id];
        const n = len(token);
        lattice.insert(begin_pos, n, token_score, token_id);
        if (!has_single_node && n === mblen) {
          has_single_node = true;
        }
      }
      if (!has_single_node) {
        lattice.insert(begin_pos, mblen, this.unk_score, this.unk_token_id);
      }
      begin_pos += mblen;
    }
  }
  /**
   * Encodes an array of tokens into an array of subtokens using the unigram model.
   *
   * @param normalized The normalized string.
   * @returns An array of subtokens obtained by encoding the input tokens using the unigram model.
   */
  tokenize(normalized) {
    const lattice = new TokenLattice_default(
      normalized,
      this.bos_token_id,
      this.eos_token_id
    );
    this.populate_nodes(lattice);
    return lattice.tokens();
  }
  /**
   * Encodes an array of tokens using Unigram encoding.
   * @param tokens The tokens to encode.
   * @returns An array of encoded tokens.
   */
  encode(tokens) {
    const to_return = [];
    for (const token of tokens) {
      const tokenized = this.tokenize(token);
      to_return.push(...tokenized);
    }
    return to_return;
  }
};
var Unigram_default = Unigram;
var PriorityQueue = class {
  /**
   * Create a new PriorityQueue.
   * @param comparator Comparator function to determine priority. Defaults to a MaxHeap.
   * @param max_size Maximum size of the queue. Defaults to Infinity.
   */
  constructor(comparator = (a, b) => a > b, max_size = Infinity) {
    this._heap = [];
    this._comparator = comparator;
    this._max_size = max_size;
  }
  /**
   * The size of the queue
   */
  get size() {
    return this._heap.length;
  }
  /**
   * Check if the queue is empty.
   * @returns `true` if the queue is empty, `false` otherwise.
   */
  is_empty() {
    return this.size === 0;
  }
  /**
   * Return the element with the highest priority in the queue.
   * @returns The highest priority element in the queue.
   */
  peek() {
    return this._heap[0];
  }
  /**
   * Add one or more elements to the queue.
   * @param values The values to push into the queue.
   * @returns The new size of the queue.
   */
  push(...values) {
    return this.extend(values);
  }
  /**
   * Add multiple elements to the queue.
   * @param values The values to push into the queue.
   * @returns The new size of the queue.
   */
  extend(values) {
    for (const value of values) {
      if (this.size < this._max_size) {
        this._heap.push(value);
        this._sift_up();
      } else {
        const smallest = this._smallest();
        if (this._comparator(value, this._heap[smallest])) {
          this._heap[smallest] = value;
          this._sift_up_from(smallest);
        }
      }
    }
    return this.size;
  }
  /**
   * Remove and return the element with the highest priority in the queue.
   * @returns The element with the highest priority in the queue.
   */
  pop() {
    const popped_value = this.peek();
    const bottom = this.size - 1;
    if (bottom > 0) {
      this._swap(0, bottom);
    }
    this._heap.pop();
    this._sift_down();
    return popped_value;
  }
  /**
   * Replace the element with the highest priority in the queue with a new value.
   * @param value The new value.
   * @returns The replaced value.
   */
  replace(value) {
    const replaced_value = this.peek();
    this._heap[0] = value;
    this._sift_down();
    return replaced_value;
  }
  /**
   * Compute the index for the parent of the node at index `i`.
   * @param i The index of the node to get the parent of.
   * @returns The index of the parent node.
   * @private
   */
  _parent(i) {
    return (i + 1 >>> 1) - 1;
  }
  /**
   * Compute the index for the left child of the node at index `i`.
   * @param i The index of the node to get the left child of.
   * @returns The index of the left child.
   * @private
   */
  _left(i) {
    return (i << 1) + 1;
  }
  /**
   * Compute the index for the right child of the node at index `i`.
   * @param i The index of the node to get the right child of.
   * @returns The index of the right child.
   * @private
   */
  _right(i) {
    return i + 1 << 1;
  }
  /**
   * Check if the element at index `i` is greater than the element at index `j`.
   * @param i The index of the first element to compare.
   * @param j The index of the second element to compare.
   * @returns `true` if the element at index `i` is greater than the element at index `j`, `false` otherwise.
   * @private
   */
  _greater(i, j) {
    return this._comparator(this._heap[i], this._heap[j]);
  }
  /**
   * Swap the elements at indices `i` and `j`.
   * @param i The index of the first element to swap.
   * @param j The index of the second element to swap.
   * @private
   */
  _swap(i, j) {
    const temp = this._heap[i];
    this._heap[i] = this._heap[j];
    this._heap[j] = temp;
  }
  /**
   * Maintain the heap property by updating positions in the heap,
   * starting at the last element and moving up the heap.
   * @private
   */
  _sift_up() {
    this._sift_up_from(this.size - 1);
  }
  /**
   * Helper function to sift up from a given node.
   * @param node The index of the node to start sifting up from.
   */
  _sift_up_from(node) {
    while (node > 0 && this._greater(node, this._parent(node))) {
      this._swap(node, this._parent(node));
      node = this._parent(node);
    }
  }
  /**
   * Maintain the heap property by updating positions in the heap,
   * starting at the first element and moving down the heap.
   * @private
   */
  _sift_down() {
    let node = 0;
    while (this._left(node) < this.size && this._greater(this._left(node), node) || this._right(node) < this.size && this._greater(this._right(node), node)) {
      const max_child = this._right(node) < this.size && this._greater(this._right(node), this._left(node)) ? this._right(node) : this._left(node);
      this._swap(node, max_child);
      node = max_child;
    }
  }
  /**
   * Get the index of the smallest element in the heap. Since we use an array-based heap,
   * the index can be computed without needing to traverse the heap.
   * @private
   */
  _smallest() {
    return 2 ** Math.floor(Math.log2(this.size)) - 1;
  }
};
var PriorityQueue_default = PriorityQueue;
var LRUCache = class {
  /**
   * Creates an LRUCache instance.
   * @param capacity The maximum number of items the cache can hold.
   */
  constructor(capacity) {
    this.capacity = capacity;
    this.cache = /* @__PURE__ */ new Map();
  }
  /**
   * Retrieves the value associated with the given key and marks the key as recently used.
   * @param key The key to retrieve.
   * @returns The value associated with the key, or undefined if the key does not exist.
   */
  get(key) {
    if (!this.cache.has(key)) return void 0;
    const value = this.cache.get(key);
    this.cache.delete(key);
    this.cache.set(key, value);
    return value;
  }
  /**
   * Inserts or updates the key-value pair in the cache.
   * If the key already exists, it is updated and marked as recently used.
   * If the cache exceeds its capacity, the least recently used item is evicted.
   * @param key The key to add or update.
   * @param value The value to associate with the key.
   */
  put(key, value) {
    if (this.cache.has(key)) {
      this.cache.delete(key);
    }
    this.cache.set(key, value);
    if (this.cache.size > this.capacity) {
      this.cache.delete(this.cache.keys().next().value);
    }
  }
  /**
   * Clears the cache.
   */
  clear() {
    this.cache.clear();
  }
};
var LRUCache_default = LRUCache;
var BPE = class extends TokenizerModel_default {
  /**
   * Create a BPE instance.
   * @param config The configuration object for BPE.
   */
  constructor(config) {
    super(config);
    this.tokens_to_ids = object_to_map(config.vocab);
    this.unk_token_id = this.tokens_to_ids.get(config.unk_token);
    this.unk_token = config.unk_token;
    this.vocab = new Array(this.tokens_to_ids.size);
    for (const [key, value] of this.tokens_to_ids) {
      this.vocab[value] = key;
    }
    const use_new_merge_format = Array.isArray(config.merges[0]);
    this.merges = use_new_merge_format ? config.merges : config.merges.map(
      (x) => x.split(" ", 2)
    );
    this.bpe_ranks = new Map(this.merges.map((x, i) => [JSON.stringify(x), i]));
    this.end_of_word_suffix = config.end_of_word_suffix;
    this.continuing_subword_suffix = config.continuing_subword_suffix ?? null;
    this.byte_fallback = this.config.byte_fallback ?? false;
    if (this.byte_fallback) {
      this.text_encoder = new TextEncoder();
    }
    this.ignore_merges = this.config.ignore_merges ?? false;
    this.max_length_to_cache = 256;
    this.cache_capacity = 1e4;
    this.cache = new LRUCache_default(this.cache_capacity);
  }
  /**
   * Clears the cache.
   */
  clear_cache() {
    this.cache.clear();
  }
  /**
   * Apply Byte-Pair-Encoding (BPE) to a given token. Efficient heap-based priority
   * queue implementation adapted from https://github.com/belladoreai/llama-tokenizer-js.
   * @param token The token to encode.
   * @returns The BPE encoded tokens.
   */
  bpe(token) {
    if (token.length === 0) {
      return [];
    }
    const cached2 = this.cache.get(token);
    if (cached2 !== void 0) {
      return cached2;
    }
    const word = Array.from(token);
    if (this.end_of_word_suffix) {
      word[word.length - 1] += this.end_of_word_suffix;
    }
    let result = [];
    if (word.length > 1) {
      const queue = new PriorityQueue_default((a, b) => a.score < b.score);
      let starting_node = {
        token: word[0],
        bias: 0,
        prev: null,
        next: null
      };
      let previous_node = starting_node;
      for (let i = 1; i < word.length; ++i) {
        const current_node = {
          bias: i / word.length,
          // Add fractional component to break ties
          token: word[i],
          prev: previous_node,
          next: null
        };
        previous_node.next = current_node;
        this.add_node(queue, previous_node);
        previous_node = current_node;
      }
      while (!queue.is_empty()) {
        const node = queue.pop();
        if (node.deleted || !node.next || node.next.deleted) continue;
        node.deleted = true;
        node.next.deleted = true;
        if (node.prev) {
          const new_previous_node = { ...node.prev };
          node.prev.deleted = true;
          node.prev = new_previous_node;
          if (new_previous_node.prev) {
            new_previous_node.prev.next = new_previous_node;
          } else {
            starting_node = new_previous_node;
          }
        }
        const merged = {
          token: node.token + node.next.token,
          bias: node.bias,
          prev: node.prev,
          next: node.next.next
        };
        if (merged.prev) {
          merged.prev.next = merged;
          this.add_node(queue, merged.prev);
        } else {
          starting_node = merged;
        }
        if (merged.next) {
          merged.next.prev = merged;
          this.add_node(queue, merged);
        }
      }
      for (let current_node = starting_node; current_node !== null; current_node = current_node.next) {
        result.push(current_node.token);
      }
    } else {
      result = word;
    }
    if (this.continuing_subword_suffix) {
      for (let i = 0; i < result.length - 1; ++i) {
        result[i] += this.continuing_subword_suffix;
      }
    }
    if (token.length < this.max_length_to_cache) {
      this.cache.put(token, result);
    }
    return result;
  }
  /**
   * Helper function to add a node to the priority queue.
   * @param queue
   * @param node
   */
  add_node(queue, node) {
    const rank = this.bpe_ranks.get(
      JSON.stringify([node.token, node.next.token])
    );
    if (rank !== void 0) {
      node.score = rank + node.bias;
      queue.push(node);
    }
  }
  /**
   * Encodes the input sequence of tokens using the BPE algorithm and returns the resulting subword tokens.
   * @param tokens The input sequence of tokens to encode.
   * @returns The resulting subword tokens after applying the BPE algorithm to the input sequence of tokens.
   */
  encode(tokens) {
    const output_tokens = [];
    for (const token of tokens) {
      if (this.ignore_merges && this.tokens_to_ids.has(token)) {
        output_tokens.push(token);
        continue;
      }
      const bpe_token_list = this.bpe(token);
      for (const t of bpe_token_list) {
        if (this.tokens_to_ids.has(t)) {
          output_tokens.push(t);
        } else if (this.byte_fallback) {
          const byte_tokens = Array.from(this.text_encoder.encode(t)).map(
            (x) => `<0x${x.toString(16).toUpperCase().padStart(2, "0")}>`
          );
          if (byte_tokens.every((x) => this.tokens_to_ids.has(x))) {
            output_tokens.push(...byte_tokens);
          } else if (this.unk_token != null) {
            output_tokens.push(this.unk_token);
          }
        } else if (this.unk_token != null) {
          output_tokens.push(this.unk_token);
        }
      }
    }
    return output_tokens;
  }
};
var BPE_default = BPE;
var Legacy = class extends TokenizerModel_default {
  /**
   * Create a Legacy tokenizer model instance.
   * @param config The configuration object for Legacy tokenizer model.
   * @param more_config Additional configuration object for the Legacy tokenizer model.
   */
  constructor(config, more_config) {
    super(config);
    const vocab = config.vocab;
    this.tokens_to_ids = object_to_map(
      more_config.target_lang ? vocab[more_config.target_lang] : vocab
    );
    this.bos_token = more_config.bos_token;
    this.bos_token_id = this.tokens_to_ids.get(this.bos_token);
    this.eos_token = more_config.eos_token;
    this.eos_token_id = this.tokens_to_ids.get(this.eos_token);
    this.pad_token = more_config.pad_token;
    this.pad_token_id = this.tokens_to_ids.get(this.pad_token);
    this.unk_token = more_config.unk_token;
    this.unk_token_id = this.tokens_to_ids.get(this.unk_token);
    this.vocab = new Array(this.tokens_to_ids.size);
    for (const [key, value] of this.tokens_to_ids) {
      this.vocab[value] = key;
    }
  }
  encode(tokens) {
    return tokens;
  }
};
var Legacy_default = Legacy;
function create_tokenizer_model(model_config, config) {
  switch (model_config.type) {
    case "WordPiece":
      return new WordPiece_default(model_config);
    case "Unigram":
      return new Unigram_default(model_config, config.eos_token);
    case "BPE":
      return new BPE_default(model_config);
    default:
      if (model_config.vocab) {
        if (Array.isArray(model_config.vocab)) {
          return new Unigram_default(model_config, config.eos_token);
        } else if (Object.hasOwn(model_config, "continuing_subword_prefix") && Object.hasOwn(model_config, "unk_token")) {
          if (Object.hasOwn(model_config, "merges")) {
            return new BPE_default(model_config);
          } else {
            return new WordPiece_default(model_config);
          }
        } else {
          return new Legacy_default(model_config, {
            target_lang: config.target_lang,
            bos_token: config.bos_token,
            eos_token: config.eos_token,
            pad_token: config.pad_token,
            unk_token: config.unk_token
          });
        }
      }
      throw new Error(
        `Unknown TokenizerModel type: ${model_config?.type}`
      );
  }
}
var create_tokenizer_model_default = create_tokenizer_model;
var PostProcessor = class extends Callable_default {
  /**
   * @param config The configuration for the post-processor.
   */
  constructor(config) {
    super();
    this.config = config;
  }
  /**
   * Alias for {@link PostProcessor#post_process}.
   * @param tokens The text or array of texts to post-process.
   * @param args Additional arguments required by the post-processing logic.
   * @returns The post-processed tokens.
   */
  _call(tokens, ...args) {
    return this.post_process(tokens, ...args);
  }
};
var PostProcessor_default = PostProcessor;
var TemplateProcessing = class extends PostProcessor_default {
  /**
   * Replaces special tokens in the template with actual tokens.
   * @param tokens The list of tokens for the first sequence.
   * @param tokens_pair The list of tokens for the second sequence (optional).
   * @param add_special_tokens Whether to add the special tokens to the beginning and end of the input.
   * @returns An object containing the list of tokens with the special tokens replaced with actual tokens.
   */
  post_process(tokens, tokens_pair = null, add_special_tokens = true) {
    const type = tokens_pair === null ? this.config.single : this.config.pair;
    let processed_tokens = [];
    let types = [];
    for (const item of type) {
      if ("SpecialToken" in item) {
        if (add_special_tokens) {
          processed_tokens.push(item.SpecialToken.id);
          types.push(item.SpecialToken.type_id);
        }
      } else if ("Sequence" in item) {
        if (item.Sequence.id === "A") {
          processed_tokens = merge_arrays(processed_tokens, tokens);
          types = merge_arrays(
            types,
            new Array(tokens.length).fill(item.Sequence.type_id)
          );
        } else if (item.Sequence.id === "B") {
          processed_tokens = merge_arrays(processed_tokens, tokens_pair);
          types = merge_arrays(
            types,
            new Array(tokens_pair.length).fill(item.Sequence.type_id)
          );
        }
      }
    }
    return { tokens: processed_tokens, token_type_ids: types };
  }
};
var TemplateProcessing_default = TemplateProcessing;
var ByteLevel2 = class extends PostProcessor_default {
  /**
   * Post process the given tokens.
   * @param tokens The list of tokens for the first sequence.
   * @param tokens_pair The list of tokens for the second sequence (optional).
   * @returns An object containing the post-processed tokens.
   */
  post_process(tokens, tokens_pair = null) {
    return { tokens, tokens_pair };
  }
};
var ByteLevel_default2 = ByteLevel2;
var BertProcessing = class extends PostProcessor_default {
  /**
   * @param config The configuration for the post-processor.
   * @param config.cls The special tokens to add to the beginning of the input.
   * @param config.sep The special tokens to add to the end of the input.
   */
  constructor(config) {
    super(config);
    this.sep = config.sep;
    this.cls = config.cls;
  }
  /**
   * Adds the special tokens to the beginning and end of the input.
   * @param tokens The input tokens.
   * @param tokens_pair An optional second set of input tokens.
   * @param add_special_tokens Whether to add the special tokens to the beginning and end of the input.
   * @returns The post-processed tokens with the special tokens added to the beginning and end.
   */
  post_process(tokens, tokens_pair = null, add_special_tokens = true) {
    if (add_special_tokens) {
      tokens = merge_arrays([this.cls[0]], tokens, [this.sep[0]]);
    }
    let token_type_ids = new Array(tokens.length).fill(0);
    if (tokens_pair) {
      const middle = [];
      const after = add_special_tokens ? [this.sep[0]] : [];
      tokens = merge_arrays(tokens, middle, tokens_pair, after);
      token_type_ids = merge_arrays(
        token_type_ids,
        new Array(tokens_pair.length + middle.length + after.length).fill(1)
      );
    }
    return { tokens, token_type_ids };
  }
};
var BertProcessing_default = BertProcessing;
var RobertaProcessing = class extends PostProcessor_default {
  /**
   * @param config The configuration for the post-processor.
   * @param config.cls The special tokens to add to the beginning of the input.
   * @param config.sep The special tokens to add to the end of the input.
   */
  constructor(config) {
    super(config);
    this.sep = config.sep;
    this.cls = config.cls;
  }
  /**
   * Adds the special tokens to the beginning and end of the input.
   * @param tokens The input tokens.
   * @param tokens_pair An optional second set of input tokens.
   * @param add_special_tokens Whether to add the special tokens to the beginning and end of the input.
   * @returns The post-processed tokens with the special tokens added to the beginning and end.
   */
  post_process(tokens, tokens_pair, add_special_tokens = true) {
    if (add_special_tokens) {
      tokens = merge_arrays([this.cls[0]], tokens, [this.sep[0]]);
    }
    let token_type_ids = new Array(tokens.length).fill(0);
    if (tokens_pair) {
      const middle = add_special_tokens ? [this.sep[0]] : [];
      const after = add_special_tokens ? [this.sep[0]] : [];
      tokens = merge_arrays(tokens, middle, tokens_pair, after);
      token_type_ids = merge_arrays(
        token_type_ids,
        new Array(tokens_pair.length + middle.length + after.length).fill(1)
      );
    }
    return { tokens, token_type_ids };
  }
};
var RobertaProcessing_default = RobertaProcessing;
var Sequence3 = class extends PostProcessor_default {
  /**
   * Creates a new instance of Sequence post-processor.
   * @param config The configuration object.
   */
  constructor(config) {
    super(config);
    this.processors = (config.processors ?? []).map((x) => create_post_processor_default(x));
  }
  /**
   * Post process the given tokens.
   * @param tokens The list of tokens for the first sequence.
   * @param tokens_pair The list of tokens for the second sequence (optional).
   * @param add_special_tokens Whether to add the special tokens to the beginning and end of the input.
   * @returns An object containing the post-processed tokens.
   */
  post_process(tokens, tokens_pair = null, add_special_tokens = true) {
    let processed_tokens = { tokens, tokens_pair };
    for (const processor of this.processors) {
      processed_tokens = processor.post_process(
        processed_tokens.tokens,
        processed_tokens.tokens_pair,
        add_special_tokens
      );
    }
    return processed_tokens;
  }
};
var Sequence_default3 = Sequence3;
function create_post_processor(config) {
  if (config === null) return null;
  switch (config.type) {
    case "TemplateProcessing":
      return new TemplateProcessing_default(config);
    case "ByteLevel":
      return new ByteLevel_default2(config);
    case "BertProcessing":
      return new BertProcessing_default(config);
    case "RobertaProcessing":
      return new RobertaProcessing_default(config);
    case "Sequence":
      return new Sequence_default3(config);
    default:
      throw new Error(`Unknown PostProcessor type: ${config.type}`);
  }
}
var create_post_processor_default = create_post_processor;
var Decoder = class extends Callable_default {
  /**
   * Creates an instance of `Decoder`.
   * @param config The configuration object.
   **/
  constructor(config) {
    super();
    this.config = config;
    this.added_tokens = [];
    this.end_of_word_suffix = null;
    this.trim_offsets = "trim_offsets" in config ? config.trim_offsets : false;
  }
  /**
   * Calls the `decode` method.
   *
   * @param tokens The list of tokens.
   * @returns The decoded string.
   */
  _call(tokens) {
    return this.decode(tokens);
  }
  /**
   * Decodes a list of tokens.
   * @param tokens The list of tokens.
   * @returns The decoded string.
   */
  decode(tokens) {
    return this.decode_chain(tokens).join("");
  }
};
var Decoder_default = Decoder;
var ByteLevel3 = class extends Decoder_default {
  /**
   * Create a `ByteLevelDecoder` object.
   */
  constructor(config) {
    super(config);
    this.byte_decoder = UNICODE_TO_BYTES;
    this.text_decoder = new TextDecoder("utf-8", {
      fatal: false,
      // eslint-disable-next-line @typescript-eslint/naming-convention
      ignoreBOM: true
    });
    this.end_of_word_suffix = null;
  }
  /**
   * Convert an array of tokens to string by decoding each byte.
   * @param tokens Array of tokens to be decoded.
   * @returns The decoded string.
   */
  convert_tokens_to_string(tokens) {
    const text = tokens.join("");
    const byte_array = new Uint8Array(
      [...text].map((c) => this.byte_decoder[c])
    );
    return this.text_decoder.decode(byte_array);
  }
  decode_chain(tokens) {
    const sub_texts = [];
    let current_sub_text = [];
    for (const token of tokens) {
      if (this.added_tokens.find((x) => x.content === token) !== void 0) {
        if (current_sub_text.length > 0) {
          sub_texts.push(this.convert_tokens_to_string(current_sub_text));
          current_sub_text = [];
        }
        sub_texts.push(token);
      } else {
        current_sub_text.push(token);
      }
    }
    if (current_sub_text.length > 0) {
      sub_texts.push(this.convert_tokens_to_string(current_sub_text));
    }
    return sub_texts;
  }
};
var ByteLevel_default3 = ByteLevel3;
var WordPiece = class extends Decoder_default {
  /**
   * Creates a new instance of WordPieceDecoder.
   * @param config The configuration object.
   */
  constructor(config) {
    super(config);
    this.cleanup = config.cleanup;
  }
  decode_chain(tokens) {
    return tokens.map((token, i) => {
      if (i !== 0) {
        const prefix = this.config.prefix;
        if (prefix && token.startsWith(prefix)) {
          token = token.replace(prefix, "");
        } else {
          token = " " + token;
        }
      }
      if (this.cleanup) {
        token = clean_up_tokenization(token);
      }
      return token;
    });
  }
};
var WordPiece_default2 = WordPiece;
var Metaspace2 = class extends Decoder_default {
  /**
   * Constructs a new MetaspaceDecoder object.
   * @param config The configuration object for the MetaspaceDecoder.
   */
  constructor(config) {
    super(config);
    this.replacement = config.replacement ?? "▁";
  }
  decode_chain(tokens) {
    const result = [];
    for (let i = 0; i < tokens.length; ++i) {
      let normalized = tokens[i].replaceAll(this.replacement, " ");
      if (i == 0 && normalized.startsWith(" ")) {
        normalized = normalized.substring(1);
      }
      result.push(normalized);
    }
    return result;
  }
};
var Metaspace_default2 = Metaspace2;
var BPE2 = class extends Decoder_default {
  constructor(config) {
    super(config);
    this.suffix = config.suffix ?? "";
  }
  decode_chain(tokens) {
    return tokens.map((token, i) => {
      return token.replaceAll(this.suffix, i === tokens.length - 1 ? "" : " ");
    });
  }
};
var BPE_default2 = BPE2;
var CTC = class extends Decoder_default {
  constructor(config) {
    super(config);
    this.pad_token = config.pad_token ?? "";
    this.word_delimiter_token = config.word_delimiter_token ?? "";
    this.cleanup = config.cleanup;
  }
  /**
   * Converts a connectionist-temporal-classification (CTC) output tokens into a single string.
   * @param tokens Array of tokens to be decoded.
   * @returns The decoded string.
   */
  convert_tokens_to_string(tokens) {
    if (tokens.length === 0) return "";
    const grouped_tokens = [tokens[0]];
    for (let i = 1; i < tokens.length; ++i) {
      if (tokens[i] !== grouped_tokens.at(-1)) {
        grouped_tokens.push(tokens[i]);
      }
    }
    const filtered_tokens = grouped_tokens.filter(
      (token) => token !== this.pad_token
    );
    let text = filtered_tokens.join("");
    if (this.cleanup) {
      text = clean_up_tokenization(text).replaceAll(this.word_delimiter_token, " ").trim();
    }
    return text;
  }
  decode_chain(tokens) {
    return [this.convert_tokens_to_string(tokens)];
  }
};
var CTC_default = CTC;
var Sequence4 = class extends Decoder_default {
  /**
   * Creates a new instance of DecoderSequence.
   * @param config The configuration object.
   */
  constructor(config) {
    super(config);
    this.decoders = (config.decoders ?? []).map((x) => create_decoder_default(x));
  }
  decode_chain(tokens) {
    return this.decoders.reduce((toks, decoder) => {
      return decoder.decode_chain(toks);
    }, tokens);
  }
};
var Sequence_default4 = Sequence4;
var Replace3 = class extends Decoder_default {
  /**
   * @param config The configuration object for the decoder.
   */
  constructor(config) {
    super(config);
    this.pattern = create_pattern(this.config.pattern);
  }
  decode_chain(tokens) {
    const content = this.config.content ?? "";
    const pattern = this.pattern;
    return pattern === null ? tokens : tokens.map((token) => token.replaceAll(pattern, content));
  }
};
var Replace_default3 = Replace3;
var Fuse = class extends Decoder_default {
  decode_chain(tokens) {
    return [tokens.join("")];
  }
};
var Fuse_default = Fuse;
var Strip2 = class extends Decoder_default {
  constructor(config) {
    super(config);
    this.content = config.content ?? "";
    this.start = config.start ?? 0;
    this.stop = config.stop ?? 0;
  }
  decode_chain(tokens) {
    return tokens.map((token) => {
      let start_cut = 0;
      for (let i = 0; i < this.start; ++i) {
        if (token[i] === this.content) {
          start_cut = i + 1;
          continue;
        } else {
          break;
        }
      }
      let stop_cut = token.length;
      for (let i = 0; i < this.stop; ++i) {
        const index = token.length - i - 1;
        if (token[index] === this.content) {
          stop_cut = index;
          continue;
        } else {
          break;
        }
      }
      return token.slice(start_cut, stop_cut);
    });
  }
};
var Strip_default2 = Strip2;
var ByteFallback = class extends Decoder_default {
  constructor(config) {
    super(config);
    this.text_decoder = new TextDecoder();
  }
  decode_chain(tokens) {
    const new_tokens = [];
    let previous_byte_tokens = [];
    for (const token of tokens) {
      let bytes = null;
      if (token.length === 6 && token.startsWith("<0x") && token.endsWith(">")) {
        const byte = parseInt(token.slice(3, 5), 16);
        if (!isNaN(byte)) {
          bytes = byte;
        }
      }
      if (bytes !== null) {
        previous_byte_tokens.push(bytes);
      } else {
        if (previous_byte_tokens.length > 0) {
          const string = this.text_decoder.decode(
            Uint8Array.from(previous_byte_tokens)
          );
          new_tokens.push(string);
          previous_byte_tokens = [];
        }
        new_tokens.push(token);
      }
    }
    if (previous_byte_tokens.length > 0) {
      const string = this.text_decoder.decode(
        Uint8Array.from(previous_byte_tokens)
      );
      new_tokens.push(string);
      previous_byte_tokens = [];
    }
    return new_tokens;
  }
};
var ByteFallback_default = ByteFallback;
function create_decoder(config) {
  if (config === null) return null;
  switch (config.type) {
    case "ByteLevel":
      return new ByteLevel_default3(config);
    case "WordPiece":
      return new WordPiece_default2(config);
    case "Metaspace":
      return new Metaspace_default2(config);
    case "BPEDecoder":
      return new BPE_default2(config);
    case "CTC":
      return new CTC_default(config);
    case "Sequence":
      return new Sequence_default4(config);
    case "Replace":
      return new Replace_default3(config);
    case "Fuse":
      return new Fuse_default(config);
    case "Strip":
      return new Strip_default2(config);
    case "ByteFallback":
      return new ByteFallback_default(config);
    default:
      throw new Error(`Unknown Decoder type: ${config.type}`);
  }
}
var create_decoder_default = create_decoder;
var Tokenizer = class {
  constructor(tokenizer, config) {
    const tokenizer_error = validate_object(tokenizer, "Tokenizer", [
      "model",
      "decoder",
      "post_processor",
      "pre_tokenizer",
      "normalizer"
    ]);
    if (tokenizer_error) {
      throw new Error(tokenizer_error);
    }
    const config_error = validate_object(config, "Config");
    if (config_error) {
      throw new Error(config_error);
    }
    this.tokenizer = tokenizer;
    this.config = config;
    this.normalizer = create_normalizer_default(this.tokenizer.normalizer);
    this.pre_tokenizer = create_pre_tokenizer_default(this.tokenizer.pre_tokenizer);
    this.model = create_tokenizer_model_default(this.tokenizer.model, this.config);
    this.post_processor = create_post_processor_default(this.tokenizer.post_processor);
    this.decoder = create_decoder_default(this.tokenizer.decoder);
    this.special_tokens = [];
    this.all_special_ids = [];
    this.added_tokens = [];
    const unnormalized_contents = [];
    const normalized_contents = [];
    this.added_tokens_map = /* @__PURE__ */ new Map();
    for (const added_token of this.tokenizer.added_tokens) {
      const token = new AddedToken_default(added_token);
      this.added_tokens.push(token);
      this.model.tokens_to_ids.set(token.content, token.id);
      this.model.vocab[token.id] = token.content;
      if (token.special) {
        this.special_tokens.push(token.content);
        this.all_special_ids.push(token.id);
      }
      this.added_tokens_map.set(token.content, token);
      if (token.normalized && this.normalizer !== null) {
        const normalized_content = this.normalizer(token.content);
        normalized_contents.push(normalized_content);
        this.added_tokens_map.set(normalized_content, token);
      } else {
        unnormalized_contents.push(token.content);
      }
    }
    (this.config.additional_special_tokens ?? []).forEach((token) => {
      if (!this.special_tokens.includes(token)) this.special_tokens.push(token);
    });
    if (this.decoder) {
      this.decoder.added_tokens = this.added_tokens;
      this.decoder.end_of_word_suffix = this.model.end_of_word_suffix;
    }
    this.splitter_unnormalized = new DictionarySplitter_default(unnormalized_contents);
    this.splitter_normalized = new DictionarySplitter_default(normalized_contents);
    this.remove_space = this.config.remove_space;
    this.clean_up_tokenization_spaces = this.config.clean_up_tokenization_spaces ?? true;
    this.do_lowercase_and_remove_accent = this.config.do_lowercase_and_remove_accent ?? false;
  }
  // Implementation
  encode(text, {
    text_pair = null,
    add_special_tokens = true,
    return_token_type_ids = null
  } = {}) {
    const { tokens, token_type_ids } = this.tokenize_helper(text, {
      text_pair,
      add_special_tokens
    });
    const input_ids = tokens.map(
      (t) => this.added_tokens_map.get(t)?.id ?? this.model.tokens_to_ids.get(t) ?? this.model.unk_token_id
    );
    const result = {
      ids: input_ids,
      tokens,
      attention_mask: new Array(input_ids.length).fill(1)
    };
    if (return_token_type_ids && token_type_ids) {
      result.token_type_ids = token_type_ids;
    }
    return result;
  }
  decode(token_ids, options = {}) {
    if (!Array.isArray(token_ids) || token_ids.length === 0 || !is_integral_number(token_ids[0])) {
      throw Error("token_ids must be a non-empty array of integers.");
    }
    let tokens = token_ids.map(
      (i) => this.model.vocab[Number(i)] ?? this.model.unk_token
    );
    if (options.skip_special_tokens) {
      tokens = tokens.filter((x) => !this.special_tokens.includes(x));
    }
    let decoded = this.decoder ? this.decoder(tokens) : tokens.join(" ");
    if (this.decoder && this.decoder.end_of_word_suffix) {
      decoded = decoded.replaceAll(this.decoder.end_of_word_suffix, " ");
      if (options.skip_special_tokens) {
        decoded = decoded.trim();
      }
    }
    if (options.clean_up_tokenization_spaces ?? this.clean_up_tokenization_spaces) {
      decoded = clean_up_tokenization(decoded);
    }
    return decoded;
  }
  /**
   * Converts a string into a sequence of tokens.
   * @param text The sequence to be encoded.
   * @param options An optional object containing the following properties:
   * @returns The list of tokens.
   */
  tokenize(text, { text_pair = null, add_special_tokens = false } = {}) {
    return this.tokenize_helper(text, { text_pair, add_special_tokens }).tokens;
  }
  encode_text(text) {
    if (text === null) {
      return null;
    }
    const sections = this.splitter_unnormalized.split(text);
    sections.forEach((section, i) => {
      const added_token = this.added_tokens_map.get(section);
      if (added_token) {
        if (added_token.lstrip && i > 0) {
          sections[i - 1] = sections[i - 1].trimEnd();
        }
        if (added_token.rstrip && i < sections.length - 1) {
          sections[i + 1] = sections[i + 1].trimStart();
        }
      }
    });
    return sections.flatMap((processed_text, section_index) => {
      if (processed_text.length === 0) {
        return [];
      }
      if (this.added_tokens_map.has(processed_text)) {
        return [processed_text];
      }
      if (this.remove_space === true) {
        processed_text = processed_text.trim().split(/\s+/).join(" ");
      }
      if (this.do_lowercase_and_remove_accent) {
        processed_text = lowercase_and_remove_accents(processed_text);
      }
      if (this.normalizer !== null) {
        processed_text = this.normalizer(processed_text);
      }
      if (processed_text.length === 0) {
        return [];
      }
      const subsections = this.splitter_normalized.split(processed_text);
      subsections.forEach((subsection, j) => {
        const added_token = this.added_tokens_map.get(subsection);
        if (added_token) {
          if (added_token.lstrip && j > 0) {
            subsections[j - 1] = subsections[j - 1].trimEnd();
          }
          if (added_token.rstrip && j < subsections.length - 1) {
            subsections[j + 1] = subsections[j + 1].trimStart();
          }
        }
      });
      return subsections.flatMap((subsection) => {
        if (subsection.length === 0) {
          return [];
        }
        if (this.added_tokens_map.has(subsection)) {
          return [subsection];
        }
        const section_tokens = this.pre_tokenizer !== null ? this.pre_tokenizer(subsection, {
          section_index
        }) : [subsection];
        return this.model(section_tokens);
      });
    });
  }
  tokenize_helper(text, { text_pair = null, add_special_tokens = true }) {
    const tokens1 = this.encode_text(text);
    const tokens2 = this.encode_text(text_pair || null);
    return this.post_processor ? this.post_processor(tokens1, tokens2, add_special_tokens) : { tokens: merge_arrays(tokens1 ?? [], tokens2 ?? []) };
  }
  /**
   * Converts a token string to its corresponding token ID.
   * @param token The token string to convert.
   * @returns The token ID, or undefined if the token is not in the vocabulary.
   */
  token_to_id(token) {
    return this.model.tokens_to_ids.get(token);
  }
  /**
   * Converts a token ID to its corresponding token string.
   * @param id The token ID to convert.
   * @returns The token string, or undefined if the ID is not in the vocabulary.
   */
  id_to_token(id) {
    return this.model.vocab[id];
  }
  /**
   * Returns a mapping of token IDs to AddedToken objects for all added tokens.
   * @returns A Map where keys are token IDs and values are AddedToken objects.
   */
  get_added_tokens_decoder() {
    const decoder = /* @__PURE__ */ new Map();
    for (const token of this.added_tokens) {
      decoder.set(token.id, token);
    }
    return decoder;
  }
  /**
   * Get the underlying vocabulary
   * @param with_added_tokens Whether to include the added tokens
   * @returns The vocabulary
   */
  get_vocab(with_added_tokens = true) {
    const vocab = /* @__PURE__ */ new Map();
    for (let i = 0; i < this.model.vocab.length; ++i) {
      const token = this.model.vocab[i];
      if (with_added_tokens || !this.added_tokens_map.has(token)) {
        vocab.set(token, i);
      }
    }
    return vocab;
  }
};
var Tokenizer_default = Tokenizer;

// src/batches.ts
var LENGTHS = [8, 16, 32, 64, 128, 256, 512];
var pow2 = (n) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));
function planBatches(lengths, maxBatch, maxSeqLength) {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a] - lengths[b]);
  const top = Math.ceil(maxSeqLength / 4) * 4;
  const out = [];
  for (let at = 0; at < order.length; at += maxBatch) {
    const idx = order.slice(at, at + maxBatch);
    const longest = Math.max(...idx.map((i) => lengths[i]));
    out.push({ idx, b: pow2(idx.length), s: LENGTHS.find((l) => l >= longest && l <= top) ?? top });
  }
  return out;
}

// src/latency.ts
var WINDOW = 15;
var REPORT_AT = [5, 15, 50];
var REPORT_EVERY = 200;
function reportDue(count) {
  return REPORT_AT.includes(count) || count > REPORT_AT[REPORT_AT.length - 1] && count % REPORT_EVERY === 0;
}
var LatencyLog = class {
  constructor(server, model, maxSeqLength, fetcher = fetch) {
    this.server = server;
    this.model = model;
    this.maxSeqLength = maxSeqLength;
    this.fetcher = fetcher;
  }
  server;
  model;
  maxSeqLength;
  fetcher;
  samples = /* @__PURE__ */ new Map();
  counts = /* @__PURE__ */ new Map();
  /** Reports sent and answered 201. */
  sent = 0;
  /**
   * Set when the server refused a report for this model (404, 422: e.g. a
   * server that takes latency reports for encoders only): none is sent again.
   */
  refused = false;
  /** Records one call of `ms` for `batch` texts padded to `seqLen`; reports through `sessionId` when due. */
  add(sessionId, target, batch, seqLen, ms) {
    const key = `${target}|${batch}|${seqLen}`;
    const xs = this.samples.get(key) ?? [];
    xs.push(ms);
    if (xs.length > WINDOW) xs.shift();
    this.samples.set(key, xs);
    const n = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, n);
    if (this.refused || !reportDue(n)) return null;
    return this.report({ session_id: sessionId, target, batch, seq_len: Math.min(seqLen, this.maxSeqLength), median_ms: median(xs), runs: xs.length });
  }
  /** Sends one report; resolves either way. */
  async report(r) {
    try {
      const res = await fetchRetrying(`${this.server}/v1/models/${encodeURIComponent(this.model)}/latency`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(r)
      }, this.fetcher);
      if (res.status === 201) this.sent++;
      else if (res.status === 404 || res.status === 422) this.refused = true;
      await res.body?.cancel().catch(() => {
      });
    } catch {
    }
  }
};
async function fetchPlan(server, model, deviceKey, batch, seqLen, fetcher = fetch) {
  const q = new URLSearchParams({ device_key: deviceKey, batch: String(batch), seq_len: String(seqLen) });
  const res = await fetchRetrying(`${server}/v1/models/${encodeURIComponent(model)}/plan?${q}`, {}, fetcher);
  if (!res.ok) return { target: null, reason: `plan HTTP ${res.status}` };
  const body = await res.json();
  return { target: body.target === "wasm" || body.target === "webgpu" ? body.target : null, reason: body.reason };
}

// src/encoder-gpu.ts
var ALIGN = 256;
var MAX_HIDDEN = 2048;
var WG = 64;
var EW = 256;
var MAX_GROUPS = 65535;
function packTensors(tensors, maxBytes) {
  const sizes = [0];
  const at = /* @__PURE__ */ new Map();
  for (const t of tensors) {
    const bytes = 4 * t.shape.reduce((a, b) => a * b, 1);
    if (bytes > maxBytes) throw new Error(`tensor ${t.name} is ${bytes} bytes, above this device's maxBufferSize of ${maxBytes}`);
    let offset = Math.ceil(sizes[sizes.length - 1] / ALIGN) * ALIGN;
    if (offset + bytes > maxBytes) {
      sizes.push(0);
      offset = 0;
    }
    at.set(t.name, { buffer: sizes.length - 1, offset, bytes });
    sizes[sizes.length - 1] = offset + bytes;
  }
  return { sizes, at };
}
function grid(n) {
  const x = Math.max(1, Math.min(n, MAX_GROUPS));
  return [x, Math.ceil(n / x)];
}
async function scoped2(device, what, f) {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  let value;
  try {
    value = await f();
  } finally {
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    const e = validation ?? oom;
    if (e) throw new Error(`${what}: ${e.message}`);
  }
  return value;
}
var GpuEncoder = class _GpuEncoder {
  constructor(webtune, manifest, fixed, weights, tensors, layers, params, maxBatch, report) {
    this.webtune = webtune;
    this.manifest = manifest;
    this.fixed = fixed;
    this.weights = weights;
    this.tensors = tensors;
    this.layers = layers;
    this.params = params;
    this.maxBatch = maxBatch;
    this.device = webtune.device;
    this.latency = report ? new LatencyLog(webtune.server, manifest.name, manifest.max_seq_length) : null;
  }
  webtune;
  manifest;
  fixed;
  weights;
  tensors;
  layers;
  params;
  maxBatch;
  device;
  buckets = /* @__PURE__ */ new Map();
  latency;
  closed = false;
  /**
   * Checks the manifest's tensors, uploads the weights (the bundle's blob)
   * to the session's device and builds the fixed kernels' pipelines.
   */
  static async create(init) {
    const { webtune, manifest } = init;
    const device = webtune.device;
    const c = manifest.config, H = c.hidden_size, I = c.intermediate_size;
    const fail = (what) => new Error(`model "${manifest.name}": ${what}`);
    if (H > MAX_HIDDEN) throw fail(`hidden size ${H}: the WebGPU path runs hidden sizes up to ${MAX_HIDDEN}`);
    const want = [
      ["embeddings.word", [c.vocab_size, H]],
      ["embeddings.position", [c.max_position_embeddings, H]],
      ["embeddings.token_type", [c.type_vocab_size, H]],
      ["embeddings.ln.gamma", [H]],
      ["embeddings.ln.beta", [H]]
    ];
    const perLayer = [
      ["qkvW", "qkv.weight", [H, 3 * H]],
      ["qkvB", "qkv.bias", [3 * H]],
      ["outW", "attn_out.weight", [H, H]],
      ["outB", "attn_out.bias", [H]],
      ["ln1G", "attn_ln.gamma", [H]],
      ["ln1B", "attn_ln.beta", [H]],
      ["inW", "ffn_in.weight", [H, I]],
      ["inB", "ffn_in.bias", [I]],
      ["ffnW", "ffn_out.weight", [I, H]],
      ["ffnB", "ffn_out.bias", [H]],
      ["ln2G", "ffn_ln.gamma", [H]],
      ["ln2B", "ffn_ln.beta", [H]]
    ];
    for (let l = 0; l < c.num_hidden_layers; l++) for (const [, name, shape] of perLayer) want.push([`layer.${l}.${name}`, shape]);
    const found = want.map(([name, shape]) => {
      const t = manifest.tensors.find((x) => x.name === name);
      if (!t) throw fail(`the manifest has no tensor ${name}`);
      if (t.dtype !== "f32" || t.shape.join(",") !== shape.join(",")) throw fail(`tensor ${name} is ${t.dtype}[${t.shape}], expected f32[${shape}]`);
      if (t.offset + 4 * shape.reduce((a, b) => a * b, 1) > init.weights.byteLength) throw fail(`tensor ${name} lies beyond the weights blob`);
      return t;
    });
    const limits = device.limits;
    const big = found.find((t) => 4 * t.shape.reduce((a, b) => a * b, 1) > limits.maxStorageBufferBindingSize);
    if (big) throw fail(`tensor ${big.name} is larger than this device's maxStorageBufferBindingSize (${limits.maxStorageBufferBindingSize} bytes)`);
    const packed = packTensors(found, limits.maxBufferSize);
    const { weights, pipelines } = await scoped2(device, `model "${manifest.name}" on WebGPU`, async () => {
      const weights2 = packed.sizes.map((size, i) => device.createBuffer({ label: `encoder weights ${i}`, size: Math.ceil(size / 4) * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST }));
      for (const t of found) {
        const p = packed.at.get(t.name);
        device.queue.writeBuffer(weights2[p.buffer], p.offset, init.weights, t.offset, p.bytes);
      }
      const module = device.createShaderModule({ label: "encoder-kernels.wgsl", code: "// The sentence encoder's fixed WebGPU kernels: everything of a BERT layer\n// that is not a matrix product (those are webtune's tuned WGSL kernels, the\n// FFN's bias and exact GELU included, as the fused `matmul+bias+gelu`).\n// The WebGPU twin of encoder-kernels.wat; encoder-gpu.ts runs them.\n//\n// One entry point per kernel; binding 0 is the bucket's parameters, the\n// others are that kernel's buffers (numbers reused across entry points,\n// each pipeline's layout is its own). The layer-norm and pooling kernels\n// run one workgroup of WG threads per row, thread `lid` holding elements\n// lid, lid + WG, ... of it; softmax runs one thread per row (no barriers:\n// a software adapter such as SwiftShader pays dearly for each); element-wise\n// kernels run one thread per element, EW a workgroup. Every kernel folds a\n// two-dimensional grid back into one index, so that more than 65535\n// workgroups fit (encoder-gpu.ts's `grid`).\n\nstruct Params {\n  // Texts of the batch, padded slots included; their padded length.\n  b: u32,\n  s: u32,\n  // Hidden width h = heads · d.\n  h: u32,\n  heads: u32,\n  d: u32,\n  // Layer norm epsilon; Q's scale 1/√d.\n  eps: f32,\n  scale: f32,\n  // Pooling: 1 for the first token ([CLS]), 0 for the mean; 1 to L2-normalise.\n  cls: u32,\n  normalize: u32,\n}\n\n@group(0) @binding(0) var<uniform> P: Params;\n\nconst WG: u32 = 64u;\nconst EW: u32 = 256u;\n// Row elements one thread holds: rows up to WG · PER = 2048 wide.\nconst PER: u32 = 32u;\n\nvar<workgroup> red: array<f32, 64>;\n\nfn flat(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {\n  return wid.y * nwg.x + wid.x;\n}\n\n// The workgroup's sum of every thread's v.\nfn sum_wg(lid: u32, v: f32) -> f32 {\n  red[lid] = v;\n  workgroupBarrier();\n  for (var k = WG / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      red[lid] += red[lid + k];\n    }\n    workgroupBarrier();\n  }\n  let r = red[0];\n  workgroupBarrier();\n  return r;\n}\n\n// Mean and 1/σ of a row of P.h whose elements lid, lid + WG, ... are xs.\nfn ln_stats(lid: u32, xs: ptr<function, array<f32, PER>>) -> vec2<f32> {\n  var sum = 0.0;\n  for (var k = 0u; lid + k * WG < P.h; k++) {\n    sum += (*xs)[k];\n  }\n  let mean = sum_wg(lid, sum) / f32(P.h);\n  var sq = 0.0;\n  for (var k = 0u; lid + k * WG < P.h; k++) {\n    let c = (*xs)[k] - mean;\n    sq += c * c;\n  }\n  return vec2(mean, inverseSqrt(sum_wg(lid, sq) / f32(P.h) + P.eps));\n}\n\n// x[t] = LayerNorm(word[ids[t]] + pos[t mod s] + type0) for t < b·s.\n@group(0) @binding(1) var<storage, read> embed_ids: array<u32>;\n@group(0) @binding(2) var<storage, read> embed_word: array<f32>;\n@group(0) @binding(3) var<storage, read> embed_pos: array<f32>;\n@group(0) @binding(4) var<storage, read> embed_type0: array<f32>;\n@group(0) @binding(5) var<storage, read> embed_gamma: array<f32>;\n@group(0) @binding(6) var<storage, read> embed_beta: array<f32>;\n@group(0) @binding(7) var<storage, read_write> embed_x: array<f32>;\n\n@compute @workgroup_size(WG)\nfn embed(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n  let t = flat(wid, nwg);\n  if (t >= P.b * P.s) {\n    return;\n  }\n  let w = embed_ids[t] * P.h;\n  let p = (t % P.s) * P.h;\n  var xs: array<f32, PER>;\n  for (var k = 0u; lid + k * WG < P.h; k++) {\n    let i = lid + k * WG;\n    xs[k] = embed_word[w + i] + embed_pos[p + i] + embed_type0[i];\n  }\n  let st = ln_stats(lid, &xs);\n  for (var k = 0u; lid + k * WG < P.h; k++) {\n    let i = lid + k * WG;\n    embed_x[t * P.h + i] = (xs[k] - st.x) * st.y * embed_gamma[i] + embed_beta[i];\n  }\n}\n\n// x = LayerNorm(y + bias + x), row by row, in place.\n@group(0) @binding(1) var<storage, read> ln_y: array<f32>;\n@group(0) @binding(2) var<storage, read> ln_bias: array<f32>;\n@group(0) @binding(3) var<storage, read> ln_gamma: array<f32>;\n@group(0) @binding(4) var<storage, read> ln_beta: array<f32>;\n@group(0) @binding(5) var<storage, read_write> ln_x: array<f32>;\n\n@compute @workgroup_size(WG)\nfn add_ln(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n  let t = flat(wid, nwg);\n  if (t >= P.b * P.s) {\n    return;\n  }\n  var xs: array<f32, PER>;\n  for (var k = 0u; lid + k * WG < P.h; k++) {\n    let i = lid + k * WG;\n    xs[k] = ln_y[t * P.h + i] + ln_bias[i] + ln_x[t * P.h + i];\n  }\n  let st = ln_stats(lid, &xs);\n  for (var k = 0u; lid + k * WG < P.h; k++) {\n    let i = lid + k * WG;\n    ln_x[t * P.h + i] = (xs[k] - st.x) * st.y * ln_gamma[i] + ln_beta[i];\n  }\n}\n\n// qkv [b, s, 3h] + bias into Q [b·heads, s, d] times 1/√d, Kᵀ [b·heads, d, s]\n// and V [b·heads, s, d]: one thread per element of [b·s, h].\n@group(0) @binding(1) var<storage, read> split_qkv: array<f32>;\n@group(0) @binding(2) var<storage, read> split_bias: array<f32>;\n@group(0) @binding(3) var<storage, read_write> split_q: array<f32>;\n@group(0) @binding(4) var<storage, read_write> split_kt: array<f32>;\n@group(0) @binding(5) var<storage, read_write> split_v: array<f32>;\n\n@compute @workgroup_size(EW)\nfn split_heads(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n  let e = flat(wid, nwg) * EW + lid;\n  if (e >= P.b * P.s * P.h) {\n    return;\n  }\n  let t = e / P.h;\n  let c = e % P.h;\n  let bh = (t / P.s) * P.heads + c / P.d;\n  let pos = t % P.s;\n  let j = c % P.d;\n  let src = t * 3u * P.h + c;\n  split_q[(bh * P.s + pos) * P.d + j] = (split_qkv[src] + split_bias[c]) * P.scale;\n  split_kt[(bh * P.d + j) * P.s + pos] = split_qkv[src + P.h] + split_bias[c + P.h];\n  split_v[(bh * P.s + pos) * P.d + j] = split_qkv[src + 2u * P.h] + split_bias[c + 2u * P.h];\n}\n\n// Softmax over the last axis of p [b·heads, s, s], in place, over the first\n// lens[batch] keys of each row: padded keys get exactly 0, and a text of\n// length 0 (a padded batch slot) a row of zeros. One thread per row.\n@group(0) @binding(1) var<storage, read> softmax_lens: array<u32>;\n@group(0) @binding(2) var<storage, read_write> softmax_p: array<f32>;\n\n@compute @workgroup_size(WG)\nfn softmax(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n  let row = flat(wid, nwg) * WG + lid;\n  if (row >= P.b * P.heads * P.s) {\n    return;\n  }\n  let len = softmax_lens[row / P.s / P.heads];\n  let base = row * P.s;\n  var m = -3.4e38;\n  for (var i = 0u; i < len; i++) {\n    m = max(m, softmax_p[base + i]);\n  }\n  var sum = 0.0;\n  for (var i = 0u; i < len; i++) {\n    let e = exp(softmax_p[base + i] - m);\n    softmax_p[base + i] = e;\n    sum += e;\n  }\n  let inv = select(0.0, 1.0 / sum, len > 0u);\n  for (var i = 0u; i < P.s; i++) {\n    softmax_p[base + i] = select(0.0, softmax_p[base + i] * inv, i < len);\n  }\n}\n\n// ctx [b·heads, s, d] into [b, s, heads·d]: one thread per output element.\n@group(0) @binding(1) var<storage, read> merge_ctx: array<f32>;\n@group(0) @binding(2) var<storage, read_write> merge_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn merge_heads(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n  let e = flat(wid, nwg) * EW + lid;\n  if (e >= P.b * P.s * P.h) {\n    return;\n  }\n  let t = e / P.h;\n  let c = e % P.h;\n  let bh = (t / P.s) * P.heads + c / P.d;\n  merge_out[e] = merge_ctx[(bh * P.s + t % P.s) * P.d + c % P.d];\n}\n\n// out[i] = mean of x[i, :lens[i], :] (or its first row when P.cls), divided\n// by its L2 norm when P.normalize (by at least 1e-12, as sentence-transformers\n// does); a text of length 0 gets zeros. One workgroup per text.\n@group(0) @binding(1) var<storage, read> pool_lens: array<u32>;\n@group(0) @binding(2) var<storage, read> pool_x: array<f32>;\n@group(0) @binding(3) var<storage, read_write> pool_out: array<f32>;\n\n@compute @workgroup_size(WG)\nfn pool(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n  let i = flat(wid, nwg);\n  if (i >= P.b) {\n    return;\n  }\n  let len = select(pool_lens[i], min(pool_lens[i], 1u), P.cls == 1u);\n  var xs: array<f32, PER>;\n  var sq = 0.0;\n  for (var k = 0u; lid + k * WG < P.h; k++) {\n    let c = lid + k * WG;\n    var acc = 0.0;\n    for (var t = 0u; t < len; t++) {\n      acc += pool_x[(i * P.s + t) * P.h + c];\n    }\n    xs[k] = acc / f32(max(len, 1u));\n    sq += xs[k] * xs[k];\n  }\n  let norm = sqrt(sum_wg(lid, sq));\n  let sc = select(1.0, 1.0 / max(norm, 1e-12), P.normalize == 1u);\n  for (var k = 0u; lid + k * WG < P.h; k++) {\n    pool_out[i * P.h + lid + k * WG] = xs[k] * sc;\n  }\n}\n" });
      const names = ["embed", "add_ln", "split_heads", "softmax", "merge_heads", "pool"];
      const made = await Promise.all(names.map((entryPoint) => device.createComputePipelineAsync({ label: `encoder ${entryPoint}`, layout: "auto", compute: { module, entryPoint } }))).catch(async (e) => {
        throw new Error(await compileErrors(module, "encoder-kernels.wgsl", e));
      });
      return { weights: weights2, pipelines: Object.fromEntries(names.map((n, i) => [n, made[i]])) };
    });
    const tensors = /* @__PURE__ */ new Map();
    for (const [name, p] of packed.at) tensors.set(name, { buffer: weights[p.buffer], offset: p.offset, size: p.bytes });
    const layers = [];
    for (let l = 0; l < c.num_hidden_layers; l++) {
      layers.push(Object.fromEntries(perLayer.map(([key, name]) => [key, tensors.get(`layer.${l}.${name}`)])));
    }
    const heads = c.num_attention_heads, d = H / heads;
    const params = (b, s) => {
      const u = new Uint32Array(9), f = new Float32Array(u.buffer);
      u.set([b, s, H, heads, d]);
      f[5] = c.layer_norm_eps;
      f[6] = 1 / Math.sqrt(d);
      u[7] = manifest.pooling === "cls" ? 1 : 0;
      u[8] = manifest.normalize ? 1 : 0;
      return u.buffer;
    };
    return new _GpuEncoder(webtune, manifest, pipelines, weights, tensors, layers, params, init.maxBatch, init.report);
  }
  /** One embedding per list of token ids, batched and padded as the Wasm path does. */
  async encode(toks) {
    if (this.closed) throw new Error("encode: this SentenceEncoder is closed");
    const out = new Array(toks.length);
    for (const { idx, b, s } of planBatches(toks.map((t) => t.length), this.maxBatch, this.manifest.max_seq_length)) {
      const bucket = await this.bucket(b, s);
      const t0 = performance.now();
      const emb = await this.run(bucket, idx.map((i) => toks[i]));
      if (bucket.calls++ > 0) void this.latency?.add(this.webtune.session.session_id, "webgpu", b, s, performance.now() - t0);
      idx.forEach((i, j) => out[i] = emb[j]);
    }
    return out;
  }
  /** The bucket's buffers, kernels and bind groups, made once. */
  bucket(b, s) {
    const key = `${b}x${s}`;
    let p = this.buckets.get(key);
    if (!p) {
      p = this.makeBucket(b, s);
      this.buckets.set(key, p);
      p.catch(() => this.buckets.delete(key));
    }
    return p;
  }
  async makeBucket(b, s) {
    const c = this.manifest.config, H = c.hidden_size, I = c.intermediate_size, heads = c.num_attention_heads, d = H / heads;
    const M = b * s, wt = this.webtune, device = this.device;
    const [qkvK, scoresK, contextK, outK, upK, downK] = await Promise.all([
      wt.gpuKernel("matmul", [M, H, 3 * H]),
      wt.gpuKernel("batch_matmul", [b * heads, s, d, s]),
      wt.gpuKernel("batch_matmul", [b * heads, s, s, d]),
      wt.gpuKernel("matmul", [M, H, H]),
      wt.gpuKernel("matmul+bias+gelu", [M, H, I]),
      wt.gpuKernel("matmul", [M, I, H])
    ]);
    const floats = { x: M * H, qkv: M * 3 * H, q: M * H, kt: M * H, v: M * H, p: b * heads * s * s, ctx: M * H, merged: M * H, proj: M * H, ffn: M * I };
    const limit = device.limits.maxStorageBufferBindingSize;
    for (const [name, n] of Object.entries(floats)) {
      if (n * 4 > limit) throw new Error(`SentenceEncoder: a batch of ${b} texts of ${s} tokens needs a ${name} buffer of ${n * 4} bytes, above this device's maxStorageBufferBindingSize (${limit}); lower maxBatch`);
    }
    return scoped2(device, `SentenceEncoder: bucket ${b}×${s} on WebGPU`, () => {
      const owned = [];
      const buffer = (label, bytes, usage = 0) => {
        const buf = device.createBuffer({ label: `encoder ${label} ${b}x${s}`, size: Math.max(16, Math.ceil(bytes / 16) * 16), usage: GPUBufferUsage.STORAGE | usage });
        owned.push(buf);
        return buf;
      };
      const a = Object.fromEntries(Object.entries(floats).map(([name, n]) => [name, buffer(name, n * 4)]));
      const ids = buffer("ids", M * 4, GPUBufferUsage.COPY_DST);
      const lens = buffer("lens", b * 4, GPUBufferUsage.COPY_DST);
      const pooled = buffer("pooled", b * H * 4, GPUBufferUsage.COPY_SRC);
      const read = device.createBuffer({ label: `encoder read ${b}x${s}`, size: b * H * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      owned.push(read);
      const params = device.createBuffer({ label: `encoder params ${b}x${s}`, size: 48, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
      owned.push(params);
      device.queue.writeBuffer(params, 0, this.params(b, s));
      const entries = (ranges) => ranges.map((r2, binding) => ({ binding, resource: { buffer: r2.buffer, offset: r2.offset ?? 0, size: r2.size } }));
      const tuned = (kernel, ...ranges) => ({ kernel, group: device.createBindGroup({ layout: kernel.bindGroupLayout, entries: entries(ranges) }) });
      const fixed = (name, groups, ...ranges) => {
        const pipeline = this.fixed[name];
        return { pipeline, grid: grid(groups), group: device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: entries([{ buffer: params }, ...ranges]) }) };
      };
      const T = (name) => this.tensors.get(name);
      const r = (buffer2) => ({ buffer: buffer2 });
      const rowsEW = Math.ceil(M * H / EW);
      const steps = [
        fixed(
          "embed",
          M,
          r(ids),
          T("embeddings.word"),
          T("embeddings.position"),
          T("embeddings.token_type"),
          T("embeddings.ln.gamma"),
          T("embeddings.ln.beta"),
          r(a.x)
        )
      ];
      for (const L of this.layers) {
        steps.push(
          tuned(qkvK, r(a.x), L.qkvW, r(a.qkv)),
          fixed("split_heads", rowsEW, r(a.qkv), L.qkvB, r(a.q), r(a.kt), r(a.v)),
          tuned(scoresK, r(a.q), r(a.kt), r(a.p)),
          fixed("softmax", Math.ceil(b * heads * s / WG), r(lens), r(a.p)),
          tuned(contextK, r(a.p), r(a.v), r(a.ctx)),
          fixed("merge_heads", rowsEW, r(a.ctx), r(a.merged)),
          tuned(outK, r(a.merged), L.outW, r(a.proj)),
          fixed("add_ln", M, r(a.proj), L.outB, L.ln1G, L.ln1B, r(a.x)),
          tuned(upK, r(a.x), L.inW, L.inB, r(a.ffn)),
          tuned(downK, r(a.ffn), L.ffnW, r(a.proj)),
          fixed("add_ln", M, r(a.proj), L.ffnB, L.ln2G, L.ln2B, r(a.x))
        );
      }
      steps.push(fixed("pool", b, r(lens), r(a.x), r(pooled)));
      return { b, s, calls: 0, ids, lens, pooled, read, owned, steps, idsHost: new Uint32Array(M), lensHost: new Uint32Array(b) };
    });
  }
  /** Runs one padded batch: one command buffer, one submit, one map of the pooled embeddings. */
  async run(bk, toks) {
    const H = this.manifest.config.hidden_size, device = this.device;
    bk.idsHost.fill(0);
    bk.lensHost.fill(0);
    toks.forEach((t, j) => {
      bk.idsHost.set(t, j * bk.s);
      bk.lensHost[j] = t.length;
    });
    const bytes = toks.length * H * 4;
    device.pushErrorScope("validation");
    device.queue.writeBuffer(bk.ids, 0, bk.idsHost);
    device.queue.writeBuffer(bk.lens, 0, bk.lensHost);
    const enc = device.createCommandEncoder({ label: "encoder batch" });
    const pass = enc.beginComputePass();
    for (const st of bk.steps) {
      if ("kernel" in st) {
        st.kernel.dispatch(pass, st.group);
      } else {
        pass.setPipeline(st.pipeline);
        pass.setBindGroup(0, st.group);
        pass.dispatchWorkgroups(...st.grid);
      }
    }
    pass.end();
    enc.copyBufferToBuffer(bk.pooled, 0, bk.read, 0, bytes);
    device.queue.submit([enc.finish()]);
    const [error, mapError] = await Promise.all([
      device.popErrorScope(),
      bk.read.mapAsync(GPUMapMode.READ, 0, bytes).then(() => null, (e) => e)
    ]);
    if (error || mapError) {
      if (!mapError) bk.read.unmap();
      throw new Error(`SentenceEncoder on WebGPU: ${(error ?? mapError).message}`);
    }
    const all = new Float32Array(bk.read.getMappedRange(0, bytes));
    const out = toks.map((_, j) => all.slice(j * H, (j + 1) * H));
    bk.read.unmap();
    return out;
  }
  /** Frees the weights and every bucket's buffers; the device stays the app's. */
  destroy() {
    this.closed = true;
    for (const w of this.weights) w.destroy();
    for (const p of this.buckets.values()) void p.then((bk) => bk.owned.forEach((x) => x.destroy()), () => void 0);
    this.buckets.clear();
  }
};

// src/quant.ts
var I32_MAX = 2 ** 31 - 1;
function qmaxW(k) {
  return 2 ** Math.floor(Math.log2(Math.sqrt(I32_MAX / k))) - 1;
}
function qmaxA(k) {
  return Math.min(32767, Math.floor(I32_MAX / (qmaxW(k) * k)));
}
function roundHalfEven(v) {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}
function quantizeColumns(w, k, n, qmax, words, scales) {
  const mx = new Float32Array(n);
  for (let kk = 0; kk < k; kk++) for (let j = 0; j < n; j++) mx[j] = Math.max(mx[j], Math.abs(w[kk * n + j]));
  for (let j = 0; j < n; j++) scales[j] = mx[j] / qmax;
  const inv = new Float32Array(n);
  for (let j = 0; j < n; j++) inv[j] = mx[j] > 0 ? qmax / mx[j] : 0;
  for (let kk = 0; kk < k; kk++) {
    const row = kk * n, at = (kk >> 1) * n, hi = kk & 1;
    for (let j = 0; j < n; j++) {
      const v = Math.max(-qmax, Math.min(qmax, roundHalfEven(Math.fround(w[row + j] * inv[j]))));
      if (hi) words[at + j] = (words[at + j] | v << 16) >>> 0;
      else words[at + j] = v & 65535;
    }
  }
}

// src/encoder.ts
var PAGE2 = 65536;
function fromBase64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
async function sha256Hex2(bytes) {
  if (!globalThis.crypto?.subtle) return null;
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}
var SentenceEncoder = class _SentenceEncoder {
  /** `target: 'auto'`: which target it chose and why; null otherwise. */
  choice = null;
  /** The webtune session whose kernels run the model (tuning, events, status). */
  webtune;
  manifest;
  /** Embedding width. */
  dim;
  /** WebGPU: the backend that runs every batch; null on Wasm, whose state is the fields below. */
  gpu = null;
  memory;
  fixed;
  tokenizer;
  /** Memory offsets of the embedding tensors; `wordScale` is 0 unless `word` is the int16 blob's `embeddings.word.q`. */
  emb = { word: 0, wordScale: 0, pos: 0, type: 0, gamma: 0, beta: 0 };
  layers = [];
  buckets = /* @__PURE__ */ new Map();
  maxBatch;
  queue = Promise.resolve();
  i32;
  f32;
  latency;
  /** Wasm: the weight products' precision (see `EncoderLoadOptions.precision`). */
  int16 = false;
  constructor(init) {
    this.webtune = init.webtune;
    this.manifest = init.manifest;
    if ("gpu" in init) {
      this.gpu = init.gpu;
      this.tokenizer = init.tokenizer;
      this.dim = init.manifest.config.hidden_size;
      return;
    }
    this.memory = init.memory;
    this.fixed = init.fixed;
    this.tokenizer = init.tokenizer;
    this.maxBatch = init.maxBatch;
    this.int16 = init.int16;
    this.latency = init.report && !init.int16 ? new LatencyLog(init.webtune.server, init.manifest.name, init.manifest.max_seq_length) : null;
    this.dim = init.manifest.config.hidden_size;
    this.i32 = new Int32Array(this.memory.buffer);
    this.f32 = new Float32Array(this.memory.buffer);
    const c = init.manifest.config, name = init.manifest.name;
    const list = init.pre ? init.manifest.int16.tensors : init.manifest.tensors;
    const what = init.pre ? "the manifest's int16 blob" : "the manifest";
    const want = (tensor, shape, dtype = "f32") => {
      const t = list.find((x) => x.name === tensor);
      if (!t) throw new Error(`model ${name}: ${what} has no tensor ${tensor}`);
      if (t.dtype !== dtype || t.shape.join(",") !== shape.join(",")) throw new Error(`model ${name}: tensor ${tensor} ${init.pre ? "of the int16 blob " : ""}is ${t.dtype}[${t.shape}], expected ${dtype}[${shape}]`);
      if (t.offset % 64) throw new Error(`model ${name}: tensor ${tensor} is not 64-byte aligned`);
      const bytes = shape.reduce((a, b) => a * b, 4);
      if (!(t.offset >= 0 && t.offset + bytes <= init.bytes)) throw new Error(`model ${name}: tensor ${tensor} (${bytes} bytes at ${t.offset}) lies outside its ${init.bytes}-byte blob`);
      return init.base + t.offset;
    };
    const H = c.hidden_size, I = c.intermediate_size;
    const matrix = (w, k, n) => init.pre ? [want(w + ".q", [k / 2, n], "u32"), want(w + ".scale", [n])] : [want(w, [k, n]), 0];
    this.emb = {
      word: init.pre ? want("embeddings.word.q", [c.vocab_size, H / 2], "u32") : want("embeddings.word", [c.vocab_size, H]),
      wordScale: init.pre ? want("embeddings.word.scale", [c.vocab_size]) : 0,
      pos: want("embeddings.position", [c.max_position_embeddings, H]),
      type: want("embeddings.token_type", [c.type_vocab_size, H]),
      gamma: want("embeddings.ln.gamma", [H]),
      beta: want("embeddings.ln.beta", [H])
    };
    for (let l = 0; l < c.num_hidden_layers; l++) {
      const p = `layer.${l}.`;
      const [qkvW, qkvS] = matrix(p + "qkv.weight", H, 3 * H), [outW, outS] = matrix(p + "attn_out.weight", H, H);
      const [inW, inS] = matrix(p + "ffn_in.weight", H, I), [ffnW, ffnS] = matrix(p + "ffn_out.weight", I, H);
      this.layers.push({
        qkvW,
        qkvB: want(p + "qkv.bias", [3 * H]),
        outW,
        outB: want(p + "attn_out.bias", [H]),
        ln1G: want(p + "attn_ln.gamma", [H]),
        ln1B: want(p + "attn_ln.beta", [H]),
        inW,
        inB: want(p + "ffn_in.bias", [I]),
        ffnW,
        ffnB: want(p + "ffn_out.bias", [H]),
        ln2G: want(p + "ffn_ln.gamma", [H]),
        ln2B: want(p + "ffn_ln.beta", [H]),
        qkvS,
        outS,
        inS,
        ffnS
      });
    }
    if (this.int16 && !init.pre) this.quantizeWeights();
  }
  /**
   * int16 from the f32 blob: each layer's four weight matrices, quantised
   * per column and written over their own f32 copies: the words, then the
   * column scales 64-byte aligned after them (what the int16 blob holds ready).
   */
  quantizeWeights() {
    const c = this.manifest.config, H = c.hidden_size, I = c.intermediate_size;
    const u32 = new Uint32Array(this.memory.buffer);
    const inPlace = (at, k, n) => {
      const w = this.f32.slice(at / 4, at / 4 + k * n);
      const words = k / 2 * n, sAt = at + Math.ceil(words * 4 / 64) * 64;
      quantizeColumns(w, k, n, qmaxW(k), u32.subarray(at / 4, at / 4 + words), this.f32.subarray(sAt / 4, sAt / 4 + n));
      return sAt;
    };
    for (const L of this.layers) {
      L.qkvS = inPlace(L.qkvW, H, 3 * H);
      L.outS = inPlace(L.outW, H, H);
      L.inS = inPlace(L.inW, H, I);
      L.ffnS = inPlace(L.ffnW, I, H);
    }
  }
  /**
   * Fetches the model's manifest, weights and tokenizer from the server
   * (each blob checked against its SHA-256 address; with `precision:
   * 'int16'` the int16 weights where the manifest has them, and then not
   * the f32 ones), copies the weights into
   * Wasm memory (or uploads them to the GPU device) and opens a webtune
   * session for the model's kernels.
   */
  static async load(opts) {
    if (!opts || typeof opts.model !== "string" || !opts.model) throw new TypeError("SentenceEncoder.load: `model` must be a model name (GET /v1/models lists them)");
    if (opts.precision !== void 0 && opts.precision !== "fp32" && opts.precision !== "int16")
      throw new TypeError(`SentenceEncoder.load: precision must be 'fp32' or 'int16', got ${String(opts.precision)}`);
    if (opts.precision === "int16" && opts.target !== "wasm")
      throw new TypeError(`SentenceEncoder.load: precision 'int16' runs on target 'wasm' only, got target '${opts.target}'`);
    if (opts.target === "auto") return _SentenceEncoder.loadAuto(opts);
    if (opts.target !== "wasm" && opts.target !== "webgpu") throw new TypeError(`SentenceEncoder.load: target must be 'wasm', 'webgpu' or 'auto', got ${String(opts.target)}`);
    if (opts.target === "webgpu" && opts.device !== void 0 && !(typeof GPUDevice !== "undefined" && opts.device instanceof GPUDevice))
      throw new TypeError("SentenceEncoder.load: `device` must be a GPUDevice, or left out to request one");
    const server = (opts.server ?? globalThis.location?.origin ?? "").replace(/\/+$/, "");
    const res = await fetch(`${server}/v1/models/${encodeURIComponent(opts.model)}`);
    if (res.status === 404) throw new Error(`model "${opts.model}" is not on ${server} (import it with \`webtune model import\`; GET /v1/models lists the models there)`);
    if (!res.ok) throw new Error(`model "${opts.model}": manifest HTTP ${res.status}`);
    const manifest = await res.json();
    if (manifest.format !== 1) throw new Error(`model "${opts.model}": bundle format ${manifest.format}, this runtime reads format 1`);
    if (manifest.architecture !== "bert") throw new Error(`model "${opts.model}": architecture ${manifest.architecture}, SentenceEncoder runs bert`);
    const c = manifest.config;
    if (c.hidden_size % c.num_attention_heads || c.hidden_size / c.num_attention_heads % 4 || c.intermediate_size % 4)
      throw new Error(`model "${opts.model}": hidden ${c.hidden_size}, heads ${c.num_attention_heads}, FFN ${c.intermediate_size}: the fixed kernels need head and FFN widths that are multiples of 4`);
    if (Math.ceil(manifest.max_seq_length / 4) * 4 > c.max_position_embeddings)
      throw new Error(`model "${opts.model}": max_seq_length ${manifest.max_seq_length} rounded up to a multiple of 4 exceeds its ${c.max_position_embeddings} position embeddings`);
    if (!/^gelu$/.test(c.hidden_act)) throw new Error(`model "${opts.model}": activation ${c.hidden_act}, SentenceEncoder runs exact gelu`);
    const blob = async (b, what) => {
      const r = await fetch(b.url.startsWith("http") ? b.url : `${server}${b.url}`);
      if (!r.ok) throw new Error(`model "${opts.model}": ${what} blob HTTP ${r.status}`);
      const bytes = await r.arrayBuffer();
      const got = await sha256Hex2(bytes);
      if (bytes.byteLength !== b.bytes || got !== null && got !== b.sha256)
        throw new Error(`model "${opts.model}": the ${what} blob is corrupt or truncated (${bytes.byteLength} bytes hashing to ${got ?? "?"}; the manifest says ${b.bytes} bytes, ${b.sha256}); nothing was kept`);
      return bytes;
    };
    const pre = opts.target === "wasm" && opts.precision === "int16" && manifest.int16 != null;
    if (pre && (typeof manifest.int16.weights?.url !== "string" || !Array.isArray(manifest.int16.tensors)))
      throw new Error(`model "${opts.model}": the manifest's int16 entry has no weights blob or tensor list`);
    const [weights, tokBytes] = await Promise.all([
      pre ? blob(manifest.int16.weights, "int16 weights") : blob(manifest.weights, "weights"),
      blob(manifest.tokenizer, "tokenizer")
    ]);
    const tokJson = JSON.parse(new TextDecoder().decode(tokBytes));
    tokJson.padding = null;
    tokJson.truncation = null;
    const tokenizer = new Tokenizer_default(tokJson, {});
    const maxBatch = Math.max(1, opts.maxBatch ?? 8), report = opts.report ?? true;
    if (opts.target === "webgpu") {
      const webtune2 = await Webtune.open({
        server,
        target: "webgpu",
        device: opts.device,
        tune: opts.tune ?? true,
        budgetMs: opts.budgetMs,
        cache: opts.cache,
        maxCandidates: opts.maxCandidates,
        policy: opts.policy
      });
      try {
        const gpu = await GpuEncoder.create({ webtune: webtune2, manifest, weights, maxBatch, report });
        return new _SentenceEncoder({ webtune: webtune2, manifest, tokenizer, gpu });
      } catch (e) {
        webtune2.close();
        throw e;
      }
    }
    const base = PAGE2;
    const shared = threadsWanted(opts.threads).count > 1;
    const memory = new WebAssembly.Memory({ initial: Math.ceil((base + weights.byteLength) / PAGE2) + 1, maximum: 65536, shared });
    new Uint8Array(memory.buffer, base, weights.byteLength).set(new Uint8Array(weights));
    const fixedBytes = fromBase64("AGFzbQEAAAABgQEMYAF7AX1gBH9/f3sBe2ADf39/AGAGf31/f399AGALf39/f39/f39/f30AYAx/f39/f39/f39/f30AYA1/f39/f39/f39/f399AGAJf39/f39/f399AGAKf39/f39/f39/fQBgBn9/f39/fwBgCH9/f39/f39/AGAHf39/f39/fwACDwEDZW52Bm1lbW9yeQIAAQMQDwABAgMEBQYHCAkKCwsJCwdtCgNleHAAAgVlbWJlZAAECWVtYmVkX3ExNgAFBmFkZF9sbgAHC3NwbGl0X2hlYWRzAAgHc29mdG1heAAJDHNvZnRtYXhfcGFydAAKC21lcmdlX2hlYWRzAAwKcXVhbnRfcm93cwANBHBvb2wADgq7Fg8ZACAA/R8AIAD9HwGSIAD9HwIgAP0fA5KSC9UDAgF/BnsDQCAAIARq/QAEACAD/eUB/QwAALBCAACwQgAAsEIAALBC/egB/QxPrK7CT6yuwk+srsJPrK7C/ekBIQUgBf0MO6q4PzuquD87qrg/O6q4P/3mAf0MAABASwAAQEsAAEBLAABAS/3kASEGIAb9DAAAQEsAAEBLAABASwAAQEv95QEhByAFIAf9DACAMT8AgDE/AIAxPwCAMT/95gH95QEhCCAIIAf9DIOAXjmDgF45g4BeOYOAXjn95gH95AEhCP0MZ2lQOWdpUDlnaVA5Z2lQOSAI/eYB/QzOQ7c6zkO3Os5DtzrOQ7c6/eQBIQkgCSAI/eYB/QwIiQg8CIkIPAiJCDwIiQg8/eQBIQkgCSAI/eYB/QzBqSo9wakqPcGpKj3BqSo9/eQBIQkgCSAI/eYB/Qyqqio+qqoqPqqqKj6qqio+/eQBIQkgCSAI/eYB/QwAAAA/AAAAPwAAAD8AAAA//eQBIQkgCSAIIAj95gH95gEgCP3kAf0MAACAPwAAgD8AAIA/AACAP/3kASAG/Qx/AMC0fwDAtH8AwLR/AMC0/a4BQRf9qwH95gEhCSABIARqIAn9CwQAIAogCf3kASEKIARBEGoiBCACSQ0ACyAKCyAAIAAgASACQQJ0/QwAAAAAAAAAAAAAAAAAAAAAEAEaC6UBAgJ/BHsgBEECdCEHIAEgBLOV/RMhCEEAIQYDQCAAIAZq/QAEACAI/eUBIQogCSAKIAr95gH95AEhCSAGQRBqIgYgB0kNAAtDAACAPyAJEAAgBLOVIAWSkZX9EyELQQAhBgNAIAAgBmogACAGav0ABAAgCP3lASAL/eYBIAIgBmr9AAQA/eYBIAMgBmr9AAQA/eQB/QsEACAGQRBqIgYgB0kNAAsLHgAgACABQQBBACACIAMgBCAFIAYgByAIIAkgChAGCx4AIAAgASACQQEgAyAEIAUgBiAHIAggCSAKIAsQBgvoAQIHfwN7IAtBAnQhDwNAIAAgDUECdGooAgAhECABIBAgDyADdmxqIREgAwRAIAIgEEECdGr9CQIAIRYLIAQgDSAKcCAPbGohEiAIIA0gD2xqIRP9DAAAAAAAAAAAAAAAAAAAAAAhFEEAIQ4DQCADBHsgESAOQQF2av0DAwD9+gEgFv3mAQUgESAOav0ABAALIBIgDmr9AAQA/eQBIAUgDmr9AAQA/eQBIRUgEyAOaiAV/QsEACAUIBX95AEhFCAOQRBqIg4gD0kNAAsgEyAUEAAgBiAHIAsgDBADIA1BAWoiDSAJSQ0ACwudAQIEfwJ7IAdBAnQhCwNAIAkgC2whDP0MAAAAAAAAAAAAAAAAAAAAACENQQAhCgNAIAAgDCAKamr9AAQAIAEgCmr9AAQA/eQBIAIgDCAKamr9AAQA/eQBIQ4gBSAMIApqaiAO/QsEACANIA795AEhDSAKQRBqIgogC0kNAAsgBSAMaiANEAAgAyAEIAcgCBADIAlBAWoiCSAGSQ0ACwvsAgMIfwJ7An8gCf0TIRIgByAIbEECdCEOIAZBAnQhFSAFIAZsIQsDQCAAIAogDkEDbGxqIQ9BACEMA0AgCiAGbiAHbCAMaiEQIBAgBmwgCGwgCiAGcCAIbGpBAnQhEUEAIQ0DQCACIBEgDWpqIBIgDyANav0ABAAgASANav0ABAD95AH95gH9CwQAIAQgESANamogDyANIA5BAXRqav0ABAAgASANIA5BAXRqav0ABAD95AH9CwQAIA8gDSAOamr9AAQAIAEgDSAOamr9AAQA/eQBIRMgAyAQIAhsIA1BAnZqIAZsIAogBnBqQQJ0aiEUIBQgE/0fADgCACAUIBVqIBP9HwE4AgAgFCAVQQF0aiAT/R8COAIAIBQgFUEDbGogE/0fAzgCACANQRBqIg0gCEECdEkNAAsgDyAIQQJ0aiEPIAEgCEECdGohASAMQQFqIgwgB0kNAAsgASAOayEBIApBAWoiCiALSQ0ACwsVACAAIAIgAyAEIAVBACABIAJsEAsLKgEBfyABIAJsIQggACACIAMgBCAFIAcgCGwgBm4gB0EBaiAIbCAGbhALC7oCAwZ/AXsCfSAFIAZPBEAPCyACQQJ0IQwDQCADIAUgAW5BAnRqKAIAQQJ0IQkgCUEMakFwcSEKQQAhBwNAIAAgBSACbCAHaiAMbGohCEMAAAAAIQ8gCQRAIAkhCwJAA0AgCyAKTw0BIAggC2pDAACA/zgCACALQQRqIQsMAAsL/QwAAID/AACA/wAAgP8AAID/IQ1BACELA0AgDSAIIAtq/QAEAP3pASENIAtBEGoiCyAKSQ0ACyAN/R8AIA39HwGXIA39HwIgDf0fA5eXIQ5DAACAPyAIIAggCiAO/RMQARAAlSEPCyAEIAUgAmwgB2pBAnRqIA84AgAgCSELAkADQCALIAxPDQEgCCALakMAAAAAOAIAIAtBBGohCwwACwsgB0EBaiIHIAJJDQALIAVBAWoiBSAGSQ0ACwuiAQIIfwF7IAZBAnQhCiADIARsIQ0DQCACIAcgBSAKbGxqIQxBACEIA0AgByAEbiAFbCAIaiAEbCAHIARwaiEOIAAgDiAKbGohCyABIA5BAnRq/QkCACEPQQAhCQNAIAwgCWogCyAJav0ABAAgD/3mAf0LBAAgCUEQaiIJIApJDQALIAwgCmohDCAIQQFqIgggBUkNAAsgB0EBaiIHIA1JDQALC/EDBAd/AXsDfQF7IAFFBEAPCyACQQJ0IQggCEFwcSEJIAhBYHEhCiADsiEPA0AgACAGIAhsaiELIAQgBiACQQF0bGohDP0MAAAAAAAAAAAAAAAAAAAAACENQQAhBwJAA0AgByAJTw0BIA0gCyAHav0ABAD94AH96wEhDSAHQRBqIQcMAAsLIA39HwAgDf0fAZcgDf0fAiAN/R8Dl5chDgJAA0AgByAITw0BIA4gCyAHaioCAIuXIQ4gB0EEaiEHDAALCyAOIA+VIRAgBSAGQQJ0aiAQOAIAIA8gDpVDAAAAACAOQwAAAABeGyEQIBD9EyERQQAhBwJAA0AgByAKTw0BIAwgB0EBdmogCyAHav0ABAAgEf3mAf0MAABASwAAQEsAAEBLAABAS/3kAf0MAABASwAAQEsAAEBLAABAS/2xASALIAdBEGpq/QAEACAR/eYB/QwAAEBLAABASwAAQEsAAEBL/eQB/QwAAEBLAABASwAAQEsAAEBL/bEB/YUB/QsEACAHQSBqIQcMAAsLAkADQCAHIAhPDQEgDCAHQQF2aiALIAdqKgIAIBCUkCAPliAPjJf8AEH//wNxIAsgB0EEamoqAgAgEJSQIA+WIA+Ml/wAQRB0cjYCACAHQQhqIQcMAAsLIAZBAWoiBiABSQ0ACwu2AgMHfwJ7AX0gBUECdCEKA0AgAiAHIApsaiENIAEgB0ECdGooAgAhC0EAIQkDQP0MAAAAAAAAAAAAAAAAAAAAACEOIAAgByAEbCAKbCAJamohDEEAIQgCQANAIAggC08NASAOIAz9AAQA/eQBIQ4gDCAKaiEMIAhBAWohCAwACwsgDSAJaiAOIAtBASALG7P9E/3nAf0LBAAgCUEQaiIJIApJDQALIAYEQP0MAAAAAAAAAAAAAAAAAAAAACEOQQAhCQNAIA0gCWr9AAQAIQ8gDiAPIA/95gH95AEhDiAJQRBqIgkgCkkNAAtDAACAPyAOEACRQ8y8jCuXlf0TIQ9BACEJA0AgDSAJaiANIAlq/QAEACAP/eYB/QsEACAJQRBqIgkgCkkNAAsLIAdBAWoiByADSQ0ACws=");
    const mod = await WebAssembly.instantiate(shared ? sharedImport(fixedBytes) : fixedBytes, { env: { memory } });
    const webtune = await Webtune.open({
      server,
      target: "wasm",
      memory,
      tune: opts.tune ?? true,
      worker: opts.worker ?? false,
      threads: opts.threads,
      budgetMs: opts.budgetMs,
      cache: opts.cache,
      maxCandidates: opts.maxCandidates,
      policy: opts.policy
    });
    const fixed = { ...mod.instance.exports };
    const pool = webtune.threadPool;
    if (pool && pool.size > 1) {
      const k = pool.prepare(mod.module, memory, mod.instance, "softmax_part");
      await k.ready;
      const one = fixed.softmax, parts = pool.size;
      fixed.softmax = (p, b, heads, s, lens, inv) => s >= 64 ? pool.run(k, [p, b, heads, s, lens, inv, parts], parts) : one(p, b, heads, s, lens, inv);
    }
    return new _SentenceEncoder({ webtune, manifest, memory, fixed, tokenizer, base, bytes: weights.byteLength, maxBatch, report, int16: opts.precision === "int16", pre });
  }
  /** Token ids of one text: [CLS] … [SEP], at most max_seq_length of them. */
  tokenize(text) {
    const max = this.manifest.max_seq_length;
    let ids;
    for (let len2 = 16 * max; ; len2 *= 2) {
      if (len2 >= text.length) {
        ids = this.tokenizer.encode(text).ids;
        break;
      }
      let cut = len2;
      while (cut < text.length && !/\s/.test(text[cut])) cut++;
      ids = this.tokenizer.encode(text.slice(0, cut)).ids;
      if (ids.length > max || cut >= text.length) break;
    }
    if (ids.length > max) ids = [...ids.slice(0, max - 1), ids[ids.length - 1]];
    return ids;
  }
  /**
   * One embedding per text (`dim` floats, L2-normalised when the model says
   * so). Texts are grouped by length into batches padded to a bucket.
   */
  encode(texts) {
    if (!Array.isArray(texts)) return Promise.reject(new TypeError("encode: expected an array of strings"));
    if (texts.length === 0) return Promise.reject(new Error("encode: the list of texts is empty"));
    const bad = texts.findIndex((t) => typeof t !== "string");
    if (bad >= 0) return Promise.reject(new TypeError(`encode: texts[${bad}] is ${texts[bad] === null ? "null" : typeof texts[bad]}, expected a string`));
    const gpu = this.gpu;
    const run = this.queue.then(() => gpu ? gpu.encode(texts.map((t) => this.tokenize(t))) : this.encodeNow(texts));
    this.queue = run.catch(() => void 0);
    return run;
  }
  async encodeNow(texts) {
    const toks = texts.map((t) => this.tokenize(t));
    const order = toks.map((_, i) => i).sort((a, b) => toks[a].length - toks[b].length);
    const out = new Array(texts.length);
    for (let at = 0; at < order.length; at += this.maxBatch) {
      const idx = order.slice(at, at + this.maxBatch);
      const longest = Math.max(...idx.map((i) => toks[i].length));
      const top = Math.ceil(this.manifest.max_seq_length / 4) * 4;
      const s = LENGTHS.find((l) => l >= longest && l <= top) ?? top;
      const bucket = await this.bucket(pow2(idx.length), s);
      const t0 = performance.now();
      const batch = idx.map((i) => toks[i]);
      this.webtune.guard.call(`${bucket.b}x${bucket.s}`, bucket.kernels, () => this.run(bucket, batch));
      if (bucket.calls++ > 0) void this.latency?.add(this.webtune.session.session_id, "wasm", bucket.b, bucket.s, performance.now() - t0);
      const H = this.dim;
      for (let j = 0; j < idx.length; j++) out[idx[j]] = this.f32.slice(bucket.pooled / 4 + j * H, bucket.pooled / 4 + (j + 1) * H);
    }
    return out;
  }
  /** The bucket's buffers and kernels, made once. */
  bucket(b, s) {
    const key = `${b}x${s}`;
    let p = this.buckets.get(key);
    if (!p) {
      p = this.makeBucket(b, s);
      this.buckets.set(key, p);
      p.catch(() => this.buckets.delete(key));
    }
    return p;
  }
  async makeBucket(b, s) {
    const c = this.manifest.config, H = c.hidden_size, I = c.intermediate_size, heads = c.num_attention_heads, d = H / heads;
    const M = b * s;
    const wt = this.webtune;
    const mm = this.int16 ? "matmul_i16" : "matmul";
    const [qkvK, scoresK, contextK, outK, upK, downK] = await Promise.all([
      wt.wasmKernel(mm, [M, H, 3 * H]),
      wt.wasmKernel("batch_matmul", [b * heads, s, d, s]),
      wt.wasmKernel("batch_matmul", [b * heads, s, s, d]),
      wt.wasmKernel(mm, [M, H, H]),
      wt.wasmKernel(`${mm}+bias+gelu`, [M, H, I]),
      wt.wasmKernel(mm, [M, I, H])
    ]);
    const sizes = {
      ids: M,
      lens: b,
      ones: b,
      x: M * H,
      qkv: M * 3 * H,
      q: M * H,
      kt: M * H,
      v: M * H,
      p: b * heads * s * s,
      inv: b * heads * s,
      ctx: M * H,
      merged: M * H,
      proj: M * H,
      ffn: M * I,
      pooled: b * H,
      ...this.int16 ? { qa: M * Math.max(H, I) / 2, sa: M } : {}
    };
    let end = Math.ceil(this.memory.buffer.byteLength / 64) * 64;
    const offsets = { qa: 0, sa: 0 };
    for (const [name, n] of Object.entries(sizes)) {
      offsets[name] = end;
      end = Math.ceil((end + n * 4) / 64) * 64;
    }
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE2));
    this.i32 = new Int32Array(this.memory.buffer);
    this.f32 = new Float32Array(this.memory.buffer);
    this.i32.fill(1, offsets.ones / 4, offsets.ones / 4 + b);
    const kernels = [.../* @__PURE__ */ new Set([qkvK, scoresK, contextK, outK, upK, downK])];
    return { b, s, calls: 0, ...offsets, qkvK, scoresK, contextK, outK, upK, downK, kernels };
  }
  /** Runs one padded batch through the model into `bk.pooled`; synchronous, so no kernel swaps mid-batch. */
  run(bk, toks) {
    const c = this.manifest.config, H = c.hidden_size, I = c.intermediate_size, heads = c.num_attention_heads, d = H / heads;
    const eps = c.layer_norm_eps, { b, s } = bk, M = b * s, f = this.fixed;
    if (this.i32.buffer !== this.memory.buffer) {
      this.i32 = new Int32Array(this.memory.buffer);
      this.f32 = new Float32Array(this.memory.buffer);
    }
    const ids = this.i32, i0 = bk.ids / 4, l0 = bk.lens / 4;
    ids.fill(0, i0, i0 + M);
    ids.fill(0, l0, l0 + b);
    for (let j = 0; j < toks.length; j++) {
      ids.set(toks[j], i0 + j * s);
      ids[l0 + j] = toks[j].length;
    }
    const e = this.emb;
    if (e.wordScale) f.embed_q16(bk.ids, e.word, e.wordScale, e.pos, e.type, e.gamma, e.beta, bk.x, M, s, H, eps);
    else f.embed(bk.ids, e.word, e.pos, e.type, e.gamma, e.beta, bk.x, M, s, H, eps);
    const product = (k, x, K, w, ws, out, bias) => {
      const tail = bias === void 0 ? [out] : [bias, out];
      if (!this.int16) return k.run(x, w, ...tail);
      f.quant_rows(x, M, K, qmaxA(K), bk.qa, bk.sa);
      k.run(bk.qa, w, bk.sa, ws, ...tail);
    };
    for (const L of this.layers) {
      product(bk.qkvK, bk.x, H, L.qkvW, L.qkvS, bk.qkv);
      f.split_heads(bk.qkv, L.qkvB, bk.q, bk.kt, bk.v, b, s, heads, d, 1 / Math.sqrt(d));
      bk.scoresK.run(bk.q, bk.kt, bk.p);
      f.softmax(bk.p, b, heads, s, bk.lens, bk.inv);
      bk.contextK.run(bk.p, bk.v, bk.ctx);
      f.merge_heads(bk.ctx, bk.inv, bk.merged, b, s, heads, d);
      product(bk.outK, bk.merged, H, L.outW, L.outS, bk.proj);
      f.add_ln(bk.proj, L.outB, bk.x, L.ln1G, L.ln1B, bk.x, M, H, eps);
      product(bk.upK, bk.x, H, L.inW, L.inS, bk.ffn, L.inB);
      product(bk.downK, bk.ffn, I, L.ffnW, L.ffnS, bk.proj);
      f.add_ln(bk.proj, L.ffnB, bk.x, L.ln2G, L.ln2B, bk.x, M, H, eps);
    }
    const cls = this.manifest.pooling === "cls";
    f.pool(bk.x, cls ? bk.ones : bk.lens, bk.pooled, toks.length, s, H, this.manifest.normalize ? 1 : 0);
  }
  /** Tunes the model's kernels for up to `budgetMs` (see `Webtune.idle`). */
  idle(budgetMs) {
    return this.webtune.idle(budgetMs);
  }
  /** The target this encoder runs on. */
  get target() {
    return this.gpu ? "webgpu" : "wasm";
  }
  close() {
    this.gpu?.destroy();
    this.webtune.close();
  }
  /**
   * `target: 'auto'`. The plan is asked with a WebGPU session's device key
   * (the GPU is what tells devices apart for this choice: the same CPU with
   * another GPU can flip it), at batch 1 and `autoLength` tokens, before
   * any weights are fetched. With no plan yet, both targets are loaded, each
   * encodes the same text (one untimed call, then 5 timed), both medians are
   * reported through that session, and the faster is kept: the next device
   * of this class gets the plan's answer and loads one target only.
   */
  static async loadAuto(opts) {
    const want = Math.max(3, Math.floor(opts.autoLength ?? 128));
    const server = (opts.server ?? globalThis.location?.origin ?? "").replace(/\/+$/, "");
    let probe;
    try {
      probe = await Webtune.open({ server, target: "webgpu", device: opts.device, tune: false, cache: false });
    } catch (e) {
      const wasm = await _SentenceEncoder.load({ ...opts, target: "wasm" });
      const seq = LENGTHS.find((l) => l >= Math.min(want, wasm.manifest.max_seq_length)) ?? wasm.manifest.max_seq_length;
      wasm.choice = { target: "wasm", how: "no-webgpu", reason: `WebGPU did not open: ${e instanceof Error ? e.message : e}`, seq_len: seq };
      return wasm;
    }
    const device = probe.device;
    const one = (target) => _SentenceEncoder.load({ ...opts, target, device: target === "webgpu" ? device : void 0 });
    try {
      const res = await fetch(`${server}/v1/models/${encodeURIComponent(opts.model)}`);
      if (!res.ok) return await one("wasm");
      const max = (await res.json()).max_seq_length;
      const seq = LENGTHS.find((l) => l >= Math.min(want, max)) ?? max;
      const seqLen = Math.min(seq, max);
      const plan = await fetchPlan(server, opts.model, probe.session.device_key, 1, seqLen).catch((e) => ({ target: null, reason: String(e) }));
      if (plan.target) {
        const enc = await one(plan.target);
        enc.choice = { target: plan.target, how: "plan", reason: plan.reason ?? "", seq_len: seq };
        return enc;
      }
      const gpu = await one("webgpu");
      let wasm;
      try {
        wasm = await one("wasm");
      } catch (e) {
        gpu.close();
        throw e;
      }
      let words = Array.from({ length: Math.max(1, want - 2) }, () => "word");
      while (words.length > 1 && gpu.tokenize(words.join(" ")).length > want) words = words.slice(1);
      const text = [words.join(" ")];
      const time = async (enc) => {
        await enc.encode(text);
        const ms2 = [];
        for (let i = 0; i < 5; i++) {
          const t = performance.now();
          await enc.encode(text);
          ms2.push(performance.now() - t);
        }
        return median(ms2);
      };
      const ms = { webgpu: await time(gpu), wasm: await time(wasm) };
      const faster = ms.wasm <= ms.webgpu ? "wasm" : "webgpu";
      const log = new LatencyLog(server, opts.model, max);
      for (const target of ["wasm", "webgpu"])
        await log.report({ session_id: probe.session.session_id, target, batch: 1, seq_len: seqLen, median_ms: ms[target], runs: 5 });
      const [keep, drop] = faster === "wasm" ? [wasm, gpu] : [gpu, wasm];
      drop.close();
      keep.choice = {
        target: faster,
        how: "measured",
        ms,
        seq_len: seq,
        reason: `no plan for this device class yet (${plan.reason ?? "none"}); measured wasm ${ms.wasm.toFixed(1)} ms, webgpu ${ms.webgpu.toFixed(1)} ms`
      };
      return keep;
    } finally {
      probe.close();
    }
  }
};

// src/webtune.ts
var MAX_OPEN_QUEUES = 4;
var BACKGROUND_SLICE_MS = 4;
var AUTO_SLICE_MAX_MS = 500;
var AUTO_SLICE_MIN_MS = 8;
var CROWD_CANDIDATES = 3;
var TRIAL_MIN_PAIRS = 6;
var TRIAL_VOUCHED_PAIRS = 2;
var TRIAL_MAX_PAIRS = 24;
var TRIAL_FLOOR = 0.02;
var TRIAL_REJECT_RATIO = 1.25;
var TRIAL_ABORT_RATIO = 1.6;
var TRIAL_TIMEOUT_MS = 2e4;
var TRIAL_SAMPLE_TICKS = 20;
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
  /** Wasm: the app's calls timed, and their ms in all (the kernel's weight in the tuning order). */
  appCalls = 0;
  appMs = 0;
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
  constructor(op, shape, impl, source, level, binding, newBinding) {
    super(op, shape, impl, source, level);
    this.binding = binding;
    this.newBinding = newBinding;
  }
  binding;
  newBinding;
  /**
   * The kernel the plan guard last accepted (at first the one loaded), kept
   * bound while the kernel in use is one the guard has not judged yet.
   */
  base = null;
  onBase = false;
  /** @internal Called when the guard puts the base back (the tuner's kernel in use follows). */
  onRevert = null;
  trialState = null;
  /** The binding a trial binds its candidate into: the previous kernel's after a swap (its scratch pages are reused, not grown again). */
  spare = null;
  /** Runs the kernel on arguments at these byte offsets of the app's memory, in ABI order. */
  run(...offsets) {
    this.calls++;
    if (this.onBase) {
      this.base.binding.call(offsets);
      return;
    }
    const tr = this.trialState;
    const t0 = performance.now();
    const turn = tr ? tr.turn++ % 4 : 0;
    if (tr && (turn === 1 || turn === 2)) {
      tr.binding.call(offsets);
      const ms2 = performance.now() - t0;
      tr.acc.cand += ms2;
      tr.acc.candCalls++;
      const ref = this.appCalls > 0 ? this.appMs / this.appCalls : 0;
      const slow = ref >= tr.minSampleMs && ms2 > TRIAL_ABORT_RATIO * ref;
      if (turn === 2 && slow && tr.slowFirst) {
        tr.cur.push(ref);
        tr.cand.push(tr.acc.cand / tr.acc.candCalls);
        tr.end(false);
      }
      tr.slowFirst = turn === 1 && slow;
      return;
    }
    this.binding.call(offsets);
    const ms = performance.now() - t0;
    this.appCalls++;
    this.appMs += ms;
    if (tr) {
      tr.acc.cur += ms;
      tr.acc.curCalls++;
      if (turn === 3) this.settleTrial(tr);
    }
  }
  /** @internal Whether a candidate is being tried in the app's calls (they feed it). */
  get trialPending() {
    return this.trialState !== null;
  }
  /**
   * @internal Tries `impl` in the app's own calls (every other one) against
   * the kernel in use, and adopts it only if it is faster there (see
   * TRIAL_MIN_PAIRS). `minSampleMs`: the least time of each side in a pair
   * (a few timer ticks). `vouched`: its family vouches for it (see
   * TRIAL_VOUCHED_PAIRS). Resolves with whether it was adopted and the two
   * sides' median call, ms.
   */
  async trial(impl, minSampleMs = 0, vouched = false) {
    const binding = this.spare ?? this.newBinding();
    this.spare = null;
    await binding.bind(impl);
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.trialState?.end(false), TRIAL_TIMEOUT_MS);
      const st = {
        impl,
        binding,
        turn: 0,
        minSampleMs,
        vouched,
        slowFirst: false,
        acc: { cur: 0, cand: 0, curCalls: 0, candCalls: 0 },
        cur: [],
        cand: [],
        end: (faster) => {
          clearTimeout(timer);
          this.trialState = null;
          const ok = faster && median(st.cand) < median(st.cur);
          if (ok) {
            this.replace(binding, impl);
          } else {
            this.spare = binding;
          }
          resolve({ ok, cur_ms: median(st.cur), cand_ms: median(st.cand), pairs: st.cur.length });
        }
      };
      this.trialState = st;
    });
  }
  /** At the end of an ABBA cycle: closes a pair when both sides ran long enough, then decides if the pairs allow it. */
  settleTrial(tr) {
    const a = tr.acc;
    if (a.cur < tr.minSampleMs || a.cand < tr.minSampleMs) return;
    tr.cur.push(a.cur / a.curCalls);
    tr.cand.push(a.cand / a.candCalls);
    tr.acc = { cur: 0, cand: 0, curCalls: 0, candCalls: 0 };
    const n = tr.cur.length;
    if (n === 2 && tr.cand.every((c, i) => c >= TRIAL_REJECT_RATIO * tr.cur[i])) return tr.end(false);
    const verdict = sequentialVerdict(tr.cur, tr.cand, TRIAL_FLOOR);
    if (verdict === "slower") return tr.end(false);
    if (n >= TRIAL_MIN_PAIRS && verdict === "faster") return tr.end(true);
    const promising = median(tr.cand.map((c, i) => c / tr.cur[i])) < 1 - TRIAL_FLOOR;
    if (tr.vouched && n >= TRIAL_VOUCHED_PAIRS && promising) return tr.end(true);
    if (n < TRIAL_MAX_PAIRS) return;
    const faster = pairedFaster(tr.cur, tr.cand, TRIAL_FLOOR) || signFaster(tr.cur, tr.cand, TRIAL_FLOOR);
    if (faster || !promising || n >= 2 * TRIAL_MAX_PAIRS) tr.end(faster);
  }
  /** @internal */
  async adopt(impl) {
    const binding = this.spare ?? this.newBinding();
    this.spare = null;
    await binding.bind(impl);
    this.replace(binding, impl);
  }
  /** Puts `binding` (holding `impl`) in use; the kernel it replaces stays as the base if the guard has not judged one yet. */
  replace(binding, impl) {
    if (this.base) this.spare = this.binding;
    else this.base = { impl: this.impl, binding: this.binding };
    this.binding = binding;
    this.impl = impl;
  }
  /** @internal */
  get unguarded() {
    return this.base !== null;
  }
  /** @internal Whether its tuning has nothing left to try (the plan guard judges only then). */
  get quiet() {
    return !this.tuner || this.tuner.drained;
  }
  /** @internal */
  useBase(on) {
    this.onBase = on && this.base !== null;
  }
  /** @internal The guard's verdict on the kernel in use (see plan-guard.ts). */
  settle(keep, ratio) {
    const base = this.base;
    if (!base) return;
    this.base = null;
    this.onBase = false;
    if (keep) {
      this.spare = base.binding;
      return;
    }
    const lost = this.impl;
    this.spare = this.binding;
    this.binding = base.binding;
    this.impl = base.impl;
    this.onRevert?.(base.impl, lost, ratio);
  }
};
var GpuKernel = class extends KernelHandle {
  /** @internal */
  constructor(op, shape, impl, source, level, device, bindGroupLayout, layouts) {
    super(op, shape, impl, source, level);
    this.device = device;
    this.bindGroupLayout = bindGroupLayout;
    this.scratch = new Scratch(device, layouts);
  }
  device;
  bindGroupLayout;
  scratch;
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
  /** Records the kernel into a compute pass: pipeline, bind group 0, dispatch;
   * for a kernel of several passes (split-K across workgroups), each pass in
   * order, with the kernel's own scratch buffer at group 1. */
  dispatch(pass, bindGroup) {
    this.calls++;
    encodePasses(pass, this.impl, bindGroup, this.scratch.for(this.impl));
  }
  /** The first pass's pipeline (a kernel of several passes: use `dispatch`). */
  get pipeline() {
    return this.impl.pipeline;
  }
  /** The first pass's workgroup counts. */
  get workgroups() {
    return this.impl.dispatch;
  }
  /** How many passes `dispatch` records (1, or 2 for split-K across workgroups). */
  get passes() {
    return this.impl.passes.length;
  }
  /** @internal */
  async adopt(impl) {
    this.impl = impl;
  }
};
async function json(res, what) {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text);
}
var Webtune = class _Webtune extends EventTarget {
  server;
  target;
  fingerprint;
  /**
   * `POST /v1/sessions`'s answer; when the server could not be reached
   * (`offline`), the same fields with an empty `session_id` and the keys
   * the bundle is searched with (empty when none is known).
   */
  session;
  /** Which source answers best-kernel lookups: the server, or the `bundle` option's bundle. */
  lookups;
  /** The bundle, when one is in use. */
  bundle;
  /** Why the server could not be reached, when it could not (then nothing is tuned); else null. */
  offline;
  /** Why the `bundle` option's bundle was refused (the server answers instead); else null. */
  bundleError;
  /** The ρ measurement behind `fingerprint.rho`, when `rho: 'measure'` ran it. */
  rho;
  /** Wasm: the memory kernels run on (shared when `threads.count > 1`). */
  memory;
  /** Wasm: threads a kernel may use, and why only one when that is so. */
  threads;
  pool;
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
  /**
   * The plan guard (plan-guard.ts): a model's Wasm calls that go through it
   * (`TextGenerator`'s runs) judge the kernels tuning put in, all of a call's
   * at once, and put the ones before back where the new plan is slower.
   * Each verdict is a `guard` event (`GuardDetail`).
   */
  guard = new PlanGuard((d) => this.dispatchEvent(new CustomEvent("guard", { detail: d })));
  pumping = false;
  closed = false;
  /** The tuning policy (the `policy` option). */
  policy;
  families = /* @__PURE__ */ new Map();
  /** When the last `idle()` call returned (performance.now()), for the automatic slice. */
  lastIdleEnd = 0;
  /** The session's kernel reports, sent in batches (one request of the server's rate for up to 16). */
  reporter;
  constructor(init) {
    super();
    this.opts = init.opts;
    this.server = init.server;
    this.target = init.opts.target;
    this.fingerprint = init.fingerprint;
    this.session = init.session;
    this.bundle = init.bundle;
    this.lookups = init.bundle ? "bundle" : "server";
    this.offline = init.offline;
    this.bundleError = init.bundleError;
    this.rho = init.rho;
    this.memory = init.memory;
    this.pool = init.pool;
    this.threads = init.threads;
    this.device = init.device;
    this.cache = init.cache;
    this.budgetMs = init.opts.budgetMs ?? 8;
    this.policy = init.opts.policy ?? "fast";
    this.timerResolutionMs = timerResolutionMs();
    this.reporter = new Reporter(init.server, init.session.session_id);
    if (init.device) {
      this.layouts = new GpuLayouts(init.device);
      this.backend = new GpuBackend(init.device, this.layouts, this.timerResolutionMs);
    } else {
      this.layouts = null;
      const shared = init.memory !== null && isShared(init.memory);
      this.backend = new WasmBackend(init.pool, shared);
      if (init.opts.worker && workersAvailable()) this.remote = new WorkerEvaluator(init.threads.count, shared, init.pool?.activity ?? null);
    }
  }
  /** @internal The Wasm thread pool kernels run on, when there is one. */
  get threadPool() {
    return this.pool;
  }
  /**
   * Fingerprints this browser and opens a session with the server; with
   * the `bundle` option, opens the bundle too, and opens without a session
   * when the server cannot be reached.
   */
  static async open(opts) {
    if (opts.target !== "wasm" && opts.target !== "webgpu") throw new Error(`target must be 'wasm' or 'webgpu', got ${opts.target}`);
    if (opts.policy !== void 0 && opts.policy !== "fast" && opts.policy !== "legacy") throw new Error(`policy must be 'fast' or 'legacy', got ${String(opts.policy)}`);
    const server = (opts.server ?? globalThis.location?.origin ?? "").replace(/\/+$/, "");
    let adapter = null;
    let device = null;
    if (opts.target === "webgpu") {
      if (!globalThis.navigator?.gpu) throw new Error("WebGPU is not available in this browser");
      adapter = opts.adapter ?? await navigator.gpu.requestAdapter();
      if (!adapter) throw new Error("no WebGPU adapter (navigator.gpu.requestAdapter() answered null): load with target 'wasm', or 'auto' to use WebGPU where it is");
      const wanted = ["timestamp-query", "subgroups", "shader-f16"];
      device = opts.device ?? await adapter.requestDevice({
        requiredFeatures: wanted.filter((f) => adapter.features.has(f))
      });
    }
    let bundle = null, bundleError = null;
    const openBundle = async () => {
      try {
        bundle = await KernelBundle.open(opts.bundle);
      } catch (e) {
        bundleError = e.message;
        console.warn(`webtune: ${bundleError}`);
      }
    };
    if (opts.bundle && (opts.bundleUse ?? "always") === "always") await openBundle();
    let rho = opts.rho;
    let rhoMeasurement = null;
    if (rho === "measure") {
      try {
        rhoMeasurement = opts.target === "wasm" ? await measureRho(server, wasmFeatures().relaxedSimd) : null;
      } catch (e) {
        if (!opts.bundle) throw e;
      }
      rho = rhoMeasurement?.rho || void 0;
    }
    const { pool, threads } = opts.target === "wasm" ? startThreads(opts) : { pool: null, threads: { count: 1, why: "the WebGPU target" } };
    const fp = await fingerprint(opts.target, adapter, rho);
    if (opts.target === "wasm" && !pool) fp.threads = false;
    let session, offline = null;
    const unreachable = await openSession(server, fp);
    if (typeof unreachable !== "string") {
      session = unreachable;
      rememberKeys(server, opts.target, fp, session);
    } else if (opts.bundle) {
      offline = unreachable;
      if (!bundle && !bundleError) await openBundle();
      if (!bundle) throw new Error(`webtune: the server cannot be reached (${offline}) and the bundle was refused: ${bundleError}`);
      const keys = opts.deviceKey ? keysOf(opts.deviceKey) : recallKeys(server, opts.target, fp);
      if (opts.deviceKey && !keys) throw new Error(`deviceKey ${opts.deviceKey} is not a device key (four /-separated parts)`);
      session = { session_id: "", device_key: keys?.device_key ?? "", arch_key: keys?.arch_key ?? "", vendor_key: keys?.vendor_key ?? "", rho: fp.rho ?? "" };
      console.info(`webtune: the server cannot be reached (${offline}); kernels come from the bundle, nothing is tuned`);
    } else {
      throw new Error(`open session: ${unreachable}`);
    }
    const cache = await KernelCache.open(opts.cache ?? true);
    const memory = opts.target === "wasm" ? opts.memory ?? newMemory(1, pool !== null) : null;
    return new _Webtune({
      opts,
      server,
      fingerprint: fp,
      session,
      memory,
      device,
      cache,
      rho: rhoMeasurement,
      pool,
      threads,
      bundle,
      offline,
      bundleError
    });
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
    if (parseOp(op).dtype === "f16") {
      if (!this.device) throw new Error(`${op}: f16 ops run on WebGPU only; use the f32 op for Wasm`);
      if (!this.device.features.has("shader-f16")) {
        throw new Error(`${op}: this device has no shader-f16 feature; use the f32 op (${op.replace(/\+f16$/, "")})`);
      }
    }
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
    let crowd = false;
    if (cached2) {
      ({ meta, bytes } = cached2);
      source = "cache";
      level = null;
    } else {
      const keys = this.session.device_key ? keysOf(this.session.device_key) : null;
      const maxThreads = this.pool ? maxThreadsOf(this.session.device_key) : 1;
      const fromBundle = this.bundle?.best(keys, op, shape, this.serverTarget, maxThreads) ?? null;
      if (fromBundle) {
        meta = fromBundle.meta;
        bytes = await this.bundle.kernel(meta.sha256, this.serverTarget);
        source = "bundle";
        level = fromBundle.level;
      } else if (this.offline) {
        throw new Error(`${op} ${shape.join(",")} ${this.serverTarget}: the server cannot be reached (${this.offline}) and the bundle does not cover it`);
      } else {
        const q = new URLSearchParams({ device_key: this.session.device_key, op, shape: shape.join(","), target: this.serverTarget });
        const best = await json(await fetchRetrying(`${this.server}/v1/kernels/best?${q}`), `best ${op} ${shape}`);
        meta = best.meta;
        bytes = await this.fetchKernel(best.url, this.serverTarget);
        source = "server";
        level = best.level;
        crowd = best.level === "device" && (best.source === "elected" || best.source === "provisional");
      }
      await this.cache.put({ key: cacheKey2, sha256: meta.sha256, meta, bytes, tuned: false, median_us: 0, saved_at: Date.now() });
    }
    let handle;
    if (this.device) {
      const impl = await this.backend.load(bytes, meta);
      handle = new GpuKernel(op, shape, impl, source, level, this.device, this.layouts.bindGroupLayout(meta.args.length), this.layouts);
    } else {
      const impl = await this.backend.load(bytes, meta);
      const binding = new WasmKernelBinding(this.memory, this.pool);
      await binding.bind(impl);
      handle = new WasmKernel(op, shape, impl, source, level, binding, () => new WasmKernelBinding(this.memory, this.pool));
    }
    const tune = (this.opts.tune ?? true) && !this.offline && !(cached2?.tuned && !this.opts.retune);
    if (tune) {
      const impl = handle.impl;
      const tuner = new KernelTuner(this.host(handle), this.backend, op, shape, impl);
      tuner.maxCandidates = Math.max(1, this.opts.maxCandidates ?? Infinity);
      if (crowd && this.policy === "fast") tuner.maxCandidates = Math.min(tuner.maxCandidates, CROWD_CANDIDATES);
      tuner.policy = this.policy;
      if (this.remote) tuner.remote = this.remote;
      if (this.policy === "fast") {
        const fk = Family.key(op, shape, this.serverTarget);
        let fam = this.families.get(fk);
        if (!fam) this.families.set(fk, fam = new Family());
        tuner.join(fam);
      }
      handle.tuner = tuner;
      if (handle instanceof WasmKernel) {
        handle.onRevert = (impl2, lost, ratio) => {
          tuner.reverted(impl2, lost, ratio);
          void this.cache.put({ key: this.cacheKey(op, shape), sha256: impl2.sha256, meta: impl2.meta, bytes: impl2.bytes, tuned: false, median_us: 0, saved_at: Date.now() });
        };
      }
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
        if (handle instanceof WasmKernel) await wt.guard.released(handle);
        const inApp = handle instanceof WasmKernel && (wt.opts.trials === "all" || wt.pool && wt.policy === "fast" && threadsOf(impl.meta));
        let trial;
        if (inApp) {
          const vouched = wt.opts.trials !== "all" && t.vouched(impl);
          const r = await handle.trial(impl, TRIAL_SAMPLE_TICKS * wt.timerResolutionMs, vouched);
          trial = { ok: r.ok, cur_ms: r.cur_ms, cand_ms: r.cand_ms };
          const detail2 = {
            op: t.op,
            shape: t.shape,
            target: wt.target,
            from: previous.sha256,
            to: impl.sha256,
            adopted: r.ok,
            bench_speedup: m.current_us / m.median_us,
            app_speedup: r.cur_ms / r.cand_ms,
            cur_ms: r.cur_ms,
            cand_ms: r.cand_ms,
            pairs: r.pairs,
            vouched
          };
          wt.dispatchEvent(new CustomEvent("trial", { detail: detail2 }));
          if (!r.ok) {
            const threads = threadsOf(impl.meta) ? ` (${threadsOf(impl.meta)} threads)` : "";
            t.note(`${impl.sha256.slice(0, 12)}${threads} was faster on the bench (${detail2.bench_speedup.toFixed(3)}x) but not in the app's calls (${r.cand_ms.toFixed(3)} ms against ${r.cur_ms.toFixed(3)} ms over ${r.pairs} pairs): not adopted`);
            return trial;
          }
        } else {
          await handle.adopt(impl);
        }
        handle.swaps++;
        const detail = {
          op: t.op,
          shape: t.shape,
          target: wt.target,
          from: previous.sha256,
          to: impl.sha256,
          ...trial ? { from_us: trial.cur_ms * 1e3, to_us: trial.cand_ms * 1e3, speedup: trial.cur_ms / trial.cand_ms } : { from_us: m.current_us, to_us: m.median_us, speedup: m.current_us / m.median_us },
          index: m.index,
          total: m.total,
          at: performance.now(),
          threads: impl.meta.threads ?? 1
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
        return trial ?? true;
      },
      measured(t, m) {
        const detail = { ...m, op: t.op, shape: t.shape, target: wt.target };
        wt.dispatchEvent(new CustomEvent("measure", { detail }));
      },
      submit: (body) => this.reporter.submit(body),
      unjudged: () => handle instanceof WasmKernel && this.guard.judges(handle),
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
   * A kernel's weight in the app: its calls × the time of one call (Wasm:
   * the app's own calls, timed; else the tuner's last measurement of the
   * kernel in use; else its flops at 10 GFLOP/s).
   */
  weight(h) {
    const t = h.tuner;
    const perCall = h.appCalls > 0 ? h.appMs / h.appCalls : t && t.currentUs > 0 ? t.currentUs / 1e3 : flops(h.op, h.shape) * 1e-7;
    return (h.calls + 1) * Math.max(perCall, 1e-6);
  }
  /** Gives every tuner its share of the app's kernel time (the fast policy's order and stop rule weigh by it). */
  updateShares() {
    let sum = 0;
    const w = this.handles.map((h) => this.weight(h));
    for (const x of w) sum += x;
    this.handles.forEach((h, i) => {
      if (h.tuner) h.tuner.share = sum > 0 ? w[i] / sum : 1;
    });
  }
  /**
   * The tuners with work left, in the order `idle()` offers them its time.
   * A candidate part-way through its evaluation finishes first. Fast
   * policy: then kernels with a sibling's threaded winner still to try
   * (`transferPending`), then kernels whose family has no heavier member
   * still tuning (its winner becomes their first candidate), and among
   * those the kernel
   * whose next candidate is expected to save the most of the app's time
   * (its share of the app's time × its expected gain), so the heaviest
   * kernels are tuned first. Legacy: round robin
   * over the ops (the tuner that has taken the fewest candidates goes next;
   * ties to the op with the biggest share of the app's time).
   */
  tunerOrder() {
    const live = [];
    const fast = this.policy === "fast";
    if (fast) this.updateShares();
    const open = this.streamingQueues();
    for (const h of this.handles) {
      const t = h.tuner;
      if (!t || !(t.phase === "waiting" || t.phase === "opening" || t.phase === "running")) continue;
      if (t.phase === "waiting" && open >= MAX_OPEN_QUEUES) continue;
      live.push({ t, w: fast ? t.share * t.expectedGain : flops(h.op, h.shape) * (h.calls + 1) });
    }
    if (fast) {
      live.sort((a, b) => Number(b.t.evaluating) - Number(a.t.evaluating) || Number(b.t.transferPending) - Number(a.t.transferPending) || Number(a.t.behindSibling) - Number(b.t.behindSibling) || b.w - a.w);
    } else live.sort((a, b) => Number(b.t.evaluating) - Number(a.t.evaluating) || a.t.taken - b.t.taken || b.w - a.w);
    return live.map((x) => x.t);
  }
  /**
   * @internal The kernels whose candidate is being tried in the app's own
   * calls (`trials`): a model with no calls of its own to make (between
   * generations) runs steps that call them, so that the trials end.
   */
  pendingTrials() {
    return this.handles.filter((h) => h instanceof WasmKernel && h.trialPending).map((h) => ({ op: h.op, shape: h.shape }));
  }
  /** Candidate queues streaming now (opening, or being read). */
  streamingQueues() {
    let n = 0;
    for (const h of this.handles) if (h.tuner?.streaming) n++;
    return n;
  }
  /** Whether every kernel is tuned and reported (or not to be tuned). */
  get done() {
    return this.handles.every((h) => !h.tuner || h.tuner.phase === "done");
  }
  /**
   * How far tuning is: kernels tuned out of all, the share of the app's
   * kernel time still expected to be saved, candidates evaluated and timings
   * taken. A `tuned` event (detail: `status()`) is dispatched when every
   * kernel is tuned.
   */
  get progress() {
    this.updateShares();
    let tuned = 0, expectedGain = 0, evaluated = 0, timings = 0;
    for (const h of this.handles) {
      const t = h.tuner;
      if (!t || t.phase === "done") tuned++;
      if (!t) continue;
      expectedGain += t.share * t.expectedGain;
      evaluated += t.evaluated;
      timings += t.timings;
    }
    return { tuned, total: this.handles.length, expectedGain, evaluated, timings };
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
   * One slice of tuning, at most `budgetMs` long. Call it between
   * inferences; it returns at once when nothing is ready (a candidate still
   * downloading or compiling) and when everything is tuned. Without
   * `budgetMs`: the `budgetMs` option when the app set one; else a slice as
   * long as the app worked since the previous call returned, at least 8 ms
   * and at most AUTO_SLICE_MAX_MS (500 ms), so that a loop of
   * `work(); await idle();` spends about half its time tuning until every
   * kernel is tuned (`progress`, the `tuned` event), then none. A single
   * kernel call longer than the slice still runs whole.
   */
  async idle(budgetMs) {
    if (this.remote) {
      this.startBackground();
      return { worked: false, done: this.done };
    }
    await nextTask();
    const r = await this.slice(budgetMs ?? this.autoSlice());
    this.lastIdleEnd = performance.now();
    return r;
  }
  /** The slice of an `idle()` call without a budget (see `idle`). */
  autoSlice() {
    if (this.opts.budgetMs !== void 0) return this.budgetMs;
    const worked = this.lastIdleEnd > 0 ? performance.now() - this.lastIdleEnd : AUTO_SLICE_MIN_MS;
    return Math.min(AUTO_SLICE_MAX_MS, Math.max(AUTO_SLICE_MIN_MS, worked));
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
          if (t.phase === "waiting" && this.streamingQueues() >= MAX_OPEN_QUEUES) continue;
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
    if (this.handles.every((h) => !h.tuner || h.tuner.phase === "reporting" || h.tuner.phase === "done")) this.reporter.flush();
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
  /**
   * Stops tuning; open queues are closed and no kernel is reported that was
   * not finished (the reports of finished ones waiting to go are sent).
   */
  close() {
    this.closed = true;
    this.reporter.flush();
    this.remote?.close();
    this.pool?.close();
    this.stopIdleLoop();
    for (const h of this.handles) h.tuner?.cancel();
  }
};
async function openSession(server, fp) {
  let res;
  try {
    res = await fetchRetrying(`${server}/v1/sessions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ fingerprint: fp })
    });
  } catch (e) {
    return e.message || String(e);
  }
  if (res.status === 502 || res.status === 503 || res.status === 504) return `HTTP ${res.status}`;
  return json(res, "open session");
}
function keysEntry(server, target) {
  return `webtune.keys|${server}|${target}`;
}
function fingerprintText(fp) {
  const { rho: _rho, ...rest } = fp;
  return JSON.stringify(rest);
}
function rememberKeys(server, target, fp, s) {
  try {
    const keys = { device_key: s.device_key, arch_key: s.arch_key, vendor_key: s.vendor_key, rho: s.rho };
    globalThis.localStorage?.setItem(keysEntry(server, target), JSON.stringify({ fingerprint: fingerprintText(fp), keys }));
  } catch {
  }
}
function recallKeys(server, target, fp) {
  try {
    const raw = globalThis.localStorage?.getItem(keysEntry(server, target));
    if (!raw) return null;
    const saved = JSON.parse(raw);
    return saved.fingerprint === fingerprintText(fp) ? saved.keys : null;
  } catch {
    return null;
  }
}
function startThreads(opts) {
  const want = threadsWanted(opts.threads);
  let why = want.why;
  if (!why && opts.memory && !isShared(opts.memory)) why = "the app's memory is not shared (make it with { shared: true, maximum })";
  if (why) {
    if (want.want > 1) console.info(`webtune: Wasm kernels run on one thread: ${why}`);
    return { pool: null, threads: { count: 1, why } };
  }
  return { pool: new ThreadPool(want.count), threads: { count: want.count } };
}
function nextTask() {
  return new Promise((resolve) => {
    const c = new MessageChannel();
    c.port1.onmessage = () => {
      c.port1.close();
      resolve();
    };
    c.port2.postMessage(null);
  });
}

// node_modules/@huggingface/jinja/dist/index.js
var __defProp = Object.defineProperty;
var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
var __publicField = (obj, key, value) => {
  __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);
  return value;
};
var TOKEN_TYPES = Object.freeze({
  Text: "Text",
  // The text between Jinja statements or expressions
  NumericLiteral: "NumericLiteral",
  // e.g., 123, 1.0
  StringLiteral: "StringLiteral",
  // 'string'
  Identifier: "Identifier",
  // Variables, functions, statements, booleans, etc.
  Equals: "Equals",
  // =
  OpenParen: "OpenParen",
  // (
  CloseParen: "CloseParen",
  // )
  OpenStatement: "OpenStatement",
  // {%
  CloseStatement: "CloseStatement",
  // %}
  OpenExpression: "OpenExpression",
  // {{
  CloseExpression: "CloseExpression",
  // }}
  OpenSquareBracket: "OpenSquareBracket",
  // [
  CloseSquareBracket: "CloseSquareBracket",
  // ]
  OpenCurlyBracket: "OpenCurlyBracket",
  // {
  CloseCurlyBracket: "CloseCurlyBracket",
  // }
  Comma: "Comma",
  // ,
  Dot: "Dot",
  // .
  Colon: "Colon",
  // :
  Pipe: "Pipe",
  // |
  CallOperator: "CallOperator",
  // ()
  AdditiveBinaryOperator: "AdditiveBinaryOperator",
  // + - ~
  MultiplicativeBinaryOperator: "MultiplicativeBinaryOperator",
  // * / // %
  ExponentiationBinaryOperator: "ExponentiationBinaryOperator",
  // **
  ComparisonBinaryOperator: "ComparisonBinaryOperator",
  // < > <= >= == !=
  UnaryOperator: "UnaryOperator",
  // ! - +
  Comment: "Comment"
  // {# ... #}
});
var Token = class {
  /**
   * Constructs a new Token.
   * @param {string} value The raw value as seen inside the source code.
   * @param {TokenType} type The type of token.
   */
  constructor(value, type) {
    this.value = value;
    this.type = type;
  }
};
function isWord(char) {
  return /\w/.test(char);
}
function isInteger(char) {
  return /[0-9]/.test(char);
}
function isWhitespace(char) {
  return /\s/.test(char);
}
var ORDERED_MAPPING_TABLE = [
  // Control sequences
  ["{%", TOKEN_TYPES.OpenStatement],
  ["%}", TOKEN_TYPES.CloseStatement],
  ["{{", TOKEN_TYPES.OpenExpression],
  ["}}", TOKEN_TYPES.CloseExpression],
  // Single character tokens
  ["(", TOKEN_TYPES.OpenParen],
  [")", TOKEN_TYPES.CloseParen],
  ["{", TOKEN_TYPES.OpenCurlyBracket],
  ["}", TOKEN_TYPES.CloseCurlyBracket],
  ["[", TOKEN_TYPES.OpenSquareBracket],
  ["]", TOKEN_TYPES.CloseSquareBracket],
  [",", TOKEN_TYPES.Comma],
  [".", TOKEN_TYPES.Dot],
  [":", TOKEN_TYPES.Colon],
  ["|", TOKEN_TYPES.Pipe],
  // Comparison operators
  ["<=", TOKEN_TYPES.ComparisonBinaryOperator],
  [">=", TOKEN_TYPES.ComparisonBinaryOperator],
  ["==", TOKEN_TYPES.ComparisonBinaryOperator],
  ["!=", TOKEN_TYPES.ComparisonBinaryOperator],
  ["<", TOKEN_TYPES.ComparisonBinaryOperator],
  [">", TOKEN_TYPES.ComparisonBinaryOperator],
  // Arithmetic operators
  ["+", TOKEN_TYPES.AdditiveBinaryOperator],
  ["-", TOKEN_TYPES.AdditiveBinaryOperator],
  ["~", TOKEN_TYPES.AdditiveBinaryOperator],
  ["**", TOKEN_TYPES.ExponentiationBinaryOperator],
  // NOTE: must come before "*" so that "**" is matched first
  ["*", TOKEN_TYPES.MultiplicativeBinaryOperator],
  ["//", TOKEN_TYPES.MultiplicativeBinaryOperator],
  // NOTE: must come before "/" so that "//" is matched first
  ["/", TOKEN_TYPES.MultiplicativeBinaryOperator],
  ["%", TOKEN_TYPES.MultiplicativeBinaryOperator],
  // Assignment operator
  ["=", TOKEN_TYPES.Equals]
];
var ESCAPE_CHARACTERS = /* @__PURE__ */ new Map([
  ["n", "\n"],
  // New line
  ["t", "	"],
  // Horizontal tab
  ["r", "\r"],
  // Carriage return
  ["b", "\b"],
  // Backspace
  ["f", "\f"],
  // Form feed
  ["v", "\v"],
  // Vertical tab
  ["'", "'"],
  // Single quote
  ['"', '"'],
  // Double quote
  ["\\", "\\"]
  // Backslash
]);
function preprocess(template, options = {}) {
  if (template.endsWith("\n")) {
    template = template.slice(0, -1);
  }
  if (options.lstrip_blocks) {
    template = template.replace(/^[ \t]*({[#%-])/gm, "$1");
  }
  if (options.trim_blocks) {
    template = template.replace(/([#%-]})\n/g, "$1");
  }
  return template.replace(
    /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs,
    (_, before, lstrip, rstrip, after) => (lstrip ? "" : before) + (rstrip ? "" : after)
  );
}
function tokenize(source, options = {}) {
  const tokens = [];
  const src = preprocess(source, options);
  let cursorPosition = 0;
  let curlyBracketDepth = 0;
  const consumeWhile = (predicate) => {
    let str = "";
    while (predicate(src[cursorPosition])) {
      if (src[cursorPosition] === "\\") {
        ++cursorPosition;
        if (cursorPosition >= src.length) {
          throw new SyntaxError("Unexpected end of input");
        }
        const escaped = src[cursorPosition++];
        if (escaped === "x" || escaped === "u") {
          const length = escaped === "x" ? 2 : 4;
          const hex = src.slice(cursorPosition, cursorPosition + length);
          if (hex.length !== length || /[^0-9a-f]/i.test(hex)) {
            throw new SyntaxError(`Invalid hexadecimal escape sequence: \\${escaped}${hex}`);
          }
          str += String.fromCharCode(parseInt(hex, 16));
          cursorPosition += length;
          continue;
        }
        const unescaped = ESCAPE_CHARACTERS.get(escaped);
        if (unescaped === void 0) {
          throw new SyntaxError(`Unexpected escaped character: ${escaped}`);
        }
        str += unescaped;
        continue;
      }
      str += src[cursorPosition++];
      if (cursorPosition >= src.length) {
        throw new SyntaxError("Unexpected end of input");
      }
    }
    return str;
  };
  const stripTrailingWhitespace = () => {
    const lastToken = tokens.at(-1);
    if (lastToken && lastToken.type === TOKEN_TYPES.Text) {
      lastToken.value = lastToken.value.trimEnd();
      if (lastToken.value === "") {
        tokens.pop();
      }
    }
  };
  const skipLeadingWhitespace = () => {
    while (cursorPosition < src.length && isWhitespace(src[cursorPosition])) {
      ++cursorPosition;
    }
  };
  main:
    while (cursorPosition < src.length) {
      const lastTokenType = tokens.at(-1)?.type;
      if (lastTokenType === void 0 || lastTokenType === TOKEN_TYPES.CloseStatement || lastTokenType === TOKEN_TYPES.CloseExpression || lastTokenType === TOKEN_TYPES.Comment) {
        let text = "";
        while (cursorPosition < src.length && // Keep going until we hit the next Jinja statement or expression
        !(src[cursorPosition] === "{" && (src[cursorPosition + 1] === "%" || src[cursorPosition + 1] === "{" || src[cursorPosition + 1] === "#"))) {
          text += src[cursorPosition++];
        }
        if (text.length > 0) {
          tokens.push(new Token(text, TOKEN_TYPES.Text));
          continue;
        }
      }
      if (src[cursorPosition] === "{" && src[cursorPosition + 1] === "#") {
        cursorPosition += 2;
        const stripBefore = src[cursorPosition] === "-";
        if (stripBefore) {
          ++cursorPosition;
        }
        let comment = "";
        while (src[cursorPosition] !== "#" || src[cursorPosition + 1] !== "}") {
          if (cursorPosition + 2 >= src.length) {
            throw new SyntaxError("Missing end of comment tag");
          }
          comment += src[cursorPosition++];
        }
        const stripAfter = comment.endsWith("-");
        if (stripAfter) {
          comment = comment.slice(0, -1);
        }
        if (stripBefore) {
          stripTrailingWhitespace();
        }
        tokens.push(new Token(comment, TOKEN_TYPES.Comment));
        cursorPosition += 2;
        if (stripAfter) {
          skipLeadingWhitespace();
        }
        continue;
      }
      if (src.slice(cursorPosition, cursorPosition + 3) === "{%-") {
        stripTrailingWhitespace();
        tokens.push(new Token("{%", TOKEN_TYPES.OpenStatement));
        cursorPosition += 3;
        continue;
      }
      if (src.slice(cursorPosition, cursorPosition + 3) === "{{-") {
        stripTrailingWhitespace();
        tokens.push(new Token("{{", TOKEN_TYPES.OpenExpression));
        curlyBracketDepth = 0;
        cursorPosition += 3;
        continue;
      }
      consumeWhile(isWhitespace);
      if (src.slice(cursorPosition, cursorPosition + 3) === "-%}") {
        tokens.push(new Token("%}", TOKEN_TYPES.CloseStatement));
        cursorPosition += 3;
        skipLeadingWhitespace();
        continue;
      }
      if (src.slice(cursorPosition, cursorPosition + 3) === "-}}") {
        tokens.push(new Token("}}", TOKEN_TYPES.CloseExpression));
        cursorPosition += 3;
        skipLeadingWhitespace();
        continue;
      }
      const char = src[cursorPosition];
      if (char === "-" || char === "+") {
        const lastTokenType2 = tokens.at(-1)?.type;
        if (lastTokenType2 === TOKEN_TYPES.Text || lastTokenType2 === void 0) {
          throw new SyntaxError(`Unexpected character: ${char}`);
        }
        switch (lastTokenType2) {
          case TOKEN_TYPES.Identifier:
          case TOKEN_TYPES.NumericLiteral:
          case TOKEN_TYPES.StringLiteral:
          case TOKEN_TYPES.CloseParen:
          case TOKEN_TYPES.CloseSquareBracket:
            break;
          default: {
            ++cursorPosition;
            let num = consumeWhile(isInteger);
            if (num.length > 0 && src[cursorPosition] === "." && isInteger(src[cursorPosition + 1])) {
              ++cursorPosition;
              const frac = consumeWhile(isInteger);
              num = `${num}.${frac}`;
            }
            tokens.push(
              new Token(`${char}${num}`, num.length > 0 ? TOKEN_TYPES.NumericLiteral : TOKEN_TYPES.UnaryOperator)
            );
            continue;
          }
        }
      }
      for (const [seq, type] of ORDERED_MAPPING_TABLE) {
        if (seq === "}}" && curlyBracketDepth > 0) {
          continue;
        }
        const slice2 = src.slice(cursorPosition, cursorPosition + seq.length);
        if (slice2 === seq) {
          tokens.push(new Token(seq, type));
          if (type === TOKEN_TYPES.OpenExpression) {
            curlyBracketDepth = 0;
          } else if (type === TOKEN_TYPES.OpenCurlyBracket) {
            ++curlyBracketDepth;
          } else if (type === TOKEN_TYPES.CloseCurlyBracket) {
            --curlyBracketDepth;
          }
          cursorPosition += seq.length;
          continue main;
        }
      }
      if (char === "'" || char === '"') {
        ++cursorPosition;
        const str = consumeWhile((c) => c !== char);
        tokens.push(new Token(str, TOKEN_TYPES.StringLiteral));
        ++cursorPosition;
        continue;
      }
      if (isInteger(char)) {
        let num = consumeWhile(isInteger);
        if (tokens.at(-1)?.type !== TOKEN_TYPES.Dot && src[cursorPosition] === "." && isInteger(src[cursorPosition + 1])) {
          ++cursorPosition;
          const frac = consumeWhile(isInteger);
          num = `${num}.${frac}`;
        }
        tokens.push(new Token(num, TOKEN_TYPES.NumericLiteral));
        continue;
      }
      if (isWord(char)) {
        const word = consumeWhile(isWord);
        tokens.push(new Token(word, TOKEN_TYPES.Identifier));
        continue;
      }
      throw new SyntaxError(`Unexpected character: ${char}`);
    }
  return tokens;
}
var Statement = class {
  type = "Statement";
};
var Program = class extends Statement {
  constructor(body) {
    super();
    this.body = body;
  }
  type = "Program";
};
var If = class extends Statement {
  constructor(test, body, alternate) {
    super();
    this.test = test;
    this.body = body;
    this.alternate = alternate;
  }
  type = "If";
};
var For = class extends Statement {
  constructor(loopvar, iterable, body, defaultBlock) {
    super();
    this.loopvar = loopvar;
    this.iterable = iterable;
    this.body = body;
    this.defaultBlock = defaultBlock;
  }
  type = "For";
};
var Break = class extends Statement {
  type = "Break";
};
var Continue = class extends Statement {
  type = "Continue";
};
var SetStatement = class extends Statement {
  constructor(assignee, value, body) {
    super();
    this.assignee = assignee;
    this.value = value;
    this.body = body;
  }
  type = "Set";
};
var Macro = class extends Statement {
  constructor(name, args, body) {
    super();
    this.name = name;
    this.args = args;
    this.body = body;
  }
  type = "Macro";
};
var Comment = class extends Statement {
  constructor(value) {
    super();
    this.value = value;
  }
  type = "Comment";
};
var Expression = class extends Statement {
  type = "Expression";
};
var MemberExpression = class extends Expression {
  constructor(object, property, computed) {
    super();
    this.object = object;
    this.property = property;
    this.computed = computed;
  }
  type = "MemberExpression";
};
var CallExpression = class extends Expression {
  constructor(callee, args) {
    super();
    this.callee = callee;
    this.args = args;
  }
  type = "CallExpression";
};
var Identifier = class extends Expression {
  /**
   * @param {string} value The name of the identifier
   */
  constructor(value) {
    super();
    this.value = value;
  }
  type = "Identifier";
};
var Literal = class extends Expression {
  constructor(value) {
    super();
    this.value = value;
  }
  type = "Literal";
};
var IntegerLiteral = class extends Literal {
  type = "IntegerLiteral";
};
var FloatLiteral = class extends Literal {
  type = "FloatLiteral";
};
var StringLiteral = class extends Literal {
  type = "StringLiteral";
};
var ArrayLiteral = class extends Literal {
  type = "ArrayLiteral";
};
var TupleLiteral = class extends Literal {
  type = "TupleLiteral";
};
var ObjectLiteral = class extends Literal {
  type = "ObjectLiteral";
};
var BinaryExpression = class extends Expression {
  constructor(operator, left, right) {
    super();
    this.operator = operator;
    this.left = left;
    this.right = right;
  }
  type = "BinaryExpression";
};
var FilterExpression = class extends Expression {
  constructor(operand, filter) {
    super();
    this.operand = operand;
    this.filter = filter;
  }
  type = "FilterExpression";
};
var FilterStatement = class extends Statement {
  constructor(filter, body) {
    super();
    this.filter = filter;
    this.body = body;
  }
  type = "FilterStatement";
};
var SelectExpression = class extends Expression {
  constructor(lhs, test) {
    super();
    this.lhs = lhs;
    this.test = test;
  }
  type = "SelectExpression";
};
var TestExpression = class extends Expression {
  constructor(operand, negate, test) {
    super();
    this.operand = operand;
    this.negate = negate;
    this.test = test;
  }
  type = "TestExpression";
};
var UnaryExpression = class extends Expression {
  constructor(operator, argument) {
    super();
    this.operator = operator;
    this.argument = argument;
  }
  type = "UnaryExpression";
};
var SliceExpression = class extends Expression {
  constructor(start = void 0, stop = void 0, step = void 0) {
    super();
    this.start = start;
    this.stop = stop;
    this.step = step;
  }
  type = "SliceExpression";
};
var KeywordArgumentExpression = class extends Expression {
  constructor(key, value) {
    super();
    this.key = key;
    this.value = value;
  }
  type = "KeywordArgumentExpression";
};
var SpreadExpression = class extends Expression {
  constructor(argument) {
    super();
    this.argument = argument;
  }
  type = "SpreadExpression";
};
var KeywordSpreadExpression = class extends Expression {
  constructor(argument) {
    super();
    this.argument = argument;
  }
  type = "KeywordSpreadExpression";
};
var CallStatement = class extends Statement {
  constructor(call, callerArgs, body) {
    super();
    this.call = call;
    this.callerArgs = callerArgs;
    this.body = body;
  }
  type = "CallStatement";
};
var Ternary = class extends Expression {
  constructor(condition, trueExpr, falseExpr) {
    super();
    this.condition = condition;
    this.trueExpr = trueExpr;
    this.falseExpr = falseExpr;
  }
  type = "Ternary";
};
function parse2(tokens) {
  const program = new Program([]);
  let current = 0;
  function expect(type, error) {
    const prev = tokens[current++];
    if (!prev || prev.type !== type) {
      throw new Error(`Parser Error: ${error}. ${prev.type} !== ${type}.`);
    }
    return prev;
  }
  function expectIdentifier(name) {
    if (!isIdentifier(name)) {
      throw new SyntaxError(`Expected ${name}`);
    }
    ++current;
  }
  function parseAny() {
    switch (tokens[current].type) {
      case TOKEN_TYPES.Comment:
        return new Comment(tokens[current++].value);
      case TOKEN_TYPES.Text:
        return parseText();
      case TOKEN_TYPES.OpenStatement:
        return parseJinjaStatement();
      case TOKEN_TYPES.OpenExpression:
        return parseJinjaExpression();
      default:
        throw new SyntaxError(`Unexpected token type: ${tokens[current].type}`);
    }
  }
  function is(...types) {
    return current + types.length <= tokens.length && types.every((type, i) => type === tokens[current + i].type);
  }
  function isStatement(...names) {
    return tokens[current]?.type === TOKEN_TYPES.OpenStatement && tokens[current + 1]?.type === TOKEN_TYPES.Identifier && names.includes(tokens[current + 1]?.value);
  }
  function isIdentifier(...names) {
    return current + names.length <= tokens.length && names.every((name, i) => tokens[current + i].type === "Identifier" && name === tokens[current + i].value);
  }
  function parseText() {
    return new StringLiteral(expect(TOKEN_TYPES.Text, "Expected text token").value);
  }
  function parseJinjaStatement() {
    expect(TOKEN_TYPES.OpenStatement, "Expected opening statement token");
    if (tokens[current].type !== TOKEN_TYPES.Identifier) {
      throw new SyntaxError(`Unknown statement, got ${tokens[current].type}`);
    }
    const name = tokens[current].value;
    let result;
    switch (name) {
      case "set":
        ++current;
        result = parseSetStatement();
        break;
      case "if":
        ++current;
        result = parseIfStatement();
        expect(TOKEN_TYPES.OpenStatement, "Expected {% token");
        expectIdentifier("endif");
        expect(TOKEN_TYPES.CloseStatement, "Expected %} token");
        break;
      case "macro":
        ++current;
        result = parseMacroStatement();
        expect(TOKEN_TYPES.OpenStatement, "Expected {% token");
        expectIdentifier("endmacro");
        expect(TOKEN_TYPES.CloseStatement, "Expected %} token");
        break;
      case "for":
        ++current;
        result = parseForStatement();
        expect(TOKEN_TYPES.OpenStatement, "Expected {% token");
        expectIdentifier("endfor");
        expect(TOKEN_TYPES.CloseStatement, "Expected %} token");
        break;
      case "call": {
        ++current;
        let callerArgs = null;
        if (is(TOKEN_TYPES.OpenParen)) {
          callerArgs = parseArgs("parameters");
        }
        const callee = parsePrimaryExpression();
        if (callee.type !== "Identifier") {
          throw new SyntaxError(`Expected identifier following call statement`);
        }
        const callArgs = parseArgs("call");
        expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
        const body = [];
        while (!isStatement("endcall")) {
          body.push(parseAny());
        }
        expect(TOKEN_TYPES.OpenStatement, "Expected '{%'");
        expectIdentifier("endcall");
        expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
        const callExpr = new CallExpression(callee, callArgs);
        result = new CallStatement(callExpr, callerArgs, body);
        break;
      }
      case "break":
        ++current;
        expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
        result = new Break();
        break;
      case "continue":
        ++current;
        expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
        result = new Continue();
        break;
      case "filter": {
        ++current;
        let filterNode = parsePrimaryExpression();
        if (filterNode instanceof Identifier && is(TOKEN_TYPES.OpenParen)) {
          filterNode = parseCallExpression(filterNode);
        }
        expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
        const filterBody = [];
        while (!isStatement("endfilter")) {
          filterBody.push(parseAny());
        }
        expect(TOKEN_TYPES.OpenStatement, "Expected '{%'");
        expectIdentifier("endfilter");
        expect(TOKEN_TYPES.CloseStatement, "Expected '%}'");
        result = new FilterStatement(filterNode, filterBody);
        break;
      }
      default:
        throw new SyntaxError(`Unknown statement type: ${name}`);
    }
    return result;
  }
  function parseJinjaExpression() {
    expect(TOKEN_TYPES.OpenExpression, "Expected opening expression token");
    const result = parseExpression();
    expect(TOKEN_TYPES.CloseExpression, "Expected closing expression token");
    return result;
  }
  function parseSetStatement() {
    const left = parseExpressionSequence();
    let value = null;
    const body = [];
    if (is(TOKEN_TYPES.Equals)) {
      ++current;
      value = parseExpressionSequence();
    } else {
      expect(TOKEN_TYPES.CloseStatement, "Expected %} token");
      while (!isStatement("endset")) {
        body.push(parseAny());
      }
      expect(TOKEN_TYPES.OpenStatement, "Expected {% token");
      expectIdentifier("endset");
    }
    expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
    return new SetStatement(left, value, body);
  }
  function parseIfStatement() {
    const test = parseExpression();
    expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
    const body = [];
    const alternate = [];
    while (!isStatement("elif", "else", "endif")) {
      body.push(parseAny());
    }
    if (isStatement("elif")) {
      ++current;
      ++current;
      const result = parseIfStatement();
      alternate.push(result);
    } else if (isStatement("else")) {
      ++current;
      ++current;
      expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
      while (!isStatement("endif")) {
        alternate.push(parseAny());
      }
    }
    return new If(test, body, alternate);
  }
  function parseMacroStatement() {
    const name = parsePrimaryExpression();
    if (name.type !== "Identifier") {
      throw new SyntaxError(`Expected identifier following macro statement`);
    }
    const args = parseArgs("parameters");
    expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
    const body = [];
    while (!isStatement("endmacro")) {
      body.push(parseAny());
    }
    return new Macro(name, args, body);
  }
  function parseExpressionSequence(primary = false) {
    const fn = primary ? parsePrimaryExpression : parseExpression;
    const expressions = [fn()];
    const isTuple = is(TOKEN_TYPES.Comma);
    while (isTuple) {
      ++current;
      expressions.push(fn());
      if (!is(TOKEN_TYPES.Comma)) {
        break;
      }
    }
    return isTuple ? new TupleLiteral(expressions) : expressions[0];
  }
  function parseForStatement() {
    const loopVariable = parseExpressionSequence(true);
    if (!(loopVariable instanceof Identifier || loopVariable instanceof TupleLiteral)) {
      throw new SyntaxError(`Expected identifier/tuple for the loop variable, got ${loopVariable.type} instead`);
    }
    if (!isIdentifier("in")) {
      throw new SyntaxError("Expected `in` keyword following loop variable");
    }
    ++current;
    const iterable = parseExpression();
    expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
    const body = [];
    while (!isStatement("endfor", "else")) {
      body.push(parseAny());
    }
    const alternative = [];
    if (isStatement("else")) {
      ++current;
      ++current;
      expect(TOKEN_TYPES.CloseStatement, "Expected closing statement token");
      while (!isStatement("endfor")) {
        alternative.push(parseAny());
      }
    }
    return new For(loopVariable, iterable, body, alternative);
  }
  function parseExpression() {
    return parseIfExpression();
  }
  function parseIfExpression() {
    const a = parseLogicalOrExpression();
    if (isIdentifier("if")) {
      ++current;
      const test = parseLogicalOrExpression();
      if (isIdentifier("else")) {
        ++current;
        const falseExpr = parseIfExpression();
        return new Ternary(test, a, falseExpr);
      } else {
        return new SelectExpression(a, test);
      }
    }
    return a;
  }
  function parseLogicalOrExpression() {
    let left = parseLogicalAndExpression();
    while (isIdentifier("or")) {
      const operator = tokens[current];
      ++current;
      const right = parseLogicalAndExpression();
      left = new BinaryExpression(operator, left, right);
    }
    return left;
  }
  function parseLogicalAndExpression() {
    let left = parseLogicalNegationExpression();
    while (isIdentifier("and")) {
      const operator = tokens[current];
      ++current;
      const right = parseLogicalNegationExpression();
      left = new BinaryExpression(operator, left, right);
    }
    return left;
  }
  function parseLogicalNegationExpression() {
    let right;
    while (isIdentifier("not")) {
      const operator = tokens[current];
      ++current;
      const arg = parseLogicalNegationExpression();
      right = new UnaryExpression(operator, arg);
    }
    return right ?? parseComparisonExpression();
  }
  function parseComparisonExpression() {
    let left = parseAdditiveExpression();
    while (true) {
      let operator;
      if (isIdentifier("not", "in")) {
        operator = new Token("not in", TOKEN_TYPES.Identifier);
        current += 2;
      } else if (isIdentifier("in")) {
        operator = tokens[current++];
      } else if (is(TOKEN_TYPES.ComparisonBinaryOperator)) {
        operator = tokens[current++];
      } else {
        break;
      }
      const right = parseAdditiveExpression();
      left = new BinaryExpression(operator, left, right);
    }
    return left;
  }
  function parseAdditiveExpression() {
    let left = parseMultiplicativeExpression();
    while (is(TOKEN_TYPES.AdditiveBinaryOperator)) {
      const operator = tokens[current];
      ++current;
      const right = parseMultiplicativeExpression();
      left = new BinaryExpression(operator, left, right);
    }
    return left;
  }
  function parseCallMemberExpression() {
    const member = parseMemberExpression(parsePrimaryExpression());
    if (is(TOKEN_TYPES.OpenParen)) {
      return parseCallExpression(member);
    }
    return member;
  }
  function parseCallExpression(callee) {
    let expression = new CallExpression(callee, parseArgs("call"));
    expression = parseMemberExpression(expression);
    if (is(TOKEN_TYPES.OpenParen)) {
      expression = parseCallExpression(expression);
    }
    return expression;
  }
  function parseArgs(mode) {
    expect(TOKEN_TYPES.OpenParen, "Expected opening parenthesis for arguments list");
    const args = parseArgumentsList(mode);
    expect(TOKEN_TYPES.CloseParen, "Expected closing parenthesis for arguments list");
    return args;
  }
  function parseArgumentsList(mode) {
    const args = [];
    const parameterNames = /* @__PURE__ */ new Set();
    let sawKeywordOrDefault = false;
    let sawSpreadArgument = false;
    while (!is(TOKEN_TYPES.CloseParen)) {
      const isKeywordSpread = is(TOKEN_TYPES.ExponentiationBinaryOperator);
      const isPositionalSpread = is(TOKEN_TYPES.MultiplicativeBinaryOperator) && tokens[current].value === "*";
      if (mode === "parameters" && (isKeywordSpread || isPositionalSpread)) {
        throw new SyntaxError("Argument unpacking is not allowed in parameter declarations");
      }
      if (isKeywordSpread) {
        ++current;
        args.push(new KeywordSpreadExpression(parseExpression()));
        if (is(TOKEN_TYPES.Comma)) {
          ++current;
        }
        if (!is(TOKEN_TYPES.CloseParen)) {
          throw new SyntaxError("Expected closing parenthesis: `**` must be applied to the final argument");
        }
        break;
      }
      let argument;
      if (isPositionalSpread) {
        if (sawSpreadArgument) {
          throw new SyntaxError("Only one `*` argument unpacking is allowed");
        }
        sawSpreadArgument = true;
        ++current;
        const expr = parseExpression();
        argument = new SpreadExpression(expr);
      } else {
        argument = parseExpression();
        if (is(TOKEN_TYPES.Equals)) {
          ++current;
          if (!(argument instanceof Identifier)) {
            throw new SyntaxError(
              mode === "parameters" ? "Expected identifier for parameter declaration" : "Expected identifier for keyword argument"
            );
          }
          const value = parseExpression();
          argument = new KeywordArgumentExpression(argument, value);
        }
        if (mode === "parameters") {
          if (!(argument instanceof Identifier || argument instanceof KeywordArgumentExpression)) {
            throw new SyntaxError("Expected identifier for parameter declaration");
          }
          const parameterName = argument instanceof Identifier ? argument.value : argument.key.value;
          if (parameterNames.has(parameterName)) {
            throw new SyntaxError(`Duplicate parameter name: ${parameterName}`);
          }
          parameterNames.add(parameterName);
        }
        if (argument instanceof KeywordArgumentExpression) {
          sawKeywordOrDefault = true;
        } else if (sawKeywordOrDefault) {
          throw new SyntaxError(
            mode === "call" ? "Positional arguments must come before keyword arguments" : "Non-default argument follows default argument"
          );
        } else if (sawSpreadArgument) {
          throw new SyntaxError("Positional arguments must not follow `*` argument unpacking");
        }
      }
      args.push(argument);
      if (is(TOKEN_TYPES.Comma)) {
        ++current;
      }
    }
    return args;
  }
  function parseMemberExpressionArgumentsList() {
    const slices = [];
    let isSlice = false;
    while (!is(TOKEN_TYPES.CloseSquareBracket)) {
      if (is(TOKEN_TYPES.Colon)) {
        slices.push(void 0);
        ++current;
        isSlice = true;
      } else {
        slices.push(parseExpression());
        if (is(TOKEN_TYPES.Colon)) {
          ++current;
          isSlice = true;
        }
      }
    }
    if (slices.length === 0) {
      throw new SyntaxError(`Expected at least one argument for member/slice expression`);
    }
    if (isSlice) {
      if (slices.length > 3) {
        throw new SyntaxError(`Expected 0-3 arguments for slice expression`);
      }
      return new SliceExpression(...slices);
    }
    return slices[0];
  }
  function parseMemberExpression(object) {
    while (is(TOKEN_TYPES.Dot) || is(TOKEN_TYPES.OpenSquareBracket)) {
      const operator = tokens[current];
      ++current;
      let property;
      const computed = operator.type === TOKEN_TYPES.OpenSquareBracket;
      if (computed) {
        property = parseMemberExpressionArgumentsList();
        expect(TOKEN_TYPES.CloseSquareBracket, "Expected closing square bracket");
      } else {
        property = parsePrimaryExpression();
        if (property.type !== "Identifier" && property.type !== "IntegerLiteral") {
          throw new SyntaxError(`Expected identifier or integer following dot operator`);
        }
      }
      object = new MemberExpression(object, property, computed);
    }
    return object;
  }
  function parseMultiplicativeExpression() {
    let left = parsePowerExpression();
    while (is(TOKEN_TYPES.MultiplicativeBinaryOperator)) {
      const operator = tokens[current++];
      const right = parsePowerExpression();
      left = new BinaryExpression(operator, left, right);
    }
    return left;
  }
  function parsePowerExpression() {
    let left = parseTestExpression();
    while (is(TOKEN_TYPES.ExponentiationBinaryOperator)) {
      const operator = tokens[current++];
      const right = parseTestExpression();
      left = new BinaryExpression(operator, left, right);
    }
    return left;
  }
  function parseTestExpression() {
    let operand = parseFilterExpression();
    while (isIdentifier("is")) {
      ++current;
      const negate = isIdentifier("not");
      if (negate) {
        ++current;
      }
      const filter = parsePrimaryExpression();
      if (!(filter instanceof Identifier)) {
        throw new SyntaxError(`Expected identifier for the test`);
      }
      operand = new TestExpression(operand, negate, filter);
    }
    return operand;
  }
  function parseFilterExpression() {
    let operand = parseUnarySignExpression();
    while (is(TOKEN_TYPES.Pipe)) {
      ++current;
      let filter = parsePrimaryExpression();
      if (!(filter instanceof Identifier)) {
        throw new SyntaxError(`Expected identifier for the filter`);
      }
      if (is(TOKEN_TYPES.OpenParen)) {
        filter = parseCallExpression(filter);
      }
      operand = new FilterExpression(operand, filter);
    }
    return operand;
  }
  function parseUnarySignExpression() {
    const token = tokens[current];
    if (token && (token.type === TOKEN_TYPES.UnaryOperator || token.type === TOKEN_TYPES.AdditiveBinaryOperator) && (token.value === "-" || token.value === "+")) {
      const operator = tokens[current++];
      const argument = parseUnarySignExpression();
      return new UnaryExpression(operator, argument);
    }
    return parseCallMemberExpression();
  }
  function parsePrimaryExpression() {
    const token = tokens[current++];
    switch (token.type) {
      case TOKEN_TYPES.NumericLiteral: {
        const num = token.value;
        return num.includes(".") ? new FloatLiteral(Number(num)) : new IntegerLiteral(Number(num));
      }
      case TOKEN_TYPES.StringLiteral: {
        let value = token.value;
        while (is(TOKEN_TYPES.StringLiteral)) {
          value += tokens[current++].value;
        }
        return new StringLiteral(value);
      }
      case TOKEN_TYPES.Identifier:
        return new Identifier(token.value);
      case TOKEN_TYPES.OpenParen: {
        const expression = parseExpressionSequence();
        expect(TOKEN_TYPES.CloseParen, "Expected closing parenthesis, got ${tokens[current].type} instead.");
        return expression;
      }
      case TOKEN_TYPES.OpenSquareBracket: {
        const values = [];
        while (!is(TOKEN_TYPES.CloseSquareBracket)) {
          values.push(parseExpression());
          if (is(TOKEN_TYPES.Comma)) {
            ++current;
          }
        }
        ++current;
        return new ArrayLiteral(values);
      }
      case TOKEN_TYPES.OpenCurlyBracket: {
        const values = /* @__PURE__ */ new Map();
        while (!is(TOKEN_TYPES.CloseCurlyBracket)) {
          const key = parseExpression();
          expect(TOKEN_TYPES.Colon, "Expected colon between key and value in object literal");
          const value = parseExpression();
          values.set(key, value);
          if (is(TOKEN_TYPES.Comma)) {
            ++current;
          }
        }
        ++current;
        return new ObjectLiteral(values);
      }
      default:
        throw new SyntaxError(`Unexpected token: ${token.type}`);
    }
  }
  while (current < tokens.length) {
    program.body.push(parseAny());
  }
  return program;
}
function range(start, stop, step = 1) {
  if (stop === void 0) {
    stop = start;
    start = 0;
  }
  if (step === 0) {
    throw new Error("range() step must not be zero");
  }
  const result = [];
  if (step > 0) {
    for (let i = start; i < stop; i += step) {
      result.push(i);
    }
  } else {
    for (let i = start; i > stop; i += step) {
      result.push(i);
    }
  }
  return result;
}
function slice(array, start, stop, step = 1) {
  const direction = Math.sign(step);
  if (direction >= 0) {
    start = (start ??= 0) < 0 ? Math.max(array.length + start, 0) : Math.min(start, array.length);
    stop = (stop ??= array.length) < 0 ? Math.max(array.length + stop, 0) : Math.min(stop, array.length);
  } else {
    start = (start ??= array.length - 1) < 0 ? Math.max(array.length + start, -1) : Math.min(start, array.length - 1);
    stop = (stop ??= -1) < -1 ? Math.max(array.length + stop, -1) : Math.min(stop, array.length - 1);
  }
  const result = [];
  for (let i = start; direction * i < direction * stop; i += step) {
    result.push(array[i]);
  }
  return result;
}
function titleCase(value) {
  return value.replace(/\b\w/g, (c) => c.toUpperCase());
}
function strftime_now(format2) {
  return strftime(/* @__PURE__ */ new Date(), format2);
}
function strftime(date, format2) {
  const monthFormatterLong = new Intl.DateTimeFormat(void 0, { month: "long" });
  const monthFormatterShort = new Intl.DateTimeFormat(void 0, { month: "short" });
  const pad2 = (n) => n < 10 ? "0" + n : n.toString();
  return format2.replace(/%[YmdbBHM%]/g, (token) => {
    switch (token) {
      case "%Y":
        return date.getFullYear().toString();
      case "%m":
        return pad2(date.getMonth() + 1);
      case "%d":
        return pad2(date.getDate());
      case "%b":
        return monthFormatterShort.format(date);
      case "%B":
        return monthFormatterLong.format(date);
      case "%H":
        return pad2(date.getHours());
      case "%M":
        return pad2(date.getMinutes());
      case "%%":
        return "%";
      default:
        return token;
    }
  });
}
function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
function replace(str, oldvalue, newvalue, count) {
  if (count === 0) {
    return str;
  }
  let remaining = count == null || count < 0 ? Infinity : count;
  const pattern = oldvalue.length === 0 ? new RegExp("(?=)", "gu") : new RegExp(escapeRegExp(oldvalue), "gu");
  return str.replaceAll(pattern, (match) => {
    if (remaining > 0) {
      --remaining;
      return newvalue;
    }
    return match;
  });
}
var BreakControl = class extends Error {
};
var ContinueControl = class extends Error {
};
var EMPTY_BUILTINS = /* @__PURE__ */ new Map();
var RuntimeValue = class {
  type = "RuntimeValue";
  value;
  /**
   * A collection of built-in functions for this type.
   */
  get builtins() {
    return EMPTY_BUILTINS;
  }
  /**
   * Creates a new RuntimeValue.
   */
  constructor(value = void 0) {
    this.value = value;
  }
  /**
   * Determines truthiness or falsiness of the runtime value.
   * This function should be overridden by subclasses if it has custom truthiness criteria.
   * @returns {BooleanValue} BooleanValue(true) if the value is truthy, BooleanValue(false) otherwise.
   */
  __bool__() {
    return new BooleanValue(!!this.value);
  }
  toString() {
    return String(this.value);
  }
};
var IntegerValue = class extends RuntimeValue {
  type = "IntegerValue";
};
var FloatValue = class extends RuntimeValue {
  type = "FloatValue";
  toString() {
    if (Object.is(this.value, -0)) {
      return "-0.0";
    }
    return this.value % 1 === 0 ? this.value.toFixed(1) : this.value.toString();
  }
};
var StringValue = class extends RuntimeValue {
  type = "StringValue";
  _builtins;
  get builtins() {
    return this._builtins ??= /* @__PURE__ */ new Map([
      [
        "upper",
        new FunctionValue(() => {
          return new StringValue(this.value.toUpperCase());
        })
      ],
      [
        "lower",
        new FunctionValue(() => {
          return new StringValue(this.value.toLowerCase());
        })
      ],
      [
        "strip",
        new FunctionValue(() => {
          return new StringValue(this.value.trim());
        })
      ],
      [
        "title",
        new FunctionValue(() => {
          return new StringValue(titleCase(this.value));
        })
      ],
      [
        "capitalize",
        new FunctionValue(() => {
          return new StringValue(this.value.charAt(0).toUpperCase() + this.value.slice(1));
        })
      ],
      ["length", new IntegerValue(this.value.length)],
      [
        "rstrip",
        new FunctionValue(() => {
          return new StringValue(this.value.trimEnd());
        })
      ],
      [
        "lstrip",
        new FunctionValue(() => {
          return new StringValue(this.value.trimStart());
        })
      ],
      [
        "startswith",
        new FunctionValue((args) => {
          if (args.length === 0) {
            throw new Error("startswith() requires at least one argument");
          }
          const pattern = args[0];
          if (pattern instanceof StringValue) {
            return new BooleanValue(this.value.startsWith(pattern.value));
          } else if (pattern instanceof ArrayValue) {
            for (const item of pattern.value) {
              if (!(item instanceof StringValue)) {
                throw new Error("startswith() tuple elements must be strings");
              }
              if (this.value.startsWith(item.value)) {
                return new BooleanValue(true);
              }
            }
            return new BooleanValue(false);
          }
          throw new Error("startswith() argument must be a string or tuple of strings");
        })
      ],
      [
        "endswith",
        new FunctionValue((args) => {
          if (args.length === 0) {
            throw new Error("endswith() requires at least one argument");
          }
          const pattern = args[0];
          if (pattern instanceof StringValue) {
            return new BooleanValue(this.value.endsWith(pattern.value));
          } else if (pattern instanceof ArrayValue) {
            for (const item of pattern.value) {
              if (!(item instanceof StringValue)) {
                throw new Error("endswith() tuple elements must be strings");
              }
              if (this.value.endsWith(item.value)) {
                return new BooleanValue(true);
              }
            }
            return new BooleanValue(false);
          }
          throw new Error("endswith() argument must be a string or tuple of strings");
        })
      ],
      [
        "split",
        // follows Python's `str.split(sep=None, maxsplit=-1)` function behavior
        // https://docs.python.org/3.13/library/stdtypes.html#str.split
        new FunctionValue((args) => {
          const sep = args[0] ?? new NullValue();
          if (!(sep instanceof StringValue || sep instanceof NullValue)) {
            throw new Error("sep argument must be a string or null");
          }
          const maxsplit = args[1] ?? new IntegerValue(-1);
          if (!(maxsplit instanceof IntegerValue)) {
            throw new Error("maxsplit argument must be a number");
          }
          let result = [];
          if (sep instanceof NullValue) {
            const text = this.value.trimStart();
            for (const { 0: match, index } of text.matchAll(/\S+/g)) {
              if (maxsplit.value !== -1 && result.length >= maxsplit.value && index !== void 0) {
                result.push(match + text.slice(index + match.length));
                break;
              }
              result.push(match);
            }
          } else {
            if (sep.value === "") {
              throw new Error("empty separator");
            }
            result = this.value.split(sep.value);
            if (maxsplit.value !== -1 && result.length > maxsplit.value) {
              result.push(result.splice(maxsplit.value).join(sep.value));
            }
          }
          return new ArrayValue(result.map((part) => new StringValue(part)));
        })
      ],
      [
        "replace",
        new FunctionValue((args) => {
          if (args.length < 2) {
            throw new Error("replace() requires at least two arguments");
          }
          const oldValue = args[0];
          const newValue = args[1];
          if (!(oldValue instanceof StringValue && newValue instanceof StringValue)) {
            throw new Error("replace() arguments must be strings");
          }
          let count;
          if (args.length > 2) {
            if (args[2].type === "KeywordArgumentsValue") {
              count = args[2].value.get("count") ?? new NullValue();
            } else {
              count = args[2];
            }
          } else {
            count = new NullValue();
          }
          if (!(count instanceof IntegerValue || count instanceof NullValue)) {
            throw new Error("replace() count argument must be a number or null");
          }
          return new StringValue(replace(this.value, oldValue.value, newValue.value, count.value));
        })
      ]
    ]);
  }
};
var BooleanValue = class extends RuntimeValue {
  type = "BooleanValue";
};
var NON_ASCII_CHARS = /[\x7f-\uffff]/g;
function makeAsciiSafe(str) {
  return str.replace(NON_ASCII_CHARS, (char) => "\\u" + char.charCodeAt(0).toString(16).padStart(4, "0"));
}
function toJSON(input, options = {}, depth = 0, convertUndefinedToNull = true) {
  const { indent = null, ensureAscii = false, separators = null, sortKeys = false } = options;
  let itemSeparator;
  let keySeparator;
  if (separators) {
    [itemSeparator, keySeparator] = separators;
  } else if (indent) {
    itemSeparator = ",";
    keySeparator = ": ";
  } else {
    itemSeparator = ", ";
    keySeparator = ": ";
  }
  switch (input.type) {
    case "NullValue":
      return "null";
    case "UndefinedValue":
      return convertUndefinedToNull ? "null" : "undefined";
    case "IntegerValue":
    case "FloatValue":
    case "BooleanValue":
      return JSON.stringify(input.value);
    case "StringValue": {
      let result = JSON.stringify(input.value);
      if (ensureAscii) {
        result = makeAsciiSafe(result);
      }
      return result;
    }
    case "ArrayValue":
    case "NamespaceValue":
    case "ObjectValue": {
      const indentValue = indent ? " ".repeat(indent) : "";
      const basePadding = "\n" + indentValue.repeat(depth);
      const childrenPadding = basePadding + indentValue;
      if (input.type === "ArrayValue") {
        const core = input.value.map((x) => toJSON(x, options, depth + 1, convertUndefinedToNull));
        return indent && core.length > 0 ? `[${childrenPadding}${core.join(`${itemSeparator}${childrenPadding}`)}${basePadding}]` : `[${core.join(itemSeparator)}]`;
      } else {
        let entries = Array.from(input.value.entries());
        if (sortKeys) {
          entries = entries.sort(([a], [b]) => a.localeCompare(b));
        }
        const core = entries.map(([key, value]) => {
          let keyStr = JSON.stringify(key);
          if (ensureAscii) {
            keyStr = makeAsciiSafe(keyStr);
          }
          const v = `${keyStr}${keySeparator}${toJSON(value, options, depth + 1, convertUndefinedToNull)}`;
          return indent ? `${childrenPadding}${v}` : v;
        });
        return indent && core.length > 0 ? `{${core.join(itemSeparator)}${basePadding}}` : `{${core.join(itemSeparator)}}`;
      }
    }
    default:
      throw new Error(`Cannot convert to JSON: ${input.type}`);
  }
}
var ObjectValue = class extends RuntimeValue {
  type = "ObjectValue";
  _builtins;
  /**
   * NOTE: necessary to override since all JavaScript arrays are considered truthy,
   * while only non-empty Python arrays are consider truthy.
   *
   * e.g.,
   *  - JavaScript:  {} && 5 -> 5
   *  - Python:      {} and 5 -> {}
   */
  __bool__() {
    return new BooleanValue(this.value.size > 0);
  }
  get builtins() {
    return this._builtins ??= /* @__PURE__ */ new Map([
      [
        "get",
        new FunctionValue(([key, defaultValue]) => {
          if (!(key instanceof StringValue)) {
            throw new Error(`Object key must be a string: got ${key.type}`);
          }
          return this.value.get(key.value) ?? defaultValue ?? new NullValue();
        })
      ],
      ["items", new FunctionValue(() => this.items())],
      ["keys", new FunctionValue(() => this.keys())],
      ["values", new FunctionValue(() => this.values())],
      [
        "dictsort",
        new FunctionValue((args) => {
          let kwargs = /* @__PURE__ */ new Map();
          const positionalArgs = args.filter((arg) => {
            if (arg instanceof KeywordArgumentsValue) {
              kwargs = arg.value;
              return false;
            }
            return true;
          });
          const caseSensitive = positionalArgs.at(0) ?? kwargs.get("case_sensitive") ?? new BooleanValue(false);
          if (!(caseSensitive instanceof BooleanValue)) {
            throw new Error("case_sensitive must be a boolean");
          }
          const by = positionalArgs.at(1) ?? kwargs.get("by") ?? new StringValue("key");
          if (!(by instanceof StringValue)) {
            throw new Error("by must be a string");
          }
          if (!["key", "value"].includes(by.value)) {
            throw new Error("by must be either 'key' or 'value'");
          }
          const reverse = positionalArgs.at(2) ?? kwargs.get("reverse") ?? new BooleanValue(false);
          if (!(reverse instanceof BooleanValue)) {
            throw new Error("reverse must be a boolean");
          }
          const items = Array.from(this.value.entries()).map(([key, value]) => new ArrayValue([new StringValue(key), value])).sort((a, b) => {
            const index = by.value === "key" ? 0 : 1;
            const aVal = a.value[index];
            const bVal = b.value[index];
            const result = compareRuntimeValues(aVal, bVal, caseSensitive.value);
            return reverse.value ? -result : result;
          });
          return new ArrayValue(items);
        })
      ]
    ]);
  }
  items() {
    return new ArrayValue(
      Array.from(this.value.entries()).map(([key, value]) => new ArrayValue([new StringValue(key), value]))
    );
  }
  keys() {
    return new ArrayValue(Array.from(this.value.keys()).map((key) => new StringValue(key)));
  }
  values() {
    return new ArrayValue(Array.from(this.value.values()));
  }
  toString() {
    return toJSON(this, {}, 0, false);
  }
};
var KeywordArgumentsValue = class extends ObjectValue {
  type = "KeywordArgumentsValue";
};
var NamespaceValue = class extends RuntimeValue {
  type = "NamespaceValue";
  toString() {
    return toJSON(this, {}, 0, false);
  }
};
var ArrayValue = class extends RuntimeValue {
  type = "ArrayValue";
  _builtins;
  get builtins() {
    return this._builtins ??= /* @__PURE__ */ new Map([["length", new IntegerValue(this.value.length)]]);
  }
  /**
   * NOTE: necessary to override since all JavaScript arrays are considered truthy,
   * while only non-empty Python arrays are consider truthy.
   *
   * e.g.,
   *  - JavaScript:  [] && 5 -> 5
   *  - Python:      [] and 5 -> []
   */
  __bool__() {
    return new BooleanValue(this.value.length > 0);
  }
  toString() {
    return toJSON(this, {}, 0, false);
  }
};
var TupleValue = class extends ArrayValue {
  type = "TupleValue";
};
var FunctionValue = class extends RuntimeValue {
  type = "FunctionValue";
};
var NullValue = class extends RuntimeValue {
  type = "NullValue";
};
var UndefinedValue = class extends RuntimeValue {
  type = "UndefinedValue";
};
function normalizeNamespaceEntry(pair) {
  let values;
  if (pair instanceof ArrayValue) {
    values = pair.value;
  } else if (pair instanceof StringValue) {
    values = Array.from(pair.value, (char) => new StringValue(char));
  }
  if (!values || values.length !== 2) {
    throw new Error("namespace expected an object or an iterable of [key, value] pairs");
  }
  const [key, value] = values;
  if (!(key instanceof StringValue)) {
    throw new Error("namespace keys must be strings");
  }
  return [key, value];
}
var _Environment = class {
  constructor(parent) {
    this.parent = parent;
  }
  /**
   * The variables declared in this environment.
   */
  variables = /* @__PURE__ */ new Map([
    [
      "namespace",
      new FunctionValue((args) => {
        const positional = args.slice();
        let kwargs;
        if (positional.at(-1) instanceof KeywordArgumentsValue) {
          kwargs = positional.pop();
        }
        if (positional.length > 1) {
          throw new Error(`namespace expected at most 1 argument, got ${positional.length}`);
        }
        const entries = /* @__PURE__ */ new Map();
        if (positional.length === 1) {
          const source = positional[0];
          if (source instanceof ObjectValue) {
            for (const [key, value] of source.value) {
              entries.set(key, value);
            }
          } else if (source instanceof ArrayValue) {
            for (const pair of source.value) {
              const [key, value] = normalizeNamespaceEntry(pair);
              entries.set(key.value, value);
            }
          } else {
            throw new Error(`'${source.type}' object is not iterable`);
          }
        }
        if (kwargs) {
          for (const [key, value] of kwargs.value) {
            entries.set(key, value);
          }
        }
        return new NamespaceValue(entries);
      })
    ]
  ]);
  tests = _Environment.TESTS;
  /**
   * Set the value of a variable in the current environment.
   */
  set(name, value) {
    return this.declareVariable(name, convertToRuntimeValues(value));
  }
  declareVariable(name, value) {
    if (this.variables.has(name)) {
      throw new SyntaxError(`Variable already declared: ${name}`);
    }
    this.variables.set(name, value);
    return value;
  }
  // private assignVariable(name: string, value: AnyRuntimeValue): AnyRuntimeValue {
  // 	const env = this.resolve(name);
  // 	env.variables.set(name, value);
  // 	return value;
  // }
  /**
   * Set variable in the current scope.
   * See https://jinja.palletsprojects.com/en/3.0.x/templates/#assignments for more information.
   */
  setVariable(name, value) {
    this.variables.set(name, value);
    return value;
  }
  /**
   * Resolve the environment in which the variable is declared.
   * @param {string} name The name of the variable.
   * @returns {Environment} The environment in which the variable is declared.
   */
  resolve(name) {
    if (this.variables.has(name)) {
      return this;
    }
    if (this.parent) {
      return this.parent.resolve(name);
    }
    throw new Error(`Unknown variable: ${name}`);
  }
  lookupVariable(name) {
    try {
      return this.resolve(name).variables.get(name) ?? new UndefinedValue();
    } catch {
      return new UndefinedValue();
    }
  }
};
var Environment = _Environment;
__publicField(Environment, "TESTS", /* @__PURE__ */ new Map([
  ["boolean", (operand) => operand.type === "BooleanValue"],
  ["callable", (operand) => operand instanceof FunctionValue],
  [
    "odd",
    (operand) => {
      if (!(operand instanceof IntegerValue)) {
        throw new Error(`cannot odd on ${operand.type}`);
      }
      return operand.value % 2 !== 0;
    }
  ],
  [
    "even",
    (operand) => {
      if (!(operand instanceof IntegerValue)) {
        throw new Error(`cannot even on ${operand.type}`);
      }
      return operand.value % 2 === 0;
    }
  ],
  ["false", (operand) => operand.type === "BooleanValue" && !operand.value],
  ["true", (operand) => operand.type === "BooleanValue" && operand.value],
  ["none", (operand) => operand.type === "NullValue"],
  ["string", (operand) => operand.type === "StringValue"],
  ["number", (operand) => operand instanceof IntegerValue || operand instanceof FloatValue],
  ["integer", (operand) => operand instanceof IntegerValue],
  ["iterable", (operand) => operand.type === "ArrayValue" || operand.type === "StringValue"],
  ["mapping", (operand) => operand instanceof ObjectValue],
  [
    "sequence",
    (operand) => operand instanceof ArrayValue || operand instanceof ObjectValue || operand instanceof StringValue
  ],
  [
    "lower",
    (operand) => {
      const str = operand.value;
      return operand.type === "StringValue" && str === str.toLowerCase();
    }
  ],
  [
    "upper",
    (operand) => {
      const str = operand.value;
      return operand.type === "StringValue" && str === str.toUpperCase();
    }
  ],
  ["none", (operand) => operand.type === "NullValue"],
  ["defined", (operand) => operand.type !== "UndefinedValue"],
  ["undefined", (operand) => operand.type === "UndefinedValue"],
  ["equalto", (a, b) => a.value === b.value],
  ["eq", (a, b) => a.value === b.value]
]));
function setupGlobals(env) {
  env.set("false", false);
  env.set("true", true);
  env.set("none", null);
  env.set("raise_exception", (args) => {
    throw new Error(args);
  });
  env.set("range", range);
  env.set("strftime_now", strftime_now);
  env.set("True", true);
  env.set("False", false);
  env.set("None", null);
}
function isAttributeContainer(value) {
  return value instanceof ObjectValue || value instanceof NamespaceValue;
}
function isNumericLikeValue(value) {
  return value instanceof IntegerValue || value instanceof FloatValue || value instanceof BooleanValue;
}
function getNumericValue(value) {
  return value instanceof BooleanValue ? Number(value.value) : value.value;
}
function getAttributeValue(item, attributePath) {
  const parts = attributePath.split(".");
  let value = item;
  for (const part of parts) {
    if (isAttributeContainer(value)) {
      value = value.value.get(part) ?? new UndefinedValue();
    } else if (value instanceof ArrayValue) {
      const index = parseInt(part, 10);
      if (!isNaN(index) && index >= 0 && index < value.value.length) {
        value = value.value[index];
      } else {
        return new UndefinedValue();
      }
    } else {
      return new UndefinedValue();
    }
  }
  return value;
}
function compareRuntimeValues(a, b, caseSensitive = false) {
  if (a instanceof NullValue && b instanceof NullValue) {
    return 0;
  }
  if (a instanceof NullValue || b instanceof NullValue) {
    throw new Error(`Cannot compare ${a.type} with ${b.type}`);
  }
  if (a instanceof UndefinedValue && b instanceof UndefinedValue) {
    return 0;
  }
  if (a instanceof UndefinedValue || b instanceof UndefinedValue) {
    throw new Error(`Cannot compare ${a.type} with ${b.type}`);
  }
  if (isNumericLikeValue(a) && isNumericLikeValue(b)) {
    const aNum = getNumericValue(a);
    const bNum = getNumericValue(b);
    return aNum < bNum ? -1 : aNum > bNum ? 1 : 0;
  }
  if (a.type !== b.type) {
    throw new Error(`Cannot compare different types: ${a.type} and ${b.type}`);
  }
  switch (a.type) {
    case "StringValue": {
      let aStr = a.value;
      let bStr = b.value;
      if (!caseSensitive) {
        aStr = aStr.toLowerCase();
        bStr = bStr.toLowerCase();
      }
      return aStr < bStr ? -1 : aStr > bStr ? 1 : 0;
    }
    default:
      throw new Error(`Cannot compare type: ${a.type}`);
  }
}
function getParameterDescriptor(argument) {
  if (argument.type === "Identifier") {
    return { name: argument.value };
  }
  const keywordArgument = argument;
  return { name: keywordArgument.key.value, defaultValue: keywordArgument.value };
}
function isSpecialMacroArgument(name) {
  return name === "kwargs" || name === "varargs";
}
function findAccessedSpecialMacroArguments(parameters, body) {
  const declared = /* @__PURE__ */ new Set();
  const accessed = /* @__PURE__ */ new Set();
  const declareName = (name) => {
    if (isSpecialMacroArgument(name)) {
      declared.add(name);
    }
  };
  const declareTarget = (target) => {
    if (target.type === "Identifier") {
      declareName(target.value);
    } else if (target.type === "TupleLiteral") {
      for (const item of target.value) {
        declareTarget(item);
      }
    }
  };
  const declareArgument = (argument) => {
    declareName(getParameterDescriptor(argument).name);
  };
  const visitArgumentDefaults = (args) => {
    for (const argument of args) {
      const parameter = getParameterDescriptor(argument);
      if (parameter.defaultValue) {
        visit(parameter.defaultValue);
      }
    }
  };
  const visitFilter = (filter) => {
    if (filter.type === "CallExpression") {
      visit(filter.args);
    }
  };
  const visit = (node) => {
    if (Array.isArray(node)) {
      for (const item of node) {
        visit(item);
      }
      return;
    }
    if (node instanceof Map) {
      for (const [key, value] of node) {
        visit(key);
        visit(value);
      }
      return;
    }
    if (!(node instanceof Statement)) {
      return;
    }
    switch (node.type) {
      case "For": {
        const statement = node;
        declareTarget(statement.loopvar);
        if (statement.iterable.type === "SelectExpression") {
          const iterable = statement.iterable;
          visit(iterable.lhs);
          visit(statement.body);
          visit(statement.defaultBlock);
          visit(iterable.test);
          return;
        }
        visit(statement.iterable);
        visit(statement.body);
        visit(statement.defaultBlock);
        return;
      }
      case "Set": {
        const statement = node;
        declareTarget(statement.assignee);
        visit(statement.value);
        visit(statement.body);
        return;
      }
      case "Macro": {
        const statement = node;
        for (const argument of statement.args) {
          declareArgument(argument);
        }
        visitArgumentDefaults(statement.args);
        visit(statement.body);
        return;
      }
      case "CallStatement": {
        const statement = node;
        visit(statement.call);
        for (const argument of statement.callerArgs ?? []) {
          declareArgument(argument);
        }
        visitArgumentDefaults(statement.callerArgs ?? []);
        visit(statement.body);
        return;
      }
      case "FilterStatement": {
        const statement = node;
        visit(statement.body);
        visitFilter(statement.filter);
        return;
      }
      case "Identifier": {
        const name = node.value;
        if (isSpecialMacroArgument(name) && !declared.has(name)) {
          accessed.add(name);
        }
        return;
      }
      case "MemberExpression": {
        const expression = node;
        visit(expression.object);
        if (expression.computed) {
          visit(expression.property);
        }
        return;
      }
      case "FilterExpression": {
        const expression = node;
        visit(expression.operand);
        visitFilter(expression.filter);
        return;
      }
      case "TestExpression":
        visit(node.operand);
        return;
      case "SelectExpression": {
        const expression = node;
        visit(expression.test);
        visit(expression.lhs);
        return;
      }
      case "KeywordArgumentExpression":
        visit(node.value);
        return;
      default:
        for (const child of Object.values(node)) {
          visit(child);
        }
    }
  };
  for (const parameter of parameters) {
    declareArgument(parameter);
  }
  visit(body);
  return accessed;
}
var Interpreter = class {
  global;
  constructor(env) {
    this.global = env ?? new Environment();
  }
  /**
   * Run the program.
   */
  run(program) {
    return this.evaluate(program, this.global);
  }
  /**
   * Evaluates expressions following the binary operation type.
   */
  evaluateBinaryExpression(node, environment) {
    const left = this.evaluate(node.left, environment);
    switch (node.operator.value) {
      case "and":
        return left.__bool__().value ? this.evaluate(node.right, environment) : left;
      case "or":
        return left.__bool__().value ? left : this.evaluate(node.right, environment);
    }
    const right = this.evaluate(node.right, environment);
    switch (node.operator.value) {
      case "==":
        return new BooleanValue(left.value == right.value);
      case "!=":
        return new BooleanValue(left.value != right.value);
    }
    if (left instanceof UndefinedValue || right instanceof UndefinedValue) {
      if (right instanceof UndefinedValue && ["in", "not in"].includes(node.operator.value)) {
        return new BooleanValue(node.operator.value === "not in");
      }
      throw new Error(`Cannot perform operation ${node.operator.value} on undefined values`);
    } else if (left instanceof NullValue || right instanceof NullValue) {
      throw new Error("Cannot perform operation on null values");
    } else if (node.operator.value === "~") {
      return new StringValue(left.value.toString() + right.value.toString());
    } else if (node.operator.value === "**" && isNumericLikeValue(left) && isNumericLikeValue(right)) {
      const a = getNumericValue(left);
      const b = getNumericValue(right);
      if (a === 0 && b < 0) {
        throw new Error("0.0 cannot be raised to a negative power");
      }
      const result = a ** b;
      if (!Number.isFinite(result)) {
        throw new Error("Exponentiation result is not a finite real number");
      }
      const isFloat = left instanceof FloatValue || right instanceof FloatValue || b < 0;
      return isFloat ? new FloatValue(result) : new IntegerValue(result);
    } else if ((left instanceof IntegerValue || left instanceof FloatValue) && (right instanceof IntegerValue || right instanceof FloatValue)) {
      const a = left.value, b = right.value;
      switch (node.operator.value) {
        case "+":
        case "-":
        case "*": {
          const res = node.operator.value === "+" ? a + b : node.operator.value === "-" ? a - b : a * b;
          const isFloat = left instanceof FloatValue || right instanceof FloatValue;
          return isFloat ? new FloatValue(res) : new IntegerValue(res);
        }
        case "/":
          return new FloatValue(a / b);
        case "//": {
          const res = Math.floor(a / b);
          const isFloat = left instanceof FloatValue || right instanceof FloatValue;
          return isFloat ? new FloatValue(res) : new IntegerValue(res);
        }
        case "%": {
          const rem = a % b;
          const isFloat = left instanceof FloatValue || right instanceof FloatValue;
          return isFloat ? new FloatValue(rem) : new IntegerValue(rem);
        }
        case "<":
          return new BooleanValue(a < b);
        case ">":
          return new BooleanValue(a > b);
        case ">=":
          return new BooleanValue(a >= b);
        case "<=":
          return new BooleanValue(a <= b);
      }
    } else if (left instanceof ArrayValue && right instanceof ArrayValue) {
      switch (node.operator.value) {
        case "+":
          return new ArrayValue(left.value.concat(right.value));
      }
    } else if (right instanceof ArrayValue) {
      const member = right.value.find((x) => x.value === left.value) !== void 0;
      switch (node.operator.value) {
        case "in":
          return new BooleanValue(member);
        case "not in":
          return new BooleanValue(!member);
      }
    }
    if (left instanceof StringValue || right instanceof StringValue) {
      switch (node.operator.value) {
        case "+":
          return new StringValue(left.value.toString() + right.value.toString());
      }
    }
    if (left instanceof StringValue && right instanceof StringValue) {
      switch (node.operator.value) {
        case "in":
          return new BooleanValue(right.value.includes(left.value));
        case "not in":
          return new BooleanValue(!right.value.includes(left.value));
      }
    }
    if (left instanceof StringValue && right instanceof ObjectValue) {
      switch (node.operator.value) {
        case "in":
          return new BooleanValue(right.value.has(left.value));
        case "not in":
          return new BooleanValue(!right.value.has(left.value));
      }
    }
    throw new SyntaxError(`Unknown operator "${node.operator.value}" between ${left.type} and ${right.type}`);
  }
  evaluateArguments(args, environment) {
    const positionalArguments = [];
    const keywordArguments = /* @__PURE__ */ new Map();
    const addKeywordArgument = (key, value) => {
      if (keywordArguments.has(key)) {
        throw new Error(`Got multiple values for keyword argument '${key}'`);
      }
      keywordArguments.set(key, value);
    };
    for (const argument of args) {
      if (argument.type === "SpreadExpression") {
        const spreadNode = argument;
        const val = this.evaluate(spreadNode.argument, environment);
        if (!(val instanceof ArrayValue)) {
          throw new Error(`Cannot unpack non-iterable type: ${val.type}`);
        }
        for (const item of val.value) {
          positionalArguments.push(item);
        }
      } else if (argument.type !== "KeywordArgumentExpression" && argument.type !== "KeywordSpreadExpression") {
        positionalArguments.push(this.evaluate(argument, environment));
      }
    }
    for (const argument of args) {
      if (argument.type === "KeywordArgumentExpression") {
        const kwarg = argument;
        addKeywordArgument(kwarg.key.value, this.evaluate(kwarg.value, environment));
      } else if (argument.type === "KeywordSpreadExpression") {
        const spreadNode = argument;
        const val = this.evaluate(spreadNode.argument, environment);
        if (!(val instanceof ObjectValue)) {
          throw new Error(`Argument after ** must be a mapping, not ${val.type}`);
        }
        for (const [key, value] of val.value) {
          addKeywordArgument(key, value);
        }
      }
    }
    return [positionalArguments, keywordArguments];
  }
  applyFilter(operand, filterNode, environment) {
    if (filterNode.type === "Identifier") {
      const filter = filterNode;
      if (filter.value === "safe") {
        return operand;
      }
      if (filter.value === "tojson") {
        return new StringValue(toJSON(operand, {}));
      }
      if (operand instanceof ArrayValue) {
        switch (filter.value) {
          case "list":
            return operand;
          case "first":
            return operand.value[0];
          case "last":
            return operand.value[operand.value.length - 1];
          case "length":
            return new IntegerValue(operand.value.length);
          case "reverse":
            return new ArrayValue(operand.value.slice().reverse());
          case "sort": {
            return new ArrayValue(operand.value.slice().sort((a, b) => compareRuntimeValues(a, b, false)));
          }
          case "join":
            return new StringValue(operand.value.map((x) => x.value).join(""));
          case "string":
            return new StringValue(toJSON(operand, {}, 0, false));
          case "unique": {
            const seen = /* @__PURE__ */ new Set();
            const output = [];
            for (const item of operand.value) {
              if (!seen.has(item.value)) {
                seen.add(item.value);
                output.push(item);
              }
            }
            return new ArrayValue(output);
          }
          default:
            throw new Error(`Unknown ArrayValue filter: ${filter.value}`);
        }
      } else if (operand instanceof StringValue) {
        switch (filter.value) {
          case "length":
          case "upper":
          case "lower":
          case "title":
          case "capitalize": {
            const builtin = operand.builtins.get(filter.value);
            if (builtin instanceof FunctionValue) {
              return builtin.value(
                /* no arguments */
                [],
                environment
              );
            } else if (builtin instanceof IntegerValue) {
              return builtin;
            } else {
              throw new Error(`Unknown StringValue filter: ${filter.value}`);
            }
          }
          case "trim":
            return new StringValue(operand.value.trim());
          case "indent":
            return new StringValue(
              operand.value.split("\n").map(
                (x, i) => (
                  // By default, don't indent the first line or empty lines
                  i === 0 || x.length === 0 ? x : "    " + x
                )
              ).join("\n")
            );
          case "join":
          case "string":
            return operand;
          case "int": {
            const val = parseInt(operand.value, 10);
            return new IntegerValue(isNaN(val) ? 0 : val);
          }
          case "float": {
            const val = parseFloat(operand.value);
            return new FloatValue(isNaN(val) ? 0 : val);
          }
          default:
            throw new Error(`Unknown StringValue filter: ${filter.value}`);
        }
      } else if (operand instanceof IntegerValue || operand instanceof FloatValue) {
        switch (filter.value) {
          case "abs":
            return operand instanceof IntegerValue ? new IntegerValue(Math.abs(operand.value)) : new FloatValue(Math.abs(operand.value));
          case "int":
            return new IntegerValue(Math.floor(operand.value));
          case "float":
            return new FloatValue(operand.value);
          case "string":
            return new StringValue(operand.toString());
          default:
            throw new Error(`Unknown NumericValue filter: ${filter.value}`);
        }
      } else if (operand instanceof ObjectValue) {
        switch (filter.value) {
          case "items":
            return new ArrayValue(
              Array.from(operand.value.entries()).map(([key, value]) => new ArrayValue([new StringValue(key), value]))
            );
          case "length":
            return new IntegerValue(operand.value.size);
          default: {
            const builtin = operand.builtins.get(filter.value);
            if (builtin) {
              if (builtin instanceof FunctionValue) {
                return builtin.value([], environment);
              }
              return builtin;
            }
            throw new Error(`Unknown ObjectValue filter: ${filter.value}`);
          }
        }
      } else if (operand instanceof BooleanValue) {
        switch (filter.value) {
          case "bool":
            return new BooleanValue(operand.value);
          case "int":
            return new IntegerValue(operand.value ? 1 : 0);
          case "float":
            return new FloatValue(operand.value ? 1 : 0);
          case "string":
            return new StringValue(operand.value ? "true" : "false");
          default:
            throw new Error(`Unknown BooleanValue filter: ${filter.value}`);
        }
      }
      throw new Error(`Cannot apply filter "${filter.value}" to type: ${operand.type}`);
    } else if (filterNode.type === "CallExpression") {
      const filter = filterNode;
      if (filter.callee.type !== "Identifier") {
        throw new Error(`Unknown filter: ${filter.callee.type}`);
      }
      const filterName = filter.callee.value;
      if (filterName === "tojson") {
        const [, kwargs] = this.evaluateArguments(filter.args, environment);
        const indent = kwargs.get("indent") ?? new NullValue();
        if (!(indent instanceof IntegerValue || indent instanceof NullValue)) {
          throw new Error("If set, indent must be a number");
        }
        const ensureAscii = kwargs.get("ensure_ascii") ?? new BooleanValue(false);
        if (!(ensureAscii instanceof BooleanValue)) {
          throw new Error("If set, ensure_ascii must be a boolean");
        }
        const sortKeys = kwargs.get("sort_keys") ?? new BooleanValue(false);
        if (!(sortKeys instanceof BooleanValue)) {
          throw new Error("If set, sort_keys must be a boolean");
        }
        const separatorsArg = kwargs.get("separators") ?? new NullValue();
        let separators = null;
        if (separatorsArg instanceof ArrayValue || separatorsArg instanceof TupleValue) {
          if (separatorsArg.value.length !== 2) {
            throw new Error("separators must be a tuple of two strings");
          }
          const [itemSep, keySep] = separatorsArg.value;
          if (!(itemSep instanceof StringValue) || !(keySep instanceof StringValue)) {
            throw new Error("separators must be a tuple of two strings");
          }
          separators = [itemSep.value, keySep.value];
        } else if (!(separatorsArg instanceof NullValue)) {
          throw new Error("If set, separators must be a tuple of two strings");
        }
        return new StringValue(
          toJSON(operand, {
            indent: indent.value,
            ensureAscii: ensureAscii.value,
            sortKeys: sortKeys.value,
            separators
          })
        );
      } else if (filterName === "join") {
        let value;
        if (operand instanceof StringValue) {
          value = Array.from(operand.value);
        } else if (operand instanceof ArrayValue) {
          value = operand.value.map((x) => x.value);
        } else {
          throw new Error(`Cannot apply filter "${filterName}" to type: ${operand.type}`);
        }
        const [args, kwargs] = this.evaluateArguments(filter.args, environment);
        const separator = args.at(0) ?? kwargs.get("separator") ?? new StringValue("");
        if (!(separator instanceof StringValue)) {
          throw new Error("separator must be a string");
        }
        return new StringValue(value.join(separator.value));
      } else if (filterName === "int" || filterName === "float") {
        const [args, kwargs] = this.evaluateArguments(filter.args, environment);
        const defaultValue = args.at(0) ?? kwargs.get("default") ?? (filterName === "int" ? new IntegerValue(0) : new FloatValue(0));
        if (operand instanceof StringValue) {
          const val = filterName === "int" ? parseInt(operand.value, 10) : parseFloat(operand.value);
          return isNaN(val) ? defaultValue : filterName === "int" ? new IntegerValue(val) : new FloatValue(val);
        } else if (operand instanceof IntegerValue || operand instanceof FloatValue) {
          return operand;
        } else if (operand instanceof BooleanValue) {
          return filterName === "int" ? new IntegerValue(operand.value ? 1 : 0) : new FloatValue(operand.value ? 1 : 0);
        } else {
          throw new Error(`Cannot apply filter "${filterName}" to type: ${operand.type}`);
        }
      } else if (filterName === "default") {
        const [args, kwargs] = this.evaluateArguments(filter.args, environment);
        const defaultValue = args[0] ?? new StringValue("");
        const booleanValue = args[1] ?? kwargs.get("boolean") ?? new BooleanValue(false);
        if (!(booleanValue instanceof BooleanValue)) {
          throw new Error("`default` filter flag must be a boolean");
        }
        if (operand instanceof UndefinedValue || booleanValue.value && !operand.__bool__().value) {
          return defaultValue;
        }
        return operand;
      }
      if (operand instanceof ArrayValue) {
        switch (filterName) {
          case "sort": {
            const [args, kwargs] = this.evaluateArguments(filter.args, environment);
            const reverse = args.at(0) ?? kwargs.get("reverse") ?? new BooleanValue(false);
            if (!(reverse instanceof BooleanValue)) {
              throw new Error("reverse must be a boolean");
            }
            const caseSensitive = args.at(1) ?? kwargs.get("case_sensitive") ?? new BooleanValue(false);
            if (!(caseSensitive instanceof BooleanValue)) {
              throw new Error("case_sensitive must be a boolean");
            }
            const attribute = args.at(2) ?? kwargs.get("attribute") ?? new NullValue();
            if (!(attribute instanceof StringValue || attribute instanceof IntegerValue || attribute instanceof NullValue)) {
              throw new Error("attribute must be a string, integer, or null");
            }
            const getSortValue = (item) => {
              if (attribute instanceof NullValue) {
                return item;
              }
              const attrPath = attribute instanceof IntegerValue ? String(attribute.value) : attribute.value;
              return getAttributeValue(item, attrPath);
            };
            return new ArrayValue(
              operand.value.slice().sort((a, b) => {
                const aVal = getSortValue(a);
                const bVal = getSortValue(b);
                const result = compareRuntimeValues(aVal, bVal, caseSensitive.value);
                return reverse.value ? -result : result;
              })
            );
          }
          case "selectattr":
          case "rejectattr": {
            const select = filterName === "selectattr";
            if (operand.value.some((item) => !isAttributeContainer(item))) {
              throw new Error(`\`${filterName}\` can only be applied to array of objects`);
            }
            if (filter.args.some((x) => x.type !== "StringLiteral")) {
              throw new Error(`arguments of \`${filterName}\` must be strings`);
            }
            const [attr, testName, value] = filter.args.map((x) => this.evaluate(x, environment));
            let testFunction;
            if (testName) {
              const test = environment.tests.get(testName.value);
              if (!test) {
                throw new Error(`Unknown test: ${testName.value}`);
              }
              testFunction = test;
            } else {
              testFunction = (...x) => x[0].__bool__().value;
            }
            const filtered = operand.value.filter((item) => {
              const a = item.value.get(attr.value);
              const result = a ? testFunction(a, value) : false;
              return select ? result : !result;
            });
            return new ArrayValue(filtered);
          }
          case "map": {
            const [, kwargs] = this.evaluateArguments(filter.args, environment);
            if (kwargs.has("attribute")) {
              const attr = kwargs.get("attribute");
              if (!(attr instanceof StringValue)) {
                throw new Error("attribute must be a string");
              }
              const defaultValue = kwargs.get("default");
              const mapped = operand.value.map((item) => {
                if (!isAttributeContainer(item)) {
                  throw new Error("items in map must be an object");
                }
                const value = getAttributeValue(item, attr.value);
                return value instanceof UndefinedValue ? defaultValue ?? new UndefinedValue() : value;
              });
              return new ArrayValue(mapped);
            } else {
              throw new Error("`map` expressions without `attribute` set are not currently supported.");
            }
          }
        }
        throw new Error(`Unknown ArrayValue filter: ${filterName}`);
      } else if (operand instanceof StringValue) {
        switch (filterName) {
          case "indent": {
            const [args, kwargs] = this.evaluateArguments(filter.args, environment);
            const width = args.at(0) ?? kwargs.get("width") ?? new IntegerValue(4);
            if (!(width instanceof IntegerValue)) {
              throw new Error("width must be a number");
            }
            const first = args.at(1) ?? kwargs.get("first") ?? new BooleanValue(false);
            const blank = args.at(2) ?? kwargs.get("blank") ?? new BooleanValue(false);
            const lines = operand.value.split("\n");
            const indent = " ".repeat(width.value);
            const indented = lines.map(
              (x, i) => !first.value && i === 0 || !blank.value && x.length === 0 ? x : indent + x
            );
            return new StringValue(indented.join("\n"));
          }
          case "replace": {
            const replaceFn = operand.builtins.get("replace");
            if (!(replaceFn instanceof FunctionValue)) {
              throw new Error("replace filter not available");
            }
            const [args, kwargs] = this.evaluateArguments(filter.args, environment);
            return replaceFn.value([...args, new KeywordArgumentsValue(kwargs)], environment);
          }
        }
        throw new Error(`Unknown StringValue filter: ${filterName}`);
      } else if (operand instanceof ObjectValue) {
        const builtin = operand.builtins.get(filterName);
        if (builtin && builtin instanceof FunctionValue) {
          const [args, kwargs] = this.evaluateArguments(filter.args, environment);
          if (kwargs.size > 0) {
            args.push(new KeywordArgumentsValue(kwargs));
          }
          return builtin.value(args, environment);
        }
        throw new Error(`Unknown ObjectValue filter: ${filterName}`);
      } else {
        throw new Error(`Cannot apply filter "${filterName}" to type: ${operand.type}`);
      }
    }
    throw new Error(`Unknown filter: ${filterNode.type}`);
  }
  /**
   * Evaluates expressions following the filter operation type.
   */
  evaluateFilterExpression(node, environment) {
    const operand = this.evaluate(node.operand, environment);
    return this.applyFilter(operand, node.filter, environment);
  }
  /**
   * Evaluates expressions following the test operation type.
   */
  evaluateTestExpression(node, environment) {
    const operand = this.evaluate(node.operand, environment);
    const test = environment.tests.get(node.test.value);
    if (!test) {
      throw new Error(`Unknown test: ${node.test.value}`);
    }
    const result = test(operand);
    return new BooleanValue(node.negate ? !result : result);
  }
  /**
   * Evaluates expressions following the select operation type.
   */
  evaluateSelectExpression(node, environment) {
    const predicate = this.evaluate(node.test, environment);
    if (!predicate.__bool__().value) {
      return new UndefinedValue();
    }
    return this.evaluate(node.lhs, environment);
  }
  /**
   * Evaluates expressions following the unary operation type.
   */
  evaluateUnaryExpression(node, environment) {
    const argument = this.evaluate(node.argument, environment);
    switch (node.operator.value) {
      case "not":
        return new BooleanValue(!argument.__bool__().value);
      case "+":
      case "-": {
        const sign = node.operator.value === "-" ? -1 : 1;
        if (argument instanceof IntegerValue || argument instanceof FloatValue || argument instanceof BooleanValue) {
          const value = argument instanceof BooleanValue ? argument.value ? 1 : 0 : argument.value;
          const result = sign * value;
          return argument instanceof FloatValue ? new FloatValue(result) : new IntegerValue(result);
        }
        throw new SyntaxError(`Unknown operator "${node.operator.value}" for ${argument.type}`);
      }
      default:
        throw new SyntaxError(`Unknown operator: ${node.operator.value}`);
    }
  }
  evaluateTernaryExpression(node, environment) {
    const cond = this.evaluate(node.condition, environment);
    return cond.__bool__().value ? this.evaluate(node.trueExpr, environment) : this.evaluate(node.falseExpr, environment);
  }
  evalProgram(program, environment) {
    return this.evaluateBlock(program.body, environment);
  }
  evaluateBlock(statements, environment) {
    let result = "";
    for (const statement of statements) {
      const lastEvaluated = this.evaluate(statement, environment);
      if (lastEvaluated.type !== "NullValue" && lastEvaluated.type !== "UndefinedValue") {
        result += lastEvaluated.toString();
      }
    }
    return new StringValue(result);
  }
  evaluateIdentifier(node, environment) {
    return environment.lookupVariable(node.value);
  }
  evaluateCallExpression(expr, environment) {
    const [args, kwargs] = this.evaluateArguments(expr.args, environment);
    if (kwargs.size > 0) {
      args.push(new KeywordArgumentsValue(kwargs));
    }
    const fn = this.evaluate(expr.callee, environment);
    if (fn.type !== "FunctionValue") {
      throw new Error(`Cannot call something that is not a function: got ${fn.type}`);
    }
    return fn.value(args, environment);
  }
  evaluateSliceExpression(object, expr, environment) {
    if (!(object instanceof ArrayValue || object instanceof StringValue)) {
      throw new Error("Slice object must be an array or string");
    }
    const start = this.evaluate(expr.start, environment);
    const stop = this.evaluate(expr.stop, environment);
    const step = this.evaluate(expr.step, environment);
    if (!(start instanceof IntegerValue || start instanceof UndefinedValue)) {
      throw new Error("Slice start must be numeric or undefined");
    }
    if (!(stop instanceof IntegerValue || stop instanceof UndefinedValue)) {
      throw new Error("Slice stop must be numeric or undefined");
    }
    if (!(step instanceof IntegerValue || step instanceof UndefinedValue)) {
      throw new Error("Slice step must be numeric or undefined");
    }
    if (object instanceof ArrayValue) {
      return new ArrayValue(slice(object.value, start.value, stop.value, step.value));
    } else {
      return new StringValue(slice(Array.from(object.value), start.value, stop.value, step.value).join(""));
    }
  }
  evaluateMemberExpression(expr, environment) {
    const object = this.evaluate(expr.object, environment);
    let property;
    if (expr.computed) {
      if (expr.property.type === "SliceExpression") {
        return this.evaluateSliceExpression(object, expr.property, environment);
      } else {
        property = this.evaluate(expr.property, environment);
      }
    } else if (expr.property.type === "IntegerLiteral") {
      property = new IntegerValue(expr.property.value);
    } else {
      property = new StringValue(expr.property.value);
    }
    let value;
    if (isAttributeContainer(object)) {
      if (!(property instanceof StringValue)) {
        throw new Error(`Cannot access property with non-string: got ${property.type}`);
      }
      value = object.value.get(property.value) ?? (object instanceof ObjectValue ? object.builtins.get(property.value) : void 0);
    } else if (object instanceof ArrayValue || object instanceof StringValue) {
      if (property instanceof IntegerValue) {
        if (object instanceof StringValue) {
          const character = object.value.at(property.value);
          value = character === void 0 ? void 0 : new StringValue(character);
        } else {
          value = object.value.at(property.value);
        }
      } else if (property instanceof StringValue) {
        value = object.builtins.get(property.value);
      } else {
        throw new Error(`Cannot access property with non-string/non-number: got ${property.type}`);
      }
    } else {
      if (!(property instanceof StringValue)) {
        throw new Error(`Cannot access property with non-string: got ${property.type}`);
      }
      value = object.builtins.get(property.value);
    }
    return value instanceof RuntimeValue ? value : new UndefinedValue();
  }
  evaluateSet(node, environment) {
    const rhs = node.value ? this.evaluate(node.value, environment) : this.evaluateBlock(node.body, environment);
    if (node.assignee.type === "Identifier") {
      const variableName = node.assignee.value;
      environment.setVariable(variableName, rhs);
    } else if (node.assignee.type === "TupleLiteral") {
      const tuple = node.assignee;
      if (!(rhs instanceof ArrayValue)) {
        throw new Error(`Cannot unpack non-iterable type in set: ${rhs.type}`);
      }
      const arr = rhs.value;
      if (arr.length !== tuple.value.length) {
        throw new Error(`Too ${tuple.value.length > arr.length ? "few" : "many"} items to unpack in set`);
      }
      for (let i = 0; i < tuple.value.length; ++i) {
        const elem = tuple.value[i];
        if (elem.type !== "Identifier") {
          throw new Error(`Cannot unpack to non-identifier in set: ${elem.type}`);
        }
        environment.setVariable(elem.value, arr[i]);
      }
    } else if (node.assignee.type === "MemberExpression") {
      const member = node.assignee;
      const object = this.evaluate(member.object, environment);
      if (!(object instanceof NamespaceValue)) {
        throw new Error("cannot assign attribute on non-namespace object");
      }
      if (member.property.type !== "Identifier") {
        throw new Error("Cannot assign to member with non-identifier property");
      }
      object.value.set(member.property.value, rhs);
    } else {
      throw new Error(`Invalid LHS inside assignment expression: ${JSON.stringify(node.assignee)}`);
    }
    return new NullValue();
  }
  evaluateIf(node, environment) {
    const test = this.evaluate(node.test, environment);
    return this.evaluateBlock(test.__bool__().value ? node.body : node.alternate, environment);
  }
  evaluateFor(node, environment) {
    const scope = new Environment(environment);
    let test, iterable;
    if (node.iterable.type === "SelectExpression") {
      const select = node.iterable;
      iterable = this.evaluate(select.lhs, scope);
      test = select.test;
    } else {
      iterable = this.evaluate(node.iterable, scope);
    }
    if (!(iterable instanceof ArrayValue || iterable instanceof ObjectValue)) {
      throw new Error(`Expected iterable or object type in for loop: got ${iterable.type}`);
    }
    if (iterable instanceof ObjectValue) {
      iterable = iterable.keys();
    }
    const items = [];
    const scopeUpdateFunctions = [];
    for (let i = 0; i < iterable.value.length; ++i) {
      const loopScope = new Environment(scope);
      const current = iterable.value[i];
      let scopeUpdateFunction;
      if (node.loopvar.type === "Identifier") {
        scopeUpdateFunction = (scope2) => scope2.setVariable(node.loopvar.value, current);
      } else if (node.loopvar.type === "TupleLiteral") {
        const loopvar = node.loopvar;
        if (current.type !== "ArrayValue") {
          throw new Error(`Cannot unpack non-iterable type: ${current.type}`);
        }
        const c = current;
        if (loopvar.value.length !== c.value.length) {
          throw new Error(`Too ${loopvar.value.length > c.value.length ? "few" : "many"} items to unpack`);
        }
        scopeUpdateFunction = (scope2) => {
          for (let j = 0; j < loopvar.value.length; ++j) {
            if (loopvar.value[j].type !== "Identifier") {
              throw new Error(`Cannot unpack non-identifier type: ${loopvar.value[j].type}`);
            }
            scope2.setVariable(loopvar.value[j].value, c.value[j]);
          }
        };
      } else {
        throw new Error(`Invalid loop variable(s): ${node.loopvar.type}`);
      }
      if (test) {
        scopeUpdateFunction(loopScope);
        const testValue = this.evaluate(test, loopScope);
        if (!testValue.__bool__().value) {
          continue;
        }
      }
      items.push(current);
      scopeUpdateFunctions.push(scopeUpdateFunction);
    }
    let result = "";
    let noIteration = true;
    for (let i = 0; i < items.length; ++i) {
      const loop = /* @__PURE__ */ new Map([
        ["index", new IntegerValue(i + 1)],
        ["index0", new IntegerValue(i)],
        ["revindex", new IntegerValue(items.length - i)],
        ["revindex0", new IntegerValue(items.length - i - 1)],
        ["first", new BooleanValue(i === 0)],
        ["last", new BooleanValue(i === items.length - 1)],
        ["length", new IntegerValue(items.length)],
        ["previtem", i > 0 ? items[i - 1] : new UndefinedValue()],
        ["nextitem", i < items.length - 1 ? items[i + 1] : new UndefinedValue()]
      ]);
      scope.setVariable("loop", new ObjectValue(loop));
      scopeUpdateFunctions[i](scope);
      try {
        const evaluated = this.evaluateBlock(node.body, scope);
        result += evaluated.value;
      } catch (err) {
        if (err instanceof ContinueControl) {
          continue;
        }
        if (err instanceof BreakControl) {
          break;
        }
        throw err;
      }
      noIteration = false;
    }
    if (noIteration) {
      const defaultEvaluated = this.evaluateBlock(node.defaultBlock, scope);
      result += defaultEvaluated.value;
    }
    return new StringValue(result);
  }
  /**
   * Bind every parameter name and special argument before evaluating defaults,
   * preventing unbound parameters from resolving in an outer scope.
   */
  bindMacroArguments(displayName, parameters, specialArguments, args, scope) {
    const positionalArguments = args.slice();
    let keywordArguments = /* @__PURE__ */ new Map();
    if (positionalArguments.at(-1) instanceof KeywordArgumentsValue) {
      keywordArguments = new Map(positionalArguments.pop().value);
    }
    const pendingDefaults = [];
    for (let i = 0; i < parameters.length; ++i) {
      const { name, defaultValue } = getParameterDescriptor(parameters[i]);
      let value = positionalArguments[i];
      if (value === void 0 && keywordArguments.has(name)) {
        value = keywordArguments.get(name);
        keywordArguments.delete(name);
      }
      if (value === void 0 && defaultValue !== void 0) {
        pendingDefaults.push([name, defaultValue]);
      }
      scope.setVariable(name, value ?? new UndefinedValue());
    }
    if (specialArguments.has("kwargs")) {
      scope.setVariable("kwargs", new ObjectValue(keywordArguments));
    } else if (keywordArguments.size > 0) {
      throw new Error(`macro ${displayName} takes no keyword argument '${keywordArguments.keys().next().value}'`);
    }
    if (specialArguments.has("varargs")) {
      scope.setVariable("varargs", new ArrayValue(positionalArguments.slice(parameters.length)));
    } else if (positionalArguments.length > parameters.length) {
      throw new Error(`macro ${displayName} takes not more than ${parameters.length} argument(s)`);
    }
    for (const [name, defaultValue] of pendingDefaults) {
      scope.setVariable(name, this.evaluate(defaultValue, scope));
    }
  }
  /**
   * See https://jinja.palletsprojects.com/en/3.1.x/templates/#macros for more information.
   */
  evaluateMacro(node, environment) {
    const specialArguments = findAccessedSpecialMacroArguments(node.args, node.body);
    environment.setVariable(
      node.name.value,
      new FunctionValue((args, scope) => {
        const macroScope = new Environment(scope);
        this.bindMacroArguments(`'${node.name.value}'`, node.args, specialArguments, args, macroScope);
        return this.evaluateBlock(node.body, macroScope);
      })
    );
    return new NullValue();
  }
  evaluateCallStatement(node, environment) {
    const parameters = node.callerArgs ?? [];
    const specialArguments = findAccessedSpecialMacroArguments(parameters, node.body);
    const callerFn = new FunctionValue((callerArguments) => {
      const callBlockEnv = new Environment(environment);
      this.bindMacroArguments("None", parameters, specialArguments, callerArguments, callBlockEnv);
      return this.evaluateBlock(node.body, callBlockEnv);
    });
    const [macroArgs, macroKwargs] = this.evaluateArguments(node.call.args, environment);
    macroArgs.push(new KeywordArgumentsValue(macroKwargs));
    const fn = this.evaluate(node.call.callee, environment);
    if (fn.type !== "FunctionValue") {
      throw new Error(`Cannot call something that is not a function: got ${fn.type}`);
    }
    const newEnv = new Environment(environment);
    newEnv.setVariable("caller", callerFn);
    return fn.value(macroArgs, newEnv);
  }
  evaluateFilterStatement(node, environment) {
    const rendered = this.evaluateBlock(node.body, environment);
    return this.applyFilter(rendered, node.filter, environment);
  }
  evaluate(statement, environment) {
    if (!statement) {
      return new UndefinedValue();
    }
    switch (statement.type) {
      case "Program":
        return this.evalProgram(statement, environment);
      case "Set":
        return this.evaluateSet(statement, environment);
      case "If":
        return this.evaluateIf(statement, environment);
      case "For":
        return this.evaluateFor(statement, environment);
      case "Macro":
        return this.evaluateMacro(statement, environment);
      case "CallStatement":
        return this.evaluateCallStatement(statement, environment);
      case "Break":
        throw new BreakControl();
      case "Continue":
        throw new ContinueControl();
      case "IntegerLiteral":
        return new IntegerValue(statement.value);
      case "FloatLiteral":
        return new FloatValue(statement.value);
      case "StringLiteral":
        return new StringValue(statement.value);
      case "ArrayLiteral":
        return new ArrayValue(statement.value.map((x) => this.evaluate(x, environment)));
      case "TupleLiteral":
        return new TupleValue(statement.value.map((x) => this.evaluate(x, environment)));
      case "ObjectLiteral": {
        const mapping = /* @__PURE__ */ new Map();
        for (const [key, value] of statement.value) {
          const evaluatedKey = this.evaluate(key, environment);
          if (!(evaluatedKey instanceof StringValue)) {
            throw new Error(`Object keys must be strings: got ${evaluatedKey.type}`);
          }
          mapping.set(evaluatedKey.value, this.evaluate(value, environment));
        }
        return new ObjectValue(mapping);
      }
      case "Identifier":
        return this.evaluateIdentifier(statement, environment);
      case "CallExpression":
        return this.evaluateCallExpression(statement, environment);
      case "MemberExpression":
        return this.evaluateMemberExpression(statement, environment);
      case "UnaryExpression":
        return this.evaluateUnaryExpression(statement, environment);
      case "BinaryExpression":
        return this.evaluateBinaryExpression(statement, environment);
      case "FilterExpression":
        return this.evaluateFilterExpression(statement, environment);
      case "FilterStatement":
        return this.evaluateFilterStatement(statement, environment);
      case "TestExpression":
        return this.evaluateTestExpression(statement, environment);
      case "SelectExpression":
        return this.evaluateSelectExpression(statement, environment);
      case "Ternary":
        return this.evaluateTernaryExpression(statement, environment);
      case "Comment":
        return new NullValue();
      default:
        throw new SyntaxError(`Unknown node type: ${statement.type}`);
    }
  }
};
function convertToRuntimeValues(input) {
  switch (typeof input) {
    case "number":
      return Number.isInteger(input) ? new IntegerValue(input) : new FloatValue(input);
    case "string":
      return new StringValue(input);
    case "boolean":
      return new BooleanValue(input);
    case "undefined":
      return new UndefinedValue();
    case "object":
      if (input === null) {
        return new NullValue();
      } else if (Array.isArray(input)) {
        return new ArrayValue(input.map(convertToRuntimeValues));
      } else {
        return new ObjectValue(
          new Map(Object.entries(input).map(([key, value]) => [key, convertToRuntimeValues(value)]))
        );
      }
    case "function":
      return new FunctionValue((args, _scope) => {
        const result = input(...args.map((x) => x.value)) ?? null;
        return convertToRuntimeValues(result);
      });
    default:
      throw new Error(`Cannot convert to runtime value: ${input}`);
  }
}
var NEWLINE = "\n";
var OPEN_STATEMENT = "{%- ";
var CLOSE_STATEMENT = " -%}";
var PRECEDENCE = Object.freeze({
  CONDITIONAL: 0,
  // a if b else c
  LOGICAL_OR: 1,
  // or
  LOGICAL_AND: 2,
  // and
  LOGICAL_NOT: 3,
  // not a
  COMPARISON: 4,
  // == != < <= > >= in, not in
  ADDITIVE: 5,
  // + -
  MULTIPLICATIVE: 6,
  // * / // %
  EXPONENTIATION: 7,
  // **
  TEST: 8,
  // is
  FILTER: 9,
  // |
  UNARY_SIGN: 10,
  // -a +a
  ATOM: 11
  // literals, identifiers, calls, member accesses
});
function getBinaryOperatorPrecedence(expr) {
  switch (expr.operator.type) {
    case "ExponentiationBinaryOperator":
      return PRECEDENCE.EXPONENTIATION;
    case "MultiplicativeBinaryOperator":
      return PRECEDENCE.MULTIPLICATIVE;
    case "AdditiveBinaryOperator":
      return PRECEDENCE.ADDITIVE;
    case "ComparisonBinaryOperator":
      return PRECEDENCE.COMPARISON;
    case "Identifier":
      if (expr.operator.value === "and") {
        return PRECEDENCE.LOGICAL_AND;
      }
      if (expr.operator.value === "in" || expr.operator.value === "not in") {
        return PRECEDENCE.COMPARISON;
      }
      return PRECEDENCE.LOGICAL_OR;
  }
  return PRECEDENCE.LOGICAL_OR;
}
function getPrecedence(node) {
  switch (node.type) {
    case "SelectExpression":
    case "Ternary":
      return PRECEDENCE.CONDITIONAL;
    case "BinaryExpression":
      return getBinaryOperatorPrecedence(node);
    case "UnaryExpression":
      return node.operator.value === "not" ? PRECEDENCE.LOGICAL_NOT : PRECEDENCE.UNARY_SIGN;
    case "TestExpression":
      return PRECEDENCE.TEST;
    case "FilterExpression":
      return PRECEDENCE.FILTER;
    default:
      return PRECEDENCE.ATOM;
  }
}
function formatOperand(node, minPrecedence) {
  const expr = formatExpression(node);
  return getPrecedence(node) < minPrecedence ? `(${expr})` : expr;
}
function format(program, indent = "	") {
  const indentStr = typeof indent === "number" ? " ".repeat(indent) : indent;
  const body = formatStatements(program.body, 0, indentStr);
  return body.replace(/\n$/, "");
}
function createStatement(...text) {
  return OPEN_STATEMENT + text.join(" ") + CLOSE_STATEMENT;
}
function formatStatements(stmts, depth, indentStr) {
  return stmts.map((stmt) => formatStatement(stmt, depth, indentStr)).join(NEWLINE);
}
function formatExpressionList(expressions) {
  return expressions.map((expression) => formatExpression(expression)).join(", ");
}
function formatStatement(node, depth, indentStr) {
  const pad = indentStr.repeat(depth);
  switch (node.type) {
    case "Program":
      return formatStatements(node.body, depth, indentStr);
    case "If":
      return formatIf(node, depth, indentStr);
    case "For":
      return formatFor(node, depth, indentStr);
    case "Set":
      return formatSet(node, depth, indentStr);
    case "Macro":
      return formatMacro(node, depth, indentStr);
    case "Break":
      return pad + createStatement("break");
    case "Continue":
      return pad + createStatement("continue");
    case "CallStatement":
      return formatCallStatement(node, depth, indentStr);
    case "FilterStatement":
      return formatFilterStatement(node, depth, indentStr);
    case "Comment":
      return pad + "{# " + node.value + " #}";
    default:
      return pad + "{{- " + formatExpression(node) + " -}}";
  }
}
function formatIf(node, depth, indentStr) {
  const pad = indentStr.repeat(depth);
  const clauses = [];
  let current = node;
  while (current) {
    clauses.push({ test: current.test, body: current.body });
    if (current.alternate.length === 1 && current.alternate[0].type === "If") {
      current = current.alternate[0];
    } else {
      break;
    }
  }
  let out = pad + createStatement("if", formatExpression(clauses[0].test)) + NEWLINE + formatStatements(clauses[0].body, depth + 1, indentStr);
  for (let i = 1; i < clauses.length; ++i) {
    out += NEWLINE + pad + createStatement("elif", formatExpression(clauses[i].test)) + NEWLINE + formatStatements(clauses[i].body, depth + 1, indentStr);
  }
  if (current && current.alternate.length > 0) {
    out += NEWLINE + pad + createStatement("else") + NEWLINE + formatStatements(current.alternate, depth + 1, indentStr);
  }
  out += NEWLINE + pad + createStatement("endif");
  return out;
}
function formatFor(node, depth, indentStr) {
  const pad = indentStr.repeat(depth);
  let formattedIterable = "";
  if (node.iterable.type === "SelectExpression") {
    const n = node.iterable;
    formattedIterable = `${formatExpression(n.lhs)} if ${formatExpression(n.test)}`;
  } else {
    formattedIterable = formatExpression(node.iterable);
  }
  let out = pad + createStatement("for", formatExpression(node.loopvar), "in", formattedIterable) + NEWLINE + formatStatements(node.body, depth + 1, indentStr);
  if (node.defaultBlock.length > 0) {
    out += NEWLINE + pad + createStatement("else") + NEWLINE + formatStatements(node.defaultBlock, depth + 1, indentStr);
  }
  out += NEWLINE + pad + createStatement("endfor");
  return out;
}
function formatSet(node, depth, indentStr) {
  const pad = indentStr.repeat(depth);
  const left = formatExpression(node.assignee);
  const right = node.value ? formatExpression(node.value) : "";
  const value = pad + createStatement("set", `${left}${node.value ? " = " + right : ""}`);
  if (node.body.length === 0) {
    return value;
  }
  return value + NEWLINE + formatStatements(node.body, depth + 1, indentStr) + NEWLINE + pad + createStatement("endset");
}
function formatMacro(node, depth, indentStr) {
  const pad = indentStr.repeat(depth);
  const args = formatExpressionList(node.args);
  return pad + createStatement("macro", `${node.name.value}(${args})`) + NEWLINE + formatStatements(node.body, depth + 1, indentStr) + NEWLINE + pad + createStatement("endmacro");
}
function formatCallStatement(node, depth, indentStr) {
  const pad = indentStr.repeat(depth);
  const params = node.callerArgs && node.callerArgs.length > 0 ? `(${formatExpressionList(node.callerArgs)})` : "";
  const callExpr = formatExpression(node.call);
  let out = pad + createStatement(`call${params}`, callExpr) + NEWLINE;
  out += formatStatements(node.body, depth + 1, indentStr) + NEWLINE;
  out += pad + createStatement("endcall");
  return out;
}
function formatFilterStatement(node, depth, indentStr) {
  const pad = indentStr.repeat(depth);
  const spec2 = node.filter.type === "Identifier" ? node.filter.value : formatExpression(node.filter);
  let out = pad + createStatement("filter", spec2) + NEWLINE;
  out += formatStatements(node.body, depth + 1, indentStr) + NEWLINE;
  out += pad + createStatement("endfilter");
  return out;
}
function formatExpression(node) {
  switch (node.type) {
    case "SpreadExpression": {
      const n = node;
      return `*${formatExpression(n.argument)}`;
    }
    case "KeywordSpreadExpression": {
      const n = node;
      return `**${formatExpression(n.argument)}`;
    }
    case "Identifier":
      return node.value;
    case "IntegerLiteral":
      return `${node.value}`;
    case "FloatLiteral": {
      const value = node.value;
      if (Object.is(value, -0)) {
        return "-0.0";
      }
      return value % 1 === 0 ? value.toFixed(1) : value.toString();
    }
    case "StringLiteral":
      return JSON.stringify(node.value);
    case "BinaryExpression": {
      const n = node;
      const thisPrecedence = getBinaryOperatorPrecedence(n);
      const left = formatOperand(n.left, thisPrecedence);
      const right = formatOperand(n.right, thisPrecedence + 1);
      return `${left} ${n.operator.value} ${right}`;
    }
    case "UnaryExpression": {
      const n = node;
      const operandPrecedence = n.argument.type === "UnaryExpression" ? getPrecedence(n) : PRECEDENCE.ATOM;
      return n.operator.value + (n.operator.value === "not" ? " " : "") + formatOperand(n.argument, operandPrecedence);
    }
    case "CallExpression": {
      const n = node;
      const args = formatExpressionList(n.args);
      return `${formatExpression(n.callee)}(${args})`;
    }
    case "MemberExpression": {
      const n = node;
      const obj = formatOperand(n.object, PRECEDENCE.ATOM);
      let prop = formatExpression(n.property);
      if (!n.computed && n.property.type !== "Identifier" && n.property.type !== "IntegerLiteral") {
        prop = `(${prop})`;
      }
      return n.computed ? `${obj}[${prop}]` : `${obj}.${prop}`;
    }
    case "FilterExpression": {
      const n = node;
      const operand = formatOperand(n.operand, PRECEDENCE.FILTER);
      if (n.filter.type === "CallExpression") {
        return `${operand} | ${formatExpression(n.filter)}`;
      }
      return `${operand} | ${n.filter.value}`;
    }
    case "SelectExpression": {
      const n = node;
      return `${formatOperand(n.lhs, PRECEDENCE.LOGICAL_OR)} if ${formatOperand(n.test, PRECEDENCE.LOGICAL_OR)}`;
    }
    case "TestExpression": {
      const n = node;
      return `${formatOperand(n.operand, PRECEDENCE.TEST)} is${n.negate ? " not" : ""} ${n.test.value}`;
    }
    case "ArrayLiteral":
    case "TupleLiteral": {
      const elems = formatExpressionList(node.value);
      const brackets = node.type === "ArrayLiteral" ? "[]" : "()";
      return `${brackets[0]}${elems}${brackets[1]}`;
    }
    case "ObjectLiteral": {
      const entries = Array.from(node.value.entries()).map(
        ([k, v]) => `${formatExpression(k)}: ${formatExpression(v)}`
      );
      return `{${entries.join(", ")}}`;
    }
    case "SliceExpression": {
      const n = node;
      const s = n.start ? formatExpression(n.start) : "";
      const t = n.stop ? formatExpression(n.stop) : "";
      const st = n.step ? `:${formatExpression(n.step)}` : "";
      return `${s}:${t}${st}`;
    }
    case "KeywordArgumentExpression": {
      const n = node;
      return `${n.key.value}=${formatExpression(n.value)}`;
    }
    case "Ternary": {
      const n = node;
      return `${formatOperand(n.trueExpr, PRECEDENCE.LOGICAL_OR)} if ${formatOperand(
        n.condition,
        PRECEDENCE.LOGICAL_OR
      )} else ${formatOperand(n.falseExpr, PRECEDENCE.CONDITIONAL)}`;
    }
    default:
      throw new Error(`Unknown expression type: ${node.type}`);
  }
}
var Template = class {
  parsed;
  /**
   * @param {string} template The template string
   */
  constructor(template) {
    const tokens = tokenize(template, {
      lstrip_blocks: true,
      trim_blocks: true
    });
    this.parsed = parse2(tokens);
  }
  render(items) {
    const env = new Environment();
    setupGlobals(env);
    if (items) {
      for (const [key, value] of Object.entries(items)) {
        env.set(key, value);
      }
    }
    const interpreter = new Interpreter(env);
    const result = interpreter.run(this.parsed);
    return result.value;
  }
  format(options) {
    return format(this.parsed, options?.indent || "	");
  }
};

// src/decoder.ts
var FIXED = ["rmsnorm", "rope", "kv_store", "attention", "swiglu", "add", "embed_q8", "embed_q4", "embed_f32"];
var PAGE3 = 65536;
var FORMATS = ["f32", "q4_0", "q4_1", "q8_0"];
var STEPS = ["embed", "rms_norm", "matmul", "rope", "kv_store", "attention", "swi_glu", "add"];
function align2(x) {
  return Math.ceil(x / 64) * 64;
}
function bucketOf(graph, tokens) {
  return graph.buckets.find((b) => b >= Math.max(1, tokens)) ?? null;
}
var MERGE_PARTS = 16;
function mergedRun(graph, f) {
  const prev = graph.steps[f.first - 1];
  const product = graph.steps.slice(f.first, f.first + f.steps).find((s) => s.step === "matmul");
  const [base, ...suffixes] = f.kernel.split("+");
  if (prev?.step !== "attention" || !product || product.format === "f32" || product.a !== prev.out || suffixes.includes("rms_norm") || suffixes.includes("merge") || f.k !== prev.heads * prev.head_dim) return null;
  return { op: [base, "merge", ...suffixes].join("+"), shape: [1, f.k, f.n, prev.heads, MERGE_PARTS], attention: prev };
}
function productsOf(graph, m, fused = false, merge = true) {
  const out = [];
  const add = (op, shape) => {
    const p = out.find((x) => x.op === op && x.shape.join() === shape.join());
    if (p) p.calls++;
    else out.push({ op, shape, calls: 1 });
  };
  const runs = new Map((fused && m === 1 ? graph.fused ?? [] : []).map((f) => [f.first, f]));
  for (let i = 0; i < graph.steps.length; i++) {
    const f = runs.get(i);
    if (f) {
      const merged = merge ? mergedRun(graph, f) : null;
      if (merged) add(merged.op, merged.shape);
      else add(f.kernel, [1, f.k, f.n]);
      i += f.steps - 1;
      continue;
    }
    const s = graph.steps[i];
    if (s.step === "matmul") add(s.kernel, [s.last ? 1 : m, s.k, s.n]);
  }
  const work = (p) => (p.op.includes("+swiglu") ? 2 : 1) * p.calls * p.shape[0] * p.shape[1] * p.shape[2];
  return out.sort((a, b) => work(b) - work(a) || (a.op < b.op ? -1 : a.op > b.op ? 1 : 0) || a.shape[0] - b.shape[0] || a.shape[1] - b.shape[1] || a.shape[2] - b.shape[2]);
}
function partBytes(format2, part, n, k) {
  if (k === 0) return n * 4;
  switch (format2) {
    case "f32":
      return n * k * 4;
    case "q8_0":
      return part === "w" ? n * k : n * k / 8;
    default:
      return part === "w" ? n * k / 2 : n * k / 8;
  }
}
function partsOf(format2) {
  return format2 === "q4_1" ? ["w", "d", "m"] : format2 === "f32" ? ["w"] : ["w", "d"];
}
function layoutOf(graph, weightBytes, context) {
  const maxRows = Math.max(1, ...graph.buckets);
  const rope = graph.steps.find((s) => s.step === "rope");
  let at = 64;
  const ids = at;
  at = align2(at + maxRows * 4);
  const weights = at;
  at = align2(at + weightBytes);
  const buffers = /* @__PURE__ */ new Map();
  for (const b of graph.buffers) {
    buffers.set(b.name, at);
    at = align2(at + (b.rows === "tokens" ? maxRows : 1) * b.cols * 4);
  }
  const caches = /* @__PURE__ */ new Map();
  for (const c of graph.caches) {
    caches.set(c.name, at);
    at = align2(at + context * c.cols * 4);
  }
  const headDim = rope?.head_dim ?? 4;
  const ropeAt = at;
  at = align2(at + context * headDim * 4);
  const group = Math.max(1, ...graph.steps.map((s) => s.step === "attention" ? Math.floor(s.heads / Math.max(1, s.kv_heads)) : 1));
  const scores = at;
  at = align2(at + group * (context + 4) * 4);
  return { ids, weights, buffers, caches, rope: ropeAt, scores, bytes: at, maxRows, headDim, theta: rope?.theta ?? 1e4 };
}
function checkGraph(graph, tensors, weightBytes) {
  if (!graph || graph.version !== 1) throw new Error(`decoder graph version ${graph?.version}: this runtime runs version 1`);
  const pos = (x) => Number.isInteger(x) && x > 0;
  if (!pos(graph.hidden) || !pos(graph.vocab) || !pos(graph.context)) throw new Error("decoder graph: hidden, vocab and context must be positive integers");
  if (!Array.isArray(graph.buckets) || !graph.buckets.length || graph.buckets.some((b, i) => !pos(b) || i > 0 && b <= graph.buckets[i - 1]))
    throw new Error(`decoder graph: buckets [${graph.buckets}] must be positive and ascending`);
  if (graph.hidden % 32) throw new Error(`decoder graph: hidden ${graph.hidden} is not a multiple of 32`);
  const bufs = new Map(graph.buffers.map((b) => [b.name, b]));
  const caches = new Map(graph.caches.map((c) => [c.name, c]));
  for (const b of graph.buffers) if (!pos(b.cols) || b.cols % 4 || b.rows !== "tokens" && b.rows !== "one") throw new Error(`decoder graph: buffer ${b.name} has ${b.cols} columns of rows '${b.rows}' (a positive multiple of 4 of 'tokens' or 'one')`);
  for (const c of graph.caches) if (!pos(c.cols) || c.cols % 4) throw new Error(`decoder graph: cache ${c.name} has ${c.cols} columns (a positive multiple of 4)`);
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const buf = (name, cols, what, rows) => {
    const b = bufs.get(name);
    if (!b) throw new Error(`decoder graph: ${what} names no buffer \`${name}\``);
    if (b.cols < cols) throw new Error(`decoder graph: ${what} needs ${cols} columns of buffer \`${name}\`, which has ${b.cols}`);
    if (rows && b.rows !== rows) throw new Error(`decoder graph: ${what} needs buffer \`${name}\` to have rows '${rows}'`);
  };
  const cache = (name, cols, what) => {
    const c = caches.get(name);
    if (!c) throw new Error(`decoder graph: ${what} names no cache \`${name}\``);
    if (c.cols !== cols) throw new Error(`decoder graph: ${what} needs cache \`${name}\` of ${cols} columns, it has ${c.cols}`);
  };
  const tensor = (name, format2, n, k, what) => {
    const t = byName.get(name);
    if (!t) throw new Error(`the bundle has no tensor \`${name}\` (${what})`);
    if (t.format !== format2) throw new Error(`tensor \`${name}\` is ${t.format}, the graph's ${what} reads ${format2}`);
    for (const p of partsOf(format2)) {
      const part = t.parts?.[p];
      if (!part) throw new Error(`tensor \`${name}\` has no part \`${p}\``);
      const need = partBytes(format2, p, n, k);
      if (!(Number.isInteger(part.offset) && part.offset >= 0 && part.offset % 16 === 0 && part.offset + part.bytes <= weightBytes))
        throw new Error(`tensor \`${name}\` part \`${p}\` (${part.bytes} bytes at ${part.offset}) lies outside the ${weightBytes}-byte weights blob or off a 16-byte boundary`);
      if (part.bytes < need) throw new Error(`tensor \`${name}\` part \`${p}\` has ${part.bytes} bytes, ${what} reads ${need}`);
    }
  };
  const h = graph.hidden;
  for (const [i, s] of graph.steps.entries()) {
    const what = `step ${i} (${s.step})`;
    if (!STEPS.includes(s.step)) throw new Error(`decoder graph: ${what} is not a step this runtime runs`);
    switch (s.step) {
      case "embed":
        if (!FORMATS.includes(s.format)) throw new Error(`decoder graph: ${what} has format ${s.format}`);
        buf(s.out, h, what, "tokens");
        tensor(s.table, s.format, graph.vocab, h, what);
        break;
      case "rms_norm":
        buf(s.x, h, what, "tokens");
        buf(s.out, h, what, s.last ? void 0 : "tokens");
        tensor(s.weight, "f32", h, 0, what);
        break;
      case "matmul":
        if (!FORMATS.includes(s.format)) throw new Error(`decoder graph: ${what} has format ${s.format}`);
        if (!pos(s.k) || !pos(s.n) || s.k % 32) throw new Error(`decoder graph: ${what} has K ${s.k} (a positive multiple of 32) and N ${s.n}`);
        buf(s.a, s.k, what);
        if (!s.last && bufs.get(s.a).rows !== "tokens") throw new Error(`decoder graph: ${what} reads bucket rows from the one row of \`${s.a}\``);
        buf(s.out, s.n, what);
        if (bufs.get(s.a).cols !== s.k) throw new Error(`decoder graph: ${what} reads rows of ${s.k} from buffer \`${s.a}\` of ${bufs.get(s.a).cols} columns`);
        if (bufs.get(s.out).cols !== s.n) throw new Error(`decoder graph: ${what} writes rows of ${s.n} into buffer \`${s.out}\` of ${bufs.get(s.out).cols} columns`);
        if (!s.last && bufs.get(s.out).rows !== "tokens") throw new Error(`decoder graph: ${what} writes bucket rows into the one row of \`${s.out}\``);
        tensor(s.weight, s.format, s.n, s.k, what);
        break;
      case "rope":
        if (!pos(s.head_dim) || s.head_dim % 4 || !pos(s.stride) || s.stride % 4) throw new Error(`decoder graph: ${what} has head_dim ${s.head_dim} and stride ${s.stride} (multiples of 4)`);
        buf(s.x, s.heads * s.head_dim, what, "tokens");
        if (bufs.get(s.x).cols !== s.stride) throw new Error(`decoder graph: ${what} has stride ${s.stride}, buffer \`${s.x}\` rows of ${bufs.get(s.x).cols}`);
        if (s.head_dim !== layoutOf(graph, 0, 1).headDim || s.theta !== layoutOf(graph, 0, 1).theta) throw new Error(`decoder graph: ${what}: every rope step must share one head_dim and theta (the table is one)`);
        break;
      case "kv_store":
        if (s.stride % 4 || s.k_col % 4 || s.v_col % 4 || s.width % 4) throw new Error(`decoder graph: ${what}: stride, columns and width must be multiples of 4`);
        buf(s.x, Math.max(s.k_col, s.v_col) + s.width, what, "tokens");
        if (bufs.get(s.x).cols !== s.stride) throw new Error(`decoder graph: ${what} has stride ${s.stride}, buffer \`${s.x}\` rows of ${bufs.get(s.x).cols}`);
        cache(s.k_cache, s.width, what);
        cache(s.v_cache, s.width, what);
        break;
      case "attention":
        if (!pos(s.kv_heads) || s.heads % s.kv_heads || !pos(s.head_dim) || s.head_dim % 4 || s.stride % 4) throw new Error(`decoder graph: ${what}: ${s.heads} heads over ${s.kv_heads} key/value heads of ${s.head_dim} (a multiple of 4)`);
        buf(s.x, s.heads * s.head_dim, what, "tokens");
        if (bufs.get(s.x).cols !== s.stride) throw new Error(`decoder graph: ${what} has stride ${s.stride}, buffer \`${s.x}\` rows of ${bufs.get(s.x).cols}`);
        buf(s.out, s.heads * s.head_dim, what, "tokens");
        if (bufs.get(s.out).cols !== s.heads * s.head_dim) throw new Error(`decoder graph: ${what} writes rows of ${s.heads * s.head_dim} into buffer \`${s.out}\` of ${bufs.get(s.out).cols}`);
        cache(s.k_cache, s.kv_heads * s.head_dim, what);
        cache(s.v_cache, s.kv_heads * s.head_dim, what);
        break;
      case "swi_glu":
        if (!pos(s.ffn) || s.ffn % 4) throw new Error(`decoder graph: ${what} has ffn ${s.ffn} (a multiple of 4)`);
        buf(s.x, 2 * s.ffn, what, "tokens");
        buf(s.out, s.ffn, what, "tokens");
        if (bufs.get(s.x).cols !== 2 * s.ffn || bufs.get(s.out).cols !== s.ffn) throw new Error(`decoder graph: ${what}: buffer \`${s.x}\` must have ${2 * s.ffn} columns and \`${s.out}\` ${s.ffn}`);
        break;
      case "add":
        buf(s.x, s.cols, what, "tokens");
        buf(s.y, s.cols, what, "tokens");
        if (bufs.get(s.x).cols !== s.cols || bufs.get(s.y).cols !== s.cols) throw new Error(`decoder graph: ${what} adds rows of ${s.cols}: both buffers must have that many columns`);
        break;
    }
  }
  buf(graph.logits, graph.vocab, "the logits");
}
var GraphDecoder = class _GraphDecoder {
  graph;
  memory;
  layout;
  /** Positions the caches hold. */
  context;
  fixed;
  parts = /* @__PURE__ */ new Map();
  rowsOf;
  kernelsOf = null;
  /** The products' kernels of each bucket, made on its first run. */
  buckets = /* @__PURE__ */ new Map();
  /** Per bucket, each step's kernel (matmul steps) by step index. */
  ready = /* @__PURE__ */ new Map();
  /** Each distinct product's kernel (the head's is in every bucket). */
  made = /* @__PURE__ */ new Map();
  ropeFilled = 0;
  guard = null;
  /** Per bucket, its distinct kernels (what a guarded run names). */
  distinct = /* @__PURE__ */ new Map();
  i32;
  f32;
  pos = 0;
  constructor(graph, memory, layout, context, fixed, tensors) {
    this.graph = graph;
    this.memory = memory;
    this.layout = layout;
    this.context = context;
    this.fixed = fixed;
    this.rowsOf = new Map(graph.buffers.map((b) => [b.name, b.rows]));
    for (const t of tensors) {
      const at = {};
      for (const [p, part] of Object.entries(t.parts)) at[p] = layout.weights + part.offset;
      this.parts.set(t.name, at);
    }
    this.i32 = new Int32Array(memory.buffer);
    this.f32 = new Float32Array(memory.buffer);
  }
  /** Checks the graph, lays it out in a new memory with the weights copied in, and instantiates the fixed kernels. */
  static async create(init) {
    const { graph, tensors, weights, context } = init;
    checkGraph(graph, tensors, weights.byteLength);
    if (!Number.isInteger(context) || context < 1 || context > graph.context)
      throw new RangeError(`context ${context} must be an integer from 1 to the model's ${graph.context}`);
    const layout = layoutOf(graph, weights.byteLength, context);
    const pages = Math.ceil(layout.bytes / PAGE3);
    if (pages > 65536) throw new RangeError(`the model needs ${Math.ceil(layout.bytes / 2 ** 20)} MiB of Wasm memory with a context of ${context}: more than 4 GiB`);
    let memory;
    try {
      memory = new WebAssembly.Memory({ initial: pages, maximum: 65536, ...init.shared ? { shared: true } : {} });
    } catch (e) {
      throw new RangeError(`a Wasm memory of ${Math.ceil(layout.bytes / 2 ** 20)} MiB (context ${context}) could not be made: ${e.message}; load with a smaller context`);
    }
    new Uint8Array(memory.buffer, layout.weights, weights.byteLength).set(new Uint8Array(weights));
    const mod = await WebAssembly.instantiate(init.shared ? sharedImport(init.fixed) : init.fixed, { env: { memory } });
    const ex = mod.instance.exports;
    for (const name of FIXED) if (typeof ex[name] !== "function") throw new Error(`decoder-kernels.wat has no export \`${name}\``);
    return new _GraphDecoder(graph, memory, layout, context, ex, tensors);
  }
  /**
   * Where the tuned products come from (before the first `feed`), and
   * optionally what every run goes through (`Webtune`'s plan guard: a run
   * of bucket `m` is one call of kind `m` over that bucket's kernels).
   */
  setKernels(source, guard) {
    this.kernelsOf = source;
    this.guard = guard ?? null;
  }
  /** Positions in the caches so far. */
  get position() {
    return this.pos;
  }
  /** Forgets the caches' contents: the next run starts at position 0. */
  reset() {
    this.pos = 0;
  }
  /** Makes the kernels of bucket `m` (every product a run in it calls), once; resolves with each step's. */
  kernels(m) {
    let p = this.buckets.get(m);
    if (!p) {
      const source = this.kernelsOf;
      if (!source) return Promise.reject(new Error("GraphDecoder: no kernel source (setKernels) before the first run"));
      p = (async () => {
        const list = productsOf(this.graph, m);
        const made = await Promise.all(list.map((x) => {
          const key = `${x.op}/${x.shape.join(",")}`;
          let k = this.made.get(key);
          if (!k) {
            k = source(x.op, x.shape);
            this.made.set(key, k);
            k.catch(() => this.made.delete(key));
          }
          return k;
        }));
        const map = new Map(list.map((x, i) => [`${x.op}/${x.shape.join(",")}`, made[i]]));
        const perStep = this.graph.steps.map((s) => s.step === "matmul" ? map.get(`${s.kernel}/${s.last ? 1 : m},${s.k},${s.n}`) : void 0);
        this.ready.set(m, perStep);
        return perStep;
      })();
      this.buckets.set(m, p);
      p.catch(() => this.buckets.delete(m));
    }
    return p;
  }
  /** Checks a run of `tokens` would fit: ids in the vocabulary and positions in the context. Throws one line. */
  check(tokens) {
    if (!tokens.length) throw new RangeError("no tokens to feed");
    if (this.pos + tokens.length > this.context)
      throw new RangeError(`${this.pos} positions used and ${tokens.length} more tokens: past the context of ${this.context}`);
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= this.graph.vocab) throw new RangeError(`token id ${t} is outside the vocabulary of ${this.graph.vocab}`);
    }
  }
  /**
   * Feeds `tokens` at the next positions (in chunks of the largest bucket;
   * each chunk's kernels are fetched on the bucket's first use) and returns
   * a view of the logits after the last one (valid until the next run or a
   * memory growth: copy it to keep it).
   */
  async feed(tokens) {
    this.check(tokens);
    const max = this.layout.maxRows;
    for (let at = 0; at < tokens.length; at += max) {
      const chunk = Array.prototype.slice.call(tokens, at, at + max);
      const m = bucketOf(this.graph, chunk.length);
      const ks = this.ready.get(m) ?? await this.kernels(m);
      this.guarded(m, ks, () => this.run(chunk, m, ks));
    }
    return this.logits();
  }
  /**
   * Runs the model once on a run that uses bucket `m`'s kernels (`m` tokens,
   * or as many as the context holds), for timing only: the tokens are
   * arbitrary, the run starts at the current position (or as late as the
   * context allows, the cache rows it overwrites saved and put back), and
   * the position is left as it was, so the caches read as before (the
   * logits buffer does not).
   */
  async trialRun(m) {
    const ks = this.ready.get(m) ?? await this.kernels(m);
    const t = Math.min(m, this.context);
    const pos = this.pos, at = Math.min(pos, this.context - t);
    this.views();
    const saved = this.graph.caches.map((c) => {
      const row = this.cache(c.name) / 4;
      return { at: row + at * c.cols, rows: this.f32.slice(row + at * c.cols, row + pos * c.cols) };
    });
    this.pos = at;
    try {
      const ids = Array.from({ length: t }, (_, i) => (i * 7919 + 1) % this.graph.vocab);
      this.guarded(m, ks, () => this.run(ids, m, ks));
    } finally {
      this.pos = pos;
      this.views();
      for (const s of saved) this.f32.set(s.rows, s.at);
    }
  }
  /** Buckets run before whose next run the guard would judge (their kernels changed since it last did). */
  dueBuckets() {
    const g = this.guard;
    if (!g?.due) return [];
    return [...this.distinct].filter(([m, ks]) => g.due(String(m), ks)).map(([m]) => m);
  }
  /** A run of bucket `m` through the guard, if any. */
  guarded(m, ks, run) {
    if (!this.guard) return run();
    let d = this.distinct.get(m);
    if (!d) this.distinct.set(m, d = [...new Set(ks.filter((k) => k !== void 0))]);
    this.guard.call(String(m), d, run);
  }
  /** The last run's logits (a view of the memory). */
  logits() {
    this.views();
    const at = this.layout.buffers.get(this.graph.logits);
    return this.f32.subarray(at / 4, at / 4 + this.graph.vocab);
  }
  /** Bytes of Wasm memory in use. */
  get memoryBytes() {
    return this.memory.buffer.byteLength;
  }
  views() {
    if (this.f32.buffer !== this.memory.buffer || this.f32.length * 4 !== this.memory.buffer.byteLength) {
      this.i32 = new Int32Array(this.memory.buffer);
      this.f32 = new Float32Array(this.memory.buffer);
    }
  }
  /** The rotary table up to position `end`, filled as positions are first used. */
  fillRope(end) {
    if (end <= this.ropeFilled) return;
    const { headDim: d, theta, rope } = this.layout;
    const half = d / 2;
    for (let p = this.ropeFilled; p < end; p++) {
      const row = rope / 4 + p * d;
      for (let i = 0; i < half; i++) {
        const angle = p * Math.pow(theta, -2 * i / d);
        this.f32[row + 2 * i] = Math.cos(angle);
        this.f32[row + 2 * i + 1] = Math.sin(angle);
      }
    }
    this.ropeFilled = end;
  }
  part(tensor, part) {
    return this.parts.get(tensor)[part];
  }
  buf(name) {
    return this.layout.buffers.get(name);
  }
  cache(name) {
    return this.layout.caches.get(name);
  }
  /** One run of at most the largest bucket's tokens, synchronous (no kernel swaps mid-run). */
  run(tokens, m, kernels) {
    this.views();
    const t = tokens.length, pos0 = this.pos, f = this.fixed, L = this.layout, g = this.graph;
    this.fillRope(pos0 + t);
    this.i32.set(tokens, L.ids / 4);
    const steps = g.steps;
    for (let i = 0; i < steps.length; i++) {
      const s = steps[i];
      switch (s.step) {
        case "embed": {
          const w = this.part(s.table, "w"), out = this.buf(s.out), h = g.hidden;
          if (s.format === "q8_0") f.embed_q8(L.ids, t, w, this.part(s.table, "d"), h, out);
          else if (s.format === "q4_1") f.embed_q4(L.ids, t, w, this.part(s.table, "d"), this.part(s.table, "m"), 1, h, out);
          else if (s.format === "q4_0") f.embed_q4(L.ids, t, w, this.part(s.table, "d"), 0, 0, h, out);
          else f.embed_f32(L.ids, t, w, g.vocab, h, out);
          break;
        }
        case "rms_norm": {
          const h = g.hidden;
          const x = this.buf(s.x) + (s.last ? (t - 1) * h * 4 : 0);
          f.rmsnorm(x, this.part(s.weight, "w"), this.buf(s.out), s.last ? 1 : t, h, s.eps);
          break;
        }
        case "matmul": {
          const k = kernels[i];
          if (!k) throw new Error(`no kernel was loaded for ${s.kernel} ${s.last ? 1 : m},${s.k},${s.n}`);
          const a = this.buf(s.a) + (s.last && this.rowsOf.get(s.a) === "tokens" ? (t - 1) * s.k * 4 : 0);
          const w = this.part(s.weight, "w"), out = this.buf(s.out);
          if (s.format === "f32") k.run(a, w, out);
          else if (s.format === "q4_1") k.run(a, w, this.part(s.weight, "d"), this.part(s.weight, "m"), out);
          else k.run(a, w, this.part(s.weight, "d"), out);
          break;
        }
        case "rope":
          f.rope(this.buf(s.x), t, s.stride, s.heads, s.head_dim, L.rope, pos0);
          break;
        case "kv_store":
          f.kv_store(this.buf(s.x), t, s.stride, s.k_col, s.v_col, s.width, this.cache(s.k_cache), this.cache(s.v_cache), pos0);
          break;
        case "attention":
          f.attention(this.buf(s.x), t, s.stride, s.heads, s.kv_heads, s.head_dim, this.cache(s.k_cache), this.cache(s.v_cache), pos0, s.scale, this.buf(s.out), L.scores);
          break;
        case "swi_glu":
          f.swiglu(this.buf(s.x), t, s.ffn, this.buf(s.out));
          break;
        case "add":
          f.add(this.buf(s.x), this.buf(s.y), t * s.cols);
          break;
      }
    }
    this.pos += t;
  }
};

// src/decoder-gpu.ts
var ALIGN2 = 256;
var EW2 = 64;
var MAXG = 8;
var MAX_HEAD_DIM = 256;
var MAXQ = 1024;
var NO_TOKEN = 4294967295;
var MAX_AHEAD = 3;
var MAX_STEPS_PER_SUBMIT = 4;
var FIXED2 = [
  "embed_q8",
  "embed_q4",
  "embed_f32",
  "rms_norm",
  "rope",
  "kv_store",
  "attention",
  "swiglu",
  "add",
  "sample",
  "add_rms_norm",
  "rope_kv",
  "attention_split",
  "attention_merge",
  "attention_rope",
  "attention_one",
  "attention_rope_one",
  "attention_parts",
  "attention_rope_parts"
];
var SCH = 64;
var SHORT_ATTENTION = SCH;
var LONG_ATTENTION = MERGE_PARTS * SCH;
var LONG_MAXG = 4;
function longAttentionSource(wgsl) {
  const lines = [
    ["const SCH: u32 = 64u;", "const SCH: u32 = 128u;"],
    ["const KP: u32 = 4u;", "const KP: u32 = 2u;"],
    ["const KB: u32 = 4u;", "const KB: u32 = 8u;"],
    ["const VB: u32 = 8u;", "const VB: u32 = 16u;"],
    ["const MAXG: u32 = 8u;", `const MAXG: u32 = ${LONG_MAXG}u;`]
  ];
  let out = wgsl;
  for (const [from, to] of lines) {
    if (out.split(from).length !== 2) throw new Error(`longAttentionSource: the kernels' source must hold the line '${from}' once`);
    out = out.replace(from, to);
  }
  return out;
}
function fusions(graph) {
  const out = /* @__PURE__ */ new Map();
  const st = graph.steps;
  for (let i = 0; i + 1 < st.length; i++) {
    const s = st[i], n = st[i + 1];
    if (s.step === "add" && n.step === "rms_norm" && n.x === s.x && s.cols === graph.hidden && n.out !== s.x && n.out !== s.y) {
      out.set(i, "add_rms_norm");
      i++;
    } else if (s.step === "rope" && n.step === "kv_store" && n.x === s.x && n.stride === s.stride && n.k_col % 2 === 0 && n.width % 2 === 0 && n.k_col + n.width <= s.heads * s.head_dim && n.v_col >= s.heads * s.head_dim) {
      out.set(i, "rope_kv");
      i++;
    }
  }
  return out;
}
function fusedRun(graph, f) {
  const what = `decoder graph fused run at step ${f.first} (${f.kernel})`;
  const [base, ...suffixes] = f.kernel.split("+");
  const known = ["rms_norm", "swiglu", "residual"];
  if (suffixes.some((x, i) => !known.includes(x) || i > 0 && known.indexOf(x) <= known.indexOf(suffixes[i - 1])) || !suffixes.length)
    throw new Error(`${what}: a fused op is a product with +rms_norm, +swiglu and +residual, in that order`);
  const steps = graph.steps.slice(f.first, f.first + f.steps);
  let at = 0;
  const take = (kind) => {
    const s = steps[at++];
    if (s?.step !== kind) throw new Error(`${what}: step ${f.first + at - 1} is ${s?.step ?? "missing"}, the op needs ${kind}`);
    return s;
  };
  const norm = suffixes.includes("rms_norm") ? take("rms_norm") : void 0;
  const product = take("matmul");
  const glu = suffixes.includes("swiglu") ? take("swi_glu") : void 0;
  const add = suffixes.includes("residual") ? take("add") : void 0;
  const out = glu?.out ?? product.out;
  const cols = glu ? glu.ffn : product.n;
  const bad = at !== f.steps || product.kernel !== base || f.k !== product.k || f.n !== cols || product.format === "f32" && (norm || glu) || norm && (norm.out !== product.a || norm.last !== product.last) || glu && (glu.x !== product.out || 2 * glu.ffn !== product.n || product.last) || add && (add.y !== out || add.cols !== cols || add.x === out || product.last);
  if (bad) throw new Error(`${what}: its ${f.steps} steps do not compute that op (docs/ops.md)`);
  return { norm, product, glu, add };
}
function longAttentionOf(init) {
  const from = init.longAttention ?? LONG_ATTENTION;
  if (!Number.isInteger(from) || from < 0) throw new RangeError(`longAttention ${from}: a count of positions, 0 or more`);
  const groups = init.graph.steps.flatMap((x) => x.step === "attention" ? [x.heads / x.kv_heads] : []);
  return (init.mergeAttention ?? true) && (init.fuse ?? true) && groups.every((g) => g <= LONG_MAXG) ? from : 0;
}
function stepsPerSubmitOf(init) {
  const k = init.stepsPerSubmit ?? 1;
  if (!Number.isInteger(k) || k < 1 || k > MAX_STEPS_PER_SUBMIT) throw new RangeError(`stepsPerSubmit ${k}: 1 to ${MAX_STEPS_PER_SUBMIT}`);
  return k;
}
function aheadDepth(k) {
  return k > 1 ? Math.max(MAX_AHEAD, 2 * k) : MAX_AHEAD;
}
function formAt(st, end) {
  if (st.skipUpTo !== void 0 && end <= st.skipUpTo) return null;
  if (st.long && end > st.long.from) return st.long;
  return st.short && end <= st.short.upTo ? st.short : st;
}
function mergeOffsets(heads, hd) {
  const pm0 = Math.ceil(heads * MERGE_PARTS * hd / 64) * 64;
  return [pm0, pm0 + Math.ceil(heads * MERGE_PARTS / 64) * 64];
}
function mergeBytes(heads, hd) {
  return (mergeOffsets(heads, hd)[1] + heads * MERGE_PARTS) * 4;
}
function partsOf2(format2) {
  return format2 === "q4_1" ? ["w", "d", "m"] : format2 === "f32" ? ["w"] : ["w", "d"];
}
async function scoped3(device, what, f) {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  let value;
  try {
    value = await f();
  } finally {
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    const e = validation ?? oom;
    if (e) throw new Error(`${what}: ${e.message}`);
  }
  return value;
}
function checkGpuGraph(graph) {
  const bufs = new Map(graph.buffers.map((b) => [b.name, b]));
  for (const [i, s] of graph.steps.entries()) {
    const what = `decoder graph step ${i} (${s.step})`;
    const apart = (a, b) => {
      if (a === b) throw new Error(`${what} reads and writes buffer \`${a}\`: the WebGPU backend needs separate buffers`);
    };
    switch (s.step) {
      case "rms_norm":
        apart(s.x, s.out);
        break;
      case "matmul":
        apart(s.a, s.out);
        if (s.last && bufs.get(s.a)?.rows === "tokens" && s.k * 4 % ALIGN2)
          throw new Error(`${what} reads the last token row of \`${s.a}\` (rows of ${s.k} floats): the WebGPU backend binds it at an offset, which must be a multiple of ${ALIGN2} bytes`);
        break;
      case "attention":
        apart(s.x, s.out);
        if (s.heads / s.kv_heads > MAXG || s.head_dim > MAX_HEAD_DIM || s.heads / s.kv_heads * s.head_dim > MAXQ || s.head_dim % 4)
          throw new Error(`${what}: ${s.heads / s.kv_heads} query heads of ${s.head_dim} per key/value head; the WebGPU attention kernel takes up to ${MAXG} heads of up to ${MAX_HEAD_DIM}, a multiple of 4, ${MAXQ} floats in all`);
        break;
      case "swi_glu":
        apart(s.x, s.out);
        break;
      case "add":
        apart(s.x, s.y);
        break;
      default:
        break;
    }
  }
  let end = 0;
  for (const f of graph.fused ?? []) {
    if (!(Number.isInteger(f.first) && Number.isInteger(f.steps) && f.first >= end && f.steps > 0 && f.first + f.steps <= graph.steps.length))
      throw new Error(`decoder graph fused run at step ${f.first}: runs must be in order, apart, and inside the ${graph.steps.length} steps`);
    end = f.first + f.steps;
    const r = fusedRun(graph, f);
    const a = r.norm?.x ?? r.product.a;
    if (r.product.last && bufs.get(a)?.rows === "tokens" && r.product.k * 4 % ALIGN2)
      throw new Error(`decoder graph fused run at step ${f.first} reads the last token row of \`${a}\` (rows of ${r.product.k} floats): the WebGPU backend binds it at an offset, which must be a multiple of ${ALIGN2} bytes`);
  }
}
function ropeTable(context, headDim, theta) {
  const t = new Float32Array(context * headDim), half = headDim / 2;
  for (let p = 0; p < context; p++)
    for (let i = 0; i < half; i++) {
      const angle = p * Math.pow(theta, -2 * i / headDim);
      t[p * headDim + 2 * i] = Math.cos(angle);
      t[p * headDim + 2 * i + 1] = Math.sin(angle);
    }
  return t;
}
var GpuDecoder = class _GpuDecoder {
  constructor(init, pipelines, longPipelines, owned, parts, buffers, caches, rope, stepParams, stepSlot, fused, runParams, ids, token, tokenReads, logitsRead, partials, runRing, runs) {
    this.pipelines = pipelines;
    this.longPipelines = longPipelines;
    this.owned = owned;
    this.parts = parts;
    this.buffers = buffers;
    this.caches = caches;
    this.rope = rope;
    this.stepParams = stepParams;
    this.stepSlot = stepSlot;
    this.fused = fused;
    this.runParams = runParams;
    this.ids = ids;
    this.token = token;
    this.tokenReads = tokenReads;
    this.logitsRead = logitsRead;
    this.partials = partials;
    this.runRing = runRing;
    this.runs = runs;
    this.graph = init.graph;
    this.device = init.device;
    this.context = init.context;
    this.maxRows = Math.max(1, ...init.graph.buckets);
    const short = init.shortAttention ?? SHORT_ATTENTION;
    if (!Number.isInteger(short) || short < 0) throw new RangeError(`shortAttention ${short}: a count of positions, 0 or more`);
    this.shortUpTo = short;
    this.longFrom = longAttentionOf(init);
    this.mergeAttention = init.mergeAttention ?? true;
    this.stepsPerSubmit = stepsPerSubmitOf(init);
    void init.device.lost.then((info) => {
      this.lost = info.message || info.reason || "lost";
    });
  }
  pipelines;
  longPipelines;
  owned;
  parts;
  buffers;
  caches;
  rope;
  stepParams;
  stepSlot;
  fused;
  runParams;
  ids;
  token;
  tokenReads;
  logitsRead;
  partials;
  runRing;
  runs;
  graph;
  device;
  /** Positions the caches hold. */
  context;
  /** The largest bucket: a run's most tokens. */
  maxRows;
  stats = { dispatchesPerToken: 0, submits: 0, tokens: 0, hostSampled: 0 };
  kernelsOf = null;
  buckets = /* @__PURE__ */ new Map();
  ready = /* @__PURE__ */ new Map();
  made = /* @__PURE__ */ new Map();
  pos = 0;
  lost = null;
  closed = false;
  runHost = new ArrayBuffer(32);
  /** The token read-back ring's next buffer, and the reads in flight (in order). */
  readSlot = 0;
  reading = Promise.resolve();
  /** Decode steps at up to this many positions run the attention as one dispatch (GpuDecoderInit.shortAttention). */
  shortUpTo;
  /** GpuDecoderInit.longAttention, checked (0 where the graph's groups are too large for the long form). */
  longFrom;
  /** GpuDecoderInit.mergeAttention. */
  mergeAttention;
  /** GpuDecoderInit.stepsPerSubmit. */
  stepsPerSubmit;
  /** Checks the graph, uploads the weights, the rotary table and the steps' parameters, and builds the fixed pipelines. */
  static async create(init) {
    const { device, graph, tensors, weights, context } = init;
    checkGraph(graph, tensors, weights.byteLength);
    checkGpuGraph(graph);
    if (!Number.isInteger(context) || context < 1 || context > graph.context)
      throw new RangeError(`context ${context} must be an integer from 1 to the model's ${graph.context}`);
    const stepsPerSubmit = stepsPerSubmitOf(init);
    const longFrom = longAttentionOf(init);
    const limits = device.limits;
    const maxRows = Math.max(1, ...graph.buckets);
    const used = /* @__PURE__ */ new Set();
    for (const s of graph.steps) {
      if (s.step === "embed") used.add(s.table);
      if (s.step === "rms_norm" || s.step === "matmul") used.add(s.weight);
    }
    const places = [];
    const sizes = [0];
    for (const t of tensors) {
      if (!used.has(t.name)) continue;
      for (const p of partsOf2(t.format)) {
        const part = t.parts[p];
        const bytes = Math.ceil(part.bytes / 4) * 4;
        if (part.offset + bytes > weights.byteLength) throw new Error(`tensor \`${t.name}\` part \`${p}\` is not a whole number of 4-byte words at the blob's end`);
        if (bytes > limits.maxStorageBufferBindingSize)
          throw new Error(`tensor \`${t.name}\` part \`${p}\` is ${bytes} bytes, above this device's maxStorageBufferBindingSize (${limits.maxStorageBufferBindingSize})`);
        let offset = Math.ceil(sizes[sizes.length - 1] / ALIGN2) * ALIGN2;
        if (offset + bytes > limits.maxBufferSize) {
          sizes.push(0);
          offset = 0;
        }
        places.push({ tensor: t.name, part: p, src: part.offset, bytes, buffer: sizes.length - 1, offset });
        sizes[sizes.length - 1] = offset + bytes;
      }
    }
    const tooBig = [
      ...graph.buffers.map((b) => ({ name: b.name, bytes: (b.rows === "tokens" ? maxRows : 1) * b.cols * 4 })),
      ...graph.caches.map((c) => ({ name: c.name, bytes: context * c.cols * 4 }))
    ].find((b) => b.bytes > limits.maxStorageBufferBindingSize);
    if (tooBig) throw new RangeError(`buffer \`${tooBig.name}\` needs ${tooBig.bytes} bytes, above this device's maxStorageBufferBindingSize (${limits.maxStorageBufferBindingSize}); load with a smaller context`);
    const rope = graph.steps.find((s) => s.step === "rope");
    const headDim = rope?.head_dim ?? 4, theta = rope?.theta ?? 1e4;
    return scoped3(device, "the language model on WebGPU", async () => {
      const owned = [];
      const buffer = (label, size, usage) => {
        const b = device.createBuffer({ label: `decoder ${label}`, size: Math.max(16, Math.ceil(size / 16) * 16), usage });
        owned.push(b);
        return b;
      };
      const S = GPUBufferUsage.STORAGE;
      const weightBufs = sizes.map((size, i) => buffer(`weights ${i}`, size, S | GPUBufferUsage.COPY_DST));
      const parts = /* @__PURE__ */ new Map();
      for (const p of places) {
        device.queue.writeBuffer(weightBufs[p.buffer], p.offset, weights, p.src, p.bytes);
        const rec = parts.get(p.tensor) ?? {};
        rec[p.part] = { buffer: weightBufs[p.buffer], offset: p.offset, size: p.bytes };
        parts.set(p.tensor, rec);
      }
      const buffers = new Map(graph.buffers.map((b) => [b.name, buffer(b.name, (b.rows === "tokens" ? maxRows : 1) * b.cols * 4, S | GPUBufferUsage.COPY_SRC)]));
      const caches = new Map(graph.caches.map((c) => [c.name, buffer(c.name, context * c.cols * 4, S)]));
      const ropeBuf = buffer("rope", context * headDim * 4, S | GPUBufferUsage.COPY_DST);
      device.queue.writeBuffer(ropeBuf, 0, ropeTable(context, headDim, theta));
      const slots = /* @__PURE__ */ new Map();
      const fixedSteps = graph.steps.map((s, i) => [s, i]).filter(([s]) => s.step !== "matmul");
      const host = new ArrayBuffer((fixedSteps.length + 1) * ALIGN2);
      const put = (slot, n, f = []) => {
        const u = new Uint32Array(host, slot * ALIGN2, 8), fl = new Float32Array(host, slot * ALIGN2, 8);
        u.set(n);
        f.forEach((v, j) => fl[6 + j] = v);
      };
      const fused = init.fuse === false ? /* @__PURE__ */ new Map() : fusions(graph);
      fixedSteps.forEach(([s, i], slot) => {
        slots.set(i, slot);
        const next = graph.steps[i + 1];
        if (fused.get(i) === "add_rms_norm" && next.step === "rms_norm" && s.step === "add") {
          put(slot, [s.cols, next.last ? 1 : 0], [next.eps]);
          return;
        }
        if (fused.get(i) === "rope_kv" && next.step === "kv_store" && s.step === "rope") {
          put(slot, [s.stride, s.heads, s.head_dim, next.width, next.k_col, next.v_col]);
          return;
        }
        switch (s.step) {
          case "embed":
            put(slot, [graph.hidden, s.format === "q4_1" ? 1 : s.format === "f32" ? graph.vocab : 0]);
            break;
          case "rms_norm":
            put(slot, [graph.hidden, s.last ? 1 : 0], [s.eps]);
            break;
          case "rope":
            put(slot, [s.stride, s.heads, s.head_dim]);
            break;
          case "kv_store":
            put(slot, [s.stride, s.k_col, s.v_col, s.width]);
            break;
          case "attention":
            put(slot, [s.stride, s.heads, s.kv_heads, s.head_dim], [s.scale]);
            break;
          case "swi_glu":
            put(slot, [s.ffn]);
            break;
          case "add":
            put(slot, [s.cols]);
            break;
          default:
            break;
        }
      });
      slots.set(-1, fixedSteps.length);
      put(fixedSteps.length, [graph.vocab]);
      const stepParams = buffer("step params", host.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      device.queue.writeBuffer(stepParams, 0, host);
      const runParams = buffer("run params", 32, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      const ids = buffer("ids", maxRows * 4, S | GPUBufferUsage.COPY_DST);
      const token = buffer("token", 16, S | GPUBufferUsage.COPY_SRC);
      const runRing = buffer("run params ring", MAX_STEPS_PER_SUBMIT * ALIGN2, GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
      const tokenReads = Array.from({ length: aheadDepth(stepsPerSubmit) + 1 }, (_, i) => buffer(`token read ${i}`, 16, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST));
      const logitsRead = buffer("logits read", graph.vocab * 4, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
      const runs = init.fuse === false ? [] : (graph.fused ?? []).map((f) => ({ f, r: fusedRun(graph, f) }));
      const twins = /* @__PURE__ */ new Map();
      for (const { r } of runs) {
        if (r.add && !twins.has(r.add.x)) twins.set(r.add.x, buffer(`${r.add.x} twin`, graph.buffers.find((b) => b.name === r.add.x).cols * 4, S));
      }
      const epsValues = [...new Set(runs.flatMap(({ r }) => r.norm ? [Math.fround(r.norm.eps)] : []))];
      const epsBuf = buffer("eps", Math.max(1, epsValues.length) * ALIGN2, S | GPUBufferUsage.COPY_DST);
      if (epsValues.length) {
        const host2 = new Float32Array(epsValues.length * ALIGN2 / 4);
        epsValues.forEach((e, i) => host2[i * ALIGN2 / 4] = e);
        device.queue.writeBuffer(epsBuf, 0, host2);
      }
      const eps = new Map(epsValues.map((e, i) => [e, { buffer: epsBuf, offset: i * ALIGN2, size: 4 }]));
      const fusedAt = new Map(runs.map(({ f, r }) => [f.first, { f, r }]));
      const module = device.createShaderModule({ label: "decoder-kernels.wgsl", code: init.wgsl ?? "// The text generator's fixed WebGPU kernels: everything of a decoder graph's\n// run that is not a matrix product (those are webtune's tuned WGSL kernels\n// of matmul_q4_1, matmul_q8_0, matmul_q4 and matmul), plus the sampling of\n// the next token. The WebGPU twin of decoder-kernels.wat (the same rules,\n// step by step); decoder-gpu.ts runs them.\n//\n// One entry point per kernel. Binding 0 is the run's parameters (R: the\n// real rows T, the first position, the sampling draw), written once per\n// run; binding 1 the step's own (S, fixed when a bucket's bind groups are\n// made); the others are the kernel's buffers (numbers reused across entry\n// points, each pipeline's layout is its own). A kernel's grid is made for\n// the bucket's M rows (y: one row a workgroup row) and every workgroup of a\n// row past R.t returns at once, so that one recorded command buffer serves\n// every run of the bucket, whatever its T, and no kernel depends on the\n// context's length: attention reads its length from R.\n//\n// Lengths are counts of floats. Every row length is a multiple of 4 and\n// every part's binding holds what the kernel reads (decoder-gpu.ts checks).\n\nstruct Run {\n  // Real rows of this run (T, at most the bucket's M); position of the first.\n  t: u32,\n  pos0: u32,\n  // Sampling: the draw in [0, 1) (SplitMix64's, from the host), the\n  // temperature (0: greedy), top-k (0: all) and top-p (1: all).\n  u: f32,\n  temperature: f32,\n  top_k: u32,\n  top_p: f32,\n}\n\n// A step's parameters: their meaning per kernel is written beside it.\nstruct Step {\n  n0: u32,\n  n1: u32,\n  n2: u32,\n  n3: u32,\n  n4: u32,\n  n5: u32,\n  f0: f32,\n  f1: f32,\n}\n\n@group(0) @binding(0) var<uniform> R: Run;\n@group(0) @binding(1) var<uniform> S: Step;\n\n// Threads of a workgroup: EW for the element-wise kernels, RW for a row\n// reduction (rms_norm), AW for attention, SW for sampling.\nconst EW: u32 = 64u;\nconst RW: u32 = 128u;\n\n// ---------------------------------------------------------------- embed\n// One row of h floats per id of ids[0..T): grid (⌈h/EW⌉, M).\n// embed_q8: S.n0 = h; the q8_0 table, i8 bytes [V][h] as words, scales d\n// [V][h/32]: out[r][k] = d[id][k/32]·q[id][k].\n@group(0) @binding(2) var<storage, read> eq8_ids: array<u32>;\n@group(0) @binding(3) var<storage, read> eq8_w: array<u32>;\n@group(0) @binding(4) var<storage, read> eq8_d: array<f32>;\n@group(0) @binding(5) var<storage, read_write> eq8_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn embed_q8(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let k = g.x;\n  let h = S.n0;\n  if (r >= R.t || k >= h) {\n    return;\n  }\n  let id = eq8_ids[r];\n  let at = id * h + k;\n  let q = extractBits(bitcast<i32>(eq8_w[at / 4u]), (at % 4u) * 8u, 8u);\n  eq8_out[r * h + k] = f32(q) * eq8_d[id * (h / 32u) + k / 32u];\n}\n\n// embed_q4: S.n0 = h, S.n1 = 1 for q4_1 (a minimum m per block), 0 for q4_0;\n// words [V][h/8] (k = 8i + s in bits 4s..4s+3 of word i), scales d and\n// minimums m [V][h/32] (q4_0 binds d again as m): out = d·q + m, or\n// d·q + d·(−8) for q4_0 (the Wasm kernel's order).\n@group(0) @binding(2) var<storage, read> eq4_ids: array<u32>;\n@group(0) @binding(3) var<storage, read> eq4_w: array<u32>;\n@group(0) @binding(4) var<storage, read> eq4_d: array<f32>;\n@group(0) @binding(5) var<storage, read> eq4_m: array<f32>;\n@group(0) @binding(6) var<storage, read_write> eq4_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn embed_q4(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let k = g.x;\n  let h = S.n0;\n  if (r >= R.t || k >= h) {\n    return;\n  }\n  let id = eq4_ids[r];\n  let blk = id * (h / 32u) + k / 32u;\n  let sc = eq4_d[blk];\n  var mn = sc * -8.0;\n  if (S.n1 == 1u) {\n    mn = eq4_m[blk];\n  }\n  let q = (eq4_w[id * (h / 8u) + k / 8u] >> ((k % 8u) * 4u)) & 15u;\n  eq4_out[r * h + k] = sc * f32(q) + mn;\n}\n\n// embed_f32: S.n0 = h, S.n1 = V; the table stored transposed, [h][V] (the B\n// of the output head's matmul): out[r][k] = w[k·V + id].\n@group(0) @binding(2) var<storage, read> ef_ids: array<u32>;\n@group(0) @binding(3) var<storage, read> ef_w: array<f32>;\n@group(0) @binding(4) var<storage, read_write> ef_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn embed_f32(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let k = g.x;\n  let h = S.n0;\n  if (r >= R.t || k >= h) {\n    return;\n  }\n  ef_out[r * h + k] = ef_w[k * S.n1 + ef_ids[r]];\n}\n\n// ---------------------------------------------------------------- rms_norm\n// out[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ w, one workgroup a row: grid\n// (1, M). S.n0 = h, S.n1 = 1 for `last` (grid (1, 1): x's row T − 1 into\n// out's row 0), S.f0 = eps. x and out are separate buffers.\n@group(0) @binding(2) var<storage, read> rn_x: array<vec4<f32>>;\n@group(0) @binding(3) var<storage, read> rn_w: array<vec4<f32>>;\n@group(0) @binding(4) var<storage, read_write> rn_out: array<vec4<f32>>;\n\n// The row sums of squares: four floats a thread (a row is a multiple of 4\n// floats), RW threads, so that a 576-float row is two loads a thread.\nvar<workgroup> red: array<f32, RW>;\n\n// Σ red[0..RW) into red[0], every thread's share in red[lid] first.\nfn row_sum(lid: u32) -> f32 {\n  workgroupBarrier();\n  for (var k = RW / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      red[lid] += red[lid + k];\n    }\n    workgroupBarrier();\n  }\n  return red[0];\n}\n\n@compute @workgroup_size(RW)\nfn rms_norm(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  var r = wid.y;\n  var o = wid.y;\n  if (S.n1 == 1u) {\n    r = R.t - 1u;\n    o = 0u;\n  }\n  if (r >= R.t) {\n    return;\n  }\n  let h4 = S.n0 / 4u;\n  var acc = 0.0;\n  for (var i = lid; i < h4; i += RW) {\n    let v = rn_x[r * h4 + i];\n    acc += dot(v, v);\n  }\n  red[lid] = acc;\n  let inv = 1.0 / sqrt(row_sum(lid) / f32(S.n0) + S.f0);\n  for (var i = lid; i < h4; i += RW) {\n    rn_out[o * h4 + i] = rn_x[r * h4 + i] * inv * rn_w[i];\n  }\n}\n\n// add_rms_norm: an `add` (x += y) and the `rms_norm` of the same x that\n// follows it, as one dispatch: grid (1, M), one workgroup a row; every real\n// row is added, and normalised into out's row (S.n1 = 1, the norm's `last`:\n// only row T − 1, into out's row 0). S.n0 = h, S.f0 = eps. The same\n// arithmetic as the two steps.\n@group(0) @binding(2) var<storage, read> arn_y: array<vec4<f32>>;\n@group(0) @binding(3) var<storage, read> arn_w: array<vec4<f32>>;\n@group(0) @binding(4) var<storage, read_write> arn_x: array<vec4<f32>>;\n@group(0) @binding(5) var<storage, read_write> arn_out: array<vec4<f32>>;\n\n@compute @workgroup_size(RW)\nfn add_rms_norm(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let r = wid.y;\n  if (r >= R.t) {\n    return;\n  }\n  let h4 = S.n0 / 4u;\n  var acc = 0.0;\n  for (var i = lid; i < h4; i += RW) {\n    let v = arn_x[r * h4 + i] + arn_y[r * h4 + i];\n    arn_x[r * h4 + i] = v;\n    acc += dot(v, v);\n  }\n  red[lid] = acc;\n  let inv = 1.0 / sqrt(row_sum(lid) / f32(S.n0) + S.f0);\n  if (S.n1 == 1u && r != R.t - 1u) {\n    return;\n  }\n  var o = r;\n  if (S.n1 == 1u) {\n    o = 0u;\n  }\n  for (var i = lid; i < h4; i += RW) {\n    arn_out[o * h4 + i] = arn_x[r * h4 + i] * inv * arn_w[i];\n  }\n}\n\n// ---------------------------------------------------------------- rope\n// Rotary position embedding on adjacent pairs, in place: in each of the\n// first S.n1 heads of S.n2 floats of each row (rows S.n0 floats apart),\n// pair i (x[2i], x[2i+1]) of the row at position pos0 + r turns by the\n// angle whose (cos, sin) are table[(pos0 + r)·hd + 2i, +1] (computed in f64\n// by the host, rounded to f32). One thread a pair: grid (⌈heads·hd/2/EW⌉, M).\n@group(0) @binding(2) var<storage, read> rope_table: array<f32>;\n@group(0) @binding(3) var<storage, read_write> rope_x: array<f32>;\n\n@compute @workgroup_size(EW)\nfn rope(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let hd = S.n2;\n  let half = hd / 2u;\n  if (r >= R.t || g.x >= S.n1 * half) {\n    return;\n  }\n  let head = g.x / half;\n  let i = g.x % half;\n  let at = r * S.n0 + head * hd + 2u * i;\n  let tab = (R.pos0 + r) * hd + 2u * i;\n  let c = rope_table[tab];\n  let s = rope_table[tab + 1u];\n  let a = rope_x[at];\n  let b = rope_x[at + 1u];\n  rope_x[at] = a * c + b * -s;\n  rope_x[at + 1u] = b * c + a * s;\n}\n\n// ---------------------------------------------------------------- kv_store\n// Copies S.n3 floats at column S.n1 (keys) and S.n2 (values) of each row\n// (rows S.n0 floats apart) into the caches' rows pos0 + r, each S.n3\n// floats: grid (⌈width/EW⌉, M).\n@group(0) @binding(2) var<storage, read> kv_x: array<f32>;\n@group(0) @binding(3) var<storage, read_write> kv_k: array<f32>;\n@group(0) @binding(4) var<storage, read_write> kv_v: array<f32>;\n\n@compute @workgroup_size(EW)\nfn kv_store(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let i = g.x;\n  let w = S.n3;\n  if (r >= R.t || i >= w) {\n    return;\n  }\n  let src = r * S.n0;\n  let dst = (R.pos0 + r) * w + i;\n  kv_k[dst] = kv_x[src + S.n1 + i];\n  kv_v[dst] = kv_x[src + S.n2 + i];\n}\n\n// rope_kv: a `rope` and the `kv_store` of the same rows that follows it, as\n// one dispatch, where the keys lie inside the turned heads (whole pairs)\n// and the values outside them: thread p < heads·hd/2 turns pair p (rope's\n// rule) and, if it is a key's, stores it in the key cache too; the next\n// width/2 threads copy a pair of values. Grid (⌈(heads·hd + width)/2/EW⌉,\n// M). S.n0 = stride, S.n1 = heads, S.n2 = hd, S.n3 = width, S.n4 = the\n// keys' column, S.n5 = the values'.\n@group(0) @binding(2) var<storage, read> rkv_table: array<f32>;\n@group(0) @binding(3) var<storage, read_write> rkv_x: array<f32>;\n@group(0) @binding(4) var<storage, read_write> rkv_k: array<f32>;\n@group(0) @binding(5) var<storage, read_write> rkv_v: array<f32>;\n\n@compute @workgroup_size(EW)\nfn rope_kv(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let hd = S.n2;\n  let half = hd / 2u;\n  let pairs = S.n1 * half;\n  let w = S.n3;\n  if (r >= R.t || g.x >= pairs + w / 2u) {\n    return;\n  }\n  let row = r * S.n0;\n  let dst = (R.pos0 + r) * w;\n  if (g.x >= pairs) {\n    let j = 2u * (g.x - pairs);\n    rkv_v[dst + j] = rkv_x[row + S.n5 + j];\n    rkv_v[dst + j + 1u] = rkv_x[row + S.n5 + j + 1u];\n    return;\n  }\n  let head = g.x / half;\n  let i = g.x % half;\n  let col = head * hd + 2u * i;\n  let tab = (R.pos0 + r) * hd + 2u * i;\n  let c = rkv_table[tab];\n  let s = rkv_table[tab + 1u];\n  let a = rkv_x[row + col];\n  let b = rkv_x[row + col + 1u];\n  let a2 = a * c + b * -s;\n  let b2 = b * c + a * s;\n  rkv_x[row + col] = a2;\n  rkv_x[row + col + 1u] = b2;\n  if (col >= S.n4 && col < S.n4 + w) {\n    rkv_k[dst + col - S.n4] = a2;\n    rkv_k[dst + col - S.n4 + 1u] = b2;\n  }\n}\n\n// ---------------------------------------------------------------- attention\n// Causal grouped-query attention. Query head h of row r (at column h·hd of\n// the row, rows S.n0 floats apart) attends to cache positions 0..=pos0+r\n// of key/value head h / G, G = heads / kv_heads (cache rows of kv_heads·hd\n// floats): out[r][h·hd..] = Σ_j softmax_j(scale·q·k_j)·v_j. S.n1 = heads,\n// S.n2 = kv_heads, S.n3 = hd, S.f0 = scale.\n//\n// One workgroup per (key/value head, row): grid (kv_heads, M). The G query\n// heads that share the key/value head are done together, so each key and\n// value row is read once. Positions go by tiles of AW: each thread scores\n// one position against the G queries (held in workgroup memory), the\n// tile's maximum per head comes from a tree, and an online softmax keeps a\n// running maximum, each thread's share of the sum, and per thread the\n// weighted values of its dimensions (thread lid: dimensions lid % 64 + 64i,\n// positions of the tile lid / 64, + AW/64, ...). G ≤ MAXG, hd ≤ 64·DPT and\n// G·hd ≤ MAXQ (decoder-gpu.ts checks).\nconst AW: u32 = 128u;\nconst LANES: u32 = 2u;\nconst MAXG: u32 = 8u;\nconst DPT: u32 = 4u;\nconst MAXQ: u32 = 1024u;\nconst NEG: f32 = -1e30;\n\n@group(0) @binding(2) var<storage, read> at_x: array<f32>;\n@group(0) @binding(3) var<storage, read> at_k: array<f32>;\n@group(0) @binding(4) var<storage, read> at_v: array<f32>;\n@group(0) @binding(5) var<storage, read_write> at_out: array<f32>;\n\nvar<workgroup> at_q: array<f32, MAXQ>;\n// Scores, then weights, of the tile: [G][AW]; and the max/sum tree, [G][AW].\n// At the end both hold the lanes' weighted values ([LANES][G·hd] ≤ 2·MAXQ).\nvar<workgroup> at_s: array<f32, 1024>;\nvar<workgroup> at_t: array<f32, 1024>;\n\n@compute @workgroup_size(AW)\nfn attention(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let r = wid.y;\n  if (r >= R.t) {\n    return;\n  }\n  let kvh = wid.x;\n  let heads = S.n1;\n  let nkv = S.n2;\n  let hd = S.n3;\n  let grp = heads / nkv;\n  let kvw = nkv * hd;\n  let n = R.pos0 + r + 1u;\n  let q0 = r * S.n0 + kvh * grp * hd;\n  for (var i = lid; i < grp * hd; i += AW) {\n    at_q[i] = at_x[q0 + i];\n  }\n  var m: array<f32, MAXG>;\n  var l: array<f32, MAXG>;\n  var acc: array<f32, 32>;\n  for (var g = 0u; g < MAXG; g++) {\n    m[g] = NEG;\n    l[g] = 0.0;\n  }\n  for (var i = 0u; i < 32u; i++) {\n    acc[i] = 0.0;\n  }\n  let lane = lid / 64u;\n  let ds = lid % 64u;\n  workgroupBarrier();\n  for (var t0 = 0u; t0 < n; t0 += AW) {\n    let j = t0 + lid;\n    let valid = j < n;\n    let kr = j * kvw + kvh * hd;\n    for (var g = 0u; g < grp; g++) {\n      var s = NEG;\n      if (valid) {\n        var dot = 0.0;\n        for (var d = 0u; d < hd; d++) {\n          dot += at_q[g * hd + d] * at_k[kr + d];\n        }\n        s = dot * S.f0;\n      }\n      at_s[g * AW + lid] = s;\n      at_t[g * AW + lid] = s;\n    }\n    workgroupBarrier();\n    for (var k = AW / 2u; k > 0u; k >>= 1u) {\n      if (lid < k) {\n        for (var g = 0u; g < grp; g++) {\n          at_t[g * AW + lid] = max(at_t[g * AW + lid], at_t[g * AW + lid + k]);\n        }\n      }\n      workgroupBarrier();\n    }\n    var alpha: array<f32, MAXG>;\n    for (var g = 0u; g < grp; g++) {\n      let mn = max(m[g], at_t[g * AW]);\n      alpha[g] = exp(m[g] - mn);\n      m[g] = mn;\n      var w = 0.0;\n      if (valid) {\n        w = exp(at_s[g * AW + lid] - mn);\n      }\n      l[g] = l[g] * alpha[g] + w;\n      for (var i = 0u; i < DPT; i++) {\n        acc[g * DPT + i] *= alpha[g];\n      }\n    }\n    workgroupBarrier();\n    for (var g = 0u; g < grp; g++) {\n      if (valid) {\n        at_s[g * AW + lid] = exp(at_s[g * AW + lid] - m[g]);\n      } else {\n        at_s[g * AW + lid] = 0.0;\n      }\n    }\n    workgroupBarrier();\n    let end = min(AW, n - t0);\n    for (var jj = lane; jj < end; jj += LANES) {\n      let vr = (t0 + jj) * kvw + kvh * hd;\n      for (var i = 0u; i < DPT; i++) {\n        let d = ds + 64u * i;\n        if (d < hd) {\n          let v = at_v[vr + d];\n          for (var g = 0u; g < grp; g++) {\n            acc[g * DPT + i] += at_s[g * AW + jj] * v;\n          }\n        }\n      }\n    }\n    workgroupBarrier();\n  }\n  // Each head's sum of weights: the threads' shares through the tree.\n  for (var g = 0u; g < grp; g++) {\n    at_t[g * AW + lid] = l[g];\n  }\n  workgroupBarrier();\n  for (var k = AW / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      for (var g = 0u; g < grp; g++) {\n        at_t[g * AW + lid] += at_t[g * AW + lid + k];\n      }\n    }\n    workgroupBarrier();\n  }\n  var inv: array<f32, MAXG>;\n  for (var g = 0u; g < grp; g++) {\n    inv[g] = 1.0 / at_t[g * AW];\n  }\n  workgroupBarrier();\n  // The lanes' weighted values, summed in lane order.\n  for (var g = 0u; g < grp; g++) {\n    for (var i = 0u; i < DPT; i++) {\n      let d = ds + 64u * i;\n      if (d < hd) {\n        if (lane == 0u) {\n          at_s[g * hd + d] = acc[g * DPT + i];\n        } else {\n          at_t[g * hd + d] = acc[g * DPT + i];\n        }\n      }\n    }\n  }\n  workgroupBarrier();\n  let o0 = r * heads * hd + kvh * grp * hd;\n  for (var i = lid; i < grp * hd; i += AW) {\n    at_out[o0 + i] = (at_s[i] + at_t[i]) * inv[i / hd];\n  }\n}\n\n// ---------------------------------------------------------------- split attention\n// The decode step's attention (one row, T = 1), split over the cache\n// (\"flash decoding\"): `attention` above gives each key/value head one\n// workgroup that walks every position, so at 1,024 positions 3 workgroups\n// ran for 0.5 ms a layer on an H200. Here a workgroup takes one chunk of\n// SCH positions of one key/value head: grid (kv_heads, ⌈n/SCH⌉), with n =\n// pos0 + 1 read at run time, so that the parallelism grows with the context\n// and no kernel depends on its length. Each writes, per query head of its\n// group, its unnormalised weighted values (hd floats), the chunk's maximum\n// score and its sum of e^(score − max): rows of hd + 2 floats of `sa_part`\n// at [head][chunk]. `attention_merge` (grid (heads, 1)) rescales the\n// chunks to one maximum and divides by the sum. The same parameters as\n// `attention` (S.n0..n3, f0); the partials' buffer holds heads ·\n// ⌈context/SCH⌉ rows (decoder-gpu.ts sizes it).\n//\n// `attention_rope` is `attention_split` with the step's `rope` and\n// `kv_store` folded in, one dispatch a layer fewer: it turns the queries\n// as it loads them, and the workgroup of the last chunk turns the new key\n// and stores it and the value in the caches before reading them (no other\n// workgroup reads that position); the row is left as the projection wrote\n// it. Its sa_rope is the rope_kv step's parameters (S.n0..n5 of\n// `rope_kv`): the keys' and values' columns are .n4 and .n5, the queries'\n// from 0.\n//\n// A chunk's positions are spread over AT = KP·SCH threads so that no thread\n// waits on a chain of loads: each of a position's KP threads loads its\n// quarter of the key, and each lane of the weighted values its few values,\n// all at once before using any. A load from the cache costs the H200 about\n// 0.8 µs, and a loop that uses each load before issuing the next pays it\n// once an iteration: the first form, a dimension a thread walking its\n// chunk's 64 values, took about 55 µs a dispatch at any context, and the\n// second, a position a thread walking its key's 16 vectors and lanes of 16\n// values, 28 µs.\n//\n// The long form (decoder-gpu.ts's longAttentionSource: this source with\n// SCH = 128, KP = 2, KB = 8, VB = 16 and MAXG = 4) takes chunks of 128\n// positions, so that its NP parts hold one chunk each up to 2,048\n// positions where this form's fold two: for runs past NP·64 positions. The\n// lines below and MAXG's are what it replaces; as_s holds MAXG·SCH ≤ 512\n// floats in both.\nconst SCH: u32 = 64u;\nconst KP: u32 = 4u;\n// Loads a thread issues before using them: KB vectors of a key, VB values.\nconst KB: u32 = 4u;\nconst VB: u32 = 8u;\nconst AT: u32 = 256u;\n// The softmax's groups of scores (eight a head).\nconst SG: u32 = SCH / 8u;\n\n@group(0) @binding(2) var<storage, read> sa_x: array<f32>;\n@group(0) @binding(3) var<storage, read_write> sa_k: array<vec4<f32>>;\n@group(0) @binding(4) var<storage, read_write> sa_v: array<vec4<f32>>;\n@group(0) @binding(5) var<storage, read_write> sa_part: array<f32>;\n@group(0) @binding(6) var<uniform> sa_rope: Step;\n@group(0) @binding(7) var<storage, read> sa_table: array<f32>;\n\n// The group's queries, [G][hd/4]; the chunk's scores, then weights, [G][SCH];\n// as_w in turn the threads' partial dot products [G][AT], the softmax's\n// partial maxima and sums [G][8], and the lanes' weighted values\n// [G][lanes][hd]; each head's maximum and sum. 14 KiB in all, under\n// WebGPU's 16 KiB default.\nvar<workgroup> as_q: array<vec4<f32>, 256>;\nvar<workgroup> as_s: array<f32, 512>;\nvar<workgroup> as_w: array<f32, 2048>;\nvar<workgroup> as_mx: array<f32, MAXG>;\nvar<workgroup> as_l: array<f32, MAXG>;\n// The merge's tree and lanes (a workgroup of SCH threads).\nvar<workgroup> as_t: array<f32, 512>;\nvar<workgroup> as_pv: array<vec4<f32>, 256>;\n\n// Lanes of hd/4 threads that fit `threads` and `cap` floats of sums for G heads.\nfn lanes_of(hd4: u32, grp: u32, threads: u32, cap: u32) -> u32 {\n  return max(1u, min(threads / hd4, cap / (grp * hd4 * 4u)));\n}\n\n// One round of a thread's loads of a key (row kr of the cache, as vec4s):\n// its vectors d0, d0 + KP, ..., KB of them, all issued before any is used\n// (an index past the key is clamped into it and its vector taken as zero).\nfn key_round(kr: u32, d0: u32, hd4: u32) -> array<vec4<f32>, KB> {\n  var k: array<vec4<f32>, KB>;\n  for (var i = 0u; i < KB; i++) {\n    let d = d0 + i * KP;\n    k[i] = select(vec4<f32>(0.0), sa_k[kr + min(d, hd4 - 1u)], d < hd4);\n  }\n  return k;\n}\n\n// One round of a lane's loads of values: dimensions 4c .. 4c + 4 at the\n// chunk's positions jb, jb + lanes, ... (clamped to the chunk's last), VB\n// of them, all issued before any is used.\nfn value_round(kvh: u32, j0: u32, jb: u32, end: u32, hd: u32, kvw: u32, lanes: u32, c: u32) -> array<vec4<f32>, VB> {\n  var v: array<vec4<f32>, VB>;\n  for (var i = 0u; i < VB; i++) {\n    let jj = min(jb + i * lanes, end - 1u);\n    v[i] = sa_v[((j0 + jj) * kvw + kvh * hd) / 4u + c];\n  }\n  return v;\n}\n\n// A thread's first round of loads of a chunk, issued before the queries'\n// barrier (attention_rope_parts, one chunk a part): its KB vectors of its\n// position's key (chunk_weights' d0 = part) and its VB values\n// (chunk_values' jb = lane), so that the keys, the values and the\n// queries come from memory together rather than one after another.\nstruct Pre {\n  k: array<vec4<f32>, KB>,\n  v: array<vec4<f32>, VB>,\n}\n\n// The new position's key and value, turned and stored by the part that\n// holds it (rope_prologue), for its own prefetched loads, which may have\n// read that position before it was written. Heads of up to 64 floats.\nvar<workgroup> as_nk: array<vec4<f32>, 16>;\nvar<workgroup> as_nv: array<vec4<f32>, 16>;\n\nfn prefetch(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32) -> Pre {\n  let hd4 = hd / 4u;\n  var pre: Pre;\n  let jl = lid / KP;\n  let part = lid % KP;\n  if (jl < end) {\n    pre.k = key_round(((j0 + jl) * kvw + kvh * hd) / 4u, part, hd4);\n  }\n  let lanes = lanes_of(hd4, grp, AT, 2048u);\n  let lane = lid / hd4;\n  if (lane < lanes) {\n    pre.v = value_round(kvh, j0, lane, end, hd, kvw, lanes, lid % hd4);\n  }\n  return pre;\n}\n\n// `pre` with the new position p's key and value from as_nk and as_nv\n// (after rope_prologue's barrier), where the thread loaded them.\nfn patched(pre: Pre, lid: u32, j0: u32, end: u32, grp: u32, hd: u32, p: u32) -> Pre {\n  let hd4 = hd / 4u;\n  var out = pre;\n  if (j0 + lid / KP == p) {\n    for (var i = 0u; i < KB; i++) {\n      let d = lid % KP + i * KP;\n      out.k[i] = select(vec4<f32>(0.0), as_nk[min(d, hd4 - 1u)], d < hd4);\n    }\n  }\n  let lanes = lanes_of(hd4, grp, AT, 2048u);\n  let lane = lid / hd4;\n  if (lane < lanes) {\n    for (var i = 0u; i < VB; i++) {\n      if (j0 + min(lane + i * lanes, end - 1u) == p) {\n        out.v[i] = as_nv[lid % hd4];\n      }\n    }\n  }\n  return out;\n}\n\n// A chunk of one key/value head (positions j0 .. j0 + end) against the\n// group's queries in as_q (loaded, after a barrier): the scores, then each\n// head's maximum in as_mx, the weights e^(score − max) in as_s (0 past\n// end) and their sum in as_l, after a barrier. Loops over the group's\n// heads run to MAXG with the head as a guard, so that the per-head sums\n// stay in registers.\nfn chunk_weights(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32) {\n  chunk_weights_from(lid, kvh, j0, end, grp, hd, kvw, false, Pre());\n}\n\n// chunk_weights with the keys' first round of loads (d0 = part) taken from\n// `pre` where `has` (prefetched: see Pre).\nfn chunk_weights_from(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, has: bool, pre: Pre) {\n  let hd4 = hd / 4u;\n  // Scores: KP threads a position; thread `part` takes the key's vectors\n  // part, part + KP, ..., in rounds of KB (key_round).\n  let jl = lid / KP;\n  let part = lid % KP;\n  var dots: array<f32, MAXG>;\n  for (var g = 0u; g < MAXG; g++) {\n    dots[g] = 0.0;\n  }\n  if (jl < end) {\n    let kr = ((j0 + jl) * kvw + kvh * hd) / 4u;\n    for (var d0 = part; d0 < hd4; d0 += KB * KP) {\n      var k: array<vec4<f32>, KB>;\n      if (has && d0 == part) {\n        k = pre.k;\n      } else {\n        k = key_round(kr, d0, hd4);\n      }\n      for (var i = 0u; i < KB; i++) {\n        let d = min(d0 + i * KP, hd4 - 1u);\n        for (var g = 0u; g < MAXG; g++) {\n          if (g < grp) {\n            dots[g] += dot(as_q[g * hd4 + d], k[i]);\n          }\n        }\n      }\n    }\n  }\n  for (var g = 0u; g < MAXG; g++) {\n    if (g < grp) {\n      as_w[g * AT + lid] = dots[g];\n    }\n  }\n  workgroupBarrier();\n  let valid = lid < end;\n  if (lid < SCH) {\n    for (var g = 0u; g < grp; g++) {\n      var sc = NEG;\n      if (valid) {\n        let a = g * AT + lid * KP;\n        var dot = 0.0;\n        for (var i = 0u; i < KP; i++) {\n          dot += as_w[a + i];\n        }\n        sc = dot * S.f0;\n      }\n      as_s[g * SCH + lid] = sc;\n    }\n  }\n  workgroupBarrier();\n  // The softmax: each head's maximum and sum over SCH = 8·SG scores in two\n  // steps, eight groups of SG and then the eight.\n  if (lid < grp * 8u) {\n    let a = (lid / 8u) * SCH + (lid % 8u) * SG;\n    var m = as_s[a];\n    for (var i = 1u; i < SG; i++) {\n      m = max(m, as_s[a + i]);\n    }\n    as_w[lid] = m;\n  }\n  workgroupBarrier();\n  if (lid < grp) {\n    var m = as_w[lid * 8u];\n    for (var i = 1u; i < 8u; i++) {\n      m = max(m, as_w[lid * 8u + i]);\n    }\n    as_mx[lid] = m;\n  }\n  workgroupBarrier();\n  if (lid < SCH) {\n    for (var g = 0u; g < grp; g++) {\n      var w = 0.0;\n      if (valid) {\n        w = exp(as_s[g * SCH + lid] - as_mx[g]);\n      }\n      as_s[g * SCH + lid] = w;\n    }\n  }\n  workgroupBarrier();\n  if (lid < grp * 8u) {\n    let a = (lid / 8u) * SCH + (lid % 8u) * SG;\n    var l = 0.0;\n    for (var i = 0u; i < SG; i++) {\n      l += as_s[a + i];\n    }\n    as_w[lid] = l;\n  }\n  workgroupBarrier();\n  if (lid < grp) {\n    var l = 0.0;\n    for (var i = 0u; i < 8u; i++) {\n      l += as_w[lid * 8u + i];\n    }\n    as_l[lid] = l;\n  }\n  workgroupBarrier();\n}\n\n// The chunk's weighted values of thread (lane, c) of lanes_of(hd/4, G, AT,\n// 2048) lanes: dimensions 4c .. 4c + 4 of each head, over the positions\n// lane, lane + lanes, ... of the chunk, VB values loaded before any is used.\nfn chunk_values(kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, lanes: u32, lane: u32, c: u32) -> array<vec4<f32>, MAXG> {\n  return chunk_values_from(kvh, j0, end, grp, hd, kvw, lanes, lane, c, false, Pre());\n}\n\n// chunk_values with the first round of loads (jb = lane) taken from `pre`\n// where `has`.\nfn chunk_values_from(kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, lanes: u32, lane: u32, c: u32, has: bool, pre: Pre) -> array<vec4<f32>, MAXG> {\n  var acc: array<vec4<f32>, MAXG>;\n  for (var g = 0u; g < MAXG; g++) {\n    acc[g] = vec4<f32>(0.0);\n  }\n  for (var jb = lane; jb < end; jb += VB * lanes) {\n    var v: array<vec4<f32>, VB>;\n    if (has && jb == lane) {\n      v = pre.v;\n    } else {\n      v = value_round(kvh, j0, jb, end, hd, kvw, lanes, c);\n    }\n    for (var i = 0u; i < VB; i++) {\n      let jj = jb + i * lanes;\n      let ji = min(jj, end - 1u);\n      for (var g = 0u; g < MAXG; g++) {\n        if (g < grp) {\n          acc[g] += select(0.0, as_s[g * SCH + ji], jj < end) * v[i];\n        }\n      }\n    }\n  }\n  return acc;\n}\n\n// The lanes' weighted values of head g's dimensions 4c .. 4c + 4, summed in\n// lane order (in as_w, after a barrier).\nfn lanes_sum(g: u32, c: u32, hd4: u32, lanes: u32) -> vec4<f32> {\n  var o = vec4<f32>(0.0);\n  for (var l = 0u; l < lanes; l++) {\n    let a = ((g * lanes + l) * hd4 + c) * 4u;\n    o += vec4<f32>(as_w[a], as_w[a + 1u], as_w[a + 2u], as_w[a + 3u]);\n  }\n  return o;\n}\n\n// Thread (lane, c)'s weighted values into as_w, for lanes_sum.\nfn lanes_store(acc: array<vec4<f32>, MAXG>, grp: u32, hd4: u32, lanes: u32, lane: u32, c: u32) {\n  for (var g = 0u; g < MAXG; g++) {\n    if (g < grp) {\n      let a = ((g * lanes + lane) * hd4 + c) * 4u;\n      as_w[a] = acc[g].x;\n      as_w[a + 1u] = acc[g].y;\n      as_w[a + 2u] = acc[g].z;\n      as_w[a + 3u] = acc[g].w;\n    }\n  }\n}\n\n// One chunk of the split attention: its weights and weighted values, and\n// the partials' rows of the group's heads (with `parts`, as part `chunk` of\n// the +merge layout: attend_parts' for one chunk a part).\nfn attend_chunk(lid: u32, kvh: u32, chunk: u32, grp: u32, hd: u32, kvw: u32, n: u32, parts: bool) {\n  attend_chunk_from(lid, kvh, chunk, grp, hd, kvw, n, parts, false, Pre());\n}\n\n// attend_chunk with the first rounds of its keys' and values' loads from\n// `pre` where `has`.\nfn attend_chunk_from(lid: u32, kvh: u32, chunk: u32, grp: u32, hd: u32, kvw: u32, n: u32, parts: bool, has: bool, pre: Pre) {\n  let hd4 = hd / 4u;\n  let j0 = chunk * SCH;\n  let end = min(SCH, n - j0);\n  chunk_weights_from(lid, kvh, j0, end, grp, hd, kvw, has, pre);\n  let lanes = lanes_of(hd4, grp, AT, 2048u);\n  let c = lid % hd4;\n  let lane = lid / hd4;\n  if (lane < lanes) {\n    lanes_store(chunk_values_from(kvh, j0, end, grp, hd, kvw, lanes, lane, c, has, pre), grp, hd4, lanes, lane, c);\n  }\n  workgroupBarrier();\n  if (parts) {\n    write_part(lid, kvh, chunk, grp, hd, lanes, as_mx, as_l);\n    return;\n  }\n  let chunks = (n + SCH - 1u) / SCH;\n  for (var i = lid; i < grp * hd4; i += AT) {\n    let o = lanes_sum(i / hd4, i % hd4, hd4, lanes);\n    let row = ((kvh * grp + i / hd4) * chunks + chunk) * (hd + 2u) + 4u * (i % hd4);\n    sa_part[row] = o.x;\n    sa_part[row + 1u] = o.y;\n    sa_part[row + 2u] = o.z;\n    sa_part[row + 3u] = o.w;\n  }\n  if (lid < grp) {\n    let row = ((kvh * grp + lid) * chunks + chunk) * (hd + 2u);\n    sa_part[row + hd] = as_mx[lid];\n    sa_part[row + hd + 1u] = as_l[lid];\n  }\n}\n\n// A softmax's running state over parts of its positions: the largest\n// score m so far, the sum l of e^(score − m) and the weighted values o\n// (four dimensions), both rescaled to m.\nstruct Fold {\n  m: f32,\n  l: f32,\n  o: vec4<f32>,\n}\n\nconst FOLD0 = Fold(NEG, 0.0, vec4<f32>(0.0));\n\n// `a` with a part of maximum m, sum l and weighted values o folded in.\nfn fold(a: Fold, m: f32, l: f32, o: vec4<f32>) -> Fold {\n  let mn = max(a.m, m);\n  let down = exp(a.m - mn);\n  let up = exp(m - mn);\n  return Fold(mn, a.l * down + l * up, a.o * down + o * up);\n}\n\n// Chunks j0 = first, first + step, ... (below n) of one key/value head by\n// one workgroup, each folded into a running maximum, sum and weighted\n// values per head (the merge's rule, in registers); then the lanes'\n// weighted values in as_w (for lanes_sum) and each head's maximum and sum\n// in as_mx and as_l, after a barrier. Returns the lanes.\nfn fold_chunks(lid: u32, kvh: u32, first: u32, step: u32, grp: u32, hd: u32, kvw: u32, n: u32) -> u32 {\n  let hd4 = hd / 4u;\n  let lanes = lanes_of(hd4, grp, AT, 2048u);\n  let c = lid % hd4;\n  let lane = lid / hd4;\n  var f: array<Fold, MAXG>;\n  for (var g = 0u; g < MAXG; g++) {\n    f[g] = FOLD0;\n  }\n  for (var j0 = first; j0 < n; j0 += step) {\n    let end = min(SCH, n - j0);\n    chunk_weights(lid, kvh, j0, end, grp, hd, kvw);\n    if (lane < lanes) {\n      let acc = chunk_values(kvh, j0, end, grp, hd, kvw, lanes, lane, c);\n      for (var g = 0u; g < MAXG; g++) {\n        if (g < grp) {\n          f[g] = fold(f[g], as_mx[g], as_l[g], acc[g]);\n        }\n      }\n    }\n    // The next chunk writes over the weights and sums.\n    workgroupBarrier();\n  }\n  if (lane < lanes) {\n    var o: array<vec4<f32>, MAXG>;\n    for (var g = 0u; g < MAXG; g++) {\n      o[g] = f[g].o;\n    }\n    lanes_store(o, grp, hd4, lanes, lane, c);\n  }\n  if (lid == 0u) {\n    for (var g = 0u; g < MAXG; g++) {\n      if (g < grp) {\n        as_mx[g] = f[g].m;\n        as_l[g] = f[g].l;\n      }\n    }\n  }\n  workgroupBarrier();\n  return lanes;\n}\n\n// The whole cache of one key/value head by one workgroup, every chunk\n// folded (fold_chunks): the attention's output rows directly, without\n// partials or a merge. For short contexts, where that costs less than the\n// merge's dispatch (decoder-gpu.ts chooses by the position: up to one\n// chunk by default).\nfn attend_all(lid: u32, kvh: u32, grp: u32, hd: u32, kvw: u32, n: u32) {\n  let hd4 = hd / 4u;\n  let lanes = fold_chunks(lid, kvh, 0u, SCH, grp, hd, kvw, n);\n  for (var i = lid; i < grp * hd4; i += AT) {\n    ao_out[kvh * grp * hd4 + i] = lanes_sum(i / hd4, i % hd4, hd4, lanes) / as_l[i / hd4];\n  }\n}\n\n// The queries of key/value head kvh's group into as_q, as the row holds them.\nfn load_queries(lid: u32, kvh: u32, grp: u32, hd: u32) {\n  let hd4 = hd / 4u;\n  let q0 = kvh * grp * hd;\n  for (var i = lid; i < grp * hd4; i += AT) {\n    let a = q0 + 4u * i;\n    as_q[i] = vec4<f32>(sa_x[a], sa_x[a + 1u], sa_x[a + 2u], sa_x[a + 3u]);\n  }\n}\n\n@compute @workgroup_size(AT)\nfn attention_split(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let kvh = wid.x;\n  let grp = S.n1 / S.n2;\n  let n = R.pos0 + 1u;\n  if (wid.y * SCH >= n) {\n    return;\n  }\n  load_queries(lid, kvh, grp, S.n3);\n  workgroupBarrier();\n  attend_chunk(lid, kvh, wid.y, grp, S.n3, S.n2 * S.n3, n, false);\n}\n\n// `attention_split` over every chunk in one workgroup a key/value head\n// (grid (kv_heads, 1)), its output rows at binding 5 instead of partials.\n@group(0) @binding(5) var<storage, read_write> ao_out: array<vec4<f32>>;\n\n@compute @workgroup_size(AT)\nfn attention_one(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let grp = S.n1 / S.n2;\n  load_queries(lid, wid.x, grp, S.n3);\n  workgroupBarrier();\n  attend_all(lid, wid.x, grp, S.n3, S.n2 * S.n3, R.pos0 + 1u);\n}\n\n// Four floats of the row from column col (a multiple of 4), their two\n// pairs turned by the rotary table at `tab` + col % hd (rope's rule).\nfn turned4(col: u32, tab: u32) -> vec4<f32> {\n  let x = vec4<f32>(sa_x[col], sa_x[col + 1u], sa_x[col + 2u], sa_x[col + 3u]);\n  let c0 = sa_table[tab];\n  let s0 = sa_table[tab + 1u];\n  let c1 = sa_table[tab + 2u];\n  let s1 = sa_table[tab + 3u];\n  return vec4<f32>(x.x * c0 + x.y * -s0, x.y * c0 + x.x * s0, x.z * c1 + x.w * -s1, x.w * c1 + x.z * s1);\n}\n\n// attention_rope's prologue: the group's queries turned into as_q and, by\n// the workgroup of the last chunk (`last`), the new key turned and stored\n// with the value in the caches; then the barriers after which this\n// workgroup reads them.\nfn rope_prologue(lid: u32, kvh: u32, grp: u32, hd: u32, kvw: u32, last: bool) {\n  let hd4 = hd / 4u;\n  let p = R.pos0;\n  let tab = p * hd;\n  for (var i = lid; i < grp * hd4; i += AT) {\n    as_q[i] = turned4(kvh * grp * hd + 4u * i, tab + (4u * i) % hd);\n  }\n  if (last) {\n    let dst = (p * kvw + kvh * hd) / 4u;\n    for (var i = lid; i < hd4; i += AT) {\n      let k = turned4(sa_rope.n4 + kvh * hd + 4u * i, tab + 4u * i);\n      let vc = sa_rope.n5 + kvh * hd + 4u * i;\n      let v = vec4<f32>(sa_x[vc], sa_x[vc + 1u], sa_x[vc + 2u], sa_x[vc + 3u]);\n      sa_k[dst + i] = k;\n      sa_v[dst + i] = v;\n      if (i < 16u) {\n        as_nk[i] = k;\n        as_nv[i] = v;\n      }\n    }\n  }\n  storageBarrier();\n  workgroupBarrier();\n}\n\n@compute @workgroup_size(AT)\nfn attention_rope(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let kvh = wid.x;\n  let grp = S.n1 / S.n2;\n  let kvw = S.n2 * S.n3;\n  let n = R.pos0 + 1u;\n  let j0 = wid.y * SCH;\n  if (j0 >= n) {\n    return;\n  }\n  rope_prologue(lid, kvh, grp, S.n3, kvw, j0 + SCH >= n);\n  attend_chunk(lid, kvh, wid.y, grp, S.n3, kvw, n, false);\n}\n\n// `attention_rope` over every chunk in one workgroup a key/value head, as\n// `attention_one`.\n@compute @workgroup_size(AT)\nfn attention_rope_one(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let grp = S.n1 / S.n2;\n  let kvw = S.n2 * S.n3;\n  rope_prologue(lid, wid.x, grp, S.n3, kvw, true);\n  attend_all(lid, wid.x, grp, S.n3, kvw, R.pos0 + 1u);\n}\n\n// ---------------------------------------------------------------- attention in parts\n// The split attention for a product with `+merge` after it (docs/ops.md):\n// NP parts a head whatever the context, part p folding chunks p, p + NP,\n// ... of the cache in registers (attend_all's rule), then writing its\n// weighted values, largest score and sum in the product's layout: P at\n// (h·NP + p)·hd + d, PM at pm0 + h·NP + p and PL at pl0 + h·NP + p of\n// sa_part (merge_offsets). A part with no positions writes the empty part\n// (PM = NEG, PL = 0, P = 0). Grid (kv_heads, NP); no merge dispatch.\nconst NP: u32 = 16u;\n\n// Where PM and PL start in sa_part (floats; each region on a 256-byte boundary, for its binding).\nfn merge_offsets(heads: u32, hd: u32) -> vec2<u32> {\n  let pm0 = (heads * NP * hd + 63u) / 64u * 64u;\n  return vec2<u32>(pm0, pm0 + (heads * NP + 63u) / 64u * 64u);\n}\n\nfn attend_parts(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, kvw: u32, n: u32) {\n  let lanes = fold_chunks(lid, kvh, p * SCH, NP * SCH, grp, hd, kvw, n);\n  write_part(lid, kvh, p, grp, hd, lanes, as_mx, as_l);\n}\n\n// Part p of the group's heads in the +merge layout: the lanes' weighted\n// values (summed by lanes_sum, after the caller's barrier), and each head's\n// largest score and sum from `mx` and `l`.\nfn write_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, lanes: u32, mx: array<f32, MAXG>, l: array<f32, MAXG>) {\n  let hd4 = hd / 4u;\n  for (var i = lid; i < grp * hd4; i += AT) {\n    let o = lanes_sum(i / hd4, i % hd4, hd4, lanes);\n    let at = ((kvh * grp + i / hd4) * NP + p) * hd + 4u * (i % hd4);\n    sa_part[at] = o.x;\n    sa_part[at + 1u] = o.y;\n    sa_part[at + 2u] = o.z;\n    sa_part[at + 3u] = o.w;\n  }\n  if (lid < grp) {\n    let off = merge_offsets(S.n1, hd);\n    let h = (kvh * grp + lid) * NP + p;\n    sa_part[off.x + h] = mx[lid];\n    sa_part[off.y + h] = l[lid];\n  }\n}\n\n// The group's heads' part p where it holds no positions: PM = NEG, PL = 0, P = 0.\nfn empty_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32) {\n  for (var i = lid; i < grp * hd; i += AT) {\n    sa_part[((kvh * grp + i / hd) * NP + p) * hd + i % hd] = 0.0;\n  }\n  if (lid < grp) {\n    let off = merge_offsets(S.n1, hd);\n    let h = (kvh * grp + lid) * NP + p;\n    sa_part[off.x + h] = NEG;\n    sa_part[off.y + h] = 0.0;\n  }\n}\n\n// Part wid.y of the group's heads: up to NP chunks, part p is chunk p (the\n// split kernel's own work, written in the +merge layout), or empty; past\n// them, attend_parts folds its chunks.\nfn attend_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, kvw: u32, n: u32) {\n  if (n > NP * SCH) {\n    attend_parts(lid, kvh, p, grp, hd, kvw, n);\n  } else if (p * SCH < n) {\n    attend_chunk(lid, kvh, p, grp, hd, kvw, n, true);\n  } else {\n    empty_part(lid, kvh, p, grp, hd);\n  }\n}\n\n@compute @workgroup_size(AT)\nfn attention_parts(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let grp = S.n1 / S.n2;\n  load_queries(lid, wid.x, grp, S.n3);\n  workgroupBarrier();\n  attend_part(lid, wid.x, wid.y, grp, S.n3, S.n2 * S.n3, R.pos0 + 1u);\n}\n\n// `attention_parts` with attention_rope's prologue: the part that holds the\n// new position turns and stores its key and value. Where a part holds one\n// chunk (up to NP·SCH positions) and heads have at most 64 floats, its\n// first loads of keys and values are issued before the prologue\n// (prefetch), and the part that holds the new position takes that\n// position from the prologue's copy in workgroup memory (patched).\n@compute @workgroup_size(AT)\nfn attention_rope_parts(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let grp = S.n1 / S.n2;\n  let kvw = S.n2 * S.n3;\n  let hd = S.n3;\n  let n = R.pos0 + 1u;\n  let p = wid.y;\n  let owner = (R.pos0 / SCH) % NP == p;\n  let j0 = p * SCH;\n  let one = n <= NP * SCH && j0 < n && hd <= 64u;\n  var pre: Pre;\n  if (one) {\n    pre = prefetch(lid, wid.x, j0, min(SCH, n - j0), grp, hd, kvw);\n  }\n  rope_prologue(lid, wid.x, grp, hd, kvw, owner);\n  if (one) {\n    if (owner) {\n      pre = patched(pre, lid, j0, min(SCH, n - j0), grp, hd, R.pos0);\n    }\n    attend_chunk_from(lid, wid.x, p, grp, hd, kvw, n, true, true, pre);\n  } else {\n    attend_part(lid, wid.x, p, grp, hd, kvw, n);\n  }\n}\n\n@group(0) @binding(2) var<storage, read> am_part: array<f32>;\n@group(0) @binding(3) var<storage, read_write> am_out: array<vec4<f32>>;\n\n@compute @workgroup_size(SCH)\nfn attention_merge(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let h = wid.x;\n  let hd = S.n3;\n  let hd4 = hd / 4u;\n  let n = R.pos0 + 1u;\n  let chunks = (n + SCH - 1u) / SCH;\n  let w = hd + 2u;\n  let base = h * chunks * w;\n  // Lanes of hd/4 threads, four dimensions a thread, lane l taking chunks\n  // l, l + lanes, ...: VB chunks' maxima, sums and values loaded before any\n  // is used, folded into a running maximum m, sum and weighted values\n  // rescaled to it (e^(max_c − m)). Then the lanes, in order, the same way.\n  let lanes = lanes_of(hd4, 1u, SCH, 1024u);\n  let c4 = lid % hd4;\n  let lane = lid / hd4;\n  if (lane < lanes) {\n    var f = FOLD0;\n    for (var cb = lane; cb < chunks; cb += VB * lanes) {\n      var cm: array<f32, VB>;\n      var cl: array<f32, VB>;\n      var cv: array<vec4<f32>, VB>;\n      for (var i = 0u; i < VB; i++) {\n        let row = base + min(cb + i * lanes, chunks - 1u) * w;\n        let a = row + 4u * c4;\n        cm[i] = am_part[row + hd];\n        cl[i] = am_part[row + hd + 1u];\n        cv[i] = vec4<f32>(am_part[a], am_part[a + 1u], am_part[a + 2u], am_part[a + 3u]);\n      }\n      for (var i = 0u; i < VB; i++) {\n        if (cb + i * lanes < chunks) {\n          f = fold(f, cm[i], cl[i], cv[i]);\n        }\n      }\n    }\n    as_pv[lane * hd4 + c4] = f.o;\n    if (c4 == 0u) {\n      as_t[2u * lane] = f.m;\n      as_t[2u * lane + 1u] = f.l;\n    }\n  }\n  workgroupBarrier();\n  if (lid < hd4) {\n    var f = FOLD0;\n    for (var l2 = 0u; l2 < lanes; l2++) {\n      f = fold(f, as_t[2u * l2], as_t[2u * l2 + 1u], as_pv[l2 * hd4 + lid]);\n    }\n    am_out[h * hd4 + lid] = f.o / f.l;\n  }\n}\n\n\n// ---------------------------------------------------------------- swiglu\n// out[r][i] = silu(x[r][i])·x[r][f + i] for i < f = S.n0: rows of 2f floats\n// (gate then up) in, rows of f out; silu(g) = g / (1 + e^−g), e^−g clamped\n// at e^88 as the Wasm kernel's exp. Grid (⌈f/EW⌉, M).\n@group(0) @binding(2) var<storage, read> sw_x: array<f32>;\n@group(0) @binding(3) var<storage, read_write> sw_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn swiglu(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let i = g.x;\n  let f = S.n0;\n  if (r >= R.t || i >= f) {\n    return;\n  }\n  let gate = sw_x[r * 2u * f + i];\n  sw_out[r * f + i] = gate / (1.0 + exp(min(-gate, 88.0))) * sw_x[r * 2u * f + f + i];\n}\n\n// ---------------------------------------------------------------- add\n// x[r][i] += y[r][i] for i < S.n0: grid (⌈cols/EW⌉, M).\n@group(0) @binding(2) var<storage, read> add_y: array<f32>;\n@group(0) @binding(3) var<storage, read_write> add_x: array<f32>;\n\n@compute @workgroup_size(EW)\nfn add(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let i = g.x;\n  if (r >= R.t || i >= S.n0) {\n    return;\n  }\n  let at = r * S.n0 + i;\n  add_x[at] = add_x[at] + add_y[at];\n}\n\n// ---------------------------------------------------------------- sample\n// The next token from the logits (S.n0 = V of them), by sampler.ts's rule,\n// in one workgroup: grid (1, 1). out[0] is the token, or NO_TOKEN where the\n// host must sample from the logits itself with the same draw (out[1] = 1).\n//\n// - temperature ≤ 0: greedy, the first largest logit (NaN never wins).\n// - otherwise the candidates: the ids whose weight e^((l − top)/T) is at\n//   least e^−CUT, or, when more than MAXC are, the ids at or above a\n//   threshold found by bisection that keeps from max(k, MAXC/2) to MAXC of\n//   them; sorted by logit, largest first, ties by id (a bitonic sort in\n//   workgroup memory); cut to the top k; weights in f32; cut to the\n//   smallest head whose share reaches top-p; then the host's draw u times\n//   the kept total walks the kept ids. The ids below the threshold (the\n//   tail) count in the totals where the rule counts them (no top-k, or one\n//   past the candidates), by their summed weight.\n// The host samples instead when the rule's choice lies in a tail that the\n// bisection cut off: the top-k reaching past the candidates, the top-p cut\n// or the draw falling in it (with no bisection the tail's ids weigh less\n// than e^−CUT each, and a draw falls among them with odds below V·e^−CUT).\n// The GPU's pick differs from sampler.ts's (weights in f64) only where the\n// draw falls within f32 rounding of a boundary between two ids' shares.\nconst SW: u32 = 256u;\nconst MAXC: u32 = 1024u;\nconst CUT: f32 = 30.0;\nconst NO_TOKEN: u32 = 0xffffffffu;\n// Logits a thread of the argmax loads before it compares any.\nconst SU: u32 = 8u;\n\n@group(0) @binding(2) var<storage, read> sm_logits: array<f32>;\n@group(0) @binding(3) var<storage, read_write> sm_out: array<u32>;\n\nvar<workgroup> sm_v: array<f32, MAXC>;\nvar<workgroup> sm_i: array<u32, MAXC>;\nvar<workgroup> sm_rv: array<f32, SW>;\nvar<workgroup> sm_ri: array<u32, SW>;\nvar<workgroup> sm_count: atomic<u32>;\nvar<workgroup> sm_n: u32;\n\n// How many logits are at least thr (every thread gets the count).\nfn count_at_least(lid: u32, thr: f32) -> u32 {\n  var c = 0u;\n  for (var i = lid; i < S.n0; i += SW) {\n    if (sm_logits[i] >= thr) {\n      c++;\n    }\n  }\n  sm_ri[lid] = c;\n  workgroupBarrier();\n  for (var k = SW / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      sm_ri[lid] += sm_ri[lid + k];\n    }\n    workgroupBarrier();\n  }\n  return workgroupUniformLoad(&sm_ri[0]);\n}\n\n// Whether candidate a comes before b: larger logit, then smaller id.\nfn before(va: f32, ia: u32, vb: f32, ib: u32) -> bool {\n  return va > vb || (va == vb && ia < ib);\n}\n\nfn no_token(lid: u32) {\n  if (lid == 0u) {\n    sm_out[0] = NO_TOKEN;\n    sm_out[1] = 1u;\n  }\n}\n\n@compute @workgroup_size(SW)\nfn sample(@builtin(local_invocation_index) lid: u32) {\n  let V = S.n0;\n  // The first largest logit: SU logits a thread loaded before any is\n  // compared (a loop that used each load before issuing the next waited\n  // for it every iteration: 52 us a token over 49,152 logits on an H200).\n  var bv = sm_logits[0];\n  var bi = 0u;\n  for (var i0 = lid; i0 < V; i0 += SW * SU) {\n    var vs: array<f32, SU>;\n    for (var u = 0u; u < SU; u++) {\n      vs[u] = sm_logits[min(i0 + u * SW, V - 1u)];\n    }\n    for (var u = 0u; u < SU; u++) {\n      let i = i0 + u * SW;\n      let v = vs[u];\n      if (i < V && (v > bv || (v == bv && i < bi))) {\n        bv = v;\n        bi = i;\n      }\n    }\n  }\n  sm_rv[lid] = bv;\n  sm_ri[lid] = bi;\n  workgroupBarrier();\n  for (var k = SW / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      let v = sm_rv[lid + k];\n      let i = sm_ri[lid + k];\n      if (before(v, i, sm_rv[lid], sm_ri[lid])) {\n        sm_rv[lid] = v;\n        sm_ri[lid] = i;\n      }\n    }\n    workgroupBarrier();\n  }\n  let best = sm_ri[0];\n  // Uniform: the bisection's branches depend on it.\n  let top = workgroupUniformLoad(&sm_rv[0]);\n  if (!(R.temperature > 0.0)) {\n    if (lid == 0u) {\n      sm_out[0] = best;\n      sm_out[1] = 0u;\n    }\n    return;\n  }\n  let temp = R.temperature;\n  let k = R.top_k;\n  // The candidates' threshold.\n  var thr = top - CUT * temp;\n  var cnt = count_at_least(lid, thr);\n  let bisected = cnt > MAXC;\n  if (bisected) {\n    // count(lo) > MAXC; narrow [lo, hi] until count(hi) is enough, at most MAXC.\n    let enough = max(min(k, MAXC), MAXC / 2u);\n    var lo = thr;\n    var hi = top;\n    cnt = count_at_least(lid, hi);\n    for (var it = 0u; it < 48u && cnt < enough; it++) {\n      let mid = lo + (hi - lo) * 0.5;\n      if (mid <= lo || mid >= hi) {\n        break;\n      }\n      let c = count_at_least(lid, mid);\n      if (c > MAXC) {\n        lo = mid;\n      } else {\n        hi = mid;\n        cnt = c;\n      }\n    }\n    thr = hi;\n    if (cnt > MAXC) {\n      // More than MAXC ids tie at the largest logit.\n      no_token(lid);\n      return;\n    }\n  }\n  // Gather the candidates (in any order: the sort orders them) and sum the tail's weights.\n  if (lid == 0u) {\n    atomicStore(&sm_count, 0u);\n  }\n  workgroupBarrier();\n  var tail = 0.0;\n  for (var i = lid; i < V; i += SW) {\n    let v = sm_logits[i];\n    if (v >= thr) {\n      let at = atomicAdd(&sm_count, 1u);\n      if (at < MAXC) {\n        sm_v[at] = v;\n        sm_i[at] = i;\n      }\n    } else {\n      tail += exp((v - top) / temp);\n    }\n  }\n  sm_rv[lid] = tail;\n  workgroupBarrier();\n  for (var s = SW / 2u; s > 0u; s >>= 1u) {\n    if (lid < s) {\n      sm_rv[lid] += sm_rv[lid + s];\n    }\n    workgroupBarrier();\n  }\n  if (lid == 0u) {\n    sm_n = min(atomicLoad(&sm_count), MAXC);\n  }\n  let n = workgroupUniformLoad(&sm_n);\n  tail = sm_rv[0];\n  // Padding after the candidates, last in the order; then a bitonic sort.\n  var p = 2u;\n  while (p < n) {\n    p <<= 1u;\n  }\n  for (var i = n + lid; i < p; i += SW) {\n    sm_v[i] = NEG;\n    sm_i[i] = NO_TOKEN;\n  }\n  workgroupBarrier();\n  for (var size = 2u; size <= p; size <<= 1u) {\n    for (var stride = size / 2u; stride > 0u; stride >>= 1u) {\n      for (var i = lid; i < p; i += SW) {\n        let j = i ^ stride;\n        if (j > i) {\n          let up = (i & size) == 0u;\n          let swap = select(before(sm_v[i], sm_i[i], sm_v[j], sm_i[j]), before(sm_v[j], sm_i[j], sm_v[i], sm_i[i]), up);\n          if (swap) {\n            let tv = sm_v[i];\n            let ti = sm_i[i];\n            sm_v[i] = sm_v[j];\n            sm_i[i] = sm_i[j];\n            sm_v[j] = tv;\n            sm_i[j] = ti;\n          }\n        }\n      }\n      workgroupBarrier();\n    }\n  }\n  if (lid != 0u) {\n    return;\n  }\n  // The rule's ids: the top k (all: k 0), of which the candidates hold `len`.\n  var len = n;\n  var withTail = true;\n  if (k > 0u && k <= n) {\n    len = k;\n    withTail = false;\n  } else if (k > 0u && bisected) {\n    no_token(lid);\n    return;\n  }\n  var total = 0.0;\n  for (var j = 0u; j < len; j++) {\n    total += exp((sm_v[j] - top) / temp);\n  }\n  if (withTail) {\n    total += tail;\n  }\n  var keep = len;\n  if (R.top_p < 1.0) {\n    var acc = 0.0;\n    var found = false;\n    for (var j = 0u; j < len; j++) {\n      acc += exp((sm_v[j] - top) / temp) / total;\n      if (acc >= R.top_p) {\n        keep = j + 1u;\n        found = true;\n        break;\n      }\n    }\n    if (found) {\n      withTail = false;\n    } else if (withTail && bisected) {\n      no_token(lid);\n      return;\n    }\n  }\n  var kept = 0.0;\n  for (var j = 0u; j < keep; j++) {\n    kept += exp((sm_v[j] - top) / temp);\n  }\n  if (withTail) {\n    kept += tail;\n  }\n  var u = R.u * kept;\n  for (var j = 0u; j < keep; j++) {\n    let w = exp((sm_v[j] - top) / temp);\n    if (u < w) {\n      sm_out[0] = sm_i[j];\n      sm_out[1] = 0u;\n      return;\n    }\n    u -= w;\n  }\n  if (withTail) {\n    // The draw falls in the tail.\n    no_token(lid);\n    return;\n  }\n  sm_out[0] = sm_i[keep - 1u];\n  sm_out[1] = 0u;\n}\n" });
      const made = [];
      for (const entryPoint of FIXED2) {
        made.push(await device.createComputePipelineAsync({ label: `decoder ${entryPoint}`, layout: "auto", compute: { module, entryPoint } }).catch(async (e) => {
          throw new Error(await compileErrors(module, "decoder-kernels.wgsl", e));
        }));
      }
      const pipelines = Object.fromEntries(FIXED2.map((n, i) => [n, made[i]]));
      const long = {};
      if (longFrom > 0) {
        const code = longAttentionSource(init.wgsl ?? "// The text generator's fixed WebGPU kernels: everything of a decoder graph's\n// run that is not a matrix product (those are webtune's tuned WGSL kernels\n// of matmul_q4_1, matmul_q8_0, matmul_q4 and matmul), plus the sampling of\n// the next token. The WebGPU twin of decoder-kernels.wat (the same rules,\n// step by step); decoder-gpu.ts runs them.\n//\n// One entry point per kernel. Binding 0 is the run's parameters (R: the\n// real rows T, the first position, the sampling draw), written once per\n// run; binding 1 the step's own (S, fixed when a bucket's bind groups are\n// made); the others are the kernel's buffers (numbers reused across entry\n// points, each pipeline's layout is its own). A kernel's grid is made for\n// the bucket's M rows (y: one row a workgroup row) and every workgroup of a\n// row past R.t returns at once, so that one recorded command buffer serves\n// every run of the bucket, whatever its T, and no kernel depends on the\n// context's length: attention reads its length from R.\n//\n// Lengths are counts of floats. Every row length is a multiple of 4 and\n// every part's binding holds what the kernel reads (decoder-gpu.ts checks).\n\nstruct Run {\n  // Real rows of this run (T, at most the bucket's M); position of the first.\n  t: u32,\n  pos0: u32,\n  // Sampling: the draw in [0, 1) (SplitMix64's, from the host), the\n  // temperature (0: greedy), top-k (0: all) and top-p (1: all).\n  u: f32,\n  temperature: f32,\n  top_k: u32,\n  top_p: f32,\n}\n\n// A step's parameters: their meaning per kernel is written beside it.\nstruct Step {\n  n0: u32,\n  n1: u32,\n  n2: u32,\n  n3: u32,\n  n4: u32,\n  n5: u32,\n  f0: f32,\n  f1: f32,\n}\n\n@group(0) @binding(0) var<uniform> R: Run;\n@group(0) @binding(1) var<uniform> S: Step;\n\n// Threads of a workgroup: EW for the element-wise kernels, RW for a row\n// reduction (rms_norm), AW for attention, SW for sampling.\nconst EW: u32 = 64u;\nconst RW: u32 = 128u;\n\n// ---------------------------------------------------------------- embed\n// One row of h floats per id of ids[0..T): grid (⌈h/EW⌉, M).\n// embed_q8: S.n0 = h; the q8_0 table, i8 bytes [V][h] as words, scales d\n// [V][h/32]: out[r][k] = d[id][k/32]·q[id][k].\n@group(0) @binding(2) var<storage, read> eq8_ids: array<u32>;\n@group(0) @binding(3) var<storage, read> eq8_w: array<u32>;\n@group(0) @binding(4) var<storage, read> eq8_d: array<f32>;\n@group(0) @binding(5) var<storage, read_write> eq8_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn embed_q8(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let k = g.x;\n  let h = S.n0;\n  if (r >= R.t || k >= h) {\n    return;\n  }\n  let id = eq8_ids[r];\n  let at = id * h + k;\n  let q = extractBits(bitcast<i32>(eq8_w[at / 4u]), (at % 4u) * 8u, 8u);\n  eq8_out[r * h + k] = f32(q) * eq8_d[id * (h / 32u) + k / 32u];\n}\n\n// embed_q4: S.n0 = h, S.n1 = 1 for q4_1 (a minimum m per block), 0 for q4_0;\n// words [V][h/8] (k = 8i + s in bits 4s..4s+3 of word i), scales d and\n// minimums m [V][h/32] (q4_0 binds d again as m): out = d·q + m, or\n// d·q + d·(−8) for q4_0 (the Wasm kernel's order).\n@group(0) @binding(2) var<storage, read> eq4_ids: array<u32>;\n@group(0) @binding(3) var<storage, read> eq4_w: array<u32>;\n@group(0) @binding(4) var<storage, read> eq4_d: array<f32>;\n@group(0) @binding(5) var<storage, read> eq4_m: array<f32>;\n@group(0) @binding(6) var<storage, read_write> eq4_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn embed_q4(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let k = g.x;\n  let h = S.n0;\n  if (r >= R.t || k >= h) {\n    return;\n  }\n  let id = eq4_ids[r];\n  let blk = id * (h / 32u) + k / 32u;\n  let sc = eq4_d[blk];\n  var mn = sc * -8.0;\n  if (S.n1 == 1u) {\n    mn = eq4_m[blk];\n  }\n  let q = (eq4_w[id * (h / 8u) + k / 8u] >> ((k % 8u) * 4u)) & 15u;\n  eq4_out[r * h + k] = sc * f32(q) + mn;\n}\n\n// embed_f32: S.n0 = h, S.n1 = V; the table stored transposed, [h][V] (the B\n// of the output head's matmul): out[r][k] = w[k·V + id].\n@group(0) @binding(2) var<storage, read> ef_ids: array<u32>;\n@group(0) @binding(3) var<storage, read> ef_w: array<f32>;\n@group(0) @binding(4) var<storage, read_write> ef_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn embed_f32(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let k = g.x;\n  let h = S.n0;\n  if (r >= R.t || k >= h) {\n    return;\n  }\n  ef_out[r * h + k] = ef_w[k * S.n1 + ef_ids[r]];\n}\n\n// ---------------------------------------------------------------- rms_norm\n// out[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ w, one workgroup a row: grid\n// (1, M). S.n0 = h, S.n1 = 1 for `last` (grid (1, 1): x's row T − 1 into\n// out's row 0), S.f0 = eps. x and out are separate buffers.\n@group(0) @binding(2) var<storage, read> rn_x: array<vec4<f32>>;\n@group(0) @binding(3) var<storage, read> rn_w: array<vec4<f32>>;\n@group(0) @binding(4) var<storage, read_write> rn_out: array<vec4<f32>>;\n\n// The row sums of squares: four floats a thread (a row is a multiple of 4\n// floats), RW threads, so that a 576-float row is two loads a thread.\nvar<workgroup> red: array<f32, RW>;\n\n// Σ red[0..RW) into red[0], every thread's share in red[lid] first.\nfn row_sum(lid: u32) -> f32 {\n  workgroupBarrier();\n  for (var k = RW / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      red[lid] += red[lid + k];\n    }\n    workgroupBarrier();\n  }\n  return red[0];\n}\n\n@compute @workgroup_size(RW)\nfn rms_norm(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  var r = wid.y;\n  var o = wid.y;\n  if (S.n1 == 1u) {\n    r = R.t - 1u;\n    o = 0u;\n  }\n  if (r >= R.t) {\n    return;\n  }\n  let h4 = S.n0 / 4u;\n  var acc = 0.0;\n  for (var i = lid; i < h4; i += RW) {\n    let v = rn_x[r * h4 + i];\n    acc += dot(v, v);\n  }\n  red[lid] = acc;\n  let inv = 1.0 / sqrt(row_sum(lid) / f32(S.n0) + S.f0);\n  for (var i = lid; i < h4; i += RW) {\n    rn_out[o * h4 + i] = rn_x[r * h4 + i] * inv * rn_w[i];\n  }\n}\n\n// add_rms_norm: an `add` (x += y) and the `rms_norm` of the same x that\n// follows it, as one dispatch: grid (1, M), one workgroup a row; every real\n// row is added, and normalised into out's row (S.n1 = 1, the norm's `last`:\n// only row T − 1, into out's row 0). S.n0 = h, S.f0 = eps. The same\n// arithmetic as the two steps.\n@group(0) @binding(2) var<storage, read> arn_y: array<vec4<f32>>;\n@group(0) @binding(3) var<storage, read> arn_w: array<vec4<f32>>;\n@group(0) @binding(4) var<storage, read_write> arn_x: array<vec4<f32>>;\n@group(0) @binding(5) var<storage, read_write> arn_out: array<vec4<f32>>;\n\n@compute @workgroup_size(RW)\nfn add_rms_norm(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let r = wid.y;\n  if (r >= R.t) {\n    return;\n  }\n  let h4 = S.n0 / 4u;\n  var acc = 0.0;\n  for (var i = lid; i < h4; i += RW) {\n    let v = arn_x[r * h4 + i] + arn_y[r * h4 + i];\n    arn_x[r * h4 + i] = v;\n    acc += dot(v, v);\n  }\n  red[lid] = acc;\n  let inv = 1.0 / sqrt(row_sum(lid) / f32(S.n0) + S.f0);\n  if (S.n1 == 1u && r != R.t - 1u) {\n    return;\n  }\n  var o = r;\n  if (S.n1 == 1u) {\n    o = 0u;\n  }\n  for (var i = lid; i < h4; i += RW) {\n    arn_out[o * h4 + i] = arn_x[r * h4 + i] * inv * arn_w[i];\n  }\n}\n\n// ---------------------------------------------------------------- rope\n// Rotary position embedding on adjacent pairs, in place: in each of the\n// first S.n1 heads of S.n2 floats of each row (rows S.n0 floats apart),\n// pair i (x[2i], x[2i+1]) of the row at position pos0 + r turns by the\n// angle whose (cos, sin) are table[(pos0 + r)·hd + 2i, +1] (computed in f64\n// by the host, rounded to f32). One thread a pair: grid (⌈heads·hd/2/EW⌉, M).\n@group(0) @binding(2) var<storage, read> rope_table: array<f32>;\n@group(0) @binding(3) var<storage, read_write> rope_x: array<f32>;\n\n@compute @workgroup_size(EW)\nfn rope(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let hd = S.n2;\n  let half = hd / 2u;\n  if (r >= R.t || g.x >= S.n1 * half) {\n    return;\n  }\n  let head = g.x / half;\n  let i = g.x % half;\n  let at = r * S.n0 + head * hd + 2u * i;\n  let tab = (R.pos0 + r) * hd + 2u * i;\n  let c = rope_table[tab];\n  let s = rope_table[tab + 1u];\n  let a = rope_x[at];\n  let b = rope_x[at + 1u];\n  rope_x[at] = a * c + b * -s;\n  rope_x[at + 1u] = b * c + a * s;\n}\n\n// ---------------------------------------------------------------- kv_store\n// Copies S.n3 floats at column S.n1 (keys) and S.n2 (values) of each row\n// (rows S.n0 floats apart) into the caches' rows pos0 + r, each S.n3\n// floats: grid (⌈width/EW⌉, M).\n@group(0) @binding(2) var<storage, read> kv_x: array<f32>;\n@group(0) @binding(3) var<storage, read_write> kv_k: array<f32>;\n@group(0) @binding(4) var<storage, read_write> kv_v: array<f32>;\n\n@compute @workgroup_size(EW)\nfn kv_store(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let i = g.x;\n  let w = S.n3;\n  if (r >= R.t || i >= w) {\n    return;\n  }\n  let src = r * S.n0;\n  let dst = (R.pos0 + r) * w + i;\n  kv_k[dst] = kv_x[src + S.n1 + i];\n  kv_v[dst] = kv_x[src + S.n2 + i];\n}\n\n// rope_kv: a `rope` and the `kv_store` of the same rows that follows it, as\n// one dispatch, where the keys lie inside the turned heads (whole pairs)\n// and the values outside them: thread p < heads·hd/2 turns pair p (rope's\n// rule) and, if it is a key's, stores it in the key cache too; the next\n// width/2 threads copy a pair of values. Grid (⌈(heads·hd + width)/2/EW⌉,\n// M). S.n0 = stride, S.n1 = heads, S.n2 = hd, S.n3 = width, S.n4 = the\n// keys' column, S.n5 = the values'.\n@group(0) @binding(2) var<storage, read> rkv_table: array<f32>;\n@group(0) @binding(3) var<storage, read_write> rkv_x: array<f32>;\n@group(0) @binding(4) var<storage, read_write> rkv_k: array<f32>;\n@group(0) @binding(5) var<storage, read_write> rkv_v: array<f32>;\n\n@compute @workgroup_size(EW)\nfn rope_kv(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let hd = S.n2;\n  let half = hd / 2u;\n  let pairs = S.n1 * half;\n  let w = S.n3;\n  if (r >= R.t || g.x >= pairs + w / 2u) {\n    return;\n  }\n  let row = r * S.n0;\n  let dst = (R.pos0 + r) * w;\n  if (g.x >= pairs) {\n    let j = 2u * (g.x - pairs);\n    rkv_v[dst + j] = rkv_x[row + S.n5 + j];\n    rkv_v[dst + j + 1u] = rkv_x[row + S.n5 + j + 1u];\n    return;\n  }\n  let head = g.x / half;\n  let i = g.x % half;\n  let col = head * hd + 2u * i;\n  let tab = (R.pos0 + r) * hd + 2u * i;\n  let c = rkv_table[tab];\n  let s = rkv_table[tab + 1u];\n  let a = rkv_x[row + col];\n  let b = rkv_x[row + col + 1u];\n  let a2 = a * c + b * -s;\n  let b2 = b * c + a * s;\n  rkv_x[row + col] = a2;\n  rkv_x[row + col + 1u] = b2;\n  if (col >= S.n4 && col < S.n4 + w) {\n    rkv_k[dst + col - S.n4] = a2;\n    rkv_k[dst + col - S.n4 + 1u] = b2;\n  }\n}\n\n// ---------------------------------------------------------------- attention\n// Causal grouped-query attention. Query head h of row r (at column h·hd of\n// the row, rows S.n0 floats apart) attends to cache positions 0..=pos0+r\n// of key/value head h / G, G = heads / kv_heads (cache rows of kv_heads·hd\n// floats): out[r][h·hd..] = Σ_j softmax_j(scale·q·k_j)·v_j. S.n1 = heads,\n// S.n2 = kv_heads, S.n3 = hd, S.f0 = scale.\n//\n// One workgroup per (key/value head, row): grid (kv_heads, M). The G query\n// heads that share the key/value head are done together, so each key and\n// value row is read once. Positions go by tiles of AW: each thread scores\n// one position against the G queries (held in workgroup memory), the\n// tile's maximum per head comes from a tree, and an online softmax keeps a\n// running maximum, each thread's share of the sum, and per thread the\n// weighted values of its dimensions (thread lid: dimensions lid % 64 + 64i,\n// positions of the tile lid / 64, + AW/64, ...). G ≤ MAXG, hd ≤ 64·DPT and\n// G·hd ≤ MAXQ (decoder-gpu.ts checks).\nconst AW: u32 = 128u;\nconst LANES: u32 = 2u;\nconst MAXG: u32 = 8u;\nconst DPT: u32 = 4u;\nconst MAXQ: u32 = 1024u;\nconst NEG: f32 = -1e30;\n\n@group(0) @binding(2) var<storage, read> at_x: array<f32>;\n@group(0) @binding(3) var<storage, read> at_k: array<f32>;\n@group(0) @binding(4) var<storage, read> at_v: array<f32>;\n@group(0) @binding(5) var<storage, read_write> at_out: array<f32>;\n\nvar<workgroup> at_q: array<f32, MAXQ>;\n// Scores, then weights, of the tile: [G][AW]; and the max/sum tree, [G][AW].\n// At the end both hold the lanes' weighted values ([LANES][G·hd] ≤ 2·MAXQ).\nvar<workgroup> at_s: array<f32, 1024>;\nvar<workgroup> at_t: array<f32, 1024>;\n\n@compute @workgroup_size(AW)\nfn attention(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let r = wid.y;\n  if (r >= R.t) {\n    return;\n  }\n  let kvh = wid.x;\n  let heads = S.n1;\n  let nkv = S.n2;\n  let hd = S.n3;\n  let grp = heads / nkv;\n  let kvw = nkv * hd;\n  let n = R.pos0 + r + 1u;\n  let q0 = r * S.n0 + kvh * grp * hd;\n  for (var i = lid; i < grp * hd; i += AW) {\n    at_q[i] = at_x[q0 + i];\n  }\n  var m: array<f32, MAXG>;\n  var l: array<f32, MAXG>;\n  var acc: array<f32, 32>;\n  for (var g = 0u; g < MAXG; g++) {\n    m[g] = NEG;\n    l[g] = 0.0;\n  }\n  for (var i = 0u; i < 32u; i++) {\n    acc[i] = 0.0;\n  }\n  let lane = lid / 64u;\n  let ds = lid % 64u;\n  workgroupBarrier();\n  for (var t0 = 0u; t0 < n; t0 += AW) {\n    let j = t0 + lid;\n    let valid = j < n;\n    let kr = j * kvw + kvh * hd;\n    for (var g = 0u; g < grp; g++) {\n      var s = NEG;\n      if (valid) {\n        var dot = 0.0;\n        for (var d = 0u; d < hd; d++) {\n          dot += at_q[g * hd + d] * at_k[kr + d];\n        }\n        s = dot * S.f0;\n      }\n      at_s[g * AW + lid] = s;\n      at_t[g * AW + lid] = s;\n    }\n    workgroupBarrier();\n    for (var k = AW / 2u; k > 0u; k >>= 1u) {\n      if (lid < k) {\n        for (var g = 0u; g < grp; g++) {\n          at_t[g * AW + lid] = max(at_t[g * AW + lid], at_t[g * AW + lid + k]);\n        }\n      }\n      workgroupBarrier();\n    }\n    var alpha: array<f32, MAXG>;\n    for (var g = 0u; g < grp; g++) {\n      let mn = max(m[g], at_t[g * AW]);\n      alpha[g] = exp(m[g] - mn);\n      m[g] = mn;\n      var w = 0.0;\n      if (valid) {\n        w = exp(at_s[g * AW + lid] - mn);\n      }\n      l[g] = l[g] * alpha[g] + w;\n      for (var i = 0u; i < DPT; i++) {\n        acc[g * DPT + i] *= alpha[g];\n      }\n    }\n    workgroupBarrier();\n    for (var g = 0u; g < grp; g++) {\n      if (valid) {\n        at_s[g * AW + lid] = exp(at_s[g * AW + lid] - m[g]);\n      } else {\n        at_s[g * AW + lid] = 0.0;\n      }\n    }\n    workgroupBarrier();\n    let end = min(AW, n - t0);\n    for (var jj = lane; jj < end; jj += LANES) {\n      let vr = (t0 + jj) * kvw + kvh * hd;\n      for (var i = 0u; i < DPT; i++) {\n        let d = ds + 64u * i;\n        if (d < hd) {\n          let v = at_v[vr + d];\n          for (var g = 0u; g < grp; g++) {\n            acc[g * DPT + i] += at_s[g * AW + jj] * v;\n          }\n        }\n      }\n    }\n    workgroupBarrier();\n  }\n  // Each head's sum of weights: the threads' shares through the tree.\n  for (var g = 0u; g < grp; g++) {\n    at_t[g * AW + lid] = l[g];\n  }\n  workgroupBarrier();\n  for (var k = AW / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      for (var g = 0u; g < grp; g++) {\n        at_t[g * AW + lid] += at_t[g * AW + lid + k];\n      }\n    }\n    workgroupBarrier();\n  }\n  var inv: array<f32, MAXG>;\n  for (var g = 0u; g < grp; g++) {\n    inv[g] = 1.0 / at_t[g * AW];\n  }\n  workgroupBarrier();\n  // The lanes' weighted values, summed in lane order.\n  for (var g = 0u; g < grp; g++) {\n    for (var i = 0u; i < DPT; i++) {\n      let d = ds + 64u * i;\n      if (d < hd) {\n        if (lane == 0u) {\n          at_s[g * hd + d] = acc[g * DPT + i];\n        } else {\n          at_t[g * hd + d] = acc[g * DPT + i];\n        }\n      }\n    }\n  }\n  workgroupBarrier();\n  let o0 = r * heads * hd + kvh * grp * hd;\n  for (var i = lid; i < grp * hd; i += AW) {\n    at_out[o0 + i] = (at_s[i] + at_t[i]) * inv[i / hd];\n  }\n}\n\n// ---------------------------------------------------------------- split attention\n// The decode step's attention (one row, T = 1), split over the cache\n// (\"flash decoding\"): `attention` above gives each key/value head one\n// workgroup that walks every position, so at 1,024 positions 3 workgroups\n// ran for 0.5 ms a layer on an H200. Here a workgroup takes one chunk of\n// SCH positions of one key/value head: grid (kv_heads, ⌈n/SCH⌉), with n =\n// pos0 + 1 read at run time, so that the parallelism grows with the context\n// and no kernel depends on its length. Each writes, per query head of its\n// group, its unnormalised weighted values (hd floats), the chunk's maximum\n// score and its sum of e^(score − max): rows of hd + 2 floats of `sa_part`\n// at [head][chunk]. `attention_merge` (grid (heads, 1)) rescales the\n// chunks to one maximum and divides by the sum. The same parameters as\n// `attention` (S.n0..n3, f0); the partials' buffer holds heads ·\n// ⌈context/SCH⌉ rows (decoder-gpu.ts sizes it).\n//\n// `attention_rope` is `attention_split` with the step's `rope` and\n// `kv_store` folded in, one dispatch a layer fewer: it turns the queries\n// as it loads them, and the workgroup of the last chunk turns the new key\n// and stores it and the value in the caches before reading them (no other\n// workgroup reads that position); the row is left as the projection wrote\n// it. Its sa_rope is the rope_kv step's parameters (S.n0..n5 of\n// `rope_kv`): the keys' and values' columns are .n4 and .n5, the queries'\n// from 0.\n//\n// A chunk's positions are spread over AT = KP·SCH threads so that no thread\n// waits on a chain of loads: each of a position's KP threads loads its\n// quarter of the key, and each lane of the weighted values its few values,\n// all at once before using any. A load from the cache costs the H200 about\n// 0.8 µs, and a loop that uses each load before issuing the next pays it\n// once an iteration: the first form, a dimension a thread walking its\n// chunk's 64 values, took about 55 µs a dispatch at any context, and the\n// second, a position a thread walking its key's 16 vectors and lanes of 16\n// values, 28 µs.\n//\n// The long form (decoder-gpu.ts's longAttentionSource: this source with\n// SCH = 128, KP = 2, KB = 8, VB = 16 and MAXG = 4) takes chunks of 128\n// positions, so that its NP parts hold one chunk each up to 2,048\n// positions where this form's fold two: for runs past NP·64 positions. The\n// lines below and MAXG's are what it replaces; as_s holds MAXG·SCH ≤ 512\n// floats in both.\nconst SCH: u32 = 64u;\nconst KP: u32 = 4u;\n// Loads a thread issues before using them: KB vectors of a key, VB values.\nconst KB: u32 = 4u;\nconst VB: u32 = 8u;\nconst AT: u32 = 256u;\n// The softmax's groups of scores (eight a head).\nconst SG: u32 = SCH / 8u;\n\n@group(0) @binding(2) var<storage, read> sa_x: array<f32>;\n@group(0) @binding(3) var<storage, read_write> sa_k: array<vec4<f32>>;\n@group(0) @binding(4) var<storage, read_write> sa_v: array<vec4<f32>>;\n@group(0) @binding(5) var<storage, read_write> sa_part: array<f32>;\n@group(0) @binding(6) var<uniform> sa_rope: Step;\n@group(0) @binding(7) var<storage, read> sa_table: array<f32>;\n\n// The group's queries, [G][hd/4]; the chunk's scores, then weights, [G][SCH];\n// as_w in turn the threads' partial dot products [G][AT], the softmax's\n// partial maxima and sums [G][8], and the lanes' weighted values\n// [G][lanes][hd]; each head's maximum and sum. 14 KiB in all, under\n// WebGPU's 16 KiB default.\nvar<workgroup> as_q: array<vec4<f32>, 256>;\nvar<workgroup> as_s: array<f32, 512>;\nvar<workgroup> as_w: array<f32, 2048>;\nvar<workgroup> as_mx: array<f32, MAXG>;\nvar<workgroup> as_l: array<f32, MAXG>;\n// The merge's tree and lanes (a workgroup of SCH threads).\nvar<workgroup> as_t: array<f32, 512>;\nvar<workgroup> as_pv: array<vec4<f32>, 256>;\n\n// Lanes of hd/4 threads that fit `threads` and `cap` floats of sums for G heads.\nfn lanes_of(hd4: u32, grp: u32, threads: u32, cap: u32) -> u32 {\n  return max(1u, min(threads / hd4, cap / (grp * hd4 * 4u)));\n}\n\n// One round of a thread's loads of a key (row kr of the cache, as vec4s):\n// its vectors d0, d0 + KP, ..., KB of them, all issued before any is used\n// (an index past the key is clamped into it and its vector taken as zero).\nfn key_round(kr: u32, d0: u32, hd4: u32) -> array<vec4<f32>, KB> {\n  var k: array<vec4<f32>, KB>;\n  for (var i = 0u; i < KB; i++) {\n    let d = d0 + i * KP;\n    k[i] = select(vec4<f32>(0.0), sa_k[kr + min(d, hd4 - 1u)], d < hd4);\n  }\n  return k;\n}\n\n// One round of a lane's loads of values: dimensions 4c .. 4c + 4 at the\n// chunk's positions jb, jb + lanes, ... (clamped to the chunk's last), VB\n// of them, all issued before any is used.\nfn value_round(kvh: u32, j0: u32, jb: u32, end: u32, hd: u32, kvw: u32, lanes: u32, c: u32) -> array<vec4<f32>, VB> {\n  var v: array<vec4<f32>, VB>;\n  for (var i = 0u; i < VB; i++) {\n    let jj = min(jb + i * lanes, end - 1u);\n    v[i] = sa_v[((j0 + jj) * kvw + kvh * hd) / 4u + c];\n  }\n  return v;\n}\n\n// A thread's first round of loads of a chunk, issued before the queries'\n// barrier (attention_rope_parts, one chunk a part): its KB vectors of its\n// position's key (chunk_weights' d0 = part) and its VB values\n// (chunk_values' jb = lane), so that the keys, the values and the\n// queries come from memory together rather than one after another.\nstruct Pre {\n  k: array<vec4<f32>, KB>,\n  v: array<vec4<f32>, VB>,\n}\n\n// The new position's key and value, turned and stored by the part that\n// holds it (rope_prologue), for its own prefetched loads, which may have\n// read that position before it was written. Heads of up to 64 floats.\nvar<workgroup> as_nk: array<vec4<f32>, 16>;\nvar<workgroup> as_nv: array<vec4<f32>, 16>;\n\nfn prefetch(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32) -> Pre {\n  let hd4 = hd / 4u;\n  var pre: Pre;\n  let jl = lid / KP;\n  let part = lid % KP;\n  if (jl < end) {\n    pre.k = key_round(((j0 + jl) * kvw + kvh * hd) / 4u, part, hd4);\n  }\n  let lanes = lanes_of(hd4, grp, AT, 2048u);\n  let lane = lid / hd4;\n  if (lane < lanes) {\n    pre.v = value_round(kvh, j0, lane, end, hd, kvw, lanes, lid % hd4);\n  }\n  return pre;\n}\n\n// `pre` with the new position p's key and value from as_nk and as_nv\n// (after rope_prologue's barrier), where the thread loaded them.\nfn patched(pre: Pre, lid: u32, j0: u32, end: u32, grp: u32, hd: u32, p: u32) -> Pre {\n  let hd4 = hd / 4u;\n  var out = pre;\n  if (j0 + lid / KP == p) {\n    for (var i = 0u; i < KB; i++) {\n      let d = lid % KP + i * KP;\n      out.k[i] = select(vec4<f32>(0.0), as_nk[min(d, hd4 - 1u)], d < hd4);\n    }\n  }\n  let lanes = lanes_of(hd4, grp, AT, 2048u);\n  let lane = lid / hd4;\n  if (lane < lanes) {\n    for (var i = 0u; i < VB; i++) {\n      if (j0 + min(lane + i * lanes, end - 1u) == p) {\n        out.v[i] = as_nv[lid % hd4];\n      }\n    }\n  }\n  return out;\n}\n\n// A chunk of one key/value head (positions j0 .. j0 + end) against the\n// group's queries in as_q (loaded, after a barrier): the scores, then each\n// head's maximum in as_mx, the weights e^(score − max) in as_s (0 past\n// end) and their sum in as_l, after a barrier. Loops over the group's\n// heads run to MAXG with the head as a guard, so that the per-head sums\n// stay in registers.\nfn chunk_weights(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32) {\n  chunk_weights_from(lid, kvh, j0, end, grp, hd, kvw, false, Pre());\n}\n\n// chunk_weights with the keys' first round of loads (d0 = part) taken from\n// `pre` where `has` (prefetched: see Pre).\nfn chunk_weights_from(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, has: bool, pre: Pre) {\n  let hd4 = hd / 4u;\n  // Scores: KP threads a position; thread `part` takes the key's vectors\n  // part, part + KP, ..., in rounds of KB (key_round).\n  let jl = lid / KP;\n  let part = lid % KP;\n  var dots: array<f32, MAXG>;\n  for (var g = 0u; g < MAXG; g++) {\n    dots[g] = 0.0;\n  }\n  if (jl < end) {\n    let kr = ((j0 + jl) * kvw + kvh * hd) / 4u;\n    for (var d0 = part; d0 < hd4; d0 += KB * KP) {\n      var k: array<vec4<f32>, KB>;\n      if (has && d0 == part) {\n        k = pre.k;\n      } else {\n        k = key_round(kr, d0, hd4);\n      }\n      for (var i = 0u; i < KB; i++) {\n        let d = min(d0 + i * KP, hd4 - 1u);\n        for (var g = 0u; g < MAXG; g++) {\n          if (g < grp) {\n            dots[g] += dot(as_q[g * hd4 + d], k[i]);\n          }\n        }\n      }\n    }\n  }\n  for (var g = 0u; g < MAXG; g++) {\n    if (g < grp) {\n      as_w[g * AT + lid] = dots[g];\n    }\n  }\n  workgroupBarrier();\n  let valid = lid < end;\n  if (lid < SCH) {\n    for (var g = 0u; g < grp; g++) {\n      var sc = NEG;\n      if (valid) {\n        let a = g * AT + lid * KP;\n        var dot = 0.0;\n        for (var i = 0u; i < KP; i++) {\n          dot += as_w[a + i];\n        }\n        sc = dot * S.f0;\n      }\n      as_s[g * SCH + lid] = sc;\n    }\n  }\n  workgroupBarrier();\n  // The softmax: each head's maximum and sum over SCH = 8·SG scores in two\n  // steps, eight groups of SG and then the eight.\n  if (lid < grp * 8u) {\n    let a = (lid / 8u) * SCH + (lid % 8u) * SG;\n    var m = as_s[a];\n    for (var i = 1u; i < SG; i++) {\n      m = max(m, as_s[a + i]);\n    }\n    as_w[lid] = m;\n  }\n  workgroupBarrier();\n  if (lid < grp) {\n    var m = as_w[lid * 8u];\n    for (var i = 1u; i < 8u; i++) {\n      m = max(m, as_w[lid * 8u + i]);\n    }\n    as_mx[lid] = m;\n  }\n  workgroupBarrier();\n  if (lid < SCH) {\n    for (var g = 0u; g < grp; g++) {\n      var w = 0.0;\n      if (valid) {\n        w = exp(as_s[g * SCH + lid] - as_mx[g]);\n      }\n      as_s[g * SCH + lid] = w;\n    }\n  }\n  workgroupBarrier();\n  if (lid < grp * 8u) {\n    let a = (lid / 8u) * SCH + (lid % 8u) * SG;\n    var l = 0.0;\n    for (var i = 0u; i < SG; i++) {\n      l += as_s[a + i];\n    }\n    as_w[lid] = l;\n  }\n  workgroupBarrier();\n  if (lid < grp) {\n    var l = 0.0;\n    for (var i = 0u; i < 8u; i++) {\n      l += as_w[lid * 8u + i];\n    }\n    as_l[lid] = l;\n  }\n  workgroupBarrier();\n}\n\n// The chunk's weighted values of thread (lane, c) of lanes_of(hd/4, G, AT,\n// 2048) lanes: dimensions 4c .. 4c + 4 of each head, over the positions\n// lane, lane + lanes, ... of the chunk, VB values loaded before any is used.\nfn chunk_values(kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, lanes: u32, lane: u32, c: u32) -> array<vec4<f32>, MAXG> {\n  return chunk_values_from(kvh, j0, end, grp, hd, kvw, lanes, lane, c, false, Pre());\n}\n\n// chunk_values with the first round of loads (jb = lane) taken from `pre`\n// where `has`.\nfn chunk_values_from(kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, lanes: u32, lane: u32, c: u32, has: bool, pre: Pre) -> array<vec4<f32>, MAXG> {\n  var acc: array<vec4<f32>, MAXG>;\n  for (var g = 0u; g < MAXG; g++) {\n    acc[g] = vec4<f32>(0.0);\n  }\n  for (var jb = lane; jb < end; jb += VB * lanes) {\n    var v: array<vec4<f32>, VB>;\n    if (has && jb == lane) {\n      v = pre.v;\n    } else {\n      v = value_round(kvh, j0, jb, end, hd, kvw, lanes, c);\n    }\n    for (var i = 0u; i < VB; i++) {\n      let jj = jb + i * lanes;\n      let ji = min(jj, end - 1u);\n      for (var g = 0u; g < MAXG; g++) {\n        if (g < grp) {\n          acc[g] += select(0.0, as_s[g * SCH + ji], jj < end) * v[i];\n        }\n      }\n    }\n  }\n  return acc;\n}\n\n// The lanes' weighted values of head g's dimensions 4c .. 4c + 4, summed in\n// lane order (in as_w, after a barrier).\nfn lanes_sum(g: u32, c: u32, hd4: u32, lanes: u32) -> vec4<f32> {\n  var o = vec4<f32>(0.0);\n  for (var l = 0u; l < lanes; l++) {\n    let a = ((g * lanes + l) * hd4 + c) * 4u;\n    o += vec4<f32>(as_w[a], as_w[a + 1u], as_w[a + 2u], as_w[a + 3u]);\n  }\n  return o;\n}\n\n// Thread (lane, c)'s weighted values into as_w, for lanes_sum.\nfn lanes_store(acc: array<vec4<f32>, MAXG>, grp: u32, hd4: u32, lanes: u32, lane: u32, c: u32) {\n  for (var g = 0u; g < MAXG; g++) {\n    if (g < grp) {\n      let a = ((g * lanes + lane) * hd4 + c) * 4u;\n      as_w[a] = acc[g].x;\n      as_w[a + 1u] = acc[g].y;\n      as_w[a + 2u] = acc[g].z;\n      as_w[a + 3u] = acc[g].w;\n    }\n  }\n}\n\n// One chunk of the split attention: its weights and weighted values, and\n// the partials' rows of the group's heads (with `parts`, as part `chunk` of\n// the +merge layout: attend_parts' for one chunk a part).\nfn attend_chunk(lid: u32, kvh: u32, chunk: u32, grp: u32, hd: u32, kvw: u32, n: u32, parts: bool) {\n  attend_chunk_from(lid, kvh, chunk, grp, hd, kvw, n, parts, false, Pre());\n}\n\n// attend_chunk with the first rounds of its keys' and values' loads from\n// `pre` where `has`.\nfn attend_chunk_from(lid: u32, kvh: u32, chunk: u32, grp: u32, hd: u32, kvw: u32, n: u32, parts: bool, has: bool, pre: Pre) {\n  let hd4 = hd / 4u;\n  let j0 = chunk * SCH;\n  let end = min(SCH, n - j0);\n  chunk_weights_from(lid, kvh, j0, end, grp, hd, kvw, has, pre);\n  let lanes = lanes_of(hd4, grp, AT, 2048u);\n  let c = lid % hd4;\n  let lane = lid / hd4;\n  if (lane < lanes) {\n    lanes_store(chunk_values_from(kvh, j0, end, grp, hd, kvw, lanes, lane, c, has, pre), grp, hd4, lanes, lane, c);\n  }\n  workgroupBarrier();\n  if (parts) {\n    write_part(lid, kvh, chunk, grp, hd, lanes, as_mx, as_l);\n    return;\n  }\n  let chunks = (n + SCH - 1u) / SCH;\n  for (var i = lid; i < grp * hd4; i += AT) {\n    let o = lanes_sum(i / hd4, i % hd4, hd4, lanes);\n    let row = ((kvh * grp + i / hd4) * chunks + chunk) * (hd + 2u) + 4u * (i % hd4);\n    sa_part[row] = o.x;\n    sa_part[row + 1u] = o.y;\n    sa_part[row + 2u] = o.z;\n    sa_part[row + 3u] = o.w;\n  }\n  if (lid < grp) {\n    let row = ((kvh * grp + lid) * chunks + chunk) * (hd + 2u);\n    sa_part[row + hd] = as_mx[lid];\n    sa_part[row + hd + 1u] = as_l[lid];\n  }\n}\n\n// A softmax's running state over parts of its positions: the largest\n// score m so far, the sum l of e^(score − m) and the weighted values o\n// (four dimensions), both rescaled to m.\nstruct Fold {\n  m: f32,\n  l: f32,\n  o: vec4<f32>,\n}\n\nconst FOLD0 = Fold(NEG, 0.0, vec4<f32>(0.0));\n\n// `a` with a part of maximum m, sum l and weighted values o folded in.\nfn fold(a: Fold, m: f32, l: f32, o: vec4<f32>) -> Fold {\n  let mn = max(a.m, m);\n  let down = exp(a.m - mn);\n  let up = exp(m - mn);\n  return Fold(mn, a.l * down + l * up, a.o * down + o * up);\n}\n\n// Chunks j0 = first, first + step, ... (below n) of one key/value head by\n// one workgroup, each folded into a running maximum, sum and weighted\n// values per head (the merge's rule, in registers); then the lanes'\n// weighted values in as_w (for lanes_sum) and each head's maximum and sum\n// in as_mx and as_l, after a barrier. Returns the lanes.\nfn fold_chunks(lid: u32, kvh: u32, first: u32, step: u32, grp: u32, hd: u32, kvw: u32, n: u32) -> u32 {\n  let hd4 = hd / 4u;\n  let lanes = lanes_of(hd4, grp, AT, 2048u);\n  let c = lid % hd4;\n  let lane = lid / hd4;\n  var f: array<Fold, MAXG>;\n  for (var g = 0u; g < MAXG; g++) {\n    f[g] = FOLD0;\n  }\n  for (var j0 = first; j0 < n; j0 += step) {\n    let end = min(SCH, n - j0);\n    chunk_weights(lid, kvh, j0, end, grp, hd, kvw);\n    if (lane < lanes) {\n      let acc = chunk_values(kvh, j0, end, grp, hd, kvw, lanes, lane, c);\n      for (var g = 0u; g < MAXG; g++) {\n        if (g < grp) {\n          f[g] = fold(f[g], as_mx[g], as_l[g], acc[g]);\n        }\n      }\n    }\n    // The next chunk writes over the weights and sums.\n    workgroupBarrier();\n  }\n  if (lane < lanes) {\n    var o: array<vec4<f32>, MAXG>;\n    for (var g = 0u; g < MAXG; g++) {\n      o[g] = f[g].o;\n    }\n    lanes_store(o, grp, hd4, lanes, lane, c);\n  }\n  if (lid == 0u) {\n    for (var g = 0u; g < MAXG; g++) {\n      if (g < grp) {\n        as_mx[g] = f[g].m;\n        as_l[g] = f[g].l;\n      }\n    }\n  }\n  workgroupBarrier();\n  return lanes;\n}\n\n// The whole cache of one key/value head by one workgroup, every chunk\n// folded (fold_chunks): the attention's output rows directly, without\n// partials or a merge. For short contexts, where that costs less than the\n// merge's dispatch (decoder-gpu.ts chooses by the position: up to one\n// chunk by default).\nfn attend_all(lid: u32, kvh: u32, grp: u32, hd: u32, kvw: u32, n: u32) {\n  let hd4 = hd / 4u;\n  let lanes = fold_chunks(lid, kvh, 0u, SCH, grp, hd, kvw, n);\n  for (var i = lid; i < grp * hd4; i += AT) {\n    ao_out[kvh * grp * hd4 + i] = lanes_sum(i / hd4, i % hd4, hd4, lanes) / as_l[i / hd4];\n  }\n}\n\n// The queries of key/value head kvh's group into as_q, as the row holds them.\nfn load_queries(lid: u32, kvh: u32, grp: u32, hd: u32) {\n  let hd4 = hd / 4u;\n  let q0 = kvh * grp * hd;\n  for (var i = lid; i < grp * hd4; i += AT) {\n    let a = q0 + 4u * i;\n    as_q[i] = vec4<f32>(sa_x[a], sa_x[a + 1u], sa_x[a + 2u], sa_x[a + 3u]);\n  }\n}\n\n@compute @workgroup_size(AT)\nfn attention_split(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let kvh = wid.x;\n  let grp = S.n1 / S.n2;\n  let n = R.pos0 + 1u;\n  if (wid.y * SCH >= n) {\n    return;\n  }\n  load_queries(lid, kvh, grp, S.n3);\n  workgroupBarrier();\n  attend_chunk(lid, kvh, wid.y, grp, S.n3, S.n2 * S.n3, n, false);\n}\n\n// `attention_split` over every chunk in one workgroup a key/value head\n// (grid (kv_heads, 1)), its output rows at binding 5 instead of partials.\n@group(0) @binding(5) var<storage, read_write> ao_out: array<vec4<f32>>;\n\n@compute @workgroup_size(AT)\nfn attention_one(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let grp = S.n1 / S.n2;\n  load_queries(lid, wid.x, grp, S.n3);\n  workgroupBarrier();\n  attend_all(lid, wid.x, grp, S.n3, S.n2 * S.n3, R.pos0 + 1u);\n}\n\n// Four floats of the row from column col (a multiple of 4), their two\n// pairs turned by the rotary table at `tab` + col % hd (rope's rule).\nfn turned4(col: u32, tab: u32) -> vec4<f32> {\n  let x = vec4<f32>(sa_x[col], sa_x[col + 1u], sa_x[col + 2u], sa_x[col + 3u]);\n  let c0 = sa_table[tab];\n  let s0 = sa_table[tab + 1u];\n  let c1 = sa_table[tab + 2u];\n  let s1 = sa_table[tab + 3u];\n  return vec4<f32>(x.x * c0 + x.y * -s0, x.y * c0 + x.x * s0, x.z * c1 + x.w * -s1, x.w * c1 + x.z * s1);\n}\n\n// attention_rope's prologue: the group's queries turned into as_q and, by\n// the workgroup of the last chunk (`last`), the new key turned and stored\n// with the value in the caches; then the barriers after which this\n// workgroup reads them.\nfn rope_prologue(lid: u32, kvh: u32, grp: u32, hd: u32, kvw: u32, last: bool) {\n  let hd4 = hd / 4u;\n  let p = R.pos0;\n  let tab = p * hd;\n  for (var i = lid; i < grp * hd4; i += AT) {\n    as_q[i] = turned4(kvh * grp * hd + 4u * i, tab + (4u * i) % hd);\n  }\n  if (last) {\n    let dst = (p * kvw + kvh * hd) / 4u;\n    for (var i = lid; i < hd4; i += AT) {\n      let k = turned4(sa_rope.n4 + kvh * hd + 4u * i, tab + 4u * i);\n      let vc = sa_rope.n5 + kvh * hd + 4u * i;\n      let v = vec4<f32>(sa_x[vc], sa_x[vc + 1u], sa_x[vc + 2u], sa_x[vc + 3u]);\n      sa_k[dst + i] = k;\n      sa_v[dst + i] = v;\n      if (i < 16u) {\n        as_nk[i] = k;\n        as_nv[i] = v;\n      }\n    }\n  }\n  storageBarrier();\n  workgroupBarrier();\n}\n\n@compute @workgroup_size(AT)\nfn attention_rope(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let kvh = wid.x;\n  let grp = S.n1 / S.n2;\n  let kvw = S.n2 * S.n3;\n  let n = R.pos0 + 1u;\n  let j0 = wid.y * SCH;\n  if (j0 >= n) {\n    return;\n  }\n  rope_prologue(lid, kvh, grp, S.n3, kvw, j0 + SCH >= n);\n  attend_chunk(lid, kvh, wid.y, grp, S.n3, kvw, n, false);\n}\n\n// `attention_rope` over every chunk in one workgroup a key/value head, as\n// `attention_one`.\n@compute @workgroup_size(AT)\nfn attention_rope_one(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let grp = S.n1 / S.n2;\n  let kvw = S.n2 * S.n3;\n  rope_prologue(lid, wid.x, grp, S.n3, kvw, true);\n  attend_all(lid, wid.x, grp, S.n3, kvw, R.pos0 + 1u);\n}\n\n// ---------------------------------------------------------------- attention in parts\n// The split attention for a product with `+merge` after it (docs/ops.md):\n// NP parts a head whatever the context, part p folding chunks p, p + NP,\n// ... of the cache in registers (attend_all's rule), then writing its\n// weighted values, largest score and sum in the product's layout: P at\n// (h·NP + p)·hd + d, PM at pm0 + h·NP + p and PL at pl0 + h·NP + p of\n// sa_part (merge_offsets). A part with no positions writes the empty part\n// (PM = NEG, PL = 0, P = 0). Grid (kv_heads, NP); no merge dispatch.\nconst NP: u32 = 16u;\n\n// Where PM and PL start in sa_part (floats; each region on a 256-byte boundary, for its binding).\nfn merge_offsets(heads: u32, hd: u32) -> vec2<u32> {\n  let pm0 = (heads * NP * hd + 63u) / 64u * 64u;\n  return vec2<u32>(pm0, pm0 + (heads * NP + 63u) / 64u * 64u);\n}\n\nfn attend_parts(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, kvw: u32, n: u32) {\n  let lanes = fold_chunks(lid, kvh, p * SCH, NP * SCH, grp, hd, kvw, n);\n  write_part(lid, kvh, p, grp, hd, lanes, as_mx, as_l);\n}\n\n// Part p of the group's heads in the +merge layout: the lanes' weighted\n// values (summed by lanes_sum, after the caller's barrier), and each head's\n// largest score and sum from `mx` and `l`.\nfn write_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, lanes: u32, mx: array<f32, MAXG>, l: array<f32, MAXG>) {\n  let hd4 = hd / 4u;\n  for (var i = lid; i < grp * hd4; i += AT) {\n    let o = lanes_sum(i / hd4, i % hd4, hd4, lanes);\n    let at = ((kvh * grp + i / hd4) * NP + p) * hd + 4u * (i % hd4);\n    sa_part[at] = o.x;\n    sa_part[at + 1u] = o.y;\n    sa_part[at + 2u] = o.z;\n    sa_part[at + 3u] = o.w;\n  }\n  if (lid < grp) {\n    let off = merge_offsets(S.n1, hd);\n    let h = (kvh * grp + lid) * NP + p;\n    sa_part[off.x + h] = mx[lid];\n    sa_part[off.y + h] = l[lid];\n  }\n}\n\n// The group's heads' part p where it holds no positions: PM = NEG, PL = 0, P = 0.\nfn empty_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32) {\n  for (var i = lid; i < grp * hd; i += AT) {\n    sa_part[((kvh * grp + i / hd) * NP + p) * hd + i % hd] = 0.0;\n  }\n  if (lid < grp) {\n    let off = merge_offsets(S.n1, hd);\n    let h = (kvh * grp + lid) * NP + p;\n    sa_part[off.x + h] = NEG;\n    sa_part[off.y + h] = 0.0;\n  }\n}\n\n// Part wid.y of the group's heads: up to NP chunks, part p is chunk p (the\n// split kernel's own work, written in the +merge layout), or empty; past\n// them, attend_parts folds its chunks.\nfn attend_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, kvw: u32, n: u32) {\n  if (n > NP * SCH) {\n    attend_parts(lid, kvh, p, grp, hd, kvw, n);\n  } else if (p * SCH < n) {\n    attend_chunk(lid, kvh, p, grp, hd, kvw, n, true);\n  } else {\n    empty_part(lid, kvh, p, grp, hd);\n  }\n}\n\n@compute @workgroup_size(AT)\nfn attention_parts(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let grp = S.n1 / S.n2;\n  load_queries(lid, wid.x, grp, S.n3);\n  workgroupBarrier();\n  attend_part(lid, wid.x, wid.y, grp, S.n3, S.n2 * S.n3, R.pos0 + 1u);\n}\n\n// `attention_parts` with attention_rope's prologue: the part that holds the\n// new position turns and stores its key and value. Where a part holds one\n// chunk (up to NP·SCH positions) and heads have at most 64 floats, its\n// first loads of keys and values are issued before the prologue\n// (prefetch), and the part that holds the new position takes that\n// position from the prologue's copy in workgroup memory (patched).\n@compute @workgroup_size(AT)\nfn attention_rope_parts(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let grp = S.n1 / S.n2;\n  let kvw = S.n2 * S.n3;\n  let hd = S.n3;\n  let n = R.pos0 + 1u;\n  let p = wid.y;\n  let owner = (R.pos0 / SCH) % NP == p;\n  let j0 = p * SCH;\n  let one = n <= NP * SCH && j0 < n && hd <= 64u;\n  var pre: Pre;\n  if (one) {\n    pre = prefetch(lid, wid.x, j0, min(SCH, n - j0), grp, hd, kvw);\n  }\n  rope_prologue(lid, wid.x, grp, hd, kvw, owner);\n  if (one) {\n    if (owner) {\n      pre = patched(pre, lid, j0, min(SCH, n - j0), grp, hd, R.pos0);\n    }\n    attend_chunk_from(lid, wid.x, p, grp, hd, kvw, n, true, true, pre);\n  } else {\n    attend_part(lid, wid.x, p, grp, hd, kvw, n);\n  }\n}\n\n@group(0) @binding(2) var<storage, read> am_part: array<f32>;\n@group(0) @binding(3) var<storage, read_write> am_out: array<vec4<f32>>;\n\n@compute @workgroup_size(SCH)\nfn attention_merge(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {\n  let h = wid.x;\n  let hd = S.n3;\n  let hd4 = hd / 4u;\n  let n = R.pos0 + 1u;\n  let chunks = (n + SCH - 1u) / SCH;\n  let w = hd + 2u;\n  let base = h * chunks * w;\n  // Lanes of hd/4 threads, four dimensions a thread, lane l taking chunks\n  // l, l + lanes, ...: VB chunks' maxima, sums and values loaded before any\n  // is used, folded into a running maximum m, sum and weighted values\n  // rescaled to it (e^(max_c − m)). Then the lanes, in order, the same way.\n  let lanes = lanes_of(hd4, 1u, SCH, 1024u);\n  let c4 = lid % hd4;\n  let lane = lid / hd4;\n  if (lane < lanes) {\n    var f = FOLD0;\n    for (var cb = lane; cb < chunks; cb += VB * lanes) {\n      var cm: array<f32, VB>;\n      var cl: array<f32, VB>;\n      var cv: array<vec4<f32>, VB>;\n      for (var i = 0u; i < VB; i++) {\n        let row = base + min(cb + i * lanes, chunks - 1u) * w;\n        let a = row + 4u * c4;\n        cm[i] = am_part[row + hd];\n        cl[i] = am_part[row + hd + 1u];\n        cv[i] = vec4<f32>(am_part[a], am_part[a + 1u], am_part[a + 2u], am_part[a + 3u]);\n      }\n      for (var i = 0u; i < VB; i++) {\n        if (cb + i * lanes < chunks) {\n          f = fold(f, cm[i], cl[i], cv[i]);\n        }\n      }\n    }\n    as_pv[lane * hd4 + c4] = f.o;\n    if (c4 == 0u) {\n      as_t[2u * lane] = f.m;\n      as_t[2u * lane + 1u] = f.l;\n    }\n  }\n  workgroupBarrier();\n  if (lid < hd4) {\n    var f = FOLD0;\n    for (var l2 = 0u; l2 < lanes; l2++) {\n      f = fold(f, as_t[2u * l2], as_t[2u * l2 + 1u], as_pv[l2 * hd4 + lid]);\n    }\n    am_out[h * hd4 + lid] = f.o / f.l;\n  }\n}\n\n\n// ---------------------------------------------------------------- swiglu\n// out[r][i] = silu(x[r][i])·x[r][f + i] for i < f = S.n0: rows of 2f floats\n// (gate then up) in, rows of f out; silu(g) = g / (1 + e^−g), e^−g clamped\n// at e^88 as the Wasm kernel's exp. Grid (⌈f/EW⌉, M).\n@group(0) @binding(2) var<storage, read> sw_x: array<f32>;\n@group(0) @binding(3) var<storage, read_write> sw_out: array<f32>;\n\n@compute @workgroup_size(EW)\nfn swiglu(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let i = g.x;\n  let f = S.n0;\n  if (r >= R.t || i >= f) {\n    return;\n  }\n  let gate = sw_x[r * 2u * f + i];\n  sw_out[r * f + i] = gate / (1.0 + exp(min(-gate, 88.0))) * sw_x[r * 2u * f + f + i];\n}\n\n// ---------------------------------------------------------------- add\n// x[r][i] += y[r][i] for i < S.n0: grid (⌈cols/EW⌉, M).\n@group(0) @binding(2) var<storage, read> add_y: array<f32>;\n@group(0) @binding(3) var<storage, read_write> add_x: array<f32>;\n\n@compute @workgroup_size(EW)\nfn add(@builtin(global_invocation_id) g: vec3<u32>) {\n  let r = g.y;\n  let i = g.x;\n  if (r >= R.t || i >= S.n0) {\n    return;\n  }\n  let at = r * S.n0 + i;\n  add_x[at] = add_x[at] + add_y[at];\n}\n\n// ---------------------------------------------------------------- sample\n// The next token from the logits (S.n0 = V of them), by sampler.ts's rule,\n// in one workgroup: grid (1, 1). out[0] is the token, or NO_TOKEN where the\n// host must sample from the logits itself with the same draw (out[1] = 1).\n//\n// - temperature ≤ 0: greedy, the first largest logit (NaN never wins).\n// - otherwise the candidates: the ids whose weight e^((l − top)/T) is at\n//   least e^−CUT, or, when more than MAXC are, the ids at or above a\n//   threshold found by bisection that keeps from max(k, MAXC/2) to MAXC of\n//   them; sorted by logit, largest first, ties by id (a bitonic sort in\n//   workgroup memory); cut to the top k; weights in f32; cut to the\n//   smallest head whose share reaches top-p; then the host's draw u times\n//   the kept total walks the kept ids. The ids below the threshold (the\n//   tail) count in the totals where the rule counts them (no top-k, or one\n//   past the candidates), by their summed weight.\n// The host samples instead when the rule's choice lies in a tail that the\n// bisection cut off: the top-k reaching past the candidates, the top-p cut\n// or the draw falling in it (with no bisection the tail's ids weigh less\n// than e^−CUT each, and a draw falls among them with odds below V·e^−CUT).\n// The GPU's pick differs from sampler.ts's (weights in f64) only where the\n// draw falls within f32 rounding of a boundary between two ids' shares.\nconst SW: u32 = 256u;\nconst MAXC: u32 = 1024u;\nconst CUT: f32 = 30.0;\nconst NO_TOKEN: u32 = 0xffffffffu;\n// Logits a thread of the argmax loads before it compares any.\nconst SU: u32 = 8u;\n\n@group(0) @binding(2) var<storage, read> sm_logits: array<f32>;\n@group(0) @binding(3) var<storage, read_write> sm_out: array<u32>;\n\nvar<workgroup> sm_v: array<f32, MAXC>;\nvar<workgroup> sm_i: array<u32, MAXC>;\nvar<workgroup> sm_rv: array<f32, SW>;\nvar<workgroup> sm_ri: array<u32, SW>;\nvar<workgroup> sm_count: atomic<u32>;\nvar<workgroup> sm_n: u32;\n\n// How many logits are at least thr (every thread gets the count).\nfn count_at_least(lid: u32, thr: f32) -> u32 {\n  var c = 0u;\n  for (var i = lid; i < S.n0; i += SW) {\n    if (sm_logits[i] >= thr) {\n      c++;\n    }\n  }\n  sm_ri[lid] = c;\n  workgroupBarrier();\n  for (var k = SW / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      sm_ri[lid] += sm_ri[lid + k];\n    }\n    workgroupBarrier();\n  }\n  return workgroupUniformLoad(&sm_ri[0]);\n}\n\n// Whether candidate a comes before b: larger logit, then smaller id.\nfn before(va: f32, ia: u32, vb: f32, ib: u32) -> bool {\n  return va > vb || (va == vb && ia < ib);\n}\n\nfn no_token(lid: u32) {\n  if (lid == 0u) {\n    sm_out[0] = NO_TOKEN;\n    sm_out[1] = 1u;\n  }\n}\n\n@compute @workgroup_size(SW)\nfn sample(@builtin(local_invocation_index) lid: u32) {\n  let V = S.n0;\n  // The first largest logit: SU logits a thread loaded before any is\n  // compared (a loop that used each load before issuing the next waited\n  // for it every iteration: 52 us a token over 49,152 logits on an H200).\n  var bv = sm_logits[0];\n  var bi = 0u;\n  for (var i0 = lid; i0 < V; i0 += SW * SU) {\n    var vs: array<f32, SU>;\n    for (var u = 0u; u < SU; u++) {\n      vs[u] = sm_logits[min(i0 + u * SW, V - 1u)];\n    }\n    for (var u = 0u; u < SU; u++) {\n      let i = i0 + u * SW;\n      let v = vs[u];\n      if (i < V && (v > bv || (v == bv && i < bi))) {\n        bv = v;\n        bi = i;\n      }\n    }\n  }\n  sm_rv[lid] = bv;\n  sm_ri[lid] = bi;\n  workgroupBarrier();\n  for (var k = SW / 2u; k > 0u; k >>= 1u) {\n    if (lid < k) {\n      let v = sm_rv[lid + k];\n      let i = sm_ri[lid + k];\n      if (before(v, i, sm_rv[lid], sm_ri[lid])) {\n        sm_rv[lid] = v;\n        sm_ri[lid] = i;\n      }\n    }\n    workgroupBarrier();\n  }\n  let best = sm_ri[0];\n  // Uniform: the bisection's branches depend on it.\n  let top = workgroupUniformLoad(&sm_rv[0]);\n  if (!(R.temperature > 0.0)) {\n    if (lid == 0u) {\n      sm_out[0] = best;\n      sm_out[1] = 0u;\n    }\n    return;\n  }\n  let temp = R.temperature;\n  let k = R.top_k;\n  // The candidates' threshold.\n  var thr = top - CUT * temp;\n  var cnt = count_at_least(lid, thr);\n  let bisected = cnt > MAXC;\n  if (bisected) {\n    // count(lo) > MAXC; narrow [lo, hi] until count(hi) is enough, at most MAXC.\n    let enough = max(min(k, MAXC), MAXC / 2u);\n    var lo = thr;\n    var hi = top;\n    cnt = count_at_least(lid, hi);\n    for (var it = 0u; it < 48u && cnt < enough; it++) {\n      let mid = lo + (hi - lo) * 0.5;\n      if (mid <= lo || mid >= hi) {\n        break;\n      }\n      let c = count_at_least(lid, mid);\n      if (c > MAXC) {\n        lo = mid;\n      } else {\n        hi = mid;\n        cnt = c;\n      }\n    }\n    thr = hi;\n    if (cnt > MAXC) {\n      // More than MAXC ids tie at the largest logit.\n      no_token(lid);\n      return;\n    }\n  }\n  // Gather the candidates (in any order: the sort orders them) and sum the tail's weights.\n  if (lid == 0u) {\n    atomicStore(&sm_count, 0u);\n  }\n  workgroupBarrier();\n  var tail = 0.0;\n  for (var i = lid; i < V; i += SW) {\n    let v = sm_logits[i];\n    if (v >= thr) {\n      let at = atomicAdd(&sm_count, 1u);\n      if (at < MAXC) {\n        sm_v[at] = v;\n        sm_i[at] = i;\n      }\n    } else {\n      tail += exp((v - top) / temp);\n    }\n  }\n  sm_rv[lid] = tail;\n  workgroupBarrier();\n  for (var s = SW / 2u; s > 0u; s >>= 1u) {\n    if (lid < s) {\n      sm_rv[lid] += sm_rv[lid + s];\n    }\n    workgroupBarrier();\n  }\n  if (lid == 0u) {\n    sm_n = min(atomicLoad(&sm_count), MAXC);\n  }\n  let n = workgroupUniformLoad(&sm_n);\n  tail = sm_rv[0];\n  // Padding after the candidates, last in the order; then a bitonic sort.\n  var p = 2u;\n  while (p < n) {\n    p <<= 1u;\n  }\n  for (var i = n + lid; i < p; i += SW) {\n    sm_v[i] = NEG;\n    sm_i[i] = NO_TOKEN;\n  }\n  workgroupBarrier();\n  for (var size = 2u; size <= p; size <<= 1u) {\n    for (var stride = size / 2u; stride > 0u; stride >>= 1u) {\n      for (var i = lid; i < p; i += SW) {\n        let j = i ^ stride;\n        if (j > i) {\n          let up = (i & size) == 0u;\n          let swap = select(before(sm_v[i], sm_i[i], sm_v[j], sm_i[j]), before(sm_v[j], sm_i[j], sm_v[i], sm_i[i]), up);\n          if (swap) {\n            let tv = sm_v[i];\n            let ti = sm_i[i];\n            sm_v[i] = sm_v[j];\n            sm_i[i] = sm_i[j];\n            sm_v[j] = tv;\n            sm_i[j] = ti;\n          }\n        }\n      }\n      workgroupBarrier();\n    }\n  }\n  if (lid != 0u) {\n    return;\n  }\n  // The rule's ids: the top k (all: k 0), of which the candidates hold `len`.\n  var len = n;\n  var withTail = true;\n  if (k > 0u && k <= n) {\n    len = k;\n    withTail = false;\n  } else if (k > 0u && bisected) {\n    no_token(lid);\n    return;\n  }\n  var total = 0.0;\n  for (var j = 0u; j < len; j++) {\n    total += exp((sm_v[j] - top) / temp);\n  }\n  if (withTail) {\n    total += tail;\n  }\n  var keep = len;\n  if (R.top_p < 1.0) {\n    var acc = 0.0;\n    var found = false;\n    for (var j = 0u; j < len; j++) {\n      acc += exp((sm_v[j] - top) / temp) / total;\n      if (acc >= R.top_p) {\n        keep = j + 1u;\n        found = true;\n        break;\n      }\n    }\n    if (found) {\n      withTail = false;\n    } else if (withTail && bisected) {\n      no_token(lid);\n      return;\n    }\n  }\n  var kept = 0.0;\n  for (var j = 0u; j < keep; j++) {\n    kept += exp((sm_v[j] - top) / temp);\n  }\n  if (withTail) {\n    kept += tail;\n  }\n  var u = R.u * kept;\n  for (var j = 0u; j < keep; j++) {\n    let w = exp((sm_v[j] - top) / temp);\n    if (u < w) {\n      sm_out[0] = sm_i[j];\n      sm_out[1] = 0u;\n      return;\n    }\n    u -= w;\n  }\n  if (withTail) {\n    // The draw falls in the tail.\n    no_token(lid);\n    return;\n  }\n  sm_out[0] = sm_i[keep - 1u];\n  sm_out[1] = 0u;\n}\n");
        const lm = device.createShaderModule({ label: "decoder-kernels.wgsl (long attention)", code });
        for (const entryPoint of ["attention_parts", "attention_rope_parts"]) {
          long[entryPoint] = await device.createComputePipelineAsync({ label: `decoder ${entryPoint} long`, layout: "auto", compute: { module: lm, entryPoint } }).catch(async (e) => {
            throw new Error(await compileErrors(lm, "decoder-kernels.wgsl (long attention)", e));
          });
        }
      }
      const att = graph.steps.filter((x) => x.step === "attention");
      const partials = buffer("attention partials", Math.max(0, ...att.map((a) => Math.max(a.heads * Math.ceil(context / SCH) * (a.head_dim + 2) * 4, mergeBytes(a.heads, a.head_dim)))), S);
      return new _GpuDecoder(
        init,
        pipelines,
        long,
        owned,
        parts,
        buffers,
        caches,
        ropeBuf,
        stepParams,
        slots,
        fused,
        runParams,
        ids,
        token,
        tokenReads,
        logitsRead,
        partials,
        runRing,
        { at: fusedAt, twins, eps }
      );
    });
  }
  /** Why the GPU device was lost; null while it is not. */
  get lostReason() {
    return this.lost;
  }
  /** Where the tuned products come from (before the first run). */
  setKernels(source) {
    this.kernelsOf = source;
  }
  /** Positions in the caches so far. */
  get position() {
    return this.pos;
  }
  /** Forgets the caches' contents: the next run starts at position 0. */
  reset() {
    this.pos = 0;
  }
  /** Bytes of GPU memory the model holds (weights, activations, caches). */
  get memoryBytes() {
    return this.owned.reduce((a, b) => a + b.size, 0);
  }
  /** Makes bucket `m`'s kernels (every product a run in it calls) and bind groups, once. */
  kernels(m) {
    let p = this.buckets.get(m);
    if (!p) {
      p = this.makeBucket(m);
      this.buckets.set(m, p);
      p.then((b) => this.ready.set(m, b), () => this.buckets.delete(m));
    }
    return p;
  }
  /** Checks a run of `tokens` would fit: ids in the vocabulary and positions in the context. Throws one line. */
  check(tokens) {
    if (this.closed) throw new Error("this decoder is closed");
    if (this.lost !== null) throw new Error(`the GPU device was lost (${this.lost}): load the model again (or with target 'wasm')`);
    if (!tokens.length) throw new RangeError("no tokens to feed");
    if (this.pos + tokens.length > this.context)
      throw new RangeError(`${this.pos} positions used and ${tokens.length} more tokens: past the context of ${this.context}`);
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= this.graph.vocab) throw new RangeError(`token id ${t} is outside the vocabulary of ${this.graph.vocab}`);
    }
  }
  /** Feeds `tokens` and returns a copy of the logits after the last one. */
  async feed(tokens) {
    await this.runAll(tokens, null);
    return this.logits();
  }
  /** Feeds `tokens` without reading anything back (a prompt's chunks before its last); resolves when submitted. */
  async prefill(tokens) {
    await this.runAll(tokens, null);
  }
  /**
   * Feeds `tokens` and samples the next token on the GPU (the one read-back:
   * its id); -1 when the GPU could not (more ids carry weight than its
   * sampler holds, with no top-k to bound them): then `logits()` has what
   * the host samples from, with the same draw.
   */
  async next(tokens, sampling) {
    const slot = await this.runAll(tokens, sampling);
    return this.sampled(await this.readToken(slot));
  }
  /**
   * A decode step fed the token the latest run sampled on the GPU, without
   * the host reading it first, so that a caller can record and submit the
   * next steps while this one runs (up to MAX_AHEAD unread): resolves with
   * its own sampled token (as `next`; -1 where the GPU could not sample).
   * The caller must know that the latest run's token was sampled on the GPU
   * (not -1), and `rewind`s the steps it does not use.
   */
  async ahead(sampling) {
    const bk = this.ready.get(1) ?? await this.kernels(1);
    this.check([0]);
    const slot = this.run(null, bk, sampling);
    return this.sampled(await this.readToken(slot));
  }
  /** Decode steps a caller may hold submitted and unread: MAX_AHEAD, or two submits' worth with stepsPerSubmit. */
  get aheadLimit() {
    return aheadDepth(this.stepsPerSubmit);
  }
  /** Whether `aheadMany` can record now (the decode step's kernels are made). */
  get canBatch() {
    return this.ready.has(1) && !this.closed;
  }
  /**
   * `samplings.length` decode steps as `ahead` runs them, each fed the token
   * the step before sampled on the GPU, recorded into one command buffer
   * and submitted once (at most stepsPerSubmit; needs `canBatch`): each
   * step's parameters are copied from a ring into the run's before it.
   * Resolves each step's sampled token (as `ahead`; -1 where the GPU could
   * not sample), in order.
   */
  aheadMany(samplings) {
    const bk = this.ready.get(1);
    if (!bk) throw new Error("aheadMany: the decode step's kernels are not made yet (run a step first)");
    if (samplings.length < 1 || samplings.length > this.stepsPerSubmit) throw new RangeError(`aheadMany: 1 to ${this.stepsPerSubmit} steps, got ${samplings.length}`);
    this.check([0]);
    if (this.pos + samplings.length > this.context) throw new RangeError(`aheadMany: ${samplings.length} steps from position ${this.pos} pass the context of ${this.context}`);
    const enc = this.device.createCommandEncoder({ label: `decoder ${samplings.length} steps` });
    const slots = [];
    let dispatches = 0;
    for (const [j, sampling] of samplings.entries()) {
      this.device.queue.writeBuffer(this.runRing, j * ALIGN2, this.runParamsOf(1, sampling));
      enc.copyBufferToBuffer(this.runRing, j * ALIGN2, this.runParams, 0, 32);
      dispatches = this.encode(bk, 1, true, true, void 0, enc).dispatches;
      slots.push(this.tokenToRead(enc));
      this.pos += 1;
    }
    this.device.queue.submit([enc.finish()]);
    this.stats.submits++;
    this.stats.tokens += samplings.length;
    this.stats.dispatchesPerToken = dispatches;
    return slots.map((slot) => this.readToken(slot).then((id) => this.sampled(id)));
  }
  /** Forgets the last `n` positions (steps run ahead that the caller does not use): the next run writes over them. */
  rewind(n) {
    if (!Number.isInteger(n) || n < 0 || n > this.pos) throw new RangeError(`rewind ${n}: ${this.pos} positions are held`);
    this.pos -= n;
  }
  sampled(id) {
    if (id === NO_TOKEN) {
      this.stats.hostSampled++;
      return -1;
    }
    if (!(id < this.graph.vocab)) throw new Error(`the GPU sampler returned token ${id}, outside the vocabulary of ${this.graph.vocab}`);
    return id;
  }
  /** A copy of the latest run's logits, read back from the GPU. */
  async logits() {
    const bytes = this.graph.vocab * 4;
    const enc = this.device.createCommandEncoder({ label: "decoder logits" });
    enc.copyBufferToBuffer(this.buffers.get(this.graph.logits), 0, this.logitsRead, 0, bytes);
    this.device.queue.submit([enc.finish()]);
    await this.mapped(this.logitsRead, bytes);
    const out = new Float32Array(this.logitsRead.getMappedRange(0, bytes).slice(0));
    this.logitsRead.unmap();
    return out;
  }
  /** Frees every buffer; the device stays the app's. */
  destroy() {
    this.closed = true;
    for (const b of this.owned) b.destroy();
    this.buckets.clear();
    this.ready.clear();
  }
  /** The token a run sampled into read buffer `slot`; reads of the ring in the order of their runs. */
  readToken(slot) {
    const buf = this.tokenReads[slot];
    const read = this.reading.then(async () => {
      await this.mapped(buf, 8);
      const id = new Uint32Array(buf.getMappedRange(0, 8))[0];
      buf.unmap();
      return id;
    });
    this.reading = read.then(() => void 0, () => void 0);
    return read;
  }
  async mapped(buf, bytes) {
    try {
      await buf.mapAsync(GPUMapMode.READ, 0, bytes);
    } catch (e) {
      throw new Error(this.lost !== null ? `the GPU device was lost (${this.lost}): load the model again (or with target 'wasm')` : `reading back from the GPU: ${e.message}`);
    }
  }
  /** Runs `tokens` in chunks of the largest bucket (one submit each); samples after the last where `sampling`. */
  async runAll(tokens, sampling) {
    this.check(tokens);
    const max = this.maxRows;
    let slot = -1;
    for (let at = 0; at < tokens.length; at += max) {
      const chunk = Array.prototype.slice.call(tokens, at, at + max);
      const m = bucketOf(this.graph, chunk.length);
      const bk = this.ready.get(m) ?? await this.kernels(m);
      const last = at + max >= tokens.length;
      slot = this.run(chunk, bk, last ? sampling : null);
    }
    return slot;
  }
  /**
   * One run: parameters and ids written, every step recorded into one pass
   * (with `timing`: timestamps at the pass's start and end, or with
   * `perStep` a pass per step), one submit.
   */
  run(tokens, bk, sampling, timing) {
    const t = tokens ? tokens.length : 1, device = this.device;
    device.queue.writeBuffer(this.runParams, 0, this.runParamsOf(t, sampling));
    if (tokens) device.queue.writeBuffer(this.ids, 0, Uint32Array.from(tokens));
    const { enc, dispatches, queries } = this.encode(bk, t, tokens === null, sampling !== null, timing);
    const slot = sampling ? this.tokenToRead(enc) : this.readSlot;
    if (timing) {
      enc.resolveQuerySet(timing.set, 0, queries, timing.resolve, 0);
      enc.copyBufferToBuffer(timing.resolve, 0, timing.read, 0, queries * 8);
    }
    device.queue.submit([enc.finish()]);
    this.pos += t;
    this.stats.submits++;
    this.stats.tokens += t;
    if (bk.m === 1 && timing?.omit === void 0) this.stats.dispatchesPerToken = dispatches + (sampling ? 0 : 1);
    return slot;
  }
  /** Records the sampled token's copy into the read-back ring's next buffer; that buffer's slot (for readToken). */
  tokenToRead(enc) {
    const slot = this.readSlot;
    enc.copyBufferToBuffer(this.token, 0, this.tokenReads[slot], 0, 8);
    this.readSlot = (slot + 1) % this.tokenReads.length;
    return slot;
  }
  /** The run parameters (decoder-kernels.wgsl's Run) of `t` tokens from the current position, with `sampling`'s. */
  runParamsOf(t, sampling) {
    const u = new Uint32Array(this.runHost), f = new Float32Array(this.runHost);
    u[0] = t;
    u[1] = this.pos;
    f[2] = sampling?.u ?? 0;
    f[3] = sampling ? Math.fround(sampling.temperature) : 0;
    u[4] = sampling?.topK ?? 0;
    f[5] = sampling?.topP ?? 1;
    return this.runHost;
  }
  /**
   * Records a run of `t` tokens of bucket `bk` from the current position into
   * `enc` (default a new command encoder): (`ahead`) the token the previous run sampled
   * copied into the ids, then every step's dispatch in one pass (with
   * `timing`, timestamps at its start and end, or with `perStep` a pass per
   * step), and the sampling where `sample`.
   */
  encode(bk, t, ahead, sample, timing, enc = this.device.createCommandEncoder({ label: `decoder run ${bk.m}` })) {
    if (ahead) enc.copyBufferToBuffer(this.token, 0, this.ids, 0, 4);
    const steps = sample ? [...bk.steps, this.sampleStep()] : bk.steps;
    let queries = 0;
    const begin = () => timing ? enc.beginComputePass({ timestampWrites: { querySet: timing.set, beginningOfPassWriteIndex: queries++, endOfPassWriteIndex: queries++ } }) : enc.beginComputePass();
    let dispatches = 0;
    let pass = begin();
    for (const [i, st] of steps.entries()) {
      if (timing?.perStep && i > 0) {
        pass.end();
        pass = begin();
      }
      if ("kernel" in st) {
        if (timing?.omit === st.label) continue;
        st.kernel.dispatch(pass, st.perT ? st.perT(t) : st.group);
        dispatches += st.kernel.passes;
      } else {
        const form = formAt(st, this.pos + t);
        if (!form || timing?.omit === form.label) continue;
        dispatches++;
        pass.setPipeline(form.pipeline);
        pass.setBindGroup(0, form.group);
        const grid2 = form === st && st.gridAt ? st.gridAt(this.pos) : form.grid;
        pass.dispatchWorkgroups(grid2[0], grid2[1]);
      }
    }
    pass.end();
    return { enc, dispatches, queries };
  }
  /**
   * The host's share of a decode step, for benchmarks: one step's command
   * buffer (every dispatch and the sampling, as `next` records it) built
   * and finished `reps` times and never submitted, so nothing runs and
   * nothing changes; ms each.
   */
  async recordTimes(reps) {
    const bk = this.ready.get(1) ?? await this.kernels(1);
    this.check([0]);
    const out = [];
    for (let r = 0; r < reps; r++) {
      const t0 = performance.now();
      this.encode(bk, 1, false, true).enc.finish();
      out.push(performance.now() - t0);
    }
    return out;
  }
  /**
   * Profiles one run of `tokens` (at most the largest bucket) from the
   * current position, greedy: first as `next` runs it, timed on the host
   * (recording, and until the token is read back) and on the GPU (the
   * pass's timestamps); then the same tokens at the same position again
   * with each dispatch in a pass of its own, for each one's GPU time. The
   * caches end as after one run of `tokens`. Needs the device's
   * `timestamp-query` feature; for benchmarks (passes of one dispatch each
   * cost the GPU more than one pass, so the steps' times add up to more
   * than `gpuMs`). With `perStep: false` only the first run (`steps`
   * then holds the labels, each at 0 ms). With `omit`, that first run
   * leaves out every dispatch of that label (what they cost in the pass is
   * the difference from a run without `omit`; the run's results, the
   * caches' new rows included, are then wrong: reset before using them).
   */
  async profile(tokens, opts = {}) {
    if (!this.device.features.has("timestamp-query")) throw new Error("GpuDecoder.profile needs the device's 'timestamp-query' feature");
    this.check(tokens);
    if (tokens.length > this.maxRows) throw new RangeError(`profile runs one bucket: at most ${this.maxRows} tokens, got ${tokens.length}`);
    const bk = await this.kernels(bucketOf(this.graph, tokens.length));
    const greedy = { temperature: 0, topK: 0, topP: 1, u: 0 };
    const n = 2 * (bk.steps.length + 1);
    const set = this.device.createQuerySet({ type: "timestamp", count: n });
    const resolve = this.device.createBuffer({ size: n * 8, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    const read = this.device.createBuffer({ size: n * 8, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const times = async (count) => {
      await this.mapped(read, count * 8);
      const ns = new BigUint64Array(read.getMappedRange(0, count * 8).slice(0));
      read.unmap();
      return Array.from({ length: count / 2 }, (_, i) => Number(ns[2 * i + 1] - ns[2 * i]) / 1e6);
    };
    try {
      const pos0 = this.pos;
      const t0 = performance.now();
      const slot = this.run(tokens, bk, greedy, { set, resolve, read, perStep: false, omit: opts.omit });
      const encodeMs = performance.now() - t0;
      await this.readToken(slot);
      const wallMs = performance.now() - t0;
      const [gpuMs] = await times(2);
      const end = pos0 + tokens.length;
      const labels = [...bk.steps.map((s) => "kernel" in s ? s.label : formAt(s, end)?.label ?? `${s.label} (skipped)`), "sample"];
      if (opts.perStep === false || opts.omit !== void 0) return { encodeMs, wallMs, gpuMs, steps: labels.map((label) => ({ label, ms: 0 })) };
      this.pos = pos0;
      await this.readToken(this.run(tokens, bk, greedy, { set, resolve, read, perStep: true }));
      const each = await times(n);
      return { encodeMs, wallMs, gpuMs, steps: labels.map((label, i) => ({ label, ms: each[i] })) };
    } finally {
      set.destroy();
      resolve.destroy();
      read.destroy();
    }
  }
  sampleBind = null;
  /** The sampling's dispatch: one workgroup over the logits. */
  sampleStep() {
    this.sampleBind ??= {
      label: "sample",
      pipeline: this.pipelines.sample,
      grid: [1, 1],
      group: this.fixedGroup("sample", -1, [{ buffer: this.buffers.get(this.graph.logits), size: this.graph.vocab * 4 }, { buffer: this.token }])
    };
    return this.sampleBind;
  }
  fixedGroup(name, step, ranges, pipeline = this.pipelines[name]) {
    const slot = this.stepSlot.get(step);
    const entries = [
      { binding: 0, resource: { buffer: this.runParams } },
      { binding: 1, resource: { buffer: this.stepParams, offset: slot * ALIGN2, size: 32 } },
      ...ranges.map((r, i) => ({ binding: i + 2, resource: { buffer: r.buffer, offset: r.offset ?? 0, size: r.size } }))
    ];
    return this.device.createBindGroup({ label: `decoder ${name} ${step}`, layout: pipeline.getBindGroupLayout(0), entries });
  }
  /** The `+merge` form of fused run `f` where this backend runs one (mergedRun, with GpuDecoderInit.mergeAttention), else null. */
  mergeOf(f) {
    return this.mergeAttention ? mergedRun(this.graph, f) : null;
  }
  async makeBucket(m) {
    const source = this.kernelsOf;
    if (!source) throw new Error("GpuDecoder: no kernel source (setKernels) before the first run");
    const list = productsOf(this.graph, m, this.runs.at.size > 0, this.mergeAttention);
    const kernels = await Promise.all(list.map((x) => {
      const key = `${x.op}/${x.shape.join(",")}`;
      let k = this.made.get(key);
      if (!k) {
        k = source(x.op, x.shape);
        this.made.set(key, k);
        k.catch(() => this.made.delete(key));
      }
      return k;
    }));
    const byKey = new Map(list.map((x, i) => [`${x.op}/${x.shape.join(",")}`, kernels[i]]));
    const g = this.graph, device = this.device;
    return scoped3(device, `the language model's bucket of ${m} rows on WebGPU`, () => {
      const steps = [];
      const holds = /* @__PURE__ */ new Map();
      const now = (name) => holds.get(name) ?? this.buffers.get(name);
      const buf = (name, rows, cols) => ({ buffer: now(name), size: rows * cols * 4 });
      const rowsOf = new Map(g.buffers.map((b) => [b.name, b.rows]));
      const whole = (name) => ({ buffer: now(name) });
      const cache = (name) => ({ buffer: this.caches.get(name) });
      const part = (tensor, p) => this.parts.get(tensor)[p];
      const fixed = (name, i, grid2, ...ranges) => {
        steps.push({ label: name, pipeline: this.pipelines[name], grid: grid2, group: this.fixedGroup(name, i, ranges) });
      };
      const split = (name, at, a, ...ranges) => {
        const after = runs.get(at + 1);
        if (after && this.mergeOf(after.f)) {
          const parts = name === "attention_split" ? "attention_parts" : "attention_rope_parts";
          const lp = this.longPipelines[parts];
          steps.push({
            label: parts,
            pipeline: this.pipelines[parts],
            grid: [a.kv_heads, MERGE_PARTS],
            group: this.fixedGroup(parts, at, ranges),
            long: lp ? { from: this.longFrom, label: `${parts}_long`, pipeline: lp, grid: [a.kv_heads, MERGE_PARTS], group: this.fixedGroup(parts, at, ranges, lp) } : void 0
          });
          return;
        }
        const one = name === "attention_split" ? "attention_one" : "attention_rope_one";
        const upTo = this.shortUpTo;
        steps.push({
          label: name,
          pipeline: this.pipelines[name],
          grid: [a.kv_heads, 1],
          group: this.fixedGroup(name, at, ranges),
          gridAt: (pos0) => [a.kv_heads, Math.ceil((pos0 + 1) / SCH)],
          short: upTo > 0 ? { upTo, label: one, pipeline: this.pipelines[one], grid: [a.kv_heads, 1], group: this.fixedGroup(one, at, ranges.map((r, k) => k === 3 ? whole(a.out) : r)) } : void 0
        });
        steps.push({
          label: "attention_merge",
          pipeline: this.pipelines.attention_merge,
          grid: [a.heads, 1],
          group: this.fixedGroup("attention_merge", at, [{ buffer: this.partials }, whole(a.out)]),
          skipUpTo: upTo > 0 ? upTo : void 0
        });
      };
      const ew = (n) => Math.max(1, Math.ceil(n / EW2));
      const productGroup = (kernel, label, ranges) => device.createBindGroup({
        label,
        layout: kernel.bindGroupLayout,
        entries: ranges.map((r, binding) => ({ binding, resource: { buffer: r.buffer, offset: r.offset ?? 0, size: r.size } }))
      });
      const runs = m === 1 ? this.runs.at : /* @__PURE__ */ new Map();
      for (let i = 0; i < g.steps.length; i++) {
        const s = g.steps[i], next = g.steps[i + 1];
        const run = runs.get(i);
        if (run) {
          const { f, r } = run;
          const merged = this.mergeOf(f);
          const kernel = byKey.get(merged ? `${merged.op}/${merged.shape.join(",")}` : `${f.kernel}/1,${f.k},${f.n}`);
          const [pm0, pl0] = merged ? mergeOffsets(merged.attention.heads, merged.attention.head_dim) : [0, 0];
          const np = merged ? merged.attention.heads * MERGE_PARTS : 0;
          const a = merged ? { buffer: this.partials, offset: 0, size: f.k * MERGE_PARTS * 4 } : buf(r.norm?.x ?? r.product.a, 1, f.k);
          const ranges = [a, ...partsOf2(r.product.format).map((p) => part(r.product.weight, p))];
          if (r.norm) ranges.push(part(r.norm.weight, "w"), this.runs.eps.get(Math.fround(r.norm.eps)));
          if (merged) ranges.push({ buffer: this.partials, offset: pm0 * 4, size: np * 4 }, { buffer: this.partials, offset: pl0 * 4, size: np * 4 });
          if (r.add) {
            const from = now(r.add.x), to = from === this.buffers.get(r.add.x) ? this.runs.twins.get(r.add.x) : this.buffers.get(r.add.x);
            ranges.push({ buffer: from, size: f.n * 4 }, { buffer: to, size: f.n * 4 });
            holds.set(r.add.x, to);
          } else {
            ranges.push(buf(r.glu?.out ?? r.product.out, 1, f.n));
          }
          const label = merged ? `${merged.op} ${merged.shape.join("x")}` : `${f.kernel} 1x${f.k}x${f.n}`;
          steps.push({ label, kernel, group: productGroup(kernel, `decoder ${merged?.op ?? f.kernel} ${i}`, ranges) });
          i += f.steps - 1;
          continue;
        }
        const fusedAs = runs.has(i + 1) ? void 0 : this.fused.get(i);
        if (fusedAs === "add_rms_norm" && s.step === "add" && next.step === "rms_norm") {
          fixed("add_rms_norm", i, [1, m], whole(s.y), part(next.weight, "w"), whole(s.x), whole(next.out));
          i++;
          continue;
        }
        const att = g.steps[i + 2];
        if (m === 1 && fusedAs === "rope_kv" && s.step === "rope" && next.step === "kv_store" && att?.step === "attention" && att.x === s.x && att.stride === s.stride && att.k_cache === next.k_cache && att.v_cache === next.v_cache && att.kv_heads * att.head_dim === next.width && att.head_dim === s.head_dim && att.heads * att.head_dim <= next.k_col) {
          const ropeParams = { buffer: this.stepParams, offset: this.stepSlot.get(i) * ALIGN2, size: 32 };
          split("attention_rope", i + 2, att, whole(s.x), cache(next.k_cache), cache(next.v_cache), { buffer: this.partials }, ropeParams, { buffer: this.rope });
          i += 2;
          continue;
        }
        if (fusedAs === "rope_kv" && s.step === "rope" && next.step === "kv_store") {
          fixed("rope_kv", i, [ew((s.heads * s.head_dim + next.width) / 2), m], { buffer: this.rope }, whole(s.x), cache(next.k_cache), cache(next.v_cache));
          i++;
          continue;
        }
        switch (s.step) {
          case "embed": {
            const ids = { buffer: this.ids }, out = whole(s.out), h = g.hidden;
            if (s.format === "q8_0") fixed("embed_q8", i, [ew(h), m], ids, part(s.table, "w"), part(s.table, "d"), out);
            else if (s.format === "f32") fixed("embed_f32", i, [ew(h), m], ids, part(s.table, "w"), out);
            else fixed("embed_q4", i, [ew(h), m], ids, part(s.table, "w"), part(s.table, "d"), part(s.table, s.format === "q4_1" ? "m" : "d"), out);
            break;
          }
          case "rms_norm":
            fixed("rms_norm", i, [1, s.last ? 1 : m], whole(s.x), part(s.weight, "w"), whole(s.out));
            break;
          case "matmul": {
            const kernel = byKey.get(`${s.kernel}/${s.last ? 1 : m},${s.k},${s.n}`);
            const rows = s.last ? 1 : m;
            const label = `${s.kernel} ${rows}x${s.k}x${s.n}`;
            const weights = partsOf2(s.format).map((p) => part(s.weight, p));
            const group = (a) => productGroup(kernel, `decoder ${s.kernel} ${i}`, [a, ...weights, buf(s.out, rows, s.n)]);
            const a0 = buf(s.a, rows, s.k);
            if (s.last && rowsOf.get(s.a) === "tokens" && m > 1) {
              const byT = /* @__PURE__ */ new Map();
              const perT = (t) => {
                let bg = byT.get(t);
                if (!bg) {
                  bg = group({ ...a0, offset: (t - 1) * s.k * 4 });
                  byT.set(t, bg);
                }
                return bg;
              };
              steps.push({ label, kernel, group: perT(1), perT });
            } else {
              steps.push({ label, kernel, group: group(a0) });
            }
            break;
          }
          case "rope":
            fixed("rope", i, [ew(s.heads * s.head_dim / 2), m], { buffer: this.rope }, whole(s.x));
            break;
          case "kv_store":
            fixed("kv_store", i, [ew(s.width), m], whole(s.x), cache(s.k_cache), cache(s.v_cache));
            break;
          case "attention":
            if (m === 1) {
              split("attention_split", i, s, whole(s.x), cache(s.k_cache), cache(s.v_cache), { buffer: this.partials });
            } else {
              fixed("attention", i, [s.kv_heads, m], whole(s.x), cache(s.k_cache), cache(s.v_cache), whole(s.out));
            }
            break;
          case "swi_glu":
            fixed("swiglu", i, [ew(s.ffn), m], whole(s.x), whole(s.out));
            break;
          case "add":
            fixed("add", i, [ew(s.cols), m], whole(s.y), whole(s.x));
            break;
        }
      }
      return { m, steps };
    });
  }
};

// src/sampler.ts
var MASK = (1n << 64n) - 1n;
function argmax(logits) {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}
function seedOf(seed) {
  if (typeof seed === "bigint") {
    if (seed < 0n || seed > MASK) throw new RangeError(`seed ${seed} is not a u64 (0 to 2^64 - 1)`);
    return seed;
  }
  if (typeof seed !== "number" || !Number.isSafeInteger(seed) || seed < 0)
    throw new RangeError(`seed must be a non-negative integer (a bigint above 2^53), got ${String(seed)}`);
  return BigInt(seed);
}
var Sampler = class {
  constructor(sampling) {
    this.sampling = sampling;
    this.state = seedOf(sampling.seed);
  }
  sampling;
  state;
  /** The sort's keys and order, kept between draws (one vocabulary's worth). */
  keys = new Float64Array(0);
  /** The next SplitMix64 draw in [0, 1) (53 bits). */
  uniform() {
    this.state = this.state + 0x9e3779b97f4a7c15n & MASK;
    let z = this.state;
    z = (z ^ z >> 30n) * 0xbf58476d1ce4e5b9n & MASK;
    z = (z ^ z >> 27n) * 0x94d049bb133111ebn & MASK;
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  }
  /** Whether tokens are drawn (temperature above 0), not greedy. */
  get draws() {
    return Math.fround(this.sampling.temperature) > 0;
  }
  /** The next token. */
  sample(logits) {
    if (!this.draws) return argmax(logits);
    return this.pick(logits, this.uniform());
  }
  /**
   * The token that the draw `draw` (in [0, 1), from `uniform`) picks from
   * `logits` by the sampling rule (temperature above 0): `sample` with the
   * draw made elsewhere (the WebGPU backend makes it on the host and picks
   * on the GPU, or here when the GPU cannot).
   */
  pick(logits, draw) {
    const s = this.sampling;
    const temperature = Math.fround(s.temperature);
    const n = logits.length;
    if (n >= 1 << 17) throw new RangeError(`sampling a vocabulary of ${n} ids: at most 131071`);
    if (this.keys.length !== n) this.keys = new Float64Array(n);
    const bits = new Int32Array(logits.buffer, logits.byteOffset, n);
    const keys = this.keys;
    for (let i = 0; i < n; i++) {
      const b = bits[i];
      keys[i] = -(b ^ b >> 31 >>> 1) * 131072 + i;
    }
    keys.sort();
    const id = (j) => {
      const k = keys[j];
      return k - Math.floor(k / 131072) * 131072;
    };
    const len2 = s.topK > 0 ? Math.min(s.topK, n) : n;
    const top = logits[id(0)];
    const p = new Float64Array(len2);
    let total = 0;
    for (let j = 0; j < len2; j++) {
      p[j] = Math.exp((logits[id(j)] - top) / temperature);
      total += p[j];
    }
    let keep = len2;
    const topP = Math.fround(s.topP);
    if (topP < 1) {
      let acc = 0;
      for (let j = 0; j < len2; j++) {
        acc += p[j] / total;
        if (acc >= topP) {
          keep = j + 1;
          break;
        }
      }
    }
    total = 0;
    for (let j = 0; j < keep; j++) total += p[j];
    let u = draw * total;
    for (let j = 0; j < keep; j++) {
      if (u < p[j]) return id(j);
      u -= p[j];
    }
    return id(keep - 1);
  }
};

// src/text-generator.ts
var DEFAULT_CONTEXT = 2048;
var DEFAULT_MAX_TOKENS = 256;
function fromBase642(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
function adaptTokenizer(json2) {
  const fix = (p) => {
    if (!p || typeof p !== "object") return p;
    if (p.type === "Sequence" && Array.isArray(p.pretokenizers)) return { ...p, pretokenizers: p.pretokenizers.map(fix) };
    if (p.type === "Digits")
      return { type: "Split", pattern: { Regex: p.individual_digits ? "[^\\p{N}]+|\\p{N}" : "[^\\p{N}]+|\\p{N}+" }, behavior: "Isolated", invert: true };
    return p;
  };
  json2.pre_tokenizer = fix(json2.pre_tokenizer ?? null);
}
function nextTask2() {
  return new Promise((resolve) => {
    const c = new MessageChannel();
    c.port1.onmessage = () => {
      c.port1.close();
      resolve();
    };
    c.port2.postMessage(null);
  });
}
function checkOptions(o) {
  if (o !== void 0 && (o === null || typeof o !== "object")) throw new TypeError("generate: options must be an object");
  const opts = o ?? {};
  const maxTokens = opts.maxTokens ?? DEFAULT_MAX_TOKENS;
  if (!(maxTokens === Infinity || Number.isInteger(maxTokens) && maxTokens >= 0))
    throw new RangeError(`maxTokens must be a non-negative integer (or Infinity: up to the context), got ${String(opts.maxTokens)}`);
  const temperature = opts.temperature ?? 0;
  if (typeof temperature !== "number" || !(temperature >= 0) || !Number.isFinite(temperature)) throw new RangeError(`temperature must be a finite number ≥ 0, got ${String(opts.temperature)}`);
  const topK = opts.topK ?? 0;
  if (!Number.isInteger(topK) || topK < 0) throw new RangeError(`topK must be a non-negative integer (0: all), got ${String(opts.topK)}`);
  const topP = opts.topP ?? 1;
  if (typeof topP !== "number" || !(topP > 0 && topP <= 1)) throw new RangeError(`topP must be in (0, 1], got ${String(opts.topP)}`);
  const seed = seedOf(opts.seed ?? 0);
  const stop = opts.stop === void 0 ? [] : typeof opts.stop === "string" ? [opts.stop] : opts.stop;
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== "string" || !s)) throw new TypeError("stop must be a non-empty string or an array of them");
  const signal = opts.signal ?? null;
  if (signal !== null && !(typeof AbortSignal !== "undefined" && signal instanceof AbortSignal)) throw new TypeError("signal must be an AbortSignal");
  return { maxTokens, temperature, topK, topP, seed, stop: [...stop], signal };
}
var TextStream = class {
  constructor(decode) {
    this.decode = decode;
  }
  decode;
  ids = [];
  prefix = 0;
  read = 0;
  push(id) {
    this.ids.push(id);
    const before = this.decode(this.ids.slice(this.prefix, this.read));
    const now = this.decode(this.ids.slice(this.prefix));
    if (now.length > before.length && !now.endsWith("�")) {
      this.prefix = this.read;
      this.read = this.ids.length;
      return now.slice(before.length);
    }
    return "";
  }
  /** Whatever is left, complete or not (the end of the text). */
  flush() {
    const before = this.decode(this.ids.slice(this.prefix, this.read));
    const now = this.decode(this.ids.slice(this.prefix));
    this.prefix = this.read = this.ids.length;
    return now.length > before.length ? now.slice(before.length) : "";
  }
};
var StopFilter = class {
  constructor(stops) {
    this.stops = stops;
  }
  stops;
  pending = "";
  push(text) {
    this.pending += text;
    let cut = -1;
    for (const s of this.stops) {
      const i = this.pending.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) {
      const out2 = this.pending.slice(0, cut);
      this.pending = "";
      return { out: out2, stopped: true };
    }
    let hold = 0;
    for (const s of this.stops)
      for (let k = Math.min(s.length - 1, this.pending.length); k > hold; k--)
        if (this.pending.endsWith(s.slice(0, k))) {
          hold = k;
          break;
        }
    const out = this.pending.slice(0, this.pending.length - hold);
    this.pending = this.pending.slice(this.pending.length - hold);
    return { out, stopped: false };
  }
  flush() {
    const out = this.pending;
    this.pending = "";
    return out;
  }
};
function stepByStep(backend, first, sampler) {
  let tok = first;
  return { next: async () => tok = await backend.next([tok], sampler), close: async () => {
  } };
}
var WasmBackend2 = class {
  constructor(dec) {
    this.dec = dec;
  }
  dec;
  get graph() {
    return this.dec.graph;
  }
  get context() {
    return this.dec.context;
  }
  get position() {
    return this.dec.position;
  }
  get chunk() {
    return this.dec.layout.maxRows;
  }
  get memoryBytes() {
    return this.dec.memoryBytes;
  }
  reset() {
    this.dec.reset();
  }
  async forward(ids) {
    return (await this.dec.feed(ids)).slice();
  }
  async prefill(ids) {
    await this.dec.feed(ids);
  }
  async next(ids, sampler) {
    return sampler.sample(await this.dec.feed(ids));
  }
  steps(first, sampler) {
    return stepByStep(this, first, sampler);
  }
  close() {
  }
};
var WebGpuBackend = class {
  constructor(dec) {
    this.dec = dec;
  }
  dec;
  get graph() {
    return this.dec.graph;
  }
  get context() {
    return this.dec.context;
  }
  get position() {
    return this.dec.position;
  }
  get chunk() {
    return this.dec.maxRows;
  }
  get memoryBytes() {
    return this.dec.memoryBytes;
  }
  reset() {
    this.dec.reset();
  }
  forward(ids) {
    return this.dec.feed(ids);
  }
  prefill(ids) {
    return this.dec.prefill(ids);
  }
  /** Whether the latest token was sampled on the GPU (so that a step ahead can read it there). */
  onGpu = false;
  async next(ids, sampler, draw) {
    const u = draw ?? (sampler.draws ? sampler.uniform() : 0);
    const id = await this.dec.next(ids, this.sampling(sampler, u));
    this.onGpu = id >= 0;
    return id >= 0 ? id : sampler.pick(await this.dec.logits(), u);
  }
  sampling(sampler, u) {
    const s = sampler.sampling;
    return { temperature: s.temperature, topK: Math.min(s.topK, this.dec.graph.vocab), topP: Math.fround(s.topP), u };
  }
  /**
   * Up to MAX_AHEAD steps submitted before their tokens are read, each fed
   * the token the step before sampled on the GPU, so that the host records
   * the next steps while the GPU runs one (the decode step's host time,
   * 3.1 ms on an H200 host in Node, no longer adds to the GPU's). The draws
   * are the sampler's sequence, as step by step. Where the GPU hands a pick
   * back (-1), the steps after it were fed nothing real: they are waited
   * out and forgotten, and that step is run again step by step with its own
   * draw (the host picks from its logits); their draws are used again.
   */
  steps(first, sampler, limit) {
    if (!this.onGpu) return stepByStep(this, first, sampler);
    const dec = this.dec;
    let prev = first, taken = 0;
    const queue = [];
    const again = [];
    const draw = () => again.shift() ?? (sampler.draws ? sampler.uniform() : 0);
    const k = dec.stepsPerSubmit, depth = dec.aheadLimit;
    const fill = () => {
      for (; ; ) {
        const left = limit - taken - queue.length;
        if (!this.onGpu || left < 1) return;
        if (k > 1 && dec.canBatch) {
          const n = Math.min(k, left);
          if (queue.length + n > depth) return;
          const us = Array.from({ length: n }, draw);
          const ids = dec.aheadMany(us.map((u2) => this.sampling(sampler, u2)));
          ids.forEach((id2, i) => {
            id2.catch(() => {
            });
            queue.push({ id: id2, u: us[i] });
          });
          continue;
        }
        if (queue.length >= MAX_AHEAD) return;
        const u = draw();
        const id = dec.ahead(this.sampling(sampler, u));
        id.catch(() => {
        });
        queue.push({ id, u });
      }
    };
    const drain = async () => {
      const left = queue.splice(0);
      await Promise.allSettled(left.map((q) => q.id));
      dec.rewind(left.length);
      return left;
    };
    return {
      next: async () => {
        fill();
        const head = queue.shift();
        if (!head) {
          taken++;
          return prev = await this.next([prev], sampler, again.shift());
        }
        const id = await head.id;
        taken++;
        if (id >= 0) {
          fill();
          return prev = id;
        }
        const left = await drain();
        dec.rewind(1);
        again.unshift(...left.map((q) => q.u));
        prev = await this.next([prev], sampler, head.u);
        return prev;
      },
      close: async () => {
        again.push(...(await drain()).map((q) => q.u));
      }
    };
  }
  close() {
    this.dec.destroy();
  }
};
var TextGenerator = class _TextGenerator {
  /** `target: 'auto'`: which target it chose and why; null otherwise. */
  choice = null;
  /** The webtune session whose kernels run the model (tuning, events, status); a new one after a fallback to Wasm. */
  webtune;
  manifest;
  /** The decoder graph the backend runs (served by `GET /v1/models/{name}/graph`). */
  graph;
  /** Positions the caches hold: the longest prompt plus generated text. */
  context;
  /** How the latest `generate`/`chat` went; null before the first. */
  stats = null;
  decoder;
  tokenizer;
  template;
  eog;
  tail = Promise.resolve();
  /** Turns taken or waited for (`lock`): a generation or a low-level call in flight when > 0. */
  locks = 0;
  latency;
  closed = false;
  /** `target: 'auto'` on WebGPU: loads the model on Wasm, for when the GPU device is lost. */
  fallback = null;
  constructor(init) {
    this.webtune = init.webtune;
    this.manifest = init.manifest;
    this.decoder = "memory" in init.decoder ? new WasmBackend2(init.decoder) : new WebGpuBackend(init.decoder);
    this.graph = init.decoder.graph;
    this.context = init.decoder.context;
    this.tokenizer = init.tokenizer;
    this.template = init.manifest.chat_template ? new Template(init.manifest.chat_template) : null;
    this.eog = new Set(init.manifest.special?.eog_ids ?? []);
    this.latency = init.report ? new LatencyLog(init.webtune.server, init.manifest.name, this.context) : null;
  }
  /** The target running the model. */
  get target() {
    return this.decoder instanceof WebGpuBackend ? "webgpu" : "wasm";
  }
  /** WebGPU: the backend (for benchmarks: `profile`, `stats`); null on Wasm. */
  get gpu() {
    return this.decoder instanceof WebGpuBackend ? this.decoder.dec : null;
  }
  /** WebGPU: dispatches of one decode step (the sampling included), as last run; null on Wasm or before the first step. */
  get dispatchesPerToken() {
    return this.decoder instanceof WebGpuBackend && this.decoder.dec.stats.dispatchesPerToken > 0 ? this.decoder.dec.stats.dispatchesPerToken : null;
  }
  /**
   * Fetches the model's manifest, decoder graph, weights and tokenizer from
   * the server (each blob checked against its SHA-256 address), lays the
   * model out (Wasm: in one memory; WebGPU: in GPU buffers, the weights
   * uploaded once), opens a webtune session of the target and fetches the
   * decode step's kernels (a prompt's prefill buckets are fetched on their
   * first use).
   */
  static async load(opts) {
    if (!opts || typeof opts.model !== "string" || !opts.model) throw new TypeError("TextGenerator.load: `model` must be a model name (GET /v1/models lists them)");
    if (opts.target === "auto") return _TextGenerator.loadAuto(opts);
    if (opts.target !== "wasm" && opts.target !== "webgpu") throw new TypeError(`TextGenerator.load: target must be 'wasm', 'webgpu' or 'auto', got ${String(opts.target)}`);
    if (opts.target === "webgpu" && !opts.device && !globalThis.navigator?.gpu)
      throw new Error("TextGenerator.load: WebGPU is not available here (no navigator.gpu): load with target 'wasm', or 'auto' to use WebGPU where it is");
    if (opts.context !== void 0 && !(Number.isInteger(opts.context) && opts.context >= 1))
      throw new RangeError(`TextGenerator.load: context must be a positive integer, got ${String(opts.context)}`);
    const server = (opts.server ?? globalThis.location?.origin ?? "").replace(/\/+$/, "");
    const name = opts.model;
    const url = `${server}/v1/models/${encodeURIComponent(name)}`;
    const res = await fetch(url);
    if (res.status === 404) throw new Error(`model "${name}" is not on ${server} (import it with \`webtune model import\`; GET /v1/models lists the models there)`);
    if (!res.ok) throw new Error(`model "${name}": manifest HTTP ${res.status}`);
    const manifest = await res.json();
    if (manifest.format !== 2) throw new Error(`model "${name}": bundle format ${manifest.format}, TextGenerator reads format 2 (a language model imported from a GGUF file)`);
    if (manifest.architecture !== "llama") throw new Error(`model "${name}": architecture ${manifest.architecture}, TextGenerator runs llama`);
    const context = Math.min(opts.context ?? DEFAULT_CONTEXT, manifest.config.context_length);
    if (opts.context !== void 0 && opts.context > manifest.config.context_length)
      throw new RangeError(`TextGenerator.load: context ${opts.context} is over the model's ${manifest.config.context_length}`);
    const gres = await fetch(`${url}/graph`);
    if (!gres.ok) throw new Error(`model "${name}": decoder graph HTTP ${gres.status} (GET /v1/models/${name}/graph)`);
    const graph = await gres.json();
    const blob = async (b, what) => {
      if (!b || typeof b.url !== "string") throw new Error(`model "${name}": the manifest has no ${what} blob`);
      const r = await fetch(b.url.startsWith("http") ? b.url : `${server}${b.url}`);
      if (!r.ok) throw new Error(`model "${name}": ${what} blob HTTP ${r.status}`);
      const bytes = await r.arrayBuffer();
      const got = await sha256Hex(bytes);
      if (bytes.byteLength !== b.bytes || got !== null && got !== b.sha256)
        throw new Error(`model "${name}": the ${what} blob is corrupt or truncated (${bytes.byteLength} bytes hashing to ${got ?? "?"}; the manifest says ${b.bytes} bytes, ${b.sha256}); nothing was kept`);
      return bytes;
    };
    const [weights, tokBytes] = await Promise.all([blob(manifest.weights, "weights"), blob(manifest.tokenizer, "tokenizer")]);
    const tokJson = JSON.parse(new TextDecoder().decode(tokBytes));
    adaptTokenizer(tokJson);
    const tokenizer = new Tokenizer_default(tokJson, {});
    const report = opts.report ?? true;
    if (opts.target === "webgpu") {
      const webtune2 = await Webtune.open({
        server,
        target: "webgpu",
        device: opts.device,
        adapter: opts.adapter,
        tune: opts.tune ?? true,
        budgetMs: opts.budgetMs,
        cache: opts.cache,
        maxCandidates: opts.maxCandidates
      });
      let decoder2 = null;
      try {
        decoder2 = await GpuDecoder.create({ device: webtune2.device, graph, tensors: manifest.tensors, weights, context, stepsPerSubmit: opts.stepsPerSubmit });
        const dec = decoder2;
        dec.setKernels((op, shape) => webtune2.gpuKernel(op, shape));
        await dec.kernels(1);
      } catch (e) {
        decoder2?.destroy();
        webtune2.close();
        throw e;
      }
      return new _TextGenerator({ webtune: webtune2, manifest, decoder: decoder2, tokenizer, report });
    }
    const shared = threadsWanted(opts.threads).count > 1;
    const decoder = await GraphDecoder.create({
      graph,
      tensors: manifest.tensors,
      weights,
      context,
      shared,
      fixed: fromBase642("AGFzbQEAAAABaAxgAXsBfWAEe3t7ewF7YAJ/fwF/YAF7AXtgA39/fwBgBn9/f39/fQBgB39/f39/f38AYAl/f39/f39/f38AYAx/f39/f39/f399f38AYAR/f39/AGAGf39/f39/AGAIf39/f39/f38AAg8BA2VudgZtZW1vcnkCAAEDDw4AAQIDBAUGBwgJBAoLCgdgCgNleHAABAdybXNub3JtAAUEcm9wZQAGCGt2X3N0b3JlAAcJYXR0ZW50aW9uAAgGc3dpZ2x1AAkDYWRkAAoIZW1iZWRfcTgACwhlbWJlZF9xNAAMCWVtYmVkX2YzMgANCtUYDhkAIAD9HwAgAP0fAZIgAP0fAiAA/R8DkpILlQEBAnsgACAB/Q0AAQIDCAkKCxAREhMYGRobIAAgAf0NBAUGBwwNDg8UFRYXHB0eH/3kASEEIAIgA/0NAAECAwgJCgsQERITGBkaGyACIAP9DQQFBgcMDQ4PFBUWFxwdHh/95AEhBSAEIAX9DQABAgMICQoLEBESExgZGhsgBCAF/Q0EBQYHDA0ODxQVFhccHR4f/eQBCwwAIAAgASAAIAFJGwugAwEEeyAA/QwAALBCAACwQgAAsEIAALBC/egB/QxPrK7CT6yuwk+srsJPrK7C/ekBIQAgAP0MO6q4PzuquD87qrg/O6q4P/3mAf0MAABASwAAQEsAAEBLAABAS/3kASEBIAH9DAAAQEsAAEBLAABASwAAQEv95QEhAiAAIAL9DACAMT8AgDE/AIAxPwCAMT/95gH95QEhAyADIAL9DIOAXjmDgF45g4BeOYOAXjn95gH95AEhA/0MZ2lQOWdpUDlnaVA5Z2lQOSAD/eYB/QzOQ7c6zkO3Os5DtzrOQ7c6/eQBIQQgBCAD/eYB/QwIiQg8CIkIPAiJCDwIiQg8/eQBIQQgBCAD/eYB/QzBqSo9wakqPcGpKj3BqSo9/eQBIQQgBCAD/eYB/Qyqqio+qqoqPqqqKj6qqio+/eQBIQQgBCAD/eYB/QwAAAA/AAAAPwAAAD8AAAA//eQBIQQgBCADIAP95gH95gEgA/3kAf0MAACAPwAAgD8AAIA/AACAP/3kASAB/Qx/AMC0fwDAtH8AwLR/AMC0/a4BQRf9qwH95gELLgECfyACQQJ0IQQDQCABIANqIAAgA2r9AAQAEAP9CwQAIANBEGoiAyAESQ0ACwvEAQIFfwN7IARBAnQhCAJAIANFDQADQCAAIAYgCGxqIQkgAiAGIAhsaiEK/QwAAAAAAAAAAAAAAAAAAAAAIQtBACEHA0AgCSAHav0ABAAhDCALIAwgDP3mAf3kASELIAdBEGoiByAISQ0AC0MAAIA/IAsQACAEs5UgBZKRlf0TIQ1BACEHA0AgCiAHaiAJIAdq/QAEACAN/eYBIAEgB2r9AAQA/eYB/QsEACAHQRBqIgcgCEkNAAsgBkEBaiIGIANJDQALCwv6AQIHfwR7IARBAnQhCSADIAlsIQoCQCABRQ0AA0AgACAHIAJBAnRsaiELIAUgBiAHaiAJbGohDEEAIQ0DQEEAIQgDQCALIA1qIAhq/QAEACEOIAwgCGr9AAQAIQ8gDyAP/Q0AAQIDAAECAwgJCgsICQoLIRAgDyAP/Q0EBQYHBAUGBwwNDg8MDQ4PIREgCyANaiAIaiAOIBD95gEgDiAO/Q0EBQYHAAECAwwNDg8ICQoLIBH9DAAAgL8AAIA/AACAvwAAgD/95gH95gH95AH9CwQAIAhBEGoiCCAJSQ0ACyANIAlqIg0gCkkNAAsgB0EBaiIHIAFJDQALCwtfAQR/IAVBAnQhDAJAIAFFDQADQCAAIAkgAmxBAnRqIQogCCAJaiAMbCELIAYgC2ogCiADQQJ0aiAM/AoAACAHIAtqIAogBEECdGogDPwKAAAgCUEBaiIJIAFJDQALCwvMCQYRfwF7An0EewR/BHsgBUECdCETIAQgE2whFCADIARuIRgCQCABRQ0AA0AgCCAMakEBaiERIBFBA2pBfHFBAnQhEiAAIAwgAmxBAnRqIRogCiAMIAMgBWxsQQJ0aiEbQQAhDQNAIA0gE2whFiARQQFrISdBACEPA0AgBiAPIBRsaiAWaiEZIAYgD0EBaiAnEAIgFGxqIBZqISQgBiAPQQJqICcQAiAUbGogFmohJSAGIA9BA2ogJxACIBRsaiAWaiEmQQAhDgNAIBogDSAYbCAOaiATbGohFf0MAAAAAAAAAAAAAAAAAAAAACEd/QwAAAAAAAAAAAAAAAAAAAAAISj9DAAAAAAAAAAAAAAAAAAAAAAhKf0MAAAAAAAAAAAAAAAAAAAAACEqQQAhEANAIBUgEGr9AAQAISsgHSArIBkgEGr9AAQA/eYB/eQBIR0gKCArICQgEGr9AAQA/eYB/eQBISggKSArICUgEGr9AAQA/eYB/eQBISkgKiArICYgEGr9AAQA/eYB/eQBISogEEEQaiIQIBNJDQALIAsgDiASbGogD0ECdGogHSAoICkgKhABIAn9E/3mAf0LBAAgDkEBaiIOIBhJDQALIA9BBGoiDyARSQ0AC0EAIQ4DQCALIA4gEmxqIRxDAACA/yEeQQAhDwNAIB4gHCAPQQJ0aioCAJchHiAPQQFqIg8gEUkNAAsgESEPAkADQCAPQQJ0IBJPDQEgHCAPQQJ0akPK8knxOAIAIA9BAWohDwwACwsgHv0TISP9DAAAAAAAAAAAAAAAAAAAAAAhIEEAIRADQCAcIBBq/QAEACAj/eUBEAMhISAhIBwgEGr9AAQA/QwIj6HvCI+h7wiPoe8Ij6Hv/UT9TiEhIBwgEGogIf0LBAAgICAh/eQBISAgEEEQaiIQIBJJDQALQwAAgD8gIBAAlf0TISJBACEQA0AgHCAQaiAcIBBq/QAEACAi/eYB/QsEACAQQRBqIhAgEkkNAAsgDkEBaiIOIBhJDQALQQAhDgNAIBsgDSAYbCAOaiATbGohFyALIA4gEmxqIRxBACEQAkADQCAQQcAAaiATSw0B/QwAAAAAAAAAAAAAAAAAAAAAIR39DAAAAAAAAAAAAAAAAAAAAAAhKP0MAAAAAAAAAAAAAAAAAAAAACEp/QwAAAAAAAAAAAAAAAAAAAAAISogByAWaiAQaiEZQQAhDwNAIBwgD0ECdGr9CQIAISEgHSAhIBn9AAQA/eYB/eQBIR0gKCAhIBn9AAQQ/eYB/eQBISggKSAhIBn9AAQg/eYB/eQBISkgKiAhIBn9AAQw/eYB/eQBISogGSAUaiEZIA9BAWoiDyARSQ0ACyAXIBBqIB39CwQAIBcgEGogKP0LBBAgFyAQaiAp/QsEICAXIBBqICr9CwQwIBBBwABqIRAMAAsLAkADQCAQIBNPDQH9DAAAAAAAAAAAAAAAAAAAAAAhHSAHIBZqIBBqIRlBACEPA0AgHSAcIA9BAnRq/QkCACAZ/QAEAP3mAf3kASEdIBkgFGohGSAPQQFqIg8gEUkNAAsgFyAQaiAd/QsEACAQQRBqIRAMAAsLIA5BAWoiDiAYSQ0ACyANQQFqIg0gBEkNAAsgDEEBaiIMIAFJDQALCwuSAQIFfwF7IAJBAnQhBgJAIAFFDQADQCAAIAQgBkEBdGxqIQcgAyAEIAZsaiEIQQAhBQNAIAcgBWr9AAQAIQkgCCAFaiAJ/QwAAIA/AACAPwAAgD8AAIA/IAn94QEQA/3kAf3nASAHIAZqIAVq/QAEAP3mAf0LBAAgBUEQaiIFIAZJDQALIARBAWoiBCABSQ0ACwsLQAECfyACQQJ0IQQCQCACRQ0AA0AgACADaiAAIANq/QAEACABIANq/QAEAP3kAf0LBAAgA0EQaiIDIARJDQALCwu4AQIGfwJ7AkAgAUUNAANAIAAgBkECdGooAgAhCCACIAggBGxqIQkgAyAIIARBBXZsQQJ0aiEKIAUgBiAEbEECdGohC0EAIQcDQCAKIAdBBXZBAnRq/QkCACENIAkgB2r9XQMA/YcBIQwgCyAHQQJ0aiAM/acB/foBIA395gH9CwQAIAsgB0ECdEEQamogDP2oAf36ASAN/eYB/QsEACAHQQhqIgcgBEkNAAsgBkEBaiIGIAFJDQALCwvYAQIIfwJ9AkAgAUUNAANAIAAgCEECdGooAgAhCiACIAogBkEBdmxqIQsgCiAGQQV2bEECdCEMIAcgCCAGbEECdGohDUEAIQkDQCADIAxqIAlBBXZBAnRqKgIAIRAgBQR9IAQgDGogCUEFdkECdGoqAgAFIBBDAAAAwZQLIREgCyAJQQF2aigCACEOQQAhDwNAIA0gCSAPakECdGogECAOIA9BAnR2QQ9xs5QgEZI4AgAgD0EBaiIPQQhJDQALIAlBCGoiCSAGSQ0ACyAIQQFqIgggAUkNAAsLC2sBBX8gA0ECdCEKAkAgAUUNAANAIAAgBkECdGooAgAhCCAFIAYgBGxBAnRqIQlBACEHA0AgCSAHQQJ0aiACIAhBAnRqIAcgCmxqKgIAOAIAIAdBAWoiByAESQ0ACyAGQQFqIgYgAUkNAAsLCw==")
    });
    const webtune = await Webtune.open({
      server,
      target: "wasm",
      memory: decoder.memory,
      tune: opts.tune ?? true,
      worker: opts.worker ?? false,
      threads: opts.threads,
      budgetMs: opts.budgetMs,
      cache: opts.cache,
      maxCandidates: opts.maxCandidates,
      policy: opts.policy,
      trials: "all"
    });
    try {
      decoder.setKernels((op, shape) => webtune.wasmKernel(op, shape), {
        call: (kind, kernels, run) => webtune.guard.call(kind, kernels, run),
        due: (kind, kernels) => webtune.guard.due(kind, kernels)
      });
      await decoder.kernels(1);
    } catch (e) {
      webtune.close();
      throw e;
    }
    return new _TextGenerator({ webtune, manifest, decoder, tokenizer, report });
  }
  /**
   * `target: 'auto'`. The plan is asked with a WebGPU session's device key
   * (the GPU is what tells devices apart for this choice) at batch 1 and
   * `autoLength` positions, before any weights are fetched. With no plan,
   * both targets are loaded, each feeds the same prompt of about
   * `autoLength` − 6 tokens and then times 5 decode steps (greedy, after one
   * untimed), both medians are reported through that session, and the
   * faster is kept.
   */
  static async loadAuto(opts) {
    const server = (opts.server ?? globalThis.location?.origin ?? "").replace(/\/+$/, "");
    const want = Math.max(16, Math.floor(opts.autoLength ?? 128));
    const seq = Math.max(64, 2 ** Math.ceil(Math.log2(want)));
    let probe;
    try {
      if (!opts.device && !globalThis.navigator?.gpu) throw new Error("no navigator.gpu");
      probe = await Webtune.open({ server, target: "webgpu", device: opts.device, adapter: opts.adapter, tune: false, cache: false });
    } catch (e) {
      const wasm = await _TextGenerator.load({ ...opts, target: "wasm" });
      wasm.choice = { target: "wasm", how: "no-webgpu", reason: `WebGPU did not open: ${e instanceof Error ? e.message : e}`, seq_len: seq };
      return wasm;
    }
    const device = probe.device;
    const one = (target) => _TextGenerator.load({ ...opts, target, device: target === "webgpu" ? device : void 0 });
    const gpuOrWasm = async () => {
      try {
        const gen = await one("webgpu");
        gen.fallback = () => one("wasm");
        return gen;
      } catch (e) {
        const gen = await one("wasm");
        gen.choice = { target: "wasm", how: "no-webgpu", reason: `WebGPU could not load the model: ${e instanceof Error ? e.message : e}`, seq_len: seq };
        return gen;
      }
    };
    try {
      const plan = await fetchPlan(server, opts.model, probe.session.device_key, 1, seq).catch((e) => ({ target: null, reason: String(e) }));
      if (plan.target) {
        const gen = await (plan.target === "webgpu" ? gpuOrWasm() : one("wasm"));
        gen.choice ??= { target: plan.target, how: "plan", reason: plan.reason ?? "", seq_len: seq };
        return gen;
      }
      const gpu = await gpuOrWasm();
      if (gpu.target === "wasm") return gpu;
      let wasm;
      try {
        wasm = await one("wasm");
      } catch (e) {
        gpu.close();
        throw e;
      }
      const steps = 6;
      const prompt = Array.from({ length: Math.max(1, Math.min(want, gpu.context) - steps - 1) }, (_, i) => 1 + i % Math.max(1, gpu.graph.vocab - 1));
      const time = async (g) => {
        const dec = g.decoder, sampler = new Sampler({ temperature: 0, topK: 0, topP: 1, seed: 0n });
        dec.reset();
        let tok = await dec.next(prompt, sampler);
        const ms2 = [];
        for (let i = 0; i < steps; i++) {
          const t0 = performance.now();
          tok = await dec.next([tok], sampler);
          if (i > 0) ms2.push(performance.now() - t0);
        }
        dec.reset();
        return median(ms2);
      };
      const ms = { webgpu: await time(gpu), wasm: await time(wasm) };
      const faster = ms.wasm <= ms.webgpu ? "wasm" : "webgpu";
      const log = new LatencyLog(server, opts.model, gpu.context);
      for (const target of ["wasm", "webgpu"])
        await log.report({ session_id: probe.session.session_id, target, batch: 1, seq_len: seq, median_ms: ms[target], runs: steps - 1 });
      const [keep, drop] = faster === "wasm" ? [wasm, gpu] : [gpu, wasm];
      drop.close();
      keep.choice = {
        target: faster,
        how: "measured",
        ms,
        seq_len: seq,
        reason: `no plan for this device class yet (${plan.reason ?? "none"}); measured a decode step: wasm ${ms.wasm.toFixed(2)} ms, webgpu ${ms.webgpu.toFixed(2)} ms`
      };
      return keep;
    } finally {
      probe.close();
    }
  }
  /**
   * At the start of each call: where the GPU device was lost, the model
   * goes on on Wasm (`target: 'auto'`: loaded again there, its caches empty,
   * `choice` saying why), or the call fails in one line (`target:
   * 'webgpu'`). A call in flight when the device goes fails in one line.
   */
  async recover() {
    const d = this.decoder;
    if (!(d instanceof WebGpuBackend) || d.dec.lostReason === null) return;
    const reason = d.dec.lostReason;
    if (!this.fallback) throw this.lostLine(null);
    const wasm = await this.fallback();
    d.close();
    this.webtune.close();
    this.decoder = wasm.decoder;
    this.webtune = wasm.webtune;
    this.latency = wasm.latency;
    this.fallback = null;
    this.choice = { target: "wasm", how: "device-lost", reason: `the GPU device was lost (${reason}); the model runs on Wasm now`, seq_len: this.choice?.seq_len ?? 0 };
  }
  /** The prompt's token ids as `generate` feeds them (BOS first when the manifest says `add_bos`). */
  tokenize(text) {
    if (typeof text !== "string") throw new TypeError(`expected a string, got ${text === null ? "null" : typeof text}`);
    const ids = text ? this.tokenizer.encode(text, { add_special_tokens: false }).ids : [];
    const sp = this.manifest.special;
    return sp?.add_bos && sp.bos_id != null ? [sp.bos_id, ...ids] : ids;
  }
  /** The text of token ids (special tokens left out). */
  decode(ids) {
    if (!ids.length) return "";
    return this.tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  }
  /** A chat rendered with the model's chat template, ready for the assistant's turn. */
  applyChatTemplate(messages) {
    if (!this.template) throw new Error(`model "${this.manifest.name}" has no chat template: use generate() with a prompt`);
    if (!Array.isArray(messages) || messages.some((m) => !m || typeof m.role !== "string" || typeof m.content !== "string"))
      throw new TypeError("chat: messages must be an array of { role, content } strings");
    const token = (id) => id == null ? "" : this.tokenizer.id_to_token(id) ?? "";
    const sp = this.manifest.special;
    return this.template.render({
      messages,
      add_generation_prompt: true,
      bos_token: token(sp?.bos_id),
      eos_token: token(sp?.eos_id)
    });
  }
  /**
   * Generates text after `prompt`, as an async iterator of text pieces as
   * they are decoded (see the header of text-generator.ts for every policy).
   */
  generate(prompt, options) {
    return this.stream(() => this.tokenize(prompt), options);
  }
  /** Generates the assistant's reply to `messages`, rendered with the model's chat template. */
  chat(messages, options) {
    return this.stream(() => this.tokenize(this.applyChatTemplate(messages)), options);
  }
  /**
   * Low level: feeds `ids` at the next positions (with `reset`, from
   * position 0) and returns a copy of the logits after the last one, e.g.
   * to teacher-force a reference's tokens.
   */
  async forward(ids, { reset = false } = {}) {
    if (!Array.isArray(ids)) throw new TypeError("forward: ids must be an array of token ids");
    const release = await this.lock();
    try {
      await this.recover();
      if (reset) this.decoder.reset();
      return await this.decoder.forward(ids);
    } finally {
      release();
    }
  }
  /**
   * Low level: feeds `ids` (with `reset`, from position 0) and returns the
   * greedy next token, whatever it is (end-of-generation ids included), e.g.
   * to run a fixed number of decode steps. On WebGPU its id is all that is
   * read back.
   */
  async nextToken(ids, { reset = false } = {}) {
    if (!Array.isArray(ids)) throw new TypeError("nextToken: ids must be an array of token ids");
    const release = await this.lock();
    try {
      await this.recover();
      if (reset) this.decoder.reset();
      return await this.decoder.next(ids, new Sampler({ temperature: 0, topK: 0, topP: 1, seed: 0n }));
    } finally {
      release();
    }
  }
  /**
   * Low level: feeds `ids` (with `reset`, from position 0) and returns the
   * next `n` greedy tokens, each step fed the token before whatever it is
   * (end-of-generation ids included), as `generate` runs its steps (on
   * WebGPU, submitted ahead of their read-backs), e.g. to time decoding.
   */
  async nextTokens(ids, n, { reset = false } = {}) {
    if (!Array.isArray(ids)) throw new TypeError("nextTokens: ids must be an array of token ids");
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`nextTokens: n must be a positive integer, got ${n}`);
    const from = reset ? 0 : this.decoder.position;
    if (from + ids.length + n - 1 > this.context)
      throw new RangeError(`nextTokens: ${ids.length} tokens and ${n - 1} steps from position ${from} pass the context of ${this.context}`);
    const release = await this.lock();
    let stepper = null;
    try {
      await this.recover();
      if (reset) this.decoder.reset();
      const sampler = new Sampler({ temperature: 0, topK: 0, topP: 1, seed: 0n });
      const out = [await this.decoder.next(ids, sampler)];
      stepper = this.decoder.steps(out[0], sampler, n - 1);
      while (out.length < n) out.push(await stepper.next());
      return out;
    } finally {
      await this.endTurn(stepper, release);
    }
  }
  /** Positions the caches hold now (after `forward`, or the latest generation). */
  get position() {
    return this.decoder.position;
  }
  /** Bytes of memory the model uses: the Wasm memory, or on WebGPU its GPU buffers. */
  get memoryBytes() {
    return this.decoder.memoryBytes;
  }
  /**
   * Tunes the model's kernels for up to `budgetMs` (see `Webtune.idle`);
   * call it between generations. On Wasm a candidate that wins on the bench
   * replaces a kernel only once it also wins in the model's own calls (the
   * session's `trials: 'all'`: on the bench its weights stay in cache, in
   * the model every layer's stream from memory). A generation feeds those
   * trials; between generations `idle()` runs model steps that call the
   * kernels on trial (in their bucket, the position kept), at least one per
   * call while a trial is open (a prompt bucket's step may outlast a small
   * budget) and more while the budget lasts.
   */
  async idle(budgetMs) {
    const t0 = performance.now();
    const r = await this.webtune.idle(budgetMs);
    if (!(this.decoder instanceof WasmBackend2) || this.locks > 0 || this.closed) return r;
    const dec = this.decoder.dec;
    const budget = budgetMs ?? Math.max(performance.now() - t0, this.webtune.budgetMs);
    const t1 = performance.now();
    let ran = false;
    const release = await this.lock();
    try {
      for (; ; ) {
        const m = [...this.webtune.pendingTrials().map((k) => k.shape[0]), ...dec.dueBuckets()].filter((x) => this.graph.buckets.includes(x)).sort((a, b) => a - b)[0];
        if (m === void 0 || ran && performance.now() - t1 >= budget) break;
        await dec.trialRun(m);
        ran = true;
      }
    } finally {
      release();
    }
    return ran ? { ...r, worked: true } : r;
  }
  close() {
    if (this.closed) return;
    this.closed = true;
    this.decoder.close();
    this.webtune.close();
  }
  /** Waits for the generation in flight, if any; resolves with the release of the next turn. */
  lock() {
    let release;
    const mine = new Promise((r) => release = r);
    const prev = this.tail;
    this.tail = prev.then(() => mine);
    this.locks++;
    return prev.then(() => () => {
      this.locks--;
      release();
    });
  }
  async *stream(prompt, options) {
    if (this.closed) throw new Error("this TextGenerator is closed");
    const o = checkOptions(options);
    const ids = prompt();
    if (!ids.length) throw new RangeError("the prompt is empty: this model has no BOS token to start from, so give it at least one token of text");
    if (ids.length > this.context)
      throw new RangeError(`the prompt is ${ids.length} tokens, over the context of ${this.context} (load with a larger context, up to the model's ${this.manifest.config.context_length}, or shorten it)`);
    const room = this.context - ids.length + 1;
    const max = Math.min(o.maxTokens, room);
    const stats = { promptTokens: ids.length, generatedTokens: 0, finish: "abort", prefillMs: 0, decodeMs: 0, stepMs: [] };
    const release = await this.lock();
    this.stats = stats;
    let stepper = null;
    try {
      await this.recover();
      if (max === 0) {
        stats.finish = "length";
        return;
      }
      const dec = this.decoder, signal = o.signal;
      if (signal?.aborted) {
        stats.finish = "abort";
        return;
      }
      dec.reset();
      const sampler = new Sampler({ temperature: o.temperature, topK: o.topK, topP: o.topP, seed: o.seed });
      const chunk = dec.chunk;
      const t0 = performance.now();
      let tok = -1;
      for (let at = 0; at < ids.length; at += chunk) {
        if (at > 0) {
          await nextTask2();
          if (signal?.aborted) {
            stats.finish = "abort";
            return;
          }
        }
        if (at + chunk < ids.length) await dec.prefill(ids.slice(at, at + chunk));
        else tok = await dec.next(ids.slice(at), sampler);
      }
      stats.prefillMs = performance.now() - t0;
      stepper = dec.steps(tok, sampler, max - 1);
      const text = new TextStream((x) => this.decode(x));
      const stops = new StopFilter(o.stop);
      for (; ; ) {
        if (this.eog.has(tok)) {
          stats.finish = "eog";
          break;
        }
        stats.generatedTokens++;
        const { out: out2, stopped: stopped2 } = stops.push(text.push(tok));
        if (out2) yield out2;
        if (stopped2) {
          stats.finish = "stop";
          return;
        }
        if (stats.generatedTokens >= max) {
          stats.finish = max < o.maxTokens ? "context" : "length";
          break;
        }
        await nextTask2();
        if (signal?.aborted) {
          stats.finish = "abort";
          break;
        }
        const s0 = performance.now();
        tok = await stepper.next();
        const ms = performance.now() - s0;
        stats.stepMs.push(ms);
        stats.decodeMs += ms;
        if (this.latency) {
          const seq = Math.min(Math.max(64, 2 ** Math.ceil(Math.log2(dec.position))), this.context);
          void this.latency.add(this.webtune.session.session_id, this.target, 1, seq, ms);
        }
      }
      const { out, stopped } = stops.push(text.flush());
      if (out) yield out;
      if (stopped) {
        stats.finish = "stop";
        return;
      }
      const rest = stops.flush();
      if (rest) yield rest;
    } catch (e) {
      throw this.lostLine(e);
    } finally {
      await this.endTurn(stepper, release);
    }
  }
  /** The end of a call that ran decode steps: the steps run ahead and unused forgotten, then the next turn released. */
  async endTurn(stepper, release) {
    try {
      await stepper?.close();
    } finally {
      release();
    }
  }
  /** A call's error where the GPU device was lost during it: one line saying what happens next. */
  lostLine(e) {
    const d = this.decoder;
    if (!(d instanceof WebGpuBackend) || d.dec.lostReason === null) return e;
    const next = this.fallback ? "this call stopped, the next goes on with Wasm" : "load the model again (target 'auto' goes on with Wasm by itself)";
    return new Error(`the GPU device was lost (${d.dec.lostReason}): ${next}`);
  }
};
export {
  AUTO_SLICE_MAX_MS,
  CROWD_CANDIDATES,
  DEFAULT_CONTEXT,
  DEFAULT_MAX_TOKENS,
  GpuKernel,
  KernelBundle,
  Sampler,
  SentenceEncoder,
  TextGenerator,
  ThreadPool,
  WasmKernel,
  Webtune,
  measureRho,
  rhoBit,
  sharedImport,
  threadSupport
};
