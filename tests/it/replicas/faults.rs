//! Replicas under the faults a production database and network bring. One replica talks to
//! PostgreSQL through the tests' fault proxy (`common::fault_proxy`), which resets, holds,
//! delays, refuses, or drops the answer to a statement chosen by its kind; the database
//! itself is stopped and started; thousands of executions are taken over at once. After each
//! fault the checker (`check.rs`) holds the store to what it promises:
//! - every execution ends within the bound: none stays unfinished;
//! - its events are gap-free from 1 with one terminal event, last;
//! - every event a caller received is the stored one at its sequence, time and all;
//! - the provider got at most one request per execution, one for each that began an attempt;
//! - no execution of a healthy replica was ended by a takeover (it completes).
//!
//! `statements`: each statement class of the store (create, append, claim, end, renew, cancel,
//! listen/notify, capacity, retention) meets a fault once. `outage`: the database away for
//! half a lease, and followers across a blip. `takeover`: 2000 executions taken over on a 3 s
//! lease with nothing healthy killed; a survivor whose connection stalls past its own lease
//! mid-takeover; a survivor cut off right after its claim committed.

mod check;
mod outage;
mod statements;
mod takeover;

use std::time::Duration;

use super::*;
use crate::common::fault_proxy::FaultProxy;
use crate::common::postgres::{DropSchema, PgStore};
use crate::common::upstream::Upstream;
use crate::common::*;

/// The replicas' lease in these tests.
const LEASE: Duration = Duration::from_secs(3);

/// The server-side limit of a statement here: the store waits a second more for an answer,
/// then closes the connection (a statement held longer than this is a stall to it).
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long after a fault (or a replica's death) every execution has ended, at most: a lease
/// for a dead replica's registration to lapse, a third for the next round of the takeover,
/// and slack for a busy machine.
fn bound() -> Duration {
    LEASE + LEASE / 3 + Duration::from_secs(6)
}

/// A reply of eight deltas a tenth of a second apart: an execution streams for a while.
fn steady() -> Behaviour {
    deltas_every(8, Duration::from_millis(100))
}

/// Waits for the callers `running`, then holds the invariants, with every caller whole and
/// every one of `completed` completed; and `replica` kept its lease all along.
async fn all_completed(
    pair: &Pair,
    callers: &check::Callers,
    running: Vec<tokio::task::JoinHandle<()>>,
    upstream: &Upstream,
    completed: Vec<String>,
    replica: &Replica,
) {
    for caller in running {
        tokio::time::timeout(LONG, caller)
            .await
            .expect("a caller ends")
            .unwrap();
    }
    let expect = check::Expect {
        completed,
        callers_whole: true,
    };
    check::holds(
        &pair.db().await,
        &pair.b,
        callers,
        Some(upstream),
        bound(),
        &expect,
    )
    .await;
    assert!(
        lease_kept(replica),
        "replica {} lost its lease: {:?}",
        replica.name,
        replica.log().matching("lease")
    );
}

/// Whether `replica` kept its lease all along (it logs when it loses it).
fn lease_kept(replica: &Replica) -> bool {
    replica
        .log()
        .matching("this replica's lease lapsed")
        .is_empty()
}

/// Which replicas reach the database through the proxy.
#[derive(Clone, Copy, PartialEq)]
enum Proxied {
    A,
    B,
}

/// Two replicas on a fresh schema, one of them through the proxy, on `config`.
struct Pair {
    proxy: FaultProxy,
    a: Replica,
    b: Replica,
    url: String,
    store: PgStore,
    _schema: DropSchema,
}

impl Pair {
    /// `None` (after a line saying why) without the tests' PostgreSQL.
    async fn start(proxied: Proxied, config: &ConfigBuilder) -> Option<Self> {
        Self::start_with(proxied, config, |_| {}).await
    }

    async fn start_with(
        proxied: Proxied,
        config: &ConfigBuilder,
        edit: impl FnOnce(&mut PgStore),
    ) -> Option<Self> {
        let url = postgres_url()?;
        let mut store = PgStore::new(LEASE, POLL);
        store.statement_timeout = Some(STATEMENT_TIMEOUT);
        edit(&mut store);
        let schema = DropSchema::new(&url, &store.schema);
        let proxy = FaultProxy::start(&url).await;
        let toml = store.toml(config);
        let through = proxy.url();
        let (a_url, b_url) = match proxied {
            Proxied::A => (through.as_str(), url.as_str()),
            Proxied::B => (url.as_str(), through.as_str()),
        };
        let a = Replica::start("A", &toml, &[(URL_ENV, a_url)]).await;
        let b = Replica::start("B", &toml, &[(URL_ENV, b_url)]).await;
        Some(Self {
            proxy,
            a,
            b,
            url,
            store,
            _schema: schema,
        })
    }

    /// The database as the test reads it (not through the proxy).
    async fn db(&self) -> check::Db {
        check::Db::connect(&self.url, &self.store.schema).await
    }
}
