//! The memory store's usage order (see `store/usage.rs`): the usage facts of the executions
//! it holds, by position. A fact gets its position when it is appended, under the record's
//! lock and then this log's, so positions grow in the order facts were kept; a journaled
//! store shows a fact only once the journal has it on disk, and a reader stops at the first
//! fact not yet shown, so it never passes over one that is still to come. A fact leaves the
//! order with its execution (or, not yet shown, when the journal could not keep it).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::execution::{EventPayload, ExecutionId};
use crate::store::{ChangeSignal, Changes, UsageEntry};

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
    /// Positions of facts not yet shown, oldest first.
    hidden: Vec<u64>,
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

    /// Gives the usage facts among `payloads` (events `first..` of `id`) their positions, a
    /// fact that has one (replayed) keeping it; then runs `append`, and keeps the facts in
    /// the order if it succeeds, shown at once or once [`reveal`](Self::reveal)ed. Returns
    /// `append`'s result and the facts' `(sequence, position)`s.
    pub(in crate::store) fn keep<T, E>(
        &self,
        id: ExecutionId,
        first: u64,
        at: SystemTime,
        mut payloads: Vec<EventPayload>,
        shown: bool,
        append: impl FnOnce(Vec<EventPayload>) -> Result<T, E>,
    ) -> (Result<T, E>, Vec<(u64, u64)>) {
        let mut inner = self.lock();
        let mut facts = Vec::new();
        for (sequence, payload) in (first..).zip(payloads.iter_mut()) {
            if let EventPayload::Usage(fact) = payload {
                if fact.cursor == 0 {
                    Arc::make_mut(fact).cursor = inner.next;
                }
                inner.next = inner.next.max(fact.cursor + 1);
                facts.push((sequence, fact.clone()));
            }
        }
        let appended = append(payloads);
        if appended.is_err() {
            // The positions given stay spent: an order may skip positions, never reuse one.
            return (appended, Vec::new());
        }
        let mut kept = Vec::with_capacity(facts.len());
        for (sequence, fact) in facts {
            let position = fact.cursor;
            let entry = UsageEntry {
                fact,
                execution_id: id,
                sequence,
                time: at,
            };
            inner.entries.insert(position, Held { entry, shown });
            if !shown {
                inner.hidden.push(position);
            }
            kept.push((sequence, position));
        }
        drop(inner);
        if shown && !kept.is_empty() {
            self.changes.publish();
        }
        (appended, kept)
    }

    /// Shows the facts of `id` up to event `upto`: the journal has them on disk.
    pub(in crate::store) fn reveal(&self, id: ExecutionId, upto: u64) {
        let mut inner = self.lock();
        let Inner {
            entries, hidden, ..
        } = &mut *inner;
        let before = hidden.len();
        hidden.retain(|position| match entries.get_mut(position) {
            Some(held) if held.entry.execution_id == id && held.entry.sequence <= upto => {
                held.shown = true;
                false
            }
            Some(_) => true,
            None => false,
        });
        let shown = hidden.len() != before;
        drop(inner);
        if shown {
            self.changes.publish();
        }
    }

    /// Removes the facts at `positions` (their execution left the store, or the journal
    /// could not keep them).
    pub(in crate::store) fn forget(&self, positions: impl IntoIterator<Item = u64>) {
        let mut inner = self.lock();
        let mut removed = false;
        for position in positions {
            removed |= inner.entries.remove(&position).is_some();
        }
        if removed {
            let Inner {
                entries, hidden, ..
            } = &mut *inner;
            hidden.retain(|position| entries.contains_key(position));
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
