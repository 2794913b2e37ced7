//! The HTTP ingress over real loopback HTTP/1.1 and h2c: OpenAI's chat completions, streaming
//! and not, keeping every rule of the protocol (a fallback before commit unseen, a failure
//! after output raised and never a normal end, buffered delivery rescued after a cut), the
//! idempotency key, a caller that goes away, resuming, the refusals with their statuses, the
//! models and the execution as a resource, and the drain. (docs/protocol.md: HTTP-1..5.)

pub(crate) mod client;
mod grpc_web;
mod messages;
mod responses;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use client::{Ask, Version, next_data, open, read, send};
use model_runtime::config::{
    AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec, ScriptedToolCall,
};

/// A grace short enough for a test to wait it out.
const GRACE: Duration = Duration::from_millis(400);

/// `config` served with its ingress; the server and the ingress's address.
async fn serve(config: ConfigBuilder) -> (TestServer, SocketAddr) {
    let server = start(config.ingress("127.0.0.1:0", GRACE)).await;
    let http = server.http.expect("the ingress listens");
    (server, http)
}

/// The embedded default's echo, and abilities whose first target fails in each way before
/// the echo answers: `fallback` (fails before output), `cut` (a streamed answer cut after two
/// deltas, falling back under buffered delivery), `slow` (a word every 100 ms), `hang`.
fn config() -> ConfigBuilder {
    echo()
        .provider(
            "flaky",
            ProviderSpec::scripted()
                .scripted_model("down", &["text"], script(|s| s.fail_attempts = 100))
                .scripted_model("cut", &["text"], script(|s| s.fail_after_deltas = Some(2)))
                .scripted_model("slow", &["text"], script(|s| s.delta_interval_ms = 100))
                .scripted_model("stuck", &["text"], script(|s| s.hang = true)),
        )
        .policy(
            "fallback",
            PolicySpec::new(&["flaky/down", "scripted/echo"]).backoff(Duration::from_millis(1)),
        )
        .ability("fallback", AbilitySpec::new("fallback"))
        .policy(
            "cut",
            PolicySpec::new(&["flaky/cut", "scripted/echo"]).backoff(Duration::from_millis(1)),
        )
        .ability("cut", AbilitySpec::new("cut"))
        .policy("slow", PolicySpec::new(&["flaky/slow"]))
        .ability("slow", AbilitySpec::new("slow"))
        .policy("hang", PolicySpec::new(&["flaky/stuck"]))
        .ability("hang", AbilitySpec::new("hang"))
}

/// `config` with a `tools` ability whose model calls `get_weather` for Paris.
fn with_tools(config: ConfigBuilder) -> ConfigBuilder {
    let call = ScriptedToolCall {
        name: "get_weather".into(),
        arguments: r#"{"city":"Paris"}"#.into(),
    };
    config
        .provider(
            "tools",
            ProviderSpec::scripted().scripted_model(
                "weather",
                &["text", "tools"],
                script(|s| s.tool_call = Some(call)),
            ),
        )
        .policy("tools", PolicySpec::new(&["tools/weather"]))
        .ability("tools", AbilitySpec::new("tools"))
}

fn chat(model: &str, prompt: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": stream,
        "stream_options": if stream { json!({"include_usage": true}) } else { Value::Null },
    })
}

const COMPLETIONS: &str = "/v1/chat/completions";

/// `body` posted to the chat completions over HTTP/1.1, with `headers`.
async fn complete(http: SocketAddr, headers: &[(&str, &str)], body: &Value) -> client::Reply {
    send(
        http,
        Version::Http1,
        Ask::post(COMPLETIONS).with(headers),
        Some(body),
    )
    .await
}

#[tokio::test]
async fn a_whole_answer_names_its_execution_target_and_usage() {
    let (_server, http) = serve(config()).await;
    for version in [Version::Http1, Version::H2c] {
        let reply = send(
            http,
            version,
            Ask::post(COMPLETIONS),
            Some(&chat("chat", "hello there", false)),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let body = reply.json();
        assert_eq!(body["object"], "chat.completion");
        assert_eq!(body["model"], "scripted/echo");
        assert_eq!(body["choices"][0]["message"]["content"], "hello there");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["completion_tokens"], 2);
        let id = body["id"].as_str().unwrap();
        assert!(id.starts_with("ex_"), "{id}");
        assert_eq!(reply.header("x-model-runtime-execution-id"), id);
        assert_eq!(reply.header("x-request-id"), id);
        assert_eq!(reply.header("x-model-runtime-target"), "scripted/echo");
    }
}

#[tokio::test]
async fn a_stream_ends_with_usage_and_done_and_hides_a_fallback_before_commit() {
    let (_server, http) = serve(config()).await;
    for version in [Version::Http1, Version::H2c] {
        let reply = send(
            http,
            version,
            Ask::post(COMPLETIONS),
            Some(&chat("fallback", "one two three", true)),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.header("content-type"), "text/event-stream");
        assert_eq!(reply.streamed_text(), "one two three");
        let chunks = reply.chunks();
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        // The failed attempt on flaky/down shows nowhere: every chunk is the echo's.
        assert!(
            chunks.iter().all(|c| c["model"] == "scripted/echo"),
            "{chunks:?}"
        );
        let usage = chunks.last().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["completion_tokens"], 3);
        assert_eq!(reply.data().last(), Some(&"[DONE]"));
        assert!(
            reply.body.contains("id: "),
            "each chunk carries its event's sequence"
        );
    }
}

#[tokio::test]
async fn a_failure_after_output_ends_the_stream_with_an_error_and_no_done() {
    let (_server, http) = serve(config()).await;
    let reply = complete(http, &[], &chat("cut", "one two three four", true)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.streamed_text(), "one two ");
    let data = reply.data();
    assert!(
        !data.contains(&"[DONE]"),
        "a cut answer never ends as a whole one: {data:?}"
    );
    let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "output_interrupted", "{last}");
}

#[tokio::test]
async fn a_whole_answer_is_rescued_from_a_cut_by_falling_back() {
    let (_server, http) = serve(config()).await;
    let reply = complete(http, &[], &chat("cut", "one two three four", false)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "one two three four"
    );
    assert_eq!(body["model"], "scripted/echo");
}

#[tokio::test]
async fn refusals_have_their_status_and_name_the_field() {
    let (_server, http) = serve(config()).await;
    let post = |body: Value| async move {
        send(http, Version::Http1, Ask::post(COMPLETIONS), Some(&body)).await
    };
    let reply = post(chat("nope", "hi", false)).await;
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert_eq!(reply.json()["error"]["param"], "model");
    assert_eq!(reply.json()["error"]["type"], "not_found_error");

    let reply = post(json!({"model": "chat", "messages": [{"role": "user", "content": 7}]})).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(
        reply.json()["error"]["param"],
        "messages[0].content",
        "{}",
        reply.body
    );

    let reply = post(json!({"model": "chat", "messages": [], "seed": 1})).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.json()["error"]["param"], "seed", "{}", reply.body);

    let reply =
        post(json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "n": 2}))
            .await;
    assert_eq!(reply.json()["error"]["param"], "n", "{}", reply.body);

    let reply =
        post(json!({"model": "chat/nope", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.json()["error"]["param"], "policy", "{}", reply.body);

    // A schema reads (and asks for a target that can keep to one, which the echo is not).
    let mut schema = chat("chat", "x", false);
    schema["response_format"] =
        json!({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}});
    let reply = post(schema).await;
    assert_eq!(
        reply.json()["error"]["code"],
        "no_capable_target",
        "{}",
        reply.body
    );

    let reply = send(http, Version::Http1, Ask::get(COMPLETIONS), None).await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), "POST");
    let reply = send(http, Version::Http1, Ask::get("/v1/nothing"), None).await;
    assert_eq!(reply.status, 404);
}

#[tokio::test]
async fn an_idempotency_key_attaches_a_retry_and_refuses_another_body() {
    let (_server, http) = serve(config()).await;
    let first = complete(
        http,
        &[("idempotency-key", "k-1")],
        &chat("chat", "same words", false),
    )
    .await;
    let again = complete(
        http,
        &[("idempotency-key", "k-1")],
        &chat("chat", "same words", false),
    )
    .await;
    assert_eq!(first.status, 200);
    assert_eq!(again.json()["id"], first.json()["id"], "the retry attached");
    let other = complete(
        http,
        &[("idempotency-key", "k-1")],
        &chat("chat", "other words", false),
    )
    .await;
    assert_eq!(other.status, 422, "{}", other.body);
    assert_eq!(other.json()["error"]["param"], "Idempotency-Key");
}

#[tokio::test]
async fn a_stream_resumes_after_the_last_event_its_caller_saw() {
    let (_server, http) = serve(config()).await;
    let whole = complete(
        http,
        &[("idempotency-key", "resume")],
        &chat("chat", "a b c d", true),
    )
    .await;
    // The id of the chunk that carried "b ".
    let ids: Vec<&str> = whole
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    let after = ids[1];
    let resumed = send(
        http,
        Version::Http1,
        Ask::post(COMPLETIONS).with(&[("idempotency-key", "resume"), ("last-event-id", after)]),
        Some(&chat("chat", "a b c d", true)),
    )
    .await;
    assert_eq!(resumed.streamed_text(), "c d");
    assert_eq!(resumed.data().last(), Some(&"[DONE]"));
}

#[tokio::test]
async fn a_caller_that_goes_away_cancels_at_once_without_a_key() {
    let (mut server, http) = serve(config()).await;
    let response = open(
        http,
        Version::Http1,
        Ask::post(COMPLETIONS),
        Some(&chat("slow", "w1 w2 w3 w4 w5 w6 w7 w8", true)),
    )
    .await;
    let id = response.headers()["x-model-runtime-execution-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut body = response.into_body();
    assert!(next_data(&mut body).await.unwrap().contains("w1"));
    drop(body);
    let view = until_state(
        &mut server.client,
        &id,
        model_runtime::pb::ExecutionState::Cancelled,
    )
    .await;
    assert!(view.error.unwrap().message.contains("went away"));
}

#[tokio::test]
async fn with_a_key_a_retry_within_the_grace_attaches_and_none_cancels() {
    let (mut server, http) = serve(config()).await;
    let keyed = [("idempotency-key", "detach")];
    let request = chat("slow", "w1 w2 w3 w4 w5 w6", true);
    let response = open(
        http,
        Version::Http1,
        Ask::post(COMPLETIONS).with(&keyed),
        Some(&request),
    )
    .await;
    let id = response.headers()["x-model-runtime-execution-id"]
        .to_str()
        .unwrap()
        .to_owned();
    drop(response);
    // The retry attaches within the grace, and reads the answer to its end.
    let retry = send(
        http,
        Version::Http1,
        Ask::post(COMPLETIONS).with(&keyed),
        Some(&request),
    )
    .await;
    assert_eq!(retry.streamed_text(), "w1 w2 w3 w4 w5 w6");
    assert_eq!(
        get(&mut server.client, &id).await.state(),
        model_runtime::pb::ExecutionState::Succeeded
    );

    // Nobody comes back: the grace passes and it is cancelled.
    let keyed = [("idempotency-key", "gone")];
    let long = chat("slow", &"w ".repeat(100), true);
    let response = open(
        http,
        Version::Http1,
        Ask::post(COMPLETIONS).with(&keyed),
        Some(&long),
    )
    .await;
    let id = response.headers()["x-model-runtime-execution-id"]
        .to_str()
        .unwrap()
        .to_owned();
    drop(response);
    tokio::time::sleep(GRACE / 2).await;
    assert_eq!(
        get(&mut server.client, &id).await.state(),
        model_runtime::pb::ExecutionState::Running
    );
    until_state(
        &mut server.client,
        &id,
        model_runtime::pb::ExecutionState::Cancelled,
    )
    .await;
}

#[tokio::test]
async fn a_full_queue_is_a_429_with_retry_after() {
    let config = config()
        .provider(
            "narrow",
            ProviderSpec::scripted()
                .max_concurrency(1)
                .queue_capacity(0)
                .scripted_model("stuck", &["text"], script(|s| s.hang = true)),
        )
        .policy("narrow", PolicySpec::new(&["narrow/stuck"]).max_attempts(1))
        .ability("narrow", AbilitySpec::new("narrow"));
    let (mut server, http) = serve(config).await;
    // The one permit is held by an answer that never comes (its status waits for output).
    let first = tokio::spawn(async move {
        send(
            http,
            Version::Http1,
            Ask::post(COMPLETIONS),
            Some(&chat("narrow", "x", true)),
        )
        .await
    });
    until_provider(&mut server.client, "narrow", |p| p.in_flight == 1).await;
    let reply = complete(http, &[], &chat("narrow", "y", false)).await;
    assert_eq!(reply.status, 429, "{}", reply.body);
    assert!(reply.header("retry-after").parse::<u64>().unwrap() >= 1);
    assert_eq!(reply.json()["error"]["type"], "rate_limit_error");
    first.abort();
}

#[tokio::test]
async fn models_list_the_abilities_and_their_policies() {
    let (_server, http) = serve(config()).await;
    let reply = send(http, Version::Http1, Ask::get("/v1/models"), None).await;
    let body = reply.json();
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"chat") && ids.contains(&"chat/default") && ids.contains(&"fallback"),
        "{ids:?}"
    );
    let anthropic = send(
        http,
        Version::Http1,
        Ask::get("/v1/models").with(&[("anthropic-version", "2023-06-01")]),
        None,
    )
    .await;
    assert_eq!(anthropic.json()["data"][0]["type"], "model");
}

#[tokio::test]
async fn the_execution_is_a_resource_its_events_resumable_and_cancellable() {
    let (mut server, http) = serve(config()).await;
    let done = complete(http, &[], &chat("chat", "x y", false)).await;
    let id = done.json()["id"].as_str().unwrap().to_owned();
    let view = send(
        http,
        Version::Http1,
        Ask::get(&format!("/v1/executions/{id}")),
        None,
    )
    .await;
    assert_eq!(
        view.json()["state"],
        "EXECUTION_STATE_SUCCEEDED",
        "{}",
        view.body
    );

    let path = format!("/v1/executions/{id}/events");
    let events = send(http, Version::Http1, Ask::get(&path), None).await;
    assert!(
        events
            .body
            .starts_with("id: 1\nevent: execution.accepted\n"),
        "{}",
        events.body
    );
    assert!(events.body.contains("event: execution.completed"));
    let resumed = send(
        http,
        Version::H2c,
        Ask::get(&path).with(&[("last-event-id", "2")]),
        None,
    )
    .await;
    assert!(resumed.body.starts_with("id: 3\n"), "{}", resumed.body);
    let after = send(
        http,
        Version::Http1,
        Ask::get(&format!("{path}?after=3")),
        None,
    )
    .await;
    assert!(after.body.starts_with("id: 4\n"), "{}", after.body);

    // A running execution, cancelled through the resource: its events' reader sees the end.
    let running = submit(&mut server.client, request("hang", "x"))
        .await
        .execution_id;
    let path = format!("/v1/executions/{running}/events");
    let watching = open(http, Version::Http1, Ask::get(&path), None).await;
    let cancel = format!("/v1/executions/{running}/cancel");
    let cancelled = send(
        http,
        Version::Http1,
        Ask::post(&cancel),
        Some(&json!({"reason": "enough"})),
    )
    .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(
        cancelled.json()["state"],
        "EXECUTION_STATE_CANCELLED",
        "{}",
        cancelled.body
    );
    let ended = read(watching).await;
    assert!(
        ended.body.contains("event: execution.failed"),
        "{}",
        ended.body
    );
    let missing = send(
        http,
        Version::Http1,
        Ask::get("/v1/executions/ex_00000000000000000000000000000000"),
        None,
    )
    .await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn a_drain_lets_a_stream_finish_and_refuses_new_work() {
    // Room in the drain for the slow answer to finish.
    let (mut server, http) = serve(config().drain_timeout(Duration::from_secs(5))).await;
    let response = open(
        http,
        Version::Http1,
        Ask::post(COMPLETIONS),
        Some(&chat("slow", "w1 w2 w3", true)),
    )
    .await;
    server.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let refused = complete(http, &[], &chat("chat", "late", false)).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.header("retry-after").parse::<u64>().is_ok());
    let finished = read(response).await;
    assert_eq!(finished.streamed_text(), "w1 w2 w3");
    assert_eq!(finished.data().last(), Some(&"[DONE]"));
    let task = server.take_task();
    within(task).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_gateway_secret_is_required_when_configured() {
    let config = config()
        .ingress("127.0.0.1:0", GRACE)
        .ingress_secret_env("INGRESS_SECRET")
        .build_with_env(&|name| (name == "INGRESS_SECRET").then(|| "s3cret".to_owned()))
        .unwrap();
    let server = start_with(config).await;
    let http = server.http.unwrap();
    let none = send(http, Version::Http1, Ask::get("/v1/models"), None).await;
    assert_eq!(none.status, 401);
    assert!(!none.body.contains("s3cret"));
    let bearer = send(
        http,
        Version::Http1,
        Ask::get("/v1/models").with(&[("authorization", "Bearer s3cret")]),
        None,
    )
    .await;
    assert_eq!(bearer.status, 200);
    let key = send(
        http,
        Version::Http1,
        Ask::get("/v1/models").with(&[("x-api-key", "s3cret")]),
        None,
    )
    .await;
    assert_eq!(key.status, 200);
}

/// A caller that leaves before anything was shown (its status still waits for output) is gone
/// as well: over HTTP/1.1 the closed connection, over h2c the reset stream.
#[tokio::test]
async fn a_caller_that_leaves_before_the_status_cancels_too() {
    use tokio::io::AsyncWriteExt;
    let (mut server, http) = serve(config()).await;
    let body = chat("hang", "x", true).to_string();
    let mut stream = tokio::net::TcpStream::connect(http).await.unwrap();
    let head = format!(
        "POST {COMPLETIONS} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    until_provider(&mut server.client, "flaky", |p| p.in_flight == 1).await;
    drop(stream);
    until_provider(&mut server.client, "flaky", |p| p.in_flight == 0).await;

    let asked = tokio::spawn(async move {
        open(
            http,
            Version::H2c,
            Ask::post(COMPLETIONS),
            Some(&chat("hang", "y", true)),
        )
        .await
    });
    until_provider(&mut server.client, "flaky", |p| p.in_flight == 1).await;
    asked.abort();
    until_provider(&mut server.client, "flaky", |p| p.in_flight == 0).await;
}
