//! The attempt budget: how many attempts, until when, and what to do after a failure.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::{OnRejected, PolicyConfig};
use crate::execution::commit::after_failure;
use crate::execution::{AttemptError, EffectiveLimits, ErrorClass, ErrorCode, NextAction};

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
    /// No attempt starts (or leaves the admission queue) with less of the retry budget left
    /// than this.
    pub min_attempt_time: Duration,
    /// Whether a target's `rejected` error ends the execution instead of falling back.
    pub stop_on_rejected: bool,
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
    /// The budget of an execution accepted at `start` with `limits` under `policy`, whose
    /// deadline is `time_left` away: the retry budget runs from acceptance.
    pub fn new(
        limits: &EffectiveLimits,
        policy: &PolicyConfig,
        start: Instant,
        time_left: Duration,
    ) -> Self {
        Self {
            max_attempts: limits.max_attempts,
            allow_fallback: limits.allow_fallback,
            retries_per_target: policy.retries_per_target,
            backoff: policy.backoff,
            min_attempt_time: policy.min_attempt_time,
            stop_on_rejected: policy.on_rejected == OnRejected::Stop,
            budget_end: start + policy.retry_budget,
            deadline: start + time_left,
        }
    }

    /// When trying must stop (an admission-queue wait, a retry wait): the earlier of budget
    /// end and deadline, with the code that names which one.
    pub fn stop_at(&self) -> (Instant, ErrorCode) {
        if self.deadline <= self.budget_end {
            (self.deadline, ErrorCode::DeadlineExceeded)
        } else {
            (self.budget_end, ErrorCode::RetryBudgetExhausted)
        }
    }

    /// When an attempt already sent to its provider must stop: the retry budget bounds
    /// trying, not an attempt in flight (a reasoning model may think for minutes before its
    /// first text), so only the deadline is left, beside the adapter's own timeouts.
    pub fn once_sent(&self) -> (Instant, ErrorCode) {
        (self.deadline, ErrorCode::DeadlineExceeded)
    }

    /// The latest an attempt may start (or leave the admission queue): `min_attempt_time`
    /// before the budget's end, or the deadline if that comes first, with the code that
    /// names which one.
    pub fn start_by(&self) -> (Instant, ErrorCode) {
        let budget = self
            .budget_end
            .checked_sub(self.min_attempt_time)
            .unwrap_or(self.budget_end);
        if self.deadline <= budget {
            (self.deadline, ErrorCode::DeadlineExceeded)
        } else {
            (budget, ErrorCode::RetryBudgetExhausted)
        }
    }

    /// Decides what follows a failed attempt, at time `now`, from the error's class.
    ///
    /// A `retryable` target is tried again while the policy's `retries_per_target` allows,
    /// after an exponential backoff or the provider's Retry-After, whichever is longer; with
    /// no later target, a Retry-After is honoured even when the policy allows no retries,
    /// waiting at least the backoff. A `rejected` target is never tried again: the next one
    /// is, unless the policy stops on rejection. `invalid` stops, and so does
    /// `outcome_unknown` unless the provider may repeat such a request. Any new attempt must
    /// be able to start with `min_attempt_time` of the budget left, after its wait.
    pub fn decide(&self, failure: Failure<'_>, now: Instant) -> Decision {
        if let Err(code) = after_failure(failure.committed) {
            return Decision::Stop(code);
        }
        let same_target_may_serve = match failure.error.class {
            ErrorClass::Retryable => true,
            ErrorClass::OutcomeUnknown if failure.retry_unknown_outcome => true,
            ErrorClass::OutcomeUnknown => return Decision::Stop(ErrorCode::OutcomeUnknown),
            ErrorClass::Invalid => return Decision::Stop(ErrorCode::InvalidRequest),
            ErrorClass::Rejected if self.stop_on_rejected => {
                return Decision::Stop(ErrorCode::Rejected);
            }
            ErrorClass::Rejected => false,
        };
        // A rejection with no other target to try is the answer, whatever time is left.
        if !same_target_may_serve && (!failure.has_next_target || !self.allow_fallback) {
            return Decision::Stop(ErrorCode::Rejected);
        }
        // What ends the execution when nothing else may be tried.
        let nothing_left = if same_target_may_serve {
            ErrorCode::AttemptsExhausted
        } else {
            ErrorCode::Rejected
        };
        let (start_by, time_code) = self.start_by();
        if now >= start_by {
            return Decision::Stop(time_code);
        }
        if failure.attempts >= self.max_attempts {
            return Decision::Stop(ErrorCode::AttemptsExhausted);
        }
        if !self.allow_fallback {
            return Decision::Stop(nothing_left);
        }
        let exponent = failure.on_target.saturating_sub(1).min(16);
        let backoff = self.backoff.saturating_mul(1 << exponent);
        let retry_after = failure.error.retry_after;
        let same_target_wait = if !same_target_may_serve || !failure.admitted {
            // A full queue says nothing about when a permit frees up: move on at once.
            None
        } else if failure.on_target <= self.retries_per_target {
            Some(backoff.max(retry_after.unwrap_or_default()))
        } else if !failure.has_next_target {
            // A Retry-After of zero (or a date past) still waits the backoff.
            retry_after.map(|wait| wait.max(backoff))
        } else {
            None
        };
        match same_target_wait {
            // `checked_`: a wait too long for the clock (a provider's absurd Retry-After)
            // does not fit, it must not panic.
            Some(wait) if now.checked_add(wait).is_some_and(|at| at < start_by) => {
                Decision::Retry { after: wait }
            }
            _ if failure.has_next_target => Decision::Fallback,
            // The wait that was due does not fit: time, not attempts, ran out.
            Some(_) => Decision::Stop(time_code),
            None => Decision::Stop(nothing_left),
        }
    }
}

#[cfg(test)]
mod tests;
