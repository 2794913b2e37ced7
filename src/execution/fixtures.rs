//! Payloads of every kind, for tests of this crate and of stores outside it (the
//! `conformance` feature): events that form a legal execution when appended in order.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::execution::{
    Acceptance, AttemptCode, AttemptError, AttemptRecord, AttemptStart, Delivery, EffectiveLimits,
    ErrorClass, ErrorCode, EventPayload, ExecutionError, ExecutionFailure, ExecutionResult,
    FinishReason, NextAction, Outcome, Output, Priority, Reasoning, ReasoningPiece, RoutingPlan,
    ToolCall, ToolCallStart, UsageFact, UsageSource, UsageUnit,
};

/// A usage fact of `quantity` input tokens in attempt 1 on `p/m`.
pub fn usage(quantity: u64) -> EventPayload {
    EventPayload::Usage(Arc::new(UsageFact {
        unit: UsageUnit::INPUT_TOKENS,
        quantity,
        source: UsageSource::ProviderReported,
        attempt: 1,
        provider: "p".into(),
        model: "m".into(),
        labels: Arc::default(),
        position: 0,
    }))
}

/// An `execution.accepted` payload.
pub fn accepted() -> EventPayload {
    EventPayload::Accepted(Arc::new(Acceptance {
        ability: "chat".into(),
        policy: "default".into(),
        limits: EffectiveLimits {
            deadline: SystemTime::now() + Duration::from_secs(60),
            max_attempts: 3,
            allow_fallback: true,
            retry_budget: Duration::from_secs(30),
            delivery: Delivery::Streamed,
            priority: Priority::Standard,
        },
    }))
}

/// An `execution.routing` payload with an empty plan.
pub fn routing() -> EventPayload {
    EventPayload::Routing(Arc::new(RoutingPlan {
        policy: "default".into(),
        required_capabilities: Vec::new(),
        targets: Vec::new(),
        ended_before_routing: None,
        tried_anyway: false,
    }))
}

/// A `route.attempt.started` payload.
pub fn attempt_started(attempt: u32) -> EventPayload {
    EventPayload::AttemptStarted(Arc::new(AttemptStart {
        attempt,
        provider: "p".into(),
        model: "m".into(),
        started_at: SystemTime::now(),
    }))
}

/// An `output.text.delta` payload.
pub fn text(attempt: u32, text: &str) -> EventPayload {
    EventPayload::TextDelta {
        attempt,
        text: text.into(),
    }
}

/// An `execution.completed` payload.
pub fn completed(attempt: u32, text: &str) -> EventPayload {
    EventPayload::Completed(Arc::new(ExecutionResult {
        output: Output {
            text: text.into(),
            ..Output::default()
        },
        finish_reason: FinishReason::Stop,
        provider: "p".into(),
        model: "m".into(),
        attempt,
    }))
}

/// An `execution.failed` payload with `code`.
pub fn failed(code: ErrorCode) -> EventPayload {
    EventPayload::Failed(Arc::new(ExecutionFailure {
        error: ExecutionError {
            code,
            message: code.as_str().into(),
            outcome: Outcome::NotStarted,
            last_attempt_error: None,
        },
        partial_output: Output::default(),
        cancel_reason: None,
    }))
}

/// One payload of every kind but `execution.accepted`, each field set (not a legal order):
/// for codecs, which must carry each of them whole.
#[expect(clippy::too_many_lines, reason = "a table: one payload of every kind")]
pub fn every_kind_but_accepted() -> Vec<EventPayload> {
    let attempt_error = AttemptError {
        class: ErrorClass::OutcomeUnknown,
        code: AttemptCode::StreamInterrupted,
        message: "the stream broke".into(),
        retry_after: Some(Duration::from_millis(1500)),
    };
    let record = AttemptRecord {
        number: 2,
        provider: "p".into(),
        model: "m".into(),
        started_at: SystemTime::UNIX_EPOCH + Duration::new(1_780_000_000, 5),
        duration: Some(Duration::from_micros(1234)),
        error: Some(attempt_error.clone()),
        output_committed: true,
        outcome: Some(Outcome::Unknown),
        next_action: Some(NextAction::Fallback),
        admitted: true,
        held_output: Output {
            text: "held back, never exposed".into(),
            ..Output::default()
        },
    };
    vec![
        routing(),
        attempt_started(2),
        text(2, "a delta longer than twenty-three bytes, kept shared"),
        EventPayload::ToolCallStarted(Arc::new(ToolCallStart {
            attempt: 2,
            index: 1,
            id: "call_1".into(),
            name: "lookup".into(),
        })),
        EventPayload::ToolCallArgumentsDelta {
            attempt: 2,
            index: 1,
            delta: "{\"q\":".into(),
        },
        EventPayload::ReasoningDelta {
            attempt: 2,
            piece: ReasoningPiece::Signature,
            text: "sig".into(),
        },
        EventPayload::Progress {
            attempt: 0,
            message: "queued".into(),
        },
        EventPayload::Usage(Arc::new(UsageFact {
            unit: UsageUnit::new("audio_seconds"),
            quantity: 42,
            source: UsageSource::ProviderReported,
            attempt: 2,
            provider: "p".into(),
            model: "m".into(),
            labels: Arc::default(),
            position: 0,
        })),
        EventPayload::AttemptFailed(Arc::new(record)),
        EventPayload::Completed(Arc::new(ExecutionResult {
            output: Output {
                text: "done".into(),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "lookup".into(),
                    arguments_json: "{\"q\":1}".into(),
                }],
                reasoning: vec![Reasoning {
                    text: "think".into(),
                    signature: "sig".into(),
                    redacted: String::new(),
                }],
            },
            finish_reason: FinishReason::ToolCalls,
            provider: "p".into(),
            model: "m".into(),
            attempt: 2,
        })),
        EventPayload::Failed(Arc::new(ExecutionFailure {
            error: ExecutionError {
                code: ErrorCode::OutcomeUnknown,
                message: "interrupted".into(),
                outcome: Outcome::Unknown,
                last_attempt_error: Some(attempt_error),
            },
            partial_output: Output {
                text: "part".into(),
                ..Output::default()
            },
            cancel_reason: Some("why".into()),
        })),
    ]
}
