//! `GetExecution` returns the materialized view: state, result, resolved target, attempts as
//! evidence, the plan and usage facts carrying the request's labels.

use crate::common;

use std::time::Duration;

use std::collections::HashMap;

use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, FailError, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::execution_event::Payload;

#[tokio::test]
async fn a_succeeded_execution_is_fully_materialized() {
    let mut server = start(echo()).await;
    let mut req = request("chat", "hello there world");
    req.labels = HashMap::from([
        ("tenant".to_owned(), "acme".to_owned()),
        ("team".to_owned(), "search".to_owned()),
    ]);
    let events = execute(&mut server.client, req.clone()).await;
    let id = events[0].execution_id.clone();

    let view = get(&mut server.client, &id).await;

    assert_eq!(view.execution_id, id);
    assert_eq!(view.state(), pb::ExecutionState::Succeeded);
    assert_eq!(
        (view.ability.as_str(), view.policy.as_str()),
        ("chat", "default")
    );
    assert_eq!(view.last_sequence, events.len() as u64);
    assert!(view.created_at.is_some() && view.updated_at.is_some());
    assert_eq!(view.labels, req.labels);
    assert!(view.error.is_none());

    let result = view.result.clone().expect("result");
    assert_eq!(result.output.clone().unwrap().text, "hello there world");
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(
        (view.provider.as_str(), view.model.as_str()),
        ("scripted", "echo")
    );
    assert_eq!(
        (result.provider.as_str(), result.model.as_str()),
        ("scripted", "echo")
    );

    assert_eq!(view.attempts.len(), 1);
    let attempt = &view.attempts[0];
    assert_eq!(
        (
            attempt.number,
            attempt.provider.as_str(),
            attempt.model.as_str()
        ),
        (1, "scripted", "echo")
    );
    assert!(attempt.admitted);
    assert!(attempt.output_committed);
    assert_eq!(attempt.outcome(), pb::Outcome::Completed);
    assert!(attempt.error.is_none());
    assert!(attempt.started_at.is_some() && attempt.duration.is_some());

    let plan = view.plan.clone().expect("plan");
    assert_eq!(plan.policy, "default");
    assert_eq!(plan.required_capabilities, ["text"]);
    assert_eq!(plan.targets.len(), 1);
    assert!(plan.targets[0].kept && plan.targets[0].reason.is_empty());

    let limits = view.limits.expect("limits");
    assert_eq!(limits.max_attempts, 3);
    assert!(limits.allow_fallback && limits.deadline.is_some());

    let units: Vec<(&str, u64)> = view
        .usage
        .iter()
        .map(|f| (f.unit.as_str(), f.quantity))
        .collect();
    assert_eq!(units, [("input_tokens", 3), ("output_tokens", 3)]);
    for fact in &view.usage {
        assert_eq!(
            fact.labels, req.labels,
            "usage facts carry the request's labels"
        );
        assert_eq!(fact.source(), pb::UsageSource::ProviderReported);
        assert_eq!(
            (fact.attempt, fact.provider.as_str(), fact.model.as_str()),
            (1, "scripted", "echo")
        );
    }
    server.stop().await;
}

/// Two providers; the first fails its first attempt before output with a retryable error.
fn fallback() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "primary",
            ProviderSpec::scripted().scripted_model(
                "flaky",
                &["text"],
                script(|s| {
                    s.fail_attempts = 1;
                    s.fail_error = FailError::Unavailable;
                }),
            ),
        )
        .provider(
            "backup",
            ProviderSpec::scripted().model("steady", &["text"]),
        )
        .policy(
            "default",
            PolicySpec::new(&["primary/flaky", "backup/steady"]).max_attempts(3),
        )
        .ability("chat", AbilitySpec::new("default"))
}

#[tokio::test]
async fn a_fallback_keeps_both_attempts_and_resolves_the_second_target() {
    let mut server = start(fallback()).await;
    let events = execute(&mut server.client, request("chat", "fall back please")).await;
    assert_complete_sequence(&events);
    assert_eq!(
        types(&events)[..5],
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started",
            "route.attempt.failed",
            "route.attempt.started",
        ]
    );
    assert_eq!(
        events[3].state(),
        pb::ExecutionState::Routing,
        "a retryable failure returns to routing"
    );
    let id = events[0].execution_id.clone();

    let view = get(&mut server.client, &id).await;

    assert_eq!(view.state(), pb::ExecutionState::Succeeded);
    assert_eq!(
        (view.provider.as_str(), view.model.as_str()),
        ("backup", "steady")
    );
    let result = view.result.clone().unwrap();
    assert_eq!(
        (
            result.provider.as_str(),
            result.model.as_str(),
            result.attempt
        ),
        ("backup", "steady", 2)
    );
    assert_eq!(result.output.unwrap().text, "fall back please");

    assert_eq!(view.attempts.len(), 2, "{:?}", view.attempts);
    let first = &view.attempts[0];
    assert_eq!(
        (first.number, first.provider.as_str(), first.model.as_str()),
        (1, "primary", "flaky")
    );
    assert!(first.admitted);
    assert!(!first.output_committed);
    assert_eq!(first.outcome(), pb::Outcome::Failed);
    assert_eq!(first.next_action(), pb::NextAction::Fallback);
    let error = first.error.clone().expect("first attempt error");
    assert_eq!(error.code, "unavailable");
    assert_eq!(error.class(), pb::ErrorClass::Retryable);

    let second = &view.attempts[1];
    assert_eq!(
        (
            second.number,
            second.provider.as_str(),
            second.model.as_str()
        ),
        (2, "backup", "steady")
    );
    assert!(second.admitted && second.output_committed);
    assert_eq!(second.outcome(), pb::Outcome::Completed);
    assert!(second.error.is_none());

    // The failed attempt's evidence event matches the view.
    match &events[3].payload {
        Some(Payload::AttemptFailed(f)) => assert_eq!(f.attempt.as_ref(), Some(first)),
        other => panic!("{other:?}"),
    }
    // Usage comes from the attempt that ran to completion.
    assert!(
        view.usage
            .iter()
            .all(|f| f.attempt == 2 && f.provider == "backup")
    );
    server.stop().await;
}
