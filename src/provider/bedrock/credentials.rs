//! The AWS keys Bedrock requests are signed with: from the environment (fixed for the
//! process's life), or from the container credentials endpoint (how ECS tasks and EKS Pod
//! Identity hand them out), cached and fetched again before they expire. Never in a log, an
//! error or `Debug` output.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::config::{ContainerCredentials, Secret};
use crate::execution::AttemptCode;
use crate::provider::ProviderError;
use crate::provider::http::Upstream;

/// Keys are fetched again this long before they expire, or at half their life if that is
/// sooner (the AWS SDKs refresh five minutes ahead).
const REFRESH_AHEAD: Duration = Duration::from_secs(5 * 60);

/// How long after a failed refresh, while the held keys are valid, the next is tried.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// How long keys the endpoint gave no expiry for are kept.
const UNDATED_LIFE: Duration = Duration::from_secs(15 * 60);

/// One set of AWS keys.
pub(in crate::provider) struct AwsKeys {
    access_key_id: Secret,
    secret_access_key: Secret,
    session_token: Option<Secret>,
    expires: Option<SystemTime>,
}

mod container;

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

    /// Whether the keys may still sign at `now`.
    fn valid_at(&self, now: SystemTime) -> bool {
        self.expires.is_none_or(|at| now < at)
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
    /// The keys held.
    held: Mutex<Option<Held>>,
    /// Held while keys are fetched: one fetch at a time; calls with no valid keys wait for it.
    fetching: tokio::sync::Mutex<()>,
    /// Whether a refresh runs in the background (while the held keys are still valid).
    refreshing: AtomicBool,
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

/// Keys from the container endpoint, and when to fetch new ones.
#[derive(Debug)]
struct Held {
    keys: Arc<AwsKeys>,
    /// Keys are fetched again from then on, in the background, while these stay in use.
    refresh_at: SystemTime,
    /// After a refresh failed: not tried again before then.
    retry_at: Option<SystemTime>,
}

impl KeySource {
    /// Keys fixed for the process's life (the environment's).
    pub(super) fn fixed(
        access_key_id: &Secret,
        secret_access_key: &Secret,
        session_token: Option<&Secret>,
    ) -> Self {
        let keys = AwsKeys {
            access_key_id: access_key_id.clone(),
            secret_access_key: secret_access_key.clone(),
            session_token: session_token.cloned(),
            expires: None,
        };
        Self::from(From::Environment(Arc::new(keys)))
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
            refreshing: AtomicBool::new(false),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<Held>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keys to sign with now, when they are at hand: the environment's, or container keys
    /// that have not expired. Keys due for a refresh are still handed out, and the refresh
    /// starts in the background (one at a time, and not within [`RETRY_AFTER`] of one that
    /// failed), so no call waits while valid keys exist.
    pub(super) fn at_hand(self: &Arc<Self>, upstream: &Upstream) -> Option<Arc<AwsKeys>> {
        if let From::Environment(keys) = &self.from {
            return Some(keys.clone());
        }
        let now = SystemTime::now();
        let held = self.held();
        let held = held.as_ref()?;
        if now < held.refresh_at {
            return Some(held.keys.clone());
        }
        if !held.keys.valid_at(now) {
            return None;
        }
        let may_retry = held.retry_at.is_none_or(|at| now >= at);
        if may_retry && !self.refreshing.swap(true, Ordering::AcqRel) {
            let (source, upstream) = (self.clone(), upstream.clone());
            #[expect(
                clippy::disallowed_methods,
                reason = "a refresh holds nothing a shutdown must wait for: keys are fetched, \
                          never written anywhere, and dropping the task mid-fetch loses nothing"
            )]
            tokio::spawn(async move {
                let _one_at_a_time = source.fetching.lock().await;
                let _ = source.fetch(&upstream).await;
                source.refreshing.store(false, Ordering::Release);
            });
        }
        Some(held.keys.clone())
    }

    /// Keys to sign with when none are at hand: fetched now (or by the fetch already under
    /// way). With none to be had, the attempt fails before anything is sent.
    pub(super) async fn fresh(
        self: &Arc<Self>,
        upstream: &Upstream,
    ) -> Result<Arc<AwsKeys>, ProviderError> {
        let _one_at_a_time = self.fetching.lock().await;
        if let Some(keys) = self.at_hand(upstream) {
            return Ok(keys);
        }
        self.fetch(upstream).await
    }

    /// One fetch from the container endpoint (the caller holds `fetching`): the keys it
    /// gave, now held; or, when it failed, the held keys while they are valid (with a
    /// warning), else the attempt's error.
    async fn fetch(&self, upstream: &Upstream) -> Result<Arc<AwsKeys>, ProviderError> {
        let From::Container {
            client,
            config,
            within,
        } = &self.from
        else {
            return Err(unavailable(upstream, "are not set"));
        };
        let fetched = container::fetch(client, config, Instant::now() + *within).await;
        let now = SystemTime::now();
        let mut held = self.held();
        match fetched {
            Ok(keys) => {
                let expires = keys.expires.unwrap_or(now + UNDATED_LIFE);
                let life = expires.duration_since(now).unwrap_or_default();
                let keys = Arc::new(keys);
                *held = Some(Held {
                    keys: keys.clone(),
                    refresh_at: expires - REFRESH_AHEAD.min(life / 2),
                    retry_at: None,
                });
                Ok(keys)
            }
            Err((why, cause)) => {
                let valid = held.as_mut().filter(|held| held.keys.valid_at(now));
                if let Some(held) = valid {
                    held.retry_at = Some(now + RETRY_AFTER);
                    tracing::warn!(
                        provider = %upstream.name,
                        cause,
                        "fetching new AWS credentials from the container endpoint failed; \
                         the current ones are still valid and stay in use"
                    );
                    return Ok(held.keys.clone());
                }
                tracing::warn!(
                    execution_id = upstream.execution_id(),
                    provider = %upstream.name,
                    cause,
                    "fetching AWS credentials from the container endpoint failed"
                );
                let why = format!("could not be fetched: the container credentials endpoint {why}");
                Err(unavailable(upstream, &why))
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
