//! Price tables: the operator's own (TOML) or the community map LiteLLM publishes
//! (`model_prices_and_context_window.json`), read into one list of prices, each for a
//! provider (or any), a model and a unit, from a time on.

use std::collections::HashMap;
use std::path::Path;
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::amount::Amount;

mod error;

pub use error::{LiteLlmError, LoadError, TimeError, TomlTableError};

/// One price: what one `unit` of `model` costs from `from` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    /// The provider (a provider's name in the runtime's config); `None` for any.
    pub provider: Option<String>,
    /// The model, as the runtime's facts name it.
    pub model: String,
    /// The usage unit.
    pub unit: String,
    /// Per one unit.
    pub price: Amount,
    /// In effect from then on; `None` for always.
    pub from: Option<SystemTime>,
}

/// A price table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceTable {
    /// The currency every price is in (`USD` unless the table says).
    pub currency: String,
    /// By model and unit: a fact's lookup reads only its own (LiteLLM's map has thousands).
    prices: HashMap<(String, String), Vec<Price>>,
}

/// Why no price applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// No price for the key at all.
    NoPrice(String),
    /// Prices for the key start only after the fact.
    NotYet(String),
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoPrice(key) => write!(f, "no price for {key}"),
            Self::NotYet(key) => write!(f, "no price for {key} in effect at the fact's time"),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    currency: Option<String>,
    #[serde(default)]
    prices: Vec<RawPrice>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    provider: Option<String>,
    model: String,
    unit: String,
    price: toml::Value,
    per: Option<u64>,
    from: Option<String>,
}

/// LiteLLM's fields, by the runtime unit each prices.
const LITELLM: [(&str, &str); 5] = [
    ("input_cost_per_token", "input_tokens"),
    ("output_cost_per_token", "output_tokens"),
    ("cache_read_input_token_cost", "cached_input_tokens"),
    (
        "cache_creation_input_token_cost",
        "cache_write_input_tokens",
    ),
    ("output_cost_per_reasoning_token", "reasoning_tokens"),
];

impl PriceTable {
    /// The table in `path`: LiteLLM's map if it ends in `.json`, else the TOML table.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_litellm(&text).map_err(|source| LoadError::LiteLlm {
                path: path.to_owned(),
                source,
            })
        } else {
            Self::from_toml(&text).map_err(|source| LoadError::Toml {
                path: path.to_owned(),
                source,
            })
        }
    }

    /// A TOML table:
    ///
    /// ```toml
    /// currency = "USD"
    /// [[prices]]
    /// provider = "openai"   # optional: any provider when left out
    /// model = "gpt-4o"
    /// unit = "input_tokens"
    /// price = "2.50"        # a string: TOML floats are binary and would round
    /// per = 1000000         # optional: the price is for this many units (default 1)
    /// from = "2025-01-01"   # optional: a UTC date or an RFC 3339 time
    /// ```
    pub fn from_toml(text: &str) -> Result<Self, TomlTableError> {
        let raw: RawTable = toml::from_str(text)?;
        let mut prices = Vec::with_capacity(raw.prices.len());
        for (index, p) in raw.prices.into_iter().enumerate() {
            let text = match &p.price {
                toml::Value::String(text) => text.clone(),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(_) => return Err(TomlTableError::FloatPrice { index }),
                other => {
                    return Err(TomlTableError::NotAPrice {
                        index,
                        found: other.type_str(),
                    });
                }
            };
            let amount = Amount::parse(&text)
                .map_err(|source| TomlTableError::InvalidPrice { index, source })?;
            if amount.is_negative() {
                return Err(TomlTableError::NegativePrice { index });
            }
            let per = p.per.unwrap_or(1);
            if per == 0 {
                return Err(TomlTableError::ZeroPer { index });
            }
            let Some(price) = amount.per(per) else {
                return Err(TomlTableError::IndivisiblePer {
                    index,
                    price: text,
                    per,
                });
            };
            let from = p
                .from
                .as_deref()
                .map(|t| time(t).map_err(|source| TomlTableError::InvalidFrom { index, source }))
                .transpose()?;
            let price = Price {
                provider: p.provider,
                model: p.model,
                unit: p.unit,
                price,
                from,
            };
            if prices.iter().any(|other: &Price| {
                (&other.provider, &other.model, &other.unit, other.from)
                    == (&price.provider, &price.model, &price.unit, price.from)
            }) {
                return Err(TomlTableError::DuplicatePrice {
                    index,
                    provider: price.provider,
                    model: price.model,
                    unit: price.unit,
                });
            }
            prices.push(price);
        }
        Ok(Self::of(
            raw.currency.unwrap_or_else(|| "USD".to_owned()),
            prices,
        ))
    }

    fn of(currency: String, list: Vec<Price>) -> Self {
        let mut prices: HashMap<(String, String), Vec<Price>> = HashMap::new();
        for price in list {
            prices
                .entry((price.model.clone(), price.unit.clone()))
                .or_default()
                .push(price);
        }
        Self { currency, prices }
    }

    /// LiteLLM's `model_prices_and_context_window.json`: per model, the cost of an input,
    /// output, cache-read, cache-write and reasoning token, read from the numbers' text as
    /// written (never through a float). A unit it gives no cost for gets no price.
    pub fn from_litellm(text: &str) -> Result<Self, LiteLlmError> {
        let models: HashMap<String, Box<RawValue>> = serde_json::from_str(text)?;
        let mut prices = Vec::new();
        for (model, entry) in &models {
            // `sample_spec` documents the fields; an entry that is not an object is skipped.
            let Ok(fields) = serde_json::from_str::<HashMap<String, Box<RawValue>>>(entry.get())
            else {
                continue;
            };
            if model == "sample_spec" {
                continue;
            }
            for (field, unit) in LITELLM {
                let Some(value) = fields.get(field).map(|v| v.get()) else {
                    continue;
                };
                if value == "null" {
                    continue;
                }
                let price = Amount::parse(value).map_err(|source| LiteLlmError::InvalidPrice {
                    model: model.clone(),
                    field,
                    source,
                })?;
                if price.is_negative() {
                    return Err(LiteLlmError::NegativePrice {
                        model: model.clone(),
                        field,
                    });
                }
                prices.push(Price {
                    provider: None,
                    model: model.clone(),
                    unit: unit.to_owned(),
                    price,
                    from: None,
                });
            }
        }
        Ok(Self::of("USD".to_owned(), prices))
    }

    /// The price of one `unit` of `model` at `provider` at time `at`: the latest in effect,
    /// a provider's own before one for any provider.
    pub fn find(
        &self,
        provider: &str,
        model: &str,
        unit: &str,
        at: SystemTime,
    ) -> Result<Amount, Missing> {
        let candidates = self
            .prices
            .get(&(model.to_owned(), unit.to_owned()))
            .map_or(&[][..], Vec::as_slice);
        for own in [true, false] {
            let in_effect = candidates
                .iter()
                .filter(|p| match &p.provider {
                    Some(name) => own && name == provider,
                    None => !own,
                })
                .filter(|p| p.from.is_none_or(|from| from <= at));
            if let Some(price) = in_effect.max_by_key(|p| p.from) {
                return Ok(price.price);
            }
        }
        let key = format!("{provider}/{model}/{unit}");
        let any = candidates
            .iter()
            .any(|p| p.provider.as_deref().is_none_or(|name| name == provider));
        Err(if any {
            Missing::NotYet(key)
        } else {
            Missing::NoPrice(key)
        })
    }
}

/// A UTC date (`2025-01-01`, its midnight) or an RFC 3339 time in UTC (`...Z`).
pub(super) fn time(text: &str) -> Result<SystemTime, TimeError> {
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    humantime::parse_rfc3339(&full).map_err(|source| TimeError {
        text: text.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests;
