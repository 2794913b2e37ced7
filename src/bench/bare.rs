//! The bare tonic baseline: a server on the same `model_runtime.v1.ModelRuntime/Execute`
//! path that answers every request with the very messages the runtime sends for the
//! benchmark's prompt, and does nothing else. It is the floor: what gRPC itself costs here.
//!
//! The messages are not written by hand: they are captured once from a real server (the
//! embedded default config: the scripted echo model, served on loopback) answering the same
//! request, so their number and sizes match the runtime's by construction. The server is the
//! plain one generated with the wire types (`crates/client`), over the same messages.

use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::thread::JoinHandle;

use futures_util::{Stream, stream};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};
use tracing::instrument::WithSubscriber;

use super::BenchError;
use crate::cli::address::Address;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use model_runtime::pb::model_runtime_server::{ModelRuntime, ModelRuntimeServer};
use model_runtime::{Config, Runtime, pb, server};

/// The events the runtime streams for `request`, on the wire: accepted, routing, attempt
/// started, one text delta per word, two usage facts, completed.
pub async fn capture(request: &pb::ExecuteRequest) -> Result<Vec<pb::ExecutionEvent>, BenchError> {
    let setup = |what: &str, e: &dyn std::fmt::Display| BenchError::Setup(format!("{what}: {e}"));
    let config = Config::embedded_default().map_err(|e| setup("the embedded config", &e))?;
    let runtime = Runtime::new(config).map_err(|e| setup("the embedded runtime", &e))?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(|e| setup("a loopback listener", &e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| setup("a loopback listener", &e))?;
    let (stop, stopped) = oneshot::channel::<()>();
    // Its start and stop are no part of the benchmark's output.
    let quiet = tracing::subscriber::NoSubscriber::default();
    let serving = tokio::spawn(
        server::serve(runtime, listener, async {
            let _ = stopped.await;
        })
        .with_subscriber(quiet),
    );
    let channel = Address::Tcp(addr.to_string())
        .connect()
        .await
        .map_err(|e| setup("connecting to the embedded server", &e))?;
    let captured = async {
        let mut events = ModelRuntimeClient::new(channel)
            .execute(request.clone())
            .await?
            .into_inner();
        let mut wire = Vec::new();
        while let Some(event) = events.message().await? {
            wire.push(event);
        }
        Ok::<_, Status>(wire)
    }
    .await
    .map_err(|e| setup("capturing the runtime's events", &e));
    let _ = stop.send(());
    let _ = serving.await;
    let wire = captured?;
    match wire.last().and_then(|e| e.payload.as_ref()) {
        Some(pb::execution_event::Payload::Completed(_)) => Ok(wire),
        _ => Err(BenchError::Setup(
            "the embedded runtime did not complete the benchmark request".into(),
        )),
    }
}

/// How many `output.text.delta` events `events` holds.
pub fn text_deltas(events: &[pb::ExecutionEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.payload, Some(pb::execution_event::Payload::TextDelta(_))))
        .count()
}

type Events = Pin<Box<dyn Stream<Item = Result<pb::ExecutionEvent, Status>> + Send>>;

/// Answers `Execute` with a copy of the captured events; every other RPC is unimplemented.
struct Bare {
    events: Arc<[pb::ExecutionEvent]>,
}

#[tonic::async_trait]
impl ModelRuntime for Bare {
    type ExecuteStream = Events;
    type WatchStream = Events;
    type StreamUsageStream = Pin<Box<dyn Stream<Item = Result<pb::UsageRecord, Status>> + Send>>;

    async fn execute(
        &self,
        _request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<Events>, Status> {
        let events = self.events.clone();
        // A copy per message, as the runtime builds each wire message from its own event.
        let each = (0..events.len()).map(move |i| Ok(events[i].clone()));
        Ok(Response::new(Box::pin(stream::iter(each))))
    }

    async fn submit(
        &self,
        _request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        Err(Status::unimplemented(
            "the bare baseline answers Execute only",
        ))
    }

    async fn watch(&self, _request: Request<pb::WatchRequest>) -> Result<Response<Events>, Status> {
        Err(Status::unimplemented(
            "the bare baseline answers Execute only",
        ))
    }

    async fn get_execution(
        &self,
        _request: Request<pb::GetExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        Err(Status::unimplemented(
            "the bare baseline answers Execute only",
        ))
    }

    async fn cancel_execution(
        &self,
        _request: Request<pb::CancelExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        Err(Status::unimplemented(
            "the bare baseline answers Execute only",
        ))
    }

    async fn get_runtime_metadata(
        &self,
        _request: Request<pb::GetRuntimeMetadataRequest>,
    ) -> Result<Response<pb::RuntimeMetadata>, Status> {
        Err(Status::unimplemented(
            "the bare baseline answers Execute only",
        ))
    }

    async fn stream_usage(
        &self,
        _request: Request<pb::StreamUsageRequest>,
    ) -> Result<Response<Self::StreamUsageStream>, Status> {
        Err(Status::unimplemented(
            "the bare baseline answers Execute only",
        ))
    }
}

/// The bare server, running on its own tokio runtime and threads, as a separate server
/// process would, so the load tool's workers do not share a scheduler with it.
pub struct BareServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl BareServer {
    /// Serves `events` on 127.0.0.1 on a free port.
    pub fn start(events: Vec<pb::ExecutionEvent>) -> Result<Self, BenchError> {
        let setup = |what: &str, e: std::io::Error| BenchError::Setup(format!("{what}: {e}"));
        // Bound here, so the port is known (and taken) before `start` returns.
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| setup("bare server listener", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| setup("bare server address", e))?;
        let (shutdown, stop) = oneshot::channel::<()>();
        let service = ModelRuntimeServer::new(Bare {
            events: events.into(),
        });
        let thread = std::thread::Builder::new()
            .name("bare-tonic".into())
            .spawn(move || serve(listener, service, stop))
            .map_err(|e| setup("bare server thread", e))?;
        Ok(Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn address(&self) -> crate::cli::address::Address {
        crate::cli::address::Address::Tcp(self.addr.to_string())
    }

    /// Stops the server and waits for its thread. Close client connections first, or the
    /// graceful shutdown waits for them.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// The server thread's body: a runtime of its own (built here, since a runtime may be
/// neither started nor dropped inside another), with as many workers as `serve` gets.
fn serve(
    listener: std::net::TcpListener,
    service: ModelRuntimeServer<Bare>,
    stop: oneshot::Receiver<()>,
) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bare-tonic")
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "bare baseline runtime");
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(e) => {
                tracing::error!(error = %e, "bare baseline listener");
                return;
            }
        };
        // Like the runtime's server: no Nagle delay on accepted connections.
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let served = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stop.await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "bare baseline server failed");
        }
    });
}

impl Drop for BareServer {
    fn drop(&mut self) {
        // Stopping without joining: a dropped server still ends its thread.
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::bench::args::prompt_of;
    use model_runtime_client::text_request as request;

    #[tokio::test]
    async fn captures_the_runtime_sequence_for_the_prompt() {
        let events = capture(&request("chat", &prompt_of(16))).await.unwrap();
        let types: Vec<&str> = events.iter().map(|e| e.r#type.as_str()).collect();
        assert_eq!(types.len(), 3 + 16 + 2 + 1, "{types:?}");
        assert_eq!(
            &types[..3],
            [
                "execution.accepted",
                "execution.routing",
                "route.attempt.started"
            ]
        );
        assert_eq!(text_deltas(&events), 16);
        assert_eq!(
            &types[19..],
            ["usage.reported", "usage.reported", "execution.completed"]
        );
    }

    #[tokio::test]
    async fn an_unknown_ability_is_a_setup_error() {
        assert!(matches!(
            capture(&request("nope", "hi")).await,
            Err(BenchError::Setup(_))
        ));
    }
}
