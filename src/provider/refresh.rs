//! Credentials that expire and are fetched over the network (a service account's access
//! token, a container's AWS keys): held, fetched again before they expire, one fetch at a
//! time, and never a reason for a call holding valid ones to wait.
//!
//! - **Refresh in the background.** Once less than `min(5 min, half their lifetime)` is left,
//!   the next call starts a fetch in a task of its own and goes on with the held credentials;
//!   a fetch that fails leaves them in use (the caller's `on_kept` says so) and the next is
//!   tried [`RETRY_PAUSE`] later.
//! - **Nothing valid held.** A call waits for a fetch: its own, or the one already under way,
//!   whose failure it then shares rather than asking again. For [`RETRY_PAUSE`] after a
//!   failure, calls get that failure at once: an endpoint that is down is not asked once per
//!   call, and the attempts fail fast (and fall back) instead of queueing behind each other.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

/// The most time before credentials expire at which they are fetched again (half their
/// lifetime, for ones shorter than twice this).
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// After a fetch failed, how long until the next is tried.
const RETRY_PAUSE: Duration = Duration::from_secs(5);

/// Credentials of type `T`, held and refreshed; fetches fail with `E`.
#[derive(Debug)]
pub(super) struct Refreshed<T, E> {
    shared: Arc<Shared<T, E>>,
}

#[derive(Debug)]
struct Shared<T, E> {
    state: Mutex<State<T, E>>,
    /// Held by the fetch under way.
    fetching: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug)]
struct State<T, E> {
    held: Option<Held<T>>,
    /// Fetches ended so far: a waiter tells by it whether one ended while it waited.
    fetches: u64,
    /// The last fetch's failure and when it came, until a fetch succeeds.
    failure: Option<(E, Instant)>,
}

#[derive(Debug)]
struct Held<T> {
    value: T,
    /// From then on, a call starts a fetch.
    refresh_at: Instant,
    /// From then on, they are not used.
    expires_at: Instant,
}

impl<T, E> Default for Refreshed<T, E> {
    fn default() -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    held: None,
                    fetches: 0,
                    failure: None,
                }),
                fetching: Arc::new(tokio::sync::Mutex::new(())),
            }),
        }
    }
}

impl<T, E> Shared<T, E> {
    fn state(&self) -> MutexGuard<'_, State<T, E>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T, E> Refreshed<T, E>
where
    T: Clone + Send + 'static,
    E: Clone + Send + 'static,
{
    /// The held credentials while no refresh is due: what most calls take, at once.
    pub(super) fn fresh(&self) -> Option<T> {
        let now = Instant::now();
        self.shared
            .state()
            .held
            .as_ref()
            .filter(|held| now < held.refresh_at)
            .map(|held| held.value.clone())
    }

    /// Lets go of the held credentials when `is` says they are the ones the caller was
    /// refused with: the next call fetches new ones at once (a failure's pause aside).
    pub(super) fn forget(&self, is: impl Fn(&T) -> bool) {
        let mut state = self.shared.state();
        if state.held.as_ref().is_some_and(|held| is(&held.value)) {
            state.held = None;
        }
    }

    /// Credentials for a call whose attempt ends by `deadline`: the held ones while they are
    /// valid (starting a refresh in the background when one is due), else ones fetched now.
    /// `fetch(by)` fetches, finishing by `by` (the held credentials' expiry for a refresh,
    /// the call's deadline otherwise), with the credentials and how long they live from when
    /// it was called. `on_kept` is told of a refresh that failed while the held credentials
    /// stayed valid.
    pub(super) async fn get<F, Fut, K>(
        &self,
        deadline: Instant,
        fetch: F,
        on_kept: K,
    ) -> Result<T, E>
    where
        F: FnOnce(Instant) -> Fut,
        Fut: Future<Output = Result<(T, Duration), E>> + Send + 'static,
        K: FnOnce(E) + Send + 'static,
    {
        let seen = {
            let now = Instant::now();
            let state = self.shared.state();
            if let Some(held) = state.held.as_ref().filter(|h| now < h.expires_at) {
                let paused = state
                    .failure
                    .as_ref()
                    .is_some_and(|(_, at)| now < *at + RETRY_PAUSE);
                if now >= held.refresh_at && !paused {
                    self.refresh(fetch(held.expires_at), on_kept);
                }
                return Ok(held.value.clone());
            }
            if let Some((error, at)) = &state.failure
                && now < *at + RETRY_PAUSE
            {
                return Err(error.clone());
            }
            state.fetches
        };
        let fetching = self.shared.fetching.clone().lock_owned().await;
        {
            let now = Instant::now();
            let state = self.shared.state();
            if let Some(held) = state.held.as_ref().filter(|h| now < h.expires_at) {
                return Ok(held.value.clone());
            }
            // A fetch ended while this call waited, and failed: its failure is this call's.
            if state.fetches != seen
                && let Some((error, _)) = &state.failure
            {
                return Err(error.clone());
            }
        }
        let shared = self.shared.clone();
        shared.ended(fetching, fetch(deadline)).await
    }

    /// Starts `fetch` in a task of its own, unless one is under way.
    fn refresh<Fut, K>(&self, fetch: Fut, on_kept: K)
    where
        Fut: Future<Output = Result<(T, Duration), E>> + Send + 'static,
        K: FnOnce(E) + Send + 'static,
    {
        let Ok(fetching) = self.shared.fetching.clone().try_lock_owned() else {
            return;
        };
        let shared = self.shared.clone();
        #[expect(
            clippy::disallowed_methods,
            reason = "a refresh holds nothing a shutdown must wait for: credentials are \
                      fetched, never written anywhere, and a fetch cut short loses nothing"
        )]
        tokio::spawn(async move {
            if let Err(error) = shared.ended(fetching, fetch).await {
                let now = Instant::now();
                let valid = shared
                    .state()
                    .held
                    .as_ref()
                    .is_some_and(|h| now < h.expires_at);
                if valid {
                    on_kept(error);
                }
            }
        });
    }
}

impl<T: Clone, E: Clone> Shared<T, E> {
    /// Runs `fetch` (holding `fetching`) and keeps what it brought: the new credentials, or
    /// its failure.
    async fn ended<Fut>(&self, fetching: OwnedMutexGuard<()>, fetch: Fut) -> Result<T, E>
    where
        Fut: Future<Output = Result<(T, Duration), E>>,
    {
        let asked_at = Instant::now();
        let fetched = fetch.await;
        let mut state = self.state();
        state.fetches += 1;
        drop(fetching);
        match fetched {
            Ok((value, lifetime)) => {
                let expires_at = asked_at + lifetime;
                state.held = Some(Held {
                    value: value.clone(),
                    refresh_at: expires_at - REFRESH_MARGIN.min(lifetime / 2),
                    expires_at,
                });
                state.failure = None;
                Ok(value)
            }
            Err(error) => {
                state.failure = Some((error.clone(), Instant::now()));
                Err(error)
            }
        }
    }
}

#[cfg(test)]
mod tests;
