//! # webtune-client-runtime
//!
//! Runs and times webtune kernels natively, the way a browser would: Wasm
//! kernels through wasmtime, WGSL kernels through wgpu (Vulkan, Metal, DX12;
//! Mesa lavapipe in CI). It is what the `webtune run` command, the tuner's
//! offline measurements and the microbenchmarks call.
//!
//! Every run uses the seeded inputs of [`webtune_compiler::reference::inputs`]
//! with the output poisoned with NaN, checks the result against the f64
//! reference, then times the kernel: warm-up calls first, then repeated
//! samples of back-to-back calls, each sample long enough to sit well above
//! the timer's resolution. On a GPU with `TIMESTAMP_QUERY` the samples are GPU
//! timestamps around a compute pass; otherwise the wall clock around a
//! submit-and-wait. A threaded Wasm kernel (ABI 2) runs its parts on as
//! many threads over one shared memory, as a browser's thread pool would
//! (see [`wasm`]); [`RunReport::threads`] says how many ran.
//!
//! ```no_run
//! use webtune_client_runtime::{KernelDir, RunOptions, run};
//! let k = KernelDir::load("out".as_ref()).unwrap();
//! let report = run(&k, &RunOptions::default()).unwrap();
//! println!("{} ms, {} GFLOP/s", report.median_ms, report.gflops);
//! ```
//!
//! ## What this crate must never do
//! It never allocates, maps or creates anything inside a timed region; it
//! never reports a time for a kernel whose output failed the reference check
//! (the report says so instead); and it never panics on a bad kernel
//! directory or a kernel the engine rejects: those are [`RunError`]s. It knows
//! nothing of HTTP or SQL.

#[cfg(target_endian = "big")]
compile_error!("the runners pass tensors to Wasm memory and GPU buffers as they lie in host memory, which must be little-endian");

pub mod decoder;
pub mod gpu;
pub mod wasm;

use std::path::Path;

use serde::Serialize;
use webtune_compiler::reference::{self, Check, Inputs};
use webtune_compiler::{KernelMeta, Op, Target};

/// A kernel directory written by `webtune compile`: `kernel.wasm` or
/// `kernel.wgsl`, and `kernel.json`.
#[derive(Clone, Debug)]
pub struct KernelDir {
    pub bytes: Vec<u8>,
    pub meta: KernelMeta,
}

impl KernelDir {
    /// Reads and cross-checks a kernel directory.
    pub fn load(dir: &Path) -> Result<KernelDir, RunError> {
        let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| RunError::Input(format!("{}: {e}", dir.join(name).display())));
        let meta: KernelMeta = serde_json::from_slice(&read("kernel.json")?)
            .map_err(|e| RunError::Input(format!("{}: {e}", dir.join("kernel.json").display())))?;
        let bytes = read(match meta.target {
            Target::Wasm => "kernel.wasm",
            Target::Wgsl => "kernel.wgsl",
        })?;
        let k = KernelDir { bytes, meta };
        k.check()?;
        Ok(k)
    }

    /// From a kernel compiled in this process.
    pub fn from_kernel(k: webtune_compiler::Kernel) -> KernelDir {
        KernelDir { bytes: k.bytes, meta: k.meta }
    }

    fn check(&self) -> Result<(), RunError> {
        let sha = webtune_compiler::kernel::sha256_hex(&self.bytes);
        if sha != self.meta.sha256 {
            return Err(RunError::Input(format!("kernel bytes have SHA-256 {sha}, but kernel.json says {}", self.meta.sha256)));
        }
        check_abi(&self.meta)?;
        self.op()?;
        Ok(())
    }

    pub fn op(&self) -> Result<Op, RunError> {
        self.meta.parsed_op().map_err(|e| RunError::Input(format!("kernel.json: {e}")))
    }
}

/// Checks the ABI version and that the threading and pass fields agree
/// with it: ABI 1 has none of `threads`, `parts`, `part_scratch_bytes`,
/// `passes`; ABI 2 (a threaded Wasm kernel) has `threads` and one `parts`
/// range per thread, and its parts' scratch fits the scratch area; ABI 3 (a
/// WGSL kernel of several passes) has `passes` and `scratch_bytes`.
pub(crate) fn check_abi(meta: &KernelMeta) -> Result<(), RunError> {
    use webtune_compiler::kernel::{ABI_PASSES, ABI_THREADED, ABI_VERSION};
    let bad = |why: String| Err(RunError::Input(format!("kernel.json: {why}")));
    let threaded = meta.threads.is_some() || meta.parts.is_some() || meta.part_scratch_bytes.is_some();
    if meta.abi != ABI_PASSES && meta.passes.is_some() {
        return bad(format!("ABI {} has one pass, but `passes` is given; a kernel of several passes is ABI {ABI_PASSES}", meta.abi));
    }
    match meta.abi {
        ABI_VERSION => {
            if threaded {
                return bad(format!(
                    "ABI {ABI_VERSION} is single-threaded, but `threads`, `parts` or `part_scratch_bytes` is given; a threaded kernel is ABI {ABI_THREADED}"
                ));
            }
            Ok(())
        }
        ABI_PASSES => {
            if meta.target != Target::Wgsl || threaded {
                return bad(format!("ABI {ABI_PASSES} (several passes) is for WGSL kernels without threads"));
            }
            match (&meta.passes, meta.scratch_bytes) {
                (Some(p), Some(bytes)) if !p.is_empty() && bytes > 0 => Ok(()),
                _ => bad(format!("ABI {ABI_PASSES} (several passes) needs `passes` and a non-zero `scratch_bytes`")),
            }
        }
        ABI_THREADED => {
            if meta.target != Target::Wasm {
                return bad(format!("ABI {ABI_THREADED} (threaded) is for Wasm kernels, not {}", meta.target));
            }
            let (Some(threads), Some(parts)) = (meta.threads, meta.parts.as_ref()) else {
                return bad(format!(
                    "ABI {ABI_THREADED} (threaded) needs `threads` and `parts`; without them the kernel's shared memory and `kernel_part` cannot be driven"
                ));
            };
            if threads == 0 || parts.len() != threads as usize {
                return bad(format!("{threads} threads but {} parts; a threaded kernel has one part per thread", parts.len()));
            }
            let scratch = meta.scratch_bytes.unwrap_or(0) as u64;
            if meta.part_scratch_bytes.is_some_and(|b| b as u64 * threads as u64 > scratch) {
                return bad(format!("{threads} parts of `part_scratch_bytes` do not fit in `scratch_bytes` ({scratch})"));
            }
            Ok(())
        }
        v => bad(format!(
            "kernel ABI {v} is not one this runner speaks ({ABI_VERSION}, {ABI_THREADED} for threaded Wasm, or {ABI_PASSES} for WGSL of several passes)"
        )),
    }
}

/// How to run and time a kernel.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Timed samples; the report gives their median and spread.
    pub reps: usize,
    /// Untimed calls before timing (pipeline warm-up, caches, clocks).
    pub warmup: usize,
    /// After those calls, keep the device busy with the kernel for at least
    /// this long before the first sample. GPUs (and laptop CPUs) lower their
    /// clocks when idle, and a tuner spends most of its time off the device
    /// (compiling, checking): measured on the H100, a kernel timed right
    /// after idle ran 5.5x slower than the same kernel after sustained load.
    pub warmup_ms: f64,
    /// Each sample repeats the kernel until it lasts at least this long.
    pub min_sample_ms: f64,
    /// Seed of the inputs.
    pub seed: u64,
    /// Output positions (flat indices) whose values the report returns in
    /// [`RunReport::output_samples`], for a server to check (issue 7).
    pub sample_positions: Vec<u64>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { reps: 20, warmup: 3, warmup_ms: 50.0, min_sample_ms: 2.0, seed: 1, sample_positions: Vec::new() }
    }
}

/// What a run measured. Times are per kernel call.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub op: String,
    pub shape: Vec<u32>,
    pub target: Target,
    pub adapter: String,
    /// `gpu-timestamp` or `wall-clock`.
    pub timer: &'static str,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// (max − min) / median over the samples.
    pub spread: f64,
    pub samples: usize,
    /// Kernel calls per sample.
    pub calls_per_sample: u32,
    pub gflops: f64,
    /// Bytes of all arguments (inputs and output) per call, over the median time.
    pub gbps: f64,
    pub max_rel_err: f64,
    pub correct: bool,
    /// Host threads that ran each call: a threaded Wasm kernel's `threads`
    /// (its parts, each on a thread of its own, the call ending when all are
    /// done), else 1.
    pub threads: u32,
    /// WGSL: time to create the shader module and compute pipeline (the
    /// driver's compile); Wasm: time to compile the module.
    pub compile_ms: f64,
    /// The output values at [`RunOptions::sample_positions`], from the
    /// checked run (before any timing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_samples: Vec<f32>,
}

/// Why a kernel could not be run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A bad kernel directory or metadata.
    #[error("{0}")]
    Input(String),
    /// No engine for the target (e.g. no GPU adapter).
    #[error("no engine: {0}")]
    NoEngine(String),
    /// The engine rejected or failed the kernel.
    #[error("engine: {0}")]
    Engine(String),
}

/// Runs `k` on the engine its target needs, creating that engine. Callers
/// that run many kernels should keep a [`gpu::Gpu`] or [`wasm::WasmEngine`].
pub fn run(k: &KernelDir, opts: &RunOptions) -> Result<RunReport, RunError> {
    match k.meta.target {
        Target::Wasm => wasm::WasmEngine::new()?.run(k, opts),
        Target::Wgsl => gpu::Gpu::new()?.run(k, opts),
    }
}

/// Largest op (in FLOPs) checked against the full f64 reference; larger
/// ones are checked at [`SAMPLED_POSITIONS`] outputs, each recomputed on its
/// own (a full f64 reference of a 4096³ matmul is 69 G multiply-adds).
pub const FULL_CHECK_FLOPS: u64 = 1 << 31;
/// Outputs checked for ops above [`FULL_CHECK_FLOPS`]: the first and last
/// of every 16th row and column band, and seeded positions between.
pub const SAMPLED_POSITIONS: usize = 512;

/// The reference a run is checked against.
pub(crate) enum Reference {
    Full((Vec<f64>, Vec<f64>), f64),
    /// (position, value, scale), and the tolerance.
    Sampled(Vec<(usize, f64, f64)>, f64),
}

impl Reference {
    pub(crate) fn check(&self, out: &[u32]) -> Check {
        match self {
            Reference::Full(r, tolerance) => {
                let c = reference::check(r, out);
                Check { tolerance: *tolerance, ..c }
            }
            Reference::Sampled(points, tolerance) => {
                let tolerance = *tolerance;
                let mut worst = Check { max_rel_err: 0.0, worst: 0, tolerance };
                for &(p, w, s) in points {
                    let got = f32::from_bits(out[p]) as f64;
                    let err = if got.is_finite() { (got - w).abs() / s.max(f64::MIN_POSITIVE) } else { f64::INFINITY };
                    if err > worst.max_rel_err || (err.is_infinite() && worst.max_rel_err.is_finite()) {
                        worst = Check { max_rel_err: err, worst: p, tolerance };
                    }
                }
                worst
            }
        }
    }
}

/// Seeded inputs and the reference for `op`, shared by consecutive runs of
/// the same op and seed: a tuner runs dozens of candidates of one op, and
/// the f64 reference of a mid-sized matmul costs far more than running one.
pub(crate) fn prepare(op: &Op, seed: u64) -> std::sync::Arc<(Inputs, Reference)> {
    type Last = Option<(Op, u64, std::sync::Arc<(Inputs, Reference)>)>;
    static LAST: std::sync::Mutex<Last> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((o, s, r)) = last.as_ref()
        && o == op
        && *s == seed
    {
        return r.clone();
    }
    let r = std::sync::Arc::new(compute_reference(op, seed));
    *last = Some((op.clone(), seed, r.clone()));
    r
}

fn compute_reference(op: &Op, seed: u64) -> (Inputs, Reference) {
    let inputs = reference::inputs(op, seed);
    if op.flops() <= FULL_CHECK_FLOPS {
        let r = reference::reference(op, &inputs);
        return (inputs, Reference::Full(r, reference::tolerance(op)));
    }
    let (b, m, _, n) = op.bmkn();
    let (b, m, n) = (b as u64, m as u64, n as u64);
    let len = b * m * n;
    let mut pos: Vec<u64> = Vec::new();
    // Tile edges: the last row of every band of 16 rows (or m/64), in the first
    // and last batch, where remainder code meets full tiles.
    for bi in [0, b - 1] {
        let band = (m / 64).max(16);
        for i in (0..m).step_by(band as usize).map(|i| (i + band - 1).min(m - 1)).chain([0]) {
            for j in [0, n - 1, (n / 2) | 3] {
                pos.push((bi * m + i) * n + j.min(n - 1));
            }
        }
    }
    let mut rng = reference::Rng::new(seed ^ 0x5A5A);
    while pos.len() < SAMPLED_POSITIONS {
        pos.push(rng.next_u64() % len);
    }
    pos.sort_unstable();
    pos.dedup();
    let points = pos
        .iter()
        .map(|&p| {
            let (w, s) = reference::output_at(op, seed, p);
            (p as usize, w, s)
        })
        .collect();
    (inputs, Reference::Sampled(points, reference::tolerance(op)))
}

/// Per-call sample times of one kernel, before statistics.
#[derive(Clone, Debug)]
pub struct Timing {
    pub samples_ms: Vec<f64>,
    pub calls: u32,
    pub timer: &'static str,
    pub compile_ms: f64,
}

/// The output values at `positions` (NaN where a position is out of range).
pub(crate) fn samples_of(out: &[u32], positions: &[u64]) -> Vec<f32> {
    positions.iter().map(|&p| out.get(p as usize).map_or(f32::NAN, |&w| f32::from_bits(w))).collect()
}

pub(crate) fn report(k: &KernelDir, op: &Op, adapter: String, check: Check, t: Timing, output_samples: Vec<f32>) -> RunReport {
    let mut s = t.samples_ms;
    s.sort_by(f64::total_cmp);
    let median = if s.is_empty() {
        f64::NAN
    } else if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        0.5 * (s[s.len() / 2 - 1] + s[s.len() / 2])
    };
    let (min, max) = (s.first().copied().unwrap_or(f64::NAN), s.last().copied().unwrap_or(f64::NAN));
    let bytes: u64 = op.args().iter().map(|a| a.bytes()).sum();
    RunReport {
        op: k.meta.op.clone(),
        shape: k.meta.shape.clone(),
        target: k.meta.target,
        adapter,
        timer: t.timer,
        median_ms: median,
        min_ms: min,
        max_ms: max,
        spread: (max - min) / median,
        samples: s.len(),
        calls_per_sample: t.calls,
        gflops: op.flops() as f64 / (median * 1e6),
        gbps: bytes as f64 / (median * 1e6),
        max_rel_err: check.max_rel_err,
        correct: check.ok(),
        // The Wasm runner runs a threaded kernel on exactly its `threads`.
        threads: k.meta.threads.unwrap_or(1),
        compile_ms: t.compile_ms,
        output_samples,
    }
}

/// How many calls make one sample last `min_ms`, given one call took `one_ms`.
pub(crate) fn calls_for(one_ms: f64, min_ms: f64) -> u32 {
    if !(one_ms > 0.0) {
        return 1000;
    }
    (min_ms / one_ms).ceil().clamp(1.0, 10_000.0) as u32
}

/// This machine's CPU as a Wasm client would describe it
/// (`hardwareConcurrency`, SIMD support), for `POST /v1/sessions`. wasmtime
/// runs SIMD and relaxed SIMD everywhere it runs. It says `threads: false`,
/// so a native tuner is given single-threaded kernels only (the Wasm runner
/// runs threaded ones too, e.g. from `webtune run`).
pub fn cpu_fingerprint() -> serde_json::Value {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|s| s.trim().to_string()))
        .unwrap_or_default();
    serde_json::json!({
        "hardwareConcurrency": cores,
        "simd": true,
        "relaxedSimd": true,
        "threads": false,
        "cpu": {"arch": std::env::consts::ARCH, "model": model},
        "browser": {"name": "webtune-native", "version": env!("CARGO_PKG_VERSION")},
        "os": std::env::consts::OS,
    })
}
