//! Events: the append-only record of one execution.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::execution::{
    AttemptRecord, ExecutionError, ExecutionId, ExecutionResult, ExecutionState, Output,
};
use crate::routing::RoutingPlan;
use crate::usage::UsageFact;

/// One stored event. The store assigns `sequence`, `time` and `state` when it appends.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The execution it belongs to.
    pub execution_id: ExecutionId,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveLimits {
    /// Absolute deadline.
    pub deadline: SystemTime,
    /// `min(request, policy)`.
    pub max_attempts: u32,
    /// Whether a second target may be tried.
    pub allow_fallback: bool,
    /// Wall-clock budget for all attempts and backoff waits.
    pub retry_budget: Duration,
}

/// What an event says.
#[derive(Debug, Clone, PartialEq)]
pub enum EventPayload {
    /// `execution.accepted`.
    Accepted {
        /// The ability requested.
        ability: Arc<str>,
        /// The policy in effect.
        policy: Arc<str>,
        /// The limits in effect.
        limits: EffectiveLimits,
    },
    /// `execution.routing`.
    Routing(Arc<RoutingPlan>),
    /// `route.attempt.started`.
    AttemptStarted {
        /// Attempt number.
        attempt: u32,
        /// Provider name.
        provider: Arc<str>,
        /// Provider model.
        model: Arc<str>,
        /// When admission was requested.
        started_at: SystemTime,
    },
    /// `route.attempt.failed`.
    AttemptFailed(AttemptRecord),
    /// `output.text.delta`.
    TextDelta {
        /// Attempt number.
        attempt: u32,
        /// The text.
        text: String,
    },
    /// `output.tool_call.started`.
    ToolCallStarted {
        /// Attempt number.
        attempt: u32,
        /// Position within the reply.
        index: u32,
        /// Provider's call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// `output.tool_call.arguments.delta`.
    ToolCallArgumentsDelta {
        /// Attempt number.
        attempt: u32,
        /// Position within the reply.
        index: u32,
        /// Piece of the arguments' JSON.
        delta: String,
    },
    /// `execution.progress`.
    Progress {
        /// Attempt number, 0 for none.
        attempt: u32,
        /// Short note.
        message: String,
    },
    /// `usage.reported`.
    Usage(UsageFact),
    /// `execution.completed`.
    Completed(ExecutionResult),
    /// `execution.failed`; code `cancelled` means the state is CANCELLED.
    Failed {
        /// Why.
        error: ExecutionError,
        /// Output streamed before the failure: evidence only.
        partial_output: Output,
        /// A cancelling caller's reason.
        cancel_reason: Option<String>,
    },
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
            Self::Progress { .. } => "execution.progress",
            Self::Usage(_) => "usage.reported",
            Self::Completed(_) => "execution.completed",
            Self::Failed { .. } => "execution.failed",
        }
    }

    /// Whether the event ends the execution.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed(_) | Self::Failed { .. })
    }

    /// Whether the event exposes output to the caller (the commit point).
    pub fn commits_output(&self) -> bool {
        matches!(
            self,
            Self::TextDelta { .. }
                | Self::ToolCallStarted { .. }
                | Self::ToolCallArgumentsDelta { .. }
        )
    }
}
