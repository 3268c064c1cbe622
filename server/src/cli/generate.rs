//! `webtune generate`: text from a decoder bundle, natively.
//!
//! It runs the bundle's decoder graph (`webtune_models::graph`) on wasmtime
//! with the same fixed kernels as the browser runtime and, for each matrix
//! product, the tuned op's first lite-space candidate for this machine (the
//! kernel the tuner predicts best, compiled here). The generated text alone
//! goes to stdout, streamed as it is decoded; `--stats` adds one line of
//! timings on stderr. Greedy by default, it stops at the model's
//! end-of-generation tokens or after `--tokens` tokens.
//!
//! The runner (wasmtime) is behind the `native` cargo feature, like `run`.

use clap::Args;

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The decoder's name in the model store (`webtune model list`).
    #[arg(long)]
    pub model: String,
    #[command(flatten)]
    pub store: super::args::StoreArgs,
    /// The prompt text.
    #[arg(long)]
    pub prompt: String,
    /// Render the prompt as one user message through the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 128)]
    pub tokens: u32,
    /// 0 is greedy (deterministic); above 0, sampling at that temperature.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Sample among the k most likely tokens only (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: u32,
    /// Sample among the most likely tokens whose probabilities sum to p.
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// The sampler's seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Positions to reserve for prompt and answer (at most the model's context).
    #[arg(long, default_value_t = 2048)]
    pub context: u32,
    /// Print prefill and decode rates on stderr when done.
    #[arg(long)]
    pub stats: bool,
}

#[cfg(not(feature = "native"))]
pub fn run(_a: GenerateArgs) -> anyhow::Result<()> {
    anyhow::bail!("`webtune generate` runs the model natively on wasmtime: build with --features native")
}

#[cfg(feature = "native")]
pub use native::{Loaded, load, run};

#[cfg(feature = "native")]
mod native {
    use std::collections::HashMap;
    use std::io::Write as _;
    use std::time::Instant;

    use anyhow::{Context, Result, anyhow, bail};
    use webtune_client_runtime::decoder::{Decoder, Part, Sampler, Sampling, Tensor, TunedKernel};
    use webtune_client_runtime::{cpu_fingerprint, wasm::WasmEngine};
    use webtune_compiler::{Op, Target, compile};
    use webtune_models::graph::graph_of;
    use webtune_models::{DecoderManifest, ModelManifest, Store};
    use webtune_tuner::{Device, Fingerprint, Settings, lite_space};

    use super::GenerateArgs;

    /// A decoder bundle loaded for native runs: the runner, its tokenizer
    /// and the manifest.
    pub struct Loaded {
        pub decoder: Decoder,
        pub tokenizer: tokenizers::Tokenizer,
        pub manifest: DecoderManifest,
    }

    impl std::fmt::Debug for Loaded {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Loaded").field("model", &self.manifest.name).field("decoder", &self.decoder).finish_non_exhaustive()
        }
    }

    fn blob(store: &Store, sha256: &str, what: &str) -> Result<Vec<u8>> {
        let path = store.blob_path(sha256).ok_or_else(|| anyhow!("the manifest names a bad {what} blob {sha256}"))?;
        std::fs::read(&path).with_context(|| format!("reading the {what} blob {}", path.display()))
    }

    /// Loads decoder `name` from `store` with room for `context` positions,
    /// compiling each product's first lite-space candidate for this
    /// machine (`progress` hears each long step).
    pub fn load(store: &Store, name: &str, context: u32, progress: &mut dyn FnMut(&str)) -> Result<Loaded> {
        let manifest = match store.manifest(name)? {
            Some((_, ModelManifest::Decoder(m))) => m,
            Some((_, ModelManifest::Encoder(_))) => {
                bail!("model `{name}` is an encoder: `webtune generate` runs decoders (text generation)")
            }
            None => bail!("no model `{name}` in {}; `webtune model list` lists the store", store.dir().display()),
        };
        let graph = graph_of(&manifest).map_err(|e| anyhow!("model `{name}`: {e}"))?;
        let context = context.min(graph.context);
        let tokenizer = tokenizers::Tokenizer::from_bytes(blob(store, &manifest.tokenizer.sha256, "tokenizer")?)
            .map_err(|e| anyhow!("model `{name}`: its tokenizer.json does not load: {e}"))?;
        let weights = blob(store, &manifest.weights.sha256, "weights")?;
        let tensors: HashMap<String, Tensor> = manifest
            .tensors
            .iter()
            .map(|t| {
                let mut parts = HashMap::from([("w".to_string(), Part { offset: t.parts.w.offset, bytes: t.parts.w.bytes })]);
                for (k, p) in [("d", t.parts.d), ("m", t.parts.m)] {
                    if let Some(p) = p {
                        parts.insert(k.to_string(), Part { offset: p.offset, bytes: p.bytes });
                    }
                }
                (t.name.clone(), Tensor { format: t.format, parts })
            })
            .collect();
        // This machine as a browser would describe it, one thread.
        let fp: Fingerprint = serde_json::from_value(cpu_fingerprint()).context("this machine's fingerprint")?;
        let keys = fp.keys().map_err(|e| anyhow!("this machine's fingerprint: {e}"))?;
        let device = Device::from_keys(&keys);
        let settings = Settings::builtin(Target::Wasm);
        let mut kernels: Vec<TunedKernel> = Vec::new();
        let t = Instant::now();
        for &b in &graph.buckets {
            for p in graph.products(b) {
                if kernels.iter().any(|k| k.meta.op == p.op && k.meta.shape == p.shape) {
                    continue;
                }
                let op = Op::from_name(&p.op, &p.shape)?;
                let space = lite_space(&op, Target::Wasm, &device, &settings);
                let first = space
                    .schedules
                    .into_iter()
                    .find(|s| s.threads <= 1)
                    .ok_or_else(|| anyhow!("{} {:?}: the lite space has no single-threaded candidate", p.op, p.shape))?;
                let k = compile(&op, Target::Wasm, &first)?;
                kernels.push(TunedKernel { bytes: k.bytes, meta: k.meta });
            }
        }
        progress(&format!("compiled {} kernels in {:.0} ms", kernels.len(), t.elapsed().as_secs_f64() * 1e3));
        let decoder = Decoder::load(&WasmEngine::new()?, graph, tensors, &weights, &kernels, context)?;
        Ok(Loaded { decoder, tokenizer, manifest })
    }

    /// The chat template rendered for one user message, with the
    /// assistant's turn opened.
    pub fn chat_prompt(m: &DecoderManifest, tokenizer: &tokenizers::Tokenizer, user: &str) -> Result<String> {
        let template = m.chat_template.as_deref().ok_or_else(|| anyhow!("model `{}` has no chat template; drop --chat", m.name))?;
        let mut env = minijinja::Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
        });
        env.add_template("chat", template).map_err(|e| anyhow!("the chat template does not parse: {e}"))?;
        let token = |id: Option<u32>| id.and_then(|i| tokenizer.id_to_token(i)).unwrap_or_default();
        let ctx = minijinja::context! {
            messages => vec![minijinja::context! { role => "user", content => user }],
            add_generation_prompt => true,
            bos_token => token(m.special.bos_id),
            eos_token => token(m.special.eos_id),
        };
        env.get_template("chat")?.render(ctx).map_err(|e| anyhow!("the chat template does not render: {e}"))
    }

    pub fn run(a: GenerateArgs) -> Result<()> {
        if a.prompt.is_empty() {
            bail!("--prompt is empty: give the text to continue");
        }
        if !(a.temperature >= 0.0 && a.top_p > 0.0 && a.top_p <= 1.0) {
            bail!("--temperature must be at least 0 and --top-p in (0, 1]");
        }
        let store = Store::new(a.store.models_dir());
        let mut l = load(&store, &a.model, a.context, &mut |s| eprintln!("webtune generate: {s}"))?;
        let text = if a.chat { chat_prompt(&l.manifest, &l.tokenizer, &a.prompt)? } else { a.prompt.clone() };
        let enc = l.tokenizer.encode(text.as_str(), false).map_err(|e| anyhow!("tokenizing the prompt: {e}"))?;
        let mut ids: Vec<u32> = Vec::new();
        if l.manifest.special.add_bos
            && let Some(b) = l.manifest.special.bos_id
        {
            ids.push(b);
        }
        ids.extend_from_slice(enc.get_ids());
        let context = l.decoder.context();
        if ids.len() as u64 >= context as u64 {
            bail!(
                "the prompt is {} tokens: the context holds {context} (give --context up to the model's {})",
                ids.len(),
                l.decoder.graph().context
            );
        }
        let budget = a.tokens.min(context - ids.len() as u32);
        let mut sampler = Sampler::new(Sampling { temperature: a.temperature, top_k: a.top_k, top_p: a.top_p, seed: a.seed });
        let eog = l.manifest.special.eog_ids.clone();
        let t0 = Instant::now();
        let mut logits = l.decoder.feed(&ids)?;
        let prefill_s = t0.elapsed().as_secs_f64();
        let mut out: Vec<u32> = Vec::new();
        let mut shown = 0usize;
        let mut stdout = std::io::stdout().lock();
        let t1 = Instant::now();
        let mut decoded = 0u32;
        for step in 0..budget {
            let next = sampler.sample(&logits);
            if eog.contains(&next) {
                break;
            }
            out.push(next);
            // Emit only whole characters: a token may end inside one.
            let text = l.tokenizer.decode(&out, true).map_err(|e| anyhow!("detokenizing: {e}"))?;
            if !text.ends_with('\u{fffd}') && text.len() > shown {
                write!(stdout, "{}", &text[shown..])?;
                stdout.flush()?;
                shown = text.len();
            }
            if step + 1 < budget {
                logits = l.decoder.feed(&[next])?;
                decoded += 1;
            }
        }
        let text = l.tokenizer.decode(&out, true).map_err(|e| anyhow!("detokenizing: {e}"))?;
        if text.len() > shown {
            write!(stdout, "{}", &text[shown..])?;
        }
        writeln!(stdout)?;
        if a.stats {
            let decode_s = t1.elapsed().as_secs_f64();
            eprintln!(
                "webtune generate: prompt {} tokens, prefill {:.1} tokens/s; {} tokens generated, decode {:.1} tokens/s",
                ids.len(),
                ids.len() as f64 / prefill_s,
                out.len(),
                if decoded > 0 { decoded as f64 / decode_s } else { 0.0 }
            );
        }
        Ok(())
    }
}
