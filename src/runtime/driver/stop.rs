//! What stops a driver's waits: the caller's cancellation, through [`DriverHandle`], and the
//! attempt's stop time. [`Race`] runs one piece of work against both.
//!
//! The race is lazy: while the work is ready it costs an atomic load and a clock read per
//! poll, and the cancellation waiter and the timer are registered only when the work is
//! about to wait. A provider that streams without waiting, or an admission granted at once,
//! never touches tokio's timer wheel, where each registration can wake the time driver's
//! thread with a syscall (two per execution, before: about a third of the runtime server's
//! syscalls at concurrency 64).

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::{Notify, futures::OwnedNotified};
use tokio::time::{Instant, Sleep, sleep_until};

use crate::execution::ErrorCode;

/// Lets the runtime cancel a running driver, with the caller's reason.
#[derive(Debug, Default)]
pub(crate) struct DriverHandle {
    cancelled: AtomicBool,
    wake: Arc<Notify>,
    reason: Mutex<Option<String>>,
}

impl DriverHandle {
    /// Asks the driver to end the execution as cancelled. The first reason given wins.
    pub(crate) fn cancel(&self, reason: Option<String>) {
        if let Ok(mut slot) = self.reason.lock()
            && slot.is_none()
        {
            *slot = reason;
        }
        // The flag first: a waiter created after the wake-up below still sees it.
        self.cancelled.store(true, Ordering::Release);
        self.wake.notify_waiters();
    }

    /// Whether the execution was cancelled.
    pub(super) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    pub(super) fn reason(&self) -> Option<String> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }
}

/// Runs work against cancellation (checked first) and a stop time (then), in that order of
/// precedence, so a cancelled execution reports `cancelled` even past its stop time. It holds
/// its own handle, so the driver stays free to change itself while a race is under way.
pub(super) struct Race {
    handle: Arc<DriverHandle>,
    at: Instant,
    code: ErrorCode,
    /// Registered on the first wait, then kept (and moved by `reset`) for the race's life.
    timer: Option<Pin<Box<Sleep>>>,
    waiter: Option<Pin<Box<OwnedNotified>>>,
}

impl Race {
    /// A race that ends with `code` once `at` has passed.
    pub(super) fn new(handle: &Arc<DriverHandle>, at: Instant, code: ErrorCode) -> Self {
        Self {
            handle: handle.clone(),
            at,
            code,
            timer: None,
            waiter: None,
        }
    }

    /// Moves the stop time and the code it ends with.
    pub(super) fn reset(&mut self, at: Instant, code: ErrorCode) {
        self.at = at;
        self.code = code;
        if let Some(timer) = &mut self.timer {
            timer.as_mut().reset(at);
        }
    }

    /// The code of what has stopped the race already, if anything has.
    pub(super) fn check(&self) -> Result<(), ErrorCode> {
        if self.handle.is_cancelled() {
            return Err(ErrorCode::Cancelled);
        }
        if Instant::now() >= self.at {
            return Err(self.code);
        }
        Ok(())
    }

    /// `work`'s output, or the code of what stopped it first.
    pub(super) async fn run<F: Future>(&mut self, work: F) -> Result<F::Output, ErrorCode> {
        let mut work = pin!(work);
        poll_fn(|cx| self.poll(cx, work.as_mut())).await
    }

    fn poll<F: Future>(
        &mut self,
        cx: &mut Context<'_>,
        work: Pin<&mut F>,
    ) -> Poll<Result<F::Output, ErrorCode>> {
        if let Err(code) = self.check() {
            return Poll::Ready(Err(code));
        }
        if let Poll::Ready(output) = work.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        // The work waits: make sure cancellation and the stop time wake this task. The
        // waiter exists before the flag is read again, so a cancellation between the first
        // read and here is seen one way or the other.
        let handle = &self.handle;
        let waiter = self
            .waiter
            .get_or_insert_with(|| Box::pin(handle.wake.clone().notified_owned()));
        if handle.is_cancelled() || waiter.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(ErrorCode::Cancelled));
        }
        let at = self.at;
        let timer = self.timer.get_or_insert_with(|| Box::pin(sleep_until(at)));
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(self.code));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ready_work_wins_and_registers_nothing() {
        let handle = Arc::new(DriverHandle::default());
        let mut race = Race::new(
            &handle,
            Instant::now() + Duration::from_secs(1),
            ErrorCode::RetryBudgetExhausted,
        );
        assert_eq!(race.run(async { 7 }).await, Ok(7));
        assert!(race.timer.is_none() && race.waiter.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn the_stop_time_ends_waiting_work_with_its_code_and_reset_moves_it() {
        let handle = Arc::new(DriverHandle::default());
        let start = Instant::now();
        let mut race = Race::new(
            &handle,
            start + Duration::from_secs(1),
            ErrorCode::RetryBudgetExhausted,
        );
        let never = std::future::pending::<()>;
        assert_eq!(
            race.run(never()).await,
            Err(ErrorCode::RetryBudgetExhausted)
        );
        assert_eq!(Instant::now(), start + Duration::from_secs(1));

        race.reset(start + Duration::from_secs(5), ErrorCode::DeadlineExceeded);
        assert_eq!(race.run(never()).await, Err(ErrorCode::DeadlineExceeded));
        assert_eq!(Instant::now(), start + Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_wakes_waiting_work_and_beats_a_passed_stop_time() {
        let handle = Arc::new(DriverHandle::default());
        let canceller = handle.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            canceller.cancel(Some("enough".into()));
            canceller.cancel(Some("second reason".into()));
        });
        let mut race = Race::new(
            &handle,
            Instant::now() + Duration::from_secs(60),
            ErrorCode::DeadlineExceeded,
        );
        assert_eq!(
            race.run(std::future::pending::<()>()).await,
            Err(ErrorCode::Cancelled)
        );
        assert_eq!(handle.reason().as_deref(), Some("enough"));

        // Cancelled and past its stop time: cancellation wins, even over ready work.
        let mut late = Race::new(&handle, Instant::now(), ErrorCode::DeadlineExceeded);
        assert_eq!(late.run(async {}).await, Err(ErrorCode::Cancelled));
    }
}
