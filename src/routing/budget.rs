//! The attempt budget: how many attempts, until when, and what to do after a failure.

use std::time::Duration;

use tokio::time::Instant;

use crate::execution::commit::after_failure;
use crate::execution::{AttemptError, ErrorClass, ErrorCode, NextAction};

/// The limits one execution's attempts run under.
#[derive(Debug, Clone)]
pub struct AttemptBudget {
    /// `min(request, policy)` attempts in total.
    pub max_attempts: u32,
    /// Whether a second target may be tried; false means exactly one attempt.
    pub allow_fallback: bool,
    /// Extra attempts on one target before moving on.
    pub retries_per_target: u32,
    /// First back-off before retrying one target; doubles each time.
    pub backoff: Duration,
    /// When the policy's wall-clock retry budget runs out.
    pub budget_end: Instant,
    /// The execution's deadline.
    pub deadline: Instant,
}

/// What the router does after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Try the same target again after waiting.
    Retry {
        /// The wait.
        after: Duration,
    },
    /// Try the next target now.
    Fallback,
    /// End the execution with this code.
    Stop(ErrorCode),
}

impl Decision {
    /// The evidence form.
    pub fn next_action(self) -> NextAction {
        match self {
            Self::Retry { .. } => NextAction::RetrySameTarget,
            Self::Fallback => NextAction::Fallback,
            Self::Stop(_) => NextAction::Stop,
        }
    }
}

/// What the failed attempt looked like.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    /// The error.
    pub error: &'a AttemptError,
    /// Whether output was committed.
    pub committed: bool,
    /// Attempts made so far, this one included.
    pub attempts: u32,
    /// Admitted attempts on this target so far, this one included.
    pub on_target: u32,
    /// Whether the attempt got past admission (a rejected one never retries its target).
    pub admitted: bool,
    /// Whether a later target remains in the plan.
    pub has_next_target: bool,
    /// Whether the provider may repeat a request whose outcome is unknown.
    pub retry_unknown_outcome: bool,
}

impl AttemptBudget {
    /// When attempts and waits must stop: the earlier of budget end and deadline, with the
    /// code that names which one.
    pub fn stop_at(&self) -> (Instant, ErrorCode) {
        if self.deadline <= self.budget_end {
            (self.deadline, ErrorCode::DeadlineExceeded)
        } else {
            (self.budget_end, ErrorCode::RetryBudgetExhausted)
        }
    }

    /// When an attempt that has committed output must stop: the retry budget bounds trying,
    /// not a reply already streaming, so only the deadline is left.
    pub fn after_commit(&self) -> (Instant, ErrorCode) {
        (self.deadline, ErrorCode::DeadlineExceeded)
    }

    /// Decides what follows a failed attempt, at time `now`.
    ///
    /// The same target is tried again while the policy's `retries_per_target` allows, after
    /// an exponential backoff or the provider's Retry-After, whichever is longer; when that
    /// wait does not fit the time left, the router moves on. With no later target, a
    /// Retry-After that fits is honoured even when the policy allows no retries.
    pub fn decide(&self, failure: Failure<'_>, now: Instant) -> Decision {
        if let Err(code) = after_failure(failure.committed) {
            return Decision::Stop(code);
        }
        match failure.error.class {
            ErrorClass::Retryable => {}
            ErrorClass::NonRetryable => return Decision::Stop(ErrorCode::NonRetryable),
            ErrorClass::OutcomeUnknown if !failure.retry_unknown_outcome => {
                return Decision::Stop(ErrorCode::OutcomeUnknown);
            }
            ErrorClass::OutcomeUnknown => {}
        }
        let (stop_at, stop_code) = self.stop_at();
        if now >= stop_at {
            return Decision::Stop(stop_code);
        }
        if failure.attempts >= self.max_attempts || !self.allow_fallback {
            return Decision::Stop(ErrorCode::AttemptsExhausted);
        }
        let retry_after = failure.error.retry_after;
        let same_target_wait = if !failure.admitted {
            // A full queue says nothing about when a permit frees up: move on at once.
            None
        } else if failure.on_target <= self.retries_per_target {
            let exponent = failure.on_target.saturating_sub(1).min(16);
            let backoff = self.backoff.saturating_mul(1 << exponent);
            Some(backoff.max(retry_after.unwrap_or_default()))
        } else if !failure.has_next_target {
            retry_after
        } else {
            None
        };
        match same_target_wait {
            // `checked_`: a wait too long for the clock (a provider's absurd Retry-After)
            // does not fit, it must not panic.
            Some(wait) if now.checked_add(wait).is_some_and(|at| at < stop_at) => {
                Decision::Retry { after: wait }
            }
            _ if failure.has_next_target => Decision::Fallback,
            // The wait that was due does not fit: time, not attempts, ran out.
            Some(_) => Decision::Stop(stop_code),
            None => Decision::Stop(ErrorCode::AttemptsExhausted),
        }
    }
}

#[cfg(test)]
mod tests;
