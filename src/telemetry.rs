//! Logging and traces. Logs: structured `tracing` output to stderr, filtered by `RUST_LOG`
//! (default `info`), as readable lines or as one JSON object per line. Traces: the spans of
//! RPCs, executions and attempts, exported over OTLP when the `OTEL_*` variables ask for it
//! (`traces.rs`).

mod traces;

use std::io::IsTerminal;

use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, FilterFn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry, fmt};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Readable lines (coloured on a terminal).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `message`, the event's fields, and
    /// the spans it happened in.
    Json,
}

/// The longest `serve` waits at exit for the last spans to be exported.
pub const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether spans may be exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traces {
    /// Never (the client commands).
    Off,
    /// When the `OTEL_*` variables ask for it (`serve`). Must be chosen inside the tokio
    /// runtime, where the exporter's task runs.
    FromEnv,
}

/// What [`init`] started; [`Telemetry::shutdown`] sends the spans still buffered.
#[derive(Debug, Default)]
#[must_use = "spans still buffered are lost unless it is shut down"]
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.traces.is_some()
    }

    /// Exports what is buffered and stops the exporter, waiting for it off the async
    /// threads at most [`FLUSH_TIMEOUT`]: a collector that does not answer does not hold
    /// up the exit.
    pub async fn shutdown(self) {
        let Some(provider) = self.traces else {
            return;
        };
        let stopped = tokio::task::spawn_blocking(move || provider.shutdown());
        match tokio::time::timeout(FLUSH_TIMEOUT, stopped).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "exporting the last spans"),
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(timeout = ?FLUSH_TIMEOUT, "the last spans were not exported in time");
            }
        }
    }
}

/// Installs the global subscriber. Safe to call more than once (later calls do nothing and
/// start nothing).
pub fn init(format: LogFormat, traces: Traces) -> Telemetry {
    let wanted = match traces {
        Traces::Off => traces::Wanted::Off,
        Traces::FromEnv => traces::wanted(&|name| std::env::var(name).ok()),
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = match format {
        LogFormat::Text => fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_ansi(std::io::stderr().is_terminal())
            .boxed(),
        LogFormat::Json => fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(false)
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .boxed(),
    };
    if tracing::dispatcher::has_been_set() {
        // Another subscriber came first: nothing would reach an exporter, so none starts.
        return Telemetry::default();
    }
    let (provider, unsupported) = match wanted {
        traces::Wanted::Off => (None, None),
        traces::Wanted::Unsupported(why) => (None, Some(why)),
        traces::Wanted::Otlp => match traces::provider() {
            Ok(provider) => (Some(provider), None),
            Err(why) => (None, Some(why)),
        },
    };
    let installed = match &provider {
        Some(provider) => {
            let spans = tracing_opentelemetry::layer()
                .with_tracer(traces::tracer(provider))
                .with_filter(exported());
            Registry::default()
                .with(logs.with_filter(filter))
                .with(spans)
                .try_init()
        }
        // Without export, one filter for the whole subscriber: no per-layer bookkeeping.
        None => Registry::default().with(logs).with(filter).try_init(),
    }
    .is_ok();
    if let Some(why) = unsupported {
        tracing::error!("traces are not exported: {why}");
    }
    if !installed {
        // Another thread installed one meanwhile: stop the exporter off the async threads
        // (one exists only with `Traces::FromEnv`, inside the runtime).
        if provider.is_some() {
            #[expect(
                clippy::disallowed_methods,
                reason = "an exporter that never exported stops in the background; nothing waits for it"
            )]
            tokio::spawn(Telemetry { traces: provider }.shutdown());
        }
        return Telemetry::default();
    }
    if provider.is_some() {
        tracing::info!("exporting traces over OTLP");
    }
    Telemetry { traces: provider }
}

/// What the exporter sees: this crate's spans, at `debug`, so logs at the default level never
/// pay for them. Log events are not exported: some carry what a provider sent (a malformed
/// reply's text), and nothing a prompt or an output holds goes on a span.
fn exported() -> FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool> {
    FilterFn::new(|meta: &tracing::Metadata<'_>| {
        meta.is_span()
            && meta.target().starts_with("model_runtime")
            && *meta.level() <= Level::DEBUG
    })
}
