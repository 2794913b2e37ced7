//! What an attempt's outcome says of its target, if anything.

use std::time::Duration;

use crate::execution::{AttemptCode, AttemptError, ErrorClass};

/// What an attempt's outcome says of its target.
pub(super) enum Signal {
    Failure,
    /// The provider asked not to be called for this long.
    Until(Duration),
    /// This target refuses every request (403).
    Refused,
    /// The key was refused (401): every target of the provider fails alike.
    BadKey,
}

impl Signal {
    /// What `error` says of its target; `None` for what says something of the request
    /// alone, or of nothing remote at all.
    pub(super) fn of(error: &AttemptError) -> Option<Self> {
        match error.code {
            AttemptCode::Unauthorized => return Some(Self::BadKey),
            AttemptCode::Forbidden => return Some(Self::Refused),
            AttemptCode::AdmissionRejected
            | AttemptCode::TargetEjected
            | AttemptCode::ProviderMissing
            | AttemptCode::Cancelled
            | AttemptCode::DeadlineExceeded
            | AttemptCode::RetryBudgetExhausted
            | AttemptCode::OutputTooLarge => return None,
            _ => {}
        }
        match (error.class, error.retry_after) {
            (ErrorClass::Rejected | ErrorClass::Invalid, _) => None,
            (_, Some(wait)) if !wait.is_zero() => Some(Self::Until(wait)),
            (ErrorClass::Retryable | ErrorClass::OutcomeUnknown | ErrorClass::Interrupted, _) => {
                Some(Self::Failure)
            }
        }
    }
}
