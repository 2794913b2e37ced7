//! The fault-injecting provider: OpenAI's chat completions on loopback, whose reply is chosen
//! by the request's `model` (a [`Behaviour`]'s name), and an observer of every request it is
//! sent: which provider table it came through (`/{provider}/v1/chat/completions`), which
//! model, which case's execution (the nonce the kit puts in each prompt), and when.

pub mod behaviour;
mod reply;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use behaviour::Behaviour;
use reply::Body;

/// The largest request body the provider reads: a conformance prompt is a few hundred bytes.
const MAX_BODY: usize = 1 << 20;

/// One request the provider received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The provider table it came through: the first segment of its path.
    pub provider: String,
    /// The `model` of its body.
    pub model: String,
    /// The case execution's nonce found in its body, if any.
    pub nonce: Option<String>,
    /// When it arrived, by the kit's clock.
    pub at: Instant,
    /// The idempotency the request carried to the provider (`Idempotency-Key`, or OpenAI's
    /// `X-Client-Request-Id`), if any.
    pub idempotency: Option<String>,
}

impl Received {
    /// `provider/model`, as a policy names a target.
    pub fn target(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

/// What the provider has received, in order of arrival.
#[derive(Debug, Default)]
pub struct Log(Mutex<Vec<Received>>);

impl Log {
    fn push(&self, received: Received) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(received);
    }

    /// The requests that carried `nonce`, in order of arrival.
    pub fn for_nonce(&self, nonce: &str) -> Vec<Received> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|r| r.nonce.as_deref() == Some(nonce))
            .cloned()
            .collect()
    }
}

/// The provider, serving until it is dropped.
pub struct Provider {
    addr: SocketAddr,
    log: Arc<Log>,
    /// The accept loop: dropping it stops the loop and, with it, every connection.
    _server: JoinSet<()>,
}

impl Provider {
    /// Serves on `listen` (a loopback address; port 0 picks a free one).
    pub async fn start(listen: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Log::default());
        let mut server = JoinSet::new();
        server.spawn(accept(listener, Arc::clone(&log)));
        Ok(Self {
            addr,
            log,
            _server: server,
        })
    }

    /// Where it listens (it stops, with every connection, when dropped).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it has received.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// What it has received, shared with the cases that read it.
    pub fn shared_log(&self) -> &Arc<Log> {
        &self.log
    }
}

/// Accepts connections until aborted; the connections are its own, and end with it.
async fn accept(listener: TcpListener, log: Arc<Log>) {
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next() => continue,
        };
        let Ok((socket, _)) = accepted else {
            continue;
        };
        let _ = socket.set_nodelay(true);
        let log = Arc::clone(&log);
        connections.spawn(async move {
            let service = service_fn(move |request| answer(request, Arc::clone(&log)));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

async fn answer(request: Request<Incoming>, log: Arc<Log>) -> Result<Response<Body>, Infallible> {
    let at = Instant::now();
    let path = request.uri().path().to_owned();
    let idempotency = ["idempotency-key", "x-client-request-id"]
        .into_iter()
        .find_map(|name| request.headers().get(name)?.to_str().ok())
        .map(str::to_owned);
    let Some(provider) = path
        .strip_suffix("/v1/chat/completions")
        .and_then(|p| p.strip_prefix('/'))
        .filter(|p| !p.is_empty() && !p.contains('/'))
        .map(str::to_owned)
    else {
        return Ok(reply::error(StatusCode::NOT_FOUND, "no such endpoint"));
    };
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return Ok(reply::error(StatusCode::BAD_REQUEST, "unreadable body")),
    };
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return Ok(reply::error(
            StatusCode::BAD_REQUEST,
            "the body is not JSON",
        ));
    };
    let model = json["model"].as_str().unwrap_or_default().to_owned();
    log.push(Received {
        provider,
        model: model.clone(),
        nonce: nonce(&body),
        at,
        idempotency,
    });
    let Some(behaviour) = Behaviour::named(&model) else {
        return Ok(reply::error(StatusCode::NOT_FOUND, "no such model"));
    };
    let stream = json["stream"].as_bool().unwrap_or(false);
    Ok(behaviour.reply(stream).await)
}

/// The prefix of the nonce the kit writes into each execution's prompt.
pub const NONCE_PREFIX: &str = "kit-nonce-";

/// The nonce in `body`: the prefix and the 32 hex digits after it.
fn nonce(body: &Bytes) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let start = text.find(NONCE_PREFIX)?;
    let tail = &text[start + NONCE_PREFIX.len()..];
    let hex: String = tail
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .take(32)
        .collect();
    (hex.len() == 32).then(|| format!("{NONCE_PREFIX}{hex}"))
}

/// A fresh nonce for one execution.
pub fn fresh_nonce() -> String {
    format!("{NONCE_PREFIX}{}", uuid::Uuid::new_v4().simple())
}

/// A whole body of `text`, for error replies.
fn full(text: String) -> Body {
    Full::new(Bytes::from(text))
        .map_err(|never| match never {})
        .boxed()
}
