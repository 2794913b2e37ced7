//! The usage order: every usage fact a store keeps, across executions, in the order the
//! store kept them, each at a cursor. A billing system reads it from its last cursor
//! (`StreamUsage`) and resumes after that cursor across its own restarts and the runtime's.
//!
//! A cursor is the store's epoch and a position. Positions only grow within an epoch; a
//! durable store keeps its epoch and its highest position across restarts, so a cursor taken
//! before a restart still resumes exactly. A memory store starts a new epoch each time: a
//! cursor of another epoch reads this store's order from its start (at least once, never a
//! fact skipped).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::SystemTime;

use crate::execution::{ExecutionId, UsageFact};

/// One fact in the usage order.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageEntry {
    /// The fact (with its position).
    pub fact: Arc<UsageFact>,
    /// The execution that reported it.
    pub execution_id: ExecutionId,
    /// The `usage.reported` event that carries it.
    pub sequence: u64,
    /// When the store kept it.
    pub time: SystemTime,
}

/// A place in a store's usage order; its text form is `EPOCH-POSITION` (hexadecimal epoch,
/// decimal position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageCursor {
    /// Which store's order (a durable store keeps it across restarts).
    pub epoch: u64,
    /// The position of the last fact read; 0 before the first.
    pub position: u64,
}

impl UsageCursor {
    /// The position to read after in the order of the store of `epoch`: this cursor's, if
    /// it is of that store, else its start.
    pub(crate) fn position_in(self, epoch: u64) -> u64 {
        if self.epoch == epoch {
            self.position
        } else {
            0
        }
    }
}

impl fmt::Display for UsageCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}-{}", self.epoch, self.position)
    }
}

/// A cursor that is not `EPOCH-POSITION`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("is not a usage cursor (EPOCH-POSITION, as a usage record's `cursor` says)")]
pub struct MalformedCursor;

impl FromStr for UsageCursor {
    type Err = MalformedCursor;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (epoch, position) = text.split_once('-').ok_or(MalformedCursor)?;
        if epoch.len() != 16 || position.is_empty() || position.starts_with('+') {
            return Err(MalformedCursor);
        }
        Ok(Self {
            epoch: u64::from_str_radix(epoch, 16).map_err(|_| MalformedCursor)?,
            position: position.parse().map_err(|_| MalformedCursor)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_from_its_text() {
        let cursor = UsageCursor {
            epoch: 0x00ab_cdef_0123_4567,
            position: 42,
        };
        assert_eq!(cursor.to_string(), "00abcdef01234567-42");
        assert_eq!(cursor.to_string().parse::<UsageCursor>().unwrap(), cursor);
        for bad in [
            "",
            "42",
            "00abcdef01234567",
            "00abcdef01234567-",
            "abc-1",
            "00abcdef01234567-+1",
            "00abcdef0123456g-1",
            "00abcdef01234567--1",
        ] {
            assert_eq!(bad.parse::<UsageCursor>(), Err(MalformedCursor), "{bad}");
        }
    }

    #[test]
    fn a_cursor_of_another_store_starts_at_the_beginning() {
        let cursor = UsageCursor {
            epoch: 7,
            position: 42,
        };
        assert_eq!(cursor.position_in(7), 42);
        assert_eq!(cursor.position_in(8), 0);
    }
}
