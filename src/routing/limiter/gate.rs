//! The gate itself: a replica's attempts take their turn at it, each asking Redis for a
//! permit (`shared.rs`), and what `on_unavailable` gives them while Redis does not answer.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use super::shared::{Held, RETRY_AFTER, Shared, Unreachable, lock};
use super::{LimiterStatus, Refused};
use crate::config::{LimiterConfig, OnUnavailable};

/// The global gate of one provider.
#[derive(Debug)]
pub(crate) struct GlobalGate {
    pub(super) shared: Arc<Shared>,
    /// This replica's attempts take their turn at the gate in order.
    turn: tokio::sync::Mutex<()>,
    /// `fail_open`: the permits this replica may hold alone while Redis is unreachable.
    fallback: Option<Arc<Semaphore>>,
}

/// The longest pause between two polls of a full gate.
const MAX_PAUSE: Duration = Duration::from_millis(20);

/// Why a gate could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LimiterInitError {
    /// `url_env`'s variable does not hold a URL the client reads (the URL may hold a
    /// password: the error names the variable, and what kind of fault it is).
    #[error("limiter.url_env: environment variable `{variable}` is not a Redis URL ({category})")]
    Url {
        /// The variable.
        variable: Arc<str>,
        /// The client's category of the fault.
        category: String,
    },
    /// No random source for this replica's id.
    #[error("limiter: no random replica id ({0})")]
    Random(getrandom::Error),
}

impl GlobalGate {
    /// The gate of provider `provider`, whose `limit` permits `config` counts in Redis. Only
    /// the URL is read here; nothing connects before the first attempt.
    pub(crate) fn new(
        provider: &str,
        config: &LimiterConfig,
        limit: u32,
    ) -> Result<Self, LimiterInitError> {
        let client =
            redis::Client::open(config.url.expose()).map_err(|e| LimiterInitError::Url {
                variable: config.url_env.clone(),
                category: e.category().to_owned(),
            })?;
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).map_err(LimiterInitError::Random)?;
        let replica = id.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let fallback = (config.on_unavailable == OnUnavailable::FailOpen)
            .then(|| Arc::new(Semaphore::new(config.local_limit as usize)));
        Ok(Self {
            shared: Arc::new(Shared {
                provider: provider.into(),
                key: config.key.clone(),
                born_key: format!("{}:born", config.key),
                limit,
                lease: config.lease,
                timeout: config.timeout,
                on_unavailable: config.on_unavailable,
                client,
                connection: Mutex::new(None),
                replica,
                next: AtomicU64::new(0),
                held: Mutex::new(HashSet::new()),
                released: Mutex::new(Vec::new()),
                release: Notify::new(),
                freed: Notify::new(),
                global_in_flight: AtomicU32::new(u32::MAX),
                seen: AtomicU64::new(0),
                reachable: AtomicBool::new(true),
                settling: AtomicBool::new(false),
                retry_at: Mutex::new(None),
                unavailable: AtomicU64::new(0),
                lost: AtomicU64::new(0),
                lost_members: Mutex::new(HashSet::new()),
                keeper: std::sync::Once::new(),
                stop: CancellationToken::new(),
            }),
            turn: tokio::sync::Mutex::new(()),
            fallback,
        })
    }

    /// Waits for a global permit, this replica's attempts in the order they asked. Bound
    /// the wait by dropping the future: nothing is left held.
    pub(crate) async fn acquire(&self) -> Result<Held, Refused> {
        self.start_keeper();
        let _turn = self.turn.lock().await;
        let mut pause = Duration::from_millis(1);
        loop {
            // Listening before asking: a release between the answer and the wait is not
            // missed.
            let freed = self.shared.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let asked = if self.shared.resting() {
                Err(Unreachable("it did not answer the last call".to_owned()))
            } else {
                self.shared.take().await
            };
            match asked {
                Ok(Some(lease)) => return Ok(Held::Lease(lease)),
                Ok(None) => {}
                Err(Unreachable(why)) => match self.unavailable(&why).await? {
                    Some(held) => return Ok(held),
                    // No local permit came free before Redis may be asked again: ask it.
                    None => continue,
                },
            }
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// What `on_unavailable` gives an attempt while Redis does not answer: a refusal, a
    /// permit of this replica alone, or (`None`) nothing before Redis may be asked again.
    async fn unavailable(&self, why: &str) -> Result<Option<Held>, Refused> {
        let shared = &self.shared;
        if shared.reachable.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                provider = %shared.provider,
                policy = match shared.on_unavailable {
                    OnUnavailable::FailClosed => "fail_closed",
                    OnUnavailable::FailOpen => "fail_open",
                },
                error = why,
                "the limiter's Redis is unreachable"
            );
        }
        let Some(local) = &self.fallback else {
            shared.unavailable.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::Unavailable);
        };
        let ask_again =
            lock(&shared.retry_at).unwrap_or_else(|| tokio::time::Instant::now() + RETRY_AFTER);
        tokio::select! {
            // The semaphore is never closed.
            permit = local.clone().acquire_owned() => {
                let permit = permit.map_err(|_| Refused::Unavailable)?;
                shared.unavailable.fetch_add(1, Ordering::Relaxed);
                Ok(Some(Held::Local(permit, shared.register_later())))
            }
            () = tokio::time::sleep_until(ask_again) => Ok(None),
        }
    }

    /// Removes at once the members this replica released, rather than leaving them to the
    /// keeper (or, at exit, to their leases' end).
    pub(crate) async fn flush(&self) {
        self.shared.give_back().await;
    }

    /// What the limiter says now.
    pub(crate) fn status(&self) -> LimiterStatus {
        let shared = &self.shared;
        let global = shared.global_in_flight.load(Ordering::Acquire);
        LimiterStatus {
            global_in_flight: (global != u32::MAX).then_some(global),
            reachable: shared.reachable.load(Ordering::Acquire),
            unavailable: shared.unavailable.load(Ordering::Relaxed),
            lost: shared.lost.load(Ordering::Relaxed),
        }
    }

    /// Starts the keeper with the first attempt (inside the runtime, which a gate made at
    /// start-up may not be).
    fn start_keeper(&self) {
        self.shared.keeper.call_once(|| {
            let shared = self.shared.clone();
            #[expect(
                clippy::disallowed_methods,
                reason = "the keeper lives as long as its gate, whose drop stops it"
            )]
            tokio::spawn(shared.keep());
        });
    }
}

impl Drop for GlobalGate {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}
