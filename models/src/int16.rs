//! The int16 weights blob: the same bundle with its weight products'
//! matrices and its word embeddings quantised to signed 16-bit values, for
//! the browser runtime's `precision: 'int16'` (docs/model-bundle.md). It
//! halves what such a client downloads and spares it quantising 10 M
//! weights in JavaScript at load.
//!
//! Every tensor of the f32 blob appears in the same order, but
//! - each layer's `qkv.weight`, `attn_out.weight`, `ffn_in.weight` and
//!   `ffn_out.weight` (`[K, N]`, in × out) become `{name}.q` (`u32[K/2, N]`:
//!   `matmul_i16`'s B words, `q[2p][n] | q[2p+1][n] << 16`) and
//!   `{name}.scale` (`f32[N]`), quantised per column with
//!   [`qmax_weights`]`(K)` levels;
//! - `embeddings.word` (`[V, H]`) becomes `embeddings.word.q` (`u32[V, H/2]`,
//!   `q[r][2p] | q[r][2p+1] << 16`) and `embeddings.word.scale` (`f32[V]`),
//!   quantised per row with [`WORD_QMAX`] levels.
//!
//! The rule is the runtime's (`client-runtime/web/src/quant.ts`), bit for
//! bit: `scale = f32(max|x| / qmax)`, `q = round_half_even(f32(x ·
//! f32(qmax / max|x|)))` clamped to `±qmax`, and an all-zero vector gets
//! scale 0 and q 0. A value is `q · scale`.

use crate::manifest::{BertConfig, TensorEntry};

/// Levels of a word embedding row: the full 16 bits (no sum of products
/// follows the lookup).
pub const WORD_QMAX: i32 = 32767;

/// Levels of a weight column over a reduction of `k`:
/// `2^⌊log2 √((2³¹−1)/k)⌋ − 1` (2047 at K = 384, 1023 at K = 1536), so that
/// with the runtime's activation levels no `i32` sum can overflow.
pub fn qmax_weights(k: usize) -> i32 {
    let bits = (i32::MAX as f64 / k as f64).sqrt().log2().floor();
    (2f64.powf(bits) - 1.0) as i32
}

/// One vector's scale and the factor its values are multiplied by.
fn scale_of(max: f32, qmax: i32) -> (f32, f32) {
    if max > 0.0 { ((max as f64 / qmax as f64) as f32, (qmax as f64 / max as f64) as f32) } else { (0.0, 0.0) }
}

fn level(x: f32, inv: f32, qmax: i32) -> u32 {
    ((x * inv).round_ties_even() as i32).clamp(-qmax, qmax) as u16 as u32
}

/// `w` (`[k, n]`, row-major) per column: `matmul_i16` B words `[k/2, n]`
/// and `n` scales. `k` must be even.
pub fn quantise_columns(w: &[f32], k: usize, n: usize, qmax: i32) -> (Vec<u32>, Vec<f32>) {
    debug_assert!(k.is_multiple_of(2) && w.len() == k * n);
    let mut max = vec![0.0f32; n];
    for row in w.chunks_exact(n) {
        for (m, &x) in max.iter_mut().zip(row) {
            *m = m.max(x.abs());
        }
    }
    let (scales, inv): (Vec<f32>, Vec<f32>) = max.iter().map(|&m| scale_of(m, qmax)).unzip();
    let mut words = vec![0u32; k / 2 * n];
    for (p, out) in words.chunks_exact_mut(n).enumerate() {
        let (lo, hi) = (&w[2 * p * n..(2 * p + 1) * n], &w[(2 * p + 1) * n..(2 * p + 2) * n]);
        for j in 0..n {
            out[j] = level(lo[j], inv[j], qmax) | level(hi[j], inv[j], qmax) << 16;
        }
    }
    (words, scales)
}

/// `w` (`[rows, cols]`) per row: words `[rows, cols/2]` and `rows` scales.
/// `cols` must be even.
pub fn quantise_rows(w: &[f32], rows: usize, cols: usize, qmax: i32) -> (Vec<u32>, Vec<f32>) {
    debug_assert!(cols.is_multiple_of(2) && w.len() == rows * cols);
    let mut words = Vec::with_capacity(rows * cols / 2);
    let mut scales = Vec::with_capacity(rows);
    for row in w.chunks_exact(cols) {
        let (scale, inv) = scale_of(row.iter().fold(0.0f32, |m, x| m.max(x.abs())), qmax);
        scales.push(scale);
        words.extend(row.chunks_exact(2).map(|pair| level(pair[0], inv, qmax) | level(pair[1], inv, qmax) << 16));
    }
    (words, scales)
}

/// The signed value of half `h` (0 low, 1 high) of a word.
pub fn half(word: u32, h: usize) -> i32 {
    (word >> (16 * h)) as u16 as i16 as i32
}

/// Whether tensor `name` is a weight product's matrix (quantised per column).
fn is_product_weight(name: &str) -> bool {
    name.starts_with("layer.") && ["qkv.weight", "attn_out.weight", "ffn_in.weight", "ffn_out.weight"].iter().any(|w| name.ends_with(w))
}

/// The int16 blob built from the f32 blob `weights` and its `tensors`:
/// its tensor list and bytes (each tensor at a multiple of `align`).
pub(crate) fn build(c: &BertConfig, tensors: &[TensorEntry], weights: &[u8], align: usize) -> (Vec<TensorEntry>, Vec<u8>) {
    let mut out = Vec::with_capacity(tensors.len() + 2 * (4 * c.num_hidden_layers + 1));
    let mut bytes: Vec<u8> = Vec::with_capacity(weights.len() / 2);
    let mut push = |name: String, dtype: &str, shape: Vec<usize>, data: &mut dyn Iterator<Item = [u8; 4]>| {
        let pad = bytes.len().next_multiple_of(align) - bytes.len();
        bytes.extend(std::iter::repeat_n(0u8, pad));
        out.push(TensorEntry { name, dtype: dtype.into(), shape, offset: bytes.len() as u64 });
        for b in data {
            bytes.extend_from_slice(&b);
        }
    };
    for t in tensors {
        let start = t.offset as usize;
        let raw = &weights[start..start + t.bytes() as usize];
        let values: Vec<f32> = raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        let (words, scales, words_shape, scales_len) = if t.name == "embeddings.word" {
            let (rows, cols) = (t.shape[0], t.shape[1]);
            let (w, s) = quantise_rows(&values, rows, cols, WORD_QMAX);
            (w, s, vec![rows, cols / 2], rows)
        } else if is_product_weight(&t.name) {
            let (k, n) = (t.shape[0], t.shape[1]);
            let (w, s) = quantise_columns(&values, k, n, qmax_weights(k));
            (w, s, vec![k / 2, n], n)
        } else {
            push(t.name.clone(), "f32", t.shape.clone(), &mut raw.chunks_exact(4).map(|b| [b[0], b[1], b[2], b[3]]));
            continue;
        };
        push(format!("{}.q", t.name), "u32", words_shape, &mut words.iter().map(|w| w.to_le_bytes()));
        push(format!("{}.scale", t.name), "f32", vec![scales_len], &mut scales.iter().map(|s| s.to_le_bytes()));
    }
    (out, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_keep_every_sum_in_i32() {
        assert_eq!([qmax_weights(384), qmax_weights(1536)], [2047, 1023]);
        for k in [2, 64, 384, 768, 1536, 3072, 4096] {
            // The runtime's activation levels for the same K.
            let qa = (i32::MAX as i64 / (qmax_weights(k) as i64 * k as i64)).min(32767);
            assert!(qa >= 1 && qa * qmax_weights(k) as i64 * k as i64 <= i32::MAX as i64, "K = {k}");
        }
    }

    #[test]
    fn columns_round_half_even_and_reach_qmax() {
        // Column 0: max 4 over qmax 4, so the factor is 1 and ties show;
        // column 1 all zeros; column 2 scaled.
        let k = 8;
        let col0 = [4.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -4.0];
        let w: Vec<f32> = (0..k).flat_map(|r| [col0[r], 0.0, 0.1 * (r as f32 + 1.0)]).collect();
        let (words, scales) = quantise_columns(&w, k, 3, 4);
        let q = |row: usize, col: usize| half(words[(row / 2) * 3 + col], row % 2);
        assert_eq!((0..k).map(|r| q(r, 0)).collect::<Vec<_>>(), [4, 0, 2, 2, 0, -2, -2, -4]);
        assert_eq!((scales[0], scales[1]), (1.0, 0.0));
        assert!((0..k).all(|r| q(r, 1) == 0));
        assert_eq!(q(k - 1, 2), 4, "the column's largest value maps to qmax");
        for r in 0..k {
            let x = w[r * 3 + 2];
            assert!((q(r, 2) as f32 * scales[2] - x).abs() <= scales[2] / 2.0 * 1.0001, "row {r}");
        }
    }

    #[test]
    fn rows_pack_pairs_low_first() {
        let w = [1.0f32, -1.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0];
        let (words, scales) = quantise_rows(&w, 2, 4, WORD_QMAX);
        assert_eq!(scales, [(1.0f64 / 32767.0) as f32, 0.0]);
        assert_eq!([half(words[0], 0), half(words[0], 1), half(words[1], 0), half(words[1], 1)], [32767, -32767, 8192, 0]);
        assert_eq!(&words[2..], [0, 0]);
    }
}
