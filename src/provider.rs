//! The Provider SPI: one small object-safe trait every adapter implements. An adapter turns a
//! [`ProviderCall`] into a stream of [`ProviderEvent`]s ending with `Finished`, or an error
//! whose [`ErrorClass`] the adapter decides (retryability is data, never parsed from text).

mod anthropic;
mod azure;
mod bedrock;
mod deferred;
mod eventstream;
mod exchange;
mod fetch;
mod framing;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fuzz;
mod gemini;
mod http;
mod openai;
mod refresh;
mod registry;
mod responses;
mod scan;
mod scripted;
mod service_account;
mod sse;
mod tally;
mod token_file;
mod vertex;
mod wire;

pub use registry::{ProviderInitError, Providers};

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;

use crate::execution::{
    AttemptCode, ErrorClass, ExecutionId, ExecutionInput, FinishReason, ReasoningPiece, Text,
    TraceContext, UsageQuantity,
};

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
    /// The trace the request continues (`traceparent`, `tracestate`), if any.
    pub trace: Option<TraceContext>,
}

/// What a provider streams back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderEvent {
    /// A piece of text output.
    TextDelta(Text),
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
        delta: Text,
    },
    /// A piece of the model's reasoning (does not commit output): thinking text, the
    /// signature that closes a block of it, or a redacted block's opaque data.
    Reasoning(ReasoningPiece, Text),
    /// A progress note (does not commit output).
    Progress(Text),
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
    /// What went wrong, e.g. `unavailable`, `rate_limited`.
    pub code: AttemptCode,
    /// Sanitized message; never a secret.
    pub message: String,
    /// The provider's requested back-off.
    pub retry_after: Option<Duration>,
}

impl ProviderError {
    /// A retryable error.
    pub fn retryable(code: AttemptCode, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Retryable, code, message)
    }

    /// An error this target will repeat for this request, and another target may not.
    pub fn rejected(code: AttemptCode, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Rejected, code, message)
    }

    /// An error no target could avoid: the request cannot be sent as it is.
    pub fn invalid(code: AttemptCode, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Invalid, code, message)
    }

    /// An error after which the remote may still be running the request.
    pub fn outcome_unknown(code: AttemptCode, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::OutcomeUnknown, code, message)
    }

    /// A response that began and then broke: it ran, and was ended.
    pub fn interrupted(code: AttemptCode, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Interrupted, code, message)
    }

    fn new(class: ErrorClass, code: AttemptCode, message: impl Into<String>) -> Self {
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

/// One call's stream of events. Besides its items it can say what usage it knows but has not
/// yielded, for when the runtime stops reading it early: a cut attempt reports its usage too
/// (CONTRACT section 5).
pub trait CallStream: Stream<Item = Result<ProviderEvent, ProviderError>> + Send {
    /// The usage this call knows but has not yielded as `Usage` events, as it would report
    /// it were the call to end now: provider-reported counts, and an output estimate
    /// (`runtime_estimated`) where the provider has not counted the output yet. The runtime
    /// asks once, when it stops reading before the stream ended (cancellation, a time limit),
    /// then drops the stream; asking changes nothing the stream yields later.
    ///
    /// The default, nothing, suits a stream that yields every usage quantity as soon as it
    /// knows it.
    fn unreported_usage(self: Pin<&mut Self>) -> Vec<UsageQuantity> {
        Vec::new()
    }

    /// The model the provider says produced the reply, once it has said so (OpenAI's
    /// `model` on its chunks, Anthropic's in `message_start`): traces report it as the
    /// response's model. The default, `None`, leaves the model the call asked for.
    fn response_model(&self) -> Option<Text> {
        None
    }

    /// Whether the call's request may have reached the provider. A call that must first
    /// await something (credentials fetched or minted) says `false` until it sends: cut
    /// before then, its attempt started nothing (`not_started`), not an unknown outcome.
    /// The default, `true`, suits a call that sends as soon as it is polled.
    fn sent(&self) -> bool {
        true
    }
}

/// The stream of one call. Dropping it aborts the call.
pub type ProviderStream = Pin<Box<dyn CallStream>>;

/// A [`ProviderStream`] of a stream that keeps no usage back, so has none to hand over when
/// cut (the scripted provider, one-item error streams, test fakes). One that is not `Unpin`
/// comes pinned in a box of its own (`Box::pin`).
pub fn plain_stream<S>(stream: S) -> ProviderStream
where
    S: Stream<Item = Result<ProviderEvent, ProviderError>> + Send + Unpin + 'static,
{
    Box::pin(Plain(stream))
}

/// A call that failed before its request could go out (its body could not be built, its
/// credentials could not be had): `error` is its only item, and nothing was sent.
pub(crate) fn unsent(error: ProviderError) -> ProviderStream {
    Box::pin(Unsent(Some(error)))
}

/// See [`unsent`].
struct Unsent(Option<ProviderError>);

impl Stream for Unsent {
    type Item = Result<ProviderEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.take().map(Err))
    }
}

impl CallStream for Unsent {
    fn sent(&self) -> bool {
        false
    }
}

/// See [`plain_stream`]. `Unpin`, so polled in place: one box (the call's), not two.
struct Plain<S>(S);

impl<S> Stream for Plain<S>
where
    S: Stream<Item = Result<ProviderEvent, ProviderError>> + Unpin,
{
    type Item = Result<ProviderEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.0).poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<S> CallStream for Plain<S> where
    S: Stream<Item = Result<ProviderEvent, ProviderError>> + Send + Unpin
{
}

/// A model provider.
pub trait Provider: Send + Sync + fmt::Debug + 'static {
    /// Starts one call. Errors before the first byte are reported as the stream's first item.
    fn call(&self, call: ProviderCall) -> ProviderStream;
}
