//! What a caller is told when its request is refused or its execution fails, in the API's own
//! error shape. Before any output, a real HTTP status: 400 names the field, 404 an unknown
//! model (ability), 422 an `Idempotency-Key` reused with another body, 429 with
//! `Retry-After` when admission or a provider's limit refused, 503 while the runtime drains
//! or its store is unavailable, 504 at the deadline. After output began, the status is gone:
//! the API's error event ends the stream instead ([`Refusal::event`]).

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, StatusCode, header};
use serde_json::json;

use super::body::{self, Answer};
use crate::execution::{AttemptCode, ErrorCode, ExecutionError};
use crate::runtime::RuntimeError;

/// Which API's error shape to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    /// `{"error": {"message", "type", "param", "code"}}`.
    OpenAi,
    /// `{"type": "error", "error": {"type", "message"}}`.
    Anthropic,
}

/// A request refused, or an execution that failed before its output began.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    /// The runtime's code (`no_capable_target`, `invalid_argument`, ...).
    pub(super) code: &'static str,
    pub(super) message: String,
    /// The request field at fault, as the API names it.
    pub(super) param: Option<String>,
    pub(super) retry_after: Option<Duration>,
}

impl Refusal {
    pub(super) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            param: None,
            retry_after: None,
        }
    }

    /// The runtime could not go on reading an execution's events (its store failed): the
    /// caller may come back for them.
    pub(super) fn cut() -> Self {
        Self {
            retry_after: Some(Duration::from_secs(1)),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the runtime could not go on reading the execution's events: resume with \
                 Last-Event-ID, or see GET /v1/executions/{id}",
            )
        }
    }

    /// A fault inside the runtime: the cause is logged under an error id, which is all the
    /// caller is told of it.
    pub(super) fn internal(cause: &dyn std::fmt::Display) -> Self {
        Self::of_runtime(&RuntimeError::Internal {
            error_id: crate::runtime::log_internal(cause),
        })
    }

    /// A field of the request that cannot be taken, and why.
    pub(super) fn invalid(param: impl Into<String>, why: impl std::fmt::Display) -> Self {
        let param = param.into();
        Self {
            message: format!("{param}: {why}"),
            param: Some(param),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_argument", "")
        }
    }

    /// What the runtime's refusal of a call says.
    pub(super) fn of_runtime(error: &RuntimeError) -> Self {
        match error {
            RuntimeError::InvalidArgument(violations) => {
                let first = violations.shown().first();
                Self {
                    param: first.map(|v| v.field.clone()),
                    ..Self::new(
                        StatusCode::BAD_REQUEST,
                        "invalid_argument",
                        first.map_or_else(
                            || error.to_string(),
                            |v| format!("{}: {}", v.field, v.description),
                        ),
                    )
                }
            }
            RuntimeError::OutOfRange(violation) => Self {
                param: Some(violation.field.clone()),
                ..Self::new(
                    StatusCode::BAD_REQUEST,
                    "out_of_range",
                    format!("{}: {}", violation.field, violation.description),
                )
            },
            RuntimeError::NotFound(_) => {
                Self::new(StatusCode::NOT_FOUND, "not_found", error.to_string())
            }
            RuntimeError::AlreadyExists { .. } => Self {
                param: Some("Idempotency-Key".into()),
                ..Self::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "idempotency_key_reused",
                    error.to_string(),
                )
            },
            RuntimeError::ResourceExhausted(_) => Self {
                retry_after: Some(Duration::from_secs(1)),
                ..Self::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "resource_exhausted",
                    error.to_string(),
                )
            },
            RuntimeError::Unavailable(_) => Self {
                retry_after: Some(Duration::from_secs(1)),
                ..Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    error.to_string(),
                )
            },
            RuntimeError::Internal { .. } => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                error.to_string(),
            ),
        }
    }

    /// What an execution that failed before any output says.
    pub(super) fn of_failure(error: &ExecutionError) -> Self {
        let last = error.last_attempt_error.as_ref();
        // A provider's limit or the runtime's admission refused the last try: the caller
        // may come back, and when.
        let limited = last.filter(|e| {
            matches!(
                e.code,
                AttemptCode::RateLimited | AttemptCode::AdmissionRejected
            )
        });
        let status = match error.code {
            ErrorCode::NoCapableTarget
            | ErrorCode::Rejected
            | ErrorCode::InvalidRequest
            | ErrorCode::ContentFiltered => StatusCode::BAD_REQUEST,
            ErrorCode::AttemptsExhausted | ErrorCode::RetryBudgetExhausted if limited.is_some() => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ErrorCode::NoHealthyTarget => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::AttemptsExhausted
            | ErrorCode::RetryBudgetExhausted
            | ErrorCode::OutputInterrupted
            | ErrorCode::OutputTooLarge
            | ErrorCode::OutcomeUnknown => StatusCode::BAD_GATEWAY,
            // nginx's "client closed request": no client retries it.
            ErrorCode::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::CONFLICT),
            ErrorCode::InternalError => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let retry_after = match status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => Some(
                limited
                    .and_then(|e| e.retry_after)
                    .unwrap_or(Duration::from_secs(1)),
            ),
            _ => None,
        };
        Self {
            retry_after,
            ..Self::new(status, error.code.as_str(), error.message.clone())
        }
    }

    /// The API's type of error for this status.
    fn kind(&self, api: Api) -> &'static str {
        match (api, self.status.as_u16()) {
            (_, 400 | 422) => "invalid_request_error",
            (Api::OpenAi, 401) => "invalid_request_error",
            (Api::Anthropic, 401) => "authentication_error",
            (_, 404) => "not_found_error",
            (_, 429) => "rate_limit_error",
            (Api::Anthropic, 503) => "overloaded_error",
            (Api::OpenAi, 504) => "timeout",
            (Api::OpenAi, _) => "server_error",
            (Api::Anthropic, _) => "api_error",
        }
    }

    /// The error as JSON in `api`'s shape.
    pub(super) fn body(&self, api: Api) -> serde_json::Value {
        match api {
            Api::OpenAi => json!({"error": {
                "message": self.message,
                "type": self.kind(api),
                "param": self.param,
                "code": self.code,
            }}),
            Api::Anthropic => json!({"type": "error", "error": {
                "type": self.kind(api),
                "message": self.message,
            }}),
        }
    }

    /// The answer: the status, the error, and `Retry-After` where the caller may come back.
    pub(super) fn answer(&self, api: Api) -> Answer {
        let mut answer = body::json(self.status, &self.body(api));
        if let Some(wait) = self.retry_after {
            // Whole seconds, rounded up: a client waits at least as long as it was told.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            answer
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        answer
    }

    /// The error as a server-sent event ending a stream whose output began: OpenAI's SDKs
    /// raise on a `data:` object with an `error`, Anthropic's on `event: error`.
    pub(super) fn event(&self, api: Api) -> Bytes {
        let mut out = BytesMut::new();
        if api == Api::Anthropic {
            out.put_slice(b"event: error\n");
        }
        out.put_slice(b"data: ");
        out.put_slice(self.body(api).to_string().as_bytes());
        out.put_slice(b"\n\n");
        out.freeze()
    }
}

#[cfg(test)]
mod tests;
