//! The execution state machine of the draft. Every event goes through [`Lifecycle::apply`],
//! the one transition function; a move the diagram does not draw is an error, never a state.
//!
//! ```text
//! [*] -> ACCEPTED -> ROUTING -> RUNNING -> SUCCEEDED
//!                    ROUTING -> ROUTING            (retryable attempt failed before a target ran)
//!                    RUNNING -> ROUTING            (retryable failure before output)
//! ACCEPTED | ROUTING | RUNNING -> CANCELLED
//!            ROUTING | RUNNING -> FAILED
//! ```
//!
//! Besides the state, two facts decide what may come next: whether the running attempt has
//! committed output (then it may not return to routing), and whether a failed attempt said
//! the execution stops (then only its terminal failure may follow, with usage and progress
//! as evidence: no output, no new attempt, no success).

use crate::execution::commit::after_failure;
use crate::execution::{ErrorCode, EventPayload, NextAction};

/// The lifecycle state of an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionState {
    /// Stored, not yet routed.
    Accepted,
    /// Choosing a target, waiting for admission, or between attempts.
    Routing,
    /// An attempt is running.
    Running,
    /// Terminal: completed.
    Succeeded,
    /// Terminal: failed.
    Failed,
    /// Terminal: cancelled.
    Cancelled,
}

impl ExecutionState {
    /// Whether no event may follow.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Routing => "routing",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// An event the state machine does not allow here: always a bug in the writer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition: `{event}` in state {from:?}")]
pub struct IllegalTransition {
    /// The state before the event (`None` before the first event).
    pub from: Option<ExecutionState>,
    /// The event type.
    pub event: &'static str,
}

/// The state of one execution plus the one fact its transitions depend on: whether output has
/// been committed. `None` state means no event yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lifecycle {
    state: Option<ExecutionState>,
    output_committed: bool,
    /// A failed attempt's next action was to stop.
    stopping: bool,
}

impl Lifecycle {
    /// A lifecycle as a store kept it: its state and its two facts ([`parts`](Self::parts)).
    #[cfg(feature = "postgres")]
    pub(crate) fn from_parts(
        state: ExecutionState,
        output_committed: bool,
        stopping: bool,
    ) -> Self {
        Self {
            state: Some(state),
            output_committed,
            stopping,
        }
    }

    /// What a store keeps of it: whether output is committed, and whether the execution is
    /// stopping.
    #[cfg(feature = "postgres")]
    pub(crate) fn parts(&self) -> (bool, bool) {
        (self.output_committed, self.stopping)
    }

    /// The state after the last applied event.
    pub(crate) fn state(&self) -> Option<ExecutionState> {
        self.state
    }

    /// The transition function: checks `event` against the diagram and moves to the state
    /// after it. On error nothing changes.
    pub(crate) fn apply(
        &mut self,
        event: &EventPayload,
    ) -> Result<ExecutionState, IllegalTransition> {
        use ExecutionState::{Accepted, Cancelled, Failed, Routing, Running, Succeeded};
        let illegal = || IllegalTransition {
            from: self.state,
            event: event.type_name(),
        };
        let Some(from) = self.state else {
            return match event {
                EventPayload::Accepted { .. } => {
                    self.state = Some(Accepted);
                    Ok(Accepted)
                }
                _ => Err(illegal()),
            };
        };
        if self.stopping
            && !matches!(
                event,
                EventPayload::Failed(_) | EventPayload::Usage(_) | EventPayload::Progress { .. }
            )
        {
            return Err(illegal());
        }
        let to = match (from, event) {
            (Accepted, EventPayload::Routing(_)) => Routing,
            (Routing, EventPayload::AttemptStarted { .. }) => Running,
            // A failed attempt either returns to routing (another attempt follows) or leaves the
            // state as it is for the terminal event that follows. Returning to routing after
            // output was committed is exactly what the commit rule forbids.
            (Routing | Running, EventPayload::AttemptFailed(record)) => match record.next_action {
                Some(next) if next.continues() => {
                    after_failure(self.output_committed || record.output_committed)
                        .map_err(|_| illegal())?;
                    Routing
                }
                Some(_) => from,
                None => return Err(illegal()),
            },
            // Output deltas belong to a running attempt; an empty one commits nothing.
            (Running, e) if e.is_output() => Running,
            // Reasoning belongs to a running attempt and commits nothing.
            (Running, EventPayload::ReasoningDelta { .. }) => Running,
            (Routing | Running, EventPayload::Progress { .. } | EventPayload::Usage(_)) => from,
            (Running, EventPayload::Completed(_)) => Succeeded,
            (Accepted | Routing | Running, EventPayload::Failed(failure))
                if failure.error.code == ErrorCode::Cancelled =>
            {
                Cancelled
            }
            (Routing | Running, EventPayload::Failed(_)) => Failed,
            _ => return Err(illegal()),
        };
        if let EventPayload::AttemptFailed(record) = event
            && !record.next_action.is_some_and(NextAction::continues)
        {
            self.stopping = true;
        }
        if event.commits_output() {
            self.output_committed = true;
        } else if to == Routing {
            // A new attempt starts with nothing committed (only reachable when nothing was).
            self.output_committed = false;
        }
        self.state = Some(to);
        Ok(to)
    }
}

#[cfg(test)]
mod tests;
