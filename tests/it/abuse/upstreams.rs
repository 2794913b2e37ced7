//! Attacks by upstreams: a provider that streams forever, one that sends a single event of
//! 50 MB, one with a tool-call index at the top of its range.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::pb;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use super::harness::*;
use crate::common::upstream::{NotifyOnDrop, serve_raw};
use crate::common::*;

/// An OpenAI-compatible upstream that answers every request with the chunks `body` makes, as
/// a chunked SSE body, until they run out or the client hangs up.
struct Upstream {
    port: u16,
    /// Notified when a client hangs up mid-body.
    hung_up: Arc<Notify>,
    /// Body bytes written so far.
    sent: Arc<AtomicU64>,
}

type Body = Box<dyn Iterator<Item = Vec<u8>> + Send>;

impl Upstream {
    async fn start(body: impl Fn() -> Body + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hung_up = Arc::new(Notify::new());
        let sent = Arc::new(AtomicU64::new(0));
        let (hangs, counts, body) = (hung_up.clone(), sent.clone(), Arc::new(body));
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (hangs, counts, body) = (hangs.clone(), counts.clone(), body.clone());
                // One request per connection, answered by the body's chunks.
                tokio::spawn(serve_raw(socket, move |_, raw| {
                    let (hangs, counts, body) = (hangs.clone(), counts.clone(), body.clone());
                    async move {
                        let mut socket = raw.lock().await;
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                                    transfer-encoding: chunked\r\n\r\n";
                        if socket.write_all(head.as_bytes()).await.is_err() {
                            return false;
                        }
                        let hung_up = NotifyOnDrop::new(hangs);
                        for chunk in body() {
                            let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
                            framed.extend_from_slice(&chunk);
                            framed.extend_from_slice(b"\r\n");
                            if socket.write_all(&framed).await.is_err() {
                                return false;
                            }
                            counts.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        }
                        hung_up.disarm();
                        let _ = socket.write_all(b"0\r\n\r\n").await;
                        false
                    }
                }));
            }
        });
        Self {
            port,
            hung_up,
            sent,
        }
    }

    /// A config whose `attack` ability runs on this upstream's model `m`, beside the
    /// well-behaved caller's `chat`.
    fn config(&self, capabilities: &[&str]) -> model_runtime::config::ConfigBuilder {
        let base_url = format!("http://127.0.0.1:{}/v1", self.port);
        echo()
            .provider(
                "upstream",
                ProviderSpec::openai(&base_url).model("m", capabilities),
            )
            .policy("upstream", PolicySpec::new(&["upstream/m"]).max_attempts(1))
            .ability("attack", AbilitySpec::new("upstream"))
    }

    /// Waits until a client hung up on a body still being sent.
    async fn until_hung_up(&self) {
        within(self.hung_up.notified()).await;
    }
}

fn data(json: &str) -> Vec<u8> {
    format!("data: {json}\n\n").into_bytes()
}

fn delta(content: &str) -> Vec<u8> {
    data(&format!(
        r#"{{"choices":[{{"index":0,"delta":{{"content":"{content}"}},"finish_reason":null}}]}}"#
    ))
}

#[tokio::test]
async fn an_upstream_streaming_one_byte_deltas_forever() {
    let upstream = Upstream::start(|| Box::new(std::iter::repeat_with(|| delta("x")))).await;
    let target = Target::start(upstream.config(&["text"]).max_events_per_execution(20_000));
    let good = WellBehaved::start(&target).await;
    let settled = target.settled_rss().await;
    let mut attacker = target.client().await;
    for _ in 0..3 {
        let events = execute(&mut attacker, request("attack", "go on")).await;
        assert_complete_sequence(&events);
        let failed = failed_payload(&events);
        let error = failed.error.unwrap();
        assert_eq!(error.code, "output_too_large", "{error:?}");
        // What was streamed is kept as evidence, and the provider call was dropped.
        let partial = failed.partial_output.unwrap().text;
        assert!(
            partial.len() > 19_000 && partial.len() < 20_000,
            "{}",
            partial.len()
        );
        upstream.until_hung_up().await;
    }
    target.assert_grew_under(settled, mib(32), "endless deltas");
    good.assert_served(10, "endless deltas").await;
}

#[tokio::test]
async fn an_upstream_sending_one_fifty_megabyte_event() {
    // `data: ` and then 50 MB without a line end, a megabyte at a time.
    let upstream = Upstream::start(|| {
        let start = std::iter::once(b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec());
        Box::new(start.chain(std::iter::repeat_n(vec![b'x'; 1 << 20], 50)))
    })
    .await;
    let target = Target::start(upstream.config(&["text"]));
    let good = WellBehaved::start(&target).await;
    let settled = target.settled_rss().await;
    let mut attacker = target.client().await;
    for _ in 0..3 {
        let events = execute(&mut attacker, request("attack", "hello")).await;
        let error = failed_payload(&events).error.unwrap();
        let attempt = error.last_attempt_error.expect("the attempt's error");
        assert_eq!(attempt.code, "protocol_error", "{attempt:?}");
        // No internals: the message says what, not the parser's words.
        assert!(attempt.message.len() < 512, "{}", attempt.message);
        upstream.until_hung_up().await;
    }
    // The runtime stopped reading soon after the first megabyte of each.
    let sent = upstream.sent.load(Ordering::Relaxed);
    assert!(sent < mib(24), "{sent} bytes were sent");
    // Its live heap stays near 3 MiB (massif, system allocator); the rest is pages the allocator
    // keeps for the next burst of megabyte buffers.
    target.assert_grew_under(settled, mib(24), "one huge event");
    good.assert_served(5, "one huge event").await;
}

#[tokio::test]
async fn an_upstream_tool_call_index_at_the_top_of_its_range() {
    let upstream = Upstream::start(|| {
        Box::new(
            [
                data(
                    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":4294967295,"id":"call_1","function":{"name":"lookup","arguments":"{\"q\":1}"}}]}}]}"#,
                ),
                data(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#),
                b"data: [DONE]\n\n".to_vec(),
            ]
            .into_iter(),
        )
    })
    .await;
    let target = Target::start(upstream.config(&["text", "tools"]));
    let settled = target.settled_rss().await;
    let mut attacker = target.client().await;
    let events = execute(&mut attacker, request("attack", "look it up")).await;
    assert_complete_sequence(&events);
    let result = completed_result(&events);
    assert_eq!(result.finish_reason(), pb::FinishReason::ToolCalls);
    let output = result.output.unwrap();
    assert_eq!(output.tool_calls.len(), 1);
    let call = &output.tool_calls[0];
    assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "lookup"));
    assert_eq!(call.arguments_json, r#"{"q":1}"#);
    target.assert_grew_under(settled, mib(16), "tool call index");
}
