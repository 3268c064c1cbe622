//! The research room: studies and probes whose figures BENCHMARKS.md records.
//!
//! Each program under `src/bin/` answers one question about the product's
//! kernels or search space (how fast the WGSL backend's kernels run on a GPU
//! beside cuBLAS, how good the Wasm lite space is against a wide search, what
//! naga's front end costs), and `device/` holds the scripts and CUDA twins run
//! on the GPU machine. Hand-written study kernels live here and only here.
//!
//! What it must never do: be a dependency of a product crate (`compiler`,
//! `tuner`, `kernel-db`, `client-runtime`, `microbench`, `server`), or reach
//! into them past their public API. Study kernels run through the runner's
//! checked path (`Gpu::prepare_source`, bounds checks always on); only kernels
//! the compiler generated can be timed without them.
//!
//! Besides the programs, two modules that the load and crowd studies share:
//! [`clients`], simulated devices that talk to a real `webtune serve` over
//! HTTP exactly as browsers do (the same file the server's integration tests
//! use, so that a study and a test speak one protocol), and [`population`],
//! the population simulator (device classes, hidden true times, leavers,
//! liars, convergence) that `src/bin/population.rs` runs at scale and
//! `tests/population.rs` on a small crowd.

#[path = "../../server/tests/common/mod.rs"]
pub mod clients;
pub mod population;
