use std::time::{Duration, SystemTime};

use http::StatusCode;
use http::header::{HeaderMap, HeaderValue};

use super::backoff::{rate_limit_reset, retry_after, retry_delay};
use super::classify::truncate;
use super::detail::ErrorDetail;
use super::*;
use crate::config::ProxyUrl;
use crate::execution::ErrorClass;

fn upstream() -> Upstream {
    let key = crate::config::Secret::new("sk-live-key");
    Upstream::offline("main", "openai", Some(key))
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

#[test]
fn retry_after_reads_seconds_dates_and_milliseconds() {
    let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
    let at = |pairs| retry_after(&headers(pairs), now);
    assert_eq!(at(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
    assert_eq!(at(&[("retry-after", " 0 ")]), Some(Duration::ZERO));
    assert_eq!(
        at(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
        Some(Duration::from_secs(30))
    );
    // The obsolete RFC 850 and asctime forms are still HTTP-dates.
    assert_eq!(
        at(&[("retry-after", "Wednesday, 21-Oct-15 07:29:00 GMT")]),
        Some(Duration::from_secs(60))
    );
    assert_eq!(
        at(&[("retry-after", "Wed Oct 21 07:28:05 2015")]),
        Some(Duration::from_secs(5))
    );
    assert_eq!(
        at(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]),
        Some(Duration::ZERO),
        "a date in the past means now"
    );
    assert_eq!(
        at(&[("retry-after-ms", "1500"), ("retry-after", "9")]),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(at(&[("retry-after", "soon")]), None);
    assert_eq!(at(&[("retry-after", "-3")]), None);
    assert_eq!(at(&[]), None);
}

#[test]
fn a_rate_limits_reset_is_read_from_openais_headers() {
    fn reset(pairs: &[(&'static str, &str)]) -> Option<Duration> {
        rate_limit_reset(&headers(pairs))
    }
    assert_eq!(
        reset(&[
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "6m0s")
        ]),
        Some(Duration::from_secs(360)),
        "the later of the two"
    );
    assert_eq!(
        reset(&[("x-ratelimit-reset-tokens", "20ms")]),
        Some(Duration::from_millis(20))
    );
    assert_eq!(
        reset(&[("x-ratelimit-reset-requests", "1.5s")]),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        reset(&[("x-ratelimit-reset-requests", "1h2m3s")]),
        Some(Duration::from_secs(3723))
    );
    for bad in ["", "soon", "5", "5x", "-1s", "s"] {
        assert_eq!(
            reset(&[("x-ratelimit-reset-requests", bad)]),
            None,
            "{bad:?}"
        );
    }
}

#[test]
fn googles_retry_info_in_the_body_is_a_retry_after() {
    let body = |delay: &str| {
        format!(
            r#"{{"error":{{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]}},{{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"{delay}"}}]}}}}"#
        )
    };
    assert_eq!(
        retry_delay(body("30s").as_bytes()),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        retry_delay(body("1.5s").as_bytes()),
        Some(Duration::from_millis(1500))
    );
    for bad in ["30", "-1s", "soon", ""] {
        assert_eq!(retry_delay(body(bad).as_bytes()), None, "{bad:?}");
    }
    assert_eq!(retry_delay(br#"{"error":{"code":500}}"#), None);
    assert_eq!(retry_delay(b"not json"), None);
}

#[test]
fn an_absurd_retry_after_is_cut_to_a_day() {
    let now = SystemTime::now();
    let day = Some(Duration::from_secs(24 * 60 * 60));
    let at = |pairs| retry_after(&headers(pairs), now);
    assert_eq!(at(&[("retry-after", "18446744073709551615")]), day);
    assert_eq!(at(&[("retry-after", "90000")]), day);
    assert_eq!(
        at(&[("retry-after", "86399")]),
        Some(Duration::from_secs(86399))
    );
    assert_eq!(at(&[("retry-after-ms", "1e300")]), day);
    assert_eq!(at(&[("retry-after-ms", "inf")]), day);
    assert_eq!(at(&[("retry-after-ms", "NaN")]), None);
    assert_eq!(at(&[("retry-after-ms", "-5")]), None);
    let far = httpdate::fmt_http_date(now + Duration::from_secs(10 * 365 * 24 * 60 * 60));
    assert_eq!(at(&[("retry-after", &far)]), day);
}

#[test]
fn statuses_map_to_classes_and_codes() {
    let up = upstream();
    let table = [
        (400, ErrorClass::Rejected, "invalid_request"),
        (401, ErrorClass::Rejected, "unauthorized"),
        (403, ErrorClass::Rejected, "forbidden"),
        (404, ErrorClass::Rejected, "not_found"),
        (408, ErrorClass::Retryable, "request_timeout"),
        (409, ErrorClass::Rejected, "rejected"),
        (422, ErrorClass::Rejected, "invalid_request"),
        (429, ErrorClass::Retryable, "rate_limited"),
        (500, ErrorClass::Retryable, "internal"),
        (502, ErrorClass::Retryable, "unavailable"),
        (503, ErrorClass::Retryable, "unavailable"),
        (504, ErrorClass::Retryable, "unavailable"),
        (529, ErrorClass::Retryable, "overloaded"),
        (302, ErrorClass::Rejected, "protocol_error"),
    ];
    for (status, class, code) in table {
        let error = up.status_error(
            StatusCode::from_u16(status).unwrap(),
            &HeaderMap::new(),
            b"",
        );
        assert_eq!(
            (error.class, error.code.as_str()),
            (class, code),
            "HTTP {status}"
        );
        assert!(
            error.message.contains("openai provider `main`"),
            "{}",
            error.message
        );
        assert!(
            error.message.contains(&status.to_string()),
            "{}",
            error.message
        );
    }
}

#[test]
fn retry_after_is_kept_on_retryable_statuses_only() {
    let up = upstream();
    let h = headers(&[("retry-after", "3")]);
    let limited = up.status_error(StatusCode::TOO_MANY_REQUESTS, &h, b"");
    assert_eq!(limited.retry_after, Some(Duration::from_secs(3)));
    let bad = up.status_error(StatusCode::BAD_REQUEST, &h, b"");
    assert_eq!(bad.retry_after, None);
}

#[test]
fn credential_errors_never_quote_the_body() {
    let up = upstream();
    let body = br#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    for status in [StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN] {
        let error = up.status_error(status, &HeaderMap::new(), body);
        assert!(!error.message.contains("sk-"), "{}", error.message);
        assert!(!error.message.contains("Incorrect"), "{}", error.message);
    }
}

#[test]
fn quoted_provider_text_never_carries_the_key() {
    let up = upstream();
    let body =
        br#"{"error":{"message":"bad key sk-live-key in header","type":"invalid_request_error"}}"#;
    let error = up.status_error(StatusCode::BAD_REQUEST, &HeaderMap::new(), body);
    assert!(
        error.message.contains("bad key <redacted> in header"),
        "{}",
        error.message
    );
    let error = up.stream_error(body);
    assert!(!error.message.contains("sk-live-key"), "{}", error.message);
}

#[test]
fn a_key_cut_in_two_by_the_quote_limit_is_still_blanked() {
    let up = upstream();
    // The key starts five bytes before the 200-byte cut: quoting first and blanking after
    // would let `sk-li` through.
    let message = format!("{}sk-live-key and more", "m".repeat(195));
    let error = serde_json::json!({"error": {"message": message, "type": "invalid_request_error"}});
    let body = serde_json::to_vec(&error).unwrap();
    let from_status = up.status_error(StatusCode::BAD_REQUEST, &HeaderMap::new(), &body);
    let from_stream = up.stream_error(error.to_string().as_bytes());
    for error in [from_status, from_stream] {
        assert_eq!(error.code.as_str(), "invalid_request");
        assert!(!error.message.contains("sk-"), "{}", error.message);
        assert!(error.message.contains("mmmm<reda"), "{}", error.message);
    }
    // A key echoed as the error's type is blanked too, where only the type is quoted.
    let error = serde_json::json!({"error": {"type": "sk-live-key"}});
    let body = serde_json::to_vec(&error).unwrap();
    let limited = up.status_error(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new(), &body);
    assert!(
        !limited.message.contains("sk-live-key"),
        "{}",
        limited.message
    );
    let streamed = up.stream_error(error.to_string().as_bytes());
    assert!(
        !streamed.message.contains("sk-live-key"),
        "{}",
        streamed.message
    );
}

#[test]
fn a_numeric_code_in_a_stream_error_classifies_like_that_status() {
    let up = upstream();
    let cases = [
        // vLLM: `create_streaming_error_response`, a bad request found mid-generation.
        (
            serde_json::json!({"error": {"object": "error", "message": "too long", "type": "BadRequestError", "param": null, "code": 400}}),
            ErrorClass::Rejected,
            "invalid_request",
        ),
        // llama.cpp: the context is exceeded (a 400), or the model is still loading (a 503).
        (
            serde_json::json!({"error": {"code": 400, "message": "context exceeded", "type": "exceed_context_size_error"}}),
            ErrorClass::Rejected,
            "invalid_request",
        ),
        (
            serde_json::json!({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}),
            ErrorClass::Retryable,
            "unavailable",
        ),
        (
            serde_json::json!({"error": {"code": 401, "message": "bad key sk-live-key", "type": "Unauthorized"}}),
            ErrorClass::Rejected,
            "unauthorized",
        ),
        // A known type wins; a number that is no error status changes nothing.
        (
            serde_json::json!({"error": {"code": 400, "type": "overloaded_error"}}),
            ErrorClass::Retryable,
            "overloaded",
        ),
        (
            serde_json::json!({"error": {"code": 200, "type": "Mystery"}}),
            ErrorClass::Retryable,
            "provider_error",
        ),
        (
            serde_json::json!({"error": {"code": 70000, "type": "Mystery"}}),
            ErrorClass::Retryable,
            "provider_error",
        ),
    ];
    for (json, class, code) in &cases {
        let error = up.stream_error(json.to_string().as_bytes());
        assert_eq!(
            (error.class, error.code.as_str()),
            (*class, *code),
            "{json}"
        );
        assert!(
            error.message.contains("openai provider `main`"),
            "{}",
            error.message
        );
        assert!(!error.message.contains("sk-live-key"), "{}", error.message);
    }
    let error = up.stream_error(cases[0].0.to_string().as_bytes());
    assert!(
        error
            .message
            .contains("(status 400, reported in the stream): BadRequestError: too long"),
        "{}",
        error.message
    );
}

#[test]
fn request_errors_quote_the_providers_reason_cut_short() {
    let up = upstream();
    let long = "m".repeat(1000);
    let body = format!(
        r#"{{"error":{{"message":"bad temperature\n{long}","type":"invalid_request_error"}}}}"#
    );
    let error = up.status_error(StatusCode::BAD_REQUEST, &HeaderMap::new(), body.as_bytes());
    assert!(
        error
            .message
            .contains(": invalid_request_error: bad temperature "),
        "{}",
        error.message
    );
    assert!(error.message.len() < 400, "{}", error.message.len());
    // vLLM puts the fields at the top level; Anthropic nests them under `error` beside `type`.
    let parse = |body: &str| ErrorDetail::parse(body.as_bytes());
    let vllm =
        parse(r#"{"object":"error","message":"no such model","type":"NotFoundError","code":404}"#);
    assert_eq!(vllm.kind.as_deref(), Some("NotFoundError"));
    assert_eq!(vllm.message.as_deref(), Some("no such model"));
    assert_eq!(vllm.status, Some(404));
    let anthropic =
        parse(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#);
    assert_eq!(anthropic.kind.as_deref(), Some("overloaded_error"));
    assert_eq!(anthropic.status, None);
    let junk = up.status_error(
        StatusCode::BAD_GATEWAY,
        &HeaderMap::new(),
        b"<html>bad gateway</html>",
    );
    assert_eq!(
        junk.message,
        "openai provider `main` is unavailable (HTTP 502)"
    );
}

#[test]
fn truncation_respects_character_boundaries() {
    assert_eq!(truncate("héllo", 2), "h");
    assert_eq!(truncate("héllo", 3), "hé");
    assert_eq!(truncate("abc", 10), "abc");
}

#[test]
fn plain_http_needs_no_tls_and_a_bad_proxy_names_the_provider() {
    let mut clients = HttpClients::default();
    let mut endpoint = HttpEndpointConfig {
        base_url: "http://127.0.0.1:9/v1".to_owned(),
        timeouts: upstream().timeouts,
        proxy: Some(ProxyUrl::new("http://user:p%40ss@127.0.0.1:3128")),
    };
    clients.client("p", &endpoint, "/messages", 4).unwrap();
    assert!(
        clients.tls.is_none(),
        "TLS is set up only when https needs it"
    );
    endpoint.proxy = Some(ProxyUrl::new("socks5://127.0.0.1:1080"));
    let error = clients.client("p", &endpoint, "/messages", 4).unwrap_err();
    assert_eq!(
        error.to_string(),
        "providers.p: proxy: `socks5` URLs are not supported"
    );
}

#[test]
fn retry_after_uses_the_clock_for_dates() {
    let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
    let wait = retry_after(&headers(&[("retry-after", &later)]), SystemTime::now()).unwrap();
    assert!(wait > Duration::from_secs(3000) && wait <= Duration::from_secs(3600));
}

/// A refusal on a content or safety policy has its own code (`content_filtered`, class
/// `rejected`): by the error's code where it has one (OpenAI, Azure OpenAI), else by its
/// words (Anthropic), from a status or inside a stream. A context-length error is still an
/// invalid request that another target may serve.
#[test]
fn content_policy_refusals_are_told_apart_from_other_rejections() {
    let up = upstream();
    let refusals: [&[u8]; 4] = [
        br#"{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}"#,
        br#"{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"}}}}}"#,
        br#"{"type":"error","error":{"type":"invalid_request_error","message":"Output blocked by content filtering policy"}}"#,
        br#"{"error":{"message":"blocked","type":"content_filter"}}"#,
    ];
    for body in refusals {
        let text = String::from_utf8_lossy(body);
        for error in [
            up.status_error(StatusCode::BAD_REQUEST, &HeaderMap::new(), body),
            up.stream_error(body),
        ] {
            assert_eq!(
                (error.class, error.code.as_str()),
                (ErrorClass::Rejected, "content_filtered"),
                "{text}: {}",
                error.message
            );
            assert!(
                error.message.contains("content policy"),
                "{}",
                error.message
            );
        }
    }
    let too_long = br#"{"error":{"message":"This model's maximum context length is 4096 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let error = up.status_error(StatusCode::BAD_REQUEST, &HeaderMap::new(), too_long);
    assert_eq!(
        (error.class, error.code.as_str()),
        (ErrorClass::Rejected, "invalid_request")
    );
}
