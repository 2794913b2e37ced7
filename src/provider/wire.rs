//! Small pieces both request mappers use to turn an [`ExecutionInput`] into provider JSON.
//! Input no protocol could express is `invalid` (the execution stops); input one protocol
//! cannot express is `rejected` by that target (another may take it). Both are
//! `invalid_request` attempts that name the request field: never a silent drop.
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use std::fmt::Display;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::ProviderError;
use crate::execution::{
    AttemptCode, ContentPart, ExecutionInput, Image, ResponseFormat, ToolDefinition,
};

/// The request field `field` cannot be sent to any target, because `reason`.
pub(crate) fn invalid(field: impl Display, reason: impl Display) -> ProviderError {
    ProviderError::invalid(AttemptCode::InvalidRequest, format!("{field}: {reason}"))
}

/// The request field `field` cannot be sent in this target's protocol, because `reason`.
pub(crate) fn unsupported(field: impl Display, reason: impl Display) -> ProviderError {
    ProviderError::rejected(AttemptCode::InvalidRequest, format!("{field}: {reason}"))
}

/// A JSON object given as text (a tool schema, tool-call arguments); empty text is `{}`.
pub(crate) fn json_object(field: &str, text: &str) -> Result<Value, ProviderError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(invalid(field, "is not a JSON object")),
        Err(e) => Err(invalid(field, format_args!("is not JSON: {e}"))),
    }
}

/// A JSON-schema response format's name and schema: the caller's name, or `response` where
/// the caller left it empty (the OpenAI protocols require one).
pub(crate) fn named_schema(format: &ResponseFormat) -> Result<(&str, Value), ProviderError> {
    let field = "input.parameters.response_format.json_schema";
    let schema = json_object(field, &format.json_schema)?;
    let name = if format.schema_name.is_empty() {
        "response"
    } else {
        &format.schema_name
    };
    Ok((name, schema))
}

/// A sampling parameter as the shortest decimal that reads back as the same `f32` (`0.7`,
/// not `0.699999988079071`).
pub(crate) fn number(x: f32) -> Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

/// Inline image bytes, base64-encoded; the media type is required with them.
pub(crate) fn image_data<'a>(
    field: &str,
    image: &'a Image,
) -> Result<(&'a str, String), ProviderError> {
    if image.media_type.is_empty() {
        return Err(invalid(
            format_args!("{field}.media_type"),
            "is required with inline image data",
        ));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
    Ok((&image.media_type, data))
}

/// An image as a URL: its own, or its inline bytes as a `data:` URL (the media type is
/// required with them).
pub(crate) fn image_url(field: &str, image: &Image) -> Result<String, ProviderError> {
    if !image.url.is_empty() {
        return Ok(image.url.clone());
    }
    let (media_type, data) = image_data(field, image)?;
    Ok(format!("data:{media_type};base64,{data}"))
}

/// The `tools[index]` the caller defined as a function declaration: its `name`, its
/// `description` if any, and its parameters' schema under `schema` (left out when the caller
/// gave none). Each protocol wraps it in its own way.
pub(crate) fn function(
    index: usize,
    tool: &ToolDefinition,
    schema: &str,
) -> Result<Map<String, Value>, ProviderError> {
    let mut function = Map::new();
    function.insert("name".into(), tool.name.clone().into());
    if !tool.description.is_empty() {
        function.insert("description".into(), tool.description.clone().into());
    }
    if !tool.parameters_json_schema.is_empty() {
        let field = format!("input.tools[{index}].parameters_json_schema");
        function.insert(
            schema.into(),
            json_object(&field, &tool.parameters_json_schema)?,
        );
    }
    Ok(function)
}

/// A tool call's arguments (`field`) as the JSON object Anthropic's and Bedrock's protocols
/// need. Chat completions carries them as text, so arguments that are not an object are
/// refused as this target's problem (rejected): another target may still take the request.
pub(crate) fn arguments_object(field: &str, text: &str) -> Result<Value, ProviderError> {
    json_object(field, text).map_err(|e| ProviderError::rejected(e.code, e.message))
}

/// The request body's bytes, for `input`, written into the room its [`room`] makes.
pub(crate) fn encode(
    body: &impl serde::Serialize,
    input: &ExecutionInput,
) -> Result<Vec<u8>, ProviderError> {
    let mut bytes = Vec::with_capacity(room(input));
    serde_json::to_writer(&mut bytes, body).map_err(|e| {
        ProviderError::invalid(
            AttemptCode::InvalidRequest,
            format!("the request could not be encoded: {e}"),
        )
    })?;
    Ok(bytes)
}

/// Room for `input`'s body: its content and the JSON around it (a conversation's body is its
/// content and a little more, its images a third more in base64), so a long one is not
/// copied again at each doubling of a buffer that began at 128 bytes.
fn room(input: &ExecutionInput) -> usize {
    let images: usize = (input.messages.iter().flat_map(|m| &m.content))
        .map(|part| match part {
            ContentPart::Image(image) => image.data.len() / 3 + 4,
            _ => 0,
        })
        .sum();
    input.content_bytes() + images + 64 * input.messages.len() + 256
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn a_conversation_is_encoded_in_the_room_made_for_it() {
        // Forty turns of half a kilobyte each and a 30 KB image, as a chat body carries them
        // (the image base64 in a data URL): no regrowth.
        let mut input = ExecutionInput {
            messages: (0..40)
                .map(|i| crate::execution::Message::user(format!("turn {i} ").repeat(64)))
                .collect(),
            ..ExecutionInput::default()
        };
        let image = Image {
            data: vec![7; 30_000],
            media_type: "image/png".into(),
            ..Image::default()
        };
        let url = image_url("image", &image).unwrap();
        input.messages[39].content.push(ContentPart::Image(image));
        let mut messages: Vec<Value> = input
            .messages
            .iter()
            .map(|m| serde_json::json!({"role": "user", "content": m.text()}))
            .collect();
        messages.push(serde_json::json!({
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": url}}],
        }));
        let mut body = Map::new();
        body.insert("model".into(), "m".into());
        body.insert("messages".into(), Value::Array(messages));
        let bytes = encode(&body, &input).unwrap();
        assert!(
            bytes.len() <= room(&input),
            "{} in {}",
            bytes.len(),
            room(&input)
        );
        assert_eq!(bytes.capacity(), room(&input), "grown");
    }

    #[test]
    fn numbers_are_the_shortest_decimal() {
        assert_eq!(number(0.7).to_string(), "0.7");
        assert_eq!(number(1.0).to_string(), "1.0");
    }

    #[test]
    fn json_objects_name_the_field_when_wrong() {
        assert_eq!(json_object("f", "").unwrap(), serde_json::json!({}));
        assert_eq!(
            json_object("f", r#"{"a":1}"#).unwrap(),
            serde_json::json!({"a": 1})
        );
        let error = json_object("input.tools[0].parameters_json_schema", "[1]").unwrap_err();
        assert_eq!(error.code.as_str(), "invalid_request");
        assert!(
            error
                .message
                .starts_with("input.tools[0].parameters_json_schema: ")
        );
        assert!(
            json_object("f", "{")
                .unwrap_err()
                .message
                .contains("is not JSON")
        );
    }
}
