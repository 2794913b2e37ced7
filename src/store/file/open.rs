//! Opening the file store, in reading order: the directory and its lock, the usage order's
//! mark, replay, the segment this process writes, the ending of what was running, and the
//! compaction every start with more than one file runs. Any of them failing fails the start
//! with an [`OpenError`] naming the file.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::reader::FileRead;
use super::replay::Replayed;
use super::seal::{Kind, Sealer};
use super::segment::{self, Segment};
use super::writer::Writer;
use super::{Damage, FileStore, OpenError, codec, compact, lock, mark, replay};
use crate::config::FileStoreConfig;
use crate::execution::{ErrorCode, Interruption, interrupted};
use crate::store::memory::Journal;
use crate::store::{At, EventStore, IoAt, IoOp, MemoryStore, StoreLimits};

/// How an execution a restart found running ends: `outcome_unknown`, never resumed.
fn restarted() -> Interruption {
    Interruption {
        code: ErrorCode::OutcomeUnknown,
        message: "the runtime stopped while this execution was running; it was not resumed, \
                  and the provider may have finished it"
            .into(),
        attempt_message: "the runtime stopped during this attempt".into(),
    }
}

/// What opening found, for the log.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opened {
    /// Executions held after replay.
    pub executions: usize,
    /// Events replayed.
    pub events: u64,
    /// Executions that were running and were ended with `outcome_unknown`.
    pub interrupted: usize,
    /// How long reading the journal back took.
    pub replayed_in: std::time::Duration,
}

impl FileStore {
    /// Opens (or creates) the journal in `config.path`: takes the directory's lock, replays
    /// the journal, ends the executions that were running, and starts the writer. The error
    /// names the file and offset of anything that does not read ([`OpenError`]).
    pub fn open(
        config: &FileStoreConfig,
        limits: StoreLimits,
    ) -> Result<(Arc<Self>, Opened), OpenError> {
        let dir = config.path.clone();
        create_dir(&dir)?;
        let lock = lock::lock(&dir)?;
        let sealers: Vec<Sealer> = config.keys.iter().map(Sealer::new).collect();
        let writer = Arc::new(Writer::new());
        let memory = Arc::new(MemoryStore::journaled(
            limits,
            Some(writer.clone() as Arc<dyn Journal>),
        ));
        // The usage order's mark is read first: it also says whether a journal was begun.
        let mark = mark::read(&dir)?;
        let replayed = replay::replay(&dir, &sealers, &memory, mark.is_some())?;
        memory.sort_retention();
        // The usage order goes on where it was: its epoch, and positions past every one given
        // before (set before anything is appended).
        let usage = memory.usage_log();
        if let Some((epoch, floor)) = mark {
            usage.resume(epoch, floor);
        }
        let Some(current) = sealers.first() else {
            return Err(OpenError::NoKey);
        };
        let mut segment = writable_segment(&dir, replayed.newest.as_ref(), &sealers, current)?;
        // Written once the first segment is whole, so that from now on a journal without
        // files is told from one never begun.
        if mark.is_none() {
            mark::write(&dir, usage.epoch(), usage.next())?;
        }
        let interrupted = end_interrupted(&memory, &mut segment, current)?;
        // The journal is compacted at every start that found more than one segment or one
        // sealed with an older key, before the store serves: what expired leaves the disk,
        // and after it every segment is sealed with the current key.
        writer.count_disk(replayed.disk + segment.len(), 0);
        if let Some(newest) = replayed.newest.as_ref()
            && (replayed.old_keys || replayed.segments > 1)
        {
            compact_at_start(&dir, current, &memory, &writer, (newest.number, &replayed))?;
        }
        let store = Arc::new(Self {
            memory,
            writer,
            max_disk_bytes: config.max_disk_bytes,
            compact: Mutex::new(None),
            compacting: Arc::new(AtomicBool::new(false)),
            compacted: Arc::new(AtomicU64::new(0)),
            made_room_at: AtomicU64::new(u64::MAX),
            expired: AtomicU64::new(0),
            threads: Mutex::new(Vec::new()),
            lock: Mutex::new(Some(lock)),
            closed: AtomicBool::new(false),
            told_readers: AtomicBool::new(false),
        });
        store.start(dir, segment, current.clone());
        let opened = Opened {
            executions: store.memory.stats().executions,
            events: replayed.events,
            interrupted,
            replayed_in: replayed.took,
        };
        Ok((store, opened))
    }
}

/// The segment the store writes to: a new first one for an empty journal, else the one after
/// the newest file (rotating when that one is full or sealed with an older key).
fn writable_segment(
    dir: &Path,
    newest: Option<&FileRead>,
    sealers: &[Sealer],
    current: &Sealer,
) -> Result<Segment, OpenError> {
    let Some(newest) = newest else {
        let segment = Segment::create(
            &segment::path(dir, Kind::Segment, 1),
            Kind::Segment,
            1,
            current,
        )?;
        segment::sync_dir(dir)?;
        return Ok(segment);
    };
    let mut old = Segment::reopen(
        &newest.path,
        newest.number,
        newest.prefix,
        newest.records,
        newest.tally,
    )?;
    // At a start, a segment that cannot be made fails the start as any write does.
    segment::after(dir, &mut old, &sealers[newest.sealer], current).map_err(|rotation| {
        match rotation {
            segment::Rotation::Create(e) | segment::Rotation::Write(e) => e.into(),
        }
    })
}

/// Compacts the journal before the store serves: what expired leaves the disk, and after it
/// every segment is sealed with `current`. `newest`: the number of the newest file.
fn compact_at_start(
    dir: &Path,
    current: &Sealer,
    memory: &MemoryStore,
    writer: &Writer,
    (newest, replayed): (u64, &Replayed),
) -> Result<(), OpenError> {
    let ((), listing) = memory.list_at(|| ());
    let done = compact::compact(dir, current, memory, (newest, listing)).map_err(|error| {
        OpenError::Compaction {
            dir: dir.to_owned(),
            error,
        }
    })?;
    writer.count_disk(done.written, done.removed);
    // The proof a rotated key took over: everything is sealed with the first key now.
    tracing::info!(
        dir = %dir.display(),
        segments = replayed.segments,
        older_keys = replayed.old_keys,
        written = done.written,
        removed = done.removed,
        "compacted the journal"
    );
    Ok(())
}

/// Creates the store's directory, readable by its owner only.
fn create_dir(dir: &std::path::Path) -> Result<(), IoAt> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    let existed = dir.is_dir();
    builder.create(dir).at(IoOp::CreateDir, dir)?;
    // A new directory's entry in its parent is durable too.
    match dir.parent() {
        Some(parent) if !existed && !parent.as_os_str().is_empty() => segment::sync_dir(parent),
        _ => Ok(()),
    }
}

/// Ends every execution the journal left running with `outcome_unknown`, written to
/// `segment` before the store serves; returns how many.
fn end_interrupted(
    memory: &MemoryStore,
    segment: &mut Segment,
    sealer: &Sealer,
) -> Result<usize, OpenError> {
    let unfinished = memory.unfinished();
    let mut sealed = Vec::new();
    let mut body = Vec::new();
    let at = SystemTime::now();
    for &id in &unfinished {
        let Ok((view, events)) = memory.history(id) else {
            continue;
        };
        let ending = interrupted(&view, &events, restarted());
        let first = events.len() as u64 + 1;
        body.clear();
        codec::encode(
            &codec::Record::Append {
                id,
                first,
                at,
                payloads: ending.clone(),
            },
            &mut body,
        );
        memory
            .restore_append(id, first, at, ending)
            .map_err(|why| OpenError::Unended {
                id,
                reason: Damage::unrestorable(id, why),
            })?;
        segment.seal(sealer, &body, &mut sealed);
    }
    if !sealed.is_empty() {
        segment.write(sealer, &sealed)?;
        tracing::warn!(
            executions = unfinished.len(),
            "executions were running when the runtime stopped: ended with outcome_unknown, not resumed"
        );
    }
    Ok(unfinished.len())
}
