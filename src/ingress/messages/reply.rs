//! An execution as Anthropic's Messages API shows it: the whole `message`, or its events as
//! `message_start`, content blocks (`text`, `thinking`, `redacted_thinking`, `tool_use`) opened,
//! added to and stopped, `message_delta` with the stop reason and usage, and `message_stop`
//! only when the execution succeeded: one that fails after output began ends with
//! `event: error` instead, which the SDKs raise. `model` is the resolved `provider/model`, `id`
//! the execution's id.

use std::fmt::Write as _;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::super::answer::{Shown, Streamed};
use super::super::error::{Api, Refusal};
use super::super::stream::Encoder;
use super::super::tokens::{Tally, Tokens};
use crate::execution::{
    Event, EventPayload, ExecutionId, ExecutionResult, FinishReason, ReasoningPiece,
};

fn stop_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter | FinishReason::Refusal => "refusal",
        FinishReason::Stop | FinishReason::Other => "end_turn",
    }
}

fn usage(tokens: Tokens) -> Value {
    json!({
        "input_tokens": tokens.input.saturating_sub(tokens.cached_input),
        "cache_read_input_tokens": tokens.cached_input,
        "output_tokens": tokens.output,
    })
}

/// A tool call's arguments as the JSON object `input` must be; `{}` when they are not JSON.
fn input(arguments: &str) -> Box<RawValue> {
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    serde_json::from_str(arguments)
        .unwrap_or_else(|_| RawValue::from_string("{}".to_owned()).unwrap_or_default())
}

/// The whole answer of an execution that succeeded.
pub(super) fn message(id: ExecutionId, result: &ExecutionResult, tokens: Tokens) -> Value {
    let output = &result.output;
    let mut content = Vec::new();
    for reasoning in &output.reasoning {
        content.push(if reasoning.redacted.is_empty() {
            json!({"type": "thinking", "thinking": reasoning.text, "signature": reasoning.signature})
        } else {
            json!({"type": "redacted_thinking", "data": reasoning.redacted})
        });
    }
    if !output.text.is_empty() {
        content.push(json!({"type": "text", "text": output.text}));
    }
    for call in &output.tool_calls {
        content.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": input(&call.arguments_json),
        }));
    }
    json!({
        "id": id.to_text(),
        "type": "message",
        "role": "assistant",
        "model": format!("{}/{}", result.provider, result.model),
        "content": content,
        "stop_reason": stop_reason(result.finish_reason),
        "stop_sequence": null,
        "usage": usage(tokens),
    })
}

/// The content block open in a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// A redacted reasoning block: opened and stopped at once.
    Redacted,
    /// The tool call at this index of the reply.
    Tool(u32),
}

/// Writes an execution's events as Anthropic's stream events.
#[derive(Debug)]
pub(super) struct Stream {
    id: String,
    tally: Tally,
    /// The block open now, and its index.
    open: Option<(Open, u32)>,
    /// The index the next block takes.
    next: u32,
    /// Tool calls' blocks: the reply's index -> the block's.
    tools: Vec<(u32, u32)>,
    shown: Shown,
}

impl Stream {
    pub(super) fn new(id: ExecutionId) -> Self {
        Self {
            id: id.to_text(),
            tally: Tally::default(),
            open: None,
            next: 0,
            tools: Vec::new(),
            shown: Shown::new(Api::Anthropic),
        }
    }

    fn begin(&mut self, out: &mut BytesMut) {
        if self.shown.began {
            return;
        }
        self.shown.began = true;
        let start = json!({"type": "message_start", "message": {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": &*self.shown.target,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }});
        write("message_start", &start, out);
    }

    /// The index of an open block of `kind`, opening it (and closing another) as needed.
    fn block(&mut self, kind: Open, start: impl FnOnce() -> Value, out: &mut BytesMut) -> u32 {
        self.begin(out);
        if let Some((open, index)) = self.open
            && open == kind
        {
            return index;
        }
        self.close(out);
        let index = self.next;
        self.next += 1;
        self.open = Some((kind, index));
        if let Open::Tool(at) = kind {
            self.tools.push((at, index));
        }
        let event =
            json!({"type": "content_block_start", "index": index, "content_block": start()});
        write("content_block_start", &event, out);
        index
    }

    fn close(&mut self, out: &mut BytesMut) {
        if let Some((_, index)) = self.open.take() {
            write(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
                out,
            );
        }
    }

    fn delta(index: u32, delta: Value, out: &mut BytesMut) {
        let event = json!({"type": "content_block_delta", "index": index, "delta": delta});
        write("content_block_delta", &event, out);
    }

    fn completed(&mut self, result: &ExecutionResult, out: &mut BytesMut) {
        self.begin(out);
        self.close(out);
        let tokens = self.tally.of(result.attempt);
        let delta = json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(result.finish_reason), "stop_sequence": null},
            "usage": usage(tokens),
        });
        write("message_delta", &delta, out);
        write("message_stop", &json!({"type": "message_stop"}), out);
    }
}

/// One server-sent event: `event:` its type, `data:` its JSON.
fn write(kind: &str, data: &Value, out: &mut BytesMut) {
    out.put_slice(b"event: ");
    out.put_slice(kind.as_bytes());
    out.put_slice(b"\ndata: ");
    // Writing a `Value` into memory cannot fail.
    let _ = serde_json::to_writer((&mut *out).writer(), data);
    out.put_slice(b"\n\n");
}

impl Encoder for Stream {
    fn event(&mut self, event: &Event, out: &mut BytesMut) -> bool {
        match &event.payload {
            EventPayload::AttemptStarted(start) => {
                self.shown.target = Arc::from(format!("{}/{}", start.provider, start.model));
            }
            EventPayload::TextDelta { text, .. } => {
                let index = self.block(Open::Text, || json!({"type": "text", "text": ""}), out);
                // The most of what a stream carries: written straight, with no tree built.
                out.put_slice(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":");
                // Writing into memory cannot fail.
                let _ = write!(out, "{index}");
                out.put_slice(b",\"delta\":{\"type\":\"text_delta\",\"text\":");
                // Writing a string into memory cannot fail.
                let _ = serde_json::to_writer((&mut *out).writer(), text.as_str());
                out.put_slice(b"}}\n\n");
            }
            EventPayload::ReasoningDelta { piece, text, .. } => match piece {
                ReasoningPiece::Text => {
                    let start = || json!({"type": "thinking", "thinking": "", "signature": ""});
                    let index = self.block(Open::Thinking, start, out);
                    let delta = json!({"type": "thinking_delta", "thinking": text.as_str()});
                    Self::delta(index, delta, out);
                }
                ReasoningPiece::Signature => {
                    let start = || json!({"type": "thinking", "thinking": "", "signature": ""});
                    let index = self.block(Open::Thinking, start, out);
                    let delta = json!({"type": "signature_delta", "signature": text.as_str()});
                    Self::delta(index, delta, out);
                    self.close(out);
                }
                ReasoningPiece::Redacted => {
                    let data = text.as_str().to_owned();
                    let start = move || json!({"type": "redacted_thinking", "data": data});
                    self.block(Open::Redacted, start, out);
                    self.close(out);
                }
            },
            EventPayload::ToolCallStarted(call) => {
                let start =
                    || json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}});
                self.block(Open::Tool(call.index), start, out);
            }
            EventPayload::ToolCallArgumentsDelta { index, delta, .. } => {
                let block = match self.tools.iter().rev().find(|(at, _)| at == index) {
                    Some((_, block)) => *block,
                    None => self.block(
                        Open::Tool(*index),
                        || json!({"type": "tool_use", "input": {}}),
                        out,
                    ),
                };
                let delta = json!({"type": "input_json_delta", "partial_json": delta.as_str()});
                Self::delta(block, delta, out);
            }
            EventPayload::Usage(fact) => self.tally.add(fact),
            EventPayload::Completed(result) => {
                self.completed(result, out);
                return true;
            }
            EventPayload::Failed(failure) => {
                self.shown
                    .end_with(Refusal::of_failure(&failure.error), out);
                return true;
            }
            EventPayload::Accepted(_)
            | EventPayload::Routing(_)
            | EventPayload::AttemptFailed(_)
            | EventPayload::Progress { .. } => {}
        }
        false
    }

    fn cut(&mut self, out: &mut BytesMut) {
        self.shown.end_with(Refusal::cut(), out);
    }
}

impl Streamed for Stream {
    fn shown(&self) -> &Shown {
        &self.shown
    }
}
