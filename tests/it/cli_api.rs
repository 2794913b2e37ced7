//! The CLI covers the whole API against a real server: `submit` starts an execution, `watch`
//! follows it (resuming a stream cut by a server restart), `get`, `cancel` and `metadata`
//! print what the server answers (readable, or with `--json` in protobuf's canonical JSON);
//! Ctrl-C, a real SIGINT, on `exec` cancels its execution, or with `--detach` leaves it running.
//! Exit codes: 0 done, 1 failed (or no server), 2 refused as invalid, 130 interrupted.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::{BIN, Guard, run, start_server_with, wait_for};

const WAIT: Duration = Duration::from_secs(20);

/// A scripted model slow enough to interrupt: a word every 200 ms.
const SLOW: &str = r#"
[providers.scripted]
adapter = "scripted"
[[providers.scripted.models]]
name = "echo"
capabilities = ["text", "streaming"]
[[providers.scripted.models]]
name = "slow"
capabilities = ["text", "streaming"]
script = { chunk = "word", delta_interval_ms = 200 }

[policies.default]
targets = ["scripted/echo", "scripted/slow"]

[abilities.chat]
policy = "default"
"#;

const LONG_PROMPT: &str = "one two three four five six seven eight nine ten eleven twelve \
                           thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";

fn slow_server() -> (Guard, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, SLOW).unwrap();
    let (server, addr) = start_server_with(&["--config", config.to_str().unwrap()], WAIT);
    (server, addr, dir)
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Starts the slow model on a long prompt with `submit`: the execution's id.
fn submit_slow(addr: &str) -> String {
    let submitted = run(
        &[
            "submit",
            "--addr",
            addr,
            "--ability",
            "chat",
            "--target",
            "scripted/slow",
            LONG_PROMPT,
        ],
        WAIT,
    );
    assert!(submitted.status.success(), "{submitted:?}");
    stdout(&submitted)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// The state `get --json` reports for `id`.
fn state(addr: &str, id: &str) -> String {
    let out = run(&["get", id, "--addr", addr, "--json"], WAIT);
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    json["state"].as_str().unwrap().to_owned()
}

#[test]
fn submit_watch_get_cancel_and_metadata_cover_the_api() {
    let (_server, addr, _dir) = slow_server();
    let submitted = run(
        &[
            "submit",
            "--addr",
            &addr,
            "--ability",
            "chat",
            "--json",
            "hello api",
        ],
        WAIT,
    );
    assert!(submitted.status.success(), "{submitted:?}");
    let execution: serde_json::Value = serde_json::from_str(&stdout(&submitted)).unwrap();
    let id = execution["executionId"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ex_"), "{execution}");

    // Followed to its end, from the start and from a sequence.
    let watched = run(&["watch", &id, "--addr", &addr], WAIT);
    assert!(watched.status.success(), "{watched:?}");
    assert_eq!(stdout(&watched).trim(), "hello api");
    assert!(
        stderr(&watched).contains("execution.completed"),
        "{watched:?}"
    );
    let later = run(
        &["watch", &id, "--addr", &addr, "--json", "--after", "3"],
        WAIT,
    );
    let sequences: Vec<u64> = stdout(&later)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["sequence"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(sequences.first(), Some(&4), "{later:?}");

    // Read back, readable and as buf curl prints it.
    let got = run(&["get", &id, "--addr", &addr], WAIT);
    assert!(got.status.success(), "{got:?}");
    let text = stdout(&got);
    assert!(text.starts_with(&format!("{id} succeeded\n")), "{text}");
    assert!(text.contains("attempt 1 on scripted/echo"), "{text}");
    assert_eq!(state(&addr, &id), "EXECUTION_STATE_SUCCEEDED");

    // A finished execution is left as it is; an unknown one is the caller's mistake (2).
    let cancelled = run(&["cancel", &id, "--addr", &addr], WAIT);
    assert!(cancelled.status.success(), "{cancelled:?}");
    assert!(stdout(&cancelled).starts_with(&format!("{id} succeeded")));
    let unknown = format!("ex_{}", "0".repeat(32));
    let missing = run(&["get", &unknown, "--addr", &addr], WAIT);
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    assert!(stderr(&missing).contains("NotFound"), "{missing:?}");

    // A running one is cancelled, with its reason.
    let id = submit_slow(&addr);
    let cancelled = run(
        &["cancel", &id, "--addr", &addr, "--reason", "enough"],
        WAIT,
    );
    assert!(cancelled.status.success(), "{cancelled:?}");
    assert_eq!(state(&addr, &id), "EXECUTION_STATE_CANCELLED");

    let metadata = run(&["metadata", "--addr", &addr], WAIT);
    assert!(metadata.status.success(), "{metadata:?}");
    let text = stdout(&metadata);
    assert!(text.contains("provider scripted (scripted)"), "{text}");
    assert!(text.contains("ability chat: policy default"), "{text}");
    let metadata = run(&["metadata", "--addr", &addr, "--json"], WAIT);
    let json: serde_json::Value = serde_json::from_str(&stdout(&metadata)).unwrap();
    assert_eq!(json["state"], "RUNTIME_STATE_READY");

    // No server there: 1, with what to do.
    let nobody = run(&["metadata", "--addr", "127.0.0.1:1"], WAIT);
    assert_eq!(nobody.status.code(), Some(1), "{nobody:?}");
    assert!(
        stderr(&nobody).contains("is `model-runtime serve` running there?"),
        "{nobody:?}"
    );
}

/// `exec` started with `extra` arguments, stopped by a real SIGINT once its attempt has
/// started: its exit status, stdout and stderr, and the execution's id.
fn interrupted_exec(addr: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec![
        "exec",
        "--addr",
        addr,
        "--ability",
        "chat",
        "--target",
        "scripted/slow",
    ];
    args.extend_from_slice(extra);
    args.push(LONG_PROMPT);
    let mut child = Guard(
        Command::new(BIN)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let mut lines = BufReader::new(child.0.stderr.take().unwrap()).lines();
    let mut err = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        err.push_str(&line);
        err.push('\n');
        if line.contains("route.attempt.started") {
            break;
        }
    }
    let pid = child.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    for line in lines {
        err.push_str(&line.unwrap());
        err.push('\n');
    }
    let status = wait_for(&mut child.0, WAIT).expect("exec ends after Ctrl-C");
    (status.code(), out.join().unwrap(), err)
}

#[test]
fn ctrl_c_on_exec_cancels_its_execution_unless_detached() {
    let (_server, addr, _dir) = slow_server();
    let (code, _, err) = interrupted_exec(&addr, &[]);
    assert_eq!(code, Some(130), "{err}");
    let id = err
        .split_whitespace()
        .find(|w| w.starts_with("ex_"))
        .unwrap()
        .to_owned();
    assert!(err.contains(&format!("cancelling {id}")), "{err}");
    // Its end is shown, and the server has it cancelled: no provider keeps working on it.
    assert!(err.contains("execution.failed cancelled"), "{err}");
    assert_eq!(state(&addr, &id), "EXECUTION_STATE_CANCELLED");

    let (code, _, err) = interrupted_exec(&addr, &["--detach"]);
    assert_eq!(code, Some(130), "{err}");
    let id = err
        .split_whitespace()
        .find(|w| w.starts_with("ex_"))
        .unwrap()
        .to_owned();
    assert!(err.contains("it goes on"), "{err}");
    assert!(err.contains(&format!("model-runtime cancel {id}")), "{err}");
    // It runs on to its end.
    let watched = run(&["watch", &id, "--addr", &addr], WAIT);
    assert!(watched.status.success(), "{watched:?}");
    assert_eq!(state(&addr, &id), "EXECUTION_STATE_SUCCEEDED");
}

/// A file store, so a restarted server still has the execution: `watch` resumes from the
/// last event it printed when the server comes back on the same address.
#[test]
fn watch_resumes_across_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let key = "ab".repeat(32);
    std::fs::write(
        &config,
        format!(
            "{SLOW}\n[store]\nkind = \"file\"\npath = \"{}\"\nkey_env = \"TEST_STORE_KEY\"\n",
            dir.path().join("journal").display()
        ),
    )
    .unwrap();
    let env = [("TEST_STORE_KEY", key.as_str())];
    let serve = |listen: &str| {
        common::process::start_serve(
            &[
                "serve",
                "--listen",
                listen,
                "--config",
                config.to_str().unwrap(),
            ],
            &env,
            WAIT,
        )
    };
    let (mut server, addr) = serve("127.0.0.1:0");
    let id = submit_slow(&addr);
    let mut watch = Command::new(BIN)
        .args(["watch", &id, "--addr", &addr, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(watch.stdout.take().unwrap()).lines();
    // A few words in, the server is killed and started again on the same address.
    let mut seen = Vec::new();
    for line in events.by_ref() {
        let event: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let delta = event["type"] == "output.text.delta";
        seen.push(event);
        if delta {
            break;
        }
    }
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let (_server, again) = serve(&addr);
    assert_eq!(again, addr);
    for line in events {
        seen.push(serde_json::from_str(&line.unwrap()).unwrap());
    }
    let status = wait_for(&mut watch, WAIT).expect("watch ends");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut watch.stderr.take().unwrap(), &mut err).unwrap();
    // Every event once, in order, to the end the restart gave it.
    let sequences: Vec<u64> = seen
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (1..=sequences.len() as u64).collect();
    assert_eq!(sequences, expected, "{err}");
    assert_eq!(seen.last().unwrap()["type"], "execution.failed", "{err}");
    assert!(err.contains("resuming"), "{err}");
    assert_eq!(status.code(), Some(1), "it failed: {err}");
}

/// `--version` names the commit; `completions SHELL` writes a script that knows the commands.
#[test]
fn the_version_names_its_commit_and_completions_know_the_commands() {
    let out = run(&["--version"], WAIT);
    let version = stdout(&out);
    assert!(
        version.starts_with(&format!(
            "model-runtime {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{version}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell], WAIT);
        assert!(out.status.success(), "{out:?}");
        let script = stdout(&out);
        for command in ["watch", "cancel", "check-config", "names-only"] {
            assert!(script.contains(command), "{shell}: no {command}");
        }
    }
}
