//! Accepted connections, bounded: at most `server.max_connections` hold a place at once
//! ([`Places`]: at the limit an idle connection gives up its place); one more, when every
//! connection has a call open, is closed as it arrives, and logged.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::Stream;
use tokio::net::UnixListener;
use tokio::time::Instant;
use tonic::transport::server::TcpIncoming;

use super::authority::AnyAuthority;
use super::listener::{Conn, UnixPath};
use super::places::{Place, Places};

/// At most one log line about refused connections per this long.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// Where connections come from.
pub(super) enum Accept {
    Tcp(TcpIncoming),
    /// The socket file is removed when the listener goes.
    Unix {
        listener: UnixListener,
        _socket_file: UnixPath,
    },
}

/// Accepted connections with a connection limit.
pub(super) struct Incoming {
    inner: Accept,
    places: Arc<Places>,
    /// When a refusal was last logged.
    last_logged: Option<Instant>,
    refused: u64,
}

/// A connection under the limit, and its place there (given back when it drops).
pub(super) struct Accepted {
    pub(super) stream: Conn,
    pub(super) place: Place,
}

impl Incoming {
    pub(super) fn new(inner: Accept, max_connections: usize) -> Self {
        Self {
            inner,
            places: Places::new(max_connections),
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
                "connection limit (server.max_connections) reached with a call open on every connection: closing new connections"
            );
        }
    }
}

impl Stream for Incoming {
    type Item = io::Result<Accepted>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let stream = match &mut self.inner {
                Accept::Tcp(tcp) => match ready!(Pin::new(tcp).poll_next(cx)) {
                    Some(Ok(stream)) => Conn::Tcp(stream),
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => return Poll::Ready(None),
                },
                Accept::Unix { listener, .. } => match ready!(listener.poll_accept(cx)) {
                    Ok((stream, _)) => Conn::Unix(AnyAuthority::new(stream)),
                    Err(e) => return Poll::Ready(Some(Err(e))),
                },
            };
            match self.places.take() {
                Some(place) => return Poll::Ready(Some(Ok(Accepted { stream, place }))),
                // Every place taken by a connection with a call open: closed as it arrives
                // (the stream drops here).
                None => self.refuse(),
            }
        }
    }
}
