//! `--log-format json`: every line the server logs is one JSON object, with the event's
//! fields beside `timestamp`, `level` and `message` (what a log pipeline indexes).

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::process::{BIN, Guard};

#[test]
fn json_logs_are_one_object_per_line_with_the_events_fields() {
    let mut server = Guard(
        Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server"),
    );
    let stderr = server.0.stderr.take().unwrap();
    let first = BufReader::new(stderr).lines().next().unwrap().unwrap();
    let line: serde_json::Value =
        serde_json::from_str(&first).unwrap_or_else(|e| panic!("not a JSON object ({e}): {first}"));
    assert_eq!(line["level"], "INFO", "{line}");
    assert_eq!(line["message"], "model-runtime serving", "{line}");
    assert!(
        line["addr"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{line}"
    );
    assert!(line["timestamp"].is_string(), "{line}");
}

/// A provider at a loopback port where nothing listens: each attempt fails to connect.
const UNREACHABLE: &str = r#"
[providers.down]
adapter = "openai"
base_url = "http://127.0.0.1:9/v1"
[[providers.down.models]]
name = "m"
capabilities = ["text"]

[policies.default]
targets = ["down/m"]
max_attempts = 2
retries_per_target = 1
backoff = "1ms"

[abilities.chat]
policy = "default"
"#;

#[test]
fn a_warning_during_an_attempt_names_its_execution_and_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, UNREACHABLE).unwrap();
    let mut server = Guard(
        Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"])
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server"),
    );
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let stderr = server.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let parsed = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"));
            if tx.send(parsed).is_err() {
                break;
            }
        }
    });
    let limit = std::time::Duration::from_secs(20);
    let serving = rx.recv_timeout(limit).unwrap();
    let addr = serving["addr"].as_str().unwrap().to_owned();
    let out = common::process::run(
        &["exec", "--addr", &addr, "--ability", "chat", "--json", "hi"],
        limit,
    );
    assert_eq!(out.status.code(), Some(1), "the execution fails");
    let id = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .unwrap()["execution_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Both attempts' connection failures, each with its execution and attempt.
    let mut attempts = Vec::new();
    while attempts.len() < 2 {
        let line = rx.recv_timeout(limit).expect("the attempts' warnings");
        if line["level"] == "WARN" {
            assert_eq!(line["execution_id"], id.as_str(), "{line}");
            attempts.push(line["attempt"].as_u64().unwrap_or_else(|| panic!("{line}")));
        }
    }
    assert_eq!(attempts, [1, 2]);
}
