//! How attempts and executions end: results, errors, their classes and codes.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::execution::{AttemptCode, ErrorCode, ToolCall};

/// What another try could do about an attempt error: data set by the adapter, never
/// inferred from text. The class decides the router's next step (CONTRACT 4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ErrorClass {
    /// The same target may succeed later (429, 5xx, overload, a failed connect): retry it,
    /// else fall back.
    Retryable,
    /// This target will not serve this request, another may (401, 403, 404, 413, context
    /// length, an unsupported parameter, any 4xx not provably request-wide): never retried
    /// on the same target; falls back unless the policy says `on_rejected = "stop"`.
    Rejected,
    /// No target could serve it, as the runtime's own mapping of the request proves: stop.
    Invalid,
    /// The remote may still be running the request: it was sent and no response began
    /// (no status line, or silence before the first byte). `on_unknown_outcome` decides:
    /// stop (the default), retry the target, or fall back.
    OutcomeUnknown,
    /// A response began and then broke (a cut, a stall past the idle timeout, a reset, a
    /// malformed event after the status line): it ran and was ended, so its outcome is
    /// known. Before commit it is retried or falls back as `Retryable` does.
    Interrupted,
}

impl ErrorClass {
    /// The name logs, metrics and spans use.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Retryable => "retryable",
            Self::Rejected => "rejected",
            Self::Invalid => "invalid",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::Interrupted => "interrupted",
        }
    }
}

/// What the remote side did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    /// No provider work started.
    NotStarted,
    /// Provider work ran and failed.
    Failed,
    /// Provider work may have run to completion.
    Unknown,
    /// Provider work completed.
    Completed,
    /// Provider work began to answer and was cut off (its response broke): it ran, and its
    /// answer is lost.
    Interrupted,
}

impl Outcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => "not_started",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
            Self::Completed => "completed",
            Self::Interrupted => "interrupted",
        }
    }
}

/// What the router did after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NextAction {
    /// Retry the same target.
    RetrySameTarget,
    /// Fall back to the next target.
    Fallback,
    /// Stop: the execution fails.
    Stop,
}

impl NextAction {
    /// Whether another attempt follows.
    pub fn continues(self) -> bool {
        !matches!(self, Self::Stop)
    }
}

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttemptError {
    /// Retryability.
    pub class: ErrorClass,
    /// Stable code, e.g. `unavailable`.
    pub code: AttemptCode,
    /// Sanitized message: never a secret, never a raw upstream body.
    pub message: String,
    /// The provider's requested back-off.
    pub retry_after: Option<Duration>,
}

/// One attempt against one target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttemptRecord {
    /// 1-based within the execution.
    pub number: u32,
    /// Provider name.
    pub provider: Arc<str>,
    /// Provider model.
    pub model: Arc<str>,
    /// When admission was requested.
    pub started_at: SystemTime,
    /// How long it took; `None` while running.
    pub duration: Option<Duration>,
    /// How it failed; `None` while running or on success.
    pub error: Option<AttemptError>,
    /// Whether output reached the caller.
    pub output_committed: bool,
    /// What the remote did; `None` while running.
    pub outcome: Option<Outcome>,
    /// What the router did next; `None` while running or on success.
    pub next_action: Option<NextAction>,
    /// Whether admission granted a permit and the provider was called.
    pub admitted: bool,
    /// Under buffered delivery, the text and tool calls the attempt produced before it
    /// failed: held back, never exposed, kept here as evidence and never as a result. Empty
    /// under streamed delivery, where output is exposed as it comes.
    #[serde(default, skip_serializing_if = "Output::is_empty")]
    pub held_output: Output,
}

/// Output text, tool calls and the reasoning before them: a result, or partial output kept as
/// evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Output {
    /// Concatenated text deltas.
    pub text: String,
    /// Tool calls with their argument deltas concatenated.
    pub tool_calls: Vec<ToolCall>,
    /// The attempt's reasoning, block by block, as the provider may need it back.
    pub reasoning: Vec<Reasoning>,
}

impl Output {
    /// True when nothing was produced.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.tool_calls.is_empty() && self.reasoning.is_empty()
    }
}

/// One block of a model's reasoning (thinking): its text, with the opaque signature a
/// provider sets on it, or, for a block the provider redacted, only its opaque data. Sent
/// back in an assistant message, it lets a provider check and continue its own reasoning
/// (Anthropic requires it for tool use with thinking).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reasoning {
    /// The reasoning text.
    pub text: String,
    /// The provider's signature of the text; empty when it gave none.
    pub signature: String,
    /// A redacted block's opaque data (no text then); empty otherwise.
    pub redacted: String,
}

/// Why generation stopped, normalized across providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FinishReason {
    /// Natural end or a stop sequence.
    Stop,
    /// Output token limit.
    Length,
    /// The model called tools.
    ToolCalls,
    /// The provider's content filter stopped it.
    ContentFilter,
    /// The model declined to answer: the output is its explanation, not an answer.
    Refusal,
    /// Anything else.
    Other,
}

impl FinishReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
            Self::Refusal => "refusal",
            Self::Other => "other",
        }
    }
}

/// The result of a successful execution.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecutionResult {
    /// The output.
    pub output: Output,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// The provider that produced it.
    pub provider: Arc<str>,
    /// The model that produced it.
    pub model: Arc<str>,
    /// The attempt that produced it.
    pub attempt: u32,
}

/// Why an execution failed or was cancelled.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecutionError {
    /// Stable code.
    pub code: ErrorCode,
    /// Sanitized message.
    pub message: String,
    /// What the remote side did.
    pub outcome: Outcome,
    /// The last attempt's error, if one ran.
    pub last_attempt_error: Option<AttemptError>,
}
