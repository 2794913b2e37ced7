//! The rules the kit holds an implementation to: read from `docs/protocol.md` (the one
//! place they are written), and for each rule no case can observe from outside, why.

/// MUST or SHOULD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Must,
    Should,
}

/// One rule of `docs/protocol.md`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub level: Level,
}

/// The protocol, as the kit was built with it.
pub const PROTOCOL: &str = include_str!("../../../docs/protocol.md");

/// Every rule, in the order the protocol states them: each line `- **ID** (MUST)` or
/// `(SHOULD)`.
pub fn all() -> Vec<Rule> {
    PROTOCOL
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("- **")?;
            let (id, rest) = rest.split_once("**")?;
            let rest = rest.trim_start();
            let level = if rest.starts_with("(MUST)") {
                Level::Must
            } else if rest.starts_with("(SHOULD)") {
                Level::Should
            } else {
                return None;
            };
            Some(Rule {
                id: id.to_owned(),
                level,
            })
        })
        .collect()
}

/// The rules no case observes from outside, and why: each is held by the runtime's own
/// tests, which can reach inside (kill a replica, fail a statement, stop the process).
pub const UNOBSERVED: &[(&str, &str)] = &[
    (
        "ERR-3",
        "needs an infrastructure fault (a failing store) the kit cannot cause from outside",
    ),
    (
        "ADMIT-3",
        "first come, first served among waiters needs a queue the kit can fill in a known order, which an address alone does not give",
    ),
    (
        "ADMIT-4",
        "priority classes need a queue the kit can fill in a known order, which an address alone does not give",
    ),
    (
        "DRAIN-1",
        "the kit does not stop the implementation it runs against",
    ),
    (
        "DRAIN-2",
        "the kit does not stop the implementation it runs against",
    ),
    (
        "DRAIN-3",
        "the kit does not stop the implementation it runs against",
    ),
    (
        "STORE-1",
        "needs a restart or a lost owner: the kit does not kill the implementation",
    ),
    (
        "STORE-3",
        "needs a replica that loses its lease: the kit does not pause or kill replicas",
    ),
    (
        "STORE-4",
        "needs a store statement whose answer is lost: the kit does not reach the store",
    ),
    (
        "HTTP-1",
        "the kit drives the gRPC API; the HTTP ingress is checked with the stock SDKs (scripts/sdk_check.sh)",
    ),
    (
        "HTTP-2",
        "the kit drives the gRPC API; the HTTP ingress is checked with the stock SDKs (scripts/sdk_check.sh)",
    ),
    (
        "HTTP-3",
        "the kit drives the gRPC API; the HTTP ingress is checked with the stock SDKs (scripts/sdk_check.sh)",
    ),
    (
        "HTTP-4",
        "the kit drives the gRPC API; the HTTP ingress is checked with the stock SDKs (scripts/sdk_check.sh)",
    ),
    (
        "HTTP-5",
        "the kit drives the gRPC API; the HTTP ingress is checked with the stock SDKs (scripts/sdk_check.sh)",
    ),
];

/// Why `id` is not observed, if it is one of [`UNOBSERVED`].
pub fn unobserved(id: &str) -> Option<&'static str> {
    UNOBSERVED
        .iter()
        .find(|(rule, _)| *rule == id)
        .map(|(_, why)| *why)
}
