//! Per-provider admission: `max_concurrency` permits and a bounded FIFO queue. A full queue
//! rejects at once with a typed reason; a waiter that is dropped (cancelled, expired) leaves
//! the queue at once; a permit is released when its holder drops it, on every path. With a
//! global limiter (`limiter.rs`), an attempt that holds this replica's permit then takes a
//! global one, so `max_concurrency` holds across replicas while each keeps its own queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limiter::{GlobalGate, Held, LimiterStatus, Refused};

/// The admission gate of one provider.
#[derive(Debug)]
pub struct Admission {
    permits: Arc<Semaphore>,
    max_concurrency: u32,
    queue_capacity: u32,
    queued: AtomicU32,
    /// The permits of every replica, when `max_concurrency` is global.
    global: Option<GlobalGate>,
    /// Attempts holding this replica's permit while they wait for a global one.
    waiting_global: AtomicU32,
}

/// The right to run one attempt; released on drop.
#[derive(Debug)]
pub struct Permit {
    _permit: OwnedSemaphorePermit,
    _global: Option<Held>,
}

/// No permit for this attempt: try another target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionRejected {
    /// The queue was full.
    #[error("admission queue is full ({capacity} waiting)")]
    QueueFull {
        /// The queue's capacity.
        capacity: u32,
    },
    /// The global limiter's Redis did not answer, and its policy is `fail_closed`.
    #[error("the global limiter's Redis is unreachable (on_unavailable = \"fail_closed\")")]
    LimiterUnavailable,
}

/// Holds one queue slot while waiting; frees it on drop, including when the wait is cancelled.
struct QueueSlot<'a>(&'a AtomicU32);

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Admission {
    /// A gate with `max_concurrency` permits and room for `queue_capacity` waiters.
    pub fn new(max_concurrency: u32, queue_capacity: u32) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max_concurrency as usize)),
            max_concurrency,
            queue_capacity,
            queued: AtomicU32::new(0),
            global: None,
            waiting_global: AtomicU32::new(0),
        }
    }

    /// The gate with `max_concurrency` counted across replicas by `global` as well.
    pub(crate) fn with_global(mut self, global: GlobalGate) -> Self {
        self.global = Some(global);
        self
    }

    /// Waits for a permit in FIFO order, or fails at once when the queue is full. Bound the
    /// wait by dropping the future.
    pub async fn acquire(&self) -> Result<Permit, AdmissionRejected> {
        let local = self.acquire_local().await?;
        let Some(global) = &self.global else {
            return Ok(Permit {
                _permit: local,
                _global: None,
            });
        };
        self.waiting_global.fetch_add(1, Ordering::AcqRel);
        let _waiting = QueueSlot(&self.waiting_global);
        // Boxed: the global wait is a large future, and the local path (most providers)
        // should not carry its size in every attempt's.
        match Box::pin(global.acquire()).await {
            Ok(held) => Ok(Permit {
                _permit: local,
                _global: Some(held),
            }),
            Err(Refused::Unavailable) => Err(AdmissionRejected::LimiterUnavailable),
        }
    }

    /// This replica's permit: at once if one is free, else after the waiters before it.
    async fn acquire_local(&self) -> Result<OwnedSemaphorePermit, AdmissionRejected> {
        if let Some(permit) = self.try_acquire() {
            return Ok(permit);
        }
        let rejected = AdmissionRejected::QueueFull {
            capacity: self.queue_capacity,
        };
        self.queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.queue_capacity).then_some(n + 1)
            })
            .map_err(|_| rejected)?;
        let _slot = QueueSlot(&self.queued);
        // The semaphore is never closed, so acquiring only fails if it were; report that as a
        // rejection rather than a panic.
        self.permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| rejected)
    }

    /// A permit if one is free now, without queueing. Released permits go to queued
    /// waiters first, so this never jumps the queue.
    fn try_acquire(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }

    /// Attempts of this replica running now.
    pub fn in_flight(&self) -> u32 {
        let available = u32::try_from(self.permits.available_permits()).unwrap_or(u32::MAX);
        self.max_concurrency
            .saturating_sub(available)
            .saturating_sub(self.waiting_global.load(Ordering::Acquire))
    }

    /// Attempts of this replica waiting now: for its permit, or for a global one.
    pub fn queued(&self) -> u32 {
        self.queued.load(Ordering::Acquire) + self.waiting_global.load(Ordering::Acquire)
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
        self.max_concurrency
    }

    /// Configured queue room.
    pub fn queue_capacity(&self) -> u32 {
        self.queue_capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn queues_in_order_and_rejects_when_full() {
        let gate = Admission::new(1, 1);
        let held = gate.acquire().await;
        assert!(held.is_ok());
        assert_eq!(gate.in_flight(), 1);

        let mut waiter = Box::pin(gate.acquire());
        // Poll once so the waiter takes the only queue slot.
        assert!(futures_util::poll!(waiter.as_mut()).is_pending());
        assert_eq!(gate.queued(), 1);
        assert_eq!(
            gate.acquire().await.err(),
            Some(AdmissionRejected::QueueFull { capacity: 1 })
        );

        drop(held);
        assert!(waiter.await.is_ok());
        assert_eq!(gate.queued(), 0);
        assert_eq!(gate.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_dropped_waiter_leaves_the_queue() {
        let gate = Admission::new(1, 4);
        let _held = gate.acquire().await;
        let mut waiter = Box::pin(gate.acquire());
        assert!(futures_util::poll!(waiter.as_mut()).is_pending());
        assert_eq!(gate.queued(), 1);
        drop(waiter);
        assert_eq!(gate.queued(), 0);
    }
}
