//! How long a provider asks to be left alone before a retry: `Retry-After` (and OpenAI's
//! `retry-after-ms`), Google's `RetryInfo` in an error body, and OpenAI's and Azure's
//! `x-ratelimit-reset-*` on a 429.

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, RETRY_AFTER};

/// The longest back-off a provider may ask for. No execution waits a day, so a longer
/// `Retry-After` says no more than this one does (the router falls back or stops), and an
/// absurd value (`18446744073709551615`) cannot overflow the time arithmetic downstream.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The provider's requested back-off: `retry-after-ms` (OpenAI), else `Retry-After` as
/// delay-seconds or an HTTP-date (RFC 9110 section 10.2.3). A date in the past means now; a
/// wait past [`MAX_RETRY_AFTER`] is cut to it.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let wait = if let Some(ms) = header("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|ms| *ms >= 0.0)
    {
        // Cut before converting: `try_`, because an absurd or infinite value must not panic.
        Duration::try_from_secs_f64((ms / 1000.0).min(MAX_RETRY_AFTER.as_secs_f64())).ok()?
    } else {
        let value = header(RETRY_AFTER.as_str())?;
        if let Ok(seconds) = value.parse::<u64>() {
            Duration::from_secs(seconds)
        } else {
            let date = httpdate::parse_http_date(value).ok()?;
            date.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The back-off an error body asks for in Google's way: a `google.rpc.RetryInfo` among the
/// error's `details`, whose `retryDelay` is a duration such as `30s` or `1.5s` (Gemini,
/// Vertex AI). Cut to a day like `Retry-After`.
pub(crate) fn retry_delay(body: &[u8]) -> Option<Duration> {
    #[derive(serde::Deserialize)]
    struct Body {
        error: Error,
    }
    #[derive(serde::Deserialize)]
    struct Error {
        #[serde(default)]
        details: Vec<Detail>,
    }
    #[derive(serde::Deserialize)]
    struct Detail {
        #[serde(rename = "@type", default)]
        kind: String,
        #[serde(rename = "retryDelay", default)]
        retry_delay: Option<String>,
    }
    let body: Body = serde_json::from_slice(body).ok()?;
    let delay = body
        .error
        .details
        .into_iter()
        .find(|d| d.kind.ends_with("google.rpc.RetryInfo"))?
        .retry_delay?;
    let seconds: f64 = delay.trim().strip_suffix('s')?.parse().ok()?;
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(seconds.min(MAX_RETRY_AFTER.as_secs_f64())).ok()
}

/// When a 429's exhausted limit resets, from OpenAI's and Azure OpenAI's
/// `x-ratelimit-reset-requests` and `x-ratelimit-reset-tokens` (durations like `1s`, `6m0s`,
/// `20ms`, `0.5s`): the later of the two, for a 429 that sent no `Retry-After`. Only a 429's:
/// every response carries them, and they say nothing of why a 5xx failed.
pub(crate) fn rate_limit_reset(headers: &HeaderMap) -> Option<Duration> {
    ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
        .into_iter()
        .filter_map(|name| headers.get(name)?.to_str().ok())
        .filter_map(|value| reset_duration(value.trim()))
        .max()
        .map(|wait| wait.min(MAX_RETRY_AFTER))
}

/// A duration as these headers write it: numbers each followed by `h`, `m`, `s` or `ms`
/// (`6m0s`, `1.5s`, `20ms`); `None` for anything else.
fn reset_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0_f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|end| *end > 0)?;
        let number: f64 = rest[..digits].parse().ok()?;
        let after = &rest[digits..];
        let (unit, seconds) = if after.starts_with("ms") {
            ("ms", 0.001)
        } else if after.starts_with('h') {
            ("h", 3600.0)
        } else if after.starts_with('m') {
            ("m", 60.0)
        } else if after.starts_with('s') {
            ("s", 1.0)
        } else {
            return None;
        };
        total += number * seconds;
        rest = &after[unit.len()..];
    }
    Duration::try_from_secs_f64(total.min(MAX_RETRY_AFTER.as_secs_f64())).ok()
}
