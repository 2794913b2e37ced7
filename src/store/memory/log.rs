//! One execution's events in the memory store, kept as the batches they were appended in:
//! each batch is one allocation, and the record holds one entry per batch, found by sequence
//! with a binary search. A burst of output costs the record one entry (and no reference
//! count per event) instead of one per event.

use std::sync::Arc;

use crate::execution::{Event, StoredEvent};

#[derive(Debug, Default)]
pub(super) struct Log {
    /// Each batch, after the sequence of the event before its first.
    batches: Vec<(u64, Arc<[Event]>)>,
    len: u64,
}

impl Log {
    /// The number of events, which is also the last one's sequence.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `batch`, whose events are numbered `len + 1`, `len + 2`, ...
    pub(super) fn push(&mut self, batch: Arc<[Event]>) {
        if !batch.is_empty() {
            self.batches.push((self.len, batch.clone()));
            self.len += batch.len() as u64;
        }
    }

    /// The events after sequence `after`, in order.
    pub(super) fn events(&self, after: u64) -> impl Iterator<Item = &Event> {
        self.entries(after).map(|(batch, index)| &batch[index])
    }

    /// Up to `limit` events after sequence `after`, to hand out.
    pub(super) fn read(&self, after: u64, limit: usize) -> Vec<StoredEvent> {
        let left = usize::try_from(self.len.saturating_sub(after)).unwrap_or(usize::MAX);
        let mut page = Vec::with_capacity(left.min(limit));
        page.extend(
            self.entries(after)
                .take(limit)
                .map(|(batch, index)| StoredEvent::in_batch(batch.clone(), index)),
        );
        page
    }

    fn entries(&self, after: u64) -> impl Iterator<Item = (&Arc<[Event]>, usize)> {
        // The batch holding sequence `after + 1` is the last one that starts at or before it.
        let first = self
            .batches
            .partition_point(|(before, _)| *before <= after)
            .saturating_sub(1);
        self.batches[first..]
            .iter()
            .flat_map(move |(before, batch)| {
                let skip = usize::try_from(after.saturating_sub(*before)).unwrap_or(usize::MAX);
                (skip.min(batch.len())..batch.len()).map(move |index| (batch, index))
            })
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::execution::{EventPayload, ExecutionId, ExecutionState};

    fn batch(sequences: std::ops::Range<u64>) -> Arc<[Event]> {
        sequences
            .map(|sequence| Event {
                execution_id: ExecutionId::new(),
                sequence,
                time: SystemTime::UNIX_EPOCH,
                state: ExecutionState::Running,
                payload: EventPayload::Progress {
                    attempt: 0,
                    message: String::new(),
                },
            })
            .collect()
    }

    #[test]
    fn finds_every_position_across_batches() {
        let mut log = Log::default();
        assert_eq!(log.read(0, 10), []);
        for range in [1..2, 2..5, 5..6, 6..10, 10..10] {
            log.push(batch(range));
        }
        assert_eq!(log.len(), 9);
        for after in 0..=10 {
            let read: Vec<u64> = log.read(after, 100).iter().map(|e| e.sequence).collect();
            let want: Vec<u64> = (after + 1..=9).collect();
            assert_eq!(read, want, "after {after}");
            let events: Vec<u64> = log.events(after).map(|e| e.sequence).collect();
            assert_eq!(events, want, "after {after}");
            let page: Vec<u64> = log.read(after, 2).iter().map(|e| e.sequence).collect();
            assert_eq!(page, want[..want.len().min(2)], "after {after}");
        }
    }
}
