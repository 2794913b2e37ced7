//! The cases: each drives executions through named provider behaviours and concludes about
//! the rules it names. A case the implementation cannot be configured for (a second replica,
//! a known retention) concludes `unsupported`, never `pass`.

mod admission;
mod commit;
mod errors;
mod routing;
mod streams;
mod usage;

use crate::observe::Ctx;
use crate::verdict::Verdict;

/// One case: its name, the rules it concludes about, whether it checks SHOULD rules (run
/// with `--strict` only), and whether it runs alone (its verdict rests on timing, or on the
/// implementation being otherwise idle).
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub rules: &'static [&'static str],
    pub should: bool,
    pub alone: bool,
}

const fn must(name: &'static str, rules: &'static [&'static str]) -> Case {
    Case {
        name,
        rules,
        should: false,
        alone: false,
    }
}

impl Case {
    const fn alone(mut self) -> Self {
        self.alone = true;
        self
    }
}

/// Every case, in the order the report lists them.
pub const CASES: &[Case] = &[
    must("answer", &["ROUTE-1", "ROUTE-2", "ROUTE-11", "USAGE-1"]),
    must(
        "fallback before output",
        &["COMMIT-1", "ROUTE-8", "ROUTE-11"],
    ),
    must("cut after a text delta", &["COMMIT-2", "COMMIT-4"]),
    must("cut after a tool call", &["COMMIT-2", "COMMIT-4"]),
    must("stall after a text delta", &["COMMIT-2"]),
    must("reasoning then a cut", &["COMMIT-3"]),
    must("usage then a cut", &["COMMIT-3", "USAGE-2"]),
    must("buffered delivery", &["COMMIT-5"]),
    must("rejected by a target", &["ROUTE-8"]),
    must("unknown outcome", &["ROUTE-8", "ROUTE-9"]),
    must("allow_fallback false", &["ROUTE-7"]),
    must("max_attempts", &["ROUTE-5", "ERR-4"]),
    must("retry budget", &["ROUTE-6"]).alone(),
    must("capability filtering", &["ROUTE-3"]),
    must("deterministic order", &["ROUTE-4"]),
    must("admission", &["ADMIT-1", "ADMIT-2", "ROUTE-10", "ROUTE-11"]).alone(),
    must("provider usage", &["USAGE-3"]),
    must("usage export", &["USAGE-5"]),
    must(
        "cursors",
        &["CURSOR-1", "CURSOR-2", "CURSOR-3", "CURSOR-4", "EXEC-7"],
    ),
    must("idempotency", &["IDEM-1", "IDEM-2"]),
    must("cancel", &["CANCEL-1", "CANCEL-2", "EXEC-6"]).alone(),
    must("deadline", &["DEADLINE-1", "COMMIT-4"]).alone(),
    must("bad input", &["ERR-1", "ERR-2"]),
    must("second replica", &["CANCEL-3", "EXEC-5"]),
    must("retention", &["IDEM-3", "STORE-2"]).alone(),
    Case {
        name: "ejection",
        rules: &["ROUTE-12"],
        should: true,
        alone: false,
    },
];

/// Runs `case` against `ctx`'s implementation.
pub async fn run(case: &Case, ctx: &Ctx) -> Vec<Verdict> {
    let name = case.name;
    match name {
        "answer" => routing::answer(ctx, name).await,
        "fallback before output" => commit::fallback(ctx, name).await,
        "cut after a text delta" => commit::cut(ctx, name, "cut-text").await,
        "cut after a tool call" => commit::cut(ctx, name, "cut-tool").await,
        "stall after a text delta" => commit::cut(ctx, name, "stall").await,
        "reasoning then a cut" => commit::uncommitted(ctx, name, "cut-reasoning").await,
        "usage then a cut" => commit::uncommitted(ctx, name, "cut-usage").await,
        "buffered delivery" => commit::buffered(ctx, name).await,
        "rejected by a target" => routing::rejected(ctx, name).await,
        "unknown outcome" => routing::unknown(ctx, name).await,
        "allow_fallback false" => routing::no_fallback(ctx, name).await,
        "max_attempts" => routing::attempts(ctx, name).await,
        "retry budget" => routing::budget(ctx, name).await,
        "capability filtering" => routing::capability(ctx, name).await,
        "deterministic order" => routing::order(ctx, name).await,
        "admission" => admission::full_queue(ctx, name).await,
        "provider usage" => usage::reported(ctx, name).await,
        "usage export" => usage::export(ctx, name).await,
        "cursors" => streams::cursors(ctx, name).await,
        "idempotency" => streams::idempotency(ctx, name).await,
        "cancel" => streams::cancel(ctx, name).await,
        "deadline" => streams::deadline(ctx, name).await,
        "bad input" => errors::bad_input(ctx, name).await,
        "second replica" => streams::second_replica(ctx, name).await,
        "retention" => streams::retention(ctx, name).await,
        "ejection" => admission::ejection(ctx, name).await,
        _ => Vec::new(),
    }
}
