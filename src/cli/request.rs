//! What `exec` and `submit` ask a server to run: one prompt to an ability, as an
//! `ExecuteRequest`.

use std::time::{Duration, SystemTime};

use super::client::CallError;
use model_runtime::pb;

/// The execution to run.
#[derive(Debug, Clone, clap::Args)]
pub struct RequestArgs {
    /// The ability to run.
    #[arg(long)]
    ability: String,
    /// The routing policy, one the ability allows (default: the ability's own).
    #[arg(long)]
    policy: Option<String>,
    /// One target of the policy in effect, as provider/model, to try alone (a model checked
    /// directly, without a policy of its own).
    #[arg(long, value_name = "PROVIDER/MODEL")]
    target: Option<String>,
    /// A label copied onto the execution's usage facts, as KEY=VALUE (e.g. tenant=acme);
    /// repeat it for more.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    labels: Vec<(String, String)>,
    /// The deadline, this long from now (e.g. 30s; default: the server's
    /// `server.default_deadline`).
    #[arg(long, value_parser = humantime::parse_duration)]
    deadline: Option<Duration>,
    /// Hold each attempt's reply until it completes (delivery BUFFERED): a reply cut
    /// mid-way can still fall back, and the text arrives whole. Default: the policy's
    /// delivery, streamed unless it says otherwise.
    #[arg(long)]
    buffered: bool,
    /// The admission class: interactive, standard (the default) or batch.
    #[arg(long, value_parser = priority)]
    priority: Option<pb::Priority>,
    /// An idempotency key: the same key with the same request names the same execution.
    #[arg(long, value_name = "KEY")]
    idempotency_key: Option<String>,
    /// The user prompt.
    prompt: String,
}

/// A `--label`: `KEY=VALUE`, split at the first `=`.
pub(crate) fn label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE, like tenant=acme".to_owned()),
    }
}

/// A `--priority`: one of the classes, by its lowercase name.
fn priority(text: &str) -> Result<pb::Priority, String> {
    match text {
        "interactive" => Ok(pb::Priority::Interactive),
        "standard" => Ok(pb::Priority::Standard),
        "batch" => Ok(pb::Priority::Batch),
        _ => Err("expected interactive, standard or batch".to_owned()),
    }
}

impl RequestArgs {
    /// The request these arguments describe.
    pub fn request(self) -> Result<pb::ExecuteRequest, CallError> {
        let deadline = match self.deadline {
            Some(after) => Some(
                SystemTime::now()
                    .checked_add(after)
                    .map(prost_types::Timestamp::from)
                    .ok_or_else(|| {
                        CallError::Invalid("--deadline: too far in the future".to_owned())
                    })?,
            ),
            None => None,
        };
        Ok(pb::ExecuteRequest {
            ability: self.ability,
            policy: self.policy.unwrap_or_default(),
            target: self.target.unwrap_or_default(),
            labels: self.labels.into_iter().collect(),
            deadline,
            delivery: if self.buffered {
                pb::Delivery::Buffered.into()
            } else {
                pb::Delivery::Unspecified.into()
            },
            priority: self.priority.unwrap_or(pb::Priority::Unspecified).into(),
            idempotency_key: self.idempotency_key.unwrap_or_default(),
            input: Some(pb::ExecutionInput {
                messages: vec![pb::Message {
                    role: pb::Role::User.into(),
                    content: vec![pb::ContentPart {
                        part: Some(pb::content_part::Part::Text(self.prompt)),
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        })
    }
}
