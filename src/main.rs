//! The `model-runtime` command: parses its arguments, starts logging, and hands each
//! subcommand to its module (`cli/` for the runtime's own, `bench/` for the load tool and the
//! mock upstream), all on the library's public API.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use model_runtime::telemetry;

mod bench;
mod cli;

/// The server makes many small allocations on one executor thread that another frees (an
/// event is built by its driver, encoded by a stream task, and freed when its record leaves the
/// store). Under glibc's malloc those frees queue on per-arena locks: about a third of the
/// server's CPU at concurrency 64 went to malloc/free and their futex waits (BENCHMARKS.md).
/// mimalloc frees across threads without a lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `--version`: the release and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MODEL_RUNTIME_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "model-runtime",
    version = VERSION,
    about = "A gRPC data plane that executes model calls behind an AI gateway"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as readable text or as one JSON object per line (filtered by RUST_LOG).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gRPC server (on the embedded default config when no file is given).
    Serve(cli::serve::ServeArgs),
    /// Run one execution against a server and follow its events to its end (Ctrl-C
    /// cancels it, unless --detach).
    Exec(cli::exec::ExecArgs),
    /// Start one execution and return at once, printing it.
    Submit(cli::unary::SubmitArgs),
    /// Follow an execution's events from a sequence to its end, resuming a cut stream.
    Watch(cli::watch::WatchArgs),
    /// Print one execution: its state, plan, attempts, result or error, and usage.
    Get(cli::unary::GetArgs),
    /// Cancel an execution (a finished one is left as it is) and print it.
    Cancel(cli::unary::CancelArgs),
    /// Print what a server is and can do now: state, store, providers with live admission
    /// and health, abilities and policies.
    Metadata(cli::unary::MetadataArgs),
    /// Drive a server (or a baseline) with load; report throughput and latency.
    Bench(bench::BenchArgs),
    /// Ask a server whether it is serving (gRPC health `Check`): exit 0 only for SERVING.
    Health(cli::health::HealthArgs),
    /// Print the usage export (`StreamUsage`) as one JSON object per line, from a cursor.
    Usage(cli::usage::UsageArgs),
    /// Price usage facts with a price table (TOML, or LiteLLM's JSON map): each fact's line,
    /// priced or explicitly unpriced, and the totals.
    Price(cli::usage::PriceArgs),
    /// A provider that answers at once (OpenAI and Anthropic streaming), for measuring the
    /// provider path (benches/provider.sh). Loopback only.
    MockUpstream(bench::mock::MockArgs),
    /// Validate a config file and print every value in effect (defaults filled in; secrets
    /// named by where they are read from, never shown), then exit.
    CheckConfig(cli::check::CheckConfigArgs),
    /// Print a completion script for a shell (e.g. `model-runtime completions bash >
    /// /etc/bash_completion.d/model-runtime`).
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    // rustls is built without a bundled crypto provider (Cargo.toml): ring, installed once for
    // the process, before any TLS client (a provider's, the trace exporter's) is made.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let logs = match cli.log_format {
        LogFormat::Text => telemetry::LogFormat::Text,
        LogFormat::Json => telemetry::LogFormat::Json,
    };
    // `serve` starts its telemetry inside the async runtime, where a trace exporter runs.
    if !matches!(cli.command, Command::Serve(_)) {
        let _ = telemetry::init(logs, telemetry::Traces::Off);
    }
    match cli.command {
        Command::Serve(args) => cli::serve::main(args, logs),
        Command::Exec(args) => cli::run(cli::exec::exec(args)),
        Command::Submit(args) => cli::run(cli::unary::submit(args)),
        Command::Watch(args) => cli::run(cli::watch::watch(args)),
        Command::Get(args) => cli::run(cli::unary::get(args)),
        Command::Cancel(args) => cli::run(cli::unary::cancel(args)),
        Command::Metadata(args) => cli::run(cli::unary::metadata(args)),
        Command::Bench(args) => cli::run(bench::main(args)),
        Command::Health(args) => cli::run(cli::health::health(args)),
        Command::Usage(args) => cli::run(cli::usage::usage(args)),
        Command::Price(args) => cli::run(cli::usage::price(args)),
        Command::MockUpstream(args) => cli::run(bench::mock::main(args)),
        Command::CheckConfig(args) => cli::check::main(args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "model-runtime",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
    }
}
