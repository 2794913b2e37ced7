//! Wire -> core. Only what the core types cannot represent is checked here (an unset enum,
//! an empty oneof, a malformed timestamp or id); meaning is checked by the runtime, so an
//! embedded caller gets the same validation. A list over its cap is refused before any of it
//! is converted: the runtime would refuse it anyway.

use std::time::{Duration, SystemTime};

use crate::execution::{
    ContentPart, Delivery, ExecuteRequest, ExecutionId, ExecutionInput, GenerationParameters,
    Image, Message, Priority, Reasoning, ResponseFormat, ResponseFormatKind, Role, ToolCall,
    ToolDefinition, TraceContext,
};
use crate::pb;
use crate::runtime::limits::{MAX_CONTENT_PARTS, MAX_MESSAGES};
use crate::runtime::{RuntimeError, Violations};
use crate::store::{MalformedCursor, UsageCursor};

/// The W3C trace context of a call (`traceparent`, `tracestate`), if it carries a valid one.
/// The names are made once: looking a header up by text parses the name on every call.
pub(crate) fn trace(metadata: &tonic::metadata::MetadataMap) -> Option<TraceContext> {
    use http::HeaderName;
    const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
    const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
    let headers: &http::HeaderMap = metadata.as_ref();
    let parent = headers.get(TRACEPARENT)?;
    let states = headers
        .get_all(TRACESTATE)
        .into_iter()
        .map(|v| v.as_bytes());
    TraceContext::parse(parent.as_bytes(), states)
}

/// A wire request decoded as `Execute` and `Submit` decode it, every field that is wrong
/// named: for an embedding program that takes the wire messages over a transport of its own.
impl TryFrom<pb::ExecuteRequest> for ExecuteRequest {
    type Error = RuntimeError;

    fn try_from(wire: pb::ExecuteRequest) -> Result<Self, RuntimeError> {
        execute_request(wire)
    }
}

/// Decodes an `ExecuteRequest`.
pub(crate) fn execute_request(wire: pb::ExecuteRequest) -> Result<ExecuteRequest, RuntimeError> {
    let mut v = Violations::new();
    let wire_input = wire.input.unwrap_or_default();
    let messages = wire_input.messages.len();
    if messages > MAX_MESSAGES {
        v.push(
            "input.messages",
            format!("has {messages} entries; at most {MAX_MESSAGES} are allowed"),
        );
        return Err(RuntimeError::InvalidArgument(v));
    }
    let input = input(wire_input, &mut v);
    let deadline = wire.deadline.and_then(|t| match timestamp(&t) {
        Some(time) => Some(time),
        None => {
            v.push("deadline", "is not a valid timestamp");
            None
        }
    });
    let delivery = match pb::Delivery::try_from(wire.delivery) {
        Ok(pb::Delivery::Unspecified) => None,
        Ok(pb::Delivery::Streamed) => Some(Delivery::Streamed),
        Ok(pb::Delivery::Buffered) => Some(Delivery::Buffered),
        Err(_) => {
            v.push(
                "delivery",
                format!(
                    "unknown value {}; STREAMED, BUFFERED, or unset for the policy's default",
                    wire.delivery
                ),
            );
            None
        }
    };
    let priority = match pb::Priority::try_from(wire.priority) {
        Ok(pb::Priority::Unspecified) => None,
        Ok(pb::Priority::Interactive) => Some(Priority::Interactive),
        Ok(pb::Priority::Standard) => Some(Priority::Standard),
        Ok(pb::Priority::Batch) => Some(Priority::Batch),
        Err(_) => {
            v.push(
                "priority",
                format!(
                    "unknown value {}; INTERACTIVE, STANDARD, BATCH, or unset for STANDARD",
                    wire.priority
                ),
            );
            None
        }
    };
    if !v.is_empty() {
        return Err(RuntimeError::InvalidArgument(v));
    }
    Ok(ExecuteRequest {
        ability: wire.ability,
        capabilities: wire
            .requirements
            .map(|r| r.capabilities)
            .unwrap_or_default(),
        input,
        deadline,
        policy: non_empty(wire.policy),
        target: non_empty(wire.target),
        max_attempts: wire.max_attempts,
        allow_fallback: wire.allow_fallback,
        delivery,
        priority,
        idempotency_key: non_empty(wire.idempotency_key),
        labels: wire.labels.into_iter().collect(),
        // From the call's metadata, not its message (`service.rs`).
        trace: None,
    })
}

/// Decodes an execution id in `field`.
pub(crate) fn execution_id(text: &str, field: &str) -> Result<ExecutionId, RuntimeError> {
    if text.is_empty() {
        return Err(RuntimeError::invalid(field, "is required"));
    }
    text.parse()
        .map_err(|e: crate::execution::MalformedId| RuntimeError::invalid(field, e.to_string()))
}

/// A usage cursor; empty for none (the start of the order).
pub(crate) fn usage_cursor(text: &str, field: &str) -> Result<Option<UsageCursor>, RuntimeError> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|e: MalformedCursor| RuntimeError::invalid(field, e.to_string()))
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// A wire timestamp as a time; `None` for one out of range.
pub(crate) fn timestamp(t: &prost_types::Timestamp) -> Option<SystemTime> {
    let secs = u64::try_from(t.seconds).ok()?;
    let nanos = u32::try_from(t.nanos).ok().filter(|n| *n < 1_000_000_000)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

fn input(wire: pb::ExecutionInput, v: &mut Violations) -> ExecutionInput {
    let messages = wire
        .messages
        .into_iter()
        .enumerate()
        .filter_map(|(i, m)| message(i, m, v))
        .collect();
    let tools = wire
        .tools
        .into_iter()
        .map(|t| ToolDefinition {
            name: t.name,
            description: t.description,
            parameters_json_schema: t.parameters_json_schema,
        })
        .collect();
    let p = wire.parameters.unwrap_or_default();
    let response_format = p.response_format.and_then(|f| {
        let kind = match pb::ResponseFormatKind::try_from(f.kind) {
            Ok(pb::ResponseFormatKind::Unspecified) => return None,
            Ok(pb::ResponseFormatKind::Text) => ResponseFormatKind::Text,
            Ok(pb::ResponseFormatKind::JsonObject) => ResponseFormatKind::JsonObject,
            Ok(pb::ResponseFormatKind::JsonSchema) => ResponseFormatKind::JsonSchema,
            Err(_) => {
                v.push(
                    "input.parameters.response_format.kind",
                    format!("unknown value {}", f.kind),
                );
                return None;
            }
        };
        Some(ResponseFormat {
            kind,
            json_schema: f.json_schema,
            schema_name: f.schema_name,
        })
    });
    ExecutionInput {
        messages,
        tools,
        parameters: GenerationParameters {
            max_output_tokens: p.max_output_tokens,
            temperature: p.temperature,
            top_p: p.top_p,
            stop_sequences: p.stop_sequences,
            response_format,
            reasoning_budget_tokens: p.reasoning_budget_tokens,
        },
    }
}

fn message(i: usize, m: pb::Message, v: &mut Violations) -> Option<Message> {
    // Built only for a violation: most messages have none.
    let at = || format!("input.messages[{i}]");
    let role = match pb::Role::try_from(m.role) {
        Ok(pb::Role::System) => Some(Role::System),
        Ok(pb::Role::User) => Some(Role::User),
        Ok(pb::Role::Assistant) => Some(Role::Assistant),
        Ok(pb::Role::Tool) => Some(Role::Tool),
        Ok(pb::Role::Unspecified) => {
            v.push(
                format!("{}.role", at()),
                "is required (SYSTEM, USER, ASSISTANT or TOOL)",
            );
            None
        }
        Err(_) => {
            v.push(
                format!("{}.role", at()),
                format!("unknown value {}", m.role),
            );
            None
        }
    };
    if m.content.len() > MAX_CONTENT_PARTS {
        v.push(
            format!("{}.content", at()),
            format!(
                "has {} entries; at most {MAX_CONTENT_PARTS} are allowed",
                m.content.len()
            ),
        );
        return None;
    }
    let mut content = Vec::with_capacity(m.content.len());
    for (j, part) in m.content.into_iter().enumerate() {
        match part.part {
            Some(pb::content_part::Part::Text(text)) => content.push(ContentPart::Text(text)),
            Some(pb::content_part::Part::Image(image)) => content.push(ContentPart::Image(Image {
                url: image.url,
                data: image.data,
                media_type: image.media_type,
            })),
            Some(pb::content_part::Part::Reasoning(r)) => {
                content.push(ContentPart::Reasoning(Reasoning {
                    text: r.text,
                    signature: r.signature,
                    redacted: r.redacted,
                }));
            }
            None => v.push(
                format!("{}.content[{j}]", at()),
                "sets none of `text`, `image` and `reasoning`",
            ),
        }
    }
    let tool_calls = m
        .tool_calls
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.name,
            arguments_json: c.arguments_json,
        })
        .collect();
    Some(Message {
        role: role?,
        content,
        tool_calls,
        tool_call_id: non_empty(m.tool_call_id),
    })
}
