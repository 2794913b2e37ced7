//! The usage of one HTTP call as it becomes known. Providers report usage once or cumulatively
//! (the last value wins), and a stream may break before the report: what is known is still
//! reported when the call ends, whichever way it ends. A quantity the provider did not report
//! is never a silent zero: output tokens are then estimated (and labelled so) from the pieces
//! streamed, reasoning pieces among them (reasoning is output a model is billed for), and a
//! completed call that reported nothing says so in a progress note.

use super::ProviderEvent;
use crate::execution::{UsageQuantity, UsageSource, UsageUnit};

/// Usage reported or measured so far.
#[derive(Debug, Default)]
pub(crate) struct UsageTally {
    /// Provider-reported quantities in first-report order; a later report replaces the value.
    reported: Vec<(UsageUnit, u64)>,
    /// Output pieces (text or tool-argument deltas) and reasoning pieces streamed: the
    /// estimates' basis.
    pieces: u64,
    reasoning: u64,
}

impl UsageTally {
    /// The provider reported `quantity` of `unit` (cumulative: it replaces an earlier value).
    pub(super) fn report(&mut self, unit: UsageUnit, quantity: u64) {
        match self.reported.iter_mut().find(|(u, _)| *u == unit) {
            Some(slot) => slot.1 = quantity,
            None => self.reported.push((unit, quantity)),
        }
    }

    /// The four counts both OpenAI protocols report, each where the provider sent it: input
    /// tokens (cached ones included), output tokens, and the cached and reasoning parts of
    /// them.
    pub(super) fn report_openai(
        &mut self,
        input: Option<u64>,
        output: Option<u64>,
        cached: Option<u64>,
        reasoning: Option<u64>,
    ) {
        let counts = [
            (UsageUnit::INPUT_TOKENS, input),
            (UsageUnit::OUTPUT_TOKENS, output),
            (UsageUnit::CACHED_INPUT_TOKENS, cached),
            (UsageUnit::REASONING_TOKENS, reasoning),
        ];
        for (unit, quantity) in counts {
            if let Some(quantity) = quantity {
                self.report(unit, quantity);
            }
        }
    }

    /// One output piece was streamed.
    pub(super) fn count_piece(&mut self) {
        self.pieces += 1;
    }

    /// One piece of reasoning text was streamed.
    pub(super) fn count_reasoning(&mut self) {
        self.reasoning += 1;
    }

    /// What is known now, without taking it: the reported quantities, and the output
    /// estimate while the provider has not reported output. An estimate never undercounts
    /// what the provider did report: reasoning it counted is output too.
    pub(super) fn known(&self) -> Vec<UsageQuantity> {
        let reported = |unit: &UsageUnit| {
            self.reported
                .iter()
                .find(|(u, _)| u == unit)
                .map(|(_, quantity)| *quantity)
        };
        let mut known: Vec<UsageQuantity> = self
            .reported
            .iter()
            .map(|(unit, quantity)| {
                quantity_of(unit.clone(), *quantity, UsageSource::ProviderReported)
            })
            .collect();
        let reported_reasoning = reported(&UsageUnit::REASONING_TOKENS);
        let reasoning = self.reasoning.max(reported_reasoning.unwrap_or(0));
        let estimate = self.pieces.saturating_add(reasoning);
        if reported(&UsageUnit::OUTPUT_TOKENS).is_none() && estimate > 0 {
            // Streaming servers send about one token per piece: an estimate, and labelled so.
            // Reasoning is part of the output, as providers count it.
            known.push(quantity_of(
                UsageUnit::OUTPUT_TOKENS,
                estimate,
                UsageSource::RuntimeEstimated,
            ));
            if self.reasoning > 0 && reported_reasoning.is_none() {
                known.push(quantity_of(
                    UsageUnit::REASONING_TOKENS,
                    self.reasoning,
                    UsageSource::RuntimeEstimated,
                ));
            }
        }
        known
    }

    /// The events that report what is known, once, as the call ends; `completed` says
    /// whether it ended with the reply finished.
    pub(super) fn drain(&mut self, completed: bool) -> Vec<ProviderEvent> {
        let mut events: Vec<ProviderEvent> =
            self.known().into_iter().map(ProviderEvent::Usage).collect();
        if completed && self.reported.is_empty() {
            events.push(ProviderEvent::Progress(smol_str::format_smolstr!(
                "the provider reported no usage; output_tokens is estimated from {} \
                 streamed piece(s), {} of them reasoning, and input_tokens is unknown",
                self.pieces.saturating_add(self.reasoning),
                self.reasoning
            )));
        }
        *self = Self::default();
        events
    }
}

fn quantity_of(unit: UsageUnit, quantity: u64, source: UsageSource) -> UsageQuantity {
    UsageQuantity {
        unit,
        quantity,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(unit: UsageUnit, quantity: u64, source: UsageSource) -> ProviderEvent {
        ProviderEvent::Usage(quantity_of(unit, quantity, source))
    }

    #[test]
    fn a_reply_of_reasoning_only_is_estimated_too() {
        let mut tally = UsageTally::default();
        tally.count_reasoning();
        tally.count_reasoning();
        assert_eq!(
            tally.known(),
            [
                quantity_of(UsageUnit::OUTPUT_TOKENS, 2, UsageSource::RuntimeEstimated),
                quantity_of(
                    UsageUnit::REASONING_TOKENS,
                    2,
                    UsageSource::RuntimeEstimated
                ),
            ]
        );
        // A reported output count stands; reasoning is not estimated beside it.
        tally.report(UsageUnit::OUTPUT_TOKENS, 9);
        assert_eq!(
            tally.known(),
            [quantity_of(
                UsageUnit::OUTPUT_TOKENS,
                9,
                UsageSource::ProviderReported
            )]
        );
    }

    #[test]
    fn later_reports_replace_earlier_ones_and_drain_once() {
        let mut tally = UsageTally::default();
        tally.report(UsageUnit::INPUT_TOKENS, 10);
        tally.report(UsageUnit::OUTPUT_TOKENS, 1);
        tally.count_piece();
        tally.report(UsageUnit::OUTPUT_TOKENS, 7);
        assert_eq!(
            tally.drain(true),
            vec![
                usage(UsageUnit::INPUT_TOKENS, 10, UsageSource::ProviderReported),
                usage(UsageUnit::OUTPUT_TOKENS, 7, UsageSource::ProviderReported),
            ]
        );
    }

    #[test]
    fn missing_output_is_estimated_and_missing_usage_is_said() {
        let mut tally = UsageTally::default();
        tally.count_piece();
        tally.count_piece();
        let events = tally.drain(true);
        assert_eq!(
            events[0],
            usage(UsageUnit::OUTPUT_TOKENS, 2, UsageSource::RuntimeEstimated)
        );
        assert!(matches!(&events[1], ProviderEvent::Progress(note) if note.contains("no usage")));
        // An interrupted call reports what it knows without the note; what is known can be
        // read without taking it, for a call cut before it ended.
        let mut tally = UsageTally::default();
        tally.report(UsageUnit::INPUT_TOKENS, 5);
        tally.count_piece();
        let known = tally.known();
        assert_eq!(
            known,
            vec![
                quantity_of(UsageUnit::INPUT_TOKENS, 5, UsageSource::ProviderReported),
                quantity_of(UsageUnit::OUTPUT_TOKENS, 1, UsageSource::RuntimeEstimated),
            ]
        );
        assert_eq!(tally.known(), known);
        assert_eq!(
            tally.drain(false),
            vec![
                usage(UsageUnit::INPUT_TOKENS, 5, UsageSource::ProviderReported),
                usage(UsageUnit::OUTPUT_TOKENS, 1, UsageSource::RuntimeEstimated),
            ]
        );
    }

    /// A thinking attempt that failed after its provider reported 310 reasoning tokens, with
    /// one piece streamed: its output estimate is never below what was reported.
    #[test]
    fn an_estimate_never_undercounts_reported_reasoning() {
        let mut tally = UsageTally::default();
        tally.count_piece();
        tally.report(UsageUnit::REASONING_TOKENS, 310);
        assert_eq!(
            tally.known(),
            [
                quantity_of(
                    UsageUnit::REASONING_TOKENS,
                    310,
                    UsageSource::ProviderReported
                ),
                quantity_of(UsageUnit::OUTPUT_TOKENS, 311, UsageSource::RuntimeEstimated),
            ]
        );
    }
}
