//! [`ExecutionInput`] -> an OpenAI chat completions request body, streaming with usage.
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use serde_json::{Map, Value, json};

use crate::config::MaxTokensField;
use crate::execution::{ContentPart, ExecutionInput, Message, ResponseFormatKind, Role};
use crate::provider::ProviderError;
use crate::provider::wire::{encode, function, image_url, json_object, number, unsupported};

/// The body of a streaming request for `model`.
pub(in crate::provider) fn body(
    model: &str,
    input: &ExecutionInput,
    max_tokens_field: MaxTokensField,
) -> Result<Vec<u8>, ProviderError> {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    let messages = input
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(&format!("input.messages[{i}]"), m))
        .collect::<Result<Vec<_>, _>>()?;
    body.insert("messages".into(), Value::Array(messages));
    if !input.tools.is_empty() {
        let mut tools = Vec::with_capacity(input.tools.len());
        for (i, tool) in input.tools.iter().enumerate() {
            let function = function(i, tool, "parameters")?;
            tools.push(json!({"type": "function", "function": function}));
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    let p = &input.parameters;
    if p.reasoning_budget_tokens.is_some() {
        return Err(unsupported(
            "input.parameters.reasoning_budget_tokens",
            "the openai chat completions protocol takes no reasoning budget",
        ));
    }
    if let Some(max) = p.max_output_tokens {
        body.insert(max_tokens_field.as_str().into(), max.into());
    }
    if let Some(t) = p.temperature {
        body.insert("temperature".into(), number(t));
    }
    if let Some(t) = p.top_p {
        body.insert("top_p".into(), number(t));
    }
    if !p.stop_sequences.is_empty() {
        body.insert("stop".into(), p.stop_sequences.clone().into());
    }
    if let Some(format) = &p.response_format {
        let field = "input.parameters.response_format";
        match format.kind {
            ResponseFormatKind::Text => {}
            ResponseFormatKind::JsonObject => {
                body.insert("response_format".into(), json!({"type": "json_object"}));
            }
            ResponseFormatKind::JsonSchema => {
                let schema = json_object(&format!("{field}.json_schema"), &format.json_schema)?;
                // The protocol requires a name; callers often leave it empty.
                let name = if format.schema_name.is_empty() {
                    "response"
                } else {
                    &format.schema_name
                };
                body.insert(
                    "response_format".into(),
                    json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema}}),
                );
            }
        }
    }
    body.insert("stream".into(), true.into());
    // Without this the stream carries no usage at all.
    body.insert("stream_options".into(), json!({"include_usage": true}));
    encode(body, input)
}

fn message(at: &str, m: &Message) -> Result<Value, ProviderError> {
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut out = Map::new();
    out.insert("role".into(), role.into());
    out.insert("content".into(), content(at, m)?);
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), id.clone().into());
    }
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| {
                let arguments = if c.arguments_json.is_empty() {
                    "{}"
                } else {
                    &c.arguments_json
                };
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": arguments},
                })
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    Ok(Value::Object(out))
}

/// One text part as a string (what every compatible server accepts), otherwise an array of
/// parts; an assistant message with only tool calls has `null` content.
/// Reasoning sent back is left out: chat completions servers take none back (DeepSeek refuses
/// a request that has it).
fn content(at: &str, m: &Message) -> Result<Value, ProviderError> {
    let sent = |part: &&ContentPart| !matches!(part, ContentPart::Reasoning(_));
    let mut kept = m.content.iter().filter(sent);
    match (kept.next(), kept.next()) {
        (None, _) => return Ok(Value::Null),
        (Some(ContentPart::Text(text)), None) => return Ok(text.clone().into()),
        _ => {}
    }
    let mut parts = Vec::with_capacity(m.content.len());
    for (j, part) in m.content.iter().enumerate() {
        let field = format!("{at}.content[{j}]");
        let part = match part {
            ContentPart::Reasoning(_) => continue,
            ContentPart::Text(text) => json!({"type": "text", "text": text}),
            ContentPart::Image(_) if m.role != Role::User => {
                return Err(unsupported(
                    field,
                    "the openai chat completions protocol takes images only in user messages",
                ));
            }
            ContentPart::Image(image) => {
                let url = image_url(&format!("{field}.image"), image)?;
                json!({"type": "image_url", "image_url": {"url": url}})
            }
        };
        parts.push(part);
    }
    Ok(Value::Array(parts))
}
