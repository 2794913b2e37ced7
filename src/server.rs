//! The gRPC server: the ModelRuntime service, `grpc.health.v1` health and server reflection
//! (`v1` for grpcurl and buf curl, `v1alpha` for clients such as Python's grpcio-reflection).

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

use crate::config::ServerConfig;
use crate::ingress::Ingress;
use crate::pb;
use crate::runtime::{Runtime, RuntimeState, limits};
use crate::service::{Compression, ModelRuntimeServer, ModelRuntimeService};

mod arrival;
mod authority;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub use authority::fuzz::input as authority_input;
mod coalesce;
mod connection;
mod descriptors;
pub mod http1;
mod idle;
mod incoming;
mod listener;
mod metrics;
mod places;
mod rpc_span;
mod services;
mod stream;
mod unsent;

use connection::Http2;
use incoming::{Accept, Incoming};
pub use listener::{Listener, UnixPath};
pub use metrics::serve_metrics;
use services::Services;

/// The largest header list a client may send (hyper's default): h2's bound
/// (`connection.rs`), and what the Unix socket's `:authority` shim may hold (`authority.rs`).
const MAX_HEADER_LIST: u32 = 16 * 1024;

/// After the drain, how long open streams (slow readers, health watches) get to finish before
/// their connections are closed, so a stop always ends.
const CONNECTION_GRACE: Duration = Duration::from_secs(5);

/// How often the server checks whether the event store has failed, for health.
const STORAGE_CHECK: Duration = Duration::from_millis(250);

/// How long the server waits after failing to accept a connection before it tries again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// The runtime's generated server, as it is served: its calls reach it past the routes.
type RuntimeServer = Compression<ModelRuntimeServer<ModelRuntimeService>>;

/// The fully-qualified name of the service, as health and reflection report it (and as its
/// calls are told from the others').
pub const SERVICE_NAME: &str = <RuntimeServer as NamedService>::NAME;

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The reflection service could not be built from the descriptor sets.
    #[error("building the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// Serves `runtime` on `listener` (a `TcpListener`, or a [`Listener`] of either kind) until
/// `shutdown` resolves; then reports NOT_SERVING, drains the runtime within its configured
/// drain timeout, lets in-flight streams end with the terminal events the drain produced, and
/// closes what is still open after a short grace. A Unix socket's file is removed as the
/// server stops accepting.
pub async fn serve(
    runtime: Runtime,
    listener: impl Into<Listener>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServerError> {
    serve_with_ingress(runtime, listener, None, shutdown).await
}

/// [`serve`], and the HTTP ingress on `ingress` when the config has an `[ingress]`: served
/// from now, taking requests through the drain (new work then gets 503), closed with the
/// gRPC connections, each open stream given the same grace, before the store is released.
pub async fn serve_with_ingress(
    runtime: Runtime,
    listener: impl Into<Listener>,
    ingress: Option<tokio::net::TcpListener>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServerError> {
    let config = &runtime.config().server;
    // A request is refused before it is decoded once it is larger than its content may be,
    // plus framing.
    let max_message = limits::max_request_bytes(config.max_input_bytes);
    let (services, health) = services(&runtime, max_message).await?;
    // The ingress serves gRPC-Web onto the same services.
    let ingress = match (ingress, &runtime.config().ingress) {
        (Some(listener), Some(config)) => Some(Ingress::start(
            runtime.clone(),
            config.clone(),
            listener,
            services.routes().clone(),
        )),
        _ => None,
    };
    let incoming = Incoming::new(
        accept(listener.into()),
        descriptors::client_connections(runtime.config()),
    );
    let connections = Connections {
        http2: Http2::new(
            settings(config, max_message),
            rpc_span::rpc_span,
            TaskTracker::new(),
        ),
        services,
        stop: CancellationToken::new(),
        force: CancellationToken::new(),
        // Every connection's unsent bytes, counted when metrics are on.
        unsent: runtime.unsent_gauge(),
    };
    {
        // Connections are accepted until the drain is over: calls that arrive meanwhile get
        // UNAVAILABLE from the runtime, not a refused connection.
        let stopping = async {
            shutdown.await;
            tracing::info!("shutdown requested: draining");
            not_serving(&health).await;
            runtime
                .shutdown(runtime.config().server.drain_timeout)
                .await;
        };
        connections
            .accept_until(incoming, stopping, storage_health(&runtime, &health))
            .await;
        // The listener closes here: no connection is accepted from now on.
    }
    let ingress = async {
        if let Some(ingress) = ingress {
            ingress.close(CONNECTION_GRACE).await;
        }
    };
    tokio::join!(connections.close(), ingress);
    // Producers (drivers) and readers (streams) are done: the store is flushed and released.
    runtime.close();
    tracing::info!("server stopped");
    Ok(())
}

/// The services: health, reflection (`v1` and `v1alpha`) and the runtime's; and the health
/// reporter that says whether the runtime serves.
async fn services(
    runtime: &Runtime,
    max_message: usize,
) -> Result<
    (
        Services<RuntimeServer>,
        tonic_health::server::HealthReporter,
    ),
    ServerError,
> {
    let (health, health_service) = tonic_health::server::health_reporter();
    // A store that has not reached its database yet (PostgreSQL) is not serving from the
    // first check on; `storage_health` says SERVING once it is.
    if runtime.state() == RuntimeState::Ready {
        health
            .set_service_status(SERVICE_NAME, ServingStatus::Serving)
            .await;
    } else {
        not_serving(&health).await;
    }
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let service = ModelRuntimeService::new(runtime.clone()).server(max_message);
    let routes = Routes::new(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(service.clone())
        .prepare();
    Ok((Services::new(service, routes), health))
}

/// Where connections come from: TCP with no Nagle delay (deltas are forwarded the moment
/// they arrive) and keep-alive probes, or a Unix socket whose file goes with the listener.
fn accept(listener: Listener) -> Accept {
    match listener {
        Listener::Tcp(listener) => Accept::Tcp(
            TcpIncoming::from(listener)
                .with_nodelay(Some(true))
                .with_keepalive(Some(Duration::from_secs(60))),
        ),
        Listener::Unix(listener, path) => Accept::Unix {
            listener,
            _socket_file: path,
        },
    }
}

/// The HTTP/2 driver's settings, from the server's config.
fn settings(config: &ServerConfig, max_message: usize) -> connection::Settings {
    connection::Settings {
        max_concurrent_streams: config.max_concurrent_streams,
        handshake_timeout: config.handshake_timeout,
        idle_timeout: config.idle_timeout,
        request_timeout: config.request_timeout,
        keepalive_interval: config.keepalive_interval,
        keepalive_timeout: config.keepalive_timeout,
        stream_idle_timeout: config.stream_idle_timeout,
        max_age: config
            .max_connection_age
            .map(|age| (age, config.max_connection_age_grace)),
        max_unsent_bytes: config.max_unsent_bytes,
        // A request of the largest size, compressed or not, fits twice over.
        max_body: max_message.saturating_mul(2),
    }
}

/// Keeps health in step with the event store, within a check's period: `NOT_SERVING`,
/// overall and for the service, while the runtime is UNAVAILABLE (a file store that failed
/// stays so; a database may answer again), `SERVING` again once it is ready. Never resolves.
async fn storage_health(runtime: &Runtime, health: &tonic_health::server::HealthReporter) {
    let mut check = tokio::time::interval(STORAGE_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What health says now, once set here (the first check sets it whatever it was, so a
    // store that became ready between `services` and here is reported SERVING).
    let mut serving: Option<bool> = None;
    loop {
        check.tick().await;
        match (runtime.state(), serving) {
            (RuntimeState::Unavailable, Some(true) | None) => {
                if serving.is_some() {
                    tracing::error!(
                        "the event store failed: health NOT_SERVING, new work UNAVAILABLE"
                    );
                } else {
                    tracing::warn!(
                        "the event store is not available: health NOT_SERVING until it is"
                    );
                }
                not_serving(health).await;
                serving = Some(false);
            }
            (RuntimeState::Ready, Some(false) | None) => {
                if serving.is_some() {
                    tracing::info!("the event store answers again: health SERVING");
                }
                serving_again(health).await;
                serving = Some(true);
            }
            _ => {}
        }
    }
}

/// The server's connections: how each is served, and the signals that end them.
struct Connections {
    http2: Http2,
    services: Services<RuntimeServer>,
    /// GOAWAY to every connection: open streams may finish.
    stop: CancellationToken,
    /// Every connection closed at once.
    force: CancellationToken,
    unsent: Option<prometheus_client::metrics::gauge::Gauge>,
}

impl Connections {
    /// Serves each connection `incoming` brings until `stopping` resolves (or the listener
    /// ends); `storage_health` runs meanwhile.
    async fn accept_until(
        &self,
        incoming: Incoming,
        stopping: impl Future<Output = ()>,
        storage_health: impl Future<Output = ()>,
    ) {
        let mut stopping = pin!(stopping);
        let mut storage_health = pin!(storage_health);
        let mut incoming = pin!(incoming);
        loop {
            tokio::select! {
                () = &mut stopping => break,
                () = &mut storage_health => {}
                accepted = incoming.next() => match accepted {
                    Some(Ok(accepted)) => {
                        self.http2.tasks().spawn(self.http2.clone().serve(
                            accepted,
                            self.services.clone(),
                            self.stop.clone(),
                            self.force.clone(),
                            self.unsent.clone(),
                        ));
                    }
                    Some(Err(e)) => {
                        // Out of file descriptors, most likely: wait a moment rather than spin.
                        tracing::warn!(error = %e, "accepting a connection");
                        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    }
                    None => break,
                },
            }
        }
    }

    /// GOAWAY to every connection; open streams end with the terminal events the drain
    /// produced. A health watch or a stalled reader never would: the grace bounds them.
    async fn close(&self) {
        let tasks = self.http2.tasks();
        self.stop.cancel();
        tasks.close();
        if tokio::time::timeout(CONNECTION_GRACE, tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(grace = ?CONNECTION_GRACE, "connections still open after the drain; closing them");
            self.force.cancel();
            tasks.wait().await;
        }
    }
}

/// Health `SERVING`, overall and for the service.
async fn serving_again(health: &tonic_health::server::HealthReporter) {
    health
        .set_service_status(SERVICE_NAME, ServingStatus::Serving)
        .await;
    health.set_service_status("", ServingStatus::Serving).await;
}

/// Health `NOT_SERVING`, overall and for the service.
async fn not_serving(health: &tonic_health::server::HealthReporter) {
    health
        .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
        .await;
    health
        .set_service_status("", ServingStatus::NotServing)
        .await;
}

#[cfg(test)]
mod tests;
