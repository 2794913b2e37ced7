//! A nearly full store makes room ahead of its creates: in the background, a twentieth of its
//! bounds at a time, the executions that ended first.

use std::sync::Arc;
use std::time::Duration;

use super::{created, fresh_schema, options, url};
use crate::execution::fixtures::failed;
use crate::execution::{ErrorCode, ExecutionId};
use crate::store::conformance::limits;
use crate::store::postgres::{PostgresStore, capacity};
use crate::store::{EventStore, StoreError};

/// A store of 100 executions on a fresh schema.
async fn of_100() -> Option<Arc<PostgresStore>> {
    let url = url()?;
    let limits = limits(100, Duration::from_secs(3600));
    Some(
        PostgresStore::connect(&options(&url, &fresh_schema()), limits)
            .await
            .unwrap(),
    )
}

/// Creates and ends `n` executions, in order.
async fn ended(store: &PostgresStore, n: usize) -> Vec<ExecutionId> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let id = created(store, None).await;
        store
            .append(id, failed(ErrorCode::Cancelled))
            .await
            .unwrap();
        ids.push(id);
    }
    ids
}

/// Waits (within 5 s) until the store counts `executions`.
async fn until_counted(store: &PostgresStore, executions: usize) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while store.stats().executions != executions {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} executions counted, not {executions}",
            store.stats().executions
        )
    });
}

/// The create that brings a store of 100 within a spare (one execution) of its bound has five
/// executions let go in the background, the five that ended first; the next five creates fit,
/// and the fifth of them has the next five let go.
#[tokio::test]
async fn a_nearly_full_store_makes_room_ahead_of_its_creates() {
    let Some(store) = of_100().await else {
        return;
    };
    let first = ended(&store, 100).await;
    until_counted(&store, 95).await;
    for id in &first[..5] {
        assert_eq!(store.get(*id).await.unwrap_err(), StoreError::NotFound(*id));
    }
    for id in &first[5..] {
        assert!(store.get(*id).await.is_ok(), "{id} is kept");
    }
    let then = ended(&store, 5).await;
    until_counted(&store, 95).await;
    for id in &first[5..10] {
        assert_eq!(store.get(*id).await.unwrap_err(), StoreError::NotFound(*id));
    }
    for id in first[10..].iter().chain(&then) {
        assert!(store.get(*id).await.is_ok(), "{id} is kept");
    }
    // The database agrees with the store's counts.
    store.shared.capacity.refresh(&store.shared).await.unwrap();
    assert_eq!(store.stats().executions, 95);
}

/// The exact count reads the index of the executions still in the store, however many rows
/// that left linger in the table (here, none yet: the planner would read the small table).
#[tokio::test]
async fn the_exact_count_reads_the_index_of_the_executions_still_held() {
    let Some(store) = of_100().await else {
        return;
    };
    ended(&store, 3).await;
    let mut client = store.shared.client().await.unwrap();
    let tx = client.transaction().await.unwrap();
    tx.batch_execute(capacity::FROM_THE_INDEX).await.unwrap();
    let plan: Vec<String> = tx
        .query(&format!("EXPLAIN {}", capacity::COUNT), &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("executions_live"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}
