//! A GGUF writer and a tiny generated llama model (2 blocks, hidden 64,
//! 4 query heads and 2 key/value heads of 16, FFN 96, a 264-token
//! byte-level BPE vocabulary), with every tensor type webtune imports
//! somewhere in it: the model of the GGUF import tests here and of other
//! crates' tests. Not for production use.

use crate::gguf::{Array, GgmlType, Value};

pub const H: usize = 64;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const HEAD_DIM: usize = 16;
pub const F: usize = 96;
pub const LAYERS: usize = 2;
/// 4 control tokens, the 256 byte characters, 3 merged tokens, 1 user-defined token.
pub const V: usize = 264;

/// A GGUF file to be written: every field is public so that tests can break it.
#[derive(Clone, Debug)]
pub struct GgufWriter {
    pub version: u32,
    /// Written as `general.alignment` when set (default 32 otherwise).
    pub alignment: Option<u32>,
    pub metadata: Vec<(String, Value)>,
    /// (name, ne, type, data).
    pub tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn value_type(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::Str(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn array_type(a: &Array) -> u32 {
    match a {
        Array::U8(_) => 0,
        Array::I8(_) => 1,
        Array::U16(_) => 2,
        Array::I16(_) => 3,
        Array::U32(_) => 4,
        Array::I32(_) => 5,
        Array::F32(_) => 6,
        Array::Bool(_) => 7,
        Array::Str(_) => 8,
        Array::Array(_) => 9,
        Array::U64(_) => 10,
        Array::I64(_) => 11,
        Array::F64(_) => 12,
    }
}

fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend(x.to_le_bytes()),
        Value::U16(x) => out.extend(x.to_le_bytes()),
        Value::I16(x) => out.extend(x.to_le_bytes()),
        Value::U32(x) => out.extend(x.to_le_bytes()),
        Value::I32(x) => out.extend(x.to_le_bytes()),
        Value::U64(x) => out.extend(x.to_le_bytes()),
        Value::I64(x) => out.extend(x.to_le_bytes()),
        Value::F32(x) => out.extend(x.to_le_bytes()),
        Value::F64(x) => out.extend(x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::Str(s) => string(out, s),
        Value::Array(a) => array(out, a),
    }
}

fn array(out: &mut Vec<u8>, a: &Array) {
    out.extend(array_type(a).to_le_bytes());
    out.extend((a.len() as u64).to_le_bytes());
    match a {
        Array::U8(v) => out.extend(v),
        Array::I8(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::U16(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::I16(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::U32(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::I32(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::U64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::I64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::F32(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::F64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Array::Bool(v) => v.iter().for_each(|x| out.push(u8::from(*x))),
        Array::Str(v) => v.iter().for_each(|s| string(out, s)),
        Array::Array(v) => v.iter().for_each(|a| array(out, a)),
    }
}

impl GgufWriter {
    /// The file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let align = self.alignment.unwrap_or(32) as usize;
        let mut metadata = self.metadata.clone();
        if let Some(a) = self.alignment {
            metadata.push(("general.alignment".into(), Value::U32(a)));
        }
        let mut out = crate::gguf::MAGIC.to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((metadata.len() as u64).to_le_bytes());
        for (k, v) in &metadata {
            string(&mut out, k);
            out.extend(value_type(v).to_le_bytes());
            value(&mut out, v);
        }
        let mut offset = 0usize;
        for (name, ne, ty, data) in &self.tensors {
            string(&mut out, name);
            out.extend((ne.len() as u32).to_le_bytes());
            ne.iter().for_each(|d| out.extend(d.to_le_bytes()));
            out.extend(ty.0.to_le_bytes());
            out.extend((offset as u64).to_le_bytes());
            offset = (offset + data.len()).next_multiple_of(align);
        }
        out.resize(out.len().next_multiple_of(align), 0);
        for (_, _, _, data) in &self.tensors {
            out.extend(data);
            out.resize(out.len().next_multiple_of(align), 0);
        }
        out
    }

    pub fn set(&mut self, key: &str, v: Value) {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(kv) => kv.1 = v,
            None => self.metadata.push((key.to_string(), v)),
        }
    }

    pub fn remove(&mut self, key: &str) {
        self.metadata.retain(|(k, _)| k != key);
    }

    /// Gives tensor `name` type `ty` (and new random data of that type).
    pub fn retype(&mut self, name: &str, ty: GgmlType, seed: u64) {
        if let Some(t) = self.tensors.iter_mut().find(|t| t.0 == name) {
            t.2 = ty;
            t.3 = random_data(ty, &t.1, seed);
        }
    }

    /// Gives tensor `name` dimensions `ne` (and new random data).
    pub fn reshape(&mut self, name: &str, ne: Vec<u64>, seed: u64) {
        if let Some(t) = self.tensors.iter_mut().find(|t| t.0 == name) {
            t.3 = random_data(t.2, &ne, seed);
            t.1 = ne;
        }
    }
}

/// A deterministic generator (SplitMix64).
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A non-zero f16 scale of either sign, |x| in [1/64, 1/8).
    fn scale(&mut self) -> [u8; 2] {
        let x = (1.0 / 64.0 + (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * (7.0 / 64.0))
            * if self.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
        half::f16::from_f32(x).to_le_bytes()
    }
}

/// Random data of type `ty` for a tensor of dimensions `ne`: values in
/// [-1, 1), scales non-zero, quantised bytes uniform.
pub fn random_data(ty: GgmlType, ne: &[u64], seed: u64) -> Vec<u8> {
    let mut r = Rng(seed);
    let n: u64 = ne.iter().product();
    let (block, _) = ty.block().unwrap_or((1, 4));
    let blocks = n / block;
    let mut out = Vec::new();
    for _ in 0..blocks {
        match ty {
            GgmlType::F32 => out.extend(r.unit().to_le_bytes()),
            GgmlType::F16 => out.extend(half::f16::from_f32(r.unit()).to_le_bytes()),
            GgmlType::Q4_0 | GgmlType::Q8_0 => {
                out.extend(r.scale());
                let qs = if ty == GgmlType::Q4_0 { 16 } else { 32 };
                out.extend((0..qs).map(|_| r.next_u64() as u8));
            }
            GgmlType::Q4_1 => {
                out.extend(r.scale());
                out.extend(r.scale());
                out.extend((0..16).map(|_| r.next_u64() as u8));
            }
            // Any other type: bytes of the right length.
            t => out.extend((0..t.block().map_or(0, |b| b.1)).map(|_| r.next_u64() as u8)),
        }
    }
    out
}

/// GPT-2's byte-to-character table: byte b is written as this character in byte-level BPE tokens.
pub fn byte_char(b: u8) -> char {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
    if printable(b) {
        return char::from(b);
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + rank).unwrap_or('?')
}

/// The fixture's tokens: (text, GGUF token type).
pub fn tokens() -> Vec<(String, i32)> {
    let mut t: Vec<(String, i32)> =
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<reponame>"].iter().map(|s| (s.to_string(), 3)).collect();
    t.extend((0..=255u8).map(|b| (byte_char(b).to_string(), 1)));
    t.extend(["Ġt", "he", "Ġthe"].iter().map(|s| (s.to_string(), 1)));
    t.push(("<extra>".to_string(), 4));
    t
}

/// The fixture's merges.
pub const MERGES: [&str; 3] = ["Ġ t", "h e", "Ġt he"];

pub const CHAT_TEMPLATE: &str =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";

/// The type of each tensor of the fixture: every imported type appears,
/// and block 1's Q, K and V are F16, F32, F16 (one format once widened).
pub fn default_type(name: &str) -> GgmlType {
    let t = |s: &str| match s {
        "F32" => GgmlType::F32,
        "F16" => GgmlType::F16,
        "Q4_0" => GgmlType::Q4_0,
        "Q4_1" => GgmlType::Q4_1,
        _ => GgmlType::Q8_0,
    };
    t(match name {
        "token_embd.weight" => "Q8_0",
        "output.weight" => "Q4_1",
        "output_norm.weight" => "F32",
        "blk.0.attn_norm.weight" => "F32",
        "blk.0.attn_q.weight" | "blk.0.attn_k.weight" | "blk.0.attn_v.weight" => "Q4_1",
        "blk.0.attn_output.weight" => "Q4_0",
        "blk.0.ffn_norm.weight" => "F16",
        "blk.0.ffn_gate.weight" | "blk.0.ffn_up.weight" => "Q8_0",
        "blk.0.ffn_down.weight" => "F16",
        "blk.1.attn_norm.weight" => "F16",
        "blk.1.attn_q.weight" | "blk.1.attn_v.weight" => "F16",
        "blk.1.attn_k.weight" => "F32",
        "blk.1.attn_output.weight" => "F32",
        "blk.1.ffn_norm.weight" => "F32",
        "blk.1.ffn_gate.weight" | "blk.1.ffn_up.weight" => "Q4_0",
        "blk.1.ffn_down.weight" => "Q4_1",
        _ => "F32",
    })
}

/// The tiny llama, tied (no `output.weight`) or not, GGUF version 3.
pub fn tiny_llama(tied: bool) -> GgufWriter {
    let toks = tokens();
    let u = |x: usize| Value::U32(x as u32);
    let metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::Str("llama".into())),
        ("general.name".into(), Value::Str("tiny llama".into())),
        ("general.languages".into(), Value::Array(Array::Str(vec!["en".into()]))),
        ("llama.block_count".into(), u(LAYERS)),
        ("llama.context_length".into(), u(256)),
        ("llama.embedding_length".into(), u(H)),
        ("llama.feed_forward_length".into(), u(F)),
        ("llama.attention.head_count".into(), u(HEADS)),
        ("llama.attention.head_count_kv".into(), u(KV_HEADS)),
        ("llama.rope.freq_base".into(), Value::F32(100000.0)),
        ("llama.attention.layer_norm_rms_epsilon".into(), Value::F32(1e-5)),
        ("llama.vocab_size".into(), u(V)),
        ("llama.rope.dimension_count".into(), u(HEAD_DIM)),
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
        ("tokenizer.ggml.model".into(), Value::Str("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::Str("smollm".into())),
        ("tokenizer.ggml.tokens".into(), Value::Array(Array::Str(toks.iter().map(|t| t.0.clone()).collect()))),
        ("tokenizer.ggml.token_type".into(), Value::Array(Array::I32(toks.iter().map(|t| t.1).collect()))),
        ("tokenizer.ggml.merges".into(), Value::Array(Array::Str(MERGES.iter().map(|s| s.to_string()).collect()))),
        ("tokenizer.ggml.bos_token_id".into(), u(1)),
        ("tokenizer.ggml.eos_token_id".into(), u(2)),
        ("tokenizer.ggml.unknown_token_id".into(), u(0)),
        ("tokenizer.chat_template".into(), Value::Str(CHAT_TEMPLATE.into())),
        ("general.quantization_version".into(), u(2)),
    ];
    let (h, f, q, kv, v) = (H as u64, F as u64, (HEADS * HEAD_DIM) as u64, (KV_HEADS * HEAD_DIM) as u64, V as u64);
    let mut shapes: Vec<(String, Vec<u64>)> = vec![("token_embd.weight".into(), vec![h, v]), ("output_norm.weight".into(), vec![h])];
    if !tied {
        shapes.push(("output.weight".into(), vec![h, v]));
    }
    for i in 0..LAYERS {
        for (n, ne) in [
            ("attn_norm", vec![h]),
            ("attn_q", vec![h, q]),
            ("attn_k", vec![h, kv]),
            ("attn_v", vec![h, kv]),
            ("attn_output", vec![q, h]),
            ("ffn_norm", vec![h]),
            ("ffn_gate", vec![h, f]),
            ("ffn_up", vec![h, f]),
            ("ffn_down", vec![f, h]),
        ] {
            shapes.push((format!("blk.{i}.{n}.weight"), ne));
        }
    }
    let tensors = shapes
        .into_iter()
        .enumerate()
        .map(|(i, (name, ne))| {
            let ty = default_type(&name);
            let data = random_data(ty, &ne, 1000 + i as u64);
            (name, ne, ty, data)
        })
        .collect();
    GgufWriter { version: 3, alignment: None, metadata, tensors }
}
