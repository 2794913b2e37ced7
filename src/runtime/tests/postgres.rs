//! The runtime on the PostgreSQL store (`MODEL_RUNTIME_TEST_POSTGRES_URL`; without it these
//! skip), in real time: the store's answers come from another thread, which a paused clock
//! would race. Two runtimes on one schema are two replicas.

use std::time::Duration;

use super::{config, events_after, finish, request, types};
use crate::Runtime;
use crate::execution::{ErrorCode, ExecutionState, NextAction};
use crate::store::conformance::limits;
use crate::store::{EventStore, test_postgres};

/// A runtime on a fresh PostgreSQL store, and a second one (another replica) on the same
/// schema; `None` when no server is configured.
async fn replicas() -> Option<(Runtime, Runtime)> {
    let (a, b) = test_postgres::replicas(limits(1000, Duration::from_secs(600))).await?;
    let runtime = |store: std::sync::Arc<dyn EventStore>| {
        Runtime::builder(config()).store(store).build().unwrap()
    };
    Some((runtime(a), runtime(b)))
}

#[tokio::test]
async fn executions_route_fall_back_and_end_as_on_any_store() {
    let Some((rt, _)) = replicas().await else {
        return;
    };
    let (view, events) = finish(&rt, request("fallback", "hi there")).await;
    assert_eq!(view.state, ExecutionState::Succeeded);
    assert_eq!(view.result.as_ref().unwrap().output.text, "hi there");
    assert_eq!(view.attempts[0].next_action, Some(NextAction::Fallback));
    assert_eq!(
        types(&events)[..4],
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started",
            "route.attempt.failed",
        ]
    );
    let (view, _) = finish(&rt, request("breaks", "one two three")).await;
    assert_eq!(view.error.unwrap().code, ErrorCode::OutputInterrupted);
    assert_eq!(view.partial_output.text, "one two ");
}

#[tokio::test]
async fn another_replica_watches_gets_and_cancels() {
    let Some((a, b)) = replicas().await else {
        return;
    };
    // A slow execution on A, followed on B from a cursor, identical to A's own stream.
    let view = a
        .submit(request("long", "one two three four"))
        .await
        .unwrap();
    let on_b = events_after(&b, view.id, 1).await;
    let on_a = events_after(&a, view.id, 0).await;
    assert_eq!(on_b, on_a[1..], "B reads what A appended, after the cursor");
    assert_eq!(b.get(view.id).await.unwrap(), a.get(view.id).await.unwrap());

    // A hanging execution on A, cancelled on B: A's driver ends it, B answers with the end.
    let hung = a.submit(request("hang", "wait")).await.unwrap();
    let cancelled = b.cancel(hung.id, Some("from B".into())).await.unwrap();
    assert_eq!(cancelled.state, ExecutionState::Cancelled);
    let ended = a.get(hung.id).await.unwrap();
    assert_eq!(ended, cancelled);
    assert_eq!(ended.error.unwrap().code, ErrorCode::Cancelled);
}

#[tokio::test]
async fn an_idempotency_key_names_one_execution_across_replicas() {
    let Some((a, b)) = replicas().await else {
        return;
    };
    let keyed = || {
        let mut r = request("fallback", "once");
        r.idempotency_key = Some("across".into());
        r
    };
    let (one, two) = tokio::join!(a.submit(keyed()), b.submit(keyed()));
    assert_eq!(one.unwrap().id, two.unwrap().id);
    let mut other = keyed();
    other.input.messages = vec![crate::execution::Message::user("another")];
    assert!(matches!(
        b.submit(other).await,
        Err(crate::RuntimeError::AlreadyExists { .. })
    ));
}
