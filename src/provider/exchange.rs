//! One streaming HTTP exchange, shared by the HTTP adapters: send the request, wait for the
//! response within the first-byte timeout, read the body within the idle timeout, cut it into
//! server-sent events and let the adapter's [`Decoder`] turn each into SPI events. Every way
//! out reports the usage known so far before the last item (an error or `Finished`).
//!
//! The stream is a plain state machine polled by the driver: nothing is spawned, so dropping
//! it (cancellation, the deadline) drops the response and closes the connection at once.

use std::collections::VecDeque;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use tokio::time::{Instant, timeout_at};

use super::http::{Upstream, cause};
use super::sse::{SseEvent, SseParser};
use super::tally::UsageTally;
use super::{ProviderError, ProviderEvent, ProviderStream};
use crate::execution::FinishReason;

/// How much of an error response's body is read to classify it.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// How long to wait, after the reply's end marker, for the body itself to end. A body read
/// to its end returns the connection to the pool; one dropped early closes it, and the next
/// call pays a new TCP and TLS handshake. Servers end the body right after the marker, so
/// the wait is normally over at once; the usage events, delivered first, overlap it.
const END_OF_BODY_GRACE: Duration = Duration::from_millis(50);

/// An adapter's reading of its protocol's events.
pub(crate) trait Decoder: Send + 'static {
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
}

/// Posts `body` (JSON) to `upstream` and streams the reply through `decoder`; the attempt
/// ends by `deadline`. A body that could not be built is the stream's only item.
pub(crate) fn post<D: Decoder>(
    upstream: &Upstream,
    body: Result<Vec<u8>, ProviderError>,
    deadline: Instant,
    decoder: D,
) -> ProviderStream {
    let body = match body {
        Ok(body) => body,
        Err(error) => return Box::pin(futures_util::stream::iter([Err(error)])),
    };
    let request = upstream
        .client
        .post(upstream.url.clone())
        .headers(upstream.headers.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream")
        .body(body);
    let exchange = Exchange {
        upstream: upstream.clone(),
        deadline,
        decoder,
        phase: Phase::Send(request),
        first_byte_by: deadline,
        parser: SseParser::default(),
        usage: UsageTally::default(),
        pending: VecDeque::new(),
        output_started: false,
    };
    Box::pin(futures_util::stream::unfold(
        exchange,
        |mut exchange| async move {
            loop {
                if let Some(item) = exchange.pending.pop_front() {
                    return Some((item, exchange));
                }
                exchange.step().await?;
            }
        },
    ))
}

enum Phase {
    /// The request is still to be sent.
    Send(reqwest::RequestBuilder),
    /// The response head arrived; `first_byte` says whether a body byte has too.
    Body {
        response: reqwest::Response,
        first_byte: bool,
    },
    /// The reply is complete; the end of the body is awaited before `Finished` goes out.
    Drain {
        response: reqwest::Response,
        reason: FinishReason,
    },
    /// Nothing more will come.
    Done,
}

struct Exchange<D> {
    upstream: Upstream,
    deadline: Instant,
    decoder: D,
    phase: Phase,
    /// When the first body byte must have arrived.
    first_byte_by: Instant,
    parser: SseParser,
    usage: UsageTally,
    /// Items ready for the caller.
    pending: VecDeque<Result<ProviderEvent, ProviderError>>,
    /// Whether an output event has been handed out (for error wording; the driver applies
    /// the commit rule itself).
    output_started: bool,
}

impl<D: Decoder> Exchange<D> {
    /// Advances until items are pending; `None` once the exchange is over.
    async fn step(&mut self) -> Option<()> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Send(request) => self.send(request).await,
            Phase::Body {
                response,
                first_byte,
            } => self.read(response, first_byte).await,
            Phase::Drain { response, reason } => self.drain(response, reason).await,
            Phase::Done => return None,
        }
        Some(())
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) {
        let (by, limit) = self.bound(self.upstream.timeouts.first_byte);
        self.first_byte_by = by;
        let response = match timeout_at(by, request.send()).await {
            Err(_) => {
                let error = self
                    .upstream
                    .timeout("timeout", "no response came", limit, false);
                return self.fail(error);
            }
            Ok(Err(error)) => return self.fail(self.upstream.transport_error(&error)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let (by, _) = self.bound(self.upstream.timeouts.idle);
            let body = read_capped(response, by).await;
            return self.fail(self.upstream.status_error(status, &headers, &body));
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
        self.phase = Phase::Body {
            response,
            first_byte: false,
        };
    }

    async fn read(&mut self, mut response: reqwest::Response, first_byte: bool) {
        let (by, limit, code, what) = if first_byte {
            let (by, limit) = self.bound(self.upstream.timeouts.idle);
            (
                by,
                limit,
                "stream_stalled",
                "the response stream was silent",
            )
        } else {
            let limit = self.first_byte_by.saturating_duration_since(Instant::now());
            (
                self.first_byte_by,
                limit,
                "timeout",
                "no response body came",
            )
        };
        let piece = match timeout_at(by, response.chunk()).await {
            Err(_) => {
                let error = self
                    .upstream
                    .timeout(code, what, limit, self.output_started);
                return self.fail(error);
            }
            Ok(Err(error)) => {
                let why = format!("broke ({})", cause(&error));
                return self.fail(self.upstream.interrupted(&why, self.output_started));
            }
            Ok(Ok(None)) => return self.end_of_body(),
            Ok(Ok(Some(piece))) => piece,
        };
        match self.parse(Some(&piece)) {
            Err(error) => self.fail(error),
            Ok(Some(reason)) => self.complete(reason, Some(response)),
            Ok(None) => {
                self.phase = Phase::Body {
                    response,
                    first_byte: true,
                };
            }
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

    /// Reads what is left of the body (normally just its end) for a short while, then
    /// finishes the reply.
    async fn drain(&mut self, mut response: reqwest::Response, reason: FinishReason) {
        let (by, _) = self.bound(END_OF_BODY_GRACE);
        while let Ok(Ok(Some(_))) = timeout_at(by, response.chunk()).await {}
        self.pending.push_back(Ok(ProviderEvent::Finished(reason)));
        self.phase = Phase::Done;
    }

    /// The reply is complete: usage first, then `Finished`, after the body's end if the
    /// body is still open.
    fn complete(&mut self, reason: FinishReason, open_body: Option<reqwest::Response>) {
        self.pending
            .extend(self.usage.drain(true).into_iter().map(Ok));
        match open_body {
            Some(response) => self.phase = Phase::Drain { response, reason },
            None => {
                self.pending.push_back(Ok(ProviderEvent::Finished(reason)));
                self.phase = Phase::Done;
            }
        }
    }

    fn fail(&mut self, error: ProviderError) {
        self.pending
            .extend(self.usage.drain(false).into_iter().map(Ok));
        self.pending.push_back(Err(error));
        self.phase = Phase::Done;
    }

    /// A timer of `limit` from now, cut to the attempt's deadline: when it fires, and after
    /// how long.
    fn bound(&self, limit: Duration) -> (Instant, Duration) {
        let now = Instant::now();
        let by = (now + limit).min(self.deadline);
        (by, by.saturating_duration_since(now))
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
