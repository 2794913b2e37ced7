//! `--log-format json`: every line the server logs is one JSON object, with the event's
//! fields beside `timestamp`, `level` and `message` (what a log pipeline indexes).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

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
