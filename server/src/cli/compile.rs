//! `webtune compile`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use webtune_compiler::{Schedule, Target, compile};

use super::args::KernelArgs;

#[derive(Args, Debug)]
pub struct CompileArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// The schedule as JSON (the `config` of a kernel.json), or @FILE to read it from a file.
    #[arg(long, conflicts_with = "default")]
    pub config: Option<String>,
    /// Use the portable default schedule.
    #[arg(long)]
    pub default: bool,
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(a: CompileArgs) -> Result<()> {
    let (op, target) = a.kernel.parse()?;
    let schedule = match (&a.config, a.default) {
        (Some(c), _) => {
            let text = match c.strip_prefix('@') {
                Some(path) => crate::cli::read_input(std::path::Path::new(path), "schedule file")?,
                None => c.clone(),
            };
            Schedule::from_json(&text).map_err(anyhow::Error::msg)?
        }
        (None, true) => Schedule::default_for(&op, target),
        (None, false) => bail!("give a schedule with --config JSON, or --default for the portable default"),
    };
    let kernel = compile(&op, target, &schedule)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let file = match target {
        Target::Wasm => "kernel.wasm",
        Target::Wgsl => "kernel.wgsl",
    };
    let path = a.out.join(file);
    std::fs::write(&path, &kernel.bytes).with_context(|| format!("writing {}", path.display()))?;
    let meta = serde_json::to_string_pretty(&kernel.meta)?;
    let mpath = a.out.join("kernel.json");
    std::fs::write(&mpath, meta + "\n").with_context(|| format!("writing {}", mpath.display()))?;
    crate::cli::out(format_args!("{} ({} bytes, sha256 {})", path.display(), kernel.bytes.len(), kernel.meta.sha256))?;
    Ok(())
}
