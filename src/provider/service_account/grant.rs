//! One token request: the assertion posted as a form to the token endpoint through the
//! runtime's own HTTP client (the provider's proxy and TLS set-up, pooled), the reply read
//! within a time and a size bound, and the access token taken from it. What went wrong is
//! said for the log, never with the reply's text: a token endpoint may echo what it was sent.

use std::future::poll_fn;
use std::time::Duration;

use h1::Progress;
use http::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::time::Instant;

use super::Bearer;
use super::jwt::Assertion;
use crate::config::Secret;

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
#[derive(Debug)]
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
    let mut call = client.call(client.post(&HeaderMap::new(), &headers, body.as_bytes()));
    let limit = by.saturating_duration_since(Instant::now());
    let (status, reply) = tokio::time::timeout_at(by, read(&mut call))
        .await
        .map_err(|_| {
            let limit = humantime::format_duration(Duration::from_millis(
                u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
            ));
            Failed::new(format!("no reply came within {limit}"))
        })??;
    granted(status, &reply)
}

/// The reply's status and its body, at most [`MAX_REPLY`] of it.
async fn read(call: &mut h1::Call) -> Result<(u16, Vec<u8>), Failed> {
    let response = poll_fn(|cx| call.poll_head(cx))
        .await
        .map_err(|failure| Failed::new(format!("the request failed: {}", failure.cause())))?;
    let mut body = Vec::new();
    let mut too_long = false;
    loop {
        let mut take = |data: &[u8]| {
            if body.len() + data.len() > MAX_REPLY {
                too_long = true;
            } else {
                body.extend_from_slice(data);
            }
        };
        let progress = poll_fn(|cx| call.poll_body(cx, &mut take))
            .await
            .map_err(|failure| Failed::new(format!("the reply broke: {}", failure.cause())))?;
        if too_long {
            call.close();
            return Err(Failed::new(format!(
                "the reply is larger than {} KiB",
                MAX_REPLY / 1024
            )));
        }
        if progress == Progress::End {
            return Ok((response.status, body));
        }
    }
}

/// The token a reply of `status` with `body` grants.
pub(super) fn granted(status: u16, body: &[u8]) -> Result<Granted, Failed> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if !(200..300).contains(&status) {
        return Err(Failed {
            refused: true,
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
