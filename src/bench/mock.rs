//! `model-runtime mock-upstream`: a provider that answers at once, for measuring the
//! provider path without the peers (`benches/provider.sh`). It speaks HTTP/1.1 with
//! keep-alive and answers `POST .../chat/completions` as OpenAI streams it (a role chunk,
//! `chunks` content chunks, a finish chunk, a usage chunk, `[DONE]`) and `POST .../messages`
//! as Anthropic streams it (`message_start`, a text block of `chunks` deltas,
//! `message_delta`, `message_stop`): each SSE event one HTTP chunk, the whole reply written at
//! once, as a fast upstream's would arrive. Loopback only.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::cli::exit;

/// The largest request head and body it reads.
const MAX_REQUEST: usize = 1 << 20;

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
        openai: response(&openai(chunks)),
        anthropic: response(&anthropic(chunks)),
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
        tokio::spawn(serve(socket, replies.clone()));
    }
}

struct Replies {
    openai: Vec<u8>,
    anthropic: Vec<u8>,
}

/// One connection: requests in turn until the client closes it.
async fn serve(mut socket: TcpStream, replies: Arc<Replies>) {
    let mut buffer = Vec::with_capacity(8192);
    let mut read = [0u8; 8192];
    loop {
        // The head, then as much body as it says.
        let (head_end, length) = loop {
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break (end + 4, content_length(&buffer[..end]));
            }
            if buffer.len() > MAX_REQUEST {
                return;
            }
            match socket.read(&mut read).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&read[..n]),
            }
        };
        while buffer.len() < head_end + length {
            if buffer.len() > MAX_REQUEST {
                return;
            }
            match socket.read(&mut read).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&read[..n]),
            }
        }
        let line_end = buffer.iter().position(|b| *b == b'\r').unwrap_or(0);
        let line = &buffer[..line_end];
        let has = |path: &[u8]| line.windows(path.len()).any(|w| w == path);
        let reply: &[u8] = if has(b"/messages") {
            &replies.anthropic
        } else if has(b"/chat/completions") {
            &replies.openai
        } else {
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
        };
        if socket.write_all(reply).await.is_err() {
            return;
        }
        buffer.drain(..head_end + length);
    }
}

fn content_length(head: &[u8]) -> usize {
    let head = String::from_utf8_lossy(head);
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}

/// The HTTP response: each event one chunk of a chunked body.
fn response(events: &[String]) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for event in events {
        out.extend_from_slice(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
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
