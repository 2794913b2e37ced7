//! The rules of room: what a full store lets go, retention, and the bytes it counts.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    reason = "a test suite, built outside cfg(test) for stores outside this crate: its unwraps are its assertions"
)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{all, create, limits, new_execution, run_to_success};
use crate::execution::fixtures::{attempt_started, completed, failed, routing, text};
use crate::execution::{ErrorCode, ExecutionId, ExecutionState};
use crate::store::{EventStore, NewExecution, StoreError, StoreLimits};

const KIB: u64 = 1024;

/// A full store evicts a terminal execution (with its key) for a new one, and refuses new work
/// when only running ones are left.
pub async fn a_full_store_evicts_terminal_records_only<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = make(limits(3, Duration::from_secs(3600))).await;
    // Capacity 3: one terminal (with a key) and two running.
    let done = create(&*store, new_execution(Some(("done-key", 1)))).await;
    run_to_success(&*store, done).await;
    let running: Vec<ExecutionId> = [
        create(&*store, new_execution(None)).await,
        create(&*store, new_execution(None)).await,
    ]
    .into();
    // A fourth execution evicts the terminal one, identities included.
    let fourth = create(&*store, new_execution(None)).await;
    assert_eq!(
        store.get(done).await.unwrap_err(),
        StoreError::NotFound(done)
    );
    // Now all three are non-terminal: a fifth is refused and nothing is evicted.
    let err = store.create(new_execution(None)).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Full { executions: 3, .. }),
        "{err:?}"
    );
    for id in running.iter().chain([&fourth]) {
        assert_eq!(
            store.get(*id).await.unwrap().state,
            ExecutionState::Accepted,
            "kept {id}"
        );
    }
    // The evicted key is free again; finishing one execution makes room for it.
    store
        .append(fourth, failed(ErrorCode::Cancelled))
        .await
        .unwrap();
    let reused = create(&*store, new_execution(Some(("done-key", 2)))).await;
    assert_ne!(reused, done);
    assert_eq!(store.stats().executions, 3);
}

/// Capacity and retention do not wait for readers: a followed execution is evicted like any
/// other, and its follower still reads every event to the last.
pub async fn a_follower_reads_to_the_end_after_its_execution_leaves<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = make(limits(2, Duration::from_secs(3600))).await;
    let followed = create(&*store, new_execution(None)).await;
    let mut follower = store.follow(followed).await.unwrap();
    run_to_success(&*store, followed).await;
    let _second = create(&*store, new_execution(None)).await;
    // A third needs room: the terminal, followed one goes.
    let _third = create(&*store, new_execution(None)).await;
    assert_eq!(
        store.get(followed).await.unwrap_err(),
        StoreError::NotFound(followed)
    );
    assert_eq!(
        store.follow(followed).await.unwrap_err(),
        StoreError::NotFound(followed),
        "no new follower for an execution that left"
    );
    let sequences: Vec<u64> = all(&follower).await.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, [1, 2, 3, 4, 5], "the follower reads it all");
    assert!(follower.read(4, 10).await.unwrap()[0].is_terminal());
    // It is told that no change will come.
    follower.changes().mark_seen();
    let closed = tokio::time::timeout(Duration::from_secs(5), follower.changes().changed())
        .await
        .expect("the follower is told");
    assert_eq!(closed, Err(crate::store::Closed));
}

/// Terminal executions expire after the retention, with their keys.
pub async fn retention_expires_records_with_their_identities<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = make(limits(100, Duration::from_secs(60))).await;
    tokio::time::pause();
    let id = create(&*store, new_execution(Some(("kept-key", 1)))).await;
    run_to_success(&*store, id).await;
    let follower = store.follow(id).await.unwrap();
    tokio::time::advance(Duration::from_secs(30)).await;
    let _other = create(&*store, new_execution(None)).await;
    assert!(store.get(id).await.is_ok(), "kept within retention");
    tokio::time::advance(Duration::from_secs(31)).await;
    let _another = create(&*store, new_execution(None)).await;
    assert_eq!(
        store.get(id).await.unwrap_err(),
        StoreError::NotFound(id),
        "expired after retention, though a follower holds it"
    );
    assert_eq!(
        all(&follower).await.len(),
        5,
        "and the follower still reads it"
    );
    // Its key expired with it: the same key with another request is a new execution.
    let fresh = create(&*store, new_execution(Some(("kept-key", 2)))).await;
    assert_ne!(fresh, id);
    tokio::time::resume();
}

/// `expire` lets go what retention has passed without any new work: the runtime calls it on
/// a timer, so an idle store gives back what it holds on time.
pub async fn expiry_needs_no_new_work<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = make(limits(100, Duration::from_secs(60))).await;
    tokio::time::pause();
    let id = create(&*store, new_execution(Some(("idle-key", 1)))).await;
    run_to_success(&*store, id).await;
    let running = create(&*store, new_execution(None)).await;
    tokio::time::advance(Duration::from_secs(59)).await;
    assert_eq!(store.expire(), 0, "nothing is due within retention");
    assert!(store.get(id).await.is_ok());
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(store.expire(), 1, "the ended execution is due");
    assert_eq!(store.get(id).await.unwrap_err(), StoreError::NotFound(id));
    assert_eq!(store.stats().executions, 1, "only the running one is held");
    assert!(
        store.get(running).await.is_ok(),
        "running executions never expire"
    );
    assert_eq!(store.expire(), 0);
    // Its key went with it.
    let fresh = create(&*store, new_execution(Some(("idle-key", 2)))).await;
    assert_ne!(fresh, id);
    tokio::time::resume();
}

/// The store counts what it holds and stays within its bytes: a create that does not fit makes
/// room from terminal executions, or is refused when only running ones are left.
pub async fn bytes_are_counted_and_bounded<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = within_bytes(make, 350 * KIB).await;
    let heavy = || NewExecution {
        input_bytes: 100 * 1024,
        ..new_execution(None)
    };
    assert_eq!(store.stats().bytes, 0);

    // The input counts while the execution runs, and no longer once it has ended.
    let short = create(&*store, heavy()).await;
    let one = store.stats().bytes;
    assert!(
        (100 * KIB..110 * KIB).contains(&one),
        "the input counts: {one}"
    );
    run_to_success(&*store, short).await;
    assert!(store.stats().bytes < 10 * KIB, "{:?}", store.stats());

    // The output it streamed counts for as long as it is kept: 100 deltas of 1 KiB.
    let long = create(&*store, new_execution(None)).await;
    for payload in [routing(), attempt_started(1)] {
        store.append(long, payload).await.expect("legal append");
    }
    let kib = "x".repeat(1024);
    for _ in 0..100 {
        store
            .append(long, text(1, &kib))
            .await
            .expect("legal append");
    }
    store
        .append(long, completed(1, ""))
        .await
        .expect("legal append");
    let held = store.stats().bytes;
    assert!(
        (100 * KIB..130 * KIB).contains(&held),
        "output counts: {held}"
    );

    // Two running executions fit beside it; a third does not, and the terminal execution
    // that ended first makes room, then the next.
    let running = [
        create(&*store, heavy()).await,
        create(&*store, heavy()).await,
        create(&*store, heavy()).await,
    ];
    assert_eq!(
        store.get(short).await.unwrap_err(),
        StoreError::NotFound(short)
    );
    assert_eq!(
        store.get(long).await.unwrap_err(),
        StoreError::NotFound(long)
    );
    // Only running executions are left, and a fourth does not fit beside them.
    let err = store.create(heavy()).await.unwrap_err();
    assert!(matches!(err, StoreError::Full { .. }), "{err:?}");
    let stats = store.stats();
    assert!(stats.bytes <= 350 * KIB, "{stats:?}");
    assert_eq!(stats.executions, 3, "{stats:?}");
    for id in running {
        assert!(store.get(id).await.is_ok());
    }
}

/// Reading an execution keeps the store within its bytes. A store that keeps what it made
/// for a read (the memory store's view of an execution, whose output so far it holds) counts
/// it, and when that takes it over its bytes it lets the terminal executions that ended
/// first go, as an append does; the running execution read stays.
pub async fn a_read_keeps_the_store_within_its_bytes<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    let store = within_bytes(make, 100 * KIB).await;
    // Three executions with 25 KiB of output each, the last still running: together under
    // the bound, but not with a view of the running one's output beside them.
    let kib = "x".repeat(1024);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = create(&*store, new_execution(None)).await;
        for payload in [routing(), attempt_started(1)] {
            store.append(id, payload).await.expect("legal append");
        }
        for _ in 0..25 {
            store.append(id, text(1, &kib)).await.expect("legal append");
        }
        ids.push(id);
    }
    let running = ids[2];
    for &id in &ids[..2] {
        store
            .append(id, completed(1, ""))
            .await
            .expect("legal append");
    }
    let before = store.stats();
    assert!(before.bytes <= 100 * KIB, "the rule's sizes: {before:?}");
    for id in [running, ids[0], ids[1], running] {
        // Each read finds its execution, or (an ended one let go for a read before it)
        // not at all; the running one is always there.
        match store.get(id).await {
            Ok(view) => assert_eq!(view.id, id),
            Err(error) => {
                assert_ne!(id, running, "the running execution was let go");
                assert_eq!(error, StoreError::NotFound(id));
            }
        }
        let stats = store.stats();
        assert!(stats.bytes <= 100 * KIB, "after reading {id}: {stats:?}");
    }
}

/// A store bounded by `max_bytes` alone: room for 1 000 executions, kept for an hour.
async fn within_bytes<F, Fut>(make: F, max_bytes: u64) -> Arc<dyn EventStore>
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = Arc<dyn EventStore>>,
{
    make(StoreLimits {
        max_bytes,
        ..limits(1000, Duration::from_secs(3600))
    })
    .await
}
