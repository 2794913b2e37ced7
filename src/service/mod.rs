//! tonic glue: decode the request, call the [`Runtime`], encode the answer. Errors become
//! statuses only in [`status`].

pub mod decode;
pub mod encode;
pub mod status;
mod streaming;
mod wire_event;

use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::pb;
use crate::pb::model_runtime_server::ModelRuntime;
use crate::runtime::{EventStream, Runtime};

pub use pb::model_runtime_server::ModelRuntimeServer;
pub use streaming::ModelRuntimeGrpc;

/// A stream of wire events.
pub type WireEvents = Pin<Box<dyn Stream<Item = Result<pb::ExecutionEvent, Status>> + Send>>;

/// The `model_runtime.v1.ModelRuntime` service over a [`Runtime`], every method through the
/// generated server and prost messages. The server mounts it inside [`ModelRuntimeGrpc`],
/// which streams `Execute` and `Watch` without building a message per event.
#[derive(Clone)]
pub struct ModelRuntimeService {
    runtime: Runtime,
}

impl ModelRuntimeService {
    /// Serves `runtime`.
    pub fn new(runtime: Runtime) -> Self {
        Self { runtime }
    }
}

fn wire(events: EventStream) -> WireEvents {
    let mut encoder = encode::EventEncoder::default();
    Box::pin(events.map(move |item| match item {
        Ok(event) => Ok(encoder.event(&event)),
        Err(e) => Err(status::to_status(e)),
    }))
}

#[tonic::async_trait]
impl ModelRuntime for ModelRuntimeService {
    type ExecuteStream = WireEvents;
    type WatchStream = WireEvents;

    async fn execute(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<Self::ExecuteStream>, Status> {
        let request = decode::execute_request(request.into_inner()).map_err(status::to_status)?;
        let events = self
            .runtime
            .execute(request)
            .await
            .map_err(status::to_status)?;
        Ok(Response::new(wire(events)))
    }

    async fn submit(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        let request = decode::execute_request(request.into_inner()).map_err(status::to_status)?;
        let view = self
            .runtime
            .submit(request)
            .await
            .map_err(status::to_status)?;
        Ok(Response::new(encode::execution(&view)))
    }

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let request = request.into_inner();
        let id = decode::execution_id(&request.execution_id, "execution_id")
            .map_err(status::to_status)?;
        let events = self
            .runtime
            .watch(id, request.after_sequence)
            .map_err(status::to_status)?;
        Ok(Response::new(wire(events)))
    }

    async fn get_execution(
        &self,
        request: Request<pb::GetExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        let id = decode::execution_id(&request.get_ref().execution_id, "execution_id")
            .map_err(status::to_status)?;
        let view = self.runtime.get(id).map_err(status::to_status)?;
        Ok(Response::new(encode::execution(&view)))
    }

    async fn cancel_execution(
        &self,
        request: Request<pb::CancelExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        let request = request.into_inner();
        let id = decode::execution_id(&request.execution_id, "execution_id")
            .map_err(status::to_status)?;
        let reason = (!request.reason.is_empty()).then_some(request.reason);
        let view = self
            .runtime
            .cancel(id, reason)
            .await
            .map_err(status::to_status)?;
        Ok(Response::new(encode::execution(&view)))
    }

    async fn get_runtime_metadata(
        &self,
        _request: Request<pb::GetRuntimeMetadataRequest>,
    ) -> Result<Response<pb::RuntimeMetadata>, Status> {
        Ok(Response::new(encode::metadata(&self.runtime.metadata())))
    }
}
