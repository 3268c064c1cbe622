//! `webtune microbench`: the one-variable-at-a-time primitive study.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use webtune_compiler::{Op, Target};
use webtune_microbench::{Engine, SettingsFile, Study, classify, engines, table};

#[derive(Args, Debug)]
pub struct MicrobenchArgs {
    /// wasm or wgsl.
    #[arg(long)]
    pub target: String,
    /// Engines to run, comma-separated. Wasm: node (V8) and, in builds with
    /// `--features native`, wasmtime. WGSL: wgpu (native builds).
    #[arg(long, default_value = "node")]
    pub engine: String,
    /// Matmul shape M,K,N. The default runs ~0.1-1 s per call on one CPU core
    /// for Wasm; 4096,4096,4096 is the GPU study's shape.
    #[arg(long)]
    pub shape: Option<String>,
    /// Where to write the settings file the tuner reads.
    #[arg(long, default_value = "microbench-settings.json")]
    pub out: PathBuf,
}

pub fn run(a: MicrobenchArgs) -> Result<()> {
    let target: Target = a.target.parse().map_err(anyhow::Error::msg)?;
    let shape = a.shape.unwrap_or_else(|| match target {
        Target::Wasm => "1024,1024,1024".into(),
        Target::Wgsl => "4096,4096,4096".into(),
    });
    let op = Op::parse("matmul", &shape)?;
    let study = Study::new(&op, target)?;
    eprintln!("microbench: {} primitives, {} distinct kernels of {op} for {target}", study.primitives.len(), study.kernels.len());
    let mut names = Vec::new();
    let mut timings = Vec::new();
    for name in a.engine.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut engine = make_engine(name, target)?;
        let label = engine.name();
        let mut progress = |done: usize, total: usize| {
            eprint!("\r  {label}: {done}/{total} kernels timed");
            let _ = std::io::stderr().flush();
        };
        let t = engine.time(&op, &study.kernels, &mut progress).map_err(anyhow::Error::msg).with_context(|| format!("engine {name}"))?;
        eprintln!();
        names.push(engine.name());
        timings.push(t);
    }
    if names.is_empty() {
        bail!("no engine given: use --engine node (and wasmtime in native builds)");
    }
    let reports = classify(&study, &names, &timings);
    let base = study.index[0][0];
    for (n, t) in names.iter().zip(&timings) {
        crate::cli::out(format_args!(
            "base schedule on {n}: {:.2} GFLOP/s (median {:.1} ms)\n",
            op.flops() as f64 / t[base].median_s / 1e9,
            t[base].median_s * 1e3
        ))?;
    }
    crate::cli::out(table(&reports).trim_end())?;
    let file = SettingsFile { target, op: op.kind().name().into(), shape: op.shape().to_vec(), engines: names, primitives: reports };
    std::fs::write(&a.out, serde_json::to_string_pretty(&file)? + "\n").with_context(|| format!("writing {}", a.out.display()))?;
    eprintln!("settings written to {}", a.out.display());
    Ok(())
}

fn make_engine(name: &str, target: Target) -> Result<Box<dyn Engine>> {
    match (name, target) {
        ("node", Target::Wasm) => Ok(Box::new(engines::Node::new().map_err(anyhow::Error::msg)?)),
        ("node", Target::Wgsl) => bail!("node runs Wasm only; WGSL kernels need --engine wgpu"),
        (other, _) => super::native_engine(other, target),
    }
}
