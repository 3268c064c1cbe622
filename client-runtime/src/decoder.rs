//! The native executor of a decoder graph (`webtune_models::graph`): the
//! same steps the browser runtime runs, on wasmtime, with the same fixed
//! kernels (`web/src/decoder-kernels.wat`, assembled here by the `wat`
//! crate) and the tuned kernels the caller compiles. It is what
//! `webtune generate` and the language model's native tests run.
//!
//! One Wasm memory holds everything, laid out once at load: the run's
//! token ids, the weights blob (each tensor part at its manifest offset),
//! one region per activation buffer (sized for the largest bucket), the
//! key/value caches (`context` positions each), the rotary table and the
//! attention weights (a row per query head of a group), then one scratch
//! area that every tuned kernel shares (they run one at a time). A run never allocates: decoding a thousand
//! tokens leaves the memory's size as it was.
//!
//! What it must never do: run past the context it was loaded with (a run
//! that would is refused before any kernel is called), or call a tuned
//! kernel whose metadata does not name the op and shape the step needs.

use std::collections::HashMap;

use wasmtime::{Func, Instance, Memory, MemoryType, Module, Store, Val};
use webtune_compiler::KernelMeta;
use webtune_models::graph::{DecoderGraph, Format, Rows, Step};

use crate::RunError;
use crate::wasm::WasmEngine;

/// The fixed kernels' text (both executors load this file).
pub const DECODER_KERNELS_WAT: &str = include_str!("../web/src/decoder-kernels.wat");

/// Where one part of a tensor lies in the weights blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub offset: u64,
    pub bytes: u64,
}

/// A tensor of the bundle: its format and its parts (`w`, `d`, `m`).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub format: Format,
    pub parts: HashMap<String, Part>,
}

/// A tuned kernel for one product: its module bytes and metadata.
#[derive(Clone, Debug)]
pub struct TunedKernel {
    pub bytes: Vec<u8>,
    pub meta: KernelMeta,
}

/// A decoder loaded into one wasmtime memory, ready to run tokens.
pub struct Decoder {
    store: Store<()>,
    memory: Memory,
    graph: DecoderGraph,
    fixed: HashMap<&'static str, Func>,
    /// Tuned kernels by (op, M, K, N): the export and its instance's scratch needs.
    kernels: HashMap<(String, [u32; 3]), Func>,
    tensors: HashMap<String, (Format, HashMap<String, u32>)>,
    buffers: HashMap<String, u32>,
    /// The buffers of token rows (the others have one row).
    token_rows: std::collections::HashSet<String>,
    caches: HashMap<String, u32>,
    ids: u32,
    rope: u32,
    rope_filled: u32,
    rope_dim: u32,
    rope_theta: f64,
    scores: u32,
    scratch: u32,
    context: u32,
    max_rows: u32,
    /// Positions already in the caches.
    pos: u32,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").field("context", &self.context).field("pos", &self.pos).finish_non_exhaustive()
    }
}

fn align(x: u64) -> u64 {
    x.next_multiple_of(64)
}

fn engine_err(e: impl std::fmt::Display) -> RunError {
    RunError::Engine(e.to_string())
}

impl Decoder {
    /// Lays out `graph` with `weights` (the bundle's blob) and `tensors` in a
    /// new memory of `engine`, with room for `context` positions (at most
    /// the graph's), and instantiates the fixed kernels and every kernel of
    /// `kernels`, which must cover [`DecoderGraph::products`] of every
    /// bucket the caller will run.
    pub fn load(
        engine: &WasmEngine,
        graph: DecoderGraph,
        tensors: HashMap<String, Tensor>,
        weights: &[u8],
        kernels: &[TunedKernel],
        context: u32,
    ) -> Result<Decoder, RunError> {
        if context == 0 || context > graph.context {
            return Err(RunError::Input(format!("context {context} must be between 1 and the model's {}", graph.context)));
        }
        let max_rows = *graph.buckets.iter().max().unwrap_or(&1);
        let head_dim = graph
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Rope { head_dim, .. } => Some(*head_dim),
                _ => None,
            })
            .unwrap_or(4);
        let theta = graph
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Rope { theta, .. } => Some(*theta),
                _ => None,
            })
            .unwrap_or(10000.0);
        // The layout: ids, weights, buffers, caches, rope table, scores, scratch.
        let mut at = 64u64;
        let ids = at;
        at = align(at + max_rows as u64 * 4);
        let wbase = at;
        at = align(at + weights.len() as u64);
        let mut buffers = HashMap::new();
        let token_rows = graph.buffers.iter().filter(|b| b.rows == Rows::Tokens).map(|b| b.name.clone()).collect();
        for b in &graph.buffers {
            let rows = if b.rows == Rows::Tokens { max_rows } else { 1 };
            buffers.insert(b.name.clone(), at as u32);
            at = align(at + rows as u64 * b.cols as u64 * 4);
        }
        let mut caches = HashMap::new();
        for c in &graph.caches {
            caches.insert(c.name.clone(), at as u32);
            at = align(at + context as u64 * c.cols as u64 * 4);
        }
        let rope = at;
        at = align(at + context as u64 * head_dim as u64 * 4);
        // The attention kernel's weights: one row per query head of a group.
        let group = graph
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Attention { heads, kv_heads, .. } => Some(heads / (*kv_heads).max(1)),
                _ => None,
            })
            .max()
            .unwrap_or(1)
            .max(1);
        let scores = at;
        at = align(at + group as u64 * (context as u64 + 4) * 4);
        let scratch = at;
        let scratch_bytes = kernels.iter().map(|k| k.meta.scratch_bytes.unwrap_or(0) as u64).max().unwrap_or(0);
        at = align(at + scratch_bytes);
        let pages = at.div_ceil(65536);
        if pages > 65536 {
            return Err(RunError::Input(format!(
                "the model needs {} MiB of Wasm memory with a context of {context}: more than 4 GiB",
                at >> 20
            )));
        }
        let mut store = Store::new(engine.engine(), ());
        let memory = Memory::new(&mut store, MemoryType::new(pages as u32, None)).map_err(engine_err)?;
        memory.write(&mut store, wbase as usize, weights).map_err(engine_err)?;
        let mut placed = HashMap::new();
        for (name, t) in tensors {
            let mut parts = HashMap::new();
            for (p, part) in &t.parts {
                if part.offset.checked_add(part.bytes).is_none_or(|end| end > weights.len() as u64) {
                    return Err(RunError::Input(format!("tensor `{name}` part `{p}` lies outside the weights blob")));
                }
                parts.insert(p.clone(), (wbase + part.offset) as u32);
            }
            placed.insert(name, (t.format, parts));
        }
        // The fixed kernels.
        let wasm = wat::parse_str(DECODER_KERNELS_WAT).map_err(|e| RunError::Input(format!("decoder-kernels.wat: {e}")))?;
        let module = Module::new(engine.engine(), &wasm).map_err(engine_err)?;
        let inst = Instance::new(&mut store, &module, &[memory.into()]).map_err(engine_err)?;
        let mut fixed = HashMap::new();
        for name in ["rmsnorm", "rope", "kv_store", "attention", "swiglu", "add", "embed_q8", "embed_q4", "embed_f32"] {
            let f =
                inst.get_func(&mut store, name).ok_or_else(|| RunError::Input(format!("decoder-kernels.wat has no export `{name}`")))?;
            fixed.insert(name, f);
        }
        let mut tuned = HashMap::new();
        for k in kernels {
            if k.meta.threads.is_some() {
                return Err(RunError::Input(format!("{} {:?}: the native decoder runs single-threaded kernels", k.meta.op, k.meta.shape)));
            }
            let shape: [u32; 3] =
                k.meta.shape.clone().try_into().map_err(|_| RunError::Input(format!("{}: a product's shape is M,K,N", k.meta.op)))?;
            let module = Module::new(engine.engine(), &k.bytes).map_err(engine_err)?;
            let inst = Instance::new(&mut store, &module, &[memory.into()]).map_err(engine_err)?;
            let f = inst
                .get_func(&mut store, &k.meta.entry)
                .ok_or_else(|| RunError::Input(format!("{}: no export `{}`", k.meta.op, k.meta.entry)))?;
            tuned.insert((k.meta.op.clone(), shape), f);
        }
        Ok(Decoder {
            store,
            memory,
            rope_dim: head_dim,
            rope_theta: theta,
            graph,
            fixed,
            kernels: tuned,
            tensors: placed,
            buffers,
            token_rows,
            caches,
            ids: ids as u32,
            rope: rope as u32,
            rope_filled: 0,
            scores: scores as u32,
            scratch: scratch as u32,
            context,
            max_rows,
            pos: 0,
        })
    }

    /// The graph it runs.
    pub fn graph(&self) -> &DecoderGraph {
        &self.graph
    }

    /// Positions in the caches so far.
    pub fn position(&self) -> u32 {
        self.pos
    }

    /// The context it was loaded with.
    pub fn context(&self) -> u32 {
        self.context
    }

    /// Forgets the caches' contents: the next run starts at position 0.
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// Bytes of Wasm memory in use (constant after load).
    pub fn memory_bytes(&self) -> usize {
        self.memory.data_size(&self.store)
    }

    /// Feeds `tokens` at the next positions (in chunks of the largest
    /// bucket) and returns the logits after the last one.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<Vec<f32>, RunError> {
        if tokens.is_empty() {
            return Err(RunError::Input("no tokens to feed".into()));
        }
        if self.pos as u64 + tokens.len() as u64 > self.context as u64 {
            return Err(RunError::Input(format!(
                "{} positions used and {} more tokens: past the context of {}",
                self.pos,
                tokens.len(),
                self.context
            )));
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t >= self.graph.vocab) {
            return Err(RunError::Input(format!("token id {bad} is outside the vocabulary of {}", self.graph.vocab)));
        }
        for chunk in tokens.chunks(self.max_rows as usize) {
            self.run(chunk)?;
        }
        let logits = self.buffers[&self.graph.logits];
        let mut bytes = vec![0u8; self.graph.vocab as usize * 4];
        self.memory.read(&self.store, logits as usize, &mut bytes).map_err(engine_err)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// The rotary table up to position `end` (cos, sin of pos·θ^(−2i/d) in
    /// f64, rounded once), filled as positions are first used.
    fn fill_rope(&mut self, end: u32) -> Result<(), RunError> {
        if end <= self.rope_filled {
            return Ok(());
        }
        let half = self.rope_dim / 2;
        let mut vals = Vec::with_capacity(((end - self.rope_filled) * self.rope_dim) as usize);
        for p in self.rope_filled..end {
            for i in 0..half {
                let angle = p as f64 * self.rope_theta.powf(-2.0 * i as f64 / self.rope_dim as f64);
                vals.push(angle.cos() as f32);
                vals.push(angle.sin() as f32);
            }
        }
        let off = self.rope + self.rope_filled * self.rope_dim * 4;
        self.memory.write(&mut self.store, off as usize, bytemuck::cast_slice(&vals)).map_err(engine_err)?;
        self.rope_filled = end;
        Ok(())
    }

    fn call_fixed(&mut self, name: &str, args: &[Val]) -> Result<(), RunError> {
        let f = self.fixed[name];
        f.call(&mut self.store, args, &mut []).map_err(|e| RunError::Engine(format!("fixed kernel `{name}` trapped: {e}")))
    }

    fn part(&self, tensor: &str, part: &str) -> Result<u32, RunError> {
        let (_, parts) = self.tensors.get(tensor).ok_or_else(|| RunError::Input(format!("the bundle has no tensor `{tensor}`")))?;
        parts.get(part).copied().ok_or_else(|| RunError::Input(format!("tensor `{tensor}` has no part `{part}`")))
    }

    fn buf(&self, name: &str) -> Result<u32, RunError> {
        self.buffers.get(name).copied().ok_or_else(|| RunError::Input(format!("the graph names no buffer `{name}`")))
    }

    fn cache(&self, name: &str) -> Result<u32, RunError> {
        self.caches.get(name).copied().ok_or_else(|| RunError::Input(format!("the graph names no cache `{name}`")))
    }

    /// One run of at most the largest bucket's tokens.
    fn run(&mut self, tokens: &[u32]) -> Result<(), RunError> {
        let t = tokens.len() as u32;
        let m = self.graph.bucket(t).ok_or_else(|| RunError::Input(format!("{t} tokens in one run: past the largest bucket")))?;
        let pos0 = self.pos;
        self.fill_rope(pos0 + t)?;
        self.memory.write(&mut self.store, self.ids as usize, bytemuck::cast_slice(tokens)).map_err(engine_err)?;
        let i = |x: u32| Val::I32(x as i32);
        let steps = self.graph.steps.clone();
        for step in &steps {
            match step {
                Step::Embed { table, format, out } => {
                    let (w, out) = (self.part(table, "w")?, self.buf(out)?);
                    let h = self.graph.hidden;
                    match format {
                        Format::Q8_0 => {
                            let d = self.part(table, "d")?;
                            self.call_fixed("embed_q8", &[i(self.ids), i(t), i(w), i(d), i(h), i(out)])?
                        }
                        Format::Q4_0 | Format::Q4_1 => {
                            let d = self.part(table, "d")?;
                            let (mn, has) = if *format == Format::Q4_1 { (self.part(table, "m")?, 1) } else { (0, 0) };
                            self.call_fixed("embed_q4", &[i(self.ids), i(t), i(w), i(d), i(mn), i(has), i(h), i(out)])?
                        }
                        Format::F32 => self.call_fixed("embed_f32", &[i(self.ids), i(t), i(w), i(self.graph.vocab), i(h), i(out)])?,
                    }
                }
                Step::RmsNorm { x, weight, out, eps, last } => {
                    let h = self.graph.hidden;
                    let (mut x_at, w, out) = (self.buf(x)?, self.part(weight, "w")?, self.buf(out)?);
                    let rows = if *last {
                        // The last real row of token rows; a one-row buffer's row.
                        if self.token_rows.contains(x) {
                            x_at += (t - 1) * h * 4;
                        }
                        1
                    } else {
                        t
                    };
                    self.call_fixed("rmsnorm", &[i(x_at), i(w), i(out), i(rows), i(h), Val::F32(eps.to_bits())])?
                }
                Step::Matmul { kernel, a, weight, format, out, k, n, last } => {
                    let shape = [if *last { 1 } else { m }, *k, *n];
                    let f = *self.kernels.get(&(kernel.clone(), shape)).ok_or_else(|| {
                        RunError::Input(format!("no kernel was loaded for {kernel} {},{},{}", shape[0], shape[1], shape[2]))
                    })?;
                    let mut a_at = self.buf(a)?;
                    // The last real row of token rows; a one-row buffer's row.
                    if *last && self.token_rows.contains(a) {
                        a_at += (t - 1) * k * 4;
                    }
                    let mut args = vec![i(a_at), i(self.part(weight, "w")?)];
                    match format {
                        Format::F32 => {}
                        Format::Q4_0 | Format::Q8_0 => args.push(i(self.part(weight, "d")?)),
                        Format::Q4_1 => {
                            args.push(i(self.part(weight, "d")?));
                            args.push(i(self.part(weight, "m")?));
                        }
                    }
                    args.push(i(self.buf(out)?));
                    if f.ty(&self.store).params().len() == args.len() + 1 {
                        args.push(i(self.scratch));
                    }
                    f.call(&mut self.store, &args, &mut []).map_err(|e| RunError::Engine(format!("{kernel} {shape:?} trapped: {e}")))?
                }
                Step::Rope { x, stride, heads, head_dim, .. } => {
                    let x = self.buf(x)?;
                    self.call_fixed("rope", &[i(x), i(t), i(*stride), i(*heads), i(*head_dim), i(self.rope), i(pos0)])?
                }
                Step::KvStore { x, stride, k_col, v_col, width, k_cache, v_cache } => {
                    let (x, kc, vc) = (self.buf(x)?, self.cache(k_cache)?, self.cache(v_cache)?);
                    self.call_fixed("kv_store", &[i(x), i(t), i(*stride), i(*k_col), i(*v_col), i(*width), i(kc), i(vc), i(pos0)])?
                }
                Step::Attention { x, stride, heads, kv_heads, head_dim, k_cache, v_cache, out, scale } => {
                    let (x, kc, vc, out) = (self.buf(x)?, self.cache(k_cache)?, self.cache(v_cache)?, self.buf(out)?);
                    let args = [
                        i(x),
                        i(t),
                        i(*stride),
                        i(*heads),
                        i(*kv_heads),
                        i(*head_dim),
                        i(kc),
                        i(vc),
                        i(pos0),
                        Val::F32(scale.to_bits()),
                        i(out),
                        i(self.scores),
                    ];
                    self.call_fixed("attention", &args)?
                }
                Step::SwiGlu { x, ffn, out } => {
                    let (x, out) = (self.buf(x)?, self.buf(out)?);
                    self.call_fixed("swiglu", &[i(x), i(t), i(*ffn), i(out)])?
                }
                Step::Add { x, y, cols } => {
                    let (x, y) = (self.buf(x)?, self.buf(y)?);
                    self.call_fixed("add", &[i(x), i(y), i(t * cols)])?
                }
            }
        }
        self.pos += t;
        Ok(())
    }
}

/// How the next token is chosen from the logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// 0: greedy (the first largest logit), deterministic.
    pub temperature: f32,
    /// Keep only the k most likely tokens (0: all).
    pub top_k: u32,
    /// Keep the smallest set of most likely tokens whose probability reaches p (1: all).
    pub top_p: f32,
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling { temperature: 0.0, top_k: 0, top_p: 1.0, seed: 0 }
    }
}

/// The index of the first largest value.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// A sampler: the rule the browser runtime's `sample` follows too
/// (temperature, then top-k, then top-p over the sorted probabilities, then
/// one uniform draw from SplitMix64).
#[derive(Clone, Debug)]
pub struct Sampler {
    pub sampling: Sampling,
    state: u64,
}

impl Sampler {
    pub fn new(sampling: Sampling) -> Sampler {
        Sampler { sampling, state: sampling.seed }
    }

    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next token.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let s = self.sampling;
        if s.temperature <= 0.0 {
            return argmax(logits);
        }
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
        if s.top_k > 0 {
            order.truncate(s.top_k as usize);
        }
        let top = logits[order[0] as usize] as f64;
        let mut p: Vec<f64> = order.iter().map(|&i| ((logits[i as usize] as f64 - top) / s.temperature as f64).exp()).collect();
        let total: f64 = p.iter().sum();
        let mut keep = p.len();
        if s.top_p < 1.0 {
            let mut acc = 0.0;
            for (j, v) in p.iter().enumerate() {
                acc += v / total;
                if acc >= s.top_p as f64 {
                    keep = j + 1;
                    break;
                }
            }
        }
        p.truncate(keep);
        let total: f64 = p.iter().sum();
        let mut u = self.uniform() * total;
        for (j, v) in p.iter().enumerate() {
            if u < *v {
                return order[j];
            }
            u -= v;
        }
        order[keep - 1]
    }
}
