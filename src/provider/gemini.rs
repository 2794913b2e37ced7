//! The `gemini` adapter: Google's Gemini API, streaming (`POST
//! {base_url}/models/{model}:streamGenerateContent?alt=sse`, the key in `x-goog-api-key`).
//! Each event is a whole `GenerateContentResponse`:
//!
//! - a candidate's text parts are output; parts with `thought: true` are reasoning, and a
//!   part's `thoughtSignature` closes the reasoning as its signature, to go back on the next
//!   turn's first part;
//! - `functionCall` parts (whole, never streamed) are tool calls, their `args` the arguments;
//! - `usageMetadata` (cumulative) gives input tokens (`promptTokenCount`, cached ones
//!   included: `cachedContentTokenCount`), output tokens (`candidatesTokenCount` plus
//!   `thoughtsTokenCount`) and reasoning tokens (`thoughtsTokenCount`);
//! - `finishReason` ends the reply when the body ends (`STOP`, `MAX_TOKENS`: `length`,
//!   `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`: `content_filter`); a
//!   body that ends without one is interrupted;
//! - `promptFeedback.blockReason` is a refusal of the prompt: `content_filtered`;
//! - an `error` object in the stream is classified like an error body.

mod fast;
pub(super) mod request;

use std::sync::Arc;

use http::header::HeaderMap;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::exchange::{self, Decoder};
use super::http::{HttpClients, Upstream, secret_header};
use super::sse::{SseEvent, SseParser};
use super::tally::UsageTally;
use super::{
    Provider, ProviderCall, ProviderError, ProviderEvent, ProviderInitError, ProviderStream, unsent,
};
use crate::config::{GeminiConfig, ModelConfig};
use crate::execution::{AttemptCode, FinishReason, NameMap, ReasoningPiece, Text, UsageUnit};

/// A Gemini API endpoint: one client per model, whose name is in the URL.
#[derive(Debug)]
pub(super) struct GeminiProvider {
    upstreams: NameMap<Upstream>,
}

impl GeminiProvider {
    /// The adapter of provider `name` serving `models`, with clients from `clients` keeping up
    /// to `max_concurrency` idle connections each.
    pub(super) fn new(
        name: Arc<str>,
        config: &GeminiConfig,
        models: &[ModelConfig],
        clients: &mut HttpClients,
        max_concurrency: u32,
    ) -> Result<Self, ProviderInitError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-goog-api-key",
            secret_header(&name, config.api_key.expose())?,
        );
        let mut upstreams = NameMap::default();
        for model in models {
            let path = format!("/models/{}:streamGenerateContent?alt=sse", model.name);
            let client = clients.client(&name, &config.endpoint, &path, max_concurrency)?;
            upstreams.insert(
                model.name.clone(),
                Upstream::new(
                    name.clone(),
                    "gemini",
                    client,
                    config.endpoint.timeouts,
                    headers.clone(),
                    Some(config.api_key.clone()),
                ),
            );
        }
        Ok(Self { upstreams })
    }
}

impl Provider for GeminiProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let Some(upstream) = self.upstreams.get(&*call.model) else {
            let error = ProviderError::rejected(
                AttemptCode::ModelNotFound,
                format!("the gemini provider has no model `{}`", call.model),
            );
            return unsent(error);
        };
        let body = request::body(&call.input);
        exchange::post(upstream, body, &call, ChunkDecoder::default())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Option<Vec<Candidate>>,
    #[serde(default)]
    usage_metadata: Option<Usage>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    model_version: Option<Text>,
    #[serde(default)]
    error: Option<Box<RawValue>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Content {
    #[serde(default)]
    parts: Option<Vec<Part>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<Text>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    thought_signature: Option<Text>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
}

#[derive(Debug, Deserialize)]
struct FunctionCall {
    name: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    args: Option<Box<RawValue>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// Turns response chunks into SPI events.
#[derive(Debug, Default)]
pub(super) struct ChunkDecoder {
    finish: Option<FinishReason>,
    calls: u32,
    model: Option<Text>,
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
        if let Some(chunk) = fast::text_chunk(event.data) {
            self.heard(chunk.model, chunk.usage.as_ref(), usage);
            if !chunk.text.is_empty() {
                out.push(ProviderEvent::TextDelta(chunk.text));
            }
            return Ok(None);
        }
        let chunk: Chunk = serde_json::from_str(event.data).map_err(|e| {
            upstream.malformed_json("an event is not a GenerateContentResponse", &e, event.data)
        })?;
        if let Some(error) = &chunk.error {
            return Err(upstream.stream_error(error.get().as_bytes()));
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            let reason: String = reason.chars().take(64).collect();
            return Err(ProviderError::rejected(
                AttemptCode::ContentFiltered,
                format!("{} blocked the prompt ({reason})", upstream.label()),
            ));
        }
        self.heard(chunk.model_version, chunk.usage_metadata.as_ref(), usage);
        // Only one candidate is asked for; another is not this call's reply.
        for candidate in chunk
            .candidates
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.index == 0)
        {
            for part in candidate.content.and_then(|c| c.parts).unwrap_or_default() {
                self.part(part, out);
            }
            if let Some(reason) = candidate.finish_reason {
                self.finish = Some(finish_reason(&reason, self.calls > 0));
            }
        }
        // The reply ends with the body, after the chunk with the finish reason (usage may
        // follow it in a chunk of its own).
        Ok(None)
    }

    fn finished_at_eof(&self, _: &Upstream) -> Result<Option<FinishReason>, ProviderError> {
        Ok(self.finish)
    }

    fn marked(&self) -> Option<FinishReason> {
        self.finish
    }

    fn response_model(&self) -> Option<&Text> {
        self.model.as_ref()
    }
}

impl ChunkDecoder {
    /// What any chunk may say besides its parts: the model version (the first one kept) and
    /// the usage so far.
    fn heard(&mut self, model: Option<Text>, reported: Option<&Usage>, usage: &mut UsageTally) {
        if self.model.is_none() {
            self.model = model.filter(|m| !m.is_empty());
        }
        if let Some(reported) = reported {
            report(usage, reported);
        }
    }

    fn part(&mut self, part: Part, out: &mut Vec<ProviderEvent>) {
        if let Some(text) = part.text.filter(|t| !t.is_empty()) {
            out.push(if part.thought {
                ProviderEvent::Reasoning(ReasoningPiece::Text, text)
            } else {
                ProviderEvent::TextDelta(text)
            });
        }
        if let Some(call) = part.function_call {
            let index = self.calls;
            self.calls += 1;
            out.push(ProviderEvent::ToolCallStarted {
                index,
                id: call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{index}")),
                name: call.name,
            });
            let args = call.args.as_deref().map_or("{}", RawValue::get);
            out.push(ProviderEvent::ToolCallArgumentsDelta {
                index,
                delta: args.into(),
            });
        }
        if let Some(signature) = part.thought_signature.filter(|s| !s.is_empty()) {
            out.push(ProviderEvent::Reasoning(
                ReasoningPiece::Signature,
                signature,
            ));
        }
    }
}

/// The runtime's units from Gemini's: output counts the thinking too, as OpenAI's does.
fn report(usage: &mut UsageTally, reported: &Usage) {
    if let Some(input) = reported.prompt_token_count {
        usage.report(UsageUnit::INPUT_TOKENS, input);
    }
    if let Some(cached) = reported.cached_content_token_count {
        usage.report(UsageUnit::CACHED_INPUT_TOKENS, cached);
    }
    // Thinking that used the whole budget comes with no `candidatesTokenCount` at all:
    // the output billed is still the thinking.
    let thoughts = reported.thoughts_token_count;
    let candidates = reported.candidates_token_count;
    if candidates.is_some() || thoughts.is_some() {
        let output = candidates
            .unwrap_or(0)
            .saturating_add(thoughts.unwrap_or(0));
        usage.report(UsageUnit::OUTPUT_TOKENS, output);
    }
    if let Some(thoughts) = thoughts {
        usage.report(UsageUnit::REASONING_TOKENS, thoughts);
    }
}

fn finish_reason(reason: &str, called_tools: bool) -> FinishReason {
    match reason {
        "STOP" if called_tools => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        _ => FinishReason::Other,
    }
}
