//! One execution's events in the memory store, in segments of growing capacity (2, 4, ...,
//! up to 64 KiB), each allocated at its full size when the one before fills, and the
//! last trimmed to its events when the execution ends, if it is far from full. An execution of
//! up to 36 events costs one allocation; one of a hundred thousand streamed deltas about 90,
//! with no allocation per event or per append. An event is kept in 56 bytes: its sequence is
//! its position and its time a count of nanoseconds, and its text is inline (up to 23 bytes) or
//! shared, so readers copy events out instead of holding the record's memory.

use std::collections::VecDeque;
use std::mem::size_of;
use std::time::{Duration, SystemTime};

use crate::execution::{Event, EventPayload, ExecutionState};

/// An append time as the log keeps it: nanoseconds since the Unix epoch (an append time is
/// never before it). The events of one append share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Nanos(u64);

impl Nanos {
    pub(super) fn of(time: SystemTime) -> Self {
        let since = time.duration_since(SystemTime::UNIX_EPOCH);
        Self(since.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }

    fn time(self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(self.0)
    }
}

/// An event as the log keeps it.
#[derive(Debug)]
struct Stored {
    payload: EventPayload,
    at: Nanos,
    state: ExecutionState,
}

// What a streamed delta costs the store, beyond text longer than 23 bytes.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<Stored>() <= 56);

impl Stored {
    fn event(&self, sequence: u64, time: SystemTime) -> Event {
        Event {
            sequence,
            time,
            state: self.state,
            payload: self.payload.clone(),
        }
    }
}

/// Copies stored events out, turning each append time into a `SystemTime` once for the run
/// of events that share it.
#[derive(Default)]
struct Copier(Option<(Nanos, SystemTime)>);

impl Copier {
    fn copy(&mut self, sequence: u64, stored: &Stored) -> Event {
        let time = match self.0 {
            Some((at, time)) if at == stored.at => time,
            _ => {
                let time = stored.at.time();
                self.0 = Some((stored.at, time));
                time
            }
        };
        stored.event(sequence, time)
    }
}

/// The first segment's capacity: as many events as fit in 2 KiB, room for a short reply's
/// whole sequence. Segments are sized in powers of two bytes, which allocators serve without
/// rounding up (4 096 events of 72 bytes would have taken a 320 KiB block).
const FIRST: usize = 2048 / size_of::<Stored>();
/// The largest segment's capacity: as many events as fit in 64 KiB.
const LARGEST: usize = 64 * 1024 / size_of::<Stored>();

#[derive(Debug, Default)]
pub(super) struct Log {
    /// Each segment, after the sequence of the event before its first.
    segments: Vec<(u64, Vec<Stored>)>,
    len: u64,
}

/// The capacity after `capacity`: twice the bytes, up to the largest.
fn grown(capacity: usize) -> usize {
    let bytes = (capacity * size_of::<Stored>()).next_power_of_two() * 2;
    (bytes / size_of::<Stored>()).min(LARGEST)
}

impl Log {
    /// The number of events, which is also the last one's sequence.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Appends the event whose sequence is `len + 1`.
    pub(super) fn push(&mut self, at: Nanos, state: ExecutionState, payload: EventPayload) {
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
            segment.push(Stored { payload, at, state });
            self.len += 1;
        }
    }

    /// The segments from the one holding sequence `after + 1`: the last one that starts at or
    /// before it.
    fn segments_after(&self, after: u64) -> &[(u64, Vec<Stored>)] {
        let first = self
            .segments
            .partition_point(|(before, _)| *before <= after)
            .saturating_sub(1);
        &self.segments[first..]
    }

    /// The events after sequence `after`, in order, copied out.
    pub(super) fn events(&self, after: u64) -> impl Iterator<Item = Event> {
        let mut copier = Copier::default();
        self.segments_after(after)
            .iter()
            .flat_map(move |(before, segment)| {
                let skip = usize::try_from(after.saturating_sub(*before)).unwrap_or(usize::MAX);
                let first = before + 1 + skip as u64;
                let slice = segment.get(skip..).unwrap_or_default();
                (first..).zip(slice)
            })
            .map(move |(sequence, stored)| copier.copy(sequence, stored))
    }

    /// The state after event `sequence` (none before the first).
    pub(super) fn state_at(&self, sequence: u64) -> Option<ExecutionState> {
        let index = sequence.checked_sub(1)?;
        let (before, segment) = self.segments_after(index).first()?;
        let at = usize::try_from(index - before).ok()?;
        segment.get(at).map(|stored| stored.state)
    }

    /// The last event, copied out.
    pub(super) fn last(&self) -> Option<Event> {
        let (_, segment) = self.segments.last()?;
        segment
            .last()
            .map(|stored| stored.event(self.len, stored.at.time()))
    }

    /// Copies up to `limit` events after sequence `after` to the back of `into`, a slice
    /// of a segment at a time.
    pub(super) fn read(&self, after: u64, limit: usize, into: &mut VecDeque<Event>) {
        let mut left = limit;
        let mut copier = Copier::default();
        for (before, segment) in self.segments_after(after) {
            if left == 0 {
                break;
            }
            let skip = usize::try_from(after.saturating_sub(*before)).unwrap_or(usize::MAX);
            let slice = segment.get(skip..).unwrap_or_default();
            let slice = &slice[..slice.len().min(left)];
            let first = before + 1 + skip as u64;
            into.extend(
                (first..)
                    .zip(slice)
                    .map(|(sequence, stored)| copier.copy(sequence, stored)),
            );
            left -= slice.len();
        }
    }

    /// Gives back the last segment's empty slots when they are more than half of it:
    /// once an execution has ended, no event will fill them.
    pub(super) fn shrink(&mut self) {
        // Not for half a segment or less: not worth a copy.
        if let Some((_, segment)) = self.segments.last_mut()
            && segment.len() < segment.capacity() / 2
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
            .map(|(_, segment)| segment.capacity() * size_of::<Stored>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::execution::{EventPayload, ExecutionState};

    fn push(log: &mut Log, event: Event) {
        log.push(Nanos::of(event.time), event.state, event.payload);
    }

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
            push(&mut log, event(sequence));
        }
        assert_eq!(log.len(), 100);
        // 36 + 73 slots: 2 and 4 KiB.
        assert_eq!(log.segments.len(), 2);
        let first = FIRST as u64;
        for after in [0, 1, first - 1, first, first + 1, 99, 100, 101] {
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
    fn events_come_back_as_they_were_pushed() {
        let mut log = Log::default();
        let pushed: Vec<Event> = (1..=3)
            .map(|sequence| Event {
                time: SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789 + sequence),
                state: ExecutionState::Succeeded,
                payload: EventPayload::TextDelta {
                    attempt: 2,
                    text: "a text longer than twenty-three bytes".into(),
                },
                ..event(sequence as u64)
            })
            .collect();
        for event in &pushed {
            push(&mut log, event.clone());
        }
        assert_eq!(log.events(0).collect::<Vec<_>>(), pushed);
        let mut read = VecDeque::new();
        log.read(1, 10, &mut read);
        assert_eq!(read, &pushed[1..]);
    }

    #[test]
    fn truncating_takes_back_the_last_events_and_their_segments() {
        let mut log = Log::default();
        let first = FIRST as u64;
        for sequence in 1..=first + 4 {
            push(&mut log, event(sequence));
        }
        log.truncate(first);
        assert_eq!((log.len(), log.segments.len()), (first, 1));
        push(&mut log, event(first + 1));
        let last: Vec<u64> = log.events(first - 1).map(|e| e.sequence).collect();
        assert_eq!(last, [first, first + 1]);
        log.truncate(0);
        assert_eq!((log.len(), log.segments.len(), log.bytes()), (0, 0, 0));
    }

    #[test]
    fn segments_stop_growing_at_their_largest() {
        let mut log = Log::default();
        for sequence in 1..=20_000 {
            push(&mut log, event(sequence));
        }
        let largest = log.segments.iter().map(|(_, s)| s.capacity()).max();
        assert_eq!(largest, Some(LARGEST));
        // No more room than one largest segment's slack.
        let slack = log.bytes() / size_of::<Stored>() - 20_000;
        assert!(slack < LARGEST, "{slack}");
        log.shrink();
        assert_eq!(log.bytes(), 20_000 * size_of::<Stored>());
        let all: Vec<u64> = log.events(19_990).map(|e| e.sequence).collect();
        assert_eq!(all, (19_991..=20_000).collect::<Vec<_>>());
    }
}
