//! The PostgreSQL store against a real server (`MODEL_RUNTIME_TEST_POSTGRES_URL`; without it
//! these skip with a line naming it, and fail under `CI=true`). Each store gets a schema of
//! its own, so tests run side by side on one database.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::PostgresStore;
use crate::config::{PostgresStoreConfig, Secret};
use crate::execution::fixtures::{attempt_started, failed, routing, text, usage};
use crate::execution::{ErrorCode, ExecutionId, ExecutionState};
use crate::store::conformance::{limits, new_execution};
use crate::store::{Created, EventStore, StoreLimits};

const URL_ENV: &str = "MODEL_RUNTIME_TEST_POSTGRES_URL";

/// The server's URL, or `None` after saying why the test does not run.
pub(super) fn url() -> Option<String> {
    match std::env::var(URL_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and {URL_ENV} is not set"
            );
            eprintln!("skipped: {URL_ENV} is not set");
            None
        }
    }
}

/// The config of a fresh schema on the test server: small pool, short lease and poll. A URL
/// that does not choose `sslmode` gets `disable`: a test server's certificate (Debian's
/// snakeoil one) is not one the store would trust.
pub(super) fn options(url: &str, schema: &str) -> PostgresStoreConfig {
    let url = if url.contains("sslmode") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&sslmode=disable")
    } else {
        format!("{url}?sslmode=disable")
    };
    PostgresStoreConfig {
        url: Secret::new(url),
        url_env: URL_ENV.into(),
        schema: schema.into(),
        pool_size: 4,
        connect_timeout: Duration::from_secs(5),
        acquire_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(10),
        lease: Duration::from_secs(3),
        poll_interval: POLL,
    }
}

/// The driver's settings of `config`, for a client of a test's own.
fn connect_config(config: &PostgresStoreConfig) -> tokio_postgres::Config {
    super::Options::of(config)
        .expect("a PostgreSQL URL")
        .connect
}

/// A schema name no other test uses, with the time it was made (so old ones can go).
pub(super) fn fresh_schema() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).expect("random bytes");
    let tag: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("mr_test_{secs}_{tag}")
}

/// Drops the test schemas made over an hour ago (earlier runs' leftovers).
async fn drop_old_schemas(url: &str) {
    let Ok((client, connection)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await else {
        return;
    };
    let connection = tokio::spawn(connection);
    let cutoff = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        .saturating_sub(3600);
    if let Ok(rows) = client
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'mr\\_test\\_%'",
            &[],
        )
        .await
    {
        for row in rows {
            let name: String = row.get(0);
            let made = name
                .split('_')
                .nth(2)
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(u64::MAX);
            if made < cutoff {
                let _ = client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                    .await;
            }
        }
    }
    drop(client);
    let _ = connection.await;
}

/// A fresh store within `limits`.
pub(super) async fn store(limits: StoreLimits) -> Arc<dyn EventStore> {
    let url = url().expect("guarded by `ready`");
    drop_old_schemas(&url).await;
    PostgresStore::connect(&options(&url, &fresh_schema()), limits)
        .await
        .expect("the store connects")
}

fn ready() -> bool {
    url().is_some()
}

mod conformance {
    crate::event_store_conformance!(super::store, if super::ready);
}

mod answers;
mod lease;
mod lingering;
mod room;
mod runs;

/// Two replicas on one fresh schema within `limits`: `poll` is how often each looks for
/// what it was not told.
async fn replicas_of(
    limits: StoreLimits,
    poll: Duration,
) -> Option<(Arc<PostgresStore>, Arc<PostgresStore>)> {
    let url = url()?;
    let schema = fresh_schema();
    let mut options = options(&url, &schema);
    options.poll_interval = poll;
    let a = PostgresStore::connect(&options, limits).await.unwrap();
    let b = PostgresStore::connect(&options, limits).await.unwrap();
    Some((a, b))
}

async fn pair(poll: Duration) -> Option<(Arc<PostgresStore>, Arc<PostgresStore>)> {
    replicas_of(
        crate::store::conformance::limits(1000, Duration::from_secs(3600)),
        poll,
    )
    .await
}

/// Two stores on one fresh schema, as two replicas' (for the runtime's tests); `None`, after
/// a line saying why, when no server is configured.
pub(crate) async fn replicas(
    limits: StoreLimits,
) -> Option<(Arc<dyn EventStore>, Arc<dyn EventStore>)> {
    let (a, b) = replicas_of(limits, POLL).await?;
    Some((a, b))
}

/// Waits until `follower` (of another replica) is woken to position `at`: perhaps more than
/// once, as a wake-up says "read again", not what changed. Panics after 5 s.
async fn woken_to(follower: &mut crate::store::Follower, at: u64) {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            follower.changes().mark_seen();
            if follower.position().0 >= at {
                return;
            }
            follower.changes().changed().await.unwrap();
        }
    })
    .await
    .expect("woken by the notification");
}

async fn created(store: &PostgresStore, key: Option<(&str, u128)>) -> ExecutionId {
    match store.create(new_execution(key)).await.unwrap() {
        Created::New(view) => view.id,
        Created::Existing(view) => panic!("existing: {view:?}"),
    }
}

/// How often the tests' stores poll, unless a test says otherwise.
const POLL: Duration = Duration::from_millis(200);

/// A store of 100 executions on a fresh schema.
async fn of_100() -> Option<Arc<PostgresStore>> {
    of_100_polled(POLL).await
}

/// [`of_100`], polling every `poll`: each poll sums the counts again.
async fn of_100_polled(poll: Duration) -> Option<Arc<PostgresStore>> {
    let url = url()?;
    let limits = limits(100, Duration::from_secs(3600));
    let mut options = options(&url, &fresh_schema());
    options.poll_interval = poll;
    Some(PostgresStore::connect(&options, limits).await.unwrap())
}

/// Creates and ends `n` executions, in order.
async fn ended(store: &PostgresStore, n: usize) -> Vec<ExecutionId> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let id = created(store, None).await;
        store
            .append(id, failed(ErrorCode::Cancelled))
            .await
            .unwrap();
        ids.push(id);
    }
    ids
}

/// A follower on one replica wakes on the other's appends by notification: the poll is far
/// too slow to be what woke it.
#[tokio::test]
async fn a_follower_wakes_on_another_replicas_appends() {
    let Some((a, b)) = pair(Duration::from_secs(60)).await else {
        return;
    };
    let id = created(&a, None).await;
    let mut follower = b.follow(id).await.unwrap();
    let owners = a.follow(id).await.unwrap();
    for payload in [routing(), attempt_started(1), text(1, "hi")] {
        let at = a.append(id, payload).await.unwrap().sequence;
        woken_to(&mut follower, at).await;
    }
    let events = follower.read(0, usize::MAX).await.unwrap();
    assert_eq!(events.len(), 4);
    // The owner's follower reads its own appends from memory: the same events, time and all.
    assert_eq!(owners.read(1, usize::MAX).await.unwrap(), events[1..]);
    assert_eq!(b.get(id).await.unwrap(), a.get(id).await.unwrap());
}

/// A schema a version-1 binary made (a row per event) is upgraded in place when a newer
/// replica starts, and its executions read as they were written.
#[tokio::test]
async fn a_version_1_schema_is_upgraded_and_reads_as_written() {
    let Some(url) = url() else {
        return;
    };
    let schema = fresh_schema();
    let (mut client, connection) = connect_config(&options(&url, &schema))
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    super::schema::migrate_to(&mut client, &schema, 1)
        .await
        .unwrap();
    let id = ExecutionId::new();
    let payloads = [
        crate::execution::fixtures::accepted(),
        routing(),
        attempt_started(1),
        failed(ErrorCode::Cancelled),
    ];
    let s = super::schema::quote(&schema);
    client
        .execute(
            &format!(
                "INSERT INTO {s}.executions (id, labels, owner, owner_epoch, state, committed, \
                 stopping, last_sequence, bytes, input_bytes, ended_at) \
                 VALUES ($1, '{{}}', $1, 1, 4, false, false, 4, 0, 0, $2)"
            ),
            &[&super::uuid(id), &super::rows::micros(SystemTime::now())],
        )
        .await
        .unwrap();
    for (i, (payload, state)) in payloads.iter().zip([0i16, 1, 2, 4]).enumerate() {
        client
            .execute(
                &format!(
                    "INSERT INTO {s}.events (execution_id, sequence, time, state, payload) \
                     VALUES ($1, $2, 0, $3, $4)"
                ),
                &[
                    &super::uuid(id),
                    &(i as i64 + 1),
                    &state,
                    // As a version-1 binary wrote them: each payload's JSON.
                    &crate::store::file::codec::as_json(payload),
                ],
            )
            .await
            .unwrap();
    }
    drop(client);
    let _ = connection.await;
    let store = PostgresStore::connect(
        &options(&url, &schema),
        crate::store::conformance::limits(1000, Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    let read: Vec<_> = every_event(&store, id)
        .await
        .into_iter()
        .map(|e| e.payload)
        .collect();
    assert_eq!(read, payloads);
    assert_eq!(store.get(id).await.unwrap().state, ExecutionState::Failed);
}

/// Two replicas racing one idempotency key create one execution: the other answers with it.
#[tokio::test]
async fn replicas_racing_one_key_make_one_execution() {
    let Some((a, b)) = pair(Duration::from_secs(1)).await else {
        return;
    };
    for round in 0..20 {
        let key = format!("race-{round}");
        let (one, two) = tokio::join!(
            a.create(new_execution(Some((&key, 7)))),
            b.create(new_execution(Some((&key, 7))))
        );
        let ids = [one.unwrap(), two.unwrap()].map(|created| match created {
            Created::New(view) => (true, view.id),
            Created::Existing(view) => (false, view.id),
        });
        assert_eq!(ids[0].1, ids[1].1, "round {round}: one execution");
        assert!(
            ids[0].0 ^ ids[1].0,
            "round {round}: one new, one existing: {ids:?}"
        );
    }
    a.shared.capacity.refresh(&a.shared).await.unwrap();
    assert_eq!(a.stats().executions, 20, "counted once, by the database");
}

/// A cancel asked of a replica that does not own the execution reaches the owner, reason
/// and all; the owner's own cancel stays its own.
#[tokio::test]
async fn a_cancel_reaches_the_owner_through_the_database() {
    let Some((a, b)) = pair(Duration::from_secs(60)).await else {
        return;
    };
    let mut requests = a
        .cancel_requests()
        .expect("a shared store delivers cancels");
    assert!(a.cancel_requests().is_none(), "taken once");
    let id = created(&a, None).await;
    assert!(
        !a.cancel_elsewhere(id, None).await.unwrap(),
        "the owner cancels itself"
    );
    assert!(
        b.cancel_elsewhere(id, Some("user left".into()))
            .await
            .unwrap()
    );
    let request = tokio::time::timeout(Duration::from_secs(5), requests.recv())
        .await
        .expect("the owner hears at once")
        .unwrap();
    assert_eq!(
        request,
        crate::store::CancelRequest {
            id,
            reason: Some("user left".into())
        }
    );
    a.append(id, failed(ErrorCode::Cancelled)).await.unwrap();
    assert!(
        !b.cancel_elsewhere(id, None).await.unwrap(),
        "an ended execution"
    );
}

/// The usage order holds when transactions commit out of the order of their positions: a
/// fact kept by a transaction that began first but commits last is read before the facts
/// after it, never skipped past by a cursor.
#[tokio::test]
async fn usage_is_read_in_order_when_transactions_commit_out_of_order() {
    let Some((a, _b)) = pair(Duration::from_secs(60)).await else {
        return;
    };
    let early = created(&a, None).await;
    let late = created(&a, None).await;
    for id in [early, late] {
        a.append(id, routing()).await.unwrap();
        a.append(id, attempt_started(1)).await.unwrap();
    }
    // Another writer's transaction takes its id (its position) first and stays open.
    let url = url().expect("checked above");
    let (mut client, connection) = connect_config(&options(&url, "unused"))
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    let open = client.transaction().await.unwrap();
    open.execute(
        &at(
            &a,
            "UPDATE {s}.executions SET last_sequence = 4 WHERE id = $1",
        ),
        &[&super::uuid(early)],
    )
    .await
    .unwrap();
    // A later transaction keeps a fact and commits.
    a.append(late, usage(2)).await.unwrap();
    let cursor_then: Vec<u64> = read_usage(&a, 0, usize::MAX)
        .await
        .iter()
        .map(|f| f.fact.quantity)
        .collect();
    assert_eq!(
        cursor_then,
        Vec::<u64>::new(),
        "nothing past a transaction that may still commit"
    );
    // The first transaction keeps its fact, below the later one's position, and commits.
    let fact = usage(1);
    open.execute(
        &at(
            &a,
            "INSERT INTO {s}.events (execution_id, sequence, time, state, payload, usage_position) \
             VALUES ($1, 4, 0, 2, $2, (pg_current_xact_id()::text::int8 << 20) | 1)",
        ),
        &[&super::uuid(early), &super::rows::payload_bytes(&fact)],
    )
    .await
    .unwrap();
    open.commit().await.unwrap();
    drop(client);
    let _ = connection.await;
    let facts = read_usage(&a, 0, usize::MAX).await;
    let order: Vec<(ExecutionId, u64)> = facts
        .iter()
        .map(|f| (f.execution_id, f.fact.quantity))
        .collect();
    assert_eq!(
        order,
        [(early, 1), (late, 2)],
        "in the order of the transactions' ids"
    );
    assert!(facts[0].fact.position < facts[1].fact.position);
}

/// Every event of `id`, as a follower on `store` reads them.
async fn every_event(store: &PostgresStore, id: ExecutionId) -> Vec<crate::execution::Event> {
    let follower = store.follow(id).await.unwrap();
    follower.read(0, usize::MAX).await.unwrap()
}

/// `text` with `{s}` the store's schema: a statement for a connection of the test's own.
fn at(store: &PostgresStore, text: &str) -> String {
    text.replace(
        "{s}",
        &super::schema::quote(&store.shared.options.config.schema),
    )
}

/// Up to `limit` usage facts after `after`, as `store` reads them now.
async fn read_usage(
    store: &PostgresStore,
    after: u64,
    limit: usize,
) -> Vec<crate::store::UsageEntry> {
    let mut facts = Vec::new();
    match store.read_usage(after, limit, &mut facts) {
        None => facts,
        Some(fetch) => fetch.await.unwrap(),
    }
}

/// A database that cannot answer now (shutting down, a timeout, a lost connection) is told
/// as unavailable, to retry; a statement the database refuses is a fault.
#[test]
fn errors_that_pass_are_told_apart_from_faults() {
    for code in [
        "57P01", "57P03", "08006", "53300", "57014", "55P03", "40001", "40P01",
    ] {
        assert!(super::error::passing(code), "{code}");
    }
    for code in ["23505", "42P01", "22P02", "XX000"] {
        assert!(!super::error::passing(code), "{code}");
    }
}
