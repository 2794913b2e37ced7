//! `model-runtime usage` and `model-runtime price`, the real binary against a running server:
//! the facts come out as JSON lines with their cursors; priced from the server or from those
//! lines, the report is the same; a unit the table lacks is an explicit unpriced line,
//! counted apart; LiteLLM's map prices from the numbers' text; `--after` resumes.

use crate::common;

use std::time::Duration;

use common::process::run;
use common::*;

const TABLE: &str = r#"
currency = "USD"
[[prices]]
provider = "scripted"
model = "echo"
unit = "input_tokens"
price = "2"
per = 1000
"#;

fn stdout(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "{:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

// The binary runs synchronously on a test thread; the server needs another to answer it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_are_exported_and_priced_with_unpriced_units_counted_apart() {
    let server = start(echo()).await;
    let mut c = server.client.clone();
    for (prompt, tenant) in [
        ("one two", "acme"),
        ("three", "globex"),
        ("four five six", "acme"),
    ] {
        execute(&mut c, labelled(prompt, tenant)).await;
    }
    let addr = server.addr.to_string();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("prices.toml");
    std::fs::write(&table, TABLE).unwrap();
    let limit = Duration::from_secs(30);

    // The export as JSON lines: two facts an execution, each with its cursor.
    let lines = stdout(&run(&["usage", "--addr", &addr, "--idle", "2s"], limit));
    let facts: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(facts.len(), 6, "{lines}");
    assert_eq!(facts[0]["unit"], "input_tokens");
    assert_eq!(facts[0]["quantity"], 2);
    assert_eq!(facts[0]["labels"]["tenant"], "acme");
    let facts_file = dir.path().join("facts.jsonl");
    std::fs::write(&facts_file, &lines).unwrap();

    // Priced from the server: input tokens at 0.002 each; output tokens have no price.
    let table_arg = table.to_str().unwrap();
    let facts_arg = facts_file.to_str().unwrap();
    // `price` with these prices over the exported lines, and `more` arguments.
    let price_file = |prices: &str, more: &[&str]| {
        let mut args = vec!["price", "--prices", prices, "--from-file", facts_arg];
        args.extend_from_slice(more);
        run(&args, limit)
    };
    let report = stdout(&run(
        &[
            "price", "--prices", table_arg, "--addr", &addr, "--idle", "2s", "--by", "tenant",
            "--json",
        ],
        limit,
    ));
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["total"]["amount"], "0.012", "6 input tokens");
    assert_eq!(report["total"]["priced"], 3);
    assert_eq!(report["total"]["unpriced"], 3);
    assert_eq!(report["total"]["unpriced_quantities"]["output_tokens"], 6);
    assert_eq!(report["totals"]["acme"]["amount"], "0.01");
    assert_eq!(report["totals"]["globex"]["amount"], "0.002");
    assert_eq!(
        report["through"], facts[5]["cursor"],
        "the report says how far it read"
    );
    let unpriced = &report["lines"][1];
    assert_eq!(unpriced["status"], "unpriced");
    assert_eq!(
        unpriced["missing"],
        "no price for scripted/echo/output_tokens"
    );

    // The same from the exported lines.
    let from_file = stdout(&price_file(table_arg, &["--by", "tenant", "--json"]));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&from_file).unwrap(),
        report
    );

    // As a table.
    let text = stdout(&price_file(table_arg, &[]));
    assert!(
        text.contains("total: 0.012 USD from 3 priced facts; 3 unpriced facts (6 output_tokens) not in the amount"),
        "{text}"
    );

    // LiteLLM's map, as published: prices read from the numbers' text.
    let litellm = dir.path().join("model_prices_and_context_window.json");
    std::fs::write(
        &litellm,
        r#"{"sample_spec": {"input_cost_per_token": 0.0}, "echo": {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05, "litellm_provider": "openai"}}"#,
    )
    .unwrap();
    let report = stdout(&price_file(litellm.to_str().unwrap(), &["--json"]));
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        report["total"]["amount"], "0.000075",
        "6 at 2.5e-06 and 6 at 1e-05"
    );
    assert_eq!(report["total"]["unpriced"], 0);

    // --after resumes after a cursor.
    let cursor = facts[3]["cursor"].as_str().unwrap();
    let rest = stdout(&run(
        &["usage", "--addr", &addr, "--after", cursor, "--idle", "2s"],
        limit,
    ));
    assert_eq!(
        rest.lines().collect::<Vec<_>>(),
        lines.lines().skip(4).collect::<Vec<_>>()
    );

    // A bad table names the field; a bad cursor is the server's INVALID_ARGUMENT.
    std::fs::write(
        &table,
        "[[prices]]\nmodel = \"m\"\nunit = \"u\"\nprice = 2.5\n",
    )
    .unwrap();
    let bad = price_file(table_arg, &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("prices[0].price"));
    let bad = run(&["usage", "--addr", &addr, "--after", "nonsense"], limit);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("after_cursor"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    server.stop().await;
}

/// A fact line as `usage` writes it.
fn fact_line(attempt: u32, unit: &str, quantity: u64, source: &str) -> String {
    serde_json::json!({
        "cursor": format!("c{attempt}{unit}"),
        "execution_id": "ex_1",
        "attempt": attempt,
        "provider": "scripted",
        "model": "echo",
        "unit": unit,
        "quantity": quantity,
        "source": source,
        "labels": {},
        "time": "2026-01-01T00:00:00Z",
    })
    .to_string()
}

#[test]
fn each_line_shows_its_source_and_estimated_is_totalled_apart_from_reported() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("prices.toml");
    std::fs::write(&table, TABLE).unwrap();
    // Attempt 1 was cut: the runtime estimated its input; attempt 2's the provider reported.
    let facts = [
        fact_line(1, "input_tokens", 1, "runtime_estimated"),
        fact_line(2, "input_tokens", 3, "provider_reported"),
        fact_line(2, "output_tokens", 7, "provider_reported"),
    ]
    .join("\n");
    let facts_file = dir.path().join("facts.jsonl");
    std::fs::write(&facts_file, facts).unwrap();
    let args = |more: &[&str]| {
        let mut args = vec![
            "price",
            "--prices",
            table.to_str().unwrap(),
            "--from-file",
            facts_file.to_str().unwrap(),
        ];
        args.extend_from_slice(more);
        args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>()
    };
    let limit = Duration::from_secs(30);

    let report: serde_json::Value =
        serde_json::from_str(&stdout(&run(&args(&["--json"]), limit))).unwrap();
    assert_eq!(report["total"]["amount"], "0.008", "{report}");
    let by_source = &report["total"]["by_source"];
    assert_eq!(
        by_source["runtime_estimated"]["amount"], "0.002",
        "{report}"
    );
    assert_eq!(by_source["runtime_estimated"]["priced"], 1);
    assert_eq!(by_source["provider_reported"]["amount"], "0.006");
    assert_eq!(by_source["provider_reported"]["priced"], 1);
    assert_eq!(report["lines"][0]["fact"]["source"], "runtime_estimated");

    let text = stdout(&run(&args(&[]), limit));
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(header.contains("source"), "{text}");
    let first = lines.next().unwrap();
    assert!(first.contains("runtime_estimated"), "{text}");
    assert!(
        lines.next().unwrap().contains("provider_reported"),
        "{text}"
    );
    assert!(
        text.contains("total: 0.008 USD from 2 priced facts; 1 unpriced facts (7 output_tokens) not in the amount\n"),
        "{text}"
    );
    assert!(
        text.contains("  provider_reported: 0.006 USD from 1 priced facts\n")
            && text.contains("  runtime_estimated: 0.002 USD from 1 priced facts\n"),
        "{text}"
    );
}
