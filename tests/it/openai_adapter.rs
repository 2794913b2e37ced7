//! The `openai` adapter against a local server speaking OpenAI chat completions streaming,
//! with the chunk shapes of OpenAI's documented examples and of compatible servers.

use crate::common;

use common::adapters::{
    KEY, assert_error, assert_mentions, call, config, data, estimated, provider, reported, spec,
    split, text,
};
use common::upstream::{Upstream, sse};
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::execution::{ErrorClass, FinishReason, ReasoningPiece, UsageUnit};
use model_runtime::provider::ProviderEvent;

const HEAD: &str = r#""id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb""#;

/// A chunk with one choice, as OpenAI streams it (with `usage: null` under include_usage).
fn chunk(delta: &str, finish: &str) -> String {
    data(&format!(
        r#"{{{HEAD},"choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}],"usage":null}}"#
    ))
}

fn usage_chunk() -> String {
    data(&format!(
        r#"{{{HEAD},"choices":[],"usage":{{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{{"cached_tokens":3,"audio_tokens":0}},"completion_tokens_details":{{"reasoning_tokens":2,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}}}"#
    ))
}

fn done() -> String {
    data("[DONE]")
}

#[tokio::test]
async fn streams_text_with_usage_and_sends_a_streaming_request() {
    let server = Upstream::always(sse(&[
        chunk(
            r#"{"role":"assistant","content":"","refusal":null}"#,
            "null",
        ),
        chunk(r#"{"content":"Hello"}"#, "null"),
        chunk(r#"{"content":"!"}"#, "null"),
        chunk(r#"{"content":" How can I help?"}"#, "null"),
        chunk("{}", r#""stop""#),
        usage_chunk(),
        done(),
    ]))
    .await;
    let p = provider(&config(spec("openai", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            text("Hello"),
            text("!"),
            text(" How can I help?"),
            reported(UsageUnit::INPUT_TOKENS, 19),
            reported(UsageUnit::OUTPUT_TOKENS, 10),
            reported(UsageUnit::CACHED_INPUT_TOKENS, 3),
            reported(UsageUnit::REASONING_TOKENS, 2),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    let body = request.json();
    assert_eq!(body["model"], "m");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(
        body["messages"][0],
        serde_json::json!({"role": "user", "content": "hi"})
    );
}

#[tokio::test]
async fn streams_tool_calls_with_argument_deltas() {
    let args = |piece: &str| {
        chunk(
            &format!(
                r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":{}}}}}]}}"#,
                serde_json::json!(piece)
            ),
            "null",
        )
    };
    let server = Upstream::always(sse(&[
        chunk(
            r#"{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}"#,
            "null",
        ),
        args("{\""),
        args("location"),
        args("\":\""),
        args("Paris, France"),
        args("\"}"),
        chunk("{}", r#""tool_calls""#),
        usage_chunk(),
        done(),
    ]))
    .await;
    let p = provider(&config(spec("openai", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    let delta = |d: &str| ProviderEvent::ToolCallArgumentsDelta {
        index: 0,
        delta: d.into(),
    };
    assert_eq!(
        events[..7],
        [
            ProviderEvent::ToolCallStarted {
                index: 0,
                id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                name: "get_weather".into(),
            },
            delta("{\""),
            delta("location"),
            delta("\":\""),
            delta("Paris, France"),
            delta("\"}"),
            reported(UsageUnit::INPUT_TOKENS, 19),
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::ToolCalls))
    );
}

fn tool_chunk(call: &str) -> String {
    chunk(&format!(r#"{{"tool_calls":[{call}]}}"#), "null")
}

fn started(index: u32, id: &str, name: &str) -> ProviderEvent {
    ProviderEvent::ToolCallStarted {
        index,
        id: id.into(),
        name: name.into(),
    }
}

fn arguments(index: u32, delta: &str) -> ProviderEvent {
    ProviderEvent::ToolCallArgumentsDelta {
        index,
        delta: delta.into(),
    }
}

/// The tool-call events of one call against a server streaming `chunks`, then `tool_calls`.
async fn tool_events(chunks: &[String]) -> Vec<ProviderEvent> {
    let mut stream = chunks.to_vec();
    stream.extend([chunk("{}", r#""tool_calls""#), usage_chunk(), done()]);
    let server = Upstream::always(sse(&stream)).await;
    let p = provider(&config(spec("openai", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::ToolCalls))
    );
    events
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                ProviderEvent::ToolCallStarted { .. }
                    | ProviderEvent::ToolCallArgumentsDelta { .. }
            )
        })
        .collect()
}

#[tokio::test]
async fn parallel_tool_calls_stay_apart_by_index_even_interleaved() {
    let events = tool_events(&[
        tool_chunk(r#"{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}"#),
        tool_chunk(r#"{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}"#),
        tool_chunk(r#"{"index":0,"function":{"arguments":"{\"city\":"}}"#),
        tool_chunk(r#"{"index":1,"function":{"arguments":"{\"tz\":"}}"#),
        tool_chunk(r#"{"index":0,"function":{"arguments":"\"Paris\"}"}}"#),
        tool_chunk(r#"{"index":1,"function":{"arguments":"\"CET\"}"}}"#),
    ])
    .await;
    assert_eq!(
        events,
        [
            started(0, "call_a", "get_weather"),
            started(1, "call_b", "get_time"),
            arguments(0, r#"{"city":"#),
            arguments(1, r#"{"tz":"#),
            arguments(0, r#""Paris"}"#),
            arguments(1, r#""CET"}"#),
        ]
    );
}

/// Some compatible servers send parallel calls without `index`, each in chunks of its own:
/// a new id, or a second name, opens a new call instead of merging into the last one.
#[tokio::test]
async fn parallel_tool_calls_without_an_index_stay_apart() {
    // Each call whole in one chunk, with ids.
    let events = tool_events(&[
        tool_chunk(r#"{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}"#),
        tool_chunk(r#"{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}"#),
    ])
    .await;
    assert_eq!(
        events,
        [
            started(0, "call_a", "get_weather"),
            arguments(0, r#"{"city":"Paris"}"#),
            started(1, "call_b", "get_time"),
            arguments(1, r#"{"tz":"CET"}"#),
        ]
    );
    // Streamed in pieces, and without ids: a piece with no id or name continues the latest
    // call; a name opens the next one.
    let events = tool_events(&[
        tool_chunk(r#"{"function":{"name":"get_weather","arguments":""}}"#),
        tool_chunk(r#"{"function":{"arguments":"{\"city\":\"Paris\"}"}}"#),
        tool_chunk(r#"{"function":{"name":"get_time","arguments":"{\"tz\":"}}"#),
        tool_chunk(r#"{"function":{"arguments":"\"CET\"}"}}"#),
    ])
    .await;
    assert_eq!(
        events,
        [
            started(0, "call_0", "get_weather"),
            arguments(0, r#"{"city":"Paris"}"#),
            started(1, "call_1", "get_time"),
            arguments(1, r#"{"tz":"#),
            arguments(1, r#""CET"}"#),
        ]
    );
    // Two calls in one chunk, without index: apart too.
    let events = tool_events(&[tool_chunk(
        r#"{"id":"call_a","function":{"name":"f","arguments":"{}"}},{"id":"call_b","function":{"name":"g","arguments":"{}"}}"#,
    )])
    .await;
    assert_eq!(
        events,
        [
            started(0, "call_a", "f"),
            arguments(0, "{}"),
            started(1, "call_b", "g"),
            arguments(1, "{}"),
        ]
    );
}

/// Arguments for a call that never got its name cannot be handed on: that is malformed with
/// or without the `[DONE]` marker, never a silent drop.
#[tokio::test]
async fn arguments_of_a_call_that_was_never_named_are_a_protocol_error() {
    for with_done in [true, false] {
        let mut stream = vec![
            tool_chunk(r#"{"index":0,"id":"call_a","function":{"arguments":"{\"q\":1}"}}"#),
            chunk("{}", r#""tool_calls""#),
        ];
        if with_done {
            stream.push(done());
        }
        let server = Upstream::always(sse(&stream)).await;
        let p = provider(&config(spec("openai", &server.base_url())));
        let (events, error) = split(call(&p).await);
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ProviderEvent::Finished(_))),
            "{events:?}"
        );
        let error = error.expect("an error");
        assert_error(
            &error,
            ErrorClass::Interrupted,
            "protocol_error",
            &format!("with [DONE]: {with_done}"),
        );
        assert_mentions(&error, "never received its name");
    }
}

/// A compatible server (llama.cpp, Ollama, older vLLM) may send no usage, no key check, a
/// whole tool call in one chunk without an id, arguments as an object, and no `[DONE]`.
#[tokio::test]
async fn serves_compatible_servers_without_assuming_openai() {
    let server = Upstream::always(sse(&[
        chunk(r#"{"role":"assistant","content":"Sure. "}"#, "null"),
        chunk(
            r#"{"tool_calls":[{"function":{"name":"lookup","arguments":{"q":"rust"}}}]}"#,
            "null",
        ),
        chunk("{}", r#""tool_calls""#),
    ]))
    .await;
    // No key, no capabilities: what a local server needs.
    let config = Config::builder()
        .provider(
            "p",
            ProviderSpec::openai(&server.base_url()).model("m", &[]),
        )
        .policy("default", PolicySpec::new(&["p/m"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&|_| None)
        .unwrap();
    let p = provider(&config);
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(events[0], text("Sure. "));
    assert_eq!(
        events[1],
        ProviderEvent::ToolCallStarted {
            index: 0,
            id: "call_0".into(),
            name: "lookup".into(),
        }
    );
    assert_eq!(
        events[2],
        ProviderEvent::ToolCallArgumentsDelta {
            index: 0,
            delta: r#"{"q":"rust"}"#.into(),
        }
    );
    // No usage was reported: output is estimated and labelled so, and the gap is said.
    assert_eq!(events[3], estimated(UsageUnit::OUTPUT_TOKENS, 2));
    assert!(matches!(&events[4], ProviderEvent::Progress(note) if note.contains("no usage")));
    assert_eq!(events[5], ProviderEvent::Finished(FinishReason::ToolCalls));
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn an_error_chunk_after_output_ends_the_call_with_its_class() {
    let server = Upstream::always(sse(&[
        chunk(r#"{"content":"Partial"}"#, "null"),
        data(r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#),
    ]))
    .await;
    let p = provider(&config(spec("openai", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(
        events,
        vec![text("Partial"), estimated(UsageUnit::OUTPUT_TOKENS, 1)]
    );
    let error = error.expect("an error");
    assert_error(&error, ErrorClass::Retryable, "internal", "");
    assert_mentions(&error, "openai provider `p`");
}

/// vLLM and llama.cpp report a failure found mid-request as an error chunk whose numeric
/// `code` is the HTTP status they would have answered with: a 400 there is not retried.
#[tokio::test]
async fn an_error_chunk_with_a_status_code_is_classified_by_it() {
    let server = Upstream::always(sse(&[
        chunk(r#"{"role":"assistant","content":""}"#, "null"),
        data(r#"{"error":{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}}"#),
        done(),
    ]))
    .await;
    let p = provider(&config(spec("openai", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(events, vec![]);
    let error = error.expect("an error");
    assert_error(&error, ErrorClass::Rejected, "invalid_request", "");
    assert_mentions(&error, "maximum context length");
}

#[tokio::test]
async fn finish_reasons_map_to_the_runtime_enum() {
    for (wire, reason) in [
        ("stop", FinishReason::Stop),
        ("length", FinishReason::Length),
        ("content_filter", FinishReason::ContentFilter),
        ("function_call", FinishReason::ToolCalls),
        ("something_new", FinishReason::Other),
    ] {
        let server = Upstream::always(sse(&[
            chunk(r#"{"content":"x"}"#, &format!("\"{wire}\"")),
            usage_chunk(),
            done(),
        ]))
        .await;
        let p = provider(&config(spec("openai", &server.base_url())));
        let (events, _) = split(call(&p).await);
        assert_eq!(
            events.last(),
            Some(&ProviderEvent::Finished(reason)),
            "{wire}"
        );
    }
}

#[tokio::test]
async fn a_finished_call_leaves_its_connection_in_the_pool() {
    let server = Upstream::always(sse(&[
        chunk(r#"{"content":"Hi"}"#, r#""stop""#),
        usage_chunk(),
        done(),
    ]))
    .await;
    let p = provider(&config(spec("openai", &server.base_url())));
    for _ in 0..3 {
        let (_, error) = split(call(&p).await);
        assert_eq!(error, None);
    }
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        server.connections(),
        1,
        "every call reused the first connection"
    );
}

#[tokio::test]
async fn adapters_never_show_the_key_in_debug_output() {
    for adapter in ["openai", "anthropic"] {
        let p = provider(&config(spec(adapter, "http://127.0.0.1:9/v1")));
        let shown = format!("{p:?}");
        assert!(
            shown.contains("/v1/") && shown.contains("Sensitive"),
            "{shown}"
        );
        assert!(
            !shown.contains(KEY),
            "{adapter} adapter Debug shows the key: {shown}"
        );
    }
}

#[tokio::test]
async fn the_largest_tool_call_index_is_one_more_call() {
    let server = Upstream::always(sse(&[
        chunk(
            r#"{"tool_calls":[{"index":4294967295,"id":"call_x","function":{"name":"f","arguments":"{}"}}]}"#,
            "null",
        ),
        chunk("{}", r#""tool_calls""#),
        done(),
    ]))
    .await;
    let p = provider(&config(spec("openai", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    assert_eq!(
        events[0],
        ProviderEvent::ToolCallStarted {
            index: 0,
            id: "call_x".into(),
            name: "f".into(),
        }
    );
}

#[tokio::test]
async fn reasoning_streams_under_either_name_before_the_answer() {
    let server = Upstream::always(sse(&[
        chunk(r#"{"role":"assistant","content":""}"#, "null"),
        // vLLM and DeepSeek.
        chunk(r#"{"reasoning_content":"First, "}"#, "null"),
        // OpenRouter-style servers.
        chunk(r#"{"reasoning":"the sum."}"#, "null"),
        // Some send both names for the same text: once.
        chunk(
            r#"{"reasoning_content":" Done.","reasoning":" Done."}"#,
            "null",
        ),
        chunk(r#"{"content":"4"}"#, "null"),
        chunk("{}", r#""stop""#),
        done(),
    ]))
    .await;
    let p = provider(&config(spec("openai", &server.base_url())));
    let (events, error) = split(call(&p).await);
    assert_eq!(error, None);
    let thought = |t: &str| ProviderEvent::Reasoning(ReasoningPiece::Text, t.into());
    assert_eq!(
        events[..4],
        [
            thought("First, "),
            thought("the sum."),
            thought(" Done."),
            text("4")
        ]
    );
}
