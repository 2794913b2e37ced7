//! One journal file read back: its header and tally checked, then its records one by one,
//! each opened under the file's key and numbered in order. What does not read is damage at
//! an offset, except a torn tail: records of the newest segment's last write that its tally
//! does not vouch for, which a crash cut short before the write's sync was done; those are
//! cut off here and logged. Replay (`replay.rs`) reads the files in order through it.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use super::seal::{
    self, HEADER_LEN, Kind, MAGIC, RECORD_HEAD, RECORDS_AT, Sealer, TAG_LEN, TALLY_LEN, Tally,
    VERSION,
};

/// A file as replay read it.
#[derive(Debug, Clone)]
pub(super) struct FileRead {
    pub kind: Kind,
    pub number: u64,
    pub path: PathBuf,
    pub prefix: [u8; 16],
    /// Records it holds (after any torn tail is cut).
    pub records: u64,
    pub tally: Tally,
    /// Which of the configured keys sealed it.
    pub sealer: usize,
}

/// Reads one segment's records.
pub(super) struct SegmentReader<'k> {
    path: PathBuf,
    file: BufReader<File>,
    /// The file's length, and where the records read so far end.
    len: u64,
    pub(super) end: u64,
    kind: Kind,
    number: u64,
    prefix: [u8; 16],
    sealer: &'k Sealer,
    pub(super) sealer_index: usize,
    tally: Tally,
    pub(super) counter: u64,
    newest: bool,
    body: Vec<u8>,
}

impl<'k> SegmentReader<'k> {
    /// Opens file `number` at `path` and checks its header and tally.
    pub(super) fn open(
        path: &Path,
        kind: Kind,
        number: u64,
        sealers: &'k [Sealer],
        newest: bool,
    ) -> Result<Self, String> {
        let name = path.display();
        let mut file = File::open(path).map_err(|e| format!("cannot open {name}: {e}"))?;
        let len = file
            .metadata()
            .map_err(|e| format!("cannot read {name}: {e}"))?
            .len();
        let mut head = [0u8; RECORDS_AT];
        if len < RECORDS_AT as u64 {
            return Err(format!(
                "{name}: the file ends at byte {len}, inside its {RECORDS_AT}-byte header"
            ));
        }
        file.read_exact(&mut head)
            .map_err(|e| format!("cannot read {name}: {e}"))?;
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&head[..HEADER_LEN]);
        if header[..8] != MAGIC {
            return Err(format!("{name}: offset 0: not a journal file"));
        }
        if header[8..12] != VERSION.to_le_bytes() {
            return Err(format!(
                "{name}: offset 0: a journal file of format {}, which this version does not \
                 read (it reads format {VERSION}): start it on an empty directory",
                u32::from_le_bytes([header[8], header[9], header[10], header[11]])
            ));
        }
        let key = seal::header_key(&header);
        let Some(sealer_index) = sealers.iter().position(|s| s.id() == key) else {
            let configured: Vec<String> = sealers.iter().map(|s| s.id().to_string()).collect();
            return Err(format!(
                "{name}: sealed with key {key}, which is not among the configured keys ({}): \
                 the key is wrong, or was removed before a compaction re-sealed this segment",
                configured.join(", ")
            ));
        };
        let sealer = &sealers[sealer_index];
        if sealer.check_header(&header).is_err() {
            return Err(format!(
                "{name}: offset 0: the segment header does not authenticate (it was altered)"
            ));
        }
        if seal::header_kind(&header) != Some(kind) {
            return Err(format!(
                "{name}: offset 0: the header says this is not a {}",
                if kind == Kind::Base {
                    "base"
                } else {
                    "segment"
                }
            ));
        }
        if seal::header_segment(&header) != number {
            return Err(format!(
                "{name}: offset 0: the header names segment {}, not {number}",
                seal::header_segment(&header)
            ));
        }
        let prefix = seal::header_prefix(&header);
        // The slot written last; the other may be older, or torn by a crash as it was written.
        let tally = head[HEADER_LEN..]
            .chunks_exact(TALLY_LEN)
            .filter_map(|slot| {
                let slot: &[u8; TALLY_LEN] = slot.try_into().ok()?;
                sealer.open_tally(number, prefix, slot)
            })
            .max_by_key(|tally| tally.sequence)
            .ok_or_else(|| {
                format!(
                    "{name}: offset {HEADER_LEN}: neither tally slot authenticates (they were \
                     altered)"
                )
            })?;
        Ok(Self {
            path: path.to_owned(),
            file: BufReader::with_capacity(256 * 1024, file),
            len,
            end: RECORDS_AT as u64,
            kind,
            number,
            prefix,
            sealer,
            sealer_index,
            tally,
            counter: 0,
            newest,
            body: Vec::new(),
        })
    }

    /// After the last record: the file must hold every record its tally vouches for (the
    /// newest segment, those synced before its last write; any other file, every one).
    pub(super) fn check_end(&self) -> Result<(), String> {
        let (vouched, what) = if self.newest {
            (self.tally.durable, "were synced before its last write")
        } else {
            (self.tally.written, "were written to it")
        };
        if self.counter < vouched || (!self.newest && self.counter != vouched) {
            return Err(self.damage(
                self.end,
                &format!(
                    "the file ends after {} records, but its tally says {vouched} {what}: \
                     records were cut off or removed",
                    self.counter
                ),
            ));
        }
        if self.newest && self.tally.next != 0 {
            return Err(self.damage(
                0,
                &format!(
                    "its tally names segment {} as the file after it, which is missing",
                    self.tally.next
                ),
            ));
        }
        Ok(())
    }

    /// What the next segment needs to follow this one.
    pub(super) fn as_read(&self) -> FileRead {
        FileRead {
            kind: self.kind,
            number: self.number,
            path: self.path.clone(),
            prefix: self.prefix,
            records: self.counter,
            tally: self.tally,
            sealer: self.sealer_index,
        }
    }

    /// An error naming the file and offset.
    pub(super) fn damage(&self, offset: u64, what: &str) -> String {
        format!("{}: offset {offset}: {what}", self.path.display())
    }

    /// The next record's offset and opened body; `None` at the end (after cutting a torn
    /// tail off the newest segment).
    pub(super) fn next(&mut self) -> Result<Option<(u64, &[u8])>, String> {
        let offset = self.end;
        let left = self.len - offset;
        if left == 0 {
            return Ok(None);
        }
        if left < RECORD_HEAD as u64 {
            return self.torn(offset, "a record head cut short");
        }
        let mut head = [0u8; RECORD_HEAD];
        self.read(&mut head, offset)?;
        let Some((len, counter)) = seal::parse_head(&head) else {
            return if self.zeros_from(offset + RECORD_HEAD as u64)? && head == [0; RECORD_HEAD] {
                self.torn(offset, "zeros where a record should be")
            } else {
                Err(self.damage(offset, "a record head that was not written as one"))
            };
        };
        if counter != self.counter {
            return Err(self.damage(
                offset,
                &format!(
                    "record {counter} where record {} should be (records are missing or moved)",
                    self.counter
                ),
            ));
        }
        let len = len as usize;
        let whole = (RECORD_HEAD + len + TAG_LEN) as u64;
        if left < whole {
            return self.torn(offset, "a record cut short");
        }
        self.body.resize(len, 0);
        let mut body = std::mem::take(&mut self.body);
        self.read(&mut body, offset)?;
        let mut tag = [0u8; TAG_LEN];
        self.read(&mut tag, offset)?;
        let opened = self
            .sealer
            .open_record(self.number, self.prefix, counter, &mut body, &tag);
        self.body = body;
        if opened.is_err() {
            // Torn: a record of the newest segment's last batch (one write, one sync that a
            // crash interrupted), with a run of zeros where its data was never written; the
            // records after it in that batch go with it (none was acknowledged). Ciphertext
            // holds 16 zero bytes in a row with odds of 2^-128; a record altered on disk does
            // not, and is damage wherever it is.
            let unwritten = self
                .body
                .iter()
                .chain(&tag)
                .fold((0, 0), |(run, most), b| {
                    let run = if *b == 0 { run + 1 } else { 0 };
                    (run, most.max(run))
                })
                .1
                >= 16;
            return if unwritten {
                self.torn(
                    offset,
                    "a record with unwritten zeros that does not authenticate",
                )
            } else {
                Err(self.damage(
                    offset,
                    "a record that does not authenticate (it was altered, or the key is wrong)",
                ))
            };
        }
        self.counter += 1;
        self.end = offset + whole;
        Ok(Some((offset, &self.body)))
    }

    fn read(&mut self, into: &mut [u8], offset: u64) -> Result<(), String> {
        self.file
            .read_exact(into)
            .map_err(|e| self.damage(offset, &format!("cannot read: {e}")))
    }

    /// Whether every byte from `from` to the end is zero (a file extended by a crash but
    /// never written there). Reads on from where the reader is.
    fn zeros_from(&mut self, from: u64) -> Result<bool, String> {
        let mut rest = Vec::new();
        let at = self.len - from;
        (&mut self.file)
            .take(at)
            .read_to_end(&mut rest)
            .map_err(|e| self.damage(from, &format!("cannot read: {e}")))?;
        Ok(rest.iter().all(|b| *b == 0))
    }

    /// A torn tail at `offset`: cut off if this is the newest segment and the record is one
    /// its tally does not vouch for (of its last write, whose sync a crash may have cut
    /// short); damage otherwise.
    fn torn(&mut self, offset: u64, what: &str) -> Result<Option<(u64, &[u8])>, String> {
        if !self.newest {
            return Err(self.damage(offset, what));
        }
        if self.counter < self.tally.durable {
            return Err(self.damage(
                offset,
                &format!(
                    "{what}, in record {} of the {} its tally says were synced: the \
                     journal was damaged",
                    self.counter, self.tally.durable
                ),
            ));
        }
        cut(&self.path, offset)
            .map_err(|e| self.damage(offset, &format!("cannot cut a torn tail: {e}")))?;
        tracing::warn!(
            file = %self.path.display(),
            offset,
            dropped_bytes = self.len - offset,
            "the journal ended in a torn record (a crash while writing it): cut it off; it was never acknowledged"
        );
        self.len = offset;
        Ok(None)
    }
}

fn cut(path: &Path, at: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(at)?;
    file.sync_all()
}
