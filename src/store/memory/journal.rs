//! How a durable store writes through the memory store: the memory store keeps and orders
//! everything (sequences, the state machine, capacity, retention) and tells a [`Journal`] of
//! each change under the lock that orders it; the journal makes the change durable and then
//! [`Reveal`]s it, and only then do readers see it.

use std::ops::RangeInclusive;
use std::sync::Arc;

use super::record::Slot;
use super::usage::UsageLog;
use crate::execution::{Event, ExecutionId, Idempotency, Labels};

/// An execution's identity, as a journal records it with its first event.
#[derive(Debug, Clone)]
pub(in crate::store) struct Kept {
    pub id: ExecutionId,
    pub labels: Arc<Labels>,
    pub idempotency: Option<Idempotency>,
}

/// The writer of a durable store. Each call returns a ticket: the change is durable once the
/// journal has written every ticket up to it.
pub(in crate::store) trait Journal: Send + Sync + std::fmt::Debug {
    /// A new execution and its first event (under the index lock, before it can be found).
    fn created(&self, kept: &Kept, first: &Event, reveal: Reveal) -> u64;

    /// Events appended to `id` together (under its record's lock, so in order).
    fn appended(
        &self,
        id: ExecutionId,
        events: &mut dyn Iterator<Item = Event>,
        reveal: Reveal,
    ) -> u64;

    /// The execution left the store with its identities (under the index lock).
    fn expired(&self, id: ExecutionId);
}

/// Shows one execution's events up to a sequence to its readers, once they are durable.
#[derive(Debug)]
pub(in crate::store) struct Reveal {
    slot: Arc<Slot>,
    upto: u64,
    /// The usage order and the positions of the facts the events hold, shown with them.
    usage: Option<(Arc<UsageLog>, RangeInclusive<u64>)>,
}

impl Reveal {
    pub(super) fn new(slot: Arc<Slot>, upto: u64) -> Self {
        Self {
            slot,
            upto,
            usage: None,
        }
    }

    /// The events hold usage facts at `positions` of `usage`, shown with the events.
    pub(super) fn with_usage(self, usage: Option<(Arc<UsageLog>, RangeInclusive<u64>)>) -> Self {
        Self { usage, ..self }
    }

    /// Makes the events visible and wakes the readers.
    pub(crate) fn reveal(self) {
        self.slot.reveal(self.upto);
        if let Some((usage, positions)) = self.usage {
            usage.reveal(positions);
        }
    }

    /// The journal could not make the events durable: takes back what no reader has seen
    /// of the execution in `store` (the whole execution, if nothing); returns its id.
    pub(crate) fn take_back(self, store: &super::MemoryStore) -> ExecutionId {
        store.roll_back_slot(&self.slot);
        self.slot.id
    }
}

impl Slot {
    /// The execution's identity.
    pub(super) fn kept(&self) -> Kept {
        Kept {
            id: self.id,
            labels: self.labels.clone(),
            idempotency: self.idempotency.clone(),
        }
    }
}
