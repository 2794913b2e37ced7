//! The store's global bounds: `max_executions`, `max_bytes` and retention hold across every
//! replica.
//!
//! Counts come from the database (a sum over the executions held, every `poll_interval`)
//! plus what this replica changed since, and the creates it has admitted and not yet
//! written. A create that the counts say fits is admitted (counted at once) and written with
//! the others waiting (`create.rs`); one that does not takes its turn on the replica, then
//! the store's capacity lock (an advisory lock), counts exactly, lets go of the terminal
//! executions that ended first until it fits, and creates, in one transaction (`room.rs`).
//! So a replica's creates keep within the bounds as it counts them; the tables exceed them
//! at most by what other replicas created within one `poll_interval` while their counts
//! said there was room. A store near its bounds has room made ahead of its creates, in the
//! background (`room.rs`).
//!
//! An execution leaves in one statement: its row is marked gone and its idempotency key
//! freed, which takes its usage facts out of the usage order with it. Its rows stay a while
//! ([`LINGER`]) for followers that had begun, then are deleted. Executions this replica ended
//! are let go by its `expire` as their retention passes (by the caller's clock); a sweep
//! every `poll_interval` lets go of any others whose retention has passed (ended by a replica
//! that is gone, say).
//!
//! The exact counts become the counts' base only while nothing of this replica lets
//! executions go (`making_room`, then `flushing`, held in that order): a let-go counted out
//! after the count that already missed it would be counted out twice.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

mod room;

#[cfg(test)]
pub(super) use room::count_plan;
pub(super) use room::{Admission, Reservation, admit, ahead, make_room, reserve};

use super::{PgError, Shared, uuid};
use crate::execution::ExecutionId;
use crate::store::{StoreError, StoreLimits, StoreStats};

/// How long an execution's rows stay after it left the store, for followers that had begun.
pub(super) const LINGER: Duration = Duration::from_secs(300);

/// The counts and what is due to leave.
#[derive(Debug, Default)]
pub(super) struct Capacity {
    counts: Mutex<Counts>,
    /// Executions this replica ended, in the order they ended (retention's clock).
    ended: Mutex<VecDeque<(i64, ExecutionId)>>,
    /// Executions due to leave, not yet let go in the database: they are let go together,
    /// by the next poll, or first by an operation that could see one of them.
    due: Mutex<HashSet<ExecutionId>>,
    any_due: AtomicBool,
    /// Let go by the sweep since `expire` last asked.
    swept: AtomicUsize,
    /// Held while this replica lets go of what is due, or sweeps.
    flushing: tokio::sync::Mutex<()>,
    /// One create at a time on this replica makes room: the others wait here, not each on a
    /// connection of its own for the database's capacity lock, and find the room it made.
    making_room: tokio::sync::Mutex<()>,
    /// Whether room is being made ahead of the creates (`ahead`).
    ahead: AtomicBool,
    /// How many times the counts were summed (`refresh`), and one more than that when room
    /// made ahead last found none to make or failed: it is not tried again before the next
    /// sum.
    sums: AtomicU64,
    ahead_gave_up: AtomicU64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// The database's counts when last summed.
    base: (i64, i64),
    /// This replica's changes when they were summed, and now.
    local_then: (i64, i64),
    local: (i64, i64),
    /// Creates admitted and not yet written (`room::Reservation`).
    reserved: (i64, i64),
    evicted: u64,
}

impl Counts {
    fn now(&self) -> (i64, i64) {
        (
            self.base.0 + self.local.0 - self.local_then.0 + self.reserved.0,
            self.base.1 + self.local.1 - self.local_then.1 + self.reserved.1,
        )
    }
}

impl Capacity {
    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn change(&self, executions: i64, bytes: i64) {
        let mut counts = self.counts();
        counts.local.0 += executions;
        counts.local.1 += bytes;
    }

    /// An append of this replica added `bytes`.
    pub(super) fn added(&self, bytes: i64) {
        self.change(0, bytes);
    }

    /// This replica ended `id` at `now`: its input no longer counts, and its retention runs.
    pub(super) fn ended(&self, id: ExecutionId, now: i64, input: i64) {
        self.change(0, -input);
        self.ended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back((now, id));
    }

    fn left(&self, executions: usize, bytes: i64) {
        let mut counts = self.counts();
        counts.local.0 -= executions as i64;
        counts.local.1 -= bytes;
        counts.evicted += executions as u64;
    }

    pub(super) fn stats(&self, limits: StoreLimits) -> StoreStats {
        let counts = *self.counts();
        let (executions, bytes) = counts.now();
        StoreStats {
            executions: usize::try_from(executions).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
            evicted: counts.evicted,
            limits,
        }
    }

    /// Sums the database's counts.
    pub(super) async fn refresh(&self, shared: &Shared) -> Result<(), PgError> {
        let _turn = self.making_room.lock().await;
        let _flushing = self.flushing.lock().await;
        let then = self.counts().local;
        let counts = shared
            .on_connection(async |client| {
                let tx = client.transaction().await?;
                let counts = count(&tx).await?;
                tx.commit().await?;
                Ok(counts)
            })
            .await?;
        self.rebase(counts, then);
        self.sums.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The database's exact counts, `base`, taken after this replica's own changes were
    /// `then`: the base from now on. Admitted creates not yet written count on top, and a
    /// create that commits between `then` and the count is counted twice until the next sum
    /// (too many). The one way to too few: an execution whose end commits between them has
    /// its input's bytes counted out twice until the next sum.
    fn rebase(&self, base: (i64, i64), then: (i64, i64)) {
        let mut counts = self.counts();
        counts.base = base;
        counts.local_then = then;
    }

    /// Moves the executions this replica ended whose retention has passed by `now` to those
    /// due to leave; returns how many.
    pub(super) fn due(&self, shared: &Shared, now: i64) -> usize {
        let retention = i64::try_from(shared.limits.retention.as_micros()).unwrap_or(i64::MAX);
        let mut due = Vec::new();
        {
            let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
            while let Some(&(at, id)) = ended.front() {
                if at.saturating_add(retention) > now {
                    break;
                }
                ended.pop_front();
                due.push(id);
            }
        }
        let count = due.len();
        if count > 0 {
            self.due
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(due);
            self.any_due.store(true, Ordering::Release);
        }
        count
    }

    /// Whether `id` is due to leave and not let go yet.
    pub(super) fn is_due(&self, id: ExecutionId) -> bool {
        self.any_due.load(Ordering::Acquire)
            && self
                .due
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&id)
    }

    /// Let go by the sweep since the last call.
    pub(super) fn swept(&self) -> usize {
        self.swept.swap(0, Ordering::AcqRel)
    }

    /// The background's share: counts, the sweep of expired executions, what is due, and
    /// the deletion of rows that have lingered.
    pub(super) async fn tend(&self, shared: &Shared) -> Result<(), PgError> {
        let now = shared.clock.now();
        flush(shared).await.ok();
        let retention = i64::try_from(shared.limits.retention.as_micros()).unwrap_or(i64::MAX);
        let linger = i64::try_from(LINGER.as_micros()).unwrap_or(i64::MAX);
        {
            let _flushing = self.flushing.lock().await;
            let gone = shared
                .on_connection(async |client| {
                    Ok(client
                        .query(SWEEP, &[&now, &now.saturating_sub(retention)])
                        .await?)
                })
                .await?;
            if !gone.is_empty() {
                self.swept.fetch_add(gone.len(), Ordering::AcqRel);
                left(shared, &gone)?;
            }
        }
        self.refresh(shared).await?;
        self.analyze(shared).await?;
        purge(shared, now.saturating_sub(linger)).await.map(drop)
    }

    /// Analyzes the executions table when its rows (those that left and linger included)
    /// have doubled since it last was, from [`ANALYZE_FROM`] rows on. The server keeps a
    /// statement's plan until the table's statistics change, and autovacuum analyzes a new
    /// table only a minute or more after it filled: an append planned while the table was
    /// small would scan it whole, once per statement, as it grows.
    async fn analyze(&self, shared: &Shared) -> Result<(), PgError> {
        shared
            .on_connection(async |client| {
                let row = client.query_one(ROWS, &[]).await?;
                let (analyzed, rows): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
                if rows >= ANALYZE_FROM && rows > analyzed.max(0).saturating_mul(2) {
                    client
                        .batch_execute("/* model-runtime: analyze */ ANALYZE executions")
                        .await?;
                }
                Ok(())
            })
            .await
    }
}

/// The table's size from which [`Capacity::analyze`] keeps its statistics.
const ANALYZE_FROM: i64 = 500;
/// The executions table's rows when it was last analyzed, and now.
const ROWS: &str = "/* model-runtime: table-rows */ SELECT c.reltuples::int8, s.n_live_tup FROM pg_class c \
     JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = 'executions'::regclass";

/// The executions still in the store, and the bytes they hold, in `tx`.
async fn count(tx: &deadpool_postgres::Transaction<'_>) -> Result<(i64, i64), PgError> {
    let rows = counted(tx, COUNT).await?;
    // An aggregate without groups answers one row, always.
    match rows.first() {
        Some(row) => Ok((row.try_get(0)?, row.try_get(1)?)),
        None => Ok((0, 0)),
    }
}

/// The rows of `statement` (the count, or its plan) in `tx`, read from the index of the
/// executions still in the store (`executions_live`), not the table. The planner prefers to
/// read the table whole while the rows that left and linger are not vacuumed, a read that
/// grows with the linger (65 ms a count at 100 s of a full store, against 26 ms).
async fn counted(
    tx: &deadpool_postgres::Transaction<'_>,
    statement: &str,
) -> Result<Vec<tokio_postgres::Row>, PgError> {
    tx.batch_execute("SET LOCAL enable_seqscan = off").await?;
    Ok(tx.query(statement, &[]).await?)
}

const COUNT: &str = "/* model-runtime: count */ SELECT count(*), COALESCE(sum(bytes + CASE WHEN ended_at IS NULL \
     THEN input_bytes ELSE 0 END), 0)::int8 FROM executions WHERE gone_at IS NULL";
// Each statement that lets executions go or deletes them finds its rows first, each by an
// index (a subquery with a limit or an offset, which the planner does not merge into a
// join), locking the executions' rows; then changes them where they lie: by `ctid`, which a
// row's lock keeps still, in one read (`ctid = ANY`). However many rows the planner expects
// (a new table has no statistics; rows that left linger), it has no join to make by reading
// a whole table.
//
// Rows another transaction is letting go (or locking to) are skipped, not waited for: two
// that let go of overlapping sets never wait on each other, in any order. A row another
// let-go marked gone since the statement began is skipped as it is locked (it is no longer
// `gone_at IS NULL`). A row changed otherwise since then would be skipped too, its new
// version not the statement's to change; none is: cancels and takeovers change running
// executions alone, and the writer refuses appends to ended ones.
const LET_GO: &str = "/* model-runtime: let-go */ UPDATE executions SET gone_at = $2, idempotency_key = NULL \
     WHERE ctid = ANY (ARRAY(SELECT l.ctid FROM unnest($1::uuid[]) AS u(id), LATERAL \
     (SELECT ctid FROM executions WHERE id = u.id AND gone_at IS NULL LIMIT 1 \
     FOR UPDATE SKIP LOCKED) l)) RETURNING id, bytes";
const SWEEP: &str = "/* model-runtime: retention */ UPDATE executions SET gone_at = $1, idempotency_key = NULL \
     WHERE ctid = ANY (ARRAY(SELECT ctid FROM executions WHERE gone_at IS NULL \
     AND ended_at IS NOT NULL AND ended_at <= $2 ORDER BY ended_at, id LIMIT 1000 \
     FOR UPDATE SKIP LOCKED)) RETURNING id, bytes";
/// Lets go of the terminal executions that ended first, at most `$1`: as many as `$2`
/// executions, or as it takes to reach `$3` bytes, whichever is more (a row goes while
/// either is short before it).
const LET_GO_OLDEST: &str = "/* model-runtime: let-go-oldest */
WITH oldest AS (
    SELECT ctid, bytes, ended_at, id FROM executions
    WHERE gone_at IS NULL AND ended_at IS NOT NULL ORDER BY ended_at, id LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE executions SET gone_at = $4, idempotency_key = NULL WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM (
        SELECT ctid, row_number() OVER w AS n, (sum(bytes) OVER w)::int8 - bytes AS before
        FROM oldest WINDOW w AS (ORDER BY ended_at, id)
    ) o
    WHERE n <= $2 OR before < $3
))
RETURNING id, bytes";
/// Deletes the rows of at most `$2` executions that left before `$1`, the earliest first, and
/// the events of those it deleted; answers how many. An execution's events are read by the
/// events' key and deleted where they lie: nothing changes an event, and two purges never
/// take one execution (its row is locked first, or skipped).
const PURGE: &str = "/* model-runtime: purge */ WITH old AS (SELECT ctid FROM executions \
     WHERE gone_at < $1 ORDER BY gone_at LIMIT $2 FOR UPDATE SKIP LOCKED), \
     gone AS (DELETE FROM executions WHERE ctid = ANY (ARRAY(SELECT ctid FROM old)) RETURNING id), \
     events AS (DELETE FROM events WHERE ctid = ANY (ARRAY(SELECT l.ctid FROM gone, LATERAL \
     (SELECT ctid FROM events WHERE execution_id = gone.id OFFSET 0) l))) \
     SELECT count(*) FROM gone";
/// The most executions one purge deletes; a poll purges again while one deletes as many.
const PURGED: i64 = 1000;
/// The most purges in one poll: a replica deletes up to this many times [`PURGED`]
/// executions' rows a poll.
const PURGES: usize = 100;

/// Deletes the rows of the executions that left before `before` (by the callers' clock), at
/// most [`PURGES`] times [`PURGED`] of them; returns how many.
pub(super) async fn purge(shared: &Shared, before: i64) -> Result<u64, PgError> {
    let mut purged = 0;
    for _ in 0..PURGES {
        let deleted: i64 = shared
            .on_connection(async |client| {
                Ok(client
                    .query_one(PURGE, &[&before, &PURGED])
                    .await?
                    .try_get(0)?)
            })
            .await?;
        purged += deleted.cast_unsigned();
        if deleted < PURGED {
            break;
        }
    }
    Ok(purged)
}

/// The plans of the statements that let executions go or delete their rows, each with its
/// name and with the planner's defaults (`ids` to let go; the room, at most
/// [`room::MOST`] executions): for the test that none reads a whole table. (Room runs its
/// statement with sequential scans off, which could only help.)
#[cfg(test)]
pub(super) async fn let_go_plans(
    shared: &Shared,
    ids: &[uuid::Uuid],
) -> Vec<(&'static str, String)> {
    use tokio_postgres::types::ToSql;

    use room::MOST;
    let client = shared.client().await.expect("a connection");
    let now = shared.clock.now();
    let statements: [(&str, &str, &[&(dyn ToSql + Sync)]); 4] = [
        ("let-go", LET_GO, &[&ids, &now]),
        ("retention", SWEEP, &[&now, &now]),
        ("purge", PURGE, &[&now, &PURGED]),
        ("let-go-oldest", LET_GO_OLDEST, &[&MOST, &MOST, &0i64, &now]),
    ];
    let mut plans = Vec::new();
    for (name, statement, params) in statements {
        let rows = client
            .query(&format!("EXPLAIN {statement}"), params)
            .await
            .expect("a plan");
        let plan: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
        plans.push((name, plan.join("\n")));
    }
    plans
}

/// Executions that left (rows of `id, bytes`): counted out, their followers told.
fn left(shared: &Shared, rows: &[tokio_postgres::Row]) -> Result<(), PgError> {
    let mut bytes = 0;
    for row in rows {
        let id: uuid::Uuid = row.try_get(0)?;
        bytes += row.try_get::<_, i64>(1)?;
        let id = ExecutionId::from_bytes(id.into_bytes());
        shared.owned.forget(id);
        shared.watched.close(id);
    }
    shared.capacity.left(rows.len(), bytes);
    Ok(())
}

/// Lets go of the executions due to leave before an operation on `id` (when it is one of
/// them): after `expire` has counted it, nobody finds it.
pub(super) async fn flush_for(shared: &Shared, id: ExecutionId) -> Result<(), StoreError> {
    if shared.capacity.is_due(id) {
        flush(shared).await?;
    }
    Ok(())
}

/// Lets go of the executions due to leave.
pub(super) async fn flush(shared: &Shared) -> Result<(), StoreError> {
    let capacity = &shared.capacity;
    if !capacity.any_due.load(Ordering::Acquire) {
        return Ok(());
    }
    let _turn = capacity.flushing.lock().await;
    let due: Vec<ExecutionId> = capacity
        .due
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .collect();
    capacity.any_due.store(false, Ordering::Release);
    if due.is_empty() {
        return Ok(());
    }
    let ids: Vec<uuid::Uuid> = due.iter().map(|id| uuid(*id)).collect();
    let result = shared
        .on_connection(async |client| {
            let rows = client.query(LET_GO, &[&ids, &shared.clock.now()]).await?;
            left(shared, &rows)
        })
        .await;
    if let Err(error) = result {
        // Due still: the next operation tries again.
        capacity
            .due
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(due);
        capacity.any_due.store(true, Ordering::Release);
        return Err(error.into_store());
    }
    Ok(())
}
