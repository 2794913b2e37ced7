//! What the driver knows about the attempts so far, and how it writes that down as
//! evidence: attempt records, the execution's outcome, and its terminal failure (with its
//! message). The runtime writes a cancellation that found no driver, and the driver's last
//! resort after a fault, with the same functions.

use std::sync::Arc;
use std::time::SystemTime;

use crate::execution::{
    AttemptCode, AttemptError, AttemptRecord, ErrorClass, ErrorCode, EventPayload, ExecutionError,
    ExecutionFailure, FinishReason, Outcome, Output, PlanTarget,
};
use crate::provider::ProviderError;
use crate::routing::{Decision, Probe};

/// How one attempt ended.
pub(super) struct AttemptEnd {
    /// When admission was requested.
    pub(super) started_at: SystemTime,
    /// Whether the provider was called.
    pub(super) admitted: bool,
    /// Whether the call's request may have reached the provider: an admitted call cut while
    /// it awaited its credentials sent nothing (`CallStream::sent`).
    pub(super) sent: bool,
    /// Whether output reached the caller.
    pub(super) committed: bool,
    /// Output so far: evidence if the attempt failed.
    pub(super) output: Output,
    /// Under buffered delivery, the text and tool calls a failed attempt held back: its
    /// evidence, in its record.
    pub(super) held: Output,
    /// The probe of a half-open target this attempt was: held until its outcome is counted.
    #[expect(
        dead_code,
        reason = "a guard: held, never read, given back when dropped"
    )]
    pub(super) probe: Option<Probe>,
    pub(super) kind: EndKind,
}

pub(super) enum EndKind {
    /// The provider finished the reply; `execution.completed` is recorded with the batch that
    /// finished it.
    Succeeded(FinishReason),
    /// The attempt failed; the router decides what follows.
    Failed(AttemptError),
    /// Cancellation or the stop time cut the attempt.
    Cut(ErrorCode),
}

/// The running count of attempts.
#[derive(Default, Clone)]
pub(super) struct Tally {
    pub(super) attempts: u32,
    pub(super) on_target: u32,
    /// Whether any attempt's request may have reached its provider.
    pub(super) any_sent: bool,
    /// Whether any admitted attempt may still be running remotely: once true, the execution's
    /// outcome can only be `unknown`, whatever later attempts did.
    pub(super) any_unknown: bool,
    /// The last attempt's error; a refusal by health or admission (the target was never
    /// asked) is kept only while no attempt failed otherwise.
    pub(super) last_error: Option<AttemptError>,
    /// What the last failure a provider gave ends the execution with when nothing else may
    /// be tried (`AttemptBudget::ends_with`).
    pub(super) last_real: Option<ErrorCode>,
}

impl Tally {
    pub(super) fn outcome(&self) -> Outcome {
        outcome(self.any_sent, self.any_unknown)
    }

    /// Counts a finished attempt's error.
    pub(super) fn record_error(&mut self, error: AttemptError, admitted: bool) {
        self.any_unknown |= admitted && error.class == ErrorClass::OutcomeUnknown;
        let refusal = !admitted
            && matches!(
                error.code,
                AttemptCode::TargetEjected | AttemptCode::AdmissionRejected
            );
        if !refusal || self.last_error.is_none() {
            self.last_error = Some(error);
        }
    }
}

/// What the remote side did over all of an execution's attempts: nothing started when no
/// attempt's request was sent; `unknown` once any attempt may still run remotely, whatever
/// later attempts did; else `failed`.
fn outcome(any_sent: bool, any_unknown: bool) -> Outcome {
    match (any_sent, any_unknown) {
        (false, _) => Outcome::NotStarted,
        (true, true) => Outcome::Unknown,
        (true, false) => Outcome::Failed,
    }
}

/// The `execution.failed` that ends an execution with `code`; `cancel_reason` is kept only
/// for a cancellation.
pub(in crate::runtime) fn failure(
    code: ErrorCode,
    message: String,
    outcome: Outcome,
    last_attempt_error: Option<AttemptError>,
    partial_output: Output,
    cancel_reason: Option<String>,
) -> EventPayload {
    EventPayload::Failed(Arc::new(ExecutionFailure {
        error: ExecutionError {
            code,
            message,
            outcome,
            last_attempt_error,
        },
        partial_output,
        cancel_reason: cancel_reason.filter(|_| code == ErrorCode::Cancelled),
    }))
}

/// The message of a cancellation with the caller's `reason`.
pub(in crate::runtime) fn cancel_message(reason: Option<&str>) -> String {
    match reason {
        Some(reason) => format!("cancelled: {reason}"),
        None => "cancelled".to_owned(),
    }
}

/// The `execution.failed` of a fault inside the runtime, logged under `error_id`: the caller
/// learns only the id. A fault may strike with an attempt in flight, so the outcome is unknown.
pub(in crate::runtime) fn internal_failure(error_id: &str) -> EventPayload {
    failure(
        ErrorCode::InternalError,
        format!("internal_error (error id {error_id})"),
        Outcome::Unknown,
        None,
        Output::default(),
        None,
    )
}

/// The evidence of a finished attempt; it takes the output the attempt held.
pub(super) fn record(
    target: &PlanTarget,
    tally: &Tally,
    end: &mut AttemptEnd,
    error: AttemptError,
    decision: Decision,
) -> AttemptRecord {
    let outcome = match (end.admitted && end.sent, error.class) {
        (false, _) => Outcome::NotStarted,
        (true, ErrorClass::OutcomeUnknown) => Outcome::Unknown,
        (true, ErrorClass::Interrupted) => Outcome::Interrupted,
        (true, _) => Outcome::Failed,
    };
    AttemptRecord {
        number: tally.attempts,
        provider: target.provider.clone(),
        model: target.model.clone(),
        started_at: end.started_at,
        duration: SystemTime::now().duration_since(end.started_at).ok(),
        error: Some(error),
        output_committed: end.committed,
        outcome: Some(outcome),
        next_action: Some(decision.next_action()),
        admitted: end.admitted,
        held_output: std::mem::take(&mut end.held),
    }
}

pub(super) fn attempt_error(error: ProviderError) -> AttemptError {
    AttemptError {
        class: error.class,
        code: error.code,
        message: error.message,
        retry_after: error.retry_after,
    }
}

pub(super) fn stop_message(code: ErrorCode, tally: &Tally) -> String {
    let n = tally.attempts;
    let last = tally
        .last_error
        .as_ref()
        .map(|e| format!("; last error: {}: {}", e.code, e.message))
        .unwrap_or_default();
    match code {
        ErrorCode::AttemptsExhausted => {
            format!("{n} attempt(s) failed and no attempt remains{last}")
        }
        ErrorCode::RetryBudgetExhausted => {
            format!("the retry budget ran out after {n} attempt(s){last}")
        }
        ErrorCode::DeadlineExceeded => format!("the deadline passed after {n} attempt(s){last}"),
        ErrorCode::OutputInterrupted => format!("attempt {n} failed after output began{last}"),
        ErrorCode::OutputTooLarge => format!(
            "attempt {n} was stopped: the execution reached its output bound \
             (server.max_output_bytes or server.max_events_per_execution){last}"
        ),
        ErrorCode::Rejected => {
            format!("attempt {n} was rejected by its target and no other target may be tried{last}")
        }
        ErrorCode::InvalidRequest => {
            format!("attempt {n} showed that no target can serve the request as it is{last}")
        }
        ErrorCode::OutcomeUnknown => {
            format!(
                "attempt {n} may still be running at the provider, so it was not repeated{last}"
            )
        }
        ErrorCode::ContentFiltered => format!(
            "attempt {n} was refused on a content policy, which the routing policy does not \
             route around (on_content_filter){last}"
        ),
        other => format!("{other}{last}"),
    }
}
