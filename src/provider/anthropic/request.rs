//! [`ExecutionInput`] -> an Anthropic messages request body, streaming.
//!
//! The protocol differs from chat completions in ways that matter here: system instructions
//! are a top-level field, tool results are `tool_result` blocks of a user turn, tool-call
//! arguments are JSON objects, `max_tokens` is required, `temperature` stops at 1, and there
//! is no JSON response format. What it cannot express is refused, naming the field.
//!
//! The body borrows the input and is written as it is read: no JSON tree is built for it (a
//! tree of maps and owned strings cost more than the writing, on every call).
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use serde::Serialize;
use serde_json::{Map, Value};

use crate::execution::{
    ContentPart, ExecutionInput, Message, ResponseFormatKind, Role, ToolDefinition,
};
use crate::provider::ProviderError;
use crate::provider::wire::{arguments_object, encode, function, image_data, number, unsupported};

/// A messages request, in the order its fields are written.
#[derive(Serialize)]
pub(in crate::provider) struct Body<'a> {
    /// Left out where the path names the model (Vertex AI).
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    /// Vertex AI takes the protocol's version in the body; Anthropic's own API, in a header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(in crate::provider) anthropic_version: Option<&'static str>,
    /// The leading system messages' text.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    messages: Vec<Turn<'a>>,
    /// Function declarations: made from the caller's schema text, so owned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Map<String, Value>>,
    /// Required by the protocol.
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    stream: bool,
}

/// One turn: consecutive messages that map to the same role share one.
#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// A content block, by its `type`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: Source<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        /// The arguments as an object: parsed from the caller's text, so owned.
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Vec<Block<'a>>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

/// Where an image's bytes are: a URL the provider fetches, or inline (base64, so made here).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Source<'a> {
    Url { url: &'a str },
    Base64 { media_type: &'a str, data: String },
}

/// Extended thinking, with the tokens it may spend (Bedrock passes the same to Claude).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(in crate::provider) enum Thinking {
    Enabled { budget_tokens: u32 },
}

/// The body of a streaming request for `model`; `default_max_tokens` when the input sets no
/// limit.
pub(in crate::provider) fn body(
    model: &str,
    input: &ExecutionInput,
    default_max_tokens: u32,
) -> Result<Vec<u8>, ProviderError> {
    let mut body = fields(input, default_max_tokens)?;
    body.model = Some(model);
    encode(&body, input)
}

/// The body without `model`: Vertex AI names the model in the path, and sets a field of its
/// own (`anthropic_version`) before writing it.
pub(in crate::provider) fn fields(
    input: &ExecutionInput,
    default_max_tokens: u32,
) -> Result<Body<'_>, ProviderError> {
    let (system, messages) = conversation(input)?;
    let tools = (input.tools.iter().enumerate())
        .map(|(i, tool)| declaration(i, tool))
        .collect::<Result<Vec<_>, _>>()?;
    let p = &input.parameters;
    if p.temperature.is_some_and(|t| t > 1.0) {
        return Err(unsupported(
            "input.parameters.temperature",
            "the anthropic messages protocol accepts 0 to 1",
        ));
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
    // Thinking comes out of `max_tokens`: with no limit set, the default is room for the
    // answer beyond the reasoning budget.
    let default_max_tokens =
        default_max_tokens.saturating_add(p.reasoning_budget_tokens.unwrap_or(0));
    let thinking = p
        .reasoning_budget_tokens
        .map(|budget_tokens| Thinking::Enabled { budget_tokens });
    Ok(Body {
        model: None,
        anthropic_version: None,
        system,
        messages,
        tools,
        max_tokens: p.max_output_tokens.unwrap_or(default_max_tokens),
        temperature: p.temperature.map(number),
        top_p: p.top_p.map(number),
        stop_sequences: &p.stop_sequences,
        thinking,
        stream: true,
    })
}

/// `tools[i]` as a function declaration. The protocol requires an object schema; none means
/// "no arguments".
fn declaration(i: usize, tool: &ToolDefinition) -> Result<Map<String, Value>, ProviderError> {
    let mut out = function(i, tool, "input_schema")?;
    let schema = out
        .entry("input_schema")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(map) = schema {
        map.entry("type").or_insert_with(|| "object".into());
    }
    Ok(out)
}

/// The leading system messages as text blocks, then the turns. Consecutive messages that map
/// to the same role (e.g. several tool results) share one turn, as the protocol wants.
fn conversation(input: &ExecutionInput) -> Result<(Vec<Block<'_>>, Vec<Turn<'_>>), ProviderError> {
    let mut system = Vec::new();
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for (i, m) in input.messages.iter().enumerate() {
        if m.role == Role::System {
            if !turns.is_empty() {
                return Err(unsupported(
                    format_args!("input.messages[{i}].role"),
                    "the anthropic messages protocol takes system instructions only before \
                     the conversation",
                ));
            }
            for (j, part) in m.content.iter().enumerate() {
                let ContentPart::Text(text) = part else {
                    return Err(unsupported(
                        format_args!("input.messages[{i}].content[{j}]"),
                        "the anthropic messages protocol takes only text in system instructions",
                    ));
                };
                system.push(Block::Text { text });
            }
            continue;
        }
        let next = turn(i, m)?;
        match turns.last_mut() {
            Some(last) if last.role == next.role => merge(&mut last.content, next.content),
            _ => turns.push(next),
        }
    }
    Ok((system, turns))
}

/// Adds `blocks` to a turn of the same role. The protocol rejects a user turn with any block
/// before its `tool_result` blocks, so a result joins the turn after the results already
/// there and ahead of text or images (a user message followed by tool messages); the order
/// within each kind is kept.
fn merge<'a>(turn: &mut Vec<Block<'a>>, blocks: Vec<Block<'a>>) {
    let is_result = |block: &Block<'_>| matches!(block, Block::ToolResult { .. });
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
                content.push(Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input,
                });
            }
            Ok(Turn {
                role: "assistant",
                content,
            })
        }
        Role::Tool => {
            let result = Block::ToolResult {
                tool_use_id: m.tool_call_id.as_deref().unwrap_or_default(),
                content,
            };
            Ok(Turn {
                role: "user",
                content: vec![result],
            })
        }
    }
}

/// The content blocks of `input.messages[i]`; in an assistant message its thinking blocks go
/// first, as the protocol wants them.
fn parts(i: usize, m: &Message) -> Result<Vec<Block<'_>>, ProviderError> {
    let mut blocks = Vec::with_capacity(m.content.len());
    let mut thinking = Vec::new();
    for (j, part) in m.content.iter().enumerate() {
        let block = match part {
            ContentPart::Text(text) => Block::Text { text },
            ContentPart::Image(_) if m.role == Role::Assistant => {
                return Err(unsupported(
                    format_args!("input.messages[{i}].content[{j}]"),
                    "the anthropic messages protocol takes no images in assistant messages",
                ));
            }
            ContentPart::Image(image) if !image.url.is_empty() => Block::Image {
                source: Source::Url { url: &image.url },
            },
            ContentPart::Image(image) => {
                let field = format!("input.messages[{i}].content[{j}].image");
                let (media_type, data) = image_data(&field, image)?;
                Block::Image {
                    source: Source::Base64 { media_type, data },
                }
            }
            // Thinking blocks go back as they came, signature and all, so the model can
            // check and continue its reasoning (required for tool use with thinking).
            ContentPart::Reasoning(r) if !r.redacted.is_empty() => {
                thinking.push(Block::RedactedThinking { data: &r.redacted });
                continue;
            }
            ContentPart::Reasoning(r) if !r.signature.is_empty() => {
                thinking.push(Block::Thinking {
                    thinking: &r.text,
                    signature: &r.signature,
                });
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
