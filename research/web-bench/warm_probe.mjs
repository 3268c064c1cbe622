// Probe (issue 40): the first ROUNDS calls of each bucket of
// all-minilm-l6-v2 (int16, headless Chromium, a fresh database), on 1 and
// on 2 threads, with tuning off or, with --tune, `idle()` after every call
// as in the README loop. Per call it prints the call's ms, the ms of the
// model's synchronous run inside it (the rest is the call's awaits), and
// the local server's CPU share (cores, from /proc) over the call, and with
// threads the ms the calling thread spent waiting for parts a worker held
// (ThreadPool.stats.waitMs): whether
// the early calls are slow from the model's own warm-up, from tuning in the
// page, or from the server compiling candidates on the same cores.
//
//   node research/web-bench/warm_probe.mjs [ROUNDS] [--tune] [--nice N] [--sched-idle] [--js-flags FLAGS] [--runtime FILE]
//
// --sched-idle puts the server's threads in SCHED_IDLE (chrt): they run only
// on a core nothing else wants. --runtime FILE serves FILE (a `node build.mjs` output's webtune.js) at
// /web/webtune.js instead of the one the server embeds. --nice runs the server at that nice value (default 0); --js-flags passes
// V8 flags to Chromium (for example --liftoff-only: no optimising tier, so
// no compiling on V8's background threads after a module's first compile).
// Needs WEBTUNE_MODELS_DIR as readme_loop.mjs does.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { isolatingProxy, launchChromium, startServer } from '../../client-runtime/web/test/harness.mjs';

const CASES = [[1, 16], [1, 64], [1, 128], [1, 256], [8, 128]];
const ROUNDS = Number(process.argv[2] ?? 6);
const TUNE = process.argv.includes('--tune');
const opt = (k) => {
  const i = process.argv.indexOf(k);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const NICE = Number(opt('--nice') ?? 0);
const JS_FLAGS = opt('--js-flags');
const RUNTIME = opt('--runtime');
const SCHED_IDLE = process.argv.includes('--sched-idle');
for (const threads of [1, 2]) {
  const work = mkdtempSync(join(tmpdir(), 'webtune-warm-'));
  const server = await startServer(`${work}/r.sqlite`, ['--models-dir', process.env.WEBTUNE_MODELS_DIR]);
  for (const tid of readdirSync(`/proc/${server.proc.pid}/task`)) {
    setPriority(Number(tid), NICE);
    if (SCHED_IDLE) execFileSync('chrt', ['--idle', '-p', '0', tid]);
  }
  const browser = await launchChromium(`${work}/profile`, JS_FLAGS ? [`--js-flags=${JS_FLAGS}`] : []);
  const proxy = threads > 1 ? await isolatingProxy(server.url) : null;
  const base = proxy?.url ?? server.url;
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    if (RUNTIME) {
      const body = readFileSync(RUNTIME, 'utf8');
      await page.route('**/web/webtune.js', (route) => route.fulfill({
        body, contentType: 'text/javascript', headers: { 'cross-origin-resource-policy': 'same-origin' },
      }));
    }
    await page.goto(threads > 1 ? `${base}/` : `${base}/healthz`);
    // The server's CPU time (ms, user + system) every 50 ms, by wall clock.
    const cpu = [];
    const hz = 100;
    const sample = () => {
      const f = readFileSync(`/proc/${server.proc.pid}/stat`, 'utf8').split(') ')[1].split(' ');
      cpu.push([Date.now(), (Number(f[11]) + Number(f[12])) * 1000 / hz]);
    };
    const timer = setInterval(sample, 50);
    const rows = await page.evaluate(async ({ threads, cases, rounds, tune }) => {
      const { SentenceEncoder } = await import('/web/webtune.js');
      const enc = await SentenceEncoder.load({ model: 'all-minilm-l6-v2', target: 'wasm', cache: false, threads, precision: 'int16', tune });
      const text = (n) => {
        const w = Array.from({ length: 600 }, (_, i) => ['the', 'model', 'runs', 'on', 'this'][i % 5]);
        let k = n - 2;
        for (let t = 0; t < 50; t++) { const s = w.slice(0, k).join(' '); const l = enc.tokenize(s).length; if (l === n) return s; k += l > n ? -1 : 1; }
        throw new Error('no text');
      };
      const batches = cases.map(([b, n]) => new Array(b).fill(text(n)));
      const out = cases.map(() => []);
      // The synchronous run inside each call, apart from the call's awaits.
      let inner = 0;
      const guard = enc.webtune.guard, call = guard.call.bind(guard);
      guard.call = (kind, kernels, f) => call(kind, kernels, () => { const a = performance.now(); try { return f(); } finally { inner = performance.now() - a; } });
      for (let r = 0; r < rounds; r++) {
        for (let c = 0; c < batches.length; c++) {
          const pool = enc.webtune.threadPool;
          const w0 = pool?.stats.waitMs ?? 0;
          const a = performance.now(), wall = Date.now();
          await enc.encode(batches[c]);
          out[c].push([wall, Date.now()]);
          const waited = (pool?.stats.waitMs ?? 0) - w0;
          out[c].push(`${(performance.now() - a).toFixed(0)}/${inner.toFixed(0)}${pool ? ` w${waited.toFixed(0)}` : ''}`);
          if (tune) await enc.idle();
        }
      }
      return out;
    }, { threads, cases: CASES, rounds: ROUNDS, tune: TUNE });
    clearInterval(timer);
    // The server's CPU share during a call: its CPU time over the samples spanning the call.
    const during = ([a, b]) => {
      const i = Math.max(0, cpu.findLastIndex((x) => x[0] <= a)), j = cpu.findIndex((x) => x[0] >= b);
      const k = j < 0 ? cpu.length - 1 : j;
      return k > i ? (cpu[k][1] - cpu[i][1]) / (cpu[k][0] - cpu[i][0]) : NaN;
    };
    console.log(`threads ${threads}${TUNE ? ' (idle() after each call)' : ' (no tuning)'}, server at nice ${NICE}${SCHED_IDLE ? ' (SCHED_IDLE)' : ''}${JS_FLAGS ? `, V8 ${JS_FLAGS}` : ''}: ms of the call / of its run (with threads, wN: ms the caller waited for parts workers held), and the server's CPU share (cores) around it`);
    rows.forEach((xs, c) => {
      const cells = [];
      for (let i = 0; i < xs.length; i += 2) cells.push(`${xs[i + 1]} ${during(xs[i]).toFixed(2)}`);
      console.log(`  ${CASES[c].join('x')}\t${cells.join('\t')}`);
    });
  } finally {
    await browser.close();
    proxy?.close();
    server.proc.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }
}
