//! What the HTTP adapters share: their clients (the TLS set-up) and the provider a call goes to.
//! How HTTP outcomes (transport errors, statuses, `Retry-After`, errors inside a stream) are
//! classified into [`ErrorClass`]es lives in [`classify`]: every adapter classifies the same
//! way, so the rules live there once.
//!
//! [`ErrorClass`]: crate::execution::ErrorClass

mod backoff;
mod classify;
mod detail;

pub(super) use classify::truncate;

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderMap, HeaderValue};

use super::{ProviderCall, ProviderInitError};
use crate::config::{HttpEndpointConfig, Secret, TimeoutsConfig};
use crate::execution::ExecutionId;

/// How long a pooled connection may sit unused before it is closed. It must end before the
/// server closes it: a request sent on a connection the server is just closing fails after
/// it was sent, which is `connection_lost` (outcome unknown, not repeated). Common servers
/// close idle connections after 5s (uvicorn, which serves vLLM; cpp-httplib in llama.cpp's
/// server; Node.js); 4s stays under that with room for the server's close still in flight.
/// A busy provider's connections rarely idle that long, so reuse is kept where it counts.
const POOL_IDLE: Duration = Duration::from_secs(4);

/// What the HTTP adapters' clients share: the TLS set-up (the platform's roots), built once,
/// when the first provider (or proxy) that is https needs it.
#[derive(Debug, Default)]
pub(super) struct HttpClients {
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl HttpClients {
    /// The client of provider `name` for `{base_url}{path}`, keeping as many idle
    /// connections as the provider runs attempts at once.
    pub(crate) fn client(
        &mut self,
        name: &str,
        endpoint: &HttpEndpointConfig,
        path: &str,
        max_concurrency: u32,
    ) -> Result<h1::Client, ProviderInitError> {
        let url = url::Url::parse(&format!("{}{path}", endpoint.base_url))
            .map_err(|e| ProviderInitError::new(name, format!("base_url: {e}")))?;
        let settings = h1::Settings {
            connect_timeout: endpoint.timeouts.connect,
            proxy: endpoint.proxy.as_ref().map(|p| p.expose().to_owned()),
            max_idle: usize::try_from(max_concurrency).unwrap_or(usize::MAX),
            idle_timeout: POOL_IDLE,
        };
        h1::Client::new(&url, settings, || self.tls()).map_err(|e| {
            // A container without CA certificates fails here, for every https:// provider.
            let hint = match e {
                h1::ClientError::Tls(_) => {
                    " (https:// servers are verified against this machine's CA certificates: \
                     install them, e.g. Debian's ca-certificates package)"
                }
                _ => "",
            };
            ProviderInitError::new(name, format!("{e}{hint}"))
        })
    }

    fn tls(&mut self) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
        if let Some(tls) = &self.tls {
            return Ok(tls.clone());
        }
        let tls = Arc::new(tls_config()?);
        self.tls = Some(tls.clone());
        Ok(tls)
    }
}

/// TLS 1.2 and 1.3 with the platform's roots (the verifier reqwest uses), offering only
/// HTTP/1.1. The crypto is the process's provider (the binary installs ring at start), or
/// ring for this client alone when an embedding program installed none: the library sets
/// no process-wide state.
fn tls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let verifier = rustls_platform_verifier::Verifier::new(provider.clone())?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The provider a call goes to: where, with which headers, how long to wait, and how errors
/// and logs name it.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    /// The configured provider name.
    pub name: Arc<str>,
    /// The adapter, e.g. `openai`.
    pub adapter: &'static str,
    /// The provider's client (its connections).
    pub client: h1::Client,
    /// Connect / first byte / idle.
    pub timeouts: TimeoutsConfig,
    /// The key, to blank out wherever upstream text is quoted or logged: a provider or a
    /// proxy in front of it may echo it back.
    pub secret: Option<Secret>,
    /// A second secret the requests carry (an AWS session token), blanked out the same way.
    pub session: Option<Secret>,
    /// Headers every request carries (credentials, protocol version); secret ones are
    /// marked sensitive.
    pub headers: HeaderMap,
    /// The execution and attempt a per-call copy serves ([`Upstream::for_call`]): every
    /// warning about the call names them, as every log line of a call names its execution
    /// (the attempt's span, at `debug`, is off at the default level).
    pub call: Option<(ExecutionId, u32)>,
}

impl Upstream {
    /// Provider `name`'s upstream through `client`: requests carry `headers`, and `secret`
    /// is blanked out of whatever upstream text is quoted.
    pub(crate) fn new(
        name: Arc<str>,
        adapter: &'static str,
        client: h1::Client,
        timeouts: TimeoutsConfig,
        headers: HeaderMap,
        secret: Option<Secret>,
    ) -> Self {
        Self {
            name,
            adapter,
            client,
            timeouts,
            secret,
            session: None,
            headers,
            call: None,
        }
    }

    /// An upstream at `127.0.0.1:9` (where nothing listens) with one-second timeouts and no
    /// key: for unit tests and fuzz targets, which drive its adapter's decoding by hand.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn offline(name: &str, adapter: &'static str, secret: Option<Secret>) -> Self {
        let second = Duration::from_secs(1);
        let timeouts = TimeoutsConfig {
            connect: second,
            first_byte: second,
            idle: second,
        };
        let endpoint = HttpEndpointConfig {
            base_url: "http://127.0.0.1:9/v1".to_owned(),
            timeouts,
            proxy: None,
        };
        let client = HttpClients::default()
            .client(name, &endpoint, "/chat/completions", 1)
            .unwrap_or_else(|e| unreachable!("a plain-http client needs no set-up: {e}"));
        Self::new(
            name.into(),
            adapter,
            client,
            timeouts,
            HeaderMap::new(),
            secret,
        )
    }

    /// The copy that serves one attempt: its warnings name the attempt.
    pub(super) fn for_call(&self, call: &ProviderCall) -> Self {
        Self {
            call: Some((call.execution_id, call.attempt)),
            ..self.clone()
        }
    }

    /// The execution the call serves, as a log field (absent on the provider's own copy).
    pub(super) fn execution_id(&self) -> Option<tracing::field::DisplayValue<ExecutionId>> {
        self.call.map(|(id, _)| tracing::field::display(id))
    }

    /// The attempt the call is, as a log field.
    pub(super) fn attempt(&self) -> Option<u32> {
        self.call.map(|(_, attempt)| attempt)
    }

    /// ``openai provider `main` ``: how messages name the provider (never its key).
    pub(super) fn label(&self) -> String {
        format!("{} provider `{}`", self.adapter, self.name)
    }
}

/// A header carrying a secret: marked sensitive, so hyper neither logs nor indexes it.
pub(crate) fn secret_header(name: &str, value: &str) -> Result<HeaderValue, ProviderInitError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| {
        ProviderInitError::new(name, "api_key_env: the key is not a valid header value")
    })?;
    header.set_sensitive(true);
    Ok(header)
}

/// `Authorization: Bearer <token>`, marked sensitive.
pub(crate) fn bearer_header(name: &str, token: &Secret) -> Result<HeaderValue, ProviderInitError> {
    secret_header(name, &format!("Bearer {}", token.expose()))
}

#[cfg(test)]
mod tests;
