//! What a case concludes about one rule: pass, fail (with the evidence: the events the caller
//! saw and the requests the provider received), or unsupported (with why).

use serde::Serialize;

/// One case's conclusion about one rule.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The rule's id in `docs/protocol.md`.
    pub rule: &'static str,
    /// The case that reached it.
    pub case: &'static str,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Pass, fail or unsupported.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail {
        /// What was wrong, in one sentence.
        message: String,
        #[serde(flatten)]
        evidence: Evidence,
    },
    Unsupported {
        /// Why the case could not run against this implementation.
        reason: String,
    },
}

impl Outcome {
    /// `pass`, `fail` or `unsupported`.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail { .. } => "fail",
            Self::Unsupported { .. } => "unsupported",
        }
    }
}

/// A failure's minimal example: one line per event and per provider request.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Evidence {
    /// The events the caller received, one line each.
    pub events: Vec<String>,
    /// What the provider received, one line each, timed from the submission.
    pub received: Vec<String>,
}

impl Verdict {
    pub fn pass(case: &'static str, rule: &'static str) -> Self {
        Self {
            rule,
            case,
            outcome: Outcome::Pass,
        }
    }

    pub fn fail(
        case: &'static str,
        rule: &'static str,
        message: impl Into<String>,
        evidence: Evidence,
    ) -> Self {
        Self {
            rule,
            case,
            outcome: Outcome::Fail {
                message: message.into(),
                evidence,
            },
        }
    }

    pub fn unsupported(case: &'static str, rule: &'static str, reason: impl Into<String>) -> Self {
        Self {
            rule,
            case,
            outcome: Outcome::Unsupported {
                reason: reason.into(),
            },
        }
    }

    /// A failure of each of `rules`: the case could not do what all of them need.
    pub fn fail_all(
        case: &'static str,
        rules: &[&'static str],
        message: &str,
        evidence: &Evidence,
    ) -> Vec<Self> {
        rules
            .iter()
            .map(|rule| Self::fail(case, rule, message, evidence.clone()))
            .collect()
    }

    /// Pass if `held`, else fail with `message` and `evidence`.
    pub fn check(
        case: &'static str,
        rule: &'static str,
        held: bool,
        message: impl FnOnce() -> String,
        evidence: impl FnOnce() -> Evidence,
    ) -> Self {
        if held {
            Self::pass(case, rule)
        } else {
            Self::fail(case, rule, message(), evidence())
        }
    }
}
