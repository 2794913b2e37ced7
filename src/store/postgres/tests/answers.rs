//! What the review of the store's fault handling found: an append or a create asked under a
//! registration the replica has since replaced is never written under the new one; a create
//! whose statement committed after its look-up said it had not is still the caller's, and so
//! is a plain insert that finds its id taken; a transaction its replica left idle gives its
//! locks back.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use super::{at, connect_config, created, fresh_schema, options, url};
use crate::execution::fixtures::{attempt_started, routing};
use crate::execution::{Event, ExecutionState};
use crate::store::conformance::{limits, new_execution};
use crate::store::postgres::insert::{NewRow, Within, insert};
use crate::store::postgres::{PostgresStore, create, writer};
use crate::store::{Created, EventStore, NewExecution, StoreError};

/// A store alone on a fresh schema, `statement_timeout` as given. The schema is made first
/// under the default timeout: a short one is for the requests under test, and a database
/// busy with the other tests' schemas can take longer than that to make one.
async fn lone(statement_timeout: Duration) -> Option<std::sync::Arc<PostgresStore>> {
    let url = url()?;
    let mut options = options(&url, &fresh_schema());
    let (mut client, connection) = connect_config(&options)
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    crate::store::postgres::schema::migrate(&mut client, &options.schema)
        .await
        .unwrap();
    drop(client);
    let _ = connection.await;
    options.statement_timeout = statement_timeout;
    let limits = limits(1000, Duration::from_secs(3600));
    Some(PostgresStore::connect(&options, limits).await.unwrap())
}

/// An append asked under a former registration (it was retrying while the replica lost its
/// lease and registered again) is refused, even once the new registration owns the
/// execution, as its takeover of the former one makes it.
#[tokio::test]
async fn an_append_of_a_former_registration_is_not_written_under_the_next() {
    let Some(store) = lone(Duration::from_secs(10)).await else {
        return;
    };
    let id = created(&store, None).await;
    store.append(id, routing()).await.unwrap();
    let shared = &store.shared;
    let former = shared.replica.id().0;
    shared.replica.register(shared).await.unwrap();
    let current = shared.replica.id().0;
    // Driven under the new registration, so its reconciliation leaves it be.
    shared.driven.insert(id, current);
    let client = shared.client().await.unwrap();
    client
        .execute(
            &at(
                &store,
                "UPDATE {s}.executions SET owner = $1, owner_epoch = 1 WHERE id = $2",
            ),
            &[&current, &super::super::uuid(id)],
        )
        .await
        .unwrap();
    let now = shared.clock.now();
    let refused = writer::append(shared, id, former, vec![attempt_started(1)], now)
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::Unavailable(_)), "{refused:?}");
    assert_eq!(
        store.get(id).await.unwrap().last_sequence,
        2,
        "nothing written"
    );
    // The same append under the registration in effect is.
    writer::append(shared, id, current, vec![attempt_started(1)], now)
        .await
        .unwrap();
    assert_eq!(store.get(id).await.unwrap().last_sequence, 3);
}

/// A create sent again after its look-up found no row, whose first statement then committed
/// after all, finds its own row: it is the caller's new execution (with a key, not an
/// existing one that nobody drives; without one, not a failure). Without a key, the create
/// sent again is a new row of the same id: its plain insert conflicts, and its statement is
/// sent again with the row guarded.
#[tokio::test]
async fn a_create_whose_first_statement_committed_late_is_still_new() {
    let Some(store) = lone(Duration::from_secs(10)).await else {
        return;
    };
    for key in [None, Some(("late-key", 7))] {
        let new = new_execution(key);
        let id = new.id;
        assert!(matches!(
            store.create(new.clone()).await,
            Ok(Created::New(_))
        ));
        // The row is there, as the late statement left it: the create is sent again.
        let again = create::create(&store.shared, new, store.shared.clock.now()).await;
        assert!(
            matches!(&again, Ok(Created::New(view)) if view.id == id),
            "{key:?}: {again:?}"
        );
        store.append(id, routing()).await.unwrap();
    }
}

/// The row of `new` as a create asks for it under the replica's registration now.
fn new_row(store: &PostgresStore, new: &NewExecution) -> NewRow {
    let first = Event {
        sequence: 1,
        time: SystemTime::now(),
        state: ExecutionState::Accepted,
        payload: new.accepted.clone(),
    };
    NewRow::of(new, &first, store.shared.replica.id().0)
}

/// A new row of an execution `store` has created: its id is taken.
async fn taken(store: &PostgresStore) -> NewRow {
    let new = new_execution(None);
    assert!(matches!(
        store.create(new.clone()).await,
        Ok(Created::New(_))
    ));
    new_row(store, &new)
}

/// A plain insert whose id is there already (a caller asked for one id twice) is sent again
/// with every row guarded: the row is not inserted, nothing fails, and the other new row of
/// the same statement is inserted.
#[tokio::test]
async fn a_plain_insert_of_an_id_already_there_is_sent_again_guarded() {
    let Some(store) = lone(Duration::from_secs(10)).await else {
        return;
    };
    let (again, fresh) = (taken(&store).await, new_row(&store, &new_execution(None)));
    let client = store.shared.client().await.unwrap();
    let inserted = insert(&client, &store.shared, &[&again, &fresh], Within::Alone)
        .await
        .unwrap();
    assert_eq!(inserted, HashSet::from([fresh.id]));
}

/// In a transaction every row is guarded: an id already there is not inserted, and the
/// transaction goes on.
#[tokio::test]
async fn in_a_transaction_an_id_already_there_leaves_the_transaction_usable() {
    let Some(store) = lone(Duration::from_secs(10)).await else {
        return;
    };
    let again = taken(&store).await;
    let mut client = store.shared.client().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let inserted = insert(&tx, &store.shared, &[&again], Within::Transaction)
        .await
        .unwrap();
    assert!(inserted.is_empty(), "{inserted:?}");
    tx.query_one("SELECT 1", &[]).await.unwrap();
    tx.commit().await.unwrap();
}

/// A transaction its replica opened and then left (the replica was lost between two
/// statements, holding the capacity lock) ends on the server a second past the statement
/// timeout, its locks with it: not when the server's TCP gives up, hours later.
#[tokio::test]
async fn a_transaction_left_idle_gives_its_locks_back() {
    let Some(store) = lone(Duration::from_millis(300)).await else {
        return;
    };
    let lock: i64 = rand_key();
    let left = store.shared.client().await.unwrap();
    left.batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock({lock})"))
        .await
        .unwrap();
    let since = Instant::now();
    let other = store.shared.client().await.unwrap();
    loop {
        let row = other
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&lock])
            .await
            .unwrap();
        if row.get::<_, bool>(0) {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "the idle transaction still holds its lock"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        since.elapsed() >= Duration::from_millis(1000),
        "let go before it was idle past the statement timeout and a second: {:?}",
        since.elapsed()
    );
    assert!(
        left.simple_query("SELECT 1").await.is_err(),
        "its session ended"
    );
}

fn rand_key() -> i64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("random bytes");
    i64::from_le_bytes(bytes)
}
