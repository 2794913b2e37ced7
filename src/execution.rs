//! The domain of one execution, and the leaf of the crate: it imports nothing else of it.
//! Ids, the request, the event log and its state machine, the materialized view, outcomes and
//! their codes, routing plans and usage facts as events record them, and the protocol rules
//! that are about these types alone: what commits output (`commit.rs`) and when two keyed
//! submissions are the same request (`idempotency.rs`).

mod code;
pub(crate) mod commit;
mod event;
#[cfg(any(test, feature = "conformance"))]
pub mod fixtures;
mod id;
pub(crate) mod idempotency;
mod interrupted;
mod outcome;
mod plan;
mod request;
mod state;
mod trace;
mod usage;
mod view;

pub use code::{AttemptCode, ErrorCode};
pub(crate) use commit::CommitTracker;
pub use event::{
    Acceptance, AttemptStart, EffectiveLimits, Event, EventPayload, ExecutionFailure,
    ReasoningPiece, Text, ToolCallStart,
};
#[cfg(feature = "postgres")]
pub(crate) use id::FoldHasher;
pub use id::{ExecutionId, MalformedId};
pub(crate) use id::{IdMap, NameMap};
pub use idempotency::{Fingerprint, Idempotency};
pub(crate) use interrupted::{Interruption, interrupted, outcome_of};
pub use outcome::{
    AttemptError, AttemptRecord, ErrorClass, ExecutionError, ExecutionResult, FinishReason,
    NextAction, Outcome, Output, Reasoning,
};
pub use plan::{Ejection, PlanTarget, RoutingPlan};
pub use request::{
    ContentPart, Delivery, ExecuteRequest, ExecutionInput, GenerationParameters, Image, Labels,
    Message, Priority, ResponseFormat, ResponseFormatKind, Role, ToolCall, ToolDefinition,
};
pub(crate) use state::Lifecycle;
pub use state::{ExecutionState, IllegalTransition};
pub use trace::TraceContext;
pub(crate) use trace::{TRACEPARENT, TRACESTATE};
pub use usage::{UsageFact, UsageQuantity, UsageSource, UsageUnit};
pub use view::Execution;
