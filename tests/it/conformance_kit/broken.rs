//! The kit cannot pass a broken implementation: small implementations of the API, each the
//! runtime behind a proxy that breaks one rule (or the runtime configured to break it), and
//! the kit must name that rule.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use conformance::pb::execution_event::Payload;
use conformance::pb::model_runtime_client::ModelRuntimeClient;
use conformance::pb::model_runtime_server::{ModelRuntime, ModelRuntimeServer};
use conformance::pb::{self, ExecutionEvent};
use conformance::provider::Provider;
use conformance::report::Report;
use conformance::{Options, setup};
use futures_util::{Stream, StreamExt};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};

use super::config;
use crate::common::replica::Replica;

/// The one rule each proxy breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// Numbers events from the third on one higher: a gap at 3.
    SkipSequence,
    /// Adds a price to every usage fact (a label `price_usd`).
    PriceUsage,
    /// Drops the caller's `allow_fallback`.
    IgnoreAllowFallback,
    /// When an execution fails after output, runs the request again on the next target and
    /// shows it as the same execution's next attempt.
    FallBackAfterOutput,
}

type Events = Pin<Box<dyn Stream<Item = Result<ExecutionEvent, Status>> + Send>>;

/// The runtime at `inner`, with `flaw`.
struct Broken {
    inner: ModelRuntimeClient<Channel>,
    flaw: Flaw,
}

impl Broken {
    fn mend(&self, mut event: ExecutionEvent) -> ExecutionEvent {
        match self.flaw {
            Flaw::SkipSequence if event.sequence >= 3 => event.sequence += 1,
            Flaw::PriceUsage => {
                if let Some(Payload::UsageReported(u)) = &mut event.payload
                    && let Some(fact) = &mut u.fact
                {
                    fact.labels.insert("price_usd".into(), "0.000021".into());
                }
            }
            _ => {}
        }
        event
    }

    fn events(self: &Arc<Self>, stream: tonic::Streaming<ExecutionEvent>) -> Events {
        let this = Arc::clone(self);
        Box::pin(stream.map(move |event| event.map(|e| this.mend(e))))
    }

    /// The request's events, and after a failure past output, another target's as more of
    /// the same execution.
    fn fall_back_after_output(
        self: &Arc<Self>,
        request: pb::ExecuteRequest,
        first: tonic::Streaming<ExecutionEvent>,
    ) -> Events {
        let this = Arc::clone(self);
        Box::pin(async_stream(move |tx| async move {
            let mut first = first;
            let mut last = 0;
            let mut id = String::new();
            while let Some(Ok(event)) = first.next().await {
                let interrupted = matches!(&event.payload, Some(Payload::Failed(f))
                    if f.error.as_ref().is_some_and(|e| e.code == "output_interrupted"));
                if interrupted {
                    break;
                }
                (last, id) = (event.sequence, event.execution_id.clone());
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
            }
            let mut again = request;
            again.target = "kit-b/answer".into();
            let Ok(second) = this.inner.clone().execute(again).await else {
                return;
            };
            let mut second = second.into_inner();
            let mut started = false;
            while let Some(Ok(mut event)) = second.next().await {
                started |= matches!(event.payload, Some(Payload::AttemptStarted(_)));
                if !started {
                    continue;
                }
                last += 1;
                event.sequence = last;
                event.execution_id.clone_from(&id);
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
            }
        }))
    }
}

/// A stream fed by `producer` through a channel.
fn async_stream<F>(
    producer: impl FnOnce(tokio::sync::mpsc::Sender<Result<ExecutionEvent, Status>>) -> F,
) -> impl Stream<Item = Result<ExecutionEvent, Status>>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let task = producer(tx);
    let _detached = tokio::task::spawn(task);
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// The server: a [`Broken`] shared with the streams it feeds.
struct Proxy(Arc<Broken>);

#[tonic::async_trait]
impl ModelRuntime for Proxy {
    type ExecuteStream = Events;
    type WatchStream = Events;
    type StreamUsageStream = Pin<Box<dyn Stream<Item = Result<pb::UsageRecord, Status>> + Send>>;

    async fn execute(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<Events>, Status> {
        let mut request = request.into_inner();
        if self.0.flaw == Flaw::IgnoreAllowFallback {
            request.allow_fallback = None;
        }
        let stream = self
            .0
            .inner
            .clone()
            .execute(request.clone())
            .await?
            .into_inner();
        Ok(Response::new(if self.0.flaw == Flaw::FallBackAfterOutput {
            self.0.fall_back_after_output(request, stream)
        } else {
            self.0.events(stream)
        }))
    }

    async fn submit(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        let mut request = request.into_inner();
        if self.0.flaw == Flaw::IgnoreAllowFallback {
            request.allow_fallback = None;
        }
        self.0.inner.clone().submit(request).await
    }

    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<Events>, Status> {
        let stream = self
            .0
            .inner
            .clone()
            .watch(request.into_inner())
            .await?
            .into_inner();
        Ok(Response::new(self.0.events(stream)))
    }

    async fn get_execution(
        &self,
        request: Request<pb::GetExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.0
            .inner
            .clone()
            .get_execution(request.into_inner())
            .await
    }

    async fn cancel_execution(
        &self,
        request: Request<pb::CancelExecutionRequest>,
    ) -> Result<Response<pb::Execution>, Status> {
        self.0
            .inner
            .clone()
            .cancel_execution(request.into_inner())
            .await
    }

    async fn get_runtime_metadata(
        &self,
        request: Request<pb::GetRuntimeMetadataRequest>,
    ) -> Result<Response<pb::RuntimeMetadata>, Status> {
        self.0
            .inner
            .clone()
            .get_runtime_metadata(request.into_inner())
            .await
    }

    async fn stream_usage(
        &self,
        request: Request<pb::StreamUsageRequest>,
    ) -> Result<Response<Self::StreamUsageStream>, Status> {
        let stream = self
            .0
            .inner
            .clone()
            .stream_usage(request.into_inner())
            .await?
            .into_inner();
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Serves `flaw` in front of `server` on a free loopback port, until the returned sender
/// is dropped; returns its address.
async fn serve(server: &Replica, flaw: Flaw) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let broken = Arc::new(Broken {
        inner: ModelRuntimeClient::new(server.channel.clone()),
        flaw,
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(
        Server::builder()
            .add_service(ModelRuntimeServer::new(Proxy(broken)))
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                let _ = stopped.await;
            }),
    );
    (addr, stop)
}

/// The kit's report on `target`, running only `only`.
async fn kit(provider: &Provider, target: String, only: &[&str]) -> Report {
    let options = Options {
        target,
        only: only.iter().map(|s| (*s).to_owned()).collect(),
        wait: Duration::from_secs(10),
        ..Options::default()
    };
    conformance::run(&options, provider).await.unwrap()
}

fn assert_names(report: &Report, rule: &str) {
    assert_eq!(
        report.status(rule),
        Some("fail"),
        "the kit did not name {rule}:\n{}",
        report.table()
    );
    assert!(report.failed(), "a MUST failure must fail the run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_names_the_rule_each_broken_implementation_breaks() {
    let provider = Provider::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let server = Replica::start("runtime", &config("kind = \"memory\"\n", &provider), &[]).await;
    let cases: [(Flaw, &str, &[&str]); 4] = [
        (Flaw::SkipSequence, "EXEC-2", &["answer"]),
        (Flaw::PriceUsage, "USAGE-4", &["answer"]),
        (
            Flaw::IgnoreAllowFallback,
            "ROUTE-7",
            &["allow_fallback false"],
        ),
        (
            Flaw::FallBackAfterOutput,
            "COMMIT-2",
            &["cut after a text delta"],
        ),
    ];
    for (flaw, rule, only) in cases {
        let (addr, _stop) = serve(&server, flaw).await;
        let report = kit(&provider, addr, only).await;
        assert_names(&report, rule);
    }
    // The unbroken runtime passes the same cases: the failures are the flaws'.
    let report = kit(
        &provider,
        server.addr.clone(),
        &["answer", "allow_fallback false", "cut after a text delta"],
    )
    .await;
    assert!(!report.failed(), "{}", report.table());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_names_a_resubmitted_unknown_outcome() {
    let provider = Provider::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    // The runtime told to send a request whose outcome is unknown again: a configuration
    // that breaks ROUTE-9, as an implementation that retries blindly does.
    let toml = config("kind = \"memory\"\n", &provider).replace(
        "[policies.kit-unknown]\n",
        "[policies.kit-unknown]\non_unknown_outcome = \"retry\"\n",
    );
    assert!(
        toml.contains("on_unknown_outcome"),
        "{}",
        setup::config(provider.addr())
    );
    let server = Replica::start("retrying", &toml, &[]).await;
    let report = kit(&provider, server.addr.clone(), &["unknown outcome"]).await;
    assert_names(&report, "ROUTE-9");
}
