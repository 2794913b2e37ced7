//! The append statement: every waiting append's row update and events in one statement, one
//! commit; per execution it updates the row only if its last sequence is the one expected,
//! this replica still owns it and its lease is current (the fence), and inserts the events
//! only for the rows it updated.
//!
//! The statement's usage facts are numbered in order from 1 (`ord`), an append's facts one
//! after another; a fact's position is the statement's transaction id shifted left 20 bits,
//! plus its number (`usage.rs`). A row keeps its last fact's position; the facts before it in
//! the row have the positions just before.

use std::collections::HashSet;

use super::Part;
use crate::execution::{Event, EventPayload, ExecutionState};
use crate::store::postgres::batch::MAX_BATCH;
use crate::store::postgres::rows;
use crate::store::postgres::{PgError, Shared, uuid};

/// Usage facts one append may keep: a statement numbers its facts in 20 bits, and holds
/// [`MAX_BATCH`] appends at most.
pub(in crate::store::postgres) const MAX_FACTS: usize = ((1 << 20) - 1) / MAX_BATCH;

/// What the statement stored: the executions it updated, and its transaction's id shifted
/// left 20 bits (its fact numbered `n` is at `base | n`).
pub(super) struct Stored {
    pub(super) updated: HashSet<uuid::Uuid>,
    pub(super) base: u64,
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
), note AS (
    -- One notification per hundred executions (a payload holds 8000 bytes).
    SELECT count(pg_notify($17, lines)) FROM (
        SELECT string_agg(id::text || ' ' || last_sequence || ' ' || state
                          || CASE WHEN usage THEN ' u' ELSE '' END, ',') AS lines
        FROM (SELECT *, row_number() OVER () / 100 AS chunk FROM upd) numbered
        GROUP BY chunk
    ) chunks
)
SELECT id, pg_current_xact_id()::text::int8 << 20 FROM upd, note
";

/// Columns of the write, built from the parts (whose events' bytes they borrow).
#[derive(Default)]
struct Columns<'a> {
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
    /// The event rows: one per run of an append's events ([`rows::MAX_RUN`] at most);
    /// `first` is the run's first sequence (none for a row of one event), `ord` its last
    /// usage fact's number (none without one).
    event_ids: Vec<uuid::Uuid>,
    sequence: Vec<i64>,
    time: Vec<i64>,
    event_state: Vec<i16>,
    payload: Vec<&'a [u8]>,
    ord: Vec<Option<i64>>,
    first: Vec<Option<i64>>,
}

impl<'a> Columns<'a> {
    /// The row of a run of `events` with its payload column and whether it is a run
    /// ([`rows::Framed::row`]); `ord` is the statement's last usage fact's number before them,
    /// and after.
    fn row(
        &mut self,
        id: uuid::Uuid,
        events: &[Event],
        (payload, run): (&'a [u8], bool),
        ord: &mut i64,
    ) {
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return;
        };
        self.event_ids.push(id);
        self.sequence.push(last.sequence.cast_signed());
        self.time.push(rows::micros(last.time));
        self.event_state.push(rows::state_code(last.state));
        let count = facts(events) as i64;
        self.ord.push((count > 0).then(|| {
            *ord += count;
            *ord
        }));
        self.payload.push(payload);
        self.first.push(run.then(|| first.sequence.cast_signed()));
    }
}

/// How many of `events` are usage facts.
pub(super) fn facts(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::Usage(_)))
        .count()
}

fn columns(parts: &[Part]) -> Columns<'_> {
    let mut c = Columns::default();
    let mut ord = 0i64;
    for part in parts {
        let id = uuid(part.id);
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
        c.ended_at.push(state.is_terminal().then_some(part.now));
        let before = ord;
        for (n, events) in part.events.chunks(rows::MAX_RUN).enumerate() {
            let at = n * rows::MAX_RUN;
            c.row(id, events, part.framed.row(at..at + events.len()), &mut ord);
        }
        // Its rows numbered facts: it keeps some.
        c.usage.push(ord > before);
    }
    c
}

pub(super) async fn statement(
    shared: &Shared,
    (me, epoch): (uuid::Uuid, i64),
    parts: &[Part],
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
        updated: HashSet::with_capacity(rows.len()),
        base: 0,
    };
    for row in rows {
        stored.updated.insert(row.try_get(0)?);
        stored.base = row.try_get::<_, i64>(1)?.cast_unsigned();
    }
    Ok(stored)
}
