//! The HTTP/1.1 client of the provider adapters, driven by the exchange itself. A general
//! client (reqwest, hyper's) reads the socket in a connection task and hands the body over a
//! piece at a time through a channel, so a reply that arrived in one read still reaches the
//! runtime one chunk per task switch, and each is stored and written to the gRPC client on
//! its own. Here the exchange owns the connection while its call runs: whatever one read
//! brings (a whole reply, from a fast upstream) is framed, parsed and handed to the driver at
//! once, which stores it as one batch and writes it as one HTTP/2 flush.
//!
//! It speaks what provider APIs need, and no more: a `POST` with a JSON body, keep-alive
//! connections kept per provider, chunked, sized or close-delimited bodies, interim (1xx)
//! responses, TLS (its set-up handed in: the runtime's trusts the platform's roots, as
//! reqwest does), and a configured HTTP(S) proxy (`CONNECT` for https targets, absolute form
//! for plain http). Which rules of RFC 9112 it relaxes or tightens, and why, is in the
//! repository's `docs/h1.md`, held by the differential test against hyper's client.
//!
//! A crate of its own: it imports nothing of the runtime's domain, so `cargo test -p
//! model-runtime-h1` builds no gRPC, no store and no tracing exporter.

// A `pub` item is part of this library's contract; anything else says `pub(crate)`, so the
// surface is read from the code and does not grow by accident.
#![warn(unreachable_pub)]
// Tests spawn their fake servers and clients freely; the library's own build holds the rule.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod call;
mod connect;
mod framing;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
mod head;
mod pool;

use std::fmt;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderMap;
use tokio::io::{AsyncRead, AsyncWrite};

use call::Conn;
pub use call::{Call, Progress, Response};
pub use framing::FramingError;
pub use head::HeadError;

/// A connection's byte stream: TCP, TLS over it, or TLS inside a proxy's TLS.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// A host to connect to.
#[derive(Debug, Clone)]
struct Endpoint {
    https: bool,
    /// The host as URLs write it (an IPv6 address in brackets).
    host: String,
    port: u16,
    /// `host[:port]` as the URL has it, for `Host`.
    authority: String,
}

impl Endpoint {
    fn from_url(url: &url::Url) -> Result<Self, UrlError> {
        let https = match url.scheme() {
            "https" => true,
            "http" => false,
            other => return Err(UrlError::Scheme(other.to_owned())),
        };
        let host = url.host_str().ok_or(UrlError::NoHost)?.to_owned();
        let port = url.port_or_known_default().ok_or(UrlError::NoPort)?;
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        Ok(Self {
            https,
            host,
            port,
            authority,
        })
    }

    /// The host to resolve and to name in TLS (an IPv6 address without brackets).
    fn host(&self) -> &str {
        self.host.trim_start_matches('[').trim_end_matches(']')
    }
}

/// Why a [`Client`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL requests go to.
    #[error("{0}")]
    Url(UrlError),
    /// The proxy's URL (its text is not quoted: it may carry credentials).
    #[error("proxy: {0}")]
    Proxy(UrlError),
    /// TLS could not be set up.
    #[error("setting up TLS: {0}")]
    Tls(rustls::Error),
}

/// What is wrong with a URL a client is given.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// It does not parse.
    #[error("{0}")]
    Parse(url::ParseError),
    /// Neither http nor https.
    #[error("`{0}` URLs are not supported")]
    Scheme(String),
    /// No host.
    #[error("the URL has no host")]
    NoHost,
    /// No port, and none its scheme implies.
    #[error("the URL has no port")]
    NoPort,
}

/// A configured proxy. (No `Debug`: its credentials are secret.)
struct Proxy {
    endpoint: Endpoint,
    /// `Basic ...` from the proxy URL's user and password.
    authorization: Option<String>,
}

impl Proxy {
    fn from_url(text: &str) -> Result<Self, ClientError> {
        let url = url::Url::parse(text).map_err(|e| ClientError::Proxy(UrlError::Parse(e)))?;
        let endpoint = Endpoint::from_url(&url).map_err(ClientError::Proxy)?;
        let authorization = (!url.username().is_empty()).then(|| {
            use base64::Engine as _;
            let decode = |s: &str| percent_encoding::percent_decode_str(s).collect::<Vec<u8>>();
            let mut credentials = decode(url.username());
            credentials.push(b':');
            credentials.extend(decode(url.password().unwrap_or_default()));
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(credentials)
            )
        });
        Ok(Self {
            endpoint,
            authorization,
        })
    }
}

/// How a [`Client`] connects. (No `Debug`: a proxy URL may carry credentials.)
pub struct Settings {
    /// The connect timeout (resolution, TCP, TLS and the proxy's tunnel together).
    pub connect_timeout: Duration,
    /// A proxy URL, when the configuration names one.
    pub proxy: Option<String>,
    /// How many idle connections are kept (the provider's concurrency).
    pub max_idle: usize,
    /// How long one may stay idle.
    pub idle_timeout: Duration,
}

/// The client of one provider endpoint: where requests go, how to connect, and the idle
/// connections. Clones share the connections.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    /// The URL requests go to.
    url: String,
    target: Endpoint,
    /// The request line's target: the path, or the whole URL for a plain-http target
    /// reached through a proxy.
    request_target: String,
    /// `Proxy-Authorization` sent with each request (absolute form only).
    request_proxy_authorization: Option<String>,
    proxy: Option<Proxy>,
    connect_timeout: Duration,
    tls: Option<Arc<rustls::ClientConfig>>,
    idle: pool::Idle,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.shared.url)
            .field("proxy", &self.shared.proxy.is_some())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// The client for `url` (http or https, no query); `tls` is asked for the TLS set-up
    /// when the target or the proxy is https.
    pub fn new(
        url: &url::Url,
        settings: Settings,
        tls: impl FnOnce() -> Result<Arc<rustls::ClientConfig>, rustls::Error>,
    ) -> Result<Self, ClientError> {
        let target = Endpoint::from_url(url).map_err(ClientError::Url)?;
        let proxy = settings.proxy.as_deref().map(Proxy::from_url).transpose()?;
        let needs_tls = target.https || proxy.as_ref().is_some_and(|p| p.endpoint.https);
        let tls = needs_tls.then(tls).transpose().map_err(ClientError::Tls)?;
        let absolute = proxy.is_some() && !target.https;
        let request_target = match (absolute, url.query()) {
            (true, _) => url.as_str().to_owned(),
            // A query is part of the target (Azure OpenAI's `api-version`).
            (false, Some(query)) => format!("{}?{query}", url.path()),
            (false, None) => url.path().to_owned(),
        };
        let request_proxy_authorization = proxy
            .as_ref()
            .filter(|_| absolute)
            .and_then(|p| p.authorization.clone());
        Ok(Self {
            shared: Arc::new(Shared {
                url: url.as_str().to_owned(),
                target,
                request_target,
                request_proxy_authorization,
                proxy,
                connect_timeout: settings.connect_timeout,
                tls,
                idle: pool::Idle::new(settings.max_idle, settings.idle_timeout),
            }),
        })
    }

    /// The bytes of a `POST` of `body` with `headers` and then `more`.
    pub fn post(&self, headers: &HeaderMap, more: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        self.request("POST", headers, more, Some(body))
    }

    /// The bytes of a `GET` with `headers` (a credentials endpoint's).
    pub fn get(&self, headers: &HeaderMap) -> Vec<u8> {
        self.request("GET", headers, &[], None)
    }

    /// The `Host` every request carries: a signature covers it (AWS SigV4).
    pub fn authority(&self) -> &str {
        &self.shared.target.authority
    }

    /// The bytes of a request: `method`, `headers` and then `more`, and a body if any.
    fn request(
        &self,
        method: &str,
        headers: &HeaderMap,
        more: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Vec<u8> {
        let shared = &self.shared;
        let mut out = Vec::with_capacity(512 + body.map_or(0, <[u8]>::len));
        // Writing to a Vec cannot fail.
        let _ = write!(
            out,
            "{method} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: model-runtime/{}\r\n",
            shared.request_target,
            shared.target.authority,
            env!("CARGO_PKG_VERSION"),
        );
        if let Some(body) = body {
            let _ = write!(out, "Content-Length: {}\r\n", body.len());
        }
        let mut header = |name: &[u8], value: &[u8]| {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        };
        if let Some(credentials) = &shared.request_proxy_authorization {
            header(b"Proxy-Authorization", credentials.as_bytes());
        }
        for (name, value) in headers {
            header(name.as_str().as_bytes(), value.as_bytes());
        }
        for (name, value) in more {
            // The callers' values are checked already (the trace context's, at parsing).
            debug_assert!(
                !value.contains(['\r', '\n']),
                "a header value with a line break"
            );
            header(name.as_bytes(), value.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body.unwrap_or_default());
        out
    }

    /// Starts sending `request` (from [`Client::post`]) on an idle connection, or a new one.
    pub fn call(&self, request: Vec<u8>) -> Call {
        Call::start(&self.shared, request)
    }
}

/// Why a call failed, with the network's account of it for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No connection could be opened (or it timed out): nothing was sent. `step` is which
    /// step failed, in words a caller may see; `cause` says what the system said (addresses,
    /// certificate details), for the log.
    Connect { step: ConnectStep, cause: String },
    /// The connection failed while the request was being written: the server cannot have
    /// received all of it.
    Unsent(Cause),
    /// The connection failed or the response head was malformed, after the request was
    /// sent: the server may be running it.
    Lost(Cause),
    /// The body broke: a read failed, its framing is malformed, or it was cut short.
    Broken(Cause),
}

/// What the connection or the server did when a call failed after it connected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cause {
    /// The socket failed: its kind, and what the system said.
    #[error("{message}")]
    Io {
        /// The error's kind.
        kind: std::io::ErrorKind,
        /// What the system said.
        message: String,
    },
    /// The server closed the connection before its response began.
    #[error("the connection closed before a response")]
    ClosedBeforeResponse,
    /// The server closed the connection before the body's framing said it ended.
    #[error("the connection closed before the body ended")]
    ClosedBeforeEnd,
    /// The head was asked for twice.
    #[error("the head was already read")]
    HeadAlreadyRead,
    /// The response head is not one the client reads.
    #[error(transparent)]
    Head(#[from] HeadError),
    /// The body's framing is malformed.
    #[error(transparent)]
    Body(#[from] FramingError),
}

impl From<std::io::Error> for Cause {
    fn from(error: std::io::Error) -> Self {
        Self::Io {
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

/// The step of opening a connection that failed: what a caller may be told of it, without
/// the hosts, addresses or certificate details `Failure::cause` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectStep {
    /// The host name did not resolve.
    Resolve,
    /// The address refused the connection: nothing listens there.
    Refused,
    /// The address could not be reached (no route, the network down, a reset).
    Unreachable,
    /// Nothing answered within the connect timeout.
    TimedOut,
    /// The TLS handshake failed (a certificate not trusted, say).
    Tls,
    /// The proxy did not open a tunnel.
    Proxy,
    /// The connection could not be set up on this side (a socket option, TLS not set up).
    Local,
}

impl std::fmt::Display for ConnectStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Resolve => "its host name did not resolve",
            Self::Refused => "connection refused",
            Self::Unreachable => "its address could not be reached",
            Self::TimedOut => "timed out",
            Self::Tls => "the TLS handshake failed",
            Self::Proxy => "the proxy did not open a tunnel",
            Self::Local => "setting up the connection failed",
        })
    }
}

impl Failure {
    /// What went wrong, for the log.
    pub fn cause(&self) -> String {
        match self {
            Self::Connect { cause, .. } => cause.clone(),
            Self::Unsent(cause) | Self::Lost(cause) | Self::Broken(cause) => cause.to_string(),
        }
    }
}

#[cfg(test)]
mod differential;
#[cfg(test)]
mod tests;
