//! Credentials that expire and are fetched over the network (a service account's access
//! token, a container's AWS keys): held, fetched again before they expire, one fetch at a
//! time, and kept while they are valid when a fetch fails.
//!
//! - **Refresh.** Once less than `min(5 min, half their lifetime)` is left, the next call
//!   fetches new ones; until then every call takes the held ones at once ([`Refreshed::fresh`]).
//! - **One fetch at a time.** Calls that come while one runs take the held credentials while
//!   they are valid, and wait for the fetch when there are none.
//! - **A failed fetch** while the held credentials are valid keeps them, and the next try
//!   waits [`RETRY_PAUSE`] (an endpoint that is down is not asked once per call); with none
//!   valid, the call gets the failure.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// The most time before credentials expire at which they are fetched again (half their
/// lifetime, for ones shorter than twice this).
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// After a fetch failed while the held credentials are valid, how long calls keep taking
/// them before one tries again.
const RETRY_PAUSE: Duration = Duration::from_secs(5);

/// Credentials of type `T`, held and refreshed.
#[derive(Debug)]
pub(super) struct Refreshed<T> {
    held: Mutex<Option<Held<T>>>,
    /// Held by the call that fetches.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Held<T> {
    value: T,
    /// From then on, the next call fetches new ones.
    refresh_at: Instant,
    /// From then on, they are not used.
    expires_at: Instant,
}

/// What [`Refreshed::get`] came to.
#[derive(Debug)]
pub(super) enum Got<T, E> {
    /// The held credentials, or new ones.
    Value(T),
    /// The fetch failed; the held credentials, still valid, serve.
    Kept(T, E),
    /// The fetch failed and nothing valid is held.
    Failed(E),
}

impl<T: Clone> Default for Refreshed<T> {
    fn default() -> Self {
        Self {
            held: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }
}

impl<T: Clone> Refreshed<T> {
    /// The held credentials while no refresh is due: what most calls take, at once.
    pub(super) fn fresh(&self) -> Option<T> {
        let now = Instant::now();
        self.held()
            .as_ref()
            .filter(|held| now < held.refresh_at)
            .map(|held| held.value.clone())
    }

    /// The held credentials while they are valid, refresh due or not, and when they expire.
    fn valid(&self) -> Option<(T, Instant)> {
        let now = Instant::now();
        self.held()
            .as_ref()
            .filter(|held| now < held.expires_at)
            .map(|held| (held.value.clone(), held.expires_at))
    }

    fn held(&self) -> MutexGuard<'_, Option<Held<T>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Credentials for a call: the held ones, or ones `fetch` gets now. `fetch` is given the
    /// time the held ones expire, if any are valid (a fetch they cover need not outlast
    /// them), and answers with the credentials and how long they live from when it was
    /// called.
    pub(super) async fn get<E, F, Fut>(&self, fetch: F) -> Got<T, E>
    where
        F: FnOnce(Option<Instant>) -> Fut,
        Fut: Future<Output = Result<(T, Duration), E>>,
    {
        let _fetching = match self.fetching.try_lock() {
            Ok(guard) => guard,
            // Another call is fetching: the held credentials serve while they are valid.
            Err(_) => match self.valid() {
                Some((value, _)) => return Got::Value(value),
                None => self.fetching.lock().await,
            },
        };
        // The fetch this call waited for may have brought credentials.
        if let Some(value) = self.fresh() {
            return Got::Value(value);
        }
        let old = self.valid();
        let asked_at = Instant::now();
        match fetch(old.as_ref().map(|(_, expires_at)| *expires_at)).await {
            Ok((value, lifetime)) => {
                let expires_at = asked_at + lifetime;
                *self.held() = Some(Held {
                    value: value.clone(),
                    refresh_at: expires_at - REFRESH_MARGIN.min(lifetime / 2),
                    expires_at,
                });
                Got::Value(value)
            }
            Err(error) => match old {
                Some((value, expires_at)) => {
                    if let Some(held) = self.held().as_mut() {
                        held.refresh_at = expires_at.min(Instant::now() + RETRY_PAUSE);
                    }
                    Got::Kept(value, error)
                }
                None => Got::Failed(error),
            },
        }
    }
}

#[cfg(test)]
mod tests;
