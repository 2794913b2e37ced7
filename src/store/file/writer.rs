//! The journal's one writer thread, with group commit: whatever executions queued while the
//! last write and sync ran is sealed, written with one `write` and made durable with one
//! `fdatasync`; then every event in it is revealed to readers and every waiting append is
//! answered. So concurrent executions share syncs, and nothing a caller sees is not on disk.
//!
//! Each write also rewrites the segment's tally (`segment.rs`); once nothing has been queued
//! for [`SETTLE`], and at close, the thread settles it, so that a journal at rest vouches for
//! every record it holds.
//!
//! A write or sync that fails poisons the journal for good (after a failed fsync the
//! kernel's page cache can no longer be trusted to say what reached the disk): nothing more
//! is written or revealed, and every append from then on is refused as unavailable, naming
//! that failure (a [`WriteFailure`]). What was durable before stays durable, and nobody ever
//! saw what was not.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::watch;

use super::codec;
use super::seal::Sealer;
use super::segment::{self, Rotation, Segment};
use crate::execution::{Event, ExecutionId};
use crate::store::memory::{Journal, Kept, Reveal};
use crate::store::{StoreError, Unavailable, WriteFailure};

/// The longest record the journal writes (its length field is 32 bits).
const MAX_RECORD: usize = u32::MAX as usize;

/// How long the writer waits, with nothing queued, before it settles the tally: short enough
/// that a journal at rest soon proves all it holds, long enough that a busy one never pays.
const SETTLE: Duration = Duration::from_millis(50);

/// How far the journal is durable.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Progress {
    /// Every ticket up to this one is on disk.
    pub durable: u64,
    /// The journal failed or was closed: no ticket after `durable` will be written.
    pub failed: bool,
}

#[derive(Debug, Default)]
struct Queue {
    records: Vec<(Vec<u8>, Option<Reveal>)>,
    /// The last ticket handed out.
    ticket: u64,
    closing: bool,
    /// The thread has stopped: nothing queued from now on is written.
    stopped: bool,
    /// A compaction's request to start a new segment: answered with the last sealed one, or
    /// `None` when no new segment could be made (try again later).
    rotate: Option<mpsc::Sender<Option<u64>>>,
}

/// The queue between the store and the writer thread, and what the thread reports.
#[derive(Debug)]
pub(super) struct Writer {
    queue: Mutex<Queue>,
    wake: Condvar,
    progress: watch::Sender<Progress>,
    failed: AtomicBool,
    /// What failed the journal (the first failure: later ones follow from it).
    failure: OnceLock<WriteFailure>,
    /// Bytes of every segment file.
    disk: AtomicU64,
    /// What the journal could not write after it failed: the store takes each back.
    stranded: Mutex<Vec<Reveal>>,
}

impl Writer {
    pub(super) fn new() -> Self {
        Self {
            queue: Mutex::default(),
            wake: Condvar::new(),
            progress: watch::Sender::new(Progress::default()),
            failed: AtomicBool::new(false),
            failure: OnceLock::new(),
            disk: AtomicU64::new(0),
            stranded: Mutex::default(),
        }
    }

    /// What was queued but never written, since the last call.
    pub(super) fn take_stranded(&self) -> Vec<Reveal> {
        std::mem::take(&mut *self.stranded.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // A panic cannot leave the queue half-changed (each change is one push or swap).
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, body: Vec<u8>, reveal: Option<Reveal>) -> u64 {
        let mut queue = self.queue();
        queue.records.push((body, reveal));
        queue.ticket += 1;
        let ticket = queue.ticket;
        drop(queue);
        self.wake.notify_one();
        ticket
    }

    /// The last ticket handed out: waiting for it waits for everything queued so far.
    pub(super) fn last_ticket(&self) -> u64 {
        self.queue().ticket
    }

    /// Waits until `ticket` is durable; refused as unavailable when the journal failed, or
    /// was closed, first.
    pub(super) async fn durable(&self, ticket: u64) -> Result<(), StoreError> {
        let reached = |p: &Progress| p.durable >= ticket || p.failed;
        let progress = if reached(&self.progress.borrow()) {
            *self.progress.borrow()
        } else {
            let mut rx = self.progress.subscribe();
            rx.wait_for(reached).await.map(|p| *p).unwrap_or(Progress {
                durable: 0,
                failed: true,
            })
        };
        if progress.durable >= ticket {
            Ok(())
        } else {
            Err(StoreError::Unavailable(self.unavailable()))
        }
    }

    /// Why writes are refused: the failure that poisoned the journal, or else its close.
    pub(super) fn unavailable(&self) -> Unavailable {
        self.failure.get().map_or(Unavailable::Closed, |failure| {
            Unavailable::Failed(failure.clone())
        })
    }

    pub(super) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    pub(super) fn disk(&self) -> u64 {
        self.disk.load(Ordering::Acquire)
    }

    /// Counts `added` bytes written and `removed` bytes deleted (by compaction; the writer
    /// counts its own writes), without losing a concurrent count.
    pub(super) fn count_disk(&self, added: u64, removed: u64) {
        self.disk.fetch_add(added, Ordering::AcqRel);
        let _ = self
            .disk
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| {
                Some(d.saturating_sub(removed))
            });
    }

    /// Asks the thread to start a new segment after what it has queued; the answer is the
    /// number of the last segment it sealed, or `None` when it could not make one.
    pub(super) fn rotate(&self) -> mpsc::Receiver<Option<u64>> {
        let (tx, rx) = mpsc::channel();
        let mut queue = self.queue();
        if !queue.stopped {
            queue.rotate = Some(tx);
        }
        drop(queue);
        self.wake.notify_one();
        rx
    }

    /// Asks the thread to write what is queued and stop.
    pub(super) fn close(&self) {
        self.queue().closing = true;
        self.wake.notify_one();
    }

    /// The thread: writes what is queued until closed. `after` runs after each written batch
    /// (compaction's trigger).
    pub(super) fn run(
        &self,
        mut segment: Segment,
        sealer: &Sealer,
        dir: &std::path::Path,
        mut after: impl FnMut(&Self),
    ) {
        // A panic here must not leave appends waiting for a thread that is gone.
        let _fails_on_panic = FailsOnPanic(self);
        let mut batch = Vec::new();
        let mut sealed = Vec::new();
        loop {
            let (upto, closing, rotate) = {
                let mut queue = self.queue();
                while queue.records.is_empty() && !queue.closing && queue.rotate.is_none() {
                    if segment.unsettled() && !self.failed() {
                        let (woken, waited) = self
                            .wake
                            .wait_timeout(queue, SETTLE)
                            .unwrap_or_else(|p| p.into_inner());
                        queue = woken;
                        if waited.timed_out() && queue.records.is_empty() {
                            drop(queue);
                            self.settle(&mut segment, sealer);
                            queue = self.queue();
                        }
                    } else {
                        queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
                    }
                }
                std::mem::swap(&mut batch, &mut queue.records);
                (queue.ticket, queue.closing, queue.rotate.take())
            };
            if !batch.is_empty() {
                self.write(&mut segment, sealer, &mut batch, &mut sealed, upto);
                after(self);
            }
            if let Some(reply) = rotate {
                let rotated = self.next_segment(&mut segment, sealer, dir);
                let _ = reply.send(rotated);
            }
            if closing && self.queue().records.is_empty() {
                self.settle(&mut segment, sealer);
                // A compaction waiting for a rotation hears that none will come, and an
                // append that comes after the close hears that it will not be written.
                self.stop();
                self.progress.send_modify(|p| p.failed = true);
                return;
            }
        }
    }

    /// Vouches for every record written so far; a failure poisons the journal like any other
    /// failed write.
    fn settle(&self, segment: &mut Segment, sealer: &Sealer) {
        if self.failed() {
            return;
        }
        if let Err(e) = segment.settle(sealer) {
            self.poison(WriteFailure::Io(e));
        }
    }

    fn write(
        &self,
        segment: &mut Segment,
        sealer: &Sealer,
        batch: &mut Vec<(Vec<u8>, Option<Reveal>)>,
        sealed: &mut Vec<u8>,
        upto: u64,
    ) {
        let failure = if self.failed() {
            None
        } else if let Some((body, _)) = batch.iter().find(|(body, _)| body.len() > MAX_RECORD) {
            // A length field holds at most 4 GiB: such a record cannot be written whole.
            Some(WriteFailure::TooLong {
                len: body.len(),
                max: MAX_RECORD,
            })
        } else {
            sealed.clear();
            for (body, _) in batch.iter() {
                segment.seal(sealer, body, sealed);
            }
            let before = segment.len();
            match segment.write(sealer, sealed) {
                Ok(()) => {
                    self.disk
                        .fetch_add(segment.len() - before, Ordering::AcqRel);
                    // Readers see the events before their appends return.
                    reveal(batch);
                    self.progress.send_modify(|p| p.durable = upto);
                    return;
                }
                Err(e) => Some(WriteFailure::Io(e)),
            }
        };
        // Not durable: readers never see it. The store takes it back and ends its execution
        // in memory (`FileStore::after_failure`), whether or not its append still waits; it
        // is handed over before anyone hears of the failure.
        self.strand(batch);
        if let Some(failure) = failure {
            self.poison(failure);
        }
    }

    fn strand(&self, batch: &mut Vec<(Vec<u8>, Option<Reveal>)>) {
        let mut stranded = self.stranded.lock().unwrap_or_else(|p| p.into_inner());
        stranded.extend(batch.drain(..).filter_map(|(_, reveal)| reveal));
    }

    /// The thread is gone: nothing queued will be written, no rotation will come.
    fn stop(&self) {
        let mut queue = self.queue();
        queue.stopped = true;
        queue.rotate = None;
        let mut records = std::mem::take(&mut queue.records);
        drop(queue);
        self.strand(&mut records);
    }

    /// Moves on to a new segment after the current one and returns the number of the one it
    /// left. A new file that cannot be made (no descriptor left, a full directory) fails only
    /// this rotation: the journal goes on in the segment it has. A failed write poisons it.
    fn next_segment(
        &self,
        segment: &mut Segment,
        sealer: &Sealer,
        dir: &std::path::Path,
    ) -> Option<u64> {
        if self.failed() {
            return None;
        }
        match segment::after(dir, segment, sealer, sealer) {
            Ok(next) => {
                self.disk.fetch_add(next.len(), Ordering::AcqRel);
                let old = std::mem::replace(segment, next);
                Some(old.number())
            }
            Err(Rotation::Create(e)) => {
                tracing::warn!(error = %e, "could not start a new journal segment; the journal goes on in the current one");
                None
            }
            Err(Rotation::Write(e)) => {
                self.poison(WriteFailure::Io(e));
                None
            }
        }
    }

    /// Fails the journal for good; the first failure is what refused writes say.
    pub(super) fn poison(&self, failure: WriteFailure) {
        tracing::error!(error = %failure, "the event store's journal could not be written: the store has failed");
        // Set before `failed`, so that whoever sees the journal failed finds why.
        let _ = self.failure.set(failure);
        self.failed.store(true, Ordering::Release);
        self.progress.send_modify(|p| p.failed = true);
    }
}

/// Poisons the journal if the writer thread unwinds.
struct FailsOnPanic<'a>(&'a Writer);

impl Drop for FailsOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
            self.0.poison(WriteFailure::Panicked);
        }
    }
}

fn reveal(batch: &mut Vec<(Vec<u8>, Option<Reveal>)>) {
    for (_, reveal) in batch.drain(..) {
        if let Some(reveal) = reveal {
            reveal.reveal();
        }
    }
}

impl Journal for Writer {
    fn created(&self, kept: &Kept, first: &Event, reveal: Reveal) -> u64 {
        let mut body = Vec::with_capacity(256);
        codec::created(kept, first, &mut body);
        self.push(body, Some(reveal))
    }

    fn appended(
        &self,
        id: ExecutionId,
        events: &mut dyn Iterator<Item = Event>,
        reveal: Reveal,
    ) -> u64 {
        let mut body = Vec::with_capacity(64);
        codec::appended(id, events, &mut body);
        self.push(body, Some(reveal))
    }

    fn expired(&self, id: ExecutionId) {
        let mut body = Vec::with_capacity(17);
        codec::expire(id, &mut body);
        self.push(body, None);
    }
}
