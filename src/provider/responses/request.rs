//! [`ExecutionInput`] -> an OpenAI Responses API request body, streaming, stateless
//! (`store: false`) with the reasoning's encrypted content asked for, so that it can come
//! back on the next turn.
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use serde_json::{Map, Value, json};

use crate::execution::{ContentPart, ExecutionInput, Message, Reasoning, ResponseFormatKind, Role};
use crate::provider::ProviderError;
use crate::provider::wire::{
    encode, function, image_url, invalid, json_object, number, unsupported,
};

/// The reasoning effort a `reasoning_budget_tokens` asks for: the Responses API takes an
/// effort, not a budget. Up to 2 048 tokens is `low`, up to 8 192 `medium`, more `high`.
fn effort(budget: u32) -> &'static str {
    match budget {
        0..=2048 => "low",
        2049..=8192 => "medium",
        _ => "high",
    }
}

/// The body of a streaming request for `model`.
pub(in crate::provider) fn body(
    model: &str,
    input: &ExecutionInput,
) -> Result<Vec<u8>, ProviderError> {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    let mut items = Vec::with_capacity(input.messages.len());
    for (i, m) in input.messages.iter().enumerate() {
        message(&format!("input.messages[{i}]"), m, &mut items)?;
    }
    body.insert("input".into(), Value::Array(items));
    if !input.tools.is_empty() {
        let mut tools = Vec::with_capacity(input.tools.len());
        for (i, tool) in input.tools.iter().enumerate() {
            let mut function = function(i, tool, "parameters")?;
            function.insert("type".into(), "function".into());
            // The API requires parameters: none is an object without properties.
            function
                .entry("parameters")
                .or_insert_with(|| Value::Object(Map::new()));
            // The API's default is strict, which refuses schemas that do not list every
            // property as required: callers' schemas are sent as they wrote them.
            function.insert("strict".into(), false.into());
            tools.push(Value::Object(function));
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    let p = &input.parameters;
    if !p.stop_sequences.is_empty() {
        return Err(unsupported(
            "input.parameters.stop_sequences",
            "the openai Responses API takes no stop sequences",
        ));
    }
    if let Some(max) = p.max_output_tokens {
        body.insert("max_output_tokens".into(), max.into());
    }
    if let Some(t) = p.temperature {
        body.insert("temperature".into(), number(t));
    }
    if let Some(t) = p.top_p {
        body.insert("top_p".into(), number(t));
    }
    if let Some(budget) = p.reasoning_budget_tokens {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort(budget), "summary": "auto"}),
        );
    }
    if let Some(format) = &p.response_format {
        let field = "input.parameters.response_format";
        let format = match format.kind {
            ResponseFormatKind::Text => None,
            ResponseFormatKind::JsonObject => Some(json!({"type": "json_object"})),
            ResponseFormatKind::JsonSchema => {
                let schema = json_object(&format!("{field}.json_schema"), &format.json_schema)?;
                let name = if format.schema_name.is_empty() {
                    "response"
                } else {
                    &format.schema_name
                };
                Some(json!({"type": "json_schema", "name": name, "schema": schema}))
            }
        };
        if let Some(format) = format {
            body.insert("text".into(), json!({"format": format}));
        }
    }
    // Stateless: nothing is kept at OpenAI, and reasoning comes back encrypted to be sent
    // again on the next turn.
    body.insert("store".into(), false.into());
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    body.insert("stream".into(), true.into());
    encode(&body, input)
}

/// The items of one message: a message item with its text and images; an assistant's
/// reasoning (before it) and tool calls (after it) as items of their own; a tool result as a
/// function call's output.
fn message(at: &str, m: &Message, items: &mut Vec<Value>) -> Result<(), ProviderError> {
    if m.role == Role::Tool {
        let Some(call_id) = &m.tool_call_id else {
            return Err(invalid(
                format!("{at}.tool_call_id"),
                "is required on a tool message",
            ));
        };
        items.push(json!({
            "type": "function_call_output",
            "call_id": call_id,
            "output": text_of(at, m)?,
        }));
        return Ok(());
    }
    if m.role == Role::Assistant {
        for part in &m.content {
            if let ContentPart::Reasoning(reasoning) = part
                && let Some(item) = reasoning_item(reasoning)
            {
                items.push(item);
            }
        }
    }
    let content = content(at, m)?;
    if !content.is_null() {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant | Role::Tool => "assistant",
        };
        items.push(json!({"role": role, "content": content}));
    }
    for call in &m.tool_calls {
        let arguments = if call.arguments_json.is_empty() {
            "{}"
        } else {
            &call.arguments_json
        };
        items.push(json!({
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": arguments,
        }));
    }
    Ok(())
}

/// A reasoning item of this adapter's making, sent back as it came: its signature is
/// `ID:ENCRYPTED_CONTENT`. Reasoning another protocol made (Anthropic's signed thinking) means
/// nothing to this one and is left out, as the chat completions adapter leaves out all.
fn reasoning_item(reasoning: &Reasoning) -> Option<Value> {
    let (id, encrypted) = reasoning.signature.split_once(':')?;
    if !id.starts_with("rs_") || encrypted.is_empty() {
        return None;
    }
    let summary: Vec<Value> = if reasoning.text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "summary_text", "text": reasoning.text})]
    };
    Some(json!({
        "type": "reasoning",
        "id": id,
        "encrypted_content": encrypted,
        "summary": summary,
    }))
}

/// A message's text and images: one text part as a string, else a list of typed parts;
/// `null` when it has neither (an assistant message with only tool calls).
fn content(at: &str, m: &Message) -> Result<Value, ProviderError> {
    let shown = |part: &&ContentPart| !matches!(part, ContentPart::Reasoning(_));
    let mut kept = m.content.iter().filter(shown);
    match (kept.next(), kept.next()) {
        (None, _) => return Ok(Value::Null),
        (Some(ContentPart::Text(text)), None) => return Ok(text.clone().into()),
        _ => {}
    }
    let text_type = if m.role == Role::Assistant {
        "output_text"
    } else {
        "input_text"
    };
    let mut parts = Vec::with_capacity(m.content.len());
    for (j, part) in m.content.iter().enumerate() {
        let field = format!("{at}.content[{j}]");
        parts.push(match part {
            ContentPart::Reasoning(_) => continue,
            ContentPart::Text(text) => json!({"type": text_type, "text": text}),
            ContentPart::Image(_) if m.role != Role::User => {
                return Err(unsupported(
                    field,
                    "the openai Responses API takes images only in user messages",
                ));
            }
            ContentPart::Image(image) => {
                let url = image_url(&format!("{field}.image"), image)?;
                json!({"type": "input_image", "image_url": url})
            }
        });
    }
    Ok(Value::Array(parts))
}

/// A tool message's text: its text parts, joined.
fn text_of(at: &str, m: &Message) -> Result<String, ProviderError> {
    let mut text = String::new();
    for (j, part) in m.content.iter().enumerate() {
        match part {
            ContentPart::Text(t) => text.push_str(t),
            ContentPart::Reasoning(_) => {}
            ContentPart::Image(_) => {
                return Err(unsupported(
                    format!("{at}.content[{j}]"),
                    "the openai Responses API takes a tool's output as text",
                ));
            }
        }
    }
    Ok(text)
}
