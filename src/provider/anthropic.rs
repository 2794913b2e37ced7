//! The `anthropic` adapter: Anthropic messages, streaming. Events: `message_start` (input
//! usage; no output), `content_block_start` (a text block, a `tool_use` block = a tool call
//! starting, a `thinking` block, a `redacted_thinking` block = reasoning), `content_block_delta`
//! (`text_delta`, `input_json_delta`, `thinking_delta`, `signature_delta`),
//! `content_block_stop`, `message_delta` (stop reason, cumulative output usage),
//! `message_stop` (the end), `ping` and `error`.
//!
//! Server tools (web search, web fetch, code execution) run at Anthropic within the reply:
//! their `server_tool_use` blocks (whose input streams as `input_json_delta`, like a tool's)
//! and their `*_tool_result` blocks are not the caller's tool calls, so they are kept as
//! progress notes (evidence), and `usage.server_tool_use` counts (`web_search_requests`, ...)
//! are usage facts in units of those names. Citations deltas carry nothing for the reply's
//! text. Block kinds it does not know are skipped with a progress note, and event types it
//! does not know are skipped, as the protocol's versioning policy asks of clients.

mod fast;
pub(super) mod request;
mod server_tools;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use http::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;

use server_tools::{MAX_UNIT_BYTES, NOTE_INPUT_BYTES, report_server_tools};

use super::exchange::{self, Decoder};
use super::http::{HttpClients, Upstream, secret_header, truncate as clip};
use super::sse::{SseEvent, SseParser};
use super::tally::UsageTally;
use super::{
    Provider, ProviderCall, ProviderError, ProviderEvent, ProviderInitError, ProviderStream,
};
use crate::config::AnthropicConfig;
use crate::execution::{FinishReason, ReasoningPiece, Text, UsageUnit};

/// An Anthropic messages endpoint.
#[derive(Debug)]
pub(super) struct AnthropicProvider {
    upstream: Upstream,
    default_max_tokens: u32,
}

impl AnthropicProvider {
    /// The adapter of provider `name`, with a client from `clients` keeping up to
    /// `max_concurrency` idle connections.
    pub(super) fn new(
        name: Arc<str>,
        config: &AnthropicConfig,
        clients: &mut HttpClients,
        max_concurrency: u32,
    ) -> Result<Self, ProviderInitError> {
        let client = clients.client(&name, &config.endpoint, "/messages", max_concurrency)?;
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", secret_header(&name, config.api_key.expose())?);
        let version = HeaderValue::from_str(&config.version).map_err(|_| {
            ProviderInitError::new(&name, "anthropic_version: not a valid header value")
        })?;
        headers.insert("anthropic-version", version);
        Ok(Self {
            upstream: Upstream::new(
                name,
                "anthropic",
                client,
                config.endpoint.timeouts,
                headers,
                Some(config.api_key.clone()),
            ),
            default_max_tokens: config.default_max_output_tokens,
        })
    }
}

impl Provider for AnthropicProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let body = request::body(&call.model, &call.input, self.default_max_tokens);
        exchange::post(&self.upstream, body, &call, EventDecoder::default())
    }
}

/// One event's `data`: every field any event type has, each optional, read in one pass with
/// unknown fields skipped. (An internally tagged enum would first buffer the whole object
/// into a tree to find its `type`: a tree of whatever size the upstream sent.)
#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    message: Option<MessageStart>,
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    content_block: Option<Block>,
    /// A content block's delta (`content_block_delta`) or the message's (`message_delta`).
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    usage: Option<Usage>,
    /// The error object of an `error` event, as its JSON text.
    #[serde(default)]
    error: Option<Box<RawValue>>,
}

#[derive(Debug, Deserialize)]
struct MessageStart {
    #[serde(default)]
    model: Option<Text>,
    #[serde(default)]
    usage: Option<Usage>,
}

/// A content block as `content_block_start` opens it.
#[derive(Debug, Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<Text>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    /// A tool call's arguments when none are streamed, as their JSON text.
    #[serde(default)]
    input: Option<Box<RawValue>>,
    /// A thinking block's text, when it starts with some.
    #[serde(default)]
    thinking: Option<Text>,
    /// A redacted thinking block's opaque data.
    #[serde(default)]
    data: Option<Text>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    /// `text_delta` or `input_json_delta` in a block's delta; absent in the message's.
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<Text>,
    #[serde(default)]
    partial_json: Option<Text>,
    /// `thinking_delta`: a piece of reasoning.
    #[serde(default)]
    thinking: Option<Text>,
    /// `signature_delta`: the signature that closes a thinking block.
    #[serde(default)]
    signature: Option<Text>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    /// Server tool requests by kind, e.g. `{"web_search_requests": 1}`.
    #[serde(default)]
    server_tool_use: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What a content block is, by its index.
#[derive(Debug)]
enum BlockState {
    Text,
    Tool {
        /// The SPI tool-call index.
        ordinal: u32,
        /// Whether any argument text was streamed.
        streamed: bool,
        /// The `input` of `content_block_start` (its JSON text): the arguments when none are
        /// streamed.
        initial: Option<Box<RawValue>>,
    },
    /// A tool Anthropic runs itself: its input, gathered for the progress note.
    ServerTool {
        name: String,
        input: String,
    },
    Other,
}

/// Turns events into SPI events.
#[derive(Debug, Default)]
pub(super) struct EventDecoder {
    stop: Option<FinishReason>,
    /// By the provider's block index: found at once, whatever numbers it uses.
    blocks: HashMap<u32, BlockState>,
    tools: u32,
    /// Uncached, cache-read and cache-write prompt tokens as last reported.
    input: [Option<u64>; 3],
    /// The model `message_start` named.
    model: Option<Text>,
}

impl EventDecoder {
    /// A `content_block_start`: what the block is, and what it carries already.
    fn block_start(
        &mut self,
        block: Block,
        missing: &dyn Fn(&str) -> ProviderError,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<BlockState, ProviderError> {
        Ok(match block.kind.as_str() {
            "text" => {
                if let Some(text) = block.text.filter(|t| !t.is_empty()) {
                    out.push(ProviderEvent::TextDelta(text));
                }
                BlockState::Text
            }
            "thinking" => {
                if let Some(text) = block.thinking.filter(|t| !t.is_empty()) {
                    out.push(ProviderEvent::Reasoning(ReasoningPiece::Text, text));
                }
                BlockState::Other
            }
            "redacted_thinking" => {
                let data = block.data.ok_or_else(|| missing("redacted data"))?;
                out.push(ProviderEvent::Reasoning(ReasoningPiece::Redacted, data));
                BlockState::Other
            }
            "server_tool_use" | "mcp_tool_use" => {
                let name = block.name.unwrap_or_default();
                let input = block
                    .input
                    .map(|i| i.get().to_owned())
                    .filter(|i| i != "{}")
                    .unwrap_or_default();
                BlockState::ServerTool { name, input }
            }
            kind if kind.ends_with("_tool_result") => {
                let note = format!("server tool result: {}", clip(kind, MAX_UNIT_BYTES));
                out.push(ProviderEvent::Progress(note.into()));
                BlockState::Other
            }
            "tool_use" => {
                let (Some(id), Some(name)) = (block.id, block.name) else {
                    return Err(missing("tool call id and name"));
                };
                let ordinal = self.tools;
                self.tools += 1;
                out.push(ProviderEvent::ToolCallStarted {
                    index: ordinal,
                    id,
                    name,
                });
                BlockState::Tool {
                    ordinal,
                    streamed: false,
                    initial: block.input,
                }
            }
            other => {
                let note = format!(
                    "skipped a content block of a kind this adapter does not know: {}",
                    clip(other, MAX_UNIT_BYTES)
                );
                out.push(ProviderEvent::Progress(note.into()));
                BlockState::Other
            }
        })
    }

    /// A `content_block_delta` of block `index`.
    fn block_delta(
        &mut self,
        upstream: &Upstream,
        data: &str,
        index: u32,
        delta: Delta,
        missing: &dyn Fn(&str) -> ProviderError,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        match (delta.kind.as_deref(), self.block(index)) {
            (Some("text_delta"), _) => {
                let text = delta.text.ok_or_else(|| missing("text"))?;
                if !text.is_empty() {
                    out.push(ProviderEvent::TextDelta(text));
                }
            }
            (
                Some("input_json_delta"),
                Some(BlockState::Tool {
                    ordinal, streamed, ..
                }),
            ) => {
                let partial_json = delta.partial_json.ok_or_else(|| missing("partial_json"))?;
                if !partial_json.is_empty() {
                    *streamed = true;
                    out.push(ProviderEvent::ToolCallArgumentsDelta {
                        index: *ordinal,
                        delta: partial_json,
                    });
                }
            }
            (Some("input_json_delta"), Some(BlockState::ServerTool { input, .. })) => {
                let partial_json = delta.partial_json.ok_or_else(|| missing("partial_json"))?;
                // Only what the note quotes is kept.
                let room = NOTE_INPUT_BYTES.saturating_sub(input.len());
                input.push_str(clip(&partial_json, room));
            }
            (Some("input_json_delta"), _) => {
                let what = "tool input arrived for a block that is not a tool call";
                return Err(upstream.protocol_error(what, data));
            }
            (Some("thinking_delta"), _) => {
                let text = delta.thinking.ok_or_else(|| missing("thinking"))?;
                out.push(ProviderEvent::Reasoning(ReasoningPiece::Text, text));
            }
            (Some("signature_delta"), _) => {
                let signature = delta.signature.ok_or_else(|| missing("signature"))?;
                out.push(ProviderEvent::Reasoning(
                    ReasoningPiece::Signature,
                    signature,
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

impl Decoder for EventDecoder {
    type Framing = SseParser;

    fn event(
        &mut self,
        upstream: &Upstream,
        event: SseEvent<'_>,
        usage: &mut UsageTally,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError> {
        if let Some((_, text)) = fast::text_delta(event.data) {
            if !text.is_empty() {
                out.push(ProviderEvent::TextDelta(text));
            }
            return Ok(None);
        }
        let parsed = fast::event(event.data).map_or_else(|| serde_json::from_str(event.data), Ok);
        let parsed: Event = parsed.map_err(|e| {
            upstream.malformed_json("an event is not a messages stream event", &e, event.data)
        })?;
        let missing = |what: &str| {
            upstream.protocol_error(&format!("a `{}` event has no {what}", parsed.kind), "")
        };
        match &*parsed.kind {
            "message_start" => {
                // Its `output_tokens` is a placeholder; `message_delta` brings the count.
                // The input count goes to the tally, not out as an event yet: `message_delta`
                // is cumulative and may restate it, which would report it twice. A call cut
                // before the end still hands it over (`CallStream::unreported_usage`).
                if let Some(reported) = parsed.message.as_ref().and_then(|m| m.usage.as_ref()) {
                    self.report_input(upstream, reported, usage)?;
                }
                if let Some(message) = parsed.message {
                    self.model = message.model.filter(|m| !m.is_empty());
                }
            }
            "content_block_start" => {
                let index = parsed.index.ok_or_else(|| missing("index"))?;
                let block = parsed
                    .content_block
                    .ok_or_else(|| missing("content_block"))?;
                let state = self.block_start(block, &missing, out)?;
                self.blocks.insert(index, state);
            }
            "content_block_delta" => {
                let index = parsed.index.ok_or_else(|| missing("index"))?;
                let delta = parsed.delta.ok_or_else(|| missing("delta"))?;
                self.block_delta(upstream, event.data, index, delta, &missing, out)?;
            }
            "content_block_stop" => {
                let index = parsed.index.ok_or_else(|| missing("index"))?;
                match self.block(index) {
                    Some(BlockState::Tool {
                        ordinal,
                        streamed: false,
                        initial: Some(input),
                    }) => {
                        // A call whose arguments were all in `content_block_start` (usually
                        // `{}`).
                        out.push(ProviderEvent::ToolCallArgumentsDelta {
                            index: *ordinal,
                            delta: input.get().into(),
                        });
                    }
                    Some(BlockState::ServerTool { name, input }) => {
                        let mut note =
                            format!("server tool `{}` called", clip(name, MAX_UNIT_BYTES));
                        if !input.is_empty() {
                            note.push_str(": ");
                            note.push_str(clip(input, NOTE_INPUT_BYTES));
                        }
                        out.push(ProviderEvent::Progress(note.into()));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = parsed.delta.and_then(|d| d.stop_reason) {
                    self.stop = Some(stop_reason(&reason));
                }
                if let Some(reported) = &parsed.usage {
                    if let Some(output) = reported.output_tokens {
                        usage.report(UsageUnit::OUTPUT_TOKENS, output);
                    }
                    self.report_input(upstream, reported, usage)?;
                    report_server_tools(reported, usage);
                }
            }
            "message_stop" => return Ok(Some(self.stop.unwrap_or(FinishReason::Other))),
            "error" => {
                let error = parsed.error.as_deref().map_or("", RawValue::get);
                return Err(upstream.stream_error(error.as_bytes()));
            }
            // `ping`, and event types this adapter does not know, carry nothing for it.
            _ => {}
        }
        Ok(None)
    }

    fn finished_at_eof(&self, _: &Upstream) -> Result<Option<FinishReason>, ProviderError> {
        Ok(self.stop)
    }

    fn response_model(&self) -> Option<&Text> {
        self.model.as_ref()
    }
}

impl EventDecoder {
    fn block(&mut self, index: u32) -> Option<&mut BlockState> {
        self.blocks.get_mut(&index)
    }

    /// Anthropic's `input_tokens` leaves out cached tokens; the runtime's `input_tokens`
    /// counts every prompt token, with `cached_input_tokens` and `cache_write_input_tokens`
    /// as parts of it (the OpenAI convention), so the units mean one thing across providers.
    fn report_input(
        &mut self,
        upstream: &Upstream,
        reported: &Usage,
        usage: &mut UsageTally,
    ) -> Result<(), ProviderError> {
        let fields = [
            reported.input_tokens,
            reported.cache_read_input_tokens,
            reported.cache_creation_input_tokens,
        ];
        for (slot, value) in self.input.iter_mut().zip(fields) {
            if value.is_some() {
                *slot = value;
            }
        }
        let [uncached, read, write] = self.input;
        if uncached.is_none() && read.is_none() && write.is_none() {
            return Ok(());
        }
        // Counts from upstream are checked: a sum past u64 is a malformed reply, not a
        // number that wraps.
        let total = [uncached, read, write]
            .into_iter()
            .flatten()
            .try_fold(0u64, u64::checked_add)
            .ok_or_else(|| {
                upstream.protocol_error("the reported prompt token counts overflow", "")
            })?;
        usage.report(UsageUnit::INPUT_TOKENS, total);
        if let Some(read) = read {
            usage.report(UsageUnit::CACHED_INPUT_TOKENS, read);
        }
        if let Some(write) = write {
            usage.report(UsageUnit::CACHE_WRITE_INPUT_TOKENS, write);
        }
        Ok(())
    }
}

fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

#[cfg(test)]
mod tests;
