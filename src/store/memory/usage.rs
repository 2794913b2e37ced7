//! The memory store's usage order (see `store/usage.rs`): the usage facts of the executions
//! it holds, by position. A fact gets its position when it is appended, under the record's
//! lock and then this log's, so positions grow in the order facts were kept; a journaled
//! store shows a fact only once the journal has it on disk, and a reader stops at the first
//! fact not yet shown, so it never passes over one that is still to come. A fact leaves the
//! order with its execution (or, not yet shown, when the journal could not keep it); a
//! reader stopped at a fact that leaves is woken to read past it.

use std::collections::VecDeque;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use super::record::Positions;
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
    entries: Order,
}

#[derive(Debug)]
struct Held {
    entry: UsageEntry,
    shown: bool,
}

/// The facts by position, ascending: a deque rather than a search tree, since a new fact's
/// position is almost always the greatest, and facts leave roughly oldest first. A fact
/// kept below the greatest (a replayed one: a restart replays executions in the order they
/// ended, then the running ones) is pushed at the back all the same, and the deque sorted
/// once when next looked at, so a replay in any order costs one sort. A fact that leaves
/// from the middle leaves a hole, found by position like a fact; holes go from the ends at
/// once, and all of them once they outnumber the facts, so the deque stays within twice
/// the facts it holds.
#[derive(Debug, Default)]
struct Order {
    slots: VecDeque<(u64, Option<Held>)>,
    holes: usize,
    /// A fact was pushed at the back below the greatest: sort before looking.
    unsorted: bool,
}

/// The end of the order a search starts from.
#[derive(Debug, Clone, Copy)]
enum End {
    Front,
    Back,
}

impl Order {
    /// Where `position` is, or would go (in a sorted deque), looked for from the end it is
    /// likely near: the front for a fact that leaves (facts leave about oldest first), the
    /// back for a reveal or a reader that keeps up (the newest facts). The search widens
    /// from that end (1, 2, 4, ... entries in) and then halves within the last step, so a
    /// position near it touches a few neighbouring entries, not a binary search's path
    /// through the whole deque, whose entries the cache has long let go in a full store.
    fn find(&self, position: u64, end: End) -> Result<usize, usize> {
        let before = |at: usize| self.slots[at].0 < position;
        // Every entry below `low` is before `position`; none from `high` on is.
        let (mut low, mut high) = (0, self.slots.len());
        let mut step = 1;
        match end {
            End::Front => {
                while low + step <= high {
                    let probe = low + step - 1;
                    if !before(probe) {
                        high = probe;
                        break;
                    }
                    low = probe + 1;
                    step *= 2;
                }
            }
            End::Back => {
                while step <= high - low {
                    let probe = high - step;
                    if before(probe) {
                        low = probe + 1;
                        break;
                    }
                    high = probe;
                    step *= 2;
                }
            }
        }
        while low < high {
            let mid = low + (high - low) / 2;
            if before(mid) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        match self.slots.get(low) {
            Some((at, _)) if *at == position => Ok(low),
            _ => Err(low),
        }
    }

    fn insert(&mut self, position: u64, held: Held) {
        if self.slots.back().is_some_and(|(last, _)| *last >= position) {
            self.unsorted = true;
        }
        self.slots.push_back((position, Some(held)));
    }

    /// Sorts what was pushed out of order; of facts at one position the last kept stays,
    /// as a map's insert replaces.
    fn settle(&mut self) {
        if !std::mem::take(&mut self.unsorted) {
            return;
        }
        // The deque's buffer becomes a vector's and back, with no new allocation.
        let mut slots = Vec::from(std::mem::take(&mut self.slots));
        // Stable, so that of facts at one position the last kept is the last of its run.
        slots.sort_by_key(|(position, _)| *position);
        slots.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        self.holes = slots.iter().filter(|(_, slot)| slot.is_none()).count();
        self.slots = slots.into();
    }

    fn remove(&mut self, position: u64) -> Option<Held> {
        self.settle();
        let at = self.find(position, End::Front).ok()?;
        let held = self.slots[at].1.take()?;
        self.holes += 1;
        while self.slots.front().is_some_and(|(_, slot)| slot.is_none()) {
            self.slots.pop_front();
            self.holes -= 1;
        }
        while self.slots.back().is_some_and(|(_, slot)| slot.is_none()) {
            self.slots.pop_back();
            self.holes -= 1;
        }
        if self.holes > self.slots.len() / 2 {
            self.slots.retain(|(_, slot)| slot.is_some());
            self.holes = 0;
            // After a burst, the room it needed goes too.
            if self.slots.capacity() > 4 * self.slots.len().max(64) {
                self.slots.shrink_to(2 * self.slots.len());
            }
        }
        Some(held)
    }

    /// The facts at `positions`, in order.
    fn within_mut(&mut self, positions: RangeInclusive<u64>) -> impl Iterator<Item = &mut Held> {
        self.settle();
        let (from, to) = positions.into_inner();
        let at = self.find(from, End::Back).unwrap_or_else(|at| at);
        self.slots
            .range_mut(at..)
            .take_while(move |(position, _)| *position <= to)
            .filter_map(|(_, slot)| slot.as_mut())
    }

    /// The facts after position `after`, in order.
    fn after(&mut self, after: u64) -> impl Iterator<Item = &Held> {
        self.settle();
        let at = match self.find(after, End::Back) {
            Ok(at) => at + 1,
            Err(at) => at,
        };
        self.slots.range(at..).filter_map(|(_, slot)| slot.as_ref())
    }
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
        positions: &mut Positions,
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
                inner.entries.remove(position);
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
    pub(in crate::store) fn reveal(&self, positions: RangeInclusive<u64>) {
        let mut inner = self.lock();
        let mut shown = false;
        for held in inner.entries.within_mut(positions) {
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
                .remove(position)
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
        let mut inner = self.lock();
        let shown = inner
            .entries
            .after(after)
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

    fn keep(log: &UsageLog, id: ExecutionId, shown: bool) -> Positions {
        let mut positions = Positions::new();
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

    fn held(position: u64) -> Held {
        let EventPayload::Usage(mut fact) = fixtures::usage(1) else {
            unreachable!("fixtures::usage is a usage fact")
        };
        Arc::make_mut(&mut fact).position = position;
        Held {
            entry: UsageEntry {
                fact,
                execution_id: ExecutionId::new(),
                sequence: 1,
                time: SystemTime::UNIX_EPOCH,
            },
            shown: !position.is_multiple_of(3),
        }
    }

    proptest::proptest! {
        /// The deque answers as a map by position would, whatever the order of keeping and
        /// leaving (a replayed fact may come below the greatest), and holds at most twice the
        /// facts it keeps.
        #[test]
        fn the_order_answers_as_a_map_and_stays_within_twice_its_facts(
            ops in proptest::collection::vec((proptest::bool::weighted(0.6), 1u64..200), 1..400)
        ) {
            let mut order = Order::default();
            let mut model = std::collections::BTreeMap::new();
            for (keep, position) in ops {
                if keep {
                    order.insert(position, held(position));
                    model.insert(position, !position.is_multiple_of(3));
                } else {
                    let left = order.remove(position).map(|h| h.entry.fact.position);
                    proptest::prop_assert_eq!(left, model.remove(&position).map(|_| position));
                }
                let after = position / 2;
                let read: Vec<_> = order.after(after).map(|h| h.entry.fact.position).collect();
                let expected: Vec<_> = model.range(after + 1..).map(|(p, _)| *p).collect();
                proptest::prop_assert_eq!(read, expected);
                let within = after..=after + 50;
                let shown: Vec<_> = order
                    .within_mut(within.clone())
                    .map(|h| (h.entry.fact.position, h.shown))
                    .collect();
                let expected: Vec<_> = model.range(within).map(|(p, s)| (*p, *s)).collect();
                proptest::prop_assert_eq!(shown, expected);
                // Settled by the reads above: from either end, a search answers as a
                // binary search does.
                for wanted in [0, after, position, position + 1, 250] {
                    let expected = order.slots.binary_search_by_key(&wanted, |(p, _)| *p);
                    proptest::prop_assert_eq!(order.find(wanted, End::Front), expected);
                    proptest::prop_assert_eq!(order.find(wanted, End::Back), expected);
                }
                let holes = order.slots.iter().filter(|(_, slot)| slot.is_none()).count();
                proptest::prop_assert_eq!(order.holes, holes);
                proptest::prop_assert!(order.slots.len() <= 2 * model.len());
            }
        }
    }

    #[test]
    fn a_fact_that_stays_long_does_not_keep_the_holes_behind_it() {
        // A running execution's early fact stays while thousands of later ones come and go.
        let mut order = Order::default();
        order.insert(1, held(1));
        for position in 2..10_000 {
            order.insert(position, held(position));
            if position > 2 {
                order.remove(position - 1);
            }
        }
        assert!(
            order.slots.len() <= 4,
            "{} slots for 2 facts",
            order.slots.len()
        );
        let left: Vec<_> = order.after(0).map(|h| h.entry.fact.position).collect();
        assert_eq!(left, [1, 9_999]);
    }

    #[test]
    fn a_failed_append_takes_its_facts_back_and_spends_their_positions() {
        let log = UsageLog::new();
        let mut positions = Positions::new();
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
