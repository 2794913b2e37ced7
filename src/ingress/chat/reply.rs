//! An execution as OpenAI's chat completions show it: the whole answer (`chat.completion`),
//! or its events as `chat.completion.chunk`s, each with `id:` its event's sequence. `model` is
//! the resolved `provider/model`, `id` the execution's id. A stream ends with `data: [DONE]`
//! only when the execution succeeded: one that fails after output began ends with an error
//! object instead, which the SDKs raise.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::{BufMut, BytesMut};
use serde_json::{Value, json};

use super::super::answer::{Shown, Streamed, unix_seconds};
use super::super::error::{Api, Refusal};
use super::super::stream::Encoder;
use super::super::tokens::{Tally, Tokens};
use crate::execution::{
    Event, EventPayload, ExecutionId, ExecutionResult, FinishReason, ReasoningPiece,
};

fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Stop | FinishReason::Refusal | FinishReason::Other => "stop",
    }
}

fn usage(tokens: Tokens) -> Value {
    json!({
        "prompt_tokens": tokens.input,
        "completion_tokens": tokens.output,
        "total_tokens": tokens.input + tokens.output,
        "prompt_tokens_details": {"cached_tokens": tokens.cached_input},
        "completion_tokens_details": {"reasoning_tokens": tokens.reasoning},
    })
}

/// The whole answer of an execution that succeeded.
pub(super) fn completion(
    id: ExecutionId,
    created: SystemTime,
    result: &ExecutionResult,
    tokens: Tokens,
) -> Value {
    let output = &result.output;
    let refused = result.finish_reason == FinishReason::Refusal;
    let text = (!output.text.is_empty()).then_some(output.text.as_str());
    let mut message = json!({
        "role": "assistant",
        "content": if refused { None } else { text },
        "refusal": if refused { text } else { None },
    });
    if !output.tool_calls.is_empty() {
        message["tool_calls"] = output
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                })
            })
            .collect();
    }
    let reasoning: String = output.reasoning.iter().map(|r| r.text.as_str()).collect();
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
    json!({
        "id": id.to_text(),
        "object": "chat.completion",
        "created": unix_seconds(created),
        "model": format!("{}/{}", result.provider, result.model),
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason(result.finish_reason),
            "logprobs": null,
        }],
        "usage": usage(tokens),
    })
}

/// Writes an execution's events as chunks.
#[derive(Debug)]
pub(super) struct Chunks {
    id: String,
    created: u64,
    include_usage: bool,
    /// A chunk's JSON up to its delta's fields, for the target under way: a text delta, the
    /// most of what a stream carries, is written after it with no tree built.
    head: Vec<u8>,
    tally: Tally,
    shown: Shown,
}

impl Chunks {
    pub(super) fn new(id: ExecutionId, created: SystemTime, include_usage: bool) -> Self {
        let mut chunks = Self {
            id: id.to_text(),
            created: unix_seconds(created),
            include_usage,
            head: Vec::new(),
            tally: Tally::default(),
            shown: Shown::new(Api::OpenAi),
        };
        chunks.aim(Arc::from(""));
        chunks
    }

    /// The chunks from now on are the target `target`'s.
    fn aim(&mut self, target: Arc<str>) {
        let head = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": &*target,
        })
        .to_string();
        self.head.clear();
        // `{...}` without its closing brace, then the choices up to the delta's fields.
        self.head
            .extend_from_slice(&head.as_bytes()[..head.len() - 1]);
        self.head.extend_from_slice(
            br#","choices":[{"index":0,"finish_reason":null,"logprobs":null,"delta":{"#,
        );
        self.shown.target = target;
    }

    /// A chunk holding a text delta, written straight.
    fn text(&mut self, sequence: u64, text: &str, out: &mut BytesMut) {
        open(sequence, out);
        out.put_slice(&self.head);
        if !self.shown.began {
            self.shown.began = true;
            out.put_slice(br#""role":"assistant","#);
        }
        out.put_slice(br#""content":"#);
        // Writing a string into memory cannot fail.
        let _ = serde_json::to_writer((&mut *out).writer(), text);
        out.put_slice(b"}}]}\n\n");
    }

    /// One chunk whose only choice says `delta` (and `finish_reason`, at the end).
    fn chunk(&mut self, sequence: u64, mut delta: Value, finish: Option<&str>, out: &mut BytesMut) {
        if !self.shown.began {
            self.shown.began = true;
            delta["role"] = Value::from("assistant");
        }
        let chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": &*self.shown.target,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        });
        write(sequence, &chunk, out);
    }

    fn completed(&mut self, sequence: u64, result: &ExecutionResult, out: &mut BytesMut) {
        self.chunk(
            sequence,
            json!({}),
            Some(finish_reason(result.finish_reason)),
            out,
        );
        if self.include_usage {
            let chunk = json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": &*self.shown.target,
                "choices": [],
                "usage": usage(self.tally.of(result.attempt)),
            });
            write(sequence, &chunk, out);
        }
        out.put_slice(b"data: [DONE]\n\n");
    }
}

/// A server-sent event's start, up to its data: its id the event's sequence, written in
/// place (no string made for the number).
fn open(sequence: u64, out: &mut BytesMut) {
    // Writing into memory cannot fail.
    let _ = write!(out, "id: {sequence}\ndata: ");
}

/// `chunk` as one server-sent event, with its sequence as the event's id.
fn write(sequence: u64, chunk: &Value, out: &mut BytesMut) {
    open(sequence, out);
    // Writing a `Value` into memory cannot fail.
    let _ = serde_json::to_writer((&mut *out).writer(), chunk);
    out.put_slice(b"\n\n");
}

impl Encoder for Chunks {
    fn event(&mut self, event: &Event, out: &mut BytesMut) -> bool {
        let sequence = event.sequence;
        match &event.payload {
            EventPayload::AttemptStarted(start) => {
                self.aim(Arc::from(format!("{}/{}", start.provider, start.model)));
            }
            EventPayload::TextDelta { text, .. } => self.text(sequence, text.as_str(), out),
            EventPayload::ToolCallStarted(call) => {
                let delta = json!({"tool_calls": [{
                    "index": call.index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }]});
                self.chunk(sequence, delta, None, out);
            }
            EventPayload::ToolCallArgumentsDelta { index, delta, .. } => {
                let delta = json!({"tool_calls": [{
                    "index": index,
                    "function": {"arguments": delta.as_str()},
                }]});
                self.chunk(sequence, delta, None, out);
            }
            EventPayload::ReasoningDelta {
                piece: ReasoningPiece::Text,
                text,
                ..
            } => {
                self.chunk(
                    sequence,
                    json!({"reasoning_content": text.as_str()}),
                    None,
                    out,
                );
            }
            EventPayload::Usage(fact) => self.tally.add(fact),
            EventPayload::Completed(result) => {
                self.completed(sequence, result, out);
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
            | EventPayload::ReasoningDelta { .. }
            | EventPayload::Progress { .. } => {}
        }
        false
    }

    fn cut(&mut self, out: &mut BytesMut) {
        self.shown.end_with(Refusal::cut(), out);
    }
}

impl Streamed for Chunks {
    fn shown(&self) -> &Shown {
        &self.shown
    }
}
