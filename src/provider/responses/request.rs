//! [`ExecutionInput`] -> an OpenAI Responses API request body, streaming, stateless
//! (`store: false`) with the reasoning's encrypted content asked for, so that it can come
//! back on the next turn.
//!
//! The body borrows the input and is written as it is read, as the chat completions body is:
//! no JSON tree is built for it (a tree of maps and owned strings cost more than the writing,
//! on every call).
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::execution::{
    ContentPart, ExecutionInput, Message, Reasoning, ResponseFormat, ResponseFormatKind, Role,
    ToolDefinition,
};
use crate::provider::ProviderError;
use crate::provider::wire::{
    encode, function, image_url, invalid, named_schema, number, unsupported,
};

/// A Responses API request, in the order its fields are written.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Effort>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Text<'a>>,
    /// Stateless: nothing is kept at OpenAI, and reasoning comes back encrypted (`include`)
    /// to be sent again on the next turn.
    store: bool,
    include: [&'static str; 1],
    stream: bool,
}

/// The reasoning asked for: an effort (the API takes no budget), and its summary.
#[derive(Serialize)]
struct Effort {
    effort: &'static str,
    summary: &'static str,
}

/// The reply's format, when it is not plain text.
#[derive(Serialize)]
struct Text<'a> {
    format: Format<'a>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Format<'a> {
    JsonObject,
    JsonSchema { name: &'a str, schema: Value },
}

/// One input item: a message (which has no `type`), or an item of a type of its own.
#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Message {
        role: &'static str,
        content: Content<'a>,
    },
    Typed(Typed<'a>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Typed<'a> {
    Reasoning {
        id: &'a str,
        encrypted_content: &'a str,
        summary: Vec<Summary<'a>>,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    /// A tool's output: its one text part borrowed, several joined.
    FunctionCallOutput {
        call_id: &'a str,
        output: Cow<'a, str>,
    },
}

/// A reasoning item's summary text.
#[derive(Serialize)]
struct Summary<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

/// A message's text and images: one text part as a string, else a list of typed parts.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

/// A typed part; an assistant's text is output text, anyone else's input text.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    InputText { text: &'a str },
    OutputText { text: &'a str },
    InputImage { image_url: String },
}

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
    let mut items = Vec::with_capacity(input.messages.len());
    for (i, m) in input.messages.iter().enumerate() {
        message(i, m, &mut items)?;
    }
    let tools = (input.tools.iter().enumerate())
        .map(|(i, definition)| tool(i, definition))
        .collect::<Result<Vec<_>, _>>()?;
    let p = &input.parameters;
    if !p.stop_sequences.is_empty() {
        return Err(unsupported(
            "input.parameters.stop_sequences",
            "the openai Responses API takes no stop sequences",
        ));
    }
    let format = (p.response_format.as_ref())
        .map(response_format)
        .transpose()?
        .flatten();
    let body = Body {
        model,
        input: items,
        tools,
        max_output_tokens: p.max_output_tokens,
        temperature: p.temperature.map(number),
        top_p: p.top_p.map(number),
        reasoning: p.reasoning_budget_tokens.map(|budget| Effort {
            effort: effort(budget),
            summary: "auto",
        }),
        text: format.map(|format| Text { format }),
        store: false,
        include: ["reasoning.encrypted_content"],
        stream: true,
    };
    encode(&body, input)
}

/// The caller's `tools[i]` as a function tool (a tool definition is rare enough to be built
/// as the map [`function`] makes).
fn tool(i: usize, definition: &ToolDefinition) -> Result<Map<String, Value>, ProviderError> {
    let mut function = function(i, definition, "parameters")?;
    function.insert("type".into(), "function".into());
    // The API requires parameters: none is an object without properties.
    function
        .entry("parameters")
        .or_insert_with(|| Value::Object(Map::new()));
    // The API's default is strict, which refuses schemas that do not list every property as
    // required: callers' schemas are sent as they wrote them.
    function.insert("strict".into(), false.into());
    Ok(function)
}

/// The reply's format to ask for; plain text is the default and is not sent.
fn response_format(format: &ResponseFormat) -> Result<Option<Format<'_>>, ProviderError> {
    Ok(match format.kind {
        ResponseFormatKind::Text => None,
        ResponseFormatKind::JsonObject => Some(Format::JsonObject),
        ResponseFormatKind::JsonSchema => {
            let (name, schema) = named_schema(format)?;
            Some(Format::JsonSchema { name, schema })
        }
    })
}

/// The items of `messages[i]`: a message item with its text and images; an assistant's
/// reasoning (before it) and tool calls (after it) as items of their own; a tool result as a
/// function call's output.
fn message<'a>(i: usize, m: &'a Message, items: &mut Vec<Item<'a>>) -> Result<(), ProviderError> {
    if m.role == Role::Tool {
        let Some(call_id) = m.tool_call_id.as_deref() else {
            return Err(invalid(
                format_args!("input.messages[{i}].tool_call_id"),
                "is required on a tool message",
            ));
        };
        let output = text_of(i, m)?;
        items.push(Item::Typed(Typed::FunctionCallOutput { call_id, output }));
        return Ok(());
    }
    if m.role == Role::Assistant {
        for part in &m.content {
            if let ContentPart::Reasoning(reasoning) = part
                && let Some(item) = reasoning_item(reasoning)
            {
                items.push(Item::Typed(item));
            }
        }
    }
    if let Some(content) = content(i, m)? {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant | Role::Tool => "assistant",
        };
        items.push(Item::Message { role, content });
    }
    for call in &m.tool_calls {
        let arguments = if call.arguments_json.is_empty() {
            "{}"
        } else {
            &call.arguments_json
        };
        items.push(Item::Typed(Typed::FunctionCall {
            call_id: &call.id,
            name: &call.name,
            arguments,
        }));
    }
    Ok(())
}

/// A reasoning item of this adapter's making, sent back as it came: its signature is
/// `ID:ENCRYPTED_CONTENT`. Reasoning another protocol made (Anthropic's signed thinking) means
/// nothing to this one and is left out, as the chat completions adapter leaves out all.
fn reasoning_item(reasoning: &Reasoning) -> Option<Typed<'_>> {
    let (id, encrypted_content) = reasoning.signature.split_once(':')?;
    if !id.starts_with("rs_") || encrypted_content.is_empty() {
        return None;
    }
    let summary = if reasoning.text.is_empty() {
        Vec::new()
    } else {
        vec![Summary {
            kind: "summary_text",
            text: &reasoning.text,
        }]
    };
    Some(Typed::Reasoning {
        id,
        encrypted_content,
        summary,
    })
}

/// A message's text and images; `None` when it has neither (an assistant message with only
/// tool calls), and no message item is sent.
fn content(i: usize, m: &Message) -> Result<Option<Content<'_>>, ProviderError> {
    let shown = |part: &&ContentPart| !matches!(part, ContentPart::Reasoning(_));
    let mut kept = m.content.iter().filter(shown);
    match (kept.next(), kept.next()) {
        (None, _) => return Ok(None),
        (Some(ContentPart::Text(text)), None) => return Ok(Some(Content::Text(text))),
        _ => {}
    }
    let mut parts = Vec::with_capacity(m.content.len());
    for (j, part) in m.content.iter().enumerate() {
        parts.push(match part {
            ContentPart::Reasoning(_) => continue,
            ContentPart::Text(text) if m.role == Role::Assistant => Part::OutputText { text },
            ContentPart::Text(text) => Part::InputText { text },
            ContentPart::Image(_) if m.role != Role::User => {
                return Err(unsupported(
                    format_args!("input.messages[{i}].content[{j}]"),
                    "the openai Responses API takes images only in user messages",
                ));
            }
            ContentPart::Image(image) => {
                let field = format!("input.messages[{i}].content[{j}].image");
                Part::InputImage {
                    image_url: image_url(&field, image)?,
                }
            }
        });
    }
    Ok(Some(Content::Parts(parts)))
}

/// A tool message's text: its text parts, joined (one is borrowed as it is).
fn text_of(i: usize, m: &Message) -> Result<Cow<'_, str>, ProviderError> {
    let image = m
        .content
        .iter()
        .position(|part| matches!(part, ContentPart::Image(_)));
    if let Some(j) = image {
        return Err(unsupported(
            format_args!("input.messages[{i}].content[{j}]"),
            "the openai Responses API takes a tool's output as text",
        ));
    }
    Ok(m.text())
}
