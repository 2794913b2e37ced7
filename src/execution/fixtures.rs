//! Payloads of every kind, for tests of this crate and of stores outside it (the
//! `conformance` feature): events that form a legal execution when appended in order.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::execution::{
    Acceptance, AttemptStart, EffectiveLimits, ErrorCode, EventPayload, ExecutionError,
    ExecutionFailure, ExecutionResult, FinishReason, Outcome, Output, RoutingPlan,
};

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
        },
    }))
}

/// An `execution.routing` payload with an empty plan.
pub fn routing() -> EventPayload {
    EventPayload::Routing(Arc::new(RoutingPlan {
        policy: "default".into(),
        required_capabilities: Vec::new(),
        targets: Vec::new(),
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
