//! What can go wrong in the PostgreSQL store: setting it up, starting it, and each statement,
//! and what of that callers are told.

use std::sync::Arc;
use std::time::Duration;

use crate::store::{Inconsistency, StoreError, Unavailable};

/// Why the PostgreSQL store could not be set up. A database that does not answer yet is not
/// one of these: the store keeps trying, unavailable until then.
#[derive(Debug, thiserror::Error)]
pub enum PgInitError {
    /// The connection string (in the variable named) is not one the driver reads.
    #[error("the connection string in `{0}` is not one PostgreSQL reads")]
    ConnectionString(Arc<str>),
    /// The store's thread (its runtime) could not be started.
    #[error("cannot start the store's thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The connection pool could not be built.
    #[error("the connection pool: {0}")]
    Pool(#[from] deadpool_postgres::BuildError),
    /// TLS could not be set up (no CA certificates on this machine, say).
    #[error("setting up TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// Why [`PostgresStore::connect`](super::PostgresStore::connect) gave no store.
#[derive(Debug, thiserror::Error)]
pub enum PgStartError {
    /// It could not be set up.
    #[error(transparent)]
    Init(#[from] PgInitError),
    /// Its first start failed: the database's words, in full, for the operator.
    #[error("cannot start the PostgreSQL store: {0}")]
    Start(Box<dyn std::error::Error + Send + Sync>),
    /// It stopped before its first start ended.
    #[error("the PostgreSQL store stopped before it started")]
    Stopped,
}

/// Why the store could not do what was asked, before it is told to callers as a
/// [`StoreError`] (which never carries the database's words: those are logged).
#[derive(Debug, thiserror::Error)]
pub(in crate::store) enum PgError {
    #[error("database: {}", said(.0))]
    Db(#[from] tokio_postgres::Error),
    #[error("connection pool: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("schema: {0}")]
    Schema(#[from] SchemaError),
    #[error("a row does not decode: {0}")]
    Row(#[from] RowError),
    /// No answer within [`Shared::patience`](super::Shared::patience): the connection was closed, and whether the
    /// statement ran is not known.
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
}

/// Whether a database error's SQLSTATE says the server cannot answer now rather than that
/// the statement is wrong: a connection lost or refused (class 08), the server shutting down
/// or starting (57P01-57P03), out of resources (53), a statement or lock timeout (57014,
/// 55P03), a serialization failure or deadlock (40001, 40P01).
pub(super) fn passing(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(
            code,
            "57P01" | "57P02" | "57P03" | "57014" | "55P03" | "40001" | "40P01"
        )
}

/// What the database said (its code and message), or the client's error.
fn said(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => error.to_string(),
    }
}

impl PgError {
    /// Whether the database may answer if asked again (it is down, restarting, or the
    /// connection broke), as opposed to a fault in what was asked.
    pub(super) fn transient(&self) -> bool {
        match self {
            Self::Pool(_) | Self::NoAnswer(_) => true,
            Self::Db(e) => match e.as_db_error() {
                None => true,
                Some(db) => e.is_closed() || passing(db.code().code()),
            },
            Self::Schema(_) | Self::Row(_) => false,
        }
    }

    /// What callers are told: unavailable (retry later) or a fault; the details go to the log.
    pub(super) fn into_store(self) -> StoreError {
        if self.transient() {
            tracing::warn!(error = %self, "the PostgreSQL store cannot reach its database");
            StoreError::Unavailable(Unavailable::Backend(
                "the event store's database is unreachable".into(),
            ))
        } else {
            tracing::error!(error = %self, "the PostgreSQL store failed");
            StoreError::Inconsistent(Inconsistency::Database)
        }
    }
}

/// Why a row the store reads does not decode: a bug, or a row another program wrote.
#[derive(Debug, thiserror::Error)]
pub(in crate::store) enum RowError {
    /// A state code no state has.
    #[error("unknown state {0}")]
    State(i16),
    /// Labels that are not the JSON object they were written as: the decoder's reason.
    #[error("labels do not decode: {0}")]
    Labels(String),
    /// A row of several events whose bytes do not hold them.
    #[error("a row of events {first}..={last} does not decode")]
    Run { first: i64, last: i64 },
    /// An event's payload.
    #[error(transparent)]
    Payload(#[from] crate::store::Malformed),
    /// A usage position on a row that holds no usage fact.
    #[error("a usage position on a row of events that holds no usage")]
    NotUsage,
}

/// Why the store cannot use the schema it was given.
#[derive(Debug, thiserror::Error)]
pub(in crate::store) enum SchemaError {
    /// A newer binary has migrated it past what this one knows.
    #[error(
        "schema `{schema}` is at version {version}, newer than this binary's {known}: run the \
         newer binary"
    )]
    Newer {
        schema: String,
        version: i32,
        known: i32,
    },
}
