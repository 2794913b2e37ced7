//! The real binary: `serve` on the embedded default config, `exec` against it in readable and
//! `--json` modes, and a clean exit 0 on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

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
