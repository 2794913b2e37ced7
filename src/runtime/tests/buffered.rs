//! Buffered delivery through the embedded runtime: an attempt's output is held until it
//! completes, so a failure at any point of it may still fall back, and nothing a failed
//! attempt produced is ever readable as output.

use std::time::{Duration, SystemTime};

use super::{events_after, finish, request, script, types};
use crate::config::{AbilitySpec, Config, PolicySpec, ProviderSpec};
use crate::execution::{
    Delivery, ErrorCode, Event, EventPayload, ExecuteRequest, ExecutionState, NextAction,
};
use crate::runtime::Runtime;

/// Provider `a`: `breaks` fails after two deltas, `thinks-then-breaks` reasons first,
/// `slow` streams a delta every 50 ms; `echo` answers whole. Policy `buffered` makes
/// buffered delivery its default; `max_output_bytes` bounds each execution.
fn config(max_output_bytes: usize) -> Config {
    let text = &["text"][..];
    Config::builder()
        .max_output_bytes(max_output_bytes)
        .provider(
            "a",
            ProviderSpec::scripted()
                .model("echo", text)
                .scripted_model("breaks", text, script(|s| s.fail_after_deltas = Some(2)))
                .scripted_model(
                    "thinks-then-breaks",
                    text,
                    script(|s| {
                        s.reasoning = Some("let me see".into());
                        s.fail_after_deltas = Some(1);
                    }),
                )
                .scripted_model("slow", text, script(|s| s.delta_interval_ms = 50)),
        )
        .policy("breaks", PolicySpec::new(&["a/breaks", "a/echo"]))
        .policy(
            "thinks",
            PolicySpec::new(&["a/thinks-then-breaks", "a/echo"]),
        )
        .policy("slow", PolicySpec::new(&["a/slow"]))
        .policy("echo", PolicySpec::new(&["a/echo"]))
        .policy(
            "buffered",
            PolicySpec::new(&["a/breaks", "a/echo"]).delivery(Delivery::Buffered),
        )
        .ability(
            "chat",
            AbilitySpec::new("breaks").allowed_policies(&["thinks", "slow", "echo", "buffered"]),
        )
        .build()
        .unwrap()
}

fn buffered(policy: &str, prompt: &str) -> ExecuteRequest {
    ExecuteRequest {
        delivery: Some(Delivery::Buffered),
        ..request(policy, prompt)
    }
}

/// The output events of `events`.
fn outputs(events: &[Event]) -> Vec<&Event> {
    events.iter().filter(|e| e.payload.is_output()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_reply_that_breaks_mid_way_falls_back_and_none_of_it_is_exposed() {
    let rt = Runtime::new(config(1 << 20)).unwrap();
    let (view, events) = finish(&rt, buffered("breaks", "one two three")).await;
    assert_eq!(view.state, ExecutionState::Succeeded, "{:?}", view.error);
    assert_eq!(view.result.as_ref().unwrap().output.text, "one two three");
    assert_eq!(view.limits.delivery, Delivery::Buffered);

    let first = &view.attempts[0];
    assert_eq!(first.next_action, Some(NextAction::Fallback));
    assert!(!first.output_committed, "held output is not exposed");
    assert_eq!(
        first.held_output.text, "one two ",
        "kept as the attempt's evidence"
    );
    assert!(view.partial_output.is_empty());

    // Every output event is the fallback's, and they come together just before the end.
    let outputs = outputs(&events);
    assert!(
        outputs
            .iter()
            .all(|e| matches!(e.payload, EventPayload::TextDelta { attempt: 2, .. }))
    );
    let tail = &types(&events)[events.len() - outputs.len() - 1..];
    assert!(
        tail[..outputs.len()]
            .iter()
            .all(|t| *t == "output.text.delta")
    );
    assert_eq!(tail[outputs.len()], "execution.completed");
}

#[tokio::test(start_paused = true)]
async fn reasoning_streams_live_while_the_output_is_held() {
    let rt = Runtime::new(config(1 << 20)).unwrap();
    let (view, events) = finish(&rt, buffered("thinks", "one two")).await;
    assert_eq!(view.state, ExecutionState::Succeeded);
    let failed_at = events
        .iter()
        .position(|e| matches!(e.payload, EventPayload::AttemptFailed(_)))
        .unwrap();
    assert!(
        events[..failed_at]
            .iter()
            .any(|e| matches!(e.payload, EventPayload::ReasoningDelta { attempt: 1, .. })),
        "the failed attempt's reasoning was streamed as it came: it commits nothing"
    );
    assert_eq!(view.attempts[0].held_output.text, "one ");
    assert!(
        view.attempts[0].held_output.reasoning.is_empty(),
        "reasoning was never held"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempts_held_output_leaves_the_next_attempt_the_whole_room() {
    // "aaaa bbbb cccc" is 14 bytes: the first attempt holds 10 of them, then fails.
    let rt = Runtime::new(config(14)).unwrap();
    let (view, _) = finish(&rt, buffered("breaks", "aaaa bbbb cccc")).await;
    assert_eq!(view.state, ExecutionState::Succeeded, "{:?}", view.error);
    assert_eq!(view.result.unwrap().output.text, "aaaa bbbb cccc");
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_the_output_bound_keeps_what_it_held_as_evidence() {
    let rt = Runtime::new(config(8)).unwrap();
    let (view, events) = finish(&rt, buffered("echo", "aaaa bbbb cccc")).await;
    assert_eq!(view.error.as_ref().unwrap().code, ErrorCode::OutputTooLarge);
    assert!(outputs(&events).is_empty());
    assert_eq!(view.attempts[0].held_output.text, "aaaa ");
    assert!(view.partial_output.is_empty(), "nothing was exposed");
}

#[tokio::test(start_paused = true)]
async fn the_deadline_cuts_a_held_reply_without_exposing_it() {
    let rt = Runtime::new(config(1 << 20)).unwrap();
    let request = ExecuteRequest {
        deadline: Some(SystemTime::now() + Duration::from_millis(120)),
        ..buffered("slow", "one two three four five six")
    };
    let (view, events) = finish(&rt, request).await;
    let error = view.error.as_ref().unwrap();
    assert_eq!(error.code, ErrorCode::DeadlineExceeded);
    assert!(outputs(&events).is_empty());
    let held = &view.attempts[0].held_output.text;
    assert!(held.starts_with("one two "), "{held:?}");
    assert!(!view.attempts[0].output_committed);
}

#[tokio::test(start_paused = true)]
async fn the_policy_sets_the_default_delivery_and_a_request_may_choose() {
    let rt = Runtime::new(config(1 << 20)).unwrap();
    let (view, events) = finish(&rt, request("buffered", "one two three")).await;
    assert_eq!(view.limits.delivery, Delivery::Buffered);
    assert_eq!(view.state, ExecutionState::Succeeded);
    assert_eq!(view.attempts[0].held_output.text, "one two ");
    assert!(
        outputs(&events)
            .iter()
            .all(|e| !matches!(e.payload, EventPayload::TextDelta { attempt: 1, .. }))
    );

    let streamed = ExecuteRequest {
        delivery: Some(Delivery::Streamed),
        ..request("buffered", "one two three")
    };
    let view = rt.submit(streamed).await.unwrap();
    let events = events_after(&rt, view.id, 0).await;
    let view = rt.get(view.id).await.unwrap();
    assert_eq!(view.limits.delivery, Delivery::Streamed);
    assert_eq!(view.error.unwrap().code, ErrorCode::OutputInterrupted);
    assert_eq!(outputs(&events).len(), 2, "streamed as they came");
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempts_evidence_is_its_first_64_kib() {
    let long = "x".repeat(100_000);
    let config = Config::builder()
        .provider(
            "a",
            ProviderSpec::scripted()
                .model("echo", &["text"])
                .scripted_model(
                    "long-then-breaks",
                    &["text"],
                    script(|s| {
                        s.reply = Some(format!("{long} tail"));
                        s.fail_after_deltas = Some(1);
                    }),
                ),
        )
        .policy("main", PolicySpec::new(&["a/long-then-breaks", "a/echo"]))
        .ability("chat", AbilitySpec::new("main"))
        .build()
        .unwrap();
    let rt = Runtime::new(config).unwrap();
    let (view, _) = finish(&rt, buffered("main", "short answer")).await;
    assert_eq!(view.state, ExecutionState::Succeeded);
    assert_eq!(view.attempts[0].held_output.text.len(), 64 << 10);
    assert_eq!(view.result.unwrap().output.text, "short answer");
}
