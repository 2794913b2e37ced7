//! The commit point: the first text delta, tool call or tool-argument delta exposes output,
//! after which no failure may retry or fall back. Provider preamble, progress and usage do
//! not commit. The tracker also keeps the attempt's output for the result or, after a
//! failure, as evidence.

use crate::execution::{EventPayload, Output, view::tool_call_slot};
use crate::provider::ProviderEvent;

/// What one attempt has exposed so far.
#[derive(Debug, Default)]
pub struct CommitTracker {
    output: Output,
    committed: bool,
}

impl CommitTracker {
    /// Nothing exposed yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether output has been exposed.
    pub fn committed(&self) -> bool {
        self.committed
    }

    /// Takes the output, leaving it empty.
    pub fn take_output(&mut self) -> Output {
        std::mem::take(&mut self.output)
    }

    /// Makes room for the text `events` bring, so the output grows once per batch of
    /// events instead of doubling its way up from a few bytes, and a reply that comes in one
    /// batch is kept at its exact size.
    pub fn reserve<'a>(&mut self, events: impl Iterator<Item = &'a ProviderEvent>) {
        let text: usize = events
            .map(|event| match event {
                ProviderEvent::TextDelta(text) => text.len(),
                _ => 0,
            })
            .sum();
        self.output.text.reserve(text);
    }

    /// Turns an output event of attempt `attempt` into the payload to append, recording it.
    /// Returns `None` for events that carry nothing (an empty text delta is preamble, not
    /// output) and for events that are not output.
    pub fn output_event(&mut self, attempt: u32, event: ProviderEvent) -> Option<EventPayload> {
        let payload = match event {
            ProviderEvent::TextDelta(text) if text.is_empty() => return None,
            ProviderEvent::TextDelta(text) => {
                self.output.text.push_str(&text);
                EventPayload::TextDelta { attempt, text }
            }
            ProviderEvent::ToolCallStarted { index, id, name } => {
                let slot = tool_call_slot(&mut self.output, index);
                slot.id.clone_from(&id);
                slot.name.clone_from(&name);
                EventPayload::ToolCallStarted {
                    attempt,
                    index,
                    id,
                    name,
                }
            }
            ProviderEvent::ToolCallArgumentsDelta { delta, .. } if delta.is_empty() => return None,
            ProviderEvent::ToolCallArgumentsDelta { index, delta } => {
                tool_call_slot(&mut self.output, index)
                    .arguments_json
                    .push_str(&delta);
                EventPayload::ToolCallArgumentsDelta {
                    attempt,
                    index,
                    delta,
                }
            }
            ProviderEvent::Progress(_) | ProviderEvent::Usage(_) | ProviderEvent::Finished(_) => {
                return None;
            }
        };
        self.committed = true;
        Some(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_deltas_and_non_output_do_not_commit() {
        let mut t = CommitTracker::new();
        assert!(
            t.output_event(1, ProviderEvent::TextDelta(String::new()))
                .is_none()
        );
        assert!(
            t.output_event(1, ProviderEvent::Progress("warming".into()))
                .is_none()
        );
        assert!(!t.committed());
        assert!(
            t.output_event(1, ProviderEvent::TextDelta("hi".into()))
                .is_some()
        );
        assert!(t.committed());
        assert_eq!(t.take_output().text, "hi");
    }

    #[test]
    fn tool_calls_commit_and_accumulate_arguments() {
        let mut t = CommitTracker::new();
        let started = ProviderEvent::ToolCallStarted {
            index: 0,
            id: "c1".into(),
            name: "f".into(),
        };
        assert!(t.output_event(2, started).is_some());
        assert!(t.committed());
        for piece in ["{\"a\":", "1}"] {
            let delta = ProviderEvent::ToolCallArgumentsDelta {
                index: 0,
                delta: piece.into(),
            };
            assert!(t.output_event(2, delta).is_some());
        }
        let out = t.take_output();
        assert_eq!(out.tool_calls.len(), 1);
        assert_eq!(out.tool_calls[0].arguments_json, "{\"a\":1}");
        assert_eq!(out.tool_calls[0].name, "f");
    }
}
