//! A provider's `max_concurrency` counted across every replica, in Redis
//! (`providers.NAME.limiter = { kind = "redis", ... }`).
//!
//! The permits are one sorted set: a member per held permit (this replica's id and a count),
//! scored by when its lease ends. Taking one is a script that drops the ended leases and adds
//! a member only while fewer than the limit are held, with Redis's own clock, so replicas
//! whose clocks disagree still agree on the count. A keeper task per gate renews this
//! replica's leases every third of the lease and gives released ones back at once; a replica
//! that dies gives its permits back when their leases end. The set itself expires a day
//! after its last write. A set that is new, that Redis lost, or that may be behind what
//! was acknowledged (another server process wrote it last: a restart, a failover, a snapshot
//! restored; or its generation is behind what this replica saw) gives no permit until every
//! live replica has had the time to renew its own into it (a third of the lease, plus the
//! timeout): the attempts still running on it count again before others start (`scripts.rs`).
//!
//! This replica's attempts take turns at the gate in the order they asked (one polls Redis
//! while the others wait behind it); a permit released here wakes the head at once, one
//! released on another replica is seen by the head's next poll, at most [`MAX_PAUSE`] later.
//!
//! When Redis does not answer within `timeout`, `on_unavailable` decides: `fail_closed`
//! refuses the attempt as a full queue does (the plan's next target is tried), `fail_open`
//! admits it within `local_limit` permits of this replica alone. The first call that fails
//! logs a warning, the first that succeeds again logs that Redis is back; each refusal or
//! local admission is counted (`limiter_unavailable_total`).

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::{LimiterConfig, OnUnavailable};

mod scripts;

/// How long attempts refrain from asking Redis after a call failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// How soon a renewal that failed is tried again (on a fresh connection): well within the
/// `timeout` a settling set allows beyond a third of the lease.
const RENEW_AGAIN: Duration = Duration::from_millis(100);

/// The longest pause between two polls of a full gate.
pub(crate) const MAX_PAUSE: Duration = Duration::from_millis(20);

/// Redis did not answer, or answered with an error.
#[derive(Debug)]
struct Unreachable(String);

/// The global gate of one provider.
#[derive(Debug)]
pub(crate) struct GlobalGate {
    shared: Arc<Shared>,
    /// This replica's attempts take their turn at the gate in order.
    turn: tokio::sync::Mutex<()>,
    /// `fail_open`: the permits this replica may hold alone while Redis is unreachable.
    fallback: Option<Arc<Semaphore>>,
}

#[derive(Debug)]
struct Shared {
    provider: Arc<str>,
    key: Arc<str>,
    /// When the permits' set was (re)born (the scripts' `KEYS[2]`).
    born_key: String,
    limit: u32,
    lease: Duration,
    timeout: Duration,
    on_unavailable: OnUnavailable,
    client: redis::Client,
    /// Made on first use, and made anew after a call that got no answer: the manager
    /// reconnects by itself only when its socket fails, and a half-open one never does.
    connection: Mutex<Option<ConnectionManager>>,
    /// This process's name in the set: every member starts with it.
    replica: String,
    next: AtomicU64,
    /// Members this replica holds: the keeper renews them.
    held: Mutex<HashSet<String>>,
    /// Members released here, for the keeper to remove.
    released: Mutex<Vec<String>>,
    /// Wakes the keeper: something was released.
    release: Notify,
    /// Wakes the head of this replica's turn: a permit was released here.
    freed: Notify,
    /// Permits held across every replica, as last read (`u32::MAX`: not read yet).
    global_in_flight: AtomicU32,
    /// The highest generation of the set this replica has seen: a set behind it lost writes.
    seen: AtomicU64,
    reachable: AtomicBool,
    /// Whether the set was last seen settling (it has been said).
    settling: AtomicBool,
    /// After a call that failed, attempts do not ask Redis again before this: each would
    /// wait out the timeout. The keeper keeps asking meanwhile.
    retry_at: Mutex<Option<tokio::time::Instant>>,
    /// Attempts refused, or admitted locally, because Redis was unreachable.
    unavailable: AtomicU64,
    /// Leases that ended unrenewed while their attempts ran, and could not be taken back.
    lost: AtomicU64,
    /// Those still lost at the last renewal, so each is counted once.
    lost_members: Mutex<HashSet<String>>,
    keeper: std::sync::Once,
    stop: CancellationToken,
}

/// A permit of the global gate, kept for its drop, which gives it back.
#[derive(Debug)]
#[expect(dead_code, reason = "each variant is held for its drop")]
pub(crate) enum Held {
    /// A lease in Redis.
    Lease(Lease),
    /// `fail_open`: a permit of this replica alone, while Redis was unreachable, with the
    /// member the keeper registers in Redis once it answers again, so the attempt counts.
    Local(OwnedSemaphorePermit, Lease),
}

/// One member of the set, released on drop.
#[derive(Debug)]
pub(crate) struct Lease {
    member: String,
    shared: Arc<Shared>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let member = std::mem::take(&mut self.member);
        lock(&self.shared.held).remove(&member);
        lock(&self.shared.released).push(member);
        self.shared.release.notify_one();
        self.shared.freed.notify_waiters();
    }
}

/// What the limiter says for `GetRuntimeMetadata` and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LimiterStatus {
    /// Permits held across every replica, as last read from Redis (`None` before the first
    /// read).
    pub(crate) global_in_flight: Option<u32>,
    /// Whether Redis answered the last call.
    pub(crate) reachable: bool,
    /// Attempts refused (`fail_closed`), or admitted by this replica alone (`fail_open`),
    /// because Redis was unreachable.
    pub(crate) unavailable: u64,
    /// Leases that ended unrenewed while their attempts ran, taken by others meanwhile.
    pub(crate) lost: u64,
}

/// Why the gate gave no permit.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Redis is unreachable and the policy is `fail_closed`.
    Unavailable,
}

impl GlobalGate {
    /// The gate of provider `provider`, whose `limit` permits `config` counts in Redis. Only
    /// the URL is read here; nothing connects before the first attempt.
    pub(crate) fn new(provider: &str, config: &LimiterConfig, limit: u32) -> Result<Self, String> {
        let client = redis::Client::open(config.url.expose()).map_err(|e| {
            // The URL may hold a password: the error names the variable, not the value.
            format!(
                "limiter.url_env: environment variable `{}` is not a Redis URL ({})",
                config.url_env,
                e.category()
            )
        })?;
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).map_err(|e| format!("limiter: no random replica id ({e})"))?;
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

impl Shared {
    /// The connection (it connects on its first call).
    fn connection(&self) -> Result<ConnectionManager, Unreachable> {
        let mut connection = lock(&self.connection);
        if let Some(manager) = &*connection {
            return Ok(manager.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_max_delay(self.timeout);
        let manager = ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            .map_err(|e| Unreachable(e.to_string()))?;
        Ok(connection.insert(manager).clone())
    }

    /// `call` within the timeout; a call that fails drops the connection, so the next one
    /// connects anew.
    async fn within<T>(
        &self,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Unreachable> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                // Whatever failed (a timeout, a dropped socket, a demoted primary answering
                // READONLY), the next call starts on a fresh connection, resolving the name
                // again.
                *lock(&self.connection) = None;
                Err(Unreachable(e.to_string()))
            }
            Err(_) => {
                *lock(&self.connection) = None;
                Err(Unreachable(format!("no answer within {:?}", self.timeout)))
            }
        }
    }

    /// Runs `script` within the timeout.
    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        args: &[String],
    ) -> Result<T, Unreachable> {
        let answer = async {
            let mut connection = self.connection()?;
            let mut invocation = script.key(&*self.key);
            invocation.key(&*self.born_key);
            for arg in args {
                invocation.arg(arg);
            }
            self.within(invocation.invoke_async::<T>(&mut connection))
                .await
        }
        .await;
        match &answer {
            Ok(_) => {
                *lock(&self.retry_at) = None;
                if !self.reachable.swap(true, Ordering::AcqRel) {
                    tracing::info!(provider = %self.provider, "the limiter's Redis answers again");
                }
            }
            Err(_) => {
                *lock(&self.retry_at) = Some(tokio::time::Instant::now() + RETRY_AFTER);
            }
        }
        answer
    }

    /// How long a new (or lost) set of permits gives none: every live replica renews within a
    /// third of the lease, each renewal within the timeout.
    fn settle(&self) -> Duration {
        self.lease / 3 + self.timeout
    }

    /// The scripts' first arguments: the limit, the lease, the settling time and the
    /// generation this replica has seen.
    fn args(&self) -> Vec<String> {
        vec![
            self.limit.to_string(),
            self.lease.as_millis().to_string(),
            self.settle().as_millis().to_string(),
            self.seen.load(Ordering::Acquire).to_string(),
        ]
    }

    /// A script answered with the set's `generation`.
    fn saw(&self, generation: i64) {
        self.seen
            .fetch_max(u64::try_from(generation).unwrap_or(0), Ordering::AcqRel);
    }

    /// A take found the set settling for `left` more ms (0: settled): said once per
    /// settling, as the wait it explains begins.
    fn settling(&self, left: i64) {
        let settling = left > 0;
        if settling && !self.settling.swap(true, Ordering::AcqRel) {
            tracing::info!(
                provider = %self.provider,
                key = %self.key,
                wait_ms = left,
                "the limiter's set of permits in Redis is new or lost writes: no permit until \
                 the running attempts are renewed into it"
            );
        } else if !settling {
            self.settling.store(false, Ordering::Release);
        }
    }

    /// Whether the last call failed within [`RETRY_AFTER`].
    fn resting(&self) -> bool {
        lock(&self.retry_at).is_some_and(|at| tokio::time::Instant::now() < at)
    }

    /// A member no other permit has had: this replica's id and its count.
    fn new_member(&self) -> String {
        format!(
            "{}:{}",
            self.replica,
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// A member for an attempt admitted without Redis: held, so the keeper's next renewal
    /// that Redis answers adds it (or counts it lost when the gate is full).
    fn register_later(self: &Arc<Self>) -> Lease {
        let member = self.new_member();
        lock(&self.held).insert(member.clone());
        Lease {
            member,
            shared: self.clone(),
        }
    }

    /// A lease if fewer than the limit are held across every replica; `None` if the gate is
    /// full.
    async fn take(self: &Arc<Self>) -> Result<Option<Lease>, Unreachable> {
        let member = self.new_member();
        // Released members ride along, so the permit just freed here is free for this take.
        let released = std::mem::take(&mut *lock(&self.released));
        let mut args = self.args();
        args.push(member);
        args.extend(released);
        // Dropped before its answer, or answered with an error (the script may still run
        // after a timeout), the take's member and the released ones go to the keeper.
        let mut asking = Asking {
            members: Some(&args[4..]),
            shared: self,
        };
        let answer = self
            .run::<(i64, i64, i64, i64)>(scripts::take(), &args)
            .await;
        if answer.is_ok() {
            asking.members = None;
        }
        drop(asking);
        let (taken, held, generation, settling) = answer?;
        self.saw(generation);
        self.settling(settling);
        self.global_in_flight.store(
            u32::try_from(held).unwrap_or(u32::MAX - 1),
            Ordering::Release,
        );
        if taken != 1 {
            return Ok(None);
        }
        let member = args.swap_remove(4);
        lock(&self.held).insert(member.clone());
        Ok(Some(Lease {
            member,
            shared: self.clone(),
        }))
    }

    /// Renews this replica's leases every third of the lease (a renewal that failed is tried
    /// again after [`RENEW_AGAIN`]: a set that settles waits for it), and removes released ones
    /// at once, until the gate is dropped; then gives back what is still held.
    async fn keep(self: Arc<Self>) {
        let every = self.lease / 3;
        let mut renew_at = tokio::time::Instant::now() + every;
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = self.release.notified() => {}
                () = tokio::time::sleep_until(renew_at) => {
                    let renewed = self.renew().await;
                    renew_at = tokio::time::Instant::now()
                        + if renewed { every } else { every.min(RENEW_AGAIN) };
                }
            }
            self.give_back().await;
        }
        lock(&self.released).extend(lock(&self.held).drain());
        self.give_back().await;
    }

    /// Renews the held leases: whether Redis answered.
    async fn renew(&self) -> bool {
        let mut args = self.args();
        args.extend(lock(&self.held).iter().cloned());
        match self
            .run::<(i64, Vec<String>, i64)>(scripts::renew(), &args)
            .await
        {
            Ok((held, lost, generation)) => {
                self.saw(generation);
                self.global_in_flight.store(
                    u32::try_from(held).unwrap_or(u32::MAX - 1),
                    Ordering::Release,
                );
                // Each lease is counted lost once, though every renewal tries it again
                // until its attempt ends.
                let mut known = lock(&self.lost_members);
                known.retain(|member| lost.contains(member));
                let new = lost
                    .iter()
                    .filter(|member| known.insert((*member).clone()))
                    .count();
                drop(known);
                if new > 0 {
                    let lost = new;
                    self.lost
                        .fetch_add(u64::try_from(lost).unwrap_or(0), Ordering::Relaxed);
                    tracing::warn!(
                        provider = %self.provider,
                        lost,
                        "leases ended before they were renewed and the gate is full: \
                         this replica is over its share until those attempts end"
                    );
                }
            }
            Err(Unreachable(why)) => {
                if self.reachable.swap(false, Ordering::AcqRel) {
                    tracing::warn!(provider = %self.provider, error = why, "the limiter's Redis is unreachable");
                }
                return false;
            }
        }
        true
    }

    /// Removes the released members; those Redis did not take are tried again on the next
    /// turn (and a lease nobody removes ends by itself).
    async fn give_back(&self) {
        let released = std::mem::take(&mut *lock(&self.released));
        if released.is_empty() {
            return;
        }
        let removed = match self.connection() {
            Ok(mut connection) => {
                let remove = redis::cmd("ZREM").arg(&*self.key).arg(&released).to_owned();
                self.within(remove.query_async::<i64>(&mut connection))
                    .await
                    .is_ok()
            }
            Err(_) => false,
        };
        if !removed {
            lock(&self.released).extend(released);
        }
    }
}

/// A take without its answer: dropped before it came, or failed (a script may still run after
/// its timeout), its member and the released ones it carried go to the keeper to remove.
struct Asking<'a> {
    members: Option<&'a [String]>,
    shared: &'a Shared,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        if let Some(members) = self.members.take() {
            lock(&self.shared.released).extend_from_slice(members);
            self.shared.release.notify_one();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
