//! The tokens an answer reports, from the execution's usage facts: those of the attempt that
//! gave the answer (every attempt's facts are on the execution, and in the usage export).

use crate::execution::{UsageFact, UsageUnit};

/// Tokens of one attempt, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tokens {
    pub(super) input: u64,
    pub(super) output: u64,
    /// Of `input`, served from the provider's cache.
    pub(super) cached_input: u64,
    /// Of `output`, spent on reasoning.
    pub(super) reasoning: u64,
}

/// Tokens per attempt, as usage facts come.
#[derive(Debug, Default)]
pub(super) struct Tally(Vec<(u32, Tokens)>);

impl Tally {
    pub(super) fn add(&mut self, fact: &UsageFact) {
        let at = match self.0.iter().position(|(a, _)| *a == fact.attempt) {
            Some(at) => at,
            None => {
                self.0.push((fact.attempt, Tokens::default()));
                self.0.len() - 1
            }
        };
        let tokens = &mut self.0[at].1;
        let unit = &fact.unit;
        if *unit == UsageUnit::INPUT_TOKENS {
            tokens.input += fact.quantity;
        } else if *unit == UsageUnit::OUTPUT_TOKENS {
            tokens.output += fact.quantity;
        } else if *unit == UsageUnit::CACHED_INPUT_TOKENS {
            tokens.cached_input += fact.quantity;
        } else if *unit == UsageUnit::REASONING_TOKENS {
            tokens.reasoning += fact.quantity;
        }
    }

    /// The tokens of `attempt`.
    pub(super) fn of(&self, attempt: u32) -> Tokens {
        self.0
            .iter()
            .find(|(a, _)| *a == attempt)
            .map(|(_, t)| *t)
            .unwrap_or_default()
    }
}
