//! A replica that stops renewing its lease, killed (SIGKILL) or paused (SIGSTOP) past it: a
//! survivor ends its executions `outcome_unknown` within the lease's bound, nothing is sent
//! to the provider again, and the paused one, back, appends nothing and serves new work.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use model_runtime::pb;
use rustix::process::Signal;
use tonic::Status;

use super::*;
use crate::common::postgres::{DropSchema, PgStore};
use crate::common::upstream::Upstream;
use crate::common::*;

/// The replicas' lease here: short, so a test waits a few seconds for a takeover.
const LEASE: Duration = Duration::from_secs(2);

/// How long after a replica stops a survivor has ended its executions, at most: its lease
/// lapses at most a lease after its last renewal (which was before it stopped); a survivor
/// sweeps at each of its renewals, every third of a lease; then one append, and a watch's
/// wake-up (a notification, or at worst a poll). The slack is for a busy machine.
fn takeover_bound() -> Duration {
    LEASE + LEASE / 3 + Duration::from_secs(3)
}

/// What each caller received from A, by execution.
type Received = Arc<Mutex<BTreeMap<usize, Vec<pb::ExecutionEvent>>>>;

/// Starts `n` executions on A through the upstream, each followed by a caller that records
/// what it receives; returns once each has received two deltas.
async fn running_on(
    a: &Replica,
    n: usize,
) -> (Received, Vec<tokio::task::JoinHandle<Option<Status>>>) {
    let received: Received = Arc::default();
    let mut callers = Vec::new();
    for i in 0..n {
        let (received, mut client) = (received.clone(), a.client.clone());
        callers.push(tokio::spawn(async move {
            let mut stream = client
                .execute(ask("chat", &format!("run-{i}")))
                .await
                .expect("execute on A")
                .into_inner();
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => received.lock().unwrap().entry(i).or_default().push(event),
                    Err(status) => return Some(status),
                }
            }
            None
        }));
    }
    tokio::time::timeout(LONG, async {
        while (0..n).any(|i| {
            received
                .lock()
                .unwrap()
                .get(&i)
                .is_none_or(|e| deltas(e) < 2)
        }) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("every execution streams on A");
    (received, callers)
}

/// Watches each execution on `on` from 0, all at once; each one's events and when its
/// terminal event arrived.
async fn ends_on(on: &Replica, ids: &[String]) -> Vec<(Vec<pb::ExecutionEvent>, Instant)> {
    let watchers: Vec<_> = ids
        .iter()
        .map(|id| {
            let (client, id) = (on.client.clone(), id.clone());
            tokio::spawn(async move {
                let events = watch_all(client, &id, 0).await;
                (events, Instant::now())
            })
        })
        .collect();
    let mut ends = Vec::new();
    for watcher in watchers {
        ends.push(watcher.await.unwrap());
    }
    ends
}

/// Each of `ends` ended `outcome_unknown`, within [`takeover_bound`] of `stopped`, with every
/// event the caller had received from A before it stopped.
fn ended_by_takeover(
    same: &mut Same,
    ends: &[(Vec<pb::ExecutionEvent>, Instant)],
    before: &BTreeMap<usize, Vec<pb::ExecutionEvent>>,
    stopped: Instant,
) {
    for (i, (events, at)) in ends.iter().enumerate() {
        assert_complete_sequence(events);
        let error = error_of(events);
        assert_eq!(error.code, "outcome_unknown", "execution {i}: {error:?}");
        assert_eq!(
            error.outcome(),
            pb::Outcome::Unknown,
            "execution {i}: {error:?}"
        );
        assert_eq!(events.last().unwrap().state(), pb::ExecutionState::Failed);
        let took = at.duration_since(stopped);
        assert!(
            took <= takeover_bound(),
            "execution {i} ended {took:?} after A stopped; the bound is {:?}",
            takeover_bound()
        );
        let seen = &before[&i];
        assert!(
            events.len() > seen.len(),
            "execution {i}: B has {events:?}, the caller received {seen:?} from A"
        );
        same.events(
            &events[..seen.len()],
            seen,
            &format!("execution {i}: B's watch from 0 vs what A's caller received"),
        );
        eprintln!("execution {i}: ended outcome_unknown {took:?} after A stopped");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_executions_end_outcome_unknown_on_a_survivor() {
    const RUNNING: usize = 4;
    let Some(url) = postgres_url() else { return };
    let upstream = Upstream::always(trickle()).await;
    let store = PgStore::new(LEASE, POLL);
    let _schema = DropSchema::new(&url, &store.schema);
    let mut replicas = replicas(2, &store.toml(&remote(&upstream.base_url())), &url).await;

    let (received, callers) = running_on(&replicas[0], RUNNING).await;
    let killed = Instant::now();
    replicas[0].kill();
    for caller in callers {
        let _ = within(caller).await;
    }
    let before = std::mem::take(&mut *received.lock().unwrap());
    let ids: Vec<String> = (0..RUNNING)
        .map(|i| before[&i][0].execution_id.clone())
        .collect();
    assert_eq!(upstream.requests().len(), RUNNING);

    let b = &replicas[1];
    let ends = ends_on(b, &ids).await;
    let mut same = Same::default();
    ended_by_takeover(&mut same, &ends, &before, killed);
    // B's poll and sweeps go on for a while: nothing is sent upstream again.
    tokio::time::sleep(LEASE).await;
    assert_eq!(upstream.requests().len(), RUNNING, "requests upstream");
    for (i, id) in ids.iter().enumerate() {
        let later = watch_all(b.client.clone(), id, 0).await;
        same.events(
            &later,
            &ends[i].0,
            &format!("execution {i}: B's watch from 0 later vs when it ended"),
        );
    }
    same.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_paused_past_its_lease_appends_nothing_when_it_resumes_and_serves_again() {
    const RUNNING: usize = 3;
    let Some(url) = postgres_url() else { return };
    let upstream = Upstream::always(trickle()).await;
    let store = PgStore::new(LEASE, POLL);
    let _schema = DropSchema::new(&url, &store.schema);
    let replicas = replicas(2, &store.toml(&remote(&upstream.base_url())), &url).await;
    let [a, b] = &replicas[..] else {
        unreachable!()
    };

    let (received, callers) = running_on(a, RUNNING).await;
    let stopped = Instant::now();
    a.signal(Signal::STOP);
    let before = received.lock().unwrap().clone();
    let ids: Vec<String> = (0..RUNNING)
        .map(|i| before[&i][0].execution_id.clone())
        .collect();
    let ends = ends_on(b, &ids).await;
    let mut same = Same::default();
    ended_by_takeover(&mut same, &ends, &before, stopped);

    // Three leases stopped, then on again: A's drivers find the deltas the upstream sent
    // meanwhile, and its lease lapsed.
    tokio::time::sleep((3 * LEASE).saturating_sub(stopped.elapsed())).await;
    a.signal(Signal::CONT);
    let resumed = Instant::now();
    let serving = a.until_ready(LONG).await;
    // A few seconds for A's drivers to try what they would append.
    tokio::time::sleep(2 * LEASE).await;
    eprintln!(
        "A serving again {serving:?} after it resumed; its log about the lease: {:?}",
        a.log().matching("lease")
    );
    for (i, id) in ids.iter().enumerate() {
        let ended = &ends[i].0;
        let on_b = watch_all(b.client.clone(), id, 0).await;
        same.events(
            &on_b,
            ended,
            &format!("execution {i}: B's watch from 0 after A resumed vs when it ended"),
        );
        let on_a = watch_all(a.client.clone(), id, 0).await;
        same.events(
            &on_a,
            ended,
            &format!("execution {i}: A's watch from 0 vs B's"),
        );
        let on_a = get(&mut a.client.clone(), id).await;
        let on_b = get(&mut b.client.clone(), id).await;
        same.views(&on_a, &on_b, &format!("execution {i}: A's view vs B's"));
    }
    // A's callers read on to the end B wrote.
    for (i, caller) in callers.into_iter().enumerate() {
        let error = tokio::time::timeout(LONG, caller)
            .await
            .expect("A's caller ends")
            .unwrap();
        let seen = received.lock().unwrap()[&i].clone();
        assert!(
            error.is_none(),
            "execution {i}: A's caller got {error:?} after {seen:?}"
        );
        same.events(
            &seen,
            &ends[i].0,
            &format!("execution {i}: what A's caller received vs B's watch from 0"),
        );
    }
    assert_eq!(upstream.requests().len(), RUNNING, "requests upstream");

    // A serves new work.
    let events = execute(&mut a.client.clone(), ask("echo", "still here")).await;
    assert_complete_sequence(&events);
    assert_eq!(text_of(&events), "still here");
    eprintln!("A served new work {:?} after it resumed", resumed.elapsed());
    same.finish();
}
