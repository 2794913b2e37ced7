//! Graceful shutdown: admission stops at once (UNAVAILABLE, metadata STOPPING), running work
//! finishes within the drain timeout, what is left is cancelled, and every open stream gets
//! its terminal event before the server returns. (docs/protocol.md: DRAIN-1, DRAIN-2.)

use crate::common;

use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use tonic::Code;

/// `slow` finishes on its own in a few hundred milliseconds; `stuck` never does.
fn config() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_secs(60))
        .provider(
            "scripted",
            ProviderSpec::scripted()
                .scripted_model(
                    "slow",
                    &["text"],
                    script(|s| {
                        s.first_delta_ms = 20;
                        s.delta_interval_ms = 20;
                    }),
                )
                .scripted_model("stuck", &["text"], script(|s| s.hang = true)),
        )
        .policy("slow", PolicySpec::new(&["scripted/slow"]))
        .policy("stuck", PolicySpec::new(&["scripted/stuck"]))
        .ability("chat", AbilitySpec::new("slow"))
        .ability("stuck", AbilitySpec::new("stuck"))
}

#[tokio::test]
async fn running_work_finishes_while_new_work_is_refused() {
    let mut server = start(config()).await;
    let mut c = server.client.clone();
    // The stuck execution holds the drain open until the test lets it go.
    let holder = submit(&mut c, request("stuck", "hold")).await;
    let mut stream = within(c.execute(request("chat", "one two three four five")))
        .await
        .unwrap()
        .into_inner();
    let first = within(stream.next()).await.unwrap().unwrap();
    assert_eq!(first.r#type, "execution.accepted");

    server.begin_shutdown();
    within(async {
        while metadata(&mut c).await.state() != pb::RuntimeState::Stopping {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let status = within(c.submit(request("chat", "too late")))
        .await
        .expect_err("no new work while stopping");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    // Over the wire, a retry policy's pushback: another replica may take it at once.
    let pushback = status.metadata().get("grpc-retry-pushback-ms");
    assert_eq!(pushback.and_then(|v| v.to_str().ok()), Some("100"));

    // The running execution completes and its stream gets the terminal event.
    let mut events = vec![first];
    events.extend(collect(stream).await);
    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    assert_eq!(text_of(&events), "one two three four five");

    cancel(&mut c, &holder.execution_id, "done").await;
    drop(c);
    server.stop().await;
}

fn short_drain() -> ConfigBuilder {
    hanging().drain_timeout(Duration::from_millis(100))
}

#[tokio::test]
async fn the_drain_timeout_cancels_what_is_left_and_watchers_see_it() {
    let mut server = start(short_drain()).await;
    let mut c = server.client.clone();
    let running = submit(&mut c, request("chat", "never answered")).await;
    until_provider(&mut c, "scripted", |p| p.in_flight == 1).await;
    let stream = within(c.watch(pb::WatchRequest {
        execution_id: running.execution_id.clone(),
        after_sequence: 0,
    }))
    .await
    .unwrap()
    .into_inner();
    drop(c);

    server.begin_shutdown();
    let events = collect(stream).await;

    assert_complete_sequence(&events);
    let last = events.last().unwrap();
    assert_eq!(
        (last.r#type.as_str(), last.state()),
        ("execution.failed", pb::ExecutionState::Cancelled)
    );
    let failed = failed_payload(&events);
    assert_eq!(failed.error.unwrap().code, "cancelled");
    assert!(
        !failed.cancel_reason.is_empty(),
        "shutdown says why it cancelled"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_never_hangs_up_does_not_keep_the_server_alive() {
    let mut server = start(short_drain()).await;
    // A health watch never ends on its own; the client keeps its connection open.
    let mut health = tonic_health::pb::health_client::HealthClient::new(server.channel.clone());
    let mut watch = within(health.watch(tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    }))
    .await
    .unwrap()
    .into_inner();
    let first = within(watch.next()).await.unwrap().unwrap();
    assert_eq!(
        first.status(),
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );

    server.begin_shutdown();
    let task = server.take_task();
    // Drain (100ms) plus the connection grace (5s), well within the bound.
    let result = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the server exits although a client holds a stream open");
    result.unwrap().unwrap();
    drop(watch);
}
