//! An OpenAI Responses request as written, and what it asks of an execution: `instructions`
//! and `input` (text, or items: messages with text and image parts, function calls and their
//! outputs), function tools, `max_output_tokens`, sampling, `reasoning.effort`, a JSON
//! `text.format`. The runtime keeps no conversation of its own: `previous_response_id` is
//! refused by name, as is any other field it cannot map.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::super::error::Refusal;
use super::super::request::{budget, image, labels};
use crate::execution::{
    ContentPart, ExecutionInput, GenerationParameters, Message, ResponseFormat, ResponseFormatKind,
    Role, ToolCall, ToolDefinition,
};

/// `POST /v1/responses`' body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResponsesRequest {
    pub(super) model: String,
    input: Input,
    instructions: Option<String>,
    #[serde(default)]
    pub(super) stream: bool,
    max_output_tokens: Option<u32>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    #[serde(default)]
    tools: Vec<Tool>,
    tool_choice: Option<serde_json::Value>,
    #[expect(dead_code, reason = "taken and left: providers call tools as they do")]
    parallel_tool_calls: Option<bool>,
    reasoning: Option<Reasoning>,
    text: Option<Text>,
    metadata: Option<BTreeMap<String, String>>,
    user: Option<String>,
    #[expect(
        dead_code,
        reason = "taken and left: the runtime keeps every execution anyway"
    )]
    store: Option<bool>,
    previous_response_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Items(Vec<Item>),
}

/// One input item. A message may leave out its `type`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Item {
    Typed(Typed),
    Message(ItemMessage),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Typed {
    Message(ItemMessage),
    FunctionCall {
        call_id: String,
        name: String,
        arguments: String,
    },
    FunctionCallOutput {
        call_id: String,
        output: String,
    },
}

#[derive(Debug, Deserialize)]
struct ItemMessage {
    role: ItemRole,
    content: Content,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ItemRole {
    System,
    Developer,
    User,
    Assistant,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part {
    InputText { text: String },
    OutputText { text: String },
    InputImage { image_url: String },
    Refusal { refusal: String },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Tool {
    Function {
        name: String,
        #[serde(default)]
        description: Option<String>,
        // A tree, not raw text: a tagged enum's fields are read through serde's buffer, which
        // holds no raw JSON.
        parameters: Option<serde_json::Value>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reasoning {
    effort: Option<String>,
    #[expect(
        dead_code,
        reason = "a summary of reasoning is not something every provider gives"
    )]
    summary: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Text {
    format: Option<Format>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Format {
    Text,
    JsonObject,
    JsonSchema {
        name: String,
        schema: serde_json::Value,
    },
}

impl ResponsesRequest {
    /// What the execution is given, and the capabilities the request needs beyond the
    /// ability's: tools for tools, vision for an image, json_schema for a schema.
    pub(super) fn input(&self) -> Result<(ExecutionInput, Vec<String>), Refusal> {
        if self.previous_response_id.is_some() {
            return Err(Refusal::invalid(
                "previous_response_id",
                "the runtime keeps no conversation: send the whole input",
            ));
        }
        if let Some(choice) = &self.tool_choice
            && choice.as_str() != Some("auto")
        {
            return Err(Refusal::invalid("tool_choice", "only \"auto\" is taken"));
        }
        let mut capabilities = Vec::new();
        let messages = self.messages(&mut capabilities)?;
        let tools: Vec<ToolDefinition> = self
            .tools
            .iter()
            .map(
                |Tool::Function {
                     name,
                     description,
                     parameters,
                 }| ToolDefinition {
                    name: name.clone(),
                    description: description.clone().unwrap_or_default(),
                    parameters_json_schema: parameters.as_ref().map_or_else(
                        || r#"{"type":"object","properties":{}}"#.to_owned(),
                        ToString::to_string,
                    ),
                },
            )
            .collect();
        if !tools.is_empty() {
            capabilities.push("tools".to_owned());
        }
        let parameters = self.parameters(&mut capabilities)?;
        capabilities.dedup();
        let input = ExecutionInput {
            messages,
            tools,
            parameters,
        };
        Ok((input, capabilities))
    }

    /// `instructions`, then `input`; an image needs `vision`.
    fn messages(&self, capabilities: &mut Vec<String>) -> Result<Vec<Message>, Refusal> {
        let mut messages = Vec::new();
        if let Some(instructions) = &self.instructions {
            messages.push(text_message(Role::System, instructions.clone()));
        }
        match &self.input {
            Input::Text(text) => messages.push(text_message(Role::User, text.clone())),
            Input::Items(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(message) = item.to_message(i, &mut messages)? {
                        if message
                            .content
                            .iter()
                            .any(|p| matches!(p, ContentPart::Image(_)))
                        {
                            capabilities.push("vision".to_owned());
                        }
                        messages.push(message);
                    }
                }
            }
        }
        Ok(messages)
    }

    /// The generation parameters; a schema needs `json_schema`.
    fn parameters(&self, capabilities: &mut Vec<String>) -> Result<GenerationParameters, Refusal> {
        let response_format = match self.text.as_ref().and_then(|t| t.format.as_ref()) {
            None | Some(Format::Text) => None,
            Some(Format::JsonObject) => Some(ResponseFormat {
                kind: ResponseFormatKind::JsonObject,
                json_schema: String::new(),
                schema_name: String::new(),
            }),
            Some(Format::JsonSchema { name, schema }) => {
                capabilities.push("json_schema".to_owned());
                Some(ResponseFormat {
                    kind: ResponseFormatKind::JsonSchema,
                    json_schema: schema.to_string(),
                    schema_name: name.clone(),
                })
            }
        };
        let effort = self.reasoning.as_ref().and_then(|r| r.effort.as_deref());
        let reasoning_budget_tokens = budget("reasoning.effort", effort)?;
        Ok(GenerationParameters {
            max_output_tokens: self.max_output_tokens,
            temperature: self.temperature,
            top_p: self.top_p,
            stop_sequences: Vec::new(),
            response_format,
            reasoning_budget_tokens,
        })
    }

    /// The labels the usage facts carry: `metadata`, and `user` as the label `user`.
    pub(super) fn labels(&self) -> BTreeMap<String, String> {
        labels(self.metadata.as_ref(), self.user.as_ref())
    }
}

fn text_message(role: Role, text: String) -> Message {
    Message {
        role,
        content: vec![ContentPart::Text(text)],
        tool_calls: Vec::new(),
        tool_call_id: None,
    }
}

impl Item {
    /// The message this item is, or `None` when it joined the one before it (a function
    /// call joins the assistant turn that made it).
    fn to_message(&self, i: usize, before: &mut [Message]) -> Result<Option<Message>, Refusal> {
        let message = match self {
            Self::Message(message) | Self::Typed(Typed::Message(message)) => message,
            Self::Typed(Typed::FunctionCall {
                call_id,
                name,
                arguments,
            }) => {
                let call = ToolCall {
                    id: call_id.clone(),
                    name: name.clone(),
                    arguments_json: arguments.clone(),
                };
                if let Some(last) = before.last_mut().filter(|m| m.role == Role::Assistant) {
                    last.tool_calls.push(call);
                    return Ok(None);
                }
                return Ok(Some(Message {
                    role: Role::Assistant,
                    content: Vec::new(),
                    tool_calls: vec![call],
                    tool_call_id: None,
                }));
            }
            Self::Typed(Typed::FunctionCallOutput { call_id, output }) => {
                return Ok(Some(Message {
                    tool_call_id: Some(call_id.clone()),
                    ..text_message(Role::Tool, output.clone())
                }));
            }
        };
        let role = match message.role {
            ItemRole::System | ItemRole::Developer => Role::System,
            ItemRole::User => Role::User,
            ItemRole::Assistant => Role::Assistant,
        };
        let content = match &message.content {
            Content::Text(text) => vec![ContentPart::Text(text.clone())],
            Content::Parts(parts) => parts
                .iter()
                .enumerate()
                .map(|(j, part)| match part {
                    Part::InputText { text } | Part::OutputText { text } => {
                        Ok(ContentPart::Text(text.clone()))
                    }
                    Part::Refusal { refusal } => Ok(ContentPart::Text(refusal.clone())),
                    Part::InputImage { image_url } => {
                        image(image_url, &format!("input[{i}].content[{j}].image_url"))
                            .map(ContentPart::Image)
                    }
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Some(Message {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }))
    }
}
