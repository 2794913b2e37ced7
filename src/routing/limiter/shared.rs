//! What a gate and its keeper share: the connection to Redis, this replica's members of the
//! set, and one take of a permit (the `TAKE` script, `scripts.rs`).

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use super::scripts;
use crate::config::OnUnavailable;

/// How long attempts refrain from asking Redis after a call failed.
pub(super) const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Redis did not answer, or answered with an error.
#[derive(Debug)]
pub(super) struct Unreachable(pub(super) String);

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) provider: Arc<str>,
    pub(super) key: Arc<str>,
    /// When the permits' set was (re)born (the scripts' `KEYS[2]`).
    pub(super) born_key: String,
    pub(super) limit: u32,
    pub(super) lease: Duration,
    pub(super) timeout: Duration,
    pub(super) on_unavailable: OnUnavailable,
    pub(super) client: redis::Client,
    /// Made on first use, and made anew after a call that got no answer: the manager
    /// reconnects by itself only when its socket fails, and a half-open one never does.
    pub(super) connection: Mutex<Option<ConnectionManager>>,
    /// This process's name in the set: every member starts with it.
    pub(super) replica: String,
    pub(super) next: AtomicU64,
    /// Members this replica holds: the keeper renews them.
    pub(super) held: Mutex<HashSet<String>>,
    /// Members released here, for the keeper to remove.
    pub(super) released: Mutex<Vec<String>>,
    /// Wakes the keeper: something was released.
    pub(super) release: Notify,
    /// Wakes the head of this replica's turn: a permit was released here.
    pub(super) freed: Notify,
    /// Permits held across every replica, as last read (`u32::MAX`: not read yet).
    pub(super) global_in_flight: AtomicU32,
    /// The highest generation of the set this replica has seen: a set behind it lost writes.
    pub(super) seen: AtomicU64,
    pub(super) reachable: AtomicBool,
    /// Whether the set was last seen settling (it has been said).
    pub(super) settling: AtomicBool,
    /// After a call that failed, attempts do not ask Redis again before this: each would
    /// wait out the timeout. The keeper keeps asking meanwhile.
    pub(super) retry_at: Mutex<Option<tokio::time::Instant>>,
    /// Attempts refused, or admitted locally, because Redis was unreachable.
    pub(super) unavailable: AtomicU64,
    /// Leases that ended unrenewed while their attempts ran, and could not be taken back.
    pub(super) lost: AtomicU64,
    /// Those still lost at the last renewal, so each is counted once.
    pub(super) lost_members: Mutex<HashSet<String>>,
    /// Leases taken in a block for the attempts waiting behind the one that asked, each
    /// taken by the next in turn; those whose attempts left are released (`trim_spares`).
    pub(super) spare: Mutex<VecDeque<Lease>>,
    pub(super) keeper: std::sync::Once,
    pub(super) stop: CancellationToken,
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
    pub(super) member: String,
    pub(super) shared: Arc<Shared>,
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

impl Shared {
    /// The connection (it connects on its first call).
    pub(super) fn connection(&self) -> Result<ConnectionManager, Unreachable> {
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
    pub(super) async fn within<T>(
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
    pub(super) async fn run<T: redis::FromRedisValue>(
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
    pub(super) fn settle(&self) -> Duration {
        self.lease / 3 + self.timeout
    }

    /// The scripts' first arguments: the limit, the lease, the settling time and the
    /// generation this replica has seen.
    pub(super) fn args(&self) -> Vec<String> {
        vec![
            self.limit.to_string(),
            self.lease.as_millis().to_string(),
            self.settle().as_millis().to_string(),
            self.seen.load(Ordering::Acquire).to_string(),
        ]
    }

    /// A script answered with the set's `generation`.
    pub(super) fn saw(&self, generation: i64) {
        self.seen
            .fetch_max(u64::try_from(generation).unwrap_or(0), Ordering::AcqRel);
    }

    /// A take found the set settling for `left` more ms (0: settled): said once per
    /// settling, as the wait it explains begins.
    pub(super) fn settling(&self, left: i64) {
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
    pub(super) fn resting(&self) -> bool {
        lock(&self.retry_at).is_some_and(|at| tokio::time::Instant::now() < at)
    }

    /// A member no other permit has had: this replica's id and its count.
    pub(super) fn new_member(&self) -> String {
        format!(
            "{}:{}",
            self.replica,
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// A member for an attempt admitted without Redis: held, so the keeper's next renewal
    /// that Redis answers adds it (or counts it lost when the gate is full).
    pub(super) fn register_later(self: &Arc<Self>) -> Lease {
        let member = self.new_member();
        lock(&self.held).insert(member.clone());
        Lease {
            member,
            shared: self.clone(),
        }
    }

    /// Up to `want` leases, as many as fit under the limit across every replica (none when
    /// the gate is full).
    pub(super) async fn take(self: &Arc<Self>, want: usize) -> Result<Vec<Lease>, Unreachable> {
        let mut args = self.args();
        args.push(want.to_string());
        args.extend((0..want).map(|_| self.new_member()));
        // Released members ride along, so the permit just freed here is free for this take.
        args.extend(std::mem::take(&mut *lock(&self.released)));
        // Dropped before its answer, or answered with an error (the script may still run
        // after a timeout), the take's members and the released ones go to the keeper.
        let mut asking = Asking {
            members: Some(&args[5..]),
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
        let taken = usize::try_from(taken).unwrap_or(0).min(want);
        let members = args.drain(5..5 + taken);
        let mut held = lock(&self.held);
        held.extend(members.as_slice().iter().cloned());
        drop(held);
        Ok(members
            .map(|member| Lease {
                member,
                shared: self.clone(),
            })
            .collect())
    }

    /// Releases the spare leases beyond the `waiting` attempts that may still take them.
    pub(super) fn trim_spares(&self, waiting: usize) {
        let excess = {
            let mut spare = lock(&self.spare);
            let keep = spare.len().min(waiting);
            spare.split_off(keep)
        };
        // Dropped outside the lock: each drop gives its member back.
        drop(excess);
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

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
