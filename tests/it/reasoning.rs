//! Reasoning models over real HTTP upstreams speaking each wire format (the first test runs
//! the real binary on a config file): thinking streams as
//! `output.reasoning.delta` tagged with its attempt and commits nothing, so a failure after
//! it still falls back; a thinking block's signature comes back in the result and goes
//! upstream again on the next turn.

use crate::common;

use common::adapters::{self, KEY, anthropic_at, data, env, event, openai_at};
use common::anthropic::{
    block_start, block_stop, delta, message_delta, message_start, message_stop, text_delta,
};
use common::process::start_server_env;
use common::upstream::{Upstream, sse};
use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec};
use model_runtime::execution::UsageUnit;
use model_runtime::pb;
use model_runtime::pb::execution_event::Payload;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use model_runtime::provider::{ProviderError, ProviderEvent};

const USAGE: &str = r#"{"input_tokens":12,"output_tokens":1}"#;
const THINKING: &str = r#"{"type":"thinking","thinking":"","signature":""}"#;

/// A thinking block (with its signature), then the answer.
fn anthropic_thinking_reply(thought: &str, signature: &str, answer: &str) -> Vec<String> {
    vec![
        message_start(USAGE),
        block_start(0, THINKING),
        delta(
            0,
            &format!(r#"{{"type":"thinking_delta","thinking":"{thought}"}}"#),
        ),
        delta(
            0,
            &format!(r#"{{"type":"signature_delta","signature":"{signature}"}}"#),
        ),
        block_stop(0),
        block_start(1, r#"{"type":"text","text":""}"#),
        text_delta(1, answer),
        block_stop(1),
        message_delta("end_turn", 30),
        message_stop(),
    ]
}

fn openai_chunk(delta: &str, finish: &str) -> String {
    data(&format!(
        r#"{{"id":"c1","object":"chat.completion.chunk","created":1,"model":"r1","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
    ))
}

/// Reasoning as vLLM and DeepSeek stream it, then the answer.
fn openai_reasoning_reply() -> Vec<String> {
    vec![
        openai_chunk(r#"{"role":"assistant","content":""}"#, "null"),
        openai_chunk(r#"{"reasoning_content":"Two "}"#, "null"),
        openai_chunk(r#"{"reasoning_content":"and two."}"#, "null"),
        openai_chunk(r#"{"content":"Four."}"#, "null"),
        openai_chunk("{}", r#""stop""#),
        data("[DONE]"),
    ]
}

fn reasoning_of(events: &[pb::ExecutionEvent]) -> Vec<(u32, String)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::ReasoningDelta(r)) => Some((r.attempt, r.text.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn reasoning_then_overload_falls_back_and_each_attempt_tags_its_reasoning() {
    // Anthropic thinks, then reports itself overloaded before any text.
    let anthropic = Upstream::always(sse(&[
        message_start(USAGE),
        block_start(0, THINKING),
        delta(0, r#"{"type":"thinking_delta","thinking":"Let me add."}"#),
        event(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
    ]))
    .await;
    let openai = Upstream::always(sse(&openai_reasoning_reply())).await;
    // The real binary, on a config file, with the key in its environment.
    let config = Config::builder()
        .provider("an", anthropic_at(&anthropic.base_url(), "claude"))
        .provider("oa", openai_at(&openai.base_url(), "r1"))
        .policy("default", PolicySpec::new(&["an/claude", "oa/r1"]))
        .ability("chat", AbilitySpec::new("default"));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), config.to_toml()).unwrap();
    let path = file.path().to_str().unwrap().to_owned();
    let (_server, addr) = tokio::task::spawn_blocking(move || {
        start_server_env(&["--config", &path], &[("TEST_API_KEY", KEY)], WAIT)
    })
    .await
    .unwrap();
    let mut client = within(ModelRuntimeClient::connect(format!("http://{addr}")))
        .await
        .unwrap();
    let events = execute(&mut client, request("chat", "2+2?")).await;

    assert_complete_sequence(&events);
    assert_eq!(
        reasoning_of(&events),
        [
            (1, "Let me add.".to_owned()),
            (2, "Two ".to_owned()),
            (2, "and two.".to_owned())
        ]
    );
    let result = completed_result(&events);
    assert_eq!(result.provider, "oa");
    let output = result.output.unwrap();
    assert_eq!(output.text, "Four.");
    // The result keeps the reasoning of the attempt that answered, not the failed one's.
    assert_eq!(output.reasoning.len(), 1);
    assert_eq!(output.reasoning[0].text, "Two and two.");
    let view = get(&mut client, &events[0].execution_id).await;
    let first = &view.attempts[0];
    assert!(!first.output_committed, "reasoning commits nothing");
    assert_eq!(first.error.as_ref().unwrap().code, "overloaded");
    assert_eq!(first.next_action(), pb::NextAction::Fallback);
}

#[tokio::test]
async fn a_thinking_signature_comes_back_in_the_result_and_goes_upstream_next_turn() {
    let anthropic = Upstream::always(sse(&anthropic_thinking_reply(
        "The user wants a greeting.",
        "EqQBCgIYAhIMsig",
        "Hello!",
    )))
    .await;
    let config = Config::builder()
        .provider("an", anthropic_at(&anthropic.base_url(), "claude"))
        .policy("default", PolicySpec::new(&["an/claude"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap();
    let mut server = start_with(config).await;
    let mut first = request("chat", "Say hello");
    first.input.as_mut().unwrap().parameters = Some(pb::GenerationParameters {
        max_output_tokens: Some(2048),
        reasoning_budget_tokens: Some(1024),
        ..Default::default()
    });
    let events = execute(&mut server.client, first).await;
    let view = get(&mut server.client, &events[0].execution_id).await;
    let output = view.result.unwrap().output.unwrap();
    assert_eq!(output.text, "Hello!");
    let block = output.reasoning[0].clone();
    assert_eq!(
        (block.text.as_str(), block.signature.as_str()),
        ("The user wants a greeting.", "EqQBCgIYAhIMsig")
    );
    // The budget went upstream as extended thinking.
    let sent = anthropic.requests()[0].json();
    assert_eq!(
        sent["thinking"],
        serde_json::json!({"type": "enabled", "budget_tokens": 1024})
    );

    // The next turn sends the reasoning back in the assistant message, as it came.
    let mut next = request("chat", "Again");
    let input = next.input.as_mut().unwrap();
    let assistant = pb::Message {
        role: pb::Role::Assistant.into(),
        content: vec![
            pb::ContentPart {
                part: Some(pb::content_part::Part::Reasoning(block)),
            },
            pb::ContentPart {
                part: Some(pb::content_part::Part::Text("Hello!".into())),
            },
        ],
        ..Default::default()
    };
    input.messages.insert(0, assistant);
    input.messages.insert(0, user("Say hello"));
    execute(&mut server.client, next).await;
    let sent = anthropic.requests()[1].json();
    assert_eq!(
        sent["messages"][1]["content"][0],
        serde_json::json!({
            "type": "thinking",
            "thinking": "The user wants a greeting.",
            "signature": "EqQBCgIYAhIMsig",
        })
    );
    server.stop().await;
}

#[tokio::test]
async fn reasoning_is_only_taken_back_in_assistant_messages() {
    let mut server = start(echo()).await;
    let mut r = request("chat", "hi");
    r.input.as_mut().unwrap().messages[0]
        .content
        .push(pb::ContentPart {
            part: Some(pb::content_part::Part::Reasoning(pb::Reasoning {
                text: "mine".into(),
                ..Default::default()
            })),
        });
    let status = server.client.submit(r).await.unwrap_err();
    assert_violation(
        &status,
        tonic::Code::InvalidArgument,
        "input.messages[0].content[1].reasoning",
    );
    server.stop().await;
}

#[tokio::test]
async fn a_reasoning_budget_must_leave_room_for_the_answer() {
    let mut server = start(echo()).await;
    let mut r = request("chat", "hi");
    r.input.as_mut().unwrap().parameters = Some(pb::GenerationParameters {
        max_output_tokens: Some(1024),
        reasoning_budget_tokens: Some(1024),
        ..Default::default()
    });
    let status = server.client.submit(r).await.unwrap_err();
    assert_violation(
        &status,
        tonic::Code::InvalidArgument,
        "input.parameters.reasoning_budget_tokens",
    );
    // A block with only a signature (a thinking block that streamed no text) goes back.
    let mut r = request("chat", "hi");
    r.input.as_mut().unwrap().messages.insert(
        0,
        pb::Message {
            role: pb::Role::Assistant.into(),
            content: vec![pb::ContentPart {
                part: Some(pb::content_part::Part::Reasoning(pb::Reasoning {
                    signature: "sig".into(),
                    ..Default::default()
                })),
            }],
            ..Default::default()
        },
    );
    execute(&mut server.client, r).await;
    server.stop().await;
}

/// What a call's events say of its usage.
fn usage_of(items: &[Result<ProviderEvent, ProviderError>]) -> Vec<ProviderEvent> {
    items
        .iter()
        .filter_map(|item| match item {
            Ok(event @ ProviderEvent::Usage(_)) => Some(event.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_reply_of_reasoning_alone_still_reports_its_estimated_usage() {
    let thinking = [
        openai_chunk(r#"{"role":"assistant","content":""}"#, "null"),
        openai_chunk(r#"{"reasoning_content":"Hmm, "}"#, "null"),
        openai_chunk(r#"{"reasoning_content":"let me see."}"#, "null"),
    ];
    // Finished with no answer and no usage; and cut before it finished.
    let finished: Vec<String> = thinking
        .iter()
        .cloned()
        .chain([openai_chunk("{}", r#""length""#), data("[DONE]")])
        .collect();
    for (reply, ends_well) in [(finished, true), (thinking.to_vec(), false)] {
        let upstream = Upstream::always(sse(&reply)).await;
        let config = adapters::config(openai_at(&upstream.base_url(), "r1"));
        let items = adapters::call(&adapters::provider(&config)).await;
        let (events, error) = adapters::split(items.clone());
        assert_eq!(error.is_none(), ends_well, "{events:?} {error:?}");
        assert_eq!(
            usage_of(&items),
            [
                adapters::estimated(UsageUnit::OUTPUT_TOKENS, 2),
                adapters::estimated(UsageUnit::REASONING_TOKENS, 2),
            ],
            "ends well: {ends_well}"
        );
        if ends_well {
            let note = events.iter().find_map(|e| match e {
                ProviderEvent::Progress(note) => Some(note.to_string()),
                _ => None,
            });
            let note = note.expect("a note that the provider reported nothing");
            assert!(
                note.contains("2 streamed piece(s), 2 of them reasoning"),
                "{note}"
            );
        }
    }
}
