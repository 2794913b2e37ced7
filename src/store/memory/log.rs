//! One execution's events in the memory store, in segments of growing capacity (8, 16, ...,
//! up to 4 096 events), each allocated at its full size when the one before fills, and the
//! last trimmed to its events when the execution ends. An execution of a few dozen events
//! costs two or three allocations; one of a hundred thousand streamed deltas about thirty,
//! with no allocation per event or per append. An event is at most 72 bytes with its text
//! inline (up to 23 bytes) or shared, so readers copy events out instead of holding the
//! record's memory.

use std::collections::VecDeque;

use crate::execution::Event;

/// The first segment's capacity.
const FIRST: usize = 8;
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

    /// The segments from the one holding sequence `after + 1`: the last one that starts at or
    /// before it.
    fn segments_after(&self, after: u64) -> &[(u64, Vec<Event>)] {
        let first = self
            .segments
            .partition_point(|(before, _)| *before <= after)
            .saturating_sub(1);
        &self.segments[first..]
    }

    /// The events after sequence `after`, in order.
    pub(super) fn events(&self, after: u64) -> impl Iterator<Item = &Event> {
        self.segments_after(after)
            .iter()
            .flat_map(move |(before, segment)| {
                let skip = usize::try_from(after.saturating_sub(*before)).unwrap_or(usize::MAX);
                segment.iter().skip(skip)
            })
    }

    /// Copies up to `limit` events after sequence `after` to the back of `into`, a slice
    /// of a segment at a time.
    pub(super) fn read(&self, after: u64, limit: usize, into: &mut VecDeque<Event>) {
        let mut left = limit;
        for (before, segment) in self.segments_after(after) {
            if left == 0 {
                break;
            }
            let skip = usize::try_from(after.saturating_sub(*before)).unwrap_or(usize::MAX);
            let slice = segment.get(skip..).unwrap_or_default();
            let slice = &slice[..slice.len().min(left)];
            into.extend(slice.iter().cloned());
            left -= slice.len();
        }
    }

    /// Gives back the last segment's empty slots: once an execution has ended, no event
    /// will fill them, and a short execution would otherwise keep more slots than events.
    pub(super) fn shrink(&mut self) {
        if let Some((_, segment)) = self.segments.last_mut()
            && segment.len() < segment.capacity()
        {
            // Moved to an allocation of its size: an allocator may keep a block shrunk in
            // place (mimalloc does, down to half), which would give nothing back.
            let mut trimmed = Vec::with_capacity(segment.len());
            trimmed.append(segment);
            *segment = trimmed;
        }
    }

    /// Takes back the events after the first `len`.
    pub(super) fn truncate(&mut self, len: u64) {
        while self.len > len {
            let Some((_, segment)) = self.segments.last_mut() else {
                break;
            };
            segment.pop();
            self.len -= 1;
            if segment.is_empty() {
                self.segments.pop();
            }
        }
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
        assert_eq!(log.events(0).count(), 0);
        for sequence in 1..=100 {
            log.push(event(sequence));
        }
        assert_eq!(log.len(), 100);
        // 8 + 16 + 32 + 64 slots.
        assert_eq!(log.segments.len(), 4);
        for after in [0, 1, 7, 8, 9, 23, 24, 25, 55, 56, 57, 99, 100, 101] {
            let events: Vec<u64> = log.events(after).map(|e| e.sequence).collect();
            let want: Vec<u64> = (after + 1..=100).collect();
            assert_eq!(events, want, "after {after}");
            for limit in [0, 1, 2, 17, 1000] {
                let mut page = VecDeque::new();
                log.read(after, limit, &mut page);
                let read: Vec<u64> = page.iter().map(|e| e.sequence).collect();
                assert_eq!(
                    read,
                    want[..want.len().min(limit)],
                    "after {after}, {limit}"
                );
            }
        }
    }

    #[test]
    fn truncating_takes_back_the_last_events_and_their_segments() {
        let mut log = Log::default();
        for sequence in 1..=20 {
            log.push(event(sequence));
        }
        log.truncate(8);
        assert_eq!((log.len(), log.segments.len()), (8, 1));
        log.push(event(9));
        let last: Vec<u64> = log.events(7).map(|e| e.sequence).collect();
        assert_eq!(last, [8, 9]);
        log.truncate(0);
        assert_eq!((log.len(), log.segments.len(), log.bytes()), (0, 0, 0));
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
        log.shrink();
        assert_eq!(log.bytes(), 20_000 * std::mem::size_of::<Event>());
        let all: Vec<u64> = log.events(19_990).map(|e| e.sequence).collect();
        assert_eq!(all, (19_991..=20_000).collect::<Vec<_>>());
    }
}
