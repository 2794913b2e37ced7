//! Replay: the journal's files, oldest first, read back into the memory store. Every record
//! must open under one of the configured keys and follow the one before it, and every file
//! must hold the records its tally vouches for and name the file after it (`segment.rs`;
//! one file's records are read by `reader.rs`). The one exception is a torn tail: records of
//! the newest segment's last write, which a crash cut short before its sync was done (so
//! never acknowledged), after the records its tally vouches for; it is cut off and logged.
//! Anything else that does not read is damage: opening fails with the file, the offset and
//! what is wrong.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::codec::{self, Record};
use super::compact;
use super::reader::{FileRead, SegmentReader};
use super::seal::{Kind, RECORDS_AT, Sealer};
use super::segment;
use crate::store::MemoryStore;
use crate::store::NewExecution;

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
pub(super) fn files(dir: &Path) -> Result<Vec<(Kind, u64, PathBuf)>, String> {
    let unreadable = |e: std::io::Error| format!("cannot read {}: {e}", dir.display());
    compact::remove_spent(dir).map_err(unreadable)?;
    let files = segment::list(dir).map_err(unreadable)?;
    for pair in files.windows(2) {
        let ((_, before, _), (kind, after, path)) = (&pair[0], &pair[1]);
        if *kind == Kind::Base || *after != before + 1 {
            return Err(format!(
                "{}: the journal jumps from segment {before} to {after}: the files between \
                 are missing",
                path.display()
            ));
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
) -> Result<Replayed, String> {
    let started = Instant::now();
    let files = files(dir)?;
    if files.is_empty() && marked {
        return Err(format!(
            "{}: the journal's files are missing, but its usage-order mark is there (it is \
             written once a journal exists): restore the journal-*.seg and journal-*.base \
             files, or remove usage-order as well to start an empty store",
            dir.display()
        ));
    }
    let mut replayed = Replayed {
        segments: files.len(),
        ..Replayed::default()
    };
    let mut previous: Option<FileRead> = None;
    for (i, (kind, number, path)) in files.iter().enumerate() {
        let newest = i + 1 == files.len();
        let named = previous.as_ref().is_some_and(|p| p.tally.next == *number);
        if newest && *kind == Kind::Segment && header_cut_short(path)? {
            if named || (previous.is_none() && marked) {
                return Err(format!(
                    "{}: the segment ends inside its header, but {}: it was cut",
                    path.display(),
                    previous.as_ref().map_or_else(
                        || "the journal's usage-order mark was written after it was whole"
                            .to_owned(),
                        |p| format!("{} names it as the file after it", p.path.display()),
                    )
                ));
            }
            remove(
                path,
                "the newest segment ends inside its header (a crash as it was created): removed it",
            )?;
            continue;
        }
        let mut reader = SegmentReader::open(path, *kind, *number, sealers, newest)?;
        replayed.old_keys |= reader.sealer_index != 0;
        let mut first = true;
        while let Some((offset, body)) = reader.next()? {
            let record = codec::decode(body).map_err(|e| reader.damage(offset, &e))?;
            if std::mem::take(&mut first) && *kind == Kind::Segment {
                let before = previous.as_ref().map(|p| (p.kind, p.number, p.records));
                follows(&record, before, i == 0).map_err(|e| reader.damage(offset, &e))?;
            }
            replayed.records += 1;
            apply(record, memory, &mut replayed.events).map_err(|e| reader.damage(offset, &e))?;
        }
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
            return Err(reader.damage(
                0,
                &format!(
                    "this file follows {}, whose tally names {} as the file after it",
                    before.path.display(),
                    match before.tally.next {
                        0 => "no file".to_owned(),
                        next => format!("segment {next}"),
                    }
                ),
            ));
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

fn remove(path: &Path, why: &str) -> Result<(), String> {
    fs::remove_file(path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    tracing::warn!(file = %path.display(), "{why}");
    Ok(())
}

/// Checks a segment's first record: after another file it must say which, and (after a
/// segment) how many records that file held. The journal's first segment follows nothing.
fn follows(
    record: &Record,
    previous: Option<(Kind, u64, u64)>,
    oldest: bool,
) -> Result<(), String> {
    match (record, previous) {
        (Record::Follows { file, .. }, None) if oldest => Err(format!(
            "this segment follows file {file}, which is missing"
        )),
        (Record::Follows { file, records }, Some((kind, number, held))) => {
            if *file != number {
                Err(format!("this segment follows file {file}, not {number}"))
            } else if kind == Kind::Segment && *records != held {
                Err(format!(
                    "segment {number} held {records} records when this one began; {held} are left"
                ))
            } else {
                Ok(())
            }
        }
        (_, None) => Ok(()),
        (_, Some((_, number, _))) => Err(format!(
            "this segment does not say that it follows file {number}"
        )),
    }
}

fn apply(record: Record, memory: &MemoryStore, events: &mut u64) -> Result<(), String> {
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
                .map_err(|e| e.to_string())
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
                .map_err(|e| e.to_string())
        }
        Record::Expire { id } => {
            memory.restore_expire(id);
            Ok(())
        }
    }
}

/// Whether the newest segment ends inside its header, or holds zeros where its header and
/// its records would be (a crash as it was created, before any record).
fn header_cut_short(path: &Path) -> Result<bool, String> {
    let name = path.display();
    let len = fs::metadata(path)
        .map_err(|e| format!("cannot read {name}: {e}"))?
        .len();
    // A page of zeros at most: what a crash leaves of a file created but not yet written.
    if len >= RECORDS_AT as u64 {
        if len > 4096 {
            return Ok(false);
        }
        let bytes = fs::read(path).map_err(|e| format!("cannot read {name}: {e}"))?;
        if bytes.iter().any(|b| *b != 0) {
            return Ok(false);
        }
    }
    Ok(true)
}
