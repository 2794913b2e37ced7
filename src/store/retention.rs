//! Retention and capacity, as a policy every store calls: which terminal executions leave,
//! and when. It holds the order executions ended in and decides; the store removes what it
//! is told to, with the execution's identities (id, idempotency key) in the same step.
//!
//! - A terminal execution leaves once `retention` has passed since it ended.
//! - When the store is full, the one that ended first leaves early to make room.
//! - Never one a reader still follows (a replay must not lose its terminal event): the store
//!   says how many readers each has, from an explicit count ([`Changes`] registers itself).
//! - Non-terminal executions are not here at all: they never leave, and a store full of them
//!   refuses new work.
//!
//! [`Changes`]: crate::store::Changes

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::execution::ExecutionId;

/// The terminal executions of a store, in the order they ended.
#[derive(Debug, Default)]
pub struct Retention {
    ended: VecDeque<(ExecutionId, Instant)>,
    period: Duration,
}

impl Retention {
    /// Executions expire `period` after they end.
    pub fn new(period: Duration) -> Self {
        Self {
            ended: VecDeque::new(),
            period,
        }
    }

    /// How long after it ended an execution expires.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// `id` ended at `at`: from now on it may leave.
    pub fn ended(&mut self, id: ExecutionId, at: Instant) {
        self.ended.push_back((id, at));
    }

    /// The executions whose retention has passed at `now` and that no reader follows,
    /// forgotten here as they are returned; the store removes them. One with readers stays
    /// until they let go.
    pub fn expired(
        &mut self,
        now: Instant,
        readers: impl Fn(ExecutionId) -> usize,
    ) -> Vec<ExecutionId> {
        let mut gone = Vec::new();
        let mut position = 0;
        while let Some(&(id, ended)) = self.ended.get(position) {
            if now.saturating_duration_since(ended) < self.period {
                break;
            }
            if readers(id) > 0 {
                position += 1;
            } else {
                self.ended.remove(position);
                gone.push(id);
            }
        }
        gone
    }

    /// The execution that ended first among those no reader follows, forgotten here as it is
    /// returned, to make room for a new one; `None` when every terminal execution is read.
    pub fn make_room(&mut self, readers: impl Fn(ExecutionId) -> usize) -> Option<ExecutionId> {
        let position = self.ended.iter().position(|(id, _)| readers(*id) == 0)?;
        self.ended.remove(position).map(|(id, _)| id)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn ids(n: usize) -> Vec<ExecutionId> {
        (0..n).map(|_| ExecutionId::new()).collect()
    }

    #[test]
    fn expires_in_end_order_after_the_period_and_skips_what_is_read() {
        let start = Instant::now();
        let [a, b, c] = ids(3)[..] else {
            unreachable!()
        };
        let mut retention = Retention::new(Duration::from_secs(60));
        retention.ended(a, start);
        retention.ended(b, start + Duration::from_secs(10));
        retention.ended(c, start + Duration::from_secs(20));
        let read = HashMap::from([(a, 1)]);
        let readers = |id| read.get(&id).copied().unwrap_or(0);
        assert_eq!(
            retention.expired(start + Duration::from_secs(59), readers),
            []
        );
        // a's period has passed but it is read; b's has passed; c's has not.
        assert_eq!(
            retention.expired(start + Duration::from_secs(75), readers),
            [b]
        );
        assert_eq!(
            retention.expired(start + Duration::from_secs(90), readers),
            [c]
        );
        assert_eq!(
            retention.expired(start + Duration::from_secs(90), |_| 0),
            [a]
        );
        assert_eq!(
            retention.expired(start + Duration::from_secs(999), |_| 0),
            []
        );
    }

    #[test]
    fn room_is_made_from_the_oldest_unread_and_never_from_a_read_one() {
        let start = Instant::now();
        let [a, b] = ids(2)[..] else { unreachable!() };
        let mut retention = Retention::new(Duration::from_secs(3600));
        retention.ended(a, start);
        retention.ended(b, start);
        assert_eq!(retention.make_room(|id| usize::from(id == a)), Some(b));
        assert_eq!(retention.make_room(|_| 1), None);
        assert_eq!(retention.make_room(|_| 0), Some(a));
        assert_eq!(retention.make_room(|_| 0), None);
    }
}
