//! One streaming HTTP exchange, shared by the HTTP adapters: send the request, wait for the
//! response within the first-byte timeout, read the body within the idle timeout, cut it into
//! server-sent events and let the adapter's [`Decoder`] turn each into SPI events. Every way
//! out reports the usage known so far before the last item (an error or `Finished`), and a
//! call the runtime stops reading early hands what it knows over through
//! [`CallStream::unreported_usage`].
//!
//! The stream is a state machine polled by the driver. Only the I/O step in flight (sending,
//! reading the next body piece) is a future, and it owns no more than the response: the
//! decoder, the usage tally and the queued events stay in the stream, readable whenever the
//! call is cut. Nothing is spawned, so dropping the stream (cancellation, the deadline) drops
//! the response and closes the connection at once.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{FutureExt, Stream};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use tokio::time::error::Elapsed;
use tokio::time::{Instant, timeout_at};
use tokio_util::sync::ReusableBoxFuture;

use super::ProviderCall;
use super::http::{Upstream, cause};
use super::sse::{SseEvent, SseParser};
use super::tally::UsageTally;
use super::{CallStream, ProviderError, ProviderEvent, ProviderStream, plain_stream};
use crate::execution::{AttemptCode, FinishReason, TRACEPARENT, TRACESTATE, Text, UsageQuantity};

/// How much of an error response's body is read to classify it.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The longest `Finished` waits, after the reply's end marker, for the body itself to end. A
/// body read to its end returns the connection to the pool; one dropped early closes it, and
/// the next call pays a new TCP and TLS handshake. When the end is already there (the usual
/// case: servers end the body in the same write as the marker, or right behind it, and the
/// usage events delivered first give it time) nothing waits at all; otherwise the caller's
/// reply is held back at most this long, and a server slower than that loses its connection.
const END_OF_BODY_GRACE: Duration = Duration::from_millis(10);

/// An adapter's reading of its protocol's events.
pub(crate) trait Decoder: Send + Unpin + 'static {
    /// Handles one event: pushes the SPI events it carries to `out`, reports usage to
    /// `usage`, and returns the finish reason once the reply is complete. An `Err` ends the
    /// call (events already pushed are delivered first).
    fn event(
        &mut self,
        upstream: &Upstream,
        event: SseEvent,
        usage: &mut UsageTally,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError>;

    /// Whether a body that ends without the protocol's end marker still holds a complete
    /// reply (a finish reason was seen): some compatible servers omit the marker. An `Err`
    /// when the reply is complete but not whole (what the end marker would have found).
    fn finished_at_eof(&self, upstream: &Upstream) -> Result<Option<FinishReason>, ProviderError>;

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
        Err(error) => return plain_stream(futures_util::stream::iter([Err(error)])),
    };
    let request = upstream
        .client
        .post(upstream.url.clone())
        .headers(upstream.headers.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream");
    let request = match &call.trace {
        Some(trace) => {
            let request = request.header(TRACEPARENT, trace.traceparent());
            match trace.state() {
                Some(state) => request.header(TRACESTATE, state),
                None => request,
            }
        }
        None => request,
    }
    .body(body);
    let (by, limit) = bound(upstream.timeouts.first_byte, deadline);
    // The request goes out when the stream is first polled, as a future does.
    let send = async move {
        Arrived::Head {
            sent: timeout_at(by, request.send()).await,
            limit,
        }
    };
    Box::pin(Exchange {
        upstream: upstream.clone(),
        deadline,
        decoder,
        first_byte_by: by,
        parser: SseParser::default(),
        usage: UsageTally::default(),
        pending: VecDeque::new(),
        output_started: false,
        io: ReusableBoxFuture::new(send),
        waiting: true,
    })
}

/// What the I/O step in flight brought.
enum Arrived {
    /// The response head, or why none came within `limit` (the first-byte timeout).
    Head {
        sent: Result<reqwest::Result<reqwest::Response>, Elapsed>,
        limit: Duration,
    },
    /// An error status with its headers and what could be read of its body.
    ErrorBody {
        status: StatusCode,
        headers: HeaderMap,
        body: Vec<u8>,
    },
    /// The next body piece, the body's end, a broken body, or the read timer (of `limit`)
    /// running out; `got_byte` says whether that timer was the idle one.
    Piece {
        response: reqwest::Response,
        piece: Result<reqwest::Result<Option<Bytes>>, Elapsed>,
        got_byte: bool,
        limit: Duration,
    },
    /// The body after the reply's end marker was read (or the grace ran out): finished.
    Drained(FinishReason),
}

struct Exchange<D> {
    upstream: Upstream,
    deadline: Instant,
    decoder: D,
    /// When the first body byte must have arrived.
    first_byte_by: Instant,
    parser: SseParser,
    usage: UsageTally,
    /// Items ready for the caller.
    pending: VecDeque<Item>,
    /// Whether an output event has been handed out (for error wording; the driver applies
    /// the commit rule itself).
    output_started: bool,
    /// The I/O step; its box is reused from one body read to the next.
    io: ReusableBoxFuture<'static, Arrived>,
    /// Whether `io` holds a step still to be awaited; once false the exchange is over.
    waiting: bool,
}

impl<D: Decoder> Stream for Exchange<D> {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        loop {
            if let Some(item) = this.pending.pop_front() {
                return Poll::Ready(Some(item));
            }
            if !this.waiting {
                return Poll::Ready(None);
            }
            let arrived = ready!(this.io.poll(cx));
            // A finished step is never polled again: the handler starts the next one, or
            // the exchange is over.
            this.waiting = false;
            this.on(arrived);
        }
    }
}

impl<D: Decoder> CallStream for Exchange<D> {
    /// Usage events queued but not handed out yet, then what the tally holds (it is emptied
    /// into the queue when the exchange ends, so nothing is counted twice).
    fn unreported_usage(self: Pin<&mut Self>) -> Vec<UsageQuantity> {
        let queued = self.pending.iter().filter_map(|item| match item {
            Ok(ProviderEvent::Usage(quantity)) => Some(quantity.clone()),
            _ => None,
        });
        queued.chain(self.usage.known()).collect()
    }

    fn response_model(&self) -> Option<Text> {
        self.decoder.response_model().cloned()
    }
}

impl<D: Decoder> Exchange<D> {
    fn on(&mut self, arrived: Arrived) {
        match arrived {
            Arrived::Head { sent, limit } => self.head(sent, limit),
            Arrived::ErrorBody {
                status,
                headers,
                body,
            } => {
                let error = self.upstream.status_error(status, &headers, &body);
                self.fail(error);
            }
            Arrived::Piece {
                response,
                piece,
                got_byte,
                limit,
            } => self.piece(response, piece, got_byte, limit),
            Arrived::Drained(reason) => self.finish(reason),
        }
    }

    /// Starts the next I/O step.
    fn next(&mut self, step: impl Future<Output = Arrived> + Send + 'static) {
        self.io.set(step);
        self.waiting = true;
    }

    fn head(&mut self, sent: Result<reqwest::Result<reqwest::Response>, Elapsed>, limit: Duration) {
        let response = match sent {
            Err(_) => {
                let error =
                    self.upstream
                        .timeout(AttemptCode::Timeout, "no response came", limit, false);
                return self.fail(error);
            }
            Ok(Err(error)) => return self.fail(self.upstream.transport_error(&error)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let (by, _) = self.bound(self.upstream.timeouts.idle);
            return self.next(async move {
                let headers = response.headers().clone();
                let body = read_capped(response, by).await;
                Arrived::ErrorBody {
                    status,
                    headers,
                    body,
                }
            });
        }
        // A server that ignored `stream: true` answers with one JSON document; one that sends
        // no content type at all is given the benefit of the doubt.
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("text/event-stream");
        if !content_type.trim_start().starts_with("text/event-stream") {
            let what = "the response is not an event stream (is `stream: true` supported?)";
            let error = self.upstream.protocol_error(what, content_type);
            return self.fail(error);
        }
        self.read(response, false);
    }

    /// Reads the next body piece: within what is left of the first-byte timeout until a byte
    /// came (`got_byte`), then within the idle timeout.
    fn read(&mut self, mut response: reqwest::Response, got_byte: bool) {
        let (by, limit) = if got_byte {
            self.bound(self.upstream.timeouts.idle)
        } else {
            let now = Instant::now();
            (
                self.first_byte_by,
                self.first_byte_by.saturating_duration_since(now),
            )
        };
        self.next(async move {
            let piece = timeout_at(by, response.chunk()).await;
            Arrived::Piece {
                response,
                piece,
                got_byte,
                limit,
            }
        });
    }

    fn piece(
        &mut self,
        response: reqwest::Response,
        piece: Result<reqwest::Result<Option<Bytes>>, Elapsed>,
        got_byte: bool,
        limit: Duration,
    ) {
        let piece = match piece {
            Err(_) => {
                let (code, what) = if got_byte {
                    (AttemptCode::StreamStalled, "the response stream was silent")
                } else {
                    (AttemptCode::Timeout, "no response body came")
                };
                let error = self
                    .upstream
                    .timeout(code, what, limit, self.output_started);
                return self.fail(error);
            }
            Ok(Err(error)) => {
                // The network's account of it is for the log, not the caller.
                tracing::warn!(provider = %self.upstream.name, cause = %cause(&error), "provider response broke");
                return self.fail(self.upstream.interrupted("broke", self.output_started));
            }
            Ok(Ok(None)) => return self.end_of_body(),
            Ok(Ok(Some(piece))) => piece,
        };
        match self.parse(Some(&piece)) {
            Err(error) => self.fail(error),
            Ok(Some(reason)) => self.complete(reason, Some(response)),
            Ok(None) => self.read(response, true),
        }
    }

    /// The body ended: complete if the decoder saw the reply's end, interrupted otherwise.
    fn end_of_body(&mut self) {
        match self.parse(None) {
            Err(error) => self.fail(error),
            Ok(Some(reason)) => self.complete(reason, None),
            Ok(None) => match self.decoder.finished_at_eof(&self.upstream) {
                Err(error) => self.fail(error),
                Ok(Some(reason)) => self.complete(reason, None),
                Ok(None) => {
                    let why = "ended before the reply was complete";
                    let error = self.upstream.interrupted(why, self.output_started);
                    self.fail(error);
                }
            },
        }
    }

    /// Feeds the next piece of the body (`None`: its end) through the SSE parser and the
    /// decoder; `Some(reason)` once the reply is complete.
    fn parse(&mut self, piece: Option<&[u8]>) -> Result<Option<FinishReason>, ProviderError> {
        let mut events = Vec::new();
        let parsed = match piece {
            Some(piece) => self.parser.push(piece, &mut events),
            None => self.parser.finish(&mut events),
        };
        parsed.map_err(|e| self.upstream.protocol_error(e.what(), e.offending()))?;
        for event in events {
            if let Some(reason) = self.decode(event)? {
                return Ok(Some(reason));
            }
        }
        Ok(None)
    }

    /// One event through the decoder; the SPI events it yields are queued even when it then
    /// fails, so output that arrived before an error is not lost.
    fn decode(&mut self, event: SseEvent) -> Result<Option<FinishReason>, ProviderError> {
        let mut out = Vec::new();
        let result = self
            .decoder
            .event(&self.upstream, event, &mut self.usage, &mut out);
        for event in out {
            match &event {
                ProviderEvent::TextDelta(_) | ProviderEvent::ToolCallArgumentsDelta { .. } => {
                    self.usage.count_piece();
                    self.output_started = true;
                }
                ProviderEvent::ToolCallStarted { .. } => self.output_started = true,
                _ => {}
            }
            self.pending.push_back(Ok(event));
        }
        result
    }

    /// The reply is complete: usage first, then `Finished` once the body (if still open) has
    /// ended, at once when its end is already there, else within [`END_OF_BODY_GRACE`].
    fn complete(&mut self, reason: FinishReason, open_body: Option<reqwest::Response>) {
        self.pending
            .extend(self.usage.drain(true).into_iter().map(Ok));
        if let Some(mut response) = open_body
            && !ended_already(&mut response)
        {
            let (by, _) = self.bound(END_OF_BODY_GRACE);
            return self.next(async move {
                while let Ok(Ok(Some(_))) = timeout_at(by, response.chunk()).await {}
                Arrived::Drained(reason)
            });
        }
        self.finish(reason);
    }

    fn finish(&mut self, reason: FinishReason) {
        self.pending.push_back(Ok(ProviderEvent::Finished(reason)));
    }

    fn fail(&mut self, error: ProviderError) {
        self.pending
            .extend(self.usage.drain(false).into_iter().map(Ok));
        self.pending.push_back(Err(error));
    }

    /// A timer of `limit` from now, cut to the attempt's deadline.
    fn bound(&self, limit: Duration) -> (Instant, Duration) {
        bound(limit, self.deadline)
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

/// Reads what of the body has already arrived, without waiting; true once its end was seen
/// (or it broke: either way nothing more will come).
fn ended_already(response: &mut reqwest::Response) -> bool {
    loop {
        match response.chunk().now_or_never() {
            Some(Ok(Some(_))) => {}
            Some(Ok(None) | Err(_)) => return true,
            None => return false,
        }
    }
}

/// At most [`ERROR_BODY_LIMIT`] bytes of an error response, read until `by`; whatever could
/// not be read in time is left out (the status alone still classifies the error).
async fn read_capped(mut response: reqwest::Response, by: Instant) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match timeout_at(by, response.chunk()).await {
            Ok(Ok(Some(piece))) => body.extend_from_slice(&piece),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    body
}

#[cfg(test)]
mod tests;
