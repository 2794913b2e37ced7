//! `watch`: follows one execution's events from a sequence (`Watch`), as `exec` shows them,
//! resuming from the last one printed when the stream is cut, until its end. Ctrl-C stops
//! the watching, never the execution.

use std::process::ExitCode;
use std::time::Duration;

use super::client::{CallError, Server};
use super::events::{Follow, Printer, Stopped};
use super::exit;

/// `watch`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// The execution to follow (its id, `ex_...`).
    execution_id: String,
    /// Only events after this sequence (0: from its first).
    #[arg(long, default_value_t = 0)]
    after: u64,
    #[command(flatten)]
    server: Server,
    /// Print one JSON object per event.
    #[arg(long)]
    json: bool,
    /// How long a cut stream is tried again (from the last event) before giving up.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    reconnect_for: Duration,
}

/// Follows the execution: exits 0 when it succeeded, 1 when it failed or was cancelled or
/// the server could not be reached, 2 for an execution the server does not have, 130 on
/// Ctrl-C.
pub async fn watch(args: WatchArgs) -> ExitCode {
    match run(args).await {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}

async fn run(args: WatchArgs) -> Result<ExitCode, CallError> {
    let printer = Printer::after(args.json, args.execution_id.clone(), args.after);
    let mut follow = Follow::new(args.server, printer, args.reconnect_for)?;
    let stopped = follow.run(None).await?;
    follow.printer.finish()?;
    match stopped {
        Stopped::Ended => Ok(follow.printer.code()),
        Stopped::Interrupted(_) => {
            eprintln!(
                "stopped watching {} after sequence {}; it goes on",
                args.execution_id, follow.printer.last
            );
            Ok(exit::interrupted())
        }
    }
}
