//! How long a client waits before it resumes a stream or retries a submission, and which
//! failures it resumes or retries at all.

use std::time::Duration;

use tonic::{Code, Status};

/// The longest server pushback followed.
const MAX_PUSHBACK: Duration = Duration::from_secs(30);

/// The bounds on resuming and retrying: tries go on for at most `patience` without progress
/// (an event delivered starts it again), waiting `first_wait` doubled each time up to
/// `max_wait`, or the server's `grpc-retry-pushback-ms` when it gave one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub patience: Duration,
    pub first_wait: Duration,
    pub max_wait: Duration,
}

impl Default for Retry {
    /// Thirty seconds: a replica's restart, a rolling update, a takeover within the lease.
    fn default() -> Self {
        Self {
            patience: Duration::from_secs(30),
            first_wait: Duration::from_millis(50),
            max_wait: Duration::from_secs(2),
        }
    }
}

impl Retry {
    /// The wait before try `tries + 1` after `status`.
    pub(crate) fn wait(&self, tries: u32, status: &Status) -> Duration {
        if let Some(pushback) = pushback(status) {
            // The server knows best, within reason.
            return pushback.min(MAX_PUSHBACK);
        }
        let doubled = self
            .first_wait
            .saturating_mul(1u32.checked_shl(tries.min(16)).unwrap_or(u32::MAX));
        doubled.min(self.max_wait)
    }
}

/// The server's `grpc-retry-pushback-ms`, if it sent one.
fn pushback(status: &Status) -> Option<Duration> {
    let value = status
        .metadata()
        .get("grpc-retry-pushback-ms")?
        .to_str()
        .ok()?;
    value.parse().ok().map(Duration::from_millis)
}

/// Whether a broken event stream is resumed: reading again with `Watch` is safe whatever
/// broke it, so every failure but the caller's own mistakes and a missing execution is.
pub(crate) fn resumable(status: &Status) -> bool {
    !matches!(
        status.code(),
        Code::InvalidArgument
            | Code::NotFound
            | Code::AlreadyExists
            | Code::PermissionDenied
            | Code::Unauthenticated
            | Code::FailedPrecondition
            | Code::OutOfRange
            | Code::Unimplemented
            | Code::DeadlineExceeded
    )
}

/// Whether a refused submission is tried again: a replica stopping, or a store with no room
/// yet. Both carry the server's pushback.
pub(crate) fn retriable_submit(status: &Status) -> bool {
    matches!(status.code(), Code::Unavailable | Code::ResourceExhausted)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tonic::{Code, Status};

    use super::{Retry, resumable};

    #[test]
    fn waits_double_to_the_bound_and_follow_the_pushback() {
        let retry = Retry::default();
        let plain = Status::unavailable("going");
        assert_eq!(retry.wait(0, &plain), Duration::from_millis(50));
        assert_eq!(retry.wait(2, &plain), Duration::from_millis(200));
        assert_eq!(retry.wait(10, &plain), Duration::from_secs(2));
        let mut pushed = Status::unavailable("draining");
        pushed
            .metadata_mut()
            .insert("grpc-retry-pushback-ms", "100".parse().unwrap());
        assert_eq!(retry.wait(5, &pushed), Duration::from_millis(100));
    }

    #[test]
    fn a_broken_stream_resumes_unless_the_call_was_wrong() {
        assert!(resumable(&Status::unavailable("connection reset")));
        assert!(resumable(&Status::unknown("h2 protocol error")));
        assert!(resumable(&Status::resource_exhausted(
            "stream reset: ENHANCE_YOUR_CALM"
        )));
        assert!(!resumable(&Status::new(
            Code::NotFound,
            "no such execution"
        )));
        assert!(!resumable(&Status::invalid_argument("ability: required")));
    }
}
