//! [`ExecutionInput`] -> an Anthropic messages request body, streaming.
//!
//! The protocol differs from chat completions in ways that matter here: system instructions
//! are a top-level field, tool results are `tool_result` blocks of a user turn, tool-call
//! arguments are JSON objects, `max_tokens` is required, `temperature` stops at 1, and there
//! is no JSON response format. What it cannot express is refused, naming the field.
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use serde_json::{Map, Value, json};

use crate::execution::{ContentPart, ExecutionInput, Message, ResponseFormatKind, Role};
use crate::provider::ProviderError;
use crate::provider::wire::{arguments_object, encode, function, image_data, number, unsupported};

/// The body of a streaming request for `model`; `default_max_tokens` when the input sets no
/// limit.
pub(in crate::provider) fn body(
    model: &str,
    input: &ExecutionInput,
    default_max_tokens: u32,
) -> Result<Vec<u8>, ProviderError> {
    let mut body = fields(input, default_max_tokens)?;
    body.insert("model".into(), model.into());
    encode(&body, input)
}

/// The body's fields but `model`: Vertex AI names the model in the path, and adds a field of
/// its own.
pub(in crate::provider) fn fields(
    input: &ExecutionInput,
    default_max_tokens: u32,
) -> Result<Map<String, Value>, ProviderError> {
    let mut body = Map::new();
    let (system, turns) = conversation(input)?;
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(turns));
    if !input.tools.is_empty() {
        let mut tools = Vec::with_capacity(input.tools.len());
        for (i, tool) in input.tools.iter().enumerate() {
            let mut out = function(i, tool, "input_schema")?;
            // The protocol requires an object schema; none means "no arguments".
            let schema = out
                .entry("input_schema")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = schema {
                map.entry("type").or_insert_with(|| "object".into());
            }
            tools.push(Value::Object(out));
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    let p = &input.parameters;
    // Thinking comes out of `max_tokens`: with no limit set, the default is room for the
    // answer beyond the reasoning budget.
    let default_max_tokens =
        default_max_tokens.saturating_add(p.reasoning_budget_tokens.unwrap_or(0));
    body.insert(
        "max_tokens".into(),
        p.max_output_tokens.unwrap_or(default_max_tokens).into(),
    );
    if let Some(t) = p.temperature {
        if t > 1.0 {
            return Err(unsupported(
                "input.parameters.temperature",
                "the anthropic messages protocol accepts 0 to 1",
            ));
        }
        body.insert("temperature".into(), number(t));
    }
    if let Some(t) = p.top_p {
        body.insert("top_p".into(), number(t));
    }
    if !p.stop_sequences.is_empty() {
        body.insert("stop_sequences".into(), p.stop_sequences.clone().into());
    }
    if let Some(format) = &p.response_format
        && format.kind != ResponseFormatKind::Text
    {
        return Err(unsupported(
            "input.parameters.response_format",
            "the anthropic messages protocol has no JSON response format; describe the \
             shape in the prompt or use a tool",
        ));
    }
    if let Some(budget) = p.reasoning_budget_tokens {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    body.insert("stream".into(), true.into());
    Ok(body)
}

/// The leading system messages as text blocks, then the turns. Consecutive messages that map
/// to the same role (e.g. several tool results) share one turn, as the protocol wants.
fn conversation(input: &ExecutionInput) -> Result<(Vec<Value>, Vec<Value>), ProviderError> {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, m) in input.messages.iter().enumerate() {
        let at = format!("input.messages[{i}]");
        if m.role == Role::System {
            if !turns.is_empty() {
                return Err(unsupported(
                    format!("{at}.role"),
                    "the anthropic messages protocol takes system instructions only before \
                     the conversation",
                ));
            }
            for (j, part) in m.content.iter().enumerate() {
                match part {
                    ContentPart::Text(text) => system.push(json!({"type": "text", "text": text})),
                    ContentPart::Image(_) | ContentPart::Reasoning(_) => {
                        return Err(unsupported(
                            format!("{at}.content[{j}]"),
                            "the anthropic messages protocol takes only text in system instructions",
                        ));
                    }
                }
            }
            continue;
        }
        let (role, blocks) = turn(&at, m)?;
        match turns.last_mut() {
            Some((last, existing)) if *last == role => merge(existing, blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    Ok((system, turns))
}

/// Adds `blocks` to a turn of the same role. The protocol rejects a user turn with any block
/// before its `tool_result` blocks, so a result joins the turn after the results already
/// there and ahead of text or images (a user message followed by tool messages); the order
/// within each kind is kept.
fn merge(turn: &mut Vec<Value>, blocks: Vec<Value>) {
    let is_result = |block: &Value| block["type"] == "tool_result";
    for block in blocks {
        if is_result(&block) {
            let at = turn
                .iter()
                .position(|b| !is_result(b))
                .unwrap_or(turn.len());
            turn.insert(at, block);
        } else {
            turn.push(block);
        }
    }
}

/// One non-system message as a role and its content blocks.
fn turn(at: &str, m: &Message) -> Result<(&'static str, Vec<Value>), ProviderError> {
    let mut blocks = parts(at, m)?;
    match m.role {
        Role::User | Role::System => Ok(("user", blocks)),
        Role::Assistant => {
            for (k, call) in m.tool_calls.iter().enumerate() {
                let field = format!("{at}.tool_calls[{k}].arguments_json");
                let input = arguments_object(&field, &call.arguments_json)?;
                blocks.push(json!({
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": input,
                }));
            }
            Ok(("assistant", blocks))
        }
        Role::Tool => {
            let id = m.tool_call_id.clone().unwrap_or_default();
            let result = json!({"type": "tool_result", "tool_use_id": id, "content": blocks});
            Ok(("user", vec![result]))
        }
    }
}

/// A message's content blocks; in an assistant message its thinking blocks go first, as the
/// protocol wants them.
fn parts(at: &str, m: &Message) -> Result<Vec<Value>, ProviderError> {
    let mut blocks = Vec::with_capacity(m.content.len());
    let mut thinking = Vec::new();
    for (j, part) in m.content.iter().enumerate() {
        let field = format!("{at}.content[{j}]");
        let block = match part {
            ContentPart::Text(text) => json!({"type": "text", "text": text}),
            ContentPart::Image(_) if m.role == Role::Assistant => {
                return Err(unsupported(
                    field,
                    "the anthropic messages protocol takes no images in assistant messages",
                ));
            }
            ContentPart::Image(image) if !image.url.is_empty() => {
                json!({"type": "image", "source": {"type": "url", "url": image.url}})
            }
            ContentPart::Image(image) => {
                let (media_type, data) = image_data(&format!("{field}.image"), image)?;
                json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": media_type, "data": data},
                })
            }
            // Thinking blocks go back as they came, signature and all, so the model can
            // check and continue its reasoning (required for tool use with thinking).
            ContentPart::Reasoning(r) if !r.redacted.is_empty() => {
                thinking.push(json!({"type": "redacted_thinking", "data": r.redacted}));
                continue;
            }
            ContentPart::Reasoning(r) if !r.signature.is_empty() => {
                thinking.push(
                    json!({"type": "thinking", "thinking": r.text, "signature": r.signature}),
                );
                continue;
            }
            // Unsigned reasoning (another provider's) is nothing this protocol can check:
            // left out, as chat completions leaves out all of it.
            ContentPart::Reasoning(_) => continue,
        };
        blocks.push(block);
    }
    if thinking.is_empty() {
        return Ok(blocks);
    }
    thinking.append(&mut blocks);
    Ok(thinking)
}
