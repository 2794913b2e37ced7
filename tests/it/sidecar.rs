//! Sidecar mode: `serve --listen unix:/path` serves the same API on a Unix domain socket,
//! created with mode 0660 and removed at shutdown; `exec`, `health` and `bench` reach it
//! with `--addr unix:/path`.

use crate::common;

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

/// `serve --listen unix:PATH` on what is already at PATH; its exit code and stderr.
fn serve_on(socket: &std::path::Path) -> (Option<i32>, String) {
    let out = run(
        &["serve", "--listen", &format!("unix:{}", socket.display())],
        LIMIT,
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_file_that_is_not_a_socket_is_never_taken() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("journal-1.seg");
    std::fs::write(&file, b"acknowledged records").unwrap();
    let (code, stderr) = serve_on(&file);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is not a socket"), "{stderr}");
    assert_eq!(std::fs::read(&file).unwrap(), b"acknowledged records");

    // Nor through a symlink: neither the link nor what it points to is touched.
    let link = dir.path().join("mr.sock");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let (code, stderr) = serve_on(&link);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(std::fs::read(&file).unwrap(), b"acknowledged records");
}

#[test]
fn only_a_socket_whose_connect_is_refused_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("mr.sock");

    // A live server whose accept backlog is full: a connect is not refused but would block
    // (EAGAIN). It is not taken over.
    let live = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
    live.bind(&socket2::SockAddr::unix(&socket).unwrap())
        .unwrap();
    live.listen(0).unwrap();
    let mut waiting = Vec::new();
    loop {
        let client =
            socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
        client.set_nonblocking(true).unwrap();
        match client.connect(&socket2::SockAddr::unix(&socket).unwrap()) {
            Ok(()) => waiting.push(client),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("filling the backlog: {e}"),
        }
        assert!(waiting.len() < 1000, "the backlog never filled");
    }
    let (code, stderr) = serve_on(&socket);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("may be in use"), "{stderr}");
    // The live server still has its socket: a waiting connection is accepted on it.
    assert!(live.accept().is_ok());
    drop((live, waiting));

    // Its server gone, the file stays; a connect is refused, so a new server takes it.
    assert!(socket.exists());
    let listen = format!("unix:{}", socket.display());
    let (mut server, _) = start_serve(&["serve", "--listen", &listen], &[], LIMIT);
    let health = run(&["health", "--addr", &listen], LIMIT);
    assert!(health.status.success(), "{health:?}");

    // At its stop it removes the path only if it is still its socket.
    std::fs::remove_file(&socket).unwrap();
    std::fs::write(&socket, b"put here since").unwrap();
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
    assert_eq!(std::fs::read(&socket).unwrap(), b"put here since");
}
