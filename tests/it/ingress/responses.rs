//! `POST /v1/responses`: OpenAI's Responses API onto executions, whole and streamed.

use serde_json::{Value, json};

use super::client::{Ask, Reply, Version, send};
use super::{config, serve, with_tools};

const RESPONSES: &str = "/v1/responses";

fn responses(model: &str, prompt: &str, stream: bool) -> Value {
    json!({"model": model, "instructions": "be brief", "input": prompt, "stream": stream})
}

/// The stream's events' data, in order.
fn events(reply: &Reply) -> Vec<Value> {
    reply
        .data()
        .into_iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn a_whole_response_with_its_target_and_usage() {
    let (_server, http) = serve(config()).await;
    let reply = send(
        http,
        Version::Http1,
        Ask::post(RESPONSES),
        Some(&responses("fallback", "hi there", false)),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["model"], "scripted/echo");
    assert_eq!(body["output"][0]["content"][0]["text"], "hi there");
    assert_eq!(body["usage"]["output_tokens"], 2);
}

#[tokio::test]
async fn a_stream_is_the_responses_event_sequence() {
    let (_server, http) = serve(config()).await;
    for version in [Version::Http1, Version::H2c] {
        let reply = send(
            http,
            version,
            Ask::post(RESPONSES),
            Some(&responses("fallback", "a b c", true)),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let events = events(&reply);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            &kinds[..3],
            [
                "response.created",
                "response.output_item.added",
                "response.content_part.added"
            ]
        );
        assert_eq!(
            &kinds[kinds.len() - 4..],
            [
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        let numbers: Vec<u64> = events
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
        let text: String = events
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .map(|e| e["delta"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(text, "a b c");
        let completed = &events.last().unwrap()["response"];
        assert_eq!(completed["model"], "scripted/echo");
        assert_eq!(completed["output"][0]["content"][0]["text"], "a b c");
    }
}

#[tokio::test]
async fn a_failure_after_output_ends_with_an_error_event_and_no_completion() {
    let (_server, http) = serve(config()).await;
    let reply = send(
        http,
        Version::Http1,
        Ask::post(RESPONSES),
        Some(&responses("cut", "one two three", true)),
    )
    .await;
    let events = events(&reply);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error", "{}", reply.body);
    assert_eq!(last["error"]["code"], "output_interrupted");
    assert!(!events.iter().any(|e| e["type"] == "response.completed"));
}

#[tokio::test]
async fn function_calls_go_out_and_their_outputs_come_back() {
    let config = with_tools(config());
    let (_server, http) = serve(config).await;
    let tools =
        json!([{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]);
    let mut ask = responses("tools", "weather?", false);
    ask["tools"] = tools.clone();
    let body = send(http, Version::Http1, Ask::post(RESPONSES), Some(&ask))
        .await
        .json();
    let call = &body["output"][0];
    assert_eq!(call["type"], "function_call", "{body}");
    assert_eq!(call["arguments"], r#"{"city":"Paris"}"#);

    ask["stream"] = json!(true);
    let reply = send(http, Version::Http1, Ask::post(RESPONSES), Some(&ask)).await;
    let arguments: String = events(&reply)
        .iter()
        .filter(|e| e["type"] == "response.function_call_arguments.delta")
        .map(|e| e["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(arguments, r#"{"city":"Paris"}"#, "{}", reply.body);

    let next = json!({
        "model": "tools",
        "tools": tools,
        "input": [
            {"role": "user", "content": "weather?"},
            {"type": "function_call", "call_id": call["call_id"], "name": "get_weather", "arguments": r#"{"city":"Paris"}"#},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and so?"}]},
        ],
    });
    let reply = send(http, Version::Http1, Ask::post(RESPONSES), Some(&next)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let mut kept = next.clone();
    kept["previous_response_id"] = json!("resp_1");
    let reply = send(http, Version::Http1, Ask::post(RESPONSES), Some(&kept)).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["error"]["param"], "previous_response_id");
}
