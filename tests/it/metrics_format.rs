//! `GET /metrics` speaks the format a scraper asks for, and says which: OpenMetrics 1.0.0 to
//! one that asks for it first (Prometheus), the Prometheus text format 0.0.4 to any other.
//! Each body is read back by a real parser of the format its content type names (the
//! Prometheus Python client's two), which must find the same families with the same types.

use crate::common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use common::*;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use model_runtime::{Runtime, server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What Prometheus 2.x sends as `Accept` when it scrapes.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The answer to `GET /metrics` with `accept` (if any): its content type and its body.
async fn scrape(addr: std::net::SocketAddr, accept: Option<&str>) -> (String, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let accept = accept.map_or(String::new(), |a| format!("accept: {a}\r\n"));
    stream
        .write_all(format!("GET /metrics HTTP/1.1\r\nhost: x\r\n{accept}\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    within(stream.read_to_string(&mut response)).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let kind = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: "))
        .unwrap_or_else(|| panic!("no content-type in {head}"));
    (kind.to_owned(), body.to_owned())
}

/// A runtime that ran one execution, served over gRPC and its metrics on loopback: their
/// address.
async fn served() -> std::net::SocketAddr {
    let runtime = Runtime::new(echo().metrics_listen("127.0.0.1:0").build().unwrap()).unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let metrics = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = metrics.local_addr().unwrap();
    tokio::spawn(server::serve(runtime.clone(), grpc, std::future::pending()));
    tokio::spawn(server::serve_metrics(
        runtime,
        metrics,
        std::future::pending(),
    ));
    let mut c = ModelRuntimeClient::new(connect(&grpc_addr.to_string()).await);
    let events = execute(&mut c, request("chat", "counted once")).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    addr
}

/// Each family's name and type, as its `# TYPE` lines say.
fn declared(body: &str) -> BTreeMap<String, String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            (name.to_owned(), kind.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn prometheus_gets_openmetrics_and_everyone_else_the_0_0_4_format() {
    let addr = served().await;

    let (kind, body) = scrape(addr, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(
        kind,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(
        body.contains("# TYPE model_runtime_executions_started counter\n"),
        "{body}"
    );

    for accept in [None, Some("*/*"), Some("text/plain; version=0.0.4")] {
        let (kind, body) = scrape(addr, accept).await;
        assert_eq!(
            kind, "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}"
        );
        assert!(
            !body.contains("# EOF") && !body.contains("# UNIT"),
            "{body}"
        );
        // In 0.0.4 a family is named as its samples: a counter's end in `_total`.
        let families = declared(&body);
        assert_eq!(
            families["model_runtime_executions_started_total"], "counter",
            "{body}"
        );
        for line in body.lines().filter(|l| !l.starts_with('#')) {
            let sample = line.split(['{', ' ']).next().unwrap();
            let family = families
                .keys()
                .filter(|name| sample.starts_with(name.as_str()))
                .max_by_key(|name| name.len())
                .unwrap_or_else(|| panic!("{sample} belongs to no declared family"));
            let rest = &sample[family.len()..];
            let allowed: &[&str] = match families[family].as_str() {
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            assert!(allowed.contains(&rest), "{sample} in family {family}");
        }
    }
}

/// The families `python3` reads from `body` with the Prometheus client's parser of
/// `format` (`openmetrics` or `text`), name -> type; `None` when python3 or the client is
/// not installed.
fn parsed_by_python(format: &str, body: &str) -> Option<BTreeMap<String, String>> {
    const SCRIPT: &str = r#"
import json, sys
try:
    from prometheus_client.parser import text_string_to_metric_families as text
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
except ImportError:
    sys.exit(3)
parse = openmetrics if sys.argv[1] == "openmetrics" else text
print(json.dumps({f.name: f.type for f in parse(sys.stdin.read())}))
"#;
    let mut child = match Command::new("python3")
        .args(["-c", SCRIPT, format])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("skipped: python3 does not run ({e})");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    if output.status.code() == Some(3) {
        eprintln!(
            "skipped: the Prometheus Python client is not installed (pip install prometheus-client)"
        );
        return None;
    }
    assert!(
        output.status.success(),
        "the {format} parser refused the body: {}\n{body}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

#[tokio::test]
async fn each_body_reads_as_its_content_type_says_with_a_real_parser() {
    let addr = served().await;
    let (_, openmetrics) = scrape(addr, Some(PROMETHEUS_ACCEPT)).await;
    let (_, text) = scrape(addr, None).await;
    let Some(from_openmetrics) = parsed_by_python("openmetrics", &openmetrics) else {
        return;
    };
    let Some(from_text) = parsed_by_python("text", &text) else {
        return;
    };
    // Both parsers name a counter family without `_total`; the same families, typed.
    assert_eq!(from_text, from_openmetrics, "0.0.4:\n{text}");
    assert_eq!(from_text.len(), declared(&text).len());
    assert_eq!(from_text["model_runtime_executions_started"], "counter");
    assert!(
        from_text.values().all(|t| t != "untyped" && t != "unknown"),
        "{from_text:?}"
    );
}
