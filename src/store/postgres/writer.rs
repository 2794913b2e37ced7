//! Appends. The owner of an execution is the only replica that appends to it, so it keeps the
//! execution's lifecycle and last sequence at hand ([`Owned`]) and checks each event against
//! the state machine before the database sees it. A task (`batch.rs`) takes every append
//! waiting at the moment and writes them as one statement, one commit for all: per
//! execution the statement updates the row only if its last sequence is the one expected,
//! this replica still owns it and its lease is current (the fence), and inserts the events
//! only for the rows it updated, so each execution's events go in whole or not at all. Rows
//! it did not update are looked at again by their own append: not found, ended, owned by
//! another replica, or (after a lost answer) already written.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;

use super::batch::Batched;
use super::owned::Held;
use super::rows::{self, EVENT_OVERHEAD};
use super::{PgError, Shared, uuid};
use crate::execution::{Event, EventPayload, ExecutionId, ExecutionState, Lifecycle};
use crate::store::{Inconsistency, StoreError, Unavailable};
pub(super) use statement::MAX_FACTS;
use statement::{Stored, statement};

mod statement;

/// One append on its way to the writer.
pub(super) struct Request {
    id: ExecutionId,
    /// The registration it was asked under: it is written under that one or not at all.
    registration: uuid::Uuid,
    /// Moved into the events the writer stores, and handed back with an outcome that may be
    /// asked again: an append's payloads are never copied.
    payloads: Vec<EventPayload>,
    /// When (retention's clock) it was asked for.
    now: i64,
    reply: Reply,
}

/// The events stored, or why not.
type Reply = oneshot::Sender<Result<Vec<Event>, Outcome>>;

/// Why the writer did not store an append.
enum Outcome {
    /// The state machine refuses it (nothing was sent).
    Refused(StoreError),
    /// This replica does not hold the execution (any more): look at its row. With the
    /// payloads, to ask again.
    Unheld(Vec<EventPayload>),
    /// The database did not update the row: not the sequence, owner or lease expected. With
    /// the payloads, to ask again.
    Stale(Vec<EventPayload>),
    /// The statement failed; `expected` is the last sequence before it, and it may have
    /// committed (the answer may be what was lost); whether asking again may help, and the
    /// payloads to ask with.
    Unknown {
        expected: u64,
        transient: bool,
        payloads: Vec<EventPayload>,
    },
}

/// Appends `payloads` to `id`, on the store's runtime, under `registration` (this replica's
/// when the append was asked for): through the writer, then (if it could not store them) by
/// looking at the row again. While the database does not answer, it asks again as long as
/// this replica's lease is current (past it, a survivor ends the execution); a statement
/// whose answer was lost is never sent again before the row says it did not commit. Once the
/// replica has registered again, the append is refused: what was asked under a lost lease is
/// never written under the next one.
pub(super) async fn append(
    shared: &Shared,
    id: ExecutionId,
    registration: uuid::Uuid,
    mut payloads: Vec<EventPayload>,
    now: i64,
) -> Result<Vec<Event>, StoreError> {
    let facts = payloads
        .iter()
        .filter(|p| matches!(p, EventPayload::Usage(_)))
        .count();
    // Not a store that is down: the same append is refused again.
    if facts > MAX_FACTS {
        return Err(StoreError::Backend(format!(
            "an append of {facts} usage facts is more than the PostgreSQL store keeps at \
             once ({MAX_FACTS})"
        )));
    }
    let count = payloads.len() as u64;
    let mut retries = 0u32;
    // A statement that may have committed: the last sequence before it.
    let mut unsure: Option<u64> = None;
    loop {
        if retries > 0 {
            if !shared.replica.current() {
                return Err(unreachable_db());
            }
            tokio::time::sleep(backoff(retries)).await;
        }
        if shared.replica.id().0 != registration {
            return Err(not_owner(id));
        }
        retries += 1;
        if let Some(expected) = unsure {
            match written(shared, id, expected, count).await {
                Ok(Some((events, input))) => {
                    kept(shared, id, &events, now, input);
                    if facts_kept(shared, &events) {
                        shared.usage.publish();
                    }
                    return Ok(events);
                }
                Ok(None) => unsure = None,
                Err(e) if e.transient() => continue,
                Err(e) => return Err(e.into_store()),
            }
        }
        if !shared.owned.held(id) {
            match hold(shared, id).await {
                Ok(()) => {}
                Err(e) if e.transient() => continue,
                Err(e) => return Err(e.into_store_or_refusal()),
            }
        }
        let (reply, answer) = oneshot::channel();
        let request = Request {
            id,
            registration,
            payloads,
            now,
            reply,
        };
        if shared.writer.send(request).is_err() {
            return Err(StoreError::Unavailable(Unavailable::Closed));
        }
        let outcome = match answer.await {
            Ok(Ok(events)) => return Ok(events),
            Ok(Err(outcome)) => outcome,
            Err(_) => return Err(StoreError::Unavailable(Unavailable::Closed)),
        };
        payloads = match outcome {
            Outcome::Refused(error) => return Err(error),
            Outcome::Unheld(payloads) | Outcome::Stale(payloads) => payloads,
            Outcome::Unknown {
                expected,
                transient: true,
                payloads,
            } => {
                unsure = Some(expected);
                payloads
            }
            Outcome::Unknown {
                transient: false, ..
            } => return Err(StoreError::Inconsistent(Inconsistency::Database)),
        };
    }
}

/// Whether the statement that followed `expected` committed `count` events: them (and the
/// execution's input bytes), if so.
async fn written(
    shared: &Shared,
    id: ExecutionId,
    expected: u64,
    count: u64,
) -> Result<Option<(Vec<Event>, i64)>, PgError> {
    match shared.row(id).await? {
        Some(row)
            if row.last == expected + count && shared.replica.owns(row.owner, row.owner_epoch) =>
        {
            let events = shared.events(id, expected, usize::MAX, &row.labels).await?;
            Ok(Some((events, row.input)))
        }
        _ => Ok(None),
    }
}

fn unreachable_db() -> StoreError {
    StoreError::Unavailable(Unavailable::Backend(
        "the event store's database is unreachable".into(),
    ))
}

fn backoff(retries: u32) -> Duration {
    Duration::from_millis(10u64 << retries.min(6))
}

/// Why an execution could not be held.
enum Unheld {
    /// The database did not answer.
    Db(PgError),
    /// This replica may not append to it.
    Refused(StoreError),
}

impl Unheld {
    fn transient(&self) -> bool {
        matches!(self, Self::Db(e) if e.transient())
    }

    fn into_store_or_refusal(self) -> StoreError {
        match self {
            Self::Db(e) => e.into_store(),
            Self::Refused(e) => e,
        }
    }
}

/// Reads the row of `id` and holds it, or says why this replica may not append to it.
async fn hold(shared: &Shared, id: ExecutionId) -> Result<(), Unheld> {
    let row = shared
        .row(id)
        .await
        .map_err(Unheld::Db)?
        .ok_or(Unheld::Refused(StoreError::NotFound(id)))?;
    if row.lifecycle_state.is_terminal() {
        return Err(Unheld::Refused(StoreError::AlreadyTerminal(id)));
    }
    if !shared.replica.owns(row.owner, row.owner_epoch) {
        return Err(Unheld::Refused(not_owner(id)));
    }
    shared.owned.hold_row(id, &row);
    Ok(())
}

/// This replica may not append to `id`: another owns it (a survivor took it over while this
/// one's lease had lapsed, or another accepted it).
pub(super) fn not_owner(id: ExecutionId) -> StoreError {
    StoreError::Unavailable(Unavailable::Backend(format!(
        "execution {id} is owned by another replica"
    )))
}

impl Batched for Request {
    type Key = ExecutionId;

    fn key(&self) -> ExecutionId {
        self.id
    }

    fn write(shared: &Shared, batch: Vec<Self>) -> impl Future<Output = ()> + Send {
        write(shared, batch)
    }
}

/// One execution's part of a statement.
struct Part {
    id: ExecutionId,
    /// When (retention's clock) its append was asked for.
    now: i64,
    reply: Reply,
    expected: u64,
    input: i64,
    events: Vec<Event>,
    /// The events as their rows keep them.
    framed: rows::Framed,
    lifecycle: Lifecycle,
    bytes: i64,
}

/// Checks each append against its execution's lifecycle, writes those that pass, and answers
/// each.
async fn write(shared: &Shared, batch: Vec<Request>) {
    let time = rows::now();
    // The one registration the statement is fenced by.
    let identity = shared.replica.identity();
    let mut parts = Vec::with_capacity(batch.len());
    {
        let mut owned = shared.owned.lock();
        for request in batch {
            let Request {
                id,
                registration,
                payloads,
                now,
                reply,
            } = request;
            if registration != identity.0 {
                let _ = reply.send(Err(Outcome::Refused(not_owner(id))));
                continue;
            }
            let Some(held) = owned.get(&id).cloned() else {
                let _ = reply.send(Err(Outcome::Unheld(payloads)));
                continue;
            };
            match check(id, &held, payloads, time) {
                Ok(Checked {
                    events,
                    framed,
                    lifecycle,
                    bytes,
                }) => {
                    // Tentatively: the next append of this execution waits for this one's
                    // answer (one per execution per statement), and a failure forgets it.
                    owned.insert(
                        id,
                        Held {
                            lifecycle,
                            last: held.last + events.len() as u64,
                            ..held.clone()
                        },
                    );
                    parts.push(Part {
                        id,
                        now,
                        reply,
                        expected: held.last,
                        input: held.input,
                        events,
                        framed,
                        lifecycle,
                        bytes,
                    });
                }
                Err(error) => {
                    let _ = reply.send(Err(Outcome::Refused(error)));
                }
            }
        }
    }
    if parts.is_empty() {
        return;
    }
    match statement(shared, identity, &parts).await {
        Ok(stored) => answer(shared, parts, &stored),
        Err(error) => {
            let transient = error.transient();
            tracing::warn!(%error, appends = parts.len(), "an append statement failed");
            for part in parts {
                shared.owned.forget(part.id);
                let _ = part.reply.send(Err(Outcome::Unknown {
                    expected: part.expected,
                    transient,
                    payloads: payloads_of(part.events),
                }));
            }
        }
    }
}

/// What an append would store.
struct Checked {
    events: Vec<Event>,
    framed: rows::Framed,
    /// The lifecycle after the events.
    lifecycle: Lifecycle,
    /// The bytes they add.
    bytes: i64,
}

/// The events `payloads` would store after `held` (of execution `id`), or why the state
/// machine refuses them.
fn check(
    id: ExecutionId,
    held: &Held,
    payloads: Vec<EventPayload>,
    time: SystemTime,
) -> Result<Checked, StoreError> {
    if held
        .lifecycle
        .state()
        .is_some_and(ExecutionState::is_terminal)
    {
        return Err(StoreError::AlreadyTerminal(id));
    }
    let mut lifecycle = held.lifecycle;
    let mut events = Vec::with_capacity(payloads.len());
    let mut framed = rows::Framed::with_capacity(payloads.len());
    let mut bytes = 0i64;
    for (sequence, payload) in (held.last + 1..).zip(payloads) {
        let state = lifecycle.apply(&payload)?;
        bytes += (framed.push(state, &payload) + EVENT_OVERHEAD) as i64;
        events.push(Event {
            sequence,
            time,
            state,
            payload,
        });
    }
    Ok(Checked {
        events,
        framed,
        lifecycle,
        bytes,
    })
}

/// `events` of `id` are in the database: what this replica knows of it follows, and its
/// followers here are told at once. At its end it is no longer held or driven here, and its
/// retention begins (`now`; its `input` no longer counts).
fn kept(shared: &Shared, id: ExecutionId, events: &[Event], now: i64, input: i64) {
    let Some(last) = events.last() else {
        return;
    };
    shared.owned.stored(id, last.sequence, last.state);
    if last.state.is_terminal() {
        shared.owned.forget(id);
        shared.driven.remove(id);
        shared.cancels.ended(id);
        shared.capacity.ended(id, now, input);
    }
    shared.watched.appended(id, events);
}

/// Whether `events`, stored, keep usage facts: then this replica's next read of the usage
/// order waits for them (`usage.rs`).
fn facts_kept(shared: &Shared, events: &[Event]) -> bool {
    let greatest = (events.iter())
        .filter_map(|event| match &event.payload {
            EventPayload::Usage(fact) => Some(fact.position),
            _ => None,
        })
        .max();
    mark_kept(shared, greatest)
}

/// Marks the usage order kept up to `greatest`, the greatest position an append's facts
/// took (one atomic update for the append, not one a fact); whether it had any.
fn mark_kept(shared: &Shared, greatest: Option<u64>) -> bool {
    if let Some(position) = greatest {
        shared.kept.kept(position);
    }
    greatest.is_some()
}

/// Answers each part: stored (its followers on this replica are told at once), or stale.
fn answer(shared: &Shared, parts: Vec<Part>, stored: &Stored) {
    let mut usage = false;
    // The number of the next fact: the statement numbered every part's facts in this order,
    // stale parts' too (`statement.rs`).
    let mut next = 1;
    for mut part in parts {
        let id = part.id;
        if !stored.updated.contains(&uuid(id)) {
            next += statement::facts(&part.events) as u64;
            shared.owned.forget(id);
            let _ = part
                .reply
                .send(Err(Outcome::Stale(payloads_of(part.events))));
            continue;
        }
        let first = next;
        for event in &mut part.events {
            if let EventPayload::Usage(fact) = &mut event.payload {
                Arc::make_mut(fact).position = stored.base | next;
                next += 1;
            }
        }
        // Numbered in order: the last is the greatest.
        usage |= mark_kept(shared, (next > first).then(|| stored.base | (next - 1)));
        shared.capacity.added(part.bytes);
        kept(shared, id, &part.events, part.now, part.input);
        let _ = part.reply.send(Ok(part.events));
    }
    if usage {
        shared.usage.publish();
    }
}

/// The payloads of `events` the writer did not store, to be asked with again.
fn payloads_of(events: Vec<Event>) -> Vec<EventPayload> {
    events.into_iter().map(|event| event.payload).collect()
}
