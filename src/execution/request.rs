//! What a caller asks for: the transport-free form of `ExecuteRequest`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;

use super::TraceContext;
use super::outcome::Reasoning;

/// Opaque caller labels (e.g. a tenant id), copied onto usage facts.
pub type Labels = BTreeMap<String, String>;

/// A request to run one ability, as the runtime validates it against its configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecuteRequest {
    /// The ability to run.
    pub ability: String,
    /// Capabilities required beyond the ability's own.
    pub capabilities: Vec<String>,
    /// The conversation, tools and parameters.
    pub input: ExecutionInput,
    /// Absolute deadline; `None` takes the configured default.
    pub deadline: Option<SystemTime>,
    /// Routing policy; `None` takes the ability's default.
    pub policy: Option<String>,
    /// One target of the policy, `provider/model`, to route to alone; `None` routes by the
    /// policy's targets in order.
    pub target: Option<String>,
    /// Caller-declared attempt limit, capped by the policy.
    pub max_attempts: Option<u32>,
    /// `None` means fallback is allowed.
    pub allow_fallback: Option<bool>,
    /// How output reaches the caller; `None` takes the policy's default.
    pub delivery: Option<Delivery>,
    /// The admission class; `None` is [`Priority::Standard`]. Part of neither the routing
    /// plan nor the idempotent identity.
    pub priority: Option<Priority>,
    /// Deduplicates submissions: see [`Idempotency`](crate::execution::Idempotency).
    pub idempotency_key: Option<String>,
    /// Copied onto usage facts.
    pub labels: Labels,
    /// The caller's trace, continued by the provider requests. Not part of the request's
    /// identity: an idempotent repeat may come from another trace.
    pub trace: Option<TraceContext>,
}

/// How an execution's output reaches its caller. Named for what the caller receives, not for
/// how the provider is called: every attempt streams from its provider either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Each output delta is appended as it arrives: the first one commits the execution to
    /// its attempt, and a failure after it ends the execution with `output_interrupted`.
    #[default]
    Streamed,
    /// An attempt's output is held until the attempt completes, then appended with
    /// `execution.completed` in one batch. Nothing is exposed before that, so a failure at
    /// any point of an attempt is a failure before commit: it is retried or falls back as
    /// its error class and the budget say. Reasoning, progress and usage still stream live
    /// (they commit nothing).
    Buffered,
}

impl Delivery {
    /// Whether this is the default, [`Delivery::Streamed`].
    pub fn is_streamed(&self) -> bool {
        *self == Self::Streamed
    }
}

/// The admission class of an execution: which of a saturated provider's waiting attempts
/// gets the next permit. A small closed set, not a number: each class has its own queue
/// capacity, metrics series and documented service, which an open range could not have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// A person is waiting (a chat turn): served first.
    Interactive,
    /// The default.
    #[default]
    Standard,
    /// Nobody is waiting on this one (a summarisation job): served last, but never starved.
    Batch,
}

impl Priority {
    /// Every class, highest first.
    pub const ALL: [Self; 3] = [Self::Interactive, Self::Standard, Self::Batch];

    /// Whether this is the default, [`Priority::Standard`].
    pub fn is_standard(&self) -> bool {
        *self == Self::Standard
    }

    /// The lowercase name, as configuration and metrics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Standard => "standard",
            Self::Batch => "batch",
        }
    }

    /// Its place in [`ALL`](Self::ALL).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The conversation, tools and generation parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecutionInput {
    /// Oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Generation parameters.
    pub parameters: GenerationParameters,
}

impl ExecutionInput {
    /// Bytes of content the caller sent (text, image data, schemas): what the configured
    /// `server.max_input_bytes` limits.
    pub(crate) fn content_bytes(&self) -> usize {
        let messages: usize = self
            .messages
            .iter()
            .map(|m| {
                let parts: usize = m
                    .content
                    .iter()
                    .map(|p| match p {
                        ContentPart::Text(t) => t.len(),
                        ContentPart::Image(i) => i.url.len() + i.data.len() + i.media_type.len(),
                        ContentPart::Reasoning(r) => {
                            r.text.len() + r.signature.len() + r.redacted.len()
                        }
                    })
                    .sum();
                let calls: usize = m
                    .tool_calls
                    .iter()
                    .map(|c| c.id.len() + c.name.len() + c.arguments_json.len())
                    .sum();
                parts + calls + m.tool_call_id.as_ref().map_or(0, String::len)
            })
            .sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters_json_schema.len())
            .sum();
        let p = &self.parameters;
        let stops: usize = p.stop_sequences.iter().map(String::len).sum();
        let format = p
            .response_format
            .as_ref()
            .map_or(0, |f| f.json_schema.len() + f.schema_name.len());
        messages + tools + stops + format
    }

    /// Roughly what holding this input costs: its content bytes and the structures around
    /// them. A store that bounds its memory counts it while the execution runs.
    pub(crate) fn retained_bytes(&self) -> usize {
        use std::mem::size_of;
        let parts: usize = self.messages.iter().map(|m| m.content.len()).sum();
        let calls: usize = self.messages.iter().map(|m| m.tool_calls.len()).sum();
        self.content_bytes()
            + size_of::<Self>()
            + self.messages.len() * size_of::<Message>()
            + parts * size_of::<ContentPart>()
            + calls * size_of::<ToolCall>()
            + self.tools.len() * size_of::<ToolDefinition>()
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Content parts in order.
    pub content: Vec<ContentPart>,
    /// Tool calls of an assistant message.
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: the call answered.
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentPart::Text(text.into())],
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// The concatenation of the message's text parts: borrowed when there is one, as there
    /// nearly always is.
    pub fn text(&self) -> Cow<'_, str> {
        let mut text = Cow::Borrowed("");
        for part in &self.content {
            match part {
                ContentPart::Text(t) if text.is_empty() => text = Cow::Borrowed(t.as_str()),
                ContentPart::Text(t) => text.to_mut().push_str(t),
                ContentPart::Image(_) | ContentPart::Reasoning(_) => {}
            }
        }
        text
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions.
    System,
    /// The end user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentPart {
    /// Plain text.
    Text(String),
    /// An image.
    Image(Image),
    /// Reasoning an earlier turn's result gave, sent back (assistant messages only).
    Reasoning(Reasoning),
}

/// An image by URL or inline bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Image {
    /// A URL the provider fetches.
    pub url: String,
    /// Inline bytes.
    pub data: Vec<u8>,
    /// Media type of `data`.
    pub media_type: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters_json_schema: String,
}

/// A call the model made to a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The provider's call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Arguments as JSON text.
    pub arguments_json: String,
}

/// Generation parameters; `None` leaves the provider's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GenerationParameters {
    /// Upper bound on generated tokens.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    pub top_p: Option<f32>,
    /// Stop sequences.
    pub stop_sequences: Vec<String>,
    /// Reply shape; `None` is free text.
    pub response_format: Option<ResponseFormat>,
    /// Tokens the model may spend reasoning before it answers, where the protocol takes a
    /// budget (Anthropic extended thinking). Left out of the idempotency fingerprint when
    /// unset, so requests that never set it keep the fingerprint they had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_budget_tokens: Option<u32>,
}

/// The shape of the reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResponseFormat {
    /// The kind.
    pub kind: ResponseFormatKind,
    /// For `JsonSchema`: the schema.
    pub json_schema: String,
    /// For `JsonSchema`: its name.
    pub schema_name: String,
}

/// The kind of reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormatKind {
    /// Free text.
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema.
    JsonSchema,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(prompt: &str) -> ExecuteRequest {
        ExecuteRequest {
            ability: "chat".into(),
            input: ExecutionInput {
                messages: vec![Message::user(prompt)],
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn counts_content_bytes() {
        let mut r = request("four");
        r.input.tools.push(ToolDefinition {
            name: "ab".into(),
            description: String::new(),
            parameters_json_schema: "{}".into(),
        });
        assert_eq!(r.input.content_bytes(), 8);
    }
}
