//! What every API's request shares on its way to an execution: the body read as JSON with
//! the field at fault named, the `model` read as an ability (`chat`) or an ability and a
//! policy it allows (`chat/fast`), and the headers that carry the rest: `Idempotency-Key`,
//! `Last-Event-ID`, `traceparent`, and the runtime's own `x-model-runtime-priority`; and what
//! OpenAI's two APIs share: a reasoning effort as a budget, an image URL as bytes or a URL.

use std::collections::BTreeMap;

use http::HeaderMap;
use serde::de::DeserializeOwned;

use super::error::Refusal;
use crate::config::Config;
use base64::Engine;

use crate::execution::{ExecuteRequest, Image, Priority, TraceContext};

/// The header a caller's priority (admission class) is read from.
const PRIORITY: &str = "x-model-runtime-priority";

/// `body` as a `T`; where it is not one, a 400 naming the field (`messages[0].content`) and
/// the reason.
pub(super) fn json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    let reader = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(reader).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // serde_json's reason ends with where in the text it is: the field says it better.
        let why = inner.to_string();
        let why = why.split(" at line ").next().unwrap_or(&why).to_owned();
        if path == "." {
            let field = unknown_field(&why).unwrap_or("body").to_owned();
            Refusal::invalid(field, why)
        } else {
            Refusal::invalid(path, why)
        }
    })
}

/// The field serde names in "unknown field `x`, expected ...".
fn unknown_field(why: &str) -> Option<&str> {
    why.strip_prefix("unknown field `")?.split('`').next()
}

/// A request for `model` (an ability, or `ability/policy`), with what the headers say; a 404
/// for an ability this runtime does not have.
pub(super) fn execute_request(
    config: &Config,
    model: &str,
    headers: &HeaderMap,
) -> Result<ExecuteRequest, Refusal> {
    let (ability, policy) = match model.split_once('/') {
        Some((ability, policy)) => (ability, Some(policy.to_owned())),
        None => (model, None),
    };
    if !config.abilities.contains_key(ability) {
        return Err(Refusal {
            param: Some("model".into()),
            ..Refusal::new(
                http::StatusCode::NOT_FOUND,
                "model_not_found",
                format!(
                    "model: `{ability}` is not an ability of this runtime (GET /v1/models lists \
                     them)"
                ),
            )
        });
    }
    Ok(ExecuteRequest {
        ability: ability.to_owned(),
        policy,
        idempotency_key: idempotency_key(headers)?,
        priority: priority(headers)?,
        trace: trace(headers),
        ..ExecuteRequest::default()
    })
}

/// The `Idempotency-Key` header, if there is one.
pub(super) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    header("idempotency-key", headers)
}

/// The sequence `Last-Event-ID` names: the caller saw every event up to it.
pub(super) fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, Refusal> {
    header("last-event-id", headers)?
        .map(|text| {
            text.trim().parse().map_err(|_| {
                Refusal::invalid(
                    "Last-Event-ID",
                    format!("`{text}` is not an event's sequence"),
                )
            })
        })
        .transpose()
}

fn priority(headers: &HeaderMap) -> Result<Option<Priority>, Refusal> {
    let Some(text) = header(PRIORITY, headers)? else {
        return Ok(None);
    };
    Priority::ALL
        .into_iter()
        .find(|p| p.as_str() == text)
        .map(Some)
        .ok_or_else(|| {
            Refusal::invalid(
                PRIORITY,
                format!("`{text}` is not one of interactive, standard, batch"),
            )
        })
}

/// The W3C trace context of the request, if it carries a valid one.
fn trace(headers: &HeaderMap) -> Option<TraceContext> {
    let parent = headers.get("traceparent")?;
    let states = headers
        .get_all("tracestate")
        .into_iter()
        .map(|v| v.as_bytes());
    TraceContext::parse(parent.as_bytes(), states)
}

/// The header `name` as text; a 400 when it is not.
fn header(name: &str, headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    headers
        .get(name)
        .map(|value| {
            value
                .to_str()
                .map(str::to_owned)
                .map_err(|_| Refusal::invalid(name, "is not visible ASCII text"))
        })
        .transpose()
}

/// The reasoning budget `effort` (the request's `field`) stands for, in tokens: what providers
/// that take a budget (Anthropic, Gemini, Bedrock) are given.
pub(super) fn budget(field: &str, effort: Option<&str>) -> Result<Option<u32>, Refusal> {
    let Some(effort) = effort else {
        return Ok(None);
    };
    let tokens = match effort {
        "minimal" => 1024,
        "low" => 2048,
        "medium" => 8192,
        "high" => 24_576,
        _ => {
            return Err(Refusal::invalid(
                field,
                format!("`{effort}` is not one of minimal, low, medium, high"),
            ));
        }
    };
    Ok(Some(tokens))
}

/// The labels the usage facts carry: OpenAI's `metadata`, and `user` as the label `user`.
pub(super) fn labels(
    metadata: Option<&BTreeMap<String, String>>,
    user: Option<&String>,
) -> BTreeMap<String, String> {
    let mut labels = metadata.cloned().unwrap_or_default();
    if let Some(user) = user {
        labels.insert("user".into(), user.clone());
    }
    labels
}

/// An image part's URL: a `data:` URL's bytes and media type, or a URL the provider fetches.
pub(super) fn image(url: &str, field: &str) -> Result<Image, Refusal> {
    let Some(data) = url.strip_prefix("data:") else {
        return Ok(Image {
            url: url.to_owned(),
            ..Image::default()
        });
    };
    let Some((media_type, encoded)) = data.split_once(";base64,") else {
        return Err(Refusal::invalid(
            field,
            "a data: URL must be base64 (data:TYPE;base64,...)",
        ));
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| Refusal::invalid(field, "the data: URL's base64 does not decode"))?;
    Ok(Image {
        url: String::new(),
        data: bytes,
        media_type: media_type.to_owned(),
    })
}
