//! `POST /v1/chat/completions`: OpenAI's chat completions, streaming and not. The request maps
//! onto an execution (`input.rs`); the answer is written as the API writes it (`reply.rs`).

mod input;
mod reply;

use std::sync::Arc;
use std::time::SystemTime;

use http::HeaderMap;

use self::input::ChatRequest;
use self::reply::{Chunks, completion};
use super::Shared;
use super::answer::{Answering, answer};
use super::body::Answer;
use super::error::{Api, Refusal};
use super::request;
use crate::execution::Delivery;

/// Answers a chat completions request.
pub(super) async fn completions(shared: &Arc<Shared>, headers: &HeaderMap, body: &[u8]) -> Answer {
    match completions_of(shared, headers, body).await {
        Ok(answer) => answer,
        Err(refusal) => refusal.answer(Api::OpenAi),
    }
}

async fn completions_of(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Answer, Refusal> {
    let chat: ChatRequest = request::json(body)?;
    let mut execute = request::execute_request(shared.runtime.config(), &chat.model, headers)?;
    let (input, capabilities) = chat.input()?;
    execute.input = input;
    execute.capabilities = capabilities;
    execute.labels = chat.labels();
    execute.delivery = Some(if chat.stream {
        Delivery::Streamed
    } else {
        Delivery::Buffered
    });
    let created = SystemTime::now();
    let include_usage = chat
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let answering = Answering {
        api: Api::OpenAi,
        stream: chat
            .stream
            .then_some(move |id| Chunks::new(id, created, include_usage)),
        whole: |id, result: &_, tokens| completion(id, created, result, tokens),
        after: request::last_event_id(headers)?.unwrap_or(0),
    };
    answer(shared, execute, answering).await
}
