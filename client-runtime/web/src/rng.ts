// Seeded kernel inputs, bit for bit the same as the server's
// `webtune_compiler::reference::inputs(op, seed)`: SplitMix64 draws, floats
// uniform in [-1, 1) and never near zero, q4 scales (and +rms_norm's E) small and positive, +merge's PL in (1, 2),
// matmul_i16's words two non-zero 16-bit values within ±i16_bound(K), f16
// arguments' values rounded to f16 (still held as f32 bits here). The
// server recomputes a few outputs from the seed, so these must match exactly.
//
// Seeds are u64 (they arrive as decimal text, beyond a double's 53 bits);
// the generator works on 32-bit halves so it needs no BigInt in its loop.

import { type ArgSpec, f16Round } from './ops.js';

/** NaN with a recognisable payload, written to outputs before a check run. */
export const POISON = 0x7fc0dead;
/** The same for an f16 output: an f16 NaN. */
export const POISON_F16 = 0x7ead;

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

  /** The 64-bit state, for the Wasm filler to go on from. */
  get state(): bigint {
    return (BigInt(this.s[0]) << 32n) | BigInt(this.s[1]);
  }

  set state(x: bigint) {
    this.s[0] = Number(BigInt.asUintN(64, x) >> 32n);
    this.s[1] = Number(x & 0xffffffffn);
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

/**
 * A matmul_i16 test word from a raw 32-bit draw: each 16-bit half h becomes
 * `h mod (2r+1) − r`, and 1 where that is 0. Mirrors `reference::i16_word`.
 */
export function i16Word(raw: number, r: number): number {
  const half = (h: number) => (h % (2 * r + 1)) - r || 1;
  return ((half(raw & 0xffff) & 0xffff) | (half(raw >>> 16) << 16)) >>> 0;
}

const TENTH = Math.fround(0.1);
const HUNDREDTH = Math.fround(0.01);

// The same generator as a tiny Wasm function on native i64 arithmetic, about
// ten times faster than the 32-bit halves above: fill(state, from, to, mode)
// writes one word per draw at byte offsets [from, to) of its own memory and
// returns the new state. Modes: 0 the draw's low word (u32 data), 1 a
// `nonzero` f32 of its high word, 2 a q4 scale. Its bytes are built here
// (no file to fetch); the JS path stays for engines without Wasm or BigInt
// integration, and the tests compare the two.

const CHUNK_WORDS = 1 << 15;

function sleb(v: bigint): number[] {
  const out: number[] = [];
  for (;;) {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    const last = (v === 0n && !(b & 0x40)) || (v === -1n && (b & 0x40) !== 0);
    out.push(last ? b : b | 0x80);
    if (last) return out;
  }
}

function f64(x: number): number[] {
  const d = new DataView(new ArrayBuffer(8));
  d.setFloat64(0, x, true);
  return [...new Uint8Array(d.buffer)];
}

function fillerBytes(): Uint8Array<ArrayBuffer> {
  const i64 = (v: bigint) => [0x42, ...sleb(BigInt.asIntN(64, v))];
  const get = (i: number) => [0x20, i], set = (i: number) => [0x21, i], tee = (i: number) => [0x22, i];
  // Locals: 0 x (i64), 1 p, 2 end, 3 mode (i32); 4 z (i64), 5 hi (i32), 6 f (f64).
  const body = [
    0x02, 0x40, 0x03, 0x40,
    ...get(1), ...get(2), 0x4f, 0x0d, 1, // p >= end: out
    ...get(0), ...i64(0x9e3779b97f4a7c15n), 0x7c, ...tee(0),
    ...get(0), ...i64(30n), 0x88, 0x85, ...i64(0xbf58476d1ce4e5b9n), 0x7e, ...tee(4),
    ...get(4), ...i64(27n), 0x88, 0x85, ...i64(0x94d049bb133111ebn), 0x7e, ...tee(4),
    ...get(4), ...i64(31n), 0x88, 0x85, ...set(4),
    ...get(3), 0x45, 0x04, 0x40,
    ...get(1), ...get(4), 0xa7, 0x36, 2, 0, // i32.store of the low word
    0x05,
    ...get(4), ...i64(32n), 0x88, 0xa7, ...set(5),
    ...get(5), 0x41, 8, 0x76, 0xb8, 0x44, ...f64(2), 0xa2, 0x44, ...f64(16777216), 0xa3, 0x44, ...f64(1), 0xa1, ...set(6),
    ...get(6), 0x99, 0x44, ...f64(1 / 64), 0x63, 0x04, 0x40, 0x44, ...f64(0.5), ...set(6), 0x0b,
    ...get(3), 0x41, 2, 0x46, 0x04, 0x40,
    ...get(6), 0x99, 0x44, ...f64(TENTH), 0xa2, 0xb6, 0xbb, 0x44, ...f64(HUNDREDTH), 0xa0, ...set(6),
    0x0b,
    ...get(1), ...get(6), 0xb6, 0x38, 2, 0, // f32.store
    0x0b,
    ...get(1), 0x41, 4, 0x6a, ...set(1),
    0x0c, 0, 0x0b, 0x0b,
    ...get(0), 0x0b,
  ];
  const func = [3, 1, 0x7e, 1, 0x7f, 1, 0x7c, ...body];
  const section = (id: number, content: number[]) => [id, ...uleb(content.length), ...content];
  const name = (s: string) => [s.length, ...[...s].map((c) => c.charCodeAt(0))];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...section(1, [1, 0x60, 4, 0x7e, 0x7f, 0x7f, 0x7f, 1, 0x7e]),
    ...section(3, [1, 0]),
    ...section(5, [1, 0, (CHUNK_WORDS * 4) / 65536]),
    ...section(7, [2, ...name('fill'), 0, 0, ...name('mem'), 2, 0]),
    ...section(10, [1, ...uleb(func.length), ...func]),
  ]);
}

function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    const b = n & 0x7f;
    n >>>= 7;
    out.push(n ? b | 0x80 : b);
  } while (n);
  return out;
}

type Filler = { fill: (state: bigint, from: number, to: number, mode: number) => bigint; mem: WebAssembly.Memory };
let filler: Filler | null | undefined;

/** The Wasm filler, or null where it cannot run (it is made once, synchronously: the module is tiny). */
export function wasmFiller(): Filler | null {
  if (filler !== undefined) return filler;
  try {
    const inst = new WebAssembly.Instance(new WebAssembly.Module(fillerBytes()));
    filler = inst.exports as unknown as Filler;
    filler.fill(0n, 0, 0, 0);
  } catch {
    filler = null;
  }
  return filler;
}

/**
 * Fills the inputs of an op from a seed, in slices, so a large kernel's
 * inputs can be generated across several idle slots.
 */
export class InputGen {
  private rng: SplitMix64;
  private arg = 0;
  private pos = 0;
  readonly args: Uint32Array<ArrayBuffer>[];

  /** `specs` are all arguments; the last (the output) is not generated. `useWasm`: false forces the JS path. */
  constructor(private specs: ArgSpec[], seed: bigint, private useWasm = true) {
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
      const w = this.useWasm ? wasmFiller() : null;
      const end = Math.min(out.length, this.pos + Math.min(n, w ? CHUNK_WORDS : n));
      n -= end - this.pos;
      if (w) {
        const mode = s.dtype === 'u32' ? 0 : s.name === 'S' || s.name === 'D' || s.name === 'E' ? 2 : 1;
        rng.state = w.fill(rng.state, 0, (end - this.pos) * 4, mode);
        out.set(new Uint32Array(w.mem.buffer, 0, end - this.pos), this.pos);
      } else if (s.dtype === 'u32') {
        for (let i = this.pos; i < end; i++) {
          rng.next();
          out[i] = rng.outLo;
        }
      } else {
        // Stored through a float view: the f32 rounding is the store's.
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        if (s.name === 'S' || s.name === 'D' || s.name === 'E') {
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
      if (s.name === 'Mn') {
        // matmul_q4_1's minimums: −D·(7.5 + x/2) of the same block's scale D
        // (the argument before), from the nonzero x drawn above. Mirrors
        // `webtune_compiler::reference::inputs`.
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        const d = new Float32Array(this.args[this.arg - 1].buffer);
        for (let i = this.pos; i < end; i++) f[i] = -d[i] * Math.fround(7.5 + 0.5 * f[i]);
      }
      if (s.name === 'PL') {
        // +merge's part sums: 1.5 + x/2, in (1, 2), from the nonzero x drawn
        // above. Mirrors `webtune_compiler::reference::inputs`.
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        for (let i = this.pos; i < end; i++) f[i] = Math.fround(1.5 + 0.5 * f[i]);
      }
      if (s.i16Bound !== undefined) for (let i = this.pos; i < end; i++) out[i] = i16Word(out[i], s.i16Bound);
      if (s.dtype === 'f16') {
        const f = new Float32Array(out.buffer, out.byteOffset, out.length);
        for (let i = this.pos; i < end; i++) f[i] = f16Round(f[i]);
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
