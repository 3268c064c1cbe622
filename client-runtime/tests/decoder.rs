//! The native decoder executor on a small random llama in f32, against a
//! float64 forward pass written here from the architecture's definition
//! (not from the graph): embedding, RMSNorm, Q/K/V, rotary embedding on
//! adjacent pairs, grouped-query causal attention, SwiGLU FFN, residuals,
//! tied head. Prefill in one run, in chunks, and token by token must all
//! give the reference's logits; the memory never grows while decoding.

use std::collections::HashMap;

use webtune_client_runtime::decoder::{Decoder, Part, Sampler, Sampling, Tensor, TunedKernel, argmax};
use webtune_client_runtime::wasm::WasmEngine;
use webtune_compiler::{Op, Schedule, Target, compile};
use webtune_models::graph::{DecoderGraph, Format, LlamaDims, decoder_graph};

const DIMS: LlamaDims = LlamaDims {
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

/// A seeded generator (SplitMix64), values in [-1, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
    fn vec(&mut self, n: usize, scale: f64) -> Vec<f32> {
        (0..n).map(|_| (self.next() * scale) as f32).collect()
    }
}

/// The model's tensors as the reference reads them: matrices [N][K] (out, in).
struct Model {
    embd: Vec<f32>,
    out_norm: Vec<f32>,
    layers: Vec<Layer>,
}
struct Layer {
    attn_norm: Vec<f32>,
    qkv: Vec<f32>,
    o: Vec<f32>,
    ffn_norm: Vec<f32>,
    gate_up: Vec<f32>,
    down: Vec<f32>,
}

fn model() -> Model {
    let d = &DIMS;
    let (h, q, kv, f) = (d.hidden as usize, (d.heads * d.head_dim) as usize, (d.kv_heads * d.head_dim) as usize, d.ffn as usize);
    let mut r = Rng(7);
    let norm = |r: &mut Rng| r.vec(h, 0.5).into_iter().map(|x| 1.0 + x).collect::<Vec<f32>>();
    Model {
        embd: r.vec(d.vocab as usize * h, 1.0),
        out_norm: norm(&mut r),
        layers: (0..d.layers)
            .map(|_| Layer {
                attn_norm: norm(&mut r),
                qkv: r.vec((q + 2 * kv) * h, 0.3),
                o: r.vec(h * q, 0.3),
                ffn_norm: norm(&mut r),
                gate_up: r.vec(2 * f * h, 0.3),
                down: r.vec(h * f, 0.3),
            })
            .collect(),
    }
}

/// The bundle's f32 layout: matrices transposed to [K][N], parts 64-byte aligned.
fn bundle(m: &Model) -> (Vec<u8>, HashMap<String, Tensor>) {
    let mut blob: Vec<u8> = Vec::new();
    let mut tensors = HashMap::new();
    let mut put = |name: String, vals: Vec<f32>| {
        let offset = blob.len() as u64;
        blob.extend_from_slice(bytemuck::cast_slice(&vals));
        blob.resize(blob.len().next_multiple_of(64), 0);
        let part = Part { offset, bytes: vals.len() as u64 * 4 };
        tensors.insert(name, Tensor { format: Format::F32, parts: HashMap::from([("w".to_string(), part)]) });
    };
    let t = |w: &[f32], n: usize, k: usize| -> Vec<f32> { (0..k * n).map(|i| w[(i % n) * k + i / n]).collect() };
    let h = DIMS.hidden as usize;
    put("token_embd".into(), t(&m.embd, DIMS.vocab as usize, h));
    put("output_norm".into(), m.out_norm.clone());
    for (l, x) in m.layers.iter().enumerate() {
        let n = |s: &str| format!("blk.{l}.{s}");
        put(n("attn_norm"), x.attn_norm.clone());
        put(n("attn_qkv"), t(&x.qkv, x.qkv.len() / h, h));
        put(n("attn_output"), t(&x.o, h, x.o.len() / h));
        put(n("ffn_norm"), x.ffn_norm.clone());
        put(n("ffn_gate_up"), t(&x.gate_up, x.gate_up.len() / h, h));
        put(n("ffn_down"), t(&x.down, h, x.down.len() / h));
    }
    (blob, tensors)
}

/// `y[n] = Σ_k W[n][k]·x[k]`.
fn matvec(w: &[f32], x: &[f64], n: usize) -> Vec<f64> {
    let k = x.len();
    (0..n).map(|j| (0..k).map(|i| w[j * k + i] as f64 * x[i]).sum()).collect()
}

fn rmsnorm(x: &[f64], w: &[f32]) -> Vec<f64> {
    let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + DIMS.rms_eps).sqrt();
    x.iter().zip(w).map(|(v, &g)| v * inv * g as f64).collect()
}

fn rope(v: &mut [f64], pos: usize) {
    let hd = DIMS.head_dim as usize;
    for head in v.chunks_mut(hd) {
        for i in 0..hd / 2 {
            let a = pos as f64 * DIMS.rope_theta.powf(-2.0 * i as f64 / hd as f64);
            let (c, s) = (a.cos(), a.sin());
            let (x, y) = (head[2 * i], head[2 * i + 1]);
            head[2 * i] = x * c - y * s;
            head[2 * i + 1] = x * s + y * c;
        }
    }
}

/// Logits after each token of `tokens`, from position 0, in float64.
fn reference(m: &Model, tokens: &[u32]) -> Vec<Vec<f64>> {
    let d = &DIMS;
    let (h, hd, nh, nkv, f) = (d.hidden as usize, d.head_dim as usize, d.heads as usize, d.kv_heads as usize, d.ffn as usize);
    let mut keys: Vec<Vec<Vec<f64>>> = vec![Vec::new(); m.layers.len()];
    let mut values: Vec<Vec<Vec<f64>>> = vec![Vec::new(); m.layers.len()];
    let mut out = Vec::new();
    for (pos, &tok) in tokens.iter().enumerate() {
        let mut x: Vec<f64> = m.embd[tok as usize * h..][..h].iter().map(|&v| v as f64).collect();
        for (l, w) in m.layers.iter().enumerate() {
            let hn = rmsnorm(&x, &w.attn_norm);
            let qkv = matvec(&w.qkv, &hn, (nh + 2 * nkv) * hd);
            let mut q = qkv[..nh * hd].to_vec();
            let mut k = qkv[nh * hd..(nh + nkv) * hd].to_vec();
            let v = qkv[(nh + nkv) * hd..].to_vec();
            rope(&mut q, pos);
            rope(&mut k, pos);
            keys[l].push(k);
            values[l].push(v);
            let mut att = vec![0.0; nh * hd];
            for head in 0..nh {
                let g = head / (nh / nkv);
                let qh = &q[head * hd..][..hd];
                let s: Vec<f64> =
                    keys[l].iter().map(|kj| (0..hd).map(|i| qh[i] * kj[g * hd + i]).sum::<f64>() / (hd as f64).sqrt()).collect();
                let mx = s.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - mx).exp()).collect();
                let z: f64 = e.iter().sum();
                for (j, vj) in values[l].iter().enumerate() {
                    for i in 0..hd {
                        att[head * hd + i] += e[j] / z * vj[g * hd + i];
                    }
                }
            }
            let o = matvec(&w.o, &att, h);
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            let hn = rmsnorm(&x, &w.ffn_norm);
            let gu = matvec(&w.gate_up, &hn, 2 * f);
            let act: Vec<f64> = (0..f).map(|i| gu[i] / (1.0 + (-gu[i]).exp()) * gu[f + i]).collect();
            let dn = matvec(&w.down, &act, h);
            x.iter_mut().zip(&dn).for_each(|(a, b)| *a += b);
        }
        let hn = rmsnorm(&x, &m.out_norm);
        out.push(matvec(&m.embd, &hn, d.vocab as usize));
    }
    out
}

fn kernels(g: &DecoderGraph) -> Vec<TunedKernel> {
    let mut out = Vec::new();
    for &b in &g.buckets {
        for p in g.products(b) {
            if out.iter().any(|k: &TunedKernel| k.meta.op == p.op && k.meta.shape == p.shape) {
                continue;
            }
            let op = Op::from_name(&p.op, &p.shape).unwrap();
            let k = compile(&op, Target::Wasm, &Schedule::default_for(&op, Target::Wasm)).unwrap();
            out.push(TunedKernel { bytes: k.bytes, meta: k.meta });
        }
    }
    out
}

fn load(m: &Model, context: u32) -> Decoder {
    let (blob, tensors) = bundle(m);
    let formats: HashMap<String, Format> = tensors.iter().map(|(k, t)| (k.clone(), t.format)).collect();
    let g = decoder_graph(&DIMS, &|n: &str| formats.get(n).copied()).unwrap();
    let ks = kernels(&g);
    Decoder::load(&WasmEngine::new().unwrap(), g, tensors, &blob, &ks, context).unwrap()
}

/// Largest |a − b| over the vocabulary, relative to the reference's largest |logit|.
fn worst(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    got.iter().zip(want).map(|(&a, b)| (a as f64 - b).abs()).fold(0.0, f64::max) / scale
}

#[test]
fn decoder_matches_the_f64_reference_token_by_token_and_in_chunks() {
    let m = model();
    let tokens: Vec<u32> = (0..40u32).map(|i| (i * 37 + 5) % DIMS.vocab).collect();
    let want = reference(&m, &tokens);
    // Token by token: every step's logits.
    let mut dec = load(&m, 300);
    let before = dec.memory_bytes();
    for (i, &t) in tokens.iter().enumerate() {
        let got = dec.feed(&[t]).unwrap();
        assert!(got.iter().all(|v| v.is_finite()));
        let e = worst(&got, &want[i]);
        assert!(e < 1e-4, "step {i}: worst relative difference {e}");
        assert_eq!(argmax(&got) as usize, want[i].iter().enumerate().fold(0, |b, (j, v)| if *v > want[i][b] { j } else { b }));
    }
    assert_eq!(dec.memory_bytes(), before, "decoding grew the memory");
    // One prefill run of 23 tokens (bucket 32), then 17 more in one run.
    dec.reset();
    let got = dec.feed(&tokens[..23]).unwrap();
    assert!(worst(&got, &want[22]) < 1e-4);
    let got = dec.feed(&tokens[23..]).unwrap();
    assert!(worst(&got, &want[39]) < 1e-4);
    assert_eq!(dec.position(), 40);
}

#[test]
fn decoder_prefills_past_the_largest_bucket_in_chunks() {
    let m = model();
    let tokens: Vec<u32> = (0..270u32).map(|i| (i * 11 + 3) % DIMS.vocab).collect();
    let want = reference(&m, &tokens);
    let mut dec = load(&m, 300);
    let got = dec.feed(&tokens).unwrap();
    let e = worst(&got, want.last().unwrap());
    assert!(e < 1e-4, "worst relative difference {e} after 270 tokens");
}

#[test]
fn decoder_refuses_runs_past_its_context_and_bad_ids() {
    let m = model();
    let mut dec = load(&m, 8);
    let e = dec.feed(&[1; 9]).unwrap_err().to_string();
    assert!(e.contains("past the context of 8"), "{e}");
    assert_eq!(dec.position(), 0, "a refused run used no position");
    let e = dec.feed(&[DIMS.vocab]).unwrap_err().to_string();
    assert!(e.contains("outside the vocabulary"), "{e}");
    assert!(dec.feed(&[]).is_err());
    dec.feed(&[1; 8]).unwrap();
    assert!(dec.feed(&[1]).is_err());
    let e = Decoder::load(&WasmEngine::new().unwrap(), dec.graph().clone(), HashMap::new(), &[], &[], 301).unwrap_err();
    assert!(e.to_string().contains("between 1 and the model's 300"), "{e}");
}

#[test]
fn sampler_is_greedy_at_zero_temperature_and_seeded_otherwise() {
    let logits = [0.1f32, 2.0, 1.9, -3.0, 2.0];
    assert_eq!(Sampler::new(Sampling::default()).sample(&logits), 1, "the first largest");
    let s = Sampling { temperature: 0.8, top_k: 3, top_p: 0.95, seed: 42 };
    let a: Vec<u32> = {
        let mut r = Sampler::new(s);
        (0..50).map(|_| r.sample(&logits)).collect()
    };
    let b: Vec<u32> = {
        let mut r = Sampler::new(s);
        (0..50).map(|_| r.sample(&logits)).collect()
    };
    assert_eq!(a, b, "the same seed draws the same tokens");
    assert!(a.iter().all(|t| [1, 2, 4].contains(t)), "top-k 3 keeps ids 1, 4 and 2: {a:?}");
    assert!(a.contains(&2) && a.contains(&1), "{a:?}");
    let k1 = Sampling { top_k: 1, ..s };
    assert!((0..20).all(|_| Sampler::new(k1).sample(&logits) == 1));
}

/// The sampling rule is written twice (here and the browser's sampler.ts):
/// one golden file pins both.
#[test]
fn sampler_draws_the_golden_files_tokens() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/web/test/golden/sampler.json")).unwrap();
    let g: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = g["cases"].as_array().unwrap();
    assert!(cases.len() >= 5);
    for c in cases {
        let logits: Vec<f32> =
            g["logits"][c["logits"].as_str().unwrap()].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
        let s = Sampling {
            temperature: c["temperature"].as_f64().unwrap() as f32,
            top_k: c["top_k"].as_u64().unwrap() as u32,
            top_p: c["top_p"].as_f64().unwrap() as f32,
            seed: c["seed"].as_str().unwrap().parse().unwrap(),
        };
        let mut r = Sampler::new(s);
        let got: Vec<u64> = (0..10).map(|_| r.sample(&logits) as u64).collect();
        let want: Vec<u64> = c["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(got, want, "{c}");
    }
}
