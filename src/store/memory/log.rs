//! One execution's events in the memory store, in segments of growing capacity (2, 4, ...,
//! up to 64 KiB), each allocated at its full size when the one before fills, and the
//! last trimmed to its events when the execution ends, if it is far from full. An execution of
//! up to 28 events costs one allocation; one of a hundred thousand streamed deltas about 115,
//! with no allocation per event or per append. An event is at most 72 bytes with its text
//! inline (up to 23 bytes) or shared, so readers copy events out instead of holding the
//! record's memory.

use std::collections::VecDeque;
use std::mem::size_of;

use crate::execution::Event;

/// The first segment's capacity: as many events as fit in 2 KiB, room for a short reply's
/// whole sequence. Segments are sized in powers of two bytes, which allocators serve without
/// rounding up (an event is 72 bytes, and 4 096 of them would take a 320 KiB block).
const FIRST: usize = 2048 / size_of::<Event>();
/// The largest segment's capacity: as many events as fit in 64 KiB.
const LARGEST: usize = 64 * 1024 / size_of::<Event>();

#[derive(Debug, Default)]
pub(super) struct Log {
    /// Each segment, after the sequence of the event before its first.
    segments: Vec<(u64, Vec<Event>)>,
    len: u64,
}

/// The capacity after `capacity`: twice the bytes, up to the largest.
fn grown(capacity: usize) -> usize {
    let bytes = (capacity * size_of::<Event>()).next_power_of_two() * 2;
    (bytes / size_of::<Event>()).min(LARGEST)
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
                .map_or(FIRST, |(_, segment)| grown(segment.capacity()));
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

    /// Gives back the last segment's empty slots when they are more than a quarter of it:
    /// once an execution has ended, no event will fill them.
    pub(super) fn shrink(&mut self) {
        // Not for a quarter or less of one segment: not worth a copy.
        if let Some((_, segment)) = self.segments.last_mut()
            && segment.len() < segment.capacity() / 4 * 3
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
        // 28 + 56 + 113 slots: 2, 4 and 8 KiB.
        assert_eq!(log.segments.len(), 3);
        for after in [0, 1, 27, 28, 29, 83, 84, 85, 99, 100, 101] {
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
        for sequence in 1..=40 {
            log.push(event(sequence));
        }
        log.truncate(FIRST as u64);
        assert_eq!((log.len(), log.segments.len()), (FIRST as u64, 1));
        log.push(event(29));
        let last: Vec<u64> = log.events(27).map(|e| e.sequence).collect();
        assert_eq!(last, [28, 29]);
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
