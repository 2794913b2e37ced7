//! Ending what no driver will end: the executions of replicas whose lease lapsed, and this
//! replica's own whose driver stopped without its end (the database did not answer it).
//!
//! A round runs every third of a lease, and at once when a driver here stops without its end
//! (`EventStore::abandoned`); only while this replica's own lease is current, and apart from
//! the lease's renewal (`lease.rs`), which it can never delay. A round
//! 1. claims each lapsed replica, never itself: one statement, fenced by this replica's own
//!    lease, makes the lapsed replica's unfinished executions this one's and deletes its row;
//! 2. claims the unfinished executions whose owner has no row at all (there should be none: a
//!    net under a bug, so nothing is left running forever);
//! 3. ends every unfinished execution this replica owns that no driver of this process runs
//!    ([`Driven`](super::owned::Driven)), [`BATCH`] at a time: a batch's rows and events are
//!    read in one round trip, and its endings go to the writer together, one statement.
//!    Nothing is resubmitted: the running attempt fails with its outcome unknown, as at a file
//!    store's restart.
//!
//! A failure anywhere leaves what was claimed claimed, and the next round ends it. So a dead
//! replica's executions end within a lease of its last renewal (its registration lapses) and
//! a third (the next round), plus the time its batches take.

use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

use super::owned::Row;
use super::{PgError, Shared, rows, uuid, writer};
use crate::execution::{
    ErrorCode, Event, Execution, ExecutionId, IdMap, Interruption, interrupted,
};
use crate::store::StoreError;

/// Executions ended together: their endings fit one statement of the writer (`batch.rs`).
const BATCH: usize = 256;

const CLAIM: &str = "/* model-runtime: claim */
WITH me AS (
    SELECT 1 FROM replicas WHERE id = $1 AND epoch = $2 AND lease_until > now()
), lapsed AS (
    SELECT id FROM replicas WHERE lease_until < now() AND id <> $1 AND EXISTS (SELECT 1 FROM me)
    ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE executions SET owner = $1, owner_epoch = $2
    WHERE owner IN (SELECT id FROM lapsed) AND ended_at IS NULL AND gone_at IS NULL
    RETURNING id
), forgotten AS (
    DELETE FROM replicas WHERE id IN (SELECT id FROM lapsed) RETURNING id
)
SELECT f.id, c.id FROM forgotten f LEFT JOIN claimed c ON true";

const ADOPT: &str = "/* model-runtime: adopt */
UPDATE executions x SET owner = $1, owner_epoch = $2
WHERE x.ended_at IS NULL AND x.gone_at IS NULL
    AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = x.owner)
    AND EXISTS (SELECT 1 FROM replicas WHERE id = $1 AND epoch = $2 AND lease_until > now())
RETURNING x.id";

const MINE: &str = "/* model-runtime: mine */ SELECT id FROM executions \
     WHERE owner = $1 AND owner_epoch = $2 AND ended_at IS NULL AND gone_at IS NULL";

// As `Shared::row` reads them, the id last.
const END_ROWS: &str = "/* model-runtime: end-rows */ SELECT owner, owner_epoch, state, \
     committed, stopping, last_sequence, labels, idempotency_key, input_bytes, id \
     FROM executions WHERE id = ANY($1) AND ended_at IS NULL AND gone_at IS NULL";

// As `Shared::events` reads them, the execution last.
const END_EVENTS: &str = "/* model-runtime: end-events */ SELECT sequence, time, state, \
     payload, usage_position, first_sequence, execution_id FROM events \
     WHERE execution_id = ANY($1) ORDER BY execution_id, sequence";

/// The takeover's state.
#[derive(Debug, Default)]
pub(super) struct Takeover {
    /// A round is due now (a driver stopped without its end).
    wake: Notify,
    /// Executions claimed from a lapsed replica and not ended yet: their ending says so.
    taken: Mutex<IdMap<()>>,
}

impl Takeover {
    fn taken(&self) -> MutexGuard<'_, IdMap<()>> {
        self.taken.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A round is due.
    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }
}

/// The takeover's task: a round every third of a lease, or when woken.
pub(super) async fn run(shared: Arc<Shared>) {
    let every = shared.replica.lease / 3;
    let mut failures = 0u32;
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shared.takeover.wake.notified() => {}
        }
        if !shared.replica.current() {
            continue;
        }
        match round(&shared).await {
            Ok(()) => failures = 0,
            Err(error) => {
                failures += 1;
                // Once per outage: every round of it fails alike.
                if failures == 1 {
                    tracing::warn!(%error, "taking over lapsed replicas failed; the next round tries again");
                } else {
                    tracing::debug!(%error, failures, "taking over lapsed replicas failed again");
                }
            }
        }
    }
}

async fn round(shared: &Arc<Shared>) -> Result<(), PgError> {
    while claim(shared).await? {}
    adopt(shared).await?;
    reconcile(shared).await
}

/// Claims one lapsed replica's unfinished executions and deletes its row: whether there was
/// one.
async fn claim(shared: &Shared) -> Result<bool, PgError> {
    let (me, epoch) = shared.replica.identity();
    let rows = shared
        .on_connection(async |client| Ok(client.query(CLAIM, &[&me, &epoch]).await?))
        .await?;
    let Some(first) = rows.first() else {
        return Ok(false);
    };
    let lapsed: uuid::Uuid = first.try_get(0)?;
    let mut taken = Vec::with_capacity(rows.len());
    for row in &rows {
        if let Some(id) = row.try_get::<_, Option<uuid::Uuid>>(1)? {
            taken.push(ExecutionId::from_bytes(id.into_bytes()));
        }
    }
    tracing::warn!(
        replica = %lapsed,
        executions = taken.len(),
        "took over a replica whose lease lapsed: ending its executions as outcome_unknown"
    );
    shared
        .takeover
        .taken()
        .extend(taken.into_iter().map(|id| (id, ())));
    Ok(true)
}

/// Claims the unfinished executions whose owner has no row.
async fn adopt(shared: &Shared) -> Result<(), PgError> {
    let (me, epoch) = shared.replica.identity();
    let adopted = shared
        .on_connection(async |client| Ok(client.execute(ADOPT, &[&me, &epoch]).await?))
        .await?;
    if adopted > 0 {
        tracing::warn!(
            executions = adopted,
            "found unfinished executions whose replica is gone: ending them as outcome_unknown"
        );
    }
    Ok(())
}

/// Ends every unfinished execution this replica owns that no driver here runs.
async fn reconcile(shared: &Arc<Shared>) -> Result<(), PgError> {
    let (me, epoch) = shared.replica.identity();
    let mine = shared
        .on_connection(async |client| {
            let statement = client.prepare_cached(MINE).await?;
            Ok(client.query(&statement, &[&me, &epoch]).await?)
        })
        .await?;
    let mut owned = Vec::with_capacity(mine.len());
    for row in &mine {
        let id: uuid::Uuid = row.try_get(0)?;
        owned.push(ExecutionId::from_bytes(id.into_bytes()));
    }
    // What was claimed and has ended since (cancelled, say) is no longer to be ended.
    let still: IdMap<()> = owned.iter().map(|id| (*id, ())).collect();
    shared
        .takeover
        .taken()
        .retain(|id, ()| still.contains_key(id));
    let orphans = shared.driven.undriven(owned, me);
    for batch in orphans.chunks(BATCH) {
        if !shared.replica.current() {
            break;
        }
        end(shared, batch).await?;
    }
    Ok(())
}

/// Why an execution ended here: taken over from a lapsed replica, or its own driver stopped.
fn why(taken: bool) -> Interruption {
    let (message, attempt_message) = if taken {
        (
            "the replica that ran this execution stopped renewing its lease; it was not \
             resumed, and the provider may have finished it",
            "the replica running this attempt stopped renewing its lease",
        )
    } else {
        (
            "the replica that ran this execution could not record its progress (its database \
             did not answer); it was not resumed, and the provider may have finished it",
            "the replica running this attempt could not record its progress",
        )
    };
    Interruption {
        code: ErrorCode::OutcomeUnknown,
        message: message.into(),
        attempt_message: attempt_message.into(),
    }
}

/// Ends `ids` (unfinished, this replica's, undriven) as a restart would.
async fn end(shared: &Arc<Shared>, ids: &[ExecutionId]) -> Result<(), PgError> {
    let uuids: Vec<uuid::Uuid> = ids.iter().map(|id| uuid(*id)).collect();
    let (heads, bodies) = shared
        .on_connection(async |client| {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&uuids];
            // Sent together: one round trip.
            let (rows, events) = tokio::try_join!(
                client.query(END_ROWS, &params),
                client.query(END_EVENTS, &params)
            )?;
            Ok((rows, events))
        })
        .await?;
    let mut found: IdMap<(Row, Vec<Event>)> = IdMap::default();
    for head in &heads {
        let id: uuid::Uuid = head.try_get(9)?;
        found.insert(
            ExecutionId::from_bytes(id.into_bytes()),
            (Row::of(head)?, Vec::new()),
        );
    }
    for body in &bodies {
        let id: uuid::Uuid = body.try_get(6)?;
        if let Some((row, events)) = found.get_mut(&ExecutionId::from_bytes(id.into_bytes())) {
            rows::events_of(body, 0, &row.labels, 0, events)?;
        }
    }
    let now = shared.clock.now();
    let mut endings = Vec::with_capacity(found.len());
    {
        let taken = shared.takeover.taken();
        for (id, (row, events)) in found {
            if !shared.replica.owns(row.owner, row.owner_epoch) {
                continue;
            }
            let Some(view) = view_of(id, &row, &events) else {
                tracing::error!(execution_id = %id, "an execution to end does not begin with execution.accepted");
                continue;
            };
            let ending = interrupted(&view, &events, why(taken.contains_key(&id)));
            shared.owned.hold_row(id, &row);
            endings.push((id, ending));
        }
    }
    let registration = shared.replica.id().0;
    let appends = endings.into_iter().map(|(id, ending)| async move {
        let appended = writer::append(shared, id, registration, ending, now).await;
        (id, appended)
    });
    let mut failed = None;
    for (id, appended) in futures_util::future::join_all(appends).await {
        match appended {
            Ok(_) | Err(StoreError::AlreadyTerminal(_) | StoreError::NotFound(_)) => {
                shared.takeover.taken().remove(&id);
            }
            Err(error) => failed = Some((id, error)),
        }
    }
    // Left as they are (this replica's, unfinished, undriven): the next round ends them.
    if let Some((id, error)) = failed {
        tracing::warn!(execution_id = %id, %error, "ending an execution failed; the next round tries again");
    }
    Ok(())
}

/// The view of `id` folded from its events.
fn view_of(id: ExecutionId, row: &Row, events: &[Event]) -> Option<Execution> {
    let (first, rest) = events.split_first()?;
    let mut view = Execution::from_accepted(first, id, row.labels.clone(), row.key.clone())?;
    for event in rest {
        view.apply(event);
    }
    Some(view)
}
