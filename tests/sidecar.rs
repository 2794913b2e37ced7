//! Sidecar mode: `serve --listen unix:/path` serves the same API on a Unix domain socket,
//! created with mode 0660 and removed at shutdown; `exec`, `health` and `bench` reach it
//! with `--addr unix:/path`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use common::process::{run, start_serve, wait_for};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_unix_socket_serves_the_whole_api_and_goes_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("model-runtime.sock");
    let listen = format!("unix:{}", socket.display());
    let (mut server, addr) = start_serve(&["serve", "--listen", &listen], &[], LIMIT);
    assert_eq!(addr, listen);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o660, "{mode:o}");

    // A full execution over the socket.
    let exec = run(
        &[
            "exec",
            "--addr",
            &addr,
            "--ability",
            "chat",
            "hello sidecar world",
        ],
        LIMIT,
    );
    assert!(exec.status.success(), "{exec:?}");
    assert_eq!(
        String::from_utf8_lossy(&exec.stdout).trim(),
        "hello sidecar world"
    );
    let health = run(&["health", "--addr", &addr], LIMIT);
    assert!(health.status.success(), "{health:?}");
    let bench = run(
        &[
            "bench",
            "--addr",
            &addr,
            "--executions",
            "50",
            "--concurrency",
            "4",
            "--json",
        ],
        LIMIT,
    );
    assert!(bench.status.success(), "{bench:?}");
    let stdout = String::from_utf8_lossy(&bench.stdout);
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["executions"], 50, "{report}");

    // A second server on the same socket is refused while the first answers on it.
    let second = run(&["serve", "--listen", &listen], LIMIT);
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    assert!(socket.exists());

    let pid = server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = wait_for(&mut server.0, LIMIT).expect("the server stops");
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "the socket file is removed at shutdown");
}
