//! Places for client connections: at most `server.max_connections` at once. A connection
//! with no open stream holds a place it is not using, so at the limit a new connection takes
//! the place of the one idle longest, which is asked to close (GOAWAY), rather than being
//! refused: connections left idle, or opened and never used, cannot lock callers out. Only
//! when every connection has a call open is a new one refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Every connection's place.
#[derive(Debug)]
pub(super) struct Places {
    max: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    /// The connections that hold a place (not those asked to give theirs up).
    held: HashMap<u64, Arc<Activity>>,
}

/// What one connection is doing, as its place and its streams see it.
#[derive(Debug)]
pub(super) struct Activity {
    /// Streams open now.
    streams: AtomicUsize,
    /// Whether it has opened a stream yet.
    opened: AtomicBool,
    /// Since when it has had no open stream: nanoseconds after `epoch`.
    idle_since: AtomicU64,
    epoch: Instant,
    /// Cancelled when a new connection took its place.
    evicted: CancellationToken,
}

impl Activity {
    fn new() -> Self {
        Self {
            streams: AtomicUsize::new(0),
            opened: AtomicBool::new(false),
            idle_since: AtomicU64::new(0),
            epoch: Instant::now(),
            evicted: CancellationToken::new(),
        }
    }

    /// Counts a stream open until the guard drops.
    pub(super) fn stream(self: &Arc<Self>) -> OpenStream {
        self.streams.fetch_add(1, Ordering::AcqRel);
        self.opened.store(true, Ordering::Relaxed);
        OpenStream(self.clone())
    }

    /// Since when it has had no open stream; `None` while one is open.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        (self.streams.load(Ordering::Acquire) == 0)
            .then(|| self.epoch + Duration::from_nanos(self.idle_since.load(Ordering::Acquire)))
    }

    /// Whether it has opened a stream yet.
    pub(super) fn opened(&self) -> bool {
        self.opened.load(Ordering::Relaxed)
    }

    /// Cancelled when a new connection took its place.
    pub(super) fn evicted(&self) -> &CancellationToken {
        &self.evicted
    }
}

/// A stream of a connection, open until dropped.
#[derive(Debug)]
pub(super) struct OpenStream(Arc<Activity>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        if self.0.streams.fetch_sub(1, Ordering::AcqRel) == 1 {
            let since = self.0.epoch.elapsed().as_nanos();
            self.0
                .idle_since
                .store(u64::try_from(since).unwrap_or(u64::MAX), Ordering::Release);
        }
    }
}

/// A connection's place, given back when it drops.
#[derive(Debug)]
pub(super) struct Place {
    places: Arc<Places>,
    key: u64,
    activity: Arc<Activity>,
}

impl Place {
    pub(super) fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        lock(&self.places.inner).held.remove(&self.key);
    }
}

impl Places {
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// A place for a new connection: a free one, or the place of the connection idle
    /// longest, which is asked to close. `None` when every connection has a stream open.
    pub(super) fn take(self: &Arc<Self>) -> Option<Place> {
        let mut inner = lock(&self.inner);
        if inner.held.len() >= self.max {
            let (&key, _) = inner
                .held
                .iter()
                .filter_map(|(key, activity)| Some((key, activity.idle_since()?)))
                .min_by_key(|(_, since)| *since)?;
            if let Some(idle) = inner.held.remove(&key) {
                idle.evicted.cancel();
            }
        }
        let key = inner.next;
        inner.next += 1;
        let activity = Arc::new(Activity::new());
        inner.held.insert(key, activity.clone());
        Some(Place {
            places: self.clone(),
            key,
            activity,
        })
    }
}

/// The lock, whether or not a holder panicked: what it guards is consistent after any step.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn at_the_limit_the_longest_idle_connection_gives_up_its_place() {
        let places = Places::new(2);
        let first = places.take().unwrap();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let second = places.take().unwrap();
        // Both idle: the one idle longest goes.
        let third = places.take().unwrap();
        assert!(first.activity().evicted().is_cancelled());
        assert!(!second.activity().evicted().is_cancelled());
        // A connection with a stream open keeps its place; with none idle, refused.
        let _call = second.activity().stream();
        let _busy = third.activity().stream();
        assert!(places.take().is_none());
        // Its stream over, it is idle again, and the first to go.
        drop(_call);
        assert!(second.activity().idle_since().is_some());
        let fourth = places.take().unwrap();
        assert!(second.activity().evicted().is_cancelled());
        // An evicted connection's end frees nothing twice.
        let _busy_too = fourth.activity().stream();
        drop((first, second));
        assert!(places.take().is_none());
    }
}
