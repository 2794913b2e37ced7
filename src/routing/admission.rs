//! Per-provider admission: `max_concurrency` permits and a bounded FIFO queue. A full queue
//! rejects at once with a typed reason; a waiter that is dropped (cancelled, expired) leaves
//! the queue at once; a permit is released when its holder drops it, on every path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The admission gate of one provider.
#[derive(Debug)]
pub struct Admission {
    permits: Arc<Semaphore>,
    max_concurrency: u32,
    queue_capacity: u32,
    queued: AtomicU32,
}

/// The right to run one attempt; released on drop.
#[derive(Debug)]
pub struct Permit {
    _permit: OwnedSemaphorePermit,
}

/// The queue was full: try another target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("admission queue is full ({capacity} waiting)")]
pub struct AdmissionRejected {
    /// The queue's capacity.
    pub capacity: u32,
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
        }
    }

    /// Waits for a permit in FIFO order, or fails at once when the queue is full. Bound the
    /// wait by dropping the future.
    pub async fn acquire(&self) -> Result<Permit, AdmissionRejected> {
        if let Some(permit) = self.try_acquire() {
            return Ok(permit);
        }
        let rejected = AdmissionRejected {
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
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| rejected)?;
        Ok(Permit { _permit: permit })
    }

    /// A permit if one is free now, without queueing. Released permits go to queued
    /// waiters first, so this never jumps the queue.
    fn try_acquire(&self) -> Option<Permit> {
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        Some(Permit { _permit: permit })
    }

    /// Attempts running now.
    pub fn in_flight(&self) -> u32 {
        let available = u32::try_from(self.permits.available_permits()).unwrap_or(u32::MAX);
        self.max_concurrency.saturating_sub(available)
    }

    /// Attempts waiting now.
    pub fn queued(&self) -> u32 {
        self.queued.load(Ordering::Acquire)
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
            Some(AdmissionRejected { capacity: 1 })
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
