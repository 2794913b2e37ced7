//! What `serve` logs as it starts, the real binary: "serving" only once it serves (a start
//! that fails never said it), and the start-up compaction that re-seals a journal under a
//! rotated key says so, as the README's key rotation offers it as the proof.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::process::{BIN, Guard, run, wait_for};

const LIMIT: Duration = Duration::from_secs(20);
const OLD: (&str, &str) = (
    "STARTUP_LOGS_OLD_KEY",
    "1111111111111111111111111111111111111111111111111111111111111111",
);
const NEW: (&str, &str) = (
    "STARTUP_LOGS_NEW_KEY",
    "2222222222222222222222222222222222222222222222222222222222222222",
);

/// `serve` on `config` with `env`, and every line it writes to stderr as it writes it.
fn serve(config: &std::path::Path, env: &[(&str, &str)]) -> (Guard, mpsc::Receiver<String>) {
    let mut child = Guard(
        Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server"),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// The lines up to the one that says the server is serving, and its address.
fn until_serving(lines: &mpsc::Receiver<String>) -> (Vec<String>, String) {
    let mut before = Vec::new();
    loop {
        let line = lines
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("no `serving` line after {before:?}"));
        if line.contains("model-runtime serving") {
            let addr = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("addr="))
                .unwrap()
                .to_owned();
            return (before, addr);
        }
        before.push(line);
    }
}

fn file_store(dir: &std::path::Path, name: &str, keys: &str) -> std::path::PathBuf {
    let config = dir.join(format!("{name}.toml"));
    let text = format!(
        r#"
[store]
kind = "file"
path = "{}"
keys = [{keys}]

[providers.scripted]
adapter = "scripted"
[[providers.scripted.models]]
name = "echo"
capabilities = ["text"]

[policies.default]
targets = ["scripted/echo"]

[abilities.chat]
policy = "default"
"#,
        dir.join("store").display()
    );
    std::fs::write(&config, text).unwrap();
    config
}

#[test]
fn a_rotated_key_is_taken_up_by_a_compaction_the_log_names() {
    let dir = tempfile::tempdir().unwrap();
    let old_only = file_store(dir.path(), "old", &format!(r#"{{ env = "{}" }}"#, OLD.0));
    let (mut server, lines) = serve(&old_only, &[OLD]);
    let (before, addr) = until_serving(&lines);
    assert!(
        !before.iter().any(|l| l.contains("compacted")),
        "an empty journal has nothing to compact: {before:?}"
    );
    let out = run(
        &["exec", "--addr", &addr, "--ability", "chat", "kept"],
        LIMIT,
    );
    assert!(out.status.success(), "{out:?}");
    let pid = server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert!(wait_for(&mut server.0, LIMIT).unwrap().success());

    let rotated = file_store(
        dir.path(),
        "rotated",
        &format!(r#"{{ env = "{}" }}, {{ env = "{}" }}"#, NEW.0, OLD.0),
    );
    let (_server, lines) = serve(&rotated, &[NEW, OLD]);
    let (before, _) = until_serving(&lines);
    assert!(
        before.iter().any(|l| l.contains("compacted the journal")),
        "{before:?}"
    );
}

#[test]
fn a_start_that_fails_never_said_it_was_serving() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_store(dir.path(), "broken", &format!(r#"{{ env = "{}" }}"#, OLD.0));
    // The store's directory is a file: the store cannot open.
    std::fs::write(dir.path().join("store"), "not a directory").unwrap();
    let (mut server, lines) = serve(&config, &[OLD]);
    let status = wait_for(&mut server.0, LIMIT).expect("the start fails");
    assert!(!status.success());
    let said: Vec<String> = lines.iter().collect();
    assert!(said.iter().any(|l| l.contains("cannot start")), "{said:?}");
    assert!(!said.iter().any(|l| l.contains("serving")), "{said:?}");
}
