//! Caller mistakes are refused with the right gRPC code and a `BadRequest` violation that
//! names the field, and they change nothing.

use crate::common;

use std::time::Duration;

use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt;

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
        (
            "too many required capabilities",
            with(|r| {
                r.requirements = Some(pb::Requirements {
                    capabilities: vec!["c".into(); 65],
                });
            }),
            "requirements.capabilities",
        ),
        (
            "a capability name too long",
            with(|r| {
                r.requirements = Some(pb::Requirements {
                    capabilities: vec!["c".repeat(129)],
                });
            }),
            "requirements.capabilities[0]",
        ),
        (
            "too many stop sequences",
            with(|r| {
                r.input.as_mut().unwrap().parameters = Some(pb::GenerationParameters {
                    stop_sequences: vec!["x".into(); 17],
                    ..Default::default()
                });
            }),
            "input.parameters.stop_sequences",
        ),
    ]
}

#[tokio::test]
async fn a_request_larger_than_its_content_may_be_is_refused_before_decoding() {
    let mut server = start(config()).await;
    // max_input_bytes is 64: the wire limit is that plus an eighth, plus 64 KiB of framing.
    let status = within(server.client.submit(request("chat", &"x".repeat(70_000))))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert!(status.message().contains("too large"), "{status:?}");
    assert_eq!(stored_executions(&mut server.client).await, 0);
    server.stop().await;
}

#[tokio::test]
async fn errors_say_how_many_more_violations_there_were_and_quote_little() {
    let mut server = start(config()).await;
    let mut req = request(&"a".repeat(10_000), "hi");
    req.input.as_mut().unwrap().messages = vec![user(""); 500];
    let status = within(server.client.submit(req))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(bad_request_fields(&status).len(), 20);
    assert!(status.message().contains("more)"), "{}", status.message());
    assert!(
        status.message().len() < 4_000,
        "the message quotes the caller's 10 000-byte ability at its length: {} bytes",
        status.message().len()
    );
    let details = format!("{:?}", status.get_error_details());
    assert!(
        !details.contains(&"a".repeat(100)),
        "a detail echoes the caller's string"
    );
    server.stop().await;
}

#[tokio::test]
async fn too_many_messages_are_one_violation() {
    // With the default 1 MiB of content, ten thousand and one short messages decode.
    let mut server = start(echo()).await;
    let mut req = request("chat", "hi");
    req.input.as_mut().unwrap().messages = vec![user("a"); 10_001];
    let status = within(server.client.submit(req))
        .await
        .expect_err("refused");
    assert_violation(&status, Code::InvalidArgument, "input.messages");
    assert_eq!(bad_request_fields(&status), ["input.messages"]);
    server.stop().await;
}

#[tokio::test]
async fn a_cancel_reason_is_bounded() {
    let mut server = start(config()).await;
    let view = submit(&mut server.client, request("chat", "hello")).await;
    let cancel = |reason: String| pb::CancelExecutionRequest {
        execution_id: view.execution_id.clone(),
        reason,
    };
    let status = within(server.client.cancel_execution(cancel("r".repeat(513))))
        .await
        .expect_err("refused");
    assert_violation(&status, Code::InvalidArgument, "reason");
    // Four MiB never reach the runtime: the request is larger than any request may be.
    let status = within(server.client.cancel_execution(cancel("r".repeat(4 << 20))))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    server.stop().await;
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
