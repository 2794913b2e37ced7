//! `model-runtime mock-upstream`: a provider that answers at once, for measuring the
//! provider path without the peers (`benches/provider.sh`). It speaks HTTP/1.1 with
//! keep-alive and answers, by the request's path:
//!
//! - `POST .../chat/completions` as OpenAI streams it: a role chunk, `chunks` content chunks,
//!   a finish chunk, a usage chunk, `[DONE]`;
//! - `POST .../messages` (and Vertex AI's `...:streamRawPredict`) as Anthropic streams it:
//!   `message_start`, a text block of `chunks` deltas, `message_delta`, `message_stop`;
//! - `POST .../responses` as the Responses API streams it: `response.created`, a message
//!   item, `chunks` text deltas, `response.completed` with usage;
//! - `POST ...:streamGenerateContent` (the Gemini API's and Vertex AI's) as Gemini streams it:
//!   `chunks` chunks, the last with the finish reason and usage;
//! - `POST .../converse-stream` as Bedrock streams it, in AWS's binary event stream:
//!   `messageStart`, `chunks` text deltas, `contentBlockStop`, `messageStop`, `metadata` (the
//!   signature is not checked).
//!
//! Each event is one HTTP chunk, the whole reply written at once, as a fast upstream's would
//! arrive. Its requests are read by the library's HTTP/1.1 reader (`server::http1`), the one
//! `/metrics` and the tests' fake provider use. Loopback only.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use model_runtime::server::http1::{self, Frames, Limits, Request, Response};
use tokio::net::TcpListener;

use crate::cli::exit;

/// Requests as the load's own client sends them, over keep-alive connections that last as
/// long as it likes; the largest head and the largest body it reads are 1 MiB each.
const LIMITS: Limits = Limits {
    head: 1 << 20,
    headers: 100,
    body: 1 << 20,
    keep_alive: true,
    time: None,
};

/// `mock-upstream`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct MockArgs {
    /// Where to listen (a loopback address).
    #[arg(long, default_value = "127.0.0.1:9100")]
    listen: SocketAddr,
    /// Content chunks per reply.
    #[arg(long, default_value_t = 20)]
    chunks: usize,
}

/// Serves until the process is stopped.
pub async fn main(args: MockArgs) -> ExitCode {
    let MockArgs { listen, chunks } = args;
    if !listen.ip().is_loopback() {
        eprintln!("mock-upstream listens on loopback only, not {listen}");
        return exit::invalid();
    }
    let listener = match TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("cannot listen on {listen}: {e}");
            return exit::failed();
        }
    };
    let replies = Arc::new(Replies {
        openai: frames(openai(chunks)),
        anthropic: frames(anthropic(chunks)),
        responses: frames(responses(chunks)),
        gemini: frames(gemini(chunks)),
        bedrock: bedrock(chunks),
    });
    match listener.local_addr() {
        Ok(addr) => println!("mock-upstream listening addr={addr}"),
        Err(e) => eprintln!("{e}"),
    }
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let _ = socket.set_nodelay(true);
        let replies = replies.clone();
        tokio::spawn(async move {
            http1::serve_connection(socket, &LIMITS, |request| {
                std::future::ready(Some(replies.answer(&request)))
            })
            .await;
        });
    }
}

/// Each reply's events, made once.
struct Replies {
    openai: Arc<[Bytes]>,
    anthropic: Arc<[Bytes]>,
    responses: Arc<[Bytes]>,
    gemini: Arc<[Bytes]>,
    bedrock: Arc<[Bytes]>,
}

impl Replies {
    /// The reply to `request`, by its path: an event stream, each event one chunk of it.
    fn answer(&self, request: &Request) -> Response {
        let path = request.uri().path();
        let mut content_type = "text/event-stream";
        let events = if path.contains("/messages") || path.ends_with(":streamRawPredict") {
            &self.anthropic
        } else if path.contains("/chat/completions") {
            &self.openai
        } else if path.ends_with("/responses") {
            &self.responses
        } else if path.ends_with(":streamGenerateContent") {
            &self.gemini
        } else if path.ends_with("/converse-stream") {
            content_type = "application/vnd.amazon.eventstream";
            &self.bedrock
        } else {
            let mut missing = Response::new(Frames::empty());
            *missing.status_mut() = StatusCode::NOT_FOUND;
            return missing;
        };
        let mut reply = Response::new(Frames::new(events.clone()));
        let headers = reply.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        reply
    }
}

fn frames(events: Vec<String>) -> Arc<[Bytes]> {
    events.into_iter().map(Bytes::from).collect()
}

fn openai(chunks: usize) -> Vec<String> {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"mock-model\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let mut events = vec![chunk(r#"{"role":"assistant","content":""}"#, "null")];
    events.extend((0..chunks).map(|i| chunk(&format!(r#"{{"content":" word{i}"}}"#), "null")));
    events.push(chunk("{}", "\"stop\""));
    events.push(format!(
        "data: {{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"mock-model\",\"choices\":[],\"usage\":{{\"prompt_tokens\":20,\"completion_tokens\":{chunks},\"total_tokens\":{}}}}}\n\n",
        20 + chunks
    ));
    events.push("data: [DONE]\n\n".to_owned());
    events
}

fn anthropic(chunks: usize) -> Vec<String> {
    let event = |name: &str, data: String| format!("event: {name}\ndata: {data}\n\n");
    let mut events = vec![
        event(
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_mock","type":"message","role":"assistant","content":[],"model":"mock-model","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}"#.to_owned(),
        ),
        event(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_owned(),
        ),
    ];
    events.extend((0..chunks).map(|i| {
        event(
            "content_block_delta",
            format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":" word{i}"}}}}"#),
        )
    }));
    events.push(event(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#.to_owned(),
    ));
    events.push(event(
        "message_delta",
        format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"end_turn","stop_sequence":null}},"usage":{{"output_tokens":{chunks}}}}}"#),
    ));
    events.push(event(
        "message_stop",
        r#"{"type":"message_stop"}"#.to_owned(),
    ));
    events
}

fn responses(chunks: usize) -> Vec<String> {
    let event = |name: &str, fields: String| {
        format!("event: {name}\ndata: {{\"type\":\"{name}\",{fields}}}\n\n")
    };
    let mut events = vec![
        event(
            "response.created",
            r#""sequence_number":0,"response":{"id":"resp_mock","object":"response","status":"in_progress","model":"mock-model","output":[],"usage":null}"#.to_owned(),
        ),
        event(
            "response.output_item.added",
            r#""sequence_number":1,"output_index":0,"item":{"id":"msg_mock","type":"message","status":"in_progress","role":"assistant","content":[]}"#.to_owned(),
        ),
    ];
    events.extend((0..chunks).map(|i| {
        event(
            "response.output_text.delta",
            format!(r#""sequence_number":{},"item_id":"msg_mock","output_index":0,"content_index":0,"delta":" word{i}""#, i + 2),
        )
    }));
    events.push(event(
        "response.completed",
        format!(r#""sequence_number":{},"response":{{"id":"resp_mock","object":"response","status":"completed","model":"mock-model","output":[],"usage":{{"input_tokens":20,"output_tokens":{chunks},"total_tokens":{}}}}}"#, chunks + 2, 20 + chunks),
    ));
    events
}

fn gemini(chunks: usize) -> Vec<String> {
    let chunk = |text: &str, end: &str| {
        format!(
            "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"{text}\"}}],\"role\":\"model\"}},\"index\":0{end}}}],\"modelVersion\":\"mock-model\"}}\n\n"
        )
    };
    let mut events: Vec<String> = (0..chunks)
        .map(|i| chunk(&format!(" word{i}"), ""))
        .collect();
    events.push(
        chunk("", r#","finishReason":"STOP""#).replace(
            r#"],"modelVersion""#,
            &format!(
                r#"],"usageMetadata":{{"promptTokenCount":20,"candidatesTokenCount":{chunks},"totalTokenCount":{}}},"modelVersion""#,
                20 + chunks
            ),
        ),
    );
    events
}

/// Bedrock's Converse stream, each event one event-stream message.
fn bedrock(chunks: usize) -> Arc<[Bytes]> {
    let mut events = vec![message("messageStart", r#"{"role":"assistant"}"#)];
    events.extend((0..chunks).map(|i| {
        message(
            "contentBlockDelta",
            &format!(r#"{{"contentBlockIndex":0,"delta":{{"text":" word{i}"}}}}"#),
        )
    }));
    events.push(message("contentBlockStop", r#"{"contentBlockIndex":0}"#));
    events.push(message("messageStop", r#"{"stopReason":"end_turn"}"#));
    events.push(message(
        "metadata",
        &format!(
            r#"{{"usage":{{"inputTokens":20,"outputTokens":{chunks},"totalTokens":{}}},"metrics":{{"latencyMs":1}}}}"#,
            20 + chunks
        ),
    ));
    events.into_iter().map(Bytes::from).collect()
}

/// One event-stream message: the prelude (lengths and their CRC-32), the event's string
/// headers, `json`, and the message's CRC-32.
fn message(event_type: &str, json: &str) -> Vec<u8> {
    let mut headers = Vec::new();
    for (name, value) in [
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ] {
        headers.push(name.len() as u8);
        headers.extend_from_slice(name.as_bytes());
        headers.push(7);
        headers.extend_from_slice(&(value.len() as u16).to_be_bytes());
        headers.extend_from_slice(value.as_bytes());
    }
    let total = (16 + headers.len() + json.len()) as u32;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(headers.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out.extend_from_slice(&headers);
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out
}
