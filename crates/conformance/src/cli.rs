//! The command line of `model-runtime-conformance`: `config` prints what the implementation
//! must load; `run` starts the kit's provider, drives the implementation at an address and
//! reports per rule. The binary is this function; a test runs it in-process.

use std::ffi::OsString;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::provider::Provider;
use crate::{Options, setup};

/// Where the kit's provider listens unless told otherwise.
const PROVIDER: &str = "127.0.0.1:50150";

#[derive(Parser)]
#[command(
    version,
    about = "Checks an implementation of model_runtime.v1 against docs/protocol.md"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prints the providers, policies and abilities the implementation must load: add them to
    /// its configuration (with its own [server] and [store]) before `run`.
    Config {
        /// Where `run` will serve the kit's provider.
        #[arg(long, default_value = PROVIDER)]
        provider: SocketAddr,
    },
    /// Serves the kit's provider, runs the cases against the implementation, prints a table
    /// and exits non-zero if a MUST rule failed.
    Run {
        /// The implementation's gRPC address.
        #[arg(long, default_value = "127.0.0.1:50051")]
        target: String,
        /// A second replica sharing the first's store (the cases across replicas).
        #[arg(long)]
        replica: Option<String>,
        /// Where to serve the kit's provider: the address `config` was given.
        #[arg(long, default_value = PROVIDER)]
        provider: SocketAddr,
        /// The implementation's store retention (the expiry cases wait for it), e.g. "2s".
        #[arg(long, value_parser = humantime::parse_duration)]
        retention: Option<Duration>,
        /// Adds the SHOULD cases; a failed SHOULD rule then fails the run too.
        #[arg(long)]
        strict: bool,
        /// Runs only the cases of this name or rule id (repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// How long to wait for the implementation to accept a connection.
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        wait: Duration,
        /// Also writes the report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Also writes the report as JUnit XML to this file.
        #[arg(long)]
        junit: Option<PathBuf>,
    },
}

/// Runs the command `args` (the program's name first) says, writing what it prints to `out`
/// and its complaints to `err`.
pub async fn main<I, T>(args: I, out: &mut impl Write, err: &mut impl Write) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = write!(err, "{}", e.render());
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Config { provider } => {
            if write!(out, "{}", setup::config(provider)).is_err() {
                return ExitCode::from(2);
            }
            ExitCode::SUCCESS
        }
        Command::Run {
            target,
            replica,
            provider,
            retention,
            strict,
            only,
            wait,
            json,
            junit,
        } => {
            let options = Options {
                target,
                replica,
                retention,
                strict,
                only,
                wait,
            };
            run(&options, provider, json, junit, out, err).await
        }
    }
}

async fn run(
    options: &Options,
    listen: SocketAddr,
    json: Option<PathBuf>,
    junit: Option<PathBuf>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> ExitCode {
    let provider = match Provider::start(listen).await {
        Ok(provider) => provider,
        Err(e) => {
            let _ = writeln!(
                err,
                "model-runtime-conformance: cannot serve the provider on {listen}: {e}"
            );
            return ExitCode::from(2);
        }
    };
    let report = match crate::run(options, &provider).await {
        Ok(report) => report,
        Err(e) => {
            let _ = writeln!(err, "model-runtime-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    if write!(out, "{}", report.table()).is_err() {
        return ExitCode::from(2);
    }
    for (path, text) in [(json, report.json()), (junit, report.junit())] {
        if let Some(path) = path
            && let Err(e) = std::fs::write(&path, text)
        {
            let _ = writeln!(
                err,
                "model-runtime-conformance: cannot write {}: {e}",
                path.display()
            );
            return ExitCode::from(2);
        }
    }
    if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
