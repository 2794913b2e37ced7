//! The load generator: `concurrency` workers, each with its own session (client) and its own
//! histograms, running calls in a closed loop (the next call starts when the last one ends) or
//! an open loop (calls start on a fixed schedule, whatever the latency).
//!
//! In the open loop, latency is measured from each call's *intended* start, so a server that
//! stalls is charged for every call it delayed (no coordinated omission). The schedule is kept
//! by a plain thread sleeping to absolute times, since tokio's timer only has millisecond
//! ticks: it hands out one semaphore permit per arrival, and an idle worker takes it.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinSet;

use super::args::Stop;
use super::histogram::Histogram;

/// What one call saw, timed by the session.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// When the first output event arrived.
    pub first_output: Option<Instant>,
    /// When the terminal event arrived (the end of the call when unset).
    pub end: Option<Instant>,
    /// Events received.
    pub events: u64,
    /// Why it failed, as an error key (`grpc:Unavailable`, `execution.failed:...`).
    pub failure: Option<String>,
}

/// One worker's connection to the target.
pub trait Session: Send + 'static {
    /// Runs one call to its end.
    fn call(&mut self) -> impl Future<Output = Observed> + Send;
}

/// Makes a session per worker.
pub trait Caller {
    /// The session type.
    type Session: Session;
    /// The session of worker `worker` (0-based).
    fn session(&self, worker: usize) -> Self::Session;
}

/// How hard and how long.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Workers.
    pub concurrency: usize,
    /// When to stop.
    pub stop: Stop,
    /// Open-loop arrivals per second.
    pub rate: Option<f64>,
    /// Per-call limit.
    pub timeout: Duration,
}

/// Everything counted, merged over workers.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Calls that ended (well or not).
    pub executions: u64,
    /// Calls that ended with a completed execution.
    pub succeeded: u64,
    /// Events received.
    pub events: u64,
    /// Time to the first output event, from the (intended) start.
    pub ttfo: Histogram,
    /// Time to the end of the call, from the (intended) start.
    pub ttc: Histogram,
    /// Open loop: how late calls started against the schedule.
    pub start_lag: Histogram,
    /// Failures by key.
    pub errors: BTreeMap<String, u64>,
    /// Wall time from the first start to the last end.
    pub elapsed: Duration,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.executions += other.executions;
        self.succeeded += other.succeeded;
        self.events += other.events;
        self.ttfo.merge(&other.ttfo);
        self.ttc.merge(&other.ttc);
        self.start_lag.merge(&other.start_lag);
        for (key, n) in other.errors {
            *self.errors.entry(key).or_default() += n;
        }
    }

    fn record(&mut self, start: Instant, observed: Observed, end: Instant) {
        self.executions += 1;
        self.events += observed.events;
        if let Some(first) = observed.first_output {
            self.ttfo.record(first.saturating_duration_since(start));
        }
        match observed.failure {
            None => {
                self.succeeded += 1;
                self.ttc.record(end.saturating_duration_since(start));
            }
            Some(key) => *self.errors.entry(key).or_default() += 1,
        }
    }
}

/// Live counters for the progress line.
#[derive(Default)]
struct Live {
    executions: AtomicU64,
    events: AtomicU64,
    errors: AtomicU64,
}

/// Where calls come from: a closed loop, or an open-loop schedule.
struct Schedule {
    start: Instant,
    stop: Stop,
    claimed: AtomicU64,
    open: Option<Open>,
}

struct Open {
    rate: f64,
    total: u64,
    arrivals: Arc<Semaphore>,
    /// Arrivals still unstarted this long after the last one was due are dropped as
    /// `client:not_started`, so an overloaded target cannot stretch the run without end.
    give_up: Instant,
}

/// What a worker does next.
enum Next {
    Call(Instant),
    Drop,
    Done,
}

impl Schedule {
    async fn next(&self) -> Next {
        let Some(open) = &self.open else {
            let n = self.claimed.fetch_add(1, Ordering::Relaxed);
            let counted_out = self.stop.executions.is_some_and(|limit| n >= limit);
            let timed_out = self
                .stop
                .duration
                .is_some_and(|d| self.start.elapsed() >= d);
            return if counted_out || timed_out {
                Next::Done
            } else {
                Next::Call(Instant::now())
            };
        };
        // A permit is an arrival that is due; claiming after it keeps `n` due too.
        match open.arrivals.acquire().await {
            Ok(permit) => permit.forget(),
            Err(_) => return Next::Done,
        }
        let n = self.claimed.fetch_add(1, Ordering::Relaxed);
        if n + 1 >= open.total {
            // The last arrival: release the workers still waiting for one.
            open.arrivals.close();
        }
        if n >= open.total {
            return Next::Done;
        }
        if Instant::now() > open.give_up {
            return Next::Drop;
        }
        Next::Call(self.start + Duration::from_secs_f64(n as f64 / open.rate))
    }
}

/// Runs the load and returns the merged tally.
pub async fn run<C: Caller>(caller: &C, load: Load) -> Tally {
    let start = Instant::now();
    let open = load.rate.map(|rate| {
        let by_time = load
            .stop
            .duration
            .map_or(u64::MAX, |d| ((d.as_secs_f64() * rate) as u64).max(1));
        let total = by_time.min(load.stop.executions.unwrap_or(u64::MAX));
        let last_due = Duration::from_secs_f64(total as f64 / rate);
        Open {
            rate,
            total,
            arrivals: Arc::new(Semaphore::new(0)),
            give_up: start + last_due + load.timeout,
        }
    });
    let dispatcher = open.as_ref().map(|o| {
        let (arrivals, rate, total) = (o.arrivals.clone(), o.rate, o.total);
        std::thread::spawn(move || dispatch(start, rate, total, &arrivals))
    });
    let schedule = Arc::new(Schedule {
        start,
        stop: load.stop,
        claimed: AtomicU64::new(0),
        open,
    });
    let live = Arc::new(Live::default());
    let (done, progress) = progress(live.clone(), start);
    let mut workers = JoinSet::new();
    for worker in 0..load.concurrency {
        let session = caller.session(worker);
        workers.spawn(work(session, schedule.clone(), live.clone(), load.timeout));
    }
    let mut tally = Tally::default();
    while let Some(joined) = workers.join_next().await {
        match joined {
            Ok(part) => tally.add(part),
            Err(e) => {
                *tally
                    .errors
                    .entry(format!("client:worker_{e}"))
                    .or_default() += 1
            }
        }
    }
    tally.elapsed = start.elapsed();
    let _ = done.send(());
    if let Some(progress) = progress {
        let _ = progress.await;
    }
    if let Some(dispatcher) = dispatcher {
        // Every arrival was handed out before the last worker could finish.
        let _ = tokio::task::spawn_blocking(move || dispatcher.join()).await;
    }
    tally
}

async fn work<S: Session>(
    mut session: S,
    schedule: Arc<Schedule>,
    live: Arc<Live>,
    timeout: Duration,
) -> Tally {
    let mut tally = Tally::default();
    loop {
        let intended = match schedule.next().await {
            Next::Call(at) => at,
            Next::Drop => {
                *tally.errors.entry("client:not_started".into()).or_default() += 1;
                tally.executions += 1;
                continue;
            }
            Next::Done => break,
        };
        let sent = Instant::now();
        if schedule.open.is_some() {
            tally
                .start_lag
                .record(sent.saturating_duration_since(intended));
        }
        let observed = tokio::time::timeout(timeout, session.call())
            .await
            .unwrap_or_else(|_| Observed {
                failure: Some("client:timeout".into()),
                ..Observed::default()
            });
        let end = observed.end.unwrap_or_else(Instant::now);
        live.executions.fetch_add(1, Ordering::Relaxed);
        live.events.fetch_add(observed.events, Ordering::Relaxed);
        if observed.failure.is_some() {
            live.errors.fetch_add(1, Ordering::Relaxed);
        }
        tally.record(intended, observed, end);
    }
    tally
}

/// Sleeps of the open-loop clock are at least this long; every arrival due by the time it
/// wakes is released at once. Waking a tokio worker per arrival cost the client 3-5x its
/// closed-loop CPU per call at 10k/s; batching bounds wake-ups at 10k/s while adding at most
/// this much (plus the OS's timer slack) to the start lag, which the report shows.
const GRAIN: Duration = Duration::from_micros(100);

/// The open-loop clock: one permit per arrival, never before its absolute due time.
fn dispatch(start: Instant, rate: f64, total: u64, arrivals: &Semaphore) {
    let due = |n: u64| start + Duration::from_secs_f64(n as f64 / rate);
    let mut next = 0;
    while next < total {
        if arrivals.is_closed() {
            return;
        }
        let now = Instant::now();
        let wait = due(next).saturating_duration_since(now);
        if !wait.is_zero() {
            std::thread::sleep(wait.max(GRAIN));
        }
        let now = Instant::now();
        let mut ready = 0;
        while next < total && due(next) <= now {
            next += 1;
            ready += 1;
        }
        arrivals.add_permits(ready);
    }
}

/// A progress line on stderr, rewritten in place, when stderr is a terminal (a log file or
/// a pipe gets nothing). Ends when `done` fires.
fn progress(
    live: Arc<Live>,
    start: Instant,
) -> (oneshot::Sender<()>, Option<tokio::task::JoinHandle<()>>) {
    let (done, mut finished) = oneshot::channel();
    if !std::io::stderr().is_terminal() {
        return (done, None);
    }
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut stopping = false;
        while !stopping {
            tokio::select! {
                _ = tick.tick() => {}
                _ = &mut finished => stopping = true,
            }
            let secs = start.elapsed().as_secs_f64();
            let executions = live.executions.load(Ordering::Relaxed);
            let line = format!(
                "\r{secs:7.1}s  {executions:>10} executions  {:>9.0}/s  {:>11} events  {:>6} errors",
                executions as f64 / secs.max(1e-9),
                live.events.load(Ordering::Relaxed),
                live.errors.load(Ordering::Relaxed),
            );
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(line.as_bytes());
            if stopping {
                let _ = err.write_all(b"\n");
            }
            let _ = err.flush();
        }
    });
    (done, Some(task))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session that takes `delay` and reports 3 events, failing every `fail_every`th call.
    struct Fake {
        delay: Duration,
        calls: u64,
        fail_every: u64,
    }

    impl Session for Fake {
        async fn call(&mut self) -> Observed {
            self.calls += 1;
            tokio::time::sleep(self.delay).await;
            let failure = self
                .calls
                .is_multiple_of(self.fail_every)
                .then(|| "fake:boom".to_owned());
            Observed {
                first_output: Some(Instant::now()),
                end: None,
                events: 3,
                failure,
            }
        }
    }

    struct FakeCaller(Duration);

    impl Caller for FakeCaller {
        type Session = Fake;
        fn session(&self, _worker: usize) -> Fake {
            Fake {
                delay: self.0,
                calls: 0,
                fail_every: 5,
            }
        }
    }

    fn load(stop: Stop, rate: Option<f64>) -> Load {
        Load {
            concurrency: 4,
            stop,
            rate,
            timeout: Duration::from_secs(5),
        }
    }

    #[tokio::test]
    async fn closed_loop_runs_exactly_the_count() {
        let stop = Stop {
            duration: None,
            executions: Some(40),
        };
        let t = run(&FakeCaller(Duration::from_millis(1)), load(stop, None)).await;
        assert_eq!(t.executions, 40);
        assert_eq!(t.succeeded + t.errors.values().sum::<u64>(), 40);
        assert_eq!(t.errors.get("fake:boom"), Some(&8), "{:?}", t.errors);
        assert_eq!(t.events, 120);
        assert_eq!(t.ttc.count(), t.succeeded);
        assert_eq!(t.ttfo.count(), 40);
        assert_eq!(t.start_lag.count(), 0, "no schedule in a closed loop");
    }

    #[tokio::test]
    async fn closed_loop_stops_on_time() {
        let stop = Stop {
            duration: Some(Duration::from_millis(100)),
            executions: None,
        };
        let t = run(&FakeCaller(Duration::from_millis(5)), load(stop, None)).await;
        assert!(t.executions > 4);
        assert!(t.elapsed < Duration::from_secs(2), "{:?}", t.elapsed);
    }

    #[tokio::test]
    async fn open_loop_keeps_the_schedule_and_counts_from_it() {
        let stop = Stop {
            duration: Some(Duration::from_millis(200)),
            executions: None,
        };
        let t = run(
            &FakeCaller(Duration::from_millis(1)),
            load(stop, Some(200.0)),
        )
        .await;
        assert_eq!(t.executions, 40, "200/s for 0.2 s");
        assert_eq!(t.start_lag.count(), 40);
        // The last arrival is due at 195 ms; the run cannot end long before that.
        assert!(t.elapsed >= Duration::from_millis(190), "{:?}", t.elapsed);
    }

    #[tokio::test]
    async fn a_slow_target_is_charged_for_the_queue_it_causes() {
        // 4 workers, 20 ms per call, asked for 1000/s: arrivals pile up and their latency,
        // measured from when each was due, grows far past the 20 ms service time.
        let stop = Stop {
            duration: None,
            executions: Some(40),
        };
        let t = run(
            &FakeCaller(Duration::from_millis(20)),
            load(stop, Some(1000.0)),
        )
        .await;
        assert_eq!(t.executions, 40);
        assert!(
            t.ttc.quantile(1.0) >= 150_000_000,
            "{}",
            t.ttc.quantile(1.0)
        );
    }

    #[tokio::test]
    async fn open_loop_with_a_count_stops_at_the_count() {
        let stop = Stop {
            duration: Some(Duration::from_secs(60)),
            executions: Some(7),
        };
        let t = run(&FakeCaller(Duration::ZERO), load(stop, Some(1000.0))).await;
        assert_eq!(t.executions, 7);
    }
}
