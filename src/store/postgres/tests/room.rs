//! A nearly full store makes room ahead of its creates: in the background, a twentieth of its
//! bounds at a time, the executions that ended first.

use std::time::Duration;

use super::{created, fresh_schema, options, url};
use crate::execution::fixtures::failed;
use crate::execution::{ErrorCode, ExecutionId};
use crate::store::conformance::limits;
use crate::store::postgres::PostgresStore;
use crate::store::{EventStore, StoreError};

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
    let Some(url) = url() else {
        return;
    };
    let limits = limits(100, Duration::from_secs(3600));
    let store = PostgresStore::connect(&options(&url, &fresh_schema()), limits)
        .await
        .unwrap();
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
