//! The deadline bounds every wait: a running attempt is cut, a queued one leaves the queue.
//! The policy's retry budget bounds trying (a queue wait, a retry wait), never an attempt
//! already sent. The execution fails with the code naming which limit hit.

use crate::common;

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
            PolicySpec::new(&["scripted/stuck"])
                .retry_budget(Duration::from_millis(150))
                .min_attempt_time(Duration::from_millis(50)),
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
async fn the_retry_budget_takes_a_waiter_out_of_the_queue() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    let holder = submit(c, request("chat", "hold the permit")).await;
    until_provider(c, "scripted", |p| p.in_flight == 1).await;
    let mut req = request("chat", "budgeted");
    req.policy = "short".into();
    let events = execute(c, req).await;

    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().state(), S::Failed);
    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "retry_budget_exhausted");
    assert_eq!(error.outcome(), pb::Outcome::NotStarted);
    cancel(c, &holder.execution_id, "done").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_budget_does_not_cut_an_attempt_already_sent() {
    let mut server = start(config()).await;
    let mut req = request("chat", "thinking");
    req.policy = "short".into();
    // The attempt outlives the 150 ms budget; only the deadline ends it.
    req.deadline = Some(deadline_in(Duration::from_millis(600)));
    let started = std::time::Instant::now();
    let events = execute(&mut server.client, req).await;

    assert!(started.elapsed() >= Duration::from_millis(500));
    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "deadline_exceeded");
    assert_eq!(error.outcome(), pb::Outcome::Unknown);
    let view = get(&mut server.client, &events[0].execution_id).await;
    assert_eq!(view.attempts.len(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_thinks_past_the_budget_over_http_still_answers() {
    use common::adapters::{anthropic_at, env, event};
    use common::upstream::{Step, Upstream, sse_steps};
    // A real anthropic-format upstream that starts its message at once, then thinks for
    // 1.5 s before the first text; the policy's budget is 500 ms.
    let reply = |e: &str, json: &str| Step::Send(event(e, json).into_bytes());
    let upstream = Upstream::always(sse_steps(vec![
        reply(
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}"#,
        ),
        Step::Sleep(Duration::from_millis(1_500)),
        reply(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        reply(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"42"}}"#,
        ),
        reply("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        reply(
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}"#,
        ),
        reply("message_stop", r#"{"type":"message_stop"}"#),
    ]))
    .await;
    let config = Config::builder()
        .provider("an", anthropic_at(&upstream.base_url(), "m"))
        .policy(
            "default",
            PolicySpec::new(&["an/m"])
                .retry_budget(Duration::from_millis(500))
                .min_attempt_time(Duration::from_millis(100)),
        )
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap();
    let mut server = start_with(config).await;
    let events = execute(&mut server.client, request("chat", "think")).await;

    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().state(), S::Succeeded);
    assert_eq!(text_of(&events), "42");
    server.stop().await;
}
