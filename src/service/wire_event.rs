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
use prost::encoding::{
    DecodeContext, WireType, encode_key, encode_varint, encoded_len_varint, key_len, skip_field,
};

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
    /// The payload as a prost message, for the kinds not written by hand. Boxed: the item
    /// moves through several stream adapters on its way to the encoder, and the message is
    /// far larger than the rest of it.
    built: Option<Box<pb::execution_event::Payload>>,
    /// Encoded lengths of the time and of a hand-written payload, without their keys.
    time_len: usize,
    payload_len: usize,
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
        let (built, payload_len) = match &event.payload {
            EventPayload::AttemptStarted {
                attempt,
                provider,
                model,
                ..
            } => (
                None,
                uint_len(1, u64::from(*attempt)) + text_len(2, provider) + text_len(3, model),
            ),
            EventPayload::TextDelta { attempt, text } => {
                (None, uint_len(1, u64::from(*attempt)) + text_len(2, text))
            }
            EventPayload::ToolCallStarted {
                attempt,
                index,
                id,
                name,
            } => (
                None,
                uint_len(1, u64::from(*attempt))
                    + uint_len(2, u64::from(*index))
                    + text_len(3, id)
                    + text_len(4, name),
            ),
            EventPayload::ToolCallArgumentsDelta {
                attempt,
                index,
                delta,
            } => (
                None,
                uint_len(1, u64::from(*attempt))
                    + uint_len(2, u64::from(*index))
                    + text_len(3, delta),
            ),
            EventPayload::Progress { attempt, message } => (
                None,
                uint_len(1, u64::from(*attempt)) + text_len(2, message),
            ),
            payload => (Some(Box::new(encode::payload(payload))), 0),
        };
        let time_len = uint_len(1, seconds(&time)) + uint_len(2, nanos(&time));
        Self {
            id,
            time,
            event,
            built,
            time_len,
            payload_len,
        }
    }

    fn state(&self) -> u64 {
        // An enum is an int32 on the wire: its two's-complement 64-bit varint.
        i64::from(encode::state(self.event.state) as i32) as u64
    }

    /// The hand-written payload's field number.
    fn payload_field(&self) -> u32 {
        match self.event.payload {
            EventPayload::AttemptStarted { .. } => ATTEMPT_STARTED,
            EventPayload::TextDelta { .. } => TEXT_DELTA,
            EventPayload::ToolCallStarted { .. } => TOOL_CALL_STARTED,
            EventPayload::ToolCallArgumentsDelta { .. } => TOOL_CALL_ARGUMENTS_DELTA,
            _ => PROGRESS,
        }
    }

    fn encode_payload(&self, buf: &mut impl BufMut) {
        if let Some(built) = &self.built {
            built.encode(buf);
            return;
        }
        encode_key(self.payload_field(), WireType::LengthDelimited, buf);
        encode_varint(self.payload_len as u64, buf);
        match &self.event.payload {
            EventPayload::AttemptStarted {
                attempt,
                provider,
                model,
                ..
            } => {
                put_uint(buf, 1, u64::from(*attempt));
                put_text(buf, 2, provider);
                put_text(buf, 3, model);
            }
            EventPayload::TextDelta { attempt, text } => {
                put_uint(buf, 1, u64::from(*attempt));
                put_text(buf, 2, text);
            }
            EventPayload::ToolCallStarted {
                attempt,
                index,
                id,
                name,
            } => {
                put_uint(buf, 1, u64::from(*attempt));
                put_uint(buf, 2, u64::from(*index));
                put_text(buf, 3, id);
                put_text(buf, 4, name);
            }
            EventPayload::ToolCallArgumentsDelta {
                attempt,
                index,
                delta,
            } => {
                put_uint(buf, 1, u64::from(*attempt));
                put_uint(buf, 2, u64::from(*index));
                put_text(buf, 3, delta);
            }
            EventPayload::Progress { attempt, message } => {
                put_uint(buf, 1, u64::from(*attempt));
                put_text(buf, 2, message);
            }
            _ => {}
        }
    }
}

impl prost::Message for WireEvent {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        put_text(buf, ID, &self.id);
        put_uint(buf, SEQUENCE, self.event.sequence);
        encode_key(TIME, WireType::LengthDelimited, buf);
        encode_varint(self.time_len as u64, buf);
        put_uint(buf, 1, seconds(&self.time));
        put_uint(buf, 2, nanos(&self.time));
        put_text(buf, TYPE, self.event.payload.type_name());
        put_uint(buf, STATE, self.state());
        self.encode_payload(buf);
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
        let payload = match &self.built {
            Some(built) => built.encoded_len(),
            None => delimited_len(self.payload_field(), self.payload_len),
        };
        text_len(ID, &self.id)
            + uint_len(SEQUENCE, self.event.sequence)
            + delimited_len(TIME, self.time_len)
            + text_len(TYPE, self.event.payload.type_name())
            + uint_len(STATE, self.state())
            + payload
    }

    fn clear(&mut self) {
        self.built = None;
    }
}

// int64 and int32 go on the wire as their two's-complement 64-bit varints.
fn seconds(time: &prost_types::Timestamp) -> u64 {
    time.seconds as u64
}

fn nanos(time: &prost_types::Timestamp) -> u64 {
    i64::from(time.nanos) as u64
}

fn delimited_len(field: u32, len: usize) -> usize {
    key_len(field) + encoded_len_varint(len as u64) + len
}

// proto3 leaves fields at their default (0, "") out.
fn uint_len(field: u32, value: u64) -> usize {
    if value == 0 {
        0
    } else {
        key_len(field) + encoded_len_varint(value)
    }
}

fn text_len(field: u32, value: &str) -> usize {
    if value.is_empty() {
        0
    } else {
        delimited_len(field, value.len())
    }
}

fn put_uint(buf: &mut impl BufMut, field: u32, value: u64) {
    if value != 0 {
        encode_key(field, WireType::Varint, buf);
        encode_varint(value, buf);
    }
}

fn put_text(buf: &mut impl BufMut, field: u32, value: &str) {
    if !value.is_empty() {
        encode_key(field, WireType::LengthDelimited, buf);
        encode_varint(value.len() as u64, buf);
        buf.put_slice(value.as_bytes());
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
            EventPayload::AttemptFailed(AttemptRecord {
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
            }),
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
