//! The real binary: `serve` on the embedded default config, `exec` against it in readable and
//! `--json` modes, and a clean exit 0 on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_model-runtime");
const WAIT: Duration = Duration::from_secs(20);

/// Kills the child on drop, so a failing test leaks no process.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits for `child` to exit, at most `limit`; polling because std has no timed wait.
fn wait_for(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Starts `serve --listen 127.0.0.1:0` and learns its port from the startup log line. The
/// rest of stderr keeps being drained so the server never blocks on a full pipe.
fn start_server() -> (Guard, String) {
    let child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut guard = Guard(child);
    let stderr = guard.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("model-runtime serving") {
                let addr = line
                    .split_whitespace()
                    .find_map(|word| word.strip_prefix("addr="))
                    .map(str::to_owned);
                let _ = tx.send(addr);
            }
        }
    });
    let addr = rx
        .recv_timeout(WAIT)
        .expect("the server logs its address")
        .expect("the log line has addr=");
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    (guard, addr)
}

/// Runs the binary to completion, at most [`WAIT`].
fn run(args: &[&str]) -> Output {
    let mut child = Guard(
        Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start exec"),
    );
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.0.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.0.stderr.take().unwrap()));
    let status = wait_for(&mut child.0, WAIT).expect("exec finishes");
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

#[test]
fn exec_against_serve_then_sigterm_exits_cleanly() {
    let (mut server, addr) = start_server();

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
    let (_server, addr) = start_server();
    let out = run(&["exec", "--addr", &addr, "--ability", "nope", "hi"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ability"), "stderr: {stderr}");
}
