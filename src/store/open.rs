//! The store a configuration names, opened: the one place that chooses among the backends
//! (`[store] kind`). A backend left out of the build (cargo feature `postgres`) is refused
//! when the config is validated, and here for a config made by hand.

use std::sync::Arc;

use super::file::{FileStore, OpenError};
use super::memory::MemoryStore;
use super::{EventStore, StoreLimits};
use crate::config::{StoreConfig, StoreKind};

/// Why the configured store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenStoreError {
    /// The file store: its directory is locked by another process, or its journal does not
    /// read (the error names the file and the reason).
    #[error(transparent)]
    File(#[from] OpenError),
    /// The PostgreSQL store could not be set up (its connection string, its thread, its
    /// pool); a database that does not answer yet is not this error: the store keeps trying,
    /// `NOT_SERVING` until then.
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] super::postgres::PgInitError),
    /// The configured backend is not in this build.
    #[error("the `{0}` store is not in this build (cargo feature `{0}`)")]
    NotBuilt(&'static str),
}

/// The store `config` names, within its bounds. Opening a file store replays its journal and
/// ends the executions it left running; a PostgreSQL store starts on a thread of its own and
/// connects when its database answers.
pub fn open(config: &StoreConfig) -> Result<Arc<dyn EventStore>, OpenStoreError> {
    let limits = StoreLimits {
        max_executions: config.max_executions,
        max_bytes: config.max_bytes,
        retention: config.retention,
    };
    Ok(match &config.kind {
        StoreKind::Memory => Arc::new(MemoryStore::new(limits)),
        StoreKind::File(file) => {
            let (store, opened) = FileStore::open(file, limits)?;
            tracing::info!(
                path = %file.path.display(),
                executions = opened.executions,
                events = opened.events,
                interrupted = opened.interrupted,
                "opened the file store"
            );
            store
        }
        #[cfg(feature = "postgres")]
        StoreKind::Postgres(postgres) => {
            let store = super::postgres::PostgresStore::open(postgres, limits)?;
            tracing::info!(schema = %postgres.schema, "opening the PostgreSQL store");
            store
        }
        #[cfg(not(feature = "postgres"))]
        StoreKind::Postgres(_) => return Err(OpenStoreError::NotBuilt("postgres")),
    })
}
