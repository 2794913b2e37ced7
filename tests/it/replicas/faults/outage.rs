//! The database away for half a lease, as a restart takes it: the replica keeps its lease
//! (its renewal is asked again every quarter second until it lapses), its running executions
//! go on, and nothing is ended.

use std::time::{Duration, Instant};

use super::check::{Callers, Db, Expect, holds, prompts};
use super::*;
use crate::common::postgres::PrivatePostgres;

/// The default lease, and half of it.
const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// A reply of 120 deltas a tenth of a second apart: it outlasts the outage.
fn long() -> Behaviour {
    deltas_every(120, Duration::from_millis(100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_of_half_a_lease_ends_nothing() {
    let Some(mut pg) = PrivatePostgres::start() else {
        return;
    };
    let upstream = Upstream::always(long()).await;
    let store = PgStore::new(DEFAULT_LEASE, POLL);
    let replica = Replica::start(
        "A",
        &store.toml(&remote(&upstream.base_url())),
        &[(URL_ENV, &pg.url())],
    )
    .await;
    let callers = Callers::default();
    let all = prompts("outage", 6);
    let running = callers.start(&replica, "chat", &all);
    callers.until_deltas(2).await;

    let stopped = Instant::now();
    pg.stop("fast");
    // Started again (which takes a while of its own) half a lease after it stopped.
    tokio::time::sleep((DEFAULT_LEASE / 2).saturating_sub(Duration::from_millis(800))).await;
    pg.restart();
    eprintln!("the database was away {:?}", stopped.elapsed());

    for caller in running {
        tokio::time::timeout(LONG, caller)
            .await
            .expect("a caller ends")
            .unwrap();
    }
    let db = Db::connect(&pg.url(), &store.schema).await;
    let expect = Expect {
        completed: all,
        callers_whole: true,
    };
    holds(&db, &replica, &callers, Some(&upstream), LONG, &expect).await;
    assert!(
        lease_kept(&replica),
        "the replica lost its lease to an outage of half of it: {:?}",
        replica.log().matching("lease")
    );
}

/// The lease of the test below: the executions outlast the outage and a lease after it.
const ALIGNED_LEASE: Duration = Duration::from_secs(6);

/// The same outage where it hurts most: the database goes away just before a renewal is due,
/// so two renewals in a row meet it (at a third of a lease apart, both within half a lease).
/// Renewals asked again every quarter second get through the moment it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_of_half_a_lease_just_before_a_renewal_ends_nothing() {
    let upstream = Upstream::always(long()).await;
    let config = remote(&upstream.base_url());
    let Some(pair) = Pair::start_with(Proxied::A, &config, |store| {
        store.lease = ALIGNED_LEASE;
    })
    .await
    else {
        return;
    };
    let callers = Callers::default();
    let all = prompts("aligned", 6);
    let running = callers.start(&pair.a, "chat", &all);
    callers.until_deltas(2).await;
    // A renewal just passed: the next is due a third of a lease later.
    let renewals = pair.proxy.seen("renew");
    tokio::time::timeout(LONG, async {
        while pair.proxy.seen("renew") == renewals {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("A renews its lease");
    tokio::time::sleep(ALIGNED_LEASE / 3 - Duration::from_millis(300)).await;
    pair.proxy.refuse(true);
    pair.proxy.cut();
    tokio::time::sleep(ALIGNED_LEASE / 2).await;
    pair.proxy.refuse(false);
    all_completed(&pair, &callers, running, &upstream, all, &pair.a).await;
}
