// How SentenceEncoder groups texts into padded batches. Both targets use
// these buckets, so that their latency reports (per batch and padded length)
// compare on the server.

/**
 * Sequence-length buckets, capped at the model's max_seq_length rounded up
 * to a multiple of 4 (always a bucket; the fixed Wasm kernels run rows of
 * whole f32x4 vectors).
 */
export const LENGTHS = [8, 16, 32, 64, 128, 256, 512];

export const pow2 = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));

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
export function planBatches(lengths: number[], maxBatch: number, maxSeqLength: number): Batch[] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a] - lengths[b]);
  const top = Math.ceil(maxSeqLength / 4) * 4;
  const out: Batch[] = [];
  for (let at = 0; at < order.length; at += maxBatch) {
    const idx = order.slice(at, at + maxBatch);
    const longest = Math.max(...idx.map((i) => lengths[i]));
    out.push({ idx, b: pow2(idx.length), s: LENGTHS.find((l) => l >= longest && l <= top) ?? top });
  }
  return out;
}
