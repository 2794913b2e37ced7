//! The store's global bounds: `max_executions`, `max_bytes` and retention hold across every
//! replica.
//!
//! Counts come from the database (a sum over the executions held, every `poll_interval`)
//! plus what this replica changed since. A create that the counts say fits is written with
//! the others waiting (`create.rs`); one that may not fit takes the store's capacity lock
//! (an advisory lock), counts exactly, lets go of the terminal executions that ended first
//! until it fits, and creates, in one transaction. So the tables stay within their bounds,
//! exceeded at most by what other replicas created within one `poll_interval` while their
//! counts said there was room. On a replica, creates that do not fit take turns before the
//! lock, and find the room the one before them made.
//!
//! A store whose counts come within a hundredth of a bound has room made ahead of its
//! creates (`ahead`): in the background, the same count and let-go under the same lock, a
//! twentieth of the bounds at a time. The exact count reads the whole table, so it is made
//! seldom; and a full store's creates seldom wait for it.
//!
//! An execution leaves in one statement: its row is marked gone and its idempotency key
//! freed, which takes its usage facts out of the usage order with it. Its rows stay a while
//! ([`LINGER`]) for followers that had begun, then are deleted. Executions this replica ended
//! are let go by its `expire` as their retention passes (by the caller's clock); a sweep
//! every `poll_interval` lets go of any others whose retention has passed (ended by a replica
//! that is gone, say).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::insert::{NewRow, Unanswered, insert};
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
    evicted: u64,
}

impl Counts {
    fn now(&self) -> (i64, i64) {
        (
            self.base.0 + self.local.0 - self.local_then.0,
            self.base.1 + self.local.1 - self.local_then.1,
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
        let then = self.counts().local;
        let row = shared
            .on_connection(async |client| {
                let tx = client.transaction().await?;
                let row = count(&tx).await?;
                tx.commit().await?;
                Ok(row)
            })
            .await?;
        let base = (row.try_get(0)?, row.try_get(1)?);
        let mut counts = self.counts();
        counts.base = base;
        counts.local_then = then;
        self.sums.fetch_add(1, Ordering::AcqRel);
        Ok(())
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
        let gone = shared
            .on_connection(async |client| {
                let gone = client
                    .query(SWEEP, &[&now, &now.saturating_sub(retention)])
                    .await?;
                client
                    .execute(PURGE, &[&now.saturating_sub(linger)])
                    .await?;
                Ok(gone)
            })
            .await?;
        if !gone.is_empty() {
            self.swept.fetch_add(gone.len(), Ordering::AcqRel);
            left(shared, &gone)?;
        }
        self.refresh(shared).await?;
        self.analyze(shared).await
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

/// The executions still in the store, and the bytes they hold, in `tx`: read from the index
/// of those still in the store (`executions_live`), not the table. The planner prefers to read
/// the table whole while the rows that left and linger are not yet vacuumed, a read that grows
/// with the linger (65 ms a count at 100 s of a full store, against 10 ms from the index).
async fn count(tx: &deadpool_postgres::Transaction<'_>) -> Result<tokio_postgres::Row, PgError> {
    tx.batch_execute(FROM_THE_INDEX).await?;
    Ok(tx.query_one(COUNT, &[]).await?)
}

/// Has the count (in its transaction) read the index, not the table.
pub(super) const FROM_THE_INDEX: &str = "SET LOCAL enable_seqscan = off";
pub(super) const COUNT: &str = "/* model-runtime: count */ SELECT count(*), COALESCE(sum(bytes + CASE WHEN ended_at IS NULL \
     THEN input_bytes ELSE 0 END), 0)::int8 FROM executions WHERE gone_at IS NULL";
// Rows another transaction is letting go (or locking to) are skipped, not waited for: two
// that let go of overlapping sets never wait on each other, in any order.
const LET_GO: &str = "/* model-runtime: let-go */ UPDATE executions SET gone_at = $2, idempotency_key = NULL \
     WHERE id IN (SELECT id FROM executions WHERE id = ANY($1) AND gone_at IS NULL \
     FOR UPDATE SKIP LOCKED) RETURNING id, bytes";
const SWEEP: &str = "/* model-runtime: retention */ UPDATE executions SET gone_at = $1, idempotency_key = NULL \
     WHERE id IN (SELECT id FROM executions WHERE gone_at IS NULL \
     AND ended_at IS NOT NULL AND ended_at <= $2 LIMIT 1000 FOR UPDATE SKIP LOCKED) \
     RETURNING id, bytes";
const PURGE: &str = "/* model-runtime: purge */ WITH old AS (SELECT id FROM executions WHERE gone_at < $1 LIMIT 1000), \
     events AS (DELETE FROM events WHERE execution_id IN (SELECT id FROM old)) \
     DELETE FROM executions WHERE id IN (SELECT id FROM old)";

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

/// This replica's turn to make room for a new execution of `bytes`, when the counts say it
/// does not fit; `None` when it does, before or after the wait (the create or the making of
/// room ahead before it made room for the next ones too).
pub(super) async fn room_turn(
    shared: &Shared,
    bytes: i64,
) -> Option<tokio::sync::MutexGuard<'_, ()>> {
    if fits(shared, bytes) {
        return None;
    }
    let turn = shared.capacity.making_room.lock().await;
    (!fits(shared, bytes)).then_some(turn)
}

/// Whether a new execution of `bytes` fits by the counts.
pub(super) fn fits(shared: &Shared, bytes: i64) -> bool {
    fits_with(shared, (1, bytes))
}

/// Whether `(executions, bytes)` more fit by the counts.
fn fits_with(shared: &Shared, (more, bytes): (i64, i64)) -> bool {
    let (executions, held) = shared.capacity.counts().now();
    executions.saturating_add(more) <= shared.limits.max_executions as i64
        && held.saturating_add(bytes) <= i64::try_from(shared.limits.max_bytes).unwrap_or(i64::MAX)
}

/// What a full store makes room for beyond what a create needs, so the next creates find it:
/// a hundredth of its bounds (a small store, exactly what the create needs). Counts within it
/// of the bounds have room made ahead.
fn spare(shared: &Shared) -> (i64, i64) {
    (
        shared.limits.max_executions as i64 / 100,
        i64::try_from(shared.limits.max_bytes).unwrap_or(i64::MAX) / 100,
    )
}

/// What room made ahead of the creates makes: a twentieth of the bounds. Each making of room
/// counts the executions exactly, a statement that reads the whole table, so a full store
/// makes it seldom rather than by the hundredth.
fn ahead_room(shared: &Shared) -> (i64, i64) {
    let (executions, bytes) = spare(shared);
    (executions * 5, bytes * 5)
}

/// Makes room ahead of the creates once the counts come within a spare of the bounds: in the
/// background, one at a time, so a full store's creates seldom wait for room (one that does
/// not fit still makes room itself, `make_room`, after waiting its turn).
pub(super) fn ahead(shared: &Arc<Shared>) {
    let capacity = &shared.capacity;
    let sums = capacity.sums.load(Ordering::Acquire);
    if fits_with(shared, spare(shared))
        || capacity.ahead_gave_up.load(Ordering::Acquire) == sums + 1
        || capacity.ahead.swap(true, Ordering::AcqRel)
    {
        return;
    }
    let shared = shared.clone();
    shared.handle.clone().spawn(async move {
        {
            let _turn = shared.capacity.making_room.lock().await;
            if !fits_with(&shared, spare(&shared)) {
                let made = room(&shared, None, shared.clock.now()).await;
                if !matches!(made, Ok(Ok(_))) {
                    // Too few ended executions to let go of, or the database failed: the
                    // creates that do not fit make room themselves meanwhile.
                    if let Ok(Err(error)) | Err(error) = made.map_err(PgError::into_store) {
                        tracing::debug!(%error, "room was not made ahead of the creates");
                    }
                    shared
                        .capacity
                        .ahead_gave_up
                        .store(sums + 1, Ordering::Release);
                }
            }
        }
        shared.capacity.ahead.store(false, Ordering::Release);
    });
}

const CAPACITY_LOCK: &str = "/* model-runtime: capacity-lock */ \
     SELECT pg_advisory_xact_lock(hashtext('model-runtime:capacity:' || $1))";
const OLDEST: &str = "/* model-runtime: oldest */ SELECT id, bytes FROM executions \
     WHERE gone_at IS NULL AND ended_at IS NOT NULL ORDER BY ended_at, id LIMIT $1 \
     FOR UPDATE SKIP LOCKED";
/// The most executions one making of room lets go of.
const MOST: i64 = 1000;

/// Creates under the capacity lock, letting go of the terminal executions that ended first
/// until the new one fits; `Full` when only running ones are left.
pub(super) async fn make_room(shared: &Shared, new: &NewRow, now: i64) -> Result<bool, Unanswered> {
    match room(shared, Some(new), now).await {
        Ok(made) => made.map_err(Unanswered::Failed),
        Err(error) => Err(Unanswered::of(error)),
    }
}

/// Under the capacity lock, lets go of the terminal executions that ended first until `new`
/// fits with a spare beyond it (without `new`, until [`ahead_room`] fits), and inserts `new`,
/// in one transaction: whether `new` was inserted; `Full` when only running ones are left.
async fn room(
    shared: &Shared,
    new: Option<&NewRow>,
    now: i64,
) -> Result<Result<bool, StoreError>, PgError> {
    shared
        .on_connection(async |client| {
            let tx = client.transaction().await?;
            tx.execute(CAPACITY_LOCK, &[&&*shared.options.config.schema])
                .await?;
            let then = shared.capacity.counts().local;
            let counts = count(&tx).await?;
            let (executions, bytes): (i64, i64) = (counts.try_get(0)?, counts.try_get(1)?);
            let max_bytes = i64::try_from(shared.limits.max_bytes).unwrap_or(i64::MAX);
            let ((spare_executions, spare_bytes), wanted) = match new {
                Some(new) => (spare(shared), (1, new.bytes + new.input)),
                None => ((0, 0), ahead_room(shared)),
            };
            let mut need_executions = executions + wanted.0 - shared.limits.max_executions as i64;
            let mut need_bytes = bytes + wanted.1 - max_bytes;
            let mut chosen = Vec::new();
            if need_executions > 0 || need_bytes > 0 {
                // Room to make: what is short, and a spare of what is short.
                let spare = |need: i64, spare: i64| if need > 0 { need + spare } else { 0 };
                let mut room = (
                    spare(need_executions, spare_executions),
                    spare(need_bytes, spare_bytes),
                );
                // Each row read is locked (a record in the log): only as many as the room
                // needs, when it is counted in executions.
                let limit = if room.1 > 0 { MOST } else { room.0.min(MOST) };
                for row in tx.query(OLDEST, &[&limit]).await? {
                    if room.0 <= 0 && room.1 <= 0 {
                        break;
                    }
                    room.0 -= 1;
                    room.1 -= row.try_get::<_, i64>(1)?;
                    let id: uuid::Uuid = row.try_get(0)?;
                    need_executions -= 1;
                    need_bytes -= row.try_get::<_, i64>(1)?;
                    chosen.push(id);
                }
            }
            if need_executions > 0 || need_bytes > 0 {
                return Ok(Err(StoreError::Full {
                    executions: usize::try_from(executions).unwrap_or(0),
                    bytes: u64::try_from(bytes).unwrap_or(0),
                }));
            }
            let gone = if chosen.is_empty() {
                Vec::new()
            } else {
                tx.query(LET_GO, &[&chosen, &now]).await?
            };
            if let Some(new) = new
                && insert(&tx, shared, &[new]).await?.is_empty()
            {
                return Ok(Ok(false));
            }
            tx.commit().await?;
            // The exact counts are the base from now on (what left and the new execution
            // are this replica's changes since), so the creates waiting for this turn see
            // the room it made.
            {
                let mut counts = shared.capacity.counts();
                counts.base = (executions, bytes);
                counts.local_then = then;
            }
            left(shared, &gone)?;
            Ok(Ok(true))
        })
        .await
}
