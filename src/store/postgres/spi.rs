//! The EventStore SPI on the PostgreSQL store: each operation runs on the store's runtime
//! (`on_store`), except what this replica knows of an execution it holds, an append to one
//! and a create without an idempotency key that the counts admit at once (put on their
//! batch's queue from the caller's thread: `writer.rs`, `create.rs`).

use std::sync::atomic::Ordering;

use super::{
    PgError, PostgresStore, RELEASE, cancel, capacity, create, replica, usage, watch, writer,
};
use crate::execution::{Event, EventPayload, Execution, ExecutionId, ExecutionState};
use crate::store::{
    CancelRequests, Changes, Created, EventStore, Fetch, Follower, NewExecution, StoreError,
    StoreFuture, StoreStats, UsageEntry,
};

impl PostgresStore {
    /// The registration an append to `id` is made under: this replica's now, unless the
    /// driver of `id` runs under a former one (its lease was lost). Then it appends nothing
    /// more, whoever owns the execution now (this replica, under its new registration,
    /// included: its takeover ends it). A store closed or not started refuses the append.
    fn registration<T: Send + 'static>(
        &self,
        id: ExecutionId,
    ) -> Result<uuid::Uuid, StoreFuture<'static, T>> {
        let current = self.shared.replica.id().0;
        if self.shared.driven.fenced(id, current) {
            return Err(StoreFuture::ready(Err(writer::not_owner(id))));
        }
        self.shared
            .usable()
            .map_err(|refused| StoreFuture::ready(Err(refused)))?;
        Ok(current)
    }
}

impl EventStore for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn durable(&self) -> bool {
        true
    }

    fn create(&self, new: NewExecution) -> StoreFuture<'static, Created> {
        let now = self.shared.clock.now();
        self.shared.capacity.due(&self.shared, now);
        create::create(&self.shared, new, now)
    }

    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, Event> {
        let registration = match self.registration(id) {
            Ok(registration) => registration,
            Err(fenced) => return fenced,
        };
        let now = self.shared.clock.now();
        StoreFuture::new(writer::append(
            &self.shared,
            id,
            registration,
            vec![payload],
            now,
        ))
    }

    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64> {
        let registration = match self.registration(id) {
            Ok(registration) => registration,
            Err(fenced) => return fenced,
        };
        if payloads.is_empty() {
            let shared = self.shared.clone();
            return self.on_store(async move {
                capacity::flush_for(&shared, id).await?;
                let row = shared.row(id).await.map_err(PgError::into_store)?;
                row.map(|r| r.last).ok_or(StoreError::NotFound(id))
            });
        }
        let now = self.shared.clock.now();
        let appended = writer::append(&self.shared, id, registration, payloads, now);
        StoreFuture::new(async move { Ok(appended.await?.sequence) })
    }

    fn get(&self, id: ExecutionId) -> StoreFuture<'_, Execution> {
        let shared = self.shared.clone();
        self.on_store(async move {
            capacity::flush_for(&shared, id).await?;
            shared.view(id).await
        })
    }

    fn state(&self, id: ExecutionId) -> StoreFuture<'_, ExecutionState> {
        if let Some(held) = self.held(id) {
            return StoreFuture::ready(Ok(held.state));
        }
        let shared = self.shared.clone();
        self.on_store(async move {
            capacity::flush_for(&shared, id).await?;
            let row = shared.row(id).await.map_err(PgError::into_store)?;
            row.map(|r| r.lifecycle_state)
                .ok_or(StoreError::NotFound(id))
        })
    }

    fn follow(&self, id: ExecutionId) -> StoreFuture<'_, Follower> {
        if let Some(held) = self.held(id) {
            let follower = watch::follower(&self.shared, id, &held.labels, held.last, held.state);
            if let Some(first) = &held.first {
                self.shared.watched.first(id, first);
            }
            return StoreFuture::ready(Ok(follower));
        }
        let shared = self.shared.clone();
        self.on_store(async move {
            capacity::flush_for(&shared, id).await?;
            let row = shared
                .row(id)
                .await
                .map_err(PgError::into_store)?
                .ok_or(StoreError::NotFound(id))?;
            Ok(watch::follower(
                &shared,
                id,
                &row.labels,
                row.last,
                row.lifecycle_state,
            ))
        })
    }

    fn usage_epoch(&self) -> u64 {
        self.shared.usage_epoch.load(Ordering::Acquire)
    }

    fn read_usage(
        &self,
        after: u64,
        limit: usize,
        _into: &mut Vec<UsageEntry>,
    ) -> Fetch<UsageEntry> {
        let shared = self.shared.clone();
        Some(self.on_store(async move { usage::read(&shared, after, limit).await }))
    }

    fn usage_changes(&self) -> Changes {
        self.shared.usage.subscribe()
    }

    fn expire(&self) -> usize {
        let now = self.shared.clock.now();
        self.shared.capacity.due(&self.shared, now) + self.shared.capacity.swept()
    }

    fn stats(&self) -> StoreStats {
        self.shared.capacity.stats(self.shared.limits)
    }

    fn cancel_elsewhere(&self, id: ExecutionId, reason: Option<String>) -> StoreFuture<'_, bool> {
        let shared = self.shared.clone();
        self.on_store(async move { cancel::elsewhere(&shared, id, reason).await })
    }

    fn cancel_requests(&self) -> Option<CancelRequests> {
        self.shared.cancels.take()
    }

    /// The reconciliation ends it (`takeover.rs`): at once if the database answers, else when
    /// it does again (within the lease), else whoever takes this registration over.
    fn abandoned(&self, id: ExecutionId) {
        self.shared.driven.remove(id);
        self.shared.takeover.wake();
    }

    fn failed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
            || !self.shared.ready.load(Ordering::Acquire)
            || !self.shared.reachable.load(Ordering::Acquire)
            || !self.shared.replica.current()
    }

    /// Gives the lease back (so a survivor takes at once whatever a drain left unfinished),
    /// waiting for that at most `RELEASE` (2 s), and stops the store's thread.
    fn close(&self) {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.shared.ready.load(Ordering::Acquire) {
            let (done, released) = std::sync::mpsc::channel();
            let shared = self.shared.clone();
            self.shared.handle.spawn(async move {
                if let Err(error) = replica::release(&shared).await {
                    tracing::warn!(%error, "giving the lease back failed; it lapses on its own");
                }
                let _ = done.send(());
            });
            let _ = released.recv_timeout(RELEASE);
        }
        self.shared.stop.cancel();
    }
}
