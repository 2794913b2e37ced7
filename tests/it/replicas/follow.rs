//! One execution seen from every replica: a watch on another replica from a cursor, a cancel
//! on one that does not own it, and one idempotency key raced on two.

use std::collections::BTreeMap;
use std::time::Duration;

use model_runtime::pb;
use tonic::Status;

use super::*;
use crate::common::postgres::{DropSchema, PgStore};
use crate::common::upstream::Upstream;
use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_on_another_replica_follows_the_owners_events_from_its_cursor() {
    let Some(url) = postgres_url() else { return };
    let store = PgStore::new(Duration::from_secs(10), POLL);
    let _schema = DropSchema::new(&url, &store.schema);
    let replicas = replicas(3, &store.toml(&scripted()), &url).await;
    let [a, b, c] = &replicas[..] else {
        unreachable!()
    };

    // On A: the first events, three words in.
    let mut stream = within(a.client.clone().execute(ask("chat", "watch me")))
        .await
        .expect("execute on A")
        .into_inner();
    let mut from_a = read_until(&mut stream, |events| deltas(events) >= 3).await;
    let k = from_a.last().unwrap().sequence;
    let id = from_a[0].execution_id.clone();
    assert!(!is_terminal(from_a.last().unwrap()), "{from_a:?}");

    // On B, from the cursor, while A still streams (17 words, 1.7 s, are to come).
    let on_b = tokio::spawn({
        let (client, id) = (b.client.clone(), id.clone());
        async move { watch_all(client, &id, k).await }
    });
    let (rest, error) = drain(stream).await;
    assert!(error.is_none(), "A's Execute stream ended with {error:?}");
    from_a.extend(rest);
    assert_complete_sequence(&from_a);
    assert_eq!(text_of(&from_a), WORDS);
    let on_b = on_b.await.unwrap();
    let mut same = Same::default();
    same.events(
        &on_b,
        &from_a[usize::try_from(k).unwrap()..],
        &format!("B's watch after {k} vs A's Execute stream"),
    );

    // Once it ended: C reads it all, and the three views are one.
    let on_c = watch_all(c.client.clone(), &id, 0).await;
    same.events(&on_c, &from_a, "C's watch from 0 vs A's Execute stream");
    let view = get(&mut a.client.clone(), &id).await;
    assert_eq!(view.state(), pb::ExecutionState::Succeeded, "{view:?}");
    assert_eq!(view.last_sequence, from_a.last().unwrap().sequence);
    let on_b = get(&mut b.client.clone(), &id).await;
    same.views(&on_b, &view, "B's view vs A's");
    let on_c = get(&mut c.client.clone(), &id).await;
    same.views(&on_c, &view, "C's view vs A's");
    same.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_on_a_replica_that_does_not_own_the_execution_reaches_its_owner() {
    let Some(url) = postgres_url() else { return };
    let upstream = Upstream::always(stalled()).await;
    let store = PgStore::new(Duration::from_secs(10), POLL);
    let _schema = DropSchema::new(&url, &store.schema);
    let replicas = replicas(3, &store.toml(&remote(&upstream.base_url())), &url).await;
    let [a, b, c] = &replicas[..] else {
        unreachable!()
    };

    // On A: running, its output committed, the upstream holding the stream open.
    let mut stream = within(a.client.clone().execute(ask("chat", "cancel me")))
        .await
        .expect("execute on A")
        .into_inner();
    let mut from_a = read_until(&mut stream, |events| deltas(events) >= 1).await;
    let id = from_a[0].execution_id.clone();
    assert_eq!(upstream.requests().len(), 1);

    // On C, which does not own it.
    let answer = within(
        c.client
            .clone()
            .cancel_execution(pb::CancelExecutionRequest {
                execution_id: id.clone(),
                reason: "cancelled from C".into(),
            }),
    )
    .await;
    let view = match answer {
        Ok(view) => view.into_inner(),
        Err(status) => panic!("CancelExecution of A's running {id} on C: {status:?}"),
    };
    assert_eq!(view.state(), pb::ExecutionState::Cancelled, "{view:?}");
    assert_eq!(
        view.error.as_ref().map(|e| e.code.as_str()),
        Some("cancelled"),
        "{view:?}"
    );

    // A's caller sees the end; A and B store the same events; the provider call was cut.
    let (rest, error) = drain(stream).await;
    assert!(error.is_none(), "A's Execute stream ended with {error:?}");
    from_a.extend(rest);
    assert_complete_sequence(&from_a);
    let last = from_a.last().unwrap();
    assert_eq!(last.state(), pb::ExecutionState::Cancelled, "{last:?}");
    assert_eq!(error_of(&from_a).code, "cancelled");
    let mut same = Same::default();
    let on_a = watch_all(a.client.clone(), &id, 0).await;
    same.events(&on_a, &from_a, "A's watch from 0 vs A's Execute stream");
    let on_b = watch_all(b.client.clone(), &id, 0).await;
    same.events(&on_b, &from_a, "B's watch from 0 vs A's Execute stream");
    let on_b = get(&mut b.client.clone(), &id).await;
    same.views(&on_b, &view, "B's view vs C's answer");
    // The owner cut the provider call; nothing was sent again.
    within(upstream.hung_up.notified()).await;
    assert_eq!(upstream.requests().len(), 1, "one request upstream");
    same.finish();
}

/// Rounds of the race, each with a fresh key.
const ROUNDS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idempotency_key_raced_on_two_replicas_makes_one_execution() {
    let Some(url) = postgres_url() else { return };
    let upstream = Upstream::always(quick()).await;
    let store = PgStore::new(Duration::from_secs(10), POLL);
    let _schema = DropSchema::new(&url, &store.schema);
    let replicas = replicas(2, &store.toml(&remote(&upstream.base_url())), &url).await;
    let [a, b] = &replicas[..] else {
        unreachable!()
    };

    let mut ids = Vec::new();
    let mut same = Same::default();
    for round in 0..ROUNDS {
        let request = pb::ExecuteRequest {
            idempotency_key: format!("race-{round}"),
            ..ask("chat", &format!("race-{round:03}"))
        };
        // Submit in even rounds, Execute in odd ones: both name the execution, and Execute on
        // the replica that lost the race follows the winner's execution to its end.
        let (mut to_a, mut to_b) = (a.client.clone(), b.client.clone());
        let (on_a, on_b) = if round % 2 == 0 {
            let (x, y) = tokio::join!(to_a.submit(request.clone()), to_b.submit(request.clone()));
            let id = |r: Result<tonic::Response<pb::Execution>, Status>, on: &str| {
                r.unwrap_or_else(|s| panic!("round {round}: submit on {on}: {s:?}"))
                    .into_inner()
                    .execution_id
            };
            (id(x, "A"), id(y, "B"))
        } else {
            let (x, y) = tokio::join!(to_a.execute(request.clone()), to_b.execute(request.clone()));
            let mut events = Vec::new();
            for (answer, on) in [(x, "A"), (y, "B")] {
                let stream = answer
                    .unwrap_or_else(|s| panic!("round {round}: execute on {on}: {s:?}"))
                    .into_inner();
                let (seen, error) = drain(stream).await;
                assert!(
                    error.is_none(),
                    "round {round} on {on}: {error:?} after {seen:?}"
                );
                assert_complete_sequence(&seen);
                events.push(seen);
            }
            same.events(
                &events[1],
                &events[0],
                &format!("round {round}: B's Execute stream vs A's"),
            );
            (
                events[0][0].execution_id.clone(),
                events[1][0].execution_id.clone(),
            )
        };
        assert_eq!(on_a, on_b, "round {round}: one execution for one key");
        ids.push(on_a);
    }

    for (round, id) in ids.iter().enumerate() {
        let view = within(async {
            loop {
                let view = get(&mut b.client.clone(), id).await;
                if view.result.is_some() || view.error.is_some() {
                    return view;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert_eq!(
            view.state(),
            pb::ExecutionState::Succeeded,
            "round {round}: {view:?}"
        );
    }
    let mut per_round = BTreeMap::new();
    for request in upstream.requests() {
        let body = String::from_utf8_lossy(&request.body).into_owned();
        let round = (0..ROUNDS)
            .find(|r| body.contains(&format!("race-{r:03}")))
            .unwrap_or_else(|| panic!("a request of no round: {body}"));
        *per_round.entry(round).or_insert(0) += 1;
    }
    let once: BTreeMap<usize, i32> = (0..ROUNDS).map(|r| (r, 1)).collect();
    assert_eq!(per_round, once, "requests upstream per round");
    same.finish();
}
