//! The gate itself: a replica's attempts take their turn at it, each asking Redis for a
//! permit (`shared.rs`), and what `on_unavailable` gives them while Redis does not answer.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
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
    /// Attempts waiting for their turn.
    queued: AtomicUsize,
    /// `fail_open`: the permits this replica may hold alone while Redis is unreachable.
    fallback: Option<Arc<Semaphore>>,
}

/// The most permits one take asks for: the head of the turn and those waiting behind it.
const BLOCK: usize = 64;

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
                spare: Mutex::new(VecDeque::new()),
                keeper: std::sync::Once::new(),
                stop: CancellationToken::new(),
            }),
            turn: tokio::sync::Mutex::new(()),
            queued: AtomicUsize::new(0),
            fallback,
        })
    }

    /// Waits for a global permit, this replica's attempts in the order they asked. Bound
    /// the wait by dropping the future: nothing is left held.
    ///
    /// The one at the head of the turn asks for a permit for itself and one for each attempt
    /// waiting behind it (up to [`BLOCK`]) in one round trip; those it gets wait as spares for
    /// the next in turn, so a busy replica asks Redis once per block of attempts rather than
    /// once per attempt, one after another. A spare whose attempt left is released.
    pub(crate) async fn acquire(&self) -> Result<Held, Refused> {
        self.start_keeper();
        let queued = Queued::new(&self.queued, &self.shared);
        let _turn = self.turn.lock().await;
        let spare = lock(&self.shared.spare).pop_front();
        drop(queued);
        if let Some(lease) = spare {
            return Ok(Held::Lease(lease));
        }
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
                let waiting = self.queued.load(Ordering::Acquire);
                let limit = usize::try_from(self.shared.limit).unwrap_or(usize::MAX);
                self.shared.take((1 + waiting).min(BLOCK).min(limit)).await
            };
            match asked {
                Ok(leases) => {
                    let mut leases = leases.into_iter();
                    if let Some(lease) = leases.next() {
                        lock(&self.shared.spare).extend(leases);
                        // Those that left while it asked take none.
                        self.shared.trim_spares(self.queued.load(Ordering::Acquire));
                        return Ok(Held::Lease(lease));
                    }
                }
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

#[cfg(test)]
impl GlobalGate {
    /// An attempt in line, counted as `acquire` counts one while it waits for its turn.
    pub(super) fn in_line(&self) -> Queued<'_> {
        Queued::new(&self.queued, &self.shared)
    }
}

impl Drop for GlobalGate {
    fn drop(&mut self) {
        // The spares first: released, they go back with what the keeper gives back as it
        // stops (and they no longer hold the shared state alive).
        self.shared.trim_spares(0);
        self.shared.stop.cancel();
    }
}

/// An attempt counted among those waiting for their turn while it waits. One that leaves
/// the line (its turn came and it took its spare, or it was dropped) releases the spares
/// beyond those still waiting.
pub(super) struct Queued<'a> {
    queued: &'a AtomicUsize,
    shared: &'a Shared,
}

impl<'a> Queued<'a> {
    fn new(queued: &'a AtomicUsize, shared: &'a Shared) -> Self {
        queued.fetch_add(1, Ordering::AcqRel);
        Self { queued, shared }
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        let waiting = self.queued.fetch_sub(1, Ordering::AcqRel) - 1;
        self.shared.trim_spares(waiting);
    }
}
