//! `GET /metrics`: the runtime's metrics in the Prometheus text format, on their own
//! address (`server.metrics_listen`). A small HTTP/1.1 responder: one request per
//! connection, its head read within a bound of size and time, then closed.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::runtime::Runtime;

/// A request head larger than this, or slower than [`READ_TIMEOUT`], is dropped.
const MAX_HEAD: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `runtime`'s metrics on `listener` until `shutdown` resolves.
pub async fn serve_metrics(
    runtime: Runtime,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a metrics connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(READ_TIMEOUT, answer(&runtime, stream)).await;
        });
    }
}

async fn answer(runtime: &Runtime, mut stream: TcpStream) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let text = if line.starts_with(b"GET /metrics ") {
        runtime
            .metrics_text()
            .ok_or("metrics are off: the config sets no server.metrics_listen\n")
    } else {
        Err("GET /metrics\n")
    };
    let (status, kind, body) = match text {
        Ok(text) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", text),
        Err(why) => ("404 Not Found", "text/plain", why.to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
