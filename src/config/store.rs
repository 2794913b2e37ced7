//! `[store]` as validated: which event store, its capacity and retention, and each backend's
//! settings.

use std::sync::Arc;
use std::time::Duration;

use super::{Secret, StoreKey};

/// `[store]`.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Which store.
    pub kind: StoreKind,
    /// Capacity in executions.
    pub max_executions: usize,
    /// Capacity in bytes: events, views and running executions' inputs.
    pub max_bytes: u64,
    /// How long after it ended a terminal execution expires (capacity may evict it sooner).
    pub retention: Duration,
}

/// Which event store to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// The bounded in-memory store.
    Memory,
    /// The encrypted, fsync'd file journal.
    File(FileStoreConfig),
    /// PostgreSQL: one store shared by several replicas.
    Postgres(PostgresStoreConfig),
}

/// `[store]` of `kind = "file"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStoreConfig {
    /// The journal's directory (created if missing).
    pub path: std::path::PathBuf,
    /// The keys: the first seals what is written, every one opens what was (`store.keys`, or
    /// the one of `store.key_env` / `store.key_file`).
    pub keys: Vec<StoreKey>,
    /// Bytes the journal may take on disk.
    pub max_disk_bytes: u64,
}

/// `[store]` of `kind = "postgres"`: several replicas, one store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresStoreConfig {
    /// The connection string (`postgres://` or `postgresql://` URL, or libpq key=value), read
    /// from `url_env` at start-up; it may hold a password, so it is a secret.
    pub url: Secret,
    /// The variable the URL was read from, to name in messages.
    pub url_env: Arc<str>,
    /// Connections the pool may open (`store.pool_size`, default 16, 1..=1024).
    pub pool_size: usize,
    /// How long opening one connection may take (`store.connect_timeout`, default 5s,
    /// 100ms..=60s).
    pub connect_timeout: Duration,
    /// How long waiting for a free connection may take (`store.acquire_timeout`, default 2s,
    /// 10ms..=60s).
    pub acquire_timeout: Duration,
    /// The server-side statement_timeout of every statement (`store.statement_timeout`,
    /// default 5s, 100ms..=10m).
    pub statement_timeout: Duration,
    /// This replica's lease: a replica that stops renewing it for this long is taken over
    /// (`store.lease`, default 10s, 1s..=10m). Renewed every third of it.
    pub lease: Duration,
    /// How often followers look for appends they were not notified of (a lost notification):
    /// the bound on that delay (`store.poll_interval`, default 1s, 10ms..=`lease`).
    pub poll_interval: Duration,
    /// The schema of the store's tables, created if missing (`store.schema`, default
    /// `model_runtime`): runtimes that share a database and not their executions use one
    /// each.
    pub schema: Arc<str>,
}
