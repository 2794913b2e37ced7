//! The EventStore conformance suite: the behaviour every store must have, written once as
//! one public function per rule, and run against each implementation as one named test per
//! rule by [`event_store_conformance!`](crate::event_store_conformance), so the first broken
//! rule does not hide the rest. Failures panic with a message naming the rule, like any test
//! assertion.
//!
//! Each rule takes a factory, `make(limits)`, that builds a fresh store within `limits`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    reason = "a test suite, built outside cfg(test) for stores outside this crate: its unwraps are its assertions"
)]

mod capacity;
mod usage;

pub use capacity::{
    a_follower_reads_to_the_end_after_its_execution_leaves,
    a_full_store_evicts_terminal_records_only, a_read_keeps_the_store_within_its_bytes,
    bytes_are_counted_and_bounded, expiry_needs_no_new_work,
    retention_expires_records_with_their_identities,
};
pub use usage::{
    usage_facts_are_read_in_the_order_they_were_kept, usage_facts_leave_with_their_execution,
};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{Created, EventStore, Follower, NewExecution, StoreError, StoreLimits};
use crate::execution::fixtures::{attempt_started, completed, failed, routing, text};
use crate::execution::{ErrorCode, Event, ExecutionId, ExecutionState, Fingerprint, Idempotency};

/// One `#[tokio::test]` per rule of the suite, each on a fresh store from `$make`, a
/// `Fn(StoreLimits) -> impl Future<Output = Arc<dyn EventStore>>`. Use it inside a test module
/// of the store under test.
#[macro_export]
macro_rules! event_store_conformance {
    // With a guard: each rule returns at once when `$ready()` is false (a store whose server
    // this machine does not run; the guard says so).
    ($make:expr, if $ready:expr) => {
        $crate::event_store_conformance!(@rules $make, $ready;
            appends_are_gap_free_and_follow_the_state_machine,
            illegal_events_change_nothing,
            nothing_follows_a_terminal_event,
            batches_append_all_or_none,
            cursors_resume_exactly,
            followers_see_every_append,
            idempotency_keys_return_or_reject,
            unknown_ids_are_not_found,
            a_full_store_evicts_terminal_records_only,
            a_follower_reads_to_the_end_after_its_execution_leaves,
            retention_expires_records_with_their_identities,
            expiry_needs_no_new_work,
            bytes_are_counted_and_bounded,
            a_read_keeps_the_store_within_its_bytes,
            usage_facts_are_read_in_the_order_they_were_kept,
            usage_facts_leave_with_their_execution,
        );
    };
    ($make:expr) => {
        $crate::event_store_conformance!($make, if || true);
    };
    (@rules $make:expr, $ready:expr; $($rule:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $rule() {
                if !($ready)() {
                    return;
                }
                $crate::store::conformance::$rule($make).await;
            }
        )*
    };
}

/// Limits with `executions` and a day's retention and a GiB.
pub fn limits(max_executions: usize, retention: Duration) -> StoreLimits {
    StoreLimits {
        max_executions,
        max_bytes: 1 << 30,
        retention,
    }
}

/// A store with room to spare: nothing expires or is evicted during a rule.
async fn roomy<F, Fut>(make: F) -> Arc<dyn EventStore>
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    make(limits(100, Duration::from_secs(3600))).await
}

/// A new execution with an optional idempotency key and fingerprint.
pub fn new_execution(key: Option<(&str, u128)>) -> NewExecution {
    NewExecution {
        id: ExecutionId::new(),
        accepted: crate::execution::fixtures::accepted(),
        labels: Arc::default(),
        idempotency: key.map(|(key, fingerprint)| Idempotency {
            key: key.to_owned(),
            fingerprint: Fingerprint(fingerprint),
        }),
        input_bytes: 0,
    }
}

async fn create(store: &dyn EventStore, new: NewExecution) -> ExecutionId {
    match store.create(new).await.expect("create succeeds") {
        Created::New(view) => view.id,
        Created::Existing(view) => panic!("new execution reported as existing: {view:?}"),
    }
}

async fn run_to_success(store: &dyn EventStore, id: ExecutionId) {
    for payload in [
        routing(),
        attempt_started(1),
        text(1, "hi"),
        completed(1, "hi"),
    ] {
        store
            .append(id, payload)
            .await
            .expect("legal append succeeds");
    }
}

async fn all(follower: &Follower) -> Vec<Event> {
    follower.read(0, usize::MAX).await.unwrap()
}

/// Sequences start at 1 with no gaps; each event carries the state the state machine gives it,
/// and the view (and `state`) say what the events say.
pub async fn appends_are_gap_free_and_follow_the_state_machine<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    let id = create(&*store, new_execution(None)).await;
    let view = store.get(id).await.unwrap();
    assert_eq!(
        (view.state, view.last_sequence),
        (ExecutionState::Accepted, 1)
    );
    assert_eq!(store.state(id).await.unwrap(), ExecutionState::Accepted);
    let follower = store.follow(id).await.unwrap();
    assert_eq!(follower.position(), (1, ExecutionState::Accepted));
    run_to_success(&*store, id).await;
    assert_eq!(follower.position(), (5, ExecutionState::Succeeded));
    let events = all(&follower).await;
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(
        sequences,
        [1, 2, 3, 4, 5],
        "sequences start at 1 with no gaps"
    );
    let states: Vec<ExecutionState> = events.iter().map(|e| e.state).collect();
    use ExecutionState::*;
    assert_eq!(states, [Accepted, Routing, Running, Running, Succeeded]);
    let view = store.get(id).await.unwrap();
    assert_eq!(view.state, Succeeded);
    assert_eq!(store.state(id).await.unwrap(), Succeeded);
    assert_eq!(view.last_sequence, 5);
    assert_eq!(
        view.result.as_ref().map(|r| r.output.text.as_str()),
        Some("hi")
    );
}

/// An event the state machine refuses is an error and stores nothing.
pub async fn illegal_events_change_nothing<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    let id = create(&*store, new_execution(None)).await;
    let err = store.append(id, completed(1, "x")).await.unwrap_err();
    assert!(matches!(err, StoreError::IllegalTransition(_)), "{err:?}");
    assert_eq!(store.get(id).await.unwrap().last_sequence, 1);
    assert_eq!(all(&store.follow(id).await.unwrap()).await.len(), 1);
}

/// After a terminal event every append is `AlreadyTerminal`.
pub async fn nothing_follows_a_terminal_event<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    let id = create(&*store, new_execution(None)).await;
    store
        .append(id, failed(ErrorCode::Cancelled))
        .await
        .unwrap();
    assert_eq!(
        store.get(id).await.unwrap().state,
        ExecutionState::Cancelled
    );
    let err = store.append(id, routing()).await.unwrap_err();
    assert_eq!(err, StoreError::AlreadyTerminal(id));
    let err = store
        .append(id, failed(ErrorCode::Cancelled))
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::AlreadyTerminal(id));
    assert_eq!(store.get(id).await.unwrap().last_sequence, 2);
}

/// `append_all` stores a batch whole or not at all, one sequence per event, with one wake-up.
pub async fn batches_append_all_or_none<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    let id = create(&*store, new_execution(None)).await;
    assert_eq!(
        store.append_all(id, Vec::new()).await,
        Ok(1),
        "an empty batch is a no-op"
    );

    // A batch that breaks the state machine part-way stores none of it.
    let err = store
        .append_all(id, vec![routing(), text(1, "too early")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::IllegalTransition(_)), "{err:?}");
    assert_eq!(store.get(id).await.unwrap().last_sequence, 1);
    let mut follower = store.follow(id).await.unwrap();
    assert_eq!(all(&follower).await.len(), 1);

    follower.changes().mark_seen();
    let batch = vec![routing(), attempt_started(1), text(1, "a"), text(1, "b")];
    assert_eq!(store.append_all(id, batch).await, Ok(5));
    tokio::time::timeout(Duration::from_secs(5), follower.changes().changed())
        .await
        .expect("a batch wakes followers")
        .unwrap();
    let events = follower.read(1, usize::MAX).await.unwrap();
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, [2, 3, 4, 5], "one sequence per event, no gaps");
    use ExecutionState::*;
    let states: Vec<ExecutionState> = events.iter().map(|e| e.state).collect();
    assert_eq!(states, [Routing, Running, Running, Running]);
    let view = store.get(id).await.unwrap();
    assert_eq!(
        (view.last_sequence, view.partial_output.text.as_str()),
        (5, "ab")
    );

    // Nothing may follow a terminal event, within a batch or after one.
    let err = store
        .append_all(id, vec![completed(1, "ab"), text(1, "c")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::IllegalTransition(_)), "{err:?}");
    assert_eq!(store.get(id).await.unwrap().last_sequence, 5);
    assert_eq!(store.append_all(id, vec![completed(1, "ab")]).await, Ok(6));
    assert_eq!(store.get(id).await.unwrap().state, Succeeded);
    assert_eq!(
        store.append_all(id, vec![routing()]).await,
        Err(StoreError::AlreadyTerminal(id))
    );
}

/// A read after any sequence returns exactly the events after it; `limit` bounds a page.
pub async fn cursors_resume_exactly<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    let id = create(&*store, new_execution(None)).await;
    run_to_success(&*store, id).await;
    let follower = store.follow(id).await.unwrap();
    for after in 0..=6 {
        let got: Vec<u64> = follower
            .read(after, usize::MAX)
            .await
            .unwrap()
            .iter()
            .map(|e| e.sequence)
            .collect();
        let want: Vec<u64> = (after + 1..=5).collect();
        assert_eq!(got, want, "read after {after}");
    }
    let page: Vec<u64> = follower
        .read(1, 2)
        .await
        .unwrap()
        .iter()
        .map(|e| e.sequence)
        .collect();
    assert_eq!(page, [2, 3], "limit bounds a page");
    assert_eq!(
        store.first(id).await.unwrap(),
        follower.read(0, 1).await.unwrap()[0],
        "the first event, as a follower reads it"
    );
}

/// A follower is woken by every append, including one made before it began to wait.
pub async fn followers_see_every_append<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    let id = create(&*store, new_execution(None)).await;
    let mut follower = store.follow(id).await.unwrap();
    follower.changes().mark_seen();
    let waiting =
        tokio::spawn(async move { follower.changes().changed().await.map(|()| follower) });
    tokio::task::yield_now().await;
    store.append(id, routing()).await.unwrap();
    let mut follower = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("follower woken")
        .unwrap()
        .unwrap();
    // An append before the wait begins is not lost either.
    store.append(id, attempt_started(1)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), follower.changes().changed())
        .await
        .expect("an earlier append is seen")
        .unwrap();
    assert_eq!(follower.readers(), 1);
    let second = store.follow(id).await.unwrap();
    assert_eq!((follower.readers(), second.readers()), (2, 2));
}

/// A key with the same request returns the first execution; with another, a conflict that
/// stores nothing.
pub async fn idempotency_keys_return_or_reject<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    let id = create(&*store, new_execution(Some(("key-1", 7)))).await;
    match store
        .create(new_execution(Some(("key-1", 7))))
        .await
        .unwrap()
    {
        Created::Existing(view) => assert_eq!(view.id, id),
        Created::New(view) => panic!("same key and request created {view:?}"),
    }
    let err = store
        .create(new_execution(Some(("key-1", 8))))
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::IdempotencyConflict(id));
    assert_eq!(
        store.stats().executions,
        1,
        "a rejected create stores nothing"
    );
    assert_eq!(
        store.get(id).await.unwrap().idempotency_key.as_deref(),
        Some("key-1")
    );
}

/// Every operation on an unknown id is `NotFound`.
pub async fn unknown_ids_are_not_found<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    let id = ExecutionId::new();
    assert_eq!(store.get(id).await.unwrap_err(), StoreError::NotFound(id));
    assert_eq!(store.state(id).await.unwrap_err(), StoreError::NotFound(id));
    assert_eq!(
        store.follow(id).await.unwrap_err(),
        StoreError::NotFound(id)
    );
    assert_eq!(store.first(id).await.unwrap_err(), StoreError::NotFound(id));
    assert_eq!(
        store.append(id, routing()).await.unwrap_err(),
        StoreError::NotFound(id)
    );
    assert_eq!(
        store.append_all(id, vec![routing()]).await,
        Err(StoreError::NotFound(id))
    );
}

#[cfg(test)]
mod tests {
    /// A rule missing from the macro's list would never run anywhere.
    #[test]
    fn the_macro_runs_every_rule() {
        let source = include_str!("conformance.rs");
        let rules_in = [
            source,
            include_str!("conformance/capacity.rs"),
            include_str!("conformance/usage.rs"),
        ]
        .concat();
        // The list the macro passes itself: from `(@rules $make, $ready;` to the `);` closing it.
        let start = source.find("(@rules $make, $ready;").unwrap();
        let end = source[start..].find(");").unwrap() + start;
        let listed = &source[start..end];
        let rules: Vec<&str> = rules_in
            .lines()
            .filter_map(|line| line.strip_prefix("pub async fn "))
            .filter_map(|rest| rest.split('<').next())
            .collect();
        assert!(rules.len() >= 12, "{rules:?}");
        for rule in rules {
            assert!(
                listed.contains(&format!("{rule},")),
                "rule `{rule}` is not in event_store_conformance!"
            );
        }
    }
}
