//! Buffered delivery end to end over gRPC, with both targets real HTTP servers on loopback: an
//! `openai` primary whose reply breaks after output began (cut, stalled, a malformed chunk)
//! and an `anthropic` fallback that answers whole. Under `DELIVERY_BUFFERED` the break is a
//! failure before commit, and a reply that began and broke is `interrupted` (it ran and was
//! ended, its outcome known), so with every setting at its default the execution falls back
//! and completes with the fallback's whole answer, and no output event of the broken attempt
//! is ever in the execution's log (which is append-only, so what a replay lacks no watcher
//! could ever have read). Its text is kept as that attempt's evidence. A primary that never
//! answers at all leaves its outcome unknown, and `on_unknown_outcome` (`stop` by default)
//! still decides. Under the default `DELIVERY_STREAMED` the same break ends the execution with
//! `output_interrupted`, as it always has.

use crate::common;

use std::time::Duration;

use common::adapters::{anthropic_at, data, env, openai_at};
use common::anthropic::{block_start, block_stop, message_delta, message_start, message_stop};
use common::upstream::{Step, Upstream, sse, sse_steps};
use common::{completed_result, execute, failed_payload, get, request, start_with, text_of, watch};
use model_runtime::config::{AbilitySpec, Delivery, OnUnknownOutcome, PolicySpec};
use model_runtime::pb::execution_event::Payload;
use model_runtime::{Config, pb};

/// An OpenAI chat completion chunk whose delta says `content`.
fn openai_delta(content: &str) -> Vec<u8> {
    let content = serde_json::json!(content);
    data(&format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{{"index":0,"delta":{{"content":{content}}},"finish_reason":null}}]}}"#
    ))
    .into_bytes()
}

/// The primary's reply: two pieces of an answer, then `end`.
fn breaks_with(end: Step) -> Vec<Step> {
    vec![
        Step::Send(openai_delta("The answer ")),
        Step::Send(openai_delta("is forty")),
        end,
    ]
}

/// The fallback's whole answer, `Hello!`.
fn anthropic_reply() -> Vec<String> {
    vec![
        message_start(r#"{"input_tokens":25,"output_tokens":1}"#),
        block_start(0, r#"{"type":"text","text":""}"#),
        common::anthropic::text_delta(0, "Hello"),
        common::anthropic::text_delta(0, "!"),
        block_stop(0),
        message_delta("end_turn", 15),
        message_stop(),
    ]
}

/// `oa/small` (idle timeout 300 ms, whose unknown outcomes `unknown` decides), then
/// `an/large`.
fn config(openai: &Upstream, anthropic: &Upstream, unknown: OnUnknownOutcome) -> Config {
    let primary = openai_at(&openai.base_url(), "small")
        .timeouts(
            Duration::from_secs(1),
            Duration::from_secs(2),
            Duration::from_millis(300),
        )
        .on_unknown_outcome(unknown);
    Config::builder()
        .provider("oa", primary)
        .provider("an", anthropic_at(&anthropic.base_url(), "large"))
        .policy("default", PolicySpec::new(&["oa/small", "an/large"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap()
}

fn with_delivery(delivery: pb::Delivery) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        delivery: delivery.into(),
        ..request("chat", "What is the answer?")
    }
}

/// Runs `request` on `config`: the events `Execute` streamed, a replay of the log from its
/// start, and the final view.
async fn run(
    config: Config,
    request: pb::ExecuteRequest,
) -> (
    Vec<pb::ExecutionEvent>,
    Vec<pb::ExecutionEvent>,
    pb::Execution,
) {
    let mut server = start_with(config).await;
    let live = execute(&mut server.client, request).await;
    let id = live[0].execution_id.clone();
    let replay = watch(&mut server.client, &id, 0).await;
    let view = get(&mut server.client, &id).await;
    server.stop().await;
    (live, replay, view)
}

/// Whether `events` hold an output event of attempt `attempt`.
fn has_output_of(events: &[pb::ExecutionEvent], attempt: u32) -> bool {
    events.iter().any(|e| match &e.payload {
        Some(Payload::TextDelta(d)) => d.attempt == attempt,
        Some(Payload::ToolCallStarted(t)) => t.attempt == attempt,
        Some(Payload::ToolCallArgumentsDelta(d)) => d.attempt == attempt,
        _ => false,
    })
}

/// A break after output began, buffered: the fallback's whole answer, nothing of the broken
/// attempt readable, its text kept as its evidence with the attempt's error `code`.
async fn falls_back_whole(end: Step, unknown: OnUnknownOutcome, code: &str) {
    let openai = Upstream::always(sse_steps(breaks_with(end))).await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let (live, replay, view) = run(
        config(&openai, &anthropic, unknown),
        with_delivery(pb::Delivery::Buffered),
    )
    .await;

    let result = completed_result(&live);
    assert_eq!((result.provider.as_str(), result.attempt), ("an", 2));
    assert_eq!(result.output.unwrap().text, "Hello!");
    assert_eq!(
        text_of(&live),
        "Hello!",
        "only the fallback's text was sent"
    );
    assert_eq!(live, replay, "the log holds what was streamed, no more");
    assert!(!has_output_of(&replay, 1), "{replay:#?}");

    let first = &view.attempts[0];
    assert_eq!(first.error.as_ref().unwrap().code, code);
    assert_eq!(first.next_action(), pb::NextAction::Fallback);
    assert!(!first.output_committed);
    let held = first.held_output.as_ref().expect("held output as evidence");
    assert_eq!(held.text, "The answer is forty");
    assert_eq!(
        view.limits.unwrap().delivery(),
        pb::Delivery::Buffered,
        "the limits say how output was delivered"
    );
    assert_eq!(openai.requests().len(), 1);
}

#[tokio::test]
async fn a_reply_cut_mid_way_falls_back_when_buffered() {
    // A reply that began and broke ran and was ended: it falls back, with unknown outcomes
    // at their default (`stop`).
    falls_back_whole(Step::Cut, OnUnknownOutcome::Stop, "stream_interrupted").await;
}

#[tokio::test]
async fn a_stalled_reply_falls_back_when_buffered() {
    falls_back_whole(Step::Stall, OnUnknownOutcome::Stop, "stream_stalled").await;
}

/// The mid-stream cut with every setting at its default (but the buffered delivery asked
/// for): the caller gets the fallback's whole answer.
#[tokio::test]
async fn a_buffered_mid_stream_cut_falls_back_at_every_default() {
    let openai = Upstream::always(sse_steps(breaks_with(Step::Cut))).await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let config = Config::builder()
        .provider("oa", openai_at(&openai.base_url(), "small"))
        .provider("an", anthropic_at(&anthropic.base_url(), "large"))
        .policy("default", PolicySpec::new(&["oa/small", "an/large"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap();
    let (live, replay, view) = run(config, with_delivery(pb::Delivery::Buffered)).await;
    assert_eq!(completed_result(&live).output.unwrap().text, "Hello!");
    assert!(!has_output_of(&replay, 1));
    let first = &view.attempts[0];
    assert_eq!(
        first.error.as_ref().unwrap().class(),
        pb::ErrorClass::Interrupted
    );
    assert_eq!(first.outcome(), pb::Outcome::Interrupted);
    assert_eq!(first.next_action(), pb::NextAction::Fallback);
}

#[tokio::test]
async fn a_malformed_chunk_falls_back_when_buffered() {
    // A malformed reply is this target's fault: it falls back whatever unknown outcomes do.
    let malformed = Step::Send(b"data: {\"choices\": [{\"delta\": \n\n".to_vec());
    falls_back_whole(malformed, OnUnknownOutcome::Stop, "protocol_error").await;
}

#[tokio::test]
async fn streamed_the_same_break_ends_the_execution_as_before() {
    let openai = Upstream::always(sse_steps(breaks_with(Step::Cut))).await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let config = config(&openai, &anthropic, OnUnknownOutcome::Fallback);
    for delivery in [pb::Delivery::Unspecified, pb::Delivery::Streamed] {
        let (live, _, view) = run(config.clone(), with_delivery(delivery)).await;
        let failure = failed_payload(&live);
        let error = failure.error.unwrap();
        assert_eq!(error.code, "output_interrupted");
        assert_eq!(text_of(&live), "The answer is forty", "streamed as it came");
        assert_eq!(failure.partial_output.unwrap().text, "The answer is forty");
        assert_eq!(view.attempts.len(), 1, "no fallback after output");
        assert!(view.attempts[0].output_committed);
        assert!(view.attempts[0].held_output.is_none());
        assert_eq!(view.limits.unwrap().delivery(), pb::Delivery::Streamed);
    }
    assert!(anthropic.requests().is_empty());
}

/// A primary that never answers (no status line): the provider may still be running the
/// request, so with `on_unknown_outcome` at its default the execution stops, buffered or not.
#[tokio::test]
async fn a_silent_primary_still_stops_on_its_unknown_outcome_by_default() {
    let openai = Upstream::always(common::upstream::Behaviour::Hang).await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let (live, replay, view) = run(
        config(&openai, &anthropic, OnUnknownOutcome::Stop),
        with_delivery(pb::Delivery::Buffered),
    )
    .await;
    let failure = failed_payload(&live);
    let error = failure.error.unwrap();
    assert_eq!(error.code, "outcome_unknown");
    assert_eq!(error.outcome(), pb::Outcome::Unknown);
    assert!(!has_output_of(&replay, 1), "nothing was exposed");
    assert_eq!(view.attempts[0].outcome(), pb::Outcome::Unknown);
    assert!(anthropic.requests().is_empty());
}

#[tokio::test]
async fn the_policy_default_is_shown_and_a_bad_value_is_refused() {
    let openai = Upstream::always(sse(&anthropic_reply())).await;
    let config = Config::builder()
        .provider("oa", openai_at(&openai.base_url(), "small"))
        .policy(
            "default",
            PolicySpec::new(&["oa/small"]).delivery(Delivery::Buffered),
        )
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap();
    let mut server = start_with(config).await;
    let metadata = common::metadata(&mut server.client).await;
    assert_eq!(metadata.policies[0].delivery(), pb::Delivery::Buffered);

    let bad = pb::ExecuteRequest {
        delivery: 7,
        ..request("chat", "hi")
    };
    let status = server.client.execute(bad).await.unwrap_err();
    common::assert_violation(&status, tonic::Code::InvalidArgument, "delivery");
    server.stop().await;
}
