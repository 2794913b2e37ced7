//! The keys of every HTTP adapter's endpoint: `base_url`, `proxy`, `allow_insecure_http` and
//! `timeouts`, checked the same for all. A key (an API key, a token, a signature) is not sent
//! over plain http to another machine, nor to a proxy that would carry it in clear text,
//! unless `allow_insecure_http` says so.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::At;
use crate::config::bounds::{self, duration};
use crate::config::{ConfigError, ProviderSpec, ProxyUrl};

/// The endpoint's keys, as the file writes them.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEndpoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    #[serde(default)]
    pub allow_insecure_http: bool,
    /// Unset, every timeout is at its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<RawTimeouts>,
}

/// `timeouts`, each at its default unless the file sets it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawTimeouts {
    #[serde(with = "humantime_serde")]
    pub connect: Duration,
    #[serde(with = "humantime_serde")]
    pub first_byte: Duration,
    #[serde(with = "humantime_serde")]
    pub idle: Duration,
}

impl Default for RawTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(60),
            idle: Duration::from_secs(30),
        }
    }
}

/// The endpoint's keys, taken out of a provider's `settings`.
pub(super) fn take(settings: &mut toml::Table) -> toml::Table {
    ["base_url", "proxy", "allow_insecure_http", "timeouts"]
        .into_iter()
        .filter_map(|key| settings.remove(key).map(|value| (key.to_owned(), value)))
        .collect()
}

/// Where an HTTP adapter sends its requests and how long it waits.
#[derive(Debug, Clone)]
pub struct HttpEndpointConfig {
    /// An http(s) URL without a trailing slash, e.g. `https://api.openai.com/v1`; the adapter
    /// appends its path (`/chat/completions`, `/messages`).
    pub base_url: String,
    /// Timeouts of one attempt; each is also cut to the attempt's remaining time.
    pub timeouts: TimeoutsConfig,
    /// An HTTP proxy every request goes through; `None` (the default) connects directly and
    /// ignores `HTTP_PROXY`/`HTTPS_PROXY` in the environment.
    pub proxy: Option<ProxyUrl>,
}

/// `[providers.NAME] timeouts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutsConfig {
    /// TCP and TLS set-up of a new connection.
    pub connect: Duration,
    /// From sending the request to the first byte of the response body.
    pub first_byte: Duration,
    /// Longest silence between two pieces of the response body.
    pub idle: Duration,
}

impl HttpEndpointConfig {
    /// `raw` checked: `default_url` where the file sets no `base_url` (an adapter whose URL
    /// follows from its region); `with_key` when the requests carry a credential.
    pub(super) fn new(
        at: &At<'_>,
        raw: &RawEndpoint,
        default_url: Option<String>,
        with_key: bool,
    ) -> Result<Self, ConfigError> {
        let set = raw.timeouts.clone().unwrap_or_default();
        let timeout = |field: &str, value| {
            duration(
                &at.field(&format!("timeouts.{field}")),
                value,
                bounds::MAX_WAIT,
            )
        };
        let timeouts = TimeoutsConfig {
            connect: timeout("connect", set.connect)?,
            first_byte: timeout("first_byte", set.first_byte)?,
            idle: timeout("idle", set.idle)?,
        };
        // Connecting happens inside the first-byte wait. A connect timeout that long could
        // never fire: a slow connect would end as a first-byte `timeout` (outcome unknown,
        // not repeated) instead of `connect_failed` (nothing was sent: retryable).
        if timeouts.connect >= timeouts.first_byte {
            return Err(at.invalid(
                "timeouts.connect",
                format!(
                    "must be shorter than timeouts.first_byte ({} is not less than {}), \
                     which connecting runs inside",
                    humantime::format_duration(timeouts.connect),
                    humantime::format_duration(timeouts.first_byte)
                ),
            ));
        }
        let text = raw.base_url.clone().or(default_url);
        let base_url = base_url(at, text.as_deref())?;
        let proxy = raw.proxy.as_deref().map(|p| proxy(at, p)).transpose()?;
        if with_key && !raw.allow_insecure_http {
            if !secure_enough(&base_url) {
                return Err(at.invalid(
                    "base_url",
                    format!(
                        "would send the API key over plain http to a host that is not this \
                         machine; use https, or set {}.allow_insecure_http = true",
                        at.key
                    ),
                ));
            }
            // A plain-http request goes to the proxy as it is, key and all (an https target
            // is tunnelled through it, encrypted end to end): the proxy is where the bytes go.
            if let Some(proxy) = &proxy
                && base_url.starts_with("http:")
                && !secure_enough(proxy.expose())
            {
                return Err(at.invalid(
                    "proxy",
                    format!(
                        "would carry the API key in clear text to a proxy that is not this \
                         machine (a plain-http base_url is sent to the proxy as it is); use an \
                         https proxy or base_url, or set {}.allow_insecure_http = true",
                        at.key
                    ),
                ));
            }
        }
        Ok(Self {
            base_url,
            timeouts,
            proxy,
        })
    }

    /// `raw` as in effect: the timeouts filled in, the proxy's credentials redacted.
    pub(super) fn effective(&self, raw: &mut RawEndpoint) {
        raw.proxy = self.proxy.as_ref().map(ProxyUrl::redacted);
        raw.timeouts = Some(RawTimeouts {
            connect: self.timeouts.connect,
            first_byte: self.timeouts.first_byte,
            idle: self.timeouts.idle,
        });
    }
}

/// An http(s) base URL, returned without its trailing slash. The text is never echoed in an
/// error: a malformed URL may still carry credentials.
fn base_url(at: &At<'_>, text: Option<&str>) -> Result<String, ConfigError> {
    let invalid = |reason: String| at.invalid("base_url", reason);
    let Some(text) = text else {
        return Err(invalid(format!(
            "is required for the `{}` adapter",
            at.adapter
        )));
    };
    let url = url::Url::parse(text).map_err(|e| invalid(format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("must be an http:// or https:// URL".to_owned()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "must not carry credentials; name the key's variable in `api_key_env`".to_owned(),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("must not have a query or a fragment".to_owned()));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// Whether a key may go to `url` (already checked to be http or https): over https, or over
/// http to this machine.
pub(super) fn secure_enough(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    if url.scheme() == "https" {
        return true;
    }
    match url.host_str() {
        Some(host) if host.eq_ignore_ascii_case("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// A proxy URL (http or https). The text is never echoed in an error: it may carry the
/// proxy's credentials.
fn proxy(at: &At<'_>, text: &str) -> Result<ProxyUrl, ConfigError> {
    let url =
        url::Url::parse(text).map_err(|e| at.invalid("proxy", format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(at.invalid("proxy", "must be an http:// or https:// URL"));
    }
    Ok(ProxyUrl::new(text))
}

/// The endpoint's keys, for every HTTP adapter.
impl ProviderSpec {
    /// `base_url`.
    pub fn base_url(self, url: &str) -> Self {
        self.set("base_url", url)
    }

    /// `proxy`: an http(s) proxy every request goes through.
    pub fn proxy(self, url: &str) -> Self {
        self.set("proxy", url)
    }

    /// `allow_insecure_http`.
    pub fn allow_insecure_http(self, allow: bool) -> Self {
        self.set("allow_insecure_http", allow)
    }

    /// `timeouts`.
    pub fn timeouts(self, connect: Duration, first_byte: Duration, idle: Duration) -> Self {
        let timeouts = RawTimeouts {
            connect,
            first_byte,
            idle,
        };
        self.set("timeouts", super::table(&timeouts))
    }
}
