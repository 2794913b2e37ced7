//! Traces through the real binary: `serve` with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an
//! in-process OTLP receiver (the collector's trace service over gRPC, and OTLP/HTTP), a call
//! carrying a W3C `traceparent`, and an OpenAI or Anthropic upstream that records what it was
//! sent. The RPC's span is the caller's child; the execution's and the attempt's follow it,
//! with the GenAI attributes (the response's model as the upstream named it); the upstream's
//! request carries the attempt's span as its parent; no prompt or output is on any span.
//! Without the variables, the caller's context reaches the upstream unchanged.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::anthropic::{
    block_start, block_stop, message_delta, message_start, message_stop, text_delta,
};
use common::process::start_server_env;
use common::upstream::{LIMITS, Upstream, sse};
use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use model_runtime::server::http1;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::net::TcpListener;

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const PROMPT: &str = "a secret prompt";
const REPLY: &str = "a private reply";

fn traceparent() -> String {
    format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")
}

/// Spans received, with the resource's `service.name` of each.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    fn keep(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.0.lock().unwrap();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| text(kv.value.as_ref()?.value.as_ref()?))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                spans.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
    }

    /// The spans of the caller's trace, once its attempt span has arrived.
    async fn trace(&self) -> Vec<(String, Span)> {
        for _ in 0..200 {
            let spans: Vec<_> = self
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, s)| hex(&s.trace_id) == CALLER_TRACE)
                .cloned()
                .collect();
            let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
            if names.contains(&"chat m") && names.contains(&"execution") {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the spans did not arrive: {:?}", self.0.lock().unwrap());
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.keep(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// The collector's gRPC trace service on 127.0.0.1:0.
async fn grpc_receiver() -> (Received, String) {
    let received = Received::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = TraceServiceServer::new(received.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (received, format!("http://{addr}"))
}

/// OTLP/HTTP on 127.0.0.1:0: `POST /v1/traces` with a protobuf body, each request read by the
/// runtime's HTTP/1.1 reader.
async fn http_receiver() -> (Received, String) {
    let received = Received::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let keep = received.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let keep = keep.clone();
            tokio::spawn(async move {
                http1::serve_connection(socket, &LIMITS, |request| {
                    assert_eq!(
                        (request.method().as_str(), request.uri().to_string()),
                        ("POST", "/v1/traces".to_owned())
                    );
                    assert!(request.headers().contains_key("content-length"));
                    keep.keep(ExportTraceServiceRequest::decode(request.body().as_ref()).unwrap());
                    let mut ok = http1::Response::new(http1::Frames::empty());
                    ok.headers_mut().insert(
                        "content-type",
                        http::HeaderValue::from_static("application/x-protobuf"),
                    );
                    std::future::ready(Some(ok))
                })
                .await;
            });
        }
    });
    (received, format!("http://{addr}"))
}

/// The adapter an upstream speaks, and the model it says answered.
#[derive(Clone, Copy)]
enum Adapter {
    OpenAi,
    Anthropic,
}

impl Adapter {
    fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    /// What the upstream reports as the model: a dated name, not the requested `m`.
    fn response_model(self) -> &'static str {
        match self {
            Self::OpenAi => "m-2026-01-01",
            Self::Anthropic => "claude-sonnet-4-5",
        }
    }
}

/// An upstream that streams `REPLY` with 11 input and 3 output tokens.
async fn upstream(adapter: Adapter) -> Upstream {
    let events = match adapter {
        Adapter::OpenAi => {
            let model = adapter.response_model();
            let chunk = |delta: &str, finish: &str| {
                format!(
                    "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
                )
            };
            vec![
                chunk(&format!("{{\"content\":\"{REPLY}\"}}"), "null"),
                chunk("{}", "\"stop\""),
                format!(
                    "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"{model}\",\"choices\":[],\"usage\":{{\"prompt_tokens\":11,\"completion_tokens\":3,\"total_tokens\":14}}}}\n\n"
                ),
                "data: [DONE]\n\n".into(),
            ]
        }
        Adapter::Anthropic => vec![
            message_start(r#"{"input_tokens":11,"output_tokens":1}"#),
            block_start(0, r#"{"type":"text","text":""}"#),
            text_delta(0, REPLY),
            block_stop(0),
            message_delta("end_turn", 3),
            message_stop(),
        ],
    };
    Upstream::always(sse(&events)).await
}

fn config(adapter: Adapter, upstream: &Upstream) -> ConfigBuilder {
    let spec = match adapter {
        Adapter::OpenAi => ProviderSpec::openai(&upstream.base_url()),
        Adapter::Anthropic => ProviderSpec::anthropic(&upstream.base_url()).api_key_env(KEY_ENV),
    };
    Config::builder()
        .provider("upstream", spec.model("m", &["text"]))
        .policy("default", PolicySpec::new(&["upstream/m"]))
        .ability("chat", AbilitySpec::new("default"))
}

const KEY_ENV: &str = "MODEL_RUNTIME_TEST_KEY";
const STORE_KEY_ENV: &str = "MODEL_RUNTIME_TEST_STORE_KEY";

/// `Execute` of `PROMPT` with the caller's trace context in the metadata.
async fn traced_execute(addr: &str) -> Vec<pb::ExecutionEvent> {
    let mut client = ModelRuntimeClient::new(connect(addr).await);
    let mut call = tonic::Request::new(request("chat", PROMPT));
    let metadata = call.metadata_mut();
    metadata.insert("traceparent", traceparent().parse().unwrap());
    metadata.insert("tracestate", "vendor=opaque".parse().unwrap());
    let stream = within(client.execute(call)).await.unwrap().into_inner();
    collect(stream).await
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// A span's attributes, rendered as text.
fn attributes(span: &Span) -> BTreeMap<String, String> {
    span.attributes
        .iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                Some(Value::ArrayValue(a)) => a
                    .values
                    .iter()
                    .filter_map(|v| text(v.value.as_ref()?))
                    .collect::<Vec<_>>()
                    .join(","),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

/// `durable`: on a file store, whose create waits for the disk (the execution starts in a
/// task of its own), which must still continue the caller's trace.
async fn exported_through(protocol: &str, adapter: Adapter, durable: bool) {
    let (received, endpoint) = match protocol {
        "grpc" => grpc_receiver().await,
        _ => http_receiver().await,
    };
    let upstream = upstream(adapter).await;
    let file = tempfile::NamedTempFile::new().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut config = config(adapter, &upstream);
    if durable {
        config = config.file_store(store.path().to_str().unwrap(), STORE_KEY_ENV);
    }
    std::fs::write(file.path(), config.to_toml()).unwrap();
    let (_server, addr) = start_server_env(
        &["--config", file.path().to_str().unwrap()],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ("OTEL_SERVICE_NAME", "runtime-under-test"),
            (KEY_ENV, "test-key"),
            (STORE_KEY_ENV, &"ab".repeat(32)),
        ],
        WAIT,
    );
    let events = traced_execute(&addr).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");

    let spans = received.trace().await;
    let named = |name: &str| {
        spans
            .iter()
            .map(|(_, s)| s)
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name} in {spans:?}"))
    };
    assert!(
        spans
            .iter()
            .all(|(service, _)| service == "runtime-under-test")
    );
    let rpc = named("model_runtime.v1.ModelRuntime/Execute");
    let execution = named("execution");
    let attempt = named("chat m");
    // The chain: caller -> RPC (server) -> execution -> attempt (client).
    assert_eq!(hex(&rpc.parent_span_id), CALLER_SPAN);
    assert_eq!(execution.parent_span_id, rpc.span_id);
    assert_eq!(attempt.parent_span_id, execution.span_id);
    assert_eq!(rpc.kind, 2, "server");
    assert_eq!(attempt.kind, 3, "client");
    assert_eq!(rpc.trace_state, "vendor=opaque");

    let rpc_fields = attributes(rpc);
    assert_eq!(rpc_fields["rpc.system"], "grpc");
    assert_eq!(rpc_fields["rpc.service"], "model_runtime.v1.ModelRuntime");
    assert_eq!(rpc_fields["rpc.method"], "Execute");
    assert_eq!(rpc_fields["rpc.grpc.status_code"], "0");

    let execution_fields = attributes(execution);
    let id = &events[0].execution_id;
    assert_eq!(&execution_fields["execution_id"], id);
    assert_eq!(execution_fields["ability"], "chat");
    assert_eq!(execution_fields["policy"], "default");
    assert_eq!(execution_fields["outcome"], "completed");

    let attempt_fields = attributes(attempt);
    for (key, value) in [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", adapter.name()),
        ("gen_ai.request.model", "m"),
        ("gen_ai.response.model", adapter.response_model()),
        ("gen_ai.usage.input_tokens", "11"),
        ("gen_ai.usage.output_tokens", "3"),
        ("gen_ai.response.finish_reasons", "stop"),
        ("provider", "upstream"),
        ("model", "m"),
        ("attempt", "1"),
        ("outcome", "succeeded"),
    ] {
        assert_eq!(
            attempt_fields.get(key).map(String::as_str),
            Some(value),
            "{key} in {attempt_fields:?}"
        );
    }

    // The upstream was called as the attempt's child, in the caller's trace and state.
    let requests = upstream.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("traceparent"),
        Some(format!("00-{CALLER_TRACE}-{}-01", hex(&attempt.span_id)).as_str())
    );
    assert_eq!(requests[0].header("tracestate"), Some("vendor=opaque"));

    // Prompts and outputs stay off spans, their events included.
    let everything = format!("{spans:?}");
    assert!(!everything.contains(PROMPT) && !everything.contains(REPLY));
}

#[tokio::test]
async fn spans_are_exported_over_otlp_grpc_under_the_callers_trace_on_a_file_store() {
    exported_through("grpc", Adapter::OpenAi, true).await;
}

#[tokio::test]
async fn spans_are_exported_over_otlp_http_under_the_callers_trace() {
    exported_through("http/protobuf", Adapter::Anthropic, false).await;
}

#[tokio::test]
async fn without_export_the_callers_context_reaches_the_provider_unchanged() {
    let upstream = upstream(Adapter::OpenAi).await;
    let server = start_with(config(Adapter::OpenAi, &upstream).build().unwrap()).await;
    let events = traced_execute(&server.addr.to_string()).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");

    // A traceparent that is not valid is not forwarded.
    let mut client = ModelRuntimeClient::new(connect(&server.addr.to_string()).await);
    let mut call = tonic::Request::new(request("chat", PROMPT));
    call.metadata_mut()
        .insert("traceparent", "00-not-a-trace-01".parse().unwrap());
    let stream = within(client.execute(call)).await.unwrap().into_inner();
    collect(stream).await;

    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header("traceparent"),
        Some(traceparent().as_str())
    );
    assert_eq!(requests[0].header("tracestate"), Some("vendor=opaque"));
    assert_eq!(requests[1].header("traceparent"), None);
    assert_eq!(requests[1].header("tracestate"), None);
    server.stop().await;
}

/// Through the HTTP ingress, the caller's `traceparent` and `tracestate` headers reach the
/// provider as through gRPC.
#[tokio::test]
async fn through_the_http_ingress_the_callers_context_reaches_the_provider() {
    use crate::ingress::client::{Ask, Version, send};
    let upstream = upstream(Adapter::OpenAi).await;
    let config = config(Adapter::OpenAi, &upstream).ingress("127.0.0.1:0", Duration::from_secs(1));
    let server = start_with(config.build().unwrap()).await;
    let parent = traceparent();
    let headers = [
        ("traceparent", parent.as_str()),
        ("tracestate", "vendor=opaque"),
    ];
    let body =
        serde_json::json!({"model": "chat", "messages": [{"role": "user", "content": PROMPT}]});
    let ask = Ask::post("/v1/chat/completions").with(&headers);
    let reply = send(server.http.unwrap(), Version::Http1, ask, Some(&body)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let requests = upstream.requests();
    assert_eq!(requests[0].header("traceparent"), Some(parent.as_str()));
    assert_eq!(requests[0].header("tracestate"), Some("vendor=opaque"));
    server.stop().await;
}
