//! `model-runtime-conformance`: a conformance kit for implementations of `model_runtime.v1`.
//!
//! It needs an address and nothing of the implementation but the API in `proto/`. It starts a
//! fault-injecting provider that speaks OpenAI's chat completions on loopback ([`provider`]),
//! prints the providers, policies and abilities the implementation must load to reach it
//! ([`setup`]), drives executions through named provider behaviours ([`cases`]), observes
//! both what the caller received and what the provider was sent ([`observe`]), holds every
//! execution it saw to the rules every execution must keep ([`invariants`]), and reports
//! pass, fail or unsupported per rule id of `docs/protocol.md` ([`rules`], [`report`]).
//!
//! Layers, each importing only those before it: `pb`, `rules`, `verdict`, `provider`,
//! `setup`, `observe`, `invariants`, `cases`, `report`, `run` here, and `cli` (the binary).

pub mod cases;
pub mod cli;
pub mod invariants;
pub mod observe;
pub mod provider;
pub mod report;
pub mod rules;
pub mod setup;
pub mod verdict;

/// The messages, client and plain server of `model_runtime.v1`, generated from `proto/`.
pub use model_runtime_client::pb;

use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use crate::observe::Ctx;
use crate::pb::model_runtime_client::ModelRuntimeClient;
use crate::provider::Provider;
use crate::report::Report;

/// What to run against.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The implementation's gRPC address (`http://127.0.0.1:50051` or `127.0.0.1:50051`).
    pub target: String,
    /// A second replica sharing the first's store, for the cases that need one.
    pub replica: Option<String>,
    /// The implementation's store retention, for the cases that wait for it.
    pub retention: Option<Duration>,
    /// Adds the SHOULD cases.
    pub strict: bool,
    /// Runs only the cases with these names or concluding about these rule ids.
    pub only: Vec<String>,
    /// How long to wait for the implementation to accept a connection.
    pub wait: Duration,
}

/// The implementation could not be reached.
#[derive(Debug)]
pub struct Unreachable {
    pub target: String,
    pub cause: tonic::transport::Error,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot reach {}: {}", self.target, self.cause)
    }
}

impl std::error::Error for Unreachable {}

/// `address` as a URI tonic connects to.
fn uri(address: &str) -> String {
    if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    }
}

/// A client of `address`, retried until `wait` has passed.
async fn connect(
    address: &str,
    wait: Duration,
) -> Result<ModelRuntimeClient<Channel>, Unreachable> {
    let unreachable = |cause| Unreachable {
        target: address.to_owned(),
        cause,
    };
    let endpoint = Endpoint::from_shared(uri(address))
        .map_err(unreachable)?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5));
    let give_up = tokio::time::Instant::now() + wait;
    loop {
        match endpoint.connect().await {
            Ok(channel) => return Ok(ModelRuntimeClient::new(channel)),
            Err(cause) if tokio::time::Instant::now() >= give_up => return Err(unreachable(cause)),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Runs the cases `options` selects against the implementation, through `provider` (which
/// the implementation was configured with: [`setup::config`] of its address).
pub async fn run(options: &Options, provider: &Provider) -> Result<Report, Unreachable> {
    let client = connect(&options.target, options.wait).await?;
    let replica = match &options.replica {
        Some(address) => Some(connect(address, options.wait).await?),
        None => None,
    };
    let ctx = Ctx::new(
        client,
        replica,
        options.retention,
        Arc::clone(provider.shared_log()),
    );
    let chosen: Vec<&cases::Case> = cases::CASES
        .iter()
        .filter(|case| options.strict || !case.should)
        .filter(|case| {
            options.only.is_empty()
                || options
                    .only
                    .iter()
                    .any(|o| o == case.name || case.rules.contains(&o.as_str()))
        })
        .collect();
    // Together first, then one at a time those whose verdict rests on timing or on an
    // otherwise idle implementation.
    let together = chosen.iter().filter(|case| !case.alone);
    let mut verdicts: Vec<_> =
        futures_util::future::join_all(together.map(|case| cases::run(case, &ctx)))
            .await
            .into_iter()
            .flatten()
            .collect();
    for case in chosen.iter().filter(|case| case.alone) {
        verdicts.extend(cases::run(case, &ctx).await);
    }
    verdicts.extend(invariants::check(&ctx));
    Ok(Report::new(
        options.target.clone(),
        options.strict,
        verdicts,
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::{cases, invariants, rules};

    /// Every rule of the protocol is concluded about by a case or the invariants, or says why
    /// it cannot be observed from outside; and every id the kit names is one of the protocol's.
    #[test]
    fn every_rule_is_covered_or_says_why_not() {
        let defined: BTreeSet<String> = rules::all().into_iter().map(|r| r.id).collect();
        assert!(defined.len() > 60, "{} rules read", defined.len());
        let unobservable = rules::unobservable();
        assert!(unobservable.len() >= 10, "{unobservable:?}");
        assert!(
            unobservable.iter().all(|(_, why)| why.len() > 20),
            "{unobservable:?}"
        );
        let covered: BTreeSet<&str> = cases::CASES
            .iter()
            .flat_map(|c| c.rules.iter().copied())
            .chain(invariants::rules())
            .collect();
        for id in covered
            .iter()
            .copied()
            .chain(rules::unobservable().iter().map(|(id, _)| id.as_str()))
        {
            assert!(
                defined.contains(id),
                "the kit names {id}, which docs/protocol.md does not define"
            );
        }
        for id in &defined {
            let by_case = covered.contains(id.as_str());
            let unobserved = rules::unobserved(id).is_some();
            assert!(
                by_case || unobserved,
                "{id}: no case concludes about it, and no reason says why"
            );
            assert!(
                !(by_case && unobserved),
                "{id}: both observed by a case and listed as unobservable"
            );
        }
    }

    /// SHOULD cases conclude about SHOULD rules only, MUST cases about MUST rules only.
    #[test]
    fn cases_keep_to_their_level() {
        let levels: std::collections::BTreeMap<String, rules::Level> =
            rules::all().into_iter().map(|r| (r.id, r.level)).collect();
        for case in cases::CASES {
            let want = if case.should {
                rules::Level::Should
            } else {
                rules::Level::Must
            };
            for rule in case.rules {
                assert_eq!(
                    levels[*rule], want,
                    "case {:?} concludes about {rule}",
                    case.name
                );
            }
        }
    }
}
