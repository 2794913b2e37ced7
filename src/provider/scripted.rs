//! The `scripted` provider: deterministic behaviour from a typed [`Script`] per model, for the
//! embedded default, tests and benchmarks. It reports usage like a real provider.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream;

use super::{Provider, ProviderCall, ProviderError, ProviderEvent, ProviderStream, plain_stream};
use crate::config::{FailError, Script, ScriptedToolCall};
use crate::execution::{
    AttemptCode, ContentPart, ExecutionInput, FinishReason, Message, NameMap, Role,
};

/// The scripted provider: one script per model.
#[derive(Debug, Default)]
pub(super) struct ScriptedProvider {
    scripts: NameMap<Script>,
}

impl ScriptedProvider {
    /// A provider with these models.
    pub(super) fn new(models: impl IntoIterator<Item = (Arc<str>, Script)>) -> Self {
        Self {
            scripts: models.into_iter().collect(),
        }
    }
}

mod reply;
mod words;

use reply::{Deltas, Pieces, Reply, Source};
use words::count_words;

/// An item of the reply and the wait before it.
type Step = (Duration, Result<ProviderEvent, ProviderError>);

impl Provider for ScriptedProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let Some(script) = self.scripts.get(&call.model) else {
            let error = ProviderError::rejected(
                AttemptCode::ModelNotFound,
                format!("scripted provider has no model `{}`", call.model),
            );
            return plain_stream(stream::iter([Err(error)]));
        };
        if script.hang {
            return plain_stream(stream::pending());
        }
        plain_stream(plan(script, &call))
    }
}

/// The error a scripted failure reports.
fn failure(script: &Script, during: &str) -> ProviderError {
    let message = format!("scripted {during}");
    let mut error = match script.fail_error {
        FailError::Unavailable => ProviderError::retryable(AttemptCode::Unavailable, message),
        FailError::RateLimited => ProviderError::retryable(AttemptCode::RateLimited, message),
        FailError::Rejected => ProviderError::rejected(AttemptCode::Rejected, message),
        FailError::InvalidRequest => ProviderError::invalid(AttemptCode::InvalidRequest, message),
        FailError::TimeoutUnknown => ProviderError::outcome_unknown(AttemptCode::Timeout, message),
        FailError::Internal => ProviderError::retryable(AttemptCode::Internal, message),
    };
    error.retry_after = script.retry_after_ms.map(Duration::from_millis);
    error
}

/// The whole reply of one call, as a stream that makes its deltas as they are read.
fn plan(script: &Script, call: &ProviderCall) -> Reply {
    let first = Duration::from_millis(script.first_delta_ms);
    let interval = Duration::from_millis(script.delta_interval_ms);
    let reasoning = script
        .reasoning
        .as_ref()
        .map(|text| Pieces::new(Source::Owned(text.clone()), script.chunk));
    let input_tokens = call.input.messages.iter().map(|m| words(m) as u64).sum();
    if call.target_attempt <= script.fail_attempts {
        // Reasoning commits nothing: a failure after it still fails before output.
        let error = failure(script, "failure before output");
        return Reply::failed(first, error, input_tokens).with_reasoning(reasoning);
    }
    let (deltas, finish) = match (&script.tool_call, &script.reply) {
        (Some(tool), _) => {
            let mut events = VecDeque::new();
            tool_call_events(tool, call.attempt, |event| events.push_back(event));
            (Deltas::Events(events), FinishReason::ToolCalls)
        }
        (None, Some(reply)) => {
            let pieces = Pieces::new(Source::Owned(reply.clone()), script.chunk);
            (Deltas::Text(pieces), FinishReason::Stop)
        }
        (None, None) => {
            let pieces = Pieces::new(echo(&call.input), script.chunk);
            (Deltas::Text(pieces), FinishReason::Stop)
        }
    };
    let fail_after = script
        .fail_after_deltas
        .map(|n| (u64::from(n), failure(script, "failure mid-stream")));
    Reply::new(deltas, fail_after, input_tokens, finish, (first, interval))
        .with_reasoning(reasoning)
}

/// The last user message's text: in place when it is one text part, as it nearly always is.
fn echo(input: &Arc<ExecutionInput>) -> Source {
    let Some(message) = input.messages.iter().rposition(|m| m.role == Role::User) else {
        return Source::Owned(String::new());
    };
    match input.messages[message].content.as_slice() {
        [ContentPart::Text(_)] => Source::Part {
            input: input.clone(),
            message,
            part: 0,
        },
        _ => Source::Owned(input.messages[message].text().into_owned()),
    }
}

/// Whitespace-separated words of a message's text, the scripted stand-in for tokens.
fn words(message: &Message) -> usize {
    count_words(&message.text())
}

fn tool_call_events(tool: &ScriptedToolCall, attempt: u32, mut event: impl FnMut(ProviderEvent)) {
    event(ProviderEvent::ToolCallStarted {
        index: 0,
        id: format!("call_{attempt}"),
        name: tool.name.clone(),
    });
    // Split the arguments in two, as providers do, on a character boundary.
    let args = &tool.arguments;
    let mid = (0..=args.len() / 2)
        .rev()
        .find(|i| args.is_char_boundary(*i))
        .unwrap_or(0);
    for piece in [&args[..mid], &args[mid..]] {
        if !piece.is_empty() {
            event(ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: piece.into(),
            });
        }
    }
}

#[cfg(test)]
mod tests;
