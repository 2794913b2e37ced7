//! The span of one attempt: a client call in OpenTelemetry's terms, named and described
//! as the GenAI semantic conventions say (`gen_ai.*`), with the runtime's own fields beside.
//! Prompts and outputs are never put on it. Every field is recorded only when the span is
//! enabled (spans are exported, or `RUST_LOG` asks for them).

use opentelemetry::{Array, StringValue, Value};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::evidence::EndKind;
use crate::execution::{ErrorCode, ExecutionId, PlanTarget, UsageQuantity, UsageUnit};
use crate::provider::CallStream;
use crate::store::StoreError;

/// The operation every adapter performs (a chat completion, a message).
const OPERATION: &str = "chat";

/// The span of attempt `attempt` of execution `id` on `target`, served by an adapter of
/// kind `adapter` (none when the provider is not configured).
pub(super) fn attempt(
    id: &ExecutionId,
    attempt: u32,
    adapter: Option<&'static str>,
    target: &PlanTarget,
) -> Span {
    tracing::debug_span!(
        "attempt",
        otel.name = %format_args!("{OPERATION} {}", target.model),
        otel.kind = "client",
        otel.status_code = Empty,
        execution_id = %id,
        attempt,
        provider = %target.provider,
        model = %target.model,
        class = Empty,
        outcome = Empty,
        "error.type" = Empty,
        gen_ai.operation.name = OPERATION,
        gen_ai.provider.name = adapter,
        gen_ai.request.model = %target.model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
    )
}

/// Records a usage quantity the attempt reported, for the units the conventions name.
pub(super) fn usage(span: &Span, quantity: &UsageQuantity) {
    // First: recording on a disabled span still looks its field up by name.
    if span.is_disabled() {
        return;
    }
    let field = match &quantity.unit {
        unit if *unit == UsageUnit::INPUT_TOKENS => "gen_ai.usage.input_tokens",
        unit if *unit == UsageUnit::OUTPUT_TOKENS => "gen_ai.usage.output_tokens",
        _ => return,
    };
    span.record(field, quantity.quantity);
}

/// Records the model that produced a reply: the one the provider names, else the one the
/// call asked for (a provider that names none, as the scripted one).
pub(super) fn response_model(span: &Span, target: &PlanTarget, stream: &dyn CallStream) {
    if span.is_disabled() {
        return;
    }
    match stream.response_model() {
        Some(model) => span.record("gen_ai.response.model", &*model),
        None => span.record("gen_ai.response.model", &*target.model),
    };
}

/// Records how the attempt ended: succeeded, failed (its class and code), cut (the code of
/// what cut it), or broken off because the store failed.
pub(super) fn ended(span: &Span, end: Result<&EndKind, &StoreError>) {
    if span.is_disabled() {
        return;
    }
    match end {
        Ok(EndKind::Succeeded(reason)) => {
            span.record("outcome", "succeeded");
            let reasons = vec![StringValue::from(reason.as_str())];
            span.set_attribute(
                "gen_ai.response.finish_reasons",
                Value::Array(Array::String(reasons)),
            );
        }
        Ok(EndKind::Failed(error)) => {
            span.record("outcome", "failed")
                .record("class", error.class.as_str())
                .record("error.type", error.code.as_str())
                .record("otel.status_code", "error");
        }
        Ok(EndKind::Cut(code)) => {
            span.record("outcome", "cut")
                .record("error.type", code.as_str());
            // A caller's cancellation is its choice, not a fault.
            if *code != ErrorCode::Cancelled {
                span.record("otel.status_code", "error");
            }
        }
        Err(_) => {
            span.record("outcome", "failed")
                .record("error.type", "internal_error")
                .record("otel.status_code", "error");
        }
    }
}
