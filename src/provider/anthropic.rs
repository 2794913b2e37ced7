//! The `anthropic` adapter: Anthropic messages, streaming. Events: `message_start` (input
//! usage; no output), `content_block_start` (a text block, or a `tool_use` block = a tool call
//! starting), `content_block_delta` (`text_delta`, `input_json_delta`), `content_block_stop`,
//! `message_delta` (stop reason, cumulative output usage), `message_stop` (the end), `ping`
//! and `error`. Event types and block kinds it does not know (thinking, citations) are
//! skipped, as the protocol's versioning policy asks of clients.

mod request;

use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::Value;

use super::exchange::{self, Decoder};
use super::http::{Upstream, endpoint, secret_header};
use super::sse::SseEvent;
use super::tally::UsageTally;
use super::{
    Provider, ProviderCall, ProviderError, ProviderEvent, ProviderInitError, ProviderStream,
};
use crate::config::AnthropicConfig;
use crate::execution::{FinishReason, UsageUnit};

/// Prompt tokens written to the provider's cache by this call (a part of `input_tokens`,
/// priced differently by Anthropic, hence its own unit).
pub const CACHE_WRITE_INPUT_TOKENS: &str = "cache_write_input_tokens";

/// An Anthropic messages endpoint.
#[derive(Debug)]
pub struct AnthropicProvider {
    upstream: Upstream,
    default_max_tokens: u32,
}

impl AnthropicProvider {
    /// The adapter of provider `name`, sending through `client`.
    pub fn new(
        name: Arc<str>,
        config: &AnthropicConfig,
        client: reqwest::Client,
    ) -> Result<Self, ProviderInitError> {
        let url = endpoint(&name, &config.endpoint.base_url, "/messages")?;
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", secret_header(&name, config.api_key.expose())?);
        let version = HeaderValue::from_str(&config.version).map_err(|_| {
            ProviderInitError::new(&name, "anthropic_version: not a valid header value")
        })?;
        headers.insert("anthropic-version", version);
        Ok(Self {
            upstream: Upstream {
                name,
                adapter: "anthropic",
                client,
                timeouts: config.endpoint.timeouts,
                secret: Some(config.api_key.clone()),
                url,
                headers,
            },
            default_max_tokens: config.default_max_output_tokens,
        })
    }
}

impl Provider for AnthropicProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let body = request::body(&call.model, &call.input, self.default_max_tokens);
        exchange::post(&self.upstream, body, call.deadline, EventDecoder::default())
    }
}

/// One event's `data`, by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: u32,
        content_block: Block,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u32,
    },
    MessageDelta {
        #[serde(default)]
        delta: Option<MessageDeltaBody>,
        #[serde(default)]
        usage: Option<Usage>,
    },
    MessageStop,
    Ping,
    Error {
        error: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageDeltaBody {
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
        /// The `input` of `content_block_start`: the arguments when none are streamed.
        initial: Option<Value>,
    },
    Other,
}

/// Turns events into SPI events.
#[derive(Debug, Default)]
struct EventDecoder {
    stop: Option<FinishReason>,
    blocks: Vec<(u32, BlockState)>,
    tools: u32,
    /// Uncached, cache-read and cache-write prompt tokens as last reported.
    input: [Option<u64>; 3],
}

impl Decoder for EventDecoder {
    fn event(
        &mut self,
        upstream: &Upstream,
        event: SseEvent,
        usage: &mut UsageTally,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError> {
        let parsed: Event = serde_json::from_str(&event.data).map_err(|e| {
            upstream.malformed_json("an event is not a messages stream event", &e, &event.data)
        })?;
        match parsed {
            Event::MessageStart { message } => {
                // Its `output_tokens` is a placeholder; `message_delta` brings the count.
                // The input count goes to the tally, not out as an event yet: `message_delta`
                // is cumulative and may restate it, which would report it twice. A call cut
                // before the end still hands it over (`CallStream::unreported_usage`).
                if let Some(reported) = message.usage {
                    self.report_input(&reported, usage);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => {
                let state = match content_block {
                    Block::Text { text } => {
                        if !text.is_empty() {
                            out.push(ProviderEvent::TextDelta(text));
                        }
                        BlockState::Text
                    }
                    Block::ToolUse { id, name, input } => {
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
                            initial: input,
                        }
                    }
                    Block::Other => BlockState::Other,
                };
                self.blocks.push((index, state));
            }
            Event::ContentBlockDelta { index, delta } => match (delta, self.block(index)) {
                (BlockDelta::TextDelta { text }, _) => {
                    if !text.is_empty() {
                        out.push(ProviderEvent::TextDelta(text));
                    }
                }
                (
                    BlockDelta::InputJsonDelta { partial_json },
                    Some(BlockState::Tool {
                        ordinal, streamed, ..
                    }),
                ) => {
                    if !partial_json.is_empty() {
                        *streamed = true;
                        out.push(ProviderEvent::ToolCallArgumentsDelta {
                            index: *ordinal,
                            delta: partial_json,
                        });
                    }
                }
                (BlockDelta::InputJsonDelta { .. }, _) => {
                    let what = "tool input arrived for a block that is not a tool call";
                    return Err(upstream.protocol_error(what, &event.data));
                }
                (BlockDelta::Other, _) => {}
            },
            Event::ContentBlockStop { index } => {
                if let Some(BlockState::Tool {
                    ordinal,
                    streamed: false,
                    initial: Some(input),
                }) = self.block(index)
                {
                    // A call whose arguments were all in `content_block_start` (usually `{}`).
                    out.push(ProviderEvent::ToolCallArgumentsDelta {
                        index: *ordinal,
                        delta: input.to_string(),
                    });
                }
            }
            Event::MessageDelta {
                delta,
                usage: reported,
            } => {
                if let Some(reason) = delta.and_then(|d| d.stop_reason) {
                    self.stop = Some(stop_reason(&reason));
                }
                if let Some(reported) = reported {
                    if let Some(output) = reported.output_tokens {
                        usage.report(UsageUnit::OUTPUT_TOKENS, output);
                    }
                    self.report_input(&reported, usage);
                }
            }
            Event::MessageStop => return Ok(Some(self.stop.unwrap_or(FinishReason::Other))),
            Event::Error { error } => {
                return Err(upstream.stream_error(&error));
            }
            Event::Ping | Event::Unknown => {}
        }
        Ok(None)
    }

    fn finished_at_eof(&self, _: &Upstream) -> Result<Option<FinishReason>, ProviderError> {
        Ok(self.stop)
    }
}

impl EventDecoder {
    fn block(&mut self, index: u32) -> Option<&mut BlockState> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, state)| state)
    }

    /// Anthropic's `input_tokens` leaves out cached tokens; the runtime's `input_tokens`
    /// counts every prompt token, with `cached_input_tokens` and `cache_write_input_tokens`
    /// as parts of it (the OpenAI convention), so the units mean one thing across providers.
    fn report_input(&mut self, reported: &Usage, usage: &mut UsageTally) {
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
            return;
        }
        let total = [uncached, read, write].into_iter().flatten().sum();
        usage.report(UsageUnit::INPUT_TOKENS, total);
        if let Some(read) = read {
            usage.report(UsageUnit::CACHED_INPUT_TOKENS, read);
        }
        if let Some(write) = write {
            usage.report(UsageUnit::new(CACHE_WRITE_INPUT_TOKENS), write);
        }
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
