//! The `bedrock` adapter against a local server speaking Bedrock's wire format: Converse
//! requests, replies in AWS's binary event stream, exceptions as event-stream messages. The
//! server checks every request's SigV4 signature with AWS's own signer, from what it
//! received, so a signature that covers anything other than what was sent fails. (Where the
//! keys come from: `bedrock_credentials.rs`.)

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::adapters::{
    AWS_KEY_ID, AWS_TOKEN, KEY, assert_error, bedrock_at, env, provider, reported, split, text,
};
use common::eventstream::{event, exception, reply};
use common::sigv4::assert_signed;
use common::upstream::Upstream;
use common::{completed_result, execute, failed_payload, request, start_with};
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::execution::{
    ContentPart, ErrorClass, ExecutionInput, FinishReason, GenerationParameters, Message,
    Reasoning, ReasoningPiece, Role, ToolCall, ToolDefinition, UsageUnit,
};
use model_runtime::provider::ProviderEvent;

/// A versioned model id: its `:` goes into the path percent-encoded.
const MODEL: &str = "anthropic.claude-3-5-sonnet-20240620-v1:0";

/// A config whose provider `p` is bedrock at `base_url` serving [`MODEL`], edited by `edit`,
/// built with `env`.
fn config_with(
    base_url: &str,
    edit: impl FnOnce(ProviderSpec) -> ProviderSpec,
    env: &dyn Fn(&str) -> Option<String>,
) -> Config {
    Config::builder()
        .provider("p", edit(bedrock_at(base_url)).model(MODEL, &["text"]))
        .policy("default", PolicySpec::new(&[&format!("p/{MODEL}")]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(env)
        .expect("valid config")
}

/// One call of [`MODEL`] with a minute to spare.
async fn call_model(
    p: &Arc<dyn model_runtime::provider::Provider>,
    input: ExecutionInput,
) -> Vec<Result<ProviderEvent, model_runtime::provider::ProviderError>> {
    common::adapters::call_model(p, MODEL, input, Duration::from_secs(60)).await
}

fn hi() -> ExecutionInput {
    ExecutionInput {
        messages: vec![Message::user("hi")],
        ..Default::default()
    }
}

/// A whole text reply: `Hello`, ` world`, with usage (cache reads among the input).
fn hello() -> Vec<Vec<u8>> {
    vec![
        event("messageStart", r#"{"p":"abcdefgh","role":"assistant"}"#),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abc"}"#,
        ),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":" world"}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":0}"#),
        event("messageStop", r#"{"stopReason":"end_turn"}"#),
        event(
            "metadata",
            r#"{"usage":{"inputTokens":10,"outputTokens":2,"totalTokens":32,"cacheReadInputTokens":20},"metrics":{"latencyMs":210}}"#,
        ),
    ]
}

#[tokio::test]
async fn a_text_reply_streams_with_its_usage_over_a_signed_request() {
    let server = Upstream::always(reply(&hello())).await;
    let p = provider(&config_with(&server.base_url(), |s| s, &env));
    let (events, error) = split(call_model(&p, hi()).await);
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            text("Hello"),
            text(" world"),
            reported(UsageUnit::INPUT_TOKENS, 30),
            reported(UsageUnit::CACHED_INPUT_TOKENS, 20),
            reported(UsageUnit::OUTPUT_TOKENS, 2),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
    let sent = &server.requests()[0];
    assert_eq!(
        sent.path,
        "/v1/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.header("accept"),
        Some("application/vnd.amazon.eventstream")
    );
    assert_eq!(
        sent.json(),
        serde_json::json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    );
    assert_signed(sent, AWS_KEY_ID, KEY, Some(AWS_TOKEN));
}

#[tokio::test]
async fn the_request_carries_system_tools_parameters_reasoning_and_tool_results() {
    let server = Upstream::always(reply(&hello())).await;
    let p = provider(&config_with(&server.base_url(), |s| s, &env));
    let system = Message {
        role: Role::System,
        content: vec![ContentPart::Text("Be brief.".into())],
        tool_calls: vec![],
        tool_call_id: None,
    };
    let assistant = Message {
        role: Role::Assistant,
        content: vec![
            ContentPart::Reasoning(Reasoning {
                text: "Use the tool.".into(),
                signature: "sig-1".into(),
                redacted: String::new(),
            }),
            ContentPart::Reasoning(Reasoning {
                text: String::new(),
                signature: String::new(),
                redacted: "b3BhcXVl".into(),
            }),
        ],
        tool_calls: vec![ToolCall {
            id: "tooluse_1".into(),
            name: "top_song".into(),
            arguments_json: r#"{"sign":"WZPZ"}"#.into(),
        }],
        tool_call_id: None,
    };
    let result = Message {
        role: Role::Tool,
        content: vec![ContentPart::Text("Elemental Hotel".into())],
        tool_calls: vec![],
        tool_call_id: Some("tooluse_1".into()),
    };
    let input = ExecutionInput {
        messages: vec![system, Message::user("top song?"), assistant, result],
        tools: vec![ToolDefinition {
            name: "top_song".into(),
            description: "The most popular song on a station.".into(),
            parameters_json_schema: r#"{"type":"object","properties":{"sign":{"type":"string"}}}"#
                .into(),
        }],
        parameters: GenerationParameters {
            max_output_tokens: Some(2048),
            temperature: Some(0.5),
            stop_sequences: vec!["END".into()],
            reasoning_budget_tokens: Some(1024),
            ..Default::default()
        },
    };
    let (_, error) = split(call_model(&p, input).await);
    assert_eq!(error, None);
    assert_eq!(
        server.requests()[0].json(),
        serde_json::json!({
            "system": [{"text": "Be brief."}],
            "messages": [
                {"role": "user", "content": [{"text": "top song?"}]},
                {"role": "assistant", "content": [
                    {"reasoningContent": {"reasoningText": {"text": "Use the tool.", "signature": "sig-1"}}},
                    {"reasoningContent": {"redactedContent": "b3BhcXVl"}},
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "top_song", "input": {"sign": "WZPZ"}}},
                ]},
                {"role": "user", "content": [
                    {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "Elemental Hotel"}]}},
                ]},
            ],
            "toolConfig": {"tools": [{"toolSpec": {
                "name": "top_song",
                "description": "The most popular song on a station.",
                "inputSchema": {"json": {"type": "object", "properties": {"sign": {"type": "string"}}}},
            }}]},
            "inferenceConfig": {"maxTokens": 2048, "temperature": 0.5, "stopSequences": ["END"]},
            "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
        })
    );
}

#[tokio::test]
async fn what_converse_cannot_take_is_refused_naming_the_field() {
    let server = Upstream::always(reply(&hello())).await;
    let p = provider(&config_with(&server.base_url(), |s| s, &env));
    let mut input = hi();
    input.messages[0]
        .content
        .push(ContentPart::Image(model_runtime::execution::Image {
            url: "https://example.com/cat.png".into(),
            ..Default::default()
        }));
    let (_, error) = split(call_model(&p, input).await);
    let error = error.expect("an error");
    assert_error(
        &error,
        ErrorClass::Rejected,
        "invalid_request",
        "an image URL",
    );
    assert!(
        error
            .message
            .contains("input.messages[0].content[1].image.url"),
        "{}",
        error.message
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn tool_calls_stream_their_arguments_and_reasoning_keeps_its_signature() {
    let server = Upstream::always(reply(&[
        event("messageStart", r#"{"role":"assistant"}"#),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"The user wants"}}}"#,
        ),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"EqoBCkgIARABGAIiQL"}}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":0}"#),
        event(
            "contentBlockStart",
            r#"{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_a","name":"top_song"}}}"#,
        ),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"sign\": "}}}"#,
        ),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":"\"WZPZ\"}"}}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":1}"#),
        event(
            "contentBlockStart",
            r#"{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_b","name":"now"}}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":2}"#),
        event("messageStop", r#"{"stopReason":"tool_use"}"#),
        event(
            "metadata",
            r#"{"usage":{"inputTokens":5,"outputTokens":9,"totalTokens":14}}"#,
        ),
    ]))
    .await;
    let p = provider(&config_with(&server.base_url(), |s| s, &env));
    let (events, error) = split(call_model(&p, hi()).await);
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            ProviderEvent::Reasoning(ReasoningPiece::Text, "The user wants".into()),
            ProviderEvent::Reasoning(ReasoningPiece::Signature, "EqoBCkgIARABGAIiQL".into()),
            ProviderEvent::ToolCallStarted {
                index: 0,
                id: "tooluse_a".into(),
                name: "top_song".into()
            },
            ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: r#"{"sign": "#.into()
            },
            ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: r#""WZPZ"}"#.into()
            },
            ProviderEvent::ToolCallStarted {
                index: 1,
                id: "tooluse_b".into(),
                name: "now".into()
            },
            ProviderEvent::ToolCallArgumentsDelta {
                index: 1,
                delta: "{}".into()
            },
            reported(UsageUnit::INPUT_TOKENS, 5),
            reported(UsageUnit::OUTPUT_TOKENS, 9),
            ProviderEvent::Finished(FinishReason::ToolCalls),
        ]
    );
}

#[tokio::test]
async fn exceptions_in_the_stream_are_classified_by_their_name() {
    let table = [
        ("throttlingException", ErrorClass::Retryable, "rate_limited"),
        (
            "serviceUnavailableException",
            ErrorClass::Retryable,
            "unavailable",
        ),
        ("internalServerException", ErrorClass::Retryable, "internal"),
        (
            "modelStreamErrorException",
            ErrorClass::Retryable,
            "internal",
        ),
        (
            "validationException",
            ErrorClass::Rejected,
            "invalid_request",
        ),
    ];
    for (name, class, code) in table {
        let payload = format!(r#"{{"message":"{name} for token {KEY}"}}"#);
        let server = Upstream::always(reply(&[
            event("messageStart", r#"{"role":"assistant"}"#),
            exception(name, &payload),
        ]))
        .await;
        let p = provider(&config_with(&server.base_url(), |s| s, &env));
        let (events, error) = split(call_model(&p, hi()).await);
        assert!(events.iter().all(|e| matches!(e, ProviderEvent::Usage(_))));
        let error = error.expect("an error");
        assert_error(&error, class, code, name);
        assert!(!error.message.contains(KEY), "{}", error.message);
    }
}

/// Through the runtime: an exception before output (reasoning is not output) falls back to
/// the next target; one after output (text, or a tool call started) ends the execution with
/// `output_interrupted`.
#[tokio::test]
async fn the_commit_rule_holds_for_exceptions_before_and_after_output() {
    let started = event(
        "contentBlockDelta",
        r#"{"contentBlockIndex":0,"delta":{"text":"partial"}}"#,
    );
    let reasoning = event(
        "contentBlockDelta",
        r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hmm"}}}"#,
    );
    let tool = event(
        "contentBlockStart",
        r#"{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}"#,
    );
    let cases = [
        (vec![exception("throttlingException", "{}")], true),
        (
            vec![reasoning, exception("internalServerException", "{}")],
            true,
        ),
        (
            vec![started, exception("modelStreamErrorException", "{}")],
            false,
        ),
        (
            vec![tool, exception("internalServerException", "{}")],
            false,
        ),
    ];
    for (messages, falls_back) in cases {
        let mut all = vec![event("messageStart", r#"{"role":"assistant"}"#)];
        all.extend(messages);
        let server = Upstream::always(reply(&all)).await;
        let config = Config::builder()
            .provider(
                "br",
                bedrock_at(&server.base_url())
                    .model(MODEL, &["text"])
                    .health_off(),
            )
            .provider("spare", ProviderSpec::scripted().model("echo", &["text"]))
            .policy(
                "default",
                PolicySpec::new(&[&format!("br/{MODEL}"), "spare/echo"]),
            )
            .ability("chat", AbilitySpec::new("default"))
            .build_with_env(&env)
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

#[tokio::test]
async fn a_region_that_is_not_one_is_refused() {
    let error = Config::builder()
        .provider(
            "p",
            ProviderSpec::scripted()
                .adapter("bedrock")
                .region("US East")
                .model(MODEL, &["text"]),
        )
        .policy("default", PolicySpec::new(&[&format!("p/{MODEL}")]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap_err();
    assert!(error.to_string().contains("providers.p.region"), "{error}");
}

#[tokio::test]
async fn no_key_token_or_signature_shows_in_errors_or_debug() {
    // Bedrock echoes the session token and the signature in its error.
    let server = Upstream::start(|_| {
        common::upstream::status(
            400,
            &format!(
                r#"{{"message":"The security token {AWS_TOKEN} or signing key {KEY} is invalid."}}"#
            ),
            &[],
        )
    })
    .await;
    let config = config_with(&server.base_url(), |s| s, &env);
    let p = provider(&config);
    let error = split(call_model(&p, hi()).await).1.expect("an error");
    let authorization = server.requests()[0]
        .header("authorization")
        .unwrap()
        .to_owned();
    let signature = authorization
        .rsplit("Signature=")
        .next()
        .unwrap()
        .to_owned();
    assert!(error.message.contains("<redacted>"), "{}", error.message);
    let shown = format!("{error:?} {config:?} {p:?}");
    for secret in [KEY, AWS_KEY_ID, AWS_TOKEN, signature.as_str()] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}
