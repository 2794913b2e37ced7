//! What each [`Behaviour`] answers, in OpenAI's chat completions wire format: an SSE stream of
//! `chat.completion.chunk`s (or one `chat.completion` when the request does not stream), an
//! error object, silence, or a stream that breaks.

use std::io;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};

use super::behaviour::{
    ANSWER, Behaviour, FAIL_SLOW, HOLD, SLOW_INTERVAL, SLOW_WORDS, USAGE, WORDS,
};
use super::full;

/// How long a reply that breaks waits first, so that what it sent is written out (an error
/// from the body makes hyper drop the connection, with whatever it still buffers).
const FLUSH: std::time::Duration = std::time::Duration::from_millis(50);

/// A reply's body: whole, streamed, or broken off with an error.
pub type Body = BoxBody<Bytes, io::Error>;

/// One step of a streamed reply.
enum Step {
    Chunk(Value),
    Wait(std::time::Duration),
    Done,
    Break,
    Hold,
}

/// An error reply in OpenAI's shape.
pub fn error(status: StatusCode, message: &str) -> Response<Body> {
    let body =
        json!({"error": {"message": message, "type": "conformance_kit", "code": status.as_u16()}});
    let mut response = Response::new(full(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

impl Behaviour {
    /// The reply to one request (`stream`: the request asked for a stream).
    pub(super) async fn reply(self, stream: bool) -> Response<Body> {
        match self {
            Self::Status(code) => {
                let status =
                    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut response =
                    error(status, "the conformance kit's provider failed on purpose");
                if code == 429 {
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("0"));
                }
                return response;
            }
            Self::FailSlow => {
                tokio::time::sleep(FAIL_SLOW).await;
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "failed slowly on purpose",
                );
            }
            Self::Silent => {
                tokio::time::sleep(HOLD).await;
                return error(StatusCode::GATEWAY_TIMEOUT, "was silent on purpose");
            }
            _ => {}
        }
        if !stream {
            return self.whole();
        }
        let frames =
            futures_util::stream::unfold(self.steps().into_iter(), |mut steps| async move {
                loop {
                    let frame = match steps.next()? {
                        Step::Chunk(chunk) => {
                            Ok(Frame::data(Bytes::from(format!("data: {chunk}\n\n"))))
                        }
                        Step::Done => Ok(Frame::data(Bytes::from_static(b"data: [DONE]\n\n"))),
                        Step::Break => {
                            // What was sent reaches the caller before the connection breaks.
                            tokio::time::sleep(FLUSH).await;
                            Err(io::Error::other("the kit breaks this reply on purpose"))
                        }
                        Step::Wait(pause) => {
                            tokio::time::sleep(pause).await;
                            continue;
                        }
                        Step::Hold => {
                            tokio::time::sleep(HOLD).await;
                            return None;
                        }
                    };
                    return Some((frame, steps));
                }
            });
        let mut response = Response::new(StreamBody::new(frames).boxed());
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/event-stream"),
        );
        response
    }

    /// The reply to a request that does not stream: the answer whole, or broken off.
    fn whole(self) -> Response<Body> {
        if !matches!(self, Self::Answer | Self::AnswerSlow | Self::AnswerQuiet) {
            return error(StatusCode::BAD_GATEWAY, "this behaviour breaks its stream");
        }
        let message = json!({"role": "assistant", "content": ANSWER});
        let body = json!({
            "id": "kit", "object": "chat.completion", "created": 0, "model": self.name(),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage(),
        });
        let mut response = Response::new(full(body.to_string()));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        response
    }

    /// The steps of a streamed reply.
    fn steps(self) -> Vec<Step> {
        let name = self.name();
        let chunk = |delta: Value, finish: Option<&str>| {
            Step::Chunk(json!({
                "id": "kit", "object": "chat.completion.chunk", "created": 0, "model": name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }))
        };
        let usage_chunk = || {
            Step::Chunk(json!({
                "id": "kit", "object": "chat.completion.chunk", "created": 0, "model": name,
                "choices": [], "usage": usage(),
            }))
        };
        let text = |word: &str| chunk(json!({"content": word}), None);
        let role = chunk(json!({"role": "assistant", "content": ""}), None);
        let tool_start = chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_kit", "type": "function",
                "function": {"name": "lookup", "arguments": ""}}]}),
            None,
        );
        let tool_args = |part: &str| {
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                None,
            )
        };
        match self {
            Self::Answer | Self::AnswerQuiet => {
                let mut steps = vec![role];
                steps.extend(WORDS.map(text));
                steps.push(chunk(json!({}), Some("stop")));
                if self == Self::Answer {
                    steps.push(usage_chunk());
                }
                steps.push(Step::Done);
                steps
            }
            Self::AnswerSlow => {
                let mut steps = vec![role];
                for n in 1..=SLOW_WORDS {
                    steps.push(Step::Wait(SLOW_INTERVAL));
                    steps.push(text(&format!("w{n} ")));
                }
                steps.extend([chunk(json!({}), Some("stop")), usage_chunk(), Step::Done]);
                steps
            }
            Self::CutText => vec![role, text(WORDS[0]), text(WORDS[1]), Step::Break],
            Self::CutTool => vec![role, tool_start, tool_args("{\"q\":"), Step::Break],
            Self::CutReasoning => vec![
                role,
                chunk(json!({"reasoning_content": "thinking it over"}), None),
                Step::Break,
            ],
            Self::CutUsage => vec![role, usage_chunk(), Step::Break],
            Self::StallText => vec![role, text(WORDS[0]), text(WORDS[1]), Step::Hold],
            Self::Status(_) | Self::FailSlow | Self::Silent => vec![Step::Break],
        }
    }
}

fn usage() -> Value {
    let (input, output) = USAGE;
    json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
}
