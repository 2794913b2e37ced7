//! A reader's hold on one execution. A store hands one out per reader; it reads the
//! execution's events from any cursor and wakes on every append, and it keeps those events
//! readable after the store lets the execution go: retention and capacity never wait for a
//! slow reader, and a reader that has begun still reaches the last event. What a reader can
//! keep alive this way is one execution's record, and readers are bounded (streams per
//! connection, connections, watchers per execution).

use std::collections::VecDeque;
use std::sync::Arc;

use super::{Changes, Fetch, StoreError};
use crate::execution::{Event, ExecutionState};

/// Where a follower reads: one execution's events as its store keeps them.
pub trait EventSource: Send + Sync {
    /// Up to `limit` events with `sequence > after`, in order.
    ///
    /// A source that has them at hand copies them to the back of `into` (a reader's queue,
    /// reused from read to read) and returns `None`: a read costs it no allocation, which
    /// matters because every event a stream sends is read here. A source that must fetch
    /// them (a remote store) returns the fetch instead, which yields them. The fetch borrows
    /// nothing of the source, so a stream keeps it beside its follower while it waits.
    #[must_use = "a returned fetch holds the events"]
    fn read(&self, after: u64, limit: usize, into: &mut VecDeque<Event>) -> Fetch<Event>;

    /// The last sequence and the state after it, without waiting. A store that has its
    /// events at hand knows them now; a remote one reads them when its follower is made
    /// (`EventStore::follow`, which may wait) and keeps them current from what wakes the
    /// follower. The runtime reads it right after `follow`, to check a cursor; the
    /// conformance suite asks that it show every append the store has answered.
    fn position(&self) -> (u64, ExecutionState);
}

/// One reader's hold on one execution.
pub struct Follower {
    changes: Changes,
    source: Arc<dyn EventSource>,
}

impl Follower {
    /// A follower reading `source`, woken by `changes`.
    pub fn new(changes: Changes, source: Arc<dyn EventSource>) -> Self {
        Self { changes, source }
    }

    /// Up to `limit` events with `sequence > after`.
    pub(crate) async fn read(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let mut events = VecDeque::new();
        match self.source.read(after, limit, &mut events) {
            None => Ok(events.into()),
            Some(fetch) => fetch.await,
        }
    }

    /// Up to `limit` events with `sequence > after`: to the back of `into`, or (`Some`) still
    /// to be fetched ([`EventSource::read`]).
    pub(crate) fn read_into(
        &self,
        after: u64,
        limit: usize,
        into: &mut VecDeque<Event>,
    ) -> Fetch<Event> {
        self.source.read(after, limit, into)
    }

    /// The last sequence and the state after it.
    pub(crate) fn position(&self) -> (u64, ExecutionState) {
        self.source.position()
    }

    /// Its wake-up and its source, for a follower that wraps this one (the faulty store's).
    #[cfg(any(test, feature = "conformance"))]
    pub(crate) fn into_parts(self) -> (Changes, Arc<dyn EventSource>) {
        (self.changes, self.source)
    }

    /// The wake-up on every append: mark it seen before reading, then wait.
    pub fn changes(&mut self) -> &mut Changes {
        &mut self.changes
    }

    /// How many readers follow the execution now, this one included.
    pub(crate) fn readers(&self) -> usize {
        self.changes.readers()
    }
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("position", &self.position())
            .finish_non_exhaustive()
    }
}
