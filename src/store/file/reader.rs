//! One journal file read back: its header and tally checked, then its records one by one,
//! each opened under the file's key and numbered in order. What does not read is damage at
//! an offset, except a torn tail: records of the newest segment's last write that its tally
//! does not vouch for, which a crash cut short before the write's sync was done; those are
//! cut off here and logged. Replay (`replay.rs`) reads the files in order through it.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use super::error::{Damage, Header, Missing, OpenError, Tear};
use super::seal::{
    self, EARLIEST, HEADER_LEN, Kind, MAGIC, RECORD_HEAD, RECORDS_AT, Sealer, TAG_LEN, TALLY_LEN,
    Tally, VERSION,
};
use crate::store::{At, IoOp};

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
    ) -> Result<Self, OpenError> {
        let bad = |offset, kind: Damage| OpenError::Damaged {
            path: path.to_owned(),
            offset,
            kind,
        };
        let mut file = File::open(path).at(IoOp::Open, path)?;
        let len = file.metadata().at(IoOp::Read, path)?.len();
        let mut head = [0u8; RECORDS_AT];
        if len < RECORDS_AT as u64 {
            return Err(bad(len, Header::Short.into()));
        }
        file.read_exact(&mut head).at(IoOp::Read, path)?;
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&head[..HEADER_LEN]);
        if header[..8] != MAGIC {
            return Err(bad(0, Header::NotJournal.into()));
        }
        let found = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        if !(EARLIEST..=VERSION).contains(&found) {
            return Err(bad(0, Header::Format { found }.into()));
        }
        let key = seal::header_key(&header);
        let Some(sealer_index) = sealers.iter().position(|s| s.id() == key) else {
            return Err(OpenError::UnknownKey {
                path: path.to_owned(),
                key,
                configured: sealers.iter().map(Sealer::id).collect(),
            });
        };
        let sealer = &sealers[sealer_index];
        if sealer.check_header(&header).is_err() {
            return Err(bad(0, Header::Altered.into()));
        }
        if seal::header_kind(&header) != Some(kind) {
            let wrong = match kind {
                Kind::Base => Header::NotBase,
                Kind::Segment => Header::NotSegment,
            };
            return Err(bad(0, wrong.into()));
        }
        let found = seal::header_segment(&header);
        if found != number {
            return Err(bad(
                0,
                Header::Number {
                    found,
                    expected: number,
                }
                .into(),
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
            .ok_or_else(|| bad(HEADER_LEN as u64, Damage::Tally))?;
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
    pub(super) fn check_end(&self) -> Result<(), OpenError> {
        let vouched = if self.newest {
            self.tally.durable
        } else {
            self.tally.written
        };
        if self.counter < vouched || (!self.newest && self.counter != vouched) {
            return Err(self.damage(
                self.end,
                Damage::Fewer {
                    records: self.counter,
                    vouched,
                    newest: self.newest,
                },
            ));
        }
        if self.newest && self.tally.next != 0 {
            return Err(OpenError::Missing {
                path: self.path.clone(),
                missing: Missing::Next {
                    next: self.tally.next,
                },
            });
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

    /// `kind` of damage at `offset` of this file.
    pub(super) fn damage(&self, offset: u64, kind: Damage) -> OpenError {
        OpenError::Damaged {
            path: self.path.clone(),
            offset,
            kind,
        }
    }

    /// The next record's offset and opened body; `None` at the end (after cutting a torn
    /// tail off the newest segment).
    pub(super) fn next(&mut self) -> Result<Option<(u64, &[u8])>, OpenError> {
        let offset = self.end;
        let left = self.len - offset;
        if left == 0 {
            return Ok(None);
        }
        if left < RECORD_HEAD as u64 {
            return self.torn(offset, Tear::HeadCut);
        }
        let mut head = [0u8; RECORD_HEAD];
        self.read(&mut head)?;
        let Some((len, counter)) = seal::parse_head(&head) else {
            return if self.zeros_from(offset + RECORD_HEAD as u64)? && head == [0; RECORD_HEAD] {
                self.torn(offset, Tear::Zeros)
            } else {
                Err(self.damage(offset, Damage::Head))
            };
        };
        if counter != self.counter {
            return Err(self.damage(
                offset,
                Damage::OutOfOrder {
                    found: counter,
                    expected: self.counter,
                },
            ));
        }
        let len = len as usize;
        let whole = (RECORD_HEAD + len + TAG_LEN) as u64;
        if left < whole {
            return self.torn(offset, Tear::RecordCut);
        }
        self.body.resize(len, 0);
        let mut body = std::mem::take(&mut self.body);
        self.read(&mut body)?;
        let mut tag = [0u8; TAG_LEN];
        self.read(&mut tag)?;
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
                self.torn(offset, Tear::Unwritten)
            } else {
                Err(self.damage(offset, Damage::Unauthentic))
            };
        }
        self.counter += 1;
        self.end = offset + whole;
        Ok(Some((offset, &self.body)))
    }

    /// Reads the next bytes; the file ends where its length said it would not only if it
    /// shrank meanwhile, so any failure is I/O.
    fn read(&mut self, into: &mut [u8]) -> Result<(), OpenError> {
        Ok(self.file.read_exact(into).at(IoOp::Read, &self.path)?)
    }

    /// Whether every byte from `from` to the end is zero (a file extended by a crash but
    /// never written there). Reads on from where the reader is.
    fn zeros_from(&mut self, from: u64) -> Result<bool, OpenError> {
        let mut rest = Vec::new();
        let at = self.len - from;
        (&mut self.file)
            .take(at)
            .read_to_end(&mut rest)
            .at(IoOp::Read, &self.path)?;
        Ok(rest.iter().all(|b| *b == 0))
    }

    /// A torn tail at `offset`: cut off if this is the newest segment and the record is one
    /// its tally does not vouch for (of its last write, whose sync a crash may have cut
    /// short); damage otherwise.
    fn torn(&mut self, offset: u64, tear: Tear) -> Result<Option<(u64, &[u8])>, OpenError> {
        if !self.newest {
            return Err(self.damage(offset, Damage::Cut { tear }));
        }
        if self.counter < self.tally.durable {
            return Err(self.damage(
                offset,
                Damage::CutSynced {
                    tear,
                    record: self.counter,
                    synced: self.tally.durable,
                },
            ));
        }
        cut(&self.path, offset).at(IoOp::Cut, &self.path)?;
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
