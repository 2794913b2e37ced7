//! The execution as a resource, for a caller that speaks HTTP only: `GET /v1/executions/{id}`
//! (the view, as `GetExecution` answers it), `GET /v1/executions/{id}/events` (every event as
//! a server-sent event, `id:` its sequence and `event:` its type, from `?after=N` or the
//! `Last-Event-ID` a reconnecting client sends, ending after the terminal one; leaving does
//! not cancel), and `POST /v1/executions/{id}/cancel` (`{"reason": ...}`, optional). Each
//! message is in protobuf's canonical JSON, as `buf curl` prints the gRPC answers.

use std::fmt::Write as _;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use http::{HeaderMap, StatusCode};
use serde::Deserialize;

use super::Shared;
use super::body::{self, Answer};
use super::error::{Api, Refusal};
use super::request;
use super::stream::{Encoder, Events};
use crate::execution::{Event, ExecutionId};
use crate::pb::json::canonical_json;
use crate::service::encode;

/// `GET /v1/executions/{id}`.
pub(super) async fn get(shared: &Shared, id: &str) -> Answer {
    let view = async {
        let id = parse(id)?;
        shared
            .runtime
            .get(id)
            .await
            .map_err(|e| Refusal::of_runtime(&e))
    };
    match view.await {
        Ok(view) => message(&encode::execution(&view), "model_runtime.v1.Execution"),
        Err(refusal) => refusal.answer(Api::OpenAi),
    }
}

/// `POST /v1/executions/{id}/cancel`.
pub(super) async fn cancel(shared: &Shared, id: &str, body: &[u8]) -> Answer {
    #[derive(Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    struct Cancel {
        reason: Option<String>,
    }
    let view = async {
        let id = parse(id)?;
        let cancel: Cancel = if body.is_empty() {
            Cancel::default()
        } else {
            request::json(body)?
        };
        shared
            .runtime
            .cancel(id, cancel.reason)
            .await
            .map_err(|e| Refusal::of_runtime(&e))
    };
    match view.await {
        Ok(view) => message(&encode::execution(&view), "model_runtime.v1.Execution"),
        Err(refusal) => refusal.answer(Api::OpenAi),
    }
}

/// `GET /v1/executions/{id}/events[?after=N]`.
pub(super) async fn events(
    shared: &Arc<Shared>,
    id: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Answer {
    let events = async {
        let id = parse(id)?;
        let after = match request::last_event_id(headers)? {
            Some(after) => after,
            None => after(query)?,
        };
        shared
            .runtime
            .watch(id, after)
            .await
            .map_err(|e| Refusal::of_runtime(&e))
    };
    match events.await {
        Ok(events) => {
            let id = events.execution_id();
            let mut answer = body::events(Events::new(events, Resource { id }, 0, None));
            body::tag(&mut answer, id, "");
            answer
        }
        Err(refusal) => refusal.answer(Api::OpenAi),
    }
}

fn parse(id: &str) -> Result<ExecutionId, Refusal> {
    id.parse()
        .map_err(|e| Refusal::invalid("id", format!("`{id}` is not an execution id: {e}")))
}

/// `after=N` in `query`, else 0.
fn after(query: Option<&str>) -> Result<u64, Refusal> {
    let Some(text) = query
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("after="))
    else {
        return Ok(0);
    };
    text.parse()
        .map_err(|_| Refusal::invalid("after", format!("`{text}` is not an event's sequence")))
}

/// `message`, of the full type `name`, as a JSON answer.
fn message(message: &impl prost::Message, name: &str) -> Answer {
    match canonical_json(message, name, false) {
        Ok(json) => body::whole(StatusCode::OK, "application/json", json.into()),
        Err(e) => Refusal::internal(&e).answer(Api::OpenAi),
    }
}

/// Writes every event of one execution in the API's canonical JSON.
#[derive(Debug)]
struct Resource {
    id: ExecutionId,
}

impl Encoder for Resource {
    fn event(&mut self, event: &Event, out: &mut BytesMut) -> bool {
        let wire = encode::event(self.id, event);
        match canonical_json(&wire, "model_runtime.v1.ExecutionEvent", false) {
            Ok(json) => {
                // Writing into memory cannot fail.
                let _ = write!(
                    out,
                    "id: {}\nevent: {}\ndata: ",
                    event.sequence,
                    event.payload.type_name()
                );
                out.put_slice(json.as_bytes());
                out.put_slice(b"\n\n");
            }
            Err(e) => {
                out.put_slice(&Refusal::internal(&e).event(Api::Anthropic));
                return true;
            }
        }
        event.is_terminal()
    }

    fn cut(&mut self, out: &mut BytesMut) {
        out.put_slice(&Refusal::cut().event(Api::Anthropic));
    }
}
