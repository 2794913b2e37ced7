//! Appends. The owner of an execution is the only replica that appends to it, so it keeps the
//! execution's lifecycle and last sequence at hand ([`Owned`]) and checks each event against
//! the state machine before the database sees it. A task (`batch.rs`) takes every append
//! waiting at the moment and writes them as one statement, one commit for all: per
//! execution the statement updates the row only if its last sequence is the one expected,
//! this replica still owns it and its lease is current (the fence), and inserts the events
//! only for the rows it updated, so each execution's events go in whole or not at all. Rows
//! it did not update are looked at again, on the store's runtime ([`again`]): not found,
//! ended, owned by another replica, or (after a lost answer) already written.

use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::oneshot;

use super::batch::Batched;
use super::owned::Held;
use super::rows::{self, EVENT_OVERHEAD};
use super::{PgError, Shared, backoff, uuid};
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
    /// Moved into the events the writer stores, and back into the request when it is asked
    /// again: an append's payloads are never copied.
    payloads: Vec<EventPayload>,
    /// When (retention's clock) it was asked for.
    now: i64,
    /// How many times it was sent to the writer or looked at again, this time included: the
    /// backoff before the next.
    tries: u32,
    reply: Reply,
}

/// The last event stored, or why none was: the append's one answer, after however many tries.
type Reply = oneshot::Sender<Result<Event, StoreError>>;

/// Appends `payloads` to `id` under `registration` (this replica's when the append was asked
/// for). The request leaves at once, whether or not the answer is awaited: an execution this
/// replica holds goes straight to the writer, from the caller's thread; any other, and an
/// append the writer could not store (not held, stale, its statement failed), is looked at
/// again on the store's runtime ([`again`]).
pub(super) fn append(
    shared: &Arc<Shared>,
    id: ExecutionId,
    registration: uuid::Uuid,
    payloads: Vec<EventPayload>,
    now: i64,
) -> impl Future<Output = Result<Event, StoreError>> + Send + 'static {
    let (reply, answer) = oneshot::channel();
    let facts = payloads
        .iter()
        .filter(|p| matches!(p, EventPayload::Usage(_)))
        .count();
    if facts > MAX_FACTS {
        // Not a store that is down: the same append is refused again.
        let _ = reply.send(Err(StoreError::Backend(format!(
            "an append of {facts} usage facts is more than the PostgreSQL store keeps at \
             once ({MAX_FACTS})"
        ))));
    } else {
        let held = shared.owned.held(id);
        let request = Request {
            id,
            registration,
            payloads,
            now,
            // Sent to the writer at once, it is tried once.
            tries: u32::from(held),
            reply,
        };
        if held {
            send(shared, request);
        } else {
            ask_again(shared, request, None);
        }
    }
    async move {
        answer
            .await
            .unwrap_or(Err(StoreError::Unavailable(Unavailable::Closed)))
    }
}

/// Hands `request` to the writer.
fn send(shared: &Shared, request: Request) {
    if let Err(refused) = shared.writer.send(request) {
        let _ = (refused.0.reply).send(Err(StoreError::Unavailable(Unavailable::Closed)));
    }
}

/// Looks at `request` again on the store's runtime ([`again`]); `unsure`: the last sequence
/// before a statement that may have committed it (its answer was lost).
fn ask_again(shared: &Arc<Shared>, request: Request, unsure: Option<u64>) {
    shared.handle.spawn(again(shared.clone(), request, unsure));
}

/// Asks again for an append the writer could not store, or for one of an execution this
/// replica does not hold (yet): while the database does not answer, as long as this
/// replica's lease is current (past it, a survivor ends the execution). A statement whose
/// answer was lost (`unsure`) is never sent again before the row says it did not commit.
/// Once the replica has registered again, the append is refused: what was asked under a
/// lost lease is never written under the next one.
async fn again(shared: Arc<Shared>, mut request: Request, mut unsure: Option<u64>) {
    let id = request.id;
    let answer = loop {
        if request.tries > 0 {
            if !shared.replica.current() {
                break Err(unreachable_db());
            }
            tokio::time::sleep(backoff(request.tries)).await;
        }
        if shared.replica.id().0 != request.registration {
            break Err(not_owner(id));
        }
        request.tries += 1;
        if let Some(expected) = unsure {
            let count = request.payloads.len() as u64;
            match written(&shared, id, expected, count).await {
                Ok(Some((events, input))) => {
                    let usage = facts_kept(&shared, &events);
                    let last = kept(&shared, id, events, request.now, input);
                    if usage {
                        shared.usage.publish();
                    }
                    break last;
                }
                Ok(None) => unsure = None,
                Err(e) if e.transient() => continue,
                Err(e) => break Err(e.into_store()),
            }
        }
        if !shared.owned.held(id) {
            match hold(&shared, id).await {
                Ok(()) => {}
                Err(e) if e.transient() => continue,
                Err(e) => break Err(e.into_store_or_refusal()),
            }
        }
        return send(&shared, request);
    };
    let _ = request.reply.send(answer);
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

    fn write(shared: &Arc<Shared>, batch: Vec<Self>) -> impl Future<Output = ()> + Send {
        write(shared, batch)
    }
}

/// One execution's part of a statement.
struct Part {
    id: ExecutionId,
    registration: uuid::Uuid,
    /// When (retention's clock) its append was asked for.
    now: i64,
    tries: u32,
    reply: Reply,
    expected: u64,
    input: i64,
    events: Vec<Event>,
    /// The events as their rows keep them.
    framed: rows::Framed,
    lifecycle: Lifecycle,
    bytes: i64,
}

impl Part {
    /// The writer did not store it: it is asked again ([`again`]), with its payloads and
    /// (after a statement whose answer was lost) the last sequence before that statement.
    fn again(self, shared: &Arc<Shared>, unsure: Option<u64>) {
        let request = Request {
            id: self.id,
            registration: self.registration,
            payloads: payloads_of(self.events),
            now: self.now,
            tries: self.tries,
            reply: self.reply,
        };
        ask_again(shared, request, unsure);
    }
}

/// Checks each append against its execution's lifecycle, writes those that pass, and answers
/// each, or asks again for those it could not store.
async fn write(shared: &Arc<Shared>, batch: Vec<Request>) {
    // The one registration the statement is fenced by.
    let identity = shared.replica.identity();
    let (parts, unheld) = checked(shared, identity.0, batch);
    for request in unheld {
        ask_again(shared, request, None);
    }
    if parts.is_empty() {
        return;
    }
    match statement(shared, identity, &parts).await {
        Ok(stored) => answer(shared, parts, &stored),
        Err(error) => {
            tracing::warn!(%error, appends = parts.len(), "an append statement failed");
            let transient = error.transient();
            for part in parts {
                shared.owned.forget(part.id);
                if transient {
                    let expected = part.expected;
                    part.again(shared, Some(expected));
                } else {
                    let _ =
                        (part.reply).send(Err(StoreError::Inconsistent(Inconsistency::Database)));
                }
            }
        }
    }
}

/// The parts of `batch` the state machine lets through (each held tentatively, then framed
/// once the lock is let go: callers of `held` wait for the lock), and the appends of
/// executions this replica does not hold, to be looked at again; the rest are answered here:
/// asked under another registration than `current`, or refused.
fn checked(shared: &Shared, current: uuid::Uuid, batch: Vec<Request>) -> (Vec<Part>, Vec<Request>) {
    let time = rows::now();
    let mut parts = Vec::with_capacity(batch.len());
    let mut unheld = Vec::new();
    let mut owned = shared.owned.lock();
    for request in batch {
        if request.registration != current {
            let _ = request.reply.send(Err(not_owner(request.id)));
            continue;
        }
        let Some(held) = owned.get_mut(&request.id) else {
            unheld.push(request);
            continue;
        };
        let Request {
            id,
            registration,
            payloads,
            now,
            tries,
            reply,
        } = request;
        match check(id, held, payloads, time) {
            Ok((events, lifecycle)) => {
                let expected = held.last;
                // Tentatively: the next append of this execution waits for this one's
                // answer (one per execution per statement), and a failure forgets it.
                held.lifecycle = lifecycle;
                held.last += events.len() as u64;
                parts.push(Part {
                    id,
                    registration,
                    now,
                    tries,
                    reply,
                    expected,
                    input: held.input,
                    events,
                    framed: rows::Framed::with_capacity(0),
                    lifecycle,
                    bytes: 0,
                });
            }
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    }
    drop(owned);
    for part in &mut parts {
        let mut framed = rows::Framed::with_capacity(part.events.len());
        for event in &part.events {
            part.bytes += (framed.push(event.state, &event.payload) + EVENT_OVERHEAD) as i64;
        }
        part.framed = framed;
    }
    (parts, unheld)
}

/// The events `payloads` would store after `held` (of execution `id`) and the lifecycle
/// after them, or why the state machine refuses them.
fn check(
    id: ExecutionId,
    held: &Held,
    payloads: Vec<EventPayload>,
    time: SystemTime,
) -> Result<(Vec<Event>, Lifecycle), StoreError> {
    if held
        .lifecycle
        .state()
        .is_some_and(ExecutionState::is_terminal)
    {
        return Err(StoreError::AlreadyTerminal(id));
    }
    let mut lifecycle = held.lifecycle;
    let mut events = Vec::with_capacity(payloads.len());
    for (sequence, payload) in (held.last + 1..).zip(payloads) {
        let state = lifecycle.apply(&payload)?;
        events.push(Event {
            sequence,
            time,
            state,
            payload,
        });
    }
    Ok((events, lifecycle))
}

/// `events` of `id` are in the database: what this replica knows of it follows, and its
/// followers here are told at once (the events go to them). At its end it is no longer held
/// or driven here, and its retention begins (`now`; its `input` no longer counts). The
/// append's answer: its last event (`NotFound` for no events, which no append stores).
fn kept(
    shared: &Shared,
    id: ExecutionId,
    events: Vec<Event>,
    now: i64,
    input: i64,
) -> Result<Event, StoreError> {
    let last = events.last().cloned().ok_or(StoreError::NotFound(id))?;
    shared.owned.stored(id, last.sequence, last.state);
    if last.state.is_terminal() {
        shared.owned.forget(id);
        shared.driven.remove(id);
        shared.cancels.ended(id);
        shared.capacity.ended(id, now, input);
    }
    shared.watched.appended(id, events);
    Ok(last)
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

/// Answers each part stored (its followers on this replica are told at once), and asks again
/// for each stale one. Usage readers are told before any caller is answered: a caller that
/// kept a fact finds its readers woken.
fn answer(shared: &Arc<Shared>, parts: Vec<Part>, stored: &Stored) {
    let mut usage = false;
    let mut answers = Vec::with_capacity(parts.len());
    // The number of the next fact: the statement numbered every part's facts in this order,
    // stale parts' too (`statement.rs`).
    let mut next = 1;
    for mut part in parts {
        let id = part.id;
        if !stored.updated.contains(&uuid(id)) {
            next += statement::facts(&part.events) as u64;
            shared.owned.forget(id);
            part.again(shared, None);
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
        answers.push((
            part.reply,
            kept(shared, id, part.events, part.now, part.input),
        ));
    }
    if usage {
        shared.usage.publish();
    }
    for (reply, answer) in answers {
        let _ = reply.send(answer);
    }
}

/// The payloads of `events` the writer did not store, to be asked with again.
fn payloads_of(events: Vec<Event>) -> Vec<EventPayload> {
    events.into_iter().map(|event| event.payload).collect()
}
