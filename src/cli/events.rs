//! Following an execution's events, for `exec` and `watch`: each printed as it comes (the
//! reply's text to stdout and a status line per event to stderr, or one JSON object per event
//! with `--json`), and a stream that is cut resumed with `Watch` from the last event printed,
//! so nothing is printed twice or missed. Ctrl-C stops the following; what happens to the
//! execution then is the command's to say.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tonic::{Code, Streaming};

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
    /// The execution ended (or the server has nothing more to send).
    Ended,
    /// Ctrl-C: the stream as it was, to read the rest of if the command wants it.
    Interrupted(Option<Box<Streaming<pb::ExecutionEvent>>>),
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

    /// Prints `stream`'s events (or, with none, the execution's from `Watch`) until the
    /// execution's end; a stream cut before it is resumed from the last event printed,
    /// for up to `reconnect_for` without an event.
    pub async fn run(
        &mut self,
        mut stream: Option<Box<Streaming<pb::ExecutionEvent>>>,
    ) -> Result<Stopped, CallError> {
        let mut failing_since: Option<tokio::time::Instant> = None;
        loop {
            let current = match stream.take() {
                Some(current) => current,
                None => match self.resume(&mut failing_since).await? {
                    Some(current) => Box::new(current),
                    None => return Ok(Stopped::Interrupted(None)),
                },
            };
            let mut current = current;
            let cut = loop {
                tokio::select! {
                    event = current.message() => match event {
                        Ok(Some(event)) => {
                            failing_since = None;
                            self.printer.print(&event)?;
                        }
                        Ok(None) => break None,
                        Err(status) => break Some(status),
                    },
                    _ = self.interrupt.recv() => {
                        return Ok(Stopped::Interrupted(Some(current)));
                    }
                }
            };
            if self.printer.ended.is_some() {
                return Ok(Stopped::Ended);
            }
            // Cut before the end: a server that drains, a connection lost.
            match cut {
                Some(status) if !resumable(&status) => return Err(status.into()),
                _ if self.printer.id.is_none() => {
                    return Err(CallError::Invalid(
                        "the stream ended before its first event".to_owned(),
                    ));
                }
                cut => {
                    let why = cut.map_or_else(|| "it ended".to_owned(), |s| s.message().to_owned());
                    eprintln!(
                        "the stream was cut after sequence {} ({why}); resuming",
                        self.printer.last
                    );
                }
            }
        }
    }

    /// A `Watch` from the last event printed, on a new connection: tried again (for up to
    /// `reconnect_for` since the last event) while the server cannot be reached or is
    /// unavailable. `None` on Ctrl-C.
    async fn resume(
        &mut self,
        failing_since: &mut Option<tokio::time::Instant>,
    ) -> Result<Option<Streaming<pb::ExecutionEvent>>, CallError> {
        let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
        let mut pause = Duration::from_millis(100);
        loop {
            let request = pb::WatchRequest {
                execution_id: self.printer.id.clone().unwrap_or_default(),
                after_sequence: self.printer.last,
            };
            let watched = async {
                let mut client = self.server.client().await?;
                Ok::<_, CallError>(client.watch(request).await?.into_inner())
            };
            let error = tokio::select! {
                watched = watched => match watched {
                    Ok(stream) => return Ok(Some(stream)),
                    Err(error) => error,
                },
                _ = self.interrupt.recv() => return Ok(None),
            };
            let again = match &error {
                CallError::Connect { .. } => true,
                CallError::Status(status) => resumable(status),
                _ => false,
            };
            if !again || since.elapsed() + pause > self.reconnect_for {
                return Err(error);
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                _ = self.interrupt.recv() => return Ok(None),
            }
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }
}

/// Whether a stream that failed with `status` may be followed again from its cursor: the
/// server or the connection went away, or the server is busy; never a refusal of the request.
fn resumable(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::Aborted | Code::Internal
    )
}
