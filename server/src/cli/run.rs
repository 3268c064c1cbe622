//! `webtune run`: run, check and time one kernel directory natively.
//!
//! The runner (wasmtime and wgpu) is behind the `native` cargo feature, so that
//! `webtune serve` builds without cranelift or a GPU stack.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A directory written by `webtune compile` (kernel.wasm or kernel.wgsl, and kernel.json).
    #[arg(long)]
    pub kernel: PathBuf,
    /// Timed samples (the JSON gives their median and spread).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Seed of the input data.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[cfg(feature = "native")]
pub fn run(a: RunArgs) -> Result<()> {
    use webtune_client_runtime::{KernelDir, RunOptions};
    if a.reps == 0 {
        anyhow::bail!("--reps must be at least 1");
    }
    let k = KernelDir::load(&a.kernel)?;
    let opts = RunOptions { reps: a.reps, seed: a.seed, ..RunOptions::default() };
    let report = webtune_client_runtime::run(&k, &opts)?;
    crate::cli::out(serde_json::to_string(&report)?)?;
    if !report.correct {
        anyhow::bail!("the kernel's output differs from the reference (max_rel_err {:e})", report.max_rel_err);
    }
    Ok(())
}

#[cfg(not(feature = "native"))]
pub fn run(a: RunArgs) -> Result<()> {
    let _ = a;
    anyhow::bail!("`webtune run` needs the native runner: rebuild with `cargo build --release --features native`")
}
