//! `model-runtime check-config`, the real binary: a config that passes prints every value in
//! effect (defaults filled in, never a secret's value); a config the server could not serve
//! a call on, or with a key its adapter does not use, fails with the key and the reason.

use crate::common;

use std::time::Duration;

use common::process::run_env;

const LIMIT: Duration = Duration::from_secs(20);

/// `check-config` on `text` with `env` set: exit code, stdout, stderr.
fn check(text: &str, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let out = run_env(&["check-config", file.to_str().unwrap()], env, LIMIT);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const MINIMAL: &str = r#"
[providers.openai]
adapter = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "CHECK_CONFIG_TEST_KEY"
proxy = "http://squid:proxy-very-secret@127.0.0.1:3128"
[[providers.openai.models]]
name = "gpt-4o-mini"
capabilities = ["text"]

[policies.default]
targets = ["openai/gpt-4o-mini"]
retry_budget = "1s"

[abilities.chat]
policy = "default"
"#;

#[test]
fn a_valid_config_is_shown_with_every_value_in_effect() {
    let secret = "sk-check-config-very-secret";
    let (code, stdout, stderr) = check(MINIMAL, &[("CHECK_CONFIG_TEST_KEY", secret)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout
            .lines()
            .next()
            .unwrap()
            .contains(": ok (1 providers, 1 policies, 1 abilities; secrets read)"),
        "{stdout}"
    );
    // Defaults the file leaves out, as they are in effect.
    for line in [
        "listen = \"127.0.0.1:50051\"",
        "drain_timeout = \"30s\"",
        "max_connections = 1024",
        "handshake_timeout = \"10s\"",
        "kind = \"memory\"",
        "retention = \"10m\"",
        "max_concurrency = 64",
        "max_tokens_field = \"max_completion_tokens\"",
        "max_attempts = 3",
        // Half a budget under two seconds.
        "min_attempt_time = \"500ms\"",
        "on_rejected = \"fallback\"",
        "api_key_env = \"CHECK_CONFIG_TEST_KEY\"",
        // A provider's admission and recovery, at their defaults.
        "queue_aging = \"2s\"",
        "on_unknown_outcome = \"stop\"",
        "[providers.openai.queues]",
        "interactive = 256",
        "[providers.openai.health]",
        "consecutive_failures = 3",
        "max_ejection = \"10s\"",
    ] {
        assert!(stdout.contains(line), "no `{line}` in\n{stdout}");
    }
    assert!(stdout.contains("first_byte = \"1m\""), "{stdout}");
    assert!(
        !stdout.contains(secret),
        "a secret's value is never shown:\n{stdout}"
    );
    assert!(
        !stdout.contains("proxy-very-secret") && !stdout.contains("squid"),
        "nor a proxy's credentials:\n{stdout}"
    );
    assert!(
        stdout.contains("proxy = \"http://REDACTED@127.0.0.1:3128/\""),
        "{stdout}"
    );
    assert!(!stdout.contains("retry_unknown_outcome"), "{stdout}");
    // What is shown, its first line included, is itself a config that passes, and what it
    // shows is the same again.
    assert!(stdout.starts_with("# "), "{stdout}");
    let (code, again, stderr) = check(&stdout, &[("CHECK_CONFIG_TEST_KEY", secret)]);
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    let effective = |text: &str| text.split_once('\n').unwrap().1.to_owned();
    assert_eq!(effective(&again), effective(&stdout));
}

/// The older `retry_unknown_outcome` is shown as the `on_unknown_outcome` it means.
#[test]
fn the_older_spelling_is_shown_by_its_current_name() {
    let text = MINIMAL.replace(
        "adapter = \"openai\"",
        "adapter = \"openai\"\nretry_unknown_outcome = true",
    );
    let (code, stdout, stderr) = check(&text, &[("CHECK_CONFIG_TEST_KEY", "k")]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("on_unknown_outcome = \"retry\""),
        "{stdout}"
    );
    assert!(!stdout.contains("retry_unknown_outcome"), "{stdout}");
}

/// For CI, where no secret is set: every secret checked by its name alone (variables unset,
/// files missing), nothing read; what is not a secret checked as ever.
#[test]
fn names_only_checks_a_config_without_its_secrets() {
    let text = format!(
        "{MINIMAL}
[providers.vertex]
adapter = \"vertex\"
project = \"p\"
location = \"us-east5\"
service_account_file = \"/nonexistent/vertex-key.json\"
limiter = {{ kind = \"redis\", url_env = \"CHECK_CONFIG_TEST_REDIS\" }}
[[providers.vertex.models]]
name = \"gemini-2.5-flash\"
capabilities = [\"text\"]

[store]
kind = \"postgres\"
url_env = \"CHECK_CONFIG_TEST_POSTGRES\"
"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, &text).unwrap();
    let file = file.to_str().unwrap();
    let out = run_env(&["check-config", "--names-only", file], &[], LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout
            .lines()
            .next()
            .unwrap()
            .contains("secrets checked by name only"),
        "{stdout}"
    );
    assert!(stdout.contains("service_account_file = \"/nonexistent/vertex-key.json\""));
    assert!(
        !stdout.contains("stand-in") && !stdout.contains("0000000000"),
        "{stdout}"
    );
    // Without it, the same file needs every secret.
    let out = run_env(&["check-config", file], &[], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // And what is not a secret is checked as ever.
    std::fs::write(
        dir.path().join("config.toml"),
        text.replace("us-east5", "us east"),
    )
    .unwrap();
    let out = run_env(&["check-config", "--names-only", file], &[], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("providers.vertex.location"));
}

/// `check-config FILE | head -c 1`: a reader that goes away ends it quietly. The file is
/// large enough that its output cannot all fit in the pipe before the reader has gone.
#[test]
fn a_reader_that_goes_away_is_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    let mut text = MINIMAL.to_owned();
    for i in 0..600 {
        text.push_str(&format!(
            "[providers.p{i}]\nadapter = \"scripted\"\n[[providers.p{i}.models]]\nname = \"m\"\n"
        ));
    }
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{}' check-config '{}' | head -c 1 >/dev/null; echo \"${{PIPESTATUS[0]}}\"",
            common::process::BIN,
            file.display()
        ))
        .env("CHECK_CONFIG_TEST_KEY", "k")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "{stderr}");
}
