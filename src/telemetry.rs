//! Logging: structured `tracing` output to stderr, filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Safe to call more than once (later calls do nothing).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
