//! How every HTTP adapter fails, against a local server that misbehaves on purpose: each error
//! status, Retry-After, refused and reset connections, timeouts bounded by the deadline, a
//! stream cut or stalled mid-reply, malformed events, a huge reply, a slow trickle, and
//! cancellation. Timeouts are short (200ms) and only classifications are asserted, never
//! elapsed times.

use crate::common;

use std::time::{Duration, SystemTime};

use common::adapters::{
    KEY, assert_error, assert_mentions, call, call_with, config, data, event, provider, spec,
    split, text, timeouts,
};
use common::eventstream;
use common::upstream::{Behaviour, Step, Upstream, status};
use futures_util::StreamExt;
use model_runtime::config::ProviderSpec;
use model_runtime::execution::{ErrorClass, ExecutionId, ExecutionInput, FinishReason, Message};
use model_runtime::provider::{ProviderCall, ProviderError, ProviderEvent};

mod kind;

use kind::{KINDS, Kind};

/// The error a call to a `kind` provider at `base_url` (with its `spec` changed by `edit`) ends
/// with; the test fails if it ends without one.
async fn error_of(
    kind: Kind,
    base_url: &str,
    edit: impl FnOnce(ProviderSpec) -> ProviderSpec,
) -> ProviderError {
    let p = provider(&config(edit(kind.spec(base_url))));
    split(call(&p).await).1.expect("an error")
}

fn short_timeouts(spec: ProviderSpec) -> ProviderSpec {
    timeouts(spec, 100, 200, 200)
}

#[tokio::test]
async fn each_error_status_is_classified() {
    let table = [
        (400, ErrorClass::Rejected, "invalid_request"),
        (401, ErrorClass::Rejected, "unauthorized"),
        (403, ErrorClass::Rejected, "forbidden"),
        (404, ErrorClass::Rejected, "not_found"),
        (408, ErrorClass::Retryable, "request_timeout"),
        (422, ErrorClass::Rejected, "invalid_request"),
        (429, ErrorClass::Retryable, "rate_limited"),
        (500, ErrorClass::Retryable, "internal"),
        (502, ErrorClass::Retryable, "unavailable"),
        (503, ErrorClass::Retryable, "unavailable"),
        (504, ErrorClass::Retryable, "unavailable"),
        (529, ErrorClass::Retryable, "overloaded"),
    ];
    for kind in KINDS {
        for (code, class, name) in table {
            let server = Upstream::always(status(code, &kind.error_body("some_error"), &[])).await;
            let p = provider(&config(kind.spec(&server.base_url())));
            let (events, error) = split(call(&p).await);
            let error = error.expect("an error");
            assert!(events.is_empty(), "{kind:?} {code}: {events:?}");
            assert_error(&error, class, name, &format!("{kind:?} HTTP {code}"));
            let provider_named = format!("{} provider `p`", kind.name());
            assert!(error.message.contains(&provider_named), "{}", error.message);
            assert!(
                !error.message.contains(KEY),
                "{kind:?} {code} leaks the key: {}",
                error.message
            );
        }
    }
}

#[tokio::test]
async fn retry_after_is_read_as_seconds_or_a_date() {
    for kind in KINDS {
        let server = Upstream::always(status(429, "{}", &[("retry-after", "7")])).await;
        let error = error_of(kind, &server.base_url(), |s| s).await;
        assert_eq!(error.retry_after, Some(Duration::from_secs(7)));

        // Without it, a 429 waits for its limit's reset, as OpenAI and Azure announce it.
        let reset = [
            ("x-ratelimit-reset-requests", "2s"),
            ("x-ratelimit-reset-tokens", "1m0s"),
        ];
        let server = Upstream::always(status(429, "{}", &reset)).await;
        let error = error_of(kind, &server.base_url(), |s| s).await;
        assert_eq!(error.retry_after, Some(Duration::from_secs(60)));

        let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let server = Upstream::always(status(503, "{}", &[("retry-after", &date)])).await;
        let error = error_of(kind, &server.base_url(), |s| s).await;
        let wait = error.retry_after.expect("a retry-after");
        assert!(
            wait > Duration::from_secs(3000) && wait <= Duration::from_secs(3600),
            "{wait:?}"
        );
    }
}

#[tokio::test]
async fn a_refused_connection_is_retryable() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    for kind in KINDS {
        let error = error_of(kind, &url, |s| s).await;
        assert_error(&error, ErrorClass::Retryable, "connect_failed", "");
        // The caller is told which step failed, never the address.
        assert!(
            error
                .message
                .ends_with("connecting failed (connection refused)"),
            "{kind:?}: {}",
            error.message
        );
        assert!(!error.message.contains("127.0.0.1"), "{}", error.message);
    }
}

#[tokio::test]
async fn a_reset_after_the_request_was_sent_is_outcome_unknown() {
    for kind in KINDS {
        let server = Upstream::always(Behaviour::Reset).await;
        let error = error_of(kind, &server.base_url(), |s| s).await;
        assert_error(&error, ErrorClass::OutcomeUnknown, "connection_lost", "");
        assert_eq!(server.requests().len(), 1, "the request is not resent");
    }
}

#[tokio::test]
async fn no_answer_within_the_first_byte_timeout_is_outcome_unknown() {
    for kind in KINDS {
        let server = Upstream::always(Behaviour::Hang).await;
        let error = error_of(kind, &server.base_url(), short_timeouts).await;
        assert_error(&error, ErrorClass::OutcomeUnknown, "timeout", "");
    }
}

#[tokio::test]
async fn the_attempt_deadline_bounds_every_timeout() {
    // A ten-minute first-byte timeout, but the attempt has 300ms: the call ends well before
    // the helper's one-minute safety net.
    let slow_to_give_up = |kind: Kind, url: &str| {
        provider(&config(timeouts(kind.spec(url), 300_000, 600_000, 600_000)))
    };
    let hi = || ExecutionInput {
        messages: vec![Message::user("hi")],
        ..Default::default()
    };
    let server = Upstream::always(Behaviour::Hang).await;
    for kind in KINDS {
        let p = slow_to_give_up(kind, &server.base_url());
        let error = split(call_with(&p, hi(), Duration::from_millis(300)).await)
            .1
            .expect("an error");
        assert_error(&error, ErrorClass::OutcomeUnknown, "timeout", "");
    }
    // The same for a stream that goes silent after output.
    for kind in KINDS {
        let mut steps: Vec<Step> = kind.preamble().into_iter().map(Step::Send).collect();
        steps.extend([Step::Send(kind.delta("one")), Step::Stall]);
        let server = Upstream::always(kind.steps(steps)).await;
        let p = slow_to_give_up(kind, &server.base_url());
        let (events, error) = split(call_with(&p, hi(), Duration::from_millis(300)).await);
        assert_eq!(events[0], text("one"));
        assert_eq!(error.expect("an error").code.as_str(), "stream_stalled");
    }
}

#[tokio::test]
async fn a_stream_cut_after_two_deltas_is_interrupted_with_its_usage() {
    for kind in KINDS {
        let mut steps: Vec<Step> = kind.preamble().into_iter().map(Step::Send).collect();
        steps.extend([
            Step::Send(kind.delta("Hello")),
            Step::Send(kind.delta(" world")),
            Step::Cut,
        ]);
        let server = Upstream::always(kind.steps(steps)).await;
        let p = provider(&config(kind.spec(&server.base_url())));
        let (events, error) = split(call(&p).await);
        let mut expected = vec![text("Hello"), text(" world")];
        expected.extend(kind.usage_when_cut(2));
        assert_eq!(events, expected, "{kind:?}");
        let error = error.expect("an error");
        // The response began and broke: it ran and was ended, its outcome known.
        assert_error(
            &error,
            ErrorClass::Interrupted,
            "stream_interrupted",
            &format!("{kind:?}"),
        );
        assert_mentions(&error, "after output began");
    }
}

#[tokio::test]
async fn a_clean_end_before_the_reply_finished_is_interrupted() {
    for kind in KINDS {
        let mut events = kind.preamble();
        events.push(kind.delta("Hello"));
        let server = Upstream::always(kind.reply(&events)).await;
        let error = error_of(kind, &server.base_url(), |s| s).await;
        assert_error(&error, ErrorClass::Interrupted, "stream_interrupted", "");
    }
}

#[tokio::test]
async fn a_stall_past_the_idle_timeout_ends_the_call_and_the_connection() {
    for kind in KINDS {
        let mut steps: Vec<Step> = kind.preamble().into_iter().map(Step::Send).collect();
        steps.extend([Step::Send(kind.delta("Hello")), Step::Stall]);
        let server = Upstream::always(kind.steps(steps)).await;
        let p = provider(&config(short_timeouts(kind.spec(&server.base_url()))));
        let (events, error) = split(call(&p).await);
        let mut expected = vec![text("Hello")];
        expected.extend(kind.usage_when_cut(1));
        assert_eq!(events, expected);
        let error = error.expect("an error");
        assert_error(&error, ErrorClass::Interrupted, "stream_stalled", "");
        tokio::time::timeout(Duration::from_secs(30), server.hung_up.notified())
            .await
            .expect("the adapter closed the connection");
    }
}

#[tokio::test]
async fn malformed_events_after_the_status_line_are_interrupted_protocol_errors() {
    for kind in KINDS {
        let secretish = "do-not-echo-this-content";
        let mut events = kind.preamble();
        events.push(match kind {
            Kind::OpenAi | Kind::Azure => data(&format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{secretish}"#)).into_bytes(),
            Kind::Responses => event("response.output_text.delta", &format!(r#"{{"type":"response.output_text.delta","output_index":0,"delta":"{secretish}"#)).into_bytes(),
            Kind::Gemini | Kind::Vertex => data(&format!(r#"{{"candidates":[{{"content":{{"parts":[{{"text":"{secretish}"#)).into_bytes(),
            Kind::Anthropic => event("content_block_delta", &format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{secretish}"#)).into_bytes(),
            Kind::Bedrock => eventstream::event("contentBlockDelta", &format!(r#"{{"contentBlockIndex":0,"delta":{{"text":"{secretish}"#)),
        });
        let server = Upstream::always(kind.reply(&events)).await;
        let error = error_of(kind, &server.base_url(), |s| s).await;
        assert_error(
            &error,
            ErrorClass::Interrupted,
            "protocol_error",
            &format!("{kind:?}"),
        );
        assert!(
            !error.message.contains(secretish),
            "the offending line is for the log only: {}",
            error.message
        );

        let mut steps: Vec<Step> = kind.preamble().into_iter().map(Step::Send).collect();
        // Bytes the framing itself refuses: a line that is not UTF-8, or a message whose
        // CRC does not match.
        steps.push(Step::Send(match kind {
            Kind::Bedrock => {
                let mut message = eventstream::event("contentBlockDelta", "{}");
                let last = message.len() - 1;
                message[last] ^= 0xff;
                message
            }
            _ => b"data: \xff\xfe\n\n".to_vec(),
        }));
        let server = Upstream::always(kind.steps(steps)).await;
        let error = error_of(kind, &server.base_url(), |s| s).await;
        assert_error(&error, ErrorClass::Interrupted, "protocol_error", "");
    }
}

#[tokio::test]
async fn a_json_reply_instead_of_an_event_stream_is_a_protocol_error() {
    let server = Upstream::always(Behaviour::Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        steps: vec![Step::Send(
            br#"{"choices":[{"message":{"content":"hi"}}]}"#.to_vec(),
        )],
    })
    .await;
    let p = provider(&config(spec("openai", &server.base_url())));
    let error = split(call(&p).await).1.expect("an error");
    assert_error(&error, ErrorClass::Rejected, "protocol_error", "");
    assert_mentions(&error, "not an event stream");
}

/// A reply of one `huge` delta then `end`, sent in 64 KiB pieces.
async fn one_big_delta(kind: Kind, huge: &str) -> Upstream {
    let mut bytes = Vec::new();
    for e in kind.whole_reply(&[huge, "end"]) {
        bytes.extend_from_slice(&e);
    }
    let steps = bytes
        .chunks(64 * 1024)
        .map(|c| Step::Send(c.to_vec()))
        .collect();
    Upstream::always(kind.steps(steps)).await
}

#[tokio::test]
async fn a_large_event_arrives_whole_and_one_past_the_bound_is_refused() {
    // Just under the 1 MiB an event may hold (with its JSON around the text).
    let large = "lorem ipsum ".repeat(1000 * 1024 / 12);
    for kind in KINDS {
        let server = one_big_delta(kind, &large).await;
        let p = provider(&config(kind.spec(&server.base_url())));
        let (events, error) = split(call(&p).await);
        assert_eq!(error, None);
        assert_eq!(events[0], text(&large), "{kind:?}");
        assert_eq!(events[1], text("end"));
        assert_eq!(
            events.last(),
            Some(&ProviderEvent::Finished(FinishReason::Stop))
        );
    }
    // Five MiB in one event: a malformed reply, not five MiB held per call.
    let huge = "lorem ipsum ".repeat(5 * 1024 * 1024 / 12);
    for kind in KINDS {
        let server = one_big_delta(kind, &huge).await;
        let p = provider(&config(kind.spec(&server.base_url())));
        let (events, error) = split(call(&p).await);
        assert!(
            events
                .iter()
                .all(|e| !matches!(e, ProviderEvent::TextDelta(_)))
        );
        let error = error.expect("an error");
        assert_error(&error, ErrorClass::Interrupted, "protocol_error", "");
        assert_mentions(&error, "larger than the limit");
    }
}

#[tokio::test]
async fn a_slow_trickle_within_the_idle_timeout_is_a_normal_reply() {
    for kind in KINDS {
        let mut bytes = Vec::new();
        for e in kind.whole_reply(&["Hel", "lo"]) {
            bytes.extend_from_slice(&e);
        }
        // Seven bytes at a time, each after a pause: events split across many pieces.
        let mut steps = Vec::new();
        for piece in bytes.chunks(7) {
            steps.push(Step::Sleep(Duration::from_millis(2)));
            steps.push(Step::Send(piece.to_vec()));
        }
        let server = Upstream::always(kind.steps(steps)).await;
        let usual = timeouts(kind.spec(&server.base_url()), 2_000, 30_000, 10_000);
        let p = provider(&config(usual));
        let (events, error) = split(call(&p).await);
        assert_eq!(error, None);
        let mut expected = vec![text("Hel"), text("lo")];
        expected.extend(kind.usage_when_done());
        expected.push(ProviderEvent::Finished(FinishReason::Stop));
        assert_eq!(events, expected, "{kind:?}");
    }
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection_at_once() {
    for kind in KINDS {
        let mut steps: Vec<Step> = kind.preamble().into_iter().map(Step::Send).collect();
        steps.extend([Step::Send(kind.delta("Hello")), Step::Stall]);
        let server = Upstream::always(kind.steps(steps)).await;
        let p = provider(&config(kind.spec(&server.base_url())));
        let mut stream = p.call(ProviderCall {
            execution_id: ExecutionId::new(),
            attempt: 1,
            target_attempt: 1,
            model: "m".into(),
            input: std::sync::Arc::new(ExecutionInput {
                messages: vec![Message::user("hi")],
                ..Default::default()
            }),
            deadline: tokio::time::Instant::now() + Duration::from_secs(600),
            trace: None,
        });
        assert_eq!(stream.next().await, Some(Ok(text("Hello"))));
        drop(stream);
        tokio::time::timeout(Duration::from_secs(30), server.hung_up.notified())
            .await
            .expect("the connection was closed when the stream was dropped");
    }
}
