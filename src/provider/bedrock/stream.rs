//! A Converse stream's messages -> SPI events. Each event-stream message is one event, its
//! type in `:event-type` and its JSON in the payload:
//!
//! - `messageStart` (the role), `contentBlockStart` (a `toolUse` with its id and name: a tool
//!   call starting), `contentBlockDelta` (`text`; `toolUse.input`, a piece of the arguments;
//!   `reasoningContent` `text`, `signature` or `redactedContent`), `contentBlockStop`;
//! - `messageStop` with the stop reason, then `metadata` with the usage (`inputTokens`,
//!   `outputTokens`, `cacheReadInputTokens`, `cacheWriteInputTokens`): the reply is complete at
//!   `metadata`, or at the body's end once `messageStop` came, or (a body that stays open)
//!   a second after `messageStop` (`exchange.rs`, `MARKER_GRACE`);
//! - an exception (`:message-type` `exception`, its name in `:exception-type`, `{"message"}`
//!   in the payload) ends the call, classified by its name; so does an `error` message.
//!
//! Event types this adapter does not know are skipped, and so are fields (Bedrock pads events
//! with a random `p` field).

use std::collections::HashMap;

use serde::Deserialize;

use super::fast;
use crate::execution::{FinishReason, ReasoningPiece, Text, UsageUnit};
use crate::provider::eventstream::{EventStreamParser, Message};
use crate::provider::exchange::Decoder;
use crate::provider::http::Upstream;
use crate::provider::tally::UsageTally;
use crate::provider::{ProviderError, ProviderEvent};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Payload {
    #[serde(default)]
    content_block_index: Option<u32>,
    #[serde(default)]
    start: Option<Start>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Start {
    #[serde(default)]
    tool_use: Option<ToolUseStart>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolUseStart {
    tool_use_id: String,
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Delta {
    #[serde(default)]
    text: Option<Text>,
    #[serde(default)]
    tool_use: Option<ToolUseDelta>,
    #[serde(default)]
    reasoning_content: Option<ReasoningDelta>,
}

#[derive(Debug, Deserialize)]
struct ToolUseDelta {
    #[serde(default)]
    input: Option<Text>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReasoningDelta {
    #[serde(default)]
    text: Option<Text>,
    #[serde(default)]
    signature: Option<Text>,
    #[serde(default)]
    redacted_content: Option<Text>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_write_input_tokens: Option<u64>,
}

#[cfg(test)]
impl Payload {
    /// The block index and the text of a delta of text alone (what `fast` reads).
    pub(super) fn text_delta(&self) -> Option<(u32, &str)> {
        let delta = self.delta.as_ref()?;
        if delta.tool_use.is_some() || delta.reasoning_content.is_some() {
            return None;
        }
        Some((self.content_block_index?, delta.text.as_deref()?))
    }
}

/// A tool call's block: its SPI index, and whether any of its arguments came.
#[derive(Debug)]
struct ToolBlock {
    ordinal: u32,
    streamed: bool,
}

/// Turns Converse stream messages into SPI events.
#[derive(Debug, Default)]
pub(in crate::provider) struct ConverseDecoder {
    stop: Option<FinishReason>,
    /// Tool-call blocks by the provider's block index.
    tools: HashMap<u32, ToolBlock>,
    calls: u32,
}

impl Decoder for ConverseDecoder {
    type Framing = EventStreamParser;

    fn event(
        &mut self,
        upstream: &Upstream,
        message: Message<'_>,
        usage: &mut UsageTally,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError> {
        match message.message_type {
            "exception" => {
                return Err(upstream.stream_exception(message.exception_type, message.payload));
            }
            "error" => return Err(upstream.stream_exception(message.error_code, b"{}")),
            _ => {}
        }
        if message.event_type == "contentBlockDelta"
            && let Some((_, text)) = fast::text_delta(message.payload)
        {
            // A delta of text alone: its block's index is not needed.
            if !text.is_empty() {
                out.push(ProviderEvent::TextDelta(text));
            }
            return Ok(None);
        }
        let payload: Payload = serde_json::from_slice(message.payload).map_err(|e| {
            let text = String::from_utf8_lossy(message.payload);
            upstream.malformed_json("an event is not a Converse stream event", &e, &text)
        })?;
        let missing = |what: &str| {
            let kind = message.event_type;
            upstream.protocol_error(&format!("a `{kind}` event has no {what}"), "")
        };
        match message.event_type {
            "contentBlockStart" => {
                let index = payload
                    .content_block_index
                    .ok_or_else(|| missing("contentBlockIndex"))?;
                if let Some(tool) = payload.start.and_then(|s| s.tool_use) {
                    let ordinal = self.calls;
                    self.calls += 1;
                    out.push(ProviderEvent::ToolCallStarted {
                        index: ordinal,
                        id: tool.tool_use_id,
                        name: tool.name,
                    });
                    let block = ToolBlock {
                        ordinal,
                        streamed: false,
                    };
                    self.tools.insert(index, block);
                }
            }
            "contentBlockDelta" => {
                let index = payload
                    .content_block_index
                    .ok_or_else(|| missing("contentBlockIndex"))?;
                let delta = payload.delta.ok_or_else(|| missing("delta"))?;
                self.delta(upstream, index, delta, out)?;
            }
            "contentBlockStop" => {
                let index = payload.content_block_index;
                if let Some(tool) = index.and_then(|i| self.tools.get(&i))
                    && !tool.streamed
                {
                    // A call without arguments still has valid ones.
                    out.push(ProviderEvent::ToolCallArgumentsDelta {
                        index: tool.ordinal,
                        delta: "{}".into(),
                    });
                }
            }
            "messageStop" => {
                let reason = payload.stop_reason.ok_or_else(|| missing("stopReason"))?;
                self.stop = Some(stop_reason(&reason));
            }
            "metadata" => {
                if let Some(reported) = &payload.usage {
                    report(upstream, usage, reported)?;
                }
                // The usage comes last: the reply is whole once the stop reason came.
                return Ok(self.stop);
            }
            // `messageStart`, and event types this adapter does not know.
            _ => {}
        }
        Ok(None)
    }

    fn finished_at_eof(&self, _: &Upstream) -> Result<Option<FinishReason>, ProviderError> {
        Ok(self.stop)
    }

    fn marked(&self) -> Option<FinishReason> {
        self.stop
    }
}

impl ConverseDecoder {
    /// A `contentBlockDelta` of block `index`.
    fn delta(
        &mut self,
        upstream: &Upstream,
        index: u32,
        delta: Delta,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
            out.push(ProviderEvent::TextDelta(text));
        }
        if let Some(input) = delta.tool_use.and_then(|t| t.input) {
            let Some(tool) = self.tools.get_mut(&index) else {
                let what = "tool input arrived for a block that is not a tool call";
                return Err(upstream.protocol_error(what, ""));
            };
            if !input.is_empty() {
                tool.streamed = true;
                out.push(ProviderEvent::ToolCallArgumentsDelta {
                    index: tool.ordinal,
                    delta: input,
                });
            }
        }
        if let Some(reasoning) = delta.reasoning_content {
            let pieces = [
                (ReasoningPiece::Text, reasoning.text),
                (ReasoningPiece::Signature, reasoning.signature),
                (ReasoningPiece::Redacted, reasoning.redacted_content),
            ];
            for (piece, value) in pieces {
                if let Some(value) = value.filter(|v| !v.is_empty()) {
                    out.push(ProviderEvent::Reasoning(piece, value));
                }
            }
        }
        Ok(())
    }
}

/// The runtime's units from Converse's: like Anthropic's, `inputTokens` leaves out cached
/// tokens, and the runtime's `input_tokens` counts every prompt token.
fn report(
    upstream: &Upstream,
    usage: &mut UsageTally,
    reported: &Usage,
) -> Result<(), ProviderError> {
    let parts = [
        reported.input_tokens,
        reported.cache_read_input_tokens,
        reported.cache_write_input_tokens,
    ];
    if parts.iter().any(Option::is_some) {
        let total = parts
            .into_iter()
            .flatten()
            .try_fold(0u64, u64::checked_add)
            .ok_or_else(|| upstream.protocol_error("the reported token counts overflow", ""))?;
        usage.report(UsageUnit::INPUT_TOKENS, total);
    }
    if let Some(read) = reported.cache_read_input_tokens {
        usage.report(UsageUnit::CACHED_INPUT_TOKENS, read);
    }
    if let Some(write) = reported.cache_write_input_tokens {
        usage.report(UsageUnit::CACHE_WRITE_INPUT_TOKENS, write);
    }
    if let Some(output) = reported.output_tokens {
        usage.report(UsageUnit::OUTPUT_TOKENS, output);
    }
    Ok(())
}

fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "guardrail_intervened" | "content_filtered" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}
