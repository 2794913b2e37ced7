//! Replay: the journal's files, oldest first, read back into the memory store. Every record
//! must open under one of the configured keys and follow the one before it, and every file
//! must hold the records its tally vouches for and name the file after it (`segment.rs`;
//! one file's records are read by `reader.rs`). The one exception is a torn tail: records of
//! the newest segment's last write, which a crash cut short before its sync was done (so
//! never acknowledged), after the records its tally vouches for; it is cut off and logged.
//! Anything else that does not read is damage, and a file the chain needs that is gone is
//! missing: opening fails with the file, the offset and what is wrong ([`OpenError`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::codec::{self, Record};
use super::compact;
use super::error::{Damage, Header, Missing, OpenError};
use super::reader::{FileRead, SegmentReader};
use super::seal::{Kind, RECORDS_AT, Sealer};
use super::segment;
use crate::store::memory::Unrestorable;
use crate::store::{At, IoAt, IoOp, MemoryStore, NewExecution};

/// What replay found.
#[derive(Debug, Default)]
pub(super) struct Replayed {
    /// The newest file, which the next segment follows (`None` for an empty journal).
    pub newest: Option<FileRead>,
    /// Segment files read.
    pub segments: usize,
    /// Records and events read.
    pub records: u64,
    pub events: u64,
    /// Bytes of the segment files, after any torn tail is cut.
    pub disk: u64,
    /// Whether a segment was sealed with a key other than the first (compaction re-seals).
    pub old_keys: bool,
    /// How long it took.
    pub took: std::time::Duration,
}

/// The files replay reads, oldest first: the newest base, if there is one, and the segments
/// after it, which must follow one another without a gap. Files the base makes spent (left
/// by a crash during a compaction) are removed first.
pub(super) fn files(dir: &Path) -> Result<Vec<(Kind, u64, PathBuf)>, OpenError> {
    compact::remove_spent(dir)?;
    let files = segment::list(dir)?;
    for pair in files.windows(2) {
        let ((_, before, _), (kind, after, path)) = (&pair[0], &pair[1]);
        if *kind == Kind::Base || *after != before + 1 {
            return Err(OpenError::Missing {
                path: path.clone(),
                missing: Missing::Gap {
                    from: *before,
                    to: *after,
                },
            });
        }
    }
    Ok(files)
}

/// Reads every file into `memory`. `marked`: whether the directory holds the usage order's
/// mark, which a store writes once its first segment is whole, so a journal whose files are
/// all gone is told from one never begun.
pub(super) fn replay(
    dir: &Path,
    sealers: &[Sealer],
    memory: &MemoryStore,
    marked: bool,
) -> Result<Replayed, OpenError> {
    #[expect(
        clippy::disallowed_methods,
        reason = "how long the start read the disk, in real time, for the log"
    )]
    let started = Instant::now();
    let files = files(dir)?;
    if files.is_empty() && marked {
        return Err(OpenError::Missing {
            path: dir.to_owned(),
            missing: Missing::Journal,
        });
    }
    let mut replayed = Replayed {
        segments: files.len(),
        ..Replayed::default()
    };
    let mut previous: Option<FileRead> = None;
    for (i, (kind, number, path)) in files.iter().enumerate() {
        let newest = i + 1 == files.len();
        let named = previous.as_ref().is_some_and(|p| p.tally.next == *number);
        if newest
            && *kind == Kind::Segment
            && cut_in_header(path, previous.as_ref(), named, marked)?
        {
            continue;
        }
        let mut reader = SegmentReader::open(path, *kind, *number, sealers, newest)?;
        replayed.old_keys |= reader.sealer_index != 0;
        let before = previous.as_ref().map(|p| (p.kind, p.number, p.records));
        read_records(
            &mut reader,
            (*kind, path),
            before,
            i == 0,
            memory,
            &mut replayed,
        )?;
        if let Some(before) = &previous
            && !named
        {
            if before.tally.next == 0 && newest && reader.counter == 0 {
                // A rotation a crash cut short: the file was made, and nothing named it or
                // was written to it. The file before is the newest again.
                remove(
                    path,
                    "the newest segment holds nothing and nothing names it (a crash as it was created): removed it",
                )?;
                break;
            }
            return Err(OpenError::Missing {
                path: path.clone(),
                missing: Missing::Unnamed {
                    before: before.path.clone(),
                    names: (before.tally.next != 0).then_some(before.tally.next),
                },
            });
        }
        reader.check_end()?;
        replayed.disk += reader.end;
        previous = Some(reader.as_read());
    }
    replayed.newest = previous;
    replayed.took = started.elapsed();
    if replayed.records > 0 {
        tracing::info!(
            segments = replayed.segments,
            records = replayed.records,
            events = replayed.events,
            took = ?replayed.took,
            "replayed the journal"
        );
    }
    Ok(replayed)
}

/// Whether the newest segment, `path`, ends inside its header: a crash as it was created,
/// cut (the file removed) unless a file before it names it or the journal was begun with it,
/// which makes it damage.
fn cut_in_header(
    path: &Path,
    previous: Option<&FileRead>,
    named: bool,
    marked: bool,
) -> Result<bool, OpenError> {
    let Some(len) = header_cut_short(path)? else {
        return Ok(false);
    };
    if named || (previous.is_none() && marked) {
        return Err(OpenError::Damaged {
            path: path.to_owned(),
            offset: len,
            kind: Header::Cut {
                named_by: previous.map(|p| p.path.clone()),
            }
            .into(),
        });
    }
    remove(
        path,
        "the newest segment ends inside its header (a crash as it was created): removed it",
    )?;
    Ok(true)
}

/// Reads the records of one file (its kind and path) into `memory`. A segment's first record must follow the file
/// before it (`before`: its kind, number and record count), or nothing when it is the first.
fn read_records(
    reader: &mut SegmentReader,
    (kind, path): (Kind, &Path),
    before: Option<(Kind, u64, u64)>,
    first_file: bool,
    memory: &MemoryStore,
    replayed: &mut Replayed,
) -> Result<(), OpenError> {
    let mut first = true;
    while let Some((offset, body)) = reader.next()? {
        let record =
            codec::decode(body).map_err(|e| reader.damage(offset, Damage::Malformed(e)))?;
        if std::mem::take(&mut first) && kind == Kind::Segment {
            follows(&record, before, first_file).map_err(|broken| match broken {
                Broken::Damage(kind) => reader.damage(offset, kind),
                Broken::Missing(missing) => OpenError::Missing {
                    path: path.to_owned(),
                    missing,
                },
            })?;
        }
        replayed.records += 1;
        apply(record, memory, &mut replayed.events).map_err(|kind| reader.damage(offset, kind))?;
    }
    Ok(())
}

fn remove(path: &Path, why: &str) -> Result<(), IoAt> {
    fs::remove_file(path).at(IoOp::Remove, path)?;
    tracing::warn!(file = %path.display(), "{why}");
    Ok(())
}

/// How a segment's first record breaks the chain: by what it says (damage at its offset), or
/// by naming a file that is gone.
enum Broken {
    Damage(Damage),
    Missing(Missing),
}

/// Checks a segment's first record: after another file it must say which, and (after a
/// segment) how many records that file held. The journal's first segment follows nothing.
fn follows(
    record: &Record,
    previous: Option<(Kind, u64, u64)>,
    oldest: bool,
) -> Result<(), Broken> {
    match (record, previous) {
        (Record::Follows { file, .. }, None) if oldest => {
            Err(Broken::Missing(Missing::Previous { file: *file }))
        }
        (Record::Follows { file, records }, Some((kind, number, held))) => {
            if *file != number {
                Err(Broken::Damage(Damage::Follows {
                    file: *file,
                    expected: number,
                }))
            } else if kind == Kind::Segment && *records != held {
                Err(Broken::Damage(Damage::Shortened {
                    file: number,
                    records: *records,
                    left: held,
                }))
            } else {
                Ok(())
            }
        }
        (_, None) => Ok(()),
        (_, Some((_, number, _))) => Err(Broken::Damage(Damage::Unfollowed { expected: number })),
    }
}

fn apply(record: Record, memory: &MemoryStore, events: &mut u64) -> Result<(), Damage> {
    match record {
        Record::Follows { .. } => Ok(()),
        Record::Create {
            id,
            at,
            idempotency,
            labels,
            accepted,
        } => {
            *events += 1;
            memory
                .restore_create(
                    at,
                    NewExecution {
                        id,
                        accepted,
                        labels,
                        idempotency,
                        input_bytes: 0,
                    },
                )
                .map_err(|why| Damage::unrestorable(id, why))
        }
        Record::Append {
            id,
            first,
            at,
            payloads,
        } => {
            *events += payloads.len() as u64;
            memory
                .restore_append(id, first, at, payloads)
                .map(drop)
                .map_err(|why: Unrestorable| Damage::unrestorable(id, why))
        }
        Record::Expire { id } => {
            memory.restore_expire(id);
            Ok(())
        }
    }
}

/// The newest segment's length, if it ends inside its header, or holds zeros where its
/// header and its records would be (a crash as it was created, before any record).
fn header_cut_short(path: &Path) -> Result<Option<u64>, IoAt> {
    let len = fs::metadata(path).at(IoOp::Read, path)?.len();
    // A page of zeros at most: what a crash leaves of a file created but not yet written.
    if len >= RECORDS_AT as u64 {
        if len > 4096 {
            return Ok(None);
        }
        let bytes = fs::read(path).at(IoOp::Read, path)?;
        if bytes.iter().any(|b| *b != 0) {
            return Ok(None);
        }
    }
    Ok(Some(len))
}
