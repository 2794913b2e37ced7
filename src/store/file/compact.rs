//! Compaction: the journal rewritten as what the store holds now, so that executions that
//! expired leave the disk with their identities, and files sealed with an older key are
//! re-sealed with the current one.
//!
//! The writer starts a new segment (so segments up to N are sealed and everything in them is
//! durable and visible); the store's executions are written, each as its create and its
//! events grouped by append, into `journal-N.compacting`, which is synced and renamed to the
//! base `journal-N.base`; then the files it makes spent (segments up to N, older bases) are
//! removed. Appends go on into segment N+1 all the while. A crash at any step leaves a
//! journal that replays to the same store: before the rename the old segments are whole (and
//! the temporary file is removed at the next start); after it, replay starts from the
//! newest base and removes whatever it makes spent, whatever order the removal had reached.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Weak, mpsc};

use super::codec;
use super::seal::{Kind, Sealer};
use super::segment::{self, Segment};
use super::writer::Writer;
use crate::store::memory::Listing;
use crate::store::{At, IoAt, IoOp, MemoryStore};

/// Flush the compacted file's buffer at this size.
const CHUNK: usize = 1 << 20;

/// What a compaction changed on disk.
#[derive(Debug, Clone, Copy)]
pub(super) struct Compacted {
    /// Bytes of the files it removed.
    pub removed: u64,
    /// Bytes of the base it wrote.
    pub written: u64,
}

/// A base written beside the journal, synced, not yet in place.
#[derive(Debug)]
pub(super) struct Aside {
    path: PathBuf,
    upto: u64,
    written: u64,
}

impl Aside {
    /// Removes it, never to be installed.
    pub(super) fn discard(self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Rewrites the journal up to segment `upto` (sealed) as the executions `listing` holds (as
/// [`MemoryStore::list_at`] listed them when the writer moved past `upto`), as base `upto`.
pub(super) fn compact(
    dir: &Path,
    sealer: &Sealer,
    memory: &MemoryStore,
    at: (u64, Listing),
) -> Result<Compacted, IoAt> {
    install(dir, write_aside(dir, sealer, memory, at)?, memory)
}

/// Writes base `upto` beside the journal (`journal-N.compacting`), for [`install`].
pub(super) fn write_aside(
    dir: &Path,
    sealer: &Sealer,
    memory: &MemoryStore,
    (upto, listing): (u64, Listing),
) -> Result<Aside, IoAt> {
    let path = dir.join(format!("journal-{upto:020}.compacting"));
    let _ = fs::remove_file(&path);
    let written = write_base(&path, sealer, memory, listing, upto).inspect_err(|_| {
        let _ = fs::remove_file(&path);
    })?;
    Ok(Aside {
        path,
        upto,
        written,
    })
}

/// Renames the base into place, making the files before it spent, and removes them.
pub(super) fn install(dir: &Path, aside: Aside, memory: &MemoryStore) -> Result<Compacted, IoAt> {
    // Before the base drops the facts of what expired: how far usage positions went.
    let usage = memory.usage_log();
    super::mark::write(dir, usage.epoch(), usage.next())?;
    fs::rename(&aside.path, segment::path(dir, Kind::Base, aside.upto))
        .at(IoOp::Rename, &aside.path)?;
    segment::sync_dir(dir)?;
    Ok(Compacted {
        removed: remove_spent(dir)?,
        written: aside.written,
    })
}

fn write_base(
    at: &Path,
    sealer: &Sealer,
    memory: &MemoryStore,
    listing: Listing,
    upto: u64,
) -> Result<u64, IoAt> {
    let mut out = Segment::create(at, Kind::Base, upto, sealer)?;
    let mut sealed = Vec::with_capacity(CHUNK + 64 * 1024);
    let mut body = Vec::new();
    let mut failed = None;
    memory.each_kept(listing, |kept, events| {
        if failed.is_some() {
            return;
        }
        let Some((first, rest)) = events.split_first() else {
            return;
        };
        body.clear();
        codec::created(&kept, first, &mut body);
        out.seal(sealer, &body, &mut sealed);
        // The events of one append share its time: one record each, as they were written.
        for group in rest.chunk_by(|a, b| a.time == b.time) {
            body.clear();
            codec::appended(kept.id, group, &mut body);
            out.seal(sealer, &body, &mut sealed);
        }
        if sealed.len() >= CHUNK {
            if let Err(e) = out.append(&sealed) {
                failed = Some(e);
            }
            sealed.clear();
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    out.append(&sealed)?;
    // The base vouches for every record it holds, and for the segment after it, which the
    // rotation before this compaction made.
    out.end(sealer, upto + 1)?;
    Ok(out.len())
}

/// Removes the files the newest base makes spent, oldest first, and returns their bytes.
pub(super) fn remove_spent(dir: &Path) -> Result<u64, IoAt> {
    let files = segment::list(dir)?;
    let Some(base) = files
        .iter()
        .filter(|(kind, ..)| *kind == Kind::Base)
        .map(|(_, number, _)| *number)
        .max()
    else {
        return Ok(0);
    };
    let mut removed = 0;
    for (kind, number, path) in files {
        let spent = number < base || (number == base && kind == Kind::Segment);
        if spent {
            removed += fs::metadata(&path).at(IoOp::Read, &path)?.len();
            fs::remove_file(&path).at(IoOp::Remove, &path)?;
        }
    }
    if removed > 0 {
        segment::sync_dir(dir)?;
    }
    Ok(removed)
}

/// The journal's size at which the next compaction starts, after one left it at `left`:
/// twice that, within a quarter and three quarters of `store.max_disk_bytes`, and at least
/// an eighth of it more than `left` (compacting a journal with little to drop is churn; at
/// the bound, `room_on_disk` lets executions go first).
pub(super) fn next_compaction(left: u64, floor: u64, ceiling: u64) -> u64 {
    (left * 2).clamp(floor, ceiling).max(left + floor / 2)
}

/// The compactor thread: one compaction per request, until the requests stop.
#[expect(
    clippy::too_many_arguments,
    reason = "the thread's whole world, handed over once at its start"
)]
pub(super) fn run(
    requests: &mpsc::Receiver<()>,
    writer: &Writer,
    memory: &Weak<MemoryStore>,
    sealer: &Sealer,
    dir: &std::path::Path,
    (compacting, compacted): (&AtomicBool, &AtomicU64),
    threshold: &AtomicU64,
    (floor, ceiling): (u64, u64),
) {
    while requests.recv().is_ok() {
        // A failed journal is never compacted: the store's memory then holds events that
        // are not durable.
        if writer.failed() {
            compacting.store(false, Ordering::Release);
            continue;
        }
        let Some(memory) = memory.upgrade() else {
            return;
        };
        // No create or expiry comes between the rotation and the listing (the index is held
        // for one write and sync of the writer): the base and the segment after it do not
        // overlap in them.
        let (sealed, listing) = memory.list_at(|| writer.rotate().recv());
        let sealed = match sealed {
            Ok(Some(sealed)) => sealed,
            // No new segment this time: try again at the next threshold.
            Ok(None) => {
                threshold.store(
                    next_compaction(writer.disk(), floor, ceiling),
                    Ordering::Release,
                );
                compacted.fetch_add(1, Ordering::AcqRel);
                compacting.store(false, Ordering::Release);
                continue;
            }
            Err(_) => return,
        };
        let before = writer.disk();
        let outcome = write_aside(dir, sealer, &memory, (sealed, listing)).and_then(|aside| {
            // The journal failed while the base was written: the store's memory now holds
            // events that are not durable, which a base must not.
            if writer.failed() {
                aside.discard();
                return Ok(None);
            }
            install(dir, aside, &memory).map(Some)
        });
        match outcome {
            Ok(None) => {
                threshold.store(next_compaction(before, floor, ceiling), Ordering::Release);
                tracing::warn!("the journal failed during a compaction: its base was discarded");
            }
            Ok(Some(done)) => {
                writer.count_disk(done.written, done.removed);
                let after = writer.disk();
                threshold.store(next_compaction(after, floor, ceiling), Ordering::Release);
                tracing::info!(before, after, "compacted the journal");
            }
            Err(e) => {
                // Before its rename the journal is whole; after it, the next start finishes
                // removing what the base made spent. Try again later.
                threshold.store(next_compaction(before, floor, ceiling), Ordering::Release);
                tracing::warn!(error = %e, "could not compact the journal");
            }
        }
        compacted.fetch_add(1, Ordering::AcqRel);
        compacting.store(false, Ordering::Release);
    }
}
