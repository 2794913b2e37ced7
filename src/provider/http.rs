//! What the HTTP adapters share: the pooled reqwest clients and the provider a call goes to.
//! How HTTP outcomes (transport errors, statuses, `Retry-After`, errors inside a stream) are
//! classified into [`ErrorClass`]es lives in [`classify`]: both adapters classify the same
//! way, so the rules live there once.
//!
//! [`ErrorClass`]: crate::execution::ErrorClass

mod classify;
mod detail;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};

use super::ProviderInitError;
use crate::config::{Secret, TimeoutsConfig};

/// How long a pooled connection may sit unused before it is closed. It must end before the
/// server closes it: a request sent on a connection the server is just closing fails after
/// it was sent, which is `connection_lost` (outcome unknown, not repeated). Common servers
/// close idle connections after 5s (uvicorn, which serves vLLM; cpp-httplib in llama.cpp's
/// server; Node.js); 4s stays under that with room for the server's close still in flight.
/// A busy provider's connections rarely idle that long, so reuse is kept where it counts.
const POOL_IDLE: Duration = Duration::from_secs(4);

/// TCP keep-alive probes find a dead peer during a long silent stream.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// A client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("building the HTTP client: {0}")]
pub struct ClientError(#[from] reqwest::Error);

/// The HTTP clients of one runtime. A reqwest client fixes its connect timeout and proxy, so
/// providers share one client per distinct pair (in practice one: the defaults), and with it
/// the connection pool and TLS configuration.
#[derive(Debug, Default)]
pub struct HttpClients {
    by_settings: BTreeMap<(Duration, Option<String>), reqwest::Client>,
}

impl HttpClients {
    /// The client for providers whose connect timeout is `connect`, through `proxy` if one
    /// is configured (else directly, whatever the environment's proxy variables say).
    pub fn client(
        &mut self,
        connect: Duration,
        proxy: Option<&str>,
    ) -> Result<reqwest::Client, ClientError> {
        let settings = (connect, proxy.map(str::to_owned));
        if let Some(client) = self.by_settings.get(&settings) {
            return Ok(client.clone());
        }
        let client = build_client(connect, proxy)?;
        self.by_settings.insert(settings, client.clone());
        Ok(client)
    }
}

/// reqwest is built without a bundled crypto provider (see Cargo.toml): installs ring
/// unless the embedding program installed one of its own. Every reqwest client of the
/// process (the providers', the trace exporter's) needs it first.
pub(crate) fn install_crypto_provider() {
    // An error means another thread installed one first, which then serves us as well.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

fn build_client(connect: Duration, proxy: Option<&str>) -> Result<reqwest::Client, ClientError> {
    install_crypto_provider();
    let builder = reqwest::Client::builder();
    // Only a proxy the configuration names: HTTP(S)_PROXY in the environment would send
    // provider traffic, keys included, somewhere the configuration does not say.
    let builder = match proxy {
        Some(url) => builder.proxy(reqwest::Proxy::all(url)?),
        None => builder.no_proxy(),
    };
    let client = builder
        .connect_timeout(connect)
        // Deltas are forwarded the moment they arrive: no Nagle delay on provider sockets.
        .tcp_nodelay(true)
        .tcp_keepalive(TCP_KEEPALIVE)
        .pool_idle_timeout(POOL_IDLE)
        // A redirect would resend the API key somewhere the configuration did not name.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("model-runtime/", env!("CARGO_PKG_VERSION")))
        .build()?;
    Ok(client)
}

/// The provider a call goes to: where, with which headers, how long to wait, and how errors
/// and logs name it.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    /// The configured provider name.
    pub name: Arc<str>,
    /// The adapter, e.g. `openai`.
    pub adapter: &'static str,
    /// The shared client.
    pub client: reqwest::Client,
    /// Connect / first byte / idle.
    pub timeouts: TimeoutsConfig,
    /// The key, to blank out wherever upstream text is quoted or logged: a provider or a
    /// proxy in front of it may echo it back.
    pub secret: Option<Secret>,
    /// Where requests go: `{base_url}` and the adapter's path.
    pub url: reqwest::Url,
    /// Headers every request carries (credentials, protocol version); secret ones are
    /// marked sensitive.
    pub headers: HeaderMap,
}

impl Upstream {
    /// ``openai provider `main` ``: how messages name the provider (never its key).
    pub fn label(&self) -> String {
        format!("{} provider `{}`", self.adapter, self.name)
    }
}

/// `{base_url}{path}` as a URL, for provider `name`.
pub(crate) fn endpoint(
    name: &str,
    base_url: &str,
    path: &str,
) -> Result<reqwest::Url, ProviderInitError> {
    reqwest::Url::parse(&format!("{base_url}{path}"))
        .map_err(|e| ProviderInitError::new(name, format!("base_url: {e}")))
}

/// A header carrying a secret: marked sensitive, so hyper neither logs nor indexes it.
pub(crate) fn secret_header(name: &str, value: &str) -> Result<HeaderValue, ProviderInitError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| {
        ProviderInitError::new(name, "api_key_env: the key is not a valid header value")
    })?;
    header.set_sensitive(true);
    Ok(header)
}

/// The causes under a reqwest error, e.g. `tcp connect error: Connection refused (os error
/// 111)`. The URL reqwest adds at the top is left out: it is in the configuration.
pub(crate) fn cause(error: &reqwest::Error) -> String {
    let mut text = String::new();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        let piece = s.to_string();
        if !text.contains(&piece) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&piece);
        }
        source = s.source();
    }
    if text.is_empty() {
        text = error.to_string();
    }
    text
}

#[cfg(test)]
mod tests;
