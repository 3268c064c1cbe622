// The text generator's fixed WebGPU kernels: everything of a decoder graph's
// run that is not a matrix product (those are webtune's tuned WGSL kernels
// of matmul_q4_1, matmul_q8_0, matmul_q4 and matmul), plus the sampling of
// the next token. The WebGPU twin of decoder-kernels.wat (the same rules,
// step by step); decoder-gpu.ts runs them.
//
// One entry point per kernel. Binding 0 is the run's parameters (R: the
// real rows T, the first position, the sampling draw), written once per
// run; binding 1 the step's own (S, fixed when a bucket's bind groups are
// made); the others are the kernel's buffers (numbers reused across entry
// points, each pipeline's layout is its own). A kernel's grid is made for
// the bucket's M rows (y: one row a workgroup row) and every workgroup of a
// row past R.t returns at once, so that one recorded command buffer serves
// every run of the bucket, whatever its T, and no kernel depends on the
// context's length: attention reads its length from R.
//
// Lengths are counts of floats. Every row length is a multiple of 4 and
// every part's binding holds what the kernel reads (decoder-gpu.ts checks).

struct Run {
  // Real rows of this run (T, at most the bucket's M); position of the first.
  t: u32,
  pos0: u32,
  // Sampling: the draw in [0, 1) (SplitMix64's, from the host), the
  // temperature (0: greedy), top-k (0: all) and top-p (1: all).
  u: f32,
  temperature: f32,
  top_k: u32,
  top_p: f32,
}

// A step's parameters: their meaning per kernel is written beside it.
struct Step {
  n0: u32,
  n1: u32,
  n2: u32,
  n3: u32,
  n4: u32,
  n5: u32,
  f0: f32,
  f1: f32,
}

@group(0) @binding(0) var<uniform> R: Run;
@group(0) @binding(1) var<uniform> S: Step;

// Threads of a workgroup: EW for the element-wise kernels, RW for a row
// reduction (rms_norm), AW for attention, SW for sampling.
const EW: u32 = 64u;
const RW: u32 = 128u;

// ---------------------------------------------------------------- embed
// One row of h floats per id of ids[0..T): grid (⌈h/EW⌉, M).
// embed_q8: S.n0 = h; the q8_0 table, i8 bytes [V][h] as words, scales d
// [V][h/32]: out[r][k] = d[id][k/32]·q[id][k].
@group(0) @binding(2) var<storage, read> eq8_ids: array<u32>;
@group(0) @binding(3) var<storage, read> eq8_w: array<u32>;
@group(0) @binding(4) var<storage, read> eq8_d: array<f32>;
@group(0) @binding(5) var<storage, read_write> eq8_out: array<f32>;

@compute @workgroup_size(EW)
fn embed_q8(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = g.y;
  let k = g.x;
  let h = S.n0;
  if (r >= R.t || k >= h) {
    return;
  }
  let id = eq8_ids[r];
  let at = id * h + k;
  let q = extractBits(bitcast<i32>(eq8_w[at / 4u]), (at % 4u) * 8u, 8u);
  eq8_out[r * h + k] = f32(q) * eq8_d[id * (h / 32u) + k / 32u];
}

// embed_q4: S.n0 = h, S.n1 = 1 for q4_1 (a minimum m per block), 0 for q4_0;
// words [V][h/8] (k = 8i + s in bits 4s..4s+3 of word i), scales d and
// minimums m [V][h/32] (q4_0 binds d again as m): out = d·q + m, or
// d·q + d·(−8) for q4_0 (the Wasm kernel's order).
@group(0) @binding(2) var<storage, read> eq4_ids: array<u32>;
@group(0) @binding(3) var<storage, read> eq4_w: array<u32>;
@group(0) @binding(4) var<storage, read> eq4_d: array<f32>;
@group(0) @binding(5) var<storage, read> eq4_m: array<f32>;
@group(0) @binding(6) var<storage, read_write> eq4_out: array<f32>;

@compute @workgroup_size(EW)
fn embed_q4(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = g.y;
  let k = g.x;
  let h = S.n0;
  if (r >= R.t || k >= h) {
    return;
  }
  let id = eq4_ids[r];
  let blk = id * (h / 32u) + k / 32u;
  let sc = eq4_d[blk];
  var mn = sc * -8.0;
  if (S.n1 == 1u) {
    mn = eq4_m[blk];
  }
  let q = (eq4_w[id * (h / 8u) + k / 8u] >> ((k % 8u) * 4u)) & 15u;
  eq4_out[r * h + k] = sc * f32(q) + mn;
}

// embed_f32: S.n0 = h, S.n1 = V; the table stored transposed, [h][V] (the B
// of the output head's matmul): out[r][k] = w[k·V + id].
@group(0) @binding(2) var<storage, read> ef_ids: array<u32>;
@group(0) @binding(3) var<storage, read> ef_w: array<f32>;
@group(0) @binding(4) var<storage, read_write> ef_out: array<f32>;

@compute @workgroup_size(EW)
fn embed_f32(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = g.y;
  let k = g.x;
  let h = S.n0;
  if (r >= R.t || k >= h) {
    return;
  }
  ef_out[r * h + k] = ef_w[k * S.n1 + ef_ids[r]];
}

// ---------------------------------------------------------------- rms_norm
// out[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ w, one workgroup a row: grid
// (1, M). S.n0 = h, S.n1 = 1 for `last` (grid (1, 1): x's row T − 1 into
// out's row 0), S.f0 = eps. x and out are separate buffers.
@group(0) @binding(2) var<storage, read> rn_x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> rn_w: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> rn_out: array<vec4<f32>>;

// The row sums of squares: four floats a thread (a row is a multiple of 4
// floats), RW threads, so that a 576-float row is two loads a thread.
var<workgroup> red: array<f32, RW>;

// Σ red[0..RW) into red[0], every thread's share in red[lid] first.
fn row_sum(lid: u32) -> f32 {
  workgroupBarrier();
  for (var k = RW / 2u; k > 0u; k >>= 1u) {
    if (lid < k) {
      red[lid] += red[lid + k];
    }
    workgroupBarrier();
  }
  return red[0];
}

@compute @workgroup_size(RW)
fn rms_norm(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  var r = wid.y;
  var o = wid.y;
  if (S.n1 == 1u) {
    r = R.t - 1u;
    o = 0u;
  }
  if (r >= R.t) {
    return;
  }
  let h4 = S.n0 / 4u;
  var acc = 0.0;
  for (var i = lid; i < h4; i += RW) {
    let v = rn_x[r * h4 + i];
    acc += dot(v, v);
  }
  red[lid] = acc;
  let inv = 1.0 / sqrt(row_sum(lid) / f32(S.n0) + S.f0);
  for (var i = lid; i < h4; i += RW) {
    rn_out[o * h4 + i] = rn_x[r * h4 + i] * inv * rn_w[i];
  }
}

// add_rms_norm: an `add` (x += y) and the `rms_norm` of the same x that
// follows it, as one dispatch: grid (1, M), one workgroup a row; every real
// row is added, and normalised into out's row (S.n1 = 1, the norm's `last`:
// only row T − 1, into out's row 0). S.n0 = h, S.f0 = eps. The same
// arithmetic as the two steps.
@group(0) @binding(2) var<storage, read> arn_y: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> arn_w: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> arn_x: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> arn_out: array<vec4<f32>>;

@compute @workgroup_size(RW)
fn add_rms_norm(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let r = wid.y;
  if (r >= R.t) {
    return;
  }
  let h4 = S.n0 / 4u;
  var acc = 0.0;
  for (var i = lid; i < h4; i += RW) {
    let v = arn_x[r * h4 + i] + arn_y[r * h4 + i];
    arn_x[r * h4 + i] = v;
    acc += dot(v, v);
  }
  red[lid] = acc;
  let inv = 1.0 / sqrt(row_sum(lid) / f32(S.n0) + S.f0);
  if (S.n1 == 1u && r != R.t - 1u) {
    return;
  }
  var o = r;
  if (S.n1 == 1u) {
    o = 0u;
  }
  for (var i = lid; i < h4; i += RW) {
    arn_out[o * h4 + i] = arn_x[r * h4 + i] * inv * arn_w[i];
  }
}

// ---------------------------------------------------------------- rope
// Rotary position embedding on adjacent pairs, in place: in each of the
// first S.n1 heads of S.n2 floats of each row (rows S.n0 floats apart),
// pair i (x[2i], x[2i+1]) of the row at position pos0 + r turns by the
// angle whose (cos, sin) are table[(pos0 + r)·hd + 2i, +1] (computed in f64
// by the host, rounded to f32). One thread a pair: grid (⌈heads·hd/2/EW⌉, M).
@group(0) @binding(2) var<storage, read> rope_table: array<f32>;
@group(0) @binding(3) var<storage, read_write> rope_x: array<f32>;

@compute @workgroup_size(EW)
fn rope(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = g.y;
  let hd = S.n2;
  let half = hd / 2u;
  if (r >= R.t || g.x >= S.n1 * half) {
    return;
  }
  let head = g.x / half;
  let i = g.x % half;
  let at = r * S.n0 + head * hd + 2u * i;
  let tab = (R.pos0 + r) * hd + 2u * i;
  let c = rope_table[tab];
  let s = rope_table[tab + 1u];
  let a = rope_x[at];
  let b = rope_x[at + 1u];
  rope_x[at] = a * c + b * -s;
  rope_x[at + 1u] = b * c + a * s;
}

// ---------------------------------------------------------------- kv_store
// Copies S.n3 floats at column S.n1 (keys) and S.n2 (values) of each row
// (rows S.n0 floats apart) into the caches' rows pos0 + r, each S.n3
// floats: grid (⌈width/EW⌉, M).
@group(0) @binding(2) var<storage, read> kv_x: array<f32>;
@group(0) @binding(3) var<storage, read_write> kv_k: array<f32>;
@group(0) @binding(4) var<storage, read_write> kv_v: array<f32>;

@compute @workgroup_size(EW)
fn kv_store(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = g.y;
  let i = g.x;
  let w = S.n3;
  if (r >= R.t || i >= w) {
    return;
  }
  let src = r * S.n0;
  let dst = (R.pos0 + r) * w + i;
  kv_k[dst] = kv_x[src + S.n1 + i];
  kv_v[dst] = kv_x[src + S.n2 + i];
}

// rope_kv: a `rope` and the `kv_store` of the same rows that follows it, as
// one dispatch, where the keys lie inside the turned heads (whole pairs)
// and the values outside them: thread p < heads·hd/2 turns pair p (rope's
// rule) and, if it is a key's, stores it in the key cache too; the next
// width/2 threads copy a pair of values. Grid (⌈(heads·hd + width)/2/EW⌉,
// M). S.n0 = stride, S.n1 = heads, S.n2 = hd, S.n3 = width, S.n4 = the
// keys' column, S.n5 = the values'.
@group(0) @binding(2) var<storage, read> rkv_table: array<f32>;
@group(0) @binding(3) var<storage, read_write> rkv_x: array<f32>;
@group(0) @binding(4) var<storage, read_write> rkv_k: array<f32>;
@group(0) @binding(5) var<storage, read_write> rkv_v: array<f32>;

@compute @workgroup_size(EW)
fn rope_kv(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = g.y;
  let hd = S.n2;
  let half = hd / 2u;
  let pairs = S.n1 * half;
  let w = S.n3;
  if (r >= R.t || g.x >= pairs + w / 2u) {
    return;
  }
  let row = r * S.n0;
  let dst = (R.pos0 + r) * w;
  if (g.x >= pairs) {
    let j = 2u * (g.x - pairs);
    rkv_v[dst + j] = rkv_x[row + S.n5 + j];
    rkv_v[dst + j + 1u] = rkv_x[row + S.n5 + j + 1u];
    return;
  }
  let head = g.x / half;
  let i = g.x % half;
  let col = head * hd + 2u * i;
  let tab = (R.pos0 + r) * hd + 2u * i;
  let c = rkv_table[tab];
  let s = rkv_table[tab + 1u];
  let a = rkv_x[row + col];
  let b = rkv_x[row + col + 1u];
  let a2 = a * c + b * -s;
  let b2 = b * c + a * s;
  rkv_x[row + col] = a2;
  rkv_x[row + col + 1u] = b2;
  if (col >= S.n4 && col < S.n4 + w) {
    rkv_k[dst + col - S.n4] = a2;
    rkv_k[dst + col - S.n4 + 1u] = b2;
  }
}

// ---------------------------------------------------------------- attention
// Causal grouped-query attention. Query head h of row r (at column h·hd of
// the row, rows S.n0 floats apart) attends to cache positions 0..=pos0+r
// of key/value head h / G, G = heads / kv_heads (cache rows of kv_heads·hd
// floats): out[r][h·hd..] = Σ_j softmax_j(scale·q·k_j)·v_j. S.n1 = heads,
// S.n2 = kv_heads, S.n3 = hd, S.f0 = scale.
//
// One workgroup per (key/value head, row): grid (kv_heads, M). The G query
// heads that share the key/value head are done together, so each key and
// value row is read once. Positions go by tiles of AW: each thread scores
// one position against the G queries (held in workgroup memory), the
// tile's maximum per head comes from a tree, and an online softmax keeps a
// running maximum, each thread's share of the sum, and per thread the
// weighted values of its dimensions (thread lid: dimensions lid % 64 + 64i,
// positions of the tile lid / 64, + AW/64, ...). G ≤ MAXG, hd ≤ 64·DPT and
// G·hd ≤ MAXQ (decoder-gpu.ts checks).
const AW: u32 = 128u;
const LANES: u32 = 2u;
const MAXG: u32 = 8u;
const DPT: u32 = 4u;
const MAXQ: u32 = 1024u;
const NEG: f32 = -1e30;

@group(0) @binding(2) var<storage, read> at_x: array<f32>;
@group(0) @binding(3) var<storage, read> at_k: array<f32>;
@group(0) @binding(4) var<storage, read> at_v: array<f32>;
@group(0) @binding(5) var<storage, read_write> at_out: array<f32>;

var<workgroup> at_q: array<f32, MAXQ>;
// Scores, then weights, of the tile: [G][AW]; and the max/sum tree, [G][AW].
// At the end both hold the lanes' weighted values ([LANES][G·hd] ≤ 2·MAXQ).
var<workgroup> at_s: array<f32, 1024>;
var<workgroup> at_t: array<f32, 1024>;

@compute @workgroup_size(AW)
fn attention(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let r = wid.y;
  if (r >= R.t) {
    return;
  }
  let kvh = wid.x;
  let heads = S.n1;
  let nkv = S.n2;
  let hd = S.n3;
  let grp = heads / nkv;
  let kvw = nkv * hd;
  let n = R.pos0 + r + 1u;
  let q0 = r * S.n0 + kvh * grp * hd;
  for (var i = lid; i < grp * hd; i += AW) {
    at_q[i] = at_x[q0 + i];
  }
  var m: array<f32, MAXG>;
  var l: array<f32, MAXG>;
  var acc: array<f32, 32>;
  for (var g = 0u; g < MAXG; g++) {
    m[g] = NEG;
    l[g] = 0.0;
  }
  for (var i = 0u; i < 32u; i++) {
    acc[i] = 0.0;
  }
  let lane = lid / 64u;
  let ds = lid % 64u;
  workgroupBarrier();
  for (var t0 = 0u; t0 < n; t0 += AW) {
    let j = t0 + lid;
    let valid = j < n;
    let kr = j * kvw + kvh * hd;
    for (var g = 0u; g < grp; g++) {
      var s = NEG;
      if (valid) {
        var dot = 0.0;
        for (var d = 0u; d < hd; d++) {
          dot += at_q[g * hd + d] * at_k[kr + d];
        }
        s = dot * S.f0;
      }
      at_s[g * AW + lid] = s;
      at_t[g * AW + lid] = s;
    }
    workgroupBarrier();
    for (var k = AW / 2u; k > 0u; k >>= 1u) {
      if (lid < k) {
        for (var g = 0u; g < grp; g++) {
          at_t[g * AW + lid] = max(at_t[g * AW + lid], at_t[g * AW + lid + k]);
        }
      }
      workgroupBarrier();
    }
    var alpha: array<f32, MAXG>;
    for (var g = 0u; g < grp; g++) {
      let mn = max(m[g], at_t[g * AW]);
      alpha[g] = exp(m[g] - mn);
      m[g] = mn;
      var w = 0.0;
      if (valid) {
        w = exp(at_s[g * AW + lid] - mn);
      }
      l[g] = l[g] * alpha[g] + w;
      for (var i = 0u; i < DPT; i++) {
        acc[g * DPT + i] *= alpha[g];
      }
    }
    workgroupBarrier();
    for (var g = 0u; g < grp; g++) {
      if (valid) {
        at_s[g * AW + lid] = exp(at_s[g * AW + lid] - m[g]);
      } else {
        at_s[g * AW + lid] = 0.0;
      }
    }
    workgroupBarrier();
    let end = min(AW, n - t0);
    for (var jj = lane; jj < end; jj += LANES) {
      let vr = (t0 + jj) * kvw + kvh * hd;
      for (var i = 0u; i < DPT; i++) {
        let d = ds + 64u * i;
        if (d < hd) {
          let v = at_v[vr + d];
          for (var g = 0u; g < grp; g++) {
            acc[g * DPT + i] += at_s[g * AW + jj] * v;
          }
        }
      }
    }
    workgroupBarrier();
  }
  // Each head's sum of weights: the threads' shares through the tree.
  for (var g = 0u; g < grp; g++) {
    at_t[g * AW + lid] = l[g];
  }
  workgroupBarrier();
  for (var k = AW / 2u; k > 0u; k >>= 1u) {
    if (lid < k) {
      for (var g = 0u; g < grp; g++) {
        at_t[g * AW + lid] += at_t[g * AW + lid + k];
      }
    }
    workgroupBarrier();
  }
  var inv: array<f32, MAXG>;
  for (var g = 0u; g < grp; g++) {
    inv[g] = 1.0 / at_t[g * AW];
  }
  workgroupBarrier();
  // The lanes' weighted values, summed in lane order.
  for (var g = 0u; g < grp; g++) {
    for (var i = 0u; i < DPT; i++) {
      let d = ds + 64u * i;
      if (d < hd) {
        if (lane == 0u) {
          at_s[g * hd + d] = acc[g * DPT + i];
        } else {
          at_t[g * hd + d] = acc[g * DPT + i];
        }
      }
    }
  }
  workgroupBarrier();
  let o0 = r * heads * hd + kvh * grp * hd;
  for (var i = lid; i < grp * hd; i += AW) {
    at_out[o0 + i] = (at_s[i] + at_t[i]) * inv[i / hd];
  }
}

// ---------------------------------------------------------------- split attention
// The decode step's attention (one row, T = 1), split over the cache
// ("flash decoding"): `attention` above gives each key/value head one
// workgroup that walks every position, so at 1,024 positions 3 workgroups
// ran for 0.5 ms a layer on an H200. Here a workgroup takes one chunk of
// SCH positions of one key/value head: grid (kv_heads, ⌈n/SCH⌉), with n =
// pos0 + 1 read at run time, so that the parallelism grows with the context
// and no kernel depends on its length. Each writes, per query head of its
// group, its unnormalised weighted values (hd floats), the chunk's maximum
// score and its sum of e^(score − max): rows of hd + 2 floats of `sa_part`
// at [head][chunk]. `attention_merge` (grid (heads, 1)) rescales the
// chunks to one maximum and divides by the sum. The same parameters as
// `attention` (S.n0..n3, f0); the partials' buffer holds heads ·
// ⌈context/SCH⌉ rows (decoder-gpu.ts sizes it).
//
// `attention_rope` is `attention_split` with the step's `rope` and
// `kv_store` folded in, one dispatch a layer fewer: it turns the queries
// as it loads them, and the workgroup of the last chunk turns the new key
// and stores it and the value in the caches before reading them (no other
// workgroup reads that position); the row is left as the projection wrote
// it. Its sa_rope is the rope_kv step's parameters (S.n0..n5 of
// `rope_kv`): the keys' and values' columns are .n4 and .n5, the queries'
// from 0.
//
// A chunk's positions are spread over AT = KP·SCH threads so that no thread
// waits on a chain of loads: each of a position's KP threads loads its
// quarter of the key, and each lane of the weighted values its few values,
// all at once before using any. A load from the cache costs the H200 about
// 0.8 µs, and a loop that uses each load before issuing the next pays it
// once an iteration: the first form, a dimension a thread walking its
// chunk's 64 values, took about 55 µs a dispatch at any context, and the
// second, a position a thread walking its key's 16 vectors and lanes of 16
// values, 28 µs.
//
// The long form (decoder-gpu.ts's longAttentionSource: this source with
// SCH = 128, KP = 2, KB = 8, VB = 16 and MAXG = 4) takes chunks of 128
// positions, so that its NP parts hold one chunk each up to 2,048
// positions where this form's fold two: for runs past NP·64 positions. The
// lines below and MAXG's are what it replaces; as_s holds MAXG·SCH ≤ 512
// floats in both.
const SCH: u32 = 64u;
const KP: u32 = 4u;
// Loads a thread issues before using them: KB vectors of a key, VB values.
const KB: u32 = 4u;
const VB: u32 = 8u;
const AT: u32 = 256u;
// The softmax's groups of scores (eight a head).
const SG: u32 = SCH / 8u;

@group(0) @binding(2) var<storage, read> sa_x: array<f32>;
@group(0) @binding(3) var<storage, read_write> sa_k: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> sa_v: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> sa_part: array<f32>;
@group(0) @binding(6) var<uniform> sa_rope: Step;
@group(0) @binding(7) var<storage, read> sa_table: array<f32>;

// The group's queries, [G][hd/4]; the chunk's scores, then weights, [G][SCH];
// as_w in turn the threads' partial dot products [G][AT], the softmax's
// partial maxima and sums [G][8], and the lanes' weighted values
// [G][lanes][hd]; each head's maximum and sum. 14 KiB in all, under
// WebGPU's 16 KiB default.
var<workgroup> as_q: array<vec4<f32>, 256>;
var<workgroup> as_s: array<f32, 512>;
var<workgroup> as_w: array<f32, 2048>;
var<workgroup> as_mx: array<f32, MAXG>;
var<workgroup> as_l: array<f32, MAXG>;
// The merge's tree and lanes (a workgroup of SCH threads).
var<workgroup> as_t: array<f32, 512>;
var<workgroup> as_pv: array<vec4<f32>, 256>;

// Lanes of hd/4 threads that fit `threads` and `cap` floats of sums for G heads.
fn lanes_of(hd4: u32, grp: u32, threads: u32, cap: u32) -> u32 {
  return max(1u, min(threads / hd4, cap / (grp * hd4 * 4u)));
}

// One round of a thread's loads of a key (row kr of the cache, as vec4s):
// its vectors d0, d0 + KP, ..., KB of them, all issued before any is used
// (an index past the key is clamped into it and its vector taken as zero).
fn key_round(kr: u32, d0: u32, hd4: u32) -> array<vec4<f32>, KB> {
  var k: array<vec4<f32>, KB>;
  for (var i = 0u; i < KB; i++) {
    let d = d0 + i * KP;
    k[i] = select(vec4<f32>(0.0), sa_k[kr + min(d, hd4 - 1u)], d < hd4);
  }
  return k;
}

// One round of a lane's loads of values: dimensions 4c .. 4c + 4 at the
// chunk's positions jb, jb + lanes, ... (clamped to the chunk's last), VB
// of them, all issued before any is used.
fn value_round(kvh: u32, j0: u32, jb: u32, end: u32, hd: u32, kvw: u32, lanes: u32, c: u32) -> array<vec4<f32>, VB> {
  var v: array<vec4<f32>, VB>;
  for (var i = 0u; i < VB; i++) {
    let jj = min(jb + i * lanes, end - 1u);
    v[i] = sa_v[((j0 + jj) * kvw + kvh * hd) / 4u + c];
  }
  return v;
}

// A thread's first round of loads of a chunk, issued before the queries'
// barrier (attention_rope_parts, one chunk a part): its KB vectors of its
// position's key (chunk_weights' d0 = part) and its VB values
// (chunk_values' jb = lane), so that the keys, the values and the
// queries come from memory together rather than one after another.
struct Pre {
  k: array<vec4<f32>, KB>,
  v: array<vec4<f32>, VB>,
}

// The new position's key and value, turned and stored by the part that
// holds it (rope_prologue), for its own prefetched loads, which may have
// read that position before it was written. Heads of up to 64 floats.
var<workgroup> as_nk: array<vec4<f32>, 16>;
var<workgroup> as_nv: array<vec4<f32>, 16>;

fn prefetch(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32) -> Pre {
  let hd4 = hd / 4u;
  var pre: Pre;
  let jl = lid / KP;
  let part = lid % KP;
  if (jl < end) {
    pre.k = key_round(((j0 + jl) * kvw + kvh * hd) / 4u, part, hd4);
  }
  let lanes = lanes_of(hd4, grp, AT, 2048u);
  let lane = lid / hd4;
  if (lane < lanes) {
    pre.v = value_round(kvh, j0, lane, end, hd, kvw, lanes, lid % hd4);
  }
  return pre;
}

// `pre` with the new position p's key and value from as_nk and as_nv
// (after rope_prologue's barrier), where the thread loaded them.
fn patched(pre: Pre, lid: u32, j0: u32, end: u32, grp: u32, hd: u32, p: u32) -> Pre {
  let hd4 = hd / 4u;
  var out = pre;
  if (j0 + lid / KP == p) {
    for (var i = 0u; i < KB; i++) {
      let d = lid % KP + i * KP;
      out.k[i] = select(vec4<f32>(0.0), as_nk[min(d, hd4 - 1u)], d < hd4);
    }
  }
  let lanes = lanes_of(hd4, grp, AT, 2048u);
  let lane = lid / hd4;
  if (lane < lanes) {
    for (var i = 0u; i < VB; i++) {
      if (j0 + min(lane + i * lanes, end - 1u) == p) {
        out.v[i] = as_nv[lid % hd4];
      }
    }
  }
  return out;
}

// A chunk of one key/value head (positions j0 .. j0 + end) against the
// group's queries in as_q (loaded, after a barrier): the scores, then each
// head's maximum in as_mx, the weights e^(score − max) in as_s (0 past
// end) and their sum in as_l, after a barrier. Loops over the group's
// heads run to MAXG with the head as a guard, so that the per-head sums
// stay in registers.
fn chunk_weights(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32) {
  chunk_weights_from(lid, kvh, j0, end, grp, hd, kvw, false, Pre());
}

// chunk_weights with the keys' first round of loads (d0 = part) taken from
// `pre` where `has` (prefetched: see Pre).
fn chunk_weights_from(lid: u32, kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, has: bool, pre: Pre) {
  let hd4 = hd / 4u;
  // Scores: KP threads a position; thread `part` takes the key's vectors
  // part, part + KP, ..., in rounds of KB (key_round).
  let jl = lid / KP;
  let part = lid % KP;
  var dots: array<f32, MAXG>;
  for (var g = 0u; g < MAXG; g++) {
    dots[g] = 0.0;
  }
  if (jl < end) {
    let kr = ((j0 + jl) * kvw + kvh * hd) / 4u;
    for (var d0 = part; d0 < hd4; d0 += KB * KP) {
      var k: array<vec4<f32>, KB>;
      if (has && d0 == part) {
        k = pre.k;
      } else {
        k = key_round(kr, d0, hd4);
      }
      for (var i = 0u; i < KB; i++) {
        let d = min(d0 + i * KP, hd4 - 1u);
        for (var g = 0u; g < MAXG; g++) {
          if (g < grp) {
            dots[g] += dot(as_q[g * hd4 + d], k[i]);
          }
        }
      }
    }
  }
  for (var g = 0u; g < MAXG; g++) {
    if (g < grp) {
      as_w[g * AT + lid] = dots[g];
    }
  }
  workgroupBarrier();
  let valid = lid < end;
  if (lid < SCH) {
    for (var g = 0u; g < grp; g++) {
      var sc = NEG;
      if (valid) {
        let a = g * AT + lid * KP;
        var dot = 0.0;
        for (var i = 0u; i < KP; i++) {
          dot += as_w[a + i];
        }
        sc = dot * S.f0;
      }
      as_s[g * SCH + lid] = sc;
    }
  }
  workgroupBarrier();
  // The softmax: each head's maximum and sum over SCH = 8·SG scores in two
  // steps, eight groups of SG and then the eight.
  if (lid < grp * 8u) {
    let a = (lid / 8u) * SCH + (lid % 8u) * SG;
    var m = as_s[a];
    for (var i = 1u; i < SG; i++) {
      m = max(m, as_s[a + i]);
    }
    as_w[lid] = m;
  }
  workgroupBarrier();
  if (lid < grp) {
    var m = as_w[lid * 8u];
    for (var i = 1u; i < 8u; i++) {
      m = max(m, as_w[lid * 8u + i]);
    }
    as_mx[lid] = m;
  }
  workgroupBarrier();
  if (lid < SCH) {
    for (var g = 0u; g < grp; g++) {
      var w = 0.0;
      if (valid) {
        w = exp(as_s[g * SCH + lid] - as_mx[g]);
      }
      as_s[g * SCH + lid] = w;
    }
  }
  workgroupBarrier();
  if (lid < grp * 8u) {
    let a = (lid / 8u) * SCH + (lid % 8u) * SG;
    var l = 0.0;
    for (var i = 0u; i < SG; i++) {
      l += as_s[a + i];
    }
    as_w[lid] = l;
  }
  workgroupBarrier();
  if (lid < grp) {
    var l = 0.0;
    for (var i = 0u; i < 8u; i++) {
      l += as_w[lid * 8u + i];
    }
    as_l[lid] = l;
  }
  workgroupBarrier();
}

// The chunk's weighted values of thread (lane, c) of lanes_of(hd/4, G, AT,
// 2048) lanes: dimensions 4c .. 4c + 4 of each head, over the positions
// lane, lane + lanes, ... of the chunk, VB values loaded before any is used.
fn chunk_values(kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, lanes: u32, lane: u32, c: u32) -> array<vec4<f32>, MAXG> {
  return chunk_values_from(kvh, j0, end, grp, hd, kvw, lanes, lane, c, false, Pre());
}

// chunk_values with the first round of loads (jb = lane) taken from `pre`
// where `has`.
fn chunk_values_from(kvh: u32, j0: u32, end: u32, grp: u32, hd: u32, kvw: u32, lanes: u32, lane: u32, c: u32, has: bool, pre: Pre) -> array<vec4<f32>, MAXG> {
  var acc: array<vec4<f32>, MAXG>;
  for (var g = 0u; g < MAXG; g++) {
    acc[g] = vec4<f32>(0.0);
  }
  for (var jb = lane; jb < end; jb += VB * lanes) {
    var v: array<vec4<f32>, VB>;
    if (has && jb == lane) {
      v = pre.v;
    } else {
      v = value_round(kvh, j0, jb, end, hd, kvw, lanes, c);
    }
    for (var i = 0u; i < VB; i++) {
      let jj = jb + i * lanes;
      let ji = min(jj, end - 1u);
      for (var g = 0u; g < MAXG; g++) {
        if (g < grp) {
          acc[g] += select(0.0, as_s[g * SCH + ji], jj < end) * v[i];
        }
      }
    }
  }
  return acc;
}

// The lanes' weighted values of head g's dimensions 4c .. 4c + 4, summed in
// lane order (in as_w, after a barrier).
fn lanes_sum(g: u32, c: u32, hd4: u32, lanes: u32) -> vec4<f32> {
  var o = vec4<f32>(0.0);
  for (var l = 0u; l < lanes; l++) {
    let a = ((g * lanes + l) * hd4 + c) * 4u;
    o += vec4<f32>(as_w[a], as_w[a + 1u], as_w[a + 2u], as_w[a + 3u]);
  }
  return o;
}

// Thread (lane, c)'s weighted values into as_w, for lanes_sum.
fn lanes_store(acc: array<vec4<f32>, MAXG>, grp: u32, hd4: u32, lanes: u32, lane: u32, c: u32) {
  for (var g = 0u; g < MAXG; g++) {
    if (g < grp) {
      let a = ((g * lanes + lane) * hd4 + c) * 4u;
      as_w[a] = acc[g].x;
      as_w[a + 1u] = acc[g].y;
      as_w[a + 2u] = acc[g].z;
      as_w[a + 3u] = acc[g].w;
    }
  }
}

// One chunk of the split attention: its weights and weighted values, and
// the partials' rows of the group's heads (with `parts`, as part `chunk` of
// the +merge layout: attend_parts' for one chunk a part).
fn attend_chunk(lid: u32, kvh: u32, chunk: u32, grp: u32, hd: u32, kvw: u32, n: u32, parts: bool) {
  attend_chunk_from(lid, kvh, chunk, grp, hd, kvw, n, parts, false, Pre());
}

// attend_chunk with the first rounds of its keys' and values' loads from
// `pre` where `has`.
fn attend_chunk_from(lid: u32, kvh: u32, chunk: u32, grp: u32, hd: u32, kvw: u32, n: u32, parts: bool, has: bool, pre: Pre) {
  let hd4 = hd / 4u;
  let j0 = chunk * SCH;
  let end = min(SCH, n - j0);
  chunk_weights_from(lid, kvh, j0, end, grp, hd, kvw, has, pre);
  let lanes = lanes_of(hd4, grp, AT, 2048u);
  let c = lid % hd4;
  let lane = lid / hd4;
  if (lane < lanes) {
    lanes_store(chunk_values_from(kvh, j0, end, grp, hd, kvw, lanes, lane, c, has, pre), grp, hd4, lanes, lane, c);
  }
  workgroupBarrier();
  if (parts) {
    write_part(lid, kvh, chunk, grp, hd, lanes, as_mx, as_l);
    return;
  }
  let chunks = (n + SCH - 1u) / SCH;
  for (var i = lid; i < grp * hd4; i += AT) {
    let o = lanes_sum(i / hd4, i % hd4, hd4, lanes);
    let row = ((kvh * grp + i / hd4) * chunks + chunk) * (hd + 2u) + 4u * (i % hd4);
    sa_part[row] = o.x;
    sa_part[row + 1u] = o.y;
    sa_part[row + 2u] = o.z;
    sa_part[row + 3u] = o.w;
  }
  if (lid < grp) {
    let row = ((kvh * grp + lid) * chunks + chunk) * (hd + 2u);
    sa_part[row + hd] = as_mx[lid];
    sa_part[row + hd + 1u] = as_l[lid];
  }
}

// A softmax's running state over parts of its positions: the largest
// score m so far, the sum l of e^(score − m) and the weighted values o
// (four dimensions), both rescaled to m.
struct Fold {
  m: f32,
  l: f32,
  o: vec4<f32>,
}

const FOLD0 = Fold(NEG, 0.0, vec4<f32>(0.0));

// `a` with a part of maximum m, sum l and weighted values o folded in.
fn fold(a: Fold, m: f32, l: f32, o: vec4<f32>) -> Fold {
  let mn = max(a.m, m);
  let down = exp(a.m - mn);
  let up = exp(m - mn);
  return Fold(mn, a.l * down + l * up, a.o * down + o * up);
}

// Chunks j0 = first, first + step, ... (below n) of one key/value head by
// one workgroup, each folded into a running maximum, sum and weighted
// values per head (the merge's rule, in registers); then the lanes'
// weighted values in as_w (for lanes_sum) and each head's maximum and sum
// in as_mx and as_l, after a barrier. Returns the lanes.
fn fold_chunks(lid: u32, kvh: u32, first: u32, step: u32, grp: u32, hd: u32, kvw: u32, n: u32) -> u32 {
  let hd4 = hd / 4u;
  let lanes = lanes_of(hd4, grp, AT, 2048u);
  let c = lid % hd4;
  let lane = lid / hd4;
  var f: array<Fold, MAXG>;
  for (var g = 0u; g < MAXG; g++) {
    f[g] = FOLD0;
  }
  for (var j0 = first; j0 < n; j0 += step) {
    let end = min(SCH, n - j0);
    chunk_weights(lid, kvh, j0, end, grp, hd, kvw);
    if (lane < lanes) {
      let acc = chunk_values(kvh, j0, end, grp, hd, kvw, lanes, lane, c);
      for (var g = 0u; g < MAXG; g++) {
        if (g < grp) {
          f[g] = fold(f[g], as_mx[g], as_l[g], acc[g]);
        }
      }
    }
    // The next chunk writes over the weights and sums.
    workgroupBarrier();
  }
  if (lane < lanes) {
    var o: array<vec4<f32>, MAXG>;
    for (var g = 0u; g < MAXG; g++) {
      o[g] = f[g].o;
    }
    lanes_store(o, grp, hd4, lanes, lane, c);
  }
  if (lid == 0u) {
    for (var g = 0u; g < MAXG; g++) {
      if (g < grp) {
        as_mx[g] = f[g].m;
        as_l[g] = f[g].l;
      }
    }
  }
  workgroupBarrier();
  return lanes;
}

// The whole cache of one key/value head by one workgroup, every chunk
// folded (fold_chunks): the attention's output rows directly, without
// partials or a merge. For short contexts, where that costs less than the
// merge's dispatch (decoder-gpu.ts chooses by the position: up to one
// chunk by default).
fn attend_all(lid: u32, kvh: u32, grp: u32, hd: u32, kvw: u32, n: u32) {
  let hd4 = hd / 4u;
  let lanes = fold_chunks(lid, kvh, 0u, SCH, grp, hd, kvw, n);
  for (var i = lid; i < grp * hd4; i += AT) {
    ao_out[kvh * grp * hd4 + i] = lanes_sum(i / hd4, i % hd4, hd4, lanes) / as_l[i / hd4];
  }
}

// The queries of key/value head kvh's group into as_q, as the row holds them.
fn load_queries(lid: u32, kvh: u32, grp: u32, hd: u32) {
  let hd4 = hd / 4u;
  let q0 = kvh * grp * hd;
  for (var i = lid; i < grp * hd4; i += AT) {
    let a = q0 + 4u * i;
    as_q[i] = vec4<f32>(sa_x[a], sa_x[a + 1u], sa_x[a + 2u], sa_x[a + 3u]);
  }
}

@compute @workgroup_size(AT)
fn attention_split(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let kvh = wid.x;
  let grp = S.n1 / S.n2;
  let n = R.pos0 + 1u;
  if (wid.y * SCH >= n) {
    return;
  }
  load_queries(lid, kvh, grp, S.n3);
  workgroupBarrier();
  attend_chunk(lid, kvh, wid.y, grp, S.n3, S.n2 * S.n3, n, false);
}

// `attention_split` over every chunk in one workgroup a key/value head
// (grid (kv_heads, 1)), its output rows at binding 5 instead of partials.
@group(0) @binding(5) var<storage, read_write> ao_out: array<vec4<f32>>;

@compute @workgroup_size(AT)
fn attention_one(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let grp = S.n1 / S.n2;
  load_queries(lid, wid.x, grp, S.n3);
  workgroupBarrier();
  attend_all(lid, wid.x, grp, S.n3, S.n2 * S.n3, R.pos0 + 1u);
}

// Four floats of the row from column col (a multiple of 4), their two
// pairs turned by the rotary table at `tab` + col % hd (rope's rule).
fn turned4(col: u32, tab: u32) -> vec4<f32> {
  let x = vec4<f32>(sa_x[col], sa_x[col + 1u], sa_x[col + 2u], sa_x[col + 3u]);
  let c0 = sa_table[tab];
  let s0 = sa_table[tab + 1u];
  let c1 = sa_table[tab + 2u];
  let s1 = sa_table[tab + 3u];
  return vec4<f32>(x.x * c0 + x.y * -s0, x.y * c0 + x.x * s0, x.z * c1 + x.w * -s1, x.w * c1 + x.z * s1);
}

// attention_rope's prologue: the group's queries turned into as_q and, by
// the workgroup of the last chunk (`last`), the new key turned and stored
// with the value in the caches; then the barriers after which this
// workgroup reads them.
fn rope_prologue(lid: u32, kvh: u32, grp: u32, hd: u32, kvw: u32, last: bool) {
  let hd4 = hd / 4u;
  let p = R.pos0;
  let tab = p * hd;
  for (var i = lid; i < grp * hd4; i += AT) {
    as_q[i] = turned4(kvh * grp * hd + 4u * i, tab + (4u * i) % hd);
  }
  if (last) {
    let dst = (p * kvw + kvh * hd) / 4u;
    for (var i = lid; i < hd4; i += AT) {
      let k = turned4(sa_rope.n4 + kvh * hd + 4u * i, tab + 4u * i);
      let vc = sa_rope.n5 + kvh * hd + 4u * i;
      let v = vec4<f32>(sa_x[vc], sa_x[vc + 1u], sa_x[vc + 2u], sa_x[vc + 3u]);
      sa_k[dst + i] = k;
      sa_v[dst + i] = v;
      if (i < 16u) {
        as_nk[i] = k;
        as_nv[i] = v;
      }
    }
  }
  storageBarrier();
  workgroupBarrier();
}

@compute @workgroup_size(AT)
fn attention_rope(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let kvh = wid.x;
  let grp = S.n1 / S.n2;
  let kvw = S.n2 * S.n3;
  let n = R.pos0 + 1u;
  let j0 = wid.y * SCH;
  if (j0 >= n) {
    return;
  }
  rope_prologue(lid, kvh, grp, S.n3, kvw, j0 + SCH >= n);
  attend_chunk(lid, kvh, wid.y, grp, S.n3, kvw, n, false);
}

// `attention_rope` over every chunk in one workgroup a key/value head, as
// `attention_one`.
@compute @workgroup_size(AT)
fn attention_rope_one(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let grp = S.n1 / S.n2;
  let kvw = S.n2 * S.n3;
  rope_prologue(lid, wid.x, grp, S.n3, kvw, true);
  attend_all(lid, wid.x, grp, S.n3, kvw, R.pos0 + 1u);
}

// ---------------------------------------------------------------- attention in parts
// The split attention for a product with `+merge` after it (docs/ops.md):
// NP parts a head whatever the context, part p folding chunks p, p + NP,
// ... of the cache in registers (attend_all's rule), then writing its
// weighted values, largest score and sum in the product's layout: P at
// (h·NP + p)·hd + d, PM at pm0 + h·NP + p and PL at pl0 + h·NP + p of
// sa_part (merge_offsets). A part with no positions writes the empty part
// (PM = NEG, PL = 0, P = 0). Grid (kv_heads, NP); no merge dispatch.
const NP: u32 = 16u;

// Where PM and PL start in sa_part (floats; each region on a 256-byte boundary, for its binding).
fn merge_offsets(heads: u32, hd: u32) -> vec2<u32> {
  let pm0 = (heads * NP * hd + 63u) / 64u * 64u;
  return vec2<u32>(pm0, pm0 + (heads * NP + 63u) / 64u * 64u);
}

fn attend_parts(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, kvw: u32, n: u32) {
  let lanes = fold_chunks(lid, kvh, p * SCH, NP * SCH, grp, hd, kvw, n);
  write_part(lid, kvh, p, grp, hd, lanes, as_mx, as_l);
}

// Part p of the group's heads in the +merge layout: the lanes' weighted
// values (summed by lanes_sum, after the caller's barrier), and each head's
// largest score and sum from `mx` and `l`.
fn write_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, lanes: u32, mx: array<f32, MAXG>, l: array<f32, MAXG>) {
  let hd4 = hd / 4u;
  for (var i = lid; i < grp * hd4; i += AT) {
    let o = lanes_sum(i / hd4, i % hd4, hd4, lanes);
    let at = ((kvh * grp + i / hd4) * NP + p) * hd + 4u * (i % hd4);
    sa_part[at] = o.x;
    sa_part[at + 1u] = o.y;
    sa_part[at + 2u] = o.z;
    sa_part[at + 3u] = o.w;
  }
  if (lid < grp) {
    let off = merge_offsets(S.n1, hd);
    let h = (kvh * grp + lid) * NP + p;
    sa_part[off.x + h] = mx[lid];
    sa_part[off.y + h] = l[lid];
  }
}

// The group's heads' part p where it holds no positions: PM = NEG, PL = 0, P = 0.
fn empty_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32) {
  for (var i = lid; i < grp * hd; i += AT) {
    sa_part[((kvh * grp + i / hd) * NP + p) * hd + i % hd] = 0.0;
  }
  if (lid < grp) {
    let off = merge_offsets(S.n1, hd);
    let h = (kvh * grp + lid) * NP + p;
    sa_part[off.x + h] = NEG;
    sa_part[off.y + h] = 0.0;
  }
}

// Part wid.y of the group's heads: up to NP chunks, part p is chunk p (the
// split kernel's own work, written in the +merge layout), or empty; past
// them, attend_parts folds its chunks.
fn attend_part(lid: u32, kvh: u32, p: u32, grp: u32, hd: u32, kvw: u32, n: u32) {
  if (n > NP * SCH) {
    attend_parts(lid, kvh, p, grp, hd, kvw, n);
  } else if (p * SCH < n) {
    attend_chunk(lid, kvh, p, grp, hd, kvw, n, true);
  } else {
    empty_part(lid, kvh, p, grp, hd);
  }
}

@compute @workgroup_size(AT)
fn attention_parts(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let grp = S.n1 / S.n2;
  load_queries(lid, wid.x, grp, S.n3);
  workgroupBarrier();
  attend_part(lid, wid.x, wid.y, grp, S.n3, S.n2 * S.n3, R.pos0 + 1u);
}

// `attention_parts` with attention_rope's prologue: the part that holds the
// new position turns and stores its key and value. Where a part holds one
// chunk (up to NP·SCH positions) and heads have at most 64 floats, its
// first loads of keys and values are issued before the prologue
// (prefetch), and the part that holds the new position takes that
// position from the prologue's copy in workgroup memory (patched).
@compute @workgroup_size(AT)
fn attention_rope_parts(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let grp = S.n1 / S.n2;
  let kvw = S.n2 * S.n3;
  let hd = S.n3;
  let n = R.pos0 + 1u;
  let p = wid.y;
  let owner = (R.pos0 / SCH) % NP == p;
  let j0 = p * SCH;
  let one = n <= NP * SCH && j0 < n && hd <= 64u;
  var pre: Pre;
  if (one) {
    pre = prefetch(lid, wid.x, j0, min(SCH, n - j0), grp, hd, kvw);
  }
  rope_prologue(lid, wid.x, grp, hd, kvw, owner);
  if (one) {
    if (owner) {
      pre = patched(pre, lid, j0, min(SCH, n - j0), grp, hd, R.pos0);
    }
    attend_chunk_from(lid, wid.x, p, grp, hd, kvw, n, true, true, pre);
  } else {
    attend_part(lid, wid.x, p, grp, hd, kvw, n);
  }
}

@group(0) @binding(2) var<storage, read> am_part: array<f32>;
@group(0) @binding(3) var<storage, read_write> am_out: array<vec4<f32>>;

@compute @workgroup_size(SCH)
fn attention_merge(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let h = wid.x;
  let hd = S.n3;
  let hd4 = hd / 4u;
  let n = R.pos0 + 1u;
  let chunks = (n + SCH - 1u) / SCH;
  let w = hd + 2u;
  let base = h * chunks * w;
  // Lanes of hd/4 threads, four dimensions a thread, lane l taking chunks
  // l, l + lanes, ...: VB chunks' maxima, sums and values loaded before any
  // is used, folded into a running maximum m, sum and weighted values
  // rescaled to it (e^(max_c − m)). Then the lanes, in order, the same way.
  let lanes = lanes_of(hd4, 1u, SCH, 1024u);
  let c4 = lid % hd4;
  let lane = lid / hd4;
  if (lane < lanes) {
    var f = FOLD0;
    for (var cb = lane; cb < chunks; cb += VB * lanes) {
      var cm: array<f32, VB>;
      var cl: array<f32, VB>;
      var cv: array<vec4<f32>, VB>;
      for (var i = 0u; i < VB; i++) {
        let row = base + min(cb + i * lanes, chunks - 1u) * w;
        let a = row + 4u * c4;
        cm[i] = am_part[row + hd];
        cl[i] = am_part[row + hd + 1u];
        cv[i] = vec4<f32>(am_part[a], am_part[a + 1u], am_part[a + 2u], am_part[a + 3u]);
      }
      for (var i = 0u; i < VB; i++) {
        if (cb + i * lanes < chunks) {
          f = fold(f, cm[i], cl[i], cv[i]);
        }
      }
    }
    as_pv[lane * hd4 + c4] = f.o;
    if (c4 == 0u) {
      as_t[2u * lane] = f.m;
      as_t[2u * lane + 1u] = f.l;
    }
  }
  workgroupBarrier();
  if (lid < hd4) {
    var f = FOLD0;
    for (var l2 = 0u; l2 < lanes; l2++) {
      f = fold(f, as_t[2u * l2], as_t[2u * l2 + 1u], as_pv[l2 * hd4 + lid]);
    }
    am_out[h * hd4 + lid] = f.o / f.l;
  }
}


// ---------------------------------------------------------------- swiglu
// out[r][i] = silu(x[r][i])·x[r][f + i] for i < f = S.n0: rows of 2f floats
// (gate then up) in, rows of f out; silu(g) = g / (1 + e^−g), e^−g clamped
// at e^88 as the Wasm kernel's exp. Grid (⌈f/EW⌉, M).
@group(0) @binding(2) var<storage, read> sw_x: array<f32>;
@group(0) @binding(3) var<storage, read_write> sw_out: array<f32>;

@compute @workgroup_size(EW)
fn swiglu(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = g.y;
  let i = g.x;
  let f = S.n0;
  if (r >= R.t || i >= f) {
    return;
  }
  let gate = sw_x[r * 2u * f + i];
  sw_out[r * f + i] = gate / (1.0 + exp(min(-gate, 88.0))) * sw_x[r * 2u * f + f + i];
}

// ---------------------------------------------------------------- add
// x[r][i] += y[r][i] for i < S.n0: grid (⌈cols/EW⌉, M).
@group(0) @binding(2) var<storage, read> add_y: array<f32>;
@group(0) @binding(3) var<storage, read_write> add_x: array<f32>;

@compute @workgroup_size(EW)
fn add(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = g.y;
  let i = g.x;
  if (r >= R.t || i >= S.n0) {
    return;
  }
  let at = r * S.n0 + i;
  add_x[at] = add_x[at] + add_y[at];
}

// ---------------------------------------------------------------- sample
// The next token from the logits (S.n0 = V of them), by sampler.ts's rule,
// in one workgroup: grid (1, 1). out[0] is the token, or NO_TOKEN where the
// host must sample from the logits itself with the same draw (out[1] = 1).
//
// - temperature ≤ 0: greedy, the first largest logit (NaN never wins).
// - otherwise the candidates: the ids whose weight e^((l − top)/T) is at
//   least e^−CUT, or, when more than MAXC are, the ids at or above a
//   threshold found by bisection that keeps from max(k, MAXC/2) to MAXC of
//   them; sorted by logit, largest first, ties by id (a bitonic sort in
//   workgroup memory); cut to the top k; weights in f32; cut to the
//   smallest head whose share reaches top-p; then the host's draw u times
//   the kept total walks the kept ids. The ids below the threshold (the
//   tail) count in the totals where the rule counts them (no top-k, or one
//   past the candidates), by their summed weight.
// The host samples instead when the rule's choice lies in a tail that the
// bisection cut off: the top-k reaching past the candidates, the top-p cut
// or the draw falling in it (with no bisection the tail's ids weigh less
// than e^−CUT each, and a draw falls among them with odds below V·e^−CUT).
// The GPU's pick differs from sampler.ts's (weights in f64) only where the
// draw falls within f32 rounding of a boundary between two ids' shares.
const SW: u32 = 256u;
const MAXC: u32 = 1024u;
const CUT: f32 = 30.0;
const NO_TOKEN: u32 = 0xffffffffu;
// Logits a thread of the argmax loads before it compares any.
const SU: u32 = 8u;

@group(0) @binding(2) var<storage, read> sm_logits: array<f32>;
@group(0) @binding(3) var<storage, read_write> sm_out: array<u32>;

var<workgroup> sm_v: array<f32, MAXC>;
var<workgroup> sm_i: array<u32, MAXC>;
var<workgroup> sm_rv: array<f32, SW>;
var<workgroup> sm_ri: array<u32, SW>;
var<workgroup> sm_count: atomic<u32>;
var<workgroup> sm_n: u32;

// How many logits are at least thr (every thread gets the count).
fn count_at_least(lid: u32, thr: f32) -> u32 {
  var c = 0u;
  for (var i = lid; i < S.n0; i += SW) {
    if (sm_logits[i] >= thr) {
      c++;
    }
  }
  sm_ri[lid] = c;
  workgroupBarrier();
  for (var k = SW / 2u; k > 0u; k >>= 1u) {
    if (lid < k) {
      sm_ri[lid] += sm_ri[lid + k];
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&sm_ri[0]);
}

// Whether candidate a comes before b: larger logit, then smaller id.
fn before(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
  return va > vb || (va == vb && ia < ib);
}

fn no_token(lid: u32) {
  if (lid == 0u) {
    sm_out[0] = NO_TOKEN;
    sm_out[1] = 1u;
  }
}

@compute @workgroup_size(SW)
fn sample(@builtin(local_invocation_index) lid: u32) {
  let V = S.n0;
  // The first largest logit: SU logits a thread loaded before any is
  // compared (a loop that used each load before issuing the next waited
  // for it every iteration: 52 us a token over 49,152 logits on an H200).
  var bv = sm_logits[0];
  var bi = 0u;
  for (var i0 = lid; i0 < V; i0 += SW * SU) {
    var vs: array<f32, SU>;
    for (var u = 0u; u < SU; u++) {
      vs[u] = sm_logits[min(i0 + u * SW, V - 1u)];
    }
    for (var u = 0u; u < SU; u++) {
      let i = i0 + u * SW;
      let v = vs[u];
      if (i < V && (v > bv || (v == bv && i < bi))) {
        bv = v;
        bi = i;
      }
    }
  }
  sm_rv[lid] = bv;
  sm_ri[lid] = bi;
  workgroupBarrier();
  for (var k = SW / 2u; k > 0u; k >>= 1u) {
    if (lid < k) {
      let v = sm_rv[lid + k];
      let i = sm_ri[lid + k];
      if (before(v, i, sm_rv[lid], sm_ri[lid])) {
        sm_rv[lid] = v;
        sm_ri[lid] = i;
      }
    }
    workgroupBarrier();
  }
  let best = sm_ri[0];
  // Uniform: the bisection's branches depend on it.
  let top = workgroupUniformLoad(&sm_rv[0]);
  if (!(R.temperature > 0.0)) {
    if (lid == 0u) {
      sm_out[0] = best;
      sm_out[1] = 0u;
    }
    return;
  }
  let temp = R.temperature;
  let k = R.top_k;
  // The candidates' threshold.
  var thr = top - CUT * temp;
  var cnt = count_at_least(lid, thr);
  let bisected = cnt > MAXC;
  if (bisected) {
    // count(lo) > MAXC; narrow [lo, hi] until count(hi) is enough, at most MAXC.
    let enough = max(min(k, MAXC), MAXC / 2u);
    var lo = thr;
    var hi = top;
    cnt = count_at_least(lid, hi);
    for (var it = 0u; it < 48u && cnt < enough; it++) {
      let mid = lo + (hi - lo) * 0.5;
      if (mid <= lo || mid >= hi) {
        break;
      }
      let c = count_at_least(lid, mid);
      if (c > MAXC) {
        lo = mid;
      } else {
        hi = mid;
        cnt = c;
      }
    }
    thr = hi;
    if (cnt > MAXC) {
      // More than MAXC ids tie at the largest logit.
      no_token(lid);
      return;
    }
  }
  // Gather the candidates (in any order: the sort orders them) and sum the tail's weights.
  if (lid == 0u) {
    atomicStore(&sm_count, 0u);
  }
  workgroupBarrier();
  var tail = 0.0;
  for (var i = lid; i < V; i += SW) {
    let v = sm_logits[i];
    if (v >= thr) {
      let at = atomicAdd(&sm_count, 1u);
      if (at < MAXC) {
        sm_v[at] = v;
        sm_i[at] = i;
      }
    } else {
      tail += exp((v - top) / temp);
    }
  }
  sm_rv[lid] = tail;
  workgroupBarrier();
  for (var s = SW / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      sm_rv[lid] += sm_rv[lid + s];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    sm_n = min(atomicLoad(&sm_count), MAXC);
  }
  let n = workgroupUniformLoad(&sm_n);
  tail = sm_rv[0];
  // Padding after the candidates, last in the order; then a bitonic sort.
  var p = 2u;
  while (p < n) {
    p <<= 1u;
  }
  for (var i = n + lid; i < p; i += SW) {
    sm_v[i] = NEG;
    sm_i[i] = NO_TOKEN;
  }
  workgroupBarrier();
  for (var size = 2u; size <= p; size <<= 1u) {
    for (var stride = size / 2u; stride > 0u; stride >>= 1u) {
      for (var i = lid; i < p; i += SW) {
        let j = i ^ stride;
        if (j > i) {
          let up = (i & size) == 0u;
          let swap = select(before(sm_v[i], sm_i[i], sm_v[j], sm_i[j]), before(sm_v[j], sm_i[j], sm_v[i], sm_i[i]), up);
          if (swap) {
            let tv = sm_v[i];
            let ti = sm_i[i];
            sm_v[i] = sm_v[j];
            sm_i[i] = sm_i[j];
            sm_v[j] = tv;
            sm_i[j] = ti;
          }
        }
      }
      workgroupBarrier();
    }
  }
  if (lid != 0u) {
    return;
  }
  // The rule's ids: the top k (all: k 0), of which the candidates hold `len`.
  var len = n;
  var withTail = true;
  if (k > 0u && k <= n) {
    len = k;
    withTail = false;
  } else if (k > 0u && bisected) {
    no_token(lid);
    return;
  }
  var total = 0.0;
  for (var j = 0u; j < len; j++) {
    total += exp((sm_v[j] - top) / temp);
  }
  if (withTail) {
    total += tail;
  }
  var keep = len;
  if (R.top_p < 1.0) {
    var acc = 0.0;
    var found = false;
    for (var j = 0u; j < len; j++) {
      acc += exp((sm_v[j] - top) / temp) / total;
      if (acc >= R.top_p) {
        keep = j + 1u;
        found = true;
        break;
      }
    }
    if (found) {
      withTail = false;
    } else if (withTail && bisected) {
      no_token(lid);
      return;
    }
  }
  var kept = 0.0;
  for (var j = 0u; j < keep; j++) {
    kept += exp((sm_v[j] - top) / temp);
  }
  if (withTail) {
    kept += tail;
  }
  var u = R.u * kept;
  for (var j = 0u; j < keep; j++) {
    let w = exp((sm_v[j] - top) / temp);
    if (u < w) {
      sm_out[0] = sm_i[j];
      sm_out[1] = 0u;
      return;
    }
    u -= w;
  }
  if (withTail) {
    // The draw falls in the tail.
    no_token(lid);
    return;
  }
  sm_out[0] = sm_i[keep - 1u];
  sm_out[1] = 0u;
}
