//! When the router may fall back: only before output is committed, only when the caller allows
//! a second target, and only after an error another target could avoid (`retryable`, or
//! `rejected` unless the policy stops on it); an `invalid` request stops. (docs/protocol.md:
//! COMMIT-1, COMMIT-2, COMMIT-4, ROUTE-7, ROUTE-8.)

use crate::common;

use std::time::Duration;

use common::*;
use model_runtime::Config;
use model_runtime::config::{
    AbilitySpec, ConfigBuilder, FailError, OnRejected, PolicySpec, ProviderSpec,
};
use model_runtime::pb;
use model_runtime::pb::ExecutionState as S;

/// `primary/broken` streams two words and then fails; `primary/flaky` fails before output;
/// `primary/refuses` finds the request invalid; `primary/rejects` rejects it (like a 401);
/// `backup/steady` always works.
fn config() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "primary",
            ProviderSpec::scripted()
                .scripted_model(
                    "broken",
                    &["text"],
                    script(|s| s.fail_after_deltas = Some(2)),
                )
                .scripted_model("flaky", &["text"], script(|s| s.fail_attempts = 1))
                .scripted_model(
                    "refuses",
                    &["text"],
                    script(|s| {
                        s.fail_attempts = 1;
                        s.fail_error = FailError::InvalidRequest;
                    }),
                )
                .scripted_model(
                    "rejects",
                    &["text"],
                    script(|s| {
                        s.fail_attempts = 1;
                        s.fail_error = FailError::Rejected;
                    }),
                ),
        )
        .provider(
            "backup",
            ProviderSpec::scripted().model("steady", &["text"]),
        )
        .policy(
            "broken",
            PolicySpec::new(&["primary/broken", "backup/steady"]),
        )
        .policy(
            "flaky",
            PolicySpec::new(&["primary/flaky", "backup/steady"]),
        )
        .policy(
            "refuses",
            PolicySpec::new(&["primary/refuses", "backup/steady"]),
        )
        .policy(
            "rejects",
            PolicySpec::new(&["primary/rejects", "backup/steady"]).retries_per_target(2),
        )
        .policy(
            "rejects_stop",
            PolicySpec::new(&["primary/rejects", "backup/steady"]).on_rejected(OnRejected::Stop),
        )
        .ability(
            "rejects",
            AbilitySpec::new("rejects").allowed_policies(&["rejects", "rejects_stop"]),
        )
        .ability("broken", AbilitySpec::new("broken"))
        .ability("flaky", AbilitySpec::new("flaky"))
        .ability("refuses", AbilitySpec::new("refuses"))
}

#[tokio::test]
async fn a_failure_after_output_is_terminal_and_keeps_the_partial_output() {
    let mut server = start(config()).await;
    let events = execute(
        &mut server.client,
        request("broken", "alpha beta gamma delta"),
    )
    .await;

    assert_complete_sequence(&events);
    assert_eq!(text_of(&events), "alpha beta ");
    let failed = failed_payload(&events);
    assert_eq!(events.last().unwrap().state(), S::Failed);
    let error = failed.error.unwrap();
    assert_eq!(error.code, "output_interrupted");
    assert_eq!(
        failed.partial_output.unwrap().text,
        "alpha beta ",
        "kept as evidence"
    );
    assert_eq!(
        types(&events)
            .iter()
            .filter(|t| **t == "route.attempt.started")
            .count(),
        1,
        "no fallback after output: {:?}",
        types(&events)
    );

    let view = get(&mut server.client, &events[0].execution_id).await;
    assert_eq!(view.state(), S::Failed);
    assert!(view.result.is_none(), "partial output is never a result");
    assert_eq!(view.partial_output.unwrap().text, "alpha beta ");
    assert_eq!(view.attempts.len(), 1);
    let attempt = &view.attempts[0];
    assert!(attempt.output_committed);
    assert_eq!(attempt.next_action(), pb::NextAction::Stop);
    assert_eq!(attempt.provider, "primary");
    server.stop().await;
}

#[tokio::test]
async fn allow_fallback_false_permits_exactly_one_attempt() {
    let mut server = start(config()).await;
    let mut req = request("flaky", "just once");
    req.allow_fallback = Some(false);
    req.max_attempts = Some(3);
    let events = execute(&mut server.client, req).await;

    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().state(), S::Failed);
    assert_eq!(
        failed_payload(&events).error.unwrap().code,
        "attempts_exhausted"
    );
    let view = get(&mut server.client, &events[0].execution_id).await;
    assert!(!view.limits.unwrap().allow_fallback);
    assert_eq!(view.attempts.len(), 1, "{:?}", view.attempts);
    assert_eq!(view.attempts[0].next_action(), pb::NextAction::Stop);

    // The same request with fallback allowed reaches the backup.
    let events = execute(&mut server.client, request("flaky", "fall back")).await;
    assert_eq!(completed_result(&events).provider, "backup");
    server.stop().await;
}

#[tokio::test]
async fn an_invalid_request_stops_without_fallback() {
    let mut server = start(config()).await;
    let events = execute(&mut server.client, request("refuses", "bad request")).await;

    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().state(), S::Failed);
    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "invalid_request");
    assert_eq!(error.outcome(), pb::Outcome::Failed);
    let last = error.last_attempt_error.unwrap();
    assert_eq!(
        (last.code.as_str(), last.class()),
        ("invalid_request", pb::ErrorClass::Invalid)
    );
    let view = get(&mut server.client, &events[0].execution_id).await;
    assert_eq!(view.attempts.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_rejection_falls_back_at_once_and_never_retries_its_target() {
    let mut server = start(config()).await;
    // The policy would retry a retryable target twice: a rejecting one, never.
    let events = execute(&mut server.client, request("rejects", "hello")).await;

    assert_complete_sequence(&events);
    assert_eq!(completed_result(&events).provider, "backup");
    let view = get(&mut server.client, &events[0].execution_id).await;
    assert_eq!(view.attempts.len(), 2);
    let first = &view.attempts[0];
    assert_eq!(first.provider, "primary");
    let error = first.error.as_ref().unwrap();
    assert_eq!(
        (error.code.as_str(), error.class()),
        ("rejected", pb::ErrorClass::Rejected)
    );
    assert_eq!(first.next_action(), pb::NextAction::Fallback);
    server.stop().await;
}

#[tokio::test]
async fn a_policy_may_stop_on_a_rejection() {
    let mut server = start(config()).await;
    let mut r = request("rejects", "hello");
    r.policy = "rejects_stop".into();
    let events = execute(&mut server.client, r).await;

    assert_complete_sequence(&events);
    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "rejected");
    let view = get(&mut server.client, &events[0].execution_id).await;
    assert_eq!(view.attempts.len(), 1);
    assert_eq!(view.attempts[0].next_action(), pb::NextAction::Stop);
    server.stop().await;
}
