// Seeded kernel inputs, bit for bit the same as the server's
// `webtune_compiler::reference::inputs(op, seed)`: SplitMix64 draws, floats
// uniform in [-1, 1) and never near zero, q4 scales small and positive. The
// server recomputes a few outputs from the seed, so these must match exactly.
//
// Seeds are u64 (they arrive as decimal text, beyond a double's 53 bits);
// the generator works on 32-bit halves so it needs no BigInt in its loop.

import { type ArgSpec } from './ops.js';

/** NaN with a recognisable payload, written to outputs before a check run. */
export const POISON = 0x7fc0dead;

// (hi:lo) · (ch:cl) mod 2^64 into out[0] (high word) and out[1] (low word).
// The low words' 64-bit product is built from 16-bit pieces, each exact in
// a double. Results go through a Uint32Array, which wraps to 32 bits for
// free and keeps V8 from boxing numbers above 2^31 (this runs once per
// generated input, about a million times for a 384×768×768 matmul).
function mul64(out: Uint32Array, hi: number, lo: number, ch: number, cl: number): void {
  const a0 = lo & 0xffff, a1 = lo >>> 16, b0 = cl & 0xffff, b1 = cl >>> 16;
  const c1 = a1 * b0, c2 = a0 * b1; // each < 2^32
  const low = a0 * b0 + ((c1 & 0xffff) + (c2 & 0xffff)) * 65536; // < 2^34
  const l = low >>> 0;
  out[1] = l;
  // (low - l) / 2^32 is the exact carry out of the low word.
  out[0] = a1 * b1 + (c1 >>> 16) + (c2 >>> 16) + (low - l) / 4294967296 + Math.imul(hi, cl) + Math.imul(lo, ch);
}

/** SplitMix64, state kept as two unsigned 32-bit halves. */
export class SplitMix64 {
  // [state hi, state lo, last draw hi, last draw lo]
  private s = new Uint32Array(4);
  private m = new Uint32Array(2);

  constructor(seed: bigint) {
    const x = BigInt.asUintN(64, seed) ^ 0x9e3779b97f4a7c15n;
    this.s[0] = Number(x >> 32n);
    this.s[1] = Number(x & 0xffffffffn);
  }

  /** High 32 bits of the last draw. */
  get outHi(): number {
    return this.s[2];
  }

  /** Low 32 bits of the last draw. */
  get outLo(): number {
    return this.s[3];
  }

  /** Draws the next 64 bits into `outHi`/`outLo`. */
  next(): void {
    const s = this.s, m = this.m;
    const lo = s[1] + 0x7f4a7c15;
    s[0] = s[0] + 0x9e3779b9 + (lo > 0xffffffff ? 1 : 0);
    s[1] = lo;
    let h = s[0], l = s[1];
    // z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    mul64(m, (h ^ (h >>> 30)) >>> 0, (l ^ ((l >>> 30) | (h << 2))) >>> 0, 0xbf58476d, 0x1ce4e5b9);
    h = m[0];
    l = m[1];
    // z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    mul64(m, (h ^ (h >>> 27)) >>> 0, (l ^ ((l >>> 27) | (h << 5))) >>> 0, 0x94d049bb, 0x133111eb);
    h = m[0];
    l = m[1];
    // z ^ (z >> 31)
    s[2] = h ^ (h >>> 31);
    s[3] = l ^ ((l >>> 31) | (h << 1));
  }

  /** Full 64-bit draw as a BigInt (for tests). */
  nextBig(): bigint {
    this.next();
    return (BigInt(this.outHi) << 32n) | BigInt(this.outLo);
  }
}

/** Uniform in [-1, 1) from the top 24 bits, with magnitude at least 1/64. */
function nonzero(hi: number): number {
  const x = (2 * (hi >>> 8)) / 16777216 - 1; // exact in f32
  return Math.abs(x) < 1 / 64 ? 0.5 : x;
}

const TENTH = Math.fround(0.1);
const HUNDREDTH = Math.fround(0.01);

/**
 * Fills the inputs of an op from a seed, in slices, so a large kernel's
 * inputs can be generated across several idle slots.
 */
export class InputGen {
  private rng: SplitMix64;
  private arg = 0;
  private pos = 0;
  readonly args: Uint32Array<ArrayBuffer>[];

  /** `specs` are all arguments; the last (the output) is not generated. */
  constructor(private specs: ArgSpec[], seed: bigint) {
    this.rng = new SplitMix64(seed);
    this.args = specs.slice(0, -1).map((s) => new Uint32Array(s.elems));
  }

  get done(): boolean {
    return this.arg >= this.args.length;
  }

  /** Generates up to `n` more words; returns true when all are there. */
  fill(n: number): boolean {
    const rng = this.rng;
    while (n > 0 && !this.done) {
      const out = this.args[this.arg];
      const s = this.specs[this.arg];
      const end = Math.min(out.length, this.pos + n);
      n -= end - this.pos;
      if (s.dtype === 'u32') {
        for (let i = this.pos; i < end; i++) {
          rng.next();
          out[i] = rng.outLo;
        }
      } else {
        // Stored through a float view: the f32 rounding is the store's.
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        if (s.name === 'S') {
          for (let i = this.pos; i < end; i++) {
            rng.next();
            f[i] = Math.fround(Math.abs(nonzero(rng.outHi)) * TENTH) + HUNDREDTH;
          }
        } else {
          for (let i = this.pos; i < end; i++) {
            rng.next();
            f[i] = nonzero(rng.outHi);
          }
        }
      }
      this.pos = end;
      if (end === out.length) {
        this.arg++;
        this.pos = 0;
      }
    }
    return this.done;
  }
}

/** All inputs at once (tests and small ops). */
export function seededInputs(specs: ArgSpec[], seed: bigint): Uint32Array<ArrayBuffer>[] {
  const g = new InputGen(specs, seed);
  g.fill(Infinity);
  return g.args;
}
