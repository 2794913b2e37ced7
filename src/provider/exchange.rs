//! One streaming HTTP exchange, shared by the HTTP adapters: send the request, wait for the
//! response within the first-byte timeout, read the body within the idle timeout, cut it into
//! events (server-sent events, or AWS's binary event stream: the adapter's framing) and let
//! the adapter's [`Decoder`] turn each into SPI events. Every way out reports the usage known
//! so far before the last item (an error or `Finished`), and a call the runtime stops reading
//! early hands what it knows over through [`CallStream::unreported_usage`].
//!
//! The stream is a state machine polled by the driver, and it drives its HTTP call (see
//! [`h1`]) itself: each poll reads what the socket holds and turns all of it into
//! events before it returns, so a reply that arrived in one read is handed to the driver
//! whole, stored as one batch and written to the caller in one flush. Nothing is spawned, so
//! dropping the stream (cancellation, the deadline) closes the connection at once.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Future, Stream};
use http::StatusCode;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use tokio::time::{Instant, Sleep};

use super::ProviderCall;
use super::framing::Framing;
use super::http::Upstream;
use super::tally::UsageTally;
use super::{CallStream, ProviderError, ProviderEvent, ProviderStream, unsent};
use crate::execution::{AttemptCode, FinishReason, TRACEPARENT, TRACESTATE, Text, UsageQuantity};
use h1::{Call, Progress, Response};
use reply::Reply;

/// How much of an error response's body is read to classify it.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The longest `Finished` waits, after the reply's end marker, for the body itself to end. A
/// body read to its end returns the connection to the pool; one dropped early closes it, and
/// the next call pays a new TCP and TLS handshake. When the end is already there (the usual
/// case: servers end the body in the same write as the marker, or right behind it) nothing
/// waits at all; otherwise the caller's reply is held back at most this long, and a server
/// slower than that loses its connection.
const END_OF_BODY_GRACE: Duration = Duration::from_millis(10);

/// How long a reply whose finish marker came ([`Decoder::marked`]: Gemini's `finishReason`,
/// Bedrock's `messageStop`) waits for a trailing event (its usage) on a body that stays open,
/// before it is complete without it: a server that keeps the body open after its answer must
/// not turn a whole answer into a stall.
const MARKER_GRACE: Duration = Duration::from_secs(1);

/// An adapter's reading of its protocol's events.
pub(crate) trait Decoder: Send + Unpin + 'static {
    /// How the reply's body is cut into events.
    type Framing: Framing;

    /// Handles one event: pushes the SPI events it carries to `out`, reports usage to
    /// `usage`, and returns the finish reason once the reply is complete. An `Err` ends the
    /// call (events already pushed are delivered first).
    fn event(
        &mut self,
        upstream: &Upstream,
        event: <Self::Framing as Framing>::Event<'_>,
        usage: &mut UsageTally,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError>;

    /// Whether a body that ends without the protocol's end marker still holds a complete
    /// reply (a finish reason was seen): some compatible servers omit the marker. An `Err`
    /// when the reply is complete but not whole (what the end marker would have found).
    fn finished_at_eof(&self, upstream: &Upstream) -> Result<Option<FinishReason>, ProviderError>;

    /// The reply's finish, once the protocol's marker of it came while an event may still
    /// follow (a usage report): then a body that stays open is waited for at most
    /// [`MARKER_GRACE`], and the reply is complete without it. `None` while no such marker
    /// came, or for a protocol whose last event ends the reply itself (`event` says so).
    fn marked(&self) -> Option<FinishReason> {
        None
    }

    /// The model the reply says produced it, once seen.
    fn response_model(&self) -> Option<&Text> {
        None
    }
}

type Item = Result<ProviderEvent, ProviderError>;

/// Posts `body` (JSON) to `upstream` for `call` and streams the reply through `decoder`;
/// the attempt ends by the call's deadline, and the request carries the call's trace. A
/// body that could not be built is the stream's only item.
pub(crate) fn post<D: Decoder>(
    upstream: &Upstream,
    body: Result<Vec<u8>, ProviderError>,
    call: &ProviderCall,
    decoder: D,
) -> ProviderStream {
    let deadline = call.deadline;
    let body = match body {
        Ok(body) => body,
        Err(error) => return unsent(error),
    };
    let traceparent = call.trace.as_ref().map(|trace| trace.traceparent());
    let mut headers = vec![
        (CONTENT_TYPE.as_str(), "application/json"),
        (ACCEPT.as_str(), D::Framing::MEDIA_TYPE),
    ];
    if let (Some(trace), Some(parent)) = (&call.trace, &traceparent) {
        headers.push((TRACEPARENT, parent));
        if let Some(state) = trace.state() {
            headers.push((TRACESTATE, state));
        }
    }
    let request = upstream.client.post(&upstream.headers, &headers, &body);
    let (by, limit) = bound(upstream.timeouts.first_byte, deadline);
    Box::pin(Exchange {
        // The request goes out when the stream is first polled, as a future's would.
        call: upstream.client.call(request),
        step: Step::Head { limit },
        timer: Timer::new(by),
        reply: Reply::new(upstream.for_call(call), deadline, decoder),
    })
}

/// Where the exchange is.
enum Step {
    /// Waiting for the response head, within the first-byte timeout (`limit` long).
    Head { limit: Duration },
    /// Reading an error response's body, to classify the error.
    ErrorBody {
        status: StatusCode,
        headers: HeaderMap,
        body: Vec<u8>,
    },
    /// Reading the event stream: within what is left of the first-byte timeout until body
    /// data came (`got_byte`), then within the idle timeout; `limit` is the timer's length.
    Body { got_byte: bool, limit: Duration },
    /// The reply is complete; its body's end is still to come, within the grace.
    Drain(FinishReason),
    /// Nothing more to read.
    Over,
}

struct Exchange<D: Decoder> {
    call: Call,
    step: Step,
    timer: Timer,
    reply: Reply<D>,
}

/// The timer of the step in flight. `by` moves freely (the idle timeout restarts with every
/// read); the sleep under it is re-armed only when it fires before `by` or `by` moved
/// earlier, so a busy stream costs no timer update per read.
struct Timer {
    by: Instant,
    sleep: Pin<Box<Sleep>>,
}

impl Timer {
    fn new(by: Instant) -> Self {
        Self {
            by,
            sleep: Box::pin(tokio::time::sleep_until(by)),
        }
    }

    /// Whether `by` has passed; if not, the task is woken when it does.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.sleep.deadline() > self.by {
            self.sleep.as_mut().reset(self.by);
        }
        while self.sleep.as_mut().poll(cx).is_ready() {
            if self.sleep.deadline() >= self.by {
                return true;
            }
            self.sleep.as_mut().reset(self.by);
        }
        false
    }
}

impl<D: Decoder> Stream for Exchange<D> {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        loop {
            if let Some(item) = this.reply.pending.pop_front() {
                return Poll::Ready(Some(item));
            }
            if matches!(this.step, Step::Over) {
                return Poll::Ready(None);
            }
            if this.advance(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    /// The items parsed and not yet handed out: a reader taking what is ready makes room
    /// for them once.
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.reply.pending.len(), None)
    }
}

impl<D: Decoder> CallStream for Exchange<D> {
    /// Usage events queued but not handed out yet, then what the tally holds (it is emptied
    /// into the queue when the exchange ends, so nothing is counted twice).
    fn unreported_usage(self: Pin<&mut Self>) -> Vec<UsageQuantity> {
        self.reply.unreported_usage()
    }

    fn response_model(&self) -> Option<Text> {
        self.reply.decoder.response_model().cloned()
    }
}

impl<D: Decoder> Exchange<D> {
    /// Takes the step in flight as far as the connection allows: ready once the step changed
    /// or items were queued.
    fn advance(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.step {
            Step::Over => Poll::Ready(()),
            Step::Head { limit } => {
                let limit = *limit;
                self.advance_head(cx, limit)
            }
            Step::Body { got_byte, limit } => {
                let (got_byte, limit) = (*got_byte, *limit);
                self.advance_body(cx, got_byte, limit)
            }
            Step::ErrorBody { .. } => self.advance_error_body(cx),
            Step::Drain(reason) => {
                let reason = *reason;
                self.advance_drain(cx, reason)
            }
        }
    }

    /// Waiting for the response head, at most `limit`.
    fn advance_head(&mut self, cx: &mut Context<'_>, limit: Duration) -> Poll<()> {
        match self.call.poll_head(cx) {
            Poll::Ready(Ok(response)) => self.head(response),
            Poll::Ready(Err(failure)) => {
                let error = self.reply.upstream.transport_error(&failure);
                self.fail(error);
            }
            Poll::Pending if self.timer.expired(cx) => {
                let upstream = &self.reply.upstream;
                let error =
                    upstream.timeout(AttemptCode::Timeout, "no response came", limit, false);
                self.fail(error);
            }
            Poll::Pending => return Poll::Pending,
        }
        Poll::Ready(())
    }

    /// Reading an event stream's body: silent at most `limit`.
    fn advance_body(&mut self, cx: &mut Context<'_>, got_byte: bool, limit: Duration) -> Poll<()> {
        let reply = &mut self.reply;
        match self.call.poll_body(cx, &mut |data| reply.feed(data)) {
            Poll::Ready(Ok(progress)) => self.read(progress),
            // The reply ended (or the decoder failed it) before the body broke: that
            // is its outcome.
            Poll::Ready(Err(_)) if self.reply.settled.is_some() => {
                self.read(Progress::End);
            }
            Poll::Ready(Err(failure)) => {
                let upstream = &self.reply.upstream;
                // The network's account of it is for the log, not the caller.
                tracing::warn!(
                    execution_id = upstream.execution_id(),
                    attempt = upstream.attempt(),
                    provider = %upstream.name,
                    cause = failure.cause(),
                    "provider response broke"
                );
                let error = upstream.interrupted("broke", self.reply.output_started);
                self.fail(error);
            }
            Poll::Pending if self.timer.expired(cx) => {
                if let Some(reason) = self.reply.decoder.marked() {
                    // The answer was whole; what may follow it did not come in its grace.
                    self.reply.complete();
                    self.finish(reason);
                    return Poll::Ready(());
                }
                let (code, what) = if got_byte {
                    (AttemptCode::StreamStalled, "the response stream was silent")
                } else {
                    (AttemptCode::Timeout, "no response body came")
                };
                let started = self.reply.output_started;
                let error = self.reply.upstream.timeout(code, what, limit, started);
                self.fail(error);
            }
            Poll::Pending => return Poll::Pending,
        }
        Poll::Ready(())
    }

    /// Reading an error status's body, as much of it as classifies it.
    fn advance_error_body(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Step::ErrorBody { body, .. } = &mut self.step else {
            return Poll::Ready(());
        };
        let mut take = |data: &[u8]| {
            let room = ERROR_BODY_LIMIT - body.len();
            body.extend_from_slice(&data[..data.len().min(room)]);
        };
        // Whatever could not be read in time is left out: the status alone still
        // classifies the error.
        match self.call.poll_body(cx, &mut take) {
            Poll::Ready(Ok(Progress::Data)) if body.len() < ERROR_BODY_LIMIT => {}
            Poll::Pending if !self.timer.expired(cx) => return Poll::Pending,
            _ => {
                let Step::ErrorBody {
                    status,
                    headers,
                    body,
                } = std::mem::replace(&mut self.step, Step::Over)
                else {
                    unreachable!("the step was just matched")
                };
                let error = self.reply.upstream.status_error(status, &headers, &body);
                self.fail(error);
            }
        }
        Poll::Ready(())
    }

    /// Reading what is left of a body whose reply is complete, so the connection can serve
    /// another request.
    fn advance_drain(&mut self, cx: &mut Context<'_>, reason: FinishReason) -> Poll<()> {
        match self.call.poll_body(cx, &mut |_| {}) {
            Poll::Ready(Ok(Progress::Data)) => {}
            // Nothing more will come either way.
            Poll::Ready(Ok(Progress::End) | Err(_)) => self.finish(reason),
            Poll::Pending if self.timer.expired(cx) => self.finish(reason),
            Poll::Pending => return Poll::Pending,
        }
        Poll::Ready(())
    }

    /// The response head: an error status's body is read next, an event stream's events.
    fn head(&mut self, response: Response) {
        let upstream = &self.reply.upstream;
        let Ok(status) = StatusCode::from_u16(response.status) else {
            let error = upstream.protocol_error("the status is not a number from 100 to 999", "");
            return self.fail(error);
        };
        if !status.is_success() {
            self.timer.by = self.reply.bound(upstream.timeouts.idle).0;
            self.step = Step::ErrorBody {
                status,
                headers: response.headers,
                body: Vec::new(),
            };
            return;
        }
        // A server that ignored `stream: true` answers with one JSON document; one that sends
        // no content type at all is given the benefit of the doubt.
        let media_type = D::Framing::MEDIA_TYPE;
        let content_type = response
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(media_type);
        if !content_type.trim_start().starts_with(media_type) {
            let what = "the response is not an event stream (is `stream: true` supported?)";
            let error = upstream.protocol_error(what, content_type);
            return self.fail(error);
        }
        // The timer still runs to the first-byte bound: what is left of it is the limit.
        let limit = self.timer.by.saturating_duration_since(Instant::now());
        self.step = Step::Body {
            got_byte: false,
            limit,
        };
    }

    /// A body read brought data, or the body's end.
    fn read(&mut self, progress: Progress) {
        match (self.reply.settled.take(), progress) {
            (Some(Err(error)), _) => self.fail(error),
            (Some(Ok(reason)), Progress::End) => {
                self.reply.complete();
                self.finish(reason);
            }
            (Some(Ok(reason)), Progress::Data) => {
                self.reply.complete();
                self.timer.by = self.reply.bound(END_OF_BODY_GRACE).0;
                self.step = Step::Drain(reason);
            }
            (None, Progress::End) => match self.reply.end_of_body() {
                Ok(reason) => {
                    self.reply.complete();
                    self.finish(reason);
                }
                Err(error) => self.fail(error),
            },
            (None, Progress::Data) => {
                // The idle timeout restarts with every read (cut to the deadline, which
                // the message then names); once the finish marker came, a short grace.
                let mut idle = self.reply.upstream.timeouts.idle;
                if self.reply.decoder.marked().is_some() {
                    idle = idle.min(MARKER_GRACE);
                }
                let (by, limit) = self.reply.bound(idle);
                self.timer.by = by;
                self.step = Step::Body {
                    got_byte: true,
                    limit,
                };
            }
        }
    }

    fn finish(&mut self, reason: FinishReason) {
        self.end();
        self.reply
            .pending
            .push_back(Ok(ProviderEvent::Finished(reason)));
    }

    fn fail(&mut self, error: ProviderError) {
        self.end();
        self.reply.fail(error);
    }

    /// Nothing more is read: a connection still open mid-body is closed.
    fn end(&mut self) {
        self.call.close();
        self.step = Step::Over;
    }
}

/// A timer of `limit` from now, cut to `deadline`: when it fires, and after how long.
fn bound(limit: Duration, deadline: Instant) -> (Instant, Duration) {
    let now = Instant::now();
    let by = now
        .checked_add(limit)
        .map_or(deadline, |at| at.min(deadline));
    (by, by.saturating_duration_since(now))
}

mod reply;
#[cfg(test)]
mod tests;
