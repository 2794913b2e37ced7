//! Caller mistakes are refused with the right gRPC code and a `BadRequest` violation that
//! names the field, and they change nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::Code;
use tonic::transport::Channel;

/// `other` exists but `chat` does not allow it; inputs are capped at 64 bytes and deadlines
/// at one minute.
fn config() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .default_deadline(Duration::from_secs(30))
        .max_deadline(Duration::from_secs(60))
        .max_input_bytes(64)
        .provider(
            "scripted",
            ProviderSpec::scripted().model("echo", &["text"]),
        )
        .policy("default", PolicySpec::new(&["scripted/echo"]))
        .policy("other", PolicySpec::new(&["scripted/echo"]))
        .ability("chat", AbilitySpec::new("default"))
}

fn cases() -> Vec<(&'static str, pb::ExecuteRequest, &'static str)> {
    let ok = || request("chat", "hello");
    let with = |edit: fn(&mut pb::ExecuteRequest)| {
        let mut r = ok();
        edit(&mut r);
        r
    };
    vec![
        ("missing ability", with(|r| r.ability.clear()), "ability"),
        (
            "unknown ability",
            with(|r| r.ability = "nope".into()),
            "ability",
        ),
        (
            "unknown policy",
            with(|r| r.policy = "nope".into()),
            "policy",
        ),
        (
            "policy not allowed",
            with(|r| r.policy = "other".into()),
            "policy",
        ),
        ("no messages", with(|r| r.input = None), "input.messages"),
        (
            "empty text part",
            with(|r| {
                r.input.as_mut().unwrap().messages[0].content[0].part =
                    Some(pb::content_part::Part::Text(String::new()));
            }),
            "input.messages[0].content[0].text",
        ),
        (
            "role unspecified",
            with(|r| r.input.as_mut().unwrap().messages[0].role = pb::Role::Unspecified.into()),
            "input.messages[0].role",
        ),
        (
            "deadline in the past",
            with(|r| r.deadline = Some(deadline_ago(Duration::from_secs(5)))),
            "deadline",
        ),
        (
            "deadline beyond max_deadline",
            with(|r| r.deadline = Some(deadline_in(Duration::from_secs(3600)))),
            "deadline",
        ),
        (
            "zero max_attempts",
            with(|r| r.max_attempts = Some(0)),
            "max_attempts",
        ),
        (
            "oversized input",
            with(|r| r.input.as_mut().unwrap().messages = vec![user(&"x".repeat(65))]),
            "input",
        ),
    ]
}

#[tokio::test]
async fn submit_and_execute_name_the_bad_field_and_store_nothing() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    for (name, req, field) in cases() {
        let status = within(c.submit(req.clone()))
            .await
            .expect_err(&format!("submit with {name} is refused"));
        assert_violation(&status, Code::InvalidArgument, field);
        let status = within(c.execute(req))
            .await
            .expect_err(&format!("execute with {name} is refused"));
        assert_violation(&status, Code::InvalidArgument, field);
        assert_eq!(stored_executions(c).await, 0, "{name} stored an execution");
    }
    // The same server accepts a valid request: the refusals were about the fields.
    let events = execute(c, request("chat", "hello")).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    assert_eq!(stored_executions(c).await, 1);
    server.stop().await;
}

/// The status of Get, Cancel and Watch for `id`.
async fn lookups(
    c: &mut ModelRuntimeClient<Channel>,
    id: &str,
) -> Vec<(&'static str, tonic::Status)> {
    let get = within(c.get_execution(pb::GetExecutionRequest {
        execution_id: id.into(),
    }))
    .await
    .expect_err("get is refused");
    let cancel = within(c.cancel_execution(pb::CancelExecutionRequest {
        execution_id: id.into(),
        reason: String::new(),
    }))
    .await
    .expect_err("cancel is refused");
    let watch = within(c.watch(pb::WatchRequest {
        execution_id: id.into(),
        after_sequence: 0,
    }))
    .await
    .expect_err("watch is refused");
    vec![("get", get), ("cancel", cancel), ("watch", watch)]
}

#[tokio::test]
async fn an_unknown_execution_id_is_not_found() {
    let mut server = start(config()).await;
    let unknown = "ex_0123456789abcdef0123456789abcdef";
    for (rpc, status) in lookups(&mut server.client, unknown).await {
        assert_eq!(status.code(), Code::NotFound, "{rpc}: {status:?}");
    }
    assert_eq!(stored_executions(&mut server.client).await, 0);
    server.stop().await;
}

#[tokio::test]
async fn a_malformed_execution_id_is_invalid() {
    let mut server = start(config()).await;
    for id in ["", "nope", "ex_123", "ex_0123456789ABCDEF0123456789ABCDEF"] {
        for (rpc, status) in lookups(&mut server.client, id).await {
            assert_eq!(
                status.code(),
                Code::InvalidArgument,
                "{rpc} {id:?}: {status:?}"
            );
            assert_eq!(
                bad_request_fields(&status),
                ["execution_id"],
                "{rpc} {id:?}"
            );
        }
    }
    server.stop().await;
}
