//! The `gemini` adapter against a local server speaking the Gemini API's stream
//! (`streamGenerateContent?alt=sse`, each event a whole `GenerateContentResponse`): the
//! request it sends, thoughts and their signature, whole function calls, usage, each way a
//! reply ends, a blocked prompt, and Google's `RetryInfo`. The failures every HTTP adapter
//! shares are in `http_adapter_failures.rs`.

use crate::common;

use std::time::Duration;

use common::adapters::{
    KEY, assert_error, call, call_with, config, data, provider, reported, spec, split, text,
};
use common::upstream::{Step, Upstream, sse, sse_steps, status};
use model_runtime::execution::{
    ContentPart, ErrorClass, ExecutionInput, FinishReason, GenerationParameters, Message,
    Reasoning, ReasoningPiece, Role, ToolCall, ToolDefinition, UsageUnit,
};
use model_runtime::provider::ProviderEvent;

/// A chunk whose one candidate has `parts` (JSON), and then `rest` (more candidate fields).
fn chunk(parts: &str, rest: &str) -> String {
    data(&format!(
        r#"{{"candidates":[{{"content":{{"parts":{parts},"role":"model"}},"index":0{rest}}}],"modelVersion":"gemini-2.5-flash"}}"#
    ))
}

const USAGE: &str = r#""usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"thoughtsTokenCount":40,"cachedContentTokenCount":4,"totalTokenCount":57}"#;

fn last(parts: &str, finish: &str) -> String {
    data(&format!(
        r#"{{"candidates":[{{"content":{{"parts":{parts},"role":"model"}},"finishReason":"{finish}","index":0}}],{USAGE},"modelVersion":"gemini-2.5-flash"}}"#
    ))
}

#[tokio::test]
async fn thoughts_are_reasoning_with_their_signature_and_the_request_is_geminis() {
    let server = Upstream::always(sse(&[
        chunk(r#"[{"text":"Let me think.","thought":true}]"#, ""),
        chunk(
            r#"[{"text":"Paris","thoughtSignature":"c2lnbmF0dXJl"}]"#,
            "",
        ),
        last(r#"[{"text":" is the capital."}]"#, "STOP"),
    ]))
    .await;
    let p = provider(&config(spec("gemini", &server.base_url())));
    let assistant = Message {
        role: Role::Assistant,
        content: vec![
            ContentPart::Reasoning(Reasoning {
                text: "earlier thought".into(),
                signature: "c2lnMQ==".into(),
                redacted: String::new(),
            }),
            ContentPart::Text("Checking.".into()),
        ],
        tool_calls: vec![ToolCall {
            id: "call_0".into(),
            name: "lookup".into(),
            arguments_json: r#"{"q":"capital"}"#.into(),
        }],
        tool_call_id: None,
    };
    let tool = Message {
        role: Role::Tool,
        content: vec![ContentPart::Text("Paris".into())],
        tool_calls: Vec::new(),
        tool_call_id: Some("call_0".into()),
    };
    let input = ExecutionInput {
        messages: vec![
            Message {
                role: Role::System,
                ..Message::user("be brief")
            },
            Message::user("capital of France?"),
            assistant,
            tool,
        ],
        tools: vec![ToolDefinition {
            name: "lookup".into(),
            description: "Looks up".into(),
            parameters_json_schema: r#"{"type":"object"}"#.into(),
        }],
        parameters: GenerationParameters {
            max_output_tokens: Some(100),
            stop_sequences: vec!["END".into()],
            reasoning_budget_tokens: Some(1024),
            ..Default::default()
        },
    };
    let (events, error) = split(call_with(&p, input, Duration::from_secs(60)).await);
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            ProviderEvent::Reasoning(ReasoningPiece::Text, "Let me think.".into()),
            text("Paris"),
            ProviderEvent::Reasoning(ReasoningPiece::Signature, "c2lnbmF0dXJl".into()),
            text(" is the capital."),
            reported(UsageUnit::INPUT_TOKENS, 12),
            reported(UsageUnit::CACHED_INPUT_TOKENS, 4),
            reported(UsageUnit::OUTPUT_TOKENS, 45),
            reported(UsageUnit::REASONING_TOKENS, 40),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/models/m:streamGenerateContent?alt=sse");
    assert_eq!(request.header("x-goog-api-key"), Some(KEY));
    assert_eq!(request.header("authorization"), None);
    let body = request.json();
    assert_eq!(
        body["systemInstruction"],
        serde_json::json!({"parts": [{"text": "be brief"}]})
    );
    assert_eq!(
        body["contents"],
        serde_json::json!([
            {"role": "user", "parts": [{"text": "capital of France?"}]},
            {"role": "model", "parts": [
                {"text": "Checking.", "thoughtSignature": "c2lnMQ=="},
                {"functionCall": {"name": "lookup", "args": {"q": "capital"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "lookup", "response": {"result": "Paris"}}},
            ]},
        ])
    );
    assert_eq!(
        body["generationConfig"],
        serde_json::json!({"maxOutputTokens": 100, "stopSequences": ["END"],
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}})
    );
    assert_eq!(
        body["tools"],
        serde_json::json!([{"functionDeclarations": [{"name": "lookup",
            "description": "Looks up", "parametersJsonSchema": {"type": "object"}}]}])
    );
}

#[tokio::test]
async fn whole_function_calls_are_tool_calls() {
    let server = Upstream::always(sse(&[last(
        r#"[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}},{"functionCall":{"name":"get_weather","args":{"city":"Rome"}}}]"#,
        "STOP",
    )]))
    .await;
    let p = provider(&config(spec("gemini", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    let started = |index: u32| ProviderEvent::ToolCallStarted {
        index,
        id: format!("call_{index}"),
        name: "get_weather".into(),
    };
    let args = |index: u32, city: &str| ProviderEvent::ToolCallArgumentsDelta {
        index,
        delta: format!(r#"{{"city":"{city}"}}"#).into(),
    };
    assert_eq!(
        events[..4],
        [started(0), args(0, "Paris"), started(1), args(1, "Rome")]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::ToolCalls))
    );
}

#[tokio::test]
async fn each_finish_reason_maps() {
    for (reason, finish) in [
        ("MAX_TOKENS", FinishReason::Length),
        ("SAFETY", FinishReason::ContentFilter),
        ("RECITATION", FinishReason::ContentFilter),
        ("OTHER", FinishReason::Other),
    ] {
        let server = Upstream::always(sse(&[last(r#"[{"text":"partial"}]"#, reason)])).await;
        let p = provider(&config(spec("gemini", &server.base_url())));
        let (events, error) = split(call(&p).await);
        assert_eq!(error, None);
        assert_eq!(
            events.last(),
            Some(&ProviderEvent::Finished(finish)),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn a_blocked_prompt_is_content_filtered() {
    let blocked = data(
        r#"{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH"}]},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}"#,
    );
    let server = Upstream::always(sse(&[blocked])).await;
    let p = provider(&config(spec("gemini", &server.base_url())));
    let (_, error) = split(call(&p).await);
    assert_error(
        &error.expect("an error"),
        ErrorClass::Rejected,
        "content_filtered",
        "blocked prompt",
    );
}

/// Google's own SDK test data ends the blocked prompt's event without its blank line: at a
/// body that ended whole, an event whose last line is complete goes out all the same.
#[tokio::test]
async fn a_blocked_prompt_whose_event_has_no_blank_line_is_content_filtered() {
    let blocked = r#"data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}"#;
    let server = Upstream::always(sse_steps(vec![Step::Send(
        format!("{blocked}\r\n").into_bytes(),
    )]))
    .await;
    let p = provider(&config(spec("gemini", &server.base_url())));
    let (_, error) = split(call(&p).await);
    assert_error(
        &error.expect("an error"),
        ErrorClass::Rejected,
        "content_filtered",
        "blocked prompt, last line unterminated by a blank one",
    );
}

/// Thinking that used the whole output budget: Gemini reports `thoughtsTokenCount` and no
/// `candidatesTokenCount`. The output billed is the thinking, so output tokens are reported
/// (and never estimated below it).
#[tokio::test]
async fn thinking_that_used_the_whole_budget_counts_as_output() {
    let thought = data(
        r#"{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true}],"role":"model"},"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":7,"thoughtsTokenCount":310,"totalTokenCount":317}}"#,
    );
    let server = Upstream::always(sse(&[thought])).await;
    let p = provider(&config(spec("gemini", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert!(
        events.contains(&reported(UsageUnit::OUTPUT_TOKENS, 310)),
        "{events:?}"
    );
    assert!(events.contains(&reported(UsageUnit::REASONING_TOKENS, 310)));
}

#[tokio::test]
async fn resource_exhausted_waits_as_its_retry_info_asks() {
    let body = r#"{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"31s"}]}}"#;
    let server = Upstream::always(status(429, body, &[])).await;
    let p = provider(&config(spec("gemini", &server.base_url())));
    let (_, error) = split(call(&p).await);
    let error = error.expect("an error");
    assert_error(&error, ErrorClass::Retryable, "rate_limited", "429");
    assert_eq!(error.retry_after, Some(Duration::from_secs(31)));
}
