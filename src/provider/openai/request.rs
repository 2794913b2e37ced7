//! [`ExecutionInput`] -> an OpenAI chat completions request body, streaming with usage.
//!
//! The body borrows the input and is written as it is read: no JSON tree is built for it (a
//! tree of maps and owned strings cost more than the writing, on every call).
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::MaxTokensField;
use crate::execution::{
    ContentPart, ExecutionInput, Message, ResponseFormat, ResponseFormatKind, Role,
};
use crate::provider::ProviderError;
use crate::provider::wire::{encode, function, image_url, named_schema, number, unsupported};

/// A chat completions request, in the order its fields are written.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Out<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Format<'a>>,
    stream: bool,
    /// Without this the stream carries no usage at all.
    stream_options: StreamOptions,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Tool {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Map<String, Value>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Format<'a> {
    JsonObject,
    JsonSchema { json_schema: Schema<'a> },
}

#[derive(Serialize)]
struct Schema<'a> {
    name: &'a str,
    schema: Value,
}

/// One message as sent.
#[derive(Serialize)]
struct Out<'a> {
    role: &'static str,
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<Call<'a>>,
}

/// One text part as a string (what every compatible server accepts), otherwise an array of
/// parts; an assistant message with only tool calls has `null` content.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Null,
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: Url },
}

#[derive(Serialize)]
struct Url {
    url: String,
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// The body of a streaming request for `model`.
pub(in crate::provider) fn body(
    model: &str,
    input: &ExecutionInput,
    max_tokens_field: MaxTokensField,
) -> Result<Vec<u8>, ProviderError> {
    let messages = (input.messages.iter().enumerate())
        .map(|(i, m)| message(i, m))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = (input.tools.iter().enumerate())
        .map(|(i, tool)| {
            let function = function(i, tool, "parameters")?;
            Ok(Tool {
                kind: "function",
                function,
            })
        })
        .collect::<Result<Vec<_>, ProviderError>>()?;
    let p = &input.parameters;
    if p.reasoning_budget_tokens.is_some() {
        return Err(unsupported(
            "input.parameters.reasoning_budget_tokens",
            "the openai chat completions protocol takes no reasoning budget",
        ));
    }
    let (max_tokens, max_completion_tokens) = match max_tokens_field {
        MaxTokensField::MaxTokens => (p.max_output_tokens, None),
        MaxTokensField::MaxCompletionTokens => (None, p.max_output_tokens),
    };
    let body = Body {
        model,
        messages,
        tools,
        max_tokens,
        max_completion_tokens,
        temperature: p.temperature.map(number),
        top_p: p.top_p.map(number),
        stop: &p.stop_sequences,
        response_format: p
            .response_format
            .as_ref()
            .map(response_format)
            .transpose()?
            .flatten(),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
    };
    encode(&body, input)
}

/// The response format to ask for; plain text is the default and is not sent.
fn response_format(format: &ResponseFormat) -> Result<Option<Format<'_>>, ProviderError> {
    Ok(match format.kind {
        ResponseFormatKind::Text => None,
        ResponseFormatKind::JsonObject => Some(Format::JsonObject),
        ResponseFormatKind::JsonSchema => {
            let (name, schema) = named_schema(format)?;
            Some(Format::JsonSchema {
                json_schema: Schema { name, schema },
            })
        }
    })
}

fn message(i: usize, m: &Message) -> Result<Out<'_>, ProviderError> {
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let tool_calls = (m.tool_calls.iter())
        .map(|c| Call {
            id: &c.id,
            kind: "function",
            function: Function {
                name: &c.name,
                arguments: if c.arguments_json.is_empty() {
                    "{}"
                } else {
                    &c.arguments_json
                },
            },
        })
        .collect();
    Ok(Out {
        role,
        content: content(i, m)?,
        tool_call_id: m.tool_call_id.as_deref(),
        tool_calls,
    })
}

/// Reasoning sent back is left out: chat completions servers take none back (DeepSeek refuses
/// a request that has it).
fn content(i: usize, m: &Message) -> Result<Content<'_>, ProviderError> {
    let sent = |part: &&ContentPart| !matches!(part, ContentPart::Reasoning(_));
    let mut kept = m.content.iter().filter(sent);
    match (kept.next(), kept.next()) {
        (None, _) => return Ok(Content::Null),
        (Some(ContentPart::Text(text)), None) => return Ok(Content::Text(text)),
        _ => {}
    }
    let mut parts = Vec::with_capacity(m.content.len());
    for (j, part) in m.content.iter().enumerate() {
        let part = match part {
            ContentPart::Reasoning(_) => continue,
            ContentPart::Text(text) => Part::Text { text },
            ContentPart::Image(_) if m.role != Role::User => {
                return Err(unsupported(
                    format_args!("input.messages[{i}].content[{j}]"),
                    "the openai chat completions protocol takes images only in user messages",
                ));
            }
            ContentPart::Image(image) => {
                let field = format!("input.messages[{i}].content[{j}].image");
                let url = image_url(&field, image)?;
                Part::ImageUrl {
                    image_url: Url { url },
                }
            }
        };
        parts.push(part);
    }
    Ok(Content::Parts(parts))
}
