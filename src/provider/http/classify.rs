//! The classification of HTTP outcomes into [`ErrorClass`]es, for every adapter: transport
//! errors, statuses with their back-off (read in `backoff.rs`), errors a provider reports
//! inside a 200 event stream (an AWS exception among them), and malformed responses. Every
//! message names the provider, never its key, and quotes upstream text only cut short and
//! with the key blanked out.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use http::StatusCode;
use http::header::HeaderMap;

use super::Upstream;
use super::backoff::{rate_limit_reset, retry_after, retry_delay};
use super::detail::ErrorDetail;
use crate::config::Secret;
use crate::execution::{AttemptCode, ErrorClass};
use crate::provider::ProviderError;
use h1::{ConnectStep, Failure};

/// How much of a provider's message an error may quote.
const QUOTE_LIMIT: usize = 200;

impl Upstream {
    /// A transport failure before a response: before the request left (retryable) or after
    /// (the remote may be running it). What the network or TLS layer said goes to the log,
    /// not to the caller: it names hosts, addresses and certificate details of the
    /// deployment.
    pub(crate) fn transport_error(&self, failure: &Failure) -> ProviderError {
        tracing::warn!(
            execution_id = self.execution_id(),
            attempt = self.attempt(),
            provider = %self.name,
            adapter = self.adapter,
            cause = failure.cause(),
            "provider request failed"
        );
        let label = self.label();
        match failure {
            Failure::Connect { step, .. } => {
                let what = if *step == ConnectStep::TimedOut {
                    format!(
                        "connecting timed out after {}",
                        humantime::format_duration(self.timeouts.connect)
                    )
                } else {
                    format!("connecting failed ({step})")
                };
                ProviderError::retryable(AttemptCode::ConnectFailed, format!("{label}: {what}"))
            }
            // The server needs the whole body before it acts on a request.
            Failure::Unsent(_) => ProviderError::retryable(
                AttemptCode::ConnectFailed,
                format!("{label}: the connection failed before all of the request was sent"),
            ),
            // (A broken body comes later, while the stream is read; it is worded there.)
            Failure::Lost(_) | Failure::Broken(_) => ProviderError::outcome_unknown(
                AttemptCode::ConnectionLost,
                format!(
                    "{label}: the connection failed after the request was sent, before a response"
                ),
            ),
        }
    }

    /// The error for a non-success `status`, with what the body said about it.
    pub(crate) fn status_error(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
    ) -> ProviderError {
        let code = status.as_u16();
        let detail = self.detail(body);
        let mut error = self
            .by_status(code, &format!("(HTTP {code})"), &detail)
            .unwrap_or_else(|| {
                ProviderError::rejected(
                    AttemptCode::ProtocolError,
                    format!(
                        "{} answered with unexpected HTTP status {code}",
                        self.label()
                    ),
                )
            });
        if error.class == ErrorClass::Retryable {
            error.retry_after = retry_after(headers, SystemTime::now());
            if error.retry_after.is_none() {
                error.retry_after = retry_delay(body);
            }
            if error.retry_after.is_none() && code == 429 {
                error.retry_after = rate_limit_reset(headers);
            }
        }
        error
    }

    /// How an error status (400 to 599) classifies, worded `{label} {what} {place}` plus,
    /// where it tells the caller what to fix, what the provider said; `None` for any other
    /// number. One table for HTTP statuses and for the statuses servers put in stream errors.
    fn by_status(&self, code: u16, place: &str, detail: &ErrorDetail) -> Option<ProviderError> {
        let label = self.label();
        let error = match code {
            // A refusal on a content or safety policy is not this target's alone to route
            // around (the policy's `on_content_filter` decides).
            400 | 403 | 422 if detail.is_content_filter() => ProviderError::rejected(
                AttemptCode::ContentFiltered,
                format!(
                    "{label} refused the request on a content policy {place}{}",
                    detail.quoted()
                ),
            ),
            // Never the body: a 401 message may quote part of the key.
            401 => ProviderError::rejected(
                AttemptCode::Unauthorized,
                format!("{label} rejected the API key {place}; check its api_key_env"),
            ),
            403 => ProviderError::rejected(
                AttemptCode::Forbidden,
                format!("{label} refused access to this model or endpoint {place}"),
            ),
            400 | 422 => ProviderError::rejected(
                AttemptCode::InvalidRequest,
                format!("{label} rejected the request {place}{}", detail.quoted()),
            ),
            404 => ProviderError::rejected(
                AttemptCode::NotFound,
                format!(
                    "{label} has no such model or endpoint {place}{}",
                    detail.quoted()
                ),
            ),
            408 => ProviderError::retryable(
                AttemptCode::RequestTimeout,
                format!("{label} timed out reading the request {place}"),
            ),
            429 => ProviderError::retryable(
                AttemptCode::RateLimited,
                format!("{label} is rate limiting {place}{}", detail.kind()),
            ),
            500 => ProviderError::retryable(
                AttemptCode::Internal,
                format!("{label} failed internally {place}{}", detail.kind()),
            ),
            529 => ProviderError::retryable(
                AttemptCode::Overloaded,
                format!("{label} is overloaded {place}{}", detail.kind()),
            ),
            501..=599 => ProviderError::retryable(
                AttemptCode::Unavailable,
                format!("{label} is unavailable {place}{}", detail.kind()),
            ),
            400..=499 => ProviderError::rejected(
                AttemptCode::Rejected,
                format!("{label} refused the request {place}{}", detail.quoted()),
            ),
            _ => return None,
        };
        Some(error)
    }

    /// A first-byte (`timeout`) or idle (`stream_stalled`) timer ran out after `limit`.
    /// Silence before the response's first byte leaves its outcome unknown (the provider
    /// may still be working on it); silence inside a response that began ended it
    /// (`interrupted`).
    pub(crate) fn timeout(
        &self,
        code: AttemptCode,
        what: &str,
        limit: Duration,
        output_started: bool,
    ) -> ProviderError {
        let when = when(output_started);
        let limit = humantime::format_duration(whole_millis(limit));
        if code == AttemptCode::StreamStalled {
            return ProviderError::interrupted(
                code,
                format!(
                    "{}: {what} for {limit} {when}; the response was ended",
                    self.label()
                ),
            );
        }
        ProviderError::outcome_unknown(
            code,
            format!(
                "{}: {what} for {limit} {when}; the provider may still be working on the request",
                self.label()
            ),
        )
    }

    /// The response body broke or ended before the reply was complete: the response began,
    /// so it ran, and it was ended (`interrupted`).
    pub(crate) fn interrupted(&self, why: &str, output_started: bool) -> ProviderError {
        ProviderError::interrupted(
            AttemptCode::StreamInterrupted,
            format!(
                "{}: the response stream {why} {}",
                self.label(),
                when(output_started)
            ),
        )
    }

    /// What a provider's error JSON says, with the key blanked out of every part of it. The
    /// whole text is cleaned before anything cuts it short: a key cut in two by a later
    /// truncation would no longer match, and its first half would reach the caller.
    fn detail(&self, json: &[u8]) -> ErrorDetail {
        let mut detail = ErrorDetail::parse(json);
        for text in [&mut detail.kind, &mut detail.message]
            .into_iter()
            .flatten()
        {
            if let Cow::Owned(clean) = self.redact(text) {
                *text = clean;
            }
        }
        detail
    }

    /// `text` with every credential the requests carry replaced by `<redacted>`, whatever
    /// its source: the key and the session token, and each value of a header marked
    /// sensitive (a bearer token read from a file or minted, without its `Bearer `).
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let headers = self
            .headers
            .values()
            .filter(|value| value.is_sensitive())
            .filter_map(|value| value.to_str().ok())
            .map(|value| value.strip_prefix("Bearer ").unwrap_or(value));
        let secrets = [&self.secret, &self.session]
            .into_iter()
            .flatten()
            .map(Secret::expose)
            .chain(headers);
        let mut text = Cow::Borrowed(text);
        for secret in secrets {
            // A value too short to be a credential would blank out ordinary words.
            if secret.len() >= MIN_REDACTED && text.contains(secret) {
                text = Cow::Owned(text.replace(secret, "<redacted>"));
            }
        }
        text
    }

    /// An error the provider reported inside a 200 event stream (Anthropic's `error` event,
    /// an OpenAI-compatible `{"error": ...}` chunk), classified like the HTTP status the same
    /// error would have had: by its type where it is a known one, else by the status that
    /// vLLM and llama.cpp put in a numeric `code`. The provider stopped working on the
    /// request, so nothing is left running remotely.
    pub(crate) fn stream_error(&self, error: &[u8]) -> ProviderError {
        self.stream_detail(&self.detail(error))
    }

    /// An exception an AWS event stream reported: its name (`:exception-type`, e.g.
    /// `throttlingException`) and its JSON payload (`{"message": ...}`), classified as
    /// [`Self::stream_error`] classifies an error of that type.
    pub(crate) fn stream_exception(&self, name: &str, payload: &[u8]) -> ProviderError {
        let mut detail = self.detail(payload);
        detail.kind = Some(name)
            .filter(|n| {
                !n.is_empty()
                    && n.len() <= 64
                    && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            })
            .map(str::to_owned);
        self.stream_detail(&detail)
    }

    /// See [`Self::stream_error`].
    fn stream_detail(&self, detail: &ErrorDetail) -> ProviderError {
        let label = self.label();
        let kind = detail.kind.as_deref().unwrap_or("");
        let reported = format!("{label} reported an error in the stream");
        if detail.is_content_filter() {
            return ProviderError::rejected(
                AttemptCode::ContentFiltered,
                format!("{reported}: a content policy refused it{}", detail.quoted()),
            );
        }
        match kind {
            "overloaded_error" | "overloaded" => {
                ProviderError::retryable(AttemptCode::Overloaded, format!("{reported}: {kind}"))
            }
            "rate_limit_error"
            | "rate_limit_exceeded"
            | "tokens"
            | "requests"
            | "throttlingException" => {
                ProviderError::retryable(AttemptCode::RateLimited, format!("{reported}: {kind}"))
            }
            "api_error"
            | "server_error"
            | "internal_error"
            | "internal_server_error"
            | "internalServerException"
            | "modelStreamErrorException" => {
                ProviderError::retryable(AttemptCode::Internal, format!("{reported}: {kind}"))
            }
            "timeout_error"
            | "timeout"
            | "modelTimeoutException"
            | "serviceUnavailableException" => {
                ProviderError::retryable(AttemptCode::Unavailable, format!("{reported}: {kind}"))
            }
            "invalid_request_error"
            | "invalid_request"
            | "request_too_large"
            | "validationException" => ProviderError::rejected(
                AttemptCode::InvalidRequest,
                format!("{reported}{}", detail.quoted()),
            ),
            "authentication_error" | "invalid_api_key" => ProviderError::rejected(
                AttemptCode::Unauthorized,
                format!("{reported}: the API key was rejected"),
            ),
            "permission_error" | "accessDeniedException" => {
                ProviderError::rejected(AttemptCode::Forbidden, format!("{reported}: {kind}"))
            }
            "not_found_error" | "model_not_found" | "resourceNotFoundException" => {
                ProviderError::rejected(
                    AttemptCode::NotFound,
                    format!("{reported}{}", detail.quoted()),
                )
            }
            _ => detail
                .status
                .and_then(|code| {
                    let place = format!("(status {code}, reported in the stream)");
                    self.by_status(code, &place, detail)
                })
                .unwrap_or_else(|| {
                    ProviderError::retryable(
                        AttemptCode::ProviderError,
                        format!("{reported}{}", detail.kind()),
                    )
                }),
        }
    }

    /// An event whose JSON did not parse or had the wrong shape. The message names where,
    /// not what: serde's message may quote upstream content.
    pub(crate) fn malformed_json(
        &self,
        what: &str,
        error: &serde_json::Error,
        data: &str,
    ) -> ProviderError {
        let what = format!(
            "{what} ({:?} error at line {} column {})",
            error.classify(),
            error.line(),
            error.column()
        );
        self.protocol_error(&what, data)
    }

    /// Malformed SSE or JSON. The offending text goes to the log only, truncated: it is
    /// upstream content and may be large.
    pub(crate) fn protocol_error(&self, what: &str, offending: &str) -> ProviderError {
        tracing::warn!(
            execution_id = self.execution_id(),
            attempt = self.attempt(),
            provider = %self.name,
            adapter = self.adapter,
            offending = truncate(&self.redact(offending), QUOTE_LIMIT),
            "malformed provider response: {what}"
        );
        ProviderError::rejected(
            AttemptCode::ProtocolError,
            format!("{} sent a malformed response: {what}", self.label()),
        )
    }
}

/// The shortest credential blanked out of quoted text.
const MIN_REDACTED: usize = 4;

/// Where in a reply something happened.
fn when(output_started: bool) -> &'static str {
    if output_started {
        "after output began"
    } else {
        "before any output"
    }
}

/// `limit` without its sub-millisecond part, so messages read `1s 500ms`.
fn whole_millis(limit: Duration) -> Duration {
    Duration::from_millis(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX))
}

/// Error codes providers give a refusal on a content or safety policy: OpenAI's
/// `content_policy_violation` and `content_filter`, Azure OpenAI's `content_filter` (with
/// `ResponsibleAIPolicyViolation` inside), and the same where a compatible server repeats them.
const CONTENT_FILTER_CODES: &[&str] = &[
    "content_filter",
    "content_policy_violation",
    "ResponsibleAIPolicyViolation",
];

/// What a provider's message says when it gives no such code: Anthropic's "Output blocked by
/// content filtering policy", Azure's "... content management policy".
const CONTENT_FILTER_WORDS: &[&str] = &["content filtering policy", "content management policy"];

impl ErrorDetail {
    /// Whether the provider refused on a content or safety policy (not on what the request
    /// asks of the model, which another target may serve): by its code, else its message.
    fn is_content_filter(&self) -> bool {
        let coded = [&self.code, &self.kind]
            .into_iter()
            .flatten()
            .any(|code| CONTENT_FILTER_CODES.contains(&code.as_str()));
        coded
            || self.message.as_ref().is_some_and(|message| {
                let message = message.to_ascii_lowercase();
                CONTENT_FILTER_WORDS.iter().any(|w| message.contains(w))
            })
    }

    /// `: overloaded_error`, or nothing.
    fn kind(&self) -> String {
        self.kind
            .as_ref()
            .map(|k| format!(": {k}"))
            .unwrap_or_default()
    }

    /// The kind and the provider's message, cut short and cleaned of control characters: it
    /// tells the caller what to fix in the request.
    fn quoted(&self) -> String {
        let mut text = self.kind();
        if let Some(message) = &self.message {
            let clean: String = truncate(message, QUOTE_LIMIT)
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            let _ = write!(text, ": {clean}");
        }
        text
    }
}

/// At most `max` bytes of `text`, cut on a character boundary.
pub(crate) fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let end = (0..=max)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    &text[..end]
}
