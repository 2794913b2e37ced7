//! The service as the server mounts it: `Execute` and `Watch` stream events encoded straight
//! from the store ([`WireEvent`]); every other method goes to the generated server over
//! [`ModelRuntimeService`]. Same wire bytes, same statuses, same message size limit: only the
//! per-event encoding differs.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use tonic::codegen::{Body, BoxFuture, Service, StdError, http};
use tonic::server::{Grpc, NamedService, ServerStreamingService};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use super::wire_event::WireEvent;
use super::{ModelRuntimeServer, ModelRuntimeService, decode, encode, status};
use crate::execution::ExecutionId;
use crate::pb;
use crate::runtime::{EventStream, Runtime};

const EXECUTE: &str = "/model_runtime.v1.ModelRuntime/Execute";
const WATCH: &str = "/model_runtime.v1.ModelRuntime/Watch";

/// `model_runtime.v1.ModelRuntime` over a [`Runtime`], as the server mounts it.
#[derive(Clone)]
pub struct ModelRuntimeGrpc {
    runtime: Runtime,
    generated: ModelRuntimeServer<ModelRuntimeService>,
    max_decoding_message_size: usize,
}

impl ModelRuntimeGrpc {
    /// Serves `runtime`, refusing requests larger than `max_decoding_message_size` bytes.
    pub fn new(runtime: Runtime, max_decoding_message_size: usize) -> Self {
        let generated = ModelRuntimeServer::new(ModelRuntimeService::new(runtime.clone()))
            .max_decoding_message_size(max_decoding_message_size);
        Self {
            runtime,
            generated,
            max_decoding_message_size,
        }
    }

    fn grpc<T: prost::Message + Default + 'static>(&self) -> Grpc<ProstCodec<WireEvent, T>> {
        Grpc::new(ProstCodec::default())
            .apply_max_message_size_config(Some(self.max_decoding_message_size), None)
    }
}

impl NamedService for ModelRuntimeGrpc {
    const NAME: &'static str = <ModelRuntimeServer<ModelRuntimeService> as NamedService>::NAME;
}

impl<B> Service<http::Request<B>> for ModelRuntimeGrpc
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match request.uri().path() {
            EXECUTE => {
                let mut grpc = self.grpc();
                let method = Execute(self.runtime.clone());
                Box::pin(async move { Ok(grpc.server_streaming(method, request).await) })
            }
            WATCH => {
                let mut grpc = self.grpc();
                let method = Watch(self.runtime.clone());
                Box::pin(async move { Ok(grpc.server_streaming(method, request).await) })
            }
            _ => self.generated.call(request),
        }
    }
}

type WireEvents = Pin<Box<dyn Stream<Item = Result<WireEvent, Status>> + Send>>;

/// The events of `id`'s execution, each with the id's text form (made once) and its append
/// time (converted once per batch: a batch shares one).
fn wire(id: ExecutionId, events: EventStream) -> WireEvents {
    let id: Arc<str> = id.to_text().into();
    let mut time = None;
    Box::pin(events.map(move |item| {
        let event = item.map_err(status::to_status)?;
        let at = match time {
            Some((at, wire)) if at == event.time => wire,
            _ => {
                let wire = encode::timestamp(event.time);
                time = Some((event.time, wire));
                wire
            }
        };
        Ok(WireEvent::new(id.clone(), at, event))
    }))
}

struct Execute(Runtime);

impl ServerStreamingService<pb::ExecuteRequest> for Execute {
    type Response = WireEvent;
    type ResponseStream = WireEvents;
    type Future = BoxFuture<Response<WireEvents>, Status>;

    fn call(&mut self, request: Request<pb::ExecuteRequest>) -> Self::Future {
        let runtime = self.0.clone();
        Box::pin(async move {
            let request =
                decode::execute_request(request.into_inner()).map_err(status::to_status)?;
            let view = runtime.submit(request).await.map_err(status::to_status)?;
            let events = runtime.watch(view.id, 0).map_err(status::to_status)?;
            Ok(Response::new(wire(view.id, events)))
        })
    }
}

struct Watch(Runtime);

impl ServerStreamingService<pb::WatchRequest> for Watch {
    type Response = WireEvent;
    type ResponseStream = WireEvents;
    type Future = BoxFuture<Response<WireEvents>, Status>;

    fn call(&mut self, request: Request<pb::WatchRequest>) -> Self::Future {
        let runtime = self.0.clone();
        Box::pin(async move {
            let request = request.into_inner();
            let id = decode::execution_id(&request.execution_id, "execution_id")
                .map_err(status::to_status)?;
            let events = runtime
                .watch(id, request.after_sequence)
                .map_err(status::to_status)?;
            Ok(Response::new(wire(id, events)))
        })
    }
}
