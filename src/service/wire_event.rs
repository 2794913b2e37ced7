//! The events `Execute` and `Watch` stream, encoded straight from the stored event into the
//! response buffer: the protobuf encoding of `pb::ExecutionEvent`, byte for byte (a test
//! checks every payload against prost's own), without building a `pb::ExecutionEvent` per
//! event. Building one cost three string allocations and copies per event (id, type, text)
//! and moved a 296-byte message through every stream adapter on its way to the encoder.
//!
//! Every payload an execution that succeeds streams is written by hand: those that stream by
//! the thousand (output deltas, progress, attempt starts) and those every execution has
//! (accepted, routing, usage, completed), whose built messages cloned every name, label and
//! the whole output. The rare ones (a failed attempt, failed) are built as prost messages and
//! encoded by prost.

use std::sync::Arc;

use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType, skip_field};

use super::encode;
use crate::execution::{
    EffectiveLimits, EventPayload, ExecutionResult, Output, StoredEvent, ToolCall,
};
use crate::pb;
use crate::routing::{PlanTarget, RoutingPlan};
use crate::usage::UsageFact;

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
const ACCEPTED: u32 = 10;
const ROUTING: u32 = 11;
const ATTEMPT_STARTED: u32 = 12;
const TEXT_DELTA: u32 = 14;
const TOOL_CALL_STARTED: u32 = 15;
const TOOL_CALL_ARGUMENTS_DELTA: u32 = 16;
const PROGRESS: u32 = 17;
const USAGE_REPORTED: u32 = 18;
const COMPLETED: u32 = 19;

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
        EventPayload::Accepted {
            ability,
            policy,
            limits,
        } => {
            out.text(1, ability);
            out.text(2, policy);
            out.message(3, limits);
            ACCEPTED
        }
        EventPayload::Routing(plan) => {
            out.message(1, &**plan);
            ROUTING
        }
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
        // Twice per execution (input and output tokens), and each built one cost a clone of
        // every name and label.
        EventPayload::Usage(fact) => {
            out.message(1, fact);
            USAGE_REPORTED
        }
        // Once per execution, but the built one copied the whole output.
        EventPayload::Completed(result) => {
            out.message(1, &**result);
            COMPLETED
        }
        _ => return None,
    })
}

/// A message written by hand as a field of another.
trait Fields {
    fn fields(&self, out: &mut impl Sink);
}

impl Fields for EffectiveLimits {
    fn fields(&self, out: &mut impl Sink) {
        out.message(1, &encode::timestamp(self.deadline));
        out.uint(2, u64::from(self.max_attempts));
        out.uint(3, u64::from(self.allow_fallback));
        out.message(4, &encode::duration(self.retry_budget));
    }
}

impl Fields for prost_types::Timestamp {
    fn fields(&self, out: &mut impl Sink) {
        time_fields(self, out);
    }
}

impl Fields for prost_types::Duration {
    fn fields(&self, out: &mut impl Sink) {
        out.uint(1, self.seconds as u64);
        out.uint(2, i64::from(self.nanos) as u64);
    }
}

impl Fields for RoutingPlan {
    fn fields(&self, out: &mut impl Sink) {
        out.text(1, &self.policy);
        for capability in &self.required_capabilities {
            out.item(2, capability);
        }
        for target in &self.targets {
            out.message(3, target);
        }
    }
}

impl Fields for PlanTarget {
    fn fields(&self, out: &mut impl Sink) {
        out.text(1, &self.provider);
        out.text(2, &self.model);
        out.uint(3, u64::from(self.kept));
        out.text(4, self.reason.as_deref().unwrap_or_default());
        for capability in &self.missing_capabilities {
            out.item(5, capability);
        }
    }
}

impl Fields for UsageFact {
    fn fields(&self, out: &mut impl Sink) {
        out.text(1, self.unit.as_str());
        out.uint(2, self.quantity);
        out.uint(3, encode::usage_source(self.source) as u64);
        out.uint(4, u64::from(self.attempt));
        out.text(5, &self.provider);
        out.text(6, &self.model);
        // A map is a repeated entry message of key (1) and value (2). Its order is not part
        // of the encoding: this writes it in the labels' own (sorted) order.
        for entry in self.labels.iter() {
            out.message(7, &entry);
        }
    }
}

impl Fields for (&String, &String) {
    fn fields(&self, out: &mut impl Sink) {
        out.text(1, self.0);
        out.text(2, self.1);
    }
}

impl Fields for ExecutionResult {
    fn fields(&self, out: &mut impl Sink) {
        out.message(1, &self.output);
        out.uint(2, encode::finish_reason(self.finish_reason) as u64);
        out.text(3, &self.provider);
        out.text(4, &self.model);
        out.uint(5, u64::from(self.attempt));
    }
}

impl Fields for Output {
    fn fields(&self, out: &mut impl Sink) {
        out.text(1, &self.text);
        for call in &self.tool_calls {
            out.message(2, call);
        }
    }
}

impl Fields for ToolCall {
    fn fields(&self, out: &mut impl Sink) {
        out.text(1, &self.id);
        out.text(2, &self.name);
        out.text(3, &self.arguments_json);
    }
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

mod sink;
#[cfg(test)]
mod tests;

use sink::{Len, Put, Sink};
