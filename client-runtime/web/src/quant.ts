// SentenceEncoder's `precision: 'int16'` (Wasm): the symmetric 16-bit
// quantisation that feeds `matmul_i16` (ops.ts has its argument layout).
// Weights are quantised per output column (here at load, or by
// `webtune model import` into the bundle's int16 blob); activations per row
// at run time by the fixed kernel `quant_rows` (encoder-kernels.wat); the
// int16 blob's word embeddings per row with qmax 32767 (`quantizeRows`, read
// by `embed_q16`). All with the same rule: scale = max |x| / qmax in f32 (0 for all zeros, whose
// q are then 0), q = x · (qmax / max |x|) in f32 rounded half to even,
// clamped to ±qmax.
//
// The two qmax keep every sum of K products inside i32, so the kernel's
// wrapping accumulation is exact: qmaxA(K)·qmaxW(K)·K < 2³¹. The weights get
// the larger share of the bits, a power of two less one (K = 384: 2047 for
// the weights and 2732 for the activations; K = 1536: 1023 and 1366).

const I32_MAX = 2 ** 31 - 1;

/** The largest |q| of a weight column over K terms: 2^⌊log2 √((2³¹−1)/K)⌋ − 1. */
export function qmaxW(k: number): number {
  return 2 ** Math.floor(Math.log2(Math.sqrt(I32_MAX / k))) - 1;
}

/** The largest |q| of an activation row over K terms: ⌊(2³¹−1) / (qmaxW(K)·K)⌋, at most 32767. */
export function qmaxA(k: number): number {
  return Math.min(32767, Math.floor(I32_MAX / (qmaxW(k) * k)));
}

/** Rounds to the nearest integer, ties to even (as f32x4.nearest). */
export function roundHalfEven(v: number): number {
  const r = Math.round(v); // ties toward +∞
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * Quantises `w` (f32 [k, n], row-major: k in, n out; k even) per column into
 * matmul_i16's B layout: `words` [k/2, n], word (p, j) holding q[2p][j] in
 * its low half and q[2p+1][j] in its high half, and `scales` [n].
 */
export function quantizeColumns(w: Float32Array, k: number, n: number, qmax: number, words: Uint32Array, scales: Float32Array): void {
  const mx = new Float32Array(n);
  for (let kk = 0; kk < k; kk++) for (let j = 0; j < n; j++) mx[j] = Math.max(mx[j], Math.abs(w[kk * n + j]));
  for (let j = 0; j < n; j++) scales[j] = mx[j] / qmax; // the store rounds to f32, as f32.div does
  // Values are multiplied by qmax / max in f32; a column of zeros by 0.
  const inv = new Float32Array(n);
  for (let j = 0; j < n; j++) inv[j] = mx[j] > 0 ? qmax / mx[j] : 0;
  for (let kk = 0; kk < k; kk++) {
    const row = kk * n, at = (kk >> 1) * n, hi = kk & 1;
    for (let j = 0; j < n; j++) {
      const v = Math.max(-qmax, Math.min(qmax, roundHalfEven(Math.fround(w[row + j] * inv[j]))));
      if (hi) words[at + j] = (words[at + j] | (v << 16)) >>> 0;
      else words[at + j] = v & 0xffff;
    }
  }
}

/**
 * Quantises `x` (f32 [rows, k], k even) per row, as `quant_rows` does and as
 * the int16 blob holds `embeddings.word` (qmax 32767): `words` [rows, k/2],
 * word (r, p) holding q[r][2p] in its low half and q[r][2p+1] in its high
 * half, and `scales` [rows]. The value is f32(q) · scale.
 */
export function quantizeRows(x: Float32Array, rows: number, k: number, qmax: number, words: Uint32Array, scales: Float32Array): void {
  for (let r = 0; r < rows; r++) {
    let mx = 0;
    for (let j = 0; j < k; j++) mx = Math.max(mx, Math.abs(x[r * k + j]));
    scales[r] = mx / qmax;
    const inv = mx > 0 ? Math.fround(qmax / mx) : 0;
    for (let j = 0; j < k; j += 2) {
      const q = (v: number) => Math.max(-qmax, Math.min(qmax, roundHalfEven(Math.fround(v * inv))));
      words[r * (k / 2) + j / 2] = ((q(x[r * k + j]) & 0xffff) | (q(x[r * k + j + 1]) << 16)) >>> 0;
    }
  }
}
