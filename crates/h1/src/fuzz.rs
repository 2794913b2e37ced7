//! The fuzz entry point over the client's reading of a response ([`input`]; the `fuzzing`
//! feature makes it public for `fuzz/fuzz_targets/h1.rs`):
//! a server's byte stream fed to a real [`Call`] over an in-memory connection, in pieces cut
//! where the fuzzer says, as a socket would hand them over, and again whole. The head parser,
//! the body's framing and the pool's reuse decision run as they do on a socket; what this
//! adds is the checks, which panic on what they find (that is how a fuzzer learns of it):
//!
//! - cutting the stream changes nothing: the head, the body's bytes, how the body ended and
//!   whether the connection would carry the next request are those of the stream fed whole;
//! - a head the client is still waiting for never holds more than [`MAX_HEAD_BYTES`] + 1
//!   bytes (the one past the bound is how it knows the head is too large), and a body's
//!   bytes are handed out or taken as they come, never kept;
//! - a connection goes back to the pool only when the response ended cleanly and the server
//!   sent nothing past it: every byte of the stream was read, and the server keeps the
//!   connection open;
//! - a final head is never an interim (1xx) one, nor a status below 100.
//!
//! Overflow and panics are found by the build (the fuzzer's and the tests' have overflow
//! checks on).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::HeaderMap;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::call::{Call, Conn, Progress};
use super::head::MAX_HEAD_BYTES;
use super::{Client, Failure, Settings};

/// A fuzzer's input: the first byte's low bit says whether the server closes the connection
/// after its bytes (else it keeps it open and says nothing more), the next sixteen are eight
/// little-endian `u16` cut points, the rest is what the server sends.
pub fn input(input: &[u8]) {
    let Some((&flags, rest)) = input.split_first() else {
        return;
    };
    let (cuts, stream) = rest.split_at(rest.len().min(16));
    let cuts: Vec<u16> = cuts
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .collect();
    response(stream, &cuts, flags & 1 == 1);
}

/// Feeds `stream` (a server's bytes in answer to one request) to a call in pieces ending at
/// `cuts` (each taken in turn, modulo what is left, plus one) and again whole, and checks
/// what the module's docs list. With `closes` the server closes the connection after the
/// stream; else it stays open and says nothing more.
pub(crate) fn response(stream: &[u8], cuts: &[u16], closes: bool) {
    let mut ends = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for cut in cuts {
        let left = stream.len() - at;
        if left == 0 {
            break;
        }
        at += usize::from(*cut) % left + 1;
        ends.push(at);
    }
    ends.push(stream.len());
    let whole = read(stream, &[stream.len()], closes);
    let cut = read(stream, &ends, closes);
    assert_eq!(
        whole, cut,
        "cutting the stream at {ends:?} changed what was read"
    );
}

/// What reading one response came to.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// The head's status and headers, or why it failed; `None` while it is awaited.
    head: Option<Result<(u16, HeaderMap), Failure>>,
    /// The body's bytes as they were handed out.
    body: Vec<u8>,
    /// How the body ended (`Err`: broken); `None` while more is awaited.
    end: Option<Result<(), Failure>>,
    /// Whether the connection would carry the next request.
    reused: bool,
}

/// A plain client, never connected to: each call runs on the connection handed to it.
#[expect(
    clippy::expect_used,
    reason = "fixed inputs: a literal URL, a plain client needing no TLS"
)]
fn client() -> Client {
    let settings = Settings {
        connect_timeout: Duration::from_secs(1),
        proxy: None,
        max_idle: 1,
        idle_timeout: Duration::from_secs(3600),
    };
    let url = url::Url::parse("http://fuzz.invalid/v1").expect("a valid URL");
    Client::new(&url, settings, || {
        Err(rustls::Error::General("no TLS".into()))
    })
    .expect("a plain client")
}

/// Reads the response of one request from `stream` delivered in pieces ending at `ends`.
fn read(stream: &[u8], ends: &[usize], closes: bool) -> Outcome {
    let client = client();
    let heading = Arc::new(AtomicBool::new(true));
    let delivered = Arc::new(AtomicUsize::new(0));
    let wire = Wire {
        stream: stream.to_vec(),
        ends: ends.iter().copied().collect(),
        at: 0,
        closes,
        sent: false,
        heading: heading.clone(),
        delivered: delivered.clone(),
    };
    let request = client.post(&HeaderMap::new(), &[], b"{}");
    let mut call = Call::on(&client.shared, Conn::new(Box::new(wire)), request);
    // The wire never waits for anything: `Pending` means it has nothing more to give.
    let mut cx = Context::from_waker(Waker::noop());
    let mut outcome = Outcome {
        head: None,
        body: Vec::new(),
        end: None,
        reused: false,
    };
    match call.poll_head(&mut cx) {
        Poll::Pending => {
            let held = call.buffered();
            assert!(
                held <= MAX_HEAD_BYTES + 1,
                "a waiting head holds {held} bytes"
            );
            return outcome;
        }
        Poll::Ready(Err(failure)) => {
            outcome.head = Some(Err(failure));
            return outcome;
        }
        Poll::Ready(Ok(response)) => {
            assert!(
                response.status >= 200,
                "a final head of {}",
                response.status
            );
            outcome.head = Some(Ok((response.status, response.headers)));
        }
    }
    heading.store(false, Ordering::SeqCst);
    loop {
        match call.poll_body(&mut cx, &mut |data| outcome.body.extend_from_slice(data)) {
            Poll::Pending => break,
            Poll::Ready(Ok(Progress::Data)) => {
                let held = call.buffered();
                assert_eq!(held, 0, "{held} bytes of the body were kept");
            }
            Poll::Ready(Ok(Progress::End)) => {
                outcome.end = Some(Ok(()));
                break;
            }
            Poll::Ready(Err(failure)) => {
                outcome.end = Some(Err(failure));
                break;
            }
        }
    }
    outcome.reused = client.shared.idle.take().is_some();
    if outcome.reused {
        assert_eq!(
            outcome.end,
            Some(Ok(())),
            "a connection reused mid-response"
        );
        let read = delivered.load(Ordering::SeqCst);
        assert_eq!(read, stream.len(), "a connection reused with bytes unread");
        assert!(!closes, "a closed connection reused");
    }
    outcome
}

/// The server's side of an in-memory connection: it answers once the request is sent (the
/// client flushed it), handing over at most one piece per read.
struct Wire {
    stream: Vec<u8>,
    /// Where each piece not yet handed over ends, in order.
    ends: VecDeque<usize>,
    /// How much of `stream` was handed over.
    at: usize,
    closes: bool,
    sent: bool,
    /// Whether the client is reading a head: it must not ask for more than its bound.
    heading: Arc<AtomicBool>,
    /// `at`, for the checks after the call.
    delivered: Arc<AtomicUsize>,
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let wire = self.get_mut();
        if !wire.sent {
            return Poll::Pending;
        }
        let Some(&end) = wire.ends.iter().find(|&&end| end > wire.at) else {
            // Nothing more will come: the end of the stream if the server closes, else silence.
            return if wire.closes {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            };
        };
        if wire.heading.load(Ordering::SeqCst) {
            let room = wire.at + buf.remaining();
            assert!(
                room <= MAX_HEAD_BYTES + 1,
                "reading a head, the client makes room for {room} bytes"
            );
        }
        let n = (end - wire.at).min(buf.remaining());
        buf.put_slice(&wire.stream[wire.at..wire.at + n]);
        wire.at += n;
        while wire.ends.front().is_some_and(|&end| end <= wire.at) {
            wire.ends.pop_front();
        }
        wire.delivered.store(wire.at, Ordering::SeqCst);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().sent = true;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests;
