//! The `openai` adapter: OpenAI chat completions, streaming (`stream: true` with
//! `stream_options.include_usage`), which vLLM, Ollama, llama.cpp's server and other
//! compatible servers also speak. It assumes nothing only OpenAI does: the key is optional,
//! usage may be missing (then estimated and labelled so), a tool call may arrive whole in one
//! chunk, without an index or without an id, and a body that ends after a finish reason but
//! without `[DONE]` is still a complete reply.

mod content;
mod fast;
pub(super) mod request;

use std::sync::Arc;

use http::header::{AUTHORIZATION, HeaderMap};
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use content::{Content, filtered, parts_out};

use super::exchange::{self, Decoder};
use super::http::{HttpClients, Upstream, bearer_header};
use super::sse::{SseEvent, SseParser};
use super::tally::UsageTally;
use super::{
    Provider, ProviderCall, ProviderError, ProviderEvent, ProviderInitError, ProviderStream,
};
use crate::config::{MaxTokensField, OpenAiConfig};
use crate::execution::{FinishReason, ReasoningPiece, Text};

/// An OpenAI-compatible chat completions endpoint.
#[derive(Debug)]
pub(super) struct OpenAiProvider {
    upstream: Upstream,
    max_tokens_field: MaxTokensField,
}

impl OpenAiProvider {
    /// The adapter of provider `name`, with a client from `clients` keeping up to
    /// `max_concurrency` idle connections.
    pub(super) fn new(
        name: Arc<str>,
        config: &OpenAiConfig,
        clients: &mut HttpClients,
        max_concurrency: u32,
    ) -> Result<Self, ProviderInitError> {
        let client = clients.client(
            &name,
            &config.endpoint,
            "/chat/completions",
            max_concurrency,
        )?;
        let mut headers = HeaderMap::new();
        // Servers that need no key get no Authorization header at all.
        if let Some(key) = &config.api_key {
            headers.insert(AUTHORIZATION, bearer_header(&name, key)?);
        }
        Ok(Self {
            upstream: Upstream::new(
                name,
                "openai",
                client,
                config.endpoint.timeouts,
                headers,
                config.api_key.clone(),
            ),
            max_tokens_field: config.max_tokens_field,
        })
    }
}

impl Provider for OpenAiProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let body = request::body(&call.model, &call.input, self.max_tokens_field);
        exchange::post(&self.upstream, body, &call, ChunkDecoder::default())
    }
}

/// One `data:` chunk. Every field is optional: compatible servers differ in what they send
/// (vLLM ends with `"choices": null`, usage is absent unless the server supports it).
#[derive(Debug, Deserialize)]
struct Chunk {
    /// The model that answered, on every chunk (kept from the first).
    #[serde(default)]
    model: Option<Text>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<Usage>,
    /// Groq's place for usage, when it is not at the top level.
    #[serde(default)]
    x_groq: Option<XGroq>,
    #[serde(default)]
    error: Option<Box<RawValue>>,
}

#[derive(Debug, Deserialize)]
struct XGroq {
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
    /// Azure OpenAI's verdicts on this chunk, read only when the filter stopped the reply.
    #[serde(default)]
    content_filter_results: Option<Box<RawValue>>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<Content>,
    /// A refusal is what the model said instead: output text, not something to drop.
    #[serde(default)]
    refusal: Option<Text>,
    /// Reasoning, as vLLM and DeepSeek stream it.
    #[serde(default)]
    reasoning_content: Option<Text>,
    /// Reasoning, as OpenRouter-style servers (and newer vLLM) stream it.
    #[serde(default)]
    reasoning: Option<Text>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// JSON text; some servers (Ollama) send the arguments as an object instead, kept as its
    /// JSON text.
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// A tool call being streamed.
#[derive(Debug)]
struct ToolState {
    id: Option<String>,
    name: Option<String>,
    /// Whether `ToolCallStarted` went out (it needs the name).
    started: bool,
    /// Arguments that came before the name.
    held: String,
}

/// Turns chunks into SPI events.
#[derive(Debug, Default)]
pub(super) struct ChunkDecoder {
    finish: Option<FinishReason>,
    /// In order of first appearance: the position is the SPI tool-call index.
    tools: Vec<ToolState>,
    /// The provider's tool-call `index` -> position in `tools`: found at once however many
    /// calls a reply has, whatever numbers the provider uses.
    by_index: HashMap<u32, usize>,
    /// The model the first chunk named.
    model: Option<Text>,
    /// Whether the reply was a refusal (`delta.refusal`): it finishes as one.
    refused: bool,
    /// The bytes around the last chunk's text, to read the next like it at once.
    repeat: fast::Repeat,
}

impl Decoder for ChunkDecoder {
    type Framing = SseParser;

    fn event(
        &mut self,
        upstream: &Upstream,
        event: SseEvent<'_>,
        usage: &mut UsageTally,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.check_tools(upstream)?;
            return Ok(Some(
                self.finished(self.finish.unwrap_or(FinishReason::Other)),
            ));
        }
        // The text of a chunk like the last at once; the usual chunk by hand; any other by
        // serde (`fast.rs`).
        if let Some(text) = self.repeat.again(data) {
            if !text.is_empty() {
                out.push(ProviderEvent::TextDelta(text));
            }
            return Ok(None);
        }
        let chunk = match self.repeat.chunk(data) {
            Some(chunk) => chunk,
            None => serde_json::from_str(data).map_err(|e| {
                upstream.malformed_json("a chunk is not a chat completion chunk", &e, data)
            })?,
        };
        if let Some(error) = &chunk.error {
            return Err(upstream.stream_error(error.get().as_bytes()));
        }
        if self.model.is_none() {
            self.model = chunk.model.filter(|m| !m.is_empty());
        }
        if let Some(reported) = chunk.usage.or(chunk.x_groq.and_then(|x| x.usage)) {
            report(usage, &reported);
        }
        // Only one choice is requested; any other is not this call's reply.
        for choice in chunk
            .choices
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.index == 0)
        {
            if let Some(delta) = choice.delta {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason {
                let finish = finish_reason(&reason);
                if finish == FinishReason::ContentFilter
                    && let Some(note) = choice.content_filter_results.as_deref().and_then(filtered)
                {
                    out.push(ProviderEvent::Progress(note.into()));
                }
                self.finish = Some(finish);
            }
        }
        Ok(None)
    }

    fn finished_at_eof(&self, upstream: &Upstream) -> Result<Option<FinishReason>, ProviderError> {
        if self.finish.is_some() {
            // The same reply as with `[DONE]`, so the same check.
            self.check_tools(upstream)?;
        }
        Ok(self.finish.map(|f| self.finished(f)))
    }

    fn response_model(&self) -> Option<&Text> {
        self.model.as_ref()
    }
}

impl ChunkDecoder {
    /// How a reply that finished with `reason` ended: a refusal says so, even where the
    /// server calls its end a plain stop.
    fn finished(&self, reason: FinishReason) -> FinishReason {
        match reason {
            FinishReason::Stop | FinishReason::Other if self.refused => FinishReason::Refusal,
            other => other,
        }
    }

    /// At the reply's end every tool call must have been named: arguments held for a call
    /// that never got its name cannot be handed on, and dropping them would be silent.
    fn check_tools(&self, upstream: &Upstream) -> Result<(), ProviderError> {
        match self.tools.iter().find(|t| !t.started) {
            Some(unnamed) => {
                Err(upstream.protocol_error("a tool call never received its name", &unnamed.held))
            }
            None => Ok(()),
        }
    }

    /// The position in `tools` of the call a tool-call delta belongs to, opened if new.
    fn slot(&mut self, call: &ToolCallDelta, name: Option<&str>) -> usize {
        let id = call.id.as_deref().filter(|id| !id.is_empty());
        let existing = match call.index {
            Some(index) => self.by_index.get(&index).copied(),
            // Without an index (some compatible servers send each call whole, in a chunk of
            // its own), a delta continues the latest call unless it brings what only a new
            // call does: another id, or a name when that call already has one.
            None => self.tools.len().checked_sub(1).filter(|&last| {
                let tool = &self.tools[last];
                let new_id = matches!((id, tool.id.as_deref()), (Some(a), Some(b)) if a != b);
                let new_name = name.is_some() && tool.name.is_some();
                !(new_id || new_name)
            }),
        };
        existing.unwrap_or_else(|| {
            self.tools.push(ToolState {
                id: None,
                name: None,
                started: false,
                held: String::new(),
            });
            let position = self.tools.len() - 1;
            if let Some(index) = call.index {
                self.by_index.insert(index, position);
            }
            position
        })
    }

    fn delta(&mut self, delta: Delta, out: &mut Vec<ProviderEvent>) {
        // Reasoning comes before the answer it leads to; a server sends one of the two
        // names (some send both, the same text: then only the first).
        let said = |text: &Option<Text>| text.as_ref().is_some_and(|t| !t.is_empty());
        let reasoning = if said(&delta.reasoning_content) {
            delta.reasoning_content
        } else {
            delta.reasoning
        };
        if let Some(text) = reasoning
            && !text.is_empty()
        {
            out.push(ProviderEvent::Reasoning(ReasoningPiece::Text, text));
        }
        // The role-only preamble has empty content and emits nothing.
        match delta.content {
            Some(Content::Text(text)) if !text.is_empty() => {
                out.push(ProviderEvent::TextDelta(text))
            }
            Some(Content::Parts(parts)) => parts_out(parts, out),
            _ => {}
        }
        if let Some(text) = delta.refusal.filter(|t| !t.is_empty()) {
            // What the model said instead of an answer: kept as output, and the reply
            // finishes as a refusal.
            self.refused = true;
            out.push(ProviderEvent::TextDelta(text));
        }
        for mut call in delta.tool_calls.unwrap_or_default() {
            let (name, arguments) = match call.function.take() {
                Some(f) => (f.name.filter(|n| !n.is_empty()), f.arguments),
                None => (None, None),
            };
            let ordinal = self.slot(&call, name.as_deref());
            let tool = &mut self.tools[ordinal];
            let index = ordinal as u32;
            if tool.id.is_none() {
                tool.id = call.id.filter(|id| !id.is_empty());
            }
            if tool.name.is_none() {
                tool.name = name;
            }
            let arguments = match arguments.as_deref().map(RawValue::get) {
                None | Some("null") => Text::default(),
                // A JSON string: its text. One that does not decode is kept as sent.
                Some(text) if text.starts_with('"') => {
                    serde_json::from_str(text).unwrap_or_else(|_| Text::from(text))
                }
                Some(object) => Text::from(object),
            };
            if !tool.started {
                let Some(name) = tool.name.clone() else {
                    tool.held.push_str(&arguments);
                    continue;
                };
                tool.started = true;
                out.push(ProviderEvent::ToolCallStarted {
                    index,
                    // A server that sends no id gets one that is unique within the reply.
                    id: tool.id.clone().unwrap_or_else(|| format!("call_{index}")),
                    name,
                });
                let held = std::mem::take(&mut tool.held);
                if !held.is_empty() {
                    out.push(ProviderEvent::ToolCallArgumentsDelta {
                        index,
                        delta: held.into(),
                    });
                }
            }
            if !arguments.is_empty() {
                out.push(ProviderEvent::ToolCallArgumentsDelta {
                    index,
                    delta: arguments,
                });
            }
        }
    }
}

/// `prompt_tokens` counts cached tokens too; `cached_tokens` and `reasoning_tokens` are
/// parts of the prompt and completion counts, reported only where the server sends them.
fn report(usage: &mut UsageTally, reported: &Usage) {
    usage.report_openai(
        reported.prompt_tokens,
        reported.completion_tokens,
        reported
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
        reported
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens),
    );
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

#[cfg(test)]
mod tests;
