//! The `anthropic` adapter against a local server speaking Anthropic messages streaming, with
//! the events of Anthropic's documented examples.

use crate::common;

use common::adapters::{
    KEY, assert_error, assert_mentions, call, config, estimated, event, provider, reported, spec,
    split, text,
};
use common::anthropic::{
    block_start, block_stop, json_delta, message_delta, message_start, message_stop, ping,
    text_delta,
};
use common::upstream::{Upstream, sse};
use model_runtime::execution::UsageUnit;
use model_runtime::execution::{ErrorClass, FinishReason, ReasoningPiece};
use model_runtime::provider::ProviderEvent;

#[tokio::test]
async fn streams_text_with_usage_and_sends_a_streaming_request() {
    let server = Upstream::always(sse(&[
        message_start(r#"{"input_tokens":25,"output_tokens":1}"#),
        block_start(0, r#"{"type":"text","text":""}"#),
        ping(),
        text_delta(0, "Hello"),
        text_delta(0, "!"),
        block_stop(0),
        message_delta("end_turn", 15),
        message_stop(),
    ]))
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            text("Hello"),
            text("!"),
            reported(UsageUnit::INPUT_TOKENS, 25),
            reported(UsageUnit::OUTPUT_TOKENS, 15),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
    let request = &server.requests()[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    let body = request.json();
    assert_eq!(body["model"], "m");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(
        body["messages"],
        serde_json::json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );
}

#[tokio::test]
async fn streams_tool_use_with_input_json_deltas() {
    let pieces = [
        "",
        "{\"location\":",
        " \"San",
        " Francisc",
        "o,",
        " CA\"",
        ", ",
        "\"unit\": \"fah",
        "renheit\"}",
    ];
    let mut stream = vec![
        message_start(r#"{"input_tokens":472,"output_tokens":2}"#),
        block_start(0, r#"{"type":"text","text":""}"#),
        ping(),
        text_delta(0, "Okay"),
        text_delta(0, ", let's check the weather for San Francisco, CA:"),
        block_stop(0),
        block_start(
            1,
            r#"{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}"#,
        ),
    ];
    stream.extend(pieces.iter().map(|p| json_delta(1, p)));
    stream.extend([block_stop(1), message_delta("tool_use", 89), message_stop()]);
    let server = Upstream::always(sse(&stream)).await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    let mut expected = vec![
        text("Okay"),
        text(", let's check the weather for San Francisco, CA:"),
        ProviderEvent::ToolCallStarted {
            index: 0,
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            name: "get_weather".into(),
        },
    ];
    // The empty first piece carries nothing and is not an event.
    expected.extend(
        pieces[1..]
            .iter()
            .map(|p| ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: (*p).into(),
            }),
    );
    expected.extend([
        reported(UsageUnit::INPUT_TOKENS, 472),
        reported(UsageUnit::OUTPUT_TOKENS, 89),
        ProviderEvent::Finished(FinishReason::ToolCalls),
    ]);
    assert_eq!(events, expected);
}

#[tokio::test]
async fn a_tool_call_without_streamed_input_gets_its_start_input() {
    let server = Upstream::always(sse(&[
        message_start(r#"{"input_tokens":10,"output_tokens":1}"#),
        block_start(
            0,
            r#"{"type":"tool_use","id":"toolu_1","name":"now","input":{}}"#,
        ),
        block_stop(0),
        message_delta("tool_use", 5),
        message_stop(),
    ]))
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let (events, _) = split(call(&p).await);
    assert_eq!(
        events[1],
        ProviderEvent::ToolCallArgumentsDelta {
            index: 0,
            delta: "{}".into(),
        }
    );
}

#[tokio::test]
async fn cache_usage_counts_in_input_and_as_its_parts() {
    let server = Upstream::always(sse(&[
        message_start(
            r#"{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":1}"#,
        ),
        block_start(0, r#"{"type":"text","text":""}"#),
        text_delta(0, "ok"),
        block_stop(0),
        message_delta("max_tokens", 3),
        message_stop(),
    ]))
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(
        events[1..],
        [
            reported(UsageUnit::INPUT_TOKENS, 1210),
            reported(UsageUnit::CACHED_INPUT_TOKENS, 1000),
            reported(UsageUnit::CACHE_WRITE_INPUT_TOKENS, 200),
            reported(UsageUnit::OUTPUT_TOKENS, 3),
            ProviderEvent::Finished(FinishReason::Length),
        ]
    );
}

#[tokio::test]
async fn an_error_event_is_classified_before_and_after_output() {
    let overloaded = event(
        "error",
        r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
    );
    // Before output: retryable, like HTTP 529.
    let server = Upstream::always(sse(&[
        message_start(r#"{"input_tokens":25,"output_tokens":1}"#),
        ping(),
        overloaded.clone(),
    ]))
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(events, vec![reported(UsageUnit::INPUT_TOKENS, 25)]);
    let error = error.expect("an error");
    assert_error(&error, ErrorClass::Retryable, "overloaded", "");
    // After output: the same error ends the call; the usage known so far is still reported.
    let server = Upstream::always(sse(&[
        message_start(r#"{"input_tokens":25,"output_tokens":1}"#),
        block_start(0, r#"{"type":"text","text":""}"#),
        text_delta(0, "Hel"),
        overloaded,
    ]))
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(
        events,
        vec![
            text("Hel"),
            reported(UsageUnit::INPUT_TOKENS, 25),
            estimated(UsageUnit::OUTPUT_TOKENS, 1),
        ]
    );
    assert_eq!(error.expect("an error").code.as_str(), "overloaded");
}

#[tokio::test]
async fn stop_reasons_map_to_the_runtime_enum() {
    for (wire, reason) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("tool_use", FinishReason::ToolCalls),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other),
    ] {
        let server = Upstream::always(sse(&[
            message_start(r#"{"input_tokens":1,"output_tokens":1}"#),
            message_delta(wire, 1),
            message_stop(),
        ]))
        .await;
        let p = provider(&config(spec("anthropic", &server.base_url())));
        let (events, _) = split(call(&p).await);
        assert_eq!(
            events.last(),
            Some(&ProviderEvent::Finished(reason)),
            "{wire}"
        );
    }
}

#[tokio::test]
async fn thinking_is_streamed_as_reasoning_and_unknown_events_are_skipped() {
    let server = Upstream::always(sse(&[
        message_start(r#"{"input_tokens":1,"output_tokens":1}"#),
        block_start(0, r#"{"type":"thinking","thinking":"","signature":""}"#),
        event(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
        ),
        event(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}"#,
        ),
        block_stop(0),
        block_start(1, r#"{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}"#),
        block_stop(1),
        event("brand_new_event", r#"{"type":"brand_new_event"}"#),
        block_start(2, r#"{"type":"citations_of_the_future","x":1}"#),
        block_stop(2),
        block_start(3, r#"{"type":"text","text":""}"#),
        text_delta(3, "answer"),
        block_stop(3),
        message_delta("end_turn", 2),
        message_stop(),
    ]))
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(
        events[..5],
        [
            ProviderEvent::Reasoning(ReasoningPiece::Text, "hmm".into()),
            ProviderEvent::Reasoning(ReasoningPiece::Signature, "EqQBCgIYAhIM".into()),
            ProviderEvent::Reasoning(ReasoningPiece::Redacted, "EmwKAhgBEgy3va3pzix".into()),
            // A block kind it does not know is skipped, and says so.
            ProviderEvent::Progress(
                "skipped a content block of a kind this adapter does not know: \
                 citations_of_the_future"
                    .into()
            ),
            text("answer"),
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::Stop))
    );
}

#[tokio::test]
async fn extreme_block_indexes_and_overflowing_counts_are_handled() {
    // The largest index a block can have is looked up like any other, allocating nothing by it.
    let last = u32::MAX;
    let server = Upstream::always(sse(&[
        message_start(r#"{"input_tokens":1,"output_tokens":1}"#),
        block_start(
            last,
            r#"{"type":"tool_use","id":"toolu_1","name":"f","input":{}}"#,
        ),
        json_delta(last, r#"{"a":1}"#),
        block_stop(last),
        message_delta("tool_use", 3),
        message_stop(),
    ]))
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert!(events.contains(&ProviderEvent::ToolCallStarted {
        index: 0,
        id: "toolu_1".into(),
        name: "f".into(),
    }));
    // Counts whose sum does not fit a u64 are a malformed reply, not a wrapped number.
    let server = Upstream::always(sse(&[message_start(&format!(
        r#"{{"input_tokens":{},"cache_read_input_tokens":2,"output_tokens":1}}"#,
        u64::MAX
    ))]))
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let error = split(call(&p).await).1.expect("an error");
    assert_error(&error, ErrorClass::Interrupted, "protocol_error", "");
    assert_mentions(&error, "overflow");
}
