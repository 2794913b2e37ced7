//! The rules of usage facts: their order, and that they leave with their execution.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    reason = "a test suite, built outside cfg(test) for stores outside this crate: its unwraps are its assertions"
)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{create, limits, new_execution, roomy};
use crate::execution::EventPayload;
use crate::execution::fixtures::{attempt_started, completed, routing, usage};
use crate::store::{EventStore, StoreLimits};

async fn read_usage(store: &dyn EventStore, after: u64) -> Vec<crate::store::UsageEntry> {
    read_usage_page(store, after, usize::MAX).await
}

/// Up to `limit` facts after `after`, read at once or fetched.
async fn read_usage_page(
    store: &dyn EventStore,
    after: u64,
    limit: usize,
) -> Vec<crate::store::UsageEntry> {
    let mut facts = Vec::new();
    match store.read_usage(after, limit, &mut facts) {
        None => facts,
        Some(fetch) => fetch.await.unwrap(),
    }
}

/// Usage facts of every execution come back in the order they were kept, each at a position
/// past the one before, from any position on; a reader is woken by a new fact.
pub async fn usage_facts_are_read_in_the_order_they_were_kept<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = roomy(make).await;
    assert!(read_usage(&*store, 0).await.is_empty());
    let a = create(&*store, new_execution(None)).await;
    let b = create(&*store, new_execution(None)).await;
    for id in [a, b] {
        store.append(id, routing()).await.unwrap();
        store.append(id, attempt_started(1)).await.unwrap();
    }
    let mut changes = store.usage_changes();
    changes.mark_seen();
    store.append(a, usage(1)).await.unwrap();
    assert!(
        futures_util::FutureExt::now_or_never(changes.changed()).is_some(),
        "a new fact wakes the reader"
    );
    store.append(b, usage(2)).await.unwrap();
    store
        .append_all(a, vec![usage(3), usage(4), completed(1, "hi")])
        .await
        .unwrap();
    let facts = read_usage(&*store, 0).await;
    let quantities: Vec<u64> = facts.iter().map(|f| f.fact.quantity).collect();
    assert_eq!(quantities, [1, 2, 3, 4], "in the order they were kept");
    let positions: Vec<u64> = facts.iter().map(|f| f.fact.position).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(positions[0] > 0, "0 is before the first");
    assert_eq!(
        facts.iter().map(|f| f.execution_id).collect::<Vec<_>>(),
        [a, b, a, a]
    );
    // Each entry names the event that carries its fact.
    let events = store
        .follow(a)
        .await
        .unwrap()
        .read(0, usize::MAX)
        .await
        .unwrap();
    let third = events
        .iter()
        .find(|e| e.sequence == facts[2].sequence)
        .expect("the fact's event");
    assert_eq!(third.payload, EventPayload::Usage(facts[2].fact.clone()));
    for (i, fact) in facts.iter().enumerate() {
        let rest = read_usage(&*store, fact.fact.position).await;
        assert_eq!(
            rest,
            facts[i + 1..],
            "after position {}",
            fact.fact.position
        );
    }
    let page = read_usage_page(&*store, 0, 2).await;
    assert_eq!(page, facts[..2], "limit bounds a page");
    // The same epoch throughout.
    assert_eq!(store.usage_epoch(), store.usage_epoch());
}

/// A fact leaves the usage order with its execution.
pub async fn usage_facts_leave_with_their_execution<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = make(limits(1, Duration::from_secs(3600))).await;
    let first = create(&*store, new_execution(None)).await;
    store.append(first, routing()).await.unwrap();
    store.append(first, attempt_started(1)).await.unwrap();
    store
        .append_all(first, vec![usage(1), completed(1, "hi")])
        .await
        .unwrap();
    let gone = read_usage(&*store, 0).await;
    assert_eq!(gone.len(), 1);
    // Room for one: the next execution makes the first go, with its facts.
    let second = create(&*store, new_execution(None)).await;
    store.append(second, routing()).await.unwrap();
    store.append(second, attempt_started(1)).await.unwrap();
    store.append(second, usage(2)).await.unwrap();
    let facts = read_usage(&*store, 0).await;
    assert_eq!(facts.len(), 1, "{facts:?}");
    assert_eq!(facts[0].execution_id, second);
    assert!(
        facts[0].fact.position > gone[0].fact.position,
        "a position is never given twice"
    );
}
