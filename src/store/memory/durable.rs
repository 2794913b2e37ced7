//! What a durable store built over the memory store uses: journaled creates and appends
//! (their tickets), history restored from a journal, the listing a compaction writes, and
//! what a failed journal takes back.

use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use super::record::Slot;
use super::{Appended, Kept, Listing, MemoryStore};
use crate::execution::{Event, EventPayload, Execution, ExecutionId};
use crate::store::{Created, Inconsistency, NewExecution, StoreError};

/// Why a journal's record cannot be restored: the file store names it as damage, with the
/// record's file and offset.
#[derive(Debug)]
pub(in crate::store) enum Unrestorable {
    /// A create's idempotency key is held by another execution.
    KeyTaken { holder: ExecutionId },
    /// An append's first event does not follow the execution's last.
    Gap { first: u64, last: u64 },
    /// The store refused it (the state machine, say).
    Refused(StoreError),
}

impl From<StoreError> for Unrestorable {
    fn from(error: StoreError) -> Self {
        Self::Refused(error)
    }
}

/// What a durable store built over this one uses: journaled changes, restored history and
/// the executions to compact.
impl MemoryStore {
    /// Creates, telling the journal; returns the journal's ticket.
    pub(in crate::store) fn create_journaled(
        &self,
        new: NewExecution,
    ) -> Result<(Created, u64), StoreError> {
        let mut evicted = Vec::new();
        let result = self.create_now(
            new,
            SystemTime::now(),
            self.journal.as_deref(),
            &mut evicted,
        );
        self.release(evicted);
        result
    }

    /// Appends, telling the journal; the ticket is in what it returns.
    pub(in crate::store) fn append_journaled(
        &self,
        id: ExecutionId,
        payloads: Vec<EventPayload>,
    ) -> Result<Appended, StoreError> {
        self.append_now(id, payloads, SystemTime::now(), self.journal.as_deref())
    }

    /// Takes back what readers have not seen of `id` (its journal failed before making it
    /// durable); an execution none of whose events were seen leaves the store. Returns
    /// whether it is still held.
    pub(in crate::store) fn roll_back(&self, id: ExecutionId) -> bool {
        let Ok(slot) = self.slot(id) else {
            return false;
        };
        self.roll_back_slot(&slot)
    }

    pub(super) fn roll_back_slot(&self, slot: &Slot) -> bool {
        let (delta, unseen, taken) = slot.roll_back();
        self.add_bytes(delta);
        self.usage.forget(taken);
        if unseen {
            let evicted = self.evict(&mut self.write_index(), slot.id, self.journal.as_deref());
            self.release(evicted.into_iter().collect());
        }
        !unseen
    }

    /// Restores an execution as the journal recorded it, with its first event's time, and
    /// visible at once; the journal is not told (of it, nor of what it evicts: a replay that
    /// finds more than the limits hold lets the oldest-ended go, as the store would, and the
    /// journal forgets them at its next compaction).
    pub(in crate::store) fn restore_create(
        &self,
        at: SystemTime,
        new: NewExecution,
    ) -> Result<(), Unrestorable> {
        // A compacted segment may repeat a create a later segment holds too.
        if self.read_index().slots.contains_key(&new.id) {
            return Ok(());
        }
        let mut evicted = Vec::new();
        let result = self.create_now(new, at, None, &mut evicted);
        self.release(evicted);
        match result? {
            (Created::New(_), _) => Ok(()),
            (Created::Existing(other), _) => Err(Unrestorable::KeyTaken { holder: other.id }),
        }
    }

    /// Restores events `first..` of an execution as the journal recorded them; those it
    /// already has are skipped (a compacted journal may hold them twice). `Ok(false)` when
    /// the execution is unknown (it expired before them).
    pub(in crate::store) fn restore_append(
        &self,
        id: ExecutionId,
        first: u64,
        at: SystemTime,
        mut payloads: Vec<EventPayload>,
    ) -> Result<bool, Unrestorable> {
        let Ok(slot) = self.slot(id) else {
            return Ok(false);
        };
        let have = slot.record().last_sequence();
        if first > have + 1 {
            return Err(Unrestorable::Gap { first, last: have });
        }
        let skip = usize::try_from(have + 1 - first).unwrap_or(usize::MAX);
        if skip >= payloads.len() {
            return Ok(true);
        }
        payloads.drain(..skip);
        // A journal keeps an execution's labels once, not in each usage fact.
        for payload in &mut payloads {
            if let EventPayload::Usage(fact) = payload {
                Arc::make_mut(fact).labels = slot.labels.clone();
            }
        }
        self.append_now(id, payloads, at, None)?;
        // Retention counts from when the execution ended, not from the restart.
        if slot.record().is_terminal() {
            let age = SystemTime::now().duration_since(at).unwrap_or_default();
            let now = Instant::now();
            self.write_index()
                .retention
                .reschedule(id, now.checked_sub(age).unwrap_or(now));
        }
        Ok(true)
    }

    /// Removes an execution the journal says expired (the journal is not told again).
    pub(in crate::store) fn restore_expire(&self, id: ExecutionId) {
        let evicted = self.evict(&mut self.write_index(), id, None);
        self.release(evicted.into_iter().collect());
    }

    /// Lets the older half of the terminal executions go (at least one), in the order they
    /// ended, as capacity would: what a durable store does when its disk is full. Returns how
    /// many left; 0 when every execution held is still running.
    pub(in crate::store) fn evict_older_half(&self) -> usize {
        // In chunks, the index lock released between them, so appends and creates go on.
        const CHUNK: usize = 256;
        let half = self.read_index().retention.len().div_ceil(2);
        let mut count = 0;
        for _ in 0..half.div_ceil(CHUNK) {
            let evicted: Vec<Arc<Slot>> = {
                let mut index = self.write_index();
                let mut evicted = Vec::with_capacity(CHUNK);
                for _ in 0..CHUNK.min(half - count) {
                    let Some(id) = index.retention.make_room() else {
                        break;
                    };
                    evicted.extend(self.evict(&mut index, id, self.journal.as_deref()));
                }
                evicted
            };
            count += evicted.len();
            let done = evicted.is_empty();
            self.release(evicted);
            if done || count >= half {
                break;
            }
        }
        count
    }

    /// After a replay: retention in the order executions ended.
    pub(in crate::store) fn sort_retention(&self) {
        self.write_index().retention.sort();
    }

    /// Every execution held now, listed while no create or expiry can come between it and
    /// `at` (a compaction's rotation to a new segment, so that the segment after its base
    /// holds exactly the creates and expiries that came after the listing): the terminal
    /// executions in the order they ended, then the running ones.
    pub(in crate::store) fn list_at<T>(&self, at: impl FnOnce() -> T) -> (T, Listing) {
        let index = self.write_index();
        let done = at();
        let mut listed: Vec<Arc<Slot>> = index
            .retention
            .in_end_order()
            .filter_map(|id| index.slots.get(&id).cloned())
            .collect();
        // A stale retention entry names nothing; one execution is listed once.
        let terminal: std::collections::HashSet<ExecutionId> =
            listed.iter().map(|slot| slot.id).collect();
        listed.extend(
            index
                .slots
                .values()
                .filter(|slot| !terminal.contains(&slot.id))
                .cloned(),
        );
        (done, Listing(listed))
    }

    /// Each execution of `listing` with its visible events: what compaction writes.
    pub(in crate::store) fn each_kept(
        &self,
        listing: Listing,
        mut each: impl FnMut(Kept, Vec<Event>),
    ) {
        for slot in listing.0 {
            let events: Vec<Event> = slot.record().visible_events(0).collect();
            if !events.is_empty() {
                each(slot.kept(), events);
            }
        }
    }

    /// After a journal failed: takes back what no reader has seen of `id` (all of it, if
    /// nothing was seen: it leaves the store); if it has not ended at what is left, its
    /// readers hear that the store failed. It stays at its last durable event, and the next
    /// start ends it there, so no reader ever sees another event at a sequence it has seen.
    pub(in crate::store) fn fail_unwritten(&self, id: ExecutionId) {
        let Ok(slot) = self.slot(id) else {
            return;
        };
        if self.roll_back_slot(&slot) && !slot.record().is_terminal() {
            slot.changes.fail();
        }
    }

    /// The ids of every execution held now.
    pub(in crate::store) fn ids(&self) -> Vec<ExecutionId> {
        self.read_index().slots.keys().copied().collect()
    }

    /// An execution's view and events, every stored one (visible or not yet).
    pub(in crate::store) fn history(
        &self,
        id: ExecutionId,
    ) -> Result<(Execution, Vec<Event>), StoreError> {
        let slot = self.slot(id)?;
        let events: Vec<Event> = slot.record().events_after(0).collect();
        let key = slot.idempotency.as_ref().map(|i| i.key.clone());
        let not_accepted = || StoreError::Inconsistent(Inconsistency::NotAccepted(id));
        let first = events.first().ok_or_else(not_accepted)?;
        let mut view = Execution::from_accepted(first, id, slot.labels.clone(), key)
            .ok_or_else(not_accepted)?;
        for event in &events[1..] {
            view.apply(event);
        }
        Ok((view, events))
    }

    /// The executions held now that have not ended.
    pub(in crate::store) fn unfinished(&self) -> Vec<ExecutionId> {
        let slots: Vec<Arc<Slot>> = self.read_index().slots.values().cloned().collect();
        slots
            .into_iter()
            .filter(|slot| !slot.record().is_terminal())
            .map(|slot| slot.id)
            .collect()
    }
}
