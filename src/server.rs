//! The gRPC server: the ModelRuntime service, `grpc.health.v1` health and server reflection
//! (`v1` for grpcurl and buf curl, `v1alpha` for clients such as Python's grpcio-reflection).

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

use crate::pb;
use crate::runtime::{Runtime, limits};
use crate::service::ModelRuntimeService;

mod incoming;

use incoming::Incoming;

/// After the drain, how long open streams (slow readers, health watches) get to finish before
/// their connections are closed, so a stop always ends.
const CONNECTION_GRACE: Duration = Duration::from_secs(5);

/// Streams the server may reset for a peer's protocol errors before it closes the connection
/// (h2's default, which tonic turns off unless it is set).
const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// Streams a peer may open and reset before they are accepted (h2's default).
const MAX_PENDING_ACCEPT_RESETS: usize = 20;

/// The fully-qualified name of the service, as health and reflection report it.
pub const SERVICE_NAME: &str = "model_runtime.v1.ModelRuntime";

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The reflection service could not be built from the descriptor sets.
    #[error("building the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The transport failed.
    #[error("gRPC transport: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves `runtime` on `listener` until `shutdown` resolves; then reports NOT_SERVING, drains
/// the runtime within its configured drain timeout, lets in-flight streams end with the
/// terminal events the drain produced, and closes what is still open after a short grace.
pub async fn serve(
    runtime: Runtime,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServerError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status(SERVICE_NAME, ServingStatus::Serving)
        .await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let config = &runtime.config().server;
    // A request is refused before it is decoded once it is larger than its content may be,
    // plus framing.
    let max_message = limits::max_request_bytes(config.max_input_bytes);
    let service = ModelRuntimeService::new(runtime.clone()).server(max_message);
    // Deltas are forwarded the moment they arrive: no Nagle delay on accepted connections.
    let incoming = Incoming::new(
        TcpIncoming::from(listener)
            .with_nodelay(Some(true))
            .with_keepalive(Some(Duration::from_secs(60))),
        config.max_connections,
        config.handshake_timeout,
    );
    let drain = runtime.config().server.drain_timeout;
    let (drained, drained_rx) = tokio::sync::oneshot::channel::<()>();
    let stopping = async {
        shutdown.await;
        tracing::info!("shutdown requested: draining");
        health
            .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
            .await;
        health
            .set_service_status("", ServingStatus::NotServing)
            .await;
        runtime.shutdown(drain).await;
        let _ = drained.send(());
    };
    let serving = tonic::transport::Server::builder()
        // HTTP/2 bounds: streams per connection; keepalive pings that close a connection whose
        // peer has gone; and h2's own protection against a peer that makes the server reset
        // stream after stream (tonic leaves it off unless asked).
        .max_concurrent_streams(config.max_concurrent_streams)
        .http2_keepalive_interval(Some(config.keepalive_interval))
        .http2_keepalive_timeout(Some(config.keepalive_timeout))
        .http2_max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_ACCEPT_RESETS))
        // One span per RPC, named by its method, so every log line of a call carries it: at
        // debug, since at the default level it cost 2% of a call's instructions, and every log
        // line a call writes at info or above names its execution already.
        .trace_fn(|request| tracing::debug_span!("rpc", method = %request.uri().path()))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, stopping);
    // Graceful shutdown waits for every connection to close; a health watch or a stalled
    // reader never would. Bound it.
    let grace = async {
        match drained_rx.await {
            Ok(()) => tokio::time::sleep(CONNECTION_GRACE).await,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        result = serving => result?,
        () = grace => tracing::warn!(grace = ?CONNECTION_GRACE, "connections still open after the drain; closing them"),
    }
    tracing::info!("server stopped");
    Ok(())
}
