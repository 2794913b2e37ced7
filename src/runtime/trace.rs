//! Spans and the trace they belong to: an RPC's span takes the caller's `traceparent` as
//! its parent, and a provider request carries the trace on. When spans are exported the
//! request's parent is the attempt's span; when they are not (the spans are disabled), the
//! caller's context is forwarded as it came, so the provider's side still joins the
//! caller's trace.

use std::str::FromStr;

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::execution::{Execution, TraceContext};

/// Makes `caller` the parent of `span`, which must not have been entered yet. Does
/// nothing when spans are not exported.
pub(crate) fn adopt(span: &Span, caller: &TraceContext) {
    if span.is_disabled() {
        return;
    }
    let state = caller
        .state()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let remote = SpanContext::new(
        TraceId::from_bytes(caller.trace_id()),
        SpanId::from_bytes(caller.span_id()),
        TraceFlags::new(caller.flags()),
        true,
        state,
    );
    let parent = opentelemetry::Context::new().with_remote_span_context(remote);
    // Fails only for a span without the exporting layer, or one already entered.
    let _ = span.set_parent(parent);
}

/// The context a request made within `span` sends: `span` itself when spans are exported,
/// else the caller's as it came.
pub(crate) fn outgoing(span: &Span, caller: Option<&TraceContext>) -> Option<TraceContext> {
    if span.is_disabled() {
        return caller.cloned();
    }
    let context = span.context();
    let own = context.span().span_context().clone();
    if !own.is_valid() {
        return caller.cloned();
    }
    let state = own.trace_state().header();
    TraceContext::new(
        own.trace_id().to_bytes(),
        own.span_id().to_bytes(),
        own.trace_flags().to_u8(),
        (!state.is_empty()).then_some(state.as_str()),
    )
}

/// The span of an execution: a child of the RPC's span (`Submit` or `Execute`), which it
/// outlives, and the parent of its attempts'.
pub(crate) fn execution_span(view: &Execution) -> Span {
    tracing::debug_span!(
        "execution",
        otel.name = "execution",
        execution_id = %view.id,
        ability = %view.ability,
        policy = %view.policy,
        outcome = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Records how the execution ended on its span: `outcome`, the code of its terminal event
/// (`completed` for success); an error status for any code but those two and `cancelled`
/// (the caller's choice, not a fault).
pub(crate) fn record_end(span: &Span, outcome: Option<&'static str>) {
    let Some(outcome) = outcome else {
        return;
    };
    span.record("outcome", outcome);
    if !matches!(outcome, "completed" | "cancelled") {
        span.record("otel.status_code", "error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_exported_spans_the_callers_context_goes_on_unchanged() {
        let caller = TraceContext::parse(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            [&b"k=v"[..]],
        );
        let span = Span::none();
        adopt(&span, caller.as_ref().expect("valid"));
        assert_eq!(outgoing(&span, caller.as_ref()), caller);
        assert_eq!(outgoing(&span, None), None);
    }
}
