//! An execution as OpenAI's Responses API shows it: the whole `response`, or its events:
//! `response.created`, each output item added (a `message` with one `output_text` part, a
//! `function_call`), its deltas, its `.done` events, and `response.completed` with the whole
//! response, each event numbered (`sequence_number`). One that fails after output began ends
//! with an `error` event (carrying an `error` object, which OpenAI's SDK raises) and no
//! `response.completed`. `model` is the resolved `provider/model`, `id` the execution's id.

use std::time::SystemTime;

use bytes::{BufMut, BytesMut};
use serde_json::{Value, json};

use super::super::answer::{Shown, Streamed, unix_seconds};
use super::super::error::{Api, Refusal};
use super::super::stream::Encoder;
use super::super::tokens::{Tally, Tokens};
use crate::execution::{Event, EventPayload, ExecutionId, ExecutionResult, ToolCall};

fn usage(tokens: Tokens) -> Value {
    json!({
        "input_tokens": tokens.input,
        "input_tokens_details": {"cached_tokens": tokens.cached_input},
        "output_tokens": tokens.output,
        "output_tokens_details": {"reasoning_tokens": tokens.reasoning},
        "total_tokens": tokens.input + tokens.output,
    })
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{"type": "output_text", "text": text, "annotations": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
}

fn call_item(id: &str, call: &ToolCall, status: &str) -> Value {
    json!({
        "type": "function_call",
        "id": id,
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments_json,
        "status": status,
    })
}

/// The response object of an execution, `status` so far, with `output` and `usage` once it
/// succeeded.
fn response(
    id: ExecutionId,
    created: u64,
    model: &str,
    done: Option<(&ExecutionResult, Tokens)>,
) -> Value {
    let (status, output, usage) = match done {
        None => ("in_progress", json!([]), Value::Null),
        Some((result, tokens)) => ("completed", output(id, result), usage(tokens)),
    };
    json!({
        "id": id.to_text(),
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "error": null,
        "incomplete_details": null,
    })
}

/// The output items of a result: its message, then its function calls.
fn output(id: ExecutionId, result: &ExecutionResult) -> Value {
    let mut items = Vec::new();
    if !result.output.text.is_empty() {
        items.push(message_item(
            &format!("msg_{}", id.to_text()),
            &result.output.text,
            "completed",
        ));
    }
    for (i, call) in result.output.tool_calls.iter().enumerate() {
        items.push(call_item(
            &format!("fc_{}_{i}", id.to_text()),
            call,
            "completed",
        ));
    }
    Value::Array(items)
}

/// The whole answer of an execution that succeeded.
pub(super) fn whole(
    id: ExecutionId,
    created: SystemTime,
    result: &ExecutionResult,
    tokens: Tokens,
) -> Value {
    let model = format!("{}/{}", result.provider, result.model);
    response(id, unix_seconds(created), &model, Some((result, tokens)))
}

/// An output item a stream opened: the message, or the function call at an index of the
/// reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Opened {
    Message { text: String },
    Call { at: u32, call: ToolCall },
}

/// Writes an execution's events as Responses stream events.
#[derive(Debug)]
pub(super) struct Stream {
    id: ExecutionId,
    created: u64,
    tally: Tally,
    /// The next event's `sequence_number`.
    sequence: u64,
    /// The output items opened, in their order (their `output_index`).
    items: Vec<Opened>,
    shown: Shown,
}

impl Stream {
    pub(super) fn new(id: ExecutionId, created: SystemTime) -> Self {
        Self {
            id,
            created: unix_seconds(created),
            tally: Tally::default(),
            sequence: 0,
            items: Vec::new(),
            shown: Shown::new(Api::OpenAi),
        }
    }

    fn write(&mut self, mut event: Value, out: &mut BytesMut) {
        event["sequence_number"] = Value::from(self.sequence);
        self.sequence += 1;
        out.put_slice(b"event: ");
        out.put_slice(event["type"].as_str().unwrap_or_default().as_bytes());
        out.put_slice(b"\ndata: ");
        // Writing a `Value` into memory cannot fail.
        let _ = serde_json::to_writer((&mut *out).writer(), &event);
        out.put_slice(b"\n\n");
    }

    fn begin(&mut self, out: &mut BytesMut) {
        if self.shown.began {
            return;
        }
        self.shown.began = true;
        let response = response(self.id, self.created, &self.shown.target, None);
        self.write(
            json!({"type": "response.created", "response": response}),
            out,
        );
    }

    fn item_id(&self, index: usize) -> String {
        match &self.items[index] {
            Opened::Message { .. } => format!("msg_{}", self.id.to_text()),
            Opened::Call { at, .. } => format!("fc_{}_{at}", self.id.to_text()),
        }
    }

    /// The message's output index, opening it (with its one text part) as needed.
    fn message(&mut self, out: &mut BytesMut) -> usize {
        self.begin(out);
        if let Some(index) = self
            .items
            .iter()
            .position(|i| matches!(i, Opened::Message { .. }))
        {
            return index;
        }
        let index = self.items.len();
        self.items.push(Opened::Message {
            text: String::new(),
        });
        let id = self.item_id(index);
        let item = message_item(&id, "", "in_progress");
        self.write(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            out,
        );
        let part = json!({"type": "output_text", "text": "", "annotations": []});
        let added = json!({"type": "response.content_part.added", "item_id": id, "output_index": index, "content_index": 0, "part": part});
        self.write(added, out);
        index
    }

    fn text(&mut self, delta: &str, out: &mut BytesMut) {
        let index = self.message(out);
        if let Opened::Message { text } = &mut self.items[index] {
            text.push_str(delta);
        }
        let id = self.item_id(index);
        let event = json!({"type": "response.output_text.delta", "item_id": id, "output_index": index, "content_index": 0, "delta": delta});
        self.write(event, out);
    }

    fn call(&mut self, at: u32, call: ToolCall, out: &mut BytesMut) {
        self.begin(out);
        let index = self.items.len();
        self.items.push(Opened::Call {
            at,
            call: call.clone(),
        });
        let item = call_item(&self.item_id(index), &call, "in_progress");
        self.write(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            out,
        );
    }

    fn arguments(&mut self, at: u32, delta: &str, out: &mut BytesMut) {
        let Some(index) = self
            .items
            .iter()
            .rposition(|i| matches!(i, Opened::Call { at: a, .. } if *a == at))
        else {
            return;
        };
        if let Opened::Call { call, .. } = &mut self.items[index] {
            call.arguments_json.push_str(delta);
        }
        let id = self.item_id(index);
        let event = json!({"type": "response.function_call_arguments.delta", "item_id": id, "output_index": index, "delta": delta});
        self.write(event, out);
    }

    /// Each open item's `.done` events, then `response.completed`.
    fn completed(&mut self, result: &ExecutionResult, out: &mut BytesMut) {
        self.begin(out);
        for index in 0..self.items.len() {
            let id = self.item_id(index);
            let item = match self.items[index].clone() {
                Opened::Message { text } => {
                    let done = json!({"type": "response.output_text.done", "item_id": id, "output_index": index, "content_index": 0, "text": text});
                    self.write(done, out);
                    let part = json!({"type": "output_text", "text": text, "annotations": []});
                    let done = json!({"type": "response.content_part.done", "item_id": id, "output_index": index, "content_index": 0, "part": part});
                    self.write(done, out);
                    message_item(&id, &text, "completed")
                }
                Opened::Call { call, .. } => {
                    let done = json!({"type": "response.function_call_arguments.done", "item_id": id, "output_index": index, "arguments": call.arguments_json});
                    self.write(done, out);
                    call_item(&id, &call, "completed")
                }
            };
            self.write(
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
                out,
            );
        }
        let tokens = self.tally.of(result.attempt);
        let model = format!("{}/{}", result.provider, result.model);
        let response = response(self.id, self.created, &model, Some((result, tokens)));
        self.write(
            json!({"type": "response.completed", "response": response}),
            out,
        );
    }
}

impl Encoder for Stream {
    fn event(&mut self, event: &Event, out: &mut BytesMut) -> bool {
        match &event.payload {
            EventPayload::AttemptStarted(start) => {
                self.shown.target = format!("{}/{}", start.provider, start.model).into();
            }
            EventPayload::TextDelta { text, .. } => self.text(text.as_str(), out),
            EventPayload::ToolCallStarted(start) => {
                let call = ToolCall {
                    id: start.id.clone(),
                    name: start.name.clone(),
                    arguments_json: String::new(),
                };
                self.call(start.index, call, out);
            }
            EventPayload::ToolCallArgumentsDelta { index, delta, .. } => {
                self.arguments(*index, delta.as_str(), out);
            }
            EventPayload::Usage(fact) => self.tally.add(fact),
            EventPayload::Completed(result) => {
                self.completed(result, out);
                return true;
            }
            EventPayload::Failed(failure) => {
                let refusal = Refusal::of_failure(&failure.error);
                self.end_with(refusal, out);
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
        self.end_with(Refusal::cut(), out);
    }
}

impl Stream {
    /// After output, the Responses API's `error` event (with an `error` object as well, which
    /// is what OpenAI's SDK raises on); before it, the answer's status.
    fn end_with(&mut self, refusal: Refusal, out: &mut BytesMut) {
        if !self.shown.began {
            self.shown.end_with(refusal, out);
            return;
        }
        let body = refusal.body(Api::OpenAi);
        let event = json!({
            "type": "error",
            "code": refusal.code,
            "message": refusal.message,
            "param": refusal.param,
            "error": body["error"],
        });
        self.write(event, out);
    }
}

impl Streamed for Stream {
    fn shown(&self) -> &Shown {
        &self.shown
    }
}
