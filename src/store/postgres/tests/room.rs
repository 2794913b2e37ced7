//! A nearly full store makes room ahead of its creates: in the background, a twentieth of its
//! bounds at a time, the executions that ended first.

use std::time::Duration;

use super::{ended, of_100, of_100_polled};
use crate::store::conformance::new_execution;
use crate::store::postgres::{PostgresStore, capacity};
use crate::store::{EventStore, StoreError};

/// Waits (within 5 s) until the store counts at most `executions`.
async fn until_at_most(store: &PostgresStore, executions: usize) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while store.stats().executions > executions {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} executions counted, not at most {executions}",
            store.stats().executions
        )
    });
}

/// The create that brings a store of 100 within a spare (one execution) of its bound has the
/// executions that ended first let go in the background until five more fit. (The counts may
/// say so one create early, when a create that committed as the store summed them was
/// counted twice: then four go, and the last create makes 96.) The next creates fit. The
/// store's poll is an hour apart: a poll sums the counts again, and on a loaded machine a sum
/// slow enough to count several of the creates twice made the room early, at 98 (three
/// went, and the creates after made 97).
#[tokio::test]
async fn a_nearly_full_store_makes_room_ahead_of_its_creates() {
    let Some(store) = of_100_polled(Duration::from_secs(3600)).await else {
        return;
    };
    let first = ended(&store, 100).await;
    until_at_most(&store, 96).await;
    for id in &first[..4] {
        assert_eq!(store.get(*id).await.unwrap_err(), StoreError::NotFound(*id));
    }
    for id in &first[10..] {
        assert!(store.get(*id).await.is_ok(), "{id} is kept");
    }
    let then = ended(&store, 4).await;
    for id in first[10..].iter().chain(&then) {
        assert!(store.get(*id).await.is_ok(), "{id} is kept");
    }
    // By the database, within the bound.
    store.shared.capacity.refresh(&store.shared).await.unwrap();
    let held = store.stats().executions;
    assert!((90..=100).contains(&held), "{held} held");
}

/// The exact count reads the index of the executions still in the store, however many rows
/// that left linger in the table (here, none yet: the planner alone would read the small
/// table).
#[tokio::test]
async fn the_exact_count_reads_the_index_of_the_executions_still_held() {
    let Some(store) = of_100().await else {
        return;
    };
    ended(&store, 3).await;
    let plan = capacity::count_plan(&store.shared).await.join("\n");
    assert!(plan.contains("executions_live"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}

/// Creates in flight together are counted as they are admitted: 150 at once on an empty
/// store of 100 running executions make 100, and the other 50 are refused as full.
#[tokio::test]
async fn creates_in_flight_together_never_pass_the_bound() {
    let Some(store) = of_100().await else {
        return;
    };
    let creates = (0..150).map(|_| store.create(new_execution(None)));
    let results = futures_util::future::join_all(creates).await;
    let full = results
        .iter()
        .filter(|r| matches!(r, Err(StoreError::Full { .. })))
        .count();
    assert_eq!(full, 50, "refused as full: {results:?}");
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Ok(_) | Err(StoreError::Full { .. })))
    );
    store.shared.capacity.refresh(&store.shared).await.unwrap();
    assert_eq!(store.stats().executions, 100, "held, by the database");
}
