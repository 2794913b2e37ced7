//! What an operator reads when the store does not open: each variant of [`OpenError`] names
//! the file (and the offset, where there is one) and says what is wrong in words. The tests
//! beside these match variants; these hold the words.

use super::*;
use crate::store::{IoAt, IoOp};

const SEGMENT: &str = "/var/lib/mr/journal-00000000000000000002.seg";
const BEFORE: &str = "/var/lib/mr/journal-00000000000000000001.seg";

fn damaged(offset: u64, kind: Damage) -> String {
    OpenError::Damaged {
        path: SEGMENT.into(),
        offset,
        kind,
    }
    .to_string()
}

fn missing(missing: Missing) -> String {
    OpenError::Missing {
        path: SEGMENT.into(),
        missing,
    }
    .to_string()
}

#[test]
fn a_locked_directory_names_its_holder_when_the_lock_file_does() {
    let locked = |pid| OpenError::Locked {
        dir: "/var/lib/mr".into(),
        pid,
    };
    assert_eq!(
        locked(Some(4242)).to_string(),
        "the store directory /var/lib/mr is in use by another process (pid 4242): one process \
         may write it at a time"
    );
    assert_eq!(
        locked(None).to_string(),
        "the store directory /var/lib/mr is in use by another process: one process may write \
         it at a time"
    );
}

#[test]
fn a_missing_file_is_named_with_the_file_that_shows_it() {
    let cases = [
        (
            Missing::Gap { from: 1, to: 4 },
            "the journal jumps from segment 1 to 4: the files between are missing",
        ),
        (
            Missing::Next { next: 3 },
            "its tally names segment 3 as the file after it, which is missing",
        ),
        (
            Missing::Previous { file: 1 },
            "this segment follows file 1, which is missing",
        ),
        (
            Missing::Unnamed {
                before: BEFORE.into(),
                names: None,
            },
            "this file follows /var/lib/mr/journal-00000000000000000001.seg, whose tally names \
             no file as the file after it",
        ),
        (
            Missing::Unnamed {
                before: BEFORE.into(),
                names: Some(3),
            },
            "this file follows /var/lib/mr/journal-00000000000000000001.seg, whose tally names \
             segment 3 as the file after it",
        ),
    ];
    for (case, reason) in cases {
        assert_eq!(missing(case), format!("{SEGMENT}: {reason}"));
    }
    let journal = OpenError::Missing {
        path: "/var/lib/mr".into(),
        missing: Missing::Journal,
    };
    assert_eq!(
        journal.to_string(),
        "/var/lib/mr: the journal's files are missing, but its usage-order mark is there (it is \
         written once a journal exists): restore the journal-*.seg and journal-*.base files, or \
         remove usage-order as well to start an empty store"
    );
}

#[test]
fn a_bad_header_is_named_with_its_file() {
    let cases = [
        (
            Header::Short,
            90,
            "the file ends inside its 160-byte header",
        ),
        (
            Header::Cut {
                named_by: Some(BEFORE.into()),
            },
            0,
            "the segment ends inside its header, but \
             /var/lib/mr/journal-00000000000000000001.seg names it as the file after it: it \
             was cut",
        ),
        (
            Header::Cut { named_by: None },
            100,
            "the segment ends inside its header, but the journal's usage-order mark was written \
             after it was whole: it was cut",
        ),
        (Header::NotJournal, 0, "not a journal file"),
        (
            Header::Format { found: 1 },
            0,
            "a journal file of format 1, which this version does not read (it reads formats 2 \
             to 3): start it on an empty directory",
        ),
        (
            Header::Altered,
            0,
            "the segment header does not authenticate (it was altered)",
        ),
        (
            Header::NotSegment,
            0,
            "the header says this is not a segment",
        ),
        (Header::NotBase, 0, "the header says this is not a base"),
        (
            Header::Number {
                found: 7,
                expected: 2,
            },
            0,
            "the header names segment 7, not 2",
        ),
    ];
    for (header, offset, reason) in cases {
        assert_eq!(
            damaged(offset, header.into()),
            format!("{SEGMENT}: offset {offset}: {reason}")
        );
    }
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a table: every kind of damage beside the words an operator reads"
)]
fn damage_names_the_file_the_offset_and_what_is_wrong() {
    let id = ExecutionId::from_bytes([7; 16]);
    let holder = ExecutionId::from_bytes([8; 16]);
    let cases = [
        (
            Damage::Tally,
            "neither tally slot authenticates (they were altered)".to_owned(),
        ),
        (
            Damage::Cut {
                tear: Tear::RecordCut,
            },
            "a record cut short".to_owned(),
        ),
        (
            Damage::CutSynced {
                tear: Tear::Unwritten,
                record: 2,
                synced: 9,
            },
            "a record with unwritten zeros that does not authenticate, in record 2 of the 9 its \
             tally says were synced: the journal was damaged"
                .to_owned(),
        ),
        (
            Damage::Head,
            "a record head that was not written as one".to_owned(),
        ),
        (
            Damage::OutOfOrder {
                found: 5,
                expected: 3,
            },
            "record 5 where record 3 should be (records are missing or moved)".to_owned(),
        ),
        (
            Damage::Unauthentic,
            "a record that does not authenticate (it was altered, or the key is wrong)".to_owned(),
        ),
        (
            Damage::Fewer {
                records: 3,
                vouched: 4,
                newest: true,
            },
            "the file ends after 3 records, but its tally says 4 were synced before its last \
             write: records were cut off or removed"
                .to_owned(),
        ),
        (
            Damage::Fewer {
                records: 3,
                vouched: 4,
                newest: false,
            },
            "the file ends after 3 records, but its tally says 4 were written to it: records \
             were cut off or removed"
                .to_owned(),
        ),
        (
            Damage::Follows {
                file: 3,
                expected: 1,
            },
            "this segment follows file 3, not 1".to_owned(),
        ),
        (
            Damage::Unfollowed { expected: 1 },
            "this segment does not say that it follows file 1".to_owned(),
        ),
        (
            Damage::Shortened {
                file: 1,
                records: 9,
                left: 8,
            },
            "segment 1 held 9 records when this one began; 8 are left".to_owned(),
        ),
        (
            Damage::Malformed(crate::store::Malformed::RecordKind(9)),
            "unknown record kind 9".to_owned(),
        ),
        (
            Damage::KeyTaken { id, holder },
            format!("execution {id} has the idempotency key of execution {holder}"),
        ),
        (
            Damage::EventsMissing {
                id,
                first: 9,
                last: 6,
            },
            format!("execution {id}: events from 9 follow event 6; those between are missing"),
        ),
        (
            Damage::Refused(StoreError::AlreadyTerminal(id)),
            format!("execution {id} has already ended"),
        ),
    ];
    for (kind, reason) in cases {
        assert_eq!(
            damaged(4096, kind),
            format!("{SEGMENT}: offset 4096: {reason}")
        );
    }
    let tears = [
        (Tear::HeadCut, "a record head cut short"),
        (Tear::Zeros, "zeros where a record should be"),
    ];
    for (tear, reason) in tears {
        assert_eq!(
            damaged(4096, Damage::Cut { tear }),
            format!("{SEGMENT}: offset 4096: {reason}")
        );
    }
}

#[test]
fn io_a_missing_key_and_an_ending_refused_say_so() {
    let full = IoAt::new(IoOp::Write, SEGMENT, &std::io::Error::from_raw_os_error(28));
    assert_eq!(
        OpenError::Io(full.clone()).to_string(),
        format!("cannot write {SEGMENT}: No space left on device (os error 28)")
    );
    assert_eq!(
        OpenError::Compaction {
            dir: "/var/lib/mr".into(),
            error: full,
        }
        .to_string(),
        format!(
            "cannot compact the journal in /var/lib/mr: cannot write {SEGMENT}: No space left \
             on device (os error 28)"
        )
    );
    assert_eq!(OpenError::NoKey.to_string(), "the file store needs a key");
    let id = ExecutionId::from_bytes([7; 16]);
    let unended = OpenError::Unended {
        id,
        reason: Damage::Refused(StoreError::AlreadyTerminal(id)),
    };
    assert_eq!(
        unended.to_string(),
        format!("execution {id} was running and cannot be ended: execution {id} has already ended")
    );
}

#[tokio::test]
async fn a_store_directory_that_cannot_be_made_is_io_at_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store");
    fs::write(&file, "not a directory").unwrap();
    let error = open(&file, vec![key(1)]).unwrap_err();
    let OpenError::Io(IoAt {
        op: IoOp::CreateDir,
        path,
        kind,
        ..
    }) = &error
    else {
        panic!("{error}")
    };
    assert_eq!((path, *kind), (&file, std::io::ErrorKind::AlreadyExists));
    assert!(
        error.to_string().starts_with(&format!(
            "cannot create the store directory {}: ",
            file.display()
        )),
        "{error}"
    );
}
