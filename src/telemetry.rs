//! Logging: structured `tracing` output to stderr, filtered by `RUST_LOG` (default `info`),
//! as readable lines or as one JSON object per line.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

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

/// Installs the global subscriber. Safe to call more than once (later calls do nothing).
pub fn init(format: LogFormat) {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .try_init(),
    };
}
