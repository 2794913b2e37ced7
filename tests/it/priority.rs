//! Admission classes under saturation, over gRPC: a provider held at `max_concurrency` by a
//! backlog of batch executions still admits interactive ones within about one permit's
//! turnover, while the batch backlog drains in order and completes. Queue waits are read from
//! the events the server wrote (from `execution.routing` to `route.attempt.started`).

use crate::common;

use std::time::{Duration, SystemTime};

use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::execution_event::Payload;

fn config() -> Config {
    Config::builder()
        .max_executions(1000)
        .provider(
            "limited",
            ProviderSpec::scripted()
                .max_concurrency(2)
                .queue_capacity(200)
                .scripted_model("slow", &["text"], script(|s| s.first_delta_ms = 20)),
        )
        .policy("main", PolicySpec::new(&["limited/slow"]))
        .ability("chat", AbilitySpec::new("main"))
        .build()
        .unwrap()
}

fn with_priority(priority: pb::Priority) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        priority: priority.into(),
        ..request("chat", "hello")
    }
}

/// How long `events`' first attempt waited for admission.
fn queue_wait(events: &[pb::ExecutionEvent]) -> Duration {
    let time_of = |wanted: fn(&Payload) -> bool| {
        let event = events
            .iter()
            .find(|e| e.payload.as_ref().is_some_and(wanted))
            .unwrap();
        SystemTime::try_from(event.time.unwrap()).unwrap()
    };
    let routed = time_of(|p| matches!(p, Payload::Routing(_)));
    let started = time_of(|p| matches!(p, Payload::AttemptStarted(_)));
    started.duration_since(routed).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_executions_pass_a_batch_backlog_and_the_backlog_still_completes() {
    let mut server = start_with(config()).await;
    let mut batch = Vec::new();
    for _ in 0..60 {
        let view = submit(&mut server.client, with_priority(pb::Priority::Batch)).await;
        batch.push(view.execution_id);
    }
    let info = common::provider(&mut server.client, "limited").await;
    let waiting = info
        .queues
        .iter()
        .find(|q| q.priority() == pb::Priority::Batch)
        .unwrap();
    assert!(waiting.queued > 0, "the batch backlog waits: {info:?}");
    assert_eq!(waiting.capacity, 200);
    let oldest = waiting.oldest_wait.unwrap();
    assert!(oldest.seconds > 0 || oldest.nanos > 0, "{oldest:?}");

    let mut interactive = Vec::new();
    for _ in 0..8 {
        let view = submit(&mut server.client, with_priority(pb::Priority::Interactive)).await;
        interactive.push(view.execution_id);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }

    let waits = |ids: &[String]| {
        let ids = ids.to_vec();
        let client = server.client.clone();
        async move {
            let mut client = client;
            let mut waits = Vec::new();
            for id in ids {
                let events = watch(&mut client, &id, 0).await;
                assert!(
                    matches!(events.last().unwrap().payload, Some(Payload::Completed(_))),
                    "{id} did not complete"
                );
                waits.push(queue_wait(&events));
            }
            waits
        }
    };
    let interactive = waits(&interactive).await;
    let batch = waits(&batch).await;
    let longest = |w: &[Duration]| w.iter().max().copied().unwrap();
    assert!(
        longest(&interactive) * 4 < longest(&batch),
        "interactive waited up to {:?}, batch up to {:?}",
        longest(&interactive),
        longest(&batch)
    );
    server.stop().await;
}
