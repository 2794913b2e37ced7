//! `docs/protocol.md`'s rule ids: each is defined once, MUST or SHOULD, and every id the code,
//! the tests and the docs cite (`ROUTE-8`, or a range `ROUTE-5..10`) is one it defines, so a
//! citation cannot outlive its rule.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The families of ids, as the protocol's sections name them.
const FAMILIES: [&str; 15] = [
    "ROLE", "EXEC", "STATE", "COMMIT", "ROUTE", "ADMIT", "IDEM", "CURSOR", "CANCEL", "USAGE",
    "ERR", "DRAIN", "STORE", "DEADLINE", "HTTP",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The ids the protocol defines (`- **ID** (MUST)`), each with how often.
fn defined(protocol: &str) -> BTreeMap<String, usize> {
    let mut ids = BTreeMap::new();
    for line in protocol.lines() {
        let Some(rest) = line.strip_prefix("- **") else {
            continue;
        };
        let Some((id, level)) = rest.split_once("** (") else {
            continue;
        };
        assert!(
            level.starts_with("MUST)") || level.starts_with("SHOULD)"),
            "{id} is neither MUST nor SHOULD"
        );
        *ids.entry(id.to_owned()).or_insert(0) += 1;
    }
    ids
}

/// The ids `text` cites: `FAMILY-N`, and each of a range `FAMILY-N..M`.
fn cited(text: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for family in FAMILIES {
        let mark = format!("{family}-");
        let mut rest = text;
        while let Some(at) = rest.find(&mark) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + mark.len()..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let Ok(first) = digits.parse::<u32>() else {
                continue;
            };
            let mut last = first;
            if let Some(range) = rest[digits.len()..].strip_prefix("..") {
                let end: String = range.chars().take_while(char::is_ascii_digit).collect();
                last = end.parse().unwrap_or(first);
            }
            ids.extend((first..=last).map(|n| format!("{family}-{n}")));
        }
    }
    ids
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "md") {
            out.push(path);
        }
    }
}

#[test]
fn every_rule_id_is_defined_once_and_every_citation_names_one() {
    let protocol = fs::read_to_string(root().join("docs/protocol.md")).unwrap();
    let defined = defined(&protocol);
    assert!(defined.len() > 60, "{} rules", defined.len());
    for (id, times) in &defined {
        assert_eq!(*times, 1, "{id} is defined {times} times");
        assert!(
            FAMILIES.iter().any(|f| id.starts_with(&format!("{f}-"))),
            "{id} is of no family"
        );
    }
    let mut paths = vec![root().join("README.md")];
    for dir in ["src", "tests", "docs", "crates/conformance"] {
        files(&root().join(dir), &mut paths);
    }
    let mut citations = 0;
    for path in paths {
        let text = fs::read_to_string(&path).unwrap();
        for id in cited(&text) {
            assert!(
                defined.contains_key(&id),
                "{} cites {id}, which docs/protocol.md does not define",
                path.display()
            );
            citations += 1;
        }
    }
    assert!(citations > 100, "{citations} citations");
}

#[test]
fn citations_are_read_with_their_ranges() {
    assert_eq!(
        cited("(ROUTE-5..7, HTTP-2)"),
        ["ROUTE-5", "ROUTE-6", "ROUTE-7", "HTTP-2"]
    );
    assert!(cited("XHTTP-2 UTF-8").is_empty());
}
