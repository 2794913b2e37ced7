//! `GET /v1/models`: the models a caller may name, which are the abilities: each alone (its
//! default policy) and as `ability/policy` for every policy it allows, with the capabilities
//! its targets must have. In OpenAI's list shape, or Anthropic's when the request carries
//! `anthropic-version` (as Anthropic's SDKs send it).

use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::body::{self, Answer};
use crate::config::Config;

/// The models of `config`, in the shape the request's headers ask for.
pub(super) fn list(config: &Config, headers: &HeaderMap) -> Answer {
    let mut models = Vec::new();
    for ability in config.abilities.values() {
        let capabilities: Vec<&str> = ability.requires.iter().map(String::as_str).collect();
        models.push((
            ability.name.to_string(),
            &*ability.default_policy,
            capabilities.clone(),
        ));
        for policy in &ability.allowed_policies {
            models.push((
                format!("{}/{policy}", ability.name),
                &**policy,
                capabilities.clone(),
            ));
        }
    }
    let anthropic = headers.contains_key("anthropic-version");
    let data: Vec<Value> = models
        .iter()
        .map(|(id, policy, capabilities)| {
            if anthropic {
                json!({
                    "type": "model",
                    "id": id,
                    "display_name": id,
                    "created_at": "1970-01-01T00:00:00Z",
                })
            } else {
                json!({
                    "id": id,
                    "object": "model",
                    "created": 0,
                    "owned_by": "model-runtime",
                    "policy": policy,
                    "capabilities": capabilities,
                })
            }
        })
        .collect();
    let list = if anthropic {
        json!({
            "data": data,
            "has_more": false,
            "first_id": models.first().map(|m| &m.0),
            "last_id": models.last().map(|m| &m.0),
        })
    } else {
        json!({"object": "list", "data": data})
    };
    body::json(StatusCode::OK, &list)
}
