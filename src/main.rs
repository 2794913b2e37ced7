//! The `model-runtime` command: parse, init telemetry, load config, run. Its client-side
//! modules live with it: `cli` (the `exec` client) and `bench` (the load tool); both use only
//! the library's public API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use model_runtime::{Config, Runtime, server, telemetry};

mod bench;
mod cli;

use cli::ExecArgs;

/// The server makes many small allocations on one executor thread that another frees (an
/// event is built by its driver, encoded by a stream task, and freed when its record leaves the
/// store). Under glibc's malloc those frees queue on per-arena locks: about a third of the
/// server's CPU at concurrency 64 went to malloc/free and their futex waits (BENCHMARKS.md).
/// mimalloc frees across threads without a lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "model-runtime",
    version,
    about = "A gRPC data plane that executes model calls behind an AI gateway"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as readable text or as one JSON object per line (filtered by RUST_LOG).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormatArg,
}

/// Where `usage` and `price` read facts.
#[derive(clap::Args)]
struct SourceArgs {
    /// A server to read `StreamUsage` from: host:port, http://host:port or unix:/path.
    #[arg(long, conflicts_with = "from_file")]
    addr: Option<String>,
    /// Resume after this cursor (a usage record's `cursor`).
    #[arg(long, default_value = "", requires = "addr")]
    after: String,
    /// Stop once no fact has come for this long (caught up).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    idle: std::time::Duration,
    /// Facts from a file, one JSON object per line (as `usage` prints them).
    #[arg(long)]
    from_file: Option<PathBuf>,
}

impl SourceArgs {
    fn source(self, follow: bool) -> cli::Source {
        cli::Source {
            addr: self.addr,
            after: self.after,
            idle: (!follow).then_some(self.idle),
            from_file: self.from_file,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gRPC server (on the embedded default config when no file is given).
    Serve {
        /// Config file (TOML).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Listen address, overriding `server.listen`: host:port, or unix:/path/to.sock to
        /// serve on a Unix domain socket (sidecar mode; mode 0660, removed at shutdown).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Run one execution against a server and stream its events.
    Exec {
        /// The ability to run.
        #[arg(long)]
        ability: String,
        /// Server address: host:port, http://host:port or unix:/path/to.sock (a sidecar's
        /// socket).
        #[arg(long, default_value = "127.0.0.1:50051")]
        addr: String,
        /// The routing policy, one the ability allows (default: the ability's own).
        #[arg(long)]
        policy: Option<String>,
        /// A label copied onto the execution's usage facts, as KEY=VALUE (e.g. tenant=acme);
        /// repeat it for more.
        #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
        /// The deadline, this long from now (e.g. 30s; default: the server's
        /// `server.default_deadline`).
        #[arg(long, value_parser = humantime::parse_duration)]
        deadline: Option<std::time::Duration>,
        /// Print one JSON object per event.
        #[arg(long)]
        json: bool,
        /// The user prompt.
        prompt: String,
    },
    /// Drive a server (or a baseline) with load; report throughput and latency.
    Bench(bench::BenchArgs),
    /// Ask a server whether it is serving (gRPC health `Check`): exit 0 only for SERVING.
    Health {
        /// Server address: host:port, http://host:port or unix:/path/to.sock (a sidecar's
        /// socket).
        #[arg(long, default_value = "127.0.0.1:50051")]
        addr: String,
        /// The service to ask about (default: the server as a whole).
        #[arg(long, default_value = "")]
        service: String,
        /// How long connecting and the answer may take.
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Print the usage export (`StreamUsage`) as one JSON object per line, from a cursor.
    Usage {
        #[command(flatten)]
        source: SourceArgs,
        /// Keep following live facts instead of stopping once caught up.
        #[arg(long)]
        follow: bool,
    },
    /// Price usage facts with a price table (TOML, or LiteLLM's JSON map): each fact's line,
    /// priced or explicitly unpriced, and the totals.
    Price {
        /// The price table: a TOML table, or LiteLLM's model_prices_and_context_window.json.
        #[arg(long)]
        prices: PathBuf,
        #[command(flatten)]
        source: SourceArgs,
        /// Total by this label's value too (e.g. tenant).
        #[arg(long)]
        by: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A provider that answers at once (OpenAI and Anthropic streaming), for measuring the
    /// provider path (benches/provider.sh). Loopback only.
    MockUpstream {
        /// Where to listen (a loopback address).
        #[arg(long, default_value = "127.0.0.1:9100")]
        listen: SocketAddr,
        /// Content chunks per reply.
        #[arg(long, default_value_t = 20)]
        chunks: usize,
    },
    /// Validate a config file and print every value in effect (defaults filled in; secrets
    /// named by where they are read from, never shown), then exit.
    CheckConfig {
        /// Config file (TOML).
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = match cli.log_format {
        LogFormatArg::Text => telemetry::LogFormat::Text,
        LogFormatArg::Json => telemetry::LogFormat::Json,
    };
    // `serve` starts its telemetry inside the async runtime, where a trace exporter runs.
    if !matches!(cli.command, Command::Serve { .. }) {
        let _ = telemetry::init(logs, telemetry::Traces::Off);
    }
    match cli.command {
        Command::CheckConfig { file } => match Config::load_effective(&file) {
            Ok((config, effective)) => {
                println!(
                    "{}: ok ({} providers, {} policies, {} abilities); in effect:",
                    file.display(),
                    config.providers.len(),
                    config.policies.len(),
                    config.abilities.len()
                );
                print!("{effective}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                ExitCode::from(2)
            }
        },
        Command::Serve { config, listen } => {
            let loaded = match &config {
                Some(path) => Config::load(path),
                None => Config::embedded_default(),
            };
            let mut config = match loaded {
                Ok(config) => config,
                Err(e) => {
                    eprintln!("config: {e}");
                    return ExitCode::from(2);
                }
            };
            let listen = match listen.as_deref().map(Listen::parse).transpose() {
                Ok(listen) => listen.unwrap_or(Listen::Tcp(config.server.listen)),
                Err(e) => {
                    eprintln!("--listen: {e}");
                    return ExitCode::from(2);
                }
            };
            if let Listen::Tcp(addr) = listen {
                config.server.listen = addr;
            }
            run(async move {
                let telemetry = telemetry::init(logs, telemetry::Traces::FromEnv);
                let code = serve(config, listen).await;
                telemetry.shutdown().await;
                code
            })
        }
        Command::Bench(args) => run(bench::main(args)),
        Command::MockUpstream { listen, chunks } => run(bench::mock::main(listen, chunks)),
        Command::Usage { source, follow } => run(cli::usage(source.source(follow))),
        Command::Price {
            prices,
            source,
            by,
            json,
        } => run(cli::price(source.source(false), prices, by, json)),
        Command::Health {
            addr,
            service,
            timeout,
        } => run(cli::health(cli::HealthArgs {
            addr,
            service,
            timeout,
        })),
        Command::Exec {
            ability,
            addr,
            policy,
            labels,
            deadline,
            json,
            prompt,
        } => run(async move {
            cli::exec(ExecArgs {
                addr,
                ability,
                policy,
                labels,
                deadline,
                prompt,
                json,
            })
            .await
            .unwrap_or_else(|e| {
                eprintln!("error: {e}");
                ExitCode::from(2)
            })
        }),
    }
}

/// A `--label`: `KEY=VALUE`, split at the first `=`.
fn label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE, like tenant=acme".to_owned()),
    }
}

fn run(work: impl Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(work),
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            ExitCode::from(1)
        }
    }
}

/// Where `serve` listens.
enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Listen {
    fn parse(text: &str) -> Result<Self, String> {
        match text.strip_prefix("unix:") {
            Some("") => Err("unix: needs a socket path, like unix:/run/model-runtime.sock".into()),
            Some(path) => Ok(Self::Unix(PathBuf::from(path))),
            None => text.parse().map(Self::Tcp).map_err(|_| {
                format!("`{text}` is not an address like 127.0.0.1:50051 or unix:/path/to.sock")
            }),
        }
    }
}

async fn serve(config: Config, listen: Listen) -> ExitCode {
    let bound = match &listen {
        Listen::Tcp(addr) => tokio::net::TcpListener::bind(addr)
            .await
            .map(server::Listener::from),
        Listen::Unix(path) => server::Listener::unix(path).await,
    };
    let listener = match bound {
        Ok(listener) => listener,
        Err(e) => {
            let at = match &listen {
                Listen::Tcp(addr) => addr.to_string(),
                Listen::Unix(path) => format!("unix:{}", path.display()),
            };
            eprintln!("cannot listen on {at}: {e}");
            return ExitCode::from(1);
        }
    };
    let local = listener.address();
    let runtime = match Runtime::new(config) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start: {e}");
            return ExitCode::from(2);
        }
    };
    // The first SIGTERM or SIGINT drains; a second one ends the process at once.
    let mut signals = match Signals::new() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("cannot listen for signals: {e}");
            return ExitCode::from(1);
        }
    };
    // Metrics are served until the process ends, the drain included.
    let metrics_stop = tokio_util::sync::CancellationToken::new();
    if let Some(addr) = runtime.config().server.metrics_listen {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => {
                let local = listener.local_addr().map_or(addr, |a| a);
                tracing::info!(addr = %local, "metrics serving");
                tokio::spawn(server::serve_metrics(
                    runtime.clone(),
                    listener,
                    metrics_stop.clone().cancelled_owned(),
                ));
            }
            Err(e) => {
                eprintln!("cannot listen on {addr} (server.metrics_listen): {e}");
                return ExitCode::from(1);
            }
        }
    }
    // Said once everything serving needs is up: the store open, every listener bound.
    tracing::info!(addr = %local, "model-runtime serving");
    let (first, drain) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        signals.next().await;
        let _ = first.send(());
        signals.next().await;
        eprintln!("second shutdown signal: exiting without waiting for the drain");
        std::process::exit(SECOND_SIGNAL_EXIT);
    });
    let drain = async {
        let _ = drain.await;
    };
    let served = server::serve(runtime, listener, drain).await;
    metrics_stop.cancel();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            ExitCode::from(1)
        }
    }
}

/// The exit code after a second shutdown signal: the drain did not finish.
const SECOND_SIGNAL_EXIT: i32 = 130;

/// SIGINT and SIGTERM, both listened for from start-up, so no signal can fall between two
/// waits.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The next SIGINT or SIGTERM.
    async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
