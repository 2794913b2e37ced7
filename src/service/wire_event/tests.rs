use std::time::{Duration, SystemTime};

use prost::Message;

use super::*;
use crate::execution::fixtures::{accepted, attempt_started, completed, failed, routing, text};
use crate::execution::{
    Acceptance, AttemptCode, AttemptError, AttemptRecord, Delivery, Ejection, ErrorClass,
    ErrorCode, Event, ExecutionId, ExecutionState, FinishReason, Labels, NextAction, Outcome,
    Output, Priority, Text, ToolCallStart, UsageQuantity, UsageSource, UsageUnit,
};

mod arbitrary;
mod descriptor;

#[expect(clippy::too_many_lines, reason = "a table: one payload of each kind")]
fn payloads() -> Vec<EventPayload> {
    let usage = UsageQuantity {
        unit: UsageUnit::OUTPUT_TOKENS,
        quantity: 12,
        source: UsageSource::ProviderReported,
    };
    vec![
        accepted(),
        EventPayload::Accepted(Arc::new(Acceptance {
            ability: String::new().into(),
            policy: "p".into(),
            limits: EffectiveLimits {
                deadline: SystemTime::UNIX_EPOCH - Duration::new(3, 7),
                max_attempts: 0,
                allow_fallback: false,
                retry_budget: Duration::ZERO,
                delivery: Delivery::Streamed,
                priority: Priority::Standard,
            },
        })),
        routing(),
        EventPayload::Routing(Arc::new(RoutingPlan {
            policy: "default".into(),
            required_capabilities: vec!["text".into(), String::new()],
            targets: vec![
                PlanTarget {
                    provider: "a".into(),
                    model: "m1".into(),
                    kept: true,
                    reason: None,
                    missing_capabilities: Vec::new(),
                    ejected: None,
                },
                PlanTarget {
                    provider: "b".into(),
                    model: String::new().into(),
                    kept: false,
                    reason: Some("lacks a capability".into()),
                    missing_capabilities: vec!["vision".into(), String::new()],
                    ejected: None,
                },
                PlanTarget {
                    provider: "c".into(),
                    model: "m3".into(),
                    kept: true,
                    reason: None,
                    missing_capabilities: Vec::new(),
                    ejected: Some(Ejection {
                        reason: "3 consecutive failures".into(),
                        until: Some(SystemTime::UNIX_EPOCH + Duration::new(1_800_000_000, 7)),
                    }),
                },
            ],
            ended_before_routing: None,
            tried_anyway: true,
        })),
        EventPayload::Routing(Arc::new(RoutingPlan {
            policy: "default".into(),
            required_capabilities: Vec::new(),
            targets: Vec::new(),
            ended_before_routing: Some("the runtime stopped first".into()),
            tried_anyway: false,
        })),
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
        EventPayload::ToolCallStarted(Arc::new(ToolCallStart {
            attempt: 1,
            index: 0,
            id: "call_1".into(),
            name: "lookup".into(),
        })),
        EventPayload::ToolCallStarted(Arc::new(ToolCallStart {
            attempt: 3,
            index: 2,
            id: String::new(),
            name: "x".into(),
        })),
        EventPayload::ToolCallArgumentsDelta {
            attempt: 1,
            index: 7,
            delta: "{\"q\":".into(),
        },
        EventPayload::Progress {
            attempt: 0,
            message: "queued".into(),
        },
        EventPayload::ReasoningDelta {
            attempt: 2,
            piece: ReasoningPiece::Text,
            text: "first, the units".into(),
        },
        EventPayload::ReasoningDelta {
            attempt: 2,
            piece: ReasoningPiece::Redacted,
            text: Text::default(),
        },
        EventPayload::Progress {
            attempt: 200,
            message: Text::default(),
        },
        EventPayload::Usage(Arc::new(UsageFact {
            unit: usage.unit,
            quantity: usage.quantity,
            source: usage.source,
            attempt: 1,
            provider: "p".into(),
            model: "m".into(),
            labels: Arc::default(),
            position: 0,
        })),
        EventPayload::Usage(Arc::new(UsageFact {
            unit: UsageUnit::INPUT_TOKENS,
            quantity: 0,
            source: UsageSource::RuntimeEstimated,
            attempt: 300,
            provider: "openai".into(),
            model: "gpt-x".into(),
            labels: Arc::new(Labels::from([
                ("tenant".to_owned(), "acme".to_owned()),
                ("empty".to_owned(), String::new()),
                (String::new(), "no key".to_owned()),
            ])),
            position: 0,
        })),
        EventPayload::AttemptFailed(Arc::new(AttemptRecord {
            number: 2,
            provider: "p".into(),
            model: "m".into(),
            started_at: SystemTime::now(),
            duration: Some(Duration::from_millis(1500)),
            error: Some(AttemptError {
                class: ErrorClass::Retryable,
                code: AttemptCode::Unavailable,
                message: "503".into(),
                retry_after: Some(Duration::from_secs(2)),
            }),
            output_committed: false,
            outcome: Some(Outcome::NotStarted),
            next_action: Some(NextAction::RetrySameTarget),
            admitted: true,
            held_output: Output::default(),
        })),
        completed(1, "hello world"),
        completed(0, ""),
        EventPayload::Completed(Arc::new(ExecutionResult {
            output: Output {
                text: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "call_1".into(),
                        name: "lookup".into(),
                        arguments_json: "{\"q\":\"x\"}".into(),
                    },
                    ToolCall::default(),
                ],
                reasoning: vec![Reasoning {
                    text: "think first".into(),
                    signature: "sig".into(),
                    redacted: String::new(),
                }],
            },
            finish_reason: FinishReason::ToolCalls,
            provider: "p".into(),
            model: "m".into(),
            attempt: 2,
        })),
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
                sequence,
                time,
                state,
                payload: payload.clone(),
            };
            let want = encode::event(id, &event).encode_to_vec();
            let wire = WireEvent::new(id.to_text().into(), WireTime::of(time), event.clone());
            assert_eq!(wire.encoded_len(), want.len(), "length of {event:?}");
            let bytes = wire.encode_to_vec();
            let decoded = pb::ExecutionEvent::decode(bytes.as_slice()).unwrap();
            assert_eq!(decoded, encode::event(id, &event), "{event:?}");
            // Map entries go out in whatever order the map has: prost's is a HashMap's.
            if !matches!(&event.payload, EventPayload::Usage(f) if f.labels.len() > 1) {
                assert_eq!(bytes, want, "bytes of {event:?}");
            }
        }
    }
}
