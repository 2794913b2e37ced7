//! The container credentials endpoint (ECS, EKS Pod Identity): one `GET`, with its
//! authorization token, answered with keys and when they expire.

use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::Deserialize;
use tokio::time::Instant;

use super::AwsKeys;
use crate::config::{ContainerCredentials, Secret};
use crate::provider::fetch::fetch as get;

/// What a fetch the endpoint refused (401, 403) says: the only failure that is the
/// credentials' own, not the endpoint's being unwell.
pub(super) const REFUSED: &str = "refused the request";

/// The largest credentials reply read.
const REPLY_LIMIT: usize = 64 * 1024;

/// The container endpoint's reply.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Reply {
    access_key_id: String,
    secret_access_key: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    expiration: Option<String>,
}

/// One request to the container endpoint, with its authorization token if it takes one, by
/// `by`. `Err` says what went wrong for the caller, then for the log.
pub(super) async fn fetch(
    client: &h1::Client,
    config: &ContainerCredentials,
    by: Instant,
) -> Result<AwsKeys, (&'static str, String)> {
    let said = |what: &'static str| (what, what.to_owned());
    let mut headers = HeaderMap::new();
    let token = match (&config.token_file, &config.token) {
        // Read at every fetch: the agent that writes it rotates it.
        (Some(path), _) => Some(
            std::fs::read_to_string(path)
                .map_err(|_| {
                    said("could not be asked: its authorization token file cannot be read")
                })?
                .trim()
                .to_owned(),
        ),
        (None, Some(token)) => Some(token.expose().to_owned()),
        (None, None) => None,
    };
    if let Some(token) = token {
        let mut value = HeaderValue::from_str(&token)
            .map_err(|_| said("could not be asked: its authorization token is not header text"))?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    let (status, body) = get(client, client.get(&headers), by, REPLY_LIMIT)
        .await
        .map_err(|e| (e.what(), e.cause()))?;
    if status == 401 || status == 403 {
        return Err((REFUSED, format!("HTTP {status}")));
    }
    if status != 200 {
        return Err(("answered with an error status", format!("HTTP {status}")));
    }
    let reply: Reply =
        serde_json::from_slice(&body).map_err(|_| said("sent a reply that is not credentials"))?;
    let expires = match reply.expiration.as_deref() {
        Some(at) => Some(
            humantime::parse_rfc3339_weak(at)
                .map_err(|_| said("sent an expiration that is not an RFC 3339 time"))?,
        ),
        None => None,
    };
    if reply.access_key_id.is_empty() || reply.secret_access_key.is_empty() {
        return Err(said("sent empty credentials"));
    }
    Ok(AwsKeys::new(
        &Secret::new(reply.access_key_id),
        Secret::new(reply.secret_access_key),
        reply.token.filter(|t| !t.is_empty()).map(Secret::new),
        expires,
    ))
}
