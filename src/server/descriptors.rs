//! File descriptors: the connection limits checked against what the process may open.
//!
//! Every client connection, metrics scrape and provider call holds a descriptor, and so do
//! the event store's files. Were the connections allowed to take them all, a journal segment
//! could not be opened when it is needed. At start-up the soft `RLIMIT_NOFILE` is raised
//! toward the hard one as far as the limits need (as Go's runtime does at every start); if
//! it still falls short, fewer client connections are served than `server.max_connections`,
//! and the log says so with the numbers, so the store and the providers keep theirs.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use crate::config::{AdapterConfig, Config};

/// Descriptors the process needs besides its connections: standard streams, the event loop,
/// listeners, signal handling, the store's lock, directory and open segment, and a
/// compaction's files (an idle server with the file store holds 15).
pub(super) const RESERVED: u64 = 32;

/// Connections the metrics listener serves at once; more are closed as they arrive. A
/// scraper makes one at a time.
pub(super) const METRICS_CONNECTIONS: usize = 16;

/// How many client connections to serve: `server.max_connections`, or fewer when the
/// process may not open enough descriptors for them and everything else.
pub(super) fn client_connections(config: &Config) -> usize {
    let wanted = config.server.max_connections as u64;
    let others = others(config);
    let Some(limit) = raise_to(wanted.saturating_add(others)) else {
        return config.server.max_connections;
    };
    // At least one, so a server in a tight limit still answers; it may then run short.
    let fit = limit.saturating_sub(others).min(wanted).max(1);
    if fit < wanted {
        tracing::warn!(
            max_connections = wanted,
            serving = fit,
            open_files = limit,
            needed = wanted.saturating_add(others),
            "the open-file limit (ulimit -n) leaves room for fewer client connections than \
             server.max_connections: serving at most `serving`, so the store and the \
             providers keep their descriptors; raise the limit to `needed` to serve them all"
        );
    }
    usize::try_from(fit).unwrap_or(usize::MAX)
}

/// Descriptors needed besides client connections: the reserve, metrics connections, and a
/// socket per provider call that may be in flight.
fn others(config: &Config) -> u64 {
    let metrics = if config.server.metrics_listen.is_some() {
        METRICS_CONNECTIONS as u64
    } else {
        0
    };
    let calls: u64 = config
        .providers
        .values()
        .filter(|p| !matches!(p.adapter, AdapterConfig::Scripted(_)))
        .map(|p| u64::from(p.max_concurrency))
        .sum();
    RESERVED + metrics + calls
}

/// The soft limit on open files after raising it toward `needed` (no further than the hard
/// limit); `None` when it is unlimited or cannot be read.
fn raise_to(needed: u64) -> Option<u64> {
    let Rlimit {
        current: Some(soft),
        maximum,
    } = getrlimit(Resource::Nofile)
    else {
        return None;
    };
    if soft >= needed {
        return Some(soft);
    }
    let target = maximum.map_or(needed, |hard| hard.min(needed));
    if target <= soft {
        return Some(soft);
    }
    match setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(target),
            maximum,
        },
    ) {
        Ok(()) => {
            tracing::info!(
                from = soft,
                to = target,
                "raised the open-file limit for server.max_connections"
            );
            Some(target)
        }
        Err(e) => {
            tracing::debug!(error = %e, "could not raise the open-file limit");
            Some(soft)
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn the_descriptors_besides_connections_count_metrics_and_provider_calls() {
        let mut config = Config::embedded_default().unwrap();
        assert_eq!(
            others(&config),
            RESERVED,
            "the scripted provider opens no socket"
        );
        config.server.metrics_listen = Some(([127, 0, 0, 1], 0).into());
        assert_eq!(others(&config), RESERVED + METRICS_CONNECTIONS as u64);
    }
}
