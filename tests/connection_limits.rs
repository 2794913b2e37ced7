//! Connections are bounded: one past `server.max_connections` is closed as it arrives, and a
//! connection that sends no HTTP/2 preface within `server.handshake_timeout` is closed, which
//! frees its place for a real client.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::AsyncReadExt;
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
