//! An OpenAI chat completions request as written, and what it asks of an execution. Every
//! field the API defines either maps onto the Execute request or is refused by name; what
//! changes nothing of the answer (`parallel_tool_calls`, `store`) is taken and left.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::execution::{
    ContentPart, ExecutionInput, GenerationParameters, Message, ResponseFormat, ResponseFormatKind,
    Role, ToolCall, ToolDefinition,
};

use super::super::error::Refusal;
use super::super::request::{budget, image, labels};

/// `POST /v1/chat/completions`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChatRequest {
    pub(super) model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    pub(super) stream: bool,
    pub(super) stream_options: Option<StreamOptions>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    stop: Option<Stop>,
    #[serde(default)]
    tools: Vec<Tool>,
    tool_choice: Option<serde_json::Value>,
    #[expect(dead_code, reason = "taken and left: providers call tools as they do")]
    parallel_tool_calls: Option<bool>,
    response_format: Option<Format>,
    reasoning_effort: Option<String>,
    n: Option<u32>,
    metadata: Option<BTreeMap<String, String>>,
    user: Option<String>,
    #[expect(
        dead_code,
        reason = "taken and left: the runtime keeps every execution anyway"
    )]
    store: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StreamOptions {
    #[serde(default)]
    pub(super) include_usage: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatMessage {
    role: ChatRole,
    #[serde(default)]
    content: Option<Content>,
    #[expect(
        dead_code,
        reason = "a participant's name: no provider protocol carries it on"
    )]
    name: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallIn>,
    tool_call_id: Option<String>,
    refusal: Option<String>,
    /// Reasoning an earlier answer gave (as this ingress writes it, and DeepSeek's API).
    reasoning_content: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ChatRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
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
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
    Refusal { refusal: String },
}

#[derive(Debug, Deserialize)]
struct ImageUrl {
    url: String,
    #[expect(
        dead_code,
        reason = "a detail level: no other provider protocol takes it"
    )]
    detail: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CallIn {
    id: String,
    function: FunctionCall,
}

#[derive(Debug, Deserialize)]
struct FunctionCall {
    name: String,
    arguments: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tool {
    #[serde(rename = "type")]
    kind: String,
    function: Function,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Function {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Option<Box<RawValue>>,
    #[expect(
        dead_code,
        reason = "the schema is sent as given; strictness is the provider's"
    )]
    strict: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Format {
    Text,
    JsonObject,
    JsonSchema { json_schema: Schema },
}

#[derive(Debug, Deserialize)]
struct Schema {
    name: String,
    // A tree, not raw text: a tagged enum's fields are read through serde's buffer, which
    // holds no raw JSON.
    schema: Option<serde_json::Value>,
}

impl ChatRequest {
    /// What the execution is given, and the capabilities the request needs beyond the
    /// ability's: tools for tools, vision for an image, json_schema for a schema.
    pub(super) fn input(&self) -> Result<(ExecutionInput, Vec<String>), Refusal> {
        if let Some(n) = self.n.filter(|n| *n != 1) {
            return Err(Refusal::invalid(
                "n",
                format!("is {n}: one choice is made per request"),
            ));
        }
        if let Some(choice) = &self.tool_choice
            && choice.as_str() != Some("auto")
        {
            return Err(Refusal::invalid(
                "tool_choice",
                "only \"auto\" is taken: the runtime's request has no other choice to give",
            ));
        }
        let mut capabilities = Vec::new();
        let mut need = |capability: &str| {
            if !capabilities.iter().any(|c| c == capability) {
                capabilities.push(capability.to_owned());
            }
        };
        let mut messages = Vec::with_capacity(self.messages.len());
        for (i, message) in self.messages.iter().enumerate() {
            let message = message.to_message(i)?;
            if message
                .content
                .iter()
                .any(|p| matches!(p, ContentPart::Image(_)))
            {
                need("vision");
            }
            messages.push(message);
        }
        let tools = self
            .tools
            .iter()
            .enumerate()
            .map(|(i, tool)| tool.to_definition(i))
            .collect::<Result<Vec<_>, _>>()?;
        if !tools.is_empty() {
            need("tools");
        }
        let response_format = self.response_format(&mut need);
        let parameters = self.parameters(response_format)?;
        let input = ExecutionInput {
            messages,
            tools,
            parameters,
        };
        Ok((input, capabilities))
    }

    /// The reply's shape; a schema needs `json_schema`.
    fn response_format(&self, need: &mut impl FnMut(&str)) -> Option<ResponseFormat> {
        match &self.response_format {
            None | Some(Format::Text) => None,
            Some(Format::JsonObject) => Some(ResponseFormat {
                kind: ResponseFormatKind::JsonObject,
                json_schema: String::new(),
                schema_name: String::new(),
            }),
            Some(Format::JsonSchema { json_schema }) => {
                need("json_schema");
                Some(ResponseFormat {
                    kind: ResponseFormatKind::JsonSchema,
                    json_schema: json_schema
                        .schema
                        .as_ref()
                        .map_or_else(|| "{}".to_owned(), ToString::to_string),
                    schema_name: json_schema.name.clone(),
                })
            }
        }
    }

    /// The generation parameters, `response_format` among them.
    fn parameters(
        &self,
        response_format: Option<ResponseFormat>,
    ) -> Result<GenerationParameters, Refusal> {
        let reasoning_budget_tokens = budget("reasoning_effort", self.reasoning_effort.as_deref())?;
        let stop_sequences = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(one)) => vec![one.clone()],
            Some(Stop::Many(many)) => many.clone(),
        };
        Ok(GenerationParameters {
            max_output_tokens: self.max_completion_tokens.or(self.max_tokens),
            temperature: self.temperature,
            top_p: self.top_p,
            stop_sequences,
            response_format,
            reasoning_budget_tokens,
        })
    }

    /// The labels the usage facts carry: `metadata`, and `user` as the label `user`.
    pub(super) fn labels(&self) -> BTreeMap<String, String> {
        labels(self.metadata.as_ref(), self.user.as_ref())
    }
}

impl ChatMessage {
    fn to_message(&self, i: usize) -> Result<Message, Refusal> {
        let field = |name: &str| format!("messages[{i}].{name}");
        let role = match self.role {
            ChatRole::System | ChatRole::Developer => Role::System,
            ChatRole::User => Role::User,
            ChatRole::Assistant => Role::Assistant,
            ChatRole::Tool => Role::Tool,
        };
        let mut content = Vec::new();
        if let Some(reasoning) = &self.reasoning_content {
            content.push(ContentPart::Reasoning(crate::execution::Reasoning {
                text: reasoning.clone(),
                ..Default::default()
            }));
        }
        match &self.content {
            None => {}
            Some(Content::Text(text)) => content.push(ContentPart::Text(text.clone())),
            Some(Content::Parts(parts)) => {
                for (j, part) in parts.iter().enumerate() {
                    content.push(match part {
                        Part::Text { text } => ContentPart::Text(text.clone()),
                        Part::Refusal { refusal } => ContentPart::Text(refusal.clone()),
                        Part::ImageUrl { image_url } => ContentPart::Image(image(
                            &image_url.url,
                            &format!("messages[{i}].content[{j}].image_url.url"),
                        )?),
                    });
                }
            }
        }
        if let Some(refusal) = &self.refusal {
            content.push(ContentPart::Text(refusal.clone()));
        }
        let tool_calls: Vec<ToolCall> = self
            .tool_calls
            .iter()
            .map(|call| ToolCall {
                id: call.id.clone(),
                name: call.function.name.clone(),
                arguments_json: call.function.arguments.clone(),
            })
            .collect();
        if !tool_calls.is_empty() && !matches!(self.role, ChatRole::Assistant) {
            return Err(Refusal::invalid(
                field("tool_calls"),
                "only an assistant message makes tool calls",
            ));
        }
        let tool_call_id = match (self.role, &self.tool_call_id) {
            (ChatRole::Tool, None) => {
                return Err(Refusal::invalid(
                    field("tool_call_id"),
                    "a tool message answers a call: name it",
                ));
            }
            (ChatRole::Tool, Some(id)) => Some(id.clone()),
            (_, Some(_)) => {
                return Err(Refusal::invalid(
                    field("tool_call_id"),
                    "only a tool message answers a call",
                ));
            }
            (_, None) => None,
        };
        if content.is_empty() && tool_calls.is_empty() {
            return Err(Refusal::invalid(field("content"), "is empty"));
        }
        Ok(Message {
            role,
            content,
            tool_calls,
            tool_call_id,
        })
    }
}

impl Tool {
    fn to_definition(&self, i: usize) -> Result<ToolDefinition, Refusal> {
        if self.kind != "function" {
            return Err(Refusal::invalid(
                format!("tools[{i}].type"),
                format!(
                    "`{}` is not a tool the runtime can offer (only `function`)",
                    self.kind
                ),
            ));
        }
        Ok(ToolDefinition {
            name: self.function.name.clone(),
            description: self.function.description.clone(),
            parameters_json_schema: self.function.parameters.as_ref().map_or_else(
                || r#"{"type":"object","properties":{}}"#.to_owned(),
                |p| p.get().to_owned(),
            ),
        })
    }
}
