//! The memory store's usage order (see `store/usage.rs`): the usage facts of the executions
//! it holds, by position. A fact gets its position when it is appended, under the record's
//! lock and then this log's, so positions grow in the order facts were kept; a journaled
//! store shows a fact only once the journal has it on disk, and a reader stops at the first
//! fact not yet shown, so it never passes over one that is still to come. A fact leaves the
//! order with its execution (or, not yet shown, when the journal could not keep it); a
//! reader stopped at a fact that leaves is woken to read past it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::execution::{EventPayload, ExecutionId};
use crate::store::{ChangeSignal, Changes, UsageEntry};

/// A batch of events appended together, as the usage order keeps its facts.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct Batch {
    /// The execution.
    pub id: ExecutionId,
    /// The sequence of its first event.
    pub first: u64,
    /// When it was appended.
    pub at: SystemTime,
    /// Whether its facts are shown at once (else once [`UsageLog::reveal`]ed).
    pub shown: bool,
}

/// The order, and the wake-up of its readers.
#[derive(Debug)]
pub(in crate::store) struct UsageLog {
    epoch: AtomicU64,
    inner: Mutex<Inner>,
    changes: Arc<ChangeSignal>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The next position to give.
    next: u64,
    entries: BTreeMap<u64, Held>,
}

#[derive(Debug)]
struct Held {
    entry: UsageEntry,
    shown: bool,
}

impl UsageLog {
    /// An empty order in a new epoch.
    pub(in crate::store) fn new() -> Self {
        let mut epoch = [0u8; 8];
        // Without the OS's randomness the clock still tells runs apart.
        if getrandom::fill(&mut epoch).is_err() {
            let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
            epoch = now.map_or(0, |d| d.as_nanos() as u64).to_le_bytes();
        }
        Self {
            epoch: AtomicU64::new(u64::from_le_bytes(epoch)),
            inner: Mutex::new(Inner {
                next: 1,
                ..Inner::default()
            }),
            changes: ChangeSignal::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Each change is one insert or removal: a panic cannot leave it half done.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(in crate::store) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The next position this order would give: positions below it are spent.
    pub(in crate::store) fn next(&self) -> u64 {
        self.lock().next
    }

    /// Continues a durable store's order: its epoch, and positions from at least `next`.
    pub(in crate::store) fn resume(&self, epoch: u64, next: u64) {
        self.epoch.store(epoch, Ordering::Release);
        let mut inner = self.lock();
        inner.next = inner.next.max(next);
    }

    /// Gives the usage facts among `payloads` (the batch `batch` describes) their positions,
    /// a fact that has one (replayed) keeping it, and keeps them in the order, their
    /// `(sequence, position)`s pushed to `positions`; then runs `append`, and takes them back
    /// if it fails. No allocation of its own: a batch of facts is kept directly.
    pub(in crate::store) fn keep<T, E>(
        &self,
        batch: Batch,
        mut payloads: Vec<EventPayload>,
        positions: &mut Vec<(u64, u64)>,
        append: impl FnOnce(Vec<EventPayload>) -> Result<T, E>,
    ) -> Result<T, E> {
        let Batch {
            id,
            first,
            at,
            shown,
        } = batch;
        let mut inner = self.lock();
        let before = positions.len();
        for (sequence, payload) in (first..).zip(payloads.iter_mut()) {
            if let EventPayload::Usage(fact) = payload {
                if fact.position == 0 {
                    Arc::make_mut(fact).position = inner.next;
                }
                let position = fact.position;
                inner.next = inner.next.max(position + 1);
                let entry = UsageEntry {
                    fact: fact.clone(),
                    execution_id: id,
                    sequence,
                    time: at,
                };
                inner.entries.insert(position, Held { entry, shown });
                positions.push((sequence, position));
            }
        }
        let appended = append(payloads);
        if appended.is_err() {
            // Taken back; the positions given stay spent (an order may skip positions,
            // never reuse one).
            for (_, position) in positions.drain(before..) {
                inner.entries.remove(&position);
            }
            return appended;
        }
        let kept = positions.len() > before;
        drop(inner);
        if shown && kept {
            self.changes.publish();
        }
        appended
    }

    /// Shows the facts at `positions` (a journaled append's, kept together): the journal
    /// has them on disk.
    pub(in crate::store) fn reveal(&self, positions: std::ops::RangeInclusive<u64>) {
        let mut inner = self.lock();
        let mut shown = false;
        for (_, held) in inner.entries.range_mut(positions) {
            shown |= !held.shown;
            held.shown = true;
        }
        drop(inner);
        if shown {
            self.changes.publish();
        }
    }

    /// Removes the facts at `positions` (their execution left the store, or the journal
    /// could not keep them); a reader stopped at one of them is woken to read past it.
    pub(in crate::store) fn forget(&self, positions: impl IntoIterator<Item = u64>) {
        let mut positions = positions.into_iter().peekable();
        if positions.peek().is_none() {
            return;
        }
        let mut inner = self.lock();
        let mut unblocked = false;
        for position in positions {
            unblocked |= inner
                .entries
                .remove(&position)
                .is_some_and(|held| !held.shown);
        }
        drop(inner);
        if unblocked {
            self.changes.publish();
        }
    }

    /// Up to `limit` facts after position `after`, to the back of `into`, stopping before
    /// the first one not yet shown.
    pub(in crate::store) fn read(&self, after: u64, limit: usize, into: &mut Vec<UsageEntry>) {
        let inner = self.lock();
        let shown = inner
            .entries
            .range(after.saturating_add(1)..)
            .map(|(_, held)| held)
            .take_while(|held| held.shown)
            .take(limit);
        into.extend(shown.map(|held| held.entry.clone()));
    }

    /// A wake-up for each fact shown.
    pub(in crate::store) fn changes(&self) -> Changes {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;
    use crate::execution::fixtures;

    fn keep(log: &UsageLog, id: ExecutionId, shown: bool) -> Vec<(u64, u64)> {
        let mut positions = Vec::new();
        let batch = Batch {
            id,
            first: 1,
            at: SystemTime::now(),
            shown,
        };
        let kept: Result<(), ()> =
            log.keep(batch, vec![fixtures::usage(1)], &mut positions, |_| Ok(()));
        kept.unwrap();
        positions
    }

    #[test]
    fn a_reader_stops_at_a_hidden_fact_and_is_woken_when_it_shows_or_leaves() {
        let log = UsageLog::new();
        let (a, b) = (ExecutionId::new(), ExecutionId::new());
        let hidden = keep(&log, a, false);
        keep(&log, b, true);
        let read = |after| {
            let mut facts = Vec::new();
            log.read(after, usize::MAX, &mut facts);
            facts.iter().map(|f| f.fact.position).collect::<Vec<_>>()
        };
        assert_eq!(read(0), Vec::<u64>::new(), "nothing past the hidden fact");
        let mut changes = log.changes();
        changes.mark_seen();
        log.reveal(hidden[0].1..=hidden[0].1);
        assert!(changes.changed().now_or_never().is_some());
        assert_eq!(read(0), [1, 2]);

        // A hidden fact the journal could not keep leaves, and the reader goes past it.
        let lost = keep(&log, a, false);
        keep(&log, b, true);
        changes.mark_seen();
        assert_eq!(read(2), Vec::<u64>::new());
        log.forget(lost.iter().map(|(_, position)| *position));
        assert!(changes.changed().now_or_never().is_some(), "woken");
        assert_eq!(read(2), [4]);
    }

    #[test]
    fn a_failed_append_takes_its_facts_back_and_spends_their_positions() {
        let log = UsageLog::new();
        let mut positions = Vec::new();
        let batch = Batch {
            id: ExecutionId::new(),
            first: 1,
            at: SystemTime::now(),
            shown: true,
        };
        let failed: Result<(), ()> =
            log.keep(batch, vec![fixtures::usage(1)], &mut positions, |_| Err(()));
        assert!(failed.is_err());
        assert!(positions.is_empty());
        let mut facts = Vec::new();
        log.read(0, usize::MAX, &mut facts);
        assert!(facts.is_empty());
        assert_eq!(
            keep(&log, ExecutionId::new(), true)[0].1,
            2,
            "1 stays spent"
        );
    }
}
