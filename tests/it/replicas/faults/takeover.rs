//! Takeovers under faults: the survivor's claim reset, or cut off right after it committed;
//! its endings' reads and writes failing; its connection stalled past its own lease in the
//! middle of a takeover; and 2000 executions taken over on a 3 s lease while the survivor's
//! own work goes on.

use std::time::{Duration, Instant};

use model_runtime::config::{AbilitySpec, Chunk, PolicySpec, ProviderSpec};

use super::check::{Callers, Db, Expect, holds, prompts};
use super::*;
use crate::common::fault_proxy::Fault;

/// `n` executions streaming on A (the upstream holds each open after a delta), then A
/// killed: what the callers received, and when A died.
async fn running_then_killed(pair: &mut Pair, name: &str, n: usize) -> (Callers, Instant) {
    let callers = Callers::default();
    let running = callers.start(&pair.a, "chat", &prompts(name, n));
    callers.until_deltas(1).await;
    pair.a.kill();
    let killed = Instant::now();
    for caller in running {
        let _ = tokio::time::timeout(LONG, caller).await;
    }
    (callers, killed)
}

/// Every execution of A's ended `outcome_unknown`, within [`bound`] of its death (and of
/// `also`, a fault's own time), whole and once-sent.
async fn ended_by_b(
    pair: &Pair,
    callers: &Callers,
    upstream: &Upstream,
    killed: Instant,
    also: Duration,
) {
    let db = pair.db().await;
    let limit = (bound() + also).saturating_sub(killed.elapsed());
    holds(
        &db,
        &pair.b,
        callers,
        Some(upstream),
        limit,
        &Expect::default(),
    )
    .await;
    eprintln!(
        "A's executions all ended {:?} after A was killed",
        killed.elapsed()
    );
    for (prompt, call) in callers.calls() {
        let id = &call.events[0].execution_id;
        let events = watch_all(pair.b.client.clone(), id, 0).await;
        assert_eq!(error_of(&events).code, "outcome_unknown", "{prompt}");
    }
}

/// The survivor's claim reset before it reached the server: the next round claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_reset_on_its_way_is_made_by_the_next_round() {
    let upstream = Upstream::always(stalled()).await;
    let Some(mut pair) = Pair::start(Proxied::B, &remote(&upstream.base_url())).await else {
        return;
    };
    let (callers, killed) = running_then_killed(&mut pair, "claim-reset", 8).await;
    // Armed the moment A's lease lapses: the next round of B's is the one that claims it.
    pair.db().await.until_lapsed().await;
    pair.proxy.arm("claim", Fault::Reset);
    pair.proxy.until_fired("claim", LONG).await;
    ended_by_b(&pair, &callers, &upstream, killed, Duration::ZERO).await;
}

/// The survivor cut off from the database for 1.2 s right after its claim committed: what
/// it claimed is its own, unfinished; the next round once it is back ends it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_cut_off_right_after_its_claim_ends_what_it_claimed() {
    let upstream = Upstream::always(stalled()).await;
    let Some(mut pair) = Pair::start(Proxied::B, &remote(&upstream.base_url())).await else {
        return;
    };
    let (callers, killed) = running_then_killed(&mut pair, "claim-cut", 30).await;
    let cut = Duration::from_millis(1200);
    // Armed the moment A's lease lapses: the next round of B's is the one that claims it.
    let db = pair.db().await;
    db.until_lapsed().await;
    pair.proxy.arm("claim", Fault::CutAfter(cut));
    pair.proxy.until_fired("claim", LONG).await;
    ended_by_b(&pair, &callers, &upstream, killed, cut).await;
}

/// The survivor's reads of what it ends reset, and the answer to the statement of its
/// endings lost: the next round reads again, and the endings are stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endings_whose_reads_or_answer_fail_are_stored_once() {
    let upstream = Upstream::always(stalled()).await;
    let Some(mut pair) = Pair::start(Proxied::B, &remote(&upstream.base_url())).await else {
        return;
    };
    pair.proxy.arm("end-rows", Fault::Reset);
    // B runs nothing of its own: its first append is the endings of A's executions.
    pair.proxy.arm("append", Fault::DropAnswer);
    let (callers, killed) = running_then_killed(&mut pair, "end", 8).await;
    pair.proxy.until_fired("end-rows", LONG).await;
    pair.proxy.until_fired("append", LONG).await;
    ended_by_b(&pair, &callers, &upstream, killed, Duration::ZERO).await;
}

/// The survivor's connections stall past its own lease just after it claimed a dead
/// replica's executions: it never takes over its own registration (it registers again, and
/// a round takes the old one over like any other), and everything ends, nothing orphaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_stalled_past_its_own_lease_mid_takeover_leaves_nothing_running() {
    // B's own four stream for eight seconds, across the stall; A's are held open.
    let upstream = Upstream::start(|n| {
        if n < 4 {
            deltas_every(80, Duration::from_millis(100))
        } else {
            stalled()
        }
    })
    .await;
    let Some(mut pair) = Pair::start(Proxied::B, &remote(&upstream.base_url())).await else {
        return;
    };
    // B's own: cut off past its lease, B may end them, or (having taken its own old
    // registration over) drive them on. Either way they end.
    let own = Callers::default();
    let own_running = own.start(&pair.b, "chat", &prompts("own", 4));
    own.until_deltas(1).await;
    let (callers, killed) = running_then_killed(&mut pair, "stalled", 30).await;
    let stall = LEASE + Duration::from_secs(1);
    let db = pair.db().await;
    db.until_lapsed().await;
    pair.proxy.arm("claim", Fault::StallAfter(stall));
    pair.proxy.until_fired("claim", LONG).await;
    db.until_all_ended((bound() + stall + Duration::from_secs(8)).saturating_sub(killed.elapsed()))
        .await;
    eprintln!("everything ended {:?} after A was killed", killed.elapsed());
    for caller in own_running {
        let _ = tokio::time::timeout(LONG, caller).await;
    }
    let mut all = callers.calls();
    all.extend(own.calls());
    for (prompt, call) in all {
        let id = &call.events[0].execution_id;
        let events = watch_all(pair.b.client.clone(), id, 0).await;
        assert_complete_sequence(&events);
        assert_eq!(call.events[..], events[..call.events.len()], "{prompt}");
    }
    assert_eq!(
        db.replicas().await,
        1,
        "B, registered again, and nobody else"
    );
    assert_eq!(upstream.requests().len(), 34, "one request per execution");
}

/// How many executions the big takeover ends.
const MANY: usize = 2000;

/// `hang` on a model that never answers, as many at once as the test starts; `long` on a model
/// that streams for a while (B's healthy work).
fn many() -> ConfigBuilder {
    let long = script(|s| {
        s.reply = Some(WORDS.repeat(3));
        s.chunk = Chunk::Word;
        s.delta_interval_ms = 100;
    });
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .max_executions(10_000)
        .provider(
            "scripted",
            ProviderSpec::scripted()
                .max_concurrency(4096)
                .scripted_model("stuck", &["text"], script(|s| s.hang = true))
                .scripted_model("long", &["text"], long),
        )
        .policy("hang", PolicySpec::new(&["scripted/stuck"]))
        .policy("long", PolicySpec::new(&["scripted/long"]))
        .ability("hang", AbilitySpec::new("hang"))
        .ability("long", AbilitySpec::new("long"))
}

/// 2000 executions of a killed replica taken over on a 3 s lease by a survivor 2 ms from its
/// database: all end within the bound, and the survivor's own executions, streaming all the
/// while, complete (its lease is never late).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_of_2000_executions_ends_them_in_time_and_kills_nothing_healthy() {
    let Some(mut pair) = Pair::start(Proxied::B, &many()).await else {
        return;
    };
    pair.proxy.delay(Duration::from_millis(1));
    let db = pair.db().await;
    submit_many(&pair.a, MANY).await;
    running(&db, MANY).await;
    let healthy = Callers::default();
    let names = prompts("healthy", 20);
    let streaming = healthy.start(&pair.b, "long", &names);
    healthy.until_deltas(1).await;

    pair.a.kill();
    let limit = bound() + Duration::from_secs(10);
    let took = db.until_all_ended(limit).await;
    eprintln!(
        "{MANY} executions taken over and ended {took:?} after A was killed (lease {LEASE:?})"
    );
    for caller in streaming {
        let _ = tokio::time::timeout(LONG, caller).await;
    }
    let expect = Expect {
        completed: names,
        callers_whole: true,
    };
    holds_for(&db, &pair.b, &healthy, &expect).await;
    assert!(
        lease_kept(&pair.b),
        "B lost its lease during the takeover: {:?}",
        pair.b.log().matching("lease")
    );
}

/// `n` executions of `hang` submitted on `replica`, 100 at a time.
async fn submit_many(replica: &Replica, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let calls: Vec<_> = chunk
            .iter()
            .map(|i| {
                let mut client = replica.client.clone();
                let request = ask("hang", &format!("many-{i}"));
                async move { client.submit(request).await.expect("submit").into_inner() }
            })
            .collect();
        futures_util::future::join_all(calls).await;
    }
}

/// Waits until `n` executions are running (their attempts started).
async fn running(db: &Db, n: usize) {
    tokio::time::timeout(LONG, async {
        loop {
            let running = db.executions().await.iter().filter(|e| e.2 == 2).count();
            if running >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every execution runs");
}

/// [`holds`] for the callers' executions only (reading each of 2000 would be slow), and a
/// sample of the others.
async fn holds_for(db: &Db, reader: &Replica, callers: &Callers, expect: &Expect) {
    let mut sample = 0;
    for (id, _, _, ended) in db.executions().await {
        assert!(ended, "{id} has not ended");
        if sample < 50 {
            let events = watch_all(reader.client.clone(), &id, 0).await;
            assert_complete_sequence(&events);
            sample += 1;
        }
    }
    for (prompt, call) in callers.calls() {
        assert!(call.error.is_none(), "{prompt}: {:?}", call.error);
        assert_complete_sequence(&call.events);
        let stored = watch_all(reader.client.clone(), &call.events[0].execution_id, 0).await;
        assert_eq!(call.events, stored, "{prompt}: received vs stored");
        if expect.completed.contains(&prompt) {
            assert_eq!(
                stored.last().unwrap().r#type,
                "execution.completed",
                "{prompt} on the healthy survivor"
            );
        }
    }
}
