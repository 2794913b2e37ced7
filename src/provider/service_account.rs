//! Access tokens minted with a service account's key (`service_account_file`, Vertex AI):
//! the OAuth 2.0 JWT bearer grant. An assertion signed with the key ([`jwt`]) is posted to
//! the token endpoint ([`grant`]), and the access token it returns is cached.
//!
//! - **Refresh**, as [`refresh`](super::refresh) does it for every fetched credential: once
//!   less than `min(5 min, half its lifetime)` is left, one call at a time fetches a new
//!   token; a failed refresh while the token is still valid keeps it (a warning names the
//!   provider and the cause); with no valid token, the attempt fails `unauthorized` before
//!   anything is sent to the provider.
//! - **Secrets.** The key, the assertion and the token each live in a type whose `Debug`
//!   redacts them; logs and errors name the provider and the cause, never them.

mod grant;
mod jwt;
pub(super) mod remint;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::{AUTHORIZATION, HeaderValue};
use tokio::time::Instant;

use super::http::{HttpClients, Upstream};
use super::refresh::Refreshed;
use super::{ProviderError, ProviderInitError};
use crate::config::{HttpEndpointConfig, Secret, ServiceAccount};
use crate::execution::AttemptCode;

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

/// A service account's access tokens for one provider.
#[derive(Debug)]
pub(super) struct TokenSource {
    account: ServiceAccount,
    /// The token endpoint's client: the provider's proxy and TLS, its own connection.
    client: h1::Client,
    /// The provider's first-byte timeout: the longest a token request may take.
    first_byte: Duration,
    tokens: Refreshed<Bearer, grant::Failed>,
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
            tokens: Refreshed::default(),
        })
    }

    /// The cached token while no refresh is due: what most calls take, at once.
    pub(super) fn fresh(&self) -> Option<Bearer> {
        self.tokens.fresh()
    }

    /// The provider refused `bearer` (401): it is not used again, and the next call mints
    /// a new token (unless another already replaced it).
    pub(super) fn forget(&self, bearer: &Bearer) {
        self.tokens.forget(|held| held.header == bearer.header);
    }

    /// A token for the call `upstream` serves (its copy for the call, which logs name),
    /// whose attempt ends by `deadline`: the cached one, or one fetched now (see
    /// [`Refreshed::get`]). An error when there is no valid token and none could be fetched.
    pub(super) async fn bearer(
        self: &Arc<Self>,
        upstream: &Upstream,
        deadline: Instant,
    ) -> Result<Bearer, ProviderError> {
        let this = self.clone();
        let fetch = move |by: Instant| async move {
            let by = by.min(Instant::now() + this.first_byte);
            let granted = this.fetch(by).await?;
            Ok((granted.bearer, granted.lifetime))
        };
        let provider = upstream.name.clone();
        let on_kept = move |failed: grant::Failed| {
            tracing::warn!(
                provider = %provider,
                cause = %failed.cause,
                "service account token refresh failed; the cached token serves until it expires"
            );
        };
        self.tokens
            .get(deadline, fetch, on_kept)
            .await
            .map_err(|failed| {
                tracing::warn!(
                    execution_id = upstream.execution_id(),
                    attempt = upstream.attempt(),
                    provider = %upstream.name,
                    cause = %failed.cause,
                    "service account token request failed"
                );
                if failed.refused {
                    ProviderError::rejected(
                        AttemptCode::Unauthorized,
                        format!(
                            "{}: the service account's token endpoint refused the token request",
                            upstream.label()
                        ),
                    )
                } else {
                    // An endpoint that is away or unwell is not a bad key: nothing is ejected
                    // for it, and the attempt is retried or falls back.
                    ProviderError::retryable(
                        AttemptCode::Unavailable,
                        format!(
                            "{}: the service account's token request failed",
                            upstream.label()
                        ),
                    )
                }
            })
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
}
