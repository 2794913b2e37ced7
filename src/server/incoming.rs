//! Accepted connections, bounded: at most `server.max_connections` open at once (one more is
//! closed as it arrives, and logged), and each must send its HTTP/2 preface within
//! `server.handshake_timeout` or be closed, so connections that never speak cannot pile up.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};

/// The HTTP/2 client preface: what a client must have sent for its handshake to count.
const PREFACE_BYTES: u64 = 24;

/// At most one log line about refused connections per this long.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// [`TcpIncoming`] with a connection limit and a handshake timeout.
pub(super) struct Incoming {
    inner: TcpIncoming,
    permits: Arc<Semaphore>,
    handshake_timeout: Duration,
    /// When a refusal was last logged.
    last_logged: Option<Instant>,
    refused: u64,
}

impl Incoming {
    pub(super) fn new(
        inner: TcpIncoming,
        max_connections: usize,
        handshake_timeout: Duration,
    ) -> Self {
        Self {
            inner,
            permits: Arc::new(Semaphore::new(max_connections)),
            handshake_timeout,
            last_logged: None,
            refused: 0,
        }
    }

    /// Logs refusals, at most once per [`REFUSAL_LOG_EVERY`].
    fn refuse(&mut self) {
        self.refused += 1;
        let now = Instant::now();
        if self
            .last_logged
            .is_none_or(|last| now.duration_since(last) >= REFUSAL_LOG_EVERY)
        {
            self.last_logged = Some(now);
            tracing::warn!(
                refused = self.refused,
                "connection limit (server.max_connections) reached: closing new connections"
            );
        }
    }
}

impl Stream for Incoming {
    type Item = io::Result<Connection>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let stream = match ready!(Pin::new(&mut self.inner).poll_next(cx)) {
                Some(Ok(stream)) => stream,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            };
            match self.permits.clone().try_acquire_owned() {
                Ok(permit) => {
                    let deadline = Instant::now() + self.handshake_timeout;
                    return Poll::Ready(Some(Ok(Connection {
                        stream,
                        _permit: permit,
                        handshake: Some(Box::pin(tokio::time::sleep_until(deadline))),
                        read: 0,
                    })));
                }
                // Over the limit: closed as it arrives (the stream drops here).
                Err(_) => self.refuse(),
            }
        }
    }
}

/// One accepted connection: its socket, its place under the limit (given back on drop), and
/// its handshake timer until the preface has arrived.
pub(super) struct Connection {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    handshake: Option<Pin<Box<Sleep>>>,
    read: u64,
}

impl Connected for Connection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if let Some(timer) = this.handshake.as_mut() {
            this.read += (buf.filled().len() - before) as u64;
            if this.read >= PREFACE_BYTES {
                this.handshake = None;
            } else if polled.is_pending() && timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no HTTP/2 preface within server.handshake_timeout",
                )));
            }
        }
        polled
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
