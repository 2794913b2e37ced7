//! Retention and capacity, as a policy every store calls: which terminal executions leave,
//! and when. It holds the order executions ended in and decides; the store removes what it
//! is told to, with the execution's identities (id, idempotency key) in the same step.
//!
//! - A terminal execution leaves once `retention` has passed since it ended.
//! - When the store is full (executions or bytes), the one that ended first leaves early to
//!   make room.
//! - Readers do not hold an execution in the store: one still reading keeps its own hold on
//!   the events ([`Follower`]) and reaches the end of them, so a slow or stalled reader cannot
//!   pin a store's capacity.
//! - Non-terminal executions are not here at all: they never leave, and a store full of them
//!   refuses new work.
//!
//! [`Follower`]: crate::store::Follower

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::execution::ExecutionId;

/// The terminal executions of a store, in the order they ended.
#[derive(Debug, Default)]
pub(crate) struct Retention {
    ended: VecDeque<(ExecutionId, Instant)>,
    period: Duration,
    /// How many executions it has let go (expired or made room with).
    let_go: u64,
}

impl Retention {
    /// Executions expire `period` after they end.
    pub(crate) fn new(period: Duration) -> Self {
        Self {
            ended: VecDeque::new(),
            period,
            let_go: 0,
        }
    }

    /// `id` ended at `at`: from now on it may leave.
    pub(crate) fn ended(&mut self, id: ExecutionId, at: Instant) {
        self.ended.push_back((id, at));
    }

    /// `id`, the last to end, ended at `at` after all: a restored execution keeps the end
    /// time it had before the restart.
    pub(crate) fn reschedule(&mut self, id: ExecutionId, at: Instant) {
        if let Some(last) = self.ended.back_mut()
            && last.0 == id
        {
            last.1 = at;
        }
    }

    /// The executions whose retention has passed at `now`, forgotten here as they are
    /// returned; the store removes them.
    pub(crate) fn expired(&mut self, now: Instant) -> Vec<ExecutionId> {
        let mut gone = Vec::new();
        while let Some(&(id, ended)) = self.ended.front() {
            if now.saturating_duration_since(ended) < self.period {
                break;
            }
            self.ended.pop_front();
            gone.push(id);
        }
        self.let_go += gone.len() as u64;
        gone
    }

    /// Whether some execution's retention has passed at `now` (a look, under a read lock,
    /// before [`expired`](Self::expired) takes the write lock).
    pub(crate) fn any_expired(&self, now: Instant) -> bool {
        self.ended
            .front()
            .is_some_and(|&(_, ended)| now.saturating_duration_since(ended) >= self.period)
    }

    /// Puts the executions in the order they ended (replay restores them in the order a
    /// journal holds them, which after a compaction is not that order).
    pub(crate) fn sort(&mut self) {
        self.ended.make_contiguous().sort_by_key(|(_, at)| *at);
    }

    /// The terminal executions, in the order they ended.
    pub(crate) fn in_end_order(&self) -> impl Iterator<Item = ExecutionId> + '_ {
        self.ended.iter().map(|(id, _)| *id)
    }

    /// Terminal executions waiting to expire.
    pub(crate) fn len(&self) -> usize {
        self.ended.len()
    }

    /// The execution that ended first, forgotten here as it is returned, to make room for a
    /// new one; `None` when no execution has ended.
    pub(crate) fn make_room(&mut self) -> Option<ExecutionId> {
        let (id, _) = self.ended.pop_front()?;
        self.let_go += 1;
        Some(id)
    }

    /// How many executions [`expired`](Self::expired) and [`make_room`](Self::make_room)
    /// have let go: the store's evictions (a journal's replay of earlier ones aside).
    pub(crate) fn let_go(&self) -> u64 {
        self.let_go
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<ExecutionId> {
        (0..n).map(|_| ExecutionId::new()).collect()
    }

    #[test]
    fn expires_in_end_order_after_the_period() {
        let start = Instant::now();
        let [a, b, c] = ids(3)[..] else {
            unreachable!()
        };
        let mut retention = Retention::new(Duration::from_secs(60));
        retention.ended(a, start);
        retention.ended(b, start + Duration::from_secs(10));
        retention.ended(c, start + Duration::from_secs(20));
        assert_eq!(retention.expired(start + Duration::from_secs(59)), []);
        assert_eq!(retention.expired(start + Duration::from_secs(75)), [a, b]);
        assert_eq!(retention.expired(start + Duration::from_secs(90)), [c]);
        assert_eq!(retention.expired(start + Duration::from_secs(999)), []);
        assert_eq!(retention.let_go(), 3, "every execution it let go, counted");
        retention.ended(a, start);
        assert_eq!(retention.make_room(), Some(a));
        assert_eq!(retention.make_room(), None);
        assert_eq!(retention.let_go(), 4);
    }

    #[test]
    fn room_is_made_from_the_oldest() {
        let start = Instant::now();
        let [a, b] = ids(2)[..] else { unreachable!() };
        let mut retention = Retention::new(Duration::from_secs(3600));
        retention.ended(a, start);
        retention.ended(b, start);
        assert_eq!(retention.make_room(), Some(a));
        assert_eq!(retention.make_room(), Some(b));
        assert_eq!(retention.make_room(), None);
    }
}
