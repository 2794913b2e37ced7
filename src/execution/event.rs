//! Events: the append-only record of one execution.
//!
//! An event is kept small, because a store keeps every one of them: the execution's id and
//! the time are the record's and the batch's, not repeated per event where avoidable, the
//! payloads that come once per attempt or execution sit behind an `Arc` (shared, not copied,
//! by every reader), and text is a [`Text`]: up to 23 bytes inline, so a streamed delta costs
//! no heap allocation of its own.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::execution::{
    AttemptRecord, Delivery, ExecutionError, ExecutionResult, ExecutionState, Output, Priority,
    RoutingPlan, UsageFact,
};

/// Event text: up to 23 bytes inline, longer text in one shared allocation; cloning never
/// copies the text.
pub type Text = smol_str::SmolStr;

/// One stored event. The store assigns `sequence`, `time` and `state` when it appends; the
/// execution it belongs to is the stream's or the record's, not repeated here.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// 1, 2, 3, ... with no gaps.
    pub sequence: u64,
    /// When it was appended.
    pub time: SystemTime,
    /// The execution's state after it.
    pub state: ExecutionState,
    /// What happened.
    pub payload: EventPayload,
}

impl Event {
    /// Whether this is the execution's last event.
    pub fn is_terminal(&self) -> bool {
        self.payload.is_terminal()
    }
}

/// The limits in effect for one execution, after defaults and caps.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EffectiveLimits {
    /// Absolute deadline.
    pub deadline: SystemTime,
    /// `min(request, policy)`.
    pub max_attempts: u32,
    /// Whether a second target may be tried.
    pub allow_fallback: bool,
    /// Wall-clock budget for all attempts and backoff waits.
    pub retry_budget: Duration,
    /// How output reaches the caller. Absent from records written before it existed, which
    /// all streamed.
    #[serde(default, skip_serializing_if = "Delivery::is_streamed")]
    pub delivery: Delivery,
    /// The admission class. Absent from records written before it existed (all standard).
    #[serde(default, skip_serializing_if = "Priority::is_standard")]
    pub priority: Priority,
}

/// What `execution.accepted` says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Acceptance {
    /// The ability requested.
    pub ability: Arc<str>,
    /// The policy in effect.
    pub policy: Arc<str>,
    /// The limits in effect.
    pub limits: EffectiveLimits,
}

/// What `route.attempt.started` says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttemptStart {
    /// Attempt number.
    pub attempt: u32,
    /// Provider name.
    pub provider: Arc<str>,
    /// Provider model.
    pub model: Arc<str>,
    /// When admission was requested.
    pub started_at: SystemTime,
}

/// What `output.tool_call.started` says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCallStart {
    /// Attempt number.
    pub attempt: u32,
    /// Position within the reply.
    pub index: u32,
    /// Provider's call id.
    pub id: String,
    /// Tool name.
    pub name: String,
}

/// What an event says.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum EventPayload {
    /// `execution.accepted`.
    Accepted(Arc<Acceptance>),
    /// `execution.routing`.
    Routing(Arc<RoutingPlan>),
    /// `route.attempt.started`.
    AttemptStarted(Arc<AttemptStart>),
    /// `route.attempt.failed`.
    AttemptFailed(Arc<AttemptRecord>),
    /// `output.text.delta`.
    TextDelta {
        /// Attempt number.
        attempt: u32,
        /// The text.
        text: Text,
    },
    /// `output.tool_call.started`.
    ToolCallStarted(Arc<ToolCallStart>),
    /// `output.tool_call.arguments.delta`.
    ToolCallArgumentsDelta {
        /// Attempt number.
        attempt: u32,
        /// Position within the reply.
        index: u32,
        /// Piece of the arguments' JSON.
        delta: Text,
    },
    /// `output.reasoning.delta`: reasoning does not commit output.
    ReasoningDelta {
        /// Attempt number.
        attempt: u32,
        /// Which part of a reasoning block `text` is.
        piece: ReasoningPiece,
        /// A piece of reasoning text, a block's signature, or a redacted block's data.
        text: Text,
    },
    /// `execution.progress`.
    Progress {
        /// Attempt number, 0 for none.
        attempt: u32,
        /// Short note.
        message: Text,
    },
    /// `usage.reported`.
    Usage(Arc<UsageFact>),
    /// `execution.completed`.
    Completed(Arc<ExecutionResult>),
    /// `execution.failed`; code `cancelled` means the state is CANCELLED.
    Failed(Arc<ExecutionFailure>),
}

// The events that stream by the thousand (deltas) are what a store holds most of, and what
// every reader copies: kept at most this size (the memory store keeps them in 56 bytes, their
// sequence and time packed), a 100 000-delta reply costs well under 100 bytes per delta beyond
// text longer than 23 bytes.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Event>() <= 72);

/// What an `output.reasoning.delta` carries: reasoning text, the signature that closes a
/// block of it, or a whole block the provider redacted (opaque data, not for display).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReasoningPiece {
    /// A piece of reasoning text.
    Text,
    /// The provider's signature of the block the text so far belongs to.
    Signature,
    /// A redacted block's opaque data.
    Redacted,
}

/// What `execution.failed` says.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExecutionFailure {
    /// Why.
    pub error: ExecutionError,
    /// Output streamed before the failure: evidence only.
    pub partial_output: Output,
    /// A cancelling caller's reason.
    pub cancel_reason: Option<String>,
}

impl EventPayload {
    /// The event type as the wire names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Accepted { .. } => "execution.accepted",
            Self::Routing(_) => "execution.routing",
            Self::AttemptStarted { .. } => "route.attempt.started",
            Self::AttemptFailed(_) => "route.attempt.failed",
            Self::TextDelta { .. } => "output.text.delta",
            Self::ToolCallStarted { .. } => "output.tool_call.started",
            Self::ToolCallArgumentsDelta { .. } => "output.tool_call.arguments.delta",
            Self::ReasoningDelta { .. } => "output.reasoning.delta",
            Self::Progress { .. } => "execution.progress",
            Self::Usage(_) => "usage.reported",
            Self::Completed(_) => "execution.completed",
            Self::Failed(_) => "execution.failed",
        }
    }

    /// Whether the event ends the execution.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed(_) | Self::Failed(_))
    }
}
