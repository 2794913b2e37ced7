//! Core -> wire.

use std::time::{Duration, SystemTime};

use crate::config::{
    HealthMode, OnAllUnhealthy, OnContentFilter, OnRejected, OnUnknownOutcome, PolicyConfig,
};
use crate::execution::{
    AttemptError, AttemptRecord, Delivery, EffectiveLimits, ErrorClass, EventPayload, Execution,
    ExecutionError, ExecutionResult, ExecutionState, FinishReason, NextAction, Outcome, Output,
    Priority, Reasoning, ReasoningPiece, RoutingPlan, ToolCall, UsageFact, UsageSource,
};
use crate::pb;
use crate::routing::{HealthState, TargetHealth};
use crate::runtime::{RuntimeMetadata, RuntimeState, UsageRecord};

/// A name the core shares (`Arc<str>`) as the wire's own string: a plain copy, where
/// `to_string` would go through the formatter.
fn owned(name: &str) -> String {
    name.to_owned()
}

/// The wire form of a point in time.
pub(crate) fn timestamp(t: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(t)
}

/// The wire form of a span of time.
pub(crate) fn duration(d: Duration) -> prost_types::Duration {
    // Durations here are far below the ~292-year limit of the wire type.
    prost_types::Duration::try_from(d).unwrap_or(prost_types::Duration {
        seconds: i64::MAX,
        nanos: 0,
    })
}

/// The wire form of a state.
pub(crate) fn state(s: ExecutionState) -> pb::ExecutionState {
    match s {
        ExecutionState::Accepted => pb::ExecutionState::Accepted,
        ExecutionState::Routing => pb::ExecutionState::Routing,
        ExecutionState::Running => pb::ExecutionState::Running,
        ExecutionState::Succeeded => pb::ExecutionState::Succeeded,
        ExecutionState::Failed => pb::ExecutionState::Failed,
        ExecutionState::Cancelled => pb::ExecutionState::Cancelled,
    }
}

/// The wire form of an event of execution `id`, built as a prost message. The service
/// streams events as [`WireEvent`](super::WireEvent)s instead; this is the form they must
/// decode to, and what the HTTP ingress writes as JSON.
pub(crate) fn event(
    id: crate::execution::ExecutionId,
    e: &crate::execution::Event,
) -> pb::ExecutionEvent {
    pb::ExecutionEvent {
        execution_id: id.to_text(),
        sequence: e.sequence,
        time: Some(timestamp(e.time)),
        r#type: e.payload.type_name().to_owned(),
        state: state(e.state).into(),
        payload: Some(payload(&e.payload)),
    }
}

/// The wire form of a payload.
pub(crate) fn payload(p: &EventPayload) -> pb::execution_event::Payload {
    use pb::execution_event::Payload;
    match p {
        EventPayload::Accepted(accepted) => Payload::Accepted(pb::ExecutionAccepted {
            ability: owned(&accepted.ability),
            policy: owned(&accepted.policy),
            limits: Some(limits(&accepted.limits)),
        }),
        EventPayload::Routing(p) => Payload::Routing(pb::ExecutionRouting {
            plan: Some(plan(p)),
        }),
        EventPayload::AttemptStarted(started) => Payload::AttemptStarted(pb::RouteAttemptStarted {
            attempt: started.attempt,
            provider: owned(&started.provider),
            model: owned(&started.model),
        }),
        EventPayload::AttemptFailed(record) => Payload::AttemptFailed(pb::RouteAttemptFailed {
            attempt: Some(attempt(record)),
        }),
        EventPayload::TextDelta { attempt, text } => Payload::TextDelta(pb::OutputTextDelta {
            attempt: *attempt,
            text: owned(text),
        }),
        EventPayload::ToolCallStarted(call) => {
            Payload::ToolCallStarted(pb::OutputToolCallStarted {
                attempt: call.attempt,
                index: call.index,
                id: call.id.clone(),
                name: call.name.clone(),
            })
        }
        EventPayload::ToolCallArgumentsDelta {
            attempt,
            index,
            delta,
        } => Payload::ToolCallArgumentsDelta(pb::OutputToolCallArgumentsDelta {
            attempt: *attempt,
            index: *index,
            delta: owned(delta),
        }),
        EventPayload::ReasoningDelta {
            attempt,
            piece,
            text,
        } => {
            let mut delta = pb::OutputReasoningDelta {
                attempt: *attempt,
                ..Default::default()
            };
            *match piece {
                ReasoningPiece::Text => &mut delta.text,
                ReasoningPiece::Signature => &mut delta.signature,
                ReasoningPiece::Redacted => &mut delta.redacted,
            } = owned(text);
            Payload::ReasoningDelta(delta)
        }
        EventPayload::Progress { attempt, message } => Payload::Progress(pb::ExecutionProgress {
            attempt: *attempt,
            message: owned(message),
        }),
        EventPayload::Usage(fact) => Payload::UsageReported(pb::UsageReported {
            fact: Some(usage(fact)),
        }),
        EventPayload::Completed(r) => Payload::Completed(pb::ExecutionCompleted {
            result: Some(result(r)),
        }),
        EventPayload::Failed(failure) => Payload::Failed(pb::ExecutionFailed {
            error: Some(error(&failure.error)),
            partial_output: Some(output(&failure.partial_output)),
            cancel_reason: failure.cancel_reason.clone().unwrap_or_default(),
        }),
    }
}

/// The wire form of the materialized view.
pub(crate) fn execution(x: &Execution) -> pb::Execution {
    let (provider, model) = x
        .target
        .as_ref()
        .map(|(p, m)| (owned(p), owned(m)))
        .unwrap_or_default();
    pb::Execution {
        execution_id: x.id.to_text(),
        state: state(x.state).into(),
        ability: owned(&x.ability),
        policy: owned(&x.policy),
        created_at: Some(timestamp(x.created_at)),
        updated_at: Some(timestamp(x.updated_at)),
        limits: Some(limits(&x.limits)),
        last_sequence: x.last_sequence,
        plan: x.plan.as_deref().map(plan),
        attempts: x.attempts.iter().map(attempt).collect(),
        provider,
        model,
        result: x.result.as_ref().map(result),
        error: x.error.as_ref().map(error),
        partial_output: (!x.partial_output.is_empty()).then(|| output(&x.partial_output)),
        usage: x.usage.iter().map(usage).collect(),
        labels: x
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        idempotency_key: x.idempotency_key.clone().unwrap_or_default(),
    }
}

fn limits(l: &EffectiveLimits) -> pb::EffectiveLimits {
    pb::EffectiveLimits {
        deadline: Some(timestamp(l.deadline)),
        max_attempts: l.max_attempts,
        allow_fallback: l.allow_fallback,
        retry_budget: Some(duration(l.retry_budget)),
        delivery: delivery(l.delivery).into(),
        priority: priority(l.priority).into(),
    }
}

pub(super) fn priority(p: Priority) -> pb::Priority {
    match p {
        Priority::Interactive => pb::Priority::Interactive,
        Priority::Standard => pb::Priority::Standard,
        Priority::Batch => pb::Priority::Batch,
    }
}

pub(super) fn delivery(d: Delivery) -> pb::Delivery {
    match d {
        Delivery::Streamed => pb::Delivery::Streamed,
        Delivery::Buffered => pb::Delivery::Buffered,
    }
}

fn plan(p: &RoutingPlan) -> pb::RoutingPlan {
    pb::RoutingPlan {
        policy: owned(&p.policy),
        required_capabilities: p.required_capabilities.clone(),
        targets: p
            .targets
            .iter()
            .map(|t| pb::PlanTarget {
                provider: owned(&t.provider),
                model: owned(&t.model),
                kept: t.kept,
                reason: t.reason.clone().unwrap_or_default(),
                missing_capabilities: t.missing_capabilities.clone(),
                ejected: t.ejected.as_ref().map(|e| pb::Ejection {
                    reason: e.reason.clone(),
                    until: e.until.map(timestamp),
                }),
            })
            .collect(),
        ended_before_routing: p
            .ended_before_routing
            .as_deref()
            .map(str::to_owned)
            .unwrap_or_default(),
        tried_anyway: p.tried_anyway,
    }
}

fn attempt(a: &AttemptRecord) -> pb::Attempt {
    pb::Attempt {
        number: a.number,
        provider: owned(&a.provider),
        model: owned(&a.model),
        started_at: Some(timestamp(a.started_at)),
        duration: a.duration.map(duration),
        error: a.error.as_ref().map(attempt_error),
        output_committed: a.output_committed,
        outcome: a.outcome.map_or(pb::Outcome::Unspecified, outcome).into(),
        next_action: a
            .next_action
            .map_or(pb::NextAction::Unspecified, |n| match n {
                NextAction::RetrySameTarget => pb::NextAction::RetrySameTarget,
                NextAction::Fallback => pb::NextAction::Fallback,
                NextAction::Stop => pb::NextAction::Stop,
            })
            .into(),
        admitted: a.admitted,
        held_output: (!a.held_output.is_empty()).then(|| output(&a.held_output)),
    }
}

fn attempt_error(e: &AttemptError) -> pb::AttemptError {
    pb::AttemptError {
        class: match e.class {
            ErrorClass::Retryable => pb::ErrorClass::Retryable,
            ErrorClass::Rejected => pb::ErrorClass::Rejected,
            ErrorClass::Invalid => pb::ErrorClass::Invalid,
            ErrorClass::OutcomeUnknown => pb::ErrorClass::OutcomeUnknown,
            ErrorClass::Interrupted => pb::ErrorClass::Interrupted,
        }
        .into(),
        code: e.code.as_str().to_owned(),
        message: e.message.clone(),
        retry_after: e.retry_after.map(duration),
    }
}

fn outcome(o: Outcome) -> pb::Outcome {
    match o {
        Outcome::NotStarted => pb::Outcome::NotStarted,
        Outcome::Failed => pb::Outcome::Failed,
        Outcome::Unknown => pb::Outcome::Unknown,
        Outcome::Interrupted => pb::Outcome::Interrupted,
        Outcome::Completed => pb::Outcome::Completed,
    }
}

fn output(o: &Output) -> pb::Output {
    pb::Output {
        text: o.text.clone(),
        tool_calls: o.tool_calls.iter().map(tool_call).collect(),
        reasoning: o.reasoning.iter().map(reasoning).collect(),
    }
}

/// The wire form of a reasoning block, as input takes it back.
pub(crate) fn reasoning(r: &Reasoning) -> pb::Reasoning {
    pb::Reasoning {
        text: r.text.clone(),
        signature: r.signature.clone(),
        redacted: r.redacted.clone(),
    }
}

fn tool_call(c: &ToolCall) -> pb::ToolCall {
    pb::ToolCall {
        id: c.id.clone(),
        name: c.name.clone(),
        arguments_json: c.arguments_json.clone(),
    }
}

/// The wire form of a finish reason.
pub(crate) fn finish_reason(r: FinishReason) -> pb::FinishReason {
    match r {
        FinishReason::Stop => pb::FinishReason::Stop,
        FinishReason::Length => pb::FinishReason::Length,
        FinishReason::ToolCalls => pb::FinishReason::ToolCalls,
        FinishReason::ContentFilter => pb::FinishReason::ContentFilter,
        FinishReason::Refusal => pb::FinishReason::Refusal,
        FinishReason::Other => pb::FinishReason::Other,
    }
}

fn result(r: &ExecutionResult) -> pb::ExecutionResult {
    pb::ExecutionResult {
        output: Some(output(&r.output)),
        finish_reason: finish_reason(r.finish_reason).into(),
        provider: owned(&r.provider),
        model: owned(&r.model),
        attempt: r.attempt,
    }
}

fn error(e: &ExecutionError) -> pb::ExecutionError {
    pb::ExecutionError {
        code: e.code.as_str().to_owned(),
        message: e.message.clone(),
        outcome: outcome(e.outcome).into(),
        last_attempt_error: e.last_attempt_error.as_ref().map(attempt_error),
    }
}

/// The wire form of a usage source.
pub(crate) fn usage_source(s: UsageSource) -> pb::UsageSource {
    match s {
        UsageSource::ProviderReported => pb::UsageSource::ProviderReported,
        UsageSource::RuntimeMeasured => pb::UsageSource::RuntimeMeasured,
        UsageSource::RuntimeEstimated => pb::UsageSource::RuntimeEstimated,
    }
}

fn usage(f: &UsageFact) -> pb::UsageFact {
    pb::UsageFact {
        unit: owned(f.unit.as_str()),
        quantity: f.quantity,
        source: usage_source(f.source).into(),
        attempt: f.attempt,
        provider: owned(&f.provider),
        model: owned(&f.model),
        labels: f
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// The wire form of a usage record.
pub(crate) fn usage_record(record: &UsageRecord) -> pb::UsageRecord {
    let entry = &record.entry;
    pb::UsageRecord {
        cursor: record.cursor.to_string(),
        execution_id: entry.execution_id.to_text(),
        sequence: entry.sequence,
        time: Some(timestamp(entry.time)),
        fact: Some(usage(&entry.fact)),
    }
}

/// The wire form of the runtime's self-description.
pub(crate) fn metadata(m: &RuntimeMetadata) -> pb::RuntimeMetadata {
    pb::RuntimeMetadata {
        state: match m.state {
            RuntimeState::Ready => pb::RuntimeState::Ready,
            RuntimeState::Stopping => pb::RuntimeState::Stopping,
            RuntimeState::Unavailable => pb::RuntimeState::Unavailable,
        }
        .into(),
        version: m.version.to_owned(),
        store: Some(pb::StoreInfo {
            kind: m.store_kind.to_owned(),
            durable: m.store_durable,
            max_executions: m.store.limits.max_executions as u64,
            retention: Some(duration(m.store.limits.retention)),
            executions: m.store.executions as u64,
            max_bytes: m.store.limits.max_bytes,
            bytes: m.store.bytes,
        }),
        providers: m
            .providers
            .iter()
            .map(|p| pb::ProviderInfo {
                name: p.name.to_string(),
                adapter: p.adapter.to_owned(),
                max_concurrency: p.max_concurrency,
                queue_capacity: p.queue_capacity[Priority::Standard.index()],
                queues: Priority::ALL
                    .into_iter()
                    .map(|class| pb::AdmissionQueue {
                        priority: priority(class).into(),
                        capacity: p.queue_capacity[class.index()],
                        queued: p.queued_by_priority[class.index()].queued,
                        oldest_wait: Some(duration(p.queued_by_priority[class.index()].oldest)),
                    })
                    .collect(),
                on_unknown_outcome: unknown_outcome(p.on_unknown_outcome).into(),
                in_flight: p.in_flight,
                queued: p.queued,
                limiter: if p.limiter.is_some() {
                    "redis"
                } else {
                    "local"
                }
                .to_owned(),
                global_in_flight: p.limiter.and_then(|l| l.global_in_flight),
                limiter_reachable: p.limiter.is_none_or(|l| l.reachable),
                models: p
                    .models
                    .iter()
                    .map(|m| pb::ModelInfo {
                        name: m.name.to_string(),
                        capabilities: m.capabilities.clone(),
                        health: Some(target_health(&m.health)),
                    })
                    .collect(),
            })
            .collect(),
        abilities: m
            .abilities
            .iter()
            .map(|a| pb::AbilityInfo {
                name: a.name.to_string(),
                default_policy: a.default_policy.to_string(),
                allowed_policies: a.allowed_policies.iter().map(|p| p.to_string()).collect(),
                requires: a.requires.iter().cloned().collect(),
            })
            .collect(),
        policies: m.policies.iter().map(policy_info).collect(),
    }
}

fn unknown_outcome(mode: OnUnknownOutcome) -> pb::OnUnknownOutcome {
    match mode {
        OnUnknownOutcome::Stop => pb::OnUnknownOutcome::Stop,
        OnUnknownOutcome::Retry => pb::OnUnknownOutcome::Retry,
        OnUnknownOutcome::Fallback => pb::OnUnknownOutcome::Fallback,
    }
}

/// One routing policy, as `GetRuntimeMetadata` shows it.
fn policy_info(p: &PolicyConfig) -> pb::PolicyInfo {
    pb::PolicyInfo {
        name: p.name.to_string(),
        targets: p.targets.iter().map(ToString::to_string).collect(),
        max_attempts: p.max_attempts,
        retry_budget: Some(duration(p.retry_budget)),
        retries_per_target: p.retries_per_target,
        min_attempt_time: Some(duration(p.min_attempt_time)),
        on_rejected: match p.on_rejected {
            OnRejected::Fallback => pb::OnRejected::Fallback,
            OnRejected::Stop => pb::OnRejected::Stop,
        }
        .into(),
        on_unknown_outcome: p
            .on_unknown_outcome
            .map_or(pb::OnUnknownOutcome::Unspecified, unknown_outcome)
            .into(),
        on_content_filter: match p.on_content_filter {
            OnContentFilter::Stop => pb::OnContentFilter::Stop,
            OnContentFilter::Fallback => pb::OnContentFilter::Fallback,
        }
        .into(),
        delivery: delivery(p.delivery).into(),
        health: p.health == HealthMode::On,
        on_all_unhealthy: match p.on_all_unhealthy {
            OnAllUnhealthy::TryAnyway => pb::OnAllUnhealthy::TryAnyway,
            OnAllUnhealthy::Fail => pb::OnAllUnhealthy::Fail,
        }
        .into(),
    }
}

/// A target's health, as `GetRuntimeMetadata` shows it.
fn target_health(h: &TargetHealth) -> pb::TargetHealth {
    pb::TargetHealth {
        state: match h.state {
            HealthState::Off => pb::HealthState::Off,
            HealthState::Closed => pb::HealthState::Closed,
            HealthState::Open => pb::HealthState::Open,
            HealthState::HalfOpen => pb::HealthState::HalfOpen,
        }
        .into(),
        reason: h.reason.clone(),
        until: h.until.map(timestamp),
        consecutive_failures: h.consecutive_failures,
        ejections: h.ejections,
    }
}
