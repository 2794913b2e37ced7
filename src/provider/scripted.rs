//! The `scripted` provider: deterministic behaviour from a typed [`Script`] per model, for the
//! embedded default, tests and benchmarks. It reports usage like a real provider.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};

use super::{Provider, ProviderCall, ProviderError, ProviderEvent, ProviderStream, plain_stream};
use crate::config::{Chunk, FailError, Script, ScriptedToolCall};
use crate::execution::{
    AttemptCode, ContentPart, FinishReason, Message, UsageQuantity, UsageSource, UsageUnit,
};

/// The scripted provider: one script per model.
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    scripts: HashMap<Arc<str>, Script>,
}

impl ScriptedProvider {
    /// A provider with these models.
    pub fn new(models: impl IntoIterator<Item = (Arc<str>, Script)>) -> Self {
        Self {
            scripts: models.into_iter().collect(),
        }
    }
}

type Step = (Duration, Result<ProviderEvent, ProviderError>);

impl Provider for ScriptedProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let Some(script) = self.scripts.get(&call.model) else {
            let error = ProviderError::non_retryable(
                AttemptCode::ModelNotFound,
                format!("scripted provider has no model `{}`", call.model),
            );
            return plain_stream(stream::iter([Err(error)]));
        };
        if script.hang {
            return plain_stream(stream::pending());
        }
        let steps = plan(script, &call);
        if steps.iter().all(|(delay, _)| delay.is_zero()) {
            // Nothing to wait for: the items as they are, without a future per item.
            return plain_stream(stream::iter(steps.into_iter().map(|(_, item)| item)));
        }
        plain_stream(stream::iter(steps).then(|(delay, item)| async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            item
        }))
    }
}

/// The error a scripted failure reports.
fn failure(script: &Script, during: &str) -> ProviderError {
    let message = format!("scripted {during}");
    let mut error = match script.fail_error {
        FailError::Unavailable => ProviderError::retryable(AttemptCode::Unavailable, message),
        FailError::RateLimited => ProviderError::retryable(AttemptCode::RateLimited, message),
        FailError::InvalidRequest => {
            ProviderError::non_retryable(AttemptCode::InvalidRequest, message)
        }
        FailError::TimeoutUnknown => ProviderError::outcome_unknown(AttemptCode::Timeout, message),
        FailError::Internal => ProviderError::retryable(AttemptCode::Internal, message),
    };
    error.retry_after = script.retry_after_ms.map(Duration::from_millis);
    error
}

/// The whole reply of one call as timed steps.
fn plan(script: &Script, call: &ProviderCall) -> Vec<Step> {
    let first = Duration::from_millis(script.first_delta_ms);
    let interval = Duration::from_millis(script.delta_interval_ms);
    if call.target_attempt <= script.fail_attempts {
        return vec![(first, Err(failure(script, "failure before output")))];
    }
    let input_tokens = call.input.messages.iter().map(|m| words(m) as u64).sum();
    let echo;
    let reply = match (&script.tool_call, &script.reply) {
        (Some(_), _) => "",
        (None, Some(reply)) => reply.as_str(),
        (None, None) => {
            echo = call.input.last_user_text().unwrap_or_default();
            echo.as_str()
        }
    };
    // The deltas go straight into the steps, up to a scripted failure; every delta of the
    // full reply counts as an output token. Room for the usual reply, its usage and end.
    let expected = match script.chunk {
        // A word and the whitespace after it: rarely under four bytes.
        Chunk::Word => reply.len() / 4 + 1,
        Chunk::Char => reply.len(),
    };
    let mut steps = Vec::with_capacity(expected + 3);
    let mut output_tokens = 0u64;
    let mut delta = |event: ProviderEvent| {
        if script
            .fail_after_deltas
            .is_none_or(|n| output_tokens < u64::from(n))
        {
            let delay = if output_tokens == 0 { first } else { interval };
            steps.push((delay, Ok(event)));
        }
        output_tokens += 1;
    };
    let finish = match &script.tool_call {
        Some(tool) => {
            tool_call_events(tool, call.attempt, &mut delta);
            FinishReason::ToolCalls
        }
        None => {
            chunks(reply, script.chunk, |piece| {
                delta(ProviderEvent::TextDelta(piece.into()));
            });
            FinishReason::Stop
        }
    };
    let delay = if steps.is_empty() {
        first
    } else {
        Duration::ZERO
    };
    if script
        .fail_after_deltas
        .is_some_and(|n| (n as usize) == steps.len() && u64::from(n) < output_tokens)
    {
        steps.push((interval, Err(failure(script, "failure mid-stream"))));
        return steps;
    }
    for (unit, quantity) in [
        (UsageUnit::INPUT_TOKENS, input_tokens),
        (UsageUnit::OUTPUT_TOKENS, output_tokens),
    ] {
        let usage = UsageQuantity {
            unit,
            quantity,
            source: UsageSource::ProviderReported,
        };
        steps.push((delay, Ok(ProviderEvent::Usage(usage))));
    }
    steps.push((Duration::ZERO, Ok(ProviderEvent::Finished(finish))));
    steps
}

/// Whitespace-separated words of a message's text, the scripted stand-in for tokens; without
/// joining the text when it is one part, as it nearly always is.
fn words(message: &Message) -> usize {
    match message.content.as_slice() {
        [ContentPart::Text(text)] => text.split_whitespace().count(),
        _ => message.text().split_whitespace().count(),
    }
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

/// Cuts `text` into word pieces (each keeping the whitespace after it) or characters.
fn chunks<'a>(text: &'a str, chunk: Chunk, mut piece: impl FnMut(&'a str)) {
    match chunk {
        Chunk::Char => {
            for (i, c) in text.char_indices() {
                piece(&text[i..i + c.len_utf8()]);
            }
        }
        Chunk::Word => text.split_inclusive(char::is_whitespace).for_each(piece),
    }
}

#[cfg(test)]
mod tests;
