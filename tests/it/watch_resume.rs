//! `Watch` is a resumable cursor over one execution's events: it replays what follows
//! `after_sequence`, follows live events and ends after the terminal one. Closing a stream
//! never cancels the execution. (docs/protocol.md: CURSOR-1..4.)

use crate::common;

use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use tonic::Code;

/// An echo model slow enough that watchers join while it runs.
fn slow() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model(
                "slow",
                &["text"],
                script(|s| {
                    s.first_delta_ms = 20;
                    s.delta_interval_ms = 20;
                }),
            ),
        )
        .policy("default", PolicySpec::new(&["scripted/slow"]))
        .ability("chat", AbilitySpec::new("default"))
}

const PROMPT: &str = "one two three four five six seven eight";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_zero_after_submit_gives_the_whole_sequence() {
    let mut server = start(slow()).await;
    let submitted = submit(&mut server.client, request("chat", PROMPT)).await;

    let events = watch(&mut server.client, &submitted.execution_id, 0).await;

    assert_complete_sequence(&events);
    assert_eq!(events[0].execution_id, submitted.execution_id);
    assert_eq!(events[0].r#type, "execution.accepted");
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    assert_eq!(text_of(&events), PROMPT);
    server.stop().await;
}

#[tokio::test]
async fn watch_from_the_middle_gives_exactly_the_rest() {
    let mut server = start(echo()).await;
    let full = execute(&mut server.client, request("chat", PROMPT)).await;
    let id = full[0].execution_id.clone();
    let n = full.len() as u64;

    for k in [1, n / 2, n - 1] {
        let rest = watch(&mut server.client, &id, k).await;
        assert_eq!(rest, full[k as usize..], "watch after {k}");
        assert_eq!(rest[0].sequence, k + 1);
    }
    server.stop().await;
}

#[tokio::test]
async fn watch_of_a_finished_execution_replays_and_ends() {
    let mut server = start(echo()).await;
    let streamed = execute(&mut server.client, request("chat", PROMPT)).await;
    let id = streamed[0].execution_id.clone();
    let last = streamed.last().unwrap().sequence;

    let replayed = watch(&mut server.client, &id, 0).await;
    assert_eq!(
        replayed, streamed,
        "a replay is the same events, times included"
    );

    let after_end = watch(&mut server.client, &id, last).await;
    assert!(after_end.is_empty(), "nothing follows the terminal event");
    server.stop().await;
}

#[tokio::test]
async fn watch_past_the_end_is_out_of_range() {
    let mut server = start(echo()).await;
    let events = execute(&mut server.client, request("chat", PROMPT)).await;
    let id = events[0].execution_id.clone();
    let last = events.last().unwrap().sequence;

    let status = within(server.client.watch(pb::WatchRequest {
        execution_id: id,
        after_sequence: last + 1,
    }))
    .await
    .expect_err("a cursor past the end is refused");
    assert_violation(&status, Code::OutOfRange, "after_sequence");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_watchers_see_identical_sequences() {
    let mut server = start(slow()).await;
    let submitted = submit(&mut server.client, request("chat", PROMPT)).await;

    let watchers: Vec<_> = (0..20)
        .map(|_| {
            let mut client = server.client.clone();
            let id = submitted.execution_id.clone();
            tokio::spawn(async move { watch(&mut client, &id, 0).await })
        })
        .collect();
    let mut seen = Vec::new();
    for watcher in watchers {
        seen.push(within(watcher).await.unwrap());
    }

    assert_complete_sequence(&seen[0]);
    assert_eq!(text_of(&seen[0]), PROMPT);
    for (i, events) in seen.iter().enumerate() {
        assert_eq!(events, &seen[0], "watcher {i} saw a different sequence");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_execute_early_does_not_cancel_the_execution() {
    let mut server = start(slow()).await;
    let mut stream = within(server.client.execute(request("chat", PROMPT)))
        .await
        .unwrap()
        .into_inner();
    // Read up to the first output, then hang up.
    let mut seen = Vec::new();
    while let Some(event) = within(stream.next()).await {
        let event = event.unwrap();
        let is_output = event.r#type == "output.text.delta";
        seen.push(event);
        if is_output {
            break;
        }
    }
    drop(stream);
    let id = seen[0].execution_id.clone();
    let cursor = seen.last().unwrap().sequence;

    let rest = watch(&mut server.client, &id, cursor).await;
    assert_eq!(
        rest[0].sequence,
        cursor + 1,
        "the cursor resumes right after the last seen"
    );
    let mut all = seen;
    all.extend(rest);
    assert_complete_sequence(&all);
    assert_eq!(all.last().unwrap().r#type, "execution.completed");
    assert_eq!(text_of(&all), PROMPT);

    let view = get(&mut server.client, &id).await;
    assert_eq!(view.state(), pb::ExecutionState::Succeeded);
    assert_eq!(view.last_sequence, all.len() as u64);
    server.stop().await;
}
