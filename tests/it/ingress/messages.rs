//! `POST /v1/messages`: Anthropic's Messages API onto executions, whole and streamed.

use serde_json::{Value, json};

use super::client::{Ask, Reply, Version, send};
use super::{config, serve, with_tools};

const MESSAGES: &str = "/v1/messages";

fn messages(model: &str, prompt: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "max_tokens": 256,
        "system": "be brief",
        "messages": [{"role": "user", "content": prompt}],
        "stream": stream,
    })
}

/// The stream's events: each `event:` with its `data:` object.
fn events(reply: &Reply) -> Vec<(String, Value)> {
    reply
        .body
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let kind = e
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap()
                .to_owned();
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            (kind, serde_json::from_str(data).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn a_whole_message_with_its_target_and_usage() {
    let (_server, http) = serve(config()).await;
    let reply = send(
        http,
        Version::Http1,
        Ask::post(MESSAGES),
        Some(&messages("fallback", "hi there", false)),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["type"], "message");
    assert_eq!(body["model"], "scripted/echo");
    assert_eq!(
        body["content"],
        json!([{"type": "text", "text": "hi there"}])
    );
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["usage"]["output_tokens"], 2);
    assert_eq!(
        reply.header("x-model-runtime-execution-id"),
        body["id"].as_str().unwrap()
    );
}

#[tokio::test]
async fn a_stream_is_anthropics_event_sequence() {
    let (_server, http) = serve(config()).await;
    for version in [Version::Http1, Version::H2c] {
        let reply = send(
            http,
            version,
            Ask::post(MESSAGES),
            Some(&messages("fallback", "a b c", true)),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let events = events(&reply);
        let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kinds.first(), Some(&"message_start"));
        assert_eq!(kinds[1], "content_block_start");
        assert_eq!(
            &kinds[kinds.len() - 3..],
            ["content_block_stop", "message_delta", "message_stop"]
        );
        assert_eq!(events[0].1["message"]["model"], "scripted/echo");
        let text: String = events
            .iter()
            .filter(|(k, _)| k == "content_block_delta")
            .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(text, "a b c");
        let delta = &events[events.len() - 2].1;
        assert_eq!(delta["delta"]["stop_reason"], "end_turn");
        assert_eq!(delta["usage"]["output_tokens"], 3);
    }
}

#[tokio::test]
async fn a_failure_after_output_ends_with_an_error_event_and_no_stop() {
    let (_server, http) = serve(config()).await;
    let reply = send(
        http,
        Version::Http1,
        Ask::post(MESSAGES),
        Some(&messages("cut", "one two three", true)),
    )
    .await;
    let events = events(&reply);
    let (kind, data) = events.last().unwrap();
    assert_eq!(kind, "error", "{}", reply.body);
    assert_eq!(data["error"]["type"], "api_error");
    assert!(!events.iter().any(|(k, _)| k == "message_stop"));
}

#[tokio::test]
async fn tools_go_out_as_tool_use_and_come_back_as_tool_results() {
    let config = with_tools(config());
    let (_server, http) = serve(config).await;
    let tools = json!([{"name": "get_weather", "input_schema": {"type": "object"}}]);
    let mut ask = messages("tools", "weather?", false);
    ask["tools"] = tools.clone();
    let reply = send(http, Version::Http1, Ask::post(MESSAGES), Some(&ask)).await;
    let body = reply.json();
    assert_eq!(body["stop_reason"], "tool_use", "{}", reply.body);
    assert_eq!(body["content"][0]["type"], "tool_use");
    assert_eq!(body["content"][0]["input"], json!({"city": "Paris"}));

    let mut stream = ask.clone();
    stream["stream"] = json!(true);
    let reply = send(http, Version::Http1, Ask::post(MESSAGES), Some(&stream)).await;
    let events = events(&reply);
    let start = events
        .iter()
        .find(|(k, _)| k == "content_block_start")
        .unwrap();
    assert_eq!(
        start.1["content_block"]["name"], "get_weather",
        "{}",
        reply.body
    );
    let json: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["partial_json"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(json, r#"{"city":"Paris"}"#);

    // The next turn: the call, and its result.
    let next = json!({
        "model": "tools",
        "max_tokens": 64,
        "tools": tools,
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "look it up", "signature": "sig"},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
                {"type": "text", "text": "and so?", "cache_control": {"type": "ephemeral"}},
            ]},
        ],
    });
    let reply = send(http, Version::Http1, Ask::post(MESSAGES), Some(&next)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // Tools need a target that has them: the echo has none.
    let mut echo = next.clone();
    echo["model"] = json!("chat");
    let reply = send(http, Version::Http1, Ask::post(MESSAGES), Some(&echo)).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.json()["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn refusals_are_in_anthropics_shape() {
    let (_server, http) = serve(config()).await;
    let reply = send(
        http,
        Version::Http1,
        Ask::post(MESSAGES),
        Some(&messages("nope", "x", false)),
    )
    .await;
    assert_eq!(reply.status, 404);
    let body = reply.json();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "not_found_error");
    let mut ask = messages("chat", "x", false);
    ask["top_k"] = json!(5);
    let reply = send(http, Version::Http1, Ask::post(MESSAGES), Some(&ask)).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("top_k:"),
        "{}",
        reply.body
    );
    let reply = send(
        http,
        Version::Http1,
        Ask::post(MESSAGES),
        Some(&json!({"model": "chat", "messages": []})),
    )
    .await;
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens"),
        "{}",
        reply.body
    );
}
