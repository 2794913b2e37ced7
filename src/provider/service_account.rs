//! Access tokens minted with a service account's key (`service_account_file`, Vertex AI):
//! the OAuth 2.0 JWT bearer grant. An assertion signed with the key ([`jwt`]) is posted to
//! the token endpoint ([`grant`]), and the access token it returns is cached.
//!
//! - **Refresh.** A token is refreshed once less than `min(5 min, half its lifetime)` of it
//!   is left; until then every call takes it at once, with no await ([`TokenSource::fresh`]).
//! - **One refresh at a time.** The call that finds a refresh due makes it; calls meanwhile
//!   take the old token while it is valid, and wait for the refresh when there is none.
//! - **A failed refresh** while the token is still valid keeps it (a warning names the
//!   provider and the cause), and the next try waits [`RETRY_PAUSE`]; with no valid token,
//!   the attempt fails `unauthorized` before anything is sent to the provider.
//! - **Secrets.** The key, the assertion and the token each live in a type whose `Debug`
//!   redacts them; logs and errors name the provider and the cause, never them.

mod grant;
mod jwt;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use http::header::{AUTHORIZATION, HeaderValue};
use tokio::time::Instant;

use super::http::{HttpClients, Upstream};
use super::{ProviderError, ProviderInitError};
use crate::config::{HttpEndpointConfig, Secret, ServiceAccount};
use crate::execution::AttemptCode;

/// The most time before a token expires at which it is refreshed (half its lifetime, for a
/// token shorter than twice this).
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// After a refresh failed while the token is still valid, how long calls keep taking it
/// before one tries again: a token endpoint that is down is not asked once per call.
const RETRY_PAUSE: Duration = Duration::from_secs(5);

/// An access token as a request carries it. Nothing formats it.
#[derive(Clone)]
pub(super) struct Bearer {
    /// `Bearer <token>`, marked sensitive.
    header: HeaderValue,
    /// The token, to blank out of whatever the provider echoes.
    token: Secret,
}

impl Bearer {
    /// `upstream` carrying this token: as its `Authorization`, and as the secret blanked out
    /// of any text of the provider's that is quoted.
    pub(super) fn authorize(&self, upstream: &mut Upstream) {
        upstream.headers.insert(AUTHORIZATION, self.header.clone());
        upstream.secret = Some(self.token.clone());
    }
}

impl fmt::Debug for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Bearer(<redacted>)")
    }
}

/// The token in use and its times.
#[derive(Debug)]
struct Cached {
    bearer: Bearer,
    /// From then on, the next call refreshes it.
    refresh_at: Instant,
    /// From then on, it is not sent.
    expires_at: Instant,
}

/// A service account's access tokens for one provider.
#[derive(Debug)]
pub(super) struct TokenSource {
    account: ServiceAccount,
    /// The token endpoint's client: the provider's proxy and TLS, its own connection.
    client: h1::Client,
    /// The provider's first-byte timeout: the longest a token request may take.
    first_byte: Duration,
    cached: Mutex<Option<Cached>>,
    /// Held by the call that refreshes.
    refreshing: tokio::sync::Mutex<()>,
}

impl TokenSource {
    /// The tokens of `account` for provider `name`, requested through `endpoint`'s proxy
    /// with its timeouts.
    pub(super) fn new(
        name: &str,
        account: &ServiceAccount,
        endpoint: &HttpEndpointConfig,
        clients: &mut HttpClients,
    ) -> Result<Self, ProviderInitError> {
        let token_endpoint = HttpEndpointConfig {
            base_url: account.token_endpoint.clone(),
            timeouts: endpoint.timeouts,
            proxy: endpoint.proxy.clone(),
        };
        // One request at a time: one idle connection is all it can reuse.
        let client = clients.client(name, &token_endpoint, "", 1)?;
        Ok(Self {
            account: account.clone(),
            client,
            first_byte: endpoint.timeouts.first_byte,
            cached: Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// The cached token while no refresh is due: what most calls take, at once.
    pub(super) fn fresh(&self) -> Option<Bearer> {
        let now = Instant::now();
        self.cached()
            .as_ref()
            .filter(|cached| now < cached.refresh_at)
            .map(|cached| cached.bearer.clone())
    }

    /// The cached token while it is valid, refresh due or not, and when it expires.
    fn valid(&self) -> Option<(Bearer, Instant)> {
        let now = Instant::now();
        self.cached()
            .as_ref()
            .filter(|cached| now < cached.expires_at)
            .map(|cached| (cached.bearer.clone(), cached.expires_at))
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Option<Cached>> {
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A token for the call `upstream` serves (its copy for the call, which logs name),
    /// whose attempt ends by `deadline`: the cached one, or one fetched now. An error when
    /// there is no valid token and none could be fetched.
    pub(super) async fn bearer(
        &self,
        upstream: &Upstream,
        deadline: Instant,
    ) -> Result<Bearer, ProviderError> {
        let _refreshing = match self.refreshing.try_lock() {
            Ok(guard) => guard,
            // Another call is refreshing: the old token serves while it is valid.
            Err(_) => match self.valid() {
                Some((bearer, _)) => return Ok(bearer),
                None => self.refreshing.lock().await,
            },
        };
        // The refresh this call waited for may have brought a token.
        if let Some(bearer) = self.fresh() {
            return Ok(bearer);
        }
        let old = self.valid();
        let asked_at = Instant::now();
        // A refresh the old token covers waits no longer than the old token lasts.
        let mut by = deadline.min(asked_at + self.first_byte);
        if let Some((_, expires_at)) = &old {
            by = by.min(*expires_at);
        }
        match self.fetch(by).await {
            Ok(granted) => Ok(self.keep(granted, asked_at)),
            Err(failed) => self.failed(upstream, failed, old),
        }
    }

    /// A token from the endpoint, asked for by `by`.
    async fn fetch(&self, by: Instant) -> Result<grant::Granted, grant::Failed> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let Some(assertion) = jwt::assertion(&self.account, now) else {
            return Err(grant::Failed {
                refused: false,
                cause: "the assertion could not be signed".to_owned(),
            });
        };
        grant::request(&self.client, &assertion, by).await
    }

    /// Caches `granted`, asked for at `asked_at` (its lifetime counts from then).
    fn keep(&self, granted: grant::Granted, asked_at: Instant) -> Bearer {
        let bearer = granted.bearer;
        let expires_at = asked_at + granted.lifetime;
        let refresh_at = expires_at - REFRESH_MARGIN.min(granted.lifetime / 2);
        *self.cached() = Some(Cached {
            bearer: bearer.clone(),
            refresh_at,
            expires_at,
        });
        bearer
    }

    /// After a failed request: the `old` token while it is valid, else the attempt's error.
    fn failed(
        &self,
        upstream: &Upstream,
        failed: grant::Failed,
        old: Option<(Bearer, Instant)>,
    ) -> Result<Bearer, ProviderError> {
        if let Some((bearer, expires_at)) = old {
            tracing::warn!(
                execution_id = upstream.execution_id(),
                attempt = upstream.attempt(),
                provider = %upstream.name,
                cause = %failed.cause,
                "service account token refresh failed; the cached token serves until it expires"
            );
            if let Some(cached) = self.cached().as_mut() {
                cached.refresh_at = expires_at.min(Instant::now() + RETRY_PAUSE);
            }
            return Ok(bearer);
        }
        tracing::warn!(
            execution_id = upstream.execution_id(),
            attempt = upstream.attempt(),
            provider = %upstream.name,
            cause = %failed.cause,
            "service account token request failed"
        );
        let how = if failed.refused { "refused" } else { "failed" };
        Err(ProviderError::rejected(
            AttemptCode::Unauthorized,
            format!(
                "{}: the service account's token endpoint {how} the token request",
                upstream.label()
            ),
        ))
    }
}
