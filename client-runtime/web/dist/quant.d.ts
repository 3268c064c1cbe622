/** The largest |q| of a weight column over K terms: 2^⌊log2 √((2³¹−1)/K)⌋ − 1. */
export declare function qmaxW(k: number): number;
/** The largest |q| of an activation row over K terms: ⌊(2³¹−1) / (qmaxW(K)·K)⌋, at most 32767. */
export declare function qmaxA(k: number): number;
/** Rounds to the nearest integer, ties to even (as f32x4.nearest). */
export declare function roundHalfEven(v: number): number;
/**
 * Quantises `w` (f32 [k, n], row-major: k in, n out; k even) per column into
 * matmul_i16's B layout: `words` [k/2, n], word (p, j) holding q[2p][j] in
 * its low half and q[2p+1][j] in its high half, and `scales` [n].
 */
export declare function quantizeColumns(w: Float32Array, k: number, n: number, qmax: number, words: Uint32Array, scales: Float32Array): void;
/**
 * Quantises `x` (f32 [rows, k], k even) per row, as `quant_rows` does and as
 * the int16 blob holds `embeddings.word` (qmax 32767): `words` [rows, k/2],
 * word (r, p) holding q[r][2p] in its low half and q[r][2p+1] in its high
 * half, and `scales` [rows]. The value is f32(q) · scale.
 */
export declare function quantizeRows(x: Float32Array, rows: number, k: number, qmax: number, words: Uint32Array, scales: Float32Array): void;
