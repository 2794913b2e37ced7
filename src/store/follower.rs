//! A reader's hold on one execution. A store hands one out per reader; it reads the
//! execution's events from any cursor and wakes on every append, and it keeps those events
//! readable after the store lets the execution go: retention and capacity never wait for a
//! slow reader, and a reader that has begun still reaches the last event. What a reader can
//! keep alive this way is one execution's record, and readers are bounded (streams per
//! connection, connections, watchers per execution).

use std::collections::VecDeque;
use std::sync::Arc;

use super::Changes;
use crate::execution::{Event, ExecutionState};

/// Where a follower reads: one execution's events as its store keeps them.
pub trait EventSource: Send + Sync {
    /// Up to `limit` events with `sequence > after`, copied to the back of `into` (a
    /// reader's queue, reused from read to read).
    fn read(&self, after: u64, limit: usize, into: &mut VecDeque<Event>);

    /// The last sequence and the state after it.
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
    pub(crate) fn read(&self, after: u64, limit: usize) -> Vec<Event> {
        let mut events = VecDeque::new();
        self.source.read(after, limit, &mut events);
        events.into()
    }

    /// Up to `limit` events with `sequence > after`, to the back of `into`.
    pub(crate) fn read_into(&self, after: u64, limit: usize, into: &mut VecDeque<Event>) {
        self.source.read(after, limit, into);
    }

    /// The last sequence and the state after it.
    pub(crate) fn position(&self) -> (u64, ExecutionState) {
        self.source.position()
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
