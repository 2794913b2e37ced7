//! The span of each call, made for the HTTP/2 driver (`connection.rs`, `stream.rs`), which
//! knows nothing of the runtime: what the span is named, and whose child it is.

use http::HeaderMap;

use crate::execution::TraceContext;
use crate::runtime::trace;

const TRACEPARENT: http::HeaderName = http::HeaderName::from_static(crate::execution::TRACEPARENT);
const TRACESTATE: http::HeaderName = http::HeaderName::from_static(crate::execution::TRACESTATE);

/// One span per RPC, named by its method, so every log line of a call carries it: at
/// debug, since at the default level it cost 2% of a call's instructions, and every log line
/// a call writes at info or above names its execution already. Exported, it is the server
/// side of the call (OpenTelemetry's RPC conventions), the child of the caller's
/// `traceparent`.
pub(super) fn rpc_span(path: &str, headers: &HeaderMap) -> tracing::Span {
    // Health probes come every few seconds from every prober: no span of their own.
    if path.starts_with("/grpc.health.v1.Health/") {
        return tracing::Span::none();
    }
    let span = tracing::debug_span!(
        "rpc",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        method = path,
        rpc.system = "grpc",
        rpc.service = tracing::field::Empty,
        rpc.method = tracing::field::Empty,
        rpc.grpc.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    // The name only of a method this server has: a caller cannot mint span names.
    let name = path.strip_prefix('/').unwrap_or(path);
    match name.split_once('/') {
        Some((service, method)) if SERVICES.contains(&service) => {
            span.record("otel.name", name)
                .record("rpc.service", service)
                .record("rpc.method", method);
        }
        _ => {
            span.record("otel.name", "unknown");
        }
    }
    if let Some(parent) = headers.get(TRACEPARENT) {
        let states = headers.get_all(TRACESTATE).iter().map(|v| v.as_bytes());
        if let Some(caller) = TraceContext::parse(parent.as_bytes(), states) {
            trace::adopt(&span, &caller);
        }
    }
    span
}

/// The services this server serves (health aside).
const SERVICES: [&str; 3] = [
    super::SERVICE_NAME,
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];
