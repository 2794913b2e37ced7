//! The providers' own published streams (`tests/it/fixtures/streams/`, each file's source in
//! its README), replayed byte for byte over real HTTP through the adapter that speaks them:
//! every one must stream to its end, with what each part of it means kept apart (the answer,
//! reasoning, a refusal, a server tool's call and its usage).

use crate::common;

use std::path::Path;

use common::adapters::{bedrock_at, call, config, fixture, provider, reported, spec, split, text};
use common::upstream::{Upstream, sse};
use model_runtime::execution::{FinishReason, ReasoningPiece, UsageUnit};
use model_runtime::provider::ProviderEvent;

/// The events `adapter` makes of fixture `name`, and the error it ended with, if any.
async fn replay(adapter: &str, name: &str) -> (Vec<ProviderEvent>, Option<String>) {
    let events = fixture(name);
    assert_eq!(events.concat(), {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/streams");
        std::fs::read_to_string(path.join(name)).unwrap()
    });
    let server = Upstream::always(sse(&events)).await;
    let p = provider(&config(spec(adapter, &server.base_url())));
    let (events, error) = split(call(&p).await);
    (events, error.map(|e| format!("{}: {}", e.code, e.message)))
}

/// The events the `bedrock` adapter makes of fixture `name` (one SDK-shaped event per line),
/// each line sent as one event-stream message; and the error it ended with, if any.
async fn replay_eventstream(name: &str) -> (Vec<ProviderEvent>, Option<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/streams");
    let lines = std::fs::read_to_string(path.join(name)).unwrap();
    let messages: Vec<Vec<u8>> = lines
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let (kind, payload) = value.as_object().unwrap().iter().next().unwrap();
            common::eventstream::event(kind, &payload.to_string())
        })
        .collect();
    let server = Upstream::always(common::eventstream::reply(&messages)).await;
    let p = provider(&config(bedrock_at(&server.base_url())));
    let (events, error) = split(call(&p).await);
    (events, error.map(|e| format!("{}: {}", e.code, e.message)))
}

fn reasoning(text: &str) -> ProviderEvent {
    ProviderEvent::Reasoning(ReasoningPiece::Text, text.into())
}

fn progress(note: &str) -> ProviderEvent {
    ProviderEvent::Progress(note.into())
}

#[tokio::test]
async fn an_openai_refusal_is_kept_as_text_and_finishes_as_a_refusal() {
    let (events, error) = replay("openai", "openai-refusal.sse").await;
    assert_eq!(error, None);
    assert_eq!(
        events[..2],
        [
            text("I'm sorry, I"),
            text(" cannot assist with that request.")
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::Refusal))
    );
}

#[tokio::test]
async fn mistral_content_parts_split_into_reasoning_and_answer() {
    let (events, error) = replay("openai", "mistral-magistral-thinking.sse").await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            reasoning("Okay, the user asks for"),
            reasoning(" 2 + 2. That is 4."),
            text("2 + 2 = "),
            text("**4**"),
            reported(UsageUnit::INPUT_TOKENS, 10),
            reported(UsageUnit::OUTPUT_TOKENS, 42),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn groq_usage_under_x_groq_is_reported() {
    let (events, error) = replay("openai", "groq-x-groq-usage.sse").await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            text("Fast"),
            text(" language models"),
            reported(UsageUnit::INPUT_TOKENS, 24),
            reported(UsageUnit::OUTPUT_TOKENS, 377),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn an_anthropic_web_search_streams_with_the_search_as_evidence_and_its_usage() {
    let (events, error) = replay("anthropic", "anthropic-web-search.sse").await;
    assert_eq!(error, None, "{events:#?}");
    assert_eq!(
        events,
        [
            text("I'll search for that."),
            progress(
                "server tool `web_search` called: {\"query\": \"latest quantum computing breakthroughs 2025\"}"
            ),
            progress("server tool result: web_search_tool_result"),
            text("Error-corrected logical qubits were demonstrated."),
            reported(UsageUnit::INPUT_TOKENS, 10682),
            reported(UsageUnit::CACHED_INPUT_TOKENS, 0),
            reported(UsageUnit::CACHE_WRITE_INPUT_TOKENS, 0),
            reported(UsageUnit::OUTPUT_TOKENS, 510),
            reported(UsageUnit::new("web_search_requests"), 1),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::ToolCallStarted { .. })),
        "a server tool is not the caller's tool call"
    );
}

#[tokio::test]
async fn anthropic_code_execution_and_an_unknown_block_kind_stream_to_the_end() {
    let (events, error) = replay("anthropic", "anthropic-code-execution.sse").await;
    assert_eq!(error, None, "{events:#?}");
    let notes: Vec<&ProviderEvent> = events
        .iter()
        .filter(|e| matches!(e, ProviderEvent::Progress(_)))
        .collect();
    assert_eq!(
        notes,
        [
            &progress(
                "server tool `code_execution` called: {\"code\":\"import numpy as np\\nprint(np.mean([1,2,3]))\"}"
            ),
            &progress("server tool result: code_execution_tool_result"),
            &progress(
                "skipped a content block of a kind this adapter does not know: container_upload"
            ),
        ]
    );
    assert!(events.contains(&text("The mean is 2.0.")));
    assert!(events.contains(&reported(UsageUnit::CACHED_INPUT_TOKENS, 2048)));
    assert!(events.contains(&reported(UsageUnit::CACHE_WRITE_INPUT_TOKENS, 120)));
    assert!(events.contains(&reported(UsageUnit::new("code_execution_requests"), 1)));
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::Stop))
    );
}

#[tokio::test]
async fn a_responses_api_reply_streams_its_reasoning_summary_then_its_answer() {
    let (events, error) = replay(
        "openai-responses",
        "openai-responses-reasoning-and-text.sse",
    )
    .await;
    assert_eq!(error, None, "{events:#?}");
    assert_eq!(
        events,
        [
            reasoning("**Answering a simple question**"),
            reasoning(" The user wants a greeting."),
            ProviderEvent::Reasoning(
                ReasoningPiece::Signature,
                "rs_68af4030baa48193b0b43b4c2a176a1a05438e46b5f69a3b:gAAAAABor0AxQ6pJ0dY2yA_ENCRYPTED"
                    .into()
            ),
            text("Hi"),
            text(" there!"),
            reported(UsageUnit::INPUT_TOKENS, 9),
            reported(UsageUnit::OUTPUT_TOKENS, 274),
            reported(UsageUnit::CACHED_INPUT_TOKENS, 0),
            reported(UsageUnit::REASONING_TOKENS, 256),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn responses_api_parallel_function_calls_stream_in_pieces_or_whole() {
    let (events, error) = replay("openai-responses", "openai-responses-function-calls.sse").await;
    assert_eq!(error, None, "{events:#?}");
    let started = |index: u32, id: &str| ProviderEvent::ToolCallStarted {
        index,
        id: id.into(),
        name: "get_current_weather".into(),
    };
    let piece = |index: u32, delta: &str| ProviderEvent::ToolCallArgumentsDelta {
        index,
        delta: delta.into(),
    };
    assert_eq!(
        events,
        [
            started(0, "call_unLAR8MvFNptuiZK6K6HCy5k"),
            piece(0, "{\""),
            piece(0, "location"),
            piece(0, "\":\""),
            piece(0, "Boston, MA"),
            piece(0, "\"}"),
            started(1, "call_Bq9Fm1cSgDXWvBq0TqAJbQTy"),
            piece(1, "{\"location\":\"Paris, France\"}"),
            reported(UsageUnit::INPUT_TOKENS, 291),
            reported(UsageUnit::OUTPUT_TOKENS, 47),
            reported(UsageUnit::CACHED_INPUT_TOKENS, 128),
            reported(UsageUnit::REASONING_TOKENS, 0),
            ProviderEvent::Finished(FinishReason::ToolCalls),
        ]
    );
}

#[tokio::test]
async fn a_gemini_stream_ends_with_its_body_after_the_finish_reason() {
    let (events, error) = replay("gemini", "gemini-stream.sse").await;
    assert_eq!(error, None, "{events:#?}");
    assert_eq!(
        events,
        [
            text("Once"),
            text(" upon a time, in a land"),
            text(" far away, there lived a backpack."),
            reported(UsageUnit::INPUT_TOKENS, 9),
            reported(UsageUnit::OUTPUT_TOKENS, 16),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn a_bedrock_tool_call_streams_its_input_in_pieces() {
    let (events, error) = replay_eventstream("bedrock-converse-tool-use.jsonl").await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            text(
                "To find the most popular song on radio station WZPZ, I'll use the top_song tool."
            ),
            ProviderEvent::ToolCallStarted {
                index: 0,
                id: "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q".into(),
                name: "top_song".into(),
            },
            ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: r#"{"sign": "W"#.into(),
            },
            ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: r#"ZPZ"}"#.into(),
            },
            reported(UsageUnit::INPUT_TOKENS, 375),
            reported(UsageUnit::OUTPUT_TOKENS, 62),
            ProviderEvent::Finished(FinishReason::ToolCalls),
        ]
    );
}

#[tokio::test]
async fn bedrock_reasoning_comes_apart_from_the_answer_with_its_signature() {
    let (events, error) = replay_eventstream("bedrock-converse-reasoning.jsonl").await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            reasoning("The user asks how many"),
            reasoning(" r's are in strawberry. s-t-r-a-w-b-e-r-r-y: three."),
            ProviderEvent::Reasoning(ReasoningPiece::Signature, "ErcBCkgIAhABGAIiQMuJ6S2I".into()),
            text("There are 3 r's"),
            text(" in \"strawberry\"."),
            reported(UsageUnit::INPUT_TOKENS, 43),
            reported(UsageUnit::OUTPUT_TOKENS, 123),
            ProviderEvent::Finished(FinishReason::Stop),
        ]
    );
}
