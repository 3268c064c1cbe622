// The sentence encoder's fixed WebGPU kernels: everything of a BERT layer
// that is not a matrix product (those are webtune's tuned WGSL kernels, the
// FFN's bias and exact GELU included, as the fused `matmul+bias+gelu`).
// The WebGPU twin of encoder-kernels.wat; encoder-gpu.ts runs them.
//
// One entry point per kernel; binding 0 is the bucket's parameters, the
// others are that kernel's buffers (numbers reused across entry points,
// each pipeline's layout is its own). The layer-norm and pooling kernels
// run one workgroup of WG threads per row, thread `lid` holding elements
// lid, lid + WG, ... of it; softmax runs one thread per row (no barriers:
// a software adapter such as SwiftShader pays dearly for each); element-wise
// kernels run one thread per element, EW a workgroup. Every kernel folds a
// two-dimensional grid back into one index, so that more than 65535
// workgroups fit (encoder-gpu.ts's `grid`).

struct Params {
  // Texts of the batch, padded slots included; their padded length.
  b: u32,
  s: u32,
  // Hidden width h = heads · d.
  h: u32,
  heads: u32,
  d: u32,
  // Layer norm epsilon; Q's scale 1/√d.
  eps: f32,
  scale: f32,
  // Pooling: 1 for the first token ([CLS]), 0 for the mean; 1 to L2-normalise.
  cls: u32,
  normalize: u32,
}

@group(0) @binding(0) var<uniform> P: Params;

const WG: u32 = 64u;
const EW: u32 = 256u;
// Row elements one thread holds: rows up to WG · PER = 2048 wide.
const PER: u32 = 32u;

var<workgroup> red: array<f32, 64>;

fn flat(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return wid.y * nwg.x + wid.x;
}

// The workgroup's sum of every thread's v.
fn sum_wg(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (lid < k) {
      red[lid] += red[lid + k];
    }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

// Mean and 1/σ of a row of P.h whose elements lid, lid + WG, ... are xs.
fn ln_stats(lid: u32, xs: ptr<function, array<f32, PER>>) -> vec2<f32> {
  var sum = 0.0;
  for (var k = 0u; lid + k * WG < P.h; k++) {
    sum += (*xs)[k];
  }
  let mean = sum_wg(lid, sum) / f32(P.h);
  var sq = 0.0;
  for (var k = 0u; lid + k * WG < P.h; k++) {
    let c = (*xs)[k] - mean;
    sq += c * c;
  }
  return vec2(mean, inverseSqrt(sum_wg(lid, sq) / f32(P.h) + P.eps));
}

// x[t] = LayerNorm(word[ids[t]] + pos[t mod s] + type0) for t < b·s.
@group(0) @binding(1) var<storage, read> embed_ids: array<u32>;
@group(0) @binding(2) var<storage, read> embed_word: array<f32>;
@group(0) @binding(3) var<storage, read> embed_pos: array<f32>;
@group(0) @binding(4) var<storage, read> embed_type0: array<f32>;
@group(0) @binding(5) var<storage, read> embed_gamma: array<f32>;
@group(0) @binding(6) var<storage, read> embed_beta: array<f32>;
@group(0) @binding(7) var<storage, read_write> embed_x: array<f32>;

@compute @workgroup_size(WG)
fn embed(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = flat(wid, nwg);
  if (t >= P.b * P.s) {
    return;
  }
  let w = embed_ids[t] * P.h;
  let p = (t % P.s) * P.h;
  var xs: array<f32, PER>;
  for (var k = 0u; lid + k * WG < P.h; k++) {
    let i = lid + k * WG;
    xs[k] = embed_word[w + i] + embed_pos[p + i] + embed_type0[i];
  }
  let st = ln_stats(lid, &xs);
  for (var k = 0u; lid + k * WG < P.h; k++) {
    let i = lid + k * WG;
    embed_x[t * P.h + i] = (xs[k] - st.x) * st.y * embed_gamma[i] + embed_beta[i];
  }
}

// x = LayerNorm(y + bias + x), row by row, in place.
@group(0) @binding(1) var<storage, read> ln_y: array<f32>;
@group(0) @binding(2) var<storage, read> ln_bias: array<f32>;
@group(0) @binding(3) var<storage, read> ln_gamma: array<f32>;
@group(0) @binding(4) var<storage, read> ln_beta: array<f32>;
@group(0) @binding(5) var<storage, read_write> ln_x: array<f32>;

@compute @workgroup_size(WG)
fn add_ln(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = flat(wid, nwg);
  if (t >= P.b * P.s) {
    return;
  }
  var xs: array<f32, PER>;
  for (var k = 0u; lid + k * WG < P.h; k++) {
    let i = lid + k * WG;
    xs[k] = ln_y[t * P.h + i] + ln_bias[i] + ln_x[t * P.h + i];
  }
  let st = ln_stats(lid, &xs);
  for (var k = 0u; lid + k * WG < P.h; k++) {
    let i = lid + k * WG;
    ln_x[t * P.h + i] = (xs[k] - st.x) * st.y * ln_gamma[i] + ln_beta[i];
  }
}

// qkv [b, s, 3h] + bias into Q [b·heads, s, d] times 1/√d, Kᵀ [b·heads, d, s]
// and V [b·heads, s, d]: one thread per element of [b·s, h].
@group(0) @binding(1) var<storage, read> split_qkv: array<f32>;
@group(0) @binding(2) var<storage, read> split_bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> split_q: array<f32>;
@group(0) @binding(4) var<storage, read_write> split_kt: array<f32>;
@group(0) @binding(5) var<storage, read_write> split_v: array<f32>;

@compute @workgroup_size(EW)
fn split_heads(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let e = flat(wid, nwg) * EW + lid;
  if (e >= P.b * P.s * P.h) {
    return;
  }
  let t = e / P.h;
  let c = e % P.h;
  let bh = (t / P.s) * P.heads + c / P.d;
  let pos = t % P.s;
  let j = c % P.d;
  let src = t * 3u * P.h + c;
  split_q[(bh * P.s + pos) * P.d + j] = (split_qkv[src] + split_bias[c]) * P.scale;
  split_kt[(bh * P.d + j) * P.s + pos] = split_qkv[src + P.h] + split_bias[c + P.h];
  split_v[(bh * P.s + pos) * P.d + j] = split_qkv[src + 2u * P.h] + split_bias[c + 2u * P.h];
}

// Softmax over the last axis of p [b·heads, s, s], in place, over the first
// lens[batch] keys of each row: padded keys get exactly 0, and a text of
// length 0 (a padded batch slot) a row of zeros. One thread per row.
@group(0) @binding(1) var<storage, read> softmax_lens: array<u32>;
@group(0) @binding(2) var<storage, read_write> softmax_p: array<f32>;

@compute @workgroup_size(WG)
fn softmax(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = flat(wid, nwg) * WG + lid;
  if (row >= P.b * P.heads * P.s) {
    return;
  }
  let len = softmax_lens[row / P.s / P.heads];
  let base = row * P.s;
  var m = -3.4e38;
  for (var i = 0u; i < len; i++) {
    m = max(m, softmax_p[base + i]);
  }
  var sum = 0.0;
  for (var i = 0u; i < len; i++) {
    let e = exp(softmax_p[base + i] - m);
    softmax_p[base + i] = e;
    sum += e;
  }
  let inv = select(0.0, 1.0 / sum, len > 0u);
  for (var i = 0u; i < P.s; i++) {
    softmax_p[base + i] = select(0.0, softmax_p[base + i] * inv, i < len);
  }
}

// ctx [b·heads, s, d] into [b, s, heads·d]: one thread per output element.
@group(0) @binding(1) var<storage, read> merge_ctx: array<f32>;
@group(0) @binding(2) var<storage, read_write> merge_out: array<f32>;

@compute @workgroup_size(EW)
fn merge_heads(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let e = flat(wid, nwg) * EW + lid;
  if (e >= P.b * P.s * P.h) {
    return;
  }
  let t = e / P.h;
  let c = e % P.h;
  let bh = (t / P.s) * P.heads + c / P.d;
  merge_out[e] = merge_ctx[(bh * P.s + t % P.s) * P.d + c % P.d];
}

// out[i] = mean of x[i, :lens[i], :] (or its first row when P.cls), divided
// by its L2 norm when P.normalize (by at least 1e-12, as sentence-transformers
// does); a text of length 0 gets zeros. One workgroup per text.
@group(0) @binding(1) var<storage, read> pool_lens: array<u32>;
@group(0) @binding(2) var<storage, read> pool_x: array<f32>;
@group(0) @binding(3) var<storage, read_write> pool_out: array<f32>;

@compute @workgroup_size(WG)
fn pool(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(wid, nwg);
  if (i >= P.b) {
    return;
  }
  let len = select(pool_lens[i], min(pool_lens[i], 1u), P.cls == 1u);
  var xs: array<f32, PER>;
  var sq = 0.0;
  for (var k = 0u; lid + k * WG < P.h; k++) {
    let c = lid + k * WG;
    var acc = 0.0;
    for (var t = 0u; t < len; t++) {
      acc += pool_x[(i * P.s + t) * P.h + c];
    }
    xs[k] = acc / f32(max(len, 1u));
    sq += xs[k] * xs[k];
  }
  let norm = sqrt(sum_wg(lid, sq));
  let sc = select(1.0, 1.0 / max(norm, 1e-12), P.normalize == 1u);
  for (var k = 0u; lid + k * WG < P.h; k++) {
    pool_out[i * P.h + lid + k * WG] = xs[k] * sc;
  }
}
