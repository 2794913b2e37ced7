//! How `exec` and `watch` show events: one JSON object per line, or readable lines.

use serde_json::{Value, json};

use super::{attempt_error, millis, name, outcome, output, state, time};
use model_runtime::pb;
use model_runtime::pb::execution_event::Payload;

/// One event as a JSON object.
pub fn json(event: &pb::ExecutionEvent) -> Value {
    let data = match &event.payload {
        Some(Payload::Accepted(a)) => {
            let l = a.limits.unwrap_or_default();
            let delivery =
                pb::Delivery::try_from(l.delivery).map_or("unknown", |d| d.as_str_name());
            let priority =
                pb::Priority::try_from(l.priority).map_or("unknown", |p| p.as_str_name());
            json!({"ability": a.ability, "policy": a.policy, "deadline": time(l.deadline.as_ref()),
                   "max_attempts": l.max_attempts, "allow_fallback": l.allow_fallback,
                   "retry_budget_ms": millis(l.retry_budget.as_ref()),
                   "delivery": name(delivery, "DELIVERY_"), "priority": name(priority, "PRIORITY_")})
        }
        Some(Payload::Routing(r)) => {
            let p = r.plan.clone().unwrap_or_default();
            json!({"policy": p.policy, "required_capabilities": p.required_capabilities,
                   "targets": p.targets.iter().map(|t| json!({"provider": t.provider, "model": t.model,
                       "kept": t.kept, "reason": t.reason, "missing_capabilities": t.missing_capabilities,
                       "ejected": t.ejected.as_ref().map(|e| json!({"reason": e.reason, "until": time(e.until.as_ref())}))})).collect::<Vec<_>>(),
                   "ended_before_routing": p.ended_before_routing, "tried_anyway": p.tried_anyway})
        }
        Some(Payload::AttemptStarted(a)) => {
            json!({"attempt": a.attempt, "provider": a.provider, "model": a.model})
        }
        Some(Payload::AttemptFailed(f)) => {
            let a = f.attempt.clone().unwrap_or_default();
            let next =
                pb::NextAction::try_from(a.next_action).map_or("unknown", |n| n.as_str_name());
            json!({"attempt": a.number, "provider": a.provider, "model": a.model, "admitted": a.admitted,
                   "duration_ms": millis(a.duration.as_ref()), "error": attempt_error(a.error.as_ref()),
                   "output_committed": a.output_committed, "outcome": outcome(a.outcome),
                   "next_action": name(next, "NEXT_ACTION_"), "held_output": output(a.held_output.as_ref())})
        }
        Some(Payload::TextDelta(d)) => json!({"attempt": d.attempt, "text": d.text}),
        Some(Payload::ToolCallStarted(t)) => {
            json!({"attempt": t.attempt, "index": t.index, "id": t.id, "name": t.name})
        }
        Some(Payload::ToolCallArgumentsDelta(d)) => {
            json!({"attempt": d.attempt, "index": d.index, "delta": d.delta})
        }
        Some(Payload::ReasoningDelta(r)) => {
            json!({"attempt": r.attempt, "text": r.text, "signature": r.signature, "redacted": r.redacted})
        }
        Some(Payload::Progress(p)) => json!({"attempt": p.attempt, "message": p.message}),
        Some(Payload::UsageReported(u)) => {
            let f = u.fact.clone().unwrap_or_default();
            let source = pb::UsageSource::try_from(f.source).map_or("unknown", |s| s.as_str_name());
            json!({"unit": f.unit, "quantity": f.quantity, "source": name(source, "USAGE_SOURCE_"),
                   "attempt": f.attempt, "provider": f.provider, "model": f.model, "labels": f.labels})
        }
        Some(Payload::Completed(c)) => {
            let r = c.result.clone().unwrap_or_default();
            let finish =
                pb::FinishReason::try_from(r.finish_reason).map_or("unknown", |f| f.as_str_name());
            json!({"output": output(r.output.as_ref()), "finish_reason": name(finish, "FINISH_REASON_"),
                   "provider": r.provider, "model": r.model, "attempt": r.attempt})
        }
        Some(Payload::Failed(f)) => {
            let e = f.error.clone().unwrap_or_default();
            json!({"code": e.code, "message": e.message, "outcome": outcome(e.outcome),
                   "last_attempt_error": attempt_error(e.last_attempt_error.as_ref()),
                   "partial_output": output(f.partial_output.as_ref()), "cancel_reason": f.cancel_reason})
        }
        None => Value::Null,
    };
    json!({
        "execution_id": event.execution_id,
        "sequence": event.sequence,
        "time": time(event.time.as_ref()),
        "type": event.r#type,
        "state": state(event.state),
        "data": data,
    })
}

/// One event as a readable status line, or `None` for output (which `exec` prints as text)
/// and reasoning (which `--json` shows).
pub fn line(event: &pb::ExecutionEvent) -> Option<String> {
    let detail = match &event.payload {
        Some(
            Payload::TextDelta(_) | Payload::ToolCallArgumentsDelta(_) | Payload::ReasoningDelta(_),
        ) => return None,
        Some(Payload::Accepted(a)) => format!(
            "{} ability={} policy={}",
            event.execution_id, a.ability, a.policy
        ),
        Some(Payload::Routing(r)) => {
            let p = r.plan.clone().unwrap_or_default();
            let targets: Vec<String> = p
                .targets
                .iter()
                .map(|t| match &t.ejected {
                    _ if !t.kept => {
                        format!("{}/{} (filtered: {})", t.provider, t.model, t.reason)
                    }
                    Some(ejected) => {
                        format!("{}/{} (ejected: {})", t.provider, t.model, ejected.reason)
                    }
                    None => format!("{}/{}", t.provider, t.model),
                })
                .collect();
            if p.ended_before_routing.is_empty() {
                format!("policy={} targets=[{}]", p.policy, targets.join(", "))
            } else {
                format!("policy={} not routed: {}", p.policy, p.ended_before_routing)
            }
        }
        Some(Payload::AttemptStarted(a)) => {
            format!("attempt {} on {}/{}", a.attempt, a.provider, a.model)
        }
        Some(Payload::AttemptFailed(f)) => {
            let a = f.attempt.clone().unwrap_or_default();
            let e = a.error.clone().unwrap_or_default();
            let next =
                pb::NextAction::try_from(a.next_action).map_or("unknown", |n| n.as_str_name());
            format!(
                "attempt {} on {}/{} failed: {}: {} (next: {})",
                a.number,
                a.provider,
                a.model,
                e.code,
                e.message,
                name(next, "NEXT_ACTION_")
            )
        }
        Some(Payload::ToolCallStarted(t)) => format!("tool call {} {} ({})", t.index, t.name, t.id),
        Some(Payload::Progress(p)) => p.message.clone(),
        Some(Payload::UsageReported(u)) => {
            let f = u.fact.clone().unwrap_or_default();
            format!("{} {}", f.quantity, f.unit)
        }
        Some(Payload::Completed(c)) => {
            let r = c.result.clone().unwrap_or_default();
            format!("by {}/{} in attempt {}", r.provider, r.model, r.attempt)
        }
        Some(Payload::Failed(f)) => {
            let e = f.error.clone().unwrap_or_default();
            format!(
                "{}: {} (outcome: {})",
                e.code,
                e.message,
                outcome(e.outcome)
            )
        }
        None => String::new(),
    };
    Some(format!("[{}] {} {}", event.sequence, event.r#type, detail))
}
