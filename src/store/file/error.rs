//! Why the file store did not open ([`OpenError`]): the directory is another process's, a
//! file the journal's chain needs is gone ([`Missing`]), a file holds what it must not at an
//! offset ([`Damage`], with [`Header`] and [`Tear`]), a file was sealed with a key that is
//! not configured, or I/O failed at a path. Operators read these at start-up (`serve` prints
//! `cannot start: store: {error}`): each names the file, and the offset where there is one,
//! and says what is wrong in words; code matches the variants.

use std::path::{Path, PathBuf};

use super::seal::{EARLIEST, KeyId, RECORDS_AT, VERSION};
use crate::execution::ExecutionId;
use crate::store::memory::Unrestorable;
use crate::store::{IoAt, StoreError};

/// Why [`FileStore::open`](super::FileStore::open) failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another process holds the directory's lock: one process may write it at a time.
    #[error(
        "the store directory {} is in use by {}: one process may write it at a time",
        dir.display(),
        holder(*pid)
    )]
    Locked {
        /// The store's directory.
        dir: PathBuf,
        /// The holder's pid, as its lock file says (`None` when it does not say).
        pid: Option<u32>,
    },
    /// A file the journal's chain needs is gone.
    #[error("{}: {missing}", path.display())]
    Missing {
        /// The file that shows it (for a journal whose files are all gone, the directory).
        path: PathBuf,
        /// What is missing.
        missing: Missing,
    },
    /// A file holds what it must not, at `offset`.
    #[error("{}: offset {offset}: {kind}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// Where in it.
        offset: u64,
        /// What is wrong there.
        kind: Damage,
    },
    /// A file was sealed with a key the configuration does not hold.
    #[error(
        "{}: sealed with key {key}, which is not among the configured keys ({}): the key is \
         wrong, or was removed before a compaction re-sealed this segment",
        path.display(),
        ids(configured)
    )]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The id of the key that sealed it.
        key: KeyId,
        /// The ids of the configured keys.
        configured: Vec<KeyId>,
    },
    /// The usage order's mark (`usage-order`) does not read.
    #[error("{} is not a usage order mark", path.display())]
    BadMark {
        /// The mark's file.
        path: PathBuf,
    },
    /// The store was given no key (a configuration that was not validated).
    #[error("the file store needs a key")]
    NoKey,
    /// I/O failed.
    #[error(transparent)]
    Io(#[from] IoAt),
    /// The compaction every start with more than one file runs failed.
    #[error("cannot compact the journal in {}: {error}", dir.display())]
    Compaction {
        /// The store's directory.
        dir: PathBuf,
        /// The I/O that failed.
        error: IoAt,
    },
    /// An execution the journal left running could not be ended with `outcome_unknown`.
    #[error("execution {id} was running and cannot be ended: {reason}")]
    Unended {
        /// The execution.
        id: ExecutionId,
        /// Why the store refused its ending.
        reason: Damage,
    },
}

fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("another process (pid {pid})"),
        None => "another process".to_owned(),
    }
}

fn ids(keys: &[KeyId]) -> String {
    keys.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A file missing from the journal's chain: each file names the one after it in its tally,
/// and each segment the one before it in its first record (`segment.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    /// Segment numbers jump (the error names the file after the gap).
    #[error("the journal jumps from segment {from} to {to}: the files between are missing")]
    Gap {
        /// The number before the gap.
        from: u64,
        /// The number after it.
        to: u64,
    },
    /// Every journal file is gone, but the usage-order mark, written once a journal exists,
    /// is there (the error names the directory).
    #[error(
        "the journal's files are missing, but its usage-order mark is there (it is written \
         once a journal exists): restore the journal-*.seg and journal-*.base files, or remove \
         usage-order as well to start an empty store"
    )]
    Journal,
    /// The newest file's tally names a file after it that is gone: a removed newest
    /// segment, or a base's successor.
    #[error("its tally names segment {next} as the file after it, which is missing")]
    Next {
        /// The segment it names.
        next: u64,
    },
    /// The oldest segment follows a file that is gone.
    #[error("this segment follows file {file}, which is missing")]
    Previous {
        /// The file it follows.
        file: u64,
    },
    /// The file before this one names another file after it, or none: this one is a newest
    /// segment nothing names, or stands where another should.
    #[error(
        "this file follows {}, whose tally names {} as the file after it",
        before.display(),
        named(*names)
    )]
    Unnamed {
        /// The file before it.
        before: PathBuf,
        /// The segment that file names (`None`: none).
        names: Option<u64>,
    },
}

fn named(names: Option<u64>) -> String {
    match names {
        Some(next) => format!("segment {next}"),
        None => "no file".to_owned(),
    }
}

/// What is wrong in a file, at an offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    /// The header is cut, altered or not this file's.
    #[error(transparent)]
    Header(#[from] Header),
    /// Neither tally slot authenticates.
    #[error("neither tally slot authenticates (they were altered)")]
    Tally,
    /// A record cut short or never written, in a file that is not the newest segment.
    #[error("{tear}")]
    Cut {
        /// How it is cut.
        tear: Tear,
    },
    /// A record cut short or never written, among those the newest segment's tally says
    /// were synced: not a crash's torn tail.
    #[error(
        "{tear}, in record {record} of the {synced} its tally says were synced: the journal \
         was damaged"
    )]
    CutSynced {
        /// How it is cut.
        tear: Tear,
        /// The record's number in its file.
        record: u64,
        /// The records the tally vouches for.
        synced: u64,
    },
    /// A record's head fails its check, with bytes other than zeros around it.
    #[error("a record head that was not written as one")]
    Head,
    /// A record's number is not the next one.
    #[error("record {found} where record {expected} should be (records are missing or moved)")]
    OutOfOrder {
        /// The number it has.
        found: u64,
        /// The number it should have.
        expected: u64,
    },
    /// A record does not open under the file's key.
    #[error("a record that does not authenticate (it was altered, or the key is wrong)")]
    Unauthentic,
    /// The file holds fewer records than its tally vouches for.
    #[error(
        "the file ends after {records} records, but its tally says {vouched} {}: records \
         were cut off or removed",
        if *newest { "were synced before its last write" } else { "were written to it" }
    )]
    Fewer {
        /// The records it holds.
        records: u64,
        /// The records its tally vouches for.
        vouched: u64,
        /// Whether it is the newest segment (whose last write may be in doubt).
        newest: bool,
    },
    /// A segment's first record names another file before it.
    #[error("this segment follows file {file}, not {expected}")]
    Follows {
        /// The file it names.
        file: u64,
        /// The file before it.
        expected: u64,
    },
    /// A segment's first record does not name the file before it.
    #[error("this segment does not say that it follows file {expected}")]
    Unfollowed {
        /// The file before it.
        expected: u64,
    },
    /// The segment before lost records after this one began.
    #[error("segment {file} held {records} records when this one began; {left} are left")]
    Shortened {
        /// The segment before.
        file: u64,
        /// The records it held then, as this segment's first record says.
        records: u64,
        /// The records it holds now.
        left: u64,
    },
    /// A record opens, but its contents do not decode.
    #[error(transparent)]
    Malformed(Malformed),
    /// A create record's idempotency key is held by another execution.
    #[error("execution {id} has the idempotency key of execution {holder}")]
    KeyTaken {
        /// The execution created.
        id: ExecutionId,
        /// The one holding its key.
        holder: ExecutionId,
    },
    /// An append record's events do not follow the execution's last.
    #[error("execution {id}: events from {first} follow event {last}; those between are missing")]
    EventsMissing {
        /// The execution.
        id: ExecutionId,
        /// The record's first event.
        first: u64,
        /// The execution's last event before it.
        last: u64,
    },
    /// The store refused what a record says (an event the state machine does not allow).
    #[error(transparent)]
    Refused(StoreError),
}

impl Damage {
    /// Why the memory store would not restore a record of `id`.
    pub(super) fn unrestorable(id: ExecutionId, why: Unrestorable) -> Self {
        match why {
            Unrestorable::KeyTaken { holder } => Self::KeyTaken { id, holder },
            Unrestorable::Gap { first, last } => Self::EventsMissing { id, first, last },
            Unrestorable::Refused(error) => Self::Refused(error),
        }
    }
}

/// What is wrong with a file's header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Header {
    /// The file ends inside its header.
    #[error("the file ends inside its {RECORDS_AT}-byte header")]
    Short,
    /// The newest segment ends inside its header (or holds only zeros), yet the journal
    /// vouches that it was whole: the file before names it, or the usage-order mark was
    /// written after it.
    #[error("the segment ends inside its header, but {}: it was cut", witness(named_by.as_deref()))]
    Cut {
        /// The file that names it (`None`: the usage-order mark vouches for it).
        named_by: Option<PathBuf>,
    },
    /// The file does not start as a journal file does.
    #[error("not a journal file")]
    NotJournal,
    /// A journal file of another format.
    #[error(
        "a journal file of format {found}, which this version does not read (it reads formats \
         {EARLIEST} to {VERSION}): start it on an empty directory"
    )]
    Format {
        /// Its format.
        found: u32,
    },
    /// The header's tag does not authenticate it.
    #[error("the segment header does not authenticate (it was altered)")]
    Altered,
    /// A segment's file whose header says it is a base.
    #[error("the header says this is not a segment")]
    NotSegment,
    /// A base's file whose header says it is a segment.
    #[error("the header says this is not a base")]
    NotBase,
    /// The header names another file number than the file's name.
    #[error("the header names segment {found}, not {expected}")]
    Number {
        /// The number the header names.
        found: u64,
        /// The number the file's name says.
        expected: u64,
    },
}

fn witness(named_by: Option<&Path>) -> String {
    match named_by {
        Some(before) => format!("{} names it as the file after it", before.display()),
        None => "the journal's usage-order mark was written after it was whole".to_owned(),
    }
}

/// How a record is cut: what a crash leaves of a write whose sync did not finish (a torn
/// tail, cut off at the start when the newest segment's tally does not vouch for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Tear {
    /// Fewer bytes than a record's head.
    #[error("a record head cut short")]
    HeadCut,
    /// Only zeros from here to the end.
    #[error("zeros where a record should be")]
    Zeros,
    /// Fewer bytes than the record's head says it has.
    #[error("a record cut short")]
    RecordCut,
    /// A record that does not open, holding a run of zeros where data was never written.
    #[error("a record with unwritten zeros that does not authenticate")]
    Unwritten,
}

/// Why a record (or one event of it) does not decode: the file store's journal, and the
/// payloads the PostgreSQL store keeps in the same form.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Malformed {
    /// It ends before a field it holds.
    #[error("the record ends early ({left} bytes left, {needed} needed)")]
    Short {
        /// Bytes left.
        left: usize,
        /// Bytes the next field needs.
        needed: usize,
    },
    /// Bytes follow its end.
    #[error("{bytes} bytes follow the {after}")]
    Trailing {
        /// `record` or `event`.
        after: &'static str,
        /// How many.
        bytes: usize,
    },
    /// Its text is not UTF-8.
    #[error("text that is not UTF-8")]
    NotUtf8,
    /// A JSON payload does not decode: the decoder's reason.
    #[error("a payload does not decode: {0}")]
    Payload(String),
    /// A create record's first event is not `execution.accepted`.
    #[error("a create record's first event is not execution.accepted")]
    NotAccepted,
    /// An append record carries an `execution.accepted`.
    #[error("execution.accepted inside an append record")]
    AcceptedInAppend,
    /// An append record starts at sequence 0.
    #[error("an append record starts at sequence 0")]
    SequenceZero,
    /// An append record counts more events, or an event more items (tool calls, targets,
    /// names), than its bytes could hold.
    #[error("{count} events or items cannot fit in {bytes} bytes")]
    Count {
        /// Events or items it counts.
        count: u32,
        /// Bytes left for them.
        bytes: usize,
    },
    /// A record of a kind this build does not know.
    #[error("unknown record kind {0}")]
    RecordKind(u8),
    /// An event of a kind this build does not know.
    #[error("unknown event kind {0}")]
    EventKind(u8),
    /// A reasoning piece of a kind this build does not know.
    #[error("unknown reasoning piece {0}")]
    ReasoningPiece(u8),
    /// A field's code this build does not know: the field, and the code.
    #[error("unknown {0} {1}")]
    Code(&'static str, u8),
    /// A value no time or duration can hold: which.
    #[error("{0} out of range")]
    OutOfRange(&'static str),
}
