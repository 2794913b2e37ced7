//! The PostgreSQL store against a real server (`MODEL_RUNTIME_TEST_POSTGRES_URL`; without it
//! these skip with a line naming it, and fail under `CI=true`). Each store gets a schema of
//! its own, so tests run side by side on one database.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{PgOptions, PostgresStore};
use crate::store::{EventStore, StoreLimits};

const URL_ENV: &str = "MODEL_RUNTIME_TEST_POSTGRES_URL";

/// The server's URL, or `None` after saying why the test does not run.
pub(super) fn url() -> Option<String> {
    match std::env::var(URL_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and {URL_ENV} is not set"
            );
            eprintln!("skipped: {URL_ENV} is not set");
            None
        }
    }
}

/// Options for a fresh schema on the test server: small pool, short lease and poll. A URL
/// that does not choose `sslmode` gets `disable`: a test server's certificate (Debian's
/// snakeoil one) is not one the store would trust.
pub(super) fn options(url: &str, schema: &str) -> PgOptions {
    let mut connect: tokio_postgres::Config = url.parse().expect("a PostgreSQL URL");
    if !url.contains("sslmode") {
        connect.ssl_mode(tokio_postgres::config::SslMode::Disable);
    }
    PgOptions {
        connect,
        schema: schema.to_owned(),
        pool_size: 4,
        connect_timeout: Duration::from_secs(5),
        acquire_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(10),
        lease: Duration::from_secs(3),
        poll_interval: Duration::from_millis(200),
    }
}

/// A schema name no other test uses, with the time it was made (so old ones can go).
pub(super) fn fresh_schema() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).expect("random bytes");
    let tag: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("mr_test_{secs}_{tag}")
}

/// Drops the test schemas made over an hour ago (earlier runs' leftovers).
async fn drop_old_schemas(url: &str) {
    let Ok((client, connection)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await else {
        return;
    };
    let connection = tokio::spawn(connection);
    let cutoff = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        .saturating_sub(3600);
    if let Ok(rows) = client
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'mr\\_test\\_%'",
            &[],
        )
        .await
    {
        for row in rows {
            let name: String = row.get(0);
            let made = name
                .split('_')
                .nth(2)
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(u64::MAX);
            if made < cutoff {
                let _ = client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                    .await;
            }
        }
    }
    drop(client);
    let _ = connection.await;
}

/// A fresh store within `limits`.
pub(super) async fn store(limits: StoreLimits) -> Arc<dyn EventStore> {
    let url = url().expect("guarded by `ready`");
    drop_old_schemas(&url).await;
    PostgresStore::connect(options(&url, &fresh_schema()), limits)
        .await
        .expect("the store connects")
}

fn ready() -> bool {
    url().is_some()
}

mod conformance {
    crate::event_store_conformance!(super::store, if super::ready);
}
