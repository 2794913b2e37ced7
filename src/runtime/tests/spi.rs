//! The runtime against provider adapters of the test's own, at the Provider SPI boundary:
//! concurrency never exceeds the permits, and a panicking adapter neither leaks its permit nor
//! leaves its execution live.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::{StreamExt, stream};

use crate::config::{AbilitySpec, Config, PolicySpec, ProviderSpec};
use crate::execution::{
    AttemptCode, ErrorCode, ExecuteRequest, ExecutionInput, ExecutionState, FinishReason, Message,
    NextAction, Outcome, ReasoningPiece, UsageQuantity, UsageSource, UsageUnit,
};
use crate::provider::{
    Provider, ProviderCall, ProviderError, ProviderEvent, ProviderStream, plain_stream,
};
use crate::runtime::Runtime;

/// `limited` has four permits and room for sixteen waiters; `spare`, plenty of permits and no
/// queue.
fn config() -> Config {
    Config::builder()
        .max_executions(1000)
        .provider(
            "limited",
            ProviderSpec::scripted()
                .max_concurrency(4)
                .queue_capacity(16)
                .model("m", &["text"]),
        )
        .provider(
            "spare",
            ProviderSpec::scripted()
                .max_concurrency(1000)
                .queue_capacity(0)
                .model("m", &["text"]),
        )
        .policy("main", PolicySpec::new(&["limited/m", "spare/m"]))
        .ability("chat", AbilitySpec::new("main"))
        .build()
        .unwrap()
}

/// Counts calls running at once and remembers the most.
#[derive(Debug, Default)]
struct Counting {
    now: Arc<AtomicU32>,
    peak: Arc<AtomicU32>,
    calls: Arc<AtomicU32>,
}

struct Running(Arc<AtomicU32>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Provider for Counting {
    fn call(&self, _call: ProviderCall) -> ProviderStream {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(n, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        let guard = Running(self.now.clone());
        plain_stream(
            stream::once(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(guard);
                Ok(ProviderEvent::TextDelta("ok".into()))
            })
            .chain(stream::iter([Ok(ProviderEvent::Finished(
                FinishReason::Stop,
            ))]))
            .boxed(),
        )
    }
}

#[derive(Debug)]
struct Panicking;

impl Provider for Panicking {
    fn call(&self, _call: ProviderCall) -> ProviderStream {
        plain_stream(stream::once(async { panic!("adapter bug") }).boxed())
    }
}

fn request() -> ExecuteRequest {
    ExecuteRequest {
        ability: "chat".into(),
        input: ExecutionInput {
            messages: vec![Message::user("hi")],
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_executions_never_exceed_the_permits() {
    let limited = Arc::new(Counting::default());
    let spare = Arc::new(Counting::default());
    let runtime = Runtime::builder(config())
        .provider("limited", limited.clone())
        .provider("spare", spare.clone())
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..500 {
        ids.push(runtime.submit(request()).await.unwrap().id);
    }
    for id in &ids {
        let events: Vec<_> = runtime.watch(*id, 0).await.unwrap().collect().await;
        assert!(events.last().unwrap().as_ref().unwrap().is_terminal());
    }
    let mut rejected = 0;
    for id in &ids {
        let view = runtime.get(*id).await.unwrap();
        assert_eq!(view.state, ExecutionState::Succeeded, "{view:?}");
        if let Some(first) = view.attempts.first().filter(|a| !a.admitted) {
            assert_eq!(
                first.error.as_ref().unwrap().code.as_str(),
                "admission_rejected"
            );
            assert_eq!(&*view.attempts[1].provider, "spare", "rejections fall back");
            rejected += 1;
        }
    }
    assert!(
        limited.peak.load(Ordering::SeqCst) <= 4,
        "peak {}",
        limited.peak.load(Ordering::SeqCst)
    );
    assert!(rejected > 0, "a 16-slot queue cannot hold 500 submissions");
    assert_eq!(
        limited.calls.load(Ordering::SeqCst) + spare.calls.load(Ordering::SeqCst),
        500
    );
    for provider in runtime.metadata().providers {
        assert_eq!(
            (provider.in_flight, provider.queued),
            (0, 0),
            "{}",
            provider.name
        );
    }
}

#[tokio::test]
async fn a_panicking_adapter_fails_the_execution_and_frees_its_permit() {
    let runtime = Runtime::builder(config())
        .provider("limited", Arc::new(Panicking))
        .build()
        .unwrap();
    let view = runtime.submit(request()).await.unwrap();
    let events: Vec<_> = runtime.watch(view.id, 0).await.unwrap().collect().await;
    let view = runtime.get(view.id).await.unwrap();
    assert_eq!(view.state, ExecutionState::Failed);
    let error = view.error.unwrap();
    assert_eq!(error.code, ErrorCode::InternalError);
    assert!(
        !error.message.contains("adapter bug"),
        "the cause stays in the log: {}",
        error.message
    );
    assert!(events.last().unwrap().as_ref().unwrap().is_terminal());
    assert_eq!(runtime.metadata().providers[0].in_flight, 0);
}

/// Streams two words and their usage, yields once, then panics.
#[derive(Debug)]
struct PanicsMidStream;

impl Provider for PanicsMidStream {
    fn call(&self, _call: ProviderCall) -> ProviderStream {
        let usage = UsageQuantity {
            unit: UsageUnit::OUTPUT_TOKENS,
            quantity: 2,
            source: UsageSource::ProviderReported,
        };
        plain_stream(
            stream::iter([
                Ok(ProviderEvent::TextDelta("ok ".into())),
                Ok(ProviderEvent::TextDelta("ok".into())),
                Ok(ProviderEvent::Usage(usage)),
            ])
            .chain(stream::once(async {
                tokio::task::yield_now().await;
                panic!("adapter bug mid-stream")
            }))
            .boxed(),
        )
    }
}

#[tokio::test]
async fn a_panic_mid_stream_keeps_the_evidence() {
    let runtime = Runtime::builder(config())
        .provider("limited", Arc::new(PanicsMidStream))
        .build()
        .unwrap();
    let (view, events) = super::finish(&runtime, request()).await;
    let types = super::types(&events);
    assert_eq!(
        types,
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started",
            "output.text.delta",
            "output.text.delta",
            "usage.reported",
            "route.attempt.failed",
            "execution.failed",
        ]
    );
    let error = view.error.unwrap();
    assert_eq!(error.code, ErrorCode::InternalError);
    assert_eq!(error.outcome, Outcome::Unknown);
    assert_eq!(view.partial_output.text, "ok ok");
    let attempt = &view.attempts[0];
    assert!(attempt.output_committed);
    assert_eq!(attempt.error.as_ref().unwrap().code, AttemptCode::Internal);
    assert_eq!(attempt.next_action, Some(NextAction::Stop));
    assert_eq!(view.usage.len(), 1);
    assert_eq!(runtime.metadata().providers[0].in_flight, 0);
}

/// Attempt 1 reasons, then fails before output; attempt 2 reasons, answers, then panics.
#[derive(Debug)]
struct ReasonsThenPanics;

impl Provider for ReasonsThenPanics {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let thought = |t: &str| Ok(ProviderEvent::Reasoning(ReasoningPiece::Text, t.into()));
        if call.attempt == 1 {
            let error = ProviderError::retryable(AttemptCode::Overloaded, "overloaded");
            return plain_stream(stream::iter([thought("first try"), Err(error)]));
        }
        plain_stream(
            stream::iter([
                thought("second try"),
                Ok(ProviderEvent::TextDelta("ok".into())),
            ])
            .chain(stream::once(async {
                tokio::task::yield_now().await;
                panic!("adapter bug after output")
            }))
            .boxed(),
        )
    }
}

#[tokio::test]
async fn a_panic_keeps_only_the_running_attempts_reasoning() {
    let provider = Arc::new(ReasonsThenPanics);
    let runtime = Runtime::builder(config())
        .provider("limited", provider.clone())
        .provider("spare", provider)
        .build()
        .unwrap();
    let (view, _) = super::finish(&runtime, request()).await;
    assert_eq!(view.error.unwrap().code, ErrorCode::InternalError);
    assert_eq!(view.partial_output.text, "ok");
    let reasoning: Vec<_> = view
        .partial_output
        .reasoning
        .iter()
        .map(|r| r.text.as_str())
        .collect();
    assert_eq!(reasoning, ["second try"]);
}
