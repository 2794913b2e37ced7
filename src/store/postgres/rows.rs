//! How the store's values are written to and read from its rows: states as small integers,
//! times as microseconds since the Unix epoch, payloads in the file journal's event codec
//! (compact for the deltas that stream by the thousand, JSON for the rest), labels as JSON.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_postgres::Row;

use super::PgError;
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
        other => return Err(PgError::Row(format!("unknown state {other}"))),
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
        .map_err(|e| PgError::Row(format!("labels do not decode: {e}")))
}

/// An event from a row of `sequence, time, state, payload, usage_position` (in that order
/// from column `at`), its usage fact given `labels` and its position.
pub(super) fn event_of(row: &Row, at: usize, labels: &Arc<Labels>) -> Result<Event, PgError> {
    let sequence: i64 = row.try_get(at)?;
    let time: i64 = row.try_get(at + 1)?;
    let state: i16 = row.try_get(at + 2)?;
    let bytes: &[u8] = row.try_get(at + 3)?;
    let position: Option<i64> = row.try_get(at + 4)?;
    let mut payload = codec::decode_event(bytes).map_err(PgError::Row)?;
    if let EventPayload::Usage(fact) = &mut payload {
        let fact = Arc::make_mut(fact);
        fact.labels = labels.clone();
        fact.position = position.unwrap_or(0).cast_unsigned();
    }
    Ok(Event {
        sequence: sequence.cast_unsigned(),
        time: time_of(time),
        state: state_of(state)?,
        payload,
    })
}
