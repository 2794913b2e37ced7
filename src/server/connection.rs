//! One client connection, served over HTTP/2 by h2 itself: the handshake and a first stream
//! within `server.handshake_timeout`, keepalive pings, a task per stream (started once its
//! request has come, or once the connection's task has stepped aside without it:
//! [`super::arrival`]), GOAWAY once it has had no open stream for `server.idle_timeout` or
//! its place went to a new connection ([`super::places`]), and a graceful or forced end.
//!
//! The server drives h2 directly rather than through hyper so that each stream's response
//! is sent by code of its own ([`super::stream`]), which can see a client that stopped
//! accepting data and reset that stream alone.

use std::future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Ping, PingPong, Reason};
use http::Request;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use super::arrival::{Arrivals, Arrived};
use super::coalesce::Coalesced;
use super::idle;
use super::incoming::Accepted;
use super::listener::Conn;
use super::places::{Activity, OpenStream};
use super::services::{Direct, Services};
use super::stream;
use super::unsent::{Counted, Unsent};

/// HTTP/2 flow-control windows, per stream and per connection (hyper's defaults, which tonic
/// used): room for a burst of events without a round trip.
const WINDOW: u32 = 1024 * 1024;

/// Bytes one stream may have queued for a client beyond what the client has accepted
/// (hyper's default).
const MAX_SEND_BUFFER: usize = 400 * 1024;

/// Streams the server may reset for a peer's protocol errors before it closes the connection
/// (h2's default, which tonic turned off unless it was set).
const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// Streams a peer may open and reset before they are accepted (h2's default).
const MAX_PENDING_ACCEPT_RESETS: usize = 20;

/// How long a connection closing for an unanswered ping may take to write its GOAWAY.
const GOAWAY_FLUSH: Duration = Duration::from_millis(100);

/// How connections are served: the server's settings, in the driver's own terms (it
/// imports nothing of the runtime, so it can become a crate of its own when that is worth it).
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub max_concurrent_streams: u32,
    pub handshake_timeout: Duration,
    pub idle_timeout: Duration,
    pub request_timeout: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    pub stream_idle_timeout: Duration,
    /// A connection's most life (jittered 10% either side), and the grace its open calls
    /// then have before it is closed.
    pub max_age: Option<(Duration, Duration)>,
    pub max_unsent_bytes: usize,
    /// The most a request's body may carry.
    pub max_body: usize,
}

/// Makes the span of a call from its path and headers.
pub(super) type Spans = fn(&str, &http::HeaderMap) -> tracing::Span;

/// How every connection of one server is served.
#[derive(Clone)]
pub(super) struct Http2 {
    builder: h2::server::Builder,
    settings: Settings,
    spans: Spans,
    /// Where connections and their streams run, so the server's stop waits for both.
    tasks: TaskTracker,
}

impl Http2 {
    /// Where connections and their streams run.
    pub(super) fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    pub(super) fn new(settings: Settings, spans: Spans, tasks: TaskTracker) -> Self {
        let mut builder = h2::server::Builder::new();
        builder
            .initial_window_size(WINDOW)
            .initial_connection_window_size(WINDOW)
            .max_send_buffer_size(MAX_SEND_BUFFER)
            .max_header_list_size(super::MAX_HEADER_LIST)
            .max_concurrent_streams(settings.max_concurrent_streams)
            .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
            .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESETS);
        Self {
            builder,
            settings,
            spans,
            tasks,
        }
    }

    /// Serves one connection until the client closes it, its keepalive fails, or the server
    /// stops: on `stop` it sends GOAWAY and lets open streams finish; on `force` it closes.
    pub(super) async fn serve<S: Direct>(
        self,
        accepted: Accepted,
        services: Services<S>,
        stop: CancellationToken,
        force: CancellationToken,
        unsent: Option<Gauge>,
    ) {
        // The connection holds its place under the limit until it ends.
        let Accepted { stream, place } = accepted;
        let activity = place.activity().clone();
        // A first stream is due within the handshake's time, counted from now.
        let first_stream_by = Instant::now() + self.settings.handshake_timeout;
        let unsent = Unsent::new(self.settings.max_unsent_bytes, unsent);
        let io = Coalesced::new(Counted::new(stream, unsent.clone()));
        let Some(conn) = self.handshake(io, &stop, &activity).await else {
            return;
        };
        self.drive(
            conn,
            Connection {
                services,
                stop,
                force,
                unsent,
                activity,
                first_stream_by,
            },
        )
        .await;
    }

    /// The HTTP/2 handshake, within its time. A connection that has not finished it has no
    /// calls to finish: it closes as soon as the server stops, or a new connection takes its
    /// place.
    async fn handshake(
        &self,
        io: Io,
        stop: &CancellationToken,
        activity: &Activity,
    ) -> Option<h2::server::Connection<Io, Bytes>> {
        let handshake = self.builder.handshake::<_, Bytes>(io);
        let handshake = tokio::select! {
            handshake = tokio::time::timeout(self.settings.handshake_timeout, handshake) => handshake,
            () = stop.cancelled() => return None,
            () = activity.evicted().cancelled() => return None,
        };
        match handshake {
            Ok(Ok(conn)) => Some(conn),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "HTTP/2 handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!("no HTTP/2 preface within server.handshake_timeout: closed");
                None
            }
        }
    }

    /// Serves the streams of a connection whose handshake is done, until it ends.
    async fn drive<S: Direct>(
        &self,
        mut conn: h2::server::Connection<Io, Bytes>,
        c: Connection<S>,
    ) {
        let Connection {
            services,
            stop,
            force,
            unsent,
            activity,
            first_stream_by,
        } = c;
        let keepalive = match conn.ping_pong() {
            Some(pings) => keepalive(
                pings,
                self.settings.keepalive_interval,
                self.settings.keepalive_timeout,
            ),
            None => Box::pin(future::pending()),
        };
        let mut keepalive = std::pin::pin!(keepalive);
        // Idleness is watched by a task of its own, which asks this loop through one flag.
        let close = Arc::new(idle::Close::default());
        let watchdog = self.tasks.spawn(idle::watch(
            activity.clone(),
            first_stream_by,
            self.settings.idle_timeout,
            self.settings.max_age.map(idle::MaxAge::from_now),
            close.clone(),
        ));
        let _watchdog = AbortOnDrop(watchdog);
        let mut stopping = false;
        let mut asked = idle::Ask::Nothing;
        // Made once, not at every turn of the loop, which comes with every frame of a call.
        let mut stopped = std::pin::pin!(stop.cancelled());
        let mut forced = std::pin::pin!(force.cancelled());
        // Streams accepted and waiting for their requests, and those ready to be served.
        let mut arrivals = Arrivals::default();
        let mut ready = Vec::new();
        loop {
            tokio::select! {
                turn = future::poll_fn(|cx| {
                    self.turn(&mut conn, &mut arrivals, &mut ready, &activity, cx)
                }) => match turn {
                    Some(Ok(())) => {
                        for (arrived, opened) in ready.drain(..) {
                            self.spawn_stream(arrived, opened, &services, &unsent);
                        }
                    }
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "connection ended with an error");
                        break;
                    }
                    None => break,
                },
                () = &mut stopped, if !stopping => {
                    stopping = true;
                    conn.graceful_shutdown();
                }
                ask = future::poll_fn(|cx| close.poll_ask(cx, asked)) => {
                    asked = ask;
                    match ask {
                        idle::Ask::Close => break,
                        _ => conn.graceful_shutdown(),
                    }
                }
                () = &mut keepalive => {
                    tracing::debug!("a keepalive ping went unanswered: connection closed");
                    // GOAWAY, written if the socket still takes it, then closed.
                    conn.abrupt_shutdown(Reason::NO_ERROR);
                    let _ = tokio::time::timeout(GOAWAY_FLUSH, conn.accept()).await;
                    break;
                }
                () = &mut forced => break,
            }
        }
    }
}

/// A stream accepted: its request's head, its way back, its count among the connection's
/// open streams, and its call's span.
type Opened = (
    http::request::Parts,
    SendResponse<Bytes>,
    OpenStream,
    tracing::Span,
);

impl Http2 {
    /// Starts a stream's task, its request's first data in hand (if it came).
    fn spawn_stream<S: Direct>(
        &self,
        arrived: Arrived,
        (head, respond, open, span): Opened,
        services: &Services<S>,
        unsent: &Arc<Unsent>,
    ) {
        let limits = stream::Limits {
            idle: self.settings.stream_idle_timeout,
            request: self.settings.request_timeout,
            body_bytes: self.settings.max_body,
        };
        // Read here, where h2's lock is free of the stream's task.
        let id = respond.stream_id().as_u32();
        // Boxed as it is made: the task then moves a pointer, not the future's state, into
        // its cell and out again.
        self.tasks.spawn(Box::pin(stream::serve(
            Request::from_parts(head, arrived),
            (respond, id),
            services.clone(),
            limits,
            unsent.clone(),
            open,
            span,
        )));
    }

    /// One turn of the connection: reads what has come, accepts the new streams and holds
    /// them until their requests have come ([`Arrivals`]); ready when some are to be served
    /// (in `ready`), or the connection has ended (`None`) or failed.
    fn turn(
        &self,
        conn: &mut h2::server::Connection<Io, Bytes>,
        arrivals: &mut Arrivals<Opened>,
        ready: &mut Vec<(Arrived, Opened)>,
        activity: &Arc<Activity>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(), h2::Error>>> {
        loop {
            match conn.poll_accept(cx) {
                Poll::Ready(Some(Ok((request, respond)))) => {
                    let span = (self.spans)(request.uri().path(), request.headers());
                    let (head, recv) = request.into_parts();
                    arrivals.hold(recv, (head, respond, activity.stream(), span));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => break,
            }
        }
        if arrivals.end_turn(ready, cx) {
            Poll::Ready(Some(Ok(())))
        } else {
            Poll::Pending
        }
    }
}

/// A connection's I/O, as h2 reads and writes it.
type Io = Coalesced<Counted<Conn>>;

/// What one connection is served with, past its handshake.
struct Connection<S> {
    services: Services<S>,
    stop: CancellationToken,
    force: CancellationToken,
    unsent: Arc<Unsent>,
    activity: Arc<Activity>,
    first_stream_by: Instant,
}

/// Aborts a task when dropped: the watchdog ends with its connection.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Pings the peer every `interval`; resolves when a ping goes unanswered for `timeout`.
/// Pongs arrive while the connection is polled, which the accept loop does throughout.
fn keepalive(
    mut pings: PingPong,
    interval: Duration,
    timeout: Duration,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        loop {
            tokio::time::sleep(interval).await;
            if pings.send_ping(Ping::opaque()).is_err() {
                // The connection is going; the accept loop sees why.
                return future::pending().await;
            }
            let pong = future::poll_fn(|cx| pings.poll_pong(cx));
            match tokio::time::timeout(timeout, pong).await {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => return future::pending().await,
                Err(_) => return,
            }
        }
    })
}
