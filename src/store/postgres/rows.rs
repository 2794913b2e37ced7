//! How the store's values are written to and read from its rows: states as small integers,
//! times as microseconds since the Unix epoch, payloads in the file journal's event codec
//! (compact for the deltas that stream by the thousand and the events every execution has,
//! JSON for the rest), labels as JSON.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_postgres::Row;

use super::error::{PgError, RowError};
use crate::execution::{Event, EventPayload, ExecutionState, Labels};
use crate::store::file::codec;

/// What an event row holds besides its payload, and the overhead the store counts per event.
pub(super) const EVENT_OVERHEAD: usize = 48;

pub(super) fn state_code(state: ExecutionState) -> i16 {
    match state {
        ExecutionState::Accepted => 0,
        ExecutionState::Routing => 1,
        ExecutionState::Running => 2,
        ExecutionState::Succeeded => 3,
        ExecutionState::Failed => 4,
        ExecutionState::Cancelled => 5,
    }
}

pub(super) fn state_of(code: i16) -> Result<ExecutionState, PgError> {
    Ok(match code {
        0 => ExecutionState::Accepted,
        1 => ExecutionState::Routing,
        2 => ExecutionState::Running,
        3 => ExecutionState::Succeeded,
        4 => ExecutionState::Failed,
        5 => ExecutionState::Cancelled,
        other => return Err(RowError::State(other).into()),
    })
}

/// Now, to the microsecond a row keeps: an event this replica hands out from memory is the
/// event any replica reads back, time included.
pub(super) fn now() -> SystemTime {
    time_of(micros(SystemTime::now()))
}

pub(super) fn micros(time: SystemTime) -> i64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

pub(super) fn time_of(micros: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(micros.max(0).cast_unsigned())
}

pub(super) fn payload_bytes(payload: &EventPayload) -> Vec<u8> {
    let mut out = Vec::new();
    codec::event(payload, &mut out);
    out
}

pub(super) fn labels_text(labels: &Labels) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "{}".into())
}

pub(super) fn labels_of(text: &str) -> Result<Arc<Labels>, PgError> {
    serde_json::from_str(text)
        .map(Arc::new)
        .map_err(|e| RowError::Labels(e.to_string()).into())
}

/// Events one row holds at most: an append's events (after the create's first) share rows of
/// this many.
pub(super) const MAX_RUN: usize = 64;

/// An append's events as its rows keep them, written once into one buffer: each event framed
/// as a run's row frames it (its state's code in one byte, its payload's length in four bytes,
/// little-endian, then its payload), one after another. A run's row is then one slice of it,
/// and a row of one event the slice past its frame.
pub(super) struct Framed {
    bytes: Vec<u8>,
    /// Where each event's frame ends.
    ends: Vec<usize>,
}

/// A frame's bytes before its payload.
const FRAME: usize = 5;

impl Framed {
    /// Room for `events` events of a few words each (a text delta's frame is 14 bytes and its
    /// text); larger payloads grow it.
    pub(super) fn with_capacity(events: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(events * 32),
            ends: Vec::with_capacity(events),
        }
    }

    /// Adds an event of `state` with `payload`; the bytes its payload takes.
    pub(super) fn push(&mut self, state: ExecutionState, payload: &EventPayload) -> usize {
        let start = self.bytes.len();
        self.bytes.push(state_code(state).to_le_bytes()[0]);
        self.bytes.extend_from_slice(&[0; 4]);
        codec::event(payload, &mut self.bytes);
        let length = self.bytes.len() - start - FRAME;
        let framed = u32::try_from(length).unwrap_or(u32::MAX).to_le_bytes();
        self.bytes[start + 1..start + FRAME].copy_from_slice(&framed);
        self.ends.push(self.bytes.len());
        length
    }

    /// The payload column of the row of events `events` (positions in the order they were
    /// pushed, not empty), and whether the row is a run: a run's frames, or a lone event's
    /// payload alone.
    pub(super) fn row(&self, events: std::ops::Range<usize>) -> (&[u8], bool) {
        let start = events
            .start
            .checked_sub(1)
            .map_or(0, |before| self.ends[before]);
        let end = self.ends[events.end - 1];
        match events.len() {
            1 => (&self.bytes[start + FRAME..end], false),
            _ => (&self.bytes[start..end], true),
        }
    }
}

/// The events of a row of `sequence, time, state, payload, usage_position, first_sequence`
/// (in that order from column `at`) after `after`, appended to `into`: one event when
/// `first_sequence` is null, else events `first_sequence..=sequence` ([`Framed`]). A row's
/// usage facts take `labels`, and positions one apart up to the row's `usage_position`.
pub(super) fn events_of(
    row: &Row,
    at: usize,
    labels: &Arc<Labels>,
    after: u64,
    into: &mut Vec<Event>,
) -> Result<(), PgError> {
    read_row(row, at, labels, after, false, into)
}

/// [`events_of`] for the usage order: every usage fact of the row, with the events its
/// codec cannot tell from one without decoding them (a run's deltas are skipped unread).
pub(super) fn facts_of(
    row: &Row,
    at: usize,
    labels: &Arc<Labels>,
    into: &mut Vec<Event>,
) -> Result<(), PgError> {
    read_row(row, at, labels, 0, true, into)
}

fn read_row(
    row: &Row,
    at: usize,
    labels: &Arc<Labels>,
    after: u64,
    facts_only: bool,
    into: &mut Vec<Event>,
) -> Result<(), PgError> {
    let start = into.len();
    match row.try_get::<_, Option<i64>>(at + 5)? {
        None => into.push(event_of(row, at)?),
        Some(first) => read_run(row, at, first, after, facts_only, into)?,
    }
    // The last fact is at the row's position, each one before it one below: the ones skipped
    // come first, so counting from the end needs none of them.
    let position: Option<i64> = row.try_get(at + 4)?;
    let mut position = position.unwrap_or(0).cast_unsigned();
    for event in into[start..].iter_mut().rev() {
        if let EventPayload::Usage(fact) = &mut event.payload {
            let fact = Arc::make_mut(fact);
            fact.labels = labels.clone();
            fact.position = position;
            position = position.saturating_sub(1);
        }
    }
    Ok(())
}

/// The event of a row of one, from `sequence, time, state, payload` (in that order from
/// column `at`).
fn event_of(row: &Row, at: usize) -> Result<Event, PgError> {
    let sequence: i64 = row.try_get(at)?;
    let time: i64 = row.try_get(at + 1)?;
    let state: i16 = row.try_get(at + 2)?;
    let bytes: &[u8] = row.try_get(at + 3)?;
    Ok(Event {
        sequence: sequence.cast_unsigned(),
        time: time_of(time),
        state: state_of(state)?,
        payload: codec::decode_event(bytes).map_err(RowError::Payload)?,
    })
}

/// The events of a run's row, from sequence `first` to the row's own, past `after` (and
/// when `facts_only`, those that may be usage facts).
fn read_run(
    row: &Row,
    at: usize,
    first: i64,
    after: u64,
    facts_only: bool,
    into: &mut Vec<Event>,
) -> Result<(), PgError> {
    let last: i64 = row.try_get(at)?;
    let time = time_of(row.try_get(at + 1)?);
    let mut bytes: &[u8] = row.try_get(at + 3)?;
    let broken = || PgError::Row(RowError::Run { first, last });
    for sequence in first.cast_unsigned()..=last.cast_unsigned() {
        let (&[code], rest) = bytes.split_first_chunk::<1>().ok_or_else(broken)?;
        let (length, rest) = rest.split_first_chunk::<4>().ok_or_else(broken)?;
        let length = usize::try_from(u32::from_le_bytes(*length)).map_err(|_| broken())?;
        let (payload, rest) = rest.split_at_checked(length).ok_or_else(broken)?;
        bytes = rest;
        if sequence <= after || (facts_only && !codec::may_be_usage(payload)) {
            continue;
        }
        into.push(Event {
            sequence,
            time,
            state: state_of(i16::from(code))?,
            payload: codec::decode_event(payload).map_err(RowError::Payload)?,
        });
    }
    if !bytes.is_empty() {
        return Err(broken());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::fixtures;

    /// A lone event's row is its payload as `payload_bytes` writes it; a run's is each
    /// event's state, length and payload, one after another.
    #[test]
    fn a_row_of_framed_events_is_a_lone_payload_or_a_run() {
        let events = [
            (ExecutionState::Running, fixtures::attempt_started(1)),
            (ExecutionState::Running, fixtures::text(1, "héllo")),
            (ExecutionState::Running, fixtures::usage(7)),
            (ExecutionState::Succeeded, fixtures::completed(1, "héllo")),
        ];
        let mut framed = Framed::with_capacity(1);
        for (state, payload) in &events {
            assert_eq!(framed.push(*state, payload), payload_bytes(payload).len());
        }
        for (i, (_, payload)) in events.iter().enumerate() {
            assert_eq!(
                framed.row(i..i + 1),
                (payload_bytes(payload).as_slice(), false)
            );
        }
        let run = |from: usize, to: usize| {
            let mut bytes = Vec::new();
            for (state, payload) in &events[from..to] {
                let payload = payload_bytes(payload);
                bytes.push(state_code(*state).to_le_bytes()[0]);
                bytes.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
                bytes.extend_from_slice(&payload);
            }
            bytes
        };
        assert_eq!(framed.row(0..4), (run(0, 4).as_slice(), true));
        // And each frame's payload decodes to its event.
        let (mut bytes, _) = framed.row(0..4);
        for (_, payload) in &events {
            let (length, rest) = bytes[1..].split_first_chunk::<4>().unwrap();
            let (encoded, rest) = rest.split_at(u32::from_le_bytes(*length) as usize);
            assert_eq!(&codec::decode_event(encoded).unwrap(), payload);
            bytes = rest;
        }
        assert!(bytes.is_empty());
        assert_eq!(framed.row(1..3), (run(1, 3).as_slice(), true));
        assert_eq!(framed.row(2..4), (run(2, 4).as_slice(), true));
    }
}
