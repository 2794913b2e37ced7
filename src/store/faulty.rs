//! A store that wraps another and injects faults on request, to drive the runtime through the
//! paths a real store's failures take: a write that fails (and poisons the store, as a
//! journal's failed write or fsync does), a create that waits for I/O, a subscription the
//! store drops, an append held back until the test lets it through, a follow that fails.
//! With no fault set it is the store it wraps, and passes the conformance suite as that store
//! does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    reason = "the conformance suite's faulty store, built outside cfg(test) with it: its unwraps are its assertions"
)]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::Semaphore;

use super::{
    CancelRequests, ChangeSignal, Changes, Created, EventSource, EventStore, Fetch, Follower,
    NewExecution, StoreError, StoreFuture, StoreStats, Unavailable, UsageEntry,
};
use crate::execution::{Event, EventPayload, Execution, ExecutionId, ExecutionState};

/// Which faults to inject. The default injects none.
#[derive(Debug, Default)]
pub struct Faults {
    /// Writes (creates and appends, counted from 1) from this one on fail with
    /// `StoreError::Unavailable`, and the store reports itself failed from the first of them.
    pub fail_writes_from: Option<u64>,
    /// A create does its work at once, then its future stays pending this many polls, as a
    /// create that awaits I/O after the record exists: a caller that drops it then has
    /// stored an execution and registered nothing.
    pub create_pending_polls: u32,
    /// Every follower's wake-up is closed at once (its events stay readable): followers
    /// see `Closed`, as when the store lets an execution go.
    pub drop_subscriptions: bool,
    /// A batch holding `execution.routing` waits for a permit here before it is appended,
    /// so an execution stays `ACCEPTED` until the test adds one.
    pub hold_routing: Option<Arc<Semaphore>>,
    /// A single-event append (what a cancellation that finds no driver writes) waits for a
    /// permit here before it is appended.
    pub hold_single_appends: Option<Arc<Semaphore>>,
    /// Every read waits this many polls before it answers, as a remote store's do: views,
    /// states, followers, and the events and usage facts read through them come as pending
    /// fetches (read when asked for, handed over later), so readers take their waiting paths.
    pub pending_reads: u32,
    /// The first this many follows fail with `StoreError::Unavailable`, as a read that lost
    /// its connection does (the store is not failed by it).
    pub fail_follows: u32,
}

/// A store with [`Faults`].
pub struct FaultyStore {
    inner: Arc<dyn EventStore>,
    faults: Faults,
    writes: AtomicU64,
    follows: AtomicU64,
    failed: AtomicBool,
    created: Arc<Mutex<Vec<ExecutionId>>>,
}

impl FaultyStore {
    /// `inner` with `faults`.
    pub fn new(inner: Arc<dyn EventStore>, faults: Faults) -> Self {
        Self {
            inner,
            faults,
            writes: AtomicU64::new(0),
            follows: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            created: Arc::default(),
        }
    }

    /// Every execution created through this store, in order.
    pub fn created(&self) -> Vec<ExecutionId> {
        self.created.lock().expect("not poisoned").clone()
    }

    /// Counts a write; `Err` when it is one that fails.
    fn write(&self) -> Result<(), StoreError> {
        let n = self.writes.fetch_add(1, Ordering::AcqRel) + 1;
        if self.faults.fail_writes_from.is_some_and(|from| n >= from) {
            self.failed.store(true, Ordering::Release);
            // As a store outside the crate would say it: in its own words.
            return Err(StoreError::Unavailable(Unavailable::Backend(format!(
                "injected fault on write {n}"
            ))));
        }
        Ok(())
    }
}

/// Reads through another follower's source, at once or (`pending` polls later) as a fetch.
struct Through {
    source: Arc<dyn EventSource>,
    pending: u32,
    /// The wrapped follower's wake-up, when the follower wears another: it still counts as
    /// the store's reader, as the wrapped follower would.
    _changes: Option<Changes>,
}

impl EventSource for Through {
    fn read(&self, after: u64, limit: usize, into: &mut VecDeque<Event>) -> Fetch<Event> {
        if self.pending == 0 {
            return self.source.read(after, limit, into);
        }
        let mut events = VecDeque::new();
        let fetch = self.source.read(after, limit, &mut events);
        let polls = self.pending;
        Some(StoreFuture::new(async move {
            later(polls).await;
            match fetch {
                Some(fetch) => fetch.await,
                None => Ok(events.into()),
            }
        }))
    }

    fn position(&self) -> (u64, ExecutionState) {
        self.source.position()
    }
}

/// Pending for `polls` polls, as a read that goes over the network.
fn later(polls: u32) -> PendingFor<()> {
    PendingFor {
        polls,
        value: Some(()),
    }
}

impl FaultyStore {
    /// `read`'s answer, `pending_reads` polls later.
    fn answer<'a, T: Send + 'a>(&self, read: StoreFuture<'a, T>) -> StoreFuture<'a, T> {
        let polls = self.faults.pending_reads;
        if polls == 0 {
            return read;
        }
        StoreFuture::new(async move {
            later(polls).await;
            read.await
        })
    }
}

/// Pending for `polls` polls (waking itself each time), then ready with `value`.
struct PendingFor<T> {
    polls: u32,
    value: Option<T>,
}

impl<T: Unpin> Future for PendingFor<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if self.polls == 0 {
            return Poll::Ready(self.value.take().expect("polled after completion"));
        }
        self.polls -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl EventStore for FaultyStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn durable(&self) -> bool {
        self.inner.durable()
    }

    fn create(&self, new: NewExecution) -> StoreFuture<'static, Created> {
        if let Err(e) = self.write() {
            return StoreFuture::ready(Err(e));
        }
        let id = new.id;
        let inner = self.inner.create(new);
        let created = self.created.clone();
        let polls = self.faults.create_pending_polls;
        StoreFuture::new(async move {
            let result = inner.await;
            if matches!(result, Ok(Created::New(_))) {
                created.lock().expect("not poisoned").push(id);
            }
            PendingFor {
                polls,
                value: Some(()),
            }
            .await;
            result
        })
    }

    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, Event> {
        if let Err(e) = self.write() {
            return StoreFuture::ready(Err(e));
        }
        match &self.faults.hold_single_appends {
            Some(gate) => StoreFuture::new(async move {
                let _open = gate.acquire().await;
                self.inner.append(id, payload).await
            }),
            None => self.inner.append(id, payload),
        }
    }

    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64> {
        if let Err(e) = self.write() {
            return StoreFuture::ready(Err(e));
        }
        let held = payloads
            .iter()
            .any(|p| matches!(p, EventPayload::Routing(_)));
        match (&self.faults.hold_routing, held) {
            (Some(gate), true) => StoreFuture::new(async move {
                let _open = gate.acquire().await;
                self.inner.append_all(id, payloads).await
            }),
            _ => self.inner.append_all(id, payloads),
        }
    }

    fn get(&self, id: ExecutionId) -> StoreFuture<'_, Execution> {
        self.answer(self.inner.get(id))
    }

    fn state(&self, id: ExecutionId) -> StoreFuture<'_, ExecutionState> {
        self.answer(self.inner.state(id))
    }

    fn follow(&self, id: ExecutionId) -> StoreFuture<'_, Follower> {
        if self.follows.fetch_add(1, Ordering::AcqRel) < u64::from(self.faults.fail_follows) {
            // After `pending_reads` polls, as a remote store's failed read answers.
            return self.answer(StoreFuture::ready(Err(StoreError::Unavailable(
                Unavailable::Backend("injected fault on a follow".into()),
            ))));
        }
        let follow = self.inner.follow(id);
        let pending = self.faults.pending_reads;
        if !self.faults.drop_subscriptions && pending == 0 {
            return follow;
        }
        let drop_subscriptions = self.faults.drop_subscriptions;
        self.answer(StoreFuture::new(async move {
            let (changes, source) = follow.await?.into_parts();
            // The events stay readable; the wake-up is closed, as when the store lets go.
            let (changes, held) = if drop_subscriptions {
                let dropped = ChangeSignal::new();
                dropped.close();
                (dropped.subscribe(), Some(changes))
            } else {
                (changes, None)
            };
            let through = Through {
                source,
                pending,
                _changes: held,
            };
            Ok(Follower::new(changes, Arc::new(through)))
        }))
    }

    fn usage_epoch(&self) -> u64 {
        self.inner.usage_epoch()
    }

    fn read_usage(
        &self,
        after: u64,
        limit: usize,
        into: &mut Vec<UsageEntry>,
    ) -> Fetch<UsageEntry> {
        let polls = self.faults.pending_reads;
        if polls == 0 {
            return self.inner.read_usage(after, limit, into);
        }
        let mut facts = Vec::new();
        let fetch = self.inner.read_usage(after, limit, &mut facts);
        Some(StoreFuture::new(async move {
            later(polls).await;
            match fetch {
                Some(fetch) => fetch.await,
                None => Ok(facts),
            }
        }))
    }

    fn usage_changes(&self) -> Changes {
        self.inner.usage_changes()
    }

    fn expire(&self) -> usize {
        self.inner.expire()
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn cancel_elsewhere(&self, id: ExecutionId, reason: Option<String>) -> StoreFuture<'_, bool> {
        self.inner.cancel_elsewhere(id, reason)
    }

    fn cancel_requests(&self) -> Option<CancelRequests> {
        self.inner.cancel_requests()
    }

    fn abandoned(&self, id: ExecutionId) {
        self.inner.abandoned(id);
    }

    fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire) || self.inner.failed()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::{MemoryStore, StoreLimits};

    fn over_memory(limits: StoreLimits, faults: Faults) -> Arc<dyn EventStore> {
        let inner = Arc::new(MemoryStore::new(limits));
        Arc::new(FaultyStore::new(inner, faults))
    }

    fn limits() -> StoreLimits {
        crate::store::conformance::limits(10, Duration::from_secs(60))
    }

    /// With no fault set, the wrapper is the store it wraps.
    mod without_faults {
        use super::*;

        crate::event_store_conformance!(
            |limits| async move { over_memory(limits, Faults::default()) }
        );
    }

    /// A create that waits before it answers changes nothing the suite can see.
    mod with_pending_creates {
        use super::*;

        crate::event_store_conformance!(|limits| async move {
            let faults = Faults {
                create_pending_polls: 2,
                ..Faults::default()
            };
            over_memory(limits, faults)
        });
    }

    /// Reads that wait, as a remote store's do, answer what ready ones do.
    mod with_pending_reads {
        use super::*;

        crate::event_store_conformance!(|limits| async move {
            let faults = Faults {
                pending_reads: 1,
                ..Faults::default()
            };
            over_memory(limits, faults)
        });
    }

    #[tokio::test]
    async fn a_failed_write_poisons_the_store() {
        let store = over_memory(
            limits(),
            Faults {
                fail_writes_from: Some(2),
                ..Faults::default()
            },
        );
        let new = crate::store::conformance::new_execution(None);
        let id = new.id;
        assert!(store.create(new).await.is_ok());
        assert!(!store.failed());
        let routing = crate::execution::fixtures::routing();
        assert!(matches!(
            store.append(id, routing.clone()).await,
            Err(StoreError::Unavailable(_))
        ));
        assert!(store.failed());
        assert!(store.append_all(id, vec![routing]).await.is_err());
        assert_eq!(
            store.follow(id).await.map(|f| f.position()),
            Ok((1, ExecutionState::Accepted))
        );
    }

    #[tokio::test]
    async fn a_dropped_subscription_reads_as_closed() {
        let store = over_memory(
            limits(),
            Faults {
                drop_subscriptions: true,
                ..Faults::default()
            },
        );
        let new = crate::store::conformance::new_execution(None);
        let id = new.id;
        store.create(new).await.ok();
        let mut follower = store.follow(id).await.ok();
        let closed = match follower.as_mut() {
            Some(follower) => follower.changes().changed().await,
            None => Ok(()),
        };
        assert_eq!(closed, Err(crate::store::Closed));
        let read = match &follower {
            Some(follower) => follower.read(0, 10).await.ok().map(|events| events.len()),
            None => None,
        };
        assert_eq!(read, Some(1));
    }
}
