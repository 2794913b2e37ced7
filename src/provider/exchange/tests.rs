#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::execution::{UsageSource, UsageUnit};

/// Reads nothing: the tests drive the exchange's state by hand.
struct Silent;

impl Decoder for Silent {
    fn event(
        &mut self,
        _: &Upstream,
        _: SseEvent,
        _: &mut UsageTally,
        _: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError> {
        Ok(None)
    }

    fn finished_at_eof(&self, _: &Upstream) -> Result<Option<FinishReason>, ProviderError> {
        Ok(None)
    }
}

fn reply() -> Reply<Silent> {
    let upstream = Upstream::offline("main", "anthropic", None);
    Reply::new(upstream, Instant::now() + Duration::from_secs(60), Silent)
}

fn quantity(unit: UsageUnit, quantity: u64, source: UsageSource) -> UsageQuantity {
    UsageQuantity {
        unit,
        quantity,
        source,
    }
}

#[test]
fn a_cut_hands_over_usage_queued_or_tallied_and_nothing_yielded() {
    let mut reply = reply();
    reply.usage.report(UsageUnit::INPUT_TOKENS, 25);
    reply.usage.count_piece();
    let known = vec![
        quantity(UsageUnit::INPUT_TOKENS, 25, UsageSource::ProviderReported),
        quantity(UsageUnit::OUTPUT_TOKENS, 1, UsageSource::RuntimeEstimated),
    ];
    assert_eq!(reply.unreported_usage(), known);
    // The reply completes: the tally moves into the queue, ahead of `Finished`, and is
    // still handed over from there, once.
    reply.complete();
    assert_eq!(reply.unreported_usage(), known);
    // The runtime read the first usage event, then cut the call: only the rest is left.
    let first = reply.pending.pop_front();
    assert_eq!(first, Some(Ok(ProviderEvent::Usage(known[0].clone()))));
    assert_eq!(reply.unreported_usage(), known[1..].to_vec());
}

#[test]
fn a_failed_exchange_has_nothing_left_once_its_items_are_read() {
    let mut reply = reply();
    reply.usage.report(UsageUnit::INPUT_TOKENS, 7);
    reply.fail(ProviderError::retryable(AttemptCode::Unavailable, "gone"));
    reply.pending.retain(|item| item.is_err());
    assert_eq!(reply.unreported_usage(), vec![]);
}
