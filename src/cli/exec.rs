//! `exec`: submit one prompt and follow its events as they arrive (`events.rs`), resuming a
//! stream that is cut. Ctrl-C cancels the execution, says so and shows its end (a provider
//! would otherwise go on working, and billing); with `--detach` it leaves it running and says
//! how to follow or cancel it.

use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt;
use model_runtime_client::Events;

use super::client::{CallError, Server};
use super::events::{Follow, Printer, Stopped};
use super::exit;
use super::request::RequestArgs;
use model_runtime::pb;

/// `exec`'s arguments: what to run, and where.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecArgs {
    #[command(flatten)]
    request: RequestArgs,
    #[command(flatten)]
    server: Server,
    /// Print one JSON object per event.
    #[arg(long)]
    json: bool,
    /// On Ctrl-C, stop following and leave the execution running (default: cancel it).
    #[arg(long)]
    detach: bool,
    /// How long a cut stream is tried again (from the last event) before giving up.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    reconnect_for: Duration,
}

/// Why an interrupted `exec` cancels.
const REASON: &str = "cancelled from the command line (Ctrl-C)";

/// How long, after Ctrl-C, `exec` waits for what it needs: the first event (to learn the
/// execution's id) and the end the cancel brings.
const AFTER_INTERRUPT: Duration = Duration::from_secs(5);

/// Runs one execution: exits 0 when it succeeded, 1 when it failed or was cancelled or the
/// server could not be reached, 2 when the request was refused as invalid, 130 on Ctrl-C.
pub async fn exec(args: ExecArgs) -> ExitCode {
    match run(args).await {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}

async fn run(args: ExecArgs) -> Result<ExitCode, CallError> {
    let request = args.request.request()?;
    let mut follow = Follow::new(args.server, Printer::new(args.json), args.reconnect_for)?;
    let client = follow.client().await?;
    let started = async { Ok::<_, CallError>(client.execute(request).await?) };
    let stream = tokio::select! {
        stream = started => stream?,
        // Nothing was answered yet: nothing may be running, or its first event is on its
        // way (the server sends it as soon as it has the execution).
        _ = follow.interrupt.recv() => return Ok(exit::interrupted()),
    };
    match follow.run(Some(stream)).await? {
        Stopped::Ended => {
            follow.printer.finish()?;
            Ok(follow.printer.code())
        }
        Stopped::Interrupted(stream) => interrupted(follow, stream, args.detach).await,
    }
}

/// Ctrl-C while following: the execution is cancelled (or, detached, left running), and
/// its end shown.
async fn interrupted(
    mut follow: Follow,
    mut stream: Option<Events>,
    detach: bool,
) -> Result<ExitCode, CallError> {
    // Its id comes with its first event.
    if follow.printer.id.is_none()
        && let Some(events) = &mut stream
        && let Ok(Some(Ok(event))) = tokio::time::timeout(AFTER_INTERRUPT, events.next()).await
    {
        follow.printer.print(&event)?;
    }
    follow.printer.finish()?;
    let Some(id) = follow.printer.id.clone() else {
        eprintln!("interrupted before the server answered: no execution was accepted");
        return Ok(exit::interrupted());
    };
    if follow.printer.ended.is_some() {
        return Ok(exit::interrupted());
    }
    if detach {
        eprintln!(
            "stopped following {id}; it goes on. `model-runtime watch {id} --after {}` \
             follows it, `model-runtime cancel {id}` stops it",
            follow.printer.last
        );
        return Ok(exit::interrupted());
    }
    eprintln!("cancelling {id} (Ctrl-C; `exec --detach` would leave it running)");
    let mut client = follow.server.client().await?;
    client
        .cancel_execution(pb::CancelExecutionRequest {
            execution_id: id.clone(),
            reason: REASON.to_owned(),
        })
        .await?;
    // Its end, as the stream brings it; a second Ctrl-C stops waiting for it.
    let _ = tokio::time::timeout(AFTER_INTERRUPT, follow.run(stream)).await;
    follow.printer.finish()?;
    if follow.printer.ended.is_none() {
        eprintln!("cancelled {id}; its end was not seen yet: `model-runtime get {id}` shows it");
    }
    Ok(exit::interrupted())
}
