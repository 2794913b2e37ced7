//! `[server]`.

use std::net::SocketAddr;

use super::bounds::{self, count, duration, duration_from};
use super::invalid;
use crate::config::raw::RawServer;
use crate::config::{ConfigError, Listen, ServerConfig};

fn address(key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse().map_err(|_| {
        invalid(
            key,
            format!("`{text}` is not an address like 127.0.0.1:50051"),
        )
    })
}

/// `server.listen`: an address, or `unix:` and a socket's path.
fn listen(text: &str) -> Result<Listen, ConfigError> {
    let Some(path) = text.strip_prefix("unix:") else {
        return text.parse().map(Listen::Tcp).map_err(|_| {
            invalid(
                "server.listen",
                format!(
                    "`{text}` is not an address like 127.0.0.1:50051 or a socket like \
                     unix:/run/model-runtime/mr.sock"
                ),
            )
        });
    };
    if path.is_empty() {
        return Err(invalid(
            "server.listen",
            "unix: needs a socket path, like unix:/run/model-runtime/mr.sock",
        ));
    }
    Ok(Listen::Unix(path.into()))
}

#[expect(
    clippy::too_many_lines,
    reason = "one job: each field checked against its name and bounds, a table read top to bottom"
)]
pub(super) fn server(raw: RawServer) -> Result<ServerConfig, ConfigError> {
    let default_deadline = duration(
        "server.default_deadline",
        raw.default_deadline,
        bounds::MAX_DEADLINE,
    )?;
    let max_deadline = duration(
        "server.max_deadline",
        raw.max_deadline,
        bounds::MAX_DEADLINE,
    )?;
    if default_deadline > max_deadline {
        return Err(invalid(
            "server.default_deadline",
            "must not be longer than server.max_deadline",
        ));
    }
    Ok(ServerConfig {
        listen: listen(&raw.listen)?,
        metrics_listen: raw
            .metrics_listen
            .as_deref()
            .map(|text| address("server.metrics_listen", text))
            .transpose()?,
        drain_timeout: duration_from(
            "server.drain_timeout",
            raw.drain_timeout,
            std::time::Duration::ZERO,
            bounds::MAX_WAIT,
        )?,
        default_deadline,
        max_deadline,
        max_input_bytes: count(
            "server.max_input_bytes",
            raw.max_input_bytes,
            1,
            bounds::MAX_INPUT_BYTES,
        )?,
        max_output_bytes: count(
            "server.max_output_bytes",
            raw.max_output_bytes,
            1,
            bounds::MAX_OUTPUT_BYTES,
        )?,
        // Room for acceptance, routing, an attempt and the terminal event at least.
        max_events_per_execution: count(
            "server.max_events_per_execution",
            raw.max_events_per_execution,
            16,
            bounds::MAX_EVENTS,
        )?,
        max_watchers_per_execution: count(
            "server.max_watchers_per_execution",
            raw.max_watchers_per_execution,
            1,
            bounds::MAX_WATCHERS,
        )?,
        max_connections: count(
            "server.max_connections",
            raw.max_connections,
            1,
            bounds::MAX_CONNECTIONS,
        )?,
        max_concurrent_streams: count(
            "server.max_concurrent_streams",
            raw.max_concurrent_streams,
            1,
            bounds::MAX_STREAMS,
        )?,
        max_unsent_bytes: count(
            "server.max_unsent_bytes",
            raw.max_unsent_bytes,
            bounds::MIN_UNSENT_BYTES,
            bounds::MAX_UNSENT_BYTES,
        )?,
        handshake_timeout: duration(
            "server.handshake_timeout",
            raw.handshake_timeout,
            bounds::MAX_HANDSHAKE,
        )?,
        request_timeout: duration(
            "server.request_timeout",
            raw.request_timeout,
            bounds::MAX_WAIT,
        )?,
        idle_timeout: duration("server.idle_timeout", raw.idle_timeout, bounds::MAX_WAIT)?,
        keepalive_interval: duration(
            "server.keepalive_interval",
            raw.keepalive_interval,
            bounds::MAX_WAIT,
        )?,
        keepalive_timeout: duration(
            "server.keepalive_timeout",
            raw.keepalive_timeout,
            bounds::MAX_WAIT,
        )?,
        stream_idle_timeout: duration(
            "server.stream_idle_timeout",
            raw.stream_idle_timeout,
            bounds::MAX_WAIT,
        )?,
        max_connection_age: raw
            .max_connection_age
            .map(|age| {
                duration_from(
                    "server.max_connection_age",
                    age,
                    bounds::MIN_CONNECTION_AGE,
                    bounds::MAX_CONNECTION_AGE,
                )
            })
            .transpose()?,
        max_connection_age_grace: duration_from(
            "server.max_connection_age_grace",
            raw.max_connection_age_grace,
            std::time::Duration::ZERO,
            bounds::MAX_CONNECTION_AGE,
        )?,
        access_log: raw.access_log,
    })
}
