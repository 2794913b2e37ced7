//! The client held against hyper's (`hyper::client::conn::http1`, the reference) on a corpus
//! of valid and malformed responses (`differential/cases.rs`). A real TCP server on
//! 127.0.0.1 serves each case byte for byte to the first request of a fresh client; the
//! client then sends a second request, which the server answers, on whatever connection it
//! arrives, with that connection's number: `1` says the client kept the first one. Each
//! client's outcome (the status, the body's bytes, whether the body ended cleanly, whether
//! the connection was reused) must be the case's; hyper's must be the same, unless the case
//! records how and why it differs. `docs/h1.md` is written from this table.

mod cases;

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http_body::Body as _;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::*;

/// What a client made of a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outcome {
    /// The final response's status; `None` if no head was taken.
    pub status: Option<u16>,
    /// The body's bytes as handed out (up to the failure, if it broke).
    pub body: String,
    /// Whether the body ended cleanly.
    pub ended: bool,
    /// Whether the next request went on the same connection.
    pub reused: bool,
}

/// How long one client may take over a case: a bound for a client that hangs, never a wait.
const LIMIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn the_client_reads_every_case_as_hyper_does_or_as_the_case_says_it_differs() {
    let mut failures = Vec::new();
    for case in cases::all() {
        let bytes: Arc<[u8]> = case.bytes.clone().into();
        let ours = run(
            &case.name,
            "ours",
            ours(serve(bytes.clone(), case.closes).await),
        )
        .await;
        let hyper = run(&case.name, "hyper", hyper(serve(bytes, case.closes).await)).await;
        let expected_hyper = case
            .hyper
            .as_ref()
            .map_or(&case.ours, |(outcome, _)| outcome);
        if let Some((differs, why)) = &case.hyper {
            assert_ne!(
                differs, &case.ours,
                "{}: the case says hyper differs",
                case.name
            );
            assert!(
                !why.is_empty(),
                "{}: the case says not why hyper differs",
                case.name
            );
        }
        if ours != case.ours {
            failures.push(format!(
                "{}: ours {ours:?}, expected {:?}",
                case.name, case.ours
            ));
        }
        if hyper != *expected_hyper {
            failures.push(format!(
                "{}: hyper {hyper:?}, expected {expected_hyper:?}",
                case.name
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// `fetch` within [`LIMIT`].
async fn run(case: &str, client: &str, fetch: impl Future<Output = Outcome>) -> Outcome {
    tokio::time::timeout(LIMIT, fetch)
        .await
        .unwrap_or_else(|_| panic!("{case}: {client} did not finish within {LIMIT:?}"))
}

/// The server of one case on 127.0.0.1:0, and its port. The first request on the first
/// connection gets `bytes` (after which the connection is closed if `closes`); every other
/// request gets a body naming its connection, counted from 1. It stops when dropped.
async fn serve(bytes: Arc<[u8]>, closes: bool) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut tasks = JoinSet::new();
    tasks.spawn(async move {
        let mut connections = JoinSet::new();
        for number in 1.. {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            connections.spawn(answer(socket, number, bytes.clone(), closes));
        }
    });
    Server {
        port,
        _tasks: tasks,
    }
}

struct Server {
    port: u16,
    /// Dropping it stops the server and its connections.
    _tasks: JoinSet<()>,
}

async fn answer(mut socket: TcpStream, number: usize, case: Arc<[u8]>, closes: bool) {
    let mut buffer = Vec::new();
    let mut first = number == 1;
    while read_request(&mut socket, &mut buffer).await {
        if first {
            first = false;
            // A client that refused the case's bytes may have closed already.
            let _ = socket.write_all(&case).await;
            if closes {
                return;
            }
        } else {
            let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{number}");
            let _ = socket.write_all(reply.as_bytes()).await;
        }
    }
}

/// Reads one request (its head, and a body of its `Content-Length`) off `socket`; false at
/// the connection's end.
async fn read_request(socket: &mut (impl AsyncRead + Unpin), buffer: &mut Vec<u8>) -> bool {
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buffer.len() >= end + 4 + length {
                buffer.drain(..end + 4 + length);
                return true;
            }
        }
        let mut piece = [0; 4096];
        match socket.read(&mut piece).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buffer.extend_from_slice(&piece[..n]),
        }
    }
}

/// The second request's body says whether it went on the first connection.
fn reused(second: &str) -> bool {
    match second {
        "1" => true,
        "2" => false,
        // Anything else is the first response's leftovers read as the second: out of step.
        other => panic!("the second request read {other:?}"),
    }
}

/// The case through the runtime's client, as the adapters drive it.
async fn ours(server: Server) -> Outcome {
    let url = url::Url::parse(&format!("http://127.0.0.1:{}/v1/chat", server.port)).unwrap();
    let settings = Settings {
        connect_timeout: LIMIT,
        proxy: None,
        max_idle: 1,
        idle_timeout: LIMIT,
    };
    let client = Client::new(&url, settings, || {
        Err(rustls::Error::General("no TLS".into()))
    })
    .unwrap();
    let (status, body, ended) = ours_fetch(&client).await;
    let (_, second, _) = ours_fetch(&client).await;
    Outcome {
        status,
        body,
        ended,
        reused: reused(&second),
    }
}

async fn ours_fetch(client: &Client) -> (Option<u16>, String, bool) {
    let mut call = client.call(client.post(&HeaderMap::new(), &[], b"{}"));
    let Ok(response) = poll_fn(|cx| call.poll_head(cx)).await else {
        return (None, String::new(), false);
    };
    let mut body = Vec::new();
    let ended = loop {
        match poll_fn(|cx| call.poll_body(cx, &mut |d| body.extend_from_slice(d))).await {
            Ok(Progress::Data) => {}
            Ok(Progress::End) => break true,
            Err(_) => break false,
        }
    };
    let body = String::from_utf8_lossy(&body).into_owned();
    (Some(response.status), body, ended)
}

/// The case through hyper's client connection, on its defaults.
async fn hyper(server: Server) -> Outcome {
    let (mut sender, mut driver) = hyper_connect(server.port).await;
    let (status, body, ended) = hyper_fetch(&mut sender).await;
    // The connection carries the next request if hyper says it is ready for one and the
    // request is answered on it; else the request goes on a new connection.
    let mut second = None;
    if sender.ready().await.is_ok() {
        let (_, body, ended) = hyper_fetch(&mut sender).await;
        second = ended.then_some(body);
    }
    if second.is_none() {
        driver.abort();
        let (mut sender, next) = hyper_connect(server.port).await;
        driver = next;
        second = Some(hyper_fetch(&mut sender).await.1);
    }
    driver.abort();
    Outcome {
        status,
        body,
        ended,
        reused: reused(&second.unwrap_or_default()),
    }
}

type Sender = hyper::client::conn::http1::SendRequest<String>;

async fn hyper_connect(port: u16) -> (Sender, tokio::task::JoinHandle<()>) {
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let driver = tokio::spawn(async move {
        // Its errors are the response's: `send_request` and the body report them.
        let _ = connection.await;
    });
    (sender, driver)
}

async fn hyper_fetch(sender: &mut Sender) -> (Option<u16>, String, bool) {
    let request = http::Request::post("/v1/chat")
        .header("host", "127.0.0.1")
        .body(String::from("{}"))
        .unwrap();
    let Ok(mut response) = sender.send_request(request).await else {
        return (None, String::new(), false);
    };
    let mut body = Vec::new();
    let ended = loop {
        match poll_fn(|cx| Pin::new(response.body_mut()).poll_frame(cx)).await {
            None => break true,
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    body.extend_from_slice(data);
                }
            }
            Some(Err(_)) => break false,
        }
    };
    let body = String::from_utf8_lossy(&body).into_owned();
    (Some(response.status().as_u16()), body, ended)
}
