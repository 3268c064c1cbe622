// A whole model's tuning against the server's per-session rate limit, in
// headless Chromium: a page with many kernels (a model's worth) asks for a
// queue for each and reports each, more requests than the session's burst
// allows, on a server started with a low --rate-per-session. The limit is
// met (the server counts 429s), and yet every kernel is tuned and every
// report is stored: queues are opened again after the server's
// Retry-After (never more than four at once), and reports wait out the
// limit and go in batches, never dropped.
//
// Needs the server binary (WEBTUNE_BIN, default target/release/webtune) and
// Debian's chromium, as e2e.test.mjs does.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { BIN, CHROMIUM, launchChromium, startServer } from './harness.mjs';

/** Kernels on the page, each a queue and a report: more than the session's burst of 20. */
const KERNELS = 28;
/** Requests a minute per session (one every 3 s past the burst). */
const RATE = 20;

let server, work;

async function metrics() {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = {};
  for (const line of text.split('\n')) {
    const r = /^([a-z_]+) (\S+)$/.exec(line);
    if (r) m[r[1]] = Number(r[2]);
  }
  return m;
}

before(async () => {
  assert.ok(existsSync(BIN), `no server binary at ${BIN}: run cargo build -p webtune (or set WEBTUNE_BIN)`);
  assert.ok(CHROMIUM, 'no Chromium: apt-get install chromium (or set CHROMIUM)');
  work = mkdtempSync(join(tmpdir(), 'webtune-ratelimit-'));
  server = await startServer(join(work, 'r.sqlite'), ['--quorum', '1', '--rate-per-session', String(RATE)]);
});

after(() => {
  server?.proc.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

test(`${KERNELS} kernels tuned on a server that allows a session ${RATE} requests a minute: the limit is met, every kernel is reported`, { timeout: 420_000 }, async () => {
  const browser = await launchChromium(join(work, 'profile'));
  try {
    const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    // Queues streaming at once (the runtime opens at most four).
    let open = 0, maxOpen = 0;
    const isQueue = (r) => new URL(r.url()).pathname.endsWith('/queue');
    page.on('request', (r) => isQueue(r) && (maxOpen = Math.max(maxOpen, ++open)));
    page.on('requestfinished', (r) => isQueue(r) && open--);
    page.on('requestfailed', (r) => isQueue(r) && open--);
    await page.goto(`${server.url}/healthz`);
    const r = await page.evaluate(async ({ n }) => {
      const { Webtune } = await import('/web/webtune.js');
      const wt = await Webtune.open({ target: 'wasm', threads: 1, cache: false, maxCandidates: 2 });
      const reports = [];
      wt.addEventListener('report', (e) => reports.push({ shape: e.detail.shape, error: e.detail.error ?? null, entries: e.detail.entries }));
      // Shapes of one op that differ in M, K and N: a model's products.
      for (let i = 0; i < n; i++) await wt.wasmKernel('matmul', [4 + i, 16 + 8 * (i % 3), 16 + 8 * (i % 4)]);
      const t0 = performance.now();
      while (performance.now() - t0 < 360_000) {
        const r = await wt.idle(30);
        if (r.done) break;
        await new Promise((res) => setTimeout(res, r.worked ? 0 : 20));
      }
      const status = wt.status();
      return {
        s: (performance.now() - t0) / 1000, done: wt.done, reports,
        phases: status.map((x) => x.phase), evaluated: status.map((x) => x.evaluated),
        notes: status.flatMap((x) => x.notes).filter((x) => /queue|report/.test(x)).slice(0, 12),
      };
    }, { n: KERNELS });
    const m = await metrics();
    console.log(`# ${KERNELS} kernels tuned and reported in ${r.s.toFixed(1)} s at ${RATE} requests a minute: ` +
      `${m.webtune_rate_limited_total} requests answered 429, ${m.webtune_reports_accepted_total} reports stored, at most ${maxOpen} queues open at once; ` +
      `notes: ${JSON.stringify(r.notes)}`);
    assert.deepEqual(errors, []);
    assert.ok(r.done, `tuning did not finish: ${JSON.stringify(r.phases)}`);
    assert.ok(maxOpen <= 4, `${maxOpen} queues were open at once`);
    assert.ok(m.webtune_rate_limited_total >= 1, 'the session never met its limit: the test proves nothing');
    assert.ok(r.evaluated.every((e) => e >= 1), `a kernel was left untuned: ${JSON.stringify(r.evaluated)}`);
    assert.equal(r.reports.length, KERNELS, `reports: ${JSON.stringify(r.reports)}`);
    assert.deepEqual(r.reports.filter((x) => x.error || x.entries < 1), [], 'a report was lost or refused');
    assert.equal(m.webtune_reports_accepted_total, KERNELS);
    assert.equal(m.webtune_reports_rejected_total ?? 0, 0);
  } finally {
    await browser.close();
  }
});
