//! The price table's readers: TOML tables and LiteLLM's map, their errors and their
//! round trips.

use super::*;
use crate::AmountError;

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
fn a_bad_table_names_the_entry_and_the_key() {
    type Is = fn(&TomlTableError) -> bool;
    let cases: [(&str, &str, Is); 8] = [
        (
            "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = 2.5\n",
            "prices[0].price: write the price as a string",
            |e| matches!(e, TomlTableError::FloatPrice { index: 0 }),
        ),
        (
            "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"x\"\n",
            "prices[0].price: `x` is not a decimal number",
            |e| {
                let source = AmountError::Malformed("x".into());
                *e == TomlTableError::InvalidPrice { index: 0, source }
            },
        ),
        (
            "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"-1\"\n",
            "prices[0].price: is negative",
            |e| matches!(e, TomlTableError::NegativePrice { index: 0 }),
        ),
        (
            "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"1\"\nper = 3\n",
            "prices[0].per: 1 per 3 does not divide to 18 decimal places",
            |e| {
                let price = "1".into();
                *e == TomlTableError::IndivisiblePer {
                    index: 0,
                    price,
                    per: 3,
                }
            },
        ),
        (
            "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"1\"\nfrom = \"soon\"\n",
            "prices[0].from: `soon` is not a date (2025-01-01)",
            |e| {
                matches!(e, TomlTableError::InvalidFrom { index: 0, source }
                    if source.text == "soon")
            },
        ),
        (
            "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"1\"\nper = 0\n",
            "prices[0].per: must be at least 1",
            |e| matches!(e, TomlTableError::ZeroPer { index: 0 }),
        ),
        (
            "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = true\n",
            "prices[0].price: is a boolean, not a price",
            |e| {
                matches!(
                    e,
                    TomlTableError::NotAPrice {
                        index: 0,
                        found: "boolean"
                    }
                )
            },
        ),
        (
            "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"1\"\n[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"2\"\n",
            "prices[1]: a second price for */m/u from the same time",
            |e| {
                *e == TomlTableError::DuplicatePrice {
                    index: 1,
                    provider: None,
                    model: "m".into(),
                    unit: "u".into(),
                }
            },
        ),
    ];
    for (toml, text, is) in cases {
        let error = PriceTable::from_toml(toml).unwrap_err();
        assert!(is(&error), "{error:?}");
        assert!(error.to_string().starts_with(text), "{error}");
    }
    for toml in ["[[prices]]\nmodel = \"m\"\n", "colour = \"blue\"\n"] {
        let error = PriceTable::from_toml(toml).unwrap_err();
        assert!(matches!(error, TomlTableError::Parse(_)), "{error:?}");
    }
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
}

#[test]
fn a_bad_litellm_map_names_the_model_and_the_field() {
    let error =
        PriceTable::from_litellm(r#"{"m": {"input_cost_per_token": "cheap"}}"#).unwrap_err();
    assert!(
        matches!(
            &error,
            LiteLlmError::InvalidPrice {
                model,
                field: "input_cost_per_token",
                source: AmountError::Malformed(_),
            } if model == "m"
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "m.input_cost_per_token: `\"cheap\"` is not a decimal number"
    );
    let error =
        PriceTable::from_litellm(r#"{"m": {"output_cost_per_token": -1e-06}}"#).unwrap_err();
    assert!(
        matches!(
            &error,
            LiteLlmError::NegativePrice {
                model,
                field: "output_cost_per_token",
            } if model == "m"
        ),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "m.output_cost_per_token: is negative");
    let error = PriceTable::from_litellm("[1, 2]").unwrap_err();
    assert!(matches!(error, LiteLlmError::Parse(_)), "{error:?}");
    assert!(
        error.to_string().starts_with("not a JSON object: "),
        "{error}"
    );
}

#[test]
fn a_file_that_cannot_be_loaded_says_which_and_why() {
    let dir = std::env::temp_dir().join(format!("pricing-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.toml");
    let error = PriceTable::load(&missing).unwrap_err();
    assert!(
        matches!(&error, LoadError::Read { path, source }
            if *path == missing && source.kind() == std::io::ErrorKind::NotFound),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot read {}: ", missing.display())),
        "{error}"
    );
    // The extension picks the format, and the error says which it was read as.
    let json = dir.join("prices.JSON");
    std::fs::write(&json, "[]").unwrap();
    let error = PriceTable::load(&json).unwrap_err();
    assert!(
        matches!(&error, LoadError::LiteLlm { path, source: LiteLlmError::Parse(_) }
            if *path == json),
        "{error:?}"
    );
    let toml = dir.join("prices.toml");
    std::fs::write(
        &toml,
        "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = \"-1\"\n",
    )
    .unwrap();
    let error = PriceTable::load(&toml).unwrap_err();
    assert!(
        matches!(&error, LoadError::Toml {
            path,
            source: TomlTableError::NegativePrice { index: 0 },
        } if *path == toml),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!("{}: prices[0].price: is negative", toml.display())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
