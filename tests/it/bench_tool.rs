//! The real `bench` binary, bounded by an execution count: against an in-process server on
//! loopback, and against its own bare tonic baseline. Each prints one JSON object as the last
//! line of stdout with throughput, latency percentiles in microseconds and errors by code.

use crate::common;

use std::time::Duration;

use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);
/// accepted, routing, attempt started, 16 text deltas, 2 usage facts, completed.
const EVENTS_PER_EXECUTION: u64 = 3 + 16 + 2 + 1;

/// Runs `bench` with `args` off the async runtime (the server runs on it) and returns the
/// JSON object on the last line of stdout.
async fn bench(args: &[&str]) -> Value {
    let args: Vec<String> = std::iter::once("bench")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect();
    let out = tokio::task::spawn_blocking(move || common::process::run(&args, WAIT))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("some output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {last}"))
}

fn assert_clean_run(report: &Value, executions: u64) {
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    assert_eq!(report["executions"], executions, "{report}");
    assert_eq!(report["succeeded"], executions, "{report}");
    assert_eq!(
        report["events"],
        executions * EVENTS_PER_EXECUTION,
        "{report}"
    );
    assert!(report["executions_per_sec"].as_f64().unwrap() > 0.0);
    assert!(report["events_per_sec"].as_f64().unwrap() > 0.0);
    for latency in ["ttfo_us", "ttc_us"] {
        assert_eq!(report[latency]["count"], executions, "{latency}");
        let p = |key: &str| report[latency][key].as_f64().unwrap();
        assert!(p("p50") > 0.0, "{latency}: {report}");
        assert!(p("p50") <= p("p90") && p("p90") <= p("p99") && p("p99") <= p("p999"));
    }
}

#[tokio::test]
async fn bench_against_a_server_reports_json() {
    let server = common::start(common::echo()).await;
    let addr = server.addr.to_string();
    let report = bench(&[
        "--addr",
        &addr,
        "--executions",
        "50",
        "--concurrency",
        "4",
        "--json",
    ])
    .await;
    assert_eq!(report["mode"], "server");
    assert_eq!(report["concurrency"], 4);
    assert_clean_run(&report, 50);
    assert!(report["start_lag_us"].is_null(), "closed loop: no schedule");

    // Open loop: the same, on a schedule, with the lag against it reported.
    let report = bench(&[
        "--addr",
        &addr,
        "--executions",
        "20",
        "--rate",
        "400",
        "--json",
    ])
    .await;
    assert_clean_run(&report, 20);
    assert_eq!(report["start_lag_us"]["count"], 20);
    server.stop().await;
}

#[tokio::test]
async fn bench_baseline_reports_json() {
    let report = bench(&[
        "--baseline",
        "--deltas",
        "16",
        "--executions",
        "50",
        "--json",
    ])
    .await;
    assert_eq!(report["mode"], "baseline");
    assert_eq!(report["deltas"], 16);
    assert_clean_run(&report, 50);
}

#[tokio::test]
async fn bench_against_nothing_fails_cleanly() {
    let out = tokio::task::spawn_blocking(|| {
        common::process::run(
            &["bench", "--addr", "127.0.0.1:1", "--executions", "1"],
            WAIT,
        )
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot connect"), "{stderr}");
}

/// `bench` on a request the server refuses says why once and exits 2, before any load; a
/// run in which every call failed exits 1 and says so, its errors by key with the reason.
#[tokio::test]
async fn a_refused_request_or_a_run_of_failures_is_not_a_success() {
    let server = common::start(common::echo()).await;
    let addr = server.addr.to_string();
    let run =
        |args: Vec<String>| tokio::task::spawn_blocking(move || common::process::run(&args, WAIT));
    let args = |more: &[&str]| -> Vec<String> {
        ["bench", "--addr", &addr, "--executions", "1000"]
            .iter()
            .chain(more)
            .map(|s| (*s).to_owned())
            .collect()
    };
    let out = run(args(&["--ability", "nope"])).await.unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the server refused the request"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown ability `nope`"), "{stderr}");
    assert!(out.stdout.is_empty(), "no run: {out:?}");
    server.stop().await;

    let server = common::start(common::hanging().drain_timeout(Duration::from_millis(200))).await;
    let addr = server.addr.to_string();
    let args: Vec<String> = [
        "bench",
        "--addr",
        &addr,
        "--executions",
        "4",
        "--timeout",
        "100ms",
        "--json",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let out = run(args).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("every one of the 4 calls failed"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["errors"]["client:timeout"], 4, "{report}");
    server.stop().await;
}
