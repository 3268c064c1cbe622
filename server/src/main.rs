//! `webtune`: the service and command-line tool. A thin layer over the
//! library crates: it parses arguments, does the I/O, and prints results.

use webtune::cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "webtune", version, about = "Just-in-time kernel tuning for in-browser inference")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Benchmarks of the service's own work (`bench compile`: just-in-time compile time per candidate).
    Bench(cli::bench::BenchArgs),
    /// Compile one kernel to DIR/kernel.wasm (or kernel.wgsl) and DIR/kernel.json.
    Compile(cli::compile::CompileArgs),
    /// Vary one primitive at a time on every engine and classify each as consistent or device-dependent.
    Microbench(cli::microbench::MicrobenchArgs),
    /// The model store: `model import PATH` checks and stores an encoder as a bundle, `model list` lists them.
    Model(cli::model::ModelArgs),
    /// Run one kernel directory natively (wasmtime or wgpu), check it against the reference and time it.
    Run(cli::run::RunArgs),
    /// Run the tuning service and kernel database (HTTP API, queue, dashboard).
    Serve(cli::serve::ServeArgs),
    /// Tune one op natively against a server: take its candidate queue, run and check each, report the top 5.
    Tune(cli::tune::TuneArgs),
    /// Print the lite search space a device would be given for one kernel, in evaluation order.
    Space(cli::space::SpaceArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.cmd {
        Cmd::Bench(a) => cli::bench::run(a),
        Cmd::Compile(a) => cli::compile::run(a),
        Cmd::Microbench(a) => cli::microbench::run(a),
        Cmd::Model(a) => cli::model::run(a),
        Cmd::Run(a) => cli::run::run(a),
        Cmd::Serve(a) => cli::serve::run(a),
        Cmd::Space(a) => cli::space::run(a),
        Cmd::Tune(a) => cli::tune::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): nothing left to say to anyone.
        Err(e) if cli::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("webtune: {e:#}");
            ExitCode::FAILURE
        }
    }
}
