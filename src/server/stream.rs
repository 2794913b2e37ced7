//! One HTTP/2 stream: the request handed to the gRPC routes, and the response sent back
//! frame by frame. A client that accepts nothing for `server.stream_idle_timeout` while a
//! frame waits for it has its stream reset, which frees what the stream held.

use std::future::{self, Future};
use std::pin::{Pin, pin};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame};
use tonic::codegen::Service;
use tonic::service::Routes;
use tracing::Instrument;

use crate::execution::TraceContext;
use crate::runtime::trace;

/// Serves one request: calls the routes, then sends the response; a client reset ends both.
pub(super) async fn serve(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    mut routes: Routes,
    idle_timeout: Duration,
) {
    let span = rpc_span(request.uri().path(), request.headers());
    let rpc = span.clone();
    async move {
        let request = request.map(|recv| tonic::body::Body::new(RequestBody::new(recv)));
        // Routes are always ready.
        let Ok(()) = future::poll_fn(|cx| {
            Service::<Request<tonic::body::Body>>::poll_ready(&mut routes, cx)
        })
        .await;
        let limit = request
            .headers()
            .get("grpc-timeout")
            .and_then(|value| grpc_timeout(value.as_bytes()));
        let call = routes.call(request);
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
            Ok(send) if !end => send_body(body, send, idle_timeout, &rpc).await,
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "sending response headers"),
        }
    }
    .instrument(span)
    .await;
}

const TRACEPARENT: http::HeaderName = http::HeaderName::from_static(crate::execution::TRACEPARENT);
const TRACESTATE: http::HeaderName = http::HeaderName::from_static(crate::execution::TRACESTATE);

/// One span per RPC, named by its method, so every log line of a call carries it: at
/// debug, since at the default level it cost 2% of a call's instructions, and every log line
/// a call writes at info or above names its execution already. Exported, it is the server
/// side of the call (OpenTelemetry's RPC conventions), the child of the caller's
/// `traceparent`.
fn rpc_span(path: &str, headers: &HeaderMap) -> tracing::Span {
    // Health probes come every few seconds from every prober: no span of their own.
    if path.starts_with("/grpc.health.v1.Health/") {
        return tracing::Span::none();
    }
    let span = tracing::debug_span!(
        "rpc",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        method = path,
        rpc.system = "grpc",
        rpc.service = tracing::field::Empty,
        rpc.method = tracing::field::Empty,
        rpc.grpc.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    // The name only of a method this server has: a caller cannot mint span names.
    let name = path.strip_prefix('/').unwrap_or(path);
    match name.split_once('/') {
        Some((service, method)) if SERVICES.contains(&service) => {
            span.record("otel.name", name)
                .record("rpc.service", service)
                .record("rpc.method", method);
        }
        _ => {
            span.record("otel.name", "unknown");
        }
    }
    if let Some(parent) = headers.get(TRACEPARENT) {
        let states = headers.get_all(TRACESTATE).iter().map(|v| v.as_bytes());
        if let Some(caller) = TraceContext::parse(parent.as_bytes(), states) {
            trace::adopt(&span, &caller);
        }
    }
    span
}

/// The services this server routes (health aside).
const SERVICES: [&str; 3] = [
    super::SERVICE_NAME,
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

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

impl From<h2::Error> for Gone {
    fn from(e: h2::Error) -> Self {
        tracing::debug!(error = %e, "sending a response frame");
        Gone::Client
    }
}

/// Sends `body` on `send`, a frame at a time, and resets the stream if the client accepts
/// nothing for `idle_timeout` while a frame waits for it.
async fn send_body(
    mut body: tonic::body::Body,
    mut send: SendStream<Bytes>,
    idle_timeout: Duration,
    call: &tracing::Span,
) {
    match send_frames(&mut body, &mut send, idle_timeout, call).await {
        Ok(()) | Err(Gone::Client) => {}
        Err(Gone::Stalled) => {
            tracing::info!(
                idle = ?idle_timeout,
                "the client accepted nothing for server.stream_idle_timeout: stream reset"
            );
            // RESOURCE_EXHAUSTED in gRPC's mapping of HTTP/2 resets.
            send.send_reset(Reason::ENHANCE_YOUR_CALM);
        }
    }
}

async fn send_frames(
    body: &mut tonic::body::Body,
    send: &mut SendStream<Bytes>,
    idle_timeout: Duration,
    call: &tracing::Span,
) -> Result<(), Gone> {
    loop {
        let frame = future::poll_fn(|cx| {
            if client_gone(send, cx) {
                return Poll::Ready(Err(Gone::Client));
            }
            Pin::new(&mut *body).poll_frame(cx).map(Ok)
        })
        .await?;
        let frame = match frame {
            None => return Ok(send.send_data(Bytes::new(), true)?),
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "response body failed");
                send.send_reset(Reason::INTERNAL_ERROR);
                return Err(Gone::Client);
            }
        };
        match frame.into_data() {
            Ok(data) => {
                let end = body.is_end_stream();
                send_granted(send, data, end, idle_timeout).await?;
                if end {
                    return Ok(());
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    record_status(call, &trailers);
                    send.reserve_capacity(0);
                    return Ok(send.send_trailers(trailers)?);
                }
            }
        }
    }
}

/// Hands `data` to h2 no faster than the client grants room for it, so a stream never
/// queues more than its client has made room for, and every grant restarts the idle timer.
async fn send_granted(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    idle_timeout: Duration,
) -> Result<(), Gone> {
    loop {
        if data.is_empty() {
            return Ok(send.send_data(data, end)?);
        }
        send.reserve_capacity(data.len().min(MAX_PIECE));
        let granted = match send.capacity() {
            0 => granted(send, idle_timeout).await?,
            granted => granted,
        };
        let piece = data.split_to(granted.min(data.len()));
        if data.is_empty() {
            return Ok(send.send_data(piece, end)?);
        }
        send.send_data(piece, false)?;
    }
}

/// Waits until the client grants the stream room to send, at most `idle_timeout`: how much.
async fn granted(send: &mut SendStream<Bytes>, idle_timeout: Duration) -> Result<usize, Gone> {
    let mut stalled = pin!(tokio::time::sleep(idle_timeout));
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

/// Whether the client has reset the stream or the connection has gone; registers for either.
fn client_gone(send: &mut SendStream<Bytes>, cx: &mut Context<'_>) -> bool {
    send.poll_reset(cx).is_ready()
}

/// A request's body as tonic reads it: h2's data frames, each given back to the client's
/// flow-control window as it is read, then the trailers.
struct RequestBody {
    recv: RecvStream,
    data_done: bool,
}

impl RequestBody {
    fn new(recv: RecvStream) -> Self {
        Self {
            recv,
            data_done: false,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        if !self.data_done {
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    // A failure here means the stream is gone; the next poll says so.
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => self.data_done = true,
            }
        }
        let trailers: Result<Option<HeaderMap>, h2::Error> = ready!(self.recv.poll_trailers(cx));
        Poll::Ready(trailers.transpose().map(|t| t.map(Frame::trailers)))
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
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
