//! Time: backoff and its jitter, Retry-After, the deadline and the attempt bounds.

use super::*;

/// A retry's wait is drawn within the second half of its backoff window (equal jitter): the
/// draw places it, never sooner than half the window, the window doubles per attempt on the
/// target, and a longer Retry-After still wins.
#[test]
fn backoff_waits_are_drawn_within_the_window() {
    let now = Instant::now();
    let b = AttemptBudget {
        retries_per_target: 3,
        ..budget(now)
    };
    let e = error(ErrorClass::Retryable, None);
    let at = |jitter: u64, on_target: u32| {
        b.decide(
            Failure {
                jitter,
                on_target,
                attempts: on_target,
                ..failure(&e)
            },
            now,
        )
    };
    let wait = |after: u64| Decision::Retry {
        after: Duration::from_millis(after),
    };
    assert_eq!(at(0, 1), wait(50));
    assert_eq!(at(u64::MAX / 2 + 1, 1), wait(75));
    assert_eq!(at(u64::MAX, 1), wait(100));
    assert_eq!(at(0, 3), wait(200));
    assert_eq!(at(u64::MAX / 4 + 1, 3), wait(250));
    assert_eq!(at(u64::MAX, 3), wait(400));
    let later = error(ErrorClass::Retryable, Some(Duration::from_millis(70)));
    let with_retry_after = |jitter: u64| {
        b.decide(
            Failure {
                jitter,
                ..failure(&later)
            },
            now,
        )
    };
    assert_eq!(with_retry_after(0), wait(70));
    assert_eq!(with_retry_after(u64::MAX), wait(100));
}

#[test]
fn attempts_fallback_and_time_bound_everything() {
    let now = Instant::now();
    let b = budget(now);
    let e = error(ErrorClass::Retryable, None);
    let last = Failure {
        attempts: 4,
        ..failure(&e)
    };
    assert_eq!(
        b.decide(last, now),
        Decision::Stop(ErrorCode::AttemptsExhausted)
    );
    let no_fallback = AttemptBudget {
        allow_fallback: false,
        ..b.clone()
    };
    assert_eq!(
        no_fallback.decide(failure(&e), now),
        Decision::Stop(ErrorCode::AttemptsExhausted)
    );
    let end = Failure {
        on_target: 2,
        has_next_target: false,
        ..failure(&e)
    };
    assert_eq!(
        b.decide(end, now),
        Decision::Stop(ErrorCode::AttemptsExhausted)
    );
    let later = now + Duration::from_secs(10);
    assert_eq!(
        b.decide(failure(&e), later),
        Decision::Stop(ErrorCode::RetryBudgetExhausted)
    );
    let tight = AttemptBudget {
        deadline: now + Duration::from_secs(1),
        ..b.clone()
    };
    assert_eq!(
        tight.decide(failure(&e), now + Duration::from_secs(1)),
        Decision::Stop(ErrorCode::DeadlineExceeded)
    );
}

#[test]
fn retry_after_is_honoured_when_it_fits_and_moves_on_when_not() {
    let now = Instant::now();
    let b = budget(now);
    let fits = error(ErrorClass::Retryable, Some(Duration::from_secs(2)));
    assert_eq!(
        b.decide(failure(&fits), now),
        Decision::Retry {
            after: Duration::from_secs(2)
        }
    );
    let too_long = error(ErrorClass::Retryable, Some(Duration::from_secs(30)));
    assert_eq!(b.decide(failure(&too_long), now), Decision::Fallback);
}

#[test]
fn an_admission_rejection_moves_on_at_once() {
    let now = Instant::now();
    let b = budget(now);
    let e = error(ErrorClass::Retryable, None);
    let rejected = Failure {
        admitted: false,
        on_target: 0,
        ..failure(&e)
    };
    assert_eq!(b.decide(rejected, now), Decision::Fallback);
    let last = Failure {
        has_next_target: false,
        ..rejected
    };
    assert_eq!(
        b.decide(last, now),
        Decision::Stop(ErrorCode::AttemptsExhausted)
    );
}

#[test]
fn a_retry_that_does_not_fit_stops_with_the_time_code() {
    let now = Instant::now();
    let b = AttemptBudget {
        budget_end: now + Duration::from_millis(150),
        ..budget(now)
    };
    let e = error(ErrorClass::Retryable, None);
    let f = Failure {
        has_next_target: false,
        ..failure(&e)
    };
    let later = now + Duration::from_millis(100);
    assert_eq!(
        b.decide(f, later),
        Decision::Stop(ErrorCode::RetryBudgetExhausted)
    );
}

#[test]
fn retry_after_is_honoured_on_the_last_target_without_policy_retries() {
    let now = Instant::now();
    let b = AttemptBudget {
        retries_per_target: 0,
        ..budget(now)
    };
    let e = error(ErrorClass::Retryable, Some(Duration::from_secs(1)));
    let last = Failure {
        has_next_target: false,
        ..failure(&e)
    };
    assert_eq!(
        b.decide(last, now),
        Decision::Retry {
            after: Duration::from_secs(1)
        }
    );
    let next = Failure {
        has_next_target: true,
        ..failure(&e)
    };
    assert_eq!(
        b.decide(next, now),
        Decision::Fallback,
        "another provider needs no wait"
    );
    let plain = error(ErrorClass::Retryable, None);
    let last = Failure {
        has_next_target: false,
        ..failure(&plain)
    };
    assert_eq!(
        b.decide(last, now),
        Decision::Stop(ErrorCode::AttemptsExhausted)
    );
}

#[test]
fn a_wait_too_long_for_the_clock_does_not_fit_and_does_not_panic() {
    let now = Instant::now();
    let b = budget(now);
    // What `Retry-After: 18446744073709551615` would be without the adapter's cap.
    let e = error(ErrorClass::Retryable, Some(Duration::MAX));
    let last = Failure {
        has_next_target: false,
        ..failure(&e)
    };
    assert_eq!(
        b.decide(last, now),
        Decision::Stop(ErrorCode::RetryBudgetExhausted)
    );
    assert_eq!(b.decide(failure(&e), now), Decision::Fallback);
}

#[test]
fn no_attempt_starts_with_less_than_the_minimum_time_left() {
    let now = Instant::now();
    let b = AttemptBudget {
        min_attempt_time: Duration::from_secs(2),
        ..budget(now)
    };
    let e = error(ErrorClass::Retryable, None);
    // 10 s of budget: a fallback may start up to 8 s in, not after.
    assert_eq!(
        b.decide(failure(&e), now + Duration::from_millis(7_800)),
        Decision::Retry {
            after: Duration::from_millis(100)
        }
    );
    assert_eq!(
        b.decide(failure(&e), now + Duration::from_secs(8)),
        Decision::Stop(ErrorCode::RetryBudgetExhausted)
    );
    // A retry whose wait would end inside the last 2 s moves on instead.
    let wait = error(ErrorClass::Retryable, Some(Duration::from_secs(3)));
    assert_eq!(
        b.decide(failure(&wait), now + Duration::from_secs(5)),
        Decision::Fallback
    );
}

#[test]
fn a_retry_after_of_zero_still_waits_the_backoff() {
    let now = Instant::now();
    let b = AttemptBudget {
        retries_per_target: 0,
        ..budget(now)
    };
    let e = error(ErrorClass::Retryable, Some(Duration::ZERO));
    let last = Failure {
        has_next_target: false,
        ..failure(&e)
    };
    assert_eq!(
        b.decide(last, now),
        Decision::Retry {
            after: Duration::from_millis(100)
        }
    );
}
