//! Each statement class of the store meets a fault once, on the replica that runs it, and the
//! invariants hold after: create, append, renew, cancel, listen/notify, capacity, retention
//! (claim and end are the takeover's: `takeover.rs`).

use std::time::Duration;

use model_runtime::pb;
use tonic::Code;

use super::check::{Callers, Expect, holds, prompts};
use super::*;
use crate::common::fault_proxy::Fault;

/// `n` callers of `chat` on A, on the steady upstream: once each streams, `kind` meets
/// `fault`; then the invariants hold, every caller got its whole execution, and every
/// execution completed (nothing here may end one).
async fn one_fault_on_a(name: &str, kind: &str, fault: Fault) {
    let upstream = Upstream::always(steady()).await;
    let Some(pair) = Pair::start(Proxied::A, &remote(&upstream.base_url())).await else {
        return;
    };
    let callers = Callers::default();
    let all = prompts(name, 6);
    let running = callers.start(&pair.a, "chat", &all);
    callers.until_deltas(1).await;
    pair.proxy.arm(kind, fault);
    pair.proxy.until_fired(kind, LONG).await;
    all_completed(&pair, &callers, running, &upstream, all, &pair.a).await;
}

/// A caller's task, to its end within [`LONG`].
async fn within_long(task: tokio::task::JoinHandle<()>) {
    tokio::time::timeout(LONG, task)
        .await
        .expect("the caller ends")
        .unwrap();
}

/// Calls `Execute` on `replica` for `prompt` (as `Callers::start`), asking again as a gateway
/// does while the call is refused as `UNAVAILABLE` before anything was accepted: a replica
/// whose statement's answer was just lost counts its database unreachable until it hears
/// from it again. At most ten times, 100 ms apart; the last call is the one recorded.
async fn until_accepted(callers: &Callers, replica: &Replica, prompt: &str) {
    for _ in 0..10 {
        for caller in callers.start(replica, "chat", &[prompt.to_owned()]) {
            within_long(caller).await;
        }
        let call = &callers.calls()[prompt];
        match &call.error {
            Some(status) if status.code() == Code::Unavailable && call.events.is_empty() => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => return,
        }
    }
}

/// An append whose statement committed but whose answer was lost is looked up, not sent
/// again, and the execution goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_whose_answer_was_lost_is_stored_once_and_the_execution_goes_on() {
    one_fault_on_a("append-lost", "append", Fault::DropAnswer).await;
}

/// An append held past the store's patience (the statement's timeout and a second): its
/// connection is closed, the append asked again on another, and nothing is lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_that_stalls_is_given_up_on_its_connection_and_stored_once() {
    let hold = STATEMENT_TIMEOUT + Duration::from_secs(3);
    one_fault_on_a("append-stall", "append", Fault::Hold(hold)).await;
}

/// A renewal whose answer is lost costs nothing: it is tried again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_whose_answer_was_lost_keeps_the_lease() {
    one_fault_on_a("renew-lost", "renew", Fault::DropAnswer).await;
}

/// A renewal reset before it reached the server, the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_reset_on_its_way_keeps_the_lease() {
    one_fault_on_a("renew-reset", "renew", Fault::Reset).await;
}

/// A follower's read that fails: the follower reads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_of_positions_that_fails_loses_nothing() {
    one_fault_on_a("positions", "positions", Fault::Reset).await;
}

/// A database slow by 0.2 s each way: every statement takes longer, and the replica keeps its
/// 3 s lease (its renewal waits behind nothing) and ends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_database_costs_no_lease() {
    let upstream = Upstream::always(steady()).await;
    let Some(pair) = Pair::start(Proxied::A, &remote(&upstream.base_url())).await else {
        return;
    };
    pair.proxy.delay(Duration::from_millis(200));
    let callers = Callers::default();
    let all = prompts("slow-db", 6);
    let running = callers.start(&pair.a, "chat", &all);
    // Four leases of a slow database.
    tokio::time::sleep(4 * LEASE).await;
    pair.proxy.delay(Duration::ZERO);
    all_completed(&pair, &callers, running, &upstream, all, &pair.a).await;
}

/// A create that committed but whose answer was lost: it is looked up before the caller is
/// answered, and driven. The caller's stream is whole, the provider gets one request, and a
/// retry under the same key (on another replica) reaches the same execution, ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_was_lost_is_driven_and_its_key_attaches() {
    let upstream = Upstream::always(steady()).await;
    let Some(pair) = Pair::start(Proxied::A, &remote(&upstream.base_url())).await else {
        return;
    };
    pair.proxy.arm("create", Fault::DropAnswer);
    let callers = Callers::default();
    let all = prompts("create-lost", 4);
    let running = callers.start(&pair.a, "chat", &all);
    all_completed(&pair, &callers, running, &upstream, all.clone(), &pair.a).await;
    assert_eq!(pair.proxy.fired("create"), 1);
    for prompt in &all {
        let retried = within(pair.b.client.clone().submit(pb::ExecuteRequest {
            idempotency_key: prompt.clone(),
            ..ask("chat", prompt)
        }))
        .await
        .unwrap_or_else(|s| panic!("{prompt}: a retry with its key on B: {s:?}"))
        .into_inner();
        let first = &callers.calls()[prompt].events[0];
        assert_eq!(
            retried.execution_id, first.execution_id,
            "{prompt}: one execution"
        );
        assert_eq!(retried.state(), pb::ExecutionState::Succeeded, "{prompt}");
    }
}

/// A create without an idempotency key goes to its batch from the caller's thread; its
/// statement's answer is lost. It is looked up, found and driven: each caller completes once,
/// the store holds one execution per caller, and the provider hears each prompt once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_without_a_key_whose_answer_was_lost_is_driven_once() {
    let upstream = Upstream::always(steady()).await;
    let Some(pair) = Pair::start(Proxied::A, &remote(&upstream.base_url())).await else {
        return;
    };
    pair.proxy.arm("create", Fault::DropAnswer);
    let callers = Callers::default();
    let all = prompts("create-lost-unkeyed", 4);
    for caller in callers.start_without_keys(&pair.a, "chat", &all) {
        within_long(caller).await;
    }
    assert_eq!(pair.proxy.fired("create"), 1);
    assert!(pair.proxy.seen("landed") >= 1, "the create was looked up");
    let expect = Expect {
        completed: Vec::new(),
        callers_whole: true,
    };
    let db = pair.db().await;
    holds(&db, &pair.b, &callers, Some(&upstream), bound(), &expect).await;
    assert_eq!(
        db.executions().await.len(),
        all.len(),
        "one execution a caller"
    );
    let requests = upstream.requests();
    for (prompt, call) in callers.calls() {
        let last = call.events.last().map(|e| e.r#type.as_str());
        assert_eq!(last, Some("execution.completed"), "{prompt}");
        let quoted = format!("\"{prompt}\"");
        let sent = (requests.iter())
            .filter(|r| String::from_utf8_lossy(&r.body).contains(&quoted))
            .count();
        assert_eq!(sent, 1, "{prompt}: requests sent to the provider");
    }
    assert!(lease_kept(&pair.a), "A lost its lease");
}

/// The same through the capacity path: a full store makes room in a transaction whose commit
/// answer is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_that_made_room_and_lost_its_commit_answer_is_driven() {
    // Full of ended executions: the next create makes room, and its commit's answer is lost.
    room_with_a_lost_answer(4, 4, "commit", "room", false).await;
}

/// Room made ahead of the creates (a store of 100 brought to 100) whose letting go of the
/// executions that ended first loses its answer, before the next create asks: nothing it began
/// is kept, and the creates that follow make room themselves. The store's counts may have had
/// room made ahead while it filled (they count a create from before it is written): the
/// callers go on until the armed statement has run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_made_ahead_whose_answer_was_lost_loses_nothing() {
    room_with_a_lost_answer(100, 99, "let-go-oldest", "ahead", true).await;
}

/// A store of `size` executions holding `filled` ended ones (callers of `chat` on A); then
/// the next `kind` statement loses its answer while more callers run, one after the other:
/// two, or (`ahead`: it is lost in the background) until it has run, and one more. One that
/// arrives while the lost answer has the replica count its database unreachable is refused
/// as `UNAVAILABLE` before anything is accepted, and asks again as a gateway does. Each
/// completes once, with one request upstream, and the store stays within its bound.
async fn room_with_a_lost_answer(size: usize, filled: usize, kind: &str, name: &str, ahead: bool) {
    let upstream = Upstream::always(quick()).await;
    let config = remote(&upstream.base_url()).max_executions(size);
    let Some(pair) = Pair::start(Proxied::A, &config).await else {
        return;
    };
    let callers = Callers::default();
    for caller in callers.start(&pair.a, "chat", &prompts(&format!("{name}-before"), filled)) {
        within_long(caller).await;
    }
    pair.proxy.arm(kind, Fault::DropAnswer);
    // Two callers; `ahead`, as many as it takes for the armed statement to run (room made ahead
    // lets go of a twentieth of the store, in the background), then one more.
    let mut then = Vec::new();
    let mut fired_after = None; // how many callers had gone when it was seen to run
    for prompt in prompts(&format!("{name}-after"), 2 + 20 * usize::from(ahead)) {
        until_accepted(&callers, &pair.a, &prompt).await;
        then.push(prompt);
        if ahead
            && fired_after.is_none()
            && pair.proxy.fired_within(kind, Duration::from_secs(2)).await
        {
            fired_after = Some(then.len());
        }
        let enough = if ahead {
            fired_after.is_some_and(|n| then.len() > n)
        } else {
            then.len() == 2
        };
        if enough {
            break;
        }
    }
    pair.proxy.until_fired(kind, LONG).await;
    assert_eq!(
        pair.proxy.fired(kind),
        1,
        "the {kind} answer was dropped once"
    );
    let db = pair.db().await;
    db.until_all_ended(bound()).await;
    let requests = upstream.requests();
    for prompt in &then {
        let call = &callers.calls()[prompt];
        assert!(call.error.is_none(), "{prompt}: {:?}", call.error);
        assert_complete_sequence(&call.events);
        assert_eq!(call.events.last().unwrap().r#type, "execution.completed");
        let quoted = format!("\"{prompt}\"");
        let sent = requests
            .iter()
            .filter(|r| String::from_utf8_lossy(&r.body).contains(&quoted))
            .count();
        assert_eq!(sent, 1, "{prompt}: requests upstream");
    }
    let held = db.executions().await.len();
    assert!(held <= size, "{held} executions held in a store of {size}");
}

/// A count of the store's capacity that fails: the next poll counts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_of_capacity_that_fails_loses_nothing() {
    one_fault_on_a("count", "count", Fault::DropAnswer).await;
}

/// Retention's sweep and a let-go whose answers are lost: the executions still leave, and
/// every one that was in the store is whole until it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_whose_answers_are_lost_still_lets_executions_go() {
    let upstream = Upstream::always(quick()).await;
    let config = remote(&upstream.base_url()).retention(Duration::from_secs(1));
    let Some(pair) = Pair::start(Proxied::A, &config).await else {
        return;
    };
    pair.proxy.arm("retention", Fault::DropAnswer);
    pair.proxy.arm("let-go", Fault::DropAnswer);
    let callers = Callers::default();
    let all = prompts("retention", 6);
    for prompt in &all {
        until_accepted(&callers, &pair.a, prompt).await;
    }
    for call in callers.calls().values() {
        assert_complete_sequence(&call.events);
    }
    pair.proxy.until_fired("retention", LONG).await;
    let db = pair.db().await;
    tokio::time::timeout(LONG, async {
        while !db.executions().await.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every execution leaves the store after its retention");
    for call in callers.calls().values() {
        let id = &call.events[0].execution_id;
        let status = within(
            pair.b
                .client
                .clone()
                .get_execution(pb::GetExecutionRequest {
                    execution_id: id.clone(),
                }),
        )
        .await
        .unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{id}: {status:?}");
    }
}

/// A cancel on B of A's execution whose statement committed but whose answer was lost: B
/// makes the request again (it is the same whenever it is made) and answers its caller, the
/// owner cancels, and a cancel asked again answers with the cancelled execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_whose_answer_was_lost_still_reaches_the_owner() {
    let upstream = Upstream::always(stalled()).await;
    let Some(pair) = Pair::start(Proxied::B, &remote(&upstream.base_url())).await else {
        return;
    };
    let callers = Callers::default();
    let all = prompts("cancel-lost", 1);
    let running = callers.start(&pair.a, "chat", &all);
    callers.until_deltas(1).await;
    let id = callers.calls()[&all[0]].events[0].execution_id.clone();
    pair.proxy.arm("cancel", Fault::DropAnswer);
    let request = pb::CancelExecutionRequest {
        execution_id: id.clone(),
        reason: "cancelled from B".into(),
    };
    let first = within(pair.b.client.clone().cancel_execution(request.clone())).await;
    assert_eq!(pair.proxy.fired("cancel"), 1);
    assert!(first.is_ok(), "the caller is answered: {first:?}");
    for caller in running {
        within_long(caller).await;
    }
    let again = within(pair.b.client.clone().cancel_execution(request))
        .await
        .expect("a cancel asked again")
        .into_inner();
    assert_eq!(again.state(), pb::ExecutionState::Cancelled, "{again:?}");
    holds(
        &pair.db().await,
        &pair.b,
        &callers,
        Some(&upstream),
        bound(),
        &Expect::default(),
    )
    .await;
    let events = &callers.calls()[&all[0]].events;
    assert_eq!(
        events.last().unwrap().state(),
        pb::ExecutionState::Cancelled
    );
}

/// B's notification connection (and every other) cut, and B unable to reconnect for a
/// second, while its watchers follow A's executions: they read on from where they were when
/// the database answers again, and each receives every event, with no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_ride_out_a_cut_of_their_replicas_connections() {
    let upstream = Upstream::always(steady()).await;
    let Some(pair) = Pair::start(Proxied::B, &remote(&upstream.base_url())).await else {
        return;
    };
    let callers = Callers::default();
    let all = prompts("blip", 6);
    let running = callers.start(&pair.a, "chat", &all);
    callers.until_deltas(1).await;
    let watchers: Vec<_> = callers
        .calls()
        .into_values()
        .map(|call| {
            let (mut client, id) = (pair.b.client.clone(), call.events[0].execution_id.clone());
            tokio::spawn(async move {
                let stream = client
                    .watch(pb::WatchRequest {
                        execution_id: id.clone(),
                        after_sequence: 0,
                    })
                    .await
                    .expect("watch on B")
                    .into_inner();
                (id, drain(stream).await)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(150)).await;
    pair.proxy.refuse(true);
    pair.proxy.cut();
    tokio::time::sleep(Duration::from_secs(1)).await;
    pair.proxy.refuse(false);
    all_completed(&pair, &callers, running, &upstream, all, &pair.b).await;
    for watcher in watchers {
        let (id, (events, error)) = tokio::time::timeout(LONG, watcher).await.unwrap().unwrap();
        assert!(
            error.is_none(),
            "{id}: B's watch across the blip ended with {error:?} after {}",
            events.len()
        );
        assert_complete_sequence(&events);
    }
}
