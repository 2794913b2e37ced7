//! `model-runtime-client` (`crates/client`) as a caller uses it: its `execute` stream goes
//! on when the replica serving it is killed mid-answer, resumed with `Watch` on the replica
//! that is left, every event once (CURSOR-3), to the execution's end (STORE-1: the survivor
//! ends the lost replica's execution). Against one server that stops and starts again on its
//! file store, the same stream waits for it and resumes. And an `Execute` whose first answer
//! is lost after the runtime accepted it is sent again and attaches (IDEM-1).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::postgres::{DropSchema, PgStore, URL_ENV};
use common::replica::Replica;
use common::*;
use futures_util::StreamExt;
use model_runtime::pb;
use model_runtime_client::{Client, Events, text_request};

/// Forty words, 50 ms apart (`slow_echo(50)`): two seconds of answer.
const PROMPT: &str =
    "a b c d e f g h i j k l m n o p q r s t u v w x y z aa bb cc dd ee ff gg hh ii jj kk ll mm nn";

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
    let client = client.clone().on_resume(move |_, _| {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    let mut events = client.execute(text_request("chat", PROMPT)).await.unwrap();
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
    let toml = store.toml(&slow_echo(50));
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
    let mut table: toml::Table = slow_echo(50).to_toml().parse().unwrap();
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

/// A server in front of the runtime whose first `Execute` is answered by the runtime (it
/// accepts the execution) while the caller gets `UNAVAILABLE`: the answer lost on its way.
struct LosesFirstAnswer {
    runtime: pb::model_runtime_client::ModelRuntimeClient<tonic::transport::Channel>,
    lost: std::sync::Mutex<Option<String>>,
}

type Stream<T> =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<T, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl pb::model_runtime_server::ModelRuntime for LosesFirstAnswer {
    type ExecuteStream = Stream<pb::ExecutionEvent>;
    type WatchStream = Stream<pb::ExecutionEvent>;
    type StreamUsageStream = Stream<pb::UsageRecord>;

    async fn execute(
        &self,
        request: tonic::Request<pb::ExecuteRequest>,
    ) -> Result<tonic::Response<Self::ExecuteStream>, tonic::Status> {
        let mut events = self
            .runtime
            .clone()
            .execute(request.into_inner())
            .await?
            .into_inner();
        let first_call = self.lost.lock().unwrap().is_none();
        if first_call {
            // The runtime accepted it: its first event names the execution. Then the answer
            // is lost.
            let first = events.message().await?.expect("the first event");
            *self.lost.lock().unwrap() = Some(first.execution_id);
            return Err(tonic::Status::unavailable(
                "connection lost before the first event",
            ));
        }
        Ok(tonic::Response::new(Box::pin(events)))
    }

    async fn watch(
        &self,
        request: tonic::Request<pb::WatchRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        let events = self
            .runtime
            .clone()
            .watch(request.into_inner())
            .await?
            .into_inner();
        Ok(tonic::Response::new(Box::pin(events)))
    }

    async fn submit(
        &self,
        _: tonic::Request<pb::ExecuteRequest>,
    ) -> Result<tonic::Response<pb::Execution>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }

    async fn get_execution(
        &self,
        request: tonic::Request<pb::GetExecutionRequest>,
    ) -> Result<tonic::Response<pb::Execution>, tonic::Status> {
        self.runtime
            .clone()
            .get_execution(request.into_inner())
            .await
    }

    async fn cancel_execution(
        &self,
        _: tonic::Request<pb::CancelExecutionRequest>,
    ) -> Result<tonic::Response<pb::Execution>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }

    async fn get_runtime_metadata(
        &self,
        _: tonic::Request<pb::GetRuntimeMetadataRequest>,
    ) -> Result<tonic::Response<pb::RuntimeMetadata>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }

    async fn stream_usage(
        &self,
        _: tonic::Request<pb::StreamUsageRequest>,
    ) -> Result<tonic::Response<Self::StreamUsageStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }
}

/// A first `Execute` whose answer is lost after the runtime accepted it is sent again with
/// the client's idempotency key: it attaches to that execution (IDEM-1), so the caller gets
/// its events once each and no second execution runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execute_whose_first_answer_is_lost_attaches_to_its_execution() {
    let server = start(slow_echo(5)).await;
    let front = std::sync::Arc::new(LosesFirstAnswer {
        runtime: server.client.clone(),
        lost: std::sync::Mutex::new(None),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = pb::model_runtime_server::ModelRuntimeServer::from_arc(front.clone());
    let serving = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let client = Client::connect(&addr.to_string()).await.unwrap();
    let (mut events, mut seen, resumes) = six_events(&client).await;
    while let Some(event) = within(events.next()).await {
        seen.push(event.unwrap());
    }
    assert_whole(&seen);
    assert_eq!(seen.last().unwrap().r#type, "execution.completed");
    assert_eq!(text_of(&seen), PROMPT);
    let first = front
        .lost
        .lock()
        .unwrap()
        .clone()
        .expect("the first answer was lost");
    assert_eq!(
        seen[0].execution_id, first,
        "the resend attached to the first execution"
    );
    assert_eq!(resumes.load(Ordering::SeqCst), 1);
    // One execution in the store, not two.
    let metadata = server
        .client
        .clone()
        .get_runtime_metadata(pb::GetRuntimeMetadataRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        metadata.store.unwrap().executions,
        1,
        "a second execution ran"
    );
    serving.abort();
    server.stop().await;
}
