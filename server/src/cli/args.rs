//! Arguments that several subcommands take, defined once and flattened
//! into each (clap's `#[command(flatten)]`), so that a flag is spelt,
//! documented and parsed the same everywhere.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use webtune_compiler::op::Dtype;
use webtune_compiler::{Op, Target};

/// The kernel a command is about (`compile`, `space`, `tune`).
#[derive(Args, Debug)]
pub struct KernelArgs {
    /// matmul, batch_matmul, matmul_q4 or matmul_i16 (Wasm only), with an optional epilogue (matmul+bias+gelu).
    #[arg(long)]
    pub op: String,
    /// f32 (default) or f16: the type of the op's float arguments (f16: WGSL only, on adapters with shader-f16; the op's name becomes e.g. matmul+f16).
    #[arg(long)]
    pub dtype: Option<String>,
    /// Comma-separated dimensions, e.g. 384,768,768 (M,K,N) or 12,384,384,64 (B,M,K,N).
    #[arg(long, allow_hyphen_values = true)]
    pub shape: String,
    /// wasm or wgsl.
    #[arg(long)]
    pub target: String,
}

impl KernelArgs {
    /// The op and target, or one line saying what is wrong with them.
    pub fn parse(&self) -> Result<(Op, Target)> {
        let mut op = Op::parse(&self.op, &self.shape)?;
        if let Some(d) = &self.dtype {
            let dtype = Dtype::parse_float(d)?;
            if op.dtype() != Dtype::F32 && dtype != op.dtype() {
                anyhow::bail!("--op {} says {} but --dtype says {}", self.op, op.dtype().name(), dtype.name());
            }
            op = op.with_dtype(dtype)?;
        }
        let target: Target = self.target.parse().map_err(anyhow::Error::msg)?;
        if let Some(only) = op.why_not(target) {
            anyhow::bail!("{} has no {} kernels: {only}", op.name(), target.name());
        }
        Ok((op, target))
    }
}

/// The database and the model store beside it (`serve`, `model`).
#[derive(Args, Debug)]
pub struct StoreArgs {
    /// sqlite://PATH (created on first start), a bare path, or postgres://USER@HOST:PORT/DB.
    #[arg(long, default_value = "sqlite://webtune.sqlite")]
    pub database_url: String,
    /// The model store (default: a `webtune-models` folder next to the SQLite file of --database-url; ./webtune-models for PostgreSQL).
    #[arg(long)]
    pub models_dir: Option<PathBuf>,
}

impl StoreArgs {
    /// `--models-dir`, else the default store of `--database-url`.
    pub fn models_dir(&self) -> PathBuf {
        self.models_dir.clone().unwrap_or_else(|| default_models_dir(&self.database_url))
    }
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
