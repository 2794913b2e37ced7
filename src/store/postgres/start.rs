//! Starting the store: its own runtime (one thread), its pool, and the start itself, tried
//! until the database answers: the schema, this replica's registration, the counts, then the
//! store's tasks.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::connect::settings;
use super::{
    Options, PgError, PgInitError, Shared, batch, create, lease, schema, takeover, watch, writer,
};

/// How the first attempt to start went: the reason it failed, in full.
pub(super) type FirstStart = Result<(), PgError>;

/// Starts the store: tries until the database answers (saying how the first attempt went),
/// then starts its tasks.
pub(super) async fn start(
    shared: Arc<Shared>,
    (appends, creates): (
        mpsc::UnboundedReceiver<writer::Request>,
        mpsc::UnboundedReceiver<create::Request>,
    ),
    first: oneshot::Sender<FirstStart>,
) {
    let mut first = Some(first);
    let mut failures = 0u32;
    loop {
        match begin(&shared).await {
            Ok(()) => break,
            Err(error) => {
                failures += 1;
                tracing::warn!(%error, "the PostgreSQL store cannot start yet; trying again");
                if let Some(first) = first.take() {
                    let _ = first.send(Err(error));
                }
                tokio::time::sleep(Duration::from_millis(100 << failures.min(6))).await;
            }
        }
    }
    tracing::info!(
        schema = %shared.options.config.schema,
        replica = %shared.replica.id().0,
        version = schema::VERSION,
        "the PostgreSQL store is ready"
    );
    shared.ready.store(true, Ordering::Release);
    let listening = shared.listening.notified();
    let tasks: [std::pin::Pin<Box<dyn Future<Output = ()> + Send>>; 6] = [
        Box::pin(batch::run(shared.clone(), appends)),
        Box::pin(batch::run(shared.clone(), creates)),
        Box::pin(watch::listen(shared.clone())),
        Box::pin(watch::poll(shared.clone())),
        Box::pin(lease::keep(shared.clone())),
        Box::pin(takeover::run(shared.clone())),
    ];
    for task in tasks {
        let stop = shared.stop.clone();
        shared.handle.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = task => {}
            }
        });
    }
    // A store that answers `connect` hears the other replicas' appends from then on.
    let _ = tokio::time::timeout(shared.options.config.connect_timeout, listening).await;
    if let Some(first) = first.take() {
        let _ = first.send(Ok(()));
    }
}

/// One attempt to start: the schema, this replica's registration, the counts.
async fn begin(shared: &Shared) -> Result<(), PgError> {
    let epoch = shared
        .on_connection(async |client| schema::migrate(client, &shared.options.config.schema).await)
        .await?;
    shared.usage_epoch.store(epoch, Ordering::Release);
    shared.replica.register(shared).await?;
    shared.capacity.refresh(shared).await
}

/// A runtime of one thread for the store's work, stopped by `stop`.
pub(super) fn store_runtime(stop: CancellationToken) -> std::io::Result<tokio::runtime::Handle> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("postgres-store".into())
        .spawn(move || runtime.block_on(stop.cancelled()))?;
    Ok(handle)
}

/// The pool: at most `pool_size` connections (`connect::settings`), checked only for being
/// open when reused (a query would arm a timer on every checkout).
pub(super) fn pool(
    options: &Options,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
) -> Result<Pool, PgInitError> {
    let manager = Manager::from_config(
        settings(options),
        tls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    // Opening a connection is bounded as a whole (the socket's `connect_timeout` does not
    // cover the start-up exchange that follows on a server that stalls).
    Pool::builder(manager)
        .max_size(options.config.pool_size.max(2))
        .wait_timeout(Some(options.config.acquire_timeout))
        .create_timeout(Some(options.config.connect_timeout))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .map_err(PgInitError::Pool)
}
