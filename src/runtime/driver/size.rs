//! The bounds on one execution's size: at most `server.max_output_bytes` of output (text, tool
//! calls and their arguments, over all its attempts; under buffered delivery a failed
//! attempt's held output is taken back, and only its evidence, at most 64 KiB, is kept) and
//! `server.max_events_per_execution` events. A provider that streams past either is cut, and the execution ends with
//! `output_too_large`: its events, its view and its result are what the store holds for it,
//! so they must not grow with whatever an upstream sends.

use crate::execution::EventPayload;

/// Events kept back for the end of an execution once a provider has used up the rest: the
/// failed attempt, the usage its call had counted, the terminal event.
pub(super) const RESERVED_EVENTS: u64 = 16;

/// What one execution may still hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SizeLimits {
    /// `server.max_output_bytes`.
    pub max_output_bytes: usize,
    /// `server.max_events_per_execution`.
    pub max_events: u64,
}

/// What an execution holds so far, against its [`SizeLimits`].
#[derive(Debug)]
pub(super) struct Size {
    limits: SizeLimits,
    output_bytes: usize,
    /// Events recorded, `execution.accepted` included.
    events: u64,
}

impl Size {
    /// An execution that holds its `execution.accepted`.
    pub(super) fn new(limits: SizeLimits) -> Self {
        Self {
            limits,
            output_bytes: 0,
            events: 1,
        }
    }

    /// Counts an event the driver records of its own accord: routing, attempts, the end.
    /// These are few (bounded by the attempts), so they always fit.
    pub(super) fn count(&mut self) {
        self.events += 1;
    }

    /// Counts an event a provider caused, if it fits: `false` (counting nothing) when it
    /// would take the execution past either bound.
    pub(super) fn count_if_fits(&mut self, payload: &EventPayload) -> bool {
        let events = self.events + 1 + RESERVED_EVENTS;
        let output = self.output_bytes.saturating_add(payload.output_bytes());
        if events > self.limits.max_events || output > self.limits.max_output_bytes {
            return false;
        }
        self.events += 1;
        self.output_bytes = output;
        true
    }

    /// Takes back an event counted by [`count_if_fits`](Self::count_if_fits) that will
    /// never be stored: a failed attempt's held output.
    pub(super) fn uncount(&mut self, payload: &EventPayload) {
        self.events -= 1;
        self.output_bytes -= payload.output_bytes();
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
    fn output_and_events_are_bounded_with_room_kept_for_the_end() {
        let mut size = Size::new(SizeLimits {
            max_output_bytes: 10,
            max_events: 1000,
        });
        assert!(size.count_if_fits(&text("12345")));
        assert!(size.count_if_fits(&text("67890")));
        assert!(!size.count_if_fits(&text("x")), "the 11th byte");
        let usage = EventPayload::Progress {
            attempt: 1,
            message: "not output".into(),
        };
        assert!(
            size.count_if_fits(&usage),
            "events without output still fit"
        );

        let mut size = Size::new(SizeLimits {
            max_output_bytes: 1 << 20,
            max_events: 20,
        });
        // Accepted, plus 3, plus the 16 kept back for the end: 20.
        for _ in 0..3 {
            assert!(size.count_if_fits(&text("a")));
        }
        assert!(!size.count_if_fits(&text("a")));
        size.uncount(&text("a"));
        assert!(
            size.count_if_fits(&text("a")),
            "an event taken back makes room"
        );
        size.count();
        assert_eq!(size.events, 5, "the driver's own events are always counted");
    }
}
