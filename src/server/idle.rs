//! When an idle connection is asked to close: a watchdog task per connection, apart from the
//! connection's own loop. The loop wakes for every frame a call reads or writes, and a
//! `select!` polls each of its futures at every wake, so the timer of idleness lives here;
//! the loop polls one flag ([`Close`]). Nor is the watchdog woken as calls come and go: it
//! looks when its time is up, and finds the connection busy (it looks again a whole timeout
//! later, before any idleness that begins meanwhile could be due), idle long enough (it
//! asks), or idle since some instant (it looks again when that is due). So a connection
//! idle since `t` is asked to close at `t + idle_timeout`, and calls pay nothing for it.
//!
//! A connection is asked to close (GOAWAY) when it opened no stream within the handshake's
//! time, when it has had no open stream for `server.idle_timeout`, or when a new connection
//! took its place ([`super::places`]). It has no call to finish, only HTTP/2's closing
//! exchange, which a peer that stopped reading never answers: [`IDLE_CLOSE`] later it is
//! closed outright.
//!
//! With `server.max_connection_age` a connection is also asked to go when it reaches its age
//! (each connection's own, within 10% of the setting, as gRPC's servers do, so that the
//! connections a scale-out should move do not all reconnect at once): GOAWAY, and the calls
//! it has open may go on for `server.max_connection_age_grace` before it is closed.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use tokio::time::Instant;

use super::places::Activity;

/// How long an idle connection asked to close (GOAWAY) may take to do so.
const IDLE_CLOSE: Duration = Duration::from_secs(1);

/// What the watchdog asks of the connection's loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ask {
    Nothing = 0,
    /// GOAWAY, letting what is open finish.
    Goaway = 1,
    /// Close now.
    Close = 2,
}

/// The watchdog's asks, read by the loop at the cost of one atomic load per wake.
#[derive(Debug, Default)]
pub(super) struct Close {
    ask: AtomicU8,
    waker: AtomicWaker,
}

impl Close {
    fn ask(&self, ask: Ask) {
        self.ask.fetch_max(ask as u8, Ordering::AcqRel);
        self.waker.wake();
    }

    /// Ready with an ask past `seen`.
    pub(super) fn poll_ask(&self, cx: &mut Context<'_>, seen: Ask) -> Poll<Ask> {
        self.waker.register(cx.waker());
        match self.ask.load(Ordering::Acquire) {
            2 if seen < Ask::Close => Poll::Ready(Ask::Close),
            1 if seen < Ask::Goaway => Poll::Ready(Ask::Goaway),
            _ => Poll::Pending,
        }
    }
}

/// When a connection must go by age: its jittered age, from when it was served, and the
/// grace after.
#[derive(Debug, Clone, Copy)]
pub(super) struct MaxAge {
    at: Instant,
    grace: Duration,
}

impl MaxAge {
    /// From `(age, grace)`, for a connection served from now on: the age drawn within 10%
    /// either side of `age`.
    pub(super) fn from_now((age, grace): (Duration, Duration)) -> Self {
        let draw = getrandom::u32().unwrap_or(u32::MAX / 2);
        Self {
            at: Instant::now() + jittered(age, draw),
            grace,
        }
    }
}

/// `age` moved by up to 10% either way, by `draw` (uniform over `u32`).
fn jittered(age: Duration, draw: u32) -> Duration {
    let fraction = f64::from(draw) / f64::from(u32::MAX);
    age.mul_f64(0.9 + 0.2 * fraction)
}

/// Watches `activity` until its connection should close (or, with `max_age`, until it is
/// old), then asks `close`: GOAWAY, and [`IDLE_CLOSE`] (or the age's grace) later, close. The
/// connection aborts it when it ends first.
pub(super) async fn watch(
    activity: Arc<Activity>,
    first_stream_by: Instant,
    idle_timeout: Duration,
    max_age: Option<MaxAge>,
    close: Arc<Close>,
) {
    let idle = until_idle(activity, first_stream_by, idle_timeout);
    let closing = match max_age {
        None => {
            idle.await;
            IDLE_CLOSE
        }
        Some(age) => tokio::select! {
            () = idle => IDLE_CLOSE,
            () = tokio::time::sleep_until(age.at) => {
                tracing::debug!("the connection reached server.max_connection_age: GOAWAY");
                age.grace
            }
        },
    };
    close.ask(Ask::Goaway);
    tokio::time::sleep(closing).await;
    close.ask(Ask::Close);
}

/// Resolves when the connection should close for idleness or its place was taken.
async fn until_idle(activity: Arc<Activity>, first_stream_by: Instant, idle_timeout: Duration) {
    let mut evicted = pin!(activity.evicted().cancelled());
    let mut deadline = first_stream_by.min(Instant::now() + idle_timeout);
    loop {
        tokio::select! {
            () = &mut evicted => {
                tracing::debug!("a new connection took this idle connection's place: GOAWAY");
                return;
            }
            () = tokio::time::sleep_until(deadline) => {
                let now = Instant::now();
                deadline = match activity.idle_since() {
                    // No stream yet: one is due by `first_stream_by`.
                    Some(_) if !activity.opened() && now >= first_stream_by => {
                        tracing::debug!("no first stream within server.handshake_timeout: GOAWAY");
                        return;
                    }
                    Some(_) if !activity.opened() => first_stream_by.min(now + idle_timeout),
                    Some(since) if now >= since + idle_timeout => {
                        tracing::debug!("no open stream for server.idle_timeout: GOAWAY");
                        return;
                    }
                    Some(since) => since + idle_timeout,
                    // Busy: idleness that begins from now on is due no sooner than this.
                    None => now + idle_timeout,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::jittered;

    #[test]
    fn an_age_is_jittered_within_ten_percent() {
        let age = Duration::from_secs(100);
        assert_eq!(jittered(age, 0), Duration::from_secs(90));
        assert_eq!(jittered(age, u32::MAX), Duration::from_secs(110));
        let middle = jittered(age, u32::MAX / 2);
        assert!(middle > Duration::from_millis(99_900) && middle < Duration::from_millis(100_100));
    }
}
