// Robust summaries of timing samples.

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/** Relative noise of a sample set: 1.4826·MAD / median (a robust σ/μ). */
export function relNoise(xs: readonly number[]): number {
  const m = median(xs);
  if (!(m > 0)) return Infinity;
  return (1.4826 * median(xs.map((x) => Math.abs(x - m)))) / m;
}

/**
 * Whether `cand` is faster than `cur` by more than the measured noise: its
 * median must be lower by twice the combined relative noise of both sample
 * sets, and by at least `floor` (1 %), so that a swap is never made on noise.
 */
export function fasterBeyondNoise(cand: readonly number[], cur: readonly number[], floor = 0.01): boolean {
  const threshold = Math.max(floor, 2 * Math.hypot(relNoise(cand), relNoise(cur)));
  return median(cand) < median(cur) * (1 - threshold);
}

/**
 * A sign test over paired timings: whether the candidate took less than
 * (1 − floor) × the kernel in use's time in more pairs than chance allows
 * (one-sided, level `alpha`, binomial at ½), i.e. whether its median ratio
 * is below 1 − floor. Unlike a test on the mean log ratio, a few pairs
 * spoiled by another process's burst cannot hide a real gain.
 */
export function signFaster(cur: readonly number[], cand: readonly number[], floor = 0.01, alpha = 0.05): boolean {
  const n = Math.min(cur.length, cand.length);
  let wins = 0;
  for (let i = 0; i < n; i++) if (cand[i] < (1 - floor) * cur[i]) wins++;
  // P(X ≥ wins) for X ~ Binomial(n, ½).
  let tail = 0, c = 1;
  for (let k = 0; k <= n; k++) {
    if (k >= wins) tail += c;
    c = (c * (n - k)) / (k + 1);
  }
  return n > 0 && tail / 2 ** n <= alpha;
}
