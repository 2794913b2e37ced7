//! One execution: its id, request, state machine, events, materialized view and the driver
//! that runs it.

mod commit;
pub(crate) mod driver;
mod event;
mod id;
mod outcome;
mod request;
mod state;
pub(crate) mod validate;
mod view;

pub use commit::CommitTracker;
pub use event::{EffectiveLimits, Event, EventPayload, ExecutionFailure, StoredEvent};
pub use id::{ExecutionId, IdHasher, IdMap, MalformedId};
pub use outcome::{
    AttemptError, AttemptRecord, ErrorClass, ErrorCode, ExecutionError, ExecutionResult,
    FinishReason, NextAction, Outcome, Output,
};
pub use request::{
    ContentPart, ExecuteRequest, ExecutionInput, Fingerprint, GenerationParameters, Image, Labels,
    Message, ResponseFormat, ResponseFormatKind, Role, ToolCall, ToolDefinition,
};
pub use state::{ExecutionState, IllegalTransition, Lifecycle};
pub use view::Execution;
