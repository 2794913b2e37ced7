//! The domain of one execution, and the leaf of the crate: it imports nothing else of it.
//! Ids, the request, the event log and its state machine, the materialized view, outcomes and
//! their codes, routing plans and usage facts as events record them, and the protocol rules
//! that are about these types alone: what commits output ([`commit`]) and when two keyed
//! submissions are the same request ([`idempotency`]).

mod code;
pub mod commit;
mod event;
#[cfg(any(test, feature = "conformance"))]
pub mod fixtures;
mod id;
pub mod idempotency;
mod interrupted;
mod outcome;
mod plan;
mod request;
mod state;
mod trace;
pub mod usage;
mod view;

pub use code::{AttemptCode, ErrorCode};
pub use commit::CommitTracker;
pub use event::{
    Acceptance, AttemptStart, EffectiveLimits, Event, EventPayload, ExecutionFailure,
    ReasoningPiece, Text, ToolCallStart,
};
pub use id::{ExecutionId, IdHasher, IdMap, MalformedId};
pub use idempotency::{Fingerprint, Idempotency};
pub use interrupted::{Interruption, interrupted};
pub use outcome::{
    AttemptError, AttemptRecord, ErrorClass, ExecutionError, ExecutionResult, FinishReason,
    NextAction, Outcome, Output, Reasoning,
};
pub use plan::{PlanTarget, RoutingPlan};
pub use request::{
    ContentPart, ExecuteRequest, ExecutionInput, GenerationParameters, Image, Labels, Message,
    ResponseFormat, ResponseFormatKind, Role, ToolCall, ToolDefinition,
};
pub use state::{ExecutionState, IllegalTransition, Lifecycle};
pub use trace::{MAX_TRACESTATE, TRACEPARENT, TRACESTATE, TraceContext};
pub use usage::{UsageFact, UsageQuantity, UsageSource, UsageUnit};
pub use view::Execution;
