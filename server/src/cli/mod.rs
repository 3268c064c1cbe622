//! One module per subcommand.

pub mod compile;
pub mod microbench;
pub mod run;
pub mod serve;
pub mod space;

/// A native timing engine (wasmtime, wgpu) by name.
#[allow(clippy::needless_pass_by_value)]
pub fn native_engine(name: &str, _target: webtune_compiler::Target) -> anyhow::Result<Box<dyn webtune_microbench::Engine>> {
    anyhow::bail!("unknown engine `{name}`: this build knows `node`; native engines (wasmtime, wgpu) need a build with --features native")
}
