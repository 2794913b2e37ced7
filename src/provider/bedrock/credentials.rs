//! The AWS keys Bedrock requests are signed with: from the environment (fixed for the
//! process's life), or from the container credentials endpoint (how ECS tasks and EKS Pod
//! Identity hand them out), cached and fetched again before they expire. Never in a log, an
//! error or `Debug` output.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::config::{ContainerCredentials, Secret};
use crate::execution::AttemptCode;
use crate::provider::ProviderError;
use crate::provider::http::Upstream;
use crate::provider::refresh::Refreshed;

/// How long keys the endpoint gave no expiry for are kept.
const UNDATED_LIFE: Duration = Duration::from_secs(15 * 60);

/// Keys that live less than this when they arrive are refused.
const MIN_LIFE: Duration = Duration::from_secs(1);

mod container;

/// One set of AWS keys.
pub(in crate::provider) struct AwsKeys {
    access_key_id: Secret,
    secret_access_key: Secret,
    session_token: Option<Secret>,
    expires: Option<SystemTime>,
    /// The last signing key derived from these keys, and its scope (day, region, service):
    /// a day's requests share it.
    signing_key: Mutex<Option<(String, ring::hmac::Key)>>,
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
    fn new(
        access_key_id: &Secret,
        secret_access_key: Secret,
        session_token: Option<Secret>,
        expires: Option<SystemTime>,
    ) -> Self {
        Self {
            access_key_id: access_key_id.clone(),
            secret_access_key,
            session_token,
            expires,
            signing_key: Mutex::new(None),
        }
    }

    pub(super) fn access_key_id(&self) -> &str {
        self.access_key_id.expose()
    }

    pub(super) fn secret_access_key(&self) -> &str {
        self.secret_access_key.expose()
    }

    pub(super) fn session_token(&self) -> Option<&str> {
        self.session_token.as_ref().map(Secret::expose)
    }

    /// The signing key of `scope`: the one kept if it is that scope's, else `derive`'s,
    /// kept in its place.
    pub(super) fn signing_key(
        &self,
        scope: &str,
        derive: impl FnOnce() -> ring::hmac::Key,
    ) -> ring::hmac::Key {
        // A poisoned lock holds a whole key or none: each is written at once.
        let mut kept = self
            .signing_key
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*kept {
            Some((kept_scope, key)) if kept_scope == scope => key.clone(),
            _ => {
                let key = derive();
                *kept = Some((scope.to_owned(), key.clone()));
                key
            }
        }
    }

    /// The secrets to blank out of any upstream text quoted in an error: the secret key and
    /// the session token.
    pub(super) fn secrets(&self) -> (Secret, Option<Secret>) {
        (self.secret_access_key.clone(), self.session_token.clone())
    }
}

/// Where a provider's keys come from, and the ones it holds.
#[derive(Debug)]
pub(super) enum KeySource {
    Environment(Arc<AwsKeys>),
    Container {
        client: h1::Client,
        config: ContainerCredentials,
        /// The longest one request to the endpoint may take.
        within: Duration,
        keys: Refreshed<Arc<AwsKeys>, (&'static str, String)>,
    },
}

impl KeySource {
    /// Keys fixed for the process's life (the environment's).
    pub(super) fn fixed(
        access_key_id: &Secret,
        secret_access_key: &Secret,
        session_token: Option<&Secret>,
    ) -> Self {
        Self::Environment(Arc::new(AwsKeys::new(
            access_key_id,
            secret_access_key.clone(),
            session_token.cloned(),
            None,
        )))
    }

    /// Keys from the container endpoint `config` names, asked through `client` (its URL),
    /// each request within `within`.
    pub(super) fn container(
        config: &ContainerCredentials,
        client: h1::Client,
        within: Duration,
    ) -> Self {
        Self::Container {
            client,
            config: config.clone(),
            within,
            keys: Refreshed::default(),
        }
    }

    /// Keys to sign with now, when no fetch is due first.
    pub(super) fn at_hand(&self) -> Option<Arc<AwsKeys>> {
        match self {
            Self::Environment(keys) => Some(keys.clone()),
            Self::Container { keys, .. } => keys.fresh(),
        }
    }

    /// Keys to sign with for the call `upstream` serves, whose attempt ends by `deadline`:
    /// those held, or ones fetched now (see [`Refreshed::get`]). With none to be had, the
    /// attempt fails before anything is sent.
    pub(super) async fn fresh(
        &self,
        upstream: &Upstream,
        deadline: Instant,
    ) -> Result<Arc<AwsKeys>, ProviderError> {
        let Self::Container {
            client,
            config,
            within,
            keys,
        } = self
        else {
            return self
                .at_hand()
                .ok_or_else(|| unavailable(upstream, "are not set"));
        };
        let (client, config, within) = (client.clone(), config.clone(), *within);
        let fetch = move |by: Instant| async move {
            let by = by.min(Instant::now() + within);
            let keys = container::fetch(&client, &config, by).await?;
            let life = keys.expires.map_or(UNDATED_LIFE, |at| {
                at.duration_since(SystemTime::now()).unwrap_or_default()
            });
            // Keys that arrive expired would be fetched again at every call and used all
            // the same: refused, and the next fetch waits the failure's pause.
            if life < MIN_LIFE {
                return Err((
                    "sent credentials that had already expired",
                    format!("they expire in {}", humantime::format_duration(life)),
                ));
            }
            Ok((Arc::new(keys), life))
        };
        let provider = upstream.name.clone();
        let on_kept = move |(_, cause): (&'static str, String)| {
            tracing::warn!(
                provider = %provider,
                cause,
                "fetching new AWS credentials from the container endpoint failed; the current \
                 ones are still valid and stay in use"
            );
        };
        keys.get(deadline, fetch, on_kept)
            .await
            .map_err(|(why, cause)| {
                tracing::warn!(
                    execution_id = upstream.execution_id(),
                    provider = %upstream.name,
                    cause,
                    "fetching AWS credentials from the container endpoint failed"
                );
                let refused = why == container::REFUSED;
                let why = format!("could not be fetched: the container credentials endpoint {why}");
                if refused {
                    unavailable(upstream, &why)
                } else {
                    // The endpoint being away is not a bad key: the target is not ejected
                    // for every model, and the attempt is retried or falls back.
                    ProviderError::retryable(
                        AttemptCode::Unavailable,
                        format!("{}: AWS credentials {why}", upstream.label()),
                    )
                }
            })
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
