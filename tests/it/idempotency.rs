//! An idempotency key binds one request to one execution: repeating it attaches to the first
//! execution (whatever the deadline); reusing it for a different request is ALREADY_EXISTS.
//! (docs/protocol.md: IDEM-1, IDEM-2.)

use crate::common;

use std::time::Duration;

use common::*;
use model_runtime::pb;
use tonic::Code;
use tonic_types::StatusExt;

fn keyed(key: &str, prompt: &str) -> pb::ExecuteRequest {
    let mut r = request("chat", prompt);
    r.idempotency_key = key.into();
    r
}

#[tokio::test]
async fn the_same_key_and_request_return_the_same_execution() {
    let mut server = start(echo()).await;
    let c = &mut server.client;
    let first = submit(c, keyed("order-1", "hello")).await;
    let again = submit(c, keyed("order-1", "hello")).await;
    assert_eq!(again.execution_id, first.execution_id);
    assert_eq!(again.idempotency_key, "order-1");

    let events = execute(c, keyed("order-1", "hello")).await;
    assert_complete_sequence(&events);
    assert!(events.iter().all(|e| e.execution_id == first.execution_id));
    assert_eq!(
        text_of(&events),
        "hello",
        "the stream follows the one execution"
    );
    assert_eq!(stored_executions(c).await, 1);

    // A different key is a different execution.
    let other = submit(c, keyed("order-2", "hello")).await;
    assert_ne!(other.execution_id, first.execution_id);
    server.stop().await;
}

#[tokio::test]
async fn the_same_key_with_a_different_request_is_already_exists() {
    let mut server = start(echo()).await;
    let c = &mut server.client;
    let first = submit(c, keyed("order-1", "hello")).await;

    let mut different = vec![keyed("order-1", "goodbye")];
    let mut labelled = keyed("order-1", "hello");
    labelled.labels.insert("tenant".into(), "t-2".into());
    different.push(labelled);
    for req in different {
        let status = within(c.submit(req.clone()))
            .await
            .expect_err("submit refused");
        assert_eq!(status.code(), Code::AlreadyExists, "{status:?}");
        let info = status
            .get_error_details()
            .resource_info()
            .cloned()
            .expect("resource info");
        assert_eq!(
            info.resource_name, first.execution_id,
            "names the execution holding the key"
        );
        let status = within(c.execute(req)).await.expect_err("execute refused");
        assert_eq!(status.code(), Code::AlreadyExists, "{status:?}");
    }
    assert_eq!(stored_executions(c).await, 1);
    server.stop().await;
}

#[tokio::test]
async fn a_new_deadline_with_the_same_key_attaches_to_the_first_execution() {
    let mut server = start(echo()).await;
    let c = &mut server.client;
    let mut req = keyed("order-1", "hello");
    req.deadline = Some(deadline_in(Duration::from_secs(30)));
    let first = submit(c, req.clone()).await;

    req.deadline = Some(deadline_in(Duration::from_secs(45)));
    let retry = submit(c, req).await;

    assert_eq!(retry.execution_id, first.execution_id);
    assert_eq!(
        retry.limits.unwrap().deadline,
        first.limits.unwrap().deadline,
        "the first execution keeps its own deadline"
    );
    assert_eq!(stored_executions(c).await, 1);
    server.stop().await;
}
