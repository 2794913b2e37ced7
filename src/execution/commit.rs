//! The commit rule of the draft, in one place: "Fallback is allowed only before any text
//! delta, tool call, tool-argument delta, or result is exposed. After output begins, an error
//! is terminal and non-retryable; partial output remains diagnostic evidence and must not be
//! treated as a successful result. Progress and usage events alone do not commit output."
//!
//! - What commits: [`EventPayload::commits_output`], the one definition. The state machine,
//!   the view, the driver's [`CommitTracker`] and the router all ask it.
//! - What follows a failure after commit: [`after_failure`], which the router and the state
//!   machine both obey.
//! - What output is: [`Output::absorb`] folds output events into text and tool calls, for the
//!   result, for partial output as evidence, and for the view.
//! - What "exposed" means: an output event is exposed once it is appended, where any reader
//!   may see it. Under streamed delivery that is as it arrives; under buffered delivery
//!   ([`Delivery::Buffered`]) an attempt's output is held and appended only with its
//!   completion, so an attempt commits when it succeeds and never before
//!   ([`CommitTracker::expose`]).

use crate::execution::{
    Delivery, ErrorCode, EventPayload, Output, Reasoning, ReasoningPiece, ToolCall,
};

impl EventPayload {
    /// Whether the event is an output delta: text, a tool call or a tool-argument delta.
    pub(crate) fn is_output(&self) -> bool {
        matches!(
            self,
            Self::TextDelta { .. }
                | Self::ToolCallStarted { .. }
                | Self::ToolCallArgumentsDelta { .. }
        )
    }

    /// Whether the event exposes output to the caller: an output delta that carries something.
    /// The first such event of an attempt commits it.
    pub(crate) fn commits_output(&self) -> bool {
        match self {
            Self::TextDelta { text, .. } => !text.is_empty(),
            Self::ToolCallStarted { .. } => true,
            Self::ToolCallArgumentsDelta { delta, .. } => !delta.is_empty(),
            _ => false,
        }
    }

    /// The bytes of output the event carries: text, a tool call's id and name, a piece of
    /// its arguments, reasoning (which commits nothing, but is kept all the same).
    pub(crate) fn output_bytes(&self) -> usize {
        match self {
            Self::TextDelta { text, .. } | Self::ReasoningDelta { text, .. } => text.len(),
            Self::ToolCallStarted(call) => call.id.len() + call.name.len(),
            Self::ToolCallArgumentsDelta { delta, .. } => delta.len(),
            _ => 0,
        }
    }

    /// Whether the event is an output delta that carries nothing (a provider's empty first
    /// chunk): preamble, not output. It commits nothing, and the driver does not store it.
    pub(crate) fn is_empty_output(&self) -> bool {
        self.is_output() && !self.commits_output()
    }
}

/// What the commit rule leaves to the router once an attempt has failed: anything while
/// nothing was committed (`Ok`); after commit, the execution ends with `output_interrupted`
/// (`Err`): no retry, no fallback.
pub(crate) fn after_failure(committed: bool) -> Result<(), ErrorCode> {
    if committed {
        Err(ErrorCode::OutputInterrupted)
    } else {
        Ok(())
    }
}

impl Output {
    /// Folds an output or reasoning event into the text, tool calls and reasoning blocks;
    /// other events change nothing.
    pub(crate) fn absorb(&mut self, payload: &EventPayload) {
        match payload {
            EventPayload::ReasoningDelta { piece, text, .. } => self.reason(*piece, text),
            EventPayload::TextDelta { text, .. } => self.text.push_str(text),
            EventPayload::ToolCallStarted(started) => {
                let call = self.tool_call(started.index);
                call.id.clone_from(&started.id);
                call.name.clone_from(&started.name);
            }
            EventPayload::ToolCallArgumentsDelta { index, delta, .. } => {
                self.tool_call(*index).arguments_json.push_str(delta);
            }
            _ => {}
        }
    }

    /// A reasoning piece: text extends the open block (opening one after a signed or redacted
    /// block), a signature closes it, redacted data is a block of its own.
    fn reason(&mut self, piece: ReasoningPiece, text: &str) {
        let open = self
            .reasoning
            .last_mut()
            .filter(|block| block.signature.is_empty() && block.redacted.is_empty());
        match (piece, open) {
            (ReasoningPiece::Text, Some(block)) => block.text.push_str(text),
            (ReasoningPiece::Signature, Some(block)) => block.signature.push_str(text),
            (ReasoningPiece::Text, None) => self.reasoning.push(Reasoning {
                text: text.to_owned(),
                ..Reasoning::default()
            }),
            (ReasoningPiece::Signature, None) => self.reasoning.push(Reasoning {
                signature: text.to_owned(),
                ..Reasoning::default()
            }),
            (ReasoningPiece::Redacted, _) => self.reasoning.push(Reasoning {
                redacted: text.to_owned(),
                ..Reasoning::default()
            }),
        }
    }

    /// The tool call at `index`, created (empty) if the reply has not reached it yet.
    fn tool_call(&mut self, index: u32) -> &mut ToolCall {
        let index = index as usize;
        if self.tool_calls.len() <= index {
            self.tool_calls.resize_with(index + 1, ToolCall::default);
        }
        &mut self.tool_calls[index]
    }
}

/// What one attempt has exposed so far: whether it committed, and its output, kept for the
/// result or, after a failure, as evidence.
#[derive(Debug, Default)]
pub(crate) struct CommitTracker {
    output: Output,
    committed: bool,
    /// Buffered delivery: output is kept but not exposed until [`expose`](Self::expose).
    holds: bool,
}

impl CommitTracker {
    /// Nothing exposed yet.
    pub(crate) fn new(delivery: Delivery) -> Self {
        Self {
            holds: delivery == Delivery::Buffered,
            ..Self::default()
        }
    }

    /// Whether output has been exposed.
    pub(crate) fn committed(&self) -> bool {
        self.committed
    }

    /// Takes the output, leaving it empty.
    pub(crate) fn take_output(&mut self) -> Output {
        std::mem::take(&mut self.output)
    }

    /// Makes room for `text` more bytes of text, so the output grows once per batch of
    /// events instead of doubling its way up from a few bytes, and a reply that comes in one
    /// batch is kept at its exact size.
    pub(crate) fn reserve(&mut self, text: usize) {
        self.output.text.reserve(text);
    }

    /// Records one event of the attempt: output is kept, and commits unless it is held;
    /// reasoning is kept and commits nothing. (An empty output delta commits nothing; the
    /// driver does not store it at all.)
    pub(crate) fn record(&mut self, payload: &EventPayload) {
        if payload.commits_output() {
            self.output.absorb(payload);
            self.committed |= !self.holds;
        } else if let EventPayload::ReasoningDelta { .. } = payload {
            self.output.absorb(payload);
        }
    }

    /// The attempt completed and its held output goes out with the completion: it commits
    /// now, if it holds any.
    pub(crate) fn expose(&mut self) {
        self.committed |= !self.output.text.is_empty() || !self.output.tool_calls.is_empty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(text: &str) -> EventPayload {
        EventPayload::TextDelta {
            attempt: 1,
            text: text.into(),
        }
    }

    #[test]
    fn empty_deltas_and_non_output_do_not_commit() {
        let mut t = CommitTracker::new(Delivery::Streamed);
        let arguments = EventPayload::ToolCallArgumentsDelta {
            attempt: 1,
            index: 0,
            delta: "".into(),
        };
        let progress = EventPayload::Progress {
            attempt: 1,
            message: "warming".into(),
        };
        for preamble in [text(""), arguments, progress] {
            assert!(!preamble.commits_output());
            t.record(&preamble);
        }
        assert!(text("").is_empty_output());
        assert!(!t.committed());
        t.record(&text("hi"));
        assert!(t.committed());
        assert_eq!(t.take_output().text, "hi");
    }

    #[test]
    fn reasoning_is_kept_block_by_block_and_commits_nothing() {
        let reason = |piece, text: &str| EventPayload::ReasoningDelta {
            attempt: 1,
            piece,
            text: text.into(),
        };
        let mut t = CommitTracker::new(Delivery::Streamed);
        for event in [
            reason(ReasoningPiece::Text, "first "),
            reason(ReasoningPiece::Text, "thought"),
            reason(ReasoningPiece::Signature, "sig1"),
            reason(ReasoningPiece::Redacted, "opaque"),
            reason(ReasoningPiece::Text, "second"),
        ] {
            assert!(!event.commits_output());
            t.record(&event);
        }
        assert!(
            !t.committed(),
            "a failure after reasoning may still fall back"
        );
        t.record(&text("answer"));
        let output = t.take_output();
        assert_eq!(output.text, "answer");
        let block = |text: &str, signature: &str, redacted: &str| Reasoning {
            text: text.into(),
            signature: signature.into(),
            redacted: redacted.into(),
        };
        assert_eq!(
            output.reasoning,
            [
                block("first thought", "sig1", ""),
                block("", "", "opaque"),
                block("second", "", "")
            ]
        );
    }

    #[test]
    fn held_output_commits_only_when_exposed() {
        let mut t = CommitTracker::new(Delivery::Buffered);
        t.record(&text("held"));
        assert!(!t.committed(), "held output is not exposed");
        t.expose();
        assert!(t.committed());
        assert_eq!(t.take_output().text, "held");

        let mut empty = CommitTracker::new(Delivery::Buffered);
        empty.expose();
        assert!(!empty.committed(), "a reply without output exposes nothing");
    }

    #[test]
    fn tool_calls_commit_and_accumulate_arguments() {
        let mut t = CommitTracker::new(Delivery::Streamed);
        let started =
            EventPayload::ToolCallStarted(std::sync::Arc::new(crate::execution::ToolCallStart {
                attempt: 2,
                index: 0,
                id: "c1".into(),
                name: "f".into(),
            }));
        t.record(&started);
        assert!(t.committed());
        for piece in ["{\"a\":", "1}"] {
            let delta = EventPayload::ToolCallArgumentsDelta {
                attempt: 2,
                index: 0,
                delta: piece.into(),
            };
            t.record(&delta);
        }
        let out = t.take_output();
        assert_eq!(out.tool_calls.len(), 1);
        assert_eq!(out.tool_calls[0].arguments_json, "{\"a\":1}");
        assert_eq!(out.tool_calls[0].name, "f");
    }

    #[test]
    fn after_commit_a_failure_ends_the_execution() {
        assert_eq!(after_failure(false), Ok(()));
        assert_eq!(after_failure(true), Err(ErrorCode::OutputInterrupted));
    }
}
