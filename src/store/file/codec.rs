//! What a journal record says, before it is sealed: an execution created, events appended to
//! one, or one expired. Events that stream by the thousand (text, tool-argument and reasoning
//! deltas, progress notes) and those every execution has (its routing plan, each attempt's
//! start and usage facts, its result) are written in a compact binary form; the rest (tool
//! calls, failures, a failed attempt's record) as the JSON of their payload, as is the
//! acceptance in a create record (the PostgreSQL store, which keeps it as an event row, writes
//! it compact). States are not written: replay recomputes them through the state machine, as
//! the store did when it appended.
//!
//! ```text
//! create: 1 | id [16] | time u64 | idempotent u8 | fingerprint [16] | key str | labels json | accepted json
//! append: 2 | id [16] | first sequence u64 | time u64 | count u32 | event*
//! expire: 3 | id [16]
//! follows: 4 | file u64 | records u64
//! event:  1 text delta      | attempt u32 | text str
//!         2 arguments delta | attempt u32 | index u32 | delta str
//!         3 reasoning delta | attempt u32 | piece u8 | text str
//!         4 progress        | attempt u32 | message str
//!         5 usage fact      | attempt u32 | quantity u64 | position u64 | source u8
//!                           | unit str | provider str | model str
//!         6 attempt started | attempt u32 | started at instant | provider str | model str
//!         7 completed       | attempt u32 | finish reason u8 | provider str | model str
//!                           | text str | count u32 | (id str | name str | arguments str)*
//!                           | count u32 | (text str | signature str | redacted str)*
//!         8 accepted        | deadline instant | max attempts u32 | fallback u8
//!                           | retry budget duration | delivery u8 | priority u8
//!                           | ability str | policy str
//!                             (the PostgreSQL store's first event row; never in an append)
//!         9 routing         | policy str | tried anyway u8 | ended before routing maybe
//!                           | capabilities names | count u32 | (provider str | model str
//!                           | kept u8 | reason maybe | missing names
//!                           | ejected u8 [reason str | until u8 [instant]])*
//!         0 other           | payload json
//! str, json: length u32 | bytes; duration: seconds u64 | nanoseconds u32; instant: the
//! duration since the Unix epoch; maybe: 0, or 1 and a str; names: count u32 | str*
//! ```
//! Integers are little-endian; a record's times are nanoseconds since the Unix epoch. Decoding
//! never panics: any input is a record or an error. Kinds 5 to 9 came with the journal's
//! format 3 and the PostgreSQL schema's version 5: before them, these events were written as
//! other events are, and are read so still.

use std::borrow::Borrow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::error::Malformed;
use crate::execution::{
    Event, EventPayload, ExecutionId, Fingerprint, Idempotency, Labels, ReasoningPiece, Text,
};
use crate::store::memory::Kept;

mod compact;

const CREATE: u8 = 1;
const APPEND: u8 = 2;
const EXPIRE: u8 = 3;
const FOLLOWS: u8 = 4;

const OTHER: u8 = 0;
const TEXT: u8 = 1;
const ARGUMENTS: u8 = 2;
const REASONING: u8 = 3;
const PROGRESS: u8 = 4;
const USAGE: u8 = 5;
const STARTED: u8 = 6;
const COMPLETED: u8 = 7;
const ACCEPTED: u8 = 8;
const ROUTING: u8 = 9;

/// A decoded record.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Record {
    /// A new execution and its first event.
    Create {
        id: ExecutionId,
        at: SystemTime,
        idempotency: Option<Idempotency>,
        labels: Arc<Labels>,
        accepted: EventPayload,
    },
    /// Events `first..` of an execution, appended together at `at`.
    Append {
        id: ExecutionId,
        first: u64,
        at: SystemTime,
        payloads: Vec<EventPayload>,
    },
    /// The execution left the store with its identities.
    Expire { id: ExecutionId },
    /// A segment's first record: the file before it, and how many records that file held
    /// when this one began (so a file cut at a record boundary, or gone, is found).
    Follows { file: u64, records: u64 },
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A length or a count, in four bytes.
fn put_count(out: &mut Vec<u8>, count: usize) {
    out.extend_from_slice(&u32::try_from(count).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, bytes: &[u8]) {
    put_count(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_json<T: serde::Serialize>(out: &mut Vec<u8>, value: &T) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    // Serializing plain data into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
    let len = u32::try_from(out.len() - at - 4).unwrap_or(u32::MAX);
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// A create record.
pub(super) fn create(
    id: ExecutionId,
    at: SystemTime,
    idempotency: Option<&Idempotency>,
    labels: &Labels,
    accepted: &EventPayload,
    out: &mut Vec<u8>,
) {
    out.push(CREATE);
    out.extend_from_slice(&id.to_bytes());
    out.extend_from_slice(&nanos(at).to_le_bytes());
    out.push(u8::from(idempotency.is_some()));
    let fingerprint = idempotency.map_or(0, |i| i.fingerprint.0);
    out.extend_from_slice(&fingerprint.to_le_bytes());
    put_str(out, idempotency.map_or("", |i| &i.key).as_bytes());
    put_json(out, labels);
    put_json(out, accepted);
}

/// An append record's head; `event` follows for each of `count` events.
fn append(id: ExecutionId, first: u64, at: SystemTime, count: u32, out: &mut Vec<u8>) {
    out.push(APPEND);
    out.extend_from_slice(&id.to_bytes());
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&nanos(at).to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
}

/// The create record of `kept`, whose first event is `first`.
pub(super) fn created(kept: &Kept, first: &Event, out: &mut Vec<u8>) {
    create(
        kept.id,
        first.time,
        kept.idempotency.as_ref(),
        &kept.labels,
        &first.payload,
        out,
    );
}

/// The append record of `events` of `id`, appended together (they share a time).
pub(super) fn appended<E: Borrow<Event>>(
    id: ExecutionId,
    events: impl IntoIterator<Item = E>,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    let mut count = 0u32;
    for event in events {
        let event = event.borrow();
        if count == 0 {
            append(id, event.sequence, event.time, 0, out);
        }
        self::event(&event.payload, out);
        count += 1;
    }
    if let Some(field) = out.get_mut(start + COUNT_AT..start + COUNT_AT + 4) {
        field.copy_from_slice(&count.to_le_bytes());
    }
}

/// Where an append record's count lies: after its kind, id, first sequence and time.
const COUNT_AT: usize = 1 + 16 + 8 + 8;

/// One event of an append record: also how the PostgreSQL store keeps an event's payload.
pub(in crate::store) fn event(payload: &EventPayload, out: &mut Vec<u8>) {
    match payload {
        EventPayload::TextDelta { attempt, text } => {
            out.push(TEXT);
            out.extend_from_slice(&attempt.to_le_bytes());
            put_str(out, text.as_bytes());
        }
        EventPayload::ToolCallArgumentsDelta {
            attempt,
            index,
            delta,
        } => {
            out.push(ARGUMENTS);
            out.extend_from_slice(&attempt.to_le_bytes());
            out.extend_from_slice(&index.to_le_bytes());
            put_str(out, delta.as_bytes());
        }
        EventPayload::ReasoningDelta {
            attempt,
            piece,
            text,
        } => {
            out.push(REASONING);
            out.extend_from_slice(&attempt.to_le_bytes());
            out.push(match piece {
                ReasoningPiece::Text => 0,
                ReasoningPiece::Signature => 1,
                ReasoningPiece::Redacted => 2,
            });
            put_str(out, text.as_bytes());
        }
        EventPayload::Progress { attempt, message } => {
            out.push(PROGRESS);
            out.extend_from_slice(&attempt.to_le_bytes());
            put_str(out, message.as_bytes());
        }
        EventPayload::Accepted(acceptance) => compact::accepted(acceptance, out),
        EventPayload::Usage(fact) => compact::usage(fact, out),
        EventPayload::AttemptStarted(start) => compact::started(start, out),
        EventPayload::Completed(result) => compact::completed(result, out),
        EventPayload::Routing(plan) => compact::routing(plan, out),
        other => {
            out.push(OTHER);
            put_json(out, other);
        }
    }
}

/// `payload` as releases before the journal's format 3 wrote any event but a delta or a note:
/// its JSON.
#[cfg(test)]
pub(in crate::store) fn as_json(payload: &EventPayload) -> Vec<u8> {
    let mut out = vec![OTHER];
    put_json(&mut out, payload);
    out
}

/// An expire record.
pub(super) fn expire(id: ExecutionId, out: &mut Vec<u8>) {
    out.push(EXPIRE);
    out.extend_from_slice(&id.to_bytes());
}

/// A follows record.
pub(super) fn follows(file: u64, records: u64, out: &mut Vec<u8>) {
    out.push(FOLLOWS);
    out.extend_from_slice(&file.to_le_bytes());
    out.extend_from_slice(&records.to_le_bytes());
}

/// A record's bytes: what [`decode`] reads back as it.
pub(super) fn encode(record: &Record, out: &mut Vec<u8>) {
    match record {
        Record::Create {
            id,
            at,
            idempotency,
            labels,
            accepted,
        } => create(*id, *at, idempotency.as_ref(), labels, accepted, out),
        Record::Append {
            id,
            first,
            at,
            payloads,
        } => {
            let count = u32::try_from(payloads.len()).unwrap_or(u32::MAX);
            append(*id, *first, *at, count, out);
            for payload in payloads {
                event(payload, out);
            }
        }
        Record::Expire { id } => expire(*id, out),
        Record::Follows { file, records } => follows(*file, *records, out),
    }
}

/// Whether an event's bytes, as [`event`] wrote them, may hold a usage fact: a compact fact,
/// or (as earlier releases wrote facts) another event's JSON. The PostgreSQL store's usage
/// order skips the rest unread.
#[cfg(feature = "postgres")]
pub(in crate::store) fn may_be_usage(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(&(USAGE | OTHER)))
}

/// One event's payload as [`event`] wrote it (`execution.accepted` included); the error says
/// what is wrong. The PostgreSQL store keeps events in this form.
#[cfg(any(test, feature = "postgres", feature = "fuzzing"))]
pub(in crate::store) fn decode_event(bytes: &[u8]) -> Result<EventPayload, Malformed> {
    let mut r = Reader(bytes);
    let payload = match r.0.first() {
        Some(&OTHER) => {
            r.u8()?;
            r.json()?
        }
        Some(&ACCEPTED) => {
            r.u8()?;
            EventPayload::Accepted(Arc::new(r.accepted()?))
        }
        _ => r.event()?,
    };
    if !r.0.is_empty() {
        return Err(Malformed::Trailing {
            after: "event",
            bytes: r.0.len(),
        });
    }
    Ok(payload)
}

/// Reads a record; the error says what is wrong.
pub(super) fn decode(body: &[u8]) -> Result<Record, Malformed> {
    let mut r = Reader(body);
    let record = match r.u8()? {
        CREATE => {
            let id = r.id()?;
            let at = r.time()?;
            let idempotent = r.u8()? == 1;
            let fingerprint = u128::from_le_bytes(r.array()?);
            let key = r.str()?;
            let idempotency = idempotent.then(|| Idempotency {
                key: key.to_owned(),
                fingerprint: Fingerprint(fingerprint),
            });
            let labels: Labels = r.json()?;
            let accepted: EventPayload = r.json()?;
            if !matches!(accepted, EventPayload::Accepted(_)) {
                return Err(Malformed::NotAccepted);
            }
            Record::Create {
                id,
                at,
                idempotency,
                labels: Arc::new(labels),
                accepted,
            }
        }
        APPEND => {
            let id = r.id()?;
            let first = r.u64()?;
            let at = r.time()?;
            let count = r.u32()?;
            // Each event takes at least 5 bytes: a count beyond what is left is damage.
            if usize::try_from(count).unwrap_or(usize::MAX) > r.0.len() / 5 + 1 {
                return Err(Malformed::Count {
                    count,
                    bytes: r.0.len(),
                });
            }
            let mut payloads = Vec::with_capacity(count as usize);
            for _ in 0..count {
                payloads.push(r.event()?);
            }
            if first == 0 {
                return Err(Malformed::SequenceZero);
            }
            Record::Append {
                id,
                first,
                at,
                payloads,
            }
        }
        EXPIRE => Record::Expire { id: r.id()? },
        FOLLOWS => Record::Follows {
            file: r.u64()?,
            records: r.u64()?,
        },
        kind => return Err(Malformed::RecordKind(kind)),
    };
    if !r.0.is_empty() {
        return Err(Malformed::Trailing {
            after: "record",
            bytes: r.0.len(),
        });
    }
    Ok(record)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.0.len() < n {
            return Err(Malformed::Short {
                left: self.0.len(),
                needed: n,
            });
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn id(&mut self) -> Result<ExecutionId, Malformed> {
        Ok(ExecutionId::from_bytes(self.array()?))
    }

    fn time(&mut self) -> Result<SystemTime, Malformed> {
        Ok(SystemTime::UNIX_EPOCH + Duration::from_nanos(self.u64()?))
    }

    fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let len = self.u32()?;
        self.take(usize::try_from(len).unwrap_or(usize::MAX))
    }

    fn str(&mut self) -> Result<&'a str, Malformed> {
        std::str::from_utf8(self.bytes()?).map_err(|_| Malformed::NotUtf8)
    }

    fn text(&mut self) -> Result<Text, Malformed> {
        self.str().map(Text::new)
    }

    fn json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, Malformed> {
        serde_json::from_slice(self.bytes()?).map_err(|e| Malformed::Payload(e.to_string()))
    }

    fn event(&mut self) -> Result<EventPayload, Malformed> {
        Ok(match self.u8()? {
            TEXT => EventPayload::TextDelta {
                attempt: self.u32()?,
                text: self.text()?,
            },
            ARGUMENTS => EventPayload::ToolCallArgumentsDelta {
                attempt: self.u32()?,
                index: self.u32()?,
                delta: self.text()?,
            },
            REASONING => EventPayload::ReasoningDelta {
                attempt: self.u32()?,
                piece: match self.u8()? {
                    0 => ReasoningPiece::Text,
                    1 => ReasoningPiece::Signature,
                    2 => ReasoningPiece::Redacted,
                    other => return Err(Malformed::ReasoningPiece(other)),
                },
                text: self.text()?,
            },
            PROGRESS => EventPayload::Progress {
                attempt: self.u32()?,
                message: self.text()?,
            },
            USAGE => EventPayload::Usage(Arc::new(self.usage()?)),
            STARTED => EventPayload::AttemptStarted(Arc::new(self.started()?)),
            COMPLETED => EventPayload::Completed(Arc::new(self.completed()?)),
            ROUTING => EventPayload::Routing(Arc::new(self.routing()?)),
            ACCEPTED => return Err(Malformed::AcceptedInAppend),
            OTHER => {
                let payload: EventPayload = self.json()?;
                if matches!(payload, EventPayload::Accepted(_)) {
                    return Err(Malformed::AcceptedInAppend);
                }
                payload
            }
            kind => return Err(Malformed::EventKind(kind)),
        })
    }
}

#[cfg(test)]
mod tests;
