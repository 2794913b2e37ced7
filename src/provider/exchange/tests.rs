#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::pin::Pin;

use super::*;
use crate::config::TimeoutsConfig;
use crate::execution::{UsageSource, UsageUnit};
use crate::provider::http::HttpClients;

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

fn exchange() -> Exchange<Silent> {
    let timeouts = TimeoutsConfig {
        connect: Duration::from_secs(1),
        first_byte: Duration::from_secs(2),
        idle: Duration::from_secs(1),
    };
    let upstream = Upstream {
        name: "main".into(),
        adapter: "anthropic",
        client: HttpClients::default()
            .client(timeouts.connect, None)
            .unwrap(),
        timeouts,
        secret: None,
        url: reqwest::Url::parse("http://127.0.0.1:9/v1/messages").unwrap(),
        headers: HeaderMap::new(),
    };
    Exchange {
        upstream,
        deadline: Instant::now() + Duration::from_secs(60),
        decoder: Silent,
        first_byte_by: Instant::now() + Duration::from_secs(2),
        parser: SseParser::default(),
        usage: UsageTally::default(),
        pending: VecDeque::new(),
        output_started: false,
        io: ReusableBoxFuture::new(std::future::pending()),
        waiting: true,
    }
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
    let mut exchange = exchange();
    exchange.usage.report(UsageUnit::INPUT_TOKENS, 25);
    exchange.usage.count_piece();
    let known = vec![
        quantity(UsageUnit::INPUT_TOKENS, 25, UsageSource::ProviderReported),
        quantity(UsageUnit::OUTPUT_TOKENS, 1, UsageSource::RuntimeEstimated),
    ];
    assert_eq!(Pin::new(&mut exchange).unreported_usage(), known);
    // The reply completes: the tally moves into the queue, ahead of `Finished`, and is
    // still handed over from there, once.
    exchange.complete(FinishReason::Stop, None);
    assert_eq!(Pin::new(&mut exchange).unreported_usage(), known);
    // The runtime read the first usage event, then cut the call: only the rest is left.
    let first = exchange.pending.pop_front();
    assert_eq!(first, Some(Ok(ProviderEvent::Usage(known[0].clone()))));
    assert_eq!(
        Pin::new(&mut exchange).unreported_usage(),
        known[1..].to_vec()
    );
}

#[test]
fn a_failed_exchange_has_nothing_left_once_its_items_are_read() {
    let mut exchange = exchange();
    exchange.usage.report(UsageUnit::INPUT_TOKENS, 7);
    exchange.fail(ProviderError::retryable(AttemptCode::Unavailable, "gone"));
    exchange.pending.retain(|item| item.is_err());
    assert_eq!(Pin::new(&mut exchange).unreported_usage(), vec![]);
}
