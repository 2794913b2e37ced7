//! Rows that left the store and linger: the purge deletes as many as have lingered, and the
//! statements that let executions go or delete them read each row by an index, however many
//! rows linger and whatever the planner expects of the tables.

use std::sync::Arc;

use super::{ended, every_event, of_100};
use crate::store::EventStore;
use crate::store::postgres::{PostgresStore, capacity, uuid};

/// A store of 100 on a fresh schema whose tables hold `n` executions that left a second ago
/// (within their linger, so the store's own purge leaves them), with two events each,
/// written straight into the tables; analyzed, or not (a new table's planner knows nothing).
async fn with_lingering(n: i64, analyzed: bool) -> Option<Arc<PostgresStore>> {
    let store = of_100().await?;
    let left = store.shared.clock.now() - 1_000_000;
    let client = store.shared.client().await.unwrap();
    client
        .execute(
            "INSERT INTO executions (id, labels, owner, owner_epoch, state, committed, stopping,
                 last_sequence, bytes, input_bytes, ended_at, gone_at)
             SELECT gen_random_uuid(), '', gen_random_uuid(), 1, 3, true, false, 2, 10, 0,
                 $2 - g, $2 - g
             FROM generate_series(1, $1::int8) g",
            &[&n, &left],
        )
        .await
        .unwrap();
    client
        .batch_execute(
            "INSERT INTO events (execution_id, sequence, time, state, payload)
             SELECT id, s, 0, 0, '\\x00' FROM executions, generate_series(1, 2) s",
        )
        .await
        .unwrap();
    if analyzed {
        client
            .batch_execute("ANALYZE executions; ANALYZE events")
            .await
            .unwrap();
    }
    drop(client);
    Some(store)
}

/// The rows of executions and of events in the tables, and the events' rows of executions
/// that are not.
async fn rows(store: &PostgresStore) -> (i64, i64, i64) {
    let client = store.shared.client().await.unwrap();
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM executions), (SELECT count(*) FROM events),
                 (SELECT count(*) FROM events e
                  WHERE NOT EXISTS (SELECT 1 FROM executions x WHERE x.id = e.execution_id))",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// One purge deletes every execution that has lingered, with its events, two and a half of
/// its statements' worth here; the executions still in the store stay whole.
#[tokio::test]
async fn a_purge_deletes_every_execution_that_has_lingered() {
    let Some(store) = with_lingering(2500, true).await else {
        return;
    };
    let kept = ended(&store, 3).await;
    let (executions, events, _) = rows(&store).await;
    assert_eq!((executions, events), (2503, 5006));
    let purged = capacity::purge(&store.shared, store.shared.clock.now())
        .await
        .unwrap();
    assert_eq!(purged, 2500);
    assert_eq!(rows(&store).await, (3, 6, 0));
    for id in kept {
        let view = store.get(id).await.unwrap();
        assert_eq!(view.last_sequence, 2, "{view:?}");
        assert_eq!(every_event(&store, id).await.len(), 2);
    }
}

/// Each statement that lets executions go or deletes their rows reads them by an index and
/// changes them where they lie, with 20 000 rows lingering, analyzed or not. (With the
/// statistics of such a table, a let-go of ids joined the table read whole, twice.)
#[tokio::test]
async fn letting_go_reads_each_row_by_an_index_however_many_linger() {
    for analyzed in [false, true] {
        let Some(store) = with_lingering(20_000, analyzed).await else {
            return;
        };
        let ids: Vec<_> = ended(&store, 3).await.into_iter().map(uuid).collect();
        for (name, plan) in capacity::let_go_plans(&store.shared, &ids).await {
            assert!(
                !plan.contains("Seq Scan"),
                "{name}, analyzed {analyzed}: {plan}"
            );
            assert!(
                plan.contains("Tid Scan"),
                "{name}, analyzed {analyzed}: {plan}"
            );
        }
    }
}
