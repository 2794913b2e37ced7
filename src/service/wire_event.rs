//! The events `Execute` and `Watch` stream, encoded straight from the stored event into the
//! response buffer: the protobuf encoding of `pb::ExecutionEvent`, byte for byte (a test
//! checks every payload against prost's own), without building a `pb::ExecutionEvent` per
//! event. Building one cost three string allocations and copies per event (id, type, text)
//! and moved a 296-byte message through every stream adapter on its way to the encoder.
//!
//! The payloads that stream by the thousand (output deltas, progress, attempt starts) are
//! written by hand; the once-per-execution ones (accepted, routing, a failed attempt, usage,
//! completed, failed) are built as prost messages and encoded by prost.

use std::sync::Arc;

use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType, encoded_len_varint, key_len, skip_field};

use super::encode;
use crate::execution::{EventPayload, StoredEvent};
use crate::pb;

/// One event on its way to a client. Encode-only: the server never decodes one, and
/// decoding skips every field.
#[derive(Debug)]
pub struct WireEvent {
    /// The stream's execution id, in its text form, shared by the stream's events.
    id: Arc<str>,
    time: prost_types::Timestamp,
    event: StoredEvent,
    payload: Payload,
    /// Encoded length of the time, without its key.
    time_len: usize,
}

#[derive(Debug)]
enum Payload {
    /// Written by hand: its field number and encoded length (without key).
    Hand { field: u32, len: usize },
    /// Built by prost. Boxed: the item moves through several stream adapters on its way to
    /// the encoder, and the message is far larger than the rest of it.
    Built(Box<pb::execution_event::Payload>),
}

// Field numbers of `ExecutionEvent` and its payload messages (events.proto).
const ID: u32 = 1;
const SEQUENCE: u32 = 2;
const TIME: u32 = 3;
const TYPE: u32 = 4;
const STATE: u32 = 5;
const ATTEMPT_STARTED: u32 = 12;
const TEXT_DELTA: u32 = 14;
const TOOL_CALL_STARTED: u32 = 15;
const TOOL_CALL_ARGUMENTS_DELTA: u32 = 16;
const PROGRESS: u32 = 17;

impl WireEvent {
    /// `event` of the execution whose id reads `id`, appended at `time`.
    pub fn new(id: Arc<str>, time: prost_types::Timestamp, event: StoredEvent) -> Self {
        let mut len = Len(0);
        let payload = match hand_written(&event.payload, &mut len) {
            Some(field) => Payload::Hand { field, len: len.0 },
            None => Payload::Built(Box::new(encode::payload(&event.payload))),
        };
        let mut time_len = Len(0);
        time_fields(&time, &mut time_len);
        Self {
            id,
            time,
            event,
            payload,
            time_len: time_len.0,
        }
    }

    fn state(&self) -> u64 {
        // An enum is an int32 on the wire: its two's-complement 64-bit varint.
        i64::from(encode::state(self.event.state) as i32) as u64
    }
}

/// Writes the fields of a payload kind that streams by the thousand and returns its field
/// number; `None` (writing nothing) for the kinds prost builds.
fn hand_written(payload: &EventPayload, out: &mut impl Sink) -> Option<u32> {
    Some(match payload {
        EventPayload::AttemptStarted {
            attempt,
            provider,
            model,
            ..
        } => {
            out.uint(1, u64::from(*attempt));
            out.text(2, provider);
            out.text(3, model);
            ATTEMPT_STARTED
        }
        EventPayload::TextDelta { attempt, text } => {
            out.uint(1, u64::from(*attempt));
            out.text(2, text);
            TEXT_DELTA
        }
        EventPayload::ToolCallStarted {
            attempt,
            index,
            id,
            name,
        } => {
            out.uint(1, u64::from(*attempt));
            out.uint(2, u64::from(*index));
            out.text(3, id);
            out.text(4, name);
            TOOL_CALL_STARTED
        }
        EventPayload::ToolCallArgumentsDelta {
            attempt,
            index,
            delta,
        } => {
            out.uint(1, u64::from(*attempt));
            out.uint(2, u64::from(*index));
            out.text(3, delta);
            TOOL_CALL_ARGUMENTS_DELTA
        }
        EventPayload::Progress { attempt, message } => {
            out.uint(1, u64::from(*attempt));
            out.text(2, message);
            PROGRESS
        }
        _ => return None,
    })
}

fn time_fields(time: &prost_types::Timestamp, out: &mut impl Sink) {
    // int64 and int32 go on the wire as their two's-complement 64-bit varints.
    out.uint(1, time.seconds as u64);
    out.uint(2, i64::from(time.nanos) as u64);
}

impl prost::Message for WireEvent {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        let mut out = Put::new(buf);
        out.text(ID, &self.id);
        out.uint(SEQUENCE, self.event.sequence);
        out.key(TIME, self.time_len);
        time_fields(&self.time, &mut out);
        out.text(TYPE, self.event.payload.type_name());
        out.uint(STATE, self.state());
        match &self.payload {
            Payload::Built(built) => built.encode(out.flush()),
            Payload::Hand { field, len } => {
                out.key(*field, *len);
                hand_written(&self.event.payload, &mut out);
                out.flush();
            }
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        let mut out = Len(0);
        out.text(ID, &self.id);
        out.uint(SEQUENCE, self.event.sequence);
        out.key(TIME, self.time_len);
        out.text(TYPE, self.event.payload.type_name());
        out.uint(STATE, self.state());
        let payload = match &self.payload {
            Payload::Built(built) => built.encoded_len(),
            Payload::Hand { field, len } => {
                out.key(*field, *len);
                0
            }
        };
        out.0 + payload
    }

    fn clear(&mut self) {
        // Nothing is ever decoded into a WireEvent, so there is nothing to reset.
    }
}

/// Where fields go: counted ([`Len`]) or written ([`Put`]), by the same code. proto3 leaves
/// fields at their default (0, "") out.
trait Sink {
    /// A length-delimited field's key and length; its `len` bytes follow.
    fn key(&mut self, field: u32, len: usize);
    fn uint(&mut self, field: u32, value: u64);
    fn text(&mut self, field: u32, value: &str);
}

/// Counts bytes. `key` counts the content too, which is written after it.
struct Len(usize);

impl Sink for Len {
    fn key(&mut self, field: u32, len: usize) {
        self.0 += key_len(field) + encoded_len_varint(len as u64) + len;
    }

    fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.0 += key_len(field) + encoded_len_varint(value);
        }
    }

    fn text(&mut self, field: u32, value: &str) {
        if !value.is_empty() {
            self.key(field, value.len());
        }
    }
}

/// Writes bytes. Keys, lengths, numbers and short strings gather in a small buffer that goes
/// out in one copy: a varint written byte by byte into a `BytesMut` checks its capacity at
/// every byte, which cost more than the rest of the encoding. Call `flush` at the end.
struct Put<'a, B> {
    buf: &'a mut B,
    scratch: [u8; SCRATCH],
    used: usize,
}

/// Room for an event's fields up to its payload's text: id, sequence, time, type, state.
const SCRATCH: usize = 128;

impl<'a, B: BufMut> Put<'a, B> {
    fn new(buf: &'a mut B) -> Self {
        Self {
            buf,
            scratch: [0; SCRATCH],
            used: 0,
        }
    }

    #[inline(always)]
    fn varint(&mut self, mut value: u64) {
        // A u64 takes at most ten bytes.
        if SCRATCH - self.used < 10 {
            self.flush();
        }
        while value >= 0x80 {
            self.scratch[self.used] = (value as u8) | 0x80;
            self.used += 1;
            value >>= 7;
        }
        self.scratch[self.used] = value as u8;
        self.used += 1;
    }

    #[inline(always)]
    fn bytes(&mut self, bytes: &[u8]) {
        if let Some(room) = self.scratch.get_mut(self.used..self.used + bytes.len()) {
            room.copy_from_slice(bytes);
            self.used += bytes.len();
        } else {
            self.flush().put_slice(bytes);
        }
    }

    /// Sends what is gathered on; returns the buffer, to write to directly.
    fn flush(&mut self) -> &mut B {
        if self.used > 0 {
            self.buf.put_slice(&self.scratch[..self.used]);
            self.used = 0;
        }
        self.buf
    }
}

impl<B: BufMut> Sink for Put<'_, B> {
    #[inline(always)]
    fn key(&mut self, field: u32, len: usize) {
        self.varint(u64::from(field << 3 | WireType::LengthDelimited as u32));
        self.varint(len as u64);
    }

    #[inline(always)]
    fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.varint(u64::from(field << 3 | WireType::Varint as u32));
            self.varint(value);
        }
    }

    #[inline(always)]
    fn text(&mut self, field: u32, value: &str) {
        if !value.is_empty() {
            self.key(field, value.len());
            self.bytes(value.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use prost::Message;

    use super::*;
    use crate::execution::{
        AttemptError, AttemptRecord, ErrorClass, ErrorCode, Event, ExecutionId, ExecutionState,
        NextAction, Outcome,
    };
    use crate::store::conformance::{accepted, attempt_started, completed, failed, routing, text};
    use crate::usage::{UsageFact, UsageQuantity, UsageSource, UsageUnit};

    fn payloads() -> Vec<EventPayload> {
        let usage = UsageQuantity {
            unit: UsageUnit::OUTPUT_TOKENS,
            quantity: 12,
            source: UsageSource::ProviderReported,
        };
        vec![
            accepted(),
            routing(),
            attempt_started(1),
            attempt_started(0),
            text(1, "hello "),
            text(
                2,
                "héllo, wörld ✓ with a longer piece of text than a varint byte can count: "
                    .repeat(3)
                    .as_str(),
            ),
            text(0, ""),
            EventPayload::ToolCallStarted {
                attempt: 1,
                index: 0,
                id: "call_1".into(),
                name: "lookup".into(),
            },
            EventPayload::ToolCallStarted {
                attempt: 3,
                index: 2,
                id: String::new(),
                name: "x".into(),
            },
            EventPayload::ToolCallArgumentsDelta {
                attempt: 1,
                index: 7,
                delta: "{\"q\":".into(),
            },
            EventPayload::Progress {
                attempt: 0,
                message: "queued".into(),
            },
            EventPayload::Progress {
                attempt: 200,
                message: String::new(),
            },
            EventPayload::Usage(UsageFact {
                unit: usage.unit,
                quantity: usage.quantity,
                source: usage.source,
                attempt: 1,
                provider: "p".into(),
                model: "m".into(),
                labels: Arc::default(),
            }),
            EventPayload::AttemptFailed(Box::new(AttemptRecord {
                number: 2,
                provider: "p".into(),
                model: "m".into(),
                started_at: SystemTime::now(),
                duration: Some(Duration::from_millis(1500)),
                error: Some(AttemptError {
                    class: ErrorClass::Retryable,
                    code: "unavailable".into(),
                    message: "503".into(),
                    retry_after: Some(Duration::from_secs(2)),
                }),
                output_committed: false,
                outcome: Some(Outcome::NotStarted),
                next_action: Some(NextAction::RetrySameTarget),
                admitted: true,
            })),
            completed(1, "hello world"),
            failed(ErrorCode::Cancelled),
        ]
    }

    #[test]
    fn every_payload_encodes_exactly_as_prost_encodes_the_built_message() {
        let id = ExecutionId::new();
        let times = [
            SystemTime::now(),
            SystemTime::UNIX_EPOCH,
            SystemTime::UNIX_EPOCH + Duration::new(1, 999_999_999),
            SystemTime::UNIX_EPOCH - Duration::new(5, 250),
        ];
        let states = [
            ExecutionState::Accepted,
            ExecutionState::Running,
            ExecutionState::Failed,
        ];
        for (n, payload) in payloads().into_iter().enumerate() {
            for (time, sequence, state) in [
                (times[n % 4], n as u64 + 1, states[n % 3]),
                (times[(n + 1) % 4], 0, states[(n + 1) % 3]),
                (times[(n + 2) % 4], u64::MAX, states[(n + 2) % 3]),
            ] {
                let event = Event {
                    execution_id: id,
                    sequence,
                    time,
                    state,
                    payload: payload.clone(),
                };
                let want = encode::event(&event).encode_to_vec();
                let wire = WireEvent::new(
                    id.to_text().into(),
                    prost_types::Timestamp::from(time),
                    StoredEvent::new(event),
                );
                assert_eq!(wire.encoded_len(), want.len(), "length of {:?}", wire.event);
                assert_eq!(wire.encode_to_vec(), want, "bytes of {:?}", wire.event);
            }
        }
    }
}
