//! Buffered delivery's other half: what a failed attempt held. Its output events were never
//! appended, so no reader saw them and nothing was committed; they are dropped, and stop
//! counting against the execution's size, so the next attempt has the whole room. Their text
//! and tool calls, up to [`EVIDENCE_BYTES`], become the attempt's evidence
//! (`AttemptRecord::held_output`), never a result: diagnostic, and bounded however many
//! attempts fail. (A successful attempt's held events go out with its completion, in
//! `batch.rs`.)

use super::Driver;
use crate::execution::Output;

/// The most of a failed attempt's held text and tool-call arguments kept as its evidence.
pub(super) const EVIDENCE_BYTES: usize = 64 << 10;

impl Driver {
    /// Drops what the attempt that ended held, and moves its text and tool calls out of
    /// `output` (which keeps the reasoning, already streamed) into the returned evidence.
    /// Under streamed delivery nothing is held: both stay as they are.
    pub(super) fn drop_held(&mut self, output: &mut Output) -> Output {
        if self.held.is_empty() {
            return Output::default();
        }
        for payload in self.held.drain(..) {
            self.size.uncount(&payload);
        }
        let mut held = Output {
            text: std::mem::take(&mut output.text),
            tool_calls: std::mem::take(&mut output.tool_calls),
            reasoning: Vec::new(),
        };
        let mut room = EVIDENCE_BYTES;
        for text in std::iter::once(&mut held.text)
            .chain(held.tool_calls.iter_mut().map(|c| &mut c.arguments_json))
        {
            clip(text, room);
            room -= text.len();
        }
        held
    }
}

/// Cuts `text` to at most `max` bytes, on a character boundary.
fn clip(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.shrink_to_fit();
    }
}
