//! The embedded core end to end over the scripted provider, in paused tokio time.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::Instant;

use super::*;
use crate::config::{AbilitySpec, Chunk, FailError, PolicySpec, ProviderSpec, Script};
use crate::execution::{
    ErrorCode, EventPayload, ExecutionInput, ExecutionState, Message, NextAction, Outcome,
};
use crate::store::MemoryStore;
use crate::store::faulty::{Faults, FaultyStore};

mod buffered;
mod postgres;
mod routing_properties;
mod spi;
mod store_faults;
mod target;
mod time_limits;

/// A script with what `edit` sets, the rest at its defaults.
fn script(edit: impl FnOnce(&mut Script)) -> Script {
    let mut script = Script::default();
    edit(&mut script);
    script
}

/// Provider `a`, two permits and two queue places, with a model for each way an attempt goes,
/// and a policy for each.
fn config() -> Config {
    let text = &["text"][..];
    Config::builder()
        .provider(
            "a",
            ProviderSpec::scripted()
                .max_concurrency(2)
                .queue_capacity(2)
                .model("echo", text)
                .scripted_model("flaky", text, script(|s| s.fail_attempts = 5))
                .scripted_model("breaks", text, script(|s| s.fail_after_deltas = Some(2)))
                .scripted_model("hang", text, script(|s| s.hang = true))
                .scripted_model(
                    "bad",
                    text,
                    script(|s| {
                        s.fail_attempts = 1;
                        s.fail_error = FailError::InvalidRequest;
                    }),
                )
                .scripted_model("slow", text, script(|s| s.delta_interval_ms = 50))
                .scripted_model("thinks", text, script(|s| s.first_delta_ms = 3_000))
                .model("vision", &["text", "vision"]),
        )
        .policy("fallback", PolicySpec::new(&["a/flaky", "a/echo"]))
        .policy("breaks", PolicySpec::new(&["a/breaks", "a/echo"]))
        .policy(
            "hang",
            PolicySpec::new(&["a/hang"]).retry_budget(Duration::from_secs(3600)),
        )
        .policy("bad", PolicySpec::new(&["a/bad", "a/echo"]))
        .policy("vision", PolicySpec::new(&["a/echo", "a/vision"]))
        .policy(
            "long",
            PolicySpec::new(&["a/slow"])
                .retry_budget(Duration::from_millis(100))
                .min_attempt_time(Duration::from_millis(50)),
        )
        .policy(
            "thinks",
            PolicySpec::new(&["a/thinks"]).retry_budget(Duration::from_secs(1)),
        )
        .ability(
            "chat",
            AbilitySpec::new("fallback")
                .allowed_policies(&["breaks", "hang", "bad", "vision", "long", "thinks"]),
        )
        .build()
        .unwrap()
}

fn runtime() -> Runtime {
    Runtime::new(config()).unwrap()
}

/// A memory store with `faults`, and a builder of the test configuration over it.
fn faulty(faults: Faults) -> (RuntimeBuilder, Arc<FaultyStore>) {
    let memory = Arc::new(MemoryStore::new(crate::store::conformance::limits(
        100,
        Duration::from_secs(60),
    )));
    let store = Arc::new(FaultyStore::new(memory, faults));
    (Runtime::builder(config()).store(store.clone()), store)
}

/// A runtime on the test configuration over a memory store with `faults`.
fn with_faults(faults: Faults) -> (Runtime, Arc<FaultyStore>) {
    let (builder, store) = faulty(faults);
    (builder.build().unwrap(), store)
}

fn request(policy: &str, prompt: &str) -> ExecuteRequest {
    ExecuteRequest {
        ability: "chat".into(),
        policy: Some(policy.into()),
        input: ExecutionInput {
            messages: vec![Message::user(prompt)],
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn finish(
    rt: &Runtime,
    request: ExecuteRequest,
) -> (Execution, Vec<crate::execution::Event>) {
    let view = rt.submit(request).await.unwrap();
    let events = events_after(rt, view.id, 0).await;
    (rt.get(view.id).await.unwrap(), events)
}

/// Every event of `id` after `after`, to its end.
async fn events_after(rt: &Runtime, id: ExecutionId, after: u64) -> Vec<crate::execution::Event> {
    rt.watch(id, after)
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await
}

fn types(events: &[crate::execution::Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.payload.type_name()).collect()
}

#[tokio::test(start_paused = true)]
async fn falls_back_after_a_failure_before_output() {
    let rt = runtime();
    let (view, events) = finish(&rt, request("fallback", "hi there")).await;
    assert_eq!(view.state, ExecutionState::Succeeded);
    assert_eq!(view.result.as_ref().unwrap().output.text, "hi there");
    assert_eq!(
        view.target.as_ref().map(|(p, m)| format!("{p}/{m}")),
        Some("a/echo".into())
    );
    assert_eq!(view.attempts.len(), 2);
    assert_eq!(view.attempts[0].next_action, Some(NextAction::Fallback));
    assert_eq!(view.attempts[1].outcome, Some(Outcome::Completed));
    assert_eq!(
        types(&events)[..6],
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started",
            "route.attempt.failed",
            "route.attempt.started",
            "output.text.delta"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failure_after_output_is_terminal_with_partial_output() {
    let rt = runtime();
    let (view, events) = finish(&rt, request("breaks", "one two three")).await;
    assert_eq!(view.state, ExecutionState::Failed);
    let error = view.error.unwrap();
    assert_eq!(error.code, ErrorCode::OutputInterrupted);
    assert_eq!(view.partial_output.text, "one two ");
    assert!(view.result.is_none());
    assert_eq!(view.attempts.len(), 1, "never falls back after output");
    assert!(view.attempts[0].output_committed);
    assert_eq!(events.last().unwrap().state, ExecutionState::Failed);
}

#[tokio::test(start_paused = true)]
async fn an_invalid_request_stops_at_once() {
    let rt = runtime();
    let (view, _) = finish(&rt, request("bad", "hi")).await;
    assert_eq!(view.error.unwrap().code, ErrorCode::InvalidRequest);
    assert_eq!(view.attempts.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn without_fallback_only_one_attempt_runs() {
    let rt = runtime();
    let mut r = request("fallback", "hi");
    r.allow_fallback = Some(false);
    r.max_attempts = Some(3);
    let (view, _) = finish(&rt, r).await;
    assert_eq!(view.state, ExecutionState::Failed);
    assert_eq!(view.attempts.len(), 1);
    assert_eq!(view.error.unwrap().code, ErrorCode::AttemptsExhausted);
}

#[tokio::test(start_paused = true)]
async fn capability_filtering_keeps_the_order_and_says_why() {
    let rt = runtime();
    let mut r = request("vision", "look");
    r.capabilities = vec!["vision".into()];
    let (view, _) = finish(&rt, r).await;
    let plan = view.plan.unwrap();
    assert_eq!(plan.targets.len(), 2);
    assert!(!plan.targets[0].kept);
    assert_eq!(plan.targets[0].missing_capabilities, ["vision"]);
    assert!(plan.targets[1].kept);
    assert_eq!(
        view.target.map(|(_, m)| m.to_string()),
        Some("vision".into())
    );

    let mut r = request("vision", "look");
    r.capabilities = vec!["telepathy".into()];
    let (view, events) = finish(&rt, r).await;
    assert_eq!(view.error.unwrap().code, ErrorCode::NoCapableTarget);
    assert_eq!(
        types(&events),
        [
            "execution.accepted",
            "execution.routing",
            "execution.failed"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn cancelling_before_routing_ends_in_cancelled() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let rt = with_faults(Faults {
        hold_routing: Some(gate.clone()),
        ..Faults::default()
    })
    .0;
    let view = rt.submit(request("fallback", "hi")).await.unwrap();
    assert_eq!(
        rt.get(view.id).await.unwrap().state,
        ExecutionState::Accepted
    );
    let view = rt
        .cancel(view.id, Some("changed my mind".into()))
        .await
        .unwrap();
    assert_eq!(view.state, ExecutionState::Cancelled);
    assert_eq!(view.error.as_ref().unwrap().outcome, Outcome::NotStarted);
    // The driver's routing event, let through at last, finds the execution ended.
    gate.add_permits(1);
    rt.shutdown(Duration::from_secs(1)).await;
    let events: Vec<_> = rt
        .watch(view.id, 0)
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(types(&events), ["execution.accepted", "execution.failed"]);
    let EventPayload::Failed(failure) = &events[1].payload else {
        panic!()
    };
    assert_eq!(failure.cancel_reason.as_deref(), Some("changed my mind"));
}

#[tokio::test(start_paused = true)]
async fn cancelling_while_queued_leaves_the_queue() {
    let rt = runtime();
    let a = rt.submit(request("hang", "1")).await.unwrap();
    let b = rt.submit(request("hang", "2")).await.unwrap();
    let queued = rt.submit(request("hang", "3")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    let provider = &rt.metadata().providers[0];
    assert_eq!((provider.in_flight, provider.queued), (2, 1));
    assert_eq!(
        rt.get(queued.id).await.unwrap().state,
        ExecutionState::Routing
    );
    let view = rt.cancel(queued.id, None).await.unwrap();
    assert_eq!(view.state, ExecutionState::Cancelled);
    assert_eq!(view.error.unwrap().outcome, Outcome::NotStarted);
    assert_eq!(rt.metadata().providers[0].queued, 0);
    for id in [a.id, b.id] {
        let view = rt.cancel(id, None).await.unwrap();
        assert_eq!(view.state, ExecutionState::Cancelled);
        assert_eq!(
            view.error.unwrap().outcome,
            Outcome::Unknown,
            "cut mid-flight"
        );
    }
    assert_eq!(rt.metadata().providers[0].in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_rejects_and_routes_on() {
    let rt = runtime();
    for n in 0..4 {
        rt.submit(request("hang", &n.to_string())).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    // Two running, two queued: the next one is rejected at admission.
    let (view, _) = finish(&rt, request("hang", "late")).await;
    assert_eq!(view.attempts.len(), 1);
    assert!(!view.attempts[0].admitted);
    assert_eq!(
        view.attempts[0].error.as_ref().unwrap().code.as_str(),
        "admission_rejected"
    );
    assert_eq!(view.error.unwrap().outcome, Outcome::NotStarted);
}

#[tokio::test(start_paused = true)]
async fn shutdown_drains_then_cancels_what_is_left() {
    let rt = runtime();
    let quick = rt.submit(request("fallback", "quick")).await.unwrap();
    let stuck = rt.submit(request("hang", "stuck")).await.unwrap();
    rt.shutdown(Duration::from_secs(2)).await;
    assert_eq!(
        rt.get(quick.id).await.unwrap().state,
        ExecutionState::Succeeded
    );
    let stuck = rt.get(stuck.id).await.unwrap();
    assert_eq!(stuck.state, ExecutionState::Cancelled);
    assert!(stuck.error.unwrap().message.contains("shutting down"));
    assert_eq!(rt.state(), RuntimeState::Stopping);
    let refused = rt.submit(request("fallback", "late")).await.unwrap_err();
    assert!(
        matches!(refused, RuntimeError::Unavailable(NotReady::Stopping)),
        "{refused:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn idempotency_compares_requests_as_they_resolve() {
    let rt = runtime();
    let mut first = request("fallback", "hi");
    first.policy = None;
    first.idempotency_key = Some("k".into());
    let a = rt.submit(first.clone()).await.unwrap();
    // The same request with its defaults spelled out is the same request.
    let spelled = ExecuteRequest {
        policy: Some("fallback".into()),
        max_attempts: Some(3),
        allow_fallback: Some(true),
        ..first.clone()
    };
    assert_eq!(rt.submit(spelled).await.unwrap().id, a.id);
    let different = ExecuteRequest {
        allow_fallback: Some(false),
        ..first
    };
    let err = rt.submit(different).await.unwrap_err();
    assert!(
        matches!(err, RuntimeError::AlreadyExists { execution_id, .. } if execution_id == a.id)
    );
}

#[tokio::test(start_paused = true)]
async fn a_driver_waiting_on_its_provider_has_made_every_earlier_step_visible() {
    let rt = runtime();
    let view = rt.submit(request("hang", "hi")).await.unwrap();
    // The driver holds events back only while it runs without waiting; waiting on the
    // provider, it has appended routing and the attempt's start.
    let now = rt.get(view.id).await.unwrap();
    assert_eq!(now.state, ExecutionState::Running);
    assert_eq!(now.attempts.len(), 1);
    let events: Vec<_> = rt
        .watch(view.id, 0)
        .await
        .unwrap()
        .take(3)
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(
        types(&events),
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started"
        ]
    );
    rt.cancel(view.id, None).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_request_adding_a_capability_is_planned_with_it_and_one_adding_none_is_not() {
    let rt = runtime();
    let plain = rt.submit(request("vision", "hi")).await.unwrap();
    let mut asking = request("vision", "hi");
    asking.capabilities = vec!["vision".into(), "text".into()];
    let asking = rt.submit(asking).await.unwrap();
    let plain = rt.get(plain.id).await.unwrap().plan.unwrap();
    let asking = rt.get(asking.id).await.unwrap().plan.unwrap();
    // The ability requires nothing of its own: the plain request (planned at start-up) keeps
    // both targets; the one that adds vision is planned with it and filters echo out.
    let kept = |plan: &crate::execution::RoutingPlan| -> Vec<String> {
        plan.kept().map(|t| t.model.to_string()).collect()
    };
    assert_eq!(kept(&plain), ["echo", "vision"]);
    assert_eq!(kept(&asking), ["vision"]);
    assert_eq!(asking.required_capabilities, ["text", "vision"]);
    assert_eq!(
        asking.targets[0].missing_capabilities,
        ["vision"],
        "{:?}",
        asking
    );
}

#[tokio::test(start_paused = true)]
async fn output_past_its_bound_ends_the_execution_with_its_usage_and_partial_output() {
    let long = "word ".repeat(100);
    let config = Config::builder()
        .max_output_bytes(52)
        .provider(
            "a",
            ProviderSpec::scripted().scripted_model(
                "long",
                &["text"],
                script(|s| {
                    s.reply = Some(long.clone());
                    s.delta_interval_ms = 1;
                }),
            ),
        )
        .policy("main", PolicySpec::new(&["a/long"]))
        .ability("chat", AbilitySpec::new("main"))
        .build()
        .unwrap();
    let rt = Runtime::new(config).unwrap();
    let (view, _) = finish(&rt, request("main", "hi")).await;
    assert_eq!(view.state, ExecutionState::Failed);
    let error = view.error.unwrap();
    assert_eq!(error.code, ErrorCode::OutputTooLarge);
    assert_eq!(
        error.outcome,
        Outcome::Unknown,
        "the provider call was dropped"
    );
    // Ten five-byte words fit in 52 bytes; the eleventh would not.
    assert_eq!(view.partial_output.text, "word ".repeat(10));
    let attempt = &view.attempts[0];
    assert_eq!(
        attempt.error.as_ref().map(|e| e.code.as_str()),
        Some("output_too_large")
    );
    assert!(attempt.output_committed);
}

#[tokio::test(start_paused = true)]
async fn events_past_their_bound_end_the_execution() {
    let config = Config::builder()
        .max_events_per_execution(40)
        .provider(
            "a",
            ProviderSpec::scripted().scripted_model(
                "chatty",
                &["text"],
                script(|s| {
                    s.chunk = Chunk::Char;
                    s.reply = Some("x".repeat(1000));
                }),
            ),
        )
        .policy("main", PolicySpec::new(&["a/chatty"]))
        .ability("chat", AbilitySpec::new("main"))
        .build()
        .unwrap();
    let rt = Runtime::new(config).unwrap();
    let (view, _) = finish(&rt, request("main", "hi")).await;
    assert_eq!(view.error.as_ref().unwrap().code, ErrorCode::OutputTooLarge);
    assert!(view.last_sequence <= 40, "{} events", view.last_sequence);
    let deltas = view.partial_output.text.len();
    assert!(
        deltas >= 20,
        "room was kept for the end, not more: {deltas} deltas"
    );
}
