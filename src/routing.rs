//! Routing: the candidate plan (capability filter, deterministic order), the attempt budget
//! with its retry and fallback decisions, and per-provider admission.
//!
//! Crate-private; public only with the `bench` feature, to `benches/routing.rs`.

#![cfg_attr(
    not(feature = "bench"),
    allow(
        unreachable_pub,
        reason = "public only to the routing bench (feature `bench`)"
    )
)]

mod admission;
mod budget;
mod health;
mod limiter;
mod plan;

#[cfg_attr(
    not(feature = "bench"),
    allow(
        unused_imports,
        reason = "named by the bench: `Admission::acquire` returns them"
    )
)]
pub use admission::{Admission, AdmissionRejected, Permit, Waiting};
pub use budget::{AttemptBudget, Decision, Failure};
pub use health::{Health, HealthState, Probe, TargetHealth, Verdict, with_health};
pub(crate) use limiter::GlobalGate;
pub use plan::{Plans, pinned, plan};
