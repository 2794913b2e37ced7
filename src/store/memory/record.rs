//! One execution in the memory store: what never changes, its followers' wake-up, and, under
//! its own lock, its events, its lazily folded view and the bytes it holds.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use smallvec::SmallVec;

use super::log::{Log, Nanos};
use super::size;
use crate::execution::{
    Event, EventPayload, Execution, ExecutionId, ExecutionState, Idempotency, Labels, Lifecycle,
};
use crate::store::{ChangeSignal, EventSource, Fetch, Inconsistency, StoreError};

/// One execution.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) id: ExecutionId,
    pub(super) idempotency: Option<Idempotency>,
    pub(super) labels: Arc<Labels>,
    pub(super) changes: Arc<ChangeSignal>,
    record: Mutex<Record>,
}

#[derive(Debug)]
pub(super) struct Record {
    events: Log,
    /// Heap bytes the events own beyond their slots (text past 23 bytes, shared payloads).
    event_heap: usize,
    /// The view folded from the first `folded` events, made when first read. Folding is lazy:
    /// appends only store events, and whoever reads the view folds what it has not seen yet.
    /// A caller that only follows the events (`Execute`) never pays for a view, and a record
    /// nobody asked about keeps none.
    view: Option<Box<Execution>>,
    view_bytes: usize,
    folded: u64,
    lifecycle: Lifecycle,
    /// The running execution's input, counted until it ends.
    input_bytes: usize,
    /// Whether the store still counts this record: no longer once it has left the store,
    /// though a follower may still hold it (and a late read fold its view).
    counted: bool,
    /// Events up to this sequence are visible: readers, positions and views see no further.
    /// A plain memory store shows each event as it is stored; a journaled one once the
    /// journal has it on disk (`Reveal`).
    visible: u64,
    /// The record left the store with events not yet visible: its readers hear that no
    /// change will come only once they are (so they read to the end, not to `NotFound`).
    close_when_visible: bool,
    /// Its usage facts' `(sequence, position)`s in the store's usage order, which they leave
    /// with the record.
    usage: Positions,
}

/// A record's usage positions: inline for the usual few (a reply's input and output tokens,
/// and the cached and reasoning counts OpenAI and Anthropic report with them).
pub(super) type Positions = SmallVec<[(u64, u64); 4]>;

/// A panic while a lock is held cannot leave a record half-updated in a way a later reader
/// would misread (each update is one push or one fold), so keep serving.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn not_accepted(id: ExecutionId) -> StoreError {
    StoreError::Inconsistent(Inconsistency::NotAccepted(id))
}

impl Slot {
    /// A new execution whose first event is `accepted`, with the view at acceptance.
    pub(super) fn new(
        id: ExecutionId,
        at: SystemTime,
        accepted: EventPayload,
        labels: Arc<Labels>,
        idempotency: Option<Idempotency>,
        input_bytes: usize,
    ) -> Result<(Self, Execution), StoreError> {
        let mut lifecycle = Lifecycle::default();
        let first = Event {
            sequence: 1,
            time: at,
            state: lifecycle.apply(&accepted)?,
            payload: accepted,
        };
        let key = idempotency.as_ref().map(|i| i.key.clone());
        let view = Execution::from_accepted(&first, id, labels.clone(), key)
            .ok_or_else(|| not_accepted(id))?;
        let mut record = Record {
            events: Log::default(),
            event_heap: 0,
            view: None,
            view_bytes: 0,
            folded: 0,
            lifecycle,
            input_bytes,
            counted: true,
            visible: 0,
            close_when_visible: false,
            usage: Positions::new(),
        };
        record.push(Nanos::of(first.time), first.state, first.payload);
        let slot = Self {
            id,
            idempotency,
            labels,
            changes: ChangeSignal::new(),
            record: Mutex::new(record),
        };
        Ok((slot, view))
    }

    pub(super) fn record(&self) -> MutexGuard<'_, Record> {
        lock(&self.record)
    }

    /// The record leaves the store: the bytes it was counted for, never counted again.
    pub(super) fn uncount(&self) -> usize {
        let mut record = self.record();
        record.counted = false;
        record.bytes()
    }

    /// The view, folded up to the last event; `count` gets the change in the record's bytes
    /// while the record is still locked, so an eviction cannot come between the change and
    /// its count.
    pub(super) fn view(&self, count: impl FnOnce(i64)) -> Result<Execution, StoreError> {
        let key = self.idempotency.as_ref().map(|i| &i.key);
        let mut record = self.record();
        let (view, delta) = record.view(self.id, &self.labels, key)?;
        count(delta);
        Ok(view)
    }

    /// Makes the events up to `sequence` visible and wakes the followers.
    pub(super) fn reveal(&self, sequence: u64) {
        let close = {
            let mut record = self.record();
            record.visible = record.visible.max(sequence.min(record.events.len()));
            record.close_when_visible && record.visible == record.events.len()
        };
        self.changes.publish();
        if close {
            self.changes.close();
        }
    }

    /// Takes back the events no reader has seen (the journal could not make them durable);
    /// returns the change in bytes, whether no event was ever seen, and the usage positions
    /// of the facts taken back.
    pub(super) fn roll_back(&self) -> (i64, bool, Vec<u64>) {
        let (delta, close, unseen, taken) = {
            let mut record = self.record();
            let (delta, taken) = record.roll_back();
            (delta, record.close_when_visible, record.visible == 0, taken)
        };
        if close {
            self.changes.close();
        }
        (delta, unseen, taken)
    }

    /// The record has left the store: tells its readers no change will come, now if they can
    /// see every event, else once they can.
    pub(super) fn close(&self) {
        {
            let mut record = self.record();
            if record.visible < record.events.len() {
                record.close_when_visible = true;
                return;
            }
        }
        self.changes.close();
    }
}

impl Slot {
    /// The first event, once visible.
    pub(super) fn first(&self) -> Option<Event> {
        let record = self.record();
        (record.visible > 0)
            .then(|| record.events.events(0).next())
            .flatten()
    }
}

impl EventSource for Slot {
    fn read(&self, after: u64, limit: usize, into: &mut VecDeque<Event>) -> Fetch<Event> {
        let record = self.record();
        let visible = usize::try_from(record.visible.saturating_sub(after)).unwrap_or(usize::MAX);
        record.events.read(after, limit.min(visible), into);
        None
    }

    fn position(&self) -> (u64, ExecutionState) {
        let record = self.record();
        let state = if record.visible == record.events.len() {
            record.lifecycle.state()
        } else {
            record.events.state_at(record.visible)
        };
        (record.visible, state.unwrap_or(ExecutionState::Accepted))
    }
}

impl Record {
    /// Bytes the record holds, as the store counts them.
    pub(super) fn bytes(&self) -> usize {
        size::RECORD + self.events.bytes() + self.event_heap + self.view_bytes + self.input_bytes
    }

    fn push(&mut self, at: Nanos, state: ExecutionState, payload: EventPayload) {
        self.event_heap += size::heap(&payload);
        self.events.push(at, state, payload);
    }

    /// Whether the execution has ended.
    pub(super) fn is_terminal(&self) -> bool {
        self.lifecycle
            .state()
            .is_some_and(ExecutionState::is_terminal)
    }

    pub(super) fn check_open(&self, id: ExecutionId) -> Result<(), StoreError> {
        if self
            .lifecycle
            .state()
            .is_some_and(ExecutionState::is_terminal)
        {
            return Err(StoreError::AlreadyTerminal(id));
        }
        Ok(())
    }

    /// Sequence n is the n-th event.
    pub(super) fn last_sequence(&self) -> u64 {
        self.events.len()
    }

    /// Takes back the events no reader has seen (a journal could not make them durable):
    /// the record is as it was after its last visible event. Returns the change in bytes and
    /// the usage positions of the facts taken back.
    pub(super) fn roll_back(&mut self) -> (i64, Vec<u64>) {
        let before = self.bytes();
        self.events.truncate(self.visible);
        let visible = self.visible;
        let taken = self
            .usage
            .iter()
            .filter(|(sequence, _)| *sequence > visible)
            .map(|(_, position)| *position)
            .collect();
        self.usage.retain(|(sequence, _)| *sequence <= visible);
        let mut lifecycle = Lifecycle::default();
        self.event_heap = 0;
        for event in self.events.events(0) {
            // They were legal when they were stored, and are replayed in the same order.
            let _ = lifecycle.apply(&event.payload);
            self.event_heap += size::heap(&event.payload);
        }
        self.lifecycle = lifecycle;
        (self.change(before), taken)
    }

    /// Its usage facts' `(sequence, position)`s, to add to while appending (then put back).
    pub(super) fn take_positions(&mut self) -> Positions {
        std::mem::take(&mut self.usage)
    }

    pub(super) fn put_positions(&mut self, positions: Positions) {
        self.usage = positions;
    }

    /// The usage positions of the record's facts, which leave the order with it.
    pub(super) fn take_usage(&mut self) -> impl Iterator<Item = u64> + use<> {
        std::mem::take(&mut self.usage)
            .into_iter()
            .map(|(_, position)| position)
    }

    /// Shows every event stored so far.
    pub(super) fn reveal_all(&mut self) {
        self.visible = self.events.len();
    }

    /// The visible events after `after`, copied out.
    pub(super) fn visible_events(&self, after: u64) -> impl Iterator<Item = Event> {
        let count = usize::try_from(self.visible.saturating_sub(after)).unwrap_or(usize::MAX);
        self.events.events(after).take(count)
    }

    /// The events after `after`, visible or not, copied out: what a journal writes.
    pub(super) fn events_after(&self, after: u64) -> impl Iterator<Item = Event> {
        self.events.events(after)
    }

    /// The view, after folding in the events it has not seen, and the change in bytes.
    fn view(
        &mut self,
        id: ExecutionId,
        labels: &Arc<Labels>,
        key: Option<&String>,
    ) -> Result<(Execution, i64), StoreError> {
        let before = self.bytes();
        let view = match &mut self.view {
            Some(view) => view,
            None => {
                let first = self
                    .events
                    .events(0)
                    .next()
                    .ok_or_else(|| not_accepted(id))?;
                let view = Execution::from_accepted(&first, id, labels.clone(), key.cloned())
                    .ok_or_else(|| not_accepted(id))?;
                self.folded = 1;
                self.view.insert(Box::new(view))
            }
        };
        // A view never shows what readers cannot see yet; the first event it always has.
        let upto = self.visible.max(1);
        if self.folded < upto {
            let count = usize::try_from(upto - self.folded).unwrap_or(usize::MAX);
            for event in self.events.events(self.folded).take(count) {
                view.apply(&event);
            }
            self.folded = upto;
        }
        self.view_bytes = size::view(view);
        let view = Execution::clone(view);
        Ok((view, self.change(before)))
    }

    /// Stores `payloads` after the last event, all or none: each goes through the state
    /// machine as it is stored, and a refused one takes back what this call stored before it.
    /// They share one time, `at` (they are appended together). Returns whether the last one ends
    /// the execution, and the change in bytes.
    pub(super) fn append(
        &mut self,
        at: SystemTime,
        payloads: Vec<EventPayload>,
    ) -> Result<(bool, i64), StoreError> {
        let before = self.bytes();
        let undo = (self.lifecycle, self.events.len(), self.event_heap);
        let at = Nanos::of(at);
        let mut terminal = false;
        for payload in payloads {
            let state = match self.lifecycle.apply(&payload) {
                Ok(state) => state,
                Err(illegal) => {
                    let (lifecycle, len, heap) = undo;
                    self.lifecycle = lifecycle;
                    self.events.truncate(len);
                    self.event_heap = heap;
                    return Err(illegal.into());
                }
            };
            terminal = state.is_terminal();
            self.push(at, state, payload);
        }
        if terminal {
            // The driver lets the input go as the execution ends, and no more events come.
            self.input_bytes = 0;
            self.events.shrink();
        }
        Ok((terminal, self.change(before)))
    }

    /// The last event, copied out.
    pub(super) fn last_event(&self) -> Option<Event> {
        self.events.last()
    }
}

impl Record {
    /// The change in counted bytes since the record held `before`.
    fn change(&self, before: usize) -> i64 {
        if !self.counted {
            return 0;
        }
        i64::try_from(self.bytes()).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(i64::MAX)
    }
}
