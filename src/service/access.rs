//! The access log (`server.access_log`): one `info` line per `ModelRuntime` call, at its end,
//! under the target `model_runtime::access`: the method, the execution, the gRPC status, how
//! long the call took and, where the call saw them, the tokens its execution used. A stream
//! (`Execute`, `Watch`) is logged when it ends, or when its client goes away, with the state
//! it last showed. Off, it costs one branch per call.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::time::Instant;
use tonic::Status;

use super::{WireEvent, WireEvents};
use crate::execution::{EventPayload, Execution, ExecutionState, UsageUnit};

/// The target of the access log's lines.
pub(crate) const TARGET: &str = "model_runtime::access";

/// Input and output tokens, as the usage facts say.
#[derive(Debug, Default, Clone, Copy)]
struct Tokens {
    input: u64,
    output: u64,
}

impl Tokens {
    fn add(&mut self, unit: &UsageUnit, quantity: u64) {
        if *unit == UsageUnit::INPUT_TOKENS {
            self.input += quantity;
        } else if *unit == UsageUnit::OUTPUT_TOKENS {
            self.output += quantity;
        }
    }

    fn of(view: &Execution) -> Self {
        let mut tokens = Self::default();
        for fact in &view.usage {
            tokens.add(&fact.unit, fact.quantity);
        }
        tokens
    }
}

/// The line of a unary call: its answer, the execution it names (if any) and its tokens.
pub(crate) fn unary<T>(
    method: &'static str,
    start: Instant,
    answer: &Result<T, Status>,
    execution: Option<&Execution>,
) {
    let status = match answer {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    };
    let tokens = execution.map(Tokens::of).unwrap_or_default();
    tracing::info!(
        target: TARGET,
        method,
        execution_id = execution.map(|e| e.id.to_text()).unwrap_or_default(),
        status = ?status,
        state = execution.map(|e| e.state.as_str()).unwrap_or_default(),
        duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        input_tokens = tokens.input,
        output_tokens = tokens.output,
        "access"
    );
}

/// `events`, logged when the stream ends or is dropped.
pub(crate) fn stream(
    method: &'static str,
    start: Instant,
    id: Arc<str>,
    events: WireEvents,
) -> WireEvents {
    Box::pin(Logged {
        events,
        method,
        start,
        id,
        state: None,
        events_seen: 0,
        tokens: Tokens::default(),
        status: tonic::Code::Ok,
    })
}

struct Logged {
    events: WireEvents,
    method: &'static str,
    start: Instant,
    id: Arc<str>,
    state: Option<ExecutionState>,
    events_seen: u64,
    tokens: Tokens,
    status: tonic::Code,
}

impl Stream for Logged {
    type Item = Result<WireEvent, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.events.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(event))) => {
                let event = event.event();
                self.events_seen += 1;
                self.state = Some(event.state);
                if let EventPayload::Usage(fact) = &event.payload {
                    self.tokens.add(&fact.unit, fact.quantity);
                }
            }
            Poll::Ready(Some(Err(status))) => self.status = status.code(),
            _ => {}
        }
        polled
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        tracing::info!(
            target: TARGET,
            method = self.method,
            execution_id = &*self.id,
            status = ?self.status,
            state = self.state.map(ExecutionState::as_str).unwrap_or_default(),
            events = self.events_seen,
            ended = self.state.is_some_and(ExecutionState::is_terminal),
            duration_ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX),
            input_tokens = self.tokens.input,
            output_tokens = self.tokens.output,
            "access"
        );
    }
}
