use std::sync::Arc;
use std::time::SystemTime;

use proptest::prelude::*;

use super::*;
use crate::execution::fixtures::{accepted, attempt_started, completed, failed, routing, text};
use crate::execution::{
    AttemptCode, AttemptError, AttemptRecord, ErrorClass, NextAction, Outcome, Output,
    ReasoningPiece,
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
        held_output: Output::default(),
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

/// The protocol's rules written again, independently of `Lifecycle`, as a model over the
/// script's kinds: the state after each event, or `None` where the event is not allowed.
#[derive(Debug, Default)]
struct Model {
    state: Option<ExecutionState>,
    committed: bool,
    stopping: bool,
}

impl Model {
    fn step(&mut self, kind: Kind) -> Option<ExecutionState> {
        use ExecutionState::*;
        let state = self.state;
        let evidence = matches!(kind, Kind::Usage | Kind::Progress);
        let ending = matches!(kind, Kind::Failed | Kind::Cancelled);
        // After the terminal event nothing; after a stop only the end and its evidence.
        if state.is_some_and(ExecutionState::is_terminal)
            || (self.stopping && !(evidence || ending))
        {
            return None;
        }
        let to = match (state?, kind) {
            (Accepted, Kind::Routing) => Routing,
            (Accepted | Routing | Running, Kind::Cancelled) => Cancelled,
            (Routing | Running, Kind::Failed) => Failed,
            (Routing, Kind::Started) => Running,
            (Routing | Running, Kind::Usage | Kind::Progress) => state?,
            (Routing, Kind::FailedRetry) => Routing,
            (Running, Kind::FailedRetry) if !self.committed => Routing,
            (Routing | Running, Kind::FailedStop) => state?,
            (Running, Kind::Delta | Kind::Reasoning | Kind::Completed) => {
                if matches!(kind, Kind::Completed) {
                    Succeeded
                } else {
                    Running
                }
            }
            _ => return None,
        };
        match kind {
            Kind::Delta => self.committed = true,
            Kind::Started => self.committed = false,
            Kind::FailedStop => self.stopping = true,
            _ => {}
        }
        self.state = Some(to);
        Some(to)
    }
}

impl Kind {
    fn first(self) -> Option<ExecutionState> {
        matches!(self, Kind::Accepted).then_some(ExecutionState::Accepted)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every generated sequence: the transition function accepts exactly what the model of
    /// the protocol's rules accepts, and ends in the same state.
    #[test]
    fn the_transition_function_is_the_protocols_rules(script in prop::collection::vec(kind(), 0..60)) {
        let mut lifecycle = Lifecycle::default();
        let mut model = Model::default();
        for kind in script {
            let expected = match model.state {
                None => {
                    let first = kind.first();
                    if first.is_some() { model.state = first; }
                    first
                }
                Some(_) => model.step(kind),
            };
            let event = payload(kind, model.committed && !matches!(kind, Kind::Started));
            let got = lifecycle.apply(&event).ok();
            prop_assert_eq!(got, expected, "{:?} after {:?}", kind, lifecycle);
            prop_assert_eq!(lifecycle.state(), model.state);
        }
    }
}

/// Sequences that keep going past a stop, as the seed that found it: output, a success or a
/// new attempt after a failed attempt said stop are refused; the end and its evidence are not.
#[test]
fn nothing_but_the_end_follows_a_stop() {
    let stopped = || {
        let mut l = Lifecycle::default();
        for e in [accepted(), routing(), attempt_started(1)] {
            l.apply(&e).unwrap();
        }
        l.apply(&attempt_failed(NextAction::Stop, false)).unwrap();
        l
    };
    for refused in [
        text(1, "more"),
        completed(1, "x"),
        attempt_started(2),
        attempt_failed(NextAction::Fallback, false),
        attempt_failed(NextAction::Stop, false),
        payload(Kind::Reasoning, false),
    ] {
        let mut l = stopped();
        assert!(
            l.apply(&refused).is_err(),
            "{} after a stop",
            refused.type_name()
        );
    }
    let mut l = stopped();
    l.apply(&payload(Kind::Usage, false)).unwrap();
    l.apply(&payload(Kind::Progress, false)).unwrap();
    assert_eq!(
        l.apply(&failed(ErrorCode::AttemptsExhausted)).unwrap(),
        ExecutionState::Failed
    );
    // Cancellation ends it too.
    assert_eq!(
        stopped().apply(&failed(ErrorCode::Cancelled)).unwrap(),
        ExecutionState::Cancelled
    );
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
    assert!(!l.output_committed);
}
