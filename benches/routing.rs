//! The routing hot path beside its floor: planning a 10-target policy, and admission
//! (acquire + release of a permit) uncontended and contended, next to a bare tokio Semaphore
//! doing the same.
//!
//! cargo bench --features bench --bench routing   (`routing` is public only with `bench`)

#![allow(
    clippy::disallowed_methods,
    reason = "a bench: it measures wall-clock time, and its tasks live for one iteration"
)]

use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use model_runtime::Config;
use model_runtime::execution::Priority;
use model_runtime::routing::{Admission, plan};
use tokio::sync::Semaphore;

fn ten_target_config() -> Config {
    let mut toml = String::from("[providers.p]\nadapter = \"scripted\"\n");
    for i in 0..10 {
        let caps = if i % 3 == 0 {
            "\"text\", \"vision\""
        } else {
            "\"text\""
        };
        write!(
            toml,
            "[[providers.p.models]]\nname = \"m{i}\"\ncapabilities = [{caps}, \"tools\"]\n"
        )
        .ok();
    }
    let targets: Vec<String> = (0..10).map(|i| format!("\"p/m{i}\"")).collect();
    write!(
        toml,
        "[policies.main]\ntargets = [{}]\n[abilities.chat]\npolicy = \"main\"\n",
        targets.join(", ")
    )
    .ok();
    Config::from_toml(&toml).unwrap_or_else(|e| panic!("bench config: {e}"))
}

fn planning(c: &mut Criterion) {
    let config = ten_target_config();
    let policy = &config.policies["main"];
    let required: BTreeSet<String> = ["text".to_owned(), "vision".to_owned()].into();
    c.bench_function("plan/10_targets", |b| {
        b.iter(|| plan(&config, policy, std::hint::black_box(&required)))
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}

fn uncontended(c: &mut Criterion) {
    let rt = runtime();
    let gate = Admission::new(64, [1024; 3], Duration::from_secs(2));
    c.bench_function("admission/uncontended", |b| {
        b.to_async(&rt)
            .iter(|| async { drop(gate.acquire(Priority::Standard).await) })
    });
    let semaphore = Arc::new(Semaphore::new(64));
    c.bench_function("baseline_semaphore/uncontended", |b| {
        b.to_async(&rt)
            .iter(|| async { drop(semaphore.clone().acquire_owned().await) })
    });
}

/// `tasks` tasks each take and release a permit `rounds` times through `acquire`, with
/// fewer permits than tasks; returns the wall time.
async fn contend<F, Fut>(tasks: usize, rounds: usize, acquire: F) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let acquire = acquire.clone();
            tokio::spawn(async move {
                for _ in 0..rounds {
                    acquire().await;
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for h in handles {
        h.await.ok();
    }
    start.elapsed()
}

fn contended(c: &mut Criterion) {
    const TASKS: usize = 16;
    const ROUNDS: usize = 64;
    let rt = runtime();
    let gate = Arc::new(Admission::new(4, [64; 3], Duration::from_secs(2)));
    c.bench_function("admission/contended_16_tasks_4_permits", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let gate = gate.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let gate = gate.clone();
                    total += contend(TASKS, ROUNDS, move || {
                        let gate = gate.clone();
                        async move { drop(gate.acquire(Priority::Standard).await) }
                    })
                    .await;
                }
                total
            }
        })
    });
    let semaphore = Arc::new(Semaphore::new(4));
    c.bench_function("baseline_semaphore/contended_16_tasks_4_permits", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let semaphore = semaphore.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let semaphore = semaphore.clone();
                    total += contend(TASKS, ROUNDS, move || {
                        let semaphore = semaphore.clone();
                        async move { drop(semaphore.acquire_owned().await) }
                    })
                    .await;
                }
                total
            }
        })
    });
}

criterion_group!(benches, planning, uncontended, contended);
criterion_main!(benches);
