//! Each HTTP adapter's wire format, as the failure suite needs it: a provider of the kind, the
//! pieces of a reply (what comes before output, a text delta, the end), its usage, and an
//! error body quoting the key.

use crate::common;

use common::adapters::{KEY, bedrock_at, data, estimated, event, reported, spec};
use common::eventstream;
use common::upstream::{Behaviour, Step, sse_steps};
use model_runtime::config::ProviderSpec;
use model_runtime::execution::UsageUnit;
use model_runtime::provider::ProviderEvent;

#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    OpenAi,
    Responses,
    /// Azure OpenAI (chat completions on the v1 path, an `api-key`): OpenAI's stream.
    Azure,
    Anthropic,
    Gemini,
    /// Vertex AI's Gemini models (a bearer token): Gemini's stream at Vertex AI's path.
    Vertex,
    /// AWS Bedrock's Converse stream: binary event-stream messages.
    Bedrock,
}

pub(super) const KINDS: [Kind; 7] = [
    Kind::OpenAi,
    Kind::Responses,
    Kind::Azure,
    Kind::Anthropic,
    Kind::Gemini,
    Kind::Vertex,
    Kind::Bedrock,
];

/// A Responses API stream event of type `kind` with these further fields.
fn responses_event(kind: &str, fields: &str) -> String {
    event(kind, &format!(r#"{{"type":"{kind}",{fields}}}"#))
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Responses => "openai-responses",
            Self::Azure => "azure-openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Vertex => "vertex",
            Self::Bedrock => "bedrock",
        }
    }

    /// A provider of this kind at `base_url`, with the tests' credentials.
    pub(super) fn spec(self, base_url: &str) -> ProviderSpec {
        match self {
            Self::Bedrock => bedrock_at(base_url),
            Self::Vertex => ProviderSpec::scripted()
                .adapter("vertex")
                .base_url(base_url)
                .vertex("proj", "us-east5", "google")
                .token_env("TEST_API_KEY"),
            _ => spec(self.name(), base_url),
        }
    }

    /// A 200 reply of `events`, one `Send` each.
    pub(super) fn reply(self, events: &[Vec<u8>]) -> Behaviour {
        self.steps(events.iter().cloned().map(Step::Send).collect())
    }

    /// A 200 reply played step by step, with this kind's content type.
    pub(super) fn steps(self, steps: Vec<Step>) -> Behaviour {
        match self {
            Self::Bedrock => eventstream::steps(steps),
            _ => sse_steps(steps),
        }
    }

    /// What comes before the first output: no event of its own.
    pub(super) fn preamble(self) -> Vec<Vec<u8>> {
        match self {
            Self::Bedrock => vec![eventstream::event(
                "messageStart",
                r#"{"p":"abcd","role":"assistant"}"#,
            )],
            _ => self
                .sse_preamble()
                .into_iter()
                .map(String::into_bytes)
                .collect(),
        }
    }

    fn sse_preamble(self) -> Vec<String> {
        match self {
            Self::Bedrock => unreachable!("not a server-sent event stream"),
            Self::OpenAi | Self::Azure => vec![data(
                r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            )],
            Self::Responses => vec![
                responses_event(
                    "response.created",
                    r#""sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"m","output":[],"usage":null}"#,
                ),
                responses_event(
                    "response.output_item.added",
                    r#""sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}"#,
                ),
            ],
            Self::Gemini | Self::Vertex => Vec::new(),
            Self::Anthropic => vec![
                event(
                    "message_start",
                    r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":7,"output_tokens":1}}}"#,
                ),
                event(
                    "content_block_start",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                ),
                event("ping", r#"{"type":"ping"}"#),
            ],
        }
    }

    pub(super) fn delta(self, piece: &str) -> Vec<u8> {
        let piece = serde_json::json!(piece);
        match self {
            Self::Bedrock => eventstream::event(
                "contentBlockDelta",
                &format!(r#"{{"contentBlockIndex":0,"delta":{{"text":{piece}}}}}"#),
            ),
            Self::OpenAi | Self::Azure => data(&format!(
                r#"{{"id":"c","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":{piece}}},"finish_reason":null}}]}}"#
            ))
            .into_bytes(),
            Self::Responses => responses_event(
                "response.output_text.delta",
                &format!(
                    r#""sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":{piece}"#
                ),
            )
            .into_bytes(),
            Self::Anthropic => event(
                "content_block_delta",
                &format!(
                    r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{piece}}}}}"#
                ),
            )
            .into_bytes(),
            Self::Gemini | Self::Vertex => data(&format!(
                r#"{{"candidates":[{{"content":{{"parts":[{{"text":{piece}}}],"role":"model"}},"index":0}}]}}"#
            ))
            .into_bytes(),
        }
    }

    pub(super) fn ending(self) -> Vec<Vec<u8>> {
        match self {
            Self::Bedrock => vec![
                eventstream::event("contentBlockStop", r#"{"contentBlockIndex":0}"#),
                eventstream::event("messageStop", r#"{"stopReason":"end_turn"}"#),
                eventstream::event(
                    "metadata",
                    r#"{"usage":{"inputTokens":7,"outputTokens":2,"totalTokens":9},"metrics":{"latencyMs":120}}"#,
                ),
            ],
            _ => self
                .sse_ending()
                .into_iter()
                .map(String::into_bytes)
                .collect(),
        }
    }

    fn sse_ending(self) -> Vec<String> {
        match self {
            Self::Bedrock => unreachable!("not a server-sent event stream"),
            Self::OpenAi | Self::Azure => vec![
                data(
                    r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                ),
                data(
                    r#"{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}"#,
                ),
                data("[DONE]"),
            ],
            Self::Responses => vec![responses_event(
                "response.completed",
                r#""sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","model":"m","usage":{"input_tokens":7,"output_tokens":2,"total_tokens":9}}"#,
            )],
            Self::Gemini | Self::Vertex => vec![data(
                r#"{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash"}"#,
            )],
            Self::Anthropic => vec![
                event(
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":0}"#,
                ),
                event(
                    "message_delta",
                    r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}"#,
                ),
                event("message_stop", r#"{"type":"message_stop"}"#),
            ],
        }
    }

    /// The usage a call reports when it ends after `pieces` deltas without the provider's
    /// final usage: what the provider said so far, and an estimate of the output.
    pub(super) fn usage_when_cut(self, pieces: u64) -> Vec<ProviderEvent> {
        let output = estimated(UsageUnit::OUTPUT_TOKENS, pieces);
        match self {
            Self::OpenAi
            | Self::Responses
            | Self::Azure
            | Self::Gemini
            | Self::Vertex
            | Self::Bedrock => {
                vec![output]
            }
            Self::Anthropic => vec![reported(UsageUnit::INPUT_TOKENS, 7), output],
        }
    }

    /// The usage of a complete reply.
    pub(super) fn usage_when_done(self) -> Vec<ProviderEvent> {
        vec![
            reported(UsageUnit::INPUT_TOKENS, 7),
            reported(UsageUnit::OUTPUT_TOKENS, 2),
        ]
    }

    pub(super) fn error_body(self, kind: &str) -> String {
        match self {
            Self::OpenAi | Self::Responses | Self::Azure => format!(
                r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","type":"{kind}","param":null,"code":null}}}}"#
            ),
            Self::Anthropic => format!(
                r#"{{"type":"error","error":{{"type":"{kind}","message":"key {KEY} rejected"}}}}"#
            ),
            Self::Gemini | Self::Vertex => format!(
                r#"{{"error":{{"code":400,"message":"API key not valid: {KEY}","status":"{kind}"}}}}"#
            ),
            Self::Bedrock => format!(r#"{{"message":"The security token {KEY} is invalid."}}"#),
        }
    }

    pub(super) fn whole_reply(self, pieces: &[&str]) -> Vec<Vec<u8>> {
        let mut events = self.preamble();
        events.extend(pieces.iter().map(|p| self.delta(p)));
        events.extend(self.ending());
        events
    }
}
