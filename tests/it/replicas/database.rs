//! A replica and its database: NOT_SERVING while the database is away (and before it first
//! answered), SERVING again when it is back, without a restart.

use std::time::{Duration, Instant};

use model_runtime::pb;
use tonic::{Code, Status};
use tonic_health::pb::health_check_response::ServingStatus;

use super::*;
use crate::common::postgres::{PgStore, PrivatePostgres, free_port};
use crate::common::*;

/// `Execute` on `replica`, expected to be refused: the status.
async fn refused(replica: &Replica, request: pb::ExecuteRequest) -> Status {
    match within(replica.client.clone().execute(request)).await {
        Err(status) => status,
        Ok(stream) => {
            let (events, error) = drain(stream.into_inner()).await;
            error.unwrap_or_else(|| {
                panic!("Execute was served while the database was down: {events:?}")
            })
        }
    }
}

/// The last test's lease, the default, and its database outage, shorter than the lease (as a
/// restart of the database usually is): the replica keeps its lease through it.
const RESTART_LEASE: Duration = Duration::from_secs(10);
const OUTAGE: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_goes_not_serving_while_its_database_restarts_and_serves_again_after() {
    let Some(mut pg) = PrivatePostgres::start() else {
        return;
    };
    let store = PgStore::new(RESTART_LEASE, POLL);
    let replica = Replica::start("R", &store.toml(&scripted()), &[(URL_ENV, &pg.url())]).await;
    let mut client = replica.client.clone();

    let acknowledged = execute(&mut client, ask("echo", "before the restart")).await;
    assert_complete_sequence(&acknowledged);
    let id = acknowledged[0].execution_id.clone();
    let view = get(&mut client, &id).await;
    // One running when the database goes: the slow model, three words streamed.
    let mut running = within(client.execute(ask("chat", "across the outage")))
        .await
        .expect("execute")
        .into_inner();
    let mut across = read_until(&mut running, |events| deltas(events) >= 3).await;

    pg.stop("fast");
    let stopped = Instant::now();
    let down = replica
        .until_health(ServingStatus::NotServing, Duration::from_secs(15))
        .await;
    let status = refused(&replica, ask("echo", "during the outage")).await;
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    tokio::time::sleep(OUTAGE.saturating_sub(stopped.elapsed())).await;
    pg.restart();
    let up = replica.until_health(ServingStatus::Serving, LONG).await;
    let back = Instant::now();
    eprintln!("NOT_SERVING {down:?} after the database stopped; SERVING {up:?} after it started");

    // The same process serves new work, and what it acknowledged reads back as it was.
    let after = execute(&mut client, ask("echo", "after the restart")).await;
    assert_complete_sequence(&after);
    assert_eq!(text_of(&after), "after the restart");
    let mut same = Same::default();
    let stored = watch_all(client.clone(), &id, 0).await;
    same.events(
        &stored,
        &acknowledged,
        "after the restart vs its Execute stream before",
    );
    let stored = get(&mut client, &id).await;
    same.views(&stored, &view, "its view after the restart vs before");

    // The one that was running ends, and its caller reads it to its end: on its stream, or
    // (if that ended with an error while the store was unreachable) on a watch from where it
    // left off. The bound is three of the replica's leases after the database came back.
    let deadline = back + 3 * RESTART_LEASE;
    let (rest, end) = drain_for(running, deadline.saturating_duration_since(Instant::now())).await;
    across.extend(rest);
    let across_id = across[0].execution_id.clone();
    let last = loop {
        let view = get(&mut client, &across_id).await;
        if view.error.is_some() || view.result.is_some() {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "{across_id}, running when the database stopped, has not ended {:?} after the \
             database came back: its state is {:?} at sequence {}; its caller received {:?}, \
             and its stream: {end:?}",
            back.elapsed(),
            view.state(),
            view.last_sequence,
            types(&across),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let cursor = across.last().unwrap().sequence;
    let mut all = across.clone();
    all.extend(watch_all(client.clone(), &across_id, cursor).await);
    assert_complete_sequence(&all);
    assert_eq!(all.last().unwrap().state(), last.state());
    eprintln!(
        "{across_id}, running across the outage, ended {:?}; its caller's stream: {end:?}",
        last.error.map_or("completed".to_owned(), |e| e.code)
    );
    same.finish();
}

/// Starts of `serve` in the test below: the moment it looks at is a few milliseconds long.
const STARTS: usize = 5;

/// Health is the readiness a load balancer or Kubernetes reads: a replica whose store has not
/// reached its database yet refuses new work, so its health must say NOT_SERVING from the
/// first answer on, not only once the server has first looked at its store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_is_not_serving_before_its_database_has_answered() {
    // Nothing listens there: the store never starts.
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?sslmode=disable",
        free_port()
    );
    let store = PgStore::new(RESTART_LEASE, POLL);
    for start in 0..STARTS {
        let replica = Replica::spawn("R", &store.toml(&scripted()), &[(URL_ENV, &url)]).await;
        let health = replica.health().await;
        let state = metadata(&mut replica.client.clone()).await.state();
        assert_eq!(state, pb::RuntimeState::Unavailable);
        assert_eq!(
            health.as_ref().ok(),
            Some(&ServingStatus::NotServing),
            "start {start}: the first health check after `model-runtime serving`, on a store \
             that never reached its database (the runtime says {state:?}): {health:?}; log:\n{}",
            replica.log().tail(10)
        );
    }
}
