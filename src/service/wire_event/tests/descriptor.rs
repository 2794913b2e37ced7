//! The encoder against the .proto itself: an event of every kind with every field set is
//! encoded, its bytes are walked field by field with the descriptor set that reflection
//! serves, and every field at every place an event can hold one (`completed.result.output.text`
//! and `failed.partial_output.text` are two places) must have been written. A field added to
//! the .proto that the encoder (hand-written, or the conversion prost encodes) does not write
//! fails here, even though every other check still passes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use prost::encoding::{WireType, decode_key, decode_varint};
use prost_types::field_descriptor_proto::Type;
use prost_types::{DescriptorProto, FileDescriptorSet};

use super::*;
use crate::execution::{
    Acceptance, AttemptCode, AttemptError, AttemptRecord, AttemptStart, Delivery, EffectiveLimits,
    Ejection, ErrorClass, ErrorCode, Event, ExecutionError, ExecutionFailure, ExecutionId,
    ExecutionResult, ExecutionState, FinishReason, Labels, NextAction, Outcome, Output, PlanTarget,
    Priority, RoutingPlan, ToolCall, ToolCallStart, UsageFact, UsageSource, UsageUnit,
};

const ROOT: &str = ".model_runtime.v1.ExecutionEvent";

fn output() -> Output {
    Output {
        text: "partial".into(),
        tool_calls: vec![ToolCall {
            id: "call_1".into(),
            name: "lookup".into(),
            arguments_json: "{}".into(),
        }],
        reasoning: vec![Reasoning {
            text: "think".into(),
            signature: "sig".into(),
            redacted: "opaque".into(),
        }],
    }
}

fn attempt_error() -> AttemptError {
    AttemptError {
        class: ErrorClass::Retryable,
        code: AttemptCode::RateLimited,
        message: "slow down".into(),
        retry_after: Some(Duration::from_millis(1500)),
    }
}

/// One event of every kind, every field of it set to something other than its default.
#[expect(
    clippy::too_many_lines,
    reason = "a table: one event of every kind, every field set"
)]
fn every_field_set() -> Vec<EventPayload> {
    let time = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 5);
    vec![
        EventPayload::Accepted(Arc::new(Acceptance {
            ability: "chat".into(),
            policy: "default".into(),
            limits: EffectiveLimits {
                deadline: time,
                max_attempts: 3,
                allow_fallback: true,
                retry_budget: Duration::new(30, 1),
                delivery: Delivery::Buffered,
                priority: Priority::Batch,
            },
        })),
        EventPayload::Routing(Arc::new(RoutingPlan {
            policy: "default".into(),
            required_capabilities: vec!["text".into()],
            targets: vec![PlanTarget {
                provider: "p".into(),
                model: "m".into(),
                kept: true,
                reason: Some("why".into()),
                missing_capabilities: vec!["vision".into()],
                ejected: Some(Ejection {
                    reason: "ejected".into(),
                    until: Some(time),
                }),
            }],
            ended_before_routing: Some("why not".into()),
            tried_anyway: true,
        })),
        EventPayload::AttemptStarted(Arc::new(AttemptStart {
            attempt: 1,
            provider: "p".into(),
            model: "m".into(),
            started_at: time,
        })),
        EventPayload::AttemptFailed(Arc::new(AttemptRecord {
            number: 1,
            provider: "p".into(),
            model: "m".into(),
            started_at: time,
            duration: Some(Duration::new(1, 20_000_000)),
            error: Some(attempt_error()),
            output_committed: true,
            outcome: Some(Outcome::Failed),
            next_action: Some(NextAction::Fallback),
            admitted: true,
            held_output: output(),
        })),
        EventPayload::TextDelta {
            attempt: 1,
            text: "hi".into(),
        },
        EventPayload::ToolCallStarted(Arc::new(ToolCallStart {
            attempt: 1,
            index: 1,
            id: "call_1".into(),
            name: "lookup".into(),
        })),
        EventPayload::ToolCallArgumentsDelta {
            attempt: 1,
            index: 1,
            delta: "{".into(),
        },
        EventPayload::Progress {
            attempt: 1,
            message: "thinking".into(),
        },
        EventPayload::ReasoningDelta {
            attempt: 1,
            piece: ReasoningPiece::Text,
            text: "let me see".into(),
        },
        EventPayload::ReasoningDelta {
            attempt: 1,
            piece: ReasoningPiece::Signature,
            text: "sig".into(),
        },
        EventPayload::ReasoningDelta {
            attempt: 1,
            piece: ReasoningPiece::Redacted,
            text: "opaque".into(),
        },
        EventPayload::Usage(Arc::new(UsageFact {
            unit: UsageUnit::INPUT_TOKENS,
            quantity: 4,
            source: UsageSource::ProviderReported,
            attempt: 1,
            provider: "p".into(),
            model: "m".into(),
            labels: Arc::new(Labels::from([("tenant".into(), "acme".into())])),
            position: 0,
        })),
        EventPayload::Completed(Arc::new(ExecutionResult {
            output: output(),
            finish_reason: FinishReason::Stop,
            provider: "p".into(),
            model: "m".into(),
            attempt: 1,
        })),
        EventPayload::Failed(Arc::new(ExecutionFailure {
            error: ExecutionError {
                code: ErrorCode::OutputInterrupted,
                message: "broke".into(),
                outcome: Outcome::Unknown,
                last_attempt_error: Some(attempt_error()),
            },
            partial_output: output(),
            cancel_reason: Some("enough".into()),
        })),
    ]
}

/// Every message of the descriptor set by full name (`.package.Name`, nested ones included).
fn messages(set: &FileDescriptorSet) -> HashMap<String, &DescriptorProto> {
    fn add<'a>(
        prefix: &str,
        message: &'a DescriptorProto,
        into: &mut HashMap<String, &'a DescriptorProto>,
    ) {
        let name = format!("{prefix}.{}", message.name());
        for nested in &message.nested_type {
            add(&name, nested, into);
        }
        into.insert(name, message);
    }
    let mut all = HashMap::new();
    for file in &set.file {
        for message in &file.message_type {
            add(&format!(".{}", file.package()), message, &mut all);
        }
    }
    all
}

/// Records the path of every field present in `bytes`, an encoded `message` found at `path`,
/// descending into the fields that hold messages.
fn walk(
    message: &str,
    path: &str,
    mut bytes: &[u8],
    all: &HashMap<String, &DescriptorProto>,
    seen: &mut BTreeSet<String>,
) {
    let descriptor = all[message];
    while !bytes.is_empty() {
        let (number, wire_type) = decode_key(&mut bytes).unwrap();
        let value: &[u8] = match wire_type {
            WireType::Varint => {
                decode_varint(&mut bytes).unwrap();
                &[]
            }
            WireType::SixtyFourBit => {
                bytes = &bytes[8..];
                &[]
            }
            WireType::ThirtyTwoBit => {
                bytes = &bytes[4..];
                &[]
            }
            WireType::LengthDelimited => {
                let len = decode_varint(&mut bytes).unwrap() as usize;
                let (value, rest) = bytes.split_at(len);
                bytes = rest;
                value
            }
            other => panic!("{path}: field {number} has unexpected wire type {other:?}"),
        };
        let field = descriptor
            .field
            .iter()
            .find(|f| f.number() == number as i32)
            .unwrap_or_else(|| panic!("{message} has no field {number}"));
        let here = format!("{path}.{}", field.name());
        if field.r#type() == Type::Message && all.contains_key(field.type_name()) {
            walk(field.type_name(), &here, value, all, seen);
        }
        seen.insert(here);
    }
}

/// The path of every field at every place an event can hold one, from the root down.
fn reachable(
    message: &str,
    path: &str,
    all: &HashMap<String, &DescriptorProto>,
    into: &mut BTreeSet<String>,
) {
    assert!(
        path.matches('.').count() < 12,
        "a cycle in the messages at {path}"
    );
    for field in &all[message].field {
        let here = format!("{path}.{}", field.name());
        if field.r#type() == Type::Message && all.contains_key(field.type_name()) {
            reachable(field.type_name(), &here, all, into);
        }
        into.insert(here);
    }
}

#[test]
fn every_field_the_proto_defines_for_an_event_is_written() {
    let set = FileDescriptorSet::decode(pb::FILE_DESCRIPTOR_SET).unwrap();
    let all = messages(&set);
    let mut seen = BTreeSet::new();
    for payload in every_field_set() {
        let event = Event {
            sequence: 7,
            time: SystemTime::now(),
            state: ExecutionState::Running,
            payload,
        };
        let id: Arc<str> = ExecutionId::new().to_text().into();
        let time = WireTime::of(event.time);
        let bytes = WireEvent::new(id, time, event).encode_to_vec();
        walk(ROOT, "ExecutionEvent", &bytes, &all, &mut seen);
    }
    let mut every = BTreeSet::new();
    reachable(ROOT, "ExecutionEvent", &all, &mut every);
    let missing: Vec<&String> = every.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "fields of the .proto that no event writes: {missing:?}"
    );
}
