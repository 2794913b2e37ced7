//! Following an execution's events, for `exec` and `watch`: each printed as it comes (the
//! reply's text to stdout and a status line per event to stderr, or one JSON object per event
//! with `--json`), and a stream that is cut resumed with `Watch` from the last event printed
//! (`model-runtime-client`'s `Events`), so nothing is printed twice or missed. Ctrl-C stops the following; what happens to the
//! execution then is the command's to say.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt;
use model_runtime_client::{Client, Events, Retry};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::client::{CallError, Server};
use super::{exit, render};
use model_runtime::pb;
use model_runtime::pb::execution_event::Payload;

/// Writes events as they come, and remembers where the execution is.
#[derive(Debug, Default)]
pub struct Printer {
    json: bool,
    /// Whether reply text on stdout awaits its line end: a status line on the same terminal
    /// first ends the reply's line.
    mid_line: bool,
    /// The execution, from its first event.
    pub id: Option<String>,
    /// The last sequence printed.
    pub last: u64,
    /// Whether the execution ended, and succeeded.
    pub ended: Option<bool>,
}

impl Printer {
    /// Readable lines, or one JSON object per event.
    pub fn new(json: bool) -> Self {
        Self {
            json,
            ..Self::default()
        }
    }

    /// Starting after `last` (a `watch --after`).
    pub fn after(json: bool, id: String, last: u64) -> Self {
        Self {
            id: Some(id),
            last,
            ..Self::new(json)
        }
    }

    /// Writes one event; one already printed (a resumed stream's overlap) is skipped.
    pub fn print(&mut self, event: &pb::ExecutionEvent) -> std::io::Result<()> {
        if event.sequence <= self.last && self.id.is_some() {
            return Ok(());
        }
        self.id.get_or_insert_with(|| event.execution_id.clone());
        self.last = event.sequence;
        match &event.payload {
            Some(Payload::Completed(_)) => self.ended = Some(true),
            Some(Payload::Failed(_)) => self.ended = Some(false),
            _ => {}
        }
        let mut out = std::io::stdout().lock();
        if self.json {
            writeln!(out, "{}", render::json(event))?;
            return out.flush();
        }
        if let Some(Payload::TextDelta(delta)) = &event.payload {
            out.write_all(delta.text.as_bytes())?;
            out.flush()?;
            self.mid_line = !delta.text.ends_with('\n');
        }
        if let Some(Payload::Completed(done)) = &event.payload {
            let output = done
                .result
                .clone()
                .unwrap_or_default()
                .output
                .unwrap_or_default();
            for call in output.tool_calls {
                self.end_line(&mut out)?;
                writeln!(out, "tool call {}({})", call.name, call.arguments_json)?;
            }
        }
        if let Some(line) = render::line(event) {
            self.end_line(&mut out)?;
            out.flush()?;
            writeln!(std::io::stderr().lock(), "{line}")?;
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if std::mem::take(&mut self.mid_line) {
            writeln!(out)?;
        }
        Ok(())
    }

    /// Ends a reply's line left open.
    pub fn finish(&mut self) -> std::io::Result<()> {
        self.end_line(&mut std::io::stdout().lock())
    }

    /// 0 when the execution succeeded, 1 when it failed or was cancelled (or never ended).
    pub fn code(&self) -> ExitCode {
        if self.ended == Some(true) {
            ExitCode::SUCCESS
        } else {
            exit::failed()
        }
    }
}

/// How following stopped.
pub enum Stopped {
    /// The execution ended.
    Ended,
    /// Ctrl-C: the stream as it was, to read the rest of if the command wants it.
    Interrupted(Option<Events>),
}

/// Follows events to the execution's end, or until Ctrl-C.
pub struct Follow {
    pub server: Server,
    pub printer: Printer,
    /// SIGINT, listened for from before the first call, so Ctrl-C never kills the command
    /// while an execution may be starting.
    pub interrupt: Signal,
    /// How long a cut stream is tried again before the command gives up.
    pub reconnect_for: Duration,
}

impl Follow {
    /// Listens for Ctrl-C from now on.
    pub fn new(
        server: Server,
        printer: Printer,
        reconnect_for: Duration,
    ) -> Result<Self, CallError> {
        Ok(Self {
            server,
            printer,
            interrupt: signal(SignalKind::interrupt())?,
            reconnect_for,
        })
    }

    /// A client of the server whose streams resume for up to `reconnect_for` without an
    /// event (`model-runtime-client`: the same channel reconnects).
    pub async fn client(&self) -> Result<Client, CallError> {
        let retry = Retry {
            patience: self.reconnect_for,
            ..Retry::default()
        };
        Ok(Client::new(self.server.connect().await?)
            .with_retry(retry)
            .on_resume(say_resuming))
    }

    /// Prints `events` (or, with none, the execution's from `Watch` after the last event
    /// printed) until the execution's end; the stream resumes itself when it is cut.
    pub async fn run(&mut self, events: Option<Events>) -> Result<Stopped, CallError> {
        let mut events = match events {
            Some(events) => events,
            None => {
                let id = self.printer.id.clone().unwrap_or_default();
                let client = self.client().await?;
                let watched = client.watch(&id, self.printer.last);
                tokio::select! {
                    watched = watched => watched?,
                    _ = self.interrupt.recv() => return Ok(Stopped::Interrupted(None)),
                }
            }
        };
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(event)) => self.printer.print(&event)?,
                    Some(Err(status)) => return Err(status.into()),
                    None => return Ok(Stopped::Ended),
                },
                _ = self.interrupt.recv() => return Ok(Stopped::Interrupted(Some(events))),
            }
        }
    }
}

/// Says on stderr that a cut stream resumes.
fn say_resuming(last: u64, why: &tonic::Status) {
    eprintln!(
        "the stream was cut after sequence {last} ({}); resuming",
        why.message()
    );
}
