//! What a start cuts and what it refuses: a torn tail (the newest segment's unfinished last
//! write) is cut off and the rest replays; anything else that does not read stops the start
//! with the variant that says what is wrong, at the file and offset; a wrong key is named
//! by its id, a second writer by the holder's pid.

use super::*;

#[tokio::test]
async fn a_torn_tail_is_cut_off_and_the_rest_replays() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let id = create(&store, None).await;
    succeed(&store, id, 3).await;
    let before = everything(&store, id).await;
    drop(store);
    // A record head cut short, and zeros from a crash that extended the file but never
    // wrote it: torn tails, cut off.
    for tail in [&b"\x2a\x00\x00"[..], &[0u8; 4000][..]] {
        let newest = segments(dir.path()).pop().unwrap();
        let mut file = fs::OpenOptions::new().append(true).open(&newest).unwrap();
        file.write_all(tail).unwrap();
        drop(file);
        let (store, _) = open(dir.path(), vec![key(1)]).unwrap();
        assert_eq!(everything(&store, id).await, before);
        // Cut back (and, from the second start on, compacted into a base as well).
        for file in segments(dir.path()) {
            assert!(
                !fs::read(&file).unwrap().ends_with(tail),
                "{}",
                file.display()
            );
        }
        store.close();
    }
    // Bytes that are neither zeros nor a record are damage, not a tear.
    let newest = segments(dir.path()).pop().unwrap();
    let whole = fs::metadata(&newest).unwrap().len();
    let mut file = fs::OpenOptions::new().append(true).open(&newest).unwrap();
    file.write_all(&[0x51; 40]).unwrap();
    drop(file);
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        matches!(
            &error,
            OpenError::Damaged { path, offset, kind: Damage::Head }
                if *path == newest && *offset == whole
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_record_cut_short_at_the_end_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let id = create(&store, None).await;
    succeed(&store, id, 0).await;
    drop(store);
    // A crash while the last record was being synced: its tally does not vouch for it.
    crash_during_last_write(dir.path(), 1);
    let newest = segments(dir.path()).pop().unwrap();
    let len = fs::metadata(&newest).unwrap().len();
    // The last record (execution.completed) loses its last 5 bytes.
    fs::OpenOptions::new()
        .write(true)
        .open(&newest)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let (store, _) = open(dir.path(), vec![key(1)]).unwrap();
    // Its execution was running as far as the journal knows: it ends as interrupted.
    let view = store.get(id).await.unwrap();
    assert_eq!(view.error.unwrap().code, ErrorCode::OutcomeUnknown);
}

#[tokio::test]
async fn a_flipped_byte_in_the_middle_is_refused_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let id = create(&store, Some(("secret-key", 1))).await;
    succeed(&store, id, 2).await;
    store.close();
    drop(store);
    let newest = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&newest).unwrap();
    let at = 200;
    bytes[at] ^= 0x01;
    fs::write(&newest, &bytes).unwrap();
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        matches!(
            &error,
            OpenError::Damaged { path, offset, kind: Damage::Unauthentic }
                if *path == newest && *offset <= at as u64
        ),
        "{error}"
    );
}

#[tokio::test]
async fn an_altered_last_record_is_damage_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let id = create(&store, None).await;
    succeed(&store, id, 1).await;
    store.close();
    drop(store);
    let newest = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&newest).unwrap();
    let last = bytes.len() - 20;
    bytes[last] ^= 0x40;
    fs::write(&newest, &bytes).unwrap();
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        matches!(
            error,
            OpenError::Damaged {
                kind: Damage::Unauthentic,
                ..
            }
        ),
        "{error}"
    );
    // A segment of zeros only, as a crash leaves one it had just created, is removed.
    let (kind, number, _) = segment::list(dir.path()).unwrap().pop().unwrap();
    assert_eq!(kind, seal::Kind::Segment);
    bytes[last] ^= 0x40;
    fs::write(&newest, &bytes).unwrap();
    let empty = segment::path(dir.path(), seal::Kind::Segment, number + 1);
    fs::write(&empty, [0u8; 64]).unwrap();
    let (store, _) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(
        store.get(id).await.unwrap().state,
        ExecutionState::Succeeded
    );
    // (and the start's own new segment took its number)
    assert!(fs::read(&empty).unwrap().iter().any(|b| *b != 0));
}

#[tokio::test]
async fn a_segment_cut_at_a_record_boundary_or_gone_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    // Two starts leave two segments (the second follows the first); the third reads both.
    for _ in 0..2 {
        let store = open_ok(dir.path());
        let id = create(&store, None).await;
        succeed(&store, id, 2).await;
        store.close();
    }
    let files = segments(dir.path());
    let saved: Vec<Vec<u8>> = files.iter().map(|f| fs::read(f).unwrap()).collect();
    // The first segment loses its last record, at a record boundary: the second segment
    // says how many it held.
    let sealers = [Sealer::new(&key(1))];
    let completed_record = {
        let mut reader =
            reader::SegmentReader::open(&files[0], seal::Kind::Segment, 1, &sealers, false)
                .unwrap();
        let mut last = 0;
        while let Some((offset, _)) = reader.next().unwrap() {
            last = offset;
        }
        last
    };
    fs::write(&files[0], &saved[0][..completed_record as usize]).unwrap();
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        matches!(
            &error,
            OpenError::Damaged { path, offset, kind: Damage::Fewer { newest: false, .. } }
                if *path == files[0] && *offset == completed_record
        ),
        "{error}"
    );
    // The first segment gone altogether: the second says what it follows.
    fs::remove_file(&files[0]).unwrap();
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        matches!(
            &error,
            OpenError::Missing { path, missing: Missing::Previous { file: 1 } } if *path == files[1]
        ),
        "{error}"
    );
    // Put back, all is well.
    fs::write(&files[0], &saved[0]).unwrap();
    open(dir.path(), vec![key(1)]).unwrap();
}

#[tokio::test]
async fn a_journal_of_an_earlier_format_opens_and_one_of_a_later_format_is_refused() {
    use crate::store::file::seal::{EARLIEST, HEADER_LEN, VERSION};
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let id = create(&store, None).await;
    succeed(&store, id, 2).await;
    let before = everything(&store, id).await;
    store.close();
    drop(store);
    let sealer = Sealer::new(&key(1));
    let restamp = |version: u32| {
        for path in segments(dir.path()) {
            let mut bytes = fs::read(&path).unwrap();
            let mut header = [0u8; HEADER_LEN];
            header.copy_from_slice(&bytes[..HEADER_LEN]);
            sealer.restamp(&mut header, version);
            bytes[..HEADER_LEN].copy_from_slice(&header);
            fs::write(&path, bytes).unwrap();
        }
    };
    restamp(EARLIEST);
    let store = open_ok(dir.path());
    assert_eq!(everything(&store, id).await, before);
    store.close();
    drop(store);
    restamp(VERSION + 1);
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        error.to_string().contains(&format!(
            "a journal file of format {}, which this version does not read (it reads formats \
             {EARLIEST} to {VERSION})",
            VERSION + 1
        )),
        "{error}"
    );
}

#[tokio::test]
async fn a_wrong_key_is_refused_by_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    create(&store, None).await;
    store.close();
    drop(store);
    let error = open(dir.path(), vec![key(2)]).unwrap_err();
    let (written, configured) = (Sealer::new(&key(1)).id(), Sealer::new(&key(2)).id());
    let OpenError::UnknownKey {
        path,
        key: named,
        configured: listed,
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!((named, &listed[..]), (&written, &[configured][..]));
    assert_eq!(
        error.to_string(),
        format!(
            "{}: sealed with key {written}, which is not among the configured keys \
             ({configured}): the key is wrong, or was removed before a compaction re-sealed \
             this segment",
            path.display()
        )
    );
}

#[tokio::test]
async fn a_second_writer_is_refused_while_the_first_holds_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let error = open(dir.path(), vec![key(1)]).unwrap_err();
    assert!(
        matches!(&error, OpenError::Locked { dir: held, pid: Some(pid) }
            if held == dir.path() && *pid == std::process::id()),
        "{error}"
    );
    store.close();
    open(dir.path(), vec![key(1)]).unwrap();
}
