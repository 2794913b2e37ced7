//! [`ExecutionInput`] -> a Gemini API `streamGenerateContent` request body.
//!
//! The body borrows the input and is written as it is read, as the chat completions body is:
//! no JSON tree is built for it (a tree of maps and owned strings cost more than the writing,
//! on every call).
//!
//! [`ExecutionInput`]: crate::execution::ExecutionInput

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::execution::{
    ContentPart, ExecutionInput, GenerationParameters, Message, ResponseFormatKind, Role,
};
use crate::provider::ProviderError;
use crate::provider::wire::{
    encode, function, image_data, invalid, json_object, number, unsupported,
};

/// A `GenerateContentRequest`, in the order its fields are written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Instruction<'a>>,
    contents: Vec<Content<'a>>,
    /// One set of function declarations, when there are tools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tools>,
    #[serde(skip_serializing_if = "Config::is_empty")]
    generation_config: Config<'a>,
}

/// The system messages' text parts.
#[derive(Serialize)]
struct Instruction<'a> {
    parts: Vec<Part<'a>>,
}

/// A turn: the user's (a tool result's too) or the model's.
#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: Vec<Part<'a>>,
}

/// One part of a turn: what it holds, and (on a model turn's first part) the thought
/// signature.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(flatten)]
    kind: Kind<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'a str>,
}

impl<'a> Part<'a> {
    fn new(kind: Kind<'a>) -> Self {
        Self {
            kind,
            thought_signature: None,
        }
    }
}

/// What a part holds, as one field named by its kind (`{"text": ...}`,
/// `{"inlineData": {...}}`). Newtype variants only: serde buffers a flattened struct variant
/// (base64 image data and all) before writing it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Kind<'a> {
    Text(&'a str),
    InlineData(Blob<'a>),
    FileData(File<'a>),
    FunctionCall(Call<'a>),
    FunctionResponse(Answer<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Blob<'a> {
    mime_type: &'a str,
    data: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct File<'a> {
    file_uri: &'a str,
    mime_type: &'a str,
}

#[derive(Serialize)]
struct Call<'a> {
    name: &'a str,
    args: Value,
}

#[derive(Serialize)]
struct Answer<'a> {
    name: &'a str,
    response: Response<'a>,
}

/// A tool's text as a response: the JSON object it is, else `{"result": TEXT}`.
#[derive(Serialize)]
#[serde(untagged)]
enum Response<'a> {
    Object(Value),
    Text { result: Cow<'a, str> },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tools {
    function_declarations: Vec<Map<String, Value>>,
}

/// `generationConfig`: limits, sampling, the response format and thinking; left out when
/// none is set.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Config<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_json_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<Thinking>,
}

impl Config<'_> {
    /// Whether nothing is set (every field is named, so that a new one is not forgotten).
    fn is_empty(&self) -> bool {
        let Self {
            max_output_tokens,
            temperature,
            top_p,
            stop_sequences,
            response_mime_type,
            response_json_schema,
            thinking_config,
        } = self;
        max_output_tokens.is_none()
            && temperature.is_none()
            && top_p.is_none()
            && stop_sequences.is_empty()
            && response_mime_type.is_none()
            && response_json_schema.is_none()
            && thinking_config.is_none()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Thinking {
    thinking_budget: u32,
    include_thoughts: bool,
}

/// The body of a streaming request (the model is in the URL).
pub(in crate::provider) fn body(input: &ExecutionInput) -> Result<Vec<u8>, ProviderError> {
    let mut system = Vec::new();
    let mut contents = Vec::with_capacity(input.messages.len());
    // A tool result names its call by id; Gemini names it by the function's name.
    let mut names: HashMap<&str, &str> = HashMap::new();
    for (i, m) in input.messages.iter().enumerate() {
        match m.role {
            Role::System => {
                for part in &m.content {
                    if let ContentPart::Text(text) = part {
                        system.push(Part::new(Kind::Text(text)));
                    }
                }
            }
            Role::Tool => contents.push(tool_result(i, m, &names)?),
            Role::User | Role::Assistant => {
                for call in &m.tool_calls {
                    names.insert(&call.id, &call.name);
                }
                contents.push(message(i, m)?);
            }
        }
    }
    let system_instruction = if system.is_empty() {
        None
    } else {
        Some(Instruction { parts: system })
    };
    let tools = if input.tools.is_empty() {
        Vec::new()
    } else {
        vec![tools(input)?]
    };
    let body = Body {
        system_instruction,
        contents,
        tools,
        generation_config: generation_config(&input.parameters)?,
    };
    encode(&body, input)
}

/// The tools, as one set of function declarations (a tool definition is rare enough to be
/// built as the map [`function`] makes).
fn tools(input: &ExecutionInput) -> Result<Tools, ProviderError> {
    let function_declarations = (input.tools.iter().enumerate())
        .map(|(i, tool)| function(i, tool, "parametersJsonSchema"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Tools {
        function_declarations,
    })
}

/// `generationConfig`: limits, sampling, the response format and thinking.
fn generation_config(p: &GenerationParameters) -> Result<Config<'_>, ProviderError> {
    const JSON: &str = "application/json";
    let (response_mime_type, response_json_schema) = match &p.response_format {
        None => (None, None),
        Some(format) => match format.kind {
            ResponseFormatKind::Text => (None, None),
            ResponseFormatKind::JsonObject => (Some(JSON), None),
            ResponseFormatKind::JsonSchema => {
                let field = "input.parameters.response_format.json_schema";
                (Some(JSON), Some(json_object(field, &format.json_schema)?))
            }
        },
    };
    Ok(Config {
        max_output_tokens: p.max_output_tokens,
        temperature: p.temperature.map(number),
        top_p: p.top_p.map(number),
        stop_sequences: &p.stop_sequences,
        response_mime_type,
        response_json_schema,
        thinking_config: p.reasoning_budget_tokens.map(|budget| Thinking {
            thinking_budget: budget,
            include_thoughts: true,
        }),
    })
}

/// `messages[i]`, a user or model turn: its text, images and (a model's) function calls. A
/// model turn's thought signature, which this adapter kept as its reasoning's signature, goes
/// back on the turn's first part, where Gemini put it.
fn message(i: usize, m: &Message) -> Result<Content<'_>, ProviderError> {
    let role = if m.role == Role::Assistant {
        "model"
    } else {
        "user"
    };
    let mut parts = Vec::with_capacity(m.content.len() + m.tool_calls.len());
    let mut signature = None;
    for (j, part) in m.content.iter().enumerate() {
        let kind = match part {
            ContentPart::Text(text) => Kind::Text(text),
            ContentPart::Reasoning(r) => {
                if !r.signature.is_empty() && signature.is_none() {
                    signature = Some(r.signature.as_str());
                }
                continue;
            }
            ContentPart::Image(_) if m.role != Role::User => {
                return Err(unsupported(
                    format_args!("input.messages[{i}].content[{j}]"),
                    "the gemini protocol takes images only in user messages",
                ));
            }
            ContentPart::Image(image) if !image.url.is_empty() => {
                if image.media_type.is_empty() {
                    return Err(unsupported(
                        format_args!("input.messages[{i}].content[{j}].image.media_type"),
                        "the gemini protocol needs the media type of an image sent by URL",
                    ));
                }
                Kind::FileData(File {
                    file_uri: &image.url,
                    mime_type: &image.media_type,
                })
            }
            ContentPart::Image(image) => {
                let field = format!("input.messages[{i}].content[{j}].image");
                let (mime_type, data) = image_data(&field, image)?;
                Kind::InlineData(Blob { mime_type, data })
            }
        };
        parts.push(Part::new(kind));
    }
    for (k, call) in m.tool_calls.iter().enumerate() {
        let field = format!("input.messages[{i}].tool_calls[{k}].arguments_json");
        let args = json_object(&field, &call.arguments_json)?;
        parts.push(Part::new(Kind::FunctionCall(Call {
            name: &call.name,
            args,
        })));
    }
    if let (Some(signature), Some(first)) = (signature, parts.first_mut()) {
        first.thought_signature = Some(signature);
    }
    if parts.is_empty() {
        return Err(invalid(
            format_args!("input.messages[{i}]"),
            "has nothing to send: no text, image or tool call",
        ));
    }
    Ok(Content { role, parts })
}

/// The tool message `messages[i]` as a `functionResponse`, named as the call it answers; its
/// text is the response object when it is a JSON object, else `{"result": TEXT}`.
fn tool_result<'a>(
    i: usize,
    m: &'a Message,
    names: &HashMap<&str, &'a str>,
) -> Result<Content<'a>, ProviderError> {
    let Some(id) = &m.tool_call_id else {
        return Err(invalid(
            format_args!("input.messages[{i}].tool_call_id"),
            "is required on a tool message",
        ));
    };
    let Some(&name) = names.get(id.as_str()) else {
        return Err(invalid(
            format_args!("input.messages[{i}].tool_call_id"),
            "names no tool call of an earlier assistant message",
        ));
    };
    let text = m.text();
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(object @ Value::Object(_)) => Response::Object(object),
        _ => Response::Text { result: text },
    };
    let answer = Answer { name, response };
    Ok(Content {
        role: "user",
        parts: vec![Part::new(Kind::FunctionResponse(answer))],
    })
}
