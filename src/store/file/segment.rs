//! One file of the journal: a segment, `journal-<number>.seg`, with the records appended to
//! it; or a compaction's base, `journal-<number>.base`, which holds all a store held up to
//! that segment (and makes it and every older file spent). A header, then sealed records.
//! Every start opens a new segment, so a file's records are only ever written by one
//! process, with one nonce prefix.
//!
//! # The tally
//! A file's records cannot prove that none is missing after them: a cut at a record boundary
//! leaves a file that reads cleanly. So each file vouches for its own records in its tally,
//! two slots after the header (written in place, where a cut at the end cannot reach):
//! - `durable`: the records that were synced before its last write began. None of them may be
//!   missing or damaged; only records after them can be a crash's torn tail.
//! - `written`: the records once that write is synced. Each write of records rewrites the
//!   tally in the same sync, so a crash leaves at most that one write in doubt; when the
//!   writer falls quiet, and at every clean stop, it settles the tally (`durable = written`),
//!   so nothing is in doubt at all.
//! - `next`: the file that follows it, set when the next segment is made (and in a base, the
//!   segment after it). A file whose successor is gone says so.
//!
//! Writes alternate between the two slots, so a torn tally write leaves the one before.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::seal::{HEADER_LEN, Kind, RECORDS_AT, Sealer, TALLY_LEN, Tally};
use crate::store::{At, IoAt, IoOp};

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
pub(super) fn list(dir: &Path) -> Result<Vec<(Kind, u64, PathBuf)>, IoAt> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).at(IoOp::Read, dir)? {
        let entry = entry.at(IoOp::Read, dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some((kind, number)) = parse(name) {
            found.push((kind, number, entry.path()));
        } else if name.ends_with(".compacting") {
            let path = entry.path();
            std::fs::remove_file(&path).at(IoOp::Remove, &path)?;
        }
    }
    found.sort_by_key(|(kind, number, _)| (*number, *kind as u8));
    Ok(found)
}

/// Why a new segment could not be made.
#[derive(Debug)]
pub(super) enum Rotation {
    /// Its file could not be made (no descriptor left, say): nothing was written, the journal
    /// goes on in the old segment, and a later rotation may succeed.
    Create(IoAt),
    /// Writing to the old segment or the new one failed: the journal cannot go on.
    Write(IoAt),
}

/// Makes the segment after `old` in `dir`, sealed by `sealer` (`old` by `old_sealer`), in an
/// order a crash cannot turn into a journal that does not start: the new file, empty, synced
/// with its directory entry (a crash now leaves a newest segment nobody names, which replay
/// removes); then `old` names it, every record of `old` vouched for; then the new file's
/// first record says what it follows.
pub(super) fn after(
    dir: &Path,
    old: &mut Segment,
    old_sealer: &Sealer,
    sealer: &Sealer,
) -> Result<Segment, Rotation> {
    let number = old.number + 1;
    let path = path(dir, Kind::Segment, number);
    let mut new =
        Segment::create(&path, Kind::Segment, number, sealer).map_err(Rotation::Create)?;
    if let Err(e) = sync_dir(dir) {
        // Nothing names it yet: the journal goes on without it.
        let _ = std::fs::remove_file(&path);
        return Err(Rotation::Create(e));
    }
    old.end(old_sealer, number).map_err(Rotation::Write)?;
    new.follow(sealer, old.number, old.counter)
        .map_err(Rotation::Write)?;
    Ok(new)
}

/// Makes a directory entry's change (a new file, a rename, a removal) durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), IoAt> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .at(IoOp::Sync, dir)
}

/// A segment being written.
#[derive(Debug)]
pub(super) struct Segment {
    file: File,
    /// Where it is (or, while a base is written aside, where it is being written), for errors.
    path: PathBuf,
    number: u64,
    prefix: [u8; 16],
    /// Records sealed, and records synced.
    counter: u64,
    synced: u64,
    /// The tally last written.
    tally: Tally,
    len: u64,
}

impl Segment {
    /// A new file of `kind` at `at` (its own name, or a temporary one to be renamed), its
    /// header and an empty tally written and synced.
    pub(super) fn create(
        at: &Path,
        kind: Kind,
        number: u64,
        sealer: &Sealer,
    ) -> Result<Self, IoAt> {
        let mut prefix = [0u8; 16];
        getrandom::fill(&mut prefix)
            .map_err(|e| io::Error::other(format!("no random nonce prefix: {e}")))
            .at(IoOp::Create, at)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(at)
            .at(IoOp::Create, at)?;
        let tally = Tally::default();
        let mut head = [0u8; RECORDS_AT];
        head[..HEADER_LEN].copy_from_slice(&sealer.header(kind, number, prefix));
        head[HEADER_LEN..HEADER_LEN + TALLY_LEN]
            .copy_from_slice(&sealer.seal_tally(number, prefix, &tally));
        if let Err(e) = file.write_all(&head).and_then(|()| file.sync_all()) {
            // A file this call made and could not finish is not left in the way of the next.
            let _ = std::fs::remove_file(at);
            return Err(IoAt::new(IoOp::Write, at, &e));
        }
        Ok(Self {
            file,
            path: at.to_owned(),
            number,
            prefix,
            counter: 0,
            synced: 0,
            tally,
            len: RECORDS_AT as u64,
        })
    }

    /// A segment an earlier process wrote, reopened to complete its tally (a start names the
    /// segment after it), never to take records. `records` it holds, `len` bytes long, its
    /// tally as last read. The tally write after the one read may have been torn: writes
    /// skip it, and go to its slot, so the slot read stays whole until they are synced.
    pub(super) fn reopen(
        path: &Path,
        number: u64,
        prefix: [u8; 16],
        records: u64,
        tally: Tally,
    ) -> Result<Self, IoAt> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .at(IoOp::Open, path)?;
        let len = file.metadata().at(IoOp::Read, path)?.len();
        Ok(Self {
            file,
            path: path.to_owned(),
            number,
            prefix,
            counter: records,
            synced: records,
            tally: Tally {
                sequence: tally.sequence + 1,
                ..tally
            },
            len,
        })
    }

    pub(super) fn number(&self) -> u64 {
        self.number
    }

    /// Writes the first record of a segment after file `file` of `records` records.
    pub(super) fn follow(&mut self, sealer: &Sealer, file: u64, records: u64) -> Result<(), IoAt> {
        let mut body = Vec::with_capacity(17);
        super::codec::follows(file, records, &mut body);
        let mut sealed = Vec::new();
        self.seal(sealer, &body, &mut sealed);
        self.write(sealer, &sealed)
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

    /// Writes sealed records and the tally that vouches for them, and syncs both.
    pub(super) fn write(&mut self, sealer: &Sealer, sealed: &[u8]) -> Result<(), IoAt> {
        self.append(sealed)?;
        self.write_tally(sealer, self.synced, self.tally.next)?;
        self.sync()?;
        self.synced = self.counter;
        Ok(())
    }

    /// Whether the tally leaves the last write in doubt (see the module's docs).
    pub(super) fn unsettled(&self) -> bool {
        self.tally.durable != self.counter
    }

    /// Vouches for every record written (the writer is quiet, or stops): a cut of any of them
    /// is then found.
    pub(super) fn settle(&mut self, sealer: &Sealer) -> Result<(), IoAt> {
        if !self.unsettled() {
            return Ok(());
        }
        self.end(sealer, self.tally.next)
    }

    /// Vouches for every record written and names the file that follows (0 for none), synced
    /// with whatever was appended: a base's last step, and a segment's once the next exists.
    pub(super) fn end(&mut self, sealer: &Sealer, next: u64) -> Result<(), IoAt> {
        self.synced = self.counter;
        self.write_tally(sealer, self.counter, next)?;
        self.sync()
    }

    /// What a crash during the last write leaves, for tests: a tally that vouches for only
    /// `durable` of the records, as if the write of the rest were still being synced.
    #[cfg(test)]
    pub(super) fn unsettle(&mut self, sealer: &Sealer, durable: u64) -> Result<(), IoAt> {
        self.write_tally(sealer, durable, self.tally.next)?;
        self.sync()
    }

    fn sync(&self) -> Result<(), IoAt> {
        self.file.sync_data().at(IoOp::Sync, &self.path)
    }

    /// Writes the next tally, `durable` records vouched for and every one sealed written, to
    /// the slot the one before did not use.
    fn write_tally(&mut self, sealer: &Sealer, durable: u64, next: u64) -> Result<(), IoAt> {
        let tally = Tally {
            sequence: self.tally.sequence + 1,
            durable,
            written: self.counter,
            next,
        };
        let slot = sealer.seal_tally(self.number, self.prefix, &tally);
        let at = HEADER_LEN + usize::from(tally.sequence % 2 == 1) * TALLY_LEN;
        self.file
            .write_all_at(&slot, at as u64)
            .at(IoOp::Write, &self.path)?;
        self.tally = tally;
        Ok(())
    }

    /// Writes sealed records without syncing them (a compaction syncs once, at its end).
    pub(super) fn append(&mut self, sealed: &[u8]) -> Result<(), IoAt> {
        self.file.write_all(sealed).at(IoOp::Write, &self.path)?;
        self.len += sealed.len() as u64;
        Ok(())
    }
}
