//! The attempt budget: how many attempts, until when, and what to do after a failure.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::{OnContentFilter, OnRejected, OnUnknownOutcome, PolicyConfig};
use crate::execution::commit::after_failure;
use crate::execution::{
    AttemptCode, AttemptError, EffectiveLimits, ErrorClass, ErrorCode, NextAction,
};

/// The limits one execution's attempts run under.
#[derive(Debug, Clone)]
pub struct AttemptBudget {
    /// `min(request, policy)` attempts in total.
    pub max_attempts: u32,
    /// Whether a second target may be tried; false means exactly one attempt.
    pub allow_fallback: bool,
    /// Extra attempts on one target before moving on.
    pub retries_per_target: u32,
    /// The first back-off window before retrying one target; doubles each time. The wait
    /// is drawn at random within the window's second half (equal jitter).
    pub backoff: Duration,
    /// No attempt starts (or leaves the admission queue) with less of the retry budget left
    /// than this.
    pub min_attempt_time: Duration,
    /// Whether a target's `rejected` error ends the execution instead of falling back.
    pub stop_on_rejected: bool,
    /// Whether a target's refusal on a content or safety policy ends the execution instead
    /// of falling back.
    pub stop_on_content_filter: bool,
    /// What an attempt whose outcome is unknown leads to under the policy; `None`, what the
    /// attempt's provider says.
    pub on_unknown_outcome: Option<OnUnknownOutcome>,
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
    /// What the attempt's provider says an unknown outcome leads to.
    pub on_unknown_outcome: OnUnknownOutcome,
    /// A uniformly random draw that places a retry's wait within the second half of its
    /// backoff window (0 its middle, `u64::MAX` its end).
    pub jitter: u64,
    /// What the last failure a provider gave this execution ends it with when nothing else
    /// may be tried ([`AttemptBudget::ends_with`]): a refusal by health or admission, which
    /// is not the provider's answer, ends the execution with it.
    pub last_real: Option<ErrorCode>,
}

impl Failure<'_> {
    /// Whether the target was never asked: health had it ejected, or its admission queue
    /// was full. That is not the provider's answer, and never stops routing on its own.
    pub fn refused(&self) -> bool {
        !self.admitted
            && matches!(
                self.error.code,
                AttemptCode::TargetEjected | AttemptCode::AdmissionRejected
            )
    }
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
            stop_on_content_filter: policy.on_content_filter == OnContentFilter::Stop,
            on_unknown_outcome: policy.on_unknown_outcome,
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
    /// after a backoff drawn within an exponential window (equal jitter) or the provider's
    /// Retry-After, whichever is longer; with no later target, a Retry-After is honoured even
    /// when the policy allows no retries, waiting at least the backoff. A `rejected` target
    /// is never tried again: the next one is, unless the policy stops on rejection; a
    /// refusal on a content policy stops unless the policy falls back on it.
    /// `invalid` stops. `outcome_unknown` stops, is retried on its target as `retryable` is,
    /// or moves on to the next target as `rejected` does, as the policy (or else the
    /// provider) says. Any new attempt must be able to start with `min_attempt_time` of the
    /// budget left, after its wait.
    pub fn decide(&self, failure: Failure<'_>, now: Instant) -> Decision {
        if let Err(code) = after_failure(failure.committed) {
            return Decision::Stop(code);
        }
        if failure.refused() {
            return self.after_refusal(&failure, now);
        }
        let unknown = self
            .on_unknown_outcome
            .unwrap_or(failure.on_unknown_outcome);
        let nothing_left = ends_with(failure.error, unknown);
        // Whether this target may be tried again, or the execution stops here.
        let same_target_may_serve = match failure.error.class {
            ErrorClass::Retryable | ErrorClass::Interrupted => true,
            ErrorClass::OutcomeUnknown => match unknown {
                OnUnknownOutcome::Stop => return Decision::Stop(nothing_left),
                OnUnknownOutcome::Retry => true,
                OnUnknownOutcome::Fallback => false,
            },
            ErrorClass::Invalid => return Decision::Stop(nothing_left),
            ErrorClass::Rejected
                if failure.error.code == AttemptCode::ContentFiltered
                    && self.stop_on_content_filter =>
            {
                return Decision::Stop(nothing_left);
            }
            ErrorClass::Rejected
                if failure.error.code != AttemptCode::ContentFiltered && self.stop_on_rejected =>
            {
                return Decision::Stop(nothing_left);
            }
            ErrorClass::Rejected => false,
        };
        // A target that may not be tried again, with no other to try: its error is the
        // answer, whatever time is left.
        if !same_target_may_serve && (!failure.has_next_target || !self.allow_fallback) {
            return Decision::Stop(nothing_left);
        }
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
        let backoff = jittered(self.backoff.saturating_mul(1 << exponent), failure.jitter);
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

impl AttemptBudget {
    /// What the execution ends with when `failure` (the provider was never asked) leaves
    /// nothing else to try; else the next target. Health and admission refusals never stop
    /// routing themselves: the execution ends with its last real failure's code.
    fn after_refusal(&self, failure: &Failure<'_>, now: Instant) -> Decision {
        let nothing_left = failure.last_real.unwrap_or(ErrorCode::AttemptsExhausted);
        if !failure.has_next_target || !self.allow_fallback {
            return Decision::Stop(nothing_left);
        }
        let (start_by, time_code) = self.start_by();
        if now >= start_by {
            return Decision::Stop(time_code);
        }
        if failure.attempts >= self.max_attempts {
            return Decision::Stop(nothing_left);
        }
        Decision::Fallback
    }

    /// What an execution ends with when `error` was its last failure and nothing else may be
    /// tried, under `on_unknown_outcome` (the policy's, else the provider's).
    pub fn ends_with(&self, error: &AttemptError, provider_unknown: OnUnknownOutcome) -> ErrorCode {
        ends_with(error, self.on_unknown_outcome.unwrap_or(provider_unknown))
    }
}

/// [`AttemptBudget::ends_with`], the mode decided.
fn ends_with(error: &AttemptError, unknown: OnUnknownOutcome) -> ErrorCode {
    match error.class {
        ErrorClass::Retryable | ErrorClass::Interrupted => ErrorCode::AttemptsExhausted,
        ErrorClass::OutcomeUnknown => match unknown {
            OnUnknownOutcome::Retry => ErrorCode::AttemptsExhausted,
            OnUnknownOutcome::Stop | OnUnknownOutcome::Fallback => ErrorCode::OutcomeUnknown,
        },
        ErrorClass::Invalid => ErrorCode::InvalidRequest,
        ErrorClass::Rejected if error.code == AttemptCode::ContentFiltered => {
            ErrorCode::ContentFiltered
        }
        ErrorClass::Rejected => ErrorCode::Rejected,
    }
}

/// A wait drawn within the second half of `window` by `draw` (equal jitter): thousands of
/// executions retrying one provider spread over half the window instead of arriving together,
/// and none retries sooner than half the backoff (full jitter would let a retry follow its
/// failure within milliseconds, which is no backoff at all for that execution).
fn jittered(window: Duration, draw: u64) -> Duration {
    let half = window / 2;
    let nanos = (window - half).as_nanos().saturating_mul(u128::from(draw)) / u128::from(u64::MAX);
    half + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
