//! Usage facts: what an execution consumed, in explicit units, with who measured it. A fact
//! never carries a price; pricing happens outside the execution path.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::execution::Labels;

/// A unit of consumption. Well-known units are constants; adapters may report others.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct UsageUnit(Cow<'static, str>);

impl UsageUnit {
    /// Prompt tokens.
    pub const INPUT_TOKENS: Self = Self::known("input_tokens");
    /// Generated tokens.
    pub const OUTPUT_TOKENS: Self = Self::known("output_tokens");
    /// Prompt tokens served from a provider cache.
    pub const CACHED_INPUT_TOKENS: Self = Self::known("cached_input_tokens");
    /// Prompt tokens written to the provider's cache by the call (a part of `input_tokens`,
    /// priced differently by Anthropic, hence its own unit).
    pub const CACHE_WRITE_INPUT_TOKENS: Self = Self::known("cache_write_input_tokens");
    /// Tokens spent on hidden reasoning.
    pub const REASONING_TOKENS: Self = Self::known("reasoning_tokens");
    /// Provider requests.
    pub const REQUESTS: Self = Self::known("requests");
    /// Every unit this version's adapters report.
    pub const KNOWN: [Self; 6] = [
        Self::INPUT_TOKENS,
        Self::OUTPUT_TOKENS,
        Self::CACHED_INPUT_TOKENS,
        Self::CACHE_WRITE_INPUT_TOKENS,
        Self::REASONING_TOKENS,
        Self::REQUESTS,
    ];

    const fn known(name: &'static str) -> Self {
        Self(Cow::Borrowed(name))
    }

    /// A unit by name (lowercase snake case by convention).
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        Self(name.into())
    }

    /// The unit's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UsageUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who measured a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum UsageSource {
    /// The provider reported it.
    ProviderReported,
    /// The runtime counted it.
    RuntimeMeasured,
    /// The runtime estimated it.
    RuntimeEstimated,
}

impl UsageSource {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProviderReported => "provider_reported",
            Self::RuntimeMeasured => "runtime_measured",
            Self::RuntimeEstimated => "runtime_estimated",
        }
    }
}

/// A quantity as a provider adapter reports it, before the runtime attributes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuantity {
    /// The unit.
    pub unit: UsageUnit,
    /// Non-negative by construction.
    pub quantity: u64,
    /// Who measured it.
    pub source: UsageSource,
}

/// One attributed usage fact.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UsageFact {
    /// The unit.
    pub unit: UsageUnit,
    /// The quantity.
    pub quantity: u64,
    /// Who measured it.
    pub source: UsageSource,
    /// The attempt it belongs to.
    pub attempt: u32,
    /// The provider of that attempt.
    pub provider: Arc<str>,
    /// The model of that attempt.
    pub model: Arc<str>,
    /// The request's labels. Not serialized: a store keeps them once, with the execution.
    #[serde(skip)]
    pub labels: Arc<Labels>,
    /// Where the fact stands in its store's usage order (the position of a `StreamUsage`
    /// cursor): set by the store that keeps it, 0 before. Kept with the fact, so a durable
    /// store's order survives restarts and compactions.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub position: u64,
}

fn is_zero(position: &u64) -> bool {
    *position == 0
}
