//! Keeping the lease: a task of its own on a connection of its own, so that no other work of
//! the store (a takeover, a burst of appends, a pool at its limit) can make a renewal late.
//!
//! Every third of the lease, counted from when the last renewal was sent, the keeper renews it
//! with one prepared statement, by the database's clock. A renewal that fails (an error, a
//! broken connection, no answer) is tried again every [`RETRY`] on a fresh connection until
//! the lease ends by this replica's clock, which is no later than the database's (the clock
//! starts when the renewal was sent). So the lease is lost only when the database did not
//! answer for a whole lease, or when it answers that the lease lapsed (the replica was paused
//! past it, and another may be taking over). Then this replica forgets what it owned (its
//! drivers' appends are refused), gives the old registration back, and registers again to
//! serve new work. Fencing is unchanged: an append is refused from the lease's end.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres::{Client, Statement};

use super::replica::{millis, release};
use super::{PgError, Shared};

/// How soon a failed renewal is tried again.
const RETRY: Duration = Duration::from_millis(250);

/// The shortest wait for one renewal's answer on an open connection (a third of a short lease
/// is less than a round trip on a slow network).
const MIN_ANSWER: Duration = Duration::from_secs(1);

const RENEW: &str = "/* model-runtime: renew */ UPDATE replicas \
     SET lease_until = now() + $3 * interval '1 millisecond' \
     WHERE id = $1 AND epoch = $2 AND lease_until > now()";

/// The keeper's connection, with the renewal prepared on it. Dropped (a renewal failed or
/// went unanswered), its socket closes at once: nothing waits for TCP to give up on a
/// silent network.
struct Connection {
    client: Client,
    renew: Statement,
    task: tokio::task::AbortHandle,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The keeper: renews the lease until the store stops.
pub(super) async fn keep(shared: Arc<Shared>) {
    let every = shared.replica.lease / 3;
    let mut connection = None;
    let mut next = shared.replica.now().until - (shared.replica.lease - every);
    let mut failures = 0u32;
    // After a lost lease, until this replica is registered again.
    let mut registering = false;
    loop {
        tokio::time::sleep_until(next).await;
        if registering {
            match shared.replica.register(&shared).await {
                Ok(()) => {
                    tracing::info!(replica = %shared.replica.id().0, "registered again");
                    registering = false;
                    next = Instant::now() + every;
                }
                Err(error) => {
                    tracing::debug!(%error, "registering again failed; trying again");
                    next = Instant::now() + RETRY;
                }
            }
            continue;
        }
        let identity = shared.replica.now();
        let sent = Instant::now();
        let left = identity.until.saturating_duration_since(sent);
        // On an open connection a renewal is one round trip; a fresh one connects first.
        let patience = if connection.is_some() {
            every.max(MIN_ANSWER)
        } else {
            shared.options.config.connect_timeout + every.max(MIN_ANSWER)
        }
        .min(left);
        let renewed = if left.is_zero() {
            Ok(false)
        } else {
            tokio::time::timeout(
                patience,
                renew(&shared, &mut connection, identity.id, identity.epoch),
            )
            .await
            .unwrap_or(Err(PgError::NoAnswer(patience)))
        };
        match renewed {
            Ok(true) => {
                shared.replica.renewed(identity.id, sent);
                shared.reachable.store(true, Ordering::Release);
                if failures > 0 {
                    tracing::info!(failures, "the lease is renewed again");
                }
                failures = 0;
                next = sent + every;
            }
            Ok(false) => {
                lost(&shared, failures).await;
                failures = 0;
                registering = true;
                next = Instant::now();
            }
            Err(error) => {
                connection = None;
                failures += 1;
                if error.transient() {
                    shared.reachable.store(false, Ordering::Release);
                }
                if failures == 1 {
                    tracing::warn!(
                        %error,
                        left = ?left,
                        "renewing the lease failed; trying again until it ends"
                    );
                } else {
                    tracing::debug!(%error, failures, "renewing the lease failed again");
                }
                next = Instant::now() + RETRY;
            }
        }
    }
}

/// One renewal of registration `id`: whether the database still held the lease.
async fn renew(
    shared: &Shared,
    connection: &mut Option<Connection>,
    id: uuid::Uuid,
    epoch: i64,
) -> Result<bool, PgError> {
    if connection.is_none() {
        *connection = Some(connect(shared).await?);
    }
    let Some(connection) = connection else {
        return Ok(false);
    };
    let renewed = connection
        .client
        .execute(
            &connection.renew,
            &[&id, &epoch, &millis(shared.replica.lease)],
        )
        .await?;
    Ok(renewed == 1)
}

/// A connection of the keeper's own (not the pool's: a pool at its limit would make it wait).
async fn connect(shared: &Shared) -> Result<Connection, PgError> {
    let config = super::connect::settings(&shared.options);
    let (client, connection) = config.connect(shared.tls.clone()).await?;
    let task = shared
        .handle
        .spawn(async move {
            let _ = connection.await;
        })
        .abort_handle();
    let renew = match client.prepare(RENEW).await {
        Ok(renew) => renew,
        Err(error) => {
            task.abort();
            return Err(error.into());
        }
    };
    Ok(Connection {
        client,
        renew,
        task,
    })
}

/// The lease was lost: what this replica owned is another's now (or will be at the next
/// takeover). Its drivers' appends stop, and it gives the old registration back; the keeper
/// registers it again, to serve new work.
async fn lost(shared: &Shared, failures: u32) {
    tracing::error!(
        replica = %shared.replica.id().0,
        failed_renewals = failures,
        "this replica's lease lapsed: its executions are ended by whoever takes it over; \
         registering again"
    );
    shared.replica.lapsed();
    shared.owned.clear();
    // Where the database still counts the old lease, it lapses now: the takeover that ends
    // what it left need not wait for it.
    let _ = tokio::time::timeout(shared.patience(), release(shared)).await;
}
