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
    /// Static bundles of winners: `bundle export` writes winners and kernels as checksummed files, `bundle import` loads one.
    Bundle(cli::bundle::BundleArgs),
    /// Compile one kernel to DIR/kernel.wasm (or kernel.wgsl) and DIR/kernel.json.
    Compile(cli::compile::CompileArgs),
    /// The database's upkeep: `db compact` folds raw history older than N days into per-day sums (the retention policy).
    Db(cli::db::DbArgs),
    /// Generate text with a decoder bundle natively (wasmtime): the text alone on stdout.
    Generate(cli::generate::GenerateArgs),
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

/// Help and version go to stdout as clap writes them; every other argument
/// error is one line on stderr and status 1, like every other error of the
/// tool (clap's own text is several lines and status 2).
fn clap_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand { ExitCode::FAILURE } else { ExitCode::SUCCESS };
    }
    let text = e.render().to_string();
    // The first paragraph says what is wrong (a list of missing arguments
    // runs on over indented lines); tips and usage follow a blank line.
    let para: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    let first = para.join(" ");
    let first = first.trim_start_matches("error: ");
    // Quote at most a screen line of the input back.
    let first: String = if first.chars().count() > 200 { first.chars().take(200).collect::<String>() + "…" } else { first.to_string() };
    eprintln!("webtune: {first}; see webtune --help");
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => return clap_error(&e),
    };
    let result = match args.cmd {
        Cmd::Bench(a) => cli::bench::run(a),
        Cmd::Bundle(a) => cli::bundle::run(a),
        Cmd::Compile(a) => cli::compile::run(a),
        Cmd::Db(a) => cli::db::run(a),
        Cmd::Generate(a) => cli::generate::run(a),
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
