//! Errors the runtime returns to its callers. `service/status.rs` is the one place that turns
//! them into gRPC statuses.

use std::fmt;

use crate::execution::ExecutionId;
use crate::runtime::RuntimeState;
use crate::store::StoreError;

/// A caller mistake in one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// The field's path in the request, e.g. `input.messages[0].role`.
    pub field: String,
    /// What is wrong with it.
    pub description: String,
}

impl FieldViolation {
    /// A violation of `field`.
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            description: description.into(),
        }
    }
}

impl fmt::Display for FieldViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.description)
    }
}

/// The field violations of one request: the first [`Violations::MAX`] in full and a count of
/// the rest, so a request with a million bad fields gets an answer of bounded size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations {
    shown: Vec<FieldViolation>,
    more: usize,
}

impl Violations {
    /// Violations reported in full.
    pub const MAX: usize = 20;

    /// No violation yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a violation of `field`.
    pub(crate) fn push(&mut self, field: impl Into<String>, description: impl Into<String>) {
        if self.shown.len() < Self::MAX {
            self.shown.push(FieldViolation::new(field, description));
        } else {
            self.more += 1;
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }

    /// The violations reported in full, in the order found.
    pub fn shown(&self) -> &[FieldViolation] {
        &self.shown
    }

    /// How many more there were.
    pub fn more(&self) -> usize {
        self.more
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, violation) in self.shown.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{violation}")?;
        }
        if self.more > 0 {
            write!(f, " (and {} more)", self.more)?;
        }
        Ok(())
    }
}

/// At most [`EXCERPT_CHARS`] characters of a caller's text, for an error message: a caller's
/// string is never echoed at its own length.
pub(crate) fn excerpt(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => std::borrow::Cow::Borrowed(text),
        Some((end, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..end])),
    }
}

/// How much of a caller's text an error message quotes.
pub(crate) const EXCERPT_CHARS: usize = 64;

/// Why the runtime refused or failed a call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    /// The request is malformed; nothing changed.
    #[error("invalid request: {0}")]
    InvalidArgument(Violations),
    /// A cursor or range lies outside what exists.
    #[error("out of range: {0}")]
    OutOfRange(FieldViolation),
    /// No such execution.
    #[error("execution {0} not found")]
    NotFound(ExecutionId),
    /// The idempotency key names an execution of a different request.
    #[error(
        "idempotency key `{key}` is in use by execution {execution_id} with a different request"
    )]
    AlreadyExists {
        /// The key.
        key: String,
        /// The execution holding it.
        execution_id: ExecutionId,
    },
    /// A bounded resource is full.
    #[error("{0}")]
    ResourceExhausted(Exhausted),
    /// The runtime is stopping or its storage failed.
    #[error("runtime is {}", .0.state().as_str())]
    Unavailable(NotReady),
    /// A fault inside the runtime; the cause is logged under `error_id`, never returned.
    #[error("internal_error (error id {error_id})")]
    Internal {
        /// Correlates the caller's error with the log line holding the cause.
        error_id: String,
    },
}

/// Which bounded resource is full: a closed set, each with the reason gRPC clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Exhausted {
    /// The store is full of executions in progress.
    #[error(
        "the event store is full: {executions} executions ({bytes} bytes) are in progress; retry later"
    )]
    StoreFull {
        /// Executions held.
        executions: usize,
        /// Bytes held.
        bytes: u64,
    },
    /// The execution has as many watchers as `server.max_watchers_per_execution` allows.
    #[error(
        "the execution already has {max} watchers (server.max_watchers_per_execution); retry later"
    )]
    Watchers {
        /// The limit.
        max: usize,
    },
}

/// Why the runtime refuses new work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReady {
    /// Shutdown has begun.
    Stopping,
    /// Event storage failed.
    StorageFailed,
}

impl NotReady {
    /// Why a runtime in `state` refuses work; `None` when it is ready.
    pub(crate) fn of(state: RuntimeState) -> Option<Self> {
        match state {
            RuntimeState::Ready => None,
            RuntimeState::Stopping => Some(Self::Stopping),
            RuntimeState::Unavailable => Some(Self::StorageFailed),
        }
    }

    /// The runtime state it is refused in.
    pub fn state(self) -> RuntimeState {
        match self {
            Self::Stopping => RuntimeState::Stopping,
            Self::StorageFailed => RuntimeState::Unavailable,
        }
    }
}

/// Logs an internal fault with a fresh error id and returns the id, which is all a caller
/// ever sees of it.
pub(crate) fn log_internal(cause: &dyn fmt::Display) -> String {
    let error_id = uuid::Uuid::new_v4().simple().to_string();
    tracing::error!(error_id = %error_id, cause = %cause, "internal error");
    error_id
}

impl RuntimeError {
    /// One invalid field.
    pub(crate) fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        let mut violations = Violations::new();
        violations.push(field, description);
        Self::InvalidArgument(violations)
    }

    /// An internal fault: logs the cause with a fresh error id and returns the sanitized error.
    pub(crate) fn internal(cause: &dyn fmt::Display) -> Self {
        Self::Internal {
            error_id: log_internal(cause),
        }
    }

    /// Maps a store error for `key` (the idempotency key of the request, if any).
    pub(crate) fn from_store(error: StoreError, key: Option<&str>) -> Self {
        match error {
            StoreError::NotFound(id) => Self::NotFound(id),
            StoreError::IdempotencyConflict(execution_id) => Self::AlreadyExists {
                key: key.unwrap_or_default().to_owned(),
                execution_id,
            },
            StoreError::Full { executions, bytes } => {
                Self::ResourceExhausted(Exhausted::StoreFull { executions, bytes })
            }
            // The store's own fault, not the runtime's: refused like new work is once the
            // store has failed, so that callers retry (on another replica, or after a restart).
            StoreError::Unavailable(_) => Self::Unavailable(NotReady::StorageFailed),
            other => Self::internal(&other),
        }
    }
}
