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
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Weak, mpsc};

use super::codec;
use super::seal::{Kind, Sealer};
use super::segment::{self, Segment};
use super::writer::Writer;
use crate::store::MemoryStore;
use crate::store::memory::Listing;

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

/// Rewrites the journal up to segment `upto` (sealed) as the executions `listing` holds (as
/// [`MemoryStore::list_at`] listed them when the writer moved past `upto`), as base `upto`. `failed` says whether the journal has failed meanwhile: then nothing is renamed
/// (the store's memory holds events that are not durable, which a base must not).
pub(super) fn compact(
    dir: &Path,
    sealer: &Sealer,
    memory: &MemoryStore,
    (upto, listing): (u64, Listing),
    failed: impl Fn() -> bool,
) -> std::io::Result<Compacted> {
    let temporary = dir.join(format!("journal-{upto:020}.compacting"));
    let _ = fs::remove_file(&temporary);
    let written = write_base(&temporary, sealer, memory, listing, upto).inspect_err(|_| {
        let _ = fs::remove_file(&temporary);
    })?;
    if failed() {
        let _ = fs::remove_file(&temporary);
        return Err(std::io::Error::other(
            "the journal failed during the compaction",
        ));
    }
    // Before the base drops the facts of what expired: how far usage positions went.
    let usage = memory.usage_log();
    super::mark::write(dir, usage.epoch(), usage.next())?;
    fs::rename(&temporary, segment::path(dir, Kind::Base, upto))?;
    segment::sync_dir(dir)?;
    Ok(Compacted {
        removed: remove_spent(dir)?,
        written,
    })
}

fn write_base(
    at: &Path,
    sealer: &Sealer,
    memory: &MemoryStore,
    listing: Listing,
    upto: u64,
) -> std::io::Result<u64> {
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
pub(super) fn remove_spent(dir: &Path) -> std::io::Result<u64> {
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
            removed += fs::metadata(&path)?.len();
            fs::remove_file(&path)?;
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
#[allow(clippy::too_many_arguments)]
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
        match compact(dir, sealer, &memory, (sealed, listing), || writer.failed()) {
            Ok(done) => {
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
