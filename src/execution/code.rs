//! The two closed sets of error codes and their wire names, in one place: why an execution
//! ended ([`ErrorCode`]) and why one attempt failed ([`AttemptCode`]). Callers match on these
//! strings, so a new code is a change to the contract, made here.

use std::fmt;

/// Why an execution failed, as a small closed set of stable codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ErrorCode {
    /// Every target of the plan lacks a required capability.
    NoCapableTarget,
    /// Every capable target was ejected by its health, and the policy says
    /// `on_all_unhealthy = "fail"`.
    NoHealthyTarget,
    /// The attempt limit was reached.
    AttemptsExhausted,
    /// The policy's wall-clock retry budget ran out.
    RetryBudgetExhausted,
    /// The execution's deadline passed.
    DeadlineExceeded,
    /// A failure after output was committed.
    OutputInterrupted,
    /// The execution reached `server.max_output_bytes` or `server.max_events_per_execution`.
    OutputTooLarge,
    /// The targets that could be tried rejected the request (or the first did, under
    /// `on_rejected = "stop"`).
    Rejected,
    /// The request cannot be sent to any target as it is.
    InvalidRequest,
    /// A target refused the request (or its answer) on a content or safety policy, and the
    /// policy does not route around that (`on_content_filter = "stop"`, the default).
    ContentFiltered,
    /// The remote may still be running the request, so it was not repeated.
    OutcomeUnknown,
    /// A caller or shutdown cancelled it.
    Cancelled,
    /// A fault inside the runtime.
    InternalError,
}

impl ErrorCode {
    /// Every code, for tests, metrics and documentation.
    pub const ALL: [Self; 13] = [
        Self::NoCapableTarget,
        Self::NoHealthyTarget,
        Self::AttemptsExhausted,
        Self::RetryBudgetExhausted,
        Self::DeadlineExceeded,
        Self::OutputInterrupted,
        Self::OutputTooLarge,
        Self::Rejected,
        Self::InvalidRequest,
        Self::ContentFiltered,
        Self::OutcomeUnknown,
        Self::Cancelled,
        Self::InternalError,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoCapableTarget => "no_capable_target",
            Self::NoHealthyTarget => "no_healthy_target",
            Self::AttemptsExhausted => "attempts_exhausted",
            Self::RetryBudgetExhausted => "retry_budget_exhausted",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::OutputInterrupted => "output_interrupted",
            Self::OutputTooLarge => "output_too_large",
            Self::Rejected => "rejected",
            Self::InvalidRequest => "invalid_request",
            Self::ContentFiltered => "content_filtered",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::Cancelled => "cancelled",
            Self::InternalError => "internal_error",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why one attempt failed. Adapters pick the code and, separately, the
/// [`ErrorClass`](crate::execution::ErrorClass) that decides what the router does next: the
/// code is for people and dashboards, the class for routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum AttemptCode {
    // The provider said no, or could not be reached.
    /// The provider is down or answered 5xx (HTTP 501-599 but 529).
    Unavailable,
    /// HTTP 429, or a rate-limit error in the stream.
    RateLimited,
    /// HTTP 529, or an overload error in the stream.
    Overloaded,
    /// HTTP 500, or an internal error in the stream.
    Internal,
    /// HTTP 408: the provider timed out reading the request.
    RequestTimeout,
    /// The connection could not be made: nothing was sent.
    ConnectFailed,
    /// The connection broke after the request was sent, before a response.
    ConnectionLost,
    /// No first byte within `timeouts.first_byte`.
    Timeout,
    /// Silence longer than `timeouts.idle` inside the response.
    StreamStalled,
    /// The response body broke or ended before the reply was complete.
    StreamInterrupted,
    /// The provider stream ended without finishing the reply.
    StreamEnded,
    /// The response did not follow the protocol (bad JSON, unexpected status).
    ProtocolError,
    /// An error the provider reported in the stream that no other code fits.
    ProviderError,
    // The request, as this target sees it.
    /// The request cannot be expressed in, or was refused by, the provider's protocol.
    InvalidRequest,
    /// HTTP 401: the API key was refused.
    Unauthorized,
    /// HTTP 403.
    Forbidden,
    /// HTTP 404: no such model or endpoint.
    NotFound,
    /// Another HTTP 4xx.
    Rejected,
    /// The provider refused the request (or its answer) on a content or safety policy.
    ContentFiltered,
    /// The scripted provider has no such model.
    ModelNotFound,
    // The runtime's own reasons.
    /// The plan names a provider the runtime does not have.
    ProviderMissing,
    /// The provider's admission queue was full.
    AdmissionRejected,
    /// The target's health had it ejected when the attempt reached it (ejected again since
    /// the plan was made, or half-open with every probe taken).
    TargetEjected,
    /// The caller or shutdown cancelled the attempt.
    Cancelled,
    /// The execution's deadline cut the attempt.
    DeadlineExceeded,
    /// The policy's retry budget cut the attempt.
    RetryBudgetExhausted,
    /// The execution's output or event bound cut the attempt.
    OutputTooLarge,
}

impl AttemptCode {
    /// Every code, for tests and documentation.
    pub const ALL: [Self; 27] = [
        Self::Unavailable,
        Self::RateLimited,
        Self::Overloaded,
        Self::Internal,
        Self::RequestTimeout,
        Self::ConnectFailed,
        Self::ConnectionLost,
        Self::Timeout,
        Self::StreamStalled,
        Self::StreamInterrupted,
        Self::StreamEnded,
        Self::ProtocolError,
        Self::ProviderError,
        Self::InvalidRequest,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::Rejected,
        Self::ContentFiltered,
        Self::ModelNotFound,
        Self::ProviderMissing,
        Self::AdmissionRejected,
        Self::TargetEjected,
        Self::Cancelled,
        Self::DeadlineExceeded,
        Self::RetryBudgetExhausted,
        Self::OutputTooLarge,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::RateLimited => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::Internal => "internal",
            Self::RequestTimeout => "request_timeout",
            Self::ConnectFailed => "connect_failed",
            Self::ConnectionLost => "connection_lost",
            Self::Timeout => "timeout",
            Self::StreamStalled => "stream_stalled",
            Self::StreamInterrupted => "stream_interrupted",
            Self::StreamEnded => "stream_ended",
            Self::ProtocolError => "protocol_error",
            Self::ProviderError => "provider_error",
            Self::InvalidRequest => "invalid_request",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::Rejected => "rejected",
            Self::ContentFiltered => "content_filtered",
            Self::ModelNotFound => "model_not_found",
            Self::ProviderMissing => "provider_missing",
            Self::AdmissionRejected => "admission_rejected",
            Self::TargetEjected => "target_ejected",
            Self::Cancelled => "cancelled",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::RetryBudgetExhausted => "retry_budget_exhausted",
            Self::OutputTooLarge => "output_too_large",
        }
    }

    /// The code of an attempt that `code` cut short: cancellation, a time limit or the size
    /// bound. Only those cut attempts; any other code is a bug in the caller, reported as the
    /// deadline (the one limit that always applies) rather than a panic.
    pub fn cut_by(code: ErrorCode) -> Self {
        match code {
            ErrorCode::Cancelled => Self::Cancelled,
            ErrorCode::RetryBudgetExhausted => Self::RetryBudgetExhausted,
            ErrorCode::OutputTooLarge => Self::OutputTooLarge,
            ErrorCode::DeadlineExceeded
            | ErrorCode::NoCapableTarget
            | ErrorCode::NoHealthyTarget
            | ErrorCode::AttemptsExhausted
            | ErrorCode::OutputInterrupted
            | ErrorCode::Rejected
            | ErrorCode::InvalidRequest
            | ErrorCode::ContentFiltered
            | ErrorCode::OutcomeUnknown
            | ErrorCode::InternalError => Self::DeadlineExceeded,
        }
    }
}

impl fmt::Display for AttemptCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn wire_names_are_distinct_lowercase_snake_case() {
        let names: HashSet<&str> = AttemptCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), AttemptCode::ALL.len());
        for name in names {
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
        }
    }

    /// The codes a comment of the .proto lists: each word in backticks between `start` and
    /// the field it documents (`field`), in order.
    fn listed(start: &str, field: &str) -> Vec<String> {
        const PROTO: &str = include_str!("../../proto/model_runtime/v1/execution.proto");
        let from = PROTO
            .find(start)
            .unwrap_or_else(|| panic!("no `{start}` in the .proto"));
        let comment = &PROTO[from..];
        let end = comment
            .find(field)
            .unwrap_or_else(|| panic!("no `{field}` after `{start}`"));
        let comment = &comment[..end];
        comment
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_proto_lists_every_execution_error_code_and_no_other() {
        let listed = listed("message ExecutionError {", "string code = 1;");
        let codes: Vec<String> = ErrorCode::ALL
            .iter()
            .map(|c| c.as_str().to_owned())
            .collect();
        assert_eq!(
            listed, codes,
            "ExecutionError.code's comment in execution.proto"
        );
        let distinct: HashSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(distinct.len(), ErrorCode::ALL.len());
    }

    #[test]
    fn the_protos_attempt_code_examples_are_attempt_codes() {
        let listed = listed("message AttemptError {", "string code = 2;");
        assert!(!listed.is_empty());
        for code in listed {
            assert!(
                AttemptCode::ALL.iter().any(|c| c.as_str() == code),
                "`{code}` in AttemptError.code's comment is no attempt code"
            );
        }
    }

    #[test]
    fn a_cut_attempt_is_named_after_what_cut_it() {
        for (code, cut) in [
            (ErrorCode::Cancelled, AttemptCode::Cancelled),
            (ErrorCode::DeadlineExceeded, AttemptCode::DeadlineExceeded),
            (
                ErrorCode::RetryBudgetExhausted,
                AttemptCode::RetryBudgetExhausted,
            ),
            (ErrorCode::OutputTooLarge, AttemptCode::OutputTooLarge),
        ] {
            assert_eq!(AttemptCode::cut_by(code).as_str(), code.as_str());
            assert_eq!(AttemptCode::cut_by(code), cut);
        }
    }
}
