//! The usage order's mark, `usage-order` beside the journal: the epoch of the store's usage
//! order and a floor under its next position (`store/usage.rs`). Positions themselves travel
//! with their facts in the journal; the mark keeps what a compaction would otherwise take
//! with the facts it drops: the epoch, and how far positions went. It is written when the
//! store is first opened and before each compaction makes its base the journal, replacing
//! the old mark atomically (written aside, synced, renamed).
//!
//! It holds two numbers and nothing of any execution, so it is not sealed.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::{OpenError, segment};
use crate::store::{At, IoAt, IoOp};

const NAME: &str = "usage-order";
const HEAD: &str = "model-runtime usage order v1";

/// The epoch and floor the mark in `dir` holds; `None` if there is none.
pub(super) fn read(dir: &Path) -> Result<Option<(u64, u64)>, OpenError> {
    let path = dir.join(NAME);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // Not UTF-8 is damage, as any other text that is not a mark is.
        Err(e) if e.kind() == io::ErrorKind::InvalidData => String::new(),
        Err(e) => return Err(IoAt::new(IoOp::Read, path, &e).into()),
    };
    let mut lines = text.lines();
    let parsed = match (lines.next(), lines.next().map(|l| l.split_once(' '))) {
        (Some(HEAD), Some(Some((epoch, next)))) => u64::from_str_radix(epoch, 16)
            .ok()
            .zip(next.parse::<u64>().ok()),
        _ => None,
    };
    parsed.map(Some).ok_or(OpenError::BadMark { path })
}

/// Replaces the mark in `dir` with `epoch` and `next`.
pub(super) fn write(dir: &Path, epoch: u64, next: u64) -> Result<(), IoAt> {
    let aside = dir.join(format!("{NAME}.new"));
    let mut file = fs::File::create(&aside).at(IoOp::Create, &aside)?;
    write!(file, "{HEAD}\n{epoch:016x} {next}\n").at(IoOp::Write, &aside)?;
    file.sync_all().at(IoOp::Sync, &aside)?;
    fs::rename(&aside, dir.join(NAME)).at(IoOp::Rename, &aside)?;
    segment::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_damage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        write(dir.path(), 0xfeed, 42).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some((0xfeed, 42)));
        write(dir.path(), 0xfeed, 43).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some((0xfeed, 43)));
        fs::write(dir.path().join(NAME), "garbage").unwrap();
        let error = read(dir.path()).unwrap_err();
        assert!(
            matches!(&error, OpenError::BadMark { path } if path == &dir.path().join(NAME)),
            "{error}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "{} is not a usage order mark",
                dir.path().join(NAME).display()
            )
        );
    }
}
