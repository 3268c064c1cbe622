//! The matrix products one encoder layer runs, for a batch of `B` texts
//! padded to `S` tokens: the kernels a device must fetch (and may tune) to
//! run the model. With `M = B·S`, hidden `H`, FFN width `I`, `h` heads of
//! width `d = H/h`:
//!
//! | name | op | shape |
//! |---|---|---|
//! | `qkv` | `matmul` | `M,H,3H` |
//! | `scores` | `batch_matmul` | `h·B,S,d,S` |
//! | `context` | `batch_matmul` | `h·B,S,S,d` |
//! | `attn_out` | `matmul` | `M,H,H` |
//! | `ffn_in` | `matmul+bias+gelu` | `M,H,I` |
//! | `ffn_out` | `matmul` | `M,I,H` |
//!
//! Every layer has the same six; the runtime runs them once per layer.
//! `ffn_in` carries the FFN's bias and exact GELU as a fused epilogue
//! (docs/ops.md, "Fused epilogues"): the browser runtime runs that kernel.

use crate::manifest::BertConfig;

/// One matrix product of a layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matmul {
    /// Its role in the layer: `qkv`, `scores`, `context`, `attn_out`, `ffn_in`, `ffn_out`.
    pub name: &'static str,
    /// `matmul`, `batch_matmul` or `matmul+bias+gelu` (docs/ops.md).
    pub op: &'static str,
    /// `M,K,N` or `B,M,K,N`.
    pub shape: Vec<u32>,
}

/// The matrix products of one layer of `c` for `batch` texts padded to
/// `seq` tokens, or `None` when a dimension does not fit a `u32`.
pub fn matmuls(c: &BertConfig, batch: u32, seq: u32) -> Option<Vec<Matmul>> {
    let u = |x: usize| u32::try_from(x).ok();
    let (h, i, heads) = (u(c.hidden_size)?, u(c.intermediate_size)?, u(c.num_attention_heads)?);
    let d = h / heads;
    let m = batch.checked_mul(seq)?;
    let bh = batch.checked_mul(heads)?;
    let mm = |name, shape: Vec<u32>| Matmul { name, op: "matmul", shape };
    let bmm = |name, shape: Vec<u32>| Matmul { name, op: "batch_matmul", shape };
    Some(vec![
        mm("qkv", vec![m, h, h.checked_mul(3)?]),
        bmm("scores", vec![bh, seq, d, seq]),
        bmm("context", vec![bh, seq, seq, d]),
        mm("attn_out", vec![m, h, h]),
        Matmul { name: "ffn_in", op: "matmul+bias+gelu", shape: vec![m, h, i] },
        mm("ffn_out", vec![m, i, h]),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minilm_shapes_at_batch_8_and_128_tokens() {
        // all-MiniLM-L6-v2: 12 heads of 384/12 = 32, not the 64 of BERT-base.
        let c = BertConfig {
            vocab_size: 30522,
            hidden_size: 384,
            num_hidden_layers: 6,
            num_attention_heads: 12,
            intermediate_size: 1536,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            hidden_act: "gelu".into(),
        };
        let s: Vec<(&str, &str, Vec<u32>)> = matmuls(&c, 8, 128).unwrap().into_iter().map(|m| (m.name, m.op, m.shape)).collect();
        assert_eq!(
            s,
            vec![
                ("qkv", "matmul", vec![1024, 384, 1152]),
                ("scores", "batch_matmul", vec![96, 128, 32, 128]),
                ("context", "batch_matmul", vec![96, 128, 128, 32]),
                ("attn_out", "matmul", vec![1024, 384, 384]),
                ("ffn_in", "matmul+bias+gelu", vec![1024, 384, 1536]),
                ("ffn_out", "matmul", vec![1024, 1536, 384]),
            ]
        );
        assert!(matmuls(&c, u32::MAX, 2).is_none());
    }
}
