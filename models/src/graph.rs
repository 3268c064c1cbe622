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
    })
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

    /// The distinct matrix products of a run in bucket `m`, with how often
    /// one run calls each, heaviest first (by calls × M·K·N).
    pub fn products(&self, m: u32) -> Vec<Product> {
        let mut out: Vec<Product> = Vec::new();
        for s in &self.steps {
            if let Step::Matmul { kernel, k, n, last, .. } = s {
                let shape = [if *last { 1 } else { m }, *k, *n];
                match out.iter_mut().find(|p| p.op == *kernel && p.shape == shape) {
                    Some(p) => p.calls += 1,
                    None => out.push(Product { op: kernel.clone(), shape, calls: 1 }),
                }
            }
        }
        let work = |p: &Product| p.calls as u64 * p.shape.iter().map(|&x| x as u64).product::<u64>();
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
