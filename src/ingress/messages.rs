//! `POST /v1/messages`: Anthropic's Messages API, streaming and not. The request maps onto an
//! execution (`input.rs`); the answer is written as the API writes it (`reply.rs`).

mod input;
mod reply;

use std::sync::Arc;

use http::HeaderMap;

use self::input::MessagesRequest;
use self::reply::{Stream, message};
use super::Shared;
use super::answer::{Answering, answer};
use super::body::Answer;
use super::error::{Api, Refusal};
use super::request;
use crate::execution::Delivery;

/// Answers a Messages request.
pub(super) async fn create(shared: &Arc<Shared>, headers: &HeaderMap, body: &[u8]) -> Answer {
    match create_of(shared, headers, body).await {
        Ok(answer) => answer,
        Err(refusal) => refusal.answer(Api::Anthropic),
    }
}

async fn create_of(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Answer, Refusal> {
    let messages: MessagesRequest = request::json(body)?;
    let mut execute = request::execute_request(shared.runtime.config(), &messages.model, headers)?;
    let (input, capabilities) = messages.input()?;
    execute.input = input;
    execute.capabilities = capabilities;
    execute.labels = messages.labels();
    execute.delivery = Some(if messages.stream {
        Delivery::Streamed
    } else {
        Delivery::Buffered
    });
    let answering = Answering {
        api: Api::Anthropic,
        stream: messages.stream.then_some(Stream::new),
        whole: message,
        after: request::last_event_id(headers)?.unwrap_or(0),
    };
    answer(shared, execute, answering).await
}
