//! This replica's registration and lease, and the survivors' side of a lease that lapsed.
//!
//! A replica registers a row in `replicas` (a fresh id, epoch 1) and renews its
//! `lease_until` every third of the lease, by the database's clock. Its appends check, in
//! their own statement, that the row is still there with that epoch and a current lease.
//! When a renewal finds the lease lapsed or the row gone, the replica forgets every execution
//! it owned (its drivers' appends now fail) and registers again under a new id: it keeps
//! serving new work, and what it owned is ended by whoever sweeps first.
//!
//! Every replica sweeps on each renewal: it takes each replica whose lease has lapsed (row
//! locked, skipped if another sweeper holds it), makes that replica's unfinished executions
//! its own and deletes the lapsed row in one transaction, then ends each with
//! `outcome_unknown`, as the file store does at a restart: nothing is resubmitted. So a
//! replica that dies has its executions ended within a lease and a third after its last
//! renewal (plus one append).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{PgError, Shared};
use crate::execution::{ErrorCode, ExecutionId, Interruption, Outcome, interrupted};
use crate::store::StoreError;

/// A replica's id in the `replicas` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) struct ReplicaId(pub(in crate::store) uuid::Uuid);

/// This replica's registration.
#[derive(Debug)]
pub(super) struct Replica {
    identity: Mutex<Identity>,
    lease: Duration,
    /// Whether the lease is current as far as this replica knows.
    current: AtomicBool,
}

#[derive(Debug, Clone, Copy)]
struct Identity {
    id: uuid::Uuid,
    epoch: i64,
    /// The lease lapses then, by this replica's clock: a renewal sent at `t` and answered
    /// holds it until `t + lease`.
    until: Instant,
}

const REGISTER: &str = "INSERT INTO replicas (id, epoch, lease_until, host) \
     VALUES ($1, 1, now() + $2 * interval '1 millisecond', $3)";

impl Replica {
    /// Not registered yet: no lease.
    pub(super) fn new(lease: Duration) -> Self {
        Self {
            identity: Mutex::new(Identity {
                id: uuid::Uuid::nil(),
                epoch: 0,
                until: Instant::now(),
            }),
            lease,
            current: AtomicBool::new(false),
        }
    }

    /// Registers under a fresh id, with a fresh lease.
    pub(super) async fn register(&self, shared: &Shared) -> Result<(), PgError> {
        let identity = register(shared).await?;
        *self.lock() = identity;
        self.current.store(true, Ordering::Release);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Identity> {
        self.identity.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn id(&self) -> ReplicaId {
        ReplicaId(self.lock().id)
    }

    /// The id and epoch appends are fenced by.
    pub(super) fn identity(&self) -> (uuid::Uuid, i64) {
        let identity = *self.lock();
        (identity.id, identity.epoch)
    }

    /// Whether `owner` at `epoch` is this replica as it is registered now.
    pub(super) fn owns(&self, owner: uuid::Uuid, epoch: i64) -> bool {
        let identity = *self.lock();
        identity.id == owner && identity.epoch == epoch
    }

    /// Whether the lease is current, as far as this replica knows.
    pub(super) fn current(&self) -> bool {
        self.current.load(Ordering::Acquire) && Instant::now() < self.lock().until
    }
}

async fn register(shared: &Shared) -> Result<Identity, PgError> {
    let lease = shared.replica.lease;
    let client = shared.client().await?;
    let id = uuid::Uuid::new_v4();
    let sent = Instant::now();
    let host = std::env::var("HOSTNAME").unwrap_or_default();
    client
        .execute(REGISTER, &[&id, &millis(lease), &host])
        .await?;
    Ok(Identity {
        id,
        epoch: 1,
        until: sent + lease,
    })
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

const RENEW: &str = "UPDATE replicas SET lease_until = now() + $3 * interval '1 millisecond' \
     WHERE id = $1 AND epoch = $2 AND lease_until > now()";

/// The lease's task: renews it every third of the lease, registers again when it was lost,
/// and sweeps lapsed replicas.
pub(super) async fn keep(shared: Arc<Shared>) {
    let every = shared.replica.lease / 3;
    loop {
        tokio::time::sleep(every).await;
        match renew(&shared).await {
            Ok(true) => {}
            Ok(false) => lost(&shared).await,
            // The lease holds until its deadline by this replica's clock; `current` says
            // when it has passed.
            Err(error) => {
                tracing::warn!(%error, "renewing the lease failed");
                let _ = shared.noted::<()>(Err(error));
            }
        }
        if shared.replica.current()
            && let Err(error) = sweep(&shared).await
        {
            tracing::warn!(%error, "sweeping lapsed replicas failed");
        }
    }
}

/// Renews the lease; `false` when it was lost (lapsed, or taken over). A lease that lapsed
/// by this replica's clock is lost even if the database's has not yet: appends gave up at
/// that moment, and what they left unfinished must be ended by a sweep, which needs this
/// registration to lapse.
async fn renew(shared: &Shared) -> Result<bool, PgError> {
    let identity = *shared.replica.lock();
    if Instant::now() >= identity.until {
        return Ok(false);
    }
    let client = shared.client().await?;
    let sent = Instant::now();
    let renewed = client
        .execute(
            RENEW,
            &[&identity.id, &identity.epoch, &millis(shared.replica.lease)],
        )
        .await?;
    if renewed == 1 {
        let mut now = shared.replica.lock();
        if now.id == identity.id {
            now.until = sent + shared.replica.lease;
        }
        shared.replica.current.store(true, Ordering::Release);
    }
    Ok(renewed == 1)
}

/// The lease was lost: what this replica owned is a survivor's now (or will be at the next
/// sweep). Forget it all and register again, to serve new work.
async fn lost(shared: &Shared) {
    let old = shared.replica.id();
    tracing::error!(
        replica = %old.0,
        "this replica's lease lapsed: its executions are ended by a survivor; registering again"
    );
    shared.replica.current.store(false, Ordering::Release);
    shared.owned.clear();
    // Where the database still counts the old lease, it lapses now: the sweep that ends
    // what it left need not wait for it.
    let _ = release(shared).await;
    match shared.replica.register(shared).await {
        Ok(()) => tracing::info!(replica = %shared.replica.id().0, "registered again"),
        Err(error) => tracing::warn!(%error, "registering again failed; retrying"),
    }
}

/// Gives the lease back at close: it lapses now, and the next sweep (any replica's) takes
/// what this one leaves unfinished.
pub(super) async fn release(shared: &Shared) -> Result<(), PgError> {
    let (id, epoch) = shared.replica.identity();
    let client = shared.client().await?;
    client
        .execute(
            "UPDATE replicas SET lease_until = now() - interval '1 millisecond' \
                 WHERE id = $1 AND epoch = $2",
            &[&id, &epoch],
        )
        .await?;
    shared.replica.current.store(false, Ordering::Release);
    Ok(())
}

const LAPSED: &str = "SELECT id FROM replicas WHERE lease_until < now() \
     ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED";
const CLAIM: &str = "UPDATE executions SET owner = $2, owner_epoch = $3 \
     WHERE owner = $1 AND ended_at IS NULL AND gone_at IS NULL RETURNING id";
const FORGET: &str = "DELETE FROM replicas WHERE id = $1";

/// Takes over every lapsed replica's unfinished executions and ends them.
async fn sweep(shared: &Shared) -> Result<(), PgError> {
    loop {
        let (me, epoch) = shared.replica.identity();
        let mut client = shared.client().await?;
        let tx = client.transaction().await?;
        let Some(lapsed) = tx.query_opt(LAPSED, &[]).await? else {
            return Ok(());
        };
        let dead: uuid::Uuid = lapsed.try_get(0)?;
        let claimed = tx.query(CLAIM, &[&dead, &me, &epoch]).await?;
        tx.execute(FORGET, &[&dead]).await?;
        tx.commit().await?;
        drop(client);
        tracing::warn!(
            replica = %dead,
            executions = claimed.len(),
            "took over a replica whose lease lapsed: ending its executions as outcome_unknown"
        );
        for row in claimed {
            let id: uuid::Uuid = row.try_get(0)?;
            let id = ExecutionId::from_bytes(id.into_bytes());
            if let Err(error) = end(shared, id).await {
                tracing::warn!(execution_id = %id, %error, "ending a taken-over execution failed");
            }
        }
    }
}

/// Ends `id`, now this replica's, as a restart would: the running attempt's outcome unknown.
async fn end(shared: &Shared, id: ExecutionId) -> Result<(), StoreError> {
    let view = shared.view(id).await?;
    let row = shared
        .row(id)
        .await
        .map_err(PgError::into_store)?
        .ok_or(StoreError::NotFound(id))?;
    let events = shared
        .events(id, 0, usize::MAX, &row.labels)
        .await
        .map_err(PgError::into_store)?;
    let why = Interruption {
        code: ErrorCode::OutcomeUnknown,
        message: "the replica that ran this execution stopped renewing its lease; it was not \
                  resumed, and the provider may have finished it"
            .into(),
        attempt_message: "the replica running this attempt stopped renewing its lease".into(),
        idle_outcome: Outcome::Unknown,
    };
    let ending = interrupted(&view, &events, why);
    if ending.is_empty() {
        return Ok(());
    }
    let now = shared.clock.now();
    super::writer::append(shared, id, ending, now)
        .await
        .map(drop)
}
