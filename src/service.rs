//! tonic glue: decode the request, call the [`Runtime`], encode the answer. Errors become
//! statuses only in [`status`].
//!
//! Every method is served by one generated server, so the options set on it (message size
//! limits, compression, interceptors) hold for all six. `Execute` and `Watch` stream
//! [`WireEvent`]s, written straight from the stored event into the response buffer; the build
//! maps the .proto's `ExecutionEvent` to that type for this server only (`build.rs`), so the
//! generated code encodes it like any other message.

mod access;
pub(crate) mod codec;
mod compression;
pub(crate) mod decode;
pub(crate) mod encode;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fuzz;
mod status;
mod wire_event;

use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use crate::execution::Execution;
use crate::pb;
use crate::runtime::{EventStream, Runtime};

pub(crate) use compression::Compression;
pub use status::{ERROR_DOMAIN, to_status};
pub(crate) use wire_event::WireEvent;

/// The server code generated for the runtime: `pb`'s messages, with `ExecutionEvent` as
/// [`WireEvent`].
mod generated {
    #![allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
    include!(concat!(env!("OUT_DIR"), "/server/model_runtime.v1.rs"));
}

pub(crate) use generated::model_runtime_server::{ModelRuntime, ModelRuntimeServer};

/// A stream of usage records on their way to a client.
pub(crate) type UsageRecords = Pin<Box<dyn Stream<Item = Result<pb::UsageRecord, Status>> + Send>>;

/// A stream of events on their way to a client.
pub(crate) type WireEvents = Pin<Box<dyn Stream<Item = Result<WireEvent, Status>> + Send>>;

/// The `model_runtime.v1.ModelRuntime` service over a [`Runtime`].
#[derive(Clone)]
pub(crate) struct ModelRuntimeService {
    runtime: Runtime,
    /// `server.access_log`.
    access: bool,
}

impl ModelRuntimeService {
    /// Serves `runtime`.
    pub(crate) fn new(runtime: Runtime) -> Self {
        let access = runtime.config().server.access_log;
        Self { runtime, access }
    }

    /// `events` of a stream call that began at `start`, logged at their end when the access
    /// log is on.
    fn streamed(&self, method: &'static str, start: Instant, events: EventStream) -> WireEvents {
        if !self.access {
            return wire(events);
        }
        let id: Arc<str> = events.execution_id().to_text().into();
        access::stream(method, start, id, wire(events))
    }

    /// A unary call's answer, logged when the access log is on.
    fn answered(
        &self,
        method: &'static str,
        start: Instant,
        answer: Result<Execution, Status>,
    ) -> Result<Response<pb::Execution>, Status> {
        if self.access {
            access::unary(method, start, &answer, answer.as_ref().ok());
        }
        answer.map(|view| Response::new(encode::execution(&view)))
    }

    /// A stream call refused at once, logged when the access log is on.
    fn refused<T>(
        &self,
        method: &'static str,
        start: Instant,
        status: Status,
    ) -> Result<T, Status> {
        if self.access {
            access::unary::<()>(method, start, &Err(status.clone()), None);
        }
        Err(status)
    }

    /// The generated server over this service, refusing requests larger than
    /// `max_decoding_message_size` bytes, compressed or inflated; taking gzip and zstd, and
    /// answering in them a caller that uses them ([`Compression`]).
    pub(crate) fn server(
        self,
        max_decoding_message_size: usize,
    ) -> Compression<ModelRuntimeServer<Self>> {
        let mut server =
            ModelRuntimeServer::new(self).max_decoding_message_size(max_decoding_message_size);
        for encoding in compression::ENCODINGS {
            server = server.accept_compressed(encoding).send_compressed(encoding);
        }
        Compression::new(server)
    }
}

/// The request of an `Execute` or `Submit` call, with the caller's trace from its metadata.
fn execute_request(
    request: Request<pb::ExecuteRequest>,
) -> Result<crate::execution::ExecuteRequest, Status> {
    let trace = decode::trace(request.metadata());
    let mut request = decode::execute_request(request.into_inner()).map_err(status::to_status)?;
    request.trace = trace;
    Ok(request)
}

/// The events of an execution, each with the id's text form (made once) and its append time
/// (converted once per batch: a batch shares one).
fn wire(events: EventStream) -> WireEvents {
    let id: Arc<str> = events.execution_id().to_text().into();
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

#[tonic::async_trait]
impl ModelRuntime for ModelRuntimeService {
    type ExecuteStream = WireEvents;
    type WatchStream = WireEvents;
    type StreamUsageStream = UsageRecords;

    async fn execute(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<Self::ExecuteStream>, Status> {
        let start = Instant::now();
        let events = async {
            let request = execute_request(request)?;
            self.runtime
                .execute(request)
                .await
                .map_err(status::to_status)
        };
        match events.await {
            Ok(events) => Ok(Response::new(self.streamed("Execute", start, events))),
            Err(status) => self.refused("Execute", start, status),
        }
    }

    async fn submit(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        let start = Instant::now();
        let view = async {
            let request = execute_request(request)?;
            self.runtime
                .submit(request)
                .await
                .map_err(status::to_status)
        };
        self.answered("Submit", start, view.await)
    }

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let start = Instant::now();
        let request = request.into_inner();
        let events = async {
            let id = decode::execution_id(&request.execution_id, "execution_id")
                .map_err(status::to_status)?;
            self.runtime
                .watch(id, request.after_sequence)
                .await
                .map_err(status::to_status)
        };
        match events.await {
            Ok(events) => Ok(Response::new(self.streamed("Watch", start, events))),
            Err(status) => self.refused("Watch", start, status),
        }
    }

    async fn stream_usage(
        &self,
        request: Request<pb::StreamUsageRequest>,
    ) -> Result<Response<Self::StreamUsageStream>, Status> {
        let after = decode::usage_cursor(&request.get_ref().after_cursor, "after_cursor")
            .map_err(status::to_status)?;
        let records = self.runtime.stream_usage(after).map(|record| {
            record
                .map(|record| encode::usage_record(&record))
                .map_err(status::to_status)
        });
        Ok(Response::new(Box::pin(records)))
    }

    async fn get_execution(
        &self,
        request: Request<pb::GetExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        let start = Instant::now();
        let view = async {
            let id = decode::execution_id(&request.get_ref().execution_id, "execution_id")
                .map_err(status::to_status)?;
            self.runtime.get(id).await.map_err(status::to_status)
        };
        self.answered("GetExecution", start, view.await)
    }

    async fn cancel_execution(
        &self,
        request: Request<pb::CancelExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        let start = Instant::now();
        let request = request.into_inner();
        let view = async {
            let id = decode::execution_id(&request.execution_id, "execution_id")
                .map_err(status::to_status)?;
            let reason = (!request.reason.is_empty()).then_some(request.reason);
            self.runtime
                .cancel(id, reason)
                .await
                .map_err(status::to_status)
        };
        self.answered("CancelExecution", start, view.await)
    }

    async fn get_runtime_metadata(
        &self,
        _request: Request<pb::GetRuntimeMetadataRequest>,
    ) -> Result<Response<pb::RuntimeMetadata>, Status> {
        Ok(Response::new(encode::metadata(&self.runtime.metadata())))
    }
}
