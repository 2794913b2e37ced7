//! The bounded in-memory store (the default).
//!
//! Two levels of locking, so executions do not queue behind each other: a read-mostly index
//! (ids, idempotency keys, the order terminal executions ended in) and one mutex per
//! execution for its events and view (folded lazily, when read). An append takes the index for a lookup only and then
//! its own execution's lock; lock order is always index then execution, and no lock is held
//! across an await or while waking subscribers or freeing evicted records.
//!
//! Which terminal executions leave, and when, is [`Retention`]'s decision; their id and
//! idempotency key go with them under the same index lock. Whether a key names the same
//! request is [`Idempotency`]'s; the index only maps keys to executions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::{
    ChangeSignal, Changes, Created, EventPage, EventStore, NewExecution, Retention, StoreError,
    StoreFuture, StoreStats,
};
use crate::execution::{
    Event, EventPayload, Execution, ExecutionId, ExecutionState, IdMap, Idempotency, Labels,
    Lifecycle, StoredEvent,
};

mod log;

use log::Log;

/// The bounded in-memory event store.
#[derive(Debug)]
pub struct MemoryStore {
    max_executions: usize,
    index: RwLock<Index>,
}

#[derive(Debug)]
struct Index {
    slots: IdMap<Arc<Slot>>,
    idempotency: HashMap<String, ExecutionId>,
    retention: Retention,
}

/// One execution: what never changes, its subscribers' channel, and its lock.
#[derive(Debug)]
struct Slot {
    idempotency: Option<Idempotency>,
    labels: Arc<Labels>,
    changes: Arc<ChangeSignal>,
    record: Mutex<Record>,
}

#[derive(Debug)]
struct Record {
    events: Log,
    /// The view folded from the first `folded` events, made when first read. Folding is lazy:
    /// appends only store events, and whoever reads the view folds what it has not seen yet.
    /// A caller that only follows the events (`Execute`) never pays for a view, and a record
    /// nobody asked about keeps none (it was most of a stored execution's fixed size).
    view: Option<Box<Execution>>,
    folded: u64,
    lifecycle: Lifecycle,
}

/// A panic while a lock is held cannot leave these maps or a record half-updated in a way a
/// later reader would misread (each update is one insert, remove or push), so keep serving.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Slot {
    fn record(&self) -> MutexGuard<'_, Record> {
        lock(&self.record)
    }

    /// The view, folded up to the last event.
    fn view(&self) -> Result<Execution, StoreError> {
        let key = self.idempotency.as_ref().map(|i| &i.key);
        self.record().view(&self.labels, key)
    }
}

impl MemoryStore {
    /// A store holding at most `max_executions`, expiring terminal ones `retention` after they end.
    pub fn new(max_executions: usize, retention: Duration) -> Self {
        Self {
            max_executions: max_executions.max(1),
            index: RwLock::new(Index {
                slots: IdMap::default(),
                idempotency: HashMap::new(),
                retention: Retention::new(retention),
            }),
        }
    }

    fn read_index(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_index(&self) -> RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }

    fn slot(&self, id: ExecutionId) -> Result<Arc<Slot>, StoreError> {
        self.read_index()
            .slots
            .get(&id)
            .cloned()
            .ok_or(StoreError::NotFound(id))
    }

    /// Creates under the index lock; slots evicted to make room go to `evicted`, for the
    /// caller to free once the lock is released.
    fn create_now(
        &self,
        new: NewExecution,
        evicted: &mut Vec<Arc<Slot>>,
    ) -> Result<Created, StoreError> {
        let mut index = self.write_index();
        index.expire(Instant::now(), evicted);
        if let Some(identity) = &new.idempotency
            && let Some(existing) = index.idempotency.get(&identity.key)
            && let Some(slot) = index.slots.get(existing)
        {
            let same = slot
                .idempotency
                .as_ref()
                .is_some_and(|first| first.same_request(identity));
            return if same {
                Ok(Created::Existing(slot.view()?))
            } else {
                Err(StoreError::IdempotencyConflict(*existing))
            };
        }
        if index.slots.len() >= self.max_executions {
            match index.evict_for_room() {
                Some(slot) => evicted.push(slot),
                None => return Err(StoreError::Full(index.slots.len())),
            }
        }
        let mut lifecycle = Lifecycle::default();
        let first = Event {
            execution_id: new.id,
            sequence: 1,
            time: SystemTime::now(),
            state: lifecycle.apply(&new.accepted)?,
            payload: new.accepted,
        };
        let key = new.idempotency.as_ref().map(|i| &i.key);
        let view = Execution::from_accepted(&first, new.labels.clone(), key.cloned())
            .ok_or_else(not_accepted)?;
        let mut events = Log::default();
        events.push(Arc::from([first]));
        if let Some(key) = key {
            index.idempotency.insert(key.clone(), new.id);
        }
        let slot = Slot {
            idempotency: new.idempotency,
            labels: new.labels,
            changes: ChangeSignal::new(),
            record: Mutex::new(Record {
                events,
                view: None,
                folded: 0,
                lifecycle,
            }),
        };
        index.slots.insert(new.id, Arc::new(slot));
        Ok(Created::New(view))
    }

    fn append_now(
        &self,
        id: ExecutionId,
        payload: EventPayload,
    ) -> Result<StoredEvent, StoreError> {
        let slot = self.slot(id)?;
        let event = {
            let mut record = slot.record();
            record.check_open(id)?;
            let event = Event {
                execution_id: id,
                sequence: record.last_sequence() + 1,
                time: SystemTime::now(),
                state: record.lifecycle.apply(&payload)?,
                payload,
            };
            let batch: Arc<[Event]> = Arc::from([event]);
            record.events.push(batch.clone());
            StoredEvent::in_batch(batch, 0)
        };
        self.appended(id, &slot, event.is_terminal());
        Ok(event)
    }

    fn append_all_now(
        &self,
        id: ExecutionId,
        payloads: Vec<EventPayload>,
    ) -> Result<u64, StoreError> {
        let slot = self.slot(id)?;
        let (last, terminal) = {
            let mut record = slot.record();
            if payloads.is_empty() {
                return Ok(record.last_sequence());
            }
            record.check_open(id)?;
            let terminal = record.append_batch(id, payloads)?;
            (record.last_sequence(), terminal)
        };
        self.appended(id, &slot, terminal);
        Ok(last)
    }

    /// After an append, outside the record lock: wake the subscribers, and once the
    /// execution has ended, make it a candidate for expiry.
    fn appended(&self, id: ExecutionId, slot: &Slot, terminal: bool) {
        // Watchers only use this as a wake-up and read by cursor, so waking them outside the
        // record lock (and, with a concurrent append, out of order) is harmless. It comes
        // before the record can be evicted, so a reader sees the change before any close.
        slot.changes.publish();
        if terminal {
            // Only now may it be evicted; until then it is simply not in `ended` yet.
            self.write_index().retention.ended(id, Instant::now());
        }
    }
}

fn not_accepted() -> StoreError {
    StoreError::Failed("first event is not execution.accepted".into())
}

impl Record {
    fn check_open(&self, id: ExecutionId) -> Result<(), StoreError> {
        if self
            .lifecycle
            .state()
            .is_some_and(ExecutionState::is_terminal)
        {
            return Err(StoreError::AlreadyTerminal(id));
        }
        Ok(())
    }

    /// Sequence n lives at index n - 1.
    fn last_sequence(&self) -> u64 {
        self.events.len()
    }

    /// The view, after folding in the events it has not seen.
    fn view(
        &mut self,
        labels: &Arc<Labels>,
        key: Option<&String>,
    ) -> Result<Execution, StoreError> {
        let view = match &mut self.view {
            Some(view) => view,
            None => {
                let first = self.events.events(0).next().ok_or_else(not_accepted)?;
                let view = Execution::from_accepted(first, labels.clone(), key.cloned())
                    .ok_or_else(not_accepted)?;
                self.folded = 1;
                self.view.insert(Box::new(view))
            }
        };
        for event in self.events.events(self.folded) {
            view.apply(event);
        }
        self.folded = self.events.len();
        Ok(Execution::clone(view))
    }

    /// Stores `payloads` after the last event, all or none: they go through a copy of the
    /// state machine, which replaces the record's only once every one has passed. They share
    /// one time (they are appended together) and one allocation, written in place. Returns
    /// whether the last one ends the execution.
    fn append_batch(
        &mut self,
        id: ExecutionId,
        payloads: Vec<EventPayload>,
    ) -> Result<bool, StoreError> {
        let mut lifecycle = self.lifecycle;
        let mut states = Vec::with_capacity(payloads.len());
        for payload in &payloads {
            states.push(lifecycle.apply(payload)?);
        }
        let terminal = states.last().is_some_and(|s| s.is_terminal());
        let time = SystemTime::now();
        let events = payloads
            .into_iter()
            .zip(states)
            .zip(self.last_sequence() + 1..);
        self.events.push(
            events
                .map(|((payload, state), sequence)| Event {
                    execution_id: id,
                    sequence,
                    time,
                    state,
                    payload,
                })
                .collect(),
        );
        self.lifecycle = lifecycle;
        Ok(terminal)
    }
}

impl Index {
    /// Removes the executions whose retention has passed, into `evicted`.
    fn expire(&mut self, now: Instant, evicted: &mut Vec<Arc<Slot>>) {
        let slots = &self.slots;
        let gone = self.retention.expired(now, |id| readers(slots, id));
        for id in gone {
            evicted.extend(self.remove(id));
        }
    }

    /// Removes the terminal execution retention gives up to make room; `None` if there is none.
    fn evict_for_room(&mut self) -> Option<Arc<Slot>> {
        let slots = &self.slots;
        let id = self.retention.make_room(|id| readers(slots, id))?;
        self.remove(id)
    }

    /// Removes an execution with its identities.
    fn remove(&mut self, id: ExecutionId) -> Option<Arc<Slot>> {
        let slot = self.slots.remove(&id)?;
        if let Some(identity) = &slot.idempotency {
            self.idempotency.remove(&identity.key);
        }
        Some(slot)
    }
}

/// How many readers follow `id`: none once it has left.
fn readers(slots: &IdMap<Arc<Slot>>, id: ExecutionId) -> usize {
    slots.get(&id).map_or(0, |slot| slot.changes.readers())
}

impl EventStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn durable(&self) -> bool {
        false
    }

    fn create(&self, new: NewExecution) -> StoreFuture<'static, Created> {
        let mut evicted = Vec::new();
        let result = self.create_now(new, &mut evicted);
        // Outside the lock: tell anyone still holding an evicted execution's signal that it
        // left, and free its events.
        for slot in evicted {
            slot.changes.close();
        }
        Box::pin(std::future::ready(result))
    }

    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, StoredEvent> {
        let result = self.append_now(id, payload);
        Box::pin(std::future::ready(result))
    }

    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64> {
        let result = self.append_all_now(id, payloads);
        Box::pin(std::future::ready(result))
    }

    fn position(&self, id: ExecutionId) -> Result<(u64, ExecutionState), StoreError> {
        let slot = self.slot(id)?;
        let record = slot.record();
        let state = record.lifecycle.state().unwrap_or(ExecutionState::Accepted);
        Ok((record.last_sequence(), state))
    }

    fn get(&self, id: ExecutionId) -> Result<Execution, StoreError> {
        self.slot(id)?.view()
    }

    fn read(&self, id: ExecutionId, after: u64, limit: usize) -> Result<EventPage, StoreError> {
        let slot = self.slot(id)?;
        let events = slot.record().events.read(after, limit);
        Ok(EventPage { events })
    }

    fn subscribe(&self, id: ExecutionId) -> Result<Changes, StoreError> {
        Ok(self.slot(id)?.changes.subscribe())
    }

    fn stats(&self) -> StoreStats {
        // One guard: a second read lock taken while holding the first would wait behind a
        // queued writer that waits for the first.
        let index = self.read_index();
        StoreStats {
            executions: index.slots.len(),
            max_executions: self.max_executions,
            retention: index.retention.period(),
        }
    }

    fn failed(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::event_store_conformance!(|max, retention| async move {
        Arc::new(MemoryStore::new(max, retention)) as Arc<dyn EventStore>
    });
}
