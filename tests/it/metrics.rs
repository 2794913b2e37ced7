//! `GET /metrics` during real traffic: the counts follow what the executions did (started,
//! ended by code, attempts by class and next action, usage by unit), the gauges what the
//! runtime holds, and nothing else answers.

use crate::common;

use std::time::Duration;

use common::*;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use model_runtime::{Runtime, server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    within(stream.read_to_string(&mut response)).await.unwrap();
    response
}

/// The value of the series written exactly as `series`.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap()
}

/// `config` served over gRPC and `/metrics` on loopback: a client, and the metrics address.
async fn serve(
    config: model_runtime::Config,
) -> (
    ModelRuntimeClient<tonic::transport::Channel>,
    std::net::SocketAddr,
) {
    let runtime = Runtime::new(config).unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let metrics = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_addr = metrics.local_addr().unwrap();
    tokio::spawn(server::serve(runtime.clone(), grpc, std::future::pending()));
    tokio::spawn(server::serve_metrics(
        runtime,
        metrics,
        std::future::pending(),
    ));
    let client = ModelRuntimeClient::new(connect(&grpc_addr.to_string()).await);
    (client, metrics_addr)
}

#[tokio::test]
async fn metrics_count_what_executions_did() {
    let config = echo()
        .provider(
            "flaky",
            ProviderSpec::scripted().scripted_model(
                "down",
                &["text"],
                script(|s| s.fail_attempts = 100),
            ),
        )
        .policy(
            "flaky",
            PolicySpec::new(&["flaky/down"])
                .max_attempts(2)
                .retries_per_target(1)
                .backoff(Duration::from_millis(1)),
        )
        .ability("flaky", AbilitySpec::new("flaky"))
        .provider(
            "slow",
            ProviderSpec::scripted().scripted_model("stuck", &["text"], script(|s| s.hang = true)),
        )
        .policy("slow", PolicySpec::new(&["slow/stuck"]))
        .ability("slow", AbilitySpec::new("slow"))
        // Room for three: the fourth and fifth executions make the store let one go each.
        .max_executions(3)
        // Metrics are counted only when they are served.
        .metrics_listen("127.0.0.1:0")
        .build()
        .unwrap();
    let (mut c, metrics_addr) = serve(config).await;

    for prompt in ["one", "two words", "three more words"] {
        let events = execute(&mut c, request("chat", prompt)).await;
        assert_eq!(events.last().unwrap().r#type, "execution.completed");
    }
    let events = execute(&mut c, request("flaky", "fails")).await;
    assert_eq!(
        failed_payload(&events).error.unwrap().code,
        "attempts_exhausted"
    );

    // One stream stays open: its execution never ends.
    let mut open = within(c.execute(request("slow", "waits")))
        .await
        .unwrap()
        .into_inner();
    within(open.message()).await.unwrap().unwrap();

    let text = get(metrics_addr, "/metrics").await;
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    let started = |ability: &str| {
        value(
            &text,
            &format!(r#"model_runtime_executions_started_total{{ability="{ability}"}}"#),
        )
    };
    assert_eq!(started("chat"), 3.0);
    assert_eq!(started("flaky"), 1.0);
    let ended = |ability: &str, code: &str| {
        value(
            &text,
            &format!(
                r#"model_runtime_executions_ended_total{{ability="{ability}",code="{code}"}}"#
            ),
        )
    };
    assert_eq!(ended("chat", "completed"), 3.0);
    assert_eq!(ended("chat", "cancelled"), 0.0);
    assert_eq!(ended("flaky", "attempts_exhausted"), 1.0);
    let attempts = |target: &str, class: &str, next: &str| {
        let (provider, model) = target.split_once('/').unwrap();
        value(
            &text,
            &format!(
                r#"model_runtime_attempts_total{{provider="{provider}",model="{model}",class="{class}",next_action="{next}"}}"#
            ),
        )
    };
    assert_eq!(attempts("scripted/echo", "none", "none"), 3.0);
    assert_eq!(
        attempts("flaky/down", "retryable", "retry_same_target"),
        1.0
    );
    assert_eq!(attempts("flaky/down", "retryable", "stop"), 1.0);
    // The echo reports the prompt's words as input tokens: 1 + 2 + 3.
    assert_eq!(
        value(
            &text,
            r#"model_runtime_usage_units_total{provider="scripted",model="echo",unit="input_tokens"}"#
        ),
        6.0
    );
    assert_eq!(
        value(
            &text,
            r#"model_runtime_execution_duration_seconds_count{ability="chat"}"#
        ),
        3.0
    );
    // Every attempt asked for a permit: its wait is counted; none was refused.
    assert_eq!(
        value(
            &text,
            r#"model_runtime_queue_wait_seconds_count{provider="scripted",priority="standard"}"#
        ),
        3.0
    );
    assert_eq!(
        value(
            &text,
            r#"model_runtime_queue_wait_seconds_count{provider="flaky",priority="standard"}"#
        ),
        2.0
    );
    assert_eq!(
        value(
            &text,
            r#"model_runtime_admission_rejections_total{provider="scripted"}"#
        ),
        0.0
    );
    assert_eq!(value(&text, r#"model_runtime_state{state="ready"}"#), 1.0);
    assert_eq!(
        value(&text, r#"model_runtime_state{state="stopping"}"#),
        0.0
    );
    assert_eq!(value(&text, "model_runtime_store_executions"), 3.0);
    assert_eq!(value(&text, "model_runtime_store_evictions_total"), 2.0);
    assert_eq!(value(&text, "model_runtime_open_streams"), 1.0);
    // Output came from the echo three times; the flaky target never sent any.
    assert_eq!(
        value(
            &text,
            r#"model_runtime_time_to_first_output_seconds_count{provider="scripted"}"#
        ),
        3.0
    );
    // Every attempt's duration: three that succeeded, two that failed.
    assert_eq!(
        value(
            &text,
            r#"model_runtime_attempt_duration_seconds_count{provider="scripted"}"#
        ),
        3.0
    );
    assert_eq!(
        value(
            &text,
            r#"model_runtime_attempt_duration_seconds_count{provider="flaky"}"#
        ),
        2.0
    );
    assert_eq!(
        value(
            &text,
            r#"model_runtime_time_to_first_output_seconds_count{provider="flaky"}"#
        ),
        0.0
    );
    // A memory store's appends never wait, so they are not timed.
    assert!(!text.contains("store_append"), "{text}");
    assert_eq!(
        value(
            &text,
            r#"model_runtime_admission_in_flight{provider="scripted"}"#
        ),
        0.0
    );
    // No execution id, prompt or request label is ever a label value.
    assert!(
        !text.contains("ex_") && !text.contains("three more"),
        "{text}"
    );

    // Each duration lies in one bucket; the last, +Inf, counts them all.
    assert_eq!(
        value(
            &text,
            r#"model_runtime_execution_duration_seconds_bucket{le="+Inf",ability="chat"}"#
        ),
        3.0
    );

    let other = get(metrics_addr, "/").await;
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");

    drop(open);
    let mut closed = f64::NAN;
    for _ in 0..100 {
        let text = get(metrics_addr, "/metrics").await;
        closed = value(&text, "model_runtime_open_streams");
        if closed == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        closed, 0.0,
        "a stream the client let go is no longer counted"
    );
}

#[tokio::test]
async fn a_durable_store_times_its_appends() {
    const KEY_ENV: &str = "MODEL_RUNTIME_TEST_STORE_KEY";
    let dir = tempfile::tempdir().unwrap();
    let key = "0".repeat(64);
    let config = echo()
        .metrics_listen("127.0.0.1:0")
        .file_store(dir.path().to_str().unwrap(), KEY_ENV)
        .build_with_env(&|name| (name == KEY_ENV).then(|| key.clone()))
        .unwrap();
    let (mut c, metrics_addr) = serve(config).await;
    let events = execute(&mut c, request("chat", "kept on disk")).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");

    // The append is timed when its future completes, just after the client can see the
    // events it made durable: scrape until the count shows it.
    let mut appends = 0.0;
    for _ in 0..100 {
        let text = get(metrics_addr, "/metrics").await;
        appends = value(&text, "model_runtime_store_append_duration_seconds_count");
        if appends >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The driver appends in batches: an echo's whole execution may be one.
    assert!(appends >= 1.0, "{appends} appends timed");
}

#[tokio::test]
async fn without_metrics_listen_nothing_is_counted_or_served() {
    let runtime = Runtime::new(echo().build().unwrap()).unwrap();
    assert_eq!(runtime.metrics_text(), None);
    let metrics = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_addr = metrics.local_addr().unwrap();
    tokio::spawn(server::serve_metrics(
        runtime,
        metrics,
        std::future::pending(),
    ));
    let text = get(metrics_addr, "/metrics").await;
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
    assert!(text.contains("server.metrics_listen"), "{text}");
}

#[tokio::test]
async fn every_series_is_made_at_start_and_described_as_it_is_measured() {
    let (_c, metrics_addr) = serve(echo().metrics_listen("127.0.0.1:0").build().unwrap()).await;
    let text = get(metrics_addr, "/metrics").await;
    // Every unit an adapter of this version reports has its series before any fact: none
    // takes the locked path of a unit made on first use.
    for unit in [
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "cache_write_input_tokens",
        "reasoning_tokens",
        "requests",
    ] {
        assert_eq!(
            value(
                &text,
                &format!(
                    r#"model_runtime_usage_units_total{{provider="scripted",model="echo",unit="{unit}"}}"#
                )
            ),
            0.0
        );
    }
    // Time to first output is timed from the request being sent, not from acceptance.
    let help = text
        .lines()
        .find(|l| l.starts_with("# HELP model_runtime_time_to_first_output_seconds"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        help.contains("request being sent") && !help.contains("acceptance"),
        "{help}"
    );
}
