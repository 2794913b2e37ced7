//! What the SPI's operations return when they fail ([`StoreError`]), and the reasons it
//! carries: why a store refuses writes ([`Unavailable`]), the failure that poisoned a durable
//! store ([`WriteFailure`]), a broken invariant ([`Inconsistency`]) and I/O at a path
//! ([`IoAt`], which opening the file store names too).
//!
//! They are `Clone` and `Eq` (the conformance suite compares them, and a failure that
//! poisoned a store is handed to every write refused after it), so I/O is kept as its kind
//! and message, never as the `io::Error` itself. Callers see none of the detail: the runtime
//! maps every unavailability to `UNAVAILABLE` and every fault to `internal_error`, and only
//! the log gets the rest.

use std::io;
use std::path::{Path, PathBuf};

use crate::execution::{ExecutionId, IllegalTransition};

/// Why a store operation failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    /// No such execution (never existed, or expired).
    #[error("execution {0} not found")]
    NotFound(ExecutionId),
    /// The idempotency key is held by an execution of a different request.
    #[error("idempotency key is in use by execution {0} with a different request")]
    IdempotencyConflict(ExecutionId),
    /// Capacity (executions or bytes) is taken by non-terminal executions.
    #[error("store is full: {executions} executions ({bytes} bytes) are in progress")]
    Full {
        /// Executions held.
        executions: usize,
        /// Bytes held.
        bytes: u64,
    },
    /// The execution has ended; nothing more may be appended.
    #[error("execution {0} has already ended")]
    AlreadyTerminal(ExecutionId),
    /// The event breaks the state machine: a bug in the writer.
    #[error(transparent)]
    IllegalTransition(#[from] IllegalTransition),
    /// The store has failed (or is closed) and refuses writes; what it holds stays as it was
    /// last made durable. Callers may try again once it is back (after a restart).
    #[error("event store unavailable: {0}")]
    Unavailable(Unavailable),
    /// The store's own record of an execution breaks an invariant: a bug in the store,
    /// never the caller's doing.
    #[error("event store failed: {0}")]
    Inconsistent(Inconsistency),
    /// A store failed in a way of its own (a bug, a fault it cannot say more of, a write it
    /// cannot take), in its own words. The runtime logs the message and answers
    /// `internal_error`; a backend that is down, which callers should retry, is
    /// [`Unavailable::Backend`] instead. Of this crate's stores only PostgreSQL returns it,
    /// for an append of more usage facts than it numbers at once (4095).
    #[error("event store failed: {0}")]
    Backend(String),
}

/// Why a store refuses writes.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Unavailable {
    /// The store was closed (the runtime is shutting down).
    #[error("the event store is closed")]
    Closed,
    /// A write failed earlier and poisoned the store for good (after a failed fsync the page
    /// cache no longer says what reached the disk): this is that failure.
    #[error("the event store failed to write: {0}")]
    Failed(WriteFailure),
    /// A store outside this crate cannot be reached or has failed, in its own words (its
    /// database is down, say). Callers are told `UNAVAILABLE` and may retry.
    #[error("{0}")]
    Backend(String),
}

/// The failure that poisoned a durable store's journal.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum WriteFailure {
    /// Writing or syncing a file failed (a full disk, an I/O error).
    #[error(transparent)]
    Io(IoAt),
    /// A record was longer than the journal's length field can hold: it cannot be written
    /// whole.
    #[error("a record of {len} bytes is over the journal's limit of {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The longest the journal writes.
        max: usize,
    },
    /// The store's writer or compactor thread could not be started.
    #[error("cannot start the store's threads: {kind}")]
    Threads {
        /// What spawning the thread failed with.
        kind: io::ErrorKind,
    },
    /// The writer thread panicked.
    #[error("the writer thread panicked")]
    Panicked,
}

/// An invariant of a store's own records that does not hold: a bug.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum Inconsistency {
    /// An execution's events do not begin with `execution.accepted`.
    #[error("execution {0} does not begin with execution.accepted")]
    NotAccepted(ExecutionId),
    /// An append returned without the event it stored.
    #[error("the event appended to execution {0} was not stored")]
    Unstored(ExecutionId),
    /// The store's database refused a statement, or answered with a row the store cannot
    /// read (the log has the database's words).
    #[error("the store's database refused a statement or returned a row it cannot read")]
    Database,
}

/// I/O that failed, at a path: the operation, the path, and what the system said.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("cannot {op} {}: {message}", path.display())]
pub struct IoAt {
    /// What was being done.
    pub op: IoOp,
    /// The file or directory it was done to.
    pub path: PathBuf,
    /// The error's kind, to match on.
    pub kind: io::ErrorKind,
    /// The error as the system put it (`No space left on device (os error 28)`).
    pub message: String,
}

impl IoAt {
    /// `error`, met doing `op` to `path`.
    pub fn new(op: IoOp, path: impl Into<PathBuf>, error: &io::Error) -> Self {
        Self {
            op,
            path: path.into(),
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

/// An operation on a file or directory, as an error names it (`cannot {op} {path}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// Creating the store's directory.
    CreateDir,
    /// Creating a new file.
    Create,
    /// Opening a file.
    Open,
    /// Taking a file's advisory lock.
    Lock,
    /// Reading a file, or listing a directory.
    Read,
    /// Writing a file.
    Write,
    /// Syncing a file or a directory's entries.
    Sync,
    /// Renaming a file into place.
    Rename,
    /// Removing a file.
    Remove,
    /// Cutting a torn tail off the newest segment.
    Cut,
}

impl std::fmt::Display for IoOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::CreateDir => "create the store directory",
            Self::Create => "create",
            Self::Open => "open",
            Self::Lock => "lock",
            Self::Read => "read",
            Self::Write => "write",
            Self::Sync => "sync",
            Self::Rename => "rename",
            Self::Remove => "remove",
            Self::Cut => "cut a torn tail off",
        })
    }
}

/// Names the path and operation of an `io::Result`'s error.
pub(crate) trait At<T> {
    /// The error as an [`IoAt`]: `op` on `path`.
    fn at(self, op: IoOp, path: &Path) -> Result<T, IoAt>;
}

impl<T> At<T> for io::Result<T> {
    fn at(self, op: IoOp, path: &Path) -> Result<T, IoAt> {
        self.map_err(|e| IoAt::new(op, path, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk_full() -> IoAt {
        IoAt::new(
            IoOp::Sync,
            "/var/lib/mr/journal-00000000000000000003.seg",
            &io::Error::from_raw_os_error(28),
        )
    }

    #[test]
    fn io_names_the_operation_the_path_and_the_system_error() {
        let error = disk_full();
        assert_eq!(error.kind, io::ErrorKind::StorageFull);
        assert_eq!(
            error.to_string(),
            "cannot sync /var/lib/mr/journal-00000000000000000003.seg: \
             No space left on device (os error 28)"
        );
        let read: Result<(), IoAt> = Err(io::Error::from(io::ErrorKind::NotFound))
            .at(IoOp::Read, Path::new("/var/lib/mr/usage-order"));
        assert_eq!(
            read.unwrap_err().to_string(),
            "cannot read /var/lib/mr/usage-order: entity not found"
        );
    }

    #[test]
    fn an_unavailable_store_says_why_in_the_log() {
        let cases = [
            (
                Unavailable::Failed(WriteFailure::Io(disk_full())),
                "event store unavailable: the event store failed to write: cannot sync \
                 /var/lib/mr/journal-00000000000000000003.seg: No space left on device (os error 28)",
            ),
            (
                Unavailable::Failed(WriteFailure::TooLong {
                    len: 5_000_000_000,
                    max: 4_294_967_295,
                }),
                "event store unavailable: the event store failed to write: a record of \
                 5000000000 bytes is over the journal's limit of 4294967295",
            ),
            (
                Unavailable::Failed(WriteFailure::Threads {
                    kind: io::ErrorKind::OutOfMemory,
                }),
                "event store unavailable: the event store failed to write: cannot start the \
                 store's threads: out of memory",
            ),
            (
                Unavailable::Failed(WriteFailure::Panicked),
                "event store unavailable: the event store failed to write: the writer thread \
                 panicked",
            ),
            (
                Unavailable::Closed,
                "event store unavailable: the event store is closed",
            ),
            (
                Unavailable::Backend("the database is down".into()),
                "event store unavailable: the database is down",
            ),
        ];
        for (unavailable, said) in cases {
            assert_eq!(StoreError::Unavailable(unavailable).to_string(), said);
        }
    }

    #[test]
    fn a_fault_names_the_execution() {
        let id = ExecutionId::from_bytes([7; 16]);
        assert_eq!(
            StoreError::Inconsistent(Inconsistency::NotAccepted(id)).to_string(),
            format!("event store failed: execution {id} does not begin with execution.accepted")
        );
        assert_eq!(
            StoreError::Inconsistent(Inconsistency::Unstored(id)).to_string(),
            format!("event store failed: the event appended to execution {id} was not stored")
        );
        assert_eq!(
            StoreError::Backend("a constraint was violated".into()).to_string(),
            "event store failed: a constraint was violated"
        );
    }
}
