//! The real binary as a child process: run to completion within a bound, or a `serve` whose
//! address is read from its start-up log. Every child is killed on drop, so a failing test
//! leaks no process.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// The `model-runtime` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_model-runtime");

/// Kills the child on drop.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits for `child` to exit, at most `limit`; polling because std has no timed wait.
pub fn wait_for(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs the binary with `args` to completion, failing the test after `limit`.
pub fn run<S: AsRef<OsStr>>(args: &[S], limit: Duration) -> Output {
    run_env(args, &[], limit)
}

/// [`run`] with variables set in the binary's environment.
pub fn run_env<S: AsRef<OsStr>>(args: &[S], env: &[(&str, &str)], limit: Duration) -> Output {
    let mut child = Guard(
        Command::new(BIN)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the binary"),
    );
    // Both pipes are drained while it runs, so it never blocks on a full one.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.0.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.0.stderr.take().unwrap()));
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    let status = wait_for(&mut child.0, limit)
        .unwrap_or_else(|| panic!("{shown:?} did not finish within {limit:?}"));
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// Starts `serve --listen 127.0.0.1:0` on the embedded default and learns its address from
/// the start-up log line. The rest of stderr keeps being drained so the server never blocks.
pub fn start_server(limit: Duration) -> (Guard, String) {
    start_server_with(&[], limit)
}

/// [`start_server`] with more arguments to `serve` (a `--config FILE`).
pub fn start_server_with(extra: &[&str], limit: Duration) -> (Guard, String) {
    start_server_env(extra, &[], limit)
}

/// [`start_server_with`] with variables set in the server's environment.
pub fn start_server_env(extra: &[&str], env: &[(&str, &str)], limit: Duration) -> (Guard, String) {
    let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    start_serve(&args, env, limit)
}

/// The binary run with `args` (a `serve ...`) and `env`; its address, from its log.
pub fn start_serve(args: &[&str], env: &[(&str, &str)], limit: Duration) -> (Guard, String) {
    address_of(spawn_serve(args, env), limit)
}

/// The binary run with `args` and `env`, logging at `info` to a pipe.
fn spawn_serve(args: &[&str], env: &[(&str, &str)]) -> Guard {
    let child = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    Guard(child)
}

/// The address a starting `serve` (its stderr piped) logs; the rest of stderr keeps being
/// drained so the server never blocks.
pub fn address_of(guard: Guard, limit: Duration) -> (Guard, String) {
    let (guard, addr, _) = read_log(guard, limit, false);
    (guard, addr)
}

/// What a `serve` child has written to stderr so far, line by line: the evidence a test shows
/// when the server does not do what it should.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The lines so far that contain `text`.
    pub fn matching(&self, text: &str) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|line| line.contains(text))
            .collect()
    }

    /// The last `n` lines, one per line, for a failure message.
    pub fn tail(&self, n: usize) -> String {
        let lines = self.lines();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// [`start_serve`] that also keeps every line the server logs.
pub fn start_serve_logged(
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> (Guard, String, Log) {
    read_log(spawn_serve(args, env), limit, true)
}

/// The address a starting `serve` logs, from a thread that drains its stderr for as long as
/// it runs (and, if `keep`, keeps each line in the [`Log`]).
fn read_log(mut guard: Guard, limit: Duration, keep: bool) -> (Guard, String, Log) {
    let stderr = guard.0.stderr.take().unwrap();
    let log = Log::default();
    let kept = log.clone();
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
            if keep {
                kept.0.lock().unwrap().push(line);
            }
        }
    });
    let addr = rx
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the server logs its address; it logged:\n{}", log.tail(50)))
        .expect("the log line has addr=");
    assert!(
        addr.starts_with("127.0.0.1:") || addr.starts_with("unix:"),
        "{addr}"
    );
    (guard, addr, log)
}
