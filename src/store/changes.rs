//! The change signal of one execution: its store bumps a version on every append and wakes
//! whoever waits; readers then read the store from their cursor. It carries no data, so one
//! `Notify` and one atomic do: cheaper per append than `tokio::sync::watch`, which stores a
//! value under a lock and wakes through eight `Notify`s.
//!
//! It also counts its readers, explicitly: each [`Changes`] registers on creation and
//! deregisters on drop. Retention keeps an execution that someone still follows, so the count
//! must mean exactly that, not how many handles of the signal happen to exist.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

/// The writer's side, owned by the store.
#[derive(Debug, Default)]
pub struct ChangeSignal {
    version: AtomicU64,
    closed: AtomicBool,
    /// Closed because the store failed, not because the execution left it.
    failed: AtomicBool,
    readers: AtomicUsize,
    notify: Arc<Notify>,
}

/// The execution left the store: no change will come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the execution left the store")]
pub struct Closed;

/// A reader's side: waits for changes after the last one it marked seen.
#[derive(Debug)]
pub struct Changes {
    signal: Arc<ChangeSignal>,
    seen: u64,
    /// Made at the first wait and reused, so a reader allocates it once, not per wait.
    waiter: Option<Pin<Box<OwnedNotified>>>,
}

impl ChangeSignal {
    /// A signal with no readers.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records a change and wakes every waiting reader. With no reader, there is no one to
    /// wake (and `notify_waiters` takes a lock): a reader that subscribes later starts from
    /// this version and reads the store, so it misses nothing.
    pub fn publish(&self) {
        // SeqCst here and where a reader registers and looks: a publisher that sees no
        // reader, and a reader that sees the old version, cannot both happen.
        self.version.fetch_add(1, Ordering::SeqCst);
        if self.readers.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// No more changes will come (the execution left the store); wakes every reader.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// No more changes will come because the store failed: the execution stays at its last
    /// durable event until a restart ends it. Wakes every reader.
    pub fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        self.close();
    }

    /// A new reader, which has seen everything published so far.
    pub fn subscribe(self: &Arc<Self>) -> Changes {
        self.readers.fetch_add(1, Ordering::SeqCst);
        Changes {
            seen: self.version.load(Ordering::SeqCst),
            signal: self.clone(),
            waiter: None,
        }
    }

    /// How many readers follow the execution now.
    pub fn readers(&self) -> usize {
        self.readers.load(Ordering::Acquire)
    }
}

impl Changes {
    /// How many readers follow the execution now, this one included.
    pub fn readers(&self) -> usize {
        self.signal.readers()
    }

    /// Whether the signal closed because the store failed (see [`ChangeSignal::fail`]).
    pub fn failed(&self) -> bool {
        self.signal.failed.load(Ordering::Acquire)
    }

    /// Marks every change so far as seen: call before reading the store, so an append that
    /// lands after the read is still waited for.
    pub fn mark_seen(&mut self) {
        self.seen = self.signal.version.load(Ordering::SeqCst);
    }

    /// Waits for a change not yet marked seen, or `Closed`.
    pub async fn changed(&mut self) -> Result<(), Closed> {
        poll_fn(|cx| self.poll_changed(cx)).await
    }

    /// [`changed`](Self::changed) as a poll, for readers that are hand-written streams.
    pub fn poll_changed(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Closed>> {
        loop {
            let notify = &self.signal.notify;
            let waiter = self
                .waiter
                .get_or_insert_with(|| Box::pin(notify.clone().notified_owned()));
            // Register before looking, so a publish between the look and the wait wakes us.
            waiter.as_mut().enable();
            let version = self.signal.version.load(Ordering::SeqCst);
            if version != self.seen {
                self.seen = version;
                return Poll::Ready(Ok(()));
            }
            if self.signal.closed.load(Ordering::Acquire) {
                return Poll::Ready(Err(Closed));
            }
            if waiter.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // Woken (perhaps by a change already seen): wait afresh, in the same allocation.
            waiter.set(notify.clone().notified_owned());
        }
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        self.signal.readers.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_publish_wakes_a_waiting_reader_and_a_later_one_sees_it() {
        let signal = ChangeSignal::new();
        let mut early = signal.subscribe();
        let waiter = tokio::spawn(async move { early.changed().await });
        tokio::task::yield_now().await;
        signal.publish();
        let woken = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(matches!(woken, Ok(Ok(Ok(())))), "{woken:?}");

        let mut late = signal.subscribe();
        signal.publish();
        // Published before the wait began, after the subscription: not lost.
        assert_eq!(late.changed().await, Ok(()));
        assert_eq!(signal.readers(), 1);
        drop(late);
        assert_eq!(signal.readers(), 0);
        // Another handle of the signal is not a reader.
        let _handle = signal.clone();
        assert_eq!(signal.readers(), 0);
    }

    #[tokio::test]
    async fn marking_seen_skips_what_was_read_and_close_ends_the_wait() {
        let signal = ChangeSignal::new();
        let mut reader = signal.subscribe();
        signal.publish();
        reader.mark_seen();
        signal.close();
        assert_eq!(reader.changed().await, Err(Closed));
    }
}
