//! The keeper of a gate: renews this replica's leases every third of the lease (a renewal
//! that failed is tried again after [`RENEW_AGAIN`]: a set that settles waits for it), and
//! gives released members back at once, until the gate is dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::scripts;
use super::shared::{Shared, Unreachable, lock};

/// How soon a renewal that failed is tried again (on a fresh connection): well within the
/// `timeout` a settling set allows beyond a third of the lease.
const RENEW_AGAIN: Duration = Duration::from_millis(100);

impl Shared {
    /// Renews this replica's leases every third of the lease (a renewal that failed is tried
    /// again after [`RENEW_AGAIN`]: a set that settles waits for it), and removes released ones
    /// at once, until the gate is dropped; then gives back what is still held.
    pub(super) async fn keep(self: Arc<Self>) {
        let every = self.lease / 3;
        let mut renew_at = tokio::time::Instant::now() + every;
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = self.release.notified() => {}
                () = tokio::time::sleep_until(renew_at) => {
                    let renewed = self.renew().await;
                    renew_at = tokio::time::Instant::now()
                        + if renewed { every } else { every.min(RENEW_AGAIN) };
                }
            }
            self.give_back().await;
        }
        lock(&self.released).extend(lock(&self.held).drain());
        self.give_back().await;
    }

    /// Renews the held leases: whether Redis answered.
    pub(super) async fn renew(&self) -> bool {
        let mut args = self.args();
        args.extend(lock(&self.held).iter().cloned());
        match self
            .run::<(i64, Vec<String>, i64)>(scripts::renew(), &args)
            .await
        {
            Ok((held, lost, generation)) => {
                self.saw(generation);
                self.global_in_flight.store(
                    u32::try_from(held).unwrap_or(u32::MAX - 1),
                    Ordering::Release,
                );
                // Each lease is counted lost once, though every renewal tries it again
                // until its attempt ends.
                let mut known = lock(&self.lost_members);
                known.retain(|member| lost.contains(member));
                let new = lost
                    .iter()
                    .filter(|member| known.insert((*member).clone()))
                    .count();
                drop(known);
                if new > 0 {
                    let lost = new;
                    self.lost
                        .fetch_add(u64::try_from(lost).unwrap_or(0), Ordering::Relaxed);
                    tracing::warn!(
                        provider = %self.provider,
                        lost,
                        "leases ended before they were renewed and the gate is full: \
                         this replica is over its share until those attempts end"
                    );
                }
            }
            Err(Unreachable(why)) => {
                if self.reachable.swap(false, Ordering::AcqRel) {
                    tracing::warn!(provider = %self.provider, error = why, "the limiter's Redis is unreachable");
                }
                return false;
            }
        }
        true
    }

    /// Removes the released members; those Redis did not take are tried again on the next
    /// turn (and a lease nobody removes ends by itself).
    pub(super) async fn give_back(&self) {
        let released = std::mem::take(&mut *lock(&self.released));
        if released.is_empty() {
            return;
        }
        let removed = match self.connection() {
            Ok(mut connection) => {
                let remove = redis::cmd("ZREM").arg(&*self.key).arg(&released).to_owned();
                self.within(remove.query_async::<i64>(&mut connection))
                    .await
                    .is_ok()
            }
            Err(_) => false,
        };
        if !removed {
            lock(&self.released).extend(released);
        }
    }
}
