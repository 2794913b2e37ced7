//! `input`: messages, tools and generation parameters, within the request caps.

use super::super::error::Violations;
use super::super::limits::{
    MAX_CONTENT_PARTS, MAX_CONTENT_PARTS_IN_ALL, MAX_MESSAGE_TOOL_CALLS, MAX_MESSAGES,
    MAX_STOP_SEQUENCES, MAX_TOOL_CALLS_IN_ALL, MAX_TOOLS,
};
use crate::config::Config;
use crate::execution::{
    ContentPart, ExecutionInput, GenerationParameters, Message, ResponseFormatKind, Role,
};

/// A list longer than `max` is one violation of `field` (named only when it is one).
fn too_many(len: usize, max: usize, v: &mut Violations, field: impl FnOnce() -> String) -> bool {
    if len > max {
        v.push(
            field(),
            format!("has {len} entries; at most {max} are allowed"),
        );
        return true;
    }
    false
}

pub(super) fn check(config: &Config, input: &ExecutionInput, v: &mut Violations) {
    messages(input, v);
    tools(input, v);
    parameters(&input.parameters, v);
    let bytes = input.content_bytes();
    let limit = config.server.max_input_bytes;
    if bytes > limit {
        v.push(
            "input",
            format!("is {bytes} bytes of content; the limit is {limit} (server.max_input_bytes)"),
        );
    }
}

/// The messages: at least one, each valid, and within the counts in all.
fn messages(input: &ExecutionInput, v: &mut Violations) {
    if input.messages.is_empty() {
        v.push("input.messages", "needs at least one message");
    }
    if !too_many(input.messages.len(), MAX_MESSAGES, v, || {
        "input.messages".into()
    }) {
        for (i, m) in input.messages.iter().enumerate() {
            message(i, m, v);
        }
        let in_all =
            |count: fn(&Message) -> usize| -> usize { input.messages.iter().map(count).sum() };
        for (count, max, what) in [
            (
                in_all(|m| m.content.len()),
                MAX_CONTENT_PARTS_IN_ALL,
                "content parts",
            ),
            (
                in_all(|m| m.tool_calls.len()),
                MAX_TOOL_CALLS_IN_ALL,
                "tool calls",
            ),
        ] {
            if count > max {
                v.push(
                    "input.messages",
                    format!("has {count} {what} in all; at most {max} are allowed"),
                );
            }
        }
    }
}

/// The tool definitions: each named, its schema a JSON object.
fn tools(input: &ExecutionInput, v: &mut Violations) {
    if !too_many(input.tools.len(), MAX_TOOLS, v, || "input.tools".into()) {
        for (i, t) in input.tools.iter().enumerate() {
            if t.name.is_empty() {
                v.push(format!("input.tools[{i}].name"), "is required");
            }
            if !t.parameters_json_schema.is_empty() && !is_json_object(&t.parameters_json_schema) {
                v.push(
                    format!("input.tools[{i}].parameters_json_schema"),
                    "is not a JSON object",
                );
            }
        }
    }
}

/// The generation parameters, each within its range.
fn parameters(p: &GenerationParameters, v: &mut Violations) {
    too_many(p.stop_sequences.len(), MAX_STOP_SEQUENCES, v, || {
        "input.parameters.stop_sequences".into()
    });
    if p.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        v.push("input.parameters.temperature", "must be between 0 and 2");
    }
    if p.top_p.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        v.push("input.parameters.top_p", "must be between 0 and 1");
    }
    if p.max_output_tokens == Some(0) {
        v.push(
            "input.parameters.max_output_tokens",
            "must be at least 1 when set",
        );
    }
    match (p.reasoning_budget_tokens, p.max_output_tokens) {
        (Some(0), _) => v.push(
            "input.parameters.reasoning_budget_tokens",
            "must be at least 1 when set",
        ),
        // The answer comes out of the same budget as the reasoning.
        (Some(budget), Some(max)) if budget >= max => v.push(
            "input.parameters.reasoning_budget_tokens",
            format!("must be less than max_output_tokens ({max})"),
        ),
        _ => {}
    }
    if let Some(format) = &p.response_format
        && format.kind == ResponseFormatKind::JsonSchema
        && !is_json_object(&format.json_schema)
    {
        v.push(
            "input.parameters.response_format.json_schema",
            "must be a JSON object for kind JSON_SCHEMA",
        );
    }
}

fn message(i: usize, m: &Message, v: &mut Violations) {
    // Built only for a violation: most messages have none.
    let at = || format!("input.messages[{i}]");
    if m.content.is_empty() && m.tool_calls.is_empty() {
        v.push(format!("{}.content", at()), "is empty");
    }
    match (m.role, &m.tool_call_id) {
        (Role::Tool, None) => v.push(
            format!("{}.tool_call_id", at()),
            "is required for a tool message",
        ),
        (Role::System | Role::User | Role::Assistant, Some(_)) => v.push(
            format!("{}.tool_call_id", at()),
            "is only allowed on a tool message",
        ),
        _ => {}
    }
    if !m.tool_calls.is_empty() && m.role != Role::Assistant {
        v.push(
            format!("{}.tool_calls", at()),
            "are only allowed on an assistant message",
        );
    }
    too_many(m.tool_calls.len(), MAX_MESSAGE_TOOL_CALLS, v, || {
        format!("{}.tool_calls", at())
    });
    if too_many(m.content.len(), MAX_CONTENT_PARTS, v, || {
        format!("{}.content", at())
    }) {
        return;
    }
    for (j, part) in m.content.iter().enumerate() {
        match part {
            ContentPart::Text(text) if text.is_empty() => {
                v.push(format!("{}.content[{j}].text", at()), "is empty");
            }
            ContentPart::Image(image) if image.url.is_empty() == image.data.is_empty() => {
                v.push(
                    format!("{}.content[{j}].image", at()),
                    "needs exactly one of `url` and `data`",
                );
            }
            ContentPart::Reasoning(_) if m.role != Role::Assistant => {
                v.push(
                    format!("{}.content[{j}].reasoning", at()),
                    "is only sent back in an assistant message",
                );
            }
            ContentPart::Reasoning(r)
                if (r.text.is_empty() && r.signature.is_empty()) == r.redacted.is_empty() =>
            {
                v.push(
                    format!("{}.content[{j}].reasoning", at()),
                    "needs `text` (or a `signature`) or `redacted`, not both",
                );
            }
            _ => {}
        }
    }
}

/// Whether `text` is one JSON object: checked without building it, so a schema of the
/// caller's size costs no tree of that size.
fn is_json_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}
