//! One module per subcommand.

use std::io::Write as _;

/// Writes one line of a subcommand's result to stdout. Unlike `println!`,
/// a closed stdout (`webtune space ... | head -1`) is an error the caller
/// returns, not a panic; `main` then exits quietly.
pub fn out(line: impl std::fmt::Display) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()
}

/// Largest input file the CLI reads (a schedule, fingerprint or settings
/// file is a few KiB): `--config @/dev/zero` must be an error, not 12 GB.
pub const MAX_INPUT: u64 = 1 << 20;

/// Reads the text file `path` (`what` names it in errors) of at most
/// [`MAX_INPUT`] bytes, without reading further than that.
pub fn read_input(path: &std::path::Path, what: &str) -> anyhow::Result<String> {
    use anyhow::Context as _;
    use std::io::Read as _;
    let f = std::fs::File::open(path).with_context(|| format!("reading {what} {}", path.display()))?;
    let mut bytes = Vec::new();
    f.take(MAX_INPUT + 1).read_to_end(&mut bytes).with_context(|| format!("reading {what} {}", path.display()))?;
    if bytes.len() as u64 > MAX_INPUT {
        anyhow::bail!("{what} {} is larger than {} KiB; give a JSON file", path.display(), MAX_INPUT / 1024);
    }
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{what} {} is not UTF-8 text; give a JSON file", path.display()))
}

/// Whether `e` comes from writing to a closed stdout.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

pub mod args;
pub mod bench;
pub mod bundle;
pub mod compile;
pub mod db;
pub mod generate;
pub mod microbench;
pub mod model;
pub mod run;
pub mod serve;
pub mod space;
pub mod tune;

/// A native timing engine (wasmtime, wgpu) by name.
#[cfg(not(feature = "native"))]
#[allow(clippy::needless_pass_by_value)]
pub fn native_engine(name: &str, _target: webtune_compiler::Target) -> anyhow::Result<Box<dyn webtune_microbench::Engine>> {
    anyhow::bail!("unknown engine `{name}`: this build knows `node`; native engines (wasmtime, wgpu) need a build with --features native")
}

/// A native timing engine (wasmtime, wgpu) by name.
#[cfg(feature = "native")]
pub fn native_engine(name: &str, target: webtune_compiler::Target) -> anyhow::Result<Box<dyn webtune_microbench::Engine>> {
    use webtune_compiler::Target;
    match (name, target) {
        ("wasmtime", Target::Wasm) => Ok(Box::new(native::Native::Wasm(webtune_client_runtime::wasm::WasmEngine::new()?))),
        ("wgpu", Target::Wgsl) => Ok(Box::new(native::Native::Gpu(Box::new(webtune_client_runtime::gpu::Gpu::new()?)))),
        ("wasmtime", Target::Wgsl) => anyhow::bail!("wasmtime runs Wasm only; WGSL kernels need --engine wgpu"),
        ("wgpu", Target::Wasm) => anyhow::bail!("wgpu runs WGSL only; Wasm kernels need --engine wasmtime or node"),
        (other, _) => anyhow::bail!("unknown engine `{other}`: use node or wasmtime (Wasm), wgpu (WGSL)"),
    }
}

#[cfg(feature = "native")]
mod native {
    use webtune_client_runtime::{KernelDir, RunOptions, gpu::Gpu, wasm::WasmEngine};
    use webtune_compiler::{Kernel, Op};
    use webtune_microbench::{Engine, Timing};

    /// The client runtime's runners as microbenchmark engines: each kernel is
    /// checked against the reference, then timed.
    pub enum Native {
        Wasm(WasmEngine),
        Gpu(Box<Gpu>),
    }

    impl std::fmt::Debug for Native {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.name())
        }
    }

    impl Engine for Native {
        fn name(&self) -> String {
            match self {
                Native::Wasm(_) => "wasmtime".into(),
                Native::Gpu(g) => format!("wgpu {}", g.adapter_name()),
            }
        }

        fn time(&mut self, _op: &Op, kernels: &[Kernel], progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Timing>, String> {
            let opts = RunOptions { reps: 9, warmup: 2, min_sample_ms: 20.0, ..RunOptions::default() };
            let mut out = Vec::with_capacity(kernels.len());
            for (i, k) in kernels.iter().enumerate() {
                let dir = KernelDir::from_kernel(k.clone());
                let r = match self {
                    Native::Wasm(e) => e.run(&dir, &opts),
                    Native::Gpu(g) => g.run(&dir, &opts),
                }
                .map_err(|e| format!("kernel {}: {e}", k.meta.sha256))?;
                if !r.correct {
                    return Err(format!("kernel {} computes a wrong result (max_rel_err {:e})", k.meta.sha256, r.max_rel_err));
                }
                // The report gives min, median and max of the samples; the
                // spread between them stands in for p10..p90.
                out.push(Timing { median_s: r.median_ms / 1e3, p10_s: r.min_ms / 1e3, p90_s: r.max_ms / 1e3, runs: r.samples as u32 });
                progress(i + 1, kernels.len());
            }
            Ok(out)
        }
    }
}
