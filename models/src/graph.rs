//! The decoder graph: a llama-family model's computation, once, as data.
//!
//! Both executors of a decoder run this list of steps and nothing else: the
//! browser runtime's Wasm backend (TypeScript, `TextGenerator`) and the
//! native runner (`webtune_client_runtime::decoder`, wasmtime, behind
//! `webtune generate`). Neither knows what a llama block is; each knows
//! how to run a [`Step`]. The graph is derived from a format-2 manifest by
//! [`decoder_graph`] and served beside it, so a new family (or a fused
//! step) changes this file and not two runtimes.
//!
//! # How a run reads it
//! A run feeds `T` new tokens starting at position `pos0` (a prompt's chunk
//! when prefilling, `T = 1` when decoding). Activation buffers
//! ([`Buffer`]) have `cols` floats per row and [`Rows::Tokens`] rows (`T`,
//! padded up to the matrix products' row bucket) or one row
//! ([`Rows::One`]). Caches ([`Cache`]) have `cols` floats per position and
//! as many positions as the executor's context. Weights are the manifest's
//! tensors, by name, with the parts its format lists (`w`, `d`, `m`).
//!
//! - The tuned matrix products ([`Step::Matmul`]) run with `M` = the run's
//!   row bucket ([`DecoderGraph::buckets`]: the smallest that holds `T`;
//!   padded rows compute values nobody reads), or `M = 1` on the last row
//!   (`last`), with the op named by `kernel` and the shape `M, k, n`.
//! - Every other step is one export of the fixed kernels
//!   (`client-runtime/web/src/decoder-kernels.wat`), called on the `T` real
//!   rows, never the padding, so the caches hold only real positions.
//! - A prompt longer than the largest bucket is fed in chunks of that
//!   bucket; attention reads the cache at run-time length, so no kernel
//!   depends on the context's length.
//!
//! The logits of the run's last token end in [`DecoderGraph::logits`]
//! (one row of `vocab` floats); sampling is the executor's.
//!
//! # Fused products
//! [`DecoderGraph::fused`] names runs of consecutive steps that one tuned
//! product computes in the decode step (bucket 1) on WebGPU: an RMSNorm and
//! the product that reads it (`+rms_norm`), a product and the SwiGLU of its
//! output (`+swiglu`), a product and the add of its output into the
//! residual stream (`+residual`), as the block-quantised ops' epilogues
//! (docs/ops.md; [`fuse`] finds them). The steps stay in the list and
//! mean what they always meant: an executor without the fused op (the
//! Wasm backend, the native runner, every prefill bucket) runs them one
//! after another, and the fused op is defined as their arithmetic.

use serde::{Deserialize, Serialize};

/// The graph format this crate writes.
pub const GRAPH_VERSION: u32 = 1;

/// Row buckets of the tuned products: a run of `T` tokens uses the
/// smallest bucket `≥ T`. Few buckets keep the kernels a device tunes
/// few; a prompt chunk is at most the last one.
pub const BUCKETS: [u32; 6] = [1, 16, 32, 64, 128, 256];

pub use crate::manifest::TensorFormat as Format;

impl Format {
    /// The tuned op that multiplies by a matrix stored this way.
    pub fn matmul_op(self) -> &'static str {
        match self {
            Format::F32 => "matmul",
            Format::Q4_0 => "matmul_q4",
            Format::Q4_1 => "matmul_q4_1",
            Format::Q8_0 => "matmul_q8_0",
        }
    }
}

/// How many rows an activation buffer has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Rows {
    /// One per token of the run, padded to its bucket.
    Tokens,
    /// One.
    One,
}

/// An activation buffer, f32.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Buffer {
    pub name: String,
    pub cols: u32,
    pub rows: Rows,
}

/// A key or value cache: `cols` f32 per position, one row per position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Cache {
    pub name: String,
    pub cols: u32,
}

/// One step. Buffers and caches are named; `weight`/`table` name a tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Step {
    /// `out[r] = table[ids[r]]`, dequantised: export `embed_q8`,
    /// `embed_q4` or `embed_f32` by the table's format.
    Embed { table: String, format: Format, out: String },
    /// `out = x / rms(x) ⊙ weight` per row (export `rmsnorm`); with
    /// `last`, only x's last real row, into out's one row.
    RmsNorm { x: String, weight: String, out: String, eps: f32, last: bool },
    /// `out[M, n] = a[M, k] · weightᵀ` with the tuned op `kernel`
    /// (`M` = the bucket, or 1 with `last`: a's last real row).
    Matmul { kernel: String, a: String, weight: String, format: Format, out: String, k: u32, n: u32, last: bool },
    /// Rotary embedding of the first `heads` heads of each row of x
    /// (export `rope`), rows `stride` floats apart.
    Rope { x: String, stride: u32, heads: u32, head_dim: u32, theta: f64 },
    /// Columns `k_col..+width` and `v_col..+width` of x's rows into the
    /// caches at positions `pos0..pos0+T` (export `kv_store`).
    KvStore { x: String, stride: u32, k_col: u32, v_col: u32, width: u32, k_cache: String, v_cache: String },
    /// Causal grouped-query attention of x's first `heads` heads over the
    /// caches, into out (`heads·head_dim` per row; export `attention`).
    Attention {
        x: String,
        stride: u32,
        heads: u32,
        kv_heads: u32,
        head_dim: u32,
        k_cache: String,
        v_cache: String,
        out: String,
        scale: f32,
    },
    /// `out = silu(x[:, :ffn]) ⊙ x[:, ffn:]` (export `swiglu`).
    SwiGlu { x: String, ffn: u32, out: String },
    /// `x += y` over `cols` floats per row (export `add`).
    Add { x: String, y: String, cols: u32 },
}

/// Consecutive steps that one tuned product computes in the decode step
/// (bucket 1): steps `first..first + steps`, the op `kernel` of shape
/// `1, k, n` (a block-quantised op with `+rms_norm`, `+swiglu` and
/// `+residual` epilogues, docs/ops.md). Its arguments come from the
/// steps: A is the norm's `x` (else the product's `a`), G and E the norm's
/// weight and eps, W the product's weight, R and C the add's `x` (else C
/// the SwiGLU's or the product's `out`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Fused {
    pub first: u32,
    pub steps: u32,
    pub kernel: String,
    pub k: u32,
    pub n: u32,
}

/// A decoder's computation for one run of tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecoderGraph {
    pub version: u32,
    pub hidden: u32,
    pub vocab: u32,
    /// The model's context length: no run goes past it.
    pub context: u32,
    pub buckets: Vec<u32>,
    pub buffers: Vec<Buffer>,
    pub caches: Vec<Cache>,
    pub steps: Vec<Step>,
    /// The buffer holding the last token's logits (one row of `vocab`).
    pub logits: String,
    /// Runs of steps the decode step may run as one product ([`fuse`]);
    /// absent in graphs from before them, which run every step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fused: Vec<Fused>,
}

/// A llama decoder's dimensions: what [`decoder_graph`] needs of a manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaDims {
    pub vocab: u32,
    pub hidden: u32,
    pub layers: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub ffn: u32,
    pub rope_theta: f64,
    pub rms_eps: f64,
    pub context: u32,
    /// Whether the output head is the token embedding.
    pub tied: bool,
}

/// One matrix product a run needs: the kernels a device fetches and tunes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Product {
    /// The op's name on the wire (`matmul_q4_1`, ...).
    pub op: String,
    /// `M,K,N`.
    pub shape: [u32; 3],
    /// How many times one run calls it.
    pub calls: u32,
}

/// The graph of a llama decoder with dimensions `d`, whose tensors' formats
/// `format` gives by bundle name (`blk.0.attn_qkv`, `token_embd`, ...).
/// `None` names the first tensor it needs and `format` does not know.
pub fn decoder_graph(d: &LlamaDims, format: &dyn Fn(&str) -> Option<Format>) -> Result<DecoderGraph, String> {
    let need = |name: &str| format(name).ok_or_else(|| format!("the bundle has no tensor `{name}`"));
    let (h, hd) = (d.hidden, d.head_dim);
    let q_cols = d.heads * hd;
    let kv_cols = d.kv_heads * hd;
    let qkv_cols = q_cols + 2 * kv_cols;
    if !h.is_multiple_of(32) || !d.ffn.is_multiple_of(32) || !q_cols.is_multiple_of(32) || !hd.is_multiple_of(4) {
        return Err(format!("hidden {h}, FFN {} and heads·head_dim {q_cols} must be multiples of 32, head_dim {hd} of 4", d.ffn));
    }
    if d.kv_heads == 0 || !d.heads.is_multiple_of(d.kv_heads) {
        return Err(format!("{} query heads do not group over {} key/value heads", d.heads, d.kv_heads));
    }
    let buf = |name: &str, cols: u32, rows: Rows| Buffer { name: name.into(), cols, rows };
    let buffers = vec![
        buf("x", h, Rows::Tokens),
        buf("h", h, Rows::Tokens),
        buf("qkv", qkv_cols, Rows::Tokens),
        buf("att", q_cols, Rows::Tokens),
        buf("t", h, Rows::Tokens),
        buf("gu", 2 * d.ffn, Rows::Tokens),
        buf("act", d.ffn, Rows::Tokens),
        buf("last", h, Rows::One),
        buf("logits", d.vocab, Rows::One),
    ];
    let mut caches = Vec::new();
    let embd = need("token_embd")?;
    let mut steps = vec![Step::Embed { table: "token_embd".into(), format: embd, out: "x".into() }];
    let eps = d.rms_eps as f32;
    let matmul = |a: &str, weight: String, format: Format, out: &str, k: u32, n: u32, last: bool| Step::Matmul {
        kernel: format.matmul_op().into(),
        a: a.into(),
        weight,
        format,
        out: out.into(),
        k,
        n,
        last,
    };
    for l in 0..d.layers {
        let t = |s: &str| format!("blk.{l}.{s}");
        let (kc, vc) = (format!("k.{l}"), format!("v.{l}"));
        caches.push(Cache { name: kc.clone(), cols: kv_cols });
        caches.push(Cache { name: vc.clone(), cols: kv_cols });
        need(&t("attn_norm"))?;
        need(&t("ffn_norm"))?;
        steps.push(Step::RmsNorm { x: "x".into(), weight: t("attn_norm"), out: "h".into(), eps, last: false });
        steps.push(matmul("h", t("attn_qkv"), need(&t("attn_qkv"))?, "qkv", h, qkv_cols, false));
        steps.push(Step::Rope { x: "qkv".into(), stride: qkv_cols, heads: d.heads + d.kv_heads, head_dim: hd, theta: d.rope_theta });
        steps.push(Step::KvStore {
            x: "qkv".into(),
            stride: qkv_cols,
            k_col: q_cols,
            v_col: q_cols + kv_cols,
            width: kv_cols,
            k_cache: kc.clone(),
            v_cache: vc.clone(),
        });
        steps.push(Step::Attention {
            x: "qkv".into(),
            stride: qkv_cols,
            heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: hd,
            k_cache: kc,
            v_cache: vc,
            out: "att".into(),
            scale: (1.0 / (hd as f64).sqrt()) as f32,
        });
        steps.push(matmul("att", t("attn_output"), need(&t("attn_output"))?, "t", q_cols, h, false));
        steps.push(Step::Add { x: "x".into(), y: "t".into(), cols: h });
        steps.push(Step::RmsNorm { x: "x".into(), weight: t("ffn_norm"), out: "h".into(), eps, last: false });
        steps.push(matmul("h", t("ffn_gate_up"), need(&t("ffn_gate_up"))?, "gu", h, 2 * d.ffn, false));
        steps.push(Step::SwiGlu { x: "gu".into(), ffn: d.ffn, out: "act".into() });
        steps.push(matmul("act", t("ffn_down"), need(&t("ffn_down"))?, "t", d.ffn, h, false));
        steps.push(Step::Add { x: "x".into(), y: "t".into(), cols: h });
    }
    need("output_norm")?;
    steps.push(Step::RmsNorm { x: "x".into(), weight: "output_norm".into(), out: "last".into(), eps, last: true });
    let head = if d.tied { "token_embd" } else { "output" };
    steps.push(matmul("last", head.into(), need(head)?, "logits", h, d.vocab, true));
    let fused = fuse(&steps, "logits");
    Ok(DecoderGraph {
        version: GRAPH_VERSION,
        hidden: h,
        vocab: d.vocab,
        context: d.context,
        buckets: BUCKETS.to_vec(),
        buffers,
        caches,
        steps,
        logits: "logits".into(),
        fused,
    })
}

/// The buffers a step reads and the one it writes (a cache store writes
/// caches, which no fusion joins).
fn io(s: &Step) -> (Vec<&str>, Option<&str>) {
    match s {
        Step::Embed { out, .. } => (vec![], Some(out)),
        Step::RmsNorm { x, out, .. } => (vec![x], Some(out)),
        Step::Matmul { a, out, .. } => (vec![a], Some(out)),
        Step::Rope { x, .. } => (vec![x], Some(x)),
        Step::KvStore { x, .. } => (vec![x], None),
        Step::Attention { x, out, .. } => (vec![x], Some(out)),
        Step::SwiGlu { x, out, .. } => (vec![x], Some(out)),
        Step::Add { x, y, .. } => (vec![x, y], Some(x)),
    }
}

/// Whether buffer `b` is not read after step `at` before something writes
/// it again (so a fusion may skip writing it), and is not `keep`.
fn dead_after(steps: &[Step], at: usize, b: &str, keep: &str) -> bool {
    if b == keep {
        return false;
    }
    for s in &steps[at + 1..] {
        let (reads, writes) = io(s);
        if reads.contains(&b) {
            return false;
        }
        if writes == Some(b) {
            return true;
        }
    }
    true
}

/// The runs of `steps` one product with epilogues computes (docs/ops.md):
/// an RMSNorm into the buffer the next product reads alone (`+rms_norm`;
/// both on every row, or both on the last); the product's SwiGLU over its
/// output of twice the FFN's columns (`+swiglu`); the product's add into
/// the residual stream, of its own columns (`+residual`). The first two
/// for block-quantised products only; f32 ones (`matmul`) take
/// `+residual`. A buffer a fusion no longer writes must be dead after it
/// (`keep`, the logits, never is). Left to right, each step in one run at
/// most, the longest run first.
pub fn fuse(steps: &[Step], keep: &str) -> Vec<Fused> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        let mut at = i;
        let mut suffix = String::new();
        let mut norm_last = None;
        if let (Step::RmsNorm { out: h, last, .. }, Some(Step::Matmul { a, last: ml, .. })) = (&steps[i], steps.get(i + 1))
            && a == h
            && last == ml
            && dead_after(steps, i + 1, h, keep)
        {
            suffix.push_str("+rms_norm");
            norm_last = Some(*last);
            at = i + 1;
        }
        let Step::Matmul { kernel, format, out: mo, k, n, last, .. } = &steps[at] else {
            i += 1;
            continue;
        };
        // f32 products (`matmul`) take `+residual` only.
        let block = matches!(format, Format::Q4_0 | Format::Q4_1 | Format::Q8_0);
        if (!block && norm_last.is_some()) || norm_last.is_some_and(|l| l != *last) {
            i += 1;
            continue;
        }
        let mut end = at;
        let mut cols = *n;
        if let Some(Step::SwiGlu { x, ffn, .. }) = steps.get(end + 1)
            && block
            && x == mo
            && 2 * ffn == *n
            && !last
            && dead_after(steps, end + 1, mo, keep)
        {
            suffix.push_str("+swiglu");
            cols = *ffn;
            end += 1;
        }
        let written = match &steps[end] {
            Step::SwiGlu { out, .. } => out,
            _ => mo,
        };
        if let Some(Step::Add { x, y, cols: c }) = steps.get(end + 1)
            && y == written
            && *c == cols
            && x != written
            && !last
            && dead_after(steps, end + 1, written, keep)
        {
            suffix.push_str("+residual");
            end += 1;
        }
        if suffix.is_empty() {
            i += 1;
            continue;
        }
        out.push(Fused { first: i as u32, steps: (end + 1 - i) as u32, kernel: format!("{kernel}{suffix}"), k: *k, n: cols });
        i = end + 1;
    }
    out
}

impl LlamaDims {
    /// The dimensions a decoder manifest gives, or the field that does not
    /// fit a `u32`.
    pub fn of(c: &crate::manifest::DecoderConfig) -> Result<LlamaDims, String> {
        let u = |what: &str, x: usize| u32::try_from(x).map_err(|_| format!("{what} {x} does not fit a u32"));
        Ok(LlamaDims {
            vocab: u("vocab_size", c.vocab_size)?,
            hidden: u("hidden_size", c.hidden_size)?,
            layers: u("num_layers", c.num_layers)?,
            heads: u("num_heads", c.num_heads)?,
            kv_heads: u("num_kv_heads", c.num_kv_heads)?,
            head_dim: u("head_dim", c.head_dim)?,
            ffn: u("ffn_size", c.ffn_size)?,
            rope_theta: c.rope_theta,
            rms_eps: c.rms_eps,
            context: u("context_length", c.context_length)?,
            tied: c.tied_embeddings,
        })
    }
}

/// The graph of a decoder bundle (its manifest's dimensions and tensors).
pub fn graph_of(m: &crate::manifest::DecoderManifest) -> Result<DecoderGraph, String> {
    decoder_graph(&LlamaDims::of(&m.config)?, &|name: &str| m.tensor(name).map(|t| t.format))
}

impl DecoderGraph {
    /// The row bucket of a run of `tokens` tokens: the smallest bucket that
    /// holds them, or `None` past the largest (feed such a prompt in chunks).
    pub fn bucket(&self, tokens: u32) -> Option<u32> {
        self.buckets.iter().copied().find(|&b| b >= tokens.max(1))
    }

    /// The distinct matrix products of a run in bucket `m` when every step
    /// runs on its own (Wasm, the native runner, WebGPU's prefill), with how
    /// often one run calls each, heaviest first (by calls × M·K·N, twice
    /// that for a `+swiglu` product's 2N rows of weights).
    pub fn products(&self, m: u32) -> Vec<Product> {
        self.products_of(m, false)
    }

    /// The same for WebGPU, whose decode step (bucket 1) runs the
    /// [`DecoderGraph::fused`] runs as one product each (the fused op, in
    /// place of the run's own product); other buckets as [`DecoderGraph::products`].
    pub fn fused_products(&self, m: u32) -> Vec<Product> {
        self.products_of(m, m == 1)
    }

    fn products_of(&self, m: u32, fused: bool) -> Vec<Product> {
        let mut out: Vec<Product> = Vec::new();
        let mut add = |op: &str, shape: [u32; 3]| match out.iter_mut().find(|p| p.op == op && p.shape == shape) {
            Some(p) => p.calls += 1,
            None => out.push(Product { op: op.to_string(), shape, calls: 1 }),
        };
        let mut i = 0;
        while i < self.steps.len() {
            if let Some(f) = self.fused.iter().find(|f| fused && f.first as usize == i) {
                add(&f.kernel, [1, f.k, f.n]);
                i += f.steps as usize;
                continue;
            }
            if let Step::Matmul { kernel, k, n, last, .. } = &self.steps[i] {
                add(kernel, [if *last { 1 } else { m }, *k, *n]);
            }
            i += 1;
        }
        // A +swiglu product multiplies by twice its N rows of weights.
        let work = |p: &Product| {
            let rows = if p.op.contains("+swiglu") { 2 } else { 1 };
            rows * p.calls as u64 * p.shape.iter().map(|&x| x as u64).product::<u64>()
        };
        out.sort_by(|a, b| work(b).cmp(&work(a)).then_with(|| a.cmp(b)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smollm2() -> LlamaDims {
        LlamaDims {
            vocab: 49152,
            hidden: 576,
            layers: 30,
            heads: 9,
            kv_heads: 3,
            head_dim: 64,
            ffn: 1536,
            rope_theta: 100000.0,
            rms_eps: 1e-5,
            context: 8192,
            tied: true,
        }
    }

    fn all_q4_1(name: &str) -> Option<Format> {
        Some(if name == "token_embd" {
            Format::Q8_0
        } else if name.ends_with("norm") {
            Format::F32
        } else {
            Format::Q4_1
        })
    }

    #[test]
    fn smollm2_graph_has_the_products_a_llama_step_needs() {
        let g = decoder_graph(&smollm2(), &all_q4_1).unwrap();
        // Embed, 12 steps a block, final norm and head.
        assert_eq!(g.steps.len(), 1 + 30 * 12 + 2);
        assert_eq!(g.caches.len(), 60);
        let p = g.products(1);
        let shapes: Vec<(&str, [u32; 3], u32)> = p.iter().map(|p| (p.op.as_str(), p.shape, p.calls)).collect();
        assert_eq!(
            shapes,
            vec![
                ("matmul_q4_1", [1, 576, 3072], 30),
                ("matmul_q8_0", [1, 576, 49152], 1),
                ("matmul_q4_1", [1, 1536, 576], 30),
                ("matmul_q4_1", [1, 576, 960], 30),
                ("matmul_q4_1", [1, 576, 576], 30),
            ]
        );
        // In a prefill bucket the head still runs on the last row alone.
        assert!(g.products(128).iter().any(|p| p.op == "matmul_q8_0" && p.shape == [1, 576, 49152]));
        assert_eq!(g.bucket(1), Some(1));
        assert_eq!(g.bucket(17), Some(32));
        assert_eq!(g.bucket(256), Some(256));
        assert_eq!(g.bucket(257), None);
    }

    #[test]
    fn the_decode_step_fuses_norms_swiglu_and_residual_adds_into_its_products() {
        let g = decoder_graph(&smollm2(), &all_q4_1).unwrap();
        // Per block: norm+QKV, O+add, norm+gate/up+SwiGLU, down+add; then norm+head.
        assert_eq!(g.fused.len(), 30 * 4 + 1);
        let names: Vec<(u32, u32, &str, u32, u32)> = g.fused[..4].iter().map(|f| (f.first, f.steps, f.kernel.as_str(), f.k, f.n)).collect();
        assert_eq!(
            names,
            vec![
                (1, 2, "matmul_q4_1+rms_norm", 576, 960),
                (6, 2, "matmul_q4_1+residual", 576, 576),
                (8, 3, "matmul_q4_1+rms_norm+swiglu", 576, 1536),
                (11, 2, "matmul_q4_1+residual", 1536, 576),
            ]
        );
        let head = g.fused.last().unwrap();
        assert_eq!((head.steps, head.kernel.as_str(), head.n), (2, "matmul_q8_0+rms_norm", 49152));
        assert_eq!(head.first as usize, g.steps.len() - 2);
        let p: Vec<(String, [u32; 3], u32)> = g.fused_products(1).into_iter().map(|p| (p.op, p.shape, p.calls)).collect();
        assert_eq!(
            p,
            vec![
                ("matmul_q4_1+rms_norm+swiglu".to_string(), [1, 576, 1536], 30),
                ("matmul_q8_0+rms_norm".to_string(), [1, 576, 49152], 1),
                ("matmul_q4_1+residual".to_string(), [1, 1536, 576], 30),
                ("matmul_q4_1+rms_norm".to_string(), [1, 576, 960], 30),
                ("matmul_q4_1+residual".to_string(), [1, 576, 576], 30),
            ]
        );
        // Every fused op is a valid name of the compiler's (docs/ops.md); prefill buckets run the steps.
        assert_eq!(g.fused_products(16), g.products(16));
        // f32 products take +residual only (matmul+residual): their norms and SwiGLU stay steps of their own.
        let f32s = decoder_graph(&smollm2(), &|n: &str| Some(if n == "token_embd" { Format::Q8_0 } else { Format::F32 })).unwrap();
        let kinds: Vec<&str> = f32s.fused.iter().map(|f| f.kernel.as_str()).collect();
        assert_eq!(kinds.len(), 2 * 30 + 1);
        assert!(kinds[..60].iter().all(|k| *k == "matmul+residual") && kinds[60] == "matmul_q8_0+rms_norm", "{kinds:?}");
        let ops: Vec<String> = f32s.fused_products(1).into_iter().map(|p| p.op).collect();
        assert_eq!(ops, ["matmul", "matmul_q8_0+rms_norm", "matmul+residual", "matmul", "matmul+residual"]);
    }

    /// The Node tests' small llama (client-runtime/web/test/small-llama.mjs,
    /// whose graph writes this list out): every weight format at once.
    #[test]
    fn the_small_llama_fuses_as_the_node_tests_expect() {
        let d = LlamaDims {
            vocab: 72,
            hidden: 64,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            head_dim: 16,
            ffn: 96,
            rope_theta: 10000.0,
            rms_eps: 1e-5,
            context: 300,
            tied: true,
        };
        let formats = |n: &str| {
            Some(match n.rsplit('.').next().unwrap() {
                "token_embd" => Format::Q8_0,
                "attn_qkv" | "ffn_gate_up" => Format::Q4_1,
                "ffn_down" => Format::Q4_0,
                _ => Format::F32,
            })
        };
        let g = decoder_graph(&d, &formats).unwrap();
        let got: Vec<(u32, u32, &str, u32, u32)> = g.fused.iter().map(|f| (f.first, f.steps, f.kernel.as_str(), f.k, f.n)).collect();
        let mut want = Vec::new();
        for l in 0..2 {
            let b = 1 + 12 * l;
            want.extend([
                (b, 2, "matmul_q4_1+rms_norm", 64, 128),
                (b + 5, 2, "matmul+residual", 64, 64),
                (b + 7, 3, "matmul_q4_1+rms_norm+swiglu", 64, 96),
                (b + 10, 2, "matmul_q4+residual", 96, 64),
            ]);
        }
        want.push((25, 2, "matmul_q8_0+rms_norm", 64, 72));
        assert_eq!(got, want);
    }

    #[test]
    fn a_fusion_never_skips_a_buffer_read_later() {
        let g = decoder_graph(&smollm2(), &all_q4_1).unwrap();
        // The norm's output read again after the product: no +rms_norm there.
        let mut steps = g.steps.clone();
        steps.insert(3, Step::Add { x: "t".into(), y: "h".into(), cols: 576 });
        let f = fuse(&steps, "logits");
        assert_eq!((f[0].first, f[0].kernel.as_str()), (7, "matmul_q4_1+residual"), "{f:?}");
        // Without that read, the same run fuses.
        assert_eq!(fuse(&g.steps, "logits")[0].kernel, "matmul_q4_1+rms_norm");
        // A SwiGLU over other columns, or an add of another width, stays a step of its own.
        let mut steps = g.steps.clone();
        let Step::SwiGlu { ffn, .. } = &mut steps[10] else { panic!("step 10 is the first block's SwiGLU") };
        *ffn = 512;
        assert_eq!(fuse(&steps, "logits")[2].kernel, "matmul_q4_1+rms_norm");
    }

    #[test]
    fn graph_round_trips_through_json() {
        let g = decoder_graph(&smollm2(), &all_q4_1).unwrap();
        let json = serde_json::to_string(&g).unwrap();
        assert!(json.contains(r#""step":"attention""#), "{}", &json[..200]);
        let back: DecoderGraph = serde_json::from_str(&json).unwrap();
        assert_eq!(back, g);
    }

    #[test]
    fn graph_refuses_what_the_kernels_cannot_run() {
        let missing = decoder_graph(&smollm2(), &|n: &str| if n == "blk.3.ffn_down" { None } else { all_q4_1(n) });
        assert_eq!(missing.unwrap_err(), "the bundle has no tensor `blk.3.ffn_down`");
        let odd = LlamaDims { hidden: 100, ..smollm2() };
        assert!(decoder_graph(&odd, &all_q4_1).unwrap_err().contains("multiples of 32"));
        let groups = LlamaDims { kv_heads: 2, ..smollm2() };
        assert!(decoder_graph(&groups, &all_q4_1).unwrap_err().contains("do not group"));
        let untied = LlamaDims { tied: false, ..smollm2() };
        let no_head = decoder_graph(&untied, &|n: &str| if n == "output" { None } else { all_q4_1(n) });
        assert_eq!(no_head.unwrap_err(), "the bundle has no tensor `output`");
        let head = decoder_graph(&untied, &all_q4_1).unwrap();
        assert!(matches!(head.steps.last(), Some(Step::Matmul { weight, .. }) if weight == "output"));
    }
}
