//! The HTTP ingress (`[ingress]`): OpenAI's and Anthropic's HTTP APIs, as every SDK and
//! gateway speaks them, turned into executions without giving up a rule of the protocol.
//! HTTP/1.1 and h2c on one listener of its own; off unless configured.
//!
//! - `POST /v1/chat/completions` and `POST /v1/responses` (OpenAI's, `chat.rs`,
//!   `responses.rs`) and `POST /v1/messages` (Anthropic's, `messages.rs`), answered alike
//!   (`answer.rs`); `GET /v1/models` (`models.rs`): the
//!   abilities a caller may name; the execution as a resource (`executions.rs`):
//!   `GET /v1/executions/{id}`, its events as server-sent events, resumable, and
//!   `POST /v1/executions/{id}/cancel`.
//! - A request's `model` names an ability, or `ability/policy` (`request.rs`); `stream: false`
//!   is buffered delivery, so a failure mid-answer can still fall back; `stream: true` is
//!   streamed, under the commit rule.
//! - Before output: a real status in the API's error shape; after it, the API's error event
//!   and no normal end (`error.rs`).
//! - A caller that goes away cancels its execution, at once without an `Idempotency-Key`,
//!   after `detach_grace` with one, unless a retry attaches first (`detach.rs`).
//! - gRPC-Web (`application/grpc-web*`, a browser's gRPC) is the gRPC server's own services,
//!   translated by tonic's layer (`grpc_web.rs`).
//!
//! The drain is the gRPC server's: requests are taken while the runtime drains (new work is
//! refused with 503), then the listener closes, and open streams get a grace to end.

mod answer;
mod body;
mod chat;
mod detach;
mod error;
mod executions;
mod grpc_web;
mod messages;
mod models;
mod request;
mod responses;
mod route;
mod stream;
#[cfg(test)]
mod tests;
mod tokens;

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::IngressConfig;
use crate::runtime::Runtime;

/// How long a request's head may take to arrive.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the ingress waits after failing to accept a connection before it tries again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// What every request of the ingress shares.
struct Shared {
    runtime: Runtime,
    config: IngressConfig,
    detached: detach::Detached,
    /// The gRPC server's services, for gRPC-Web.
    grpc_web: grpc_web::Service,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The ingress, serving until [`close`](Self::close).
#[derive(Debug)]
pub struct Ingress {
    stop: CancellationToken,
    /// Closes what is still open after the grace.
    force: CancellationToken,
    connections: TaskTracker,
    accepting: tokio::task::JoinHandle<()>,
}

impl Ingress {
    /// Serves `runtime` over HTTP on `listener` as `config` says, and gRPC-Web onto `grpc`
    /// (the gRPC server's services), from now until [`close`](Self::close).
    pub fn start(
        runtime: Runtime,
        config: IngressConfig,
        listener: TcpListener,
        grpc: tonic::service::Routes,
    ) -> Self {
        let shared = Arc::new(Shared {
            runtime,
            config,
            detached: detach::Detached::default(),
            grpc_web: grpc_web::service(grpc),
        });
        let stop = CancellationToken::new();
        let force = CancellationToken::new();
        let connections = TaskTracker::new();
        #[expect(
            clippy::disallowed_methods,
            reason = "the accept loop ends with `close`, which awaits it"
        )]
        let accepting = tokio::spawn(accept(
            shared,
            listener,
            [stop.clone(), force.clone()],
            connections.clone(),
        ));
        Self {
            stop,
            force,
            connections,
            accepting,
        }
    }

    /// Stops accepting connections, asks the open ones to close once their requests are
    /// answered, and waits for them at most `grace`; what is still open then is closed.
    pub async fn close(self, grace: Duration) {
        self.stop.cancel();
        let _ = self.accepting.await;
        self.connections.close();
        if tokio::time::timeout(grace, self.connections.wait())
            .await
            .is_err()
        {
            tracing::info!(
                open = self.connections.len(),
                "HTTP ingress connections still open after the grace; closing them"
            );
            self.force.cancel();
            self.connections.wait().await;
        }
    }
}

/// Accepts connections until `stop`, each served in a task of `connections`: asked to close
/// at `stop`, closed at `force`.
async fn accept(
    shared: Arc<Shared>,
    listener: TcpListener,
    [stop, force]: [CancellationToken; 2],
    connections: TaskTracker,
) {
    let places = Arc::new(Semaphore::new(
        shared.runtime.config().server.max_connections,
    ));
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting an HTTP ingress connection");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        // At most `server.max_connections` at once, as on the gRPC side: one past it is
        // closed as it arrives.
        let Ok(place) = places.clone().try_acquire_owned() else {
            continue;
        };
        // Deltas leave as they come: no Nagle.
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let (stop, force) = (stop.clone(), force.clone());
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(route::route(&shared, request).await) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // A request's head arrives within its bound of time, or the connection closes.
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop.cancelled() => {
                    // Requests under way are answered; no new one is read.
                    connection.as_mut().graceful_shutdown();
                    tokio::select! {
                        _ = connection => {}
                        () = force.cancelled() => {}
                    }
                }
            }
            drop(place);
        });
    }
}
