//! `webtune bundle export` and `webtune bundle import`: the database's
//! winners as a static bundle (docs/static-bundles.md), and back.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use webtune_compiler::{Op, Target};
use webtune_kernel_db::Db;

use crate::bundle::{self, ExportSpec};

#[derive(Args, Debug)]
pub struct BundleArgs {
    #[command(subcommand)]
    pub cmd: BundleCmd,
}

#[derive(Subcommand, Debug)]
pub enum BundleCmd {
    /// Write winners and their kernels as static, checksummed files (bundle.json, kernels/, SHA256SUMS).
    Export(ExportArgs),
    /// Check a bundle and load its winners and kernels into a database (never over a newer winner).
    Import(ImportArgs),
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// sqlite://PATH, a bare path, or postgres://USER@HOST:PORT/DB.
    #[arg(long, default_value = "sqlite://webtune.sqlite")]
    pub database_url: String,
    /// The directory to write (new, empty, or an earlier bundle, which is replaced).
    #[arg(long)]
    pub out: PathBuf,
    /// An op to export (repeatable, each with its --shape); none: every winner in the database.
    #[arg(long)]
    pub op: Vec<String>,
    /// The shape of the --op in the same position, e.g. 384,768,768.
    #[arg(long, allow_hyphen_values = true)]
    pub shape: Vec<String>,
    /// wasm or wgsl (default: both, for each --op).
    #[arg(long)]
    pub target: Option<String>,
    /// Only this device key's winners and those of its architecture and vendor.
    #[arg(long)]
    pub device_key: Option<String>,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// sqlite://PATH (created on first use), a bare path, or postgres://USER@HOST:PORT/DB.
    #[arg(long, default_value = "sqlite://webtune.sqlite")]
    pub database_url: String,
    /// The bundle directory (from `webtune bundle export`).
    pub dir: PathBuf,
}

pub fn run(a: BundleArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    match a.cmd {
        BundleCmd::Export(a) => rt.block_on(export(a)),
        BundleCmd::Import(a) => rt.block_on(import(a)),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

async fn export(a: ExportArgs) -> Result<()> {
    if a.op.len() != a.shape.len() {
        anyhow::bail!("give one --shape for each --op ({} --op, {} --shape)", a.op.len(), a.shape.len());
    }
    let targets = match &a.target {
        Some(t) => vec![t.parse::<Target>().map_err(anyhow::Error::msg)?],
        None => vec![Target::Wasm, Target::Wgsl],
    };
    if a.op.is_empty() && a.target.is_some() {
        anyhow::bail!("--target applies to the --op given; without --op every winner is exported");
    }
    let mut kinds = Vec::new();
    for (op, shape) in a.op.iter().zip(&a.shape) {
        let op = Op::parse(op, shape)?;
        // Without --target, each op's own targets (an f16 op is WGSL only,
        // matmul_i16 Wasm only); with it, an op that has none there is an error.
        let own: Vec<Target> = targets.iter().copied().filter(|&t| op.runs_on(t)).collect();
        if own.is_empty() {
            anyhow::bail!("{} has no {} kernels", op.name(), targets.iter().map(|t| t.name()).collect::<Vec<_>>().join(" or "));
        }
        for t in own {
            kinds.push(bundle::kind_of(&op, t));
        }
    }
    let db = Db::connect(&a.database_url).await?;
    let spec = ExportSpec { kinds, device_key: a.device_key.clone() };
    let r = bundle::export(&db, &spec, &a.out, now_ms()).await;
    db.close().await;
    let r = r?;
    if r.stale > 0 {
        eprintln!(
            "webtune bundle export: left out {} winners elected under older tuning rules (this server would not serve them)",
            r.stale
        );
    }
    super::out(format_args!(
        "exported {} winners, {} kernels ({} op/shape/target, each with its portable default) to {}",
        r.winners,
        r.kernels,
        r.covers,
        a.out.display()
    ))?;
    Ok(())
}

async fn import(a: ImportArgs) -> Result<()> {
    // The whole bundle is checked before the database is touched.
    let checked = bundle::read(&a.dir)?;
    let db = Db::connect(&a.database_url).await?;
    let r = bundle::import(&db, &checked).await;
    db.close().await;
    let s = r?;
    super::out(format_args!(
        "imported {} winners ({} added, {} replaced, {} unchanged, {} kept: newer here), {} kernels from {}",
        s.winners(),
        s.added,
        s.replaced,
        s.unchanged,
        s.kept,
        s.kernels,
        a.dir.display()
    ))?;
    Ok(())
}
