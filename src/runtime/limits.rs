//! The fixed caps on what one request may hold, beside `server.max_input_bytes` (its content
//! bytes). The gRPC decoder counts the lists on the wire against them before it builds a
//! message (`service::codec`), and validation checks them again for callers in process. A request over any of them is refused with a field violation naming the field; no
//! caller string is echoed at its own length in an error (at most
//! [`EXCERPT_CHARS`](super::error::EXCERPT_CHARS) characters of it).

/// Messages in `input.messages`.
pub(crate) const MAX_MESSAGES: usize = 10_000;
/// Content parts in one message.
pub(crate) const MAX_CONTENT_PARTS: usize = 1_000;
/// Content parts in all messages together.
pub(crate) const MAX_CONTENT_PARTS_IN_ALL: usize = 10_000;
/// Tool calls in one (assistant) message.
pub(crate) const MAX_MESSAGE_TOOL_CALLS: usize = 256;
/// Tool calls in all messages together.
pub(crate) const MAX_TOOL_CALLS_IN_ALL: usize = 10_000;
/// Tools in `input.tools`.
pub(crate) const MAX_TOOLS: usize = 256;
/// Stop sequences in `input.parameters.stop_sequences`.
pub(crate) const MAX_STOP_SEQUENCES: usize = 16;
/// Capabilities in `requirements.capabilities`.
pub(crate) const MAX_CAPABILITIES: usize = 64;
/// Bytes of one capability name.
pub(crate) const MAX_CAPABILITY_BYTES: usize = 128;
/// Bytes of an idempotency key.
pub(crate) const MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;
/// Labels per request.
pub(crate) const MAX_LABELS: usize = 64;
/// Bytes of a label key.
pub(crate) const MAX_LABEL_KEY_BYTES: usize = 128;
/// Bytes of a label value.
pub(crate) const MAX_LABEL_VALUE_BYTES: usize = 512;
/// Bytes of a `CancelExecution` reason.
pub(crate) const MAX_CANCEL_REASON_BYTES: usize = 512;
/// What a gRPC request may weigh on the wire beyond `server.max_input_bytes` of content: its
/// framing, roles, names and parameters. The decoder refuses anything larger before it builds
/// a message.
pub(crate) const fn max_request_bytes(max_input_bytes: usize) -> usize {
    max_input_bytes
        .saturating_add(max_input_bytes / 8)
        .saturating_add(64 * 1024)
}
