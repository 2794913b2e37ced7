//! Cancels across replicas. Only an execution's owner appends to it, so a `CancelExecution`
//! that lands on another replica records the request in the execution's row and announces it
//! (`c ID OWNER REASON` on the store's channel; the runtime bounds a reason far below a
//! notification's 8000 bytes); the owner hands it to its runtime, which cancels as
//! it would a cancel of its own (the driver is told, or the cancellation recorded), and the
//! replica that was asked waits for the terminal event like any follower. The owner's poll
//! looks for requests it was not told of, so a lost notification delays a cancel by at most a
//! `poll_interval`; an owner that is gone leaves it to the survivor that ends its executions.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::mpsc;

use super::{PgError, Shared, backoff, uuid};
use crate::execution::ExecutionId;
use crate::store::{CancelRequest, CancelRequests, StoreError};

/// The requests on their way to this replica's runtime.
#[derive(Debug)]
pub(super) struct Cancels {
    sender: mpsc::UnboundedSender<CancelRequest>,
    receiver: Mutex<Option<CancelRequests>>,
    /// Delivered and not ended yet: each request reaches the runtime once.
    delivered: Mutex<HashSet<ExecutionId>>,
}

impl Default for Cancels {
    fn default() -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        Self {
            sender,
            receiver: Mutex::new(Some(receiver)),
            delivered: Mutex::default(),
        }
    }
}

impl Cancels {
    fn delivered(&self) -> MutexGuard<'_, HashSet<ExecutionId>> {
        self.delivered.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The receiving end, once.
    pub(super) fn take(&self) -> Option<CancelRequests> {
        self.receiver
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    fn deliver(&self, id: ExecutionId, reason: Option<String>) {
        if self.delivered().insert(id) {
            let _ = self.sender.send(CancelRequest { id, reason });
        }
    }

    /// `id` ended: nothing more to deliver for it.
    pub(super) fn ended(&self, id: ExecutionId) {
        self.delivered().remove(&id);
    }
}

const REQUEST: &str = "/* model-runtime: cancel */
WITH upd AS (
    UPDATE executions SET cancel_requested = true, cancel_reason = $2
    WHERE id = $1 AND ended_at IS NULL AND gone_at IS NULL
    RETURNING owner
), note AS (
    SELECT count(pg_notify($3, 'c ' || $1::text || ' ' || owner::text
        || COALESCE(' ' || $2, ''))) FROM upd
)
SELECT owner FROM upd, note";

/// Records a cancel for the replica that owns `id`, when that is another one; `false` when
/// this replica owns it (or it has ended).
pub(super) async fn elsewhere(
    shared: &Shared,
    id: ExecutionId,
    reason: Option<String>,
) -> Result<bool, StoreError> {
    let row = shared
        .row(id)
        .await
        .map_err(PgError::into_store)?
        .ok_or(StoreError::NotFound(id))?;
    if row.lifecycle_state.is_terminal() || shared.replica.owns(row.owner, row.owner_epoch) {
        return Ok(false);
    }
    // The request is the same whenever it is made: one whose answer was lost is made again
    // (for up to a lease) before the caller is answered.
    let since = tokio::time::Instant::now();
    let mut tries = 0u32;
    loop {
        let requested = shared
            .on_connection(async |client| {
                let rows = client
                    .query(REQUEST, &[&uuid(id), &reason, &shared.channel])
                    .await?;
                Ok(!rows.is_empty())
            })
            .await;
        match requested {
            Err(error) if error.transient() && since.elapsed() < shared.replica.lease => {
                tries += 1;
                tokio::time::sleep(backoff(tries)).await;
            }
            requested => return requested.map_err(PgError::into_store),
        }
    }
}

/// A notification `ID OWNER [REASON]` (after `c `): delivered when this replica is the owner.
pub(super) fn heard(shared: &Shared, rest: &str) {
    let mut words = rest.splitn(3, ' ');
    let (Some(Ok(id)), Some(Ok(owner))) = (
        words.next().map(uuid::Uuid::parse_str),
        words.next().map(uuid::Uuid::parse_str),
    ) else {
        return;
    };
    if shared.replica.id().0 == owner {
        let reason = words.next().map(str::to_owned);
        shared
            .cancels
            .deliver(ExecutionId::from_bytes(id.into_bytes()), reason);
    }
}

const PENDING: &str = "/* model-runtime: cancel-pending */ SELECT id, cancel_reason FROM executions \
     WHERE owner = $1 AND cancel_requested AND ended_at IS NULL AND gone_at IS NULL";

/// The poll's share: requests for this replica that no notification brought.
pub(super) async fn pending(shared: &Shared) -> Result<(), PgError> {
    let (me, _) = shared.replica.identity();
    let rows = shared
        .on_connection(async |client| {
            let statement = client.prepare_cached(PENDING).await?;
            Ok(client.query(&statement, &[&me]).await?)
        })
        .await?;
    for row in rows {
        let id: uuid::Uuid = row.try_get(0)?;
        shared
            .cancels
            .deliver(ExecutionId::from_bytes(id.into_bytes()), row.try_get(1)?);
    }
    Ok(())
}
