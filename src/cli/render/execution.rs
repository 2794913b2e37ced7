//! An execution as a person reads it: its state and what it ran on, its plan, each attempt,
//! its result or error, and its usage. One fact a line; the reply's text last, whole.

use std::fmt::Write as _;

use super::{name, outcome, state};
use model_runtime::pb;

/// `e`, readable, ending in a newline.
pub fn execution(e: &pb::Execution) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {}", e.execution_id, state(e.state));
    let _ = writeln!(
        out,
        "  ability {}, policy {}, last sequence {}",
        e.ability, e.policy, e.last_sequence
    );
    let _ = writeln!(
        out,
        "  created {}, updated {}",
        when(e.created_at.as_ref()),
        when(e.updated_at.as_ref())
    );
    if !e.idempotency_key.is_empty() {
        let _ = writeln!(out, "  idempotency key {}", e.idempotency_key);
    }
    if !e.labels.is_empty() {
        let mut labels: Vec<String> = e.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        let _ = writeln!(out, "  labels {}", labels.join(" "));
    }
    if let Some(p) = &e.plan {
        let _ = writeln!(out, "  plan {}", plan(p));
    }
    for a in &e.attempts {
        let _ = writeln!(out, "  {}", attempt(a));
    }
    for fact in &e.usage {
        let _ = writeln!(out, "  {}", usage(fact));
    }
    if let Some(error) = &e.error {
        let _ = writeln!(
            out,
            "  error {}: {} (outcome: {})",
            error.code,
            error.message,
            outcome(error.outcome)
        );
    }
    if let Some(result) = &e.result {
        let finish =
            pb::FinishReason::try_from(result.finish_reason).map_or("unknown", |f| f.as_str_name());
        let _ = writeln!(
            out,
            "  result by {}/{} in attempt {}, finish {}",
            result.provider,
            result.model,
            result.attempt,
            name(finish, "FINISH_REASON_")
        );
        text(&mut out, result.output.as_ref());
    } else if e
        .partial_output
        .as_ref()
        .is_some_and(|o| !o.text.is_empty())
    {
        let _ = writeln!(out, "  partial output:");
        text(&mut out, e.partial_output.as_ref());
    }
    out
}

/// The plan's targets in order, each kept one by name, the others with why.
fn plan(plan: &pb::RoutingPlan) -> String {
    let targets: Vec<String> = plan
        .targets
        .iter()
        .map(|t| match &t.ejected {
            _ if !t.kept => format!("{}/{} (not kept: {})", t.provider, t.model, t.reason),
            Some(ejected) => format!("{}/{} (ejected: {})", t.provider, t.model, ejected.reason),
            None => format!("{}/{}", t.provider, t.model),
        })
        .collect();
    targets.join(", ")
}

/// One usage fact on one line.
fn usage(fact: &pb::UsageFact) -> String {
    let source = pb::UsageSource::try_from(fact.source).map_or("unknown", |s| s.as_str_name());
    format!(
        "usage {} {} ({}, attempt {} on {}/{})",
        fact.quantity,
        fact.unit,
        name(source, "USAGE_SOURCE_"),
        fact.attempt,
        fact.provider,
        fact.model
    )
}

/// One attempt on one line.
fn attempt(a: &pb::Attempt) -> String {
    let mut line = format!("attempt {} on {}/{}", a.number, a.provider, a.model);
    if !a.admitted {
        line.push_str(" (not admitted)");
    }
    if let Some(d) = &a.duration {
        let ms = d.seconds * 1000 + i64::from(d.nanos) / 1_000_000;
        let _ = write!(line, " in {ms} ms");
    }
    let _ = write!(line, ": {}", outcome(a.outcome));
    if let Some(error) = &a.error {
        let class = pb::ErrorClass::try_from(error.class).map_or("unknown", |c| c.as_str_name());
        let _ = write!(
            line,
            ", {} {}: {}",
            name(class, "ERROR_CLASS_"),
            error.code,
            error.message
        );
    }
    if a.next_action != 0 {
        let next = pb::NextAction::try_from(a.next_action).map_or("unknown", |n| n.as_str_name());
        let _ = write!(line, " (next: {})", name(next, "NEXT_ACTION_"));
    }
    line
}

/// An output's tool calls and text, indented.
fn text(out: &mut String, output: Option<&pb::Output>) {
    let Some(output) = output else { return };
    for call in &output.tool_calls {
        let _ = writeln!(out, "  tool call {}({})", call.name, call.arguments_json);
    }
    if !output.text.is_empty() {
        for line in output.text.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
}

fn when(t: Option<&prost_types::Timestamp>) -> String {
    t.and_then(|t| std::time::SystemTime::try_from(*t).ok())
        .map_or_else(
            || "-".to_owned(),
            |t| humantime::format_rfc3339_millis(t).to_string(),
        )
}

#[cfg(test)]
mod tests {

    use model_runtime::pb;

    #[test]
    fn an_execution_reads_one_fact_a_line() {
        let e = pb::Execution {
            execution_id: "ex_1".into(),
            state: pb::ExecutionState::Succeeded.into(),
            ability: "chat".into(),
            policy: "default".into(),
            last_sequence: 6,
            attempts: vec![pb::Attempt {
                number: 1,
                provider: "scripted".into(),
                model: "echo".into(),
                admitted: true,
                outcome: pb::Outcome::Completed.into(),
                ..Default::default()
            }],
            result: Some(pb::ExecutionResult {
                output: Some(pb::Output {
                    text: "hello\nthere".into(),
                    ..Default::default()
                }),
                finish_reason: pb::FinishReason::Stop.into(),
                provider: "scripted".into(),
                model: "echo".into(),
                attempt: 1,
            }),
            ..Default::default()
        };
        let text = super::execution(&e);
        assert!(text.starts_with("ex_1 succeeded\n"), "{text}");
        assert!(
            text.contains("  attempt 1 on scripted/echo: completed\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  result by scripted/echo in attempt 1, finish stop\n    hello\n    there\n"
            ),
            "{text}"
        );
    }
}
