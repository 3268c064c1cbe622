// The resolution of performance.now() on this page: 100 µs on a plain page in
// Chromium, 5 µs on a cross-origin-isolated one, coarser with some privacy
// settings. Samples are sized from it.

let cached = 0;

export function timerResolutionMs(): number {
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
