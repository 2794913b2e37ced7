//! The Provider SPI: one small object-safe trait every adapter implements. An adapter turns a
//! [`ProviderCall`] into a stream of [`ProviderEvent`]s ending with `Finished`, or an error
//! whose [`ErrorClass`] the adapter decides (retryability is data, never parsed from text).

pub mod anthropic;
mod exchange;
mod http;
pub mod openai;
mod registry;
pub mod scripted;
mod sse;
mod tally;
mod wire;

pub use registry::{ProviderInitError, ProviderSlot, Providers};

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;

use crate::execution::{ErrorClass, ExecutionId, ExecutionInput, FinishReason};
use crate::usage::UsageQuantity;

/// One attempt's call to a provider model.
#[derive(Debug, Clone)]
pub struct ProviderCall {
    /// The execution it serves.
    pub execution_id: ExecutionId,
    /// Attempt number within the execution.
    pub attempt: u32,
    /// 1-based count of attempts on this target within the execution.
    pub target_attempt: u32,
    /// The provider model.
    pub model: Arc<str>,
    /// What to send.
    pub input: Arc<ExecutionInput>,
    /// The attempt must end by then; the runtime also enforces it by dropping the stream.
    pub deadline: tokio::time::Instant,
}

/// What a provider streams back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderEvent {
    /// A piece of text output.
    TextDelta(String),
    /// The model began a tool call.
    ToolCallStarted {
        /// Position in the reply.
        index: u32,
        /// Provider's call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A piece of a tool call's arguments.
    ToolCallArgumentsDelta {
        /// Position in the reply.
        index: u32,
        /// JSON text piece.
        delta: String,
    },
    /// A progress note (does not commit output).
    Progress(String),
    /// A usage quantity (does not commit output).
    Usage(UsageQuantity),
    /// The reply is complete; the stream ends.
    Finished(FinishReason),
}

/// A failed call, classified by the adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    /// Retryability.
    pub class: ErrorClass,
    /// Stable lowercase code, e.g. `unavailable`, `rate_limited`.
    pub code: &'static str,
    /// Sanitized message; never a secret.
    pub message: String,
    /// The provider's requested back-off.
    pub retry_after: Option<Duration>,
}

impl ProviderError {
    /// A retryable error.
    pub fn retryable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Retryable, code, message)
    }

    /// An error retrying cannot fix.
    pub fn non_retryable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::NonRetryable, code, message)
    }

    /// An error after which the remote may still be running the request.
    pub fn outcome_unknown(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::OutcomeUnknown, code, message)
    }

    fn new(class: ErrorClass, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            class,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// The stream of one call. Dropping it aborts the call.
pub type ProviderStream = Pin<Box<dyn Stream<Item = Result<ProviderEvent, ProviderError>> + Send>>;

/// A model provider.
pub trait Provider: Send + Sync + fmt::Debug + 'static {
    /// Starts one call. Errors before the first byte are reported as the stream's first item.
    fn call(&self, call: ProviderCall) -> ProviderStream;
}
