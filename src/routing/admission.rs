//! Per-provider admission: `max_concurrency` permits and, in front of them, one bounded queue
//! per admission class (interactive, standard, batch). A permit that comes free goes to the
//! waiter of the highest class, first come first served within a class; a waiter rises one
//! class per `queue_aging` it has waited, so none is starved: a batch attempt that has waited
//! twice the aging ranks with interactive ones that just arrived, and the older goes first. A
//! full class rejects at once with a typed reason; a waiter that is dropped (cancelled,
//! expired) leaves its queue at once; a permit is released when its holder drops it, on every
//! path. With a global limiter (`limiter.rs`), an attempt that holds this replica's permit
//! then takes a global one, so `max_concurrency` holds across replicas while each keeps its
//! own queues.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::limiter::{GlobalGate, Held, LimiterStatus, Refused};
use crate::execution::Priority;

/// The admission gate of one provider.
#[derive(Debug)]
pub struct Admission {
    shared: Arc<Shared>,
    /// The permits of every replica, when `max_concurrency` is global.
    global: Option<GlobalGate>,
    /// Attempts holding this replica's permit while they wait for a global one.
    waiting_global: AtomicU32,
}

#[derive(Debug)]
struct Shared {
    max_concurrency: u32,
    /// Waiters each class may hold, by [`Priority::index`].
    capacity: [u32; 3],
    aging: Duration,
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    /// Permits held.
    in_use: u32,
    /// The next waiter's number: its place in line.
    next: u64,
    /// Each class's waiters, by number (so oldest first), by [`Priority::index`].
    waiting: [BTreeMap<u64, Waiter>; 3],
}

#[derive(Debug)]
struct Waiter {
    since: Instant,
    /// Where its permit is handed over.
    grant: oneshot::Sender<()>,
}

/// The right to run one attempt; released on drop.
#[derive(Debug)]
pub struct Permit {
    _local: LocalPermit,
    _global: Option<Held>,
}

/// One of this replica's permits; handed to the next waiter, or freed, on drop.
#[derive(Debug)]
struct LocalPermit(Arc<Shared>);

impl Drop for LocalPermit {
    fn drop(&mut self) {
        self.0.release(&mut self.0.lock());
    }
}

/// The attempts of one class waiting for a permit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waiting {
    /// How many.
    pub queued: u32,
    /// How long the one at the front has waited (zero when none waits).
    pub oldest: Duration,
}

/// No permit for this attempt: try another target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionRejected {
    /// The attempt's class's queue was full.
    #[error("admission queue is full ({capacity} {} waiting)", priority.as_str())]
    QueueFull {
        /// The class's queue capacity.
        capacity: u32,
        /// The attempt's class.
        priority: Priority,
    },
    /// The global limiter's Redis did not answer, and its policy is `fail_closed`.
    #[error("the global limiter's Redis is unreachable (on_unavailable = \"fail_closed\")")]
    LimiterUnavailable,
}

/// Holds one global-wait slot; frees it on drop, including when the wait is cancelled.
struct Slot<'a>(&'a AtomicU32);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A waiter's place in its queue, until it is handed a permit. Dropped before then (a
/// cancelled or expired attempt), it leaves the queue; dropped after a permit was handed to
/// it but before it took it, it passes the permit on.
struct Wait {
    shared: Arc<Shared>,
    class: usize,
    number: u64,
    granted: oneshot::Receiver<()>,
    taken: bool,
}

impl Drop for Wait {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        let mut queue = self.shared.lock();
        let waiting = queue.waiting[self.class].remove(&self.number).is_some();
        if !waiting && self.granted.try_recv().is_ok() {
            self.shared.release(&mut queue);
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Every change under the lock leaves the queue whole, so a poisoned one is usable.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A permit comes back: it goes to the waiter that ranks first, else it is free.
    fn release(&self, queue: &mut Queue) {
        if queue.is_empty() {
            queue.in_use = queue.in_use.saturating_sub(1);
            return;
        }
        let now = Instant::now();
        while let Some(class) = queue.first(now, self.aging) {
            let Some((_, waiter)) = queue.waiting[class].pop_first() else {
                break;
            };
            // A waiter leaves its queue before its receiver goes, so this only fails for
            // one whose gate is being dropped; the next one is tried.
            if waiter.grant.send(()).is_ok() {
                return;
            }
        }
        queue.in_use = queue.in_use.saturating_sub(1);
    }
}

impl Queue {
    /// The class whose first waiter gets the next permit: the highest rank, where a waiter
    /// ranks by its class plus one per `aging` it has waited; on a tie, the longest waiting.
    fn first(&self, now: Instant, aging: Duration) -> Option<usize> {
        let aging = aging.as_nanos().max(1);
        self.waiting
            .iter()
            .enumerate()
            .filter_map(|(class, waiters)| {
                let (number, waiter) = waiters.first_key_value()?;
                let waited = now.saturating_duration_since(waiter.since).as_nanos();
                let rank = (Priority::ALL.len() - class) as u128 + waited / aging;
                // Highest rank first, then lowest number (the oldest).
                Some(((rank, std::cmp::Reverse(*number)), class))
            })
            .max_by_key(|(key, _)| *key)
            .map(|(_, class)| class)
    }

    fn is_empty(&self) -> bool {
        self.waiting.iter().all(BTreeMap::is_empty)
    }
}

impl Admission {
    /// A gate with `max_concurrency` permits, room for `capacity` waiters of each class (by
    /// [`Priority::index`]), and waiters rising one class per `aging`.
    pub fn new(max_concurrency: u32, capacity: [u32; 3], aging: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                max_concurrency,
                capacity,
                aging,
                queue: Mutex::new(Queue::default()),
            }),
            global: None,
            waiting_global: AtomicU32::new(0),
        }
    }

    /// The gate with `max_concurrency` counted across replicas by `global` as well.
    pub(crate) fn with_global(mut self, global: GlobalGate) -> Self {
        self.global = Some(global);
        self
    }

    /// Waits for a permit in `priority`'s turn, or fails at once when its queue is full.
    /// Bound the wait by dropping the future.
    pub async fn acquire(&self, priority: Priority) -> Result<Permit, AdmissionRejected> {
        let local = self.acquire_local(priority).await?;
        let Some(global) = &self.global else {
            return Ok(Permit {
                _local: local,
                _global: None,
            });
        };
        self.waiting_global.fetch_add(1, Ordering::AcqRel);
        let _waiting = Slot(&self.waiting_global);
        // Boxed: the global wait is a large future, and the local path (most providers)
        // should not carry its size in every attempt's.
        match Box::pin(global.acquire()).await {
            Ok(held) => Ok(Permit {
                _local: local,
                _global: Some(held),
            }),
            Err(Refused::Unavailable) => Err(AdmissionRejected::LimiterUnavailable),
        }
    }

    /// This replica's permit: at once if one is free and nobody waits, else in turn.
    async fn acquire_local(&self, priority: Priority) -> Result<LocalPermit, AdmissionRejected> {
        let class = priority.index();
        let mut wait = {
            let shared = &self.shared;
            let mut queue = shared.lock();
            if queue.in_use < shared.max_concurrency && queue.is_empty() {
                queue.in_use += 1;
                return Ok(LocalPermit(shared.clone()));
            }
            let capacity = shared.capacity[class];
            if queue.waiting[class].len() >= capacity as usize {
                return Err(AdmissionRejected::QueueFull { capacity, priority });
            }
            let number = queue.next;
            queue.next += 1;
            let (grant, granted) = oneshot::channel();
            let since = Instant::now();
            queue.waiting[class].insert(number, Waiter { since, grant });
            Wait {
                shared: shared.clone(),
                class,
                number,
                granted,
                taken: false,
            }
        };
        let granted = (&mut wait.granted).await;
        wait.taken = true;
        match granted {
            Ok(()) => Ok(LocalPermit(self.shared.clone())),
            // Never: the sender stays in the queue until it is used, and this wait keeps the
            // queue alive. Answered as a full queue rather than a panic.
            Err(_) => Err(AdmissionRejected::QueueFull {
                capacity: self.shared.capacity[class],
                priority,
            }),
        }
    }

    /// Attempts of this replica running now.
    pub fn in_flight(&self) -> u32 {
        self.shared
            .lock()
            .in_use
            .saturating_sub(self.waiting_global.load(Ordering::Acquire))
    }

    /// Attempts of this replica waiting now: for its permit, or for a global one.
    pub fn queued(&self) -> u32 {
        let waiting: usize = self.shared.lock().waiting.iter().map(BTreeMap::len).sum();
        u32::try_from(waiting)
            .unwrap_or(u32::MAX)
            .saturating_add(self.waiting_global.load(Ordering::Acquire))
    }

    /// Attempts of this replica waiting for its permit now, and how long the oldest of them
    /// has waited, per class (by [`Priority::index`]).
    pub fn queued_by_priority(&self) -> [Waiting; 3] {
        let queue = self.shared.lock();
        let now = Instant::now();
        std::array::from_fn(|class| {
            let waiters = &queue.waiting[class];
            Waiting {
                queued: u32::try_from(waiters.len()).unwrap_or(u32::MAX),
                oldest: waiters.first_key_value().map_or(Duration::ZERO, |(_, w)| {
                    now.saturating_duration_since(w.since)
                }),
            }
        })
    }

    /// Gives the global limiter back what this replica released and it has not yet taken
    /// (within its timeout).
    pub(crate) async fn flush(&self) {
        if let Some(global) = &self.global {
            global.flush().await;
        }
    }

    /// The global limiter's figures, when there is one.
    pub(crate) fn limiter(&self) -> Option<LimiterStatus> {
        self.global.as_ref().map(GlobalGate::status)
    }

    /// Configured permits.
    pub fn max_concurrency(&self) -> u32 {
        self.shared.max_concurrency
    }

    /// Configured queue room, per class (by [`Priority::index`]).
    pub fn queue_capacity(&self) -> [u32; 3] {
        self.shared.capacity
    }
}

#[cfg(test)]
mod tests;
