//! Followers on every replica. Each followed execution has one entry here, shared by its
//! followers on this replica: its change signal and its last known position. Appends this
//! replica makes advance it at once; appends of other replicas arrive as notifications on a
//! `LISTEN` connection of its own; and a poll every `poll_interval` reads the position of
//! every followed execution that has not ended, so a notification lost (the connection
//! dropped, the database restarted) delays a follower by at most that. A follower reads its
//! events from the database; an execution that left the store stays readable for a while
//! (`capacity.rs`), and its followers are told no change will come.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use super::rows::state_of;
use super::{PgError, Shared, on_store, schema, uuid};
use crate::execution::{Event, ExecutionId, ExecutionState, IdMap, Labels};
use crate::store::{ChangeSignal, EventSource, Fetch, Follower};

/// One followed execution.
#[derive(Debug)]
pub(super) struct Watch {
    signal: Arc<ChangeSignal>,
    position: Mutex<(u64, ExecutionState)>,
    labels: Arc<Labels>,
    /// The events this replica appended since the entry was made, in order with no gap: its
    /// followers here read them without the database (an owner's own `Execute` streams).
    tail: Mutex<VecDeque<Event>>,
}

impl Watch {
    fn tail(&self) -> MutexGuard<'_, VecDeque<Event>> {
        self.tail.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Copies the events after `after` (at most `limit`) to `into` when the tail holds all
    /// there are; `false` when they must be read from the database.
    fn read_tail(&self, after: u64, limit: usize, into: &mut VecDeque<Event>) -> bool {
        let last = self.position().0;
        let tail = self.tail();
        let (Some(front), Some(back)) = (tail.front(), tail.back()) else {
            return false;
        };
        if front.sequence > after + 1 || back.sequence < last {
            return false;
        }
        let skip = usize::try_from(after.saturating_sub(front.sequence - 1)).unwrap_or(usize::MAX);
        into.extend(tail.iter().skip(skip).take(limit).cloned());
        true
    }

    fn position(&self) -> MutexGuard<'_, (u64, ExecutionState)> {
        self.position.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the position forward (never back); whether it moved.
    fn moved(&self, last: u64, state: ExecutionState) -> bool {
        let mut position = self.position();
        let moved = last > position.0;
        if moved {
            *position = (last, state);
        }
        moved
    }

    /// Moves the position forward and wakes the followers if it moved.
    fn advance(&self, last: u64, state: ExecutionState) {
        if self.moved(last, state) {
            self.signal.publish();
        }
    }
}

/// The followed executions of this replica.
#[derive(Debug, Default)]
pub(super) struct Registry(Mutex<IdMap<Weak<Watch>>>);

impl Registry {
    fn lock(&self) -> MutexGuard<'_, IdMap<Weak<Watch>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(&self, id: ExecutionId, labels: &Arc<Labels>) -> Arc<Watch> {
        let mut map = self.lock();
        if let Some(watch) = map.get(&id).and_then(Weak::upgrade) {
            return watch;
        }
        let watch = Arc::new(Watch {
            signal: ChangeSignal::new(),
            position: Mutex::new((0, ExecutionState::Accepted)),
            labels: labels.clone(),
            tail: Mutex::default(),
        });
        map.insert(id, Arc::downgrade(&watch));
        watch
    }

    fn get(&self, id: ExecutionId) -> Option<Arc<Watch>> {
        self.lock().get(&id).and_then(Weak::upgrade)
    }

    /// `id` is at `last` with `state`.
    pub(super) fn advance(&self, id: ExecutionId, last: u64, state: ExecutionState) {
        if let Some(watch) = self.get(id) {
            watch.advance(last, state);
        }
    }

    /// This replica appended `events` to `id`: its followers here are told, and read them
    /// from the tail.
    pub(super) fn appended(&self, id: ExecutionId, events: Vec<Event>) {
        let (Some(watch), Some(first), Some(last)) = (self.get(id), events.first(), events.last())
        else {
            return;
        };
        let (first, last, state) = (first.sequence, last.sequence, last.state);
        {
            let mut tail = watch.tail();
            if tail.back().is_some_and(|e| e.sequence + 1 != first) {
                tail.clear();
            }
            tail.extend(events);
        }
        // The tail has what a reader may not have seen, even where a notification of the
        // same append moved the position first: always a wake-up.
        watch.moved(last, state);
        watch.signal.publish();
    }

    /// `id`'s first event, known here (this replica created it): at the tail's front, so its
    /// followers here read it without the database.
    pub(super) fn first(&self, id: ExecutionId, first: &Event) {
        let Some(watch) = self.get(id) else {
            return;
        };
        let mut tail = watch.tail();
        if tail
            .front()
            .is_none_or(|e| e.sequence == first.sequence + 1)
        {
            tail.push_front(first.clone());
        }
    }

    /// `id` left the store: its followers hear that no change will come.
    pub(super) fn close(&self, id: ExecutionId) {
        if let Some(watch) = self.lock().remove(&id).and_then(|w| w.upgrade()) {
            watch.signal.close();
        }
    }

    /// The followed executions that have not ended, forgetting those nobody follows.
    fn running(&self) -> Vec<(ExecutionId, Arc<Watch>)> {
        let mut map = self.lock();
        map.retain(|_, watch| watch.strong_count() > 0);
        map.iter()
            .filter_map(|(id, watch)| Some((*id, watch.upgrade()?)))
            .filter(|(_, watch)| !watch.position().1.is_terminal())
            .collect()
    }

    /// Wakes every follower: appends may have been announced while nobody listened.
    fn wake_all(&self) {
        for (_, watch) in self.running() {
            watch.signal.publish();
        }
    }
}

/// A follower of `id`, at `last` with `state` when it was looked up.
pub(super) fn follower(
    shared: &Arc<Shared>,
    id: ExecutionId,
    labels: &Arc<Labels>,
    last: u64,
    state: ExecutionState,
) -> Follower {
    // The entry exists before the position is set from the lookup, so an append of this
    // replica in between moves it on rather than being missed.
    let watch = shared.watched.entry(id, labels);
    watch.advance(last, state);
    let changes = watch.signal.subscribe();
    Follower::new(
        changes,
        Arc::new(Source {
            shared: shared.clone(),
            id,
            watch,
        }),
    )
}

struct Source {
    shared: Arc<Shared>,
    id: ExecutionId,
    watch: Arc<Watch>,
}

impl EventSource for Source {
    fn read(&self, after: u64, limit: usize, into: &mut VecDeque<Event>) -> Fetch<Event> {
        if self.watch.read_tail(after, limit, into) {
            return None;
        }
        let shared = self.shared.clone();
        let (id, labels) = (self.id, self.watch.labels.clone());
        Some(on_store(&self.shared, async move {
            read_through(&shared, id, after, limit, &labels)
                .await
                .map_err(PgError::into_store)
        }))
    }

    fn position(&self) -> (u64, ExecutionState) {
        *self.watch.position()
    }
}

/// A follower's read, asked again while the database does not answer, for up to a lease: a
/// blip (a restart, a dropped connection) delays a reader and ends nothing, and the reader
/// goes on from its last event. Only a database that stays away longer ends the reader's
/// stream (`UNAVAILABLE`: it resumes from its cursor, here or at another replica).
async fn read_through(
    shared: &Shared,
    id: ExecutionId,
    after: u64,
    limit: usize,
    labels: &Arc<Labels>,
) -> Result<Vec<Event>, PgError> {
    let give_up = tokio::time::Instant::now() + shared.replica.lease;
    let mut tries = 0u32;
    loop {
        match shared.events(id, after, limit, labels).await {
            Err(error) if error.transient() && tokio::time::Instant::now() < give_up => {
                tries += 1;
                tracing::debug!(execution_id = %id, %error, tries, "a follower's read failed; reading again");
                tokio::time::sleep(Duration::from_millis(10 << tries.min(5))).await;
            }
            read => return read,
        }
    }
}

/// The notifications' task: listens, and after every reconnection wakes every follower.
pub(super) async fn listen(shared: Arc<Shared>) {
    let mut failures = 0u32;
    loop {
        match listen_once(&shared).await {
            Ok(()) => failures = 0,
            Err(error) => {
                failures += 1;
                tracing::warn!(%error, "the store's notification connection failed");
            }
        }
        shared.watched.wake_all();
        shared.usage.publish();
        tokio::time::sleep(Duration::from_millis(100 << failures.min(5))).await;
    }
}

async fn listen_once(shared: &Shared) -> Result<(), PgError> {
    let config = super::connect::notifications(&shared.options);
    let (client, mut connection) = config.connect(shared.tls.clone()).await?;
    let (tx, mut notes) = mpsc::unbounded_channel();
    let pump = shared.handle.spawn(async move {
        while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(AsyncMessage::Notification(note)) => {
                    if tx.send(note).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    });
    client
        .batch_execute(&format!(
            "/* model-runtime: listen */ LISTEN {}",
            schema::quote(&shared.channel)
        ))
        .await?;
    // Listening now: what was announced before is read by everyone again; then whoever
    // waits for the listening goes on, woken by notifications alone from here.
    shared.watched.wake_all();
    shared.usage.publish();
    shared.listening.notify_waiters();
    while let Some(note) = notes.recv().await {
        heard(shared, note.payload());
    }
    drop(client);
    match pump.await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Ok(()),
    }
}

/// One notification: a cancel (`c ...`, `cancel.rs`), or appends: `ID LAST STATE` and, when
/// the append kept usage facts, ` u`, for each execution of a statement, `,` between them.
fn heard(shared: &Shared, payload: &str) {
    if let Some(cancel) = payload.strip_prefix("c ") {
        super::cancel::heard(shared, cancel);
        return;
    }
    for appended in payload.split(',') {
        heard_append(shared, appended);
    }
}

fn heard_append(shared: &Shared, payload: &str) {
    let mut words = payload.split(' ');
    let (Some(id), Some(last), Some(state)) = (words.next(), words.next(), words.next()) else {
        return;
    };
    let (Ok(id), Ok(last), Ok(state)) = (
        uuid::Uuid::parse_str(id),
        last.parse::<u64>(),
        state.parse::<i16>(),
    ) else {
        return;
    };
    let Ok(state) = state_of(state) else {
        return;
    };
    let id = ExecutionId::from_bytes(id.into_bytes());
    // The usage readers first: whoever sees a follower moved by another replica's append
    // sees them woken too. (This replica's own appends wake both as their answer comes.)
    if words.next() == Some("u") {
        shared.usage.publish();
    }
    // This replica's own append: woken by a notification that may come before the append's
    // answer, its followers would read from the database what the answer brings them.
    if !shared.owned.wrote(id, last) {
        shared.watched.advance(id, last, state);
    }
}

const POSITIONS: &str = "/* model-runtime: positions */ SELECT id, last_sequence, state FROM executions \
     WHERE id = ANY($1) AND gone_at IS NULL";

/// The poll's task: every `poll_interval`, the followed executions' positions, what
/// retention and capacity owe, and a wake-up of usage readers (facts become readable when
/// older transactions end, which nothing announces).
pub(super) async fn poll(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(shared.options.config.poll_interval).await;
        if let Err(error) = poll_once(&shared).await {
            tracing::debug!(%error, "the store's poll failed");
        }
    }
}

async fn poll_once(shared: &Shared) -> Result<(), PgError> {
    let running = shared.watched.running();
    if !running.is_empty() {
        let ids: Vec<uuid::Uuid> = running.iter().map(|(id, _)| uuid(*id)).collect();
        let rows = shared
            .on_connection(async |client| {
                let statement = client.prepare_cached(POSITIONS).await?;
                Ok(client.query(&statement, &[&ids]).await?)
            })
            .await?;
        let mut found = std::collections::HashSet::with_capacity(rows.len());
        for row in rows {
            let id: uuid::Uuid = row.try_get(0)?;
            let last: i64 = row.try_get(1)?;
            let id = ExecutionId::from_bytes(id.into_bytes());
            found.insert(id);
            shared
                .watched
                .advance(id, last.cast_unsigned(), state_of(row.try_get(2)?)?);
        }
        for (id, _) in running {
            if !found.contains(&id) {
                shared.watched.close(id);
            }
        }
    }
    if shared.usage.readers() > 0 {
        shared.usage.publish();
    }
    super::cancel::pending(shared).await?;
    shared.capacity.tend(shared).await
}
