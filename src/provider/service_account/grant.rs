//! One token request: the assertion posted as a form to the token endpoint through the
//! runtime's own HTTP client (the provider's proxy and TLS set-up, pooled), the reply read
//! within a time and a size bound ([`fetch`]), and the access token taken from it. What went wrong is
//! said for the log, never with the reply's text: a token endpoint may echo what it was sent.

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::time::Instant;

use super::Bearer;
use super::jwt::Assertion;
use crate::config::Secret;
use crate::provider::fetch::fetch;

/// A reply larger than this is not a token (Google's are under 2 KB).
const MAX_REPLY: usize = 64 * 1024;

/// The longest lifetime taken from a reply: a token is refreshed at the latest after a day.
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// `grant_type`, form-encoded: the JWT bearer grant.
const GRANT_TYPE: &str = "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer";

/// An access token and how long it is valid from when it was asked for.
pub(super) struct Granted {
    /// The token, as requests carry it.
    pub bearer: Bearer,
    /// Its `expires_in`, at most [`MAX_LIFETIME`].
    pub lifetime: Duration,
}

/// Why no token came.
#[derive(Debug, Clone)]
pub(super) struct Failed {
    /// The endpoint answered with an error status (rather than not answering, or answering
    /// something that is not a token).
    pub refused: bool,
    /// What happened, for the log: never a secret, nor the reply's text.
    pub cause: String,
}

impl Failed {
    fn new(cause: impl Into<String>) -> Self {
        Self {
            refused: false,
            cause: cause.into(),
        }
    }
}

/// Posts `assertion` to `client`'s token endpoint and reads the token, all by `by`.
pub(super) async fn request(
    client: &h1::Client,
    assertion: &Assertion,
    by: Instant,
) -> Result<Granted, Failed> {
    let body = format!("grant_type={GRANT_TYPE}&assertion={}", assertion.expose());
    let headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("accept", "application/json"),
    ];
    let request = client.post(&HeaderMap::new(), &headers, body.as_bytes());
    let (status, reply) = fetch(client, request, by, MAX_REPLY)
        .await
        .map_err(|e| Failed::new(e.cause()))?;
    granted(status, &reply)
}

/// The token a reply of `status` with `body` grants.
pub(super) fn granted(status: u16, body: &[u8]) -> Result<Granted, Failed> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if !(200..300).contains(&status) {
        // The endpoint refused the grant (a bad or revoked key, an unknown account); any other
        // status (a 5xx, a 429) is the endpoint being unwell.
        return Err(Failed {
            refused: matches!(status, 400 | 401 | 403),
            cause: format!("HTTP {status}{}", oauth_error(json.as_ref())),
        });
    }
    let json = json.ok_or_else(|| Failed::new("the reply is not JSON"))?;
    let no_token = || Failed::new("the reply has no `access_token` a header can carry");
    let token = json
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(no_token)?;
    let mut header = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| no_token())?;
    header.set_sensitive(true);
    if let Some(kind) = json.get("token_type")
        && !kind
            .as_str()
            .is_some_and(|k| k.eq_ignore_ascii_case("bearer"))
    {
        return Err(Failed::new("the reply's `token_type` is not `Bearer`"));
    }
    let seconds = json
        .get("expires_in")
        .and_then(Value::as_u64)
        .filter(|seconds| *seconds > 0)
        .ok_or_else(|| Failed::new("the reply has no positive whole `expires_in`"))?;
    Ok(Granted {
        bearer: Bearer {
            header,
            token: Secret::new(token),
        },
        lifetime: Duration::from_secs(seconds).min(MAX_LIFETIME),
    })
}

/// ` (invalid_grant)`: an OAuth error reply's `error` code, when it is one (a short
/// lowercase word); its description is left out, as it may quote the assertion.
fn oauth_error(json: Option<&Value>) -> String {
    json.and_then(|json| json.get("error"))
        .and_then(Value::as_str)
        .filter(|code| {
            !code.is_empty()
                && code.len() <= 40
                && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        })
        .map(|code| format!(" ({code})"))
        .unwrap_or_default()
}
