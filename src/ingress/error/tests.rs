use std::time::Duration;

use http::StatusCode;

use super::{Api, Refusal};
use crate::execution::{AttemptCode, AttemptError, ErrorClass, ErrorCode, ExecutionError, Outcome};
use crate::runtime::{FieldViolation, RuntimeError, Violations};

fn failure(code: ErrorCode, last: Option<(AttemptCode, Option<Duration>)>) -> ExecutionError {
    ExecutionError {
        code,
        message: "why".into(),
        outcome: Outcome::NotStarted,
        last_attempt_error: last.map(|(code, retry_after)| AttemptError {
            class: ErrorClass::Retryable,
            code,
            message: "last".into(),
            retry_after,
        }),
    }
}

#[test]
fn every_failure_before_output_has_its_status() {
    for code in &ErrorCode::ALL {
        let status = Refusal::of_failure(&failure(*code, None)).status.as_u16();
        let expected = match code {
            ErrorCode::NoCapableTarget
            | ErrorCode::Rejected
            | ErrorCode::InvalidRequest
            | ErrorCode::ContentFiltered => 400,
            ErrorCode::NoHealthyTarget => 503,
            ErrorCode::DeadlineExceeded => 504,
            ErrorCode::Cancelled => 499,
            ErrorCode::InternalError => 500,
            ErrorCode::AttemptsExhausted
            | ErrorCode::RetryBudgetExhausted
            | ErrorCode::OutputInterrupted
            | ErrorCode::OutputTooLarge
            | ErrorCode::OutcomeUnknown => 502,
        };
        assert_eq!(status, expected, "{code:?}");
    }
}

#[test]
fn a_limit_that_refused_the_last_attempt_is_a_429_with_its_wait() {
    let limited = failure(
        ErrorCode::AttemptsExhausted,
        Some((AttemptCode::RateLimited, Some(Duration::from_millis(2500)))),
    );
    let refusal = Refusal::of_failure(&limited);
    assert_eq!(refusal.status, StatusCode::TOO_MANY_REQUESTS);
    let answer = refusal.answer(Api::OpenAi);
    assert_eq!(answer.headers()["retry-after"], "3", "rounded up");
    let admission = failure(
        ErrorCode::AttemptsExhausted,
        Some((AttemptCode::AdmissionRejected, None)),
    );
    let answer = Refusal::of_failure(&admission).answer(Api::Anthropic);
    assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.headers()["retry-after"], "1");
}

#[test]
fn the_runtimes_refusals_have_their_status_and_field() {
    let mut violations = Violations::new();
    violations.push("policy", "unknown policy `x`");
    let refusal = Refusal::of_runtime(&RuntimeError::InvalidArgument(violations));
    assert_eq!(refusal.status, StatusCode::BAD_REQUEST);
    assert_eq!(refusal.param.as_deref(), Some("policy"));
    assert_eq!(refusal.message, "policy: unknown policy `x`");
    let out_of_range = RuntimeError::OutOfRange(FieldViolation::new("after_sequence", "past"));
    assert_eq!(
        Refusal::of_runtime(&out_of_range).status,
        StatusCode::BAD_REQUEST
    );
    let internal = Refusal::of_runtime(&RuntimeError::Internal {
        error_id: "e1".into(),
    });
    assert_eq!(internal.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(internal.message, "internal_error (error id e1)");
}

#[test]
fn after_output_the_error_is_each_apis_stream_event() {
    let refusal = Refusal::of_failure(&failure(ErrorCode::OutputInterrupted, None));
    let openai = String::from_utf8(refusal.event(Api::OpenAi).to_vec()).unwrap();
    let data: serde_json::Value =
        serde_json::from_str(openai.strip_prefix("data: ").unwrap().trim_end()).unwrap();
    assert_eq!(data["error"]["code"], "output_interrupted");
    assert_eq!(data["error"]["type"], "server_error");
    let anthropic = String::from_utf8(refusal.event(Api::Anthropic).to_vec()).unwrap();
    let data = anthropic.strip_prefix("event: error\ndata: ").unwrap();
    let data: serde_json::Value = serde_json::from_str(data.trim_end()).unwrap();
    assert_eq!(data["type"], "error");
    assert_eq!(data["error"]["type"], "api_error");
}
