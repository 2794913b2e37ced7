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

/// `serve --log-format json` on the config `text`: the server, its address, and each line
/// it logs after `model-runtime serving`, parsed (a line that is not JSON fails the test).
fn json_server(text: &str) -> (Guard, String, std::sync::mpsc::Receiver<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, text).unwrap();
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
    let serving = rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap();
    assert_eq!(serving["message"], "model-runtime serving", "{serving}");
    let addr = serving["addr"].as_str().unwrap().to_owned();
    // The server reads its config at start: the file may go now.
    drop(dir);
    (server, addr, rx)
}

#[test]
fn a_warning_during_an_attempt_names_its_execution_and_attempt() {
    let (_server, addr, rx) = json_server(UNREACHABLE);
    let limit = std::time::Duration::from_secs(20);
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

/// `server.access_log = true`: one line per call at its end, under `model_runtime::access`,
/// with the method, the execution, the status, the duration and the tokens.
#[test]
fn the_access_log_has_a_line_per_call() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config/default.toml"),
    )
    .unwrap()
    .replace("[server]\n", "[server]\naccess_log = true\n");
    assert!(text.contains("access_log = true"));
    let (_server, addr, rx) = json_server(&text);
    let limit = std::time::Duration::from_secs(20);
    let out = common::process::run(
        &[
            "exec",
            "--addr",
            &addr,
            "--ability",
            "chat",
            "--json",
            "four words of text",
        ],
        limit,
    );
    assert!(out.status.success());
    let id = serde_json::from_str::<serde_json::Value>(
        String::from_utf8_lossy(&out.stdout).lines().next().unwrap(),
    )
    .unwrap()["execution_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let got = common::process::run(&["get", &id, "--addr", &addr], limit);
    assert!(got.status.success());
    let missing = common::process::run(&["get", "nope", "--addr", &addr], limit);
    assert_eq!(missing.status.code(), Some(2));
    let access: Vec<serde_json::Value> = std::iter::from_fn(|| rx.recv_timeout(limit).ok())
        .filter(|line| line["message"] == "access")
        .take(3)
        .collect();
    let [execute, get, refused] = &access[..] else {
        panic!("{access:?}")
    };
    assert_eq!(execute["method"], "Execute", "{execute}");
    assert_eq!(execute["execution_id"], id.as_str());
    assert_eq!(execute["status"], "Ok");
    assert_eq!(execute["state"], "succeeded");
    assert_eq!(execute["input_tokens"], 4);
    assert_eq!(execute["output_tokens"], 4);
    assert!(execute["duration_ms"].is_u64(), "{execute}");
    assert_eq!(get["method"], "GetExecution", "{get}");
    assert_eq!(get["output_tokens"], 4);
    assert_eq!(refused["method"], "GetExecution", "{refused}");
    assert_eq!(refused["status"], "InvalidArgument");
}
