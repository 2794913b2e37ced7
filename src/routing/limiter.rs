//! A provider's `max_concurrency` counted across every replica, in Redis
//! (`providers.NAME.limiter = { kind = "redis", ... }`).
//!
//! The permits are one sorted set: a member per held permit (this replica's id and a count),
//! scored by when its lease ends. Taking one is a script that drops the ended leases and adds
//! a member only while fewer than the limit are held, with Redis's own clock, so replicas
//! whose clocks disagree still agree on the count. A keeper task per gate renews this
//! replica's leases every third of the lease and gives released ones back at once; a replica
//! that dies gives its permits back when their leases end. The set itself expires a day
//! after its last write. A set that is new, that Redis lost, or that may be behind what
//! was acknowledged (another server process wrote it last: a restart, a failover, a snapshot
//! restored; or its generation is behind what this replica saw) gives no permit until every
//! live replica has had the time to renew its own into it (a third of the lease, plus the
//! timeout): the attempts still running on it count again before others start (`scripts.rs`).
//!
//! This replica's attempts take turns at the gate in the order they asked (one polls Redis
//! while the others wait behind it, asking for a block of permits: its own and one for each
//! attempt behind it, which take theirs from it in turn); a permit released here wakes the
//! head at once, one released on another replica is seen by the head's next poll, at most
//! 20 ms later (`gate.rs`).
//!
//! When Redis does not answer within `timeout`, `on_unavailable` decides: `fail_closed`
//! refuses the attempt as a full queue does (the plan's next target is tried), `fail_open`
//! admits it within `local_limit` permits of this replica alone. The first call that fails
//! logs a warning, the first that succeeds again logs that Redis is back; each refusal or
//! local admission is counted (`limiter_unavailable_total`).

#[cfg(feature = "redis")]
mod gate;
#[cfg(feature = "redis")]
mod keeper;
#[cfg(not(feature = "redis"))]
mod off;
#[cfg(feature = "redis")]
mod scripts;
#[cfg(feature = "redis")]
mod shared;

#[cfg(feature = "redis")]
pub(crate) use gate::GlobalGate;
#[cfg(not(feature = "redis"))]
pub(crate) use off::{GlobalGate, Held};
#[cfg(feature = "redis")]
pub(crate) use shared::Held;

/// What the limiter says for `GetRuntimeMetadata` and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LimiterStatus {
    /// Permits held across every replica, as last read from Redis (`None` before the first
    /// read).
    pub(crate) global_in_flight: Option<u32>,
    /// Whether Redis answered the last call.
    pub(crate) reachable: bool,
    /// Attempts refused (`fail_closed`), or admitted by this replica alone (`fail_open`),
    /// because Redis was unreachable.
    pub(crate) unavailable: u64,
    /// Leases that ended unrenewed while their attempts ran, taken by others meanwhile.
    pub(crate) lost: u64,
}

/// Why the gate gave no permit.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "redis"),
    expect(
        dead_code,
        reason = "only the Redis gate refuses, and it is not in this build"
    )
)]
pub(crate) enum Refused {
    /// Redis is unreachable and the policy is `fail_closed`.
    Unavailable,
}

#[cfg(test)]
#[cfg(feature = "redis")]
mod tests;
