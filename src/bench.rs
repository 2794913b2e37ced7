//! `model-runtime bench`: a gRPC load tool that measures what the runtime adds, beside the
//! two floors it is judged against, in the same process and the same run:
//!
//! - a running server (`--addr`): the runtime as the gateway sees it;
//! - `--baseline`: a bare tonic server streaming the runtime's own messages for the same
//!   prompt and doing nothing else ([`bare`]): what gRPC itself costs on this machine;
//! - `--embedded`: the runtime in-process with no gRPC ([`embedded`]): the runtime's cost
//!   without the transport.
//!
//! Each drives the same workers ([`load`]: closed loop, or open loop at `--rate` with
//! latency from the intended start) and reports throughput and latency percentiles from
//! log-linear histograms ([`histogram`]) as a table or one JSON line ([`report`]).

#![allow(
    clippy::disallowed_methods,
    reason = "the load tool: it measures wall-clock time, and its tasks live for one run"
)]

pub mod args;
pub mod bare;
pub mod cpu;
pub mod embedded;
pub mod grpc;
pub mod histogram;
pub mod load;
pub mod mock;
pub mod report;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

pub use args::{BenchArgs, Plan, Target};
pub use report::Report;

use model_runtime::{Config, Runtime};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The flags do not make a run.
    #[error(transparent)]
    Args(#[from] args::ArgsError),
    /// No connection to the target.
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
    /// The baseline or embedded runtime could not be set up.
    #[error("{0}")]
    Setup(String),
    /// The server refused the request the run would send: every call would fail the same.
    #[error("the server refused the request: {0}")]
    Refused(String),
}

/// How long an embedded runtime gets to finish what a timed-out call left running.
const EMBEDDED_DRAIN: Duration = Duration::from_secs(5);

/// Runs the benchmark `plan` describes.
pub async fn run(plan: &Plan) -> Result<Report, BenchError> {
    let load = load::Load {
        concurrency: plan.concurrency,
        stop: plan.stop,
        rate: plan.rate,
        timeout: plan.timeout,
    };
    let request = plan.request.clone();
    let report = |mode, target, connections, deltas, tally| {
        Report::new(
            mode,
            target,
            plan.rpc.as_str(),
            plan.concurrency,
            connections,
            plan.rate,
            deltas,
            tally,
        )
    };
    match &plan.target {
        Target::Server(address) => {
            let caller =
                grpc::GrpcCaller::connect(address, plan.connections, request, plan.rpc).await?;
            caller.preflight().await?;
            let cpu = cpu::now();
            let tally = load::run(&caller, load).await;
            let cpu = used(cpu);
            Ok(report("server", address.uri(), plan.connections, None, tally).with_cpu(cpu))
        }
        Target::Baseline(expected) => {
            let events = bare::capture(&request).await?;
            let deltas = bare::text_deltas(&events);
            if expected.is_some_and(|n| n != deltas) {
                return Err(BenchError::Setup(format!(
                    "--deltas {} but the prompt streams {deltas} text deltas",
                    expected.unwrap_or_default()
                )));
            }
            let server = bare::BareServer::start(events)?;
            let address = server.address();
            let caller =
                grpc::GrpcCaller::connect(&address, plan.connections, request, plan.rpc).await;
            let cpu = cpu::now();
            let tally = match caller {
                Ok(caller) => Ok(load::run(&caller, load).await),
                Err(e) => Err(e),
            };
            let cpu = used(cpu);
            // The client's connections are closed by now, so the stop does not wait on them.
            server.stop().await;
            Ok(report(
                "baseline",
                address.uri(),
                plan.connections,
                Some(deltas),
                tally?,
            )
            .with_cpu(cpu))
        }
        Target::Embedded(path) => {
            let config = match path {
                Some(path) => Config::load(path),
                None => Config::embedded_default(),
            }
            .map_err(|e| BenchError::Setup(format!("config: {e}")))?;
            let core = model_runtime::execution::ExecuteRequest::try_from(request)
                .map_err(|e| BenchError::Setup(format!("the benchmark request: {e}")))?;
            let runtime = Runtime::new(config).map_err(|e| BenchError::Setup(e.to_string()))?;
            let caller = embedded::EmbeddedCaller::new(runtime.clone(), core, plan.rpc);
            let cpu = cpu::now();
            let tally = load::run(&caller, load).await;
            let cpu = used(cpu);
            runtime.shutdown(EMBEDDED_DRAIN).await;
            Ok(report("embedded", "in-process".into(), 0, None, tally).with_cpu(cpu))
        }
    }
}

/// CPU used since `start`, if it could be read both times.
fn used(start: Option<cpu::CpuTime>) -> Option<cpu::CpuTime> {
    Some(cpu::now()?.since(start?))
}

/// The subcommand: plan, run, print. Exits 0 when the run happened and some call succeeded
/// (errors of individual calls are in the report, by key, each with the first message), 1
/// when every call failed or the server could not be reached, 2 when it could not run (its
/// arguments, or a request the server refuses: the first call is sent alone to find out).
pub async fn main(args: BenchArgs) -> ExitCode {
    let plan = match args.plan() {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("error: {e}");
            return crate::cli::exit::invalid();
        }
    };
    let report = match run(&plan).await {
        Ok(report) => report,
        Err(e @ BenchError::Connect(..)) => {
            eprintln!("error: {e}");
            return crate::cli::exit::failed();
        }
        Err(e) => {
            eprintln!("error: {e}");
            return crate::cli::exit::invalid();
        }
    };
    let mut out = std::io::stdout().lock();
    let written = if plan.json {
        writeln!(out, "{}", report.json())
    } else {
        write!(out, "{}", report.table())
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) if report.executions > 0 && report.succeeded == 0 => {
            eprintln!(
                "error: every one of the {} calls failed (errors above, by key)",
                report.executions
            );
            crate::cli::exit::failed()
        }
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => crate::cli::exit::failed(),
    }
}
