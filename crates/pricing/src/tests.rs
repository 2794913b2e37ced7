use proptest::prelude::*;

use super::*;

const TABLE: &str = r#"
[[prices]]
model = "m"
unit = "input_tokens"
price = "3"
per = 1000000
[[prices]]
model = "m"
unit = "input_tokens"
price = "2"
per = 1000000
from = "2026-12-01"
[[prices]]
model = "m"
unit = "output_tokens"
price = "15"
per = 1000000
[[prices]]
model = "m"
unit = "cached_input_tokens"
price = "0.30"
per = 1000000
"#;

fn fact(unit: &str, quantity: u64, time: &str, tenant: Option<&str>) -> Fact {
    Fact {
        cursor: String::new(),
        execution_id: "ex_1".into(),
        attempt: 1,
        provider: "p".into(),
        model: "m".into(),
        unit: unit.into(),
        quantity,
        source: "provider_reported".into(),
        labels: tenant
            .map(|t| [("tenant".to_owned(), t.to_owned())].into())
            .unwrap_or_default(),
        time: time.into(),
    }
}

fn amount(line: &Line) -> Option<String> {
    match line {
        Line::Priced { amount, .. } => Some(amount.to_string()),
        Line::Unpriced { .. } => None,
    }
}

#[test]
fn a_price_change_on_a_date_splits_the_facts() {
    let table = PriceTable::from_toml(TABLE).unwrap();
    let before = resolve(
        &table,
        fact("input_tokens", 1_000, "2026-11-30T23:59:59Z", None),
    );
    let after = resolve(
        &table,
        fact("input_tokens", 1_000, "2026-12-01T00:00:00Z", None),
    );
    assert_eq!(amount(&before).as_deref(), Some("0.003"));
    assert_eq!(amount(&after).as_deref(), Some("0.002"));
}

#[test]
fn a_part_of_a_unit_is_priced_as_the_difference_from_the_whole() {
    let table = PriceTable::from_toml(TABLE).unwrap();
    // 1000 cached tokens are also among the input tokens: they cost 0.30 instead of 2.
    let line = resolve(
        &table,
        fact("cached_input_tokens", 1_000, "2026-12-01T10:00:00Z", None),
    );
    let Line::Priced {
        unit_price,
        part_of,
        amount,
        ..
    } = line
    else {
        panic!("priced: {line:?}");
    };
    assert_eq!(part_of, Some("input_tokens"));
    assert_eq!(unit_price.to_string(), "-0.0000017");
    assert_eq!(amount.to_string(), "-0.0017");
    // Without the whole's price, the part is not priced either.
    let table = PriceTable::from_toml(
        "[[prices]]\nmodel = \"m\"\nunit = \"reasoning_tokens\"\nprice = \"1\"\n",
    )
    .unwrap();
    let line = resolve(
        &table,
        fact("reasoning_tokens", 5, "2026-12-01T10:00:00Z", None),
    );
    let Line::Unpriced { missing, .. } = line else {
        panic!("unpriced: {line:?}");
    };
    assert_eq!(missing, "no price for p/m/output_tokens");
    // A part with no price of its own says where its tokens are counted.
    let table = PriceTable::from_toml(TABLE).unwrap();
    let line = resolve(
        &table,
        fact("reasoning_tokens", 5, "2026-12-01T10:00:00Z", None),
    );
    let Line::Unpriced { missing, .. } = line else {
        panic!("unpriced: {line:?}");
    };
    assert_eq!(
        missing,
        "no price for p/m/reasoning_tokens (part of output_tokens, which counts these tokens too)"
    );
}

#[test]
fn units_missing_from_the_table_are_unpriced_and_counted_apart() {
    let table = PriceTable::from_toml(TABLE).unwrap();
    let lines: Vec<Line> = [
        fact(
            "input_tokens",
            1_000_000,
            "2026-12-01T10:00:00Z",
            Some("acme"),
        ),
        fact("requests", 1, "2026-12-01T10:00:00Z", Some("acme")),
        fact(
            "output_tokens",
            1_000_000,
            "2026-12-01T10:00:00Z",
            Some("globex"),
        ),
        fact("requests", 2, "2026-12-01T10:00:00Z", None),
        fact("input_tokens", 5, "not a time", Some("acme")),
    ]
    .into_iter()
    .map(|f| resolve(&table, f))
    .collect();
    let Line::Unpriced { missing, .. } = &lines[1] else {
        panic!("unpriced: {:?}", lines[1]);
    };
    assert_eq!(missing, "no price for p/m/requests");
    let Line::Unpriced { missing, .. } = &lines[4] else {
        panic!("unpriced: {:?}", lines[4]);
    };
    assert!(
        missing.starts_with("the fact's time `not a time` is not RFC 3339: "),
        "{missing}"
    );
    let report = Report::new("USD".into(), Some("tenant".into()), lines, None).unwrap();
    let acme = &report.totals["acme"];
    assert_eq!(acme.amount.to_string(), "2");
    assert_eq!((acme.priced, acme.unpriced), (1, 2));
    assert_eq!(acme.unpriced_quantities["requests"], 1);
    assert_eq!(acme.unpriced_quantities["input_tokens"], 5);
    assert_eq!(report.totals["globex"].amount.to_string(), "15");
    assert_eq!(report.totals["(none)"].unpriced_quantities["requests"], 2);
    assert_eq!(report.total.amount.to_string(), "17");
    assert_eq!((report.total.priced, report.total.unpriced), (2, 3));
    let text = report.table();
    assert!(text.contains("tenant=acme: 2 USD from 1 priced facts; 2 unpriced facts (5 input_tokens, 1 requests) not in the amount"), "{text}");
    assert!(text.contains("total: 17 USD"), "{text}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["lines"][1]["status"], "unpriced");
    assert_eq!(json["lines"][0]["amount"], "2", "amounts are decimal text");
}

#[test]
fn a_total_out_of_range_is_an_error_that_names_it() {
    let table = PriceTable::from_toml(
        "[[prices]]\nmodel = \"m\"\nunit = \"input_tokens\"\nprice = \"100000000000000000000\"\n",
    )
    .unwrap();
    let at = "2026-12-01T10:00:00Z";
    let lines: Vec<Line> = [
        fact("input_tokens", 1, at, Some("acme")),
        fact("input_tokens", 1, at, Some("acme")),
    ]
    .into_iter()
    .map(|f| resolve(&table, f))
    .collect();
    let error = Report::new("USD".into(), Some("tenant".into()), lines, None).unwrap_err();
    assert_eq!(error, ReportError::AmountOutOfRange { group: None });
    assert_eq!(
        error.to_string(),
        "a total over every line is out of range (beyond 10^20)"
    );
    // A sum of unpriced quantities is bounded too.
    let lines: Vec<Line> = [
        fact("requests", u64::MAX, at, None),
        fact("requests", 1, at, None),
    ]
    .into_iter()
    .map(|f| resolve(&table, f))
    .collect();
    let error = Report::new("USD".into(), None, lines, None).unwrap_err();
    assert_eq!(
        error,
        ReportError::QuantityOutOfRange {
            unit: "requests".into(),
            group: None
        }
    );
    // A label value's total can be out of range while the total over every line is not.
    let lines = vec![
        resolve(&table, fact("input_tokens", 1, at, Some("acme"))),
        Line::Priced {
            fact: fact("input_tokens", 1, at, Some("globex")),
            unit_price: Amount::parse("-1").unwrap(),
            part_of: None,
            amount: Amount::parse("-100000000000000000000").unwrap(),
        },
        resolve(&table, fact("input_tokens", 1, at, Some("acme"))),
    ];
    let error = Report::new("USD".into(), Some("tenant".into()), lines, None).unwrap_err();
    assert_eq!(
        error,
        ReportError::AmountOutOfRange {
            group: Some("acme".into())
        }
    );
    assert_eq!(
        error.to_string(),
        "a total for the label value `acme` is out of range (beyond 10^20)"
    );
}

#[test]
fn a_line_out_of_range_is_unpriced_and_says_why() {
    let table = PriceTable::from_toml(
        "[[prices]]\nmodel = \"m\"\nunit = \"input_tokens\"\nprice = \"100000000000000000000\"\n",
    )
    .unwrap();
    let line = resolve(
        &table,
        fact("input_tokens", 2, "2026-12-01T10:00:00Z", None),
    );
    let Line::Unpriced { missing, .. } = line else {
        panic!("unpriced: {line:?}");
    };
    assert_eq!(missing, "2 times 100000000000000000000 is out of range");
}

fn arbitrary_fact() -> impl Strategy<Value = Fact> {
    (
        prop::sample::select(vec![
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "requests",
        ]),
        0u64..10_000_000,
        prop::sample::select(vec!["2026-11-30T12:00:00Z", "2026-12-01T12:00:00Z"]),
        prop::option::of(prop::sample::select(vec!["acme", "globex"])),
    )
        .prop_map(|(unit, quantity, time, tenant)| fact(unit, quantity, time, tenant))
}

proptest! {
    #[test]
    fn totals_are_the_sums_of_their_lines(facts in prop::collection::vec(arbitrary_fact(), 0..60)) {
        let table = PriceTable::from_toml(TABLE).unwrap();
        let lines: Vec<Line> = facts.into_iter().map(|f| resolve(&table, f)).collect();
        let report = Report::new("USD".into(), Some("tenant".into()), lines, None).unwrap();
        let add = |sum: Amount, amount: Amount| sum.checked_add(amount).unwrap();
        let sum = report
            .lines
            .iter()
            .filter_map(|l| match l { Line::Priced { amount, .. } => Some(*amount), Line::Unpriced { .. } => None })
            .fold(Amount::ZERO, add);
        prop_assert_eq!(report.total.amount, sum);
        let groups = report.totals.values().map(|t| t.amount).fold(Amount::ZERO, add);
        prop_assert_eq!(groups, sum, "the groups add up to the total");
        let counted: u64 = report.totals.values().map(|t| t.priced + t.unpriced).sum();
        prop_assert_eq!(counted, report.lines.len() as u64);
        prop_assert_eq!(report.total.priced + report.total.unpriced, report.lines.len() as u64);
    }
}
