//! The one place a [`RuntimeError`] becomes a `tonic::Status`, with rich error details
//! (`google.rpc.BadRequest`, `ResourceInfo`, `ErrorInfo`) that any gRPC client can decode.

use std::collections::HashMap;

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
        RuntimeError::ResourceExhausted(exhausted) => Status::with_error_details(
            Code::ResourceExhausted,
            message,
            ErrorDetails::with_error_info(
                exhausted_reason(exhausted),
                ERROR_DOMAIN,
                HashMap::new(),
            ),
        ),
        RuntimeError::Unavailable(refusal) => Status::with_error_details(
            Code::Unavailable,
            message,
            ErrorDetails::with_error_info(
                unavailable_reason(refusal),
                ERROR_DOMAIN,
                HashMap::new(),
            ),
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
