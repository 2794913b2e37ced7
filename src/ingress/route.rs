//! Which answer a request gets: the gateway's secret is checked first, then the body is read
//! within its bound, then the endpoint is found by method and path.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tokio::time::Instant;

use super::body::Answer;
use super::error::{Api, Refusal};
use super::{Shared, chat, executions, grpc_web, messages, models, responses};

/// Answers one request; with `server.access_log`, a line for it once its head is sent (a
/// streamed answer's at its first shown event).
pub(super) async fn route(shared: &Arc<Shared>, request: http::Request<Incoming>) -> Answer {
    if !shared.runtime.config().server.access_log {
        return answer(shared, request).await;
    }
    let start = Instant::now();
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let answer = answer(shared, request).await;
    let execution = answer
        .headers()
        .get("x-model-runtime-execution-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    tracing::info!(
        target: "model_runtime::access",
        method = %method,
        path,
        execution_id = execution,
        status = answer.status().as_u16(),
        duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        "access"
    );
    answer
}

async fn answer(shared: &Arc<Shared>, request: http::Request<Incoming>) -> Answer {
    let api = if request.uri().path().starts_with("/v1/messages") {
        Api::Anthropic
    } else {
        Api::OpenAi
    };
    if grpc_web::is_grpc_web(&request) {
        // Refused as gRPC-Web says: a status its client reads.
        if authorize(shared, request.headers()).is_err() {
            return grpc_web::refused(tonic::Status::unauthenticated(
                "this ingress needs the gateway's secret (Authorization: Bearer, or x-api-key)",
            ));
        }
        return grpc_web::answer(&shared.grpc_web, request).await;
    }
    if let Err(refusal) = authorize(shared, request.headers()) {
        return refusal.answer(api);
    }
    let (head, body) = request.into_parts();
    let max = max_body(shared.runtime.config().server.max_input_bytes);
    let body = match Limited::new(body, max).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            let refusal = Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                format!(
                    "the body is larger than {max} bytes (twice server.max_input_bytes, plus 64 \
                     KiB), or was cut"
                ),
            );
            return refusal.answer(api);
        }
    };
    let path: Vec<&str> = head.uri.path().trim_matches('/').split('/').collect();
    let (method, headers) = (&head.method, &head.headers);
    match (path.as_slice(), method) {
        (["v1", "chat", "completions"], &Method::POST) => {
            chat::completions(shared, headers, &body).await
        }
        (["v1", "messages"], &Method::POST) => messages::create(shared, headers, &body).await,
        (["v1", "responses"], &Method::POST) => responses::create(shared, headers, &body).await,
        (["v1", "models"], &Method::GET) => models::list(shared.runtime.config(), headers),
        (["v1", "executions", id], &Method::GET) => executions::get(shared, id).await,
        (["v1", "executions", id, "events"], &Method::GET) => {
            executions::events(shared, id, head.uri.query(), headers).await
        }
        (["v1", "executions", id, "cancel"], &Method::POST) => {
            executions::cancel(shared, id, &body).await
        }
        (
            ["v1", "chat", "completions"]
            | ["v1", "messages" | "responses"]
            | ["v1", "executions", _, "cancel"],
            _,
        ) => not_allowed(api, "POST"),
        (["v1", "models"] | ["v1", "executions", _] | ["v1", "executions", _, "events"], _) => {
            not_allowed(api, "GET")
        }
        _ => not_found(api, &head.method, head.uri.path()),
    }
}

/// The bound of a request's body: its content is held to `server.max_input_bytes` as a gRPC
/// request's is, and JSON may write it up to twice as long (escapes, base64 images).
fn max_body(max_input_bytes: usize) -> usize {
    max_input_bytes.saturating_mul(2).saturating_add(64 * 1024)
}

/// The gateway's secret, where one is configured: `Authorization: Bearer SECRET` (OpenAI's
/// SDKs send their key so) or `x-api-key: SECRET` (Anthropic's).
fn authorize(shared: &Shared, headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(secret) = &shared.config.secret else {
        return Ok(());
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let key = headers.get("x-api-key").map(HeaderValue::as_bytes);
    let presented = bearer.or(key).unwrap_or_default();
    if equal(presented, secret.expose().as_bytes()) {
        return Ok(());
    }
    Err(Refusal::new(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "this ingress takes requests from its gateway only: present its secret as \
         `Authorization: Bearer ...` or `x-api-key`",
    ))
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only.
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn not_allowed(api: Api, allowed: &'static str) -> Answer {
    let mut answer = Refusal::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("this path takes {allowed}"),
    )
    .answer(api);
    answer
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allowed));
    answer
}

fn not_found(api: Api, method: &Method, path: &str) -> Answer {
    Refusal::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "{method} {path} is not served here: POST /v1/chat/completions, POST /v1/responses, \
             POST /v1/messages, \
             GET /v1/models, \
             GET /v1/executions/{{id}}[/events], POST /v1/executions/{{id}}/cancel"
        ),
    )
    .answer(api)
}
