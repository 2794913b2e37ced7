//! `GET /metrics`: the runtime's metrics on their own address (`server.metrics_listen`), in
//! OpenMetrics 1.0.0 for a scraper that asks for it (Prometheus does) and in the Prometheus
//! text format 0.0.4 otherwise ([`format`]). A small HTTP/1.1 responder: one request per
//! connection, its head read within a bound of size and time, then closed; at most
//! [`METRICS_CONNECTIONS`] at once, further ones closed as they arrive.

mod format;

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use self::format::Format;
use super::descriptors::METRICS_CONNECTIONS;
use crate::runtime::Runtime;

/// A request head larger than this, or slower than [`READ_TIMEOUT`], is dropped.
const MAX_HEAD: usize = 8 * 1024;
/// Headers read from a request; a head with more is answered as a bad request.
const MAX_HEADERS: usize = 32;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `runtime`'s metrics on `listener` until `shutdown` resolves.
pub async fn serve_metrics(
    runtime: Runtime,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let connections = Arc::new(Semaphore::new(METRICS_CONNECTIONS));
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
        // At most a few at once: each holds a descriptor the store may need.
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            continue;
        };
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(READ_TIMEOUT, answer(&runtime, stream)).await;
            drop(permit);
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
    let (status, kind, body) = respond(runtime, &head);
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nvary: accept\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// The status, content type and body that answer the request `head`.
fn respond(runtime: &Runtime, head: &[u8]) -> (&'static str, &'static str, String) {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let not_found = |why: &str| ("404 Not Found", "text/plain", why.to_owned());
    if !matches!(request.parse(head), Ok(httparse::Status::Complete(_))) {
        return (
            "400 Bad Request",
            "text/plain",
            "not an HTTP/1.1 request head\n".to_owned(),
        );
    }
    let path = request.path.unwrap_or_default();
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    if request.method != Some("GET") || path != "/metrics" {
        return not_found("GET /metrics\n");
    }
    // Several `Accept` lines are one list, in their order.
    let accept: Vec<&str> = request
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("accept"))
        .filter_map(|h| std::str::from_utf8(h.value).ok())
        .collect();
    let format = Format::negotiate((!accept.is_empty()).then(|| accept.join(",")).as_deref());
    match runtime.metrics_text() {
        Some(text) => ("200 OK", format.content_type(), format.write(&text)),
        None => not_found("metrics are off: the config sets no server.metrics_listen\n"),
    }
}
