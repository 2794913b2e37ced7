//! `POST /v1/responses`: OpenAI's Responses API, streaming and not. The request maps onto an
//! execution (`input.rs`); the answer is written as the API writes it (`reply.rs`).

mod input;
mod reply;

use std::sync::Arc;
use std::time::SystemTime;

use http::HeaderMap;

use self::input::ResponsesRequest;
use self::reply::{Stream, whole};
use super::Shared;
use super::answer::{Answering, answer};
use super::body::Answer;
use super::error::{Api, Refusal};
use super::request;
use crate::execution::Delivery;

/// Answers a Responses request.
pub(super) async fn create(shared: &Arc<Shared>, headers: &HeaderMap, body: &[u8]) -> Answer {
    match create_of(shared, headers, body).await {
        Ok(answer) => answer,
        Err(refusal) => refusal.answer(Api::OpenAi),
    }
}

async fn create_of(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Answer, Refusal> {
    let responses: ResponsesRequest = request::json(body)?;
    let mut execute = request::execute_request(shared.runtime.config(), &responses.model, headers)?;
    let (input, capabilities) = responses.input()?;
    execute.input = input;
    execute.capabilities = capabilities;
    execute.labels = responses.labels();
    execute.delivery = Some(if responses.stream {
        Delivery::Streamed
    } else {
        Delivery::Buffered
    });
    let created = SystemTime::now();
    let answering = Answering {
        api: Api::OpenAi,
        stream: responses
            .stream
            .then_some(move |id| Stream::new(id, created)),
        whole: |id, result: &_, tokens| whole(id, created, result, tokens),
        after: request::last_event_id(headers)?.unwrap_or(0),
    };
    answer(shared, execute, answering).await
}
