//! The memory store is bounded: running executions are never evicted, so a store full of them
//! refuses new work with RESOURCE_EXHAUSTED; a terminal execution makes room and leaves with
//! its id.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use model_runtime::config::ConfigBuilder;
use model_runtime::pb;
use model_runtime::pb::ExecutionState as S;
use tonic::Code;

fn config() -> ConfigBuilder {
    hanging()
        .drain_timeout(Duration::from_millis(200))
        .max_executions(3)
}

#[tokio::test]
async fn a_store_full_of_running_work_refuses_until_one_ends() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            submit(c, request("chat", &format!("job {i}")))
                .await
                .execution_id,
        );
    }
    until_provider(c, "scripted", |p| p.in_flight == 3).await;
    for id in &ids {
        until_state(c, id, S::Running).await;
    }

    let status = within(c.submit(request("chat", "one too many")))
        .await
        .expect_err("a full store refuses");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let meta = metadata(c).await.store.unwrap();
    assert_eq!((meta.executions, meta.max_executions), (3, 3));
    for id in &ids {
        assert_eq!(get(c, id).await.state(), S::Running, "{id} is kept");
    }

    let cancelled = cancel(c, &ids[0], "make room").await;
    assert_eq!(cancelled.state(), S::Cancelled);
    let fresh = submit(c, request("chat", "fits now")).await;

    let status = try_get(c, &ids[0])
        .await
        .expect_err("the ended execution was evicted");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    for id in &ids[1..] {
        assert_eq!(get(c, id).await.state(), S::Running, "{id} is kept");
    }
    assert_ne!(
        get(c, &fresh.execution_id).await.state(),
        pb::ExecutionState::Unspecified
    );
    assert_eq!(stored_executions(c).await, 3);
    server.stop().await;
}

/// A store over its bytes because of running work lets each execution go as soon as it ends;
/// its own caller, following from the start, still reads it to the end, and cancelling one
/// still answers with its cancelled view.
#[tokio::test]
async fn an_execution_that_leaves_as_it_ends_still_reaches_its_caller() {
    let config = echo()
        .max_bytes(1 << 20)
        .provider(
            "slow",
            model_runtime::config::ProviderSpec::scripted().scripted_model(
                "stuck",
                &["text"],
                script(|s| s.hang = true),
            ),
        )
        .policy(
            "slow",
            model_runtime::config::PolicySpec::new(&["slow/stuck"]),
        )
        .ability("wait", model_runtime::config::AbilitySpec::new("slow"));
    let mut server = start(config).await;
    let c = &mut server.client;
    // Running, and holding most of the store's megabyte with its input.
    let heavy = submit(c, request("wait", &"x".repeat(700 * 1024))).await;
    let quick = submit(c, request("wait", "tiny")).await;
    // Each reply's 40 000 events take the store past its bytes while it runs; as it ends it
    // is the only terminal execution, and leaves at once.
    let prompt = "a ".repeat(40_000);
    for _ in 0..3 {
        let events = execute(c, request("chat", &prompt)).await;
        assert_complete_sequence(&events);
        let text = text_of(&events);
        assert!(text == prompt, "{} bytes of {}", text.len(), prompt.len());
        let gone = try_get(c, &events[0].execution_id).await.unwrap_err();
        assert_eq!(gone.code(), Code::NotFound, "it left as it ended: {gone:?}");
    }
    let view = cancel(c, &quick.execution_id, "enough").await;
    assert_eq!(view.state(), S::Cancelled);
    cancel(c, &heavy.execution_id, "done").await;
    server.stop().await;
}
