//! The services a few tests need beside the binary (Redis, PostgreSQL), found through
//! environment variables, so `cargo test` on a machine with nothing but the Rust toolchain
//! still passes: a test whose service is missing says so on one line and returns early.
//! In CI (`CI=true`) a missing service is a failure instead, so a broken CI setup cannot
//! turn those tests into silent passes. `.ci/run` starts the services and sets the variables.

use std::fmt::Display;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The Redis the tests may use, e.g. `redis://127.0.0.1:6379`.
pub const REDIS_URL_ENV: &str = "MODEL_RUNTIME_TEST_REDIS_URL";

/// The PostgreSQL the tests may use, e.g. `postgres://postgres@127.0.0.1:5432/postgres`.
pub const POSTGRES_URL_ENV: &str = "MODEL_RUNTIME_TEST_POSTGRES_URL";

/// How long a service may take to accept a connection before it counts as not answering.
const ANSWER: Duration = Duration::from_secs(1);

/// Whether this run is CI's, where nothing may be skipped.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A test cannot run here because `reason`: in CI that fails the test; elsewhere it prints
/// one line and the caller returns early.
pub fn unavailable(reason: impl Display) {
    assert!(!in_ci(), "CI=true and {reason}");
    eprintln!("skipped: {reason}");
}

/// The value of `variable`, or `None` (after [`unavailable`]) when it is unset or empty.
pub fn url_from(variable: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            unavailable(format_args!("{variable} is not set"));
            None
        }
    }
}

/// `MODEL_RUNTIME_TEST_REDIS_URL`, or `None` when it is unset (see [`url_from`]).
pub fn redis_url() -> Option<String> {
    url_from(REDIS_URL_ENV)
}

/// `MODEL_RUNTIME_TEST_POSTGRES_URL`, or `None` when it is unset (see [`url_from`]).
pub fn postgres_url() -> Option<String> {
    url_from(POSTGRES_URL_ENV)
}

/// [`redis_url`], when that Redis also accepts a connection.
pub fn redis_answering() -> Option<String> {
    answering(REDIS_URL_ENV, 6379)
}

/// [`postgres_url`], when that PostgreSQL also accepts a connection.
pub fn postgres_answering() -> Option<String> {
    answering(POSTGRES_URL_ENV, 5432)
}

/// The URL in `variable` when a connection to it opens within a second; else `None`
/// (after [`unavailable`]). Only the socket is tried: whether the service then speaks its
/// protocol is the test's business.
fn answering(variable: &str, default_port: u16) -> Option<String> {
    let url = url_from(variable)?;
    if let Err(error) = connects(&url, default_port) {
        unavailable(format_args!("{variable}={url} does not answer: {error}"));
        return None;
    }
    Some(url)
}

/// Opens (and closes) a connection to the host and port, or the Unix socket, of `url`.
pub fn connects(url: &str, default_port: u16) -> std::io::Result<()> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    if scheme.ends_with("unix") {
        // `redis+unix:///path/r.sock` or `unix:///path/r.sock`, maybe with `?db=0`.
        let path = rest.split(['?', '#']).next().unwrap_or(rest);
        return UnixStream::connect(path).map(drop);
    }
    // scheme://[user[:password]@]host[:port][/path][?query]
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // An IPv6 literal is bracketed (`[::1]:6379`), so its colons are not a port's.
    let has_port = match host_port.strip_prefix('[') {
        Some(v6) => v6.contains("]:"),
        None => host_port.contains(':'),
    };
    let target = if has_port {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
    };
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for addr in target.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, ANSWER) {
            Ok(_) => return Ok(()),
            Err(error) => last = error,
        }
    }
    Err(last)
}
