// How TextGenerator picks the next token from the logits: the rule of the
// native runner's `webtune_client_runtime::decoder::Sampler`, ported bit for
// bit, so that the same seed draws the same tokens in the browser and in
// `webtune generate` (test/golden/sampler.json pins both):
//
// - temperature 0 (or less): greedy, the first largest logit;
// - otherwise the ids sorted by logit, largest first (IEEE total order, ties
//   by id), cut to the top k (0: all), weights e^((l - l_max) / T) in f64,
//   cut again to the smallest head whose share of the total reaches top_p
//   (1: all), then one uniform draw of SplitMix64 in [0, 1), times the kept
//   weights' total, walks the kept ids until it falls below one's weight.
//
// Temperature and top_p are f32 in the native struct: they are rounded to
// f32 here first. The sums run in the same order as in Rust; `Math.exp` and
// Rust's `exp` may differ in the last bit of an f64 on rare arguments, which
// could only change a draw that falls within about 1e-16 of a boundary.

const MASK = (1n << 64n) - 1n;

/** What `TextGenerator.generate` samples with (see the file's header). */
export interface Sampling {
  /** 0: greedy and deterministic. */
  temperature: number;
  /** Keep only the k most likely tokens; 0: all. */
  topK: number;
  /** Keep the smallest set of most likely tokens whose probability reaches p; 1: all. */
  topP: number;
  /** The draws' seed (a u64: a bigint, or a non-negative integer number). */
  seed: bigint | number;
}

/** The index of the first largest value (NaN never wins). */
export function argmax(logits: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/** A seed as the native u64: a bigint or a safe non-negative integer; throws one line otherwise. */
export function seedOf(seed: bigint | number): bigint {
  if (typeof seed === 'bigint') {
    if (seed < 0n || seed > MASK) throw new RangeError(`seed ${seed} is not a u64 (0 to 2^64 - 1)`);
    return seed;
  }
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed) || seed < 0)
    throw new RangeError(`seed must be a non-negative integer (a bigint above 2^53), got ${String(seed)}`);
  return BigInt(seed);
}

export class Sampler {
  private state: bigint;
  /** The sort's keys and order, kept between draws (one vocabulary's worth). */
  private keys = new Float64Array(0);

  constructor(readonly sampling: Sampling) {
    this.state = seedOf(sampling.seed);
  }

  /** The next SplitMix64 draw in [0, 1) (53 bits). */
  uniform(): number {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  }

  /** Whether tokens are drawn (temperature above 0), not greedy. */
  get draws(): boolean {
    return Math.fround(this.sampling.temperature) > 0;
  }

  /** The next token. */
  sample(logits: Float32Array): number {
    if (!this.draws) return argmax(logits);
    return this.pick(logits, this.uniform());
  }

  /**
   * The token that the draw `draw` (in [0, 1), from `uniform`) picks from
   * `logits` by the sampling rule (temperature above 0): `sample` with the
   * draw made elsewhere (the WebGPU backend makes it on the host and picks
   * on the GPU, or here when the GPU cannot).
   */
  pick(logits: Float32Array, draw: number): number {
    const s = this.sampling;
    const temperature = Math.fround(s.temperature);
    const n = logits.length;
    // Rust's `total_cmp` order as one number per id: the f32's bits made
    // monotonic (negative values' magnitude bits flipped), negated so that
    // an ascending sort puts the largest first, times 2^17 plus the id, so
    // that ties keep ids in order. |key| < 2^31 and id < 2^17: exact in f64.
    if (n >= 1 << 17) throw new RangeError(`sampling a vocabulary of ${n} ids: at most 131071`);
    if (this.keys.length !== n) this.keys = new Float64Array(n);
    const bits = new Int32Array(logits.buffer, logits.byteOffset, n);
    const keys = this.keys;
    for (let i = 0; i < n; i++) {
      const b = bits[i];
      keys[i] = -(b ^ ((b >> 31) >>> 1)) * 131072 + i;
    }
    keys.sort();
    const id = (j: number) => {
      const k = keys[j];
      return k - Math.floor(k / 131072) * 131072;
    };
    const len = s.topK > 0 ? Math.min(s.topK, n) : n;
    const top = logits[id(0)];
    const p = new Float64Array(len);
    let total = 0;
    for (let j = 0; j < len; j++) {
      p[j] = Math.exp((logits[id(j)] - top) / temperature);
      total += p[j];
    }
    let keep = len;
    const topP = Math.fround(s.topP);
    if (topP < 1) {
      let acc = 0;
      for (let j = 0; j < len; j++) {
        acc += p[j] / total;
        if (acc >= topP) {
          keep = j + 1;
          break;
        }
      }
    }
    total = 0;
    for (let j = 0; j < keep; j++) total += p[j];
    let u = draw * total;
    for (let j = 0; j < keep; j++) {
      if (u < p[j]) return id(j);
      u -= p[j];
    }
    return id(keep - 1);
  }
}
