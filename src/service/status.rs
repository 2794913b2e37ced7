//! The one place a [`RuntimeError`] becomes a `tonic::Status`, with rich error details
//! (`google.rpc.BadRequest`, `ResourceInfo`, `ErrorInfo`, `RetryInfo`) that any gRPC client
//! can decode, and gRPC's own retry pushback on what a client should retry.

use std::collections::HashMap;
use std::time::Duration;

use tonic::metadata::MetadataValue;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::runtime::{Exhausted, NotReady, RuntimeError};

/// The `ErrorInfo.domain` of every error this service returns.
pub const ERROR_DOMAIN: &str = "model-runtime";

const EXECUTION_RESOURCE: &str = "model_runtime.v1.Execution";

/// Maps a runtime error to its gRPC status.
pub fn to_status(error: RuntimeError) -> Status {
    let message = error.to_string();
    match error {
        RuntimeError::InvalidArgument(violations) => {
            let mut details = ErrorDetails::new();
            for v in violations.shown() {
                details.add_bad_request_violation(v.field.clone(), v.description.clone());
            }
            Status::with_error_details(Code::InvalidArgument, message, details)
        }
        RuntimeError::OutOfRange(v) => Status::with_error_details(
            Code::OutOfRange,
            message,
            ErrorDetails::with_bad_request_violation(v.field, v.description),
        ),
        RuntimeError::NotFound(id) => {
            let mut details = ErrorDetails::with_resource_info(
                EXECUTION_RESOURCE,
                id.to_string(),
                "",
                "no such execution (it may have expired)",
            );
            details.add_bad_request_violation("execution_id", "names no execution");
            Status::with_error_details(Code::NotFound, message, details)
        }
        RuntimeError::AlreadyExists { key, execution_id } => Status::with_error_details(
            Code::AlreadyExists,
            message,
            ErrorDetails::with_resource_info(
                EXECUTION_RESOURCE,
                execution_id.to_string(),
                "",
                format!("idempotency key `{key}` is bound to a different request"),
            ),
        ),
        RuntimeError::ResourceExhausted(exhausted) => retry_later(
            Code::ResourceExhausted,
            message,
            exhausted_reason(exhausted),
            RETRY_FULL,
        ),
        RuntimeError::Unavailable(refusal) => retry_later(
            Code::Unavailable,
            message,
            unavailable_reason(refusal),
            match refusal {
                // Another replica takes it now; this one will not.
                NotReady::Stopping => RETRY_ELSEWHERE,
                NotReady::StorageFailed => RETRY_FULL,
            },
        ),
        RuntimeError::Internal { error_id } => Status::with_error_details(
            Code::Internal,
            "internal_error",
            ErrorDetails::with_error_info(
                "INTERNAL_ERROR",
                ERROR_DOMAIN,
                HashMap::from([("error_id".to_owned(), error_id)]),
            ),
        ),
    }
}

/// How long a client waits before it asks a full runtime again.
const RETRY_FULL: Duration = Duration::from_secs(1);

/// How long a client waits before it asks again when this replica is draining: another one
/// (the balancer's next pick, once this one's GOAWAY arrives) can take the call at once.
const RETRY_ELSEWHERE: Duration = Duration::from_millis(100);

/// A refusal the client should retry after `wait`: `ErrorInfo` with its reason, and the wait
/// twice over, as `google.rpc.RetryInfo` and as gRPC's own `grpc-retry-pushback-ms`, which a
/// channel's retry policy honours.
fn retry_later(code: Code, message: String, reason: &'static str, wait: Duration) -> Status {
    let mut details = ErrorDetails::with_error_info(reason, ERROR_DOMAIN, HashMap::new());
    details.set_retry_info(Some(wait));
    let mut status = Status::with_error_details(code, message, details);
    status.metadata_mut().insert(
        "grpc-retry-pushback-ms",
        MetadataValue::from(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
    );
    status
}

// The `google.rpc.ErrorInfo` reasons, all here: clients match on them.

fn unavailable_reason(refusal: NotReady) -> &'static str {
    match refusal {
        NotReady::Stopping => "STOPPING",
        NotReady::StorageFailed => "UNAVAILABLE",
    }
}

fn exhausted_reason(exhausted: Exhausted) -> &'static str {
    match exhausted {
        Exhausted::StoreFull { .. } => "STORE_FULL",
        Exhausted::Watchers { .. } => "TOO_MANY_WATCHERS",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::ExecutionId;
    use crate::runtime::Violations;

    #[test]
    fn invalid_arguments_carry_field_violations() {
        let mut violations = Violations::new();
        violations.push("ability", "is required");
        violations.push("input.messages", "needs at least one message");
        let status = to_status(RuntimeError::InvalidArgument(violations));
        assert_eq!(status.code(), Code::InvalidArgument);
        let details = status.get_error_details();
        let fields: Vec<&str> = details
            .bad_request()
            .map(|b| {
                b.field_violations
                    .iter()
                    .map(|v| v.field.as_str())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(fields, ["ability", "input.messages"]);
    }

    #[test]
    fn what_a_client_should_retry_says_when() {
        let full = to_status(RuntimeError::ResourceExhausted(Exhausted::StoreFull {
            executions: 1,
            bytes: 1,
        }));
        let draining = to_status(RuntimeError::Unavailable(NotReady::Stopping));
        let failed = to_status(RuntimeError::Unavailable(NotReady::StorageFailed));
        for (status, wait) in [(&full, 1000), (&draining, 100), (&failed, 1000)] {
            let retry = status.get_error_details().retry_info().cloned();
            let delay = retry.and_then(|r| r.retry_delay);
            assert_eq!(delay, Some(Duration::from_millis(wait)), "{status:?}");
            let pushback = status.metadata().get("grpc-retry-pushback-ms");
            assert_eq!(
                pushback.and_then(|v| v.to_str().ok()),
                Some(wait.to_string().as_str())
            );
        }
        let internal = to_status(RuntimeError::internal(&"x"));
        assert!(internal.metadata().get("grpc-retry-pushback-ms").is_none());
    }

    #[test]
    fn internal_errors_reveal_only_an_error_id() {
        let status = to_status(RuntimeError::internal(&"disk on fire at /var/secret"));
        assert_eq!(status.code(), Code::Internal);
        assert_eq!(status.message(), "internal_error");
        let info = status.get_error_details().error_info().cloned();
        let info = info.unwrap_or_else(|| panic!("error info missing"));
        assert!(info.metadata.contains_key("error_id"));
        assert!(!format!("{status:?}").contains("secret"));
    }

    #[test]
    fn unknown_ids_are_not_found_with_the_resource() {
        let id = ExecutionId::new();
        let status = to_status(RuntimeError::NotFound(id));
        assert_eq!(status.code(), Code::NotFound);
        let details = status.get_error_details();
        let info = details.resource_info().cloned();
        assert_eq!(info.map(|i| i.resource_name), Some(id.to_string()));
        let fields: Vec<String> = details
            .bad_request()
            .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
            .unwrap_or_default();
        assert_eq!(fields, ["execution_id"]);
    }

    #[test]
    fn refusals_name_their_reason() {
        let status = to_status(RuntimeError::Unavailable(NotReady::Stopping));
        assert_eq!(status.code(), Code::Unavailable);
        let reason = status
            .get_error_details()
            .error_info()
            .map(|i| i.reason.clone());
        assert_eq!(reason.as_deref(), Some("STOPPING"));
        let status = to_status(RuntimeError::Unavailable(NotReady::StorageFailed));
        let reason = status
            .get_error_details()
            .error_info()
            .map(|i| i.reason.clone());
        assert_eq!(reason.as_deref(), Some("UNAVAILABLE"));
        let status = to_status(RuntimeError::ResourceExhausted(Exhausted::StoreFull {
            executions: 3,
            bytes: 1024,
        }));
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.message().contains("3 executions"), "{status:?}");
        let reason = status
            .get_error_details()
            .error_info()
            .map(|i| i.reason.clone());
        assert_eq!(reason.as_deref(), Some("STORE_FULL"));
    }

    #[test]
    fn a_flood_of_violations_is_cut_to_twenty_and_counted() {
        let mut violations = Violations::new();
        for i in 0..1000 {
            violations.push(format!("input.messages[{i}].role"), "is required");
        }
        let status = to_status(RuntimeError::InvalidArgument(violations));
        let details = status.get_error_details();
        let listed = details
            .bad_request()
            .map_or(0, |b| b.field_violations.len());
        assert_eq!(listed, Violations::MAX);
        assert!(
            status.message().ends_with("(and 980 more)"),
            "{}",
            status.message()
        );
        assert!(status.message().len() < 2000);
    }
}
