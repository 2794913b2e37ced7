//! `CancelExecution` ends a queued or running execution as CANCELLED, releases its admission
//! slot or permit, records the caller's reason, and leaves a finished execution unchanged.
//! (docs/protocol.md: CANCEL-1, CANCEL-2.)

use crate::common;

use std::time::Duration;

use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::ExecutionState as S;

/// `slow` has one permit and room for four waiters; its model never answers.
fn config() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "slow",
            ProviderSpec::scripted()
                .max_concurrency(1)
                .queue_capacity(4)
                .scripted_model("stuck", &["text"], script(|s| s.hang = true)),
        )
        .provider("fast", ProviderSpec::scripted().model("echo", &["text"]))
        .policy("hang", PolicySpec::new(&["slow/stuck"]))
        .policy("echo", PolicySpec::new(&["fast/echo"]))
        .ability("stuck", AbilitySpec::new("hang"))
        .ability("chat", AbilitySpec::new("echo"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_queued_execution_frees_its_queue_slot() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    let holder = submit(c, request("stuck", "hold the permit")).await;
    until_provider(c, "slow", |p| p.in_flight == 1).await;
    let waiter = submit(c, request("stuck", "wait in line")).await;
    let info = until_provider(c, "slow", |p| p.queued == 1).await;
    assert_eq!(info.in_flight, 1);
    until_state(c, &holder.execution_id, S::Running).await;
    assert_eq!(
        get(c, &waiter.execution_id).await.state(),
        S::Routing,
        "waiting for admission"
    );

    let cancelled = cancel(c, &waiter.execution_id, "caller gave up").await;

    assert_eq!(cancelled.state(), S::Cancelled);
    let error = cancelled.error.clone().expect("error");
    assert_eq!(error.code, "cancelled");
    assert_eq!(
        error.outcome(),
        pb::Outcome::NotStarted,
        "the queued attempt never ran"
    );
    assert!(cancelled.attempts.iter().all(|a| !a.admitted));
    let info = provider(c, "slow").await;
    assert_eq!(
        (info.queued, info.in_flight),
        (0, 1),
        "the queue slot is back; the holder keeps its permit"
    );

    let events = watch(c, &waiter.execution_id, 0).await;
    assert_complete_sequence(&events);
    let last = events.last().unwrap();
    assert_eq!(
        (last.r#type.as_str(), last.state()),
        ("execution.failed", S::Cancelled)
    );
    let failed = failed_payload(&events);
    assert_eq!(failed.cancel_reason, "caller gave up");
    assert_eq!(failed.error.unwrap().code, "cancelled");
    assert!(!types(&events).contains(&"route.attempt.started"));

    assert_eq!(get(c, &holder.execution_id).await.state(), S::Running);
    cancel(c, &holder.execution_id, "").await;
    assert_eq!(provider(c, "slow").await.in_flight, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_execution_releases_its_permit() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    let running = submit(c, request("stuck", "never answered")).await;
    until_provider(c, "slow", |p| p.in_flight == 1).await;
    until_state(c, &running.execution_id, S::Running).await;

    let cancelled = cancel(c, &running.execution_id, "too slow").await;

    assert_eq!(cancelled.state(), S::Cancelled);
    let error = cancelled.error.clone().expect("error");
    assert_eq!(error.code, "cancelled");
    assert_eq!(
        error.outcome(),
        pb::Outcome::Unknown,
        "the provider call was cut mid-flight"
    );
    assert_eq!(cancelled.attempts.len(), 1);
    assert!(cancelled.attempts[0].admitted);
    assert_eq!(cancelled.attempts[0].outcome(), pb::Outcome::Unknown);
    assert!(cancelled.result.is_none());
    assert_eq!(provider(c, "slow").await.in_flight, 0);

    let events = watch(c, &running.execution_id, 0).await;
    assert_complete_sequence(&events);
    let failed = failed_payload(&events);
    assert_eq!(failed.cancel_reason, "too slow");
    assert_eq!(events.last().unwrap().state(), S::Cancelled);
    server.stop().await;
}

#[tokio::test]
async fn cancelling_a_finished_execution_returns_it_unchanged() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    let events = execute(c, request("chat", "done already")).await;
    let id = events[0].execution_id.clone();
    let before = get(c, &id).await;
    assert_eq!(before.state(), S::Succeeded);

    let after = cancel(c, &id, "too late").await;

    assert_eq!(after, before);
    assert_eq!(get(c, &id).await, before);
    assert_eq!(watch(c, &id, 0).await, events, "no event was appended");
    server.stop().await;
}

#[tokio::test]
async fn cancel_is_idempotent_and_the_first_reason_wins() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    let running = submit(c, request("stuck", "cancel me twice")).await;
    until_provider(c, "slow", |p| p.in_flight == 1).await;

    let first = cancel(c, &running.execution_id, "first reason").await;
    let second = cancel(c, &running.execution_id, "second reason").await;

    assert_eq!(first.state(), S::Cancelled);
    assert_eq!(second, first);
    let events = watch(c, &running.execution_id, 0).await;
    assert_complete_sequence(&events);
    assert_eq!(failed_payload(&events).cancel_reason, "first reason");
    assert_eq!(events.last().unwrap().sequence, first.last_sequence);
    server.stop().await;
}
