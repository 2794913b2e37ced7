//! Provider health: what the attempts on a target (`provider/model`) say of it, and whether
//! routing should skip it for a while. Each target has a breaker:
//!
//! - **closed**: attempts go to it. Its outcomes are counted: `consecutive_failures` in a
//!   row, or a `failure_rate` over the current `window` (once it holds `min_requests`),
//!   eject it; so does a `Retry-After` (until then, at most `max_retry_after`) and a 403 (this
//!   target is refused), and a refused key (401) ejects every target of the provider, since
//!   the key is bad for all of them.
//! - **open until an instant**: plans skip it, with the reason and that instant as evidence.
//!   The ejection lasts `ejection`, doubled after each failed probe, at most `max_ejection`.
//! - **half-open** once the instant passes: plans keep it again, and the first `probes`
//!   attempts that reach it probe it ([`Health::admit`], at the attempt, so a probe is never
//!   held by an execution that never gets to the target); one that reaches it while the
//!   probes are taken is refused at once and routing moves on, and a plan made then skips it.
//!   A probe that succeeds closes the breaker (and forgets the doubling); one that fails opens
//!   it again.
//!
//! Only what says something of the target counts: retryable failures, unknown outcomes
//! (timeouts, broken streams) and refused keys. A rejection of this request (context length,
//! content filter, a 400), a full admission queue, a cancellation or the deadline count
//! neither way. Health is this process's own: with replicas, each keeps its own.
//!
//! A plan reads health in [`with_health`]: a pure function of the plan and what each breaker
//! says when it is asked, so the same config, request and health give the same plan.

mod plan;
mod signal;

pub use plan::with_health;
use signal::Signal;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::config::{HealthConfig, ProviderConfig};
use crate::execution::{AttemptError, Ejection, ExecutionId, NameMap};

/// The health of one provider's targets.
#[derive(Debug)]
pub struct Health {
    provider: Arc<str>,
    /// `None` with `health = "off"`: nothing is counted or ejected.
    config: Option<HealthConfig>,
    breakers: NameMap<Arc<Breaker>>,
    /// Breakers not closed: while none is, planning asks no breaker.
    ejected: Arc<AtomicU32>,
}

#[derive(Debug)]
struct Breaker {
    model: Arc<str>,
    state: Mutex<State>,
    /// Times it opened since start-up.
    ejections: AtomicU64,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Why it opened last.
    reason: String,
    consecutive: u32,
    window_start: Instant,
    requests: u32,
    failures: u32,
    /// Ejections since the last success: each doubles the next one's length.
    strikes: u32,
    /// Bumped at each change of phase, so a probe of an earlier phase changes nothing.
    epoch: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    /// Ejected until `until`; `wall` is that instant on the wall clock, taken once when the
    /// ejection began, so every plan's evidence names one instant for one ejection.
    Open {
        until: Instant,
        wall: SystemTime,
    },
    HalfOpen {
        probing: u32,
    },
}

/// What a breaker says to a plan being made.
#[derive(Debug)]
pub enum Verdict {
    /// Route to it.
    Healthy,
    /// Skip it.
    Ejected(Ejection),
}

/// One attempt's right to probe a half-open target: given back when dropped, unless the
/// probe's outcome has decided the breaker first.
#[derive(Debug)]
pub struct Probe {
    breaker: Arc<Breaker>,
    epoch: u64,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let mut state = self.breaker.lock();
        let current = state.epoch == self.epoch;
        if let Phase::HalfOpen { probing } = &mut state.phase
            && current
        {
            *probing = probing.saturating_sub(1);
        }
    }
}

/// A target's health as `GetRuntimeMetadata` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetHealth {
    /// Where its breaker stands.
    pub state: HealthState,
    /// Why it opened last (empty if it never did).
    pub reason: String,
    /// While open: when it may be probed.
    pub until: Option<SystemTime>,
    /// Failures in a row now.
    pub consecutive_failures: u32,
    /// Times it was ejected since start-up.
    pub ejections: u64,
}

/// Where a target's breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    /// The provider's health is off.
    Off,
    /// Routed to.
    Closed,
    /// Skipped until its ejection ends.
    Open,
    /// Probed by a bounded number of attempts.
    HalfOpen,
}

impl HealthState {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

impl Breaker {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding it leaves a state that is still whole.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Health {
    /// The health of `provider`'s targets, all closed.
    pub fn new(provider: &ProviderConfig) -> Self {
        let now = Instant::now();
        let breakers = provider
            .models
            .iter()
            .filter(|_| provider.health.is_some())
            .map(|m| {
                let breaker = Breaker {
                    model: m.name.clone(),
                    state: Mutex::new(State {
                        phase: Phase::Closed,
                        reason: String::new(),
                        consecutive: 0,
                        window_start: now,
                        requests: 0,
                        failures: 0,
                        strikes: 0,
                        epoch: 0,
                    }),
                    ejections: AtomicU64::new(0),
                };
                (m.name.clone(), Arc::new(breaker))
            })
            .collect();
        Self {
            provider: provider.name.clone(),
            config: provider.health.clone(),
            breakers,
            ejected: Arc::new(AtomicU32::new(0)),
        }
    }

    /// What `model`'s breaker says to a plan made at `now`: skip it while it is ejected, or
    /// while it is half-open with every probe taken.
    pub fn check(&self, model: &str, now: Instant) -> Verdict {
        if self.ejected.load(Ordering::Acquire) == 0 {
            return Verdict::Healthy;
        }
        let (Some(config), Some(breaker)) = (&self.config, self.breakers.get(model)) else {
            return Verdict::Healthy;
        };
        let state = self.lock_now(breaker, now);
        match state.phase {
            Phase::Open { wall, .. } => Verdict::Ejected(Ejection {
                reason: state.reason.clone(),
                until: Some(wall),
            }),
            Phase::HalfOpen { probing } if probing >= config.probes => {
                Verdict::Ejected(probing_ejection(&state))
            }
            Phase::Closed | Phase::HalfOpen { .. } => Verdict::Healthy,
        }
    }

    /// Whether an attempt on `model` may go ahead at `now`: at once while its breaker is
    /// closed; as one of its probes (`Some`, held until the attempt's outcome is counted)
    /// while it is half-open with a probe free; `Err` while it is ejected (again, since the
    /// plan was made) or every probe is taken.
    pub fn admit(&self, model: &str, now: Instant) -> Result<Option<Probe>, Ejection> {
        if self.ejected.load(Ordering::Acquire) == 0 {
            return Ok(None);
        }
        let (Some(config), Some(breaker)) = (&self.config, self.breakers.get(model)) else {
            return Ok(None);
        };
        let mut state = self.lock_now(breaker, now);
        match state.phase {
            Phase::Closed => Ok(None),
            Phase::Open { wall, .. } => Err(Ejection {
                reason: state.reason.clone(),
                until: Some(wall),
            }),
            Phase::HalfOpen { probing } if probing < config.probes => {
                state.phase = Phase::HalfOpen {
                    probing: probing + 1,
                };
                Ok(Some(Probe {
                    breaker: breaker.clone(),
                    epoch: state.epoch,
                }))
            }
            Phase::HalfOpen { .. } => Err(probing_ejection(&state)),
        }
    }

    /// `breaker`'s state as of `now`: an ejection that has ended turns half-open.
    fn lock_now<'b>(&self, breaker: &'b Breaker, now: Instant) -> MutexGuard<'b, State> {
        let mut state = breaker.lock();
        if let Phase::Open { until, .. } = state.phase
            && now >= until
        {
            state.phase = Phase::HalfOpen { probing: 0 };
            state.epoch += 1;
            tracing::info!(provider = %self.provider, model = %breaker.model, reason = %state.reason, "target half-open: its ejection ended; the next attempt probes it");
        }
        state
    }

    /// An attempt on `model` succeeded.
    pub fn succeeded(&self, model: &str, now: Instant) {
        let (Some(config), Some(breaker)) = (&self.config, self.breakers.get(model)) else {
            return;
        };
        let mut state = breaker.lock();
        state.roll(config, now);
        state.requests = state.requests.saturating_add(1);
        state.consecutive = 0;
        // An attempt that began before an ejection may succeed during it: that lifts
        // nothing, and the next failed probe still ejects for longer.
        if !matches!(state.phase, Phase::Open { .. }) {
            state.strikes = 0;
        }
        if let Phase::HalfOpen { .. } = state.phase {
            state.phase = Phase::Closed;
            state.epoch += 1;
            self.ejected.fetch_sub(1, Ordering::AcqRel);
            tracing::info!(provider = %self.provider, model = %breaker.model, "target closed: a probe succeeded");
        }
    }

    /// An attempt of execution `by` on `model` failed with `error`.
    pub fn failed(&self, model: &str, error: &AttemptError, now: Instant, by: ExecutionId) {
        let (Some(config), Some(signal)) = (&self.config, Signal::of(error)) else {
            return;
        };
        let why = error.code.as_str();
        match signal {
            Signal::BadKey => {
                let reason = format!("{why}: the provider refused the key, for every model");
                for breaker in self.breakers.values() {
                    self.open(breaker, config, now, None, &reason, by);
                }
            }
            Signal::Refused => {
                if let Some(breaker) = self.breakers.get(model) {
                    let reason = format!("{why}: the provider refuses this model");
                    self.open(breaker, config, now, None, &reason, by);
                }
            }
            Signal::Until(wait) => {
                if let Some(breaker) = self.breakers.get(model) {
                    let mut state = breaker.lock();
                    state.count_failure(config, now);
                    drop(state);
                    let wait = wait.min(config.max_retry_after);
                    let reason = format!(
                        "{why}: the provider asked for {} without requests",
                        humantime::format_duration(wait)
                    );
                    self.open(breaker, config, now, Some(wait), &reason, by);
                }
            }
            Signal::Failure => {
                let Some(breaker) = self.breakers.get(model) else {
                    return;
                };
                let mut state = breaker.lock();
                state.count_failure(config, now);
                let reason = match state.phase {
                    Phase::HalfOpen { .. } => format!("the probe failed ({why})"),
                    Phase::Open { .. } => return,
                    Phase::Closed if state.consecutive >= config.consecutive_failures => {
                        format!("{} consecutive failures (last: {why})", state.consecutive)
                    }
                    Phase::Closed
                        if state.requests >= config.min_requests
                            && f64::from(state.failures)
                                >= config.failure_rate * f64::from(state.requests) =>
                    {
                        format!(
                            "{} of {} attempts failed within {} (last: {why})",
                            state.failures,
                            state.requests,
                            humantime::format_duration(config.window)
                        )
                    }
                    Phase::Closed => return,
                };
                drop(state);
                self.open(breaker, config, now, None, &reason, by);
            }
        }
    }

    /// Opens `breaker` for `wait` (a provider's request), else for its next ejection's
    /// length. On a breaker already open this only lengthens the ejection (and says why):
    /// attempts that were in flight together fail together, and count as one ejection.
    fn open(
        &self,
        breaker: &Breaker,
        config: &HealthConfig,
        now: Instant,
        wait: Option<Duration>,
        reason: &str,
        by: ExecutionId,
    ) {
        let mut state = breaker.lock();
        let length = wait.unwrap_or_else(|| {
            let doubled = config.ejection.saturating_mul(1 << state.strikes.min(20));
            doubled.min(config.max_ejection)
        });
        let until = now + length;
        let wall = SystemTime::now() + length;
        match state.phase {
            Phase::Open { until: current, .. } => {
                if until > current {
                    state.phase = Phase::Open { until, wall };
                    state.reason = reason.to_owned();
                }
                return;
            }
            Phase::Closed => {
                self.ejected.fetch_add(1, Ordering::AcqRel);
            }
            Phase::HalfOpen { .. } => {}
        }
        state.phase = Phase::Open { until, wall };
        state.epoch += 1;
        state.strikes = state.strikes.saturating_add(1);
        state.reason = reason.to_owned();
        breaker.ejections.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            execution_id = %by,
            provider = %self.provider,
            model = %breaker.model,
            reason,
            ejected_for = %humantime::format_duration(length),
            "target ejected: plans skip it until its ejection ends"
        );
    }

    /// `model`'s health now.
    pub fn status(&self, model: &str, now: Instant) -> TargetHealth {
        let off = TargetHealth {
            state: HealthState::Off,
            reason: String::new(),
            until: None,
            consecutive_failures: 0,
            ejections: 0,
        };
        let Some(breaker) = self.breakers.get(model) else {
            return off;
        };
        let state = breaker.lock();
        let (health, until) = match state.phase {
            Phase::Closed => (HealthState::Closed, None),
            Phase::Open { until, wall } if now < until => (HealthState::Open, Some(wall)),
            // Its ejection has ended: the next plan probes it.
            Phase::Open { .. } | Phase::HalfOpen { .. } => (HealthState::HalfOpen, None),
        };
        TargetHealth {
            state: health,
            reason: state.reason.clone(),
            until,
            consecutive_failures: state.consecutive,
            ejections: breaker.ejections.load(Ordering::Relaxed),
        }
    }
}

impl State {
    /// Starts a new failure-rate window if the current one is over.
    fn roll(&mut self, config: &HealthConfig, now: Instant) {
        if now.saturating_duration_since(self.window_start) >= config.window {
            self.window_start = now;
            self.requests = 0;
            self.failures = 0;
        }
    }

    fn count_failure(&mut self, config: &HealthConfig, now: Instant) {
        self.roll(config, now);
        self.requests = self.requests.saturating_add(1);
        self.failures = self.failures.saturating_add(1);
        self.consecutive = self.consecutive.saturating_add(1);
    }
}

/// The ejection of a half-open breaker whose probes are all taken.
fn probing_ejection(state: &State) -> Ejection {
    Ejection {
        reason: format!("{}; a probe is deciding", state.reason),
        until: None,
    }
}

#[cfg(test)]
mod tests;
