//! Room for new executions: a create the counts admit is counted at once (a [`Reservation`]),
//! so the creates in flight together never pass the bounds as this replica counts them; one
//! they do not admit takes this replica's turn, then the store's capacity lock, and makes room
//! for itself and a spare (`make_room`). A store near its bounds has room made ahead of its
//! creates, in the background (`ahead`), so a full store's creates seldom wait for it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{LET_GO_OLDEST, count, left};
use crate::store::StoreError;
use crate::store::postgres::insert::{NewRow, Unanswered, Within, insert};
use crate::store::postgres::{PgError, Shared};

/// How a create may be written.
pub(in crate::store::postgres) enum Admission<'a> {
    /// The counts admit it: it is counted until it is written or given up.
    Fits(Reservation<'a>),
    /// They do not: this replica's turn to make room for it.
    Turn(tokio::sync::MutexGuard<'a, ()>),
}

/// A create the counts admitted, counted until it is written ([`keep`](Self::keep)) or given
/// up (dropped).
pub(in crate::store::postgres) struct Reservation<'a> {
    shared: &'a Shared,
    bytes: i64,
    kept: bool,
}

impl<'a> Reservation<'a> {
    /// A reservation of `bytes` made earlier and [detached](Self::detach) since.
    pub(in crate::store::postgres) fn adopt(shared: &'a Shared, bytes: i64) -> Self {
        Self {
            shared,
            bytes,
            kept: false,
        }
    }

    /// Lets the reservation outlive this borrow of the store: it stays counted until
    /// [adopted](Self::adopt) again and kept or dropped. Its bytes.
    pub(in crate::store::postgres) fn detach(mut self) -> i64 {
        self.kept = true;
        self.bytes
    }

    /// The create was written: it counts as this replica's change from now on.
    pub(in crate::store::postgres) fn keep(mut self) {
        let mut counts = self.shared.capacity.counts();
        counts.reserved.0 -= 1;
        counts.reserved.1 -= self.bytes;
        counts.local.0 += 1;
        counts.local.1 += self.bytes;
        self.kept = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.kept {
            let mut counts = self.shared.capacity.counts();
            counts.reserved.0 -= 1;
            counts.reserved.1 -= self.bytes;
        }
    }
}

/// Admits a new execution of `bytes` when the counts have room for it; otherwise waits for
/// this replica's turn to make room, and admits it then if the one before made room enough.
pub(in crate::store::postgres) async fn admit(shared: &Shared, bytes: i64) -> Admission<'_> {
    if let Some(admitted) = reserve(shared, bytes) {
        return Admission::Fits(admitted);
    }
    let turn = shared.capacity.making_room.lock().await;
    match reserve(shared, bytes) {
        Some(admitted) => Admission::Fits(admitted),
        None => Admission::Turn(turn),
    }
}

/// Admits a new execution of `bytes` when the counts have room for it, without waiting.
pub(in crate::store::postgres) fn reserve(shared: &Shared, bytes: i64) -> Option<Reservation<'_>> {
    let mut counts = shared.capacity.counts();
    let (executions, held) = counts.now();
    if !within(shared, (executions + 1, held.saturating_add(bytes))) {
        return None;
    }
    counts.reserved.0 += 1;
    counts.reserved.1 += bytes;
    Some(Reservation::adopt(shared, bytes))
}

/// Whether `(executions, bytes)` more fit by the counts.
fn fits_with(shared: &Shared, (more, bytes): (i64, i64)) -> bool {
    let (executions, held) = shared.capacity.counts().now();
    within(
        shared,
        (executions.saturating_add(more), held.saturating_add(bytes)),
    )
}

fn within(shared: &Shared, (executions, bytes): (i64, i64)) -> bool {
    let (max_executions, max_bytes) = bounds(shared);
    executions <= max_executions && bytes <= max_bytes
}

/// `max_executions` and `max_bytes`, as the counts are kept.
fn bounds(shared: &Shared) -> (i64, i64) {
    (
        i64::try_from(shared.limits.max_executions).unwrap_or(i64::MAX),
        i64::try_from(shared.limits.max_bytes).unwrap_or(i64::MAX),
    )
}

/// What a full store makes room for beyond what a create needs, so the next creates find it:
/// a hundredth of its bounds (a store of fewer than 100 executions, exactly what the create
/// needs). Counts within it of the bounds have room made ahead.
fn spare(shared: &Shared) -> (i64, i64) {
    let (max_executions, max_bytes) = bounds(shared);
    (max_executions / 100, max_bytes / 100)
}

/// What room made ahead of the creates makes: a twentieth of the bounds, at most [`MOST`]
/// executions at a time. Each making of room counts the store exactly, so a full store makes
/// it seldom rather than by the hundredth.
fn ahead_room(shared: &Shared) -> (i64, i64) {
    let (executions, bytes) = spare(shared);
    (executions * 5, bytes * 5)
}

/// Makes room ahead of the creates once the counts come within a spare of the bounds: in the
/// background, one at a time, so a full store's creates seldom wait for room (one that does
/// not fit still makes room itself, after waiting its turn). When it finds nothing to let go
/// of, or the database fails, it is not tried again before the counts are next summed.
pub(in crate::store::postgres) fn ahead(shared: &Arc<Shared>) {
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
        let ahead = Ahead(&shared);
        let _turn = shared.capacity.making_room.lock().await;
        if fits_with(&shared, spare(&shared)) {
            return;
        }
        let made = room(&shared, None, shared.clock.now()).await;
        if !matches!(made, Ok(Ok(true))) {
            if let Ok(Err(error)) | Err(error) = made.map_err(PgError::into_store) {
                tracing::debug!(%error, "room was not made ahead of the creates");
            }
            ahead.gave_up(sums);
        }
    });
}

/// Room being made ahead: it is no longer once this is dropped, however the task ends.
struct Ahead<'a>(&'a Shared);

impl Ahead<'_> {
    fn gave_up(&self, sums: u64) {
        self.0
            .capacity
            .ahead_gave_up
            .store(sums + 1, Ordering::Release);
    }
}

impl Drop for Ahead<'_> {
    fn drop(&mut self) {
        self.0.capacity.ahead.store(false, Ordering::Release);
    }
}

const CAPACITY_LOCK: &str = "/* model-runtime: capacity-lock */ \
     SELECT pg_advisory_xact_lock(hashtext('model-runtime:capacity:' || $1))";
/// The most executions one making of room lets go of.
pub(super) const MOST: i64 = 1000;

/// Creates under the capacity lock, letting go of the terminal executions that ended first
/// until the new one fits; `Full` when only running ones are left. The caller holds this
/// replica's turn ([`Admission::Turn`]).
pub(in crate::store::postgres) async fn make_room(
    shared: &Shared,
    new: &NewRow,
    now: i64,
) -> Result<bool, Unanswered> {
    match room(shared, Some(new), now).await {
        Ok(made) => made.map_err(Unanswered::Failed),
        Err(error) => Err(Unanswered::of(error)),
    }
}

/// Under the capacity lock, in one transaction: lets go of the terminal executions that ended
/// first until `new` fits with a spare beyond it, and inserts `new` (whether it was
/// inserted; `Full` when only running ones are left); without `new`, lets go of as many as
/// [`ahead_room`] asks, or of what there is (whether any was let go). The exact count becomes
/// the counts' base.
async fn room(
    shared: &Shared,
    new: Option<&NewRow>,
    now: i64,
) -> Result<Result<bool, StoreError>, PgError> {
    // Nothing of this replica lets executions go while the count becomes the base.
    let _flushing = shared.capacity.flushing.lock().await;
    shared
        .on_connection(async |client| {
            let tx = client.transaction().await?;
            tx.execute(CAPACITY_LOCK, &[&&*shared.options.config.schema])
                .await?;
            // This replica's creates admitted and not yet written count too: the database
            // has not seen them (one that commits before the count is counted twice, and
            // room is made for it: too much, never too little).
            let (then, admitted) = {
                let counts = shared.capacity.counts();
                (counts.local, counts.reserved)
            };
            let (executions, bytes) = count(&tx).await?;
            let (max_executions, max_bytes) = bounds(shared);
            let ((spare_executions, spare_bytes), wanted) = match new {
                Some(new) => (spare(shared), (1, new.bytes + new.input)),
                None => ((0, 0), ahead_room(shared)),
            };
            let mut need_executions = executions + admitted.0 + wanted.0 - max_executions;
            let mut need_bytes = bytes + admitted.1 + wanted.1 - max_bytes;
            let gone = if need_executions > 0 || need_bytes > 0 {
                // Room to make: what is short, and a spare of what is short.
                let and_spare = |need: i64, spare: i64| if need > 0 { need + spare } else { 0 };
                let room = (
                    and_spare(need_executions, spare_executions),
                    and_spare(need_bytes, spare_bytes),
                );
                // Each row read is locked (a record in the log): only as many as the room
                // needs, when it is counted in executions.
                let limit = if room.1 > 0 { MOST } else { room.0.min(MOST) };
                tx.query(LET_GO_OLDEST, &[&limit, &room.0, &room.1, &now])
                    .await?
            } else {
                Vec::new()
            };
            for row in &gone {
                need_executions -= 1;
                need_bytes -= row.try_get::<_, i64>(1)?;
            }
            if new.is_some() && (need_executions > 0 || need_bytes > 0) {
                return Ok(Err(StoreError::Full {
                    executions: usize::try_from(executions).unwrap_or(0),
                    bytes: u64::try_from(bytes).unwrap_or(0),
                }));
            }
            if let Some(new) = new
                && insert(&tx, shared, &[new], Within::Transaction)
                    .await?
                    .is_empty()
            {
                return Ok(Ok(false));
            }
            tx.commit().await?;
            // What left and the new execution are this replica's changes since `then`.
            shared.capacity.rebase((executions, bytes), then);
            left(shared, &gone)?;
            Ok(Ok(new.is_some() || !gone.is_empty()))
        })
        .await
}

/// The plan of the exact count, as [`count`] runs it: for the test that it reads the index.
#[cfg(test)]
pub(in crate::store::postgres) async fn count_plan(shared: &Shared) -> Vec<String> {
    use super::{COUNT, counted};
    let mut client = shared.client().await.expect("a connection");
    let tx = client.transaction().await.expect("a transaction");
    counted(&tx, &format!("EXPLAIN {COUNT}"))
        .await
        .expect("the count's plan")
        .iter()
        .map(|row| row.get(0))
        .collect()
}
