//! The "direct provider" baseline: the same calls through a [`Runtime`] in this process, no
//! gRPC. Beside the server figures it separates what the runtime costs from what the
//! transport costs.

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;

use super::args::Rpc;
use super::load::{Caller, Observed, Session};
use model_runtime::execution::{EventPayload, ExecuteRequest};
use model_runtime::runtime::Runtime;
use model_runtime::{RuntimeError, to_status};

/// Calls into one in-process runtime.
pub struct EmbeddedCaller {
    runtime: Runtime,
    request: Arc<ExecuteRequest>,
    rpc: Rpc,
}

impl EmbeddedCaller {
    /// Drives `runtime` with `request`.
    pub fn new(runtime: Runtime, request: ExecuteRequest, rpc: Rpc) -> Self {
        Self {
            runtime,
            request: Arc::new(request),
            rpc,
        }
    }
}

impl Caller for EmbeddedCaller {
    type Session = EmbeddedSession;

    fn session(&self, _worker: usize) -> EmbeddedSession {
        EmbeddedSession {
            runtime: self.runtime.clone(),
            request: self.request.clone(),
            rpc: self.rpc,
        }
    }
}

/// One worker's handle on the runtime.
pub struct EmbeddedSession {
    runtime: Runtime,
    request: Arc<ExecuteRequest>,
    rpc: Rpc,
}

/// The same key a gRPC client would see for this error.
fn error_key(error: RuntimeError) -> String {
    format!("grpc:{:?}", to_status(error).code())
}

impl Session for EmbeddedSession {
    async fn call(&mut self) -> Observed {
        let mut seen = Observed::default();
        let request = (*self.request).clone();
        if self.rpc == Rpc::Submit {
            if let Err(e) = self.runtime.submit(request).await {
                seen.failure = Some(error_key(e));
            }
            return seen;
        }
        let mut events = match self.runtime.execute(request).await {
            Ok(events) => events,
            Err(e) => {
                seen.failure = Some(error_key(e));
                return seen;
            }
        };
        while let Some(item) = events.next().await {
            let event = match item {
                Ok(event) => event,
                Err(e) => {
                    seen.failure = Some(error_key(e));
                    return seen;
                }
            };
            seen.events += 1;
            match &event.payload {
                EventPayload::TextDelta { .. } if seen.first_output.is_none() => {
                    seen.first_output = Some(Instant::now());
                }
                EventPayload::Completed(_) => return seen,
                EventPayload::Failed(failure) => {
                    let code = failure.error.code.as_str();
                    seen.failure = Some(format!("execution.failed:{code}"));
                    return seen;
                }
                _ => {}
            }
        }
        seen.failure = Some("client:no_terminal_event".into());
        seen
    }
}
