use super::*;
use crate::execution::AttemptCode;

mod time;

fn budget(now: Instant) -> AttemptBudget {
    AttemptBudget {
        max_attempts: 4,
        allow_fallback: true,
        retries_per_target: 1,
        backoff: Duration::from_millis(100),
        min_attempt_time: Duration::ZERO,
        stop_on_rejected: false,
        stop_on_content_filter: true,
        on_unknown_outcome: None,
        budget_end: now + Duration::from_secs(10),
        deadline: now + Duration::from_secs(60),
    }
}

fn error(class: ErrorClass, retry_after: Option<Duration>) -> AttemptError {
    AttemptError {
        class,
        code: AttemptCode::Unavailable,
        message: String::new(),
        retry_after,
    }
}

fn failure(error: &AttemptError) -> Failure<'_> {
    Failure {
        error,
        committed: false,
        attempts: 1,
        on_target: 1,
        admitted: true,
        has_next_target: true,
        on_unknown_outcome: OnUnknownOutcome::Stop,
        // The whole window: the waits these tests expect.
        jitter: u64::MAX,
        last_real: None,
    }
}

#[test]
fn retries_the_same_target_with_exponential_backoff_then_falls_back() {
    let now = Instant::now();
    let b = budget(now);
    let e = error(ErrorClass::Retryable, None);
    assert_eq!(
        b.decide(failure(&e), now),
        Decision::Retry {
            after: Duration::from_millis(100)
        }
    );
    let second = Failure {
        attempts: 2,
        on_target: 2,
        ..failure(&e)
    };
    assert_eq!(b.decide(second, now), Decision::Fallback);
    let b2 = AttemptBudget {
        retries_per_target: 3,
        ..b.clone()
    };
    let third = Failure {
        attempts: 3,
        on_target: 3,
        ..failure(&e)
    };
    assert_eq!(
        b2.decide(third, now),
        Decision::Retry {
            after: Duration::from_millis(400)
        }
    );
}

#[test]
fn committed_output_is_terminal_whatever_the_class() {
    let now = Instant::now();
    let e = error(ErrorClass::Retryable, None);
    let f = Failure {
        committed: true,
        ..failure(&e)
    };
    assert_eq!(
        budget(now).decide(f, now),
        Decision::Stop(ErrorCode::OutputInterrupted)
    );
}

#[test]
fn a_rejection_falls_back_and_never_retries_its_target() {
    let now = Instant::now();
    let b = AttemptBudget {
        retries_per_target: 3,
        ..budget(now)
    };
    // Even with a Retry-After, and retries left on the target.
    let e = error(ErrorClass::Rejected, Some(Duration::from_secs(1)));
    assert_eq!(b.decide(failure(&e), now), Decision::Fallback);
    let last = Failure {
        has_next_target: false,
        ..failure(&e)
    };
    assert_eq!(b.decide(last, now), Decision::Stop(ErrorCode::Rejected));
    let one_target = AttemptBudget {
        allow_fallback: false,
        ..b.clone()
    };
    assert_eq!(
        one_target.decide(failure(&e), now),
        Decision::Stop(ErrorCode::Rejected)
    );
    let stop = AttemptBudget {
        stop_on_rejected: true,
        ..b.clone()
    };
    assert_eq!(
        stop.decide(failure(&e), now),
        Decision::Stop(ErrorCode::Rejected)
    );
}

#[test]
fn invalid_and_unknown_outcomes_stop() {
    let now = Instant::now();
    let b = budget(now);
    let e = error(ErrorClass::Invalid, None);
    assert_eq!(
        b.decide(failure(&e), now),
        Decision::Stop(ErrorCode::InvalidRequest)
    );
    let e = error(ErrorClass::OutcomeUnknown, None);
    assert_eq!(
        b.decide(failure(&e), now),
        Decision::Stop(ErrorCode::OutcomeUnknown)
    );
    let f = Failure {
        on_unknown_outcome: OnUnknownOutcome::Retry,
        ..failure(&e)
    };
    assert!(
        matches!(b.decide(f, now), Decision::Retry { .. }),
        "safe to repeat"
    );
}

/// `on_unknown_outcome = "fallback"` moves on without trying the silent target again, even
/// with retries left; with no other target the unknown outcome is the answer. A policy's
/// choice overrides its provider's.
#[test]
fn an_unknown_outcome_may_move_on_to_the_next_target() {
    let now = Instant::now();
    let b = budget(now);
    let e = error(ErrorClass::OutcomeUnknown, None);
    let f = Failure {
        on_unknown_outcome: OnUnknownOutcome::Fallback,
        ..failure(&e)
    };
    assert_eq!(b.decide(f, now), Decision::Fallback);
    let last = Failure {
        has_next_target: false,
        ..f
    };
    assert_eq!(
        b.decide(last, now),
        Decision::Stop(ErrorCode::OutcomeUnknown)
    );
    let no_fallback = AttemptBudget {
        allow_fallback: false,
        ..b.clone()
    };
    assert_eq!(
        no_fallback.decide(f, now),
        Decision::Stop(ErrorCode::OutcomeUnknown)
    );
    let policy_stops = AttemptBudget {
        on_unknown_outcome: Some(OnUnknownOutcome::Stop),
        ..b.clone()
    };
    assert_eq!(
        policy_stops.decide(f, now),
        Decision::Stop(ErrorCode::OutcomeUnknown)
    );
    let policy_moves_on = AttemptBudget {
        on_unknown_outcome: Some(OnUnknownOutcome::Fallback),
        ..b
    };
    assert_eq!(policy_moves_on.decide(failure(&e), now), Decision::Fallback);
}

/// A target's refusal on a content policy stops the execution by default, whatever other
/// targets remain; with `on_content_filter = "fallback"` the next target is tried, and with
/// none left the refusal is the answer.
#[test]
fn a_content_policy_refusal_stops_unless_the_policy_falls_back() {
    let now = Instant::now();
    let b = budget(now);
    let e = AttemptError {
        code: AttemptCode::ContentFiltered,
        ..error(ErrorClass::Rejected, None)
    };
    assert_eq!(
        b.decide(failure(&e), now),
        Decision::Stop(ErrorCode::ContentFiltered)
    );
    let falls_back = AttemptBudget {
        stop_on_content_filter: false,
        ..b
    };
    assert_eq!(falls_back.decide(failure(&e), now), Decision::Fallback);
    let last = Failure {
        has_next_target: false,
        ..failure(&e)
    };
    assert_eq!(
        falls_back.decide(last, now),
        Decision::Stop(ErrorCode::ContentFiltered)
    );
}

#[test]
fn a_late_rejection_with_nothing_else_to_try_reports_the_rejection() {
    let now = Instant::now();
    let b = budget(now);
    let e = error(ErrorClass::Rejected, None);
    let last = Failure {
        has_next_target: false,
        ..failure(&e)
    };
    // The attempt outlived the budget (it may, once sent): the rejection is still the answer.
    assert_eq!(
        b.decide(last, now + Duration::from_secs(20)),
        Decision::Stop(ErrorCode::Rejected)
    );
}

/// A refusal by health or admission (the target was never asked) is not the provider's
/// answer: it never stops routing on its own, not under `on_rejected = "stop"`, and with
/// nothing left the execution ends with the last real failure's code.
#[test]
fn a_refusal_moves_on_and_ends_with_the_last_real_failure() {
    let now = Instant::now();
    let stops = AttemptBudget {
        stop_on_rejected: true,
        ..budget(now)
    };
    for code in [AttemptCode::TargetEjected, AttemptCode::AdmissionRejected] {
        let refused = AttemptError {
            class: ErrorClass::Retryable,
            code,
            message: String::new(),
            retry_after: None,
        };
        let failure = Failure {
            admitted: false,
            last_real: Some(ErrorCode::AttemptsExhausted),
            ..failure(&refused)
        };
        assert_eq!(stops.decide(failure, now), Decision::Fallback, "{code:?}");
        let last = Failure {
            has_next_target: false,
            ..failure
        };
        assert_eq!(
            stops.decide(last, now),
            Decision::Stop(ErrorCode::AttemptsExhausted),
            "{code:?}: a 503 outage ends attempts_exhausted, not rejected"
        );
        let only = Failure {
            last_real: None,
            ..last
        };
        assert_eq!(
            stops.decide(only, now),
            Decision::Stop(ErrorCode::AttemptsExhausted)
        );
    }
}
