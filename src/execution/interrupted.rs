//! How an execution ends when its driver cannot end it the usual way: the driver panicked,
//! or the runtime stopped under it (a crash, or a store that failed, found at the next start).
//! Nothing is resubmitted: the attempt that was running fails with its outcome unknown (the
//! provider may still be working on it), and the execution fails with the interruption's
//! code, keeping the output that attempt streamed as partial output.

use std::sync::Arc;
use std::time::SystemTime;

use crate::execution::{
    AttemptCode, AttemptError, AttemptRecord, CommitTracker, Delivery, ErrorClass, ErrorCode,
    Event, EventPayload, Execution, ExecutionError, ExecutionFailure, ExecutionState, NextAction,
    Outcome, RoutingPlan,
};

/// Why an execution is being ended from outside its driver.
#[derive(Debug, Clone)]
pub(crate) struct Interruption {
    /// The execution's error code.
    pub code: ErrorCode,
    /// The execution's error message.
    pub message: String,
    /// The message of the running attempt's error.
    pub attempt_message: String,
}

/// What the remote side did, as far as `attempts` record it, for an execution ended by
/// someone other than its driver: `not_started` when no attempt's request was sent (none was
/// admitted, or each admitted one records that it was never sent); `unknown` once a sent
/// attempt may still run remotely (it has not finished, or finished unknown); else `failed`.
pub(crate) fn outcome_of(attempts: &[AttemptRecord]) -> Outcome {
    let mut sent = attempts
        .iter()
        .filter(|a| a.admitted && a.outcome != Some(Outcome::NotStarted))
        .peekable();
    if sent.peek().is_none() {
        return Outcome::NotStarted;
    }
    if sent.any(|a| a.outcome.is_none_or(|o| o == Outcome::Unknown)) {
        Outcome::Unknown
    } else {
        Outcome::Failed
    }
}

/// The events that end `view` (whose events are `events`) as `why` says; none when it has
/// ended already.
pub(crate) fn interrupted(
    view: &Execution,
    events: &[Event],
    why: Interruption,
) -> Vec<EventPayload> {
    let mut ending = Vec::new();
    match view.state {
        state if state.is_terminal() => return ending,
        // The state machine has no ACCEPTED -> FAILED edge: a routing step first, saying
        // that no plan was made, and why (never an empty plan, which would say the policy
        // had no targets).
        ExecutionState::Accepted => ending.push(EventPayload::Routing(Arc::new(RoutingPlan {
            policy: view.policy.clone(),
            required_capabilities: Vec::new(),
            targets: Vec::new(),
            ended_before_routing: Some(
                format!("ended with {} before it was routed", why.code.as_str()).into(),
            ),
            tried_anyway: false,
        }))),
        _ => {}
    }
    let last_start = events
        .iter()
        .rposition(|e| matches!(e.payload, EventPayload::AttemptStarted(_)))
        .unwrap_or(events.len());
    // What is stored was exposed, whatever the delivery: held output never reached the store.
    let mut tracker = CommitTracker::new(Delivery::Streamed);
    for event in &events[last_start..] {
        tracker.record(&event.payload);
    }
    let mut last_error = view.attempts.iter().rev().find_map(|a| a.error.clone());
    let mut outcome = outcome_of(&view.attempts);
    if let Some(running) = view
        .attempts
        .last()
        .filter(|a| a.admitted && a.error.is_none())
    {
        let error = AttemptError {
            class: ErrorClass::OutcomeUnknown,
            code: AttemptCode::Internal,
            message: why.attempt_message,
            retry_after: None,
        };
        ending.push(EventPayload::AttemptFailed(Arc::new(AttemptRecord {
            error: Some(error.clone()),
            duration: SystemTime::now().duration_since(running.started_at).ok(),
            output_committed: tracker.committed(),
            outcome: Some(Outcome::Unknown),
            next_action: Some(NextAction::Stop),
            ..running.clone()
        })));
        last_error = Some(error);
        outcome = Outcome::Unknown;
    }
    ending.push(EventPayload::Failed(Arc::new(ExecutionFailure {
        error: ExecutionError {
            code: why.code,
            message: why.message,
            outcome,
            last_attempt_error: last_error,
        },
        partial_output: tracker.take_output(),
        cancel_reason: None,
    })));
    ending
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::execution::fixtures::accepted;
    use crate::execution::{ExecutionId, Lifecycle};

    /// An execution still ACCEPTED is ended through a routing step that says no plan was
    /// made, and why: never an empty plan, which would say its policy had no targets.
    #[test]
    fn an_accepted_execution_ends_saying_it_was_never_routed() {
        let mut lifecycle = Lifecycle::default();
        let state = lifecycle.apply(&accepted()).unwrap();
        let event = Event {
            sequence: 1,
            time: SystemTime::now(),
            state,
            payload: accepted(),
        };
        let view =
            Execution::from_accepted(&event, ExecutionId::new(), Arc::default(), None).unwrap();
        let why = Interruption {
            code: ErrorCode::OutcomeUnknown,
            message: "the runtime stopped".into(),
            attempt_message: String::new(),
        };
        let ending = interrupted(&view, &[event], why);
        let [EventPayload::Routing(plan), EventPayload::Failed(failure)] = &ending[..] else {
            panic!("{ending:?}")
        };
        assert!(plan.targets.is_empty());
        assert_eq!(
            plan.ended_before_routing.as_deref(),
            Some("ended with outcome_unknown before it was routed")
        );
        assert_eq!(failure.error.outcome, Outcome::NotStarted);
        for payload in &ending {
            lifecycle.apply(payload).unwrap();
        }
    }

    /// What the attempts a view records say the provider may have done.
    #[test]
    fn the_outcome_of_attempts_says_whether_a_request_went_out() {
        let attempt = |admitted: bool, outcome: Option<Outcome>| AttemptRecord {
            number: 1,
            provider: "p".into(),
            model: "m".into(),
            started_at: SystemTime::now(),
            duration: None,
            error: None,
            output_committed: false,
            outcome,
            next_action: None,
            admitted,
            held_output: crate::execution::Output::default(),
        };
        let cases = [
            (vec![], Outcome::NotStarted),
            // Refused by admission, or admitted and cut before its request went out.
            (
                vec![attempt(false, Some(Outcome::Failed))],
                Outcome::NotStarted,
            ),
            (
                vec![attempt(true, Some(Outcome::NotStarted))],
                Outcome::NotStarted,
            ),
            (vec![attempt(true, Some(Outcome::Failed))], Outcome::Failed),
            // Still running, or ended not knowing: the provider may finish it.
            (
                vec![attempt(true, Some(Outcome::Failed)), attempt(true, None)],
                Outcome::Unknown,
            ),
            (
                vec![
                    attempt(true, Some(Outcome::Unknown)),
                    attempt(true, Some(Outcome::Failed)),
                ],
                Outcome::Unknown,
            ),
        ];
        for (attempts, expected) in cases {
            assert_eq!(outcome_of(&attempts), expected, "{attempts:?}");
        }
    }
}
