//! The one HTTP/1.1 request reader, on hyper's server connection. `/metrics` reads its
//! requests with it; so do the binary's `mock-upstream` and the tests' fake provider, which
//! see the library only through its public API, hence `pub`. A request reaches its answerer
//! whole, head and body, read within bounds of size and time ([`Limits`]), so none of them
//! parses HTTP by hand; the answer is hyper's to write, a response whose frames are all ready
//! in one write (up to hyper's buffer, as large as the head's bound).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// A request, read whole: its head and its body.
pub type Request = http::Request<Bytes>;

/// An answer to a request.
pub type Response = http::Response<Frames>;

/// How much of a connection's requests is read, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of a request's line and headers. A longer head is answered 431 and the
    /// connection closed.
    pub head: usize,
    /// Header lines of a request, at most 100 (hyper's own bound, which a larger value
    /// leaves). More are answered 431 and the connection closed.
    pub headers: usize,
    /// Bytes of a request's body. A longer one closes the connection unanswered, before it is
    /// read when its `content-length` says so.
    pub body: usize,
    /// Whether the connection serves further requests; if not, the answer says
    /// `connection: close` and the connection closes after it.
    pub keep_alive: bool,
    /// How long the connection may stay open, whatever it waits for (a head, a body, a
    /// reader of the answer); `None`: as long as the client keeps it.
    pub time: Option<Duration>,
}

/// Serves one connection until it closes: each request is read within `limits` and given to
/// `answer`, whose response hyper writes, or which closes the connection by answering
/// `None`. Errors of the connection (a malformed head, a body past the limit, a client gone)
/// end it; there is nothing to report them to, so they are not returned.
pub async fn serve_connection<IO, A, F>(io: IO, limits: &Limits, answer: A)
where
    IO: AsyncRead + AsyncWrite + Unpin,
    A: Fn(Request) -> F,
    F: Future<Output = Option<Response>>,
{
    // hyper's service hands out futures that own what they use: the answerer is shared.
    let answer = Arc::new(answer);
    let max_body = limits.body;
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let answer = answer.clone();
        async move {
            let request = read_body(request, max_body).await?;
            answer(request).await.ok_or(Refused::Unanswered)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // hyper reads up to 100 headers into an array on the stack; another bound costs a heap
    // one per request, so it is set only when it is lower.
    if limits.headers < HYPER_HEADERS {
        builder.max_headers(limits.headers);
    }
    builder
        .max_header_size(limits.head)
        // hyper's buffers: the read one must hold a head (and is never smaller than hyper's
        // minimum); the write one gathers a response's ready frames up to the same size.
        .max_buf_size(limits.head.max(MIN_BUFFER))
        .keep_alive(limits.keep_alive)
        // The answer says what it says: no `date` it did not give.
        .auto_date_header(false)
        // One buffer, not a list of them: a response whose frames are all ready leaves in
        // one write, so its reader gets it in one read (the mock upstream's replies must).
        .writev(false);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    match limits.time {
        Some(time) => {
            let _ = tokio::time::timeout(time, connection).await;
        }
        None => {
            let _ = connection.await;
        }
    }
}

/// hyper's smallest read buffer (`max_buf_size` refuses less).
const MIN_BUFFER: usize = 8 * 1024;
/// The headers hyper reads by default.
const HYPER_HEADERS: usize = 100;

/// Why a request went unanswered; the connection closes.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("a request body larger than the limit")]
    TooLarge,
    #[error("reading a request body: {0}")]
    Body(#[from] hyper::Error),
    #[error("the answerer closed the connection")]
    Unanswered,
}

/// `request` with its body read whole, if it is no longer than `max` bytes.
async fn read_body(request: http::Request<Incoming>, max: usize) -> Result<Request, Refused> {
    let (head, mut body) = request.into_parts();
    let max = u64::try_from(max).unwrap_or(u64::MAX);
    if body.size_hint().lower() > max {
        return Err(Refused::TooLarge);
    }
    // Most bodies arrive as one frame, kept as it is; more are joined.
    let mut whole = Bytes::new();
    let mut joined: Option<BytesMut> = None;
    let mut length = 0u64;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(data) = frame?.into_data() else {
            continue; // trailers: not kept
        };
        length += data.len() as u64;
        if length > max {
            return Err(Refused::TooLarge);
        }
        match &mut joined {
            Some(joined) => joined.extend_from_slice(&data),
            None if whole.is_empty() => whole = data,
            None => {
                let mut both = BytesMut::from(std::mem::take(&mut whole));
                both.extend_from_slice(&data);
                joined = Some(both);
            }
        }
    }
    let body = joined.map_or(whole, BytesMut::freeze);
    Ok(http::Request::from_parts(head, body))
}

/// A response body whose frames are all ready, so hyper writes them at once. Each frame is
/// one chunk of a chunked body, unless the response names its `content-length`.
#[derive(Debug, Clone, Default)]
pub struct Frames {
    frames: Arc<[Bytes]>,
    next: usize,
}

impl Frames {
    /// These frames, shared: a reply made once is answered many times without a copy.
    pub fn new(frames: Arc<[Bytes]>) -> Self {
        Self { frames, next: 0 }
    }

    /// No body.
    pub fn empty() -> Self {
        Self::default()
    }
}

impl From<String> for Frames {
    fn from(text: String) -> Self {
        Self::new(Arc::new([Bytes::from(text)]))
    }
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let frame = this.frames.get(this.next).cloned();
        this.next += 1;
        Poll::Ready(frame.map(|data| Ok(Frame::data(data))))
    }

    /// Ended after the last frame: hyper then writes the body's end with it.
    fn is_end_stream(&self) -> bool {
        self.next >= self.frames.len()
    }
}

#[cfg(test)]
mod tests;
