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

/// Watches `activity` until its connection should close, then asks `close`: GOAWAY, and
/// [`IDLE_CLOSE`] later, close. The connection aborts it when it ends first.
pub(super) async fn watch(
    activity: Arc<Activity>,
    first_stream_by: Instant,
    idle_timeout: Duration,
    close: Arc<Close>,
) {
    let mut evicted = pin!(activity.evicted().cancelled());
    let mut deadline = first_stream_by.min(Instant::now() + idle_timeout);
    loop {
        tokio::select! {
            () = &mut evicted => {
                tracing::debug!("a new connection took this idle connection's place: GOAWAY");
                break;
            }
            () = tokio::time::sleep_until(deadline) => {
                let now = Instant::now();
                deadline = match activity.idle_since() {
                    // No stream yet: one is due by `first_stream_by`.
                    Some(_) if !activity.opened() && now >= first_stream_by => {
                        tracing::debug!("no first stream within server.handshake_timeout: GOAWAY");
                        break;
                    }
                    Some(_) if !activity.opened() => first_stream_by.min(now + idle_timeout),
                    Some(since) if now >= since + idle_timeout => {
                        tracing::debug!("no open stream for server.idle_timeout: GOAWAY");
                        break;
                    }
                    Some(since) => since + idle_timeout,
                    // Busy: idleness that begins from now on is due no sooner than this.
                    None => now + idle_timeout,
                };
            }
        }
    }
    close.ask(Ask::Goaway);
    tokio::time::sleep(IDLE_CLOSE).await;
    close.ask(Ask::Close);
}
