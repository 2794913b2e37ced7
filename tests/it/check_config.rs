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
            .contains(": ok (1 providers, 1 policies, 1 abilities)"),
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
    // What is shown is itself a config that passes.
    let effective = stdout.split_once('\n').unwrap().1;
    let (code, _, stderr) = check(effective, &[("CHECK_CONFIG_TEST_KEY", secret)]);
    assert_eq!(code, Some(0), "{stderr}\n{effective}");
}

#[test]
fn a_config_without_an_ability_is_refused() {
    let without = MINIMAL.split("[abilities.chat]").next().unwrap();
    let (code, _, stderr) = check(without, &[("CHECK_CONFIG_TEST_KEY", "k")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("abilities: "), "{stderr}");
    let (code, _, stderr) = check("", &[]);
    assert_eq!(code, Some(2), "an empty file serves nothing: {stderr}");
    assert!(stderr.contains("abilities: "), "{stderr}");
}

#[test]
fn timeouts_on_a_scripted_provider_are_refused() {
    let text = r#"
[providers.scripted]
adapter = "scripted"
timeouts = { first_byte = "5s" }
[[providers.scripted.models]]
name = "echo"

[policies.default]
targets = ["scripted/echo"]

[abilities.chat]
policy = "default"
"#;
    let (code, _, stderr) = check(text, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("providers.scripted.timeouts: does not apply to the `scripted` adapter"),
        "{stderr}"
    );
}
