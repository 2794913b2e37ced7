//! How the store's connections are made: the pool's and the lease keeper's with the store's
//! settings (statement timeout, keep-alives on both ends, no JIT, the schema as the search
//! path), the notification connection's with the keep-alives alone, and TLS for all of them.

use std::sync::Arc;
use std::time::Duration;

use super::{Options, schema};

/// A connection silent this long is probed, every [`KEEPALIVE_INTERVAL`], and given up
/// after [`KEEPALIVE_RETRIES`] probes go unanswered (by either end).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;

/// How every connection of the store's (the pool's and the lease's) is made: the statement
/// timeout, keep-alives on both ends, no JIT, and the schema as its search path.
///
/// A replica that is lost in the middle of a transaction (the capacity lock's, `capacity.rs`)
/// must not hold its locks for as long as the server's TCP takes to notice (two hours by the
/// usual default): the server ends a transaction idle longer than a statement may take, and
/// its own keep-alives find a silent peer in about 25 s.
pub(super) fn settings(options: &Options) -> tokio_postgres::Config {
    let mut connect = options.connect.clone();
    connect.connect_timeout(options.config.connect_timeout);
    connect.keepalives(true);
    connect.keepalives_idle(KEEPALIVE_IDLE);
    connect.keepalives_interval(KEEPALIVE_INTERVAL);
    connect.keepalives_retries(KEEPALIVE_RETRIES);
    let statement_timeout = options.config.statement_timeout.as_millis();
    // The schema is every connection's search path: statements name tables alone, and are
    // the same text (prepared once per connection) whatever the schema.
    //
    // No JIT: the store's statements are short, yet a plan's estimated cost can pass JIT's
    // threshold (a new table has no statistics, and rows that left linger), and compiling
    // took 40-240 ms for a purge that found nothing to delete.
    //
    // Options the connection string sets come first; these are the store's own.
    let mut server = options
        .connect
        .get_options()
        .map(|own| format!("{own} "))
        .unwrap_or_default();
    server.push_str(&format!(
        "-c statement_timeout={statement_timeout} -c lock_timeout={statement_timeout} \
         -c idle_in_transaction_session_timeout={} -c tcp_keepalives_idle={} \
         -c tcp_keepalives_interval={} -c tcp_keepalives_count={} -c jit=off -c search_path={}",
        statement_timeout + 1000,
        KEEPALIVE_IDLE.as_secs(),
        KEEPALIVE_INTERVAL.as_secs(),
        KEEPALIVE_RETRIES,
        schema::quote(&options.config.schema),
    ));
    connect.options(server);
    if connect.get_application_name().is_none() {
        connect.application_name("model-runtime");
    }
    connect
}

/// The notification connection's settings (`LISTEN`): the keep-alives, and the connect
/// timeout; it runs no statement that could take long.
pub(super) fn notifications(options: &Options) -> tokio_postgres::Config {
    let mut connect = options.connect.clone();
    connect.connect_timeout(options.config.connect_timeout);
    connect.keepalives(true);
    connect.keepalives_idle(KEEPALIVE_IDLE);
    connect.keepalives_interval(KEEPALIVE_INTERVAL);
    connect.keepalives_retries(KEEPALIVE_RETRIES);
    connect
}

/// TLS as the connection string's `sslmode` asks (`prefer`, the default, tries it first):
/// rustls with the platform's roots. It reads them from disk, so a store makes one and
/// shares it.
pub(super) fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect, rustls::Error> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let verifier = rustls_platform_verifier::Verifier::new(provider.clone())?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
