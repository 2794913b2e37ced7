//! The usage order of a file store across restarts and compactions: the same epoch, every
//! fact at the position it had, and a position never given twice, even once every fact
//! that had the highest ones expired and a compaction took them off the disk.

use super::*;
use crate::execution::fixtures::usage;
use crate::store::UsageEntry;

/// An execution that reports `quantity` (if any) and succeeds.
async fn run(store: &FileStore, quantity: Option<u64>) -> ExecutionId {
    let id = create(store, None).await;
    let mut events = vec![routing(), attempt_started(1)];
    events.extend(quantity.map(usage));
    events.push(completed(1, "done"));
    store.append_all(id, events).await.unwrap();
    id
}

fn facts(store: &FileStore, after: u64) -> Vec<UsageEntry> {
    let mut facts = Vec::new();
    let fetch = store.read_usage(after, usize::MAX, &mut facts);
    assert!(fetch.is_none(), "a file store reads its usage at once");
    facts
}

/// Opens `dir` twice over, so the second start finds two segments and compacts.
fn reopen_compacted(dir: &Path, limits: StoreLimits) -> Arc<FileStore> {
    let (store, _) = FileStore::open(&config(dir, vec![key(1)]), limits).unwrap();
    store.close();
    drop(store);
    FileStore::open(&config(dir, vec![key(1)]), limits)
        .unwrap()
        .0
}

#[tokio::test]
async fn the_usage_order_resumes_after_restarts_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let limits = StoreLimits {
        max_executions: 2,
        max_bytes: 1 << 30,
        retention: Duration::from_secs(3600),
    };
    let (store, _) = FileStore::open(&config(dir.path(), vec![key(1)]), limits).unwrap();
    // Room for two: the first execution and its fact go.
    for quantity in 1..=3 {
        run(&store, Some(quantity)).await;
    }
    let epoch = store.usage_epoch();
    let before = facts(&store, 0);
    assert_eq!(
        before.iter().map(|f| f.fact.quantity).collect::<Vec<_>>(),
        [2, 3]
    );
    store.close();
    drop(store);

    let store = reopen_compacted(dir.path(), limits);
    assert_eq!(store.usage_epoch(), epoch, "the same order");
    assert_eq!(facts(&store, 0), before, "every fact at its position");
    assert_eq!(facts(&store, before[0].fact.position), before[1..]);

    // Every fact leaves (two executions without any take the room), and a compaction
    // takes them off the disk: a new fact still comes after all of them.
    run(&store, None).await;
    run(&store, None).await;
    assert!(facts(&store, 0).is_empty());
    store.close();
    drop(store);
    let store = reopen_compacted(dir.path(), limits);
    assert_eq!(store.usage_epoch(), epoch);
    run(&store, Some(4)).await;
    let after = facts(&store, 0);
    assert_eq!(after.len(), 1);
    assert!(
        after[0].fact.position > before[1].fact.position,
        "{} after {}",
        after[0].fact.position,
        before[1].fact.position
    );
}

#[tokio::test]
async fn a_damaged_usage_mark_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    store.close();
    drop(store);
    fs::write(dir.path().join("usage-order"), "not a mark").unwrap();
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        matches!(&error, OpenError::BadMark { path } if *path == dir.path().join("usage-order")),
        "{error}"
    );
}
