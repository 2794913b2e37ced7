//! One HTTP/2 stream: the request handed to the service its path names, and the response sent
//! back frame by frame. A client that accepts nothing for `server.stream_idle_timeout` while a
//! frame waits for it has its stream reset, which frees what the stream held; so is one whose
//! connection holds its bound of unsent data ([`super::unsent`]) for as long. A request's
//! body is bounded in bytes (the largest request, framed) and, but for reflection's streams,
//! in time (`server.request_timeout` from its headers to its end).

use std::future::{self, Future};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame};
use tokio::time::Instant;
use tracing::Instrument;

use super::arrival::Arrived;
use super::places::OpenStream;
use super::services::{Direct, Services};
use super::unsent::Unsent;

/// A stream's bounds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// `server.stream_idle_timeout`.
    pub idle: Duration,
    /// `server.request_timeout`.
    pub request: Duration,
    /// The most a request's body may carry.
    pub body_bytes: usize,
}

/// Serves one request: calls its service, then sends the response; a client reset ends both.
/// `id` is the stream's (`respond`'s).
pub(super) async fn serve<S: Direct>(
    request: Request<Arrived>,
    (mut respond, id): (SendResponse<Bytes>, u32),
    mut services: Services<S>,
    limits: Limits,
    unsent: Arc<Unsent>,
    // Counts the stream open on its connection until the stream ends.
    _open: OpenStream,
    // The call's span (see `Spans`).
    span: tracing::Span,
) {
    let rpc = span.clone();
    async move {
        // Every method takes one request message, but reflection, whose requests come as
        // its client asks over a stream it keeps open (each still bounded by the message
        // size).
        let bounded = !request.uri().path().starts_with("/grpc.reflection.");
        let request = request.map(|arrived| {
            let bound = bounded.then(|| (limits.body_bytes, Instant::now() + limits.request));
            tonic::body::Body::new(RequestBody::new(arrived, bound))
        });
        let limit = request
            .headers()
            .get("grpc-timeout")
            .and_then(|value| grpc_timeout(value.as_bytes()));
        let call = services.call(request);
        // The caller's deadline bounds the wait for the answer (its headers; a stream then
        // runs on its own terms), as tonic's server did.
        let answer = async {
            match limit {
                Some(limit) => match tokio::time::timeout(limit, call).await {
                    Ok(response) => response,
                    Err(_) => Ok(tonic::Status::deadline_exceeded(
                        "the call's grpc-timeout passed before it was answered",
                    )
                    .into_http()),
                },
                None => call.await,
            }
        };
        let response = tokio::select! {
            biased;
            response = answer => response,
            _ = future::poll_fn(|cx| respond.poll_reset(cx)) => return,
        };
        let Ok(response) = response;
        let (head, body) = response.into_parts();
        record_status(&rpc, &head.headers);
        let end = body.is_end_stream();
        match respond.send_response(Response::from_parts(head, ()), end) {
            Ok(send) if !end => send_body(body, send, id, limits.idle, &unsent, &rpc).await,
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "sending response headers"),
        }
    }
    .instrument(span)
    .await;
}

/// Records the call's gRPC status (in the response head when the call failed at once, else
/// in the trailers) on its span. The server side of a call is in error only for the codes
/// that are the server's fault, as the RPC conventions say.
fn record_status(span: &tracing::Span, headers: &HeaderMap) {
    if span.is_disabled() {
        return;
    }
    let Some(code) = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u8>().ok())
    else {
        return;
    };
    span.record("rpc.grpc.status_code", code);
    // UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS.
    if [2, 4, 12, 13, 14, 15].contains(&code) {
        span.record("otel.status_code", "error");
    }
}

/// A `grpc-timeout` header's duration: at most 8 digits and a unit (`H`, `M`, `S`, `m`, `u`,
/// `n`); `None` when it is malformed, which leaves the call without a server-side deadline.
fn grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The most one stream asks the connection's window for at a time: a waiting stream claims
/// little of what the connection's other streams could use.
const MAX_PIECE: usize = 64 * 1024;

/// Why a response stopped before its end.
enum Gone {
    /// The client reset the stream, or the connection went.
    Client,
    /// The client accepted nothing for the idle timeout.
    Stalled,
}

/// A stream's way to its client: h2's send half, and its connection's unsent count.
struct Out<'a> {
    send: SendStream<Bytes>,
    id: u32,
    unsent: &'a Unsent,
    idle_timeout: Duration,
}

impl From<h2::Error> for Gone {
    fn from(e: h2::Error) -> Self {
        tracing::debug!(error = %e, "sending a response frame");
        Gone::Client
    }
}

/// Sends `body` on `send` (stream `id`), a frame at a time, and resets the stream if the
/// client accepts nothing for `idle_timeout` while a frame waits for it.
async fn send_body(
    mut body: tonic::body::Body,
    send: SendStream<Bytes>,
    id: u32,
    idle_timeout: Duration,
    unsent: &Unsent,
    call: &tracing::Span,
) {
    let mut out = Out {
        send,
        id,
        unsent,
        idle_timeout,
    };
    match send_frames(&mut body, &mut out, call).await {
        Ok(()) => {}
        // What HTTP/2 still held of it is dropped with the stream.
        Err(Gone::Client) => unsent.forget(id),
        Err(Gone::Stalled) => {
            tracing::info!(
                idle = ?idle_timeout,
                "the client accepted nothing for server.stream_idle_timeout: stream reset"
            );
            // RESOURCE_EXHAUSTED in gRPC's mapping of HTTP/2 resets.
            out.send.send_reset(Reason::ENHANCE_YOUR_CALM);
            unsent.forget(id);
        }
    }
}

async fn send_frames(
    body: &mut tonic::body::Body,
    out: &mut Out<'_>,
    call: &tracing::Span,
) -> Result<(), Gone> {
    loop {
        let frame = future::poll_fn(|cx| {
            if client_gone(&mut out.send, cx) {
                return Poll::Ready(Err(Gone::Client));
            }
            Pin::new(&mut *body).poll_frame(cx).map(Ok)
        })
        .await?;
        let frame = match frame {
            None => return Ok(out.send.send_data(Bytes::new(), true)?),
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "response body failed");
                out.send.send_reset(Reason::INTERNAL_ERROR);
                return Err(Gone::Client);
            }
        };
        match frame.into_data() {
            Ok(data) => {
                let end = body.is_end_stream();
                send_granted(out, data, end).await?;
                if end {
                    return Ok(());
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    record_status(call, &trailers);
                    out.send.reserve_capacity(0);
                    return Ok(out.send.send_trailers(trailers)?);
                }
            }
        }
    }
}

/// Hands `data` to h2 no faster than the client grants room for it and the connection has
/// room to hold it, so a stream never queues more than its client has made room for, and
/// every grant restarts the idle timer.
async fn send_granted(out: &mut Out<'_>, mut data: Bytes, end: bool) -> Result<(), Gone> {
    loop {
        if data.is_empty() {
            return Ok(out.send.send_data(data, end)?);
        }
        if !out.unsent.has_room() {
            room(out).await?;
        }
        out.send.reserve_capacity(data.len().min(MAX_PIECE));
        let granted = match out.send.capacity() {
            0 => granted(out).await?,
            granted => granted,
        };
        let piece = data.split_to(granted.min(data.len()));
        out.unsent.took(out.id, piece.len());
        if data.is_empty() {
            return Ok(out.send.send_data(piece, end)?);
        }
        out.send.send_data(piece, false)?;
    }
}

/// Waits until the client grants the stream room to send, at most the idle timeout: how much.
async fn granted(out: &mut Out<'_>) -> Result<usize, Gone> {
    let mut stalled = pin!(tokio::time::sleep(out.idle_timeout));
    let send = &mut out.send;
    future::poll_fn(|cx| {
        if client_gone(send, cx) {
            return Poll::Ready(Err(Gone::Client));
        }
        loop {
            match send.poll_capacity(cx) {
                Poll::Ready(Some(Ok(_))) => match send.capacity() {
                    0 => {}
                    granted => return Poll::Ready(Ok(granted)),
                },
                Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(Err(Gone::Client)),
                Poll::Pending => break,
            }
        }
        ready!(stalled.as_mut().poll(cx));
        Poll::Ready(Err(Gone::Stalled))
    })
    .await
}

/// Waits until the connection holds less than its bound of unsent data, at most the idle
/// timeout: its socket taking nothing for that long is its client accepting nothing.
async fn room(out: &mut Out<'_>) -> Result<(), Gone> {
    let mut stalled = pin!(tokio::time::sleep(out.idle_timeout));
    loop {
        let room = out.unsent.room();
        if out.unsent.has_room() {
            return Ok(());
        }
        let mut room = pin!(room);
        let send = &mut out.send;
        future::poll_fn(|cx| {
            if client_gone(send, cx) {
                return Poll::Ready(Err(Gone::Client));
            }
            if room.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            ready!(stalled.as_mut().poll(cx));
            Poll::Ready(Err(Gone::Stalled))
        })
        .await?;
    }
}

/// Whether the client has reset the stream or the connection has gone; registers for either.
fn client_gone(send: &mut SendStream<Bytes>, cx: &mut Context<'_>) -> bool {
    send.poll_reset(cx).is_ready()
}

/// A request's body as tonic reads it: what its connection's task took ([`Arrived`]), then
/// h2's data frames, each given back to the client's flow-control window as it is read,
/// then the trailers. Bounded: past `max_bytes` of data, or once its time is up before its
/// end, it fails with the status the caller gets, and the stream is dropped (reset), so the
/// client stops sending.
struct RequestBody {
    /// The data its connection's task took, in order.
    taken: [Option<Bytes>; 2],
    /// The rest of the body, unless it had all come.
    recv: Option<RecvStream>,
    data_done: bool,
    /// Data bytes read so far, and the most there may be.
    read: usize,
    max_bytes: usize,
    /// When its end is due, if it is bounded.
    due: Option<Instant>,
    /// Made only once the body has to wait: a request that came whole (most do, with its
    /// headers) costs no timer.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl RequestBody {
    /// A body of at most `bound`'s bytes that must end by its instant; unbounded without.
    fn new(arrived: Arrived, bound: Option<(usize, Instant)>) -> Self {
        let (taken, recv) = arrived.into_parts();
        Self {
            taken,
            recv,
            data_done: false,
            read: 0,
            max_bytes: bound.map_or(usize::MAX, |(bytes, _)| bytes),
            due: bound.map(|(_, by)| by),
            timer: None,
        }
    }

    /// A data frame read, or the caller's error once the body is past its bound.
    fn data(&mut self, data: Bytes) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        self.read = self.read.saturating_add(data.len());
        if self.read > self.max_bytes {
            return Poll::Ready(Some(Err(tonic::Status::resource_exhausted(format!(
                "the request's body is larger than the largest request ({} bytes)",
                self.max_bytes
            )))));
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    /// The body has to wait: pending, or the caller's error once its time is up.
    fn wait(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let Some(due) = self.due else {
            return Poll::Pending;
        };
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Some(Err(tonic::Status::deadline_exceeded(
            "the request's body did not end within server.request_timeout",
        ))))
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = &mut *self;
        if let Some(taken) = this.taken.iter_mut().find_map(Option::take) {
            return this.data(taken);
        }
        let Some(recv) = this.recv.as_mut() else {
            return Poll::Ready(None);
        };
        if !this.data_done {
            match recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    // A failure here means the stream is gone; the next poll says so.
                    let _ = recv.flow_control().release_capacity(data.len());
                    return this.data(data);
                }
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Some(Err(tonic::Status::from_error(e.into()))));
                }
                Poll::Ready(None) => this.data_done = true,
                Poll::Pending => return this.wait(cx),
            }
        }
        match recv.poll_trailers(cx) {
            Poll::Ready(trailers) => Poll::Ready(
                trailers
                    .map_err(|e| tonic::Status::from_error(e.into()))
                    .transpose()
                    .map(|t| t.map(Frame::trailers)),
            ),
            Poll::Pending => this.wait(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.taken.iter().all(Option::is_none)
            && self.recv.as_ref().is_none_or(RecvStream::is_end_stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_by_the_spec_and_malformed_ones_are_none() {
        for (header, expected) in [
            ("1H", Duration::from_secs(3600)),
            ("2M", Duration::from_secs(120)),
            ("30S", Duration::from_secs(30)),
            ("250m", Duration::from_millis(250)),
            ("99999999u", Duration::from_micros(99_999_999)),
            ("5n", Duration::from_nanos(5)),
        ] {
            assert_eq!(grpc_timeout(header.as_bytes()), Some(expected), "{header}");
        }
        for header in ["", "S", "10", "123456789S", "10x", "-1S", "1.5S", "10s"] {
            assert_eq!(grpc_timeout(header.as_bytes()), None, "{header}");
        }
    }
}
