//! One file of the journal: a segment, `journal-<number>.seg`, with the records appended to
//! it; or a compaction's base, `journal-<number>.base`, which holds all a store held up to
//! that segment (and makes it and every older file spent). A header, then sealed records.
//! Every start opens a new segment, so a file is only ever written by one process, with one
//! nonce prefix.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::seal::{Kind, Sealer};

/// The file name of segment (or base) `number`.
pub(super) fn path(dir: &Path, kind: Kind, number: u64) -> PathBuf {
    let suffix = match kind {
        Kind::Segment => "seg",
        Kind::Base => "base",
    };
    dir.join(format!("journal-{number:020}.{suffix}"))
}

/// The kind and number a file name names, if it is a journal file's.
pub(super) fn parse(name: &str) -> Option<(Kind, u64)> {
    let rest = name.strip_prefix("journal-")?;
    let (digits, kind) = if let Some(digits) = rest.strip_suffix(".seg") {
        (digits, Kind::Segment)
    } else {
        (rest.strip_suffix(".base")?, Kind::Base)
    };
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok().map(|n| (kind, n)))
        .flatten()
}

/// The journal's files in `dir`, oldest first (a base after the segment of its number);
/// leftovers of a compaction a crash interrupted are removed.
pub(super) fn list(dir: &Path) -> io::Result<Vec<(Kind, u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some((kind, number)) = parse(name) {
            found.push((kind, number, entry.path()));
        } else if name.ends_with(".compacting") {
            std::fs::remove_file(entry.path())?;
        }
    }
    found.sort_by_key(|(kind, number, _)| (*number, *kind as u8));
    Ok(found)
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
    /// A new file of `kind` at `at` (its own name, or a temporary one to be renamed), its
    /// header written and synced.
    pub(super) fn create(at: &Path, kind: Kind, number: u64, sealer: &Sealer) -> io::Result<Self> {
        let mut prefix = [0u8; 16];
        getrandom::fill(&mut prefix).map_err(|e| io::Error::other(e.to_string()))?;
        let mut file = OpenOptions::new().write(true).create_new(true).open(at)?;
        let header = sealer.header(kind, number, prefix);
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

    /// Writes the first record of a segment after file `file` of `records` records.
    pub(super) fn follow(&mut self, sealer: &Sealer, file: u64, records: u64) -> io::Result<()> {
        let mut body = Vec::with_capacity(17);
        super::codec::follows(file, records, &mut body);
        let mut sealed = Vec::new();
        self.seal(sealer, &body, &mut sealed);
        self.write(&sealed)
    }

    /// Records sealed into it so far.
    pub(super) fn records(&self) -> u64 {
        self.counter
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
