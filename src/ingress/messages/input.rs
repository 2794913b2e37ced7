//! An Anthropic Messages request as written, and what it asks of an execution. A user turn's
//! `tool_result` blocks become tool messages, an assistant's `tool_use` blocks its tool calls
//! and its `thinking` blocks reasoning sent back; `cache_control` marks are taken and left
//! (prompt caching is the provider adapter's). Any other field is refused by name.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::error::Refusal;
use crate::execution::{
    ContentPart, ExecutionInput, GenerationParameters, Image, Message, Reasoning, Role, ToolCall,
    ToolDefinition,
};

/// `POST /v1/messages`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MessagesRequest {
    pub(super) model: String,
    max_tokens: u32,
    messages: Vec<Turn>,
    system: Option<System>,
    #[serde(default)]
    pub(super) stream: bool,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<u32>,
    #[serde(default)]
    stop_sequences: Vec<String>,
    #[serde(default)]
    tools: Vec<Tool>,
    tool_choice: Option<ToolChoice>,
    thinking: Option<Thinking>,
    metadata: Option<Metadata>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum System {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    role: TurnRole,
    content: Content,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum TurnRole {
    User,
    Assistant,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
        #[serde(default, rename = "cache_control")]
        _cache: Option<serde_json::Value>,
    },
    Image {
        source: Source,
        #[serde(default, rename = "cache_control")]
        _cache: Option<serde_json::Value>,
    },
    ToolUse {
        id: String,
        name: String,
        // A tree, not raw text: a tagged enum's fields are read through serde's buffer, which
        // holds no raw JSON.
        input: serde_json::Value,
        #[serde(default, rename = "cache_control")]
        _cache: Option<serde_json::Value>,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<Content>,
        #[serde(default)]
        is_error: bool,
        #[serde(default, rename = "cache_control")]
        _cache: Option<serde_json::Value>,
    },
    Thinking {
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Source {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tool {
    name: String,
    #[serde(default)]
    description: String,
    input_schema: Box<RawValue>,
    #[serde(default, rename = "cache_control")]
    _cache: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ToolChoice {
    Auto {
        #[serde(default, rename = "disable_parallel_tool_use")]
        _serial: bool,
    },
    Any {},
    Tool {},
    None {},
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Thinking {
    Enabled { budget_tokens: u32 },
    Disabled {},
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    user_id: Option<String>,
}

impl MessagesRequest {
    /// What the execution is given, and the capabilities the request needs beyond the
    /// ability's: tools for tools, vision for an image.
    pub(super) fn input(&self) -> Result<(ExecutionInput, Vec<String>), Refusal> {
        if self.top_k.is_some() {
            return Err(Refusal::invalid(
                "top_k",
                "is not taken: the runtime's request has no top_k to give every provider",
            ));
        }
        match &self.tool_choice {
            None | Some(ToolChoice::Auto { .. }) => {}
            Some(_) => {
                return Err(Refusal::invalid(
                    "tool_choice",
                    "only {\"type\": \"auto\"} is taken: the runtime's request has no other \
                     choice to give",
                ));
            }
        }
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        match &self.system {
            None => {}
            Some(System::Text(text)) => messages.push(plain(Role::System, text.clone())),
            Some(System::Blocks(blocks)) => {
                let text = blocks
                    .iter()
                    .enumerate()
                    .map(|(i, block)| match block {
                        Block::Text { text, .. } => Ok(text.as_str()),
                        _ => Err(Refusal::invalid(
                            format!("system[{i}]"),
                            "only text is a system prompt",
                        )),
                    })
                    .collect::<Result<String, _>>()?;
                messages.push(plain(Role::System, text));
            }
        }
        let mut vision = false;
        for (i, turn) in self.messages.iter().enumerate() {
            vision |= turn.to_messages(i, &mut messages)?;
        }
        let tools: Vec<ToolDefinition> = self
            .tools
            .iter()
            .map(|tool| ToolDefinition {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters_json_schema: tool.input_schema.get().to_owned(),
            })
            .collect();
        let mut capabilities = Vec::new();
        if !tools.is_empty() {
            capabilities.push("tools".to_owned());
        }
        if vision {
            capabilities.push("vision".to_owned());
        }
        let parameters = GenerationParameters {
            max_output_tokens: Some(self.max_tokens),
            temperature: self.temperature,
            top_p: self.top_p,
            stop_sequences: self.stop_sequences.clone(),
            response_format: None,
            reasoning_budget_tokens: match self.thinking {
                Some(Thinking::Enabled { budget_tokens }) => Some(budget_tokens),
                None | Some(Thinking::Disabled {}) => None,
            },
        };
        let input = ExecutionInput {
            messages,
            tools,
            parameters,
        };
        Ok((input, capabilities))
    }

    /// The labels the usage facts carry: `metadata.user_id` as the label `user`.
    pub(super) fn labels(&self) -> BTreeMap<String, String> {
        let user = self.metadata.as_ref().and_then(|m| m.user_id.clone());
        user.map(|user| ("user".to_owned(), user))
            .into_iter()
            .collect()
    }
}

fn plain(role: Role, text: String) -> Message {
    Message {
        role,
        content: vec![ContentPart::Text(text)],
        tool_calls: Vec::new(),
        tool_call_id: None,
    }
}

impl Turn {
    /// Appends this turn's messages to `out`: its tool results first (each a tool message),
    /// then the rest. True when it holds an image.
    fn to_messages(&self, i: usize, out: &mut Vec<Message>) -> Result<bool, Refusal> {
        let role = match self.role {
            TurnRole::User => Role::User,
            TurnRole::Assistant => Role::Assistant,
        };
        let blocks = match &self.content {
            Content::Text(text) => {
                out.push(plain(role, text.clone()));
                return Ok(false);
            }
            Content::Blocks(blocks) => blocks,
        };
        let mut message = Message {
            role,
            content: Vec::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        };
        let mut vision = false;
        for (j, block) in blocks.iter().enumerate() {
            let field = || format!("messages[{i}].content[{j}]");
            let assistant = matches!(self.role, TurnRole::Assistant);
            match block {
                Block::Text { text, .. } => message.content.push(ContentPart::Text(text.clone())),
                Block::Image { source, .. } => {
                    vision = true;
                    message
                        .content
                        .push(ContentPart::Image(image(source, &field())?));
                }
                Block::ToolUse {
                    id, name, input, ..
                } if assistant => {
                    message.tool_calls.push(ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments_json: input.to_string(),
                    });
                }
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    ..
                } if !assistant => {
                    out.push(result(tool_use_id, content.as_ref(), *is_error, &field())?)
                }
                Block::Thinking {
                    thinking,
                    signature,
                } if assistant => message.content.push(ContentPart::Reasoning(Reasoning {
                    text: thinking.clone(),
                    signature: signature.clone(),
                    redacted: String::new(),
                })),
                Block::RedactedThinking { data } if assistant => {
                    message.content.push(ContentPart::Reasoning(Reasoning {
                        redacted: data.clone(),
                        ..Reasoning::default()
                    }));
                }
                _ => {
                    return Err(Refusal::invalid(
                        field(),
                        format!(
                            "a {} turn cannot hold this block",
                            if assistant { "assistant" } else { "user" }
                        ),
                    ));
                }
            }
        }
        if !message.content.is_empty() || !message.tool_calls.is_empty() {
            out.push(message);
        }
        Ok(vision)
    }
}

/// A `tool_result` block as the tool message answering its call. An error result says so in
/// its text: no provider protocol but Anthropic's marks one.
fn result(
    id: &str,
    content: Option<&Content>,
    is_error: bool,
    field: &str,
) -> Result<Message, Refusal> {
    let mut text = String::new();
    match content {
        None => {}
        Some(Content::Text(t)) => text.push_str(t),
        Some(Content::Blocks(blocks)) => {
            for (k, block) in blocks.iter().enumerate() {
                match block {
                    Block::Text { text: t, .. } => text.push_str(t),
                    _ => {
                        return Err(Refusal::invalid(
                            format!("{field}.content[{k}]"),
                            "a tool result is text here",
                        ));
                    }
                }
            }
        }
    }
    if is_error {
        text.insert_str(0, "error: ");
    }
    Ok(Message {
        role: Role::Tool,
        content: vec![ContentPart::Text(text)],
        tool_calls: Vec::new(),
        tool_call_id: Some(id.to_owned()),
    })
}

fn image(source: &Source, field: &str) -> Result<Image, Refusal> {
    match source {
        Source::Url { url } => Ok(Image {
            url: url.clone(),
            ..Image::default()
        }),
        Source::Base64 { media_type, data } => {
            use base64::Engine;
            let data = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|_| Refusal::invalid(format!("{field}.source.data"), "is not base64"))?;
            Ok(Image {
                url: String::new(),
                data,
                media_type: media_type.clone(),
            })
        }
    }
}
