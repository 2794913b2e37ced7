//! [`ExecutionInput`] -> a Gemini API `streamGenerateContent` request body.
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::execution::{
    ContentPart, ExecutionInput, GenerationParameters, Message, ResponseFormatKind, Role,
};
use crate::provider::ProviderError;
use crate::provider::wire::{
    encode, function, image_data, invalid, json_object, number, unsupported,
};

/// The body of a streaming request (the model is in the URL).
pub(in crate::provider) fn body(input: &ExecutionInput) -> Result<Vec<u8>, ProviderError> {
    let mut body = Map::new();
    let mut system = Vec::new();
    let mut contents = Vec::with_capacity(input.messages.len());
    // A tool result names its call by id; Gemini names it by the function's name.
    let mut names: HashMap<&str, &str> = HashMap::new();
    for (i, m) in input.messages.iter().enumerate() {
        let at = format!("input.messages[{i}]");
        match m.role {
            Role::System => {
                for part in &m.content {
                    if let ContentPart::Text(text) = part {
                        system.push(json!({"text": text}));
                    }
                }
            }
            Role::Tool => contents.push(tool_result(&at, m, &names)?),
            Role::User | Role::Assistant => {
                for call in &m.tool_calls {
                    names.insert(&call.id, &call.name);
                }
                contents.push(message(&at, m)?);
            }
        }
    }
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({"parts": system}));
    }
    body.insert("contents".into(), Value::Array(contents));
    if !input.tools.is_empty() {
        body.insert("tools".into(), tools(input)?);
    }
    let config = generation_config(&input.parameters)?;
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    encode(&body, input)
}

/// The tools, as one set of function declarations.
fn tools(input: &ExecutionInput) -> Result<Value, ProviderError> {
    let mut declarations = Vec::with_capacity(input.tools.len());
    for (i, tool) in input.tools.iter().enumerate() {
        declarations.push(Value::Object(function(i, tool, "parametersJsonSchema")?));
    }
    Ok(json!([{"functionDeclarations": declarations}]))
}

/// `generationConfig`: limits, sampling, the response format and thinking.
fn generation_config(p: &GenerationParameters) -> Result<Map<String, Value>, ProviderError> {
    let mut config = Map::new();
    if let Some(max) = p.max_output_tokens {
        config.insert("maxOutputTokens".into(), max.into());
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
    if let Some(format) = &p.response_format {
        match format.kind {
            ResponseFormatKind::Text => {}
            ResponseFormatKind::JsonObject => {
                config.insert("responseMimeType".into(), "application/json".into());
            }
            ResponseFormatKind::JsonSchema => {
                let field = "input.parameters.response_format.json_schema";
                config.insert("responseMimeType".into(), "application/json".into());
                config.insert(
                    "responseJsonSchema".into(),
                    json_object(field, &format.json_schema)?,
                );
            }
        }
    }
    if let Some(budget) = p.reasoning_budget_tokens {
        config.insert(
            "thinkingConfig".into(),
            json!({"thinkingBudget": budget, "includeThoughts": true}),
        );
    }
    Ok(config)
}

/// A user or model turn: its text, images and (a model's) function calls. A model turn's
/// thought signature, which this adapter kept as its reasoning's signature, goes back on the
/// turn's first part, where Gemini put it.
fn message(at: &str, m: &Message) -> Result<Value, ProviderError> {
    let role = if m.role == Role::Assistant {
        "model"
    } else {
        "user"
    };
    let mut parts = Vec::with_capacity(m.content.len() + m.tool_calls.len());
    let mut signature = None;
    for (j, part) in m.content.iter().enumerate() {
        let field = format!("{at}.content[{j}]");
        match part {
            ContentPart::Text(text) => parts.push(json!({"text": text})),
            ContentPart::Reasoning(r) => {
                if !r.signature.is_empty() && signature.is_none() {
                    signature = Some(r.signature.clone());
                }
            }
            ContentPart::Image(_) if m.role != Role::User => {
                return Err(unsupported(
                    field,
                    "the gemini protocol takes images only in user messages",
                ));
            }
            ContentPart::Image(image) if !image.url.is_empty() => {
                if image.media_type.is_empty() {
                    return Err(unsupported(
                        format!("{field}.image.media_type"),
                        "the gemini protocol needs the media type of an image sent by URL",
                    ));
                }
                parts.push(
                    json!({"fileData": {"fileUri": image.url, "mimeType": image.media_type}}),
                );
            }
            ContentPart::Image(image) => {
                let (media_type, data) = image_data(&format!("{field}.image"), image)?;
                parts.push(json!({"inlineData": {"mimeType": media_type, "data": data}}));
            }
        }
    }
    for (k, call) in m.tool_calls.iter().enumerate() {
        let field = format!("{at}.tool_calls[{k}].arguments_json");
        let args = json_object(&field, &call.arguments_json)?;
        parts.push(json!({"functionCall": {"name": call.name, "args": args}}));
    }
    if let (Some(signature), Some(Value::Object(first))) = (signature, parts.first_mut()) {
        first.insert("thoughtSignature".into(), signature.into());
    }
    if parts.is_empty() {
        return Err(invalid(
            at,
            "has nothing to send: no text, image or tool call",
        ));
    }
    Ok(json!({"role": role, "parts": parts}))
}

/// A tool message as a `functionResponse`, named as the call it answers; its text is the
/// response object when it is a JSON object, else `{"result": TEXT}`.
fn tool_result(at: &str, m: &Message, names: &HashMap<&str, &str>) -> Result<Value, ProviderError> {
    let Some(id) = &m.tool_call_id else {
        return Err(invalid(
            format!("{at}.tool_call_id"),
            "is required on a tool message",
        ));
    };
    let Some(name) = names.get(id.as_str()) else {
        return Err(invalid(
            format!("{at}.tool_call_id"),
            "names no tool call of an earlier assistant message",
        ));
    };
    let text: String = m
        .content
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({"result": text}),
    };
    Ok(
        json!({"role": "user", "parts": [{"functionResponse": {"name": name, "response": response}}]}),
    )
}
