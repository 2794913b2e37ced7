//! The real binary: `serve` on the embedded default config, `exec` against it in readable and
//! `--json` modes, and a clean exit 0 on SIGTERM.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::process::{start_server, wait_for};

const WAIT: Duration = Duration::from_secs(20);

/// Runs the binary to completion, at most [`WAIT`].
fn run(args: &[&str]) -> std::process::Output {
    common::process::run(args, WAIT)
}

#[test]
fn exec_against_serve_then_sigterm_exits_cleanly() {
    let (mut server, addr) = start_server(WAIT);

    let out = run(&[
        "exec",
        "--addr",
        &addr,
        "--ability",
        "chat",
        "hello from the cli",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exec failed: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("hello from the cli"), "stdout: {stdout}");

    let out = run(&[
        "exec",
        "--addr",
        &addr,
        "--ability",
        "chat",
        "--json",
        "hello as json",
    ]);
    assert!(out.status.success(), "exec --json failed: {:?}", out.status);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    assert!(events.len() >= 3, "{stdout}");
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    assert_eq!(events[0]["type"], "execution.accepted");
    assert_eq!(events.last().unwrap()["type"], "execution.completed");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "output.text.delta")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "hello as json");

    let pid = server.0.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let status = wait_for(&mut server.0, WAIT).expect("the server exits after SIGTERM");
    assert!(status.success(), "server exit status {status:?}");
}

#[test]
fn exec_with_a_bad_ability_exits_nonzero_and_names_the_field() {
    let (_server, addr) = start_server(WAIT);
    let out = run(&["exec", "--addr", &addr, "--ability", "nope", "hi"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ability"), "stderr: {stderr}");
}

/// The embedded default's `chat`, which may also run on `other`.
const TWO_POLICIES: &str = r#"
[providers.scripted]
adapter = "scripted"
[[providers.scripted.models]]
name = "echo"
capabilities = ["text"]

[policies.default]
targets = ["scripted/echo"]
[policies.other]
targets = ["scripted/echo"]
max_attempts = 1

[abilities.chat]
policy = "default"
allowed_policies = ["other"]
"#;

#[test]
fn exec_sends_the_policy_labels_and_deadline_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, TWO_POLICIES).unwrap();
    let (_server, addr) =
        common::process::start_server_with(&["--config", config.to_str().unwrap()], WAIT);
    let exec = |more: &[&str]| {
        let mut args = vec!["exec", "--addr", &addr, "--ability", "chat", "--json"];
        args.extend_from_slice(more);
        args.push("labelled and routed");
        run(&args)
    };

    let before = std::time::SystemTime::now();
    let out = exec(&[
        "--policy",
        "other",
        "--label",
        "tenant=acme",
        "--label",
        "team=a=b",
        "--deadline",
        "45s",
    ]);
    assert!(out.status.success(), "{out:?}");
    let accepted: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(accepted["data"]["policy"], "other", "{accepted}");
    assert_eq!(accepted["data"]["max_attempts"], 1, "{accepted}");
    let deadline =
        humantime::parse_rfc3339(accepted["data"]["deadline"].as_str().unwrap()).unwrap();
    let ahead = deadline.duration_since(before).unwrap();
    assert!(
        ahead >= Duration::from_secs(44) && ahead <= Duration::from_secs(46),
        "{ahead:?}"
    );
    // The labels are on the usage facts.
    let usage = run(&["usage", "--addr", &addr, "--idle", "1s"]);
    let fact: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&usage.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(fact["labels"]["tenant"], "acme", "{fact}");
    assert_eq!(fact["labels"]["team"], "a=b", "{fact}");

    // What the server refuses, it says why; what cannot be sent is refused before.
    let out = exec(&["--deadline", "1h"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("deadline"),
        "{out:?}"
    );
    let out = exec(&["--policy", "unknown"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("policy"),
        "{out:?}"
    );
    let out = exec(&["--label", "no-equals-sign"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--label"),
        "{out:?}"
    );
}

#[test]
fn every_command_that_dials_a_server_says_it_takes_a_unix_socket() {
    for command in [
        "exec", "submit", "watch", "get", "cancel", "metadata", "health", "bench", "usage",
    ] {
        let out = run(&[command, "--help"]);
        assert!(out.status.success(), "{command}: {out:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        // The `--addr` line and its description, up to the next option.
        let mut lines = help
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("--addr"));
        let first = lines
            .next()
            .unwrap_or_else(|| panic!("{command} has no --addr:\n{help}"));
        let rest: Vec<&str> = lines
            .take_while(|l| !l.trim_start().starts_with('-'))
            .collect();
        let paragraph = format!("{first}\n{}", rest.join("\n"));
        assert!(paragraph.contains("unix:"), "{command} --help:\n{help}");
    }
}
