// The dashboard in headless Chromium: a real `webtune serve` on a SQLite
// file filled by kernel-db's `dashboard_fill` example (3,000 reports over
// 72 hours on 12 device keys, rows written directly), plus one session
// opened and one lookup made through the API. The page's inline SVG charts
// must be there with the expected numbers of series, points, columns and
// bars and non-empty labels; the screenshot (artifacts/dashboard.png) must
// not be blank; pages past the end must say so.
//
// Needs: the server binary (WEBTUNE_BIN, default target/release/webtune),
// the filler (WEBTUNE_FILL_BIN, default
// target/release/examples/dashboard_fill: `cargo build --release -p
// webtune-kernel-db --example dashboard_fill`) and Debian's chromium.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { BIN, CHROMIUM, ROOT, launchChromium, startServer } from './harness.mjs';

const FILL = process.env.WEBTUNE_FILL_BIN ?? join(ROOT, 'target', 'release', 'examples', 'dashboard_fill');
const ARTIFACTS = join(ROOT, 'artifacts');
const REPORTS = 3000, KEYS = 12, HOURS = 72;
// The filler's vendors (key k has vendor k mod 5), and its kinds: two per
// target, so each key has two device-level winners.
const FILL_VENDORS = ['gpu-nvidia', 'gpu-amd', 'gpu-intel', 'cpu-x86', 'cpu-arm'];
const SERIES = KEYS * 2, PER_PAGE = 6;

let server, work, browser, page, session;

before(async () => {
  assert.ok(existsSync(BIN), `no server binary at ${BIN} (set WEBTUNE_BIN)`);
  assert.ok(existsSync(FILL), `no filler at ${FILL}: cargo build --release -p webtune-kernel-db --example dashboard_fill (or set WEBTUNE_FILL_BIN)`);
  assert.ok(CHROMIUM, 'no Chromium: apt-get install chromium (or set CHROMIUM)');
  work = mkdtempSync(join(tmpdir(), 'webtune-dashboard-'));
  const db = join(work, 'dash.sqlite');
  execFileSync(FILL, [db, String(REPORTS), String(KEYS), String(HOURS)], { stdio: 'pipe' });
  server = await startServer(db);
  // Through the API: a session (a new device) and a lookup.
  const fingerprint = { target: 'wasm', hardwareConcurrency: 8, simd: true, relaxedSimd: false, cpuArchitecture: 'x86', browser: { name: 'Chrome', version: '131.0' }, os: 'Linux' };
  const r = await fetch(`${server.url}/v1/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ fingerprint }) });
  assert.equal(r.status, 201);
  session = await r.json();
  const best = await fetch(`${server.url}/v1/kernels/best?device_key=${encodeURIComponent(session.device_key)}&op=matmul&shape=64,64,64&target=wasm`);
  assert.equal(best.status, 200);
  browser = await launchChromium(join(work, 'profile'));
  const context = browser.contexts()[0] ?? (await browser.newContext());
  page = await context.newPage();
  await page.setViewportSize({ width: 1100, height: 900 });
});

after(async () => {
  await browser?.close();
  server?.proc.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

/** What the page's charts hold, read from the DOM. */
function charts() {
  return page.evaluate(() => {
    const q = (sel) => [...document.querySelectorAll(sel)];
    // A bar label's own text, not its tooltip's (a nested <title>).
    const text = (sel) => q(sel).map((e) => (e.firstChild?.nodeType === Node.TEXT_NODE ? e.firstChild.textContent : e.textContent).trim());
    const heights = (id) => q(`#${id} rect.bar`).map((r) => Number(r.getAttribute('height')));
    return {
      svgs: q('svg.chart').map((s) => s.id),
      series: q('#convergence g.series').map((g) => ({ n: Number(g.dataset.points), circles: g.querySelectorAll('circle.pt').length, line: g.querySelector('polyline').getAttribute('points') })),
      convergenceLabels: text('#convergence text.label'),
      legend: text('#convergence-legend li'),
      reportCols: q('#reports-per-hour g.col').length,
      reportHeights: heights('reports-per-hour'),
      flagCols: q('#flags-per-hour g.col').length,
      flagHeights: heights('flags-per-hour'),
      hourLabels: text('#reports-per-hour text.label'),
      refused: q('#refused rect.bar').length,
      vendors: text('#devices-by-vendor text.label'),
      archs: q('#devices-by-arch rect.bar').length,
      barLabels: text('#devices-by-vendor text.label, #devices-by-arch text.label, #refused text.label'),
      pastEnd: !!document.querySelector('#past-end'),
      rows: q('#reports tr').length - 1,
    };
  });
}

test('the dashboard draws the crowd', async () => {
  const res = await page.goto(`${server.url}/dashboard`);
  assert.equal(res.status(), 200);
  const c = await charts();
  assert.deepEqual(c.svgs, ['convergence', 'reports-per-hour', 'flags-per-hour', 'refused', 'devices-by-vendor', 'devices-by-arch']);
  // Convergence: a page of 6 series of the 24, each several points (72
  // hours in buckets, at most 60), one circle per point, rising to > 1x.
  assert.equal(c.series.length, PER_PAGE);
  for (const s of c.series) {
    assert.ok(s.n >= 30 && s.n <= 60, `points per series: ${s.n}`);
    assert.equal(s.circles, s.n);
    assert.equal(s.line.split(' ').length, s.n);
  }
  assert.equal(c.legend.length, PER_PAGE);
  for (const l of c.legend) assert.match(l, /^matmul \S+ (wasm|wgsl) · \S+ — \d+ reports; vs .+ winner now .+×/);
  assert.ok(c.convergenceLabels.length >= 10 && c.convergenceLabels.every((t) => t.length > 0));
  assert.ok(c.convergenceLabels.some((t) => /×$/.test(t)), 'a y axis in ×');
  // Reports per hour: 48 columns, every one with reports (they are spread
  // evenly over 72 hours up to now), labelled every 6 hours.
  assert.equal(c.reportCols, 48);
  assert.equal(c.reportHeights.length, 48);
  assert.ok(c.reportHeights.filter((h) => h > 0).length >= 47, `columns with reports: ${c.reportHeights}`);
  assert.ok(c.hourLabels.filter((t) => /^\d\d-\d\d \d\d:00$/.test(t)).length === 8, `hour labels: ${c.hourLabels}`);
  // Flags: 48 columns of two layers; every 97th report brought a flag.
  assert.equal(c.flagCols, 48);
  assert.equal(c.flagHeights.length, 96);
  assert.ok(c.flagHeights.some((h) => h > 0));
  assert.equal(c.refused, 6);
  // Devices: the filler's five vendors and the session's own.
  const vendors = new Set([...FILL_VENDORS, session.vendor_key]);
  assert.deepEqual(new Set(c.vendors), vendors);
  assert.ok(c.archs >= 10 && c.archs <= 12, `arch bars: ${c.archs}`);
  assert.ok(c.barLabels.length > 0 && c.barLabels.every((t) => t.length > 0));
  assert.equal(c.rows, 50);
  assert.ok(!c.pastEnd);

  // The screenshot: the charts, not a blank page.
  mkdirSync(ARTIFACTS, { recursive: true });
  const png = await page.screenshot({ fullPage: true });
  writeFileSync(join(ARTIFACTS, 'dashboard.png'), png);
  const colours = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const cv = new OffscreenCanvas(img.width, img.height);
    const g = cv.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, img.width, img.height).data;
    const seen = new Set();
    for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    return { distinct: seen.size, width: img.width, height: img.height };
  }, png.toString('base64'));
  assert.ok(colours.distinct >= 50, `a blank screenshot? ${JSON.stringify(colours)}`);
  assert.ok(colours.height > 900, `the whole page: ${JSON.stringify(colours)}`);
});

test('pages: the last page of series, then past the end', async () => {
  const last = SERIES / PER_PAGE;
  await page.goto(`${server.url}/dashboard?page=${last}`);
  let c = await charts();
  assert.equal(c.series.length, PER_PAGE);
  assert.ok(!c.pastEnd);
  // Reports run to page 60 (3,000 / 50): page 5 has no series but reports.
  await page.goto(`${server.url}/dashboard?page=${last + 1}`);
  c = await charts();
  assert.equal(c.series.length, 0);
  assert.equal(c.rows, 50);
  const res = await page.goto(`${server.url}/dashboard?page=61`);
  assert.equal(res.status(), 200);
  c = await charts();
  assert.ok(c.pastEnd);
  assert.equal(c.series.length, 0);
  assert.equal(c.reportCols, 48, 'the hourly charts do not page');
  const bad = await page.goto(`${server.url}/dashboard?page=-1`);
  assert.equal(bad.status(), 400);
});
