//! Compaction: the journal rewritten as what the store holds now, so that executions that
//! expired leave the disk with their identities, and segments sealed with an older key are
//! re-sealed with the current one.
//!
//! The writer starts a new segment (so segments up to N are sealed and everything in them is
//! durable and visible); the store's executions are written, each as its create and its
//! events grouped by append, into `journal-N.compacting`, which is synced and renamed over
//! segment N; then segments before N are removed. Appends go on into segment N+1 all the
//! while. A crash at any step leaves a journal that replays to the same store: before the
//! rename the old segments are whole (and the temporary file is removed at the next start);
//! after it, the compacted segment repeats what the older ones say, and replay skips events
//! it already has.

use std::fs;
use std::path::Path;

use super::codec;
use super::seal::Sealer;
use super::segment::{self, Segment};
use crate::store::MemoryStore;

/// Flush the compacted segment's buffer at this size.
const CHUNK: usize = 1 << 20;

/// Rewrites segments up to `upto` (sealed) as what `memory` holds; returns the bytes of the
/// segments left.
pub(super) fn compact(
    dir: &Path,
    sealer: &Sealer,
    memory: &MemoryStore,
    upto: u64,
) -> std::io::Result<u64> {
    let temporary = dir.join(format!("journal-{upto:020}.compacting"));
    let _ = fs::remove_file(&temporary);
    let mut out = Segment::create(&temporary, upto, sealer)?;
    let mut sealed = Vec::with_capacity(CHUNK + 64 * 1024);
    let mut body = Vec::new();
    let mut failed = None;
    memory.each_kept(|kept, events| {
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
        let _ = fs::remove_file(&temporary);
        return Err(e);
    }
    out.append(&sealed)
        .and_then(|()| out.sync())
        .inspect_err(|_| {
            let _ = fs::remove_file(&temporary);
        })?;
    fs::rename(&temporary, segment::path(dir, upto))?;
    segment::sync_dir(dir)?;
    let mut left = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(number) = entry.file_name().to_str().and_then(segment::number) else {
            continue;
        };
        if number < upto {
            fs::remove_file(entry.path())?;
        } else {
            left += entry.metadata()?.len();
        }
    }
    segment::sync_dir(dir)?;
    Ok(left)
}
