//! Retention on time: a task asks the store, every so often, to let go the terminal
//! executions whose retention has passed, so an idle runtime gives back its memory (and a
//! durable store its disk) too, not only when new work arrives. It holds the runtime weakly
//! and ends with it, or when shutdown begins.

use std::sync::Weak;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Inner;

/// How often the store is asked: an execution leaves within a quarter of its retention past
/// it, and never more than a second late; never more often than ten times a second.
pub(super) fn period(retention: Duration) -> Duration {
    (retention / 4).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// Asks the store to expire what is due every `period`, until `stop` or the runtime is gone.
pub(super) async fn run(runtime: Weak<Inner>, period: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(inner) = runtime.upgrade() else {
            return;
        };
        let expired = inner.deps.store.expire();
        if expired > 0 {
            tracing::debug!(expired, "retention let executions go");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_follows_the_retention_within_bounds() {
        assert_eq!(period(Duration::from_secs(2)), Duration::from_millis(500));
        assert_eq!(period(Duration::from_secs(600)), Duration::from_secs(1));
        assert_eq!(
            period(Duration::from_millis(100)),
            Duration::from_millis(100)
        );
    }
}
