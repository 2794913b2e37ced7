//! Routing: the candidate plan (capability filter, deterministic order), the attempt budget
//! with its retry and fallback decisions, and per-provider admission.

mod admission;
mod budget;
mod plan;

pub use admission::{Admission, AdmissionRejected, Permit};
pub use budget::{AttemptBudget, Decision, Failure};
pub use plan::{Plans, plan};
