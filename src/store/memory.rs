//! The bounded in-memory store (the default), bounded in executions and in bytes.
//!
//! Two levels of locking, so executions do not queue behind each other: a read-mostly index
//! (ids, idempotency keys, the order terminal executions ended in) and one mutex per
//! execution for its events and view (folded lazily, when read). An append takes the index
//! for a lookup only and then its own execution's lock; lock order is always index then
//! execution, and no lock is held across an await or while waking followers or freeing
//! evicted records.
//!
//! Which terminal executions leave, and when, is [`Retention`]'s decision; their id and
//! idempotency key go with them under the same index lock. Whether a key names the same
//! request is [`Idempotency`]'s; the index only maps keys to executions. Bytes are counted
//! per record (`size.rs`) and in total: a create that does not fit makes room from terminal
//! executions or is refused, and an append past the bound evicts terminal executions until
//! the store fits again (running ones are bounded by their own output and event limits).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::SystemTime;

use tokio::time::Instant;

use super::{
    Changes, Created, EventSource, EventStore, Fetch, Follower, Inconsistency, NewExecution,
    Retention, StoreError, StoreFuture, StoreLimits, StoreStats, UsageEntry,
};
use crate::execution::{Event, EventPayload, Execution, ExecutionId, ExecutionState, IdMap};

mod durable;
mod journal;
mod log;
mod record;
mod size;
mod usage;

pub(super) use durable::Unrestorable;
pub(super) use journal::{Journal, Kept, Reveal};
use record::Slot;
pub(super) use usage::UsageLog;

/// The bounded in-memory event store.
#[derive(Debug)]
pub struct MemoryStore {
    limits: StoreLimits,
    index: RwLock<Index>,
    /// What every record holds, as counted; changed under each record's lock by the change
    /// its operation made.
    bytes: AtomicU64,
    /// Where a durable store writes what this one keeps; with one, events become visible
    /// only when the journal reveals them.
    journal: Option<Arc<dyn Journal>>,
    /// The usage facts of the executions held, in the order they were kept.
    usage: Arc<UsageLog>,
}

#[derive(Debug)]
struct Index {
    slots: IdMap<Arc<Slot>>,
    idempotency: HashMap<String, ExecutionId>,
    retention: Retention,
}

impl MemoryStore {
    /// A store within `limits`.
    pub fn new(limits: StoreLimits) -> Self {
        Self::journaled(limits, None)
    }

    /// A store within `limits` that tells `journal` of every change, in order.
    pub(super) fn journaled(limits: StoreLimits, journal: Option<Arc<dyn Journal>>) -> Self {
        Self {
            limits: StoreLimits {
                max_executions: limits.max_executions.max(1),
                ..limits
            },
            index: RwLock::new(Index {
                slots: IdMap::default(),
                idempotency: HashMap::new(),
                retention: Retention::new(limits.retention),
            }),
            bytes: AtomicU64::new(0),
            journal,
            usage: Arc::new(UsageLog::new()),
        }
    }

    /// The usage order, for a durable store to resume and mark.
    pub(in crate::store) fn usage_log(&self) -> &UsageLog {
        &self.usage
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

    fn add_bytes(&self, delta: i64) {
        if delta >= 0 {
            self.bytes.fetch_add(delta.unsigned_abs(), Ordering::AcqRel);
        } else {
            self.bytes.fetch_sub(delta.unsigned_abs(), Ordering::AcqRel);
        }
    }

    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    /// The materialized view, now: what `get`'s ready future holds, and what the file store
    /// reads (it has its own answer after a failure). A view made now counts against the
    /// store's bytes: one that takes it over them makes room, as an append does.
    pub(super) fn view(&self, id: ExecutionId) -> Result<Execution, StoreError> {
        let view = self.slot(id)?.view(|delta| self.add_bytes(delta))?;
        if self.bytes() > self.limits.max_bytes {
            self.release(self.fit(&mut self.write_index(), self.journal.as_deref()));
        }
        Ok(view)
    }

    /// The state after the last visible event, now (as `view`, for `state`).
    pub(super) fn state_now(&self, id: ExecutionId) -> Result<ExecutionState, StoreError> {
        Ok(self.slot(id)?.position().1)
    }

    /// Lets go every terminal execution whose retention has passed, with its identities (a
    /// journal hears of each); returns how many.
    pub(super) fn expire_due(&self) -> usize {
        let now = Instant::now();
        if !self.read_index().retention.any_expired(now) {
            return 0;
        }
        let evicted: Vec<Arc<Slot>> = {
            let mut index = self.write_index();
            let expired = index.retention.expired(now);
            expired
                .into_iter()
                .filter_map(|id| self.evict(&mut index, id, self.journal.as_deref()))
                .collect()
        };
        let count = evicted.len();
        self.release(evicted);
        count
    }

    /// Makes the record, then stores it under the index lock; slots evicted to make room go
    /// to `evicted`, for the caller to free once the lock is released.
    fn create_now(
        &self,
        new: NewExecution,
        at: SystemTime,
        journal: Option<&dyn Journal>,
        evicted: &mut Vec<Arc<Slot>>,
    ) -> Result<(Created, u64), StoreError> {
        // The record and its view are made before the index lock, which every other
        // execution's lookup waits for while it is held: their allocations (and the fresh
        // pages they may fault in) are no part of it. A create that stores nothing (a
        // repeat of a key, a conflict, a full store) drops them unused, after the lock: the
        // slot is declared before the guard, so it is dropped after it. Keep that order.
        let (slot, view) = Slot::new(
            new.id,
            at,
            new.accepted,
            new.labels,
            new.idempotency,
            new.input_bytes,
        )?;
        let needed = slot.record().bytes() as u64;
        let slot = Arc::new(slot);
        let mut index = self.write_index();
        let expired = index.retention.expired(Instant::now());
        for id in expired {
            evicted.extend(self.evict(&mut index, id, journal));
        }
        if let Some(identity) = &slot.idempotency
            && let Some(existing) = index.idempotency.get(&identity.key)
            && let Some(held) = index.slots.get(existing)
        {
            let same = held
                .idempotency
                .as_ref()
                .is_some_and(|first| first.same_request(identity));
            if !same {
                return Err(StoreError::IdempotencyConflict(*existing));
            }
            let view = held.view(|delta| self.add_bytes(delta))?;
            evicted.extend(self.fit(&mut index, journal));
            return Ok((Created::Existing(view), 0));
        }
        // Room by count and by bytes, from the terminal executions that ended first.
        while index.slots.len() >= self.limits.max_executions
            || self.bytes().saturating_add(needed) > self.limits.max_bytes
        {
            let Some(gone) = index.retention.make_room() else {
                return Err(StoreError::Full {
                    executions: index.slots.len(),
                    bytes: self.bytes(),
                });
            };
            evicted.extend(self.evict(&mut index, gone, journal));
        }
        if let Some(identity) = &slot.idempotency {
            index.idempotency.insert(identity.key.clone(), new.id);
        }
        self.add_bytes(i64::try_from(needed).unwrap_or(i64::MAX));
        // The journal hears of the execution before anyone can find it to append to it.
        let ticket = match journal {
            Some(journal) => {
                let record = slot.record();
                let first = record
                    .events_after(0)
                    .next()
                    .ok_or(StoreError::Inconsistent(Inconsistency::NotAccepted(new.id)))?;
                journal.created(&slot.kept(), &first, Reveal::new(slot.clone(), 1))
            }
            None => {
                slot.record().reveal_all();
                0
            }
        };
        index.slots.insert(new.id, slot);
        Ok((Created::New(view), ticket))
    }

    fn append_now(
        &self,
        id: ExecutionId,
        payloads: Vec<EventPayload>,
        at: SystemTime,
        journal: Option<&dyn Journal>,
    ) -> Result<Appended, StoreError> {
        let slot = self.slot(id)?;
        let (terminal, last) = {
            let mut record = slot.record();
            if payloads.is_empty() {
                return Ok(Appended {
                    last: record.last_sequence(),
                    event: None,
                    ticket: 0,
                });
            }
            record.check_open(id)?;
            let single = payloads.len() == 1;
            let after = record.last_sequence();
            let has_usage = payloads.iter().any(|p| matches!(p, EventPayload::Usage(_)));
            let mut kept = None;
            let (terminal, delta) = if has_usage {
                // Under the record's lock and then the usage order's, so positions grow in
                // the order facts are kept.
                let mut positions = record.take_positions();
                let before = positions.len();
                let batch = usage::Batch {
                    id,
                    first: after + 1,
                    at,
                    shown: journal.is_none(),
                };
                let appended = self
                    .usage
                    .keep(batch, payloads, &mut positions, |payloads| {
                        record.append(at, payloads)
                    });
                if let (Some((_, first)), Some((_, last))) =
                    (positions.get(before), positions.last())
                {
                    kept = Some(*first..=*last);
                }
                record.put_positions(positions);
                appended?
            } else {
                record.append(at, payloads)?
            };
            self.add_bytes(delta);
            let last = record.last_sequence();
            // In the record's lock, so the journal has each execution's events in order.
            let ticket = match journal {
                Some(journal) => journal.appended(
                    id,
                    &mut record.events_after(after),
                    Reveal::new(slot.clone(), last)
                        .with_usage(kept.map(|positions| (self.usage.clone(), positions))),
                ),
                None => {
                    record.reveal_all();
                    0
                }
            };
            let event = single.then(|| record.last_event()).flatten();
            (
                terminal,
                Appended {
                    last,
                    event,
                    ticket,
                },
            )
        };
        self.appended(id, &slot, terminal);
        Ok(last)
    }

    /// After an append, outside the record lock: wake the followers; once the execution has
    /// ended, make it a candidate for expiry; and when the store holds more than its bytes,
    /// let the terminal executions that ended first go until it fits.
    fn appended(&self, id: ExecutionId, slot: &Slot, terminal: bool) {
        // Followers read by cursor, so waking them outside the record lock (and, with a
        // concurrent append, out of order) is harmless.
        slot.changes.publish();
        let over = self.bytes() > self.limits.max_bytes;
        if !terminal && !over {
            return;
        }
        let evicted = {
            let mut index = self.write_index();
            if terminal {
                index.retention.ended(id, Instant::now());
            }
            self.fit(&mut index, self.journal.as_deref())
        };
        self.release(evicted);
    }

    /// Under the index lock: while the store holds more than its bytes (an append grew a
    /// record, or a view was made), lets the terminal executions that ended first go, and
    /// returns them. Running executions stay, over the bound if they alone hold it.
    fn fit(&self, index: &mut Index, journal: Option<&dyn Journal>) -> Vec<Arc<Slot>> {
        let mut evicted = Vec::new();
        while self.bytes() > self.limits.max_bytes {
            let Some(gone) = index.retention.make_room() else {
                break;
            };
            evicted.extend(self.evict(index, gone, journal));
        }
        evicted
    }

    /// Under the index lock: removes an execution with its identities and takes its bytes
    /// off the count at once, so a loop making room sees the room it made.
    fn evict(
        &self,
        index: &mut Index,
        id: ExecutionId,
        journal: Option<&dyn Journal>,
    ) -> Option<Arc<Slot>> {
        let slot = index.remove(id)?;
        self.usage.forget(slot.record().take_usage());
        if let Some(journal) = journal {
            journal.expired(id);
        }
        self.add_bytes(-i64::try_from(slot.uncount()).unwrap_or(i64::MAX));
        Some(slot)
    }

    /// Outside the index lock: tell each evicted execution's followers that no change will
    /// come (its memory goes when the last of them lets go of it).
    fn release(&self, evicted: Vec<Arc<Slot>>) {
        for slot in evicted {
            slot.close();
        }
    }
}

/// The executions a compaction writes, in the order it writes them.
pub(super) struct Listing(Vec<Arc<Slot>>);

/// What an append produced: the last sequence, the event itself for a single append, and
/// the journal's ticket for it (0 without a journal).
pub(super) struct Appended {
    pub(super) last: u64,
    pub(super) event: Option<Event>,
    pub(super) ticket: u64,
}

impl Appended {
    /// The event of a single append to `id`.
    pub(super) fn event(self, id: ExecutionId) -> Result<Event, StoreError> {
        self.event
            .ok_or(StoreError::Inconsistent(Inconsistency::Unstored(id)))
    }
}

impl Index {
    /// Removes an execution with its identities.
    fn remove(&mut self, id: ExecutionId) -> Option<Arc<Slot>> {
        let slot = self.slots.remove(&id)?;
        if let Some(identity) = &slot.idempotency {
            self.idempotency.remove(&identity.key);
        }
        Some(slot)
    }
}

impl EventStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn durable(&self) -> bool {
        false
    }

    fn create(&self, new: NewExecution) -> StoreFuture<'static, Created> {
        let result = self.create_journaled(new).map(|(created, _)| created);
        StoreFuture::ready(result)
    }

    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, Event> {
        let result = self
            .append_journaled(id, vec![payload])
            .and_then(|appended| appended.event(id));
        StoreFuture::ready(result)
    }

    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64> {
        let result = self
            .append_journaled(id, payloads)
            .map(|appended| appended.last);
        StoreFuture::ready(result)
    }

    fn get(&self, id: ExecutionId) -> StoreFuture<'_, Execution> {
        StoreFuture::ready(self.view(id))
    }

    fn state(&self, id: ExecutionId) -> StoreFuture<'_, ExecutionState> {
        StoreFuture::ready(self.state_now(id))
    }

    fn first(&self, id: ExecutionId) -> StoreFuture<'_, Event> {
        let first = self
            .slot(id)
            .and_then(|slot| slot.first().ok_or(StoreError::NotFound(id)));
        StoreFuture::ready(first)
    }

    fn follow(&self, id: ExecutionId) -> StoreFuture<'_, Follower> {
        let follower = self.slot(id).map(|slot| {
            let changes = slot.changes.subscribe();
            Follower::new(changes, slot)
        });
        StoreFuture::ready(follower)
    }

    fn usage_epoch(&self) -> u64 {
        self.usage.epoch()
    }

    fn read_usage(
        &self,
        after: u64,
        limit: usize,
        into: &mut Vec<UsageEntry>,
    ) -> Fetch<UsageEntry> {
        self.usage.read(after, limit, into);
        None
    }

    fn usage_changes(&self) -> Changes {
        self.usage.changes()
    }

    fn expire(&self) -> usize {
        self.expire_due()
    }

    fn stats(&self) -> StoreStats {
        let index = self.read_index();
        StoreStats {
            executions: index.slots.len(),
            bytes: self.bytes(),
            evicted: index.retention.let_go(),
            limits: self.limits,
        }
    }

    fn failed(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::event_store_conformance!(|limits| async move {
        Arc::new(MemoryStore::new(limits)) as Arc<dyn EventStore>
    });
}
