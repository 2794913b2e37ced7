//! `model-runtime-client` (`crates/client`) as a caller uses it: its `execute` stream goes
//! on when the replica serving it is killed mid-answer, resumed with `Watch` on the replica
//! that is left, every event once (CURSOR-3), to the execution's end (STORE-1: the survivor
//! ends the lost replica's execution). And against one server that stops and starts again on
//! its file store, the same stream waits for it and resumes.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::postgres::{DropSchema, PgStore, URL_ENV};
use common::replica::Replica;
use common::*;
use futures_util::StreamExt;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime_client::{Client, Events, text_request};

/// Forty words, 50 ms apart: two seconds of answer.
const PROMPT: &str =
    "a b c d e f g h i j k l m n o p q r s t u v w x y z aa bb cc dd ee ff gg hh ii jj kk ll mm nn";

fn slow() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model(
                "slow",
                &["text"],
                script(|s| s.delta_interval_ms = 50),
            ),
        )
        .policy("default", PolicySpec::new(&["scripted/slow"]))
        .ability("chat", AbilitySpec::new("default"))
}

/// Attempts running now on the replica behind `client`.
async fn in_flight(replica: &Replica) -> u32 {
    let metadata = replica
        .client
        .clone()
        .get_runtime_metadata(pb::GetRuntimeMetadataRequest::default())
        .await
        .unwrap()
        .into_inner();
    metadata.providers.iter().map(|p| p.in_flight).sum()
}

/// An `execute` of the slow answer read to its sixth event: the stream, the events, and a
/// count of its resumes.
async fn six_events(client: &Client) -> (Events, Vec<pb::ExecutionEvent>, Arc<AtomicUsize>) {
    let resumes = Arc::new(AtomicUsize::new(0));
    let counted = resumes.clone();
    let on_resume = Box::new(move |_: u64, _: &tonic::Status| {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    let mut events = client
        .execute_telling(text_request("chat", PROMPT), on_resume)
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 6 {
        seen.push(within(events.next()).await.unwrap().unwrap());
    }
    (events, seen, resumes)
}

/// Every event of `events` once, 1..n, ending with a terminal one.
fn assert_whole(events: &[pb::ExecutionEvent]) {
    assert_complete_sequence(events);
    let last = events.last().unwrap();
    assert!(
        matches!(
            last.r#type.as_str(),
            "execution.completed" | "execution.failed"
        ),
        "{last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_goes_on_when_its_replica_is_killed() {
    let Some(url) = postgres_answering() else {
        return;
    };
    let store = PgStore::new(Duration::from_secs(1), Duration::from_millis(50));
    let _schema = DropSchema::new(&url, &store.schema);
    let toml = store.toml(&slow());
    let mut a = Replica::start("A", &toml, &[(URL_ENV, &url)]).await;
    let mut b = Replica::start("B", &toml, &[(URL_ENV, &url)]).await;
    let client = Client::balanced([a.addr.as_str(), b.addr.as_str()]).unwrap();

    let (mut events, mut seen, resumes) = six_events(&client).await;
    // The replica driving it has its attempt in flight: kill that one.
    let (serving, left) = if in_flight(&a).await > 0 {
        (&mut a, &b)
    } else {
        (&mut b, &a)
    };
    serving.kill();
    assert_eq!(
        in_flight(left).await,
        0,
        "the other replica was not the one serving"
    );

    while let Some(event) = within(events.next()).await {
        seen.push(event.expect("the stream resumed on the replica left"));
    }
    assert_whole(&seen);
    assert!(
        resumes.load(Ordering::SeqCst) >= 1,
        "the stream was never resumed"
    );
    let failed = seen.last().unwrap();
    assert_eq!(
        failed.r#type, "execution.failed",
        "the driver died mid-answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_waits_for_a_restarted_server() {
    let dir = tempfile::tempdir().unwrap();
    let key_env = "MODEL_RUNTIME_TEST_STORE_KEY";
    let key = "7f3c1a9e5b2d4f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";
    let mut table: toml::Table = slow().to_toml().parse().unwrap();
    table.insert(
        "store".into(),
        toml::Value::Table(
            format!(
                "kind = \"file\"\npath = \"{}\"\nkey_env = \"{key_env}\"\n",
                dir.path().join("journal").display()
            )
            .parse()
            .unwrap(),
        ),
    );
    let toml = toml::to_string(&table).unwrap();
    let port = common::postgres::free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut first = Replica::start_on("first", &toml, &[(key_env, key)], &listen).await;
    let client = Client::connect(&listen).await.unwrap();

    let (mut events, mut seen, resumes) = six_events(&client).await;
    first.kill();
    let _second = Replica::start_on("second", &toml, &[(key_env, key)], &listen).await;
    while let Some(event) = within(events.next()).await {
        seen.push(event.expect("the stream resumed on the restarted server"));
    }
    assert_whole(&seen);
    assert!(
        resumes.load(Ordering::SeqCst) >= 1,
        "the stream was never resumed"
    );
}
