//! The `openai-responses` adapter: OpenAI's Responses API, streaming (`POST
//! {base_url}/responses` with `stream: true`). Events read:
//!
//! - `response.created`, `response.in_progress`: preamble (the model's name); no output.
//! - `response.output_item.added`: a `function_call` item is a tool call starting (its
//!   `call_id` and name); message and reasoning items carry nothing yet.
//! - `response.output_text.delta`: output text. `response.refusal.delta`: output text too,
//!   and the reply finishes as a `refusal`.
//! - `response.function_call_arguments.delta`: a piece of a tool call's arguments.
//! - `response.reasoning_summary_text.delta`, `response.reasoning_text.delta`: reasoning.
//! - `response.output_item.done`: a tool call whose arguments did not stream gets them whole;
//!   a reasoning item's `encrypted_content` closes its block as the signature
//!   `ID:ENCRYPTED_CONTENT`, which goes upstream again from `ContentPart.reasoning`.
//! - `response.completed`: usage, and the end (`tool_calls` if the reply called tools).
//!   `response.incomplete`: usage, and the end its reason says (`max_output_tokens` is
//!   `length`, `content_filter` is `content_filter`).
//! - `response.failed` and `error`: classified by their code, like an error body.
//!
//! Every other event type (content parts, `*.done` events, ones added later) carries nothing
//! for the reply and is skipped.

mod fast;
pub(super) mod request;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use http::header::{AUTHORIZATION, HeaderMap};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::exchange::{self, Decoder};
use super::http::{HttpClients, Upstream, bearer_header};
use super::sse::{SseEvent, SseParser};
use super::tally::UsageTally;
use super::{
    Provider, ProviderCall, ProviderError, ProviderEvent, ProviderInitError, ProviderStream,
};
use crate::config::OpenAiResponsesConfig;
use crate::execution::{FinishReason, ReasoningPiece, Text};

/// An OpenAI Responses API endpoint.
#[derive(Debug)]
pub(super) struct ResponsesProvider {
    upstream: Upstream,
}

impl ResponsesProvider {
    /// The adapter of provider `name`, with a client from `clients` keeping up to
    /// `max_concurrency` idle connections.
    pub(super) fn new(
        name: Arc<str>,
        config: &OpenAiResponsesConfig,
        clients: &mut HttpClients,
        max_concurrency: u32,
    ) -> Result<Self, ProviderInitError> {
        let client = clients.client(&name, &config.endpoint, "/responses", max_concurrency)?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            headers.insert(AUTHORIZATION, bearer_header(&name, key)?);
        }
        Ok(Self {
            upstream: Upstream::new(
                name,
                "openai-responses",
                client,
                config.endpoint.timeouts,
                headers,
                config.api_key.clone(),
            ),
        })
    }
}

impl Provider for ResponsesProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let body = request::body(&call.model, &call.input);
        exchange::post(&self.upstream, body, &call, ResponseDecoder::default())
    }
}

/// One event's data: every field any event type this adapter reads has, each optional, read
/// in one pass with the rest skipped.
#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    /// A text, refusal, arguments or reasoning piece.
    #[serde(default)]
    delta: Option<Text>,
    #[serde(default)]
    output_index: Option<u32>,
    #[serde(default)]
    item: Option<Item>,
    #[serde(default)]
    response: Option<Response>,
    /// An `error` event's code and message, at its top level or (the shape OpenAI sends)
    /// in an `error` object.
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

/// An output item, as `response.output_item.added` and `.done` carry it.
#[derive(Debug, Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    encrypted_content: Option<String>,
}

/// The response object of `response.created`, `.completed`, `.incomplete` and `.failed`.
#[derive(Debug, Deserialize)]
struct Response {
    #[serde(default)]
    model: Option<Text>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
    #[serde(default)]
    error: Option<Box<RawValue>>,
}

#[derive(Debug, Deserialize)]
struct Incomplete {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// A tool call being streamed.
#[derive(Debug)]
struct Call {
    /// The SPI tool-call index.
    ordinal: u32,
    /// Whether any argument text was streamed.
    streamed: bool,
}

/// Turns events into SPI events.
#[derive(Debug, Default)]
pub(super) struct ResponseDecoder {
    /// By the item's `output_index`.
    calls: HashMap<u32, Call>,
    /// Whether the reply was a refusal.
    refused: bool,
    model: Option<Text>,
}

impl Decoder for ResponseDecoder {
    type Framing = SseParser;

    fn event(
        &mut self,
        upstream: &Upstream,
        event: SseEvent<'_>,
        usage: &mut UsageTally,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError> {
        if let Some(text) = fast::text_delta(event.data) {
            if !text.is_empty() {
                out.push(ProviderEvent::TextDelta(text));
            }
            return Ok(None);
        }
        let parsed: Event = serde_json::from_str(event.data).map_err(|e| {
            upstream.malformed_json(
                "an event is not a Responses API stream event",
                &e,
                event.data,
            )
        })?;
        let missing = |what: &str| {
            upstream.protocol_error(&format!("a `{}` event has no {what}", parsed.kind), "")
        };
        match &*parsed.kind {
            "response.created" | "response.in_progress" => {
                if let Some(model) = parsed.response.and_then(|r| r.model) {
                    self.model = Some(model).filter(|m| !m.is_empty());
                }
            }
            "response.output_item.added" => {
                let item = parsed.item.ok_or_else(|| missing("item"))?;
                if item.kind == "function_call" {
                    let index = parsed.output_index.ok_or_else(|| missing("output_index"))?;
                    let (Some(id), Some(name)) = (item.call_id.or(item.id), item.name) else {
                        return Err(missing("function call id and name"));
                    };
                    self.call_started(index, id, name, out);
                }
            }
            "response.output_text.delta" => {
                let text = parsed.delta.ok_or_else(|| missing("delta"))?;
                if !text.is_empty() {
                    out.push(ProviderEvent::TextDelta(text));
                }
            }
            "response.refusal.delta" => {
                let text = parsed.delta.ok_or_else(|| missing("delta"))?;
                self.refused = true;
                if !text.is_empty() {
                    out.push(ProviderEvent::TextDelta(text));
                }
            }
            "response.function_call_arguments.delta" => {
                let index = parsed.output_index.ok_or_else(|| missing("output_index"))?;
                let delta = parsed.delta.ok_or_else(|| missing("delta"))?;
                let Some(call) = self.calls.get_mut(&index) else {
                    let what = "tool arguments arrived for an item that is not a function call";
                    return Err(upstream.protocol_error(what, event.data));
                };
                if !delta.is_empty() {
                    call.streamed = true;
                    out.push(ProviderEvent::ToolCallArgumentsDelta {
                        index: call.ordinal,
                        delta,
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let text = parsed.delta.ok_or_else(|| missing("delta"))?;
                if !text.is_empty() {
                    out.push(ProviderEvent::Reasoning(ReasoningPiece::Text, text));
                }
            }
            "response.output_item.done" => {
                let item = parsed.item.ok_or_else(|| missing("item"))?;
                self.item_done(parsed.output_index, item, out);
            }
            "response.completed" | "response.incomplete" | "response.failed" | "error" => {
                return self.end(upstream, parsed, usage);
            }
            _ => {}
        }
        Ok(None)
    }

    fn finished_at_eof(&self, _: &Upstream) -> Result<Option<FinishReason>, ProviderError> {
        // Only `response.completed` or `.incomplete` ends a reply.
        Ok(None)
    }

    fn response_model(&self) -> Option<&Text> {
        self.model.as_ref()
    }
}

impl ResponseDecoder {
    /// A function call item at `index` opened: a tool call starting.
    fn call_started(&mut self, index: u32, id: String, name: String, out: &mut Vec<ProviderEvent>) {
        let ordinal = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
        self.calls.insert(
            index,
            Call {
                ordinal,
                streamed: false,
            },
        );
        out.push(ProviderEvent::ToolCallStarted {
            index: ordinal,
            id,
            name,
        });
    }

    /// The event that ends the reply: complete, incomplete (as its reason says), failed, or
    /// an error.
    fn end(
        &self,
        upstream: &Upstream,
        parsed: Event<'_>,
        usage: &mut UsageTally,
    ) -> Result<Option<FinishReason>, ProviderError> {
        match &*parsed.kind {
            "response.completed" => {
                report(parsed.response.as_ref(), usage);
                Ok(Some(if self.refused {
                    FinishReason::Refusal
                } else if self.calls.is_empty() {
                    FinishReason::Stop
                } else {
                    FinishReason::ToolCalls
                }))
            }
            "response.incomplete" => {
                report(parsed.response.as_ref(), usage);
                let why = parsed
                    .response
                    .and_then(|r| r.incomplete_details)
                    .and_then(|d| d.reason);
                Ok(Some(match why.as_deref() {
                    Some("max_output_tokens") => FinishReason::Length,
                    Some("content_filter") => FinishReason::ContentFilter,
                    _ => FinishReason::Other,
                }))
            }
            "response.failed" => {
                // What the failed response used is reported, ahead of its error.
                report(parsed.response.as_ref(), usage);
                let error = parsed.response.and_then(|r| r.error);
                let error = error.as_deref().map_or("", RawValue::get);
                Err(upstream.stream_error(&classifiable(error)))
            }
            _ => {
                if let Some(nested) = parsed.error {
                    return Err(upstream.stream_error(&classifiable(nested.get())));
                }
                let error = serde_json::json!({"code": parsed.code, "message": parsed.message});
                Err(upstream.stream_error(&classifiable(&error.to_string())))
            }
        }
    }

    /// `response.output_item.done`: what an item that ended still carries. A function call
    /// seen first here (a server that sends no `output_item.added` for it) starts here.
    fn item_done(&mut self, index: Option<u32>, item: Item, out: &mut Vec<ProviderEvent>) {
        match item.kind.as_str() {
            "function_call" => {
                if let Some(index) = index
                    && !self.calls.contains_key(&index)
                    && let (Some(id), Some(name)) =
                        (item.call_id.clone().or(item.id.clone()), item.name.clone())
                {
                    self.call_started(index, id, name, out);
                }
                let call = index.and_then(|i| self.calls.get(&i));
                if let (Some(call), Some(arguments)) = (call, item.arguments)
                    && !call.streamed
                    && !arguments.is_empty()
                {
                    out.push(ProviderEvent::ToolCallArgumentsDelta {
                        index: call.ordinal,
                        delta: arguments.into(),
                    });
                }
            }
            "reasoning" => {
                if let (Some(id), Some(encrypted)) = (item.id, item.encrypted_content)
                    && !encrypted.is_empty()
                {
                    let signature = format!("{id}:{encrypted}");
                    out.push(ProviderEvent::Reasoning(
                        ReasoningPiece::Signature,
                        signature.into(),
                    ));
                }
            }
            _ => {}
        }
    }
}

/// The usage of `response`: `input_tokens` counts cached ones too, `reasoning_tokens` are
/// part of `output_tokens`, as chat completions count them.
fn report(response: Option<&Response>, usage: &mut UsageTally) {
    let Some(reported) = response.and_then(|r| r.usage.as_ref()) else {
        return;
    };
    usage.report_openai(
        reported.input_tokens,
        reported.output_tokens,
        reported
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
        reported
            .output_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens),
    );
}

/// An error object of this API (`{"code": ..., "message": ...}`) in the shape the shared
/// classification reads: its code as the error's type, request errors (`invalid_prompt`,
/// `invalid_image`, ...) as `invalid_request_error`.
fn classifiable(error: &str) -> Vec<u8> {
    #[derive(Deserialize, Default)]
    struct Reported {
        #[serde(default)]
        code: Option<String>,
        #[serde(default)]
        message: Option<String>,
    }
    #[derive(Deserialize, Default)]
    struct Typed {
        #[serde(rename = "type", default)]
        kind: Option<String>,
    }
    let reported: Reported = serde_json::from_str(error).unwrap_or_default();
    // An object with a `type` but no `code` (`{"type": "rate_limit_exceeded", ...}`) is
    // classified by its type.
    let code = reported
        .code
        .or_else(|| serde_json::from_str::<Typed>(error).ok()?.kind)
        .unwrap_or_default();
    let kind = if code.starts_with("invalid_") || code.starts_with("unsupported_") {
        "invalid_request_error"
    } else {
        code.as_str()
    };
    serde_json::json!({"type": kind, "code": code, "message": reported.message})
        .to_string()
        .into_bytes()
}
