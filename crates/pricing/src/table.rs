//! Price tables: the operator's own (TOML) or the community map LiteLLM publishes
//! (`model_prices_and_context_window.json`), read into one list of prices, each for a
//! provider (or any), a model and a unit, from a time on.

use std::collections::HashMap;
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::amount::Amount;

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
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let table = if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_litellm(&text)
        } else {
            Self::from_toml(&text)
        };
        table.map_err(|e| format!("{}: {e}", path.display()))
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
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let raw: RawTable = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut prices = Vec::with_capacity(raw.prices.len());
        for (i, p) in raw.prices.into_iter().enumerate() {
            let at = |what: &str| format!("prices[{i}].{what}");
            let text = match &p.price {
                toml::Value::String(text) => text.clone(),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(_) => {
                    return Err(format!(
                        "{}: write the price as a string (\"2.50\"): a TOML float would round it",
                        at("price")
                    ));
                }
                other => {
                    return Err(format!(
                        "{}: is a {}, not a price (\"2.50\")",
                        at("price"),
                        other.type_str()
                    ));
                }
            };
            let amount = Amount::parse(&text).map_err(|e| format!("{}: {e}", at("price")))?;
            if amount.is_negative() {
                return Err(format!("{}: is negative", at("price")));
            }
            let per = p.per.unwrap_or(1);
            if per == 0 {
                return Err(format!("{}: must be at least 1", at("per")));
            }
            let price = amount.per(per).ok_or_else(|| {
                format!(
                    "{}: {text} per {per} does not divide to 18 decimal places",
                    at("per")
                )
            })?;
            let from = p
                .from
                .as_deref()
                .map(|t| time(t).map_err(|e| format!("{}: {e}", at("from"))))
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
                return Err(format!(
                    "prices[{i}]: a second price for {}/{}/{} from the same time",
                    price.provider.as_deref().unwrap_or("*"),
                    price.model,
                    price.unit
                ));
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
    pub fn from_litellm(text: &str) -> Result<Self, String> {
        let models: HashMap<String, Box<RawValue>> =
            serde_json::from_str(text).map_err(|e| format!("not a JSON object: {e}"))?;
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
                let price = Amount::parse(value).map_err(|e| format!("{model}.{field}: {e}"))?;
                if price.is_negative() {
                    return Err(format!("{model}.{field}: is negative"));
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
pub(super) fn time(text: &str) -> Result<SystemTime, String> {
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    humantime::parse_rfc3339(&full).map_err(|e| {
        format!("`{text}` is not a date (2025-01-01) or a UTC time (2025-01-01T08:00:00Z): {e}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"
currency = "EUR"
[[prices]]
provider = "openai"
model = "gpt-4o"
unit = "input_tokens"
price = "2.50"
per = 1000000
[[prices]]
provider = "openai"
model = "gpt-4o"
unit = "input_tokens"
price = "2.00"
per = 1000000
from = "2026-06-01"
[[prices]]
model = "gpt-4o"
unit = "output_tokens"
price = "0.00001"
"#;

    fn at(text: &str) -> SystemTime {
        time(text).unwrap()
    }

    #[test]
    fn the_price_in_effect_is_the_latest_and_a_providers_own_comes_first() {
        let table = PriceTable::from_toml(TABLE).unwrap();
        assert_eq!(table.currency, "EUR");
        let input = |when| table.find("openai", "gpt-4o", "input_tokens", at(when));
        assert_eq!(
            input("2026-05-31T23:59:59Z").unwrap().to_string(),
            "0.0000025"
        );
        assert_eq!(input("2026-06-01").unwrap().to_string(), "0.000002");
        // Any provider's price serves a provider without its own.
        let output = table.find("azure", "gpt-4o", "output_tokens", at("2026-01-01"));
        assert_eq!(output.unwrap().to_string(), "0.00001");
        assert_eq!(
            table.find("azure", "gpt-4o", "input_tokens", at("2026-01-01")),
            Err(Missing::NoPrice("azure/gpt-4o/input_tokens".into()))
        );
    }

    #[test]
    fn a_price_that_starts_later_is_not_in_effect_before() {
        let table = PriceTable::from_toml(
            "[[prices]]\nmodel = \"m\"\nunit = \"requests\"\nprice = \"1\"\nfrom = \"2027-01-01\"\n",
        )
        .unwrap();
        assert_eq!(
            table.find("p", "m", "requests", at("2026-12-01")),
            Err(Missing::NotYet("p/m/requests".into()))
        );
    }

    #[test]
    fn a_bad_table_names_the_field() {
        for (toml, field) in [
            (
                "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = 2.5\n",
                "prices[0].price",
            ),
            (
                "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"x\"\n",
                "prices[0].price",
            ),
            (
                "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"-1\"\n",
                "prices[0].price",
            ),
            (
                "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"1\"\nper = 3\n",
                "prices[0].per",
            ),
            (
                "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"1\"\nfrom = \"soon\"\n",
                "prices[0].from",
            ),
            (
                "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"1\"\nper = 0\n",
                "prices[0].per",
            ),
            (
                "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = true\n",
                "prices[0].price",
            ),
            (
                "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"1\"\n[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"2\"\n",
                "prices[1]",
            ),
        ] {
            let error = PriceTable::from_toml(toml).unwrap_err();
            assert!(error.contains(field), "{error}");
        }
        assert!(PriceTable::from_toml("[[prices]]\nmodel = \"m\"\n").is_err());
        assert!(PriceTable::from_toml("colour = \"blue\"\n").is_err());
    }

    #[test]
    fn litellms_map_is_read_from_the_numbers_text() {
        let map = r#"{
            "sample_spec": {"input_cost_per_token": 0.0, "mode": "one of: chat"},
            "gpt-4o": {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05,
                       "cache_read_input_token_cost": 1.25e-06, "litellm_provider": "openai"},
            "claude-sonnet-4-5": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
                       "cache_creation_input_token_cost": 3.75e-06, "cache_read_input_token_cost": 3e-07},
            "an-embedding": {"input_cost_per_token": 0.0000001, "output_cost_per_token": null}
        }"#;
        let table = PriceTable::from_litellm(map).unwrap();
        let now = SystemTime::now();
        let price = |model, unit| table.find("any", model, unit, now).map(|a| a.to_string());
        assert_eq!(price("gpt-4o", "input_tokens").unwrap(), "0.0000025");
        assert_eq!(price("gpt-4o", "output_tokens").unwrap(), "0.00001");
        assert_eq!(
            price("gpt-4o", "cached_input_tokens").unwrap(),
            "0.00000125"
        );
        assert_eq!(
            price("claude-sonnet-4-5", "cache_write_input_tokens").unwrap(),
            "0.00000375"
        );
        assert_eq!(
            price("claude-sonnet-4-5", "cached_input_tokens").unwrap(),
            "0.0000003"
        );
        assert_eq!(price("an-embedding", "input_tokens").unwrap(), "0.0000001");
        // What the map does not give stays without a price.
        assert!(price("gpt-4o", "reasoning_tokens").is_err());
        assert!(price("sample_spec", "input_tokens").is_err());
        assert!(PriceTable::from_litellm(r#"{"m": {"input_cost_per_token": "cheap"}}"#).is_err());
        assert!(PriceTable::from_litellm(r#"{"m": {"input_cost_per_token": -1e-06}}"#).is_err());
        assert!(PriceTable::from_litellm(r#"{"m": {"input_cost_per_token": -1e-06}}"#).is_err());
    }
}
