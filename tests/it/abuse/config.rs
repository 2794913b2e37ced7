//! An attack through the config file: durations and counts past what time arithmetic or
//! memory can take are refused by `check-config` and by `serve`, naming the key, before
//! anything runs.

use std::time::Duration;

use crate::common::process::run;

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"

[store]
kind = "memory"

[providers.scripted]
adapter = "scripted"

[[providers.scripted.models]]
name = "echo"
capabilities = ["text"]

[policies.default]
targets = ["scripted/echo"]
KEY

[abilities.chat]
policy = "default"
"#;

/// Runs `check-config` and `serve` on the config with `line` in its policy; both must refuse
/// it with code 2 and a message naming `key`.
fn refused(line: &str, key: &str) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), CONFIG.replace("KEY", line)).unwrap();
    let path = file.path().to_str().unwrap();
    for args in [vec!["check-config", path], vec!["serve", "--config", path]] {
        let output = run(&args, Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(key),
            "{args:?} does not name {key}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_retry_budget_of_three_hundred_billion_years() {
    refused(
        r#"retry_budget = "300000000000y""#,
        "policies.default.retry_budget",
    );
}

#[test]
fn a_backoff_past_what_time_can_count() {
    refused(
        r#"backoff = "18446744073709551615s""#,
        "policies.default.backoff",
    );
}

#[test]
fn a_hundred_thousand_attempts() {
    refused("max_attempts = 100000", "policies.default.max_attempts");
}
