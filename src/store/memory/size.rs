//! What the memory store counts for each execution against `store.max_bytes`: an estimate of
//! the heap it holds, close enough that resident memory follows the setting. Slots of events
//! are counted by the log; here are the rest.

use std::mem::size_of;

use crate::execution::{
    AttemptRecord, EventPayload, Execution, ExecutionResult, Output, RoutingPlan, Text, UsageFact,
};

/// One record's fixed cost: its slot, lock, view box, index and retention entries, and the
/// allocator's rounding around them.
pub(super) const RECORD: usize = 512;

/// Bytes a text holds beyond its inline room.
fn text(text: &Text) -> usize {
    if text.is_heap_allocated() {
        // The shared allocation's counts and the text.
        16 + text.len()
    } else {
        0
    }
}

fn output(output: &Output) -> usize {
    output.text.capacity()
        + output
            .tool_calls
            .iter()
            .map(|c| size_of_val(c) + c.id.len() + c.name.len() + c.arguments_json.len())
            .sum::<usize>()
        + output
            .reasoning
            .iter()
            .map(|r| size_of_val(r) + r.text.len() + r.signature.len() + r.redacted.len())
            .sum::<usize>()
}

fn attempt(record: &AttemptRecord) -> usize {
    size_of::<AttemptRecord>()
        + record.error.as_ref().map_or(0, |e| e.message.len())
        + output(&record.held_output)
}

fn usage(fact: &UsageFact) -> usize {
    // Labels are shared with the request's, counted once with the view.
    size_of::<UsageFact>() + fact.unit.as_str().len()
}

fn plan(plan: &RoutingPlan) -> usize {
    size_of::<RoutingPlan>()
        + plan
            .targets
            .iter()
            .map(|t| {
                64 + t.reason.as_ref().map_or(0, String::len)
                    + t.ejected.as_ref().map_or(0, |e| 48 + e.reason.len())
            })
            .sum::<usize>()
}

/// Heap an event's payload holds beyond its slot in the log. Shared payloads (behind an
/// `Arc`) are counted here, where they are stored, once.
pub(super) fn heap(payload: &EventPayload) -> usize {
    // An `Arc`'s two counts.
    const ARC: usize = 16;
    match payload {
        EventPayload::TextDelta { text: t, .. } => text(t),
        EventPayload::ToolCallArgumentsDelta { delta, .. } => text(delta),
        EventPayload::Progress { message, .. } => text(message),
        EventPayload::ReasoningDelta { text: t, .. } => text(t),
        EventPayload::Accepted(_) => ARC + 96,
        EventPayload::Routing(p) => ARC + plan(p),
        EventPayload::AttemptStarted(_) => ARC + 64,
        EventPayload::AttemptFailed(record) => ARC + attempt(record),
        EventPayload::ToolCallStarted(call) => ARC + 48 + call.id.len() + call.name.len(),
        EventPayload::Usage(fact) => ARC + usage(fact),
        EventPayload::Completed(result) => {
            ARC + size_of::<ExecutionResult>() + output(&result.output)
        }
        EventPayload::Failed(failure) => {
            ARC + 256 + failure.error.message.len() + output(&failure.partial_output)
        }
    }
}

/// Heap a materialized view holds.
pub(super) fn view(view: &Execution) -> usize {
    size_of::<Execution>()
        + output(&view.partial_output)
        + view.result.as_ref().map_or(0, |r| output(&r.output))
        + view.attempts.iter().map(attempt).sum::<usize>()
        + view.usage.iter().map(usage).sum::<usize>()
        + view
            .labels
            .iter()
            .map(|(k, v)| 48 + k.len() + v.len())
            .sum::<usize>()
}
