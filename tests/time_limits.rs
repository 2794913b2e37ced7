//! The deadline and the policy's retry budget bound every wait: a running attempt is cut, a
//! queued one leaves the queue, and the execution fails with the code naming which limit hit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::ExecutionState as S;

/// One permit, a model that never answers; `short` has a 150ms retry budget.
fn config() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "scripted",
            ProviderSpec::scripted()
                .max_concurrency(1)
                .queue_capacity(4)
                .scripted_model("stuck", &["text"], script(|s| s.hang = true)),
        )
        .policy("default", PolicySpec::new(&["scripted/stuck"]))
        .policy(
            "short",
            PolicySpec::new(&["scripted/stuck"]).retry_budget(Duration::from_millis(150)),
        )
        .ability(
            "chat",
            AbilitySpec::new("default").allowed_policies(&["short"]),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_cuts_a_running_attempt() {
    let mut server = start(config()).await;
    let mut req = request("chat", "too slow");
    // Long enough that admission (free here) always comes first, even on a loaded machine.
    req.deadline = Some(deadline_in(Duration::from_millis(400)));
    let events = execute(&mut server.client, req).await;

    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().state(), S::Failed);
    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "deadline_exceeded");
    assert_eq!(
        error.outcome(),
        pb::Outcome::Unknown,
        "the provider may still be working"
    );
    let view = get(&mut server.client, &events[0].execution_id).await;
    assert_eq!(view.attempts.len(), 1);
    assert!(view.attempts[0].admitted);
    assert_eq!(view.attempts[0].outcome(), pb::Outcome::Unknown);
    assert_eq!(provider(&mut server.client, "scripted").await.in_flight, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_takes_a_waiter_out_of_the_queue() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    let holder = submit(c, request("chat", "hold the permit")).await;
    until_provider(c, "scripted", |p| p.in_flight == 1).await;
    let mut req = request("chat", "wait in line");
    req.deadline = Some(deadline_in(Duration::from_millis(150)));

    let events = execute(c, req).await;

    assert_complete_sequence(&events);
    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "deadline_exceeded");
    assert_eq!(
        error.outcome(),
        pb::Outcome::NotStarted,
        "it never got a permit"
    );
    assert!(!types(&events).contains(&"route.attempt.started"));
    let info = provider(c, "scripted").await;
    assert_eq!((info.in_flight, info.queued), (1, 0));
    cancel(c, &holder.execution_id, "").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_budget_bounds_attempts_before_the_deadline() {
    let mut server = start(config()).await;
    let mut req = request("chat", "budgeted");
    req.policy = "short".into();
    let events = execute(&mut server.client, req).await;

    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().state(), S::Failed);
    assert_eq!(
        failed_payload(&events).error.unwrap().code,
        "retry_budget_exhausted"
    );
    server.stop().await;
}
