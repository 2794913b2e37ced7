//! Pricing usage facts: an optional tool, apart from execution truth. The draft keeps prices
//! out of the execution path (usage fact -> price resolution -> ledger -> invoice; only the
//! first step is the runtime's), so the runtime does not depend on this crate: only the
//! `model-runtime price` command does, on facts from `StreamUsage` or a JSONL file. It knows
//! facts by their wire shape (the export's JSON lines), not by the runtime's types.
//!
//! A fact resolves to a priced line, or to an explicit `unpriced` line naming the key it
//! lacks: never a silent zero. Money is exact decimal ([`Amount`]). A unit that is part of
//! another (`cached_input_tokens` and `cache_write_input_tokens` of `input_tokens`,
//! `reasoning_tokens` of `output_tokens`, as the runtime reports them) is priced as the
//! difference from the whole's price, since the whole's fact already counts those tokens:
//! a cache read is a discount, a cache write a surcharge.

// A `pub` item is part of this library's contract; anything else says `pub(crate)`, so the
// surface is read from the code and does not grow by accident.
#![warn(unreachable_pub)]

mod amount;
mod report;
mod table;

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

pub use amount::{Amount, AmountError};
pub use report::{Report, ReportError, SourceTotal, Total};
pub use table::{LiteLlmError, LoadError, Missing, Price, PriceTable, TimeError, TomlTableError};

/// The units that are part of another, and the whole each is part of.
const PART_OF: [(&str, &str); 3] = [
    ("cached_input_tokens", "input_tokens"),
    ("cache_write_input_tokens", "input_tokens"),
    ("reasoning_tokens", "output_tokens"),
];

/// A usage fact as `StreamUsage` delivers it (and `model-runtime usage` writes it, one JSON
/// object per line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// Where it stands in the store's usage order.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cursor: String,
    /// The execution that reported it.
    pub execution_id: String,
    /// The attempt it belongs to.
    pub attempt: u32,
    /// The provider of that attempt (its name in the runtime's config).
    pub provider: String,
    /// The model of that attempt.
    pub model: String,
    /// The unit.
    pub unit: String,
    /// The quantity.
    pub quantity: u64,
    /// Who measured it.
    pub source: String,
    /// The request's labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// When the store kept it (RFC 3339).
    pub time: String,
}

/// What a fact comes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Line {
    /// Priced: `quantity` at `unit_price`.
    Priced {
        /// The fact.
        fact: Fact,
        /// Per unit; for a part of another unit, the difference from the whole's price.
        unit_price: Amount,
        /// The unit whose price `unit_price` is the difference from, for a part.
        #[serde(skip_serializing_if = "Option::is_none")]
        part_of: Option<&'static str>,
        /// `quantity * unit_price`.
        amount: Amount,
    },
    /// Not priced, and why: the key it has no price for.
    Unpriced {
        /// The fact.
        fact: Fact,
        /// Why.
        missing: String,
    },
}

impl Line {
    /// The fact it prices.
    pub fn fact(&self) -> &Fact {
        match self {
            Self::Priced { fact, .. } | Self::Unpriced { fact, .. } => fact,
        }
    }
}

/// What `fact` comes to under `table`.
pub fn resolve(table: &PriceTable, fact: Fact) -> Line {
    let priced = time_of(&fact).and_then(|at| {
        let find = |unit: &str| table.find(&fact.provider, &fact.model, unit, at);
        let part_of = PART_OF
            .iter()
            .find(|(part, _)| *part == fact.unit)
            .map(|(_, whole)| *whole);
        let own = find(&fact.unit).map_err(|missing| match part_of {
            Some(whole) => Unpriced::PartMissing { missing, whole },
            None => Unpriced::Missing(missing),
        })?;
        let unit_price = match part_of {
            Some(whole) => own
                .checked_sub(find(whole).map_err(Unpriced::Missing)?)
                .ok_or(Unpriced::DifferenceOutOfRange)?,
            None => own,
        };
        let amount = unit_price
            .times(fact.quantity)
            .ok_or(Unpriced::AmountOutOfRange {
                quantity: fact.quantity,
                unit_price,
            })?;
        Ok((unit_price, part_of, amount))
    });
    match priced {
        Ok((unit_price, part_of, amount)) => Line::Priced {
            fact,
            unit_price,
            part_of,
            amount,
        },
        Err(why) => Line::Unpriced {
            fact,
            missing: why.to_string(),
        },
    }
}

/// Why a fact is not priced: its text is a [`Line::Unpriced`]'s `missing`.
#[derive(Debug, thiserror::Error)]
enum Unpriced {
    /// The fact's time does not parse.
    #[error("the fact's time `{text}` is not RFC 3339: {source}")]
    Time {
        /// The time as the fact gives it.
        text: String,
        /// Why it does not parse.
        source: humantime::TimestampError,
    },
    /// No price for the fact's unit, or for the whole it is part of.
    #[error("{0}")]
    Missing(Missing),
    /// No price for the fact's unit, which is part of another: still unpriced (no price is
    /// made up), but the text says where those tokens are counted.
    #[error("{missing} (part of {whole}, which counts these tokens too)")]
    PartMissing {
        /// The key without a price.
        missing: Missing,
        /// The unit it is part of.
        whole: &'static str,
    },
    /// The part's price less the whole's does not fit an [`Amount`].
    #[error("the price difference is out of range")]
    DifferenceOutOfRange,
    /// The quantity times the unit price does not fit an [`Amount`].
    #[error("{quantity} times {unit_price} is out of range")]
    AmountOutOfRange {
        /// The fact's quantity.
        quantity: u64,
        /// Its price per unit.
        unit_price: Amount,
    },
}

/// When the store kept `fact`.
fn time_of(fact: &Fact) -> Result<SystemTime, Unpriced> {
    humantime::parse_rfc3339(&fact.time).map_err(|source| Unpriced::Time {
        text: fact.time.clone(),
        source,
    })
}

#[cfg(test)]
mod tests;
