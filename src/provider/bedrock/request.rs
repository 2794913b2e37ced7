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
//! The body borrows the input and is written as it is read: no JSON tree is built for it (a
//! tree of maps and owned strings cost more than the writing, on every call).
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::execution::{
    ContentPart, ExecutionInput, GenerationParameters, Message, ResponseFormatKind, Role,
    ToolDefinition,
};
use crate::provider::ProviderError;
use crate::provider::anthropic::request::Thinking;
use crate::provider::wire::{arguments_object, encode, function, image_data, number, unsupported};

/// The image formats Converse takes, by media type.
const IMAGE_FORMATS: &[(&str, &str)] = &[
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
];

/// A Converse request, in the order its fields are written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig>,
    /// Left out when the input sets none of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    inference_config: Option<InferenceConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    additional_model_request_fields: Option<Additional>,
}

/// One turn: consecutive messages of one role share one.
#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// A content block: an object whose one key says what it is (serde's external tagging).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Block<'a> {
    Text(&'a str),
    Image(Image),
    ToolUse(ToolUse<'a>),
    ToolResult(ToolResult<'a>),
    ReasoningContent(ReasoningContent<'a>),
}

/// Inline image bytes (base64, so made here) and their format.
#[derive(Serialize)]
struct Image {
    format: &'static str,
    source: Bytes,
}

#[derive(Serialize)]
struct Bytes {
    bytes: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse<'a> {
    tool_use_id: &'a str,
    name: &'a str,
    /// The arguments as an object: parsed from the caller's text, so owned.
    input: Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult<'a> {
    tool_use_id: &'a str,
    content: Vec<Block<'a>>,
}

/// Reasoning sent back: signed text, or the redacted blob as it came.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum ReasoningContent<'a> {
    ReasoningText { text: &'a str, signature: &'a str },
    RedactedContent(&'a str),
}

#[derive(Serialize)]
struct ToolConfig {
    tools: Vec<Tool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tool {
    /// A function declaration: made from the caller's schema text, so owned.
    tool_spec: Map<String, Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InferenceConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
}

/// Fields Bedrock passes to the model as they are: Anthropic's, in Anthropic's spelling.
#[derive(Serialize)]
struct Additional {
    thinking: Thinking,
}

/// The body of a streaming Converse request.
pub(super) fn body(input: &ExecutionInput) -> Result<Vec<u8>, ProviderError> {
    let mut system = Vec::new();
    let mut messages: Vec<Turn<'_>> = Vec::new();
    for (i, m) in input.messages.iter().enumerate() {
        if m.role == Role::System {
            for (j, part) in m.content.iter().enumerate() {
                let ContentPart::Text(text) = part else {
                    return Err(unsupported(
                        format_args!("input.messages[{i}].content[{j}]"),
                        "the bedrock converse API takes only text in system instructions",
                    ));
                };
                system.push(Block::Text(text));
            }
            continue;
        }
        let next = turn(i, m)?;
        match messages.last_mut() {
            Some(last) if last.role == next.role => last.content.extend(next.content),
            _ => messages.push(next),
        }
    }
    let tools = (input.tools.iter().enumerate())
        .map(|(i, tool)| declaration(i, tool))
        .collect::<Result<Vec<_>, _>>()?;
    let p = &input.parameters;
    if let Some(format) = &p.response_format
        && format.kind != ResponseFormatKind::Text
    {
        return Err(unsupported(
            "input.parameters.response_format",
            "the bedrock converse API has no JSON response format; describe the shape in \
             the prompt or use a tool",
        ));
    }
    let thinking = p
        .reasoning_budget_tokens
        .map(|budget_tokens| Thinking::Enabled { budget_tokens });
    let body = Body {
        system,
        messages,
        tool_config: (!tools.is_empty()).then_some(ToolConfig { tools }),
        inference_config: inference_config(p),
        additional_model_request_fields: thinking.map(|thinking| Additional { thinking }),
    };
    encode(&body, input)
}

/// `tools[i]` as a tool spec. Converse requires a schema; none means "no arguments".
fn declaration(i: usize, tool: &ToolDefinition) -> Result<Tool, ProviderError> {
    let mut spec = function(i, tool, "json")?;
    let schema = spec
        .remove("json")
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    spec.insert("inputSchema".into(), json!({"json": schema}));
    Ok(Tool { tool_spec: spec })
}

/// `inferenceConfig`, if the input sets any of it.
fn inference_config(p: &GenerationParameters) -> Option<InferenceConfig<'_>> {
    let set = p.max_output_tokens.is_some()
        || p.temperature.is_some()
        || p.top_p.is_some()
        || !p.stop_sequences.is_empty();
    set.then(|| InferenceConfig {
        max_tokens: p.max_output_tokens,
        temperature: p.temperature.map(number),
        top_p: p.top_p.map(number),
        stop_sequences: &p.stop_sequences,
    })
}

/// The Converse name of the image format `media_type`, if it takes it.
fn image_format(media_type: &str) -> Option<&'static str> {
    IMAGE_FORMATS
        .iter()
        .find(|(m, _)| *m == media_type)
        .map(|&(_, format)| format)
}

/// `input.messages[i]`, not a system message, as a role and its content blocks.
fn turn(i: usize, m: &Message) -> Result<Turn<'_>, ProviderError> {
    let mut content = parts(i, m)?;
    match m.role {
        Role::User | Role::System => Ok(Turn {
            role: "user",
            content,
        }),
        Role::Assistant => {
            for (k, call) in m.tool_calls.iter().enumerate() {
                let field = format!("input.messages[{i}].tool_calls[{k}].arguments_json");
                let input = arguments_object(&field, &call.arguments_json)?;
                content.push(Block::ToolUse(ToolUse {
                    tool_use_id: &call.id,
                    name: &call.name,
                    input,
                }));
            }
            Ok(Turn {
                role: "assistant",
                content,
            })
        }
        Role::Tool => {
            let result = Block::ToolResult(ToolResult {
                tool_use_id: m.tool_call_id.as_deref().unwrap_or_default(),
                content,
            });
            Ok(Turn {
                role: "user",
                content: vec![result],
            })
        }
    }
}

/// The content blocks of `input.messages[i]`.
fn parts(i: usize, m: &Message) -> Result<Vec<Block<'_>>, ProviderError> {
    let mut blocks = Vec::with_capacity(m.content.len());
    for (j, part) in m.content.iter().enumerate() {
        let block = match part {
            ContentPart::Text(text) => Block::Text(text),
            ContentPart::Image(image) if !image.url.is_empty() => {
                return Err(unsupported(
                    format_args!("input.messages[{i}].content[{j}].image.url"),
                    "the bedrock converse API takes images as bytes, not URLs",
                ));
            }
            ContentPart::Image(image) => {
                let field = format!("input.messages[{i}].content[{j}].image");
                let (media_type, bytes) = image_data(&field, image)?;
                let Some(format) = image_format(media_type) else {
                    return Err(unsupported(
                        format_args!("{field}.media_type"),
                        "the bedrock converse API takes png, jpeg, gif or webp images",
                    ));
                };
                Block::Image(Image {
                    format,
                    source: Bytes { bytes },
                })
            }
            ContentPart::Reasoning(r) if !r.redacted.is_empty() => {
                Block::ReasoningContent(ReasoningContent::RedactedContent(&r.redacted))
            }
            ContentPart::Reasoning(r) if !r.signature.is_empty() => {
                Block::ReasoningContent(ReasoningContent::ReasoningText {
                    text: &r.text,
                    signature: &r.signature,
                })
            }
            // Unsigned reasoning (another provider's) is nothing the model can check.
            ContentPart::Reasoning(_) => continue,
        };
        blocks.push(block);
    }
    Ok(blocks)
}
