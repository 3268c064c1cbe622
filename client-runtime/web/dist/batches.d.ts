/**
 * Sequence-length buckets, capped at the model's max_seq_length rounded up
 * to a multiple of 4 (always a bucket; the fixed Wasm kernels run rows of
 * whole f32x4 vectors).
 */
export declare const LENGTHS: number[];
export declare const pow2: (n: number) => number;
/** One padded batch: the texts' indices, `b` slots (a power of two) of `s` tokens. */
export interface Batch {
    idx: number[];
    b: number;
    s: number;
}
/**
 * The batches of texts with these token counts: sorted by length (ties in
 * input order), `maxBatch` at a time, the batch padded to a power of two
 * and the length to a bucket.
 */
export declare function planBatches(lengths: number[], maxBatch: number, maxSeqLength: number): Batch[];
