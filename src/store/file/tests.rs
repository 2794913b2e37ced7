//! The file store: the conformance suite, and what only a durable store promises — replay
//! exactly, interrupted executions ended and never resumed, torn tails cut, damage and wrong
//! keys refused by file and offset, one writer, compaction and key rotation.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

use super::*;
use crate::config::{FileStoreConfig, StoreKey};
use crate::execution::fixtures::{attempt_started, completed, routing, text};
use crate::execution::{ErrorCode, Outcome};
use crate::store::StoreLimits;
use crate::store::conformance::{limits, new_execution};

fn key(byte: u8) -> StoreKey {
    StoreKey::parse(&[byte; 32], format!("test key {byte}")).unwrap()
}

fn config(dir: &Path, keys: Vec<StoreKey>) -> FileStoreConfig {
    FileStoreConfig {
        path: dir.to_owned(),
        keys,
        max_disk_bytes: 1 << 30,
    }
}

fn open(dir: &Path, keys: Vec<StoreKey>) -> Result<(Arc<FileStore>, Opened), OpenError> {
    FileStore::open(&config(dir, keys), limits(1000, Duration::from_secs(3600)))
}

fn open_ok(dir: &Path) -> Arc<FileStore> {
    open(dir, vec![key(1)]).unwrap().0
}

/// The journal's files, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    segment::list(dir)
        .unwrap()
        .into_iter()
        .map(|(_, _, p)| p)
        .collect()
}

/// The store the conformance suite runs on, with its directory, removed when it goes.
struct InTempDir {
    store: Arc<FileStore>,
    _dir: TempDir,
}

impl EventStore for InTempDir {
    fn kind(&self) -> &'static str {
        self.store.kind()
    }
    fn durable(&self) -> bool {
        self.store.durable()
    }
    fn create(&self, new: NewExecution) -> StoreFuture<'static, Created> {
        self.store.create(new)
    }
    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, Event> {
        self.store.append(id, payload)
    }
    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64> {
        self.store.append_all(id, payloads)
    }
    fn get(&self, id: ExecutionId) -> StoreFuture<'_, Execution> {
        self.store.get(id)
    }
    fn follow(&self, id: ExecutionId) -> StoreFuture<'_, Follower> {
        self.store.follow(id)
    }
    fn usage_epoch(&self) -> u64 {
        self.store.usage_epoch()
    }
    fn read_usage(
        &self,
        after: u64,
        limit: usize,
        into: &mut Vec<UsageEntry>,
    ) -> Fetch<UsageEntry> {
        self.store.read_usage(after, limit, into)
    }
    fn usage_changes(&self) -> Changes {
        self.store.usage_changes()
    }

    fn expire(&self) -> usize {
        self.store.expire()
    }

    fn stats(&self) -> StoreStats {
        self.store.stats()
    }
    fn failed(&self) -> bool {
        self.store.failed()
    }
}

crate::event_store_conformance!(|limits| async move {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = FileStore::open(&config(dir.path(), vec![key(1)]), limits).unwrap();
    Arc::new(InTempDir { store, _dir: dir }) as Arc<dyn EventStore>
});

async fn create(store: &FileStore, key: Option<(&str, u128)>) -> ExecutionId {
    match store.create(new_execution(key)).await.unwrap() {
        Created::New(view) => view.id,
        Created::Existing(view) => panic!("{} existed", view.id),
    }
}

async fn succeed(store: &FileStore, id: ExecutionId, deltas: usize) {
    store
        .append_all(id, vec![routing(), attempt_started(1)])
        .await
        .unwrap();
    for i in 0..deltas {
        store
            .append(id, text(1, &format!("piece {i} ")))
            .await
            .unwrap();
    }
    store.append(id, completed(1, "done")).await.unwrap();
}

/// What a crash during the newest segment's last write leaves: a tally that vouches for all
/// but its last `unsynced` records (a clean stop settles the tally, so nothing is in doubt).
fn crash_during_last_write(dir: &Path, unsynced: u64) {
    let (kind, number, path) = segment::list(dir).unwrap().pop().unwrap();
    let sealers = [Sealer::new(&key(1))];
    let mut reader = reader::SegmentReader::open(&path, kind, number, &sealers, true).unwrap();
    while reader.next().unwrap().is_some() {}
    let read = reader.as_read();
    let mut segment =
        Segment::reopen(&path, number, read.prefix, read.records, read.tally).unwrap();
    segment
        .unsettle(&sealers[0], read.records - unsynced)
        .unwrap();
}

async fn everything(store: &FileStore, id: ExecutionId) -> (Execution, Vec<Event>) {
    (
        store.get(id).await.unwrap(),
        store
            .follow(id)
            .await
            .unwrap()
            .read(0, usize::MAX)
            .await
            .unwrap(),
    )
}

/// [`everything`] of each of `ids`, in order.
async fn everything_of(store: &FileStore, ids: &[ExecutionId]) -> Vec<(Execution, Vec<Event>)> {
    let mut all = Vec::with_capacity(ids.len());
    for id in ids {
        all.push(everything(store, *id).await);
    }
    all
}

#[tokio::test]
async fn a_reopened_store_has_every_event_view_and_key_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let done = create(&store, Some(("order-1", 7))).await;
    succeed(&store, done, 40).await;
    let plain = create(&store, None).await;
    succeed(&store, plain, 0).await;
    let before = [
        everything(&store, done).await,
        everything(&store, plain).await,
    ];
    store.close();
    drop(store);

    let (store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(
        (opened.executions, opened.events, opened.interrupted),
        (2, 2 + 43 + 3, 0)
    );
    assert_eq!(
        [
            everything(&store, done).await,
            everything(&store, plain).await
        ],
        before
    );
    // A cursor resumes where it was.
    assert_eq!(
        store
            .follow(done)
            .await
            .unwrap()
            .read(41, 10)
            .await
            .unwrap(),
        before[0].1[41..]
    );
    // The key names the same execution; with another request it is a conflict.
    match store
        .create(new_execution(Some(("order-1", 7))))
        .await
        .unwrap()
    {
        Created::Existing(view) => assert_eq!(view.id, done),
        Created::New(view) => panic!("a new execution {}", view.id),
    }
    assert_eq!(
        store
            .create(new_execution(Some(("order-1", 8))))
            .await
            .unwrap_err(),
        StoreError::IdempotencyConflict(done)
    );
}

#[tokio::test]
async fn executions_left_running_end_with_outcome_unknown_and_keep_their_output() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let streaming = create(&store, None).await;
    store
        .append_all(
            streaming,
            vec![routing(), attempt_started(1), text(1, "half an ans")],
        )
        .await
        .unwrap();
    let waiting = create(&store, None).await;
    drop(store); // no close: as a crash leaves it, every acknowledged event on disk

    let (store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(opened.interrupted, 2);
    // The one whose request went out may have finished remotely; the other never went out.
    for (id, outcome) in [
        (streaming, Outcome::Unknown),
        (waiting, Outcome::NotStarted),
    ] {
        let (view, events) = everything(&store, id).await;
        assert_eq!(view.state, ExecutionState::Failed, "{id}");
        let error = view.error.unwrap();
        assert_eq!(
            (error.code, error.outcome),
            (ErrorCode::OutcomeUnknown, outcome)
        );
        assert!(events.last().unwrap().is_terminal());
    }
    let (view, events) = everything(&store, streaming).await;
    // The running attempt failed with its outcome unknown; its output is partial output.
    let attempt = view.attempts.last().unwrap();
    assert_eq!(attempt.outcome, Some(Outcome::Unknown));
    assert_eq!(events.len(), 6);
    let EventPayload::Failed(failure) = &events[5].payload else {
        panic!("{:?}", events[5])
    };
    assert_eq!(failure.partial_output.text, "half an ans");
    // Nothing more happens to them on the next start.
    store.close();
    drop(store);
    let (_store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(opened.interrupted, 0);
}

#[tokio::test]
async fn nothing_readable_is_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let mut new = new_execution(Some(("idempotency-key-in-clear", 1)));
    new.labels = Arc::new([("tenant".to_owned(), "label-in-clear".to_owned())].into());
    let Created::New(view) = store.create(new).await.unwrap() else {
        panic!("new")
    };
    store
        .append_all(
            view.id,
            vec![routing(), attempt_started(1), text(1, "output-in-clear")],
        )
        .await
        .unwrap();
    store.close();
    for path in segments(dir.path()) {
        let bytes = fs::read(&path).unwrap();
        for clear in [
            "idempotency-key-in-clear",
            "label-in-clear",
            "output-in-clear",
            "tenant",
        ] {
            assert!(
                !bytes.windows(clear.len()).any(|w| w == clear.as_bytes()),
                "{clear} in {}",
                path.display()
            );
        }
    }
}

#[tokio::test]
async fn compaction_drops_what_expired_and_rotation_reseals_with_the_new_key() {
    let dir = tempfile::tempdir().unwrap();
    let limits = StoreLimits {
        max_executions: 10,
        max_bytes: 1 << 30,
        retention: Duration::from_secs(3600),
    };
    let config = FileStoreConfig {
        max_disk_bytes: 1 << 20,
        ..config(dir.path(), vec![key(1)])
    };
    let (store, _) = FileStore::open(&config, limits).unwrap();
    // 100 executions of 3 KiB through a store of 10: 90 are evicted, and the journal grows
    // past a quarter of its 1 MiB, so it compacts to the ten that are left.
    let mut last = Vec::new();
    let kib = "x".repeat(1024);
    for _ in 0..100 {
        let id = create(&store, None).await;
        let mut events = vec![routing(), attempt_started(1)];
        events.extend((0..3).map(|_| text(1, &kib)));
        events.push(completed(1, ""));
        store.append_all(id, events).await.unwrap();
        last.push(id);
    }
    let kept: Vec<ExecutionId> = last[90..].to_vec();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while store.disk_bytes() > 200 * 1024 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(store.disk_bytes() <= 200 * 1024, "{}", store.disk_bytes());
    let views: Vec<_> = everything_of(&store, &kept).await;
    store.close();
    drop(store);

    // Rotation: the new key first, the old one still listed; the start compacts.
    let rotated = FileStoreConfig {
        keys: vec![key(2), key(1)],
        ..config.clone()
    };
    let (store, opened) = FileStore::open(&rotated, limits).unwrap();
    assert_eq!(opened.executions, 10);
    store.close();
    drop(store);
    // The old key can go: everything is sealed with the new one now.
    let (store, _) = FileStore::open(
        &FileStoreConfig {
            keys: vec![key(2)],
            ..config.clone()
        },
        limits,
    )
    .unwrap();
    let after: Vec<_> = everything_of(&store, &kept).await;
    assert_eq!(after, views);
    assert_eq!(
        store.get(last[0]).await.unwrap_err(),
        StoreError::NotFound(last[0])
    );
}

#[tokio::test]
async fn the_journal_stays_within_max_disk_bytes_by_letting_the_oldest_go() {
    let dir = tempfile::tempdir().unwrap();
    let config = FileStoreConfig {
        max_disk_bytes: 1 << 20,
        ..config(dir.path(), vec![key(1)])
    };
    // Nothing expires by time or by count: only the disk bound makes room.
    let (store, _) = FileStore::open(&config, limits(100_000, Duration::from_secs(3600))).unwrap();
    let kib = "x".repeat(1024);
    let mut ids = Vec::new();
    let mut most = 0;
    while ids.len() < 1000 {
        // Past half the bound again while a compaction runs, new work waits for it.
        let id = match store.create(new_execution(None)).await {
            Ok(Created::New(view)) => view.id,
            Err(StoreError::Full { .. }) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            other => panic!("{other:?}"),
        };
        let mut events = vec![routing(), attempt_started(1)];
        events.extend((0..3).map(|_| text(1, &kib)));
        events.push(completed(1, ""));
        store.append_all(id, events).await.unwrap();
        ids.push(id);
        most = most.max(store.disk_bytes());
    }
    // 3 MB went through a 1 MiB journal: it stayed within half the bound more (and what the
    // last execution taken wrote), the newest executions are there and the oldest are not.
    assert!(
        most < (3 << 19) + (16 << 10),
        "the journal reached {most} bytes"
    );
    assert!(store.get(*ids.last().unwrap()).await.is_ok());
    assert_eq!(
        store.get(ids[0]).await.unwrap_err(),
        StoreError::NotFound(ids[0])
    );
    // Running executions are never let go: once only they are left, creates are refused.
    let mut running = Vec::new();
    let mut waits = 0;
    let refused = loop {
        match store.create(new_execution(None)).await {
            // Refused while the compaction the loop above started still runs (past half the
            // bound more): new work waits for it, as above.
            Err(StoreError::Full { .. }) if running.is_empty() && waits < 2000 => {
                waits += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => break e,
            Ok(created) => {
                let Created::New(view) = created else {
                    panic!("new")
                };
                let events = vec![routing(), attempt_started(1), text(1, &kib.repeat(8))];
                store.append_all(view.id, events).await.unwrap();
                running.push(view.id);
                assert!(
                    running.len() < 1000,
                    "never refused: {} bytes on disk",
                    store.disk_bytes()
                );
            }
        }
    };
    assert!(matches!(refused, StoreError::Full { .. }), "{refused:?}");
    assert!(
        store.get(running[0]).await.is_ok(),
        "running executions are never let go"
    );
}

#[tokio::test]
async fn a_compaction_cut_short_by_a_crash_replays_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let small = |n| {
        FileStore::open(
            &config(dir.path(), vec![key(1)]),
            limits(n, Duration::from_secs(3600)),
        )
    };
    // First start: three executions. Second start, in a store of three: three more, which
    // evict the first three (their expiry is in the second segment), and one left running.
    let mut gone = Vec::new();
    let mut kept = Vec::new();
    for round in 0..2 {
        let (store, _) = small(if round == 0 { 100 } else { 4 }).unwrap();
        for i in 0..3 {
            let id = create(&store, Some((&format!("key-{round}-{i}"), 1))).await;
            succeed(&store, id, i).await;
            if round == 0 {
                gone.push(id)
            } else {
                kept.push(id)
            }
        }
        if round == 1 {
            kept.push(create(&store, None).await);
        }
        store.close();
    }
    let first = segments(dir.path()).remove(0);
    let first_bytes = fs::read(&first).unwrap();

    // The third start ends the running execution and compacts both segments into a base.
    let (store, _) = small(4).unwrap();
    assert!(!first.exists(), "compacted away");
    let before: Vec<_> = everything_of(&store, &kept).await;
    store.close();
    drop(store);

    // A crash after the base was renamed into place but before the older segment was removed
    // leaves it beside the base (here with the temporary file of a later compaction that a
    // crash cut before its rename, too). Neither changes what replays: the evicted
    // executions, whose expiry the old segment does not hold, stay gone.
    fs::write(&first, first_bytes).unwrap();
    let temporary = dir.path().join("journal-00000000000000000009.compacting");
    fs::write(&temporary, b"half a compaction").unwrap();
    let (store, _) = small(4).unwrap();
    let after: Vec<_> = everything_of(&store, &kept).await;
    assert_eq!(after, before);
    for id in gone {
        assert_eq!(store.get(id).await.unwrap_err(), StoreError::NotFound(id));
    }
    assert!(!temporary.exists() && !first.exists());
}

mod errors;
mod failure;
mod proof;
mod refusal;
mod usage;
