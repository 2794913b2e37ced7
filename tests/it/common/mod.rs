//! Shared helpers for the integration tests: a port-0 server over real loopback gRPC with a
//! oneshot shutdown, request builders, stream collection and status inspection.
//!
//! Every wait is bounded by [`WAIT`], so a bug fails the test instead of hanging it.

#![allow(dead_code, reason = "each test module uses some of the helpers")]

pub mod adapters;
pub mod anthropic;
pub mod counting;
pub mod eventstream;
pub mod fault_proxy;
pub mod leaks;
pub mod postgres;
pub mod process;
pub mod redis;
pub mod replica;
pub mod services;
pub mod sigv4;
pub mod token_server;
pub mod upstream;

#[allow(
    unused_imports,
    reason = "the skip-or-fail checks beside the other helpers; not every one has a user yet"
)]
pub use services::{postgres_answering, postgres_url, redis_answering, redis_url};

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec, Script};
use model_runtime::pb;
use model_runtime::pb::execution_event::Payload;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use model_runtime::server::ServerError;
use model_runtime::{Config, Runtime};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};
use tonic_types::StatusExt;

/// The longest any single wait in a test may take.
pub const WAIT: Duration = Duration::from_secs(10);

/// The embedded default's shape, with a short drain so stopping never waits long.
pub fn echo() -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "scripted",
            ProviderSpec::scripted().model("echo", &["text", "streaming"]),
        )
        .policy("default", PolicySpec::new(&["scripted/echo"]))
        .ability("chat", AbilitySpec::new("default").requires(&["text"]))
}

/// A config whose `chat` ability echoes on `scripted/slow`, a word every `interval_ms`.
pub fn slow_echo(interval_ms: u64) -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model(
                "slow",
                &["text"],
                script(|s| s.delta_interval_ms = interval_ms),
            ),
        )
        .policy("default", PolicySpec::new(&["scripted/slow"]))
        .ability("chat", AbilitySpec::new("default"))
}

/// A config whose `chat` ability runs on `scripted/stuck`, a model that never answers.
pub fn hanging() -> ConfigBuilder {
    Config::builder()
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model("stuck", &["text"], script(|s| s.hang = true)),
        )
        .policy("default", PolicySpec::new(&["scripted/stuck"]))
        .ability("chat", AbilitySpec::new("default"))
}

/// A script with what `edit` sets, the rest at its defaults.
pub fn script(edit: impl FnOnce(&mut Script)) -> Script {
    let mut script = Script::default();
    edit(&mut script);
    script
}

/// A server on 127.0.0.1:0 serving one runtime, with a connected client.
pub struct TestServer {
    /// A client on one channel; clone it for concurrent calls.
    pub client: ModelRuntimeClient<Channel>,
    /// The channel the client uses, for health and reflection clients.
    pub channel: Channel,
    /// Where the server listens.
    pub addr: SocketAddr,
    /// Where the HTTP ingress listens, when the config has one (on its own loopback port).
    pub http: Option<SocketAddr>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServerError>>>,
}

/// Starts `model_runtime::server::serve` in-process on a fresh loopback port.
pub async fn start(config: ConfigBuilder) -> TestServer {
    start_with(config.build().expect("test config is valid")).await
}

/// [`start`] with a configuration already loaded (e.g. with a test environment for keys).
pub async fn start_with(config: Config) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let ingress = match config.ingress {
        Some(_) => Some(TcpListener::bind("127.0.0.1:0").await.unwrap()),
        None => None,
    };
    let http = ingress.as_ref().map(|l| l.local_addr().unwrap());
    let runtime = Runtime::new(config).expect("runtime");
    let task = tokio::spawn(model_runtime::server::serve_with_ingress(
        runtime,
        listener,
        ingress,
        async {
            // A dropped sender also stops the server.
            let _ = rx.await;
        },
    ));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .tcp_nodelay(true)
        .connect()
        .await
        .expect("connect to the test server");
    TestServer {
        client: ModelRuntimeClient::new(channel.clone()),
        channel,
        addr,
        http,
        shutdown: Some(tx),
        task: Some(task),
    }
}

impl TestServer {
    /// Asks the server to stop (health goes NOT_SERVING, the runtime drains); returns at once.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// The task running `serve`, to await it while this side keeps its connections open.
    pub fn take_task(&mut self) -> JoinHandle<Result<(), ServerError>> {
        self.task.take().expect("server task")
    }

    /// Stops the server and waits for `serve` to return, which must be `Ok`.
    pub async fn stop(mut self) {
        self.begin_shutdown();
        let task = self.task.take().expect("server task");
        // Close our connection so the graceful shutdown has nothing to wait for.
        drop(self);
        let result = within(task).await.expect("server task panicked");
        result.expect("serve returned an error");
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.begin_shutdown();
    }
}

/// A channel to a server at `addr` (`127.0.0.1:PORT`), such as a `serve` child's.
pub async fn connect(addr: &str) -> Channel {
    within(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect(),
    )
    .await
    .expect("connect")
}

/// Awaits `future`, failing the test if it takes longer than [`WAIT`].
pub async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(WAIT, future)
        .await
        .expect("timed out waiting")
}

/// A user message with one text part.
pub fn user(text: &str) -> pb::Message {
    pb::Message {
        role: pb::Role::User.into(),
        content: vec![pb::ContentPart {
            part: Some(pb::content_part::Part::Text(text.to_owned())),
        }],
        ..Default::default()
    }
}

/// A request for `ability` with one user message.
pub fn request(ability: &str, prompt: &str) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        ability: ability.to_owned(),
        input: Some(pb::ExecutionInput {
            messages: vec![user(prompt)],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// [`request`] with the label `tenant`.
pub fn labelled(prompt: &str, tenant: &str) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        labels: [("tenant".to_owned(), tenant.to_owned())].into(),
        ..request("chat", prompt)
    }
}

/// An absolute deadline `offset` from now.
pub fn deadline_in(offset: Duration) -> prost_types::Timestamp {
    prost_types::Timestamp::from(SystemTime::now() + offset)
}

/// An absolute deadline `offset` ago.
pub fn deadline_ago(offset: Duration) -> prost_types::Timestamp {
    prost_types::Timestamp::from(SystemTime::now() - offset)
}

/// Reads a stream to its end; any error item fails the test.
pub async fn collect(mut stream: Streaming<pb::ExecutionEvent>) -> Vec<pb::ExecutionEvent> {
    within(async {
        let mut events = Vec::new();
        while let Some(item) = stream.next().await {
            events.push(item.expect("stream item"));
        }
        events
    })
    .await
}

/// Runs `Execute` and collects every event.
pub async fn execute(
    client: &mut ModelRuntimeClient<Channel>,
    request: pb::ExecuteRequest,
) -> Vec<pb::ExecutionEvent> {
    let stream = within(client.execute(request))
        .await
        .expect("execute accepted")
        .into_inner();
    collect(stream).await
}

/// Runs `Submit`.
pub async fn submit(
    client: &mut ModelRuntimeClient<Channel>,
    request: pb::ExecuteRequest,
) -> pb::Execution {
    within(client.submit(request))
        .await
        .expect("submit accepted")
        .into_inner()
}

/// Runs `Watch` from `after` and collects every event.
pub async fn watch(
    client: &mut ModelRuntimeClient<Channel>,
    id: &str,
    after: u64,
) -> Vec<pb::ExecutionEvent> {
    let stream = within(client.watch(pb::WatchRequest {
        execution_id: id.to_owned(),
        after_sequence: after,
    }))
    .await
    .expect("watch accepted")
    .into_inner();
    collect(stream).await
}

/// Runs `GetExecution`.
pub async fn get(client: &mut ModelRuntimeClient<Channel>, id: &str) -> pb::Execution {
    try_get(client, id).await.expect("get execution")
}

/// Runs `GetExecution`, returning the status on failure.
pub async fn try_get(
    client: &mut ModelRuntimeClient<Channel>,
    id: &str,
) -> Result<pb::Execution, Status> {
    within(client.get_execution(pb::GetExecutionRequest {
        execution_id: id.to_owned(),
    }))
    .await
    .map(tonic::Response::into_inner)
}

/// Runs `CancelExecution`.
pub async fn cancel(
    client: &mut ModelRuntimeClient<Channel>,
    id: &str,
    reason: &str,
) -> pb::Execution {
    within(client.cancel_execution(pb::CancelExecutionRequest {
        execution_id: id.to_owned(),
        reason: reason.to_owned(),
    }))
    .await
    .expect("cancel execution")
    .into_inner()
}

/// Runs `GetRuntimeMetadata`.
pub async fn metadata(client: &mut ModelRuntimeClient<Channel>) -> pb::RuntimeMetadata {
    within(client.get_runtime_metadata(pb::GetRuntimeMetadataRequest {}))
        .await
        .expect("metadata")
        .into_inner()
}

/// The live figures of provider `name`.
pub async fn provider(client: &mut ModelRuntimeClient<Channel>, name: &str) -> pb::ProviderInfo {
    metadata(client)
        .await
        .providers
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("provider `{name}` in metadata"))
}

/// Executions the store holds now.
pub async fn stored_executions(client: &mut ModelRuntimeClient<Channel>) -> u64 {
    metadata(client).await.store.expect("store info").executions
}

/// Polls provider `name` until `ready` holds for it. Nothing in the event stream tells when
/// an attempt has joined the admission queue, so metadata is the only witness; the poll is
/// bounded by [`WAIT`] and asserts nothing about time.
pub async fn until_provider(
    client: &mut ModelRuntimeClient<Channel>,
    name: &str,
    ready: impl Fn(&pb::ProviderInfo) -> bool,
) -> pb::ProviderInfo {
    within(async {
        loop {
            let info = provider(client, name).await;
            if ready(&info) {
                return info;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// Polls execution `id` until it reaches `state`, bounded by [`WAIT`]. Admission figures
/// move a moment before the matching event is appended, so a test that waited on them waits
/// here for the event too.
pub async fn until_state(
    client: &mut ModelRuntimeClient<Channel>,
    id: &str,
    state: pb::ExecutionState,
) -> pb::Execution {
    within(async {
        loop {
            let view = get(client, id).await;
            if view.state() == state {
                return view;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// The field names of the status's `google.rpc.BadRequest` violations.
pub fn bad_request_fields(status: &Status) -> Vec<String> {
    status
        .get_error_details()
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default()
}

/// Asserts `status` has `code` and a BadRequest violation of `field`.
pub fn assert_violation(status: &Status, code: Code, field: &str) {
    assert_eq!(status.code(), code, "{status:?}");
    let fields = bad_request_fields(status);
    assert!(
        fields.iter().any(|f| f == field),
        "expected a violation of `{field}`, got {fields:?} ({status:?})"
    );
}

/// The event type a payload must be announced with.
pub fn payload_type(payload: &Payload) -> &'static str {
    match payload {
        Payload::Accepted(_) => "execution.accepted",
        Payload::Routing(_) => "execution.routing",
        Payload::AttemptStarted(_) => "route.attempt.started",
        Payload::AttemptFailed(_) => "route.attempt.failed",
        Payload::TextDelta(_) => "output.text.delta",
        Payload::ToolCallStarted(_) => "output.tool_call.started",
        Payload::ToolCallArgumentsDelta(_) => "output.tool_call.arguments.delta",
        Payload::ReasoningDelta(_) => "output.reasoning.delta",
        Payload::Progress(_) => "execution.progress",
        Payload::UsageReported(_) => "usage.reported",
        Payload::Completed(_) => "execution.completed",
        Payload::Failed(_) => "execution.failed",
    }
}

/// The types of `events`, in order.
pub fn types(events: &[pb::ExecutionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.r#type.as_str()).collect()
}

/// Whether `event` ends its execution.
pub fn is_terminal(event: &pb::ExecutionEvent) -> bool {
    matches!(
        event.payload,
        Some(Payload::Completed(_) | Payload::Failed(_))
    )
}

/// Checks the envelope invariants of a complete sequence: one execution, sequences 1..n
/// without gaps, a time, a type matching the payload and a state on every event, and exactly
/// one terminal event, last.
pub fn assert_complete_sequence(events: &[pb::ExecutionEvent]) {
    assert!(!events.is_empty(), "no events");
    let id = &events[0].execution_id;
    assert!(id.starts_with("ex_"), "execution id {id:?}");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            &e.execution_id, id,
            "event {i} belongs to another execution"
        );
        assert_eq!(e.sequence, i as u64 + 1, "sequence gap at index {i}");
        assert!(e.time.is_some(), "event {} has no time", e.sequence);
        let payload = e.payload.as_ref().expect("payload set");
        assert_eq!(
            e.r#type,
            payload_type(payload),
            "type of event {}",
            e.sequence
        );
        assert_ne!(
            e.state(),
            pb::ExecutionState::Unspecified,
            "event {} has no state",
            e.sequence
        );
    }
    let terminals = events.iter().filter(|e| is_terminal(e)).count();
    assert_eq!(terminals, 1, "terminal events in {:?}", types(events));
    assert!(
        is_terminal(events.last().unwrap()),
        "terminal event is not last"
    );
}

/// The concatenated text deltas of `events`.
pub fn text_of(events: &[pb::ExecutionEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::TextDelta(d)) => Some(d.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The `execution.failed` payload of the last event.
pub fn failed_payload(events: &[pb::ExecutionEvent]) -> pb::ExecutionFailed {
    match &events.last().expect("events").payload {
        Some(Payload::Failed(f)) => f.clone(),
        other => panic!("last event is not execution.failed: {other:?}"),
    }
}

/// The `execution.completed` result of the last event.
pub fn completed_result(events: &[pb::ExecutionEvent]) -> pb::ExecutionResult {
    match &events.last().expect("events").payload {
        Some(Payload::Completed(c)) => c.result.clone().expect("result"),
        other => panic!("last event is not execution.completed: {other:?}"),
    }
}
