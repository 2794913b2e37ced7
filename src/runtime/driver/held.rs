//! Buffered delivery's other half: what a failed attempt held. Its output events were never
//! appended, so no reader saw them and nothing was committed; they are dropped, and stop
//! counting against the execution's size, so the next attempt has the whole room. Their text
//! and tool calls become the attempt's evidence (`AttemptRecord::held_output`), never a
//! result. (A successful attempt's held events go out with its completion, in `batch.rs`.)

use super::Driver;
use crate::execution::Output;

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
        Output {
            text: std::mem::take(&mut output.text),
            tool_calls: std::mem::take(&mut output.tool_calls),
            reasoning: Vec::new(),
        }
    }
}
