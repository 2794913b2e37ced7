//! `serve`: the runtime behind its gRPC server, in the order a start must go. The config is
//! loaded (or the embedded default), the listener bound (before anything else can create
//! files: a Unix socket's mode is set by the umask around `bind`), the runtime built (its
//! store opened), the metrics listener bound; "model-runtime serving" is logged only then.
//! The first SIGTERM, SIGINT or SIGHUP drains (`server::serve`), a second one ends the
//! process.

use std::path::PathBuf;
use std::process::ExitCode;

use model_runtime::config::Listen;
use model_runtime::{Config, Runtime, server, telemetry};

use super::address::Address;
use super::exit;

/// `serve`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Config file (TOML).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Listen address, overriding `server.listen`: host:port, or unix:/path/to.sock to serve
    /// on a Unix domain socket (sidecar mode; mode 0660, removed at shutdown). The container
    /// image sets MODEL_RUNTIME_LISTEN=0.0.0.0:50051, so a mounted config that listens on
    /// 127.0.0.1 is still reachable from outside the container.
    #[arg(long, env = LISTEN_ENV)]
    listen: Option<Address>,
}

/// The variable `--listen` is read from when it is not given.
const LISTEN_ENV: &str = "MODEL_RUNTIME_LISTEN";

/// Loads the config, then serves until a signal; telemetry runs inside the async runtime,
/// where a trace exporter needs to be.
pub fn main(args: ServeArgs, logs: telemetry::LogFormat) -> ExitCode {
    let loaded = match &args.config {
        Some(path) => Config::load(path),
        None => Config::embedded_default(),
    };
    let mut config = match loaded {
        Ok(config) => config,
        Err(e) => {
            eprintln!("config: {e}");
            return exit::invalid();
        }
    };
    let configured = match &config.server.listen {
        Listen::Tcp(addr) => Address::Tcp(addr.to_string()),
        Listen::Unix(path) => Address::Unix(path.clone()),
    };
    // Said once logging has started: where the environment (the container image's, say)
    // overrides the config's address. One given on the command line is there to see.
    let from_env = std::env::var(LISTEN_ENV)
        .ok()
        .and_then(|text| text.parse::<Address>().ok());
    let overridden = args
        .listen
        .as_ref()
        .filter(|listen| **listen != configured && from_env.as_ref() == Some(*listen))
        .map(|_| configured.to_string());
    let listen = args.listen.unwrap_or(configured);
    match &listen {
        Address::Unix(path) => config.server.listen = Listen::Unix(path.clone()),
        Address::Tcp(addr) => {
            if let Ok(addr) = addr.parse() {
                config.server.listen = Listen::Tcp(addr);
            }
        }
    }
    super::run(async move {
        let telemetry = telemetry::init(logs, telemetry::Traces::FromEnv);
        if let Some(configured) = overridden {
            tracing::info!(
                listen = %listen,
                server.listen = %configured,
                "{LISTEN_ENV} overrides server.listen"
            );
        }
        let code = serve(config, listen).await;
        telemetry.shutdown().await;
        code
    })
}

async fn serve(config: Config, listen: Address) -> ExitCode {
    let listener = match listen.listen().await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("cannot listen on {listen}: {e}");
            // A name where an IP address must be is the caller's mistake, not the machine's.
            return if e.kind() == std::io::ErrorKind::InvalidInput {
                exit::invalid()
            } else {
                exit::failed()
            };
        }
    };
    let local = listener.address();
    let runtime = match Runtime::new(config) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start: {e}");
            return exit::invalid();
        }
    };
    // Listened for from here on, so no signal can fall between two waits.
    let mut signals = match Signals::new() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("cannot listen for signals: {e}");
            return exit::failed();
        }
    };
    // Metrics are served until the process ends, the drain included.
    let metrics_stop = tokio_util::sync::CancellationToken::new();
    if let Err(code) = metrics(&runtime, &metrics_stop).await {
        return code;
    }
    let ingress = match ingress(&runtime).await {
        Ok(ingress) => ingress,
        Err(code) => return code,
    };
    // Said once everything serving needs is up: the store open, every listener bound.
    tracing::info!(
        addr = %local,
        version = env!("CARGO_PKG_VERSION"),
        commit = env!("MODEL_RUNTIME_COMMIT"),
        "model-runtime serving"
    );
    let (first, drain) = tokio::sync::oneshot::channel::<()>();
    #[expect(
        clippy::disallowed_methods,
        reason = "the signal watcher lives as long as the process: a second signal exits it"
    )]
    tokio::spawn(async move {
        let signal = signals.next().await;
        tracing::info!(signal, "shutdown signal received");
        let _ = first.send(());
        let signal = signals.next().await;
        eprintln!("second shutdown signal ({signal}): exiting without waiting for the drain");
        std::process::exit(i32::from(exit::INTERRUPTED));
    });
    let drain = async {
        let _ = drain.await;
    };
    let served = server::serve_with_ingress(runtime, listener, ingress, drain).await;
    metrics_stop.cancel();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            exit::failed()
        }
    }
}

/// Serves `GET /metrics` where `server.metrics_listen` says, until `stop`; the exit code
/// when it cannot listen there.
async fn metrics(
    runtime: &Runtime,
    stop: &tokio_util::sync::CancellationToken,
) -> Result<(), ExitCode> {
    let Some(addr) = runtime.config().server.metrics_listen else {
        return Ok(());
    };
    match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => {
            let local = listener.local_addr().map_or(addr, |a| a);
            tracing::info!(addr = %local, "metrics serving");
            #[expect(
                clippy::disallowed_methods,
                reason = "metrics are served until the process exits, the drain included"
            )]
            tokio::spawn(server::serve_metrics(
                runtime.clone(),
                listener,
                stop.clone().cancelled_owned(),
            ));
            Ok(())
        }
        Err(e) => {
            eprintln!("cannot listen on {addr} (server.metrics_listen): {e}");
            Err(exit::failed())
        }
    }
}

/// The HTTP ingress's listener, bound where `[ingress] listen` says (none without the table);
/// the exit code when it cannot listen there.
async fn ingress(runtime: &Runtime) -> Result<Option<tokio::net::TcpListener>, ExitCode> {
    let Some(config) = &runtime.config().ingress else {
        return Ok(None);
    };
    match tokio::net::TcpListener::bind(config.listen).await {
        Ok(listener) => {
            let local = listener.local_addr().map_or(config.listen, |a| a);
            tracing::info!(addr = %local, "HTTP ingress serving");
            Ok(Some(listener))
        }
        Err(e) => {
            eprintln!("cannot listen on {} (ingress.listen): {e}", config.listen);
            Err(exit::failed())
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP: each drains. SIGHUP does not reload the config (a config
/// is read once, at start: a new one takes a restart, which a drain makes clean); it is a
/// drain rather than the default's immediate exit, so a closed terminal or a supervisor's
/// HUP never cuts running executions.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next SIGINT, SIGTERM or SIGHUP: its name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.hangup.recv() => "SIGHUP",
        }
    }
}
