//! `GET /metrics`: the runtime's metrics on their own address (`server.metrics_listen`), in
//! OpenMetrics 1.0.0 for a scraper that asks for it (Prometheus does) and in the Prometheus
//! text format 0.0.4 otherwise ([`format`]). One request per connection, read by the server's
//! HTTP/1.1 reader ([`super::http1`]) within a bound of size and time, then closed; at most
//! [`METRICS_CONNECTIONS`] at once, further ones closed as they arrive.

mod format;

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, StatusCode, header};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use self::format::Format;
use super::descriptors::METRICS_CONNECTIONS;
use super::http1::{self, Limits, Request, Response};
use crate::runtime::Runtime;

/// A scrape's request: its head within 8 KiB and 32 headers (a larger one is answered 431),
/// and the whole exchange within 5 s, so a slow client, sending or reading, keeps its place
/// no longer. A scraper sends no body; one is read within the head's bound.
const LIMITS: Limits = Limits {
    head: 8 * 1024,
    headers: 32,
    body: 8 * 1024,
    keep_alive: false,
    time: Some(Duration::from_secs(5)),
};

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
        #[expect(
            clippy::disallowed_methods,
            reason = "a scrape is not work a drain waits for: its permit and request bounds end it"
        )]
        tokio::spawn(async move {
            http1::serve_connection(stream, &LIMITS, |request| {
                std::future::ready(Some(respond(&runtime, &request)))
            })
            .await;
            drop(permit);
        });
    }
}

/// The answer to `request`.
fn respond(runtime: &Runtime, request: &Request) -> Response {
    let not_found = |why: &str| (StatusCode::NOT_FOUND, "text/plain", why.to_owned());
    let (status, kind, body) = if request.method() != http::Method::GET
        || request.uri().path() != "/metrics"
    {
        not_found("GET /metrics\n")
    } else {
        // Several `Accept` lines are one list, in their order.
        let accept: Vec<&str> = request
            .headers()
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|value| std::str::from_utf8(value.as_bytes()).ok())
            .collect();
        let format = Format::negotiate((!accept.is_empty()).then(|| accept.join(",")).as_deref());
        match runtime.metrics_text() {
            Some(text) => (StatusCode::OK, format.content_type(), format.write(&text)),
            None => not_found("metrics are off: the config sets no server.metrics_listen\n"),
        }
    };
    let length = HeaderValue::from(body.len());
    let mut response = Response::new(http1::Frames::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CONTENT_LENGTH, length);
    headers.insert(header::VARY, HeaderValue::from_static("accept"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
