//! Events: the append-only record of one execution.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::execution::{
    AttemptRecord, ExecutionError, ExecutionId, ExecutionResult, ExecutionState, Output,
    RoutingPlan, UsageFact,
};

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
    AttemptFailed(Box<AttemptRecord>),
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
    Completed(Box<ExecutionResult>),
    /// `execution.failed`; code `cancelled` means the state is CANCELLED.
    Failed(Box<ExecutionFailure>),
}

// The three once-per-execution payloads above are boxed: unboxed, the largest made every
// event 216 bytes, copied on its way from provider to store and kept for retention. The
// events that stream by the thousand stay inline.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Event>() <= 136);

/// What `execution.failed` says.
#[derive(Debug, Clone, PartialEq)]
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

/// An event as a store holds it: shared by the store and every reader, cheap to clone.
/// Events appended together share one allocation, so a burst of output costs one, not one
/// per event, and frees as one when the execution leaves the store.
#[derive(Clone)]
pub struct StoredEvent {
    batch: Arc<[Event]>,
    index: usize,
}

impl StoredEvent {
    /// One event on its own.
    pub fn new(event: Event) -> Self {
        Self {
            batch: Arc::from([event]),
            index: 0,
        }
    }

    /// The event at `index` of events appended together, which share one allocation.
    ///
    /// # Panics
    /// If `index` is not below `batch.len()`.
    pub fn in_batch(batch: Arc<[Event]>, index: usize) -> Self {
        assert!(
            index < batch.len(),
            "event {index} of a batch of {}",
            batch.len()
        );
        Self { batch, index }
    }
}

impl std::ops::Deref for StoredEvent {
    type Target = Event;

    fn deref(&self) -> &Event {
        &self.batch[self.index]
    }
}

impl std::fmt::Debug for StoredEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Event::fmt(self, f)
    }
}

impl PartialEq for StoredEvent {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::{ExecutionId, ExecutionState};

    fn text(sequence: u64, text: &str) -> Event {
        Event {
            execution_id: ExecutionId::new(),
            sequence,
            time: SystemTime::UNIX_EPOCH,
            state: ExecutionState::Running,
            payload: EventPayload::TextDelta {
                attempt: 1,
                text: text.into(),
            },
        }
    }

    #[test]
    fn a_batch_shares_one_allocation_and_each_event_reads_as_itself() {
        let batch: Arc<[Event]> = Arc::from([text(4, "a"), text(5, "b")]);
        let stored: Vec<StoredEvent> = (0..2)
            .map(|i| StoredEvent::in_batch(batch.clone(), i))
            .collect();
        let sequences: Vec<u64> = stored.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, [4, 5]);
        assert!(Arc::ptr_eq(&stored[0].batch, &stored[1].batch));
        assert_eq!(StoredEvent::new(text(4, "a")).payload, stored[0].payload);
    }
}
