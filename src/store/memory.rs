//! The bounded in-memory store (the default). One mutex guards the index; no lock is held
//! across an await, and work that needs no lock (waking subscribers, freeing evicted records)
//! is done after it is released, since every executor thread appends through this one lock. Terminal executions leave in the order they ended once their retention
//! has passed, or earlier when capacity is needed; their id and idempotency key go with them
//! in the same critical section. Non-terminal executions are never evicted: a store full of
//! them rejects new work.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{Created, EventPage, EventStore, NewExecution, StoreError, StoreFuture, StoreStats};
use crate::execution::{Event, EventPayload, Execution, ExecutionId, Fingerprint, Lifecycle};

/// The bounded in-memory event store.
#[derive(Debug)]
pub struct MemoryStore {
    max_executions: usize,
    retention: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    records: HashMap<ExecutionId, Record>,
    idempotency: HashMap<String, ExecutionId>,
    /// Terminal executions in the order they ended, with when.
    ended: VecDeque<(ExecutionId, Instant)>,
}

#[derive(Debug)]
struct Record {
    events: Vec<Arc<Event>>,
    view: Execution,
    lifecycle: Lifecycle,
    fingerprint: Option<Fingerprint>,
    notify: watch::Sender<u64>,
}

impl MemoryStore {
    /// A store holding at most `max_executions`, keeping terminal ones at least `retention`.
    pub fn new(max_executions: usize, retention: Duration) -> Self {
        Self {
            max_executions: max_executions.max(1),
            retention,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in a way later
        // readers would misread (every update is a single insert/remove), so keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Creates under the lock; records evicted to make room go to `evicted`, for the caller
    /// to free once the lock is released.
    fn create_now(
        &self,
        new: NewExecution,
        evicted: &mut Vec<Record>,
    ) -> Result<Created, StoreError> {
        let mut state = self.lock();
        let now = Instant::now();
        state.expire(now, self.retention, evicted);
        if let Some((key, fingerprint)) = &new.idempotency
            && let Some(existing) = state.idempotency.get(key)
            && let Some(record) = state.records.get(existing)
        {
            return if record.fingerprint == Some(*fingerprint) {
                Ok(Created::Existing(record.view.clone()))
            } else {
                Err(StoreError::IdempotencyConflict(*existing))
            };
        }
        if state.records.len() >= self.max_executions {
            // Make room by evicting the terminal execution that ended first.
            match state.evict_oldest() {
                Some(record) => evicted.push(record),
                None => return Err(StoreError::Full(state.records.len())),
            }
        }
        let mut lifecycle = Lifecycle::default();
        let first = Arc::new(Event {
            execution_id: new.id,
            sequence: 1,
            time: SystemTime::now(),
            state: lifecycle.apply(&new.accepted)?,
            payload: new.accepted,
        });
        let key = new.idempotency.as_ref().map(|(k, _)| k.clone());
        let view = Execution::from_accepted(&first, new.labels, key.clone())
            .ok_or_else(|| StoreError::Failed("first event is not execution.accepted".into()))?;
        if let Some(key) = key {
            state.idempotency.insert(key, new.id);
        }
        state.records.insert(
            new.id,
            Record {
                events: vec![first],
                view: view.clone(),
                lifecycle,
                fingerprint: new.idempotency.map(|(_, f)| f),
                notify: watch::Sender::new(1),
            },
        );
        Ok(Created::New(view))
    }

    /// Appends under the lock; returns the event and the subscribers' sender, to be woken
    /// once the lock is released.
    fn append_now(
        &self,
        id: ExecutionId,
        payload: EventPayload,
    ) -> Result<(Arc<Event>, watch::Sender<u64>), StoreError> {
        let mut state = self.lock();
        let record = state.records.get_mut(&id).ok_or(StoreError::NotFound(id))?;
        if record.view.state.is_terminal() {
            return Err(StoreError::AlreadyTerminal(id));
        }
        let event = Arc::new(Event {
            execution_id: id,
            sequence: record.view.last_sequence + 1,
            time: SystemTime::now(),
            state: record.lifecycle.apply(&payload)?,
            payload,
        });
        record.view.apply(&event);
        record.events.push(event.clone());
        let notify = record.notify.clone();
        if event.is_terminal() {
            state.ended.push_back((id, Instant::now()));
        }
        Ok((event, notify))
    }
}

impl State {
    /// Removes terminal executions whose retention has passed, into `evicted`.
    fn expire(&mut self, now: Instant, retention: Duration, evicted: &mut Vec<Record>) {
        while let Some((_, ended)) = self.ended.front() {
            if now.duration_since(*ended) < retention {
                break;
            }
            evicted.extend(self.evict_oldest());
        }
    }

    /// Removes the terminal execution that ended first, with its identities; `None` if there
    /// is none. The record is returned so it can be freed outside the lock.
    fn evict_oldest(&mut self) -> Option<Record> {
        let (id, _) = self.ended.pop_front()?;
        let record = self.records.remove(&id);
        if let Some(key) = record
            .as_ref()
            .and_then(|r| r.view.idempotency_key.as_ref())
        {
            self.idempotency.remove(key);
        }
        record
    }
}

impl EventStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn durable(&self) -> bool {
        false
    }

    fn create(&self, new: NewExecution) -> StoreFuture<'_, Created> {
        let mut evicted = Vec::new();
        let result = self.create_now(new, &mut evicted);
        // Freeing an evicted record (its events, view and sender) happens here, unlocked; its
        // subscribers see their channel close as before.
        drop(evicted);
        Box::pin(std::future::ready(result))
    }

    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, Arc<Event>> {
        let result = self.append_now(id, payload).map(|(event, notify)| {
            // Woken after the lock is released: a wake may hand a task to another thread,
            // which should not wait on this lock meanwhile. Readers only use the value as a
            // change signal and read the store, which already holds the event, so a late
            // wake loses nothing; keeping it monotonic stops a racing older append (a
            // cancellation beside the driver) from moving it back.
            notify.send_if_modified(|last| {
                let newer = event.sequence > *last;
                if newer {
                    *last = event.sequence;
                }
                newer
            });
            event
        });
        Box::pin(std::future::ready(result))
    }

    fn get(&self, id: ExecutionId) -> Result<Execution, StoreError> {
        let state = self.lock();
        let record = state.records.get(&id).ok_or(StoreError::NotFound(id))?;
        Ok(record.view.clone())
    }

    fn read(&self, id: ExecutionId, after: u64, limit: usize) -> Result<EventPage, StoreError> {
        let state = self.lock();
        let record = state.records.get(&id).ok_or(StoreError::NotFound(id))?;
        // Sequence n lives at index n - 1.
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(record.events.len());
        let end = start.saturating_add(limit).min(record.events.len());
        Ok(EventPage {
            events: record.events[start..end].to_vec(),
        })
    }

    fn subscribe(&self, id: ExecutionId) -> Result<watch::Receiver<u64>, StoreError> {
        let state = self.lock();
        let record = state.records.get(&id).ok_or(StoreError::NotFound(id))?;
        Ok(record.notify.subscribe())
    }

    fn stats(&self) -> StoreStats {
        StoreStats {
            executions: self.lock().records.len(),
            max_executions: self.max_executions,
            retention: self.retention,
        }
    }

    fn failed(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance;

    fn store(max: usize, retention: Duration) -> MemoryStore {
        MemoryStore::new(max, retention)
    }

    #[tokio::test]
    async fn conformance_suite() {
        conformance::run_all(|max, retention| async move {
            Arc::new(store(max, retention)) as Arc<dyn EventStore>
        })
        .await;
    }
}
