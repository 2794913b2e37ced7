//! The stores side by side: appends per second to the memory store and to the file store
//! (every append durable before it returns; concurrent writers share each fsync), with 1, 16
//! and 256 writers each on its own execution, and the file store's replay of 100k events.
//!
//! cargo bench --bench store
//!
//! The file store writes under `$STORE_BENCH_DIR` (default: the system's temporary
//! directory): point it at the disk a deployment would use, since what it measures is that
//! disk's `fdatasync`.

#![allow(
    clippy::disallowed_methods,
    reason = "a bench: it measures wall-clock time, and its tasks live for one iteration"
)]

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use model_runtime::config::{FileStoreConfig, StoreKey};
use model_runtime::execution::{
    Acceptance, AttemptStart, Delivery, EffectiveLimits, EventPayload, ExecutionId,
    ExecutionResult, FinishReason, Output, Priority, RoutingPlan,
};
use model_runtime::store::{
    Created, EventStore, FileStore, MemoryStore, NewExecution, Opened, StoreLimits,
};

/// Appends per writer in one measured round.
const APPENDS: usize = 64;

fn limits() -> StoreLimits {
    StoreLimits {
        max_executions: 100_000,
        max_bytes: 1 << 34,
        retention: Duration::from_secs(3600),
    }
}

fn key() -> StoreKey {
    StoreKey::parse(&[42u8; 32], "bench").unwrap_or_else(|e| panic!("{e}"))
}

fn directory() -> tempfile::TempDir {
    match std::env::var_os("STORE_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .unwrap_or_else(|e| panic!("a directory for the journal: {e}"))
}

fn open(dir: &std::path::Path) -> (Arc<FileStore>, Opened) {
    let config = FileStoreConfig {
        path: dir.to_owned(),
        keys: vec![key()],
        max_disk_bytes: 1 << 40,
    };
    FileStore::open(&config, limits()).unwrap_or_else(|e| panic!("open the file store: {e}"))
}

fn file_store(dir: &std::path::Path) -> Arc<FileStore> {
    open(dir).0
}

fn accepted() -> EventPayload {
    EventPayload::Accepted(Arc::new(Acceptance {
        ability: "chat".into(),
        policy: "main".into(),
        limits: EffectiveLimits {
            deadline: SystemTime::now() + Duration::from_secs(3600),
            max_attempts: 1,
            allow_fallback: false,
            retry_budget: Duration::from_secs(60),
            delivery: Delivery::Streamed,
            priority: Priority::Standard,
        },
    }))
}

/// A running execution, ready to stream text.
async fn running(store: &dyn EventStore) -> ExecutionId {
    let new = NewExecution {
        id: ExecutionId::new(),
        accepted: accepted(),
        labels: Arc::default(),
        idempotency: None,
        input_bytes: 0,
    };
    let Ok(Created::New(view)) = store.create(new).await else {
        panic!("create")
    };
    let start = [
        EventPayload::Routing(Arc::new(RoutingPlan {
            policy: "main".into(),
            required_capabilities: Vec::new(),
            targets: Vec::new(),
            ended_before_routing: None,
            tried_anyway: false,
        })),
        EventPayload::AttemptStarted(Arc::new(AttemptStart {
            attempt: 1,
            provider: "p".into(),
            model: "m".into(),
            started_at: SystemTime::now(),
        })),
    ];
    store
        .append_all(view.id, start.into())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    view.id
}

fn completed() -> EventPayload {
    EventPayload::Completed(Arc::new(ExecutionResult {
        output: Output::default(),
        finish_reason: FinishReason::Stop,
        provider: "p".into(),
        model: "m".into(),
        attempt: 1,
    }))
}

fn delta() -> EventPayload {
    EventPayload::TextDelta {
        attempt: 1,
        text: "a word ".into(),
    }
}

/// `writers` tasks append `APPENDS` deltas each, one append (and, on the file store, one
/// wait for durability) at a time; returns the time they took.
async fn round(store: Arc<dyn EventStore>, writers: usize) -> Duration {
    let mut ids = Vec::with_capacity(writers);
    for _ in 0..writers {
        ids.push(running(&*store).await);
    }
    let start = Instant::now();
    let tasks: Vec<_> = ids
        .into_iter()
        .map(|id| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..APPENDS {
                    store
                        .append(id, delta())
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap_or_else(|e| panic!("{e}"));
    }
    start.elapsed()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}

fn appends(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("append");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for writers in [1, 16, 256] {
        group.throughput(Throughput::Elements((writers * APPENDS) as u64));
        group.bench_function(format!("memory/{writers}_writers"), |b| {
            b.to_async(&rt).iter_custom(|iters| async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new(limits()));
                    total += round(store, writers).await;
                }
                total
            })
        });
        let dir = directory();
        let store: Arc<dyn EventStore> = file_store(dir.path());
        group.bench_function(format!("file/{writers}_writers"), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let store = store.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += round(store.clone(), writers).await;
                    }
                    total
                }
            })
        });
        store.close();
    }
    group.finish();
}

/// 1 000 executions of 100 events each (accepted, routing, attempt started, 96 text deltas
/// and the completion, appended 10 at a time, as a driver flushes a burst), then the journal is replayed
/// on open; the time is the replay's as the store reports it (not the lock, the new segment
/// or the start's compaction).
fn replay(c: &mut Criterion) {
    const EXECUTIONS: usize = 1000;
    let rt = runtime();
    let dir = directory();
    rt.block_on(async {
        let store = file_store(dir.path());
        let writers: Vec<_> = (0..EXECUTIONS)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    let id = running(&*store).await;
                    let mut left = 100 - 3;
                    while left > 0 {
                        let n = left.min(10);
                        left -= n;
                        let mut burst: Vec<EventPayload> = (0..n).map(|_| delta()).collect();
                        if left == 0 {
                            burst.pop();
                            burst.push(completed());
                        }
                        store
                            .append_all(id, burst)
                            .await
                            .unwrap_or_else(|e| panic!("{e}"));
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap_or_else(|e| panic!("{e}"));
        }
        store.close();
    });
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.throughput(Throughput::Elements((EXECUTIONS * 100) as u64));
    group.bench_function("100k_events", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (store, opened) = open(dir.path());
                assert_eq!(opened.events, (EXECUTIONS * 100) as u64, "{opened:?}");
                total += opened.replayed_in;
                store.close();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, appends, replay);
criterion_main!(benches);
