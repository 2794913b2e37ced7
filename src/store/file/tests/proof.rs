//! The journal proves it holds every record it acknowledged: a file cut at a record boundary,
//! a newest segment or a whole journal removed, or damage inside records synced long ago all
//! stop the start, naming the file; only the records of the newest segment's last write, which
//! a crash may have cut before their sync was done, are ever cut as a torn tail. And a segment
//! that cannot be made does not fail the store.

use super::*;

/// `n` executions run to their end, each in several appends, then a clean stop.
async fn run(dir: &Path, n: usize) -> Vec<ExecutionId> {
    let store = open_ok(dir);
    let held = store.stats().executions;
    let mut ids = Vec::new();
    for i in 0..n {
        let id = create(&store, Some((&format!("key-{}", held + i), 1))).await;
        succeed(&store, id, 2).await;
        ids.push(id);
    }
    store.close();
    ids
}

/// The offset of every record of file `path` (the newest or not, as replay would read it).
fn boundaries(path: &Path, kind: seal::Kind, number: u64) -> Vec<u64> {
    let sealers = [Sealer::new(&key(1))];
    let mut reader = reader::SegmentReader::open(path, kind, number, &sealers, false).unwrap();
    let mut offsets = Vec::new();
    while let Some((offset, _)) = reader.next().unwrap() {
        offsets.push(offset);
    }
    offsets
}

fn cut(path: &Path, at: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(at)
        .unwrap();
}

/// The start's refusal, which names `names` as the file at fault.
fn refused(dir: &Path, names: &Path) -> OpenError {
    let error = open(dir, vec![key(1)]).unwrap_err();
    let named = match &error {
        OpenError::Damaged { path, .. } | OpenError::Missing { path, .. } => path,
        other => panic!("not a file's fault: {other}"),
    };
    assert_eq!(named, names, "{error}");
    error
}

/// Whether `error` says the file holds fewer records than its tally vouches for.
fn fewer(error: &OpenError) -> bool {
    matches!(
        error,
        OpenError::Damaged {
            kind: Damage::Fewer { .. },
            ..
        }
    )
}

#[tokio::test]
async fn the_newest_segment_cut_at_any_record_boundary_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), 4).await;
    let newest = segments(dir.path()).pop().unwrap();
    let whole = fs::read(&newest).unwrap();
    let offsets = boundaries(&newest, seal::Kind::Segment, 1);
    // The last record alone, the last execution, the last two: each cut is found.
    for &at in offsets.iter().rev().take(12) {
        cut(&newest, at);
        let error = refused(dir.path(), &newest);
        assert!(fewer(&error), "{error}");
        fs::write(&newest, &whole).unwrap();
    }
    let (store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(opened.executions, 4);
    store.close();
}

#[tokio::test]
async fn after_a_crash_only_the_last_write_may_be_cut() {
    let dir = tempfile::tempdir().unwrap();
    let ids = run(dir.path(), 4).await;
    // The crash came while the last record (the fourth execution's completion) was synced.
    crash_during_last_write(dir.path(), 1);
    let newest = segments(dir.path()).pop().unwrap();
    let whole = fs::read(&newest).unwrap();
    let offsets = boundaries(&newest, seal::Kind::Segment, 1);
    // The record before it was synced, and acknowledged: cutting it too is found.
    cut(&newest, offsets[offsets.len() - 2]);
    let error = refused(dir.path(), &newest);
    assert!(fewer(&error), "{error}");
    // The one in doubt may be gone: its execution ends as a restart ends a running one.
    fs::write(&newest, &whole).unwrap();
    cut(&newest, offsets[offsets.len() - 1]);
    let (store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!((opened.executions, opened.interrupted), (4, 1));
    assert_eq!(
        store.get(ids[3]).await.unwrap().error.unwrap().code,
        ErrorCode::OutcomeUnknown
    );
}

#[tokio::test]
async fn zeros_inside_a_synced_record_are_damage_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), 4).await;
    // With the last write in doubt too: the damage is far before it.
    for crashed in [false, true] {
        if crashed {
            crash_during_last_write(dir.path(), 1);
        }
        let newest = segments(dir.path()).pop().unwrap();
        let offsets = boundaries(&newest, seal::Kind::Segment, 1);
        let whole = fs::read(&newest).unwrap();
        let mut damaged = whole.clone();
        let at = usize::try_from(offsets[2]).unwrap() + 20;
        damaged[at..at + 16].fill(0);
        fs::write(&newest, &damaged).unwrap();
        let error = refused(dir.path(), &newest);
        assert!(
            matches!(
                error,
                OpenError::Damaged {
                    offset,
                    kind: Damage::CutSynced { tear: Tear::Unwritten, record: 2, .. },
                    ..
                } if offset == offsets[2]
            ),
            "{error}"
        );
        // Nothing was cut: the file is as it was left, to be mended or restored.
        assert_eq!(fs::read(&newest).unwrap(), damaged, "crashed: {crashed}");
        fs::write(&newest, &whole).unwrap();
    }
    let (_store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(opened.executions, 4);
}

#[tokio::test]
async fn a_removed_newest_segment_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), 2).await;
    run(dir.path(), 2).await;
    // Two starts: segment 1 names segment 2, which the second start made.
    let files = segments(dir.path());
    assert_eq!(files.len(), 2);
    let saved = fs::read(&files[1]).unwrap();
    fs::remove_file(&files[1]).unwrap();
    let error = refused(dir.path(), &files[0]);
    assert!(
        matches!(
            error,
            OpenError::Missing {
                missing: Missing::Next { next: 2 },
                ..
            }
        ),
        "{error}"
    );
    fs::write(&files[1], &saved).unwrap();
    // The third start compacts both into a base, which names the segment after it.
    let (store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(opened.executions, 4);
    store.close();
    drop(store);
    let files = segment::list(dir.path()).unwrap();
    let [(seal::Kind::Base, _, base), (seal::Kind::Segment, _, after)] = &files[..] else {
        panic!("{files:?}")
    };
    fs::remove_file(after).unwrap();
    let error = refused(dir.path(), base);
    assert!(
        matches!(
            error,
            OpenError::Missing {
                missing: Missing::Next { .. },
                ..
            }
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_base_cut_at_a_record_boundary_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), 3).await;
    run(dir.path(), 3).await;
    open_ok(dir.path()).close();
    let files = segment::list(dir.path()).unwrap();
    let (kind, number, base) = files[0].clone();
    assert_eq!(kind, seal::Kind::Base);
    let offsets = boundaries(&base, kind, number);
    for &at in offsets.iter().rev().take(8) {
        let whole = fs::read(&base).unwrap();
        cut(&base, at);
        let error = refused(dir.path(), &base);
        assert!(fewer(&error), "{error}");
        fs::write(&base, &whole).unwrap();
    }
    assert_eq!(open(dir.path(), vec![key(1)]).unwrap().1.executions, 6);
}

#[tokio::test]
async fn a_journal_whose_files_are_all_gone_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), 2).await;
    for file in segments(dir.path()) {
        fs::remove_file(file).unwrap();
    }
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        matches!(&error, OpenError::Missing { path, missing: Missing::Journal }
            if path == dir.path()),
        "{error}"
    );
    // Its only segment cut inside its header is the same loss.
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), 2).await;
    let only = segments(dir.path()).pop().unwrap();
    cut(&only, 100);
    let error = refused(dir.path(), &only);
    assert!(
        matches!(
            error,
            OpenError::Damaged {
                offset: 100,
                kind: Damage::Header(Header::Cut { named_by: None }),
                ..
            }
        ),
        "{error}"
    );
    // Removing the mark too says: start empty.
    fs::remove_file(dir.path().join("usage-order")).unwrap();
    let (_store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(opened.executions, 0);
}

#[tokio::test]
async fn a_segment_made_but_never_named_is_a_rotation_a_crash_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), 2).await;
    // A crash after the next segment's file was made and synced, before anything named it.
    let sealer = Sealer::new(&key(1));
    let made = segment::path(dir.path(), seal::Kind::Segment, 2);
    drop(Segment::create(&made, seal::Kind::Segment, 2, &sealer).unwrap());
    let (store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(opened.executions, 2);
    store.close();
    drop(store);
    // The start took its number; the journal reads on as one.
    assert_eq!(segments(dir.path()).len(), 2);
    assert_eq!(open(dir.path(), vec![key(1)]).unwrap().1.executions, 2);
}

#[tokio::test]
async fn a_segment_that_cannot_be_made_fails_the_rotation_not_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let id = create(&store, None).await;
    // Something in the way of the next segment's file, as no descriptor left would be.
    let next = segment::path(dir.path(), seal::Kind::Segment, 2);
    fs::create_dir(&next).unwrap();
    assert_eq!(store.writer.rotate().recv().unwrap(), None);
    assert!(
        !store.failed(),
        "a failed rotation does not poison the journal"
    );
    succeed(&store, id, 1).await;
    let other = create(&store, None).await;
    // Once it is out of the way, the next rotation goes ahead.
    fs::remove_dir(&next).unwrap();
    assert_eq!(store.writer.rotate().recv().unwrap(), Some(1));
    succeed(&store, other, 1).await;
    let before = [
        everything(&store, id).await,
        everything(&store, other).await,
    ];
    store.close();
    drop(store);
    let store = open_ok(dir.path());
    assert_eq!(
        [
            everything(&store, id).await,
            everything(&store, other).await
        ],
        before
    );
}
