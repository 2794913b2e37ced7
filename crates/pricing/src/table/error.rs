//! Why a price table cannot be read: from a file, from its TOML or LiteLLM text, or a
//! price's `from` time.

use std::path::PathBuf;

use crate::AmountError;

/// Why a price table cannot be loaded from a file
/// ([`PriceTable::load`](crate::PriceTable::load)).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (its `kind()` tells a missing file from a denied one).
        source: std::io::Error,
    },
    /// The file (not ending in `.json`) is not a valid TOML table.
    #[error("{}: {source}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        source: TomlTableError,
    },
    /// The file (ending in `.json`) is not a valid LiteLLM map.
    #[error("{}: {source}", path.display())]
    LiteLlm {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        source: LiteLlmError,
    },
}

/// Why a TOML text is not a price table
/// ([`PriceTable::from_toml`](crate::PriceTable::from_toml)). Each variant past `Parse` names
/// the entry by its `index` in `prices` and says which key of it is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TomlTableError {
    /// Not TOML, or not a table's shape: an unknown or missing key, a value of a wrong type.
    #[error("{0}")]
    Parse(#[from] toml::de::Error),
    /// `price` is a TOML float, which would round it.
    #[error(
        "prices[{index}].price: write the price as a string (\"2.50\"): a TOML float would round it"
    )]
    FloatPrice {
        /// The entry's index in `prices`.
        index: usize,
    },
    /// `price` is neither a string nor an integer.
    #[error("prices[{index}].price: is a {found}, not a price (\"2.50\")")]
    NotAPrice {
        /// The entry's index in `prices`.
        index: usize,
        /// The TOML type it is (`boolean`, `array`, ...).
        found: &'static str,
    },
    /// `price` is not a decimal amount.
    #[error("prices[{index}].price: {source}")]
    InvalidPrice {
        /// The entry's index in `prices`.
        index: usize,
        /// Why.
        source: AmountError,
    },
    /// `price` is below zero.
    #[error("prices[{index}].price: is negative")]
    NegativePrice {
        /// The entry's index in `prices`.
        index: usize,
    },
    /// `per` is 0.
    #[error("prices[{index}].per: must be at least 1")]
    ZeroPer {
        /// The entry's index in `prices`.
        index: usize,
    },
    /// `price` divided by `per` needs more than 18 decimal places.
    #[error("prices[{index}].per: {price} per {per} does not divide to 18 decimal places")]
    IndivisiblePer {
        /// The entry's index in `prices`.
        index: usize,
        /// The price as written.
        price: String,
        /// The number of units it is for.
        per: u64,
    },
    /// `from` is not a time.
    #[error("prices[{index}].from: {source}")]
    InvalidFrom {
        /// The entry's index in `prices`.
        index: usize,
        /// Why.
        source: TimeError,
    },
    /// An earlier entry has the same provider, model, unit and `from`.
    #[error(
        "prices[{index}]: a second price for {}/{model}/{unit} from the same time",
        .provider.as_deref().unwrap_or("*")
    )]
    DuplicatePrice {
        /// The second entry's index in `prices`.
        index: usize,
        /// Its provider; `None` for any.
        provider: Option<String>,
        /// Its model.
        model: String,
        /// Its unit.
        unit: String,
    },
}

/// Why a JSON text is not a LiteLLM price map
/// ([`PriceTable::from_litellm`](crate::PriceTable::from_litellm)).
#[derive(Debug, thiserror::Error)]
pub enum LiteLlmError {
    /// Not JSON, or not an object.
    #[error("not a JSON object: {0}")]
    Parse(#[from] serde_json::Error),
    /// A cost field's number is not a decimal amount (18 places at most).
    #[error("{model}.{field}: {source}")]
    InvalidPrice {
        /// The model, the map's key.
        model: String,
        /// The cost field, e.g. `input_cost_per_token`.
        field: &'static str,
        /// Why.
        source: AmountError,
    },
    /// A cost field's number is below zero.
    #[error("{model}.{field}: is negative")]
    NegativePrice {
        /// The model, the map's key.
        model: String,
        /// The cost field, e.g. `input_cost_per_token`.
        field: &'static str,
    },
}

/// A time that is neither a UTC date nor an RFC 3339 time in UTC (a price's `from`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{text}` is not a date (2025-01-01) or a UTC time (2025-01-01T08:00:00Z): {source}")]
pub struct TimeError {
    /// The text as written.
    pub text: String,
    /// Why it does not parse.
    pub source: humantime::TimestampError,
}
