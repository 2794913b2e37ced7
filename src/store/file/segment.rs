//! One segment file of the journal: `journal-<number>.seg`, a header and sealed records
//! appended to it. Every start opens a new segment, so a segment is only ever written by
//! one process, with one nonce prefix.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::seal::Sealer;

/// The file name of segment `number`.
pub(super) fn path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("journal-{number:020}.seg"))
}

/// The segment number a file name names, if it is a segment's.
pub(super) fn number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("journal-")?.strip_suffix(".seg")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Makes a directory entry's change (a new file, a rename, a removal) durable.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A segment being written.
#[derive(Debug)]
pub(super) struct Segment {
    file: File,
    number: u64,
    prefix: [u8; 16],
    counter: u64,
    len: u64,
}

impl Segment {
    /// A new segment at `at` (its own file, or a temporary one to be renamed), its header
    /// written and synced.
    pub(super) fn create(at: &Path, number: u64, sealer: &Sealer) -> io::Result<Self> {
        let mut prefix = [0u8; 16];
        getrandom::fill(&mut prefix).map_err(|e| io::Error::other(e.to_string()))?;
        let mut file = OpenOptions::new().write(true).create_new(true).open(at)?;
        let header = sealer.header(number, prefix);
        file.write_all(&header)?;
        file.sync_all()?;
        Ok(Self {
            file,
            number,
            prefix,
            counter: 0,
            len: header.len() as u64,
        })
    }

    pub(super) fn number(&self) -> u64 {
        self.number
    }

    /// Bytes in the file.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Seals `body` as the next record, to the back of `out` (written by [`write`]).
    pub(super) fn seal(&mut self, sealer: &Sealer, body: &[u8], out: &mut Vec<u8>) {
        sealer.seal_record(self.number, self.prefix, self.counter, body, out);
        self.counter += 1;
    }

    /// Writes sealed records and syncs their data to disk.
    pub(super) fn write(&mut self, sealed: &[u8]) -> io::Result<()> {
        self.append(sealed)?;
        self.file.sync_data()
    }

    /// Writes sealed records without syncing them (a compaction syncs once, at its end).
    pub(super) fn append(&mut self, sealed: &[u8]) -> io::Result<()> {
        self.file.write_all(sealed)?;
        self.len += sealed.len() as u64;
        Ok(())
    }

    /// Syncs what was written.
    pub(super) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}
