//! Leases lost and taken over: by a survivor, or by the replica itself under its new
//! registration when it is alone. Either way the execution ends `outcome_unknown`, and the
//! driver of the former registration appends nothing more.

use std::time::Duration;

use super::{at, created, pair};
use crate::execution::fixtures::{attempt_started, routing, text};
use crate::execution::{ErrorCode, ExecutionId, ExecutionState};
use crate::store::{EventStore, StoreError};

/// A replica whose lease lapsed is taken over: its unfinished execution ends with
/// `outcome_unknown` by the survivor, its own next append is refused (fenced), and it
/// registers again to serve new work.
#[tokio::test]
async fn a_lapsed_replica_is_taken_over_and_fenced() {
    let Some((a, b)) = pair(Duration::from_millis(200)).await else {
        return;
    };
    let id = created(&a, None).await;
    for payload in [routing(), attempt_started(1), text(1, "partial")] {
        a.append(id, payload).await.unwrap();
    }
    // One that never reached a provider: it ends saying so.
    let idle = created(&a, None).await;
    a.append(idle, routing()).await.unwrap();
    let lapsed = lapse(&a).await;
    until_ended(&*b, id).await;
    until_ended(&*b, idle).await;
    let error = b.get(idle).await.unwrap().error.expect("an error");
    assert_eq!(error.code, ErrorCode::OutcomeUnknown);
    assert_eq!(error.outcome, crate::execution::Outcome::NotStarted);
    let view = b.get(id).await.unwrap();
    assert_eq!(view.state, ExecutionState::Failed);
    let error = view.error.expect("an error");
    assert_eq!(error.code, ErrorCode::OutcomeUnknown);
    assert_eq!(error.outcome, crate::execution::Outcome::Unknown);
    assert_eq!(view.partial_output.text, "partial", "what streamed is kept");
    // The lapsed replica's append is refused: another owns the execution now.
    let refused = a.append(id, text(1, "late")).await.unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::AlreadyTerminal(_) | StoreError::Unavailable(_)
        ),
        "{refused:?}"
    );
    assert_eq!(b.get(id).await.unwrap().last_sequence, view.last_sequence);
    // It registers again and serves new work.
    tokio::time::timeout(Duration::from_secs(10), async {
        while a.shared.replica.id().0 == lapsed || a.failed() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("registered again");
    let fresh = created(&a, None).await;
    a.append(fresh, routing()).await.unwrap();
}

/// Lapses `store`'s lease in the database, as a pause past it would.
async fn lapse(store: &super::PostgresStore) -> uuid::Uuid {
    let lapsed = store.shared.replica.id().0;
    let client = store.shared.client().await.unwrap();
    client
        .execute(
            &at(
                store,
                "UPDATE {s}.replicas SET lease_until = now() - interval '1 second' WHERE id = $1",
            ),
            &[&lapsed],
        )
        .await
        .unwrap();
    lapsed
}

/// Waits (at most 10 s) until `id` has ended, as `store` sees it.
async fn until_ended(store: &dyn EventStore, id: ExecutionId) {
    let mut follower = store.follow(id).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            follower.changes().mark_seen();
            if follower.position().1.is_terminal() {
                return;
            }
            follower.changes().changed().await.unwrap();
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the execution ends within a lease and a third"
    );
}

/// A replica alone whose lease lapsed: it registers again, takes its former registration
/// over (nobody else will), and ends what that left, while its former driver, which nobody
/// stopped, appends nothing more.
#[tokio::test]
async fn a_lone_replica_whose_lease_lapsed_ends_what_it_left_itself() {
    let Some(url) = super::url() else {
        return;
    };
    let limits = crate::store::conformance::limits(1000, Duration::from_secs(3600));
    let store =
        super::PostgresStore::connect(&super::options(&url, &super::fresh_schema()), limits)
            .await
            .unwrap();
    let id = created(&store, None).await;
    for payload in [routing(), attempt_started(1), text(1, "partial")] {
        store.append(id, payload).await.unwrap();
    }
    let lapsed = lapse(&store).await;
    until_ended(&*store, id).await;
    assert_ne!(store.shared.replica.id().0, lapsed, "registered again");
    let view = store.get(id).await.unwrap();
    assert_eq!(view.state, ExecutionState::Failed);
    assert_eq!(view.error.unwrap().code, ErrorCode::OutcomeUnknown);
    assert_eq!(view.partial_output.text, "partial");
    let refused = store.append(id, text(1, "late")).await.unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::AlreadyTerminal(_) | StoreError::Unavailable(_)
        ),
        "{refused:?}"
    );
}
