//! Connections are bounded: at `server.max_connections` the connection idle longest gives
//! its place to a new one, and one past it is closed as it arrives only when every connection
//! has a call open; a connection that sends no HTTP/2 preface or opens no stream within
//! `server.handshake_timeout` is closed, as is one idle for `server.idle_timeout`, or whose
//! peer stops answering pings.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the server closes the connection; how long that took.
async fn closed_after(stream: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 256];
    within(async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                // The server's own HTTP/2 preface (SETTINGS) may come first.
                Ok(_) => {}
            }
        }
    })
    .await;
    start.elapsed()
}

#[tokio::test]
async fn a_connection_that_opens_no_stream_in_time_is_closed() {
    let server = start(echo().handshake_timeout(Duration::from_millis(500))).await;
    // One that never sends its preface, and one that does but then opens no stream.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let (_idle, mut handshaken) = idle_h2(server.addr).await;
    let closed = closed_after(&mut silent).await;
    assert!(closed < Duration::from_secs(5), "closed after {closed:?}");
    within(&mut handshaken).await.unwrap();
    server.stop().await;
}

/// An HTTP/2 client connection that has made its handshake and opens no stream; the task
/// driving it ends when the server closes it.
async fn idle_h2(
    addr: std::net::SocketAddr,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<()>,
) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, connection) = h2::client::handshake(tcp).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (send, driver)
}

/// Connections left idle once locked every caller out: with `max_connections = 4`, four idle
/// HTTP/2 connections failed every health check. At the limit, the connection idle longest
/// gives its place (GOAWAY) to the new one.
#[tokio::test]
async fn idle_connections_give_their_places_to_new_ones() {
    let mut server = start(echo().max_connections(4)).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(idle_h2(server.addr).await);
    }
    // Each checker keeps its connection, so every check needs a place given up.
    let mut checkers = Vec::new();
    for _ in 0..8 {
        let channel = connect(&server.addr.to_string()).await;
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
        let status = within(health.check(tonic_health::pb::HealthCheckRequest::default()))
            .await
            .expect("a health check at the limit is served");
        assert_eq!(status.into_inner().status, 1, "SERVING");
        checkers.push(health);
    }
    // The idle ones were closed (well before the 10 s a connection has for a first stream).
    let start = Instant::now();
    for (_, driver) in &mut idle {
        within(driver).await.unwrap();
    }
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // A channel whose connection gave way reconnects for its next call.
    let events = execute(&mut server.client, request("chat", "again")).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    server.stop().await;
}

/// A connection with a call open keeps its place: when every place is held so, a new
/// connection is closed as it arrives, and served once a call ends.
#[tokio::test]
async fn a_connection_with_a_call_open_keeps_its_place() {
    let mut server = start(hanging().max_connections(2)).await;
    let mut first = server.client.clone();
    let open = tokio::spawn(async move { first.execute(request("chat", "hang")).await });
    let channel = connect(&server.addr.to_string()).await;
    let mut second = model_runtime::pb::model_runtime_client::ModelRuntimeClient::new(channel);
    let stream = within(second.execute(request("chat", "hang too")))
        .await
        .unwrap()
        .into_inner();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = TcpStream::connect(server.addr).await.unwrap();
    let refused = closed_after(&mut extra).await;
    assert!(
        refused < Duration::from_millis(400),
        "refused after {refused:?}"
    );
    // Its call over, the second connection is idle, and gives way.
    drop(stream);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let channel = connect(&server.addr.to_string()).await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    within(health.check(tonic_health::pb::HealthCheckRequest::default()))
        .await
        .unwrap();
    open.abort();
    server.begin_shutdown();
}

#[tokio::test]
async fn a_connection_idle_for_idle_timeout_is_closed() {
    let server = start(echo().idle_timeout(Duration::from_millis(300))).await;
    let (send, mut driver) = idle_h2(server.addr).await;
    // One call, then nothing: closed once it has been idle for the timeout.
    let mut send = send.ready().await.unwrap();
    let request = http::Request::post(format!(
        "http://{}/grpc.health.v1.Health/Check",
        server.addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .unwrap();
    let (response, mut body) = send.send_request(request, false).unwrap();
    body.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]), true)
        .unwrap();
    let response = within(response).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    while within(body.data()).await.is_some() {}
    let start = Instant::now();
    within(&mut driver).await.unwrap();
    let closed = start.elapsed();
    assert!(
        closed >= Duration::from_millis(200) && closed < Duration::from_secs(3),
        "closed after {closed:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_peer_that_stops_answering_pings_is_closed() {
    let server =
        start(echo().keepalive(Duration::from_millis(200), Duration::from_millis(200))).await;
    // A peer that completes the HTTP/2 handshake (the preface and an empty SETTINGS frame),
    // then never answers anything.
    let mut peer = TcpStream::connect(server.addr).await.unwrap();
    peer.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let start = Instant::now();
    within(async {
        let mut buf = [0u8; 1024];
        loop {
            match peer.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let closed = start.elapsed();
    assert!(
        closed >= Duration::from_millis(350) && closed < Duration::from_secs(5),
        "closed after {closed:?}"
    );
    // The server pinged it first: a PING frame (type 6) without the ACK flag.
    let mut frames = seen.as_slice();
    let mut pinged = false;
    while frames.len() >= 9 {
        let len =
            usize::from(frames[0]) << 16 | usize::from(frames[1]) << 8 | usize::from(frames[2]);
        pinged |= frames[3] == 6 && frames[4] & 1 == 0;
        frames = &frames[(9 + len).min(frames.len())..];
    }
    assert!(pinged, "no ping in {seen:?}");
    server.stop().await;
}

/// Under `ulimit -n 64` the server serves fewer connections than `max_connections`, says so,
/// and however many peers connect, the store keeps descriptors to open: the peers once took
/// them all, and the journal could not open its next segment.
#[test]
fn connections_leave_the_store_its_descriptors_under_a_tight_open_file_limit() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[server]
handshake_timeout = "1s"
[store]
kind = "file"
path = "{}"
key_env = "FD_TEST_KEY"
[providers.s]
adapter = "scripted"
[[providers.s.models]]
name = "echo"
capabilities = ["text"]
[policies.default]
targets = ["s/echo"]
[abilities.chat]
policy = "default"
"#,
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    let mut child = process::Guard(
        Command::new("sh")
            .args(["-c", r#"ulimit -n 64 && exec "$0" "$@""#, process::BIN])
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("FD_TEST_KEY", "11".repeat(32))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let (lines, logged) = std::sync::mpsc::channel();
    let stderr = child.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    let (mut addr, mut capped) = (None, None);
    while addr.is_none() || capped.is_none() {
        let line = logged
            .recv_timeout(Duration::from_secs(20))
            .expect("the start-up log");
        if line.contains("model-runtime serving") {
            addr = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("addr="))
                .map(str::to_owned);
        }
        if line.contains("ulimit -n") {
            capped = Some(line);
        }
    }
    let capped = capped.unwrap();
    assert!(
        capped.contains("serving=32") && capped.contains("max_connections=1024"),
        "{capped}"
    );
    let addr = addr.unwrap();

    // A hundred peers that say nothing: 32 are served, the rest closed as they come.
    let peers: Vec<_> = (0..100)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    assert!(
        open <= 64 - 12,
        "{open} descriptors open: the store's are taken"
    );
    drop(peers);

    // Silent peers are closed after the handshake timeout; the store served throughout.
    let exec = process::run(
        &["exec", "--addr", &addr, "--ability", "chat", "hi"],
        LIMIT_RUN,
    );
    assert!(exec.status.success(), "{exec:?}");
    let health = process::run(&["health", "--addr", &addr], LIMIT_RUN);
    assert!(health.status.success(), "{health:?}");
}

const LIMIT_RUN: Duration = Duration::from_secs(20);

/// A gRPC message frame of `request`.
fn framed(request: &model_runtime::pb::ExecuteRequest) -> bytes::Bytes {
    use prost::Message;
    let mut out = vec![0u8; 5];
    request.encode(&mut out).unwrap();
    let len = u32::try_from(out.len() - 5).unwrap();
    out[1..5].copy_from_slice(&len.to_be_bytes());
    out.into()
}

/// Starts an `Execute` over `send`; its body is written by the caller.
fn start_execute(
    send: &mut h2::client::SendRequest<bytes::Bytes>,
    addr: std::net::SocketAddr,
) -> (h2::client::ResponseFuture, h2::SendStream<bytes::Bytes>) {
    let request = http::Request::post(format!(
        "http://{addr}/model_runtime.v1.ModelRuntime/Execute"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .unwrap();
    send.send_request(request, false).unwrap()
}

/// The `grpc-status` of a response that failed at once.
async fn grpc_status(response: h2::client::ResponseFuture) -> String {
    let response = within(response).await.unwrap();
    let status = response
        .headers()
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().to_owned());
    match status {
        Some(status) => status,
        None => {
            let mut body = response.into_body();
            while within(body.data()).await.is_some() {}
            let trailers = within(body.trailers()).await.unwrap().unwrap();
            trailers["grpc-status"].to_str().unwrap().to_owned()
        }
    }
}

/// A request's body is bounded in bytes: a valid request followed by an endless stream of
/// more was once read on and on (53 MiB in 6 s against a 64 KiB limit).
#[tokio::test]
async fn a_request_body_past_the_largest_request_is_refused_and_reset() {
    let server = start(echo().max_input_bytes(64 * 1024)).await;
    let (send, _driver) = idle_h2(server.addr).await;
    let mut send = send.ready().await.unwrap();
    let (response, mut body) = start_execute(&mut send, server.addr);
    let message = framed(&request("chat", "hello"));
    let refused = tokio::spawn(grpc_status(response));
    let mut sent = 0usize;
    let outcome = within(async {
        loop {
            body.reserve_capacity(message.len());
            match std::future::poll_fn(|cx| body.poll_capacity(cx)).await {
                Some(Ok(_)) => {}
                _ => return sent,
            }
            if body.send_data(message.clone(), false).is_err() {
                return sent;
            }
            sent += message.len();
            if sent > 64 << 20 {
                return sent;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(outcome < 4 << 20, "the server took {outcome} bytes");
    assert_eq!(refused.await.unwrap(), "8", "RESOURCE_EXHAUSTED");
    server.stop().await;
}

/// A request whose body never ends (headers only) is refused once `server.request_timeout`
/// has passed, rather than held for ever.
#[tokio::test]
async fn a_request_body_that_never_ends_is_refused_after_request_timeout() {
    let server = start(echo().request_timeout(Duration::from_millis(300))).await;
    let (send, _driver) = idle_h2(server.addr).await;
    let mut send = send.ready().await.unwrap();
    let (response, _body) = start_execute(&mut send, server.addr);
    let start = Instant::now();
    assert_eq!(grpc_status(response).await, "4", "DEADLINE_EXCEEDED");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "{took:?}"
    );
    server.stop().await;
}

/// A client that stops reading once pinned about 0.8 MiB per stream, 785 MiB per connection.
/// Now what a connection holds unsent is bounded, whatever its streams and windows, and
/// counted (`model_runtime_unsent_bytes`); the stalled streams are reset after
/// `stream_idle_timeout`, and the count returns to nothing.
#[tokio::test]
async fn a_client_that_stops_reading_holds_a_bounded_count_of_unsent_bytes() {
    // A short request and a long reply: the 40 requests are sent, and their responses begin,
    // long before the replies are streamed, so the client stops reading mid-stream however
    // fast or busy the machine is.
    let config = Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model(
                "long",
                &["text"],
                script(|s| s.reply = Some("word ".repeat(100_000))),
            ),
        )
        .policy("default", PolicySpec::new(&["scripted/long"]))
        .ability("chat", AbilitySpec::new("default"))
        .metrics_listen("127.0.0.1:0")
        .stream_idle_timeout(Duration::from_secs(9))
        // Small enough that any socket's buffers fill past it.
        .max_unsent_bytes(256 << 10)
        .build()
        .unwrap();
    let runtime = model_runtime::Runtime::new(config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(model_runtime::server::serve(
        runtime.clone(),
        listener,
        std::future::pending(),
    ));
    let unsent = || {
        let text = runtime.metrics_text().unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("model_runtime_unsent_bytes "))
            .unwrap_or_else(|| panic!("no unsent_bytes in\n{text}"))
            .parse::<f64>()
            .unwrap()
    };
    // Windows as large as HTTP/2 allows: only the socket holds the server back.
    // A small receive buffer: the kernel takes little of what the client does not read, so
    // the replies (40 × 500 KB of text) stay mostly with the server when it stops.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 << 10).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(i32::MAX as u32)
        .initial_connection_window_size(i32::MAX as u32)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    let reading = tokio_util::sync::CancellationToken::new();
    let stopped = reading.clone();
    tokio::spawn(async move {
        // Borrowed by the select, so stopping leaves the connection open and unread (dropping
        // it would close the socket, and the server would let go of what it holds at once).
        let mut connection = std::pin::pin!(connection);
        tokio::select! {
            _ = &mut connection => {}
            () = stopped.cancelled() => std::future::pending::<()>().await,
        }
    });
    let mut send = send.ready().await.unwrap();
    let message = framed(&request("chat", "hi"));
    let mut responses = Vec::new();
    for _ in 0..40 {
        send = send.ready().await.unwrap();
        let (response, mut body) = start_execute(&mut send, addr);
        body.send_data(message.clone(), true).unwrap();
        responses.push(response);
    }
    // The first reply has begun, so the requests (sent before it, and small) are out: the
    // client stops reading its socket while the replies are mostly still to come.
    within(responses.swap_remove(0)).await.unwrap();
    reading.cancel();
    let bound = (256 << 10) + 40 * (64 << 10);
    // Watched until the bound is reached (a busy machine streams slower) and a while after.
    let mut most = 0.0f64;
    let start = Instant::now();
    let mut reached = None;
    while reached.is_none_or(|at: Instant| at.elapsed() < Duration::from_millis(500))
        && start.elapsed() < Duration::from_secs(8)
    {
        most = most.max(unsent());
        if most >= f64::from(256 << 10) && reached.is_none() {
            reached = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        most >= f64::from(256 << 10),
        "only {most} bytes held: the bound was not reached"
    );
    assert!(most <= f64::from(bound), "{most} bytes unsent");
    // Reset after stream_idle_timeout: what they held is gone.
    within(async {
        while unsent() > 0.0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}
