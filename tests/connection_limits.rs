//! Connections are bounded: one past `server.max_connections` is closed as it arrives, a
//! connection that sends no HTTP/2 preface within `server.handshake_timeout` is closed, which
//! frees its place for a real client, and so is one whose peer stops answering pings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
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
async fn silent_connections_are_closed_and_extra_ones_refused() {
    let mut server = start(
        echo()
            .max_connections(3)
            .handshake_timeout(Duration::from_millis(500)),
    )
    .await;
    // The test's own client holds one place; two silent connections take the rest.
    let mut silent = [
        TcpStream::connect(server.addr).await.unwrap(),
        TcpStream::connect(server.addr).await.unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut extra = TcpStream::connect(server.addr).await.unwrap();
    let refused = closed_after(&mut extra).await;
    assert!(
        refused < Duration::from_millis(400),
        "refused after {refused:?}"
    );

    for stream in &mut silent {
        let closed = closed_after(stream).await;
        assert!(closed < Duration::from_secs(5), "closed after {closed:?}");
    }
    // Their places are free again: a new client gets served.
    let mut client = model_runtime::pb::model_runtime_client::ModelRuntimeClient::connect(format!(
        "http://{}",
        server.addr
    ))
    .await
    .unwrap();
    let events = execute(&mut client, request("chat", "hello")).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    drop(client);
    // And the first client was never disturbed.
    let events = execute(&mut server.client, request("chat", "again")).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
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
