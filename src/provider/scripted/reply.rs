//! A scripted reply as a stream made as it is read: a reply of a million words is the text
//! and a position in it, never a million events in memory at once.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::time::Sleep;

use super::Step;
use super::words::{ends_word, tally, word_len};
use crate::config::Chunk;
use crate::execution::{
    ContentPart, ExecutionInput, FinishReason, ReasoningPiece, Text, UsageQuantity, UsageSource,
    UsageUnit,
};
use crate::provider::{ProviderError, ProviderEvent};

/// Where the deltas come from.
pub(super) enum Deltas {
    /// Events made in advance (a tool call's few).
    Events(VecDeque<ProviderEvent>),
    /// Text cut into pieces as they are read.
    Text(Pieces),
}

/// The text a reply cuts into deltas.
pub(super) enum Source {
    /// Text of its own (a scripted reply, or an echo joined from several parts).
    Owned(String),
    /// One text part of the input, read in place: an echo of a 1 MiB prompt is not a second
    /// MiB.
    Part {
        input: Arc<ExecutionInput>,
        message: usize,
        part: usize,
    },
}

impl Source {
    fn as_str(&self) -> &str {
        match self {
            Self::Owned(text) => text,
            Self::Part {
                input,
                message,
                part,
            } => match input
                .messages
                .get(*message)
                .and_then(|m| m.content.get(*part))
            {
                Some(ContentPart::Text(text)) => text,
                _ => "",
            },
        }
    }
}

/// Text cut into words (each with the whitespace after it) or characters, from `at` on.
pub(super) struct Pieces {
    source: Source,
    at: usize,
    chunk: Chunk,
}

impl Pieces {
    pub(super) fn new(source: Source, chunk: Chunk) -> Self {
        Self {
            source,
            at: 0,
            chunk,
        }
    }

    fn is_empty(&self) -> bool {
        self.at >= self.source.as_str().len()
    }

    /// At least how many pieces are left (each whitespace character ends a word), counted
    /// over no more than [`HINT_SCAN`] bytes.
    fn at_least(&self) -> usize {
        let rest = self
            .source
            .as_str()
            .as_bytes()
            .get(self.at..)
            .unwrap_or_default();
        let seen = &rest[..rest.len().min(HINT_SCAN)];
        match self.chunk {
            // A character is at most four bytes.
            Chunk::Char => seen.len().div_ceil(4),
            // ASCII whitespace only: other whitespace ends more words, never fewer. A last
            // word with no ASCII whitespace after it counts once the text was read to its end.
            Chunk::Word => {
                let last = seen.len() == rest.len() && seen.last().is_some_and(|&b| !ends_word(b));
                let words = tally(seen, |_, byte| ends_word(byte)) + usize::from(last);
                words.max(usize::from(!seen.is_empty()))
            }
        }
    }

    fn next(&mut self) -> Option<Text> {
        let text = self.source.as_str();
        let rest = text.get(self.at..).filter(|rest| !rest.is_empty())?;
        let len = match self.chunk {
            Chunk::Char => rest.chars().next().map_or(0, char::len_utf8),
            Chunk::Word => word_len(rest),
        };
        self.at += len;
        Some(Text::from(&rest[..len]))
    }
}

/// The most bytes of a reply's text its length hint reads: the words of a usual reply, and
/// a batch's worth (the driver takes 64 items at most) of most longer ones.
const HINT_SCAN: usize = 4096;

/// The reply: its deltas (the first after `first`, the rest `interval` apart), up to a
/// scripted failure; then usage and the finish, or the failure if deltas were left.
pub(super) struct Reply {
    deltas: Deltas,
    /// Fail after this many deltas, if more would follow.
    fail_after: Option<(u64, ProviderError)>,
    input_tokens: u64,
    finish: FinishReason,
    first: Duration,
    interval: Duration,
    /// Reasoning streamed before the deltas (and before a failure before output).
    reasoning: Option<Pieces>,
    /// Reasoning pieces sent so far.
    thought: u64,
    /// Deltas sent so far.
    sent: u64,
    /// What follows the deltas, made when they end.
    tail: VecDeque<Step>,
    ended: bool,
    /// The next item, waiting out its delay.
    waiting: Option<Waiting>,
}

type Waiting = (Pin<Box<Sleep>>, Result<ProviderEvent, ProviderError>);

impl Reply {
    /// A reply of `deltas`, with the usage a provider reports and `finish`.
    pub(super) fn new(
        deltas: Deltas,
        fail_after: Option<(u64, ProviderError)>,
        input_tokens: u64,
        finish: FinishReason,
        (first, interval): (Duration, Duration),
    ) -> Self {
        Self {
            deltas,
            fail_after,
            input_tokens,
            finish,
            first,
            interval,
            reasoning: None,
            thought: 0,
            sent: 0,
            tail: VecDeque::new(),
            ended: false,
            waiting: None,
        }
    }

    /// A reply that fails before any output, after `delay`, reporting its usage first (the
    /// prompt, and any reasoning streamed), as a provider bills a failed call.
    pub(super) fn failed(delay: Duration, error: ProviderError, input_tokens: u64) -> Self {
        Self::new(
            Deltas::Events(VecDeque::new()),
            Some((0, error)),
            input_tokens,
            FinishReason::Other,
            (delay, delay),
        )
    }

    /// The reply with `reasoning` streamed first.
    pub(super) fn with_reasoning(mut self, reasoning: Option<Pieces>) -> Self {
        self.reasoning = reasoning;
        self
    }

    /// The delay before the next item: `first` before the first, then `interval`.
    fn delay(&self) -> Duration {
        if self.sent + self.thought == 0 {
            self.first
        } else {
            self.interval
        }
    }

    fn next_step(&mut self) -> Option<Step> {
        if let Some(piece) = self.reasoning.as_mut().and_then(Pieces::next) {
            let delay = self.delay();
            self.thought += 1;
            let thought = ProviderEvent::Reasoning(ReasoningPiece::Text, piece);
            return Some((delay, Ok(thought)));
        }
        if !self.ended {
            let stop = matches!(&self.fail_after, Some((n, _)) if self.sent >= *n);
            let delta = match &mut self.deltas {
                _ if stop => None,
                Deltas::Events(events) => events.pop_front(),
                Deltas::Text(pieces) => pieces.next().map(ProviderEvent::TextDelta),
            };
            if let Some(delta) = delta {
                let delay = self.delay();
                self.sent += 1;
                return Some((delay, Ok(delta)));
            }
            self.end();
        }
        self.tail.pop_front()
    }

    /// At least how many items are left: the deltas (up to a scripted failure), then the
    /// usage and the finish (or the failure), besides what is waiting or made already.
    fn at_least(&self) -> usize {
        let made = self.tail.len() + usize::from(self.waiting.is_some());
        if self.ended {
            return made;
        }
        let deltas = match &self.deltas {
            Deltas::Events(events) => events.len(),
            Deltas::Text(pieces) => pieces.at_least(),
        };
        match &self.fail_after {
            // Usage only if billed: the failure at least.
            Some((after, _)) => {
                let left = usize::try_from(after.saturating_sub(self.sent)).unwrap_or(usize::MAX);
                made + deltas.min(left) + 1
            }
            // Input and output tokens, and the finish.
            None => made + deltas + 3,
        }
    }

    /// The deltas ended: usage (every delta an output token), then the scripted failure if
    /// some were left (a provider that fails mid-stream has still billed what it streamed,
    /// as the HTTP adapters report), else the finish.
    fn end(&mut self) {
        self.ended = true;
        let left = match &self.deltas {
            Deltas::Events(events) => !events.is_empty(),
            Deltas::Text(pieces) => !pieces.is_empty(),
        };
        // A failure after 0 deltas is a failure before output: due whatever is left.
        let failure = self
            .fail_after
            .take()
            .filter(|(after, _)| left || *after == 0)
            .map(|(_, error)| error);
        // Usage waits for the first delay only when no delta did; a failure waits the
        // interval, as the next delta would have.
        let delay = match (&failure, self.sent + self.thought) {
            (Some(_), _) => self.interval,
            (None, 0) => self.first,
            (None, _) => Duration::ZERO,
        };
        // Reasoning is billed as output, and reported as the part of it that it is.
        let reasoning = (self.thought > 0).then_some((UsageUnit::REASONING_TOKENS, self.thought));
        let counts = [
            (UsageUnit::INPUT_TOKENS, self.input_tokens),
            (UsageUnit::OUTPUT_TOKENS, self.sent + self.thought),
        ];
        // A call that fails before it produced anything (a 503, a 429) was not billed.
        let billed = failure.is_none() || self.sent + self.thought > 0;
        let counts = counts.into_iter().chain(reasoning).filter(|_| billed);
        for (unit, quantity) in counts {
            let usage = UsageQuantity {
                unit,
                quantity,
                source: UsageSource::ProviderReported,
            };
            self.tail
                .push_back((delay, Ok(ProviderEvent::Usage(usage))));
        }
        match failure {
            Some(error) => self.tail.push_back((Duration::ZERO, Err(error))),
            None => {
                let finished = ProviderEvent::Finished(self.finish);
                self.tail.push_back((Duration::ZERO, Ok(finished)));
            }
        }
    }
}

impl Stream for Reply {
    type Item = Result<ProviderEvent, ProviderError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let reply = self.get_mut();
        loop {
            if let Some((sleep, _)) = &mut reply.waiting {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                return Poll::Ready(reply.waiting.take().map(|(_, item)| item));
            }
            let Some((delay, item)) = reply.next_step() else {
                return Poll::Ready(None);
            };
            if delay.is_zero() {
                return Poll::Ready(Some(item));
            }
            reply.waiting = Some((Box::pin(tokio::time::sleep(delay)), item));
        }
    }

    /// A lower bound, so that a reader taking what is ready makes room once.
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.at_least(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cut_as_split_inclusive_does() {
        let texts = [
            "",
            "a",
            "hello big  world ",
            " lead",
            "é ü\tß\n",
            "tail  ",
            "v\x0btab\x0cfeed\rret",
            "nb\u{a0}sp\u{3000}wide\u{2028}line\u{85}next",
        ];
        for text in texts {
            let want: Vec<&str> = text.split_inclusive(char::is_whitespace).collect();
            let mut pieces = Pieces::new(Source::Owned(text.to_owned()), Chunk::Word);
            let got: Vec<Text> = std::iter::from_fn(|| pieces.next()).collect();
            assert_eq!(got, want, "{text:?}");
            let want: Vec<String> = text.chars().map(String::from).collect();
            let mut pieces = Pieces::new(Source::Owned(text.to_owned()), Chunk::Char);
            let got: Vec<Text> = std::iter::from_fn(|| pieces.next()).collect();
            assert_eq!(got, want, "{text:?}");
        }
    }

    /// Every kind of reply read item by item, its delays waited out on a paused clock: the
    /// hint, before each item and while one waits, is never more than the items left.
    #[tokio::test(start_paused = true)]
    async fn the_length_hint_never_exceeds_the_items_left() {
        use futures_util::{FutureExt, StreamExt};

        for (case, mut reply) in replies() {
            // (items read so far, the hint then)
            let mut hints = vec![(0, reply.size_hint().0)];
            let mut read = 0;
            loop {
                let item = match reply.next().now_or_never() {
                    Some(item) => item,
                    None => {
                        hints.push((read, reply.size_hint().0));
                        reply.next().await
                    }
                };
                if item.is_none() {
                    break;
                }
                read += 1;
                hints.push((read, reply.size_hint().0));
            }
            for (before, hint) in &hints {
                assert!(
                    *hint <= read - before,
                    "{case}: {read} items, hints {hints:?}"
                );
            }
            // Enough to take a usual reply, or a batch of a long one, in one allocation.
            if case == "hello big  world  Word None 0ms" {
                assert_eq!(hints[0].1, 7, "four words, two usage facts and the finish");
            }
            if case.starts_with("word word") && case.contains("None") {
                assert!(hints[0].1 > 64, "{case}: {hints:?}");
            }
        }
    }

    /// Replies of every kind: texts cut both ways, with and without a failure, reasoning or
    /// delays; a tool call's events; a failure before output.
    fn replies() -> Vec<(String, Reply)> {
        let error = || ProviderError::retryable(crate::execution::AttemptCode::Unavailable, "x");
        let long = "word ".repeat(2000);
        let texts = [
            "",
            "a",
            "hello big  world ",
            "é ü\tß\n",
            "x \u{a0}",
            "x\u{3000}",
            "v\x0btab\x0cfeed\rret",
            "nb\u{a0}sp\u{3000}wide\u{2028}line\u{85}next",
            &long,
        ];
        let mut replies = Vec::new();
        for text in texts {
            for chunk in [Chunk::Word, Chunk::Char] {
                for fail in [None, Some(0), Some(2), Some(10_000)] {
                    for delay in [Duration::ZERO, Duration::from_millis(3)] {
                        let reply = || {
                            let pieces = Pieces::new(Source::Owned(text.to_owned()), chunk);
                            Reply::new(
                                Deltas::Text(pieces),
                                fail.map(|n| (n, error())),
                                3,
                                FinishReason::Stop,
                                (delay, delay),
                            )
                        };
                        let head: String = text.chars().take(18).collect();
                        let case = format!("{head} {chunk:?} {fail:?} {}ms", delay.as_millis());
                        let thinks = Pieces::new(Source::Owned("so then ".into()), chunk);
                        let thinking = reply().with_reasoning(Some(thinks));
                        replies.push((format!("{case} reasoning"), thinking));
                        replies.push((case, reply()));
                    }
                }
            }
        }
        for fail in [None, Some(1)] {
            let events = VecDeque::from([
                ProviderEvent::ToolCallStarted {
                    index: 0,
                    id: "call_1".into(),
                    name: "lookup".into(),
                },
                ProviderEvent::ToolCallArgumentsDelta {
                    index: 0,
                    delta: "{\"q\":".into(),
                },
                ProviderEvent::ToolCallArgumentsDelta {
                    index: 0,
                    delta: "\"x\"}".into(),
                },
            ]);
            let reply = Reply::new(
                Deltas::Events(events),
                fail.map(|n| (n, error())),
                3,
                FinishReason::ToolCalls,
                (Duration::ZERO, Duration::from_millis(1)),
            );
            replies.push((format!("tool call {fail:?}"), reply));
        }
        let failed = Reply::failed(Duration::from_millis(2), error(), 3);
        replies.push(("failed before output".into(), failed));
        replies
    }
}
