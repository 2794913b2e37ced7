//! The gRPC side of the load tool: a few HTTP/2 connections shared round-robin by the
//! workers, and calls that decode only what the measurement needs.
//!
//! Executions go through `model-runtime-client`, as a caller's would (its resuming stream,
//! without idempotency keys of its own, so the server does what it did before the tool used
//! it). The client must not be what is measured: a full `ExecutionEvent` decode allocates the
//! id, type, timestamp and text of every event; here each event is decoded into
//! [`EventHead`], which keeps only what the stream and the measurement need (sequence, the
//! execution's id as a slice of the frame, which payload it carries, a failure's code) and
//! skips the rest, as protobuf lets any reader skip fields it does not know.

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;

use crate::cli::address::Address;
use tonic::transport::Channel;
use tonic_prost::ProstCodec;

use super::BenchError;
use super::args::Rpc;
use super::load::{Caller, Observed, Session};
use model_runtime::pb;

const SUBMIT: &str = "/model_runtime.v1.ModelRuntime/Submit";

/// The parts of an `ExecutionEvent` the tool looks at; the field tags are the wire
/// contract's (`proto/model_runtime/v1/events.proto`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventHead {
    /// `execution_id`, undecoded (a string's bytes, shared with the frame).
    #[prost(bytes = "bytes", tag = "1")]
    pub execution_id: bytes::Bytes,
    /// `sequence`.
    #[prost(uint64, tag = "2")]
    pub sequence: u64,
    /// The payload, when it is one the tool cares about.
    #[prost(oneof = "Head", tags = "14, 19, 20")]
    pub head: Option<Head>,
}

impl model_runtime_client::Event for EventHead {
    fn sequence(&self) -> u64 {
        self.sequence
    }

    fn execution_id(&self) -> String {
        String::from_utf8_lossy(&self.execution_id).into_owned()
    }

    fn is_terminal(&self) -> bool {
        matches!(self.head, Some(Head::Completed(_) | Head::Failed(_)))
    }
}

/// The payloads that matter to the measurement.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Head {
    /// `output.text.delta`: the first one is the time to first output.
    #[prost(message, tag = "14")]
    TextDelta(Skipped),
    /// `execution.completed`.
    #[prost(message, tag = "19")]
    Completed(Skipped),
    /// `execution.failed`.
    #[prost(message, tag = "20")]
    Failed(FailedHead),
}

/// A message whose content is skipped.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct Skipped {}

/// `ExecutionFailed`, down to its error code.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FailedHead {
    /// `ExecutionFailed.error`.
    #[prost(message, optional, tag = "1")]
    pub error: Option<ErrorHead>,
}

/// `ExecutionError.code`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorHead {
    /// The error code, e.g. `deadline_exceeded`.
    #[prost(string, tag = "1")]
    pub code: String,
}

/// Connections to one server.
pub struct GrpcCaller {
    channels: Vec<Channel>,
    request: Arc<pb::ExecuteRequest>,
    rpc: Rpc,
}

impl GrpcCaller {
    /// Opens `connections` HTTP/2 connections to `address`, with TCP_NODELAY as the server
    /// has.
    pub async fn connect(
        address: &Address,
        connections: usize,
        request: pb::ExecuteRequest,
        rpc: Rpc,
    ) -> Result<Self, BenchError> {
        let mut channels = Vec::with_capacity(connections);
        for _ in 0..connections {
            // Each `connect` is its own connection; clones of one channel would share it.
            let channel = address
                .connect()
                .await
                .map_err(|e| BenchError::Connect(address.to_string(), e.to_string()))?;
            channels.push(channel);
        }
        Ok(Self {
            channels,
            request: Arc::new(request),
            rpc,
        })
    }
}

impl GrpcCaller {
    /// Sends the run's request once, alone, before the load: a request the server refuses
    /// (an unknown ability, an invalid field) is said once, instead of as every call's error.
    /// An accepted one is left to run; its events are not read.
    pub async fn preflight(&self) -> Result<(), BenchError> {
        use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
        use tonic::Code;
        let mut client = ModelRuntimeClient::new(self.channels[0].clone());
        let request = (*self.request).clone();
        let answered = match self.rpc {
            Rpc::Execute => client.execute(request).await.map(drop),
            Rpc::Submit => client.submit(request).await.map(drop),
        };
        match answered {
            Err(status)
                if matches!(
                    status.code(),
                    Code::InvalidArgument
                        | Code::NotFound
                        | Code::FailedPrecondition
                        | Code::Unimplemented
                        | Code::PermissionDenied
                        | Code::Unauthenticated
                ) =>
            {
                Err(BenchError::Refused(
                    crate::cli::client::CallError::Status(status).to_string(),
                ))
            }
            // Anything else (a busy server, say) is the load's to count.
            _ => Ok(()),
        }
    }
}

impl Caller for GrpcCaller {
    type Session = GrpcSession;

    fn session(&self, worker: usize) -> GrpcSession {
        let channel = self.channels[worker % self.channels.len()].clone();
        GrpcSession {
            client: model_runtime_client::Client::new(channel.clone()).without_keys(),
            grpc: Grpc::new(channel),
            request: self.request.clone(),
            rpc: self.rpc,
        }
    }
}

/// One worker's client.
pub struct GrpcSession {
    client: model_runtime_client::Client,
    grpc: Grpc<Channel>,
    request: Arc<pb::ExecuteRequest>,
    rpc: Rpc,
}

fn status_key(status: &tonic::Status) -> String {
    format!("grpc:{:?}", status.code())
}

impl GrpcSession {
    async fn execute(&mut self) -> Observed {
        let mut seen = Observed::default();
        let request = (*self.request).clone();
        let mut events = match self.client.execute_as::<EventHead>(request).await {
            Ok(events) => events,
            Err(status) => {
                seen.failure = Some(status_key(&status));
                return seen;
            }
        };
        // The stream ends after the terminal event, with the call read to its trailers.
        while let Some(item) = events.next().await {
            let event = match item {
                Ok(event) => event,
                Err(status) => {
                    seen.failure.get_or_insert_with(|| status_key(&status));
                    return seen;
                }
            };
            seen.events += 1;
            match event.head {
                Some(Head::TextDelta(_)) if seen.first_output.is_none() => {
                    seen.first_output = Some(Instant::now());
                }
                Some(Head::Completed(_)) => seen.end = Some(Instant::now()),
                Some(Head::Failed(failed)) => {
                    seen.end = Some(Instant::now());
                    let code = failed.error.map(|e| e.code).unwrap_or_default();
                    seen.failure = Some(format!("execution.failed:{code}"));
                }
                _ => {}
            }
        }
        if seen.end.is_none() {
            seen.failure = Some("client:no_terminal_event".into());
        }
        seen
    }

    async fn submit(&mut self) -> Observed {
        let mut seen = Observed::default();
        if let Err(e) = self.grpc.ready().await {
            seen.failure = Some(format!("client:not_ready: {e}"));
            return seen;
        }
        let codec = ProstCodec::<pb::ExecuteRequest, Skipped>::default();
        let request = tonic::Request::new((*self.request).clone());
        let path = PathAndQuery::from_static(SUBMIT);
        if let Err(status) = self.grpc.unary(request, path, codec).await {
            seen.failure = Some(status_key(&status));
        }
        seen
    }
}

impl Session for GrpcSession {
    async fn call(&mut self) -> Observed {
        match self.rpc {
            Rpc::Execute => self.execute().await,
            Rpc::Submit => self.submit().await,
        }
    }
}

#[cfg(test)]
mod tests {

    use prost::Message;

    use super::*;

    fn encoded(payload: pb::execution_event::Payload) -> Vec<u8> {
        pb::ExecutionEvent {
            execution_id: "0198f0f6-0000-7000-8000-000000000000".into(),
            sequence: 4,
            r#type: "whatever".into(),
            payload: Some(payload),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn heads_read_the_contract_tags() {
        use pb::execution_event::Payload;
        let delta = encoded(Payload::TextDelta(pb::OutputTextDelta {
            attempt: 1,
            text: "hi ".into(),
        }));
        assert!(matches!(
            EventHead::decode(&delta[..]).unwrap().head,
            Some(Head::TextDelta(_))
        ));
        let done = encoded(Payload::Completed(pb::ExecutionCompleted::default()));
        assert!(matches!(
            EventHead::decode(&done[..]).unwrap().head,
            Some(Head::Completed(_))
        ));
        let failed = encoded(Payload::Failed(pb::ExecutionFailed {
            error: Some(pb::ExecutionError {
                code: "deadline_exceeded".into(),
                message: "late".into(),
                ..Default::default()
            }),
            ..Default::default()
        }));
        let Some(Head::Failed(f)) = EventHead::decode(&failed[..]).unwrap().head else {
            panic!("not a failure");
        };
        assert_eq!(f.error.unwrap().code, "deadline_exceeded");
        let other = encoded(Payload::Progress(pb::ExecutionProgress::default()));
        assert_eq!(EventHead::decode(&other[..]).unwrap().head, None);
    }
}
