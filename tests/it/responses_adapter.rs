//! The `openai-responses` adapter against a local server speaking the Responses API's stream:
//! the request it sends (stateless, reasoning sent back encrypted), and how each way a reply
//! ends maps (incomplete, failed, an error event, a refusal). The streams of OpenAI's own
//! documentation are replayed in `stream_fixtures.rs`; the failures every HTTP adapter shares
//! are in `http_adapter_failures.rs`.

use crate::common;

use std::time::Duration;

use common::adapters::{
    KEY, assert_error, call, call_with, config, event, provider, reported, spec, split, text,
};
use common::upstream::{Upstream, sse};
use model_runtime::execution::{
    ContentPart, ErrorClass, ExecutionInput, FinishReason, GenerationParameters, Message,
    Reasoning, Role, ToolCall, ToolDefinition, UsageUnit,
};
use model_runtime::provider::ProviderEvent;

/// An event of type `kind` with these further fields.
fn ev(kind: &str, fields: &str) -> String {
    event(kind, &format!(r#"{{"type":"{kind}",{fields}}}"#))
}

fn created() -> String {
    ev(
        "response.created",
        r#""sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5","output":[],"usage":null}"#,
    )
}

fn delta(text: &str) -> String {
    ev(
        "response.output_text.delta",
        &format!(
            r#""output_index":0,"content_index":0,"delta":{}"#,
            serde_json::json!(text)
        ),
    )
}

const USAGE: &str = r#""usage":{"input_tokens":5,"output_tokens":3,"total_tokens":8}"#;

fn completed() -> String {
    ev(
        "response.completed",
        &format!(r#""response":{{"id":"resp_1","status":"completed",{USAGE}}}"#),
    )
}

#[tokio::test]
async fn sends_a_stateless_streaming_request_with_reasoning_back_encrypted() {
    let server = Upstream::always(sse(&[created(), delta("ok"), completed()])).await;
    let p = provider(&config(spec("openai-responses", &server.base_url())));
    let assistant = Message {
        role: Role::Assistant,
        content: vec![
            ContentPart::Reasoning(Reasoning {
                text: "thought".into(),
                signature: "rs_1:ENCRYPTED".into(),
                redacted: String::new(),
            }),
            ContentPart::Text("calling".into()),
        ],
        tool_calls: vec![ToolCall {
            id: "call_1".into(),
            name: "lookup".into(),
            arguments_json: r#"{"q":"x"}"#.into(),
        }],
        tool_call_id: None,
    };
    let tool = Message {
        role: Role::Tool,
        content: vec![ContentPart::Text("found".into())],
        tool_calls: Vec::new(),
        tool_call_id: Some("call_1".into()),
    };
    let input = ExecutionInput {
        messages: vec![
            Message {
                role: Role::System,
                ..Message::user("be brief")
            },
            Message::user("hi"),
            assistant,
            tool,
        ],
        tools: vec![ToolDefinition {
            name: "lookup".into(),
            description: "Looks up".into(),
            parameters_json_schema: r#"{"type":"object"}"#.into(),
        }],
        parameters: GenerationParameters {
            max_output_tokens: Some(64),
            reasoning_budget_tokens: Some(4000),
            ..Default::default()
        },
    };
    let (events, error) = split(call_with(&p, input, Duration::from_secs(60)).await);
    assert_eq!(error, None);
    assert_eq!(events[0], text("ok"));
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/responses");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = request.json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["store"], false);
    assert_eq!(
        body["include"],
        serde_json::json!(["reasoning.encrypted_content"])
    );
    assert_eq!(body["max_output_tokens"], 64);
    assert_eq!(
        body["reasoning"],
        serde_json::json!({"effort": "medium", "summary": "auto"})
    );
    assert_eq!(
        body["tools"][0],
        serde_json::json!({"type": "function", "name": "lookup", "description": "Looks up",
            "parameters": {"type": "object"}, "strict": false})
    );
    assert_eq!(
        body["input"],
        serde_json::json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENCRYPTED",
                "summary": [{"type": "summary_text", "text": "thought"}]},
            {"role": "assistant", "content": "calling"},
            {"type": "function_call", "call_id": "call_1", "name": "lookup",
                "arguments": "{\"q\":\"x\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "found"},
        ])
    );
}

#[tokio::test]
async fn stop_sequences_are_refused_by_this_target_alone() {
    let server = Upstream::always(sse(&[completed()])).await;
    let p = provider(&config(spec("openai-responses", &server.base_url())));
    let input = ExecutionInput {
        messages: vec![Message::user("hi")],
        parameters: GenerationParameters {
            stop_sequences: vec!["END".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    let (_, error) = split(call_with(&p, input, Duration::from_secs(60)).await);
    let error = error.expect("an error");
    assert_error(&error, ErrorClass::Rejected, "invalid_request", "stop");
    assert!(server.requests().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn an_incomplete_reply_finishes_as_its_reason_says() {
    for (reason, finish) in [
        ("max_output_tokens", FinishReason::Length),
        ("content_filter", FinishReason::ContentFilter),
    ] {
        let incomplete = ev(
            "response.incomplete",
            &format!(
                r#""response":{{"id":"resp_1","status":"incomplete","incomplete_details":{{"reason":"{reason}"}},{USAGE}}}"#
            ),
        );
        let server = Upstream::always(sse(&[created(), delta("par"), incomplete])).await;
        let p = provider(&config(spec("openai-responses", &server.base_url())));
        let (events, error) = split(call(&p).await);
        assert_eq!(error, None);
        assert_eq!(
            events,
            [
                text("par"),
                reported(UsageUnit::INPUT_TOKENS, 5),
                reported(UsageUnit::OUTPUT_TOKENS, 3),
                ProviderEvent::Finished(finish),
            ]
        );
    }
}

#[tokio::test]
async fn a_failed_reply_and_an_error_event_are_classified_by_their_code() {
    let failed = |code: &str| {
        ev(
            "response.failed",
            &format!(
                r#""response":{{"id":"resp_1","status":"failed","error":{{"code":"{code}","message":"went wrong"}}}}"#
            ),
        )
    };
    let cases = [
        (failed("server_error"), ErrorClass::Retryable, "internal"),
        (
            failed("rate_limit_exceeded"),
            ErrorClass::Retryable,
            "rate_limited",
        ),
        (
            failed("invalid_prompt"),
            ErrorClass::Rejected,
            "invalid_request",
        ),
        (
            ev(
                "error",
                r#""code":"rate_limit_exceeded","message":"slow down","param":null"#,
            ),
            ErrorClass::Retryable,
            "rate_limited",
        ),
    ];
    for (ending, class, code) in cases {
        let server = Upstream::always(sse(&[created(), ending.clone()])).await;
        let p = provider(&config(spec("openai-responses", &server.base_url())));
        let (events, error) = split(call(&p).await);
        assert!(events.is_empty(), "{events:?}");
        assert_error(&error.expect("an error"), class, code, &ending);
    }
}

/// What a reply that failed used is its usage (not an estimate); the error event in the
/// shape OpenAI sends it (`{"type": "error", "error": {...}}`) is classified by its code; a
/// nested error with only a `type` by its type.
#[tokio::test]
async fn a_failed_reply_reports_its_usage_and_a_nested_error_is_classified() {
    let failed = ev(
        "response.failed",
        &format!(
            r#""response":{{"id":"resp_1","status":"failed","error":{{"code":"server_error","message":"boom"}},{USAGE}}}"#
        ),
    );
    let server = Upstream::always(sse(&[created(), delta("Hi"), failed])).await;
    let p = provider(&config(spec("openai-responses", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(
        events,
        [
            text("Hi"),
            reported(UsageUnit::INPUT_TOKENS, 5),
            reported(UsageUnit::OUTPUT_TOKENS, 3),
        ]
    );
    assert_error(
        &error.expect("an error"),
        ErrorClass::Retryable,
        "internal",
        "failed",
    );
    for nested in [
        r#""error":{"type":"tokens","code":"rate_limit_exceeded","message":"slow down","param":null}"#,
        r#""error":{"type":"rate_limit_exceeded","message":"slow down"}"#,
    ] {
        let server = Upstream::always(sse(&[created(), ev("error", nested)])).await;
        let p = provider(&config(spec("openai-responses", &server.base_url())));
        let (_, error) = split(call(&p).await);
        assert_error(
            &error.expect("an error"),
            ErrorClass::Retryable,
            "rate_limited",
            nested,
        );
    }
}

/// A function call a server announces only in `response.output_item.done` (no `.added`) is
/// still the reply's tool call: it starts there, with its arguments, and the reply finishes
/// with tool calls.
#[tokio::test]
async fn a_function_call_seen_only_when_its_item_is_done_is_kept() {
    let done = ev(
        "response.output_item.done",
        r#""output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"q\":1}","status":"completed"}"#,
    );
    let server = Upstream::always(sse(&[created(), done, completed()])).await;
    let p = provider(&config(spec("openai-responses", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(
        events[..2],
        [
            ProviderEvent::ToolCallStarted {
                index: 0,
                id: "call_1".into(),
                name: "lookup".into(),
            },
            ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: r#"{"q":1}"#.into(),
            },
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::ToolCalls))
    );
}

#[tokio::test]
async fn a_refusal_keeps_its_text_and_finishes_as_a_refusal() {
    let refusal = |piece: &str| {
        ev(
            "response.refusal.delta",
            &format!(
                r#""output_index":0,"content_index":0,"delta":{}"#,
                serde_json::json!(piece)
            ),
        )
    };
    let server = Upstream::always(sse(&[
        created(),
        refusal("I can't"),
        refusal(" help with that."),
        completed(),
    ]))
    .await;
    let p = provider(&config(spec("openai-responses", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(events[..2], [text("I can't"), text(" help with that.")]);
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::Refusal))
    );
}

#[tokio::test]
async fn arguments_for_an_item_that_is_no_function_call_are_a_protocol_error() {
    let stray = ev(
        "response.function_call_arguments.delta",
        r#""output_index":3,"delta":"{}""#,
    );
    let server = Upstream::always(sse(&[created(), stray])).await;
    let p = provider(&config(spec("openai-responses", &server.base_url())));
    let (_, error) = split(call(&p).await);
    assert_error(
        &error.expect("an error"),
        ErrorClass::Interrupted,
        "protocol_error",
        "stray arguments",
    );
}

/// Through the runtime: what of a Responses stream commits the execution. Preamble, an opened
/// message item and reasoning commit nothing, so a failure after them falls back to the next
/// target; output text and an opened function call commit, so a failure after them ends the
/// execution with `output_interrupted`.
#[tokio::test]
async fn the_commit_rule_holds_for_each_event_type() {
    use common::{completed_result, execute, failed_payload, request, start_with};
    use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};

    let failed = ev(
        "response.failed",
        r#""response":{"status":"failed","error":{"code":"server_error","message":"boom"}}"#,
    );
    let message = ev(
        "response.output_item.added",
        r#""output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}"#,
    );
    let reasoning = ev(
        "response.reasoning_summary_text.delta",
        r#""output_index":0,"summary_index":0,"delta":"thinking""#,
    );
    let call = ev(
        "response.output_item.added",
        r#""output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":""}"#,
    );
    let cases = [
        (vec![created(), message, reasoning], true),
        (vec![created(), delta("partial")], false),
        (vec![created(), call], false),
    ];
    for (before, falls_back) in cases {
        let mut events = before;
        events.push(failed.clone());
        let server = Upstream::always(sse(&events)).await;
        let config = model_runtime::Config::builder()
            .provider(
                "oa",
                spec("openai-responses", &server.base_url())
                    .model("m", &["text"])
                    .health_off(),
            )
            .provider("spare", ProviderSpec::scripted().model("echo", &["text"]))
            .policy("default", PolicySpec::new(&["oa/m", "spare/echo"]))
            .ability("chat", AbilitySpec::new("default"))
            .build_with_env(&common::adapters::env)
            .unwrap();
        let mut runtime = start_with(config).await;
        let outcome = execute(&mut runtime.client, request("chat", "hello")).await;
        if falls_back {
            assert_eq!(completed_result(&outcome).provider, "spare");
        } else {
            let error = failed_payload(&outcome).error.unwrap();
            assert_eq!(error.code, "output_interrupted");
        }
        runtime.stop().await;
    }
}
