//! The report: one row per rule of the protocol (pass, fail or unsupported, with the cases
//! that concluded it or why none could), every verdict with its evidence, as a table for
//! people, JSON, or JUnit XML for CI.

use std::fmt::Write as _;

use serde::Serialize;

use crate::rules::{self, Level};
use crate::verdict::{Outcome, Verdict};

/// One rule's conclusion over every case.
#[derive(Debug, Clone, Serialize)]
pub struct RuleRow {
    pub id: String,
    pub level: Level,
    /// `pass`, `fail` or `unsupported`.
    pub status: &'static str,
    /// The cases that concluded about it.
    pub cases: Vec<&'static str>,
    /// Why it is unsupported, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Counts of the rows.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub pass: usize,
    pub fail: usize,
    pub unsupported: usize,
    /// MUST rules that failed: any makes the run fail.
    pub must_failed: usize,
}

/// The whole result of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub target: String,
    pub strict: bool,
    pub summary: Summary,
    pub rules: Vec<RuleRow>,
    pub verdicts: Vec<Verdict>,
}

impl Report {
    /// Concludes per rule from `verdicts`.
    pub fn new(target: String, strict: bool, verdicts: Vec<Verdict>) -> Self {
        let mut summary = Summary::default();
        let rows: Vec<RuleRow> = rules::all()
            .into_iter()
            .map(|rule| {
                let mine: Vec<&Verdict> = verdicts.iter().filter(|v| v.rule == rule.id).collect();
                let failed = mine
                    .iter()
                    .any(|v| matches!(v.outcome, Outcome::Fail { .. }));
                let passed = mine.iter().any(|v| matches!(v.outcome, Outcome::Pass));
                // The cases whose verdicts decided the row: the failures, else the passes.
                let deciding = |v: &&&Verdict| match v.outcome {
                    Outcome::Fail { .. } => true,
                    Outcome::Pass => !failed,
                    Outcome::Unsupported { .. } => false,
                };
                let mut cases: Vec<&'static str> =
                    mine.iter().filter(deciding).map(|v| v.case).collect();
                cases.dedup();
                let (status, reason) = if failed {
                    ("fail", None)
                } else if passed {
                    ("pass", None)
                } else if let Some(Outcome::Unsupported { reason }) =
                    mine.first().map(|v| &v.outcome)
                {
                    ("unsupported", Some(reason.clone()))
                } else if let Some(why) = rules::unobserved(&rule.id) {
                    (
                        "unsupported",
                        Some(format!("not observable from outside: {why}")),
                    )
                } else if rule.level == Level::Should && !strict {
                    (
                        "unsupported",
                        Some("a SHOULD rule: run with --strict".to_owned()),
                    )
                } else {
                    ("unsupported", Some("no case concluded".to_owned()))
                };
                match status {
                    "fail" => {
                        summary.fail += 1;
                        if rule.level == Level::Must {
                            summary.must_failed += 1;
                        }
                    }
                    "pass" => summary.pass += 1,
                    _ => summary.unsupported += 1,
                }
                RuleRow {
                    id: rule.id,
                    level: rule.level,
                    status,
                    cases,
                    reason,
                }
            })
            .collect();
        Self {
            target,
            strict,
            summary,
            rules: rows,
            verdicts,
        }
    }

    /// Whether the run fails: a MUST rule failed, or under `--strict` any rule did.
    pub fn failed(&self) -> bool {
        self.summary.must_failed > 0 || (self.strict && self.summary.fail > 0)
    }

    /// The ids of the rules that failed.
    pub fn failed_rules(&self) -> Vec<&str> {
        self.rules
            .iter()
            .filter(|r| r.status == "fail")
            .map(|r| r.id.as_str())
            .collect()
    }

    /// The status of rule `id`.
    pub fn status(&self, id: &str) -> Option<&'static str> {
        self.rules.iter().find(|r| r.id == id).map(|r| r.status)
    }

    /// A table for people, then each failure's evidence.
    pub fn table(&self) -> String {
        let mut out = format!("model_runtime.v1 conformance of {}\n\n", self.target);
        let _ = writeln!(
            out,
            "{:<11} {:<6} {:<11} CASES / WHY",
            "RULE", "LEVEL", "RESULT"
        );
        for row in &self.rules {
            let level = if row.level == Level::Must {
                "MUST"
            } else {
                "SHOULD"
            };
            let detail = row.reason.clone().unwrap_or_else(|| row.cases.join(", "));
            let _ = writeln!(out, "{:<11} {level:<6} {:<11} {detail}", row.id, row.status);
        }
        for verdict in &self.verdicts {
            let Outcome::Fail { message, evidence } = &verdict.outcome else {
                continue;
            };
            let _ = writeln!(out, "\nFAIL {} ({}): {message}", verdict.rule, verdict.case);
            if !evidence.events.is_empty() {
                let _ = writeln!(out, "  events the caller received:");
                for line in &evidence.events {
                    let _ = writeln!(out, "    {line}");
                }
            }
            if !evidence.received.is_empty() {
                let _ = writeln!(
                    out,
                    "  requests the provider received (from the submission):"
                );
                for line in &evidence.received {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
        let s = &self.summary;
        let _ = writeln!(
            out,
            "\n{} rules pass, {} fail ({} MUST), {} unsupported{}",
            s.pass,
            s.fail,
            s.must_failed,
            s.unsupported,
            if self.strict {
                "; SHOULD rules included"
            } else {
                ""
            }
        );
        out
    }

    /// The report as JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The report as JUnit XML: a test case per verdict, and a skipped one per rule no case
    /// concluded about.
    pub fn junit(&self) -> String {
        let mut cases = String::new();
        let (mut tests, mut failures, mut skipped) = (0, 0, 0);
        let mut named = std::collections::HashMap::new();
        for verdict in &self.verdicts {
            tests += 1;
            let family = verdict.rule.split('-').next().unwrap_or_default();
            // A case may conclude about one rule more than once: each its own name.
            let nth = named.entry((verdict.rule, verdict.case)).or_insert(0);
            *nth += 1;
            let suffix = if *nth > 1 {
                format!(" #{nth}")
            } else {
                String::new()
            };
            let _ = write!(
                cases,
                "    <testcase classname=\"{}\" name=\"{}: {}{suffix}\"",
                xml(family),
                xml(verdict.rule),
                xml(verdict.case)
            );
            match &verdict.outcome {
                Outcome::Pass => cases.push_str("/>\n"),
                Outcome::Fail { message, evidence } => {
                    failures += 1;
                    let body = evidence
                        .events
                        .iter()
                        .map(|l| format!("event: {l}"))
                        .chain(evidence.received.iter().map(|l| format!("provider: {l}")))
                        .collect::<Vec<_>>()
                        .join("\n");
                    let _ = write!(
                        cases,
                        ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                        xml(message),
                        xml(&body)
                    );
                }
                Outcome::Unsupported { reason } => {
                    skipped += 1;
                    let _ = write!(
                        cases,
                        ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                        xml(reason)
                    );
                }
            }
        }
        for row in self.rules.iter().filter(|r| r.cases.is_empty()) {
            tests += 1;
            skipped += 1;
            let family = row.id.split('-').next().unwrap_or_default();
            let _ = write!(
                cases,
                "    <testcase classname=\"{}\" name=\"{}\">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                xml(family),
                xml(&row.id),
                xml(row.reason.as_deref().unwrap_or_default())
            );
        }
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"model-runtime-conformance\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\">\n{cases}  </testsuite>\n</testsuites>\n"
        )
    }
}

/// `text` escaped for XML text and attributes.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Report;
    use crate::verdict::{Evidence, Verdict};

    fn report(verdicts: Vec<Verdict>) -> Report {
        Report::new("test".into(), false, verdicts)
    }

    #[test]
    fn a_failure_decides_its_row_and_fails_the_run() {
        let evidence = Evidence {
            events: vec!["1 execution.accepted <ACCEPTED> & \"quoted\"".into()],
            received: vec!["+1 ms kit-a/answer".into()],
        };
        let r = report(vec![
            Verdict::pass("one", "EXEC-2"),
            Verdict::fail("two", "EXEC-2", "a gap at 3", evidence),
            Verdict::unsupported("three", "CANCEL-3", "needs a second replica"),
            Verdict::pass("four", "ROUTE-3"),
            Verdict::pass("four", "ROUTE-3"),
        ]);
        let row = |id: &str| r.rules.iter().find(|row| row.id == id).unwrap();
        assert_eq!(row("EXEC-2").status, "fail");
        assert_eq!(
            row("EXEC-2").cases,
            ["two"],
            "only the failing case decided it"
        );
        assert_eq!(row("CANCEL-3").status, "unsupported");
        assert_eq!(
            row("CANCEL-3").reason.as_deref(),
            Some("needs a second replica")
        );
        assert!(
            row("ERR-3")
                .reason
                .as_deref()
                .unwrap()
                .starts_with("not observable")
        );
        assert!(
            row("ROUTE-12")
                .reason
                .as_deref()
                .unwrap()
                .contains("--strict")
        );
        assert!(r.failed());
        assert_eq!(r.failed_rules(), ["EXEC-2"]);
        assert!(r.table().contains("FAIL EXEC-2 (two): a gap at 3"));

        let xml = r.junit();
        assert!(
            xml.contains("&lt;ACCEPTED&gt; &amp; &quot;quoted&quot;"),
            "{xml}"
        );
        assert!(
            xml.contains("name=\"ROUTE-3: four\"") && xml.contains("name=\"ROUTE-3: four #2\"")
        );
        assert!(xml.contains("failures=\"1\""));
        let json: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(json["summary"]["must_failed"], 1);
        assert_eq!(json["verdicts"][1]["status"], "fail");
        assert_eq!(json["verdicts"][1]["received"][0], "+1 ms kit-a/answer");
    }

    #[test]
    fn only_a_should_failure_passes_unless_strict() {
        let verdicts = vec![Verdict::fail(
            "ejection",
            "ROUTE-12",
            "not ejected",
            Evidence::default(),
        )];
        assert!(!Report::new("t".into(), false, verdicts.clone()).failed());
        assert!(Report::new("t".into(), true, verdicts).failed());
    }
}
