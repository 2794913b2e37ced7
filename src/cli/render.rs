//! How the commands show what a server answers: events (`event.rs`, for `exec` and `watch`),
//! an execution (`execution.rs`, for `get`, `submit` and `cancel`) and the runtime's metadata
//! (`metadata.rs`), readable. Any message in protobuf's canonical JSON, as `buf curl` prints
//! it, is the library's (`pb::json`).

mod event;
mod execution;
mod metadata;

pub use event::{json, line};
pub use execution::execution;
pub use metadata::metadata;

use serde_json::{Value, json};

use model_runtime::pb;

fn time(t: Option<&prost_types::Timestamp>) -> Value {
    match t.and_then(|t| std::time::SystemTime::try_from(*t).ok()) {
        Some(t) => Value::String(humantime::format_rfc3339_micros(t).to_string()),
        None => Value::Null,
    }
}

fn millis(d: Option<&prost_types::Duration>) -> Value {
    d.map_or(Value::Null, |d| {
        json!(d.seconds * 1000 + i64::from(d.nanos) / 1_000_000)
    })
}

/// A lowercase enum name without its type prefix, e.g. `EXECUTION_STATE_RUNNING` -> `running`.
fn name(full: &str, prefix: &str) -> String {
    full.strip_prefix(prefix)
        .unwrap_or(full)
        .to_ascii_lowercase()
}

fn state(value: i32) -> String {
    let full = pb::ExecutionState::try_from(value).map_or("unknown", |s| s.as_str_name());
    name(full, "EXECUTION_STATE_")
}

fn outcome(value: i32) -> String {
    let full = pb::Outcome::try_from(value).map_or("unknown", |s| s.as_str_name());
    name(full, "OUTCOME_")
}

fn output(o: Option<&pb::Output>) -> Value {
    let Some(o) = o else { return Value::Null };
    json!({
        "text": o.text,
        "tool_calls": o.tool_calls.iter().map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments_json})).collect::<Vec<_>>(),
        "reasoning": o.reasoning.iter().map(|r| json!({"text": r.text, "signature": r.signature, "redacted": r.redacted})).collect::<Vec<_>>(),
    })
}

fn attempt_error(e: Option<&pb::AttemptError>) -> Value {
    let Some(e) = e else { return Value::Null };
    let class = pb::ErrorClass::try_from(e.class).map_or("unknown", |c| c.as_str_name());
    json!({
        "class": name(class, "ERROR_CLASS_"),
        "code": e.code,
        "message": e.message,
        "retry_after_ms": millis(e.retry_after.as_ref()),
    })
}
