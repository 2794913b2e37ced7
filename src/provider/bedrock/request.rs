//! [`ExecutionInput`] -> a Bedrock Converse request body (`converse-stream`: the model is in
//! the path). One shape for every model family:
//!
//! - `system` text blocks; `messages` of `user` and `assistant` turns whose content blocks
//!   are `text`, `image` (inline bytes only: Converse fetches no URLs), `toolUse`,
//!   `toolResult` and `reasoningContent` (signed reasoning, or redacted reasoning, goes back as
//!   it came; unsigned reasoning is left out). Consecutive messages of one role share a turn.
//! - `inferenceConfig`: `maxTokens`, `temperature`, `topP`, `stopSequences`.
//! - `toolConfig.tools[].toolSpec` with the schema under `inputSchema.json`.
//! - `reasoning_budget_tokens` -> `additionalModelRequestFields.thinking` (Anthropic's extended
//!   thinking, the field Bedrock passes to Claude models).
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use serde_json::{Map, Value, json};

use crate::execution::{ContentPart, ExecutionInput, Message, ResponseFormatKind, Role};
use crate::provider::ProviderError;
use crate::provider::wire::{arguments_object, encode, function, image_data, number, unsupported};

/// The image formats Converse takes, by media type.
const IMAGE_FORMATS: &[(&str, &str)] = &[
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
];

/// The body of a streaming Converse request.
pub(super) fn body(input: &ExecutionInput) -> Result<Vec<u8>, ProviderError> {
    let mut body = Map::new();
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, m) in input.messages.iter().enumerate() {
        let at = format!("input.messages[{i}]");
        if m.role == Role::System {
            for (j, part) in m.content.iter().enumerate() {
                let ContentPart::Text(text) = part else {
                    return Err(unsupported(
                        format!("{at}.content[{j}]"),
                        "the bedrock converse API takes only text in system instructions",
                    ));
                };
                system.push(json!({"text": text}));
            }
            continue;
        }
        let (role, blocks) = turn(&at, m)?;
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    let messages = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if !input.tools.is_empty() {
        let mut tools = Vec::with_capacity(input.tools.len());
        for (i, tool) in input.tools.iter().enumerate() {
            let mut spec = function(i, tool, "json")?;
            // Converse requires a schema; none means "no arguments".
            let schema = spec
                .remove("json")
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            spec.insert("inputSchema".into(), json!({"json": schema}));
            tools.push(json!({"toolSpec": spec}));
        }
        body.insert("toolConfig".into(), json!({"tools": tools}));
    }
    parameters(input, &mut body)?;
    encode(&body, input)
}

/// `inferenceConfig`, and the reasoning budget.
fn parameters(input: &ExecutionInput, body: &mut Map<String, Value>) -> Result<(), ProviderError> {
    let p = &input.parameters;
    let mut config = Map::new();
    if let Some(max) = p.max_output_tokens {
        config.insert("maxTokens".into(), max.into());
    }
    if let Some(t) = p.temperature {
        config.insert("temperature".into(), number(t));
    }
    if let Some(t) = p.top_p {
        config.insert("topP".into(), number(t));
    }
    if !p.stop_sequences.is_empty() {
        config.insert("stopSequences".into(), p.stop_sequences.clone().into());
    }
    if !config.is_empty() {
        body.insert("inferenceConfig".into(), Value::Object(config));
    }
    if let Some(format) = &p.response_format
        && format.kind != ResponseFormatKind::Text
    {
        return Err(unsupported(
            "input.parameters.response_format",
            "the bedrock converse API has no JSON response format; describe the shape in \
             the prompt or use a tool",
        ));
    }
    if let Some(budget) = p.reasoning_budget_tokens {
        body.insert(
            "additionalModelRequestFields".into(),
            json!({"thinking": {"type": "enabled", "budget_tokens": budget}}),
        );
    }
    Ok(())
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
                    "toolUse": {"toolUseId": call.id, "name": call.name, "input": input},
                }));
            }
            Ok(("assistant", blocks))
        }
        Role::Tool => {
            let id = m.tool_call_id.clone().unwrap_or_default();
            let result = json!({"toolResult": {"toolUseId": id, "content": blocks}});
            Ok(("user", vec![result]))
        }
    }
}

/// A message's content blocks.
fn parts(at: &str, m: &Message) -> Result<Vec<Value>, ProviderError> {
    let mut blocks = Vec::with_capacity(m.content.len());
    for (j, part) in m.content.iter().enumerate() {
        let field = format!("{at}.content[{j}]");
        let block = match part {
            ContentPart::Text(text) => json!({"text": text}),
            ContentPart::Image(image) if !image.url.is_empty() => {
                return Err(unsupported(
                    format!("{field}.image.url"),
                    "the bedrock converse API takes images as bytes, not URLs",
                ));
            }
            ContentPart::Image(image) => {
                let (media_type, data) = image_data(&format!("{field}.image"), image)?;
                let Some((_, format)) = IMAGE_FORMATS.iter().find(|(m, _)| *m == media_type) else {
                    return Err(unsupported(
                        format!("{field}.image.media_type"),
                        "the bedrock converse API takes png, jpeg, gif or webp images",
                    ));
                };
                json!({"image": {"format": format, "source": {"bytes": data}}})
            }
            ContentPart::Reasoning(r) if !r.redacted.is_empty() => {
                json!({"reasoningContent": {"redactedContent": r.redacted}})
            }
            ContentPart::Reasoning(r) if !r.signature.is_empty() => json!({
                "reasoningContent": {"reasoningText": {"text": r.text, "signature": r.signature}},
            }),
            // Unsigned reasoning (another provider's) is nothing the model can check.
            ContentPart::Reasoning(_) => continue,
        };
        blocks.push(block);
    }
    Ok(blocks)
}
