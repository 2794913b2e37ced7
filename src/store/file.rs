//! The durable store: an encrypted, fsync'd journal in one directory, owned by one process.
//!
//! The memory store keeps and orders everything (sequences, the state machine, capacity and
//! retention); this store makes each change durable before anyone sees it. Every change is
//! told to the journal's writer under the lock that orders it (`memory/journal.rs`), sealed
//! (`seal.rs`) and written with others queued meanwhile, one `fdatasync` for the lot
//! (`writer.rs`); only then do readers see the events and the append returns. On start the
//! journal is replayed (`replay.rs`); executions that were running are ended with
//! `outcome_unknown` and never resumed (`open.rs`); compaction (`compact.rs`) keeps the
//! journal to what the store holds.

pub(super) mod codec;
mod compact;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fuzz;
mod lock;
mod mark;
mod open;
mod reader;
mod replay;
mod seal;
mod segment;
mod writer;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use super::memory::Appended;
use super::{
    Changes, Created, EventStore, Fetch, Follower, MemoryStore, NewExecution, StoreError,
    StoreFuture, StoreStats, Unavailable, UsageEntry, WriteFailure,
};
use crate::execution::{Event, EventPayload, Execution, ExecutionId, ExecutionState};
pub use error::{Damage, Header, Malformed, Missing, OpenError, Tear};
use lock::DirLock;
pub use open::Opened;
pub use seal::KeyId;
use seal::Sealer;
use segment::Segment;
use writer::Writer;

/// The encrypted file journal.
pub struct FileStore {
    memory: Arc<MemoryStore>,
    writer: Arc<Writer>,
    max_disk_bytes: u64,
    /// Asks the compactor for a compaction; taken at close, so the compactor stops.
    compact: Mutex<Option<mpsc::Sender<()>>>,
    /// Whether a compaction was asked for and has not finished.
    compacting: Arc<AtomicBool>,
    /// Compactions finished, and how many had when the disk bound last let executions go:
    /// it lets them go once per compaction, not once per create while one runs.
    compacted: Arc<AtomicU64>,
    made_room_at: AtomicU64,
    /// Executions retention let go since the last compaction it asked for.
    expired: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
    lock: Mutex<Option<DirLock>>,
    closed: AtomicBool,
    /// Whether the readers of running executions were told after the journal failed.
    told_readers: AtomicBool,
}

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore")
            .field("disk_bytes", &self.writer.disk())
            .field("failed", &self.writer.failed())
            .finish_non_exhaustive()
    }
}

impl FileStore {
    /// Starts the writer and the compactor; compactions start at [`compact::next_compaction`]'s size.
    fn start(&self, dir: PathBuf, segment: Segment, sealer: Sealer) {
        let (trigger, requests) = mpsc::channel::<()>();
        let compacting = self.compacting.clone();
        let (floor, ceiling) = (self.max_disk_bytes / 4, self.max_disk_bytes / 4 * 3);
        let threshold = Arc::new(AtomicU64::new(compact::next_compaction(
            self.writer.disk(),
            floor,
            ceiling,
        )));
        let key = sealer.clone();
        let writer = self.writer.clone();
        let (compacting_w, threshold_w, dir_w) =
            (compacting.clone(), threshold.clone(), dir.clone());
        let compacted = self.compacted.clone();
        *self.compact.lock().unwrap_or_else(|p| p.into_inner()) = Some(trigger.clone());
        let written = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || {
                writer.run(segment, &sealer, &dir_w, |writer| {
                    if writer.disk() > threshold_w.load(Ordering::Acquire)
                        && !compacting_w.swap(true, Ordering::AcqRel)
                    {
                        let _ = trigger.send(());
                    }
                });
            });
        let writer = self.writer.clone();
        let memory = Arc::downgrade(&self.memory);
        let compacted = std::thread::Builder::new()
            .name("store-compactor".into())
            .spawn(move || {
                compact::run(
                    &requests,
                    &writer,
                    &memory,
                    &key,
                    &dir,
                    (&compacting, &compacted),
                    &threshold,
                    (floor, ceiling),
                );
            });
        let mut threads = self.threads.lock().unwrap_or_else(|p| p.into_inner());
        match (written, compacted) {
            (Ok(w), Ok(c)) => threads.extend([w, c]),
            (w, c) => {
                let kind = [&w, &c]
                    .into_iter()
                    .find_map(|spawned| spawned.as_ref().err())
                    .map_or(std::io::ErrorKind::Other, std::io::Error::kind);
                self.writer.poison(WriteFailure::Threads { kind });
                self.writer.close();
                threads.extend(w.into_iter().chain(c));
            }
        }
    }

    /// The bytes the journal takes on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.writer.disk()
    }

    /// At `store.max_disk_bytes`, a new execution makes room as one past `store.max_bytes`
    /// does: the older half of the terminal executions leave (with their identities) and a
    /// compaction takes them off the disk, once per compaction. While it runs new executions
    /// are taken up to half the bound more; past that, or with no terminal execution left to
    /// let go, they are refused (running ones append on).
    fn room_on_disk(&self) -> Result<(), StoreError> {
        let disk = self.writer.disk();
        if disk < self.max_disk_bytes {
            return Ok(());
        }
        let full = || StoreError::Full {
            executions: self.memory.stats().executions,
            bytes: disk,
        };
        // While room is being made, new work is taken up to half the bound more, never past.
        let within_half_more = || {
            if disk < self.max_disk_bytes.saturating_add(self.max_disk_bytes / 2) {
                Ok(())
            } else {
                Err(full())
            }
        };
        let compacted = self.compacted.load(Ordering::Acquire);
        if self.made_room_at.swap(compacted, Ordering::AcqRel) == compacted {
            // Room was made since the last compaction finished: the one that takes it off
            // the disk is on its way.
            return within_half_more();
        }
        if self.memory.evict_older_half() == 0 {
            self.made_room_at.store(u64::MAX, Ordering::Release);
            return Err(full());
        }
        // Queued behind a compaction already running, if one is: that one may have read the
        // store before these executions left.
        self.compacting.store(true, Ordering::Release);
        if let Some(trigger) = &*self.compact.lock().unwrap_or_else(|p| p.into_inner()) {
            let _ = trigger.send(());
        }
        // A compaction that read the store before the last room was made may leave the disk
        // past half the bound more: this one takes it off, and new work waits for it.
        within_half_more()
    }

    /// Appends and waits until the events are durable. After the journal failed, what it
    /// could not write is taken back (see [`after_failure`](Self::after_failure)) and the
    /// append is refused as unavailable.
    async fn append_durably(
        &self,
        id: ExecutionId,
        payloads: Vec<EventPayload>,
    ) -> Result<Appended, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        if !self.failed() {
            let appended = self.memory.append_journaled(id, payloads)?;
            if self.writer.durable(appended.ticket).await.is_ok() {
                return Ok(appended);
            }
            if self.closed.load(Ordering::Acquire) {
                return Err(closed());
            }
            self.after_failure();
        }
        self.memory.fail_unwritten(id);
        Err(self.unavailable())
    }

    /// Writes refused: why the journal failed (or that it was closed).
    fn unavailable(&self) -> StoreError {
        StoreError::Unavailable(self.writer.unavailable())
    }

    /// Once the journal has failed: every execution is cut back to what readers have seen
    /// (what the journal could not write is never shown), and the readers of those that have
    /// not ended hear that the store failed. Nothing is appended, not even in memory: each
    /// stays at its last durable event, where the next start ends it with
    /// `outcome_unknown`. What was queued since is taken back on the next call.
    fn after_failure(&self) {
        // Executions that left the store with unwritten events: their readers are told.
        for reveal in self.writer.take_stranded() {
            reveal.take_back(&self.memory);
        }
        if !self.told_readers.swap(true, Ordering::AcqRel) {
            for id in self.memory.ids() {
                self.memory.fail_unwritten(id);
            }
        }
    }
}

fn closed() -> StoreError {
    StoreError::Unavailable(Unavailable::Closed)
}

impl EventStore for FileStore {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn durable(&self) -> bool {
        true
    }

    fn create(&self, new: NewExecution) -> StoreFuture<'static, Created> {
        if self.closed.load(Ordering::Acquire) {
            return StoreFuture::ready(Err(closed()));
        }
        if self.writer.failed() {
            return StoreFuture::ready(Err(self.unavailable()));
        }
        if let Err(full) = self.room_on_disk() {
            return StoreFuture::ready(Err(full));
        }
        let created = match self.memory.create_journaled(new) {
            Ok(created) => created,
            Err(refused) => return StoreFuture::ready(Err(refused)),
        };
        let memory = self.memory.clone();
        let writer = self.writer.clone();
        StoreFuture::new(async move {
            match created {
                (Created::New(view), ticket) => {
                    if let Err(failed) = writer.durable(ticket).await {
                        // Never durable, never seen: it leaves the store.
                        memory.roll_back(view.id);
                        return Err(failed);
                    }
                    Ok(Created::New(view))
                }
                (Created::Existing(view), _) => {
                    // The execution a key names may not be durable yet: wait for all queued.
                    writer.durable(writer.last_ticket()).await?;
                    Ok(Created::Existing(memory.view(view.id).unwrap_or(view)))
                }
            }
        })
    }

    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, Event> {
        StoreFuture::new(async move { self.append_durably(id, vec![payload]).await?.event(id) })
    }

    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64> {
        StoreFuture::new(async move { Ok(self.append_durably(id, payloads).await?.last) })
    }

    /// After a failure, an execution that has not ended has no state to tell: it stays at
    /// its last durable event until the next start ends it. Ended ones read as ever.
    fn get(&self, id: ExecutionId) -> StoreFuture<'_, Execution> {
        let view = self.memory.view(id).and_then(|view| {
            if !view.state.is_terminal() && self.failed() {
                return Err(self.unavailable());
            }
            Ok(view)
        });
        StoreFuture::ready(view)
    }

    fn state(&self, id: ExecutionId) -> StoreFuture<'_, ExecutionState> {
        let state = self.memory.state_now(id).and_then(|state| {
            if !state.is_terminal() && self.failed() {
                return Err(self.unavailable());
            }
            Ok(state)
        });
        StoreFuture::ready(state)
    }

    fn first(&self, id: ExecutionId) -> StoreFuture<'_, Event> {
        self.memory.first(id)
    }

    fn follow(&self, id: ExecutionId) -> StoreFuture<'_, Follower> {
        self.memory.follow(id)
    }

    fn usage_epoch(&self) -> u64 {
        self.memory.usage_epoch()
    }

    fn read_usage(
        &self,
        after: u64,
        limit: usize,
        into: &mut Vec<UsageEntry>,
    ) -> Fetch<UsageEntry> {
        self.memory.read_usage(after, limit, into)
    }

    fn usage_changes(&self) -> Changes {
        self.memory.usage_changes()
    }

    /// Expiry writes an `expire` record for each execution that leaves; once as many have
    /// left as the store still holds (so at least half of what the journal holds is spent),
    /// a compaction takes them off the disk, on an idle store as on a busy one.
    fn expire(&self) -> usize {
        if self.closed.load(Ordering::Acquire) || self.failed() {
            return 0;
        }
        let count = self.memory.expire_due();
        if count == 0 {
            return 0;
        }
        let since = self.expired.fetch_add(count as u64, Ordering::AcqRel) + count as u64;
        if since >= self.memory.stats().executions as u64
            && !self.compacting.swap(true, Ordering::AcqRel)
        {
            self.expired.store(0, Ordering::Release);
            if let Some(trigger) = &*self.compact.lock().unwrap_or_else(|p| p.into_inner()) {
                let _ = trigger.send(());
            }
        }
        count
    }

    fn stats(&self) -> StoreStats {
        self.memory.stats()
    }

    fn failed(&self) -> bool {
        let failed = self.writer.failed();
        if failed {
            self.after_failure();
        }
        failed
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.writer.close();
        drop(
            self.compact
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for thread in threads {
            let _ = thread.join();
        }
        drop(self.lock.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests;
