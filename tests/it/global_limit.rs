//! `max_concurrency` across replicas (issue 25): three real `serve` processes share one
//! OpenAI upstream that counts the requests it is answering at once. With the Redis limiter
//! the provider's 4 permits are leased in Redis, so 200 executions spread over the three never
//! put more than 4 requests in flight upstream; without it each replica admits its own 4
//! (the same harness sees more than 4, so it can see a breach). A Redis that goes away fails
//! closed: the limited target's attempt is rejected and the policy's fallback serves; when
//! Redis is back, the limited provider serves again without a restart.
//!
//! The first test needs `MODEL_RUNTIME_TEST_REDIS_URL` (`common::services`); the last starts
//! a private `redis-server` on a Unix socket, so it can kill it.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::counting::{Counting, REPLY};
use common::process::{Guard, start_server_env};
use common::redis::PrivateRedis;
use common::*;
use futures_util::StreamExt;
use model_runtime::Config;
use model_runtime::config::{
    AbilitySpec, ConfigBuilder, LimiterSpec, OnUnavailable, PolicySpec, ProviderSpec,
};
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::transport::Channel;

/// The variable each `serve` reads the limiter's Redis URL from.
const URL_ENV: &str = "MODEL_RUNTIME_LIMITER_REDIS_URL";

/// The provider's permits, across all replicas when the limiter is on.
const PERMITS: usize = 4;

const REPLICAS: usize = 3;

const EXECUTIONS: usize = 200;

/// How long the upstream holds each reply open, so calls overlap.
const HOLD: Duration = Duration::from_millis(30);

/// The bound on one execution: 200 of them through 4 permits take ~1.5 s in all, so this is
/// far beyond any wait a working limiter causes, and still ends a test that hangs.
const LONG: Duration = Duration::from_secs(60);

/// The limiter the tests configure: a key of this run's own, so tests running at once never
/// share permits, and a lease long beyond any call here yet short, since a new key (or one
/// Redis lost) gives its first permit a third of the lease after it is made.
fn redis_limiter(key: &str) -> LimiterSpec {
    LimiterSpec::redis(URL_ENV)
        .key(key)
        .lease(Duration::from_secs(3))
        .timeout(Duration::from_millis(500))
        .on_unavailable(OnUnavailable::FailClosed)
}

/// A key no other run uses.
fn unique_key() -> String {
    format!("model-runtime-test-{}", uuid::Uuid::new_v4())
}

/// One `openai` provider `remote` with [`PERMITS`] (a queue for every execution) and one
/// attempt per execution, so a rejection would fail an execution rather than hide.
fn remote(upstream: &str, limiter: Option<LimiterSpec>) -> ConfigBuilder {
    let mut provider = ProviderSpec::openai(upstream)
        .max_concurrency(PERMITS as u32)
        .queue_capacity(256)
        .model("m", &["text"]);
    if let Some(limiter) = limiter {
        provider = provider.limiter(limiter);
    }
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider("remote", provider)
        .policy("remote", PolicySpec::new(&["remote/m"]).max_attempts(1))
        .ability("chat", AbilitySpec::new("remote"))
}

/// A `serve` child on `config`, with `env`; the file holds its config while it runs.
struct Replica {
    _process: Guard,
    _config: tempfile::NamedTempFile,
    addr: String,
}

fn replica(config: &ConfigBuilder, env: &[(&str, &str)]) -> Replica {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), config.to_toml()).unwrap();
    let path = file.path().to_str().unwrap();
    let (process, addr) = start_server_env(&["--config", path], env, WAIT);
    Replica {
        _process: process,
        _config: file,
        addr,
    }
}

/// `prompt-i` on `chat`, with a deadline that never cuts a queued execution short here.
fn prompt(i: usize) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        deadline: Some(deadline_in(LONG)),
        ..request("chat", &format!("prompt-{i}"))
    }
}

/// Runs `Execute` to its end, bounded by [`LONG`].
async fn run(
    mut client: ModelRuntimeClient<Channel>,
    request: pb::ExecuteRequest,
) -> Vec<pb::ExecutionEvent> {
    tokio::time::timeout(LONG, async move {
        let mut stream = client
            .execute(request)
            .await
            .expect("execute accepted")
            .into_inner();
        let mut events = Vec::new();
        while let Some(item) = stream.next().await {
            events.push(item.expect("stream item"));
        }
        events
    })
    .await
    .expect("the execution ends within its bound")
}

/// [`EXECUTIONS`] executions at once, round-robin over `replicas`; each must complete with
/// the upstream's text, and the upstream must have seen each exactly once.
async fn spread(replicas: &[Replica], upstream: &Counting) {
    let mut channels = Vec::new();
    for replica in replicas {
        channels.push(connect(&replica.addr).await);
    }
    let started = Instant::now();
    let calls: Vec<_> = (0..EXECUTIONS)
        .map(|i| {
            let client = ModelRuntimeClient::new(channels[i % channels.len()].clone());
            tokio::spawn(run(client, prompt(i)))
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let events = call.await.unwrap();
        assert_complete_sequence(&events);
        assert_eq!(
            events.last().unwrap().r#type,
            "execution.completed",
            "execution {i}: {:?}",
            events.last()
        );
        assert_eq!(text_of(&events), REPLY, "execution {i}");
    }
    let prompts = upstream.prompts();
    let distinct: BTreeSet<usize> = prompts.iter().copied().collect();
    assert_eq!(prompts.len(), EXECUTIONS, "requests upstream");
    assert_eq!(distinct, (0..EXECUTIONS).collect(), "each prompt once");
    eprintln!(
        "{EXECUTIONS} executions over {} replicas in {:?}, peak in flight upstream {}",
        replicas.len(),
        started.elapsed(),
        upstream.peak()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_limiter_holds_max_concurrency_across_three_replicas() {
    let Some(url) = redis_answering() else { return };
    let upstream = Counting::start(HOLD).await;
    let config = remote(&upstream.base_url, Some(redis_limiter(&unique_key())));
    let replicas: Vec<_> = (0..REPLICAS)
        .map(|_| replica(&config, &[(URL_ENV, &url)]))
        .collect();
    spread(&replicas, &upstream).await;
    assert!(
        upstream.peak() <= PERMITS,
        "{} requests in flight upstream, {PERMITS} permits across the replicas",
        upstream.peak()
    );
}

/// The control: the same load without the limiter goes over the provider's 4, up to 4 per
/// replica. It shows the harness sees a breach when there is one, so the test above passing
/// means the limit held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_limiter_each_replica_admits_its_own_permits() {
    let upstream = Counting::start(HOLD).await;
    let config = remote(&upstream.base_url, None);
    let replicas: Vec<_> = (0..REPLICAS).map(|_| replica(&config, &[])).collect();
    spread(&replicas, &upstream).await;
    let peak = upstream.peak();
    assert!(peak <= PERMITS * REPLICAS, "{peak} in flight upstream");
    assert!(
        peak > PERMITS,
        "three replicas of 4 permits each, busy for ~0.5 s, never overlapped: peak {peak}"
    );
}

/// `limited` (the upstream, behind the Redis limiter) first, `spare` (scripted) second.
fn with_fallback(upstream: &str, key: &str) -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "limited",
            ProviderSpec::openai(upstream)
                .max_concurrency(PERMITS as u32)
                .queue_capacity(16)
                .model("m", &["text"])
                .limiter(redis_limiter(key)),
        )
        .provider("spare", ProviderSpec::scripted().model("echo", &["text"]))
        .policy("main", PolicySpec::new(&["limited/m", "spare/echo"]))
        .ability("chat", AbilitySpec::new("main"))
}

/// Runs `prompt-i` to completion; its attempts, as `GetExecution` reports them.
async fn attempts(client: &mut ModelRuntimeClient<Channel>, i: usize) -> Vec<pb::Attempt> {
    let events = run(client.clone(), prompt(i)).await;
    assert_complete_sequence(&events);
    assert_eq!(
        events.last().unwrap().r#type,
        "execution.completed",
        "{:?}",
        events.last()
    );
    get(client, &events[0].execution_id).await.attempts
}

fn served_by(attempts: &[pb::Attempt]) -> &str {
    &attempts.last().expect("an attempt").provider
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_fails_closed_to_the_fallback_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut redis) = PrivateRedis::start(dir.path()).await else {
        return;
    };
    let upstream = Counting::start(Duration::ZERO).await;
    let config = with_fallback(&upstream.base_url, &unique_key());
    let server = replica(&config, &[(URL_ENV, &redis.url())]);
    let mut client = ModelRuntimeClient::new(connect(&server.addr).await);

    // Redis up: the limited provider serves.
    let first = attempts(&mut client, 0).await;
    assert_eq!(served_by(&first), "limited", "{first:?}");
    assert_eq!(first.len(), 1, "{first:?}");

    // Redis gone: no permit can be leased, so the limited target is refused without being
    // called, and the fallback serves.
    redis.kill();
    for i in 1..=3 {
        let attempts = attempts(&mut client, i).await;
        assert_eq!(attempts.len(), 2, "{attempts:?}");
        let refused = &attempts[0];
        assert_eq!(refused.provider, "limited");
        assert!(!refused.admitted, "{refused:?}");
        let error = refused.error.as_ref().expect("the refused attempt's error");
        assert_eq!(error.code, "admission_rejected", "{error:?}");
        assert_eq!(served_by(&attempts), "spare", "{attempts:?}");
        assert!(attempts[1].error.is_none(), "{attempts:?}");
    }
    assert_eq!(
        upstream.prompts(),
        vec![0],
        "the upstream saw a refused attempt"
    );

    // Redis back on the same socket: the same `serve` leases permits again. It may take a
    // reconnection or two, so executions run until one is served by `limited`.
    redis.restart().await;
    let recovered = within(async {
        for i in 4.. {
            let attempts = attempts(&mut client, i).await;
            if served_by(&attempts) == "limited" {
                return i;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        unreachable!()
    })
    .await;
    assert_eq!(upstream.prompts(), vec![0, recovered]);
}

/// Redis restored from a snapshot older than its newest permits, in place (`DEBUG RELOAD`:
/// the server and its connections stay, its data goes back to the last save), as after a
/// failover that lost the newest writes: the set comes back short of the attempts running on
/// it, with its marks of birth intact. It settles again before it gives a permit (its
/// generation is behind what the replicas saw), so the replicas' running attempts are
/// renewed into it first and the queued ones wait: the provider never sees more than the
/// limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restored_from_a_snapshot_gives_no_permit_before_the_running_ones_count() {
    let dir = tempfile::tempdir().unwrap();
    let Some(redis) = PrivateRedis::start(dir.path()).await else {
        return;
    };
    let upstream = Counting::start(Duration::from_secs(4)).await;
    let config = remote(&upstream.base_url, Some(redis_limiter(&unique_key())));
    let replicas: Vec<_> = (0..2)
        .map(|_| replica(&config, &[(URL_ENV, &redis.url())]))
        .collect();
    let mut clients = Vec::new();
    for replica in &replicas {
        clients.push(ModelRuntimeClient::new(connect(&replica.addr).await));
    }
    let until_in_flight = |n: usize| {
        let upstream = &upstream;
        async move {
            within(async {
                while upstream.in_flight() < n {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await;
        }
    };
    let start = |i: usize| tokio::spawn(run(clients[i % 2].clone(), prompt(i)));
    // Two running when Redis saves; two more after, filling the four permits; four queued.
    let mut calls: Vec<_> = (0..2).map(start).collect();
    until_in_flight(2).await;
    redis.save().await;
    calls.extend((2..4).map(start));
    until_in_flight(4).await;
    calls.extend((4..8).map(start));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Back to the snapshot: two of the four running permits are in it.
    redis.reload().await;
    for call in calls {
        let events = call.await.unwrap();
        assert_complete_sequence(&events);
        assert_eq!(text_of(&events), REPLY, "{:?}", events.last());
    }
    assert!(
        upstream.peak() <= PERMITS,
        "{} requests in flight upstream after Redis went back to its snapshot, {PERMITS} \
         permits across the replicas",
        upstream.peak()
    );
}
