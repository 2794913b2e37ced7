//! This replica's registration: a row in `replicas` (a fresh id, epoch 1) whose `lease_until`
//! the lease's keeper renews (`lease.rs`). Appends and creates check, in their own statement,
//! that the row is still there with that id and epoch and a current lease (fencing). A
//! replica that lost its lease registers again under a new id, and what it owned under the old
//! one is ended by whoever takes the old registration over (`takeover.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{PgError, Shared};

/// A replica's id in the `replicas` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) struct ReplicaId(pub(in crate::store) uuid::Uuid);

/// This replica's registration.
#[derive(Debug)]
pub(super) struct Replica {
    identity: Mutex<Identity>,
    pub(super) lease: Duration,
    /// Whether the lease is current as far as this replica knows.
    current: AtomicBool,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Identity {
    pub(super) id: uuid::Uuid,
    pub(super) epoch: i64,
    /// The lease lapses then, by this replica's clock: a renewal sent at `t` and answered
    /// holds it until `t + lease`, which is no later than the database's `lease_until`.
    pub(super) until: Instant,
}

const REGISTER: &str = "/* model-runtime: register */ INSERT INTO replicas \
     (id, epoch, lease_until, host) VALUES ($1, 1, now() + $2 * interval '1 millisecond', $3)";

const RELEASE: &str = "/* model-runtime: release */ UPDATE replicas \
     SET lease_until = now() - interval '1 millisecond' WHERE id = $1 AND epoch = $2";

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
        let id = uuid::Uuid::new_v4();
        let host = std::env::var("HOSTNAME").unwrap_or_default();
        let sent = Instant::now();
        shared
            .on_connection(async |client| {
                Ok(client
                    .execute(REGISTER, &[&id, &millis(self.lease), &host])
                    .await?)
            })
            .await?;
        *self.lock() = Identity {
            id,
            epoch: 1,
            until: sent + self.lease,
        };
        self.current.store(true, Ordering::Release);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Identity> {
        self.identity.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn id(&self) -> ReplicaId {
        ReplicaId(self.lock().id)
    }

    /// The registration as it is now.
    pub(super) fn now(&self) -> Identity {
        *self.lock()
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

    /// A renewal of registration `id`, sent at `sent`, was answered: the lease holds until
    /// `sent + lease` (unless the replica registered again meanwhile).
    pub(super) fn renewed(&self, id: uuid::Uuid, sent: Instant) {
        let mut now = self.lock();
        if now.id == id {
            now.until = now.until.max(sent + self.lease);
            self.current.store(true, Ordering::Release);
        }
    }

    /// The lease is lost: appends stop at once.
    pub(super) fn lapsed(&self) {
        self.current.store(false, Ordering::Release);
    }
}

pub(super) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Gives the lease back (at close, or once it was lost): it lapses now, and the next round
/// of any replica's takeover takes what this registration leaves unfinished.
pub(super) async fn release(shared: &Shared) -> Result<(), PgError> {
    let (id, epoch) = shared.replica.identity();
    shared.replica.lapsed();
    shared
        .on_connection(async |client| Ok(client.execute(RELEASE, &[&id, &epoch]).await?))
        .await?;
    Ok(())
}
