//! The `script` of a `scripted` model: typed, so a test or the embedded default says what a
//! fake model does instead of encoding it in magic model names. The scripted provider plays it.

use serde::{Deserialize, Serialize};

use super::bounds::{MAX_SCRIPTED_COUNT, MAX_WAIT};

/// How a scripted model behaves. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The reply; default: echo the last user message.
    pub reply: Option<String>,
    /// Reasoning streamed (as `output.reasoning.delta`, cut like the reply) before the reply,
    /// and before a failure before output.
    pub reasoning: Option<String>,
    /// How the reply is cut into deltas.
    #[serde(default)]
    pub chunk: Chunk,
    /// Delay before the first event, in milliseconds.
    #[serde(default)]
    pub first_delta_ms: u64,
    /// Delay between deltas, in milliseconds.
    #[serde(default)]
    pub delta_interval_ms: u64,
    /// The first N attempts of each execution on this model fail before output.
    #[serde(default)]
    pub fail_attempts: u32,
    /// The error those attempts (and `fail_after_deltas`) report.
    #[serde(default)]
    pub fail_error: FailError,
    /// With `fail_error = "rate_limited"`: the Retry-After the error carries, in milliseconds.
    pub retry_after_ms: Option<u64>,
    /// Fail mid-stream after N deltas.
    pub fail_after_deltas: Option<u32>,
    /// Never answer (until the runtime gives up on the attempt).
    #[serde(default)]
    pub hang: bool,
    /// Emit this tool call instead of text.
    pub tool_call: Option<ScriptedToolCall>,
}

/// How the reply is cut into deltas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Chunk {
    /// One delta per word, each with its trailing whitespace.
    #[default]
    Word,
    /// One delta per character.
    Char,
}

/// The error a scripted failure reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailError {
    /// Retryable, like HTTP 503.
    #[default]
    Unavailable,
    /// Retryable, like HTTP 429.
    RateLimited,
    /// Rejected by this target, like HTTP 401 or 404: the next target is tried.
    Rejected,
    /// Invalid for every target, like a request the runtime cannot represent: the execution
    /// stops.
    InvalidRequest,
    /// Outcome unknown, like a timeout after the request was sent.
    TimeoutUnknown,
    /// Retryable, like HTTP 500.
    Internal,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Tool name.
    pub name: String,
    /// Arguments as JSON text.
    pub arguments: String,
}

impl Script {
    /// Checks the script; on error returns the field and the reason.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let max_ms = MAX_WAIT.as_millis();
        for (field, ms) in [
            ("first_delta_ms", Some(self.first_delta_ms)),
            ("delta_interval_ms", Some(self.delta_interval_ms)),
            ("retry_after_ms", self.retry_after_ms),
        ] {
            if ms.is_some_and(|ms| u128::from(ms) > max_ms) {
                return Err((field, format!("must be at most {max_ms}")));
            }
        }
        for (field, n) in [
            ("fail_attempts", Some(self.fail_attempts)),
            ("fail_after_deltas", self.fail_after_deltas),
        ] {
            if n.is_some_and(|n| n > MAX_SCRIPTED_COUNT) {
                return Err((field, format!("must be at most {MAX_SCRIPTED_COUNT}")));
            }
        }
        if let Some(call) = &self.tool_call {
            if call.name.is_empty() {
                return Err(("tool_call.name", "must not be empty".into()));
            }
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&call.arguments) {
                return Err(("tool_call.arguments", format!("is not JSON text: {e}")));
            }
        }
        if self.retry_after_ms.is_some() && self.fail_error != FailError::RateLimited {
            return Err((
                "retry_after_ms",
                "only applies to `fail_error = \"rate_limited\"`".into(),
            ));
        }
        Ok(())
    }
}
