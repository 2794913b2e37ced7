//! One execution's events in the memory store, in segments of growing capacity (16, 32, ...,
//! up to 4 096 events), each allocated at its full size when the one before fills. An
//! execution of twenty events costs one small allocation; one of a hundred thousand streamed
//! deltas about twenty-five, with no allocation per event or per append and no slack beyond
//! the last segment. An event is at most 72 bytes with its text inline (up to 23 bytes) or
//! shared, so readers copy events out instead of holding the record's memory.

use crate::execution::Event;

/// The first segment's capacity.
const FIRST: usize = 16;
/// The largest segment's capacity.
const LARGEST: usize = 4096;

#[derive(Debug, Default)]
pub(super) struct Log {
    /// Each segment, after the sequence of the event before its first.
    segments: Vec<(u64, Vec<Event>)>,
    len: u64,
}

impl Log {
    /// The number of events, which is also the last one's sequence.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `event`, whose sequence is `len + 1`.
    pub(super) fn push(&mut self, event: Event) {
        let full = self
            .segments
            .last()
            .is_none_or(|(_, segment)| segment.len() == segment.capacity());
        if full {
            let capacity = self
                .segments
                .last()
                .map_or(FIRST, |(_, segment)| (segment.capacity() * 2).min(LARGEST));
            self.segments.push((self.len, Vec::with_capacity(capacity)));
        }
        if let Some((_, segment)) = self.segments.last_mut() {
            segment.push(event);
            self.len += 1;
        }
    }

    /// The events after sequence `after`, in order.
    pub(super) fn events(&self, after: u64) -> impl Iterator<Item = &Event> {
        // The segment holding sequence `after + 1` is the last one that starts at or before it.
        let first = self
            .segments
            .partition_point(|(before, _)| *before <= after)
            .saturating_sub(1);
        self.segments[first..]
            .iter()
            .flat_map(move |(before, segment)| {
                let skip = usize::try_from(after.saturating_sub(*before)).unwrap_or(usize::MAX);
                segment.iter().skip(skip)
            })
    }

    /// Up to `limit` events after sequence `after`, copied out.
    pub(super) fn read(&self, after: u64, limit: usize) -> Vec<Event> {
        let left = usize::try_from(self.len.saturating_sub(after)).unwrap_or(usize::MAX);
        let mut page = Vec::with_capacity(left.min(limit));
        page.extend(self.events(after).take(limit).cloned());
        page
    }

    /// Bytes the segments take, full capacity counted.
    pub(super) fn bytes(&self) -> usize {
        self.segments
            .iter()
            .map(|(_, segment)| segment.capacity() * std::mem::size_of::<Event>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::execution::{EventPayload, ExecutionState};

    fn event(sequence: u64) -> Event {
        Event {
            sequence,
            time: SystemTime::UNIX_EPOCH,
            state: ExecutionState::Running,
            payload: EventPayload::Progress {
                attempt: 0,
                message: "".into(),
            },
        }
    }

    #[test]
    fn finds_every_position_across_segments() {
        let mut log = Log::default();
        assert_eq!(log.read(0, 10), []);
        for sequence in 1..=100 {
            log.push(event(sequence));
        }
        assert_eq!(log.len(), 100);
        // 16 + 32 + 64 slots.
        assert_eq!(log.segments.len(), 3);
        for after in [0, 1, 15, 16, 17, 47, 48, 49, 99, 100, 101] {
            let read: Vec<u64> = log.read(after, 1000).iter().map(|e| e.sequence).collect();
            let want: Vec<u64> = (after + 1..=100).collect();
            assert_eq!(read, want, "after {after}");
            let events: Vec<u64> = log.events(after).map(|e| e.sequence).collect();
            assert_eq!(events, want, "after {after}");
            let page: Vec<u64> = log.read(after, 2).iter().map(|e| e.sequence).collect();
            assert_eq!(page, want[..want.len().min(2)], "after {after}");
        }
    }

    #[test]
    fn segments_stop_growing_at_their_largest() {
        let mut log = Log::default();
        for sequence in 1..=20_000 {
            log.push(event(sequence));
        }
        let largest = log.segments.iter().map(|(_, s)| s.capacity()).max();
        assert_eq!(largest, Some(LARGEST));
        // No more room than one largest segment's slack.
        let slack = log.bytes() / std::mem::size_of::<Event>() - 20_000;
        assert!(slack < LARGEST, "{slack}");
    }
}
