//! The AWS keys Bedrock requests are signed with: from the environment (fixed for the
//! process's life), or from the container credentials endpoint (how ECS tasks and EKS Pod
//! Identity hand them out), cached and fetched again before they expire. Never in a log, an
//! error or `Debug` output.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::Deserialize;
use tokio::time::Instant;

use crate::config::{AwsCredentials, ContainerCredentials, Secret};
use crate::execution::AttemptCode;
use crate::provider::ProviderError;
use crate::provider::fetch::fetch;
use crate::provider::http::Upstream;

/// Keys are fetched again this long before they expire, or at half their life if that is
/// sooner (the AWS SDKs refresh five minutes ahead).
const REFRESH_AHEAD: Duration = Duration::from_secs(5 * 60);

/// How long keys the endpoint gave no expiry for are kept.
const UNDATED_LIFE: Duration = Duration::from_secs(15 * 60);

/// The largest credentials reply read.
const REPLY_LIMIT: usize = 64 * 1024;

/// One set of AWS keys.
pub(in crate::provider) struct AwsKeys {
    access_key_id: Secret,
    secret_access_key: Secret,
    session_token: Option<Secret>,
    expires: Option<SystemTime>,
}

impl fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsKeys")
            .field("session_token", &self.session_token.is_some())
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

impl AwsKeys {
    /// The keys as AWS's signer takes them.
    pub(super) fn credentials(&self) -> aws_credential_types::Credentials {
        aws_credential_types::Credentials::new(
            self.access_key_id.expose(),
            self.secret_access_key.expose(),
            self.session_token.as_ref().map(|t| t.expose().to_owned()),
            self.expires,
            "model-runtime",
        )
    }

    /// The secrets to blank out of any upstream text quoted in an error: the secret key and
    /// the session token.
    pub(super) fn secrets(&self) -> (Secret, Option<Secret>) {
        (self.secret_access_key.clone(), self.session_token.clone())
    }
}

/// Where a provider's keys come from, and the ones it holds.
#[derive(Debug)]
pub(super) struct KeySource {
    from: From,
    /// The keys held, and when to fetch new ones.
    held: Mutex<Option<(Arc<AwsKeys>, SystemTime)>>,
    /// Held while keys are fetched: one fetch at a time, the others wait for its keys.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
enum From {
    Environment(Arc<AwsKeys>),
    Container {
        client: h1::Client,
        config: ContainerCredentials,
        within: Duration,
    },
}

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

impl KeySource {
    /// The keys `config` gives, when it gives them fixed.
    pub(super) fn fixed(config: &AwsCredentials) -> Option<Self> {
        let AwsCredentials::Environment {
            access_key_id,
            secret_access_key,
            session_token,
        } = config
        else {
            return None;
        };
        let keys = AwsKeys {
            access_key_id: access_key_id.clone(),
            secret_access_key: secret_access_key.clone(),
            session_token: session_token.clone(),
            expires: None,
        };
        Some(Self::from(From::Environment(Arc::new(keys))))
    }

    /// Keys from the container endpoint `config` names, asked through `client` (its URL),
    /// each request within `within`.
    pub(super) fn container(
        config: &ContainerCredentials,
        client: h1::Client,
        within: Duration,
    ) -> Self {
        Self::from(From::Container {
            client,
            config: config.clone(),
            within,
        })
    }

    fn from(from: From) -> Self {
        Self {
            from,
            held: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// Keys to sign with now, when no fetch is needed first.
    pub(super) fn at_hand(&self) -> Option<Arc<AwsKeys>> {
        match &self.from {
            From::Environment(keys) => Some(keys.clone()),
            From::Container { .. } => {
                let held = self
                    .held
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                held.as_ref()
                    .filter(|(_, refresh_at)| SystemTime::now() < *refresh_at)
                    .map(|(keys, _)| keys.clone())
            }
        }
    }

    /// Keys to sign with, fetched first when those held are due. A fetch that fails while the
    /// held keys are still valid leaves them in use (with a warning); with none valid, the
    /// attempt fails before anything is sent.
    pub(super) async fn fresh(&self, upstream: &Upstream) -> Result<Arc<AwsKeys>, ProviderError> {
        let From::Container {
            client,
            config,
            within,
        } = &self.from
        else {
            return self
                .at_hand()
                .ok_or_else(|| unavailable(upstream, "are not set"));
        };
        let _one_at_a_time = self.fetching.lock().await;
        if let Some(keys) = self.at_hand() {
            return Ok(keys);
        }
        match fetch_keys(client, config, Instant::now() + *within).await {
            Ok(keys) => {
                let now = SystemTime::now();
                let expires = keys.expires.unwrap_or(now + UNDATED_LIFE);
                let life = expires.duration_since(now).unwrap_or_default();
                let refresh_at = expires - REFRESH_AHEAD.min(life / 2);
                let keys = Arc::new(keys);
                *self
                    .held
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((keys.clone(), refresh_at));
                Ok(keys)
            }
            Err((why, cause)) => {
                let held = self
                    .held
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let valid = held
                    .as_ref()
                    .map(|(keys, _)| keys.clone())
                    .filter(|keys| keys.expires.is_none_or(|at| SystemTime::now() < at));
                drop(held);
                match valid {
                    Some(keys) => {
                        tracing::warn!(
                            execution_id = upstream.execution_id(),
                            provider = %upstream.name,
                            cause,
                            "fetching new AWS credentials from the container endpoint failed; \
                             the current ones are still valid and stay in use"
                        );
                        Ok(keys)
                    }
                    None => {
                        tracing::warn!(
                            execution_id = upstream.execution_id(),
                            provider = %upstream.name,
                            cause,
                            "fetching AWS credentials from the container endpoint failed"
                        );
                        Err(unavailable(
                            upstream,
                            &format!(
                                "could not be fetched: the container credentials endpoint {why}"
                            ),
                        ))
                    }
                }
            }
        }
    }
}

/// The attempt's error when there are no keys to sign with: this target's problem (another
/// target may serve the request), worded without any of the endpoint's reply.
fn unavailable(upstream: &Upstream, why: &str) -> ProviderError {
    ProviderError::rejected(
        AttemptCode::Unauthorized,
        format!("{}: AWS credentials {why}", upstream.label()),
    )
}

/// One request to the container endpoint, with its authorization token if it takes one, by
/// `by`. `Err` says what went wrong for the caller, then for the log.
async fn fetch_keys(
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
    let (status, body) = fetch(client, client.get(&headers), by, REPLY_LIMIT)
        .await
        .map_err(|e| (e.what(), e.cause()))?;
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
    Ok(AwsKeys {
        access_key_id: Secret::new(reply.access_key_id),
        secret_access_key: Secret::new(reply.secret_access_key),
        session_token: reply.token.filter(|t| !t.is_empty()).map(Secret::new),
        expires,
    })
}
