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
