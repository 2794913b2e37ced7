//! Appends. The owner of an execution is the only replica that appends to it, so it keeps the
//! execution's lifecycle and last sequence at hand ([`Owned`]) and checks each event against
//! the state machine before the database sees it. A task (`batch.rs`) takes every append
//! waiting at the moment and writes them as one statement, one commit for all: per
//! execution the statement updates the row only if its last sequence is the one expected,
//! this replica still owns it and its lease is current (the fence), and inserts the events
//! only for the rows it updated, so each execution's events go in whole or not at all. Rows
//! it did not update are looked at again by their own append: not found, ended, owned by
//! another replica, or (after a lost answer) already written.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;

use super::batch::Batched;
use super::owned::Held;
use super::rows::{self, EVENT_OVERHEAD};
use super::{PgError, Shared, uuid};
use crate::execution::{Event, EventPayload, ExecutionId, ExecutionState, IdMap, Lifecycle};
use crate::store::{Inconsistency, StoreError, Unavailable};

/// One append on its way to the writer.
pub(super) struct Request {
    id: ExecutionId,
    /// The registration it was asked under: it is written under that one or not at all.
    registration: uuid::Uuid,
    payloads: Vec<EventPayload>,
    /// When (retention's clock) it was asked for.
    now: i64,
    reply: oneshot::Sender<Result<Vec<Event>, Outcome>>,
}

/// Why the writer did not store an append.
enum Outcome {
    /// The state machine refuses it (nothing was sent).
    Refused(StoreError),
    /// This replica does not hold the execution (any more): look at its row.
    Unheld,
    /// The database did not update the row: not the sequence, owner or lease expected.
    Stale,
    /// The statement failed; `expected` is the last sequence before it, and it may have
    /// committed (the answer may be what was lost); whether asking again may help.
    Unknown { expected: u64, transient: bool },
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
    payloads: Vec<EventPayload>,
    now: i64,
) -> Result<Vec<Event>, StoreError> {
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
            payloads: payloads.clone(),
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
        match outcome {
            Outcome::Refused(error) => return Err(error),
            Outcome::Unheld | Outcome::Stale => {}
            Outcome::Unknown {
                expected,
                transient: true,
            } => unsure = Some(expected),
            Outcome::Unknown {
                transient: false, ..
            } => return Err(StoreError::Inconsistent(Inconsistency::Database)),
        }
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
    request: Request,
    expected: u64,
    input: i64,
    events: Vec<Event>,
    /// Each event's payload as a row keeps it (taken when the statement is built).
    encoded: Vec<Vec<u8>>,
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
            if request.registration != identity.0 {
                let _ = request
                    .reply
                    .send(Err(Outcome::Refused(not_owner(request.id))));
                continue;
            }
            let Some(held) = owned.get(&request.id).cloned() else {
                let _ = request.reply.send(Err(Outcome::Unheld));
                continue;
            };
            match check(&held, &request, time) {
                Ok(Checked {
                    events,
                    encoded,
                    lifecycle,
                    bytes,
                }) => {
                    // Tentatively: the next append of this execution waits for this one's
                    // answer (one per execution per statement), and a failure forgets it.
                    owned.insert(
                        request.id,
                        Held {
                            lifecycle,
                            last: held.last + events.len() as u64,
                            ..held.clone()
                        },
                    );
                    parts.push(Part {
                        expected: held.last,
                        input: held.input,
                        events,
                        encoded,
                        lifecycle,
                        bytes,
                        request,
                    });
                }
                Err(error) => {
                    let _ = request.reply.send(Err(Outcome::Refused(error)));
                }
            }
        }
    }
    if parts.is_empty() {
        return;
    }
    match statement(shared, identity, &mut parts).await {
        Ok(stored) => answer(shared, parts, &stored),
        Err(error) => {
            let transient = error.transient();
            tracing::warn!(%error, appends = parts.len(), "an append statement failed");
            for part in parts {
                shared.owned.forget(part.request.id);
                let _ = part.request.reply.send(Err(Outcome::Unknown {
                    expected: part.expected,
                    transient,
                }));
            }
        }
    }
}

/// What an append would store.
struct Checked {
    events: Vec<Event>,
    encoded: Vec<Vec<u8>>,
    /// The lifecycle after the events.
    lifecycle: Lifecycle,
    /// The bytes they add.
    bytes: i64,
}

/// The events `request` would store after `held`, or why the state machine refuses them.
fn check(held: &Held, request: &Request, time: SystemTime) -> Result<Checked, StoreError> {
    if held
        .lifecycle
        .state()
        .is_some_and(ExecutionState::is_terminal)
    {
        return Err(StoreError::AlreadyTerminal(request.id));
    }
    let mut lifecycle = held.lifecycle;
    let mut events = Vec::with_capacity(request.payloads.len());
    let mut encoded = Vec::with_capacity(request.payloads.len());
    let mut bytes = 0i64;
    for (i, payload) in request.payloads.iter().enumerate() {
        let state = lifecycle.apply(payload)?;
        let payload_bytes = rows::payload_bytes(payload);
        bytes += (payload_bytes.len() + EVENT_OVERHEAD) as i64;
        encoded.push(payload_bytes);
        events.push(Event {
            sequence: held.last + 1 + i as u64,
            time,
            state,
            payload: payload.clone(),
        });
    }
    Ok(Checked {
        events,
        encoded,
        lifecycle,
        bytes,
    })
}

/// What the statement stored: the executions it updated, and the usage positions it gave.
struct Stored {
    updated: HashSet<uuid::Uuid>,
    positions: IdMap<Vec<(u64, u64)>>,
}

const WRITE: &str = "/* model-runtime: append */
WITH lease AS (
    SELECT 1 FROM replicas WHERE id = $1 AND epoch = $2 AND lease_until > now()
), upd AS (
    UPDATE executions x SET last_sequence = u.last, state = u.state,
        committed = u.committed, stopping = u.stopping, bytes = x.bytes + u.bytes,
        ended_at = COALESCE(u.ended_at, x.ended_at)
    FROM unnest($3::uuid[], $4::int8[], $5::int8[], $6::int2[], $7::bool[], $8::bool[],
                $9::int8[], $10::int8[], $18::bool[],
                array_fill($1::uuid, ARRAY[cardinality($3::uuid[])]),
                array_fill($2::int8, ARRAY[cardinality($3::uuid[])]))
        AS u(id, expected, last, state, committed, stopping, bytes, ended_at, usage, owner,
             epoch)
    -- Each condition on the row compares it with `u`: a condition on the row alone (owner
    -- = $1) is estimated from statistics a new table does not have, as matching almost no
    -- row, and the planner would scan the whole table once per execution updated. A row
    -- that left the store (gone_at) needs no condition: only ended executions leave, and
    -- this replica appends only to those it holds unended (one a survivor ended is the
    -- survivor's).
    WHERE x.id = u.id AND x.last_sequence = u.expected AND x.owner = u.owner
        AND x.owner_epoch = u.epoch AND EXISTS (SELECT 1 FROM lease)
    RETURNING x.id, x.last_sequence, x.state, u.usage
), ins AS (
    INSERT INTO events (execution_id, sequence, time, state, payload, usage_position,
        first_sequence)
    SELECT e.id, e.sequence, e.time, e.state, e.payload,
        CASE WHEN e.ord IS NULL THEN NULL
             ELSE (pg_current_xact_id()::text::int8 << 20) | e.ord END, e.first
    FROM unnest($11::uuid[], $12::int8[], $13::int8[], $14::int2[], $15::bytea[], $16::int8[],
                $19::int8[])
        AS e(id, sequence, time, state, payload, ord, first)
    JOIN upd ON upd.id = e.id
    RETURNING execution_id, sequence, usage_position
), note AS (
    -- One notification per hundred executions (a payload holds 8000 bytes).
    SELECT count(pg_notify($17, lines)) FROM (
        SELECT string_agg(id::text || ' ' || last_sequence || ' ' || state
                          || CASE WHEN usage THEN ' u' ELSE '' END, ',') AS lines
        FROM (SELECT *, row_number() OVER () / 100 AS chunk FROM upd) numbered
        GROUP BY chunk
    ) chunks
)
SELECT id, 0::int8, NULL::int8 FROM upd, note
UNION ALL
SELECT execution_id, sequence, usage_position FROM ins WHERE usage_position IS NOT NULL
";

/// Columns of the write, built from the parts.
#[derive(Default)]
struct Columns {
    ids: Vec<uuid::Uuid>,
    expected: Vec<i64>,
    last: Vec<i64>,
    state: Vec<i16>,
    committed: Vec<bool>,
    stopping: Vec<bool>,
    bytes: Vec<i64>,
    ended_at: Vec<Option<i64>>,
    /// Whether the execution's part keeps usage facts (its notification says so).
    usage: Vec<bool>,
    /// The event rows: one per usage fact, one per run of other events ([`rows::MAX_RUN`]
    /// at most); `first` is the run's first sequence (none for a row of one event).
    event_ids: Vec<uuid::Uuid>,
    sequence: Vec<i64>,
    time: Vec<i64>,
    event_state: Vec<i16>,
    payload: Vec<Vec<u8>>,
    ord: Vec<Option<i64>>,
    first: Vec<Option<i64>>,
}

impl Columns {
    /// The row of `events` (one usage fact, or a run of others) with their payloads.
    fn row(&mut self, id: uuid::Uuid, events: &[Event], payloads: &mut [Vec<u8>], ord: &mut i64) {
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return;
        };
        self.event_ids.push(id);
        self.sequence.push(last.sequence.cast_signed());
        self.time.push(rows::micros(last.time));
        self.event_state.push(rows::state_code(last.state));
        if let [event] = events {
            self.payload.push(std::mem::take(&mut payloads[0]));
            self.first.push(None);
            self.ord
                .push(matches!(event.payload, EventPayload::Usage(_)).then(|| {
                    *ord += 1;
                    *ord
                }));
        } else {
            self.payload.push(rows::run_bytes(
                events
                    .iter()
                    .zip(payloads)
                    .map(|(e, p)| (e.state, p.as_slice())),
            ));
            self.first.push(Some(first.sequence.cast_signed()));
            self.ord.push(None);
        }
    }
}

fn columns(parts: &mut [Part]) -> Columns {
    let mut c = Columns::default();
    let mut ord = 0i64;
    for part in parts {
        let id = uuid(part.request.id);
        let last = part.events.last().map_or(part.expected, |e| e.sequence);
        let state = part.lifecycle.state().unwrap_or(ExecutionState::Accepted);
        let (committed, stopping) = part.lifecycle.parts();
        c.ids.push(id);
        c.expected.push(part.expected.cast_signed());
        c.last.push(last.cast_signed());
        c.state.push(rows::state_code(state));
        c.committed.push(committed);
        c.stopping.push(stopping);
        c.bytes.push(part.bytes);
        c.ended_at
            .push(state.is_terminal().then_some(part.request.now));
        c.usage.push(
            part.events
                .iter()
                .any(|e| matches!(e.payload, EventPayload::Usage(_))),
        );
        // Runs of events up to each usage fact, which has a row of its own.
        let mut start = 0;
        for (i, event) in part.events.iter().enumerate() {
            let usage = matches!(event.payload, EventPayload::Usage(_));
            if usage || i - start == rows::MAX_RUN {
                c.row(
                    id,
                    &part.events[start..i],
                    &mut part.encoded[start..i],
                    &mut ord,
                );
                start = i;
            }
            if usage {
                c.row(id, &part.events[i..=i], &mut part.encoded[i..=i], &mut ord);
                start = i + 1;
            }
        }
        let end = part.events.len();
        c.row(
            id,
            &part.events[start..end],
            &mut part.encoded[start..end],
            &mut ord,
        );
    }
    c
}

async fn statement(
    shared: &Shared,
    (me, epoch): (uuid::Uuid, i64),
    parts: &mut [Part],
) -> Result<Stored, PgError> {
    let c = columns(parts);
    let rows = shared
        .on_connection(async |client| {
            let statement = client.prepare_cached(WRITE).await?;
            let rows = client
                .query(
                    &statement,
                    &[
                        &me,
                        &epoch,
                        &c.ids,
                        &c.expected,
                        &c.last,
                        &c.state,
                        &c.committed,
                        &c.stopping,
                        &c.bytes,
                        &c.ended_at,
                        &c.event_ids,
                        &c.sequence,
                        &c.time,
                        &c.event_state,
                        &c.payload,
                        &c.ord,
                        &shared.channel,
                        &c.usage,
                        &c.first,
                    ],
                )
                .await?;
            Ok(rows)
        })
        .await?;
    let mut stored = Stored {
        updated: HashSet::new(),
        positions: IdMap::default(),
    };
    for row in rows {
        let id: uuid::Uuid = row.try_get(0)?;
        let sequence: i64 = row.try_get(1)?;
        match row.try_get::<_, Option<i64>>(2)? {
            None => {
                stored.updated.insert(id);
            }
            Some(position) => stored
                .positions
                .entry(ExecutionId::from_bytes(id.into_bytes()))
                .or_default()
                .push((sequence.cast_unsigned(), position.cast_unsigned())),
        }
    }
    Ok(stored)
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

/// Answers each part: stored (its followers on this replica are told at once), or stale.
fn answer(shared: &Shared, parts: Vec<Part>, stored: &Stored) {
    let mut usage = false;
    for mut part in parts {
        let id = part.request.id;
        if !stored.updated.contains(&uuid(id)) {
            shared.owned.forget(id);
            let _ = part.request.reply.send(Err(Outcome::Stale));
            continue;
        }
        if let Some(positions) = stored.positions.get(&id) {
            for event in &mut part.events {
                if let EventPayload::Usage(fact) = &mut event.payload
                    && let Some((_, position)) =
                        positions.iter().find(|(s, _)| *s == event.sequence)
                {
                    Arc::make_mut(fact).position = *position;
                    shared.kept.kept(*position);
                    usage = true;
                }
            }
        }
        shared.capacity.added(part.bytes);
        kept(shared, id, &part.events, part.request.now, part.input);
        let _ = part.request.reply.send(Ok(part.events));
    }
    if usage {
        shared.usage.publish();
    }
}
