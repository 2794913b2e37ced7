use super::*;
use crate::execution::{UsageSource, UsageUnit};
use crate::provider::sse::{SseEvent, SseParser};

/// Ends the reply at `data: [DONE]`.
struct UntilDone;

impl Decoder for UntilDone {
    type Framing = SseParser;

    fn event(
        &mut self,
        _: &Upstream,
        event: SseEvent<'_>,
        _: &mut UsageTally,
        _: &mut Vec<ProviderEvent>,
    ) -> Result<Option<FinishReason>, ProviderError> {
        Ok((event.data == "[DONE]").then_some(FinishReason::Stop))
    }

    fn finished_at_eof(&self, _: &Upstream) -> Result<Option<FinishReason>, ProviderError> {
        Ok(None)
    }
}

fn reply() -> Reply<UntilDone> {
    let upstream = Upstream::offline("main", "anthropic", None);
    Reply::new(
        upstream,
        Instant::now() + Duration::from_secs(60),
        UntilDone,
    )
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

/// An exchange with a server on 127.0.0.1:0 that answers with `reply`'s bytes as they are.
async fn exchange_with(reply: &'static [u8]) -> Exchange<UntilDone> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0; 4096];
        let _ = socket.read(&mut request).await.unwrap();
        socket.write_all(reply).await.unwrap();
        // Keep the connection open until the client is done.
        let _ = socket.read(&mut request).await;
    });
    let mut upstream = Upstream::offline("main", "openai", None);
    let endpoint = crate::config::HttpEndpointConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        timeouts: upstream.timeouts,
        proxy: None,
    };
    let clients = &mut crate::provider::http::HttpClients::default();
    upstream.client = clients.client("main", &endpoint, "/chat", 1).unwrap();
    let request = upstream.client.post(&HeaderMap::new(), &[], b"{}");
    let by = Instant::now() + Duration::from_secs(1);
    Exchange {
        call: upstream.client.call(request),
        step: Step::Head {
            limit: Duration::from_secs(1),
        },
        timer: Timer::new(by),
        reply: Reply::new(upstream, by, UntilDone),
    }
}

/// A reply complete before its body broke (a malformed chunk after `[DONE]`), and one whose
/// body stays open past it (the end-of-body grace): both finish.
#[tokio::test]
async fn a_complete_reply_finishes_whatever_its_body_does_next() {
    use futures_util::StreamExt as _;
    let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\ne\r\ndata: [DONE]\n\n\r\n";
    for after in ["zz\r\n", ""] {
        let reply: &'static str = format!("{head}{after}").leak();
        let items: Vec<_> = exchange_with(reply.as_bytes()).await.collect().await;
        assert!(items.iter().all(Result::is_ok), "{items:?}");
        assert_eq!(
            items.last(),
            Some(&Ok(ProviderEvent::Finished(FinishReason::Stop))),
            "{after:?}"
        );
    }
}
