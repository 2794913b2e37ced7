//! `StreamUsage` over real gRPC: every usage fact of every execution, in store order, each
//! with a cursor; a consumer that goes away and resumes after its last cursor gets the rest,
//! nothing twice; live facts follow; a malformed cursor is refused naming the field; the
//! stream ends with UNAVAILABLE when the runtime drains. On the file store, the real binary
//! is killed with SIGKILL and started again: the consumer resumes after its cursor and gets
//! exactly the facts it had not processed, then the new ones.

use crate::common;

use std::time::Duration;

use common::process::start_server_env;
use common::*;
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::transport::Channel;

async fn usage_from(
    client: &mut ModelRuntimeClient<Channel>,
    after: &str,
) -> tonic::Streaming<pb::UsageRecord> {
    within(client.stream_usage(pb::StreamUsageRequest {
        after_cursor: after.to_owned(),
    }))
    .await
    .expect("stream_usage accepted")
    .into_inner()
}

/// The next `n` records.
async fn take(stream: &mut tonic::Streaming<pb::UsageRecord>, n: usize) -> Vec<pb::UsageRecord> {
    let mut records = Vec::new();
    while records.len() < n {
        let record = within(stream.message())
            .await
            .expect("a record")
            .expect("the stream goes on");
        records.push(record);
    }
    records
}

/// What identifies a fact: its execution, event and unit.
fn identity(record: &pb::UsageRecord) -> (String, u64, String) {
    let fact = record.fact.as_ref().unwrap();
    (
        record.execution_id.clone(),
        record.sequence,
        fact.unit.clone(),
    )
}

/// Nothing more arrives within a short wait.
async fn quiet(stream: &mut tonic::Streaming<pb::UsageRecord>) {
    let more = tokio::time::timeout(Duration::from_millis(200), stream.message()).await;
    assert!(more.is_err(), "unexpected: {more:?}");
}

#[tokio::test]
async fn usage_streams_in_order_resumes_after_a_cursor_and_follows_live() {
    let mut server = start(echo()).await;
    let mut c = server.client.clone();
    // The echo reports input and output tokens: two facts per execution.
    for (prompt, tenant) in [
        ("one", "acme"),
        ("two words", "globex"),
        ("three more words", "acme"),
    ] {
        let events = execute(&mut c, labelled(prompt, tenant)).await;
        assert_eq!(events.last().unwrap().r#type, "execution.completed");
    }
    let mut stream = usage_from(&mut c, "").await;
    let first = take(&mut stream, 3).await;
    drop(stream);

    // The consumer went away after processing three; it resumes after the third.
    let mut stream = usage_from(&mut c, &first[2].cursor).await;
    let rest = take(&mut stream, 3).await;
    quiet(&mut stream).await;
    let all: Vec<pb::UsageRecord> = first.iter().chain(&rest).cloned().collect();
    let mut seen: Vec<_> = all.iter().map(identity).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 6, "six facts, none twice: {all:?}");
    // In store order: by execution as they ran, input before output.
    let units: Vec<String> = all.iter().map(|r| identity(r).2).collect();
    assert_eq!(units, ["input_tokens", "output_tokens"].repeat(3));
    let tenants: Vec<&str> = all
        .iter()
        .map(|r| r.fact.as_ref().unwrap().labels["tenant"].as_str())
        .collect();
    assert_eq!(
        tenants,
        ["acme", "acme", "globex", "globex", "acme", "acme"]
    );
    assert_eq!(all[0].fact.as_ref().unwrap().quantity, 1, "one input word");
    assert!(all.iter().all(|r| r.time.is_some() && r.sequence > 0));

    // Live: a new execution's facts follow on the open stream.
    let events = execute(&mut c, labelled("live", "acme")).await;
    let id = &events[0].execution_id;
    let live = take(&mut stream, 2).await;
    assert!(live.iter().all(|r| &r.execution_id == id), "{live:?}");

    // The full order from the start is the same records.
    let mut again = usage_from(&mut c, "").await;
    let replay = take(&mut again, 8).await;
    assert_eq!(replay[..6], all[..]);
    assert_eq!(replay[6..], live[..]);

    // A malformed cursor names the field.
    let status = c
        .stream_usage(pb::StreamUsageRequest {
            after_cursor: "yesterday".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(bad_request_fields(&status), ["after_cursor"]);

    // A drain ends the stream, so the consumer resumes elsewhere or after the restart.
    server.begin_shutdown();
    let ended = within(stream.message()).await;
    let status = ended.expect_err("the stream ends with a status");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
}

const KEY_ENV: &str = "MODEL_RUNTIME_TEST_STORE_KEY";
const KEY: &str = "7f3c1a9e5b2d4f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

#[tokio::test]
async fn on_the_file_store_a_consumer_resumes_across_a_killed_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    let config = echo().file_store(dir.path().to_str().unwrap(), KEY_ENV);
    std::fs::write(file.path(), config.to_toml()).unwrap();
    let path = file.path().to_str().unwrap();
    let serve = || start_server_env(&["--config", path], &[(KEY_ENV, KEY)], WAIT);

    let (mut server, addr) = serve();
    let mut c = ModelRuntimeClient::new(connect(&addr).await);
    for i in 0..5 {
        execute(&mut c, labelled(&format!("request {i}"), "acme")).await;
    }
    let mut stream = usage_from(&mut c, "").await;
    let processed = take(&mut stream, 4).await;
    let cursor = processed[3].cursor.clone();
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    drop(stream);

    let (_server, addr) = serve();
    let mut c = ModelRuntimeClient::new(connect(&addr).await);
    let mut stream = usage_from(&mut c, &cursor).await;
    let rest = take(&mut stream, 6).await;
    quiet(&mut stream).await;
    let mut seen: Vec<_> = processed.iter().chain(&rest).map(identity).collect();
    let total = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!((seen.len(), total), (10, 10), "every fact once");
    // Positions went on past the restart: a new fact follows the ones before it.
    execute(&mut c, labelled("after the restart", "acme")).await;
    let new = take(&mut stream, 2).await;
    let position =
        |r: &pb::UsageRecord| -> u64 { r.cursor.rsplit_once('-').unwrap().1.parse().unwrap() };
    assert!(position(&new[0]) > position(&rest[5]));
    assert_eq!(
        rest[5].cursor.split_once('-').unwrap().0,
        cursor.split_once('-').unwrap().0,
        "the same epoch"
    );
}
