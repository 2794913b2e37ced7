#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::SystemTime;

use proptest::prelude::*;

use super::*;
use crate::execution::fixtures::{accepted, attempt_started, completed, failed, routing, text};
use crate::execution::{
    AttemptCode, AttemptError, AttemptRecord, ErrorClass, NextAction, Outcome, ReasoningPiece,
};
use crate::execution::{UsageFact, UsageSource, UsageUnit};

/// The kinds of event a script may contain, legal or not.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Accepted,
    Routing,
    Started,
    FailedRetry,
    FailedStop,
    Delta,
    Reasoning,
    Usage,
    Progress,
    Completed,
    Failed,
    Cancelled,
}

fn attempt_failed(next: NextAction, committed: bool) -> EventPayload {
    EventPayload::AttemptFailed(Arc::new(AttemptRecord {
        number: 1,
        provider: "p".into(),
        model: "m".into(),
        started_at: SystemTime::now(),
        duration: None,
        error: Some(AttemptError {
            class: ErrorClass::Retryable,
            code: AttemptCode::Unavailable,
            message: String::new(),
            retry_after: None,
        }),
        output_committed: committed,
        outcome: Some(Outcome::Failed),
        next_action: Some(next),
        admitted: true,
    }))
}

fn payload(kind: Kind, committed: bool) -> EventPayload {
    match kind {
        Kind::Accepted => accepted(),
        Kind::Routing => routing(),
        Kind::Started => attempt_started(1),
        Kind::FailedRetry => attempt_failed(NextAction::Fallback, committed),
        Kind::FailedStop => attempt_failed(NextAction::Stop, committed),
        Kind::Delta => text(1, "x"),
        Kind::Reasoning => EventPayload::ReasoningDelta {
            attempt: 1,
            piece: ReasoningPiece::Text,
            text: "hmm".into(),
        },
        Kind::Usage => EventPayload::Usage(Arc::new(UsageFact {
            unit: UsageUnit::OUTPUT_TOKENS,
            quantity: 1,
            source: UsageSource::ProviderReported,
            attempt: 1,
            provider: "p".into(),
            model: "m".into(),
            labels: Default::default(),
            position: 0,
        })),
        Kind::Progress => EventPayload::Progress {
            attempt: 1,
            message: "working".into(),
        },
        Kind::Completed => completed(1, "x"),
        Kind::Failed => failed(ErrorCode::AttemptsExhausted),
        Kind::Cancelled => failed(ErrorCode::Cancelled),
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Accepted),
        Just(Kind::Routing),
        Just(Kind::Started),
        Just(Kind::FailedRetry),
        Just(Kind::FailedStop),
        Just(Kind::Delta),
        Just(Kind::Reasoning),
        Just(Kind::Usage),
        Just(Kind::Progress),
        Just(Kind::Completed),
        Just(Kind::Failed),
        Just(Kind::Cancelled),
    ]
}

/// The edges of the draft's diagram, plus the events that leave the state as it is.
fn drawn(from: Option<ExecutionState>, to: ExecutionState) -> bool {
    use ExecutionState::*;
    matches!(
        (from, to),
        (None, Accepted)
            | (Some(Accepted), Routing | Cancelled)
            | (Some(Routing), Running | Routing | Cancelled | Failed)
            | (
                Some(Running),
                Routing | Running | Succeeded | Cancelled | Failed
            )
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_scripts_only_take_drawn_transitions(script in prop::collection::vec(kind(), 0..40)) {
        let mut lifecycle = Lifecycle::default();
        // The accepted events, as a store would number them.
        let mut log: Vec<(u64, ExecutionState, bool)> = Vec::new();
        let mut committed_in_attempt = false;
        for kind in script {
            let before = lifecycle;
            let event = payload(kind, committed_in_attempt);
            match lifecycle.apply(&event) {
                Ok(to) => {
                    prop_assert!(drawn(before.state(), to), "{:?} -> {:?} by {:?}", before.state(), to, kind);
                    prop_assert!(
                        !(before.state() == Some(ExecutionState::Running) && to == ExecutionState::Routing && committed_in_attempt),
                        "returned to routing after output was committed"
                    );
                    if event.commits_output() {
                        committed_in_attempt = true;
                    }
                    if matches!(kind, Kind::Started) {
                        committed_in_attempt = false;
                    }
                    log.push((log.len() as u64 + 1, to, event.is_terminal()));
                    prop_assert_eq!(to.is_terminal(), event.is_terminal());
                }
                Err(_) => prop_assert_eq!(lifecycle, before, "a rejected event changed the lifecycle"),
            }
        }
        // Any live execution can always be ended by cancellation.
        if let Some(state) = lifecycle.state() {
            if !state.is_terminal() {
                let to = lifecycle.apply(&failed(ErrorCode::Cancelled)).unwrap();
                log.push((log.len() as u64 + 1, to, true));
            }
            for kind in [Kind::Routing, Kind::Delta, Kind::Completed, Kind::Cancelled, Kind::Usage] {
                prop_assert!(lifecycle.apply(&payload(kind, false)).is_err(), "{:?} after the end", kind);
            }
        }
        let sequences: Vec<u64> = log.iter().map(|(s, _, _)| *s).collect();
        let expected: Vec<u64> = (1..=log.len() as u64).collect();
        prop_assert_eq!(sequences, expected);
        let terminals = log.iter().filter(|(_, _, terminal)| *terminal).count();
        prop_assert_eq!(terminals, usize::from(!log.is_empty()));
        if let Some((_, _, last_is_terminal)) = log.last() {
            prop_assert!(*last_is_terminal, "the terminal event is last");
        }
    }
}

#[test]
fn the_happy_path_is_legal() {
    let mut l = Lifecycle::default();
    use ExecutionState::*;
    let states: Vec<ExecutionState> = [
        accepted(),
        routing(),
        attempt_started(1),
        text(1, "a"),
        completed(1, "a"),
    ]
    .iter()
    .map(|e| l.apply(e).unwrap())
    .collect();
    assert_eq!(states, [Accepted, Routing, Running, Running, Succeeded]);
}

#[test]
fn a_retry_after_output_is_illegal() {
    let mut l = Lifecycle::default();
    for e in [accepted(), routing(), attempt_started(1), text(1, "a")] {
        l.apply(&e).unwrap();
    }
    let err = l
        .apply(&attempt_failed(NextAction::Fallback, true))
        .unwrap_err();
    assert_eq!(err.from, Some(ExecutionState::Running));
    // Stopping is legal, and the terminal failure follows from RUNNING.
    assert_eq!(
        l.apply(&attempt_failed(NextAction::Stop, true)).unwrap(),
        ExecutionState::Running
    );
    assert_eq!(
        l.apply(&failed(ErrorCode::OutputInterrupted)).unwrap(),
        ExecutionState::Failed
    );
}

#[test]
fn only_cancellation_ends_an_accepted_execution() {
    let mut l = Lifecycle::default();
    l.apply(&accepted()).unwrap();
    assert!(l.apply(&failed(ErrorCode::DeadlineExceeded)).is_err());
    assert!(l.apply(&completed(1, "x")).is_err());
    assert_eq!(
        l.apply(&failed(ErrorCode::Cancelled)).unwrap(),
        ExecutionState::Cancelled
    );
}

#[test]
fn a_fresh_attempt_may_retry_again() {
    let mut l = Lifecycle::default();
    for e in [accepted(), routing(), attempt_started(1)] {
        l.apply(&e).unwrap();
    }
    assert_eq!(
        l.apply(&attempt_failed(NextAction::Fallback, false))
            .unwrap(),
        ExecutionState::Routing
    );
    // Admission rejection: ROUTING -> ROUTING.
    assert_eq!(
        l.apply(&attempt_failed(NextAction::Fallback, false))
            .unwrap(),
        ExecutionState::Routing
    );
    assert_eq!(
        l.apply(&attempt_started(2)).unwrap(),
        ExecutionState::Running
    );
    assert!(!l.output_committed());
}
